//! [`WaitPolicy`]: how a thread that waits for the GPU spends the wait.
//!
//! The driver's own waits (`cuStreamSynchronize`, and `cuEventSynchronize` on an
//! event created without `CU_EVENT_BLOCKING_SYNC`) spin the calling thread until the
//! GPU is done. That is the fastest way to notice the end of a short wait, and a core
//! burnt for the whole of a long one: a download queued behind a model's 3 s run
//! spins for 3 s. Blocking (`cuEventSynchronize` on a `CU_EVENT_BLOCKING_SYNC`
//! event) costs no CPU while the GPU works, but the thread is woken by an interrupt
//! and a scheduler, which costs tens of µs on every wait, short ones included.
//!
//! [`WaitPolicy::Hybrid`], the default, polls for a bounded time and then blocks: a
//! wait that ends within the bound keeps the spin's latency, and a longer one costs
//! the bound in CPU plus the block's wake-up in latency.

use std::time::{Duration, Instant};

use crate::error::Result;

/// How long [`WaitPolicy::default`] polls before it blocks: long enough that a
/// short wait ends while polling (the staging calls of `cuda-staging` add the time
/// their own copies take on the link, so a transfer with nothing queued ahead of it
/// never blocks), short against the waits worth sleeping through (a model's run of
/// a millisecond or more). `cargo xtask bench` measures what it costs against a
/// spinning wait (`pipeline-gpu-heavy` and `behind-work` in `docs/measurements.md`).
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// How a thread waits for queued GPU work (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Poll until the work is done: the lowest latency, and a busy core for the
    /// whole wait.
    Spin,
    /// Sleep until the GPU signals completion: no CPU while waiting, and a wake-up
    /// of some µs on every wait.
    Block,
    /// Poll for up to `spin`, then block.
    Hybrid {
        /// How long to poll before blocking.
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
    /// The same policy with `extra` more time to poll before blocking (a
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
    /// Block until it is.
    Block,
    /// Keep to the driver's own spinning wait.
    Spin,
}

/// Polls `done` as `policy` says: [`WaitPolicy::Hybrid`] until it answers `true`
/// ([`Then::Done`]) or `spin` has passed ([`Then::Block`]); [`WaitPolicy::Block`]
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
            return Ok(Then::Block);
        }
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

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
    fn hybrid_blocks_once_its_spin_has_passed_and_errors_end_the_polling() {
        let spin = Duration::from_millis(2);
        let start = Instant::now();
        let then = poll(WaitPolicy::Hybrid { spin }, || Ok(false)).unwrap();
        assert_eq!(then, Then::Block);
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
            Then::Block
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
