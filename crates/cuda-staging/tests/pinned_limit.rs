//! The pinned-memory budget (issue 24): `pinned_bytes` counts every buffer, ring
//! slot and batch region, `set_pinned_limit` / `CUDA_STAGING_PINNED_LIMIT` cap it,
//! and a grow past the cap is a clear error that leaves the buffer usable at its old
//! capacity, never a fallback to the pageable path.
//!
//! Its own test binary: the limit and the count are process-wide, so no other
//! test's buffers may pin memory beside these; and inside it every test that sets
//! the limit or reads the count holds [`LIMIT_LOCK`] (tests run in parallel
//! threads), restoring the limit when it ends, even by a panic.
//!
//! The CPU tests (the limit's setting, a refusal before any driver call, the
//! environment variable) run everywhere. The GPU tests are `#[ignore]`d; run them
//! with `cargo xtask test-gpu` (or `cargo test -p cuda-staging --test pinned_limit
//! -- --ignored` on a GPU machine). Without a device each one fails loudly.

mod common;

use std::process::Command;
use std::sync::{Mutex, MutexGuard};

use common::*;
use cuda_staging::{
    pinned_bytes, pinned_limit, set_pinned_limit, DownloadBatch, Error, StagingBuffer, StagingRing,
    UploadBatch, PINNED_LIMIT_ENV,
};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// Held by every test that sets the limit or counts pinned bytes.
static LIMIT_LOCK: Mutex<()> = Mutex::new(());

/// The lock, and the limit to restore when the test ends.
struct Limited {
    previous: Option<usize>,
    _lock: MutexGuard<'static, ()>,
}

/// Takes [`LIMIT_LOCK`] (a test that panicked holding it leaves nothing behind:
/// its guard restored the limit) and sets the limit to `limit`.
fn limited(limit: Option<usize>) -> Limited {
    let lock = LIMIT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let previous = set_pinned_limit(limit);
    Limited {
        previous,
        _lock: lock,
    }
}

impl Drop for Limited {
    fn drop(&mut self) {
        set_pinned_limit(self.previous);
    }
}

/// The limit error's numbers, or a panic naming what came instead.
#[track_caller]
fn limit_numbers(e: &Error) -> (&'static str, usize, usize, usize) {
    match *e {
        Error::PinnedLimitExceeded {
            op,
            limit,
            held,
            requested,
        } => (op, limit, held, requested),
        ref other => panic!("expected Error::PinnedLimitExceeded, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------
// CPU tests
// ---------------------------------------------------------------------------------

#[test]
fn the_limit_is_set_read_and_lifted() {
    let _g = limited(Some(123 * MIB));
    assert_eq!(pinned_limit(), Some(123 * MIB));
    assert_eq!(
        set_pinned_limit(Some(7)),
        Some(123 * MIB),
        "returns the old one"
    );
    assert_eq!(pinned_limit(), Some(7));
    assert_eq!(set_pinned_limit(None), Some(7));
    assert_eq!(pinned_limit(), None, "None lifts it");
}

/// A grow the limit refuses is refused before any driver call: it fails the same
/// way with or without a GPU, and pins nothing.
#[test]
fn a_grow_past_the_limit_is_refused_before_any_driver_call() {
    let _g = limited(None);
    let held = pinned_bytes();
    set_pinned_limit(Some(held + 64 * KIB));
    let e = StagingBuffer::with_capacity(64 * KIB + 1).unwrap_err();
    assert_eq!(
        limit_numbers(&e),
        ("StagingBuffer grow", held + 64 * KIB, held, 128 * KIB),
        "the least grow that holds 64 KiB + 1: two 64 KiB granules"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "StagingBuffer grow: pinning {} more bytes would pass the pinned-memory limit \
             of {} bytes ({held} bytes are pinned already)",
            128 * KIB,
            held + 64 * KIB
        )
    );
    assert!(!e.is_sticky());
    let mut staging = StagingBuffer::new();
    let e = staging.reserve(MIB).unwrap_err();
    assert_eq!(limit_numbers(&e).3, MIB);
    assert_eq!(staging.capacity(), 0);
    assert_eq!(staging.stats().allocations, 0);
    assert_eq!(pinned_bytes(), held, "nothing was pinned");
}

/// What a child process is told to expect as the limit at start (`none` or bytes).
const EXPECT_ENV: &str = "PINNED_LIMIT_EXPECT";

#[test]
#[ignore = "run in child processes by the_environment_variable_sets_the_limit_at_first_use (no GPU needed)"]
fn limit_from_the_environment() {
    let _lock = LIMIT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let expected = match std::env::var(EXPECT_ENV) {
        Ok(v) if v == "none" => None,
        Ok(v) => Some(v.parse::<usize>().expect("a number")),
        // Run beside the others (cargo xtask test-gpu runs ignored tests too): the
        // variable as this process has it, with the other tests' limits restored.
        Err(_) => std::env::var(PINNED_LIMIT_ENV)
            .ok()
            .and_then(|v| v.trim().parse().ok()),
    };
    assert_eq!(pinned_limit(), expected, "the limit at start");
    // The program's setting overrides it.
    let old = set_pinned_limit(Some(5));
    assert_eq!(old, expected);
    assert_eq!(pinned_limit(), Some(5));
    set_pinned_limit(expected);
}

/// Runs [`limit_from_the_environment`] in a child process with
/// `CUDA_STAGING_PINNED_LIMIT` set to `value` (or unset), expecting `expected`.
fn child(value: Option<&str>, expected: Option<usize>) {
    let exe = std::env::current_exe().expect("this test binary");
    let mut cmd = Command::new(exe);
    cmd.args([
        "limit_from_the_environment",
        "--exact",
        "--ignored",
        "--test-threads=1",
    ])
    .env(
        EXPECT_ENV,
        expected.map_or_else(|| "none".to_owned(), |b| b.to_string()),
    );
    match value {
        Some(v) => cmd.env(PINNED_LIMIT_ENV, v),
        None => cmd.env_remove(PINNED_LIMIT_ENV),
    };
    let out = cmd.output().expect("run the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{PINNED_LIMIT_ENV}={value:?}, expecting {expected:?}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_environment_variable_sets_the_limit_at_first_use() {
    child(Some("1073741824"), Some(1 << 30));
    child(Some(" 0 "), Some(0));
    // Anything but a whole number of bytes leaves the default: no limit.
    child(Some("1G"), None);
    child(Some("-5"), None);
    child(Some(""), None);
    child(None, None);
}

// ---------------------------------------------------------------------------------
// GPU tests
// ---------------------------------------------------------------------------------

/// Threads of the exhaustion test, each with a buffer of [`OLD`] bytes asking for
/// [`NEW`] at once.
const THREADS: usize = 4;
const OLD: usize = MIB;
const NEW: usize = 3 * MIB;
/// Room above what was pinned before: the four old buffers and one grow fit (4 + 3
/// MiB, and 6 once the winner's old buffer is freed), two grows never do (at least
/// 6 + 3 MiB): exactly one of the four grows passes, whatever the interleaving.
const ROOM: usize = 8 * MIB;

/// Moves `n` f32 through `staging` on all four paths, checking every element.
fn round_trips(staging: &mut StagingBuffer, stream: &cuda_staging::Stream, n: usize, what: &str) {
    let mut dev = device_with::<f32>(n, seed());
    let s = seed();
    staging
        .upload_with(&mut dev, n, stream, |px| fill_pattern(px, s))
        .unwrap_or_else(|e| panic!("{what}: upload_with: {e}"));
    check(
        &format_args!("{what}: upload_with"),
        &device_contents(&dev),
        s,
    );
    let got = staging
        .download_into(&dev, n, stream)
        .unwrap_or_else(|e| panic!("{what}: download_into: {e}"));
    check(&format_args!("{what}: download_into"), got, s);
    let s = seed();
    staging
        .upload(&mut dev, &pattern::<f32>(n, s), stream)
        .unwrap_or_else(|e| panic!("{what}: upload: {e}"));
    check(&format_args!("{what}: upload"), &device_contents(&dev), s);
    let mut host = pattern::<f32>(n, seed());
    staging
        .download(&mut host, &dev, stream)
        .unwrap_or_else(|e| panic!("{what}: download: {e}"));
    check(&format_args!("{what}: download"), &host, s);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn grows_past_the_limit_from_several_threads_are_refused_and_leave_each_buffer_usable() {
    let (ctx, _stream) = gpu();
    let _g = limited(None);
    let base = pinned_bytes();
    let limit = base + ROOM;
    set_pinned_limit(Some(limit));
    let step = Lockstep::new(THREADS);

    let results: Vec<(StagingBuffer, Result<(), Error>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (ctx, step) = (&ctx, &step);
                scope.spawn(move || {
                    let _member = step.member();
                    let what = format!("thread {t}");
                    ctx.bind_to_thread().expect("bind_to_thread");
                    let stream = cuda_staging::Stream::new(ctx).expect("Stream::new");
                    let mut staging = staged_buffer();
                    staging
                        .reserve(OLD)
                        .expect("the old capacities fit the limit");
                    assert_eq!(staging.capacity(), OLD);
                    step.wait(); // every buffer holds its OLD bytes
                    let r = staging.reserve(NEW);
                    step.wait(); // every grow is decided
                    match &r {
                        Ok(()) => {
                            assert_eq!(staging.capacity(), NEW, "{what}");
                            assert_eq!(staging.stats().allocations, 2, "{what}");
                            round_trips(&mut staging, &stream, NEW / 4, &what);
                        }
                        Err(e) => {
                            let (op, l, held, requested) = limit_numbers(e);
                            assert_eq!((op, l, requested), ("StagingBuffer grow", limit, NEW));
                            assert!(held + requested > limit, "{what}: {e}");
                            assert!(held >= base + THREADS * OLD, "{what}: {e}");
                            // The old buffer, at its old capacity, still works, and
                            // is not re-pinned.
                            assert_eq!(staging.capacity(), OLD, "{what}");
                            round_trips(&mut staging, &stream, OLD / 4, &what);
                            assert_eq!(staging.stats().allocations, 1, "{what}");
                            assert_eq!(staging.capacity(), OLD, "{what}");
                        }
                    }
                    (staging, r)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a thread failed (see its panic above)"))
            .collect()
    });

    let granted = results.iter().filter(|(_, r)| r.is_ok()).count();
    assert_eq!(granted, 1, "exactly one grow fits, whatever the order");
    assert_eq!(
        pinned_bytes(),
        base + (THREADS - 1) * OLD + NEW,
        "three old buffers and the grown one"
    );
    assert!(pinned_bytes() <= limit);
    drop(results);
    assert_eq!(pinned_bytes(), base, "every buffer gave its memory back");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_transfer_that_would_grow_past_the_limit_is_refused_not_sent_the_pageable_way() {
    let (_ctx, stream) = gpu();
    let _g = limited(None);
    let base = pinned_bytes();
    let mut staging = staged_buffer();
    staging.reserve(MIB).unwrap();
    assert_eq!(pinned_bytes(), base + MIB);
    set_pinned_limit(Some(base + MIB)); // no room left
    let stats = staging.stats();

    let big = 2 * MIB / 4;
    let sentinel = seed();
    let mut dev = device_with::<f32>(big, sentinel);
    let mut ran = false;
    let e = staging
        .upload_with(&mut dev, big, &stream, |_: &mut [f32]| ran = true)
        .unwrap_err();
    assert!(!ran, "fill must not run");
    assert_eq!(
        limit_numbers(&e),
        ("StagingBuffer grow", base + MIB, base + MIB, 2 * MIB)
    );
    let e = staging.download_into(&dev, big, &stream).unwrap_err();
    limit_numbers(&e);
    // `upload` / `download` would stage these: refused, not handed to the driver.
    let e = staging
        .upload(&mut dev, &pattern::<f32>(big, seed()), &stream)
        .unwrap_err();
    limit_numbers(&e);
    let mut host = pattern::<f32>(big, seed());
    let e = staging.download(&mut host, &dev, &stream).unwrap_err();
    limit_numbers(&e);
    // Batches need a region larger than the buffer too.
    let other = device_with::<f32>(big, seed());
    let mut batch = DownloadBatch::new();
    batch.add(&dev, big).unwrap();
    batch.add(&other, 1000).unwrap();
    let e = staging.download_batch(&batch, &stream).unwrap_err();
    limit_numbers(&e);
    drop(batch);
    let src = pattern::<f32>(big, seed());
    {
        let mut batch = UploadBatch::new();
        batch.add(&mut dev, &src).unwrap();
        let e = staging.upload_batch(&mut batch, &stream).unwrap_err();
        limit_numbers(&e);
    }
    assert_eq!(staging.stats(), stats, "refused transfers count nothing");
    assert_eq!(staging.capacity(), MIB);
    assert_eq!(pinned_bytes(), base + MIB);
    check(
        "device after refused transfers",
        &device_contents(&dev),
        sentinel,
    );

    // What fits the buffer still works, without pinning more.
    round_trips(&mut staging, &stream, MIB / 4, "1 MiB under the limit");
    assert_eq!(staging.stats().allocations, stats.allocations);

    // The limit lifted, the same transfer goes through (and pins).
    set_pinned_limit(None);
    let s = seed();
    staging
        .upload_with(&mut dev, big, &stream, |px| fill_pattern(px, s))
        .unwrap();
    check(
        "upload_with once the limit is lifted",
        &device_contents(&dev),
        s,
    );
    assert!(pinned_bytes() >= base + 2 * MIB);
    drop(staging);
    assert_eq!(pinned_bytes(), base);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_grow_pins_only_what_the_transfer_needs_when_the_policy_size_would_pass_the_limit() {
    let (_ctx, stream) = gpu();
    let _g = limited(None);
    let base = pinned_bytes();
    let mut staging = staged_buffer();
    staging.reserve(512 * KIB).unwrap();
    assert_eq!(staging.capacity(), 512 * KIB);
    // 1.5 times 512 KiB would be 768 KiB; with the old 512 KiB held, that passes
    // the limit; the 640 KiB a 600 KiB transfer rounds up to does not.
    set_pinned_limit(Some(base + 512 * KIB + 700 * KIB));
    let n = 600 * KIB / 4;
    let mut dev = device_with::<f32>(n, seed());
    let s = seed();
    staging
        .upload_with(&mut dev, n, &stream, |px| fill_pattern(px, s))
        .unwrap();
    check("upload_with after a least grow", &device_contents(&dev), s);
    assert_eq!(staging.capacity(), 640 * KIB);
    assert_eq!(
        pinned_bytes(),
        base + 640 * KIB,
        "the old 512 KiB were freed"
    );
    drop(staging);
    assert_eq!(pinned_bytes(), base);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn pinned_bytes_counts_buffers_rings_and_batches_and_shrink_to_fit_gives_memory_back() {
    let (_ctx, stream) = gpu();
    let _g = limited(None);
    let base = pinned_bytes();

    let mut staging = staged_buffer();
    let n = 150_528 / 4;
    let dev = device_with::<f32>(n, seed());
    let _ = staging.download_into(&dev, n, &stream).unwrap();
    assert_eq!(pinned_bytes(), base + staging.capacity());
    let first = staging.capacity();
    // A batch larger than the buffer grows it; the old allocation is given back.
    let other = device_with::<f32>(n, seed());
    let mut batch = DownloadBatch::new();
    batch.add(&dev, n).unwrap();
    batch.add(&other, n).unwrap();
    let _ = staging.download_batch(&batch, &stream).unwrap();
    drop(batch);
    assert!(staging.capacity() > first);
    assert_eq!(pinned_bytes(), base + staging.capacity());

    let mut ring = StagingRing::with_config(cuda_staging::RingConfig {
        slots: 3,
        ..Default::default()
    })
    .unwrap();
    let held = device_with::<f32>(n, seed());
    let mut tickets = Vec::new();
    for _ in 0..3 {
        tickets.push(ring.download(&held, n, &stream).unwrap());
    }
    ring.synchronize().unwrap();
    assert!(ring.capacity() >= 3 * n * 4);
    assert_eq!(pinned_bytes(), base + staging.capacity() + ring.capacity());

    staging.shrink_to_fit();
    assert_eq!(staging.capacity(), 0);
    assert_eq!(pinned_bytes(), base + ring.capacity());
    ring.shrink_to_fit();
    assert_eq!(ring.capacity(), 0);
    assert_eq!(pinned_bytes(), base, "both gave their memory back");
    // Tickets of a shrunk ring are refused, never read from freed memory.
    let reason = invalid_reason(ring.wait(&tickets[0]).unwrap_err());
    assert!(reason.contains("stale ticket"), "{reason}");

    // Both work again afterwards, pinning again.
    let s = seed();
    let mut dev = dev;
    set_device(&mut dev, s);
    check(
        "download_into after shrink_to_fit",
        staging.download_into(&dev, n, &stream).unwrap(),
        s,
    );
    let t = ring.download(&dev, n, &stream).unwrap();
    check(
        "ring download after shrink_to_fit",
        ring.wait(&t).unwrap(),
        s,
    );
    assert_eq!(pinned_bytes(), base + staging.capacity() + ring.capacity());
    drop((staging, ring));
    assert_eq!(pinned_bytes(), base);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_ring_slot_grow_past_the_limit_is_refused_and_the_ring_works_at_its_old_size() {
    let (_ctx, stream) = gpu();
    let _g = limited(None);
    let base = pinned_bytes();
    let mut ring = StagingRing::with_config(cuda_staging::RingConfig {
        slots: 2,
        ..Default::default()
    })
    .unwrap();
    let small = 256 * KIB / 4;
    let sentinel = seed();
    let mut dev = device_with::<f32>(4 * small, sentinel);
    // Both slots pinned for `small`.
    for _ in 0..2 {
        let t = ring.download(&dev, small, &stream).unwrap();
        check_at("warm-up", ring.wait(&t).unwrap(), 0, sentinel);
    }
    let cap = ring.capacity();
    assert_eq!(pinned_bytes(), base + cap);
    set_pinned_limit(Some(base + cap)); // no room left
    let before = ring.stats();
    // A ticket in slot 0; the refused calls would take slot 1. Had the first of them
    // used up slot 1, the second would have taken slot 0 and made this ticket stale.
    let t_held = ring.download(&dev, small, &stream).unwrap();

    let mut ran = false;
    let e = ring
        .upload_with(&mut dev, 4 * small, &stream, |_: &mut [f32]| ran = true)
        .unwrap_err();
    assert!(!ran);
    let (op, limit, held, requested) = limit_numbers(&e);
    assert_eq!(
        (op, limit, held),
        ("StagingRing slot grow", base + cap, base + cap)
    );
    assert!(requested >= 4 * small * 4, "{e}");
    limit_numbers(&ring.download(&dev, 4 * small, &stream).unwrap_err());
    limit_numbers(
        &ring
            .upload(&mut dev, &pattern::<f32>(4 * small, seed()), &stream)
            .unwrap_err(),
    );
    let after = ring.stats();
    assert_eq!(
        (
            after.uploads,
            after.downloads,
            after.allocations,
            after.slot_waits
        ),
        (
            before.uploads,
            before.downloads + 1,
            before.allocations,
            before.slot_waits
        ),
        "refused calls count nothing"
    );
    assert_eq!(ring.capacity(), cap);
    check_at("the held ticket", ring.wait(&t_held).unwrap(), 0, sentinel);
    check(
        "device after refused calls",
        &device_contents(&dev),
        sentinel,
    );

    // At its old size the ring goes on, through both slots, pinning nothing.
    for k in 0..4 {
        let s = seed();
        let mut view = dev.slice_mut(k * small..(k + 1) * small).unwrap();
        ring.upload_with(&mut view, small, &stream, |px| fill_pattern(px, s))
            .unwrap();
        let t = ring
            .download(
                &dev.slice(k * small..(k + 1) * small).unwrap(),
                small,
                &stream,
            )
            .unwrap();
        check(&format_args!("slot round {k}"), ring.wait(&t).unwrap(), s);
    }
    assert_eq!(ring.stats().allocations, before.allocations);
    assert_eq!(pinned_bytes(), base + cap);
    drop(ring);
    assert_eq!(pinned_bytes(), base);
}
