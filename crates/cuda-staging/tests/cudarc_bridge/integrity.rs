//! Data intact both ways through every entry point, with cudarc slices, views and
//! sub-views, for several element types.

use std::mem::size_of;

use super::*;
use cuda_staging::cudarc::driver::{CudaSlice, DeviceRepr};
use cuda_staging::{DeviceView2dMut, DownloadBatch, PinnedBuffer, StagingStats, UploadBatch};

/// Element counts: one element, an odd count, the seed's 112x112x3 f32 tensor in
/// elements of 4 bytes, and its 640x640x3 one (pipelined in chunks by `upload` /
/// `download`).
const COUNTS: [usize; 4] = [1, 1001, 150_528 / 4, 4_915_200 / 4];
/// Views start this many elements in: odd, so every view is at an offset.
const OFF: usize = 37;

/// `StagingBuffer`'s six single-transfer calls into and out of cudarc memory: a
/// whole `CudaSlice`, a `CudaViewMut` by value and by reference, a `CudaView` by
/// value, a `CudaViewMut` read through a `CudarcView`, and a view of a view.
fn buffer_round_trips<T: Pattern + DeviceRepr>() {
    let g = gpu();
    let mut staging = staged_buffer();
    let ty = std::any::type_name::<T>();
    for n in COUNTS {
        let total = n + 2 * OFF;
        let what = |call: &str| format!("{call} of {n} {ty}");

        // upload into a whole CudaSlice (prefix).
        let (old, s) = (seed(), seed());
        let mut d: CudaSlice<T> = slice_with(&g.cu, total, old);
        let src = pattern::<T>(n, s);
        let mut dst = CudarcViewMut::new(&mut d, &g.stream).expect("CudarcViewMut::new");
        staging.upload(&mut dst, &src, &g.stream).expect("upload");
        drop(dst);
        let w = what("upload into a CudaSlice");
        check_regions(&w, &contents(&g.cu, &d), old, &[(0, n, s)]);

        // upload_with into a CudaViewMut sub-view, by value.
        let (old, s) = (seed(), seed());
        let mut d: CudaSlice<T> = slice_with(&g.cu, total, old);
        let mut dst = CudarcViewMut::new(d.slice_mut(OFF..OFF + n), &g.stream).expect("new");
        staging
            .upload_with(&mut dst, n, &g.stream, |px| fill_pattern(px, s))
            .expect("upload_with");
        drop(dst);
        let w = what("upload_with into slice_mut(OFF..)");
        check_regions(&w, &contents(&g.cu, &d), old, &[(OFF, n, s)]);

        // try_upload_with into a CudaViewMut, by reference.
        let (old, s) = (seed(), seed());
        let mut d: CudaSlice<T> = slice_with(&g.cu, total, old);
        let mut part = d.slice_mut(OFF..);
        let mut dst = CudarcViewMut::new(&mut part, &g.stream).expect("new");
        staging
            .try_upload_with(&mut dst, n, &g.stream, |px| {
                fill_pattern(px, s);
                Ok::<(), &str>(())
            })
            .expect("try_upload_with");
        drop(dst);
        let w = what("try_upload_with into &mut slice_mut(OFF..)");
        check_regions(&w, &contents(&g.cu, &d), old, &[(OFF, n, s)]);

        // download from a whole CudaSlice.
        let s = seed();
        let d: CudaSlice<T> = slice_with(&g.cu, total, s);
        let mut host = pattern::<T>(n, seed()); // something else there first
        let src = CudarcView::new(&d, &g.stream).expect("CudarcView::new");
        staging
            .download(&mut host, &src, &g.stream)
            .expect("download");
        check(&what("download from a CudaSlice"), &host, s);

        // download_into from a CudaView sub-view, by value.
        let src = CudarcView::new(d.slice(OFF..OFF + n), &g.stream).expect("new");
        let got = staging
            .download_into(&src, n, &g.stream)
            .expect("download_into");
        check_at(&what("download_into from slice(OFF..)"), got, OFF, s);

        // download from a CudaViewMut, read through a CudarcView.
        let mut d = d;
        let part = d.slice_mut(OFF..);
        let src = CudarcView::new(&part, &g.stream).expect("new");
        staging
            .download(&mut host, &src, &g.stream)
            .expect("download");
        check_at(&what("download from &slice_mut(OFF..)"), &host, OFF, s);
        drop(src);

        // download_into from a view of a view.
        let outer = d.slice(1..);
        let src = CudarcView::new(outer.slice(OFF..OFF + n), &g.stream).expect("new");
        let got = staging
            .download_into(&src, n, &g.stream)
            .expect("download_into");
        check_at(
            &what("download_into from slice(1..).slice(OFF..)"),
            got,
            OFF + 1,
            s,
        );
    }
    // Every call was counted once, with its bytes, whichever route it took.
    let stats = staging.stats();
    let bytes: u64 = COUNTS.iter().map(|&n| (n * size_of::<T>()) as u64).sum();
    assert_eq!(stats.transfers(), 7 * COUNTS.len() as u64, "{stats:?}");
    assert_eq!(
        (stats.bytes_uploaded, stats.bytes_downloaded),
        (3 * bytes, 4 * bytes),
        "{stats:?}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn staging_buffer_moves_f32_through_cudarc_slices_views_and_sub_views() {
    buffer_round_trips::<f32>();
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn staging_buffer_moves_rgb_pixels_through_cudarc_memory() {
    buffer_round_trips::<[u8; 3]>();
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn staging_buffer_moves_a_user_struct_with_device_repr_through_cudarc_memory() {
    buffer_round_trips::<Detection>();
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn the_ring_moves_data_through_cudarc_memory() {
    let g = gpu();
    let mut ring = StagingRing::new();
    for n in COUNTS {
        let total = n + 2 * OFF;
        let what = |call: &str| format!("ring {call} of {n} f32");

        // upload (copy-in) into a whole slice; cudarc reads it back on the same
        // stream, after the ring's queued DMA.
        let (old, s) = (seed(), seed());
        let mut d: CudaSlice<f32> = slice_with(&g.cu, total, old);
        let src = pattern::<f32>(n, s);
        ring.upload(
            &mut CudarcViewMut::new(&mut d, &g.stream).expect("new"),
            &src,
            &g.stream,
        )
        .expect("upload");
        check_regions(&what("upload"), &contents(&g.cu, &d), old, &[(0, n, s)]);

        // upload_with into a sub-view.
        let (old, s) = (seed(), seed());
        let mut d: CudaSlice<f32> = slice_with(&g.cu, total, old);
        ring.upload_with(
            &mut CudarcViewMut::new(d.slice_mut(OFF..OFF + n), &g.stream).expect("new"),
            n,
            &g.stream,
            |px| fill_pattern(px, s),
        )
        .expect("upload_with");
        check_regions(
            &what("upload_with"),
            &contents(&g.cu, &d),
            old,
            &[(OFF, n, s)],
        );

        // try_upload_with into a sub-view by reference.
        let (old, s) = (seed(), seed());
        let mut d: CudaSlice<f32> = slice_with(&g.cu, total, old);
        let mut part = d.slice_mut(OFF..);
        ring.try_upload_with(
            &mut CudarcViewMut::new(&mut part, &g.stream).expect("new"),
            n,
            &g.stream,
            |px| {
                fill_pattern(px, s);
                Ok::<(), ()>(())
            },
        )
        .expect("try_upload_with");
        check_regions(
            &what("try_upload_with"),
            &contents(&g.cu, &d),
            old,
            &[(OFF, n, s)],
        );

        // download from a sub-view: the ticket waits, the data is in the slot.
        let s = seed();
        let d: CudaSlice<f32> = slice_with(&g.cu, total, s);
        let t = ring
            .download(
                &CudarcView::new(d.slice(OFF..OFF + n), &g.stream).expect("new"),
                n,
                &g.stream,
            )
            .expect("download");
        check_at(&what("download"), ring.wait(&t).expect("wait"), OFF, s);
    }
    ring.synchronize().expect("synchronize");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn batches_take_cudarc_parts_both_ways() {
    let g = gpu();
    let mut staging = staged_buffer();
    let mut ring = StagingRing::new();
    let (k, nb) = (4 * KIB, 150_528 / 4);
    let (sa, sb) = (seed(), seed());
    let mut a: CudaSlice<f32> = slice_with(&g.cu, 3 * k, sa);
    let mut b: CudaSlice<u32> = slice_with(&g.cu, nb, sb);

    // Downloads: two sub-views of one slice and a whole other slice, of two
    // element types, through the buffer and the ring.
    {
        let a1 = CudarcView::new(a.slice(0..k), &g.stream).expect("new");
        let a3 = CudarcView::new(a.slice(2 * k..), &g.stream).expect("new");
        let vb = CudarcView::new(&b, &g.stream).expect("new");
        let mut batch = DownloadBatch::new();
        let p1 = batch.add(&a1, k).expect("add");
        let p3 = batch.add(&a3, k - 1).expect("add");
        let pb = batch.add(&vb, nb).expect("add");
        let landed = staging
            .download_batch(&batch, &g.stream)
            .expect("download_batch");
        check("batch part a[0..k]", landed.get(p1).expect("get"), sa);
        check_at(
            "batch part a[2k..3k-1]",
            landed.get(p3).expect("get"),
            2 * k,
            sa,
        );
        check("batch part b", landed.get(pb).expect("get"), sb);
        let t = ring
            .download_batch(&batch, &g.stream)
            .expect("ring download_batch");
        let landed = ring.wait(&t).expect("wait");
        check("ring batch part a[0..k]", landed.get(p1).expect("get"), sa);
        check("ring batch part b", landed.get(pb).expect("get"), sb);
    }

    // Uploads: the two halves of a split slice and a whole other slice.
    let (s1, s2, s3) = (seed(), seed(), seed());
    let (src1, src2, src3) = (
        pattern::<f32>(k, s1),
        pattern::<f32>(2 * k - 3, s2),
        pattern::<u32>(nb, s3),
    );
    {
        let (x, y) = a.split_at_mut(k);
        let mut vx = CudarcViewMut::new(x, &g.stream).expect("new");
        let mut vy = CudarcViewMut::new(y, &g.stream).expect("new");
        let mut vb = CudarcViewMut::new(&mut b, &g.stream).expect("new");
        let mut batch = UploadBatch::new();
        batch.add(&mut vx, &src1).expect("add");
        batch.add(&mut vy, &src2).expect("add");
        batch.add(&mut vb, &src3).expect("add");
        staging
            .upload_batch(&mut batch, &g.stream)
            .expect("upload_batch");
    }
    let got = contents(&g.cu, &a);
    check("upload batch: a's first part", &got[..k], s1);
    check("upload batch: a's second part", &got[k..3 * k - 3], s2);
    check_at(
        "upload batch: a's untouched end",
        &got[3 * k - 3..],
        3 * k - 3,
        sa,
    );
    check("upload batch: b", &contents(&g.cu, &b), s3);
    ring.synchronize().expect("synchronize");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn stream_copies_and_2d_regions_take_cudarc_memory() {
    let g = gpu();
    let n = 4 * KIB + 3;
    let ctx = g.stream.context();

    // Stream::memcpy_htod / dtod / dtoh / memset between pinned memory and cudarc's.
    let s = seed();
    let mut host = PinnedBuffer::<u32>::alloc_in(ctx, n).expect("PinnedBuffer::alloc_in");
    fill_pattern(&mut host, s);
    let mut x: CudaSlice<u32> = g.cu.alloc_zeros(n).expect("alloc_zeros");
    let mut y: CudaSlice<u32> = g.cu.alloc_zeros(n).expect("alloc_zeros");
    g.stream
        .memcpy_htod(
            &host,
            &mut CudarcViewMut::new(&mut x, &g.stream).expect("new"),
        )
        .expect("memcpy_htod");
    g.stream
        .memcpy_dtod(
            &CudarcView::new(&x, &g.stream).expect("new"),
            &mut CudarcViewMut::new(&mut y, &g.stream).expect("new"),
        )
        .expect("memcpy_dtod");
    g.stream
        .memset_u32(
            &mut CudarcViewMut::new(x.slice_mut(n - 3..), &g.stream).expect("new"),
            0xA5A5_5A5A,
        )
        .expect("memset_u32");
    let mut back = PinnedBuffer::<u32>::alloc_in(ctx, n).expect("alloc_in");
    g.stream
        .memcpy_dtoh(&CudarcView::new(&y, &g.stream).expect("new"), &mut back)
        .expect("memcpy_dtoh");
    check("htod, dtod, dtoh through cudarc memory", &back, s);
    let got = contents(&g.cu, &x);
    check("memset left the rest", &got[..n - 3], s);
    check_all_eq(
        "memset_u32 of a cudarc sub-view",
        &got[n - 3..],
        0xA5A5_5A5A,
    );

    // A 2-D region over a cudarc slice: 5 rows of 17 f32, 32 elements apart.
    let (width, height, pitch) = (17, 5, 32);
    let (old, s) = (seed(), seed());
    let mut d: CudaSlice<f32> = slice_with(&g.cu, pitch * height, old);
    let rows = pattern::<f32>(width * height, s);
    let mut staging = staged_buffer();
    {
        let mut view = CudarcViewMut::new(&mut d, &g.stream).expect("new");
        let mut region = DeviceView2dMut::new(&mut view, width, height, pitch * 4)
            .expect("DeviceView2dMut::new");
        staging
            .upload_2d(&mut region, &rows, width * 4, &g.stream)
            .expect("upload_2d");
        let back = staging
            .download_2d_into(&region, &g.stream)
            .expect("download_2d_into");
        check("2-D rows back", back, s);
    }
    let got = contents(&g.cu, &d);
    let old_all = pattern::<f32>(pitch * height, old);
    for r in 0..height {
        for c in 0..pitch {
            let i = r * pitch + c;
            let want = if c < width {
                rows[r * width + c]
            } else {
                old_all[i]
            };
            assert!(
                same(&got[i], &want),
                "2-D upload: row {r}, column {c}: got {:?}, expected {want:?}",
                got[i]
            );
        }
    }
    assert_ne!(staging.stats(), StagingStats::default());
}
