//! `cargo xtask mutants [FILE...]`: cargo-mutants on the code that keeps transfers
//! safe, against the CPU tests and the GPU suite on the simulated driver.
//!
//! Needs cargo-mutants, pinned: `cargo install cargo-mutants --version 27.1.0
//! --locked`. For every mutant of the files named (default: [`DEFAULT_FILES`]),
//! cargo-mutants builds a copy of the workspace and runs (unless a first pass,
//! below, narrows it) `cargo test --release
//! --features cuda-staging/tracing --lib --bins --tests` (the spans record, so what
//! they say is tested) for the packages that can reach the mutated code (each file's
//! own and every member that depends on it, one list for all the files named: for
//! cuda-staging files alone, cuda-staging and benches), every test executable with
//! `--include-ignored` (the GPU tests too), on the simulator (`crates/cuda-sim`,
//! built here first) with seed 1 and up to 200 µs of delay before each operation, so
//! that ordering mutants show, and two simulated devices (the multi-GPU tests run
//! too). Left out with `--skip`: the tests the
//! simulator cannot run (`test_sim::NOT_ON_SIMULATOR`, each with its reason), the ones
//! that leak on purpose (`test_sim::LEAKS_BY_DESIGN`), the soak test, and the CPU
//! test that no driver loads (the simulator is one). Doctests do not run. A mutant
//! whose tests run past the timeout (three times the unmutated run's) counts as
//! caught: a hang is a failure a user would see. So does a mutant that leaks: every
//! process runs with the simulator's leak report on and `CUDA_SIM_LEAK_EXIT_STATUS`,
//! so one that ends holding a stream, event, context or allocation fails.
//!
//! Two quicker first passes narrow the tests: `--lib-only` (the unit tests alone) and
//! `--package P` (only P's tests, without the feature where P is not cuda-staging). A
//! mutant that fails their tests fails the whole run's too, but a timeout, shorter
//! than the whole run's, is a catch only where the log shows tests stuck; the ones
//! they miss are run again without them, with `--re`, before a survivor goes into
//! the table.
//!
//! The unmutated baseline is built and timed here, with the very command each mutant
//! runs, and cargo-mutants' own is skipped: it tests only the mutated packages, so a
//! cuda-core file's baseline could not take cuda-staging's feature.
//!
//! The results land in `target/mutants/mutants.out` (cargo-mutants' own files), and
//! the table per file, caught / timed out / missed / unviable and the score (caught
//! plus timed out over viable), is printed at the end, for `docs/testing.md`.

use std::collections::{BTreeMap, BTreeSet};

use xshell::cmd;

use crate::cargo_util::Metadata;
use crate::test_sim::{self, LEAKS_BY_DESIGN, NOT_ON_SIMULATOR};
use crate::{project_root, Context, Result};

/// The cargo-mutants release this command is written against.
pub const CARGO_MUTANTS_VERSION: &str = "27.1.0";

/// The files mutated by default: cuda-core's ordering and lifetime code (the record
/// of queued work, streams, events, pinned memory, device memory and its drops) and
/// cuda-staging's transfer core, routing and ring.
pub const DEFAULT_FILES: &[&str] = &[
    "crates/cuda-core/src/tracking.rs",
    "crates/cuda-core/src/tracking/tracker.rs",
    "crates/cuda-core/src/tracking/per_thread.rs",
    "crates/cuda-core/src/stream.rs",
    "crates/cuda-core/src/event.rs",
    "crates/cuda-core/src/wait.rs",
    "crates/cuda-core/src/pinned.rs",
    "crates/cuda-core/src/device_buffer.rs",
    "crates/cuda-staging/src/buffer.rs",
    "crates/cuda-staging/src/buffer/transfer.rs",
    "crates/cuda-staging/src/capacity.rs",
    "crates/cuda-staging/src/staged.rs",
    "crates/cuda-staging/src/pool.rs",
    "crates/cuda-staging/src/job.rs",
    "crates/cuda-staging/src/routing.rs",
    "crates/cuda-staging/src/page_lock.rs",
    "crates/cuda-staging/src/waiting.rs",
    "crates/cuda-staging/src/ring.rs",
    "crates/cuda-staging/src/ring/slots.rs",
    "crates/cuda-staging/src/ring/tickets.rs",
];

/// The feature every run turns on where cuda-staging's tests run ([`tracing`]): the
/// spans record, so what they say is tested.
const TRACING: &str = "cuda-staging/tracing";

/// The test targets every run builds and runs ([`targets`]): all but doctests, which
/// with `--include-ignored` would compile the README's `ignore`d snippets too.
const ALL_TARGETS: &[&str] = &["--lib", "--bins", "--tests"];

/// With `--lib-only`: the unit tests alone.
const LIB_TARGET: &[&str] = &["--lib"];

/// Left out of every run: cuda-sim's tests check the simulator, no mutated file, and
/// some leave objects live on purpose, which the leak status would fail.
const SIMULATOR_PACKAGE: &str = "cuda-sim";

/// A mutant's tests time out after this many times the unmutated run's: a hang is a
/// failure a user would see, and counts as caught.
const TIMEOUT_MULTIPLIER: u64 = 3;

/// The least test timeout, in seconds, however quick the unmutated run.
const MIN_TIMEOUT_S: u64 = 60;

/// A mutant's build times out after this many seconds (the first one builds the tested
/// packages in release in cargo-mutants' copy of the tree: about 1.5 min on 2 cores).
const BUILD_TIMEOUT_S: u64 = 900;

/// The exit status of a test process that ends holding a simulator object
/// (`CUDA_SIM_LEAK_EXIT_STATUS`).
const LEAK_EXIT_STATUS: u8 = 86;

/// The soak test: minutes of random transfers, too long to run per mutant.
const SOAK_TEST: &str = "soak_random_transfers_through_every_path";

/// cuda-core's CPU test that no driver can be loaded: here the simulator is one.
const NO_DRIVER_TEST: &str = "no_driver_is_an_ordinary_error";

/// Options of `cargo xtask mutants`.
#[derive(clap::Args)]
pub struct Args {
    /// Only list the mutants cargo-mutants would try (`--list`), without building or
    /// testing any.
    #[arg(long)]
    list: bool,
    /// Only the mutants whose name matches this regular expression (cargo-mutants'
    /// `--re`), for example one survivor again after a test was added for it.
    #[arg(long, value_name = "REGEX")]
    re: Option<String>,
    /// A quicker first pass: the unit tests (`--lib`, their `#[ignore]`d GPU tests
    /// included) alone, not the test targets of `tests/`. A mutant they fail is
    /// failed by the whole run too, whose tests include them; run the ones missed
    /// again without this option, with `--re`. The timeout, taken from the baseline's
    /// time, shrinks with it, which matters where broken mutants hang (`job.rs`); a
    /// timeout here is a catch only if the log shows tests stuck (a slow mutant
    /// could pass the whole run's longer timeout): rerun it with `--re` if unsure.
    #[arg(long)]
    lib_only: bool,
    /// A quicker first pass: only these packages' tests (each one that can reach the
    /// files), for example `--package cuda-core` for a cuda-core file, whose own tests
    /// hold its GPU tests, without cuda-staging's suite. As with `--lib-only`, run the
    /// ones missed again without this option, with `--re`. Features that only another
    /// member turns on are then off (`benches` turns on cuda-core's `cudarc`): code
    /// behind them is not built, and its mutants need the whole run.
    #[arg(long = "package", value_name = "PACKAGE")]
    packages: Vec<String>,
    /// Source files to mutate (default: the list in xtask/src/mutants.rs).
    #[arg(value_name = "FILE")]
    files: Vec<String>,
}

/// Runs `cargo xtask mutants` with these options.
pub fn run(args: &Args) -> Result<()> {
    let sh = xshell::Shell::new()?;
    sh.change_dir(project_root());
    let version = cmd!(sh, "cargo mutants --version").read().map_err(|_| {
        format!(
            "cargo-mutants is not installed; install it with: cargo install cargo-mutants \
             --version {CARGO_MUTANTS_VERSION} --locked"
        )
    })?;
    if !version.contains(CARGO_MUTANTS_VERSION) {
        println!("note: this command is written against cargo-mutants {CARGO_MUTANTS_VERSION}; found {version}");
    }
    let files: Vec<String> = if args.files.is_empty() {
        DEFAULT_FILES.iter().map(|f| f.to_string()).collect()
    } else {
        args.files.clone()
    };
    let mut mutants = cmd!(sh, "cargo mutants");
    for f in &files {
        mutants = mutants.args(["--file", f]);
    }
    if let Some(re) = &args.re {
        mutants = mutants.args(["--re", re]);
    }
    if args.list {
        return mutants.arg("--list").run().context("cargo mutants --list");
    }
    let meta = Metadata::load()?;
    let packages = chosen(reaching_packages(&meta, &files)?, &args.packages)?;
    println!("tests of: {}", packages.join(", "));
    let driver = test_sim::build_simulator(&sh, &meta, &[])?;
    let mut env = test_sim::simulator_env(&driver, 2, 1, 200);
    // A process that ends holding a stream, event, context or allocation fails, so
    // that a mutant that leaks one (a `Drop` that destroys nothing) is caught.
    env.push(("CUDA_SIM_LEAK_REPORT".into(), "stderr".into()));
    env.push((
        "CUDA_SIM_LEAK_EXIT_STATUS".into(),
        LEAK_EXIT_STATUS.to_string(),
    ));
    // cargo-mutants' own baseline tests the mutated packages only, and so cannot take
    // `--features cuda-staging/tracing` when a cuda-core file is mutated; it would
    // also time the mutants against a smaller run than theirs. So the unmutated
    // baseline is the very command each mutant runs, built and timed here.
    let selected: Vec<String> = packages.iter().map(|p| format!("--package={p}")).collect();
    let targets = targets(args.lib_only);
    let features: Vec<String> = tracing(&packages)
        .map(|f| format!("--features={f}"))
        .into_iter()
        .collect();
    let mut build = cmd!(sh, "cargo test --no-run --release")
        .args(&selected)
        .args(&features)
        .args(targets);
    let mut test = cmd!(sh, "cargo test --release")
        .args(&selected)
        .args(&features)
        .args(targets)
        .args(["--", "--include-ignored"]);
    for skip in skipped() {
        test = test.args(["--skip", skip]);
    }
    for (k, v) in &env {
        build = build.env(k, v);
        test = test.env(k, v);
    }
    let started = std::time::Instant::now();
    build.run().context("the unmutated build")?;
    let build_s = started.elapsed().as_secs();
    let started = std::time::Instant::now();
    test.run()
        .context("the unmutated tests fail, so no mutant can be judged")?;
    let test_s = started.elapsed().as_secs();
    let timeout = (TIMEOUT_MULTIPLIER * test_s).max(MIN_TIMEOUT_S);
    println!("unmutated: {build_s} s to build, {test_s} s to test; a mutant's tests time out after {timeout} s");
    let output = meta.target_dir.join("mutants");
    let mut mutants = mutants
        .arg("--test-workspace=false")
        .args(packages.iter().map(|p| format!("--test-package={p}")))
        .arg("--baseline=skip")
        .args(["--timeout", &timeout.to_string()])
        .args(["--build-timeout", &BUILD_TIMEOUT_S.to_string()])
        .arg("--output")
        .arg(&output)
        // The spans are code of the transfer core too: with the feature on (where
        // cuda-staging's tests run) they record, and `route_tracing` checks them.
        .args(&features)
        .arg("--cargo-arg=--release")
        .arg("--")
        .args(targets)
        .args(["--", "--include-ignored"]);
    for skip in skipped() {
        mutants = mutants.args(["--skip", skip]);
    }
    for (k, v) in env {
        mutants = mutants.env(k, v);
    }
    println!("$ {mutants}");
    // cargo-mutants exits non-zero when a mutant is missed: the table says which.
    let ran = mutants.run();
    let outcomes = output.join("mutants.out").join("outcomes.json");
    let table = table(
        &std::fs::read_to_string(&outcomes)
            .with_context(|| format!("no outcomes at {}", outcomes.display()))?,
    )?;
    println!("\n{table}");
    ran.map_err(|e| format!("cargo mutants: {e} (see {})", output.display()).into())
}

/// The members whose tests can run the code of `files`: each file's package and every
/// member that depends on it, directly or through another member, less
/// [`SIMULATOR_PACKAGE`], one list for all of `files`. No other member's test can reach
/// a mutant, so running them
/// only costs time: for a cuda-staging file, cuda-core's, cuda-sys's and xtask's tests
/// are left out.
fn reaching_packages(meta: &Metadata, files: &[String]) -> Result<Vec<String>> {
    let root = project_root();
    let mut reach = BTreeSet::new();
    for f in files {
        let path = root.join(f);
        let owner = meta
            .members
            .iter()
            .filter(|m| path.starts_with(&m.dir))
            .max_by_key(|m| m.dir.as_os_str().len())
            .ok_or_else(|| format!("{f} is in no workspace member"))?;
        reach.insert(owner.name.clone());
    }
    loop {
        let before = reach.len();
        for m in &meta.members {
            if m.depends_on.iter().any(|d| reach.contains(d)) {
                reach.insert(m.name.clone());
            }
        }
        if reach.len() == before {
            break;
        }
    }
    reach.remove(SIMULATOR_PACKAGE);
    // A whole run tests with `cuda-staging/tracing` on, which needs cuda-staging
    // among the packages: the files must be its code or below it.
    if !reach.contains("cuda-staging") {
        return Err(format!(
            "no tests of cuda-staging can reach {}: this command mutates cuda-core's and \
             cuda-staging's code (and cuda-sys's)",
            files.join(", ")
        )
        .into());
    }
    Ok(reach.into_iter().collect())
}

/// The packages whose tests run: every one in `reach`, or those `asked` (`--package`),
/// each of which must be in `reach`, since no other package's tests can fail a mutant.
fn chosen(reach: Vec<String>, asked: &[String]) -> Result<Vec<String>> {
    if asked.is_empty() {
        return Ok(reach);
    }
    for p in asked {
        if !reach.contains(p) {
            return Err(format!(
                "--package {p}: its tests cannot reach the files mutated; these can: {}",
                reach.join(", ")
            )
            .into());
        }
    }
    let mut asked = asked.to_vec();
    asked.sort();
    asked.dedup();
    Ok(asked)
}

/// The feature to turn on for `packages`: [`TRACING`] where cuda-staging is one of
/// them, else none: cargo refuses it where no package depends on cuda-staging
/// (`--package cuda-core`), and without cuda-staging's own tests nothing checks what
/// the spans record.
fn tracing(packages: &[String]) -> Option<&'static str> {
    packages
        .iter()
        .any(|p| p == "cuda-staging")
        .then_some(TRACING)
}

/// The test targets a run builds and runs: [`LIB_TARGET`] with `--lib-only`, else
/// [`ALL_TARGETS`].
fn targets(lib_only: bool) -> &'static [&'static str] {
    if lib_only {
        LIB_TARGET
    } else {
        ALL_TARGETS
    }
}

/// The test names every run leaves out, with `--skip`.
fn skipped() -> Vec<&'static str> {
    NOT_ON_SIMULATOR
        .iter()
        .map(|l| l.test)
        .chain(LEAKS_BY_DESIGN.iter().map(|l| l.test))
        .chain([SOAK_TEST, NO_DRIVER_TEST])
        .collect()
}

/// The markdown table per file of cargo-mutants' `outcomes.json`: caught, timed out,
/// missed, unviable, and the score, (caught + timed out) / viable.
fn table(outcomes_json: &str) -> Result<String> {
    let v: serde_json::Value =
        serde_json::from_str(outcomes_json).context("reading cargo-mutants' outcomes.json")?;
    let mut per_file: BTreeMap<String, [u32; 4]> = BTreeMap::new();
    for o in v["outcomes"].as_array().into_iter().flatten() {
        let Some(file) = o["scenario"]["Mutant"]["file"].as_str() else {
            continue; // the baseline
        };
        let slot = match o["summary"].as_str().unwrap_or("") {
            "CaughtMutant" => 0,
            "Timeout" => 1,
            "MissedMutant" => 2,
            "Unviable" => 3,
            other => return Err(format!("an outcome this table does not know: {other}").into()),
        };
        per_file.entry(file.to_owned()).or_default()[slot] += 1;
    }
    let mut out = String::from(
        "| file | caught | timed out | missed | unviable | score |\n|---|---|---|---|---|---|\n",
    );
    for (file, [caught, timeout, missed, unviable]) in per_file {
        let viable = caught + timeout + missed;
        let score = if viable == 0 {
            "-".to_owned()
        } else {
            format!(
                "{:.0}%",
                100.0 * f64::from(caught + timeout) / f64::from(viable)
            )
        };
        out.push_str(&format!(
            "| `{file}` | {caught} | {timeout} | {missed} | {unviable} | {score} |\n"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_files_exist() {
        for f in DEFAULT_FILES {
            assert!(project_root().join(f).is_file(), "{f} is not a file");
        }
    }

    #[test]
    fn the_table_counts_outcomes_per_file_and_scores_viable_ones() {
        let json = r#"{"outcomes": [
            {"scenario": "Baseline", "summary": "Success"},
            {"scenario": {"Mutant": {"file": "a.rs"}}, "summary": "CaughtMutant"},
            {"scenario": {"Mutant": {"file": "a.rs"}}, "summary": "Timeout"},
            {"scenario": {"Mutant": {"file": "a.rs"}}, "summary": "MissedMutant"},
            {"scenario": {"Mutant": {"file": "a.rs"}}, "summary": "CaughtMutant"},
            {"scenario": {"Mutant": {"file": "b.rs"}}, "summary": "Unviable"}
        ]}"#;
        let t = table(json).unwrap();
        assert!(t.contains("| `a.rs` | 2 | 1 | 1 | 0 | 75% |"), "{t}");
        assert!(t.contains("| `b.rs` | 0 | 0 | 0 | 1 | - |"), "{t}");
        let e = table(
            r#"{"outcomes": [{"scenario": {"Mutant": {"file": "a.rs"}}, "summary": "Odd"}]}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("Odd"), "{e}");
    }

    #[test]
    fn package_narrows_the_run_to_packages_that_reach_the_files_and_refuses_others() {
        let reach = vec![
            "benches".to_string(),
            "cuda-core".into(),
            "cuda-staging".into(),
        ];
        assert_eq!(chosen(reach.clone(), &[]).unwrap(), reach);
        let one = chosen(reach.clone(), &["cuda-core".into(), "cuda-core".into()]).unwrap();
        assert_eq!(one, ["cuda-core"]);
        let e = chosen(reach, &["xtask".into()]).unwrap_err().to_string();
        assert!(
            e.contains("--package xtask") && e.contains("cuda-core"),
            "{e}"
        );
    }

    #[test]
    fn tracing_is_turned_on_only_where_cuda_staging_is_built() {
        assert_eq!(tracing(&["cuda-core".into()]), None);
        let both = ["cuda-core".to_string(), "cuda-staging".into()];
        assert_eq!(tracing(&both), Some("cuda-staging/tracing"));
    }

    #[test]
    fn lib_only_runs_the_unit_tests_alone_and_otherwise_every_target_but_doctests() {
        assert_eq!(targets(true), ["--lib"]);
        assert_eq!(targets(false), ["--lib", "--bins", "--tests"]);
    }

    #[test]
    fn the_skipped_tests_include_every_left_out_one_and_the_soak() {
        let s = skipped();
        assert!(s.contains(&SOAK_TEST));
        for l in NOT_ON_SIMULATOR {
            assert!(s.contains(&l.test), "{}", l.test);
        }
    }
}
