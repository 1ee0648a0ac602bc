//! The pinned memory a staging buffer (or a ring slot) holds, and how it grows.

use cuda_core::{Context, Error, PinnedBuffer, Result};

use crate::budget::BudgetedPinned;
use crate::errors::internal;

/// What a refused grow of a staging buffer's pinned memory names.
pub(crate) const GROW_OP: &str = "StagingBuffer grow";

/// Capacity growth rounds up to this.
pub(crate) const GROW_GRANULE_BYTES: usize = 64 << 10;

/// The growth policy: at least `required`, at least 1.5x the old capacity (so sizes
/// creeping up by a few bytes do not re-pin each time), rounded up to 64 KiB. An
/// overflow names `op`.
fn grow_capacity(op: &'static str, old: usize, required: usize) -> Result<usize> {
    let overflow = || Error::SizeOverflow {
        op,
        n: required,
        elem_bytes: 1,
    };
    let target = required.max(old.saturating_add(old / 2));
    match target.checked_next_multiple_of(GROW_GRANULE_BYTES) {
        Some(c) => Ok(c),
        None => required
            .checked_next_multiple_of(GROW_GRANULE_BYTES)
            .ok_or_else(overflow),
    }
}

/// The least a grow to hold `required` bytes pins when the growth policy's size
/// (`preferred`) would pass the pinned-memory limit: `required` rounded up to
/// [`GROW_GRANULE_BYTES`], at most `preferred`.
fn least_capacity(required: usize, preferred: usize) -> usize {
    required
        .checked_next_multiple_of(GROW_GRANULE_BYTES)
        .unwrap_or(required)
        .clamp(required, preferred.max(required))
}

/// The one pinned allocation of a staging buffer or a ring slot, counted against the
/// process's pinned-memory budget (`crate::budget`).
#[derive(Debug, Default)]
pub(crate) struct Capacity {
    pinned: Option<BudgetedPinned>,
}

impl Capacity {
    /// Bytes pinned.
    pub(crate) fn bytes(&self) -> usize {
        self.pinned.as_ref().map_or(0, |p| p.len())
    }

    /// The context of the pinned memory, if any is held.
    pub(crate) fn context(&self) -> Option<&Context> {
        self.pinned.as_ref().and_then(|p| p.context())
    }

    /// The least and the preferred size of a grow to hold `bytes` (see
    /// [`Capacity::ensure`]).
    fn grow_sizes(&self, op: &'static str, bytes: usize, limit: usize) -> Result<(usize, usize)> {
        let preferred = grow_capacity(op, self.bytes(), bytes)?.min(limit.max(bytes));
        Ok((least_capacity(bytes, preferred), preferred))
    }

    /// Whether the pinned-memory limit leaves room for the grow that
    /// [`Capacity::ensure`] would make for `bytes` now; no driver call. A refusal
    /// names `op`.
    pub(crate) fn check_budget(&self, op: &'static str, bytes: usize, limit: usize) -> Result<()> {
        if bytes <= self.bytes() {
            return Ok(());
        }
        let (least, _) = self.grow_sizes(op, bytes, limit)?;
        crate::budget::check(op, least)
    }

    /// Grows to at least `bytes` by the growth policy, but not past `limit` (unless
    /// `bytes` itself is larger), pinning in `ctx`; only to `bytes` (rounded up to
    /// the granule) when the policy's size would pass the pinned-memory limit.
    /// Returns the new capacity when it pinned, `None` when the buffer was large
    /// enough. The new buffer is pinned before the old one is released, so a failure
    /// (the pinned-memory limit, checked before the driver is asked, or the driver's)
    /// leaves the old one in place and usable. A refusal names `op`.
    pub(crate) fn ensure(
        &mut self,
        op: &'static str,
        bytes: usize,
        limit: usize,
        ctx: &Context,
    ) -> Result<Option<usize>> {
        let cap = self.bytes();
        if bytes <= cap {
            return Ok(None);
        }
        let (least, preferred) = self.grow_sizes(op, bytes, limit)?;
        let new = BudgetedPinned::alloc_in(op, ctx, least, preferred)?;
        let new_cap = new.len();
        self.pinned = Some(new);
        Ok(Some(new_cap))
    }

    /// The pinned buffer, if any.
    pub(crate) fn get(&self) -> Option<&PinnedBuffer<u8>> {
        self.pinned.as_deref()
    }

    /// The pinned buffer (at least `bytes` long, as ensured before).
    pub(crate) fn buffer(&mut self, bytes: usize) -> Result<&mut PinnedBuffer<u8>> {
        match self.pinned.as_deref_mut() {
            Some(p) if p.len() >= bytes => Ok(p),
            _ => Err(internal("pinned buffer smaller than ensured")),
        }
    }

    /// Releases the pinned memory (after any queued copy that uses it).
    pub(crate) fn release(&mut self) {
        self.pinned = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_is_at_least_required_and_one_and_a_half_times() {
        assert_eq!(grow_capacity(GROW_OP, 0, 1).unwrap(), 64 << 10);
        assert_eq!(grow_capacity(GROW_OP, 0, 150_528).unwrap(), 192 << 10);
        // Creeping by a few bytes re-pins far less than once per step.
        let mut cap = grow_capacity(GROW_OP, 0, 150_528).unwrap();
        let mut grows = 0;
        for extra in (0..200_000).step_by(16) {
            let want = 150_528 + extra;
            if want > cap {
                cap = grow_capacity(GROW_OP, cap, want).unwrap();
                grows += 1;
            }
        }
        assert!(grows <= 3, "{grows} grows");
        assert!(cap >= 350_528);
        assert_eq!(
            grow_capacity(GROW_OP, 1 << 20, (1 << 20) + 1).unwrap(),
            3 << 19
        );
        assert_eq!(grow_capacity(GROW_OP, 1 << 20, 8 << 20).unwrap(), 8 << 20);
    }

    #[test]
    fn growth_near_usize_max_is_an_error_not_a_panic() {
        // The error names the operation that grew: a buffer's or a ring slot's.
        assert!(matches!(
            grow_capacity("StagingRing slot grow", 0, usize::MAX),
            Err(Error::SizeOverflow {
                op: "StagingRing slot grow",
                n: usize::MAX,
                elem_bytes: 1
            })
        ));
        let big = usize::MAX / 4 * 3;
        assert_eq!(
            grow_capacity(GROW_OP, big, big + 1).unwrap(),
            (big + 1).next_multiple_of(64 << 10)
        );
    }

    #[test]
    fn the_least_grow_is_the_transfer_rounded_to_the_granule() {
        assert_eq!(least_capacity(1, 64 << 10), 64 << 10);
        assert_eq!(least_capacity(150_528, 256 << 10), 192 << 10);
        // Never more than the policy's size, never less than what is required.
        assert_eq!(least_capacity(150_528, 150_528), 150_528);
        assert_eq!(least_capacity(usize::MAX, usize::MAX), usize::MAX);
    }

    #[test]
    fn an_empty_capacity_has_no_buffer_to_hand_out() {
        let mut c = Capacity::default();
        assert_eq!(c.bytes(), 0);
        assert!(c.context().is_none());
        assert!(c.buffer(0).is_err(), "nothing pinned yet");
    }

    #[test]
    #[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
    fn a_grown_capacity_hands_out_no_more_than_it_holds_in_its_context() {
        let ctx = Context::new(0).expect("this test needs CUDA device 0");
        let mut c = Capacity::default();
        let granule = GROW_GRANULE_BYTES;
        assert_eq!(
            c.ensure(GROW_OP, 100, usize::MAX, &ctx).unwrap(),
            Some(granule)
        );
        assert_eq!(c.bytes(), granule);
        assert!(c.context().is_some_and(|x| x.same_as(&ctx)));
        assert_eq!(c.ensure(GROW_OP, granule, usize::MAX, &ctx).unwrap(), None);
        assert_eq!(c.buffer(granule).unwrap().len(), granule);
        assert!(c.buffer(granule + 1).is_err(), "a short buffer is an error");
        c.release();
        assert_eq!(c.bytes(), 0);
        assert!(c.get().is_none());
    }

    proptest::proptest! {
        #[test]
        fn growth_policy_holds_for_any_sizes(old in 0usize..(1 << 44), required in proptest::prelude::any::<usize>()) {
            match grow_capacity(GROW_OP, old, required) {
                Ok(cap) => {
                    proptest::prop_assert!(cap >= required);
                    proptest::prop_assert_eq!(cap % GROW_GRANULE_BYTES, 0);
                    if let Some(target) = old.checked_add(old / 2).and_then(|t| t.checked_next_multiple_of(GROW_GRANULE_BYTES)) {
                        if required <= target {
                            proptest::prop_assert!(cap >= old + old / 2);
                        }
                    }
                }
                Err(e) => {
                    proptest::prop_assert!(required.checked_next_multiple_of(GROW_GRANULE_BYTES).is_none());
                    let is_overflow = matches!(e, Error::SizeOverflow { .. });
                    proptest::prop_assert!(is_overflow);
                }
            }
        }
    }
}
