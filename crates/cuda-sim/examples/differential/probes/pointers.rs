//! Pointer attributes of device, page-locked, registered and pageable memory.

use std::ffi::{c_int, c_void};

use super::args::pages;
use super::{probe, Probe};
use crate::common::*;
use crate::cu;

const G: &str = "pointer attributes";

const CONTEXT: c_int = 1;
const MEMORY_TYPE: c_int = 2;
const DEVICE_POINTER: c_int = 3;
const HOST_POINTER: c_int = 4;
const IS_MANAGED: c_int = 8;
const DEVICE_ORDINAL: c_int = 9;
const RANGE_START: c_int = 11;
const RANGE_SIZE: c_int = 12;

pub const PROBES: &[Probe] = &[
    probe(
        G,
        "cuPointerGetAttribute(MEMORY_TYPE) of device memory",
        "2",
        device_type,
    ),
    probe(
        G,
        "cuPointerGetAttribute(MEMORY_TYPE) of cuMemHostAlloc memory",
        "1",
        pinned_type,
    ),
    probe(
        G,
        "cuPointerGetAttribute(MEMORY_TYPE) of pageable memory",
        "CUDA_ERROR_INVALID_VALUE",
        pageable_type,
    ),
    probe(
        G,
        "cuPointerGetAttributes(type, managed, range) of pageable memory",
        "CUDA_SUCCESS: type 0, managed 0, start 7, size 7",
        pageable_attributes,
    ),
    probe(
        G,
        "RANGE_START / RANGE_SIZE, 100 bytes into a 1 MiB device allocation",
        "CUDA_SUCCESS: start +0, size 1048576",
        device_range,
    ),
    probe(
        G,
        "RANGE_START / RANGE_SIZE, 100 bytes into 10000 bytes of cuMemHostAlloc",
        "CUDA_SUCCESS: start +0, size 10000",
        pinned_range,
    ),
    probe(
        G,
        "RANGE_START / RANGE_SIZE, 100 bytes into a registration of 5000 bytes at +100",
        "CUDA_SUCCESS: start +100, size 5000",
        registered_range,
    ),
    probe(
        G,
        "cuPointerGetAttribute(HOST_POINTER) of device memory",
        "CUDA_ERROR_INVALID_VALUE",
        host_pointer_of_device,
    ),
    probe(
        G,
        "cuPointerGetAttribute(DEVICE_POINTER) of cuMemHostAlloc memory",
        "the same address",
        device_pointer_of_pinned,
    ),
    probe(
        G,
        "cuPointerGetAttribute(IS_MANAGED) of device memory",
        "0",
        managed_device,
    ),
    probe(
        G,
        "cuPointerGetAttribute(CONTEXT) of device memory",
        "the current context",
        context_of_device,
    ),
    probe(
        G,
        "cuPointerGetAttribute(DEVICE_ORDINAL) of cuMemHostAlloc memory",
        "0",
        ordinal_of_pinned,
    ),
];

/// A 4-byte attribute of `p`, or the error.
fn attr_u32(d: &Driver, attr: c_int, p: u64) -> String {
    let mut v: u32 = 0xAAAA_AAAA;
    match cu!(
        d,
        cuPointerGetAttribute((&mut v as *mut u32).cast(), attr, p)
    ) {
        0 => v.to_string(),
        e => name(d, e),
    }
}

/// An 8-byte attribute of `p`.
fn attr_u64(d: &Driver, attr: c_int, p: u64) -> Result<u64, String> {
    let mut v: u64 = 0xAAAA_AAAA_AAAA_AAAA;
    match cu!(
        d,
        cuPointerGetAttribute((&mut v as *mut u64).cast(), attr, p)
    ) {
        0 => Ok(v),
        e => Err(name(d, e)),
    }
}

/// Range start (relative to `base`) and size of `p`.
fn range(d: &Driver, p: u64, base: u64) -> String {
    match (attr_u64(d, RANGE_START, p), attr_u64(d, RANGE_SIZE, p)) {
        (Ok(start), Ok(size)) => format!(
            "CUDA_SUCCESS: start {:+}, size {size}",
            start as i64 - base as i64
        ),
        (Err(e), _) | (_, Err(e)) => e,
    }
}

fn device_type(d: &'static Driver) -> String {
    context(d);
    attr_u32(d, MEMORY_TYPE, alloc(d, 4096))
}

fn pinned_type(d: &'static Driver) -> String {
    context(d);
    attr_u32(d, MEMORY_TYPE, pinned(d, 4096).as_ptr() as u64)
}

fn pageable_type(d: &'static Driver) -> String {
    context(d);
    let v = vec![0u8; 4096];
    attr_u32(d, MEMORY_TYPE, v.as_ptr() as u64)
}

fn pageable_attributes(d: &'static Driver) -> String {
    context(d);
    let v = vec![0u8; 4096];
    let (mut kind, mut managed, mut start, mut size) = (7u32, 7u32, 7u64, 7usize);
    let mut attrs = [MEMORY_TYPE, IS_MANAGED, RANGE_START, RANGE_SIZE];
    let mut data: [*mut c_void; 4] = [
        (&mut kind as *mut u32).cast(),
        (&mut managed as *mut u32).cast(),
        (&mut start as *mut u64).cast(),
        (&mut size as *mut usize).cast(),
    ];
    let r = cu!(
        d,
        cuPointerGetAttributes(4, attrs.as_mut_ptr(), data.as_mut_ptr(), v.as_ptr() as u64)
    );
    format!(
        "{}: type {kind}, managed {managed}, start {start}, size {size}",
        name(d, r)
    )
}

fn device_range(d: &'static Driver) -> String {
    context(d);
    let p = alloc(d, 1 << 20);
    range(d, p + 100, p)
}

fn pinned_range(d: &'static Driver) -> String {
    context(d);
    let p = pinned(d, 10000).as_ptr() as u64;
    range(d, p + 100, p)
}

fn registered_range(d: &'static Driver) -> String {
    context(d);
    let p = pages(4) as u64;
    ok(
        "register",
        cu!(d, cuMemHostRegister((p + 100) as *mut c_void, 5000, 0)),
    );
    let r = range(d, p + 200, p);
    ok(
        "unregister",
        cu!(d, cuMemHostUnregister((p + 100) as *mut c_void)),
    );
    r
}

fn host_pointer_of_device(d: &'static Driver) -> String {
    context(d);
    let p = alloc(d, 4096);
    attr_u64(d, HOST_POINTER, p).map_or_else(|e| e, |v| format!("{v:#x}"))
}

fn device_pointer_of_pinned(d: &'static Driver) -> String {
    context(d);
    let p = pinned(d, 4096).as_ptr() as u64;
    match attr_u64(d, DEVICE_POINTER, p) {
        Ok(v) if v == p => "the same address".into(),
        Ok(v) => format!("another address ({:+})", v as i64 - p as i64),
        Err(e) => e,
    }
}

fn managed_device(d: &'static Driver) -> String {
    context(d);
    attr_u32(d, IS_MANAGED, alloc(d, 4096))
}

fn context_of_device(d: &'static Driver) -> String {
    let ctx = context(d);
    let p = alloc(d, 4096);
    match attr_u64(d, CONTEXT, p) {
        Ok(v) if v == ctx as u64 => "the current context".into(),
        Ok(v) => format!("another context ({v:#x})"),
        Err(e) => e,
    }
}

fn ordinal_of_pinned(d: &'static Driver) -> String {
    context(d);
    attr_u32(d, DEVICE_ORDINAL, pinned(d, 4096).as_ptr() as u64)
}
