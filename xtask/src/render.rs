//! Criterion results to `docs/measurements.json`, `docs/measurements.md`,
//! `docs/measurements-table.md` (included by the crate docs) and `docs/bandwidth.svg`.
//!
//! The naming contract with the `benches` package: a benchmark's criterion group id is
//! `"{direction}/{bytes}"` (direction `H2D` or `D2H`, bytes the transfer size) and its
//! function id is the column (`pageable`, `resident`, ...). The parts are recognised
//! wherever they sit in `group/function/value`, so a `BenchmarkId` laid out the other
//! way round reads the same.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use plotters::prelude::*;
use serde::Serialize;
use serde_json::Value;

use crate::{human_bytes, Context, Result};

/// The columns in table order; any other column follows them, by name.
const COLUMN_ORDER: [&str; 8] = [
    "pageable",
    "pageable-async",
    "copy-in",
    "resident",
    "raw-pinned",
    "cudarc-pinned",
    "cudarc-pageable",
    "copy-in-registered",
];

/// The seed's tensor shapes: (bytes, label).
const SEED_SIZES: [(u64, &str); 3] = [
    (150_528, "112×112×3 f32"),
    (196_608, "128×128×3 f32"),
    (4_915_200, "640×640×3 f32"),
];

/// Where and when the numbers were measured.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub device_name: String,
    pub driver_version: String,
    /// The host: CPU model, cores and how many GPUs it shows, e.g.
    /// "Intel(R) Xeon(R) Processor, 16 cores, 1 GPU" ("unknown" where not recorded).
    pub host: String,
    pub date: String,
    pub commit: String,
}

impl Machine {
    /// `host` for [`Machine`] from what the probe recorded; the parts it lacks are
    /// left out, and "unknown" stands for none at all.
    pub fn host_line(cpu: Option<&str>, cores: Option<usize>, gpus: Option<usize>) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(cpu) = cpu.filter(|c| !c.is_empty()) {
            parts.push(cpu.to_string());
        }
        if let Some(n) = cores {
            parts.push(format!("{n} core{}", if n == 1 { "" } else { "s" }));
        }
        if let Some(n) = gpus {
            parts.push(format!("{n} GPU{}", if n == 1 { "" } else { "s" }));
        }
        if parts.is_empty() {
            "unknown".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// One benchmark's median and its confidence interval, in µs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    pub direction: String,
    pub bytes: u64,
    pub column: String,
    pub median_us: f64,
    pub low_us: f64,
    pub high_us: f64,
}

impl Record {
    /// GB/s (10^9 bytes per second) at the median.
    fn gbps(&self) -> f64 {
        self.bytes as f64 / (self.median_us * 1e3)
    }
}

fn direction_rank(d: &str) -> (usize, &str) {
    match d {
        "H2D" => (0, ""),
        "D2H" => (1, ""),
        other => (2, other),
    }
}

fn column_rank(c: &str) -> (usize, &str) {
    match COLUMN_ORDER.iter().position(|k| *k == c) {
        Some(i) => (i, ""),
        None => (COLUMN_ORDER.len(), c),
    }
}

fn sort_records(records: &mut [Record]) {
    records.sort_by(|a, b| {
        (
            direction_rank(&a.direction),
            a.bytes,
            column_rank(&a.column),
        )
            .cmp(&(
                direction_rank(&b.direction),
                b.bytes,
                column_rank(&b.column),
            ))
    });
}

// ---------------------------------------------------------------- reading criterion

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

fn read_json(path: &Path) -> Result<Value> {
    let text =
        fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

/// One result; `None` (with a warning) when its id does not follow the naming contract.
fn read_result(new_dir: &Path) -> Result<Option<Record>> {
    let bench = read_json(&new_dir.join("benchmark.json"))?;
    let id: Vec<&str> = ["group_id", "function_id", "value_str"]
        .iter()
        .filter_map(|k| bench[*k].as_str())
        .flat_map(|s| s.split('/'))
        .collect();
    let Some((direction, bytes, column)) = parse_id(&id) else {
        eprintln!(
            "warning: skipping benchmark {:?}: its id is not {{H2D|D2H}}/{{bytes}} + column",
            id.join("/")
        );
        return Ok(None);
    };
    let est = read_json(&new_dir.join("estimates.json"))?;
    let median = &est["median"];
    // ns to µs, kept to 0.1 ns so that the JSON stays short.
    let num = |v: &Value, what: &str| {
        v.as_f64()
            .map(|ns| (ns * 10.0).round() / 1e4)
            .ok_or_else(|| format!("{}: no {what}", new_dir.join("estimates.json").display()))
    };
    Ok(Some(Record {
        direction,
        bytes,
        column,
        median_us: num(&median["point_estimate"], "median.point_estimate")?,
        low_us: num(
            &median["confidence_interval"]["lower_bound"],
            "median.confidence_interval.lower_bound",
        )?,
        high_us: num(
            &median["confidence_interval"]["upper_bound"],
            "median.confidence_interval.upper_bound",
        )?,
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

// ---------------------------------------------------------------- tables

/// Medians indexed by direction, bytes and column, with the pageable baselines.
struct Table<'a> {
    directions: Vec<String>,
    columns: Vec<String>,
    cells: HashMap<(&'a str, u64, &'a str), &'a Record>,
    sizes: BTreeMap<&'a str, BTreeSet<u64>>,
}

impl<'a> Table<'a> {
    fn new(records: &'a [Record]) -> Table<'a> {
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

    fn get(&self, dir: &str, bytes: u64, column: &str) -> Option<&'a Record> {
        self.cells.get(&(dir, bytes, column)).copied()
    }

    fn sizes(&self, dir: &str) -> Vec<u64> {
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

    /// (bytes, ratio vs the pageable baseline) wherever both exist.
    fn ratios(&self, dir: &str, column: &str) -> Vec<(u64, f64)> {
        self.sizes(dir)
            .into_iter()
            .filter_map(|n| Some((n, self.ratio(dir, n, column)?)))
            .collect()
    }
}

/// µs with about three significant digits.
fn us(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn ratio_str(r: f64) -> String {
    format!("{r:.2}x")
}

fn percent(r: f64) -> String {
    format!("{:+.1}%", (r - 1.0) * 100.0)
}

fn header_row(first: &[&str], columns: &[String]) -> String {
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

fn seed_table(t: &Table) -> String {
    let mut s = header_row(&["transfer", "bytes"], &t.columns);
    let mut rows = 0;
    for dir in &t.directions {
        for (bytes, label) in SEED_SIZES {
            if !t.sizes(dir).contains(&bytes) {
                continue;
            }
            rows += 1;
            let _ = write!(s, "| {dir} {label} | {bytes} |");
            for c in &t.columns {
                match (t.get(dir, bytes, c), t.ratio(dir, bytes, c)) {
                    (Some(r), Some(x)) => {
                        let _ = write!(s, " {} ({}) |", us(r.median_us), ratio_str(x));
                    }
                    (Some(r), None) => {
                        let _ = write!(s, " {} |", us(r.median_us));
                    }
                    _ => s.push_str(" — |"),
                }
            }
            s.push('\n');
        }
    }
    if rows == 0 {
        return "No seed shape (150528, 196608 or 4915200 bytes) was measured.\n".into();
    }
    s
}

fn sweep_table(t: &Table, dir: &str) -> String {
    let mut s = header_row(&["bytes", "size"], &t.columns);
    for bytes in t.sizes(dir) {
        let _ = write!(s, "| {bytes} | {} |", human_bytes(bytes));
        for c in &t.columns {
            match t.get(dir, bytes, c) {
                Some(r) => {
                    let _ = write!(
                        s,
                        " {} [{}–{}]",
                        us(r.median_us),
                        us(r.low_us),
                        us(r.high_us)
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
fn reading(t: &Table) -> String {
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
    }
    if s.is_empty() {
        s.push_str("- Not enough columns were measured for a reading.\n");
    }
    s
}

const RATIO_NOTE: &str = "Medians in µs. A ratio is the pageable baseline's median over the \
column's median, so above 1.00x is faster than the baseline. The baseline is the faster of \
`pageable` and `pageable-async` at each size (`pageable` alone where `pageable-async` was not \
measured), so the ratios never flatter the other columns.";

/// The short form printed after a bundle run: seed table and reading.
pub fn summary(machine: &Machine, records: &[Record]) -> String {
    let t = Table::new(records);
    format!(
        "{}, driver {}, {}, commit {}\n{RATIO_NOTE}\n\n{}\n{}",
        machine.device_name,
        machine.driver_version,
        machine.date,
        machine.commit,
        seed_table(&t),
        reading(&t)
    )
}

/// `docs/measurements.md`.
pub fn markdown(machine: &Machine, records: &[Record]) -> String {
    let t = Table::new(records);
    let mut s = String::new();
    s.push_str("# Measurements\n\n");
    s.push_str("<!-- Generated by `cargo xtask bench`; do not edit. -->\n");
    s.push_str("Generated by `cargo xtask bench`; do not edit.\n\n");
    s.push_str("| machine | |\n|---|---|\n");
    let _ = writeln!(s, "| device | {} |", machine.device_name);
    let _ = writeln!(s, "| driver | CUDA {} |", machine.driver_version);
    let _ = writeln!(s, "| host | {} |", machine.host);
    let _ = writeln!(s, "| date | {} |", machine.date);
    let _ = writeln!(s, "| commit | {} |", machine.commit);
    let _ = writeln!(s, "\n{RATIO_NOTE}\n");
    s.push_str("## Seed shapes\n\n");
    s.push_str(&seed_table(&t));
    for dir in &t.directions {
        let _ = writeln!(s, "\n## {dir} sweep\n");
        s.push_str(
            "Each cell: median [95% confidence interval of the median] in µs, then the ratio.\n\n",
        );
        s.push_str(&sweep_table(&t, dir));
    }
    s.push_str("\n## Reading\n\nComputed from the tables above.\n\n");
    s.push_str(&reading(&t));
    s
}

/// `docs/measurements-table.md`: the seed table that `cuda-staging`'s crate docs
/// include, with the machine it was measured on.
pub fn crate_doc_table(machine: &Machine, records: &[Record]) -> String {
    let t = Table::new(records);
    format!(
        "Measured on {}, driver CUDA {}, host {}, {}, commit {} (generated by `cargo xtask \
         bench`; the full sweep is in `docs/measurements.md`). {RATIO_NOTE}\n\n{}",
        machine.device_name,
        machine.driver_version,
        machine.host,
        machine.date,
        machine.commit,
        seed_table(&t)
    )
}

/// `docs/measurements.json`.
pub fn json(machine: &Machine, records: &[Record]) -> Result<String> {
    #[derive(Serialize)]
    struct Doc<'a> {
        #[serde(flatten)]
        machine: &'a Machine,
        records: &'a [Record],
    }
    let mut records = records.to_vec();
    sort_records(&mut records);
    let mut s = serde_json::to_string_pretty(&Doc {
        machine,
        records: &records,
    })?;
    s.push('\n');
    Ok(s)
}

// ---------------------------------------------------------------- chart

fn column_color(column: &str, index: usize) -> RGBColor {
    match column {
        "pageable" => RGBColor(120, 120, 120),
        "pageable-async" => RGBColor(40, 40, 40),
        "copy-in" => RGBColor(31, 119, 180),
        "resident" => RGBColor(214, 39, 40),
        "raw-pinned" => RGBColor(255, 127, 14),
        "cudarc-pinned" => RGBColor(44, 160, 44),
        "cudarc-pageable" => RGBColor(152, 223, 138),
        "copy-in-registered" => RGBColor(148, 103, 189),
        _ => {
            let (r, g, b) = Palette99::pick(index).rgb();
            RGBColor(r, g, b)
        }
    }
}

/// `docs/bandwidth.svg`: GB/s against size (log2), one panel per direction.
pub fn svg(records: &[Record]) -> Result<String> {
    let t = Table::new(records);
    let mut out = String::new();
    {
        let panels = t.directions.len().max(1);
        let root =
            SVGBackend::with_string(&mut out, (1000, 520 * panels as u32)).into_drawing_area();
        root.fill(&WHITE)?;
        for (area, dir) in root.split_evenly((panels, 1)).iter().zip(&t.directions) {
            draw_panel(area, &t, dir)?;
        }
        root.present()?;
    }
    Ok(out)
}

fn draw_panel(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    t: &Table,
    dir: &str,
) -> Result<()> {
    let sizes = t.sizes(dir);
    let (Some(&first), Some(&last)) = (sizes.first(), sizes.last()) else {
        return Ok(());
    };
    let (x0, x1) = (first as f64 / 1.5, last as f64 * 1.5);
    let y_max = t
        .columns
        .iter()
        .flat_map(|c| sizes.iter().filter_map(move |&n| t.get(dir, n, c)))
        .map(Record::gbps)
        .fold(0.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{dir} bandwidth (GB/s = bytes / median time)"),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((x0..x1).log_scale().base(2.0), 0.0..y_max.max(1.0))?;
    chart
        .configure_mesh()
        .x_desc("transfer size")
        .y_desc("GB/s")
        .x_label_formatter(&|v| human_bytes(v.round() as u64))
        .draw()?;
    for (i, column) in t.columns.iter().enumerate() {
        let points: Vec<(f64, f64)> = sizes
            .iter()
            .filter_map(|&n| t.get(dir, n, column))
            .map(|r| (r.bytes as f64, r.gbps()))
            .collect();
        if points.is_empty() {
            continue;
        }
        let color = column_color(column, i);
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
            .label(column.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

// ---------------------------------------------------------------- output

/// Writes measurements.json, measurements.md and bandwidth.svg into `docs_dir`.
pub fn write_docs(machine: &Machine, records: &[Record], docs_dir: &Path) -> Result<()> {
    if records.is_empty() {
        return Err("no benchmark results to render".into());
    }
    fs::create_dir_all(docs_dir)
        .with_context(|| format!("cannot create {}", docs_dir.display()))?;
    let files = [
        ("measurements.json", json(machine, records)?),
        ("measurements.md", markdown(machine, records)),
        ("bandwidth.svg", svg(records)?),
        ("measurements-table.md", crate_doc_table(machine, records)),
    ];
    for (name, text) in files {
        let path = docs_dir.join(name);
        fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch folder under the system temp dir, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let p = std::env::temp_dir().join(format!("xtask-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(&p).unwrap();
            Scratch(p)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// Writes one result the way criterion 0.5 lays it out.
    fn fake_result(home: &Path, group: &str, function: &str, median_ns: f64) {
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
        fs::write(dir.join("benchmark.json"), bench.to_string()).unwrap();
        fs::write(dir.join("estimates.json"), est.to_string()).unwrap();
        // criterion also keeps the previous run, which must not be read.
        let base = dir.parent().unwrap().join("base");
        fs::create_dir_all(&base).unwrap();
        fs::write(base.join("benchmark.json"), bench.to_string()).unwrap();
    }

    #[test]
    fn host_line_names_what_was_recorded_and_only_that() {
        assert_eq!(
            Machine::host_line(Some("Xeon"), Some(32), Some(2)),
            "Xeon, 32 cores, 2 GPUs"
        );
        assert_eq!(Machine::host_line(None, Some(1), Some(1)), "1 core, 1 GPU");
        // device.json files written before host_cores existed.
        assert_eq!(
            Machine::host_line(Some("Xeon"), None, Some(1)),
            "Xeon, 1 GPU"
        );
        assert_eq!(Machine::host_line(Some(""), None, None), "unknown");
    }

    fn machine() -> Machine {
        Machine {
            device_name: "NVIDIA H200".into(),
            driver_version: "13.0".into(),
            host: "Intel(R) Xeon(R) Processor, 16 cores, 1 GPU".into(),
            date: "2026-01-02".into(),
            commit: "abc1234".into(),
        }
    }

    /// The anchor table's numbers (µs), plus pageable-async, raw-pinned and cudarc.
    fn fake_tree(home: &Path) {
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
    fn renders_a_fake_criterion_tree() {
        let scratch = Scratch::new("render");
        let home = scratch.0.join("criterion");
        fake_tree(&home);

        let records = load_criterion(&home, None).unwrap();
        assert_eq!(records.len(), 4 * 6 + 1);
        // Sorted: H2D first, by size, columns in contract order, unknown ones last.
        assert_eq!(records[0].direction, "H2D");
        assert_eq!(records[0].column, "pageable");
        assert_eq!(records[6].column, "my-new-path");
        assert_eq!(records[6].bytes, 150_528);
        assert_eq!(records.last().unwrap().direction, "D2H");
        assert!((records[0].median_us - 19.9).abs() < 1e-9);
        assert!((records[0].low_us - 19.9 * 0.98).abs() < 1e-9);

        let t = Table::new(&records);
        // Baseline: the faster of pageable (19.9) and pageable-async (21.0).
        assert_eq!(t.baseline_us("H2D", 150_528), Some(19.9));
        let r = t.ratio("H2D", 150_528, "resident").unwrap();
        assert!((r - 19.9 / 10.8).abs() < 1e-9);
        // At 4.7 MiB pageable-async (360) is the faster baseline.
        let r = t.ratio("H2D", 4_915_200, "copy-in").unwrap();
        assert!((r - 360.0 / 547.0).abs() < 1e-9);

        let md = markdown(&machine(), &records);
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

        let svg = svg(&records).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("H2D bandwidth"));
        assert!(svg.contains("D2H bandwidth"));
        assert!(svg.contains("resident"));

        let docs = scratch.0.join("docs");
        write_docs(&machine(), &records, &docs).unwrap();
        let v: Value =
            serde_json::from_str(&fs::read_to_string(docs.join("measurements.json")).unwrap())
                .unwrap();
        assert_eq!(v["device_name"], "NVIDIA H200");
        assert_eq!(v["driver_version"], "13.0");
        assert_eq!(v["commit"], "abc1234");
        assert_eq!(v["records"].as_array().unwrap().len(), 25);
        assert_eq!(v["records"][0]["direction"], "H2D");
        assert_eq!(v["records"][0]["bytes"], 150_528);
        assert_eq!(v["records"][0]["column"], "pageable");
        assert!(docs.join("measurements.md").is_file());
        assert!(docs.join("bandwidth.svg").is_file());
        assert!(docs.join("measurements-table.md").is_file());
    }

    /// The whole back-to-back documents for the fake tree, byte for byte (testdata/
    /// holds this renderer's output), so that restructuring cannot change them.
    #[test]
    fn back_to_back_documents_match_the_golden_files() {
        let scratch = Scratch::new("golden");
        fake_tree(&scratch.0);
        let records = load_criterion(&scratch.0, None).unwrap();
        assert_eq!(
            markdown(&machine(), &records),
            include_str!("render/testdata/fake-tree.md")
        );
        assert_eq!(
            summary(&machine(), &records),
            include_str!("render/testdata/fake-tree-summary.txt")
        );
    }

    #[test]
    fn stale_results_are_left_out() {
        let scratch = Scratch::new("stale");
        fake_result(&scratch.0, "H2D/64", "pageable", 5e3);
        let later = SystemTime::now() + std::time::Duration::from_secs(3600);
        assert!(load_criterion(&scratch.0, Some(later)).unwrap().is_empty());
        assert_eq!(load_criterion(&scratch.0, None).unwrap().len(), 1);
    }

    #[test]
    fn nothing_to_render_is_an_error() {
        let scratch = Scratch::new("empty");
        assert!(write_docs(&machine(), &[], &scratch.0).is_err());
    }
}
