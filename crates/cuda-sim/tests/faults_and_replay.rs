//! The fault kernel the simulator knows (`fault_after`), and seeded delays that replay.

mod common;

use common::*;

/// `cuda-staging`'s fault kernel (tests/faults.rs): waits, then stores a u32.
const FAULT_PTX: &str = ".version 7.0\n.target sm_75\n.address_size 64\n\n.visible .entry fault_after(\n    .param .u64 fault_after_addr,\n    .param .u64 fault_after_delay_ns\n)\n{\n    ret;\n}\n\0";

/// Loads [`FAULT_PTX`] and queues `fault_after(addr, delay_ns)` on `s`.
fn launch(d: &'static Driver, s: CUstream, addr: u64, delay_ns: u64) {
    let mut m = std::ptr::null_mut();
    let r = cu!(
        d,
        cuModuleLoadDataEx(
            &mut m,
            FAULT_PTX.as_ptr().cast(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut()
        )
    );
    ok("load", r);
    let mut f = std::ptr::null_mut();
    ok(
        "function",
        cu!(d, cuModuleGetFunction(&mut f, m, c"fault_after".as_ptr())),
    );
    let (mut a, mut t) = (addr, delay_ns);
    let mut params: [*mut std::ffi::c_void; 2] =
        [(&mut a as *mut u64).cast(), (&mut t as *mut u64).cast()];
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
            params.as_mut_ptr(),
            std::ptr::null_mut()
        )
    );
    ok("launch", r);
}

#[test]
fn fault_after_stores_into_an_allocation() {
    let d = sim();
    context(d);
    let s = stream(d, 1);
    let p = alloc(d, 64);
    ok("clear", cu!(d, cuMemsetD8(p, 0, 64)));
    // The memset runs on the legacy stream, which `s` does not wait for.
    ok("sync", cu!(d, cuCtxSynchronize()));
    launch(d, s, p + 8, 1_000_000);
    ok("sync", cu!(d, cuStreamSynchronize(s)));
    let mut v = [0u32; 4];
    ok("read", cu!(d, cuMemcpyDtoH(v.as_mut_ptr().cast(), p, 16)));
    assert_eq!(v, [0, 0, 0x0BAD_F00D, 0]);
}

#[test]
fn fault_after_an_unmapped_address_poisons_the_device_for_every_later_call() {
    const TEST: &str = "fault_after_an_unmapped_address_poisons_the_device_for_every_later_call";
    if is_child("fault kernel") {
        let d = sim();
        context(d);
        let s = stream(d, 1);
        let src = alloc(d, 4096);
        let host = pinned(d, 4096);
        launch(d, s, 0x10, 20_000_000);
        // Queued behind the kernel before it faults: accepted.
        ok(
            "queued behind",
            cu!(d, cuMemcpyDtoHAsync(host.as_mut_ptr().cast(), src, 4096, s)),
        );
        assert_eq!(cu!(d, cuStreamSynchronize(s)), 700, "the fault comes back");
        let mut p = 0;
        assert_eq!(cu!(d, cuMemAlloc(&mut p, 16)), 700);
        assert_eq!(cu!(d, cuCtxSynchronize()), 700);
        assert_eq!(cu!(d, cuStreamQuery(s)), 700);
        let mut e = std::ptr::null_mut();
        assert_eq!(cu!(d, cuEventCreate(&mut e, 0)), 700);
        return;
    }
    let out = run_child(TEST, "fault kernel", &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("cuLaunchKernel") && err.contains("CUDA_ERROR_ILLEGAL_ADDRESS"),
        "{err}"
    );
}

#[test]
fn another_kernel_is_not_supported() {
    let d = sim();
    context(d);
    let ptx = ".version 7.0\n.target sm_75\n.address_size 64\n.visible .entry scale(.param .u64 p)\n{\n    ret;\n}\n\0";
    let mut m = std::ptr::null_mut();
    ok(
        "load",
        cu!(
            d,
            cuModuleLoadDataEx(
                &mut m,
                ptx.as_ptr().cast(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut()
            )
        ),
    );
    let mut f = std::ptr::null_mut();
    ok(
        "function",
        cu!(d, cuModuleGetFunction(&mut f, m, c"scale".as_ptr())),
    );
    let mut x = 0u64;
    let mut params: [*mut std::ffi::c_void; 1] = [(&mut x as *mut u64).cast()];
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
            std::ptr::null_mut(),
            params.as_mut_ptr(),
            std::ptr::null_mut()
        )
    );
    assert_eq!(r, 801, "CUDA_ERROR_NOT_SUPPORTED");
}

/// The delays a child's trace shows, one per operation, in order.
fn delays(seed: &str) -> Vec<String> {
    let out = run_child(
        "the_same_seed_replays_the_same_delays_and_another_seed_does_not",
        "replay",
        &[
            ("CUDA_SIM_SEED", seed),
            ("CUDA_SIM_JITTER_US", "300"),
            ("CUDA_SIM_TRACE", "1"),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| l.split(" after ").nth(1).map(str::to_owned))
        .collect()
}

#[test]
fn the_same_seed_replays_the_same_delays_and_another_seed_does_not() {
    if is_child("replay") {
        let d = sim();
        context(d);
        let s = stream(d, 1);
        let p = alloc(d, 4096);
        for i in 0..40 {
            ok("memset", cu!(d, cuMemsetD8Async(p, i as u8, 4096, s)));
        }
        ok("sync", cu!(d, cuStreamSynchronize(s)));
        return;
    }
    let (a, b, c) = (delays("7"), delays("7"), delays("8"));
    assert_eq!(a.len(), 40, "one line per operation: {a:?}");
    assert_eq!(a, b, "the same seed, the same delays");
    assert_ne!(a, c, "another seed, other delays");
}
