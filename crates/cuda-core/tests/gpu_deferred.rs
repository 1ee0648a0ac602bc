//! GPU tests of errors that `Drop` cannot return: they are recorded in a
//! process-wide store, read with `check_deferred_errors()` / `deferred_error_count()`.
//!
//! Its own test binary, so that no other test in the process records (or drains)
//! an error while these run; and the tests here take one lock, so that they do not
//! see each other's either. Some make a drop or a free fail on purpose.
//!
//! Every test needs a CUDA GPU and is `#[ignore]`d; run them with
//! `cargo xtask test-gpu` (or `cargo test -p cuda-core --test gpu_deferred --
//! --ignored`). Note for `--sanitize`: compute-sanitizer reports the deliberately
//! failing `cuMemHostUnregister` and `cuMemFree` calls.

mod common;

use std::error::Error as _;
use std::sync::{Mutex, MutexGuard};

use common::*;
use cuda_core::{
    check_deferred_errors, deferred_error_count, query_host_memory, DeviceBuffer, Error,
    HostMemory, HostRegistration, PinnedBuffer, Stream,
};

/// `CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED`.
const HOST_MEMORY_NOT_REGISTERED: u32 = cuda_core::sys::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;

/// `CUDA_ERROR_INVALID_VALUE`: `cuMemFree` of an address that is not allocated.
const INVALID_VALUE: u32 = cuda_core::sys::CUDA_ERROR_INVALID_VALUE;

/// Held by each test here: they read and drain the process-wide store.
fn exclusive() -> MutexGuard<'static, ()> {
    static STORE: Mutex<()> = Mutex::new(());
    STORE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Drains the store (whatever an earlier test or run left) and returns the count.
fn drained() -> u64 {
    let _ = check_deferred_errors();
    assert_eq!(check_deferred_errors(), Ok(()), "the store drains");
    deferred_error_count()
}

/// Unregisters `reg`'s memory behind its back, so that its own unregister fails.
fn unregister_behind_its_back(reg: &HostRegistration<'_, u32>) {
    // SAFETY: raw interop, on purpose: 1. `reg.as_ptr()` is the start of the range
    // `HostRegistration::new` registered with `cuMemHostRegister`, still registered.
    // Afterwards the memory is ordinary pageable memory, still owned by the caller
    // and borrowed by `reg`; no copy is queued on it, and `reg` hands it only to its
    // own `cuMemHostUnregister`, which then fails cleanly.
    unsafe { cuda_core::result::mem_host_unregister(reg.as_ptr().cast_mut().cast()) }
        .expect("raw cuMemHostUnregister of a registered range");
    assert_eq!(
        query_host_memory(reg.context(), reg.as_ptr().cast()),
        HostMemory::Other,
        "the raw call unregistered the memory"
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_failed_unregister_in_drop_is_recorded_and_reported_once() {
    let _one = exclusive();
    let ctx = gpu();
    let before = drained();
    let mut v: Vec<u32> = pattern(300_001, seed("deferred", 0));
    let expected = v.clone();

    let reg = HostRegistration::new(&ctx, &mut v[..]).expect("register");
    unregister_behind_its_back(&reg);
    assert_eq!(deferred_error_count(), before, "nothing failed yet");
    drop(reg); // its cuMemHostUnregister fails: recorded, not panicking, not lost
    assert_eq!(deferred_error_count(), before + 1);

    let e = check_deferred_errors().expect_err("the failed unregister is reported");
    let Error::Deferred {
        what,
        more,
        ref source,
    } = e
    else {
        panic!("expected Error::Deferred, got {e:?}");
    };
    assert_eq!(
        source.driver_code(),
        Some(HOST_MEMORY_NOT_REGISTERED),
        "{source:?}"
    );
    assert!(what.contains("HostRegistration"), "{what}");
    assert_eq!(more, 0);
    // The message shows the driver error (code, name, description) ...
    assert_eq!(
        e.to_string(),
        format!(
            "{what} failed earlier, where the error could not be returned: {source} (0 more since)"
        )
    );
    assert!(
        e.to_string()
            .contains(": CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED (713)"),
        "{e}"
    );
    // ... which is also the source, for reporters that walk the chain.
    let inner = e.source().expect("a source");
    assert!(
        inner
            .to_string()
            .starts_with("CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED (713)"),
        "{inner}"
    );

    // Reported once; the count only grows.
    assert_eq!(check_deferred_errors(), Ok(()));
    assert_eq!(deferred_error_count(), before + 1);
    // The caller's memory is untouched and can be registered again.
    assert_same("the Vec after the failed drop", &expected, &v);
    let reg = HostRegistration::new(&ctx, &mut v[..]).expect("register again");
    reg.unregister().expect("a proper unregister");
    assert_eq!(check_deferred_errors(), Ok(()));
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn two_failed_drops_report_the_first_and_count_the_second() {
    let _one = exclusive();
    let ctx = gpu();
    let before = drained();
    // Two registrations with 256 KiB between them (registrations cover whole pages,
    // so adjacent ones could share one).
    let mut v: Vec<u32> = pattern(3 * 65_536, seed("deferred", 1));
    let (lo, rest) = v.split_at_mut(65_536);
    let hi = &mut rest[65_536..];
    let (a, b) = (
        HostRegistration::new(&ctx, lo).expect("register"),
        HostRegistration::new(&ctx, hi).expect("register"),
    );
    unregister_behind_its_back(&a);
    unregister_behind_its_back(&b);
    drop(a);
    drop(b);
    assert_eq!(deferred_error_count(), before + 2);
    match check_deferred_errors() {
        Err(Error::Deferred { more, source, .. }) => {
            assert_eq!(more, 1, "one more after the first");
            assert_eq!(source.driver_code(), Some(HOST_MEMORY_NOT_REGISTERED));
        }
        other => panic!("expected Error::Deferred, got {other:?}"),
    }
    assert_eq!(check_deferred_errors(), Ok(()));
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn explicit_unregister_returns_the_error_instead_of_recording_it() {
    let _one = exclusive();
    let ctx = gpu();
    let before = drained();
    let mut v: Vec<u32> = pattern(4096, seed("deferred", 2));
    let reg = HostRegistration::new(&ctx, &mut v[..]).expect("register");
    unregister_behind_its_back(&reg);
    let e = reg
        .unregister()
        .expect_err("unregister of unregistered memory");
    assert_eq!(e.driver_code(), Some(HOST_MEMORY_NOT_REGISTERED), "{e:?}");
    assert_eq!(deferred_error_count(), before, "returned, so not recorded");
    assert_eq!(check_deferred_errors(), Ok(()));
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn explicit_free_returns_the_error_instead_of_recording_it() {
    let _one = exclusive();
    let _ctx = gpu();
    let before = drained();
    let d = DeviceBuffer::<u32>::alloc(4096).expect("alloc");
    // SAFETY: raw interop, on purpose: `d.as_device_ptr()` is the start of the
    // allocation `DeviceBuffer::alloc` made with `cuMemAlloc`, still allocated, in the
    // context current here, and nothing is queued on it. `mem_free`'s condition 1
    // (the pointer is not used afterwards) is broken on purpose, once: `d` hands the
    // address to its own `cuMemFree`, which must fail cleanly. That holds while no
    // allocation takes the address in between: `d.free()` is the next call, and
    // every test of this binary holds `exclusive` while it allocates. `d`'s drop
    // frees nothing more: `release` clears its pointer before its `cuMemFree`.
    unsafe { cuda_core::result::mem_free(d.as_device_ptr()) }.expect("raw cuMemFree");
    let e = d.free().expect_err("free of memory freed behind its back");
    assert_eq!(e.driver_code(), Some(INVALID_VALUE), "{e:?}");
    assert_eq!(deferred_error_count(), before, "returned, so not recorded");
    assert_eq!(check_deferred_errors(), Ok(()));
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn dropping_a_device_buffer_right_after_queueing_a_copy_records_no_error() {
    let _one = exclusive();
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let before = drained();
    let len = 64 * MIB;
    let mut host = PinnedBuffer::<u8>::alloc(len).expect("pinned");
    fill(&mut host, seed("drop device", 0));

    // Copies into a buffer dropped at once: the drop waits for them, then frees.
    for round in 0..3 {
        let mut d = DeviceBuffer::<u8>::alloc(len).expect("alloc");
        stream.memcpy_htod(&host, &mut d).expect("memcpy_htod");
        stream
            .memset_bytes(&mut d.slice_mut(len / 2..).expect("slice_mut"), 0x77)
            .expect("memset_bytes");
        drop(d);
        assert!(
            stream.query().expect("query"),
            "round {round}: the copy was still running after the drop"
        );
    }

    // A download from a buffer dropped at once still lands whole.
    let data: Vec<u8> = pattern(len, seed("drop device", 1));
    let d = device_with(&data);
    fill(&mut host, seed("drop device", 2));
    stream.memcpy_dtoh(&d, &mut host).expect("memcpy_dtoh");
    drop(d);
    assert_same("download from a buffer dropped at once", &data, &host);

    // `free` right after queueing waits too, and reports the driver's answer.
    let mut d = DeviceBuffer::<u8>::alloc(len).expect("alloc");
    stream.memcpy_htod(&host, &mut d).expect("memcpy_htod");
    assert_eq!(d.free(), Ok(()));

    assert_eq!(deferred_error_count(), before, "a drop recorded an error");
    assert_eq!(check_deferred_errors(), Ok(()));
}
