//! The staged path of `upload` / `download`: the host copy and the DMA of a transfer,
//! cut into chunks so that the copy of one chunk overlaps the DMA of another.
//!
//! An upload copies chunk k into a slot of the pinned window, then queues its DMA;
//! the copy of chunk k+1 runs while chunk k is on the link. A download queues the
//! DMAs of the first chunks, then copies each one out as it lands while later ones
//! are on the link. A slot is reused only once the event recorded after its last DMA
//! completed, and every DMA goes through `cuda-core`'s tracked stream operations.

use cuda_core::{
    DeviceView, DeviceViewMut, Event, PinnedBuffer, PinnedViewMut, Result, Stream, WaitPolicy,
};

use crate::copy::Copier;
use crate::errors::internal;
use crate::plan::{Plan, MAX_SLOTS};
use crate::stores::streams;

/// The pinned window, its per-slot events, the stream and the copier of one
/// staged transfer.
pub(crate) struct Stage<'a> {
    pub(crate) window: &'a mut PinnedBuffer<u8>,
    pub(crate) events: &'a mut [Event],
    pub(crate) stream: &'a Stream,
    pub(crate) copier: Copier<'a>,
    pub(crate) plan: Plan,
    /// How its waits wait (the whole transfer's allowance, `crate::waiting`).
    pub(crate) wait: WaitPolicy,
}

impl Stage<'_> {
    /// Stages `src` into `dst` (equal lengths), returning once it has landed. The
    /// caller caps the copier at
    /// [`UPLOAD_MAX_THREADS`](crate::routing::UPLOAD_MAX_THREADS) threads.
    pub(crate) fn upload(self, src: &[u8], dst: &mut DeviceViewMut<'_, u8>) -> Result<()> {
        if self.plan.chunks == 1 {
            let bytes = self.plan.bytes;
            let slot = self.window.as_mut_slice()?;
            self.copier
                .last(true)
                .copy(&mut slot[..bytes], src, streams(bytes));
            self.stream.memcpy_htod(&self.window.slice(..bytes)?, dst)?;
            return self.stream.synchronize_with(self.wait);
        }
        let mut slots = slot_views(self.window, &self.plan)?;
        for k in 0..self.plan.chunks {
            let (off, len, s) = self.plan.chunk(k);
            let slot = slots[s].as_mut().ok_or_else(|| internal("missing slot"))?;
            if self.plan.reuses() && k >= self.plan.slots {
                // The DMA that last read this slot has completed after this.
                self.events[s].synchronize_with(self.wait)?;
            }
            self.copier.last(k + 1 == self.plan.chunks).copy(
                &mut slot.as_mut_slice()?[..len],
                &src[off..off + len],
                streams(len),
            );
            self.stream
                .memcpy_htod(&slot.slice(..len)?, &mut dst.slice_mut(off..off + len)?)?;
            if self.plan.reuses() {
                self.events[s].record(self.stream)?;
            }
        }
        self.stream.synchronize_with(self.wait)
    }

    /// Stages `src` into `dst` (equal lengths), returning once every byte is there.
    ///
    /// Where a mid-size download's time goes, back to back on the 16-core H200
    /// host (flushing copy-out, clock stamps inside this function, p50 of 300):
    /// 4915200 B in 8 chunks took 134 µs against 97 µs for `download_into`.
    /// - Waiting for a chunk is not the cost: `cuEventSynchronize` on a completed
    ///   event takes 0.23 µs. The 2 µs between one copy-out's end and the next
    ///   chunk's event are the DMA itself, which runs behind: 8 chunks of 600 KiB
    ///   with nothing else going on take 106 µs (about 1.3 µs per chunk boundary),
    ///   and the copy-outs reading and writing memory at the same time slow it
    ///   further.
    /// - The copy-out of one chunk (about 12 µs for 600 KiB on 16 threads) is as
    ///   slow as its DMA, so smaller chunks do not shorten the tail: cutting the
    ///   last chunk in two took 144 µs, and 256 KiB chunks 214 µs.
    /// - Fewer copy threads lost although a bare copy probe favoured 12 of the 16
    ///   cores: 12 threads took 151 µs, 8 threads 177 µs.
    /// - Completion flags written by the stream (`cuStreamWriteValue32` into
    ///   pinned memory, polled by the host) instead of events: 8 chunks took 119 µs
    ///   against 106 µs with events; a flag costs 0.94 µs to queue, an event record
    ///   0.18 µs.
    ///
    /// A download in one piece is copied out once its DMA has landed, like each
    /// chunk of a pipelined one.
    pub(crate) fn download(self, src: &DeviceView<'_, u8>, dst: &mut [u8]) -> Result<()> {
        if self.plan.chunks == 1 {
            self.stream.memcpy_dtoh(src, self.window)?;
            self.stream.synchronize_with(self.wait)?;
            self.copier
                .last(true)
                .copy_out(dst, &self.window.as_slice()?[..self.plan.bytes]);
            return Ok(());
        }
        let mut slots = slot_views(self.window, &self.plan)?;
        let issue = |slots: &mut [Option<PinnedViewMut<'_, u8>>],
                     events: &mut [Event],
                     k: usize|
         -> Result<()> {
            let (off, len, s) = self.plan.chunk(k);
            let slot = slots[s].as_mut().ok_or_else(|| internal("missing slot"))?;
            self.stream.memcpy_dtoh(&src.slice(off..off + len)?, slot)?;
            events[s].record(self.stream)
        };
        for k in 0..self.plan.slots {
            issue(&mut slots, self.events, k)?;
        }
        for k in 0..self.plan.chunks {
            let (off, len, s) = self.plan.chunk(k);
            self.events[s].synchronize_with(self.wait)?;
            let slot = slots[s].as_ref().ok_or_else(|| internal("missing slot"))?;
            self.copier
                .last(k + 1 == self.plan.chunks)
                .copy_out(&mut dst[off..off + len], &slot.as_slice()?[..len]);
            if k + self.plan.slots < self.plan.chunks {
                issue(&mut slots, self.events, k + self.plan.slots)?;
            }
        }
        Ok(())
    }
}

/// Views of the plan's slots, each `chunk_bytes` long, at the start of `window`.
fn slot_views<'a>(
    window: &'a mut PinnedBuffer<u8>,
    plan: &Plan,
) -> Result<[Option<PinnedViewMut<'a, u8>>; MAX_SLOTS]> {
    let mut slots: [Option<PinnedViewMut<'a, u8>>; MAX_SLOTS] = std::array::from_fn(|_| None);
    let mut rest = window.slice_mut(..plan.slots * plan.chunk_bytes)?;
    for slot in slots.iter_mut().take(plan.slots) {
        let (this, next) = rest.split_at(plan.chunk_bytes)?;
        *slot = Some(this);
        rest = next;
    }
    Ok(slots)
}
