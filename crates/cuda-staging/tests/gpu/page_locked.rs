//! Page-locked host slices (a PinnedBuffer, a HostRegistration, another library's
//! registration) are DMA'd straight from and into, and the detection follows the
//! registration.

use super::*;
use cuda_staging::StagingConfig;

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn pinned_buffer_slices_are_dmad_directly() {
    let (_ctx, stream) = gpu();
    for threshold in [usize::MAX, DEFAULT_AUTO_STAGE_MAX_BYTES, 0] {
        let mut staging = seed_routing(threshold);
        for bytes in [4, 150_528, 4_915_200, 17 * MIB] {
            let n = bytes / 4;
            let what = format!("PinnedBuffer<f32> x {n}, threshold {threshold}");
            let mut dev = device_with::<f32>(n, seed());
            let mut host = PinnedBuffer::<f32>::alloc(n).expect("PinnedBuffer::alloc");

            let s = seed();
            fill_pattern(&mut host, s);
            let before = staging.stats();
            staging.upload(&mut dev, &host, &stream).expect("upload");
            check(&format!("upload {what}"), &device_contents(&dev), s);
            assert_counted(
                &what,
                before,
                staging.stats(),
                Route::PinnedSource,
                bytes,
                0,
            );

            let s = seed();
            set_device(&mut dev, s);
            fill_pattern(&mut host, seed());
            let before = staging.stats();
            staging
                .download(&mut host, &dev, &stream)
                .expect("download");
            check(&format!("download {what}"), &host, s);
            assert_counted(
                &what,
                before,
                staging.stats(),
                Route::PinnedSource,
                0,
                bytes,
            );
        }
        // Nothing needed staging, so nothing was pinned.
        assert_eq!(staging.capacity(), 0);
        assert_eq!(staging.stats().allocations, 0);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn host_registration_slices_are_dmad_directly() {
    let (ctx, stream) = gpu();
    for threshold in [usize::MAX, 0] {
        let mut staging = seed_routing(threshold);
        for bytes in [150_528, 4_915_200] {
            let n = bytes / 4;
            let what = format!("HostRegistration<f32> x {n}, threshold {threshold}");
            let mut dev = device_with::<f32>(n, seed());
            let (mut v, off) = registrable::<f32>(n);
            let mut reg =
                HostRegistration::new(&ctx, &mut v[off..off + n]).expect("HostRegistration");

            let s = seed();
            fill_pattern(&mut reg, s);
            let before = staging.stats();
            staging.upload(&mut dev, &reg, &stream).expect("upload");
            check(&format!("upload {what}"), &device_contents(&dev), s);
            assert_counted(
                &what,
                before,
                staging.stats(),
                Route::PinnedSource,
                bytes,
                0,
            );

            let s = seed();
            set_device(&mut dev, s);
            fill_pattern(&mut reg, seed());
            let before = staging.stats();
            staging.download(&mut reg, &dev, &stream).expect("download");
            check(&format!("download {what}"), &reg, s);
            assert_counted(
                &what,
                before,
                staging.stats(),
                Route::PinnedSource,
                0,
                bytes,
            );
            reg.unregister().expect("unregister");
        }
        assert_eq!(staging.stats().allocations, 0);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn interior_slices_of_page_locked_memory_are_dmad_directly() {
    // A slice that starts inside a page-locked allocation (not at its start) is still
    // page-locked memory.
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    // 37 KB uploads would go to the driver by default; route them by source here.
    staging
        .set_config(StagingConfig {
            stage_min_bytes: staging
                .config()
                .stage_min_bytes
                .with(Direction::HostToDevice, 0),
            ..staging.config()
        })
        .expect("set_config");
    let n = 37_632;
    let mut host = PinnedBuffer::<u8>::alloc(n + 64).expect("PinnedBuffer::alloc");
    let mut dev = device_with::<u8>(n, seed());
    let s = seed();
    fill_pattern(&mut host[3..3 + n], s);
    let before = staging.stats();
    staging
        .upload(&mut dev, &host[3..3 + n], &stream)
        .expect("upload");
    check("upload from pinned[3..]", &device_contents(&dev), s);
    assert_counted(
        "upload from pinned[3..]",
        before,
        staging.stats(),
        Route::PinnedSource,
        n,
        0,
    );

    let s = seed();
    set_device(&mut dev, s);
    let before = staging.stats();
    staging
        .download(&mut host[5..5 + n], &dev, &stream)
        .expect("download");
    check("download into pinned[5..]", &host[5..5 + n], s);
    assert_counted(
        "download into pinned[5..]",
        before,
        staging.stats(),
        Route::PinnedSource,
        0,
        n,
    );
}

/// Granularity of the registrations below: a multiple of every host page size.
const LOCK_BLOCK: usize = 64 * KIB;

/// `blocks` blocks of [`LOCK_BLOCK`] bytes, starting on a block boundary, holding a
/// pattern, with the block ranges `locked` page-locked by "another library": raw
/// `cuMemHostRegister` calls, as a foreign pinned allocator would make them, which
/// `upload` / `download` only learn about from the driver. This is the raw-handle
/// interop the test is about, so it uses the raw layer; dropping the result
/// unregisters the ranges. The slack before and after the blocks is never
/// registered, so registrations of tests running in parallel never share a page
/// with these.
struct ForeignLocked {
    memory: Box<[u8]>,
    /// Offset of the first block in `memory`.
    off: usize,
    blocks: usize,
    registered: Vec<*mut std::ffi::c_void>,
    ctx: Context,
}

impl ForeignLocked {
    fn new(ctx: &Context, blocks: usize, locked: &[std::ops::Range<usize>]) -> ForeignLocked {
        let mut memory = vec![0u8; (blocks + 2) * LOCK_BLOCK].into_boxed_slice();
        let off = memory.as_ptr().align_offset(LOCK_BLOCK);
        fill_pattern(&mut memory[off..off + blocks * LOCK_BLOCK], seed());
        let _g = ctx.enter().expect("enter");
        let mut registered = Vec::new();
        for r in locked {
            let bytes = &mut memory[off + r.start * LOCK_BLOCK..off + r.end * LOCK_BLOCK];
            let p = bytes.as_mut_ptr().cast();
            // SAFETY: `bytes` lies inside `memory`, which this struct owns and keeps
            // (a boxed slice does not move) until `Drop` unregisters `p` first.
            unsafe {
                cuda_core::result::mem_host_register(
                    p,
                    bytes.len(),
                    cuda_core::sys::CU_MEMHOSTREGISTER_PORTABLE,
                )
            }
            .expect("cuMemHostRegister");
            registered.push(p);
        }
        ForeignLocked {
            memory,
            off,
            blocks,
            registered,
            ctx: ctx.clone(),
        }
    }

    /// The blocks, as the test reads and writes them.
    fn region(&mut self) -> &mut [u8] {
        &mut self.memory[self.off..self.off + self.blocks * LOCK_BLOCK]
    }
}

impl Drop for ForeignLocked {
    fn drop(&mut self) {
        let _g = self.ctx.enter().expect("enter");
        for &p in &self.registered {
            // SAFETY: `p` starts a range registered in `new`; the transfers that
            // used it all returned (they are synchronous), and it is unregistered
            // once, before `memory` is freed.
            unsafe { cuda_core::result::mem_host_unregister(p) }.expect("cuMemHostUnregister");
        }
    }
}

/// Uploads `region[range]` and downloads into it with a fresh `StagingBuffer` (no
/// page-lock answer remembered from an earlier transfer), checking the data, the
/// bytes of `region` outside `range`, and that each transfer took `route`.
fn round_trip_slice(
    what: &str,
    region: &mut [u8],
    range: std::ops::Range<usize>,
    route: Route,
    stream: &Stream,
) {
    let bytes = range.len();
    let mut dev = device_with::<u8>(bytes, seed());

    let s = seed();
    fill_pattern(&mut region[range.clone()], s);
    let mut staging = staged_buffer();
    staging
        .upload(&mut dev, &region[range.clone()], stream)
        .expect(what);
    check(&format!("upload {what}"), &device_contents(&dev), s);
    assert_counted(
        &format!("upload {what}"),
        StagingStats::default(),
        staging.stats(),
        route,
        bytes,
        0,
    );

    let s = seed();
    set_device(&mut dev, s);
    let outside = seed();
    fill_pattern(region, outside);
    let mut staging = staged_buffer();
    staging
        .download(&mut region[range.clone()], &dev, stream)
        .expect(what);
    check(&format!("download {what}"), &region[range.clone()], s);
    check(
        &format!("download {what}: before the slice"),
        &region[..range.start],
        outside,
    );
    check_at(
        &format!("download {what}: after the slice"),
        &region[range.end..],
        range.end,
        outside,
    );
    assert_counted(
        &format!("download {what}"),
        StagingStats::default(),
        staging.stats(),
        route,
        0,
        bytes,
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn page_locked_ranges_end_where_the_registration_ends() {
    // The range rule (routing.rs): a host slice is DMA'd straight from or into only
    // when all of it lies in one page-locked block (one allocation or registration);
    // anything else is staged. Blocks of 64 KiB: 0 pageable, 1-2 registered (A), 3 a
    // pageable gap, 4 registered (B), 5 registered separately right after B (C),
    // 6-7 pageable.
    let (ctx, stream) = gpu();
    let mut foreign = ForeignLocked::new(&ctx, 8, &[1..3, 4..5, 5..6]);
    let region = foreign.region();
    let b = LOCK_BLOCK;
    let cases: [(&str, std::ops::Range<usize>, Route); 9] = [
        ("all of A", b..3 * b, Route::PinnedSource),
        (
            "inside A, odd ends",
            b + 101..3 * b - 99,
            Route::PinnedSource,
        ),
        ("all of B", 4 * b..5 * b, Route::PinnedSource),
        (
            "the end of A and a block past it",
            2 * b..4 * b,
            Route::Staged,
        ),
        (
            "the end of A and one byte past it",
            2 * b..3 * b + 1,
            Route::Staged,
        ),
        ("a block before A and its start", 0..2 * b, Route::Staged),
        ("A, the gap and B", b..5 * b, Route::Staged),
        ("B and C, side by side", 4 * b..6 * b, Route::Staged),
        ("pageable blocks only", 6 * b..8 * b, Route::Staged),
    ];
    for (what, range, route) in cases {
        round_trip_slice(what, region, range, route, &stream);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn page_locked_detection_follows_the_registration() {
    // PinnedBuffer memory and a live HostRegistration are DMA'd straight from; an
    // ordinary Vec, and the same memory once unregistered, are staged.
    let (ctx, stream) = gpu();
    let n = 3 * LOCK_BLOCK / 4;
    let bytes = n * 4;
    let mut dev = device_with::<f32>(n, seed());
    let transfer =
        |staging: &mut StagingBuffer, host: &mut [f32], dev: &mut DeviceBuffer<f32>, what: &str| {
            let s = seed();
            fill_pattern(host, s);
            staging.upload(dev, host, &stream).expect(what);
            check(&format!("upload {what}"), &device_contents(dev), s);
            let s = seed();
            set_device(dev, s);
            staging.download(host, dev, &stream).expect(what);
            check(&format!("download {what}"), host, s);
        };

    let mut pinned = PinnedBuffer::<f32>::alloc(n).expect("PinnedBuffer::alloc");
    let mut staging = staged_buffer();
    transfer(&mut staging, &mut pinned, &mut dev, "PinnedBuffer");
    assert_eq!(
        staging.stats().pinned_source_transfers,
        2,
        "PinnedBuffer: {:?}",
        staging.stats()
    );
    assert_eq!(
        staging.stats().allocations,
        0,
        "nothing to stage, nothing pinned"
    );

    let (mut v, off) = registrable::<f32>(n);
    let mut staging = staged_buffer();
    transfer(&mut staging, &mut v[off..off + n], &mut dev, "a Vec");
    assert_eq!(
        staging.stats().staged_transfers,
        2,
        "a Vec: {:?}",
        staging.stats()
    );

    for round in 0..2 {
        let what = format!("a registered Vec, round {round}");
        let mut reg =
            HostRegistration::new(&ctx, &mut v[off..off + n]).expect("HostRegistration::new");
        let mut staging = staged_buffer();
        transfer(&mut staging, &mut reg, &mut dev, &what);
        assert_eq!(
            staging.stats().pinned_source_transfers,
            2,
            "{what}: {:?}",
            staging.stats()
        );
        reg.unregister().expect("unregister");

        // Once unregistered (and registrable again, next round), it is pageable.
        let what = format!("the same Vec unregistered, round {round}");
        let mut staging = staged_buffer();
        transfer(&mut staging, &mut v[off..off + n], &mut dev, &what);
        assert_eq!(
            staging.stats().staged_transfers,
            2,
            "{what}: {:?}",
            staging.stats()
        );
        assert_eq!(staging.stats().bytes_uploaded, bytes as u64);
    }

    // A buffer that saw the memory registered may remember that answer for a while
    // (routing.rs keeps the last answer per direction): the driver's copy it then
    // uses handles pageable memory too, so the data must arrive either way.
    let mut staging = staged_buffer();
    {
        let mut reg =
            HostRegistration::new(&ctx, &mut v[off..off + n]).expect("HostRegistration::new");
        transfer(&mut staging, &mut reg, &mut dev, "registered, remembered");
    }
    for k in 0..3 {
        transfer(
            &mut staging,
            &mut v[off..off + n],
            &mut dev,
            &format!("unregistered, remembered answer {k}"),
        );
    }
    assert_eq!(staging.stats().transfers(), 8);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_page_lock_answer_serves_the_next_64_transfers_of_that_range_only() {
    // page_lock.rs keeps the driver's answer for one range per direction and serves
    // it to the next 64 uploads of the same range, then asks again; a range of
    // another length, even from the same address, is asked about at once. A stale
    // "page-locked" sends pageable memory to the driver's copy, which takes any
    // memory, so the data arrives either way (checked on every upload here).
    let (ctx, stream) = gpu();
    let upload = |staging: &mut StagingBuffer, host: &mut [u8], what: &str| {
        let s = seed();
        fill_pattern(host, s);
        let mut dev = device_with::<u8>(host.len(), seed());
        staging.upload(&mut dev, host, &stream).expect(what);
        check(what, &device_contents(&dev), s);
    };
    let pinned_source = |staging: &StagingBuffer| staging.stats().pinned_source_transfers;

    // Blocks of 64 KiB: 0 pageable, 1-2 registered, 3 pageable.
    let blocks_1_to_2 = 1..3;
    let mut foreign = ForeignLocked::new(&ctx, 4, std::slice::from_ref(&blocks_1_to_2));
    let region = foreign.region();
    let b = LOCK_BLOCK;
    let mut staging = staged_buffer();
    upload(&mut staging, &mut region[b..4 * b], "blocks 1-3");
    assert_eq!(
        pinned_source(&staging),
        0,
        "blocks 1-3: {:?}",
        staging.stats()
    );
    upload(&mut staging, &mut region[b..3 * b], "blocks 1-2");
    assert_eq!(
        pinned_source(&staging),
        1,
        "blocks 1-2, after 1-3: {:?}",
        staging.stats()
    );

    // A registration, then the same memory unregistered: the remembered answer
    // serves 64 uploads, and the 65th asks the driver.
    let n = 2 * LOCK_BLOCK;
    let (mut v, off) = registrable::<u8>(n);
    let mut staging = staged_buffer();
    let mut reg = HostRegistration::new(&ctx, &mut v[off..off + n]).expect("HostRegistration");
    upload(&mut staging, &mut reg, "registered");
    assert_eq!(
        pinned_source(&staging),
        1,
        "registered: {:?}",
        staging.stats()
    );
    reg.unregister().expect("unregister");
    for k in 1..=64 {
        upload(
            &mut staging,
            &mut v[off..off + n],
            &format!("remembered answer {k}"),
        );
    }
    assert_eq!(
        pinned_source(&staging),
        65,
        "64 remembered answers: {:?}",
        staging.stats()
    );
    upload(&mut staging, &mut v[off..off + n], "the driver asked again");
    assert_eq!(
        pinned_source(&staging),
        65,
        "asked again: {:?}",
        staging.stats()
    );
    assert_eq!(staging.stats().staged_transfers, 1, "{:?}", staging.stats());
}
