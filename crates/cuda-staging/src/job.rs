//! One piece of work split into parts, shared between the thread that publishes it
//! (the dispatcher, which owns the job) and any pool worker that claims parts of it.
//!
//! The hand-over protocol, checked with `loom` (the tests at the bottom):
//! 1. The dispatcher writes the description, then publishes `(generation, parts,
//!    next = 0)` in one atomic word with `Release`.
//! 2. Anyone claims part `next` by a compare-exchange of the whole word to
//!    `next + 1` (`AcqRel`), which fails once the generation changed, so a claim can
//!    never land in a newer publication; the winner reads the description (ordered
//!    after step 1 by the exchange) and runs the part.
//! 3. A worker reports a finished part with a `Release` increment of `done`.
//! 4. The dispatcher claims parts itself until none is left, then waits until
//!    `done` equals the parts the others claimed: those are running, so the wait is
//!    bounded by one part. Only then does it publish again (step 1), so nobody reads
//!    the description while it is rewritten.

use crate::sync::{spin_hint, AtomicU32, AtomicU64, Ordering, RacyCell};

const GEN_SHIFT: u32 = 32;
const PARTS_SHIFT: u32 = 16;
const FIELD_MASK: u64 = 0xffff;

/// The most parts one publication can have.
pub(crate) const MAX_PARTS: usize = FIELD_MASK as usize;

/// A job slot; see the module notes.
#[repr(align(128))]
pub(crate) struct Job<D: Copy> {
    /// `generation << 32 | parts << 16 | next`, alone on its cache line (128 bytes,
    /// the pair the adjacent-line prefetcher pulls): claims bounce it between
    /// cores, and nothing else should bounce with it.
    claim: AtomicU64,
    _claim_line: [u8; 120],
    /// Parts finished by threads other than the dispatcher, this generation.
    done: AtomicU32,
    /// 1 while a dispatcher owns the slot.
    owner: AtomicU32,
    desc: RacyCell<D>,
}

// SAFETY: `desc` is written only by the owning dispatcher while no part of the
// previous publication is unfinished (step 4) and read only by the winner of a claim
// (step 2); the atomics order the two.
unsafe impl<D: Copy + Send> Sync for Job<D> {}

impl<D: Copy> Job<D> {
    pub(crate) fn new(desc: D) -> Job<D> {
        Job {
            claim: AtomicU64::new(0),
            _claim_line: [0; 120],
            done: AtomicU32::new(0),
            owner: AtomicU32::new(0),
            desc: RacyCell::new(desc),
        }
    }

    /// Takes the slot for one dispatcher; `false` when another holds it.
    pub(crate) fn try_acquire(&self) -> bool {
        self.owner
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Gives the slot back (after [`Job::wait_done`]).
    pub(crate) fn release(&self) {
        self.owner.store(0, Ordering::Release);
    }

    /// Publishes `desc` in `parts` parts (step 1).
    ///
    /// # Safety
    /// 1. The caller owns the slot ([`Job::try_acquire`]) and has waited for every
    ///    part of its previous publication ([`Job::wait_done`]).
    /// 2. `parts <= MAX_PARTS`.
    pub(crate) unsafe fn publish(&self, desc: D, parts: usize) {
        let generation = (self.claim.load(Ordering::Relaxed) >> GEN_SHIFT).wrapping_add(1);
        self.done.store(0, Ordering::Relaxed);
        // SAFETY: condition 1: no claimed part of the last publication is unfinished,
        // and no new claim can succeed before the store below publishes.
        unsafe { self.desc.write(desc) };
        self.claim.store(
            (generation << GEN_SHIFT) | ((parts as u64 & FIELD_MASK) << PARTS_SHIFT),
            Ordering::Release,
        );
    }

    /// Claims the next unclaimed part of the current publication (step 2): its index
    /// and the description, or `None` when every part is taken.
    pub(crate) fn claim(&self) -> Option<(usize, D)> {
        let mut w = self.claim.load(Ordering::Acquire);
        loop {
            let parts = (w >> PARTS_SHIFT) & FIELD_MASK;
            let next = w & FIELD_MASK;
            if next >= parts {
                return None;
            }
            match self
                .claim
                .compare_exchange_weak(w, w + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                // SAFETY: the exchange succeeded on this publication's word, which
                // the dispatcher stored (Release) after writing `desc`, and it will
                // not write `desc` again before this part is reported finished.
                Ok(_) => return Some((next as usize, unsafe { self.desc.read() })),
                Err(now) => w = now,
            }
        }
    }

    /// Parts of the current publication claimed so far.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn claimed(&self) -> usize {
        (self.claim.load(Ordering::Acquire) & FIELD_MASK) as usize
    }

    /// A worker finished a part it claimed (step 3).
    pub(crate) fn finish_part(&self) {
        self.done.fetch_add(1, Ordering::Release);
    }

    /// The dispatcher waits until `others` parts claimed by other threads are
    /// finished (step 4).
    pub(crate) fn wait_done(&self, others: usize) {
        while (self.done.load(Ordering::Acquire) as usize) < others {
            spin_hint();
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;

    /// Runs one publication of `parts` parts (description `tag`) on the dispatcher
    /// side: claims what is left, waits for the rest.
    fn dispatch(job: &Job<usize>, hits: &[AtomicUsize], tag: usize, parts: usize) {
        // SAFETY: this test's dispatcher owns the job and waited for the last round.
        unsafe { job.publish(tag, parts) };
        let mut mine = 0;
        while let Some((i, t)) = job.claim() {
            assert_eq!(t, tag, "a claim saw another publication's description");
            hits[tag * 4 + i].fetch_add(1, Ordering::Relaxed);
            mine += 1;
        }
        job.wait_done(parts - mine);
        for i in 0..parts {
            assert_eq!(
                hits[tag * 4 + i].load(Ordering::Relaxed),
                1,
                "part {i} of round {tag} ran {} times when the dispatcher returned",
                hits[tag * 4 + i].load(Ordering::Relaxed)
            );
        }
    }

    #[test]
    fn loom_every_part_runs_once_and_the_dispatcher_waits_for_claimed_ones() {
        loom::model(|| {
            let job = Arc::new(Job::new(0usize));
            let hits: Arc<Vec<AtomicUsize>> =
                Arc::new((0..8).map(|_| AtomicUsize::new(0)).collect());
            assert!(job.try_acquire());
            let worker = {
                let (job, hits) = (Arc::clone(&job), Arc::clone(&hits));
                loom::thread::spawn(move || {
                    // A worker that looks twice, possibly across two publications.
                    for _ in 0..2 {
                        if let Some((i, tag)) = job.claim() {
                            hits[tag * 4 + i].fetch_add(1, Ordering::Relaxed);
                            job.finish_part();
                        }
                    }
                })
            };
            dispatch(&job, &hits, 0, 2);
            dispatch(&job, &hits, 1, 2);
            worker.join().unwrap();
            job.release();
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn parts_are_claimed_in_order_once_and_a_new_publication_starts_over() {
        let job = Job::new(7u32);
        assert!(job.try_acquire());
        assert!(!job.try_acquire(), "one dispatcher at a time");
        assert!(job.claim().is_none(), "nothing published yet");
        // SAFETY: we own the job and nothing was claimed before.
        unsafe { job.publish(11, 3) };
        assert_eq!(job.claimed(), 0);
        assert_eq!(job.claim(), Some((0, 11)));
        assert_eq!(job.claim(), Some((1, 11)));
        assert_eq!(job.claim(), Some((2, 11)));
        assert_eq!(job.claim(), None);
        assert_eq!(job.claimed(), 3);
        job.wait_done(0);
        // SAFETY: every part was claimed and run by this thread.
        unsafe { job.publish(12, 1) };
        assert_eq!(job.claim(), Some((0, 12)));
        job.finish_part();
        job.wait_done(1);
        job.release();
        assert!(job.try_acquire());
    }
}
