//! The simulator's settings, read once from the environment (at the first call).
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `CUDA_SIM_DEVICES` | how many devices | 1 |
//! | `CUDA_SIM_DEVICE_MEMORY` | bytes per device (`K`, `M`, `G` suffixes) | 8G |
//! | `CUDA_SIM_SEED` | seed of the per-operation delays | 0 |
//! | `CUDA_SIM_JITTER_US` | the largest delay before an operation runs, µs | 0 |
//! | `CUDA_SIM_POISON` | poison queued downloads' page-locked destinations (`0` off) | on |
//! | `CUDA_SIM_FAULT` | `CODE@N`: the N-th call makes the device fail with CODE, stickily | none |
//! | `CUDA_SIM_TRACE` | print every operation as it runs (to stderr) | off |
//! | `CUDA_SIM_LEAK_REPORT` | at exit, append a line counting what the program left live to this file (`stderr`: there) | off |
//! | `CUDA_SIM_LEAK_EXIT_STATUS` | with the report on, a program that left anything live ends with this exit status | its own |
//! | `CUDA_VISIBLE_DEVICES` | as the driver reads it: which devices are seen, in order | all |

use std::env;
use std::path::PathBuf;

/// What the environment asked for.
#[derive(Clone, Debug)]
pub struct Config {
    /// Bytes of memory per device.
    pub device_memory: usize,
    /// Seed of the delays.
    pub seed: u64,
    /// Largest delay before an operation executes, in microseconds (0: none).
    pub jitter_us: u64,
    /// Whether page-locked download destinations are poisoned until the copy runs.
    pub poison: bool,
    /// A sticky fault to raise at a given call: (code, call number, 1-based).
    pub fault: Option<(u32, u64)>,
    /// Print each operation as it executes.
    pub trace: bool,
    /// The physical devices seen, in the order `CUDA_VISIBLE_DEVICES` lists them.
    pub visible: Vec<usize>,
    /// Where the leak report goes at exit (`crate::leaks`), if anywhere.
    pub leak_report: Option<ReportTo>,
    /// The exit status of a program that leaves anything live, when the report is on
    /// (`None`: the program's own).
    pub leak_exit_status: Option<i32>,
}

/// Where the leak report is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReportTo {
    /// Standard error (`CUDA_SIM_LEAK_REPORT=stderr`).
    Stderr,
    /// Appended to this file, one line per process.
    File(PathBuf),
}

/// The byte that poisons a queued download's destination.
pub const POISON_BYTE: u8 = 0xBD;

impl Config {
    /// Reads the environment. A malformed value is reported and aborts the process:
    /// a test tool that silently ignored its settings would prove nothing.
    pub fn from_env() -> Config {
        let devices = number("CUDA_SIM_DEVICES").unwrap_or(1) as usize;
        let device_memory = env::var("CUDA_SIM_DEVICE_MEMORY")
            .ok()
            .map(|v| parse_bytes(&v).unwrap_or_else(|| bad("CUDA_SIM_DEVICE_MEMORY", &v)))
            .unwrap_or(8 << 30);
        let fault = env::var("CUDA_SIM_FAULT")
            .ok()
            .filter(|v| !v.is_empty())
            .map(|v| parse_fault(&v).unwrap_or_else(|| bad("CUDA_SIM_FAULT", &v)));
        let visible = match env::var("CUDA_VISIBLE_DEVICES") {
            Ok(list) => parse_visible(&list, devices),
            Err(_) => (0..devices).collect(),
        };
        Config {
            device_memory,
            seed: number("CUDA_SIM_SEED").unwrap_or(0),
            jitter_us: number("CUDA_SIM_JITTER_US").unwrap_or(0),
            poison: env::var("CUDA_SIM_POISON").map_or(true, |v| v != "0"),
            fault,
            trace: env::var("CUDA_SIM_TRACE").is_ok_and(|v| v != "0" && !v.is_empty()),
            visible,
            leak_report: env::var_os("CUDA_SIM_LEAK_REPORT")
                .filter(|v| !v.is_empty())
                .map(|v| {
                    if v == "stderr" {
                        ReportTo::Stderr
                    } else {
                        ReportTo::File(PathBuf::from(v))
                    }
                }),
            leak_exit_status: number("CUDA_SIM_LEAK_EXIT_STATUS").map(|n| {
                i32::try_from(n)
                    .ok()
                    .filter(|&n| (1..=255).contains(&n))
                    .unwrap_or_else(|| bad("CUDA_SIM_LEAK_EXIT_STATUS", &n.to_string()))
            }),
        }
    }
}

fn number(var: &str) -> Option<u64> {
    let v = env::var(var).ok().filter(|v| !v.is_empty())?;
    Some(v.trim().parse().unwrap_or_else(|_| bad(var, &v)))
}

fn bad(var: &str, value: &str) -> ! {
    eprintln!("cuda-sim: cannot read {var}={value:?}");
    std::process::abort()
}

/// `4096`, `64K`, `512M`, `8G`.
pub fn parse_bytes(v: &str) -> Option<usize> {
    let v = v.trim();
    let (digits, shift) = match v.as_bytes().last()? {
        b'K' | b'k' => (&v[..v.len() - 1], 10),
        b'M' | b'm' => (&v[..v.len() - 1], 20),
        b'G' | b'g' => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    digits.parse::<usize>().ok()?.checked_mul(1 << shift)
}

/// `CODE@N`.
fn parse_fault(v: &str) -> Option<(u32, u64)> {
    let (code, at) = v.split_once('@')?;
    let at: u64 = at.trim().parse().ok()?;
    Some((code.trim().parse().ok()?, at.max(1)))
}

/// As the driver reads `CUDA_VISIBLE_DEVICES`: comma-separated ordinals, up to the
/// first one that is not a device (the rest are ignored); empty hides every device.
fn parse_visible(list: &str, devices: usize) -> Vec<usize> {
    let mut seen = Vec::new();
    for part in list.split(',') {
        match part.trim().parse::<usize>() {
            Ok(i) if i < devices && !seen.contains(&i) => seen.push(i),
            _ => break,
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_faults_and_visible_lists() {
        assert_eq!(parse_bytes("64K"), Some(65536));
        assert_eq!(parse_bytes("8G"), Some(8 << 30));
        assert_eq!(parse_bytes("12"), Some(12));
        assert_eq!(parse_bytes("x"), None);
        assert_eq!(parse_fault("700@12"), Some((700, 12)));
        assert_eq!(parse_fault("700"), None);
        assert_eq!(parse_visible("", 2), Vec::<usize>::new());
        assert_eq!(parse_visible("1,0", 2), vec![1, 0]);
        assert_eq!(parse_visible("0,5,1", 2), vec![0]);
    }
}
