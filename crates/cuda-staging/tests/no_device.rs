//! Fault test: a CUDA driver that is installed but sees no device gives clear errors
//! (and `Ok(0)` devices), never a panic.
//!
//! The test hides every device from a child process of this same test executable
//! (`CUDA_VISIBLE_DEVICES=""`: the driver reads it once, at `cuInit`, so it must be
//! set before the process starts) and runs the checks there. Both tests here spawn
//! that child, so both are real when `--include-ignored` runs them directly; inside
//! the child (marked by `CUDA_STAGING_NO_DEVICE_CHILD=1`) `inner_no_visible_device`
//! runs the checks instead.
//!
//! Its own test binary, so the child runs nothing else. It needs a CUDA driver (not
//! a GPU); run with `cargo xtask test-gpu` (or `cargo test -p cuda-staging --test
//! no_device -- --ignored` on a machine with the driver). It works from a bundle too:
//! the child is `std::env::current_exe()`, wherever the executable was copied.

use std::process::Command;

use cuda_core::sys::CUDA_ERROR_NO_DEVICE;
use cuda_staging::{Context, DeviceBuffer, Error, PinnedBuffer, StagingBuffer};

/// Set (to "1") in the child's environment only.
const CHILD_MARKER: &str = "CUDA_STAGING_NO_DEVICE_CHILD";
/// The test the child runs.
const INNER_TEST: &str = "inner_no_visible_device";

/// Runs [`INNER_TEST`] in a child process of this executable with every device
/// hidden and asserts that it passed.
fn run_child_without_devices(from: &str) {
    let exe = std::env::current_exe().expect("current_exe: the path of this test executable");
    let out = Command::new(&exe)
        .args(["--exact", INNER_TEST, "--include-ignored", "--nocapture"])
        .env("CUDA_VISIBLE_DEVICES", "")
        .env(CHILD_MARKER, "1")
        .output()
        .unwrap_or_else(|e| panic!("{from}: cannot run {}: {e}", exe.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Every line prefixed, so that the child's own "test result:" line is not
    // counted by the test runners' summaries (xtask test-gpu, run.sh) when shown.
    let shown: String = text.lines().map(|l| format!("child| {l}\n")).collect();
    assert!(
        out.status.success(),
        "{from}: the child ({INNER_TEST} with every device hidden) failed, {}:\n{shown}",
        out.status
    );
    assert!(
        text.contains(&format!("test {INNER_TEST} ... ok")) && text.contains("1 passed"),
        "{from}: the child did not run and pass {INNER_TEST}:\n{shown}"
    );
    // Shown with --nocapture.
    println!(
        "{from}: ran {} with CUDA_VISIBLE_DEVICES=\"\" ({}):\n{shown}",
        exe.display(),
        out.status
    );
}

/// An error for "no device": [`Error::NoContext`] or a driver error.
fn is_no_context_or_driver_error(e: &Error) -> bool {
    matches!(e, Error::NoContext) || e.driver_code().is_some()
}

/// The checks, in a process whose driver sees no device.
fn checks_without_devices() {
    assert_eq!(
        std::env::var("CUDA_VISIBLE_DEVICES").as_deref(),
        Ok(""),
        "the parent hides every device"
    );

    let count = Context::device_count();
    println!("Context::device_count(): {count:?}");
    assert_eq!(
        count,
        Ok(0),
        "a driver that sees no device reports 0 devices (DriverNotFound: this test \
         needs the CUDA driver installed)"
    );

    match Context::new(0) {
        Ok(ctx) => panic!("Context::new(0) succeeded with every device hidden: {ctx:?}"),
        Err(e) => {
            println!("Context::new(0): {e}");
            let msg = e.to_string();
            match e {
                Error::InvalidDevice {
                    ordinal: 0,
                    count: 0,
                } => assert!(msg.contains("0 device(s)"), "{msg}"),
                ref e if e.driver_code() == Some(CUDA_ERROR_NO_DEVICE) => assert!(
                    msg.contains("CUDA_ERROR_NO_DEVICE"),
                    "a driver error names its code: {msg}"
                ),
                e => panic!(
                    "Context::new(0) without devices: expected InvalidDevice {{ ordinal: 0, \
                     count: 0 }} or CUDA_ERROR_NO_DEVICE ({CUDA_ERROR_NO_DEVICE}), got {e:?}"
                ),
            }
        }
    }

    // With no context current, a reservation waits for the first transfer (which
    // needs a stream, so a device): nothing is pinned, no error yet.
    let mut staging = StagingBuffer::new();
    assert_eq!(staging.capacity(), 0);
    let r = StagingBuffer::with_capacity(4096);
    println!("StagingBuffer::with_capacity(4096): {r:?}");
    let s = r.expect("StagingBuffer::with_capacity(4096) with no context defers");
    assert_eq!(s.capacity(), 0);
    staging
        .reserve(4096)
        .expect("StagingBuffer::reserve(4096) with no context defers");
    assert_eq!(staging.capacity(), 0, "nothing pinned");
    assert_eq!(staging.stats().allocations, 0);

    let r = DeviceBuffer::<u8>::alloc(16);
    println!("DeviceBuffer::<u8>::alloc(16): {r:?}");
    let e = r.expect_err("DeviceBuffer::alloc without a device must fail");
    assert!(is_no_context_or_driver_error(&e), "{e:?}");

    let r = PinnedBuffer::<u8>::alloc(16);
    println!("PinnedBuffer::<u8>::alloc(16): {r:?}");
    let e = r.expect_err("PinnedBuffer::alloc without a device must fail");
    assert!(is_no_context_or_driver_error(&e), "{e:?}");
}

#[test]
#[ignore = "needs a CUDA driver: run with cargo xtask test-gpu"]
fn driver_without_a_visible_device_is_a_clear_error() {
    run_child_without_devices("driver_without_a_visible_device_is_a_clear_error");
}

/// In the child: the checks. Run directly (by `--include-ignored`): spawns the child
/// like the test above, so it never passes without checking anything.
#[test]
#[ignore = "run by driver_without_a_visible_device_is_a_clear_error"]
fn inner_no_visible_device() {
    if std::env::var(CHILD_MARKER).as_deref() == Ok("1") {
        checks_without_devices();
    } else {
        run_child_without_devices(INNER_TEST);
    }
}
