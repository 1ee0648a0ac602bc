//! Reusable pinned host staging for hot-path host↔device transfers.
//!
//! For programs that move the same few tensor shapes between host and GPU hundreds
//! or thousands of times: a video pipeline running the same ONNX models every frame,
//! a robot's perception loop. Pinning fresh memory per call (`cuMemAllocHost`, about
//! 0.75 ms for 150 KiB on our H200 host) costs far more than the transfer;
//! [`StagingBuffer`] pins one host buffer on first use, grows it only when a larger
//! transfer arrives, and reuses it for every transfer after that.
//!
//! # Which call to use
//!
//! Times are medians on an NVIDIA H200 (PCIe Gen5) for a 112x112x3 f32 tensor
//! (150528 B), back to back, from the table at the end; the driver's own pageable
//! copy (`cuMemcpyHtoD` / `DtoH` from a `Vec`) takes 19.3 µs up and 20.9 µs down.
//!
//! | your data | call | what it costs |
//! |---|---|---|
//! | is in a `Vec` or slice you already hold | [`StagingBuffer::upload`] / [`StagingBuffer::download`] | a host copy into or out of pinned memory plus the DMA: 15.6 µs up, 17.0 µs down. Never slower than the driver's own copy: each transfer takes the faster route (see below) |
//! | can be written straight into pinned memory (you decode or preprocess it, or read results in place) | [`StagingBuffer::upload_with`] / [`StagingBuffer::download_into`] | the DMA alone: 10.7 µs up, 9.5 µs down, and the least CPU of any path (only the calling thread runs) |
//! | flows through a pipeline: frame k+1 is prepared while frame k is on the GPU | [`StagingRing`] | returns once the transfer is queued; a [`Ticket`] waits for a download. K pinned slots. An inference-shaped pipeline ran 1.75 times the frames per second of the synchronous buffer |
//! | is several outputs (or inputs) per frame | [`DownloadBatch`] / [`UploadBatch`] | one pinned region and one wait for all parts: a model's four outputs (4096, 16384, 65536 and 150528 B) took 12.5 µs batched, against 31.2 µs one call each |
//! | is produced by code that can fail (a decoder meeting a corrupt frame) | [`StagingBuffer::try_upload_with`] / [`StagingRing::try_upload_with`] | as `upload_with`; an `Err` from your `fill` queues nothing and comes back as your own error ([`FillError::Fill`]) |
//! | goes into, or comes from, part of a device buffer (slot `i` of a `[N, 3, H, W]` batch tensor) | any call above, given a view: `&mut buf.slice_mut(a..b)?` / `&buf.slice(a..b)?` | the same as for a whole buffer: a view is an address and a length, checked when it is made |
//! | lives in cudarc's `CudaSlice`s, on cudarc's streams (feature `cudarc`) | any call above, given `&mut CudarcViewMut::new(&mut slice, &stream)?` / `&CudarcView::new(&slice, &stream)?`, with `stream = Stream::borrow_cudarc(&cu_stream)?` | the same calls and guarantees; cudarc's events are waited for and recorded as its own copies do (`cudarc_bridge`'s docs), at cudarc's cost of one or two event waits per view and one event record per queued copy |
//! | is a frame whose rows carry padding (a decoder's line size, a `cuMemAllocPitch` surface) | [`StagingBuffer::upload_2d`] / [`StagingBuffer::download_2d`]; [`StagingBuffer::upload_2d_with`] / [`StagingBuffer::download_2d_into`] to write or read the rows packed in pinned memory; [`StagingRing::upload_2d`] / [`StagingRing::download_2d`] in a pipeline | a host copy of the rows (skipping the host's padding) plus one `cuMemcpy2DAsync` to the device's pitch, instead of a copy per row or a repack on the CPU; see "2-D frames" below, and the "Pitched 2-D frames" table of `docs/measurements.md` |
//! | moves through any call above, and you are tuning: you want to see which route each transfer took, on how many threads, in how long | any call above, with the optional `tracing` feature and a `tracing` subscriber (see "Seeing which route a transfer took" below) | nothing unless the feature is on; then one `DEBUG` span per transfer with its route, bytes, copy threads and time |
//!
//! Memory you have already page-locked (a [`PinnedBuffer`], a [`HostRegistration`],
//! another library's pinned allocation) needs no staging: `upload` / `download` see
//! that and DMA straight from or into it. To fill pinned memory from data you hold
//! the way `upload` does, use [`copy_for_dma`].
//!
//! **Part of a device buffer.** Every call takes device memory as
//! [`DeviceSlice`] (to read) or [`DeviceSliceMut`] (to write): a whole
//! [`DeviceBuffer`] (`&mut buf`) or a view of part of one (`&mut
//! buf.slice_mut(a..b)?`, `&buf.slice(a..b)?`), with the same ordering, context
//! check, errors and soundness either way. Writing frame `i` of a `[N, 3, H, W]`
//! batch tensor is an upload into `slice_mut(i * frame..(i + 1) * frame)`.
//!
//! **A fill that can fail** (a decoder meeting a corrupt frame):
//! [`StagingBuffer::try_upload_with`] / [`StagingRing::try_upload_with`] take a
//! `fill` returning `Result<(), E>`; an `Err` queues nothing, changes no counter and
//! comes back as [`FillError::Fill`] with your own `E`.
//!
//! **What `upload` / `download` do with your slice.** Per transfer, they pick the
//! faster of: the driver's own pageable copy (small uploads, under
//! [`DEFAULT_STAGE_MIN_BYTES`], and, outside tight loops, uploads that only the
//! calling thread would copy (every one under 2 MiB after a gap of 8 ms or more)
//! and downloads over 512 KiB:
//! [`StagingConfig::driver_after_gap`]); a DMA straight from or
//! into page-locked memory; or staging, where the host copy uses streaming stores
//! (which the DMA reads at full speed), is split over the process-wide copy pool's
//! helper threads, and for large transfers is cut into chunks whose copies overlap
//! the DMA of the others (through a pinned window of at most
//! [`PIPELINE_WINDOW_BYTES`]). [`StagingBuffer::set_auto_stage_max_bytes`] sets one
//! fixed upper threshold instead. Every knob of a buffer is a field of one
//! value, [`StagingConfig`], read by [`StagingBuffer::config`] and set by
//! [`StagingBuffer::set_config`] or [`StagingBuffer::with_config`]; its
//! [`Default`] holds the measured choices.
//!
//! # Seeing which route a transfer took
//!
//! [`StagingStats`] counts transfers by route. To see each one, turn on the
//! optional `tracing` feature (off by default):
//!
//! ```toml
//! cuda-staging = { git = "...", features = ["tracing"] }
//! ```
//!
//! Every transfer that moves bytes then opens one [tracing](https://docs.rs/tracing)
//! span, named `transfer`, target `cuda_staging`, level **`DEBUG`**, entered for the
//! whole call (so a subscriber's busy time is the transfer's time), with these
//! fields:
//!
//! | field | value |
//! |---|---|
//! | `op` | the method, named as its errors name it: `upload`, `download`, `upload_with`, `try_upload_with`, `download_into`, `upload_2d`, `download_2d_into`, `upload_batch`, `download_batch`, `StagingRing::upload`, `StagingRing::download`, ... |
//! | `direction` | `h2d` or `d2h` |
//! | `bytes` | the bytes moved (a 2-D transfer's rows without padding, a batch's parts without the gaps between them) |
//! | `route` | `driver`: the driver's own pageable copy. `staged`: through pinned memory in one piece (so is every `upload_with`, `download_into` and 2-D transfer). `pipelined`: through pinned memory in chunks whose host copies overlap the DMA. `page-locked`: DMA straight from or into your page-locked memory. `batched`: a [`StagingBuffer`] batch. `ring`: a [`StagingRing`] transfer, whose span ends once it is queued |
//! | `chunks` | for `upload` / `download` staged: the pieces (1 when `staged`) |
//! | `parts` | for a batch: its parts |
//! | `copy_threads` | the threads of this crate's host copy, the caller included; 0 where it makes none (`driver`, `page-locked`, `upload_with`, `download_into`, the ring's downloads) |
//! | `helpers` | the copy pool's helpers among them |
//! | `elapsed_us` | the call's time in µs, to a tenth: from after its input checks to its return |
//! | `failed` | `true` when the call returned an error (or `fill` failed or panicked) |
//!
//! A transfer of zero bytes, or one its input checks refuse, makes no span. With
//! tracing-subscriber's fmt layer and `FmtSpan::CLOSE`, each transfer prints one
//! line as it ends (times illustrative):
//!
//! ```text
//! DEBUG transfer{op="download" direction="d2h" bytes=4915200 route="pipelined" chunks=8 copy_threads=4 helpers=3 elapsed_us=131.4}: cuda_staging: close time.busy=132µs time.idle=1.02µs
//! ```
//!
//! ```no_run
//! use tracing_subscriber::filter::{LevelFilter, Targets};
//! use tracing_subscriber::fmt::format::FmtSpan;
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! tracing_subscriber::registry()
//!     .with(tracing_subscriber::fmt::layer().with_span_events(FmtSpan::CLOSE))
//!     .with(Targets::new().with_target("cuda_staging", LevelFilter::DEBUG))
//!     .init();
//! // ... transfers as usual: each one prints its line.
//! ```
//!
//! `examples/tracing.rs` (`cargo run --release -p cuda-staging --features tracing
//! --example tracing`) sends the seed's shapes down every route this way.
//!
//! Cost: without the feature, not a line of it is compiled. With it, a transfer that
//! no subscriber wants `DEBUG` spans of `cuda_staging` for pays tracing's level and
//! callsite checks (relaxed atomic loads) and allocates nothing; a recorded span
//! costs what the subscriber does with it (the fmt layer formats and writes a line),
//! so keep it for tuning rather than for every frame of a production loop.
//!
//! # CPU cost and the copy pool
//!
//! One pool of copy threads serves every buffer and ring in the process:
//! [`pool_threads`] helpers (one fewer than the cores, at most 15; set with the
//! `CUDA_STAGING_COPY_THREADS` environment variable or [`set_copy_pool_threads`], `0`
//! for none), started at the first copy that wants help. Helpers are woken by the
//! transfer that needs them and parked between frames: nothing of the pool runs
//! while your program does other work. A transfer's host copy uses at most
//! [`StagingConfig::copy_threads`] threads, the caller included
//! ([`DEFAULT_COPY_THREADS`], 4). [`pool_stats`] says how many helpers run, how often
//! they were woken and how much CPU they used.
//!
//! CPU per frame, all threads, measured on the 16-core H200 host in the bench run of
//! the table at the end (the full tables, with p50 and p99 beside each figure, are
//! in the workspace's `docs/measurements.md`):
//! - `upload_with` / `download_into` spend 0.93-1.24 times their own median latency
//!   in CPU (a mean over a median: the tail counts): only the calling thread runs.
//! - `upload` / `download` in frame loops (a 2 or 16 ms sleep, or 2 ms of computing,
//!   before each transfer) spend at most 1.59-1.68 times the CPU of the driver's
//!   pageable copy, the most for uploads of 1 to 16 MiB, which run 1.89-2.60 times
//!   faster than it from 4 MiB (at 1 MiB: 1.10 and 1.13 times after 2 ms gaps, 0.89
//!   after 16 ms sleeps). Downloads over 512 KiB and uploads the caller would copy
//!   alone take the driver's path after a gap: its speed (0.94-1.01 times, within
//!   the run's noise) at its CPU (0.96-1.07 times). Back to back: at most 1.93 times
//!   the driver's CPU, for 1.19-2.41 times its speed.
//! - Beside a thread computing on every other core: 0.68-1.44 times the driver's
//!   speed (the slowest an upload of 150528 B) at up to 1.45 times its CPU, and the
//!   neighbours keep at least 0.974 of their throughput (0.968 beside the driver's
//!   own copy).
//! - For the lowest latency, write into or read from the pinned memory itself
//!   ([`StagingBuffer::upload_with`], [`StagingBuffer::download_into`]): only the
//!   DMA moves the data, at 1.15-7.24 times the driver's speed after a gap for
//!   0.14-0.88 times its CPU. (A low-latency mode that kept the copy helpers
//!   spinning between transfers was removed: on the H200 host at 46e199f it reached
//!   1.12-2.21 times `upload` / `download`'s speed after 2 ms gaps, but at 2.4-204
//!   times their CPU in every cell where it gained 15% or more.)
//!
//! # 2-D frames
//!
//! The 2-D calls move `height` rows of `width` elements between host rows that
//! start a pitch apart (in bytes, at least a row) and a 2-D device region: a
//! [`PitchedBuffer`] (from `cuMemAllocPitch`, or a decoder's surface wrapped with
//! [`PitchedBuffer::from_raw_borrowed`]), or rows over a linear buffer
//! ([`DeviceView2dMut::new`]). The device region says how many rows of how many
//! elements; the padding on either side is never read or written. The rows sit
//! packed in pinned memory between (so `upload_2d_with` and `download_2d_into` hand
//! out `width * height` elements, row `r` at `[r * width, (r + 1) * width)`), and
//! one `cuMemcpy2DAsync` moves them all, in stream order like every other transfer.
//! Contiguous host rows are copied as `upload` copies them (split over the copy
//! pool); padded host rows row by row on the calling thread. A pitch shorter than a
//! row, or host rows reaching past the end of the slice, is an error naming the
//! numbers before any driver call. The pinned memory grows and is counted as for
//! the 1-D calls.
//!
//! ```no_run
//! use cuda_staging::{Context, PitchedBuffer, StagingBuffer, Stream};
//!
//! let ctx = Context::new(0)?;
//! let stream = Stream::new(&ctx)?;
//! let mut staging = StagingBuffer::new();
//! // An RGB frame from a decoder: 1920 pixels per row, rows 5824 bytes apart.
//! let (width, height, line_size) = (1920 * 3, 1080, 5824);
//! let frame = vec![0u8; line_size * height];
//! let mut surface = PitchedBuffer::<u8>::alloc(width, height)?;
//! staging.upload_2d(&mut surface, &frame, line_size, &stream)?;
//! // Back, as rows packed in pinned memory:
//! let rows: &[u8] = staging.download_2d_into(&surface, &stream)?;
//! assert_eq!(rows.len(), width * height);
//! # Ok::<(), cuda_staging::Error>(())
//! ```
//!
//! # Waiting for the GPU
//!
//! Every call that returns once its transfer has landed, and every ring wait, waits
//! as its buffer's or ring's [`WaitPolicy`] says ([`StagingConfig::wait_policy`],
//! [`RingConfig::wait_policy`]). The default polls for [`DEFAULT_SPIN`], then
//! polls with [`POLL_SLEEP`] sleeps between: a download queued behind a model's run
//! sleeps through the run instead of spinning a core for it (behind about 1 and 4 ms
//! of GPU work: within 21-48 µs of a spinning wait's latency, for 125-340 µs of CPU
//! per call against the spin's whole wait). A transfer with nothing queued ahead of
//! it keeps a spinning wait's latency. [`WaitPolicy::Spin`] spins through every wait;
//! [`WaitPolicy::Block`] blocks in the driver (the least CPU, 62-104 µs, for
//! 93-152 µs of wake-up).
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
//! page-locked, batched, ring), so changing a tensor's size never silently changes
//! ordering. The stream and the device buffer must belong to the same context
//! ([`cuda_core::Error::ContextMismatch`] otherwise). One buffer may serve several
//! GPUs in turn: its pinned memory is portable, and switching among up to four
//! devices re-pins nothing and creates no events (give each further group of four
//! GPUs a buffer of its own; [`StagingStats::event_creations`] counts them). No
//! pinned memory is reused or freed while a copy still uses it (see `cuda_core`'s
//! crate docs).
//!
//! # Input rules
//!
//! `n` may be smaller than the device buffer (or view): a prefix is moved and the
//! rest of the device memory is untouched. A view's range is checked when it is made
//! (`slice` / `slice_mut` return [`Error::OutOfRange`]); a view from another
//! context than `stream` is [`cuda_core::Error::ContextMismatch`], as a buffer is.
//! `n` larger than the buffer or view, a host slice longer than it, or
//! `n * size_of::<T>()` overflowing is an error before any driver call, and
//! changes nothing. Zero elements is a no-op that succeeds: no driver call, no
//! allocation, counters unchanged (`upload_with` still calls `fill` with an empty
//! slice; `download_into` returns an empty slice).
//!
//! A panic inside `fill` propagates to the caller and leaves the buffer valid: the
//! pinned memory stays allocated and counted, nothing was queued, and the next call
//! works. An `Err` from `try_upload_with`'s `fill` does the same, and comes back as
//! [`FillError::Fill`].
//!
//! # Pinned memory is budgeted
//!
//! Page-locked memory is scarce and shared by everything in the process.
//! [`pinned_bytes`] says how much this crate holds, over every buffer (with its
//! batch regions and pipeline window) and every ring slot; [`set_pinned_limit`] or
//! the [`PINNED_LIMIT_ENV`] environment variable (`CUDA_STAGING_PINNED_LIMIT`, a
//! whole number of bytes, read at first use) caps it. A grow that would pass the cap
//! fails with [`Error::PinnedLimitExceeded`] naming the limit, the bytes held and the
//! bytes asked for, before anything is pinned or copied: the buffer keeps its old
//! memory and works at its old capacity, and no transfer quietly falls back to the
//! pageable path. [`StagingBuffer::shrink_to_fit`] and [`StagingRing::shrink_to_fit`] give
//! memory back; dropping a buffer or ring does too.
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
//! Four frames into the four slots of one `[4, 3, 64, 64]` input, through views,
//! and one slot read back in place:
//!
//! ```no_run
//! use cuda_staging::{Context, DeviceBuffer, StagingBuffer, Stream};
//!
//! # let ctx = Context::new(0)?;
//! # let stream = Stream::new(&ctx)?;
//! let frame = 3 * 64 * 64;
//! let mut batch = DeviceBuffer::<f32>::alloc(4 * frame)?;
//! let mut staging = StagingBuffer::new();
//! for i in 0..4 {
//!     let mut slot = batch.slice_mut(i * frame..(i + 1) * frame)?;
//!     staging.upload_with(&mut slot, frame, &stream, |px| px.fill(i as f32))?;
//! }
//! let third = staging.download_into(&batch.slice(2 * frame..3 * frame)?, frame, &stream)?;
//! assert!(third.iter().all(|&v| v == 2.0));
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
//! Back to back, every path side by side (the workspace's `docs/measurements.md` has
//! the full sweep, frame loops, pipelines and batches).
//!
#![doc = include_str!("../docs/measurements-table.md")]
#![deny(unsafe_op_in_unsafe_fn)]

mod batch;
mod budget;
mod buffer;
mod buffer_2d;
mod burst;
mod capacity;
mod config;
mod copy;
mod cpu_clock;
mod direction;
mod elements;
mod errors;
mod events;
mod fill;
mod job;
mod page_lock;
mod pipeline;
mod plan;
mod pool;
mod region_2d;
mod ring;
mod routing;
mod rows;
mod staged;
mod stats;
mod stores;
mod sync;
mod trace;
mod tuning;
mod waiting;

pub use batch::{DownloadBatch, Landed, Part, UploadBatch, MAX_BATCH_PARTS};
pub use budget::{pinned_bytes, pinned_limit, set_pinned_limit, PINNED_LIMIT_ENV};
pub use buffer::StagingBuffer;
pub use config::StagingConfig;
pub use config::DEFAULT_STAGE_MIN_BYTES;
pub use config::{default_copy_threads, DEFAULT_COPY_THREADS, MAX_COPY_THREADS};
pub use config::{RingConfig, DEFAULT_RING_SLOTS, MAX_RING_SLOTS};
/// The cudarc the `cudarc` feature bridges to.
#[cfg(feature = "cudarc")]
pub use cuda_core::cudarc;
/// cudarc's device memory and streams in every entry point (feature `cudarc`): see
/// the module's docs for what it guarantees, the element types and the CUDA version.
#[cfg(feature = "cudarc")]
pub use cuda_core::cudarc_bridge::{self, CudarcView, CudarcViewMut};
pub use cuda_core::{
    bytemuck, check_deferred_errors, Context, DeviceBuffer, DeviceSlice, DeviceSliceMut,
    DeviceView, DeviceViewMut, Error, Event, HostRegistration, PinnedBuffer, Result, Stream,
    WaitPolicy, DEFAULT_SPIN, MAX_POLL_SLEEP, POLL_SLEEP,
};
pub use cuda_core::{
    DeviceSlice2d, DeviceSlice2dMut, DeviceView2d, DeviceView2dMut, Layout2d, PitchedBuffer,
};
pub use direction::{Direction, PerDirection};
pub use fill::FillError;
pub use plan::PIPELINE_WINDOW_BYTES;
pub use pool::{
    pool_stats, pool_threads, pool_threads_started, set_copy_pool_threads, PoolStats,
    COPY_THREADS_ENV, MAX_POOL_THREADS,
};
pub use ring::{BatchTicket, RingStats, RingTicket, Rows, StagingRing, Ticket, Ticket2d};
pub use stats::StagingStats;
pub use stores::copy_for_dma;

/// A fixed routing threshold for [`StagingBuffer::upload`] / [`StagingBuffer::download`]:
/// 512 KiB.
///
/// `staging.set_auto_stage_max_bytes(DEFAULT_AUTO_STAGE_MAX_BYTES)` gives the
/// seed's routing bound: never stage above 512 KiB, hand larger transfers to the
/// driver's pageable path. [`StagingBuffer::new`] does not start with it: with the
/// multi-threaded, streaming, pipelined host copy the staged path is faster than the
/// driver's from 32 KiB up to the largest size measured on our H200, so the default
/// upper bound is `usize::MAX` (with [`DEFAULT_STAGE_MIN_BYTES`] below).
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
    // A fill's own error goes wherever the caller's error type goes: `?` into a
    // `Box<dyn Error + Send + Sync>`, across threads.
    static_assertions::assert_impl_all!(
        FillError<std::io::Error>: std::error::Error,
        Send,
        Sync,
        From<Error>
    );
}
