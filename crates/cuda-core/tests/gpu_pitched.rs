//! GPU tests of `cuda-core`'s 2-D memory: `PitchedBuffer` (over `cuMemAllocPitch`),
//! `DeviceView2d` / `DeviceView2dMut` over linear buffers, and `Stream`'s 2-D copies
//! (`cuMemcpy2DAsync`) and `PitchedBuffer`'s synchronous ones (`cuMemcpy2D`).
//!
//! Every copy moves a pattern that differs per byte and per call, at odd widths (1,
//! 3, 17 and 641 elements of `u8`, `f32` and a 3-byte RGB element) with padding on
//! both sides: host rows longer than the data, device rows at the driver's pitch.
//! Every row is compared, and every padding byte of the destination, set to a
//! sentinel first, must still hold it: a 2-D copy writes rows, never padding. Device
//! memory is read back and set through 1-D copies of the whole allocation
//! (`PitchedBuffer::as_bytes`), independent of the 2-D code under test.
//!
//! Every test needs a CUDA GPU and is `#[ignore]`d; run them with
//! `cargo xtask test-gpu` (or `cargo test -p cuda-core --test gpu_pitched --
//! --ignored`). `unsafe` appears only in the test of a borrowed surface
//! (`PitchedBuffer::from_raw_borrowed`).

mod common;

use bytemuck::Pod;
use common::*;
use cuda_core::{
    DeviceBuffer, DeviceSlice2d, DeviceView2d, DeviceView2dMut, Error, Layout2d, PinnedBuffer,
    PitchedBuffer, Stream,
};

/// What every padding byte holds before a copy: no copy may change it.
const SENTINEL: u8 = 0xEE;

/// Element counts per row.
const WIDTHS: [usize; 4] = [1, 3, 17, 641];
/// Rows.
const HEIGHTS: [usize; 3] = [1, 2, 7];

/// Host pitches for rows of `row` bytes, all with padding: one byte more, an odd
/// number more, and 64-byte aligned rows plus a line.
fn host_pitches(row: usize) -> [usize; 3] {
    [row + 1, row + 13, row.next_multiple_of(64) + 64]
}

/// Bytes set to [`SENTINEL`], holding `layout`'s rows (and `extra` bytes after its
/// span), as elements of `T` (enough of them).
fn sentinel_elems<T: Pod>(layout: &Layout2d, extra: usize) -> Vec<T> {
    let size = std::mem::size_of::<T>();
    let n = (layout.span_bytes() + extra).div_ceil(size);
    let mut v = vec![T::zeroed(); n];
    bytemuck::cast_slice_mut::<T, u8>(&mut v).fill(SENTINEL);
    v
}

/// Writes the packed rows `rows` into `buf` at `layout`'s places.
fn put_rows(buf: &mut [u8], layout: &Layout2d, rows: &[u8]) {
    for (r, row) in rows.chunks(layout.row_bytes()).enumerate() {
        buf[layout.row_range(r)].copy_from_slice(row);
    }
}

/// Checks that `buf` holds the packed rows `rows` at `layout`'s places and
/// [`SENTINEL`] in every other byte (padding between rows and after the last).
#[track_caller]
fn check_rows_and_padding(what: &str, buf: &[u8], layout: &Layout2d, rows: &[u8]) {
    let mut expected = vec![SENTINEL; buf.len()];
    if layout.row_bytes() > 0 {
        put_rows(&mut expected, layout, rows);
    }
    if expected == buf {
        return;
    }
    let first = expected
        .iter()
        .zip(buf)
        .position(|(e, g)| e != g)
        .expect("some byte differs");
    let bad = expected.iter().zip(buf).filter(|(e, g)| e != g).count();
    let pitch = layout.pitch_bytes().max(1);
    let (row, col) = (first / pitch, first % pitch);
    let place = if col < layout.row_bytes() && row < layout.height() {
        "in a row"
    } else {
        "in the padding"
    };
    panic!(
        "{what}: {bad} of {} bytes differ; first at byte {first} (row {row}, byte {col} of \
         the pitch, {place}): expected {:#04x}, got {:#04x}",
        buf.len(),
        expected[first],
        buf[first]
    );
}

/// The whole allocation of `d`, padding included, read with a 1-D copy.
fn device_bytes<T: Pod>(stream: &Stream, d: &PitchedBuffer<T>) -> Vec<u8> {
    let mut v = vec![0u8; d.byte_len()];
    stream
        .memcpy_dtoh_sync(&d.as_bytes(), &mut v)
        .expect("1-D read of the whole allocation");
    v
}

/// Sets every byte of `d` to [`SENTINEL`], then its rows to `rows`, with 1-D copies.
fn set_device<T: Pod>(stream: &Stream, d: &mut PitchedBuffer<T>, rows: &[u8]) {
    let mut all = vec![SENTINEL; d.byte_len()];
    put_rows(&mut all, &d.layout(), rows);
    stream
        .memcpy_htod_sync(&all, &mut d.as_bytes_mut())
        .expect("1-D write of the whole allocation");
}

/// A pitched buffer of `width` x `height` with every byte set to [`SENTINEL`].
fn sentinel_surface<T: Pod>(stream: &Stream, width: usize, height: usize) -> PitchedBuffer<T> {
    let mut d = PitchedBuffer::<T>::alloc(width, height).expect("PitchedBuffer::alloc");
    stream
        .memset_bytes(&mut d.as_bytes_mut(), SENTINEL)
        .expect("memset_bytes");
    stream.synchronize().expect("synchronize");
    d
}

fn pitched_buffers_of<T: Pod>(tag: &str) {
    let ctx = gpu();
    let size = std::mem::size_of::<T>();
    for width in WIDTHS {
        for height in HEIGHTS {
            let what = format!("{tag}: {width} x {height}");
            let d = PitchedBuffer::<T>::alloc(width, height)
                .unwrap_or_else(|e| panic!("{what}: alloc: {e}"));
            assert_eq!((d.width(), d.height()), (width, height), "{what}");
            assert_eq!(d.row_bytes(), width * size, "{what}");
            assert!(
                d.pitch_bytes() >= d.row_bytes(),
                "{what}: pitch {} shorter than a row",
                d.pitch_bytes()
            );
            assert_eq!(d.byte_len(), d.pitch_bytes() * height, "{what}");
            assert_ne!(d.as_device_ptr(), 0, "{what}: null device pointer");
            assert!(d.context().same_as(&ctx), "{what}");
            assert!(!d.is_empty(), "{what}");
            // Through the trait, as the copies see it.
            let shape = (
                DeviceSlice2d::width(&d),
                DeviceSlice2d::height(&d),
                DeviceSlice2d::pitch_bytes(&d),
            );
            assert_eq!(shape, (width, height, d.pitch_bytes()), "{what}");
            d.free()
                .unwrap_or_else(|e| panic!("{what}: free reports {e}"));
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn pitched_buffers_take_the_driver_s_pitch() {
    pitched_buffers_of::<u8>("u8");
    pitched_buffers_of::<f32>("f32");
    pitched_buffers_of::<Rgb>("rgb");
    // A row wide enough that the driver must pad it (it pitches to at least 32
    // bytes on every GPU so far; 512 on ours): padding on the device side.
    let _ctx = gpu();
    let d = PitchedBuffer::<u8>::alloc(641, 3).expect("alloc");
    assert!(
        d.pitch_bytes() > 641,
        "the driver left 641-byte rows unpadded (pitch {}): the padding tests below \
         would test nothing on the device side",
        d.pitch_bytes()
    );
}

fn synchronous_round_trips_of<T: Pod>(tag: &str) {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    for (k, width) in WIDTHS.into_iter().enumerate() {
        for height in HEIGHTS {
            for (p, host_pitch) in host_pitches(width * std::mem::size_of::<T>())
                .into_iter()
                .enumerate()
            {
                let what = format!("{tag}: {width} x {height}, host pitch {host_pitch}");
                let mut d = sentinel_surface::<T>(&stream, width, height);
                let host = Layout2d::new::<T>("test", "host", width, height, host_pitch)
                    .expect("host layout");
                let rows: Vec<u8> = pattern(host.packed_bytes(), seed(&what, k * 10 + p));
                let mut src = sentinel_elems::<T>(&host, 5);
                put_rows(bytemuck::cast_slice_mut(&mut src), &host, &rows);

                d.copy_from_host(&src, host_pitch)
                    .unwrap_or_else(|e| panic!("{what}: copy_from_host: {e}"));
                check_rows_and_padding(
                    &format!("{what}: device after copy_from_host"),
                    &device_bytes(&stream, &d),
                    &d.layout(),
                    &rows,
                );

                let mut back = sentinel_elems::<T>(&host, 7);
                d.copy_to_host(&mut back, host_pitch)
                    .unwrap_or_else(|e| panic!("{what}: copy_to_host: {e}"));
                check_rows_and_padding(
                    &format!("{what}: host after copy_to_host"),
                    bytemuck::cast_slice(&back),
                    &host,
                    &rows,
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn synchronous_2d_copies_move_rows_and_leave_padding_u8() {
    synchronous_round_trips_of::<u8>("sync u8");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn synchronous_2d_copies_move_rows_and_leave_padding_f32() {
    synchronous_round_trips_of::<f32>("sync f32");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn synchronous_2d_copies_move_rows_and_leave_padding_rgb() {
    synchronous_round_trips_of::<Rgb>("sync rgb");
}

/// Pinned host memory of `T` holding `host`'s rows, [`SENTINEL`] elsewhere.
fn pinned_rows<T: Pod>(host: &Layout2d, rows: Option<&[u8]>) -> PinnedBuffer<T> {
    let v = sentinel_elems::<T>(host, 3);
    let mut p = PinnedBuffer::<T>::alloc(v.len()).expect("PinnedBuffer::alloc");
    p.copy_from_slice(&v);
    if let Some(rows) = rows {
        put_rows(bytemuck::cast_slice_mut(&mut p[..]), host, rows);
    }
    p
}

fn queued_round_trips_of<T: Pod>(tag: &str) {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    for (k, width) in WIDTHS.into_iter().enumerate() {
        for height in HEIGHTS {
            let row = width * std::mem::size_of::<T>();
            let [up_pitch, _, down_pitch] = host_pitches(row);
            let what = format!("{tag}: {width} x {height}");
            let mut d = sentinel_surface::<T>(&stream, width, height);
            let up = Layout2d::new::<T>("test", "host", width, height, up_pitch).unwrap();
            let down = Layout2d::new::<T>("test", "host", width, height, down_pitch).unwrap();
            let rows: Vec<u8> = pattern(up.packed_bytes(), seed(&what, k));
            let src = pinned_rows::<T>(&up, Some(&rows));
            let mut dst = pinned_rows::<T>(&down, None);

            stream
                .memcpy_2d_htod(&src, up_pitch, &mut d)
                .unwrap_or_else(|e| panic!("{what}: memcpy_2d_htod: {e}"));
            stream
                .memcpy_2d_dtoh(&d, &mut dst, down_pitch)
                .unwrap_or_else(|e| panic!("{what}: memcpy_2d_dtoh: {e}"));
            // `Deref` of `dst` waits for the queued download.
            check_rows_and_padding(
                &format!("{what}: pinned rows after the queued round trip"),
                bytemuck::cast_slice(&dst[..]),
                &down,
                &rows,
            );
            check_rows_and_padding(
                &format!("{what}: device after the queued upload"),
                &device_bytes(&stream, &d),
                &d.layout(),
                &rows,
            );
            // The pinned source is untouched.
            check_rows_and_padding(
                &format!("{what}: pinned source"),
                bytemuck::cast_slice(&src[..]),
                &up,
                &rows,
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn queued_2d_copies_between_pinned_rows_and_a_pitched_buffer_u8() {
    queued_round_trips_of::<u8>("queued u8");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn queued_2d_copies_between_pinned_rows_and_a_pitched_buffer_f32() {
    queued_round_trips_of::<f32>("queued f32");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn queued_2d_copies_between_pinned_rows_and_a_pitched_buffer_rgb() {
    queued_round_trips_of::<Rgb>("queued rgb");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn rows_over_a_linear_buffer_land_at_the_pitch_given_and_nowhere_else() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    // 5 rows of 17 f32 (68 bytes), 80 bytes apart, from element 3 of a buffer of 103:
    // the rows end at element 3 + (4 * 80 + 68) / 4 = 100.
    let (width, height, pitch) = (17usize, 5usize, 80usize);
    let old: Vec<f32> = pattern(103, seed("linear", 0));
    let mut d = device_with(&old);
    let device = Layout2d::new::<f32>("test", "device", width, height, pitch).unwrap();
    let host = Layout2d::new::<f32>("test", "host", width, height, 100).unwrap();
    let rows: Vec<u8> = pattern(device.packed_bytes(), seed("linear", 1));
    let mut src = sentinel_elems::<f32>(&host, 0);
    put_rows(bytemuck::cast_slice_mut(&mut src), &host, &rows);
    {
        let mut tail = d.slice_mut(3..).expect("slice_mut");
        let mut view = DeviceView2dMut::new(&mut tail, width, height, pitch).expect("view");
        stream
            .memcpy_2d_htod_sync(&src, 100, &mut view)
            .expect("memcpy_2d_htod_sync");
    }
    let mut expected: Vec<f32> = old.clone();
    put_rows(
        &mut bytemuck::cast_slice_mut::<f32, u8>(&mut expected)[12..],
        &device,
        &rows,
    );
    assert_device_holds("rows over a linear buffer", &d, &expected);

    // And back, through a read-only view, into host rows 100 bytes apart.
    let ro = d.slice(3..).expect("slice");
    let rows_view = DeviceView2d::new(&ro, width, height, pitch).expect("view");
    let bytes = rows_view.as_bytes_2d();
    assert_eq!(
        (bytes.width(), bytes.height(), bytes.pitch_bytes()),
        (68, 5, 80),
        "the same rows as bytes"
    );
    assert_eq!(bytes.as_device_ptr(), rows_view.as_device_ptr());
    let mut back = sentinel_elems::<f32>(&host, 9);
    stream
        .memcpy_2d_dtoh_sync(&rows_view, &mut back, 100)
        .expect("memcpy_2d_dtoh_sync");
    check_rows_and_padding(
        "linear rows read back",
        bytemuck::cast_slice(&back),
        &host,
        &rows,
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn bad_2d_input_is_refused_before_the_driver_and_changes_nothing() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let (width, height) = (17usize, 4usize);
    let rows: Vec<u8> = pattern(width * 4 * height, seed("bad 2d", 0));
    let mut d = PitchedBuffer::<f32>::alloc(width, height).expect("alloc");
    set_device(&stream, &mut d, &rows);
    let before = device_bytes(&stream, &d);
    let host_data: Vec<f32> = pattern(width * height * 2, seed("bad 2d", 1));

    // A host pitch shorter than a row (68 bytes).
    let too_small = Error::PitchTooSmall {
        op: "memcpy_2d_htod_sync",
        what: "the host rows",
        width: 17,
        elem_bytes: 4,
        row_bytes: 68,
        pitch_bytes: 64,
    };
    assert_eq!(
        stream.memcpy_2d_htod_sync(&host_data, 64, &mut d),
        Err(too_small)
    );
    assert_eq!(
        d.copy_from_host(&host_data, 67).unwrap_err().to_string(),
        "PitchedBuffer::copy_from_host: the host rows: a pitch of 67 bytes is shorter than \
         a row of 68 bytes (17 elements of 4 bytes)"
    );
    // Host rows past the end of the host slice: 3 * 160 + 68 = 548 bytes in 544.
    let short: Vec<f32> = host_data[..136].to_vec();
    assert_eq!(
        stream.memcpy_2d_htod_sync(&short, 160, &mut d),
        Err(Error::RegionOutOfBounds {
            op: "memcpy_2d_htod_sync",
            what: "the host rows",
            height: 4,
            row_bytes: 68,
            pitch_bytes: 160,
            span_bytes: 548,
            len_bytes: 544,
        })
    );
    let mut short_back = short.clone();
    let e = d.copy_to_host(&mut short_back, 160).unwrap_err();
    assert!(matches!(e, Error::RegionOutOfBounds { .. }), "{e}");
    // Compared as bits: the pattern's floats include NaNs, which never equal.
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    assert_eq!(
        bits(&short_back),
        bits(&short),
        "a refused download wrote the host slice"
    );
    // A pitch whose rows overflow a byte count.
    let e = stream
        .memcpy_2d_htod_sync(&host_data, usize::MAX / 2, &mut d)
        .unwrap_err();
    assert!(
        e.to_string().contains("overflow a byte count"),
        "{e}: an overflowing span"
    );
    // Queued copies from and into pinned memory refuse the same, and leave the
    // pinned buffer with no queued work to wait for.
    let src = PinnedBuffer::<f32>::alloc(136).expect("pinned");
    let e = stream.memcpy_2d_htod(&src, 160, &mut d).unwrap_err();
    assert!(
        matches!(
            e,
            Error::RegionOutOfBounds {
                op: "memcpy_2d_htod",
                ..
            }
        ),
        "{e}"
    );
    let mut dst = PinnedBuffer::<f32>::alloc(width * height).expect("pinned");
    let mut dst_view = dst.slice_mut(..).expect("slice_mut");
    let e = stream.memcpy_2d_dtoh(&d, &mut dst_view, 60).unwrap_err();
    assert!(
        matches!(
            e,
            Error::PitchTooSmall {
                pitch_bytes: 60,
                ..
            }
        ),
        "{e}"
    );
    assert!(dst_view.is_idle(), "a refused copy left the view waiting");
    drop(dst_view);

    // Views whose rows do not fit their memory: 3 * 80 + 68 = 308 bytes in 300.
    let mut lin = DeviceBuffer::<f32>::alloc(75).expect("alloc");
    assert_eq!(
        DeviceView2dMut::new(&mut lin, 17, 4, 80).unwrap_err(),
        Error::RegionOutOfBounds {
            op: "DeviceView2dMut::new",
            what: "the 2-D view of device memory",
            height: 4,
            row_bytes: 68,
            pitch_bytes: 80,
            span_bytes: 308,
            len_bytes: 300,
        }
    );
    assert!(matches!(
        DeviceView2d::new(&lin, 17, 4, 64),
        Err(Error::PitchTooSmall { .. })
    ));
    assert!(DeviceView2d::new(&lin, 17, 3, 80).is_ok(), "228 bytes fit");

    // Nothing reached the device.
    assert_eq!(
        device_bytes(&stream, &d),
        before,
        "a refused copy changed the device"
    );
    stream.synchronize().expect("synchronize");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn empty_2d_regions_allocate_and_copy_nothing() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    for (width, height) in [(0usize, 5usize), (5, 0), (0, 0)] {
        let what = format!("{width} x {height}");
        let mut d = PitchedBuffer::<f32>::alloc(width, height).expect("alloc");
        assert_eq!(d.as_device_ptr(), 0, "{what}: allocated");
        assert!(d.is_empty(), "{what}");
        let pitch = width * 4 + 4;
        let host: Vec<f32> = pattern(3, seed("empty 2d", width));
        d.copy_from_host(&host, pitch).expect("copy_from_host");
        d.copy_from_host(&[], width * 4)
            .expect("an empty host slice");
        let mut back = host.clone();
        d.copy_to_host(&mut back, pitch).expect("copy_to_host");
        assert_eq!(back, host, "{what}: an empty copy wrote the host");
        stream
            .memcpy_2d_htod_sync(&host, pitch, &mut d)
            .expect("memcpy_2d_htod_sync");
        stream
            .memcpy_2d_dtoh_sync(&d, &mut back, pitch)
            .expect("memcpy_2d_dtoh_sync");
        assert_eq!(back, host, "{what}: an empty copy wrote the host");
        let pinned = PinnedBuffer::<f32>::alloc(0).expect("pinned");
        stream
            .memcpy_2d_htod(&pinned, width * 4, &mut d)
            .expect("memcpy_2d_htod");
        d.free().expect("free");
    }
    assert!(stream.query().expect("query"), "nothing was queued");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_borrowed_surface_is_copied_through_and_not_freed() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let (width, height) = (641usize, 3usize);
    let owner = sentinel_surface::<u8>(&stream, width, height);
    let rows: Vec<u8> = pattern(width * height, seed("borrowed", 0));
    let host = Layout2d::new::<u8>("test", "host", width, height, 700).unwrap();
    let mut src = sentinel_elems::<u8>(&host, 0);
    put_rows(&mut src, &host, &rows);
    {
        // SAFETY: `owner`'s allocation holds `pitch * height` bytes and outlives the
        // borrowed buffer; nothing else uses it meanwhile.
        let mut borrowed = unsafe {
            PitchedBuffer::<u8>::from_raw_borrowed(
                &ctx,
                owner.as_device_ptr(),
                width,
                height,
                owner.pitch_bytes(),
            )
        }
        .expect("from_raw_borrowed");
        assert_eq!(borrowed.byte_len(), owner.byte_len());
        stream
            .memcpy_2d_htod_sync(&src, 700, &mut borrowed)
            .expect("memcpy_2d_htod_sync");
        // Dropping it frees nothing.
    }
    check_rows_and_padding(
        "the owner after a copy through the borrowed surface",
        &device_bytes(&stream, &owner),
        &owner.layout(),
        &rows,
    );
    // A pitch shorter than the rows is refused.
    // SAFETY: refused before the pointer is used.
    let e = unsafe { PitchedBuffer::<u8>::from_raw_borrowed(&ctx, 0, 641, 3, 640) }.unwrap_err();
    assert!(matches!(e, Error::PitchTooSmall { .. }), "{e}");
    owner.free().expect("the owner frees its allocation");
}

/// Bytes of each device-to-device copy queued to keep a stream busy.
const BUSY_BYTES: usize = 256 * MIB;

/// Queues 8 copies of 256 MiB on `stream` (milliseconds of work) and returns.
fn queue_busy(stream: &Stream, a: &mut DeviceBuffer<u8>, b: &mut DeviceBuffer<u8>) {
    for _ in 0..4 {
        stream.memcpy_dtod(a, b).expect("busy dtod");
        stream.memcpy_dtod(b, a).expect("busy dtod");
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn queued_2d_copies_keep_stream_order() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut a = DeviceBuffer::<u8>::alloc(BUSY_BYTES).expect("busy a");
    let mut b = DeviceBuffer::<u8>::alloc(BUSY_BYTES).expect("busy b");
    let (width, height) = (641usize, 7usize);
    let mut d = sentinel_surface::<u8>(&stream, width, height);
    let host = Layout2d::new::<u8>("test", "host", width, height, 704).unwrap();
    let device = d.layout();
    for round in 0..2u8 {
        // A download observes a memset queued behind the busy work.
        let value = 0x5A ^ round;
        queue_busy(&stream, &mut a, &mut b);
        stream
            .memset_bytes(&mut d.as_bytes_mut(), value)
            .expect("memset_bytes");
        let mut dst = pinned_rows::<u8>(&host, None);
        stream
            .memcpy_2d_dtoh(&d, &mut dst, 704)
            .expect("memcpy_2d_dtoh");
        check_rows_and_padding(
            &format!("round {round}: the download sees the queued memset"),
            &dst,
            &host,
            &vec![value; width * height],
        );

        // An upload lands after a memset queued behind the busy work.
        let rows: Vec<u8> = pattern(width * height, seed("order", round.into()));
        let src = pinned_rows::<u8>(&host, Some(&rows));
        queue_busy(&stream, &mut a, &mut b);
        stream
            .memset_bytes(&mut d.as_bytes_mut(), SENTINEL)
            .expect("memset_bytes");
        stream
            .memcpy_2d_htod(&src, 704, &mut d)
            .expect("memcpy_2d_htod");
        let mut back = vec![0u8; d.byte_len()];
        stream
            .memcpy_dtoh_sync(&d.as_bytes(), &mut back)
            .expect("read back");
        check_rows_and_padding(
            &format!("round {round}: the upload lands after the queued memset"),
            &back,
            &device,
            &rows,
        );
    }
}
