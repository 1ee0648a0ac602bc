//! Initialisation, versions, error strings and device queries; and the simulator's
//! own extra entry points, `cuSimInjectFault` and `cuSimLeakReport`.

use std::ffi::{c_char, c_int, c_uint};

use super::out;
use crate::errors::{describe, INVALID_VALUE};
use crate::machine::machine;
use crate::state::sim;

/// The CUDA version the simulator reports (that of the GPU machine's driver).
const DRIVER_VERSION: c_int = 13000;

fn get_uuid(uuid: *mut [u8; 16], device: c_int) -> crate::errors::Res<()> {
    sim().ready()?;
    let d = machine().device_checked(device)?;
    let mut id = *b"cuda-sim-gpu-\0\0\0";
    id[14] = d.pci_bus as u8;
    // SAFETY: the caller's out-pointer to a `CUuuid` (16 bytes).
    unsafe { out(uuid, id) }
}

export! {
    /// `cuInit`.
    fn cuInit(flags: c_uint) {
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        sim().init()
    }

    /// `cuDriverGetVersion` (needs no `cuInit`).
    fn cuDriverGetVersion(version: *mut c_int) {
        // SAFETY: the caller's out-pointer (the driver's contract).
        unsafe { out(version, DRIVER_VERSION) }
    }

    /// `cuGetErrorName`.
    fn cuGetErrorName(error: u32, name: *mut *const c_char) {
        let found = describe(error);
        // SAFETY: the caller's out-pointer; the names are static and NUL-terminated.
        unsafe { out(name, found.map_or(std::ptr::null(), |(n, _)| n.as_ptr().cast())) }?;
        found.map(|_| ()).ok_or(INVALID_VALUE)
    }

    /// `cuGetErrorString`.
    fn cuGetErrorString(error: u32, text: *mut *const c_char) {
        let found = describe(error);
        // SAFETY: as for cuGetErrorName.
        unsafe { out(text, found.map_or(std::ptr::null(), |(_, t)| t.as_ptr().cast())) }?;
        found.map(|_| ()).ok_or(INVALID_VALUE)
    }

    /// `cuDeviceGetCount`.
    fn cuDeviceGetCount(count: *mut c_int) {
        sim().ready()?;
        // SAFETY: the caller's out-pointer.
        unsafe { out(count, machine().devices().len() as c_int) }
    }

    /// `cuDeviceGet`: a device's handle is its ordinal.
    fn cuDeviceGet(device: *mut c_int, ordinal: c_int) {
        sim().ready()?;
        let d = machine().device_checked(ordinal)?;
        // SAFETY: the caller's out-pointer.
        unsafe { out(device, d.ordinal as c_int) }
    }

    /// `cuDeviceGetName`: the name, cut to `len - 1` bytes and NUL-terminated.
    fn cuDeviceGetName(name: *mut c_char, len: c_int, device: c_int) {
        sim().ready()?;
        let d = machine().device_checked(device)?;
        let len = usize::try_from(len).map_err(|_| INVALID_VALUE)?;
        if name.is_null() || len == 0 {
            return Err(INVALID_VALUE);
        }
        let n = d.name.len().min(len - 1);
        // SAFETY: `name` is writable for `len` bytes (the driver's contract); `n + 1 <=
        // len`.
        unsafe {
            std::ptr::copy_nonoverlapping(d.name.as_ptr().cast(), name, n);
            *name.add(n) = 0;
        }
        Ok(())
    }

    /// `cuDeviceTotalMem_v2`.
    fn cuDeviceTotalMem_v2(bytes: *mut usize, device: c_int) {
        sim().ready()?;
        let d = machine().device_checked(device)?;
        // SAFETY: the caller's out-pointer.
        unsafe { out(bytes, d.total) }
    }

    /// `cuDeviceGetAttribute`.
    fn cuDeviceGetAttribute(value: *mut c_int, attribute: c_int, device: c_int) {
        sim().ready()?;
        let v = machine().device_checked(device)?.attribute(attribute)?;
        // SAFETY: the caller's out-pointer.
        unsafe { out(value, v) }
    }

    /// `cuDeviceComputeCapability` (deprecated, still resolved by some programs).
    fn cuDeviceComputeCapability(major: *mut c_int, minor: *mut c_int, device: c_int) {
        sim().ready()?;
        let d = machine().device_checked(device)?;
        // SAFETY: the caller's out-pointers.
        unsafe { out(major, d.attribute(75)?)? };
        // SAFETY: as above.
        unsafe { out(minor, d.attribute(76)?) }
    }

    /// `cuDeviceGetUuid`: 16 bytes, the device's PCI bus id among them.
    fn cuDeviceGetUuid(uuid: *mut [u8; 16], device: c_int) {
        get_uuid(uuid, device)
    }

    /// `cuDeviceGetUuid_v2`.
    fn cuDeviceGetUuid_v2(uuid: *mut [u8; 16], device: c_int) {
        get_uuid(uuid, device)
    }

    /// `cuDeviceGetPCIBusId`: `0000:BB:00.0`.
    fn cuDeviceGetPCIBusId(id: *mut c_char, len: c_int, device: c_int) {
        sim().ready()?;
        let d = machine().device_checked(device)?;
        let text = format!("0000:{:02X}:00.0", d.pci_bus);
        let len = usize::try_from(len).map_err(|_| INVALID_VALUE)?;
        if id.is_null() || len == 0 {
            return Err(INVALID_VALUE);
        }
        let n = text.len().min(len - 1);
        // SAFETY: `id` is writable for `len` bytes (the driver's contract).
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr().cast(), id, n);
            *id.add(n) = 0;
        }
        Ok(())
    }

    /// The simulator's own entry point (not a driver one): the `after`-th call from
    /// now (counting every entry point, this one excluded) makes the device of the
    /// calling thread's current context at that call fail with `code`, stickily, as
    /// `CUDA_SIM_FAULT=code@N` does for the N-th call of the process.
    fn cuSimInjectFault(code: u32, after: u64) {
        if code == 0 {
            return Err(INVALID_VALUE);
        }
        sim().arm_fault(code, after);
        Ok(())
    }

    /// The simulator's own entry point (not a driver one): the leak report's line
    /// (`src/leaks.rs`) for the program's objects now, NUL-terminated, into `line`
    /// of `len` bytes; `CUDA_ERROR_INVALID_VALUE`, and nothing written, when it is
    /// null or too short.
    fn cuSimLeakReport(line: *mut c_char, len: usize) {
        let text = sim().live().line();
        if line.is_null() || len <= text.len() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: `line` is writable for `len` bytes (the entry point's contract),
        // more than the text and its NUL.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr().cast(), line, text.len());
            *line.add(text.len()) = 0;
        }
        Ok(())
    }
}
