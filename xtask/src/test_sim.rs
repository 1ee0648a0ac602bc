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
//! `cargo xtask test-gpu`.

use std::path::{Path, PathBuf};

use crate::cargo_util::{self, Artifact, Metadata, TestCounts};
use crate::test_gpu::{self, Args};
use crate::{Context, Result};

mod hide;

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
     pool's helpers copied a part, which they do only while the host has an idle core \
     (the pool counts them); on a 2-core machine the simulator's stream threads, doing \
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

/// How the simulator is found: the library, and the folder with its libcuda names.
struct Driver {
    library: PathBuf,
    folder: PathBuf,
}

/// Builds the simulator and links the names libcuda is opened by to it. With entry
/// points to `hide`, a copy of it that lacks them ([`hide::hide`]), in a folder of
/// its own, is linked instead.
fn build_simulator(sh: &xshell::Shell, meta: &Metadata, hidden: &[String]) -> Result<Driver> {
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

/// The entries of [`NOT_ON_SIMULATOR`] for the test target `target`.
fn left_out_of(target: &str) -> impl Iterator<Item = &'static LeftOut> + '_ {
    NOT_ON_SIMULATOR.iter().filter(move |l| l.target == target)
}

/// The environment every executable runs with: the simulator, its settings.
fn environment(driver: &Driver, args: &Args, devices: usize) -> Vec<(String, String)> {
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
        ("CUDA_SIM_SEED".into(), args.seed.to_string()),
        ("CUDA_SIM_JITTER_US".into(), args.jitter_us.to_string()),
        ("CUDA_SIM_POISON".into(), "1".into()),
    ]
}

/// The counts over every executable.
#[derive(Default)]
struct Totals {
    found: usize,
    left_out: usize,
    counts: TestCounts,
    examples_passed: u64,
    examples_failed: u64,
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
        let devices = if a.is_multi_gpu() { 2 } else { 1 };
        let _dir = sh.push_dir(&a.package_dir);
        let mut cmd = sh
            .cmd(&a.executable)
            .arg("--ignored")
            .env("CARGO_MANIFEST_DIR", &a.package_dir);
        for l in &skips {
            cmd = cmd.args(["--skip", l.test]);
        }
        for (k, v) in environment(&driver, args, devices) {
            cmd = cmd.env(k, v);
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
        println!("===== {name}: {cmd}");
        let (status, _) = cargo_util::run_tee(cmd)?;
        lines.push(test_gpu::example_line(&name, status.code()));
        if status.success() {
            totals.examples_passed += 1;
        } else {
            totals.examples_failed += 1;
        }
    }
    report(&setting, &lines, &totals);
    let failed = totals.counts.failed + totals.examples_failed;
    if failed > 0 {
        return Err(format!("{failed} test(s) failed on the simulator").into());
    }
    Ok(())
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
}
