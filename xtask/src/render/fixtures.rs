//! Test fixtures: criterion result folders written the way criterion 0.5 lays them
//! out, and the machine the tests render for.

use std::fs;
use std::path::Path;

use xshell::{Shell, TempDir};

use super::{Machine, COLUMN_ORDER};

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
    }
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
