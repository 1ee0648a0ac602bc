//! `cargo xtask probe`: which CUDA GPU and driver this machine has.
//!
//! Also the first step of `test-gpu` and `bench` (here, and in a bundle's `run.sh`,
//! which carries a release build of this binary).

use cuda_core::Context as CudaContext;
use serde::{Deserialize, Serialize};

use crate::{human_bytes, utc_now, Result};

/// Options of `cargo xtask probe`.
#[derive(clap::Args)]
pub struct Args {
    /// Print a JSON object (device_name, driver_version, device_count, date, ...).
    #[arg(long)]
    json: bool,
}

/// What the probe found; serialised as `device.json` in benchmark results.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeviceInfo {
    /// Device 0's name, e.g. "NVIDIA H200".
    pub device_name: String,
    /// The driver's CUDA version, e.g. "13.0".
    pub driver_version: String,
    /// How many CUDA devices the driver sees.
    pub device_count: usize,
    /// Device 0's total memory.
    pub total_memory_bytes: u64,
    /// UTC date of the probe, `YYYY-MM-DD`.
    pub date: String,
    /// UTC time of the probe, `YYYY-MM-DDTHH:MM:SSZ`.
    pub timestamp: String,
    /// The host's CPU model, from /proc/cpuinfo where there is one.
    pub host_cpu: Option<String>,
    /// The cores this process may run on (`std::thread::available_parallelism`).
    /// Host-copy rates, and with them the staged columns, depend on the host as much
    /// as on the GPU.
    #[serde(default)]
    pub host_cores: Option<usize>,
}

impl DeviceInfo {
    /// One line for people: `found: NVIDIA H200, driver 13.0, 1 device (device 0: 139.8 GiB)`.
    pub fn line(&self) -> String {
        format!(
            "found: {}, driver {}, {} device{} (device 0: {})",
            self.device_name,
            self.driver_version,
            self.device_count,
            if self.device_count == 1 { "" } else { "s" },
            human_bytes(self.total_memory_bytes),
        )
    }
}

/// Runs `cargo xtask probe` with these options.
pub fn run(args: &Args) -> Result<()> {
    let info = probe().map_err(|e| format!("no CUDA GPU found: {e}"))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
    } else {
        println!("{}", info.line());
    }
    Ok(())
}

/// Asks the driver for device 0. The error says why there is no usable GPU (no
/// driver, no device, or device 0 failing), without the "no CUDA GPU" prefix.
pub fn probe() -> Result<DeviceInfo, String> {
    let count = CudaContext::device_count().map_err(|e| e.to_string())?;
    let driver_version = match CudaContext::driver_version() {
        Ok((major, minor)) => format!("{major}.{minor}"),
        Err(e) => return Err(format!("cannot read the driver version: {e}")),
    };
    if count == 0 {
        return Err(format!(
            "the CUDA driver ({driver_version}) is installed but sees no device"
        ));
    }
    let ctx = CudaContext::new(0).map_err(|e| format!("{count} device(s), but device 0: {e}"))?;
    let device_name = ctx.name().map_err(|e| format!("device 0's name: {e}"))?;
    let total_memory_bytes = ctx
        .total_memory()
        .map_err(|e| format!("device 0's memory: {e}"))? as u64;
    let (date, timestamp) = utc_now();
    Ok(DeviceInfo {
        device_name,
        driver_version,
        device_count: count,
        total_memory_bytes,
        date,
        timestamp,
        host_cpu: host_cpu(),
        host_cores: std::thread::available_parallelism().ok().map(|n| n.get()),
    })
}

fn host_cpu() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}
