//! The program's handle on the process-wide copy pool, without a GPU: its size from
//! `CUDA_STAGING_COPY_THREADS` and from [`set_copy_pool_threads`], and
//! [`pool_stats`]. Its own binary: the size is process-wide, and the tests of
//! `cpu.rs` read it.
//!
//! The environment is read once, when the pool is first used, so each case runs in a
//! child process: this binary again, with the variable set, running
//! [`size_from_the_environment_then_the_program`] alone.

use std::process::Command;

use cuda_staging::{
    pool_stats, pool_threads, pool_threads_started, set_copy_pool_threads, COPY_THREADS_ENV,
    MAX_POOL_THREADS,
};

/// What a child process is told to expect (unset: work it out from the
/// environment, as a run of every test in one process does).
const EXPECT_ENV: &str = "POOL_CONTROL_EXPECT_THREADS";

/// The default size: one helper fewer than the cores, at most 15.
fn default_size() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get().min(16) - 1)
}

#[test]
#[ignore = "run in child processes by the_environment_variable_sizes_the_pool (no GPU needed)"]
fn size_from_the_environment_then_the_program() {
    let expected = match std::env::var(EXPECT_ENV) {
        Ok(v) => v.parse::<usize>().expect("a number"),
        Err(_) => match std::env::var(COPY_THREADS_ENV)
            .ok()
            .map(|v| v.trim().parse())
        {
            Some(Ok(n)) => usize::min(n, MAX_POOL_THREADS),
            _ => default_size(),
        },
    };
    assert_eq!(pool_threads(), expected, "the size at start");
    let s = pool_stats();
    assert_eq!(s.threads, expected);
    assert_eq!(s.threads_started, 0, "asking starts no thread");
    assert_eq!(s.threads_awake, 0);
    assert_eq!(s.wakes, 0);
    assert_eq!(s.parts_copied, 0);
    if cfg!(unix) {
        assert_eq!(s.cpu_time, Some(std::time::Duration::ZERO));
    }

    // The program's setting overrides the environment's, clamped, and starts no
    // thread by itself.
    assert_eq!(set_copy_pool_threads(3), 3);
    assert_eq!(pool_threads(), 3);
    assert_eq!(pool_stats().threads, 3);
    assert_eq!(set_copy_pool_threads(usize::MAX), MAX_POOL_THREADS);
    assert_eq!(pool_threads(), MAX_POOL_THREADS);
    assert_eq!(set_copy_pool_threads(0), 0);
    assert_eq!(pool_threads(), 0);
    assert_eq!(pool_threads_started(), 0);
    set_copy_pool_threads(expected);
}

/// Runs [`size_from_the_environment_then_the_program`] in a child process with
/// `CUDA_STAGING_COPY_THREADS` set to `value` (or unset), expecting `expected`.
fn child(value: Option<&str>, expected: usize) {
    let exe = std::env::current_exe().expect("this test binary");
    let mut cmd = Command::new(exe);
    cmd.args([
        "size_from_the_environment_then_the_program",
        "--exact",
        "--ignored",
        "--test-threads=1",
    ])
    .env(EXPECT_ENV, expected.to_string());
    match value {
        Some(v) => cmd.env(COPY_THREADS_ENV, v),
        None => cmd.env_remove(COPY_THREADS_ENV),
    };
    let out = cmd.output().expect("run the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{COPY_THREADS_ENV}={value:?}, expecting {expected}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_environment_variable_sizes_the_pool() {
    child(Some("2"), 2);
    child(Some("0"), 0);
    child(Some(" 7 "), 7);
    child(Some("1000"), MAX_POOL_THREADS);
    // Anything else leaves the default.
    child(Some("many"), default_size());
    child(Some("-3"), default_size());
    child(None, default_size());
}
