//! GPU fault tests: a sticky fault raised while transfers are in flight, as a user
//! would meet it.
//!
//! The fault comes from a small PTX kernel loaded through the driver
//! ([`FAULT_PTX`]): it waits [`FAULT_DELAY`] on the GPU, so that the transfers queued
//! behind it on the same stream are in flight, then stores to an address no
//! allocation covers, which raises `CUDA_ERROR_ILLEGAL_ADDRESS` and poisons the
//! context. Each scenario checks what "When the GPU faults" in the crate docs
//! promises:
//! - the call in flight returns the error, and [`Error::is_sticky`] says so;
//! - every later call returns an error, sticky too, within [`AFTER_FAULT_LIMIT`]
//!   (no hang);
//! - dropping buffers, rings, events and streams afterwards neither panics nor
//!   hangs, and their errors reach [`check_deferred_errors`];
//! - the copy pool is idle afterwards: no thread spins on the dead context.
//!
//! A fault poisons the process's context for good, so each scenario runs in a
//! process of its own: the test re-runs this executable for itself alone, with
//! [`CHILD_ENV`] naming it, and checks that the child passed (a child that hangs is
//! killed after [`CHILD_TIMEOUT`] and fails the test). One child at a time, so that
//! the time limits do not depend on another process's fault.
//!
//! Every test needs a CUDA GPU and is `#[ignore]`d; run them with `cargo xtask
//! test-gpu` (or `cargo test -p cuda-staging --test faults -- --ignored` on a GPU
//! machine; from a bundle, `bash run.sh --only faults`). `--sanitize` skips this
//! executable: memcheck would report the deliberate faults, and handles the faulting
//! kernel itself.

mod common;

use std::ffi::{c_void, CString};
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;
use cuda_core::result;
use cuda_core::sys::{CUfunction, CUDA_ERROR_ILLEGAL_ADDRESS};
use cuda_staging::{
    check_deferred_errors, pool_stats, Context, DeviceBuffer, DownloadBatch, Error, Event,
    PinnedBuffer, StagingBuffer, StagingRing, Stream,
};

/// Names the one test a child process runs (set in the child's environment only).
const CHILD_ENV: &str = "CUDA_STAGING_FAULT_CHILD";
/// How long a child may run before it counts as hung and is killed.
const CHILD_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the kernel waits on the GPU before it faults: far longer than queueing
/// the transfers behind it takes, so they are in flight when it comes.
const FAULT_DELAY: Duration = Duration::from_millis(50);
/// The most any call may take once the fault has happened.
const AFTER_FAULT_LIMIT: Duration = Duration::from_secs(2);
/// Where the kernel stores: inside the first page, which nothing maps.
const FAULT_ADDRESS: u64 = 0x10;
/// A pipelined download: 640×640×3 `f32`, cut into chunks.
const PIPELINED_BYTES: usize = 4_915_200;

/// `fault_after(addr, delay_ns)`: one thread spins on the GPU's global nanosecond
/// timer for `delay_ns`, then stores to `addr`. PTX ISA 7.0 for `sm_75`, the oldest
/// architecture CUDA 13 still builds for; the driver compiles it for the GPU at hand.
const FAULT_PTX: &str = r#"
.version 7.0
.target sm_75
.address_size 64

.visible .entry fault_after(
    .param .u64 fault_after_addr,
    .param .u64 fault_after_delay_ns
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<2>;
    .reg .b64 %rd<6>;

    ld.param.u64 %rd1, [fault_after_addr];
    ld.param.u64 %rd2, [fault_after_delay_ns];
    mov.u64 %rd3, %globaltimer;
$Lspin:
    mov.u64 %rd4, %globaltimer;
    sub.u64 %rd5, %rd4, %rd3;
    setp.lt.u64 %p1, %rd5, %rd2;
    @%p1 bra $Lspin;
    mov.b32 %r1, 195948557;
    st.volatile.global.u32 [%rd1], %r1;
    ret;
}
"#;

/// The faulting kernel, loaded into a context.
///
/// Its module is never unloaded: after the fault `cuModuleUnload` fails like every
/// other call, and the process ends with the scenario.
struct FaultKernel {
    function: CUfunction,
}

impl FaultKernel {
    /// Compiles [`FAULT_PTX`] in `ctx` (panicking with the JIT's log if it fails).
    fn load(ctx: &Context) -> FaultKernel {
        let _g = ctx.enter().expect("make the context current");
        let ptx = CString::new(FAULT_PTX).expect("PTX without NUL");
        let mut log = vec![0u8; 8192];
        let module = result::module_load_ptx(&ptx, &mut log).unwrap_or_else(|e| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            panic!(
                "loading the fault kernel's PTX: {e}\nJIT log:\n{}",
                String::from_utf8_lossy(&log[..end])
            )
        });
        // SAFETY: 1. `module` was just loaded into `ctx`, which is current.
        let function = unsafe { result::module_get_function(module, c"fault_after") }
            .expect("cuModuleGetFunction(fault_after)");
        FaultKernel { function }
    }

    /// Queues the kernel on `stream`: it waits `delay` on the GPU, then faults.
    /// Work queued on `stream` after it waits for it.
    fn queue(&self, stream: &Stream, delay: Duration) {
        let mut addr = FAULT_ADDRESS;
        let mut delay_ns = u64::try_from(delay.as_nanos()).expect("a delay in u64 ns");
        let mut params: [*mut c_void; 2] = [
            (&mut addr as *mut u64).cast(),
            (&mut delay_ns as *mut u64).cast(),
        ];
        let _g = stream.context().enter().expect("make the context current");
        // SAFETY: 1. the function belongs to the stream's context (both from
        // `gpu()`), which is current, and its module is never unloaded. 2. Two
        // parameters, both .u64, each pointing to a u64 that lives across the call.
        // 3. Deliberately violated, and only that: the kernel stores to
        // FAULT_ADDRESS, which no allocation covers. The store cannot land anywhere
        // (the address is not mapped): the GPU raises a fault instead, which is what
        // this test is about; no memory of this process is touched. 4. The stream
        // is alive while borrowed and belongs to the current context.
        unsafe {
            result::launch_kernel(
                self.function,
                [1, 1, 1],
                [1, 1, 1],
                0,
                stream.as_raw(),
                &mut params,
            )
        }
        .expect("cuLaunchKernel(fault_after)");
    }
}

/// Runs `what`, checks it returned within `limit`, and returns its result.
#[track_caller]
fn timed<R>(what: &str, limit: Duration, f: impl FnOnce() -> R) -> R {
    println!("{what} ...");
    let t = Instant::now();
    let r = f();
    let took = t.elapsed();
    println!("{what}: {took:?}");
    assert!(
        took < limit,
        "{what} took {took:?}, more than {limit:?} after the fault"
    );
    r
}

/// Checks that `r` is an error that says the context is poisoned, and returns it.
#[track_caller]
fn sticky_error<T>(what: &str, r: cuda_staging::Result<T>) -> Error {
    let e = match r {
        Ok(_) => panic!("{what} succeeded after the fault"),
        Err(e) => e,
    };
    println!("{what}: {e}");
    assert!(
        e.is_sticky(),
        "{what}: the error should say the context is poisoned (is_sticky): {e:?}"
    );
    e
}

/// The error the fault itself raised: `CUDA_ERROR_ILLEGAL_ADDRESS`.
#[track_caller]
fn the_fault(what: &str, r: cuda_staging::Result<()>) {
    let e = sticky_error(what, r);
    assert_eq!(
        e.driver_code(),
        Some(CUDA_ERROR_ILLEGAL_ADDRESS),
        "{what}: the kernel's store raises CUDA_ERROR_ILLEGAL_ADDRESS: {e:?}"
    );
    assert!(
        e.to_string().contains("CUDA_ERROR_ILLEGAL_ADDRESS (700)"),
        "{what}: the message names the code: {e}"
    );
}

/// Everything a program might call next, on a context that has faulted: each call
/// returns a sticky error, none hangs.
///
/// Allocations and creations are followed by a use of what they made, so each step
/// does GPU work whether or not the driver refuses the allocation itself.
fn every_later_call_fails(
    ctx: &Context,
    stream: &Stream,
    staging: &mut StagingBuffer,
    ring: &mut StagingRing,
    src: &DeviceBuffer<u8>,
) {
    let limit = AFTER_FAULT_LIMIT;
    let mut host = vec![0u8; src.len()];
    let small = pattern::<u8>(150_528, seed());
    let mut dst = vec![0u8; small.len()];

    let r = timed("Stream::synchronize", limit, || stream.synchronize());
    sticky_error("Stream::synchronize", r);
    let r = timed("Context::synchronize", limit, || ctx.synchronize());
    sticky_error("Context::synchronize", r);
    let r = timed("StagingBuffer::download (pipelined)", limit, || {
        staging.download(&mut host, src, stream)
    });
    sticky_error("StagingBuffer::download (pipelined)", r);
    let r = timed("StagingBuffer::download_into", limit, || {
        staging.download_into(src, 1024, stream).map(|_| ())
    });
    sticky_error("StagingBuffer::download_into", r);
    let r = timed(
        "DeviceBuffer::alloc, then StagingBuffer::upload",
        limit,
        || {
            let mut d = DeviceBuffer::<u8>::alloc(small.len())?;
            staging.upload(&mut d, &small, stream)
        },
    );
    sticky_error("DeviceBuffer::alloc, then StagingBuffer::upload", r);
    let r = timed(
        "DeviceBuffer::zeroed, then StagingBuffer::upload_with",
        limit,
        || {
            let mut d = DeviceBuffer::<u8>::zeroed(1024)?;
            staging.upload_with(&mut d, 1024, stream, |s| fill_pattern(s, seed()))
        },
    );
    sticky_error("DeviceBuffer::zeroed, then StagingBuffer::upload_with", r);
    let r = timed("StagingBuffer::download of 150528 B", limit, || {
        staging.download(&mut dst, src, stream)
    });
    sticky_error("StagingBuffer::download of 150528 B", r);
    let r = timed("StagingRing::download, then wait", limit, || {
        let t = ring.download(src, src.len(), stream)?;
        ring.wait(&t).map(|_| ())
    });
    sticky_error("StagingRing::download, then wait", r);
    let r = timed("StagingRing::synchronize", limit, || ring.synchronize());
    // A ring with no transfer in flight has nothing to wait for.
    if let Err(e) = r {
        sticky_error::<()>("StagingRing::synchronize", Err(e));
    }
    let r = timed("DeviceBuffer::copy_to_host", limit, || {
        src.copy_to_host(&mut host)
    });
    sticky_error("DeviceBuffer::copy_to_host", r);
    let r = timed(
        "PinnedBuffer::alloc, then a queued copy into it",
        limit,
        || {
            let mut p = PinnedBuffer::<u8>::alloc(4096)?;
            stream.memcpy_dtoh(&src.as_bytes().subview(..4096)?, &mut p)?;
            p.wait()
        },
    );
    sticky_error("PinnedBuffer::alloc, then a queued copy", r);
    let r = timed("Event::new, record, synchronize", limit, || {
        let mut e = Event::new(ctx)?;
        e.record(stream)?;
        e.synchronize()
    });
    sticky_error("Event::new, record, synchronize", r);
    let r = timed("Stream::new, then synchronize", limit, || {
        Stream::new(ctx)?.synchronize()
    });
    sticky_error("Stream::new, then synchronize", r);
    let r = timed("Context::new(0), then a stream in it", limit, || {
        let again = Context::new(0)?;
        Stream::new(&again)?.synchronize()
    });
    sticky_error("Context::new(0), then a stream in it", r);
}

/// Drops `value` (no panic, no hang) and says how long it took.
fn timed_drop<T>(what: &str, value: T) {
    timed(&format!("drop {what}"), AFTER_FAULT_LIMIT, || drop(value));
}

/// Clears the process-wide store of deferred errors (showing what was there) and
/// returns how many have been recorded so far.
fn drain_deferred() -> u64 {
    if let Err(e) = check_deferred_errors() {
        println!("recorded before: {e}");
    }
    cuda_core::deferred_error_count()
}

/// The errors recorded since `before` reached `check_deferred_errors`: at least one,
/// the first kept whole and sticky, the rest counted.
fn drop_errors_were_recorded(before: u64) {
    let recorded = cuda_core::deferred_error_count() - before;
    println!("drops recorded {recorded} error(s)");
    assert!(
        recorded > 0,
        "dropping buffers, rings and streams of a poisoned context recorded no error"
    );
    let e = check_deferred_errors().expect_err("the recorded errors reach check_deferred_errors");
    println!("check_deferred_errors: {e}");
    let Error::Deferred { more, .. } = &e else {
        panic!("expected Error::Deferred, got {e:?}");
    };
    assert_eq!(
        *more + 1,
        recorded,
        "the first is kept, the rest counted: {e}"
    );
    assert!(e.is_sticky(), "a recorded fault is sticky: {e:?}");
    assert!(
        e.to_string().contains("CUDA_ERROR_ILLEGAL_ADDRESS (700)"),
        "its message shows the driver's error: {e}"
    );
    assert_eq!(check_deferred_errors(), Ok(()), "reported once");
}

/// This process's CPU time so far, all threads.
#[cfg(unix)]
fn process_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_PROCESS_CPUTIME_ID exists on
    // every Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Elsewhere there is no `clock_gettime`: the tests that read CPU time say so.
#[cfg(not(unix))]
fn process_cpu() -> Duration {
    panic!("this test reads the process's CPU time with clock_gettime, a unix call")
}

/// After the fault, nothing of the copy pool runs: every helper parks, none wakes
/// or burns CPU while the program does nothing, and the process as a whole is idle.
fn the_pool_is_idle() {
    wait_until(
        "no copy-pool helper awake after the fault",
        AFTER_FAULT_LIMIT,
        || pool_stats().threads_awake == 0,
    );
    wait_until_workers_parked();
    let before = pool_stats();
    let cpu = process_cpu();
    let idle = Duration::from_millis(500);
    std::thread::sleep(idle);
    let cpu = process_cpu() - cpu;
    let after = pool_stats();
    println!("pool after the fault: {after:?}; process CPU over {idle:?} idle: {cpu:?}");
    assert_eq!(after.threads_awake, 0, "{after:?}");
    assert_eq!(after.wakes, before.wakes, "no helper woke: {after:?}");
    assert_eq!(
        after.cpu_time, before.cpu_time,
        "no helper ran while idle: {before:?} -> {after:?}"
    );
    let spinning: Vec<TaskInfo> = tasks().into_iter().filter(|t| t.state == 'R').collect();
    // This thread is running (it reads the list); anything else running is suspect.
    assert!(
        spinning.iter().all(|t| !is_pool_thread(&t.name)),
        "a copy-pool thread runs on a dead context: {spinning:?}"
    );
    assert!(
        cpu < idle / 5,
        "the process used {cpu:?} of CPU in {idle:?} of doing nothing after the fault \
         (a thread spinning?); running threads: {spinning:?}"
    );
}

/// Downloads of [`PIPELINED_BYTES`] through a warmed `StagingBuffer` in a tight loop
/// (outside one, downloads wake no copy helper), the last checked, and proof that
/// they took the pipelined path with the copy pool's help.
fn warm_pipelined_download(
    staging: &mut StagingBuffer,
    stream: &Stream,
) -> (DeviceBuffer<u8>, Vec<u8>) {
    let s = seed();
    let src = device_with::<u8>(PIPELINED_BYTES, s);
    let mut host = vec![0u8; PIPELINED_BYTES];
    // All staged (`staged_buffer`); from the fifth on they come back to back and
    // the pool's helpers take part.
    for _ in 0..8 {
        staging
            .download(&mut host, &src, stream)
            .expect("a pipelined download before the fault");
    }
    check("the downloads before the fault", &host, s);
    let st = staging.stats();
    assert_eq!(
        st.staged_transfers, 8,
        "staged (the routing rule is off): {st:?}"
    );
    assert!(
        st.event_creations > 0,
        "a {PIPELINED_BYTES} B download is pipelined (its chunks' events): {st:?}"
    );
    let pool = pool_stats();
    assert!(
        pool.threads_started > 0,
        "the copy pool took part (else its idleness after the fault proves nothing): {pool:?}"
    );
    (src, host)
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_fault_during_a_pipelined_download() {
    in_own_process("a_fault_during_a_pipelined_download", || {
        let (ctx, stream) = gpu();
        let mut staging = staged_buffer();
        let (src, mut host) = warm_pipelined_download(&mut staging, &stream);
        let mut ring = StagingRing::new();
        warm(&mut ring, &stream, PIPELINED_BYTES);
        let fault = FaultKernel::load(&ctx);
        let staged_before = staging.stats().staged_transfers;

        fault.queue(&stream, FAULT_DELAY);
        let r = timed(
            "the pipelined download queued behind the fault",
            FAULT_DELAY + AFTER_FAULT_LIMIT,
            || staging.download(&mut host, &src, &stream),
        );
        the_fault("the pipelined download queued behind the fault", r);
        assert_eq!(
            staging.stats().staged_transfers,
            staged_before,
            "a failed transfer is not counted"
        );

        every_later_call_fails(&ctx, &stream, &mut staging, &mut ring, &src);

        let before = drain_deferred();
        timed_drop("the StagingBuffer", staging);
        timed_drop("the StagingRing", ring);
        timed_drop("the device buffer", src);
        timed_drop("the stream", stream);
        timed_drop("the context", ctx);
        drop_errors_were_recorded(before);
        the_pool_is_idle();
    });
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_fault_during_a_ring_wait() {
    in_own_process("a_fault_during_a_ring_wait", || {
        let (ctx, stream) = gpu();
        let mut staging = staged_buffer();
        let (src, _) = warm_pipelined_download(&mut staging, &stream);
        let mut ring = StagingRing::new();
        warm(&mut ring, &stream, PIPELINED_BYTES);
        let s = seed();
        let scores = device_with::<f32>(84 * 80, s);
        let boxes = device_with::<u32>(4 * 80, s + 1);
        let mut batch = DownloadBatch::new();
        batch.add(&scores, scores.len()).expect("a batch part");
        batch.add(&boxes, boxes.len()).expect("a batch part");
        let fault = FaultKernel::load(&ctx);

        fault.queue(&stream, FAULT_DELAY);
        // Queued behind the kernel, long before it faults: they return at once.
        let t0 = Instant::now();
        let ticket = ring
            .download(&src, PIPELINED_BYTES, &stream)
            .expect("a ring download queues behind the kernel before it faults");
        let batch_ticket = ring
            .download_batch(&batch, &stream)
            .expect("a ring batch queues behind the kernel before it faults");
        assert!(
            t0.elapsed() < FAULT_DELAY,
            "queueing took {:?}: the fault may have come first",
            t0.elapsed()
        );
        let r = timed(
            "StagingRing::wait on the download behind the fault",
            FAULT_DELAY + AFTER_FAULT_LIMIT,
            || ring.wait(&ticket).map(|_| ()),
        );
        the_fault("StagingRing::wait", r);
        let r = timed(
            "StagingRing::wait_batch behind the fault",
            AFTER_FAULT_LIMIT,
            || ring.wait(&batch_ticket).map(|_| ()),
        );
        sticky_error("StagingRing::wait_batch", r);

        every_later_call_fails(&ctx, &stream, &mut staging, &mut ring, &src);

        let before = drain_deferred();
        timed_drop("the StagingRing", ring);
        timed_drop("the StagingBuffer", staging);
        timed_drop("the batch", batch);
        timed_drop("the device buffers", (src, scores, boxes));
        timed_drop("the stream", stream);
        timed_drop("the context", ctx);
        drop_errors_were_recorded(before);
        the_pool_is_idle();
    });
}

/// `Drop` of everything with work still queued behind the faulting kernel, without
/// a wait first: each drop waits through the fault itself, returns, and records.
#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn drop_after_a_fault() {
    in_own_process("drop_after_a_fault", || {
        let (ctx, stream) = gpu();
        let mut staging = staged_buffer();
        let (src, _) = warm_pipelined_download(&mut staging, &stream);
        let mut ring = StagingRing::new();
        warm(&mut ring, &stream, PIPELINED_BYTES);
        let other = Stream::new(&ctx).expect("a second stream");
        let mut pinned = PinnedBuffer::<u8>::alloc(PIPELINED_BYTES).expect("pinned");
        let pinned_too = PinnedBuffer::<u8>::alloc(PIPELINED_BYTES).expect("pinned");
        let mut written = DeviceBuffer::<u8>::alloc(PIPELINED_BYTES).expect("device");
        let mut event = Event::new(&ctx).expect("an event");
        let fault = FaultKernel::load(&ctx);
        let before = drain_deferred();

        fault.queue(&stream, FAULT_DELAY);
        // Behind the kernel: a copy out of `src` into pinned memory, a copy from
        // pinned memory into `written`, two ring downloads, an event.
        let t0 = Instant::now();
        stream
            .memcpy_dtoh(&src, &mut pinned)
            .expect("queued behind the kernel");
        stream
            .memcpy_htod(&pinned_too, &mut written)
            .expect("queued behind the kernel");
        let _t1 = ring
            .download(&src, PIPELINED_BYTES, &stream)
            .expect("queued behind the kernel");
        let _t2 = ring
            .download(&src, 1 << 20, &stream)
            .expect("queued behind the kernel");
        event.record(&stream).expect("recorded behind the kernel");
        assert!(
            t0.elapsed() < FAULT_DELAY,
            "queueing took {:?}: the fault may have come first",
            t0.elapsed()
        );

        // The first drop waits for its copy, which the fault ends.
        timed(
            "drop a PinnedBuffer with a copy queued behind the fault",
            FAULT_DELAY + AFTER_FAULT_LIMIT,
            || drop(pinned),
        );
        timed_drop("the DeviceBuffer being written", written);
        timed_drop("the PinnedBuffer being read", pinned_too);
        timed_drop("the StagingRing with two downloads in flight", ring);
        timed_drop("the event recorded behind the fault", event);
        timed_drop("the StagingBuffer", staging);
        timed_drop("the source buffer", src);
        timed_drop("the second stream", other);
        timed_drop("the stream", stream);
        timed_drop("the context", ctx);
        drop_errors_were_recorded(before);
        the_pool_is_idle();
    });
}

/// Children run one at a time.
static ONE_CHILD: Mutex<()> = Mutex::new(());

/// In a child started for `name` (by [`CHILD_ENV`]), runs `scenario`. Otherwise
/// starts that child (this executable, running `name` alone) and checks it passed;
/// so run directly, the test never passes without the scenario having run.
fn in_own_process(name: &str, scenario: impl FnOnce()) {
    if std::env::var(CHILD_ENV).as_deref() == Ok(name) {
        scenario();
        return;
    }
    let _one = ONE_CHILD.lock().unwrap_or_else(|e| e.into_inner());
    let exe = std::env::current_exe().expect("current_exe: the path of this test executable");
    let mut child = Command::new(&exe)
        .args([
            "--exact",
            name,
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, name)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{name}: cannot run {}: {e}", exe.display()));
    let readers = [
        read_all(child.stdout.take().expect("piped stdout")),
        read_all(child.stderr.take().expect("piped stderr")),
    ];
    let start = Instant::now();
    let status = loop {
        match child.try_wait().expect("wait for the child") {
            Some(status) => break Some(status),
            None if start.elapsed() > CHILD_TIMEOUT => {
                // The one process this test started.
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let text: String = readers
        .into_iter()
        .map(|r| r.join().unwrap_or_default())
        .collect();
    // Every line prefixed, so that the child's own "test result:" line is not
    // counted by the test runners' summaries (xtask test-gpu, run.sh).
    let shown: String = text.lines().map(|l| format!("child| {l}\n")).collect();
    let Some(status) = status else {
        panic!(
            "{name}: the child hung (killed after {CHILD_TIMEOUT:?}); its last line says \
             where:\n{shown}"
        );
    };
    assert!(
        status.success(),
        "{name}: the child failed, {status}:\n{shown}"
    );
    // The child's progress lines come between "test NAME ..." and its "ok".
    assert!(
        text.contains(&format!("test {name} ... ")) && text.contains("test result: ok. 1 passed"),
        "{name}: the child did not run and pass {name}:\n{shown}"
    );
    println!("{name}: passed in its own process ({status}):\n{shown}");
}

/// A thread that reads `from` to its end.
fn read_all(mut from: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = from.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}
