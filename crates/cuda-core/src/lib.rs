//! Safe essentials of the CUDA driver API: [`Context`], [`Stream`], [`Event`],
//! [`DeviceBuffer`], [`PinnedBuffer`], [`HostRegistration`] and one [`Error`] type.
//!
//! The driver is loaded at run time (see `cuda-sys`): a machine without it builds
//! and runs everything up to the first call that needs it, which returns
//! [`Error::DriverNotFound`].
//!
//! ```no_run
//! use cuda_core::{Context, DeviceBuffer};
//!
//! let _ctx = Context::new(0)?;
//! let mut d = DeviceBuffer::<f32>::alloc(1024)?;
//! let host: Vec<f32> = (0..1024).map(|i| i as f32).collect();
//! d.copy_from_host(&host)?;
//! let mut back = vec![0.0f32; 1024];
//! d.copy_to_host(&mut back)?;
//! assert_eq!(host, back);
//! # Ok::<(), cuda_core::Error>(())
//! ```
#![deny(unsafe_op_in_unsafe_fn)]

mod context;
mod device_buffer;
mod error;
mod event;
mod host_registration;
mod pinned;
pub mod result;
mod stream;

pub use bytemuck;
pub use context::{Context, ContextGuard};
pub use cuda_sys as sys;
pub use device_buffer::DeviceBuffer;
pub use error::{DriverError, Error, Result};
pub use event::Event;
pub use host_registration::HostRegistration;
pub use pinned::PinnedBuffer;
pub use stream::Stream;

/// `n * size_of::<T>()`, or [`Error::SizeOverflow`] naming `op`.
pub fn byte_len<T>(op: &'static str, n: usize) -> Result<usize> {
    let elem_bytes = std::mem::size_of::<T>();
    n.checked_mul(elem_bytes)
        .ok_or(Error::SizeOverflow { op, n, elem_bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    static_assertions::assert_impl_all!(Context: Send, Sync, Clone);
    static_assertions::assert_impl_all!(Stream: Send, Sync);
    static_assertions::assert_impl_all!(Event: Send, Sync);
    static_assertions::assert_impl_all!(DeviceBuffer<f32>: Send, Sync);
    static_assertions::assert_impl_all!(PinnedBuffer<u8>: Send, Sync);
    static_assertions::assert_not_impl_any!(ContextGuard<'static>: Send);
    static_assertions::assert_impl_all!(Error: Send, Sync, std::error::Error);

    #[test]
    fn byte_len_checks_overflow() {
        assert_eq!(byte_len::<f32>("x", 10).unwrap(), 40);
        assert_eq!(byte_len::<[u8; 3]>("x", 0).unwrap(), 0);
        let e = byte_len::<u64>("alloc", usize::MAX / 4).unwrap_err();
        assert_eq!(
            e,
            Error::SizeOverflow {
                op: "alloc",
                n: usize::MAX / 4,
                elem_bytes: 8
            }
        );
    }

    #[test]
    fn overflowing_alloc_fails_before_the_driver() {
        // Holds with or without a driver: the size check comes first.
        let e = DeviceBuffer::<u64>::alloc(usize::MAX / 2).unwrap_err();
        assert!(
            matches!(e, Error::SizeOverflow { elem_bytes: 8, .. }),
            "{e}"
        );
        let e = PinnedBuffer::<u32>::alloc(usize::MAX).unwrap_err();
        assert!(
            matches!(e, Error::SizeOverflow { elem_bytes: 4, .. }),
            "{e}"
        );
    }

    #[test]
    fn zero_length_pinned_buffer_pins_nothing() {
        let p = PinnedBuffer::<f64>::alloc(0).unwrap();
        assert!(p.is_empty());
        assert!(p.context().is_none());
        assert_eq!(&*p, &[] as &[f64]);
    }
}
