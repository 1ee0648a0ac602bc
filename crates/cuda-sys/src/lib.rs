//! Raw CUDA driver bindings.
//!
//! * Handle types, structs and constants come from [`cuda_driver_sys`] (generated
//!   from CUDA 10.2) and are re-exported here.
//! * The driver functions this workspace calls are **not** linked at build time:
//!   [`Driver::load`] resolves them from `libcuda.so.1` (Windows: `nvcuda.dll`) at
//!   run time with [`libloading`]. A machine without the driver can build, link and
//!   run everything that does not touch the GPU.
//! * Every function is declared as returning a plain integer ([`CuResult`]), not
//!   `cuda_driver_sys::CUresult`: that Rust `enum` lacks codes newer drivers return
//!   (34, 46, 222, 223, 912, ...), and receiving an unlisted value into a Rust enum is
//!   undefined behaviour. Callers convert the integer in one checked place
//!   (`cuda_core::result`).
//!
//! Nothing here is safe to call without reading the CUDA driver API reference; the
//! safe layer is `cuda-core`.
#![allow(non_camel_case_types, non_snake_case, clippy::missing_safety_doc)]
#![allow(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::fmt;
use std::sync::Arc;

mod loader;

pub use cuda_driver_sys::{
    CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUmemorytype, CUmodule, CUstream,
    CUDA_MEMCPY2D, CU_MEMHOSTALLOC_DEVICEMAP, CU_MEMHOSTALLOC_PORTABLE,
    CU_MEMHOSTALLOC_WRITECOMBINED, CU_MEMHOSTREGISTER_DEVICEMAP, CU_MEMHOSTREGISTER_PORTABLE,
};
pub use loader::{
    driver, driver_if_loaded, load_driver_from, LoadError, LoaderError, DRIVER_LIBRARY,
    DRIVER_LIBRARY_ENV, DRIVER_LIBRARY_NAMES,
};

/// A driver return code, exactly as the driver returned it.
pub type CuResult = u32;

/// `CUDA_SUCCESS`.
pub const CUDA_SUCCESS: CuResult = 0;
/// `CUDA_ERROR_INVALID_VALUE`.
pub const CUDA_ERROR_INVALID_VALUE: CuResult = 1;
/// `CUDA_ERROR_OUT_OF_MEMORY`.
pub const CUDA_ERROR_OUT_OF_MEMORY: CuResult = 2;
/// `CUDA_ERROR_NOT_INITIALIZED`.
pub const CUDA_ERROR_NOT_INITIALIZED: CuResult = 3;
/// `CUDA_ERROR_DEINITIALIZED`: the driver is shutting down (at process exit).
pub const CUDA_ERROR_DEINITIALIZED: CuResult = 4;
/// `CUDA_ERROR_NO_DEVICE`.
pub const CUDA_ERROR_NO_DEVICE: CuResult = 100;
/// `CUDA_ERROR_INVALID_DEVICE`.
pub const CUDA_ERROR_INVALID_DEVICE: CuResult = 101;
/// `CUDA_ERROR_INVALID_CONTEXT`.
pub const CUDA_ERROR_INVALID_CONTEXT: CuResult = 201;
/// `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`.
pub const CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: CuResult = 712;
/// `CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED`.
pub const CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: CuResult = 713;
/// `CUDA_ERROR_NOT_READY`.
pub const CUDA_ERROR_NOT_READY: CuResult = 600;

// The codes below are the ones NVIDIA's `cuda.h` (CUDA 13.1) documents as leaving the
// context, or the whole process, unusable: "any further CUDA work will return the same
// error. To continue using CUDA, the process must be terminated and relaunched"
// (`CUDA_ERROR_ASSERT`: "the context cannot be used anymore").

/// `CUDA_ERROR_CONTAINED` (CUDA 12.8): an error on the device, contained by the GPU's
/// error containment (invalid peer memory access over NVLink, some hardware errors).
pub const CUDA_ERROR_CONTAINED: CuResult = 226;
/// `CUDA_ERROR_ILLEGAL_ADDRESS`: a kernel loaded or stored at an invalid address.
pub const CUDA_ERROR_ILLEGAL_ADDRESS: CuResult = 700;
/// `CUDA_ERROR_LAUNCH_TIMEOUT`: a kernel ran past the display watchdog's limit.
pub const CUDA_ERROR_LAUNCH_TIMEOUT: CuResult = 702;
/// `CUDA_ERROR_ASSERT`: a device-side assert triggered.
pub const CUDA_ERROR_ASSERT: CuResult = 710;
/// `CUDA_ERROR_HARDWARE_STACK_ERROR`: stack corruption or overflow in a kernel.
pub const CUDA_ERROR_HARDWARE_STACK_ERROR: CuResult = 714;
/// `CUDA_ERROR_ILLEGAL_INSTRUCTION`: a kernel ran an illegal instruction.
pub const CUDA_ERROR_ILLEGAL_INSTRUCTION: CuResult = 715;
/// `CUDA_ERROR_MISALIGNED_ADDRESS`: a kernel loaded or stored at a misaligned address.
pub const CUDA_ERROR_MISALIGNED_ADDRESS: CuResult = 716;
/// `CUDA_ERROR_INVALID_ADDRESS_SPACE`: a kernel used an address of the wrong space.
pub const CUDA_ERROR_INVALID_ADDRESS_SPACE: CuResult = 717;
/// `CUDA_ERROR_INVALID_PC`: a kernel's program counter wrapped its address space.
pub const CUDA_ERROR_INVALID_PC: CuResult = 718;
/// `CUDA_ERROR_LAUNCH_FAILED`: an exception on the device while a kernel ran.
pub const CUDA_ERROR_LAUNCH_FAILED: CuResult = 719;
/// `CUDA_ERROR_TENSOR_MEMORY_LEAK`: a kernel exited without freeing its tensor memory.
pub const CUDA_ERROR_TENSOR_MEMORY_LEAK: CuResult = 721;
/// `CUDA_ERROR_MPS_CLIENT_TERMINATED`: the MPS server terminated this client.
pub const CUDA_ERROR_MPS_CLIENT_TERMINATED: CuResult = 810;
/// `CUDA_ERROR_EXTERNAL_DEVICE`: a device outside CUDA signalled an error.
pub const CUDA_ERROR_EXTERNAL_DEVICE: CuResult = 911;

/// `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`: the operation is not permitted while the
/// stream is being captured into a graph.
pub const CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: CuResult = 900;
/// `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`: the capture sequence was invalidated by an
/// earlier error.
pub const CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: CuResult = 901;
/// `CUDA_ERROR_STREAM_CAPTURE_IMPLICIT`: the operation would join a capture through the
/// legacy default stream's implicit synchronisation.
pub const CUDA_ERROR_STREAM_CAPTURE_IMPLICIT: CuResult = 906;
/// `CUDA_ERROR_CAPTURED_EVENT`: the event was last recorded inside a stream capture.
pub const CUDA_ERROR_CAPTURED_EVENT: CuResult = 907;

/// `CU_STREAM_NON_BLOCKING`.
pub const CU_STREAM_NON_BLOCKING: c_uint = 1;
/// `CU_STREAM_LEGACY`: the handle `0x1`, the legacy default stream of the calling
/// thread's current context (as the handle `NULL` is).
pub const CU_STREAM_LEGACY: CUstream = 0x1 as CUstream;
/// `CU_STREAM_PER_THREAD`: the handle `0x2`, the calling thread's own default stream of
/// its current context: a different stream on every thread.
pub const CU_STREAM_PER_THREAD: CUstream = 0x2 as CUstream;
/// `CU_STREAM_CAPTURE_STATUS_NONE`: the stream is not being captured.
pub const CU_STREAM_CAPTURE_STATUS_NONE: c_uint = 0;
/// `CU_EVENT_DISABLE_TIMING`.
pub const CU_EVENT_DISABLE_TIMING: c_uint = 2;
/// `CU_EVENT_DEFAULT`.
pub const CU_EVENT_DEFAULT: c_uint = 0;
/// `CU_EVENT_BLOCKING_SYNC`: `cuEventSynchronize` on the event blocks the calling
/// thread instead of spinning.
pub const CU_EVENT_BLOCKING_SYNC: c_uint = 1;
/// `CU_POINTER_ATTRIBUTE_CONTEXT`.
pub const CU_POINTER_ATTRIBUTE_CONTEXT: c_int = 1;
/// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE`.
pub const CU_POINTER_ATTRIBUTE_MEMORY_TYPE: c_int = 2;
/// `CU_POINTER_ATTRIBUTE_DEVICE_POINTER`.
pub const CU_POINTER_ATTRIBUTE_DEVICE_POINTER: c_int = 3;
/// `CU_POINTER_ATTRIBUTE_HOST_POINTER`.
pub const CU_POINTER_ATTRIBUTE_HOST_POINTER: c_int = 4;
/// `CU_POINTER_ATTRIBUTE_IS_MANAGED`.
pub const CU_POINTER_ATTRIBUTE_IS_MANAGED: c_int = 8;
/// `CU_POINTER_ATTRIBUTE_RANGE_START_ADDR`.
pub const CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: c_int = 11;
/// `CU_POINTER_ATTRIBUTE_RANGE_SIZE`.
pub const CU_POINTER_ATTRIBUTE_RANGE_SIZE: c_int = 12;
/// `CU_MEMORYTYPE_HOST`.
pub const CU_MEMORYTYPE_HOST: c_uint = 1;
/// `CU_MEMORYTYPE_DEVICE`.
pub const CU_MEMORYTYPE_DEVICE: c_uint = 2;
/// `CU_DEVICE_ATTRIBUTE_PCI_BUS_ID`.
pub const CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: c_int = 33;
/// `CU_JIT_ERROR_LOG_BUFFER`: the option value is a `char *` buffer for the JIT's
/// error log.
pub const CU_JIT_ERROR_LOG_BUFFER: c_uint = 5;
/// `CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES`: the option value is the buffer's size,
/// passed as the pointer's value (the driver writes back the bytes it used).
pub const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_uint = 6;

macro_rules! driver_api {
    (
        required { $( $(#[$doc:meta])* fn $name:ident = $sym:literal ( $($arg:ident : $ty:ty),* $(,)? ); )* }
        optional { $( $(#[$odoc:meta])* fn $oname:ident = $osym:literal ( $($oarg:ident : $oty:ty),* $(,)? ); )* }
    ) => {
        /// The driver functions this workspace calls, resolved from the driver library.
        ///
        /// Each field is the raw `extern "C"` function pointer; see the CUDA driver
        /// API reference for its contract. Optional entry points (newer than the oldest
        /// driver supported) are `None` where the driver lacks them. The library stays
        /// loaded for as long as the `Driver` lives (for [`driver()`], the whole process).
        pub struct Driver {
            _lib: libloading::Library,
            library: String,
            $( $(#[$doc])* pub $name: unsafe extern "C" fn($($ty),*) -> CuResult, )*
            $( $(#[$odoc])* pub $oname: Option<unsafe extern "C" fn($($oty),*) -> CuResult>, )*
        }

        impl Driver {
            /// Opens `library` (a file name the system loader searches for, or a path)
            /// and resolves every function, or says which part failed.
            ///
            /// # Safety
            /// 1. Opening `library` runs its initialisers: it must be a library whose
            ///    initialisers are sound to run in this process (the NVIDIA driver, or a
            ///    library that does not exist or lacks the CUDA symbols).
            /// 2. If it loads, its functions must have the CUDA driver API's signatures.
            pub unsafe fn load_from(library: &str) -> Result<Driver, LoadError> {
                // SAFETY: condition 1.
                let lib = unsafe { libloading::Library::new(library) }.map_err(|e| {
                    LoadError::LibraryNotFound {
                        library: library.to_owned(),
                        tried: vec![library.to_owned()],
                        errors: vec![LoaderError(Arc::new(e))],
                    }
                })?;
                $(
                    // SAFETY: condition 2; the symbol is declared with the signature of the CUDA driver
                    // API header for this (versioned) entry point, with the enum return
                    // widened to an integer of the same size.
                    let $name = unsafe {
                        lib.get::<unsafe extern "C" fn($($ty),*) -> CuResult>(concat!($sym, "\0").as_bytes())
                    }
                    .map(|s| *s)
                    .map_err(|e| LoadError::MissingSymbol {
                        library: library.to_owned(),
                        symbol: $sym,
                        source: LoaderError(Arc::new(e)),
                    })?;
                )*
                $(
                    // SAFETY: as above (condition 2); a missing optional symbol is `None`.
                    let $oname = unsafe {
                        lib.get::<unsafe extern "C" fn($($oty),*) -> CuResult>(concat!($osym, "\0").as_bytes())
                    }
                    .map(|s| *s)
                    .ok();
                )*
                Ok(Driver { _lib: lib, library: library.to_owned(), $($name,)* $($oname,)* })
            }
        }
    };
}

driver_api! {
required {
    /// `cuInit`
    fn cuInit = "cuInit"(flags: c_uint);
    /// `cuDriverGetVersion`
    fn cuDriverGetVersion = "cuDriverGetVersion"(version: *mut c_int);
    /// `cuGetErrorName`
    fn cuGetErrorName = "cuGetErrorName"(error: CuResult, name: *mut *const c_char);
    /// `cuGetErrorString`
    fn cuGetErrorString = "cuGetErrorString"(error: CuResult, text: *mut *const c_char);
    /// `cuDeviceGetCount`
    fn cuDeviceGetCount = "cuDeviceGetCount"(count: *mut c_int);
    /// `cuDeviceGet`
    fn cuDeviceGet = "cuDeviceGet"(device: *mut CUdevice, ordinal: c_int);
    /// `cuDeviceGetName`
    fn cuDeviceGetName = "cuDeviceGetName"(name: *mut c_char, len: c_int, device: CUdevice);
    /// `cuDeviceTotalMem_v2`
    fn cuDeviceTotalMem = "cuDeviceTotalMem_v2"(bytes: *mut usize, device: CUdevice);
    /// `cuDeviceGetAttribute`
    fn cuDeviceGetAttribute = "cuDeviceGetAttribute"(value: *mut c_int, attrib: c_int, device: CUdevice);
    /// `cuDevicePrimaryCtxRetain`
    fn cuDevicePrimaryCtxRetain = "cuDevicePrimaryCtxRetain"(ctx: *mut CUcontext, device: CUdevice);
    /// `cuDevicePrimaryCtxRelease_v2`
    fn cuDevicePrimaryCtxRelease = "cuDevicePrimaryCtxRelease_v2"(device: CUdevice);
    /// `cuCtxSetCurrent`
    fn cuCtxSetCurrent = "cuCtxSetCurrent"(ctx: CUcontext);
    /// `cuCtxGetCurrent`
    fn cuCtxGetCurrent = "cuCtxGetCurrent"(ctx: *mut CUcontext);
    /// `cuCtxPushCurrent_v2`
    fn cuCtxPushCurrent = "cuCtxPushCurrent_v2"(ctx: CUcontext);
    /// `cuCtxPopCurrent_v2`
    fn cuCtxPopCurrent = "cuCtxPopCurrent_v2"(ctx: *mut CUcontext);
    /// `cuCtxGetDevice`
    fn cuCtxGetDevice = "cuCtxGetDevice"(device: *mut CUdevice);
    /// `cuCtxSynchronize`
    fn cuCtxSynchronize = "cuCtxSynchronize"();
    /// `cuStreamCreate`
    fn cuStreamCreate = "cuStreamCreate"(stream: *mut CUstream, flags: c_uint);
    /// `cuStreamDestroy_v2`
    fn cuStreamDestroy = "cuStreamDestroy_v2"(stream: CUstream);
    /// `cuStreamSynchronize`
    fn cuStreamSynchronize = "cuStreamSynchronize"(stream: CUstream);
    /// `cuStreamWaitEvent`
    fn cuStreamWaitEvent = "cuStreamWaitEvent"(stream: CUstream, event: CUevent, flags: c_uint);
    /// `cuEventCreate`
    fn cuEventCreate = "cuEventCreate"(event: *mut CUevent, flags: c_uint);
    /// `cuEventDestroy_v2`
    fn cuEventDestroy = "cuEventDestroy_v2"(event: CUevent);
    /// `cuEventRecord`
    fn cuEventRecord = "cuEventRecord"(event: CUevent, stream: CUstream);
    /// `cuEventSynchronize`
    fn cuEventSynchronize = "cuEventSynchronize"(event: CUevent);
    /// `cuEventQuery`
    fn cuEventQuery = "cuEventQuery"(event: CUevent);
    /// `cuMemGetInfo_v2`
    fn cuMemGetInfo = "cuMemGetInfo_v2"(free: *mut usize, total: *mut usize);
    /// `cuMemAlloc_v2`
    fn cuMemAlloc = "cuMemAlloc_v2"(dptr: *mut CUdeviceptr, bytes: usize);
    /// `cuMemFree_v2`
    fn cuMemFree = "cuMemFree_v2"(dptr: CUdeviceptr);
    /// `cuMemAllocPitch_v2`: `height` rows of `width_bytes`, each row starting at a
    /// multiple of the pitch the driver writes back (`element_bytes`: 4, 8 or 16).
    fn cuMemAllocPitch = "cuMemAllocPitch_v2"(dptr: *mut CUdeviceptr, pitch: *mut usize, width_bytes: usize, height: usize, element_bytes: c_uint);
    /// `cuMemHostAlloc`
    fn cuMemHostAlloc = "cuMemHostAlloc"(pp: *mut *mut c_void, bytes: usize, flags: c_uint);
    /// `cuMemFreeHost`
    fn cuMemFreeHost = "cuMemFreeHost"(p: *mut c_void);
    /// `cuMemHostRegister_v2`
    fn cuMemHostRegister = "cuMemHostRegister_v2"(p: *mut c_void, bytes: usize, flags: c_uint);
    /// `cuMemHostUnregister`
    fn cuMemHostUnregister = "cuMemHostUnregister"(p: *mut c_void);
    /// `cuPointerGetAttribute`
    fn cuPointerGetAttribute = "cuPointerGetAttribute"(data: *mut c_void, attribute: c_int, ptr: CUdeviceptr);
    /// `cuPointerGetAttributes`
    fn cuPointerGetAttributes = "cuPointerGetAttributes"(count: c_uint, attributes: *mut c_int, data: *mut *mut c_void, ptr: CUdeviceptr);
    /// `cuMemcpyHtoD_v2`
    fn cuMemcpyHtoD = "cuMemcpyHtoD_v2"(dst: CUdeviceptr, src: *const c_void, bytes: usize);
    /// `cuMemcpyDtoH_v2`
    fn cuMemcpyDtoH = "cuMemcpyDtoH_v2"(dst: *mut c_void, src: CUdeviceptr, bytes: usize);
    /// `cuMemcpyHtoDAsync_v2`
    fn cuMemcpyHtoDAsync = "cuMemcpyHtoDAsync_v2"(dst: CUdeviceptr, src: *const c_void, bytes: usize, stream: CUstream);
    /// `cuMemcpyDtoHAsync_v2`
    fn cuMemcpyDtoHAsync = "cuMemcpyDtoHAsync_v2"(dst: *mut c_void, src: CUdeviceptr, bytes: usize, stream: CUstream);
    /// `cuMemcpyDtoDAsync_v2`
    fn cuMemcpyDtoDAsync = "cuMemcpyDtoDAsync_v2"(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize, stream: CUstream);
    /// `cuMemcpy2D_v2` (synchronous; the driver only reads `copy`)
    fn cuMemcpy2D = "cuMemcpy2D_v2"(copy: *const CUDA_MEMCPY2D);
    /// `cuMemcpy2DAsync_v2` (the driver only reads `copy`, during the call)
    fn cuMemcpy2DAsync = "cuMemcpy2DAsync_v2"(copy: *const CUDA_MEMCPY2D, stream: CUstream);
    /// `cuMemsetD8_v2`
    fn cuMemsetD8 = "cuMemsetD8_v2"(dst: CUdeviceptr, value: u8, count: usize);
    /// `cuMemsetD8Async`
    fn cuMemsetD8Async = "cuMemsetD8Async"(dst: CUdeviceptr, value: u8, count: usize, stream: CUstream);
    /// `cuMemsetD32Async`
    fn cuMemsetD32Async = "cuMemsetD32Async"(dst: CUdeviceptr, value: c_uint, count: usize, stream: CUstream);
    /// `cuStreamQuery`
    fn cuStreamQuery = "cuStreamQuery"(stream: CUstream);
    /// `cuEventElapsedTime` (CUDA 12 and older name; newer headers call it `_v1`)
    fn cuEventElapsedTime = "cuEventElapsedTime"(ms: *mut f32, start: CUevent, end: CUevent);
    /// `cuModuleLoadDataEx` (`options` are `CUjit_option` values)
    fn cuModuleLoadDataEx = "cuModuleLoadDataEx"(module: *mut CUmodule, image: *const c_void, num_options: c_uint, options: *mut c_uint, option_values: *mut *mut c_void);
    /// `cuModuleGetFunction`
    fn cuModuleGetFunction = "cuModuleGetFunction"(function: *mut CUfunction, module: CUmodule, name: *const c_char);
    /// `cuModuleUnload`
    fn cuModuleUnload = "cuModuleUnload"(module: CUmodule);
    /// `cuLaunchKernel`
    fn cuLaunchKernel = "cuLaunchKernel"(function: CUfunction, grid_x: c_uint, grid_y: c_uint, grid_z: c_uint, block_x: c_uint, block_y: c_uint, block_z: c_uint, shared_bytes: c_uint, stream: CUstream, params: *mut *mut c_void, extra: *mut *mut c_void);
}
optional {
    /// `cuStreamIsCapturing` (CUDA 10.0): whether a stream is being captured into a
    /// graph (`CU_STREAM_CAPTURE_STATUS_*`). A driver without it has no stream capture.
    fn cuStreamIsCapturing = "cuStreamIsCapturing"(stream: CUstream, status: *mut c_uint);
    /// `cuMemcpyBatchAsync_v2` (CUDA 13.0): a batch of 1D copies in stream order.
    fn cuMemcpyBatchAsync_v2 = "cuMemcpyBatchAsync_v2"(dsts: *mut CUdeviceptr, srcs: *mut CUdeviceptr, sizes: *mut usize, count: usize, attrs: *mut CUmemcpyAttributes, attrs_idxs: *mut usize, num_attrs: usize, stream: CUstream);
    /// `cuMemcpyBatchAsync` (CUDA 12.8 and 12.9; CUDA 13 renamed it `_v2` and
    /// dropped `fail_idx`).
    fn cuMemcpyBatchAsync = "cuMemcpyBatchAsync"(dsts: *mut CUdeviceptr, srcs: *mut CUdeviceptr, sizes: *mut usize, count: usize, attrs: *mut CUmemcpyAttributes, attrs_idxs: *mut usize, num_attrs: usize, fail_idx: *mut usize, stream: CUstream);
}
}

impl Driver {
    /// The library name this driver was loaded from.
    pub fn library(&self) -> &str {
        &self.library
    }
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver")
            .field("library", &self.library)
            .finish_non_exhaustive()
    }
}

/// `CUmemcpyAttributes` (CUDA 12.8 and later), for [`Driver::cuMemcpyBatchAsync_v2`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CUmemcpyAttributes {
    /// `CUmemcpySrcAccessOrder`: one of the `CU_MEMCPY_SRC_ACCESS_ORDER_*` constants.
    pub src_access_order: c_uint,
    /// `CUmemLocation srcLocHint`: type.
    pub src_loc_hint_type: c_uint,
    /// `CUmemLocation srcLocHint`: id.
    pub src_loc_hint_id: c_int,
    /// `CUmemLocation dstLocHint`: type.
    pub dst_loc_hint_type: c_uint,
    /// `CUmemLocation dstLocHint`: id.
    pub dst_loc_hint_id: c_int,
    /// `CUmemcpyFlags`.
    pub flags: c_uint,
}

/// `CU_MEMCPY_SRC_ACCESS_ORDER_STREAM`: sources are read in stream order, after
/// work queued before the batch.
pub const CU_MEMCPY_SRC_ACCESS_ORDER_STREAM: c_uint = 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_2d_copy_descriptor_has_the_c_layout() {
        // CUDA_MEMCPY2D on a 64-bit target: per side x, y (size_t), the memory type
        // (an enum, padded to 8), host, device and array pointers and the pitch, then
        // WidthInBytes and Height.
        #[cfg(target_pointer_width = "64")]
        assert_eq!(std::mem::size_of::<CUDA_MEMCPY2D>(), 128);
        assert_eq!(std::mem::size_of::<CUmemorytype>(), 4);
    }

    #[test]
    fn batch_copy_attributes_have_the_c_layout() {
        // CUmemcpyAttributes: an enum, two CUmemLocation {enum, int}, an unsigned int.
        assert_eq!(std::mem::size_of::<CUmemcpyAttributes>(), 24);
        assert_eq!(std::mem::align_of::<CUmemcpyAttributes>(), 4);
    }
}
