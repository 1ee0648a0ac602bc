//! Where the driver library comes from: `CUDA_DRIVER_LIBRARY`, the usual names, and
//! `cuda_core::load_driver_from` after a failed default load.
//!
//! The driver is loaded once per process and stays loaded, so each test runs its
//! checks in a child process of this same executable (`std::env::current_exe()`,
//! which works from a bundle copied to a GPU machine too), started with the
//! environment the test needs and a marker naming the one test to run. In the
//! parent a test only starts the child and checks that it passed; in the child
//! (marked by `CUDA_CORE_LOADER_TEST_CHILD=<test name>`) it runs the checks.
//!
//! The CPU tests run everywhere, with or without a driver; the GPU test needs the
//! NVIDIA driver and a GPU (`cargo xtask test-gpu`).

mod common;

use std::error::Error as StdError;
use std::process::Command;

// Only the Linux-only GPU test below uses the helpers.
#[cfg(target_os = "linux")]
use common::*;
use cuda_core::sys::{self, LoadError, LoaderError};
use cuda_core::{Context, DeviceBuffer, Error, PinnedBuffer};

/// Set in a child's environment to the name of the test it runs.
const CHILD_MARKER: &str = "CUDA_CORE_LOADER_TEST_CHILD";
/// A driver library that does not exist.
const MISSING: &str = "/nonexistent/libcuda-test.so.1";

/// Whether this process is the child started for `test`.
fn is_child_for(test: &str) -> bool {
    std::env::var(CHILD_MARKER).as_deref() == Ok(test)
}

/// Runs `test` alone in a child process of this executable with `env` added, and
/// asserts that it ran and passed.
fn run_in_child(test: &str, env: &[(&str, &str)]) {
    let exe = std::env::current_exe().expect("current_exe: the path of this test executable");
    let mut cmd = Command::new(&exe);
    cmd.args(["--exact", test, "--include-ignored", "--nocapture"])
        .env(CHILD_MARKER, test);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{test}: cannot run {}: {e}", exe.display()));
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
        "{test}: the child process ({env:?}) failed, {}:\n{shown}",
        out.status
    );
    assert!(
        text.contains(&format!("test {test} ... ok")) && text.contains("1 passed"),
        "{test}: the child did not run and pass the test:\n{shown}"
    );
    println!("{test}: child with {env:?} passed:\n{shown}");
}

/// The chain of `std::error::Error::source()` from `e` down.
fn source_chain(e: &Error) -> Vec<&(dyn StdError + 'static)> {
    std::iter::successors(Some(e as &(dyn StdError + 'static)), |e| (*e).source()).collect()
}

#[test]
fn a_missing_library_named_by_the_environment_is_driver_not_found() {
    const TEST: &str = "a_missing_library_named_by_the_environment_is_driver_not_found";
    if !is_child_for(TEST) {
        return run_in_child(TEST, &[(sys::DRIVER_LIBRARY_ENV, MISSING)]);
    }
    assert_eq!(sys::DRIVER_LIBRARY_ENV, "CUDA_DRIVER_LIBRARY");
    assert_eq!(
        std::env::var(sys::DRIVER_LIBRARY_ENV).as_deref(),
        Ok(MISSING)
    );

    // Only the named library is tried, even where a driver is installed.
    let e = Context::new(0).unwrap_err();
    let Error::DriverNotFound { library, source } = &e else {
        panic!("Context::new(0) with {MISSING} named: expected DriverNotFound, got {e:?}");
    };
    assert_eq!(library, MISSING);
    match source {
        LoadError::LibraryNotFound { library, tried, .. } => {
            assert_eq!(library, MISSING);
            assert_eq!(
                tried,
                &[MISSING.to_owned()],
                "nothing but the named library"
            );
        }
        other => panic!("expected LoadError::LibraryNotFound, got {other:?}"),
    }
    assert!(e.to_string().contains(MISSING), "{e}");

    // The loader's error is the source, and the system loader's below it.
    let chain = source_chain(&e);
    assert!(chain.len() >= 4, "{chain:?}");
    assert_eq!(
        chain[1].downcast_ref::<LoadError>(),
        Some(source),
        "Error::DriverNotFound's source is the LoadError"
    );
    let loader = chain[2]
        .downcast_ref::<LoaderError>()
        .expect("below the LoadError, the system loader's error");
    let dlopen = chain[3].to_string();
    assert_eq!(dlopen, loader.inner().to_string());
    #[cfg(target_os = "linux")]
    assert!(
        dlopen.contains(MISSING),
        "dlopen's message names the file: {dlopen}"
    );

    // Every entry point that needs the driver says the same; nothing is cached, so
    // each call tries again and fails again.
    assert_eq!(Context::device_count().unwrap_err(), e);
    assert_eq!(Context::driver_version().unwrap_err(), e);
    assert_eq!(Context::current().unwrap_err(), e);
    assert_eq!(DeviceBuffer::<f32>::alloc(4).unwrap_err(), e);
    assert_eq!(PinnedBuffer::<f32>::alloc(4).unwrap_err(), e);
    assert!(sys::driver_if_loaded().is_none());

    // An explicit path that opens nothing either: named in the error.
    let explicit = "/nonexistent/libcuda-explicit.so.1";
    // SAFETY: 1. a path that does not exist opens nothing, so nothing runs.
    let e = unsafe { cuda_core::load_driver_from(explicit) }.unwrap_err();
    assert!(
        matches!(&e, Error::DriverNotFound { library, .. } if library == explicit),
        "{e:?}"
    );
    assert!(sys::driver_if_loaded().is_none());
}

#[test]
fn an_empty_environment_variable_means_the_usual_names() {
    const TEST: &str = "an_empty_environment_variable_means_the_usual_names";
    if !is_child_for(TEST) {
        return run_in_child(TEST, &[(sys::DRIVER_LIBRARY_ENV, "")]);
    }
    match cuda_core::result::driver() {
        // No driver here: every usual name was tried, the first is named.
        Err(Error::DriverNotFound { library, source }) => {
            assert_eq!(library, sys::DRIVER_LIBRARY);
            let LoadError::LibraryNotFound { tried, .. } = source else {
                panic!("expected LibraryNotFound, got {source:?}");
            };
            assert_eq!(tried, sys::DRIVER_LIBRARY_NAMES);
        }
        Err(e) => panic!("expected Ok or DriverNotFound, got {e:?}"),
        // A driver: found under one of the usual names.
        Ok(d) => assert!(
            sys::DRIVER_LIBRARY_NAMES.contains(&d.library()),
            "loaded from {}",
            d.library()
        ),
    }
}

#[cfg(target_os = "linux")]
#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn an_explicit_driver_path_works_after_a_failed_default_load() {
    const TEST: &str = "an_explicit_driver_path_works_after_a_failed_default_load";
    if !is_child_for(TEST) {
        return run_in_child(TEST, &[(sys::DRIVER_LIBRARY_ENV, MISSING)]);
    }
    // The default load fails: the environment names a missing file.
    let e = Context::new(0).unwrap_err();
    assert!(
        matches!(&e, Error::DriverNotFound { library, .. } if library == MISSING),
        "{e:?}"
    );

    // SAFETY: 1. `libcuda.so.1` is the NVIDIA driver's soname; opening it runs the
    // driver's own initialisers, which this crate is written against.
    unsafe { cuda_core::load_driver_from("libcuda.so.1") }
        .expect("load_driver_from(\"libcuda.so.1\") after a failed default load");
    assert_eq!(
        sys::driver_if_loaded().map(sys::Driver::library),
        Some("libcuda.so.1")
    );
    let ctx = gpu();
    assert_eq!(ctx.ordinal(), 0);
    let mut d = DeviceBuffer::<u32>::alloc(100_003).expect("alloc");
    check_round_trip("after an explicit load", &mut d, seed("loader", 0));

    // The same library again is fine; another one is refused.
    // SAFETY: 1. as above.
    unsafe { cuda_core::load_driver_from("libcuda.so.1") }.expect("the same library again");
    // SAFETY: 1. refused before anything is opened, since another library is loaded;
    // `libcuda.so` is the driver's development link in any case.
    let e = unsafe { cuda_core::load_driver_from("libcuda.so") }.unwrap_err();
    assert_eq!(
        e,
        Error::DriverAlreadyLoaded {
            loaded: "libcuda.so.1".into(),
            requested: "libcuda.so".into()
        }
    );
    assert!(e.to_string().contains("already in use"), "{e}");
    // And the loaded driver keeps working.
    check_round_trip("after a refused load", &mut d, seed("loader", 1));
}
