//! [`StagingRing`]: asynchronous staging through K pinned slots, each guarded by an
//! event, so the calling thread prepares frame k+1 while frame k is on the link.
//!
//! An upload fills a slot (straight, or by copying a slice), queues its DMA and
//! returns without waiting; it waits only when the slot it comes round to is still in
//! flight ([`RingStats::slot_waits`]). A download queues its DMA and returns a
//! [`Ticket`]; [`StagingRing::wait`] waits for that transfer alone and hands out the
//! slot's bytes in place. A ticket whose slot has since been reused is an error,
//! never stale data. Slots grow on demand and are kept, so a steady loop allocates
//! nothing.
//!
//! Soundness: a slot is handed out for writing only after the event recorded after
//! its last DMA completed, and for reading only after its own download's event did;
//! every DMA is a tracked `cuda-core` operation, so dropping the ring (or growing a
//! slot) waits for queued copies before freeing pinned memory. The slices `wait`
//! returns borrow the ring, so no slot can be reused while one is alive (the borrow
//! checker refuses it).

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};

use cuda_core::{DeviceSlice, DeviceSliceMut, DeviceView, Error, Event, Result, Stream};

use crate::batch::DownloadBatch;
#[cfg(doc)]
use crate::batch::Landed;
use crate::capacity::Capacity;
use crate::config::RingConfig;
use crate::copy::Copier;
use crate::direction::Direction;
use crate::elements::check_transfer;
use crate::fill::FillError;
use crate::staged::{self, Move};
use crate::stores::streams;
use crate::StagingPod;

// The 2-D transfers and the tickets, in child modules for the slots' internals.
mod ring_2d;
mod slots;
mod tickets;
pub use ring_2d::{Rows, Ticket2d};
pub use tickets::{BatchTicket, RingTicket, Ticket};

static NEXT_RING_ID: AtomicU64 = AtomicU64::new(1);

/// Counters of a [`StagingRing`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Uploads queued (`upload_with`, `upload`).
    pub uploads: u64,
    /// Downloads queued (`download`, `download_batch`).
    pub downloads: u64,
    /// Times a call found its slot still in flight and waited for it.
    pub slot_waits: u64,
    /// Pinned allocations made (a slot's first use and each growth).
    pub allocations: u64,
    /// Bytes queued host to device.
    pub bytes_uploaded: u64,
    /// Bytes queued device to host.
    pub bytes_downloaded: u64,
}

#[derive(Default)]
struct Slot {
    /// Counted against the process's pinned-memory budget (`crate::budget`).
    pinned: Capacity,
    /// Recorded after the slot's last DMA.
    event: Option<Event>,
    /// The event was recorded and not yet seen complete.
    in_flight: bool,
    /// Bumped each time the slot is used: tickets carry it.
    generation: u64,
}

/// Asynchronous staging through K pinned slots, each guarded by an event, so the
/// calling thread prepares frame k+1 while frame k is on the link.
///
/// An upload fills a slot (straight, or by copying a slice), queues its DMA and
/// returns without waiting; it waits only when the slot it comes round to is still
/// in flight ([`RingStats::slot_waits`]). A download queues its DMA and returns a
/// [`Ticket`]; [`StagingRing::wait`] waits for that transfer alone and hands out the
/// slot's bytes in place. A ticket whose slot has since been reused is an error, never
/// stale data. Slots grow on demand and are kept: a steady loop allocates nothing.
/// The slices `wait` returns borrow the ring, so no slot is reused while one is alive,
/// and every DMA is a tracked `cuda-core` operation, so no slot is freed while a copy
/// still uses it. Use one ring per direction, each with enough slots for the
/// transfers in flight at once (the default 3: one on the link, one being filled,
/// one spare).
///
/// ```no_run
/// use cuda_staging::{Context, DeviceBuffer, StagingRing, Stream};
///
/// let ctx = Context::new(0)?;
/// let stream = Stream::new(&ctx)?;
/// let mut input = DeviceBuffer::<f32>::alloc(3 * 640 * 640)?;
/// let output = DeviceBuffer::<f32>::zeroed(84 * 8400)?;
/// let (mut up, mut down) = (StagingRing::new(), StagingRing::new());
/// let mut previous = None;
/// for frame in 0..100 {
///     // Preprocess frame k straight into pinned memory; returns once queued.
///     up.upload_with(&mut input, 3 * 640 * 640, &stream, |px| px.fill(frame as f32))?;
///     // ... queue the model on `stream` here ...
///     let ticket = down.download(&output, 84 * 8400, &stream)?;
///     // Meanwhile, post-process frame k-1.
///     if let Some(t) = previous.replace(ticket) {
///         let scores: &[f32] = down.wait(&t)?;
///         assert_eq!(scores.len(), 84 * 8400);
///     }
/// }
/// # Ok::<(), cuda_staging::Error>(())
/// ```
pub struct StagingRing {
    id: u64,
    slots: Vec<Slot>,
    next: usize,
    stats: RingStats,
    /// Its slots, copy threads and wait policy (the slot count is `slots.len()`).
    config: RingConfig,
}

impl Default for StagingRing {
    fn default() -> Self {
        StagingRing::new()
    }
}

impl StagingRing {
    /// A ring configured by [`RingConfig::default`] ([`crate::DEFAULT_RING_SLOTS`]
    /// slots); pins nothing until first use.
    pub fn new() -> StagingRing {
        StagingRing::build(RingConfig::default())
    }

    /// A ring configured by `config`; pins nothing until first use. A value no ring
    /// can take (`slots` of 0 or past [`crate::MAX_RING_SLOTS`], `copy_threads` of 0
    /// or past [`crate::MAX_COPY_THREADS`]) is [`Error::InvalidArgument`] naming the
    /// field.
    pub fn with_config(config: RingConfig) -> Result<StagingRing> {
        Ok(StagingRing::build(
            config.checked("StagingRing::with_config")?,
        ))
    }

    fn build(config: RingConfig) -> StagingRing {
        StagingRing {
            id: NEXT_RING_ID.fetch_add(1, Ordering::Relaxed),
            slots: (0..config.slots).map(|_| Slot::default()).collect(),
            next: 0,
            stats: RingStats::default(),
            config,
        }
    }

    /// How this ring was made.
    pub fn config(&self) -> RingConfig {
        self.config
    }

    /// Bytes pinned over all slots.
    pub fn capacity(&self) -> usize {
        self.slots.iter().map(|s| s.pinned.bytes()).sum()
    }

    /// Counters.
    pub fn stats(&self) -> RingStats {
        self.stats
    }

    /// Waits for every queued transfer of the ring.
    pub fn synchronize(&mut self) -> Result<()> {
        let wait = self.config.wait_policy;
        for s in &mut self.slots {
            if s.in_flight {
                if let Some(e) = &s.event {
                    e.synchronize_with(wait)?;
                }
                s.in_flight = false;
            }
        }
        Ok(())
    }

    /// Gives every slot's pinned memory back (see [`crate::pinned_bytes`]), once the
    /// copies queued on it are done; the slots pin again at their next use. Tickets
    /// not yet redeemed become stale (their data is gone): [`StagingRing::wait`]
    /// refuses them. The slot count, events and counters are kept.
    ///
    /// A wait that fails here (after a GPU fault) is recorded for
    /// [`crate::check_deferred_errors`], as when the ring is dropped; the memory is
    /// freed all the same.
    pub fn shrink_to_fit(&mut self) {
        for slot in &mut self.slots {
            if slot.pinned.bytes() > 0 {
                slot.pinned.release();
                // Dropping it waited for its queued copies (its tracker) and freed it.
                slot.in_flight = false;
                slot.generation += 1;
            }
        }
    }

    /// Writes `n` elements straight into a slot with `fill`, queues their copy to
    /// `dst[..n]` on `stream` and returns without waiting for it (it lands in stream
    /// order, before work queued after it).
    ///
    /// `dst` is a whole device buffer (`&mut buf`) or a writable view of part of
    /// one (`&mut buf.slice_mut(a..b)?`), with the same guarantees either way: the
    /// DMA is recorded in the buffer, whose synchronous copies and `Drop` wait for
    /// it. Waits only if the slot it comes round to is still in flight. Errors
    /// (before any driver call, changing nothing) as
    /// [`crate::StagingBuffer::upload_with`]. With `n == 0`, `fill` gets an empty
    /// slice and nothing else happens. A panic in `fill` leaves the ring valid (the
    /// slot was not queued, and the next transfer takes the same slot).
    ///
    /// A fill that can fail: [`StagingRing::try_upload_with`].
    pub fn upload_with<T: StagingPod, F: FnOnce(&mut [T])>(
        &mut self,
        dst: &mut impl DeviceSliceMut<T>,
        n: usize,
        stream: &Stream,
        fill: F,
    ) -> Result<()> {
        let fill = |px: &mut [T]| {
            fill(px);
            Ok::<(), Infallible>(())
        };
        let op = "StagingRing::upload_with";
        staged::filled_upload(self, op, (dst, n), stream, None, fill).map_err(FillError::infallible)
    }

    /// [`StagingRing::upload_with`] with a `fill` that can fail: when it returns
    /// `Err(e)`, nothing is queued, the device memory is as it was, the transfer
    /// counters (`uploads`, `bytes_uploaded`) are unchanged, and the call returns
    /// [`FillError::Fill`]`(e)`, your own error. Any other error is
    /// [`FillError::Cuda`]. As for a panic in `fill`, a slot pinned or grown for the
    /// call stays so (counted in [`RingStats::allocations`]).
    ///
    /// The slot `fill` wrote is not used up: the ring's next transfer takes it
    /// again, and it is free (no DMA of it is queued). Only a ticket of an earlier
    /// download in that same slot, which the ring was about to reuse anyway,
    /// becomes stale, since `fill` may have written over its bytes.
    pub fn try_upload_with<T: StagingPod, E, F: FnOnce(&mut [T]) -> std::result::Result<(), E>>(
        &mut self,
        dst: &mut impl DeviceSliceMut<T>,
        n: usize,
        stream: &Stream,
        fill: F,
    ) -> std::result::Result<(), FillError<E>> {
        let op = "StagingRing::try_upload_with";
        staged::filled_upload(self, op, (dst, n), stream, None, fill)
    }

    /// Copies `src` into a slot, queues its copy to `dst[..src.len()]` on `stream`
    /// and returns without waiting for the DMA (`src` is free again on return).
    /// `dst` as for [`StagingRing::upload_with`]. Errors as
    /// [`StagingRing::upload_with`].
    pub fn upload<T: StagingPod>(
        &mut self,
        dst: &mut impl DeviceSliceMut<T>,
        src: &[T],
        stream: &Stream,
    ) -> Result<()> {
        let copier = Copier::for_transfer(
            self.config.copy_threads,
            std::mem::size_of_val(src),
            crate::Direction::HostToDevice,
            false,
        );
        staged::filled_upload(
            self,
            "StagingRing::upload",
            (dst, src.len()),
            stream,
            Some(copier),
            |slot: &mut [T]| {
                let bytes = std::mem::size_of_val(src);
                copier.copy(
                    bytemuck::cast_slice_mut(slot),
                    bytemuck::cast_slice(src),
                    streams(bytes),
                );
                Ok::<(), Infallible>(())
            },
        )
        .map_err(FillError::infallible)
    }

    /// Queues a copy of `src[..n]` into a slot on `stream` and returns a ticket for
    /// it, without waiting. Redeem it with [`StagingRing::wait`] before the ring
    /// comes round to the same slot again (`slots()` transfers later). `src` is a
    /// whole device buffer or a view of part of one (`&buf.slice(a..b)?`). Errors as
    /// [`crate::StagingBuffer::download_into`].
    pub fn download<T: StagingPod>(
        &mut self,
        src: &impl DeviceSlice<T>,
        n: usize,
        stream: &Stream,
    ) -> Result<Ticket<T>> {
        let bytes = check_transfer::<T>("StagingRing::download", n, src, stream)?;
        let mut k = None;
        if bytes > 0 {
            let m = Move::new("StagingRing::download", Direction::DeviceToHost, bytes);
            let src = DeviceView::of(src).into_bytes().subview(..bytes)?;
            k = Some(staged::download(self, &m, stream, |p| {
                stream.memcpy_dtoh(&src, p)
            })?);
        }
        Ok(Ticket::new(self.stamp(k), n))
    }

    /// Queues the downloads of every part of `batch` into one slot as one batch, and
    /// returns a ticket for all of them; see [`crate::StagingBuffer::download_batch`].
    pub fn download_batch(
        &mut self,
        batch: &DownloadBatch<'_>,
        stream: &Stream,
    ) -> Result<BatchTicket> {
        let op = "StagingRing::download_batch";
        batch.check(op, stream)?;
        let total = batch.layout.total;
        let mut k = None;
        if total > 0 {
            let m = Move {
                parts: &batch.layout.lens,
                ..Move::new(op, Direction::DeviceToHost, total)
            };
            k = Some(staged::download(self, &m, stream, |p| {
                batch.queue(stream, p, true)
            })?);
        }
        let (ring, slot, generation) = self.stamp(k);
        Ok(BatchTicket {
            ring,
            slot,
            generation,
            batch: batch.id,
            bytes: total,
        })
    }

    /// Waits for the download `ticket` stands for (that transfer alone) and hands
    /// out what landed, in place: for a [`Ticket`] its elements, for a
    /// [`BatchTicket`] its parts ([`Landed`]), for a [`Ticket2d`] its rows
    /// ([`Rows`](crate::Rows)). [`Error::InvalidArgument`] when the ticket's slot has
    /// since been reused (or the ticket is another ring's).
    pub fn wait<K: RingTicket>(&self, ticket: &K) -> Result<K::Landed<'_>> {
        ticket.landed_in(self)
    }

    /// What a ticket names: this ring, and slot `k` at its current transfer, or no
    /// slot (`None`: nothing was queued).
    fn stamp(&self, k: Option<usize>) -> (u64, usize, u64) {
        match k {
            Some(k) => (self.id, k, self.slots[k].generation),
            None => (self.id, usize::MAX, 0),
        }
    }
}

fn missing() -> Error {
    crate::errors::internal("ring slot not prepared")
}

impl std::fmt::Debug for StagingRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagingRing")
            .field("slots", &self.slots.len())
            .field("capacity", &self.capacity())
            .field("stats", &self.stats)
            .finish()
    }
}

#[cfg(test)]
mod tests;
