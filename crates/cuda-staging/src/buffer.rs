//! [`StagingBuffer`].

use std::ffi::c_void;
use std::fmt;
use std::time::Instant;

use cuda_core::result::{self, is_page_locked_range};
use cuda_core::{byte_len, Context, DeviceBuffer, Error, Event, PinnedBuffer, Result, Stream};

use crate::copy::streams;
use crate::pool::CopyPool;
use crate::stats::StagingStats;
use crate::StagingPod;

/// The largest pinned window the convenience path (`upload` / `download`) grows
/// to. Larger transfers stream through it in chunks, so a 1 GiB `upload` does not pin
/// 1 GiB. `upload_with` / `download_into` hand the caller one contiguous pinned
/// slice and grow to whatever they are asked for.
pub const PIPELINE_WINDOW_BYTES: usize = 8 << 20;

/// Default lower routing bounds, [upload, download]: below them `upload` /
/// `download` hand the copy to the driver. For uploads under 32 KiB the driver's
/// pageable path is as fast as a DMA from pinned memory, so a host copy can only
/// add to it (32-core H200 host, `copy_probe small`, interleaved: 16 KiB 9.87 µs
/// pageable, 9.80 raw pinned, 9.8-10.0 copy plus DMA at best); from 32 KiB staging
/// wins (32 KiB: 10.1-11.4 against 10.7-12.1 µs; 48 KiB: 11.4-12.8 against
/// 14.0-14.9). The 16-core single-GPU H200 host agrees: staging 0.92-0.97x the
/// driver from 4 to 24 KiB, 1.02-1.06x at 32 KiB. Downloads gain from staging at
/// every size.
pub const DEFAULT_STAGE_MIN_BYTES: [usize; 2] = [32 << 10, 0];

/// Per direction (H2D, D2H): with the automatic chunk, transfers up to
/// this size are copied and DMA'd in one piece; larger ones are split into chunks so
/// the host copy of one chunk overlaps the DMA of another.
const PIPELINE_MIN_BYTES: [usize; 2] = [1 << 20, 256 << 10];
/// Below this, the host copy runs on the calling thread alone.
const PARALLEL_MIN_BYTES: usize = 64 << 10;
/// Downloads from this size copy out on at most [`LARGE_DOWNLOAD_THREADS`] threads.
/// Their copy-out reads memory rather than cache, and on the 32-core H200 host more
/// threads then slowed the DMA they compete with: 8 MiB took 254 µs on 8 threads and 276 µs
/// on 16, 16 MiB 522 µs and 631 µs (`copy_probe`, interleaved runs).
const LARGE_DOWNLOAD_BYTES: usize = 8 << 20;
/// See [`LARGE_DOWNLOAD_BYTES`].
const LARGE_DOWNLOAD_THREADS: usize = 8;
/// Each extra copy thread gets at least this much.
const PARALLEL_PART_MIN_BYTES: usize = 16 << 10;
/// The most copy threads a buffer starts.
pub const MAX_COPY_THREADS: usize = 64;
/// Ring slots (and events) the pipeline uses at most.
const MAX_SLOTS: usize = 8;
/// Capacity growth rounds up to this.
const GROW_GRANULE_BYTES: usize = 64 << 10;

/// The direction of a transfer, for per-direction routing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Host to device (`upload`).
    HostToDevice,
    /// Device to host (`download`).
    DeviceToHost,
}

impl Direction {
    fn index(self) -> usize {
        match self {
            Direction::HostToDevice => 0,
            Direction::DeviceToHost => 1,
        }
    }
}

/// How `upload` / `download` move one transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// The driver's own copy from or into the caller's pageable memory.
    Driver,
    /// DMA straight from or into the caller's page-locked memory.
    PageLocked,
    /// Through the pinned buffer.
    Staged,
}

/// One calibration measurement: medians of the two candidate paths at one size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CalibrationSample {
    /// Which direction was timed.
    pub direction: Direction,
    /// Transfer size.
    pub bytes: usize,
    /// Median of the staged path, µs.
    pub staged_us: f64,
    /// Median of the driver's pageable path, µs.
    pub pageable_us: f64,
}

/// What [`StagingBuffer::calibrate`] measured and set.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// The lower routing bound set for uploads.
    pub upload_stage_min_bytes: usize,
    /// The lower routing bound set for downloads.
    pub download_stage_min_bytes: usize,
    /// The routing threshold set for uploads.
    pub upload_stage_max_bytes: usize,
    /// The routing threshold set for downloads.
    pub download_stage_max_bytes: usize,
    /// Every size timed, both directions.
    pub samples: Vec<CalibrationSample>,
}

/// A grow-on-demand, reused page-locked host buffer used to stage transfers.
///
/// See the [crate documentation](crate) for which method to use and the
/// guarantees every method gives.
pub struct StagingBuffer {
    pinned: Option<PinnedBuffer<u8>>,
    stats: StagingStats,
    stage_min: [usize; 2],
    stage_max: [usize; 2],
    copy_threads: usize,
    chunk_bytes: usize,
    pool: Option<CopyPool>,
    events: Vec<Event>,
}

impl Default for StagingBuffer {
    fn default() -> Self {
        StagingBuffer::new()
    }
}

impl StagingBuffer {
    /// An empty staging buffer: pins nothing until the first transfer needs it.
    ///
    /// Routing stages every size (see [`StagingBuffer::set_auto_stage_max_bytes`]),
    /// and large host copies use [`default_copy_threads`] threads.
    pub fn new() -> StagingBuffer {
        StagingBuffer {
            pinned: None,
            stats: StagingStats::default(),
            stage_min: DEFAULT_STAGE_MIN_BYTES,
            stage_max: [usize::MAX; 2],
            copy_threads: default_copy_threads(),
            chunk_bytes: 0,
            pool: None,
            events: Vec::new(),
        }
    }

    /// A staging buffer with `bytes` already pinned, in the context current on this
    /// thread; transfers up to that size then allocate nothing.
    pub fn with_capacity(bytes: usize) -> Result<StagingBuffer> {
        let mut s = StagingBuffer::new();
        s.reserve(bytes)?;
        Ok(s)
    }

    /// Makes sure at least `bytes` are pinned (growing by the usual policy), in the
    /// context of the current pinned buffer or, without one, the context current on
    /// this thread. On failure the buffer is unchanged and still usable.
    pub fn reserve(&mut self, bytes: usize) -> Result<()> {
        if bytes <= self.capacity() {
            return Ok(());
        }
        let ctx = match self.pinned.as_ref().and_then(|p| p.context()) {
            Some(c) => c.clone(),
            None => Context::current()?,
        };
        self.ensure_capacity(bytes, &ctx)
    }

    /// Bytes currently pinned.
    pub fn capacity(&self) -> usize {
        self.pinned.as_ref().map_or(0, |p| p.len())
    }

    /// Releases the pinned memory; the next transfer pins again. Counters are kept.
    pub fn shrink_to_fit(&mut self) {
        self.pinned = None;
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

    /// The routing threshold of `upload` / `download`: transfers of at most this many
    /// bytes are staged, larger ones go to the driver's pageable path. When the two
    /// directions differ (after [`StagingBuffer::calibrate`] or
    /// [`StagingBuffer::set_stage_max_bytes`]), the smaller.
    pub fn auto_stage_max_bytes(&self) -> usize {
        self.stage_max[0].min(self.stage_max[1])
    }

    /// Sets the routing threshold for both directions and clears the lower bounds:
    /// afterwards transfers of at most `bytes` are staged and larger ones go to the
    /// driver's pageable path, exactly as the seed describes. `0` sends every
    /// non-empty convenience transfer to the driver; `usize::MAX` stages all.
    /// [`crate::DEFAULT_AUTO_STAGE_MAX_BYTES`] restores the seed's routing.
    pub fn set_auto_stage_max_bytes(&mut self, bytes: usize) {
        self.stage_max = [bytes; 2];
        self.stage_min = [0; 2];
    }

    /// The lower routing bound of one direction: `upload` / `download` of fewer
    /// bytes go to the driver's pageable path. Defaults to
    /// [`DEFAULT_STAGE_MIN_BYTES`].
    pub fn stage_min_bytes(&self, direction: Direction) -> usize {
        self.stage_min[direction.index()]
    }

    /// Sets the lower routing bound of one direction.
    pub fn set_stage_min_bytes(&mut self, direction: Direction, bytes: usize) {
        self.stage_min[direction.index()] = bytes;
    }

    /// Whether `upload` (`HostToDevice`) or `download` (`DeviceToHost`) of `bytes`
    /// from ordinary pageable memory is staged (`true`) or handed to the driver's
    /// pageable path (`false`). Page-locked slices at or above the lower bound are
    /// DMA'd directly whatever this says.
    pub fn stages(&self, direction: Direction, bytes: usize) -> bool {
        let i = direction.index();
        bytes >= self.stage_min[i] && bytes <= self.stage_max[i]
    }

    /// The routing threshold of one direction.
    pub fn stage_max_bytes(&self, direction: Direction) -> usize {
        self.stage_max[direction.index()]
    }

    /// Sets the routing threshold of one direction.
    pub fn set_stage_max_bytes(&mut self, direction: Direction, bytes: usize) {
        self.stage_max[direction.index()] = bytes;
    }

    /// Threads (the calling one included) that share a large host copy.
    pub fn copy_threads(&self) -> usize {
        self.copy_threads
    }

    /// Sets how many threads (the calling one included) share a large host copy:
    /// `1` keeps every copy on the calling thread and stops the pool's workers. The
    /// workers start at the first copy that uses them, not per transfer. Downloads of
    /// 8 MiB and more copy out on at most 8 of them: their copy-out reads memory
    /// rather than cache, and more threads slowed the DMA they compete with on the
    /// 32-core H200 host (16 MiB: 631 µs on 16 threads, 522 µs on 8).
    pub fn set_copy_threads(&mut self, threads: usize) {
        let threads = threads.clamp(1, MAX_COPY_THREADS);
        if threads != self.copy_threads {
            self.copy_threads = threads;
            self.pool = None;
        }
    }

    /// The chunk size of pipelined `upload` / `download` transfers; 0 (the default)
    /// picks per direction: uploads over 1 MiB in about quarters (256 KiB to 2 MiB),
    /// downloads over 256 KiB in about eighths (256 KiB to 2 MiB).
    pub fn pipeline_chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// Sets the chunk size of pipelined `upload` / `download` transfers (rounded up
    /// to 64 KiB; 0 restores the automatic choice). With a size set, every staged
    /// transfer larger than one chunk is pipelined.
    pub fn set_pipeline_chunk_bytes(&mut self, bytes: usize) {
        self.chunk_bytes = bytes
            .min(PIPELINE_WINDOW_BYTES)
            .next_multiple_of(GROW_GRANULE_BYTES);
    }

    /// Writes `n` elements straight into pinned memory with `fill`, then copies them
    /// to `dst[..n]`, returning once they have landed.
    ///
    /// `fill` gets exactly `n` elements; what it leaves there is sent. With `n == 0`,
    /// `fill` is called with an empty slice and nothing else happens. Errors (before
    /// any driver call, changing nothing): `n` past `dst.len()`, a byte count that
    /// overflows, `dst` from another context than `stream`.
    pub fn upload_with<T: StagingPod, F: FnOnce(&mut [T])>(
        &mut self,
        dst: &mut DeviceBuffer<T>,
        n: usize,
        stream: &Stream,
        fill: F,
    ) -> Result<()> {
        let bytes = check_transfer::<T>("upload_with", n, dst, stream)?;
        if bytes == 0 {
            fill(no_bytes(n));
            return Ok(());
        }
        self.ensure_capacity(bytes, stream.context())?;
        fill(cast_mut::<T>(self.pinned_bytes_mut(bytes)?)?);
        let src = self.pinned_bytes_mut(bytes)?.as_ptr();
        let _g = stream.context().enter()?;
        // SAFETY: `dst` holds at least `bytes` (checked); the pinned range holds
        // `bytes` and is not touched until the stream is synchronised below; the
        // stream is live and its context is current.
        unsafe {
            result::memcpy_htod_async(
                dst.as_device_ptr(),
                src.cast::<c_void>(),
                bytes,
                stream.as_raw(),
            )
        }?;
        finish(stream)?;
        self.stats.staged_transfers += 1;
        self.stats.bytes_uploaded += bytes as u64;
        Ok(())
    }

    /// Copies `src[..n]` into pinned memory and returns it there, once it has landed.
    ///
    /// The slice borrows the staging buffer, so it cannot outlive the next call. With
    /// `n == 0` it returns an empty slice and does nothing. Errors as
    /// [`StagingBuffer::upload_with`].
    pub fn download_into<T: StagingPod>(
        &mut self,
        src: &DeviceBuffer<T>,
        n: usize,
        stream: &Stream,
    ) -> Result<&[T]> {
        let bytes = check_transfer::<T>("download_into", n, src, stream)?;
        if bytes == 0 {
            return Ok(no_bytes(n));
        }
        self.ensure_capacity(bytes, stream.context())?;
        let dst = self.pinned_bytes_mut(bytes)?.as_mut_ptr();
        {
            let _g = stream.context().enter()?;
            // SAFETY: `src` holds at least `bytes`; the pinned range is ours and not
            // touched by the host until the stream is synchronised below.
            unsafe {
                result::memcpy_dtoh_async(
                    dst.cast::<c_void>(),
                    src.as_device_ptr(),
                    bytes,
                    stream.as_raw(),
                )
            }?;
            finish(stream)?;
        }
        // Count only once the view exists, so an error leaves the counters alone.
        let StagingBuffer { pinned, stats, .. } = self;
        let view = match pinned.as_mut() {
            Some(p) if p.len() >= bytes => cast_mut::<T>(&mut p[..bytes])?,
            _ => return Err(internal("pinned buffer smaller than ensured")),
        };
        stats.staged_transfers += 1;
        stats.bytes_downloaded += bytes as u64;
        Ok(view)
    }

    /// Copies all of `src` into `dst[..src.len()]`, returning once it has landed.
    ///
    /// Routing: transfers below [`StagingBuffer::stage_min_bytes`] go to the driver's
    /// own path; otherwise a page-locked `src` is DMA'd straight from; otherwise
    /// transfers up to [`StagingBuffer::stage_max_bytes`] are staged (a multi-threaded
    /// non-temporal host copy, pipelined against the DMA for large transfers) and
    /// larger ones go to the driver's pageable path. Every route is ordered on
    /// `stream` the same way.
    pub fn upload<T: StagingPod>(
        &mut self,
        dst: &mut DeviceBuffer<T>,
        src: &[T],
        stream: &Stream,
    ) -> Result<()> {
        let bytes = check_transfer::<T>("upload", src.len(), dst, stream)?;
        if bytes == 0 {
            return Ok(());
        }
        let srcp = src.as_ptr().cast::<u8>();
        let dstp = dst.as_device_ptr();
        let _g = stream.context().enter()?;
        let route = self.route(Direction::HostToDevice, bytes, srcp.cast());
        match route {
            Route::Staged => {
                let r = self.staged_upload(dstp, srcp, bytes, stream);
                if r.is_err() {
                    // Leave nothing in flight that reads our pinned memory.
                    drain(stream);
                }
                r?;
            }
            Route::Driver | Route::PageLocked => {
                // SAFETY: both ranges hold `bytes`; `src` is borrowed until the sync;
                // the driver stages pageable memory itself.
                unsafe { result::memcpy_htod_async(dstp, srcp.cast(), bytes, stream.as_raw()) }?;
                finish(stream)?;
            }
        }
        self.count(route);
        self.stats.bytes_uploaded += bytes as u64;
        Ok(())
    }

    /// Fills `dst` from `src[..dst.len()]`, returning once it has landed. Routing as
    /// [`StagingBuffer::upload`].
    pub fn download<T: StagingPod>(
        &mut self,
        dst: &mut [T],
        src: &DeviceBuffer<T>,
        stream: &Stream,
    ) -> Result<()> {
        let bytes = check_transfer::<T>("download", dst.len(), src, stream)?;
        if bytes == 0 {
            return Ok(());
        }
        let dstp = dst.as_mut_ptr().cast::<u8>();
        let srcp = src.as_device_ptr();
        let _g = stream.context().enter()?;
        let route = self.route(Direction::DeviceToHost, bytes, dstp.cast());
        match route {
            Route::Staged => {
                let r = self.staged_download(dstp, srcp, bytes, stream);
                if r.is_err() {
                    drain(stream);
                }
                r?;
            }
            Route::Driver | Route::PageLocked => {
                // SAFETY: both ranges hold `bytes`; `dst` is borrowed until the sync;
                // any bytes are a valid `T` (Pod).
                unsafe { result::memcpy_dtoh_async(dstp.cast(), srcp, bytes, stream.as_raw()) }?;
                finish(stream)?;
            }
        }
        self.count(route);
        self.stats.bytes_downloaded += bytes as u64;
        Ok(())
    }

    /// Times the staged path against the driver's pageable path in both directions at
    /// sizes from 4 KiB to 16 MiB on `stream`, and sets each direction's routing:
    /// staging from the smallest timed size where it won (0 when it won at 4 KiB)
    /// up to the largest size of the unbroken run of wins that follows (`usize::MAX`
    /// when the run reaches 16 MiB). Takes well under a second.
    ///
    /// Uses a temporary 16 MiB device buffer. Transfer counters are restored
    /// afterwards; a pinned allocation it makes is counted.
    pub fn calibrate(&mut self, stream: &Stream) -> Result<Calibration> {
        const SIZES: [usize; 9] = [
            4 << 10,
            16 << 10,
            32 << 10,
            64 << 10,
            256 << 10,
            1 << 20,
            4 << 20,
            8 << 20,
            16 << 20,
        ];
        const REPS: usize = 7;
        let max = SIZES[SIZES.len() - 1];
        let _g = stream.context().enter()?;
        let mut dev = DeviceBuffer::<u8>::alloc_in(stream.context(), max)?;
        let mut host: Vec<u8> = (0..max).map(|i| (i % 251) as u8).collect();
        let saved_stats = self.stats;
        let saved_max = self.stage_max;
        let saved_min = self.stage_min;
        let mut samples = Vec::new();
        let outcome = (|| -> Result<()> {
            for direction in [Direction::HostToDevice, Direction::DeviceToHost] {
                for &bytes in &SIZES {
                    let (mut staged, mut pageable) = (Vec::new(), Vec::new());
                    for rep in 0..=REPS {
                        for route_staged in [true, false] {
                            self.stage_max = if route_staged {
                                [usize::MAX; 2]
                            } else {
                                [0; 2]
                            };
                            self.stage_min = [0; 2];
                            let t = Instant::now();
                            match direction {
                                Direction::HostToDevice => {
                                    self.upload(&mut dev, &host[..bytes], stream)?
                                }
                                Direction::DeviceToHost => {
                                    self.download(&mut host[..bytes], &dev, stream)?
                                }
                            }
                            let us = t.elapsed().as_secs_f64() * 1e6;
                            if rep > 0 {
                                if route_staged {
                                    staged.push(us)
                                } else {
                                    pageable.push(us)
                                }
                            }
                        }
                    }
                    samples.push(CalibrationSample {
                        direction,
                        bytes,
                        staged_us: median(&mut staged),
                        pageable_us: median(&mut pageable),
                    });
                }
            }
            Ok(())
        })();
        self.stage_max = saved_max;
        self.stage_min = saved_min;
        self.stats = StagingStats {
            allocations: self.stats.allocations,
            peak_capacity_bytes: self.stats.peak_capacity_bytes,
            ..saved_stats
        };
        outcome?;
        let (up_min, upload) = thresholds_from(&samples, Direction::HostToDevice);
        let (down_min, download) = thresholds_from(&samples, Direction::DeviceToHost);
        self.stage_min = [up_min, down_min];
        self.stage_max = [upload, download];
        Ok(Calibration {
            upload_stage_min_bytes: up_min,
            upload_stage_max_bytes: upload,
            download_stage_min_bytes: down_min,
            download_stage_max_bytes: download,
            samples,
        })
    }

    // ---- internals ----

    /// Which way a convenience transfer of `bytes` to or from `host` goes. Below the
    /// lower bound the page-lock query (one driver call, 0.05 to 0.16 µs on the
    /// 32-core H200 host) is skipped: the driver's path is as fast for page-locked memory as for
    /// pageable there. For a direct DMA the driver must report one page-locked block
    /// holding the whole host range (or, where it reports no extent, both ends must
    /// be page-locked).
    fn route(&self, direction: Direction, bytes: usize, host: *const c_void) -> Route {
        let i = direction.index();
        if bytes < self.stage_min[i] {
            Route::Driver
        } else if is_page_locked_range(host, bytes) {
            Route::PageLocked
        } else if !self.stages(direction, bytes) {
            Route::Driver
        } else {
            Route::Staged
        }
    }

    fn count(&mut self, route: Route) {
        match route {
            Route::Driver => self.stats.direct_transfers += 1,
            Route::PageLocked => self.stats.pinned_source_transfers += 1,
            Route::Staged => self.stats.staged_transfers += 1,
        }
    }

    fn ensure_capacity(&mut self, bytes: usize, ctx: &Context) -> Result<()> {
        self.ensure_capacity_within(bytes, usize::MAX, ctx)
    }

    /// Grows to at least `bytes` by the growth policy, but not past `limit` (unless
    /// `bytes` itself is larger).
    fn ensure_capacity_within(&mut self, bytes: usize, limit: usize, ctx: &Context) -> Result<()> {
        let cap = self.capacity();
        if bytes <= cap {
            return Ok(());
        }
        let new_cap = grow_capacity(cap, bytes)?.min(limit.max(bytes));
        // Allocate the new buffer before dropping the old: a failure leaves the old
        // one in place and usable.
        let new = PinnedBuffer::<u8>::alloc_in(ctx, new_cap)?;
        self.pinned = Some(new);
        self.stats.allocations += 1;
        self.stats.peak_capacity_bytes = self.stats.peak_capacity_bytes.max(new_cap);
        Ok(())
    }

    fn pinned_bytes_mut(&mut self, bytes: usize) -> Result<&mut [u8]> {
        match self.pinned.as_mut() {
            Some(p) if p.len() >= bytes => Ok(&mut p[..bytes]),
            _ => Err(internal("pinned buffer smaller than ensured")),
        }
    }

    /// The pinned window the convenience path uses for a transfer of `bytes`.
    fn window_for(&mut self, bytes: usize, ctx: &Context) -> Result<(*mut u8, usize)> {
        let want = if bytes <= self.capacity().max(PIPELINE_WINDOW_BYTES) {
            bytes
        } else {
            PIPELINE_WINDOW_BYTES
        };
        self.ensure_capacity_within(want, PIPELINE_WINDOW_BYTES, ctx)?;
        let cap = self.capacity();
        let p = self.pinned_bytes_mut(cap)?.as_mut_ptr();
        Ok((p, cap))
    }

    fn ensure_events(&mut self, n: usize, ctx: &Context) -> Result<()> {
        if self
            .events
            .first()
            .is_some_and(|e| !e.context().same_as(ctx))
        {
            self.events.clear();
        }
        while self.events.len() < n {
            self.events.push(Event::new(ctx)?);
        }
        Ok(())
    }

    /// Host copy, split over the pool when large enough.
    ///
    /// # Safety
    /// 1. `src` readable and `dst` writable for `len` bytes, not overlapping, untouched
    ///    by anything else until this returns.
    unsafe fn host_copy(
        &mut self,
        dst: *mut u8,
        src: *const u8,
        len: usize,
        streaming: bool,
        max_threads: usize,
    ) {
        let parts = (len / PARALLEL_PART_MIN_BYTES)
            .min(self.copy_threads)
            .min(max_threads);
        if len >= PARALLEL_MIN_BYTES && parts > 1 {
            if self.pool.is_none() {
                self.pool = CopyPool::new(self.copy_threads - 1).ok();
                if self.pool.is_none() {
                    // No threads to be had: copy on the caller's thread from now on.
                    self.copy_threads = 1;
                }
            }
            if let Some(pool) = self.pool.as_mut() {
                // SAFETY: condition 1.
                unsafe { pool.copy(dst, src, len, streaming, parts) };
                return;
            }
        }
        // SAFETY: condition 1.
        unsafe { crate::copy::copy(dst, src, len, streaming) }
    }

    fn staged_upload(
        &mut self,
        dst: u64,
        src: *const u8,
        bytes: usize,
        stream: &Stream,
    ) -> Result<()> {
        let (base, cap) = self.window_for(bytes, stream.context())?;
        let raw = stream.as_raw();
        let plan = Plan::new(bytes, cap, self.chunk_bytes, Direction::HostToDevice);
        if plan.chunks == 1 {
            // SAFETY: `src` holds `bytes` (the caller's slice); `base` holds `cap >=
            // bytes` (one chunk fits the window); pinned memory is ours.
            unsafe { self.host_copy(base, src, bytes, streams(bytes), usize::MAX) };
            // SAFETY: ranges as above; the stream is synchronised before return.
            unsafe { result::memcpy_htod_async(dst, base.cast(), bytes, raw) }?;
            return finish(stream);
        }
        if plan.reuses() {
            self.ensure_events(plan.slots, stream.context())?;
        }
        for k in 0..plan.chunks {
            let (off, len, slot) = plan.chunk(k);
            // SAFETY: slot offsets stay within `cap` (Plan); `k >= slots` only when
            // reusing, where events exist.
            let p = unsafe { base.add(slot * plan.chunk_bytes) };
            if k >= plan.slots {
                self.events[slot].synchronize()?;
            }
            // SAFETY: `src + off .. + len` is inside the caller's slice; the slot is
            // free (its previous DMA completed, waited on above).
            unsafe { self.host_copy(p, src.add(off), len, streams(len), usize::MAX) };
            // SAFETY: `dst + off + len <= dst + bytes`, inside the device buffer; the
            // slot is not rewritten before its event completes.
            unsafe { result::memcpy_htod_async(dst + off as u64, p.cast(), len, raw) }?;
            if plan.reuses() {
                self.events[slot].record(stream)?;
            }
        }
        finish(stream)
    }

    fn staged_download(
        &mut self,
        dst: *mut u8,
        src: u64,
        bytes: usize,
        stream: &Stream,
    ) -> Result<()> {
        let (base, cap) = self.window_for(bytes, stream.context())?;
        let raw = stream.as_raw();
        let plan = Plan::new(bytes, cap, self.chunk_bytes, Direction::DeviceToHost);
        // Whether pipelined or not (an explicit chunk may leave it in one piece).
        let large_download_threads = if bytes >= LARGE_DOWNLOAD_BYTES {
            LARGE_DOWNLOAD_THREADS
        } else {
            usize::MAX
        };
        if plan.chunks == 1 {
            // SAFETY: `base` holds `cap >= bytes` (one chunk fits the window); the host
            // does not touch it until the stream is synchronised.
            unsafe { result::memcpy_dtoh_async(base.cast(), src, bytes, raw) }?;
            finish(stream)?;
            // SAFETY: `dst` is the caller's slice of `bytes`; the DMA has landed.
            unsafe { self.host_copy(dst, base, bytes, false, large_download_threads) };
            return Ok(());
        }
        self.ensure_events(plan.slots, stream.context())?;
        let issue = |me: &mut Self, k: usize| -> Result<()> {
            let (off, len, slot) = plan.chunk(k);
            // SAFETY: the slot lies inside the window; its previous contents were
            // already copied out by the host (the loop below runs in order).
            unsafe {
                result::memcpy_dtoh_async(
                    base.add(slot * plan.chunk_bytes).cast(),
                    src + off as u64,
                    len,
                    raw,
                )
            }?;
            me.events[slot].record(stream)
        };
        for k in 0..plan.slots.min(plan.chunks) {
            issue(self, k)?;
        }
        for k in 0..plan.chunks {
            let (off, len, slot) = plan.chunk(k);
            self.events[slot].synchronize()?;
            // SAFETY: the chunk's DMA has landed; `dst + off .. + len` is inside the
            // caller's slice.
            // Plain stores: streaming ones into the caller's memory measured slower
            // (4.7 MiB: 245 µs against 203 µs on our H200 host).
            unsafe {
                self.host_copy(
                    dst.add(off),
                    base.add(slot * plan.chunk_bytes),
                    len,
                    false,
                    large_download_threads,
                )
            };
            if k + plan.slots < plan.chunks {
                issue(self, k + plan.slots)?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for StagingBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StagingBuffer")
            .field("capacity", &self.capacity())
            .field("stage_max", &self.stage_max)
            .field("copy_threads", &self.copy_threads)
            .field("chunk_bytes", &self.chunk_bytes)
            .field("stats", &self.stats)
            .finish()
    }
}

/// How a pipelined transfer is cut: `chunks` pieces of `chunk_bytes` (the last may
/// be shorter), going round `slots` slots of the pinned window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Plan {
    bytes: usize,
    chunk_bytes: usize,
    chunks: usize,
    slots: usize,
}

impl Plan {
    /// `chunk` 0 picks the measured default for the direction (see
    /// [`auto_chunk_bytes`]).
    fn new(bytes: usize, window: usize, chunk: usize, direction: Direction) -> Plan {
        let auto = auto_chunk_bytes(bytes, direction);
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

    fn reuses(&self) -> bool {
        self.chunks > self.slots
    }

    /// (offset, length, slot) of chunk `k`.
    fn chunk(&self, k: usize) -> (usize, usize, usize) {
        let off = k * self.chunk_bytes;
        (off, self.chunk_bytes.min(self.bytes - off), k % self.slots)
    }
}

/// The automatic pipeline chunk, from the copy_probe sweeps on the 32-core H200 host
/// (copy threads 1 to 16, chunks 64 KiB to 2 MiB). Uploads pipeline from 1 MiB and do
/// best with about four chunks (4.7 MiB: 130 µs at 1.25 MiB chunks, 156–166 µs at
/// 256 KiB). Downloads pipeline from 256 KiB with smaller chunks, because the host
/// copy-out waits for the first chunk to land: 512 KiB to 2 MiB in 256 KiB chunks
/// (8 threads, 1 MiB: 54.7 µs against 61.9 µs in one piece; 2 MiB: 96.5 against
/// 110), 4.7 MiB in eighths (183–211 µs at 512 KiB chunks, 209–229 µs at 1.25 MiB).
/// Chunks of 64 KiB lose everywhere (each extra DMA costs a few µs). Chunks stop at
/// 2 MiB, and are evened out (4.7 MiB downloads: 8 chunks of 600 KiB).
fn auto_chunk_bytes(bytes: usize, direction: Direction) -> usize {
    if bytes <= PIPELINE_MIN_BYTES[direction.index()] {
        return bytes;
    }
    let (pieces, min) = match direction {
        Direction::HostToDevice => (4, 256 << 10),
        Direction::DeviceToHost => (8, 256 << 10),
    };
    let target = (bytes / pieces)
        .clamp(min, 2 << 20)
        .next_multiple_of(64 << 10);
    // As many chunks as `target` gives, of near-equal size (page multiples), so a
    // transfer just over a multiple of `target` does not end in a sliver that costs
    // a DMA of its own.
    bytes
        .div_ceil(bytes.div_ceil(target))
        .next_multiple_of(4096)
}

/// The growth policy: at least `required`, at least 1.5x the old capacity (so sizes
/// creeping up by a few bytes do not re-pin each time), rounded up to 64 KiB.
pub(crate) fn grow_capacity(old: usize, required: usize) -> Result<usize> {
    let overflow = || Error::SizeOverflow {
        op: "StagingBuffer grow",
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

/// Waits for everything queued on `stream`. If that fails, waits for the whole
/// context too before passing the error on, so no copy is left running into or out
/// of memory handed back to the caller or reused by the next transfer.
fn finish(stream: &Stream) -> Result<()> {
    stream.synchronize().inspect_err(|_| {
        let _ = result::ctx_synchronize();
    })
}

/// After an error with copies possibly queued: wait for them, ignoring errors.
fn drain(stream: &Stream) {
    let _ = finish(stream);
}

/// `n` values of `T` that take no bytes: `n` zero-sized values, or none.
fn no_bytes<'a, T: StagingPod>(n: usize) -> &'a mut [T] {
    if std::mem::size_of::<T>() == 0 {
        // SAFETY: a dangling, aligned, non-null pointer is valid for any number of
        // zero-sized values, and zero-sized values own no memory to alias.
        unsafe { std::slice::from_raw_parts_mut(std::ptr::NonNull::<T>::dangling().as_ptr(), n) }
    } else {
        &mut []
    }
}

/// Validates a transfer of `n` elements against `buf` and `stream`; returns bytes.
fn check_transfer<T: StagingPod>(
    op: &'static str,
    n: usize,
    buf: &DeviceBuffer<T>,
    stream: &Stream,
) -> Result<usize> {
    let bytes = byte_len::<T>(op, n)?;
    if n > buf.len() {
        return Err(Error::ExceedsDeviceBuffer {
            op,
            n,
            len: buf.len(),
        });
    }
    if !buf.context().same_as(stream.context()) {
        return Err(Error::ContextMismatch {
            op,
            what: "the device buffer",
        });
    }
    Ok(bytes)
}

fn cast_mut<T: StagingPod>(bytes: &mut [u8]) -> Result<&mut [T]> {
    bytemuck::try_cast_slice_mut(bytes)
        .map_err(|e| internal(&format!("pinned bytes cannot be viewed as elements: {e}")))
}

fn internal(what: &str) -> Error {
    Error::InvalidArgument {
        op: "StagingBuffer (internal)",
        reason: what.to_owned(),
    }
}

/// The copy-thread default: half the cores, at least 1, at most 16.
///
/// On the 32-core H200 host 16 threads against 8 took downloads of 512 KiB to
/// 4.7 MiB from 29.4 to 26.7 µs, 88.4 to 73.3 µs and 193 to 170 µs (512 KiB, 2 MiB,
/// 4.7 MiB), and left uploads within 4%; `copy_probe`'s interleaved runs.
pub fn default_copy_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).clamp(1, 16))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// (lower, upper) routing bounds from one direction's samples, in ascending size:
/// staging starts at the first size where it won (0 if that is the smallest size)
/// and ends at the last size of the run of wins that follows (`usize::MAX` if the
/// run reaches the largest size). Staging never winning gives (0, 0): everything
/// non-empty goes to the driver.
fn thresholds_from(samples: &[CalibrationSample], direction: Direction) -> (usize, usize) {
    let sizes: Vec<&CalibrationSample> = samples
        .iter()
        .filter(|s| s.direction == direction)
        .collect();
    let wins = |s: &CalibrationSample| s.staged_us <= s.pageable_us;
    let Some(first) = sizes.iter().position(|s| wins(s)) else {
        return (0, 0);
    };
    let min = if first == 0 { 0 } else { sizes[first].bytes };
    match sizes[first..].iter().position(|s| !wins(s)) {
        None => (min, usize::MAX),
        Some(k) => (min, sizes[first + k - 1].bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_is_at_least_required_and_one_and_a_half_times() {
        assert_eq!(grow_capacity(0, 1).unwrap(), 64 << 10);
        assert_eq!(grow_capacity(0, 150_528).unwrap(), 192 << 10);
        // Creeping by a few bytes re-pins far less than once per step.
        let mut cap = grow_capacity(0, 150_528).unwrap();
        let mut grows = 0;
        for extra in (0..200_000).step_by(16) {
            let want = 150_528 + extra;
            if want > cap {
                cap = grow_capacity(cap, want).unwrap();
                grows += 1;
            }
        }
        assert!(grows <= 3, "{grows} grows");
        assert!(cap >= 350_528);
        assert_eq!(grow_capacity(1 << 20, (1 << 20) + 1).unwrap(), 3 << 19);
        assert_eq!(grow_capacity(1 << 20, 8 << 20).unwrap(), 8 << 20);
    }

    #[test]
    fn growth_near_usize_max_is_an_error_not_a_panic() {
        assert!(matches!(
            grow_capacity(0, usize::MAX),
            Err(Error::SizeOverflow { .. })
        ));
        let big = usize::MAX / 4 * 3;
        assert_eq!(
            grow_capacity(big, big + 1).unwrap(),
            (big + 1).next_multiple_of(64 << 10)
        );
    }

    #[test]
    fn automatic_chunks_leave_no_sliver() {
        for (bytes, direction) in [
            ((256 << 10) + 1, Direction::DeviceToHost),
            ((2 << 20) + 1, Direction::DeviceToHost),
            (4_915_200, Direction::DeviceToHost),
            ((1 << 20) + 1, Direction::HostToDevice),
            ((8 << 20) + 4097, Direction::HostToDevice),
        ] {
            let p = Plan::new(bytes, PIPELINE_WINDOW_BYTES, 0, direction);
            assert!(p.chunks >= 2, "{p:?}");
            let (_, last, _) = p.chunk(p.chunks - 1);
            assert!(
                last * 2 >= p.chunk_bytes,
                "sliver: {p:?}, last chunk {last} B"
            );
            assert_eq!(p.chunk_bytes % 4096, 0, "{p:?}");
        }
        // At or below the pipelining bound a transfer stays in one piece.
        assert_eq!(
            Plan::new(256 << 10, 1 << 20, 0, Direction::DeviceToHost).chunks,
            1
        );
        assert_eq!(
            Plan::new(1 << 20, 1 << 20, 0, Direction::HostToDevice).chunks,
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
            let p = Plan::new(bytes, window, 0, Direction::HostToDevice);
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
        fn growth_policy_holds_for_any_sizes(old in 0usize..(1 << 44), required in proptest::prelude::any::<usize>()) {
            match grow_capacity(old, required) {
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

        #[test]
        fn any_plan_covers_every_byte_once_inside_the_window(
            bytes in 1usize..(512usize << 20),
            window in (64usize << 10)..(80usize << 20),
            chunk_granules in 0usize..(PIPELINE_WINDOW_BYTES / GROW_GRANULE_BYTES),
            h2d in proptest::prelude::any::<bool>(),
        ) {
            // 0 is the automatic choice; anything else is what set_pipeline_chunk_bytes stores.
            let direction = if h2d { Direction::HostToDevice } else { Direction::DeviceToHost };
            let p = Plan::new(bytes, window, chunk_granules * GROW_GRANULE_BYTES, direction);
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

    #[test]
    fn thresholds_bound_the_run_of_staging_wins() {
        let s = |bytes, staged_us, pageable_us| CalibrationSample {
            direction: Direction::HostToDevice,
            bytes,
            staged_us,
            pageable_us,
        };
        let h2d = Direction::HostToDevice;
        assert_eq!(
            thresholds_from(&[s(1, 1.0, 2.0), s(2, 1.0, 2.0)], h2d),
            (0, usize::MAX)
        );
        assert_eq!(
            thresholds_from(&[s(1, 1.0, 2.0), s(2, 3.0, 2.0), s(4, 1.0, 2.0)], h2d),
            (0, 1)
        );
        assert_eq!(
            thresholds_from(&[s(1, 3.0, 2.0), s(2, 1.0, 2.0), s(4, 1.0, 2.0)], h2d),
            (2, usize::MAX)
        );
        assert_eq!(
            thresholds_from(&[s(1, 3.0, 2.0), s(2, 1.0, 2.0), s(4, 3.0, 2.0)], h2d),
            (2, 2)
        );
        assert_eq!(thresholds_from(&[s(1, 3.0, 2.0)], h2d), (0, 0));
        assert_eq!(
            thresholds_from(&[s(1, 3.0, 2.0)], Direction::DeviceToHost),
            (0, 0)
        );
    }

    #[test]
    fn default_routing_hands_small_uploads_to_the_driver() {
        let mut s = StagingBuffer::new();
        assert!(!s.stages(Direction::HostToDevice, 4096));
        assert!(!s.stages(Direction::HostToDevice, (32 << 10) - 1));
        assert!(s.stages(Direction::HostToDevice, 32 << 10));
        assert!(s.stages(Direction::HostToDevice, 64 << 20));
        assert!(s.stages(Direction::DeviceToHost, 1));
        s.set_auto_stage_max_bytes(crate::DEFAULT_AUTO_STAGE_MAX_BYTES);
        assert!(s.stages(Direction::HostToDevice, 1));
        assert!(s.stages(Direction::HostToDevice, 512 << 10));
        assert!(!s.stages(Direction::HostToDevice, (512 << 10) + 1));
        s.set_stage_min_bytes(Direction::DeviceToHost, 100);
        assert!(!s.stages(Direction::DeviceToHost, 99));
        assert_eq!(s.stage_min_bytes(Direction::DeviceToHost), 100);
    }

    #[test]
    fn new_pins_nothing_and_defaults_are_documented() {
        let s = StagingBuffer::new();
        assert_eq!(s.capacity(), 0);
        assert_eq!(s.stats(), StagingStats::default());
        assert_eq!(s.auto_stage_max_bytes(), usize::MAX);
        assert!(s.copy_threads() >= 1 && s.copy_threads() <= 16);
    }

    #[test]
    fn thresholds_are_set_per_direction_and_together() {
        let mut s = StagingBuffer::new();
        s.set_auto_stage_max_bytes(crate::DEFAULT_AUTO_STAGE_MAX_BYTES);
        assert_eq!(s.auto_stage_max_bytes(), 512 * 1024);
        s.set_stage_max_bytes(Direction::DeviceToHost, 0);
        assert_eq!(s.stage_max_bytes(Direction::HostToDevice), 512 * 1024);
        assert_eq!(s.auto_stage_max_bytes(), 0);
        s.set_auto_stage_max_bytes(usize::MAX);
        assert_eq!(s.stage_max_bytes(Direction::DeviceToHost), usize::MAX);
        s.set_copy_threads(0);
        assert_eq!(s.copy_threads(), 1);
    }
}
