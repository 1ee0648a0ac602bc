//! The driver's return codes, with the names and descriptions `cuGetErrorName` and
//! `cuGetErrorString` give for them (CUDA 13.0 `cuda.h`).

/// A driver return code (`CUresult`), as an integer.
pub type CuResult = u32;

/// The simulator's internal result: `Err` carries the code the entry point returns.
pub type Res<T> = Result<T, CuResult>;

pub const SUCCESS: CuResult = 0;
pub const INVALID_VALUE: CuResult = 1;
pub const OUT_OF_MEMORY: CuResult = 2;
pub const NOT_INITIALIZED: CuResult = 3;
pub const NO_DEVICE: CuResult = 100;
pub const INVALID_DEVICE: CuResult = 101;
pub const INVALID_IMAGE: CuResult = 200;
pub const INVALID_CONTEXT: CuResult = 201;
pub const INVALID_HANDLE: CuResult = 400;
pub const ILLEGAL_STATE: CuResult = 401;
pub const NOT_FOUND: CuResult = 500;
pub const NOT_READY: CuResult = 600;
pub const ILLEGAL_ADDRESS: CuResult = 700;
pub const CONTEXT_IS_DESTROYED: CuResult = 709;
pub const HOST_MEMORY_ALREADY_REGISTERED: CuResult = 712;
pub const HOST_MEMORY_NOT_REGISTERED: CuResult = 713;
pub const NOT_SUPPORTED: CuResult = 801;
pub const STREAM_CAPTURE_UNSUPPORTED: CuResult = 900;
pub const STREAM_CAPTURE_INVALIDATED: CuResult = 901;
pub const STREAM_CAPTURE_MERGE: CuResult = 902;
pub const STREAM_CAPTURE_UNMATCHED: CuResult = 903;
pub const STREAM_CAPTURE_UNJOINED: CuResult = 904;
pub const STREAM_CAPTURE_ISOLATION: CuResult = 905;
pub const STREAM_CAPTURE_IMPLICIT: CuResult = 906;
pub const CAPTURED_EVENT: CuResult = 907;
pub const STREAM_CAPTURE_WRONG_THREAD: CuResult = 908;

/// Every code the simulator can name: (code, name, description). Descriptions end
/// in a NUL so that they can be handed out as C strings.
const CODES: &[(CuResult, &str, &str)] = &[
    (0, "CUDA_SUCCESS\0", "no error\0"),
    (1, "CUDA_ERROR_INVALID_VALUE\0", "invalid argument\0"),
    (2, "CUDA_ERROR_OUT_OF_MEMORY\0", "out of memory\0"),
    (3, "CUDA_ERROR_NOT_INITIALIZED\0", "initialization error\0"),
    (4, "CUDA_ERROR_DEINITIALIZED\0", "driver shutting down\0"),
    (
        34,
        "CUDA_ERROR_STUB_LIBRARY\0",
        "CUDA driver is a stub library\0",
    ),
    (
        46,
        "CUDA_ERROR_DEVICE_UNAVAILABLE\0",
        "CUDA-capable device(s) is/are busy or unavailable\0",
    ),
    (
        100,
        "CUDA_ERROR_NO_DEVICE\0",
        "no CUDA-capable device is detected\0",
    ),
    (
        101,
        "CUDA_ERROR_INVALID_DEVICE\0",
        "invalid device ordinal\0",
    ),
    (
        200,
        "CUDA_ERROR_INVALID_IMAGE\0",
        "device kernel image is invalid\0",
    ),
    (
        201,
        "CUDA_ERROR_INVALID_CONTEXT\0",
        "invalid device context\0",
    ),
    (
        209,
        "CUDA_ERROR_NO_BINARY_FOR_GPU\0",
        "no kernel image is available for execution on the device\0",
    ),
    (
        218,
        "CUDA_ERROR_INVALID_PTX\0",
        "a PTX JIT compilation failed\0",
    ),
    (
        226,
        "CUDA_ERROR_CONTAINED\0",
        "Invalid access of peer GPU memory over nvlink or a hardware error\0",
    ),
    (
        400,
        "CUDA_ERROR_INVALID_HANDLE\0",
        "invalid resource handle\0",
    ),
    (
        401,
        "CUDA_ERROR_ILLEGAL_STATE\0",
        "the operation cannot be performed in the present state\0",
    ),
    (500, "CUDA_ERROR_NOT_FOUND\0", "named symbol not found\0"),
    (600, "CUDA_ERROR_NOT_READY\0", "device not ready\0"),
    (
        700,
        "CUDA_ERROR_ILLEGAL_ADDRESS\0",
        "an illegal memory access was encountered\0",
    ),
    (
        702,
        "CUDA_ERROR_LAUNCH_TIMEOUT\0",
        "the launch timed out and was terminated\0",
    ),
    (
        709,
        "CUDA_ERROR_CONTEXT_IS_DESTROYED\0",
        "context is destroyed\0",
    ),
    (710, "CUDA_ERROR_ASSERT\0", "device-side assert triggered\0"),
    (
        712,
        "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED\0",
        "part or all of the requested memory range is already mapped\0",
    ),
    (
        713,
        "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED\0",
        "pointer does not correspond to a registered memory region\0",
    ),
    (
        714,
        "CUDA_ERROR_HARDWARE_STACK_ERROR\0",
        "hardware stack error\0",
    ),
    (
        715,
        "CUDA_ERROR_ILLEGAL_INSTRUCTION\0",
        "an illegal instruction was encountered\0",
    ),
    (
        716,
        "CUDA_ERROR_MISALIGNED_ADDRESS\0",
        "misaligned address\0",
    ),
    (
        717,
        "CUDA_ERROR_INVALID_ADDRESS_SPACE\0",
        "operation not supported on global/shared address space\0",
    ),
    (718, "CUDA_ERROR_INVALID_PC\0", "invalid program counter\0"),
    (
        719,
        "CUDA_ERROR_LAUNCH_FAILED\0",
        "unspecified launch failure\0",
    ),
    (
        721,
        "CUDA_ERROR_TENSOR_MEMORY_LEAK\0",
        "tensor memory not completely freed\0",
    ),
    (
        800,
        "CUDA_ERROR_NOT_PERMITTED\0",
        "operation not permitted\0",
    ),
    (
        801,
        "CUDA_ERROR_NOT_SUPPORTED\0",
        "operation not supported\0",
    ),
    (
        810,
        "CUDA_ERROR_MPS_CLIENT_TERMINATED\0",
        "the MPS client has been terminated by the server\0",
    ),
    (
        900,
        "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED\0",
        "operation not permitted when stream is capturing\0",
    ),
    (
        901,
        "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED\0",
        "operation failed due to a previous error during capture\0",
    ),
    (
        902,
        "CUDA_ERROR_STREAM_CAPTURE_MERGE\0",
        "operation would result in a merge of separate capture sequences\0",
    ),
    (
        903,
        "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED\0",
        "capture was not ended in the same stream as it began\0",
    ),
    (
        904,
        "CUDA_ERROR_STREAM_CAPTURE_UNJOINED\0",
        "capturing stream has unjoined work\0",
    ),
    (
        905,
        "CUDA_ERROR_STREAM_CAPTURE_ISOLATION\0",
        "dependency created on uncaptured work in another stream\0",
    ),
    (
        906,
        "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT\0",
        "operation would make the legacy stream depend on a capturing blocking stream\0",
    ),
    (
        907,
        "CUDA_ERROR_CAPTURED_EVENT\0",
        "operation not permitted on an event last recorded in a capturing stream\0",
    ),
    (
        908,
        "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD\0",
        "attempt to terminate a thread-local capture sequence from another thread\0",
    ),
    (
        911,
        "CUDA_ERROR_EXTERNAL_DEVICE\0",
        "an async error has occured in external entity outside of CUDA\0",
    ),
    (999, "CUDA_ERROR_UNKNOWN\0", "unknown error\0"),
];

/// The name and description of `code`, NUL-terminated, or `None` for a code the
/// driver does not define (`cuGetErrorName` then returns `CUDA_ERROR_INVALID_VALUE`).
pub fn describe(code: CuResult) -> Option<(&'static str, &'static str)> {
    CODES
        .iter()
        .find(|(c, _, _)| *c == code)
        .map(|&(_, name, text)| (name, text))
}

/// The name of `code` without its NUL, for messages.
pub fn name(code: CuResult) -> &'static str {
    describe(code).map_or("an unknown code", |(n, _)| n.trim_end_matches('\0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_nul_terminated_and_unique() {
        for (i, (code, name, text)) in CODES.iter().enumerate() {
            assert!(name.ends_with('\0') && text.ends_with('\0'), "{code}");
            assert!(!name[..name.len() - 1].contains('\0'), "{code}");
            assert!(
                CODES[i + 1..].iter().all(|(c, _, _)| c != code),
                "{code} twice"
            );
        }
        assert_eq!(name(700), "CUDA_ERROR_ILLEGAL_ADDRESS");
        assert_eq!(describe(12345), None);
    }
}
