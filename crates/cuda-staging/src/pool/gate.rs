//! A job's gate, and the gated copy ([`Pool::copy_after`]) that uses it: a copy
//! published before its source is ready.
//!
//! A download's copy-out can only start once the DMA into the pinned window has
//! landed, but its helpers need not sit idle until then. With a gate, the publisher
//! publishes the copy *before* it waits for the DMA: helpers claim their parts,
//! prefetch their part of the destination for writing, and wait at the gate. The
//! publisher opens it once the DMA has landed (every helper then copies at once,
//! from a destination already in its cache), or cancels it when the wait failed
//! (every part is then skipped and the destination keeps what it held). A helper
//! still waiting after [`SPIN_AT_GATE`] (the DMA queued behind long work on its
//! stream) hands its part back to the publisher and goes, so no helper sleeps on a
//! claimed part or spins for long.
//!
//! The protocol, checked with `loom` (the tests at the bottom), lives in one atomic
//! word per job slot: the state (closed, open, cancelled) and a bit per part handed
//! back. One word, so a hand-back and the publisher's open are ordered by the word's
//! own modification order:
//! 1. The publisher closes the gate, then publishes the job (`job.rs`, step 1), whose
//!    `Release` store orders the close before any claim of the new publication.
//! 2. A part's claimant reads the word (`Acquire`): open, it copies; cancelled, it
//!    skips the part; closed, it waits until it is one or the other, or hands the
//!    part back by a compare-exchange that sets the part's bit while the gate is
//!    still closed. Either way it then reports the part finished (`job.rs`, step 3).
//! 3. The publisher opens the gate by swapping in "open" (after the wait that made
//!    the source ready, `AcqRel`, so a claimant that sees it open also sees the
//!    source); the old word holds the parts handed back, which it copies itself.
//!    Or it cancels (no part is copied). Then it claims what is left and waits for
//!    the claimed parts as for any job.
//!
//! A gate belongs to one job slot and lives in the pool, so a claimant never reads
//! one that is gone; the slot is not published again before every claimed part is
//! finished (`job.rs`, step 4), so no claimant sees the next publication's gate.

use super::Pool;
use crate::stores::CopyKind;
use crate::sync::{spin_hint, AtomicU32, Ordering};

const STATE: u32 = 0b11;
const CLOSED: u32 = 0;
const OPEN: u32 = 1;
const CANCELLED: u32 = 2;
/// Bit `DEFER_SHIFT + i` of the word: part `i` was handed back.
const DEFER_SHIFT: u32 = 2;
/// The most parts a gated copy is cut in: one bit each in the word.
pub(super) const MAX_GATED_PARTS: usize = (u32::BITS - DEFER_SHIFT) as usize;

/// How long a claimant waits at a closed gate before it hands its part back to the
/// publisher: longer than the DMA-and-wait of any download that is gated (512 KiB
/// at most: about 50 µs on the H200 after a 16 ms sleep), short enough that a
/// download queued behind a long kernel keeps no core spinning for the kernel's
/// duration (the publisher copies what was handed back once the DMA lands).
#[cfg(not(loom))]
pub(super) const SPIN_AT_GATE: std::time::Duration = std::time::Duration::from_micros(100);

/// What a claimant does with its part, once past the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AtGate {
    /// The gate opened: copy it.
    Copy,
    /// The gate was cancelled: skip it.
    Skip,
    /// Handed back to the publisher, which copies it: skip it.
    Deferred,
}

/// One job slot's gate; see the module notes.
#[repr(align(128))]
pub(super) struct Gate {
    /// State and handed-back parts, alone on its line: claimants spin reading it,
    /// and the publisher's other writes should not bounce it.
    word: AtomicU32,
}

impl Gate {
    pub(super) fn new() -> Gate {
        Gate {
            word: AtomicU32::new(OPEN),
        }
    }

    /// Closes the gate for a new publication (step 1), before the job is published.
    pub(super) fn close(&self) {
        self.word.store(CLOSED, Ordering::Relaxed);
    }

    /// Opens the gate: the source is ready (step 3). Returns the parts handed back,
    /// a bit each (bit `i`: part `i`), for the publisher to copy.
    #[must_use]
    pub(super) fn open(&self) -> u32 {
        self.word.swap(OPEN, Ordering::AcqRel) >> DEFER_SHIFT
    }

    /// Cancels the gate unless it is already open (step 3): every part not yet
    /// copied is skipped, handed back or not.
    pub(super) fn cancel(&self) {
        let _ = self
            .word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (w & STATE == CLOSED).then_some(CANCELLED)
            });
    }

    /// Takes claimed part `part` through the gate (step 2): at once when it is open
    /// or cancelled; else runs `prefetch` and waits, handing the part back after
    /// [`SPIN_AT_GATE`] when `may_defer` (the publisher, which opens the gate itself,
    /// never needs to).
    pub(super) fn pass(&self, part: usize, may_defer: bool, prefetch: impl FnOnce()) -> AtGate {
        if let Some(done) = Self::decided(self.word.load(Ordering::Acquire)) {
            return done;
        }
        prefetch();
        #[cfg(not(loom))]
        let started = std::time::Instant::now();
        // Under loom one look per turn: each is a step it explores.
        let looks = if cfg!(loom) { 1 } else { 64 };
        debug_assert!(
            part < MAX_GATED_PARTS,
            "copy_after cuts at most {MAX_GATED_PARTS} parts"
        );
        let bit = 1u32 << (DEFER_SHIFT as usize + part.min(MAX_GATED_PARTS - 1));
        loop {
            let mut w = CLOSED;
            for _ in 0..looks {
                w = self.word.load(Ordering::Acquire);
                if let Some(done) = Self::decided(w) {
                    return done;
                }
                spin_hint();
            }
            // Under loom a claimant may hand back at its first chance, so the model
            // races the hand-back against the publisher's open.
            #[cfg(not(loom))]
            let waited_long = started.elapsed() >= SPIN_AT_GATE;
            #[cfg(loom)]
            let waited_long = true;
            if may_defer && waited_long {
                match self
                    .word
                    .compare_exchange(w, w | bit, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => return AtGate::Deferred,
                    Err(now) => {
                        if let Some(done) = Self::decided(now) {
                            return done;
                        }
                    }
                }
            }
        }
    }

    /// What a claimant does when it reads `w`: `None` while the gate is closed.
    fn decided(w: u32) -> Option<AtGate> {
        match w & STATE {
            OPEN => Some(AtGate::Copy),
            CANCELLED => Some(AtGate::Skip),
            _ => None,
        }
    }
}

impl Pool {
    /// As [`Pool::copy`], for a source that is ready only once `landed` returns
    /// `Ok`: the copy is published first, behind its job's gate (`gate.rs`), so
    /// helpers claim their parts and prefetch their destination while `landed`
    /// waits; the gate opens when it returns `Ok`, and the parts helpers handed
    /// back (after waiting [`SPIN_AT_GATE`]) are copied here. When `landed` returns
    /// an error (or panics) the gate is cancelled: nothing is copied, and the error
    /// is returned. Either way this returns only once no helper touches either
    /// range.
    ///
    /// # Safety
    /// 1. `dst` is writable for `len` bytes and nothing else touches it until this
    ///    returns.
    /// 2. Once `landed` returned `Ok`, `src` is readable for `len` bytes, does not
    ///    overlap `dst`, and nothing writes it until this returns.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn copy_after<E>(
        &self,
        dst: *mut u8,
        src: *const u8,
        len: usize,
        kind: CopyKind,
        share: super::Share,
        landed: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), E> {
        let job = if share.helpers == 0 {
            None
        } else {
            self.acquire_job(share.threads)
        };
        let Some((j, threads)) = job else {
            landed()?;
            // SAFETY: conditions 1 and 2: `landed` returned `Ok`.
            unsafe { kind.copy(dst, src, len) };
            return Ok(());
        };
        let gate = &self.gates[j];
        // Closed before the publication's `Release` store (gate.rs, step 1).
        gate.close();
        // SAFETY: we own slot `j`, whose gate is closed, so every part waits until
        // `landed` returned `Ok` (conditions 1 and 2).
        let (parts, desc) = unsafe { self.publish(j, dst, src, len, kind, threads, share, true) };
        self.enlist(j, share.helpers.min(threads - 1));
        // Whatever `landed` does, even panic, the publication is finished before
        // this returns: the gate is cancelled unless opened, the rest claimed
        // (skipped when cancelled) and the claimed parts waited for.
        struct Finish<'p> {
            pool: &'p Pool,
            j: usize,
            parts: usize,
        }
        impl Drop for Finish<'_> {
            fn drop(&mut self) {
                self.pool.gates[self.j].cancel();
                // SAFETY: we own slot `j` and published `parts` parts in it; its
                // gate is open or, just now, cancelled.
                unsafe { self.pool.finish(self.j, self.parts) };
            }
        }
        let finish = Finish {
            pool: self,
            j,
            parts,
        };
        let r = landed();
        if r.is_ok() {
            let mut handed_back = gate.open();
            while handed_back != 0 {
                let i = handed_back.trailing_zeros() as usize;
                handed_back &= handed_back - 1;
                // SAFETY: part `i` of our publication, claimed by a helper that
                // handed it back without touching it and copies nothing more of it;
                // `landed` returned `Ok` (conditions 1 and 2).
                unsafe { desc.copy_part(i) };
            }
        }
        drop(finish);
        r
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::job::Job;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    const PARTS: usize = 1;

    /// Per part: the source (the DMA's bytes, written by the publisher before it
    /// opens the gate) and the destination (written by whoever copies the part).
    struct Bytes {
        src: [UnsafeCell<usize>; PARTS],
        dst: [UnsafeCell<usize>; PARTS],
    }

    /// Copies part `i`: reads the source, which must have landed for `round`.
    fn copy(b: &Bytes, i: usize, round: usize) {
        // SAFETY: loom checks that no other thread touches these cells meanwhile.
        let v = b.src[i].with(|p| unsafe { *p });
        assert_eq!(v, round + 1, "part {i} read before its source landed");
        b.dst[i].with_mut(|p| unsafe { *p = v });
    }

    /// Two gated publications of one slot, opened or cancelled per `open`, with a
    /// worker that claims parts of either, waits at the gate, and may hand its part
    /// back (under loom, at its first chance: racing the open).
    fn model(open: [bool; 2]) {
        loom::model(move || {
            let job = Arc::new(Job::new(0usize));
            let gate = Arc::new(Gate::new());
            let bytes = Arc::new(Bytes {
                src: std::array::from_fn(|_| UnsafeCell::new(0)),
                dst: std::array::from_fn(|_| UnsafeCell::new(0)),
            });
            assert!(job.try_acquire());
            let worker = {
                let (job, gate, bytes) = (Arc::clone(&job), Arc::clone(&gate), Arc::clone(&bytes));
                loom::thread::spawn(move || {
                    for _ in 0..2 {
                        if let Some((i, round)) = job.claim() {
                            if gate.pass(i, true, || {}) == AtGate::Copy {
                                copy(&bytes, i, round);
                            }
                            job.finish_part();
                        }
                    }
                })
            };
            for (round, &open) in open.iter().enumerate() {
                gate.close();
                // SAFETY: this test's publisher owns the job and waited for the
                // last round's parts.
                unsafe { job.publish(round, PARTS) };
                // The DMA lands.
                for s in &bytes.src {
                    // SAFETY: claimants read the source only past an open gate.
                    s.with_mut(|p| unsafe { *p = round + 1 });
                }
                if open {
                    let mut back = gate.open();
                    while back != 0 {
                        copy(&bytes, back.trailing_zeros() as usize, round);
                        back &= back - 1;
                    }
                } else {
                    gate.cancel();
                }
                let mut mine = 0;
                while let Some((i, r)) = job.claim() {
                    assert_eq!(r, round);
                    if gate.pass(i, false, || {}) == AtGate::Copy {
                        copy(&bytes, i, round);
                    }
                    mine += 1;
                }
                job.wait_done(PARTS - mine);
                for (i, d) in bytes.dst.iter().enumerate() {
                    // SAFETY: every claimed part is finished (waited above).
                    let v = d.with(|p| unsafe { *p });
                    let want = if open { round + 1 } else { 0 };
                    assert_eq!(v, want, "part {i}, round {round} (opened: {open})");
                    d.with_mut(|p| unsafe { *p = 0 });
                }
            }
            worker.join().unwrap();
            job.release();
        });
    }

    #[test]
    fn loom_an_opened_gate_copies_every_part_once_after_its_source_landed() {
        model([true, true]);
    }

    #[test]
    fn loom_a_cancelled_gate_copies_nothing_and_the_slot_is_reused_safely() {
        model([false, true]);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_gate_opens_or_cancels_once_and_cancel_never_undoes_an_open() {
        let g = Gate::new();
        let no_prefetch = || panic!("no wait, no prefetch");
        assert_eq!(
            g.pass(0, true, no_prefetch),
            AtGate::Copy,
            "a new gate is open"
        );
        g.close();
        g.cancel();
        assert_eq!(g.pass(0, true, no_prefetch), AtGate::Skip, "cancelled");
        g.close();
        assert_eq!(g.open(), 0, "nothing handed back");
        g.cancel();
        assert_eq!(
            g.pass(1, true, no_prefetch),
            AtGate::Copy,
            "cancel after open changes nothing"
        );
    }

    #[test]
    fn a_claimant_hands_its_part_back_after_the_spin_and_the_publisher_learns_which() {
        let g = Gate::new();
        g.close();
        let prefetched = std::sync::atomic::AtomicUsize::new(0);
        let prefetch = || {
            prefetched.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        };
        std::thread::scope(|s| {
            let three = s.spawn(|| g.pass(3, true, prefetch));
            let five = s.spawn(|| g.pass(5, true, prefetch));
            assert_eq!(three.join().unwrap(), AtGate::Deferred);
            assert_eq!(five.join().unwrap(), AtGate::Deferred);
        });
        assert_eq!(prefetched.into_inner(), 2, "each waiter prefetched once");
        assert_eq!(g.open(), 1 << 3 | 1 << 5);
        g.close();
        assert_eq!(
            g.open(),
            0,
            "closing forgets the last publication's hand-backs"
        );
    }

    #[test]
    fn the_publisher_waits_past_the_spin_without_handing_back() {
        let g = Gate::new();
        g.close();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| g.pass(0, false, || {}));
            std::thread::sleep(SPIN_AT_GATE * 5);
            assert_eq!(g.open(), 0, "no part handed back");
            assert_eq!(waiter.join().unwrap(), AtGate::Copy);
        });
    }
}
