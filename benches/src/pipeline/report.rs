//! What the `pipeline` bench reports: `$BENCH_RECORDS_DIR/pipeline.json` for the
//! renderer, and the targets its log checks (the log's tables are in
//! `log_tables.rs`).
//!
//! The JSON is `{"records": [...]}` with two record shapes, fixed with the renderer
//! (every key always present; `null` where a value does not apply):
//!
//! ```json
//! {"scenario": "pipeline", "column": "ring", "fps": 281.0, "p50_us": 3550.2,
//!  "p99_us": 3890.0, "cpu_us": 3720.4, "samples": 300}
//! {"scenario": "pipeline", "column": "ideal", "fps": 290.1, "p50_us": null,
//!  "p99_us": null, "cpu_us": null, "samples": null}
//! {"scenario": "batch", "column": "batched", "bytes": 236544, "median_us": 14.1,
//!  "p99_us": 17.9, "samples": 1000}
//! ```
//!
//! Pipeline columns: `pageable-sync`, `staging-sync`, `ring` (frames per second over
//! the loop's wall time, p50 / p99 of the frame time), `ideal` (`1e6 / max(cpu-stage
//! p50, gpu-stage p50)`, no latencies of its own), `cpu-stage` and `gpu-stage` (each
//! timed alone; `fps` is `1e6 / p50`).
//!
//! `cpu_us` is the process's CPU time (all threads) per frame of a loop, or per run
//! of a stage; `null` for `ideal` and where the CPU clock is unavailable.

use serde::Serialize;

use super::batch::BatchRun;
use super::loops::LoopRun;
use super::stages::StageTimes;
use crate::stats::Summary;

/// The file name of the records.
pub const PIPELINE_FILE: &str = "pipeline.json";

/// The scenario of the frame-loop columns.
pub const PIPELINE_SCENARIO: &str = "pipeline";
/// The same pipeline with a GPU stage about twice its CPU stage, where the ring
/// waits for the GPU on every frame (with `ring-spin`, the ring spinning through
/// those waits).
pub const GPU_HEAVY_SCENARIO: &str = "pipeline-gpu-heavy";
/// The scenario of the batched downloads.
pub const BATCH_SCENARIO: &str = "batch";

/// One column of the `pipeline` or `pipeline-gpu-heavy` scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FpsRecord {
    /// [`PIPELINE_SCENARIO`] or [`GPU_HEAVY_SCENARIO`].
    pub scenario: &'static str,
    /// `pageable-sync`, `staging-sync`, `ring`, `ring-spin`, `ideal`, `cpu-stage` or
    /// `gpu-stage`.
    pub column: &'static str,
    /// Frames per second.
    pub fps: f64,
    /// Nearest-rank median of the frame (or stage) time, µs; `null` for `ideal`.
    pub p50_us: Option<f64>,
    /// Nearest-rank 99th percentile, µs; `null` for `ideal`.
    pub p99_us: Option<f64>,
    /// The process's CPU time per frame (or stage run), all threads, µs; `null` for
    /// `ideal` and where the CPU clock is unavailable.
    pub cpu_us: Option<f64>,
    /// Timed frames (or stage runs); `null` for `ideal`.
    pub samples: Option<u64>,
}

impl FpsRecord {
    fn timed(column: &'static str, fps: f64, s: &Summary, cpu_us: Option<f64>) -> FpsRecord {
        FpsRecord {
            scenario: PIPELINE_SCENARIO,
            column,
            fps,
            p50_us: Some(s.p50_us()),
            p99_us: Some(s.p99_us()),
            cpu_us,
            samples: Some(s.samples as u64),
        }
    }

    /// A loop's record.
    pub fn of_loop(run: &LoopRun) -> FpsRecord {
        FpsRecord::timed(run.column.name(), run.fps, &run.frame_time, run.cpu_us)
    }

    /// A stage timed alone, which used `cpu_us` of CPU per run: its rate is one over
    /// its median.
    pub fn of_stage(column: &'static str, s: &Summary, cpu_us: Option<f64>) -> FpsRecord {
        FpsRecord::timed(column, 1e6 / s.p50_us().max(f64::MIN_POSITIVE), s, cpu_us)
    }

    /// The same record in `scenario`.
    pub fn in_scenario(self, scenario: &'static str) -> FpsRecord {
        FpsRecord { scenario, ..self }
    }

    /// `ideal`: one over the slower stage's median.
    pub fn ideal(stages: &StageTimes) -> FpsRecord {
        FpsRecord {
            scenario: PIPELINE_SCENARIO,
            column: "ideal",
            fps: stages.ideal_fps(),
            p50_us: None,
            p99_us: None,
            cpu_us: None,
            samples: None,
        }
    }
}

/// The `pipeline` records: the loops measured, then `ideal`, `cpu-stage` and
/// `gpu-stage`.
pub fn fps_records(stages: &StageTimes, loops: &[LoopRun]) -> Vec<FpsRecord> {
    let mut r: Vec<FpsRecord> = loops.iter().map(FpsRecord::of_loop).collect();
    r.push(FpsRecord::ideal(stages));
    let per_run = stages.process_cpu;
    r.push(FpsRecord::of_stage(
        "cpu-stage",
        &stages.cpu,
        per_run.cpu_stage_us,
    ));
    r.push(FpsRecord::of_stage(
        "gpu-stage",
        &stages.gpu,
        per_run.gpu_stage_us,
    ));
    r
}

/// One column of the `batch` scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchRecord {
    /// Always `batch`.
    pub scenario: &'static str,
    /// `separate`, `batched`, `batched-queued` or `largest-alone`.
    pub column: &'static str,
    /// Bytes one repetition moves.
    pub bytes: u64,
    /// Nearest-rank median time per repetition, µs.
    pub median_us: f64,
    /// Nearest-rank 99th percentile, µs.
    pub p99_us: f64,
    /// Timed repetitions.
    pub samples: u64,
}

impl BatchRecord {
    /// A column's record.
    pub fn of(run: &BatchRun) -> BatchRecord {
        BatchRecord {
            scenario: BATCH_SCENARIO,
            column: run.column.name(),
            bytes: run.column.bytes() as u64,
            median_us: run.time.p50_us(),
            p99_us: run.time.p99_us(),
            samples: run.time.samples as u64,
        }
    }
}

/// Either record, serialised without a tag (the fields tell them apart).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Record {
    /// A `pipeline` column.
    Fps(FpsRecord),
    /// A `batch` column.
    Batch(BatchRecord),
    /// A `behind-work` column.
    BehindWork(super::behind_work::BehindWorkRecord),
}

/// Which way a target bounds its ratio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The ratio must be at least the bound.
    AtLeast,
    /// The ratio must be at most the bound.
    AtMost,
}

/// One of issue 13's targets, and the ratio measured for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// What is divided by what, e.g. `ring / ideal (frames/s)`.
    pub what: &'static str,
    /// The ratio; `None` when a column is missing.
    pub ratio: Option<f64>,
    /// The bound's direction.
    pub bound: Bound,
    /// The bound.
    pub limit: f64,
}

impl Target {
    /// Whether the ratio meets the bound (`None` when there is no ratio).
    pub fn met(&self) -> Option<bool> {
        self.ratio.map(|r| match self.bound {
            Bound::AtLeast => r >= self.limit,
            Bound::AtMost => r <= self.limit,
        })
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    let (a, b) = (a?, b?);
    (b > 0.0 && a.is_finite() && b.is_finite()).then(|| a / b)
}

/// Issue 13's targets, from the records (frame-time and allocation targets aside:
/// those need no ratio or a GPU test).
pub fn targets(fps: &[FpsRecord], batch: &[BatchRecord]) -> Vec<Target> {
    let find = |c: &str| {
        fps.iter()
            .find(|r| r.scenario == PIPELINE_SCENARIO && r.column == c)
    };
    let fps_of = |c: &str| find(c).map(|r| r.fps);
    let heavy = |c: &str| {
        fps.iter()
            .find(|r| r.scenario == GPU_HEAVY_SCENARIO && r.column == c)
    };
    let median = |c: &str| batch.iter().find(|r| r.column == c).map(|r| r.median_us);
    let ring = find("ring");
    vec![
        Target {
            what: "ring / ideal (frames/s)",
            ratio: ratio(fps_of("ring"), fps_of("ideal")),
            bound: Bound::AtLeast,
            limit: 0.9,
        },
        Target {
            what: "ring / staging-sync (frames/s)",
            ratio: ratio(fps_of("ring"), fps_of("staging-sync")),
            bound: Bound::AtLeast,
            limit: 1.6,
        },
        Target {
            what: "ring p99 / ring p50 (frame time)",
            ratio: ratio(ring.and_then(|r| r.p99_us), ring.and_then(|r| r.p50_us)),
            bound: Bound::AtMost,
            limit: 1.5,
        },
        Target {
            what: "gpu-heavy: ring CPU / cpu-stage CPU (per frame)",
            ratio: ratio(
                heavy("ring").and_then(|r| r.cpu_us),
                heavy("cpu-stage").and_then(|r| r.cpu_us),
            ),
            bound: Bound::AtMost,
            limit: 1.15,
        },
        Target {
            what: "gpu-heavy: ring / ring-spin (frames/s)",
            ratio: ratio(
                heavy("ring").map(|r| r.fps),
                heavy("ring-spin").map(|r| r.fps),
            ),
            bound: Bound::AtLeast,
            limit: 0.97,
        },
        Target {
            what: "batched / largest-alone (median)",
            ratio: ratio(median("batched"), median("largest-alone")),
            bound: Bound::AtMost,
            limit: 1.3,
        },
        Target {
            what: "separate / batched (median)",
            ratio: ratio(median("separate"), median("batched")),
            bound: Bound::AtLeast,
            limit: 2.0,
        },
    ]
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::pipeline::batch::BatchColumn;
    use crate::pipeline::device::Work;
    use crate::pipeline::log_tables::targets_table;
    use crate::pipeline::loops::LoopColumn;
    use crate::pipeline::stages::StageCpu;
    use crate::records::records_json;
    use serde_json::Value;
    use std::time::Duration;

    fn summary(p50_us: u64, p99_us: u64, samples: usize) -> Summary {
        Summary::from_us(p50_us, p99_us, samples)
    }

    pub(crate) fn stages() -> StageTimes {
        StageTimes {
            cpu: summary(4000, 4400, 30),
            gpu: summary(3900, 4000, 30),
            bare_gpu: summary(400, 450, 30),
            work: Work { bytes: 3 << 30 },
            work_copies: 6,
            scratch_copy: Duration::from_micros(590),
            process_cpu: StageCpu {
                cpu_stage_us: Some(4050.5),
                gpu_stage_us: None,
            },
        }
    }

    pub(crate) fn loops() -> Vec<LoopRun> {
        let run = |column, fps, p50, p99| LoopRun {
            column,
            fps,
            frame_time: summary(p50, p99, 300),
            cpu_us: Some(p50 as f64 * 1.25),
        };
        vec![
            run(LoopColumn::PageableSync, 100.0, 10_000, 12_000),
            run(LoopColumn::StagingSync, 125.0, 8000, 9000),
            run(LoopColumn::Ring, 240.0, 4100, 5000),
        ]
    }

    pub(crate) fn batch() -> Vec<BatchRecord> {
        let run = |column, p50, p99| {
            BatchRecord::of(&BatchRun {
                column,
                time: summary(p50, p99, 1000),
            })
        };
        vec![
            run(BatchColumn::Separate, 60, 80),
            run(BatchColumn::Batched, 20, 30),
            run(BatchColumn::BatchedQueued, 24, 30),
            run(BatchColumn::LargestAlone, 16, 20),
        ]
    }

    fn keys(v: &Value) -> Vec<&str> {
        let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        k.sort_unstable();
        k
    }

    #[test]
    fn records_have_exactly_the_agreed_fields() {
        let mut all: Vec<Record> = fps_records(&stages(), &loops())
            .into_iter()
            .map(Record::Fps)
            .collect();
        all.extend(batch().into_iter().map(Record::Batch));
        let v: Value = serde_json::from_str(&records_json(&all)).unwrap();
        let recs = v["records"].as_array().unwrap();
        let columns: Vec<&str> = recs.iter().map(|r| r["column"].as_str().unwrap()).collect();
        assert_eq!(
            columns,
            [
                "pageable-sync",
                "staging-sync",
                "ring",
                "ideal",
                "cpu-stage",
                "gpu-stage",
                "separate",
                "batched",
                "batched-queued",
                "largest-alone"
            ]
        );
        let pipeline_keys = [
            "column", "cpu_us", "fps", "p50_us", "p99_us", "samples", "scenario",
        ];
        for r in &recs[..6] {
            assert_eq!(keys(r), pipeline_keys);
            assert_eq!(r["scenario"], "pipeline");
        }
        assert_eq!(recs[2]["fps"].as_f64(), Some(240.0));
        assert_eq!(recs[2]["p50_us"].as_f64(), Some(4100.0));
        assert_eq!(recs[2]["p99_us"].as_f64(), Some(5000.0));
        assert_eq!(recs[2]["samples"].as_u64(), Some(300));
        assert_eq!(recs[2]["cpu_us"].as_f64(), Some(5125.0));
        // ideal: 1e6 / max(4000, 3900) us, no latencies of its own.
        assert_eq!(recs[3]["fps"].as_f64(), Some(250.0));
        assert!(recs[3]["p50_us"].is_null() && recs[3]["p99_us"].is_null());
        assert!(recs[3]["samples"].is_null());
        assert!(recs[3]["cpu_us"].is_null());
        // Stages: one over their median, and the CPU per run (none read for the GPU
        // stage here: null).
        assert_eq!(recs[4]["fps"].as_f64(), Some(250.0));
        assert_eq!(recs[4]["samples"].as_u64(), Some(30));
        assert_eq!(recs[4]["cpu_us"].as_f64(), Some(4050.5));
        assert!(recs[5]["cpu_us"].is_null());
        for r in &recs[6..] {
            assert_eq!(
                keys(r),
                [
                    "bytes",
                    "column",
                    "median_us",
                    "p99_us",
                    "samples",
                    "scenario"
                ]
            );
            assert_eq!(r["scenario"], "batch");
        }
        assert_eq!(recs[6]["bytes"].as_u64(), Some(236_544));
        assert_eq!(recs[6]["median_us"].as_f64(), Some(60.0));
        assert_eq!(recs[9]["bytes"].as_u64(), Some(150_528));
        assert_eq!(recs[9]["samples"].as_u64(), Some(1000));
    }

    #[test]
    fn targets_divide_the_right_columns() {
        let mut fps = fps_records(&stages(), &loops());
        // The GPU-heavy scenario: the same records renamed, the ring-spin column the
        // ring's at 245 frames/s.
        let mut heavy: Vec<FpsRecord> = fps
            .iter()
            .cloned()
            .map(|r| r.in_scenario(GPU_HEAVY_SCENARIO))
            .collect();
        let spin = FpsRecord {
            column: "ring-spin",
            fps: 245.0,
            ..heavy[2].clone()
        };
        heavy.push(spin);
        fps.extend(heavy);
        let t = targets(&fps, &batch());
        let ratios: Vec<f64> = t.iter().map(|t| t.ratio.unwrap()).collect();
        let ring_cpu = fps[2].cpu_us.unwrap();
        let stage_cpu = fps[4].cpu_us.unwrap();
        assert_eq!(fps[2].column, "ring");
        assert_eq!(fps[4].column, "cpu-stage");
        let want = [
            240.0 / 250.0,
            240.0 / 125.0,
            5000.0 / 4100.0,
            ring_cpu / stage_cpu,
            240.0 / 245.0,
            20.0 / 16.0,
            3.0,
        ];
        assert_eq!(ratios.len(), want.len());
        for (got, want) in ratios.iter().zip(want) {
            assert!((got - want).abs() < 1e-9, "{ratios:?}");
        }
        let met: Vec<Option<bool>> = t.iter().map(Target::met).collect();
        let ring_cpu_met = ring_cpu / stage_cpu <= 1.15;
        assert_eq!(
            met,
            [
                Some(true),
                Some(true),
                Some(true),
                Some(ring_cpu_met),
                Some(true),
                Some(true),
                Some(true)
            ],
            "{t:?}"
        );
        let table = targets_table(&t);
        assert!(table.contains("ring / ideal (frames/s)"), "{table}");
        assert!(table.contains("0.96x (target >= 0.90) met"), "{table}");
        // Missing columns: not measured.
        let t = targets(&fps[..1], &[]);
        assert!(t.iter().all(|t| t.met().is_none()));
        assert!(targets_table(&t).contains("not measured"));
        // A missed bound says so.
        let slow = Target {
            ratio: Some(1.4),
            ..t[6].clone()
        };
        assert_eq!(slow.met(), Some(false));
    }
}
