//! A simulated CUDA driver: a shared library with libcuda's C ABI and symbol names
//! that runs on the CPU, loaded in place of the real driver to run a GPU test suite
//! where there is no GPU, and to hunt the ordering bugs a fast GPU hides.
//!
//! It is a test tool, not a fallback: it proves ordering and error handling, never
//! speed. `docs/simulator.md` lists what it models, every check in which it is
//! stricter than the driver, and what it does not model.
//!
//! - **Devices and contexts**: `CUDA_SIM_DEVICES` devices of `CUDA_SIM_DEVICE_MEMORY`
//!   bytes each (`src/config.rs`, `src/machine.rs`), primary and created contexts, the
//!   per-thread stack of current contexts (`src/context.rs`, `src/state.rs`).
//! - **Memory**: device allocations at addresses the host cannot dereference
//!   (`src/vaspace.rs`), their bytes elsewhere (`src/backing.rs`); page-locked host memory,
//!   allocated or registered; pointer attributes (`src/memory.rs`).
//! - **Streams**: each stream a FIFO run by its own thread; events; the legacy
//!   default stream's implicit synchronisation; per-thread default streams
//!   (`src/stream.rs`, `src/context_streams.rs`, `src/submit.rs`); stream capture and
//!   graphs (`src/capture.rs`).
//! - **Adversarial timing**: a seeded delay before each operation (`src/jitter.rs`).
//! - **Race detection** (`src/inflight.rs`): checksums of queued page-locked sources,
//!   poisoned page-locked destinations, frees of memory queued work still uses.
//! - **Faults**: `CUDA_SIM_FAULT=CODE@N`, the extra entry point `cuSimInjectFault`,
//!   and the one built-in kernel, `fault_after` (`src/module.rs`).
//! - **Leak report** (`src/leaks.rs`): `CUDA_SIM_LEAK_REPORT`, and the extra entry
//!   point `cuSimLeakReport`: the streams, events, contexts, allocations, modules and
//!   graphs the program still holds.
//!
//! The entry points are in `src/api/`; each returns the driver's code.

mod api;
mod backing;
mod capture;
mod config;
mod context;
mod context_streams;
mod device;
mod errors;
mod event;
mod inflight;
mod jitter;
mod leaks;
mod machine;
mod memory;
mod module;
mod ops;
mod state;
mod stream;
mod submit;
mod table;
mod vaspace;
