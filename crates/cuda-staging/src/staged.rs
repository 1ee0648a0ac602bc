//! The one path of every staged transfer that goes through a single pinned region:
//! `upload_with`, `download_into`, the 2-D transfers, the batches and all of the
//! ring's. Pinned memory comes from a [`Region`] (a `StagingBuffer`'s, or a
//! `StagingRing`'s next slot); the caller's fill or the DMA writes it; the DMA is
//! queued; the region ends the transfer (the buffer waits for it to land, the ring
//! records the slot's event). The span and the counters are kept here too, so that
//! every such transfer is traced and counted the same way.
//!
//! (`upload` / `download` of a staged route are pipelined in chunks through the
//! buffer's window instead: `pipeline.rs`.)

use cuda_core::{
    Context, DeviceSlice2d, DeviceSlice2dMut, DeviceSliceMut, DeviceViewMut, Error, Layout2d,
    PinnedBuffer, Result, Stream,
};

use crate::copy::Copier;
use crate::direction::Direction;
use crate::elements::{cast_mut, check_transfer, no_bytes};
use crate::errors::internal;
use crate::fill::FillError;
use crate::region_2d::{device_rows, region_len};
use crate::trace::{SpanRoute, TransferSpan};
use crate::StagingPod;

/// Pinned memory a transfer passes through, and how a transfer through it ends.
pub(crate) trait Region {
    /// What ending a transfer needs from its start: the buffer's wait, the ring's
    /// slot.
    type Turn: Copy;

    /// The route a span of this region's transfer names (`batch`: of a batch).
    fn route(batch: bool) -> SpanRoute;

    /// Pinned memory of at least `bytes` in `ctx`, for one transfer.
    fn take(&mut self, bytes: usize, ctx: &Context) -> Result<(&mut PinnedBuffer<u8>, Self::Turn)>;

    /// Called once the region holds what it sends (after a fill) and just before
    /// the DMA of `bytes` is queued on `stream`.
    fn before_dma(turn: Self::Turn, bytes: usize, stream: &Stream) -> Self::Turn;

    /// The DMA is queued on `stream`: wait for it, or record that it was queued.
    fn end(&mut self, turn: Self::Turn, stream: &Stream) -> Result<()>;

    /// Counts a transfer of `bytes` moving `direction` (`batch`: a batch's parts).
    fn count(&mut self, direction: Direction, bytes: usize, batch: bool);

    /// Runs `body`, one transfer, inside the region's own bookkeeping: a buffer
    /// notes when its transfers start and end, on every exit path, a panic in the
    /// caller's `fill` included.
    fn bracket<O>(&mut self, body: impl FnOnce(&mut Self) -> O) -> O;
}

/// One transfer through a [`Region`], as its span and counters see it.
pub(crate) struct Move<'a> {
    pub(crate) op: &'static str,
    pub(crate) direction: Direction,
    /// Pinned bytes it passes through (for a batch, with the gaps between parts).
    pub(crate) bytes: usize,
    /// A batch's parts' bytes; empty for one tensor.
    pub(crate) parts: &'a [usize],
    /// The host copy its fill makes, for the span; `None` when the caller's own
    /// `fill` writes, or the DMA does.
    pub(crate) copier: Option<Copier<'a>>,
}

impl<'a> Move<'a> {
    /// One tensor of `bytes`, which nothing of this crate copies on the host.
    pub(crate) fn new(op: &'static str, direction: Direction, bytes: usize) -> Move<'a> {
        Move {
            op,
            direction,
            bytes,
            parts: &[],
            copier: None,
        }
    }

    /// The same transfer, whose fill copies with `copier`.
    pub(crate) fn copied(self, copier: Copier<'a>) -> Move<'a> {
        Move {
            copier: Some(copier),
            ..self
        }
    }

    /// The bytes moved: a batch's without the gaps between its parts.
    fn moved(&self) -> usize {
        match self.parts {
            [] => self.bytes,
            parts => parts.iter().sum(),
        }
    }

    /// Opens the transfer's span, with everything known before it runs.
    fn span<R: Region + ?Sized>(&self) -> TransferSpan {
        let span = TransferSpan::start(self.op, self.direction, self.moved());
        span.route(R::route(!self.parts.is_empty()));
        if !self.parts.is_empty() {
            span.parts(self.parts.len());
        }
        match self.copier {
            None => span.no_copy(),
            Some(c) if self.parts.is_empty() => span.copied(c, self.bytes),
            Some(c) => span.copied_parts(c, self.parts),
        }
        span
    }
}

/// An upload: `fill` writes the first `m.bytes` of the region, then `dma` queues
/// their copy from it on `stream`, and the region ends it. When `fill` returns
/// `Err` (for a caller's fill, its error as [`FillError::Fill`]) nothing is queued or
/// counted.
pub(crate) fn upload<R: Region, E: From<Error>>(
    region: &mut R,
    m: &Move<'_>,
    stream: &Stream,
    fill: impl FnOnce(&mut [u8]) -> std::result::Result<(), E>,
    dma: impl FnOnce(&PinnedBuffer<u8>) -> Result<()>,
) -> std::result::Result<R::Turn, E> {
    let bytes = m.bytes;
    run(
        region,
        m,
        stream,
        |pinned| {
            fill(
                pinned
                    .as_mut_slice()?
                    .get_mut(..bytes)
                    .ok_or_else(too_small)?,
            )
        },
        |pinned| dma(pinned),
        |_| Ok(()),
    )
}

/// `upload_with` / `try_upload_with` (and the ring's `upload`), with errors naming
/// `op`: `fill` writes `n` elements in the region (copying with `copier`, if it
/// does), which are then sent to the start of `dst`. With `n` elements of no bytes,
/// `fill` gets them and nothing else happens.
pub(crate) fn filled_upload<R: Region, T: StagingPod, E>(
    region: &mut R,
    op: &'static str,
    (dst, n): (&mut (impl DeviceSliceMut<T> + ?Sized), usize),
    stream: &Stream,
    copier: Option<Copier<'static>>,
    fill: impl FnOnce(&mut [T]) -> std::result::Result<(), E>,
) -> std::result::Result<(), FillError<E>> {
    let bytes = check_transfer::<T>(op, n, dst, stream)?;
    if bytes == 0 {
        return fill(no_bytes(n)).map_err(FillError::Fill);
    }
    let m = Move {
        copier,
        ..Move::new(op, Direction::HostToDevice, bytes)
    };
    let fill = |px: &mut [u8]| fill(cast_mut::<T>(px)?).map_err(FillError::Fill);
    let dma = |pinned: &PinnedBuffer<u8>| {
        let dst = DeviceViewMut::of(dst).into_bytes();
        stream.memcpy_htod(&pinned.slice(..bytes)?, &mut dst.into_slice_mut(..bytes)?)
    };
    region
        .bracket(|r| upload(r, &m, stream, fill, dma))
        .map(drop)
}

/// `upload_2d_with`, with errors naming `op`: `fill` writes `dst`'s rows packed in
/// the region, one 2-D DMA spreads them to its pitch. With no row or no element,
/// `fill` gets an empty slice and nothing else happens.
pub(crate) fn filled_upload_2d<R: Region, T: StagingPod>(
    region: &mut R,
    op: &'static str,
    dst: &mut impl DeviceSlice2dMut<T>,
    stream: &Stream,
    fill: impl FnOnce(&mut [T]),
) -> Result<()> {
    let device = device_rows(op, dst, stream)?;
    let bytes = device.packed_bytes();
    if bytes == 0 {
        fill(no_bytes(region_len(op, dst.width(), device.height())?));
        return Ok(());
    }
    let m = Move::new(op, Direction::HostToDevice, bytes);
    let fill = |pinned: &mut [u8]| {
        fill(cast_mut::<T>(pinned)?);
        Ok(())
    };
    region
        .bracket(|r| upload_rows(r, &m, dst, &device, stream, fill))
        .map(drop)
}

/// A download: `dma` queues the copy into the region on `stream`, and the region
/// ends it.
pub(crate) fn download<R: Region>(
    region: &mut R,
    m: &Move<'_>,
    stream: &Stream,
    dma: impl FnOnce(&mut PinnedBuffer<u8>) -> Result<()>,
) -> Result<R::Turn> {
    run(region, m, stream, |_| Ok(()), dma, |_| Ok(()))
}

/// Every transfer through a region: its span, the region taken, `fill`, the DMA
/// queued by `dma`, the region's end of it, `landed` (a copy out of what landed,
/// inside the span), and the counters, once all of it succeeded.
fn run<R: Region, E: From<Error>>(
    region: &mut R,
    m: &Move<'_>,
    stream: &Stream,
    fill: impl FnOnce(&mut PinnedBuffer<u8>) -> std::result::Result<(), E>,
    dma: impl FnOnce(&mut PinnedBuffer<u8>) -> Result<()>,
    landed: impl FnOnce(&mut R) -> Result<()>,
) -> std::result::Result<R::Turn, E> {
    let mut span = m.span::<R>();
    let (pinned, turn) = region.take(m.bytes, stream.context())?;
    fill(pinned)?;
    // How a buffer waits is decided after the fill (which may take long) and before
    // the DMA is queued: whether anything is queued ahead of it.
    let turn = R::before_dma(turn, m.bytes, stream);
    dma(pinned)?;
    region.end(turn, stream)?;
    landed(region)?;
    region.count(m.direction, m.moved(), !m.parts.is_empty());
    span.succeeded();
    Ok(turn)
}

/// A 2-D upload: `fill` writes `device`'s rows packed, one 2-D DMA spreads them to
/// `dst`'s pitch.
pub(crate) fn upload_rows<R: Region, T: StagingPod>(
    region: &mut R,
    m: &Move<'_>,
    dst: &mut impl DeviceSlice2dMut<T>,
    device: &Layout2d,
    stream: &Stream,
    fill: impl FnOnce(&mut [u8]) -> Result<()>,
) -> Result<R::Turn> {
    upload(region, m, stream, fill, |pinned| {
        stream.memcpy_2d_htod(pinned, device.row_bytes(), &mut dst.as_bytes_2d_mut())
    })
}

/// A 2-D download: one 2-D DMA packs `src`'s rows into the region; `landed` then
/// copies them out, if the call does (inside the span, before the count).
pub(crate) fn download_rows<R: Region, T: StagingPod>(
    region: &mut R,
    m: &Move<'_>,
    (src, device): (&impl DeviceSlice2d<T>, &Layout2d),
    stream: &Stream,
    landed: impl FnOnce(&mut R) -> Result<()>,
) -> Result<R::Turn> {
    let dma = |pinned: &mut PinnedBuffer<u8>| {
        stream.memcpy_2d_dtoh(&src.as_bytes_2d(), pinned, device.row_bytes())
    };
    run(region, m, stream, |_| Ok(()), dma, landed)
}

/// The error of a region shorter than it was made for: a bug of this crate.
pub(crate) fn too_small() -> cuda_core::Error {
    internal("pinned region smaller than taken")
}

#[cfg(test)]
mod tests;
