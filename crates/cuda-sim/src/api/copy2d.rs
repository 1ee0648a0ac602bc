//! 2-D copies (`cuMemcpy2D*`), with the reference's argument checks: each pitch at
//! least the row width plus its X offset, no pitch past `CU_DEVICE_ATTRIBUTE_MAX_PITCH`,
//! and every row inside the memory it names. A copy of one row is a 1-D copy: the
//! driver checks neither pitch then (on the H200, pitches 0 and 2^31 both pass).
//! Synchronisation as for 1-D copies.

use std::ffi::c_void;
use std::sync::Arc;

use super::copy::{capturing, device_place, host_place, pageable};
use super::{stream_of, Handle};
use crate::capture::refuse_unsafe_call;
use crate::context::current_usable;
use crate::errors::{Res, INVALID_VALUE, NOT_SUPPORTED};
use crate::ops::{Copy2d, Place, Src, Work};
use crate::stream::Stream;
use crate::submit::submit;

/// `CUDA_MEMCPY2D`.
#[repr(C)]
pub struct Memcpy2d {
    src_x: usize,
    src_y: usize,
    src_type: u32,
    src_host: *const c_void,
    src_device: u64,
    src_array: *mut c_void,
    src_pitch: usize,
    dst_x: usize,
    dst_y: usize,
    dst_type: u32,
    dst_host: *mut c_void,
    dst_device: u64,
    dst_array: *mut c_void,
    dst_pitch: usize,
    width: usize,
    height: usize,
}

/// `CU_DEVICE_ATTRIBUTE_MAX_PITCH`.
const MAX_PITCH: usize = i32::MAX as usize;

/// One side of the copy, from its memory type, addresses and offsets: the place of
/// its first byte, checked to hold every row (`span` bytes from there).
fn side(
    kind: u32,
    host: *const c_void,
    device: u64,
    x: usize,
    y: usize,
    pitch: usize,
    span: usize,
) -> Res<Place> {
    let offset = y
        .checked_mul(pitch)
        .and_then(|o| o.checked_add(x))
        .ok_or(INVALID_VALUE)?;
    match kind {
        // CU_MEMORYTYPE_HOST
        1 => host_place(
            (host as usize).checked_add(offset).ok_or(INVALID_VALUE)? as *const c_void,
            span,
        ),
        // CU_MEMORYTYPE_DEVICE
        2 => device_place(
            device.checked_add(offset as u64).ok_or(INVALID_VALUE)?,
            span,
        ),
        // CU_MEMORYTYPE_ARRAY: the simulator has no CUDA arrays.
        3 => Err(NOT_SUPPORTED),
        // CU_MEMORYTYPE_UNIFIED: the kind comes from the address.
        4 => host_place(
            device.checked_add(offset as u64).ok_or(INVALID_VALUE)? as *const c_void,
            span,
        ),
        _ => Err(INVALID_VALUE),
    }
}

/// Checks `d` and queues the copy on `s` (`sync` for `cuMemcpy2D`).
///
/// # Safety
/// 1. The host rows `d` names are valid until the copy completes.
unsafe fn copy2d(s: &Arc<Stream>, d: &Memcpy2d, sync: bool, call: &'static str) -> Res<()> {
    if sync {
        refuse_unsafe_call()?;
    }
    let (w, h) = (d.width, d.height);
    if h != 1 && (d.src_pitch > MAX_PITCH || d.dst_pitch > MAX_PITCH) {
        return Err(INVALID_VALUE);
    }
    if h != 1
        && (w.checked_add(d.src_x).is_none_or(|n| n > d.src_pitch)
            || w.checked_add(d.dst_x).is_none_or(|n| n > d.dst_pitch))
    {
        return Err(INVALID_VALUE);
    }
    if w == 0 || h == 0 {
        return Ok(());
    }
    let span = |pitch: usize| {
        (h - 1)
            .checked_mul(pitch)
            .and_then(|n| n.checked_add(w))
            .ok_or(INVALID_VALUE)
    };
    let dst = side(
        d.dst_type,
        d.dst_host,
        d.dst_device,
        d.dst_x,
        d.dst_y,
        d.dst_pitch,
        span(d.dst_pitch)?,
    )?;
    let src = side(
        d.src_type,
        d.src_host,
        d.src_device,
        d.src_x,
        d.src_y,
        d.src_pitch,
        span(d.src_pitch)?,
    )?;
    let device_to_device = matches!((&dst, &src), (Place::Device(..), Place::Device(..)));
    let (src, src_pitch) = match &src {
        Place::Host(p, false) if !capturing(s) => {
            submit(s, Work::Nothing, call, vec![])?.wait()?;
            let mut rows = Vec::with_capacity(w * h);
            for r in 0..h {
                // SAFETY: condition 1: each source row is readable for `w` bytes.
                rows.extend_from_slice(unsafe {
                    std::slice::from_raw_parts((p.0 + r * d.src_pitch) as *const u8, w)
                });
            }
            (Src::Staged(Arc::new(rows)), w)
        }
        _ => (Src::Place(src.clone()), d.src_pitch),
    };
    let wait = pageable(&dst)
        || matches!(dst, Place::Host(..)) && !matches!(src, Src::Place(Place::Device(..)))
        || sync && !device_to_device && !matches!(src, Src::Staged(_));
    let work = Work::Copy2d(Copy2d {
        dst,
        dst_pitch: d.dst_pitch,
        src,
        src_pitch,
        width: w,
        height: h,
    });
    let q = submit(s, work, call, vec![])?;
    if wait {
        q.wait()?;
    }
    Ok(())
}

export! {
    /// `cuMemcpy2D_v2`.
    fn cuMemcpy2D_v2(copy: *const Memcpy2d) {
        let s = current_usable()?.legacy();
        // SAFETY: the driver reads the descriptor during the call (its contract).
        let d = unsafe { copy.as_ref() }.ok_or(INVALID_VALUE)?;
        // SAFETY: the rows it names are valid during the call, which waits as needed.
        unsafe { copy2d(&s, d, true, "cuMemcpy2D_v2") }
    }

    /// `cuMemcpy2DUnaligned_v2`.
    fn cuMemcpy2DUnaligned_v2(copy: *const Memcpy2d) {
        let s = current_usable()?.legacy();
        // SAFETY: as for cuMemcpy2D_v2.
        let d = unsafe { copy.as_ref() }.ok_or(INVALID_VALUE)?;
        // SAFETY: as for cuMemcpy2D_v2.
        unsafe { copy2d(&s, d, true, "cuMemcpy2DUnaligned_v2") }
    }

    /// `cuMemcpy2DAsync_v2`.
    fn cuMemcpy2DAsync_v2(copy: *const Memcpy2d, stream: Handle) {
        let s = stream_of(stream)?;
        // SAFETY: the driver reads the descriptor during the call.
        let d = unsafe { copy.as_ref() }.ok_or(INVALID_VALUE)?;
        // SAFETY: the caller keeps the rows valid until the copy completes.
        unsafe { copy2d(&s, d, false, "cuMemcpy2DAsync_v2") }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_descriptor_has_the_c_layout() {
        assert_eq!(std::mem::size_of::<super::Memcpy2d>(), 128);
    }
}
