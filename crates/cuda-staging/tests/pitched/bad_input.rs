//! Bad 2-D input is an error naming the numbers, raised before any driver call, and
//! changes nothing: no pinned memory, no counter, no byte on either side. Empty
//! regions are no-ops; a panic in `fill` leaves the buffer and the ring usable.
//!
//! `Error::ContextMismatch` needs a second context, which the single-GPU test
//! machine cannot give, so it is not tested here (`region_2d.rs` raises it before
//! anything else).

use std::panic::{catch_unwind, AssertUnwindSafe};

use cuda_staging::{RingStats, StagingRing, StagingStats};

use super::*;

/// 4 rows of 17 f32 (68 bytes per row).
const W: usize = 17;
const H: usize = 4;

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn bad_pitches_and_short_host_slices_are_refused_and_change_nothing() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let mut ring = StagingRing::new();
    for kind in KINDS {
        let mut surface = Surface::<f32>::new(kind, W, H, &stream);
        let rows = rows_of(W * 4 * H, seed());
        surface.set_rows(&stream, &rows);
        let before = surface.bytes(&stream);
        let host_data: Vec<f32> = pattern(W * H * 3, seed());

        // A pitch shorter than a row.
        let too_small = |op| Error::PitchTooSmall {
            op,
            what: "the host rows",
            width: 17,
            elem_bytes: 4,
            row_bytes: 68,
            pitch_bytes: 64,
        };
        let e = with_region!(&mut surface, |r| staging
            .upload_2d(r, &host_data, 64, &stream));
        assert_eq!(e, Err(too_small("upload_2d")));
        assert_eq!(
            e.unwrap_err().to_string(),
            "upload_2d: the host rows: a pitch of 64 bytes is shorter than a row of 68 bytes \
             (17 elements of 4 bytes)"
        );
        let mut dst = host_data.clone();
        let e = with_region!(&mut surface, |r| staging
            .download_2d(&mut dst, 64, &*r, &stream));
        assert_eq!(e, Err(too_small("download_2d")));
        let e = with_region!(&mut surface, |r| ring.upload_2d(r, &host_data, 64, &stream));
        assert_eq!(e, Err(too_small("StagingRing::upload_2d")));

        // Host rows past the end of the host slice: 3 * 160 + 68 = 548 bytes in 544.
        let short: Vec<f32> = host_data[..136].to_vec();
        let past_end = |op| Error::RegionOutOfBounds {
            op,
            what: "the host rows",
            height: 4,
            row_bytes: 68,
            pitch_bytes: 160,
            span_bytes: 548,
            len_bytes: 544,
        };
        let e = with_region!(&mut surface, |r| staging.upload_2d(r, &short, 160, &stream));
        assert_eq!(e, Err(past_end("upload_2d")));
        assert_eq!(
            e.unwrap_err().to_string(),
            "upload_2d: the host rows: 4 rows of 68 bytes at a pitch of 160 bytes span 548 \
             bytes, but the memory holds 544"
        );
        let mut short_dst = short.clone();
        let e = with_region!(&mut surface, |r| staging.download_2d(
            &mut short_dst,
            160,
            &*r,
            &stream
        ));
        assert_eq!(e, Err(past_end("download_2d")));
        assert_eq!(
            short_dst, short,
            "{kind:?}: a refused download wrote the host slice"
        );
        let e = with_region!(&mut surface, |r| ring.upload_2d(r, &short, 160, &stream));
        assert_eq!(e, Err(past_end("StagingRing::upload_2d")));
        // ... and exactly long enough is fine (checked below, after the counters).

        // A pitch whose rows overflow a byte count.
        let e = with_region!(&mut surface, |r| staging.upload_2d(
            r,
            &host_data,
            usize::MAX / 2,
            &stream
        ))
        .unwrap_err();
        assert!(e.to_string().contains("overflow a byte count"), "{e}");

        // Nothing pinned, counted or moved.
        assert_eq!(
            staging.capacity(),
            0,
            "{kind:?}: a refused transfer pinned memory"
        );
        assert_eq!(staging.stats(), StagingStats::default(), "{kind:?}");
        assert_eq!(
            ring.capacity(),
            0,
            "{kind:?}: a refused ring transfer pinned memory"
        );
        assert_eq!(ring.stats(), RingStats::default(), "{kind:?}");
        assert_eq!(
            surface.bytes(&stream),
            before,
            "{kind:?}: the device changed"
        );
        assert_eq!(
            &dst, &host_data,
            "{kind:?}: a refused download wrote the host"
        );

        // The same calls with a host slice just long enough work.
        let mut exact = host_with::<f32>(
            &Layout2d::new::<f32>("test", "host", W, H, 160).unwrap(),
            0,
            &rows,
        );
        assert_eq!(exact.len(), 137, "548 bytes");
        with_region!(&mut surface, |r| staging.upload_2d(r, &exact, 160, &stream))
            .expect("an exactly long enough host slice");
        with_region!(&mut surface, |r| staging
            .download_2d(&mut exact, 160, &*r, &stream))
        .expect("an exactly long enough host slice");
        surface.check(&format!("{kind:?}: after the exact upload"), &stream, &rows);
        staging = staged_buffer();
    }
    stream.synchronize().expect("synchronize");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_ring_2d_ticket_copied_out_at_a_bad_pitch_is_refused_and_still_redeems() {
    let (_ctx, stream) = gpu();
    let mut ring = StagingRing::new();
    let mut surface = Surface::<f32>::new(Kind::Pitched, W, H, &stream);
    let rows = rows_of(W * 4 * H, seed());
    surface.set_rows(&stream, &rows);
    let t = with_region!(&mut surface, |r| ring.download_2d(&*r, &stream)).expect("download_2d");
    let mut dst = vec![0f32; 10];
    let e = ring
        .wait(&t)
        .and_then(|rows| rows.copy_to(&mut dst, 67))
        .unwrap_err();
    assert_eq!(
        e,
        Error::PitchTooSmall {
            op: "Rows::copy_to",
            what: "the host rows",
            width: 17,
            elem_bytes: 4,
            row_bytes: 68,
            pitch_bytes: 67
        }
    );
    let e = ring
        .wait(&t)
        .and_then(|rows| rows.copy_to(&mut dst, 68))
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::RegionOutOfBounds {
                span_bytes: 272,
                len_bytes: 40,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        dst.iter().all(|&v| v == 0.0),
        "a refused copy wrote the host"
    );
    check_packed(
        "the ticket after refused copies",
        ring.wait(&t).map(|rows| rows.as_slice()).expect("wait"),
        &rows,
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn empty_2d_regions_are_no_ops() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let mut ring = StagingRing::new();
    for (width, height) in [(0usize, 5usize), (5, 0), (0, 0)] {
        let what = format!("{width} x {height}");
        let mut d = PitchedBuffer::<f32>::alloc(width, height).expect("alloc");
        let pitch = width * 4 + 4;
        let host: Vec<f32> = pattern(3, seed());
        staging
            .upload_2d(&mut d, &host, pitch, &stream)
            .unwrap_or_else(|e| panic!("{what}: upload_2d: {e}"));
        let mut back = host.clone();
        staging
            .download_2d(&mut back, pitch, &d, &stream)
            .unwrap_or_else(|e| panic!("{what}: download_2d: {e}"));
        assert_eq!(back, host, "{what}: an empty download wrote the host");
        let mut calls = 0;
        staging
            .upload_2d_with(&mut d, &stream, |px: &mut [f32]| {
                calls += 1;
                assert!(px.is_empty());
            })
            .unwrap_or_else(|e| panic!("{what}: upload_2d_with: {e}"));
        assert_eq!(calls, 1, "{what}: fill is called once, with an empty slice");
        let got = staging
            .download_2d_into(&d, &stream)
            .expect("download_2d_into");
        assert!(got.is_empty(), "{what}");
        ring.upload_2d(&mut d, &host, pitch, &stream)
            .expect("ring upload_2d");
        ring.upload_2d_with(&mut d, &stream, |px: &mut [f32]| assert!(px.is_empty()))
            .expect("ring upload_2d_with");
        let t = ring.download_2d(&d, &stream).expect("ring download_2d");
        assert!(
            t.is_empty()
                && ring
                    .wait(&t)
                    .map(|rows| rows.as_slice())
                    .expect("wait")
                    .is_empty()
        );
        ring.wait(&t)
            .and_then(|rows| rows.copy_to(&mut back, pitch))
            .expect("wait, then Rows::copy_to");
        assert_eq!(back, host, "{what}: an empty ticket wrote the host");
    }
    assert_eq!(staging.capacity(), 0, "empty transfers pin nothing");
    assert_eq!(staging.stats(), StagingStats::default(), "nor count");
    assert_eq!(ring.capacity(), 0);
    assert_eq!(ring.stats(), RingStats::default());
    assert!(stream.query().expect("query"), "nothing was queued");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_panic_in_a_2d_fill_leaves_the_buffer_and_the_ring_usable() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let mut ring = StagingRing::new();
    let mut surface = Surface::<f32>::new(Kind::Pitched, 641, 3, &stream);
    let r = catch_unwind(AssertUnwindSafe(|| {
        with_region!(&mut surface, |r| staging.upload_2d_with(
            r,
            &stream,
            |_: &mut [f32]| panic!("fill failed")
        ))
    }));
    assert!(r.is_err(), "the panic propagates");
    let r = catch_unwind(AssertUnwindSafe(|| {
        with_region!(&mut surface, |r| ring.upload_2d_with(
            r,
            &stream,
            |_: &mut [f32]| panic!("fill failed")
        ))
    }));
    assert!(r.is_err(), "the panic propagates");
    surface.check("nothing was uploaded", &stream, &[]);
    let stats = staging.stats();
    assert_eq!((stats.staged_transfers, stats.bytes_uploaded), (0, 0));
    assert_eq!(ring.stats().uploads, 0);

    // Both still work.
    let rows = rows_of(641 * 4 * 3, seed());
    with_region!(&mut surface, |r| staging.upload_2d_with(
        r,
        &stream,
        |px: &mut [f32]| fill_rows(px, &rows)
    ))
    .expect("upload_2d_with after a panic");
    surface.check("after the buffer's panic", &stream, &rows);
    let rows = rows_of(641 * 4 * 3, seed());
    with_region!(&mut surface, |r| ring.upload_2d_with(
        r,
        &stream,
        |px: &mut [f32]| fill_rows(px, &rows)
    ))
    .expect("ring upload_2d_with after a panic");
    surface.check("after the ring's panic", &stream, &rows);
    ring.synchronize().expect("synchronize");
}
