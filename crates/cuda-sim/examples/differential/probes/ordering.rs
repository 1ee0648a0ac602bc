//! Queries before and after completion, the legacy stream's implicit
//! synchronisation, and the host-side synchronisation of pageable and synchronous
//! copies. Work is kept pending by [`Busy`]: 40 round trips of 256 MiB, about 10 ms
//! on an H200 and 200 ms on the simulator.

use super::{probe, Probe};
use crate::common::*;
use crate::cu;

const G: &str = "queries and synchronisation";

/// Round trips of [`Busy::queue`] that keep a stream pending while the host looks.
const ROUNDS: usize = 40;
const NON_BLOCKING: u32 = 1;

pub const PROBES: &[Probe] = &[
    probe(
        G,
        "cuStreamQuery with work queued",
        "CUDA_ERROR_NOT_READY",
        query_busy,
    ),
    probe(
        G,
        "cuStreamQuery after cuStreamSynchronize",
        "CUDA_SUCCESS",
        query_after_sync,
    ),
    probe(
        G,
        "cuEventQuery of a record behind queued work",
        "CUDA_ERROR_NOT_READY",
        event_pending,
    ),
    probe(
        G,
        "cuEventQuery of an event never recorded",
        "CUDA_SUCCESS",
        event_unrecorded,
    ),
    probe(
        G,
        "cuEventElapsedTime while the end record is pending",
        "CUDA_ERROR_NOT_READY",
        elapsed_pending,
    ),
    probe(
        G,
        "cuEventSynchronize, then cuEventQuery",
        "CUDA_SUCCESS",
        event_after_sync,
    ),
    probe(
        G,
        "cuStreamQuery(NULL) while a non-blocking stream is busy",
        "CUDA_SUCCESS",
        null_ignores_non_blocking,
    ),
    probe(
        G,
        "cuStreamQuery(NULL) after a memset on NULL behind a busy blocking stream",
        "CUDA_ERROR_NOT_READY",
        null_waits_for_blocking,
    ),
    probe(
        G,
        "cuStreamQuery(blocking stream) after a memset on it behind a busy NULL stream",
        "CUDA_ERROR_NOT_READY",
        blocking_waits_for_null,
    ),
    probe(
        G,
        "cuStreamSynchronize(non-blocking stream) with NULL busy: is NULL still busy?",
        "CUDA_ERROR_NOT_READY",
        non_blocking_ignores_null,
    ),
    probe(
        G,
        "cuMemcpyHtoDAsync from pageable memory changed right after the call: what lands",
        "the bytes at the call",
        pageable_htod_stages,
    ),
    probe(
        G,
        "cuMemcpyDtoHAsync into pageable memory behind queued work: landed at return?",
        "landed",
        pageable_dtoh_lands,
    ),
    probe(
        G,
        "cuMemcpyHtoD (pinned source) behind work on NULL: cuStreamQuery(NULL) after",
        "CUDA_SUCCESS",
        pinned_htod_sync_waits,
    ),
    probe(
        G,
        "cuMemcpyDtoD behind work on NULL: cuStreamQuery(NULL) after",
        "CUDA_ERROR_NOT_READY",
        dtod_sync_returns,
    ),
    probe(
        G,
        "cuMemsetD8 behind work on NULL: cuStreamQuery(NULL) after",
        "CUDA_ERROR_NOT_READY",
        memset_sync_returns,
    ),
    probe(
        G,
        "cuStreamQuery(CU_STREAM_PER_THREAD) on a thread whose own is idle, another's busy",
        "CUDA_SUCCESS",
        per_thread_is_per_thread,
    ),
];

fn query_busy(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, NON_BLOCKING);
    let busy = Busy::new(d);
    busy.queue(d, s, ROUNDS);
    let r = cu!(d, cuStreamQuery(s));
    ok("sync", cu!(d, cuStreamSynchronize(s)));
    name(d, r)
}

fn query_after_sync(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, NON_BLOCKING);
    let busy = Busy::new(d);
    busy.queue(d, s, 2);
    ok("sync", cu!(d, cuStreamSynchronize(s)));
    name(d, cu!(d, cuStreamQuery(s)))
}

fn event_pending(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, NON_BLOCKING);
    let e = event(d, 0);
    let busy = Busy::new(d);
    busy.queue(d, s, ROUNDS);
    ok("record", cu!(d, cuEventRecord(e, s)));
    let r = cu!(d, cuEventQuery(e));
    ok("sync", cu!(d, cuStreamSynchronize(s)));
    name(d, r)
}

fn event_unrecorded(d: &'static Driver) -> String {
    context(d);
    name(d, cu!(d, cuEventQuery(event(d, 0))))
}

fn elapsed_pending(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, NON_BLOCKING);
    let (a, b) = (event(d, 0), event(d, 0));
    ok("record", cu!(d, cuEventRecord(a, s)));
    let busy = Busy::new(d);
    busy.queue(d, s, ROUNDS);
    ok("record", cu!(d, cuEventRecord(b, s)));
    let mut ms = 0f32;
    let r = cu!(d, cuEventElapsedTime(&mut ms, a, b));
    ok("sync", cu!(d, cuStreamSynchronize(s)));
    name(d, r)
}

fn event_after_sync(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, NON_BLOCKING);
    let e = event(d, 1);
    let busy = Busy::new(d);
    busy.queue(d, s, 4);
    ok("record", cu!(d, cuEventRecord(e, s)));
    ok("event sync", cu!(d, cuEventSynchronize(e)));
    name(d, cu!(d, cuEventQuery(e)))
}

fn null_ignores_non_blocking(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, NON_BLOCKING);
    let busy = Busy::new(d);
    busy.queue(d, s, ROUNDS);
    let r = cu!(d, cuStreamQuery(std::ptr::null_mut()));
    ok("sync", cu!(d, cuStreamSynchronize(s)));
    name(d, r)
}

fn null_waits_for_blocking(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, 0);
    let p = alloc(d, 4096);
    let busy = Busy::new(d);
    busy.queue(d, s, ROUNDS);
    ok(
        "memset",
        cu!(d, cuMemsetD8Async(p, 1, 16, std::ptr::null_mut())),
    );
    let r = cu!(d, cuStreamQuery(std::ptr::null_mut()));
    ok("sync", cu!(d, cuCtxSynchronize()));
    name(d, r)
}

fn blocking_waits_for_null(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, 0);
    let p = alloc(d, 4096);
    let busy = Busy::new(d);
    busy.queue(d, std::ptr::null_mut(), ROUNDS);
    ok("memset", cu!(d, cuMemsetD8Async(p, 1, 16, s)));
    let r = cu!(d, cuStreamQuery(s));
    ok("sync", cu!(d, cuCtxSynchronize()));
    name(d, r)
}

fn non_blocking_ignores_null(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, NON_BLOCKING);
    let p = alloc(d, 4096);
    let busy = Busy::new(d);
    busy.queue(d, std::ptr::null_mut(), ROUNDS);
    ok("memset", cu!(d, cuMemsetD8Async(p, 1, 16, s)));
    ok("sync s", cu!(d, cuStreamSynchronize(s)));
    let r = cu!(d, cuStreamQuery(std::ptr::null_mut()));
    ok("sync", cu!(d, cuCtxSynchronize()));
    name(d, r)
}

fn pageable_htod_stages(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, NON_BLOCKING);
    let n = 1 << 20;
    let p = alloc(d, n);
    let busy = Busy::new(d);
    busy.queue(d, s, ROUNDS);
    let mut v = pattern(n, 5);
    ok(
        "upload",
        cu!(d, cuMemcpyHtoDAsync(p, v.as_ptr().cast(), n, s)),
    );
    v.copy_from_slice(&pattern(n, 6));
    ok("sync", cu!(d, cuStreamSynchronize(s)));
    let mut back = vec![0u8; n];
    ok(
        "read back",
        cu!(d, cuMemcpyDtoH(back.as_mut_ptr().cast(), p, n)),
    );
    if back == pattern(n, 5) {
        "the bytes at the call".into()
    } else if back == pattern(n, 6) {
        "the bytes changed after the call".into()
    } else {
        "a mix".into()
    }
}

fn pageable_dtoh_lands(d: &'static Driver) -> String {
    context(d);
    let s = stream(d, NON_BLOCKING);
    let n = 1 << 20;
    let p = alloc(d, n);
    upload(d, p, &pattern(n, 7));
    let busy = Busy::new(d);
    busy.queue(d, s, ROUNDS);
    let mut v = vec![0u8; n];
    ok(
        "download",
        cu!(d, cuMemcpyDtoHAsync(v.as_mut_ptr().cast(), p, n, s)),
    );
    let landed = v == pattern(n, 7);
    ok("sync", cu!(d, cuStreamSynchronize(s)));
    if landed { "landed" } else { "not yet" }.into()
}

fn pinned_htod_sync_waits(d: &'static Driver) -> String {
    context(d);
    let n = 1 << 20;
    let p = alloc(d, n);
    let h = pinned(d, n);
    let busy = Busy::new(d);
    busy.queue(d, std::ptr::null_mut(), ROUNDS);
    ok("upload", cu!(d, cuMemcpyHtoD(p, h.as_ptr().cast(), n)));
    name(d, cu!(d, cuStreamQuery(std::ptr::null_mut())))
}

fn dtod_sync_returns(d: &'static Driver) -> String {
    context(d);
    let (a, b) = (alloc(d, 1 << 20), alloc(d, 1 << 20));
    let busy = Busy::new(d);
    busy.queue(d, std::ptr::null_mut(), ROUNDS);
    // SAFETY: cuMemcpyDtoD_v2's signature.
    let copy: unsafe extern "C" fn(u64, u64, usize) -> u32 = unsafe { symbol("cuMemcpyDtoD_v2") };
    // SAFETY: two live allocations of 1 MiB.
    ok("copy", unsafe { copy(a, b, 1 << 20) });
    let r = cu!(d, cuStreamQuery(std::ptr::null_mut()));
    ok("sync", cu!(d, cuCtxSynchronize()));
    name(d, r)
}

fn memset_sync_returns(d: &'static Driver) -> String {
    context(d);
    let a = alloc(d, 1 << 20);
    let busy = Busy::new(d);
    busy.queue(d, std::ptr::null_mut(), ROUNDS);
    ok("memset", cu!(d, cuMemsetD8(a, 3, 1 << 20)));
    let r = cu!(d, cuStreamQuery(std::ptr::null_mut()));
    ok("sync", cu!(d, cuCtxSynchronize()));
    name(d, r)
}

fn per_thread_is_per_thread(d: &'static Driver) -> String {
    let ctx = context(d) as usize;
    let busy = Busy::new(d);
    busy.queue(d, cuda_sys::CU_STREAM_PER_THREAD, ROUNDS);
    let r = std::thread::scope(|t| {
        t.spawn(|| {
            ok("current", cu!(d, cuCtxSetCurrent(ctx as CUcontext)));
            cu!(d, cuStreamQuery(cuda_sys::CU_STREAM_PER_THREAD))
        })
        .join()
        .expect("the thread")
    });
    ok("sync", cu!(d, cuCtxSynchronize()));
    name(d, r)
}
