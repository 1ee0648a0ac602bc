//! [`StagingBuffer`]: the type and its four transfers.

use std::convert::Infallible;
use std::fmt;
use std::time::Instant;

use cuda_core::{
    Context, DeviceSlice, DeviceSliceMut, DeviceView, DeviceViewMut, Error, PinnedBuffer, Result,
    Stream, WaitPolicy,
};

use crate::burst::Burst;
use crate::capacity::{Capacity, GROW_OP};
use crate::config::StagingConfig;
use crate::copy::Copier;
use crate::direction::{Direction, PerDirection};
use crate::elements::{cast, check_transfer, no_bytes};
use crate::events::PipelineEvents;
use crate::fill::FillError;
use crate::page_lock::PageLocks;
use crate::plan::MAX_SLOTS;
use crate::staged::{self, Move, Region};
use crate::stats::StagingStats;
use crate::trace::SpanRoute;
use crate::StagingPod;

mod transfer;
pub(crate) use transfer::Leg;

/// A grow-on-demand, reused page-locked host buffer used to stage transfers.
///
/// See the [crate documentation](crate) for which method to use and the
/// guarantees every method gives.
pub struct StagingBuffer {
    pub(crate) capacity: Capacity,
    pub(crate) stats: StagingStats,
    /// How this buffer routes, copies and waits.
    pub(crate) config: StagingConfig,
    /// The memo of the last page-lock answers.
    page_locks: PageLocks,
    /// One per pipeline slot, for each of the last few contexts used.
    events: PipelineEvents,
    burst: Burst,
    /// Bytes [`StagingBuffer::reserve`] asked for on a thread with no context
    /// current, pinned at the first grow; 0 when none.
    reserved: usize,
}

impl Default for StagingBuffer {
    fn default() -> Self {
        StagingBuffer::new()
    }
}

impl StagingBuffer {
    /// An empty staging buffer: pins nothing until the first transfer needs it.
    ///
    /// Routing stages every size from [`crate::DEFAULT_STAGE_MIN_BYTES`] (see
    /// [`StagingBuffer::set_auto_stage_max_bytes`]), and large host copies use
    /// [`default_copy_threads`](crate::default_copy_threads) threads from the process-wide copy pool.
    pub fn new() -> StagingBuffer {
        StagingBuffer {
            capacity: Capacity::default(),
            stats: StagingStats::default(),
            config: StagingConfig::default(),
            page_locks: PageLocks::default(),
            events: PipelineEvents::default(),
            burst: Burst::default(),
            reserved: 0,
        }
    }

    /// A staging buffer with `bytes` pinned, as [`StagingBuffer::reserve`] pins
    /// them: now in the context current on this thread, or, on a thread with none
    /// current, at its first transfer that pins. Transfers up to that size then
    /// allocate nothing.
    pub fn with_capacity(bytes: usize) -> Result<StagingBuffer> {
        let mut s = StagingBuffer::new();
        s.reserve(bytes)?;
        Ok(s)
    }

    /// Makes sure at least `bytes` are pinned (growing by the usual policy), in the
    /// context of the current pinned buffer or, without one, the context current on
    /// this thread. On a thread with no context current (a buffer made before the
    /// thread ever used the GPU), the bytes are pinned at the buffer's first transfer
    /// that pins, in that transfer's context, and [`StagingBuffer::capacity`] stays
    /// as it is until then. On failure the buffer is unchanged and still usable. A
    /// grow past the [pinned-memory limit](crate::set_pinned_limit) is
    /// [`Error::PinnedLimitExceeded`](crate::Error::PinnedLimitExceeded), before any
    /// driver call.
    pub fn reserve(&mut self, bytes: usize) -> Result<()> {
        if bytes <= self.capacity() {
            return Ok(());
        }
        // Before the context is even looked up: a refusal needs no driver.
        self.capacity.check_budget(GROW_OP, bytes, usize::MAX)?;
        let ctx = match self.capacity.context() {
            Some(c) => c.clone(),
            None => match Context::current() {
                Ok(c) => c,
                Err(Error::NoContext) => {
                    self.reserved = self.reserved.max(bytes);
                    return Ok(());
                }
                Err(e) => return Err(e),
            },
        };
        self.grow(bytes, usize::MAX, &ctx)
    }

    /// Bytes currently pinned.
    pub fn capacity(&self) -> usize {
        self.capacity.bytes()
    }

    /// Releases the pinned memory, and a reservation not yet pinned; the next
    /// transfer pins again. Counters are kept.
    pub fn shrink_to_fit(&mut self) {
        self.capacity.release();
        self.reserved = 0;
    }

    /// Usage counters.
    pub fn stats(&self) -> StagingStats {
        self.stats
    }

    /// Clears the transfer counters (`peak_capacity_bytes` restarts from the current
    /// capacity).
    pub fn reset_stats(&mut self) {
        self.stats = StagingStats {
            peak_capacity_bytes: self.capacity(),
            ..StagingStats::default()
        };
    }

    /// Writes `n` elements straight into pinned memory with `fill`, then copies them
    /// to `dst[..n]`, returning once they have landed.
    ///
    /// `dst` is device memory: a whole [`DeviceBuffer`](crate::DeviceBuffer)
    /// (`&mut buf`) or a writable view of part of one (`&mut buf.slice_mut(a..b)?`),
    /// with the same guarantees either way. `fill` gets exactly `n` elements; what it
    /// leaves there is sent. With `n == 0`, `fill` is called with an empty slice and
    /// nothing else happens. Errors (before any driver call, changing nothing): `n`
    /// past `dst.len()`, a byte count that overflows, `dst` from another context than
    /// `stream`, a grow past the [pinned-memory limit](crate::set_pinned_limit).
    ///
    /// A fill that can fail: [`StagingBuffer::try_upload_with`].
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
        staged::filled_upload(self, "upload_with", (dst, n), stream, None, fill)
            .map_err(FillError::infallible)
    }

    /// [`StagingBuffer::upload_with`] with a `fill` that can fail: when it returns
    /// `Err(e)`, nothing is queued, the device memory is as it was, the transfer
    /// counters are unchanged, and the call returns [`FillError::Fill`]`(e)`, your own
    /// error. Any other error is [`FillError::Cuda`], as `upload_with` would return it
    /// (input errors come before `fill` runs, which then does not run).
    ///
    /// Like a panic in `fill`, a failed fill leaves the buffer valid for the next
    /// call: pinned memory it grew to for this call stays allocated and counted in
    /// [`StagingStats::allocations`].
    ///
    /// ```no_run
    /// use cuda_staging::{Context, DeviceBuffer, FillError, StagingBuffer, Stream};
    ///
    /// let ctx = Context::new(0)?;
    /// let stream = Stream::new(&ctx)?;
    /// let mut staging = StagingBuffer::new();
    /// let mut input = DeviceBuffer::<u8>::alloc(4096)?;
    /// let frame: Option<&[u8]> = None; // the decoder had nothing
    /// match staging.try_upload_with(&mut input, 4096, &stream, |px| match frame {
    ///     Some(f) => cuda_staging::copy_for_dma(px, f).map_err(|_| "bad frame size"),
    ///     None => Err("no frame"),
    /// }) {
    ///     Ok(()) => println!("uploaded"),
    ///     Err(FillError::Fill(why)) => println!("skipped: {why}"),
    ///     Err(FillError::Cuda(e)) => return Err(e),
    /// }
    /// # Ok::<(), cuda_staging::Error>(())
    /// ```
    pub fn try_upload_with<T: StagingPod, E, F: FnOnce(&mut [T]) -> std::result::Result<(), E>>(
        &mut self,
        dst: &mut impl DeviceSliceMut<T>,
        n: usize,
        stream: &Stream,
        fill: F,
    ) -> std::result::Result<(), FillError<E>> {
        staged::filled_upload(self, "try_upload_with", (dst, n), stream, None, fill)
    }

    /// Copies `src[..n]` into pinned memory and returns it there, once it has landed.
    ///
    /// `src` is a whole device buffer (`&buf`) or a view of part of one
    /// (`&buf.slice(a..b)?`). The slice borrows the staging buffer, so it cannot
    /// outlive the next call. With `n == 0` it returns an empty slice and does
    /// nothing. Errors as [`StagingBuffer::upload_with`].
    pub fn download_into<T: StagingPod>(
        &mut self,
        src: &impl DeviceSlice<T>,
        n: usize,
        stream: &Stream,
    ) -> Result<&[T]> {
        let bytes = check_transfer::<T>("download_into", n, src, stream)?;
        if bytes == 0 {
            return Ok(no_bytes(n));
        }
        let m = Move::new("download_into", Direction::DeviceToHost, bytes);
        let src = DeviceView::of(src).into_bytes().subview(..bytes)?;
        self.in_transfer(|s| staged::download(s, &m, stream, |p| stream.memcpy_dtoh(&src, p)))?;
        cast::<T>(self.landed(bytes)?)
    }

    /// Copies all of `src` into `dst[..src.len()]`, returning once it has landed.
    ///
    /// `dst` is a whole device buffer or a writable view of part of one, as for
    /// [`StagingBuffer::upload_with`]. Routing: transfers below
    /// [`StagingConfig::stage_min_bytes`](crate::StagingConfig::stage_min_bytes) go to the driver's own path; otherwise a
    /// page-locked `src` is DMA'd straight from; otherwise transfers up to
    /// [`StagingConfig::stage_max_bytes`](crate::StagingConfig::stage_max_bytes) are staged (a multi-threaded non-temporal
    /// host copy, pipelined against the DMA) and larger ones go to the driver's
    /// pageable path. A transfer that follows a gap and that the calling thread
    /// would copy alone goes to the driver's path too where that is as fast
    /// ([`StagingConfig::driver_after_gap`](crate::StagingConfig::driver_after_gap)). Every route is ordered on `stream` the
    /// same way. A staged transfer that would grow the pinned memory past the
    /// [pinned-memory limit](crate::set_pinned_limit) is an error, never handed to
    /// the pageable path instead.
    pub fn upload<T: StagingPod>(
        &mut self,
        dst: &mut impl DeviceSliceMut<T>,
        src: &[T],
        stream: &Stream,
    ) -> Result<()> {
        let bytes = check_transfer::<T>("upload", src.len(), dst, stream)?;
        if bytes == 0 {
            return Ok(());
        }
        let leg = Leg::Upload {
            src: bytemuck::cast_slice(src),
            dst: DeviceViewMut::of(dst)
                .into_bytes()
                .into_slice_mut(..bytes)?,
        };
        self.transfer(leg, stream)
    }

    /// Fills `dst` from `src[..dst.len()]`, returning once it has landed. `src` is a
    /// whole device buffer or a view of part of one. Routing as
    /// [`StagingBuffer::upload`].
    pub fn download<T: StagingPod>(
        &mut self,
        dst: &mut [T],
        src: &impl DeviceSlice<T>,
        stream: &Stream,
    ) -> Result<()> {
        let bytes = check_transfer::<T>("download", dst.len(), src, stream)?;
        if bytes == 0 {
            return Ok(());
        }
        let leg = Leg::Download {
            src: DeviceView::of(src).into_bytes().subview(..bytes)?,
            dst: bytemuck::cast_slice_mut(dst),
        };
        self.transfer(leg, stream)
    }

    /// Runs `body`, one transfer, between the bookkeeping every transfer does: it
    /// notes when the transfer started (back to back or not) before it, and when it
    /// ended after it, on every exit path, an error returned early (a failed grow, a
    /// refused view) and a panic in the caller's `fill` included (the panic then goes
    /// on). Without it, a transfer that failed left the buffer's last end time at the
    /// transfer before, so the next one could be taken for one after a gap.
    pub(crate) fn in_transfer<R>(&mut self, body: impl FnOnce(&mut StagingBuffer) -> R) -> R {
        self.burst.start(Instant::now());
        // The buffer stays valid when `body` panics (the docs of every call with a
        // `fill` say so): nothing is left half-updated that the bookkeeping reads.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(self)));
        self.burst.end(Instant::now());
        r.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    /// How this buffer's host copies of a transfer whose largest copy is
    /// `copy_bytes` run: on up to [`StagingConfig::copy_threads`](crate::StagingConfig::copy_threads) threads, waking
    /// parked helpers only where they pay (`tuning::helpers_to_wake`; as in a tight
    /// loop when the transfer comes back to back with this buffer's previous ones).
    pub(crate) fn copier(&self, copy_bytes: usize, direction: Direction) -> Copier<'static> {
        let hot = self.burst.back_to_back();
        Copier::for_transfer(self.config.copy_threads, copy_bytes, direction, hot)
    }

    /// The first `bytes` of pinned memory, where a download landed.
    pub(crate) fn landed(&mut self, bytes: usize) -> Result<&[u8]> {
        let landed = self.capacity.buffer(bytes)?.as_slice()?;
        landed.get(..bytes).ok_or_else(staged::too_small)
    }

    /// Grows the pinned memory to at least `bytes` (not past `limit` unless `bytes`
    /// is larger), counting the allocation.
    /// A reservation made on a thread with no context ([`StagingBuffer::reserve`])
    /// is pinned here, at the first grow; should that fail, the error is the
    /// transfer's and the reservation is dropped, so later transfers grow as usual.
    pub(crate) fn grow(&mut self, bytes: usize, limit: usize, ctx: &Context) -> Result<()> {
        let bytes = bytes.max(std::mem::take(&mut self.reserved));
        if let Some(new_cap) = self.capacity.ensure(GROW_OP, bytes, limit, ctx)? {
            self.stats.allocations += 1;
            self.stats.peak_capacity_bytes = self.stats.peak_capacity_bytes.max(new_cap);
        }
        Ok(())
    }

    /// At least `n` pipeline events of `ctx` (kept per context, so a buffer that
    /// switches between GPUs does not re-create them), counting those created.
    fn ensure_events(&mut self, n: usize, ctx: &Context) -> Result<()> {
        // Counted in the closure rather than from `ensure`'s answer, so events
        // made before a failed creation are counted too.
        let mut created = 0;
        let r = self.events.ensure(ctx, n.min(MAX_SLOTS), |ctx| {
            cuda_core::Event::new(ctx).inspect(|_| created += 1)
        });
        self.stats.event_creations += created;
        r.map(drop)
    }
}

impl StagingBuffer {
    /// An empty staging buffer configured by `config`: pins nothing until the first
    /// transfer needs it. Errors as [`StagingBuffer::set_config`].
    pub fn with_config(config: StagingConfig) -> Result<StagingBuffer> {
        let mut s = StagingBuffer::new();
        s.set_config(config)?;
        Ok(s)
    }

    /// How this buffer routes, copies and waits.
    pub fn config(&self) -> StagingConfig {
        self.config
    }

    /// Configures this buffer from the next transfer on. A value no buffer can take
    /// (`copy_threads` of 0 or past [`MAX_COPY_THREADS`](crate::MAX_COPY_THREADS),
    /// `pipeline_chunk_bytes` past
    /// [`PIPELINE_WINDOW_BYTES`](crate::PIPELINE_WINDOW_BYTES)) is
    /// [`Error::InvalidArgument`] naming the field, and changes nothing. The chunk size
    /// is rounded up to 64 KiB.
    pub fn set_config(&mut self, config: StagingConfig) -> Result<()> {
        self.config = config.checked("StagingBuffer::set_config")?;
        Ok(())
    }

    /// The routing threshold of `upload` / `download`: transfers of at most this many
    /// bytes are staged (within the other routing rules), larger ones go to the
    /// driver's pageable path. When the two directions differ, the smaller.
    pub fn auto_stage_max_bytes(&self) -> usize {
        self.config
            .stage_max_bytes
            .upload
            .min(self.config.stage_max_bytes.download)
    }

    /// Sets the routing threshold of both directions
    /// ([`StagingConfig::stage_max_bytes`]), and nothing else: transfers of more
    /// bytes go to the driver's pageable path. `0` sends every non-empty convenience
    /// transfer to the driver; `usize::MAX` (the default) sets no bound.
    /// [`crate::DEFAULT_AUTO_STAGE_MAX_BYTES`] is the seed's 512 KiB.
    pub fn set_auto_stage_max_bytes(&mut self, bytes: usize) {
        self.config.stage_max_bytes = PerDirection::both(bytes);
    }
}

/// A buffer's transfers go through its one pinned region, grown as needed, and
/// return once they have landed.
impl Region for StagingBuffer {
    type Turn = WaitPolicy;

    fn route(batch: bool) -> SpanRoute {
        if batch {
            SpanRoute::Batched
        } else {
            SpanRoute::Staged
        }
    }

    fn take(&mut self, bytes: usize, ctx: &Context) -> Result<(&mut PinnedBuffer<u8>, WaitPolicy)> {
        self.grow(bytes, usize::MAX, ctx)?;
        let policy = self.config.wait_policy;
        Ok((self.capacity.buffer(bytes)?, policy))
    }

    fn before_dma(policy: WaitPolicy, bytes: usize, stream: &Stream) -> WaitPolicy {
        crate::waiting::for_transfer(policy, bytes, stream)
    }

    fn end(&mut self, wait: WaitPolicy, stream: &Stream) -> Result<()> {
        stream.synchronize_with(wait)
    }

    fn bracket<O>(&mut self, body: impl FnOnce(&mut StagingBuffer) -> O) -> O {
        self.in_transfer(body)
    }

    fn count(&mut self, direction: Direction, bytes: usize, batch: bool) {
        if batch {
            self.stats.batched_transfers += 1;
        } else {
            self.stats.staged_transfers += 1;
        }
        self.stats.add_bytes(direction, bytes);
    }
}

impl fmt::Debug for StagingBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StagingBuffer")
            .field("capacity", &self.capacity())
            .field("config", &self.config)
            .field("stats", &self.stats)
            .finish()
    }
}

#[cfg(test)]
mod tests;
