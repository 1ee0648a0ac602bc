//! The multi-GPU scaling table, from the `frames` bench's `scaling`
//! records: aggregate GB/s on one GPU and on all of them, and their ratio. It appears
//! only where such records exist (a machine with one GPU writes none).

use std::fmt::Write as _;

use super::cells::{cell, of, over, ratio_cell, samples_line, section};
use super::record::{direction_rank, scenario_column_rank, ScenarioRecord, SCALING};
use super::tables::{header_row, ratio_str};
use crate::human_bytes;

/// The target: two GPUs move at least this many times what one moves, with
/// `resident`.
const TARGET_RATIO: f64 = 1.8;

const SCALING_NOTE: &str = "One thread per GPU, each with its own context, stream, device \
buffer and `StagingBuffer` (the copy pool is the process's one pool), moving one size back \
to back: on one GPU, then on all of them. GB/s: bytes moved by all threads over the wall \
time, 10^9 bytes per second. The ratio is all GPUs over one, so 2.00x is perfect scaling on \
two. `resident` is `upload_with` / `download_into`; `copy-in` is `upload` / `download` from \
and to ordinary memory. **Target: 2 GPUs ≥ 1.80x one GPU for `resident`.**";

/// The "Multi-GPU scaling" section; empty without scaling records.
pub(super) fn scaling(records: &[ScenarioRecord]) -> String {
    let found: Vec<&ScenarioRecord> = of(records, SCALING)
        .into_iter()
        .filter(|r| r.direction.is_some() && r.bytes.is_some() && r.gpus.is_some())
        .collect();
    let Some(most) = found.iter().filter_map(|r| r.gpus).max() else {
        return String::new();
    };
    let mut rows: Vec<(&str, &str, u64)> = Vec::new();
    for r in &found {
        if let (Some(dir), Some(bytes)) = (r.direction.as_deref(), r.bytes) {
            if !rows.contains(&(r.column.as_str(), dir, bytes)) {
                rows.push((&r.column, dir, bytes));
            }
        }
    }
    rows.sort_by_key(|&(column, dir, bytes)| {
        (
            scenario_column_rank(SCALING, column),
            direction_rank(dir),
            bytes,
        )
    });
    let all = format!("{most} GPUs (GB/s)");
    let mut s = String::from("\n");
    s.push_str(&header_row(
        &["transfer", "bytes", "column"],
        &["1 GPU (GB/s)", all.as_str(), "ratio"],
    ));
    let (mut resident_rows, mut resident_met) = (0, 0);
    for (column, dir, bytes) in rows {
        let gb_at = |gpus: u64| {
            found
                .iter()
                .find(|r| {
                    r.column == column
                        && r.direction.as_deref() == Some(dir)
                        && r.bytes == Some(bytes)
                        && r.gpus == Some(gpus)
                })
                .and_then(|r| r.gb_per_s)
        };
        let (one, every) = (gb_at(1), gb_at(most));
        let ratio = over(every, one);
        if column == "resident" {
            resident_rows += 1;
            resident_met += usize::from(ratio.is_some_and(|x| x >= TARGET_RATIO));
        }
        let _ = writeln!(
            s,
            "| {dir} {} | {bytes} | {column} | {} | {} | {} |",
            human_bytes(bytes),
            cell(one),
            cell(every),
            ratio_cell(ratio)
        );
    }
    s.push_str(&samples_line(&found, "cell").replace("Samples", "Transfers timed"));
    if most == 2 && resident_rows > 0 {
        let _ = writeln!(
            s,
            "\n`resident` meets the {} target in {resident_met} of {resident_rows} rows.",
            ratio_str(TARGET_RATIO)
        );
    }
    section("Multi-GPU scaling", SCALING_NOTE, s)
}

/// In `docs/measurements.md`, where the frame-loop scenarios ran on a machine of one
/// GPU: a "Multi-GPU scaling" section that says the table is missing and why, rather
/// than leaving it out without a word. Empty otherwise.
pub(super) fn not_measured(gpus: Option<usize>, records: &[ScenarioRecord]) -> String {
    let Some(n) = gpus.filter(|&n| n < 2) else {
        return String::new();
    };
    if records.is_empty() || !of(records, SCALING).is_empty() {
        return String::new();
    }
    format!(
        "\n## Multi-GPU scaling\n\nNot measured in this run: the scaling scenario needs two or \
         more GPUs, and this machine showed {n}. `cargo xtask bench` on a machine with two or \
         more measures it and adds the table here.\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(column: &str, direction: &str, bytes: u64, gpus: u64, gb: f64) -> ScenarioRecord {
        serde_json::from_value(serde_json::json!({
            "scenario": "scaling", "direction": direction, "bytes": bytes, "column": column,
            "gpus": gpus, "gb_per_s": gb, "samples": 100 + gpus,
        }))
        .unwrap()
    }

    #[test]
    fn a_row_per_column_direction_and_size_with_one_gpu_all_gpus_and_the_ratio() {
        // Out of order: the table sorts (resident first, H2D first, small first).
        let records = [
            record("copy-in", "H2D", 4_915_200, 2, 40.0),
            record("copy-in", "H2D", 4_915_200, 1, 25.0),
            record("resident", "D2H", 67_108_864, 2, 100.0),
            record("resident", "D2H", 67_108_864, 1, 55.0),
            record("resident", "H2D", 4_915_200, 1, 50.0),
            record("resident", "H2D", 4_915_200, 2, 90.0),
        ];
        let md = scaling(&records);
        assert!(
            md.starts_with("\n## Multi-GPU scaling\n\nOne thread per GPU"),
            "{md}"
        );
        assert!(
            md.contains("**Target: 2 GPUs ≥ 1.80x one GPU for `resident`.**"),
            "{md}"
        );
        assert!(
            md.contains(
                "| transfer | bytes | column | 1 GPU (GB/s) | 2 GPUs (GB/s) | ratio |\n\
                 |---|---:|---:|---:|---:|---:|\n\
                 | H2D 4.69 MiB | 4915200 | resident | 50.0 | 90.0 | 1.80x |\n\
                 | D2H 64 MiB | 67108864 | resident | 55.0 | 100 | 1.82x |\n\
                 | H2D 4.69 MiB | 4915200 | copy-in | 25.0 | 40.0 | 1.60x |\n"
            ),
            "{md}"
        );
        assert!(
            md.contains("\nTransfers timed per cell: 101–102.\n"),
            "{md}"
        );
        assert!(
            md.contains("`resident` meets the 1.80x target in 2 of 2 rows."),
            "{md}"
        );
    }

    #[test]
    fn the_all_gpu_column_names_how_many_and_a_missing_cell_shows_a_dash() {
        let records = [
            record("resident", "H2D", 4_915_200, 1, 50.0),
            record("resident", "H2D", 4_915_200, 4, 180.0),
            record("resident", "D2H", 4_915_200, 4, 170.0),
        ];
        let md = scaling(&records);
        assert!(
            md.contains("| 1 GPU (GB/s) | 4 GPUs (GB/s) | ratio |"),
            "{md}"
        );
        assert!(
            md.contains("| H2D 4.69 MiB | 4915200 | resident | 50.0 | 180 | 3.60x |"),
            "{md}"
        );
        assert!(
            md.contains("| D2H 4.69 MiB | 4915200 | resident | — | 170 | — |"),
            "{md}"
        );
        // The target is stated for two GPUs: no tally with four.
        assert!(!md.contains("meets the"), "{md}");
    }

    #[test]
    fn a_missed_target_is_counted_and_nothing_shows_without_scaling_records() {
        let records = [
            record("resident", "H2D", 4_915_200, 1, 50.0),
            record("resident", "H2D", 4_915_200, 2, 60.0),
        ];
        assert!(scaling(&records).contains("meets the 1.80x target in 0 of 1 rows."));
        assert_eq!(scaling(&[]), "");
        let mut other = record("resident", "H2D", 4_915_200, 2, 60.0);
        other.scenario = "sleep-2ms".into();
        assert_eq!(scaling(&[other]), "");
    }

    #[test]
    fn a_one_gpu_run_says_why_the_scaling_table_is_missing() {
        let mut frame = record("resident", "H2D", 4_915_200, 1, 50.0);
        frame.scenario = "sleep-2ms".into();
        let note = not_measured(Some(1), std::slice::from_ref(&frame));
        assert!(note.contains("## Multi-GPU scaling"), "{note}");
        assert!(note.contains("this machine showed 1."), "{note}");
        // Nothing to say with scaling records, with two GPUs, with an unknown
        // count, or when no scenario ran at all.
        let scaled = record("resident", "H2D", 4_915_200, 1, 50.0);
        assert_eq!(not_measured(Some(1), &[frame.clone(), scaled]), "");
        assert_eq!(not_measured(Some(2), std::slice::from_ref(&frame)), "");
        assert_eq!(not_measured(None, std::slice::from_ref(&frame)), "");
        assert_eq!(not_measured(Some(1), &[]), "");
    }
}
