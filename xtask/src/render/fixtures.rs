//! Test fixtures: criterion result folders written the way criterion 0.5 lays them
//! out, and the machine the tests render for.

use std::fs;
use std::path::Path;

use xshell::{Shell, TempDir};

use super::record::{Record, ScenarioRecord, COLUMN_ORDER};
use super::{load_criterion, load_records, Machine};

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

/// The records of [`fake_records`], read back by the reader.
pub fn fixture_records() -> Vec<ScenarioRecord> {
    let tmp = temp_dir();
    fake_records(tmp.path());
    load_records(tmp.path()).unwrap()
}

/// Writes records files as the benchmark executables do: one `<name>.json` per
/// executable holding `{"records": [...]}`, covering every scenario the tables know
/// and one they do not (`warm-start`, with a field of its own). Some records have no
/// `cpu_us`, as those written before CPU was measured.
pub fn fake_records(dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    let frame = |scenario: &str, direction: &str, column: &str, p50: f64, p99: f64, n: u64| {
        serde_json::json!({
            "scenario": scenario, "direction": direction, "bytes": 150_528, "column": column,
            "median_us": p50, "p99_us": if p99 > 0.0 { p99.into() } else { serde_json::Value::Null },
            "samples": n,
        })
    };
    let with_cpu = |mut r: serde_json::Value, cpu: f64| {
        r["cpu_us"] = cpu.into();
        r
    };
    // A cell of tight-loop or contended, at any size.
    let sized = |scenario: &str,
                 direction: &str,
                 bytes: u64,
                 column: &str,
                 p50: f64,
                 p99: f64,
                 cpu: f64| {
        serde_json::json!({
            "scenario": scenario, "direction": direction, "bytes": bytes, "column": column,
            "median_us": p50, "p99_us": p99, "cpu_us": cpu, "samples": 400,
        })
    };
    let contended =
        |direction: &str, bytes: u64, column: &str, p50: f64, p99: f64, cpu: f64, kept: f64| {
            let mut r = sized("contended", direction, bytes, column, p50, p99, cpu);
            r["samples"] = 100.into();
            r["neighbours"] = 15.into();
            r["neighbour_throughput"] = kept.into();
            r
        };
    let frame_loop = serde_json::json!({"records": [
        with_cpu(frame("sleep-2ms", "H2D", "pageable", 25.0, 40.0, 1000), 25.0),
        with_cpu(frame("sleep-2ms", "H2D", "pageable-async", 24.0, 38.0, 1000), 26.0),
        with_cpu(frame("sleep-2ms", "H2D", "copy-in", 20.0, 30.0, 1000), 52.0),
        with_cpu(frame("sleep-2ms", "H2D", "copy-in-low-latency", 16.0, 22.0, 1000), 1560.0),
        with_cpu(frame("sleep-2ms", "H2D", "resident", 12.0, 20.0, 1000), 13.0),
        with_cpu(frame("sleep-2ms", "H2D", "resident-low-latency", 11.0, 15.0, 1000), 11.5),
        // Listed out of order: the tables sort.
        frame("sleep-2ms", "D2H", "resident", 12.0, 18.0, 1000),
        with_cpu(frame("sleep-2ms", "D2H", "pageable", 30.0, 45.0, 1000), 31.0),
        with_cpu(frame("busy-2ms", "H2D", "resident", 10.0, 12.0, 400), 10.2),
        with_cpu(frame("busy-2ms", "H2D", "pageable", 20.0, 0.0, 500), 20.5),
        sized("tight-loop", "D2H", 4_915_200, "resident", 96.0, 110.0, 97.0),
        sized("tight-loop", "D2H", 4_915_200, "copy-in-low-latency", 160.0, 210.0, 2521.0),
        sized("tight-loop", "D2H", 4_915_200, "copy-in", 150.0, 200.0, 2376.0),
        sized("tight-loop", "D2H", 4_915_200, "pageable-async", 490.0, 570.0, 480.0),
        sized("tight-loop", "D2H", 4_915_200, "pageable", 480.0, 560.0, 472.0),
        sized("tight-loop", "H2D", 65_536, "pageable", 17.4, 20.0, 18.0),
        sized("tight-loop", "H2D", 65_536, "pageable-async", 18.0, 21.0, 19.0),
        sized("tight-loop", "H2D", 65_536, "copy-in", 14.9, 18.0, 30.0),
        sized("tight-loop", "H2D", 65_536, "copy-in-low-latency", 12.0, 14.0, 160.0),
        sized("tight-loop", "H2D", 65_536, "resident", 8.0, 9.0, 8.4),
        contended("H2D", 4_915_200, "pageable", 1260.0, 1400.0, 1300.0, 0.995),
        contended("H2D", 4_915_200, "pageable-async", 1300.0, 1500.0, 1350.0, 0.99),
        contended("H2D", 4_915_200, "copy-in", 2280.0, 2600.0, 9000.0, 0.945),
        contended("H2D", 4_915_200, "resident", 205.0, 230.0, 210.0, 1.01),
        contended("D2H", 1_048_576, "pageable", 360.0, 400.0, 380.0, 1.0),
        contended("D2H", 1_048_576, "pageable-async", 370.0, 420.0, 390.0, 1.0),
        contended("D2H", 1_048_576, "copy-in", 285.0, 320.0, 700.0, 0.98),
        contended("D2H", 1_048_576, "resident", 40.0, 45.0, 44.0, 1.0),
    ]});
    let pipeline = |column: &str, fps: f64, p99: Option<f64>, cpu: Option<f64>| {
        serde_json::json!({
            "scenario": "pipeline", "column": column, "fps": fps,
            "p50_us": p99.map(|_| 1e6 / fps), "p99_us": p99, "cpu_us": cpu, "samples": 300,
        })
    };
    let pipelines = serde_json::json!({"records": [
        {"scenario": "four-pipelines", "column": "resident", "fps": 240, "p50_us": 4000,
         "p99_us": 5000, "cpu_us": 1000, "samples": 400, "copy_threads": 4},
        {"scenario": "four-pipelines", "column": "pageable", "fps": 100.0, "p50_us": 9000.0,
         "p99_us": 12000.0, "cpu_us": 1500.0, "samples": 400},
        {"scenario": "four-pipelines", "column": "copy-in", "fps": 150.0, "p50_us": 6000.0,
         "p99_us": 8000.0, "cpu_us": 2400.0, "samples": 400, "copy_threads": 8},
        pipeline("zero-copy", 70.0, Some(16000.0), None),
        pipeline("ideal", 100.0, None, None),
        pipeline("gpu-stage", 95.0, Some(12000.0), Some(3000.0)),
        pipeline("ring", 90.0, Some(13000.0), Some(12500.0)),
        pipeline("staging-sync", 60.0, Some(20000.0), Some(17000.0)),
        pipeline("pageable-sync", 50.0, Some(25000.0), Some(21000.0)),
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
