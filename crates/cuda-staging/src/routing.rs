//! Which way a [`crate::StagingBuffer`] transfer moves, decided in one place,
//! [`decide`]: a pure function of the transfer, the buffer's configuration and
//! two answers it asks for only when it needs them (whether the host memory is
//! page-locked, how many pool helpers are free). It returns the whole plan before
//! anything moves: the route, and for a staged transfer its copy threads, the
//! pinned bytes it needs and how it is cut into chunks.
//!
//! `upload` / `download` ([`Host::Caller`]): a transfer below the lower bound
//! ([`crate::DEFAULT_STAGE_MIN_BYTES`]: uploads under 32 KiB, which the driver copies
//! inline as fast as a DMA from pinned memory) goes to the driver, without asking
//! about its memory. Otherwise page-locked memory (a [`crate::PinnedBuffer`], a
//! [`crate::HostRegistration`], another library's pinned memory) is DMA'd straight
//! from or into; pageable memory above the upper bound (none by default) goes to the
//! driver; the rest is staged. The 2-D calls ([`Host::Rows`]) always stage.
//!
//! A staged transfer that is paced (after a gap or within a frame's few, not in a
//! tight loop) and that the calling thread would copy alone goes to the driver
//! instead, where its own copy is as fast (every upload, downloads over 512 KiB;
//! [`crate::StagingConfig::driver_after_gap`], `tuning::driver_after_gap`). After a
//! long gap (`tuning::LONG_GAP`) uploads under 2 MiB wake no helper, so they go there
//! too: helpers parked that long run too late to pay.

use crate::config::StagingConfig;
use crate::direction::Direction;
use crate::plan::{Plan, PIPELINE_WINDOW_BYTES};
use crate::tuning::{helpers_to_wake, DOWNLOAD_THREADS};

/// Uploads copy in on at most this many threads. On the 16-core H200 host 16
/// threads left uploads within 4% of 8 (issue 5's runs), while downloads gained
/// (below), so uploads keep the setting their back-to-back numbers were measured
/// with.
pub(crate) const UPLOAD_MAX_THREADS: usize = 8;

/// One transfer, as routing sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Transfer {
    /// The bytes it moves.
    pub(crate) bytes: usize,
    pub(crate) direction: Direction,
    pub(crate) host: Host,
    /// It comes back to back with the buffer's previous transfers
    /// (`Burst::back_to_back`): the helpers are treated as awake.
    pub(crate) back_to_back: bool,
    /// It is paced: after a gap or within a frame's few (`Burst::paced`).
    pub(crate) paced: bool,
    /// It follows the buffer's previous transfer after a long gap
    /// (`Burst::long_gap`): parked helpers are slow to run.
    pub(crate) long_gap: bool,
    /// Bytes the buffer has pinned before it, a reservation not yet pinned included.
    pub(crate) pinned: usize,
}

/// A transfer's host side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Host {
    /// `upload` / `download`: the caller's memory, page-locked or not; the
    /// configuration's bounds apply, and the transfer is pipelined through at most
    /// [`PIPELINE_WINDOW_BYTES`] of pinned memory.
    Caller,
    /// The 2-D calls: rows, always staged (unless paced), in one piece; padded rows
    /// are copied row by row on the calling thread.
    Rows {
        /// The rows lie back to back in the caller's memory (one copy).
        contiguous: bool,
    },
}

/// How a transfer's host copy runs: on up to `threads` threads, the caller
/// included, `helpers` of them pool helpers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CopyShape {
    pub(crate) threads: usize,
    pub(crate) helpers: usize,
    /// As in a tight loop: the helpers are awake (back to back).
    pub(crate) hot: bool,
    /// The copy takes helpers from the pool (it wanted some and a pool exists);
    /// `helpers` may still be 0 when none is free.
    pub(crate) pooled: bool,
}

impl CopyShape {
    /// The calling thread alone.
    pub(crate) const SOLO: CopyShape = CopyShape {
        threads: 1,
        helpers: 0,
        hot: false,
        pooled: false,
    };
}

/// What [`decide`] chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The driver's own copy.
    Driver,
    /// DMA straight from or into the caller's page-locked memory.
    PageLocked,
    /// Through the pinned buffer.
    Staged(Staged),
}

/// A staged transfer's plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Staged {
    pub(crate) copy: CopyShape,
    /// Pinned bytes it needs: the whole transfer, or the pipeline window for a
    /// larger [`Host::Caller`] one than the buffer holds.
    pub(crate) window: usize,
    /// How a [`Host::Caller`] transfer is cut; `None` for rows (one piece).
    pub(crate) plan: Option<Plan>,
}

/// The route and plan of transfer `t` of a buffer configured by `config`; see the
/// module docs. `page_locked` (whether the caller's host memory is) is asked only
/// for a [`Host::Caller`] transfer at or above the lower bound; `free_helpers` (how
/// many pool helpers could take part now, `None` without a pool) only when the copy
/// would wake some.
pub(crate) fn decide(
    config: &StagingConfig,
    t: &Transfer,
    page_locked: impl FnOnce() -> bool,
    free_helpers: impl FnOnce() -> Option<usize>,
) -> Decision {
    if t.host == Host::Caller {
        if t.bytes < config.stage_min_bytes.get(t.direction) {
            return Decision::Driver;
        }
        if page_locked() {
            return Decision::PageLocked;
        }
        if !config.stages(t.direction, t.bytes) {
            return Decision::Driver;
        }
    }
    let copy = if t.host == (Host::Rows { contiguous: false }) {
        CopyShape::SOLO
    } else {
        let threads = match t.direction {
            Direction::HostToDevice => config.copy_threads.min(UPLOAD_MAX_THREADS),
            Direction::DeviceToHost => config.copy_threads,
        };
        let gaps = (t.back_to_back, t.long_gap);
        copy_shape(threads, t.bytes, t.direction, gaps, free_helpers)
    };
    if config.driver_after_gap
        && t.paced
        && copy.helpers == 0
        && crate::tuning::driver_after_gap(t.bytes, t.direction)
    {
        return Decision::Driver;
    }
    let (window, plan) = match t.host {
        Host::Caller => {
            let window = if t.bytes <= t.pinned.max(PIPELINE_WINDOW_BYTES) {
                t.bytes
            } else {
                PIPELINE_WINDOW_BYTES
            };
            // No helper: the caller copies alone, mid-size uploads in two halves
            // (see `Plan`).
            let plan = Plan::new(
                t.bytes,
                t.pinned.max(window),
                config.pipeline_chunk_bytes,
                t.direction,
                copy.helpers == 0,
            );
            (window, Some(plan))
        }
        Host::Rows { .. } => (t.bytes, None),
    };
    Decision::Staged(Staged { copy, window, plan })
}

/// The threads of a host copy of `bytes` moving `direction` when up to `threads`
/// may take part (the caller included), `hot` as in a tight loop and `long_gap`
/// after a long gap (`tuning::LONG_GAP`): downloads on at
/// most `tuning::DOWNLOAD_THREADS`; as many pool helpers as
/// `tuning::helpers_to_wake` gives (none for a small copy after a gap), no more
/// than are free (`free_helpers`, asked only then; `None` without a pool).
pub(crate) fn copy_shape(
    threads: usize,
    bytes: usize,
    direction: Direction,
    (hot, long_gap): (bool, bool),
    free_helpers: impl FnOnce() -> Option<usize>,
) -> CopyShape {
    let threads = match direction {
        Direction::HostToDevice => threads,
        Direction::DeviceToHost => threads.min(DOWNLOAD_THREADS),
    }
    .max(1);
    let wanted = helpers_to_wake(bytes, threads, direction, hot, long_gap);
    let free = if wanted == 0 { None } else { free_helpers() };
    match free {
        None => CopyShape {
            threads,
            ..CopyShape::SOLO
        },
        Some(free) => CopyShape {
            threads,
            helpers: wanted.min(free),
            hot,
            pooled: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::direction::PerDirection;

    /// Fixed answers, each counting how often it was asked.
    struct Answers {
        page_locked: bool,
        free: Option<usize>,
        asked_lock: Cell<u32>,
        asked_free: Cell<u32>,
    }

    impl Answers {
        fn decide(&self, config: &StagingConfig, t: &Transfer) -> Decision {
            let lock = || {
                self.asked_lock.set(self.asked_lock.get() + 1);
                self.page_locked
            };
            let free = || {
                self.asked_free.set(self.asked_free.get() + 1);
                self.free
            };
            decide(config, t, lock, free)
        }

        fn asked(&self) -> (u32, u32) {
            (self.asked_lock.get(), self.asked_free.get())
        }
    }

    fn answers(page_locked: bool, free: Option<usize>) -> Answers {
        Answers {
            page_locked,
            free,
            asked_lock: Cell::new(0),
            asked_free: Cell::new(0),
        }
    }

    const UP: Direction = Direction::HostToDevice;
    const DOWN: Direction = Direction::DeviceToHost;
    const FRAME: usize = 4_915_200;

    fn caller(bytes: usize, direction: Direction) -> Transfer {
        Transfer {
            bytes,
            direction,
            host: Host::Caller,
            back_to_back: false,
            paced: false,
            long_gap: false,
            pinned: 0,
        }
    }

    /// How a transfer moves, as the table names it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Route {
        Driver,
        PageLocked,
        Staged,
    }

    /// A staged decision's copy shape and chunk count (0 for rows), or the route.
    fn summary(d: Decision) -> (Route, usize, usize, usize) {
        match d {
            Decision::Staged(s) => (
                Route::Staged,
                s.copy.threads,
                s.copy.helpers,
                s.plan.map_or(0, |p| p.chunks),
            ),
            Decision::Driver => (Route::Driver, 0, 0, 0),
            Decision::PageLocked => (Route::PageLocked, 0, 0, 0),
        }
    }

    /// The table: one row per case, with the configuration it runs under (default
    /// unless said), the transfer, the answers, and the decision.
    #[test]
    fn the_routing_table() {
        let d = StagingConfig {
            copy_threads: 4,
            ..StagingConfig::default()
        };
        let seed = StagingConfig {
            stage_min_bytes: PerDirection::both(0),
            stage_max_bytes: PerDirection::both(512 << 10),
            ..d
        };
        let no_gap_rule = StagingConfig {
            driver_after_gap: false,
            ..d
        };
        let one_thread = StagingConfig {
            copy_threads: 1,
            ..d
        };
        let sixteen = StagingConfig {
            copy_threads: 16,
            ..d
        };
        let paced = |t: Transfer| Transfer { paced: true, ..t };
        let long_gap = |t: Transfer| Transfer {
            paced: true,
            long_gap: true,
            ..t
        };
        let hot = |t: Transfer| Transfer {
            back_to_back: true,
            ..t
        };
        let rows = |t: Transfer, contiguous| Transfer {
            host: Host::Rows { contiguous },
            ..t
        };
        let s = Route::Staged;
        /// Name, configuration, transfer, page-locked, free helpers; then the
        /// route, copy threads, helpers and chunks.
        type Row = (
            &'static str,
            StagingConfig,
            Transfer,
            bool,
            Option<usize>,
            (Route, usize, usize, usize),
        );
        #[rustfmt::skip]
        let table: &[Row] = &[
            // Bounds: small uploads to the driver, downloads staged at any size.
            ("upload under 32 KiB", d, caller((32 << 10) - 1, UP), false, Some(3), (Route::Driver, 0, 0, 0)),
            ("upload of 32 KiB", d, caller(32 << 10, UP), false, Some(3), (s, 4, 0, 1)),
            ("download of 1 byte", d, caller(1, DOWN), false, Some(3), (s, 3, 0, 1)),
            ("seed bound: 512 KiB staged", seed, caller(512 << 10, UP), false, Some(3), (s, 4, 1, 1)),
            ("seed bound: past it, the driver", seed, caller((512 << 10) + 1, UP), false, Some(3), (Route::Driver, 0, 0, 0)),
            // Page-locked memory is DMA'd directly, past the upper bound too.
            ("page-locked upload", d, caller(FRAME, UP), true, Some(3), (Route::PageLocked, 0, 0, 0)),
            ("page-locked past the seed bound", seed, caller(16 << 20, DOWN), true, Some(3), (Route::PageLocked, 0, 0, 0)),
            // Not paced: staged, helpers as many as the size wakes and are free.
            ("frame upload, helpers free", d, caller(FRAME, UP), false, Some(3), (s, 4, 3, 4)),
            ("frame upload, one free", d, caller(FRAME, UP), false, Some(1), (s, 4, 1, 4)),
            ("frame upload, none free", d, caller(FRAME, UP), false, Some(0), (s, 4, 0, 4)),
            ("frame upload, no pool", d, caller(FRAME, UP), false, None, (s, 4, 0, 4)),
            ("frame download after a gap wakes nobody", d, caller(FRAME, DOWN), false, Some(3), (s, 3, 0, 8)),
            ("frame download back to back", d, hot(caller(FRAME, DOWN)), false, Some(3), (s, 3, 2, 8)),
            ("mid upload, caller alone: two halves", d, caller(150_528, UP), false, Some(3), (s, 4, 0, 2)),
            ("mid upload back to back: one piece", d, hot(caller(150_528, UP)), false, Some(3), (s, 4, 1, 1)),
            // Paced, the caller alone: to the driver (uploads; downloads over 512 KiB).
            ("paced mid upload", d, paced(caller(150_528, UP)), false, Some(3), (Route::Driver, 0, 0, 0)),
            ("paced frame upload, none free", d, paced(caller(FRAME, UP)), false, Some(0), (Route::Driver, 0, 0, 0)),
            ("paced frame upload, helpers free", d, paced(caller(FRAME, UP)), false, Some(3), (s, 4, 3, 4)),
            // After a long gap, uploads under 2 MiB wake nobody: to the driver.
            ("long gap, 1 MiB upload", d, long_gap(caller(1 << 20, UP)), false, Some(3), (Route::Driver, 0, 0, 0)),
            ("long gap, 2 MiB upload", d, long_gap(caller(2 << 20, UP)), false, Some(3), (s, 4, 3, 4)),
            ("long gap, frame upload", d, long_gap(caller(FRAME, UP)), false, Some(3), (s, 4, 3, 4)),
            ("long gap, rows of 1 MiB", d, long_gap(rows(caller(1 << 20, UP), true)), false, Some(3), (Route::Driver, 0, 0, 0)),
            ("long gap, rule off: staged alone", no_gap_rule, long_gap(caller(1 << 20, UP)), false, Some(3), (s, 4, 0, 2)),
            ("paced 1 MiB upload after a short gap", d, paced(caller(1 << 20, UP)), false, Some(3), (s, 4, 2, 1)),
            ("paced 512 KiB download stays", d, paced(caller(512 << 10, DOWN)), false, Some(3), (s, 3, 0, 1)),
            ("paced frame download", d, paced(caller(FRAME, DOWN)), false, Some(3), (Route::Driver, 0, 0, 0)),
            ("paced, rule off", no_gap_rule, paced(caller(FRAME, DOWN)), false, Some(3), (s, 3, 0, 8)),
            ("paced, one copy thread", one_thread, paced(caller(FRAME, UP)), false, Some(3), (Route::Driver, 0, 0, 0)),
            ("one copy thread, not paced", one_thread, caller(FRAME, UP), false, Some(3), (s, 1, 0, 4)),
            // Uploads copy in on at most 8 threads, downloads out on at most 3.
            ("16 copy threads: an upload on 8", sixteen, caller(FRAME, UP), false, Some(15), (s, 8, 7, 4)),
            ("16 copy threads: a download on 3", sixteen, hot(caller(FRAME, DOWN)), false, Some(15), (s, 3, 2, 8)),
            // Rows: always staged (unless paced), in one piece; padded rows alone.
            ("rows, small upload", d, rows(caller(4096, UP), true), false, Some(3), (s, 4, 0, 0)),
            ("rows, frame upload", d, rows(caller(FRAME, UP), true), false, Some(3), (s, 4, 3, 0)),
            ("padded rows, frame upload", d, rows(caller(FRAME, UP), false), false, Some(3), (s, 1, 0, 0)),
            ("padded rows, paced", d, paced(rows(caller(FRAME, UP), false)), false, Some(3), (Route::Driver, 0, 0, 0)),
            ("rows past the seed bound", seed, rows(caller(FRAME, DOWN), true), false, Some(3), (s, 3, 0, 0)),
        ];
        let wrong: Vec<String> = table
            .iter()
            .filter_map(|(name, config, t, locked, free, want)| {
                let got = summary(answers(*locked, *free).decide(config, t));
                (got != *want).then(|| format!("{name}: got {got:?}, want {want:?}"))
            })
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn nothing_is_asked_that_the_decision_does_not_need() {
        let d = StagingConfig::default();
        // Below the lower bound: neither question.
        let a = answers(true, Some(3));
        assert_eq!(a.decide(&d, &caller(4096, UP)), Decision::Driver);
        assert_eq!(a.asked(), (0, 0));
        // Page-locked: no helper question.
        let a = answers(true, Some(3));
        assert_eq!(a.decide(&d, &caller(FRAME, UP)), Decision::PageLocked);
        assert_eq!(a.asked(), (1, 0));
        // A copy that wakes nobody (a download after a gap): no helper question.
        let a = answers(false, Some(3));
        a.decide(&d, &caller(FRAME, DOWN));
        assert_eq!(a.asked(), (1, 0));
        // Rows: never the page-lock question.
        let a = answers(true, Some(3));
        let t = Transfer {
            host: Host::Rows { contiguous: true },
            ..caller(FRAME, UP)
        };
        a.decide(&d, &t);
        assert_eq!(a.asked().0, 0);
    }

    #[test]
    fn a_large_transfer_plans_through_the_window_and_a_held_one_through_the_buffer() {
        let d = StagingConfig::default();
        let staged = |t: &Transfer| match answers(false, None).decide(&d, t) {
            Decision::Staged(s) => s,
            other => panic!("{other:?}"),
        };
        let big = staged(&caller(64 << 20, UP));
        assert_eq!(big.window, PIPELINE_WINDOW_BYTES);
        let plan = big.plan.unwrap();
        assert!(
            plan.slots * plan.chunk_bytes <= PIPELINE_WINDOW_BYTES,
            "{plan:?}"
        );
        // A buffer already holding 64 MiB (or reserving it) takes it whole.
        let held = staged(&Transfer {
            pinned: 64 << 20,
            ..caller(64 << 20, UP)
        });
        assert_eq!(held.window, 64 << 20);
        // A chunk size set in the configuration is used as given.
        let set = StagingConfig {
            pipeline_chunk_bytes: 1 << 20,
            ..d
        };
        match answers(false, None).decide(&set, &caller(FRAME, DOWN)) {
            Decision::Staged(s) => assert_eq!(s.plan.unwrap().chunk_bytes, 1 << 20),
            other => panic!("{other:?}"),
        }
    }
}
