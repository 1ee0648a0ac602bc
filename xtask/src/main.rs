//! Workspace automation, run as `cargo xtask <command>` (the matklad pattern).
//!
//! - `cargo xtask probe [--json]`: which CUDA GPU and driver this machine has.
//! - `cargo xtask test-gpu [--sanitize] [--soak] [--bundle DIR]`: the workspace's tests,
//!   GPU tests included, here or (with `--bundle`) as a folder to run on a GPU machine;
//!   with `--sim [--seed N] [--jitter-us US]`, the GPU tests on the simulated driver.
//! - `cargo xtask bench [--quick] [--bundle DIR] [--report PATH]`: the benchmarks
//!   (criterion's, and the executables that write records files), here or as a
//!   folder, rendered into `docs/measurements.{md,json}` and `docs/bandwidth.svg`;
//!   with `--ab REV [--cells PATTERN] [--rounds N]`, REV's build against the working
//!   tree's, alternating in ABBA rounds, with a verdict per cell (`--ab-report DIR`
//!   compares the rounds a bundle's `run.sh --ab` left).
//! - `cargo xtask msrv [--toolchain]`: whether the library crates' `rust-version` holds.
//! - `cargo xtask candle [--bundle DIR]`: the candle example (`examples/candle`, its own
//!   crate), built with CUDA 13.0's compiler from PyPI and run here, or bundled.
//!
//! Every command prints its error without a backtrace and exits non-zero on failure.

mod bench;
mod candle;
mod cargo_util;
mod msrv;
mod mutants;
mod probe;
mod render;
mod test_gpu;
mod test_sim;

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Errors are strings with their context folded in; they are printed, not inspected.
type Error = Box<dyn std::error::Error + Send + Sync>;
type Result<T, E = Error> = std::result::Result<T, E>;

/// Adds what was being done to an error, `anyhow`-style, without the dependency.
trait Context<T> {
    fn context(self, what: impl Display) -> Result<T>;
    fn with_context<D: Display>(self, what: impl FnOnce() -> D) -> Result<T>;
}

impl<T, E: Display> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl Display) -> Result<T> {
        self.map_err(|e| format!("{what}: {e}").into())
    }
    fn with_context<D: Display>(self, what: impl FnOnce() -> D) -> Result<T> {
        self.map_err(|e| format!("{}: {e}", what()).into())
    }
}

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "Workspace automation for cuda-staging"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CUDA GPU and driver found here; exit non-zero when there is none.
    Probe(probe::Args),
    /// Run the workspace's tests, GPU tests included (or bundle them for a GPU machine).
    TestGpu(test_gpu::Args),
    /// Run the benchmarks and render docs/measurements.md (or bundle them).
    Bench(bench::Args),
    /// Check that the library crates' rust-version holds (their dependencies' declared
    /// rust-versions; with --toolchain, a build with that Rust).
    Msrv(msrv::Args),
    /// Build the candle example (examples/candle) and run it here, or bundle it for a
    /// GPU machine.
    Candle(candle::Args),
    /// Run cargo-mutants on the code that keeps transfers safe, against the CPU tests
    /// and the GPU suite on the simulated driver (installed with `cargo install
    /// cargo-mutants --version 27.1.0 --locked`).
    Mutants(mutants::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Probe(args) => probe::run(&args),
        Command::TestGpu(args) if args.sim => test_sim::run(&args),
        Command::TestGpu(args) => test_gpu::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Msrv(args) => msrv::run(&args),
        Command::Candle(args) => candle::run(&args),
        Command::Mutants(args) => mutants::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: the folder above this crate's manifest.
///
/// Baked in at compile time, so it names the build machine's checkout; only commands
/// that build or render use it (a bundled `xtask probe` does not).
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// Reads a JSON file into `T`; the error names the file and what was wrong.
fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("cannot read {}", path.display()))
}

/// Today's UTC date as `YYYY-MM-DD`, and the UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_now() -> (String, String) {
    utc_stamps(std::time::SystemTime::now())
}

/// `t` as a UTC date `YYYY-MM-DD` and an RFC 3339 time `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_stamps(t: std::time::SystemTime) -> (String, String) {
    let time = humantime::format_rfc3339_seconds(t).to_string();
    let date = time.split_once('T').map_or(time.as_str(), |(d, _)| d);
    (date.to_string(), time)
}

/// A byte count for people: `512 B`, `147 KiB`, `4.69 MiB`, `64 MiB` (about three
/// significant digits, trailing zeros dropped).
///
/// Kept by hand: humansize prints a fixed number of decimals (`1.50 KiB`,
/// `146.48 KiB`) and bytesize one decimal everywhere (`147.0 KiB`, `4.7 MiB`), and the
/// generated tables use this style.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        return format!("{bytes} B");
    }
    let s = if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        use std::time::{Duration, UNIX_EPOCH};
        let day = |d: u64, s: u64| utc_stamps(UNIX_EPOCH + Duration::from_secs(d * 86_400 + s));
        assert_eq!(
            utc_stamps(UNIX_EPOCH),
            ("1970-01-01".into(), "1970-01-01T00:00:00Z".into())
        );
        assert_eq!(day(19_723, 0).0, "2024-01-01");
        assert_eq!(
            day(19_782, 3_661),
            ("2024-02-29".into(), "2024-02-29T01:01:01Z".into())
        );
        assert_eq!(day(19_782, 86_399).1, "2024-02-29T23:59:59Z");
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(4), "4 B");
        assert_eq!(human_bytes(1024), "1 KiB");
        assert_eq!(human_bytes(150_528), "147 KiB");
        assert_eq!(human_bytes(196_608), "192 KiB");
        assert_eq!(human_bytes(4_915_200), "4.69 MiB");
        assert_eq!(human_bytes(64 << 20), "64 MiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(150_000), "146 KiB");
        assert_eq!(human_bytes(1_000_000), "977 KiB");
    }
}
