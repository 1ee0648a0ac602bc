//! A candle frame pipeline fed by cuda-staging, against candle's own uploads.
//!
//! ```text
//! examples/candle/install-cuda.sh && source target/cuda-13.0/env.sh
//! cd examples/candle && cargo run --release
//! ```
//!
//! Per frame, a small candle model (conv2d 3→16, 3x3, stride 2; relu; mean over the
//! image; matmul to 10 outputs) runs on a 3xHxW f32 frame, at 224x224 and 640x640,
//! on candle's default device, `Device::new_cuda(0)` (cudarc's per-thread stream).
//! Each way times the whole frame, producing its pixels included, as a decoder would
//! write them:
//!
//! - **candle**: the pixels are written into a `Vec`, then `Tensor::from_slice`,
//!   the model, `to_vec1` (candle's own pageable copies);
//! - **StagingBuffer, fill**: `upload_with` writes the pixels straight into pinned
//!   memory and uploads them; the output comes back by `download_into`;
//! - **StagingBuffer, from a Vec**: the pixels written into a `Vec`, then `upload`;
//! - **StagingRing, fill**: `upload_with` writes frame k into a ring slot and
//!   queues it, the model and the output's download, then waits for frame k-1's
//!   output: frame k's pixels are produced while the GPU runs frame k-1;
//! - **StagingRing, from a Vec**: the same with `upload` from a `Vec`.
//!
//! Every output is checked bit for bit against candle's own for the same frame. The
//! ways run in turn, `ROUNDS` times; frames/s and CPU per frame (the process's, all
//! threads, and the loop's thread alone) are the medians over rounds, p50 and p99 over
//! all timed frames. The ratios to candle's own are the medians of each round's ratio
//! (a way against candle's run of the same round), so that a host whose speed drifts
//! between rounds moves both sides of each ratio alike. After each table: the loop's time per step and every other
//! thread's CPU by name, per way; then floors measured on this host (producing the
//! pixels into a `Vec` and into pinned memory, candle queueing the model on an input
//! already on the GPU, the model with its output read back, the ring's copies as bare
//! driver calls, a bare synchronous upload) and the most a pipelined and a
//! synchronous way could reach from them against candle's frames/s.
//!
//! The adapter between the two is [`Gpu::write_into`], which lends the input tensor's
//! `CudaSlice` to a staging upload (the tensor is made once and rewritten every frame:
//! on the H200, a new tensor per frame made the synchronous way at 640² 13-17% slower),
//! and [`Gpu::with_output`], which lends a tensor's `CudaSlice` to a download.
//!
//! Without a GPU it says so on stderr and exits with status 1; a differing output or
//! any error also exits with status 1.

use std::cell::RefCell;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use candle_core::{CpuStorage, CudaStorage, DType, Device, InplaceOp1, Layout, Storage, Tensor};
use cuda_staging::cudarc::driver::CudaSlice;
use cuda_staging::{CudarcView, CudarcViewMut, StagingBuffer, StagingRing, Stream, Ticket};

/// Frames per way and round before the timed ones.
const WARMUP_FRAMES: usize = 20;
/// Timed frames per way and round.
const FRAMES: usize = 300;
/// Rounds of all ways, in turn (odd: each median is one round's).
const ROUNDS: usize = 9;
/// The model's outputs per frame.
const OUTPUTS: usize = 10;
/// The model's conv2d output channels.
const CHANNELS: usize = 16;

type Res<T> = Result<T, String>;

fn cuda(what: &'static str) -> impl Fn(cuda_staging::Error) -> String {
    move |e| format!("{what}: {e}")
}

fn candle(what: &'static str) -> impl Fn(candle_core::Error) -> String {
    move |e| format!("{what}: {e}")
}

/// Writes frame `k` of `side`x`side` pixels into `px` (3 planes), as a decoder's
/// last step would: 8-bit samples scaled to [0, 1]. Every value depends on the frame,
/// the plane and the position.
fn produce(k: usize, side: usize, px: &mut [f32]) {
    for (c, plane) in px.chunks_exact_mut(side * side).enumerate() {
        for (y, row) in plane.chunks_exact_mut(side).enumerate() {
            let base = (k * 31 + c * 7 + y * 5) as u32;
            for (x, v) in (0u32..).zip(row.iter_mut()) {
                *v = (base.wrapping_add(x * 3) & 255) as f32 * (1.0 / 255.0);
            }
        }
    }
}

/// The model: fixed weights, made once on the device.
struct Model {
    conv: Tensor,
    fc: Tensor,
}

impl Model {
    fn new(dev: &Device) -> Res<Model> {
        let w = |n: usize, scale: f32| -> Vec<f32> {
            (0..n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) * scale)
                .collect()
        };
        Ok(Model {
            conv: Tensor::from_vec(w(CHANNELS * 27, 0.01), (CHANNELS, 3, 3, 3), dev)
                .map_err(candle("conv weights"))?,
            fc: Tensor::from_vec(w(CHANNELS * OUTPUTS, 0.02), (CHANNELS, OUTPUTS), dev)
                .map_err(candle("fc weights"))?,
        })
    }

    /// [1, 3, H, W] → [10], queued on the device's stream.
    fn forward(&self, x: &Tensor) -> Res<Tensor> {
        let y = x
            .conv2d(&self.conv, 1, 2, 1, 1)
            .and_then(|y| y.relu())
            .and_then(|y| y.mean((2, 3)))
            .and_then(|y| y.matmul(&self.fc))
            .and_then(|y| y.flatten_all());
        y.map_err(candle("the model"))
    }
}

/// candle's device and stream, and ours on the same stream.
struct Gpu {
    dev: Device,
    /// Ours, borrowed from candle's stream once: cudarc's per-thread stream, so it is
    /// bound to this thread.
    stream: Stream,
}

impl Gpu {
    fn new() -> Res<Gpu> {
        let dev = Device::new_cuda(0).map_err(candle("Device::new_cuda"))?;
        let cu = dev
            .as_cuda_device()
            .map_err(candle("as_cuda_device"))?
            .cuda_stream();
        let stream = Stream::borrow_cudarc(&cu).map_err(cuda("Stream::borrow_cudarc"))?;
        Ok(Gpu { dev, stream })
    }

    /// Lends `t`'s device memory (contiguous f32, from its first element) to `write`
    /// as a writable view on our stream: the frame's input tensor, made once and
    /// rewritten every frame. The model queued after it on the same stream reads the
    /// new pixels; the next frame's write is queued after that model.
    fn write_into(
        &self,
        t: &Tensor,
        write: impl FnOnce(&mut CudarcViewMut<'_, f32>, &Stream) -> Res<()>,
    ) -> Res<()> {
        // candle lends a tensor's storage mutably only to an in-place op.
        struct Write<'a, F> {
            stream: &'a Stream,
            write: RefCell<Option<F>>,
        }
        impl<F> InplaceOp1 for Write<'_, F>
        where
            F: FnOnce(&mut CudarcViewMut<'_, f32>, &Stream) -> Res<()>,
        {
            fn name(&self) -> &'static str {
                "cuda-staging write"
            }
            fn cpu_fwd(&self, _: &mut CpuStorage, _: &Layout) -> candle_core::Result<()> {
                Err(candle_core::Error::msg("the tensor is not on the GPU"))
            }
            fn cuda_fwd(&self, s: &mut CudaStorage, layout: &Layout) -> candle_core::Result<()> {
                if !layout.is_contiguous() || layout.start_offset() != 0 {
                    return Err(candle_core::Error::msg(
                        "the tensor is not contiguous from its start",
                    ));
                }
                let write = self
                    .write
                    .borrow_mut()
                    .take()
                    .ok_or_else(|| candle_core::Error::msg("written twice"))?;
                let slice = s.as_cuda_slice_mut::<f32>()?;
                let mut view =
                    CudarcViewMut::new(slice, self.stream).map_err(candle_core::Error::msg)?;
                write(&mut view, self.stream).map_err(candle_core::Error::msg)
            }
        }
        t.inplace_op1(&Write {
            stream: &self.stream,
            write: RefCell::new(Some(write)),
        })
        .map_err(candle("write into the tensor"))
    }

    /// Lends `t`'s device memory (contiguous, from its first element) to `read` as a
    /// view on our stream.
    fn with_output<R>(
        &self,
        t: &Tensor,
        read: impl FnOnce(&CudarcView<'_, f32>, &Stream) -> Res<R>,
    ) -> Res<R> {
        let (storage, layout) = t.storage_and_layout();
        let Storage::Cuda(cs) = &*storage else {
            return Err("the output is not on the GPU".into());
        };
        if !layout.is_contiguous() || layout.start_offset() != 0 {
            return Err("the output is not contiguous from its start".into());
        }
        let slice: &CudaSlice<f32> = cs.as_cuda_slice().map_err(candle("as_cuda_slice"))?;
        let view = CudarcView::new(slice, &self.stream).map_err(cuda("view"))?;
        read(&view, &self.stream)
    }
}

/// One frame's output, as bits.
type Output = [u32; OUTPUTS];

fn to_output(v: &[f32]) -> Res<Output> {
    let mut out = [0u32; OUTPUTS];
    if v.len() != OUTPUTS {
        return Err(format!("{} outputs, expected {OUTPUTS}", v.len()));
    }
    for (o, x) in out.iter_mut().zip(v) {
        *o = x.to_bits();
    }
    Ok(out)
}

/// `clock`'s time so far.
fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for the duration of the call.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({clock})");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The process's CPU time so far (all threads) and this thread's.
fn cpu_now() -> (Duration, Duration) {
    (
        cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID),
        cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID),
    )
}

/// The ways a frame travels.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Candle,
    BufferFill,
    BufferVec,
    RingFill,
    RingVec,
}

const WAYS: [Way; 5] = [
    Way::Candle,
    Way::BufferFill,
    Way::BufferVec,
    Way::RingFill,
    Way::RingVec,
];

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Candle => "candle: Vec -> Tensor::from_slice, to_vec1",
            Way::BufferFill => "StagingBuffer: upload_with fill, download_into",
            Way::BufferVec => "StagingBuffer: upload from the Vec",
            Way::RingFill => "StagingRing: upload_with fill, 1 frame ahead",
            Way::RingVec => "StagingRing: upload from the Vec, 1 ahead",
        }
    }
}

/// What one round of one way measured.
struct Run {
    /// Per timed frame: the time from producing its pixels to its output (the
    /// synchronous ways), or the loop's period (the ring's).
    times: Vec<Duration>,
    wall: Duration,
    cpu: Duration,
    /// The CPU time of the thread running the loop.
    main_cpu: Duration,
    /// Summed over timed frames, the loop's time in each [`PHASES`] step.
    phases: [Duration; PHASES.len()],
    /// The CPU time of every other thread of the process, by thread name.
    others: Vec<(String, Duration)>,
}

/// The steps of a frame, as the loop times them (the ways but candle's).
const PHASES: [&str; 5] = ["produce", "upload", "queue model", "download", "wait"];

/// The CPU time so far of every thread of the process but the caller, by name,
/// from `/proc/self/task/*/schedstat` (nanoseconds on the CPU); empty where the
/// kernel does not keep it.
fn other_threads_cpu() -> Vec<(String, Duration)> {
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() }.to_string();
    let mut out: Vec<(String, Duration)> = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        if task.file_name().to_string_lossy() == me {
            continue;
        }
        let path = task.path();
        let (Ok(name), Ok(stat)) = (
            std::fs::read_to_string(path.join("comm")),
            std::fs::read_to_string(path.join("schedstat")),
        ) else {
            continue;
        };
        let Some(ns) = stat.split_whitespace().next().and_then(|v| v.parse().ok()) else {
            continue;
        };
        // Threads of one pool differ only in their number.
        let name = name
            .trim()
            .trim_end_matches(|c: char| c.is_ascii_digit())
            .to_owned();
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, d)) => *d += Duration::from_nanos(ns),
            None => out.push((name, Duration::from_nanos(ns))),
        }
    }
    out
}

/// `after - before`, by thread name.
fn cpu_since(
    before: &[(String, Duration)],
    after: Vec<(String, Duration)>,
) -> Vec<(String, Duration)> {
    after
        .into_iter()
        .map(|(name, d)| {
            let was = before
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(Duration::ZERO, |b| b.1);
            (name, d.saturating_sub(was))
        })
        .filter(|(_, d)| !d.is_zero())
        .collect()
}

/// The staging state every way but candle's keeps between frames.
struct Staging {
    buffer: StagingBuffer,
    up: StagingRing,
    down: StagingRing,
}

/// Runs `frames` frames of `side`² through `way`, checking each output against
/// `reference` (filled by candle's way). The first `WARMUP_FRAMES` are not timed.
fn run_way(
    way: Way,
    gpu: &Gpu,
    model: &Model,
    st: &mut Staging,
    side: usize,
    reference: &mut Vec<Output>,
) -> Res<Run> {
    let n = 3 * side * side;
    let shape = (1, 3, side, side);
    let total = WARMUP_FRAMES + FRAMES;
    let mut frame = vec![0f32; n];
    let mut times = Vec::with_capacity(FRAMES);
    let input = Tensor::zeros(shape, DType::F32, &gpu.dev).map_err(candle("Tensor::zeros"))?;
    let (mut t_start, mut cpu_start) = (Instant::now(), cpu_now());
    let mut others_start = other_threads_cpu();
    let mut phases = [Duration::ZERO; PHASES.len()];
    // The loop's steps, timed for every frame; added to `phases` once timed.
    let mut step = [Duration::ZERO; PHASES.len()];
    let mut check = |k: usize, got: Output| -> Res<()> {
        if way == Way::Candle {
            if reference.len() == k {
                reference.push(got);
            }
            return Ok(());
        }
        match reference.get(k) {
            Some(want) if *want == got => Ok(()),
            Some(want) => Err(format!(
                "{side}x{side}, frame {k}, {}: output {got:08x?} differs from candle's {want:08x?}",
                way.name()
            )),
            None => Err(format!("frame {k}: no reference output from candle")),
        }
    };
    match way {
        Way::Candle | Way::BufferFill | Way::BufferVec => {
            for k in 0..total {
                if k == WARMUP_FRAMES {
                    (t_start, cpu_start) = (Instant::now(), cpu_now());
                    others_start = other_threads_cpu();
                }
                let t0 = Instant::now();
                let out = match way {
                    Way::Candle => {
                        produce(k, side, &mut frame);
                        let x = Tensor::from_slice(&frame, shape, &gpu.dev)
                            .map_err(candle("Tensor::from_slice"))?;
                        let y = model.forward(&x)?;
                        to_output(&y.to_vec1::<f32>().map_err(candle("to_vec1"))?)?
                    }
                    _ => {
                        let mut produced = Duration::ZERO;
                        gpu.write_into(&input, |dst, stream| {
                            if way != Way::BufferVec {
                                st.buffer
                                    .upload_with(dst, n, stream, |px| {
                                        let t = Instant::now();
                                        produce(k, side, px);
                                        produced = t.elapsed();
                                    })
                                    .map_err(cuda("upload_with"))
                            } else {
                                produce(k, side, &mut frame);
                                produced = t0.elapsed();
                                st.buffer
                                    .upload(dst, &frame, stream)
                                    .map_err(cuda("upload"))
                            }
                        })?;
                        let t1 = Instant::now();
                        let y = model.forward(&input)?;
                        let t2 = Instant::now();
                        let out = gpu.with_output(&y, |src, stream| {
                            to_output(
                                st.buffer
                                    .download_into(src, OUTPUTS, stream)
                                    .map_err(cuda("download_into"))?,
                            )
                        })?;
                        step = [
                            produced,
                            t1 - t0 - produced,
                            t2 - t1,
                            t2.elapsed(),
                            Duration::ZERO,
                        ];
                        out
                    }
                };
                if k >= WARMUP_FRAMES {
                    times.push(t0.elapsed());
                    for (p, s) in phases.iter_mut().zip(step) {
                        *p += s;
                    }
                }
                check(k, out)?;
            }
        }
        Way::RingFill | Way::RingVec => {
            let mut in_flight: Option<(usize, Ticket<f32>)> = None;
            let mut t0 = Instant::now();
            // One more round than frames, to wait for the last one.
            for k in 0..=total {
                if k == WARMUP_FRAMES {
                    (t_start, cpu_start) = (Instant::now(), cpu_now());
                    others_start = other_threads_cpu();
                }
                let mut next = None;
                step = [Duration::ZERO; PHASES.len()];
                if k < total {
                    let mut produced = Duration::ZERO;
                    gpu.write_into(&input, |dst, stream| {
                        if way != Way::RingVec {
                            st.up
                                .upload_with(dst, n, stream, |px| {
                                    let t = Instant::now();
                                    produce(k, side, px);
                                    produced = t.elapsed();
                                })
                                .map_err(cuda("ring upload_with"))
                        } else {
                            produce(k, side, &mut frame);
                            produced = t0.elapsed();
                            st.up
                                .upload(dst, &frame, stream)
                                .map_err(cuda("ring upload"))
                        }
                    })?;
                    let t1 = Instant::now();
                    let y = model.forward(&input)?;
                    let t2 = Instant::now();
                    let ticket = gpu.with_output(&y, |src, stream| {
                        st.down
                            .download(src, OUTPUTS, stream)
                            .map_err(cuda("ring download"))
                    })?;
                    step = [
                        produced,
                        t1 - t0 - produced,
                        t2 - t1,
                        t2.elapsed(),
                        Duration::ZERO,
                    ];
                    next = Some((k, ticket));
                }
                if let Some((j, ticket)) = std::mem::replace(&mut in_flight, next) {
                    let t3 = Instant::now();
                    let out = to_output(st.down.wait(&ticket).map_err(cuda("ring wait"))?)?;
                    step[4] = t3.elapsed();
                    check(j, out)?;
                }
                // The period of frame k: from producing it to the next frame's start,
                // with frame k-1's output checked.
                if k > WARMUP_FRAMES {
                    times.push(t0.elapsed());
                }
                if k >= WARMUP_FRAMES {
                    for (p, s) in phases.iter_mut().zip(step) {
                        *p += s;
                    }
                }
                t0 = Instant::now();
            }
        }
    }
    let cpu_end = cpu_now();
    Ok(Run {
        times,
        wall: t_start.elapsed(),
        cpu: cpu_end.0 - cpu_start.0,
        main_cpu: cpu_end.1 - cpu_start.1,
        phases,
        others: cpu_since(&others_start, other_threads_cpu()),
    })
}

/// Nearest-rank percentile `p` of `v` (sorted), in µs.
fn percentile_us(v: &[Duration], p: usize) -> f64 {
    let rank = (p * v.len()).div_ceil(100).clamp(1, v.len());
    v[rank - 1].as_secs_f64() * 1e6
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// What bounds a frame at `side`², p50 µs per frame: producing its pixels alone;
/// candle queueing the model on an input already on the GPU; and that model's whole
/// time, queued and its output read back by `to_vec1`.
fn floors(gpu: &Gpu, model: &Model, side: usize) -> Res<[f64; 3]> {
    let mut frame = vec![0f32; 3 * side * side];
    let input =
        Tensor::zeros((1, 3, side, side), DType::F32, &gpu.dev).map_err(candle("Tensor::zeros"))?;
    let mut times: [Vec<Duration>; 3] = Default::default();
    for k in 0..WARMUP_FRAMES + FRAMES {
        let t0 = Instant::now();
        produce(k, side, &mut frame);
        let t1 = Instant::now();
        let y = model.forward(&input)?;
        let t2 = Instant::now();
        to_output(&y.to_vec1::<f32>().map_err(candle("to_vec1"))?)?;
        if k >= WARMUP_FRAMES {
            times[0].push(t1 - t0);
            times[1].push(t2 - t1);
            times[2].push(t1.elapsed());
        }
    }
    Ok(times.map(|mut t| {
        t.sort_unstable();
        percentile_us(&t, 50)
    }))
}

/// The driver calls a pipelined frame makes, bare (cudarc's `result` layer, no
/// checks, no bookkeeping), p50 µs per frame on the per-thread stream: the input's
/// copy from pinned memory and an event after it, the output's copy into pinned
/// memory and an event after it, and one query of that event. Only the calls are
/// timed; the stream is synchronized after them, untimed. The floor of what any
/// library adds to the model's queueing on the loop's thread. Also returned, p50:
/// producing the pixels into that pinned memory (one buffer, the same every frame),
/// and a synchronous upload made bare: the input's copy from pinned memory, then
/// `cuStreamSynchronize` (what `StagingBuffer::upload_with` waits for).
fn bare_copies_us(side: usize) -> Res<[f64; 3]> {
    use cuda_staging::cudarc::driver::{result, sys};
    let driver = |what: &'static str| move |e: result::DriverError| format!("{what}: {e:?}");
    // `CU_STREAM_PER_THREAD`, the stream candle's default device runs on.
    let (n, stream) = (3 * side * side, 0x2 as sys::CUstream);
    let event = || {
        result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map_err(driver("cuEventCreate"))
    };
    let (up, down) = (event()?, event()?);
    // SAFETY: a context is current on this thread (candle's device made it so);
    // every pointer below is freed once, after the stream is synchronized.
    let (host, dev) = unsafe {
        (
            result::malloc_host((n + OUTPUTS) * 4, 0).map_err(driver("cuMemHostAlloc"))?,
            result::malloc_sync((n + OUTPUTS) * 4).map_err(driver("cuMemAlloc"))?,
        )
    };
    // SAFETY: `host` holds n + OUTPUTS f32 and is page-locked, used only below.
    let px = unsafe { std::slice::from_raw_parts_mut(host.cast::<f32>(), n + OUTPUTS) };
    let (input, output) = px.split_at_mut(n);
    let (mut times, mut produced) = (Vec::with_capacity(FRAMES), Vec::with_capacity(FRAMES));
    let mut synced = Vec::with_capacity(FRAMES);
    let mut run = || -> Res<()> {
        for k in 0..WARMUP_FRAMES + FRAMES {
            let t = Instant::now();
            produce(k, side, input);
            let p = t.elapsed();
            let t0 = Instant::now();
            // SAFETY: `dev` holds n + OUTPUTS f32; the host slices live until the
            // stream is synchronized below; the events belong to this context.
            unsafe {
                result::memcpy_htod_async(dev, input, stream)
                    .map_err(driver("cuMemcpyHtoDAsync"))?;
                result::event::record(up, stream).map_err(driver("cuEventRecord"))?;
                result::memcpy_dtoh_async(output, dev + (n * 4) as u64, stream)
                    .map_err(driver("cuMemcpyDtoHAsync"))?;
                result::event::record(down, stream).map_err(driver("cuEventRecord"))?;
                // Not ready yet, most often: the answer does not matter here.
                let _ = result::event::query(down);
            }
            let t = t0.elapsed();
            // SAFETY: the stream is this thread's per-thread stream.
            unsafe { result::stream::synchronize(stream) }
                .map_err(driver("cuStreamSynchronize"))?;
            produce(k + 1, side, input);
            let t1 = Instant::now();
            // SAFETY: as above; the stream is synchronized before `input` is reused.
            unsafe {
                result::memcpy_htod_async(dev, input, stream)
                    .map_err(driver("cuMemcpyHtoDAsync"))?;
                result::stream::synchronize(stream).map_err(driver("cuStreamSynchronize"))?;
            }
            if k >= WARMUP_FRAMES {
                times.push(t);
                produced.push(p);
                synced.push(t1.elapsed());
            }
        }
        Ok(())
    };
    let r = run();
    // SAFETY: as above; nothing is in flight once the stream is synchronized.
    unsafe {
        let _ = result::stream::synchronize(stream);
        let _ = result::free_sync(dev);
        let _ = result::free_host(host);
        let _ = result::event::destroy(up);
        let _ = result::event::destroy(down);
    }
    r?;
    Ok([times, produced, synced].map(|mut t| {
        t.sort_unstable();
        percentile_us(&t, 50)
    }))
}

/// One frame size: every way, `ROUNDS` times in turn; prints the table.
fn measure(gpu: &Gpu, model: &Model, st: &mut Staging, side: usize) -> Res<()> {
    let mut reference = Vec::new();
    let mut runs: Vec<Vec<Run>> = WAYS.iter().map(|_| Vec::new()).collect();
    for _ in 0..ROUNDS {
        for (w, way) in WAYS.into_iter().enumerate() {
            runs[w].push(run_way(way, gpu, model, st, side, &mut reference)?);
        }
    }
    let fps = |r: &[Run]| {
        median(
            r.iter()
                .map(|r| FRAMES as f64 / r.wall.as_secs_f64())
                .collect(),
        )
    };
    let cpu = |r: &[Run]| {
        median(
            r.iter()
                .map(|r| r.cpu.as_secs_f64() * 1e6 / FRAMES as f64)
                .collect(),
        )
    };
    let main_cpu = |r: &[Run]| {
        median(
            r.iter()
                .map(|r| r.main_cpu.as_secs_f64() * 1e6 / FRAMES as f64)
                .collect(),
        )
    };
    let base_fps = fps(&runs[0]);
    // A way against candle's own, round by round, then the median over rounds.
    let paired = |r: &[Run], of: fn(&Run) -> f64| {
        median(r.iter().zip(&runs[0]).map(|(w, c)| of(w) / of(c)).collect())
    };
    let round_fps = |r: &Run| 1.0 / r.wall.as_secs_f64();
    let round_cpu = |r: &Run| r.cpu.as_secs_f64();
    println!(
        "\n3x{side}x{side} f32 ({} bytes), {FRAMES} timed frames x {ROUNDS} rounds per way",
        3 * side * side * 4
    );
    println!(
        "{:<48} {:>9} {:>7} {:>8} {:>8} {:>9} {:>7} {:>9}",
        "way", "frames/s", "x", "p50 us", "p99 us", "CPU us/f", "x CPU", "main us/f"
    );
    for (w, way) in WAYS.into_iter().enumerate() {
        let mut times: Vec<Duration> = runs[w].iter().flat_map(|r| r.times.clone()).collect();
        times.sort_unstable();
        println!(
            "{:<48} {:>9.0} {:>6.2}x {:>8.1} {:>8.1} {:>9.1} {:>6.2}x {:>9.1}",
            way.name(),
            fps(&runs[w]),
            paired(&runs[w], round_fps),
            percentile_us(&times, 50),
            percentile_us(&times, 99),
            cpu(&runs[w]),
            paired(&runs[w], round_cpu),
            main_cpu(&runs[w])
        );
    }
    println!("per frame, mean us over all rounds: the loop's steps; other threads' CPU by name");
    let per_frame = |d: Duration| d.as_secs_f64() * 1e6 / (ROUNDS * FRAMES) as f64;
    for (w, way) in WAYS.into_iter().enumerate() {
        let mut line = format!("{:<48}", way.name());
        if way != Way::Candle {
            for (i, name) in PHASES.into_iter().enumerate() {
                let sum: Duration = runs[w].iter().map(|r| r.phases[i]).sum();
                line += &format!(" {name} {:.1};", per_frame(sum));
            }
        }
        let mut others: Vec<(String, Duration)> = Vec::new();
        for (name, d) in runs[w].iter().flat_map(|r| r.others.iter()) {
            match others.iter_mut().find(|(n, _)| n == name) {
                Some((_, sum)) => *sum += *d,
                None => others.push((name.clone(), *d)),
            }
        }
        others.sort_by_key(|o| std::cmp::Reverse(o.1));
        for (name, d) in others.iter().take(4) {
            line += &format!(" [{name}] {:.1};", per_frame(*d));
        }
        println!("{line}");
    }
    let [produce_us, queue_us, model_us] = floors(gpu, model, side)?;
    let [bare_us, pinned_us, sync_up_us] = bare_copies_us(side)?;
    println!(
        "floors, p50 per frame: producing the pixels {produce_us:.1} us into a Vec, \
         {pinned_us:.1} us into pinned memory; on an input already on the GPU, candle \
         queueing the model {queue_us:.1} us, the model with its output read back \
         {model_us:.1} us; the ring's driver calls, bare, {bare_us:.1} us; a synchronous \
         upload from pinned memory, bare, {sync_up_us:.1} us"
    );
    let pipelined = pinned_us + queue_us + bare_us;
    let synchronous = pinned_us + sync_up_us + model_us;
    println!(
        "so on this host a frame filled in pinned memory takes at least {pipelined:.1} us of \
         the loop's thread pipelined (at most {:.2}x candle's frames/s) and {synchronous:.1} \
         us synchronous (at most {:.2}x)",
        1e6 / pipelined / base_fps,
        1e6 / synchronous / base_fps
    );
    println!(
        "outputs: every frame of every way bit-identical to candle's own ({} frames per way)",
        ROUNDS * (WARMUP_FRAMES + FRAMES)
    );
    Ok(())
}

fn run() -> Res<()> {
    // Our context first: without a driver it says so, where candle would fail later.
    let ours = cuda_staging::Context::new(0).map_err(|e| {
        format!("no usable CUDA device ({e}); this example needs an NVIDIA GPU and its driver")
    })?;
    let name = ours.name().unwrap_or_else(|_| "unknown device".into());
    let gpu = Gpu::new()?;
    let model = Model::new(&gpu.dev)?;
    println!(
        "{name}: candle 0.11.1 on Device::new_cuda(0); model conv2d 3->{CHANNELS} 3x3/2, relu, \
         mean, matmul ->{OUTPUTS}"
    );
    println!(
        "each frame timed whole, producing its pixels included; the ring's time is the \
         loop's period with one frame in flight"
    );
    let mut st = Staging {
        buffer: StagingBuffer::new(),
        up: StagingRing::new(),
        down: StagingRing::new(),
    };
    for side in [224, 640] {
        measure(&gpu, &model, &mut st, side)?;
    }
    let stats = st.buffer.stats();
    println!(
        "\nStagingBuffer: {} pinned allocation(s) of {} bytes; rings: {} + {} pinned \
         allocation(s), {} slot wait(s) uploading",
        stats.allocations,
        st.buffer.capacity(),
        st.up.stats().allocations,
        st.down.stats().allocations,
        st.up.stats().slot_waits
    );
    cuda_staging::check_deferred_errors().map_err(|e| format!("an error recorded in a drop: {e}"))
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("candle-frames: {e}");
            ExitCode::FAILURE
        }
    }
}
