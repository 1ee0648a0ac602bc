//! The crate's own [`Error`] values: an argument no call can take, and a state that
//! would mean a bug here (reported rather than panicking).

use cuda_core::Error;

/// [`Error::InvalidArgument`] of `op`, saying what is wrong.
pub(crate) fn invalid(op: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidArgument {
        op,
        reason: reason.into(),
    }
}

/// An error that would mean a bug here, reported rather than panicking.
pub(crate) fn internal(what: &str) -> Error {
    invalid("StagingBuffer (internal)", what)
}
