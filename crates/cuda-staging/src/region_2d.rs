//! What every 2-D transfer checks before any driver call: the device region against
//! the stream, the caller's host rows against their slice, and element counts.

use cuda_core::{byte_len, DeviceSlice2d, Layout2d, Result, Stream};

use crate::errors::invalid;
use crate::StagingPod;

/// What the caller's side of a 2-D transfer is called in errors.
pub(crate) const HOST_ROWS: &str = "the host rows";

/// The rows of `region`, a 2-D device region of `T` that a transfer on `stream`
/// moves: [`Error::ContextMismatch`] when it lives in another context
/// (`Stream::check_memory_2d`).
pub(crate) fn device_rows<T: StagingPod>(
    op: &'static str,
    region: &impl DeviceSlice2d<T>,
    stream: &Stream,
) -> Result<Layout2d> {
    stream.check_memory_2d(op, &region.device_2d_access(), "the device region")?;
    Ok(region.layout())
}

/// The caller's rows matching a region `width` elements wide and `device.height()`
/// rows high, `pitch_bytes` apart in a host slice of `len` elements of `T`:
/// [`Error::PitchTooSmall`] / [`Error::RegionOutOfBounds`] (and overflow errors)
/// naming `op`.
pub(crate) fn host_rows<T: StagingPod>(
    op: &'static str,
    device: &Layout2d,
    width: usize,
    pitch_bytes: usize,
    len: usize,
) -> Result<Layout2d> {
    let host = Layout2d::new::<T>(op, HOST_ROWS, width, device.height(), pitch_bytes)?;
    host.check_fits(op, HOST_ROWS, byte_len::<T>(op, len)?)?;
    Ok(host)
}

/// The elements of a region of `width` x `height` (a packed slice of it), or
/// [`Error::InvalidArgument`] when that overflows (only zero-sized elements can get
/// there: for others the region's bytes were checked first).
pub(crate) fn region_len(op: &'static str, width: usize, height: usize) -> Result<usize> {
    width.checked_mul(height).ok_or_else(|| {
        invalid(
            op,
            format!("a region of {width} x {height} elements overflows an element count"),
        )
    })
}
