//! [`FillError`]: what `try_upload_with` returns when the caller's fill, or the
//! transfer, fails.

use std::convert::Infallible;
use std::fmt;

use cuda_core::Error;

/// The error of [`StagingBuffer::try_upload_with`](crate::StagingBuffer::try_upload_with)
/// and [`StagingRing::try_upload_with`](crate::StagingRing::try_upload_with): the
/// caller's own error from `fill`, unchanged, or the transfer's.
///
/// `Fill(e)` means `fill` returned `Err(e)`: nothing was queued, the device memory
/// is as it was, and the transfer counters are unchanged. `Cuda(e)` is what
/// [`StagingBuffer::upload_with`](crate::StagingBuffer::upload_with) would have
/// returned: bad input (before `fill` runs) or a driver error.
///
/// `From<Error>` lets `?` turn a transfer error into it; [`FillError::into_fill`] and
/// [`FillError::into_cuda`] take one side out.
///
/// ```no_run
/// use cuda_staging::{Context, DeviceBuffer, FillError, StagingBuffer, Stream};
///
/// #[derive(Debug)]
/// struct DecodeError(&'static str);
///
/// let ctx = Context::new(0)?;
/// let stream = Stream::new(&ctx)?;
/// let mut staging = StagingBuffer::new();
/// let mut input = DeviceBuffer::<f32>::alloc(3 * 640 * 640)?;
/// let r = staging.try_upload_with(&mut input, 3 * 640 * 640, &stream, |px| {
///     // Decode a frame straight into pinned memory; it may be corrupt.
///     px.fill(0.5);
///     Err(DecodeError("truncated frame"))
/// });
/// match r {
///     Ok(()) => {}
///     Err(FillError::Fill(DecodeError(why))) => eprintln!("frame skipped: {why}"),
///     Err(FillError::Cuda(e)) => return Err(e),
/// }
/// # Ok::<(), cuda_staging::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FillError<E> {
    /// `fill` returned this error; nothing was queued.
    Fill(E),
    /// The transfer failed (bad input, refused before `fill` ran, or a driver error).
    Cuda(Error),
}

impl<E> FillError<E> {
    /// The fill's error, if that is what this is.
    pub fn into_fill(self) -> Option<E> {
        match self {
            FillError::Fill(e) => Some(e),
            FillError::Cuda(_) => None,
        }
    }

    /// The transfer's error, if that is what this is.
    pub fn into_cuda(self) -> Option<Error> {
        match self {
            FillError::Fill(_) => None,
            FillError::Cuda(e) => Some(e),
        }
    }
}

impl FillError<Infallible> {
    /// The transfer's error, for a fill that cannot fail (`upload_with`'s).
    pub(crate) fn infallible(self) -> Error {
        match self {
            FillError::Fill(never) => match never {},
            FillError::Cuda(e) => e,
        }
    }
}

impl<E> From<Error> for FillError<E> {
    fn from(e: Error) -> Self {
        FillError::Cuda(e)
    }
}

impl<E: fmt::Display> fmt::Display for FillError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FillError::Fill(e) => write!(f, "fill failed, nothing was uploaded: {e}"),
            FillError::Cuda(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for FillError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FillError::Fill(e) => Some(e),
            FillError::Cuda(e) => std::error::Error::source(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    struct Corrupt(u32);

    impl fmt::Display for Corrupt {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "frame {} is corrupt", self.0)
        }
    }

    impl std::error::Error for Corrupt {}

    #[test]
    fn the_callers_error_comes_back_unchanged_and_is_the_source() {
        let e: FillError<Corrupt> = FillError::Fill(Corrupt(7));
        assert_eq!(
            e.to_string(),
            "fill failed, nothing was uploaded: frame 7 is corrupt"
        );
        let source = std::error::Error::source(&e).expect("a source");
        assert_eq!(source.downcast_ref::<Corrupt>(), Some(&Corrupt(7)));
        assert_eq!(e.into_fill(), Some(Corrupt(7)));
    }

    #[test]
    fn a_transfer_error_shows_as_itself_and_converts_with_question_mark() {
        fn refused() -> Result<(), FillError<Corrupt>> {
            Err(Error::ExceedsDeviceBuffer {
                op: "upload_with",
                n: 5,
                len: 4,
            })?;
            Ok(())
        }
        let e = refused().unwrap_err();
        assert_eq!(
            e.to_string(),
            "upload_with of 5 elements but the device buffer holds 4"
        );
        assert!(matches!(
            e.clone().into_cuda(),
            Some(Error::ExceedsDeviceBuffer { n: 5, len: 4, .. })
        ));
        assert_eq!(e.into_fill(), None);
        let never: FillError<Infallible> = Error::NoContext.into();
        assert_eq!(never.infallible(), Error::NoContext);
    }
}
