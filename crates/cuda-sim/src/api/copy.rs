//! 1-D copies and memsets, with the host-side synchronisation the reference's "API
//! synchronization behavior" page documents:
//!
//! - from pageable host memory, the call waits for the stream's earlier work, copies
//!   the bytes out (staging) and returns; the copy to the device runs later;
//! - to pageable host memory, the call returns once the copy has completed;
//! - the synchronous calls (no `Async`) run on the legacy stream of the current
//!   context; from page-locked memory they return once the copy completed,
//!   device-to-device they return at once;
//! - memsets return at once, except into page-locked host memory.

use std::ffi::{c_uint, c_void};
use std::sync::Arc;

use super::{stream_of, Handle};
use crate::capture::{link_of, refuse_unsafe_call};
use crate::context::current_usable;
use crate::errors::{Res, INVALID_VALUE};
use crate::machine::machine;
use crate::memory::Kind;
use crate::ops::{Copy1d, HostPtr, Place, Src, Work};
use crate::stream::Stream;
use crate::submit::{submit, Queued};

/// A device-side argument (`CUdeviceptr`) of `bytes`: device memory, or page-locked
/// host memory (unified addressing); anything else is `CUDA_ERROR_INVALID_VALUE`.
pub fn device_place(p: u64, bytes: usize) -> Res<Place> {
    match machine().mem.kind(p) {
        Kind::Device(_) => {
            let (a, off) = machine().mem.device_range(p, bytes)?;
            Ok(Place::Device(a, off))
        }
        Kind::PageLocked(b) if p as usize + bytes <= b.range().end => {
            Ok(Place::Host(HostPtr(p as usize), true))
        }
        _ => Err(INVALID_VALUE),
    }
}

/// A host-side argument of `bytes`: page-locked when the whole range is, device
/// memory when it points there (unified addressing), pageable otherwise.
pub fn host_place(p: *const c_void, bytes: usize) -> Res<Place> {
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    let a = p as usize;
    match machine().mem.kind(a as u64) {
        Kind::Device(_) => device_place(a as u64, bytes),
        // A device address that no allocation holds (freed, or never handed out) is
        // no host memory either.
        Kind::Other if machine().in_device_range(a as u64) => Err(INVALID_VALUE),
        Kind::PageLocked(b) if a + bytes <= b.range().end => Ok(Place::Host(HostPtr(a), true)),
        _ => Ok(Place::Host(HostPtr(a), false)),
    }
}

/// Whether a place is pageable host memory.
pub fn pageable(p: &Place) -> bool {
    matches!(p, Place::Host(_, false))
}

/// Whether the stream takes part in a capture now.
pub fn capturing(s: &Stream) -> bool {
    link_of(s).is_some()
}

/// The driver's staging of a pageable source: waits for the stream's earlier work
/// (through the stream itself, so that the legacy stream's implicit dependencies
/// count), then copies `bytes` out of `p`.
///
/// # Safety
/// 1. `p` is readable for `bytes` bytes.
pub unsafe fn stage(s: &Arc<Stream>, p: HostPtr, bytes: usize, call: &'static str) -> Res<Src> {
    submit(s, Work::Nothing, call, vec![])?.wait()?;
    // SAFETY: condition 1.
    let v = unsafe { std::slice::from_raw_parts(p.0 as *const u8, bytes) }.to_vec();
    Ok(Src::Staged(Arc::new(v)))
}

/// Queues a 1-D copy on `s` with the synchronisation described in the module docs
/// (`sync` for the calls without `Async`).
///
/// # Safety
/// 1. Host places are valid for `bytes` (read or written) until the copy completes.
pub unsafe fn copy(
    s: &Arc<Stream>,
    dst: Place,
    src: Place,
    bytes: usize,
    sync: bool,
    call: &'static str,
) -> Res<()> {
    if sync {
        refuse_unsafe_call()?;
    }
    if bytes == 0 {
        return Ok(());
    }
    let device_to_device = matches!((&dst, &src), (Place::Device(..), Place::Device(..)));
    let src = match &src {
        Place::Host(p, false) if !capturing(s) => {
            // SAFETY: condition 1.
            unsafe { stage(s, *p, bytes, call) }?
        }
        _ => Src::Place(src.clone()),
    };
    let wait = pageable(&dst)
        || matches!(dst, Place::Host(..))
            && matches!(src, Src::Place(Place::Host(..)) | Src::Staged(_))
        || sync && !device_to_device && !matches!(src, Src::Staged(_));
    let q = submit(s, Work::Copy(Copy1d { dst, src, bytes }), call, vec![])?;
    if wait {
        q.wait()?;
    }
    Ok(())
}

/// A memset of `count` elements of `pattern` at `dst` on `s`.
fn memset(
    s: &Arc<Stream>,
    dst: u64,
    pattern: &[u8],
    count: usize,
    sync: bool,
    call: &'static str,
) -> Res<()> {
    if sync {
        refuse_unsafe_call()?;
    }
    if dst % pattern.len() as u64 != 0 {
        return Err(INVALID_VALUE);
    }
    if count == 0 {
        return Ok(());
    }
    let bytes = count.checked_mul(pattern.len()).ok_or(INVALID_VALUE)?;
    let place = device_place(dst, bytes)?;
    let into_host = matches!(place, Place::Host(..));
    let q: Queued = submit(
        s,
        Work::Memset {
            dst: place,
            pattern: pattern.to_vec(),
            count,
        },
        call,
        vec![],
    )?;
    if sync && into_host {
        q.wait()?;
    }
    Ok(())
}

/// The legacy stream of the current context (where the synchronous calls run).
fn legacy() -> Res<Arc<Stream>> {
    Ok(current_usable()?.legacy())
}

export! {
    /// `cuMemcpyHtoD_v2`.
    fn cuMemcpyHtoD_v2(dst: u64, src: *const c_void, bytes: usize) {
        let s = legacy()?;
        let (d, h) = (device_place(dst, bytes)?, host_place(src, bytes)?);
        // SAFETY: the caller's source is readable for `bytes` (the driver's contract).
        unsafe { copy(&s, d, h, bytes, true, "cuMemcpyHtoD_v2") }
    }

    /// `cuMemcpyDtoH_v2`.
    fn cuMemcpyDtoH_v2(dst: *mut c_void, src: u64, bytes: usize) {
        let s = legacy()?;
        let (h, d) = (host_place(dst, bytes)?, device_place(src, bytes)?);
        // SAFETY: the caller's destination is writable for `bytes`; the call waits.
        unsafe { copy(&s, h, d, bytes, true, "cuMemcpyDtoH_v2") }
    }

    /// `cuMemcpyDtoD_v2`.
    fn cuMemcpyDtoD_v2(dst: u64, src: u64, bytes: usize) {
        let s = legacy()?;
        let (d, from) = (device_place(dst, bytes)?, device_place(src, bytes)?);
        // SAFETY: device (or page-locked) places, checked above.
        unsafe { copy(&s, d, from, bytes, true, "cuMemcpyDtoD_v2") }
    }

    /// `cuMemcpy`: the kinds of memory from the addresses (unified addressing).
    fn cuMemcpy(dst: u64, src: u64, bytes: usize) {
        let s = legacy()?;
        let (d, from) = (host_place(dst as *const c_void, bytes)?, host_place(src as *const c_void, bytes)?);
        // SAFETY: the caller's ranges are valid for `bytes` (the driver's contract).
        unsafe { copy(&s, d, from, bytes, true, "cuMemcpy") }
    }

    /// `cuMemcpyHtoDAsync_v2`.
    fn cuMemcpyHtoDAsync_v2(dst: u64, src: *const c_void, bytes: usize, stream: Handle) {
        let s = stream_of(stream)?;
        let (d, h) = (device_place(dst, bytes)?, host_place(src, bytes)?);
        // SAFETY: the caller keeps the source readable until the copy completes.
        unsafe { copy(&s, d, h, bytes, false, "cuMemcpyHtoDAsync_v2") }
    }

    /// `cuMemcpyDtoHAsync_v2`.
    fn cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: u64, bytes: usize, stream: Handle) {
        let s = stream_of(stream)?;
        let (h, d) = (host_place(dst, bytes)?, device_place(src, bytes)?);
        // SAFETY: the caller keeps the destination writable until the copy completes.
        unsafe { copy(&s, h, d, bytes, false, "cuMemcpyDtoHAsync_v2") }
    }

    /// `cuMemcpyDtoDAsync_v2`.
    fn cuMemcpyDtoDAsync_v2(dst: u64, src: u64, bytes: usize, stream: Handle) {
        let s = stream_of(stream)?;
        let (d, from) = (device_place(dst, bytes)?, device_place(src, bytes)?);
        // SAFETY: device (or page-locked) places, checked above.
        unsafe { copy(&s, d, from, bytes, false, "cuMemcpyDtoDAsync_v2") }
    }

    /// `cuMemcpyAsync`: the kinds of memory from the addresses.
    fn cuMemcpyAsync(dst: u64, src: u64, bytes: usize, stream: Handle) {
        let s = stream_of(stream)?;
        let (d, from) = (host_place(dst as *const c_void, bytes)?, host_place(src as *const c_void, bytes)?);
        // SAFETY: the caller keeps both ranges valid until the copy completes.
        unsafe { copy(&s, d, from, bytes, false, "cuMemcpyAsync") }
    }

    /// `cuMemcpyPeerAsync`: device to device, across contexts.
    fn cuMemcpyPeerAsync(dst: u64, _dst_ctx: Handle, src: u64, _src_ctx: Handle, bytes: usize, stream: Handle) {
        let s = stream_of(stream)?;
        let (d, from) = (device_place(dst, bytes)?, device_place(src, bytes)?);
        // SAFETY: device places, checked above.
        unsafe { copy(&s, d, from, bytes, false, "cuMemcpyPeerAsync") }
    }

    /// `cuMemsetD8_v2`.
    fn cuMemsetD8_v2(dst: u64, value: u8, count: usize) {
        memset(&legacy()?, dst, &[value], count, true, "cuMemsetD8_v2")
    }

    /// `cuMemsetD16_v2`.
    fn cuMemsetD16_v2(dst: u64, value: u16, count: usize) {
        memset(&legacy()?, dst, &value.to_le_bytes(), count, true, "cuMemsetD16_v2")
    }

    /// `cuMemsetD32_v2`.
    fn cuMemsetD32_v2(dst: u64, value: c_uint, count: usize) {
        memset(&legacy()?, dst, &value.to_le_bytes(), count, true, "cuMemsetD32_v2")
    }

    /// `cuMemsetD8Async`.
    fn cuMemsetD8Async(dst: u64, value: u8, count: usize, stream: Handle) {
        memset(&stream_of(stream)?, dst, &[value], count, false, "cuMemsetD8Async")
    }

    /// `cuMemsetD16Async`.
    fn cuMemsetD16Async(dst: u64, value: u16, count: usize, stream: Handle) {
        memset(&stream_of(stream)?, dst, &value.to_le_bytes(), count, false, "cuMemsetD16Async")
    }

    /// `cuMemsetD32Async`.
    fn cuMemsetD32Async(dst: u64, value: c_uint, count: usize, stream: Handle) {
        memset(&stream_of(stream)?, dst, &value.to_le_bytes(), count, false, "cuMemsetD32Async")
    }
}
