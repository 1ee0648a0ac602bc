//! A stream operation on no elements makes no driver call: with a fault armed for
//! the driver's next call (the simulated driver's own `cuSimInjectFault`), every
//! empty copy and memset still returns `Ok`, and the fault fires only at the next
//! real call.
//!
//! A real driver has no fault to arm, so this target runs on the simulator only:
//! `cargo xtask test-gpu --sim` (and `cargo xtask mutants`) run it, and runs on a GPU
//! machine leave it out, by the `simulator_only` in its name. It ends with the
//! device faulted for good, so it is a target of its own, with one test.

mod common;

use common::*;
use cuda_core::sys::CUDA_ERROR_ILLEGAL_ADDRESS;
use cuda_core::{DeviceBuffer, PinnedBuffer, Stream};

/// `cuSimInjectFault`: the `after`-th driver call from now fails with `code`,
/// stickily.
type InjectFault = unsafe extern "C" fn(u32, u64) -> u32;

/// Arms the fault for the `after`-th driver call from now (`u64::MAX`: never).
fn arm(after: u64) {
    // SAFETY: the simulator's signature of its own entry point.
    let inject: InjectFault = unsafe { simulator_entry("cuSimInjectFault") };
    // SAFETY: plain numbers.
    let rc = unsafe { inject(CUDA_ERROR_ILLEGAL_ADDRESS, after) };
    assert_eq!(rc, 0, "cuSimInjectFault failed");
}

#[test]
#[ignore = "needs the simulated driver (its fault injection): run with cargo xtask test-gpu --sim"]
fn operations_on_no_elements_make_no_driver_call() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut device = DeviceBuffer::<u32>::alloc_in(&ctx, 64).expect("DeviceBuffer");
    let mut other = DeviceBuffer::<u32>::alloc_in(&ctx, 64).expect("DeviceBuffer");
    let mut pinned = PinnedBuffer::<u32>::alloc_in(&ctx, 64).expect("PinnedBuffer");
    let mut host: Vec<u32> = Vec::new();

    arm(1);
    let results = [
        (
            "memset_u32",
            stream.memset_u32(&mut device.slice_mut(5..5).expect("view"), 7),
        ),
        (
            "memset_bytes",
            stream.memset_bytes(&mut device.slice_mut(5..5).expect("view"), 7),
        ),
        (
            "memset_zeros",
            stream.memset_zeros(&mut device.slice_mut(64..).expect("view")),
        ),
        (
            "memcpy_htod",
            stream.memcpy_htod(&pinned.slice(3..3).expect("view"), &mut device),
        ),
        (
            "memcpy_dtoh",
            stream.memcpy_dtoh(&device.slice(3..3).expect("view"), &mut pinned),
        ),
        (
            "memcpy_dtod",
            stream.memcpy_dtod(&device.slice(0..0).expect("view"), &mut other),
        ),
        (
            "memcpy_htod_sync",
            stream.memcpy_htod_sync(&host, &mut device),
        ),
        (
            "memcpy_dtoh_sync",
            stream.memcpy_dtoh_sync(&device.slice(9..9).expect("view"), &mut host),
        ),
    ];
    // Disarmed before anything else may call the driver.
    arm(u64::MAX);
    for (op, r) in results {
        assert_eq!(r, Ok(()), "{op} of no elements called the driver");
    }

    // The fault was real: armed again, the next call gets it.
    arm(1);
    match stream.memset_u32(&mut device, 7) {
        Err(e) => assert!(e.is_sticky(), "the injected fault is sticky: {e:?}"),
        Ok(()) => panic!("the fault armed for the next call did not fire"),
    }
    // The device is faulted for good; the drops' errors go to the deferred record.
    drop((stream, device, other, pinned));
}
