//! `cuMemcpyBatchAsync` (CUDA 12.8's, with a failure index) and `_v2` (CUDA 13's):
//! the argument checks and which copy a failure names.

use super::{differs, probe, Probe};
use crate::common::*;
use crate::cu;
use cuda_sys::{CUmemcpyAttributes, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};

const G: &str = "batch copies";

pub const PROBES: &[Probe] = &[
    probe(
        G,
        "cuMemcpyBatchAsync_v2 of 3 valid copies, then the data",
        "CUDA_SUCCESS, data intact",
        v2_ok,
    ),
    probe(
        G,
        "cuMemcpyBatchAsync_v2(count 0)",
        "CUDA_ERROR_INVALID_VALUE",
        v2_count_zero,
    ),
    probe(
        G,
        "cuMemcpyBatchAsync_v2(numAttrs 0)",
        "CUDA_ERROR_INVALID_VALUE",
        v2_no_attrs,
    ),
    probe(
        G,
        "cuMemcpyBatchAsync_v2(srcAccessOrder 0)",
        "CUDA_ERROR_INVALID_VALUE",
        v2_order_zero,
    ),
    probe(
        G,
        "cuMemcpyBatchAsync_v2(attrsIdxs[0] = 1)",
        "CUDA_ERROR_INVALID_VALUE",
        v2_first_index,
    ),
    probe(
        G,
        "cuMemcpyBatchAsync_v2 on the legacy NULL stream",
        "CUDA_ERROR_INVALID_VALUE",
        v2_legacy,
    ),
    differs(
        G,
        "cuMemcpyBatchAsync_v2, copy 2 (of 0, 1, 2) from freed memory",
        "CUDA_ERROR_INVALID_VALUE",
        "stricter: the driver crashed (signal 11) on the H200 (driver 580, CUDA 13.0); the simulator refuses the call",
        v2_bad_copy,
    ),
    differs(
        G,
        "cuMemcpyBatchAsync, copy 2 (of 0, 1, 2) from freed memory: failIdx",
        "CUDA_ERROR_INVALID_VALUE, failIdx 2",
        "stricter: the driver crashed (signal 11) on the H200 (driver 580, CUDA 13.0); the simulator refuses the call",
        v1_fail_index,
    ),
    probe(
        G,
        "cuMemcpyBatchAsync, copy 2 (of 0, 1, 2) 1 MiB long from 4096 bytes: failIdx",
        "CUDA_ERROR_INVALID_VALUE, failIdx 2",
        v1_copy_past_end,
    ),
    probe(
        G,
        "cuMemcpyBatchAsync(numAttrs 0): failIdx",
        "CUDA_ERROR_INVALID_VALUE, failIdx SIZE_MAX",
        v1_no_attrs,
    ),
    probe(
        G,
        "cuMemcpyBatchAsync of valid copies: failIdx",
        "CUDA_SUCCESS, failIdx SIZE_MAX",
        v1_ok,
    ),
];

/// Three device-to-host copies of 4096 bytes into pinned memory, from three
/// allocations holding three patterns.
struct Batch {
    dsts: Vec<u64>,
    srcs: Vec<u64>,
    sizes: Vec<usize>,
    host: &'static mut [u8],
}

fn batch(d: &'static Driver) -> Batch {
    context(d);
    let host = pinned(d, 3 * 4096);
    let mut dsts = Vec::new();
    let mut srcs = Vec::new();
    for i in 0..3 {
        let p = alloc(d, 4096);
        upload(d, p, &pattern(4096, i as u8));
        srcs.push(p);
        dsts.push(host.as_ptr() as u64 + i * 4096);
    }
    Batch {
        dsts,
        srcs,
        sizes: vec![4096; 3],
        host,
    }
}

fn attrs(order: u32) -> CUmemcpyAttributes {
    CUmemcpyAttributes {
        src_access_order: order,
        ..Default::default()
    }
}

/// `cuMemcpyBatchAsync_v2` of `b` with `num_attrs` attribute sets (`order` each,
/// first index `first`) on `s`.
fn v2(
    d: &Driver,
    b: &mut Batch,
    count: usize,
    num_attrs: usize,
    order: u32,
    first: usize,
    s: CUstream,
) -> u32 {
    let Some(f) = d.cuMemcpyBatchAsync_v2 else {
        return u32::MAX;
    };
    let mut a = [attrs(order)];
    let mut idx = [first];
    // SAFETY: the arrays hold `count` (at most 3) entries and `num_attrs` (at most 1)
    // attribute sets; the memory is the test's own.
    unsafe {
        f(
            b.dsts.as_mut_ptr(),
            b.srcs.as_mut_ptr(),
            b.sizes.as_mut_ptr(),
            count,
            a.as_mut_ptr(),
            idx.as_mut_ptr(),
            num_attrs,
            s,
        )
    }
}

fn show(d: &Driver, r: u32) -> String {
    if r == u32::MAX {
        "the driver lacks the entry point".into()
    } else {
        name(d, r)
    }
}

fn v2_ok(d: &'static Driver) -> String {
    let mut b = batch(d);
    let s = stream(d, 1);
    let r = v2(d, &mut b, 3, 1, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, 0, s);
    ok("sync", cu!(d, cuStreamSynchronize(s)));
    let intact = (0..3).all(|i| b.host[i * 4096..(i + 1) * 4096] == pattern(4096, i as u8)[..]);
    format!(
        "{}, data {}",
        show(d, r),
        if intact { "intact" } else { "wrong" }
    )
}

fn v2_count_zero(d: &'static Driver) -> String {
    let mut b = batch(d);
    let s = stream(d, 1);
    show(
        d,
        v2(d, &mut b, 0, 1, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, 0, s),
    )
}

fn v2_no_attrs(d: &'static Driver) -> String {
    let mut b = batch(d);
    let s = stream(d, 1);
    show(
        d,
        v2(d, &mut b, 3, 0, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, 0, s),
    )
}

fn v2_order_zero(d: &'static Driver) -> String {
    let mut b = batch(d);
    let s = stream(d, 1);
    show(d, v2(d, &mut b, 3, 1, 0, 0, s))
}

fn v2_first_index(d: &'static Driver) -> String {
    let mut b = batch(d);
    let s = stream(d, 1);
    show(
        d,
        v2(d, &mut b, 3, 1, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, 1, s),
    )
}

fn v2_legacy(d: &'static Driver) -> String {
    let mut b = batch(d);
    show(
        d,
        v2(
            d,
            &mut b,
            3,
            1,
            CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
            0,
            std::ptr::null_mut(),
        ),
    )
}

/// `b` with its third copy's source freed.
fn with_freed_source(d: &'static Driver) -> Batch {
    let b = batch(d);
    ok("sync", cu!(d, cuCtxSynchronize()));
    ok("free", cu!(d, cuMemFree(b.srcs[2])));
    b
}

fn v2_bad_copy(d: &'static Driver) -> String {
    let mut b = with_freed_source(d);
    let s = stream(d, 1);
    show(
        d,
        v2(d, &mut b, 3, 1, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, 0, s),
    )
}

/// `cuMemcpyBatchAsync` (12.8) of `b`; returns the code and the failure index (which
/// starts as 77).
fn v1(d: &Driver, b: &mut Batch, num_attrs: usize) -> (u32, usize) {
    let Some(f) = d.cuMemcpyBatchAsync else {
        return (u32::MAX, 0);
    };
    let s = stream(d, 1);
    let mut a = [attrs(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM)];
    let mut idx = [0usize];
    let mut fail = 77usize;
    // SAFETY: as in `v2`; `fail` is a live out-pointer.
    let r = unsafe {
        f(
            b.dsts.as_mut_ptr(),
            b.srcs.as_mut_ptr(),
            b.sizes.as_mut_ptr(),
            3,
            a.as_mut_ptr(),
            idx.as_mut_ptr(),
            num_attrs,
            &mut fail,
            s,
        )
    };
    ok("sync", cu!(d, cuStreamSynchronize(s)));
    (r, fail)
}

fn fail_index(i: usize) -> String {
    if i == usize::MAX {
        "SIZE_MAX".into()
    } else {
        i.to_string()
    }
}

fn v1_fail_index(d: &'static Driver) -> String {
    let mut b = with_freed_source(d);
    let (r, i) = v1(d, &mut b, 1);
    format!("{}, failIdx {}", show(d, r), fail_index(i))
}

fn v1_copy_past_end(d: &'static Driver) -> String {
    let mut b = batch(d);
    b.sizes[2] = 1 << 20;
    let (r, i) = v1(d, &mut b, 1);
    format!("{}, failIdx {}", show(d, r), fail_index(i))
}

fn v1_no_attrs(d: &'static Driver) -> String {
    let mut b = batch(d);
    let (r, i) = v1(d, &mut b, 0);
    format!("{}, failIdx {}", show(d, r), fail_index(i))
}

fn v1_ok(d: &'static Driver) -> String {
    let mut b = batch(d);
    let (r, i) = v1(d, &mut b, 1);
    format!("{}, failIdx {}", show(d, r), fail_index(i))
}
