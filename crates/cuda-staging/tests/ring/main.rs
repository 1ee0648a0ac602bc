//! Tests of `StagingRing`: every semantic of the synchronous API, on the ring.
//! Integrity at every size and around slot reuse and growth, ordering against
//! queued stream work, prefixes, bad input that changes nothing, a panic inside
//! `fill`, stale tickets, copy-in from a pageable slice, `slot_waits`, a frame loop of
//! 10,000 frames and eight threads each with a ring of its own.
//!
//! The CPU tests (`cpu.rs`) run everywhere. The GPU tests are `#[ignore]`d so that
//! `cargo test` passes without a GPU; run them with `cargo xtask test-gpu` (or
//! `cargo test -p cuda-staging --test ring -- --ignored` on a GPU machine). Without a
//! device each one fails loudly.
//!
//! One test binary, a file per concern: `cpu.rs`, `integrity.rs`, `ordering.rs`,
//! `input.rs` (prefixes, bad input, zero elements, a panic in `fill`, views),
//! `tickets.rs`, `copy_in.rs`, `slot_waits.rs`, `frame_loops.rs` and `views.rs`
//! (transfers through views, `try_upload_with`).
//!
//! Conventions: every transfer moves a pattern that differs per element and per call
//! (never zeros), and every element is compared, byte for byte. Uploads are checked by
//! reading the device back through the driver's synchronous `copy_to_host`; downloads
//! by filling the device through `copy_from_host` first. Each test has its own stream
//! and rings (tests run in parallel threads). The helpers are below and in
//! `tests/common`.

#[path = "../common/mod.rs"]
mod common;

mod copy_in;
mod cpu;
mod frame_loops;
mod input;
mod integrity;
mod ordering;
mod slot_waits;
mod tickets;
mod views;

use std::fmt::Debug;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use common::*;
use cuda_staging::{
    BatchTicket, DeviceBuffer, Error, RingConfig, RingStats, StagingRing, Stream, Ticket,
    DEFAULT_RING_SLOTS, MAX_COPY_THREADS, MAX_RING_SLOTS,
};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

// ---------------------------------------------------------------------------------
// helpers of the GPU tests
// ---------------------------------------------------------------------------------

// The shared helpers (device set-up, patterns, checks, `Busy`, `warm`) are in
// `tests/common`; what only the ring tests need is here.

/// Elements of `T` in at least `bytes` bytes.
fn elems_for<T>(bytes: usize) -> usize {
    bytes.div_ceil(std::mem::size_of::<T>())
}

/// About 100 ms of queued device work, in 50 copies of 2 GiB: the slot-wait counts
/// below must not depend on the test thread making its next calls within a
/// millisecond, while other tests run or compute-sanitizer slows every API call.
/// Few large copies, because queueing hundreds of small ones blocks once the
/// driver's queue is full, until most of them have run (8 ms was too little; 800
/// copies of 256 MiB returned with little of their work left).
struct LongBusy {
    a: DeviceBuffer<u8>,
    b: DeviceBuffer<u8>,
}

impl LongBusy {
    fn new() -> LongBusy {
        LongBusy {
            a: DeviceBuffer::alloc(2 << 30).expect("alloc long busy a"),
            b: DeviceBuffer::alloc(2 << 30).expect("alloc long busy b"),
        }
    }

    fn queue(&mut self, stream: &Stream) {
        for _ in 0..25 {
            stream.memcpy_dtod(&self.a, &mut self.b).expect("busy dtod");
            stream.memcpy_dtod(&self.b, &mut self.a).expect("busy dtod");
        }
    }
}
