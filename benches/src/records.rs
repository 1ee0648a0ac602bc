//! What the `frames` bench reports: `$BENCH_RECORDS_DIR/frames.json` for the
//! renderer, and compact tables on stdout for whoever reads the log first. The
//! writer ([`write_records_file`]) serves the `pipeline` bench too.
//!
//! The JSON is `{"records": [...]}` with three record shapes, fixed with the renderer:
//!
//! ```json
//! {"scenario": "sleep-2ms", "direction": "H2D", "bytes": 150528, "column": "copy-in",
//!  "median_us": 14.2, "p99_us": 20.9, "samples": 250}
//! {"scenario": "four-pipelines", "column": "resident", "fps": 1480.5,
//!  "p50_us": 402.1, "p99_us": 611.0, "samples": 1200, "copy_threads": 16}
//! {"scenario": "scaling", "direction": "H2D", "bytes": 67108864, "column": "resident",
//!  "gpus": 2, "gb_per_s": 108.4, "samples": 330}
//! ```
//!
//! The `scaling` records and their log table are in [`crate::scaling`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::frames::FrameColumn;
use crate::scaling::ScalingRecord;
use crate::stats::Summary;
use crate::Direction;

/// The environment variable naming the folder `frames.json` goes to.
pub const RECORDS_DIR_ENV: &str = "BENCH_RECORDS_DIR";

/// The file name of the records.
pub const FRAMES_FILE: &str = "frames.json";

/// One cell of a frame-loop scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FrameRecord {
    /// `sleep-2ms`, `sleep-16ms` or `busy-2ms`.
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
    /// Timed calls.
    pub samples: u64,
}

impl FrameRecord {
    /// The record of `column` in one cell.
    pub fn new(
        scenario: &'static str,
        direction: Direction,
        bytes: usize,
        column: FrameColumn,
        s: &Summary,
    ) -> FrameRecord {
        FrameRecord {
            scenario,
            direction: direction.label(),
            bytes: bytes as u64,
            column: column.name(),
            median_us: s.p50_us(),
            p99_us: s.p99_us(),
            samples: s.samples as u64,
        }
    }
}

/// One phase (column) of `four-pipelines`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PipelineRecord {
    /// Always `four-pipelines`.
    pub scenario: &'static str,
    /// `pageable`, `copy-in`, `copy-in-low-latency` or `resident`.
    pub column: &'static str,
    /// Frames of all threads over the phase's wall time.
    pub fps: f64,
    /// Nearest-rank median of the per-frame transfer time (four transfers), µs.
    pub p50_us: f64,
    /// Nearest-rank 99th percentile of it, µs.
    pub p99_us: f64,
    /// Timed frames, all threads.
    pub samples: u64,
    /// `cuda_staging::pool_threads_started()` after the phase.
    pub copy_threads: u64,
}

/// Either record, serialised without a tag (the fields tell them apart).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Record {
    /// A frame-loop cell.
    Frame(FrameRecord),
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

/// The faster of the two pageable medians of one cell.
fn best_pageable_us(cell: &[&FrameRecord]) -> Option<f64> {
    cell.iter()
        .filter(|r| {
            FrameColumn::ALL
                .iter()
                .any(|c| c.is_pageable() && c.name() == r.column)
        })
        .map(|r| r.median_us)
        .min_by(f64::total_cmp)
}

/// Frame-loop tables: per scenario and direction, a row per size with each
/// column's `p50/p99` in µs and the best pageable p50 divided by the column's
/// (above 1: faster than the faster pageable path).
pub fn frame_tables(records: &[FrameRecord]) -> String {
    let mut out = String::new();
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for r in records {
        if !keys.contains(&(r.scenario, r.direction)) {
            keys.push((r.scenario, r.direction));
        }
    }
    for (scenario, direction) in keys {
        let rows: Vec<&FrameRecord> = records
            .iter()
            .filter(|r| r.scenario == scenario && r.direction == direction)
            .collect();
        let mut sizes: Vec<u64> = rows.iter().map(|r| r.bytes).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let _ = writeln!(
            out,
            "{scenario} {direction}: p50/p99 us, (best pageable p50 / p50)"
        );
        let _ = write!(out, "{:>9}", "bytes");
        for c in FrameColumn::ALL {
            let _ = write!(out, " {:>21}", c.name());
        }
        out.push('\n');
        for bytes in sizes {
            let cell: Vec<&FrameRecord> =
                rows.iter().copied().filter(|r| r.bytes == bytes).collect();
            let best = best_pageable_us(&cell);
            let _ = write!(out, "{bytes:>9}");
            for c in FrameColumn::ALL {
                match cell.iter().find(|r| r.column == c.name()) {
                    Some(r) => {
                        let ratio = best.map_or_else(
                            || "   - ".to_string(),
                            |b| format!("{:>4.2}x", b / r.median_us),
                        );
                        let _ = write!(out, " {:>7.1}/{:<7.1} {ratio}", r.median_us, r.p99_us);
                    }
                    None => {
                        let _ = write!(out, " {:>21}", "-");
                    }
                }
            }
            out.push('\n');
        }
    }
    out
}

/// The `four-pipelines` table: a row per column.
pub fn pipeline_table(records: &[PipelineRecord]) -> String {
    let mut out = String::new();
    if records.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "four-pipelines: 4 threads x (sleep 2 ms; 150528 B + 4915200 B up, then down)"
    );
    let _ = writeln!(
        out,
        "{:>20} {:>9} {:>9} {:>9} {:>8} {:>12}",
        "column", "frames/s", "p50 us", "p99 us", "frames", "copy threads"
    );
    for r in records {
        let _ = writeln!(
            out,
            "{:>20} {:>9.1} {:>9.1} {:>9.1} {:>8} {:>12}",
            r.column, r.fps, r.p50_us, r.p99_us, r.samples, r.copy_threads
        );
    }
    out
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
    fn records_have_exactly_the_agreed_fields() {
        let frame = FrameRecord::new(
            "sleep-2ms",
            Direction::HostToDevice,
            150_528,
            FrameColumn::CopyInLowLatency,
            &summary(14, 21, 250),
        );
        let pipe = PipelineRecord {
            scenario: "four-pipelines",
            column: "resident",
            fps: 1480.5,
            p50_us: 402.0,
            p99_us: 611.0,
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
            Record::Pipeline(pipe),
            Record::Scaling(scaling),
        ]);
        let v: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(keys(&v), ["records"]);
        let recs = v["records"].as_array().unwrap();
        assert_eq!(recs.len(), 3);
        assert_eq!(
            keys(&recs[0]),
            [
                "bytes",
                "column",
                "direction",
                "median_us",
                "p99_us",
                "samples",
                "scenario"
            ]
        );
        assert_eq!(recs[0]["scenario"], "sleep-2ms");
        assert_eq!(recs[0]["direction"], "H2D");
        assert_eq!(recs[0]["bytes"].as_u64(), Some(150_528));
        assert_eq!(recs[0]["column"], "copy-in-low-latency");
        assert_eq!(recs[0]["median_us"].as_f64(), Some(14.0));
        assert_eq!(recs[0]["p99_us"].as_f64(), Some(21.0));
        assert_eq!(recs[0]["samples"].as_u64(), Some(250));
        assert_eq!(
            keys(&recs[1]),
            [
                "column",
                "copy_threads",
                "fps",
                "p50_us",
                "p99_us",
                "samples",
                "scenario"
            ]
        );
        assert_eq!(recs[1]["scenario"], "four-pipelines");
        assert_eq!(recs[1]["fps"].as_f64(), Some(1480.5));
        assert_eq!(recs[1]["samples"].as_u64(), Some(1200));
        assert_eq!(recs[1]["copy_threads"].as_u64(), Some(16));
        assert_eq!(
            keys(&recs[2]),
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
        assert_eq!(recs[2]["scenario"], "scaling");
        assert_eq!(recs[2]["direction"], "D2H");
        assert_eq!(recs[2]["bytes"].as_u64(), Some(64 << 20));
        assert_eq!(recs[2]["gpus"].as_u64(), Some(2));
        assert_eq!(recs[2]["gb_per_s"].as_f64(), Some(41.5));
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

    #[test]
    fn tables_divide_the_faster_pageable_median_by_each_column() {
        let cell = |column, p50| {
            FrameRecord::new(
                "busy-2ms",
                Direction::DeviceToHost,
                4_915_200,
                column,
                &summary(p50, p50 * 2, 100),
            )
        };
        let recs = [
            cell(FrameColumn::Pageable, 500),
            cell(FrameColumn::PageableAsync, 400),
            cell(FrameColumn::CopyIn, 200),
            cell(FrameColumn::Resident, 100),
        ];
        let t = frame_tables(&recs);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(lines[0].starts_with("busy-2ms D2H"), "{t}");
        assert!(lines[1].contains("copy-in-low-latency"), "{t}");
        let row = lines[2];
        assert!(row.trim_start().starts_with("4915200"), "{row}");
        assert!(row.contains("500.0/1000.0  0.80x"), "{row}");
        assert!(row.contains("400.0/800.0   1.00x"), "{row}");
        assert!(row.contains("200.0/400.0   2.00x"), "{row}");
        assert!(row.contains("100.0/200.0   4.00x"), "{row}");
        assert!(row.contains(" -"), "the missing column shows as -: {row}");
    }

    #[test]
    fn pipeline_table_has_a_row_per_column() {
        assert_eq!(pipeline_table(&[]), "");
        let r = PipelineRecord {
            scenario: "four-pipelines",
            column: "copy-in",
            fps: 1000.0,
            p50_us: 500.0,
            p99_us: 900.0,
            samples: 1200,
            copy_threads: 16,
        };
        let t = pipeline_table(&[r]);
        assert_eq!(t.lines().count(), 3);
        assert!(t.lines().last().unwrap().contains("copy-in"));
    }
}
