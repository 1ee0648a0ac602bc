//! A job's gate, and the gated copy ([`Pool::copy_after`]) that uses it: a copy
//! published before its source is ready.
//!
//! A download's copy-out can only start once the DMA into the pinned window has
//! landed, but its helpers need not sit idle until then. With a gate, the publisher
//! publishes the copy *before* it waits for the DMA: helpers claim their parts,
//! prefetch their part of the destination for writing, and wait at the gate. The
//! publisher opens it once the DMA has landed (every helper then copies at once,
//! from a destination already in its cache), or cancels it when the wait failed
//! (every part is then skipped and the destination keeps what it held).
//!
//! The protocol, checked with `loom` (the test at the bottom):
//! 1. The publisher closes the gate, then publishes the job (`job.rs`, step 1), whose
//!    `Release` store orders the close before any claim of the new publication.
//! 2. A part's claimant reads the gate (`Acquire`): open, it copies; cancelled, it
//!    skips the part; closed, it waits until it is one or the other.
//! 3. The publisher opens it (`Release`, after the wait that made the source ready,
//!    so a claimant that sees it open also sees the source) or cancels it, then
//!    claims what is left and waits for the claimed parts as for any job.
//!
//! A gate belongs to one job slot and lives in the pool, so a claimant never reads
//! one that is gone; the slot is not published again before every claimed part is
//! finished (`job.rs`, step 4), so no claimant sees the next publication's gate.

use super::{Pool, WAKE_MIN_BYTES};
use crate::copy::CopyKind;
use crate::sync::{spin_hint, AtomicU32, Ordering};

const CLOSED: u32 = 0;
const OPEN: u32 = 1;
const CANCELLED: u32 = 2;

/// How long a claimant spins at a closed gate before it polls with short sleeps
/// instead: long enough for the DMA-and-wait of any download that is cut in one
/// piece (512 KiB at most: about 50 µs on the H200 after a 16 ms sleep), short
/// enough that a download queued behind a long kernel does not keep cores
/// spinning for the kernel's duration.
#[cfg(not(loom))]
const SPIN_AT_GATE: std::time::Duration = std::time::Duration::from_micros(200);

/// A claimant's sleep between looks at a gate that stayed closed past
/// [`SPIN_AT_GATE`].
#[cfg(not(loom))]
const POLL_AT_GATE: std::time::Duration = std::time::Duration::from_micros(20);

/// One job slot's gate; see the module notes.
#[repr(align(128))]
pub(super) struct Gate {
    /// `CLOSED`, `OPEN` or `CANCELLED`, alone on its line: claimants spin reading
    /// it, and the publisher's other writes should not bounce it.
    state: AtomicU32,
}

impl Gate {
    pub(super) fn new() -> Gate {
        Gate {
            state: AtomicU32::new(OPEN),
        }
    }

    /// Closes the gate for a new publication (step 1), before the job is published.
    pub(super) fn close(&self) {
        self.state.store(CLOSED, Ordering::Relaxed);
    }

    /// Opens the gate: the source is ready (step 3).
    pub(super) fn open(&self) {
        self.state.store(OPEN, Ordering::Release);
    }

    /// Cancels the gate unless it is already open (step 3): every part not yet
    /// copied is skipped.
    pub(super) fn cancel(&self) {
        let _ =
            self.state
                .compare_exchange(CLOSED, CANCELLED, Ordering::Release, Ordering::Relaxed);
    }

    /// Whether the gate is open now (then a claimant copies without waiting).
    pub(super) fn is_open(&self) -> bool {
        self.state.load(Ordering::Acquire) == OPEN
    }

    /// Waits until the gate opens (`true`) or is cancelled (`false`) (step 2).
    pub(super) fn wait(&self) -> bool {
        #[cfg(not(loom))]
        let started = std::time::Instant::now();
        // Under loom one look per turn: each is a step it explores.
        let looks = if cfg!(loom) { 1 } else { 64 };
        loop {
            for _ in 0..looks {
                match self.state.load(Ordering::Acquire) {
                    OPEN => return true,
                    CANCELLED => return false,
                    _ => spin_hint(),
                }
            }
            #[cfg(not(loom))]
            if started.elapsed() >= SPIN_AT_GATE {
                std::thread::sleep(POLL_AT_GATE);
            }
        }
    }
}

impl Pool {
    /// As [`Pool::copy`], for a source that is ready only once `landed` returns
    /// `Ok`: the copy is published first, behind its job's gate (`gate.rs`), so
    /// helpers claim their parts and prefetch their destination while `landed`
    /// waits; the gate opens when it returns `Ok`. When it returns an error (or
    /// panics) the gate is cancelled: nothing is copied, and the error is returned.
    /// Either way this returns only once no helper touches either range.
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
        parts: usize,
        wake: bool,
        landed: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), E> {
        let Some((j, parts)) = self.acquire_job(parts) else {
            landed()?;
            // SAFETY: conditions 1 and 2: `landed` returned `Ok`.
            unsafe { kind.copy(dst, src, len) };
            return Ok(());
        };
        let gate = &self.gates[j];
        // Closed before the publication's `Release` store (gate.rs, step 1).
        gate.close();
        // SAFETY: we own slot `j`; every part waits at the gate until `landed`
        // returned `Ok` (conditions 1 and 2).
        let parts = unsafe { self.publish(j, dst, src, len, kind, parts, true) };
        self.enlist(j, parts - 1, wake || len >= WAKE_MIN_BYTES);
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
                self.pool.finish(self.j, self.parts);
            }
        }
        let finish = Finish {
            pool: self,
            j,
            parts,
        };
        let r = landed();
        if r.is_ok() {
            gate.open();
        }
        drop(finish);
        r
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::job::Job;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;

    /// Runs a part at the gate as a claimant does: copies (counts) only when open.
    fn run_part(gate: &Gate, hits: &[AtomicUsize], i: usize) {
        if gate.is_open() || gate.wait() {
            hits[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One gated publication of two parts with a worker that may claim either,
    /// opened (`open`) or cancelled by the publisher.
    fn model(open: bool) {
        loom::model(move || {
            let job = Arc::new(Job::new(0usize));
            let gate = Arc::new(Gate::new());
            let hits: Arc<Vec<AtomicUsize>> =
                Arc::new((0..2).map(|_| AtomicUsize::new(0)).collect());
            assert!(job.try_acquire());
            gate.close();
            // SAFETY: this test's publisher owns the job; nothing was published before.
            unsafe { job.publish(0, 2) };
            let worker = {
                let (job, gate, hits) = (Arc::clone(&job), Arc::clone(&gate), Arc::clone(&hits));
                loom::thread::spawn(move || {
                    if let Some((i, _)) = job.claim() {
                        run_part(&gate, &hits, i);
                        job.finish_part();
                    }
                })
            };
            if open {
                gate.open();
            } else {
                gate.cancel();
            }
            let mut mine = 0;
            while let Some((i, _)) = job.claim() {
                run_part(&gate, &hits, i);
                mine += 1;
            }
            job.wait_done(2 - mine);
            let want = usize::from(open);
            for (i, h) in hits.iter().enumerate() {
                assert_eq!(
                    h.load(Ordering::Relaxed),
                    want,
                    "part {i} when the publisher returned (gate opened: {open})"
                );
            }
            worker.join().unwrap();
            job.release();
        });
    }

    #[test]
    fn loom_an_opened_gate_copies_every_part_once_before_the_publisher_returns() {
        model(true);
    }

    #[test]
    fn loom_a_cancelled_gate_copies_nothing() {
        model(false);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_gate_opens_or_cancels_once_and_cancel_never_undoes_an_open() {
        let g = Gate::new();
        assert!(g.is_open(), "a new gate is open: ungated jobs never wait");
        g.close();
        assert!(!g.is_open());
        g.cancel();
        assert!(!g.is_open());
        assert!(!g.wait(), "cancelled");
        g.close();
        g.open();
        g.cancel();
        assert!(g.is_open() && g.wait(), "cancel after open changes nothing");
    }

    #[test]
    fn a_waiter_past_the_spin_still_sees_the_gate_open() {
        let g = Gate::new();
        g.close();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| g.wait());
            std::thread::sleep(SPIN_AT_GATE * 5);
            g.open();
            assert!(waiter.join().unwrap());
        });
    }
}
