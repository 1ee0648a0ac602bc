//! Helpers shared by the test binaries of `cuda-core` (the GPU ones, and `cpu.rs` for
//! `Aligned512`).
//!
//! Data is checked, not just `is_ok()`: buffers are filled with byte patterns that
//! differ per element and per call (seeded by a tag and a number, never a zero
//! byte), destinations are pre-filled with a *different* pattern, and every byte is
//! compared.
//!
//! Each test binary uses some of these.
#![allow(dead_code)]

use bytemuck::{Pod, Zeroable};
use cuda_core::{query_host_memory, Context, DeviceBuffer, HostMemory};

pub const KIB: usize = 1024;
pub const MIB: usize = 1024 * KIB;

/// Device 0's context, current on this thread. Panics (the test fails) when there
/// is no GPU: a GPU test never passes quietly without one.
#[track_caller]
pub fn gpu() -> Context {
    Context::new(0).unwrap_or_else(|e| {
        panic!(
            "GPU test could not get CUDA device 0 ({e}); these tests need an NVIDIA GPU \
             and driver: run them with cargo xtask test-gpu"
        )
    })
}

pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A seed that differs per test (`tag`) and per call (`n`).
pub fn seed(tag: &str, n: usize) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64; // FNV-1a
    for b in tag.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    splitmix64(h ^ splitmix64(n as u64))
}

/// Overwrites `dst` with a pseudo-random byte pattern determined by `seed`; no byte
/// is zero, so the pattern can never be mistaken for zeroed memory, and no two
/// elements are likely to be equal.
pub fn fill<T: Pod>(dst: &mut [T], seed: u64) {
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(dst);
    let s = splitmix64(seed);
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        let mut b = splitmix64(s ^ i as u64).to_le_bytes();
        for x in &mut b {
            if *x == 0 {
                *x = 0xa5;
            }
        }
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// `len` elements of the pattern of `seed`.
pub fn pattern<T: Pod>(len: usize, seed: u64) -> Vec<T> {
    let mut v = vec![T::zeroed(); len];
    fill(&mut v, seed);
    v
}

/// Compares every byte; on failure names how many elements differ and the first.
#[track_caller]
pub fn assert_same<T: Pod>(what: &str, expected: &[T], got: &[T]) {
    assert_eq!(expected.len(), got.len(), "{what}: lengths differ");
    let e: &[u8] = bytemuck::cast_slice(expected);
    let g: &[u8] = bytemuck::cast_slice(got);
    if e == g {
        return;
    }
    let size = std::mem::size_of::<T>().max(1);
    let differ = |(a, b): &(&[u8], &[u8])| a != b;
    let bad = e.chunks(size).zip(g.chunks(size)).filter(differ).count();
    let first = e
        .chunks(size)
        .zip(g.chunks(size))
        .position(|p| differ(&p))
        .expect("some element differs");
    panic!(
        "{what}: {bad} of {} elements ({size} bytes each) differ; first at element {first}: \
         expected {:02x?}, got {:02x?}",
        expected.len(),
        &e[first * size..(first + 1) * size],
        &g[first * size..(first + 1) * size],
    );
}

#[track_caller]
pub fn assert_all_zero<T: Pod>(what: &str, got: &[T]) {
    let g: &[u8] = bytemuck::cast_slice(got);
    if let Some(i) = g.iter().position(|&b| b != 0) {
        let nonzero = g.iter().filter(|&&b| b != 0).count();
        panic!(
            "{what}: {nonzero} of {} bytes are not zero; first at byte {i}: {:#04x}",
            g.len(),
            g[i]
        );
    }
}

/// A device buffer holding `data`, written with the synchronous `copy_from_host`.
#[track_caller]
pub fn device_with<T: Pod>(data: &[T]) -> DeviceBuffer<T> {
    let mut d = DeviceBuffer::<T>::alloc(data.len()).expect("DeviceBuffer::alloc");
    d.copy_from_host(data).expect("copy_from_host");
    d
}

/// What `d` holds, read with the synchronous `copy_to_host` into memory pre-filled
/// with another pattern.
#[track_caller]
pub fn device_contents<T: Pod>(d: &DeviceBuffer<T>) -> Vec<T> {
    let mut back: Vec<T> = pattern(d.len(), 0x0bad_5eed ^ d.len() as u64);
    d.copy_to_host(&mut back).expect("copy_to_host");
    back
}

/// Reads `d` back (synchronously) and compares every element with `expected`.
#[track_caller]
pub fn assert_device_holds<T: Pod>(what: &str, d: &DeviceBuffer<T>, expected: &[T]) {
    assert_same(what, expected, &device_contents(d));
}

/// Uploads a fresh pattern with `copy_from_host`, reads it back with `copy_to_host`
/// into a buffer pre-filled with another pattern, compares every element.
#[track_caller]
pub fn check_round_trip<T: Pod>(what: &str, d: &mut DeviceBuffer<T>, seed: u64) {
    let host: Vec<T> = pattern(d.len(), seed);
    d.copy_from_host(&host)
        .unwrap_or_else(|e| panic!("{what}: copy_from_host: {e}"));
    let mut back: Vec<T> = pattern(d.len(), !seed);
    d.copy_to_host(&mut back)
        .unwrap_or_else(|e| panic!("{what}: copy_to_host: {e}"));
    assert_same(what, &host, &back);
}

/// The page-locked block the driver reports for `addr`, which must be page-locked.
#[track_caller]
pub fn page_locked_block(ctx: &Context, what: &str, addr: *const u8) -> std::ops::Range<usize> {
    match query_host_memory(ctx, addr.cast()) {
        HostMemory::PageLocked { block: Some(block) } => block,
        other => panic!(
            "{what}: query_host_memory({addr:p}) = {other:?}, expected PageLocked with the \
             block the driver reports (CUDA 13 on our H200 reports one)"
        ),
    }
}

/// Asserts that the driver sees `len` bytes at `addr` as one page-locked block.
#[track_caller]
pub fn assert_page_locked(ctx: &Context, what: &str, addr: *const u8, len: usize) {
    let block = page_locked_block(ctx, what, addr);
    let range = addr as usize..addr as usize + len;
    assert!(
        block.start <= range.start && range.end <= block.end,
        "{what}: the reported block {block:#x?} does not hold {range:#x?}"
    );
}

/// Asserts that the driver does not see `addr` as page-locked host memory.
#[track_caller]
pub fn assert_not_page_locked(ctx: &Context, what: &str, addr: *const u8) {
    assert_eq!(
        query_host_memory(ctx, addr.cast()),
        HostMemory::Other,
        "{what}: {addr:p}"
    );
}

/// A 24-byte `#[repr(C)]` element without padding.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct Sample {
    pub id: u32,
    pub score: f32,
    pub flags: [u16; 4],
    pub value: f64,
}

/// A 12-byte `#[repr(C)]` element: not a power of two, 4-byte aligned.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct Vec3 {
    pub x: f32,
    pub y: f32,
    pub z: f32,
}

/// A 3-byte element: sizes that are not a power of two or a multiple of 4.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct Rgb {
    pub r: u8,
    pub g: u8,
    pub b: u8,
}

/// An element aligned above the 256 bytes CUDA guarantees for its allocations (and
/// for small pinned blocks): pinned buffers of it must be refused.
#[repr(C, align(512))]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct Aligned512 {
    pub bytes: [u8; 512],
}

/// An entry point of the simulated driver's own (`cuSimLeakReport`,
/// `cuSimInjectFault`), from the library `CUDA_DRIVER_LIBRARY` names, as `cargo xtask
/// test-gpu --sim` sets it. Panics, failing the test, on a real driver.
///
/// # Safety
/// `F` must be the entry point's signature (`crates/cuda-sim/src/api/device_api.rs`).
pub unsafe fn simulator_entry<F: Copy>(name: &str) -> F {
    let path = std::env::var("CUDA_DRIVER_LIBRARY").unwrap_or_else(|_| {
        panic!(
            "CUDA_DRIVER_LIBRARY is not set: this test needs the simulated driver; \
             run it with cargo xtask test-gpu --sim"
        )
    });
    // SAFETY: the driver is already loaded (a context was made first), so opening it
    // again runs no initialiser. Leaked: the entry point must outlive the handle.
    let lib: &'static libloading::Library = Box::leak(Box::new(
        unsafe { libloading::Library::new(&path) }
            .unwrap_or_else(|e| panic!("cannot open the driver {path}: {e}")),
    ));
    let symbol = format!("{name}\0");
    // SAFETY: `F` is the entry point's signature (the caller's promise).
    *unsafe { lib.get::<F>(symbol.as_bytes()) }.unwrap_or_else(|e| {
        panic!(
            "{path} is not the simulated driver (no {name}: {e}); run this test with \
             cargo xtask test-gpu --sim"
        )
    })
}
