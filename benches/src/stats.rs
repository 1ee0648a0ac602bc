//! Statistics of timed samples: nearest-rank percentiles.

use std::time::Duration;

/// Nearest-rank percentile `p` (0 < p ≤ 100) of `sorted` (ascending): the value at
/// rank ⌈p/100 · n⌉, counted from 1. `None` for no samples.
pub fn nearest_rank(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    // p·n first: exact for whole percents, so the ceiling never sees a rounding error.
    let rank = (p * n as f64 / 100.0).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

/// The p50 and p99 of one cell's samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// Nearest-rank median.
    pub p50: Duration,
    /// Nearest-rank 99th percentile.
    pub p99: Duration,
    /// How many samples.
    pub samples: usize,
}

impl Summary {
    /// A summary with these p50 and p99 (µs), for tests of what reads summaries.
    #[cfg(test)]
    pub(crate) fn from_us(p50_us: u64, p99_us: u64, samples: usize) -> Summary {
        Summary {
            p50: Duration::from_micros(p50_us),
            p99: Duration::from_micros(p99_us),
            samples,
        }
    }

    /// Sorts `samples` and summarises them; `None` when there are none.
    pub fn of(samples: &mut [Duration]) -> Option<Summary> {
        samples.sort_unstable();
        Some(Summary {
            p50: nearest_rank(samples, 50.0)?,
            p99: nearest_rank(samples, 99.0)?,
            samples: samples.len(),
        })
    }

    /// The median in µs.
    pub fn p50_us(&self) -> f64 {
        self.p50.as_secs_f64() * 1e6
    }

    /// The 99th percentile in µs.
    pub fn p99_us(&self) -> f64 {
        self.p99.as_secs_f64() * 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&x| Duration::from_micros(x)).collect()
    }

    #[test]
    fn nearest_rank_picks_the_ceiling_rank() {
        let s = us(&(1..=100).collect::<Vec<_>>());
        assert_eq!(nearest_rank(&s, 50.0), Some(Duration::from_micros(50)));
        assert_eq!(nearest_rank(&s, 99.0), Some(Duration::from_micros(99)));
        assert_eq!(nearest_rank(&s, 100.0), Some(Duration::from_micros(100)));
        let s = us(&(1..=250).collect::<Vec<_>>());
        // ⌈0.99 · 250⌉ = 248: three samples above it.
        assert_eq!(nearest_rank(&s, 99.0), Some(Duration::from_micros(248)));
        assert_eq!(nearest_rank(&s, 50.0), Some(Duration::from_micros(125)));
        for n in [100u64, 200, 300, 1000, 1200] {
            let s = us(&(1..=n).collect::<Vec<_>>());
            assert_eq!(
                nearest_rank(&s, 99.0),
                Some(Duration::from_micros(n * 99 / 100)),
                "{n}"
            );
            assert_eq!(
                nearest_rank(&s, 50.0),
                Some(Duration::from_micros(n / 2)),
                "{n}"
            );
        }
        assert_eq!(
            nearest_rank(&us(&[7]), 99.0),
            Some(Duration::from_micros(7))
        );
        assert_eq!(
            nearest_rank(&us(&[7, 9]), 50.0),
            Some(Duration::from_micros(7))
        );
        assert_eq!(nearest_rank(&[], 50.0), None);
        assert_eq!(
            nearest_rank(&us(&[3, 4]), 0.0),
            Some(Duration::from_micros(3))
        );
    }

    #[test]
    fn summary_sorts_first() {
        let mut s = us(&[30, 10, 20, 1000, 40]);
        let sum = Summary::of(&mut s).unwrap();
        assert_eq!(sum.p50, Duration::from_micros(30));
        assert_eq!(sum.p99, Duration::from_micros(1000));
        assert_eq!(sum.samples, 5);
        assert!((sum.p50_us() - 30.0).abs() < 1e-9);
        assert!(Summary::of(&mut []).is_none());
    }
}
