//! The "Frame loop" section: a table per frame-loop scenario (`sleep-2ms`,
//! `sleep-16ms`, `busy-2ms`, `tight-loop`, `contended`), latency and CPU per frame
//! side by side in every cell, and the per-row baseline both ratios divide by.

use std::fmt::Write as _;

use super::cells::{cell, find, of, over, samples_line, section, times_str};
use super::record::{direction_rank, ScenarioRecord, CONTENDED, FRAME_LOOP_SCENARIOS, TIGHT_LOOP};
use super::tables::{header_row, num3, ratio_str};
use crate::human_bytes;

/// The pageable columns; the faster of them in a row is the row's baseline.
pub(super) const PAGEABLE_COLUMNS: [&str; 2] = ["pageable", "pageable-async"];

const FRAME_LOOP_NOTE: &str = "Criterion runs transfers back to back; a program runs one \
per frame, with its thread asleep or busy in between, and the idle core costs time of its \
own. Each table below puts one such gap before every measured transfer (`tight-loop`: none, \
for the back-to-back CPU cost). Each cell: p50 / p99 in µs, then the latency ratio: the \
pageable baseline's p50 over the column's p50, so above 1.00x is faster than the baseline. \
The baseline is the faster p50 of `pageable` and `pageable-async` in that row. Then `cpu`: \
the process's CPU time per frame in µs, all threads (the library's copy helpers and the \
driver's included), with the gap's own CPU removed@IDLE@, and its multiple (×): the column's \
CPU over the baseline column's, so below 1.00× spends less CPU than the baseline. Latency \
says what a frame waits; CPU says what the wait cost the rest of the host.";
/// How the gap's CPU was removed, said only where the records carry `idle_cpu_us`:
/// records from runs before it was measured per cell had it removed otherwise.
const IDLE_REMOVED: &str = " (what the process spends over the same gap with no transfer, \
measured in the same cell)";

const TIGHT_LOOP_NOTE: &str = "`cpu` is per call: the process's CPU over each column's block \
of back-to-back calls, over its calls.";

const CONTENDED_NOTE: &str = "`cpu` leaves out the neighbours' own CPU. `neighbours`: their \
work per second during the column's block over that during blocks without transfers, so 1.000 \
means the transfers took nothing from them.";

/// The rows of one table: (direction, bytes), H2D first, small first.
fn rows(records: &[&ScenarioRecord]) -> Vec<(String, u64)> {
    let mut rows: Vec<(String, u64)> = Vec::new();
    for r in records {
        if let (Some(dir), Some(bytes)) = (r.direction.as_deref(), r.bytes) {
            if !rows.iter().any(|(d, b)| d == dir && *b == bytes) {
                rows.push((dir.to_string(), bytes));
            }
        }
    }
    rows.sort_by(|a, b| (direction_rank(&a.0), a.1).cmp(&(direction_rank(&b.0), b.1)));
    rows
}

/// The records of one row.
pub(super) fn row<'a>(
    records: &[&'a ScenarioRecord],
    dir: &str,
    bytes: u64,
) -> Vec<&'a ScenarioRecord> {
    records
        .iter()
        .copied()
        .filter(|r| r.direction.as_deref() == Some(dir) && r.bytes == Some(bytes))
        .collect()
}

/// A row's baseline: the pageable column with the faster p50.
pub(super) fn baseline<'a>(row: &[&'a ScenarioRecord]) -> Option<&'a ScenarioRecord> {
    PAGEABLE_COLUMNS
        .iter()
        .filter_map(|c| find(row, c))
        .filter(|r| r.p50().is_some())
        .min_by(|a, b| {
            a.p50()
                .unwrap_or(f64::MAX)
                .total_cmp(&b.p50().unwrap_or(f64::MAX))
        })
}

/// `frame_loop`'s heading of one scenario's table.
fn heading(scenario: &str, what: &str, records: &[&ScenarioRecord]) -> String {
    let neighbours = records.iter().filter_map(|r| r.neighbours).max();
    match neighbours {
        Some(n) if scenario == CONTENDED => {
            format!(
                "{scenario}: {what} ({n} neighbour thread{})",
                if n == 1 { "" } else { "s" }
            )
        }
        _ => format!("{scenario}: {what}"),
    }
}

/// The "Frame loop" section; empty without frame-loop records.
pub(super) fn frame_loop(records: &[ScenarioRecord]) -> String {
    let mut body = String::new();
    for (scenario, what) in FRAME_LOOP_SCENARIOS {
        let found: Vec<&ScenarioRecord> = of(records, scenario)
            .into_iter()
            .filter(|r| r.direction.is_some() && r.bytes.is_some())
            .collect();
        if found.is_empty() {
            continue;
        }
        let _ = writeln!(body, "\n### {}\n", heading(scenario, what, &found));
        let note = match scenario {
            TIGHT_LOOP => Some(TIGHT_LOOP_NOTE),
            CONTENDED => Some(CONTENDED_NOTE),
            _ => None,
        };
        if let Some(note) = note {
            let _ = writeln!(body, "{note}\n");
        }
        body.push_str(&frame_loop_table(&found));
        body.push_str(&samples_line(&found, "cell"));
        body.push_str(&idle_line(&found));
    }
    let measured_idle = records.iter().any(|r| r.other.contains_key("idle_cpu_us"));
    let note = FRAME_LOOP_NOTE.replace("@IDLE@", if measured_idle { IDLE_REMOVED } else { "" });
    section("Frame loop", &note, body)
}

/// The range of the records' `idle_cpu_us` (the process's CPU over a gap with no
/// transfer, already removed from their `cpu`), as a line after the table; empty
/// where no record has it.
fn idle_line(records: &[&ScenarioRecord]) -> String {
    let idle: Vec<f64> = records
        .iter()
        .filter_map(|r| r.other.get("idle_cpu_us").and_then(|v| v.as_f64()))
        .collect();
    let (Some(lo), Some(hi)) = (
        idle.iter().copied().reduce(f64::min),
        idle.iter().copied().reduce(f64::max),
    ) else {
        return String::new();
    };
    let range = if num3(lo) == num3(hi) {
        num3(lo)
    } else {
        format!("{}–{}", num3(lo), num3(hi))
    };
    format!(
        "CPU the process spent per frame over the same gap with no transfer, removed from \
         every `cpu` above: {range} µs.\n"
    )
}

/// One cell: `p50 / p99 (ratio) · cpu N (M×)`, and `· neighbours T` where the record
/// has it; the ratios only where the baseline has the numbers they need.
fn frame_cell(r: &ScenarioRecord, base: Option<&ScenarioRecord>) -> String {
    let mut s = format!("{} / {}", cell(r.p50()), cell(r.p99_us));
    if let Some(x) = over(base.and_then(ScenarioRecord::p50), r.p50()) {
        let _ = write!(s, " ({})", ratio_str(x));
    }
    if let Some(cpu) = r.cpu_us {
        let _ = write!(s, " · cpu {}", num3(cpu));
        if let Some(m) = over(Some(cpu), base.and_then(|b| b.cpu_us)) {
            let _ = write!(s, " ({})", times_str(m));
        }
    }
    if let Some(t) = r.neighbour_throughput {
        let _ = write!(s, " · neighbours {t:.3}");
    }
    s
}

/// Rows: direction × bytes; columns: the paths measured; cells: [`frame_cell`].
fn frame_loop_table(records: &[&ScenarioRecord]) -> String {
    let mut columns: Vec<&str> = Vec::new();
    for r in records {
        if !columns.contains(&r.column.as_str()) {
            columns.push(&r.column);
        }
    }
    let mut s = header_row(&["transfer", "bytes"], &columns);
    for (dir, bytes) in rows(records) {
        let row = row(records, &dir, bytes);
        let base = baseline(&row);
        let _ = write!(s, "| {dir} {} | {bytes} |", human_bytes(bytes));
        for column in &columns {
            match find(&row, column) {
                Some(r) => {
                    let _ = write!(s, " {} |", frame_cell(r, base));
                }
                None => s.push_str(" — |"),
            }
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::fixture_records;
    use super::*;

    fn record(column: &str, p50: f64, cpu: Option<f64>) -> ScenarioRecord {
        serde_json::from_value(serde_json::json!({
            "scenario": "sleep-2ms", "direction": "H2D", "bytes": 65_536, "column": column,
            "median_us": p50, "p99_us": p50 * 2.0, "cpu_us": cpu, "samples": 250,
        }))
        .unwrap()
    }

    #[test]
    fn frame_loop_tables_one_per_scenario_with_latency_and_cpu_ratios() {
        let md = frame_loop(&fixture_records());
        assert!(md.starts_with("\n## Frame loop\n\nCriterion runs transfers back to back"));
        assert!(md.contains(
            "\n### sleep-2ms: the calling thread sleeps 2 ms before every measured transfer\n\n\
             | transfer | bytes | pageable | pageable-async | copy-in | copy-in-low-latency | resident | resident-low-latency |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|\n"
        ), "{md}");
        // Baseline pageable-async (24.0, the faster p50): its CPU (26.0) is the CPU
        // baseline too, though pageable's CPU is lower.
        assert!(md.contains(
            "| H2D 147 KiB | 150528 | 25.0 / 40.0 (0.96x) · cpu 25.0 (0.96×) | 24.0 / 38.0 (1.00x) · cpu 26.0 (1.00×) | 20.0 / 30.0 (1.20x) · cpu 52.0 (2.00×) | 16.0 / 22.0 (1.50x) · cpu 1560 (60.00×) | 12.0 / 20.0 (2.00x) · cpu 13.0 (0.50×) | 11.0 / 15.0 (2.18x) · cpu 11.5 (0.44×) |\n"
        ), "{md}");
        // pageable alone is the baseline where pageable-async was not measured; a
        // record from before CPU was measured shows latency alone.
        assert!(md.contains(
            "| D2H 147 KiB | 150528 | 30.0 / 45.0 (1.00x) · cpu 31.0 (1.00×) | — | — | — | 12.0 / 18.0 (2.50x) | — |\n"
        ), "{md}");
        assert!(md.contains("\nSamples per cell: 1000.\n"), "{md}");
        // busy-2ms after sleep-2ms (document order), only its own columns.
        let busy = md
            .find("### busy-2ms: the calling thread computes for 2 ms")
            .unwrap();
        assert!(busy > md.find("### sleep-2ms").unwrap());
        assert!(
            md[busy..].contains(
                "| transfer | bytes | pageable | resident |\n|---|---:|---:|---:|\n\
             | H2D 147 KiB | 150528 | 20.0 / — (1.00x) · cpu 20.5 (1.00×) | 10.0 / 12.0 (2.00x) · cpu 10.2 (0.50×) |\n"
            ),
            "{md}"
        );
        assert!(md[busy..].contains("Samples per cell: 400–500."), "{md}");
        // sleep-16ms was not measured: no table for it.
        assert!(!md.contains("sleep-16ms"));
    }

    #[test]
    fn tight_loop_and_contended_tables_follow_with_notes_of_their_own() {
        let md = frame_loop(&fixture_records());
        let tight = md
            .find("\n### tight-loop: each column's transfers back to back")
            .unwrap();
        let contended = md
            .find(
                "\n### contended: the calling thread sleeps 2 ms before every measured transfer \
                 while neighbour threads compute on every other core (15 neighbour threads)\n\n\
                 `cpu` leaves out the neighbours' own CPU.",
            )
            .unwrap();
        assert!(md.find("### busy-2ms").unwrap() < tight && tight < contended);
        assert!(md[tight..].starts_with(&format!("\n### tight-loop: each column's transfers back to back, a block per column, no gap\n\n{TIGHT_LOOP_NOTE}\n\n| transfer |")), "{md}");
        // The baseline is pageable here (the faster p50), at 64 KiB as at 4.69 MiB.
        assert!(md[tight..contended].contains(
            "| D2H 4.69 MiB | 4915200 | 480 / 560 (1.00x) · cpu 472 (1.00×) | 490 / 570 (0.98x) · cpu 480 (1.02×) | 150 / 200 (3.20x) · cpu 2376 (5.03×) | 160 / 210 (3.00x) · cpu 2521 (5.34×) | 96.0 / 110 (5.00x) · cpu 97.0 (0.21×) |\n"
        ), "{md}");
        assert!(
            md[tight..contended]
                .contains("| H2D 64 KiB | 65536 | 17.4 / 20.0 (1.00x) · cpu 18.0 (1.00×) |"),
            "{md}"
        );
        assert!(
            md[contended..].contains(
                "| transfer | bytes | pageable | pageable-async | copy-in | resident |\n"
            ),
            "{md}"
        );
        assert!(md[contended..].contains(
            "| H2D 4.69 MiB | 4915200 | 1260 / 1400 (1.00x) · cpu 1300 (1.00×) · neighbours 0.995 | 1300 / 1500 (0.97x) · cpu 1350 (1.04×) · neighbours 0.990 | 2280 / 2600 (0.55x) · cpu 9000 (6.92×) · neighbours 0.945 | 205 / 230 (6.15x) · cpu 210 (0.16×) · neighbours 1.010 |\n"
        ), "{md}");
        assert!(
            md[contended..].contains("\nSamples per cell: 100.\n"),
            "{md}"
        );
    }

    #[test]
    fn the_idle_cpu_removed_is_stated_under_the_table_when_records_have_it() {
        let mut a = record("pageable", 30.0, Some(35.0));
        let mut b = record("copy-in", 25.0, Some(30.0));
        assert_eq!(idle_line(&[&a, &b]), "", "older records have none");
        a.other
            .insert("idle_cpu_us".into(), serde_json::json!(4.25));
        b.other
            .insert("idle_cpu_us".into(), serde_json::json!(22.0));
        let line = idle_line(&[&a, &b]);
        assert!(line.ends_with(": 4.25–22.0 µs.\n"), "{line}");
        b.other
            .insert("idle_cpu_us".into(), serde_json::json!(4.25));
        assert!(idle_line(&[&a, &b]).ends_with(": 4.25 µs.\n"));
        // The section's note says how the gap's CPU was removed only for records
        // that measured it: older ones had it removed otherwise.
        let how = "measured in the same cell";
        assert!(frame_loop(&[a.clone(), b.clone()]).contains(how));
        let (old_a, old_b) = (
            record("pageable", 30.0, Some(35.0)),
            record("copy-in", 25.0, None),
        );
        assert!(!frame_loop(&[old_a, old_b]).contains(how));
    }

    #[test]
    fn a_cell_shows_what_its_record_and_baseline_have() {
        let base = record("pageable", 40.0, Some(39.0));
        let fast = record("copy-in", 20.0, Some(78.0));
        assert_eq!(
            frame_cell(&fast, Some(&base)),
            "20.0 / 40.0 (2.00x) · cpu 78.0 (2.00×)"
        );
        // No baseline: numbers without ratios.
        assert_eq!(frame_cell(&fast, None), "20.0 / 40.0 · cpu 78.0");
        // A baseline without CPU: the latency ratio only.
        let old = record("pageable", 40.0, None);
        assert_eq!(
            frame_cell(&fast, Some(&old)),
            "20.0 / 40.0 (2.00x) · cpu 78.0"
        );
        // A baseline that spent no CPU gives no multiple rather than infinity.
        let free = record("pageable", 40.0, Some(0.0));
        assert_eq!(
            frame_cell(&fast, Some(&free)),
            "20.0 / 40.0 (2.00x) · cpu 78.0"
        );
        // The faster p50 is the baseline, whichever is cheaper.
        let async_ = record("pageable-async", 30.0, Some(60.0));
        let row = [&base, &async_, &fast];
        assert_eq!(
            baseline(&row).map(|r| r.column.as_str()),
            Some("pageable-async")
        );
        assert_eq!(baseline(&[&fast]), None);
    }
}
