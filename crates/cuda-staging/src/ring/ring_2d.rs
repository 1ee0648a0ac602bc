//! [`StagingRing`]'s 2-D transfers: a slot holds a frame's rows packed, one
//! `cuMemcpy2DAsync` moves them to or from a pitched device region, and a
//! [`Ticket2d`] redeems a download as [`Rows`], packed in place, which copy out to
//! the caller's pitch on request. A child module of `ring`, for its slots.

use cuda_core::{DeviceSlice2d, DeviceSlice2dMut, Layout2d, Result, Stream};

use super::tickets::{sealed, RingTicket};
use super::{StagingRing, Ticket};
use crate::copy::Copier;
use crate::direction::Direction;
use crate::region_2d::{device_rows, host_rows, region_len};
use crate::staged::{self, Move};
use crate::{rows, StagingPod};

/// What a 2-D download's ticket redeems: `width * height` elements of `T`, the rows
/// of a device region, packed in one slot.
#[derive(Debug)]
#[must_use = "a download's data is read through its ticket"]
pub struct Ticket2d<T> {
    ticket: Ticket<T>,
    width: usize,
    height: usize,
}

impl<T> Ticket2d<T> {
    /// Elements per row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Rows.
    pub fn height(&self) -> usize {
        self.height
    }

    /// Elements the download moves: `width * height`.
    pub fn len(&self) -> usize {
        self.ticket.len()
    }

    /// Whether it moves none.
    pub fn is_empty(&self) -> bool {
        self.ticket.is_empty()
    }
}

impl StagingRing {
    /// Writes the rows of `dst` straight into a slot with `fill` (`width * height`
    /// elements, packed: row `r` is `[r * width, (r + 1) * width)`), queues one
    /// `cuMemcpy2DAsync` of them to `dst`'s rows at its pitch on `stream`, and returns
    /// without waiting for it (it lands in stream order). `dst`'s padding is not
    /// written.
    ///
    /// Waits only if the slot it comes round to is still in flight. Errors (before
    /// any driver call, changing nothing) as
    /// [`StagingBuffer::upload_2d_with`](crate::StagingBuffer::upload_2d_with). With
    /// no row or no element, `fill` gets an empty slice and nothing else happens. A
    /// panic in `fill` leaves the ring valid (the slot was not queued).
    pub fn upload_2d_with<T: StagingPod, F: FnOnce(&mut [T])>(
        &mut self,
        dst: &mut impl DeviceSlice2dMut<T>,
        stream: &Stream,
        fill: F,
    ) -> Result<()> {
        staged::filled_upload_2d(self, "StagingRing::upload_2d_with", dst, stream, fill)
    }

    /// Copies the rows of `src` (rows `src_pitch_bytes` apart) into a slot, packed,
    /// queues one `cuMemcpy2DAsync` of them to `dst`'s rows on `stream` and returns
    /// without waiting for the DMA (`src` is free again on return). Errors as
    /// [`StagingBuffer::upload_2d`](crate::StagingBuffer::upload_2d).
    pub fn upload_2d<T: StagingPod>(
        &mut self,
        dst: &mut impl DeviceSlice2dMut<T>,
        src: &[T],
        src_pitch_bytes: usize,
        stream: &Stream,
    ) -> Result<()> {
        let op = "StagingRing::upload_2d";
        let device = device_rows(op, dst, stream)?;
        let host = host_rows::<T>(op, &device, dst.width(), src_pitch_bytes, src.len())?;
        let bytes = device.packed_bytes();
        if bytes == 0 {
            return Ok(());
        }
        let copier = Copier::for_transfer(
            self.config.copy_threads,
            bytes,
            Direction::HostToDevice,
            false,
        )
        .last(true);
        let m =
            Move::new(op, Direction::HostToDevice, bytes).copied(rows::copier_for(&host, copier));
        let src: &[u8] = bytemuck::cast_slice(src);
        staged::upload_rows(self, &m, dst, &device, stream, |slot| {
            rows::pack(slot, src, &host, copier)
        })
        .map(drop)
    }

    /// Queues one `cuMemcpy2DAsync` of the rows of `src` (a 2-D device region) into
    /// a slot, packed, on `stream`, and returns a ticket for them without waiting.
    /// Redeem it with [`StagingRing::wait`], which hands out the rows in place,
    /// packed ([`Rows`], which [`Rows::copy_to`] copies out to a pitch of your
    /// choice), before the ring comes round to the same slot again (`slots`
    /// transfers later).
    /// Errors as [`StagingBuffer::download_2d_into`](crate::StagingBuffer::download_2d_into).
    pub fn download_2d<T: StagingPod>(
        &mut self,
        src: &impl DeviceSlice2d<T>,
        stream: &Stream,
    ) -> Result<Ticket2d<T>> {
        let op = "StagingRing::download_2d";
        let device = device_rows(op, src, stream)?;
        let (width, height) = (src.width(), device.height());
        let len = region_len(op, width, height)?;
        let bytes = device.packed_bytes();
        let mut k = None;
        if bytes > 0 {
            let m = Move::new(op, Direction::DeviceToHost, bytes);
            k = Some(staged::download_rows(
                self,
                &m,
                (src, &device),
                stream,
                |_| Ok(()),
            )?);
        }
        Ok(Ticket2d {
            ticket: Ticket::new(self.stamp(k), len),
            width,
            height,
        })
    }
}

/// A 2-D download landed in a ring slot: `width * height` elements, packed (row `r`
/// at `[r * width, (r + 1) * width)`), borrowed from the ring. Derefs to the packed
/// elements; [`Rows::copy_to`] spreads them to a pitch.
#[derive(Clone, Copy, Debug)]
pub struct Rows<'a, T> {
    elems: &'a [T],
    width: usize,
    height: usize,
}

impl<'a, T: StagingPod> Rows<'a, T> {
    /// The packed elements.
    pub fn as_slice(&self) -> &'a [T] {
        self.elems
    }

    /// Copies the rows into `dst`, whose rows start `dst_pitch_bytes` apart; the
    /// bytes of `dst` between its rows are not written. Errors, changing nothing:
    /// [`Error::PitchTooSmall`](crate::Error::PitchTooSmall) /
    /// [`Error::RegionOutOfBounds`](crate::Error::RegionOutOfBounds) for `dst` as
    /// [`StagingBuffer::download_2d`](crate::StagingBuffer::download_2d).
    pub fn copy_to(&self, dst: &mut [T], dst_pitch_bytes: usize) -> Result<()> {
        let op = "Rows::copy_to";
        let rows_of = Layout2d::packed::<T>(op, self.width, self.height)?;
        let host = host_rows::<T>(op, &rows_of, self.width, dst_pitch_bytes, dst.len())?;
        let landed: &[u8] = bytemuck::cast_slice(self.elems);
        rows::unpack(bytemuck::cast_slice_mut(dst), landed, &host, Copier::solo())
    }
}

impl<T> std::ops::Deref for Rows<'_, T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.elems
    }
}

impl<T> sealed::Sealed for Ticket2d<T> {}

impl<T: StagingPod> RingTicket for Ticket2d<T> {
    type Landed<'a> = Rows<'a, T>;

    fn landed_in<'a>(&self, ring: &'a StagingRing) -> Result<Rows<'a, T>> {
        Ok(Rows {
            elems: self.ticket.landed_in(ring)?,
            width: self.width,
            height: self.height,
        })
    }
}
