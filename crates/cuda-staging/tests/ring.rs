//! Tests of `StagingRing` (issue 13): every semantic of the synchronous API, on the
//! ring. Integrity at every size and around slot reuse and growth, ordering against
//! queued stream work, prefixes, bad input that changes nothing, a panic inside
//! `fill`, stale tickets, copy-in from a pageable slice, `slot_waits`, a frame loop of
//! 10,000 frames and eight threads each with a ring of its own.
//!
//! The CPU tests at the top run everywhere. The GPU tests are `#[ignore]`d so that
//! `cargo test` passes without a GPU; run them with `cargo xtask test-gpu` (or
//! `cargo test -p cuda-staging --test ring -- --ignored` on a GPU machine). Without a
//! device each one fails loudly.
//!
//! Conventions: every transfer moves a pattern that differs per element and per call
//! (never zeros), and every element is compared, byte for byte. Uploads are checked by
//! reading the device back through the driver's synchronous `copy_to_host`; downloads
//! by filling the device through `copy_from_host` first. Each test has its own stream
//! and rings (tests run in parallel threads). The helpers are in `tests/common`.

mod common;

use std::fmt::Debug;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use common::*;
use cuda_staging::{
    BatchTicket, DeviceBuffer, Error, RingStats, StagingRing, Stream, Ticket, DEFAULT_RING_SLOTS,
    MAX_RING_SLOTS,
};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

// ---------------------------------------------------------------------------------
// CPU tests
// ---------------------------------------------------------------------------------

static_assertions::assert_impl_all!(StagingRing: Send, Default, Debug);
static_assertions::assert_impl_all!(Ticket<f32>: Send, Sync, Debug);
static_assertions::assert_impl_all!(BatchTicket: Send, Sync, Debug);
static_assertions::assert_impl_all!(RingStats: Copy, Default, Debug, PartialEq, Eq, Send);

#[test]
fn a_ring_has_one_to_64_slots() {
    assert_eq!(DEFAULT_RING_SLOTS, 3);
    assert_eq!(MAX_RING_SLOTS, 64);
    assert_eq!(StagingRing::new().slots(), DEFAULT_RING_SLOTS);
    assert_eq!(StagingRing::default().slots(), DEFAULT_RING_SLOTS);
    for k in [1, 2, 3, 17, MAX_RING_SLOTS] {
        assert_eq!(
            StagingRing::with_slots(k)
                .expect("a valid slot count")
                .slots(),
            k
        );
    }
}

#[test]
fn a_slot_count_outside_1_to_64_is_an_invalid_argument_naming_it() {
    for bad in [0, MAX_RING_SLOTS + 1, 1000, usize::MAX] {
        match StagingRing::with_slots(bad) {
            Err(e @ Error::InvalidArgument { op, .. }) => {
                assert_eq!(op, "StagingRing::with_slots");
                let msg = e.to_string();
                assert!(msg.contains(&format!("{bad} slots")), "{msg}");
                assert!(msg.contains("1 to 64"), "{msg}");
            }
            other => panic!("with_slots({bad}): expected InvalidArgument, got {other:?}"),
        }
    }
}

#[test]
fn a_new_ring_pins_nothing_counts_nothing_and_synchronizes_without_a_driver() {
    for mut ring in [
        StagingRing::new(),
        StagingRing::with_slots(1).unwrap(),
        StagingRing::with_slots(MAX_RING_SLOTS).unwrap(),
    ] {
        assert_eq!(ring.capacity(), 0);
        assert_eq!(ring.stats(), RingStats::default());
        // Nothing is in flight: no driver call is needed (none is present here).
        ring.synchronize()
            .expect("an unused ring has nothing to wait for");
        ring.set_copy_threads(0);
        ring.set_copy_threads(usize::MAX);
        assert_eq!(ring.capacity(), 0);
        assert_eq!(ring.stats(), RingStats::default());
        let shown = format!("{ring:?}");
        assert!(shown.contains("StagingRing"), "{shown}");
        assert!(
            shown.contains(&format!("slots: {}", ring.slots())),
            "{shown}"
        );
    }
}

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

// ---------------------------------------------------------------------------------
// integrity
// ---------------------------------------------------------------------------------

/// The sizes of issue 13's list, in bytes: one element, 4 KiB, 112x112x3 f32,
/// 1 MiB + 1, 640x640x3 f32. Types whose size does not divide one move the next
/// whole element count up.
const SIZES_BYTES: [usize; 5] = [0, 4 * KIB, 150_528, MIB + 1, 4_915_200];

/// Element counts of [`SIZES_BYTES`] for `T` (0 stands for one element).
fn sizes<T>() -> [usize; 5] {
    SIZES_BYTES.map(|b| if b == 0 { 1 } else { elems_for::<T>(b) })
}

/// Per size, ascending, then descending: `upload_with`, `download`, `upload` on a ring
/// of three slots, so slots are reused 5 times over and grow on the way up; every
/// element checked, and the way down allocates nothing.
fn integrity<T: Pattern>() {
    let (_ctx, stream) = gpu();
    let name = std::any::type_name::<T>();
    let mut ring = StagingRing::new();
    let mut want = RingStats::default();
    let elem = std::mem::size_of::<T>() as u64;
    let pass = |ring: &mut StagingRing, n: usize, want: &mut RingStats| {
        // Device buffers one element longer than the transfer: the extra element keeps
        // its own pattern (a prefix transfer at every size).
        let (s_with, s_down, s_up, s_rest) = (seed(), seed(), seed(), seed());
        let mut d_with = device_with::<T>(n + 1, s_rest);
        let d_down = device_with::<T>(n + 1, s_down);
        let mut d_up = device_with::<T>(n + 1, s_rest);
        let src = pattern::<T>(n, s_up);

        ring.upload_with(&mut d_with, n, &stream, |px| {
            assert_eq!(px.len(), n, "fill gets exactly n elements");
            fill_pattern(px, s_with);
        })
        .expect("upload_with");
        let t = ring.download(&d_down, n, &stream).expect("download");
        assert_eq!(t.len(), n);
        ring.upload(&mut d_up, &src, &stream).expect("upload");
        drop(src);

        let got = ring.wait(&t).expect("wait");
        assert_eq!(got.len(), n);
        check(&format_args!("{name} download of {n}"), got, s_down);
        // Redeeming again gives the same bytes.
        check(
            &format_args!("{name} download of {n}, second wait"),
            ring.wait(&t).expect("wait again"),
            s_down,
        );
        let back = device_contents(&d_with);
        check(
            &format_args!("{name} upload_with of {n}"),
            &back[..n],
            s_with,
        );
        check_at(
            &format_args!("{name} past upload_with"),
            &back[n..],
            n,
            s_rest,
        );
        let back = device_contents(&d_up);
        check(&format_args!("{name} upload of {n}"), &back[..n], s_up);
        check_at(&format_args!("{name} past upload"), &back[n..], n, s_rest);

        want.uploads += 2;
        want.downloads += 1;
        want.bytes_uploaded += 2 * n as u64 * elem;
        want.bytes_downloaded += n as u64 * elem;
    };

    for n in sizes::<T>() {
        pass(&mut ring, n, &mut want);
        let got = ring.stats();
        assert!(
            got.allocations <= 3 * 5,
            "{name}: at most one growth per slot and size: {got:?}"
        );
        assert!(
            ring.capacity() >= 3 * n * elem as usize,
            "{name}: three slots hold {n} elements each"
        );
    }
    let grown = ring.stats();
    assert!(grown.allocations >= 3, "each slot pinned: {grown:?}");
    assert_eq!(grown.slot_waits, 0, "every slot was redeemed: {grown:?}");
    want.allocations = grown.allocations;
    assert_eq!(grown, want);

    let capacity = ring.capacity();
    for n in sizes::<T>().into_iter().rev() {
        pass(&mut ring, n, &mut want);
    }
    assert_eq!(ring.stats(), want, "{name}: smaller sizes reuse the slots");
    assert_eq!(ring.capacity(), capacity, "{name}");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn every_size_moves_intact_f32() {
    integrity::<f32>();
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn every_size_moves_intact_3_byte_elements() {
    integrity::<[u8; 3]>();
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn every_size_moves_intact_bytes() {
    integrity::<u8>();
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn tickets_in_flight_keep_their_own_data_across_types_and_slot_reuse() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut ring = StagingRing::with_slots(4).unwrap();
    warm(&mut ring, &stream, MIB + 1);
    let warmed = ring.stats();
    let (n_f, n_b, n_r, n_u) = (150_528 / 4, MIB + 1, elems_for::<[u8; 3]>(4 * KIB), 1);

    for round in 0..3 {
        let seeds = [seed(), seed(), seed(), seed()];
        let d_f = device_with::<f32>(n_f, seeds[0]);
        let d_b = device_with::<u8>(n_b, seeds[1]);
        let d_r = device_with::<[u8; 3]>(n_r, seeds[2]);
        let d_u = device_with::<u32>(n_u, seeds[3]);
        // Behind real work, so all four are in flight at once.
        busy.queue(&stream);
        let t_f = ring.download(&d_f, n_f, &stream).unwrap();
        let t_b = ring.download(&d_b, n_b, &stream).unwrap();
        let t_r = ring.download(&d_r, n_r, &stream).unwrap();
        let t_u = ring.download(&d_u, n_u, &stream).unwrap();
        // Redeemed in another order each round.
        let mut order = [0, 1, 2, 3];
        order.rotate_left(round);
        for which in order {
            match which {
                0 => check(
                    &format_args!("round {round} f32"),
                    ring.wait(&t_f).unwrap(),
                    seeds[0],
                ),
                1 => check(
                    &format_args!("round {round} u8"),
                    ring.wait(&t_b).unwrap(),
                    seeds[1],
                ),
                2 => check(
                    &format_args!("round {round} rgb"),
                    ring.wait(&t_r).unwrap(),
                    seeds[2],
                ),
                _ => check(
                    &format_args!("round {round} u32"),
                    ring.wait(&t_u).unwrap(),
                    seeds[3],
                ),
            }
        }
    }
    let s = ring.stats();
    assert_eq!(s.downloads - warmed.downloads, 12);
    assert_eq!(s.uploads, 0);
    assert_eq!(s.allocations, warmed.allocations, "{s:?}");
    assert_eq!(
        s.slot_waits, 0,
        "every slot was redeemed before reuse: {s:?}"
    );
}

// ---------------------------------------------------------------------------------
// ordering against the stream
// ---------------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn an_upload_lands_after_a_memset_queued_before_it() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut ring = StagingRing::new();
    warm(&mut ring, &stream, 4_915_200);
    // 64 MiB of u32 set by the memset, the first `n` then overwritten by the upload.
    let mut dst = DeviceBuffer::<u32>::alloc(16 * MIB).unwrap();
    for (bytes, copy_in) in [(150_528, false), (4_915_200, false), (150_528, true)] {
        let n = bytes / 4;
        let (s, bits) = (seed(), 0xA5A5_0000 | (seed() as u32 & 0xFFFF));
        // Prepared data: the fill or copy-in takes well under the queued work.
        let data = pattern::<u32>(n, s);
        busy.queue(&stream);
        stream.memset_u32(&mut dst, bits).unwrap();
        if copy_in {
            ring.upload(&mut dst, &data, &stream).unwrap();
        } else {
            ring.upload_with(&mut dst, n, &stream, |px| px.copy_from_slice(&data))
                .unwrap();
        }
        let back = device_contents(&dst);
        check(&format_args!("upload of {bytes} B"), &back[..n], s);
        check_all_eq(&format_args!("memset past {bytes} B"), &back[n..], bits);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_download_sees_a_copy_and_a_memset_queued_before_it() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut ring = StagingRing::new();
    warm(&mut ring, &stream, 4_915_200);
    for bytes in [4 * KIB, 150_528, 4_915_200] {
        let n = bytes / 4;
        let (s_old, s_new, bits) = (seed(), seed(), 0x5A5A_0000 | (seed() as u32 & 0xFFFF));
        let mut src = device_with::<u32>(n, s_old);
        let fresh = device_with::<u32>(n, s_new);
        busy.queue(&stream);
        stream.memcpy_dtod(&fresh, &mut src).unwrap();
        stream
            .memset_u32(&mut src.slice_mut(n / 2..).unwrap(), bits)
            .unwrap();
        let t = ring.download(&src, n, &stream).unwrap();
        let got = ring.wait(&t).unwrap();
        check(
            &format_args!("copied half of {bytes} B"),
            &got[..n / 2],
            s_new,
        );
        check_all_eq(
            &format_args!("memset half of {bytes} B"),
            &got[n / 2..],
            bits,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn work_queued_after_an_upload_sees_its_data() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut ring = StagingRing::new();
    warm(&mut ring, &stream, 4_915_200);
    for bytes in [150_528, 4_915_200] {
        let n = bytes / 4;
        let s = seed();
        let mut input = device_with::<f32>(n, seed());
        let mut output = device_with::<f32>(n, seed());
        let data = pattern::<f32>(n, s);
        busy.queue(&stream);
        ring.upload_with(&mut input, n, &stream, |px| px.copy_from_slice(&data))
            .unwrap();
        // Queued after the upload: copies what the upload wrote, not what was there.
        stream.memcpy_dtod(&input, &mut output).unwrap();
        let t = ring.download(&output, n, &stream).unwrap();
        check(
            &format_args!("download after upload of {bytes} B"),
            ring.wait(&t).unwrap(),
            s,
        );
        check(
            &format_args!("output of {bytes} B"),
            &device_contents(&output),
            s,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_slot_is_not_reused_while_its_copy_is_in_flight() {
    let (_ctx, stream) = gpu();
    let mut busy = LongBusy::new();
    let mut ring = StagingRing::with_slots(1).unwrap();
    warm(&mut ring, &stream, 150_528);
    let n = 150_528 / 4;
    // Fills copy prepared data (about 10 us), so each pair's second call comes while
    // the first one's DMA still waits behind ~1 ms of queued work.
    let (s_a, s_b, s_c, s_d) = (seed(), seed(), seed(), seed());
    let (data_a, data_b) = (pattern::<f32>(n, s_a), pattern::<f32>(n, s_b));
    let mut a = DeviceBuffer::<f32>::alloc(n).unwrap();
    let mut b = DeviceBuffer::<f32>::alloc(n).unwrap();
    let c = device_with::<f32>(n, s_c);
    let d = device_with::<f32>(n, s_d);

    // An upload after an upload: the one slot is still read by the first DMA.
    busy.queue(&stream);
    ring.upload_with(&mut a, n, &stream, |px| px.copy_from_slice(&data_a))
        .unwrap();
    ring.upload_with(&mut b, n, &stream, |px| px.copy_from_slice(&data_b))
        .unwrap();
    // How many of the three calls below find the slot still in flight depends on
    // how much of the queued work is left when the call comes (enqueueing large
    // copies can block until most have run), so the count is bounded, not exact;
    // what must hold every time is the data, checked after each pair.
    let waits_after_one = ring.stats().slot_waits;
    assert!(waits_after_one <= 1, "{:?}", ring.stats());
    ring.synchronize().unwrap();
    check(
        &format_args!("upload, then upload: first"),
        &device_contents(&a),
        s_a,
    );
    check(
        &format_args!("upload, then upload: second"),
        &device_contents(&b),
        s_b,
    );

    // A download after an upload.
    busy.queue(&stream);
    ring.upload_with(&mut a, n, &stream, |px| px.copy_from_slice(&data_b))
        .unwrap();
    let t = ring.download(&c, n, &stream).unwrap();
    assert!(
        (waits_after_one..=waits_after_one + 1).contains(&ring.stats().slot_waits),
        "{:?}",
        ring.stats()
    );
    check(
        &format_args!("upload, then download: download"),
        ring.wait(&t).unwrap(),
        s_c,
    );
    check(
        &format_args!("upload, then download: upload"),
        &device_contents(&a),
        s_b,
    );
    ring.synchronize().unwrap();

    // An upload after a download whose ticket was not redeemed.
    busy.queue(&stream);
    let t = ring.download(&d, n, &stream).unwrap();
    ring.upload_with(&mut b, n, &stream, |px| px.copy_from_slice(&data_a))
        .unwrap();
    assert!(
        (1..=3).contains(&ring.stats().slot_waits),
        "three calls behind ~100 ms of queued work, none waited: {:?}",
        ring.stats()
    );
    let reason = invalid_reason(ring.wait(&t).unwrap_err());
    assert!(reason.contains("stale ticket"), "{reason}");
    check(
        &format_args!("download, then upload: upload"),
        &device_contents(&b),
        s_a,
    );
    assert_eq!(ring.stats().allocations, 1);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn dropping_a_ring_waits_for_its_transfers_in_flight() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let n = 4_915_200 / 4;
    let s = seed();
    let data = pattern::<f32>(n, s);
    let mut dst = DeviceBuffer::<f32>::alloc(n).unwrap();
    let src = device_with::<f32>(n, seed());
    {
        let mut ring = StagingRing::new();
        warm(&mut ring, &stream, 4_915_200);
        busy.queue(&stream);
        ring.upload_with(&mut dst, n, &stream, |px| px.copy_from_slice(&data))
            .unwrap();
        busy.queue(&stream);
        // A download never redeemed: its slot is written while the ring drops.
        let _unredeemed = ring.download(&src, n, &stream).unwrap();
        // Dropped here with both copies queued behind ~2 ms of work: the pinned
        // slots must outlive them.
    }
    check(
        &format_args!("upload of a dropped ring"),
        &device_contents(&dst),
        s,
    );
    stream.synchronize().unwrap();
}

// ---------------------------------------------------------------------------------
// prefixes, bad input, zero elements
// ---------------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn prefix_transfers_leave_the_rest_of_the_device_buffer_untouched() {
    let (_ctx, stream) = gpu();
    let mut ring = StagingRing::new();
    let len = 150_528 / 4;
    for n in [1, 1000, len / 2, len - 1] {
        let (s_rest, s_with, s_up, s_down) = (seed(), seed(), seed(), seed());
        let mut d = device_with::<f32>(len, s_rest);
        ring.upload_with(&mut d, n, &stream, |px| {
            assert_eq!(px.len(), n);
            fill_pattern(px, s_with);
        })
        .unwrap();
        let back = device_contents(&d);
        check(&format_args!("upload_with prefix {n}"), &back[..n], s_with);
        check_at(&format_args!("past upload_with {n}"), &back[n..], n, s_rest);

        let mut d = device_with::<f32>(len, s_rest);
        ring.upload(&mut d, &pattern::<f32>(n, s_up), &stream)
            .unwrap();
        let back = device_contents(&d);
        check(&format_args!("upload prefix {n}"), &back[..n], s_up);
        check_at(&format_args!("past upload {n}"), &back[n..], n, s_rest);

        let d = device_with::<f32>(len, s_down);
        let t = ring.download(&d, n, &stream).unwrap();
        assert_eq!(t.len(), n);
        let got = ring.wait(&t).unwrap();
        assert_eq!(got.len(), n, "a prefix download returns n elements");
        check(&format_args!("download prefix {n}"), got, s_down);
        check(
            &format_args!("device after download {n}"),
            &device_contents(&d),
            s_down,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn bad_input_is_refused_before_any_driver_call_and_changes_nothing() {
    let (_ctx, stream) = gpu();
    // One slot: had a refused call taken it, the ticket below would go stale.
    let mut ring = StagingRing::with_slots(1).unwrap();
    let len = 4096;
    let (s_dev, s_held) = (seed(), seed());
    let mut d = device_with::<f32>(len, s_dev);
    let held = device_with::<f32>(len, s_held);
    let t = ring.download(&held, len, &stream).unwrap();
    let before = ring.stats();
    let capacity = ring.capacity();

    let mut called = false;
    let e = ring
        .upload_with(&mut d, len + 1, &stream, |_| called = true)
        .unwrap_err();
    assert!(!called, "fill must not run for a refused upload");
    assert_eq!(
        e,
        Error::ExceedsDeviceBuffer {
            op: "StagingRing::upload_with",
            n: len + 1,
            len
        }
    );
    assert!(e.to_string().contains(&format!("{}", len + 1)), "{e}");
    assert!(e.to_string().contains(&format!("{len}")), "{e}");

    let e = ring
        .upload(&mut d, &pattern::<f32>(len + 1, seed()), &stream)
        .unwrap_err();
    assert!(
        matches!(e, Error::ExceedsDeviceBuffer { op: "StagingRing::upload", n, len: l } if n == len + 1 && l == len),
        "{e:?}"
    );

    let e = ring.download(&d, len + 1, &stream).unwrap_err();
    assert_eq!(
        e,
        Error::ExceedsDeviceBuffer {
            op: "StagingRing::download",
            n: len + 1,
            len
        }
    );

    // A byte count that overflows: refused before the length check.
    let e = ring
        .upload_with(&mut d, usize::MAX, &stream, |_| called = true)
        .unwrap_err();
    assert!(!called);
    assert!(
        matches!(
            e,
            Error::SizeOverflow {
                n: usize::MAX,
                elem_bytes: 4,
                ..
            }
        ),
        "{e:?}"
    );
    let e = ring.download(&d, usize::MAX / 2, &stream).unwrap_err();
    assert!(
        matches!(e, Error::SizeOverflow { elem_bytes: 4, .. }),
        "{e:?}"
    );

    assert_eq!(ring.stats(), before, "refused calls count nothing");
    assert_eq!(ring.capacity(), capacity, "refused calls pin nothing");
    check(
        &format_args!("ticket taken before the refused calls"),
        ring.wait(&t).expect("no refused call took the slot"),
        s_held,
    );
    check(
        &format_args!("device after refused calls"),
        &device_contents(&d),
        s_dev,
    );

    // Zero elements: nothing moves, nothing is counted, no slot is taken.
    let mut fill_len = None;
    ring.upload_with(&mut d, 0, &stream, |px: &mut [f32]| {
        fill_len = Some(px.len())
    })
    .unwrap();
    assert_eq!(fill_len, Some(0), "fill runs once, with an empty slice");
    ring.upload(&mut d, &[], &stream).unwrap();
    let empty = ring.download(&d, 0, &stream).unwrap();
    assert!(empty.is_empty());
    assert_eq!(ring.wait(&empty).unwrap(), &[] as &[f32]);
    assert_eq!(ring.stats(), before, "zero elements count nothing");
    assert_eq!(ring.capacity(), capacity);
    check(
        &format_args!("ticket after zero-element calls"),
        ring.wait(&t).expect("no zero-element call took the slot"),
        s_held,
    );
    check(
        &format_args!("device after zero-element calls"),
        &device_contents(&d),
        s_dev,
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_panic_inside_fill_leaves_the_ring_working() {
    let (_ctx, stream) = gpu();
    let n = 150_528 / 4;
    // On a fresh ring (the panic comes right after the slot is first pinned) and on
    // one in use (a slot reused after a transfer), with one slot and with three.
    for (slots, warm) in [(1, false), (1, true), (3, false), (3, true)] {
        let mut ring = StagingRing::with_slots(slots).unwrap();
        let s_before = seed();
        let mut d = device_with::<f32>(n, seed());
        if warm {
            ring.upload_with(&mut d, n, &stream, |px| fill_pattern(px, s_before))
                .unwrap();
        } else {
            d.copy_from_host(&pattern::<f32>(n, s_before)).unwrap();
        }
        let before = ring.stats();

        let r = catch_unwind(AssertUnwindSafe(|| {
            ring.upload_with(&mut d, n, &stream, |px: &mut [f32]| {
                px.fill(-1.0);
                panic!("fill fails on purpose");
            })
        }));
        let payload = r.expect_err("the panic propagates");
        assert_eq!(
            payload.downcast_ref::<&str>().copied(),
            Some("fill fails on purpose")
        );
        let after = ring.stats();
        assert_eq!(after.uploads, before.uploads, "nothing was queued");
        assert_eq!(after.bytes_uploaded, before.bytes_uploaded);
        stream.synchronize().unwrap();
        check(
            &format_args!("device after a panicking fill (slots {slots}, warm {warm})"),
            &device_contents(&d),
            s_before,
        );

        // The ring goes on: an upload and a download through every slot.
        for _ in 0..slots + 1 {
            let s = seed();
            ring.upload_with(&mut d, n, &stream, |px| fill_pattern(px, s))
                .unwrap();
            let t = ring.download(&d, n, &stream).unwrap();
            check(
                &format_args!("after a panicking fill (slots {slots}, warm {warm})"),
                ring.wait(&t).unwrap(),
                s,
            );
        }
        let s = ring.stats();
        assert_eq!(s.uploads, before.uploads + slots as u64 + 1, "{s:?}");
        assert_eq!(s.downloads, slots as u64 + 1, "{s:?}");
    }
}

// ---------------------------------------------------------------------------------
// tickets
// ---------------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_stale_ticket_is_refused_and_a_fresh_one_works() {
    let (_ctx, stream) = gpu();
    let n = 4096;
    for slots in [1, DEFAULT_RING_SLOTS, 5] {
        let mut ring = StagingRing::with_slots(slots).unwrap();
        // slots + 1 downloads: the first one's slot is reused by the last.
        let seeds: Vec<u64> = (0..=slots).map(|_| seed()).collect();
        let bufs: Vec<DeviceBuffer<u32>> = seeds.iter().map(|&s| device_with(n, s)).collect();
        let tickets: Vec<Ticket<u32>> = bufs
            .iter()
            .map(|b| ring.download(b, n, &stream).unwrap())
            .collect();
        let reason = invalid_reason(ring.wait(&tickets[0]).unwrap_err());
        assert!(reason.contains("stale ticket"), "{reason}");
        for (k, (t, &s)) in tickets.iter().zip(&seeds).enumerate().skip(1) {
            check(
                &format_args!("ticket {k} of {} on {slots} slots", slots + 1),
                ring.wait(t).unwrap(),
                s,
            );
        }
        // Still refused after the fresh ones were redeemed.
        assert!(ring.wait(&tickets[0]).is_err());

        // An upload reuses a slot too.
        let mut d = DeviceBuffer::<u32>::alloc(n).unwrap();
        ring.upload_with(&mut d, n, &stream, |px| fill_pattern(px, seed()))
            .unwrap();
        let reason = invalid_reason(ring.wait(&tickets[1]).unwrap_err());
        assert!(reason.contains("stale ticket"), "{reason}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_ticket_of_another_ring_is_refused() {
    let (_ctx, stream) = gpu();
    let mut a = StagingRing::new();
    let mut b = StagingRing::new();
    let s = seed();
    let d = device_with::<f32>(1000, s);
    let t_a = a.download(&d, 1000, &stream).unwrap();
    let t_b = b.download(&d, 1000, &stream).unwrap();
    // Both rings' first ticket: same slot, same generation, another ring.
    let reason = invalid_reason(b.wait(&t_a).unwrap_err());
    assert!(reason.contains("another ring"), "{reason}");
    let reason = invalid_reason(a.wait(&t_b).unwrap_err());
    assert!(reason.contains("another ring"), "{reason}");
    let empty = a.download(&d, 0, &stream).unwrap();
    let reason = invalid_reason(b.wait(&empty).unwrap_err());
    assert!(reason.contains("another ring"), "{reason}");
    check(&format_args!("ring a"), a.wait(&t_a).unwrap(), s);
    check(&format_args!("ring b"), b.wait(&t_b).unwrap(), s);
}

// ---------------------------------------------------------------------------------
// copy-in from a pageable slice
// ---------------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn upload_copies_the_slice_before_returning() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut ring = StagingRing::new();
    warm(&mut ring, &stream, 4_915_200);
    for bytes in [4 * KIB, 150_528, MIB + 4, 4_915_200] {
        let n = bytes / 4;
        let (s_sent, s_after) = (seed(), seed());
        let mut src = pattern::<f32>(n, s_sent);
        let mut d = DeviceBuffer::<f32>::alloc(n).unwrap();
        // The DMA waits behind ~1 ms of work; the slice is overwritten at once.
        busy.queue(&stream);
        ring.upload(&mut d, &src, &stream).unwrap();
        fill_pattern(&mut src, s_after);
        drop(src);
        check(
            &format_args!("upload of {bytes} B"),
            &device_contents(&d),
            s_sent,
        );
    }
    // Single-threaded copy-in gives the same.
    ring.set_copy_threads(1);
    let n = 4_915_200 / 4;
    let s = seed();
    let mut src = pattern::<f32>(n, s);
    let mut d = DeviceBuffer::<f32>::alloc(n).unwrap();
    busy.queue(&stream);
    ring.upload(&mut d, &src, &stream).unwrap();
    fill_pattern(&mut src, seed());
    check(
        &format_args!("single-threaded upload"),
        &device_contents(&d),
        s,
    );
}

// ---------------------------------------------------------------------------------
// slot_waits
// ---------------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn one_slot_and_back_to_back_large_uploads_must_wait() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut ring = StagingRing::with_slots(1).unwrap();
    warm(&mut ring, &stream, 4_915_200);
    let n = 4_915_200 / 4;
    let uploads = 4;
    let seeds: Vec<u64> = (0..uploads).map(|_| seed()).collect();
    let data: Vec<Vec<f32>> = seeds.iter().map(|&s| pattern(n, s)).collect();
    let mut bufs: Vec<DeviceBuffer<f32>> = (0..uploads)
        .map(|_| DeviceBuffer::alloc(n).unwrap())
        .collect();
    // The first DMA waits behind ~1 ms of work, and each fill copies prepared data:
    // the second upload finds its slot in flight.
    busy.queue(&stream);
    for (d, src) in bufs.iter_mut().zip(&data) {
        ring.upload_with(d, n, &stream, |px| px.copy_from_slice(src))
            .unwrap();
    }
    let st = ring.stats();
    assert!(
        (1..uploads as u64).contains(&st.slot_waits),
        "one slot, {uploads} back-to-back uploads: {st:?}"
    );
    assert_eq!(st.uploads, uploads as u64);
    assert_eq!(st.allocations, 1, "{st:?}");
    for (k, (d, &s)) in bufs.iter().zip(&seeds).enumerate() {
        check(&format_args!("upload {k}"), &device_contents(d), s);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn three_slots_with_a_synchronize_between_frames_never_wait() {
    let (_ctx, stream) = gpu();
    let n = 150_528 / 4;
    let mut input = DeviceBuffer::<f32>::alloc(n).unwrap();
    let mut output = DeviceBuffer::<f32>::alloc(n).unwrap();
    let mut ring = StagingRing::new();
    let frames = 50;
    for k in 0..frames {
        let s = seed();
        ring.upload_with(&mut input, n, &stream, |px| fill_pattern(px, s))
            .unwrap();
        stream.memcpy_dtod(&input, &mut output).unwrap();
        let t = ring.download(&output, n, &stream).unwrap();
        check(&format_args!("frame {k}"), ring.wait(&t).unwrap(), s);
        ring.synchronize().unwrap();
    }
    let st = ring.stats();
    assert_eq!(st.slot_waits, 0, "{st:?}");
    assert_eq!((st.uploads, st.downloads), (frames, frames));
    assert_eq!(st.allocations, 3, "one per slot: {st:?}");
}

// ---------------------------------------------------------------------------------
// frame loops
// ---------------------------------------------------------------------------------

/// Elements of one frame: 112x112x3 f32, 150528 bytes.
const FRAME_N: usize = 150_528 / 4;

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_frame_loop_of_10_000_frames_checks_every_output() {
    const FRAMES: u64 = 10_000;
    let (_ctx, stream) = gpu();
    let mut input = DeviceBuffer::<f32>::alloc(FRAME_N).unwrap();
    let mut output = DeviceBuffer::<f32>::alloc(FRAME_N).unwrap();
    // As the crate's example: one ring up, one ring down.
    let (mut up, mut down) = (StagingRing::new(), StagingRing::new());
    let base = seed() << 20;
    let started = Instant::now();
    let mut previous: Option<(u64, Ticket<f32>)> = None;
    for k in 0..FRAMES {
        let s = base + k;
        // Preprocess frame k straight into pinned memory.
        up.upload_with(&mut input, FRAME_N, &stream, |px| fill_pattern(px, s))
            .unwrap();
        // The device step: the "model" copies its input to its output.
        stream.memcpy_dtod(&input, &mut output).unwrap();
        let ticket = down.download(&output, FRAME_N, &stream).unwrap();
        // Meanwhile, post-process frame k - 1.
        if let Some((j, t)) = previous.replace((k, ticket)) {
            check(&format_args!("frame {j}"), down.wait(&t).unwrap(), base + j);
        }
    }
    let (j, t) = previous.expect("a last frame");
    check(&format_args!("frame {j}"), down.wait(&t).unwrap(), base + j);
    let elapsed = started.elapsed();

    let (u, d) = (up.stats(), down.stats());
    let bytes = FRAMES * 150_528;
    assert_eq!(
        (u.uploads, u.downloads, u.bytes_uploaded),
        (FRAMES, 0, bytes)
    );
    assert_eq!(
        (d.downloads, d.uploads, d.bytes_downloaded),
        (FRAMES, 0, bytes)
    );
    assert_eq!(u.allocations, 3, "one per slot, then reused: {u:?}");
    assert_eq!(d.allocations, 3, "one per slot, then reused: {d:?}");
    println!(
        "{FRAMES} frames in {elapsed:?} ({:.1} us a frame); slot waits: up {}, down {}",
        elapsed.as_secs_f64() * 1e6 / FRAMES as f64,
        u.slot_waits,
        d.slot_waits
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn eight_threads_each_with_its_own_ring_and_stream() {
    const THREADS: usize = 8;
    const FRAMES: u64 = 500;
    let (ctx, _stream) = gpu();
    let stats: Vec<RingStats> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|thread| {
                let ctx = &ctx;
                scope.spawn(move || {
                    ctx.bind_to_thread().expect("bind the context");
                    let stream = Stream::new(ctx).expect("Stream::new");
                    let mut input = DeviceBuffer::<f32>::alloc(FRAME_N).unwrap();
                    let mut output = DeviceBuffer::<f32>::alloc(FRAME_N).unwrap();
                    // One ring for both directions: two transfers a frame, and the
                    // previous frame's ticket is redeemed within three.
                    let mut ring = StagingRing::new();
                    let base = seed() << 20;
                    let mut previous: Option<(u64, Ticket<f32>)> = None;
                    for k in 0..FRAMES {
                        let s = base + k;
                        ring.upload_with(&mut input, FRAME_N, &stream, |px| fill_pattern(px, s))
                            .unwrap();
                        stream.memcpy_dtod(&input, &mut output).unwrap();
                        let ticket = ring.download(&output, FRAME_N, &stream).unwrap();
                        if let Some((j, t)) = previous.replace((k, ticket)) {
                            check(
                                &format_args!("thread {thread} frame {j}"),
                                ring.wait(&t).unwrap(),
                                base + j,
                            );
                        }
                    }
                    let (j, t) = previous.expect("a last frame");
                    check(
                        &format_args!("thread {thread} frame {j}"),
                        ring.wait(&t).unwrap(),
                        base + j,
                    );
                    ring.stats()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a worker thread panicked"))
            .collect()
    });
    for (thread, s) in stats.iter().enumerate() {
        assert_eq!(
            (s.uploads, s.downloads),
            (FRAMES, FRAMES),
            "thread {thread}: {s:?}"
        );
        assert_eq!(s.bytes_uploaded, FRAMES * 150_528, "thread {thread}");
        assert_eq!(s.bytes_downloaded, FRAMES * 150_528, "thread {thread}");
        assert_eq!(s.allocations, 3, "thread {thread}: one per slot: {s:?}");
    }
}
