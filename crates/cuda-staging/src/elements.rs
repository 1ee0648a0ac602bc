//! What every transfer shares: its input checks, and typed views of pinned bytes.

use cuda_core::{byte_len, DeviceSlice, Error, Result, Stream};

use crate::errors::internal;
use crate::StagingPod;

/// `n` values of `T` that take no bytes: `n` zero-sized values, or none.
pub(crate) fn no_bytes<'a, T: StagingPod>(n: usize) -> &'a mut [T] {
    if std::mem::size_of::<T>() == 0 {
        // SAFETY: a dangling, aligned, non-null pointer is valid for any number of
        // zero-sized values, and zero-sized values own no memory to alias.
        unsafe { std::slice::from_raw_parts_mut(std::ptr::NonNull::<T>::dangling().as_ptr(), n) }
    } else {
        &mut []
    }
}

/// Validates a transfer of `n` elements against `memory` (a device buffer or a
/// view) and `stream` (its context, and for cudarc memory its stream:
/// `Stream::check_memory`); returns bytes.
pub(crate) fn check_transfer<T: StagingPod>(
    op: &'static str,
    n: usize,
    memory: &(impl DeviceSlice<T> + ?Sized),
    stream: &Stream,
) -> Result<usize> {
    let bytes = check_len::<T>(op, n, memory.len())?;
    stream.check_memory(op, &memory.device_access(), "the device buffer")?;
    Ok(bytes)
}

/// The bytes of `n` elements of `T` to or from device memory of `len` elements; an
/// error for more elements than it holds, or more bytes than a `usize` counts.
pub(crate) fn check_len<T: StagingPod>(op: &'static str, n: usize, len: usize) -> Result<usize> {
    let bytes = byte_len::<T>(op, n)?;
    if n > len {
        return Err(Error::ExceedsDeviceBuffer { op, n, len });
    }
    Ok(bytes)
}

pub(crate) fn cast_mut<T: StagingPod>(bytes: &mut [u8]) -> Result<&mut [T]> {
    bytemuck::try_cast_slice_mut(bytes)
        .map_err(|e| internal(&format!("pinned bytes cannot be viewed as elements: {e}")))
}

pub(crate) fn cast<T: StagingPod>(bytes: &[u8]) -> Result<&[T]> {
    bytemuck::try_cast_slice(bytes)
        .map_err(|e| internal(&format!("pinned bytes cannot be viewed as elements: {e}")))
}
