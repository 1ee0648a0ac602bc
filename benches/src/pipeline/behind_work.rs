//! `behind-work`: a download queued behind GPU work, as a pipeline's download of a
//! model's outputs is, waited for under each [`WaitPolicy`].
//!
//! Per cell (GPU work × bytes), each repetition queues about [`GPU_WORK`] of
//! device-to-device copies on the stream, then calls
//! [`StagingBuffer::download_into`] of `bytes`, under each policy in turn (the
//! starting policy rotating), each with its own buffer, pinned beforehand. Per
//! policy: p50 / p99 of the call (the work, the transfer and the wake-up), and
//! `cpu_us`, the process's CPU over the call (all threads), mean. `gpu_work_us` is
//! the median time of the queued work alone, waited for by spinning. The landed
//! bytes are checked every repetition.

use cuda_staging::StagingConfig;
use std::time::{Duration, Instant};

use cuda_core::{DeviceBuffer, Error};
use cuda_staging::{StagingBuffer, WaitPolicy};
use serde::Serialize;

use crate::cpu_time::{self, CpuTally};
use crate::stats::Summary;
use crate::Gpu;

/// The scenario name of the records.
pub const BEHIND_WORK_SCENARIO: &str = "behind-work";

/// GPU work queued ahead of each download.
pub const GPU_WORK: [Duration; 2] = [Duration::from_millis(1), Duration::from_millis(5)];

/// Bytes downloaded: 112x112x3 f32 and 640x640x3 f32.
pub const BEHIND_WORK_BYTES: [usize; 2] = [150_528, 4_915_200];

/// Bytes of each of the two scratch buffers the work copies between.
const SCRATCH_BYTES: usize = 64 << 20;

/// The policies compared, with their column names.
pub fn policies() -> [(&'static str, WaitPolicy); 3] {
    [
        ("spin", WaitPolicy::Spin),
        ("default", WaitPolicy::default()),
        ("block", WaitPolicy::Block),
    ]
}

/// One policy in one cell.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BehindWorkRecord {
    /// Always [`BEHIND_WORK_SCENARIO`].
    pub scenario: &'static str,
    /// Always `D2H`.
    pub direction: &'static str,
    /// Bytes downloaded.
    pub bytes: u64,
    /// `spin`, `default` or `block`.
    pub column: &'static str,
    /// The queued work alone, median µs.
    pub gpu_work_us: f64,
    /// Nearest-rank median of the call, µs.
    pub median_us: f64,
    /// Nearest-rank 99th percentile, µs.
    pub p99_us: f64,
    /// The process's CPU over the call, mean µs; `null` without a CPU clock.
    pub cpu_us: Option<f64>,
    /// Timed calls.
    pub samples: u64,
}

/// Runs every cell: `warmup` dropped and `reps` timed repetitions each.
pub fn run(gpu: &Gpu, warmup: usize, reps: usize) -> Result<Vec<BehindWorkRecord>, String> {
    fn e(what: &'static str) -> impl Fn(Error) -> String {
        move |e: Error| format!("{BEHIND_WORK_SCENARIO}: {what}: {e}")
    }
    let stream = &gpu.stream;
    let mut a = DeviceBuffer::<u8>::alloc(SCRATCH_BYTES).map_err(e("alloc"))?;
    let mut b = DeviceBuffer::<u8>::alloc(SCRATCH_BYTES).map_err(e("alloc"))?;
    stream.memset_bytes(&mut a, 1).map_err(e("memset"))?;
    let mut queue = |copies: usize| -> Result<(), Error> {
        for k in 0..copies {
            if k % 2 == 0 {
                stream.memcpy_dtod(&a, &mut b)?;
            } else {
                stream.memcpy_dtod(&b, &mut a)?;
            }
        }
        Ok(())
    };
    let time_alone = |queue: &mut dyn FnMut(usize) -> Result<(), Error>, copies, n| {
        let mut t = Vec::with_capacity(n);
        for _ in 0..n {
            let t0 = Instant::now();
            queue(copies)?;
            stream.synchronize_with(WaitPolicy::Spin)?;
            t.push(t0.elapsed());
        }
        Ok::<_, Error>(Summary::of(&mut t).map_or(Duration::ZERO, |s| s.p50))
    };
    let one = time_alone(&mut queue, 1, 5).map_err(e("timing one copy"))?;
    let mut records = Vec::new();
    for work in GPU_WORK {
        let copies = (work.as_secs_f64() / one.as_secs_f64().max(1e-9))
            .ceil()
            .max(1.0) as usize;
        let alone = time_alone(&mut queue, copies, 10).map_err(e("timing the work"))?;
        for bytes in BEHIND_WORK_BYTES {
            let pattern: Vec<u8> = (0..bytes).map(|i| (i * 7 + bytes) as u8).collect();
            let mut src = DeviceBuffer::<u8>::alloc(bytes).map_err(e("alloc"))?;
            src.copy_from_host(&pattern).map_err(e("fill"))?;
            let pols = policies();
            let mut bufs: Vec<StagingBuffer> = pols
                .iter()
                .map(|&(_, p)| {
                    let mut s = StagingBuffer::new();
                    s.set_config(StagingConfig {
                        wait_policy: p,
                        ..s.config()
                    })
                    .expect("set_config");
                    s
                })
                .collect();
            for s in &mut bufs {
                s.download_into(&src, bytes, stream).map_err(e("pinning"))?;
            }
            let mut times = vec![Vec::with_capacity(reps); pols.len()];
            let mut cpu = vec![CpuTally::default(); pols.len()];
            for rep in 0..warmup + reps {
                for k in 0..pols.len() {
                    let p = (rep + k) % pols.len();
                    queue(copies).map_err(e("queueing the work"))?;
                    let c0 = cpu_time::process_cpu();
                    let t0 = Instant::now();
                    let landed = bufs[p]
                        .download_into(&src, bytes, stream)
                        .map_err(e(pols[p].0))?;
                    let t = t0.elapsed();
                    let c1 = cpu_time::process_cpu();
                    if landed != &pattern[..] {
                        return Err(format!(
                            "{BEHIND_WORK_SCENARIO}: {} {bytes} B: the landed bytes differ",
                            pols[p].0
                        ));
                    }
                    if rep >= warmup {
                        times[p].push(t);
                        cpu[p].add(cpu_time::elapsed(c0, c1));
                    }
                }
            }
            for (p, &(name, _)) in pols.iter().enumerate() {
                let s = Summary::of(&mut times[p]).ok_or("behind-work: no samples")?;
                records.push(BehindWorkRecord {
                    scenario: BEHIND_WORK_SCENARIO,
                    direction: "D2H",
                    bytes: bytes as u64,
                    column: name,
                    gpu_work_us: alone.as_secs_f64() * 1e6,
                    median_us: s.p50_us(),
                    p99_us: s.p99_us(),
                    cpu_us: cpu[p].mean_us(),
                    samples: s.samples as u64,
                });
            }
        }
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_columns_are_the_three_policies_and_spin_is_the_baseline() {
        let names: Vec<&str> = policies().iter().map(|p| p.0).collect();
        assert_eq!(names, ["spin", "default", "block"]);
        assert_eq!(policies()[0].1, WaitPolicy::Spin);
        assert_eq!(policies()[1].1, WaitPolicy::default());
    }
}
