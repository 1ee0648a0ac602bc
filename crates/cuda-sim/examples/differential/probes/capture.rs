//! Stream capture: what a capturing stream refuses, what invalidates a capture, and
//! that captured work runs at each launch, not when it is queued.

use std::ffi::c_void;

use super::{probe, Probe};
use crate::common::*;
use crate::cu;

const G: &str = "stream capture";

const RELAXED: u32 = 2;
const GLOBAL: u32 = 0;
const NON_BLOCKING: u32 = 1;

type Begin = unsafe extern "C" fn(CUstream, u32) -> u32;
type End = unsafe extern "C" fn(CUstream, *mut *mut c_void) -> u32;
type Instantiate = unsafe extern "C" fn(*mut *mut c_void, *mut c_void, u64) -> u32;
type Launch = unsafe extern "C" fn(*mut c_void, CUstream) -> u32;

pub const PROBES: &[Probe] = &[
    probe(
        G,
        "cuStreamBeginCapture_v2 on the legacy NULL stream",
        "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
        begin_on_null,
    ),
    probe(
        G,
        "cuStreamIsCapturing of a capturing stream",
        "CUDA_SUCCESS, status 1",
        is_capturing,
    ),
    probe(
        G,
        "cuStreamQuery of a capturing stream",
        "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
        query_capturing,
    ),
    probe(
        G,
        "cuStreamEndCapture after a cuStreamSynchronize during the capture",
        "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, no graph",
        end_after_sync,
    ),
    probe(
        G,
        "a captured cuMemsetD8Async: the memory before the launch, after one",
        "before: untouched, after: set",
        captured_runs_at_launch,
    ),
    probe(
        G,
        "cuStreamWaitEvent on a capturing stream, event recorded outside the capture",
        "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
        wait_outside_event,
    ),
    probe(
        G,
        "cuMemsetD8Async on NULL while a blocking stream captures",
        "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
        legacy_while_blocking_captures,
    ),
    probe(
        G,
        "cuMemAlloc while this thread captures in global mode",
        "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
        alloc_in_global_capture,
    ),
    probe(
        G,
        "cuEventQuery of an event recorded in a capture still going on",
        "CUDA_ERROR_CAPTURED_EVENT",
        query_captured_event,
    ),
];

/// The capture entry points, resolved from the driver under test.
struct Capture {
    begin: Begin,
    end: End,
    instantiate: Instantiate,
    launch: Launch,
}

fn capture_api() -> Capture {
    // SAFETY: each symbol's C signature, as cuda.h declares it.
    unsafe {
        Capture {
            begin: symbol("cuStreamBeginCapture_v2"),
            end: symbol("cuStreamEndCapture"),
            instantiate: symbol("cuGraphInstantiateWithFlags"),
            launch: symbol("cuGraphLaunch"),
        }
    }
}

/// Begins a capture on `s` in `mode`.
fn begin(c: &Capture, s: CUstream, mode: u32) -> u32 {
    // SAFETY: plain values.
    unsafe { (c.begin)(s, mode) }
}

/// Ends the capture on `s`: the code and the graph (null if none).
fn end(c: &Capture, s: CUstream) -> (u32, *mut c_void) {
    let mut g = std::ptr::null_mut();
    // SAFETY: a live out-pointer.
    let r = unsafe { (c.end)(s, &mut g) };
    (r, g)
}

fn begin_on_null(d: &'static Driver) -> String {
    context(d);
    name(d, begin(&capture_api(), std::ptr::null_mut(), RELAXED))
}

fn is_capturing(d: &'static Driver) -> String {
    context(d);
    let c = capture_api();
    let s = stream(d, NON_BLOCKING);
    ok("begin", begin(&c, s, RELAXED));
    let mut status = 9;
    let r = match d.cuStreamIsCapturing {
        // SAFETY: a live out-pointer.
        Some(f) => unsafe { f(s, &mut status) },
        None => return "the driver lacks cuStreamIsCapturing".into(),
    };
    end(&c, s);
    format!("{}, status {status}", name(d, r))
}

fn query_capturing(d: &'static Driver) -> String {
    context(d);
    let c = capture_api();
    let s = stream(d, NON_BLOCKING);
    ok("begin", begin(&c, s, RELAXED));
    let r = cu!(d, cuStreamQuery(s));
    end(&c, s);
    name(d, r)
}

fn end_after_sync(d: &'static Driver) -> String {
    context(d);
    let c = capture_api();
    let s = stream(d, NON_BLOCKING);
    ok("begin", begin(&c, s, RELAXED));
    cu!(d, cuStreamSynchronize(s));
    let (r, g) = end(&c, s);
    format!(
        "{}, {}",
        name(d, r),
        if g.is_null() { "no graph" } else { "a graph" }
    )
}

fn captured_runs_at_launch(d: &'static Driver) -> String {
    context(d);
    let c = capture_api();
    let s = stream(d, NON_BLOCKING);
    let p = alloc(d, 4096);
    ok("clear", cu!(d, cuMemsetD8(p, 0, 4096)));
    ok("begin", begin(&c, s, RELAXED));
    ok("memset", cu!(d, cuMemsetD8Async(p, 0x5A, 4096, s)));
    let (r, g) = end(&c, s);
    ok("end", r);
    let mut host = vec![1u8; 4096];
    ok(
        "before",
        cu!(d, cuMemcpyDtoH(host.as_mut_ptr().cast(), p, 4096)),
    );
    let before = if host.iter().all(|&b| b == 0) {
        "untouched"
    } else {
        "changed"
    };
    let mut exec = std::ptr::null_mut();
    // SAFETY: a live out-pointer and the graph just captured.
    ok("instantiate", unsafe { (c.instantiate)(&mut exec, g, 0) });
    // SAFETY: the instantiated graph and a live stream.
    ok("launch", unsafe { (c.launch)(exec, s) });
    ok("sync", cu!(d, cuStreamSynchronize(s)));
    ok(
        "after",
        cu!(d, cuMemcpyDtoH(host.as_mut_ptr().cast(), p, 4096)),
    );
    let after = if host.iter().all(|&b| b == 0x5A) {
        "set"
    } else {
        "not set"
    };
    format!("before: {before}, after: {after}")
}

fn wait_outside_event(d: &'static Driver) -> String {
    context(d);
    let c = capture_api();
    let (s, other) = (stream(d, NON_BLOCKING), stream(d, NON_BLOCKING));
    let e = event(d, 2);
    ok("record", cu!(d, cuEventRecord(e, other)));
    ok("begin", begin(&c, s, RELAXED));
    let r = cu!(d, cuStreamWaitEvent(s, e, 0));
    end(&c, s);
    name(d, r)
}

fn legacy_while_blocking_captures(d: &'static Driver) -> String {
    context(d);
    let c = capture_api();
    let s = stream(d, 0);
    let p = alloc(d, 4096);
    ok("begin", begin(&c, s, RELAXED));
    let r = cu!(d, cuMemsetD8Async(p, 1, 16, std::ptr::null_mut()));
    end(&c, s);
    name(d, r)
}

fn alloc_in_global_capture(d: &'static Driver) -> String {
    context(d);
    let c = capture_api();
    let s = stream(d, NON_BLOCKING);
    ok("begin", begin(&c, s, GLOBAL));
    let mut p = 0;
    let r = cu!(d, cuMemAlloc(&mut p, 4096));
    end(&c, s);
    name(d, r)
}

fn query_captured_event(d: &'static Driver) -> String {
    context(d);
    let c = capture_api();
    let s = stream(d, NON_BLOCKING);
    let e = event(d, 2);
    ok("begin", begin(&c, s, RELAXED));
    ok("record", cu!(d, cuEventRecord(e, s)));
    let r = cu!(d, cuEventQuery(e));
    end(&c, s);
    name(d, r)
}
