//! `cargo xtask bench`: run the benchmarks of the `benches` package and render them
//! into `docs/` (see [`crate::render`]), here, through a bundle for a GPU machine, or
//! from results brought back from one.
//!
//! The benchmarks leave two kinds of results: criterion's folders under
//! `CRITERION_HOME`, and the records files that the other benchmark executables write
//! into `BENCH_RECORDS_DIR` (`<name>.json` each). Both variables are set for every run.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;

use cargo_metadata::TargetKind;
use xshell::cmd;

use crate::cargo_util::{self, Metadata};
use crate::render::{self, Machine};
use crate::{probe, project_root, read_json, Context, Result};

mod ab;
mod verdict;

/// Options of `cargo xtask bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Build the bench executables, a release xtask and DIR/run.sh into DIR, to copy to
    /// a GPU machine and run there (`bash DIR/run.sh [--quick]`).
    #[arg(long, value_name = "DIR", conflicts_with = "report")]
    bundle: Option<PathBuf>,
    /// Render results brought back from a bundle run: a folder holding device.json,
    /// criterion.tar.gz (or an unpacked criterion/ folder) and records/*.json.
    #[arg(long, value_name = "PATH")]
    report: Option<PathBuf>,
    /// With --report: print the table of common shapes, the reading and the scenario
    /// tables instead of writing docs/.
    #[arg(long, requires = "report")]
    print: bool,
    /// Render the documents again from a measurements.json [default:
    /// docs/measurements.json] without measuring, after a change of the renderer: the
    /// machine, date and commit stay those the file names.
    #[arg(long, value_name = "JSON", conflicts_with_all = ["bundle", "report"])]
    rerender: Option<Option<PathBuf>>,
    /// Shorter measurements: the benches see BENCH_QUICK=1 (with --bundle: run.sh's
    /// default).
    #[arg(long)]
    quick: bool,
    /// Where to write measurements.md, measurements.json and bandwidth.svg, and the
    /// crate docs' measurements-table.md [default: the workspace's docs folder, and
    /// crates/cuda-staging/docs for the table].
    #[arg(long, value_name = "DIR")]
    docs_dir: Option<PathBuf>,
    /// Compare REV (a commit, branch or tag: A) with the working tree (B): build the
    /// bench executables of both into one bundle, then (without --bundle, on a GPU
    /// machine) run `run.sh --ab` on it: the cells measured by both builds in
    /// alternating rounds, with a verdict per cell and column.
    #[arg(long, value_name = "REV", conflicts_with_all = ["report", "rerender", "ab_report"])]
    ab: Option<String>,
    /// With --ab: the cells to compare, a comma list of patterns (benches/src/cells.rs)
    /// [default: ab::DEFAULT_CELLS, about 4 minutes on the H200].
    #[arg(long, value_name = "PATTERN", requires = "ab")]
    cells: Option<String>,
    /// With --ab: rounds, each running both builds (ABBA order).
    #[arg(long, value_name = "N", requires = "ab", default_value_t = ab::DEFAULT_ROUNDS,
          value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Compare the rounds of an A/B run (what `run.sh --ab` left in a results folder):
    /// writes ab.md and ab.json there and prints the table.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["bundle", "report", "rerender"])]
    ab_report: Option<PathBuf>,
    /// Arguments for the bench executables, e.g. a criterion filter such as `H2D/150528`.
    #[arg(last = true, value_name = "BENCH_ARGS")]
    bench_args: Vec<String>,
}

/// Runs `cargo xtask bench` with these options.
pub fn run(args: &Args) -> Result<()> {
    if let Some(dir) = &args.ab_report {
        return ab::report(dir);
    }
    if let Some(rev) = &args.ab {
        return compare(args, rev);
    }
    if let Some(dir) = &args.bundle {
        return bundle(args, dir);
    }
    if let Some(path) = &args.report {
        return report(args, path);
    }
    if let Some(json) = &args.rerender {
        return rerender(args, json.as_deref());
    }
    local(args)
}

/// The table `cuda-staging`'s crate docs include, relative to the workspace root.
const CRATE_TABLE: &str = "crates/cuda-staging/docs/measurements-table.md";

fn docs_dir(args: &Args) -> PathBuf {
    args.docs_dir
        .clone()
        .unwrap_or_else(|| project_root().join("docs"))
}

/// Writes the documents where `args` says.
fn write_docs(args: &Args, machine: &Machine, results: &render::Results) -> Result<()> {
    let crate_table = match &args.docs_dir {
        Some(dir) => dir.join("measurements-table.md"),
        None => project_root().join(CRATE_TABLE),
    };
    render::write_docs(machine, results, &docs_dir(args), &crate_table)
}

/// `--rerender`: the documents from a measurements.json, without measuring.
fn rerender(args: &Args, json: Option<&Path>) -> Result<()> {
    let json = json.map_or_else(
        || project_root().join("docs/measurements.json"),
        Path::to_path_buf,
    );
    let text =
        fs::read_to_string(&json).with_context(|| format!("cannot read {}", json.display()))?;
    let (machine, results) =
        render::from_json(&text).with_context(|| format!("cannot read {}", json.display()))?;
    write_docs(args, &machine, &results)
}

fn local(args: &Args) -> Result<()> {
    let info = probe::probe().map_err(|e| {
        format!(
            "no CUDA GPU found: cargo xtask bench needs one ({e}).\n\
             Use --bundle DIR on this machine and run DIR/run.sh on a GPU machine, \
             then cargo xtask bench --report <results>."
        )
    })?;
    println!("{}", info.line());
    let meta = Metadata::load()?;
    let home = match std::env::var_os("CRITERION_HOME") {
        Some(h) => PathBuf::from(h),
        None => meta.target_dir.join("criterion"),
    };
    // Cleared so that only this run's records are rendered.
    let records_dir = meta.target_dir.join("bench-records");
    if records_dir.exists() {
        fs::remove_dir_all(&records_dir)
            .with_context(|| format!("cannot clear {}", records_dir.display()))?;
    }
    fs::create_dir_all(&records_dir)
        .with_context(|| format!("cannot create {}", records_dir.display()))?;
    // Results older than this run are stale: render only what this run wrote.
    let started = SystemTime::now() - Duration::from_secs(1);
    let sh = cargo_util::shell()?;
    let mut cmd = cargo_util::cargo(&sh)
        .args(["bench", "-p", "benches"])
        .env("CRITERION_HOME", &home)
        .env("BENCH_RECORDS_DIR", &records_dir);
    if args.quick {
        cmd = cmd.env("BENCH_QUICK", "1");
    }
    if !args.bench_args.is_empty() {
        cmd = cmd.arg("--").args(&args.bench_args);
    }
    let clock = Instant::now();
    let ran = cmd.run();
    println!("bench run took {}", whole_seconds(clock.elapsed()));
    ran?;
    let results = render::Results {
        back_to_back: render::load_criterion(&home, Some(started))?,
        scenarios: render::load_records(&records_dir)?,
    };
    if results.is_empty() {
        return Err(format!(
            "the benches wrote no result under {} or {}",
            home.display(),
            records_dir.display()
        )
        .into());
    }
    let machine = Machine {
        host: Machine::host_line(
            info.host_cpu.as_deref(),
            info.host_cores,
            Some(info.device_count),
        ),
        device_name: info.device_name,
        driver_version: info.driver_version,
        date: info.date,
        commit: cargo_util::git_commit(),
        gpus: Some(info.device_count),
    };
    write_docs(args, &machine, &results)
}

/// A duration for people, to the second: `3m 12s`.
fn whole_seconds(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

fn report(args: &Args, path: &Path) -> Result<()> {
    if !path.is_dir() {
        return Err(format!(
            "--report {}: not a folder (give the folder holding device.json and criterion.tar.gz)",
            path.display()
        )
        .into());
    }
    // The shell below runs in the workspace root, not where the path was given.
    let path =
        &std::path::absolute(path).with_context(|| format!("--report {}", path.display()))?;
    let machine = machine_from(path)?;
    let tarball = path.join("criterion.tar.gz");
    let sh = cargo_util::shell()?;
    let unpacked;
    let home = if tarball.is_file() {
        unpacked = sh.create_temp_dir()?;
        let tmp = unpacked.path();
        cmd!(sh, "tar -xzf {tarball} -C {tmp}").run()?;
        tmp.to_path_buf()
    } else if path.join("criterion").is_dir() {
        path.join("criterion")
    } else {
        // Perhaps a criterion home itself.
        path.to_path_buf()
    };
    let results = render::Results {
        back_to_back: render::load_criterion(&home, None)?,
        scenarios: render::load_records(&path.join("records"))?,
    };
    if results.is_empty() {
        return Err(format!(
            "no results under {} (expected criterion.tar.gz or criterion/, and records/*.json, there)",
            path.display()
        )
        .into());
    }
    if args.print {
        print!("{}", render::summary(&machine, &results));
        return Ok(());
    }
    write_docs(args, &machine, &results)
}

/// What a report takes from `device.json` (written by `xtask probe --json` from a
/// [`probe::DeviceInfo`]). Every field is optional, so that files written by older
/// probes still read; what is missing shows as unknown.
#[derive(Debug, Default, Deserialize)]
struct DeviceJson {
    device_name: Option<String>,
    driver_version: Option<String>,
    date: Option<String>,
    host_cpu: Option<String>,
    host_cores: Option<usize>,
    device_count: Option<usize>,
}

/// The machine from `device.json` and the commit from `commit.txt` (written by run.sh),
/// with fallbacks.
fn machine_from(results: &Path) -> Result<Machine> {
    let device = results.join("device.json");
    let v: DeviceJson = if device.is_file() {
        read_json(&device)?
    } else {
        eprintln!(
            "warning: no {}; the machine will show as unknown",
            device.display()
        );
        DeviceJson::default()
    };
    let known = |s: Option<String>| s.unwrap_or_else(|| "unknown".to_string());
    let commit = fs::read_to_string(results.join("commit.txt"))
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(cargo_util::git_commit);
    Ok(Machine {
        host: Machine::host_line(v.host_cpu.as_deref(), v.host_cores, v.device_count),
        device_name: known(v.device_name),
        driver_version: known(v.driver_version),
        date: known(v.date),
        commit,
        gpus: v.device_count,
    })
}

fn bundle(args: &Args, dir: &Path) -> Result<()> {
    let dir = cargo_util::prepare_bundle(dir)?;
    let bin = dir.join("bin");
    let sh = cargo_util::shell()?;
    let meta = Metadata::load()?;
    let built = cargo_util::build(&sh, &["bench", "-p", "benches", "--no-run"], &meta)?;
    let mut names: Vec<String> = Vec::new();
    for a in built.iter().filter(|a| a.is_kind(TargetKind::Bench)) {
        let name = a.bundle_name();
        if !names.contains(&name) {
            cargo_util::copy_executable(&a.executable, &bin, &name)?;
            names.push(name);
        }
    }
    if names.is_empty() {
        return Err("cargo bench -p benches built no bench executable".into());
    }
    names.sort();
    cargo_util::bundle_xtask(&sh, &bin, &meta)?;
    let script = run_script(
        &cargo_util::git_commit(),
        args.quick,
        &names,
        &args.bench_args,
    );
    cargo_util::write_script(&dir.join("run.sh"), &script)?;
    cargo_util::report_bundle(
        &dir,
        names.len(),
        &format!(
            "on a GPU machine: bash {}/run.sh [--quick] [-- BENCH_ARGS]\n\
             results go to $OUT when OUT is set, else to {0}/results; bring that folder back \
             and run: cargo xtask bench --report <folder>",
            dir.display()
        ),
    );
    Ok(())
}

/// `--ab REV`: both builds into one bundle (`--bundle DIR`, or `target/ab-bundle`),
/// then, without `--bundle`, `run.sh --ab` on this machine's GPU.
fn compare(args: &Args, rev: &str) -> Result<()> {
    let commit = ab::resolve(&project_root(), rev)?;
    let local = args.bundle.is_none();
    if local {
        probe::probe().map_err(|e| {
            format!(
                "no CUDA GPU found: cargo xtask bench --ab needs one ({e}).\n\
                 Use --ab {rev} --bundle DIR on this machine and run `DIR/run.sh --ab` on a \
                 GPU machine; nothing was built."
            )
        })?;
    }
    let meta = Metadata::load()?;
    let dir = match &args.bundle {
        Some(d) => d.clone(),
        None => meta.target_dir.join("ab-bundle"),
    };
    let dir = cargo_util::prepare_bundle(&dir)?;
    let base = ab::build_base(&commit, &meta)?;
    ab::lay_out_base(&dir, &commit, &base)?;
    let head = ab::build_head(&meta)?;
    let names = ab::lay_out_head(&dir, &head)?;
    let sh = cargo_util::shell()?;
    cargo_util::bundle_xtask(&sh, &dir.join("bin"), &meta)?;
    let script = RunScript {
        commit: &cargo_util::git_commit(),
        quick: args.quick,
        benches: &names,
        bench_args: &args.bench_args,
        cells: args.cells.as_deref().unwrap_or(ab::DEFAULT_CELLS),
        rounds: args.rounds,
    }
    .text();
    let run_sh = dir.join("run.sh");
    cargo_util::write_script(&run_sh, &script)?;
    cargo_util::report_bundle(
        &dir,
        names.len() + base.len(),
        &format!(
            "A = {rev} ({}) in base/bin, B = the working tree in bin\n\
             on a GPU machine: bash {}/run.sh --ab [--rounds N] [--cells PATTERN]",
            &commit[..10],
            dir.display()
        ),
    );
    if local {
        cmd!(sh, "bash {run_sh} --ab").run()?;
    }
    Ok(())
}

/// What the bundle's run.sh is made of.
struct RunScript<'a> {
    commit: &'a str,
    quick: bool,
    /// The bench executables, names under `bin/`.
    benches: &'a [String],
    bench_args: &'a [String],
    /// `--ab`'s default cells and rounds.
    cells: &'a str,
    rounds: u32,
}

impl RunScript<'_> {
    /// The script: [`RUN_SH`] with its placeholders filled in.
    fn text(&self) -> String {
        RUN_SH
            .replace("@COMMIT@", self.commit)
            .replace("@QUICK@", if self.quick { "1" } else { "0" })
            .replace("@BENCHES@", &cargo_util::sh_words(self.benches))
            .replace("@BENCH_ARGS@", &cargo_util::sh_words(self.bench_args))
            .replace("@AB_CELLS@", &cargo_util::sh_quote(self.cells))
            .replace("@AB_ROUNDS@", &self.rounds.to_string())
    }
}

/// The bundle's run.sh for these bench executables (names under `bin/`), with the
/// A/B's defaults.
fn run_script(commit: &str, quick: bool, benches: &[String], bench_args: &[String]) -> String {
    RunScript {
        commit,
        quick,
        benches,
        bench_args,
        cells: ab::DEFAULT_CELLS,
        rounds: ab::DEFAULT_ROUNDS,
    }
    .text()
}

/// The bundle's run.sh, with `@NAME@` placeholders filled in by `run_script`.
const RUN_SH: &str = include_str!("bench/run.sh.in");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_from_results() {
        let tmp = xshell::Shell::new().unwrap().create_temp_dir().unwrap();
        let dir = tmp.path();
        fs::write(
            dir.join("device.json"),
            r#"{"device_name":"NVIDIA H200","driver_version":"13.0","device_count":1,"date":"2026-01-02"}"#,
        )
        .unwrap();
        fs::write(dir.join("commit.txt"), "abc1234\n").unwrap();
        let m = machine_from(dir).unwrap();
        assert_eq!(m.device_name, "NVIDIA H200");
        assert_eq!(m.driver_version, "13.0");
        assert_eq!(m.date, "2026-01-02");
        assert_eq!(m.commit, "abc1234");
        assert_eq!(m.host, "1 GPU");

        // A whole probe's output, as run.sh writes it.
        let info = probe::DeviceInfo {
            device_name: "NVIDIA H200".into(),
            driver_version: "13.0".into(),
            device_count: 1,
            total_memory_bytes: 150_000_000_000,
            date: "2026-01-03".into(),
            timestamp: "2026-01-03T04:05:06Z".into(),
            host_cpu: Some("Xeon".into()),
            host_cores: Some(16),
        };
        fs::write(
            dir.join("device.json"),
            serde_json::to_string_pretty(&info).unwrap(),
        )
        .unwrap();
        let m = machine_from(dir).unwrap();
        assert_eq!(m.host, "Xeon, 16 cores, 1 GPU");
        assert_eq!(m.date, "2026-01-03");

        // No device.json: unknown machine; a broken one: an error naming it.
        fs::remove_file(dir.join("device.json")).unwrap();
        let m = machine_from(dir).unwrap();
        assert_eq!(
            (m.device_name.as_str(), m.host.as_str()),
            ("unknown", "unknown")
        );
        fs::write(dir.join("device.json"), r#"{"device_count": "one"}"#).unwrap();
        let e = machine_from(dir).unwrap_err().to_string();
        assert!(e.contains("device.json"), "{e}");
    }

    /// Stands in for the bundle's release xtask: answers the probe and the report.
    const FAKE_XTASK: &str = r#"#!/bin/sh
case "$*" in
  probe) echo "found: Fake GPU, driver 13.0, 1 device (device 0: 1 GiB)" ;;
  "probe --json") echo '{"device_name": "Fake GPU"}' ;;
  "bench --report "*" --print") echo "fake report of $3" ;;
  *) echo "fake xtask: unexpected arguments: $*" >&2; exit 2 ;;
esac
"#;

    /// Stands in for a bench executable: one criterion result and one records file,
    /// or (FAKE_WRITES=records) only the records file, or (FAKE_WRITES=none) nothing.
    const FAKE_BENCH: &str = r#"#!/bin/sh
[ "$1" = --bench ] && [ "$BENCH_QUICK" = 1 ] || exit 3
if [ "${FAKE_WRITES:-all}" = all ]; then
  mkdir -p "$CRITERION_HOME/H2D_64/pageable/new"
  echo '{}' > "$CRITERION_HOME/H2D_64/pageable/new/estimates.json"
fi
if [ "${FAKE_WRITES:-all}" != none ]; then
  echo '{"records": []}' > "$BENCH_RECORDS_DIR/fake.json"
fi
"#;

    /// A bundle of the fake executables and run.sh; runs it with OUT set and
    /// FAKE_WRITES as given, and returns the folder, what run.sh printed and whether
    /// it exited 0.
    fn run_fake_bundle(writes: &str) -> (xshell::TempDir, String, bool) {
        let sh = xshell::Shell::new().unwrap();
        let tmp = sh.create_temp_dir().unwrap();
        let bin = tmp.path().join("bin");
        fs::create_dir_all(&bin).unwrap();
        cargo_util::write_script(&bin.join("xtask"), FAKE_XTASK).unwrap();
        cargo_util::write_script(&bin.join("benches-bench-fake"), FAKE_BENCH).unwrap();
        let script = run_script("abc1234", true, &["benches-bench-fake".into()], &[]);
        for placeholder in ["@COMMIT@", "@QUICK@", "@BENCHES@", "@BENCH_ARGS@"] {
            assert!(!script.contains(placeholder), "{placeholder} was left");
        }
        let run_sh = tmp.path().join("run.sh");
        cargo_util::write_script(&run_sh, &script).unwrap();
        let out = sh
            .cmd("bash")
            .arg(&run_sh)
            .env("OUT", tmp.path().join("out"))
            .env("FAKE_WRITES", writes)
            .ignore_status()
            .quiet()
            .output()
            .unwrap();
        let printed = String::from_utf8_lossy(&out.stdout).into_owned();
        (tmp, printed, out.status.success())
    }

    /// Every file under `dir`, relative to it, sorted.
    fn files_under(dir: &Path) -> Vec<String> {
        let mut found = Vec::new();
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                found.extend(
                    files_under(&path)
                        .into_iter()
                        .map(|f| format!("{name}/{f}")),
                );
            } else {
                found.push(name);
            }
        }
        found.sort();
        found
    }

    #[cfg(unix)]
    #[test]
    fn run_sh_keeps_criterion_results_and_records_in_out() {
        let (tmp, printed, ok) = run_fake_bundle("all");
        assert!(ok, "{printed}");
        let out = tmp.path().join("out");
        // Few files, at most one folder down: what the GPU machine hands back.
        assert_eq!(
            files_under(&out),
            [
                "bench.log",
                "commit.txt",
                "criterion.tar.gz",
                "device.json",
                "records/fake.json"
            ]
        );
        assert_eq!(
            fs::read_to_string(out.join("commit.txt")).unwrap(),
            "abc1234\n"
        );
        assert!(printed.contains("benches-bench-fake: ok"), "{printed}");
        assert!(printed.contains("bench run took 0m "), "{printed}");
        assert!(
            printed.contains("results: 1 criterion benchmarks in ")
                && printed.contains(", 1 records file(s) in "),
            "{printed}"
        );
        assert!(printed.contains(&format!("fake report of {}", out.display())));
        assert!(printed.ends_with("BENCH: 1 ok, 0 failed\n"), "{printed}");
    }

    #[cfg(unix)]
    #[test]
    fn run_sh_succeeds_on_records_alone_and_fails_on_nothing() {
        let (tmp, printed, ok) = run_fake_bundle("records");
        assert!(ok, "{printed}");
        let files = files_under(&tmp.path().join("out"));
        assert_eq!(
            files,
            [
                "bench.log",
                "commit.txt",
                "device.json",
                "records/fake.json"
            ]
        );
        assert!(printed.contains("fake report of"), "{printed}");

        let (tmp, printed, ok) = run_fake_bundle("none");
        assert!(!ok, "{printed}");
        // No empty records folder is left behind.
        let files = files_under(&tmp.path().join("out"));
        assert_eq!(files, ["bench.log", "commit.txt", "device.json"]);
        assert!(!printed.contains("fake report of"), "{printed}");
    }

    /// `bash DIR/run.sh --help` from another folder prints the usage.
    #[cfg(unix)]
    #[test]
    fn help_prints_the_usage_from_any_folder() {
        let script = run_script("abc1234", false, &["benches-bench-fake".into()], &[]);
        cargo_util::check_script_help(
            &script,
            "Generated by `cargo xtask bench --bundle` at commit abc1234",
            "--quick      shorter measurements",
            "(or --ab-report, for an A/B)",
        );
    }

    /// Stands in for a bench executable of one build in an A/B bundle: logs which
    /// build ran with which settings, and leaves a records file where it is told to.
    const FAKE_AB_BENCH: &str = r#"#!/bin/sh
echo "@SIDE@ $BENCH_QUICK $BENCH_CELLS $(basename "$(dirname "$BENCH_RECORDS_DIR")")" >> "$FAKE_LOG"
echo '{"records": []}' > "$BENCH_RECORDS_DIR/fake.json"
"#;

    /// Stands in for the bundle's xtask in an A/B: the probe and the report.
    const FAKE_AB_XTASK: &str = r#"#!/bin/sh
case "$*" in
  probe) echo "found: Fake GPU" ;;
  "probe --json") echo '{"device_name": "Fake GPU"}' ;;
  "bench --ab-report "*) (ls "$3/ab/a"; ls "$3/ab/b") | tr '\n' ' '; echo; echo "A/B: fake summary" ;;
  *) echo "fake xtask: unexpected arguments: $*" >&2; exit 2 ;;
esac
"#;

    /// An A/B bundle of fake executables; runs `run.sh --ab ARGS` with OUT set and
    /// returns (the order log, what run.sh printed, its success, the out folder).
    fn run_fake_ab(args: &[&str]) -> (String, String, bool, xshell::TempDir) {
        let sh = xshell::Shell::new().unwrap();
        let tmp = sh.create_temp_dir().unwrap();
        let dir = tmp.path();
        for (bin, side) in [("bin", "B"), ("base/bin", "A")] {
            fs::create_dir_all(dir.join(bin)).unwrap();
            cargo_util::write_script(
                &dir.join(bin).join("benches-bench-fake"),
                &FAKE_AB_BENCH.replace("@SIDE@", side),
            )
            .unwrap();
        }
        fs::write(dir.join("base/commit.txt"), "aaaa111\n").unwrap();
        cargo_util::write_script(&dir.join("bin/xtask"), FAKE_AB_XTASK).unwrap();
        let script = RunScript {
            commit: "bbbb222",
            quick: false,
            benches: &["benches-bench-fake".into()],
            bench_args: &[],
            cells: "sleep-2ms/*/1048576,batch",
            rounds: 4,
        }
        .text();
        assert!(!script.contains("@AB_"), "a placeholder was left");
        cargo_util::write_script(&dir.join("run.sh"), &script).unwrap();
        let log = dir.join("order.log");
        let out = sh
            .cmd("bash")
            .arg(dir.join("run.sh"))
            .arg("--ab")
            .args(args)
            .env("OUT", dir.join("out"))
            .env("FAKE_LOG", &log)
            .ignore_status()
            .quiet()
            .output()
            .unwrap();
        (
            fs::read_to_string(&log).unwrap_or_default(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
            out.status.success(),
            tmp,
        )
    }

    #[cfg(unix)]
    #[test]
    fn run_sh_ab_alternates_the_builds_in_abba_rounds() {
        let (order, printed, ok, tmp) = run_fake_ab(&[]);
        assert!(ok, "{printed}");
        let cells = "sleep-2ms/*/1048576,batch";
        let expected: Vec<String> = [
            ("A", 1),
            ("B", 1),
            ("B", 2),
            ("A", 2),
            ("A", 3),
            ("B", 3),
            ("B", 4),
            ("A", 4),
        ]
        .iter()
        .map(|(side, round)| format!("{side} 1 {cells} r{round}"))
        .collect();
        assert_eq!(order.lines().collect::<Vec<_>>(), expected, "{printed}");
        assert!(printed.contains("order ABBAABBA"), "{printed}");
        assert!(printed.contains("A = aaaa111, B = bbbb222"), "{printed}");
        // The report saw four rounds of each build, and came last.
        assert!(printed.contains("r1 r2 r3 r4 r1 r2 r3 r4"), "{printed}");
        assert!(
            printed.trim_end().ends_with("A/B: fake summary"),
            "{printed}"
        );
        // What comes back: the rounds packed, no loose folders.
        let out = tmp.path().join("out");
        assert_eq!(
            files_under(&out),
            ["ab-rounds.tar.gz", "bench.log", "commit.txt", "device.json"]
        );

        let (order, printed, ok, _tmp) = run_fake_ab(&["--rounds", "3", "--cells", "batch"]);
        assert!(ok, "{printed}");
        let sides: Vec<&str> = order.lines().map(|l| &l[..1]).collect();
        assert_eq!(sides, ["A", "B", "B", "A", "A", "B"]);
        assert!(order.lines().all(|l| l.contains(" batch ")), "{order}");

        let (_, printed, ok, _tmp) = run_fake_ab(&["--rounds", "0"]);
        assert!(
            !ok && printed.contains("--rounds takes a whole number"),
            "{printed}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn run_sh_ab_needs_an_ab_bundle() {
        let (tmp, _, _) = run_fake_bundle("all");
        let out = xshell::Shell::new()
            .unwrap()
            .cmd("bash")
            .arg(tmp.path().join("run.sh"))
            .arg("--ab")
            .env("OUT", tmp.path().join("out2"))
            .ignore_status()
            .quiet()
            .output()
            .unwrap();
        let printed = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            printed.contains("cargo xtask bench --ab REV --bundle DIR"),
            "{printed}"
        );
    }

    #[test]
    fn whole_seconds_for_people() {
        assert_eq!(whole_seconds(Duration::from_millis(192_700)), "3m 12s");
        assert_eq!(whole_seconds(Duration::from_millis(900)), "0s");
    }
}
