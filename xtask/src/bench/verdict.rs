//! The A/B comparison of `cargo xtask bench --ab`: two builds measured in rounds, in
//! ABBA order (run.sh), turned into one row per cell and column with B/A ratios, their
//! spread across rounds, the control (the driver's own column in the same cell) and a
//! verdict ([`verdict`]). Pure: the rounds come in as records, the table and the JSON
//! go out.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::render::{Record, Results, ScenarioRecord, BACK_TO_BACK};

/// Within this much of 1, a ratio reads `same` whatever the spread.
pub const SAME_WITHIN: f64 = 0.03;

/// One column's numbers in one run: median, 99th percentile and CPU per frame or
/// call, in µs, and for a staging column of a frame scenario the share of its calls
/// that took the driver's path (the records' `driver_routed`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Measure {
    pub p50_us: f64,
    pub p99_us: Option<f64>,
    pub cpu_us: Option<f64>,
    pub driver_routed: Option<f64>,
}

/// What one build measured in one round, by (cell, column).
pub type Run = BTreeMap<(String, String), Measure>;

/// The cell a record belongs to: its scenario, then direction and bytes where it has
/// them (`sleep-2ms/H2D/1048576`, `back-to-back/D2H/150528`, `batch`), as the benches
/// name their cells (`benches::cells`).
fn cell_of(scenario: &str, direction: Option<&str>, bytes: Option<u64>) -> String {
    match (direction, bytes) {
        (Some(d), Some(b)) => format!("{scenario}/{d}/{b}"),
        _ => scenario.to_string(),
    }
}

/// One build's run from what a round left: criterion's back-to-back records and the
/// other executables' records. Records without a median (a pipeline's `ideal`) are
/// left out.
pub fn run_of(results: &Results) -> Run {
    let mut run = Run::new();
    for r in &results.back_to_back {
        let Record {
            direction,
            bytes,
            column,
            median_us,
            p99_us,
            ..
        } = r;
        run.insert(
            (
                cell_of(BACK_TO_BACK, Some(direction), Some(*bytes)),
                column.clone(),
            ),
            Measure {
                p50_us: *median_us,
                p99_us: *p99_us,
                ..Measure::default()
            },
        );
    }
    for r in &results.scenarios {
        let ScenarioRecord {
            scenario,
            direction,
            bytes,
            column,
            median_us,
            p50_us,
            p99_us,
            cpu_us,
            other,
            ..
        } = r;
        let Some(p50) = median_us.or(*p50_us) else {
            continue;
        };
        run.insert(
            (
                cell_of(scenario, direction.as_deref(), *bytes),
                column.clone(),
            ),
            Measure {
                p50_us: p50,
                p99_us: *p99_us,
                cpu_us: *cpu_us,
                driver_routed: other.get("driver_routed").and_then(|v| v.as_f64()),
            },
        );
    }
    run
}

/// The driver's own column of a cell's scenario, the control of the A/B: it runs
/// no code of this workspace's staging paths, so its B/A ratio shows how much the
/// machine moved between the builds' processes. `None` where a scenario has none.
pub fn control_column(cell: &str) -> Option<&'static str> {
    let scenario = cell.split('/').next().unwrap_or(cell);
    match scenario {
        "back-to-back" | "sleep-2ms" | "sleep-16ms" | "busy-2ms" | "tight-loop" | "contended"
        | "four-pipelines" => Some("pageable"),
        "pipeline" | "pipeline-gpu-heavy" => Some("pageable-sync"),
        _ => None,
    }
}

/// Per-round ratios B/A: their median and range.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ratio {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Ratio {
    /// The ratios' median and range; `None` for no ratio.
    pub fn of(ratios: &[f64]) -> Option<Ratio> {
        let mut sorted: Vec<f64> = ratios.iter().copied().filter(|r| r.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        Some(Ratio {
            median: median_of_sorted(&sorted),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
        })
    }
}

fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(median_of_sorted(&v))
}

/// How B compares with A on one number (a time: lower is better).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "reads", rename_all = "lowercase")]
pub enum Verdict {
    /// Within [`SAME_WITHIN`] of 1, or the rounds disagree on the side of 1.
    Same,
    /// Every round had B below A, by more than [`SAME_WITHIN`] at the median.
    Faster { percent: f64 },
    /// Every round had B above A, by more than [`SAME_WITHIN`] at the median.
    Slower { percent: f64 },
}

/// The rule: `same` when |B/A − 1| is at most [`SAME_WITHIN`] or within the rounds'
/// spread (their range of B/A reaches 1); otherwise `faster` or `slower` by the
/// median's distance from 1.
pub fn verdict(r: &Ratio) -> Verdict {
    let change = r.median - 1.0;
    if change.abs() <= SAME_WITHIN || (r.min <= 1.0 && r.max >= 1.0) {
        Verdict::Same
    } else if change < 0.0 {
        Verdict::Faster {
            percent: -change * 100.0,
        }
    } else {
        Verdict::Slower {
            percent: change * 100.0,
        }
    }
}

impl Verdict {
    fn label(&self) -> String {
        match self {
            Verdict::Same => "same".into(),
            Verdict::Faster { percent } => format!("faster {percent:.0}%"),
            Verdict::Slower { percent } => format!("slower {percent:.0}%"),
        }
    }
}

/// One build's numbers in a row: the medians over rounds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Side {
    pub p50_us: f64,
    pub p99_us: Option<f64>,
    pub cpu_us: Option<f64>,
    pub driver_routed: Option<f64>,
}

/// One cell and column of the comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub cell: String,
    pub column: String,
    /// This is the cell's control column.
    pub is_control: bool,
    pub a: Side,
    pub b: Side,
    /// B/A of p50 over the rounds.
    pub p50_ratio: Ratio,
    /// B/A of CPU per frame over the rounds, where both measured it.
    pub cpu_ratio: Option<Ratio>,
    /// B/A of the control's p50 in this cell over the rounds.
    pub control_ratio: Option<Ratio>,
    pub latency: Verdict,
    pub cpu: Option<Verdict>,
    /// The control did not read `same`: the machine moved, so this row's verdict may
    /// be the machine's, not the code's.
    pub control_moved: bool,
}

/// Rows for every (cell, column) that both builds measured in every round, control
/// columns included; in cell and column name order. A (cell, column) measured by one
/// build only is listed in the returned `missing`.
pub fn compare(rounds: &[(Run, Run)]) -> (Vec<Row>, Vec<String>) {
    let mut keys: BTreeMap<&(String, String), usize> = BTreeMap::new();
    for (a, b) in rounds {
        for k in a.keys().chain(b.keys()) {
            *keys.entry(k).or_default() += 1;
        }
    }
    let ratios_of = |key: &(String, String), pick: fn(&Measure) -> Option<f64>| -> Vec<f64> {
        rounds
            .iter()
            .filter_map(|(a, b)| Some(pick(b.get(key)?)? / pick(a.get(key)?)?))
            .collect()
    };
    let p50 = |m: &Measure| Some(m.p50_us);
    let cpu = |m: &Measure| m.cpu_us;
    let side = |key: &(String, String), of_b: bool| {
        let ms: Vec<Measure> = rounds
            .iter()
            .filter_map(|(a, b)| if of_b { b.get(key) } else { a.get(key) }.copied())
            .collect();
        Side {
            p50_us: median(ms.iter().map(|m| m.p50_us)).unwrap_or(f64::NAN),
            p99_us: median(ms.iter().filter_map(|m| m.p99_us)),
            cpu_us: median(ms.iter().filter_map(|m| m.cpu_us)),
            driver_routed: median(ms.iter().filter_map(|m| m.driver_routed)),
        }
    };
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    for (key, seen) in keys {
        let (cell, column) = key;
        if seen != 2 * rounds.len() {
            missing.push(format!("{cell} {column}"));
            continue;
        }
        let Some(p50_ratio) = Ratio::of(&ratios_of(key, p50)) else {
            missing.push(format!("{cell} {column}"));
            continue;
        };
        let cpu_ratio = Ratio::of(&ratios_of(key, cpu));
        let control = control_column(cell);
        let control_ratio =
            control.and_then(|c| Ratio::of(&ratios_of(&(cell.clone(), c.to_string()), p50)));
        rows.push(Row {
            cell: cell.clone(),
            column: column.clone(),
            is_control: control == Some(column.as_str()),
            a: side(key, false),
            b: side(key, true),
            p50_ratio,
            cpu_ratio,
            control_ratio,
            latency: verdict(&p50_ratio),
            cpu: cpu_ratio.as_ref().map(verdict),
            control_moved: control_ratio.is_some_and(|r| verdict(&r) != Verdict::Same),
        });
    }
    (rows, missing)
}

/// How many rows (control columns left out) read each way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub faster: usize,
    pub same: usize,
    pub slower: usize,
}

impl Counts {
    fn add(&mut self, v: &Verdict) {
        match v {
            Verdict::Same => self.same += 1,
            Verdict::Faster { .. } => self.faster += 1,
            Verdict::Slower { .. } => self.slower += 1,
        }
    }
}

/// The summary line's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub latency: Counts,
    pub cpu: Counts,
    /// Rows whose control moved.
    pub control_moved: usize,
    /// Control rows that did not read `same`.
    pub controls_moved: usize,
}

pub fn summary(rows: &[Row]) -> Summary {
    let mut s = Summary::default();
    for r in rows {
        if r.is_control {
            s.controls_moved += usize::from(r.latency != Verdict::Same);
            continue;
        }
        s.latency.add(&r.latency);
        if let Some(c) = &r.cpu {
            s.cpu.add(c);
        }
        s.control_moved += usize::from(r.control_moved);
    }
    s
}

/// The summary as one line.
pub fn summary_line(s: &Summary) -> String {
    format!(
        "A/B: latency {} faster, {} same, {} slower; CPU {} faster, {} same, {} slower; \
         {} row(s) with a moved control ({} control column(s) moved)",
        s.latency.faster,
        s.latency.same,
        s.latency.slower,
        s.cpu.faster,
        s.cpu.same,
        s.cpu.slower,
        s.control_moved,
        s.controls_moved
    )
}

fn us(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.1}"))
}

fn ratio_text(r: Option<&Ratio>) -> String {
    r.map_or_else(
        || "-".into(),
        |r| format!("{:.3} [{:.3}-{:.3}]", r.median, r.min, r.max),
    )
}

/// A row whose share of calls on the driver's path differs between the builds by
/// [`ROUTE_MOVED`] or more, as `cell column A% -> B%`.
fn route_moved(r: &Row) -> Option<String> {
    let (a, b) = (r.a.driver_routed?, r.b.driver_routed?);
    // Shares of whole counts (7/20 against 6/20) differ by a hair under 0.05 in f64.
    ((a - b).abs() >= ROUTE_MOVED - 1e-9).then(|| {
        format!(
            "{} {} {:.0}% -> {:.0}%",
            r.cell,
            r.column,
            a * 100.0,
            b * 100.0
        )
    })
}

/// A route share that moved by this much between the builds is listed under the
/// table: a change of route explains a row's verdict.
const ROUTE_MOVED: f64 = 0.05;

/// The comparison as a markdown table, one row per cell and column, then the
/// columns measured by one build only, then the summary line.
pub fn table(rows: &[Row], missing: &[String]) -> String {
    let mut out = String::new();
    out.push_str(
        "| cell | column | A p50 / p99 / CPU µs | B p50 / p99 / CPU µs | B/A p50 [range] | \
         B/A CPU [range] | control B/A | latency | CPU |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let control = if r.is_control {
            "(control)".to_string()
        } else {
            let mut t = r
                .control_ratio
                .map_or_else(|| "-".into(), |c| format!("{:.3}", c.median));
            if r.control_moved {
                t.push_str(" moved");
            }
            t
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} / {} / {} | {} / {} / {} | {} | {} | {} | {} | {} |",
            r.cell,
            r.column,
            us(Some(r.a.p50_us)),
            us(r.a.p99_us),
            us(r.a.cpu_us),
            us(Some(r.b.p50_us)),
            us(r.b.p99_us),
            us(r.b.cpu_us),
            ratio_text(Some(&r.p50_ratio)),
            ratio_text(r.cpu_ratio.as_ref()),
            control,
            r.latency.label(),
            r.cpu.as_ref().map_or_else(|| "-".into(), Verdict::label),
        );
    }
    let moved: Vec<String> = rows.iter().filter_map(route_moved).collect();
    if !moved.is_empty() {
        let _ = writeln!(
            out,
            "\nroutes that moved (the share of calls on the driver's path, A -> B): {}",
            moved.join(", ")
        );
    }
    if !missing.is_empty() {
        let _ = writeln!(
            out,
            "\nmeasured by one build or in some rounds only: {}",
            missing.join(", ")
        );
    }
    let _ = writeln!(out, "\n{}", summary_line(&summary(rows)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p50: f64, cpu: Option<f64>) -> Measure {
        Measure {
            p50_us: p50,
            p99_us: Some(p50 * 1.5),
            cpu_us: cpu,
            driver_routed: None,
        }
    }

    /// Rounds of one cell with a control (`pageable`) and `copy-in`: the A and B p50 of
    /// each, per round.
    fn rounds(control: &[(f64, f64)], copy_in: &[(f64, f64)]) -> Vec<(Run, Run)> {
        control
            .iter()
            .zip(copy_in)
            .map(|(&(ca, cb), &(ia, ib))| {
                let cell = "sleep-2ms/H2D/1048576".to_string();
                let mut a = Run::new();
                let mut b = Run::new();
                a.insert((cell.clone(), "pageable".into()), m(ca, Some(ca)));
                b.insert((cell.clone(), "pageable".into()), m(cb, Some(cb)));
                a.insert((cell.clone(), "copy-in".into()), m(ia, Some(2.0 * ia)));
                b.insert((cell, "copy-in".into()), m(ib, Some(2.0 * ib)));
                (a, b)
            })
            .collect()
    }

    fn row<'a>(rows: &'a [Row], column: &str) -> &'a Row {
        rows.iter().find(|r| r.column == column).unwrap()
    }

    #[test]
    fn the_rule_within_three_percent_or_the_spread_is_same() {
        let r = |median, min, max| Ratio { median, min, max };
        assert_eq!(verdict(&r(1.02, 1.01, 1.03)), Verdict::Same);
        assert_eq!(verdict(&r(0.975, 0.96, 0.99)), Verdict::Same);
        // Beyond 3%, but a round on the other side of 1: within the spread.
        assert_eq!(verdict(&r(1.10, 0.98, 1.20)), Verdict::Same);
        assert_eq!(verdict(&r(0.90, 0.85, 1.01)), Verdict::Same);
        match verdict(&r(1.10, 1.05, 1.20)) {
            Verdict::Slower { percent } => assert!((percent - 10.0).abs() < 1e-9),
            v => panic!("{v:?}"),
        }
        match verdict(&r(0.80, 0.75, 0.90)) {
            Verdict::Faster { percent } => assert!((percent - 20.0).abs() < 1e-9),
            v => panic!("{v:?}"),
        }
        assert_eq!(Ratio::of(&[1.2, 0.9, 1.0, 1.1]), Some(r(1.05, 0.9, 1.2)));
        assert_eq!(Ratio::of(&[1.2, 0.9, 1.0]), Some(r(1.0, 0.9, 1.2)));
        assert_eq!(Ratio::of(&[f64::NAN]), None);
    }

    #[test]
    fn within_the_spread_reads_same() {
        // copy-in: B is 8% slower at the median, but one round has B faster.
        let rs = rounds(
            &[(100.0, 100.0); 4],
            &[(50.0, 54.0), (50.0, 49.0), (50.0, 55.0), (50.0, 53.0)],
        );
        let (rows, missing) = compare(&rs);
        assert!(missing.is_empty());
        let c = row(&rows, "copy-in");
        assert_eq!(c.latency, Verdict::Same);
        assert!(!c.control_moved);
        assert!(c.p50_ratio.min < 1.0 && c.p50_ratio.max > 1.05);
        assert_eq!(c.a.p50_us, 50.0);
        assert_eq!(c.b.p50_us, 53.5);
        assert_eq!(c.b.cpu_us, Some(107.0));
        assert!(row(&rows, "pageable").is_control);
        let s = summary(&rows);
        assert_eq!(
            s.latency,
            Counts {
                faster: 0,
                same: 1,
                slower: 0
            }
        );
        assert_eq!(s.controls_moved, 0);
    }

    #[test]
    fn outside_the_spread_reads_slower_or_faster_with_the_number() {
        let rs = rounds(
            &[(100.0, 101.0), (100.0, 99.0), (100.0, 100.5), (100.0, 99.5)],
            &[(50.0, 60.0), (50.0, 59.0), (52.0, 62.4), (48.0, 57.6)],
        );
        let (rows, _) = compare(&rs);
        let c = row(&rows, "copy-in");
        match c.latency {
            Verdict::Slower { percent } => assert!((percent - 20.0).abs() < 0.5, "{percent}"),
            v => panic!("{v:?}"),
        }
        assert!(matches!(c.cpu, Some(Verdict::Slower { .. })));
        assert!(!c.control_moved);
        assert_eq!(row(&rows, "pageable").latency, Verdict::Same);
        let text = table(&rows, &[]);
        assert!(text.contains("slower 20%"), "{text}");
        assert!(
            text.contains("latency 0 faster, 0 same, 1 slower; CPU 0 faster, 0 same, 1 slower"),
            "{text}"
        );

        let rs = rounds(&[(100.0, 100.0); 4], &[(50.0, 40.0); 4]);
        let (rows, _) = compare(&rs);
        assert!(matches!(
            row(&rows, "copy-in").latency,
            Verdict::Faster { percent } if (percent - 20.0).abs() < 1e-9
        ));
    }

    #[test]
    fn a_moved_control_is_flagged() {
        // The driver's own copy moved 15% in every round: the machine moved, and the
        // copy-in row that moved with it says so.
        let rs = rounds(&[(100.0, 115.0); 4], &[(50.0, 57.0); 4]);
        let (rows, _) = compare(&rs);
        let c = row(&rows, "copy-in");
        assert!(matches!(c.latency, Verdict::Slower { .. }));
        assert!(c.control_moved);
        assert!((c.control_ratio.unwrap().median - 1.15).abs() < 1e-9);
        let s = summary(&rows);
        assert_eq!((s.control_moved, s.controls_moved), (1, 1));
        let text = table(&rows, &[]);
        assert!(text.contains("1.150 moved"), "{text}");
    }

    #[test]
    fn a_column_of_one_build_only_is_listed_not_compared() {
        let mut rs = rounds(&[(100.0, 100.0); 2], &[(50.0, 50.0); 2]);
        for (a, _) in &mut rs {
            a.insert(
                ("sleep-2ms/H2D/1048576".into(), "copy-in-low-latency".into()),
                m(30.0, None),
            );
        }
        let (rows, missing) = compare(&rs);
        assert_eq!(rows.len(), 2);
        assert_eq!(missing, ["sleep-2ms/H2D/1048576 copy-in-low-latency"]);
        assert!(table(&rows, &missing).contains("measured by one build or in some rounds only"));
    }

    #[test]
    fn a_route_that_moved_between_the_builds_is_listed_under_the_table() {
        let record = |column: &str, share: f64| {
            format!(
                r#"{{"scenario": "sleep-16ms", "direction": "D2H", "bytes": 1048576,
                     "column": "{column}", "median_us": 150.0, "p99_us": 200.0,
                     "cpu_us": 160.0, "driver_routed": {share}}}"#
            )
        };
        let run = |copy_in: f64| {
            run_of(&Results {
                back_to_back: Vec::new(),
                scenarios: serde_json::from_str(&format!(
                    "[{}, {}]",
                    record("copy-in", copy_in),
                    record("resident", 0.0)
                ))
                .unwrap(),
            })
        };
        let cell = ("sleep-16ms/D2H/1048576".to_string(), "copy-in".to_string());
        assert_eq!(run(1.0)[&cell].driver_routed, Some(1.0));
        // copy-in went to the driver in every call with A, in 2% of them with B (the
        // median over the rounds); resident stayed staged.
        let moved = vec![
            (run(1.0), run(0.0)),
            (run(1.0), run(0.02)),
            (run(0.9), run(0.04)),
        ];
        let (rows, _) = compare(&moved);
        let copy_in = row(&rows, "copy-in");
        assert_eq!(copy_in.a.driver_routed, Some(1.0));
        assert_eq!(copy_in.b.driver_routed, Some(0.02));
        let table = table(&rows, &[]);
        assert!(
            table.contains(
                "routes that moved (the share of calls on the driver's path, A -> B): \
                 sleep-16ms/D2H/1048576 copy-in 100% -> 2%\n"
            ),
            "{table}"
        );
        assert!(!table.contains("resident 0%"), "{table}");
        // Exactly 5 points, as whole counts make it (7 of 20 against 6 of 20): listed.
        let (rows, _) = compare(&[(run(7.0 / 20.0), run(6.0 / 20.0))]);
        assert!(
            table_of(&rows).contains("sleep-16ms/D2H/1048576 copy-in 35% -> 30%"),
            "{}",
            table_of(&rows)
        );
        // Under the threshold, or with the route on record in one build only (an A
        // built before the records had it): nothing listed.
        let (rows, _) = compare(&[(run(0.5), run(0.54))]);
        assert!(!table_of(&rows).contains("routes that moved"));
        let mut older = run(1.0);
        for m in older.values_mut() {
            m.driver_routed = None;
        }
        let (rows, _) = compare(&[(older, run(0.0))]);
        assert_eq!(row(&rows, "copy-in").a.driver_routed, None);
        assert!(!table_of(&rows).contains("routes that moved"));
        let (rows, _) = compare(&rounds(&[(100.0, 100.0)], &[(50.0, 60.0)]));
        assert!(!table_of(&rows).contains("routes that moved"));
    }

    fn table_of(rows: &[Row]) -> String {
        table(rows, &[])
    }

    #[test]
    fn records_become_cells_as_the_benches_name_them() {
        let results = Results {
            back_to_back: vec![Record {
                scenario: BACK_TO_BACK,
                direction: "H2D".into(),
                bytes: 150_528,
                column: "copy-in".into(),
                median_us: 14.0,
                low_us: 13.0,
                high_us: 15.0,
                p99_us: Some(20.0),
            }],
            scenarios: serde_json::from_str(
                r#"[{"scenario": "tight-loop", "direction": "D2H", "bytes": 196608,
                     "column": "resident", "median_us": 11.0, "p99_us": 12.0, "cpu_us": 11.5},
                    {"scenario": "pipeline", "column": "ring", "fps": 900.0, "p50_us": 1100.0,
                     "p99_us": 1300.0, "cpu_us": 800.0},
                    {"scenario": "pipeline", "column": "ideal", "fps": 1000.0},
                    {"scenario": "batch", "column": "batched", "bytes": 236544,
                     "median_us": 40.0, "p99_us": 45.0}]"#,
            )
            .unwrap(),
        };
        let run = run_of(&results);
        let keys: Vec<(&str, &str)> = run.keys().map(|(c, k)| (c.as_str(), k.as_str())).collect();
        assert_eq!(
            keys,
            [
                ("back-to-back/H2D/150528", "copy-in"),
                ("batch", "batched"),
                ("pipeline", "ring"),
                ("tight-loop/D2H/196608", "resident"),
            ]
        );
        assert_eq!(
            run[&("pipeline".into(), "ring".into())],
            Measure {
                p50_us: 1100.0,
                p99_us: Some(1300.0),
                cpu_us: Some(800.0),
                driver_routed: None,
            }
        );
        assert_eq!(control_column("pipeline"), Some("pageable-sync"));
        assert_eq!(control_column("back-to-back/H2D/150528"), Some("pageable"));
        assert_eq!(control_column("batch"), None);
    }
}
