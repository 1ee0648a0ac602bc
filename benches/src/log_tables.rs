//! The `frames` bench's tables on stdout, for whoever reads the log before the
//! rendered docs: per scenario and direction, latency and CPU per frame side by side
//! for every size and column, the neighbours' throughput for `contended`, and the
//! `four-pipelines` phases. (The records they print are in [`crate::records`].)

use std::fmt::Write as _;

use crate::frames::FrameColumn;
use crate::records::{ContendedRecord, FrameRecord, PipelineRecord};

/// Width of a latency cell: `p50/p99 ratio`.
const LATENCY_WIDTH: usize = 21;
/// Width of a CPU cell: `cpu ratio`.
const CPU_WIDTH: usize = 15;
/// Width of a throughput cell.
const THROUGHPUT_WIDTH: usize = 9;

/// The rows of one scenario and direction: a size each, ascending, with its records.
type Rows<'a> = Vec<(u64, Vec<&'a FrameRecord>)>;

/// The (scenario, direction) tables in the order the records first name them.
fn tables<'a>(records: &[&'a FrameRecord]) -> Vec<(&'static str, &'static str, Rows<'a>)> {
    let mut keys: Vec<(&'static str, &'static str)> = Vec::new();
    for r in records {
        if !keys.contains(&(r.scenario, r.direction)) {
            keys.push((r.scenario, r.direction));
        }
    }
    keys.into_iter()
        .map(|(scenario, direction)| {
            let of: Vec<&FrameRecord> = records
                .iter()
                .copied()
                .filter(|r| r.scenario == scenario && r.direction == direction)
                .collect();
            let mut sizes: Vec<u64> = of.iter().map(|r| r.bytes).collect();
            sizes.sort_unstable();
            sizes.dedup();
            let rows = sizes
                .into_iter()
                .map(|b| (b, of.iter().copied().filter(|r| r.bytes == b).collect()))
                .collect();
            (scenario, direction, rows)
        })
        .collect()
}

/// The baseline of one row: the pageable column with the faster median.
fn baseline<'a>(row: &[&'a FrameRecord]) -> Option<&'a FrameRecord> {
    row.iter()
        .copied()
        .filter(|r| {
            FrameColumn::ALL
                .iter()
                .any(|c| c.is_pageable() && c.name() == r.column)
        })
        .min_by(|a, b| a.median_us.total_cmp(&b.median_us))
}

/// `a / b` as `1.23x`, or `-` where either is missing or `b` is not positive.
fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:>4.2}x", a / b),
        _ => "   - ".to_string(),
    }
}

/// A table: `title`, a header of the column names, and a row per size whose cells
/// `cell(record, row)` makes (`-` where the column was not measured).
fn grid(
    out: &mut String,
    title: &str,
    rows: &Rows<'_>,
    width: usize,
    cell: impl Fn(&FrameRecord, &[&FrameRecord]) -> String,
) {
    let _ = writeln!(out, "{title}");
    let _ = write!(out, "{:>9}", "bytes");
    for c in FrameColumn::ALL {
        let _ = write!(out, " {:>width$}", c.name());
    }
    out.push('\n');
    for (bytes, row) in rows {
        let _ = write!(out, "{bytes:>9}");
        for c in FrameColumn::ALL {
            let text = row
                .iter()
                .find(|r| r.column == c.name())
                .map_or_else(|| "-".to_string(), |r| cell(r, row));
            let _ = write!(out, " {text:>width$}");
        }
        out.push('\n');
    }
}

/// What one `cpu_us` is per: a call back to back, else a frame.
fn cpu_unit(scenario: &str) -> &'static str {
    if scenario == crate::frames::Scenario::TightLoop.name() {
        "call"
    } else {
        "frame"
    }
}

/// The latency table, then the CPU table, of one scenario and direction.
fn latency_and_cpu(out: &mut String, scenario: &str, direction: &str, rows: &Rows<'_>) {
    grid(
        out,
        &format!("{scenario} {direction}: p50/p99 us, (best pageable p50 / p50)"),
        rows,
        LATENCY_WIDTH,
        |r, row| {
            let x = ratio(baseline(row).map(|b| b.median_us), Some(r.median_us));
            format!("{:>7.1}/{:<7.1} {x}", r.median_us, r.p99_us)
        },
    );
    grid(
        out,
        &format!(
            "{scenario} {direction}: cpu us per {}, all threads, (cpu / cpu of the best \
             pageable)",
            cpu_unit(scenario)
        ),
        rows,
        CPU_WIDTH,
        |r, row| {
            let x = ratio(r.cpu_us, baseline(row).and_then(|b| b.cpu_us));
            let cpu = r
                .cpu_us
                .map_or_else(|| "-".to_string(), |c| format!("{c:.1}"));
            format!("{cpu:>9} {x}")
        },
    );
}

/// Frame-loop and `tight-loop` tables: per scenario and direction, a row per size
/// with each column's `p50/p99` in µs and the best pageable p50 divided by the
/// column's (above 1: faster than the faster pageable path); then the same rows with
/// each column's CPU per frame and its ratio to that pageable column's CPU (below 1:
/// cheaper).
pub fn frame_tables(records: &[FrameRecord]) -> String {
    let mut out = String::new();
    let all: Vec<&FrameRecord> = records.iter().collect();
    for (scenario, direction, rows) in tables(&all) {
        latency_and_cpu(&mut out, scenario, direction, &rows);
    }
    out
}

/// `contended` tables: the latency and CPU tables of [`frame_tables`] (CPU without
/// the neighbours' own), then the neighbours' throughput per column.
pub fn contended_tables(records: &[ContendedRecord]) -> String {
    let mut out = String::new();
    let cells: Vec<&FrameRecord> = records.iter().map(|r| &r.cell).collect();
    let neighbours = records.iter().map(|r| r.neighbours).max().unwrap_or(0);
    for (scenario, direction, rows) in tables(&cells) {
        latency_and_cpu(&mut out, scenario, direction, &rows);
        grid(
            &mut out,
            &format!(
                "{scenario} {direction}: {neighbours} neighbours' throughput during the \
                 column's block / without transfers"
            ),
            &rows,
            THROUGHPUT_WIDTH,
            |r, _| {
                records
                    .iter()
                    .find(|c| &c.cell == r)
                    .and_then(|c| c.neighbour_throughput)
                    .map_or_else(|| "-".to_string(), |t| format!("{t:.3}"))
            },
        );
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
        "{:>20} {:>9} {:>9} {:>9} {:>9} {:>8} {:>12}",
        "column", "frames/s", "p50 us", "p99 us", "cpu us", "frames", "copy threads"
    );
    for r in records {
        let cpu = r
            .cpu_us
            .map_or_else(|| "-".to_string(), |c| format!("{c:.1}"));
        let _ = writeln!(
            out,
            "{:>20} {:>9.1} {:>9.1} {:>9.1} {cpu:>9} {:>8} {:>12}",
            r.column, r.fps, r.p50_us, r.p99_us, r.samples, r.copy_threads
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Summary;
    use crate::Direction;

    fn cell(
        scenario: &'static str,
        column: FrameColumn,
        p50: u64,
        cpu: Option<f64>,
    ) -> FrameRecord {
        FrameRecord::new(
            scenario,
            Direction::DeviceToHost,
            4_915_200,
            column,
            &Summary::from_us(p50, p50 * 2, 100),
            cpu,
        )
    }

    #[test]
    fn tables_divide_the_faster_pageable_median_and_cpu() {
        let recs = [
            cell("busy-2ms", FrameColumn::Pageable, 500, Some(520.0)),
            cell("busy-2ms", FrameColumn::PageableAsync, 400, Some(410.0)),
            cell("busy-2ms", FrameColumn::CopyIn, 200, Some(820.0)),
            cell("busy-2ms", FrameColumn::Resident, 100, None),
        ];
        let t = frame_tables(&recs);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 6, "{t}");
        assert!(lines[0].starts_with("busy-2ms D2H: p50/p99"), "{t}");
        assert!(
            lines[1].contains("copy-in") && lines[1].contains("resident"),
            "{t}"
        );
        let row = lines[2];
        assert!(row.trim_start().starts_with("4915200"), "{row}");
        assert!(row.contains("500.0/1000.0  0.80x"), "{row}");
        assert!(row.contains("400.0/800.0   1.00x"), "{row}");
        assert!(row.contains("200.0/400.0   2.00x"), "{row}");
        assert!(row.contains("100.0/200.0   4.00x"), "{row}");
        // CPU per frame over the CPU of pageable-async (the faster p50), not of the
        // cheaper or the first pageable column.
        assert!(
            lines[3].starts_with("busy-2ms D2H: cpu us per frame, all threads"),
            "{t}"
        );
        let cpu = lines[5];
        assert!(cpu.contains("520.0 1.27x"), "{cpu}");
        assert!(cpu.contains("410.0 1.00x"), "{cpu}");
        assert!(cpu.contains("820.0 2.00x"), "{cpu}");
        // No CPU reading: a dash, no ratio. (A column with no record at all shows
        // as a lone dash: `contended_tables_add_the_neighbours_throughput`.)
        assert!(cpu.trim_end().ends_with("-    -"), "{cpu}");
    }

    #[test]
    fn tight_loop_cpu_is_per_call_and_tables_follow_the_records_order() {
        let recs = [
            cell("tight-loop", FrameColumn::Pageable, 20, Some(21.0)),
            cell("sleep-2ms", FrameColumn::Pageable, 40, Some(39.0)),
        ];
        let t = frame_tables(&recs);
        let titles: Vec<&str> = t.lines().filter(|l| l.contains(':')).collect();
        assert_eq!(titles.len(), 4, "{t}");
        assert!(titles[0].starts_with("tight-loop D2H: p50/p99"), "{t}");
        assert!(
            titles[1].starts_with("tight-loop D2H: cpu us per call"),
            "{t}"
        );
        assert!(
            titles[3].starts_with("sleep-2ms D2H: cpu us per frame"),
            "{t}"
        );
    }

    #[test]
    fn contended_tables_add_the_neighbours_throughput() {
        let contended = |column, p50, cpu, throughput| ContendedRecord {
            cell: cell("contended", column, p50, Some(cpu)),
            neighbours: 15,
            neighbour_throughput: throughput,
        };
        let recs = [
            contended(FrameColumn::Pageable, 600, 610.0, Some(0.995)),
            contended(FrameColumn::CopyIn, 300, 900.0, Some(0.94)),
            contended(FrameColumn::Resident, 100, 101.0, None),
        ];
        let t = contended_tables(&recs);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 9, "{t}");
        assert!(
            lines[3].starts_with("contended D2H: cpu us per frame"),
            "{t}"
        );
        assert!(lines[5].contains("900.0 1.48x"), "{t}");
        assert!(
            lines[6].starts_with("contended D2H: 15 neighbours' throughput"),
            "{t}"
        );
        let row: Vec<&str> = lines[8].split_whitespace().collect();
        assert_eq!(row, ["4915200", "0.995", "-", "0.940", "-"], "{t}");
        assert_eq!(contended_tables(&[]), "");
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
            cpu_us: Some(640.5),
            samples: 1200,
            copy_threads: 16,
        };
        let t = pipeline_table(&[r]);
        assert_eq!(t.lines().count(), 3);
        assert!(t.lines().nth(1).unwrap().contains("cpu us"));
        let row: Vec<&str> = t.lines().last().unwrap().split_whitespace().collect();
        assert_eq!(
            row,
            ["copy-in", "1000.0", "500.0", "900.0", "640.5", "1200", "16"]
        );
    }
}
