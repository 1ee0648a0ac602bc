//! Waking the copy pool's workers ahead of transfers: buffers register as clients,
//! tell the pool when they expect their next transfer and how many helpers it will
//! want ([`Client::expect`]), or ask for their helpers to stay hot (low-latency
//! mode, [`Client::keep_hot`]); the scheduler thread wakes the helpers [`LEAD`]
//! before a predicted transfer, and they spin until it comes or [`GRACE`] after the
//! predicted time. Clients only store atomics; the scheduler polls every [`POLL`]
//! while predictions are live, and parks when none is.

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Pool;
use crate::sync::{fence, AtomicU64, Ordering};

/// How long before a predicted transfer the scheduler wakes its helpers.
pub(crate) const LEAD: Duration = Duration::from_micros(300);
/// How long after the predicted time woken helpers wait for the transfer.
pub(crate) const GRACE: Duration = Duration::from_micros(500);
/// How often the scheduler looks for new predictions while transfers are arriving.
const POLL: Duration = Duration::from_millis(1);
/// With no prediction for this long, the scheduler parks until the next one.
const IDLE: Duration = Duration::from_millis(250);
/// Buffers that can hold a prediction at once; the rest simply get none.
pub(super) const MAX_CLIENTS: usize = 64;
/// A buffer's prediction of its next transfer.
#[repr(align(128))]
pub(super) struct ClientSlot {
    in_use: AtomicBool,
    /// Pool-clock nanoseconds of the predicted next transfer (0: none).
    next_at: AtomicU64,
    /// Helpers to wake for it.
    helpers: AtomicUsize,
    /// Low-latency mode: keep the helpers spinning until then (0: off).
    keep_hot_until: AtomicU64,
}

impl ClientSlot {
    pub(super) fn new() -> ClientSlot {
        ClientSlot {
            in_use: AtomicBool::new(false),
            next_at: AtomicU64::new(0),
            helpers: AtomicUsize::new(0),
            keep_hot_until: AtomicU64::new(0),
        }
    }
}

impl Pool {
    /// Registers a buffer for predictions; `None` when every slot is taken.
    pub(crate) fn join(self: &Arc<Self>) -> Option<Client> {
        let i = (0..self.clients.len()).find(|&i| {
            self.clients[i]
                .in_use
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })?;
        Some(Client {
            pool: Arc::clone(self),
            slot: i,
        })
    }

    pub(super) fn schedule(&self) {
        loop {
            if self.shutdown.load(Ordering::Acquire) {
                return;
            }
            let now = self.now_ns();
            let mut next_fire = u64::MAX;
            let mut recent = false;
            for (c, slot) in self.clients.iter().enumerate() {
                if !slot.in_use.load(Ordering::Acquire) {
                    continue;
                }
                let helpers = slot.helpers.load(Ordering::Acquire);
                let keep = slot.keep_hot_until.load(Ordering::Acquire);
                if keep > now {
                    recent = true;
                    self.heat(c, helpers, keep);
                }
                let at = slot.next_at.load(Ordering::Acquire);
                if at == 0 {
                    continue;
                }
                recent = true;
                let fire = at.saturating_sub(LEAD.as_nanos() as u64);
                if fire <= now {
                    let until = at + GRACE.as_nanos() as u64;
                    if now < until {
                        self.heat(c, helpers, until);
                    }
                    let _ =
                        slot.next_at
                            .compare_exchange(at, 0, Ordering::AcqRel, Ordering::Relaxed);
                } else {
                    next_fire = next_fire.min(fire);
                }
            }
            if next_fire == u64::MAX && !recent {
                // Announce the idle park, then look once more: a client that stored a
                // prediction before seeing the announcement is caught here, one that
                // stores after it sees it and unparks us (both sides SeqCst).
                self.scheduler_idle.store(true, Ordering::SeqCst);
                if !self.any_prediction() {
                    std::thread::park_timeout(IDLE);
                }
                self.scheduler_idle.store(false, Ordering::SeqCst);
            } else {
                let wait = next_fire
                    .saturating_sub(self.now_ns())
                    .min(POLL.as_nanos() as u64);
                if wait > 0 {
                    std::thread::park_timeout(Duration::from_nanos(wait));
                }
            }
        }
    }

    /// Whether any client holds a prediction or keeps its helpers hot.
    fn any_prediction(&self) -> bool {
        let now = self.now_ns();
        self.clients.iter().any(|c| {
            c.in_use.load(Ordering::SeqCst)
                && (c.next_at.load(Ordering::SeqCst) != 0
                    || c.keep_hot_until.load(Ordering::SeqCst) > now)
        })
    }

    /// Keeps `helpers` workers of client `c` spinning until `until` (pool clock),
    /// waking those that are parked.
    fn heat(&self, c: usize, helpers: usize, until: u64) {
        let n = self.workers.len();
        if n == 0 {
            return;
        }
        // Spread clients over the workers, so concurrent buffers wake different ones.
        let base = c * 7 % n;
        for k in 0..helpers.min(n) {
            let w = &self.workers[(base + k) % n];
            w.hot_until.fetch_max(until, Ordering::SeqCst);
            // Pairs with the fence in `Mailbox::announce_sleep`: either the worker
            // sees `hot_until`, or this sees it parking (see `mailbox.rs`).
            fence(Ordering::SeqCst);
            if w.mailbox.is_sleeping() {
                w.unpark();
            }
        }
    }
}

/// A buffer's registration with the pool, for predictions; released on drop.
pub(crate) struct Client {
    pool: Arc<Pool>,
    slot: usize,
}

impl Client {
    /// The next transfer is expected at `at` and will want `helpers` workers.
    pub(crate) fn expect(&self, at: Instant, helpers: usize) {
        let slot = &self.pool.clients[self.slot];
        slot.helpers.store(helpers, Ordering::Release);
        slot.next_at
            .store(self.pool.at(at).max(1), Ordering::SeqCst);
        self.nudge();
    }

    /// No transfer is expected.
    pub(crate) fn forget(&self) {
        self.pool.clients[self.slot]
            .next_at
            .store(0, Ordering::Release);
    }

    /// Low-latency mode: keep `helpers` workers spinning until `until`.
    pub(crate) fn keep_hot(&self, until: Instant, helpers: usize) {
        let slot = &self.pool.clients[self.slot];
        slot.helpers.store(helpers, Ordering::Release);
        slot.keep_hot_until
            .store(self.pool.at(until).max(1), Ordering::SeqCst);
        self.nudge();
    }

    /// Wakes the scheduler if it parked for lack of predictions (rare: the first
    /// transfer after a quiet spell).
    fn nudge(&self) {
        if self.pool.scheduler_idle.load(Ordering::SeqCst) {
            if let Some(t) = self.pool.scheduler.get() {
                t.unpark();
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let slot = &self.pool.clients[self.slot];
        slot.next_at.store(0, Ordering::Release);
        slot.keep_hot_until.store(0, Ordering::Release);
        slot.in_use.store(false, Ordering::Release);
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("slot", &self.slot).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::pool::tests::serial;

    /// Polls `f` every 100 µs for up to 2 s (room for a loaded machine).
    fn eventually(what: &str, f: impl Fn() -> bool) {
        let t = Instant::now();
        while !f() {
            assert!(t.elapsed() < Duration::from_secs(2), "never: {what}");
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    #[test]
    fn a_predicted_transfer_wakes_as_many_helpers_as_it_asked_for_ahead_of_time() {
        let _one_at_a_time = serial();
        let (pool, handles) = Pool::start(2).unwrap();
        let client = pool.join().expect("a client slot");
        eventually("both workers parked", || pool.awake() == 0);
        let wakes = |w: usize| pool.workers[w].wakes.load(Ordering::Relaxed);
        let (w0, w1) = (wakes(0), wakes(1));
        // The scheduler heats one worker, LEAD before the predicted time, until GRACE
        // after it. A scheduler kept off the CPU past GRACE (a loaded two-core CI
        // machine) rightly skips a stale prediction, so a few predictions are
        // offered; one of them must heat the worker, and none too early.
        let mut heated_once = false;
        for _attempt in 0..5 {
            let at = Instant::now() + Duration::from_millis(20);
            let heated = pool.at(at) + GRACE.as_nanos() as u64;
            client.expect(at, 1);
            std::thread::sleep(Duration::from_millis(10));
            // Read first: if the clock still says "before LEAD" afterwards, the read
            // was too (an oversleeping test thread skips the check).
            let seen = pool.workers[0].hot_until.load(Ordering::Relaxed);
            if Instant::now() < at - LEAD {
                assert_ne!(seen, heated, "heated before LEAD ahead of the prediction");
            }
            let deadline = at + GRACE + Duration::from_millis(50);
            while Instant::now() < deadline && !heated_once {
                heated_once = pool.workers[0].hot_until.load(Ordering::Relaxed) == heated;
                std::thread::sleep(Duration::from_micros(100));
            }
            if heated_once {
                break;
            }
        }
        assert!(heated_once, "no prediction of five heated a worker");
        eventually("the heated worker woke", || wakes(0) > w0);
        assert_eq!(
            pool.workers[1].hot_until.load(Ordering::Relaxed),
            0,
            "the other worker was not asked"
        );
        assert_eq!(wakes(1), w1, "nor woken");
        // With no transfer, it parks again.
        eventually("parked again", || pool.awake() == 0);
        drop(client);
        pool.stop(handles);
    }
}
