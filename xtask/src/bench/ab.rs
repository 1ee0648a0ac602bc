//! `cargo xtask bench --ab REV`: the bench executables built twice, at `REV` (A) and
//! at the working tree (B), into one bundle whose `run.sh --ab` measures a set of
//! cells with the two builds alternating in ABBA rounds; and `--ab-report`, which
//! turns the rounds into the comparison ([`super::verdict`]).
//!
//! `REV` is exported with `git archive` into the target folder and built there, in a
//! target folder of its own, so the user's checkout is never touched. Its benches must know `BENCH_CELLS`
//! (`benches/src/cells.rs`); an older `REV` is refused before anything is built.
//!
//! The bundle: `bin/` (B's executables and the release xtask), `base/bin/` (A's),
//! `base/commit.txt` (A's commit), `run.sh` (B's commit baked in). Results:
//! `ab/{a,b}/r<round>/{criterion,records}` while it runs, then `ab.md`, `ab.json`
//! and `ab-rounds.tar.gz`.

use std::fs;
use std::path::{Path, PathBuf};

use cargo_metadata::TargetKind;
use serde::Serialize;
use xshell::{cmd, Shell};

use super::verdict::{self, Row, Summary};
use crate::cargo_util::{self, Artifact, Metadata};
use crate::{render, Context, Result};

/// The cells of a default A/B: back to back at 150528 and 4915200 B (the driver's
/// pageable copy, copy-in and resident), the frame loops after 2 and 16 ms of sleep
/// and beside busy neighbours at 1 MiB and 4915200 B, `tight-loop` at the three seed
/// shapes, four pipelines, the ring pipeline and the batch.
pub const DEFAULT_CELLS: &str = "back-to-back/*/150528/pageable,back-to-back/*/150528/copy-in,\
back-to-back/*/150528/resident,back-to-back/*/4915200/pageable,back-to-back/*/4915200/copy-in,\
back-to-back/*/4915200/resident,sleep-2ms/*/1048576,sleep-2ms/*/4915200,sleep-16ms/*/1048576,\
sleep-16ms/*/4915200,contended/*/1048576,contended/*/4915200,tight-loop/*/150528,\
tight-loop/*/196608,tight-loop/*/4915200,four-pipelines,pipeline,batch";

/// Rounds of a default A/B: each runs both builds, so 4 rounds give ABBAABBA.
pub const DEFAULT_ROUNDS: u32 = 4;

/// The file every A/B-capable revision has: its benches read `BENCH_CELLS`.
const CELLS_SOURCE: &str = "benches/src/cells.rs";

/// `rev` as a full commit id in the repository at `repo`, checked to have benches that
/// can run an A/B's cells. The error says what is wrong; nothing is built.
pub fn resolve(repo: &Path, rev: &str) -> Result<String> {
    let sh = Shell::new()?;
    sh.change_dir(repo);
    let spec = format!("{rev}^{{commit}}");
    let commit = cmd!(sh, "git rev-parse --verify --quiet {spec}")
        .quiet()
        .ignore_stderr()
        .read()
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            format!(
                "--ab {rev}: not a commit, branch or tag of the repository at {}; nothing was built",
                repo.display()
            )
        })?;
    let object = format!("{commit}:{CELLS_SOURCE}");
    if cmd!(sh, "git cat-file -e {object}")
        .quiet()
        .ignore_stderr()
        .run()
        .is_err()
    {
        return Err(format!(
            "--ab {rev} ({}): its benches predate BENCH_CELLS ({CELLS_SOURCE}), so they cannot \
             run the A/B's cells; compare with a commit that has it (the commit that added \
             `cargo xtask bench --ab` has 3f60382's library code); nothing was built",
            &commit[..commit.len().min(10)]
        )
        .into());
    }
    Ok(commit)
}

/// Exports `commit` with `git archive` into `dir` (emptied first).
fn export(sh: &Shell, commit: &str, dir: &Path) -> Result<()> {
    if dir.exists() {
        fs::remove_dir_all(dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tarball = dir.with_extension("tar");
    cmd!(sh, "git archive --format=tar -o {tarball} {commit}").run()?;
    // `-m`: the files take the time of extraction, not the commit's. With the
    // commit's time, cargo judged A's sources older than the last A build in
    // `ab-base` and handed back that build, another commit's, whenever the new A was
    // committed before the last A build ran (seen: `--ab 79a5b48` gave b732d76's
    // executables).
    let unpacked = cmd!(sh, "tar -xmf {tarball} -C {dir}").run();
    let _ = fs::remove_file(&tarball);
    unpacked?;
    Ok(())
}

/// The bench executables among `built`, as (bundle name, file), once each, by name.
fn bench_executables(built: &[Artifact]) -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for a in built.iter().filter(|a| a.is_kind(TargetKind::Bench)) {
        let name = a.bundle_name();
        if !found.iter().any(|(n, _)| *n == name) {
            found.push((name, a.executable.clone()));
        }
    }
    found.sort();
    found
}

/// Builds A's bench executables: `commit` exported under the target folder and built
/// there, into a target folder of its own (`<target>/ab-base`).
///
/// Not the working tree's target folder: cargo names a workspace member's outputs by
/// its path inside the workspace and judges them fresh by the sources its last build
/// read, so in a shared folder A's build handed back B's executables (seen on the
/// H200: a deliberately slowed build compared with itself). Copy them out before B
/// is built all the same.
pub fn build_base(commit: &str, meta: &Metadata) -> Result<Vec<(String, PathBuf)>> {
    let sh = cargo_util::shell()?;
    let src = meta
        .target_dir
        .join("ab-src")
        .join(&commit[..12.min(commit.len())]);
    export(&sh, commit, &src)?;
    let base = Shell::new()?;
    base.change_dir(&src);
    base.set_var("CARGO_TARGET_DIR", meta.target_dir.join("ab-base"));
    let built = cargo_util::build(&base, &["bench", "-p", "benches", "--no-run"], meta)?;
    let found = bench_executables(&built);
    if found.is_empty() {
        return Err(format!("cargo bench -p benches at {commit} built no bench executable").into());
    }
    Ok(found)
}

/// Builds B's (the working tree's) bench executables.
pub fn build_head(meta: &Metadata) -> Result<Vec<(String, PathBuf)>> {
    let sh = cargo_util::shell()?;
    let built = cargo_util::build(&sh, &["bench", "-p", "benches", "--no-run"], meta)?;
    let found = bench_executables(&built);
    if found.is_empty() {
        return Err("cargo bench -p benches built no bench executable".into());
    }
    Ok(found)
}

/// Lays A's build out in `dir`: its executables in `base/bin/` with its commit in
/// `base/commit.txt` (what was there goes).
pub fn lay_out_base(dir: &Path, base_commit: &str, base: &[(String, PathBuf)]) -> Result<()> {
    let base_dir = dir.join("base");
    if base_dir.exists() {
        fs::remove_dir_all(&base_dir)
            .with_context(|| format!("cannot clear {}", base_dir.display()))?;
    }
    let base_bin = base_dir.join("bin");
    fs::create_dir_all(&base_bin)
        .with_context(|| format!("cannot create {}", base_bin.display()))?;
    for (name, file) in base {
        cargo_util::copy_executable(file, &base_bin, name)?;
    }
    fs::write(base_dir.join("commit.txt"), format!("{base_commit}\n"))
        .with_context(|| format!("cannot write {}", base_dir.display()))
}

/// Lays B's build out beside A's, in `dir/bin/`. Returns B's names (run.sh runs those;
/// an executable only A has is not compared).
pub fn lay_out_head(dir: &Path, head: &[(String, PathBuf)]) -> Result<Vec<String>> {
    let bin = dir.join("bin");
    for (name, file) in head {
        cargo_util::copy_executable(file, &bin, name)?;
    }
    Ok(head.iter().map(|(n, _)| n.clone()).collect())
}

/// What `ab/builds.txt` says: the two commits, the cells and the order run.sh ran.
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Builds {
    pub a: String,
    pub b: String,
    pub cells: String,
    pub order: String,
}

fn read_builds(text: &str) -> Builds {
    let mut b = Builds::default();
    for line in text.lines() {
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        let value = value.trim().to_string();
        match key {
            "a" => b.a = value,
            "b" => b.b = value,
            "cells" => b.cells = value,
            "order" => b.order = value,
            _ => {}
        }
    }
    b
}

/// `ab.json`: the builds, the rows and their summary.
#[derive(Serialize)]
struct Report<'a> {
    builds: &'a Builds,
    device: Option<serde_json::Value>,
    rounds: usize,
    same_within: f64,
    summary: Summary,
    rows: &'a [Row],
    missing: &'a [String],
}

/// `--ab-report DIR`: reads `DIR/ab/{a,b}/r<N>/`, writes `DIR/ab.md` and `DIR/ab.json`
/// and prints the table with the summary line last. Fails when no round has both
/// builds' results, or nothing could be compared.
pub fn report(dir: &Path) -> Result<()> {
    let ab = dir.join("ab");
    let builds = read_builds(&fs::read_to_string(ab.join("builds.txt")).unwrap_or_default());
    let mut rounds = Vec::new();
    for round in 1.. {
        let a = ab.join("a").join(format!("r{round}"));
        let b = ab.join("b").join(format!("r{round}"));
        if !a.is_dir() || !b.is_dir() {
            break;
        }
        rounds.push((load(&a)?, load(&b)?));
    }
    if rounds.is_empty() {
        return Err(format!(
            "--ab-report {}: no round of both builds under {}",
            dir.display(),
            ab.display()
        )
        .into());
    }
    let (rows, missing) = verdict::compare(&rounds);
    if rows.is_empty() {
        return Err(format!(
            "--ab-report {}: the two builds measured no cell in common",
            dir.display()
        )
        .into());
    }
    let device = fs::read_to_string(dir.join("device.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let table = verdict::table(&rows, &missing);
    let heading = format!(
        "# A/B: A = {}, B = {}\n\n{} rounds in the order {}; cells: {}\n\n\
         Each number is the median over the rounds; each B/A is the median of the rounds' \
         ratios, with their range. A row reads `same` when its B/A is within {:.0}% of 1 or \
         its range reaches 1. The control is the driver's own column in the same cell: when \
         it moved, so did the machine.\n\n",
        builds.a,
        builds.b,
        rounds.len(),
        builds.order,
        builds.cells,
        verdict::SAME_WITHIN * 100.0
    );
    fs::write(dir.join("ab.md"), format!("{heading}{table}"))
        .with_context(|| format!("cannot write {}", dir.join("ab.md").display()))?;
    let json = Report {
        builds: &builds,
        device,
        rounds: rounds.len(),
        same_within: verdict::SAME_WITHIN,
        summary: verdict::summary(&rows),
        rows: &rows,
        missing: &missing,
    };
    fs::write(dir.join("ab.json"), serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("cannot write {}", dir.join("ab.json").display()))?;
    print!("{table}");
    Ok(())
}

/// One build's results of one round.
fn load(dir: &Path) -> Result<verdict::Run> {
    let criterion = dir.join("criterion");
    let back_to_back = if criterion.is_dir() {
        render::load_criterion(&criterion, None)?
    } else {
        Vec::new()
    };
    let results = render::Results {
        back_to_back,
        scenarios: render::load_records(&dir.join("records"))?,
    };
    Ok(verdict::run_of(&results))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(sh: &Shell, args: &[&str]) -> String {
        sh.cmd("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .quiet()
            .ignore_stderr()
            .read()
            .unwrap()
    }

    #[test]
    fn a_rev_that_does_not_resolve_or_predates_the_cells_is_refused() {
        let sh = Shell::new().unwrap();
        let tmp = sh.create_temp_dir().unwrap();
        let repo = tmp.path();
        sh.change_dir(repo);
        git(&sh, &["init", "-q"]);
        fs::write(repo.join("README"), "old\n").unwrap();
        git(&sh, &["add", "README"]);
        git(&sh, &["commit", "-q", "-m", "before the cells"]);
        let old = git(&sh, &["rev-parse", "HEAD"]);
        fs::create_dir_all(repo.join("benches/src")).unwrap();
        fs::write(repo.join(CELLS_SOURCE), "// cells\n").unwrap();
        git(&sh, &["add", "."]);
        git(&sh, &["commit", "-q", "-m", "cells"]);
        let new = git(&sh, &["rev-parse", "HEAD"]);

        let e = resolve(repo, "no-such-branch").unwrap_err().to_string();
        assert!(
            e.contains("--ab no-such-branch: not a commit") && e.contains("nothing was built"),
            "{e}"
        );
        let e = resolve(repo, "HEAD~1").unwrap_err().to_string();
        assert!(
            e.contains("predate BENCH_CELLS") && e.contains(&old[..10]),
            "{e}"
        );
        assert_eq!(resolve(repo, "HEAD").unwrap(), new);
        assert_eq!(resolve(repo, "main").unwrap(), new);
        assert_eq!(resolve(repo, &new[..8]).unwrap(), new);
        // Nothing was built or exported: the repository holds what it held.
        let mut entries: Vec<String> = fs::read_dir(repo)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        entries.sort();
        assert_eq!(entries, [".git", "README", "benches"]);
    }

    #[test]
    fn an_exported_commit_is_newer_than_any_build_before_the_export() {
        let sh = Shell::new().unwrap();
        let tmp = sh.create_temp_dir().unwrap();
        let repo = tmp.path().join("repo");
        fs::create_dir_all(&repo).unwrap();
        sh.change_dir(&repo);
        git(&sh, &["init", "-q"]);
        fs::write(repo.join("lib.rs"), "// A\n").unwrap();
        git(&sh, &["add", "lib.rs"]);
        // Committed long before the export, as a base commit usually is.
        let old = "GIT_COMMITTER_DATE=2001-01-01T00:00:00Z";
        let (k, v) = old.split_once('=').unwrap();
        let _date = sh.push_env(k, v);
        git(&sh, &["commit", "-q", "-m", "A"]);
        let commit = git(&sh, &["rev-parse", "HEAD"]);
        let before = std::time::SystemTime::now() - std::time::Duration::from_secs(5);
        let dir = tmp.path().join("ab-src");
        export(&sh, &commit, &dir).unwrap();
        let mtime = fs::metadata(dir.join("lib.rs"))
            .unwrap()
            .modified()
            .unwrap();
        // With the commit's time (2001) cargo would judge a build made since then fresh
        // and hand back another commit's executables.
        assert!(mtime >= before, "{mtime:?} is older than the export");
        assert_eq!(fs::read_to_string(dir.join("lib.rs")).unwrap(), "// A\n");
    }

    #[test]
    fn the_two_builds_lie_side_by_side_with_their_commits() {
        let sh = Shell::new().unwrap();
        let tmp = sh.create_temp_dir().unwrap();
        let src = tmp.path().join("src");
        fs::create_dir_all(&src).unwrap();
        let exe = |name: &str, text: &str| {
            let p = src.join(name);
            cargo_util::write_script(&p, text).unwrap();
            (format!("benches-bench-{name}"), p)
        };
        let base = [
            exe("frames-a", "#!/bin/sh\necho A\n"),
            exe("transfers-a", "#!/bin/sh\n"),
        ];
        let head = [exe("frames-b", "#!/bin/sh\necho B\n")];
        let dir = cargo_util::prepare_bundle(&tmp.path().join("bundle")).unwrap();
        lay_out_base(&dir, "abc123", &base).unwrap();
        let names = lay_out_head(&dir, &head).unwrap();
        assert_eq!(names, ["benches-bench-frames-b"]);
        assert_eq!(
            fs::read_to_string(dir.join("base/commit.txt")).unwrap(),
            "abc123\n"
        );
        assert_eq!(
            fs::read_to_string(dir.join("base/bin/benches-bench-frames-a")).unwrap(),
            "#!/bin/sh\necho A\n"
        );
        assert!(dir.join("base/bin/benches-bench-transfers-a").is_file());
        assert_eq!(
            fs::read_to_string(dir.join("bin/benches-bench-frames-b")).unwrap(),
            "#!/bin/sh\necho B\n"
        );
        // Laid out again, A's folder holds only the new build.
        lay_out_base(&dir, "def456", &base[..1]).unwrap();
        assert!(!dir.join("base/bin/benches-bench-transfers-a").exists());
        assert_eq!(
            fs::read_to_string(dir.join("base/commit.txt")).unwrap(),
            "def456\n"
        );
    }

    #[test]
    fn the_report_compares_the_rounds_on_disk() {
        let sh = Shell::new().unwrap();
        let tmp = sh.create_temp_dir().unwrap();
        let dir = tmp.path();
        let ab = dir.join("ab");
        fs::create_dir_all(&ab).unwrap();
        fs::write(ab.join("builds.txt"), "a aaa\nb bbb\ncells x\norder ABBA\n").unwrap();
        let record = |column: &str, p50: f64| {
            format!(
                r#"{{"scenario": "sleep-2ms", "direction": "H2D", "bytes": 1048576,
                    "column": "{column}", "median_us": {p50}, "p99_us": {p50}, "cpu_us": {p50}}}"#
            )
        };
        for (side, copy_in) in [("a", 100.0), ("b", 150.0)] {
            for round in 1..=2 {
                let records = ab.join(side).join(format!("r{round}/records"));
                fs::create_dir_all(&records).unwrap();
                fs::write(
                    records.join("frames.json"),
                    format!(
                        r#"{{"records": [{}, {}]}}"#,
                        record("pageable", 200.0),
                        record("copy-in", copy_in + round as f64)
                    ),
                )
                .unwrap();
            }
        }
        report(dir).unwrap();
        let md = fs::read_to_string(dir.join("ab.md")).unwrap();
        assert!(md.starts_with("# A/B: A = aaa, B = bbb"), "{md}");
        assert!(md.contains("| sleep-2ms/H2D/1048576 | copy-in |"), "{md}");
        assert!(md.contains("slower 49%"), "{md}");
        let json: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(dir.join("ab.json")).unwrap()).unwrap();
        assert_eq!(json["rounds"], 2);
        assert_eq!(json["summary"]["latency"]["slower"], 1);
        assert_eq!(json["rows"][0]["column"], "copy-in");
        assert_eq!(json["rows"][0]["latency"]["reads"], "slower");

        // No round of both builds: an error, not an empty table.
        fs::remove_dir_all(ab.join("b")).unwrap();
        assert!(report(dir)
            .unwrap_err()
            .to_string()
            .contains("no round of both builds"));
    }

    #[test]
    fn builds_txt_reads_back() {
        let b = read_builds("a 3f60382\nb 1234abc-dirty\ncells sleep-2ms,batch\norder ABBA\n");
        assert_eq!(
            b,
            Builds {
                a: "3f60382".into(),
                b: "1234abc-dirty".into(),
                cells: "sleep-2ms,batch".into(),
                order: "ABBA".into()
            }
        );
    }
}
