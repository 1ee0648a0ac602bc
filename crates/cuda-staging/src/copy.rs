//! [`Copier`]: a transfer's host copy, split over the calling thread and pool
//! helpers ([`crate::pool`]); how its bytes are written is [`crate::stores`].

use crate::direction::Direction;
use crate::pool::{Pool, Share};
use crate::routing::{self, CopyShape};
use crate::tuning::PARALLEL_MIN_BYTES;

/// Each extra copy thread gets at least this much.
const PARALLEL_PART_MIN_BYTES: usize = 16 << 10;

/// The threads a host copy of `len` bytes is split over when up to `threads` may
/// take part (the caller included): one below [`PARALLEL_MIN_BYTES`], else one per
/// [`PARALLEL_PART_MIN_BYTES`], at most `threads`.
pub(crate) fn copy_parts(len: usize, threads: usize) -> usize {
    if len < PARALLEL_MIN_BYTES {
        1
    } else {
        (len / PARALLEL_PART_MIN_BYTES).clamp(1, threads.max(1))
    }
}

/// How one transfer's host copies run: on the calling thread, or split with the
/// process-wide pool over up to `threads` threads (the caller included), `helpers`
/// of them pool helpers woken for it (`tuning::helpers_to_wake`).
#[derive(Clone, Copy)]
pub(crate) struct Copier<'a> {
    pool: Option<&'a Pool>,
    threads: usize,
    /// Pool helpers each copy wakes.
    helpers: usize,
    /// Transfers come back to back: the helpers are awake.
    hot: bool,
    /// This is the transfer's last copy ([`Copier::last`]).
    last: bool,
}

impl Copier<'static> {
    /// Copies on the calling thread alone.
    pub(crate) fn solo() -> Copier<'static> {
        Copier {
            pool: None,
            threads: 1,
            helpers: 0,
            hot: false,
            last: false,
        }
    }

    /// For a transfer whose largest host copy is `copy_bytes`, moving `direction`,
    /// on up to `threads` threads (the caller included), `hot` when transfers come
    /// back to back: as
    /// [`routing::copy_shape`] says, with the pool's free helpers.
    pub(crate) fn for_transfer(
        threads: usize,
        copy_bytes: usize,
        direction: Direction,
        hot: bool,
    ) -> Copier<'static> {
        Copier::shaped(routing::copy_shape(
            threads,
            copy_bytes,
            direction,
            (hot, false),
            free_helpers,
        ))
    }

    /// A copier running as `shape` says, over the process-wide pool when it takes
    /// helpers from it.
    pub(crate) fn shaped(shape: CopyShape) -> Copier<'static> {
        // `helpers` and `hot` are read only where a copy is split over the pool.
        Copier {
            pool: shape.pooled.then(crate::pool::global).flatten(),
            threads: shape.threads,
            helpers: shape.helpers,
            hot: shape.hot,
            last: false,
        }
    }
}

/// How many pool helpers are free to take part in a copy now: idle cores plus the
/// pool's spinning helpers, which count as running but are free to help. `None`
/// without a pool. Starts the pool at the first call that needs it.
pub(crate) fn free_helpers() -> Option<usize> {
    crate::pool::global().map(|pool| pool.idle_cores() + pool.awake())
}

impl<'a> Copier<'a> {
    /// A copier over `pool` with up to `threads` threads, `helpers` of them pool
    /// helpers (for tests: what `for_transfer` would pick depends on the machine).
    #[cfg(test)]
    pub(crate) fn over(pool: &'a Pool, threads: usize, helpers: usize) -> Copier<'a> {
        Copier {
            pool: Some(pool),
            threads,
            helpers,
            hot: false,
            last: false,
        }
    }

    /// The same, for the transfer's last copy when `last` (helpers wait again after
    /// it unless transfers come back to back).
    pub(crate) fn last(self, last: bool) -> Copier<'a> {
        Copier { last, ..self }
    }

    /// Copies `src` into `dst` (equal lengths; a shorter one bounds the copy), with
    /// streaming stores when `streaming`.
    pub(crate) fn copy(&self, dst: &mut [u8], src: &[u8], streaming: bool) {
        self.run(dst, src, streaming);
    }

    /// Copies `src`, pinned memory a DMA just filled, into `dst` (equal lengths; a
    /// shorter one bounds the copy).
    pub(crate) fn copy_out(&self, dst: &mut [u8], src: &[u8]) {
        self.run(dst, src, false);
    }

    /// The pool and the threads (the caller included) a copy of `len` bytes is split
    /// over, or `None` when the calling thread copies it alone.
    fn split(&self, len: usize) -> Option<(&'a Pool, usize)> {
        let threads = copy_parts(len, self.threads);
        match self.pool {
            Some(pool) if threads > 1 && self.helpers > 0 => Some((pool, threads)),
            _ => None,
        }
    }

    /// The threads a copy of `len` bytes runs on, the caller included: 1, or the
    /// caller and the pool helpers it enlists ([`Copier::copy`] and the others split
    /// it this way). For the `tracing` feature's spans.
    #[cfg_attr(not(any(feature = "tracing", test)), allow(dead_code))]
    pub(crate) fn threads_for(&self, len: usize) -> usize {
        self.split(len)
            .map_or(1, |(_, threads)| 1 + self.enlisted(threads))
    }

    /// Pool helpers a copy split over `threads` threads enlists.
    fn enlisted(&self, threads: usize) -> usize {
        self.helpers.min(threads - 1)
    }

    /// How a copy split over `threads` threads is shared out.
    fn publication(&self, threads: usize) -> Share {
        Share {
            threads,
            helpers: self.enlisted(threads),
            // Helpers linger for the next copy of this transfer, and after its last
            // one only when the next transfer is coming right away.
            linger: !self.last || self.hot,
            hot: self.hot,
        }
    }

    /// Copies (with streaming stores when `streaming`), split over the pool when the
    /// copy is large enough and helpers are allowed, else on the calling thread.
    fn run(&self, dst: &mut [u8], src: &[u8], streaming: bool) {
        let len = dst.len().min(src.len());
        match self.split(len) {
            Some((pool, threads)) => {
                // SAFETY: both slices hold `len` bytes; `&mut` and `&` cannot overlap;
                // the borrows last until the pool returns, every part done.
                unsafe {
                    pool.copy(
                        dst.as_mut_ptr(),
                        src.as_ptr(),
                        len,
                        streaming,
                        self.publication(threads),
                    )
                }
            }
            // SAFETY: as above.
            _ => unsafe { crate::stores::copy(dst.as_mut_ptr(), src.as_ptr(), len, streaming) },
        }
    }
}

#[cfg(test)]
mod tests;
