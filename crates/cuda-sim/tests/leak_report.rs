//! The leak report (`CUDA_SIM_LEAK_REPORT`, `cuSimLeakReport`): a program that makes
//! one object of every kind and destroys none is reported holding each of them at
//! exit; one that destroys everything is reported holding nothing. Each program runs
//! in a child process of this test executable, since the report is written at exit;
//! the parent reads what the child's exit wrote.

mod common;

use std::collections::BTreeMap;
use std::ffi::{c_char, c_void};
use std::path::PathBuf;

use common::*;

/// `cuMemAllocAsync`.
type AllocAsync = unsafe extern "C" fn(*mut CUdeviceptr, usize, CUstream) -> u32;
/// `cuMemFreeAsync`.
type FreeAsync = unsafe extern "C" fn(CUdeviceptr, CUstream) -> u32;
/// `cuCtxDestroy_v2`.
type CtxDestroy = unsafe extern "C" fn(CUcontext) -> u32;
/// `cuStreamBeginCapture_v2`.
type BeginCapture = unsafe extern "C" fn(CUstream, u32) -> u32;
/// `cuStreamEndCapture`.
type EndCapture = unsafe extern "C" fn(CUstream, *mut *mut c_void) -> u32;
/// `cuGraphInstantiateWithFlags`.
type Instantiate = unsafe extern "C" fn(*mut *mut c_void, *mut c_void, u64) -> u32;
/// `cuGraphDestroy`, `cuGraphExecDestroy`.
type GraphDestroy = unsafe extern "C" fn(*mut c_void) -> u32;
/// `cuSimLeakReport`.
type LeakReport = unsafe extern "C" fn(*mut c_char, usize) -> u32;

/// `CU_STREAM_CAPTURE_MODE_RELAXED`.
const CAPTURE_RELAXED: u32 = 2;

/// A module with one kernel (the simulator reads its `.entry` names).
const PTX: &str =
    ".version 7.0\n.target sm_75\n.address_size 64\n\n.visible .entry noop()\n{\n    ret;\n}\n\0";

/// One object of every kind the report counts.
struct Objects {
    created: CUcontext,
    stream: CUstream,
    capture_stream: CUstream,
    /// Made in `created`.
    created_stream: CUstream,
    event: CUevent,
    device: CUdeviceptr,
    /// Made in `created`.
    created_device: CUdeviceptr,
    stream_ordered: CUdeviceptr,
    host: *mut c_void,
    registered: &'static mut [u8],
    module: *mut c_void,
    graph: *mut c_void,
    exec: *mut c_void,
}

/// What [`make`] leaves live, by the report's names.
const MADE: &[(&str, u64)] = &[
    ("streams", 3),
    ("events", 1),
    ("contexts", 1),
    ("primary_contexts", 1),
    ("device_allocs", 2),
    ("stream_ordered_allocs", 1),
    ("host_allocs", 1),
    ("host_registrations", 1),
    ("modules", 1),
    ("graphs", 1),
    ("graph_execs", 1),
];

/// Makes [`Objects`] in device 0's primary context (a stream and an allocation in a
/// created context too), and one stream-ordered allocation whose free is queued,
/// which does not count.
fn make(d: &'static Driver) -> Objects {
    context(d);
    let s = stream(d, 0);
    let capture_stream = stream(d, 0);
    let event = event(d, 0);
    let device = alloc(d, 4096);
    // SAFETY: the simulator's signatures of these entry points.
    let (alloc_async, free_async): (AllocAsync, FreeAsync) =
        unsafe { (symbol("cuMemAllocAsync"), symbol("cuMemFreeAsync")) };
    let (mut stream_ordered, mut freed) = (0, 0);
    // SAFETY: live out-pointers and a live stream.
    let made = unsafe {
        (
            alloc_async(&mut stream_ordered, 4096, s),
            alloc_async(&mut freed, 4096, s),
        )
    };
    assert_eq!(made, (0, 0), "cuMemAllocAsync");
    // SAFETY: an allocation of this stream's, not used since.
    ok("cuMemFreeAsync", unsafe { free_async(freed, s) });
    let host = pinned(d, 4096).as_mut_ptr().cast();
    let registered: &'static mut [u8] = Box::leak(vec![0u8; 8192].into_boxed_slice());
    ok(
        "cuMemHostRegister",
        cu!(
            d,
            cuMemHostRegister(registered.as_mut_ptr().cast(), registered.len(), 0)
        ),
    );
    let mut module = std::ptr::null_mut();
    ok(
        "cuModuleLoadDataEx",
        cu!(
            d,
            cuModuleLoadDataEx(
                &mut module,
                PTX.as_ptr().cast(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut()
            )
        ),
    );
    let (graph, exec) = capture(d, capture_stream, device);
    // SAFETY: the simulator's signature of cuCtxCreate_v2.
    let create: CtxCreate = unsafe { symbol("cuCtxCreate_v2") };
    let mut created = std::ptr::null_mut();
    // SAFETY: a live out-pointer; the new context is pushed on this thread's stack.
    ok("cuCtxCreate", unsafe { create(&mut created, 0, 0) });
    let created_stream = stream(d, 0);
    let created_device = alloc(d, 4096);
    ok(
        "cuCtxPopCurrent",
        cu!(d, cuCtxPopCurrent(std::ptr::null_mut())),
    );
    Objects {
        created,
        stream: s,
        capture_stream,
        created_stream,
        event,
        device,
        created_device,
        stream_ordered,
        host,
        registered,
        module: module.cast(),
        graph,
        exec,
    }
}

/// A graph of one memset captured on `s`, and its instantiation.
fn capture(d: &'static Driver, s: CUstream, dst: CUdeviceptr) -> (*mut c_void, *mut c_void) {
    // SAFETY: the simulator's signatures of these entry points.
    let (begin, end, instantiate): (BeginCapture, EndCapture, Instantiate) = unsafe {
        (
            symbol("cuStreamBeginCapture_v2"),
            symbol("cuStreamEndCapture"),
            symbol("cuGraphInstantiateWithFlags"),
        )
    };
    // SAFETY: a live stream.
    ok("cuStreamBeginCapture", unsafe { begin(s, CAPTURE_RELAXED) });
    ok("cuMemsetD8Async", cu!(d, cuMemsetD8Async(dst, 1, 64, s)));
    let (mut graph, mut exec) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: the capturing stream and a live out-pointer.
    ok("cuStreamEndCapture", unsafe { end(s, &mut graph) });
    // SAFETY: a live out-pointer and the graph just made.
    ok("cuGraphInstantiate", unsafe {
        instantiate(&mut exec, graph, 0)
    });
    (graph, exec)
}

/// Destroys every one of `o`, the created context's stream and allocation by
/// destroying the context (which frees what it owns).
fn destroy(d: &'static Driver, o: Objects) {
    // SAFETY: the simulator's signatures of these entry points.
    let (graph_destroy, exec_destroy, free_async, ctx_destroy): (
        GraphDestroy,
        GraphDestroy,
        FreeAsync,
        CtxDestroy,
    ) = unsafe {
        (
            symbol("cuGraphDestroy"),
            symbol("cuGraphExecDestroy"),
            symbol("cuMemFreeAsync"),
            symbol("cuCtxDestroy_v2"),
        )
    };
    // SAFETY: live handles of this program, used by nothing queued.
    ok("cuGraphExecDestroy", unsafe { exec_destroy(o.exec) });
    // SAFETY: as above.
    ok("cuGraphDestroy", unsafe { graph_destroy(o.graph) });
    ok("cuModuleUnload", cu!(d, cuModuleUnload(o.module.cast())));
    ok("cuEventDestroy", cu!(d, cuEventDestroy(o.event)));
    // SAFETY: as above.
    ok("cuMemFreeAsync", unsafe {
        free_async(o.stream_ordered, o.stream)
    });
    ok("cuCtxSynchronize", cu!(d, cuCtxSynchronize()));
    ok("cuMemFree", cu!(d, cuMemFree(o.device)));
    ok("cuMemFreeHost", cu!(d, cuMemFreeHost(o.host)));
    ok(
        "cuMemHostUnregister",
        cu!(d, cuMemHostUnregister(o.registered.as_mut_ptr().cast())),
    );
    ok("cuStreamDestroy", cu!(d, cuStreamDestroy(o.stream)));
    ok("cuStreamDestroy", cu!(d, cuStreamDestroy(o.capture_stream)));
    // Freed by the context's destruction, not one by one.
    let _ = (o.created_stream, o.created_device);
    // SAFETY: the context this program created, current on no thread.
    ok("cuCtxDestroy", unsafe { ctx_destroy(o.created) });
    ok(
        "cuDevicePrimaryCtxRelease",
        cu!(d, cuDevicePrimaryCtxRelease(0)),
    );
}

/// The simulator's report line now (`cuSimLeakReport`).
fn report_now() -> String {
    // SAFETY: the simulator's signature of its own entry point.
    let report: LeakReport = unsafe { symbol("cuSimLeakReport") };
    let mut buf = vec![0u8; 4096];
    // SAFETY: a writable buffer of its length.
    ok("cuSimLeakReport", unsafe {
        report(buf.as_mut_ptr().cast(), buf.len())
    });
    let end = buf.iter().position(|&b| b == 0).expect("NUL-terminated");
    String::from_utf8(buf[..end].to_vec()).expect("UTF-8")
}

/// The counts of a report line, by name (`pid` and `exe` left out).
fn counts(line: &str) -> BTreeMap<String, u64> {
    let rest = line
        .strip_prefix("cuda-sim leak report: ")
        .unwrap_or_else(|| panic!("not a report line: {line:?}"));
    let (fields, _exe) = rest.split_once(" exe=").expect("exe= last");
    fields
        .split(' ')
        .filter_map(|f| f.split_once('='))
        .filter(|(k, _)| *k != "pid")
        .map(|(k, v)| (k.to_owned(), v.parse().expect("a count")))
        .collect()
}

/// `MADE`'s names with every count `n` (0: nothing live).
fn expected(made: bool) -> BTreeMap<String, u64> {
    MADE.iter()
        .map(|(k, n)| ((*k).to_owned(), if made { *n } else { 0 }))
        .collect()
}

/// A fresh path for a child's report file.
fn report_file(what: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "cuda-sim-leak-report-{}-{what}.txt",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn a_program_that_destroys_nothing_is_reported_holding_each_object_at_exit() {
    const TEST: &str = "a_program_that_destroys_nothing_is_reported_holding_each_object_at_exit";
    if is_child("leaky") {
        let d = sim();
        // Made, and never destroyed.
        let _leaked = make(d);
        assert_eq!(counts(&report_now()), expected(true), "on demand");
        return;
    }
    let path = report_file("leaky");
    let out = run_child(
        TEST,
        "leaky",
        &[("CUDA_SIM_LEAK_REPORT", path.to_str().expect("UTF-8"))],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the child failed:\n{err}");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no report at {}: {e}\n{err}", path.display()));
    let _ = std::fs::remove_file(&path);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "one line for the one process: {text}");
    assert_eq!(counts(lines[0]), expected(true), "{text}");
    let exe = std::env::current_exe().expect("current_exe");
    assert!(
        lines[0].ends_with(&format!(" exe={}", exe.display())),
        "names the program: {text}"
    );
}

#[test]
fn a_program_that_destroys_everything_is_reported_holding_nothing() {
    const TEST: &str = "a_program_that_destroys_everything_is_reported_holding_nothing";
    if is_child("tidy") {
        let d = sim();
        let o = make(d);
        assert_eq!(counts(&report_now()), expected(true), "before");
        destroy(d, o);
        assert_eq!(counts(&report_now()), expected(false), "after");
        return;
    }
    let out = run_child(TEST, "tidy", &[("CUDA_SIM_LEAK_REPORT", "stderr")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the child failed:\n{err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("cuda-sim leak report: "))
        .collect();
    assert_eq!(lines.len(), 1, "one line on stderr:\n{err}");
    assert_eq!(counts(lines[0]), expected(false), "{err}");
}

#[test]
fn with_a_leak_exit_status_a_leaky_program_ends_with_it_and_a_tidy_one_with_its_own() {
    const TEST: &str =
        "with_a_leak_exit_status_a_leaky_program_ends_with_it_and_a_tidy_one_with_its_own";
    if is_child("leaky") {
        let _leaked = make(sim());
        return;
    }
    if is_child("tidy") {
        let d = sim();
        let o = make(d);
        destroy(d, o);
        return;
    }
    let env = [
        ("CUDA_SIM_LEAK_REPORT", "stderr"),
        ("CUDA_SIM_LEAK_EXIT_STATUS", "86"),
    ];
    let leaky = run_child(TEST, "leaky", &env);
    let err = String::from_utf8_lossy(&leaky.stderr);
    assert_eq!(leaky.status.code(), Some(86), "the leak's status:\n{err}");
    assert!(
        err.contains("cuda-sim leak report: "),
        "the line first:\n{err}"
    );
    let tidy = run_child(TEST, "tidy", &env);
    let err = String::from_utf8_lossy(&tidy.stderr);
    assert!(tidy.status.success(), "nothing leaked:\n{err}");
}

#[test]
fn the_report_on_demand_refuses_a_buffer_too_short() {
    let _ = sim();
    // SAFETY: the simulator's signature of its own entry point.
    let report: LeakReport = unsafe { symbol("cuSimLeakReport") };
    let mut buf = [0x55u8; 16];
    // SAFETY: a writable buffer of its length, and null.
    let (short, null) = unsafe {
        (
            report(buf.as_mut_ptr().cast(), buf.len()),
            report(std::ptr::null_mut(), 4096),
        )
    };
    assert_eq!((short, null), (1, 1), "CUDA_ERROR_INVALID_VALUE");
    assert_eq!(buf, [0x55; 16], "nothing written");
}
