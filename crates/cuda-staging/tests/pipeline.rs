//! GPU tests of the staged path's chunking as the copy pool's state changes it: data
//! arrives intact at every chunk boundary, in both directions, with the pool off,
//! with one helper and with all of them, whether the helpers are parked (a transfer
//! after an idle gap) or spinning (back to back).
//!
//! How a staged transfer is cut depends on the pool: uploads of 64 KiB to 1 MiB go
//! in two near-even chunks when the caller copies alone (no helper awake, and none
//! to wake: a copy under 512 KiB after a gap) and in one piece otherwise; uploads
//! over 1 MiB and downloads over 512 KiB are pipelined, and after a gap a copy of
//! 512 KiB or more wakes parked helpers; `set_pipeline_chunk_bytes` forces a chunk
//! size; with `StagingConfig::copy_threads` 1 or `set_copy_pool_threads(0)` the calling thread
//! copies alone. The sizes below sit at and around each of those bounds, with `f32`
//! and a 3-byte element (so elements straddle chunk and part boundaries), and every
//! element is compared.
//!
//! Its own test binary: the copy pool is process-wide, so transfers of tests running
//! beside these would wake its workers (and one test here switches the pool off).
//! The tests here run one at a time (`SERIAL`), and a "parked" transfer waits until
//! `/proc/self/task` shows every `staging-copy-*` worker asleep, so the cold path is
//! really taken, not just hoped for.
//!
//! Every test is `#[ignore]`d; run them with `cargo xtask test-gpu` (or `cargo test
//! -p cuda-staging --test pipeline -- --ignored` on a GPU machine).

mod common;

use cuda_staging::StagingConfig;
use std::mem::size_of;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use common::*;
use cuda_staging::{
    default_copy_threads, pool_stats, pool_threads, set_copy_pool_threads, DeviceBuffer, Direction,
    StagingBuffer, Stream,
};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// Byte sizes the element counts are taken around: the cold split's lower bound
/// (64 KiB), the seed's two small shapes, the download pipelining bound and the
/// size from which a copy after a gap wakes helpers (512 KiB), the upload
/// pipelining bound (1 MiB and one past it), the seed's large shape, and two odd
/// sizes.
const TARGET_BYTES: [usize; 9] = [
    64 * KIB,
    150_528,
    196_608,
    512 * KIB,
    MIB,
    MIB + 1,
    4_915_200,
    65_537,
    300_001,
];

/// Tests here run one at a time: each needs the pool to itself.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Element counts at, one below and one above each of [`TARGET_BYTES`].
fn element_counts<T>() -> Vec<usize> {
    let mut v: Vec<usize> = TARGET_BYTES
        .iter()
        .flat_map(|&b| {
            let n = b / size_of::<T>();
            [n - 1, n, n + 1]
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// How the buffer (and the pool) is set up.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Setup {
    /// Copies split over the caller and every helper of the pool.
    AllHelpers,
    /// `StagingConfig::copy_threads` 2: the caller and one helper.
    OneHelper,
    /// `StagingConfig::copy_threads` 1: the calling thread copies alone; every mid-size upload
    /// is cut in two.
    OneThread,
    /// `set_copy_pool_threads(0)` for the process: no helper at all, whatever the
    /// buffer's copy threads.
    PoolOff,
    /// `set_pipeline_chunk_bytes(64 KiB)`: everything over 64 KiB is pipelined.
    Chunks64K,
}

impl Setup {
    fn buffer(self) -> StagingBuffer {
        let mut s = staged_buffer();
        s.set_config(StagingConfig {
            copy_threads: default_copy_threads().max(2),
            ..s.config()
        })
        .expect("set_config");
        match self {
            Setup::AllHelpers | Setup::PoolOff => s
                .set_config(StagingConfig {
                    copy_threads: pool_threads().max(1) + 1,
                    ..s.config()
                })
                .expect("set_config"),
            Setup::OneHelper => s
                .set_config(StagingConfig {
                    copy_threads: 2,
                    ..s.config()
                })
                .expect("set_config"),
            Setup::OneThread => s
                .set_config(StagingConfig {
                    copy_threads: 1,
                    ..s.config()
                })
                .expect("set_config"),
            Setup::Chunks64K => s
                .set_config(StagingConfig {
                    pipeline_chunk_bytes: 64 * KIB,
                    ..s.config()
                })
                .expect("set_config"),
        }
        s
    }

    /// Whether helpers may copy parts of this setup's transfers.
    fn helped(self) -> bool {
        !matches!(self, Setup::OneThread | Setup::PoolOff)
    }
}

/// Switches the process-wide pool off while it lives, and back to its size after.
struct PoolOff(usize);

impl PoolOff {
    fn new() -> PoolOff {
        let size = pool_threads();
        assert_eq!(set_copy_pool_threads(0), 0);
        assert_eq!(pool_threads(), 0);
        PoolOff(size)
    }
}

impl Drop for PoolOff {
    fn drop(&mut self) {
        set_copy_pool_threads(self.0);
    }
}

/// What comes before each transfer.
#[derive(Clone, Copy, Debug)]
enum Gap {
    /// An idle gap of 2 to 6 ms, then a wait until every worker is parked.
    Parked,
    /// Nothing: transfers back to back, checks after the last one.
    BackToBack,
}

impl Gap {
    fn before_transfer(self, k: &mut u64) {
        if let Gap::Parked = self {
            *k += 1;
            std::thread::sleep(Duration::from_micros(2000 + (*k * 737) % 4000));
            wait_until_workers_parked();
        }
    }
}

/// Runs `transfer(staging, i, what)` for every count `counts[i]` of `T`, with `gap`
/// before each, and asserts that each was one staged transfer of its bytes in
/// direction `dir`. Returns each transfer's label (`what`), for the checks after.
fn staged_one_by_one<T>(
    staging: &mut StagingBuffer,
    dir: Direction,
    counts: &[usize],
    (setup, gap): (Setup, Gap),
    k: &mut u64,
    mut transfer: impl FnMut(&mut StagingBuffer, usize, &str),
) -> Vec<String> {
    let ty = std::any::type_name::<T>();
    let name = match dir {
        Direction::HostToDevice => "upload",
        Direction::DeviceToHost => "download",
    };
    let mut labels = Vec::with_capacity(counts.len());
    for (i, &n) in counts.iter().enumerate() {
        let bytes = n * size_of::<T>();
        let what = format!("{name} {n} x {ty} ({bytes} B), {setup:?}, {gap:?}");
        let before = staging.stats();
        gap.before_transfer(k);
        transfer(staging, i, &what);
        let (up, down) = match dir {
            Direction::HostToDevice => (bytes, 0),
            Direction::DeviceToHost => (0, bytes),
        };
        assert_counted(&what, before, staging.stats(), Route::Staged, up, down);
        labels.push(what);
    }
    labels
}

/// Uploads then downloads every size of [`element_counts`] for `T`, checking every
/// element and that each transfer was staged.
fn every_boundary<T: Pattern>(setup: Setup, gap: Gap, stream: &Stream) {
    let mut staging = setup.buffer();
    let counts = element_counts::<T>();
    let mut k = 0;

    // Uploads: everything prepared first, so that only the gap comes between them.
    let sentinel = seed();
    let mut devs: Vec<DeviceBuffer<T>> = counts.iter().map(|&n| device_with(n, sentinel)).collect();
    let seeds: Vec<u64> = counts.iter().map(|_| seed()).collect();
    let srcs: Vec<Vec<T>> = counts
        .iter()
        .zip(&seeds)
        .map(|(&n, &s)| pattern(n, s))
        .collect();
    let labels = staged_one_by_one::<T>(
        &mut staging,
        Direction::HostToDevice,
        &counts,
        (setup, gap),
        &mut k,
        |staging, i, what| staging.upload(&mut devs[i], &srcs[i], stream).expect(what),
    );
    for ((what, dev), &s) in labels.iter().zip(&devs).zip(&seeds) {
        check(what, &device_contents(dev), s);
    }

    // Downloads.
    let seeds: Vec<u64> = counts.iter().map(|_| seed()).collect();
    for (dev, &s) in devs.iter_mut().zip(&seeds) {
        set_device(dev, s);
    }
    let mut hosts: Vec<Vec<T>> = counts.iter().map(|&n| pattern(n, seed())).collect();
    let labels = staged_one_by_one::<T>(
        &mut staging,
        Direction::DeviceToHost,
        &counts,
        (setup, gap),
        &mut k,
        |staging, i, what| {
            staging
                .download(&mut hosts[i], &devs[i], stream)
                .expect(what)
        },
    );
    for ((what, host), &s) in labels.iter().zip(&hosts).zip(&seeds) {
        check(what, host, s);
    }
}

fn run(setup: Setup, gap: Gap) {
    let _one_at_a_time = serial();
    let (_ctx, stream) = gpu();
    let _off = (setup == Setup::PoolOff).then(PoolOff::new);
    let before = pool_stats();
    every_boundary::<f32>(setup, gap, &stream);
    every_boundary::<[u8; 3]>(setup, gap, &stream);
    let after = pool_stats();
    // Both ways round: helpers took part where they may (every setup that allows
    // them has copies of 512 KiB and more, which wake them even after a gap), and
    // never where they may not.
    if setup.helped() {
        assert!(
            after.parts_copied > before.parts_copied,
            "{setup:?}, {gap:?}: no helper copied a part ({before:?} -> {after:?})"
        );
    } else {
        assert_eq!(
            after.parts_copied, before.parts_copied,
            "{setup:?}, {gap:?}: a helper copied a part"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn parked_workers_every_chunk_boundary_all_helpers() {
    run(Setup::AllHelpers, Gap::Parked);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn parked_workers_every_chunk_boundary_one_helper() {
    run(Setup::OneHelper, Gap::Parked);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn parked_workers_every_chunk_boundary_one_copy_thread() {
    run(Setup::OneThread, Gap::Parked);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn parked_workers_every_chunk_boundary_pool_off() {
    run(Setup::PoolOff, Gap::Parked);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn parked_workers_every_chunk_boundary_64_kib_chunks() {
    run(Setup::Chunks64K, Gap::Parked);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn back_to_back_every_chunk_boundary_all_helpers() {
    run(Setup::AllHelpers, Gap::BackToBack);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn back_to_back_every_chunk_boundary_one_helper() {
    run(Setup::OneHelper, Gap::BackToBack);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn back_to_back_every_chunk_boundary_one_copy_thread() {
    run(Setup::OneThread, Gap::BackToBack);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn back_to_back_every_chunk_boundary_pool_off() {
    run(Setup::PoolOff, Gap::BackToBack);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn back_to_back_every_chunk_boundary_64_kib_chunks() {
    run(Setup::Chunks64K, Gap::BackToBack);
}

/// A download in one piece copies out only once its DMA has landed. Queued behind
/// about a millisecond of other work, each download must still copy what the
/// device held when its DMA ran, never the window's bytes from the round before.
/// On even rounds five downloads back to back may come just before it, so that it
/// may count as one of a tight loop and enlist the helpers that are still spinning;
/// on odd rounds it follows the round before alone. Either way it is staged.
#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn one_piece_downloads_behind_queued_work_copy_what_landed() {
    let _one_at_a_time = serial();
    let (_ctx, stream) = gpu();
    let mut staging = Setup::AllHelpers.buffer();
    let mut busy = Busy::new();
    for bytes in [64 * KIB, 150_528, 300_000, 512 * KIB] {
        let n = bytes / size_of::<f32>();
        let mut dev = DeviceBuffer::<f32>::alloc(n).expect("alloc");
        let mut next = DeviceBuffer::<f32>::alloc(n).expect("alloc");
        let mut host = vec![0f32; n];
        for round in 0..8 {
            let s = seed();
            set_device(&mut next, s);
            if round % 2 == 0 {
                for _ in 0..5 {
                    staging.download(&mut host, &dev, &stream).expect("warm-up");
                }
            }
            // `dev` changes only on the stream, behind the busy work.
            busy.queue(&stream);
            stream.memcpy_dtod(&next, &mut dev).expect("dtod");
            let what = format!("{bytes} B, round {round}, behind queued work");
            let before = staging.stats();
            staging.download(&mut host, &dev, &stream).expect(&what);
            assert_counted(&what, before, staging.stats(), Route::Staged, 0, bytes);
            check(&what, &host, s);
        }
    }
}
