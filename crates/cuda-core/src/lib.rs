//! Safe essentials of the CUDA driver API: [`Context`], [`Stream`] and the
//! operations queued on it, [`Event`], [`DeviceBuffer`], [`PinnedBuffer`],
//! [`HostRegistration`], views of part of a buffer, 2-D regions with a row pitch
//! ([`PitchedBuffer`], [`DeviceView2d`]), and one [`Error`] type.
//!
//! The driver is loaded at run time (see `cuda-sys`): a machine without it builds
//! and runs everything up to the first call that needs it, which returns
//! [`Error::DriverNotFound`]. The loader tries the platform's usual names, or the
//! library named by the `CUDA_DRIVER_LIBRARY` environment variable, or one given to
//! [`load_driver_from`].
//!
//! ```no_run
//! use cuda_core::{Context, DeviceBuffer, PinnedBuffer, Stream};
//!
//! let ctx = Context::new(0)?;
//! let stream = Stream::new(&ctx)?;
//! let mut d = DeviceBuffer::<f32>::alloc(1024)?;
//! // Synchronous, from any host memory:
//! let host: Vec<f32> = (0..1024).map(|i| i as f32).collect();
//! d.copy_from_host(&host)?;
//! // Queued on a stream, from and into page-locked memory:
//! let mut pinned = PinnedBuffer::<f32>::alloc(1024)?;
//! stream.memcpy_dtoh(&d, &mut pinned)?;
//! stream.memset_zeros(&mut d.slice_mut(512..)?)?;
//! assert_eq!(&pinned[..], &host[..]); // waits for the queued copy first
//! # Ok::<(), cuda_core::Error>(())
//! ```
//!
//! # 2-D regions: rows with padding
//!
//! Frames often come with padding after each row: a decoder's line size is larger
//! than `width * channels`, and device surfaces from `cuMemAllocPitch` (NVDEC, NPP,
//! TensorRT plugins) start each row at an aligned address. [`PitchedBuffer`]
//! allocates such a surface (or wraps one with
//! [`PitchedBuffer::from_raw_borrowed`]); [`DeviceView2d`] / [`DeviceView2dMut`] lay
//! rows with any pitch over a linear [`DeviceBuffer`] or view. Every one of them is a
//! [`DeviceSlice2d`] / [`DeviceSlice2dMut`], which [`Stream::memcpy_2d_htod`],
//! [`Stream::memcpy_2d_dtoh`] and their `_sync` forms take, with the host side's own
//! pitch in bytes: one `cuMemcpy2DAsync` moves every row, and neither side's padding
//! is read or written. [`Layout2d`] is the shape they check; a pitch shorter than a
//! row, or rows reaching past the memory, is an error naming the numbers before any
//! driver call.
//!
//! ```no_run
//! use cuda_core::{Context, PinnedBuffer, PitchedBuffer, Stream};
//!
//! let ctx = Context::new(0)?;
//! let stream = Stream::new(&ctx)?;
//! // 480 rows of 641 RGB pixels on the device, at the driver's pitch...
//! let mut surface = PitchedBuffer::<[u8; 3]>::alloc(641, 480)?;
//! // ...from host rows of 682 pixels (2046 bytes) each.
//! let host = PinnedBuffer::<[u8; 3]>::alloc(682 * 480)?;
//! stream.memcpy_2d_htod(&host, 682 * 3, &mut surface)?;
//! stream.synchronize()?;
//! # Ok::<(), cuda_core::Error>(())
//! ```
//!
//! # Soundness of queued operations
//!
//! A queued copy outlives the call that queued it, so safe code must not be able to
//! read, write or free memory while one still uses it. The design chosen here: **each
//! buffer records the queued work that uses it, and its host accessors, synchronous
//! copies and `Drop` wait for that work**, as cudarc's pinned slices do. What differs
//! from cudarc is how the record is kept: instead of recording a CUDA event after
//! every queued operation (a driver call per copy; cudarc's pinned copies measured
//! about 2 µs slower than raw ones at 150 KiB on our H200), each operation takes a
//! ticket from its stream, and the stream knows up to which ticket everything is
//! complete, because every synchronisation through this crate ([`Stream::synchronize`],
//! [`Event::synchronize`], [`Event::query`], [`Stream::query`]) raises that mark.
//! Checking that a buffer is free is then one atomic load, and a copy followed by a
//! stream synchronisation — the common synchronous pattern — costs no driver call
//! beyond the copy and the sync themselves.
//!
//! The rules, which hold against every safe use (including `mem::forget`):
//! - Queued operations take page-locked host memory whose life the borrow checker
//!   cannot end early: a [`PinnedBuffer`] (forgetting it leaks it, never frees it) or
//!   a view of one, or a [`HostRegistration`] of `'static` memory. A registration of
//!   borrowed memory works with the `_sync` copies, which wait before returning.
//! - Host access to a pinned buffer waits for queued copies into it (shared access)
//!   or for every queued use (exclusive access). `Deref` cannot return an error: a
//!   failed wait is recorded ([`check_deferred_errors`]) and access granted, since
//!   after a failed wait the stream's work is over one way or the other.
//! - `Drop` of a buffer, registration or pinned memory waits for queued work that
//!   uses it before freeing it.
//! - A buffer used on a second stream first waits (on the host) for its queued uses
//!   on the first, so one buffer's record follows one stream.
//! - Mutable views of one pinned buffer ([`PinnedBuffer::split_at_mut`],
//!   [`PinnedBuffer::slice_mut`]) keep their own records, so one part can be filled on
//!   the host while a copy from another is in flight (double buffering in one
//!   allocation).
//! - The halves of one device buffer ([`DeviceBuffer::split_at_mut`]) share its
//!   record: both can be written by one batch of copies, and the buffer waits for
//!   every copy into either.
//!
//! Work you queue yourself through raw handles (`as_raw`, `as_device_ptr`) is not
//! tracked; synchronise it yourself.
//!
//! # cudarc's memory and streams
//!
//! With the `cudarc` feature, the module `cudarc_bridge` lets cudarc's `CudaSlice`,
//! `CudaView`, `CudaViewMut` and streams into every operation here (and in
//! `cuda-staging`): `Stream::borrow_cudarc` wraps cudarc's stream, and
//! `CudarcView` / `CudarcViewMut` are device memory like a `DeviceBuffer`'s views,
//! with cudarc's own events waited for and recorded as its copies do. The module's
//! docs say what is guaranteed, and which CUDA version cudarc is then built for.
//!
//! # Errors that `Drop` cannot return
//!
//! A failed free, unregister, destroy or wait in `Drop` is recorded, not discarded:
//! see [`check_deferred_errors`] and [`deferred_error_count`].
//!
//! # When the GPU faults
//!
//! A kernel that faults (an illegal or misaligned address, an illegal instruction, a
//! device-side assert, a watchdog timeout) poisons its CUDA context for the whole
//! process: here the device's primary context, which the CUDA runtime, and so ONNX
//! Runtime, TensorRT or PyTorch in the same process, share with this crate. NVIDIA
//! documents that only a restart of the process recovers. Measured on our H200 with
//! the raw driver: after a `CUDA_ERROR_ILLEGAL_ADDRESS`, `cuDevicePrimaryCtxRelease`
//! then `cuDevicePrimaryCtxReset` returned success, but the next
//! `cuDevicePrimaryCtxRetain` returned `CUDA_ERROR_ILLEGAL_ADDRESS` again.
//!
//! - **Every call returns the error**, and none hangs: the operation in flight when
//!   the fault comes, and every later copy, wait, allocation, stream or event in that
//!   context, from any thread, whoever's kernel faulted. (`cuda-staging`'s fault
//!   tests check that each returns within 2 s.)
//! - **`Drop` never panics and never hangs.** Buffers, registrations, events and
//!   streams dropped after a fault record the errors of their waits, frees and
//!   destroys; [`check_deferred_errors`] reports them (the first whole, the rest
//!   counted, in one store for the whole process).
//! - **[`Error::is_sticky`] says "restart the process"**: true for the codes NVIDIA
//!   documents as poisoning the context ([`DriverError::is_sticky`] lists them),
//!   directly or inside [`Error::Deferred`]; false for bad input, out of memory and
//!   the other errors of one call, after which the context is as usable as before.
//! - **A failed wait ends the work it waited for:** when [`Stream::synchronize`] or
//!   [`Event::synchronize`] fails, it first waits for the whole context, then counts
//!   the work queued before it as over (done, or ended by the failure), so that the
//!   memory that work used may be reused or freed; this is what lets host accessors
//!   and `Drop` go on after a fault. After a fault that wait returns at once.
//!
//! ```no_run
//! # fn main() -> cuda_core::Result<()> {
//! use cuda_core::{Context, DeviceBuffer, PinnedBuffer, Stream};
//!
//! let ctx = Context::new(0)?;
//! let stream = Stream::new(&ctx)?;
//! let d = DeviceBuffer::<f32>::zeroed(1024)?;
//! let mut host = PinnedBuffer::<f32>::alloc(1024)?;
//! // ... a model's kernels queued on `stream` ...
//! let landed = stream
//!     .memcpy_dtoh(&d, &mut host)
//!     .and_then(|()| stream.synchronize());
//! if let Err(e) = landed {
//!     if e.is_sticky() {
//!         // The context is gone for this process: report it, exit, and let the
//!         // supervisor start a fresh process.
//!         eprintln!("GPU fault, restarting: {e}");
//!         std::process::exit(1);
//!     }
//!     return Err(e); // this call failed; the context is fine
//! }
//! # Ok(())
//! # }
//! ```
#![deny(unsafe_op_in_unsafe_fn)]

mod batch;
mod context;
#[cfg(feature = "cudarc")]
mod cudarc_binding;
#[cfg(feature = "cudarc")]
pub mod cudarc_bridge;
#[cfg(feature = "cudarc")]
mod cudarc_memory;
mod deferred;
mod device_buffer;
mod device_view;
mod driver_error;
mod error;
mod event;
mod host_registration;
mod layout_2d;
mod memory;
mod pinned;
mod pitched_buffer;
mod pointer;
pub mod result;
mod stream;
mod stream_2d;
mod tracking;
mod view_2d;
mod wait;

pub use batch::MAX_BATCH;
pub use bytemuck;
pub use context::{Context, ContextGuard};
pub use cuda_sys as sys;
/// The cudarc this crate's `cudarc` feature bridges to (see [`cudarc_bridge`]), for
/// naming its types in the version the bridge was built against.
#[cfg(feature = "cudarc")]
pub use cudarc;
pub use deferred::{check_deferred_errors, deferred_error_count};
pub use device_buffer::DeviceBuffer;
pub use device_view::{DeviceView, DeviceViewMut};
pub use error::{DriverError, Error, Result};
pub use event::Event;
pub use host_registration::HostRegistration;
pub use layout_2d::Layout2d;
pub use memory::{
    DeviceAccess, DeviceSlice, DeviceSliceMut, HostAccess, PageLockedSlice, PageLockedSliceMut,
};
pub use pinned::{PinnedBuffer, PinnedView, PinnedViewMut};
pub use pitched_buffer::PitchedBuffer;
pub use pointer::{query_host_memory, HostMemory};
pub use stream::Stream;
pub use view_2d::{Device2dAccess, DeviceSlice2d, DeviceSlice2dMut, DeviceView2d, DeviceView2dMut};
pub use wait::{WaitPolicy, DEFAULT_SPIN, MAX_POLL_SLEEP, POLL_SLEEP};

/// Loads the CUDA driver from `library` (a file name or a path) instead of the
/// usual names, for a driver the system loader does not find by itself. Works after
/// a failed default load; fails with [`Error::DriverAlreadyLoaded`] once another
/// library is in use.
///
/// # Safety
/// 1. Opening `library` runs its initialisers in this process (as `dlopen` does):
///    it must be the NVIDIA driver library, or a path that opens nothing.
pub unsafe fn load_driver_from(library: &str) -> Result<()> {
    // SAFETY: condition 1.
    unsafe { cuda_sys::load_driver_from(library) }
        .map(|_| ())
        .map_err(Error::from)
}

/// `n * size_of::<T>()`, or [`Error::SizeOverflow`] naming `op`.
pub fn byte_len<T>(op: &'static str, n: usize) -> Result<usize> {
    let elem_bytes = std::mem::size_of::<T>();
    n.checked_mul(elem_bytes)
        .ok_or(Error::SizeOverflow { op, n, elem_bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    static_assertions::assert_impl_all!(Context: Send, Sync, Clone);
    static_assertions::assert_impl_all!(Stream: Send, Sync);
    static_assertions::assert_impl_all!(Event: Send, Sync);
    static_assertions::assert_impl_all!(DeviceBuffer<f32>: Send, Sync);
    static_assertions::assert_impl_all!(PinnedBuffer<u8>: Send, Sync);
    static_assertions::assert_impl_all!(PinnedViewMut<'static, u8>: Send, Sync);
    static_assertions::assert_impl_all!(PitchedBuffer<[u8; 3]>: Send, Sync);
    static_assertions::assert_impl_all!(DeviceView2d<'static, f32>: Send, Sync, Copy);
    static_assertions::assert_impl_all!(DeviceView2dMut<'static, f32>: Send, Sync);
    static_assertions::assert_not_impl_any!(DeviceView2dMut<'static, f32>: Clone);
    static_assertions::assert_not_impl_any!(ContextGuard<'static>: Send);
    static_assertions::assert_impl_all!(Error: Send, Sync, std::error::Error);

    #[test]
    fn byte_len_checks_overflow() {
        assert_eq!(byte_len::<f32>("x", 10).unwrap(), 40);
        assert_eq!(byte_len::<[u8; 3]>("x", 0).unwrap(), 0);
        let e = byte_len::<u64>("alloc", usize::MAX / 4).unwrap_err();
        assert_eq!(
            e,
            Error::SizeOverflow {
                op: "alloc",
                n: usize::MAX / 4,
                elem_bytes: 8
            }
        );
    }

    #[test]
    fn overflowing_alloc_fails_before_the_driver() {
        // Holds with or without a driver: the size check comes first.
        let e = DeviceBuffer::<u64>::alloc(usize::MAX / 2).unwrap_err();
        assert!(
            matches!(e, Error::SizeOverflow { elem_bytes: 8, .. }),
            "{e}"
        );
        let e = PinnedBuffer::<u32>::alloc(usize::MAX).unwrap_err();
        assert!(
            matches!(e, Error::SizeOverflow { elem_bytes: 4, .. }),
            "{e}"
        );
    }

    #[test]
    fn zero_length_pinned_buffer_pins_nothing_and_views_check_ranges() {
        let mut p = PinnedBuffer::<f64>::alloc(0).unwrap();
        assert!(p.is_empty());
        assert!(p.context().is_none());
        assert_eq!(&*p, &[] as &[f64]);
        assert!(p.slice(..).unwrap().is_empty());
        assert_eq!(
            p.slice(0..1).unwrap_err(),
            Error::OutOfRange {
                op: "PinnedBuffer::slice",
                start: 0,
                end: 1,
                len: 0
            }
        );
        assert!(p.split_at_mut(1).is_err());
        let (a, b) = p.split_at_mut(0).unwrap();
        assert!(a.is_empty() && b.is_empty());
    }

    #[test]
    fn drop_errors_are_recorded_and_reported_once() {
        let before = deferred_error_count();
        // Drain whatever an earlier test left.
        let _ = check_deferred_errors();
        deferred::record(
            "cuMemFree",
            Error::Driver(DriverError::new(cuda_sys::CUDA_ERROR_INVALID_VALUE)),
        );
        deferred::record(
            "cuEventDestroy",
            Error::Driver(DriverError::new(cuda_sys::CUDA_ERROR_INVALID_CONTEXT)),
        );
        assert_eq!(
            deferred_error_count(),
            before + 2,
            "nothing else here records"
        );
        match check_deferred_errors() {
            Err(Error::Deferred { what, more, source }) => {
                assert_eq!(what, "cuMemFree");
                assert_eq!(more, 1, "the second error is counted behind the first");
                assert_eq!(
                    source.driver_code(),
                    Some(cuda_sys::CUDA_ERROR_INVALID_VALUE)
                );
            }
            other => panic!("expected the recorded error, got {other:?}"),
        }
    }
}
