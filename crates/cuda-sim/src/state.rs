//! The driver's state over the simulated machine (`src/machine.rs`): the primary
//! contexts, the handle tables, whether `cuInit` ran, and the calls counted for
//! `CUDA_SIM_FAULT`; made at the first call into the library.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::capture::{Graph, GraphExec};
use crate::context::Context;
use crate::errors::{Res, NOT_INITIALIZED, NO_DEVICE, SUCCESS};
use crate::event::Event;
use crate::leaks::Live;
use crate::machine::machine;
use crate::module::{Function, Module};
use crate::stream::Stream;
use crate::table::{lock, Table};

/// Everything the driver keeps.
pub struct Sim {
    /// Each device's primary context, by ordinal (inactive until retained).
    primaries: Vec<Arc<Context>>,
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
    initialized: AtomicBool,
    /// Calls made so far (for `CUDA_SIM_FAULT`).
    calls: AtomicU64,
    /// A fault still to come: (code, at call number).
    fault: Mutex<Option<(u32, u64)>>,
}

static SIM: OnceLock<Sim> = OnceLock::new();

/// The driver's state (made on first use, after the machine under it).
pub fn sim() -> &'static Sim {
    SIM.get_or_init(Sim::new)
}

/// The driver's state, if a call has made it (the leak report at exit, which must
/// not make it).
pub fn made() -> Option<&'static Sim> {
    SIM.get()
}

impl Sim {
    fn new() -> Sim {
        let m = machine();
        let contexts = Table::new(0xC7);
        let primaries = m
            .devices()
            .iter()
            .map(|d| {
                let h = contexts.reserve();
                let primary = Arc::new(Context::new(h, d, true, 0));
                contexts.insert_at(h, Arc::clone(&primary));
                primary
            })
            .collect();
        if let Some(to) = &m.cfg.leak_report {
            crate::leaks::report_at_exit(to, m.cfg.leak_exit_status, || made().map(Sim::live));
        }
        Sim {
            primaries,
            contexts,
            streams: Table::new(0x57),
            events: Table::new(0xE7),
            modules: Table::new(0x30),
            functions: Table::new(0xF0),
            graphs: Table::new(0x6A),
            execs: Table::new(0x6E),
            initialized: AtomicBool::new(false),
            calls: AtomicU64::new(0),
            fault: Mutex::new(m.cfg.fault),
        }
    }

    /// `cuInit`: `CUDA_ERROR_NO_DEVICE` when no device is visible.
    pub fn init(&self) -> Res<()> {
        if machine().devices().is_empty() {
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

    /// The primary context of device `ordinal` (which exists: ordinals come from
    /// checked handles).
    pub fn primary(&self, ordinal: usize) -> &Arc<Context> {
        &self.primaries[ordinal]
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
                if let Some(d) = machine().devices().get(device) {
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

    /// What the program holds now, by kind, read without a lock (see `src/leaks.rs`).
    pub fn live(&self) -> Live {
        let held = &machine().mem.held;
        Live {
            streams: self.streams.live(),
            events: self.events.live(),
            // The primary contexts are in the table from the start, for good.
            contexts: self.contexts.live().saturating_sub(self.primaries.len()),
            primary_contexts: self.primaries.iter().filter(|c| c.is_active()).count(),
            device_allocs: held.device.load(Ordering::Relaxed),
            stream_ordered_allocs: held.stream_ordered.load(Ordering::Relaxed),
            host_allocs: held.host.load(Ordering::Relaxed),
            host_registrations: held.registered.load(Ordering::Relaxed),
            modules: self.modules.live(),
            graphs: self.graphs.live(),
            graph_execs: self.execs.live(),
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
