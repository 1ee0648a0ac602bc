//! `cargo xtask test-gpu`: the workspace's tests with the GPU tests included, here or
//! bundled for a GPU machine.
//!
//! Both modes build the test executables with `cargo test --workspace --release
//! --no-run` and run each one with `--include-ignored` (GPU tests are `#[ignore]`d so
//! that plain `cargo test` passes without a GPU). Doc tests are not run: they need
//! cargo and no GPU (GPU examples are `no_run`), so CI covers them.
//!
//! Test and example targets that need features of their package (`required-features`,
//! such as cuda-staging's `route_tracing` test and `tracing` example, built with its
//! `tracing` feature) are left out of that build; they are built beside it, one
//! `cargo build --release -p PACKAGE --features ...` per package, so that the other
//! tests still run the default build. After the tests, both modes run the
//! workspace's examples (each exits non-zero on a wrong result or without a GPU),
//! one result each in the summary, unless `--no-examples` is given.
//!
//! Soak tests (test targets whose name contains `soak`) are left out unless `--soak`
//! is given, which runs them after everything else; `--only soak` with `--soak` runs
//! only them. Multi-GPU tests (targets named `*multi_gpu*`) need two or more GPUs and
//! are left out unless `--multi-gpu` is given. Under `--sanitize`, the targets of
//! [`NOT_UNDER_SANITIZER`] are left out, each with its reason in the summary.
//! Simulator-only targets (named `*simulator_only*`: they call the simulated
//! driver's own entry points, such as its count of live objects) run with `--sim`
//! only; a run on a GPU leaves them out, and a bundle does not carry them.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use cargo_metadata::TargetKind;
use xshell::Shell;

use crate::cargo_util::{self, Artifact, Metadata, TestCounts};
use crate::{probe, Context, Result};

/// Options of `cargo xtask test-gpu`.
#[derive(clap::Args)]
pub struct Args {
    /// Run each test executable under `compute-sanitizer --tool memcheck --leak-check full`.
    #[arg(long)]
    sanitize: bool,
    /// Also run the soak tests (test targets named `*soak*`), after the others.
    #[arg(long)]
    pub(crate) soak: bool,
    /// Also run the multi-GPU tests (test targets named `*multi_gpu*`; they need two
    /// or more GPUs and fail with fewer).
    #[arg(long)]
    multi_gpu: bool,
    /// Run only the test executables and examples whose name contains PATTERN (names
    /// look like `cuda-core-lib`, `cuda-staging-test-soak`,
    /// `cuda-staging-example-tracing`).
    #[arg(long, value_name = "PATTERN")]
    pub(crate) only: Option<String>,
    /// Do not run the examples after the tests (a bundle still carries them in bin/;
    /// run.sh runs them unless given --no-examples, or built with it).
    #[arg(long)]
    pub(crate) no_examples: bool,
    /// Build the test executables, a release xtask and DIR/run.sh into DIR, to copy to
    /// a GPU machine and run there (`bash DIR/run.sh [--sanitize] [--soak]
    /// [--multi-gpu]`). The multi-GPU tests are always bundled; they run when
    /// `--multi-gpu` is given here or to run.sh.
    #[arg(long, value_name = "DIR")]
    bundle: Option<PathBuf>,
    /// Run against the simulated CUDA driver (crates/cuda-sim), built first: the GPU
    /// tests only, the multi-GPU ones with two simulated devices, with the tests that
    /// cannot run there left out (`test_sim::NOT_ON_SIMULATOR` says why). No GPU
    /// needed.
    #[arg(long, conflicts_with_all = ["bundle", "sanitize"])]
    pub(crate) sim: bool,
    /// With --sim: the seed of the simulator's per-operation delays (`CUDA_SIM_SEED`).
    #[arg(long, default_value_t = 0, requires = "sim")]
    pub(crate) seed: u64,
    /// With --sim: the largest delay before an operation runs, in microseconds
    /// (`CUDA_SIM_JITTER_US`; 0: none).
    #[arg(long, default_value_t = 0, requires = "sim", value_name = "US")]
    pub(crate) jitter_us: u64,
    /// With --sim: entry points of the simulator to hide from the loader, a comma
    /// list (e.g. `cuMemcpyBatchAsync_v2,cuMemcpyBatchAsync`), so that the library's
    /// fallbacks for a driver without them run (`test_sim::hide`).
    #[arg(long, value_delimiter = ',', requires = "sim", value_name = "NAMES")]
    pub(crate) hide: Vec<String>,
    /// Arguments for every test executable, e.g. a test name filter.
    #[arg(last = true, value_name = "TEST_ARGS")]
    pub(crate) test_args: Vec<String>,
}

/// Runs `cargo xtask test-gpu` with these options.
pub fn run(args: &Args) -> Result<()> {
    match &args.bundle {
        Some(dir) => bundle(args, dir),
        None => local(args),
    }
}

/// What a run needs: the test harnesses of the workspace, soak ones last, and its
/// examples, each with a unique bundle name.
pub(crate) struct Executables {
    pub(crate) tests: Vec<Artifact>,
    pub(crate) examples: Vec<Artifact>,
}

/// How a bundle's executables are built besides the release profile: without their
/// symbol tables. A bundle travels to the GPU machine with the working tree, and the
/// symbols were a quarter of its size (its 39 executables came to 64 MiB with them);
/// panic messages keep their file and line, backtraces lose the function names.
const BUNDLE_CONFIG: &str = "profile.release.strip=\"symbols\"";

/// Builds the test harnesses and examples: the workspace's default build (which
/// `cargo test` makes of the examples too), then the targets that need features;
/// for a bundle, stripped of symbols ([`BUNDLE_CONFIG`]).
pub(crate) fn executables(sh: &Shell, meta: &Metadata, for_bundle: bool) -> Result<Executables> {
    let config: &[&str] = if for_bundle {
        &["--config", BUNDLE_CONFIG]
    } else {
        &[]
    };
    let mut default = vec!["test", "--workspace", "--release", "--no-run"];
    default.extend_from_slice(config);
    let mut built = cargo_util::build(sh, &default, meta)?;
    for args in cargo_util::gated_builds(&meta.gated) {
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        args.extend_from_slice(config);
        built.extend(cargo_util::build(sh, &args, meta)?);
    }
    let mut tests = BTreeMap::new();
    let mut examples = BTreeMap::new();
    for a in built {
        // A criterion bench built in test mode is not a libtest harness.
        if a.test && !a.is_kind(TargetKind::Bench) {
            tests.insert(a.bundle_name(), a);
        } else if !a.test && a.is_kind(TargetKind::Example) && a.package != TOOL_PACKAGE {
            examples.insert(a.bundle_name(), a);
        }
    }
    let mut tests: Vec<Artifact> = tests.into_values().collect();
    tests.sort_by_key(|a| (a.is_soak(), a.bundle_name()));
    Ok(Executables {
        tests,
        examples: examples.into_values().collect(),
    })
}

/// The package whose examples are tools, not examples of the library to run: the
/// simulated driver's differential program takes the driver libraries to compare
/// (docs/simulator.md says how to run it on a GPU machine).
const TOOL_PACKAGE: &str = "cuda-sim";

/// Whether `--only` selects the executable `name`.
pub(crate) fn selected(args: &Args, name: &str) -> bool {
    args.only.as_ref().is_none_or(|p| name.contains(p))
}

fn local(args: &Args) -> Result<()> {
    let info = probe::probe().map_err(|e| {
        format!(
            "no CUDA GPU found here: {e}\n\
             Use --bundle DIR to build a folder to run on a GPU machine \
             (cargo xtask test-gpu --bundle DIR, then bash DIR/run.sh there)."
        )
    })?;
    println!("{}", info.line());
    let sanitizer = if args.sanitize {
        Some(find_sanitizer().ok_or(
            "--sanitize needs compute-sanitizer, which is neither on PATH nor in /usr/local/cuda/bin",
        )?)
    } else {
        None
    };

    let sh = cargo_util::shell()?;
    let meta = Metadata::load()?;
    let built = executables(&sh, &meta, false)?;
    let matched: Vec<&Artifact> = built
        .tests
        .iter()
        .filter(|a| args.soak || !a.is_soak())
        .filter(|a| args.multi_gpu || !a.is_multi_gpu())
        .filter(|a| !a.is_simulator_only())
        .filter(|a| selected(args, &a.bundle_name()))
        .collect();
    let examples: Vec<&Artifact> = built
        .examples
        .iter()
        .filter(|a| !args.no_examples && selected(args, &a.bundle_name()))
        .collect();
    if matched.is_empty() && examples.is_empty() {
        return Err("no test executable or example matches the selection".into());
    }
    let mut lines = Vec::new();
    let mut selected = Vec::new();
    for a in matched {
        match sanitizer_skip(&a.target) {
            Some(why) if args.sanitize => lines.push(format!(
                "{}: skipped under --sanitize ({why})",
                a.bundle_name()
            )),
            _ => selected.push(a),
        }
    }

    let (mut passed, mut failed) = (0, 0);
    for a in selected {
        let name = a.bundle_name();
        // As `cargo test` does: run from the package's folder.
        let _dir = sh.push_dir(&a.package_dir);
        let cmd = match &sanitizer {
            Some(san) => sh.cmd(san).args(SANITIZER_ARGS).arg(&a.executable),
            None => sh.cmd(&a.executable),
        }
        .arg("--include-ignored")
        .args(&args.test_args)
        .env("CARGO_MANIFEST_DIR", &a.package_dir);
        println!("===== {name}: {cmd}");
        let (status, output) = cargo_util::run_tee(cmd)?;
        let (line, counts) = summary_line(&name, status.code(), &output);
        passed += counts.passed;
        failed += counts.failed;
        lines.push(line);
    }
    for a in examples {
        let name = a.bundle_name();
        let _dir = sh.push_dir(&a.package_dir);
        let cmd = match &sanitizer {
            Some(san) => sh.cmd(san).args(SANITIZER_ARGS).arg(&a.executable),
            None => sh.cmd(&a.executable),
        };
        println!("===== {name}: {cmd}");
        let (status, _) = cargo_util::run_tee(cmd)?;
        let ok = status.success();
        lines.push(example_line(&name, status.code()));
        if ok {
            passed += 1;
        } else {
            failed += 1;
        }
    }
    println!("\n== summary ({})", info.line());
    for l in &lines {
        println!("{l}");
    }
    println!("TOTAL: {passed} passed, {failed} failed");
    if failed > 0 {
        return Err(format!("{failed} test(s) failed").into());
    }
    Ok(())
}

/// An example's summary line: it passes when it exits 0 (the same words as run.sh's).
pub(crate) fn example_line(name: &str, code: Option<i32>) -> String {
    match code {
        Some(0) => format!("{name}: example passed"),
        Some(c) => format!("{name}: example FAILED (exit status {c})"),
        None => format!("{name}: example FAILED (killed by a signal)"),
    }
}

/// memcheck with a full leak check. Failed API calls are not reported: several
/// tests provoke them on purpose (out of memory, invalid pointers) and check the
/// error values returned; memory errors and leaks still fail the run.
const SANITIZER_ARGS: [&str; 8] = [
    "--tool",
    "memcheck",
    "--leak-check",
    "full",
    "--report-api-errors",
    "no",
    "--error-exitcode",
    "1",
];

/// Test targets (by a part of their name) that `--sanitize` leaves out, and why.
/// run.sh gets the same list.
const NOT_UNDER_SANITIZER: [(&str, &str); 2] = [
    (
        "no_device",
        "it hides every device from a child process; compute-sanitizer drops CUDA_VISIBLE_DEVICES",
    ),
    (
        "faults",
        "its GPU faults are deliberate: memcheck reports each one as an error and handles \
         the faulting kernel itself, so the driver's own fault that the tests check never comes",
    ),
];

/// Why `--sanitize` leaves the test target `target` out, if it does.
fn sanitizer_skip(target: &str) -> Option<&'static str> {
    NOT_UNDER_SANITIZER
        .iter()
        .find(|(part, _)| target.contains(part))
        .map(|&(_, why)| why)
}

fn find_sanitizer() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("compute-sanitizer"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        let p = PathBuf::from("/usr/local/cuda/bin/compute-sanitizer");
        p.is_file().then_some(p)
    })
}

/// One executable's summary line, and its counts with a non-zero exit that no failed
/// test explains (a crash, a sanitizer error) counted as one failure. The same rules
/// as run.sh's.
pub(crate) fn summary_line(name: &str, code: Option<i32>, output: &str) -> (String, TestCounts) {
    let mut counts = TestCounts::parse(output);
    let mut line = format!("{name}: {counts}");
    if let Some(errors) = output
        .lines()
        .rev()
        .find_map(|l| l.split("ERROR SUMMARY:").nth(1))
    {
        let _ = write!(line, "; sanitizer: {}", errors.trim());
    }
    // compute-sanitizer exits non-zero for a program that never calls CUDA (a
    // CPU-only test binary); with its tests passed that is not a failure.
    let no_cuda = output.contains("terminated before first instrumented API call");
    match code {
        Some(0) if counts.results == 0 => line.push_str(" (no libtest summary)"),
        Some(0) => {}
        Some(_) if no_cuda && counts.failed == 0 && counts.results > 0 => {
            line.push_str("; sanitizer: no CUDA call to check");
        }
        _ if counts.failed == 0 => {
            counts.failed = 1;
            let why = code.map_or("killed by a signal".into(), |c| format!("exit status {c}"));
            let _ = write!(
                line,
                "; {why} with no failed test (crash or sanitizer error): counted as 1 failed"
            );
        }
        _ => {}
    }
    (line, counts)
}

fn bundle(args: &Args, dir: &Path) -> Result<()> {
    let dir = cargo_util::prepare_bundle(dir)?;
    let bin = dir.join("bin");
    let sh = cargo_util::shell()?;
    let meta = Metadata::load()?;
    let Executables { tests, examples } = executables(&sh, &meta, true)?;
    let mut plain = Vec::new();
    let mut soak = Vec::new();
    let mut multi = Vec::new();
    let mut needs_cargo = Vec::new();
    // A simulator-only target needs what no real driver has: it stays behind.
    for a in tests.iter().filter(|a| !a.is_simulator_only()) {
        let name = a.bundle_name();
        cargo_util::copy_executable(&a.executable, &bin, &name)?;
        if uses_trybuild(&a.executable) {
            needs_cargo.push(name.clone());
        }
        if a.is_soak() {
            soak.push(name);
        } else if a.is_multi_gpu() {
            multi.push(name);
        } else {
            plain.push(name);
        }
    }
    // cuda-sim's own tests open the simulator beside them (its `sim_path`).
    if let Some(sim) = tests.iter().find_map(|a| simulator_beside(&a.executable)) {
        std::fs::copy(&sim, bin.join(SIMULATOR))
            .with_context(|| format!("cannot copy {} into the bundle", sim.display()))?;
    }
    let mut example_names = Vec::new();
    for a in &examples {
        let name = a.bundle_name();
        cargo_util::copy_executable(&a.executable, &bin, &name)?;
        example_names.push(name);
    }
    cargo_util::bundle_xtask(&sh, &bin, &meta)?;
    let script = run_script(&RunScript {
        commit: cargo_util::git_commit(),
        sanitize: args.sanitize,
        soak: args.soak,
        multi_gpu: args.multi_gpu,
        examples: !args.no_examples,
        only: args.only.clone().unwrap_or_default(),
        tests: plain,
        soak_tests: soak,
        multi_gpu_tests: multi,
        example_names,
        needs_cargo,
        test_args: args.test_args.clone(),
    });
    cargo_util::write_script(&dir.join("run.sh"), &script)?;
    cargo_util::report_bundle(
        &dir,
        tests.len() + examples.len(),
        &format!(
            "on a GPU machine: bash {}/run.sh [--sanitize] [--soak] [--multi-gpu] [--no-examples] [--only PATTERN] [-- TEST_ARGS]\n\
             examples: {}\n\
             logs go to $OUT (tests.log, tests-summary.txt) when OUT is set, else to {0}/logs",
            dir.display(),
            examples
                .iter()
                .map(|a| format!("bin/{}", a.bundle_name()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    Ok(())
}

/// The simulated driver's file name (`crates/cuda-sim`'s cdylib).
const SIMULATOR: &str = "libcuda_sim.so";

/// The simulator built beside a test executable (`deps/`) or one folder up, where
/// cuda-sim's tests look for it; `None` where the workspace build made none.
fn simulator_beside(exe: &Path) -> Option<PathBuf> {
    let dir = exe.parent()?;
    [dir.join(SIMULATOR), dir.join("..").join(SIMULATOR)]
        .into_iter()
        .find(|p| p.is_file())
}

/// Whether a test executable links trybuild, which runs cargo: such a test cannot
/// pass on a machine without cargo, so run.sh skips it there (CI runs it).
///
/// Looks for the crate's source path (`.../trybuild-1.0.x/src/...`, kept in panic
/// locations). The needle is put together at run time so that this binary does not
/// match itself.
fn uses_trybuild(exe: &Path) -> bool {
    let mut needle = b"trybuild".to_vec();
    needle.push(std::hint::black_box(b'-'));
    std::fs::read(exe).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
}

struct RunScript {
    commit: String,
    sanitize: bool,
    soak: bool,
    multi_gpu: bool,
    /// Run the examples after the tests.
    examples: bool,
    only: String,
    tests: Vec<String>,
    soak_tests: Vec<String>,
    multi_gpu_tests: Vec<String>,
    example_names: Vec<String>,
    needs_cargo: Vec<String>,
    test_args: Vec<String>,
}

fn run_script(s: &RunScript) -> String {
    RUN_SH
        .replace("@COMMIT@", &s.commit)
        .replace("@SANITIZE@", if s.sanitize { "1" } else { "0" })
        .replace("@SOAK@", if s.soak { "1" } else { "0" })
        .replace("@MULTI@", if s.multi_gpu { "1" } else { "0" })
        .replace("@EXAMPLES_ON@", if s.examples { "1" } else { "0" })
        .replace("@EXAMPLES@", &cargo_util::sh_words(&s.example_names))
        .replace("@MULTI_TESTS@", &cargo_util::sh_words(&s.multi_gpu_tests))
        .replace("@ONLY@", &cargo_util::sh_quote(&s.only))
        .replace("@TESTS@", &cargo_util::sh_words(&s.tests))
        .replace("@SOAK_TESTS@", &cargo_util::sh_words(&s.soak_tests))
        .replace("@NEEDS_CARGO@", &cargo_util::sh_words(&s.needs_cargo))
        .replace("@TEST_ARGS@", &cargo_util::sh_words(&s.test_args))
        .replace("@NO_SANITIZE@", &no_sanitize_words())
}

/// [`NOT_UNDER_SANITIZER`] as run.sh's `NO_SANITIZE` words, `PART=WHY` each.
fn no_sanitize_words() -> String {
    let words: Vec<String> = NOT_UNDER_SANITIZER
        .iter()
        .map(|(part, why)| format!("{part}={why}"))
        .collect();
    cargo_util::sh_words(&words)
}

/// The bundle's run.sh, with `@NAME@` placeholders filled in by `run_script`.
const RUN_SH: &str = include_str!("test_gpu/run.sh.in");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulator_is_found_beside_a_test_or_one_folder_up_and_nowhere_else() {
        let root = std::env::temp_dir().join(format!("xtask-sim-{}", std::process::id()));
        let deps = root.join("deps");
        std::fs::create_dir_all(&deps).unwrap();
        let exe = deps.join("detections-0123");
        assert_eq!(simulator_beside(&exe), None);
        std::fs::write(root.join(SIMULATOR), b"up").unwrap();
        assert_eq!(
            simulator_beside(&exe),
            Some(deps.join("..").join(SIMULATOR))
        );
        std::fs::write(deps.join(SIMULATOR), b"beside").unwrap();
        assert_eq!(simulator_beside(&exe), Some(deps.join(SIMULATOR)));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn summary_lines() {
        let ok = "test result: ok. 4 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n";
        let (line, c) = summary_line("cuda-core-lib", Some(0), ok);
        assert_eq!(line, "cuda-core-lib: 4 passed, 0 failed, 0 ignored");
        assert_eq!((c.passed, c.failed), (4, 0));

        let cpu_only = format!("{ok}========= Error: Target application terminated before first instrumented API call\n");
        let (line, c) = summary_line("cpu", Some(255), &cpu_only);
        assert_eq!(c.failed, 0);
        assert!(line.ends_with("sanitizer: no CUDA call to check"), "{line}");

        let san = format!("{ok}========= ERROR SUMMARY: 2 errors\n");
        let (line, c) = summary_line("x", Some(1), &san);
        assert_eq!(c.failed, 1);
        assert!(line.contains("sanitizer: 2 errors"), "{line}");
        assert!(line.contains("exit status 1"), "{line}");

        let (line, c) = summary_line("x", None, "running 3 tests\n");
        assert_eq!(c.failed, 1);
        assert!(line.contains("killed by a signal"), "{line}");

        let failed = "test result: FAILED. 1 passed; 2 failed; 0 ignored;\n";
        let (_, c) = summary_line("x", Some(101), failed);
        assert_eq!(c.failed, 2);
    }

    #[test]
    fn finds_trybuild() {
        let dir = std::env::temp_dir();
        let with = dir.join(format!("xtask-tb-{}", std::process::id()));
        let dash = std::hint::black_box('-');
        let path = format!("/registry/src/trybuild{dash}1.0.101/src/run.rs");
        std::fs::write(&with, format!("\x7fELF...{path}...")).unwrap();
        assert!(uses_trybuild(&with));
        std::fs::write(&with, "\x7fELF... uses trybuild, which needs cargo").unwrap();
        assert!(!uses_trybuild(&with));
        let _ = std::fs::remove_file(&with);
        assert!(!uses_trybuild(&dir.join("no such file")));
        // This very test binary must not count as one.
        assert!(!uses_trybuild(&std::env::current_exe().unwrap()));
    }

    #[test]
    fn script_lists_and_flags() {
        let s = run_script(&RunScript {
            commit: "abc1234".into(),
            sanitize: true,
            soak: false,
            multi_gpu: false,
            examples: true,
            only: String::new(),
            tests: vec!["cuda-core-lib".into(), "cuda-sys-lib".into()],
            soak_tests: vec!["cuda-staging-test-soak".into()],
            multi_gpu_tests: vec!["cuda-staging-test-multi_gpu".into()],
            example_names: vec!["cuda-staging-example-tracing".into()],
            needs_cargo: vec![],
            test_args: vec!["my filter".into()],
        });
        assert!(s.contains("TESTS=(cuda-core-lib cuda-sys-lib)\n"));
        assert!(s.contains("SOAK_TESTS=(cuda-staging-test-soak)\n"));
        assert!(s.contains("MULTI_TESTS=(cuda-staging-test-multi_gpu)\n"));
        assert!(s.contains("MULTI=0\n"));
        assert!(s.contains("EXAMPLES=(cuda-staging-example-tracing)\n"));
        assert!(s.contains("EXAMPLES_ON=1\n"));
        assert!(s.contains("--no-examples) EXAMPLES_ON=0 ;;"));
        assert!(s.contains("SANITIZE=1\n"));
        assert!(s.contains("ONLY=''\n"));
        assert!(s.contains("ARGS=('my filter')\n"));
        for p in [
            "@COMMIT@",
            "@SANITIZE@",
            "@SOAK@",
            "@MULTI@",
            "@MULTI_TESTS@",
            "@EXAMPLES@",
            "@EXAMPLES_ON@",
            "@ONLY@",
            "@TESTS@",
            "@NEEDS_CARGO@",
            "@NO_SANITIZE@",
        ] {
            assert!(!s.contains(p), "{p} was left");
        }
    }

    /// `bash DIR/run.sh --help` from another folder prints the usage (the script
    /// changes into its own folder first, so it must not look for itself by `$0`).
    #[cfg(unix)]
    #[test]
    fn help_prints_the_usage_from_any_folder() {
        let s = run_script(&RunScript {
            commit: "abc1234".into(),
            sanitize: false,
            soak: false,
            multi_gpu: false,
            examples: true,
            only: String::new(),
            tests: vec!["cuda-core-lib".into()],
            soak_tests: vec![],
            multi_gpu_tests: vec![],
            example_names: vec![],
            needs_cargo: vec![],
            test_args: vec![],
        });
        cargo_util::check_script_help(
            &s,
            "Generated by `cargo xtask test-gpu --bundle` at commit abc1234",
            "--sanitize      run each executable",
            "\"TOTAL: N passed, M failed\"; the exit status is 0 only when nothing failed.",
        );
    }

    #[test]
    fn the_sanitizer_leaves_out_the_device_hiding_and_the_fault_tests_and_says_why() {
        assert!(sanitizer_skip("no_device").is_some());
        assert!(sanitizer_skip("faults").is_some_and(|why| why.contains("deliberate")));
        for target in ["gpu", "gpu_driver_error", "ring", "lib", "soak"] {
            assert_eq!(sanitizer_skip(target), None, "{target}");
        }
        // run.sh gets the same list, one `PART=WHY` word each, and skips by it.
        let s = run_script(&RunScript {
            commit: "abc1234".into(),
            sanitize: true,
            soak: false,
            multi_gpu: false,
            examples: true,
            only: String::new(),
            tests: vec!["cuda-staging-test-faults".into()],
            soak_tests: vec![],
            multi_gpu_tests: vec![],
            example_names: vec![],
            needs_cargo: vec![],
            test_args: vec![],
        });
        let line = s
            .lines()
            .find(|l| l.starts_with("NO_SANITIZE=("))
            .expect("a NO_SANITIZE line");
        assert!(line.contains("'no_device=it hides every device"), "{line}");
        assert!(
            line.contains("'faults=its GPU faults are deliberate"),
            "{line}"
        );
        assert!(s.contains("skipped under --sanitize ($why)"));
    }

    #[test]
    fn multi_gpu_bundles_run_the_multi_gpu_tests_and_say_so() {
        let s = run_script(&RunScript {
            commit: "abc1234".into(),
            sanitize: false,
            soak: false,
            multi_gpu: true,
            examples: true,
            only: String::new(),
            tests: vec!["cuda-staging-test-gpu".into()],
            soak_tests: vec![],
            multi_gpu_tests: vec!["cuda-staging-test-multi_gpu".into()],
            example_names: vec![],
            needs_cargo: vec![],
            test_args: vec![],
        });
        assert!(s.contains("MULTI=1\n"));
        assert!(s.contains("MULTI_TESTS=(cuda-staging-test-multi_gpu)\n"));
        // run.sh adds them to what it runs, accepts --multi-gpu itself, and names the
        // setting in its summary.
        assert!(s.contains(r#"if [ "$MULTI" = 1 ]; then RUN+=("#));
        assert!(s.contains("--multi-gpu) MULTI=1 ;;"));
        assert!(s.contains("multi-gpu=$MULTI, examples=$EXAMPLES_ON)"));
    }
}
