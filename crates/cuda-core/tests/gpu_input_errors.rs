//! GPU tests of the input errors of the stream-ordered layer: a destination
//! shorter than the source, views out of range, `memset_u32` on elements not 4
//! bytes wide. Each is raised before any driver call and changes nothing: the
//! buffers keep their data, no view is left waiting, nothing is queued. Zero-element
//! operations are accepted and do nothing.
//!
//! `Error::ContextMismatch` needs a second context, which the single-GPU test
//! machine cannot give (only the primary context of device 0 is reachable through
//! the safe API), so it is not tested here.
//!
//! Every test needs a CUDA GPU and is `#[ignore]`d; run them with
//! `cargo xtask test-gpu` (or `cargo test -p cuda-core --test gpu_input_errors --
//! --ignored`).

mod common;

use common::*;
use cuda_core::{DeviceBuffer, Error, PinnedBuffer, Stream};
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
    {
        let base = d.as_device_ptr();
        assert_eq!(
            d.split_at_mut(101).unwrap_err(),
            oor("DeviceBuffer::split_at_mut", 0, 101, 100)
        );
        // In range: two halves that meet at `mid`, and a split at either end.
        let (lo, mut hi) = d.split_at_mut(30).expect("split_at_mut");
        assert_eq!((lo.as_device_ptr(), lo.len()), (base, 30));
        assert_eq!((hi.as_device_ptr(), hi.len()), (base + 30 * 4, 70));
        assert_eq!(
            hi.split_at_mut(71).unwrap_err(),
            oor("DeviceViewMut::split_at_mut", 0, 71, 70)
        );
        let (a, b) = hi.split_at_mut(70).expect("split at the end");
        assert_eq!((a.len(), b.len()), (70, 0));
        assert_eq!(b.as_device_ptr(), base + 100 * 4);
        let (a, b) = d.split_at_mut(0).expect("split at the start");
        assert_eq!((a.len(), b.len(), b.as_device_ptr()), (0, 100, base));
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
