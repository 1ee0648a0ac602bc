//! [`DriverError`]: a driver's return code with its name and description, from the
//! driver or from a built-in table, and which codes poison the context.

use std::fmt;

use cuda_sys::CuResult;

/// The codes NVIDIA's `cuda.h` (CUDA 13.1) documents as leaving the context or the
/// process unusable: "This leaves the process in an inconsistent state and any further
/// CUDA work will return the same error. To continue using CUDA, the process must be
/// terminated and relaunched", or for `CUDA_ERROR_ASSERT` "The context cannot be used
/// anymore, and must be destroyed". Not here because the header does not say so:
/// `CUDA_ERROR_ECC_UNCORRECTABLE` (214), `CUDA_ERROR_NVLINK_UNCORRECTABLE` (220),
/// `CUDA_ERROR_UNKNOWN` (999).
pub(crate) const STICKY_CODES: [CuResult; 13] = [
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
    /// process restarts (see [`Error::is_sticky`](crate::Error::is_sticky)): `CUDA_ERROR_ILLEGAL_ADDRESS` (700),
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
