//! The simulated machine: its settings, devices, handle tables, memory and the
//! record of queued work, made at the first call into the library.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use crate::capture::{Graph, GraphExec};
use crate::config::Config;
use crate::context::Context;
use crate::device::Device;
use crate::errors::{Res, INVALID_DEVICE, NOT_INITIALIZED, NO_DEVICE, SUCCESS};
use crate::event::Event;
use crate::inflight::Inflight;
use crate::memory::Memory;
use crate::module::{Function, Module};
use crate::stream::Stream;
use crate::table::{lock, Table};

/// Everything the simulator knows.
pub struct Sim {
    /// The settings read from the environment.
    pub cfg: Config,
    devices: Vec<Device>,
    /// Contexts by handle (primary ones from the start).
    pub contexts: Table<Context>,
    /// Created streams by handle.
    pub streams: Table<Stream>,
    /// Events by handle.
    pub events: Table<Event>,
    /// Loaded modules by handle.
    pub modules: Table<Module>,
    /// Kernels by handle.
    pub functions: Table<Function>,
    /// Captured graphs by handle.
    pub graphs: Table<Graph>,
    /// Instantiated graphs by handle.
    pub execs: Table<GraphExec>,
    /// Device allocations, page-locked host memory.
    pub mem: Memory,
    /// Host and device ranges that queued operations will use.
    pub inflight: Inflight,
    /// Signalled whenever an operation completes.
    progress: (Mutex<u64>, Condvar),
    initialized: AtomicBool,
    /// Calls made so far (for `CUDA_SIM_FAULT`).
    calls: AtomicU64,
    /// A fault still to come: (code, at call number).
    fault: Mutex<Option<(u32, u64)>>,
}

static SIM: OnceLock<Sim> = OnceLock::new();

/// The simulated machine (made on first use).
pub fn sim() -> &'static Sim {
    SIM.get_or_init(Sim::new)
}

/// The simulated machine, if a call has made it (the leak report at exit, which
/// must not make it).
pub fn made() -> Option<&'static Sim> {
    SIM.get()
}

impl Sim {
    fn new() -> Sim {
        let cfg = Config::from_env();
        let contexts = Table::new(0xC7);
        let devices = cfg
            .visible
            .iter()
            .enumerate()
            .map(|(ordinal, &physical)| {
                let h = contexts.reserve();
                let primary = Arc::new(Context::new(h, ordinal, true, 0));
                contexts.insert_at(h, Arc::clone(&primary));
                Device::new(ordinal, physical, cfg.device_memory, primary)
            })
            .collect();
        let fault = cfg.fault;
        if cfg.leak_report.is_some() {
            crate::leaks::report_at_exit();
        }
        Sim {
            cfg,
            devices,
            contexts,
            streams: Table::new(0x57),
            events: Table::new(0xE7),
            modules: Table::new(0x30),
            functions: Table::new(0xF0),
            graphs: Table::new(0x6A),
            execs: Table::new(0x6E),
            mem: Memory::default(),
            inflight: Inflight::default(),
            progress: (Mutex::new(0), Condvar::new()),
            initialized: AtomicBool::new(false),
            calls: AtomicU64::new(0),
            fault: Mutex::new(fault),
        }
    }

    /// `cuInit`: `CUDA_ERROR_NO_DEVICE` when no device is visible.
    pub fn init(&self) -> Res<()> {
        if self.devices.is_empty() {
            return Err(NO_DEVICE);
        }
        self.initialized.store(true, Ordering::Release);
        Ok(())
    }

    /// `Ok` once `cuInit` has succeeded.
    pub fn ready(&self) -> Res<()> {
        if self.initialized.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(NOT_INITIALIZED)
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

    /// Counts a call; when it is the one `CUDA_SIM_FAULT` (or `cuSimInjectFault`)
    /// named, poisons the device of the calling thread's current context (device 0
    /// when none is current).
    pub fn count_call(&self) {
        let n = self.calls.fetch_add(1, Ordering::AcqRel) + 1;
        let mut fault = lock(&self.fault);
        if let Some((code, at)) = *fault {
            if n >= at {
                *fault = None;
                drop(fault);
                let device = crate::context::current().map_or(0, |c| c.device);
                if let Some(d) = self.devices.get(device) {
                    eprintln!("cuda-sim: injected fault {code} at call {n} on device {device}");
                    d.poison(code);
                }
            }
        }
    }

    /// Arms a fault `after` calls from now.
    pub fn arm_fault(&self, code: u32, after: u64) {
        let now = self.calls.load(Ordering::Acquire);
        *lock(&self.fault) = Some((code, now + after.max(1)));
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

/// `SUCCESS` or the code of `r`.
pub fn code(r: Res<()>) -> u32 {
    match r {
        Ok(()) => SUCCESS,
        Err(c) => c,
    }
}
