//! Stream order with cudarc's own work on the same stream: what cudarc queued before
//! our transfer is seen by it, and what cudarc queues after our transfer sees it.

use super::*;
use cuda_staging::cudarc::driver::CudaSlice;

/// Sizes: the seed's 112x112x3 and 640x640x3 f32 tensors (the second pipelined in
/// chunks by `download`).
const SIZES_BYTES: [usize; 2] = [150_528, 4_915_200];

#[derive(Clone, Copy, Debug)]
enum Down {
    /// `StagingBuffer::download` into a `Vec`.
    Download,
    /// `StagingBuffer::download_into`.
    DownloadInto,
    /// `StagingRing::download`, then its ticket.
    Ring,
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_cudarc_copy_and_memset_queued_before_our_download_are_seen() {
    let g = gpu();
    let mut busy = CudarcBusy::new(&g.cu);
    let mut staging = staged_buffer();
    let mut ring = StagingRing::new();
    warm_buffer(&mut staging, &g, SIZES_BYTES[1]);
    warm_ring(&mut ring, &g, SIZES_BYTES[1]);
    for bytes in SIZES_BYTES {
        let n = bytes / 4;
        for route in [Down::Download, Down::DownloadInto, Down::Ring] {
            let what = format!("{route:?} of {bytes} B");
            let (s_old, s_new) = (seed(), seed());
            let mut target: CudaSlice<u32> = slice_with(&g.cu, n, s_old);
            let fresh: CudaSlice<u32> = slice_with(&g.cu, n, s_new);
            // About a millisecond of work, then cudarc's copy and memset behind it,
            // then our download: all on cudarc's stream, nothing synchronised.
            busy.queue(&g.cu);
            g.cu.memcpy_dtod(&fresh, &mut target)
                .expect("cudarc memcpy_dtod");
            g.cu.memset_zeros(&mut target.slice_mut(n / 2..))
                .expect("cudarc memset_zeros");
            let src = CudarcView::new(&target, &g.stream).expect("CudarcView::new");
            let mut host = vec![0u32; n];
            let got: &[u32] = match route {
                Down::Download => {
                    staging.download(&mut host, &src, &g.stream).expect(&what);
                    &host
                }
                Down::DownloadInto => staging.download_into(&src, n, &g.stream).expect(&what),
                Down::Ring => {
                    let t = ring.download(&src, n, &g.stream).expect(&what);
                    host.copy_from_slice(ring.wait(&t).expect(&what));
                    &host
                }
            };
            check(&format_args!("{what}: cudarc's copy"), &got[..n / 2], s_new);
            check_all_eq(&format_args!("{what}: cudarc's memset"), &got[n / 2..], 0);
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Up {
    /// `StagingBuffer::upload` from a `Vec`.
    Upload,
    /// `StagingBuffer::upload_with`.
    UploadWith,
    /// `StagingRing::upload`: returns with the DMA still queued.
    RingUpload,
    /// `StagingRing::upload_with`: returns with the DMA still queued.
    RingUploadWith,
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn cudarc_work_queued_after_our_upload_sees_it() {
    let g = gpu();
    let mut busy = CudarcBusy::new(&g.cu);
    let mut staging = staged_buffer();
    let mut ring = StagingRing::new();
    warm_buffer(&mut staging, &g, SIZES_BYTES[1]);
    warm_ring(&mut ring, &g, SIZES_BYTES[1]);
    for bytes in SIZES_BYTES {
        let n = bytes / 4;
        for route in [
            Up::Upload,
            Up::UploadWith,
            Up::RingUpload,
            Up::RingUploadWith,
        ] {
            let what = format!("{route:?} of {bytes} B");
            let s = seed();
            let data = pattern::<u32>(n, s);
            let mut target: CudaSlice<u32> = slice_with(&g.cu, n, seed());
            let mut copy: CudaSlice<u32> = slice_with(&g.cu, n, seed());
            // Behind about a millisecond of work, so that the ring's upload is
            // still queued when cudarc's copy is queued after it.
            busy.queue(&g.cu);
            let mut dst = CudarcViewMut::new(&mut target, &g.stream).expect("new");
            match route {
                Up::Upload => staging.upload(&mut dst, &data, &g.stream),
                Up::UploadWith => {
                    staging.upload_with(&mut dst, n, &g.stream, |px| px.copy_from_slice(&data))
                }
                Up::RingUpload => ring.upload(&mut dst, &data, &g.stream),
                Up::RingUploadWith => {
                    ring.upload_with(&mut dst, n, &g.stream, |px| px.copy_from_slice(&data))
                }
            }
            .expect(&what);
            drop(dst);
            // cudarc's device-to-device copy, then its own read, on the same stream.
            g.cu.memcpy_dtod(&target, &mut copy)
                .expect("cudarc memcpy_dtod");
            check(
                &format_args!("{what}: cudarc's copy of it"),
                &contents(&g.cu, &copy),
                s,
            );
            check(
                &format_args!("{what}: cudarc's memcpy_dtoh of it"),
                &contents(&g.cu, &target),
                s,
            );
        }
    }
    ring.synchronize().expect("synchronize");
}
