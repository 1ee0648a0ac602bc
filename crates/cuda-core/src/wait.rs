//! [`WaitPolicy`]: how a thread that waits for the GPU spends the wait.
//!
//! The driver's own waits (`cuStreamSynchronize`, and `cuEventSynchronize` on an
//! event created without `CU_EVENT_BLOCKING_SYNC`) spin the calling thread until the
//! GPU is done: the fastest way to notice the end of a short wait, and a core burnt
//! for the whole of a long one (a download queued behind a model's 3 s run spins for
//! 3 s). The driver's blocking wait (`cuEventSynchronize` on a blocking-sync event)
//! costs almost no CPU, but the thread comes back late.
//!
//! Measured on the 16-core H200 host: a 150528 B or 4915200 B `download_into`
//! queued behind about 0.9 or 3.5 ms of device copies, waits interleaved, 80 calls
//! each; p50 over spinning's, then the process's CPU per call (mean, µs). "Poll 50"
//! polled for 50 µs plus the transfer's own link time (4 or 123 µs) first.
//!
//! | wait | 0.9 ms, 150528 B | 0.9 ms, 4915200 B | 3.5 ms, 150528 B | 3.5 ms, 4915200 B |
//! |---|---|---|---|---|
//! | spin | 905 µs · 908 | 980 µs · 981 | 3536 µs · 3537 | 3629 µs · 3647 |
//! | the driver's blocking wait | +103 · 78 | +98 · 78 | +149 · 136 | +178 · 162 |
//! | poll 50, then the driver's blocking wait | +91 · 116 | +91 · 234 | +124 · 144 | +176 · 293 |
//! | poll 50, then sleep 20 µs between polls | +20 · 136 | +46 · 253 | +37 · 361 | +21 · 480 |
//! | poll 50, then sleep 50 µs between polls | +20 · 114 | +49 · 233 | +45 · 283 | +37 · 398 |
//! | sleep 20 µs between polls from the start | +21 · 82 | +17 · 92 | +38 · 311 | +23 · 315 |
//!
//! So [`WaitPolicy::Hybrid`], the default, polls for a bounded time and then polls
//! with [`POLL_SLEEP`] sleeps between: a wait that ends within the bound keeps the
//! spin's latency, and a longer one comes back within about a sleep of the GPU
//! finishing, for a few µs of CPU per sleep. [`WaitPolicy::Block`] is the driver's
//! blocking wait: the least CPU over very long waits, and a wake-up of 100-180 µs.

use std::time::{Duration, Instant};

use crate::error::Result;

/// How long [`WaitPolicy::default`] polls before it sleeps: long enough that a
/// short wait ends while polling (the staging calls of `cuda-staging` add the time
/// their own copies take on the link when nothing is queued ahead of them, so such
/// a transfer never sleeps), short against the waits worth sleeping through (a
/// model's run of a millisecond or more). `cargo xtask bench` measures what it costs
/// against a spinning wait (`pipeline-gpu-heavy` and `behind-work` in
/// `docs/measurements.md`).
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// How long a [`WaitPolicy::Hybrid`] wait sleeps between two polls once its spin is
/// over, at first (`std::thread::sleep`; with Linux's default 50 µs timer slack a
/// thread comes back about 70 µs later). See the module docs for what it costs. A
/// long wait sleeps longer: a 32nd of the time it has slept so far, up to
/// [`MAX_POLL_SLEEP`].
pub const POLL_SLEEP: Duration = Duration::from_micros(20);

/// The longest sleep between two polls of a [`WaitPolicy::Hybrid`] wait, reached
/// after about 32 ms of sleeping polls.
pub const MAX_POLL_SLEEP: Duration = Duration::from_millis(1);

/// The sleep before the next poll of a wait that has been sleeping between polls for
/// `slept`: [`POLL_SLEEP`], growing to a 32nd of `slept`, at most [`MAX_POLL_SLEEP`].
/// So a wait that ends comes back within about 3% of its length (or a
/// [`POLL_SLEEP`]) of the GPU finishing, and a long one polls about 32 times per
/// doubling of its length instead of every 70 µs: behind 20 ms of GPU work, a
/// sleeping wait on the simulator on a 2-core machine spent 33-41% of the wait in
/// CPU with the fixed sleep.
pub(crate) fn sleep_after(slept: Duration) -> Duration {
    (slept / 32).clamp(POLL_SLEEP, MAX_POLL_SLEEP)
}

/// How a thread waits for queued GPU work (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Poll until the work is done: the lowest latency, and a busy core for the
    /// whole wait.
    Spin,
    /// Sleep in the driver until the GPU signals completion (a stream's wait records
    /// a blocking-sync event and waits on it): the least CPU while waiting, and a
    /// wake-up of 100-180 µs on every wait. An [`crate::Event`]'s wait, and a wait
    /// for a per-thread stream's work on another thread than its own, whose events
    /// are not blocking-sync, poll with [`POLL_SLEEP`] sleeps between instead.
    Block,
    /// Poll for up to `spin`, then poll with [`POLL_SLEEP`] sleeps between.
    Hybrid {
        /// How long to poll before sleeping.
        spin: Duration,
    },
}

impl Default for WaitPolicy {
    /// [`WaitPolicy::Hybrid`] with [`DEFAULT_SPIN`].
    fn default() -> Self {
        WaitPolicy::Hybrid { spin: DEFAULT_SPIN }
    }
}

impl WaitPolicy {
    /// The same policy with `extra` more time to poll before sleeping (a
    /// [`WaitPolicy::Hybrid`] only): for a wait whose own work is known to take about
    /// `extra`.
    pub fn spinning_longer(self, extra: Duration) -> WaitPolicy {
        match self {
            WaitPolicy::Hybrid { spin } => WaitPolicy::Hybrid {
                spin: spin.saturating_add(extra),
            },
            other => other,
        }
    }
}

/// What a wait does once its policy's polling is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Then {
    /// The work is done.
    Done,
    /// Keep polling, sleeping between polls ([`sleep_until`]).
    Sleep,
    /// Block in the driver until it is done.
    Block,
    /// Keep to the driver's own spinning wait.
    Spin,
}

/// Polls `done` as `policy` says: [`WaitPolicy::Hybrid`] until it answers `true`
/// ([`Then::Done`]) or `spin` has passed ([`Then::Sleep`]); [`WaitPolicy::Block`]
/// not at all ([`Then::Block`]); [`WaitPolicy::Spin`] not at all either
/// ([`Then::Spin`]: the caller's own spinning wait follows). An error from `done`
/// ends the polling and is returned.
pub(crate) fn poll(policy: WaitPolicy, mut done: impl FnMut() -> Result<bool>) -> Result<Then> {
    let spin = match policy {
        WaitPolicy::Spin => return Ok(Then::Spin),
        WaitPolicy::Block => return Ok(Then::Block),
        WaitPolicy::Hybrid { spin } => spin,
    };
    let start = Instant::now();
    loop {
        if done()? {
            return Ok(Then::Done);
        }
        if start.elapsed() >= spin {
            return Ok(Then::Sleep);
        }
        std::hint::spin_loop();
    }
}

/// Polls `done` until it answers `true`, sleeping between polls as [`sleep_after`]
/// says; an error from `done` is returned.
pub(crate) fn sleep_until(mut done: impl FnMut() -> Result<bool>) -> Result<()> {
    let start = Instant::now();
    loop {
        if done()? {
            return Ok(());
        }
        std::thread::sleep(sleep_after(start.elapsed()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn sleeps_grow_with_the_wait_from_poll_sleep_to_the_cap() {
        let us = Duration::from_micros;
        assert_eq!(sleep_after(Duration::ZERO), POLL_SLEEP);
        assert_eq!(sleep_after(us(32 * 20)), POLL_SLEEP);
        assert_eq!(sleep_after(us(32 * 20 + 32)), us(21));
        assert_eq!(sleep_after(us(3_200)), us(100));
        assert_eq!(sleep_after(us(32_000)), MAX_POLL_SLEEP);
        assert_eq!(sleep_after(Duration::from_secs(3)), MAX_POLL_SLEEP);
    }

    #[test]
    fn spin_and_block_do_not_poll_and_hybrid_polls_until_done() {
        let never = || -> Result<bool> { panic!("polled") };
        assert_eq!(poll(WaitPolicy::Spin, never).unwrap(), Then::Spin);
        assert_eq!(poll(WaitPolicy::Block, never).unwrap(), Then::Block);
        let mut calls = 0;
        let hybrid = WaitPolicy::Hybrid {
            spin: Duration::from_secs(10),
        };
        let then = poll(hybrid, || {
            calls += 1;
            Ok(calls == 3)
        });
        assert_eq!(then.unwrap(), Then::Done);
        assert_eq!(calls, 3, "stops at the first `true`");
    }

    #[test]
    fn hybrid_sleeps_once_its_spin_has_passed_and_errors_end_the_polling() {
        let spin = Duration::from_millis(2);
        let start = Instant::now();
        let then = poll(WaitPolicy::Hybrid { spin }, || Ok(false)).unwrap();
        assert_eq!(then, Then::Sleep);
        assert!(start.elapsed() >= spin);
        let zero = WaitPolicy::Hybrid {
            spin: Duration::ZERO,
        };
        let mut calls = 0;
        assert_eq!(
            poll(zero, || {
                calls += 1;
                Ok(false)
            })
            .unwrap(),
            Then::Sleep
        );
        assert_eq!(calls, 1, "a zero spin still looks once");
        let e = poll(hybrid_secs(10), || {
            Err(Error::InvalidArgument {
                op: "test",
                reason: "x".into(),
            })
        });
        assert!(e.is_err());
    }

    #[test]
    fn sleeping_polls_until_done_and_errors_end_them() {
        let mut calls = 0;
        let start = Instant::now();
        sleep_until(|| {
            calls += 1;
            Ok(calls == 3)
        })
        .unwrap();
        assert_eq!(calls, 3);
        assert!(start.elapsed() >= POLL_SLEEP * 2, "slept between the polls");
        let e = sleep_until(|| {
            Err(Error::InvalidArgument {
                op: "test",
                reason: "x".into(),
            })
        });
        assert!(e.is_err());
    }

    #[test]
    fn spinning_longer_extends_only_a_hybrid() {
        let extra = Duration::from_micros(120);
        assert_eq!(
            WaitPolicy::default().spinning_longer(extra),
            WaitPolicy::Hybrid {
                spin: DEFAULT_SPIN + extra
            }
        );
        assert_eq!(WaitPolicy::Spin.spinning_longer(extra), WaitPolicy::Spin);
        assert_eq!(WaitPolicy::Block.spinning_longer(extra), WaitPolicy::Block);
        let forever = WaitPolicy::Hybrid {
            spin: Duration::MAX,
        };
        assert_eq!(forever.spinning_longer(extra), forever, "saturates");
    }

    fn hybrid_secs(s: u64) -> WaitPolicy {
        WaitPolicy::Hybrid {
            spin: Duration::from_secs(s),
        }
    }
}
