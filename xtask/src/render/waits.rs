//! The "Waiting for the GPU" section: `pipeline-gpu-heavy` (the ring waits for the
//! GPU on every frame, with the default poll-then-block wait and spinning) and
//! `behind-work` (a download queued behind GPU work under each wait policy), each
//! with its targets checked.

use std::fmt::Write as _;

use super::cells::{
    cell, find, of, over, per_column_table, ratio_cell, samples_line, section, times_str,
};
use super::record::{ScenarioRecord, BEHIND_WORK, GPU_HEAVY};
use super::tables::{header_row, num3, ratio_str};

const NOTE: &str = "Every wait for the GPU (a transfer landing, a ring's ticket, \
`Stream::synchronize`) polls for a bounded time and then polls with short sleeps between \
(`WaitPolicy::default`); `WaitPolicy::Spin` spins through the whole wait, \
`WaitPolicy::Block` blocks in the driver at once.\n\n`pipeline-gpu-heavy` is the pipeline above with its \
stand-in model sized to a GPU stage of about twice the CPU stage, so the ring waits for the \
GPU on every frame; `ring-spin` is the same ring waiting by spinning. CPU/frame: the \
process's CPU time per frame (per run for the stages), all threads, in µs.";

const BEHIND_WORK_NOTE: &str = "`behind-work`: a `download_into` queued behind GPU work \
(device copies of about 1 or 5 ms, timed alone in the `GPU work` column), under each \
policy. Each cell: p50 / p99 of the call in µs, then `cpu`: the process's CPU over the \
call, all threads, mean µs.";

/// The section; empty without either scenario's records.
pub(super) fn waits(records: &[ScenarioRecord]) -> String {
    let mut body = gpu_heavy(records);
    let behind = behind_work(records);
    if !behind.is_empty() {
        let _ = write!(body, "\n{BEHIND_WORK_NOTE}\n{behind}");
    }
    section("Waiting for the GPU", NOTE, body)
}

/// The `pipeline-gpu-heavy` table and its targets' check.
fn gpu_heavy(records: &[ScenarioRecord]) -> String {
    let found = of(records, GPU_HEAVY);
    let spin_fps = find(&found, "ring-spin").and_then(|r| r.fps);
    let stage_cpu = find(&found, "cpu-stage").and_then(|r| r.cpu_us);
    let headers = [
        "frames/s",
        "vs ring-spin",
        "p50 (µs)",
        "p99 (µs)",
        "CPU/frame (µs)",
        "CPU vs cpu-stage",
    ];
    let mut table = per_column_table(&found, &headers, |r| {
        vec![
            cell(r.fps),
            ratio_cell(over(r.fps, spin_fps)),
            cell(r.p50()),
            cell(r.p99_us),
            cell(r.cpu_us),
            over(r.cpu_us, stage_cpu).map_or_else(|| "—".to_string(), times_str),
        ]
    });
    let ring = find(&found, "ring");
    let cpu_x = over(ring.and_then(|r| r.cpu_us), stage_cpu);
    let fps_x = over(ring.and_then(|r| r.fps), spin_fps);
    if let (Some(c), Some(f)) = (cpu_x, fps_x) {
        let spin_cpu_x = over(find(&found, "ring-spin").and_then(|r| r.cpu_us), stage_cpu);
        let _ = writeln!(
            table,
            "\nTargets: `ring` spends {} the CPU stage's CPU per frame (target ≤ 1.15×: {}; \
             `ring-spin`: {}) at {} `ring-spin`'s frames/s (target ≥ 0.97x: {}).",
            times_str(c),
            verdict(c <= 1.15),
            spin_cpu_x.map_or_else(|| "—".to_string(), times_str),
            ratio_str(f),
            verdict(f >= 0.97)
        );
    }
    table
}

/// The `behind-work` table, a row per (bytes, GPU work), and its targets' check.
fn behind_work(records: &[ScenarioRecord]) -> String {
    let found = of(records, BEHIND_WORK);
    let work = |r: &ScenarioRecord| r.other.get("gpu_work_us").and_then(|v| v.as_f64());
    let mut rows: Vec<(u64, f64)> = Vec::new();
    for r in &found {
        if let (Some(b), Some(w)) = (r.bytes, work(r)) {
            if !rows.iter().any(|&(rb, rw)| rb == b && rw == w) {
                rows.push((b, w));
            }
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    rows.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    let columns = ["spin", "default", "block"];
    let mut s = String::from("\n");
    s.push_str(&header_row(&["bytes", "GPU work (µs)"], &columns));
    let mut checks = Vec::new();
    for &(bytes, w) in &rows {
        let row: Vec<&ScenarioRecord> = found
            .iter()
            .copied()
            .filter(|r| r.bytes == Some(bytes) && work(r) == Some(w))
            .collect();
        let _ = write!(s, "| {bytes} | {} |", num3(w));
        for c in columns {
            match find(&row, c) {
                Some(r) => {
                    let _ = write!(s, " {} / {}", cell(r.p50()), cell(r.p99_us));
                    if let Some(cpu) = r.cpu_us {
                        let _ = write!(s, " · cpu {}", num3(cpu));
                    }
                    s.push_str(" |");
                }
                None => s.push_str(" — |"),
            }
        }
        s.push('\n');
        let (Some(d), Some(spin)) = (find(&row, "default"), find(&row, "spin")) else {
            continue;
        };
        if let (Some(p50), Some(cpu), Some(spin_p50)) = (d.p50(), d.cpu_us, spin.p50()) {
            let budget = 0.1 * p50 + 100.0;
            let slower = p50 - spin_p50;
            checks.push(format!(
                "- {bytes} B behind {} µs: `default` spends {} µs of CPU (target ≤ 10% of \
                 its p50 + 100 = {} µs: {}); its p50 is {} µs {} `spin`'s (target ≤ +50 µs: \
                 {}).",
                num3(w),
                num3(cpu),
                num3(budget),
                verdict(cpu <= budget),
                num3(slower.abs()),
                if slower >= 0.0 { "over" } else { "under" },
                verdict(slower <= 50.0)
            ));
        }
    }
    s.push_str(&samples_line(&found, "cell"));
    if !checks.is_empty() {
        let _ = write!(s, "\nTargets:\n\n{}\n", checks.join("\n"));
    }
    s
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(v: serde_json::Value) -> ScenarioRecord {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_gpu_heavy_table_checks_the_ring_against_spinning_and_the_cpu_stage() {
        let recs = vec![
            rec(
                serde_json::json!({"scenario": "pipeline-gpu-heavy", "column": "ring",
                "fps": 470.0, "p50_us": 2100.0, "p99_us": 2300.0, "cpu_us": 1150.0, "samples": 300}),
            ),
            rec(
                serde_json::json!({"scenario": "pipeline-gpu-heavy", "column": "ring-spin",
                "fps": 480.0, "p50_us": 2080.0, "p99_us": 2200.0, "cpu_us": 2080.0, "samples": 300}),
            ),
            rec(
                serde_json::json!({"scenario": "pipeline-gpu-heavy", "column": "cpu-stage",
                "fps": 950.0, "p50_us": 1050.0, "p99_us": 1100.0, "cpu_us": 1060.0, "samples": 30}),
            ),
        ];
        let md = waits(&recs);
        assert!(md.starts_with("\n## Waiting for the GPU\n"), "{md}");
        let spin_row = md.lines().find(|l| l.starts_with("| ring-spin |")).unwrap();
        assert!(spin_row.contains("| 1.00x |"), "{spin_row}");
        // 1150 / 1060 = 1.08× (met); 470 / 480 = 0.98x (met).
        assert!(md.contains("`ring` spends 1.08× the CPU stage's CPU per frame (target ≤ 1.15×: met; `ring-spin`: 1.96×) at 0.98x"), "{md}");
        assert!(md.contains("(target ≥ 0.97x: met)"), "{md}");
        assert_eq!(waits(&[]), "");
    }

    #[test]
    fn behind_work_rows_per_size_and_work_with_the_default_checked_against_spin() {
        let r = |bytes: u64, work: f64, column: &str, p50: f64, cpu: f64| {
            rec(
                serde_json::json!({"scenario": "behind-work", "direction": "D2H",
                "bytes": bytes, "column": column, "gpu_work_us": work, "median_us": p50,
                "p99_us": p50 + 10.0, "cpu_us": cpu, "samples": 100}),
            )
        };
        let recs = vec![
            r(150_528, 1000.0, "spin", 1020.0, 1015.0),
            r(150_528, 1000.0, "default", 1040.0, 90.0),
            r(150_528, 1000.0, "block", 1050.0, 20.0),
            r(150_528, 5000.0, "spin", 5020.0, 5015.0),
            r(150_528, 5000.0, "default", 5090.0, 120.0),
        ];
        let md = waits(&recs);
        assert!(md.contains("| 150528 | 1000 | 1020 / 1030 · cpu 1015 | 1040 / 1050 · cpu 90.0 | 1050 / 1060 · cpu 20.0 |"), "{md}");
        assert!(md.contains("| 150528 | 5000 |"), "{md}");
        assert!(
            md.contains("5000 | 5020 / 5030 · cpu 5015 | 5090 / 5100 · cpu 120 | — |"),
            "{md}"
        );
        // 90 ≤ 0.1 × 1040 + 100 = 204: met; +20 µs: met. 5090 − 5020 = 70 > 50: missed.
        assert!(md.contains("- 150528 B behind 1000 µs: `default` spends 90.0 µs of CPU (target ≤ 10% of its p50 + 100 = 204 µs: met); its p50 is 20.0 µs over `spin`'s (target ≤ +50 µs: met)."), "{md}");
        assert!(
            md.contains("its p50 is 70.0 µs over `spin`'s (target ≤ +50 µs: MISSED)"),
            "{md}"
        );
    }
}
