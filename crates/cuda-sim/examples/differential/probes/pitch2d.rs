//! 2-D copies: the pitch checks, and a round trip through a pitched allocation.

use cuda_sys::{CUmemorytype, CUDA_MEMCPY2D};

use super::{differs, probe, Probe};
use crate::common::*;
use crate::cu;

const G: &str = "2-D copies";

pub const PROBES: &[Probe] = &[
    probe(
        G,
        "cuMemcpy2D host to pitched device, and back: the data",
        "CUDA_SUCCESS, rows intact",
        round_trip,
    ),
    probe(
        G,
        "cuMemcpy2D(srcPitch < WidthInBytes)",
        "CUDA_ERROR_INVALID_VALUE",
        src_pitch_short,
    ),
    probe(
        G,
        "cuMemcpy2D(dstPitch < WidthInBytes + dstXInBytes)",
        "CUDA_ERROR_INVALID_VALUE",
        dst_pitch_short,
    ),
    probe(
        G,
        "cuMemcpy2D(one row, device pitch 2^31, past MAX_PITCH)",
        "CUDA_SUCCESS",
        pitch_past_max,
    ),
    probe(
        G,
        "cuMemcpy2D(two rows, device pitch 2^31, past MAX_PITCH)",
        "CUDA_ERROR_INVALID_VALUE",
        two_rows_pitch_past_max,
    ),
    probe(G, "cuMemcpy2D(WidthInBytes 0)", "CUDA_SUCCESS", width_zero),
    probe(
        G,
        "cuMemcpy2D(one row, pitches 0)",
        "CUDA_SUCCESS",
        one_row_pitch_zero,
    ),
    differs(
        G,
        "cuMemcpy2D(two rows, pitches 0)",
        "CUDA_ERROR_INVALID_VALUE",
        "stricter: a pitch below the row width is refused with more than one row; the driver accepts pitch 0 (CUDA_SUCCESS on the H200)",
        two_rows_pitch_zero,
    ),
    probe(
        G,
        "cuMemcpy2D(rows running past the device allocation)",
        "CUDA_ERROR_INVALID_VALUE",
        rows_past_end,
    ),
    probe(
        G,
        "cuMemcpy2DAsync(device to pageable rows) behind queued work: landed at return?",
        "landed",
        async_to_pageable,
    ),
];

/// A host-to-device copy of `height` rows of `width` bytes, pitches as given.
fn htod(
    src: *const u8,
    src_pitch: usize,
    dst: u64,
    dst_pitch: usize,
    width: usize,
    height: usize,
) -> CUDA_MEMCPY2D {
    CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: CUmemorytype::CU_MEMORYTYPE_HOST,
        srcHost: src.cast(),
        srcDevice: 0,
        srcArray: std::ptr::null_mut(),
        srcPitch: src_pitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst,
        dstArray: std::ptr::null_mut(),
        dstPitch: dst_pitch,
        WidthInBytes: width,
        Height: height,
    }
}

/// The reverse of `htod`.
fn dtoh(
    src: u64,
    src_pitch: usize,
    dst: *mut u8,
    dst_pitch: usize,
    width: usize,
    height: usize,
) -> CUDA_MEMCPY2D {
    CUDA_MEMCPY2D {
        srcMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: src,
        srcPitch: src_pitch,
        dstMemoryType: CUmemorytype::CU_MEMORYTYPE_HOST,
        dstHost: dst.cast(),
        dstDevice: 0,
        dstPitch: dst_pitch,
        ..htod(std::ptr::null(), 0, 0, 0, width, height)
    }
}

/// A pitched allocation of `height` rows of `width` bytes, and its pitch.
fn pitched(d: &Driver, width: usize, height: usize) -> (u64, usize) {
    let (mut p, mut pitch) = (0, 0);
    ok(
        "cuMemAllocPitch",
        cu!(d, cuMemAllocPitch(&mut p, &mut pitch, width, height, 4)),
    );
    (p, pitch)
}

fn round_trip(d: &'static Driver) -> String {
    context(d);
    let (w, h, host_pitch) = (300, 7, 333);
    let (p, pitch) = pitched(d, w, h);
    let src = pattern(host_pitch * h, 9);
    let r = cu!(
        d,
        cuMemcpy2D(&htod(src.as_ptr(), host_pitch, p, pitch, w, h))
    );
    let mut back = vec![0u8; host_pitch * h];
    ok(
        "back",
        cu!(
            d,
            cuMemcpy2D(&dtoh(p, pitch, back.as_mut_ptr(), host_pitch, w, h))
        ),
    );
    let intact = (0..h).all(|r| {
        back[r * host_pitch..r * host_pitch + w] == src[r * host_pitch..r * host_pitch + w]
    });
    format!(
        "{}, rows {}",
        name(d, r),
        if intact { "intact" } else { "wrong" }
    )
}

fn src_pitch_short(d: &'static Driver) -> String {
    context(d);
    let (p, pitch) = pitched(d, 256, 4);
    let src = vec![0u8; 4096];
    name(
        d,
        cu!(d, cuMemcpy2D(&htod(src.as_ptr(), 200, p, pitch, 256, 4))),
    )
}

fn dst_pitch_short(d: &'static Driver) -> String {
    context(d);
    let (p, pitch) = pitched(d, 256, 4);
    let src = vec![0u8; 4096];
    let mut c = htod(src.as_ptr(), 256, p, pitch, 256, 4);
    c.dstXInBytes = pitch - 100;
    name(d, cu!(d, cuMemcpy2D(&c)))
}

fn pitch_past_max(d: &'static Driver) -> String {
    context(d);
    let p = alloc(d, 1 << 20);
    let src = vec![0u8; 4096];
    name(
        d,
        cu!(d, cuMemcpy2D(&htod(src.as_ptr(), 256, p, 1 << 31, 256, 1))),
    )
}

fn two_rows_pitch_past_max(d: &'static Driver) -> String {
    context(d);
    let p = alloc(d, 1 << 20);
    let src = vec![0u8; 4096];
    name(
        d,
        cu!(d, cuMemcpy2D(&htod(src.as_ptr(), 256, p, 1 << 31, 256, 2))),
    )
}

fn width_zero(d: &'static Driver) -> String {
    context(d);
    let (p, pitch) = pitched(d, 256, 4);
    let src = vec![0u8; 4096];
    name(
        d,
        cu!(d, cuMemcpy2D(&htod(src.as_ptr(), 256, p, pitch, 0, 4))),
    )
}

fn one_row_pitch_zero(d: &'static Driver) -> String {
    context(d);
    let (p, _) = pitched(d, 256, 4);
    let src = vec![0u8; 4096];
    name(d, cu!(d, cuMemcpy2D(&htod(src.as_ptr(), 0, p, 0, 256, 1))))
}

fn two_rows_pitch_zero(d: &'static Driver) -> String {
    context(d);
    let (p, _) = pitched(d, 256, 4);
    let src = vec![0u8; 4096];
    name(d, cu!(d, cuMemcpy2D(&htod(src.as_ptr(), 0, p, 0, 256, 2))))
}

fn rows_past_end(d: &'static Driver) -> String {
    context(d);
    let (p, pitch) = pitched(d, 256, 4);
    let src = vec![0u8; 256 * 8];
    name(
        d,
        cu!(d, cuMemcpy2D(&htod(src.as_ptr(), 256, p, pitch, 256, 8))),
    )
}

fn async_to_pageable(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, 1);
    let (w, h) = (256, 16);
    let (p, pitch) = pitched(d, w, h);
    let src = pattern(w * h, 4);
    ok(
        "fill",
        cu!(d, cuMemcpy2D(&htod(src.as_ptr(), w, p, pitch, w, h))),
    );
    // The synchronous copy from pageable rows may land after it returns.
    ok("sync", cu!(d, cuCtxSynchronize()));
    let busy = Busy::new(d);
    busy.queue(d, s, 40);
    let mut back = vec![0u8; w * h];
    ok(
        "download",
        cu!(
            d,
            cuMemcpy2DAsync(&dtoh(p, pitch, back.as_mut_ptr(), w, w, h), s)
        ),
    );
    let landed = back == src;
    ok("sync", cu!(d, cuStreamSynchronize(s)));
    if landed { "landed" } else { "not yet" }.into()
}
