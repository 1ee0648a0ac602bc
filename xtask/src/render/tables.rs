//! The back-to-back tables in markdown: the common tensor shapes, one sweep per direction, and
//! the reading (a few sentences computed from the numbers).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::{Display, Write as _};

use super::record::{column_rank, direction_rank, Record};
use crate::human_bytes;

/// Three common image tensors, f32: (bytes, label).
const SHAPE_SIZES: [(u64, &str); 3] = [
    (150_528, "112×112×3 f32"),
    (196_608, "128×128×3 f32"),
    (4_915_200, "640×640×3 f32"),
];

/// Our staging on cudarc's memory (the bridge) and the same call on ours: the
/// bridge's column, ours.
const BRIDGE_PAIRS: [(&str, &str); 2] = [
    ("cudarc+copy-in", "copy-in"),
    ("cudarc+resident", "resident"),
];

/// The most the bridge may add to our own column's median (issue 25): 3%.
const BRIDGE_OVERHEAD_MAX: f64 = 1.03;

/// Medians indexed by direction, bytes and column, with the pageable baselines.
pub(super) struct Table<'a> {
    pub(super) directions: Vec<String>,
    pub(super) columns: Vec<String>,
    cells: HashMap<(&'a str, u64, &'a str), &'a Record>,
    sizes: BTreeMap<&'a str, BTreeSet<u64>>,
}

impl<'a> Table<'a> {
    pub(super) fn new(records: &'a [Record]) -> Table<'a> {
        let mut directions: Vec<String> = records.iter().map(|r| r.direction.clone()).collect();
        directions.sort_by(|a, b| direction_rank(a).cmp(&direction_rank(b)));
        directions.dedup();
        let mut columns: Vec<String> = records.iter().map(|r| r.column.clone()).collect();
        columns.sort_by(|a, b| column_rank(a).cmp(&column_rank(b)));
        columns.dedup();
        let mut cells = HashMap::new();
        let mut sizes: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
        for r in records {
            cells.insert((r.direction.as_str(), r.bytes, r.column.as_str()), r);
            sizes.entry(&r.direction).or_default().insert(r.bytes);
        }
        Table {
            directions,
            columns,
            cells,
            sizes,
        }
    }

    pub(super) fn get(&self, dir: &str, bytes: u64, column: &str) -> Option<&'a Record> {
        self.cells.get(&(dir, bytes, column)).copied()
    }

    pub(super) fn sizes(&self, dir: &str) -> Vec<u64> {
        self.sizes
            .get(dir)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The pageable baseline: the faster of `pageable` and `pageable-async`.
    fn baseline_us(&self, dir: &str, bytes: u64) -> Option<f64> {
        ["pageable", "pageable-async"]
            .iter()
            .filter_map(|c| self.get(dir, bytes, c))
            .map(|r| r.median_us)
            .reduce(f64::min)
    }

    /// Baseline median over the column's median: above 1 is faster than pageable.
    fn ratio(&self, dir: &str, bytes: u64, column: &str) -> Option<f64> {
        Some(self.baseline_us(dir, bytes)? / self.get(dir, bytes, column)?.median_us)
    }

    /// (bytes, a / b) of column a's median over column b's, where both were measured.
    fn pairs(&self, dir: &str, a: &str, b: &str) -> Vec<(u64, f64)> {
        self.sizes(dir)
            .into_iter()
            .filter_map(|n| {
                Some((
                    n,
                    self.get(dir, n, a)?.median_us / self.get(dir, n, b)?.median_us,
                ))
            })
            .collect()
    }

    /// The columns of the sweeps and the chart: all, except those measured only at the
    /// common shapes when others were measured at more sizes (the bridge's columns,
    /// which would otherwise fill the sweeps with empty cells).
    pub(super) fn sweep_columns(&self) -> Vec<&String> {
        let beyond_shapes = |c: &str| {
            self.directions.iter().any(|d| {
                self.sizes(d).into_iter().any(|n| {
                    self.get(d, n, c).is_some() && !SHAPE_SIZES.iter().any(|(b, _)| *b == n)
                })
            })
        };
        let all: Vec<&String> = self.columns.iter().collect();
        if !all.iter().any(|c| beyond_shapes(c)) {
            return all;
        }
        all.into_iter().filter(|c| beyond_shapes(c)).collect()
    }

    /// (bytes, ratio vs the pageable baseline) wherever both exist.
    fn ratios(&self, dir: &str, column: &str) -> Vec<(u64, f64)> {
        self.sizes(dir)
            .into_iter()
            .filter_map(|n| Some((n, self.ratio(dir, n, column)?)))
            .collect()
    }
}

/// A number (µs, frames/s) with about three significant digits.
pub(super) fn num3(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A ratio as `1.23x`.
pub(super) fn ratio_str(r: f64) -> String {
    format!("{r:.2}x")
}

fn percent(r: f64) -> String {
    format!("{:+.1}%", (r - 1.0) * 100.0)
}

/// A markdown table's header and alignment rows: `first` (the first one left-aligned,
/// the rest right-aligned), then `columns` (right-aligned).
pub(super) fn header_row(first: &[&str], columns: &[impl Display]) -> String {
    let mut s = String::from("|");
    for f in first {
        let _ = write!(s, " {f} |");
    }
    for c in columns {
        let _ = write!(s, " {c} |");
    }
    s.push_str("\n|");
    for (i, _) in first.iter().enumerate() {
        s.push_str(if i == 0 { "---|" } else { "---:|" });
    }
    for _ in columns {
        s.push_str("---:|");
    }
    s.push('\n');
    s
}

pub(super) fn shapes_table(t: &Table) -> String {
    let mut s = header_row(&["transfer", "bytes"], &t.columns);
    let mut rows = 0;
    for dir in &t.directions {
        for (bytes, label) in SHAPE_SIZES {
            if !t.sizes(dir).contains(&bytes) {
                continue;
            }
            rows += 1;
            let _ = write!(s, "| {dir} {label} | {bytes} |");
            for c in &t.columns {
                match (t.get(dir, bytes, c), t.ratio(dir, bytes, c)) {
                    (Some(r), Some(x)) => {
                        let _ = write!(s, " {} ({}) |", num3(r.median_us), ratio_str(x));
                    }
                    (Some(r), None) => {
                        let _ = write!(s, " {} |", num3(r.median_us));
                    }
                    _ => s.push_str(" — |"),
                }
            }
            s.push('\n');
        }
    }
    if rows == 0 {
        return "None of the common shapes (150528, 196608 or 4915200 bytes) was measured.\n"
            .into();
    }
    s
}

pub(super) fn sweep_table(t: &Table, dir: &str) -> String {
    let columns = t.sweep_columns();
    let mut s = header_row(&["bytes", "size"], &columns);
    for bytes in t.sizes(dir) {
        let _ = write!(s, "| {bytes} | {} |", human_bytes(bytes));
        for c in &columns {
            match t.get(dir, bytes, c) {
                Some(r) => {
                    let _ = write!(
                        s,
                        " {} [{}–{}]",
                        num3(r.median_us),
                        num3(r.low_us),
                        num3(r.high_us)
                    );
                    if let Some(x) = t.ratio(dir, bytes, c) {
                        let _ = write!(s, " {}", ratio_str(x));
                    }
                    s.push_str(" |");
                }
                None => s.push_str(" — |"),
            }
        }
        s.push('\n');
    }
    s
}

/// (min, size at min, max, size at max) of a series.
fn extremes(series: &[(u64, f64)]) -> Option<(f64, u64, f64, u64)> {
    let min = series.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1))?;
    let max = series.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
    Some((min.1, min.0, max.1, max.0))
}

fn size_list(sizes: impl IntoIterator<Item = String>) -> String {
    sizes.into_iter().collect::<Vec<_>>().join(", ")
}

/// The reading: a few sentences computed from the numbers.
pub(super) fn reading(t: &Table) -> String {
    let mut s = String::new();
    for dir in &t.directions {
        let n_sizes = t.sizes(dir).len();
        if let Some((lo, lo_at, hi, hi_at)) = extremes(&t.ratios(dir, "resident")) {
            let _ = writeln!(
                s,
                "- {dir}: `resident` runs at {}–{} the speed of the pageable baseline \
                 ({} at {}, {} at {}).",
                ratio_str(lo),
                ratio_str(hi),
                ratio_str(lo),
                human_bytes(lo_at),
                ratio_str(hi),
                human_bytes(hi_at),
            );
        }
        if let Some((lo, lo_at, hi, hi_at)) = extremes(&t.pairs(dir, "resident", "raw-pinned")) {
            let _ = writeln!(
                s,
                "- {dir}: `resident`'s time relative to `raw-pinned` ranges {} to {} \
                 ({} at {}, {} at {}; positive is overhead).",
                percent(lo),
                percent(hi),
                percent(lo),
                human_bytes(lo_at),
                percent(hi),
                human_bytes(hi_at),
            );
        }
        let copy_in = t.ratios(dir, "copy-in");
        if let Some((lo, lo_at, _, _)) = extremes(&copy_in) {
            let slower: Vec<String> = copy_in
                .iter()
                .filter(|(_, r)| *r < 1.0)
                .map(|(n, r)| format!("{} ({})", human_bytes(*n), ratio_str(*r)))
                .collect();
            let verdict = if slower.is_empty() {
                "never slower than the baseline".to_string()
            } else {
                format!(
                    "slower than the baseline at {} of {} sizes: {}",
                    slower.len(),
                    copy_in.len(),
                    size_list(slower)
                )
            };
            let _ = writeln!(
                s,
                "- {dir}: `copy-in`'s lowest ratio to the pageable baseline is {} (at {}); \
                 it is {verdict}.",
                ratio_str(lo),
                human_bytes(lo_at),
            );
        }
        let vs_cudarc = t.pairs(dir, "resident", "cudarc-pinned");
        if !vs_cudarc.is_empty() {
            let slower: Vec<String> = vs_cudarc
                .iter()
                .filter(|(_, r)| *r > 1.0)
                .map(|(n, r)| format!("{} ({})", human_bytes(*n), percent(*r)))
                .collect();
            let _ = if slower.is_empty() {
                writeln!(
                    s,
                    "- {dir}: `resident` is at least as fast as `cudarc-pinned` at every \
                     measured size ({} of {n_sizes}).",
                    vs_cudarc.len()
                )
            } else {
                writeln!(
                    s,
                    "- {dir}: `resident` is slower than `cudarc-pinned` at {} of {} sizes \
                     (median time over cudarc's): {}.",
                    slower.len(),
                    vs_cudarc.len(),
                    size_list(slower)
                )
            };
        }
        s.push_str(&bridge_reading(t, dir));
    }
    if s.is_empty() {
        s.push_str("- Not enough columns were measured for a reading.\n");
    } else if !BRIDGE_PAIRS
        .iter()
        .any(|(bridge, _)| t.columns.iter().any(|c| c == bridge))
    {
        s.push_str(
            "- The cudarc bridge's columns (`cudarc+copy-in`, `cudarc+resident`) were not \
             measured in this run.\n",
        );
    }
    s
}

/// For one direction: each bridge column's time relative to ours at every size both
/// were measured, against the target ([`BRIDGE_OVERHEAD_MAX`]).
fn bridge_reading(t: &Table, dir: &str) -> String {
    let mut s = String::new();
    for (bridge, ours) in BRIDGE_PAIRS {
        let pairs = t.pairs(dir, bridge, ours);
        if pairs.is_empty() {
            continue;
        }
        let each: Vec<String> = pairs
            .iter()
            .map(|(n, r)| format!("{} at {}", percent(*r), human_bytes(*n)))
            .collect();
        let missed: Vec<String> = pairs
            .iter()
            .filter(|(_, r)| *r > BRIDGE_OVERHEAD_MAX)
            .map(|(n, _)| human_bytes(*n))
            .collect();
        let verdict = if missed.is_empty() {
            "met".to_string()
        } else {
            format!("MISSED at {}", size_list(missed))
        };
        let _ = writeln!(
            s,
            "- {dir}: `{bridge}`'s time relative to `{ours}` (target: at most {}): {}; {verdict}.",
            percent(BRIDGE_OVERHEAD_MAX),
            size_list(each),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{fake_back_to_back, machine};
    use super::super::record::BACK_TO_BACK;
    use super::super::{markdown, Results};
    use super::*;

    fn record(direction: &str, bytes: u64, column: &str, median_us: f64) -> Record {
        Record {
            scenario: BACK_TO_BACK,
            direction: direction.into(),
            bytes,
            column: column.into(),
            median_us,
            low_us: median_us * 0.99,
            high_us: median_us * 1.01,
            p99_us: None,
        }
    }

    /// The bridge's columns, measured at the common shapes only: in the shapes table
    /// with their ratios, out of the sweeps and the chart, and in the reading against
    /// our own columns with the 3% target.
    #[test]
    fn the_bridge_columns_sit_beside_ours_with_their_target() {
        let mut records = Vec::new();
        for (bytes, base) in [(65_536, 17.0), (150_528, 19.9), (4_915_200, 371.0)] {
            records.push(record("H2D", bytes, "pageable", base));
            records.push(record("H2D", bytes, "copy-in", base * 0.8));
            records.push(record("H2D", bytes, "resident", base * 0.5));
        }
        records.push(record("H2D", 150_528, "cudarc+copy-in", 19.9 * 0.8 * 1.02));
        records.push(record("H2D", 150_528, "cudarc+resident", 19.9 * 0.5 * 1.10));
        records.push(record(
            "H2D",
            4_915_200,
            "cudarc+copy-in",
            371.0 * 0.8 * 1.01,
        ));
        records.push(record(
            "H2D",
            4_915_200,
            "cudarc+resident",
            371.0 * 0.5 * 1.005,
        ));
        let t = Table::new(&records);
        assert_eq!(
            t.columns,
            [
                "pageable",
                "copy-in",
                "resident",
                "cudarc+copy-in",
                "cudarc+resident"
            ]
        );
        let shapes = shapes_table(&t);
        assert!(
            shapes.contains("| H2D 112×112×3 f32 | 150528 | 19.9 (1.00x) | 15.9 (1.25x) | 9.95 (2.00x) | 16.2 (1.23x) | 10.9 (1.82x) |"),
            "{shapes}"
        );
        let sweep = sweep_table(&t, "H2D");
        assert!(
            sweep.starts_with("| bytes | size | pageable | copy-in | resident |\n"),
            "{sweep}"
        );
        assert!(!sweep.contains("cudarc+"), "{sweep}");
        let text = reading(&t);
        assert!(
            text.contains("- H2D: `cudarc+copy-in`'s time relative to `copy-in` (target: at most +3.0%): +2.0% at 147 KiB, +1.0% at 4.69 MiB; met.\n"),
            "{text}"
        );
        assert!(
            text.contains("- H2D: `cudarc+resident`'s time relative to `resident` (target: at most +3.0%): +10.0% at 147 KiB, +0.5% at 4.69 MiB; MISSED at 147 KiB.\n"),
            "{text}"
        );
        assert!(!text.contains("were not measured"), "{text}");

        // Without them the tables are as before, and the reading says so.
        let ours: Vec<Record> = records
            .into_iter()
            .filter(|r| !r.column.starts_with("cudarc+"))
            .collect();
        let t = Table::new(&ours);
        assert!(!shapes_table(&t).contains("cudarc+"));
        assert!(reading(&t).ends_with(
            "- The cudarc bridge's columns (`cudarc+copy-in`, `cudarc+resident`) were not measured in this run.\n"
        ));
        // Measured at the common shapes only, every column stays in the sweeps.
        let shapes_only: Vec<Record> = ours.into_iter().filter(|r| r.bytes != 65_536).collect();
        assert_eq!(Table::new(&shapes_only).sweep_columns().len(), 3);
    }

    #[test]
    fn renders_a_fake_criterion_tree() {
        let records = fake_back_to_back();

        let t = Table::new(&records);
        // Baseline: the faster of pageable (19.9) and pageable-async (21.0).
        assert_eq!(t.baseline_us("H2D", 150_528), Some(19.9));
        let r = t.ratio("H2D", 150_528, "resident").unwrap();
        assert!((r - 19.9 / 10.8).abs() < 1e-9);
        // At 4.7 MiB pageable-async (360) is the faster baseline.
        let r = t.ratio("H2D", 4_915_200, "copy-in").unwrap();
        assert!((r - 360.0 / 547.0).abs() < 1e-9);

        let md = markdown(
            &machine(),
            &Results {
                back_to_back: records.clone(),
                scenarios: Vec::new(),
            },
        );
        assert!(md.contains("Generated by `cargo xtask bench`; do not edit."));
        assert!(md.contains("| device | NVIDIA H200 |"));
        assert!(md.contains("| commit | abc1234 |"));
        assert!(md.contains("| host | Intel(R) Xeon(R) Processor, 16 cores, 1 GPU |"));
        assert!(md.contains(
            "| transfer | bytes | pageable | pageable-async | copy-in | resident | raw-pinned | cudarc-pinned | my-new-path |"
        ));
        assert!(
            md.contains("| H2D 112×112×3 f32 | 150528 | 19.9 (1.00x) | 21.0 (0.95x) | 24.4 (0.82x) | 10.8 (1.84x) |"),
            "{md}"
        );
        assert!(md.contains("| H2D 640×640×3 f32 | 4915200 | 371 (0.97x) | 360 (1.00x) |"));
        assert!(md.contains("| D2H 128×128×3 f32 | 196608 |"));
        // 128×128×3 was not measured for H2D, and no row is made up for it.
        assert!(!md.contains("| H2D 128×128×3 f32"));
        assert!(md.contains("## H2D sweep"));
        assert!(md.contains("## D2H sweep"));
        assert!(
            md.contains("| 4915200 | 4.69 MiB | 371 [364–378] 0.97x |"),
            "{md}"
        );
        assert!(md.contains("| 150528 | 147 KiB |"));
        // The reading, computed from the data.
        assert!(
            md.contains("- H2D: `resident` runs at 1.84x–3.70x the speed"),
            "{md}"
        );
        assert!(
            md.contains("- D2H: `resident`'s time relative to `raw-pinned` ranges +0.0% to +1.0%"),
            "{md}"
        );
        assert!(
            md.contains("`copy-in`'s lowest ratio to the pageable baseline is 0.66x (at 4.69 MiB)"),
            "{md}"
        );
        assert!(md.contains("slower than the baseline at 2 of 2 sizes"));
        assert!(md.contains("- D2H: `copy-in`'s lowest ratio to the pageable baseline is 1.16x (at 192 KiB); it is never slower than the baseline."), "{md}");
        assert!(md.contains("- H2D: `resident` is at least as fast as `cudarc-pinned` at every measured size (2 of 2)."), "{md}");
        assert!(md.contains("- D2H: `resident` is slower than `cudarc-pinned` at 1 of 2 sizes (median time over cudarc's): 192 KiB (+5.3%)."), "{md}");
    }
}
