//! The pitched 2-D bench (issue 24, part 2): a 1920x1080 RGB `u8` frame between host
//! rows and a `cuMemAllocPitch` surface, through `StagingBuffer::upload_2d` /
//! `upload_2d_with` / `download_2d` / `download_2d_into` against the driver's own
//! `cuMemcpy2D` from pageable memory. What runs and how: `benches::pitched`.
//!
//! ```text
//! cargo bench -p benches --bench pitched
//! BENCH_QUICK=1 cargo bench -p benches --bench pitched   # smoke run
//! ```
//!
//! Writes `$BENCH_RECORDS_DIR/pitched.json` for the renderer's "Pitched 2-D frames"
//! table and prints the same numbers. Criterion-style arguments are accepted and
//! ignored, except `--bench` (measure), `--list` and test mode (no `--bench`: a
//! smoke pass that writes nothing). Without a CUDA GPU it says "no CUDA GPU/driver
//! found: ..." and exits 1 under `--bench`, 0 in test mode.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use benches::cells::{CellFilter, CELLS_ENV};
use benches::pitched::{self, PitchedSettings, PITCHED_FILE};
use benches::records::{write_records_file, RECORDS_DIR_ENV};
use benches::{Gpu, RunMode};

fn main() -> ExitCode {
    let mode = RunMode::from_args(std::env::args());
    if mode == RunMode::List {
        for s in pitched::SCENARIOS {
            println!("pitched/{}: benchmark", s.name);
        }
        return ExitCode::SUCCESS;
    }
    let settings = match mode {
        RunMode::Test => PitchedSettings::smoke(),
        _ => PitchedSettings::from_env(),
    };
    let cells = CellFilter::from_env();
    if !cells.any(pitched::SCENARIOS.iter().map(|s| s.name)) {
        println!("pitched: no cell of {CELLS_ENV} is measured here");
        return ExitCode::SUCCESS;
    }
    let gpu = match Gpu::open_for("pitched", mode) {
        Ok(g) => g,
        Err(exit) => return exit,
    };
    eprintln!(
        "pitched: {} | {} repetitions per cell{}",
        gpu.describe(),
        settings.reps,
        match (mode, settings.quick) {
            (RunMode::Test, _) => " (test mode: a smoke pass, nothing written)",
            (_, true) => " (BENCH_QUICK)",
            _ => "",
        },
    );
    let started = Instant::now();
    let records = match pitched::run(&gpu, &settings) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("pitched: FAILED: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!();
    print!("{}", pitched::log_table(&records));
    let mut failed = None;
    if mode != RunMode::Test {
        match std::env::var_os(RECORDS_DIR_ENV).filter(|d| !d.is_empty()) {
            None => println!(
                "pitched: {RECORDS_DIR_ENV} is not set: records not written (the table above \
                 is all)"
            ),
            Some(dir) => match write_records_file(&PathBuf::from(dir), PITCHED_FILE, &records) {
                Ok(path) => println!(
                    "pitched: {} records written to {}",
                    records.len(),
                    path.display()
                ),
                Err(e) => failed = Some(e),
            },
        }
    }
    if let Err(e) = cuda_core::check_deferred_errors() {
        failed = failed.or(Some(format!("an error recorded in a drop: {e}")));
    }
    println!("pitched: done in {:.1} s", started.elapsed().as_secs_f64());
    match failed {
        Some(e) => {
            eprintln!("pitched: FAILED: {e}");
            ExitCode::FAILURE
        }
        None => ExitCode::SUCCESS,
    }
}
