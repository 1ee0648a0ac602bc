//! The copier's tests: how a copy is split over threads.

use super::*;

#[test]
fn threads_for_says_how_a_copy_is_split() {
    // A pool with no thread started: `threads_for` only reads the split, and
    // nothing is copied here.
    let pool = crate::pool::Pool::new(4, 0);
    let with = |threads, helpers| Copier::over(&pool, threads, helpers);
    // The caller alone: no pool, no helper, or a copy below PARALLEL_MIN_BYTES.
    assert_eq!(Copier::solo().threads_for(1 << 20), 1);
    assert_eq!(with(4, 0).threads_for(1 << 20), 1);
    assert_eq!(with(4, 3).threads_for(PARALLEL_MIN_BYTES - 1), 1);
    // Split: one thread per 16 KiB, at most `threads`, helpers as enlisted.
    assert_eq!(with(4, 3).threads_for(PARALLEL_MIN_BYTES), 4);
    assert_eq!(with(4, 3).threads_for(150_528), 4);
    assert_eq!(
        with(8, 3).threads_for(4_915_200),
        4,
        "three helpers at most"
    );
    assert_eq!(with(4, 1).threads_for(1 << 20), 2);
    assert_eq!(with(16, 15).threads_for(80 << 10), 5, "five 16 KiB parts");
}
