//! The one error type of the workspace.

use std::fmt;

use cuda_sys::{CuResult, LoadError};

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

/// The codes NVIDIA's `cuda.h` (CUDA 13.1) documents as leaving the context or the
/// process unusable: "This leaves the process in an inconsistent state and any further
/// CUDA work will return the same error. To continue using CUDA, the process must be
/// terminated and relaunched", or for `CUDA_ERROR_ASSERT` "The context cannot be used
/// anymore, and must be destroyed". Not here because the header does not say so:
/// `CUDA_ERROR_ECC_UNCORRECTABLE` (214), `CUDA_ERROR_NVLINK_UNCORRECTABLE` (220),
/// `CUDA_ERROR_UNKNOWN` (999).
const STICKY_CODES: [CuResult; 13] = [
    cuda_sys::CUDA_ERROR_CONTAINED,
    cuda_sys::CUDA_ERROR_ILLEGAL_ADDRESS,
    cuda_sys::CUDA_ERROR_LAUNCH_TIMEOUT,
    cuda_sys::CUDA_ERROR_ASSERT,
    cuda_sys::CUDA_ERROR_HARDWARE_STACK_ERROR,
    cuda_sys::CUDA_ERROR_ILLEGAL_INSTRUCTION,
    cuda_sys::CUDA_ERROR_MISALIGNED_ADDRESS,
    cuda_sys::CUDA_ERROR_INVALID_ADDRESS_SPACE,
    cuda_sys::CUDA_ERROR_INVALID_PC,
    cuda_sys::CUDA_ERROR_LAUNCH_FAILED,
    cuda_sys::CUDA_ERROR_TENSOR_MEMORY_LEAK,
    cuda_sys::CUDA_ERROR_MPS_CLIENT_TERMINATED,
    cuda_sys::CUDA_ERROR_EXTERNAL_DEVICE,
];

/// A non-zero driver return code, with its name and description.
///
/// Name and description come from the driver (`cuGetErrorName` /
/// `cuGetErrorString`) when it is loaded, otherwise from a built-in table; a code
/// neither knows is still shown, by number.
#[derive(Clone, Copy)]
pub struct DriverError {
    code: CuResult,
    name: Option<&'static str>,
    description: Option<&'static str>,
}

impl DriverError {
    /// `code` with the name and description the driver gave for it, each filled in
    /// from the built-in table where the driver gave none. [`DriverError::new`]
    /// (in `result`, where the driver is asked) is the public way to make one.
    pub(crate) fn described(
        code: CuResult,
        mut name: Option<&'static str>,
        mut description: Option<&'static str>,
    ) -> DriverError {
        if name.is_none() || description.is_none() {
            if let Some(&(_, n, s)) = KNOWN_CODES.iter().find(|(c, _, _)| *c == code) {
                name = name.or(Some(n));
                description = description.or(Some(s));
            }
        }
        DriverError {
            code,
            name,
            description,
        }
    }

    /// The raw code.
    pub fn code(&self) -> CuResult {
        self.code
    }

    /// The code's name, e.g. `CUDA_ERROR_OUT_OF_MEMORY`, if known.
    pub fn name(&self) -> Option<&'static str> {
        self.name
    }

    /// The driver's description, e.g. `out of memory`, if known.
    pub fn description(&self) -> Option<&'static str> {
        self.description
    }

    /// Whether the code is one NVIDIA documents as poisoning the context until the
    /// process restarts (see [`Error::is_sticky`]): `CUDA_ERROR_ILLEGAL_ADDRESS` (700),
    /// `CUDA_ERROR_LAUNCH_TIMEOUT` (702), `CUDA_ERROR_ASSERT` (710),
    /// `CUDA_ERROR_HARDWARE_STACK_ERROR` (714), `CUDA_ERROR_ILLEGAL_INSTRUCTION` (715),
    /// `CUDA_ERROR_MISALIGNED_ADDRESS` (716), `CUDA_ERROR_INVALID_ADDRESS_SPACE` (717),
    /// `CUDA_ERROR_INVALID_PC` (718), `CUDA_ERROR_LAUNCH_FAILED` (719),
    /// `CUDA_ERROR_TENSOR_MEMORY_LEAK` (721), `CUDA_ERROR_CONTAINED` (226),
    /// `CUDA_ERROR_MPS_CLIENT_TERMINATED` (810) and `CUDA_ERROR_EXTERNAL_DEVICE` (911).
    pub fn is_sticky(&self) -> bool {
        STICKY_CODES.contains(&self.code)
    }
}

/// Two driver errors are equal when their codes are (the text may come from the
/// driver or the built-in table).
impl PartialEq for DriverError {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code
    }
}

impl Eq for DriverError {}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.name, self.description) {
            (Some(n), Some(d)) => write!(f, "{n} ({}): {d}", self.code),
            (Some(n), None) => write!(f, "{n} ({})", self.code),
            _ => write!(f, "unknown CUDA error ({})", self.code),
        }
    }
}

impl fmt::Debug for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DriverError({self})")
    }
}

/// Codes shown even when the driver cannot be asked (CUDA 13.0 `cuda.h`).
const KNOWN_CODES: &[(CuResult, &str, &str)] = &[
    (1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"),
    (2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"),
    (3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"),
    (4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"),
    (
        34,
        "CUDA_ERROR_STUB_LIBRARY",
        "CUDA driver is a stub library",
    ),
    (
        46,
        "CUDA_ERROR_DEVICE_UNAVAILABLE",
        "CUDA-capable device(s) is/are busy or unavailable",
    ),
    (
        100,
        "CUDA_ERROR_NO_DEVICE",
        "no CUDA-capable device is detected",
    ),
    (101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"),
    (
        200,
        "CUDA_ERROR_INVALID_IMAGE",
        "device kernel image is invalid",
    ),
    (201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"),
    (
        209,
        "CUDA_ERROR_NO_BINARY_FOR_GPU",
        "no kernel image is available for execution on the device",
    ),
    (
        214,
        "CUDA_ERROR_ECC_UNCORRECTABLE",
        "uncorrectable ECC error encountered",
    ),
    (
        218,
        "CUDA_ERROR_INVALID_PTX",
        "a PTX JIT compilation failed",
    ),
    (
        222,
        "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
        "the provided PTX was compiled with an unsupported toolchain.",
    ),
    (
        223,
        "CUDA_ERROR_JIT_COMPILATION_DISABLED",
        "PTX JIT compilation was disabled",
    ),
    (
        226,
        "CUDA_ERROR_CONTAINED",
        "Invalid access of peer GPU memory over nvlink or a hardware error",
    ),
    (400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"),
    (500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"),
    (600, "CUDA_ERROR_NOT_READY", "device not ready"),
    (
        700,
        "CUDA_ERROR_ILLEGAL_ADDRESS",
        "an illegal memory access was encountered",
    ),
    (
        702,
        "CUDA_ERROR_LAUNCH_TIMEOUT",
        "the launch timed out and was terminated",
    ),
    (
        709,
        "CUDA_ERROR_CONTEXT_IS_DESTROYED",
        "context is destroyed",
    ),
    (710, "CUDA_ERROR_ASSERT", "device-side assert triggered"),
    (
        712,
        "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
        "part or all of the requested memory range is already mapped",
    ),
    (
        713,
        "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
        "pointer does not correspond to a registered memory region",
    ),
    (
        714,
        "CUDA_ERROR_HARDWARE_STACK_ERROR",
        "hardware stack error",
    ),
    (
        715,
        "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        "an illegal instruction was encountered",
    ),
    (716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"),
    (
        717,
        "CUDA_ERROR_INVALID_ADDRESS_SPACE",
        "operation not supported on global/shared address space",
    ),
    (718, "CUDA_ERROR_INVALID_PC", "invalid program counter"),
    (
        719,
        "CUDA_ERROR_LAUNCH_FAILED",
        "unspecified launch failure",
    ),
    (
        721,
        "CUDA_ERROR_TENSOR_MEMORY_LEAK",
        "tensor memory not completely freed",
    ),
    (800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"),
    (801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"),
    (
        803,
        "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        "system has unsupported display driver / cuda driver combination",
    ),
    (
        810,
        "CUDA_ERROR_MPS_CLIENT_TERMINATED",
        "the MPS client has been terminated by the server",
    ),
    (
        911,
        "CUDA_ERROR_EXTERNAL_DEVICE",
        "an async error has occured in external entity outside of CUDA",
    ),
    (
        912,
        "CUDA_ERROR_INVALID_CLUSTER_SIZE",
        "a kernel launch error has occurred due to cluster misconfiguration",
    ),
    (999, "CUDA_ERROR_UNKNOWN", "unknown error"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_error_shows_name_code_and_description() {
        let e = Error::Driver(DriverError::new(2));
        assert_eq!(e.to_string(), "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory");
        assert_eq!(e.driver_code(), Some(2));
    }

    #[test]
    fn codes_newer_than_cuda_10_2_are_named() {
        assert_eq!(
            DriverError::new(34).to_string(),
            "CUDA_ERROR_STUB_LIBRARY (34): CUDA driver is a stub library"
        );
        assert_eq!(
            DriverError::new(911).name(),
            Some("CUDA_ERROR_EXTERNAL_DEVICE")
        );
        assert_eq!(
            DriverError::new(912).name(),
            Some("CUDA_ERROR_INVALID_CLUSTER_SIZE")
        );
    }

    /// Every code `cuda.h` documents as poisoning the context, one per class of
    /// fault: memory accesses, instructions and control flow, the stack, asserts,
    /// watchdog timeouts, contained and external errors, tensor memory, MPS.
    #[test]
    fn codes_that_poison_the_context_are_sticky() {
        for (code, name) in [
            (700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
            (716, "CUDA_ERROR_MISALIGNED_ADDRESS"),
            (717, "CUDA_ERROR_INVALID_ADDRESS_SPACE"),
            (715, "CUDA_ERROR_ILLEGAL_INSTRUCTION"),
            (718, "CUDA_ERROR_INVALID_PC"),
            (719, "CUDA_ERROR_LAUNCH_FAILED"),
            (714, "CUDA_ERROR_HARDWARE_STACK_ERROR"),
            (710, "CUDA_ERROR_ASSERT"),
            (702, "CUDA_ERROR_LAUNCH_TIMEOUT"),
            (226, "CUDA_ERROR_CONTAINED"),
            (911, "CUDA_ERROR_EXTERNAL_DEVICE"),
            (721, "CUDA_ERROR_TENSOR_MEMORY_LEAK"),
            (810, "CUDA_ERROR_MPS_CLIENT_TERMINATED"),
        ] {
            let d = DriverError::new(code);
            assert!(d.is_sticky(), "{code} {name}");
            assert_eq!(d.name(), Some(name), "{code} is named without a driver too");
            assert!(Error::Driver(d).is_sticky(), "{code} {name}");
        }
        assert_eq!(STICKY_CODES.len(), 13);
    }

    /// Errors of the call alone: bad arguments, resources, a result not ready yet,
    /// a missing driver or device, and codes `cuda.h` does not call fatal.
    #[test]
    fn errors_of_the_call_alone_are_not_sticky() {
        for code in [
            cuda_sys::CUDA_ERROR_INVALID_VALUE,
            cuda_sys::CUDA_ERROR_OUT_OF_MEMORY,
            cuda_sys::CUDA_ERROR_NOT_READY,
            cuda_sys::CUDA_ERROR_NOT_INITIALIZED,
            cuda_sys::CUDA_ERROR_NO_DEVICE,
            cuda_sys::CUDA_ERROR_INVALID_CONTEXT,
            cuda_sys::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
            218, // CUDA_ERROR_INVALID_PTX
            701, // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
            214, // CUDA_ERROR_ECC_UNCORRECTABLE: not documented as fatal
            999, // CUDA_ERROR_UNKNOWN
            123_456,
        ] {
            assert!(!DriverError::new(code).is_sticky(), "{code}");
            assert!(!Error::Driver(DriverError::new(code)).is_sticky(), "{code}");
        }
    }

    #[test]
    fn errors_that_are_not_the_driver_s_are_not_sticky() {
        let errors = [
            Error::NoContext,
            Error::InvalidDevice {
                ordinal: 3,
                count: 1,
            },
            Error::ExceedsDeviceBuffer {
                op: "upload",
                n: 2,
                len: 1,
            },
            Error::InvalidArgument {
                op: "x",
                reason: "y".into(),
            },
            Error::DriverAlreadyLoaded {
                loaded: "a".into(),
                requested: "b".into(),
            },
            // SAFETY: a library that does not exist runs nothing.
            unsafe { cuda_sys::Driver::load_from("libnope-cuda.so.0") }
                .unwrap_err()
                .into(),
        ];
        for e in errors {
            assert!(!e.is_sticky(), "{e:?}");
            assert_eq!(e.driver_code(), None);
        }
    }

    #[test]
    fn a_deferred_error_shows_and_classifies_the_error_it_recorded() {
        let deferred = |code| Error::Deferred {
            what: "cuMemFree",
            more: 2,
            source: Box::new(Error::Driver(DriverError::new(code))),
        };
        let fault = deferred(cuda_sys::CUDA_ERROR_ILLEGAL_ADDRESS);
        assert!(fault.is_sticky());
        assert_eq!(
            fault.to_string(),
            "cuMemFree failed earlier, where the error could not be returned: \
             CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access was encountered \
             (2 more since)"
        );
        // Still the source too, for error reporters that walk the chain.
        let source = std::error::Error::source(&fault).expect("a source");
        assert!(source
            .to_string()
            .starts_with("CUDA_ERROR_ILLEGAL_ADDRESS (700)"));

        let invalid = deferred(cuda_sys::CUDA_ERROR_INVALID_VALUE);
        assert!(!invalid.is_sticky());
        assert!(
            invalid
                .to_string()
                .contains("CUDA_ERROR_INVALID_VALUE (1): invalid argument"),
            "{invalid}"
        );
        let not_driver = Error::Deferred {
            what: "Deref",
            more: 0,
            source: Box::new(Error::NoContext),
        };
        assert!(!not_driver.is_sticky());
    }

    #[test]
    fn unknown_code_is_shown_by_number() {
        let e = DriverError::new(123_456);
        assert_eq!(e.to_string(), "unknown CUDA error (123456)");
        assert_eq!(e.code(), 123_456);
        assert_eq!(e.name(), None);
    }

    #[test]
    fn load_errors_map_to_driver_not_found() {
        // SAFETY: a library that does not exist runs nothing.
        let e: Error = unsafe { cuda_sys::Driver::load_from("libnope-cuda.so.0") }
            .unwrap_err()
            .into();
        assert!(
            matches!(&e, Error::DriverNotFound { library, .. } if library == "libnope-cuda.so.0")
        );
        assert!(e
            .to_string()
            .starts_with("CUDA driver library `libnope-cuda.so.0` not found"));
        // The loader's error is kept as the source, not folded into a string.
        let source = std::error::Error::source(&e).expect("a source");
        assert!(source.downcast_ref::<LoadError>().is_some(), "{source:?}");
        #[cfg(target_os = "linux")]
        {
            // SAFETY: libc is loaded in every process and has no cuInit to call.
            let e: Error = unsafe { cuda_sys::Driver::load_from("libc.so.6") }
                .unwrap_err()
                .into();
            assert_eq!(
                e.to_string(),
                "CUDA driver library `libc.so.6` lacks `cuInit` (driver too old)"
            );
        }
    }

    #[test]
    fn input_errors_name_the_numbers() {
        let e = Error::ExceedsDeviceBuffer {
            op: "memcpy_htod",
            n: 1000,
            len: 512,
        };
        assert_eq!(
            e.to_string(),
            "memcpy_htod of 1000 elements but the device buffer holds 512"
        );
        let e = Error::OutOfRange {
            op: "DeviceBuffer::slice",
            start: 10,
            end: 20,
            len: 16,
        };
        assert_eq!(
            e.to_string(),
            "DeviceBuffer::slice: range 10..20 is outside a buffer of 16 elements"
        );
        let e = Error::SizeOverflow {
            op: "alloc",
            n: usize::MAX,
            elem_bytes: 4,
        };
        assert!(e.to_string().contains(&usize::MAX.to_string()));
        let e = Error::LengthMismatch {
            op: "copy_from_host",
            host: 3,
            expected: 4,
        };
        assert_eq!(
            e.to_string(),
            "copy_from_host: host slice has 3 elements but the transfer needs 4"
        );
        let e = Error::PinnedLimitExceeded {
            op: "StagingBuffer grow",
            limit: 8 << 20,
            held: 6 << 20,
            requested: 3 << 20,
        };
        assert_eq!(
            e.to_string(),
            "StagingBuffer grow: pinning 3145728 more bytes would pass the pinned-memory \
             limit of 8388608 bytes (6291456 bytes are pinned already)"
        );
        assert!(!e.is_sticky());
    }
}
