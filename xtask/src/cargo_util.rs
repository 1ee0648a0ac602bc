//! Shared machinery: running cargo and collecting the executables it builds, running
//! test executables with their output captured, libtest summaries, bundle folders.
//!
//! Commands are built with xshell, which quotes nothing by hand, echoes what it runs and
//! turns a non-zero exit into an error. The two that must be read while they run (cargo's
//! JSON messages, a test executable's output echoed as it comes) are turned into a
//! `std::process::Command` and spawned with a pipe: xshell only returns output at the end.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use cargo_metadata::{Message, MetadataCommand, PackageId, TargetKind};
use xshell::{Cmd, Shell};

use crate::{human_bytes, project_root, Context, Result};

/// The cargo running us (`$CARGO`), else `cargo` from `PATH`.
fn cargo_program() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// A shell whose commands run in the workspace root.
pub fn shell() -> Result<Shell> {
    let sh = Shell::new().context("cannot set up a shell")?;
    sh.change_dir(project_root());
    Ok(sh)
}

/// `cargo` as the one running us (`$CARGO`), in the shell's folder.
pub fn cargo(sh: &Shell) -> Cmd<'_> {
    sh.cmd(cargo_program())
}

/// The parts of `cargo metadata` we use.
pub struct Metadata {
    /// Where cargo puts build outputs (`CARGO_TARGET_DIR` or `<root>/target`).
    pub target_dir: PathBuf,
    /// Package id to (name, manifest folder).
    packages: HashMap<PackageId, (String, PathBuf)>,
    /// The members' test and example targets that need features (`required-features`).
    pub gated: Vec<GatedTarget>,
    /// The manifest folders of the members that may be published (the library
    /// crates: `benches` and `xtask` are `publish = false`).
    libraries: Vec<PathBuf>,
    /// Every member, with what it depends on.
    pub members: Vec<Member>,
}

/// A workspace member and the packages it depends on.
pub struct Member {
    /// The package's name, e.g. `cuda-staging`.
    pub name: String,
    /// Its manifest folder.
    pub dir: PathBuf,
    /// The names of its dependencies of every kind (normal, dev, build).
    pub depends_on: Vec<String>,
}

/// A test or example target that builds only with some features of its package on
/// (its `required-features`), so `cargo test --workspace` leaves it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatedTarget {
    /// The package's name, e.g. `cuda-staging`.
    pub package: String,
    /// `--test` or `--example`: how `cargo build` selects it.
    pub select: &'static str,
    /// The target's name, e.g. `route_tracing`.
    pub target: String,
    /// The features it requires.
    pub features: Vec<String>,
}

/// The `cargo build --release` argument lists that build every gated target, one per
/// package with the features its gated targets need (test targets as test harnesses,
/// examples as programs), in the packages' order.
pub fn gated_builds(gated: &[GatedTarget]) -> Vec<Vec<String>> {
    let mut packages: Vec<&str> = Vec::new();
    for g in gated {
        if !packages.contains(&g.package.as_str()) {
            packages.push(&g.package);
        }
    }
    packages
        .into_iter()
        .map(|package| {
            let mine: Vec<&GatedTarget> = gated.iter().filter(|g| g.package == package).collect();
            let mut features: Vec<&str> = mine
                .iter()
                .flat_map(|g| g.features.iter().map(String::as_str))
                .collect();
            features.sort_unstable();
            features.dedup();
            let mut args: Vec<String> = ["build", "--release", "-p", package, "--features"]
                .map(String::from)
                .into();
            args.push(features.join(","));
            for g in mine {
                args.push(g.select.to_string());
                args.push(g.target.clone());
            }
            args
        })
        .collect()
}

impl Metadata {
    /// The manifest folders of the members that may be published: the library
    /// crates.
    pub fn library_dirs(&self) -> impl Iterator<Item = &Path> {
        self.libraries.iter().map(PathBuf::as_path)
    }

    /// Runs `cargo metadata --no-deps` in the workspace root.
    pub fn load() -> Result<Metadata> {
        let meta = MetadataCommand::new()
            .cargo_path(cargo_program())
            .current_dir(project_root())
            .no_deps()
            .exec()
            .context("cargo metadata")?;
        let mut gated = Vec::new();
        for p in &meta.packages {
            for t in p.targets.iter().filter(|t| !t.required_features.is_empty()) {
                let select = if t.is_kind(TargetKind::Test) {
                    "--test"
                } else if t.is_kind(TargetKind::Example) {
                    "--example"
                } else {
                    continue;
                };
                gated.push(GatedTarget {
                    package: p.name.to_string(),
                    select,
                    target: t.name.clone(),
                    features: t.required_features.clone(),
                });
            }
        }
        let libraries = meta
            .packages
            .iter()
            .filter(|p| p.publish.as_ref().is_none_or(|r| !r.is_empty()))
            .filter_map(|p| p.manifest_path.parent())
            .map(|dir| dir.as_std_path().to_path_buf())
            .collect();
        let members = meta
            .packages
            .iter()
            .map(|p| Member {
                name: p.name.to_string(),
                dir: p
                    .manifest_path
                    .parent()
                    .unwrap_or(&p.manifest_path)
                    .as_std_path()
                    .to_path_buf(),
                depends_on: p.dependencies.iter().map(|d| d.name.clone()).collect(),
            })
            .collect();
        let packages = meta
            .packages
            .into_iter()
            .map(|p| {
                let dir = p.manifest_path.parent().unwrap_or(&p.manifest_path);
                (p.id, (p.name.to_string(), dir.as_std_path().to_path_buf()))
            })
            .collect();
        Ok(Metadata {
            target_dir: meta.target_directory.into_std_path_buf(),
            packages,
            gated,
            libraries,
            members,
        })
    }
}

/// One executable cargo built: a test harness, a bench or a binary.
#[derive(Debug, Clone)]
pub struct Artifact {
    /// The package's name, e.g. `cuda-core`.
    pub package: String,
    /// The package's folder (cargo runs tests from there).
    pub package_dir: PathBuf,
    /// The target's name, e.g. `cuda_core` (lib) or `soak` (tests/soak.rs).
    pub target: String,
    /// The target's kinds, e.g. `[Lib]`, `[Test]`, `[Bench]`, `[Bin]`.
    pub kinds: Vec<TargetKind>,
    /// Built in test mode (a libtest harness, or a bench built by `cargo bench`).
    pub test: bool,
    /// The built file.
    pub executable: PathBuf,
}

impl Artifact {
    /// The executable of a `compiler-artifact` message, or `None` for a library or a
    /// build script (no executable).
    fn from_message(artifact: &cargo_metadata::Artifact, meta: &Metadata) -> Option<Artifact> {
        let executable = artifact.executable.as_ref()?;
        let (package, package_dir) = match meta.packages.get(&artifact.package_id) {
            Some((name, dir)) => (name.clone(), dir.clone()),
            None => {
                // Fall back on the manifest's folder name.
                let dir = artifact.manifest_path.parent()?;
                (
                    dir.file_name()?.to_string(),
                    dir.as_std_path().to_path_buf(),
                )
            }
        };
        Some(Artifact {
            package,
            package_dir,
            target: artifact.target.name.clone(),
            kinds: artifact.target.kind.clone(),
            test: artifact.profile.test,
            executable: executable.as_std_path().to_path_buf(),
        })
    }

    /// A file name unique within the workspace: `cuda-core-lib`, `cuda-staging-test-soak`,
    /// `benches-bench-transfers`, `xtask-bin-xtask`.
    pub fn bundle_name(&self) -> String {
        match self.kinds.first() {
            Some(
                TargetKind::Lib
                | TargetKind::RLib
                | TargetKind::CDyLib
                | TargetKind::DyLib
                | TargetKind::StaticLib
                | TargetKind::ProcMacro,
            ) => format!("{}-lib", self.package),
            Some(kind) => format!("{}-{kind}-{}", self.package, self.target),
            None => format!("{}-unknown-{}", self.package, self.target),
        }
    }

    /// Whether one of the target's kinds is `kind`.
    pub fn is_kind(&self, kind: TargetKind) -> bool {
        self.kinds.contains(&kind)
    }

    /// A soak target: its name says `soak`; excluded from test runs unless asked for.
    pub fn is_soak(&self) -> bool {
        self.target.contains("soak")
    }

    /// Whether this is a test target that needs two or more GPUs (`*multi_gpu*`).
    pub fn is_multi_gpu(&self) -> bool {
        self.target.contains("multi_gpu")
    }

    /// Whether this is a test target that only the simulated driver can run
    /// (`*simulator_only*`): it reads the simulator's own entry points. `test-gpu
    /// --sim` runs it; a GPU machine's runs leave it out.
    pub fn is_simulator_only(&self) -> bool {
        self.target.contains("simulator_only")
    }
}

/// Runs `cargo <args> --message-format=json-render-diagnostics` (diagnostics and
/// progress still reach the terminal) and returns every executable it reports.
pub fn build(sh: &Shell, args: &[&str], meta: &Metadata) -> Result<Vec<Artifact>> {
    let cmd = cargo(sh)
        .args(args)
        .arg("--message-format=json-render-diagnostics");
    let shown = cmd.to_string();
    eprintln!("$ {shown}");
    let mut child = Command::from(cmd)
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {shown}"))?;
    let stdout = child.stdout.take().ok_or("cargo's stdout was not piped")?;
    let artifacts = artifacts(BufReader::new(stdout), meta);
    let status = child.wait().context("waiting for cargo")?;
    if !status.success() {
        return Err(format!("{shown} failed ({status})").into());
    }
    artifacts
}

/// The executables among cargo's JSON messages.
fn artifacts(messages: impl BufRead, meta: &Metadata) -> Result<Vec<Artifact>> {
    let mut found = Vec::new();
    for message in Message::parse_stream(messages) {
        if let Message::CompilerArtifact(a) = message.context("reading cargo's output")? {
            found.extend(Artifact::from_message(&a, meta));
        }
    }
    Ok(found)
}

/// Runs `cmd`, echoing its stdout as it comes and returning it with the exit status
/// (stderr passes straight through; a non-zero exit is not an error here). libtest
/// prints its results to stdout.
pub fn run_tee(cmd: Cmd<'_>) -> Result<(ExitStatus, String)> {
    let shown = cmd.to_string();
    let mut child = Command::from(cmd)
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {shown}"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or("a test executable's stdout was not piped")?;
    let mut captured = String::new();
    let mut out = std::io::stdout();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap_or_else(|e| format!("<unreadable output: {e}>"));
        let _ = writeln!(out, "{line}");
        captured.push_str(&line);
        captured.push('\n');
    }
    let status = child.wait().context("waiting for a test executable")?;
    Ok((status, captured))
}

/// The counts of libtest's `test result:` lines, summed over an executable's output.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TestCounts {
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed.
    pub failed: u64,
    /// Tests that were ignored (GPU tests without `--include-ignored`).
    pub ignored: u64,
    /// How many `test result:` lines there were.
    pub results: u64,
}

impl TestCounts {
    /// Parses every line `test result: ok. 3 passed; 0 failed; 1 ignored; ...`.
    pub fn parse(output: &str) -> TestCounts {
        let mut c = TestCounts::default();
        for line in output.lines() {
            let Some(rest) = line.trim_start().strip_prefix("test result:") else {
                continue;
            };
            c.results += 1;
            let words: Vec<&str> = rest.split_whitespace().collect();
            for pair in words.windows(2) {
                let Ok(n) = pair[0].parse::<u64>() else {
                    continue;
                };
                let label = pair[1].trim_end_matches([';', ',', '.']);
                match label {
                    "passed" => c.passed += n,
                    "failed" => c.failed += n,
                    "ignored" => c.ignored += n,
                    _ => {}
                }
            }
        }
        c
    }
}

impl fmt::Display for TestCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} ignored",
            self.passed, self.failed, self.ignored
        )
    }
}

/// Makes `dir` absolute and gives it a fresh, empty `bin/` (other contents stay).
pub fn prepare_bundle(dir: &Path) -> Result<PathBuf> {
    let dir = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir()?.join(dir)
    };
    let bin = dir.join("bin");
    if bin.exists() {
        fs::remove_dir_all(&bin).with_context(|| format!("cannot clear {}", bin.display()))?;
    }
    fs::create_dir_all(&bin).with_context(|| format!("cannot create {}", bin.display()))?;
    Ok(dir)
}

/// Copies an executable into `bin`, keeping its permissions.
pub fn copy_executable(src: &Path, bin: &Path, name: &str) -> Result<()> {
    let dst = bin.join(name);
    fs::copy(src, &dst)
        .with_context(|| format!("cannot copy {} to {}", src.display(), dst.display()))?;
    Ok(())
}

/// Builds the release `xtask` and copies it to `bin/xtask`, so that a bundle can probe.
pub fn bundle_xtask(sh: &Shell, bin: &Path, meta: &Metadata) -> Result<()> {
    let built = build(
        sh,
        &["build", "--release", "-p", "xtask", "--bin", "xtask"],
        meta,
    )?;
    let xtask = built
        .iter()
        .find(|a| a.is_kind(TargetKind::Bin) && a.target == "xtask" && !a.test)
        .ok_or("cargo build -p xtask reported no xtask executable")?;
    copy_executable(&xtask.executable, bin, "xtask")
}

/// Writes an executable script.
pub fn write_script(path: &Path, text: &str) -> Result<()> {
    fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o755))
            .with_context(|| format!("cannot make {} executable", path.display()))?;
    }
    Ok(())
}

/// Writes `script` to `bundle/run.sh` in a temp folder and runs it as the README
/// does, `bash bundle/run.sh --help` from that folder (a relative path, so the
/// script must find itself after changing directory), and checks that it exits 0
/// and prints its usage: the comment block without the `#`, from `first` (the
/// first line's start) through a line holding `middle` to `last` (the end), and no
/// code.
#[cfg(all(test, unix))]
pub fn check_script_help(script: &str, first: &str, middle: &str, last: &str) {
    let sh = Shell::new().unwrap();
    let tmp = sh.create_temp_dir().unwrap();
    fs::create_dir_all(tmp.path().join("bundle")).unwrap();
    write_script(&tmp.path().join("bundle/run.sh"), script).unwrap();
    let _dir = sh.push_dir(tmp.path());
    let out = sh
        .cmd("bash")
        .args(["bundle/run.sh", "--help"])
        .ignore_status()
        .quiet()
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{printed}");
    assert!(printed.starts_with(first), "{printed}");
    assert!(printed.contains(middle), "{printed}");
    assert!(printed.trim_end().ends_with(last), "{printed}");
    assert!(!printed.contains("set -u"), "{printed}");
}

/// Total size of the files under `path`.
pub fn dir_size(path: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(path) else {
        return fs::metadata(path).map_or(0, |m| m.len());
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// Prints the bundle's size and how to run it.
pub fn report_bundle(dir: &Path, files: usize, how: &str) {
    println!(
        "bundle: {} ({files} executable{} + bin/xtask + run.sh, {})",
        dir.display(),
        if files == 1 { "" } else { "s" },
        human_bytes(dir_size(&dir.join("bin")) + dir_size(&dir.join("run.sh")))
    );
    println!("{how}");
}

/// `git rev-parse --short HEAD`, with `-dirty` when the tree has changes; `unknown`
/// outside a git checkout.
pub fn git_commit() -> String {
    let Ok(sh) = shell() else {
        return "unknown".into();
    };
    let git = |args: &[&str]| {
        sh.cmd("git")
            .args(args)
            .quiet()
            .ignore_stderr()
            .read()
            .ok()
            .map(|s| s.trim().to_string())
    };
    let Some(head) = git(&["rev-parse", "--short", "HEAD"]) else {
        return "unknown".into();
    };
    match git(&["status", "--porcelain"]) {
        Some(s) if !s.is_empty() => format!("{head}-dirty"),
        _ => head,
    }
}

/// Words for a bash array: each quoted, space-separated.
pub fn sh_words(items: &[String]) -> String {
    items
        .iter()
        .map(|s| sh_quote(s))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Quotes a word for bash (single quotes).
pub fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:+@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtest_summary() {
        let out = "\
running 3 tests
test a ... ok
test b ... FAILED
test c ... ignored, needs a CUDA GPU

failures:
    b

test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s

running 2 tests
test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
";
        let c = TestCounts::parse(out);
        assert_eq!(
            c,
            TestCounts {
                passed: 3,
                failed: 1,
                ignored: 1,
                results: 2
            }
        );
        assert_eq!(c.to_string(), "3 passed, 1 failed, 1 ignored");
        assert_eq!(TestCounts::parse("segfault\n"), TestCounts::default());
    }

    /// A `compiler-artifact` message as cargo prints it (one line).
    fn artifact_line(package: &str, kind: &str, target: &str, test: bool, exe: &str) -> String {
        serde_json::json!({
            "reason": "compiler-artifact",
            "package_id": format!("path+file:///w/crates/{package}#0.1.0"),
            "manifest_path": format!("/w/crates/{package}/Cargo.toml"),
            "target": {
                "kind": [kind], "crate_types": [kind], "name": target,
                "src_path": format!("/w/crates/{package}/src/lib.rs"),
                "edition": "2021", "doc": true, "doctest": true, "test": true
            },
            "profile": {
                "opt_level": "3", "debuginfo": 0, "debug_assertions": false,
                "overflow_checks": false, "test": test
            },
            "features": [],
            "filenames": [exe],
            "executable": if exe.is_empty() { serde_json::Value::Null } else { exe.into() },
            "fresh": true
        })
        .to_string()
    }

    #[test]
    fn artifact_names() {
        let meta = Metadata {
            target_dir: "/t".into(),
            packages: HashMap::from([(
                PackageId {
                    repr: "path+file:///w/crates/cuda-core#0.1.0".to_string(),
                },
                (
                    "cuda-core".to_string(),
                    PathBuf::from("/w/crates/cuda-core"),
                ),
            )]),
            gated: Vec::new(),
            libraries: vec![PathBuf::from("/w/crates/cuda-core")],
            members: Vec::new(),
        };
        let stream = [
            artifact_line(
                "cuda-core",
                "lib",
                "cuda_core",
                true,
                "/t/release/deps/cuda_core-abc",
            ),
            // Not in the metadata: named after its manifest's folder.
            artifact_line(
                "cuda-staging",
                "test",
                "soak",
                true,
                "/t/release/deps/soak-abc",
            ),
            // A library built for linking has no executable.
            artifact_line("cuda-core", "lib", "cuda_core", false, ""),
            r#"{"reason":"build-finished","success":true}"#.to_string(),
            "a line that is not JSON".to_string(),
        ]
        .join("\n");
        let found = artifacts(stream.as_bytes(), &meta).unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        let a = &found[0];
        assert_eq!(a.bundle_name(), "cuda-core-lib");
        assert!(a.test && !a.is_soak() && !a.is_simulator_only() && a.is_kind(TargetKind::Lib));
        assert_eq!(a.package_dir, Path::new("/w/crates/cuda-core"));
        assert_eq!(a.executable, Path::new("/t/release/deps/cuda_core-abc"));
        let a = &found[1];
        assert_eq!(a.bundle_name(), "cuda-staging-test-soak");
        assert_eq!(a.package_dir, Path::new("/w/crates/cuda-staging"));
        assert!(a.is_soak());
        assert!(!a.is_simulator_only());
        let sim_only = Artifact {
            target: "simulator_only_drops".into(),
            ..a.clone()
        };
        assert!(sim_only.is_simulator_only() && !sim_only.is_soak());
    }

    #[test]
    fn gated_targets_build_per_package_with_their_features() {
        let gated = |package: &str, select, target: &str, features: &[&str]| GatedTarget {
            package: package.into(),
            select,
            target: target.into(),
            features: features.iter().map(|f| f.to_string()).collect(),
        };
        let builds = gated_builds(&[
            gated("cuda-staging", "--test", "route_tracing", &["tracing"]),
            gated("cuda-core", "--test", "bridge", &["cudarc"]),
            gated("cuda-staging", "--example", "tracing", &["tracing"]),
        ]);
        let words = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            builds,
            [
                words(
                    "build --release -p cuda-staging --features tracing \
                     --test route_tracing --example tracing"
                ),
                words("build --release -p cuda-core --features cudarc --test bridge"),
            ]
        );
        assert!(gated_builds(&[]).is_empty());
    }

    #[test]
    fn quoting() {
        assert_eq!(sh_quote("cuda-core-lib"), "cuda-core-lib");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
        assert_eq!(sh_quote(""), "''");
    }
}
