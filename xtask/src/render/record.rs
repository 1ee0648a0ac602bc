//! What a bench run measured: criterion's back-to-back [`Record`]s, the
//! [`ScenarioRecord`]s the other benchmark executables write, and the order in which
//! the tables and the JSON list them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The back-to-back columns in table order; any other column follows them, by name.
pub(super) const COLUMN_ORDER: [&str; 10] = [
    "pageable",
    "pageable-async",
    "copy-in",
    "resident",
    "raw-pinned",
    "cudarc-pinned",
    "cudarc-pageable",
    "cudarc+copy-in",
    "cudarc+resident",
    "copy-in-registered",
];

/// What each transfer column measures, for the top of the documents: a markdown
/// table, ending with a newline. The scenario sections explain their own columns.
pub(super) const COLUMN_LEGEND: &str = "\
| column | what one transfer does |
|---|---|
| `pageable` | the driver's synchronous copy from or into an ordinary `Vec` (`DeviceBuffer::copy_from_host` / `copy_to_host`: `cuMemcpyHtoD` / `DtoH`) |
| `pageable-async` | the driver's copy from or into the same `Vec`, queued on the stream, then a stream sync |
| `copy-in` | `StagingBuffer::upload` / `download` with the same `Vec` (a host copy into or out of pinned memory, then the DMA) |
| `copy-in-registered` | `StagingBuffer::upload` / `download` with a `Vec` page-locked by `HostRegistration` (DMA'd straight from or into) |
| `copy-in-low-latency` | frame loops, in records made before it was removed: `copy-in` with the former low-latency mode on (copy helpers spinning between transfers) |
| `resident` | `StagingBuffer::upload_with` / `download_into`: the data is written or read in pinned memory, only the DMA moves it |
| `raw-pinned` | a copy queued from or into a `PinnedBuffer`, then a stream sync: the floor |
| `cudarc-pinned` | cudarc 0.19's `memcpy_htod` / `memcpy_dtoh` with its pinned host slice, then a sync |
| `cudarc-pageable` | cudarc 0.19, the same with an ordinary `Vec` |
| `cudarc+copy-in` | `copy-in` into or out of cudarc's `CudaSlice` through the bridge (feature `cudarc`: a `CudarcViewMut` / `CudarcView` made per call, on a `Stream` borrowed from cudarc's stream, cudarc's events waited for and recorded); the common shapes only |
| `cudarc+resident` | `resident` into or out of cudarc's `CudaSlice` through the bridge, as for `cudarc+copy-in`; the common shapes only |
";

/// The scenario of every criterion benchmark: transfers run back to back.
pub const BACK_TO_BACK: &str = "back-to-back";

/// The frame-loop scenarios in document order, each with what runs around the
/// measured transfers (the rest of its table's heading).
pub(super) const FRAME_LOOP_SCENARIOS: [(&str, &str); 5] = [
    (
        "sleep-2ms",
        "the calling thread sleeps 2 ms before every measured transfer",
    ),
    (
        "sleep-16ms",
        "the calling thread sleeps 16 ms before every measured transfer",
    ),
    (
        "busy-2ms",
        "the calling thread computes for 2 ms before every measured transfer",
    ),
    (
        TIGHT_LOOP,
        "each column's transfers back to back, a block per column, no gap",
    ),
    (
        CONTENDED,
        "the calling thread sleeps 2 ms before every measured transfer while \
         neighbour threads compute on every other core",
    ),
];
/// The scenario without a gap: each column's calls back to back.
pub(super) const TIGHT_LOOP: &str = "tight-loop";
/// The `sleep-2ms` loop beside neighbour threads of plain compute.
pub(super) const CONTENDED: &str = "contended";
/// The frame-loop columns in table order.
const FRAME_LOOP_COLUMNS: &[&str] = &[
    "pageable",
    "pageable-async",
    "copy-in",
    "copy-in-low-latency",
    "resident",
    "resident-low-latency",
];
/// The scenario of four pipelines running at once.
pub(super) const FOUR_PIPELINES: &str = "four-pipelines";
/// The scenario of one pipeline, synchronous or overlapped.
pub(super) const PIPELINE: &str = "pipeline";
/// The scenario of several downloads per frame, separate or batched.
pub(super) const BATCH: &str = "batch";
/// The pipeline with a GPU stage about twice its CPU stage (the wait policy's).
pub(super) const GPU_HEAVY: &str = "pipeline-gpu-heavy";
/// A download queued behind GPU work, under each wait policy.
pub(super) const BEHIND_WORK: &str = "behind-work";
/// The scenario of one GPU against all GPUs, one thread each.
pub(super) const SCALING: &str = "scaling";

/// Every scenario the tables know, in document order, with its columns in table order.
const SCENARIO_COLUMNS: [(&str, &[&str]); 11] = [
    (FRAME_LOOP_SCENARIOS[0].0, FRAME_LOOP_COLUMNS),
    (FRAME_LOOP_SCENARIOS[1].0, FRAME_LOOP_COLUMNS),
    (FRAME_LOOP_SCENARIOS[2].0, FRAME_LOOP_COLUMNS),
    (FRAME_LOOP_SCENARIOS[3].0, FRAME_LOOP_COLUMNS),
    (FRAME_LOOP_SCENARIOS[4].0, FRAME_LOOP_COLUMNS),
    (
        FOUR_PIPELINES,
        &["pageable", "copy-in", "copy-in-low-latency", "resident"],
    ),
    (
        PIPELINE,
        &[
            "pageable-sync",
            "staging-sync",
            "ring",
            "ideal",
            "cpu-stage",
            "gpu-stage",
        ],
    ),
    (
        BATCH,
        &["separate", "batched", "batched-queued", "largest-alone"],
    ),
    (
        GPU_HEAVY,
        &[
            "pageable-sync",
            "staging-sync",
            "ring-spin",
            "ring",
            "ideal",
            "cpu-stage",
            "gpu-stage",
        ],
    ),
    (BEHIND_WORK, &["spin", "default", "block"]),
    (SCALING, &["resident", "copy-in"]),
];

/// One criterion benchmark: its median with the median's confidence interval, and
/// its 99th percentile, in µs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    /// Always [`BACK_TO_BACK`]: criterion runs the transfers one after another.
    pub scenario: &'static str,
    /// `H2D` or `D2H`.
    pub direction: String,
    /// The transfer's size.
    pub bytes: u64,
    /// The transfer path measured, e.g. `pageable`, `resident`.
    pub column: String,
    /// criterion's median time per transfer.
    pub median_us: f64,
    /// The lower bound of the median's 95% confidence interval.
    pub low_us: f64,
    /// The upper bound of the median's 95% confidence interval.
    pub high_us: f64,
    /// The 99th percentile of the time per transfer over criterion's samples
    /// (`sample.json`); `None` where there was no sample to read.
    pub p99_us: Option<f64>,
}

/// [`Record`] as `measurements.json` holds it, read back.
#[derive(Deserialize)]
struct RecordJson {
    direction: String,
    bytes: u64,
    column: String,
    median_us: f64,
    low_us: f64,
    high_us: f64,
    p99_us: Option<f64>,
}

impl<'de> Deserialize<'de> for Record {
    /// Reads a record written by its `Serialize`; `scenario` is not read back, since a
    /// [`Record`]'s is always [`BACK_TO_BACK`].
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = RecordJson::deserialize(d)?;
        Ok(Record {
            scenario: BACK_TO_BACK,
            direction: r.direction,
            bytes: r.bytes,
            column: r.column,
            median_us: r.median_us,
            low_us: r.low_us,
            high_us: r.high_us,
            p99_us: r.p99_us,
        })
    }
}

impl Record {
    /// GB/s (10^9 bytes per second) at the median.
    pub(super) fn gbps(&self) -> f64 {
        self.bytes as f64 / (self.median_us * 1e3)
    }
}

/// What identifies a scenario record ([`ScenarioRecord::key`]): scenario, direction,
/// bytes, column, GPUs and whole µs of GPU work.
pub(super) type RecordKey<'a> = (
    &'a str,
    Option<&'a str>,
    Option<u64>,
    &'a str,
    Option<u64>,
    Option<u64>,
);

/// One record a benchmark executable wrote into `BENCH_RECORDS_DIR` (the file
/// `<executable>.json` holds `{"records": [...]}`).
///
/// Which fields a record has depends on its scenario: a frame-loop record
/// (`tight-loop` included) has `direction`, `bytes`, `median_us`, `p99_us` and
/// `cpu_us`, a `contended` one also `neighbours` and `neighbour_throughput`; a
/// pipeline record `fps`, `p50_us`, `p99_us` and `cpu_us`; a scaling record
/// `direction`, `bytes`, `gpus` and `gb_per_s`. A field a scenario does not use (or
/// a run did not measure: records from before CPU was measured have no `cpu_us`)
/// is absent; one this version does not know is kept in [`other`](Self::other), so
/// that measurements.json passes every record on whole, including those of scenarios
/// no table shows yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioRecord {
    /// What ran around the transfers: `sleep-2ms`, `four-pipelines`, `batch`, ...
    pub scenario: String,
    /// `H2D` or `D2H`, for scenarios that measure one direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    /// The bytes moved per transfer (a batch: in all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// The path measured, e.g. `pageable`, `copy-in-low-latency`, `ring`.
    pub column: String,
    /// The median time, in µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_us: Option<f64>,
    /// The median time per frame, in µs (pipelines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_us: Option<f64>,
    /// The 99th percentile, in µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_us: Option<f64>,
    /// The process's CPU time per frame (per call in `tight-loop`, per run for a
    /// pipeline's stages), all threads, the gap's own CPU removed, in µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us: Option<f64>,
    /// Frames per second (pipelines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fps: Option<f64>,
    /// How many transfers or frames were timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    /// The copy threads the library started (four pipelines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_threads: Option<u64>,
    /// GPUs moving at once, one thread each (scaling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u64>,
    /// Bytes moved by all threads over the wall time, 10^9 per second (scaling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gb_per_s: Option<f64>,
    /// Neighbour threads computing beside the transfers (contended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neighbours: Option<u64>,
    /// The neighbours' work per second during the column's block over that without
    /// transfers (contended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neighbour_throughput: Option<f64>,
    /// Fields this version does not know, kept as they came.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl ScenarioRecord {
    /// The median: `median_us`, or `p50_us` for records that name it so.
    pub(super) fn p50(&self) -> Option<f64> {
        self.median_us.or(self.p50_us)
    }

    /// What identifies a measurement: two records with the same key measured the
    /// same thing. `behind-work` cells differ by their GPU work too (`gpu_work_us`,
    /// rounded to whole µs).
    pub(super) fn key(&self) -> RecordKey<'_> {
        (
            &self.scenario,
            self.direction.as_deref(),
            self.bytes,
            &self.column,
            self.gpus,
            self.other
                .get("gpu_work_us")
                .and_then(|v| v.as_f64())
                .map(|w| w.round() as u64),
        )
    }
}

/// Everything a bench run measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Results {
    /// criterion's benchmarks.
    pub back_to_back: Vec<Record>,
    /// The records of the other benchmark executables.
    pub scenarios: Vec<ScenarioRecord>,
}

impl Results {
    /// Whether nothing at all was measured.
    pub fn is_empty(&self) -> bool {
        self.back_to_back.is_empty() && self.scenarios.is_empty()
    }
}

/// `name`'s place among `known`: known names first, in their order, then the others
/// by name.
fn rank<'a>(known: &[&str], name: &'a str) -> (usize, &'a str) {
    match known.iter().position(|k| *k == name) {
        Some(i) => (i, ""),
        None => (known.len(), name),
    }
}

/// H2D, then D2H, then anything else by name.
pub(super) fn direction_rank(d: &str) -> (usize, &str) {
    rank(&["H2D", "D2H"], d)
}

/// A back-to-back column's place in the tables.
pub(super) fn column_rank(c: &str) -> (usize, &str) {
    rank(&COLUMN_ORDER, c)
}

/// The columns `scenario` knows, in table order (none for an unknown scenario).
fn scenario_columns(scenario: &str) -> &'static [&'static str] {
    SCENARIO_COLUMNS
        .iter()
        .find(|(s, _)| *s == scenario)
        .map_or(&[], |(_, columns)| columns)
}

/// A scenario column's place in its table: known columns first, others by name.
pub(super) fn scenario_column_rank<'a>(scenario: &str, column: &'a str) -> (usize, &'a str) {
    rank(scenario_columns(scenario), column)
}

/// By direction, bytes and column, the order of the back-to-back tables.
pub(super) fn sort_records(records: &mut [Record]) {
    records.sort_by(|a, b| back_to_back_order(a).cmp(&back_to_back_order(b)));
}

/// The sort key of [`sort_records`].
fn back_to_back_order(r: &Record) -> impl Ord + '_ {
    (
        direction_rank(&r.direction),
        r.bytes,
        column_rank(&r.column),
    )
}

/// Known scenarios in document order, then the others by name; within one, by
/// direction, bytes and column.
pub(super) fn sort_scenario_records(records: &mut [ScenarioRecord]) {
    records.sort_by(|a, b| scenario_order(a).cmp(&scenario_order(b)));
}

/// The sort key of [`sort_scenario_records`].
fn scenario_order(r: &ScenarioRecord) -> impl Ord + '_ {
    let known = SCENARIO_COLUMNS.map(|(s, _)| s);
    (
        rank(&known, &r.scenario),
        r.direction.as_deref().map(direction_rank),
        r.bytes,
        scenario_column_rank(&r.scenario, &r.column),
        r.gpus,
    )
}
