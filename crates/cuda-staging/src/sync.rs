//! The synchronisation primitives of the copy pool: `std`'s, or `loom`'s when built
//! with `RUSTFLAGS="--cfg loom"` so that `loom` can check the hand-over protocol
//! (`cargo test -p cuda-staging --lib --release loom`, run by CI).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Tells the scheduler (and `loom`) that this thread is waiting on another.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// A cell written by one thread while no other can read it, as the copy pool's
/// protocol guarantees (see `job.rs`); `loom`'s `UnsafeCell` checks that it does.
pub(crate) struct RacyCell<T>(
    #[cfg(loom)] loom::cell::UnsafeCell<T>,
    #[cfg(not(loom))] std::cell::UnsafeCell<T>,
);

impl<T: Copy> RacyCell<T> {
    pub(crate) fn new(v: T) -> RacyCell<T> {
        #[cfg(loom)]
        return RacyCell(loom::cell::UnsafeCell::new(v));
        #[cfg(not(loom))]
        RacyCell(std::cell::UnsafeCell::new(v))
    }

    /// # Safety
    /// 1. No thread writes the cell during this read.
    pub(crate) unsafe fn read(&self) -> T {
        #[cfg(loom)]
        // SAFETY: condition 1.
        return self.0.with(|p| unsafe { *p });
        #[cfg(not(loom))]
        // SAFETY: condition 1.
        unsafe {
            *self.0.get()
        }
    }

    /// # Safety
    /// 1. No other thread reads or writes the cell during this write.
    pub(crate) unsafe fn write(&self, v: T) {
        #[cfg(loom)]
        // SAFETY: condition 1.
        return self.0.with_mut(|p| unsafe { *p = v });
        #[cfg(not(loom))]
        // SAFETY: condition 1.
        unsafe {
            *self.0.get() = v
        }
    }
}
