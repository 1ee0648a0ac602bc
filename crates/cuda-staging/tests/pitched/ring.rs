//! The ring's 2-D forms: uploads queued without waiting (several frames in flight,
//! every slot reused), downloads redeemed packed in place or copied out to a pitch,
//! counted like the ring's 1-D transfers, and stale tickets refused.

use cuda_staging::{RingStats, StagingRing, Ticket2d};

use super::*;

fn ring_uploads_of<T: Pattern>(tag: &str) {
    let (_ctx, stream) = gpu();
    let mut ring = StagingRing::new();
    let frames = 2 * ring.config().slots + 1;
    for kind in KINDS {
        for width in WIDTHS {
            let height = 5;
            let what = format!("{tag} {kind:?}: {width} x {height}");
            let row = width * std::mem::size_of::<T>();
            let host = Layout2d::new::<T>("test", "host", width, height, row + 13).unwrap();
            let mut surfaces: Vec<Surface<T>> = (0..frames)
                .map(|_| Surface::new(kind, width, height, &stream))
                .collect();
            let mut expected = Vec::new();
            let before = ring.stats();
            // Every frame queued back to back, alternating the two forms; the ring
            // waits only for a slot it comes round to.
            for (k, surface) in surfaces.iter_mut().enumerate() {
                let rows = rows_of(row * height, seed());
                if k % 2 == 0 {
                    let mut src = host_with::<T>(&host, 0, &rows);
                    with_region!(surface, |r| ring.upload_2d(r, &src, row + 13, &stream))
                        .unwrap_or_else(|e| panic!("{what}: frame {k}: upload_2d: {e}"));
                    // `src` is free again at once: overwrite it while the DMA may
                    // still be queued.
                    bytemuck::cast_slice_mut::<T, u8>(&mut src).fill(0x11);
                } else {
                    with_region!(surface, |r| ring.upload_2d_with(
                        r,
                        &stream,
                        |px: &mut [T]| fill_rows(px, &rows)
                    ))
                    .unwrap_or_else(|e| panic!("{what}: frame {k}: upload_2d_with: {e}"));
                }
                expected.push(rows);
            }
            let after = ring.stats();
            assert_eq!(after.uploads - before.uploads, frames as u64, "{what}");
            assert_eq!(
                after.bytes_uploaded - before.bytes_uploaded,
                (frames * row * height) as u64,
                "{what}"
            );
            ring.synchronize().expect("synchronize");
            for (k, (surface, rows)) in surfaces.iter().zip(&expected).enumerate() {
                surface.check(&format!("{what}: frame {k}"), &stream, rows);
            }
        }
    }
    // Three slots, reused many times over, pinned once each.
    assert_eq!(
        ring.stats().allocations,
        ring.config().slots as u64,
        "{:?}",
        ring.stats()
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn ring_2d_uploads_land_every_frame_and_leave_padding_u8() {
    ring_uploads_of::<u8>("u8");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn ring_2d_uploads_land_every_frame_and_leave_padding_f32() {
    ring_uploads_of::<f32>("f32");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn ring_2d_uploads_land_every_frame_and_leave_padding_rgb() {
    ring_uploads_of::<[u8; 3]>("rgb");
}

fn ring_downloads_of<T: Pattern>(tag: &str) {
    let (_ctx, stream) = gpu();
    let mut ring = StagingRing::new();
    for kind in KINDS {
        for width in WIDTHS {
            for height in HEIGHTS {
                let what = format!("{tag} {kind:?}: {width} x {height}");
                let row = width * std::mem::size_of::<T>();
                let host = Layout2d::new::<T>(
                    "test",
                    "host",
                    width,
                    height,
                    row.next_multiple_of(64) + 64,
                )
                .unwrap();
                // As many downloads in flight as the ring has slots, then redeemed in
                // order: two packed, the others copied out to the host's pitch.
                let mut surfaces = Vec::new();
                let mut tickets: Vec<Ticket2d<T>> = Vec::new();
                let before = ring.stats();
                for _ in 0..ring.config().slots {
                    let rows = rows_of(row * height, seed());
                    let mut s = Surface::<T>::new(kind, width, height, &stream);
                    s.set_rows(&stream, &rows);
                    let t = with_region!(&mut s, |r| ring.download_2d(&*r, &stream))
                        .unwrap_or_else(|e| panic!("{what}: download_2d: {e}"));
                    assert_eq!((t.width(), t.height()), (width, height), "{what}");
                    assert_eq!(t.len(), width * height, "{what}");
                    tickets.push(t);
                    surfaces.push((s, rows));
                }
                let after = ring.stats();
                assert_eq!(
                    after.downloads - before.downloads,
                    ring.config().slots as u64
                );
                assert_eq!(
                    after.bytes_downloaded - before.bytes_downloaded,
                    (ring.config().slots * row * height) as u64
                );
                for (k, (t, (_, rows))) in tickets.iter().zip(&surfaces).enumerate() {
                    let what = format!("{what}: ticket {k}");
                    if k < 2 {
                        let got = ring
                            .wait(t)
                            .map(|rows| rows.as_slice())
                            .unwrap_or_else(|e| panic!("{what}: wait: {e}"));
                        check_packed(&what, got, rows);
                    } else {
                        let mut dst = host_with::<T>(&host, 1, &[]);
                        ring.wait(t)
                            .and_then(|rows| rows.copy_to(&mut dst, host.pitch_bytes()))
                            .unwrap_or_else(|e| panic!("{what}: wait, then Rows::copy_to: {e}"));
                        check_rows_and_padding(&what, bytemuck::cast_slice(&dst), &host, rows);
                    }
                    // Redeeming again gives the same rows (the slot is not reused yet).
                    check_packed(
                        &format!("{what}, again"),
                        ring.wait(t).map(|rows| rows.as_slice()).expect("wait"),
                        rows,
                    );
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn ring_2d_downloads_redeem_packed_or_at_a_pitch_u8() {
    ring_downloads_of::<u8>("u8");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn ring_2d_downloads_redeem_packed_or_at_a_pitch_f32() {
    ring_downloads_of::<f32>("f32");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn ring_2d_downloads_redeem_packed_or_at_a_pitch_rgb() {
    ring_downloads_of::<[u8; 3]>("rgb");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_2d_ticket_whose_slot_was_reused_is_refused() {
    let (_ctx, stream) = gpu();
    let mut ring = StagingRing::new();
    let mut surface = Surface::<u8>::new(Kind::Pitched, 641, 3, &stream);
    surface.set_rows(&stream, &rows_of(641 * 3, seed()));
    let first =
        with_region!(&mut surface, |r| ring.download_2d(&*r, &stream)).expect("download_2d");
    for _ in 0..ring.config().slots {
        let t =
            with_region!(&mut surface, |r| ring.download_2d(&*r, &stream)).expect("download_2d");
        ring.wait(&t).map(|rows| rows.as_slice()).expect("wait");
    }
    let e = ring.wait(&first).map(|rows| rows.as_slice()).unwrap_err();
    assert!(invalid_reason(e).contains("stale ticket"));
    let mut dst = vec![0u8; 700 * 3];
    let e = ring
        .wait(&first)
        .and_then(|rows| rows.copy_to(&mut dst, 700))
        .unwrap_err();
    assert!(invalid_reason(e).contains("stale ticket"));
    assert!(
        dst.iter().all(|&b| b == 0),
        "a refused ticket wrote the host"
    );
    assert_ne!(ring.stats(), RingStats::default());
}
