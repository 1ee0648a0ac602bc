//! GPU tests of the stream-ordered layer: queued copies and memsets through views at
//! odd offsets and lengths, for `f32`, `u8` and a 12-byte struct. Events and
//! `Stream::wait` are in `gpu_events.rs`; refused inputs in `gpu_input_errors.rs`.
//!
//! Every test needs a CUDA GPU and is `#[ignore]`d; run them with
//! `cargo xtask test-gpu` (or `cargo test -p cuda-core --test gpu_stream --
//! --ignored`). Each copy's destination is pre-filled with another pattern, and
//! after each operation the *whole* destination buffer is compared: the elements it
//! should have written, and the rest, which must be untouched.

mod common;

use bytemuck::Pod;
use common::*;
use cuda_core::{DeviceBuffer, Error, PinnedBuffer, Stream};

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
// Debug
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_stream_debugs_as_its_driver_handle() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    assert_eq!(
        format!("{stream:?}"),
        format!("Stream {{ raw: {:?} }}", stream.as_raw())
    );
}
