//! Helpers shared by the GPU test binaries of `cuda-staging` (`gpu/`, `batch.rs`,
//! `ring/`, `pipeline.rs`, `steady_state.rs`, `gpu_driver_error.rs`, `faults.rs`):
//! device set-up that fails loudly, per-element per-call patterns, exact comparisons
//! with short failure messages, queued work to transfer behind, stats bookkeeping,
//! and a look at the copy pool's threads.

#![allow(dead_code)] // each test binary uses its own subset

use cuda_staging::StagingConfig;
use std::fmt::{Debug, Display};
use std::sync::atomic::{AtomicU64, Ordering};

use cuda_staging::{
    bytemuck, Context, DeviceBuffer, Error, StagingBuffer, StagingPod, StagingRing, StagingStats,
    Stream,
};

/// Device 0's primary context (made current on this thread) and a fresh stream.
///
/// Panics when there is no usable GPU: a GPU test never passes quietly without one.
pub fn gpu() -> (Context, Stream) {
    let ctx = Context::new(0)
        .expect("this test needs CUDA device 0 (run GPU tests with cargo xtask test-gpu)");
    let stream = Stream::new(&ctx).expect("Stream::new");
    (ctx, stream)
}

/// A new staging buffer whose uploads are staged however long the gap before them
/// ([`StagingBuffer::set_driver_after_gap`] off). By default an upload that follows
/// a gap of 200 µs or more and that the calling thread would copy alone goes to the
/// driver's path; the tests of the staged path must not depend on how fast the test
/// itself runs between two transfers (compute-sanitizer slows it by far more than
/// that). `after_gap.rs` tests the default.
/// A buffer with the seed's routing: every pageable size up to `max` staged, larger
/// ones to the driver's pageable path, whatever the gap before them (no lower bound,
/// no rule after a gap).
pub fn seed_routing(max: usize) -> StagingBuffer {
    StagingBuffer::with_config(StagingConfig {
        stage_min_bytes: cuda_staging::PerDirection::both(0),
        stage_max_bytes: cuda_staging::PerDirection::both(max),
        driver_after_gap: false,
        ..StagingConfig::default()
    })
    .expect("with_config")
}

pub fn staged_buffer() -> StagingBuffer {
    let mut s = StagingBuffer::new();
    s.set_config(StagingConfig {
        driver_after_gap: false,
        ..s.config()
    })
    .expect("set_config");
    s
}

static NEXT_SEED: AtomicU64 = AtomicU64::new(0x5EED);

/// A seed no other call in this process gets, so every transfer moves different data.
pub fn seed() -> u64 {
    NEXT_SEED.fetch_add(1, Ordering::Relaxed)
}

/// SplitMix64 of (index, seed): neighbouring elements, chunks and calls all differ.
pub fn mix(i: usize, seed: u64) -> u64 {
    let mut z = (i as u64)
        .wrapping_add(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(0x632B_E59B_D9B4_E019);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Finite, never NaN: the low 32 bits of `bits` with the exponent's top bit cleared.
pub fn finite(bits: u64) -> f32 {
    f32::from_bits((bits as u32) & 0xBFFF_FFFF)
}

/// Byte-for-byte equality (no float comparison surprises).
pub fn same<T: StagingPod>(a: &T, b: &T) -> bool {
    bytemuck::bytes_of(a) == bytemuck::bytes_of(b)
}

/// A user type as the crate docs describe: `#[repr(C)]`, `Pod`, alignment 8, no
/// padding.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Detection {
    pub id: u64,
    pub score: f32,
    pub class: u16,
    pub flags: u16,
}

/// Element types with a per-element, per-seed pattern.
pub trait Pattern: StagingPod + Debug + Send + Sync {
    fn at(i: usize, seed: u64) -> Self;
}

impl Pattern for u8 {
    fn at(i: usize, seed: u64) -> Self {
        mix(i, seed) as u8
    }
}

impl Pattern for u32 {
    fn at(i: usize, seed: u64) -> Self {
        mix(i, seed) as u32
    }
}

impl Pattern for i32 {
    fn at(i: usize, seed: u64) -> Self {
        (mix(i, seed) >> 32) as i32
    }
}

impl Pattern for f32 {
    fn at(i: usize, seed: u64) -> Self {
        finite(mix(i, seed))
    }
}

impl Pattern for f64 {
    fn at(i: usize, seed: u64) -> Self {
        f64::from_bits(mix(i, seed) & 0xBFFF_FFFF_FFFF_FFFF)
    }
}

/// A 3-byte element (an RGB pixel): elements straddle every 4096-byte chunk and part
/// boundary of the pipeline, and byte counts are odd.
impl Pattern for [u8; 3] {
    fn at(i: usize, seed: u64) -> Self {
        let h = mix(i, seed);
        [h as u8, (h >> 8) as u8, (h >> 16) as u8]
    }
}

impl Pattern for Detection {
    fn at(i: usize, seed: u64) -> Self {
        let h = mix(i, seed);
        Detection {
            id: h,
            score: finite(h >> 32),
            class: (h >> 16) as u16,
            flags: (h as u16) ^ (i as u16),
        }
    }
}

/// `n` elements of the pattern of `seed`.
pub fn pattern<T: Pattern>(n: usize, seed: u64) -> Vec<T> {
    (0..n).map(|i| T::at(i, seed)).collect()
}

/// Writes the pattern of `seed` into `dst` (element `k` gets index `k`).
pub fn fill_pattern<T: Pattern>(dst: &mut [T], seed: u64) {
    for (i, v) in dst.iter_mut().enumerate() {
        *v = T::at(i, seed);
    }
}

/// Checks every element: `got[k]` must be the pattern of `seed` at `first + k`.
/// `what` is formatted only on failure (a `&str`, or `&format_args!(..)` to format
/// nothing unless it fails).
#[track_caller]
pub fn check_at<T: Pattern>(what: &(impl Display + ?Sized), got: &[T], first: usize, seed: u64) {
    let mut bad = 0usize;
    let mut first_bad = None;
    for (k, g) in got.iter().enumerate() {
        let e = T::at(first + k, seed);
        if !same(g, &e) {
            bad += 1;
            if first_bad.is_none() {
                first_bad = Some((k, *g, e));
            }
        }
    }
    if let Some((k, g, e)) = first_bad {
        panic!(
            "{what}: {bad} of {} elements differ; first at index {k}: got {g:?}, expected {e:?}",
            got.len()
        );
    }
}

/// Checks every element of `got` against the pattern of `seed` from index 0.
#[track_caller]
pub fn check<T: Pattern>(what: &(impl Display + ?Sized), got: &[T], seed: u64) {
    check_at(what, got, 0, seed)
}

/// Checks all of `got` (a device buffer's contents) region by region: each
/// `(start, len, seed)` must hold the pattern of its `seed` from index 0 (what a
/// transfer through a view at `start` wrote), and every element outside them the
/// pattern of `sentinel` at its own index (what the buffer held before).
#[track_caller]
pub fn check_regions<T: Pattern>(
    what: &(impl Display + ?Sized),
    got: &[T],
    sentinel: u64,
    regions: &[(usize, usize, u64)],
) {
    let mut sorted = regions.to_vec();
    sorted.sort_by_key(|r| r.0);
    let mut at = 0;
    for (start, len, s) in sorted {
        assert!(
            start >= at && start + len <= got.len(),
            "{what}: regions overlap or pass the end ({start}..{} of {})",
            start + len,
            got.len()
        );
        check_at(
            &format_args!("{what}: untouched {at}..{start}"),
            &got[at..start],
            at,
            sentinel,
        );
        check(
            &format_args!("{what}: region {start}..{}", start + len),
            &got[start..start + len],
            s,
        );
        at = start + len;
    }
    check_at(
        &format_args!("{what}: untouched {at}..{}", got.len()),
        &got[at..],
        at,
        sentinel,
    );
}

/// Checks that every element of `got` equals `value` (byte for byte).
#[track_caller]
pub fn check_all_eq<T: StagingPod + Debug>(what: &(impl Display + ?Sized), got: &[T], value: T) {
    let bad = got.iter().filter(|g| !same(*g, &value)).count();
    if bad > 0 {
        let (k, g) = got
            .iter()
            .enumerate()
            .find(|(_, g)| !same(*g, &value))
            .expect("a mismatch was counted");
        panic!(
            "{what}: {bad} of {} elements differ from {value:?}; first at index {k}: {g:?}",
            got.len()
        );
    }
}

/// A device buffer of `n` elements holding the pattern of `seed`, written through the
/// driver's own synchronous path (independent of the code under test).
pub fn device_with<T: Pattern>(n: usize, seed: u64) -> DeviceBuffer<T> {
    let mut d = DeviceBuffer::<T>::alloc(n).expect("DeviceBuffer::alloc");
    d.copy_from_host(&pattern(n, seed)).expect("copy_from_host");
    d
}

/// Overwrites all of `d` with the pattern of `seed` (synchronous driver path).
pub fn set_device<T: Pattern>(d: &mut DeviceBuffer<T>, seed: u64) {
    d.copy_from_host(&pattern(d.len(), seed))
        .expect("copy_from_host");
}

/// All of `d`, read through the driver's own synchronous path.
pub fn device_contents<T: Pattern>(d: &DeviceBuffer<T>) -> Vec<T> {
    let mut v = vec![T::zeroed(); d.len()];
    d.copy_to_host(&mut v).expect("copy_to_host");
    v
}

/// The `InvalidArgument` reason of `e`, or a panic naming what it was instead.
#[track_caller]
pub fn invalid_reason(e: Error) -> String {
    match e {
        Error::InvalidArgument { reason, .. } => reason,
        other => panic!("expected Error::InvalidArgument, got {other:?}"),
    }
}

/// Bytes of each device-to-device copy queued to keep a stream busy.
pub const BUSY_BYTES: usize = 256 << 20;
/// How many copies (or round trips) [`Busy`] queues at a time: about 1 ms of queued
/// work on an H200, far longer than any transfer the tests queue behind it.
pub const BUSY_REPS: usize = 4;

/// Two device buffers to copy between, to queue real work on a stream, so that
/// whatever is queued after it is certainly still pending when the host looks.
pub struct Busy {
    a: DeviceBuffer<u8>,
    b: DeviceBuffer<u8>,
}

impl Busy {
    pub fn new() -> Busy {
        Busy {
            a: DeviceBuffer::alloc(BUSY_BYTES).expect("alloc busy a"),
            b: DeviceBuffer::alloc(BUSY_BYTES).expect("alloc busy b"),
        }
    }

    /// Queues [`BUSY_REPS`] round trips (a to b, b to a) of [`BUSY_BYTES`] on
    /// `stream` and returns at once: whatever is queued next on `stream` starts only
    /// after them.
    pub fn queue(&mut self, stream: &Stream) {
        for _ in 0..BUSY_REPS {
            stream.memcpy_dtod(&self.a, &mut self.b).expect("busy dtod");
            stream.memcpy_dtod(&self.b, &mut self.a).expect("busy dtod");
        }
    }

    /// Half of [`Busy::queue`]: [`BUSY_REPS`] copies of [`BUSY_BYTES`] from a to b
    /// only (the amount `gpu/ordering.rs`'s tests were written against).
    pub fn queue_one_way(&mut self, stream: &Stream) {
        for _ in 0..BUSY_REPS {
            stream.memcpy_dtod(&self.a, &mut self.b).expect("busy dtod");
        }
    }
}

/// Pins every slot of `ring` for transfers of up to `bytes` (a download each, waited
/// for), so that later transfers spend no time pinning (about a millisecond for a
/// few MiB): work queued behind [`Busy`] is then certainly still pending when the
/// next call comes.
pub fn warm(ring: &mut StagingRing, stream: &Stream, bytes: usize) {
    let scratch = DeviceBuffer::<u8>::alloc(bytes).expect("alloc scratch");
    for _ in 0..ring.config().slots {
        let t = ring
            .download(&scratch, bytes, stream)
            .expect("warm-up download");
        ring.wait(&t).expect("warm-up wait");
    }
    ring.synchronize().expect("synchronize");
}

/// Which route a convenience transfer must have taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Through the pinned buffer (`staged_transfers`).
    Staged,
    /// The driver's pageable path (`direct_transfers`).
    Direct,
    /// Straight from / into a page-locked host slice (`pinned_source_transfers`).
    PinnedSource,
}

/// Asserts that exactly one transfer of `route` moving `up` / `down` bytes happened
/// between `before` and `after`.
pub fn assert_counted(
    what: &str,
    before: StagingStats,
    after: StagingStats,
    route: Route,
    up: usize,
    down: usize,
) {
    let one = |r: Route| u64::from(route == r);
    let got = (
        after.staged_transfers.wrapping_sub(before.staged_transfers),
        after.direct_transfers.wrapping_sub(before.direct_transfers),
        after
            .pinned_source_transfers
            .wrapping_sub(before.pinned_source_transfers),
        after.bytes_uploaded.wrapping_sub(before.bytes_uploaded),
        after.bytes_downloaded.wrapping_sub(before.bytes_downloaded),
    );
    let want = (
        one(Route::Staged),
        one(Route::Direct),
        one(Route::PinnedSource),
        up as u64,
        down as u64,
    );
    assert_eq!(
        got, want,
        "{what}: expected one {route:?} transfer (staged, direct, pinned, up, down deltas); \
         stats {before:?} -> {after:?}"
    );
}

/// The transfer counters only (everything but allocations and peak capacity).
pub fn transfer_counters(s: &StagingStats) -> [u64; 5] {
    [
        s.staged_transfers,
        s.direct_transfers,
        s.pinned_source_transfers,
        s.bytes_uploaded,
        s.bytes_downloaded,
    ]
}

/// One thread of this process, from `/proc/self/task` (Linux).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskInfo {
    pub tid: u32,
    /// The thread's name (`comm`, at most 15 bytes).
    pub name: String,
    /// The scheduler state: `R` running or runnable (a spinning worker), `S` asleep
    /// (a parked worker), ...
    pub state: char,
}

/// Every thread of this process. A thread that exits while it is read is left out.
pub fn tasks() -> Vec<TaskInfo> {
    let dir = std::fs::read_dir("/proc/self/task").expect("read /proc/self/task (Linux only)");
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue; // exited meanwhile
        };
        // "tid (comm) S ...": the name may hold spaces and parentheses, so split at
        // the first '(' and the last ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_owned();
        let state = stat[close + 1..].trim_start().chars().next().unwrap_or('?');
        out.push(TaskInfo { tid, name, state });
    }
    out.sort_by_key(|t| t.tid);
    out
}

/// Whether `name` is a thread of the process-wide copy pool (its `staging-copy-{i}`
/// helpers; it has no other thread).
pub fn is_pool_thread(name: &str) -> bool {
    name.starts_with("staging-copy-")
}

/// The copy pool's threads now.
pub fn pool_tasks() -> Vec<TaskInfo> {
    tasks()
        .into_iter()
        .filter(|t| is_pool_thread(&t.name))
        .collect()
}

/// The copy pool's workers (`staging-copy-*`) now.
pub fn pool_workers() -> Vec<TaskInfo> {
    tasks()
        .into_iter()
        .filter(|t| t.name.starts_with("staging-copy-"))
        .collect()
}

/// Polls every 100 µs until `f` holds, for at most `limit`; panics naming `what`
/// (and what `show` says about the state) when it never does.
pub fn wait_until(what: &str, limit: std::time::Duration, mut f: impl FnMut() -> bool) {
    let t = std::time::Instant::now();
    while !f() {
        assert!(
            t.elapsed() < limit,
            "never within {limit:?}: {what}; pool threads: {:?}",
            pool_tasks()
        );
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
}

/// Waits until every copy-pool worker is parked (asleep, state `S`): what a transfer
/// after an idle gap finds. Workers spin 50 µs after their last part, longer when a
/// pipelined download woke them early (100 µs); 2 s is room for a loaded machine.
/// True at once when the pool has not started.
pub fn wait_until_workers_parked() {
    wait_until(
        "every copy-pool worker parked",
        std::time::Duration::from_secs(2),
        || pool_workers().iter().all(|w| w.state != 'R'),
    );
}

/// A barrier for threads that must transfer at the same time, which a panicking
/// thread breaks instead of leaving the others waiting forever: each thread holds a
/// [`Lockstep::member`] guard, and once one of them panics every `wait` panics too.
pub struct Lockstep {
    threads: usize,
    /// (arrived this round, round, broken)
    state: std::sync::Mutex<(usize, u64, bool)>,
    turn: std::sync::Condvar,
}

/// Breaks its [`Lockstep`] when dropped by a panicking thread.
pub struct LockstepMember<'a>(&'a Lockstep);

impl Lockstep {
    pub fn new(threads: usize) -> Lockstep {
        Lockstep {
            threads,
            state: std::sync::Mutex::new((0, 0, false)),
            turn: std::sync::Condvar::new(),
        }
    }

    /// The guard each thread holds while it takes part.
    pub fn member(&self) -> LockstepMember<'_> {
        LockstepMember(self)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, u64, bool)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until every thread has arrived; panics if one of them failed.
    pub fn wait(&self) {
        let mut st = self.lock();
        assert!(!st.2, "another thread in lockstep failed");
        st.0 += 1;
        if st.0 == self.threads {
            st.0 = 0;
            st.1 += 1;
            self.turn.notify_all();
            return;
        }
        let round = st.1;
        while st.1 == round && !st.2 {
            st = self.turn.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        assert!(!st.2, "another thread in lockstep failed");
    }
}

impl Drop for LockstepMember<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.lock().2 = true;
            self.0.turn.notify_all();
        }
    }
}
