//! The "Pitched 2-D frames" section: the `pitched` bench's scenarios
//! (`pitched-2d`, `pitched-2d-padded`), a full-HD RGB frame between host rows and a
//! `cuMemAllocPitch` surface, with each column's ratio to the driver's own 2-D copy;
//! and the line saying it was not measured when a run has other scenarios but not
//! these.

use std::fmt::Write as _;

use super::cells::{cell, over, ratio_cell, samples_line, section};
use super::record::{direction_rank, ScenarioRecord};
use super::tables::header_row;

/// Host rows 64-byte aligned (for a 1920-pixel RGB frame, the rows themselves).
pub(super) const PITCHED: &str = "pitched-2d";
/// Host rows with 64 bytes of padding each.
pub(super) const PITCHED_PADDED: &str = "pitched-2d-padded";

const TITLE: &str = "Pitched 2-D frames";

const NOTE: &str = "A 1920×1080 RGB `u8` frame (6220800 bytes of rows) between host rows in an \
ordinary `Vec` and a `cuMemAllocPitch` surface, back to back, the columns interleaved. \
`driver-2d`: the driver's synchronous `cuMemcpy2D` (`PitchedBuffer::copy_from_host` / \
`copy_to_host`); `driver-2d-async`: `cuMemcpy2DAsync` on the stream, then a sync; `upload-2d` \
/ `download-2d`: `StagingBuffer::upload_2d` / `download_2d` with the same `Vec`; \
`upload-2d-with` / `download-2d-into`: the rows written or read packed in pinned memory; \
`raw-pinned-2d`: a 2-D copy from or into a `PinnedBuffer`, the floor. Median and p99 in µs; \
GB/s of rows at the median; CPU/call: the process's CPU over the call, all threads, mean µs. \
`vs driver`: the faster of `driver-2d` and `driver-2d-async` in that direction over the \
column's median, so above 1.00x is faster than the driver.";

/// The columns in table order, per direction.
const H2D_COLUMNS: [&str; 5] = [
    "driver-2d",
    "driver-2d-async",
    "upload-2d",
    "upload-2d-with",
    "raw-pinned-2d",
];
const D2H_COLUMNS: [&str; 5] = [
    "driver-2d",
    "driver-2d-async",
    "download-2d",
    "download-2d-into",
    "raw-pinned-2d",
];

/// The section; empty without records of either scenario.
pub(super) fn pitched(records: &[ScenarioRecord]) -> String {
    let mut body = String::new();
    for (scenario, what) in [
        (
            PITCHED,
            "64-byte aligned, which for this frame is the rows themselves",
        ),
        (PITCHED_PADDED, "with 64 bytes of padding after each row"),
    ] {
        let found = of_scenario(records, scenario);
        if found.is_empty() {
            continue;
        }
        let pitch = |key: &str| {
            found
                .iter()
                .find_map(|r| r.other.get(key).and_then(|v| v.as_u64()))
                .map_or_else(|| "—".to_string(), |p| p.to_string())
        };
        let _ = writeln!(
            body,
            "\n`{scenario}`: host rows {} bytes apart ({what}); device rows {} bytes apart \
             (the driver's pitch).\n",
            pitch("host_pitch_bytes"),
            pitch("device_pitch_bytes"),
        );
        body.push_str(&table(&found));
    }
    section(TITLE, NOTE, body)
}

/// The records of `scenario`: H2D then D2H, each in table order.
fn of_scenario<'a>(records: &'a [ScenarioRecord], scenario: &str) -> Vec<&'a ScenarioRecord> {
    let mut found: Vec<&ScenarioRecord> =
        records.iter().filter(|r| r.scenario == scenario).collect();
    found.sort_by_key(|r| {
        let d = r.direction.as_deref().unwrap_or("");
        let columns = if d == "D2H" { D2H_COLUMNS } else { H2D_COLUMNS };
        let rank = columns
            .iter()
            .position(|c| *c == r.column)
            .unwrap_or(columns.len());
        (direction_rank(d), rank, r.column.as_str())
    });
    found
}

/// One scenario's table: a row per direction and column.
fn table(found: &[&ScenarioRecord]) -> String {
    let mut s = header_row(
        &["direction", "column"],
        &[
            "median (µs)",
            "p99 (µs)",
            "GB/s",
            "CPU/call (µs)",
            "vs driver",
        ],
    );
    for r in found {
        let direction = r.direction.as_deref().unwrap_or("—");
        let driver = found
            .iter()
            .filter(|d| {
                d.direction.as_deref() == Some(direction)
                    && (d.column == "driver-2d" || d.column == "driver-2d-async")
            })
            .filter_map(|d| d.p50())
            .min_by(f64::total_cmp);
        let gbps = over(r.bytes.map(|b| b as f64 / 1e3), r.p50());
        let _ = writeln!(
            s,
            "| {direction} | {} | {} | {} | {} | {} | {} |",
            r.column,
            cell(r.p50()),
            cell(r.p99_us),
            cell(gbps),
            cell(r.cpu_us),
            ratio_cell(over(driver, r.p50())),
        );
    }
    s.push_str(&samples_line(found, "row"));
    s
}

/// "Not measured in this run" when the run has scenario records but none of these
/// (a `measurements.json` from before the `pitched` bench, or a run without it);
/// nothing when it has them, or no scenario records at all.
pub(super) fn not_measured(records: &[ScenarioRecord]) -> String {
    let measured = records
        .iter()
        .any(|r| r.scenario == PITCHED || r.scenario == PITCHED_PADDED);
    if records.is_empty() || measured {
        return String::new();
    }
    format!(
        "\n## {TITLE}\n\nNot measured in this run: the run has no records of the `pitched` \
         bench (`{PITCHED}`, `{PITCHED_PADDED}`). `cargo xtask bench` runs it and adds the \
         table here.\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(scenario: &str, direction: &str, column: &str, median: f64) -> ScenarioRecord {
        serde_json::from_value(serde_json::json!({
            "scenario": scenario, "direction": direction, "bytes": 6_220_800u64,
            "column": column, "median_us": median, "p99_us": median * 1.25,
            "cpu_us": median * 1.5, "samples": 400,
            "host_pitch_bytes": if scenario == PITCHED { 5760 } else { 5824 },
            "device_pitch_bytes": 6144,
        }))
        .unwrap()
    }

    /// Synthetic records of both scenarios, out of order.
    fn synthetic() -> Vec<ScenarioRecord> {
        vec![
            record(PITCHED, "D2H", "download-2d-into", 132.0),
            record(PITCHED, "H2D", "upload-2d", 300.0),
            record(PITCHED, "H2D", "driver-2d-async", 500.0),
            record(PITCHED, "H2D", "driver-2d", 600.0),
            record(PITCHED, "D2H", "driver-2d", 520.0),
            record(PITCHED, "H2D", "raw-pinned-2d", 125.0),
            record(PITCHED, "H2D", "upload-2d-with", 128.0),
            record(PITCHED, "D2H", "download-2d", 400.0),
            record(PITCHED_PADDED, "H2D", "upload-2d", 700.0),
            record(PITCHED_PADDED, "H2D", "driver-2d", 640.0),
            record("batch", "D2H", "separate", 100.0),
        ]
    }

    #[test]
    fn the_table_lists_each_direction_in_order_with_ratios_to_the_faster_driver_copy() {
        let md = pitched(&synthetic());
        assert!(
            md.starts_with("\n## Pitched 2-D frames\n\nA 1920×1080 RGB `u8` frame"),
            "{md}"
        );
        assert!(
            md.contains(
                "\n`pitched-2d`: host rows 5760 bytes apart (64-byte aligned, which for this \
                 frame is the rows themselves); device rows 6144 bytes apart (the driver's \
                 pitch).\n\n\
                 | direction | column | median (µs) | p99 (µs) | GB/s | CPU/call (µs) | vs driver |\n\
                 |---|---:|---:|---:|---:|---:|---:|\n\
                 | H2D | driver-2d | 600 | 750 | 10.4 | 900 | 0.83x |\n\
                 | H2D | driver-2d-async | 500 | 625 | 12.4 | 750 | 1.00x |\n\
                 | H2D | upload-2d | 300 | 375 | 20.7 | 450 | 1.67x |\n\
                 | H2D | upload-2d-with | 128 | 160 | 48.6 | 192 | 3.91x |\n\
                 | H2D | raw-pinned-2d | 125 | 156 | 49.8 | 188 | 4.00x |\n\
                 | D2H | driver-2d | 520 | 650 | 12.0 | 780 | 1.00x |\n\
                 | D2H | download-2d | 400 | 500 | 15.6 | 600 | 1.30x |\n\
                 | D2H | download-2d-into | 132 | 165 | 47.1 | 198 | 3.94x |\n\
                 \nSamples per row: 400.\n"
            ),
            "{md}"
        );
        // The padded scenario follows, with its own pitch and its own driver baseline.
        let padded = md
            .find("`pitched-2d-padded`: host rows 5824 bytes apart")
            .unwrap();
        assert!(md.find("`pitched-2d`:").unwrap() < padded);
        assert!(
            md[padded..].contains("| H2D | upload-2d | 700 | 875 | 8.89 | 1050 | 0.91x |"),
            "{md}"
        );
        // Other scenarios are not shown here.
        assert!(!md.contains("separate"));
        assert_eq!(not_measured(&synthetic()), "");
    }

    #[test]
    fn without_its_records_the_section_says_it_was_not_measured() {
        let others = vec![record("batch", "D2H", "separate", 100.0)];
        assert_eq!(pitched(&others), "");
        assert_eq!(
            not_measured(&others),
            "\n## Pitched 2-D frames\n\nNot measured in this run: the run has no records of \
             the `pitched` bench (`pitched-2d`, `pitched-2d-padded`). `cargo xtask bench` runs \
             it and adds the table here.\n"
        );
        // A run with no scenario records at all (criterion only) says nothing.
        assert_eq!(pitched(&[]), "");
        assert_eq!(not_measured(&[]), "");
        // A record missing numbers shows dashes, not a panic.
        let bare: ScenarioRecord = serde_json::from_value(serde_json::json!({
            "scenario": PITCHED, "direction": "H2D", "column": "upload-2d",
        }))
        .unwrap();
        let md = pitched(&[bare]);
        assert!(md.contains("host rows — bytes apart"), "{md}");
        assert!(
            md.contains("| H2D | upload-2d | — | — | — | — | — |"),
            "{md}"
        );
    }

    #[test]
    fn the_committed_measurements_json_renders_with_the_line() {
        let text = include_str!("../../../docs/measurements.json");
        let (_, results) = super::super::from_json(text).unwrap();
        assert!(!results.scenarios.is_empty());
        let md = super::super::markdown(&super::super::fixtures::machine(), &results);
        if results.scenarios.iter().any(|r| r.scenario == PITCHED) {
            assert!(
                md.contains("\n## Pitched 2-D frames\n\nA 1920×1080"),
                "{md}"
            );
        } else {
            assert!(
                md.contains("\n## Pitched 2-D frames\n\nNot measured in this run"),
                "{md}"
            );
        }
    }
}
