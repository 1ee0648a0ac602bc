//! 2-D copies queued on a [`Stream`] (`cuMemcpy2DAsync`): rows between host memory
//! with one pitch and a 2-D region of device memory with another, padding left
//! alone on both sides.

use std::ffi::c_void;

use bytemuck::Pod;

use crate::error::Result;
use crate::layout_2d::Layout2d;
use crate::memory::{PageLockedSlice, PageLockedSliceMut};
use crate::result::{self, Copy2d, Side2d};
use crate::stream::{host_uses, Stream};
use crate::tracking::{Access, Use};
use crate::view_2d::{Device2dAccess, DeviceSlice2d, DeviceSlice2dMut};
use crate::wait::WaitPolicy;

/// What the host side of a 2-D copy is called in errors.
const HOST_ROWS: &str = "the host rows";

/// The host rows of a copy to or from the device region `d`: `d`'s rows at
/// `pitch_bytes`, in host memory of `len` elements of `T`, checked.
fn host_rows<T>(
    op: &'static str,
    d: &Device2dAccess<'_>,
    width: usize,
    len: usize,
    pitch_bytes: usize,
) -> Result<Layout2d> {
    let host = Layout2d::new::<T>(op, HOST_ROWS, width, d.layout.height(), pitch_bytes)?;
    host.check_fits(op, HOST_ROWS, crate::byte_len::<T>(op, len)?)?;
    Ok(host)
}

/// The copy of `d`'s rows from host rows at `host` with `host_pitch`.
fn upload(host: *const c_void, host_pitch: usize, d: &Device2dAccess<'_>) -> Copy2d {
    Copy2d {
        src: Side2d::Host(host),
        src_pitch: host_pitch,
        dst: Side2d::Device(d.ptr),
        dst_pitch: d.layout.pitch_bytes(),
        width_bytes: d.layout.row_bytes(),
        height: d.layout.height(),
    }
}

/// The copy of `d`'s rows into host rows at `host` with `host_pitch`.
fn download(d: &Device2dAccess<'_>, host: *mut c_void, host_pitch: usize) -> Copy2d {
    Copy2d {
        src: Side2d::Device(d.ptr),
        src_pitch: d.layout.pitch_bytes(),
        dst: Side2d::Host(host.cast_const()),
        dst_pitch: host_pitch,
        width_bytes: d.layout.row_bytes(),
        height: d.layout.height(),
    }
}

impl Stream {
    /// Queues a copy of the rows of `src` (page-locked host memory whose rows start
    /// `src_pitch_bytes` apart) into the rows of `dst` (a 2-D region of device
    /// memory, with its own pitch), and returns. `dst`'s width and height say how
    /// many: `height` rows of `width` elements. Neither side's padding is read or
    /// written.
    ///
    /// Errors, before any driver call and changing nothing:
    /// [`crate::Error::PitchTooSmall`] when `src_pitch_bytes` is shorter than a row,
    /// [`crate::Error::RegionOutOfBounds`] when `src` is too short for the rows (it
    /// needs `(height - 1) * src_pitch_bytes + row_bytes` bytes),
    /// [`crate::Error::ContextMismatch`] when `dst` lives in another context than the
    /// stream. A region with no row or an empty row queues nothing. The driver
    /// refuses pitches above the device's `CU_DEVICE_ATTRIBUTE_MAX_PITCH` (about
    /// 2 GiB on current GPUs) with its own error.
    pub fn memcpy_2d_htod<T: Pod>(
        &self,
        src: &impl PageLockedSlice<T>,
        src_pitch_bytes: usize,
        dst: &mut impl DeviceSlice2dMut<T>,
    ) -> Result<()> {
        let op = "memcpy_2d_htod";
        let width = dst.width();
        let d = dst.device_2d_access();
        host_rows::<T>(op, &d, width, src.len(), src_pitch_bytes)?;
        self.check_context(op, &d, "the destination device region")?;
        if d.layout.is_empty() {
            return Ok(());
        }
        let h = src.host_access();
        let mut uses = host_uses(&h, Access::Read);
        uses[2] = Some(Use::lock(d.tracker, Access::Write));
        let copy = upload(h.ptr.cast::<c_void>(), src_pitch_bytes, &d);
        self.queue(op, &mut uses, || {
            // SAFETY: the host memory holds every source row (checked) and, being
            // tracked, is neither written nor freed by safe code until the copy is
            // known complete; `d` holds every destination row (its layout was checked
            // against its memory) and is tracked; host and device memory do not
            // overlap; the stream is live and its context current (entered in
            // `queue`).
            unsafe { result::memcpy_2d_async(&copy, self.as_raw()) }
        })
    }

    /// Queues a copy of the rows of `src` (a 2-D region of device memory) into
    /// `dst` (page-locked host memory whose rows start `dst_pitch_bytes` apart) and
    /// returns. Reading `dst` waits for it. The bytes of `dst` between its rows are
    /// not written.
    ///
    /// Errors as [`Stream::memcpy_2d_htod`].
    pub fn memcpy_2d_dtoh<T: Pod>(
        &self,
        src: &impl DeviceSlice2d<T>,
        dst: &mut impl PageLockedSliceMut<T>,
        dst_pitch_bytes: usize,
    ) -> Result<()> {
        let op = "memcpy_2d_dtoh";
        let d = src.device_2d_access();
        host_rows::<T>(op, &d, src.width(), dst.len(), dst_pitch_bytes)?;
        self.check_context(op, &d, "the source device region")?;
        if d.layout.is_empty() {
            return Ok(());
        }
        let h = dst.host_access();
        let mut uses = host_uses(&h, Access::Write);
        uses[2] = Some(Use::lock(d.tracker, Access::Read));
        let copy = download(&d, h.ptr.cast::<c_void>(), dst_pitch_bytes);
        self.queue(op, &mut uses, || {
            // SAFETY: as in `memcpy_2d_htod`, the other way round: the host memory
            // holds every destination row and, being tracked, is neither read,
            // written nor freed by safe code until the copy is known complete; any
            // bytes are a valid `T` (Pod).
            unsafe { result::memcpy_2d_async(&copy, self.as_raw()) }
        })
    }

    /// Copies the rows of any host memory (pageable or not; rows `src_pitch_bytes`
    /// apart) into the rows of `dst` in stream order (`cuMemcpy2DAsync`, the driver
    /// staging pageable memory itself), and waits for the stream before returning,
    /// so `src` is free again. Errors as [`Stream::memcpy_2d_htod`], plus the wait's.
    /// Waits as [`Stream::synchronize`].
    pub fn memcpy_2d_htod_sync<T: Pod>(
        &self,
        src: &[T],
        src_pitch_bytes: usize,
        dst: &mut impl DeviceSlice2dMut<T>,
    ) -> Result<()> {
        self.memcpy_2d_htod_sync_with(src, src_pitch_bytes, dst, WaitPolicy::default())
    }

    /// [`Stream::memcpy_2d_htod_sync`], waiting as `policy` says.
    pub fn memcpy_2d_htod_sync_with<T: Pod>(
        &self,
        src: &[T],
        src_pitch_bytes: usize,
        dst: &mut impl DeviceSlice2dMut<T>,
        policy: WaitPolicy,
    ) -> Result<()> {
        let op = "memcpy_2d_htod_sync";
        let width = dst.width();
        let d = dst.device_2d_access();
        host_rows::<T>(op, &d, width, src.len(), src_pitch_bytes)?;
        self.check_context(op, &d, "the destination device region")?;
        if d.layout.is_empty() {
            return Ok(());
        }
        let mut uses = [Some(Use::lock(d.tracker, Access::Write)), None, None, None];
        let copy = upload(src.as_ptr().cast::<c_void>(), src_pitch_bytes, &d);
        let queued = self.queue(op, &mut uses, || {
            // SAFETY: `src` holds every source row (checked) and is borrowed until
            // the synchronisation below has seen the copy over; `d` holds every destination row and
            // is tracked; stream live, context current.
            unsafe { result::memcpy_2d_async(&copy, self.as_raw()) }
        });
        drop(uses);
        self.finish_sync_copy(queued, policy)
    }

    /// Copies the rows of `src` into any host memory `dst` (rows `dst_pitch_bytes`
    /// apart) in stream order, and waits for the stream before returning. The bytes
    /// of `dst` between its rows are not written. Errors as
    /// [`Stream::memcpy_2d_htod`], plus the wait's. Waits as [`Stream::synchronize`].
    pub fn memcpy_2d_dtoh_sync<T: Pod>(
        &self,
        src: &impl DeviceSlice2d<T>,
        dst: &mut [T],
        dst_pitch_bytes: usize,
    ) -> Result<()> {
        self.memcpy_2d_dtoh_sync_with(src, dst, dst_pitch_bytes, WaitPolicy::default())
    }

    /// [`Stream::memcpy_2d_dtoh_sync`], waiting as `policy` says.
    pub fn memcpy_2d_dtoh_sync_with<T: Pod>(
        &self,
        src: &impl DeviceSlice2d<T>,
        dst: &mut [T],
        dst_pitch_bytes: usize,
        policy: WaitPolicy,
    ) -> Result<()> {
        let op = "memcpy_2d_dtoh_sync";
        let d = src.device_2d_access();
        host_rows::<T>(op, &d, src.width(), dst.len(), dst_pitch_bytes)?;
        self.check_context(op, &d, "the source device region")?;
        if d.layout.is_empty() {
            return Ok(());
        }
        let mut uses = [Some(Use::lock(d.tracker, Access::Read)), None, None, None];
        let copy = download(&d, dst.as_mut_ptr().cast::<c_void>(), dst_pitch_bytes);
        let queued = self.queue(op, &mut uses, || {
            // SAFETY: `dst` holds every destination row (checked) and is exclusively
            // borrowed until the synchronisation below has seen the copy over; any bytes are a
            // valid `T`; `d` holds every source row and is tracked; stream live,
            // context current.
            unsafe { result::memcpy_2d_async(&copy, self.as_raw()) }
        });
        drop(uses);
        self.finish_sync_copy(queued, policy)
    }

    fn check_context(
        &self,
        op: &'static str,
        d: &Device2dAccess<'_>,
        what: &'static str,
    ) -> Result<()> {
        self.check_memory_2d(op, d, what)
    }
}
