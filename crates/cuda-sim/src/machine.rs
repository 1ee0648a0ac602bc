//! The simulated machine: its settings, devices, memory, the record of queued work's
//! memory, and the signal that operations complete. Made at the first call, before
//! the driver's state over it (`src/state.rs`), and all that a stream's thread and
//! the operations it runs use of the simulator.

use std::sync::{Condvar, Mutex, OnceLock};

use crate::config::Config;
use crate::device::Device;
use crate::errors::{Res, INVALID_DEVICE};
use crate::inflight::Inflight;
use crate::memory::Memory;
use crate::table::lock;

/// The hardware the simulator shows, and what runs on it.
pub struct Machine {
    /// The settings read from the environment.
    pub cfg: Config,
    devices: Vec<Device>,
    /// Device allocations, page-locked host memory.
    pub mem: Memory,
    /// Host and device ranges that queued operations will use.
    pub inflight: Inflight,
    /// Signalled whenever an operation completes.
    progress: (Mutex<u64>, Condvar),
}

static MACHINE: OnceLock<Machine> = OnceLock::new();

/// The simulated machine (made on first use).
pub fn machine() -> &'static Machine {
    MACHINE.get_or_init(Machine::new)
}

impl Machine {
    fn new() -> Machine {
        let cfg = Config::from_env();
        let devices = cfg
            .visible
            .iter()
            .enumerate()
            .map(|(ordinal, &physical)| Device::new(ordinal, physical, cfg.device_memory))
            .collect();
        Machine {
            cfg,
            devices,
            mem: Memory::default(),
            inflight: Inflight::default(),
            progress: (Mutex::new(0), Condvar::new()),
        }
    }

    /// The visible devices.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Device `ordinal` (which exists: ordinals come from checked handles).
    pub fn device(&self, ordinal: usize) -> &Device {
        &self.devices[ordinal]
    }

    /// Whether `addr` lies in the address range of some device's memory (allocated
    /// there or not).
    pub fn in_device_range(&self, addr: u64) -> bool {
        self.devices.iter().any(|d| lock(&d.vas).contains(addr))
    }

    /// Device `ordinal` as a program names it, checked.
    pub fn device_checked(&self, ordinal: i32) -> Res<&Device> {
        usize::try_from(ordinal)
            .ok()
            .and_then(|o| self.devices.get(o))
            .ok_or(INVALID_DEVICE)
    }

    /// Wakes every thread waiting for an operation to complete.
    pub fn notify_progress(&self) {
        let mut g = lock(&self.progress.0);
        *g = g.wrapping_add(1);
        self.progress.1.notify_all();
    }

    /// Blocks until `done` holds (checked again after every completion).
    pub fn wait_until(&self, mut done: impl FnMut() -> bool) {
        let mut g = lock(&self.progress.0);
        while !done() {
            g = self.progress.1.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}
