//! `cargo xtask test-gpu --sim [--seed N] [--jitter-us US]`: the GPU tests run against
//! the simulated CUDA driver (`crates/cuda-sim`), on a machine without a GPU.
//!
//! Builds the simulator (`target/release/libcuda_sim.so`) and a folder holding the
//! two names libcuda is opened by (`libcuda.so.1`, which cuda-sys opens through
//! `CUDA_DRIVER_LIBRARY`, and `libcuda.so`, which cudarc opens itself), both links
//! to it. Then every test executable of the workspace's default and gated builds
//! runs its GPU tests (`--ignored`: the CPU tests are `cargo test`'s) with that folder
//! on `LD_LIBRARY_PATH`, one simulated device (two for the multi-GPU tests), and the
//! seed and jitter given (and with `--hide`, a copy of the simulator lacking the entry
//! points named, see [`hide`]). The tests [`NOT_ON_SIMULATOR`] names are left out with
//! `--skip`, each with its reason in the summary, and the summary counts the GPU
//! tests found, left out, run and passed. The examples run afterwards, as in
//! `cargo xtask test-gpu`. Each executable and example runs with the simulator's
//! leak report on ([`leaks`]): one that ends holding a stream, event, context,
//! allocation, module or graph fails the run, named with its counts. The tests
//! [`LEAKS_BY_DESIGN`] names run alone instead, and must leak exactly what it says.

use std::path::{Path, PathBuf};

use crate::cargo_util::{self, Artifact, Metadata, TestCounts};
use crate::test_gpu::{self, Args};
use crate::{Context, Result};

mod hide;
mod leaks;

/// A GPU test that cannot run on the simulator: the test target it is in, its name,
/// and why.
pub struct LeftOut {
    /// The test target (`gpu_events`, `pipeline`, ...).
    pub target: &'static str,
    /// The test's full name in that target.
    pub test: &'static str,
    /// Why it cannot run there: a timing or CPU-cost assertion, compute-sanitizer, or
    /// device code.
    pub why: &'static str,
}

/// Why the pipeline tests whose copy pool may help are left out.
const HELPERS_NEED_AN_IDLE_CORE: &str = "a CPU-cost assertion: it checks that the copy \
     pool's helpers copied a part, which they do only when they run before the caller \
     has claimed every part; on a 2-core machine the simulator's stream threads, doing \
     the DMA's work on the CPU, often leave none. The same boundaries run with one \
     copy thread and with the pool off";

/// The one list of GPU tests left out on the simulator.
pub const NOT_ON_SIMULATOR: &[LeftOut] = &[
    LeftOut {
        target: "waits",
        test: "a_transfer_with_nothing_ahead_of_it_is_not_slowed_by_the_default_wait",
        why: "a timing assertion: the default wait's median latency within 20 us of a \
              spinning wait's, which holds where a copy lands in microseconds; the \
              simulator's jitter delays each copy by up to milliseconds",
    },
    LeftOut {
        target: "pipeline",
        test: "parked_workers_every_chunk_boundary_all_helpers",
        why: HELPERS_NEED_AN_IDLE_CORE,
    },
    LeftOut {
        target: "pipeline",
        test: "parked_workers_every_chunk_boundary_one_helper",
        why: HELPERS_NEED_AN_IDLE_CORE,
    },
    LeftOut {
        target: "pipeline",
        test: "parked_workers_every_chunk_boundary_64_kib_chunks",
        why: HELPERS_NEED_AN_IDLE_CORE,
    },
    LeftOut {
        target: "pipeline",
        test: "back_to_back_every_chunk_boundary_all_helpers",
        why: HELPERS_NEED_AN_IDLE_CORE,
    },
    LeftOut {
        target: "pipeline",
        test: "back_to_back_every_chunk_boundary_one_helper",
        why: HELPERS_NEED_AN_IDLE_CORE,
    },
    LeftOut {
        target: "pipeline",
        test: "back_to_back_every_chunk_boundary_64_kib_chunks",
        why: HELPERS_NEED_AN_IDLE_CORE,
    },
];

/// A GPU test that leaks on purpose: it runs in a process of its own, whose leak
/// report must count exactly `leaks` (and the rest of its executable, nothing).
pub struct LeaksByDesign {
    /// The test target it is in.
    pub target: &'static str,
    /// The test's full name in that target.
    pub test: &'static str,
    /// What its process holds at exit, by the leak report's names.
    pub leaks: &'static [(&'static str, u64)],
    /// Why.
    pub why: &'static str,
}

/// Why the cudarc bridge's tests of a forgotten view leak.
const FORGOTTEN_VIEW: &str = "it `mem::forget`s a CudarcView(Mut) on purpose \
     (Leave::Forget), to show that cudarc's event record does not depend on the view's \
     Drop. The forgotten view's tracker holds the state of the borrowed Stream it was \
     used on, which keeps cudarc's CudaStream alive (never destroyed), and that keeps \
     the primary context retained";

/// The one list of GPU tests that leak on purpose.
pub const LEAKS_BY_DESIGN: &[LeaksByDesign] = &[
    LeaksByDesign {
        target: "cudarc_bridge",
        test:
            "cross_stream::a_slice_dropped_while_our_download_from_it_is_queued_is_freed_after_it",
        leaks: &[("streams", 1), ("primary_contexts", 1)],
        why: FORGOTTEN_VIEW,
    },
    LeaksByDesign {
        target: "cudarc_bridge",
        test: "cross_stream::a_slice_dropped_while_our_upload_into_it_is_queued_is_freed_after_it",
        leaks: &[("streams", 1), ("primary_contexts", 1)],
        why: FORGOTTEN_VIEW,
    },
];

/// How the simulator is found: the library, and the folder with its libcuda names.
pub(crate) struct Driver {
    library: PathBuf,
    folder: PathBuf,
}

/// Builds the simulator and links the names libcuda is opened by to it. With entry
/// points to `hide`, a copy of it that lacks them ([`hide::hide`]), in a folder of
/// its own, is linked instead.
pub(crate) fn build_simulator(
    sh: &xshell::Shell,
    meta: &Metadata,
    hidden: &[String],
) -> Result<Driver> {
    cargo_util::cargo(sh)
        .args(["build", "--release", "-p", "cuda-sim"])
        .run()
        .context("building the simulator")?;
    let mut library = meta.target_dir.join("release").join("libcuda_sim.so");
    if !library.is_file() {
        return Err(format!("the simulator was not built at {}", library.display()).into());
    }
    let folder = meta.target_dir.join("release").join(if hidden.is_empty() {
        "cuda-sim-driver"
    } else {
        "cuda-sim-driver-hiding"
    });
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    if !hidden.is_empty() {
        let mut elf = std::fs::read(&library)
            .with_context(|| format!("cannot read {}", library.display()))?;
        hide::hide(&mut elf, hidden).context("hiding entry points of the simulator")?;
        library = folder.join("libcuda_sim_hiding.so");
        std::fs::write(&library, elf)
            .with_context(|| format!("cannot write {}", library.display()))?;
    }
    for name in ["libcuda.so.1", "libcuda.so"] {
        let link = folder.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&library, &link)
            .with_context(|| format!("cannot link {} to the simulator", link.display()))?;
    }
    Ok(Driver { library, folder })
}

/// The GPU tests (`#[ignore]`d ones) of a test executable, by name.
fn gpu_tests(exe: &Path) -> Result<Vec<String>> {
    let out = std::process::Command::new(exe)
        .args(["--list", "--ignored"])
        .output()
        .with_context(|| format!("cannot list the tests of {}", exe.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_owned)
        .collect())
}

/// The entries of [`LEAKS_BY_DESIGN`] for the test target `target`.
fn leaks_by_design_of(target: &str) -> impl Iterator<Item = &'static LeaksByDesign> + '_ {
    LEAKS_BY_DESIGN.iter().filter(move |l| l.target == target)
}

/// The entries of [`NOT_ON_SIMULATOR`] for the test target `target`.
fn left_out_of(target: &str) -> impl Iterator<Item = &'static LeftOut> + '_ {
    NOT_ON_SIMULATOR.iter().filter(move |l| l.target == target)
}

/// The environment every executable runs with: the simulator, its settings.
fn environment(driver: &Driver, args: &Args, devices: usize) -> Vec<(String, String)> {
    simulator_env(driver, devices, args.seed, args.jitter_us)
}

/// The environment that runs a program on the simulator `driver` with `devices`
/// devices, `seed` and up to `jitter_us` of delay before each operation.
pub(crate) fn simulator_env(
    driver: &Driver,
    devices: usize,
    seed: u64,
    jitter_us: u64,
) -> Vec<(String, String)> {
    let path = match std::env::var("LD_LIBRARY_PATH") {
        Ok(p) if !p.is_empty() => format!("{}:{p}", driver.folder.display()),
        _ => driver.folder.display().to_string(),
    };
    vec![
        (
            "CUDA_DRIVER_LIBRARY".into(),
            driver.folder.join("libcuda.so.1").display().to_string(),
        ),
        ("LD_LIBRARY_PATH".into(), path),
        ("CUDA_SIM_DEVICES".into(), devices.to_string()),
        ("CUDA_SIM_SEED".into(), seed.to_string()),
        ("CUDA_SIM_JITTER_US".into(), jitter_us.to_string()),
        ("CUDA_SIM_POISON".into(), "1".into()),
    ]
}

/// The command that runs test executable `a`'s GPU tests (`--ignored`) on the
/// simulator with `devices` devices, its leak report going to `report`; the caller
/// adds the filters.
fn test_command<'a>(
    sh: &'a xshell::Shell,
    a: &Artifact,
    driver: &Driver,
    args: &Args,
    devices: usize,
    report: &Path,
) -> xshell::Cmd<'a> {
    let mut cmd = sh
        .cmd(&a.executable)
        .arg("--ignored")
        .env("CARGO_MANIFEST_DIR", &a.package_dir)
        .env("CUDA_SIM_LEAK_REPORT", report);
    for (k, v) in environment(driver, args, devices) {
        cmd = cmd.env(k, v);
    }
    cmd
}

/// The counts over every executable.
#[derive(Default)]
struct Totals {
    found: usize,
    left_out: usize,
    counts: TestCounts,
    examples_passed: u64,
    examples_failed: u64,
    /// How many executables and examples ran with the leak report on.
    leak_checked: usize,
    /// What leaked, one entry per run ([`leaks::describe`], [`leaks::unexpected`]).
    leaks: Vec<String>,
}

/// The folder of the leak reports, one file per executable, emptied first.
fn leak_folder(meta: &Metadata) -> Result<PathBuf> {
    let folder = meta.target_dir.join("release").join("cuda-sim-leaks");
    match std::fs::remove_dir_all(&folder) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("cannot empty {}: {e}", folder.display()).into())
        }
        _ => {}
    }
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    Ok(folder)
}

/// Reads the leak report of executable `name` after it ran, into `totals`.
fn check_leaks(name: &str, report: &Path, totals: &mut Totals) -> Result<()> {
    let found = leaks::leaks_in(report)?;
    totals.leak_checked += 1;
    if !found.is_empty() {
        let text = leaks::describe(name, &found);
        println!("{text}");
        totals.leaks.push(text);
    }
    Ok(())
}

/// Runs `cargo xtask test-gpu --sim` with these options.
pub fn run(args: &Args) -> Result<()> {
    let sh = cargo_util::shell()?;
    let meta = Metadata::load()?;
    let driver = build_simulator(&sh, &meta, &args.hide)?;
    let hiding = if args.hide.is_empty() {
        String::new()
    } else {
        format!(", hiding {}", args.hide.join(", "))
    };
    let setting = format!(
        "simulated driver {} (seed {}, jitter up to {} us{hiding})",
        driver.library.display(),
        args.seed,
        args.jitter_us
    );
    println!("{setting}");
    let leak_dir = leak_folder(&meta)?;
    let built = test_gpu::executables(&sh, &meta, false)?;
    let tests: Vec<&Artifact> = built
        .tests
        .iter()
        .filter(|a| args.soak || !a.is_soak())
        .filter(|a| test_gpu::selected(args, &a.bundle_name()))
        .collect();
    let mut lines = Vec::new();
    let mut totals = Totals::default();
    for a in tests {
        let name = a.bundle_name();
        let found = gpu_tests(&a.executable)?;
        if found.is_empty() {
            continue;
        }
        let skips: Vec<&LeftOut> = left_out_of(&a.target)
            .filter(|l| found.iter().any(|t| t == l.test))
            .collect();
        // `--skip` matches by substring: count what it really leaves out.
        let left_out = found
            .iter()
            .filter(|t| skips.iter().any(|l| t.contains(l.test)))
            .count();
        totals.found += found.len();
        totals.left_out += left_out;
        let by_design: Vec<&LeaksByDesign> = leaks_by_design_of(&a.target)
            .filter(|l| found.iter().any(|t| t == l.test))
            .collect();
        let devices = if a.is_multi_gpu() { 2 } else { 1 };
        let _dir = sh.push_dir(&a.package_dir);
        let report = leak_dir.join(format!("{name}.txt"));
        let mut cmd = test_command(&sh, a, &driver, args, devices, &report);
        for l in &skips {
            cmd = cmd.args(["--skip", l.test]);
        }
        for l in &by_design {
            cmd = cmd.args(["--skip", l.test]);
        }
        let cmd = cmd.args(&args.test_args);
        println!(
            "===== {name} ({} GPU tests, {left_out} left out): {cmd}",
            found.len()
        );
        let (status, output) = cargo_util::run_tee(cmd)?;
        let (line, counts) = test_gpu::summary_line(&name, status.code(), &output);
        totals.counts.passed += counts.passed;
        totals.counts.failed += counts.failed;
        lines.push(line);
        check_leaks(&name, &report, &mut totals)?;
        for l in by_design {
            // A test filter of the user's would not select it here: leave it out.
            if !args.test_args.is_empty() {
                totals.left_out += 1;
                lines.push(format!(
                    "{name}: {} (leaks by design) not run: test arguments given",
                    l.test
                ));
                continue;
            }
            let report = leak_dir.join(format!("{name}--{}.txt", l.test.replace("::", "--")));
            let cmd =
                test_command(&sh, a, &driver, args, devices, &report).args(["--exact", l.test]);
            println!("===== {name}, one test alone (it leaks by design): {cmd}");
            let (status, output) = cargo_util::run_tee(cmd)?;
            let (line, counts) =
                test_gpu::summary_line(&format!("{name} {} alone", l.test), status.code(), &output);
            totals.counts.passed += counts.passed;
            totals.counts.failed += counts.failed;
            lines.push(line);
            totals.leak_checked += 1;
            if let Some(text) = leaks::unexpected(&format!("{name} {}", l.test), &report, l.leaks)?
            {
                println!("{text}");
                totals.leaks.push(text);
            }
        }
    }
    for a in built
        .examples
        .iter()
        .filter(|a| !args.no_examples && test_gpu::selected(args, &a.bundle_name()))
    {
        let name = a.bundle_name();
        let _dir = sh.push_dir(&a.package_dir);
        let mut cmd = sh.cmd(&a.executable);
        for (k, v) in environment(&driver, args, 1) {
            cmd = cmd.env(k, v);
        }
        let report = leak_dir.join(format!("{name}.txt"));
        let cmd = cmd.env("CUDA_SIM_LEAK_REPORT", &report);
        println!("===== {name}: {cmd}");
        let (status, _) = cargo_util::run_tee(cmd)?;
        lines.push(test_gpu::example_line(&name, status.code()));
        if status.success() {
            totals.examples_passed += 1;
        } else {
            totals.examples_failed += 1;
        }
        check_leaks(&name, &report, &mut totals)?;
    }
    report(&setting, &lines, &totals);
    let failed = totals.counts.failed + totals.examples_failed;
    let mut errors = Vec::new();
    if failed > 0 {
        errors.push(format!("{failed} test(s) failed on the simulator"));
    }
    if !totals.leaks.is_empty() {
        errors.push(format!(
            "leaks on the simulator (CUDA_SIM_LEAK_REPORT, reports in {}):\n{}",
            leak_dir.display(),
            totals.leaks.join("\n")
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; ").into())
    }
}

fn report(setting: &str, lines: &[String], t: &Totals) {
    println!("\n== summary ({setting})");
    for l in lines {
        println!("{l}");
    }
    println!("left out on the simulator (xtask/src/test_sim.rs, NOT_ON_SIMULATOR):");
    for l in NOT_ON_SIMULATOR {
        println!("  {}::{}: {}", l.target, l.test, l.why);
    }
    let ran = t.found - t.left_out;
    let share = if t.found == 0 {
        0.0
    } else {
        100.0 * ran as f64 / t.found as f64
    };
    println!(
        "GPU tests: {} found, {} left out, {ran} run ({share:.1}%): {} passed, {} failed",
        t.found, t.left_out, t.counts.passed, t.counts.failed
    );
    println!(
        "examples: {} passed, {} failed",
        t.examples_passed, t.examples_failed
    );
    println!(
        "leak report: {} runs checked, {} with a leak",
        t.leak_checked,
        t.leaks.len()
    );
    for l in &t.leaks {
        println!("  {}", l.replace('\n', "\n  "));
    }
    println!("leaking by design, each run alone and checked for exactly its leak (xtask/src/test_sim.rs, LEAKS_BY_DESIGN):");
    for l in LEAKS_BY_DESIGN {
        let leaks: Vec<String> = l.leaks.iter().map(|(k, n)| format!("{k}={n}")).collect();
        println!(
            "  {}::{} ({}): {}",
            l.target,
            l.test,
            leaks.join(", "),
            l.why
        );
    }
    println!(
        "TOTAL: {} passed, {} failed",
        t.counts.passed + t.examples_passed,
        t.counts.failed + t.examples_failed
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_test_left_out_names_its_target_and_a_reason() {
        for l in NOT_ON_SIMULATOR {
            assert!(!l.target.is_empty() && !l.test.is_empty(), "{}", l.test);
            let kinds = [
                "a timing assertion",
                "a CPU-cost assertion",
                "compute-sanitizer",
                "device code",
            ];
            assert!(
                kinds.iter().any(|k| l.why.starts_with(k)),
                "{}::{}: the reason starts with its kind, one of {kinds:?}: {}",
                l.target,
                l.test,
                l.why
            );
            let twice = NOT_ON_SIMULATOR
                .iter()
                .filter(|o| o.target == l.target && o.test == l.test)
                .count();
            assert_eq!(twice, 1, "{}::{} listed twice", l.target, l.test);
        }
    }

    #[test]
    fn every_leak_by_design_names_counts_the_report_has_and_a_reason() {
        let names = [
            "streams",
            "events",
            "contexts",
            "primary_contexts",
            "device_allocs",
            "stream_ordered_allocs",
            "host_allocs",
            "host_registrations",
            "modules",
            "graphs",
            "graph_execs",
        ];
        for l in LEAKS_BY_DESIGN {
            let at = format!("{}::{}", l.target, l.test);
            assert!(!l.why.is_empty() && !l.leaks.is_empty(), "{at}");
            for (name, n) in l.leaks {
                assert!(names.contains(name) && *n > 0, "{at}: {name}={n}");
            }
            assert_eq!(
                LEAKS_BY_DESIGN
                    .iter()
                    .filter(|o| o.target == l.target && o.test == l.test)
                    .count(),
                1,
                "{at} listed twice"
            );
            assert!(
                !NOT_ON_SIMULATOR
                    .iter()
                    .any(|o| o.target == l.target && o.test == l.test),
                "{at} is left out and runs alone"
            );
        }
    }
}
