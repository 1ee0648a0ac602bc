//! The pool's tests: every byte lands, wake-ups happen when they should.

use super::*;

/// Pool tests run one at a time: each starts spinning threads, and the timing
/// test below needs the cores it asks for (CI machines have two).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// [`Pool::copy`] of `src` into `dst` (equal lengths), through safe slices.
fn copy_slices(pool: &Pool, dst: &mut [u8], src: &[u8], kind: CopyKind, parts: usize, wake: bool) {
    assert_eq!(dst.len(), src.len());
    // SAFETY: both slices hold `src.len()` bytes; `&mut` and `&` cannot overlap, and
    // the borrows last until the pool returns.
    unsafe { pool.copy(dst.as_mut_ptr(), src.as_ptr(), src.len(), kind, parts, wake) }
}

fn with_pool(workers: usize, f: impl FnOnce(&Pool)) {
    let _one_at_a_time = serial();
    let (pool, handles) = Pool::start(workers).unwrap();
    f(&pool);
    pool.stop(handles);
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
            1 << 20,
            (1 << 20) + 13,
        ] {
            for kind in [CopyKind::Streaming, CopyKind::Plain, CopyKind::OutOfPinned] {
                let src: Vec<u8> = (0..len + 3).map(|i| (i * 7 + len) as u8).collect();
                let mut dst = vec![0xAAu8; len + 5];
                copy_slices(pool, &mut dst[1..1 + len], &src[3..3 + len], kind, 4, false);
                assert_eq!(&dst[1..1 + len], &src[3..3 + len], "len {len} {kind:?}");
                assert_eq!(dst[0], 0xAA);
                assert_eq!(dst[1 + len], 0xAA);
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
                std::thread::sleep(SPIN * 3); // let the workers park
            }
            let len = [48usize << 10, 1 << 20, 300_001][round % 3];
            let mut dst = vec![0u8; len];
            copy_slices(
                pool,
                &mut dst,
                &src[..len],
                [CopyKind::Streaming, CopyKind::OutOfPinned][round % 2],
                3,
                round % 4 == 1,
            );
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
                        copy_slices(
                            pool,
                            &mut dst,
                            &src,
                            [CopyKind::Plain, CopyKind::Streaming, CopyKind::OutOfPinned]
                                [round % 3],
                            4,
                            round % 3 == 0,
                        );
                        assert_eq!(dst, src, "thread {t} round {round}");
                    }
                });
            }
        });
    });
}

/// Polls `f` for up to two seconds.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_micros(100));
    }
}

#[test]
fn parked_workers_wake_for_back_to_back_copies_and_not_for_small_ones() {
    with_pool(3, |pool| {
        let wakes = || {
            pool.workers
                .iter()
                .map(|w| w.wakes.load(Ordering::Relaxed))
                .sum::<u64>()
        };
        let src: Vec<u8> = (0..(64usize << 10)).map(|i| (i * 5) as u8).collect();
        eventually("all parked", || pool.awake() == 0);
        let before = wakes();
        let mut dst = vec![0u8; src.len()];
        copy_slices(pool, &mut dst, &src, CopyKind::Plain, 4, false);
        assert_eq!(dst, src);
        std::thread::sleep(SPIN * 3);
        assert_eq!(wakes(), before, "a 64 KiB copy woke a parked worker");
        let mut dst = vec![0u8; src.len()];
        copy_slices(pool, &mut dst, &src, CopyKind::Plain, 4, true);
        assert_eq!(dst, src);
        eventually("a back-to-back copy wakes a worker", || wakes() > before);
        // A worker unparked for the copy may not have run yet when another one
        // parks again (its `awake` count comes back only when it runs), so wait
        // for both: every worker parked, and none of them holding mail. A worker
        // parked on an offer it never took would keep this from happening.
        eventually("every worker parked again with an empty mailbox", || {
            pool.awake() == 0 && pool.workers.iter().all(|w| w.mailbox.take().is_none())
        });
    });
}

#[test]
fn pool_size_stays_below_the_cores() {
    let n = pool_threads();
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    assert!(n <= 15, "{n}");
    if cores == 1 {
        assert_eq!(n, 0, "no pool on one core");
    } else {
        assert_eq!(
            n + 1,
            cores.min(16),
            "{n} workers plus the scheduler fill the cores"
        );
    }
}

/// [`Pool::copy_after`] of `src` into `dst` (equal lengths), `landed` first.
fn copy_after_slices<E>(
    pool: &Pool,
    dst: &mut [u8],
    src: *const u8,
    len: usize,
    landed: impl FnOnce() -> Result<(), E>,
) -> Result<(), E> {
    assert_eq!(dst.len(), len);
    // SAFETY: `dst` holds `len` bytes and is borrowed until the pool returns; the
    // callers' `src` is readable for `len` bytes once `landed` returned and written
    // only inside `landed`.
    unsafe { pool.copy_after(dst.as_mut_ptr(), src, len, CopyKind::Plain, 4, true, landed) }
}

#[test]
fn a_gated_copy_reads_its_source_only_after_landed_returns() {
    with_pool(3, |pool| {
        // Waits shorter than the helpers' spin at the gate, and longer (then they
        // hand their parts back and the publisher copies them).
        for (round, wait_us) in [50u64, 1000, 0, 50, 1000, 0].into_iter().enumerate() {
            let len = [64usize << 10, 300_001, 1 << 20][round % 3];
            // The source is written only inside `landed`, as a DMA fills the window
            // before the wait returns: a helper that read it earlier would copy zeros.
            let mut src = vec![0u8; len];
            let src_ptr = src.as_mut_ptr();
            let mut dst = vec![0xAAu8; len];
            let r: Result<(), ()> = copy_after_slices(pool, &mut dst, src_ptr, len, || {
                if wait_us > 0 {
                    // A helper took a part before the source landed, so the
                    // check below means something.
                    eventually("a helper claimed a part before landed returned", || {
                        pool.jobs.iter().any(|j| j.claimed() > 0)
                    });
                    std::thread::sleep(Duration::from_micros(wait_us));
                }
                // SAFETY: `src` is alive and no one reads it before this returns.
                let s = unsafe { std::slice::from_raw_parts_mut(src_ptr, len) };
                for (i, b) in s.iter_mut().enumerate() {
                    *b = (i * 7 + round) as u8 | 1;
                }
                Ok(())
            });
            assert_eq!(r, Ok(()));
            assert!(
                dst.iter()
                    .enumerate()
                    .all(|(i, &b)| b == (i * 7 + round) as u8 | 1),
                "round {round}, {len} B, landed after {wait_us} µs: a byte was copied \
                 before the source landed, or not at all"
            );
            drop(src);
        }
    });
}

#[test]
fn a_failed_or_panicking_wait_copies_nothing_and_frees_the_slot() {
    with_pool(3, |pool| {
        let len = 256usize << 10;
        let src = vec![0x55u8; len];
        let mut dst = vec![0xAAu8; len];
        let r = copy_after_slices(pool, &mut dst, src.as_ptr(), len, || Err("no DMA"));
        assert_eq!(r, Err("no DMA"));
        assert!(dst.iter().all(|&b| b == 0xAA), "a cancelled copy wrote");

        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = copy_after_slices::<()>(pool, &mut dst, src.as_ptr(), len, || {
                panic!("the wait panicked")
            });
        }));
        assert!(panicked.is_err());
        assert!(
            dst.iter().all(|&b| b == 0xAA),
            "a copy whose wait panicked wrote"
        );

        // Every slot came back: as many gated copies as there are slots, and more,
        // still all go through the pool and land.
        for _ in 0..2 * MAX_JOBS {
            let mut out = vec![0u8; len];
            let r: Result<(), ()> = copy_after_slices(pool, &mut out, src.as_ptr(), len, || Ok(()));
            assert_eq!(r, Ok(()));
            assert_eq!(out, src);
        }
        assert!(
            (0..MAX_JOBS).all(|j| pool.jobs[j].try_acquire()),
            "a job slot was left taken"
        );
    });
}
