//! A worker's mailbox: how a publisher enlists one particular worker for its job.
//!
//! Each worker watches only its own mailbox (in the worker's own 128-byte state,
//! which otherwise only an early wake-up writes, rarely), so a publication moves one
//! line per helper it enlists, between the publisher and that helper.
//! Workers that were not asked read nothing another core writes. (When every
//! spinning worker watched a shared "jobs published" word and fought for seats in
//! the job, back-to-back 150528 B uploads on the 16-core H200 host took 22.9 µs
//! against 13.6 µs with per-worker slots.)
//!
//! The protocol, checked with `loom` (the tests at the bottom), lives in one atomic
//! word per worker: `(job + 1) << 1` for the job it is enlisted for (0: none), plus
//! bit 0, set while the worker parks. One word, so the worker's "I park" and a
//! publisher's offer are ordered by the word's own modification order and no
//! store-load fence pattern is needed:
//! 1. A publisher offers job `j` to a worker by a compare-exchange that keeps bit 0
//!    and sets the job, which fails while the worker holds another job (it is
//!    busy, and skipped). The bit 0 it replaced says whether to unpark the worker.
//! 2. The worker takes its job (`Acquire`), helps with it, then clears the word
//!    (`Release`), which makes it free for the next offer.
//! 3. To park, the worker exchanges an empty word for bit 0 alone. If an offer came
//!    first the exchange fails and the worker does not park; if the worker came
//!    first, the offer sees bit 0 and unparks it. No offer is lost in a parked
//!    worker.
//!
//! The early wake-up's "stay awake until" (`hot_until`, in the pool, stored by
//! `Pool::heat` for a pipelined download's helpers) lives
//! in another word, so that hand-over is the store-load pattern: `heat` stores it
//! and fences before it reads bit 0; the worker fences after setting bit 0 and
//! before reading `hot_until`.
//!
//! Mail only admits: the job's parts are still claimed through the job's own word
//! (`job.rs`), so a helper that arrives late finds nothing left, and a publisher
//! never waits for a helper that did not start.

use crate::sync::{fence, AtomicU32, Ordering};

/// Bit 0 of the word: the worker parks (or is about to).
const SLEEPING: u32 = 1;

/// One worker's mailbox; see the module notes.
pub(crate) struct Mailbox {
    /// `(job + 1) << 1 | SLEEPING`; see the module notes.
    word: AtomicU32,
}

/// The answer to [`Mailbox::offer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Offer {
    /// The worker is enlisted; `parked` says the publisher must unpark it.
    Taken { parked: bool },
    /// The worker is helping with another job (or has not cleared its mail yet).
    Busy,
}

impl Mailbox {
    /// An empty mailbox of a running worker.
    pub(crate) fn new() -> Mailbox {
        Mailbox {
            word: AtomicU32::new(0),
        }
    }

    /// Enlists the worker for `job` if it is free (step 1).
    pub(crate) fn offer(&self, job: usize) -> Offer {
        let mail = (job as u32 + 1) << 1;
        let mut cur = self.word.load(Ordering::Relaxed);
        loop {
            if cur >> 1 != 0 {
                return Offer::Busy;
            }
            // SeqCst: ordered with `Pool::heat`'s `hot_until` stores as well.
            match self.word.compare_exchange_weak(
                cur,
                mail | (cur & SLEEPING),
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Offer::Taken {
                        parked: cur & SLEEPING != 0,
                    }
                }
                Err(now) => cur = now,
            }
        }
    }

    /// The job the worker is enlisted for, if any (step 2).
    pub(crate) fn take(&self) -> Option<usize> {
        match self.word.load(Ordering::Acquire) >> 1 {
            0 => None,
            m => Some(m as usize - 1),
        }
    }

    /// The worker is done with its job and free again (step 2). Only the worker
    /// calls this, while running, so bit 0 is clear.
    pub(crate) fn clear(&self) {
        self.word.store(0, Ordering::Release);
    }

    /// Whether the worker announced it parks; publishers prefer awake workers.
    pub(crate) fn is_sleeping(&self) -> bool {
        self.word.load(Ordering::SeqCst) & SLEEPING != 0
    }

    /// The worker is about to park (step 3): `true` when no offer came in, so it
    /// may park; `false` when it must look at its mail first. Either way it calls
    /// [`Mailbox::woke`] once it runs again.
    pub(crate) fn announce_sleep(&self) -> bool {
        let parks = self
            .word
            .compare_exchange(0, SLEEPING, Ordering::SeqCst, Ordering::Acquire)
            .is_ok();
        // The worker reads `hot_until` next; `Pool::heat` stores it, fences, then
        // reads this word ([`Mailbox::is_sleeping`]). With a fence on both sides one
        // of them sees the other (loom checks it, below).
        fence(Ordering::SeqCst);
        parks
    }

    /// The worker runs again after [`Mailbox::announce_sleep`].
    pub(crate) fn woke(&self) {
        self.word.fetch_and(!SLEEPING, Ordering::SeqCst);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// A worker that may park at any point and a publisher that offers it a job:
    /// the worker always gets the job (a lost wake-up would leave it parked, which
    /// `loom` reports as a deadlock), and a second offer while it holds the first is
    /// refused.
    #[test]
    fn loom_an_offer_reaches_a_parking_worker() {
        loom::model(|| {
            let mb = Arc::new(Mailbox::new());
            let worker = {
                let mb = Arc::clone(&mb);
                loom::thread::spawn(move || loop {
                    if let Some(job) = mb.take() {
                        mb.clear();
                        return job;
                    }
                    if mb.announce_sleep() {
                        loom::thread::park();
                    }
                    mb.woke();
                })
            };
            match mb.offer(3) {
                Offer::Taken { parked } => {
                    if parked {
                        worker.thread().unpark();
                    }
                }
                Offer::Busy => panic!("a fresh mailbox refused an offer"),
            }
            assert_eq!(worker.join().unwrap(), 3);
            assert_eq!(mb.offer(1), Offer::Taken { parked: false });
            assert_eq!(mb.offer(2), Offer::Busy, "one job at a time");
        });
    }
}

#[cfg(all(test, loom))]
mod loom_heat_tests {
    use super::*;
    use crate::sync::AtomicU64;
    use loom::sync::Arc;

    /// A transfer wakes a worker early (`hot_until`, as `Pool::heat`) while the
    /// worker goes to park (as the pool's worker loop): the worker either sees the
    /// heat and stays up, or is unparked; never parked for good.
    #[test]
    fn loom_heat_reaches_a_parking_worker() {
        loom::model(|| {
            let mb = Arc::new(Mailbox::new());
            let hot = Arc::new(AtomicU64::new(0));
            let worker = {
                let (mb, hot) = (Arc::clone(&mb), Arc::clone(&hot));
                loom::thread::spawn(move || loop {
                    if hot.load(Ordering::SeqCst) != 0 {
                        return;
                    }
                    if mb.announce_sleep() && hot.load(Ordering::SeqCst) == 0 {
                        loom::thread::park();
                    }
                    mb.woke();
                })
            };
            hot.fetch_max(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if mb.is_sleeping() {
                worker.thread().unpark();
            }
            worker.join().unwrap();
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_mailbox_holds_one_job_until_cleared_and_reports_a_parked_worker() {
        let mb = Mailbox::new();
        assert_eq!(mb.take(), None);
        assert_eq!(mb.offer(0), Offer::Taken { parked: false });
        assert_eq!(mb.offer(5), Offer::Busy);
        assert_eq!(mb.take(), Some(0));
        mb.clear();
        assert!(mb.announce_sleep(), "empty mailbox: the worker may park");
        assert!(mb.is_sleeping());
        assert_eq!(mb.offer(31), Offer::Taken { parked: true });
        assert!(
            !mb.announce_sleep(),
            "mail came in: the worker must not park"
        );
        mb.woke();
        assert!(!mb.is_sleeping());
        assert_eq!(mb.take(), Some(31));
    }
}
