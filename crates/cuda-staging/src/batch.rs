//! Several tensors in one transfer: [`DownloadBatch`] (a model's outputs: boxes,
//! scores, classes) and [`UploadBatch`] (its inputs), moved through one pinned
//! region with one wait instead of one wait each.
//!
//! Every part sits at a 256-byte aligned offset of the region, so each one can be
//! viewed as its element type. The copies go out as one `cuMemcpyBatchAsync` where
//! the driver has it (CUDA 12.8 and later), with every source read in stream order
//! (the "any order" mode could read a source before earlier stream work wrote it),
//! or as one queued copy per part otherwise; either way one synchronisation ends it.
//!
//! Where a batch's time goes, for a model's four outputs (4 KiB, 16 KiB, 64 KiB and
//! 150528 B), measured with `cuda-core`'s stream calls on the 16-core H200 host
//! (p50 of 3000, variants interleaved, six rounds in one process, the first two
//! on a slower host):
//! - the largest part alone takes 9.2-10.0 µs, and the three small parts alone as
//!   one batch 8.8-10.4 µs: each transfer pays the same fixed cost, and the batch
//!   pays it once, not four times;
//! - all four as one batch take 11.9-13.8 µs (1.29x-1.37x the largest alone).
//!   The 86016 bytes the small parts add are about 1.6 µs on the link (1.17x);
//!   queuing the batch costs 2.7-4.5 µs against 1.4-2.1 µs for one copy, and the
//!   slower host took longer to queue it;
//! - no arrangement of the same copies did better: largest first in the batch
//!   12.0-14.0 µs, the largest as its own copy followed by a batch of the rest
//!   12.3-13.1 µs, four queued copies 15.2-16.9 µs;
//! - `download_batch` adds 0.2-0.3 µs to the bare batch.
//!
//! CUDA graphs did worse, on another machine start (bare driver calls, p50 of 3000,
//! four rounds): the largest alone 10.3-10.4 µs, the batch call 14.1-14.4 (1.37x-1.38x),
//! a graph of the four copies in sequence 16.8-17.1 (1.63x-1.64x), a graph of them
//! in parallel branches 17.7-17.9 (1.72x), the four copies forked over four streams
//! without a graph 19.3-19.5 (1.88x), and a graph of the largest copy alone 1.08x
//! the plain copy. The batch call itself cannot be captured into a graph (the driver
//! answers 900, `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`).

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

use arrayvec::ArrayVec;
use cuda_core::{
    DeviceSlice, DeviceSliceMut, DeviceView, DeviceViewMut, Error, PinnedBuffer, Result, Stream,
    MAX_BATCH,
};

use crate::direction::Direction;
use crate::elements::{cast, check_len};
use crate::errors::invalid;
use crate::staged::{self, Move};
use crate::stores::streams;
use crate::StagingPod;

/// The most parts one batch holds.
pub const MAX_BATCH_PARTS: usize = MAX_BATCH;

/// Parts start at multiples of this many bytes of the pinned region.
pub(crate) const PART_ALIGN: usize = 256;

static NEXT_BATCH_ID: AtomicU64 = AtomicU64::new(1);

/// Where the parts of a batch sit in the pinned region, in bytes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Layout {
    pub(crate) offsets: ArrayVec<usize, MAX_BATCH>,
    pub(crate) lens: ArrayVec<usize, MAX_BATCH>,
    /// Bytes of the region the parts span.
    pub(crate) total: usize,
}

impl Layout {
    /// Places a part of `bytes`; its offset.
    fn push(&mut self, op: &'static str, bytes: usize) -> Result<usize> {
        if self.lens.is_full() {
            return Err(invalid(
                op,
                format!("a batch holds at most {MAX_BATCH} parts"),
            ));
        }
        let offset = self.total.next_multiple_of(PART_ALIGN);
        let total = offset.checked_add(bytes).ok_or(Error::SizeOverflow {
            op,
            n: bytes,
            elem_bytes: 1,
        })?;
        self.offsets.push(offset);
        self.lens.push(bytes);
        self.total = total;
        Ok(offset)
    }
}

/// One part of a batch: which elements of the landed region are its own. Hand it
/// to [`Landed::get`] of the same batch.
#[derive(Debug)]
pub struct Part<T> {
    batch: u64,
    offset: usize,
    len: usize,
    _elem: PhantomData<fn() -> T>,
}

impl<T> Clone for Part<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Part<T> {}

impl<T> Part<T> {
    /// Elements in the part.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the part holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Device buffers to download together, through one pinned region with one wait
/// ([`StagingBuffer::download_batch`](crate::StagingBuffer::download_batch), or
/// [`StagingRing::download_batch`](crate::StagingRing::download_batch)).
///
/// Every part sits at a 256-byte aligned offset of the region, so each one is viewed
/// as its own element type. The copies go out as one `cuMemcpyBatchAsync` where the
/// driver has it (CUDA 12.8 and later), every source read in stream order, or as one
/// queued copy per part otherwise; one synchronisation ends them.
///
/// ```no_run
/// use cuda_staging::{Context, DeviceBuffer, DownloadBatch, StagingBuffer, Stream};
///
/// let ctx = Context::new(0)?;
/// let stream = Stream::new(&ctx)?;
/// let (boxes, scores) = (DeviceBuffer::<f32>::zeroed(4 * 100)?, DeviceBuffer::<f32>::zeroed(100)?);
/// let mut staging = StagingBuffer::new();
/// let mut batch = DownloadBatch::new();
/// let b = batch.add(&boxes, 4 * 100)?;
/// let s = batch.add(&scores, 100)?;
/// let landed = staging.download_batch(&batch, &stream)?; // one wait for both
/// let (boxes_host, scores_host) = (landed.get(b)?, landed.get(s)?);
/// assert_eq!((boxes_host.len(), scores_host.len()), (400, 100));
/// # Ok::<(), cuda_staging::Error>(())
/// ```
#[derive(Debug)]
pub struct DownloadBatch<'a> {
    pub(crate) id: u64,
    pub(crate) srcs: ArrayVec<DeviceView<'a, u8>, MAX_BATCH>,
    pub(crate) layout: Layout,
}

impl Default for DownloadBatch<'_> {
    fn default() -> Self {
        DownloadBatch::new()
    }
}

impl<'a> DownloadBatch<'a> {
    /// An empty batch.
    pub fn new() -> DownloadBatch<'a> {
        DownloadBatch {
            id: NEXT_BATCH_ID.fetch_add(1, Ordering::Relaxed),
            srcs: ArrayVec::new(),
            layout: Layout::default(),
        }
    }

    /// Adds `src[..n]`. `src` is a whole device buffer (`&buf`) or a view of part
    /// of one: views of one buffer at several offsets may be parts of one batch.
    /// Errors, changing nothing: `n` past `src.len()`, a byte count that overflows,
    /// more than [`MAX_BATCH_PARTS`] parts. (A part from another context than the
    /// stream is refused by the download, before any driver call.)
    ///
    /// ```no_run
    /// use cuda_staging::{Context, DeviceBuffer, DownloadBatch, StagingBuffer, Stream};
    ///
    /// let ctx = Context::new(0)?;
    /// let stream = Stream::new(&ctx)?;
    /// // Four frames' outputs in one [4, 1000] tensor: read frames 1 and 3.
    /// let scores = DeviceBuffer::<f32>::zeroed(4 * 1000)?;
    /// let (f1, f3) = (scores.slice(1000..2000)?, scores.slice(3000..4000)?);
    /// let mut batch = DownloadBatch::new();
    /// let p1 = batch.add(&f1, 1000)?;
    /// let p3 = batch.add(&f3, 1000)?;
    /// let mut staging = StagingBuffer::new();
    /// let landed = staging.download_batch(&batch, &stream)?;
    /// assert_eq!(landed.get(p1)?.len() + landed.get(p3)?.len(), 2000);
    /// # Ok::<(), cuda_staging::Error>(())
    /// ```
    pub fn add<T: StagingPod>(
        &mut self,
        src: &'a impl DeviceSlice<T>,
        n: usize,
    ) -> Result<Part<T>> {
        let op = "DownloadBatch::add";
        let bytes = check_len::<T>(op, n, src.len())?;
        let view = DeviceView::of(src).into_bytes().subview(..bytes)?;
        let offset = self.layout.push(op, bytes)?;
        self.srcs.push(view);
        Ok(Part {
            batch: self.id,
            offset,
            len: n,
            _elem: PhantomData,
        })
    }

    /// Parts added.
    pub fn len(&self) -> usize {
        self.srcs.len()
    }

    /// Whether no part was added.
    pub fn is_empty(&self) -> bool {
        self.srcs.is_empty()
    }

    /// Bytes of pinned memory the batch needs.
    pub fn region_bytes(&self) -> usize {
        self.layout.total
    }
}

/// Device buffers to upload together, each from a host slice:
/// [`StagingBuffer::upload_batch`](crate::StagingBuffer::upload_batch) copies every
/// slice into one pinned region and sends the parts with one wait, as
/// [`DownloadBatch`] does the other way.
#[derive(Debug)]
pub struct UploadBatch<'a> {
    pub(crate) dsts: ArrayVec<DeviceViewMut<'a, u8>, MAX_BATCH>,
    pub(crate) srcs: ArrayVec<&'a [u8], MAX_BATCH>,
    pub(crate) layout: Layout,
}

impl Default for UploadBatch<'_> {
    fn default() -> Self {
        UploadBatch::new()
    }
}

impl<'a> UploadBatch<'a> {
    /// An empty batch.
    pub fn new() -> UploadBatch<'a> {
        UploadBatch {
            dsts: ArrayVec::new(),
            srcs: ArrayVec::new(),
            layout: Layout::default(),
        }
    }

    /// Adds `src`, to land in `dst[..src.len()]`. `dst` is a whole device buffer
    /// (`&mut buf`) or a writable view of part of one. Errors, changing nothing:
    /// `src` longer than `dst`, more than [`MAX_BATCH_PARTS`] parts. (A part from
    /// another context than the stream is refused by the upload, before any driver
    /// call.)
    pub fn add<T: StagingPod>(
        &mut self,
        dst: &'a mut impl DeviceSliceMut<T>,
        src: &'a [T],
    ) -> Result<()> {
        let op = "UploadBatch::add";
        let bytes = check_len::<T>(op, src.len(), dst.len())?;
        let view = DeviceViewMut::of(dst)
            .into_bytes()
            .into_slice_mut(..bytes)?;
        self.layout.push(op, bytes)?;
        self.dsts.push(view);
        self.srcs.push(bytemuck::cast_slice(src));
        Ok(())
    }

    /// Parts added.
    pub fn len(&self) -> usize {
        self.dsts.len()
    }

    /// Whether no part was added.
    pub fn is_empty(&self) -> bool {
        self.dsts.is_empty()
    }
}

/// The landed parts of a [`DownloadBatch`], borrowed from the staging memory until
/// the next transfer.
#[derive(Debug)]
pub struct Landed<'s> {
    pub(crate) bytes: &'s [u8],
    pub(crate) batch: u64,
}

impl<'s> Landed<'s> {
    /// The elements of `part`. [`Error::InvalidArgument`] for a part of another
    /// batch.
    pub fn get<T: StagingPod>(&self, part: Part<T>) -> Result<&'s [T]> {
        if part.batch != self.batch {
            return Err(invalid("Landed::get", "the part belongs to another batch"));
        }
        let bytes = part.len * std::mem::size_of::<T>();
        if bytes == 0 {
            return Ok(crate::elements::no_bytes(part.len));
        }
        let region = self
            .bytes
            .get(part.offset..part.offset + bytes)
            .ok_or_else(|| crate::errors::internal("part outside the landed region"))?;
        cast::<T>(region)
    }
}

impl crate::StagingBuffer {
    /// Downloads every part of `batch` into one pinned region, in stream order after
    /// work already queued on `stream`, with one wait; returns the landed parts
    /// ([`Landed::get`]), borrowed until the next transfer.
    ///
    /// Errors (before any driver call, changing nothing): a part from another context
    /// than `stream`. An empty batch does nothing.
    pub fn download_batch(
        &mut self,
        batch: &DownloadBatch<'_>,
        stream: &Stream,
    ) -> Result<Landed<'_>> {
        let op = "download_batch";
        batch.check(op, stream)?;
        let total = batch.layout.total;
        if total == 0 {
            return Ok(Landed {
                bytes: &[],
                batch: batch.id,
            });
        }
        let m = Move {
            parts: &batch.layout.lens,
            ..Move::new(op, Direction::DeviceToHost, total)
        };
        let batch_api = self.config.batch_api;
        self.in_transfer(|s| {
            staged::download(s, &m, stream, |p| batch.queue(stream, p, batch_api))
        })?;
        Ok(Landed {
            bytes: self.landed(total)?,
            batch: batch.id,
        })
    }

    /// Uploads every part of `batch`: copies each host slice into one pinned region,
    /// then sends them in stream order after work already queued on `stream`, with
    /// one wait. Errors as [`StagingBuffer::download_batch`](crate::StagingBuffer::download_batch).
    pub fn upload_batch(&mut self, batch: &mut UploadBatch<'_>, stream: &Stream) -> Result<()> {
        let op = "upload_batch";
        for d in &batch.dsts {
            stream.check_memory(op, &d.device_access(), "a part's device buffer")?;
        }
        let total = batch.layout.total;
        if total == 0 {
            return Ok(());
        }
        let batch_api = self.config.batch_api;
        let UploadBatch { dsts, srcs, layout } = batch;
        self.in_transfer(|s| {
            let copier = s.copier(total, Direction::HostToDevice);
            let m = Move {
                parts: &layout.lens,
                ..Move::new(op, Direction::HostToDevice, total).copied(copier)
            };
            let fill = |region: &mut [u8]| -> Result<()> {
                for (src, &off) in srcs.iter().zip(&layout.offsets) {
                    copier.copy(&mut region[off..off + src.len()], src, streams(src.len()));
                }
                Ok(())
            };
            staged::upload(s, &m, stream, fill, |pinned| {
                if batch_api {
                    return stream.memcpy_htod_batch(pinned, &layout.offsets, dsts);
                }
                dsts.iter_mut()
                    .zip(&layout.offsets)
                    .try_for_each(|(dst, &off)| {
                        let len = dst.len();
                        stream.memcpy_htod(&pinned.slice(off..off + len)?, dst)
                    })
            })
        })?;
        Ok(())
    }
}

impl DownloadBatch<'_> {
    /// Refuses, naming `op`, a part whose memory `stream` cannot reach.
    pub(crate) fn check(&self, op: &'static str, stream: &Stream) -> Result<()> {
        for s in &self.srcs {
            stream.check_memory(op, &s.device_access(), "a part's device buffer")?;
        }
        Ok(())
    }

    /// Queues every part's copy into its place in `pinned` on `stream`: as one
    /// batch (`Stream::memcpy_dtoh_batch`) when `batch_api`, else one copy each.
    pub(crate) fn queue(
        &self,
        stream: &Stream,
        pinned: &mut PinnedBuffer<u8>,
        batch_api: bool,
    ) -> Result<()> {
        if batch_api {
            return stream.memcpy_dtoh_batch(&self.srcs, &self.layout.offsets, pinned);
        }
        self.srcs
            .iter()
            .zip(&self.layout.offsets)
            .try_for_each(|(src, &off)| {
                stream.memcpy_dtoh(src, &mut pinned.slice_mut(off..off + src.len())?)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_sit_at_256_byte_offsets_in_order() {
        let mut l = Layout::default();
        assert_eq!(l.push("x", 10).unwrap(), 0);
        assert_eq!(l.push("x", 4096).unwrap(), 256);
        assert_eq!(l.push("x", 0).unwrap(), 4352);
        assert_eq!(l.push("x", 1).unwrap(), 4352);
        assert_eq!(l.total, 4353);
    }

    #[test]
    fn a_batch_refuses_its_seventeenth_part_and_overflow() {
        let mut l = Layout::default();
        for _ in 0..MAX_BATCH {
            l.push("x", 1).unwrap();
        }
        let e = l.push("x", 1).unwrap_err();
        assert!(e.to_string().contains("at most 16 parts"), "{e}");
        let mut l = Layout::default();
        l.push("x", 10).unwrap();
        assert!(matches!(
            l.push("x", usize::MAX),
            Err(Error::SizeOverflow { .. })
        ));
        assert_eq!(l.lens.len(), 1, "a refused part changes nothing");
    }

    #[test]
    fn a_part_reads_only_from_its_own_batch() {
        let bytes = [0u8; 1024];
        let landed = Landed {
            bytes: &bytes,
            batch: 7,
        };
        let mine = Part::<u32> {
            batch: 7,
            offset: 256,
            len: 4,
            _elem: PhantomData,
        };
        assert_eq!(landed.get(mine).unwrap(), &[0u32; 4]);
        let other = Part::<u32> { batch: 8, ..mine };
        assert!(landed.get(other).is_err());
    }
}
