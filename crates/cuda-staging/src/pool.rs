//! A small persistent pool of copy threads.
//!
//! Each worker owns one slot. The caller publishes a part of a copy into a worker's
//! slot, copies its own part, then claims every published part no worker has
//! claimed yet and copies it itself, and finally waits for the parts workers did
//! claim (those workers are running, so the wait is bounded by one part's copy). A
//! parked worker is woken for a large part or when copies come back to back;
//! otherwise the caller does its part, so a copy is never slower than on one thread
//! plus a few atomic operations.
//! Workers spin for a short while after each part (so back-to-back transfers pay no
//! wake-up), then park. Nothing allocates and no thread is spawned per transfer.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::copy::copy;

/// How long an idle worker spins before it parks.
const SPIN: Duration = Duration::from_micros(200);

/// A parked worker is woken for a part at least this large, or when copies come
/// back to back (the previous one less than [`SPIN`] ago). Otherwise (a small copy
/// after an idle gap, as once per video frame) waking would cost the caller a
/// system call per worker and tens of microseconds of latency, in which it copies
/// the part itself.
const WAKE_MIN_PART_BYTES: usize = 256 << 10;

#[derive(Clone, Copy)]
pub(crate) struct Part {
    pub(crate) dst: *mut u8,
    pub(crate) src: *const u8,
    pub(crate) len: usize,
    /// Use streaming (non-temporal) stores; see [`copy`].
    pub(crate) streaming: bool,
}

impl Part {
    const EMPTY: Part = Part {
        dst: std::ptr::null_mut(),
        src: std::ptr::null(),
        len: 0,
        streaming: false,
    };

    /// # Safety
    /// 1. `src` is readable and `dst` writable for `len` bytes, and the two do not overlap.
    unsafe fn run(self) {
        // SAFETY: condition 1.
        unsafe { copy(self.dst, self.src, self.len, self.streaming) }
    }
}

/// Aligned to 128 bytes (two cache lines, the unit the adjacent-line prefetcher
/// pulls) so workers spinning on their own slot do not share a line with another's.
#[repr(align(128))]
struct Slot {
    /// `2 * generation` when a part of that generation is published and unclaimed,
    /// `2 * generation + 1` once the worker or the caller has claimed it.
    state: AtomicU64,
    /// Generation of the last part finished by whoever claimed it.
    done: AtomicU64,
    /// Set by the worker just before it parks.
    sleeping: AtomicBool,
    part: UnsafeCell<Part>,
}

// SAFETY: `part` is written only by the (single, `&mut`) dispatcher before it
// publishes a generation in `state`, and after every claimed part of the previous
// generation reported `done`; it is read by the worker only after winning the claim
// (a compare-exchange on `state` that fails once a newer generation is published),
// and by the dispatcher, which wrote it. The atomics order each hand-over.
unsafe impl Sync for Slot {}
// SAFETY: as above; the raw pointers in `Part` are plain addresses handed over.
unsafe impl Send for Slot {}

impl Slot {
    /// Claims the part of generation `gen` if nobody has; the winner copies it.
    fn claim(&self, gen: u64) -> bool {
        self.state
            .compare_exchange(2 * gen, 2 * gen + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

struct Shared {
    slots: Vec<Slot>,
    shutdown: AtomicBool,
}

/// A fixed set of copy threads owned by one `StagingBuffer`.
pub(crate) struct CopyPool {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
    generation: u64,
    last_copy: Option<Instant>,
}

impl CopyPool {
    /// Starts `workers` threads (the caller's thread is one more participant).
    pub(crate) fn new(workers: usize) -> std::io::Result<CopyPool> {
        let slots = (0..workers)
            .map(|_| Slot {
                state: AtomicU64::new(1),
                done: AtomicU64::new(0),
                sleeping: AtomicBool::new(false),
                part: UnsafeCell::new(Part::EMPTY),
            })
            .collect();
        let shared = Arc::new(Shared {
            slots,
            shutdown: AtomicBool::new(false),
        });
        let mut handles = Vec::with_capacity(workers);
        for i in 0..workers {
            let sh = Arc::clone(&shared);
            let h = std::thread::Builder::new()
                .name(format!("staging-copy-{i}"))
                .spawn(move || worker(&sh, i));
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    drop(CopyPool {
                        shared,
                        handles,
                        generation: 0,
                        last_copy: None,
                    });
                    return Err(e);
                }
            }
        }
        Ok(CopyPool {
            shared,
            handles,
            generation: 0,
            last_copy: None,
        })
    }

    /// Number of participants in a copy: the workers plus the caller.
    pub(crate) fn participants(&self) -> usize {
        self.handles.len() + 1
    }

    /// Copies `len` bytes split over up to `parts` participants, returning when all
    /// of it is done.
    ///
    /// # Safety
    /// 1. `src` is readable and `dst` writable for `len` bytes; they do not overlap;
    ///    nothing else touches either range until this returns.
    pub(crate) unsafe fn copy(
        &mut self,
        dst: *mut u8,
        src: *const u8,
        len: usize,
        streaming: bool,
        parts: usize,
    ) {
        let parts = parts.clamp(1, self.participants());
        // Split on 4 KiB boundaries so no two threads share a cache line or page.
        let per = len.div_ceil(parts).next_multiple_of(4096);
        self.generation += 1;
        let gen = self.generation;
        let now = Instant::now();
        let back_to_back = self.last_copy.is_some_and(|t| now.duration_since(t) < SPIN);
        self.last_copy = Some(now);
        let mut used = 0;
        let mut off = per.min(len); // the caller takes the first part
        while off < len && used < self.handles.len() {
            let n = per.min(len - off);
            let slot = &self.shared.slots[used];
            // SAFETY: every claimed part of the previous generation is done (we waited
            // for it) and an unclaimed one can no longer be claimed (its generation is
            // past), so nobody reads `part` until `state` publishes this generation
            // below. The offsets stay inside the caller's ranges (condition 1).
            unsafe {
                *slot.part.get() = Part {
                    dst: dst.add(off),
                    src: src.add(off),
                    len: n,
                    streaming,
                };
            }
            // SeqCst pairs with the worker's SeqCst `sleeping` store and `state`
            // re-check: one of the two sides sees the other (no lost wake-up).
            slot.state.store(2 * gen, Ordering::SeqCst);
            if (back_to_back || n >= WAKE_MIN_PART_BYTES) && slot.sleeping.load(Ordering::SeqCst) {
                self.handles[used].thread().unpark();
            }
            used += 1;
            off += n;
        }
        // SAFETY: the first part lies inside the caller's ranges (condition 1).
        unsafe {
            Part {
                dst,
                src,
                len: per.min(len),
                streaming,
            }
            .run()
        };
        for slot in &self.shared.slots[..used] {
            if slot.claim(gen) {
                // SAFETY: we wrote this part above and won its claim, so no worker
                // reads or runs it; its ranges are the caller's (condition 1).
                unsafe { (*slot.part.get()).run() };
                slot.done.store(gen, Ordering::Release);
            }
        }
        for slot in &self.shared.slots[..used] {
            // Only parts a running worker claimed are left: a bounded wait.
            while slot.done.load(Ordering::Acquire) != gen {
                std::hint::spin_loop();
            }
        }
    }
}

fn worker(sh: &Shared, i: usize) {
    let slot = &sh.slots[i];
    let mut seen = 0u64;
    let mut idle_since: Option<Instant> = None;
    loop {
        let state = slot.state.load(Ordering::Acquire);
        let gen = state / 2;
        if gen != seen {
            seen = gen;
            idle_since = None;
            if state % 2 == 0 && slot.claim(gen) {
                // SAFETY: we won the claim of a published part (Acquire on `state`
                // after the dispatcher wrote `part`); the dispatcher does not write it
                // again before we publish `done`.
                let part = unsafe { *slot.part.get() };
                // SAFETY: the dispatcher guarantees the ranges until it sees `done`.
                unsafe { part.run() };
                slot.done.store(gen, Ordering::Release);
            }
            continue;
        }
        if sh.shutdown.load(Ordering::Acquire) {
            return;
        }
        let start = *idle_since.get_or_insert_with(Instant::now);
        if start.elapsed() < SPIN {
            // Watch the slot between pauses: a `pause` takes ~140 cycles on recent
            // Xeons, so 64 of them unwatched would add microseconds to every part.
            for _ in 0..64 {
                if slot.state.load(Ordering::Acquire) / 2 != seen {
                    break;
                }
                std::hint::spin_loop();
            }
        } else {
            slot.sleeping.store(true, Ordering::SeqCst);
            // Re-check after announcing sleep so a post in between is not missed.
            if slot.state.load(Ordering::SeqCst) / 2 == seen && !sh.shutdown.load(Ordering::SeqCst)
            {
                std::thread::park();
            }
            slot.sleeping.store(false, Ordering::SeqCst);
            idle_since = None;
        }
    }
}

impl Drop for CopyPool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        for h in &self.handles {
            h.thread().unpark();
        }
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

impl std::fmt::Debug for CopyPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CopyPool")
            .field("workers", &self.handles.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_copies_every_byte_at_odd_sizes_and_offsets() {
        let mut pool = CopyPool::new(3).unwrap();
        for &len in &[
            0usize,
            1,
            4095,
            4096,
            4097,
            3 * 4096 + 5,
            1 << 20,
            (1 << 20) + 13,
        ] {
            for streaming in [true, false] {
                let src: Vec<u8> = (0..len + 3).map(|i| (i * 7 + len) as u8).collect();
                let mut dst = vec![0xAAu8; len + 5];
                // SAFETY: both ranges are inside their Vecs and distinct.
                unsafe {
                    pool.copy(
                        dst.as_mut_ptr().add(1),
                        src.as_ptr().add(3),
                        len,
                        streaming,
                        4,
                    )
                };
                assert_eq!(&dst[1..1 + len], &src[3..3 + len], "len {len}");
                assert_eq!(dst[0], 0xAA);
                assert_eq!(dst[1 + len], 0xAA);
            }
        }
    }

    #[test]
    fn pool_survives_parking_and_many_generations() {
        let mut pool = CopyPool::new(2).unwrap();
        let src: Vec<u8> = (0..64 * 1024).map(|i| i as u8).collect();
        for round in 0..200 {
            let mut dst = vec![0u8; src.len()];
            if round % 50 == 0 {
                std::thread::sleep(SPIN * 3); // let the workers park
            }
            // SAFETY: distinct Vecs of equal length.
            unsafe { pool.copy(dst.as_mut_ptr(), src.as_ptr(), src.len(), round % 2 == 0, 3) };
            assert_eq!(dst, src);
        }
    }

    #[test]
    fn parked_workers_are_woken_only_for_large_parts_and_every_byte_lands() {
        let mut pool = CopyPool::new(3).unwrap();
        let src: Vec<u8> = (0..(4usize << 20)).map(|i| (i * 13 + 1) as u8).collect();
        for (round, len) in [(0, 48usize << 10), (1, 4 << 20), (2, 300_001), (3, 4 << 20)] {
            std::thread::sleep(SPIN * 3); // parked
            let mut dst = vec![0u8; len];
            // SAFETY: distinct Vecs, `len` within both.
            unsafe { pool.copy(dst.as_mut_ptr(), src.as_ptr(), len, round % 2 == 0, 4) };
            assert_eq!(dst, &src[..len], "round {round}");
        }
    }

    #[test]
    fn caller_and_workers_racing_for_claims_never_lose_or_repeat_a_part() {
        let mut pool = CopyPool::new(3).unwrap();
        let src: Vec<u8> = (0..(48usize << 10)).map(|i| (i * 7 + 3) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        for round in 0..5000 {
            dst.fill(0);
            // SAFETY: distinct Vecs of equal length.
            unsafe { pool.copy(dst.as_mut_ptr(), src.as_ptr(), src.len(), round % 3 == 0, 4) };
            assert_eq!(dst, src, "round {round}");
        }
    }
}
