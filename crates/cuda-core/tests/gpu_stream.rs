//! GPU tests of the stream-ordered layer: queued copies and memsets through views at
//! odd offsets and lengths, events, `Stream::wait`, and the input errors raised
//! before any driver call.
//!
//! Every test needs a CUDA GPU and is `#[ignore]`d; run them with
//! `cargo xtask test-gpu` (or `cargo test -p cuda-core --test gpu_stream --
//! --ignored`). Each copy's destination is pre-filled with another pattern, and
//! after each operation the *whole* destination buffer is compared: the elements it
//! should have written, and the rest, which must be untouched.

mod common;

use bytemuck::Pod;
use common::*;
use cuda_core::{DeviceBuffer, Error, Event, PinnedBuffer, Stream};

/// `v` with `with.len()` elements from `at` on replaced by `with`: what a copy of
/// `with` to element `at` leaves.
fn with_copied<T: Pod>(v: &[T], at: usize, with: &[T]) -> Vec<T> {
    let mut out = v.to_vec();
    out[at..at + with.len()].copy_from_slice(with);
    out
}

/// `bytes` as elements of `T` (a whole number of them).
fn from_bytes<T: Pod>(bytes: &[u8]) -> Vec<T> {
    let mut v = vec![T::zeroed(); bytes.len() / std::mem::size_of::<T>()];
    bytemuck::cast_slice_mut::<T, u8>(&mut v).copy_from_slice(bytes);
    v
}

/// Views of a buffer of `n` elements used by the copy tests: (source start, source
/// end, destination start, destination end). Odd offsets and lengths, a single
/// element at the very end, a destination longer than the source, and the whole
/// buffer.
fn copy_cases(n: usize) -> [(usize, usize, usize, usize); 5] {
    [
        (3, 1000, 17, 2000),
        (n - 1, n, n - 1, n),
        (5, 6005, 4001, 10_001),
        (0, 1, 0, 1),
        (0, n, 0, n),
    ]
}

const N: usize = 10_007;

// ---------------------------------------------------------------------------
// Copies through views
// ---------------------------------------------------------------------------

fn htod_through_views<T: Pod>(tag: &str) {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut expected: Vec<T> = pattern(N, seed(tag, 0));
    let mut d = device_with(&expected);
    let mut host = PinnedBuffer::<T>::alloc(N).expect("pinned");
    for (i, (s0, s1, d0, d1)) in copy_cases(N).into_iter().enumerate() {
        let what = format!("{tag}: upload of host[{s0}..{s1}] into device[{d0}..{d1}]");
        // New data for every call; writing waits for the previous copy from `host`.
        fill(&mut host, seed(tag, i + 1));
        let src = host.slice(s0..s1).expect("PinnedBuffer::slice");
        assert_eq!(src.len(), s1 - s0);
        let mut dst = d.slice_mut(d0..d1).expect("DeviceBuffer::slice_mut");
        assert_eq!(dst.len(), d1 - d0);
        stream
            .memcpy_htod(&src, &mut dst)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        expected = with_copied(&expected, d0, &src);
        // `copy_to_host` waits for the queued copy into `d` first.
        assert_device_holds(&what, &d, &expected);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn queued_upload_through_views_lands_there_and_nowhere_else_f32() {
    htod_through_views::<f32>("htod f32");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn queued_upload_through_views_lands_there_and_nowhere_else_u8() {
    htod_through_views::<u8>("htod u8");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn queued_upload_through_views_lands_there_and_nowhere_else_vec3() {
    assert_eq!(std::mem::size_of::<Vec3>(), 12);
    htod_through_views::<Vec3>("htod Vec3");
}

fn dtoh_through_views<T: Pod>(tag: &str) {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut d = DeviceBuffer::<T>::alloc(N).expect("alloc");
    let mut host = PinnedBuffer::<T>::alloc(N).expect("pinned");
    for (i, (s0, s1, d0, d1)) in copy_cases(N).into_iter().enumerate() {
        let what = format!("{tag}: download of device[{s0}..{s1}] into host[{d0}..{d1}]");
        let device_data: Vec<T> = pattern(N, seed(tag, 2 * i));
        d.copy_from_host(&device_data).expect("copy_from_host");
        fill(&mut host, seed(tag, 2 * i + 1));
        let before = host.to_vec();
        {
            let src = d.slice(s0..s1).expect("DeviceBuffer::slice");
            let mut dst = host.slice_mut(d0..d1).expect("PinnedBuffer::slice_mut");
            assert_eq!(dst.len(), d1 - d0);
            stream
                .memcpy_dtoh(&src, &mut dst)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            // Reading through the view waits for the copy into it.
            assert_same(
                &what,
                &with_copied(&before[d0..d1], 0, &device_data[s0..s1]),
                &dst,
            );
        }
        // And so does reading the whole buffer: the rest is untouched.
        assert_same(
            &what,
            &with_copied(&before, d0, &device_data[s0..s1]),
            &host,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn queued_download_through_views_lands_there_and_nowhere_else_f32() {
    dtoh_through_views::<f32>("dtoh f32");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn queued_download_through_views_lands_there_and_nowhere_else_u8() {
    dtoh_through_views::<u8>("dtoh u8");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn queued_download_through_views_lands_there_and_nowhere_else_vec3() {
    dtoh_through_views::<Vec3>("dtoh Vec3");
}

fn dtod_through_views<T: Pod>(tag: &str) {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut a = DeviceBuffer::<T>::alloc(N).expect("alloc");
    let mut expected: Vec<T> = pattern(N, seed(tag, 0));
    let mut b = device_with(&expected);
    let mut a_data: Vec<T> = Vec::new();
    for (i, (s0, s1, d0, d1)) in copy_cases(N).into_iter().enumerate() {
        let what = format!("{tag}: device copy of a[{s0}..{s1}] into b[{d0}..{d1}]");
        a_data = pattern(N, seed(tag, i + 1));
        a.copy_from_host(&a_data).expect("copy_from_host");
        // Views of views: the same elements reached in two steps.
        let whole = a.slice(..).expect("slice(..)");
        let src = whole.subview(s0..s1).expect("DeviceView::subview");
        let dst = b.slice_mut(d0..).expect("slice_mut");
        let mut dst = dst.into_slice_mut(..d1 - d0).expect("into_slice_mut");
        stream
            .memcpy_dtod(&src, &mut dst)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        expected = with_copied(&expected, d0, &a_data[s0..s1]);
        assert_device_holds(&what, &b, &expected);
        // The source is unchanged.
        assert_device_holds(&format!("{what}: source"), &a, &a_data);
    }
    // A whole buffer into a longer one.
    let mut long = device_with(&pattern::<T>(N + 13, seed(tag, 100)));
    let before = device_contents(&long);
    stream.memcpy_dtod(&b, &mut long).expect("memcpy_dtod");
    assert_device_holds(
        &format!("{tag}: whole buffer into a longer one"),
        &long,
        &with_copied(&before, 0, &expected),
    );
    // DeviceViewMut::slice_mut and DeviceViewMut::slice reach the same elements:
    // long[7..][2..102] is long[9..109].
    let mut outer = long.slice_mut(7..).expect("slice_mut");
    let mut inner = outer.slice_mut(2..102).expect("DeviceViewMut::slice_mut");
    stream
        .memcpy_dtod(&a.slice(..100).expect("slice"), &mut inner)
        .expect("memcpy_dtod into a view of a view");
    let seen = outer.slice(2..102).expect("DeviceViewMut::slice");
    let mut back: Vec<T> = pattern(100, seed(tag, 101));
    stream
        .memcpy_dtoh_sync(&seen, &mut back)
        .expect("memcpy_dtoh_sync");
    assert_same(&format!("{tag}: view of a view"), &a_data[..100], &back);
    assert_device_holds(
        &format!("{tag}: view of a view, whole buffer"),
        &long,
        &with_copied(&with_copied(&before, 0, &expected), 9, &a_data[..100]),
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn queued_device_copy_through_views_lands_there_and_nowhere_else_f32() {
    dtod_through_views::<f32>("dtod f32");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn queued_device_copy_through_views_lands_there_and_nowhere_else_u8() {
    dtod_through_views::<u8>("dtod u8");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn queued_device_copy_through_views_lands_there_and_nowhere_else_vec3() {
    dtod_through_views::<Vec3>("dtod Vec3");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn sync_copies_through_views_take_any_host_memory() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut expected: Vec<f32> = pattern(N, seed("sync views", 0));
    let mut d = device_with(&expected);
    for (i, (s0, s1, d0, d1)) in copy_cases(N).into_iter().enumerate() {
        let what = format!("sync copies host[{s0}..{s1}] <-> device[{d0}..{d1}]");
        let host: Vec<f32> = pattern(N, seed("sync views", i + 1));
        let mut dst = d.slice_mut(d0..d1).expect("slice_mut");
        stream
            .memcpy_htod_sync(&host[s0..s1], &mut dst)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        expected = with_copied(&expected, d0, &host[s0..s1]);
        assert_device_holds(&what, &d, &expected);

        let mut back: Vec<f32> = pattern(N, seed("sync views back", i));
        let before = back.clone();
        stream
            .memcpy_dtoh_sync(&d.slice(s0..s1).expect("slice"), &mut back[d0..d1])
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_same(&what, &with_copied(&before, d0, &expected[s0..s1]), &back);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn byte_views_cut_a_buffer_at_any_byte() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let n = 4099;
    let data: Vec<f32> = pattern(n, seed("bytes", 0));
    let mut d = device_with(&data);
    let mut expected_bytes: Vec<u8> = bytemuck::cast_slice(&data).to_vec();

    // Upload 1001 bytes at byte 5 (inside the second f32, ending mid-element).
    let mut host = PinnedBuffer::<u8>::alloc(1001).expect("pinned");
    fill(&mut host, seed("bytes", 1));
    let mut bytes = d.as_bytes_mut();
    assert_eq!(bytes.len(), n * 4);
    let mut at5 = bytes.slice_mut(5..).expect("slice_mut");
    stream
        .memcpy_htod(&host, &mut at5)
        .expect("memcpy_htod at byte 5");
    expected_bytes[5..1006].copy_from_slice(&host);
    let expected: Vec<f32> = from_bytes(&expected_bytes);
    assert_device_holds("1001 bytes at byte 5", &d, &expected);

    // Set bytes 4097..4103 (across an element boundary).
    stream
        .memset_bytes(
            &mut d.as_bytes_mut().into_slice_mut(4097..4103).expect("range"),
            0x3c,
        )
        .expect("memset_bytes");
    expected_bytes[4097..4103].fill(0x3c);
    let expected: Vec<f32> = from_bytes(&expected_bytes);
    assert_device_holds("memset of bytes 4097..4103", &d, &expected);

    // Download bytes 3..16_000 through a read-only byte view.
    let mut back = PinnedBuffer::<u8>::alloc(16_000).expect("pinned");
    fill(&mut back, seed("bytes", 2));
    let garbage = back.to_vec();
    stream
        .memcpy_dtoh(&d.as_bytes().slice(3..16_000).expect("range"), &mut back)
        .expect("memcpy_dtoh of bytes");
    assert_same(
        "bytes 3..16000",
        &with_copied(&garbage, 0, &expected_bytes[3..16_000]),
        &back,
    );
}

// ---------------------------------------------------------------------------
// Memsets
// ---------------------------------------------------------------------------

/// memset_zeros and memset_bytes on odd views of a buffer of `T`; memset_u32 where
/// `T` is 4 bytes wide (given as `u32_value`), refused otherwise.
fn memsets_through_views<T: Pod>(tag: &str, u32_value: Option<u32>) {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut expected: Vec<T> = pattern(N, seed(tag, 0));
    let mut d = device_with(&expected);
    let elem = std::mem::size_of::<T>();
    fn bytes_of<T: Pod>(expected: &mut [T], range: std::ops::Range<usize>, byte: u8) {
        let b: &mut [u8] = bytemuck::cast_slice_mut(&mut expected[range]);
        b.fill(byte);
    }

    stream
        .memset_zeros(&mut d.slice_mut(3..1004).expect("range"))
        .expect("memset_zeros");
    bytes_of(&mut expected, 3..1004, 0);
    assert_device_holds(&format!("{tag}: memset_zeros of [3..1004]"), &d, &expected);

    for (i, range) in [1..2, N - 7..N, 2001..7003].into_iter().enumerate() {
        // A different, non-zero byte per call.
        let byte = (0x11 * (i as u8 + 1)) ^ 0x80;
        stream
            .memset_bytes(&mut d.slice_mut(range.clone()).expect("range"), byte)
            .expect("memset_bytes");
        bytes_of(&mut expected, range.clone(), byte);
        assert_device_holds(
            &format!("{tag}: memset_bytes({byte:#04x}) of {range:?}"),
            &d,
            &expected,
        );
    }

    let target = 501..N - 3;
    let mut view = d.slice_mut(target.clone()).expect("range");
    match u32_value {
        Some(value) => {
            assert_eq!(elem, 4);
            stream.memset_u32(&mut view, value).expect("memset_u32");
            for x in &mut expected[target.clone()] {
                *x = bytemuck::cast_slice::<u32, T>(&[value])[0];
            }
        }
        None => {
            let e = stream.memset_u32(&mut view, 0xdead_beef).unwrap_err();
            assert!(
                matches!(&e, Error::InvalidArgument { op: "memset_u32", reason }
                    if reason.contains(&format!("{elem} bytes"))),
                "{tag}: {e:?}"
            );
        }
    }
    assert_device_holds(&format!("{tag}: memset_u32 of {target:?}"), &d, &expected);

    // The whole buffer.
    stream
        .memset_zeros(&mut d)
        .expect("memset_zeros of the whole buffer");
    assert_all_zero(&format!("{tag}: whole buffer zeroed"), &device_contents(&d));
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn memsets_through_views_f32() {
    memsets_through_views::<f32>("memset f32", Some((-1.75f32).to_bits()));
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn memsets_through_views_u8() {
    memsets_through_views::<u8>("memset u8", None);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn memsets_through_views_vec3() {
    memsets_through_views::<Vec3>("memset Vec3", None);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn memset_u32_of_a_u32_buffer_sets_every_element() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let n = 16 * MIB / 4 + 3;
    let mut d = device_with(&pattern::<u32>(n, seed("memset u32", 0)));
    for value in [0x0102_0304u32, 0xa5a5_5a5a] {
        stream.memset_u32(&mut d, value).expect("memset_u32");
        let back = device_contents(&d);
        if let Some(i) = back.iter().position(|&x| x != value) {
            panic!("memset_u32({value:#x}): element {i} is {:#x}", back[i]);
        }
    }
}

// ---------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn event_query_is_false_while_copies_run_and_true_after_synchronize() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut event = Event::new(&ctx).expect("Event::new");
    assert!(!event.as_raw().is_null());
    assert!(event.context().same_as(&ctx));
    assert!(!event.has_timing());
    // An event never recorded is done.
    assert!(event.query().expect("query"), "an unrecorded event is done");
    event
        .synchronize()
        .expect("synchronize an unrecorded event");
    // Recording on an idle stream: done as soon as the device gets there.
    event.record(&stream).expect("record on an idle stream");
    event.synchronize().expect("synchronize");
    assert!(event.query().expect("query"));

    // Four 64 MiB uploads: milliseconds of work, against microseconds to queue them.
    let len = 64 * MIB;
    let mut host = PinnedBuffer::<u8>::alloc(len).expect("pinned");
    let mut d = DeviceBuffer::<u8>::alloc(len).expect("alloc");
    for round in 0..2 {
        fill(&mut host, seed("event query", round));
        for _ in 0..4 {
            stream.memcpy_htod(&host, &mut d).expect("memcpy_htod");
        }
        event.record(&stream).expect("record");
        assert!(
            !event.query().expect("query"),
            "round {round}: the event reports done while 256 MiB of copies are queued"
        );
        assert!(
            !stream.query().expect("stream query"),
            "round {round}: the stream reports idle while 256 MiB of copies are queued"
        );
        event.synchronize().expect("event synchronize");
        assert!(
            event.query().expect("query"),
            "round {round}: after synchronize"
        );
        assert!(stream.query().expect("stream query"), "round {round}");
        assert_device_holds(&format!("round {round}"), &d, &host);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn event_synchronize_waits_for_the_copies_recorded_before_it() {
    // `Event::synchronize` also tells the buffers that what was queued before the
    // event is done, so their accessors stop waiting: were the wait not real, the
    // reads below would see the garbage the destinations were filled with.
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut event = Event::new(&ctx).expect("Event::new");
    for (i, len) in [1usize, 4 * KIB + 1, 16 * MIB].into_iter().enumerate() {
        let mut src = PinnedBuffer::<u32>::alloc(len).expect("pinned src");
        fill(&mut src, seed("event", i));
        let mut dst = PinnedBuffer::<u32>::alloc(len).expect("pinned dst");
        fill(&mut dst, seed("event-garbage", i));
        let mut d = DeviceBuffer::<u32>::alloc(len).expect("device");
        stream.memcpy_htod(&src, &mut d).expect("memcpy_htod");
        stream.memcpy_dtoh(&d, &mut dst).expect("memcpy_dtoh");
        event.record(&stream).expect("record");
        event.synchronize().expect("event synchronize");
        assert_same(&format!("event-ordered DMA of {len} u32"), &src, &dst);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn elapsed_ms_of_a_64_mib_copy_is_plausible() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let (mut start, mut end) = (
        Event::with_timing(&ctx).expect("with_timing"),
        Event::with_timing(&ctx).expect("with_timing"),
    );
    assert!(start.has_timing() && end.has_timing());
    let len = 64 * MIB;
    let mut host = PinnedBuffer::<u8>::alloc(len).expect("pinned");
    fill(&mut host, seed("elapsed", 0));
    let mut d = DeviceBuffer::<u8>::alloc(len).expect("alloc");
    // Warm up the path once.
    stream.memcpy_htod(&host, &mut d).expect("memcpy_htod");
    stream.synchronize().expect("synchronize");

    start.record(&stream).expect("record start");
    stream.memcpy_htod(&host, &mut d).expect("memcpy_htod");
    end.record(&stream).expect("record end");
    end.synchronize().expect("end synchronize");
    let ms = start.elapsed_ms(&end).expect("elapsed_ms");
    eprintln!(
        "64 MiB upload: {ms:.3} ms ({:.1} GB/s)",
        len as f64 / (ms as f64 * 1e6)
    );
    // 64 MiB over PCIe takes about 1.2 ms at 55 GB/s (Gen5) and 5 ms at 13 GB/s
    // (Gen3): 0.1 ms would be 670 GB/s, 100 ms 0.67 GB/s.
    assert!(ms > 0.1 && ms < 100.0, "64 MiB upload timed at {ms} ms");
    assert_device_holds("timed upload", &d, &host);

    // While the end event is pending the driver answers CUDA_ERROR_NOT_READY.
    start.record(&stream).expect("record start");
    for _ in 0..4 {
        stream.memcpy_htod(&host, &mut d).expect("memcpy_htod");
    }
    end.record(&stream).expect("record end");
    let e = start.elapsed_ms(&end).unwrap_err();
    assert_eq!(
        e.driver_code(),
        Some(cuda_core::sys::CUDA_ERROR_NOT_READY),
        "elapsed_ms with 256 MiB of copies still queued: {e:?}"
    );
    end.synchronize().expect("end synchronize");
    let ms4 = start.elapsed_ms(&end).expect("elapsed_ms");
    assert!(
        ms4 > 2.0 * ms,
        "four uploads ({ms4} ms) took less than twice one ({ms} ms)"
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn elapsed_ms_without_timing_is_invalid_argument() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut plain_a = Event::new(&ctx).expect("Event::new");
    let mut plain_b = Event::new(&ctx).expect("Event::new");
    let mut timed = Event::with_timing(&ctx).expect("with_timing");
    for e in [&mut plain_a, &mut plain_b, &mut timed] {
        e.record(&stream).expect("record");
    }
    stream.synchronize().expect("synchronize");
    for (what, r) in [
        ("two events without timing", plain_a.elapsed_ms(&plain_b)),
        ("a plain start", plain_a.elapsed_ms(&timed)),
        ("a plain end", timed.elapsed_ms(&plain_b)),
    ] {
        match r {
            Err(Error::InvalidArgument {
                op: "Event::elapsed_ms",
                reason,
            }) => assert!(reason.contains("with_timing"), "{what}: {reason}"),
            other => panic!("{what}: expected InvalidArgument, got {other:?}"),
        }
    }
    // Two timing events are fine.
    let mut timed2 = Event::with_timing(&ctx).expect("with_timing");
    timed2.record(&stream).expect("record");
    timed2.synchronize().expect("synchronize");
    let ms = timed.elapsed_ms(&timed2).expect("elapsed_ms");
    assert!(ms >= 0.0, "{ms}");
}

// ---------------------------------------------------------------------------
// Stream::wait
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn stream_wait_orders_a_second_stream_after_an_event() {
    // Stream A uploads 64 MiB into `d` and records an event; stream B waits on the
    // event, then downloads `d`. B must see the new data.
    //
    // Through `d` itself the buffer's tracker would make B's copy wait *on the host*
    // for A's (one buffer follows one stream), and `Stream::wait` would never be
    // exercised. B therefore reads the same memory through an untracked alias, as
    // memory shared with another library would be: only the device-side wait orders
    // the two copies, and without it B's download (on another copy engine) would
    // overlap A's upload and see old bytes.
    let ctx = gpu();
    let a = Stream::new(&ctx).expect("Stream::new");
    let b = Stream::new(&ctx).expect("Stream::new");
    let len = 64 * MIB;
    let mut d = device_with(&pattern::<u8>(len, seed("wait", 0)));
    let mut new = PinnedBuffer::<u8>::alloc(len).expect("pinned");
    let mut back = PinnedBuffer::<u8>::alloc(len).expect("pinned");
    let mut event = Event::new(&ctx).expect("Event::new");
    for round in 1..4 {
        fill(&mut new, seed("wait", round));
        fill(&mut back, seed("wait garbage", round));
        // SAFETY: 1. `d` is device memory of `ctx` holding `len` bytes, and outlives
        // `alias` (dropped at the end of this iteration). 2. The only write to that
        // memory while `alias` lives is A's upload below, and B's read through
        // `alias` is ordered after it on the device by `b.wait(&event)`; the host
        // touches neither until `back` is read, which waits for B.
        let alias = unsafe { DeviceBuffer::<u8>::from_raw_borrowed(&ctx, d.as_device_ptr(), len) }
            .expect("from_raw_borrowed");
        a.memcpy_htod(&new, &mut d).expect("A: memcpy_htod");
        event.record(&a).expect("record on A");
        b.wait(&event).expect("B waits on the event");
        b.memcpy_dtoh(&alias, &mut back).expect("B: memcpy_dtoh");
        assert_same(
            &format!("round {round}: B's download after waiting on A's event"),
            &new,
            &back,
        );
        drop(alias);
    }
    // An event never recorded holds nothing up.
    let never = Event::new(&ctx).expect("Event::new");
    b.wait(&never).expect("wait on an unrecorded event");
    let mut small = PinnedBuffer::<u8>::alloc(4096).expect("pinned");
    b.memcpy_dtoh(&d.slice(..4096).expect("slice"), &mut small)
        .expect("memcpy_dtoh");
    b.synchronize()
        .expect("B is not held up by an unrecorded event");
    assert_same("after waiting on an unrecorded event", &new[..4096], &small);
}

// ---------------------------------------------------------------------------
// Input errors: raised before any driver call, changing nothing
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_destination_shorter_than_the_source_is_refused_and_changes_nothing() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let big_data: Vec<f32> = pattern(100, seed("too short", 0));
    let small_data: Vec<f32> = pattern(10, seed("too short", 1));
    let mut big = device_with(&big_data);
    let mut small = device_with(&small_data);
    let mut host = PinnedBuffer::<f32>::alloc(100).expect("pinned");
    fill(&mut host, seed("too short", 2));
    let host_data = host.to_vec();
    let mut host_small = PinnedBuffer::<f32>::alloc(10).expect("pinned");
    fill(&mut host_small, seed("too short", 3));
    let host_small_data = host_small.to_vec();
    let too_short = |op, src, dst| Err(Error::DestinationTooShort { op, src, dst });

    assert_eq!(
        stream.memcpy_htod(&host, &mut small),
        too_short("memcpy_htod", 100, 10)
    );
    assert_eq!(
        stream.memcpy_htod(
            &host.slice(..50).expect("slice"),
            &mut big.slice_mut(60..).expect("slice_mut")
        ),
        too_short("memcpy_htod", 50, 40)
    );
    assert_eq!(
        stream.memcpy_dtoh(&big, &mut host_small),
        too_short("memcpy_dtoh", 100, 10)
    );
    {
        // A view that is refused as a destination records no queued work: it stays
        // idle, and the buffer's accessors have nothing to wait for.
        let mut view = host.slice_mut(90..).expect("slice_mut");
        assert_eq!(
            stream.memcpy_dtoh(&big.slice(..11).expect("slice"), &mut view),
            too_short("memcpy_dtoh", 11, 10)
        );
        assert!(view.is_idle(), "a refused copy left the view waiting");
    }
    assert_eq!(
        stream.memcpy_dtod(&big, &mut small),
        too_short("memcpy_dtod", 100, 10)
    );
    assert_eq!(
        stream.memcpy_htod_sync(&big_data, &mut small),
        too_short("memcpy_htod_sync", 100, 10)
    );
    let mut v = small_data.clone();
    assert_eq!(
        stream.memcpy_dtoh_sync(&big, &mut v),
        too_short("memcpy_dtoh_sync", 100, 10)
    );
    let e = stream.memcpy_dtod(&big, &mut small).unwrap_err();
    assert_eq!(
        e.to_string(),
        "memcpy_dtod: the destination holds 10 elements, fewer than the 100 of the source"
    );

    // Nothing was queued, nothing changed.
    assert!(stream.query().expect("query"), "a refused copy queued work");
    assert_same("refused sync download's slice", &small_data, &v);
    assert_same("pinned source", &host_data, &host);
    assert_same("pinned destination", &host_small_data, &host_small);
    assert_device_holds("device source", &big, &big_data);
    assert_device_holds("device destination", &small, &small_data);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn zero_element_copies_and_memsets_do_nothing() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let data: Vec<u16> = pattern(64, seed("zero elements", 0));
    let mut d = device_with(&data);
    let mut host = PinnedBuffer::<u16>::alloc(64).expect("pinned");
    fill(&mut host, seed("zero elements", 1));
    let host_data = host.to_vec();
    let mut empty_dev = DeviceBuffer::<u16>::alloc(0).expect("alloc(0)");

    stream
        .memcpy_htod(&host.slice(5..5).expect("slice"), &mut d)
        .expect("empty upload");
    stream
        .memcpy_htod(&host.slice(..0).expect("slice"), &mut empty_dev)
        .expect("empty upload into an empty buffer");
    {
        let mut view = host.slice_mut(3..).expect("slice_mut");
        stream
            .memcpy_dtoh(&d.slice(7..7).expect("slice"), &mut view)
            .expect("empty download");
        assert!(view.is_idle(), "an empty copy left the view waiting");
    }
    stream
        .memcpy_dtod(&empty_dev, &mut d)
        .expect("empty device copy");
    stream
        .memset_zeros(&mut d.slice_mut(9..9).expect("slice_mut"))
        .expect("empty memset_zeros");
    stream
        .memset_bytes(&mut empty_dev, 7)
        .expect("empty memset_bytes");
    // memset_u32 checks the element size first, even for no elements.
    assert!(matches!(
        stream.memset_u32(&mut d.slice_mut(64..).expect("slice_mut"), 1),
        Err(Error::InvalidArgument {
            op: "memset_u32",
            ..
        })
    ));
    stream
        .memcpy_htod_sync(&[], &mut d)
        .expect("empty sync upload");
    stream
        .memcpy_dtoh_sync(&empty_dev, &mut [])
        .expect("empty sync download");

    assert!(stream.query().expect("query"));
    assert_same("pinned buffer after empty copies", &host_data, &host);
    assert_device_holds("device buffer after empty copies", &d, &data);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn memset_u32_on_elements_not_4_bytes_wide_is_invalid_argument() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let data: Vec<u64> = pattern(33, seed("memset_u32 u64", 0));
    let mut d = device_with(&data);
    let e = stream.memset_u32(&mut d, 0x0101_0101).unwrap_err();
    assert_eq!(
        e,
        Error::InvalidArgument {
            op: "memset_u32",
            reason: "elements of 8 bytes; memset_u32 needs 4-byte elements".into()
        }
    );
    let e = stream
        .memset_u32(&mut d.slice_mut(1..5).expect("slice_mut"), 7)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                op: "memset_u32",
                ..
            }
        ),
        "{e:?}"
    );
    let mut h = device_with(&pattern::<u16>(8, seed("memset_u32 u16", 0)));
    let before = device_contents(&h);
    assert!(matches!(
        stream.memset_u32(&mut h, 9),
        Err(Error::InvalidArgument {
            op: "memset_u32",
            ..
        })
    ));
    assert!(
        stream.query().expect("query"),
        "a refused memset queued work"
    );
    assert_device_holds("u64 buffer after refused memsets", &d, &data);
    assert_device_holds("u16 buffer after a refused memset", &h, &before);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn views_out_of_range_name_the_numbers() {
    let _ctx = gpu();
    let mut d = DeviceBuffer::<f32>::alloc(100).expect("alloc");
    let oor = |op, start, end, len| Error::OutOfRange {
        op,
        start,
        end,
        len,
    };
    assert_eq!(
        d.slice(0..101).unwrap_err(),
        oor("DeviceBuffer::slice", 0, 101, 100)
    );
    #[allow(clippy::reversed_empty_ranges)] // reversed on purpose
    let reversed = 5..3;
    assert_eq!(
        d.slice(reversed).unwrap_err(),
        oor("DeviceBuffer::slice", 5, 3, 100)
    );
    assert_eq!(
        d.slice_mut(101..).unwrap_err(),
        oor("DeviceBuffer::slice_mut", 101, 100, 100)
    );
    {
        let v = d.slice(10..20).expect("slice");
        assert_eq!(
            v.slice(..11).unwrap_err(),
            oor("DeviceView::slice", 0, 11, 10)
        );
        assert_eq!(
            v.subview(3..=10).unwrap_err(),
            oor("DeviceView::slice", 3, 11, 10)
        );
        // In range: the right address.
        let sub = v.subview(3..=9).expect("subview");
        assert_eq!(sub.as_device_ptr(), d.as_device_ptr() + 13 * 4);
        assert_eq!(sub.len(), 7);
    }
    {
        let base = d.as_device_ptr();
        let mut m = d.slice_mut(50..).expect("slice_mut");
        assert_eq!(
            m.slice(..=50).unwrap_err(),
            oor("DeviceViewMut::slice", 0, 51, 50)
        );
        assert_eq!(
            m.slice_mut(49..51).unwrap_err(),
            oor("DeviceViewMut::slice_mut", 49, 51, 50)
        );
        assert_eq!(
            m.slice_mut(50..).expect("empty tail").as_device_ptr(),
            base + 400
        );
        assert_eq!(
            m.into_slice_mut(..usize::MAX).unwrap_err(),
            oor("DeviceViewMut::into_slice_mut", 0, usize::MAX, 50)
        );
    }
    let n = d.byte_len();
    assert_eq!(
        d.as_bytes().slice(n - 1..n + 1).unwrap_err(),
        oor("DeviceView::slice", n - 1, n + 1, n)
    );

    let mut p = PinnedBuffer::<f32>::alloc(64).expect("pinned");
    assert_eq!(
        p.slice(60..65).unwrap_err(),
        oor("PinnedBuffer::slice", 60, 65, 64)
    );
    assert_eq!(
        p.slice_mut(..=64).unwrap_err(),
        oor("PinnedBuffer::slice_mut", 0, 65, 64)
    );
    assert_eq!(
        p.split_at_mut(65).unwrap_err(),
        oor("PinnedBuffer::split_at_mut", 0, 65, 64)
    );
    {
        let view = p.slice(8..16).expect("slice");
        assert_eq!(
            view.slice(4..9).unwrap_err(),
            oor("PinnedView::slice", 4, 9, 8)
        );
    }
    let (left, right) = p.split_at_mut(24).expect("split_at_mut");
    assert_eq!((left.len(), right.len()), (24, 40));
    assert_eq!(
        left.slice(20..25).unwrap_err(),
        oor("PinnedViewMut::slice", 20, 25, 24)
    );
    assert_eq!(
        right.split_at(41).unwrap_err(),
        oor("PinnedViewMut::split_at", 0, 41, 40)
    );
}
