//! What the `frames` bench reports: `$BENCH_RECORDS_DIR/frames.json` for the
//! renderer ([`crate::log_tables`] prints the same records as compact tables on
//! stdout). The writer ([`write_records_file`]) serves the `pipeline` bench too.
//!
//! The JSON is `{"records": [...]}` with four record shapes, fixed with the renderer:
//!
//! ```json
//! {"scenario": "sleep-2ms", "direction": "H2D", "bytes": 150528, "column": "copy-in",
//!  "median_us": 14.2, "p99_us": 20.9, "cpu_us": 31.5, "samples": 250}
//! {"scenario": "contended", "direction": "H2D", "bytes": 150528, "column": "copy-in",
//!  "median_us": 14.2, "p99_us": 20.9, "cpu_us": 31.5, "samples": 100,
//!  "neighbours": 15, "neighbour_throughput": 0.99}
//! {"scenario": "four-pipelines", "column": "resident", "fps": 1480.5,
//!  "p50_us": 402.1, "p99_us": 611.0, "cpu_us": 420.7, "samples": 1200, "copy_threads": 16}
//! {"scenario": "scaling", "direction": "H2D", "bytes": 67108864, "column": "resident",
//!  "gpus": 2, "gb_per_s": 108.4, "samples": 330}
//! ```
//!
//! The first shape serves `sleep-2ms`, `sleep-16ms`, `busy-2ms` and `tight-loop`.
//! `cpu_us` is the process's CPU time per frame (per call in `tight-loop`), all
//! threads, in µs, with the gap's own CPU removed (what the process spends over the
//! same gap with no transfer; a frame-loop or `contended` record notes it as
//! `idle_cpu_us`); how each scenario measures it is
//! in [`crate::frame_loop`], [`crate::tight_loop`], [`crate::contended`] and
//! [`crate::four_pipelines`]. It is `null` where the CPU clocks are unavailable
//! ([`crate::cpu_time`]). `neighbour_throughput` (`contended` only) is the neighbour
//! threads' work per second during the column's block over that during blocks
//! without transfers; `null` with no neighbours (a one-core machine).
//! `driver_routed` (the staging columns of the first two shapes) is the share of the
//! column's calls over the cell that went to the driver's own path ([`Routes`]).
//!
//! The `scaling` records and their log table are in [`crate::scaling`].

use std::path::{Path, PathBuf};

use cuda_staging::StagingStats;
use serde::Serialize;

use crate::frames::FrameColumn;
use crate::scaling::ScalingRecord;
use crate::stats::Summary;
use crate::Direction;

/// The environment variable naming the folder `frames.json` goes to.
pub const RECORDS_DIR_ENV: &str = "BENCH_RECORDS_DIR";

/// The file name of the records.
pub const FRAMES_FILE: &str = "frames.json";

/// One cell of a frame-loop scenario (`sleep-2ms`, `sleep-16ms`, `busy-2ms`,
/// `tight-loop`), and the common part of a `contended` one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FrameRecord {
    /// The scenario's name ([`crate::frames::Scenario::name`]).
    pub scenario: &'static str,
    /// `H2D` or `D2H`.
    pub direction: &'static str,
    /// Bytes per transfer.
    pub bytes: u64,
    /// The column name ([`FrameColumn::name`]).
    pub column: &'static str,
    /// Nearest-rank median of the per-call times, µs.
    pub median_us: f64,
    /// Nearest-rank 99th percentile, µs.
    pub p99_us: f64,
    /// Process CPU time per frame (all threads, the gap's own CPU removed), µs;
    /// `None` (`null`) where the CPU clocks are unavailable.
    pub cpu_us: Option<f64>,
    /// The process's CPU per frame over the same gap with no transfer (the driver's
    /// own threads tick meanwhile), already removed from `cpu_us`, µs; absent where
    /// the scenario has no gap (`tight-loop`) or the clocks are unavailable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_cpu_us: Option<f64>,
    /// Timed calls.
    pub samples: u64,
    /// For the staging columns: the share of the cell's calls (warm-up included) that
    /// went to the driver's own path (`StagingStats::direct_transfers`), which says
    /// which route `copy-in` (`upload` / `download`) took; always 0 for `resident`
    /// (`upload_with` / `download_into` are always staged). Absent for the driver's
    /// columns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_routed: Option<f64>,
}

impl FrameRecord {
    /// The record of `column` in one cell: its latencies `s` and its CPU per frame.
    pub fn new(
        scenario: &'static str,
        direction: Direction,
        bytes: usize,
        column: FrameColumn,
        s: &Summary,
        cpu_us: Option<f64>,
    ) -> FrameRecord {
        FrameRecord {
            scenario,
            direction: direction.label(),
            bytes: bytes as u64,
            column: column.name(),
            median_us: s.p50_us(),
            p99_us: s.p99_us(),
            cpu_us,
            idle_cpu_us: None,
            samples: s.samples as u64,
            driver_routed: None,
        }
    }

    /// The same, noting `idle_cpu_us` (see the field).
    pub fn with_idle_cpu(self, idle_cpu_us: Option<f64>) -> FrameRecord {
        FrameRecord {
            idle_cpu_us,
            ..self
        }
    }

    /// The same, noting `driver_routed` (see the field) from a staging column's
    /// `routes` over the cell (`None` for the driver's columns).
    pub fn with_routes(self, routes: Option<Routes>) -> FrameRecord {
        FrameRecord {
            driver_routed: routes.and_then(|r| r.driver_share()),
            ..self
        }
    }
}

/// A staging column's `upload` / `download` calls by route, as its buffer's
/// [`StagingStats`] counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Routes {
    /// Calls that went to the driver's own path.
    pub driver: u64,
    /// Every call counted: staged, the driver's path and page-locked.
    pub calls: u64,
}

impl Routes {
    /// The counts in `stats`.
    pub fn of(stats: &StagingStats) -> Routes {
        Routes {
            driver: stats.direct_transfers,
            calls: stats.staged_transfers + stats.direct_transfers + stats.pinned_source_transfers,
        }
    }

    /// The calls counted between two readings of the same buffer; `None` where
    /// either is (a driver's column).
    pub fn between(before: Option<Routes>, after: Option<Routes>) -> Option<Routes> {
        let (before, after) = (before?, after?);
        Some(Routes {
            driver: after.driver.saturating_sub(before.driver),
            calls: after.calls.saturating_sub(before.calls),
        })
    }

    /// The share of the calls that went to the driver's path; `None` without calls.
    pub fn driver_share(self) -> Option<f64> {
        (self.calls > 0).then(|| self.driver as f64 / self.calls as f64)
    }
}

/// One cell of the `contended` scenario: a frame record and what the transfers cost
/// the neighbour threads.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ContendedRecord {
    /// The latencies and CPU per frame (CPU without the neighbours' own).
    #[serde(flatten)]
    pub cell: FrameRecord,
    /// Neighbour threads computing beside the frame loop.
    pub neighbours: u64,
    /// The neighbours' iterations per second during this column's block over those
    /// during the blocks without transfers; `None` (`null`) without neighbours.
    pub neighbour_throughput: Option<f64>,
}

/// One phase (column) of `four-pipelines`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PipelineRecord {
    /// Always `four-pipelines`.
    pub scenario: &'static str,
    /// `pageable`, `copy-in` or `resident`.
    pub column: &'static str,
    /// Frames of all threads over the phase's wall time.
    pub fps: f64,
    /// Nearest-rank median of the per-frame transfer time (four transfers), µs.
    pub p50_us: f64,
    /// Nearest-rank 99th percentile of it, µs.
    pub p99_us: f64,
    /// Process CPU time over the phase per frame of all threads, µs (the gaps are
    /// sleeps); `None` (`null`) where the CPU clocks are unavailable.
    pub cpu_us: Option<f64>,
    /// Timed frames, all threads.
    pub samples: u64,
    /// `cuda_staging::pool_threads_started()` after the phase.
    pub copy_threads: u64,
}

/// Any record, serialised without a tag (the fields tell them apart).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Record {
    /// A frame-loop or `tight-loop` cell.
    Frame(FrameRecord),
    /// A `contended` cell.
    Contended(ContendedRecord),
    /// A `four-pipelines` phase.
    Pipeline(PipelineRecord),
    /// A `scaling` cell.
    Scaling(ScalingRecord),
}

#[derive(Serialize)]
struct RecordsFile<'a, R> {
    records: &'a [R],
}

/// `{"records": [...]}`, pretty-printed.
pub fn to_json(records: &[Record]) -> String {
    records_json(records)
}

/// `{"records": [...]}` of any records, pretty-printed (what every bench executable
/// writes).
pub fn records_json<R: Serialize>(records: &[R]) -> String {
    serde_json::to_string_pretty(&RecordsFile { records })
        .expect("records hold only strings and finite numbers")
}

/// Writes `records` to `dir/frames.json`, creating `dir`; returns the path.
pub fn write_records(dir: &Path, records: &[Record]) -> Result<PathBuf, String> {
    write_records_file(dir, FRAMES_FILE, records)
}

/// Writes `records` as `{"records": [...]}` to `dir/file`, creating `dir`; returns
/// the path.
pub fn write_records_file<R: Serialize>(
    dir: &Path,
    file: &str,
    records: &[R],
) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(file);
    std::fs::write(&path, records_json(records) + "\n")
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn summary(p50_us: u64, p99_us: u64, samples: usize) -> Summary {
        Summary::from_us(p50_us, p99_us, samples)
    }

    fn keys(v: &Value) -> Vec<&str> {
        let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        k.sort_unstable();
        k
    }

    #[test]
    fn a_staging_column_notes_the_share_of_its_calls_the_driver_took_over_the_cell() {
        let stats = |staged, direct, pinned| StagingStats {
            staged_transfers: staged,
            direct_transfers: direct,
            pinned_source_transfers: pinned,
            ..StagingStats::default()
        };
        // 3 calls before the cell; over it, 8 staged and 2 to the driver.
        let before = Some(Routes::of(&stats(2, 1, 0)));
        let after = Some(Routes::of(&stats(10, 3, 0)));
        let over = Routes::between(before, after);
        assert_eq!(
            over,
            Some(Routes {
                driver: 2,
                calls: 10
            })
        );
        assert_eq!(over.and_then(Routes::driver_share), Some(0.2));
        // Page-locked calls count as calls, not as the driver's.
        let pinned = Routes::between(Some(Routes::default()), Some(Routes::of(&stats(0, 1, 3))));
        assert_eq!(pinned.and_then(Routes::driver_share), Some(0.25));
        // No calls, or a driver's column (no buffer): nothing to note.
        assert_eq!(
            Routes::between(before, before).and_then(Routes::driver_share),
            None
        );
        assert_eq!(Routes::between(None, after), None);
        assert_eq!(Routes::between(before, None), None);

        let record = |routes| {
            let r = FrameRecord::new(
                "contended",
                Direction::HostToDevice,
                1 << 20,
                FrameColumn::CopyIn,
                &summary(130, 200, 100),
                Some(140.0),
            )
            .with_routes(routes);
            serde_json::to_value(r).unwrap()
        };
        assert_eq!(record(over)["driver_routed"].as_f64(), Some(0.2));
        assert!(
            record(None).get("driver_routed").is_none(),
            "absent, not null"
        );
    }

    #[test]
    fn records_have_exactly_the_agreed_fields() {
        let frame = FrameRecord::new(
            "sleep-2ms",
            Direction::HostToDevice,
            150_528,
            FrameColumn::Resident,
            &summary(14, 21, 250),
            Some(31.5),
        );
        let contended = ContendedRecord {
            cell: FrameRecord::new(
                "contended",
                Direction::DeviceToHost,
                4_915_200,
                FrameColumn::CopyIn,
                &summary(300, 420, 100),
                None,
            ),
            neighbours: 15,
            neighbour_throughput: Some(0.97),
        };
        let pipe = PipelineRecord {
            scenario: "four-pipelines",
            column: "resident",
            fps: 1480.5,
            p50_us: 402.0,
            p99_us: 611.0,
            cpu_us: Some(420.25),
            samples: 1200,
            copy_threads: 16,
        };
        let scaling = ScalingRecord {
            scenario: "scaling",
            direction: "D2H",
            bytes: 64 << 20,
            column: "copy-in",
            gpus: 2,
            gb_per_s: 41.5,
            samples: 250,
        };
        let json = to_json(&[
            Record::Frame(frame),
            Record::Contended(contended),
            Record::Pipeline(pipe),
            Record::Scaling(scaling),
        ]);
        let v: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(keys(&v), ["records"]);
        let recs = v["records"].as_array().unwrap();
        assert_eq!(recs.len(), 4);
        let frame_keys = [
            "bytes",
            "column",
            "cpu_us",
            "direction",
            "median_us",
            "p99_us",
            "samples",
            "scenario",
        ];
        assert_eq!(keys(&recs[0]), frame_keys);
        assert_eq!(recs[0]["scenario"], "sleep-2ms");
        assert_eq!(recs[0]["direction"], "H2D");
        assert_eq!(recs[0]["bytes"].as_u64(), Some(150_528));
        assert_eq!(recs[0]["column"], "resident");
        assert_eq!(recs[0]["median_us"].as_f64(), Some(14.0));
        assert_eq!(recs[0]["p99_us"].as_f64(), Some(21.0));
        assert_eq!(recs[0]["cpu_us"].as_f64(), Some(31.5));
        assert_eq!(recs[0]["samples"].as_u64(), Some(250));
        // A contended cell: the frame fields, flat, then what it cost the neighbours.
        let mut contended_keys = frame_keys.to_vec();
        contended_keys.extend(["neighbour_throughput", "neighbours"]);
        contended_keys.sort_unstable();
        assert_eq!(keys(&recs[1]), contended_keys);
        assert_eq!(recs[1]["scenario"], "contended");
        assert_eq!(recs[1]["column"], "copy-in");
        assert_eq!(recs[1]["median_us"].as_f64(), Some(300.0));
        assert!(recs[1]["cpu_us"].is_null(), "no clock: null, not absent");
        assert_eq!(recs[1]["neighbours"].as_u64(), Some(15));
        assert_eq!(recs[1]["neighbour_throughput"].as_f64(), Some(0.97));
        assert_eq!(
            keys(&recs[2]),
            [
                "column",
                "copy_threads",
                "cpu_us",
                "fps",
                "p50_us",
                "p99_us",
                "samples",
                "scenario"
            ]
        );
        assert_eq!(recs[2]["scenario"], "four-pipelines");
        assert_eq!(recs[2]["fps"].as_f64(), Some(1480.5));
        assert_eq!(recs[2]["cpu_us"].as_f64(), Some(420.25));
        assert_eq!(recs[2]["samples"].as_u64(), Some(1200));
        assert_eq!(recs[2]["copy_threads"].as_u64(), Some(16));
        assert_eq!(
            keys(&recs[3]),
            [
                "bytes",
                "column",
                "direction",
                "gb_per_s",
                "gpus",
                "samples",
                "scenario"
            ]
        );
        assert_eq!(recs[3]["scenario"], "scaling");
        assert_eq!(recs[3]["direction"], "D2H");
        assert_eq!(recs[3]["bytes"].as_u64(), Some(64 << 20));
        assert_eq!(recs[3]["gpus"].as_u64(), Some(2));
        assert_eq!(recs[3]["gb_per_s"].as_f64(), Some(41.5));
    }

    #[test]
    fn records_are_written_into_a_new_folder() {
        let dir = std::env::temp_dir().join(format!("benches-records-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let nested = dir.join("a/b");
        let path = write_records(&nested, &[]).unwrap();
        assert_eq!(path, nested.join("frames.json"));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["records"].as_array().map(Vec::len), Some(0));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
