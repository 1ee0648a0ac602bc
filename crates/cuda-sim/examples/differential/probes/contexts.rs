//! Contexts: a second context on the same device, released primary contexts, and
//! queries without a current context.

use super::{differs, probe, Probe};
use crate::common::*;
use crate::cu;

const G: &str = "contexts";

type Destroy = unsafe extern "C" fn(CUcontext) -> u32;

pub const PROBES: &[Probe] = &[
    probe(
        G,
        "cuCtxGetDevice on a thread with no context",
        "CUDA_ERROR_INVALID_CONTEXT",
        device_without_context,
    ),
    probe(
        G,
        "cuMemcpyHtoD into memory of another context of the same device",
        "CUDA_SUCCESS",
        copy_into_other_context,
    ),
    probe(
        G,
        "cuMemFree of memory of another context of the device",
        "CUDA_SUCCESS",
        free_other_context,
    ),
    probe(
        G,
        "cuStreamSynchronize of a stream of another context",
        "CUDA_SUCCESS",
        sync_other_context_stream,
    ),
    probe(
        G,
        "cuEventRecord of an event of one context on a stream of another",
        "CUDA_ERROR_INVALID_HANDLE",
        record_across_contexts,
    ),
    probe(
        G,
        "cuMemAlloc with the primary context current after its last release",
        "CUDA_ERROR_CONTEXT_IS_DESTROYED",
        alloc_after_release,
    ),
    differs(
        G,
        "cuCtxDestroy, then cuCtxSetCurrent of it",
        "CUDA_ERROR_INVALID_CONTEXT",
        "stricter: the driver accepts a destroyed context as current (CUDA_SUCCESS on the H200); the simulator refuses it at once",
        set_destroyed,
    ),
    probe(
        G,
        "cuMemGetInfo: free against total",
        "CUDA_SUCCESS, free <= total",
        mem_info,
    ),
];

/// A new context on device 0, current on this thread.
fn second_context() -> CUcontext {
    let mut c = std::ptr::null_mut();
    // SAFETY: cuCtxCreate_v2's signature.
    let create: CtxCreate = unsafe { symbol("cuCtxCreate_v2") };
    // SAFETY: a live out-pointer and plain values.
    ok("cuCtxCreate", unsafe { create(&mut c, 0, 0) });
    c
}

fn device_without_context(d: &'static Driver) -> String {
    ok("cuInit", cu!(d, cuInit(0)));
    std::thread::scope(|t| {
        t.spawn(|| {
            let mut dev = 0;
            name(d, cu!(d, cuCtxGetDevice(&mut dev)))
        })
        .join()
        .expect("the thread")
    })
}

fn copy_into_other_context(d: &'static Driver) -> String {
    context(d);
    let p = alloc(d, 4096);
    second_context();
    let v = pattern(4096, 1);
    name(d, cu!(d, cuMemcpyHtoD(p, v.as_ptr().cast(), 4096)))
}

fn free_other_context(d: &'static Driver) -> String {
    context(d);
    let p = alloc(d, 4096);
    second_context();
    name(d, cu!(d, cuMemFree(p)))
}

fn sync_other_context_stream(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, 1);
    let busy = Busy::new(d);
    busy.queue(d, s, 2);
    second_context();
    name(d, cu!(d, cuStreamSynchronize(s)))
}

fn record_across_contexts(d: &'static Driver) -> String {
    context(d);
    let e = event(d, 2);
    second_context();
    let s = stream(d, 1);
    name(d, cu!(d, cuEventRecord(e, s)))
}

fn alloc_after_release(d: &'static Driver) -> String {
    ok("cuInit", cu!(d, cuInit(0)));
    std::thread::scope(|t| {
        t.spawn(|| {
            let mut c = std::ptr::null_mut();
            ok("retain", cu!(d, cuDevicePrimaryCtxRetain(&mut c, 0)));
            ok("current", cu!(d, cuCtxSetCurrent(c)));
            ok("release", cu!(d, cuDevicePrimaryCtxRelease(0)));
            let mut p = 0;
            name(d, cu!(d, cuMemAlloc(&mut p, 4096)))
        })
        .join()
        .expect("the thread")
    })
}

fn set_destroyed(d: &'static Driver) -> String {
    context(d);
    let c = second_context();
    // SAFETY: cuCtxDestroy_v2's signature.
    let destroy: Destroy = unsafe { symbol("cuCtxDestroy_v2") };
    // SAFETY: a context this probe created and uses no more.
    ok("destroy", unsafe { destroy(c) });
    name(d, cu!(d, cuCtxSetCurrent(c)))
}

fn mem_info(d: &'static Driver) -> String {
    context(d);
    let (mut free, mut total) = (0usize, 0usize);
    let r = cu!(d, cuMemGetInfo(&mut free, &mut total));
    format!(
        "{}, {}",
        name(d, r),
        if free <= total && total > 0 {
            "free <= total"
        } else {
            "odd"
        }
    )
}
