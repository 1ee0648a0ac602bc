//! Each of the simulator's detections, fired by a deliberately wrong program written
//! against `cuda-sys`: a page-locked source changed while its copy is queued, a
//! download read before it landed, memory freed while a copy still uses it (host and
//! device), a wait in the wrong context, a device pointer dereferenced on the host,
//! a sticky fault, and fresh device memory that reads as a marker, not zeros. The
//! programs that abort run in a child process of this test executable; the parent
//! checks how it ended and what the simulator said.

mod common;

use common::*;

/// `CU_STREAM_NON_BLOCKING`.
const NON_BLOCKING: u32 = 1;

#[test]
fn a_source_changed_while_its_copy_is_queued_aborts_naming_the_call_and_the_range() {
    const TEST: &str =
        "a_source_changed_while_its_copy_is_queued_aborts_naming_the_call_and_the_range";
    if is_child("changed source") {
        let d = sim();
        context(d);
        let s = stream(d, NON_BLOCKING);
        let busy = Busy::new(d);
        let dst = alloc(d, 4096);
        let src = pinned(d, 4096);
        src.copy_from_slice(&pattern(4096, 1));
        busy.queue(d, s, 2);
        ok(
            "upload",
            cu!(d, cuMemcpyHtoDAsync(dst, src.as_ptr().cast(), 4096, s)),
        );
        // Wrong: the copy has not run yet.
        src[100] ^= 0xFF;
        cu!(d, cuStreamSynchronize(s));
        panic!("the changed source was not detected");
    }
    let out = run_child(TEST, "changed source", &[]);
    let err = aborted_saying(
        &out,
        &[
            "RACE",
            "cuMemcpyHtoDAsync_v2",
            "page-locked source",
            "(4096 bytes)",
        ],
    );
    assert!(err.contains("stream 0x57"), "names the stream: {err}");
}

#[test]
fn a_download_read_before_it_lands_reads_poison() {
    let d = sim();
    context(d);
    let s = stream(d, NON_BLOCKING);
    let busy = Busy::new(d);
    let src = alloc(d, 4096);
    upload(d, src, &pattern(4096, 2));
    let host = pinned(d, 4096);
    host.fill(7);
    busy.queue(d, s, 2);
    ok(
        "download",
        cu!(d, cuMemcpyDtoHAsync(host.as_mut_ptr().cast(), src, 4096, s)),
    );
    // Wrong: read before the download executed.
    let early = host.to_vec();
    assert!(
        early.iter().all(|&b| b == 0xBD),
        "the destination is poisoned until the copy runs"
    );
    ok("sync", cu!(d, cuStreamSynchronize(s)));
    assert_eq!(host.to_vec(), pattern(4096, 2), "the copy lands in the end");
}

#[test]
fn freeing_page_locked_memory_a_queued_copy_writes_aborts() {
    const TEST: &str = "freeing_page_locked_memory_a_queued_copy_writes_aborts";
    if is_child("free host") {
        let d = sim();
        context(d);
        let s = stream(d, NON_BLOCKING);
        let busy = Busy::new(d);
        let src = alloc(d, 1 << 20);
        let host = pinned(d, 1 << 20);
        busy.queue(d, s, 2);
        ok(
            "download",
            cu!(
                d,
                cuMemcpyDtoHAsync(host.as_mut_ptr().cast(), src, 1 << 20, s)
            ),
        );
        // Wrong: the download still writes it.
        cu!(d, cuMemFreeHost(host.as_mut_ptr().cast()));
        panic!("the free was not detected");
    }
    let out = run_child(TEST, "free host", &[]);
    aborted_saying(
        &out,
        &[
            "USE AFTER FREE",
            "cuMemFreeHost",
            "cuMemcpyDtoHAsync_v2",
            "writes",
        ],
    );
}

#[test]
fn freeing_device_memory_a_queued_copy_reads_aborts() {
    const TEST: &str = "freeing_device_memory_a_queued_copy_reads_aborts";
    if is_child("free device") {
        let d = sim();
        context(d);
        let s = stream(d, NON_BLOCKING);
        let busy = Busy::new(d);
        let src = alloc(d, 1 << 20);
        let host = pinned(d, 1 << 20);
        busy.queue(d, s, 2);
        ok(
            "download",
            cu!(
                d,
                cuMemcpyDtoHAsync(host.as_mut_ptr().cast(), src, 1 << 20, s)
            ),
        );
        cu!(d, cuMemFree(src));
        panic!("the free was not detected");
    }
    let out = run_child(TEST, "free device", &[]);
    aborted_saying(
        &out,
        &[
            "USE AFTER FREE",
            "cuMemFree_v2",
            "device memory",
            "still uses",
        ],
    );
}

#[test]
fn a_copy_from_freed_device_memory_is_invalid_value() {
    let d = sim();
    context(d);
    let p = alloc(d, 4096);
    ok("free", cu!(d, cuMemFree(p)));
    let mut host = [0u8; 16];
    assert_eq!(
        cu!(d, cuMemcpyDtoH(host.as_mut_ptr().cast(), p, 16)),
        1,
        "CUDA_ERROR_INVALID_VALUE"
    );
    assert_eq!(cu!(d, cuMemFree(p)), 1, "a double free");
}

#[test]
fn fresh_device_memory_reads_as_a_marker_not_zeros() {
    let d = sim();
    context(d);
    // More than one 64 KiB chunk, so that every chunk starts with the marker.
    const BYTES: usize = 70_000;
    let p = alloc(d, BYTES);
    let mut host = vec![0u8; BYTES];
    ok(
        "read",
        cu!(d, cuMemcpyDtoH(host.as_mut_ptr().cast(), p, BYTES)),
    );
    let first_other = host.iter().position(|&b| b != 0xA5);
    assert_eq!(
        first_other, None,
        "every byte of a fresh allocation is 0xA5"
    );
    ok("free", cu!(d, cuMemFree(p)));
}

#[test]
fn waiting_on_the_null_stream_with_the_wrong_context_current_is_caught_by_the_poison() {
    let d = sim();
    let c0 = context(d);
    let busy = Busy::new(d);
    let src = alloc(d, 4096);
    upload(d, src, &pattern(4096, 3));
    let host = pinned(d, 4096);
    let legacy: CUstream = std::ptr::null_mut();
    busy.queue(d, legacy, 2);
    ok(
        "download",
        cu!(
            d,
            cuMemcpyDtoHAsync(host.as_mut_ptr().cast(), src, 4096, legacy)
        ),
    );
    // Wrong: another context is current, so NULL names *its* legacy stream.
    let mut other = std::ptr::null_mut();
    // SAFETY: cuCtxCreate_v2's signature.
    let create: CtxCreate = unsafe { symbol("cuCtxCreate_v2") };
    // SAFETY: a live out-pointer and plain values.
    ok("cuCtxCreate", unsafe { create(&mut other, 0, 0) });
    ok("sync other", cu!(d, cuStreamSynchronize(legacy)));
    assert!(
        host.iter().all(|&b| b == 0xBD),
        "the wait in the wrong context returned early"
    );
    ok("pop", cu!(d, cuCtxSetCurrent(c0)));
    ok("sync", cu!(d, cuStreamSynchronize(legacy)));
    assert_eq!(host.to_vec(), pattern(4096, 3));
    // And an event of one context recorded on a stream of another is refused.
    let e = event(d, 0);
    ok("current other", cu!(d, cuCtxSetCurrent(other)));
    let s_other = stream(d, NON_BLOCKING);
    assert_eq!(
        cu!(d, cuEventRecord(e, s_other)),
        400,
        "CUDA_ERROR_INVALID_HANDLE"
    );
    ok("current c0", cu!(d, cuCtxSetCurrent(c0)));
}

#[test]
fn a_device_pointer_dereferenced_on_the_host_crashes() {
    const TEST: &str = "a_device_pointer_dereferenced_on_the_host_crashes";
    if is_child("host deref") {
        let d = sim();
        context(d);
        let p = alloc(d, 4096) as *const u8;
        // SAFETY: none: this is the wrong program; the simulator maps nothing there,
        // so the read faults (SIGSEGV) instead of passing.
        let v = unsafe { std::ptr::read_volatile(p) };
        panic!("read {v} through a device pointer");
    }
    use std::os::unix::process::ExitStatusExt;
    let out = run_child(TEST, "host deref", &[]);
    assert_eq!(out.status.signal(), Some(11), "SIGSEGV: {}", out.status);
}

/// `cuSimInjectFault`, the simulator's extra entry point.
type InjectFault = unsafe extern "C" fn(u32, u64) -> u32;

#[test]
fn a_sticky_fault_fails_every_later_call_of_the_device() {
    const TEST: &str = "a_sticky_fault_fails_every_later_call_of_the_device";
    if is_child("sticky") {
        let d = sim();
        context(d);
        let s = stream(d, NON_BLOCKING);
        let p = alloc(d, 4096);
        // SAFETY: the simulator exports it with this signature.
        let inject: InjectFault = unsafe { symbol("cuSimInjectFault") };
        // SAFETY: a plain call with plain values.
        ok("inject", unsafe { inject(719, 2) });
        ok("the first call after", cu!(d, cuStreamQuery(s)));
        // The second call faults, and every later one of the device fails alike.
        let mut q = 0;
        assert_eq!(cu!(d, cuMemAlloc(&mut q, 16)), 719);
        assert_eq!(cu!(d, cuStreamSynchronize(s)), 719);
        assert_eq!(cu!(d, cuCtxSynchronize()), 719);
        assert_eq!(cu!(d, cuMemsetD8Async(p, 1, 16, s)), 719);
        let mut dev = 0;
        ok(
            "device queries still answer",
            cu!(d, cuDeviceGet(&mut dev, 0)),
        );
        return;
    }
    let out = run_child(TEST, "sticky", &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("injected fault 719"));
}

#[test]
fn the_environment_fault_comes_at_its_call_number() {
    const TEST: &str = "the_environment_fault_comes_at_its_call_number";
    if is_child("env fault") {
        let d = sim();
        ok("1: cuInit", cu!(d, cuInit(0)));
        let mut n = 0;
        ok("2: count", cu!(d, cuDeviceGetCount(&mut n)));
        let mut ctx = std::ptr::null_mut();
        ok("3: retain", cu!(d, cuDevicePrimaryCtxRetain(&mut ctx, 0)));
        ok("4: current", cu!(d, cuCtxSetCurrent(ctx)));
        let mut p = 0;
        assert_eq!(cu!(d, cuMemAlloc(&mut p, 16)), 700, "the fifth call");
        assert_eq!(cu!(d, cuCtxSynchronize()), 700);
        return;
    }
    let out = run_child(TEST, "env fault", &[("CUDA_SIM_FAULT", "700@5")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
