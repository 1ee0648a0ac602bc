//! [`PitchedBuffer`]: a 2-D allocation in device memory whose rows start at the pitch
//! the driver chose (`cuMemAllocPitch`), as NVDEC, NPP and many TensorRT plugins hand
//! out their surfaces.

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;

use bytemuck::Pod;
use cuda_sys::CUdeviceptr;

use crate::context::Context;
use crate::device_view::{DeviceView, DeviceViewMut};
use crate::error::{Error, Result};
use crate::layout_2d::Layout2d;
use crate::result::{Copy2d, Side2d};
use crate::tracking::Tracker;
use crate::view_2d::{sealed, Device2dAccess, DeviceSlice2d, DeviceSlice2dMut};
use crate::{deferred, result};

/// `height` rows of `width` elements of `T` in device memory, each row starting
/// [`pitch_bytes`](PitchedBuffer::pitch_bytes) after the one before, freed on drop.
///
/// [`PitchedBuffer::alloc`] asks the driver for the pitch (`cuMemAllocPitch`), which
/// pads each row so that it starts at an address the device reads fastest; the
/// allocation holds `pitch_bytes * height` bytes. [`PitchedBuffer::from_raw_borrowed`]
/// wraps a surface allocated elsewhere (a decoder's output) with its own pitch.
///
/// It is a [`DeviceSlice2d`] / [`DeviceSlice2dMut`]: the source or destination of
/// [`Stream`](crate::Stream)'s 2-D copies and of `cuda-staging`'s `upload_2d` /
/// `download_2d`, which move the rows and never touch the padding. Queued work is
/// tracked as for a [`DeviceBuffer`](crate::DeviceBuffer): the synchronous copies and
/// `Drop` first wait for queued work that uses the buffer.
///
/// A buffer with no row or no element allocates nothing and has a null device
/// pointer.
///
/// ```no_run
/// use cuda_core::{Context, PitchedBuffer};
///
/// let _ctx = Context::new(0)?;
/// // A 1920x1080 RGB surface; the host frame's rows are 5760 bytes apart.
/// let mut surface = PitchedBuffer::<[u8; 3]>::alloc(1920, 1080)?;
/// assert!(surface.pitch_bytes() >= 1920 * 3);
/// let frame = vec![[0u8; 3]; 1920 * 1080];
/// surface.copy_from_host(&frame, 1920 * 3)?; // cuMemcpy2D, synchronous
/// # Ok::<(), cuda_core::Error>(())
/// ```
pub struct PitchedBuffer<T: Pod> {
    ptr: CUdeviceptr,
    width: usize,
    layout: Layout2d,
    /// `pitch_bytes * height`: the bytes the allocation holds.
    byte_len: usize,
    ctx: Context,
    owned: bool,
    tracker: Tracker,
    _marker: PhantomData<T>,
}

/// The element size `cuMemAllocPitch` is told the kernels access the rows in (it
/// accepts 4, 8 or 16): the largest of those that divides `size_of::<T>()`, else 4.
fn access_bytes<T>() -> u32 {
    let size = std::mem::size_of::<T>();
    [16u32, 8]
        .into_iter()
        .find(|a| size % *a as usize == 0 && size > 0)
        .unwrap_or(4)
}

impl<T: Pod> PitchedBuffer<T> {
    /// Allocates `height` uninitialised rows of `width` elements in the context
    /// current on this thread, at the pitch the driver picks (`cuMemAllocPitch`).
    ///
    /// Errors: [`Error::SizeOverflow`] when `width * size_of::<T>()` overflows (before
    /// any driver call), [`Error::NoContext`] when no context is current, or the
    /// driver's error (`CUDA_ERROR_OUT_OF_MEMORY`, or `CUDA_ERROR_INVALID_VALUE` for a
    /// row or height past what the driver can pitch).
    pub fn alloc(width: usize, height: usize) -> Result<PitchedBuffer<T>> {
        let op = "PitchedBuffer::alloc";
        let row = Layout2d::packed::<T>(op, width, height)?.row_bytes();
        let ctx = Context::current()?;
        Self::alloc_rows(op, ctx, width, height, row)
    }

    /// [`PitchedBuffer::alloc`] in `ctx`, whatever is current.
    pub fn alloc_in(ctx: &Context, width: usize, height: usize) -> Result<PitchedBuffer<T>> {
        let op = "PitchedBuffer::alloc_in";
        let row = Layout2d::packed::<T>(op, width, height)?.row_bytes();
        Self::alloc_rows(op, ctx.clone(), width, height, row)
    }

    fn alloc_rows(
        op: &'static str,
        ctx: Context,
        width: usize,
        height: usize,
        row_bytes: usize,
    ) -> Result<PitchedBuffer<T>> {
        let (ptr, pitch) = if row_bytes == 0 || height == 0 {
            (0, row_bytes)
        } else {
            let _g = ctx.enter()?;
            result::mem_alloc_pitch(row_bytes, height, access_bytes::<T>())?
        };
        let buf = Self::checked(op, ctx.clone(), ptr, width, height, pitch, true);
        if buf.is_err() && ptr != 0 {
            // The driver's pitch failed our checks (it never should): give the memory
            // back rather than leak it.
            let freed = ctx.enter().and_then(|_g| {
                // SAFETY: `ptr` came from cuMemAllocPitch just above, in `ctx`, and is
                // used nowhere.
                unsafe { result::mem_free(ptr) }
            });
            if let Err(e) = freed {
                deferred::record("cuMemFree", e);
            }
        }
        buf
    }

    /// Wraps a 2-D surface allocated elsewhere (a decoder's output frame, another
    /// library's `cuMemAllocPitch`) without taking ownership: dropping the buffer
    /// frees nothing.
    ///
    /// Errors, before any driver call: [`Error::PitchTooSmall`] when a row is longer
    /// than `pitch_bytes`, [`Error::SizeOverflow`] / [`Error::InvalidArgument`] when
    /// `pitch_bytes * height` overflows.
    ///
    /// # Safety
    /// 1. `ptr` is device memory of `ctx` holding at least `pitch_bytes * height`
    ///    bytes, which stays allocated while the returned buffer lives.
    /// 2. Nothing else writes that memory while the returned buffer reads it, and
    ///    nothing else reads or writes it while the buffer writes it.
    pub unsafe fn from_raw_borrowed(
        ctx: &Context,
        ptr: CUdeviceptr,
        width: usize,
        height: usize,
        pitch_bytes: usize,
    ) -> Result<PitchedBuffer<T>> {
        Self::checked(
            "PitchedBuffer::from_raw_borrowed",
            ctx.clone(),
            ptr,
            width,
            height,
            pitch_bytes,
            false,
        )
    }

    fn checked(
        op: &'static str,
        ctx: Context,
        ptr: CUdeviceptr,
        width: usize,
        height: usize,
        pitch_bytes: usize,
        owned: bool,
    ) -> Result<PitchedBuffer<T>> {
        let what = "the pitched buffer";
        let layout = Layout2d::new::<T>(op, what, width, height, pitch_bytes)?;
        let byte_len = pitch_bytes
            .checked_mul(height)
            .ok_or_else(|| Error::InvalidArgument {
                op,
                reason: format!(
                    "{what}: {height} rows at a pitch of {pitch_bytes} bytes overflow a byte \
                     count"
                ),
            })?;
        Ok(PitchedBuffer {
            ptr,
            width,
            layout,
            byte_len,
            ctx,
            owned,
            tracker: Tracker::new(),
            _marker: PhantomData,
        })
    }

    /// Elements per row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Rows.
    pub fn height(&self) -> usize {
        self.layout.height()
    }

    /// Bytes from the start of one row to the start of the next (the driver's pitch,
    /// at least [`row_bytes`](PitchedBuffer::row_bytes)).
    pub fn pitch_bytes(&self) -> usize {
        self.layout.pitch_bytes()
    }

    /// Bytes of data per row: `width * size_of::<T>()`.
    pub fn row_bytes(&self) -> usize {
        self.layout.row_bytes()
    }

    /// Bytes the allocation holds, padding included: `pitch_bytes * height`.
    pub fn byte_len(&self) -> usize {
        self.byte_len
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.layout.is_empty()
    }

    /// The shape of the rows, in bytes.
    pub fn layout(&self) -> Layout2d {
        self.layout
    }

    /// The raw device pointer of the first row, for handing to other CUDA libraries
    /// (with [`pitch_bytes`](PitchedBuffer::pitch_bytes)). Valid while `self` is. Work
    /// you queue on it yourself is not tracked: synchronise before the buffer is
    /// dropped.
    pub fn as_device_ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// The context the memory lives in.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The whole allocation as bytes, padding included, read-only (the same memory
    /// and record of queued work): for 1-D copies and inspection.
    pub fn as_bytes(&self) -> DeviceView<'_, u8> {
        DeviceView::new(self.ptr, self.byte_len, &self.ctx, &self.tracker)
    }

    /// The whole allocation as bytes, padding included, writable (to set the padding,
    /// or for 1-D copies).
    pub fn as_bytes_mut(&mut self) -> DeviceViewMut<'_, u8> {
        DeviceViewMut::new(self.ptr, self.byte_len, &self.ctx, &self.tracker)
    }

    /// Copies the rows of `src` — `height` rows of `width` elements, each row
    /// starting `src_pitch_bytes` after the one before — into the buffer's rows
    /// through the driver's synchronous 2-D copy from any host memory
    /// (`cuMemcpy2D`), returning once they have landed. The padding is not written.
    /// Waits first for queued work that uses the buffer.
    ///
    /// Errors, before any driver call and changing nothing:
    /// [`Error::PitchTooSmall`] when `src_pitch_bytes` is shorter than a row,
    /// [`Error::RegionOutOfBounds`] when `src` is too short for the rows (it needs
    /// `(height - 1) * src_pitch_bytes + row_bytes` bytes).
    pub fn copy_from_host(&mut self, src: &[T], src_pitch_bytes: usize) -> Result<()> {
        let op = "PitchedBuffer::copy_from_host";
        let host = self.host_rows(op, src.len(), src_pitch_bytes)?;
        if host.is_empty() {
            return Ok(());
        }
        // The legacy default stream does not wait for our non-blocking streams.
        self.tracker.wait_host(true)?;
        let _g = self.ctx.enter()?;
        let copy = Copy2d {
            src: Side2d::Host(src.as_ptr().cast::<c_void>()),
            src_pitch: src_pitch_bytes,
            dst: Side2d::Device(self.ptr),
            dst_pitch: self.pitch_bytes(),
            width_bytes: self.row_bytes(),
            height: self.height(),
        };
        // SAFETY: `src` holds every source row (checked above: its bytes cover the
        // span), the buffer every destination row (its layout); host and device
        // memory do not overlap; the copy has read `src` when it returns.
        unsafe { result::memcpy_2d(&copy) }?;
        // From pageable memory cuMemcpy2D returns once the rows are staged, before the
        // DMA lands (as cuMemcpyHtoD): wait for it so the copy is complete for every
        // stream.
        // SAFETY: the null stream is always valid in the current context.
        unsafe { result::stream_synchronize(std::ptr::null_mut()) }
    }

    /// Copies the buffer's rows into `dst`, whose rows start `dst_pitch_bytes` apart,
    /// synchronously (`cuMemcpy2D`), after queued work that writes the buffer. The
    /// bytes of `dst` between its rows are not written. Errors as
    /// [`PitchedBuffer::copy_from_host`].
    pub fn copy_to_host(&self, dst: &mut [T], dst_pitch_bytes: usize) -> Result<()> {
        let op = "PitchedBuffer::copy_to_host";
        let host = self.host_rows(op, dst.len(), dst_pitch_bytes)?;
        if host.is_empty() {
            return Ok(());
        }
        self.tracker.wait_host(false)?;
        let _g = self.ctx.enter()?;
        let copy = Copy2d {
            src: Side2d::Device(self.ptr),
            src_pitch: self.pitch_bytes(),
            dst: Side2d::Host(dst.as_mut_ptr().cast::<c_void>().cast_const()),
            dst_pitch: dst_pitch_bytes,
            width_bytes: self.row_bytes(),
            height: self.height(),
        };
        // SAFETY: `dst` holds every destination row (checked above) and is borrowed
        // exclusively; any bytes are a valid `T` (Pod); the copy is synchronous.
        unsafe { result::memcpy_2d(&copy) }
    }

    /// The host rows matching this buffer's, at `pitch_bytes`, in a slice of `len`
    /// elements: checked.
    fn host_rows(&self, op: &'static str, len: usize, pitch_bytes: usize) -> Result<Layout2d> {
        let what = "the host rows";
        let host = Layout2d::new::<T>(op, what, self.width, self.height(), pitch_bytes)?;
        host.check_fits(op, what, crate::byte_len::<T>(op, len)?)?;
        Ok(host)
    }

    /// Waits for every queued operation that uses the buffer.
    pub fn wait(&self) -> Result<()> {
        self.tracker.wait_host(true)
    }

    /// Frees the memory now and reports the driver's answer, which `Drop` cannot.
    pub fn free(mut self) -> Result<()> {
        let r = self.release();
        drop(self);
        r
    }

    fn release(&mut self) -> Result<()> {
        let waited = self.tracker.wait_host(true);
        if !self.owned || self.ptr == 0 {
            return waited;
        }
        if self.tracker.may_be_pending(true) {
            // The failed wait left a queued use running, for all we know: the memory
            // is leaked, not freed under it.
            self.ptr = 0;
            return waited;
        }
        let _g = self.ctx.enter()?;
        let ptr = std::mem::replace(&mut self.ptr, 0);
        // SAFETY: we allocated `ptr` and cleared our copy of it; queued work that used
        // it is complete (waited above, or known over after a failed wait).
        unsafe { result::mem_free(ptr) }.and(waited)
    }
}

impl<T: Pod> Drop for PitchedBuffer<T> {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            deferred::record("PitchedBuffer drop (wait, cuMemFree)", e);
        }
    }
}

impl<T: Pod> fmt::Debug for PitchedBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PitchedBuffer")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("width", &self.width)
            .field("height", &self.height())
            .field("pitch_bytes", &self.pitch_bytes())
            .field("elem", &std::any::type_name::<T>())
            .finish()
    }
}

impl<T: Pod> sealed::Sealed2d for PitchedBuffer<T> {}

impl<T: Pod> DeviceSlice2d<T> for PitchedBuffer<T> {
    fn width(&self) -> usize {
        self.width
    }
    fn height(&self) -> usize {
        self.layout.height()
    }
    fn pitch_bytes(&self) -> usize {
        self.layout.pitch_bytes()
    }
    fn context(&self) -> &Context {
        &self.ctx
    }
    fn device_2d_access(&self) -> Device2dAccess<'_> {
        Device2dAccess {
            ptr: self.ptr,
            ctx: &self.ctx,
            tracker: &self.tracker,
            layout: self.layout,
        }
    }
}

impl<T: Pod> DeviceSlice2dMut<T> for PitchedBuffer<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pitch_is_asked_for_in_the_widest_access_that_divides_the_element() {
        assert_eq!(access_bytes::<u8>(), 4);
        assert_eq!(access_bytes::<[u8; 3]>(), 4);
        assert_eq!(access_bytes::<f32>(), 4);
        assert_eq!(access_bytes::<[f32; 3]>(), 4);
        assert_eq!(access_bytes::<f64>(), 8);
        assert_eq!(access_bytes::<[f32; 4]>(), 16);
        assert_eq!(access_bytes::<[u64; 3]>(), 8);
        assert_eq!(access_bytes::<()>(), 4);
    }

    #[test]
    fn an_overflowing_row_fails_before_the_driver() {
        // Holds with or without a driver: the size check comes first.
        let e = PitchedBuffer::<u64>::alloc(usize::MAX / 2, 2).unwrap_err();
        assert!(
            matches!(e, Error::SizeOverflow { elem_bytes: 8, .. }),
            "{e}"
        );
    }
}
