//! Test fixtures: criterion result folders written the way criterion 0.5 lays them
//! out, and the machine the tests render for.

use std::fs;
use std::path::Path;

use xshell::{Shell, TempDir};

use super::record::{Record, COLUMN_ORDER};
use super::{load_criterion, Machine};

/// A fresh folder under the system temp dir, removed when dropped.
pub fn temp_dir() -> TempDir {
    Shell::new().unwrap().create_temp_dir().unwrap()
}

/// Writes one result the way criterion 0.5 lays it out.
pub fn fake_result(home: &Path, group: &str, function: &str, median_ns: f64) {
    let dir = home
        .join(group.replace('/', "_"))
        .join(function)
        .join("new");
    fs::create_dir_all(&dir).unwrap();
    let bench = serde_json::json!({
        "group_id": group, "function_id": function, "value_str": null,
        "throughput": null, "full_id": format!("{group}/{function}"),
        "directory_name": format!("{}/{function}", group.replace('/', "_")),
        "title": format!("{group}/{function}"),
    });
    let interval = |lo: f64, hi: f64| serde_json::json!({"confidence_level": 0.95, "lower_bound": lo, "upper_bound": hi});
    let est = serde_json::json!({
        "mean": {"point_estimate": median_ns, "standard_error": 1.0,
                 "confidence_interval": interval(median_ns * 0.9, median_ns * 1.1)},
        "median": {"point_estimate": median_ns, "standard_error": 1.0,
                   "confidence_interval": interval(median_ns * 0.98, median_ns * 1.02)},
    });
    // 100 samples of 1..=100 iterations whose times per iteration run from 1.00x to
    // 1.99x the median, shuffled by the iteration counts: p99 is 1.9801x the median.
    let iters: Vec<f64> = (1..=100).map(f64::from).collect();
    let times: Vec<f64> = iters
        .iter()
        .map(|n| n * median_ns * (1.0 + ((n - 1.0) * 37.0 % 100.0) / 100.0))
        .collect();
    let sample = serde_json::json!({"sampling_mode": "Linear", "iters": iters, "times": times});
    fs::write(dir.join("benchmark.json"), bench.to_string()).unwrap();
    fs::write(dir.join("estimates.json"), est.to_string()).unwrap();
    fs::write(dir.join("sample.json"), sample.to_string()).unwrap();
    // criterion also keeps the previous run, which must not be read.
    let base = dir.parent().unwrap().join("base");
    fs::create_dir_all(&base).unwrap();
    fs::write(base.join("benchmark.json"), bench.to_string()).unwrap();
}

/// The machine every rendering test names.
pub fn machine() -> Machine {
    Machine {
        device_name: "NVIDIA H200".into(),
        driver_version: "13.0".into(),
        host: "Intel(R) Xeon(R) Processor, 16 cores, 1 GPU".into(),
        date: "2026-01-02".into(),
        commit: "abc1234".into(),
        gpus: Some(1),
    }
}

/// The records of [`fake_tree`], read back by the reader.
pub fn fake_back_to_back() -> Vec<Record> {
    let tmp = temp_dir();
    fake_tree(tmp.path());
    load_criterion(tmp.path(), None).unwrap()
}

/// The anchor table's numbers (µs), plus pageable-async, raw-pinned and cudarc.
pub fn fake_tree(home: &Path) {
    let rows: [(&str, u64, [f64; 6]); 4] = [
        // pageable, pageable-async, copy-in, resident, raw-pinned, cudarc-pinned
        ("H2D", 150_528, [19.9, 21.0, 24.4, 10.8, 10.5, 12.3]),
        ("H2D", 4_915_200, [371.0, 360.0, 547.0, 97.2, 97.0, 98.9]),
        ("D2H", 150_528, [25.3, 26.0, 20.4, 9.2, 9.2, 11.1]),
        ("D2H", 196_608, [28.9, 30.0, 24.9, 10.0, 9.9, 9.5]),
    ];
    let cols = &COLUMN_ORDER[..6];
    for (dir, bytes, values) in rows {
        for (col, v) in cols.iter().zip(values) {
            fake_result(home, &format!("{dir}/{bytes}"), col, v * 1e3);
        }
    }
    fake_result(home, "H2D/150528", "my-new-path", 15.0e3);
    // Not following the naming contract: skipped with a warning.
    fake_result(home, "latency", "sync", 1.4e3);
}

/// Writes records files as the benchmark executables do: one `<name>.json` per
/// executable holding `{"records": [...]}`, covering every scenario the tables know
/// and one they do not (`warm-start`, with a field of its own).
pub fn fake_records(dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    let frame = |scenario: &str, direction: &str, column: &str, p50: f64, p99: f64, n: u64| {
        serde_json::json!({
            "scenario": scenario, "direction": direction, "bytes": 150_528, "column": column,
            "median_us": p50, "p99_us": if p99 > 0.0 { p99.into() } else { serde_json::Value::Null },
            "samples": n,
        })
    };
    let frame_loop = serde_json::json!({"records": [
        frame("sleep-2ms", "H2D", "pageable", 25.0, 40.0, 1000),
        frame("sleep-2ms", "H2D", "pageable-async", 24.0, 38.0, 1000),
        frame("sleep-2ms", "H2D", "copy-in", 20.0, 30.0, 1000),
        frame("sleep-2ms", "H2D", "copy-in-low-latency", 16.0, 22.0, 1000),
        frame("sleep-2ms", "H2D", "resident", 12.0, 20.0, 1000),
        frame("sleep-2ms", "H2D", "resident-low-latency", 11.0, 15.0, 1000),
        // Listed out of order: the tables sort.
        frame("sleep-2ms", "D2H", "resident", 12.0, 18.0, 1000),
        frame("sleep-2ms", "D2H", "pageable", 30.0, 45.0, 1000),
        frame("busy-2ms", "H2D", "resident", 10.0, 12.0, 400),
        frame("busy-2ms", "H2D", "pageable", 20.0, 0.0, 500),
    ]});
    let pipeline = |column: &str, fps: f64, p99: Option<f64>| {
        serde_json::json!({
            "scenario": "pipeline", "column": column, "fps": fps,
            "p50_us": p99.map(|_| 1e6 / fps), "p99_us": p99, "samples": 300,
        })
    };
    let pipelines = serde_json::json!({"records": [
        {"scenario": "four-pipelines", "column": "resident", "fps": 240, "p50_us": 4000,
         "p99_us": 5000, "samples": 400, "copy_threads": 4},
        {"scenario": "four-pipelines", "column": "pageable", "fps": 100.0, "p50_us": 9000.0,
         "p99_us": 12000.0, "samples": 400},
        {"scenario": "four-pipelines", "column": "copy-in", "fps": 150.0, "p50_us": 6000.0,
         "p99_us": 8000.0, "samples": 400, "copy_threads": 8},
        pipeline("zero-copy", 70.0, Some(16000.0)),
        pipeline("ideal", 100.0, None),
        pipeline("gpu-stage", 95.0, Some(12000.0)),
        pipeline("ring", 90.0, Some(13000.0)),
        pipeline("staging-sync", 60.0, Some(20000.0)),
        pipeline("pageable-sync", 50.0, Some(25000.0)),
        // The same cell on one GPU and on two: two measurements, not one twice.
        {"scenario": "scaling", "direction": "D2H", "bytes": 67_108_864, "column": "resident",
         "gpus": 2, "gb_per_s": 104.0, "samples": 320},
        {"scenario": "scaling", "direction": "D2H", "bytes": 67_108_864, "column": "resident",
         "gpus": 1, "gb_per_s": 54.0, "samples": 165},
        {"scenario": "scaling", "direction": "H2D", "bytes": 4_915_200, "column": "copy-in",
         "gpus": 1, "gb_per_s": 30.0, "samples": 1200},
        {"scenario": "scaling", "direction": "H2D", "bytes": 4_915_200, "column": "copy-in",
         "gpus": 2, "gb_per_s": 45.0, "samples": 1800},
    ]});
    let batch = serde_json::json!({"records": [
        {"scenario": "batch", "column": "largest-alone", "bytes": 300_000, "median_us": 56.0,
         "p99_us": 70.0, "samples": 200},
        {"scenario": "batch", "column": "batched", "bytes": 600_000, "median_us": 70.0,
         "p99_us": 90.0, "samples": 200},
        {"scenario": "batch", "column": "separate", "bytes": 600_000, "median_us": 100.0,
         "p99_us": 130.0, "samples": 200},
        {"scenario": "warm-start", "column": "resident", "first_us": 812.5},
    ]});
    fs::write(dir.join("frame_loop.json"), frame_loop.to_string()).unwrap();
    fs::write(dir.join("pipelines.json"), pipelines.to_string()).unwrap();
    fs::write(dir.join("batch.json"), batch.to_string()).unwrap();
    // Not a records file: ignored.
    fs::write(dir.join("notes.txt"), "not JSON").unwrap();
}
