//! A small persistent pool of copy threads.
//!
//! Each worker owns one slot. The caller publishes a part of a copy into a worker's
//! slot by bumping that slot's generation, copies its own part, then waits for every
//! worker it used to report the same generation done. Workers spin for a short while
//! after each part (so back-to-back transfers pay no wake-up), then park. Nothing
//! allocates and no thread is spawned per transfer.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::copy::copy;

/// How long an idle worker spins before it parks.
const SPIN: Duration = Duration::from_micros(200);

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

struct Slot {
    /// Generation of the last part published to this worker.
    posted: AtomicU64,
    /// Generation of the last part this worker finished.
    done: AtomicU64,
    /// Set by the worker just before it parks.
    sleeping: AtomicBool,
    part: UnsafeCell<Part>,
}

// SAFETY: `part` is written only by the (single, `&mut`) dispatcher while the worker
// is not reading it (before `posted` is bumped, after `done` caught up), and read
// only by its worker between those two points; the atomics order the hand-over.
unsafe impl Sync for Slot {}
// SAFETY: as above; the raw pointers in `Part` are plain addresses handed over.
unsafe impl Send for Slot {}

struct Shared {
    slots: Vec<Slot>,
    shutdown: AtomicBool,
}

/// A fixed set of copy threads owned by one `StagingBuffer`.
pub(crate) struct CopyPool {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
    generation: u64,
}

impl CopyPool {
    /// Starts `workers` threads (the caller's thread is one more participant).
    pub(crate) fn new(workers: usize) -> std::io::Result<CopyPool> {
        let slots = (0..workers)
            .map(|_| Slot {
                posted: AtomicU64::new(0),
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
                    let pool = CopyPool {
                        shared,
                        handles,
                        generation: 0,
                    };
                    drop(pool);
                    return Err(e);
                }
            }
        }
        Ok(CopyPool {
            shared,
            handles,
            generation: 0,
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
        let mut used = 0;
        let mut off = per.min(len); // the caller takes the first part
        while off < len && used < self.handles.len() {
            let n = per.min(len - off);
            let slot = &self.shared.slots[used];
            // SAFETY: the worker finished the previous generation (we waited for it),
            // so it does not read `part` until `posted` changes below. The offsets stay
            // inside the caller's ranges (condition 1).
            unsafe {
                *slot.part.get() = Part {
                    dst: dst.add(off),
                    src: src.add(off),
                    len: n,
                    streaming,
                };
            }
            // SeqCst pairs with the worker's SeqCst `sleeping` store and `posted`
            // re-check: one of the two sides must see the other (no lost wake-up).
            slot.posted.store(gen, Ordering::SeqCst);
            if slot.sleeping.load(Ordering::SeqCst) {
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
            while slot.done.load(Ordering::Acquire) != gen {
                std::hint::spin_loop();
            }
        }
    }
}

fn worker(sh: &Shared, i: usize) {
    let slot = &sh.slots[i];
    let mut seen = 0u64;
    loop {
        let mut idle_since: Option<Instant> = None;
        let gen = loop {
            let g = slot.posted.load(Ordering::Acquire);
            if g != seen {
                break g;
            }
            if sh.shutdown.load(Ordering::Acquire) {
                return;
            }
            let start = *idle_since.get_or_insert_with(Instant::now);
            if start.elapsed() < SPIN {
                for _ in 0..64 {
                    std::hint::spin_loop();
                }
            } else {
                slot.sleeping.store(true, Ordering::SeqCst);
                // Re-check after announcing sleep so a post in between is not missed.
                if slot.posted.load(Ordering::SeqCst) == seen && !sh.shutdown.load(Ordering::SeqCst)
                {
                    std::thread::park();
                }
                slot.sleeping.store(false, Ordering::SeqCst);
                idle_since = None;
            }
        };
        // SAFETY: `posted` was bumped (Acquire) after the dispatcher wrote `part`, and
        // it does not write again before we publish `done`.
        let part = unsafe { *slot.part.get() };
        // SAFETY: the dispatcher guarantees the ranges for the whole generation.
        unsafe { part.run() };
        seen = gen;
        slot.done.store(gen, Ordering::Release);
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
}
