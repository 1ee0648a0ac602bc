//! The `pipeline` bench's log: compact tables of its records and of the targets
//! they are checked against, printed for whoever reads the log first.

use std::fmt::Write as _;

use super::report::{BatchRecord, Bound, FpsRecord, Target};
use super::stages::StageTimes;

fn opt(v: Option<f64>, width: usize) -> String {
    v.map_or_else(|| format!("{:>width$}", "-"), |v| format!("{v:>width$.1}"))
}

/// The pipeline table: a row per column, frames/s, p50 / p99 frame time and CPU per
/// frame.
pub fn pipeline_table(stages: &StageTimes, scratch_bytes: usize, fps: &[FpsRecord]) -> String {
    let mut out = String::new();
    if fps.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "pipeline: 640x640x3 u8 frame -> preprocess -> 4915200 B up -> model -> 2822400 B + \
         4/16/64 KiB down -> postprocess"
    );
    let _ = writeln!(
        out,
        "  model stand-in: {} MiB of device copies in {} calls ({} MiB scratch); gpu-stage \
         without it {:.0} us",
        stages.work.bytes >> 20,
        stages.work_copies,
        scratch_bytes >> 20,
        stages.bare_gpu.p50_us()
    );
    let _ = writeln!(
        out,
        "{:>14} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "column", "frames/s", "p50 us", "p99 us", "cpu us", "frames"
    );
    for r in fps {
        let _ = writeln!(
            out,
            "{:>14} {:>9.1} {} {} {} {:>7}",
            r.column,
            r.fps,
            opt(r.p50_us, 9),
            opt(r.p99_us, 9),
            opt(r.cpu_us, 9),
            r.samples.map_or_else(|| "-".to_string(), |n| n.to_string())
        );
    }
    out
}

/// The batch table: a row per column.
pub fn batch_table(batch: &[BatchRecord]) -> String {
    let mut out = String::new();
    if batch.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "batch: 4 KiB + 16 KiB + 64 KiB + 150528 B downloaded back to back"
    );
    let _ = writeln!(
        out,
        "{:>14} {:>7} {:>9} {:>9} {:>7}",
        "column", "bytes", "p50 us", "p99 us", "reps"
    );
    for r in batch {
        let _ = writeln!(
            out,
            "{:>14} {:>7} {:>9.1} {:>9.1} {:>7}",
            r.column, r.bytes, r.median_us, r.p99_us, r.samples
        );
    }
    out
}

/// The targets, one line each: the ratio, the bound, and whether it is met.
pub fn targets_table(targets: &[Target]) -> String {
    let mut out = String::from("targets (issue 13, H200):\n");
    for t in targets {
        let bound = match t.bound {
            Bound::AtLeast => ">=",
            Bound::AtMost => "<=",
        };
        let verdict = match t.met() {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "not measured",
        };
        let _ = writeln!(
            out,
            "  {:<34} {:>6} (target {bound} {:.2}) {verdict}",
            t.what,
            t.ratio
                .map_or_else(|| "-".to_string(), |r| format!("{r:.2}x")),
            t.limit
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::report::fps_records;
    use crate::pipeline::report::tests::{batch, loops, stages};

    #[test]
    fn tables_have_a_row_per_column() {
        let fps = fps_records(&stages(), &loops());
        let t = pipeline_table(&stages(), 512 << 20, &fps);
        assert_eq!(t.lines().count(), 3 + fps.len(), "{t}");
        assert!(t.contains("3072 MiB of device copies in 6 calls"), "{t}");
        let ideal = t
            .lines()
            .find(|l| l.trim_start().starts_with("ideal"))
            .unwrap();
        assert!(
            ideal.contains("250.0") && ideal.trim_end().ends_with('-'),
            "{ideal}"
        );
        assert!(t.contains("cpu us"), "{t}");
        let ring: Vec<&str> = t
            .lines()
            .find(|l| l.trim_start().starts_with("ring"))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(ring, ["ring", "240.0", "4100.0", "5000.0", "5125.0", "300"]);
        let b = batch_table(&batch());
        assert_eq!(b.lines().count(), 2 + 4, "{b}");
        assert_eq!(batch_table(&[]), "");
        assert_eq!(pipeline_table(&stages(), 1, &[]), "");
    }
}
