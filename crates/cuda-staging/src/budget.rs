//! The process's pinned-memory budget: how many bytes this crate holds page-locked
//! ([`pinned_bytes`]), and a limit on it ([`set_pinned_limit`],
//! [`PINNED_LIMIT_ENV`]).
//!
//! Page-locked memory is a scarce, process-wide resource: it cannot be swapped, and
//! every buffer and ring of every pipeline in the process draws on the same RAM. All
//! the pinned memory this crate allocates (a [`crate::StagingBuffer`]'s buffer, which
//! also holds its batch regions and pipeline window, and every slot of every
//! [`crate::StagingRing`]) is a [`BudgetedPinned`]: a [`PinnedBuffer`] whose bytes were
//! reserved against the budget before the driver was asked for them, and are given
//! back when it is freed. The accounting is one counter and one limit, both atomics;
//! a reservation is one compare-exchange loop, so grows in several threads at once
//! can never take the total past the limit together. A transfer that needs no grow
//! never touches them.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use cuda_core::{Context, Error, PinnedBuffer, Result};

/// The environment variable that sets a pinned-memory limit when the budget is first
/// used (the first pinned allocation of this crate, or the first call of
/// [`pinned_bytes`], [`pinned_limit`] or [`set_pinned_limit`]): a whole number of
/// bytes, such as `4294967296` for 4 GiB (surrounding spaces are ignored). Anything
/// else (a suffix such as `4G`, a negative or fractional number, an empty value), or
/// unset, leaves the default, no limit, as [`crate::COPY_THREADS_ENV`] does with a
/// malformed value; [`pinned_limit`] says which limit is in force.
/// [`set_pinned_limit`] overrides it.
pub const PINNED_LIMIT_ENV: &str = "CUDA_STAGING_PINNED_LIMIT";

/// No limit.
const UNLIMITED: usize = usize::MAX;

/// Bytes held against a limit. The process has one ([`global`]); tests make their
/// own.
#[derive(Debug)]
pub(crate) struct Budget {
    held: AtomicUsize,
    /// [`UNLIMITED`] for none.
    limit: AtomicUsize,
}

impl Budget {
    pub(crate) const fn new(limit: Option<usize>) -> Budget {
        Budget {
            held: AtomicUsize::new(0),
            limit: AtomicUsize::new(match limit {
                Some(l) => l,
                None => UNLIMITED,
            }),
        }
    }

    /// Bytes held.
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// The limit, if any.
    pub(crate) fn limit(&self) -> Option<usize> {
        finite(self.limit.load(Ordering::Acquire))
    }

    /// Sets the limit (`None`: none); returns the one it replaces.
    pub(crate) fn set_limit(&self, limit: Option<usize>) -> Option<usize> {
        finite(
            self.limit
                .swap(limit.unwrap_or(UNLIMITED), Ordering::AcqRel),
        )
    }

    /// Reserves `preferred` bytes, or, when that would pass the limit, `least`
    /// (`least <= preferred`), atomically: concurrent reservations never take the
    /// total past the limit together. [`Error::PinnedLimitExceeded`] naming `op`, the
    /// limit, the bytes held and `least` when neither fits; nothing is reserved then.
    pub(crate) fn reserve(
        &self,
        op: &'static str,
        least: usize,
        preferred: usize,
    ) -> Result<Reservation<'_>> {
        let least = least.min(preferred);
        let mut held = self.held.load(Ordering::Acquire);
        loop {
            let limit = self.limit.load(Ordering::Acquire);
            let bytes = grant(op, (limit, held), least, preferred)?;
            // `bytes <= limit - held`: cannot overflow.
            match self.held.compare_exchange_weak(
                held,
                held + bytes,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return Ok(Reservation {
                        budget: self,
                        bytes,
                    })
                }
                Err(now) => held = now,
            }
        }
    }

    /// Whether `least` more bytes fit under the limit now, without reserving them:
    /// [`Error::PinnedLimitExceeded`] as [`Budget::reserve`] gives it when they do
    /// not. For refusing a grow before anything else is done (the reservation
    /// itself, made later, is what guarantees the limit).
    pub(crate) fn check(&self, op: &'static str, least: usize) -> Result<()> {
        let held = self.held();
        let limit = self.limit.load(Ordering::Acquire);
        grant(op, (limit, held), least, least).map(drop)
    }

    /// Gives `bytes` back. Never panics: a count that would go below zero (a bug
    /// here) stops at zero.
    fn release(&self, bytes: usize) {
        let _ = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| {
                Some(h.saturating_sub(bytes))
            });
    }
}

/// Bytes reserved against a [`Budget`], given back on drop.
#[derive(Debug)]
#[must_use = "the bytes are given back when the reservation is dropped"]
pub(crate) struct Reservation<'b> {
    budget: &'b Budget,
    bytes: usize,
}

impl Reservation<'_> {
    /// Bytes reserved.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.budget.release(self.bytes);
    }
}

/// `None` for [`UNLIMITED`], else `Some(limit)`.
fn finite(limit: usize) -> Option<usize> {
    (limit != UNLIMITED).then_some(limit)
}

/// The bytes a reservation of `preferred` (or at least `least`, `least <=
/// preferred`) gets with `held` bytes held under `limit`: `preferred` where it fits,
/// else `least`; [`Error::PinnedLimitExceeded`] naming `op`, the limit, the bytes
/// held and `least` when neither fits.
fn grant(
    op: &'static str,
    (limit, held): (usize, usize),
    least: usize,
    preferred: usize,
) -> Result<usize> {
    let room = limit.saturating_sub(held);
    if preferred <= room {
        Ok(preferred)
    } else if least <= room {
        Ok(least)
    } else {
        Err(Error::PinnedLimitExceeded {
            op,
            limit,
            held,
            requested: least,
        })
    }
}

static GLOBAL: OnceLock<Budget> = OnceLock::new();

/// The limit `value` of [`PINNED_LIMIT_ENV`] asks for; `None` unless it is a whole
/// number of bytes.
fn limit_from_env(value: Option<&str>) -> Option<usize> {
    value?.trim().parse::<usize>().ok()
}

/// The process's budget, made on first use with the limit [`PINNED_LIMIT_ENV`] sets.
fn global() -> &'static Budget {
    GLOBAL.get_or_init(|| {
        let env = std::env::var(PINNED_LIMIT_ENV).ok();
        Budget::new(limit_from_env(env.as_deref()))
    })
}

/// Bytes of page-locked memory this crate holds right now, across every
/// [`StagingBuffer`](crate::StagingBuffer) (its buffer, batch regions and pipeline
/// window) and every [`StagingRing`](crate::StagingRing) slot in the process.
/// [`PinnedBuffer`]s and [`crate::HostRegistration`]s you make yourself are not
/// counted.
///
/// While a buffer or ring slot grows, the old allocation is freed only once the new
/// one is pinned (so a failed grow leaves the old one usable), and both count until
/// then. Memory comes back when a buffer or ring is dropped or shrunk
/// ([`StagingBuffer::shrink_to_fit`](crate::StagingBuffer::shrink_to_fit),
/// [`StagingRing::shrink_to_fit`](crate::StagingRing::shrink_to_fit)), once the
/// copies queued on it are done.
///
/// ```
/// let before = cuda_staging::pinned_bytes();
/// let staging = cuda_staging::StagingBuffer::new(); // pins nothing yet
/// assert_eq!(cuda_staging::pinned_bytes(), before);
/// # drop(staging);
/// ```
pub fn pinned_bytes() -> usize {
    global().held()
}

/// The pinned-memory limit in force: `None` for none (the default), or the bytes
/// set by [`set_pinned_limit`] or [`PINNED_LIMIT_ENV`].
pub fn pinned_limit() -> Option<usize> {
    global().limit()
}

/// Caps the page-locked memory this crate holds ([`pinned_bytes`]) at `limit` bytes
/// (`None` lifts the cap); returns the limit it replaces. Overrides
/// [`PINNED_LIMIT_ENV`].
///
/// A grow that would pass the limit (a transfer larger than a buffer's or ring
/// slot's capacity, [`StagingBuffer::reserve`](crate::StagingBuffer::reserve),
/// [`StagingBuffer::with_capacity`](crate::StagingBuffer::with_capacity)) fails with
/// [`Error::PinnedLimitExceeded`], naming the limit, the bytes held and the bytes it
/// asked for, before the driver is asked to pin or copy anything (`reserve`, and a
/// ring slot's grow, before any driver call at all): nothing is pinned, nothing is
/// counted, the buffer keeps its old memory and stays usable at its old capacity,
/// and the transfer is not handed to the driver's pageable path instead. When the growth policy's size (1.5 times the
/// old capacity, rounded up to 64 KiB) would pass the limit but the transfer's own
/// size fits, that is pinned instead. A grow counts the old allocation too, which is
/// freed only once the new one is pinned.
///
/// Lowering the limit below [`pinned_bytes`] frees nothing: it refuses further
/// grows until enough memory comes back (drop or
/// [`shrink_to_fit`](crate::StagingBuffer::shrink_to_fit) buffers and rings).
///
/// ```
/// use cuda_staging::{pinned_bytes, pinned_limit, set_pinned_limit};
///
/// let old = set_pinned_limit(Some(pinned_bytes() + (256 << 20)));
/// assert_eq!(pinned_limit(), Some(pinned_bytes() + (256 << 20)));
/// set_pinned_limit(old); // back as it was
/// ```
pub fn set_pinned_limit(limit: Option<usize>) -> Option<usize> {
    global().set_limit(limit)
}

/// Whether a grow that pins at least `least` bytes can pass the process's limit now
/// (see [`Budget::check`]); no driver call.
pub(crate) fn check(op: &'static str, least: usize) -> Result<()> {
    global().check(op, least)
}

/// Page-locked memory counted against the process's budget: reserved before the
/// driver is asked for it, given back after it is freed.
#[derive(Debug)]
pub(crate) struct BudgetedPinned {
    // Fields drop in order: the memory is freed (after its queued copies) before
    // its bytes are given back, so `pinned_bytes` never shows less than is pinned.
    pinned: PinnedBuffer<u8>,
    _reservation: Reservation<'static>,
}

impl BudgetedPinned {
    /// Pins `preferred` bytes in `ctx`, or `least` when `preferred` would pass the
    /// limit; [`Error::PinnedLimitExceeded`], before the driver is asked, when neither
    /// fits. A failed pin gives the reservation back.
    pub(crate) fn alloc_in(
        op: &'static str,
        ctx: &Context,
        least: usize,
        preferred: usize,
    ) -> Result<BudgetedPinned> {
        let reservation = global().reserve(op, least, preferred)?;
        let pinned = PinnedBuffer::<u8>::alloc_in(ctx, reservation.bytes())?;
        Ok(BudgetedPinned {
            pinned,
            _reservation: reservation,
        })
    }
}

impl Deref for BudgetedPinned {
    type Target = PinnedBuffer<u8>;
    fn deref(&self) -> &PinnedBuffer<u8> {
        &self.pinned
    }
}

impl DerefMut for BudgetedPinned {
    fn deref_mut(&mut self) -> &mut PinnedBuffer<u8> {
        &mut self.pinned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_add_up_and_come_back_on_drop() {
        let b = Budget::new(None);
        assert_eq!(b.limit(), None);
        let r1 = b.reserve("t", 100, 100).unwrap();
        let r2 = b.reserve("t", 50, 4096).unwrap();
        assert_eq!((r1.bytes(), r2.bytes()), (100, 4096), "no limit: preferred");
        assert_eq!(b.held(), 4196);
        drop(r1);
        assert_eq!(b.held(), 4096);
        drop(r2);
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn a_reservation_past_the_limit_is_refused_with_the_numbers() {
        let b = Budget::new(Some(1000));
        let r = b.reserve("t", 600, 600).unwrap();
        let e = b.reserve("StagingBuffer grow", 401, 500).unwrap_err();
        assert_eq!(
            e,
            Error::PinnedLimitExceeded {
                op: "StagingBuffer grow",
                limit: 1000,
                held: 600,
                requested: 401,
            }
        );
        assert_eq!(b.held(), 600, "a refusal reserves nothing");
        // Exactly up to the limit is allowed; the preferred size when it fits, else
        // the least.
        let fits = b.reserve("t", 100, 400).unwrap();
        assert_eq!(fits.bytes(), 400);
        assert_eq!(b.held(), 1000);
        assert!(b.reserve("t", 1, 1).is_err(), "full");
        assert_eq!(
            b.check("t", 1),
            Err(Error::PinnedLimitExceeded {
                op: "t",
                limit: 1000,
                held: 1000,
                requested: 1,
            })
        );
        assert_eq!(b.check("t", 0), Ok(()));
        drop(fits);
        let least = b.reserve("t", 300, 500).unwrap();
        assert_eq!(least.bytes(), 300, "500 would pass 1000; 300 fits");
        drop((r, least));
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn the_limit_can_be_set_lowered_below_what_is_held_and_lifted() {
        let b = Budget::new(None);
        let r = b.reserve("t", 800, 800).unwrap();
        assert_eq!(b.set_limit(Some(500)), None);
        assert_eq!(b.limit(), Some(500));
        assert_eq!(b.held(), 800, "lowering the limit frees nothing");
        let e = b.reserve("t", 1, 1).unwrap_err();
        assert_eq!(
            e,
            Error::PinnedLimitExceeded {
                op: "t",
                limit: 500,
                held: 800,
                requested: 1,
            }
        );
        drop(r);
        assert_eq!(b.reserve("t", 500, 500).unwrap().bytes(), 500);
        assert_eq!(b.set_limit(None), Some(500));
        assert_eq!(b.reserve("t", 1 << 40, 1 << 40).unwrap().bytes(), 1 << 40);
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn huge_requests_are_refused_not_overflowed() {
        let b = Budget::new(Some(usize::MAX - 1));
        let r = b.reserve("t", 10, 10).unwrap();
        let e = b.reserve("t", usize::MAX, usize::MAX).unwrap_err();
        assert!(
            matches!(e, Error::PinnedLimitExceeded { held: 10, .. }),
            "{e:?}"
        );
        drop(r);
        // Releasing more than is held (never done here) stops at zero.
        b.release(5);
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn concurrent_reservations_never_pass_the_limit_together() {
        const THREADS: usize = 8;
        const ROUNDS: usize = 20_000;
        const LIMIT: usize = 10_000;
        let b = Budget::new(Some(LIMIT));
        let granted = AtomicUsize::new(0);
        let refused = AtomicUsize::new(0);
        let worst = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (b, granted, refused, worst) = (&b, &granted, &refused, &worst);
                s.spawn(move || {
                    let mut held = Vec::new();
                    for i in 0..ROUNDS {
                        // Sizes 1..=3000: a few of them may pass the limit together.
                        let size = 1 + (i * 7919 + t * 104_729) % 3000;
                        match b.reserve("t", size / 2 + 1, size) {
                            Ok(r) => {
                                granted.fetch_add(1, Ordering::Relaxed);
                                worst.fetch_max(b.held(), Ordering::Relaxed);
                                held.push(r);
                            }
                            Err(Error::PinnedLimitExceeded {
                                limit,
                                held: h,
                                requested,
                                ..
                            }) => {
                                assert_eq!(limit, LIMIT);
                                assert!(h + requested > LIMIT, "{h} + {requested}");
                                refused.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("unexpected {e:?}"),
                        }
                        // Hold up to six at a time, giving the oldest back: with
                        // six, each thread reaches the limit on its own (about
                        // 1,470 refusals of its 20,000), so the test tests it
                        // however the threads are scheduled. With three it did
                        // only when they overlapped, and failed on a loaded
                        // 2-core machine.
                        if held.len() > 6 {
                            drop(held.remove(0));
                        }
                    }
                });
            }
        });
        let worst = worst.into_inner();
        assert!(worst <= LIMIT, "{worst} bytes held at once, limit {LIMIT}");
        assert!(granted.into_inner() > 0);
        assert!(
            refused.into_inner() > 0,
            "the limit was never reached: the test did not test it"
        );
        assert_eq!(b.held(), 0, "every reservation came back");
    }

    #[test]
    fn the_environment_variable_takes_whole_numbers_of_bytes_only() {
        assert_eq!(limit_from_env(Some("4294967296")), Some(4 << 30));
        assert_eq!(limit_from_env(Some(" 0 ")), Some(0));
        assert_eq!(limit_from_env(Some("4G")), None);
        assert_eq!(limit_from_env(Some("-1")), None);
        assert_eq!(limit_from_env(Some("1.5")), None);
        assert_eq!(limit_from_env(Some("")), None);
        assert_eq!(limit_from_env(None), None);
    }
}
