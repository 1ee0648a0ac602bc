//! GPU-tier integration tests of `cuda-core`'s memory: `DeviceBuffer` and its
//! synchronous copies, `PinnedBuffer`, `HostRegistration` and `query_host_memory`,
//! and the ordering of the synchronous (legacy-stream) calls against a
//! non-blocking `Stream`.
//!
//! Every test needs a CUDA GPU and is `#[ignore]`d; run them with
//! `cargo xtask test-gpu` (or `cargo test -p cuda-core --test gpu_memory --
//! --ignored`). `unsafe` appears only where a test is about raw-handle interop
//! (`DeviceBuffer::from_raw_borrowed`).

mod common;

use bytemuck::{Pod, Zeroable};
use common::*;
use cuda_core::{
    query_host_memory, DeviceBuffer, Error, HostMemory, HostRegistration, PinnedBuffer, Stream,
};

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
fn a_device_buffer_debugs_as_its_pointer_length_and_element_type() {
    let _ctx = gpu();
    let d = DeviceBuffer::<u32>::alloc(5).expect("alloc");
    assert_ne!(d.as_device_ptr(), 0);
    assert_eq!(
        format!("{d:?}"),
        format!(
            "DeviceBuffer {{ ptr: {:#x}, len: 5, elem: \"u32\" }}",
            d.as_device_ptr()
        )
    );
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
fn pinned_buffer_is_zeroed_256_byte_aligned_and_page_locked() {
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
        // (The block the driver reports is checked in
        // query_host_memory_tells_page_locked_from_pageable_memory.)
        assert!(
            matches!(
                query_host_memory(&ctx, p.as_ptr().cast()),
                HostMemory::PageLocked { .. }
            ),
            "{what}: not page-locked"
        );
        assert_all_zero(&what, &p);
        // Writable through DerefMut, every element.
        let expected: Vec<u8> = pattern(len, seed("pinned-write", len));
        p.copy_from_slice(&expected);
        assert_same(&what, &expected, &p);
        assert_same(&what, &expected, p.as_slice().expect("as_slice"));
    }
    let p = PinnedBuffer::<Sample>::alloc_in(&ctx, 1000).expect("alloc_in");
    assert_eq!(p.byte_len(), 24_000);
    assert_all_zero("PinnedBuffer::<Sample>::alloc_in", &p);
    assert_eq!(p.as_ptr() as usize % 256, 0);
}

/// An element aligned exactly as far as CUDA guarantees.
#[repr(C, align(256))]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Aligned256 {
    bytes: [u8; 256],
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn pinned_buffer_alloc_in_refuses_alignment_above_256_bytes() {
    // `Deref` builds a `&[T]`, which must be aligned for `T`; small pinned blocks are
    // only 256-byte aligned, so a type aligned further is a clear error, not a
    // misaligned slice. (`alloc` without a context is covered in cpu.rs.)
    let ctx = gpu();
    let e = PinnedBuffer::<Aligned512>::alloc_in(&ctx, 1).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument { reason, .. } if reason.contains("512")),
        "{e}"
    );
    // The guaranteed 256-byte alignment is honoured, for small and odd sizes.
    for len in [1usize, 3, 17] {
        let p = PinnedBuffer::<Aligned256>::alloc_in(&ctx, len).expect("alloc_in");
        assert_eq!(p.as_ptr() as usize % 256, 0);
        assert_eq!(p.len(), len);
        assert_all_zero("PinnedBuffer::<Aligned256>", &p);
    }
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
        let mut d = DeviceBuffer::<u32>::alloc(len).expect("device");
        stream.memcpy_htod(&src, &mut d).expect("memcpy_htod");
        stream.synchronize().expect("synchronize");
        // Check the device side through the independent synchronous path...
        assert_device_holds(&what, &d, &src);
        // ...and the D2H DMA into pinned memory pre-filled with other garbage.
        let mut dst = PinnedBuffer::<u32>::alloc(len).expect("pinned dst");
        fill(&mut dst, seed("pinned-dma-garbage", len));
        stream.memcpy_dtoh(&d, &mut dst).expect("memcpy_dtoh");
        stream.synchronize().expect("synchronize");
        assert_same(&what, &src, &dst);
    }
}

// ---------------------------------------------------------------------------
// HostRegistration and query_host_memory
//
// Two overlapping registrations at once, or freeing a registered Vec, do not
// compile: tests/compile-fail/host_registration_*.rs.
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn host_registration_dma_from_and_into_caller_memory() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    for len in [1usize, 1000, MIB / 4 + 13, 16 * MIB] {
        let what = format!("registered Vec<u32> of {len}");
        let mut src: Vec<u32> = pattern(len, seed("register-src", len));
        let expected = src.clone();
        let mut d = DeviceBuffer::<u32>::alloc(len).expect("alloc");
        {
            let reg = HostRegistration::new(&ctx, &mut src[..]).expect("register src");
            assert_eq!(reg.len(), len);
            assert!(reg.context().same_as(&ctx));
            assert_page_locked(&ctx, &what, reg.as_ptr().cast(), len * 4);
            stream
                .memcpy_htod_sync(&reg, &mut d)
                .expect("memcpy_htod_sync from the registration");
        }
        assert_not_page_locked(&ctx, &what, src.as_ptr().cast());
        assert_device_holds(&what, &d, &expected);

        // D2H into registered memory holding other garbage.
        let mut dst: Vec<u32> = pattern(len, seed("register-dst", len));
        {
            let mut reg = HostRegistration::new(&ctx, &mut dst[..]).expect("register dst");
            stream
                .memcpy_dtoh_sync(&d, &mut reg)
                .expect("memcpy_dtoh_sync into the registration");
            // Reads through the guard see the DMA'd data.
            assert_same(&what, &expected, &reg);
            let back = reg.unregister().expect("explicit unregister");
            assert_same(&what, &expected, back);
        }
        assert_not_page_locked(&ctx, &what, dst.as_ptr().cast());
        assert_same(&what, &expected, &dst);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn query_host_memory_tells_page_locked_from_pageable_memory() {
    let ctx = gpu();
    // Pinned memory: page-locked, in one block holding the whole allocation; any
    // address inside it is in the same block.
    let pinned = PinnedBuffer::<u64>::alloc(100_000).expect("pinned");
    let base = pinned.as_ptr().cast::<u8>();
    assert_page_locked(&ctx, "PinnedBuffer", base, pinned.byte_len());
    let inner = base.wrapping_add(12_345);
    assert_eq!(
        page_locked_block(&ctx, "inside a PinnedBuffer", inner),
        page_locked_block(&ctx, "a PinnedBuffer", base),
        "one allocation, one block"
    );

    // A Vec: pageable. Device memory: not host memory. Null: nothing.
    let mut v: Vec<u8> = pattern(6 * 65_536, seed("query", 0));
    assert_not_page_locked(&ctx, "an ordinary Vec", v.as_ptr());
    let d = DeviceBuffer::<u8>::alloc(4096).expect("alloc");
    assert_not_page_locked(
        &ctx,
        "device memory",
        d.as_device_ptr() as usize as *const u8,
    );
    assert_not_page_locked(&ctx, "null", std::ptr::null());

    // A registration in the middle of the Vec: page-locked, its block holds the whole
    // registration; the Vec's first bytes, two pages before it, are not.
    let (lo, hi) = (3 * 65_536 + 100, 4 * 65_536 - 100);
    let start = v.as_ptr();
    {
        let reg = HostRegistration::new(&ctx, &mut v[lo..hi]).expect("register");
        assert_page_locked(&ctx, "registered part of a Vec", reg.as_ptr(), hi - lo);
        assert_not_page_locked(&ctx, "the Vec's start, outside the registration", start);
    }
    assert_not_page_locked(
        &ctx,
        "after the registration dropped",
        start.wrapping_add(lo),
    );

    // The same memory can be registered again once released.
    {
        let reg = HostRegistration::new(&ctx, &mut v[..]).expect("register again");
        assert_page_locked(&ctx, "the whole Vec registered", reg.as_ptr(), reg.len());
        reg.unregister().expect("unregister");
    }
    assert_not_page_locked(&ctx, "after unregister", v.as_ptr());
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
    assert_not_page_locked(&ctx, "after refused registrations", w.as_ptr().cast());
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
    assert_page_locked(&ctx, "still pinned", p.as_ptr().cast(), len * 4);
    let mut d = DeviceBuffer::<u32>::alloc(len).expect("alloc");
    stream.memcpy_htod(&p, &mut d).expect("memcpy_htod");
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
        stream.memcpy_dtoh(&d, &mut back).expect("memcpy_dtoh");
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
        let mut d = DeviceBuffer::<u8>::zeroed(len).expect("zeroed");
        // Upload on a non-blocking stream straight after `zeroed` returns: a memset
        // still running would overwrite part of it.
        stream.memcpy_htod(&src, &mut d).expect("memcpy_htod");
        stream.synchronize().expect("synchronize");
        assert_device_holds(
            &format!("iteration {i}: upload on a non-blocking stream after zeroed"),
            &d,
            &src,
        );
    }
}
