//! Test data: byte patterns that differ per position and per call, and the check
//! that names the first wrong byte.

/// Fills `buf` with a non-zero byte pattern that differs per position and per
/// `seed` (never all zeros, never constant).
pub fn fill_pattern(buf: &mut [u8], seed: u8) {
    for (i, b) in buf.iter_mut().enumerate() {
        // 1..=251: never zero; period 251 (prime) so it does not line up with pages.
        *b = ((i.wrapping_mul(131).wrapping_add(usize::from(seed) * 17)) % 251) as u8 + 1;
    }
}

/// `Ok` when `seen == expected`, else the first differing byte.
pub fn compare(seen: &[u8], expected: &[u8]) -> Result<(), String> {
    if seen.len() != expected.len() {
        return Err(format!(
            "{} bytes where {} were expected",
            seen.len(),
            expected.len()
        ));
    }
    match seen.iter().zip(expected).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(k) => Err(format!(
            "wrong data: byte {k} is {} but should be {} ({} of {} bytes differ)",
            seen[k],
            expected[k],
            seen.iter().zip(expected).filter(|(a, b)| a != b).count(),
            seen.len()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_never_zero_and_varies() {
        let mut a = vec![0u8; 10_000];
        fill_pattern(&mut a, 1);
        assert!(a.iter().all(|&b| b != 0));
        let mut b = vec![0u8; 10_000];
        fill_pattern(&mut b, 2);
        assert_ne!(a, b);
        assert_ne!(a[0], a[1]);
    }

    #[test]
    fn compare_names_the_first_wrong_byte() {
        assert!(compare(&[1, 2, 3], &[1, 2, 3]).is_ok());
        let e = compare(&[1, 9, 3, 8], &[1, 2, 3, 4]).unwrap_err();
        assert!(
            e.contains("byte 1 is 9 but should be 2 (2 of 4 bytes differ)"),
            "{e}"
        );
        assert!(compare(&[1], &[1, 2]).is_err());
    }
}
