//! GPU tests of `StagingBuffer`: data integrity on every route and at every chunk
//! boundary, stream ordering on both sides of the routing threshold, prefixes,
//! page-locked routing, reuse and growth, bad input, panics in `fill` and threads.
//!
//! Every test is `#[ignore]`d so that `cargo test` passes without a GPU; run them
//! with `cargo xtask test-gpu` (or `cargo test -p cuda-staging --test gpu --
//! --ignored` on a GPU machine). Without a device each one fails loudly.
//!
//! Conventions: every transfer moves a pattern that differs per element and per
//! call (never zeros), and every element is compared. Uploads are checked by reading
//! the device back through the driver's own synchronous `copy_to_host`; downloads by
//! filling the device through `copy_from_host` first. Each test has its own stream
//! and `StagingBuffer` (tests run in parallel threads).
//!
//! One test binary, a file per concern: `integrity.rs` (every method, size, element
//! type and chunk boundary), `ordering.rs` (against queued stream work, every route),
//! `prefixes.rs`, `page_locked.rs` (DMA straight from and into page-locked memory),
//! `growth.rs` (reuse and growth), `bad_input.rs` (bad input, zero elements, a
//! failed reserve, a panic in `fill`, views), `views.rs` (transfers into and out of
//! part of a device buffer), `try_fill.rs` (`try_upload_with`) and
//! `threads.rs`. The
//! helpers they share are below and in `tests/common`.
//!
//! The driver-error test (an invalid device pointer) lives in its own binary,
//! `gpu_driver_error.rs`: were the driver ever to report it as an asynchronous
//! fault, the sticky error would poison the process's primary context and fail
//! every test running beside it.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod growth;
mod integrity;
mod ordering;
mod page_locked;
mod prefixes;
mod threads;
mod try_fill;
mod views;

use std::mem::size_of;
use std::panic::{catch_unwind, AssertUnwindSafe};

use common::*;
use cuda_staging::{
    default_copy_threads, pool_threads, pool_threads_started, Context, DeviceBuffer, Direction,
    Error, HostRegistration, PinnedBuffer, StagingBuffer, StagingStats, Stream,
    DEFAULT_AUTO_STAGE_MAX_BYTES, PIPELINE_WINDOW_BYTES,
};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
/// Bytes of the seed's three tensor shapes (112×112×3, 128×128×3, 640×640×3 f32).
const SEED_SHAPES: [usize; 3] = [150_528, 196_608, 4_915_200];

// ---------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------

/// Queues a memset of all of `d` to `value` on `stream` (asynchronous).
fn memset_async(d: &mut DeviceBuffer<u8>, value: u8, stream: &Stream) {
    stream.memset_bytes(d, value).expect("memset_bytes");
}

/// Semantic 1, checked where work was queued ahead of the transfer: when a transfer
/// returns, nothing queued on its stream is still running (`cuStreamQuery`). Reading
/// the device back cannot show this by itself: cuda-core's synchronous reads wait
/// for queued writes to the buffer first.
fn assert_stream_idle(what: &str, stream: &Stream) {
    assert!(
        stream.query().expect("Stream::query"),
        "{what}: the call returned while work on its stream was still running"
    );
}

/// A `Vec` holding a page-aligned region of `n` elements with at least a page of
/// slack after it, so that registrations made by tests running in parallel never
/// share a page. Returns the Vec and the region's first index.
fn registrable<T: Pattern>(n: usize) -> (Vec<T>, usize) {
    const PAGE: usize = 4096;
    let sz = size_of::<T>();
    let v = vec![T::zeroed(); n + 2 * PAGE / sz + 1];
    let addr = v.as_ptr() as usize;
    let off_bytes = (PAGE - addr % PAGE) % PAGE;
    assert_eq!(off_bytes % sz, 0, "element alignment divides the page size");
    (v, off_bytes / sz)
}

fn elems<T>(bytes: usize) -> usize {
    (bytes / size_of::<T>()).max(1)
}
