//! [`StagingBuffer`]'s 2-D transfers: rows with a pitch on the host side, a pitched
//! device region ([`DeviceSlice2d`]: a `PitchedBuffer`, or rows over a linear
//! buffer) on the other, packed rows in pinned memory between, and one
//! `cuMemcpy2DAsync` for the DMA.

use cuda_core::{DeviceSlice2d, DeviceSlice2dMut, Result, Stream, WaitPolicy};

use crate::copy::Copier;
use crate::direction::Direction;
use crate::elements::{cast, no_bytes};
use crate::region_2d::{device_rows, host_rows, region_len};
use crate::routing::Decision;
use crate::staged::{self, Move};
use crate::trace::{SpanRoute, TransferSpan};
use crate::{rows, StagingBuffer, StagingPod};

impl StagingBuffer {
    /// Copies the rows of `src` — rows of `dst.width()` elements, each starting
    /// `src_pitch_bytes` after the one before (a decoder's line size) — into the rows
    /// of `dst`, a 2-D device region with its own pitch, returning once they have
    /// landed. Neither side's padding is read or written.
    ///
    /// The rows are copied (packed) into pinned memory, then one `cuMemcpy2DAsync`
    /// spreads them to `dst`'s pitch, queued on `stream` after the work already
    /// there. Contiguous host rows are copied as `upload` copies (split over the copy
    /// pool); padded ones row by row on the calling thread. Counted as a staged
    /// transfer of `width * height * size_of::<T>()` bytes. Routed as `upload`: a
    /// paced transfer (after a gap, or within a frame's few) that the calling thread
    /// would copy alone goes to the driver's own `cuMemcpy2D` from `src` instead
    /// ([`StagingConfig::driver_after_gap`](crate::StagingConfig::driver_after_gap)), counted as a direct transfer.
    ///
    /// Errors, before any driver call and changing nothing:
    /// [`Error::PitchTooSmall`](crate::Error::PitchTooSmall) when `src_pitch_bytes` is
    /// shorter than a row, [`Error::RegionOutOfBounds`](crate::Error::RegionOutOfBounds)
    /// when `src` is too short for the rows (it needs
    /// `(height - 1) * src_pitch_bytes + row_bytes` bytes: the last row needs no
    /// padding), overflowing byte counts, `dst` from another context than `stream`.
    /// A region with no row or no element does nothing.
    pub fn upload_2d<T: StagingPod>(
        &mut self,
        dst: &mut impl DeviceSlice2dMut<T>,
        src: &[T],
        src_pitch_bytes: usize,
        stream: &Stream,
    ) -> Result<()> {
        let op = "upload_2d";
        let device = device_rows(op, dst, stream)?;
        let host = host_rows::<T>(op, &device, dst.width(), src_pitch_bytes, src.len())?;
        let bytes = device.packed_bytes();
        if bytes == 0 {
            return Ok(());
        }
        self.in_transfer(|s| {
            let decision = s.decide_rows(bytes, Direction::HostToDevice, host.is_contiguous());
            let Decision::Staged(staged) = decision else {
                return s.driver_2d(op, Direction::HostToDevice, bytes, stream, |wait| {
                    stream.memcpy_2d_htod_sync_with(src, src_pitch_bytes, dst, wait)
                });
            };
            let copier = Copier::shaped(staged.copy).last(true);
            let m = Move::new(op, Direction::HostToDevice, bytes).copied(copier);
            let src: &[u8] = bytemuck::cast_slice(src);
            staged::upload_rows(s, &m, dst, &device, stream, |pinned| {
                rows::pack(pinned, src, &host, copier)
            })
            .map(drop)
        })
    }

    /// Writes the rows of `dst` straight into pinned memory with `fill`, then copies
    /// them to `dst`'s rows at its pitch (one `cuMemcpy2DAsync`), returning once
    /// they have landed. `dst`'s padding is not written.
    ///
    /// `fill` gets `width * height` elements, packed: row `r` is
    /// `[r * width, (r + 1) * width)`. What it leaves there is sent. With no row or
    /// no element, `fill` gets an empty slice and nothing else happens. Errors
    /// (before any driver call, changing nothing): overflowing byte counts, `dst`
    /// from another context than `stream`. A panic in `fill` leaves the buffer
    /// valid: nothing was queued.
    pub fn upload_2d_with<T: StagingPod, F: FnOnce(&mut [T])>(
        &mut self,
        dst: &mut impl DeviceSlice2dMut<T>,
        stream: &Stream,
        fill: F,
    ) -> Result<()> {
        staged::filled_upload_2d(self, "upload_2d_with", dst, stream, fill)
    }

    /// Copies the rows of `src`, a 2-D device region, into `dst`, whose rows start
    /// `dst_pitch_bytes` apart, returning once they have landed. The bytes of `dst`
    /// between its rows are not written.
    ///
    /// One `cuMemcpy2DAsync` packs the rows into pinned memory, queued on `stream`
    /// after the work already there (so it sees that work's results); then they are
    /// copied out to `dst`'s pitch. Routed as [`StagingBuffer::upload_2d`]: a paced
    /// download of more than 512 KiB of rows goes to the driver's `cuMemcpy2D` into
    /// `dst` (outside tight loops no download wakes a copy helper). Errors as
    /// [`StagingBuffer::upload_2d`], for `dst`.
    pub fn download_2d<T: StagingPod>(
        &mut self,
        dst: &mut [T],
        dst_pitch_bytes: usize,
        src: &impl DeviceSlice2d<T>,
        stream: &Stream,
    ) -> Result<()> {
        let op = "download_2d";
        let device = device_rows(op, src, stream)?;
        let host = host_rows::<T>(op, &device, src.width(), dst_pitch_bytes, dst.len())?;
        let bytes = device.packed_bytes();
        if bytes == 0 {
            return Ok(());
        }
        self.in_transfer(|s| {
            let decision = s.decide_rows(bytes, Direction::DeviceToHost, host.is_contiguous());
            let Decision::Staged(staged) = decision else {
                return s.driver_2d(op, Direction::DeviceToHost, bytes, stream, |wait| {
                    stream.memcpy_2d_dtoh_sync_with(src, dst, dst_pitch_bytes, wait)
                });
            };
            let copier = Copier::shaped(staged.copy).last(true);
            let m = Move::new(op, Direction::DeviceToHost, bytes).copied(copier);
            let unpack = |s: &mut StagingBuffer| {
                let landed = s.landed(bytes)?;
                rows::unpack(bytemuck::cast_slice_mut(dst), landed, &host, copier)
            };
            staged::download_rows(s, &m, (src, &device), stream, unpack).map(drop)
        })
    }

    /// Copies the rows of `src`, a 2-D device region, into pinned memory and returns
    /// them there, packed (`width * height` elements; row `r` is
    /// `[r * width, (r + 1) * width)`), once they have landed.
    ///
    /// The slice borrows the staging buffer, so it cannot outlive the next call.
    /// With no row or no element it returns an empty slice and does nothing. Errors
    /// as [`StagingBuffer::upload_2d_with`].
    pub fn download_2d_into<T: StagingPod>(
        &mut self,
        src: &impl DeviceSlice2d<T>,
        stream: &Stream,
    ) -> Result<&[T]> {
        let op = "download_2d_into";
        let device = device_rows(op, src, stream)?;
        let bytes = device.packed_bytes();
        if bytes == 0 {
            return Ok(no_bytes(region_len(op, src.width(), device.height())?));
        }
        let m = Move::new(op, Direction::DeviceToHost, bytes);
        self.in_transfer(|s| staged::download_rows(s, &m, (src, &device), stream, |_| Ok(())))?;
        cast::<T>(self.landed(bytes)?)
    }

    /// The driver's own 2-D copy of `bytes` of rows moving `direction`, made by
    /// `copy` with the wait it is given, after waiting for the work ahead as the
    /// policy says (`waiting::for_driver_copy`); traced and counted as direct.
    fn driver_2d(
        &mut self,
        op: &'static str,
        direction: Direction,
        bytes: usize,
        stream: &Stream,
        copy: impl FnOnce(WaitPolicy) -> Result<()>,
    ) -> Result<()> {
        let mut span = TransferSpan::start(op, direction, bytes);
        span.route(SpanRoute::Driver);
        span.no_copy();
        crate::waiting::for_driver_copy(self.config.wait_policy, direction, bytes, stream)
            .and_then(copy)?;
        self.stats.direct_transfers += 1;
        self.stats.add_bytes(direction, bytes);
        span.succeeded();
        Ok(())
    }
}
