//! The pipeline benchmark (issue 13): one inference-shaped pipeline of frames —
//! preprocess on the CPU, upload, a stand-in model on the GPU, download, post-process
//! on the CPU — run three ways (`pageable-sync`, `staging-sync`, `ring`) against
//! `ideal`, and a model's four outputs downloaded separately or as one batch. What
//! runs and how: `benches::pipeline`.
//!
//! ```text
//! cargo bench -p benches --bench pipeline
//! BENCH_QUICK=1 cargo bench -p benches --bench pipeline   # smoke run
//! ```
//!
//! Writes `$BENCH_RECORDS_DIR/pipeline.json` (see `benches::pipeline::report`) and
//! prints the tables, the issue's targets and its elapsed time. Criterion-style
//! arguments are accepted and ignored, except `--bench` (measure), `--list` and test
//! mode (no `--bench`: a smoke pass that writes nothing). Without a CUDA GPU it says
//! "no CUDA GPU/driver found: ..." and exits 1 under `--bench`, 0 in test mode.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use benches::cells::CELLS_ENV;
use benches::pipeline::behind_work::BEHIND_WORK_SCENARIO;
use benches::pipeline::report::{self, PIPELINE_FILE};
use benches::pipeline::{self, PipelineSettings};
use benches::records::{write_records_file, RECORDS_DIR_ENV};
use benches::{Gpu, RunMode};

fn main() -> ExitCode {
    let mode = RunMode::from_args(std::env::args());
    if mode == RunMode::List {
        println!("pipeline/pipeline: benchmark");
        println!("pipeline/batch: benchmark");
        return ExitCode::SUCCESS;
    }
    let settings = match mode {
        RunMode::Test => PipelineSettings::smoke(),
        _ => PipelineSettings::from_env(),
    };
    if !settings.cells.any([
        report::PIPELINE_SCENARIO,
        report::GPU_HEAVY_SCENARIO,
        report::BATCH_SCENARIO,
        BEHIND_WORK_SCENARIO,
    ]) {
        println!("pipeline: no cell of {CELLS_ENV} is measured here");
        return ExitCode::SUCCESS;
    }
    let gpu = match Gpu::open_for("pipeline", mode) {
        Ok(g) => g,
        Err(exit) => return exit,
    };
    eprintln!(
        "pipeline: {} | {} frames per loop, {} batch repetitions{}",
        gpu.describe(),
        settings.frames,
        settings.batch_reps,
        match (mode, settings.quick) {
            (RunMode::Test, _) => " (test mode: a smoke pass, nothing written)",
            (_, true) => " (BENCH_QUICK)",
            _ => "",
        },
    );

    let started = Instant::now();
    let progress = |what: &str| {
        eprintln!(
            "pipeline: [{:6.1} s] {what}",
            started.elapsed().as_secs_f64()
        );
    };
    let results = pipeline::run(&gpu, &settings, progress);

    // The tables last: the end of the log is read first.
    println!();
    print!("{}", results.report());
    let mut failed = results.failed.clone();
    if mode != RunMode::Test {
        let records = results.records();
        match std::env::var_os(RECORDS_DIR_ENV).filter(|d| !d.is_empty()) {
            _ if records.is_empty() => println!("pipeline: no records to write"),
            None => println!(
                "pipeline: {RECORDS_DIR_ENV} is not set: records not written (the tables \
                 above are all)"
            ),
            Some(dir) => match write_records_file(&PathBuf::from(dir), PIPELINE_FILE, &records) {
                Ok(path) => println!(
                    "pipeline: {} records written to {}",
                    records.len(),
                    path.display()
                ),
                Err(e) => failed = failed.or(Some(e)),
            },
        }
    }
    if let Err(e) = cuda_core::check_deferred_errors() {
        failed = failed.or(Some(format!("an error recorded in a drop: {e}")));
    }
    println!("pipeline: done in {:.1} s", started.elapsed().as_secs_f64());
    match failed {
        Some(e) => {
            eprintln!("pipeline: FAILED: {e}");
            ExitCode::FAILURE
        }
        None => ExitCode::SUCCESS,
    }
}
