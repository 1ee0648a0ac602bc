//! `cargo xtask candle [--bundle DIR]`: the candle example (`examples/candle`), built
//! and run here on a GPU machine, or built into a folder to run on one.
//!
//! The example is a crate of its own: candle's `cuda` feature compiles CUDA kernels
//! with `nvcc` and links cuBLAS, cuRAND and NVRTC. `examples/candle/install-cuda.sh`
//! installs them under `target/cuda-13.0` (run here when its `env.sh` is missing), and
//! the build runs with that `env.sh` sourced: what the toolkit is and where it lies is
//! decided in the script alone.
//!
//! On the GPU machine the program needs CUDA 13.0's cuBLAS and cuRAND beside the
//! driver: `run.sh` puts the toolkit's library folder on `LD_LIBRARY_PATH`
//! ([`TOOLKIT_LIBS`], or `CUDA_LIBS` when set).

use std::fs;
use std::path::{Path, PathBuf};

use xshell::cmd;

use crate::{probe, project_root, Context, Result};

/// Options of `cargo xtask candle`.
#[derive(clap::Args)]
pub struct Args {
    /// Build the example and DIR/run.sh into DIR, to copy to a GPU machine and run
    /// there (`bash DIR/run.sh`), instead of running it here.
    #[arg(long, value_name = "DIR")]
    bundle: Option<PathBuf>,
}

/// Where a GPU machine's CUDA 13.0 toolkit keeps cuBLAS and cuRAND.
const TOOLKIT_LIBS: &str = "/usr/local/cuda-13.0/targets/x86_64-linux/lib";

/// The example's target folder (as its `.cargo/config.toml` names it), kept between
/// builds: candle-kernels' nvcc build is then done once.
const TARGET_DIR: &str = "target/candle";

/// Runs `cargo xtask candle` with these options.
pub fn run(args: &Args) -> Result<()> {
    if args.bundle.is_none() {
        // Before the long build: without a GPU there is nothing to run it on.
        let info = probe::probe().map_err(|e| {
            format!(
                "no CUDA GPU found ({e}); to build the candle example for a GPU machine, use \
                 `cargo xtask candle --bundle DIR` and run DIR/run.sh there"
            )
        })?;
        println!("{}", info.line());
    }
    let exe = build()?;
    match &args.bundle {
        Some(dir) => bundle(&exe, dir),
        None => {
            let sh = xshell::Shell::new()?;
            let libs = library_path();
            cmd!(sh, "{exe}")
                .env("LD_LIBRARY_PATH", libs)
                .run()
                .context("the candle example")
        }
    }
}

/// Installs the toolkit when its `env.sh` is missing, then builds the example with it;
/// returns the executable's path.
fn build() -> Result<PathBuf> {
    let root = project_root();
    let env = root.join("target/cuda-13.0/env.sh");
    let sh = xshell::Shell::new()?;
    sh.change_dir(&root);
    if !env.exists() {
        cmd!(sh, "bash examples/candle/install-cuda.sh")
            .run()
            .context("installing CUDA 13.0's compiler and libraries")?;
    }
    // The target folder named outright: a CARGO_TARGET_DIR in the environment would
    // otherwise win over the example's .cargo/config.toml.
    let target = root.join(TARGET_DIR);
    let script = format!(
        "source '{}' && cd examples/candle && cargo build --release --locked --target-dir '{}'",
        env.display(),
        target.display()
    );
    cmd!(sh, "bash -c {script}")
        .run()
        .context("building examples/candle")?;
    Ok(target.join("release/candle-frames"))
}

/// `LD_LIBRARY_PATH` for running the example: the toolkit's libraries first.
fn library_path() -> String {
    let libs = std::env::var("CUDA_LIBS").unwrap_or_else(|_| TOOLKIT_LIBS.into());
    match std::env::var("LD_LIBRARY_PATH") {
        Ok(old) if !old.is_empty() => format!("{libs}:{old}"),
        _ => libs,
    }
}

/// The bundle: the executable and a run.sh that finds the toolkit's libraries.
fn bundle(exe: &Path, dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    fs::copy(exe, dir.join("candle-frames"))
        .with_context(|| format!("cannot copy {}", exe.display()))?;
    fs::write(dir.join("run.sh"), run_script())
        .with_context(|| format!("cannot write {}/run.sh", dir.display()))?;
    println!(
        "bundle written to {}: copy it to a GPU machine and run `bash {}/run.sh`",
        dir.display(),
        dir.display()
    );
    Ok(())
}

/// The bundle's run.sh.
fn run_script() -> String {
    format!(
        "#!/usr/bin/env bash\n\
         # The candle example (examples/candle), built by `cargo xtask candle --bundle`.\n\
         # It needs CUDA 13.0's cuBLAS and cuRAND: CUDA_LIBS names their folder\n\
         # [default: {TOOLKIT_LIBS}].\n\
         set -euo pipefail\n\
         here=$(cd \"$(dirname \"$0\")\" && pwd)\n\
         libs=${{CUDA_LIBS:-{TOOLKIT_LIBS}}}\n\
         if [ ! -e \"$libs/libcublas.so.13\" ]; then\n  \
           echo \"run.sh: no libcublas.so.13 in $libs; set CUDA_LIBS to CUDA 13.0's library folder\" >&2\n  \
           exit 1\n\
         fi\n\
         LD_LIBRARY_PATH=\"$libs${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\" exec \"$here/candle-frames\" \"$@\"\n"
    )
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_run_script_finds_the_libraries_or_says_where_they_were_looked_for() {
        let dir = xshell::Shell::new().unwrap().create_temp_dir().unwrap();
        let script = dir.path().join("run.sh");
        fs::write(&script, run_script()).unwrap();
        // A stand-in executable that prints its library path.
        let exe = dir.path().join("candle-frames");
        fs::write(&exe, "#!/bin/sh\necho \"LD=$LD_LIBRARY_PATH args=$*\"\n").unwrap();
        fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).unwrap();
        let libs = dir.path().join("libs");
        fs::create_dir(&libs).unwrap();
        let run = |libs: &Path| {
            std::process::Command::new("bash")
                .arg(&script)
                .arg("--x")
                .env("CUDA_LIBS", libs)
                .env("LD_LIBRARY_PATH", "/old")
                .output()
                .unwrap()
        };
        let out = run(&libs);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no libcublas.so.13 in"), "{err}");

        fs::write(libs.join("libcublas.so.13"), "").unwrap();
        let out = run(&libs);
        assert!(out.status.success());
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("LD={}:/old args=--x", libs.display())
        );
    }
}
