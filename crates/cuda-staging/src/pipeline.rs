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
use crate::direction::Direction;
use crate::stores::streams;

/// The largest pinned window the convenience path (`upload` / `download`) grows
/// to. Larger transfers stream through it in chunks, so a 1 GiB `upload` does not pin
/// 1 GiB. `upload_with` / `download_into` hand the caller one contiguous pinned
/// slice and grow to whatever they are asked for.
pub const PIPELINE_WINDOW_BYTES: usize = 8 << 20;

/// Ring slots (and events) the pipeline uses at most.
pub(crate) const MAX_SLOTS: usize = 8;

/// With the automatic chunk, transfers up to this size are copied and DMA'd in
/// one piece (when the copy threads are awake); larger ones are cut.
const PIPELINE_MIN_BYTES: [usize; 2] = [1 << 20, 512 << 10];

/// Uploads from this size that the calling thread copies alone (no pool helper takes
/// part) are cut in two even chunks, so the copy of the second half overlaps the DMA
/// of the first. After a 2 ms sleep on the 16-core H200 host
/// (`frame_probe`, p50): 150528 B in 28.5 µs against 33.8 µs in one piece (the
/// driver's pageable path: 37.7 µs); 64 KiB 24.4 against 26.1 (32.2).
///
/// Downloads stay in one piece between frames. Cut in two even halves whenever
/// they were not back to back, they lost in every gap measured (16-core H200 host,
/// columns interleaved, p50, halves against one piece): 150528 B 89.9 against
/// 70.6 µs after a 16 ms sleep, 43.0 against 33.2 after 2 ms, 26.7 against 23.7
/// when busy for 2 ms; 64 KiB 84.3 against 65.7 after 16 ms. Chunks of 64 KiB
/// (three for 150528 B) lost too: 95.1 µs after 16 ms.
const COLD_SPLIT_MIN_BYTES: usize = 64 << 10;

/// How a transfer is cut: `chunks` pieces of `chunk_bytes` (the last may be
/// shorter), going round `slots` slots of the pinned window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) bytes: usize,
    pub(crate) chunk_bytes: usize,
    pub(crate) chunks: usize,
    pub(crate) slots: usize,
}

impl Plan {
    /// `chunk` 0 picks the measured default for the direction (see
    /// [`auto_chunk_bytes`]); `cold` says the caller copies alone (no pool helper
    /// takes part).
    pub(crate) fn new(
        bytes: usize,
        window: usize,
        chunk: usize,
        direction: Direction,
        cold: bool,
    ) -> Plan {
        let auto = auto_chunk_bytes(bytes, direction, cold);
        let chunk_bytes = if chunk == 0 { auto } else { chunk }.min(window).max(1);
        let chunks = bytes.div_ceil(chunk_bytes);
        let slots = (window / chunk_bytes).clamp(1, MAX_SLOTS).min(chunks);
        Plan {
            bytes,
            chunk_bytes,
            chunks,
            slots,
        }
    }

    /// Whether a slot is used more than once (so each needs an event).
    pub(crate) fn reuses(&self) -> bool {
        self.chunks > self.slots
    }

    /// (offset, length, slot) of chunk `k`.
    pub(crate) fn chunk(&self, k: usize) -> (usize, usize, usize) {
        let off = k * self.chunk_bytes;
        (off, self.chunk_bytes.min(self.bytes - off), k % self.slots)
    }
}

/// The automatic pipeline chunk, from the copy_probe sweeps on the 32-core H200 host
/// (copy threads 1 to 16, chunks 64 KiB to 2 MiB). Uploads pipeline from 1 MiB and do
/// best with about four chunks (4.7 MiB: 130 µs at 1.25 MiB chunks, 156–166 µs at
/// 256 KiB). Downloads pipeline with smaller chunks, because the host copy-out
/// waits for the first chunk to land: 512 KiB to 2 MiB in 256 KiB chunks
/// (8 threads, 1 MiB: 54.7 µs against 61.9 µs in one piece; 2 MiB: 96.5 against
/// 110), 4.7 MiB in eighths (183–211 µs at 512 KiB chunks, 209–229 µs at 1.25 MiB).
/// Chunks of 64 KiB lose everywhere (each extra DMA costs a few µs). Chunks stop at
/// 2 MiB, and are evened out (4.7 MiB downloads: 8 chunks of 600 KiB). On the
/// 16-core H200 host with 16 copy threads (`frames` bench, `chunks`, back to back)
/// download chunks under 512 KiB lost: 2 MiB took 76 µs in 256 KiB chunks and 58 µs
/// in 512 KiB ones, 1 MiB 43 µs either way; so download chunks are at least 512 KiB.
/// Uploads from [`COLD_SPLIT_MIN_BYTES`] up to 1 MiB are cut in two when `cold`.
pub(crate) fn auto_chunk_bytes(bytes: usize, direction: Direction, cold: bool) -> usize {
    let min = match direction {
        Direction::HostToDevice => PIPELINE_MIN_BYTES[0],
        Direction::DeviceToHost => PIPELINE_MIN_BYTES[1],
    };
    if bytes <= min {
        if cold && direction == Direction::HostToDevice && bytes >= COLD_SPLIT_MIN_BYTES {
            return bytes.div_ceil(2).next_multiple_of(4096);
        }
        return bytes;
    }
    let (pieces, least) = match direction {
        Direction::HostToDevice => (4, 256 << 10),
        Direction::DeviceToHost => (8, 512 << 10),
    };
    let target = (bytes / pieces)
        .clamp(least, 2 << 20)
        .next_multiple_of(64 << 10);
    // As many chunks as `target` gives, of near-equal size (page multiples), so a
    // transfer just over a multiple of `target` does not end in a sliver that costs
    // a DMA of its own.
    bytes
        .div_ceil(bytes.div_ceil(target))
        .next_multiple_of(4096)
}

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
    /// [`UPLOAD_MAX_THREADS`](crate::buffer::UPLOAD_MAX_THREADS) threads.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn automatic_chunks_leave_no_sliver() {
        for (bytes, direction) in [
            ((512 << 10) + 1, Direction::DeviceToHost),
            ((2 << 20) + 1, Direction::DeviceToHost),
            (4_915_200, Direction::DeviceToHost),
            ((1 << 20) + 1, Direction::HostToDevice),
            ((8 << 20) + 4097, Direction::HostToDevice),
        ] {
            let p = Plan::new(bytes, PIPELINE_WINDOW_BYTES, 0, direction, false);
            assert!(p.chunks >= 2, "{p:?}");
            let (_, last, _) = p.chunk(p.chunks - 1);
            assert!(
                last * 2 >= p.chunk_bytes,
                "sliver: {p:?}, last chunk {last} B"
            );
            assert_eq!(p.chunk_bytes % 4096, 0, "{p:?}");
        }
        // At or below the pipelining bound a transfer stays in one piece when the
        // copy threads are awake.
        assert_eq!(
            Plan::new(512 << 10, 1 << 20, 0, Direction::DeviceToHost, false).chunks,
            1
        );
        assert_eq!(
            Plan::new(1 << 20, 1 << 20, 0, Direction::HostToDevice, false).chunks,
            1
        );
    }

    #[test]
    fn cold_uploads_from_64_kib_to_1_mib_are_cut_in_two_even_chunks() {
        for bytes in [64 << 10, 150_528, 196_608, 1 << 20] {
            let p = Plan::new(bytes, 2 << 20, 0, Direction::HostToDevice, true);
            assert_eq!(p.chunks, 2, "{bytes}: {p:?}");
            let (_, last, _) = p.chunk(1);
            assert!(
                p.chunk_bytes - last < 2 * 4096,
                "{bytes}: near-even halves, {p:?}"
            );
        }
        // Below 64 KiB, and for downloads, cold or not changes nothing.
        assert_eq!(
            Plan::new(48 << 10, 1 << 20, 0, Direction::HostToDevice, true).chunks,
            1
        );
        assert_eq!(
            Plan::new(150_528, 1 << 20, 0, Direction::DeviceToHost, true).chunks,
            1
        );
    }

    #[test]
    fn plans_cover_every_byte_exactly_once_within_the_window() {
        for &(bytes, window) in &[
            (1usize << 20 | 1, 2 << 20),
            (4_915_200, 4_915_200 + 1000),
            (64 << 20, PIPELINE_WINDOW_BYTES),
            (16 << 20, 16 << 20),
            (3 << 20, 1 << 20),
            (9 << 20, PIPELINE_WINDOW_BYTES),
        ] {
            let p = Plan::new(bytes, window, 0, Direction::HostToDevice, false);
            assert!(p.slots >= 1 && p.slots <= MAX_SLOTS);
            assert!(p.slots * p.chunk_bytes <= window, "{p:?} window {window}");
            let mut covered = 0;
            for k in 0..p.chunks {
                let (off, len, slot) = p.chunk(k);
                assert_eq!(off, covered);
                assert!(len > 0 && len <= p.chunk_bytes);
                assert!(slot < p.slots);
                covered += len;
            }
            assert_eq!(covered, bytes, "{p:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_plan_covers_every_byte_once_inside_the_window(
            bytes in 1usize..(512usize << 20),
            window in (64usize << 10)..(80usize << 20),
            chunk_granules in 0usize..(PIPELINE_WINDOW_BYTES / crate::capacity::GROW_GRANULE_BYTES),
            h2d in proptest::prelude::any::<bool>(),
            cold in proptest::prelude::any::<bool>(),
        ) {
            // 0 is the automatic choice; anything else is what StagingConfig::pipeline_chunk_bytes sets.
            let direction = if h2d { Direction::HostToDevice } else { Direction::DeviceToHost };
            let chunk = chunk_granules * crate::capacity::GROW_GRANULE_BYTES;
            let p = Plan::new(bytes, window, chunk, direction, cold);
            proptest::prop_assert!(p.slots >= 1 && p.slots <= MAX_SLOTS);
            proptest::prop_assert!(p.slots * p.chunk_bytes <= window);
            let (mut covered, mut k) = (0, 0);
            while k < p.chunks {
                let (off, len, slot) = p.chunk(k);
                proptest::prop_assert_eq!(off, covered);
                proptest::prop_assert!(len >= 1 && len <= p.chunk_bytes && slot < p.slots);
                covered += len;
                k += 1;
            }
            proptest::prop_assert_eq!(covered, bytes);
        }
    }
}
