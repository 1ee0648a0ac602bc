//! GPU tests of how the library's waits spend the wait ([`WaitPolicy`]): behind
//! long GPU work the default polls briefly and then sleeps (the calling thread's CPU
//! time stays a small part of the wait), `Spin` burns the whole wait, `Block` sleeps
//! at once; every policy still returns only once the work is done, with the data in
//! place, on every path (stream and event waits, `upload_with` / `download_into`,
//! pipelined `upload` / `download`, batches, the ring).
//!
//! The CPU is the calling thread's own (`CLOCK_THREAD_CPUTIME_ID`), so work on other
//! threads does not disturb it. Its own test binary, tests one at a time (`SERIAL`):
//! long queued work on the GPU would slow tests running beside it.
//!
//! Every test is `#[ignore]`d; run them with `cargo xtask test-gpu` (or `cargo test
//! -p cuda-staging --test waits -- --ignored` on a GPU machine).

mod common;

use cuda_staging::{RingConfig, StagingConfig};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::*;
use cuda_staging::{
    DeviceBuffer, Event, StagingBuffer, StagingRing, Stream, WaitPolicy, DEFAULT_SPIN,
};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Rounds of [`Busy::queue`] queued ahead of a wait: about 2 ms each on an H200,
/// so 20 ms in all, far longer than any spin.
const BUSY_ROUNDS: usize = 10;

/// The calling thread's CPU time so far.
#[cfg(unix)]
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Elsewhere there is no `clock_gettime`: the tests that read CPU time say so.
#[cfg(not(unix))]
fn thread_cpu() -> Duration {
    panic!("this test reads the thread's CPU time with clock_gettime, a unix call")
}

/// Queues about 20 ms of work on `stream`, then runs `wait` and returns its wall
/// time and the calling thread's CPU time over it. Asserts the wait returned only
/// once the stream was idle.
fn behind_long_work(
    what: &str,
    busy: &mut Busy,
    stream: &Stream,
    wait: impl FnOnce(),
) -> (Duration, Duration) {
    for _ in 0..BUSY_ROUNDS {
        busy.queue(stream);
    }
    let (c0, t0) = (thread_cpu(), Instant::now());
    wait();
    let (cpu, wall) = (thread_cpu() - c0, t0.elapsed());
    assert!(
        stream.query().expect("Stream::query"),
        "{what}: returned while work on its stream still ran"
    );
    assert!(
        wall >= Duration::from_millis(5),
        "{what}: the queued work took only {wall:?}; the test needs a long wait"
    );
    (wall, cpu)
}

/// Asserts what `policy` costs over a long wait: `Spin` more than half of the wall
/// time in CPU, the others (which sleep after at most a bounded spin) less than half.
fn assert_cpu(what: &str, policy: WaitPolicy, (wall, cpu): (Duration, Duration)) {
    match policy {
        WaitPolicy::Spin => assert!(
            cpu * 2 > wall,
            "{what}, {policy:?}: a spinning wait used {cpu:?} of CPU over {wall:?}"
        ),
        // Sleeping between polls cost 21-26% of a 10 ms wait behind these 80 queued
        // copies on the H200 host (about 15 µs per poll), and 33-41% of a 230 ms one
        // on the simulator on a 2-core machine (about 25 µs per poll: each sleep's
        // wake-up costs more there); spinning costs it all. Half tells them apart on
        // both.
        _ => assert!(
            cpu * 2 < wall,
            "{what}, {policy:?}: {cpu:?} of CPU over a {wall:?} wait; it should sleep"
        ),
    }
}

const POLICIES: [WaitPolicy; 3] = [
    WaitPolicy::Spin,
    WaitPolicy::Block,
    WaitPolicy::Hybrid { spin: DEFAULT_SPIN },
];

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn stream_and_event_waits_behind_long_work_sleep_unless_told_to_spin() {
    let _serial = serial();
    let (ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut event = Event::new(&ctx).expect("Event::new");
    for policy in POLICIES {
        let what = format!("Stream::synchronize_with({policy:?})");
        let r = behind_long_work(&what, &mut busy, &stream, || {
            stream.synchronize_with(policy).expect(&what)
        });
        assert_cpu(&what, policy, r);

        let what = format!("Event::synchronize_with({policy:?})");
        let r = behind_long_work(&what, &mut busy, &stream, || {
            event.record(&stream).expect("Event::record");
            event.synchronize_with(policy).expect(&what);
        });
        assert_cpu(&what, policy, r);
        assert!(event.query().expect("Event::query"));
    }
    // The plain calls are the default hybrid.
    let r = behind_long_work("Stream::synchronize", &mut busy, &stream, || {
        stream.synchronize().expect("synchronize")
    });
    assert_cpu("Stream::synchronize", WaitPolicy::default(), r);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn staging_calls_behind_long_work_sleep_unless_told_to_spin_and_deliver_the_data() {
    let _serial = serial();
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    // One piece and pipelined, both directions.
    for bytes in [150_528usize, 4_915_200] {
        for policy in POLICIES {
            let mut staging = staged_buffer();
            staging
                .set_config(StagingConfig {
                    wait_policy: policy,
                    ..staging.config()
                })
                .expect("set_config");
            assert_eq!(staging.config().wait_policy, policy);
            // Pinned before anything is measured: pinning 4915200 B took milliseconds
            // of CPU of its own inside the first measured wait.
            staging.reserve(bytes).expect("reserve");
            let label = |call: &str| format!("{call} {bytes} B, {policy:?}");

            // The fill copies data made beforehand: generating a pattern of MiBs
            // inside it would be CPU of its own in the measured wait.
            let s = seed();
            let src = pattern::<u8>(bytes, s);
            let mut dev = DeviceBuffer::<u8>::alloc(bytes).expect("alloc");
            let what = label("upload_with");
            let r = behind_long_work(&what, &mut busy, &stream, || {
                staging
                    .upload_with(&mut dev, bytes, &stream, |d| d.copy_from_slice(&src))
                    .expect(&what)
            });
            assert_cpu(&what, policy, r);
            check(&what, &device_contents(&dev), s);

            let s = seed();
            set_device(&mut dev, s);
            let what = label("download_into");
            let mut seen = Vec::new();
            let r = behind_long_work(&what, &mut busy, &stream, || {
                seen = staging
                    .download_into(&dev, bytes, &stream)
                    .expect(&what)
                    .to_vec();
            });
            assert_cpu(&what, policy, r);
            check(&what, &seen, s);

            let s = seed();
            let src = pattern::<u8>(bytes, s);
            let what = label("upload");
            let r = behind_long_work(&what, &mut busy, &stream, || {
                staging.upload(&mut dev, &src, &stream).expect(&what)
            });
            assert_cpu(&what, policy, r);
            check(&what, &device_contents(&dev), s);

            let s = seed();
            set_device(&mut dev, s);
            let what = label("download");
            let mut host = vec![0u8; bytes];
            let r = behind_long_work(&what, &mut busy, &stream, || {
                staging.download(&mut host, &dev, &stream).expect(&what)
            });
            assert_cpu(&what, policy, r);
            check(&what, &host, s);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_ring_wait_behind_long_work_sleeps_unless_told_to_spin() {
    let _serial = serial();
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let bytes = 150_528;
    for policy in POLICIES {
        let mut ring = StagingRing::with_config(RingConfig {
            wait_policy: policy,
            ..RingConfig::default()
        })
        .unwrap();
        assert_eq!(ring.config().wait_policy, policy);
        warm(&mut ring, &stream, bytes);
        let s = seed();
        let dev = device_with::<u8>(bytes, s);
        let what = format!("StagingRing::wait, {policy:?}");
        let mut seen = Vec::new();
        let r = behind_long_work(&what, &mut busy, &stream, || {
            let t = ring.download(&dev, bytes, &stream).expect("download");
            seen = ring.wait(&t).expect(&what).to_vec();
        });
        assert_cpu(&what, policy, r);
        check(&what, &seen, s);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_transfer_with_nothing_ahead_of_it_is_not_slowed_by_the_default_wait() {
    // With nothing queued ahead, a transfer lands within its allowance (the default
    // spin plus its own link time), so the default wait never blocks: its latency
    // stays within a block's wake-up of a spinning wait's. Medians of interleaved
    // runs; the bound is loose (a block costs tens of µs, a spin none), so that it
    // fails only when the default blocks on every call.
    let _serial = serial();
    let (_ctx, stream) = gpu();
    let bytes = 4_915_200;
    let mut dev = DeviceBuffer::<u8>::alloc(bytes).expect("alloc");
    let mut spin = StagingBuffer::new();
    spin.set_config(StagingConfig {
        wait_policy: WaitPolicy::Spin,
        ..spin.config()
    })
    .expect("set_config");
    let mut hybrid = StagingBuffer::new();
    let mut block = StagingBuffer::new();
    block
        .set_config(StagingConfig {
            wait_policy: WaitPolicy::Block,
            ..block.config()
        })
        .expect("set_config");
    let mut times = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..60 {
        for (k, staging) in [&mut spin, &mut hybrid, &mut block].into_iter().enumerate() {
            let t0 = Instant::now();
            let landed = staging
                .download_into(&dev, bytes, &stream)
                .expect("download_into");
            times[k].push(t0.elapsed());
            assert_eq!(landed.len(), bytes);
        }
    }
    let [s, h, b] = times.map(|mut v| {
        v.sort();
        v[v.len() / 2]
    });
    assert!(
        h <= s + Duration::from_micros(20),
        "default {h:?} against spinning {s:?} (blocking {b:?})"
    );
    // And the data is right under every policy.
    let seed = seed();
    set_device(&mut dev, seed);
    for staging in [&mut spin, &mut hybrid, &mut block] {
        check(
            "download_into",
            staging.download_into(&dev, bytes, &stream).unwrap(),
            seed,
        );
    }
}

/// The driver's pageable copy waits for its stream inside the call, spinning,
/// whatever the buffer's policy says. A transfer handed to it must still wait as
/// the policy says: a default buffer's download of 4915200 B after a 5 ms gap
/// (paced, so it goes to the driver's copy), and one sent there by its routing
/// bound, each behind about 20 ms of GPU work, spend at most 30% of the wait in CPU.
/// The data lands either way. (Which route the paced one takes depends on timing;
/// the bound one's does not, and it is counted as a direct transfer.)
#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_download_handed_to_the_driver_behind_long_work_sleeps() {
    let _serial = serial();
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let bytes = 4_915_200;
    let mut dev = DeviceBuffer::<u8>::alloc(bytes).expect("alloc");
    let mut host = vec![0u8; bytes];
    let mut bound = StagingBuffer::new();
    bound.set_auto_stage_max_bytes(bytes - 1);
    for (what, staging) in [
        (
            "a default buffer's download after a 5 ms gap",
            StagingBuffer::new(),
        ),
        ("a download past the buffer's stage_max_bytes", bound),
    ] {
        let mut staging = staging;
        // One transfer first, then the gap: the next one is paced.
        staging.download(&mut host, &dev, &stream).expect(what);
        std::thread::sleep(Duration::from_millis(5));
        let direct = staging.stats().direct_transfers;
        let s = seed();
        set_device(&mut dev, s);
        let (wall, cpu) = behind_long_work(what, &mut busy, &stream, || {
            staging.download(&mut host, &dev, &stream).expect(what)
        });
        assert!(
            cpu * 10 <= wall * 3,
            "{what}: {cpu:?} of CPU over a {wall:?} wait, more than 30%"
        );
        check(what, &host, s);
        if staging
            .config()
            .stage_max_bytes
            .get(cuda_staging::Direction::DeviceToHost)
            < bytes
        {
            assert_eq!(staging.stats().direct_transfers, direct + 1, "{what}");
        }
    }
}
