//! Which cudarc memory the bridge's views take ([`CudarcMemory`], [`CudarcMemoryMut`]):
//! cudarc's own slice and view types only, sealed, each giving its length, its context
//! and its device pointer through cudarc's own calls.

use cuda_sys::{CUcontext, CUdeviceptr};
use cudarc::driver::{
    CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut,
    DeviceSlice as CudarcSlice, SyncOnDrop,
};

mod sealed {
    use super::*;

    /// What [`crate::cudarc_bridge::CudarcView::new`] needs of cudarc memory it may read.
    pub trait Read<'a, T> {
        /// Elements.
        fn len(&self) -> usize;
        /// The context the memory lives in (the driver handle).
        fn context(&self) -> CUcontext;
        /// The device pointer, through cudarc's `DevicePtr` on `stream`.
        fn device_ptr(self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>);
    }

    /// What [`crate::cudarc_bridge::CudarcViewMut::new`] needs of cudarc memory it may write.
    pub trait Write<'a, T> {
        /// Elements.
        fn len(&self) -> usize;
        /// The context the memory lives in (the driver handle).
        fn context(&self) -> CUcontext;
        /// The device pointer, through cudarc's `DevicePtrMut` on `stream`.
        fn device_ptr_mut(self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>);
    }

    /// The driver handle of the context of cudarc memory `m`.
    pub(super) fn context_of<T>(m: &impl CudarcSlice<T>) -> CUcontext {
        m.stream().context().cu_ctx().cast()
    }
}

/// cudarc device memory that a [`CudarcView`](crate::cudarc_bridge::CudarcView) can read: `&CudaSlice<T>`,
/// `&CudaView<T>`, `&CudaViewMut<T>`, or a `CudaView<T>` by value (so that
/// `CudarcView::new(slice.slice(a..b), &stream)` works). Sealed: only cudarc's own
/// memory types, whose pointers and lengths cudarc vouches for.
pub trait CudarcMemory<'a, T>: sealed::Read<'a, T> {}

impl<'a, T, M: sealed::Read<'a, T>> CudarcMemory<'a, T> for M {}

/// cudarc device memory that a [`CudarcViewMut`](crate::cudarc_bridge::CudarcViewMut) can write: `&mut CudaSlice<T>`,
/// `&mut CudaViewMut<T>`, or a `CudaViewMut<T>` by value (`slice.slice_mut(a..b)`).
/// Sealed, as [`CudarcMemory`].
pub trait CudarcMemoryMut<'a, T>: sealed::Write<'a, T> {}

impl<'a, T, M: sealed::Write<'a, T>> CudarcMemoryMut<'a, T> for M {}

/// The sealed traits for cudarc's memory types: the length and the context from
/// cudarc's own `DeviceSlice`, the pointer through `$get` (cudarc's `DevicePtr` /
/// `DevicePtrMut` for borrowed memory, a view's own method for a view taken by
/// value).
macro_rules! cudarc_memory {
    ($trait:ident :: $method:ident via $get:path, by ref: $($ty:ty),+) => {
        $(
            impl<'a, T> sealed::$trait<'a, T> for $ty {
                fn len(&self) -> usize {
                    CudarcSlice::len(*self)
                }
                fn context(&self) -> CUcontext {
                    sealed::context_of(*self)
                }
                fn $method(self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
                    $get(self, stream)
                }
            }
        )+
    };
    ($trait:ident :: $method:ident via $get:path, by value: $ty:ty) => {
        impl<'a, T> sealed::$trait<'a, T> for $ty {
            fn len(&self) -> usize {
                CudarcSlice::len(self)
            }
            fn context(&self) -> CUcontext {
                sealed::context_of(self)
            }
            fn $method(self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
                $get(self, stream)
            }
        }
    };
}

cudarc_memory!(Read::device_ptr via DevicePtr::device_ptr, by ref:
    &'a CudaSlice<T>, &'a CudaView<'_, T>, &'a CudaViewMut<'_, T>);
cudarc_memory!(Read::device_ptr via CudaView::view_ptr, by value: CudaView<'a, T>);
cudarc_memory!(Write::device_ptr_mut via DevicePtrMut::device_ptr_mut, by ref:
    &'a mut CudaSlice<T>, &'a mut CudaViewMut<'_, T>);
cudarc_memory!(Write::device_ptr_mut via CudaViewMut::view_ptr_mut, by value: CudaViewMut<'a, T>);
