//! Seeded, reproducible delays: how long an operation waits before it executes.
//!
//! The delay of an operation is a function of the seed, of the stream it runs on and
//! of its place in that stream, and of nothing else: not of wall-clock time nor of
//! the order in which threads happen to run. A stream's key is taken from the name
//! of the thread that created it (libtest names each test's thread after the test)
//! and how many streams that thread had created before, so the same seed and the same
//! test give every operation the same delay again, whichever other tests run beside it.

use std::cell::Cell;
use std::time::Duration;

/// SplitMix64: a well-mixed 64-bit value from `x`.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A 64-bit hash of `s` (FNV-1a, then mixed).
pub fn hash_str(s: &str) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in s.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3);
    }
    mix(h)
}

thread_local! {
    static CREATED: Cell<u64> = const { Cell::new(0) };
}

/// A key for a stream created now by the calling thread.
pub fn stream_key(kind: &str) -> u64 {
    let n = CREATED.with(|c| {
        let n = c.get();
        c.set(n + 1);
        n
    });
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("unnamed");
    mix(hash_str(name) ^ hash_str(kind) ^ mix(n))
}

/// The delay of operation `seq` of the stream with `key`: uniform in
/// `0..=jitter_us` microseconds.
pub fn delay(seed: u64, key: u64, seq: u64, jitter_us: u64) -> Duration {
    if jitter_us == 0 {
        return Duration::ZERO;
    }
    let r = mix(mix(seed) ^ key ^ mix(seq.wrapping_mul(0xA24B_AED4_963E_E407)));
    Duration::from_micros(r % (jitter_us + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_replay_and_stay_in_range() {
        let a: Vec<_> = (0..100).map(|s| delay(7, 42, s, 300)).collect();
        let b: Vec<_> = (0..100).map(|s| delay(7, 42, s, 300)).collect();
        assert_eq!(a, b);
        assert!(a.iter().all(|d| *d <= Duration::from_micros(300)));
        assert!(a.iter().any(|d| *d != a[0]), "not constant");
        let other: Vec<_> = (0..100).map(|s| delay(8, 42, s, 300)).collect();
        assert_ne!(a, other, "the seed matters");
        assert_eq!(delay(7, 42, 1, 0), Duration::ZERO);
    }
}
