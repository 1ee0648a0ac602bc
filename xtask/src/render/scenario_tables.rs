//! The tables of the scenarios beyond criterion's back-to-back loop, in markdown: the
//! frame loop (in [`super::frame_tables`]), four pipelines, one pipeline, batched
//! downloads, pitched 2-D frames (in [`super::pitched`]) and multi-GPU scaling (in
//! [`super::scaling`]). A section appears only
//! when its records exist; records of scenarios no table knows are left out here
//! (measurements.json still has them).

use std::fmt::Write as _;

use super::cells::{cell, find, of, over, per_column_table, ratio_cell, section, times_str};
use super::frame_tables::frame_loop;
use super::record::{ScenarioRecord, BATCH, FOUR_PIPELINES, PIPELINE};
use super::tables::ratio_str;

const FOUR_PIPELINES_NOTE: &str = "Four pipelines run at once, each on its own thread. \
frames/s as the benchmark measured it; the ratio is the column's frames/s over `pageable`'s, \
so above 1.00x is faster. p50 and p99: time per frame in µs. CPU/frame: the process's CPU \
time over the phase, all threads, per frame of all threads, in µs (the gaps are sleeps), and \
its multiple of `pageable`'s, so below 1.00× spends less. Copy threads: the threads the \
library started (— where the column starts none or did not say).";

const PIPELINE_NOTE: &str = "One pipeline of frames. frames/s as the benchmark measured it; \
each ratio is the column's frames/s over that of `ideal` (the benchmark's bound for this \
pipeline) or of `staging-sync` (the synchronous staging buffer), so above 1.00x is faster. \
p50 and p99: time per frame in µs. CPU/frame: the process's CPU time per frame (per run for \
`cpu-stage` and `gpu-stage`), all threads, in µs.";

const BATCH_NOTE: &str = "Several downloads per frame: one call each (`separate`), all in \
one batch with one wait (`batched`: one `cuMemcpyBatchAsync` where the driver has it; \
`batched-queued`: one queued copy per part), and the largest of them alone (`largest-alone`, \
the floor a batch can approach). bytes: moved in all. Median and p99 in µs; the ratio is \
`separate`'s median over the column's, so above 1.00x is faster.";

/// Every section for which `records` has data, each opening with a blank line and a
/// `##` heading; empty when there is none.
pub(super) fn sections(records: &[ScenarioRecord]) -> String {
    [
        frame_loop(records),
        four_pipelines(records),
        pipeline(records),
        batch(records),
        super::pitched::pitched(records),
        super::waits::waits(records),
        super::scaling::scaling(records),
    ]
    .concat()
}

/// A count, or `—` where there is none.
fn count_cell(n: Option<u64>) -> String {
    n.map_or_else(|| "—".to_string(), |n| n.to_string())
}

fn four_pipelines(records: &[ScenarioRecord]) -> String {
    let found = of(records, FOUR_PIPELINES);
    let pageable = find(&found, "pageable").and_then(|r| r.fps);
    let pageable_cpu = find(&found, "pageable").and_then(|r| r.cpu_us);
    let headers = [
        "frames/s",
        "vs pageable",
        "p50 (µs)",
        "p99 (µs)",
        "CPU/frame (µs)",
        "CPU vs pageable",
        "copy threads",
    ];
    let table = per_column_table(&found, &headers, |r| {
        vec![
            cell(r.fps),
            ratio_cell(over(r.fps, pageable)),
            cell(r.p50()),
            cell(r.p99_us),
            cell(r.cpu_us),
            over(r.cpu_us, pageable_cpu).map_or_else(|| "—".to_string(), times_str),
            count_cell(r.copy_threads),
        ]
    });
    section("Four pipelines", FOUR_PIPELINES_NOTE, table)
}

fn pipeline(records: &[ScenarioRecord]) -> String {
    let found = of(records, PIPELINE);
    let fps_of = |column: &str| find(&found, column).and_then(|r| r.fps);
    let (ideal, staging_sync) = (fps_of("ideal"), fps_of("staging-sync"));
    let headers = [
        "frames/s",
        "vs ideal",
        "vs staging-sync",
        "p50 (µs)",
        "p99 (µs)",
        "CPU/frame (µs)",
    ];
    let table = per_column_table(&found, &headers, |r| {
        vec![
            cell(r.fps),
            ratio_cell(over(r.fps, ideal)),
            ratio_cell(over(r.fps, staging_sync)),
            cell(r.p50()),
            cell(r.p99_us),
            cell(r.cpu_us),
        ]
    });
    section("Pipeline", PIPELINE_NOTE, table)
}

fn batch(records: &[ScenarioRecord]) -> String {
    let found = of(records, BATCH);
    let median_of = |column: &str| find(&found, column).and_then(ScenarioRecord::p50);
    let separate = median_of("separate");
    let headers = ["bytes", "median (µs)", "p99 (µs)", "vs separate"];
    let mut table = per_column_table(&found, &headers, |r| {
        vec![
            count_cell(r.bytes),
            cell(r.p50()),
            cell(r.p99_us),
            ratio_cell(over(separate, r.p50())),
        ]
    });
    if let Some(x) = over(median_of("batched"), median_of("largest-alone")) {
        let _ = writeln!(
            table,
            "\n`batched` takes {} the time of `largest-alone` (median over median): the \
             closer to 1.00x, the more of the other downloads hide behind the largest.",
            ratio_str(x)
        );
    }
    section("Batched downloads", BATCH_NOTE, table)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::fixture_records as fixture;
    use super::*;

    #[test]
    fn four_pipelines_table() {
        let md = four_pipelines(&fixture());
        assert!(md.starts_with("\n## Four pipelines\n\nFour pipelines run at once"));
        assert!(
            md.contains(
                "| column | frames/s | vs pageable | p50 (µs) | p99 (µs) | CPU/frame (µs) | CPU vs pageable | copy threads |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|\n\
             | pageable | 100 | 1.00x | 9000 | 12000 | 1500 | 1.00× | — |\n\
             | copy-in | 150 | 1.50x | 6000 | 8000 | 2400 | 1.60× | 8 |\n\
             | resident | 240 | 2.40x | 4000 | 5000 | 1000 | 0.67× | 4 |\n"
            ),
            "{md}"
        );
        assert!(md.contains("Samples per row: 400."), "{md}");
    }

    #[test]
    fn pipeline_table_with_ideal_lacking_latencies() {
        let md = pipeline(&fixture());
        assert!(md.starts_with("\n## Pipeline\n\nOne pipeline of frames."));
        assert!(
            md.contains(
                "| column | frames/s | vs ideal | vs staging-sync | p50 (µs) | p99 (µs) | CPU/frame (µs) |\n\
             |---|---:|---:|---:|---:|---:|---:|\n\
             | pageable-sync | 50.0 | 0.50x | 0.83x | 20000 | 25000 | 21000 |\n\
             | staging-sync | 60.0 | 0.60x | 1.00x | 16667 | 20000 | 17000 |\n\
             | ring | 90.0 | 0.90x | 1.50x | 11111 | 13000 | 12500 |\n\
             | ideal | 100 | 1.00x | 1.67x | — | — | — |\n\
             | gpu-stage | 95.0 | 0.95x | 1.58x | 10526 | 12000 | 3000 |\n\
             | zero-copy | 70.0 | 0.70x | 1.17x | 14286 | 16000 | — |\n"
            ),
            "{md}"
        );
    }

    #[test]
    fn batch_table_and_batched_over_largest_alone() {
        let md = batch(&fixture());
        assert!(md.starts_with("\n## Batched downloads\n\nSeveral downloads per frame"));
        assert!(
            md.contains(
                "| column | bytes | median (µs) | p99 (µs) | vs separate |\n\
             |---|---:|---:|---:|---:|\n\
             | separate | 600000 | 100 | 130 | 1.00x |\n\
             | batched | 600000 | 70.0 | 90.0 | 1.43x |\n\
             | largest-alone | 300000 | 56.0 | 70.0 | 1.79x |\n"
            ),
            "{md}"
        );
        assert!(
            md.contains("`batched` takes 1.25x the time of `largest-alone`"),
            "{md}"
        );
    }

    #[test]
    fn sections_in_order_and_nothing_without_records() {
        let md = sections(&fixture());
        let at = |h: &str| md.find(h).unwrap_or_else(|| panic!("no {h} in {md}"));
        assert!(at("## Frame loop") < at("## Four pipelines"));
        assert!(at("## Four pipelines") < at("## Pipeline"));
        assert!(at("## Pipeline") < at("## Batched downloads"));
        assert!(at("## Batched downloads") < at("## Multi-GPU scaling"));
        // The unknown scenario is not shown.
        assert!(!md.contains("warm-start"));
        assert_eq!(sections(&[]), "");
        let only_unknown: Vec<ScenarioRecord> = fixture()
            .into_iter()
            .filter(|r| r.scenario == "warm-start")
            .collect();
        assert_eq!(only_unknown.len(), 1);
        assert_eq!(sections(&only_unknown), "");
    }

    #[test]
    fn missing_references_leave_ratios_empty() {
        let records: Vec<ScenarioRecord> = fixture()
            .into_iter()
            .filter(|r| r.column != "pageable" && r.column != "ideal" && r.column != "separate")
            .collect();
        assert!(
            four_pipelines(&records).contains("| copy-in | 150 | — | 6000 | 8000 | 2400 | — | 8 |")
        );
        assert!(pipeline(&records).contains("| ring | 90.0 | — | 1.50x | 11111 | 13000 | 12500 |"));
        assert!(batch(&records).contains("| batched | 600000 | 70.0 | 90.0 | — |"));
    }
}
