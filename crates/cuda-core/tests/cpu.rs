//! CPU-tier integration tests of `cuda-core`: they need no GPU and no driver, and
//! pass on a GPU machine too (nothing here depends on whether `libcuda` loads,
//! except `no_driver_is_an_ordinary_error`, which checks both cases).
//!
//! The unit tests in `src/` already cover `byte_len` basics, overflow of
//! `DeviceBuffer::alloc(usize::MAX / 2)` / `PinnedBuffer::<u32>::alloc(usize::MAX)`,
//! zero-length `PinnedBuffer`s, the Display of `Driver(2)`, `ExceedsDeviceBuffer`,
//! `LengthMismatch`, `DriverSymbolMissing` and unknown codes; these tests add the
//! rest. Where the driver comes from is in `driver_loader.rs`; what must not
//! compile in `compile_fail.rs`.

mod common;

use bytemuck::{Pod, Zeroable};
use common::Aligned512;
use cuda_core::result::check;
use cuda_core::sys::{self, LoadError};
use cuda_core::{
    byte_len, Context, ContextGuard, DeviceBuffer, DeviceView, DeviceViewMut, DriverError, Error,
    Event, HostRegistration, PinnedBuffer, PinnedView, PinnedViewMut, Stream,
};

// Owning handles must not be duplicable: a copy would free (or destroy) twice.
static_assertions::assert_not_impl_any!(DeviceBuffer<u8>: Clone, Copy);
static_assertions::assert_not_impl_any!(PinnedBuffer<u8>: Clone, Copy);
static_assertions::assert_not_impl_any!(HostRegistration<'static, u8>: Clone, Copy);
static_assertions::assert_not_impl_any!(Stream: Clone, Copy);
static_assertions::assert_not_impl_any!(Event: Clone, Copy);
// A copy of a writable view would be two writers of the same memory, each with its
// own record of queued copies.
static_assertions::assert_not_impl_any!(DeviceViewMut<'static, u8>: Clone, Copy);
static_assertions::assert_not_impl_any!(PinnedViewMut<'static, u8>: Clone, Copy);
// A guard pops the context on the thread that pushed it: neither Send nor Sync.
static_assertions::assert_not_impl_any!(ContextGuard<'static>: Send, Sync);
// Hand-written (unsafe) Send/Sync impls: views go to other threads like the
// `&[T]` / `&mut [T]` they stand for, and only for such `T`.
static_assertions::assert_impl_all!(DeviceView<'static, f32>: Send, Sync);
static_assertions::assert_impl_all!(DeviceViewMut<'static, f32>: Send, Sync);
static_assertions::assert_impl_all!(PinnedView<'static, f32>: Send, Sync);
static_assertions::assert_impl_all!(PinnedViewMut<'static, f32>: Send, Sync);
// A registration can move to another thread with its borrow (the driver call to
// unregister does not care which thread makes it).
static_assertions::assert_impl_all!(HostRegistration<'static, u32>: Send, Sync);

#[test]
fn device_buffer_alloc_overflow_is_size_overflow_before_any_driver_call() {
    // With or without a driver the answer is exactly SizeOverflow: had a driver call
    // come first, this would be DriverNotFound (no driver) or NoContext (no context
    // current on this test thread).
    let e = DeviceBuffer::<u64>::alloc(usize::MAX).unwrap_err();
    assert_eq!(
        e,
        Error::SizeOverflow {
            op: "DeviceBuffer::alloc",
            n: usize::MAX,
            elem_bytes: 8
        }
    );
    // zeroed goes through the same check.
    let e = DeviceBuffer::<f64>::zeroed(usize::MAX).unwrap_err();
    assert_eq!(
        e,
        Error::SizeOverflow {
            op: "DeviceBuffer::alloc",
            n: usize::MAX,
            elem_bytes: 8
        }
    );
    // The first element count that overflows, with an odd element size.
    let n = usize::MAX / 3 + 1;
    let e = DeviceBuffer::<[u8; 3]>::alloc(n).unwrap_err();
    assert_eq!(
        e,
        Error::SizeOverflow {
            op: "DeviceBuffer::alloc",
            n,
            elem_bytes: 3
        }
    );
}

#[test]
fn pinned_buffer_alloc_overflow_is_size_overflow_before_any_driver_call() {
    let e = PinnedBuffer::<u64>::alloc(usize::MAX).unwrap_err();
    assert_eq!(
        e,
        Error::SizeOverflow {
            op: "PinnedBuffer::alloc",
            n: usize::MAX,
            elem_bytes: 8
        }
    );
    let n = usize::MAX / 16 + 1;
    let e = PinnedBuffer::<[u64; 2]>::alloc(n).unwrap_err();
    assert_eq!(
        e,
        Error::SizeOverflow {
            op: "PinnedBuffer::alloc",
            n,
            elem_bytes: 16
        }
    );
}

#[test]
fn byte_len_is_exact_at_the_overflow_boundary() {
    let max_n = usize::MAX / 8;
    assert_eq!(byte_len::<u64>("probe", max_n), Ok(max_n * 8));
    assert_eq!(
        byte_len::<u64>("probe", max_n + 1),
        Err(Error::SizeOverflow {
            op: "probe",
            n: max_n + 1,
            elem_bytes: 8
        })
    );
    // Zero-sized elements never overflow.
    assert_eq!(byte_len::<()>("probe", usize::MAX), Ok(0));
    assert_eq!(byte_len::<[u32; 0]>("probe", usize::MAX), Ok(0));
}

/// An element aligned exactly as far as CUDA guarantees, of no size.
#[repr(C, align(256))]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Aligned256Empty {
    bytes: [u8; 0],
}

#[test]
fn pinned_buffer_refuses_alignment_above_256_bytes_before_any_driver_call() {
    // `Deref` builds a `&[T]`, which must be aligned for `T`: a type aligned past
    // what the driver guarantees is a clear error, not a misaligned slice. Had a
    // driver call come first, this would be DriverNotFound (no driver) or NoContext
    // (no context current on this test thread).
    for len in [1usize, 0] {
        let e = PinnedBuffer::<Aligned512>::alloc(len).unwrap_err();
        assert_eq!(
            e,
            Error::InvalidArgument {
                op: "PinnedBuffer::alloc",
                reason: "element alignment 512 exceeds the 256-byte alignment of pinned memory"
                    .into()
            },
            "alloc({len})"
        );
    }
    // 256 is allowed (zero bytes here: no driver needed).
    let p = PinnedBuffer::<Aligned256Empty>::alloc(3).expect("256-byte alignment is fine");
    assert_eq!(p.len(), 3);
}

#[test]
fn a_pinned_buffer_debugs_as_its_address_and_length() {
    let p = PinnedBuffer::<()>::alloc(1000).expect("zero bytes need no driver");
    assert_eq!(
        format!("{p:?}"),
        format!("PinnedBuffer {{ ptr: {:?}, len: 1000 }}", p.as_ptr())
    );
}

#[test]
fn views_of_a_zero_byte_pinned_buffer_check_their_ranges() {
    // Elements of no size: a buffer of 1000 of them pins nothing and needs no
    // driver, but has the ranges of a buffer of 1000.
    let mut p = PinnedBuffer::<()>::alloc(1000).expect("zero bytes need no driver");
    p.wait().expect("nothing queued");
    assert_eq!(p.slice(10..20).expect("slice").len(), 10);
    assert_eq!(
        p.slice(999..1001).unwrap_err(),
        Error::OutOfRange {
            op: "PinnedBuffer::slice",
            start: 999,
            end: 1001,
            len: 1000
        }
    );
    {
        let view = p.slice(100..).expect("slice");
        assert_eq!(view.len(), 900);
        assert_eq!(view.slice(..=899).expect("PinnedView::slice").len(), 900);
        assert_eq!(
            view.slice(..=900).unwrap_err(),
            Error::OutOfRange {
                op: "PinnedView::slice",
                start: 0,
                end: 901,
                len: 900
            }
        );
    }
    assert_eq!(p.slice_mut(..).expect("slice_mut").len(), 1000);
    let (mut a, b) = p.split_at_mut(400).expect("split_at_mut");
    assert_eq!((a.len(), b.len()), (400, 600));
    assert!(a.is_idle() && b.is_idle(), "nothing queued");
    a.wait().expect("nothing queued");
    assert_eq!(a.as_mut_slice().expect("as_mut_slice").len(), 400);
    assert_eq!(b.as_slice().expect("as_slice").len(), 600);
    assert_eq!(b.slice(599..600).expect("PinnedViewMut::slice").len(), 1);
    assert_eq!(
        b.slice(599..601).unwrap_err(),
        Error::OutOfRange {
            op: "PinnedViewMut::slice",
            start: 599,
            end: 601,
            len: 600
        }
    );
    let (c, d) = b.split_at(600).expect("split at the end");
    assert_eq!((c.len(), d.len(), d.is_empty()), (600, 0, true));
    assert_eq!(
        a.split_at(401).unwrap_err(),
        Error::OutOfRange {
            op: "PinnedViewMut::split_at",
            start: 0,
            end: 401,
            len: 400
        }
    );
}

#[test]
fn pinned_buffer_of_zero_sized_elements_pins_nothing() {
    // Zero bytes: no driver call, no context, works without a driver.
    let p = PinnedBuffer::<()>::alloc(1000).expect("zero bytes need no driver");
    assert_eq!(p.len(), 1000);
    assert!(!p.is_empty());
    assert_eq!(p.byte_len(), 0);
    assert!(p.context().is_none());
    assert_eq!(p.iter().count(), 1000);
}

#[test]
fn error_display_names_the_numbers() {
    assert_eq!(
        Error::InvalidDevice {
            ordinal: 3,
            count: 1
        }
        .to_string(),
        "CUDA device 3 requested but 1 device(s) found"
    );
    assert_eq!(
        Error::NoContext.to_string(),
        "no CUDA context is current on this thread: create one with Context::new or bind \
         one with Context::bind_to_thread"
    );
    assert_eq!(
        Error::SizeOverflow {
            op: "DeviceBuffer::alloc",
            n: usize::MAX,
            elem_bytes: 8
        }
        .to_string(),
        format!(
            "DeviceBuffer::alloc of {} elements of 8 bytes overflows a byte count",
            usize::MAX
        )
    );
    assert_eq!(
        Error::ContextMismatch {
            op: "upload",
            what: "device buffer"
        }
        .to_string(),
        "upload: device buffer belongs to a different CUDA context than the stream"
    );
    assert_eq!(
        Error::InvalidArgument {
            op: "HostRegistration::new",
            reason: "cannot register an empty slice".into()
        }
        .to_string(),
        "invalid argument to HostRegistration::new: cannot register an empty slice"
    );
    assert_eq!(
        Error::LengthMismatch {
            op: "copy_to_host",
            host: 0,
            expected: 1
        }
        .to_string(),
        "copy_to_host: host slice has 0 elements but the transfer needs 1"
    );
    assert_eq!(
        Error::DestinationTooShort {
            op: "memcpy_htod",
            src: 1000,
            dst: 512
        }
        .to_string(),
        "memcpy_htod: the destination holds 512 elements, fewer than the 1000 of the source"
    );
    assert_eq!(
        Error::OutOfRange {
            op: "PinnedBuffer::slice",
            start: 3,
            end: 70,
            len: 64
        }
        .to_string(),
        "PinnedBuffer::slice: range 3..70 is outside a buffer of 64 elements"
    );
}

#[test]
fn a_deferred_error_shows_what_failed_and_its_error_and_keeps_the_error_as_its_source() {
    let inner = Error::Driver(DriverError::new(sys::CUDA_ERROR_INVALID_VALUE));
    let e = Error::Deferred {
        what: "cuMemFree",
        more: 2,
        source: Box::new(inner.clone()),
    };
    assert_eq!(
        e.to_string(),
        "cuMemFree failed earlier, where the error could not be returned: \
         CUDA_ERROR_INVALID_VALUE (1): invalid argument (2 more since)"
    );
    assert_eq!(e.driver_code(), None, "the driver code is the source's");
    // The `source` field is the error itself; through `std::error::Error::source`
    // the chain shows it (as a `Box<Error>`, which displays as the error).
    let Error::Deferred { source, .. } = &e else {
        unreachable!()
    };
    assert_eq!(**source, inner);
    let shown = std::error::Error::source(&e).expect("a source");
    assert_eq!(shown.to_string(), inner.to_string());
}

#[test]
fn check_turns_codes_into_named_driver_errors() {
    assert_eq!(check(sys::CUDA_SUCCESS), Ok(()));
    // Names and codes agree whether they come from the loaded driver or from the
    // built-in table, so these hold on every machine.
    let cases: &[(u32, &str)] = &[
        (sys::CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"),
        (
            sys::CUDA_ERROR_NOT_INITIALIZED,
            "CUDA_ERROR_NOT_INITIALIZED",
        ),
        (sys::CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"),
        (sys::CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"),
        (
            sys::CUDA_ERROR_INVALID_CONTEXT,
            "CUDA_ERROR_INVALID_CONTEXT",
        ),
        (sys::CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY"),
        (
            sys::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
            "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
        ),
        (700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
        (46, "CUDA_ERROR_DEVICE_UNAVAILABLE"),
        (999, "CUDA_ERROR_UNKNOWN"),
    ];
    for &(code, name) in cases {
        let e = check(code).unwrap_err();
        assert_eq!(e.driver_code(), Some(code), "{e}");
        let Error::Driver(d) = &e else {
            panic!("check({code}) gave {e:?}, not Error::Driver");
        };
        assert_eq!(d.code(), code);
        assert_eq!(d.name(), Some(name));
        let description = d.description().expect("known codes have a description");
        assert!(!description.is_empty(), "{code}");
        // "NAME (code): description", as conventions.md asks.
        assert_eq!(e.to_string(), format!("{name} ({code}): {description}"));
        assert_eq!(format!("{d:?}"), format!("DriverError({e})"));
    }
}

#[test]
fn only_driver_errors_have_a_driver_code() {
    let others = [
        Error::NoContext,
        Error::InvalidDevice {
            ordinal: 1,
            count: 1,
        },
        Error::SizeOverflow {
            op: "x",
            n: 1,
            elem_bytes: 1,
        },
        Error::DestinationTooShort {
            op: "memcpy_dtoh",
            src: 2,
            dst: 1,
        },
    ];
    for e in others {
        assert_eq!(e.driver_code(), None, "{e:?}");
    }
    assert_eq!(
        Error::Driver(DriverError::new(123_456)).driver_code(),
        Some(123_456)
    );
}

#[test]
fn missing_driver_library_converts_to_driver_not_found() {
    let lib = "libdefinitely-not-cuda.so";
    // SAFETY: a library that does not exist runs nothing.
    let load_err = unsafe { sys::Driver::load_from(lib) }.unwrap_err();
    let LoadError::LibraryNotFound { library, .. } = &load_err else {
        panic!("expected LibraryNotFound, got {load_err:?}");
    };
    assert_eq!(library, lib);

    let e: Error = load_err.clone().into();
    assert_eq!(
        e,
        Error::DriverNotFound {
            library: lib.to_owned(),
            source: load_err.clone()
        }
    );
    assert_eq!(e.driver_code(), None);
    assert!(e.to_string().contains(lib), "{e}");
    // The loader's own error is the source, not a string folded into the message.
    let source = std::error::Error::source(&e).expect("a source");
    assert_eq!(source.to_string(), load_err.to_string());
    assert!(
        source.source().is_some(),
        "the system loader's error below it"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn library_without_cuda_symbols_converts_to_driver_symbol_missing() {
    // SAFETY: libc is already loaded; it has no cuInit, so nothing of it is called.
    let e: Error = unsafe { sys::Driver::load_from("libc.so.6") }
        .unwrap_err()
        .into();
    assert!(
        matches!(&e, Error::DriverSymbolMissing { library, symbol: "cuInit", .. } if library == "libc.so.6"),
        "{e:?}"
    );
}

#[test]
fn no_driver_is_an_ordinary_error() {
    match sys::driver() {
        Err(load_err) => {
            // No driver on this machine: every entry point that needs it says so,
            // naming the library searched; nothing panics.
            let expected = Error::from(load_err.clone());
            assert!(
                matches!(&expected, Error::DriverNotFound { library, .. } if library == sys::DRIVER_LIBRARY),
                "{expected:?}"
            );
            assert_eq!(Context::new(0).unwrap_err(), expected);
            assert_eq!(Context::device_count().unwrap_err(), expected);
            assert_eq!(Context::driver_version().unwrap_err(), expected);
            assert_eq!(Context::current().unwrap_err(), expected);
            assert_eq!(DeviceBuffer::<f32>::alloc(4).unwrap_err(), expected);
            assert_eq!(DeviceBuffer::<f32>::zeroed(4).unwrap_err(), expected);
            assert_eq!(PinnedBuffer::<f32>::alloc(4).unwrap_err(), expected);
            // Asking again tries again and fails the same way.
            assert_eq!(sys::driver().unwrap_err(), load_err);
        }
        Ok(d) => {
            // A driver is present (GPU machine): the no-driver path cannot be
            // exercised here; check the driver answers at all.
            eprintln!("driver present ({}): no-driver checks skipped", d.library());
            assert_eq!(d.library(), sys::DRIVER_LIBRARY);
            Context::device_count().expect("a loaded driver answers device_count");
        }
    }
}
