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
    /// An operation failed where it could not report it (in `Drop`, or in a host
    /// accessor such as `Deref`), and was recorded; see
    /// [`crate::check_deferred_errors`].
    #[error("{what} failed earlier, where the error could not be returned ({more} more since)")]
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
}

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
    /// Describes `code`.
    pub fn new(code: CuResult) -> DriverError {
        let (mut name, mut description) = (None, None);
        if let Some(d) = cuda_sys::driver_if_loaded() {
            name = crate::result::error_name(d, code);
            description = crate::result::error_string(d, code);
        }
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
        222,
        "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
        "the provided PTX was compiled with an unsupported toolchain.",
    ),
    (
        223,
        "CUDA_ERROR_JIT_COMPILATION_DISABLED",
        "PTX JIT compilation was disabled",
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
        709,
        "CUDA_ERROR_CONTEXT_IS_DESTROYED",
        "context is destroyed",
    ),
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
        719,
        "CUDA_ERROR_LAUNCH_FAILED",
        "unspecified launch failure",
    ),
    (800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"),
    (801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"),
    (
        803,
        "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        "system has unsupported display driver / cuda driver combination",
    ),
    (
        912,
        "CUDA_ERROR_EXTERNAL_DEVICE",
        "a launch did not occur on the external device",
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
            DriverError::new(912).name(),
            Some("CUDA_ERROR_EXTERNAL_DEVICE")
        );
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
    }
}
