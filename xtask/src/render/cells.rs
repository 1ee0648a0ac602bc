//! What every scenario table is made of: picking records ([`of`], [`find`]), ratios
//! that exist only where both numbers do ([`over`]), cells and multiples that show
//! `—` for a missing number, the samples line, a table of one row per column
//! ([`per_column_table`]) and a section around a table. Below the tables that use
//! them ([`super::scenario_tables`], [`super::frame_tables`], [`super::scaling`],
//! [`super::waits`], [`super::targets`]), so none of those imports another for
//! these.

use std::fmt::Write as _;

use super::record::{scenario_column_rank, ScenarioRecord};
use super::tables::{header_row, num3, ratio_str};

/// The records of `scenario`, in table order.
pub(super) fn of<'a>(records: &'a [ScenarioRecord], scenario: &str) -> Vec<&'a ScenarioRecord> {
    let mut found: Vec<&ScenarioRecord> =
        records.iter().filter(|r| r.scenario == scenario).collect();
    found.sort_by(|a, b| {
        let key = |r: &'a ScenarioRecord| (scenario_column_rank(scenario, &r.column), r.bytes);
        key(a).cmp(&key(b))
    });
    found
}

/// The first record of `column` among `records`.
pub(super) fn find<'a>(records: &[&'a ScenarioRecord], column: &str) -> Option<&'a ScenarioRecord> {
    records.iter().copied().find(|r| r.column == column)
}

/// `a / b`, where both exist and `b` is a positive number.
pub(super) fn over(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    let (a, b) = (a?, b?);
    (b > 0.0 && b.is_finite()).then(|| a / b)
}

/// A number, or `—` where there is none.
pub(super) fn cell(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_string(), num3)
}

/// A ratio, or `—` where there is none.
pub(super) fn ratio_cell(r: Option<f64>) -> String {
    r.map_or_else(|| "—".to_string(), ratio_str)
}

/// "Samples per row: N." (or a range), or nothing where no record says.
pub(super) fn samples_line(records: &[&ScenarioRecord], per: &str) -> String {
    let counts = records.iter().filter_map(|r| r.samples);
    match (counts.clone().min(), counts.max()) {
        (Some(lo), Some(hi)) if lo == hi => format!("\nSamples per {per}: {lo}.\n"),
        (Some(lo), Some(hi)) => format!("\nSamples per {per}: {lo}–{hi}.\n"),
        _ => String::new(),
    }
}

/// A section: heading, note, then the body; nothing when the body is empty.
pub(super) fn section(title: &str, note: &str, body: String) -> String {
    if body.is_empty() {
        return body;
    }
    format!("\n## {title}\n\n{note}\n{body}")
}

/// A CPU multiple as `1.23×`.
pub(super) fn times_str(x: f64) -> String {
    format!("{x:.2}×")
}

/// A table of one row per record: the column's name, then `cells(record)` under
/// `headers` (after "column"), then the samples line; empty without records.
pub(super) fn per_column_table(
    records: &[&ScenarioRecord],
    headers: &[&str],
    cells: impl Fn(&ScenarioRecord) -> Vec<String>,
) -> String {
    if records.is_empty() {
        return String::new();
    }
    let mut s = String::from("\n");
    s.push_str(&header_row(
        &[&["column"], headers].concat(),
        &[] as &[&str],
    ));
    for r in records {
        let _ = writeln!(s, "| {} | {} |", r.column, cells(r).join(" | "));
    }
    s.push_str(&samples_line(records, "row"));
    s
}
