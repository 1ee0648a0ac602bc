//! The one error type of the workspace.

use cuda_sys::{CuResult, LoadError};

pub use crate::driver_error::DriverError;

/// Result alias used throughout the workspace.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in `cuda-core` and `cuda-staging`.
///
/// Input errors (lengths, overflow) are raised before any driver call and name the
/// numbers involved. Driver errors carry the raw code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The driver library could not be opened (the loader's error is the source).
    #[error("CUDA driver library `{library}` not found (is the NVIDIA driver installed?)")]
    DriverNotFound {
        /// The library name searched first (or the one asked for explicitly).
        library: String,
        /// What the loader said, with every name tried.
        #[source]
        source: LoadError,
    },
    /// The driver library lacks an entry point this workspace needs.
    #[error("CUDA driver library `{library}` lacks `{symbol}` (driver too old)")]
    DriverSymbolMissing {
        /// The library that was opened.
        library: String,
        /// The missing symbol.
        symbol: &'static str,
        /// What the loader said.
        #[source]
        source: LoadError,
    },
    /// An explicit driver path was given after another driver library was loaded.
    #[error("CUDA driver library `{requested}` cannot be loaded: `{loaded}` is already in use")]
    DriverAlreadyLoaded {
        /// The library in use.
        loaded: String,
        /// The library asked for.
        requested: String,
    },
    /// The driver returned an error code.
    #[error("{0}")]
    Driver(DriverError),
    /// A device ordinal past the number of devices.
    #[error("CUDA device {ordinal} requested but {count} device(s) found")]
    InvalidDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices the driver reports.
        count: usize,
    },
    /// An operation needs a current context and the calling thread has none.
    #[error("no CUDA context is current on this thread: create one with Context::new or bind one with Context::bind_to_thread")]
    NoContext,
    /// `n` elements of `elem_bytes` bytes do not fit a `usize` byte count.
    #[error("{op} of {n} elements of {elem_bytes} bytes overflows a byte count")]
    SizeOverflow {
        /// What was attempted.
        op: &'static str,
        /// Element count asked for.
        n: usize,
        /// Size of one element.
        elem_bytes: usize,
    },
    /// More elements than the device buffer holds.
    #[error("{op} of {n} elements but the device buffer holds {len}")]
    ExceedsDeviceBuffer {
        /// What was attempted.
        op: &'static str,
        /// Element count asked for.
        n: usize,
        /// Length of the device buffer.
        len: usize,
    },
    /// A host slice whose length disagrees with the transfer.
    #[error("{op}: host slice has {host} elements but the transfer needs {expected}")]
    LengthMismatch {
        /// What was attempted.
        op: &'static str,
        /// Length of the host slice.
        host: usize,
        /// Length the transfer needs.
        expected: usize,
    },
    /// A copy whose destination holds fewer elements than its source.
    #[error("{op}: the destination holds {dst} elements, fewer than the {src} of the source")]
    DestinationTooShort {
        /// What was attempted.
        op: &'static str,
        /// Elements in the source.
        src: usize,
        /// Elements in the destination.
        dst: usize,
    },
    /// Objects from two different contexts were combined.
    #[error("{op}: {what} belongs to a different CUDA context than the stream")]
    ContextMismatch {
        /// What was attempted.
        op: &'static str,
        /// Which argument is foreign.
        what: &'static str,
    },
    /// Device memory that may be used on one stream only (cudarc's, viewed through
    /// `cudarc_bridge` for a given stream) given to an operation queued on another.
    /// Raised before any driver call.
    #[error("{op}: {what} was taken for another stream than the one the operation is queued on (make its CudarcView / CudarcViewMut with the stream the operation uses)")]
    StreamMismatch {
        /// What was attempted.
        op: &'static str,
        /// Which argument is bound to another stream.
        what: &'static str,
    },
    /// An operation refused because its stream is being captured into a CUDA graph
    /// (a cudarc stream after `CudaStream::begin_capture`, or another library's):
    /// this crate tracks when queued work completes, and captured work runs only when
    /// the graph is launched, so it queues nothing on a capturing stream. Raised
    /// before anything is queued; nothing changed. See `cudarc_bridge`, "Soundness".
    #[error("{op}: the stream is being captured into a CUDA graph; this crate queues nothing on a capturing stream (queue it before the capture begins or after it ends)")]
    StreamCapturing {
        /// What was attempted.
        op: &'static str,
    },
    /// An operation that names a per-thread stream (`CU_STREAM_PER_THREAD`, such as
    /// cudarc's `per_thread_stream`, which candle's `Device::new_cuda` uses), called
    /// on another thread than the one that borrowed it: that handle names a different
    /// stream on every thread, so the call would queue on, wait for or record in
    /// another stream than the one the [`Stream`](crate::Stream) follows. Queue on it,
    /// synchronise it and record events on it from the thread that borrowed it;
    /// waits through events, and buffers' host access and `Drop`, work from any
    /// thread. Raised before any driver call; nothing changed.
    #[error("{op}: the stream is the per-thread stream (CU_STREAM_PER_THREAD) of thread {stream_thread:?}, which names another stream on every thread; called from thread {caller:?} (use it from the thread that borrowed it)")]
    WrongThread {
        /// What was attempted.
        op: &'static str,
        /// The thread the stream was borrowed on, the one whose stream it names.
        stream_thread: std::thread::ThreadId,
        /// The thread that called.
        caller: std::thread::ThreadId,
    },
    /// Any other argument the call cannot accept.
    #[error("invalid argument to {op}: {reason}")]
    InvalidArgument {
        /// What was attempted.
        op: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A range that does not fit the buffer or view it selects from.
    #[error("{op}: range {start}..{end} is outside a buffer of {len} elements")]
    OutOfRange {
        /// What was attempted.
        op: &'static str,
        /// First element asked for.
        start: usize,
        /// One past the last element asked for.
        end: usize,
        /// Elements in the buffer or view.
        len: usize,
    },
    /// Pinning more memory would pass the process's pinned-memory limit (see
    /// `cuda-staging`'s `set_pinned_limit`). Raised before the driver is asked to pin
    /// or copy anything; nothing was pinned and nothing changed.
    #[error("{op}: pinning {requested} more bytes would pass the pinned-memory limit of {limit} bytes ({held} bytes are pinned already)")]
    PinnedLimitExceeded {
        /// What was attempted.
        op: &'static str,
        /// The limit, in bytes.
        limit: usize,
        /// Bytes pinned (and counted against the limit) when the request came.
        held: usize,
        /// Bytes the request would have pinned.
        requested: usize,
    },
    /// A 2-D region whose pitch (the bytes from one row's start to the next's) is
    /// shorter than one of its rows.
    #[error("{op}: {what}: a pitch of {pitch_bytes} bytes is shorter than a row of {row_bytes} bytes ({width} elements of {elem_bytes} bytes)")]
    PitchTooSmall {
        /// What was attempted.
        op: &'static str,
        /// Which region: the host rows, the device region, ...
        what: &'static str,
        /// Elements per row.
        width: usize,
        /// Size of one element.
        elem_bytes: usize,
        /// Bytes per row, `width * elem_bytes`.
        row_bytes: usize,
        /// The pitch given.
        pitch_bytes: usize,
    },
    /// A 2-D region whose rows reach past the end of the memory that holds it.
    #[error("{op}: {what}: {height} rows of {row_bytes} bytes at a pitch of {pitch_bytes} bytes span {span_bytes} bytes, but the memory holds {len_bytes}")]
    RegionOutOfBounds {
        /// What was attempted.
        op: &'static str,
        /// Which region: the host rows, the device region, ...
        what: &'static str,
        /// Rows.
        height: usize,
        /// Bytes per row.
        row_bytes: usize,
        /// The pitch.
        pitch_bytes: usize,
        /// Bytes from the first row's start to the last row's end:
        /// `(height - 1) * pitch_bytes + row_bytes`.
        span_bytes: usize,
        /// Bytes of the memory that holds the region.
        len_bytes: usize,
    },
    /// An operation failed where it could not report it (in `Drop`, or in a host
    /// accessor such as `Deref`), and was recorded; see
    /// [`crate::check_deferred_errors`]. Its message shows the error (a driver
    /// error's code, name and description), which is also its `source`.
    #[error("{what} failed earlier, where the error could not be returned: {source} ({more} more since)")]
    Deferred {
        /// The operation that failed, e.g. `cuMemFree`.
        what: &'static str,
        /// How many more deferred errors were recorded after it.
        more: u64,
        /// Its error.
        #[source]
        source: Box<Error>,
    },
}

impl From<LoadError> for Error {
    fn from(e: LoadError) -> Self {
        match e {
            LoadError::LibraryNotFound { ref library, .. } => Error::DriverNotFound {
                library: library.clone(),
                source: e,
            },
            LoadError::MissingSymbol {
                ref library,
                symbol,
                ..
            } => Error::DriverSymbolMissing {
                library: library.clone(),
                symbol,
                source: e,
            },
            LoadError::AlreadyLoaded { loaded, requested } => {
                Error::DriverAlreadyLoaded { loaded, requested }
            }
        }
    }
}

impl Error {
    /// The driver's raw code, if this is a driver error.
    pub fn driver_code(&self) -> Option<CuResult> {
        match self {
            Error::Driver(d) => Some(d.code()),
            _ => None,
        }
    }

    /// Whether this is a GPU fault that has poisoned the context: a driver error
    /// whose code NVIDIA documents as leaving the process unable to use CUDA until
    /// it is restarted ([`DriverError::is_sticky`] lists them), directly or as the
    /// error an [`Error::Deferred`] recorded.
    ///
    /// `true` means "restart the process": every later call in this context returns
    /// the same error, and resetting the device's primary context does not bring it
    /// back (see "When the GPU faults" in the crate docs). `false` means the call
    /// failed on its own (bad input, out of memory, no driver...) and the context is
    /// as usable as before.
    ///
    /// ```
    /// use cuda_core::{DriverError, Error};
    ///
    /// let fault = Error::Driver(DriverError::new(cuda_core::sys::CUDA_ERROR_ILLEGAL_ADDRESS));
    /// assert!(fault.is_sticky());
    /// let oom = Error::Driver(DriverError::new(cuda_core::sys::CUDA_ERROR_OUT_OF_MEMORY));
    /// assert!(!oom.is_sticky());
    /// ```
    pub fn is_sticky(&self) -> bool {
        match self {
            Error::Driver(d) => d.is_sticky(),
            Error::Deferred { source, .. } => source.is_sticky(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests;
