//! The counting `#[global_allocator]` of the steady-state test binaries
//! (`steady_state.rs`, `ring_steady_state.rs`, `steady_state_2d.rs`): `System`,
//! counting every heap allocation (alloc, alloc_zeroed, realloc) of the whole
//! process and of each thread, but those of the process's main thread, which runs
//! libtest, not the tests (each test runs on a thread of its own; [`counted_here`]
//! lets a test check that it is one of those).
//!
//! A binary that declares `mod counting_alloc;` has this allocator for all of it, so
//! only binaries whose every test measures allocations may include it (not
//! `tests/common`, which every GPU binary includes). Allocations the CUDA driver makes
//! itself (`malloc` from C) are not Rust heap allocations and are not counted.

#![allow(dead_code)] // each binary reads the counters it needs

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Heap allocations of the whole process so far.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Heap allocations of this thread so far (const-initialised, no destructor: safe
    /// to touch from inside the allocator).
    static THREAD_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    /// Whether this thread is the process's main thread (0: not asked yet, 1: no,
    /// 2: yes).
    static MAIN_THREAD: Cell<u8> = const { Cell::new(0) };
}

/// Whether the calling thread is the process's main thread: in a test binary,
/// libtest's runner, which prints the progress lines and the "has been running for
/// over 60 seconds" warning. That warning, landing inside a measured region of a slow
/// run (the simulator under load), counted as 3 allocations of the transfers.
fn on_main_thread() -> bool {
    MAIN_THREAD
        .try_with(|m| {
            if m.get() == 0 {
                m.set(if is_main_thread() { 2 } else { 1 });
            }
            m.get() == 2
        })
        .unwrap_or(false)
}

#[cfg(target_os = "linux")]
fn is_main_thread() -> bool {
    // SAFETY: gettid has no preconditions; neither call allocates.
    (unsafe { libc::gettid() }) as u32 == std::process::id()
}

#[cfg(not(target_os = "linux"))]
fn is_main_thread() -> bool {
    false
}

/// `System`, counting every allocation but the main thread's (libtest's runner).
struct CountingAllocator;

impl CountingAllocator {
    fn count() {
        if on_main_thread() {
            return;
        }
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // `try_with`: a thread being torn down may allocate after its locals are gone.
        let _ = THREAD_ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    }
}

// SAFETY: every method forwards its arguments unchanged to `System`, which implements
// `GlobalAlloc` correctly; what is added are counter increments, which neither
// allocate nor touch the memory handed out.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::count();
        // SAFETY: our caller meets `GlobalAlloc::alloc`'s contract (a layout of
        // non-zero size), which is all `System.alloc` requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::count();
        // SAFETY: as for `alloc`: the caller's layout has a non-zero size.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::count();
        // SAFETY: our caller guarantees that `ptr` was allocated by this allocator
        // (that is, by `System`, to which every allocation is forwarded) with
        // `layout`, and that `new_size` is non-zero and does not overflow when
        // rounded up to `layout.align()`: exactly `System.realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: our caller guarantees that `ptr` was allocated by this allocator
        // (by `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Whether the calling thread's allocations are counted: every thread's but the
/// process's main one. A test asserts it first, so that it never measures nothing.
pub fn counted_here() -> bool {
    !on_main_thread()
}

/// Heap allocations of every thread of the process so far (the main thread's left
/// out).
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::SeqCst)
}

/// Heap allocations of the calling thread so far.
pub fn thread_allocations() -> u64 {
    THREAD_ALLOCATIONS.with(|c| c.get())
}
