//! `cuMemcpyBatchAsync` (CUDA 12.8 and 12.9, with `failIdx`) and
//! `cuMemcpyBatchAsync_v2` (CUDA 13, without): a batch of 1-D copies that executes
//! as one operation in stream order.
//!
//! Checked as the reference states: at least one copy, one to `count` attribute
//! sets whose first index is 0 and whose indices increase, a valid source access
//! order, not the legacy stream, not a capturing stream. A copy whose memory is not
//! valid fails the batch, and `failIdx` names it (`SIZE_MAX` for an error that is no
//! one copy's).

use std::ffi::{c_int, c_uint, c_void};
use std::sync::Arc;

use super::copy::{capturing, host_place};
use super::{stream_of, Handle};
use crate::errors::{INVALID_VALUE, STREAM_CAPTURE_UNSUPPORTED};
use crate::ops::{Copy1d, Place, Src, Work};
use crate::stream::StreamKind;
use crate::submit::submit;

/// `CUmemcpyAttributes`.
#[repr(C)]
pub struct MemcpyAttributes {
    src_access_order: c_uint,
    src_loc_type: c_uint,
    src_loc_id: c_int,
    dst_loc_type: c_uint,
    dst_loc_id: c_int,
    flags: c_uint,
}

/// `CU_MEMCPY_SRC_ACCESS_ORDER_STREAM`.
const ORDER_STREAM: u32 = 1;

/// A batch error: the code, and the copy it belongs to (`usize::MAX`: none).
type Failure = (u32, usize);

/// Checks and queues the batch.
///
/// # Safety
/// 1. The arrays hold `count` (`num_attrs`) entries, and every host range stays
///    valid until the batch completes (the driver's contract).
#[allow(clippy::too_many_arguments)]
unsafe fn batch(
    dsts: *const u64,
    srcs: *const u64,
    sizes: *const usize,
    count: usize,
    attrs: *const MemcpyAttributes,
    attr_idxs: *const usize,
    num_attrs: usize,
    stream: Handle,
    call: &'static str,
) -> Result<(), Failure> {
    let whole = |c: u32| (c, usize::MAX);
    let s = stream_of(stream).map_err(whole)?;
    if s.kind == StreamKind::Legacy {
        return Err(whole(INVALID_VALUE));
    }
    if capturing(&s) {
        let _ = crate::capture::refuse_sync(&s);
        return Err(whole(STREAM_CAPTURE_UNSUPPORTED));
    }
    let null = dsts.is_null()
        || srcs.is_null()
        || sizes.is_null()
        || attrs.is_null()
        || attr_idxs.is_null();
    if count == 0 || null || num_attrs == 0 || num_attrs > count {
        return Err(whole(INVALID_VALUE));
    }
    // SAFETY: condition 1: `num_attrs` attribute sets and indices.
    let (attrs, idxs) = unsafe {
        (
            std::slice::from_raw_parts(attrs, num_attrs),
            std::slice::from_raw_parts(attr_idxs, num_attrs),
        )
    };
    if idxs[0] != 0 || idxs.windows(2).any(|w| w[0] >= w[1]) || idxs[num_attrs - 1] >= count {
        return Err(whole(INVALID_VALUE));
    }
    if attrs
        .iter()
        .any(|a| !(1..=3).contains(&a.src_access_order) || a.flags > 1)
    {
        return Err(whole(INVALID_VALUE));
    }
    // SAFETY: condition 1: `count` entries each.
    let (dsts, srcs, sizes) = unsafe {
        (
            std::slice::from_raw_parts(dsts, count),
            std::slice::from_raw_parts(srcs, count),
            std::slice::from_raw_parts(sizes, count),
        )
    };
    let mut copies = Vec::with_capacity(count);
    let mut any_pageable_src = false;
    let mut wait = false;
    for i in 0..count {
        let order = attrs[idxs.partition_point(|&first| first <= i) - 1].src_access_order;
        let n = sizes[i];
        let dst = host_place(dsts[i] as *const c_void, n).map_err(|c| (c, i))?;
        let src = host_place(srcs[i] as *const c_void, n).map_err(|c| (c, i))?;
        wait |= matches!(dst, Place::Host(_, false));
        let src = match src {
            Place::Host(p, false) => {
                any_pageable_src |= order == ORDER_STREAM;
                Src::Place(Place::Host(p, false))
            }
            other => Src::Place(other),
        };
        copies.push(Copy1d { dst, src, bytes: n });
    }
    // Pageable sources in stream order are staged after the stream's earlier work.
    if any_pageable_src {
        submit(&s, Work::Nothing, call, vec![])
            .and_then(|q| q.wait())
            .map_err(whole)?;
    }
    for c in &mut copies {
        if let Src::Place(Place::Host(p, false)) = &c.src {
            // SAFETY: condition 1: the source is readable for its size.
            let v = unsafe { std::slice::from_raw_parts(p.0 as *const u8, c.bytes) }.to_vec();
            c.src = Src::Staged(Arc::new(v));
        }
    }
    let q = submit(&s, Work::Batch(copies), call, vec![]).map_err(whole)?;
    if wait {
        q.wait().map_err(whole)?;
    }
    Ok(())
}

export! {
    /// `cuMemcpyBatchAsync_v2` (CUDA 13).
    fn cuMemcpyBatchAsync_v2(dsts: *const u64, srcs: *const u64, sizes: *const usize, count: usize, attrs: *const MemcpyAttributes, attr_idxs: *const usize, num_attrs: usize, stream: Handle) {
        // SAFETY: the caller's arrays and memory (the driver's contract).
        unsafe { batch(dsts, srcs, sizes, count, attrs, attr_idxs, num_attrs, stream, "cuMemcpyBatchAsync_v2") }
            .map_err(|(code, _)| code)
    }

    /// `cuMemcpyBatchAsync` (CUDA 12.8): as `_v2`, and `fail_idx` names the copy that
    /// failed (`SIZE_MAX` when the error is no one copy's, and on success, as the
    /// driver writes it on the H200).
    fn cuMemcpyBatchAsync(dsts: *const u64, srcs: *const u64, sizes: *const usize, count: usize, attrs: *const MemcpyAttributes, attr_idxs: *const usize, num_attrs: usize, fail_idx: *mut usize, stream: Handle) {
        // SAFETY: the caller's arrays and memory (the driver's contract).
        let r = unsafe { batch(dsts, srcs, sizes, count, attrs, attr_idxs, num_attrs, stream, "cuMemcpyBatchAsync") };
        let at = match r {
            Ok(()) => usize::MAX,
            Err((_, at)) => at,
        };
        if !fail_idx.is_null() {
            // SAFETY: the caller's out-pointer, not null.
            unsafe { fail_idx.write(at) };
        }
        r.map_err(|(code, _)| code)
    }
}
