//! The targets for latency and CPU per frame, checked against the scenario records
//! for the "Reading" section: what a closing note quotes. Per frame-loop scenario (`tight-loop` and
//! `contended` included): `copy-in`'s highest CPU multiple of the baseline, its
//! lowest latency ratio from 64 KiB and from 4 MiB up, `resident`'s highest CPU
//! over its own p50, low-latency mode's best and worst speed-up over `copy-in` with
//! the CPU it spends, and for `contended` what the neighbours keep; then
//! `four-pipelines`' frames/s and CPU of `copy-in` against `pageable`. The baseline
//! of a row is the one the tables use ([`baseline`]).

use std::fmt::Write as _;

use super::cells::{find, of, over, times_str};
use super::frame_tables::{baseline, row};
use super::record::{ScenarioRecord, CONTENDED, FOUR_PIPELINES, FRAME_LOOP_SCENARIOS};
use super::tables::{num3, ratio_str};
use crate::human_bytes;

/// `copy-in` spends at most this multiple of the baseline's CPU, in every cell.
const COPY_IN_CPU_MAX: f64 = 2.0;
/// The stretch goal for it.
const COPY_IN_CPU_STRETCH: f64 = 1.25;
/// `copy-in`'s latency ratio from [`FROM_64K`] up.
const COPY_IN_LATENCY_MIN: f64 = 1.0;
/// `copy-in`'s latency ratio from [`FROM_4M`] up, in the gap scenarios and
/// `tight-loop`.
const COPY_IN_LARGE_LATENCY_MIN: f64 = 1.5;
/// `resident`'s CPU over its own p50.
const RESIDENT_CPU_OVER_P50_MAX: f64 = 1.2;
/// Low-latency mode is faster than `copy-in` by this much somewhere, if kept.
const LOW_LATENCY_SPEEDUP_MIN: f64 = 1.15;
/// `four-pipelines`: `copy-in`'s frames/s over `pageable`'s.
const FOUR_PIPELINES_FPS_MIN: f64 = 1.2;
/// `four-pipelines`: `copy-in`'s CPU per frame over `pageable`'s.
const FOUR_PIPELINES_CPU_MAX: f64 = 1.5;
/// `contended`: the neighbours' throughput beside `copy-in`.
const NEIGHBOURS_KEEP_MIN: f64 = 0.98;

const FROM_64K: u64 = 64 << 10;
const FROM_4M: u64 = 4 << 20;

const INTRO: &str = "Targets for latency and CPU per frame (what `upload` / `download` \
and `upload_with` / `download_into` aim for against the driver's own pageable copy), \
checked against the scenario tables below (default configuration; every ratio against \
the row's baseline, the faster pageable column):";

/// "met" or "MISSED".
fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

/// One value of a scenario's cell: where (`H2D 147 KiB`) and what.
#[derive(Clone, Debug, PartialEq)]
struct At {
    place: String,
    value: f64,
    /// The CPU per frame that goes with it (low-latency mode).
    cpu: Option<(f64, f64)>,
}

fn lowest(values: &[At]) -> Option<&At> {
    values.iter().min_by(|a, b| a.value.total_cmp(&b.value))
}

fn highest(values: &[At]) -> Option<&At> {
    values.iter().max_by(|a, b| a.value.total_cmp(&b.value))
}

/// For every row of `records` from `min_bytes` up, `value(row, baseline)` where it
/// exists.
fn per_row(
    records: &[&ScenarioRecord],
    min_bytes: u64,
    value: impl Fn(&[&ScenarioRecord], Option<&ScenarioRecord>) -> Option<(f64, Option<(f64, f64)>)>,
) -> Vec<At> {
    let mut places: Vec<(&str, u64)> = records
        .iter()
        .filter_map(|r| Some((r.direction.as_deref()?, r.bytes?)))
        .filter(|&(_, b)| b >= min_bytes)
        .collect();
    places.sort_by(|a, b| {
        (super::record::direction_rank(a.0), a.1).cmp(&(super::record::direction_rank(b.0), b.1))
    });
    places.dedup();
    places
        .into_iter()
        .filter_map(|(dir, bytes)| {
            let row = row(records, dir, bytes);
            let (value, cpu) = value(&row, baseline(&row))?;
            Some(At {
                place: format!("{dir} {}", human_bytes(bytes)),
                value,
                cpu,
            })
        })
        .collect()
}

/// `column`'s latency ratio (baseline p50 over its p50) in a row.
fn latency_ratio(
    row: &[&ScenarioRecord],
    base: Option<&ScenarioRecord>,
    column: &str,
) -> Option<f64> {
    over(base?.p50(), find(row, column)?.p50())
}

/// The bullets of one frame-loop scenario.
fn frame_scenario(s: &mut String, scenario: &str, records: &[&ScenarioRecord]) {
    let per = if scenario == super::record::TIGHT_LOOP {
        "call"
    } else {
        "frame"
    };
    let cpu = per_row(records, 0, |row, base| {
        Some((over(find(row, "copy-in")?.cpu_us, base?.cpu_us)?, None))
    });
    if let Some(hi) = highest(&cpu) {
        let _ = writeln!(
            s,
            "- {scenario}: `copy-in` spends at most {} the baseline's CPU (at {}); target ≤ \
             {} (stretch {}): {}.",
            times_str(hi.value),
            hi.place,
            times_str(COPY_IN_CPU_MAX),
            times_str(COPY_IN_CPU_STRETCH),
            verdict(hi.value <= COPY_IN_CPU_MAX)
        );
    }
    let latency = |from| {
        per_row(records, from, |row, base| {
            Some((latency_ratio(row, base, "copy-in")?, None))
        })
    };
    let (small, large) = (latency(FROM_64K), latency(FROM_4M));
    if let Some(lo) = lowest(&small) {
        let mut line = format!(
            "- {scenario}: `copy-in`'s lowest latency ratio is {} from 64 KiB up (at {}; target \
             ≥ {}: {})",
            ratio_str(lo.value),
            lo.place,
            ratio_str(COPY_IN_LATENCY_MIN),
            verdict(lo.value >= COPY_IN_LATENCY_MIN)
        );
        match lowest(&large) {
            Some(l) if scenario == CONTENDED => {
                let _ = write!(
                    line,
                    " and {} from 4 MiB up (at {})",
                    ratio_str(l.value),
                    l.place
                );
            }
            Some(l) => {
                let _ = write!(
                    line,
                    " and {} from 4 MiB up (at {}; target ≥ {}: {})",
                    ratio_str(l.value),
                    l.place,
                    ratio_str(COPY_IN_LARGE_LATENCY_MIN),
                    verdict(l.value >= COPY_IN_LARGE_LATENCY_MIN)
                );
            }
            None => line.push_str("; no size from 4 MiB up was measured"),
        }
        let _ = writeln!(s, "{line}.");
    }
    let resident = per_row(records, 0, |row, _| {
        let r = find(row, "resident")?;
        Some((over(r.cpu_us, r.p50())?, None))
    });
    if let Some(hi) = highest(&resident) {
        let _ = writeln!(
            s,
            "- {scenario}: `resident` spends at most {} its own p50 in CPU (at {}); target ≤ \
             {}: {}.",
            times_str(hi.value),
            hi.place,
            times_str(RESIDENT_CPU_OVER_P50_MAX),
            verdict(hi.value <= RESIDENT_CPU_OVER_P50_MAX)
        );
    }
    let low_latency = per_row(records, 0, |row, _| {
        let (ll, ci) = (find(row, "copy-in-low-latency")?, find(row, "copy-in")?);
        let cpu = ll.cpu_us.zip(ci.cpu_us);
        Some((over(ci.p50(), ll.p50())?, cpu))
    });
    if let (Some(best), Some(worst)) = (highest(&low_latency), lowest(&low_latency)) {
        let spends = |a: &At| {
            a.cpu.map_or_else(String::new, |(ll, ci)| {
                format!(
                    ", for {} µs of CPU per {per} against `copy-in`'s {}",
                    num3(ll),
                    num3(ci)
                )
            })
        };
        let (speed, detail) = if low_latency.len() == 1 {
            (
                ratio_str(best.value),
                format!("at {}{}", best.place, spends(best)),
            )
        } else {
            (
                format!("{}–{}", ratio_str(worst.value), ratio_str(best.value)),
                format!(
                    "best at {}{}; worst at {}{}",
                    best.place,
                    spends(best),
                    worst.place,
                    spends(worst)
                ),
            )
        };
        let _ = writeln!(
            s,
            "- {scenario}: `copy-in-low-latency` runs at {speed} `copy-in`'s p50 speed \
             ({detail}); target ≥ {} somewhere, if kept: {}.",
            ratio_str(LOW_LATENCY_SPEEDUP_MIN),
            verdict(best.value >= LOW_LATENCY_SPEEDUP_MIN)
        );
    }
    if scenario == CONTENDED {
        let kept = |column: &'static str| {
            per_row(records, 0, move |row, _| {
                Some((find(row, column)?.neighbour_throughput?, None))
            })
        };
        if let Some(lo) = lowest(&kept("copy-in")) {
            let mut pageable = kept("pageable");
            pageable.extend(kept("pageable-async"));
            let beside = lowest(&pageable).map_or_else(String::new, |p| {
                format!(
                    " Beside the pageable columns they keep at least {:.3} (at {}).",
                    p.value, p.place
                )
            });
            let _ = writeln!(
                s,
                "- {scenario}: beside `copy-in` the neighbour threads keep at least {:.3} of \
                 their throughput (at {}); target ≥ {NEIGHBOURS_KEEP_MIN:.2}: {}.{beside}",
                lo.value,
                lo.place,
                verdict(lo.value >= NEIGHBOURS_KEEP_MIN)
            );
        }
    }
}

/// The `four-pipelines` bullet.
fn four_pipelines(s: &mut String, records: &[ScenarioRecord]) {
    let found = of(records, FOUR_PIPELINES);
    let (Some(copy_in), Some(pageable)) = (find(&found, "copy-in"), find(&found, "pageable"))
    else {
        return;
    };
    let Some(fps) = over(copy_in.fps, pageable.fps) else {
        return;
    };
    let cpu = over(copy_in.cpu_us, pageable.cpu_us).map_or_else(String::new, |c| {
        format!(
            " for {} its CPU per frame (target ≤ {}: {})",
            times_str(c),
            times_str(FOUR_PIPELINES_CPU_MAX),
            verdict(c <= FOUR_PIPELINES_CPU_MAX)
        )
    });
    let _ = writeln!(
        s,
        "- {FOUR_PIPELINES}: `copy-in` reaches {} `pageable`'s frames/s (target ≥ {}: {}){cpu}.",
        ratio_str(fps),
        ratio_str(FOUR_PIPELINES_FPS_MIN),
        verdict(fps >= FOUR_PIPELINES_FPS_MIN)
    );
}

/// The targets' part of the reading: an introduction and a bullet per check the
/// records allow, starting with a blank line; empty when they allow none.
pub(super) fn reading(records: &[ScenarioRecord]) -> String {
    let mut s = String::new();
    for (scenario, _) in FRAME_LOOP_SCENARIOS {
        let found: Vec<&ScenarioRecord> = of(records, scenario)
            .into_iter()
            .filter(|r| r.direction.is_some() && r.bytes.is_some())
            .collect();
        frame_scenario(&mut s, scenario, &found);
    }
    four_pipelines(&mut s, records);
    if s.is_empty() {
        return s;
    }
    format!("\n{INTRO}\n\n{s}")
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::fixture_records;
    use super::*;

    #[test]
    fn every_target_is_computed_from_the_records() {
        let md = reading(&fixture_records());
        assert!(
            md.starts_with(&format!("\n{INTRO}\n\n- sleep-2ms: ")),
            "{md}"
        );
        let expected = [
            "- sleep-2ms: `copy-in` spends at most 2.00× the baseline's CPU (at H2D 147 KiB); target ≤ 2.00× (stretch 1.25×): met.",
            "- sleep-2ms: `copy-in`'s lowest latency ratio is 1.20x from 64 KiB up (at H2D 147 KiB; target ≥ 1.00x: met); no size from 4 MiB up was measured.",
            "- sleep-2ms: `resident` spends at most 1.08× its own p50 in CPU (at H2D 147 KiB); target ≤ 1.20×: met.",
            "- sleep-2ms: `copy-in-low-latency` runs at 1.25x `copy-in`'s p50 speed (at H2D 147 KiB, for 1560 µs of CPU per frame against `copy-in`'s 52.0); target ≥ 1.15x somewhere, if kept: met.",
            "- busy-2ms: `resident` spends at most 1.02× its own p50 in CPU (at H2D 147 KiB); target ≤ 1.20×: met.",
            "- tight-loop: `copy-in` spends at most 5.03× the baseline's CPU (at D2H 4.69 MiB); target ≤ 2.00× (stretch 1.25×): MISSED.",
            "- tight-loop: `copy-in`'s lowest latency ratio is 1.17x from 64 KiB up (at H2D 64 KiB; target ≥ 1.00x: met) and 3.20x from 4 MiB up (at D2H 4.69 MiB; target ≥ 1.50x: met).",
            "- tight-loop: `resident` spends at most 1.05× its own p50 in CPU (at H2D 64 KiB); target ≤ 1.20×: met.",
            "- tight-loop: `copy-in-low-latency` runs at 0.94x–1.24x `copy-in`'s p50 speed (best at H2D 64 KiB, for 160 µs of CPU per call against `copy-in`'s 30.0; worst at D2H 4.69 MiB, for 2521 µs of CPU per call against `copy-in`'s 2376); target ≥ 1.15x somewhere, if kept: met.",
            "- contended: `copy-in` spends at most 6.92× the baseline's CPU (at H2D 4.69 MiB); target ≤ 2.00× (stretch 1.25×): MISSED.",
            "- contended: `copy-in`'s lowest latency ratio is 0.55x from 64 KiB up (at H2D 4.69 MiB; target ≥ 1.00x: MISSED) and 0.55x from 4 MiB up (at H2D 4.69 MiB).",
            "- contended: `resident` spends at most 1.10× its own p50 in CPU (at D2H 1 MiB); target ≤ 1.20×: met.",
            "- contended: beside `copy-in` the neighbour threads keep at least 0.945 of their throughput (at H2D 4.69 MiB); target ≥ 0.98: MISSED. Beside the pageable columns they keep at least 0.990 (at H2D 4.69 MiB).",
            "- four-pipelines: `copy-in` reaches 1.50x `pageable`'s frames/s (target ≥ 1.20x: met) for 1.60× its CPU per frame (target ≤ 1.50×: MISSED).",
        ];
        let bullets: Vec<&str> = md.lines().filter(|l| l.starts_with("- ")).collect();
        assert_eq!(bullets, expected, "{md}");
    }

    #[test]
    fn nothing_to_check_says_nothing() {
        assert_eq!(reading(&[]), "");
        // Records without CPU (written before it was measured): latency checks only.
        let old: Vec<ScenarioRecord> = fixture_records()
            .into_iter()
            .filter(|r| r.scenario == "tight-loop")
            .map(|r| ScenarioRecord { cpu_us: None, ..r })
            .collect();
        let md = reading(&old);
        assert!(md.contains("lowest latency ratio is 1.17x"), "{md}");
        let checks = md.split_once(":\n\n").map_or(md.as_str(), |(_, c)| c);
        assert!(!checks.contains("CPU"), "{md}");
        // Four pipelines without pageable: no ratio to state.
        let alone: Vec<ScenarioRecord> = fixture_records()
            .into_iter()
            .filter(|r| r.scenario == "four-pipelines" && r.column != "pageable")
            .collect();
        assert_eq!(reading(&alone), "");
    }
}
