//! The thin checked layer: one function per driver call, taking and returning Rust
//! values, turning the return code into [`Result`]. This is the one place where
//! return codes are checked; the safe types call these functions, never the raw
//! function pointers.
//!
//! Functions that take raw pointers or handles whose validity the compiler cannot
//! see are `unsafe`; each states what it needs.

use std::ffi::{c_int, c_uint, c_void, CStr};
use std::ptr;

use cuda_sys::{
    CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUmodule, CUstream, CuResult, Driver,
};

use crate::error::{DriverError, Error, Result};

/// The process-wide driver, or why it cannot be loaded.
#[inline]
pub fn driver() -> Result<&'static Driver> {
    cuda_sys::driver().map_err(Error::from)
}

/// Converts a driver return code.
#[inline]
pub fn check(code: CuResult) -> Result<()> {
    if code == cuda_sys::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::Driver(DriverError::new(code)))
    }
}

impl DriverError {
    /// Describes `code`: its name and description from the driver
    /// (`cuGetErrorName` / `cuGetErrorString`) when it is loaded, otherwise from a
    /// built-in table.
    pub fn new(code: CuResult) -> DriverError {
        let (name, description) = match cuda_sys::driver_if_loaded() {
            Some(d) => (error_name(d, code), error_string(d, code)),
            None => (None, None),
        };
        DriverError::described(code, name, description)
    }
}

fn error_name(d: &Driver, code: CuResult) -> Option<&'static str> {
    let mut p = ptr::null();
    // SAFETY: `p` is a valid out-pointer; the driver writes a pointer to a static
    // string or leaves an error.
    let rc = unsafe { (d.cuGetErrorName)(code, &mut p) };
    static_str(rc, p)
}

fn error_string(d: &Driver, code: CuResult) -> Option<&'static str> {
    let mut p = ptr::null();
    // SAFETY: as in `error_name`.
    let rc = unsafe { (d.cuGetErrorString)(code, &mut p) };
    static_str(rc, p)
}

fn static_str(rc: CuResult, p: *const std::ffi::c_char) -> Option<&'static str> {
    if rc != cuda_sys::CUDA_SUCCESS || p.is_null() {
        return None;
    }
    // SAFETY: on success the driver returns a NUL-terminated string in its own static
    // storage, alive while the library is loaded; the process-wide driver is never
    // unloaded.
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

/// `cuInit(0)`.
pub fn init() -> Result<()> {
    let d = driver()?;
    // SAFETY: cuInit has no preconditions and may be called repeatedly.
    check(unsafe { (d.cuInit)(0) })
}

/// `cuDriverGetVersion`, as (major, minor).
pub fn driver_version() -> Result<(i32, i32)> {
    let d = driver()?;
    let mut v: c_int = 0;
    // SAFETY: `v` is a valid out-pointer.
    check(unsafe { (d.cuDriverGetVersion)(&mut v) })?;
    Ok((v / 1000, (v % 1000) / 10))
}

/// `cuDeviceGetCount` (after `init`).
pub fn device_count() -> Result<usize> {
    let d = driver()?;
    let mut n: c_int = 0;
    // SAFETY: `n` is a valid out-pointer.
    check(unsafe { (d.cuDeviceGetCount)(&mut n) })?;
    Ok(n.max(0) as usize)
}

/// `cuDeviceGet`.
pub fn device_get(ordinal: usize) -> Result<CUdevice> {
    let d = driver()?;
    let ordinal =
        c_int::try_from(ordinal).map_err(|_| Error::InvalidDevice { ordinal, count: 0 })?;
    let mut dev: CUdevice = 0;
    // SAFETY: `dev` is a valid out-pointer.
    check(unsafe { (d.cuDeviceGet)(&mut dev, ordinal) })?;
    Ok(dev)
}

/// `cuDeviceGetName`.
pub fn device_name(dev: CUdevice) -> Result<String> {
    let d = driver()?;
    let mut buf = [0 as std::ffi::c_char; 256];
    // SAFETY: `buf` is writable for its full length, which is passed.
    check(unsafe { (d.cuDeviceGetName)(buf.as_mut_ptr(), buf.len() as c_int, dev) })?;
    // SAFETY: the driver NUL-terminates within `len`; the last byte is still 0.
    let s = unsafe { CStr::from_ptr(buf.as_ptr()) };
    Ok(s.to_string_lossy().into_owned())
}

/// `cuDeviceTotalMem_v2`.
pub fn device_total_mem(dev: CUdevice) -> Result<usize> {
    let d = driver()?;
    let mut n = 0usize;
    // SAFETY: `n` is a valid out-pointer.
    check(unsafe { (d.cuDeviceTotalMem)(&mut n, dev) })?;
    Ok(n)
}

/// `cuDevicePrimaryCtxRetain`.
pub fn primary_ctx_retain(dev: CUdevice) -> Result<CUcontext> {
    let d = driver()?;
    let mut ctx = ptr::null_mut();
    // SAFETY: `ctx` is a valid out-pointer; `dev` came from cuDeviceGet or is rejected.
    check(unsafe { (d.cuDevicePrimaryCtxRetain)(&mut ctx, dev) })?;
    Ok(ctx)
}

/// `cuDevicePrimaryCtxRelease_v2`.
///
/// # Safety
/// 1. Balances exactly one earlier successful [`primary_ctx_retain`] of `dev`.
pub unsafe fn primary_ctx_release(dev: CUdevice) -> Result<()> {
    let d = driver()?;
    // SAFETY: the caller balances a retain (condition 1).
    check(unsafe { (d.cuDevicePrimaryCtxRelease)(dev) })
}

/// `cuCtxGetCurrent`; null when none is current.
pub fn ctx_get_current() -> Result<CUcontext> {
    let d = driver()?;
    let mut ctx = ptr::null_mut();
    // SAFETY: `ctx` is a valid out-pointer.
    check(unsafe { (d.cuCtxGetCurrent)(&mut ctx) })?;
    Ok(ctx)
}

/// `cuCtxSetCurrent`.
///
/// # Safety
/// 1. `ctx` is null or a live context.
pub unsafe fn ctx_set_current(ctx: CUcontext) -> Result<()> {
    let d = driver()?;
    // SAFETY: condition 1.
    check(unsafe { (d.cuCtxSetCurrent)(ctx) })
}

/// `cuCtxPushCurrent_v2`.
///
/// # Safety
/// 1. `ctx` is a live context, popped again on this thread by [`ctx_pop_current`].
pub unsafe fn ctx_push_current(ctx: CUcontext) -> Result<()> {
    let d = driver()?;
    // SAFETY: condition 1.
    check(unsafe { (d.cuCtxPushCurrent)(ctx) })
}

/// `cuCtxPopCurrent_v2`.
pub fn ctx_pop_current() -> Result<CUcontext> {
    let d = driver()?;
    let mut ctx = ptr::null_mut();
    // SAFETY: `ctx` is a valid out-pointer; popping an empty stack is an error code.
    check(unsafe { (d.cuCtxPopCurrent)(&mut ctx) })?;
    Ok(ctx)
}

/// `cuCtxGetDevice` of the current context.
pub fn ctx_get_device() -> Result<CUdevice> {
    let d = driver()?;
    let mut dev: CUdevice = 0;
    // SAFETY: `dev` is a valid out-pointer.
    check(unsafe { (d.cuCtxGetDevice)(&mut dev) })?;
    Ok(dev)
}

/// `cuCtxSynchronize` of the current context.
pub fn ctx_synchronize() -> Result<()> {
    let d = driver()?;
    // SAFETY: no pointer arguments; errors come back as codes.
    check(unsafe { (d.cuCtxSynchronize)() })
}

/// `cuMemGetInfo_v2` of the current context: (free, total) bytes.
pub fn mem_get_info() -> Result<(usize, usize)> {
    let d = driver()?;
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: valid out-pointers.
    check(unsafe { (d.cuMemGetInfo)(&mut free, &mut total) })?;
    Ok((free, total))
}

/// `cuStreamCreate` in the current context.
pub fn stream_create(flags: c_uint) -> Result<CUstream> {
    let d = driver()?;
    let mut s = ptr::null_mut();
    // SAFETY: `s` is a valid out-pointer.
    check(unsafe { (d.cuStreamCreate)(&mut s, flags) })?;
    Ok(s)
}

/// `cuStreamDestroy_v2`.
///
/// # Safety
/// 1. `stream` is a live stream created by [`stream_create`] and not used afterwards.
pub unsafe fn stream_destroy(stream: CUstream) -> Result<()> {
    let d = driver()?;
    // SAFETY: condition 1.
    check(unsafe { (d.cuStreamDestroy)(stream) })
}

/// `cuStreamSynchronize`.
///
/// # Safety
/// 1. `stream` is null (legacy default stream) or a live stream.
pub unsafe fn stream_synchronize(stream: CUstream) -> Result<()> {
    let d = driver()?;
    // SAFETY: condition 1.
    check(unsafe { (d.cuStreamSynchronize)(stream) })
}

/// `cuStreamWaitEvent`.
///
/// # Safety
/// 1. `stream` and `event` are live handles of the current context.
pub unsafe fn stream_wait_event(stream: CUstream, event: CUevent) -> Result<()> {
    let d = driver()?;
    // SAFETY: condition 1.
    check(unsafe { (d.cuStreamWaitEvent)(stream, event, 0) })
}

/// `cuStreamQuery`: `Ok(true)` when all work queued on `stream` is done,
/// `Ok(false)` while some is still running.
///
/// # Safety
/// 1. `stream` is null (legacy default stream) or a live stream.
pub unsafe fn stream_query(stream: CUstream) -> Result<bool> {
    let d = driver()?;
    // SAFETY: condition 1.
    ready(unsafe { (d.cuStreamQuery)(stream) })
}

/// `cuStreamIsCapturing`: whether `stream` is being captured into a graph (an active
/// or an invalidated capture sequence both count). `Ok(false)` when the driver has no
/// such entry point (a driver without stream capture). For the legacy default stream
/// the driver answers `CUDA_ERROR_STREAM_CAPTURE_IMPLICIT` while a blocking stream of
/// the context is captured: returned as the error.
///
/// # Safety
/// 1. `stream` is a live stream (or `NULL` / `CU_STREAM_LEGACY`) whose context is
///    current.
pub unsafe fn stream_is_capturing(stream: CUstream) -> Result<bool> {
    let d = driver()?;
    let Some(is_capturing) = d.cuStreamIsCapturing else {
        return Ok(false);
    };
    let mut status: std::ffi::c_uint = cuda_sys::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: condition 1; `status` is a valid place for the answer.
    check(unsafe { is_capturing(stream, &mut status) })?;
    Ok(status != cuda_sys::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// `CUDA_SUCCESS` as `true`, `CUDA_ERROR_NOT_READY` as `false`, anything else an error.
fn ready(rc: CuResult) -> Result<bool> {
    if rc == cuda_sys::CUDA_ERROR_NOT_READY {
        return Ok(false);
    }
    check(rc).map(|()| true)
}

/// `cuEventQuery`: `Ok(true)` once the work recorded before `event` is done.
///
/// # Safety
/// 1. `event` is a live event.
pub unsafe fn event_query(event: CUevent) -> Result<bool> {
    let d = driver()?;
    // SAFETY: condition 1.
    ready(unsafe { (d.cuEventQuery)(event) })
}

/// `cuEventElapsedTime`: milliseconds between two completed timing events.
///
/// # Safety
/// 1. `start` and `end` are live events of the same context, created without
///    `CU_EVENT_DISABLE_TIMING`.
pub unsafe fn event_elapsed_time(start: CUevent, end: CUevent) -> Result<f32> {
    let d = driver()?;
    let mut ms = 0f32;
    // SAFETY: `ms` is a valid out-pointer; condition 1.
    check(unsafe { (d.cuEventElapsedTime)(&mut ms, start, end) })?;
    Ok(ms)
}

/// `cuEventCreate` in the current context.
pub fn event_create(flags: c_uint) -> Result<CUevent> {
    let d = driver()?;
    let mut e = ptr::null_mut();
    // SAFETY: `e` is a valid out-pointer.
    check(unsafe { (d.cuEventCreate)(&mut e, flags) })?;
    Ok(e)
}

/// `cuEventDestroy_v2`.
///
/// # Safety
/// 1. `event` is a live event, not used afterwards.
pub unsafe fn event_destroy(event: CUevent) -> Result<()> {
    let d = driver()?;
    // SAFETY: condition 1.
    check(unsafe { (d.cuEventDestroy)(event) })
}

/// `cuEventRecord`.
///
/// # Safety
/// 1. `event` and `stream` are live handles of the same context.
pub unsafe fn event_record(event: CUevent, stream: CUstream) -> Result<()> {
    let d = driver()?;
    // SAFETY: condition 1.
    check(unsafe { (d.cuEventRecord)(event, stream) })
}

/// `cuEventSynchronize`.
///
/// # Safety
/// 1. `event` is a live event.
pub unsafe fn event_synchronize(event: CUevent) -> Result<()> {
    let d = driver()?;
    // SAFETY: condition 1.
    check(unsafe { (d.cuEventSynchronize)(event) })
}

/// `cuMemAlloc_v2` in the current context.
pub fn mem_alloc(bytes: usize) -> Result<CUdeviceptr> {
    let d = driver()?;
    let mut p: CUdeviceptr = 0;
    // SAFETY: `p` is a valid out-pointer.
    check(unsafe { (d.cuMemAlloc)(&mut p, bytes) })?;
    Ok(p)
}

/// `cuMemFree_v2`.
///
/// # Safety
/// 1. `ptr` came from [`mem_alloc`] and is not used afterwards.
pub unsafe fn mem_free(ptr: CUdeviceptr) -> Result<()> {
    let d = driver()?;
    // SAFETY: condition 1.
    check(unsafe { (d.cuMemFree)(ptr) })
}

/// `cuMemAllocPitch_v2` in the current context: `height` rows of `width_bytes`,
/// accessed in units of `element_bytes` (4, 8 or 16). Returns the allocation and the
/// pitch the driver chose (at least `width_bytes`); the allocation holds
/// `pitch * height` bytes.
pub fn mem_alloc_pitch(
    width_bytes: usize,
    height: usize,
    element_bytes: u32,
) -> Result<(CUdeviceptr, usize)> {
    let d = driver()?;
    let (mut p, mut pitch): (CUdeviceptr, usize) = (0, 0);
    // SAFETY: `p` and `pitch` are valid out-pointers.
    check(unsafe { (d.cuMemAllocPitch)(&mut p, &mut pitch, width_bytes, height, element_bytes) })?;
    Ok((p, pitch))
}

/// One side of a 2-D copy.
#[derive(Clone, Copy, Debug)]
pub enum Side2d {
    /// Host memory (pageable or page-locked) at this address.
    Host(*const c_void),
    /// Device memory at this address.
    Device(CUdeviceptr),
}

/// The rows of a 2-D copy: `height` rows of `width_bytes` from `src` (rows
/// `src_pitch` bytes apart) to `dst` (rows `dst_pitch` apart).
#[derive(Clone, Copy, Debug)]
pub struct Copy2d {
    /// Where the rows are read.
    pub src: Side2d,
    /// Bytes from one source row's start to the next's.
    pub src_pitch: usize,
    /// Where the rows are written (a `Side2d::Host` address is written through).
    pub dst: Side2d,
    /// Bytes from one destination row's start to the next's.
    pub dst_pitch: usize,
    /// Bytes per row.
    pub width_bytes: usize,
    /// Rows.
    pub height: usize,
}

impl Copy2d {
    /// The driver's descriptor of this copy.
    fn descriptor(&self) -> cuda_sys::CUDA_MEMCPY2D {
        use cuda_sys::CUmemorytype;
        let side = |s: Side2d| match s {
            Side2d::Host(p) => (CUmemorytype::CU_MEMORYTYPE_HOST, p, 0),
            Side2d::Device(p) => (CUmemorytype::CU_MEMORYTYPE_DEVICE, ptr::null(), p),
        };
        let (src_type, src_host, src_device) = side(self.src);
        let (dst_type, dst_host, dst_device) = side(self.dst);
        cuda_sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: src_type,
            srcHost: src_host,
            srcDevice: src_device,
            srcArray: ptr::null_mut(),
            srcPitch: self.src_pitch,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: dst_type,
            dstHost: dst_host.cast_mut(),
            dstDevice: dst_device,
            dstArray: ptr::null_mut(),
            dstPitch: self.dst_pitch,
            WidthInBytes: self.width_bytes,
            Height: self.height,
        }
    }
}

/// `cuMemcpy2D_v2` (synchronous: from pageable host memory it returns once the rows
/// are staged for the DMA, as `cuMemcpyHtoD` does).
///
/// # Safety
/// 1. For every row `r < height`, `[src + r * src_pitch, + width_bytes)` is readable
///    and `[dst + r * dst_pitch, + width_bytes)` writable (device memory of the
///    current context, or host memory), and the two do not overlap.
pub unsafe fn memcpy_2d(copy: &Copy2d) -> Result<()> {
    let d = driver()?;
    let desc = copy.descriptor();
    // SAFETY: the descriptor describes exactly the rows of condition 1; the driver
    // reads it during the call only.
    check(unsafe { (d.cuMemcpy2D)(&desc) })
}

/// `cuMemcpy2DAsync_v2`.
///
/// # Safety
/// 1. As [`memcpy_2d`], and the rows stay readable (source) and untouched by anything
///    else (destination) until the copy completes on `stream`.
/// 2. `stream` is a live stream of the current context.
pub unsafe fn memcpy_2d_async(copy: &Copy2d, stream: CUstream) -> Result<()> {
    let d = driver()?;
    let desc = copy.descriptor();
    // SAFETY: conditions 1 and 2; the driver reads the descriptor during the call.
    check(unsafe { (d.cuMemcpy2DAsync)(&desc, stream) })
}

/// `cuMemHostAlloc` in the current context.
pub fn mem_host_alloc(bytes: usize, flags: c_uint) -> Result<*mut c_void> {
    let d = driver()?;
    let mut p = ptr::null_mut();
    // SAFETY: `p` is a valid out-pointer.
    check(unsafe { (d.cuMemHostAlloc)(&mut p, bytes, flags) })?;
    Ok(p)
}

/// `cuMemFreeHost`.
///
/// # Safety
/// 1. `p` came from [`mem_host_alloc`] and is not used afterwards.
pub unsafe fn mem_free_host(p: *mut c_void) -> Result<()> {
    let d = driver()?;
    // SAFETY: condition 1.
    check(unsafe { (d.cuMemFreeHost)(p) })
}

/// `cuMemHostRegister_v2`.
///
/// # Safety
/// 1. `[p, p + bytes)` is memory owned by the caller that stays allocated until
///    [`mem_host_unregister`] is called on `p`.
pub unsafe fn mem_host_register(p: *mut c_void, bytes: usize, flags: c_uint) -> Result<()> {
    let d = driver()?;
    // SAFETY: condition 1.
    check(unsafe { (d.cuMemHostRegister)(p, bytes, flags) })
}

/// `cuMemHostUnregister`.
///
/// # Safety
/// 1. `p` is the start of a range registered by [`mem_host_register`].
pub unsafe fn mem_host_unregister(p: *mut c_void) -> Result<()> {
    let d = driver()?;
    // SAFETY: condition 1.
    check(unsafe { (d.cuMemHostUnregister)(p) })
}

/// What `cuPointerGetAttributes` says about an address, raw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PointerAttributes {
    /// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE` (`CU_MEMORYTYPE_*`; 0 where unknown).
    pub memory_type: c_uint,
    /// `CU_POINTER_ATTRIBUTE_IS_MANAGED`.
    pub is_managed: bool,
    /// `CU_POINTER_ATTRIBUTE_RANGE_START_ADDR` (0 where unknown).
    pub range_start: CUdeviceptr,
    /// `CU_POINTER_ATTRIBUTE_RANGE_SIZE` (0 where unknown).
    pub range_size: usize,
}

/// `cuPointerGetAttributes` for memory type, managed flag and the extent of the
/// allocation or registration holding `p`: one driver call, which answers for any
/// address (an unknown one has memory type 0). Needs a current context.
pub fn pointer_attributes(p: *const c_void) -> Result<PointerAttributes> {
    let d = driver()?;
    let mut kind: c_uint = 0;
    let mut managed: c_uint = 0;
    let mut start: CUdeviceptr = 0;
    let mut size: usize = 0;
    let mut attributes = [
        cuda_sys::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        cuda_sys::CU_POINTER_ATTRIBUTE_IS_MANAGED,
        cuda_sys::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        cuda_sys::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
    ];
    let mut data: [*mut c_void; 4] = [
        (&mut kind as *mut c_uint).cast(),
        (&mut managed as *mut c_uint).cast(),
        (&mut start as *mut CUdeviceptr).cast(),
        (&mut size as *mut usize).cast(),
    ];
    // SAFETY: four attributes, each with an out-pointer of the type the driver
    // writes for it (MEMORY_TYPE and IS_MANAGED: 4 bytes; RANGE_START_ADDR: a
    // CUdeviceptr; RANGE_SIZE: a size_t); the driver looks `p` up in its tables and
    // never dereferences it.
    check(unsafe {
        (d.cuPointerGetAttributes)(
            attributes.len() as c_uint,
            attributes.as_mut_ptr(),
            data.as_mut_ptr(),
            p as CUdeviceptr,
        )
    })?;
    Ok(PointerAttributes {
        memory_type: kind,
        is_managed: managed != 0,
        range_start: start,
        range_size: size,
    })
}

/// `cuPointerGetAttribute(MEMORY_TYPE)`: fails for addresses the driver does not
/// know. Needs a current context.
pub fn pointer_memory_type(p: *const c_void) -> Result<c_uint> {
    let d = driver()?;
    let mut kind: c_uint = 0;
    // SAFETY: `kind` is a valid 4-byte out-pointer for MEMORY_TYPE; the driver only
    // looks `p` up in its tables, it never dereferences it.
    check(unsafe {
        (d.cuPointerGetAttribute)(
            (&mut kind as *mut c_uint).cast(),
            cuda_sys::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            p as CUdeviceptr,
        )
    })?;
    Ok(kind)
}

/// `cuMemcpyHtoD_v2` (synchronous).
///
/// # Safety
/// 1. `dst` is device memory of at least `bytes` bytes in the current context.
/// 2. `src` is readable for `bytes` bytes.
pub unsafe fn memcpy_htod(dst: CUdeviceptr, src: *const c_void, bytes: usize) -> Result<()> {
    let d = driver()?;
    // SAFETY: conditions 1 and 2.
    check(unsafe { (d.cuMemcpyHtoD)(dst, src, bytes) })
}

/// `cuMemcpyDtoH_v2` (synchronous).
///
/// # Safety
/// 1. `src` is device memory of at least `bytes` bytes in the current context.
/// 2. `dst` is writable for `bytes` bytes.
pub unsafe fn memcpy_dtoh(dst: *mut c_void, src: CUdeviceptr, bytes: usize) -> Result<()> {
    let d = driver()?;
    // SAFETY: conditions 1 and 2.
    check(unsafe { (d.cuMemcpyDtoH)(dst, src, bytes) })
}

/// `cuMemcpyHtoDAsync_v2`.
///
/// # Safety
/// 1. `dst` is device memory of at least `bytes` bytes.
/// 2. `src` stays readable and unmodified for `bytes` bytes until the copy completes
///    on `stream`.
/// 3. `stream` is a live stream of the current context.
pub unsafe fn memcpy_htod_async(
    dst: CUdeviceptr,
    src: *const c_void,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    let d = driver()?;
    // SAFETY: conditions 1 to 3.
    check(unsafe { (d.cuMemcpyHtoDAsync)(dst, src, bytes, stream) })
}

/// `cuMemcpyDtoHAsync_v2`.
///
/// # Safety
/// 1. `src` is device memory of at least `bytes` bytes.
/// 2. `dst` stays writable, and is neither read nor written by the host, for `bytes`
///    bytes until the copy completes on `stream`.
/// 3. `stream` is a live stream of the current context.
pub unsafe fn memcpy_dtoh_async(
    dst: *mut c_void,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    let d = driver()?;
    // SAFETY: conditions 1 to 3.
    check(unsafe { (d.cuMemcpyDtoHAsync)(dst, src, bytes, stream) })
}

/// `cuMemcpyDtoDAsync_v2`.
///
/// # Safety
/// 1. `src` and `dst` are device memory of at least `bytes` bytes.
/// 2. `stream` is a live stream of the current context.
pub unsafe fn memcpy_dtod_async(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    let d = driver()?;
    // SAFETY: conditions 1 and 2.
    check(unsafe { (d.cuMemcpyDtoDAsync)(dst, src, bytes, stream) })
}

/// `cuMemsetD8_v2` (synchronous).
///
/// # Safety
/// 1. `dst` is device memory of at least `count` bytes in the current context.
pub unsafe fn memset_d8(dst: CUdeviceptr, value: u8, count: usize) -> Result<()> {
    let d = driver()?;
    // SAFETY: condition 1.
    check(unsafe { (d.cuMemsetD8)(dst, value, count) })
}

/// `cuMemsetD8Async`.
///
/// # Safety
/// 1. `dst` is device memory of at least `count` bytes.
/// 2. `stream` is a live stream of the current context.
pub unsafe fn memset_d8_async(
    dst: CUdeviceptr,
    value: u8,
    count: usize,
    stream: CUstream,
) -> Result<()> {
    let d = driver()?;
    // SAFETY: conditions 1 and 2.
    check(unsafe { (d.cuMemsetD8Async)(dst, value, count, stream) })
}

/// `cuMemsetD32Async`.
///
/// # Safety
/// 1. `dst` is 4-byte aligned device memory of at least `4 * count` bytes.
/// 2. `stream` is a live stream of the current context.
pub unsafe fn memset_d32_async(
    dst: CUdeviceptr,
    value: u32,
    count: usize,
    stream: CUstream,
) -> Result<()> {
    let d = driver()?;
    // SAFETY: conditions 1 and 2.
    check(unsafe { (d.cuMemsetD32Async)(dst, value, count, stream) })
}

/// `cuModuleLoadDataEx` of PTX text into the current context: the driver compiles
/// it for the context's device. When that fails, the compiler's error log is written
/// into `error_log` (NUL-terminated, cut to fit; pass an empty slice to skip it).
pub fn module_load_ptx(ptx: &CStr, error_log: &mut [u8]) -> Result<CUmodule> {
    let d = driver()?;
    let mut module = ptr::null_mut();
    let mut options = [
        cuda_sys::CU_JIT_ERROR_LOG_BUFFER,
        cuda_sys::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    // The size option's value is the size itself, passed as the pointer's value.
    let log_bytes = error_log.len().min(c_uint::MAX as usize);
    let mut values: [*mut c_void; 2] = [error_log.as_mut_ptr().cast(), log_bytes as *mut c_void];
    let count: c_uint = if log_bytes == 0 { 0 } else { 2 };
    // SAFETY: `module` is a valid out-pointer; `ptx` is NUL-terminated text, which the
    // driver only reads; the log buffer is writable for the `log_bytes` passed with it
    // and outlives the call (with no log, no option is passed).
    check(unsafe {
        (d.cuModuleLoadDataEx)(
            &mut module,
            ptx.as_ptr().cast(),
            count,
            options.as_mut_ptr(),
            values.as_mut_ptr(),
        )
    })?;
    Ok(module)
}

/// `cuModuleGetFunction`: the kernel named `name` in `module`.
///
/// # Safety
/// 1. `module` is a live module of the current context (from [`module_load_ptx`]).
pub unsafe fn module_get_function(module: CUmodule, name: &CStr) -> Result<CUfunction> {
    let d = driver()?;
    let mut function = ptr::null_mut();
    // SAFETY: `function` is a valid out-pointer, `name` NUL-terminated; condition 1.
    check(unsafe { (d.cuModuleGetFunction)(&mut function, module, name.as_ptr()) })?;
    Ok(function)
}

/// `cuModuleUnload`.
///
/// # Safety
/// 1. `module` is a live module, and neither it nor its functions are used afterwards
///    (no launch of them is still queued).
pub unsafe fn module_unload(module: CUmodule) -> Result<()> {
    let d = driver()?;
    // SAFETY: condition 1.
    check(unsafe { (d.cuModuleUnload)(module) })
}

/// `cuLaunchKernel`: queues `function` on `stream` with a grid of `grid` blocks of
/// `block` threads, `shared_bytes` of dynamic shared memory, and `params` (one
/// pointer to each argument's value, in order).
///
/// # Safety
/// 1. `function` is a live function of the current context, whose module stays
///    loaded until the launch has run.
/// 2. `params` has one entry per kernel parameter, each pointing to a value of that
///    parameter's size; the driver copies them during the call.
/// 3. Every memory access the kernel makes with these arguments is valid until it
///    has run (device memory it writes is not read or freed meanwhile).
/// 4. `stream` is a live stream of the current context (or null).
pub unsafe fn launch_kernel(
    function: CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared_bytes: u32,
    stream: CUstream,
    params: &mut [*mut c_void],
) -> Result<()> {
    let d = driver()?;
    // SAFETY: conditions 1 to 4; `extra` is null (arguments go through `params`).
    check(unsafe {
        (d.cuLaunchKernel)(
            function,
            grid[0],
            grid[1],
            grid[2],
            block[0],
            block[1],
            block[2],
            shared_bytes,
            stream,
            params.as_mut_ptr(),
            ptr::null_mut(),
        )
    })
}

/// Whether the driver has `cuMemcpyBatchAsync` (CUDA 12.8 and later).
pub fn has_memcpy_batch() -> bool {
    driver().is_ok_and(|d| d.cuMemcpyBatchAsync_v2.is_some() || d.cuMemcpyBatchAsync.is_some())
}

/// `cuMemcpyBatchAsync` (the CUDA 13 `_v2` entry point, or the 12.8 one): `count`
/// 1D copies queued on `stream` as one batch, every source read in stream order
/// (`CU_MEMCPY_SRC_ACCESS_ORDER_STREAM`). [`Error::InvalidArgument`] when the
/// driver lacks it (see [`has_memcpy_batch`]).
///
/// # Safety
/// 1. For every `i < count`: `srcs[i]` is readable and `dsts[i]` writable for
///    `sizes[i]` bytes (device or page-locked host addresses), until the batch
///    completes on `stream`; no destination overlaps another copy's source or
///    destination.
/// 2. `stream` is a live stream of the current context.
///
/// Slices of different lengths are an [`Error::InvalidArgument`].
pub unsafe fn memcpy_batch_async(
    dsts: &mut [CUdeviceptr],
    srcs: &mut [CUdeviceptr],
    sizes: &mut [usize],
    stream: CUstream,
) -> Result<()> {
    let d = driver()?;
    let count = sizes.len();
    if dsts.len() != count || srcs.len() != count {
        return Err(Error::InvalidArgument {
            op: "memcpy_batch_async",
            reason: format!(
                "{} destinations and {} sources for {count} sizes",
                dsts.len(),
                srcs.len()
            ),
        });
    }
    let mut attrs = [cuda_sys::CUmemcpyAttributes {
        src_access_order: cuda_sys::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
        ..Default::default()
    }];
    let mut attrs_idxs = [0usize];
    if let Some(f) = d.cuMemcpyBatchAsync_v2 {
        // SAFETY: conditions 1 and 2 (lengths checked above); one attribute set applies to every copy from
        // index 0.
        return check(unsafe {
            f(
                dsts.as_mut_ptr(),
                srcs.as_mut_ptr(),
                sizes.as_mut_ptr(),
                count,
                attrs.as_mut_ptr(),
                attrs_idxs.as_mut_ptr(),
                1,
                stream,
            )
        });
    }
    if let Some(f) = d.cuMemcpyBatchAsync {
        let mut fail_idx = usize::MAX;
        // SAFETY: as above; `fail_idx` is a valid out-pointer.
        return check(unsafe {
            f(
                dsts.as_mut_ptr(),
                srcs.as_mut_ptr(),
                sizes.as_mut_ptr(),
                count,
                attrs.as_mut_ptr(),
                attrs_idxs.as_mut_ptr(),
                1,
                &mut fail_idx,
                stream,
            )
        });
    }
    Err(Error::InvalidArgument {
        op: "memcpy_batch_async",
        reason: "this driver has no cuMemcpyBatchAsync (it needs CUDA 12.8 or later)".into(),
    })
}
