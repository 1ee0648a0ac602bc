//! The error type's CPU tests: how each error shows, and which driver codes are
//! sticky.

use super::*;
use crate::driver_error::STICKY_CODES;

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
    assert!(matches!(&e, Error::DriverNotFound { library, .. } if library == "libnope-cuda.so.0"));
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
