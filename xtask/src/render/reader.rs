//! Reading what the benchmarks wrote: criterion's result folders into [`Record`]s,
//! and the other benchmark executables' records files into [`ScenarioRecord`]s.
//!
//! criterion 0.5 keeps each benchmark's latest run in `<id>/new/`: `benchmark.json`
//! (its id), `estimates.json` (point estimates with confidence intervals, in ns) and
//! `sample.json` (the raw samples: each sample's iteration count and total time, in
//! ns). The structs below type the parts we use; criterion writes more fields, which
//! serde ignores.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Deserialize;

use super::record::{sort_records, sort_scenario_records, Record, ScenarioRecord, BACK_TO_BACK};
use crate::{read_json, Context, Result};

/// criterion's `benchmark.json`: the parts of a benchmark's id.
#[derive(Debug, Deserialize)]
struct BenchmarkId {
    group_id: String,
    function_id: Option<String>,
    value_str: Option<String>,
}

/// criterion's `estimates.json`, of which we use the median.
#[derive(Debug, Deserialize)]
struct Estimates {
    median: Estimate,
}

/// One statistic's estimate, in ns.
#[derive(Debug, Deserialize)]
struct Estimate {
    point_estimate: f64,
    confidence_interval: ConfidenceInterval,
}

/// The bounds of an estimate's confidence interval, in ns.
#[derive(Debug, Deserialize)]
struct ConfidenceInterval {
    lower_bound: f64,
    upper_bound: f64,
}

/// criterion's `sample.json`: sample `i` ran `iters[i]` iterations in `times[i]` ns.
#[derive(Debug, Deserialize)]
struct Sample {
    iters: Vec<f64>,
    times: Vec<f64>,
}

impl Sample {
    /// The 99th percentile of the time per iteration, `times[i] / iters[i]`, in ns.
    /// `None` for an empty sample, or one whose lists disagree in length.
    fn p99_ns(&self) -> Option<f64> {
        if self.iters.len() != self.times.len() {
            return None;
        }
        let mut per_iter: Vec<f64> = self
            .iters
            .iter()
            .zip(&self.times)
            .filter(|(n, t)| **n > 0.0 && t.is_finite())
            .map(|(n, t)| t / n)
            .collect();
        per_iter.sort_by(f64::total_cmp);
        percentile(&per_iter, 99.0)
    }
}

/// The `p`th percentile (0 to 100) of sorted values, interpolated linearly between the
/// two nearest ranks, as criterion computes its own percentiles.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let rank = p.clamp(0.0, 100.0) / 100.0 * last as f64;
    let below = rank.floor() as usize;
    let above = (below + 1).min(last);
    let fraction = rank - below as f64;
    Some(sorted[below] + (sorted[above] - sorted[below]) * fraction)
}

/// Reads every `new/benchmark.json` + `new/estimates.json` under `root`. With `since`,
/// only results written at or after it (older ones are stale from earlier runs).
pub fn load_criterion(root: &Path, since: Option<SystemTime>) -> Result<Vec<Record>> {
    let mut found = Vec::new();
    find_results(root, &mut found)?;
    let mut by_key: BTreeMap<(String, u64, String), (SystemTime, Record)> = BTreeMap::new();
    let mut stale = 0;
    for new_dir in found {
        let estimates = new_dir.join("estimates.json");
        let mtime = fs::metadata(&estimates)
            .and_then(|m| m.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        if since.is_some_and(|s| mtime < s) {
            stale += 1;
            continue;
        }
        let Some(record) = read_result(&new_dir)? else {
            continue;
        };
        let key = (
            record.direction.clone(),
            record.bytes,
            record.column.clone(),
        );
        if let Some((old, _)) = by_key.get(&key) {
            eprintln!(
                "warning: {} {} {} measured twice; keeping the newer",
                key.0, key.1, key.2
            );
            if *old > mtime {
                continue;
            }
        }
        by_key.insert(key, (mtime, record));
    }
    if stale > 0 {
        eprintln!("note: left out {stale} older result(s) that this run did not write");
    }
    let mut records: Vec<Record> = by_key.into_values().map(|(_, r)| r).collect();
    sort_records(&mut records);
    Ok(records)
}

fn find_results(dir: &Path, found: &mut Vec<PathBuf>) -> Result<()> {
    let entries = fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            if entry.file_name() == "new" && path.join("benchmark.json").is_file() {
                found.push(path);
            } else {
                find_results(&path, found)?;
            }
        }
    }
    Ok(())
}

/// A records file, `<executable>.json` in `BENCH_RECORDS_DIR`.
#[derive(Debug, Deserialize)]
struct RecordsFile {
    records: Vec<ScenarioRecord>,
}

/// Reads every `*.json` in `dir`, the records the benchmark executables wrote (one
/// file each), in file name order. A record measured twice (same scenario, direction,
/// bytes and column) keeps the later one, with a warning. No folder means no records.
pub fn load_records(dir: &Path) -> Result<Vec<ScenarioRecord>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    let mut records: Vec<ScenarioRecord> = Vec::new();
    for path in files {
        for record in read_json::<RecordsFile>(&path)?.records {
            match records.iter_mut().find(|r| r.key() == record.key()) {
                Some(old) => {
                    eprintln!(
                        "warning: {} {} measured twice; keeping the one in {}",
                        record.scenario,
                        record.column,
                        path.display()
                    );
                    *old = record;
                }
                None => records.push(record),
            }
        }
    }
    sort_scenario_records(&mut records);
    Ok(records)
}

/// ns to µs, kept to 0.1 ns so that the JSON stays short.
fn ns_to_us(ns: f64) -> f64 {
    (ns * 10.0).round() / 1e4
}

/// One result; `None` (with a warning) when its id does not follow the naming contract.
fn read_result(new_dir: &Path) -> Result<Option<Record>> {
    let bench: BenchmarkId = read_json(&new_dir.join("benchmark.json"))?;
    let id: Vec<&str> = [
        Some(&bench.group_id),
        bench.function_id.as_ref(),
        bench.value_str.as_ref(),
    ]
    .into_iter()
    .flatten()
    .flat_map(|s| s.split('/'))
    .collect();
    let Some((direction, bytes, column)) = parse_id(&id) else {
        eprintln!(
            "warning: skipping benchmark {:?}: its id is not {{H2D|D2H}}/{{bytes}} + column",
            id.join("/")
        );
        return Ok(None);
    };
    let median = read_json::<Estimates>(&new_dir.join("estimates.json"))?.median;
    let sample_path = new_dir.join("sample.json");
    let p99_us = match read_json::<Sample>(&sample_path) {
        Ok(sample) => sample.p99_ns().map(ns_to_us),
        Err(e) => {
            eprintln!("warning: no p99 for {}: {e}", id.join("/"));
            None
        }
    };
    Ok(Some(Record {
        scenario: BACK_TO_BACK,
        direction,
        bytes,
        column,
        median_us: ns_to_us(median.point_estimate),
        low_us: ns_to_us(median.confidence_interval.lower_bound),
        high_us: ns_to_us(median.confidence_interval.upper_bound),
        p99_us,
    }))
}

/// `["H2D", "150528", "pageable"]` (in any order) to (direction, bytes, column).
fn parse_id(parts: &[&str]) -> Option<(String, u64, String)> {
    let mut direction = None;
    let mut bytes = None;
    let mut column = Vec::new();
    for p in parts {
        let upper = p.to_ascii_uppercase();
        if direction.is_none() && (upper == "H2D" || upper == "D2H") {
            direction = Some(upper);
        } else if bytes.is_none() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) {
            bytes = p.parse().ok();
        } else if !p.is_empty() {
            column.push(*p);
        }
    }
    if column.is_empty() {
        return None;
    }
    Some((direction?, bytes?, column.join("/")))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::super::fixtures::{fake_records, fake_result, fake_tree, temp_dir};
    use super::*;

    #[test]
    fn parses_ids() {
        let p = |v: &[&str]| parse_id(v);
        assert_eq!(
            p(&["H2D", "150528", "pageable"]),
            Some(("H2D".into(), 150_528, "pageable".into()))
        );
        assert_eq!(
            p(&["d2h", "copy-in", "64"]),
            Some(("D2H".into(), 64, "copy-in".into()))
        );
        assert_eq!(p(&["latency", "sync"]), None);
        assert_eq!(p(&["H2D", "64"]), None);
    }

    #[test]
    fn reads_a_fake_criterion_tree_in_table_order() {
        let tmp = temp_dir();
        fake_tree(tmp.path());
        let records = load_criterion(tmp.path(), None).unwrap();
        assert_eq!(records.len(), 4 * 6 + 1);
        // Sorted: H2D first, by size, columns in contract order, unknown ones last.
        assert_eq!(records[0].direction, "H2D");
        assert_eq!(records[0].column, "pageable");
        assert_eq!(records[6].column, "my-new-path");
        assert_eq!(records[6].bytes, 150_528);
        assert_eq!(records.last().unwrap().direction, "D2H");
        assert!((records[0].median_us - 19.9).abs() < 1e-9);
        assert!((records[0].low_us - 19.9 * 0.98).abs() < 1e-9);
        assert!((records[0].high_us - 19.9 * 1.02).abs() < 1e-9);
        // The fixture's per-iteration times run from 1.00x to 1.99x the median.
        assert_eq!(records[0].p99_us, Some(39.404));
        assert!(records.iter().all(|r| r.scenario == "back-to-back"));
    }

    #[test]
    fn p99_is_criterion_s_interpolated_percentile_of_per_iteration_times() {
        assert_eq!(percentile(&[], 99.0), None);
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0], 50.0), Some(2.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0], 100.0), Some(3.0));
        let v: Vec<f64> = (1..=101).map(f64::from).collect();
        assert_eq!(percentile(&v, 99.0), Some(100.0));
        // Per iteration: 10/1, 40/2, 90/3 = 10, 20, 30; 99% of the way from 10 to 30
        // lands 98% of the way from 20 to 30.
        let s = Sample {
            iters: vec![3.0, 1.0, 2.0],
            times: vec![90.0, 10.0, 40.0],
        };
        assert!((s.p99_ns().unwrap() - 29.8).abs() < 1e-9);
        let zero = Sample {
            iters: vec![0.0, 1.0],
            times: vec![5.0, 10.0],
        };
        assert_eq!(zero.p99_ns(), Some(10.0));
        let uneven = Sample {
            iters: vec![1.0],
            times: vec![],
        };
        assert_eq!(uneven.p99_ns(), None);
    }

    #[test]
    fn a_missing_sample_leaves_p99_empty() {
        let tmp = temp_dir();
        fake_result(tmp.path(), "H2D/64", "pageable", 5e3);
        fs::remove_file(tmp.path().join("H2D_64/pageable/new/sample.json")).unwrap();
        let records = load_criterion(tmp.path(), None).unwrap();
        assert_eq!(records[0].p99_us, None);
        assert_eq!(records[0].median_us, 5.0);
    }

    #[test]
    fn stale_results_are_left_out() {
        let tmp = temp_dir();
        fake_result(tmp.path(), "H2D/64", "pageable", 5e3);
        let later = SystemTime::now() + std::time::Duration::from_secs(3600);
        assert!(load_criterion(tmp.path(), Some(later)).unwrap().is_empty());
        assert_eq!(load_criterion(tmp.path(), None).unwrap().len(), 1);
    }

    #[test]
    fn a_malformed_estimates_file_is_an_error_naming_it() {
        let tmp = temp_dir();
        fake_result(tmp.path(), "H2D/64", "pageable", 5e3);
        let estimates = tmp.path().join("H2D_64/pageable/new/estimates.json");
        fs::write(&estimates, r#"{"mean": {}}"#).unwrap();
        let e = load_criterion(tmp.path(), None).unwrap_err().to_string();
        assert!(e.contains("estimates.json") && e.contains("median"), "{e}");
    }

    #[test]
    fn reads_records_files_typed_and_sorted() {
        let tmp = temp_dir();
        fake_records(tmp.path());
        let records = load_records(tmp.path()).unwrap();
        assert_eq!(records.len(), 28 + 9 + 4 + 4);
        // Scenarios in document order, the unknown one last.
        let scenarios: Vec<&str> = records.iter().map(|r| r.scenario.as_str()).collect();
        let first = |s: &str| scenarios.iter().position(|x| *x == s).unwrap();
        assert!(first("sleep-2ms") < first("busy-2ms"));
        assert!(first("busy-2ms") < first("tight-loop"));
        assert!(first("tight-loop") < first("contended"));
        assert!(first("contended") < first("four-pipelines"));
        assert!(first("four-pipelines") < first("pipeline"));
        assert!(first("pipeline") < first("batch"));
        assert!(first("batch") < first("scaling"));
        assert_eq!(scenarios.last(), Some(&"warm-start"));
        // Within a scenario: direction, bytes, then the column order.
        let r = &records[0];
        assert_eq!(
            (r.scenario.as_str(), r.direction.as_deref(), r.bytes),
            ("sleep-2ms", Some("H2D"), Some(150_528))
        );
        assert_eq!(r.column, "pageable");
        assert_eq!(
            (r.median_us, r.p99_us, r.cpu_us, r.samples),
            (Some(25.0), Some(40.0), Some(25.0), Some(1000))
        );
        // A record from before CPU was measured reads with no CPU.
        let old = records
            .iter()
            .find(|r| {
                r.scenario == "sleep-2ms"
                    && r.direction.as_deref() == Some("D2H")
                    && r.column == "resident"
            })
            .unwrap();
        assert_eq!(old.cpu_us, None);
        // The contended fields are typed, not left among the unknown ones.
        let contended = records
            .iter()
            .find(|r| r.scenario == "contended" && r.column == "copy-in")
            .unwrap();
        assert_eq!(
            (contended.neighbours, contended.neighbour_throughput),
            (Some(15), Some(0.945))
        );
        assert!(contended.other.is_empty(), "{:?}", contended.other);
        let d2h: Vec<&str> = records
            .iter()
            .filter(|r| r.scenario == "sleep-2ms" && r.direction.as_deref() == Some("D2H"))
            .map(|r| r.column.as_str())
            .collect();
        assert_eq!(d2h, ["pageable", "resident"]);
        let pipeline: Vec<&str> = records
            .iter()
            .filter(|r| r.scenario == "pipeline")
            .map(|r| r.column.as_str())
            .collect();
        // Unknown columns after the known ones.
        assert_eq!(
            pipeline,
            [
                "pageable-sync",
                "staging-sync",
                "ring",
                "ideal",
                "gpu-stage",
                "zero-copy"
            ]
        );
        // Integers where the schema has f64 read as numbers; null stays None.
        let four = records
            .iter()
            .find(|r| r.scenario == "four-pipelines" && r.column == "resident")
            .unwrap();
        assert_eq!((four.fps, four.copy_threads), (Some(240.0), Some(4)));
        let ideal = records.iter().find(|r| r.column == "ideal").unwrap();
        assert_eq!(
            (ideal.fps, ideal.p50_us, ideal.p99_us, ideal.cpu_us),
            (Some(100.0), None, None, None)
        );
        // Scaling: one GPU and two are two measurements, one GPU first; the GPU count
        // and GB/s are typed.
        let scaling: Vec<String> = records
            .iter()
            .filter(|r| r.scenario == "scaling")
            .map(|r| format!("{:?}", (&r.direction, r.bytes, r.gpus, r.gb_per_s)))
            .collect();
        assert_eq!(
            scaling,
            [
                r#"(Some("H2D"), Some(4915200), Some(1), Some(30.0))"#,
                r#"(Some("H2D"), Some(4915200), Some(2), Some(45.0))"#,
                r#"(Some("D2H"), Some(67108864), Some(1), Some(54.0))"#,
                r#"(Some("D2H"), Some(67108864), Some(2), Some(104.0))"#,
            ]
        );
        // The unknown scenario's own field is kept.
        let warm = records.last().unwrap();
        assert_eq!(warm.other.get("first_us"), Some(&serde_json::json!(812.5)));
    }

    #[test]
    fn records_measured_twice_keep_the_later_file_s() {
        let tmp = temp_dir();
        let one = |fps: f64| {
            serde_json::json!({"records": [{"scenario": "pipeline", "column": "ring", "fps": fps}]})
                .to_string()
        };
        fs::write(tmp.path().join("a.json"), one(1.0)).unwrap();
        fs::write(tmp.path().join("b.json"), one(2.0)).unwrap();
        let records = load_records(tmp.path()).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].fps, Some(2.0));
    }

    #[test]
    fn a_missing_records_folder_holds_no_records() {
        let tmp = temp_dir();
        assert!(load_records(&tmp.path().join("records"))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn malformed_records_files_are_errors_naming_them() {
        let tmp = temp_dir();
        let path = tmp.path().join("frame_loop.json");
        for bad in [
            r#"[1, 2]"#,
            r#"{"records": [{"column": "resident"}]}"#,
            r#"{"records": [{"scenario": "batch", "column": "batched", "bytes": "many"}]}"#,
            "{",
        ] {
            fs::write(&path, bad).unwrap();
            let e = load_records(tmp.path()).unwrap_err().to_string();
            assert!(e.contains("frame_loop.json"), "{bad}: {e}");
        }
    }
}
