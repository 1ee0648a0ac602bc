//! Bad arguments: each refused with the reference's code.

use std::ffi::{c_char, c_void};

use super::{differs, probe, Probe};
use crate::common::*;
use crate::cu;

const G: &str = "bad arguments";

pub const PROBES: &[Probe] = &[
    probe(G, "cuInit(flags 1)", "CUDA_ERROR_INVALID_VALUE", init_flags),
    probe(G, "cuDeviceGet(ordinal = device count)", "CUDA_ERROR_INVALID_DEVICE", device_past_count),
    differs(
        G,
        "cuDeviceGetName(len 0)",
        "CUDA_ERROR_INVALID_VALUE",
        "stricter: the driver crashed (signal 11) on the H200 (driver 580, CUDA 13.0); the simulator refuses the call",
        name_len_zero,
    ),
    probe(G, "cuMemAlloc(0 bytes)", "CUDA_ERROR_INVALID_VALUE", alloc_zero),
    probe(G, "cuMemAlloc(1 PiB)", "CUDA_ERROR_OUT_OF_MEMORY", alloc_huge),
    probe(G, "cuMemFree(an address never allocated)", "CUDA_ERROR_INVALID_VALUE", free_unknown),
    probe(G, "cuMemFree twice", "CUDA_ERROR_INVALID_VALUE", double_free),
    probe(G, "cuMemcpyHtoD into freed memory", "CUDA_ERROR_INVALID_VALUE", copy_into_freed),
    differs(
        G,
        "cuMemcpyHtoD running 104 bytes past an allocation's end",
        "CUDA_ERROR_INVALID_VALUE",
        "stricter: a copy must lie inside one allocation; the driver may let it run on into the next",
        copy_past_end,
    ),
    probe(G, "cuMemcpyDtoH(dst NULL)", "CUDA_ERROR_INVALID_VALUE", dtoh_null),
    probe(G, "cuStreamCreate(flags 2)", "CUDA_ERROR_INVALID_VALUE", stream_bad_flags),
    differs(
        G,
        "cuStreamQuery(a destroyed stream)",
        "CUDA_ERROR_INVALID_HANDLE",
        "stricter: the driver crashed (signal 11) on the H200 (driver 580, CUDA 13.0); the simulator refuses the call",
        destroyed_stream,
    ),
    probe(G, "cuEventCreate(INTERPROCESS without DISABLE_TIMING)", "CUDA_ERROR_INVALID_VALUE", event_interprocess),
    probe(G, "cuEventElapsedTime(DISABLE_TIMING events)", "CUDA_ERROR_INVALID_HANDLE", elapsed_no_timing),
    probe(G, "cuEventElapsedTime(end never recorded)", "CUDA_ERROR_INVALID_HANDLE", elapsed_unrecorded),
    probe(G, "cuMemHostAlloc(flags 0x10)", "CUDA_ERROR_INVALID_VALUE", host_alloc_flags),
    probe(G, "cuMemHostRegister(overlapping a registration)", "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", register_overlap),
    probe(G, "cuMemHostRegister(cuMemHostAlloc memory)", "CUDA_ERROR_INVALID_VALUE", register_pinned),
    probe(G, "cuMemHostUnregister(memory never registered)", "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", unregister_unknown),
    probe(G, "cuMemsetD32Async(dst not 4-byte aligned)", "CUDA_ERROR_INVALID_VALUE", memset32_misaligned),
    probe(G, "cuCtxPopCurrent on a thread with no context", "CUDA_ERROR_INVALID_CONTEXT", pop_empty),
    probe(G, "cuMemAlloc on a thread with no context", "CUDA_ERROR_INVALID_CONTEXT", alloc_no_context),
    probe(G, "cuMemAllocPitch(element size 3)", "CUDA_ERROR_INVALID_VALUE", pitch_element_3),
    probe(G, "cuMemAllocPitch(100 x 10, 4): the pitch", "CUDA_SUCCESS, pitch 512", pitch_100),
    probe(G, "cuMemAllocPitch(641 x 3, 4): the pitch", "CUDA_SUCCESS, pitch 1024", pitch_641),
    probe(G, "cuModuleGetFunction(a name the module lacks)", "CUDA_ERROR_NOT_FOUND", function_missing),
    differs(
        G,
        "cuLaunchKernel(an empty kernel), then cuStreamSynchronize",
        "CUDA_ERROR_NOT_SUPPORTED",
        "not modelled: the simulator runs no device code; the driver runs it (CUDA_SUCCESS)",
        launch_empty_kernel,
    ),
    probe(G, "cuGetErrorName(12345)", "CUDA_ERROR_INVALID_VALUE", error_name_unknown),
    probe(G, "cuGetErrorString(700)", "an illegal memory access was encountered", error_string_700),
];

fn init_flags(d: &'static Driver) -> String {
    name(d, cu!(d, cuInit(1)))
}

fn device_past_count(d: &'static Driver) -> String {
    context(d);
    let (mut n, mut dev) = (0, 0);
    ok("count", cu!(d, cuDeviceGetCount(&mut n)));
    name(d, cu!(d, cuDeviceGet(&mut dev, n)))
}

fn name_len_zero(d: &'static Driver) -> String {
    context(d);
    let mut buf = [0 as c_char; 8];
    name(d, cu!(d, cuDeviceGetName(buf.as_mut_ptr(), 0, 0)))
}

fn alloc_zero(d: &'static Driver) -> String {
    context(d);
    let mut p = 0;
    name(d, cu!(d, cuMemAlloc(&mut p, 0)))
}

fn alloc_huge(d: &'static Driver) -> String {
    context(d);
    let mut p = 0;
    name(d, cu!(d, cuMemAlloc(&mut p, 1 << 50)))
}

fn free_unknown(d: &'static Driver) -> String {
    context(d);
    let p = alloc(d, 4096);
    name(d, cu!(d, cuMemFree(p + (1 << 30))))
}

fn double_free(d: &'static Driver) -> String {
    context(d);
    let p = alloc(d, 4096);
    ok("free", cu!(d, cuMemFree(p)));
    name(d, cu!(d, cuMemFree(p)))
}

fn copy_into_freed(d: &'static Driver) -> String {
    context(d);
    let p = alloc(d, 1 << 20);
    ok("free", cu!(d, cuMemFree(p)));
    let v = [1u8; 16];
    name(d, cu!(d, cuMemcpyHtoD(p, v.as_ptr().cast(), 16)))
}

fn copy_past_end(d: &'static Driver) -> String {
    context(d);
    let p = alloc(d, 4096);
    let v = [1u8; 200];
    name(d, cu!(d, cuMemcpyHtoD(p + 4000, v.as_ptr().cast(), 200)))
}

fn dtoh_null(d: &'static Driver) -> String {
    context(d);
    let p = alloc(d, 4096);
    name(d, cu!(d, cuMemcpyDtoH(std::ptr::null_mut(), p, 16)))
}

fn stream_bad_flags(d: &'static Driver) -> String {
    context(d);
    let mut s = std::ptr::null_mut();
    name(d, cu!(d, cuStreamCreate(&mut s, 2)))
}

fn destroyed_stream(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, 1);
    ok("destroy", cu!(d, cuStreamDestroy(s)));
    name(d, cu!(d, cuStreamQuery(s)))
}

fn event_interprocess(d: &'static Driver) -> String {
    context(d);
    let mut e = std::ptr::null_mut();
    name(d, cu!(d, cuEventCreate(&mut e, 4)))
}

fn elapsed_no_timing(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, 1);
    let (a, b) = (event(d, 2), event(d, 2));
    ok("record", cu!(d, cuEventRecord(a, s)));
    ok("record", cu!(d, cuEventRecord(b, s)));
    ok("sync", cu!(d, cuStreamSynchronize(s)));
    let mut ms = 0f32;
    name(d, cu!(d, cuEventElapsedTime(&mut ms, a, b)))
}

fn elapsed_unrecorded(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, 1);
    let (a, b) = (event(d, 0), event(d, 0));
    ok("record", cu!(d, cuEventRecord(a, s)));
    ok("sync", cu!(d, cuStreamSynchronize(s)));
    let mut ms = 0f32;
    name(d, cu!(d, cuEventElapsedTime(&mut ms, a, b)))
}

fn host_alloc_flags(d: &'static Driver) -> String {
    context(d);
    let mut p: *mut c_void = std::ptr::null_mut();
    name(d, cu!(d, cuMemHostAlloc(&mut p, 4096, 0x10)))
}

/// `pages` pages of host memory (page-aligned), never freed.
pub fn pages(pages: usize) -> *mut u8 {
    let layout = std::alloc::Layout::from_size_align(pages * 4096, 4096).expect("layout");
    // SAFETY: a non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    assert!(!p.is_null(), "host memory");
    p
}

fn register_overlap(d: &'static Driver) -> String {
    context(d);
    let p = pages(4);
    ok("register", cu!(d, cuMemHostRegister(p.cast(), 2 * 4096, 0)));
    // SAFETY: inside the 4 pages.
    let q = unsafe { p.add(4096) };
    let r = cu!(d, cuMemHostRegister(q.cast(), 2 * 4096, 0));
    ok("unregister", cu!(d, cuMemHostUnregister(p.cast())));
    name(d, r)
}

fn register_pinned(d: &'static Driver) -> String {
    context(d);
    let p = pinned(d, 8192);
    name(d, cu!(d, cuMemHostRegister(p.as_mut_ptr().cast(), 4096, 0)))
}

fn unregister_unknown(d: &'static Driver) -> String {
    context(d);
    let p = pages(1);
    name(d, cu!(d, cuMemHostUnregister(p.cast())))
}

fn memset32_misaligned(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, 1);
    let p = alloc(d, 4096);
    name(d, cu!(d, cuMemsetD32Async(p + 1, 0, 4, s)))
}

fn pop_empty(d: &'static Driver) -> String {
    ok("cuInit", cu!(d, cuInit(0)));
    std::thread::scope(|t| {
        t.spawn(|| {
            let mut c = std::ptr::null_mut();
            name(d, cu!(d, cuCtxPopCurrent(&mut c)))
        })
        .join()
        .expect("the thread")
    })
}

fn alloc_no_context(d: &'static Driver) -> String {
    ok("cuInit", cu!(d, cuInit(0)));
    std::thread::scope(|t| {
        t.spawn(|| {
            let mut p = 0;
            name(d, cu!(d, cuMemAlloc(&mut p, 4096)))
        })
        .join()
        .expect("the thread")
    })
}

fn pitch_element_3(d: &'static Driver) -> String {
    context(d);
    let (mut p, mut pitch) = (0, 0);
    name(d, cu!(d, cuMemAllocPitch(&mut p, &mut pitch, 100, 10, 3)))
}

fn pitch_of(d: &Driver, width: usize, height: usize) -> String {
    context(d);
    let (mut p, mut pitch) = (0, 0);
    let r = cu!(d, cuMemAllocPitch(&mut p, &mut pitch, width, height, 4));
    format!("{}, pitch {pitch}", name(d, r))
}

fn pitch_100(d: &'static Driver) -> String {
    pitch_of(d, 100, 10)
}

fn pitch_641(d: &'static Driver) -> String {
    pitch_of(d, 641, 3)
}

const NOOP_PTX: &str =
    ".version 7.0\n.target sm_75\n.address_size 64\n\n.visible .entry noop()\n{\n    ret;\n}\n\0";

fn module(d: &Driver) -> cuda_sys::CUmodule {
    let mut m = std::ptr::null_mut();
    let r = cu!(
        d,
        cuModuleLoadDataEx(
            &mut m,
            NOOP_PTX.as_ptr().cast(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut()
        )
    );
    ok("cuModuleLoadDataEx", r);
    m
}

fn function_missing(d: &'static Driver) -> String {
    context(d);
    let m = module(d);
    let mut f = std::ptr::null_mut();
    name(d, cu!(d, cuModuleGetFunction(&mut f, m, c"nope".as_ptr())))
}

fn launch_empty_kernel(d: &'static Driver) -> String {
    context(d);
    let m = module(d);
    let mut f = std::ptr::null_mut();
    ok(
        "cuModuleGetFunction",
        cu!(d, cuModuleGetFunction(&mut f, m, c"noop".as_ptr())),
    );
    let s = stream(d, 1);
    let r = cu!(
        d,
        cuLaunchKernel(
            f,
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            s,
            std::ptr::null_mut(),
            std::ptr::null_mut()
        )
    );
    if r != 0 {
        return name(d, r);
    }
    name(d, cu!(d, cuStreamSynchronize(s)))
}

fn error_name_unknown(d: &'static Driver) -> String {
    let mut p = std::ptr::null();
    name(d, cu!(d, cuGetErrorName(12345, &mut p)))
}

fn error_string_700(d: &'static Driver) -> String {
    let mut p = std::ptr::null();
    let r = cu!(d, cuGetErrorString(700, &mut p));
    if r != 0 || p.is_null() {
        return name(d, r);
    }
    // SAFETY: on success the driver points at a static NUL-terminated string.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}
