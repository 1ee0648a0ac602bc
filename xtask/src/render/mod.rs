//! Criterion results to `docs/measurements.json`, `docs/measurements.md`,
//! `docs/measurements-table.md` (included by the crate docs) and `docs/bandwidth.svg`.
//!
//! One concern per module: [`reader`] reads criterion's files into [`Record`]s,
//! [`tables`] turns them into markdown tables and the reading, [`chart`] draws the SVG;
//! this module holds the records and puts the documents together.
//!
//! The naming contract with the `benches` package: a benchmark's criterion group id is
//! `"{direction}/{bytes}"` (direction `H2D` or `D2H`, bytes the transfer size) and its
//! function id is the column (`pageable`, `resident`, ...). The parts are recognised
//! wherever they sit in `group/function/value`, so a `BenchmarkId` laid out the other
//! way round reads the same.

mod chart;
#[cfg(test)]
mod fixtures;
mod reader;
mod tables;

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use serde::Serialize;

pub use reader::load_criterion;

use crate::{Context, Result};

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

/// Where and when the numbers were measured.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// Device 0's name, e.g. "NVIDIA H200".
    pub device_name: String,
    /// The driver's CUDA version, e.g. "13.0".
    pub driver_version: String,
    /// The host: CPU model, cores and how many GPUs it shows, e.g.
    /// "Intel(R) Xeon(R) Processor, 16 cores, 1 GPU" ("unknown" where not recorded).
    pub host: String,
    /// UTC date of the run, `YYYY-MM-DD`.
    pub date: String,
    /// The commit measured (`git rev-parse --short HEAD`, `-dirty` with changes).
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

/// The scenario of every criterion benchmark: transfers run back to back.
pub const BACK_TO_BACK: &str = "back-to-back";

/// One criterion benchmark: its median with the median's confidence interval, and
/// its 99th percentile, in µs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    /// Always [`BACK_TO_BACK`]: criterion runs the transfers one after another.
    pub scenario: &'static str,
    /// `H2D` or `D2H`.
    pub direction: String,
    /// The transfer's size.
    pub bytes: u64,
    /// The transfer path measured, e.g. `pageable`, `resident`.
    pub column: String,
    /// criterion's median time per transfer.
    pub median_us: f64,
    /// The lower bound of the median's 95% confidence interval.
    pub low_us: f64,
    /// The upper bound of the median's 95% confidence interval.
    pub high_us: f64,
    /// The 99th percentile of the time per transfer over criterion's samples
    /// (`sample.json`); `None` where there was no sample to read.
    pub p99_us: Option<f64>,
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

const RATIO_NOTE: &str = "Medians in µs. A ratio is the pageable baseline's median over the \
column's median, so above 1.00x is faster than the baseline. The baseline is the faster of \
`pageable` and `pageable-async` at each size (`pageable` alone where `pageable-async` was not \
measured), so the ratios never flatter the other columns.";

/// The short form printed after a bundle run: seed table and reading.
pub fn summary(machine: &Machine, records: &[Record]) -> String {
    let t = tables::Table::new(records);
    format!(
        "{}, driver {}, {}, commit {}\n{RATIO_NOTE}\n\n{}\n{}",
        machine.device_name,
        machine.driver_version,
        machine.date,
        machine.commit,
        tables::seed_table(&t),
        tables::reading(&t)
    )
}

/// `docs/measurements.md`.
pub fn markdown(machine: &Machine, records: &[Record]) -> String {
    let t = tables::Table::new(records);
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
    s.push_str(&tables::seed_table(&t));
    for dir in &t.directions {
        let _ = writeln!(s, "\n## {dir} sweep\n");
        s.push_str(
            "Each cell: median [95% confidence interval of the median] in µs, then the ratio.\n\n",
        );
        s.push_str(&tables::sweep_table(&t, dir));
    }
    s.push_str("\n## Reading\n\nComputed from the tables above.\n\n");
    s.push_str(&tables::reading(&t));
    s
}

/// `docs/measurements-table.md`: the seed table that `cuda-staging`'s crate docs
/// include, with the machine it was measured on.
pub fn crate_doc_table(machine: &Machine, records: &[Record]) -> String {
    let t = tables::Table::new(records);
    format!(
        "Measured on {}, driver CUDA {}, host {}, {}, commit {} (generated by `cargo xtask \
         bench`; the full sweep is in `docs/measurements.md`). {RATIO_NOTE}\n\n{}",
        machine.device_name,
        machine.driver_version,
        machine.host,
        machine.date,
        machine.commit,
        tables::seed_table(&t)
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
        ("bandwidth.svg", chart::svg(records)?),
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
    use serde_json::Value;

    use super::fixtures::{fake_tree, machine, temp_dir};
    use super::*;

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

    /// The back-to-back documents are unchanged, byte for byte, from those the
    /// renderer wrote before it was split into modules (testdata/ holds its output
    /// for the fake tree).
    #[test]
    fn back_to_back_documents_match_the_golden_files() {
        let tmp = temp_dir();
        fake_tree(tmp.path());
        let records = load_criterion(tmp.path(), None).unwrap();
        assert_eq!(
            markdown(&machine(), &records),
            include_str!("testdata/fake-tree.md")
        );
        assert_eq!(
            summary(&machine(), &records),
            include_str!("testdata/fake-tree-summary.txt")
        );
    }

    #[test]
    fn writes_every_document() {
        let tmp = temp_dir();
        let home = tmp.path().join("criterion");
        fake_tree(&home);
        let records = load_criterion(&home, None).unwrap();
        let docs = tmp.path().join("docs");
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
        assert_eq!(v["records"][0]["scenario"], "back-to-back");
        assert_eq!(v["records"][0]["median_us"], 19.9);
        assert_eq!(v["records"][0]["p99_us"], 39.404);
        assert!(docs.join("measurements.md").is_file());
        assert!(docs.join("bandwidth.svg").is_file());
        let table = fs::read_to_string(docs.join("measurements-table.md")).unwrap();
        assert!(table.starts_with("Measured on NVIDIA H200, driver CUDA 13.0, host Intel(R)"));
        assert!(table.contains("| H2D 112×112×3 f32 | 150528 |"), "{table}");
    }

    #[test]
    fn nothing_to_render_is_an_error() {
        let tmp = temp_dir();
        assert!(write_docs(&machine(), &[], tmp.path()).is_err());
    }
}
