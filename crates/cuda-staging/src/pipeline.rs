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

use crate::capacity::internal;
use crate::copy::Copier;
use crate::plan::{Plan, MAX_SLOTS, PIPELINE_MIN_BYTES};
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
        let Stage {
            window,
            events,
            stream,
            copier,
            plan,
            wait,
        } = self;
        if plan.chunks == 1 {
            let bytes = plan.bytes;
            let slot = window.as_mut_slice()?;
            copier
                .last(true)
                .copy(&mut slot[..bytes], src, streams(bytes));
            stream.memcpy_htod(&window.slice(..bytes)?, dst)?;
            return stream.synchronize_with(wait);
        }
        let mut slots = slot_views(window, &plan)?;
        for k in 0..plan.chunks {
            let (off, len, s) = plan.chunk(k);
            let slot = slots[s].as_mut().ok_or_else(|| internal("missing slot"))?;
            if plan.reuses() && k >= plan.slots {
                // The DMA that last read this slot has completed after this.
                events[s].synchronize_with(wait)?;
            }
            copier.last(k + 1 == plan.chunks).copy(
                &mut slot.as_mut_slice()?[..len],
                &src[off..off + len],
                streams(len),
            );
            stream.memcpy_htod(&slot.slice(..len)?, &mut dst.slice_mut(off..off + len)?)?;
            if plan.reuses() {
                events[s].record(stream)?;
            }
        }
        stream.synchronize_with(wait)
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
    /// A download in one piece of up to [`GATED_COPY_OUT_MAX_BYTES`] publishes its
    /// copy-out before it waits for the DMA (`Copier::copy_out_after`): the helpers
    /// claim their parts, prefetch their part of `dst` for writing, and copy the
    /// moment the DMA has landed (a helper still waiting after 200 µs, the DMA
    /// queued behind long work, hands its part back to the caller and goes). On
    /// the 16-core H200 host (a `frames`-style loop, variants interleaved, p50, two
    /// machine starts; gated against publishing after the wait, `download_into`
    /// beside):
    ///
    /// | gap | bytes | after the wait | gated | `download_into` |
    /// |---|---:|---:|---:|---:|
    /// | sleep 16 ms | 150528 | 60.5, 59.1 µs | 57.4, 53.2 | 50.3, 47.5 |
    /// | sleep 16 ms | 196608 | 70.6, 61.2 | 65.1, 57.9 | 56.7, 47.6 |
    /// | sleep 2 ms | 150528 | 28.6, 29.2 | 24.3, 26.1 | 21.3, 19.0 |
    /// | busy 2 ms | 150528 | 23.5, 33.6 | 18.7, 31.0 | 16.0, 24.4 |
    /// | back to back | 150528 | 14.7 | 12.7 | 9.3 |
    ///
    /// All 21 gap cells measured from 64 KiB to 512 KiB were faster gated; back to
    /// back, 512 KiB tied (29.7 µs). Without the prefetch, gating gained less
    /// (sleep 2 ms, 150528 B: 27.7 µs). The caller prefetching the whole
    /// destination itself gained nothing (28.7 µs). Gating the chunks of a
    /// pipelined download lost: 4915200 B after a 2 ms sleep 253 against 233 µs,
    /// back to back 333 against 144 µs, so chunks keep publishing after their wait.
    pub(crate) fn download(self, src: &DeviceView<'_, u8>, dst: &mut [u8]) -> Result<()> {
        let Stage {
            window,
            events,
            stream,
            copier,
            plan,
            wait,
        } = self;
        let copier = copier.last(plan.chunks == 1);
        if plan.chunks == 1 && plan.bytes > GATED_COPY_OUT_MAX_BYTES {
            // One piece only because a chunk size was set: measured nowhere gated.
            stream.memcpy_dtoh(src, window)?;
            stream.synchronize_with(wait)?;
            copier.copy_out(dst, &window.as_slice()?[..plan.bytes]);
            return Ok(());
        }
        if plan.chunks == 1 {
            let bytes = plan.bytes;
            if dst.len() < bytes || window.len() < bytes {
                return Err(internal("download larger than its window or destination"));
            }
            // Read only after the wait below, once the DMA has landed.
            let landing = window.as_ptr();
            stream.memcpy_dtoh(src, window)?;
            // Plain stores: streaming ones into the caller's memory measured slower
            // (4.7 MiB: 245 µs against 203 µs on the 32-core H200 host). The copy
            // is published before the wait (see above).
            // SAFETY: `dst` and the window hold at least `bytes` bytes (checked
            // above); the window is read only after `synchronize` returned `Ok`,
            // when the DMA into it has landed, and nothing writes it while `self`
            // borrows it; it is pinned memory, never the caller's `dst`.
            return unsafe {
                copier.copy_out_after(dst, landing, bytes, || stream.synchronize_with(wait))
            };
        }
        let mut slots = slot_views(window, &plan)?;
        let issue = |slots: &mut [Option<PinnedViewMut<'_, u8>>],
                     events: &mut [Event],
                     k: usize|
         -> Result<()> {
            let (off, len, s) = plan.chunk(k);
            let slot = slots[s].as_mut().ok_or_else(|| internal("missing slot"))?;
            stream.memcpy_dtoh(&src.slice(off..off + len)?, slot)?;
            events[s].record(stream)
        };
        for k in 0..plan.slots {
            issue(&mut slots, events, k)?;
        }
        for k in 0..plan.chunks {
            let (off, len, s) = plan.chunk(k);
            events[s].synchronize_with(wait)?;
            let slot = slots[s].as_ref().ok_or_else(|| internal("missing slot"))?;
            copier
                .last(k + 1 == plan.chunks)
                .copy_out(&mut dst[off..off + len], &slot.as_slice()?[..len]);
            if k + plan.slots < plan.chunks {
                issue(&mut slots, events, k + plan.slots)?;
            }
        }
        Ok(())
    }
}

/// The largest download whose copy-out is published before its DMA has landed
/// (see [`Stage::download`]): the largest cut in one piece by the automatic chunk,
/// and the largest measured. A larger one in one piece (a chunk size set with
/// `StagingConfig::pipeline_chunk_bytes`) publishes after the wait.
const GATED_COPY_OUT_MAX_BYTES: usize = PIPELINE_MIN_BYTES[1];

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
