//! The leak report: what the program made through the simulator and has not destroyed
//! or freed, counted by kind.
//!
//! `CUDA_SIM_LEAK_REPORT=PATH` appends one line per process to `PATH` at exit
//! (`stderr`: writes it there), from a handler registered with `atexit` when the
//! simulator is made (at the first call); the simulator's extra entry point
//! `cuSimLeakReport` returns the same line on demand. With
//! `CUDA_SIM_LEAK_EXIT_STATUS=N` too, a program that left anything live ends with exit
//! status `N` once the line is written (`_exit` from the handler), so that a test
//! runner that knows nothing of the report fails on a leak: `cargo xtask mutants`
//! counts a mutant that leaks as caught this way. The line:
//!
//! ```text
//! cuda-sim leak report: pid=4242 streams=0 events=0 ... graph_execs=0 exe=/path/to/program
//! ```
//!
//! Counted: streams made by `cuStreamCreate*`, events, created contexts, primary
//! contexts still retained, device allocations (`cuMemAlloc`, `cuMemAllocPitch`),
//! stream-ordered ones (`cuMemAllocAsync`; one whose `cuMemFreeAsync` is queued on a
//! stream counts as freed), page-locked host allocations (`cuMemHostAlloc`,
//! `cuMemAllocHost`), host registrations, modules, graphs and executable graphs. A
//! context's reset (its last release, or its destruction) frees what it owns, so what
//! it frees is not counted either. Not counted: what the driver owns, not the program
//! (each context's legacy stream and per-thread streams).
//!
//! Every count is an atomic kept beside its table ([`crate::table::Table::live`],
//! [`crate::memory::Held`]), so the report takes no lock: at exit the stream threads
//! still run, and one may hold any of the simulator's locks. The driver's state
//! counts them (`Sim::live`, `src/state.rs`); this file says what the counts mean,
//! and writes them.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::OnceLock;

use crate::config::ReportTo;

/// What the program holds, by kind (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Live {
    /// Streams made by `cuStreamCreate*`, not destroyed.
    pub streams: usize,
    /// Events not destroyed.
    pub events: usize,
    /// Contexts made by `cuCtxCreate*`, not destroyed.
    pub contexts: usize,
    /// Primary contexts retained more often than released.
    pub primary_contexts: usize,
    /// `cuMemAlloc` / `cuMemAllocPitch` allocations not freed.
    pub device_allocs: usize,
    /// `cuMemAllocAsync` allocations neither freed nor with a free queued.
    pub stream_ordered_allocs: usize,
    /// `cuMemHostAlloc` / `cuMemAllocHost` memory not freed.
    pub host_allocs: usize,
    /// `cuMemHostRegister` ranges not unregistered.
    pub host_registrations: usize,
    /// Modules not unloaded.
    pub modules: usize,
    /// Graphs not destroyed.
    pub graphs: usize,
    /// Executable graphs not destroyed.
    pub graph_execs: usize,
}

impl Live {
    /// Each count with its name in the report line, in the line's order.
    pub fn fields(&self) -> [(&'static str, usize); 11] {
        [
            ("streams", self.streams),
            ("events", self.events),
            ("contexts", self.contexts),
            ("primary_contexts", self.primary_contexts),
            ("device_allocs", self.device_allocs),
            ("stream_ordered_allocs", self.stream_ordered_allocs),
            ("host_allocs", self.host_allocs),
            ("host_registrations", self.host_registrations),
            ("modules", self.modules),
            ("graphs", self.graphs),
            ("graph_execs", self.graph_execs),
        ]
    }

    /// The report line (no newline): the process id, each count, and last the
    /// program's path (which may hold spaces).
    pub fn line(&self) -> String {
        let mut line = format!("cuda-sim leak report: pid={}", std::process::id());
        for (name, n) in self.fields() {
            let _ = write!(line, " {name}={n}");
        }
        let exe = std::env::current_exe().map_or_else(|_| "?".into(), |p| p.display().to_string());
        let _ = write!(line, " exe={exe}");
        line
    }
}

/// What the program holds now, if anything is to be reported.
pub type Count = fn() -> Option<Live>;

/// Where the report goes at exit, the exit status of a leak, and how to count: set by
/// [`report_at_exit`].
static AT_EXIT: OnceLock<(&'static ReportTo, Option<i32>, Count)> = OnceLock::new();

/// Writes the report if `CUDA_SIM_LEAK_REPORT` asked for it, and ends the process
/// with the status `CUDA_SIM_LEAK_EXIT_STATUS` names if anything is live. Called by
/// the C library's exit handlers: it takes none of the simulator's locks and never
/// panics (a failed write is reported on stderr).
extern "C" fn at_exit() {
    let Some((to, leak_status, count)) = AT_EXIT.get() else {
        return;
    };
    let Some(live) = count() else {
        return;
    };
    let line = live.line();
    let written = match to {
        ReportTo::Stderr => writeln!(std::io::stderr(), "{line}"),
        ReportTo::File(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            // One write of the whole line: lines of processes sharing the file
            // (a test and the children it runs) do not interleave.
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes())),
    };
    if let Err(e) = written {
        let _ = writeln!(
            std::io::stderr(),
            "cuda-sim: cannot write the leak report to {to:?}: {e}\n{line}"
        );
    }
    if let Some(status) = *leak_status {
        if live != Live::default() {
            // SAFETY: `_exit` ends the process at once, running no other handler;
            // what this one had to write is written.
            unsafe { libc::_exit(status) }
        }
    }
}

/// Has [`at_exit`] write what `count` says (`None`: nothing) to `to` when the process
/// exits, and end it with `leak_status` if anything is live (from `Sim::new`, once,
/// when `CUDA_SIM_LEAK_REPORT` is set).
pub fn report_at_exit(to: &'static ReportTo, leak_status: Option<i32>, count: Count) {
    if AT_EXIT.set((to, leak_status, count)).is_err() {
        return;
    }
    // SAFETY: `at_exit` is a plain `extern "C" fn()` that neither unwinds nor takes
    // a lock another thread may hold at exit; it stays mapped until the process ends,
    // since the simulator is linked `-z nodelete` (build.rs) and never unloaded.
    if unsafe { libc::atexit(at_exit) } != 0 {
        eprintln!("cuda-sim: cannot register the leak report (atexit failed): no report at exit");
    }
}
