//! The host copies' tests: every byte lands at every alignment.

use super::*;

#[test]
fn both_copies_are_exact_at_every_alignment() {
    let src: Vec<u8> = (0..20_000u32).map(|i| (i * 31 + 7) as u8).collect();
    for &len in &[
        0usize, 1, 63, 64, 65, 4095, 4096, 4097, 10_000, 12_289, 19_000,
    ] {
        for so in [0usize, 1, 3, 17] {
            for dof in [0usize, 5, 48] {
                let mut dst = vec![0u8; 20_100];
                // SAFETY: offsets + len stay inside both Vecs, which are distinct.
                unsafe { copy(dst.as_mut_ptr().add(dof), src.as_ptr().add(so), len, true) };
                assert_eq!(&dst[dof..dof + len], &src[so..so + len]);
                assert!(dst[..dof].iter().all(|&b| b == 0));
                assert!(dst[dof + len..].iter().all(|&b| b == 0));
                let mut back = vec![0u8; len];
                // SAFETY: as above.
                unsafe { copy(back.as_mut_ptr(), dst.as_ptr().add(dof), len, false) };
                assert_eq!(back, &src[so..so + len]);
            }
        }
    }
}

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
    // `at_most` caps both.
    assert_eq!(with(16, 15).at_most(8).threads_for(1 << 20), 8);
}
