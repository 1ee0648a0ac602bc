//! The pool's tests: every byte lands, helpers wake only when asked and park when
//! there is nothing to do.

use super::*;
use std::time::{Duration, Instant};

/// Pool tests run one at a time: each starts spinning threads, and the wake-up
/// tests below count what other pools would disturb (CI machines have two cores).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A copy over up to `threads` threads, `helpers` of them the pool's.
fn share(threads: usize, helpers: usize) -> Share {
    Share {
        threads,
        helpers,
        linger: true,
        hot: false,
    }
}

/// [`Pool::copy`] of `src` into `dst` (equal lengths), through safe slices.
fn copy_slices(
    pool: &Pool,
    dst: &mut [u8],
    src: &[u8],
    streaming: bool,
    threads: usize,
    helpers: usize,
) {
    assert_eq!(dst.len(), src.len());
    // SAFETY: both slices hold `src.len()` bytes; `&mut` and `&` cannot overlap, and
    // the borrows last until the pool returns.
    unsafe {
        pool.copy(
            dst.as_mut_ptr(),
            src.as_ptr(),
            src.len(),
            streaming,
            share(threads, helpers),
        )
    }
}

fn with_pool(workers: usize, f: impl FnOnce(&Arc<Pool>)) {
    let _one_at_a_time = serial();
    let pool = Pool::start(workers).unwrap();
    f(&pool);
    pool.stop();
    // Stopping joins every worker, and with it each thread's hold on the pool.
    assert_eq!(Arc::strong_count(&pool), 1, "a worker outlived stop");
}

/// Polls `f` every 100 µs for up to five seconds (room for a loaded CI machine).
fn eventually(what: &str, f: impl Fn() -> bool) {
    assert!(within_5_s(f), "timed out: {what}");
}

/// Whether `f` holds at one of its polls, every 100 µs for up to five seconds.
fn within_5_s(f: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while !f() {
        if start.elapsed() >= Duration::from_secs(5) {
            return false;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    true
}

/// Every worker waiting, and no helper wanted (a place nobody took would keep this
/// from happening).
fn all_parked(pool: &Pool) -> bool {
    pool.awake() == 0 && pool.pending.load(Ordering::SeqCst) == 0
}

#[test]
fn pool_copies_every_byte_at_odd_sizes_and_offsets() {
    with_pool(3, |pool| {
        for &len in &[
            0usize,
            1,
            4095,
            4096,
            4097,
            3 * 4096 + 5,
            (64 << 10) + 3,
            1 << 20,
            (1 << 20) + 13,
        ] {
            for streaming in [true, false] {
                for wake in [0, 3] {
                    let src: Vec<u8> = (0..len + 3).map(|i| (i * 7 + len) as u8).collect();
                    let mut dst = vec![0xAAu8; len + 5];
                    copy_slices(
                        pool,
                        &mut dst[1..1 + len],
                        &src[3..3 + len],
                        streaming,
                        4,
                        wake,
                    );
                    assert_eq!(
                        &dst[1..1 + len],
                        &src[3..3 + len],
                        "len {len} streaming {streaming}"
                    );
                    assert_eq!(dst[0], 0xAA);
                    assert_eq!(dst[1 + len], 0xAA);
                }
            }
        }
    });
}

#[test]
fn parked_workers_and_many_generations_lose_nothing() {
    with_pool(2, |pool| {
        let src: Vec<u8> = (0..(1usize << 20)).map(|i| (i * 13 + 1) as u8).collect();
        for round in 0..200usize {
            if round % 50 == 0 {
                eventually("the workers park", || all_parked(pool));
            }
            let len = [48usize << 10, 1 << 20, 300_001][round % 3];
            let mut dst = vec![0u8; len];
            copy_slices(pool, &mut dst, &src[..len], round % 2 == 0, 3, round % 4);
            assert_eq!(dst, &src[..len], "round {round}");
        }
    });
}

#[test]
fn concurrent_copies_from_several_threads_all_land() {
    with_pool(3, |pool| {
        std::thread::scope(|s| {
            for t in 0..6usize {
                s.spawn(move || {
                    let src: Vec<u8> = (0..(256usize << 10)).map(|i| (i * 3 + t) as u8).collect();
                    for round in 0..100 {
                        let mut dst = vec![0u8; src.len()];
                        copy_slices(pool, &mut dst, &src, round % 2 == 1, 4, round % 3);
                        assert_eq!(dst, src, "thread {t} round {round}");
                    }
                });
            }
        });
    });
}

#[test]
fn a_copy_wakes_only_as_many_parked_workers_as_it_may_and_they_help() {
    with_pool(3, |pool| {
        let src: Vec<u8> = (0..(1usize << 20)).map(|i| (i * 5) as u8).collect();
        eventually("all parked", || all_parked(pool));
        let before = pool.stats();
        // Waking none: the caller copies alone, and no parked worker stirs.
        let mut dst = vec![0u8; src.len()];
        copy_slices(pool, &mut dst, &src, false, 4, 0);
        assert_eq!(dst, src);
        assert_eq!(pool.awake(), 0, "a copy that may wake nobody woke a worker");
        let after = pool.stats();
        assert_eq!(after.wakes, before.wakes);
        assert_eq!(after.parts_copied, before.parts_copied, "nobody helped");

        // Waking one: exactly one worker comes back from waiting for it, and it
        // waits again once the copy is done. The copy is long enough (a 64 MiB
        // one, about 5 ms) that the woken worker arrives while parts are left.
        let big: Vec<u8> = (0..(64usize << 20)).map(|i| (i * 11) as u8).collect();
        let mut out = vec![0u8; big.len()];
        copy_slices(pool, &mut out, &big, false, 4, 1);
        assert!(out == big, "the copy that woke one worker");
        eventually("the woken worker parks again", || all_parked(pool));
        let woke = pool.stats();
        assert_eq!(woke.wakes, after.wakes + 1, "exactly one worker was woken");
        assert!(
            woke.parts_copied > after.parts_copied,
            "the woken worker copied a part"
        );
    });
}

#[test]
fn an_idle_pool_parks_every_thread_once_the_copies_are_done() {
    with_pool(3, |pool| {
        // Work that keeps every worker busy, then nothing.
        let src: Vec<u8> = (0..(8usize << 20)).map(|i| (i * 3) as u8).collect();
        for _ in 0..20 {
            let mut dst = vec![0u8; src.len()];
            copy_slices(pool, &mut dst, &src, true, 4, 3);
            assert!(dst == src);
        }
        let busy = pool.stats();
        eventually("every worker parked by the pool's own count", || {
            all_parked(pool)
        });
        let parked = pool.stats();
        assert_eq!(parked.threads_awake, 0);
        #[cfg(target_os = "linux")]
        {
            // And by the kernel's: each worker thread is asleep (state `S`), not
            // running. This pool's threads, and the process-wide pool's where
            // another test started it (they share the name, and wait too). (A
            // worker counts itself waiting just before it calls into the kernel,
            // so the kernel may still show it running for a moment.)
            assert!(worker_states().len() >= 3, "{:?}", worker_states());
            eventually("every worker thread asleep in the kernel", || {
                worker_states().iter().all(|&(_, s)| s == 'S')
            });
        }
        // Parked threads spend nothing: their CPU time and wake count stand still
        // while idle. Each worker reads its clock when it waits. A worker woken by
        // the last copy's offer, but not yet run when the pool's count read it as
        // parked, wakes once more and parks again (seen on a loaded machine: the
        // sum moved by 11 µs between two looks 20 ms apart). So the pool must come
        // to a 20 ms window in which nothing moves, and stay asleep in the kernel.
        if let (Some(a), Some(b)) = (busy.cpu_time, parked.cpu_time) {
            assert!(b >= a);
            assert!(b > Duration::ZERO, "20 shared 8 MiB copies counted no CPU");
            eventually(
                "a parked pool's CPU and wakes standing still for 20 ms",
                || {
                    let before = pool.stats();
                    std::thread::sleep(Duration::from_millis(20));
                    let after = pool.stats();
                    all_parked(pool)
                        && (after.cpu_time, after.wakes) == (before.cpu_time, before.wakes)
                },
            );
        }
    });
}

/// The state letter of every thread named `staging-copy-*`, by thread id.
#[cfg(target_os = "linux")]
fn worker_states() -> Vec<(u32, char)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with("staging-copy-") {
            continue;
        }
        let tid = entry.file_name().to_string_lossy().parse().unwrap_or(0);
        let state = stat[close + 1..].trim_start().chars().next().unwrap_or('?');
        out.push((tid, state));
    }
    out
}

#[test]
fn a_pool_of_size_zero_copies_on_the_callers_thread() {
    let _one_at_a_time = serial();
    let pool = Pool::new(4, 0);
    assert_eq!(pool.grow().unwrap(), 0);
    assert_eq!(pool.enlistable(), 0);
    let src: Vec<u8> = (0..(1usize << 20)).map(|i| (i * 17) as u8).collect();
    let mut dst = vec![0u8; src.len()];
    copy_slices(&pool, &mut dst, &src, false, 8, 7);
    assert_eq!(dst, src);
    assert_eq!(pool.stats().threads_started, 0);
}

#[test]
fn parts_are_small_enough_for_late_helpers_and_never_too_many() {
    // About four parts per thread, whole pages, at least 16 KiB.
    assert_eq!(part_bytes(1 << 20, 4, PARTS_PER_THREAD), 64 << 10);
    assert_eq!(part_bytes(150_528, 4, PARTS_PER_THREAD), 16 << 10);
    assert_eq!(
        part_bytes(4096, 4, PARTS_PER_THREAD),
        4096,
        "a copy smaller than a part"
    );
    assert_eq!(part_bytes(100, 4, PARTS_PER_THREAD), 4096);
    // Back to back, one part per thread.
    assert_eq!(part_bytes(1 << 20, 4, 1), 256 << 10);
    // Any copy fits a job's part count.
    let huge = part_bytes(1 << 40, usize::MAX, usize::MAX);
    assert!((1usize << 40).div_ceil(huge) <= MAX_PARTS);
    for len in [1usize, 4095, 65_537, 300_001, 4_915_200] {
        let per = part_bytes(len, 3, PARTS_PER_THREAD);
        assert_eq!(per % PART_ALIGN, 0);
        assert!(len.div_ceil(per) <= 3 * PARTS_PER_THREAD, "{len}: {per}");
    }
}

#[test]
fn places_nobody_took_are_taken_back() {
    // A pool whose one worker is never started: a place can only be taken back.
    let _one_at_a_time = serial();
    let pool = Pool::new(1, 1);
    pool.started.store(1, Ordering::Release);
    let src: Vec<u8> = (0..(1usize << 20)).map(|i| (i * 19) as u8).collect();
    for _ in 0..3 * MAX_JOBS {
        let mut dst = vec![0u8; src.len()];
        copy_slices(&pool, &mut dst, &src, false, 4, 1);
        assert_eq!(dst, src);
        assert_eq!(
            pool.pending.load(Ordering::SeqCst),
            0,
            "a place was left wanted"
        );
        assert!(pool.wanted.iter().all(|w| w.0.load(Ordering::SeqCst) == 0));
    }
    assert!(
        (0..MAX_JOBS).all(|j| pool.jobs[j].try_acquire()),
        "a job slot was left taken"
    );
}

#[test]
fn growing_a_started_pool_starts_no_more_threads_and_counts_them() {
    with_pool(3, |pool| {
        assert_eq!(pool.grow().unwrap(), 3);
        assert_eq!(pool.stats().threads_started, 3);
        // Each thread holds the pool: three, and this test's.
        assert_eq!(Arc::strong_count(pool), 4);
    });
}

#[test]
fn a_worker_counts_as_awake_while_it_helps() {
    with_pool(1, |pool| {
        eventually("the worker parks", || all_parked(pool));
        let stop = std::sync::atomic::AtomicBool::new(false);
        let seen = std::thread::scope(|s| {
            s.spawn(|| {
                let src: Vec<u8> = (0..(8usize << 20)).map(|i| (i * 23) as u8).collect();
                let mut dst = vec![0u8; src.len()];
                while !stop.load(Ordering::Relaxed) {
                    copy_slices(pool, &mut dst, &src, false, 2, 1);
                    assert!(dst == src);
                }
            });
            // Copies that each wake the worker: at some poll it is helping, and
            // counted awake, by the pool and by its statistics.
            let seen = within_5_s(|| pool.awake() == 1 && pool.stats().threads_awake == 1);
            // Stopped before any assertion, so that the copying thread ends.
            stop.store(true, Ordering::Relaxed);
            seen
        });
        assert!(seen, "a worker woken for copies never counted awake");
        eventually("the worker parks again", || all_parked(pool));
    });
}

#[test]
fn lingering_spins_for_its_time_and_takes_an_offer_at_once() {
    // No worker started: only this thread takes offers.
    let _one_at_a_time = serial();
    let pool = Pool::new(1, 1);
    let start = Instant::now();
    assert_eq!(pool.linger(), None, "nothing was offered");
    assert!(
        start.elapsed() >= LINGER,
        "gave up after {:?}, before its linger",
        start.elapsed()
    );
    assert_eq!(pool.spinning.load(Ordering::SeqCst), 0);
    // An offer made is taken, and no longer wanted. (Lingering again if this
    // thread was preempted past a whole linger before its first look.)
    pool.offer(5, 1);
    let took = (0..1000).find_map(|_| pool.linger());
    assert_eq!(took, Some(5));
    assert_eq!(pool.pending.load(Ordering::SeqCst), 0);
    assert_eq!(pool.wanted[5].0.load(Ordering::SeqCst), 0);
    assert_eq!(pool.spinning.load(Ordering::SeqCst), 0);
}

#[test]
fn a_helper_copies_every_part_left_and_lingers_only_after_a_copy_that_asks() {
    let _one_at_a_time = serial();
    let pool = Pool::new(1, 1);
    let me = WorkerStats::default();
    let src: Vec<u8> = (0..(256usize << 10) + 7).map(|i| (i * 29) as u8).collect();
    let per = part_bytes(src.len(), 2, PARTS_PER_THREAD);
    let parts = src.len().div_ceil(per);
    assert_eq!(parts, 8, "{per}-byte parts");
    for linger in [false, true] {
        let mut dst = vec![0u8; src.len()];
        let job = &pool.jobs[0];
        assert!(job.try_acquire());
        let desc = CopyDesc {
            dst: dst.as_mut_ptr(),
            src: src.as_ptr(),
            len: src.len(),
            per,
            streaming: false,
            linger,
        };
        // SAFETY: we own slot 0, and its last publication (if any) was waited for
        // below; `parts` (8) is at most `MAX_PARTS`. (For `help`'s copies: `dst` and
        // `src` hold `len` bytes, do not overlap, and are not touched until
        // `wait_done` returns.)
        unsafe { job.publish(desc, parts) };
        assert_eq!(pool.help(&me, 0), linger, "the copy's linger is {linger}");
        // Every part was the helper's (checked before the wait below, which would
        // wait for ever for a part nobody took); one arriving now finds none.
        assert_eq!(job.claimed(), parts, "the helper left parts");
        assert!(!pool.help(&me, 0));
        job.wait_done(parts);
        job.release();
        assert!(dst == src);
    }
    assert_eq!(me.parts.load(Ordering::Relaxed), 2 * parts as u64);
}

#[test]
fn the_pool_answers_with_its_latest_reading_of_idle_cores() {
    // The kernel's count moves with everything else on the machine, so the reading
    // is stored here, stamped an hour ahead: it is kept for `READ_EVERY` from its
    // stamp, so no new reading replaces it however long this thread is preempted.
    let _one_at_a_time = serial();
    let pool = Pool::new(1, 1);
    let ahead = pool.now_ns() + 3_600_000_000_000;
    pool.idle.store_reading(7, ahead);
    assert_eq!(pool.idle_cores(), 7);
    pool.idle.store_reading(3, ahead);
    assert_eq!(pool.idle_cores(), 3);
}
