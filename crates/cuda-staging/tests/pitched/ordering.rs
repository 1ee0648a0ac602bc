//! Ordering against work already queued on the stream: a 2-D upload lands after it
//! (a memset of the destination queued behind 1 ms of copies must not overwrite the
//! rows), a 2-D download sees its results (the memset's value), on the buffer and on
//! the ring, with no synchronisation by the caller in between.

use cuda_staging::{StagingBuffer, StagingRing};

use super::*;

const VALUE_AFTER_BUSY: u8 = 0x5A;

/// Semantic 1: when a `StagingBuffer` 2-D call returns, nothing queued on its stream
/// is still running.
#[track_caller]
fn assert_stream_idle(what: &str, stream: &Stream) {
    assert!(
        stream.query().expect("Stream::query"),
        "{what}: the call returned while work on its stream was still running"
    );
}

/// Pins the buffer for `surface`'s rows, so the measured calls spend no time pinning
/// while the busy work runs.
fn warm(staging: &mut StagingBuffer, surface: &mut Surface<u8>, stream: &Stream) {
    with_region!(surface, |r| staging
        .download_2d_into(&*r, stream)
        .map(|_| ()))
    .expect("warm-up download_2d_into");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn buffer_2d_downloads_see_work_queued_before_them() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut staging = staged_buffer();
    for kind in KINDS {
        let (width, height) = (641, 300);
        let mut surface = Surface::<u8>::new(kind, width, height, &stream);
        warm(&mut staging, &mut surface, &stream);
        let host = Layout2d::new::<u8>("test", "host", width, height, 704).unwrap();
        for round in 0..2u8 {
            let what = format!("{kind:?}, round {round}");
            let value = VALUE_AFTER_BUSY ^ round;
            let expected = vec![value; width * height];

            surface.set_rows(&stream, &rows_of(width * height, seed()));
            busy.queue_one_way(&stream);
            surface.memset(&stream, value);
            let mut dst = host_with::<u8>(&host, 0, &[]);
            with_region!(&mut surface, |r| staging
                .download_2d(&mut dst, 704, &*r, &stream))
            .unwrap_or_else(|e| panic!("{what}: download_2d: {e}"));
            assert_stream_idle(&what, &stream);
            check_rows_and_padding(&format!("{what}: download_2d"), &dst, &host, &expected);

            surface.set_rows(&stream, &rows_of(width * height, seed()));
            busy.queue_one_way(&stream);
            surface.memset(&stream, value);
            let got = with_region!(&mut surface, |r| staging.download_2d_into(&*r, &stream))
                .unwrap_or_else(|e| panic!("{what}: download_2d_into: {e}"))
                .to_vec();
            assert_stream_idle(&what, &stream);
            check_packed(&format!("{what}: download_2d_into"), &got, &expected);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn buffer_2d_uploads_land_after_work_queued_before_them() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut staging = staged_buffer();
    for kind in KINDS {
        let (width, height) = (641, 300);
        let mut surface = Surface::<u8>::new(kind, width, height, &stream);
        warm(&mut staging, &mut surface, &stream);
        let host = Layout2d::new::<u8>("test", "host", width, height, 704).unwrap();
        for round in 0..2 {
            let what = format!("{kind:?}, round {round}");

            let rows = rows_of(width * height, seed());
            let src = host_with::<u8>(&host, 0, &rows);
            busy.queue_one_way(&stream);
            // Behind the busy work: would overwrite the rows if the upload ran first.
            surface.memset(&stream, SENTINEL);
            with_region!(&mut surface, |r| staging.upload_2d(r, &src, 704, &stream))
                .unwrap_or_else(|e| panic!("{what}: upload_2d: {e}"));
            assert_stream_idle(&what, &stream);
            surface.check(&format!("{what}: upload_2d"), &stream, &rows);

            let rows = rows_of(width * height, seed());
            busy.queue_one_way(&stream);
            surface.memset(&stream, SENTINEL);
            with_region!(&mut surface, |r| staging.upload_2d_with(
                r,
                &stream,
                |px: &mut [u8]| px.copy_from_slice(&rows)
            ))
            .unwrap_or_else(|e| panic!("{what}: upload_2d_with: {e}"));
            assert_stream_idle(&what, &stream);
            surface.check(&format!("{what}: upload_2d_with"), &stream, &rows);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn ring_2d_transfers_keep_stream_order() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut ring = StagingRing::new();
    let (width, height) = (641, 300);
    let mut surface = Surface::<u8>::new(Kind::Pitched, width, height, &stream);
    // Pin every slot first.
    for _ in 0..ring.config().slots {
        let t = with_region!(&mut surface, |r| ring.download_2d(&*r, &stream)).expect("warm-up");
        ring.wait(&t)
            .map(|rows| rows.as_slice())
            .expect("warm-up wait");
    }
    let host = Layout2d::new::<u8>("test", "host", width, height, 704).unwrap();
    for round in 0..2u8 {
        let what = format!("ring, round {round}");

        // A download queued behind a memset queued behind busy work sees the memset.
        let value = VALUE_AFTER_BUSY ^ round;
        busy.queue_one_way(&stream);
        surface.memset(&stream, value);
        let t = with_region!(&mut surface, |r| ring.download_2d(&*r, &stream))
            .unwrap_or_else(|e| panic!("{what}: download_2d: {e}"));
        let mut dst = host_with::<u8>(&host, 0, &[]);
        ring.wait(&t)
            .and_then(|rows| rows.copy_to(&mut dst, 704))
            .unwrap_or_else(|e| panic!("{what}: wait, then Rows::copy_to: {e}"));
        check_rows_and_padding(
            &format!("{what}: download_2d"),
            &dst,
            &host,
            &vec![value; width * height],
        );

        // Uploads queued behind a memset land after it, in the order queued.
        let (a, b) = (
            rows_of(width * height, seed()),
            rows_of(width * height, seed()),
        );
        let src = host_with::<u8>(&host, 0, &a);
        busy.queue_one_way(&stream);
        surface.memset(&stream, SENTINEL);
        with_region!(&mut surface, |r| ring.upload_2d(r, &src, 704, &stream))
            .unwrap_or_else(|e| panic!("{what}: upload_2d: {e}"));
        surface.check(&format!("{what}: upload_2d"), &stream, &a);
        busy.queue_one_way(&stream);
        surface.memset(&stream, SENTINEL);
        with_region!(&mut surface, |r| ring.upload_2d_with(
            r,
            &stream,
            |px: &mut [u8]| px.copy_from_slice(&b)
        ))
        .unwrap_or_else(|e| panic!("{what}: upload_2d_with: {e}"));
        surface.check(&format!("{what}: upload_2d_with"), &stream, &b);
    }
    ring.synchronize().expect("synchronize");
}
