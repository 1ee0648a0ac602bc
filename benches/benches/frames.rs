//! Frame-loop benchmarks (issue 12): every measured transfer follows a gap, as in a
//! user's per-frame loop, and the tail of a distribution matters as much as its
//! median. Scenarios, columns and repetitions: `benches::frames`.
//!
//! ```text
//! cargo bench -p benches --bench frames            # sleep-2ms, sleep-16ms, busy-2ms, tight-loop, contended, four-pipelines, scaling
//! FRAMES_ONLY=sleep-2ms,chunks cargo bench -p benches --bench frames
//! BENCH_QUICK=1 cargo bench -p benches --bench frames   # smoke run: 20 reps, 2 sizes
//! ```
//!
//! Writes `$BENCH_RECORDS_DIR/frames.json` (see `benches::records`) and prints the
//! tables (latency and CPU per frame, see `benches::log_tables`) and its elapsed time. Criterion-style arguments are accepted and ignored,
//! except `--bench` (measure), `--list` and test mode (no `--bench`: a smoke pass
//! that writes nothing). Without a CUDA GPU it says "no CUDA GPU/driver found: ..."
//! and exits 1 under `--bench`, 0 in test mode. With one GPU, `scaling` says
//! "scaling: skipped, needs 2 or more GPUs (found 1)" and writes no records.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use benches::cells::{CellFilter, CELLS_ENV};
use benches::frame_loop::FrameLoop;
use benches::frames::{scenarios_from, FrameSettings, Scenario, FRAMES_ONLY_ENV};
use benches::records::{self, Record, RECORDS_DIR_ENV};
use benches::{chunks, four_pipelines, frame_scenarios, log_tables, scaling, Gpu, RunMode};

fn main() -> ExitCode {
    let mode = RunMode::from_args(std::env::args());
    let scenarios = match scenarios_from(std::env::var(FRAMES_ONLY_ENV).ok().as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("frames: {e}");
            return ExitCode::from(2);
        }
    };
    if mode == RunMode::List {
        for s in &scenarios {
            println!("frames/{}: benchmark", s.name());
        }
        return ExitCode::SUCCESS;
    }
    let settings = match mode {
        RunMode::Test => FrameSettings::smoke(),
        _ => FrameSettings::from_env(),
    };
    let (settings, scenarios) = settings.for_cells(CellFilter::from_env(), &scenarios);
    if scenarios.is_empty() {
        println!("frames: no cell of {CELLS_ENV} is measured here");
        return ExitCode::SUCCESS;
    }

    let gpu = match Gpu::open_for("frames", mode) {
        Ok(g) => g,
        Err(exit) => return exit,
    };
    let names: Vec<&str> = scenarios.iter().map(|s| s.name()).collect();
    eprintln!(
        "frames: {} | {} | expected about {:.0} s{}",
        gpu.describe(),
        names.join(", "),
        settings.estimated_run_time(&scenarios).as_secs_f64(),
        match (mode, settings.quick) {
            (RunMode::Test, _) => " (test mode: a smoke pass, nothing written)",
            (_, true) => " (BENCH_QUICK)",
            _ => "",
        },
    );

    let started = Instant::now();
    match run(&gpu, &settings, &scenarios, mode) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("frames: FAILED: {e}");
            return ExitCode::FAILURE;
        }
    }
    if let Err(e) = cuda_core::check_deferred_errors() {
        eprintln!("frames: FAILED: an error recorded in a drop: {e}");
        return ExitCode::FAILURE;
    }
    println!("frames: done in {:.1} s", started.elapsed().as_secs_f64());
    ExitCode::SUCCESS
}

fn run(
    gpu: &Gpu,
    settings: &FrameSettings,
    scenarios: &[Scenario],
    mode: RunMode,
) -> Result<(), String> {
    let started = Instant::now();
    let progress = |what: &str| {
        eprintln!("frames: [{:6.1} s] {what}", started.elapsed().as_secs_f64());
    };
    // A failure stops the run, but what was measured before it is still printed
    // and written.
    let mut failed: Option<String> = None;
    let mut frame_records = Vec::new();
    let mut contended_records = Vec::new();
    let frame_scenarios: Vec<Scenario> = scenarios
        .iter()
        .copied()
        .filter(|s| s.uses_frame_columns())
        .collect();
    if !frame_scenarios.is_empty() {
        let mut fl =
            FrameLoop::new(gpu, &settings.sizes).map_err(|e| format!("allocating: {e}"))?;
        fl.verify()
            .map_err(|e| format!("data check before timing: {e}"))?;
        progress("every column's data checked at every size, both ways");
        for &s in &frame_scenarios {
            match frame_scenarios::run(&mut fl, s, settings, progress) {
                Ok((frames, contended)) => {
                    frame_records.extend(frames);
                    contended_records.extend(contended);
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
    }
    let mut pipeline_records = Vec::new();
    if failed.is_none() && scenarios.contains(&Scenario::FourPipelines) {
        match four_pipelines::run(gpu, settings, progress) {
            Ok(r) => pipeline_records = r,
            Err(e) => failed = Some(e),
        }
    }
    let mut scaling_records = Vec::new();
    if failed.is_none() && scenarios.contains(&Scenario::Scaling) {
        match scaling::run(gpu, settings, progress) {
            Ok(r) => scaling_records = r,
            Err(e) => failed = Some(e),
        }
    }
    let mut chunk_table = None;
    if failed.is_none() && scenarios.contains(&Scenario::Chunks) {
        match chunks::run(gpu, settings) {
            Ok(t) => chunk_table = Some(t),
            Err(e) => failed = Some(e),
        }
    }

    // The tables last, together: the end of the log is read first.
    println!();
    print!("{}", log_tables::frame_tables(&frame_records));
    print!("{}", log_tables::contended_tables(&contended_records));
    print!("{}", log_tables::pipeline_table(&pipeline_records));
    print!("{}", scaling::scaling_table(&scaling_records));
    if let Some(t) = chunk_table {
        print!("{t}");
    }

    let all: Vec<Record> = frame_records
        .into_iter()
        .map(Record::Frame)
        .chain(contended_records.into_iter().map(Record::Contended))
        .chain(pipeline_records.into_iter().map(Record::Pipeline))
        .chain(scaling_records.into_iter().map(Record::Scaling))
        .collect();
    if mode == RunMode::Test {
        return failed.map_or(Ok(()), Err);
    }
    match std::env::var_os(RECORDS_DIR_ENV).filter(|d| !d.is_empty()) {
        _ if all.is_empty() => {
            println!("frames: no records to write (chunks is a diagnostic only)")
        }
        None => println!(
            "frames: {RECORDS_DIR_ENV} is not set: records not written (the tables above are all)"
        ),
        Some(dir) => {
            let path = records::write_records(&PathBuf::from(dir), &all)?;
            println!(
                "frames: {} records written to {}",
                all.len(),
                path.display()
            );
        }
    }
    failed.map_or(Ok(()), Err)
}
