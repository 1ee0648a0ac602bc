//! GPU-tier integration tests of `cuda-core`.
//!
//! Every test needs a CUDA GPU and is `#[ignore]`d; run them with
//! `cargo xtask test-gpu` (or `cargo test -p cuda-core --test gpu -- --ignored`).
//! A test that cannot get a device fails loudly: `Context::new(0).expect(..)`,
//! never a quiet early return.
//!
//! Data is checked, not just `is_ok()`: buffers are filled with byte patterns that
//! differ per element and per call (seeded by test name and size, never zeros),
//! destinations are pre-filled with a *different* pattern, and every byte is
//! compared.
//!
//! Tests run in parallel threads of one process and share device 0's primary
//! context; nothing here leaves a sticky error behind on purpose.

use std::any::Any;
use std::ffi::c_void;
use std::mem::size_of_val;
use std::thread;

use bytemuck::{Pod, Zeroable};
use cuda_core::result::{
    self, is_page_locked, is_page_locked_range, memcpy_dtoh_async, memcpy_htod_async,
};
use cuda_core::{Context, DeviceBuffer, Error, Event, HostRegistration, PinnedBuffer, Stream};

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// Device 0's context, current on this thread. Panics (the test fails) when there
/// is no GPU: a GPU test never passes quietly without one.
#[track_caller]
fn gpu() -> Context {
    Context::new(0).expect(
        "GPU test could not get CUDA device 0 (Context::new(0) failed); \
         these tests need an NVIDIA GPU and driver",
    )
}

/// Makes no context current on this thread (`cuCtxSetCurrent(NULL)`), so that
/// whatever runs next must enter its own context.
fn unbind_thread() {
    // SAFETY: condition 1 of `ctx_set_current` allows null.
    unsafe { result::ctx_set_current(std::ptr::null_mut()) }.expect("cuCtxSetCurrent(NULL)");
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A seed that differs per test (`tag`) and per call (`n`).
fn seed(tag: &str, n: usize) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64; // FNV-1a
    for b in tag.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    splitmix64(h ^ splitmix64(n as u64))
}

/// Overwrites `dst` with a pseudo-random byte pattern determined by `seed`; no byte
/// is zero, so the pattern can never be mistaken for zeroed memory.
fn fill<T: Pod>(dst: &mut [T], seed: u64) {
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(dst);
    let s = splitmix64(seed);
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        let mut w = splitmix64(s ^ i as u64);
        // Replace any zero byte (has-zero-byte trick, then fix bytewise).
        if (w.wrapping_sub(0x0101_0101_0101_0101) & !w & 0x8080_8080_8080_8080) != 0 {
            let mut b = w.to_le_bytes();
            for x in &mut b {
                if *x == 0 {
                    *x = 0xa5;
                }
            }
            w = u64::from_le_bytes(b);
        }
        chunk.copy_from_slice(&w.to_le_bytes()[..chunk.len()]);
    }
}

fn pattern<T: Pod>(len: usize, seed: u64) -> Vec<T> {
    let mut v = vec![T::zeroed(); len];
    fill(&mut v, seed);
    v
}

/// Compares every byte; on failure names how many elements differ and the first.
#[track_caller]
fn assert_same<T: Pod>(what: &str, expected: &[T], got: &[T]) {
    assert_eq!(expected.len(), got.len(), "{what}: lengths differ");
    let e: &[u8] = bytemuck::cast_slice(expected);
    let g: &[u8] = bytemuck::cast_slice(got);
    if e == g {
        return;
    }
    let size = std::mem::size_of::<T>().max(1);
    let bad = e
        .chunks(size)
        .zip(g.chunks(size))
        .filter(|(a, b)| a != b)
        .count();
    let first = e.chunks(size).zip(g.chunks(size)).position(|(a, b)| a != b);
    let first = first.expect("some element differs");
    panic!(
        "{what}: {bad} of {} elements ({} bytes each) differ; first at element {first}: \
         expected {:02x?}, got {:02x?}",
        expected.len(),
        size,
        &e[first * size..(first + 1) * size],
        &g[first * size..(first + 1) * size],
    );
}

#[track_caller]
fn assert_all_zero<T: Pod>(what: &str, got: &[T]) {
    let g: &[u8] = bytemuck::cast_slice(got);
    if let Some(i) = g.iter().position(|&b| b != 0) {
        let nonzero = g.iter().filter(|&&b| b != 0).count();
        panic!(
            "{what}: {nonzero} of {} bytes are not zero; first at byte {i}: {:#04x}",
            g.len(),
            g[i]
        );
    }
}

/// Uploads a fresh pattern with `copy_from_host`, reads it back with `copy_to_host`
/// into a buffer pre-filled with another pattern, compares every element.
#[track_caller]
fn check_round_trip<T: Pod>(what: &str, d: &mut DeviceBuffer<T>, seed: u64) {
    let host: Vec<T> = pattern(d.len(), seed);
    d.copy_from_host(&host)
        .unwrap_or_else(|e| panic!("{what}: copy_from_host: {e}"));
    let mut back: Vec<T> = pattern(d.len(), !seed);
    d.copy_to_host(&mut back)
        .unwrap_or_else(|e| panic!("{what}: copy_to_host: {e}"));
    assert_same(what, &host, &back);
}

/// Reads `d` back and compares with `expected`.
#[track_caller]
fn assert_device_holds<T: Pod>(what: &str, d: &DeviceBuffer<T>, expected: &[T]) {
    let mut back: Vec<T> = pattern(d.len(), 0xbad_5eed);
    d.copy_to_host(&mut back)
        .unwrap_or_else(|e| panic!("{what}: copy_to_host: {e}"));
    assert_same(what, expected, &back);
}

/// `memcpy_htod_async` of all of `src` into `dst` on `stream`, then synchronizes it.
#[track_caller]
fn htod_async_sync<T: Pod>(stream: &Stream, dst: &DeviceBuffer<T>, src: &[T]) {
    assert_eq!(dst.len(), src.len());
    let _g = stream
        .context()
        .enter()
        .expect("enter the stream's context");
    // SAFETY: 1. `dst` is a live device allocation of `dst.byte_len()` ==
    // `size_of_val(src)` bytes, borrowed for this whole function. 2. `src` is
    // borrowed for this whole function and the stream is synchronized below before
    // we return, so it stays readable and unmodified until the copy completes.
    // 3. `stream` is alive and its context is current through `_g`.
    unsafe {
        memcpy_htod_async(
            dst.as_device_ptr(),
            src.as_ptr().cast::<c_void>(),
            size_of_val(src),
            stream.as_raw(),
        )
    }
    .expect("memcpy_htod_async");
    stream.synchronize().expect("stream synchronize after H2D");
}

/// `memcpy_dtoh_async` of all of `src` into `dst` on `stream`, then synchronizes it.
#[track_caller]
fn dtoh_async_sync<T: Pod>(stream: &Stream, dst: &mut [T], src: &DeviceBuffer<T>) {
    assert_eq!(dst.len(), src.len());
    let _g = stream
        .context()
        .enter()
        .expect("enter the stream's context");
    // SAFETY: 1. `src` is a live device allocation of `size_of_val(dst)` bytes,
    // borrowed for this whole function. 2. `dst` is uniquely borrowed for this whole
    // function, so the host neither reads nor writes it until the stream is
    // synchronized below. 3. `stream` is alive and its context is current via `_g`.
    unsafe {
        memcpy_dtoh_async(
            dst.as_mut_ptr().cast::<c_void>(),
            src.as_device_ptr(),
            size_of_val(dst),
            stream.as_raw(),
        )
    }
    .expect("memcpy_dtoh_async");
    stream.synchronize().expect("stream synchronize after D2H");
}

/// A 24-byte `#[repr(C)]` element without padding.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
struct Sample {
    id: u32,
    score: f32,
    flags: [u16; 4],
    value: f64,
}

/// A 3-byte element: sizes that are not a power of two or a multiple of 4.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
struct Rgb {
    r: u8,
    g: u8,
    b: u8,
}

/// An element aligned above the page size.
#[repr(C, align(65536))]
#[derive(Clone, Copy, Pod, Zeroable)]
struct PageAligned64K {
    bytes: [u8; 65536],
}

/// Element counts for 1 element, 3 elements, 4 KiB, about 1 MiB (odd count) and
/// 64 MiB of `T`.
fn round_trip_lens<T>() -> [usize; 5] {
    let size = std::mem::size_of::<T>();
    [
        1,
        3,
        (4 * KIB).div_ceil(size),
        MIB / size + 7,
        64 * MIB / size,
    ]
}

fn round_trips_of<T: Pod>(tag: &str) {
    let _ctx = gpu();
    for len in round_trip_lens::<T>() {
        let what = format!("{tag}: round trip of {len} elements");
        let mut d = DeviceBuffer::<T>::alloc(len)
            .unwrap_or_else(|e| panic!("{what}: DeviceBuffer::alloc: {e}"));
        assert_eq!(d.len(), len);
        assert!(!d.is_empty());
        assert_eq!(d.byte_len(), len * std::mem::size_of::<T>());
        assert_ne!(d.as_device_ptr(), 0, "{what}: null device pointer");
        check_round_trip(&what, &mut d, seed(tag, len));
        // A second, different pattern into the same buffer must replace the first.
        check_round_trip(&what, &mut d, seed(tag, len + 1));
    }
}

// ---------------------------------------------------------------------------
// Context
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn context_on_device_0_is_current_and_named() {
    let ctx = gpu();
    let count = Context::device_count().expect("device_count");
    assert!(count >= 1, "device_count() = {count} with a context open");
    let name = ctx.name().expect("device name");
    assert!(!name.is_empty(), "empty device name");
    assert!(!name.contains('\0'), "{name:?}");
    eprintln!("device 0: {name}, {count} device(s)");
    assert_eq!(ctx.ordinal(), 0);
    assert!(!ctx.as_raw().is_null());
    let total = ctx.total_memory().expect("total_memory");
    assert!(total >= 1 << 30, "device 0 reports {total} bytes of memory");
    assert!(format!("{ctx:?}").contains("ordinal: 0"), "{ctx:?}");

    let cur = Context::current().expect("Context::new makes the context current");
    assert!(cur.same_as(&ctx));
    assert_eq!(cur, ctx);
    assert_eq!(cur.as_raw(), ctx.as_raw());
    assert_eq!(cur.ordinal(), 0);

    // The primary context: a second `new` names the same driver context.
    let again = Context::new(0).expect("second Context::new(0)");
    assert!(again.same_as(&ctx));
    ctx.synchronize().expect("context synchronize");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn context_clone_keeps_it_alive() {
    let ctx = gpu();
    let clone = ctx.clone();
    assert!(clone.same_as(&ctx));
    drop(ctx);
    unbind_thread();
    // Only the clone is left, and nothing is current: it must still work.
    let mut d = DeviceBuffer::<u32>::alloc_in(&clone, 4099).expect("alloc_in via the clone");
    assert!(d.context().same_as(&clone));
    check_round_trip("through a clone", &mut d, seed("clone", 4099));
    clone.synchronize().expect("synchronize via the clone");
    assert!(!clone.name().expect("name via the clone").is_empty());
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn driver_is_cuda_12_or_newer() {
    let _ctx = gpu();
    let (major, minor) = Context::driver_version().expect("driver_version");
    eprintln!("driver supports CUDA {major}.{minor}");
    assert!(major >= 12, "driver version {major}.{minor}");
    assert!((0..100).contains(&minor), "driver version {major}.{minor}");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn context_past_the_device_count_is_invalid_device() {
    let ctx = gpu();
    let count = Context::device_count().expect("device_count");
    for ordinal in [count, count + 1, i32::MAX as usize + 1, usize::MAX] {
        let e = Context::new(ordinal).unwrap_err();
        assert_eq!(e, Error::InvalidDevice { ordinal, count });
        assert_eq!(
            e.to_string(),
            format!("CUDA device {ordinal} requested but {count} device(s) found")
        );
    }
    // The failed calls changed nothing on this thread.
    let cur = Context::current().expect("current after failed news");
    assert!(cur.same_as(&ctx));
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn context_from_raw_borrowed_releases_nothing() {
    let ctx = gpu();
    let mut d = DeviceBuffer::<u16>::alloc_in(&ctx, 777).expect("alloc_in");
    for i in 0..3 {
        // SAFETY: 1. `ctx.as_raw()` is device 0's primary context, retained by `ctx`,
        // which outlives the borrowed wrapper (dropped at the end of this iteration).
        let borrowed = unsafe { Context::from_raw_borrowed(ctx.as_raw()) }.expect("wrap");
        assert!(borrowed.same_as(&ctx));
        assert_eq!(borrowed.ordinal(), 0);
        assert_eq!(borrowed.device(), ctx.device());
        drop(borrowed);
        check_round_trip(
            "after dropping a borrowed context",
            &mut d,
            seed("borrowed", i),
        );
    }
    // Wrapping pushes and pops: a thread with no context still has none afterwards.
    let raw = ctx.as_raw() as usize;
    let ctx2 = ctx.clone();
    thread::spawn(move || {
        // SAFETY: 1. `raw` is the primary context retained by `ctx2`, which lives
        // until this closure ends, after `w` is dropped.
        let w = unsafe { Context::from_raw_borrowed(raw as cuda_core::sys::CUcontext) }
            .expect("wrap on another thread");
        assert!(w.same_as(&ctx2));
        drop(w);
        assert_eq!(Context::current().unwrap_err(), Error::NoContext);
    })
    .join()
    .expect("thread panicked");
}

// ---------------------------------------------------------------------------
// Stream and Event
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn stream_create_and_synchronize() {
    let ctx = gpu();
    let s1 = Stream::new(&ctx).expect("Stream::new");
    let s2 = Stream::new(&ctx).expect("second Stream::new");
    assert!(
        !s1.as_raw().is_null(),
        "a created stream is not the null stream"
    );
    assert_ne!(s1.as_raw(), s2.as_raw());
    assert!(s1.context().same_as(&ctx));
    s1.synchronize().expect("synchronize an empty stream");
    s2.synchronize().expect("synchronize an empty stream");

    // Work on the stream, then a synchronize, then the data is there.
    let src: Vec<u32> = pattern(MIB / 4, seed("stream", 1));
    let d = DeviceBuffer::<u32>::alloc(src.len()).expect("alloc");
    htod_async_sync(&s1, &d, &src);
    assert_device_holds("after stream synchronize", &d, &src);

    // A borrowed wrapper destroys nothing on drop: s1 keeps working.
    // SAFETY: 1. `s1.as_raw()` is a live stream of `ctx`, and `s1` outlives `b`.
    let b = unsafe { Stream::from_raw_borrowed(&ctx, s1.as_raw()) };
    assert_eq!(b.as_raw(), s1.as_raw());
    b.synchronize()
        .expect("synchronize via the borrowed wrapper");
    drop(b);
    let src2: Vec<u32> = pattern(MIB / 4, seed("stream", 2));
    htod_async_sync(&s1, &d, &src2);
    assert_device_holds("after dropping a borrowed stream", &d, &src2);

    // The legacy default stream (null) can be wrapped and synchronized.
    // SAFETY: 1. null is the legacy default stream, always alive.
    let legacy = unsafe { Stream::from_raw_borrowed(&ctx, std::ptr::null_mut()) };
    legacy.synchronize().expect("synchronize the legacy stream");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn event_record_and_synchronize_waits_for_queued_copies() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let event = Event::new(&ctx).expect("Event::new");
    assert!(!event.as_raw().is_null());
    assert!(event.context().same_as(&ctx));
    // Recording on an idle stream and waiting is fine.
    event.record(&stream).expect("record on an idle stream");
    event.synchronize().expect("synchronize an idle event");

    for (i, len) in [1usize, 4 * KIB + 1, 16 * MIB].into_iter().enumerate() {
        let mut src = PinnedBuffer::<u32>::alloc(len).expect("pinned src");
        fill(&mut src, seed("event", i));
        let mut dst = PinnedBuffer::<u32>::alloc(len).expect("pinned dst");
        fill(&mut dst, seed("event-garbage", i));
        let d = DeviceBuffer::<u32>::alloc(len).expect("device");
        {
            let _g = ctx.enter().expect("enter");
            // SAFETY: 1. `d` is a live allocation of `src.byte_len()` bytes. 2. `src`
            // is neither dropped nor written before `event.synchronize()` below, which
            // waits for this copy (queued before the record). 3. `stream` is a live
            // stream of `ctx`, current through `_g`.
            unsafe {
                memcpy_htod_async(
                    d.as_device_ptr(),
                    src.as_ptr().cast(),
                    src.byte_len(),
                    stream.as_raw(),
                )
            }
            .expect("memcpy_htod_async");
            // SAFETY: 1. `d` holds `dst.byte_len()` bytes. 2. `dst` is neither read
            // nor written by the host until `event.synchronize()` below returns.
            // 3. as above.
            unsafe {
                memcpy_dtoh_async(
                    dst.as_mut_ptr().cast(),
                    d.as_device_ptr(),
                    dst.byte_len(),
                    stream.as_raw(),
                )
            }
            .expect("memcpy_dtoh_async");
        }
        event.record(&stream).expect("record");
        event.synchronize().expect("event synchronize");
        assert_same(&format!("event-ordered DMA of {len} u32"), &src, &dst);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn stream_and_event_work_on_a_thread_without_a_current_context() {
    // The crate's promise: what lives in a context can be used from any thread.
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let event = Event::new(&ctx).expect("Event::new");
    let d = DeviceBuffer::<u64>::alloc(12_345).expect("alloc");
    let src: Vec<u64> = pattern(d.len(), seed("no-ctx-thread-stream", 0));
    thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(Context::current().unwrap_err(), Error::NoContext);
            htod_async_sync(&stream, &d, &src);
            stream
                .synchronize()
                .expect("stream synchronize, no context current");
            event
                .record(&stream)
                .expect("event record, no context current");
            event
                .synchronize()
                .expect("event synchronize, no context current");
            assert_eq!(Context::current().unwrap_err(), Error::NoContext);
        });
    });
    assert_device_holds("copied from another thread", &d, &src);
    // Drop them on yet another thread with no context.
    thread::spawn(move || {
        drop(event);
        drop(stream);
        drop(d);
        assert_eq!(Context::current().unwrap_err(), Error::NoContext);
    })
    .join()
    .expect("dropping on another thread panicked");
}

// ---------------------------------------------------------------------------
// DeviceBuffer
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn device_buffer_round_trip_u8() {
    round_trips_of::<u8>("round trip u8");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn device_buffer_round_trip_f32() {
    round_trips_of::<f32>("round trip f32");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn device_buffer_round_trip_f64() {
    round_trips_of::<f64>("round trip f64");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn device_buffer_round_trip_repr_c_struct() {
    assert_eq!(std::mem::size_of::<Sample>(), 24);
    round_trips_of::<Sample>("round trip Sample");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn device_buffer_round_trip_three_byte_struct() {
    assert_eq!(std::mem::size_of::<Rgb>(), 3);
    round_trips_of::<Rgb>("round trip Rgb");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn device_buffers_do_not_alias() {
    let _ctx = gpu();
    let len = 256 * KIB + 3;
    let mut bufs: Vec<DeviceBuffer<u32>> = (0..4)
        .map(|_| DeviceBuffer::alloc(len).expect("alloc"))
        .collect();
    let pats: Vec<Vec<u32>> = (0..4).map(|i| pattern(len, seed("alias", i))).collect();
    for (b, p) in bufs.iter_mut().zip(&pats) {
        b.copy_from_host(p).expect("copy_from_host");
    }
    for (i, (b, p)) in bufs.iter().zip(&pats).enumerate() {
        assert_device_holds(&format!("buffer {i} of 4"), b, p);
    }
    let mut ptrs: Vec<_> = bufs.iter().map(DeviceBuffer::as_device_ptr).collect();
    ptrs.sort_unstable();
    for w in ptrs.windows(2) {
        assert!(
            w[1] - w[0] >= (len * 4) as u64,
            "allocations overlap: {ptrs:x?}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn zeroed_reads_back_zeros() {
    let _ctx = gpu();
    fn check<T: Pod>(tag: &str) {
        for len in round_trip_lens::<T>() {
            let what = format!("{tag}: zeroed({len})");
            // Dirty device memory first, so that the allocator likely hands the same
            // bytes back to `zeroed`.
            let mut dirty = DeviceBuffer::<T>::alloc(len).expect("alloc");
            dirty
                .copy_from_host(&pattern::<T>(len, seed(tag, len)))
                .expect("dirty");
            dirty.free().expect("free dirty");
            let z = DeviceBuffer::<T>::zeroed(len).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(z.len(), len);
            let mut back: Vec<T> = pattern(len, seed(tag, !len));
            z.copy_to_host(&mut back).expect("copy_to_host");
            assert_all_zero(&what, &back);
        }
    }
    check::<u8>("zeroed u8");
    check::<f64>("zeroed f64");
    check::<Sample>("zeroed Sample");
    check::<Rgb>("zeroed Rgb");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn length_mismatch_names_the_numbers_and_changes_nothing() {
    let _ctx = gpu();
    let mut d = DeviceBuffer::<f32>::alloc(8).expect("alloc");
    let original: Vec<f32> = pattern(8, seed("mismatch", 8));
    d.copy_from_host(&original).expect("copy_from_host");

    for host in [0usize, 1, 7, 9, 1000] {
        let src: Vec<f32> = pattern(host, seed("mismatch-src", host));
        assert_eq!(
            d.copy_from_host(&src),
            Err(Error::LengthMismatch {
                op: "copy_from_host",
                host,
                expected: 8
            })
        );
        let mut dst: Vec<f32> = pattern(host, seed("mismatch-dst", host));
        let before = dst.clone();
        let e = d.copy_to_host(&mut dst).unwrap_err();
        assert_eq!(
            e,
            Error::LengthMismatch {
                op: "copy_to_host",
                host,
                expected: 8
            }
        );
        assert_eq!(
            e.to_string(),
            format!("copy_to_host: host slice has {host} elements but the transfer needs 8")
        );
        assert_same("host slice after a rejected copy_to_host", &before, &dst);
    }
    assert_device_holds("device buffer after rejected copies", &d, &original);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn zero_length_buffers_allocate_nothing() {
    let ctx = gpu();
    let bufs = [
        DeviceBuffer::<f32>::alloc(0).expect("alloc(0)"),
        DeviceBuffer::<f32>::zeroed(0).expect("zeroed(0)"),
        DeviceBuffer::<f32>::alloc_in(&ctx, 0).expect("alloc_in(0)"),
    ];
    for mut d in bufs {
        assert_eq!(d.len(), 0);
        assert!(d.is_empty());
        assert_eq!(d.byte_len(), 0);
        assert_eq!(
            d.as_device_ptr(),
            0,
            "a zero-length buffer allocated memory"
        );
        assert!(d.context().same_as(&ctx));
        d.copy_from_host(&[]).expect("copy of an empty slice in");
        d.copy_to_host(&mut []).expect("copy of an empty slice out");
        assert_eq!(
            d.copy_from_host(&[1.5]),
            Err(Error::LengthMismatch {
                op: "copy_from_host",
                host: 1,
                expected: 0
            })
        );
        let mut one = [2.5f32];
        assert_eq!(
            d.copy_to_host(&mut one),
            Err(Error::LengthMismatch {
                op: "copy_to_host",
                host: 1,
                expected: 0
            })
        );
        assert_eq!(one, [2.5]);
        d.free().expect("free of a zero-length buffer");
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn free_returns_ok_and_borrowed_views_free_nothing() {
    let ctx = gpu();
    for len in [1usize, 4 * KIB, 3 * MIB + 1] {
        let mut d = DeviceBuffer::<u8>::alloc(len).expect("alloc");
        check_round_trip("before free", &mut d, seed("free", len));
        assert_eq!(d.free(), Ok(()));
    }
    // Freeing a borrowed view leaves the owner's memory alone.
    let mut owner = DeviceBuffer::<u32>::alloc(10_000).expect("alloc");
    let data: Vec<u32> = pattern(10_000, seed("free-borrowed", 0));
    owner.copy_from_host(&data).expect("copy_from_host");
    // SAFETY: 1. `owner` is device memory of `ctx` with 40 000 bytes, alive until the
    // end of the test, after the view. 2. Nothing writes it while the view exists.
    let view =
        unsafe { DeviceBuffer::<u32>::from_raw_borrowed(&ctx, owner.as_device_ptr(), 10_000) }
            .expect("from_raw_borrowed");
    assert_eq!(view.free(), Ok(()));
    assert_device_holds("owner after freeing a borrowed view", &owner, &data);
    check_round_trip(
        "owner after freeing a borrowed view",
        &mut owner,
        seed("free-borrowed", 1),
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn from_raw_borrowed_views_existing_memory() {
    let ctx = gpu();
    let len = 65_537;
    let mut owner = DeviceBuffer::<u32>::alloc(len).expect("alloc");
    let data: Vec<u32> = pattern(len, seed("view", len));
    owner.copy_from_host(&data).expect("copy_from_host");
    {
        // SAFETY: 1. `owner` holds `len * 4` bytes of device memory of `ctx` and
        // outlives this block. 2. Nothing writes it while the views read it.
        let whole =
            unsafe { DeviceBuffer::<u32>::from_raw_borrowed(&ctx, owner.as_device_ptr(), len) }
                .expect("whole view");
        assert_eq!(whole.as_device_ptr(), owner.as_device_ptr());
        assert_device_holds("whole view", &whole, &data);
        // SAFETY: as above; a prefix of 100 elements is within the allocation.
        let prefix =
            unsafe { DeviceBuffer::<u32>::from_raw_borrowed(&ctx, owner.as_device_ptr(), 100) }
                .expect("prefix view");
        assert_device_holds("prefix view", &prefix, &data[..100]);
        // SAFETY: as above; the same `len * 4` bytes seen as bytes.
        let bytes =
            unsafe { DeviceBuffer::<u8>::from_raw_borrowed(&ctx, owner.as_device_ptr(), len * 4) }
                .expect("byte view");
        assert_device_holds("byte view", &bytes, bytemuck::cast_slice(&data));
    }
    // Writing through a view lands in the owner.
    let new: Vec<u32> = pattern(len, seed("view-write", len));
    {
        // SAFETY: 1. as above. 2. `owner` is not used while the view writes.
        let mut w =
            unsafe { DeviceBuffer::<u32>::from_raw_borrowed(&ctx, owner.as_device_ptr(), len) }
                .expect("writable view");
        w.copy_from_host(&new)
            .expect("copy_from_host through the view");
    }
    assert_device_holds("owner after a write through a view", &owner, &new);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn invalid_device_pointer_is_a_driver_error_and_the_context_survives() {
    let ctx = gpu();
    // SAFETY: this deliberately breaks condition 1 (0xdead_0000 is not an allocation
    // of `ctx`) to check that the escape hatch fails cleanly: the buffer only hands
    // the address to synchronous driver copies, which validate it against the
    // driver's allocation table and return an error code; the host never
    // dereferences it, and the view is not owning, so nothing is freed.
    let bogus = unsafe { DeviceBuffer::<u8>::from_raw_borrowed(&ctx, 0xdead_0000, 16) }
        .expect("from_raw_borrowed checks sizes only");
    let mut dst = [0x5au8; 16];
    let e = bogus.copy_to_host(&mut dst).unwrap_err();
    eprintln!("copy_to_host from 0xdead0000: {e}");
    assert!(
        matches!(e, Error::Driver(_)),
        "expected a driver error, got {e:?}"
    );
    assert!(
        e.to_string().starts_with("CUDA_ERROR_"),
        "driver errors are named: {e}"
    );
    drop(bogus);

    // The error was not sticky: the context still works.
    ctx.synchronize()
        .expect("context synchronize after the bad copy");
    let mut d = DeviceBuffer::<u64>::alloc(MIB / 8 + 5).expect("alloc after the bad copy");
    check_round_trip("round trip after the bad copy", &mut d, seed("bad-ptr", 0));
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn allocation_failure_is_out_of_memory_and_later_allocations_work() {
    let ctx = gpu();
    let e = DeviceBuffer::<u8>::alloc(1 << 50).unwrap_err(); // 1 PiB
    let Error::Driver(d) = &e else {
        panic!("expected a driver error for 1 PiB, got {e:?}");
    };
    assert_eq!(d.code(), cuda_core::sys::CUDA_ERROR_OUT_OF_MEMORY, "{e}");
    assert_eq!(d.name(), Some("CUDA_ERROR_OUT_OF_MEMORY"));
    assert!(
        e.to_string().starts_with("CUDA_ERROR_OUT_OF_MEMORY (2)"),
        "{e}"
    );
    eprintln!("1 PiB device alloc: {e}");

    let e = DeviceBuffer::<u64>::zeroed(1 << 47).unwrap_err(); // 1 PiB of u64
    assert_eq!(
        e.driver_code(),
        Some(cuda_core::sys::CUDA_ERROR_OUT_OF_MEMORY),
        "{e}"
    );
    let e = DeviceBuffer::<u8>::alloc_in(&ctx, 1 << 50).unwrap_err();
    assert_eq!(
        e.driver_code(),
        Some(cuda_core::sys::CUDA_ERROR_OUT_OF_MEMORY),
        "{e}"
    );

    let e = PinnedBuffer::<u8>::alloc(1 << 50).unwrap_err();
    eprintln!("1 PiB pinned alloc: {e}");
    assert!(matches!(e, Error::Driver(_)), "{e:?}");

    let mut d = DeviceBuffer::<f32>::alloc(MIB).expect("alloc after a failed alloc");
    check_round_trip("round trip after OOM", &mut d, seed("oom", 0));
    let mut p = PinnedBuffer::<f32>::alloc(1000).expect("pinned alloc after a failed alloc");
    fill(&mut p, seed("oom-pinned", 0));
}

// ---------------------------------------------------------------------------
// PinnedBuffer
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn pinned_buffer_is_zeroed_page_aligned_and_page_locked() {
    let ctx = gpu();
    for len in [1usize, 3, 4 * KIB + 1, MIB + 7, 64 * MIB] {
        let what = format!("PinnedBuffer::<u8>::alloc({len})");
        let mut p = PinnedBuffer::<u8>::alloc(len).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(p.len(), len);
        assert!(!p.is_empty());
        assert_eq!(p.byte_len(), len);
        assert!(p.context().expect("pinned in a context").same_as(&ctx));
        let addr = p.as_ptr() as usize;
        assert_eq!(addr % 256, 0, "{what}: {addr:#x} is not 256-byte aligned");
        assert!(is_page_locked(p.as_ptr().cast()), "{what}: not page-locked");
        assert_all_zero(&what, &p);
        // Writable through DerefMut, every element.
        let expected: Vec<u8> = pattern(len, seed("pinned-write", len));
        p.copy_from_slice(&expected);
        assert_same(&what, &expected, &p);
    }
    let p = PinnedBuffer::<Sample>::alloc_in(&ctx, 1000).expect("alloc_in");
    assert_eq!(p.byte_len(), 24_000);
    assert_all_zero("PinnedBuffer::<Sample>::alloc_in", &p);
    assert_eq!(p.as_ptr() as usize % 256, 0);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn pinned_buffer_rejects_alignment_above_a_page() {
    // `Deref` builds a `&[T]`, which must be aligned for `T`; the driver guarantees
    // page alignment only, so a type aligned above a page is a clear error, not a
    // misaligned slice.
    let ctx = gpu();
    let e = PinnedBuffer::<PageAligned64K>::alloc(1).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument { reason, .. } if reason.contains("65536")),
        "{e}"
    );
    let e = PinnedBuffer::<PageAligned64K>::alloc_in(&ctx, 1).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
    // The guaranteed 256-byte alignment is honoured.
    let p = PinnedBuffer::<u64>::alloc(3).expect("alloc");
    assert_eq!(p.as_ptr() as usize % 256, 0);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn pinned_dma_round_trip_through_a_device_buffer() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    for len in [1usize, 3, KIB + 1, MIB / 4 + 7, 16 * MIB] {
        let what = format!("pinned DMA of {len} u32");
        let mut src = PinnedBuffer::<u32>::alloc(len).expect("pinned src");
        assert_all_zero(&what, &src);
        fill(&mut src, seed("pinned-dma", len));
        let d = DeviceBuffer::<u32>::alloc(len).expect("device");
        htod_async_sync(&stream, &d, &src);
        // Check the device side through the independent synchronous path...
        assert_device_holds(&what, &d, &src);
        // ...and the D2H DMA into pinned memory pre-filled with other garbage.
        let mut dst = PinnedBuffer::<u32>::alloc(len).expect("pinned dst");
        fill(&mut dst, seed("pinned-dma-garbage", len));
        dtoh_async_sync(&stream, &mut dst, &d);
        assert_same(&what, &src, &dst);
    }
}

// ---------------------------------------------------------------------------
// Drop order
// ---------------------------------------------------------------------------

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn objects_outlive_a_dropped_context_handle_in_every_drop_order() {
    let orders = permutations(4);
    assert_eq!(orders.len(), 24);
    for (round, order) in orders.into_iter().enumerate() {
        let ctx = gpu();
        let stream = Stream::new(&ctx).expect("Stream::new");
        let event = Event::new(&ctx).expect("Event::new");
        let len = 10_000 + round;
        let mut d = DeviceBuffer::<u64>::alloc_in(&ctx, len).expect("alloc_in");
        let mut pinned = PinnedBuffer::<u64>::alloc_in(&ctx, len).expect("pinned alloc_in");
        // Drop the Context handle first, and leave nothing current: every object must
        // keep its context alive and enter it by itself.
        drop(ctx);
        unbind_thread();

        let what = format!("round {round}, drop order {order:?}");
        check_round_trip(&what, &mut d, seed("drop-order", round));
        fill(&mut pinned, seed("drop-order-pinned", round));
        htod_async_sync(&stream, &d, &pinned);
        event.record(&stream).expect("record");
        event.synchronize().expect("event synchronize");
        assert_device_holds(&what, &d, &pinned);
        let mut back = vec![0u64; len];
        fill(&mut back, seed("drop-order-back", round));
        dtoh_async_sync(&stream, &mut back, &d);
        assert_same(&what, &pinned, &back);

        let mut slots: Vec<Option<Box<dyn Any>>> = vec![
            Some(Box::new(d)),
            Some(Box::new(pinned)),
            Some(Box::new(stream)),
            Some(Box::new(event)),
        ];
        for i in order {
            drop(slots[i].take().expect("each object is dropped once"));
        }
    }
    // Everything is gone; a new context works.
    let _ctx = gpu();
    let mut d = DeviceBuffer::<u8>::alloc(4097).expect("alloc after all drops");
    check_round_trip(
        "after every drop order",
        &mut d,
        seed("drop-order-final", 0),
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn host_registration_outlives_a_dropped_context_handle() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let len = 300_001;
    let mut host: Vec<u32> = pattern(len, seed("reg-drop-ctx", len));
    let expected = host.clone();
    let d = DeviceBuffer::<u32>::alloc(len).expect("alloc");
    {
        let reg = HostRegistration::new(&ctx, &mut host[..]).expect("register");
        drop(ctx);
        unbind_thread();
        {
            // The driver answers pointer queries in a current context.
            let _g = reg.context().enter().expect("enter");
            assert!(is_page_locked(reg.as_ptr().cast()));
        }
        htod_async_sync(&stream, &d, &reg);
        assert!(reg.context().same_as(stream.context()));
        // `reg` drops here, after the last Context handle: it must still unregister.
    }
    stream.context().bind_to_thread().expect("bind");
    assert!(
        !is_page_locked(host.as_ptr().cast()),
        "still registered after the guard dropped"
    );
    assert_device_holds("DMA from registered memory", &d, &expected);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn context_can_be_created_again_after_every_handle_is_dropped() {
    fn cycles(tag: &str) {
        for round in 0..4 {
            let ctx = gpu();
            let stream = Stream::new(&ctx).expect("Stream::new");
            let event = Event::new(&ctx).expect("Event::new");
            let cur = Context::current().expect("current");
            let mut d = DeviceBuffer::<f64>::alloc(50_000 + round).expect("alloc");
            check_round_trip(tag, &mut d, seed(tag, round));
            let mut p = PinnedBuffer::<f64>::alloc(d.len()).expect("pinned");
            fill(&mut p, seed(tag, round + 100));
            htod_async_sync(&stream, &d, &p);
            event.record(&stream).expect("record");
            event.synchronize().expect("event synchronize");
            assert_device_holds(tag, &d, &p);
            drop((ctx, stream, event, cur, d, p));
        }
    }
    cycles("recreate on the test thread");
    // And on a thread that has never seen a context.
    thread::spawn(|| cycles("recreate on a fresh thread"))
        .join()
        .expect("recreate thread panicked");
}

// ---------------------------------------------------------------------------
// Threads
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn device_buffer_moves_to_a_thread_without_a_context() {
    let _ctx = gpu();
    let len = 2 * MIB + 3;
    let mut d = DeviceBuffer::<u8>::alloc(len).expect("alloc on the main thread");
    let first: Vec<u8> = pattern(len, seed("moved", 0));
    d.copy_from_host(&first).expect("copy_from_host");

    let mut d = thread::spawn(move || {
        // No context was ever made current on this thread.
        assert_eq!(Context::current().unwrap_err(), Error::NoContext);
        assert_device_holds("read on the spawned thread", &d, &first);
        check_round_trip("round trip on the spawned thread", &mut d, seed("moved", 1));
        // Operations entered the buffer's context and left again.
        assert_eq!(Context::current().unwrap_err(), Error::NoContext);
        d
    })
    .join()
    .expect("spawned thread panicked");
    check_round_trip("back on the main thread", &mut d, seed("moved", 2));

    // And a buffer dropped (freed) on a thread without a context.
    let mut d = DeviceBuffer::<u8>::alloc(len).expect("alloc");
    check_round_trip("before the move", &mut d, seed("moved", 3));
    thread::spawn(move || {
        d.free().expect("free on a thread without a context");
        assert_eq!(Context::current().unwrap_err(), Error::NoContext);
    })
    .join()
    .expect("spawned thread panicked");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn shared_device_buffer_is_read_from_several_threads() {
    let _ctx = gpu();
    let len = MIB + 1;
    let mut d = DeviceBuffer::<u16>::alloc(len).expect("alloc");
    let data: Vec<u16> = pattern(len, seed("shared", len));
    d.copy_from_host(&data).expect("copy_from_host");
    let d = &d;
    let data = &data;
    thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || {
                for _ in 0..3 {
                    assert_device_holds(&format!("reader thread {t}"), d, data);
                }
            });
        }
    });
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn fresh_thread_has_no_context_until_one_is_bound() {
    let ctx = gpu();
    let ctx2 = ctx.clone();
    thread::spawn(move || {
        assert_eq!(Context::current().unwrap_err(), Error::NoContext);
        assert_eq!(
            DeviceBuffer::<u32>::alloc(16).unwrap_err(),
            Error::NoContext,
            "DeviceBuffer::alloc without a current context"
        );
        assert_eq!(
            DeviceBuffer::<u32>::zeroed(16).unwrap_err(),
            Error::NoContext
        );
        assert_eq!(
            PinnedBuffer::<u32>::alloc(16).unwrap_err(),
            Error::NoContext
        );

        // The explicit-context constructors need nothing current.
        let mut d = DeviceBuffer::<u32>::alloc_in(&ctx2, 4096).expect("alloc_in");
        check_round_trip("alloc_in with nothing current", &mut d, seed("fresh", 0));
        let p = PinnedBuffer::<u32>::alloc_in(&ctx2, 4096).expect("pinned alloc_in");
        assert_all_zero("pinned alloc_in with nothing current", &p);
        assert_eq!(Context::current().unwrap_err(), Error::NoContext);

        ctx2.bind_to_thread().expect("bind_to_thread");
        let cur = Context::current().expect("current after bind_to_thread");
        assert!(cur.same_as(&ctx2));
        let mut d = DeviceBuffer::<u32>::alloc(5000).expect("alloc after bind_to_thread");
        assert!(d.context().same_as(&ctx2));
        check_round_trip("alloc after bind_to_thread", &mut d, seed("fresh", 1));
        let mut z = DeviceBuffer::<u32>::zeroed(5000).expect("zeroed after bind_to_thread");
        let mut back: Vec<u32> = pattern(5000, seed("fresh", 2));
        z.copy_to_host(&mut back).expect("copy_to_host");
        assert_all_zero("zeroed after bind_to_thread", &back);
        check_round_trip("zeroed buffer reused", &mut z, seed("fresh", 3));
    })
    .join()
    .expect("spawned thread panicked");
    // Binding on another thread changed nothing here.
    assert!(Context::current().expect("current").same_as(&ctx));
}

// ---------------------------------------------------------------------------
// HostRegistration
// ---------------------------------------------------------------------------

// Registering two overlapping parts of one buffer at once cannot be written:
// `HostRegistration::new` takes `&'a mut [T]` and the guard keeps that unique
// borrow, so a second `HostRegistration::new(&ctx, &mut v[1..])` while the first
// lives is rejected by the borrow checker (E0499). Not tested here.

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn host_registration_dma_from_and_into_caller_memory() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    for len in [1usize, 1000, MIB / 4 + 13, 16 * MIB] {
        let what = format!("registered Vec<u32> of {len}");
        let mut src: Vec<u32> = pattern(len, seed("register-src", len));
        let expected = src.clone();
        let d = DeviceBuffer::<u32>::alloc(len).expect("alloc");
        {
            let reg = HostRegistration::new(&ctx, &mut src[..]).expect("register src");
            assert_eq!(reg.len(), len);
            assert!(reg.context().same_as(&ctx));
            assert!(
                is_page_locked(reg.as_ptr().cast()),
                "{what}: not page-locked"
            );
            htod_async_sync(&stream, &d, &reg);
        }
        assert!(!is_page_locked(src.as_ptr().cast()), "{what}: still locked");
        assert_device_holds(&what, &d, &expected);

        // D2H into registered memory holding other garbage.
        let mut dst: Vec<u32> = pattern(len, seed("register-dst", len));
        {
            let mut reg = HostRegistration::new(&ctx, &mut dst[..]).expect("register dst");
            dtoh_async_sync(&stream, &mut reg, &d);
            // Reads through the guard see the DMA'd data.
            assert_same(&what, &expected, &reg);
            let back = reg.unregister().expect("explicit unregister");
            assert_same(&what, &expected, back);
        }
        assert!(!is_page_locked(dst.as_ptr().cast()));
        assert_same(&what, &expected, &dst);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn page_locked_detection() {
    let ctx = gpu();
    let pinned = PinnedBuffer::<u64>::alloc(1000).expect("pinned");
    assert!(is_page_locked(pinned.as_ptr().cast()), "PinnedBuffer");
    let mut v: Vec<u32> = pattern(100_000, seed("locked", 0));
    assert!(!is_page_locked(v.as_ptr().cast()), "ordinary Vec");
    let d = DeviceBuffer::<u8>::alloc(4096).expect("alloc");
    assert!(
        !is_page_locked(d.as_device_ptr() as *const c_void),
        "device memory is not page-locked host memory"
    );
    {
        let reg = HostRegistration::new(&ctx, &mut v[..]).expect("register");
        assert!(is_page_locked(reg.as_ptr().cast()), "registered Vec");
    }
    assert!(
        !is_page_locked(v.as_ptr().cast()),
        "after the registration dropped"
    );
    // The same memory can be registered again once released.
    {
        let reg = HostRegistration::new(&ctx, &mut v[..]).expect("register again");
        assert!(is_page_locked(reg.as_ptr().cast()));
        reg.unregister().expect("unregister");
    }
    assert!(!is_page_locked(v.as_ptr().cast()), "after unregister");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn page_locked_ranges_end_where_the_registration_ends() {
    let ctx = gpu();
    let pinned = PinnedBuffer::<u8>::alloc(300_000).expect("pinned");
    let base = pinned.as_ptr();
    let block = result::page_locked_block(base.cast()).expect("pinned memory is page-locked");
    eprintln!("PinnedBuffer at {:#x}: {block:?}", base as usize);
    // The driver reports the allocation's extent (CUDA 13 on our H200), so one query
    // decides a whole range.
    assert!(
        block.holds(base as usize, pinned.len()),
        "the reported block {block:?} holds the whole allocation"
    );
    assert!(is_page_locked_range(base.cast(), pinned.len()));
    assert!(is_page_locked_range(
        base.wrapping_add(1).cast(),
        pinned.len() - 1
    ));
    assert!(!is_page_locked_range(base.cast(), 0), "empty range");

    // A registration in the middle of a Vec: the range is page-locked exactly as far
    // as the registration reaches (page granularity), and not past the next page.
    let mut v: Vec<u8> = pattern(6 * 65_536, seed("ranges", 0));
    let (lo, hi) = (3 * 65_536 + 100, 4 * 65_536 - 100);
    let end_page = (v.as_ptr() as usize + hi).next_multiple_of(65_536);
    let beyond = end_page - v.as_ptr() as usize + 65_536; // a full page past the end
    let p = v.as_ptr();
    {
        let reg = HostRegistration::new(&ctx, &mut v[lo..hi]).expect("register");
        let block = result::page_locked_block(reg.as_ptr().cast()).expect("registered");
        eprintln!(
            "registration at {:#x}+{}: {block:?}",
            reg.as_ptr() as usize,
            reg.len()
        );
        assert!(
            block.holds(reg.as_ptr() as usize, reg.len()),
            "the reported block {block:?} holds the whole registration"
        );
        assert!(is_page_locked_range(reg.as_ptr().cast(), reg.len()));
        assert!(
            !is_page_locked_range(reg.as_ptr().cast(), beyond - lo),
            "a range running a page past the registration"
        );
        assert!(
            !is_page_locked_range(p.wrapping_add(lo - 65_536).cast(), 65_536 + 1),
            "a range starting a page before the registration"
        );
    }
    assert!(!is_page_locked_range(p.wrapping_add(lo).cast(), hi - lo));

    // Two registrations with unregistered pages between them: both ends of a range
    // spanning them are page-locked, its middle is not.
    let (first, rest) = v.split_at_mut(2 * 65_536);
    let second = &mut rest[65_536..2 * 65_536];
    let (a, b) = (
        first.as_ptr() as usize,
        second.as_ptr() as usize + second.len(),
    );
    let r1 = HostRegistration::new(&ctx, first).expect("register the first");
    let r2 = HostRegistration::new(&ctx, second).expect("register the second");
    assert!(is_page_locked(r1.as_ptr().cast()) && is_page_locked(r2.as_ptr().cast()));
    assert!(
        !is_page_locked_range(a as *const c_void, b - a),
        "a range with an unregistered middle"
    );
    assert!(is_page_locked_range(r2.as_ptr().cast(), r2.len()));
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn registering_an_empty_slice_is_invalid_argument() {
    let ctx = gpu();
    let mut v: Vec<u32> = Vec::new();
    let e = HostRegistration::new(&ctx, &mut v[..]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                op: "HostRegistration::new",
                ..
            }
        ),
        "{e:?}"
    );
    let mut w: Vec<u32> = pattern(16, seed("empty-reg", 16));
    let e = HostRegistration::new(&ctx, &mut w[3..3]).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
    assert!(!is_page_locked(w.as_ptr().cast()));
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn registering_pinned_memory_is_a_driver_error_and_leaves_it_pinned() {
    // The borrow checker cannot see that a PinnedBuffer is already page-locked; the
    // driver must refuse, and the failed registration must not unpin it.
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let len = 64 * KIB;
    let mut p = PinnedBuffer::<u32>::alloc(len).expect("pinned");
    fill(&mut p, seed("reregister", len));
    let e = HostRegistration::new(&ctx, &mut p[..]).unwrap_err();
    eprintln!("registering PinnedBuffer memory: {e}");
    assert!(matches!(e, Error::Driver(_)), "{e:?}");
    assert!(is_page_locked(p.as_ptr().cast()), "still pinned");
    let d = DeviceBuffer::<u32>::alloc(len).expect("alloc");
    htod_async_sync(&stream, &d, &p);
    assert_device_holds("DMA from pinned after a refused registration", &d, &p);
}

// ---------------------------------------------------------------------------
// Ordering of the synchronous, legacy-stream calls against a non-blocking Stream.
//
// `copy_from_host` (cuMemcpyHtoD) and `zeroed` (cuMemsetD8) run on the legacy
// default stream, which a `CU_STREAM_NON_BLOCKING` stream does not wait for. The
// CUDA docs allow both to return before the device write has landed (pageable H2D:
// "the DMA to final destination may not have completed"; memset on device memory is
// asynchronous to the host). These tests check that what they wrote is what work
// queued afterwards on a non-blocking `Stream` sees.
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn copy_from_host_is_visible_to_a_later_non_blocking_stream() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let len = 16 * MIB;
    let mut d = DeviceBuffer::<u8>::alloc(len).expect("alloc");
    let mut back = PinnedBuffer::<u8>::alloc(len).expect("pinned");
    for i in 0..8 {
        let data: Vec<u8> = pattern(len, seed("sync-visible", i));
        d.copy_from_host(&data).expect("copy_from_host");
        fill(&mut back, seed("sync-visible-garbage", i));
        dtoh_async_sync(&stream, &mut back, &d);
        assert_same(
            &format!("iteration {i}: non-blocking D2H right after copy_from_host"),
            &data,
            &back,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn zeroed_is_complete_before_later_non_blocking_stream_work() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let len = 64 * MIB;
    let mut src = PinnedBuffer::<u8>::alloc(len).expect("pinned");
    for i in 0..5 {
        fill(&mut src, seed("zeroed-order", i));
        let d = DeviceBuffer::<u8>::zeroed(len).expect("zeroed");
        // Upload on a non-blocking stream straight after `zeroed` returns: a memset
        // still running would overwrite part of it.
        htod_async_sync(&stream, &d, &src);
        ctx.synchronize().expect("context synchronize");
        assert_device_holds(
            &format!("iteration {i}: upload on a non-blocking stream after zeroed"),
            &d,
            &src,
        );
    }
}
