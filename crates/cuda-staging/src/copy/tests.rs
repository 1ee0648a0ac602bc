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
