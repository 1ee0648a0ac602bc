//! GPU tests of the 2-D transfers: `StagingBuffer::upload_2d`, `upload_2d_with`,
//! `download_2d`, `download_2d_into`, and `StagingRing::upload_2d`,
//! `upload_2d_with`, `download_2d` with `wait` (and `Rows::copy_to`).
//!
//! Every test is `#[ignore]`d so that `cargo test` passes without a GPU; run them
//! with `cargo xtask test-gpu` (or `cargo test -p cuda-staging --test pitched --
//! --ignored` on a GPU machine). Without a device each one fails loudly.
//!
//! One test binary, a file per concern: `integrity.rs` (every entry point of the
//! buffer at odd widths of `u8`, `f32` and RGB, padding on both sides, a full-HD
//! frame), `ring.rs` (the ring's forms, several frames in flight, tickets),
//! `ordering.rs` (against work already queued on the stream, both directions, buffer
//! and ring) and `bad_input.rs` (bad pitches and short slices refused before the
//! driver with the numbers, changing nothing; empty regions; a panic in `fill`).
//!
//! Conventions: every transfer moves a pattern that differs per byte and per call.
//! Device memory is a `PitchedBuffer` (the driver's pitch) or rows laid over a
//! linear `DeviceBuffer` at a pitch of the test's choice; host rows are padded (or,
//! to test the contiguous path, not). Every padding byte of a destination is set to
//! [`SENTINEL`] first and must still hold it afterwards: a 2-D transfer writes rows,
//! never padding. Device memory is set and read through 1-D copies of the whole
//! allocation, independent of the 2-D code under test.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod integrity;
mod ordering;
mod ring;

use common::*;
use cuda_staging::{
    bytemuck, DeviceBuffer, DeviceView2dMut, Error, Layout2d, PitchedBuffer, StagingPod, Stream,
};

/// What every padding byte holds before a transfer: none may change it.
const SENTINEL: u8 = 0xEE;

/// Element counts per row.
const WIDTHS: [usize; 4] = [1, 3, 17, 641];
/// Rows.
const HEIGHTS: [usize; 3] = [1, 2, 5];

/// Host pitches for rows of `row` bytes: packed (the contiguous path), one odd
/// number of bytes more, and 64-byte aligned rows plus a line.
fn host_pitches(row: usize) -> [usize; 3] {
    [row, row + 13, row.next_multiple_of(64) + 64]
}

/// Which device memory a test moves rows to and from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A `PitchedBuffer`: the driver's pitch.
    Pitched,
    /// A linear `DeviceBuffer` with rows this many bytes longer than the data.
    Linear { pad: usize },
}

/// Both kinds, the linear one with an odd padding.
const KINDS: [Kind; 2] = [Kind::Pitched, Kind::Linear { pad: 5 }];

/// Device memory under test, with its rows' shape.
enum Surface<T: StagingPod> {
    Pitched(PitchedBuffer<T>),
    Linear {
        buf: DeviceBuffer<T>,
        width: usize,
        height: usize,
        pitch: usize,
    },
}

/// Runs `$body` with `$r` bound to the surface's 2-D region (`&mut` a type that
/// implements `DeviceSlice2dMut`): the transfers are generic, so each kind gets its
/// own copy of the body.
macro_rules! with_region {
    ($surface:expr, |$r:ident| $body:expr) => {
        match $surface {
            Surface::Pitched(p) => {
                let $r = p;
                $body
            }
            Surface::Linear {
                buf,
                width,
                height,
                pitch,
            } => {
                let mut view =
                    DeviceView2dMut::new(buf, *width, *height, *pitch).expect("DeviceView2dMut");
                let $r = &mut view;
                $body
            }
        }
    };
}
pub(crate) use with_region;

impl<T: StagingPod> Surface<T> {
    /// `height` rows of `width` elements of `kind`, every byte [`SENTINEL`].
    fn new(kind: Kind, width: usize, height: usize, stream: &Stream) -> Surface<T> {
        let size = std::mem::size_of::<T>();
        let mut s = match kind {
            Kind::Pitched => Surface::Pitched(
                PitchedBuffer::<T>::alloc(width, height).expect("PitchedBuffer::alloc"),
            ),
            Kind::Linear { pad } => {
                let pitch = width * size + pad;
                let layout = Layout2d::new::<T>("test", "linear", width, height, pitch).unwrap();
                // One element more than the rows need, so the last row has padding
                // after it too.
                let n = layout.span_bytes().div_ceil(size) + 1;
                Surface::Linear {
                    buf: DeviceBuffer::<T>::alloc(n).expect("DeviceBuffer::alloc"),
                    width,
                    height,
                    pitch,
                }
            }
        };
        s.set_rows(stream, &[]);
        s
    }

    /// The rows' shape.
    fn layout(&self) -> Layout2d {
        match self {
            Surface::Pitched(p) => p.layout(),
            Surface::Linear {
                width,
                height,
                pitch,
                ..
            } => Layout2d::new::<T>("test", "linear", *width, *height, *pitch).unwrap(),
        }
    }

    /// Every byte of the memory, padding included (a 1-D copy).
    fn bytes(&self, stream: &Stream) -> Vec<u8> {
        let view = match self {
            Surface::Pitched(p) => p.as_bytes(),
            Surface::Linear { buf, .. } => buf.as_bytes(),
        };
        let mut v = vec![0u8; view.len()];
        stream
            .memcpy_dtoh_sync(&view, &mut v)
            .expect("1-D read of the whole memory");
        v
    }

    /// Sets every byte to [`SENTINEL`], then the rows to the packed `rows` (none when
    /// empty), with a 1-D copy.
    fn set_rows(&mut self, stream: &Stream, rows: &[u8]) {
        let layout = self.layout();
        let mut view = match self {
            Surface::Pitched(p) => p.as_bytes_mut(),
            Surface::Linear { buf, .. } => buf.as_bytes_mut(),
        };
        let mut all = vec![SENTINEL; view.len()];
        if !rows.is_empty() {
            put_rows(&mut all, &layout, rows);
        }
        stream
            .memcpy_htod_sync(&all, &mut view)
            .expect("1-D write of the whole memory");
    }

    /// Queues setting every byte to `value` on `stream` (a 1-D memset).
    fn memset(&mut self, stream: &Stream, value: u8) {
        let mut view = match self {
            Surface::Pitched(p) => p.as_bytes_mut(),
            Surface::Linear { buf, .. } => buf.as_bytes_mut(),
        };
        stream.memset_bytes(&mut view, value).expect("memset_bytes");
    }

    /// Checks the memory holds the packed `rows` at the rows' places and
    /// [`SENTINEL`] everywhere else.
    #[track_caller]
    fn check(&self, what: &str, stream: &Stream, rows: &[u8]) {
        check_rows_and_padding(what, &self.bytes(stream), &self.layout(), rows);
    }
}

/// `n` bytes of the pattern of `seed` (packed rows to move).
fn rows_of(n: usize, seed: u64) -> Vec<u8> {
    pattern::<u8>(n, seed)
}

/// Host memory of `T` for `host`'s rows (plus `extra` bytes), every byte
/// [`SENTINEL`], then the packed `rows` at their places (none when empty).
fn host_with<T: StagingPod>(host: &Layout2d, extra: usize, rows: &[u8]) -> Vec<T> {
    let size = std::mem::size_of::<T>().max(1);
    let n = (host.span_bytes() + extra).div_ceil(size);
    let mut v = vec![T::zeroed(); n];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut v);
    bytes.fill(SENTINEL);
    if !rows.is_empty() {
        put_rows(bytes, host, rows);
    }
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
    if layout.row_bytes() > 0 && !rows.is_empty() {
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

/// Checks packed elements against the packed rows `rows`, byte for byte.
#[track_caller]
fn check_packed<T: StagingPod>(what: &str, got: &[T], rows: &[u8]) {
    let got: &[u8] = bytemuck::cast_slice(got);
    assert_eq!(got.len(), rows.len(), "{what}: packed length");
    if let Some(i) = got.iter().zip(rows).position(|(g, e)| g != e) {
        let bad = got.iter().zip(rows).filter(|(g, e)| g != e).count();
        panic!(
            "{what}: {bad} of {} packed bytes differ; first at byte {i}: expected {:#04x}, \
             got {:#04x}",
            rows.len(),
            rows[i],
            got[i]
        );
    }
}

/// Writes the packed rows `rows` into a `fill` slice of elements.
fn fill_rows<T: StagingPod>(dst: &mut [T], rows: &[u8]) {
    bytemuck::cast_slice_mut::<T, u8>(dst).copy_from_slice(rows);
}
