//! The ring's slots: taking the next one (free, and large enough), marking it queued,
//! and handing out what landed in it.

use cuda_core::{Context, Event, PinnedBuffer, Result, Stream};

use super::{missing, StagingRing};
use crate::direction::Direction;
use crate::errors::invalid;
use crate::staged::Region;
use crate::trace::SpanRoute;

/// What a refused grow of a ring slot names.
const SLOT_GROW_OP: &str = "StagingRing slot grow";

impl StagingRing {
    pub(crate) fn check_ring(&self, ring: u64) -> Result<()> {
        if ring == self.id {
            Ok(())
        } else {
            Err(invalid(
                "StagingRing::wait",
                "the ticket belongs to another ring",
            ))
        }
    }

    /// The first `bytes` of slot `k` once the transfer of `generation` landed; with
    /// `bytes == 0` (nothing was queued) an empty slice, naming no slot.
    pub(crate) fn landed(
        &self,
        ring: u64,
        k: usize,
        generation: u64,
        bytes: usize,
    ) -> Result<&[u8]> {
        self.check_ring(ring)?;
        if bytes == 0 {
            // Nothing was queued: no slot is named.
            return Ok(&[]);
        }
        let slot = self.slots.get(k).ok_or_else(missing)?;
        if slot.generation != generation {
            let reason = format!(
                "stale ticket: slot {k} now holds transfer {} of the slot, the ticket is for \
                 transfer {generation}; redeem tickets within {} transfers of the ring",
                slot.generation,
                self.slots.len()
            );
            return Err(invalid("StagingRing::wait", reason));
        }
        if let Some(e) = &slot.event {
            // Queued a frame ago: its own DMA has had its time (`crate::waiting`).
            e.synchronize_with(self.config.wait_policy)?;
        }
        let pinned = slot.pinned.get().ok_or_else(missing)?;
        Ok(&pinned.as_slice()?[..bytes])
    }

    /// The next slot, free (its last DMA complete) and holding at least `bytes`. The
    /// ring moves on to the slot after it only once a transfer is queued in it
    /// ([`StagingRing::queued`]): a call that fails (or a `fill` that fails or
    /// panics) in between leaves the same slot for the next transfer.
    pub(super) fn take_slot(&mut self, bytes: usize, ctx: &Context) -> Result<usize> {
        let k = self.next;
        let slot = &mut self.slots[k];
        // Refused by the pinned-memory limit before anything else: no wait for the
        // slot, no counter, no driver call.
        slot.pinned.check_budget(SLOT_GROW_OP, bytes, usize::MAX)?;
        if slot.in_flight {
            // Its DMA seen complete already (a wait since covered it, as the ring's
            // wait for a later download does): no driver call.
            let seen_done = slot.pinned.get().is_some_and(|p| p.is_idle());
            let done = seen_done || slot.event.as_ref().map_or(Ok(true), Event::query)?;
            if !done {
                self.stats.slot_waits += 1;
                if let Some(e) = &slot.event {
                    e.synchronize_with(self.config.wait_policy)?;
                }
            }
            slot.in_flight = false;
        }
        // Bumped before the slot's bytes can change (a grow swaps in a new, zeroed
        // buffer), and before anything below can fail: a ticket of the slot's last
        // download is stale from here on, whatever happens next.
        slot.generation += 1;
        // The new buffer is pinned before the old one is released, so a refusal or a
        // failed pin leaves the old one in place.
        if slot
            .pinned
            .ensure(SLOT_GROW_OP, bytes, usize::MAX, ctx)?
            .is_some()
        {
            self.stats.allocations += 1;
        }
        if !slot
            .event
            .as_ref()
            .is_some_and(|e| e.context().same_as(ctx))
        {
            slot.event = Some(Event::new(ctx)?);
        }
        Ok(k)
    }

    /// Slot `k`'s DMA was queued on `stream`: record its event, and move on to the
    /// next slot.
    pub(super) fn queued(&mut self, k: usize, stream: &Stream) -> Result<()> {
        // The DMA is queued: whatever happens below, the slot's turn is used.
        self.next = (k + 1) % self.slots.len();
        let slot = &mut self.slots[k];
        slot.event.as_mut().ok_or_else(missing)?.record(stream)?;
        slot.in_flight = true;
        Ok(())
    }
}

/// A ring's transfers go through its next slot, and return once queued: the slot's
/// event, recorded after the DMA, says when it is free again.
impl Region for StagingRing {
    type Turn = usize;

    fn route(_batch: bool) -> SpanRoute {
        SpanRoute::Ring
    }

    fn take(&mut self, bytes: usize, ctx: &Context) -> Result<(&mut PinnedBuffer<u8>, usize)> {
        let k = self.take_slot(bytes, ctx)?;
        let pinned = self.slots[k].pinned.buffer(bytes)?;
        Ok((pinned, k))
    }

    fn before_dma(k: usize, _bytes: usize, _stream: &Stream) -> usize {
        k
    }

    fn end(&mut self, k: usize, stream: &Stream) -> Result<()> {
        self.queued(k, stream)
    }

    fn bracket<O>(&mut self, body: impl FnOnce(&mut StagingRing) -> O) -> O {
        body(self)
    }

    fn count(&mut self, direction: Direction, bytes: usize, _batch: bool) {
        match direction {
            Direction::HostToDevice => {
                self.stats.uploads += 1;
                self.stats.bytes_uploaded += bytes as u64;
            }
            Direction::DeviceToHost => {
                self.stats.downloads += 1;
                self.stats.bytes_downloaded += bytes as u64;
            }
        }
    }
}
