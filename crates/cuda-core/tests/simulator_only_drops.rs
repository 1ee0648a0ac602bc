//! Dropping a [`Stream`] (and the blocking-sync event its waits made), an [`Event`], a
//! [`DeviceBuffer`] or a [`PinnedBuffer`] destroys or frees it at once, while its
//! context lives. Counted by the simulated driver's extra entry point
//! `cuSimLeakReport` (`crates/cuda-sim/src/leaks.rs`), which says what the program
//! holds now.
//!
//! The leak report at exit cannot tell: the primary context's release frees what it
//! owns, whether or not a `Drop` did. A real driver has no such count, so this target
//! runs on the simulator only: `cargo xtask test-gpu --sim` (and `cargo xtask
//! mutants`) run it, and runs on a GPU machine leave it out, by the
//! `simulator_only` in its name.
//!
//! One test in a target of its own: no other test's objects come and go beside it.

mod common;

use std::collections::BTreeMap;
use std::ffi::c_char;

use common::*;
use cuda_core::{DeviceBuffer, Event, PinnedBuffer, Stream, WaitPolicy};

/// `cuSimLeakReport`: the report line, NUL-terminated, into a buffer of `len` bytes.
type LeakReport = unsafe extern "C" fn(*mut c_char, usize) -> u32;

/// What the program holds now, by the report's names (`streams`, `events`,
/// `device_allocs`, `host_allocs`, ...).
fn live() -> BTreeMap<String, u64> {
    // SAFETY: the simulator's signature of its own entry point.
    let report: LeakReport = unsafe { simulator_entry("cuSimLeakReport") };
    let mut buf = vec![0u8; 4096];
    // SAFETY: `buf` is writable for its length.
    let rc = unsafe { report(buf.as_mut_ptr().cast(), buf.len()) };
    assert_eq!(rc, 0, "cuSimLeakReport failed");
    let end = buf.iter().position(|&b| b == 0).expect("NUL-terminated");
    let line = std::str::from_utf8(&buf[..end]).expect("UTF-8");
    let fields = line
        .strip_prefix("cuda-sim leak report: ")
        .and_then(|rest| rest.split_once(" exe="))
        .unwrap_or_else(|| panic!("not a report line: {line:?}"))
        .0;
    fields
        .split(' ')
        .filter_map(|f| f.split_once('='))
        .filter(|(k, _)| *k != "pid")
        .map(|(k, v)| (k.to_owned(), v.parse().expect("a count")))
        .collect()
}

/// `now` is `then` with `kind`'s count moved by `by`, every other count the same.
#[track_caller]
fn assert_moved(
    what: &str,
    then: &BTreeMap<String, u64>,
    now: &BTreeMap<String, u64>,
    kind: &str,
    by: i64,
) {
    let mut expected = then.clone();
    let n = expected
        .get_mut(kind)
        .unwrap_or_else(|| panic!("no count {kind}"));
    *n = n.checked_add_signed(by).expect("a count stays at least 0");
    assert_eq!(now, &expected, "{what}: {kind} by {by}, the rest unchanged");
}

#[test]
#[ignore = "needs the simulated driver (its count of live objects): run with cargo xtask test-gpu --sim"]
fn each_drop_destroys_or_frees_its_object_while_the_context_lives() {
    let ctx = gpu();
    let start = live();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut event = Event::new(&ctx).expect("Event::new");
    let mut device = DeviceBuffer::<u32>::alloc_in(&ctx, 4096).expect("DeviceBuffer");
    let host = PinnedBuffer::<u32>::alloc_in(&ctx, 4096).expect("PinnedBuffer");
    stream.memcpy_htod(&host, &mut device).expect("memcpy_htod");
    event.record(&stream).expect("record");
    // A blocking wait makes the stream's blocking-sync event, which its drop destroys.
    stream
        .synchronize_with(WaitPolicy::Block)
        .expect("synchronize");
    let made = live();
    for (kind, n) in [("streams", 1), ("device_allocs", 1), ("host_allocs", 1)] {
        assert_eq!(made[kind], start[kind] + n, "{kind} after making them");
    }
    assert_eq!(
        made["events"],
        start["events"] + 2,
        "the Event and the stream's own"
    );

    drop(device);
    let now = live();
    assert_moved("DeviceBuffer dropped", &made, &now, "device_allocs", -1);
    drop(host);
    let then = now;
    let now = live();
    assert_moved("PinnedBuffer dropped", &then, &now, "host_allocs", -1);
    drop(event);
    let then = now;
    let now = live();
    assert_moved("Event dropped", &then, &now, "events", -1);
    drop(stream);
    assert_eq!(
        live(),
        start,
        "Stream dropped: its stream and event destroyed"
    );
}
