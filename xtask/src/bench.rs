//! `cargo xtask bench`: run the criterion benchmarks of the `benches` package and render
//! them into `docs/` (see [`crate::render`]), here, through a bundle for a GPU
//! machine, or from results brought back from one.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use cargo_metadata::TargetKind;
use xshell::cmd;

use crate::cargo_util::{self, Metadata};
use crate::render::{self, Machine};
use crate::{probe, project_root, Context, Result};

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
    /// With --report: print the seed table and reading instead of writing docs/.
    #[arg(long, requires = "report")]
    print: bool,
    /// Shorter measurements: the benches see BENCH_QUICK=1 (with --bundle: run.sh's
    /// default).
    #[arg(long)]
    quick: bool,
    /// Where to write measurements.md, measurements.json and bandwidth.svg
    /// [default: the workspace's docs folder].
    #[arg(long, value_name = "DIR")]
    docs_dir: Option<PathBuf>,
    /// Arguments for the bench executables, e.g. a criterion filter such as `H2D/150528`.
    #[arg(last = true, value_name = "BENCH_ARGS")]
    bench_args: Vec<String>,
}

pub fn run(args: &Args) -> Result<()> {
    if let Some(dir) = &args.bundle {
        return bundle(args, dir);
    }
    if let Some(path) = &args.report {
        return report(args, path);
    }
    local(args)
}

fn docs_dir(args: &Args) -> PathBuf {
    args.docs_dir
        .clone()
        .unwrap_or_else(|| project_root().join("docs"))
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
    // Results older than this run are stale: render only what this run wrote.
    let started = SystemTime::now() - Duration::from_secs(1);
    let sh = cargo_util::shell()?;
    let mut cmd = cargo_util::cargo(&sh)
        .args(["bench", "-p", "benches"])
        .env("CRITERION_HOME", &home);
    if args.quick {
        cmd = cmd.env("BENCH_QUICK", "1");
    }
    if !args.bench_args.is_empty() {
        cmd = cmd.arg("--").args(&args.bench_args);
    }
    cmd.run()?;
    let records = render::load_criterion(&home, Some(started))?;
    if records.is_empty() {
        return Err(format!("the benches wrote no result under {}", home.display()).into());
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
    };
    let results = render::Results {
        back_to_back: records,
        scenarios: Vec::new(),
    };
    render::write_docs(&machine, &results, &docs_dir(args))
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
    render::write_docs(&machine, &results, &docs_dir(args))
}

/// The machine from `device.json` (written by `xtask probe --json`) and the commit from
/// `commit.txt` (written by run.sh), with fallbacks.
fn machine_from(results: &Path) -> Result<Machine> {
    let device = results.join("device.json");
    let v: Value = if device.is_file() {
        let text = fs::read_to_string(&device)
            .with_context(|| format!("cannot read {}", device.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", device.display()))?
    } else {
        eprintln!(
            "warning: no {}; the machine will show as unknown",
            device.display()
        );
        Value::Null
    };
    let field = |k: &str| v[k].as_str().unwrap_or("unknown").to_string();
    let commit = fs::read_to_string(results.join("commit.txt"))
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(cargo_util::git_commit);
    Ok(Machine {
        host: Machine::host_line(
            v["host_cpu"].as_str(),
            v["host_cores"].as_u64().map(|n| n as usize),
            v["device_count"].as_u64().map(|n| n as usize),
        ),
        device_name: field("device_name"),
        driver_version: field("driver_version"),
        date: field("date"),
        commit,
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
    let words = |items: &[String]| {
        items
            .iter()
            .map(|s| cargo_util::sh_quote(s))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let script = RUN_SH
        .replace("@COMMIT@", &cargo_util::git_commit())
        .replace("@QUICK@", if args.quick { "1" } else { "0" })
        .replace("@BENCHES@", &words(&names))
        .replace("@BENCH_ARGS@", &words(&args.bench_args));
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

const RUN_SH: &str = r#"#!/usr/bin/env bash
# Generated by `cargo xtask bench --bundle` at commit @COMMIT@; do not edit.
# Runs the criterion benchmarks on a machine with a CUDA GPU.
#
#   bash run.sh [--quick] [-- BENCH_ARGS...]
#
#   --quick      shorter measurements (the benches see BENCH_QUICK=1)
#   BENCH_ARGS   passed to every bench executable after --bench (e.g. a filter: H2D/150528)
#
# Results go to $OUT when OUT is set, else to results/ here: device.json, commit.txt,
# criterion.tar.gz and bench.log. Render them where the sources are with
#   cargo xtask bench --report <that folder>
set -u
cd "$(dirname "$0")" || exit 2

QUICK=@QUICK@
ARGS=(@BENCH_ARGS@)
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --) shift; ARGS=("$@"); break ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument: $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

BENCHES=(@BENCHES@)
RESULTS="${OUT:-$PWD/results}"
mkdir -p "$RESULTS" || exit 2
LOG="$RESULTS/bench.log"
: > "$LOG"

DEVICE=$(bin/xtask probe 2>&1)
PROBE_RC=$?
echo "$DEVICE" | tee -a "$LOG"
if [ "$PROBE_RC" -ne 0 ] || ! bin/xtask probe --json > "$RESULTS/device.json"; then
  echo "run.sh: no usable CUDA GPU on this machine (see above); nothing was measured" | tee -a "$LOG" >&2
  rm -f "$RESULTS/device.json"
  exit 1
fi
echo "@COMMIT@" > "$RESULTS/commit.txt"

export CRITERION_HOME="$RESULTS/criterion"
rm -rf "$CRITERION_HOME"
if [ "$QUICK" = 1 ]; then export BENCH_QUICK=1; else unset BENCH_QUICK; fi

LINES=()
FAILED=0
for name in ${BENCHES[@]+"${BENCHES[@]}"}; do
  echo "===== $name --bench ${ARGS[*]-}" | tee -a "$LOG"
  start=$SECONDS
  "bin/$name" --bench ${ARGS[@]+"${ARGS[@]}"} 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 0 ]; then
    LINES+=("$name: ok [$((SECONDS - start)) s]")
  else
    FAILED=$((FAILED + 1))
    LINES+=("$name: FAILED, exit status $rc [$((SECONDS - start)) s]")
  fi
done

COUNT=$(find "$CRITERION_HOME" -path '*/new/estimates.json' 2>/dev/null | wc -l)
if [ "$COUNT" -gt 0 ]; then
  if tar -czf "$RESULTS/criterion.tar.gz" -C "$RESULTS" criterion; then
    if [ -n "${OUT:-}" ]; then rm -rf "$CRITERION_HOME"; fi
  else
    echo "run.sh: could not pack $CRITERION_HOME" >&2
    FAILED=$((FAILED + 1))
  fi
fi

{
  echo
  echo "== summary (commit @COMMIT@, quick=$QUICK)"
  echo "$DEVICE"
  printf '%s\n' ${LINES[@]+"${LINES[@]}"}
  echo "results: $COUNT benchmarks in $RESULTS/criterion.tar.gz (+ device.json, commit.txt, bench.log)"
  if [ "$COUNT" -gt 0 ]; then
    echo
    bin/xtask bench --report "$RESULTS" --print 2>&1
  fi
  echo
  echo "render: cargo xtask bench --report <the folder holding these results>"
  echo "BENCH: $((${#BENCHES[@]} - FAILED)) ok, $FAILED failed"
} | tee -a "$LOG"
[ "$FAILED" -eq 0 ] && [ "$COUNT" -gt 0 ]
"#;

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
    }
}
