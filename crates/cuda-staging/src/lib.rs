//! Reusable pinned host staging for hot-path host↔device transfers.
//!
//! [`StagingBuffer`] owns one page-locked host allocation, pinned on first use,
//! grown only when a larger transfer arrives, and reused for every transfer after
//! that. It is for programs that move the same few tensor shapes between host and
//! GPU hundreds or thousands of times (a video pipeline running the same ONNX models
//! every frame), where pinning fresh memory per call (`cuMemAllocHost`, about
//! 0.75 ms for 150 KiB on our H200 host) would cost far more than the transfer.
//! [`StagingRing`] is its asynchronous sibling, and [`DownloadBatch`] /
//! [`UploadBatch`] move several tensors with one wait.
//!
//! # Which API to use
//!
//! * [`StagingBuffer::upload_with`] / [`StagingBuffer::download_into`]: your code
//!   writes its data straight into pinned memory, or reads results straight out of
//!   it. No extra host copy exists; the DMA engine moves your bytes directly. This
//!   is the fast path: reach for it whenever you produce or consume the data
//!   yourself (preprocessing a frame, reading logits). To fill the pinned slice
//!   from memory you already hold, [`copy_for_dma`] writes it the way `upload`
//!   does (from 32 KiB with streaming stores, which the DMA reads at full speed).
//! * [`StagingBuffer::upload`] / [`StagingBuffer::download`]: take an ordinary
//!   `&[T]` / `&mut [T]`. They must copy between your memory and pinned memory,
//!   and a naive single-threaded copy loses to the driver's own pageable path. So
//!   these methods do better than naive:
//!   - a slice that is already page-locked (a [`cuda_core::PinnedBuffer`], a
//!     [`cuda_core::HostRegistration`], driver-allocated memory) is DMA'd straight
//!     from, with no copy (the driver is asked about the range with one call of about
//!     0.1 µs; the answer is remembered for the same range for the next 64 transfers,
//!     which is safe either way: a wrong answer only picks a slower route);
//!   - otherwise the host copy is split over the process-wide copy pool (below);
//!     uploads from 32 KiB write pinned memory with non-temporal stores, which the
//!     following DMA reads at full speed; large transfers (uploads over 1 MiB,
//!     downloads over 512 KiB) are cut into chunks so the copy of one overlaps the
//!     DMA of another, through a pinned window of at most [`PIPELINE_WINDOW_BYTES`];
//!     uploads of 64 KiB to 1 MiB that find the pool's threads asleep are cut in two,
//!     so the calling thread's copy of the second half overlaps the first's DMA;
//!   - routing is per direction: transfers below
//!     [`StagingBuffer::stage_min_bytes`] or above
//!     [`StagingBuffer::stage_max_bytes`] go to the driver's pageable path instead.
//!     The shipped default ([`DEFAULT_STAGE_MIN_BYTES`]) hands uploads under 32 KiB
//!     to the driver, which copies such small pageable uploads inline as fast as a
//!     DMA from pinned memory, and stages everything else, because on our H200
//!     the staged path beats the driver there (table below);
//!     [`StagingBuffer::calibrate`] re-measures on your machine and sets the
//!     thresholds, and [`DEFAULT_AUTO_STAGE_MAX_BYTES`] restores the seed's fixed
//!     512 KiB routing.
//! * [`StagingRing`]: uploads and downloads that return as soon as they are queued,
//!   through K event-guarded pinned slots, so frame k+1's preprocessing overlaps
//!   frame k's transfers and GPU work (double buffering, as PyTorch's caching host
//!   allocator, DeepStream and DALI do), with borrow-checked safety: a download
//!   returns a [`Ticket`] that is redeemed in place and refuses a reused slot.
//! * [`DownloadBatch`] / [`UploadBatch`]: a model's several outputs (boxes, scores,
//!   classes) or inputs through one pinned region with one wait instead of one each
//!   (`cuMemcpyBatchAsync` where the driver has it).
//!
//! # The copy pool, frame loops and CPU cost
//!
//! One pool of copy threads serves every buffer and ring in the process:
//! [`pool_threads`] helpers (one fewer than the cores, at most 15; set with
//! `CUDA_STAGING_COPY_THREADS` or [`set_copy_pool_threads`], `0` for none), started
//! at the first copy that wants help, parked between transfers. A transfer's host
//! copy is split over at most [`StagingBuffer::copy_threads`] threads, the caller
//! included ([`DEFAULT_COPY_THREADS`], 4; a download's copy-out over at most 3);
//! concurrent transfers share the free helpers, and none waits for another's copy.
//! [`pool_stats`] says how many helpers run, how often they were woken, and how much
//! CPU they have used.
//!
//! Helpers are woken by the transfer that needs them and spin only while work is
//! microseconds away:
//! - After a gap (a frame loop), an upload under 512 KiB and a download under
//!   2 MiB are copied by the caller alone (an upload of 64 KiB or more in two
//!   halves, so the copy of the second overlaps the DMA of the first): a parked
//!   thread on this host's idle cores takes 20-60 µs to run (median, bare threads),
//!   longer than such a copy. A larger copy wakes one helper per 512 KiB, up to the
//!   copy threads; the caller starts at once and the helpers take the parts left
//!   when they arrive. A pipelined download wakes them when it starts.
//! - A helper spins 50 µs after its part while more of the same transfer is
//!   coming, and after the transfer's last part only in a tight loop; otherwise it
//!   parks at once. Nothing of the pool runs between frames.
//! - A buffer called in a tight loop (its third transfer or later with gaps under
//!   200 µs) uses one helper per 512 KiB of copy, at least one from 64 KiB. A
//!   download of up to 512 KiB with helpers hands them its copy-out before it waits
//!   for its DMA: they prefetch their part of the destination and copy the moment
//!   it lands (a helper still waiting after 100 µs hands its part back).
//! - No transfer enlists more helpers than the machine has idle cores (the kernel's
//!   count of runnable threads, read at most every 10 ms): with every core busy a
//!   helper only takes a core from the program's other threads, and the copy waits
//!   for whoever the OS preempts.
//! - [`StagingBuffer::set_low_latency`] keeps the buffer's helpers spinning between
//!   transfers instead: **one core per helper, continuously**, while transfers keep
//!   coming at least every 100 ms.
//!
//! **CPU per frame**, measured on the 16-core H200 host (the full tables, with p50
//! and p99 beside each CPU figure, are below; the driver is the faster of its
//! pageable paths in the same run):
//! - Frame loops (a 2 ms or 16 ms sleep, or 2 ms of computing, before each
//!   transfer): `upload` / `download` spend 0.87-1.09 times the driver's CPU up to
//!   196608 B, where they run at 0.89-1.13 times its speed, and 1.34-2.04 times its
//!   CPU from 4 MiB, where they run 1.26-2.73 times faster (4915200 B uploaded after
//!   a 2 ms sleep: 323 µs for 1000 µs of CPU, against the driver's 712 µs for
//!   705 µs). `upload_with` / `download_into` spend 0.14-0.83 times the driver's
//!   CPU. The pool this replaced spent 4.7-6.9 ms of CPU per frame at every size.
//! - Back to back: 1.21-1.74 times the driver's CPU, 1.17-2.61 times its speed.
//! - With a thread computing on every other core: within 0.76-1.15 times the
//!   driver's CPU and 0.79-1.47 times its speed; the neighbours keep 0.92-1.05 of
//!   their throughput (0.96-1.05 beside the driver).
//! - Low-latency mode: 6.1-8.8 ms of CPU per frame at 500 frames/s and 49-52 ms at
//!   60 frames/s, for 0.62-1.97 times the default's speed after a gap.
//! - Above budget: downloads of 1 MiB after a gap cost 2.3-2.9 times the driver's
//!   CPU at 0.81-0.98 times its speed in that run; they now copy out on the caller
//!   alone (a probe after it: 1.03 times the speed for 0.97 times the CPU after a
//!   2 ms sleep, 0.78 times for 1.30 times after 16 ms).
//!
//! # Stream semantics
//!
//! Every [`StagingBuffer`] method is synchronous from the caller's thread: it
//! returns only once the transfer has fully landed, like `DeviceBuffer::copy_from_host`
//! / `copy_to_host`, so a `StagingBuffer` is a drop-in replacement and the next
//! call may overwrite the same pinned bytes. [`StagingRing`] returns once the
//! transfer is queued; its tickets wait.
//!
//! Every transfer is queued on the `stream` you pass: an upload lands after work
//! already queued on `stream`, and a download observes the results of work
//! already queued on it. This holds on every route (staged, pipelined, pageable,
//! page-locked source, batched, ring), so changing a tensor's size never silently
//! changes ordering. The stream and the device buffer must belong to the same
//! context ([`cuda_core::Error::ContextMismatch`] otherwise). One buffer may serve
//! several GPUs in turn: its pinned memory is portable (every context DMAs from
//! it), and it keeps the pipeline events of the last four contexts it used, so
//! switching among up to four devices re-pins nothing and creates no events (a
//! buffer cycling through more re-creates the events of the one it returns to;
//! give each group of four GPUs a buffer of its own)
//! ([`StagingStats::event_creations`]). Every DMA goes through
//! `cuda-core`'s tracked stream operations, so no pinned memory is reused or freed
//! while a copy still uses it (see `cuda_core`'s crate docs).
//!
//! # Input rules
//!
//! `n` may be smaller than the device buffer: a prefix is moved and the rest of the
//! device buffer is untouched. `n` larger than the buffer, a host slice longer than
//! it, or `n * size_of::<T>()` overflowing is an error before any driver call, and
//! changes nothing. Zero elements is a no-op that succeeds: no driver call, no
//! allocation, counters unchanged (`upload_with` still calls `fill` with an empty
//! slice; `download_into` returns an empty slice).
//!
//! A panic inside `fill` propagates to the caller and leaves the buffer valid: the
//! pinned memory stays allocated and counted, nothing was queued, and the next call
//! works.
//!
//! # When the GPU faults
//!
//! A kernel that faults (say `CUDA_ERROR_ILLEGAL_ADDRESS`) poisons the context for
//! the whole process, and only a restart recovers; `cuda_core`'s crate docs have the
//! details ("When the GPU faults"). For this crate: the transfer in flight and every
//! later call of a [`StagingBuffer`], [`StagingRing`] or batch in that context
//! returns the error, none hangs, and the copy pool's threads park; dropping them
//! records their errors for [`check_deferred_errors`] and never panics;
//! [`Error::is_sticky`] tells such an error ("restart the process") from one of a
//! single call. `tests/faults.rs` raises a real fault to check it.
//!
//! # Example
//!
//! ```no_run
//! use cuda_staging::{Context, DeviceBuffer, StagingBuffer, Stream};
//!
//! let ctx = Context::new(0)?;
//! let stream = Stream::new(&ctx)?;
//! let mut staging = StagingBuffer::new();
//! let mut d_input = DeviceBuffer::<f32>::alloc(3 * 640 * 640)?;
//!
//! // Per frame: write preprocessed pixels straight into pinned memory.
//! staging.upload_with(&mut d_input, 3 * 640 * 640, &stream, |dst: &mut [f32]| {
//!     for (i, v) in dst.iter_mut().enumerate() {
//!         *v = i as f32; // real code: normalised pixel data
//!     }
//! })?;
//! assert_eq!(staging.stats().allocations, 1);
//! # Ok::<(), cuda_staging::Error>(())
//! ```
//!
//! The slice `download_into` returns borrows the buffer, so it cannot be kept
//! across the next transfer:
//!
//! ```compile_fail
//! # use cuda_staging::{DeviceBuffer, StagingBuffer, Stream};
//! # fn f(staging: &mut StagingBuffer, d: &DeviceBuffer<f32>, s: &Stream) -> cuda_staging::Result<()> {
//! let first = staging.download_into(d, 4, s)?;
//! let second = staging.download_into(d, 4, s)?; // error: `staging` still borrowed
//! assert_eq!(first, second);
//! # Ok(()) }
//! ```
//!
//! # Measured
//!
#![doc = include_str!("../docs/measurements-table.md")]
#![deny(unsafe_op_in_unsafe_fn)]

mod batch;
mod buffer;
mod burst;
mod calibration;
mod capacity;
mod copy;
mod cpu;
mod cpu_clock;
mod elements;
mod events;
mod job;
mod pipeline;
mod pool;
mod prefetch;
mod ring;
mod routing;
mod settings;
mod stats;
mod sync;
mod tuning;
mod waiting;

pub use batch::{DownloadBatch, Landed, Part, UploadBatch, MAX_BATCH_PARTS};
pub use buffer::{default_copy_threads, StagingBuffer, DEFAULT_COPY_THREADS, MAX_COPY_THREADS};
pub use calibration::{Calibration, CalibrationSample};
pub use copy::copy_for_dma;
#[doc(hidden)]
pub use copy::copy_streaming;
pub use cuda_core::{
    bytemuck, check_deferred_errors, Context, DeviceBuffer, Error, Event, HostRegistration,
    PinnedBuffer, Result, Stream, WaitPolicy, DEFAULT_SPIN, POLL_SLEEP,
};
pub use pipeline::PIPELINE_WINDOW_BYTES;
pub use pool::{
    pool_stats, pool_threads, pool_threads_started, set_copy_pool_threads, PoolStats,
    COPY_THREADS_ENV, MAX_POOL_THREADS,
};
pub use ring::{BatchTicket, RingStats, StagingRing, Ticket, DEFAULT_RING_SLOTS, MAX_RING_SLOTS};
pub use routing::{Direction, PerDirection, DEFAULT_STAGE_MIN_BYTES};
pub use stats::StagingStats;
#[doc(hidden)]
pub use tuning::{pool_tuning, set_pool_tuning, PoolTuning};

/// The seed's routing threshold for [`StagingBuffer::upload`] / [`StagingBuffer::download`]:
/// 512 KiB.
///
/// Kept as the documented compatibility value:
/// `staging.set_auto_stage_max_bytes(DEFAULT_AUTO_STAGE_MAX_BYTES)` restores the
/// seed's behaviour (stage at or below 512 KiB, hand larger transfers to the
/// driver's pageable path). [`StagingBuffer::new`] no longer starts with it: with
/// the multi-threaded, non-temporal, pipelined host copy the staged path is faster
/// than the driver's from 32 KiB up to the largest size measured on our H200, so the
/// default upper bound is `usize::MAX` (with [`DEFAULT_STAGE_MIN_BYTES`] below), and
/// [`StagingBuffer::calibrate`] adjusts both per machine.
pub const DEFAULT_AUTO_STAGE_MAX_BYTES: usize = 512 * 1024;

/// Types for which every bit pattern is a valid value, so they can be staged
/// through raw pinned bytes.
///
/// Implemented for every [`bytemuck::Pod`] type: derive `bytemuck::Pod` and
/// `bytemuck::Zeroable` on your own `#[repr(C)]` struct (with bytemuck's `derive`
/// feature) and it works with every method of [`StagingBuffer`].
///
/// ```
/// #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
/// #[repr(C)]
/// struct Detection { x: f32, y: f32, score: f32, class: u32 }
///
/// fn takes_pod<T: cuda_staging::StagingPod>() {}
/// takes_pod::<Detection>();
/// ```
pub trait StagingPod: bytemuck::Pod {}

impl<T: bytemuck::Pod> StagingPod for T {}

#[cfg(test)]
mod tests {
    use super::*;

    static_assertions::assert_impl_all!(StagingBuffer: Send, Default);
    static_assertions::assert_impl_all!(StagingStats: Copy, Default, std::fmt::Debug, PartialEq);
}
