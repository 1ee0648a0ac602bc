//! What a transfer's span says before it runs (no GPU: the spans are opened by
//! hand, as `run` opens them; `tests/route_tracing.rs` checks real transfers).

#[cfg(feature = "tracing")]
#[test]
fn a_span_counts_the_threads_of_the_largest_copy_and_the_bytes_moved() {
    use super::*;
    use crate::pool::Pool;
    use crate::trace::tests::spans::{capture, transfers};
    use crate::StagingBuffer;

    let pool = Pool::new(4, 0);
    let copier = Copier::over(&pool, 4, 3);
    // A batch region of 66560 B: 1000 B at 0, 32 KiB at 1024 and at 33792. Its
    // parts move 66536 B, and its largest copy (32 KiB) is too small to split,
    // though the region as a whole would be split over four threads.
    let parts = [1000, 32 << 10, 32 << 10];
    let h2d = Direction::HostToDevice;
    let ((), spans) = capture(|| {
        let one = Move::new("upload_2d", h2d, 1 << 20).copied(copier);
        drop(one.span::<StagingBuffer>());
        let batch = Move {
            parts: &parts,
            ..Move::new("upload_batch", h2d, 66_560).copied(copier)
        };
        drop(batch.span::<StagingBuffer>());
        let none = Move::new("download_into", Direction::DeviceToHost, 1 << 20);
        drop(none.span::<StagingBuffer>());
    });
    let t = transfers(&spans);
    assert_eq!(t.len(), 3, "{spans:?}");
    // One tensor: its whole copy, 1 MiB over four threads.
    assert_eq!(t[0].str("route"), Some("staged"));
    assert_eq!(t[0].u64("copy_threads"), Some(4), "{:?}", t[0]);
    assert_eq!(t[0].u64("parts"), None, "{:?}", t[0]);
    // A batch: the bytes its parts move, and its largest copy's threads.
    assert_eq!(t[1].str("route"), Some("batched"));
    assert_eq!(t[1].u64("bytes"), Some(66_536), "{:?}", t[1]);
    assert_eq!(t[1].u64("parts"), Some(3), "{:?}", t[1]);
    assert_eq!(t[1].u64("copy_threads"), Some(1), "{:?}", t[1]);
    // No host copy of this crate's own.
    assert_eq!(t[2].u64("copy_threads"), Some(0), "{:?}", t[2]);
    assert_eq!(t[2].str("direction"), Some("d2h"));
}
