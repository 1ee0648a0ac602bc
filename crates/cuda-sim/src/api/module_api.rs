//! Modules and launches. No device code runs: see [`crate::module`].

use std::ffi::{c_char, c_uint, c_void, CStr};
use std::sync::Arc;

use super::{out, stream_of, Handle};
use crate::context::current_usable;
use crate::errors::{Res, INVALID_HANDLE, INVALID_VALUE, NOT_FOUND};
use crate::module::{Function, Module};
use crate::ops::Work;
use crate::state::sim;
use crate::submit::submit;

/// Loads the NUL-terminated PTX at `image` into the current context.
///
/// # Safety
/// 1. `image` is null or a NUL-terminated image (PTX text; binary images start with
///    bytes that are not text, and are refused before their end is looked for).
unsafe fn load(module: *mut Handle, image: *const c_void) -> Res<()> {
    let c = current_usable()?;
    if module.is_null() || image.is_null() {
        return Err(INVALID_VALUE);
    }
    // An ELF cubin or a fatbin has no terminating NUL to look for.
    // SAFETY: condition 1: at least one byte is readable.
    let first = unsafe { *image.cast::<u8>() };
    // SAFETY: condition 1: the image goes on past a first byte that is not NUL.
    let fatbin = first == 0x50 && unsafe { *image.cast::<u8>().add(1) } == 0xED;
    if first == 0x7F || first >= 0x80 || fatbin {
        return Err(crate::errors::INVALID_IMAGE);
    }
    // SAFETY: condition 1: PTX text, NUL-terminated.
    let text = unsafe { CStr::from_ptr(image.cast::<c_char>()) }.to_string_lossy();
    let m = Module::from_ptx(c, &text)?;
    let h = sim().modules.insert(Arc::new(m));
    // SAFETY: the caller's out-pointer, not null.
    unsafe { out(module, h as Handle) }
}

export! {
    /// `cuModuleLoadData`: PTX text only (its `.entry` names are read).
    fn cuModuleLoadData(module: *mut Handle, image: *const c_void) {
        // SAFETY: the caller's image (the driver's contract).
        unsafe { load(module, image) }
    }

    /// `cuModuleLoadDataEx`: as `cuModuleLoadData`; JIT options are ignored (an error
    /// log stays empty).
    fn cuModuleLoadDataEx(module: *mut Handle, image: *const c_void, _count: c_uint, _options: *mut c_uint, _values: *mut *mut c_void) {
        // SAFETY: the caller's image (the driver's contract).
        unsafe { load(module, image) }
    }

    /// `cuModuleUnload`.
    fn cuModuleUnload(module: Handle) {
        sim().ready()?;
        sim().modules.remove(module as usize).ok_or(INVALID_HANDLE).map(drop)
    }

    /// `cuModuleGetFunction`: `CUDA_ERROR_NOT_FOUND` for a name the module lacks.
    fn cuModuleGetFunction(function: *mut Handle, module: Handle, name: *const c_char) {
        sim().ready()?;
        let m = sim().modules.get(module as usize).ok_or(INVALID_HANDLE)?;
        m.ctx.usable()?;
        if name.is_null() || function.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: `name` is a NUL-terminated string (the driver's contract).
        let name = unsafe { CStr::from_ptr(name) }.to_str().map_err(|_| NOT_FOUND)?;
        let (name, params) = m.function(name)?;
        let f = Function { module: module as usize, ctx: Arc::clone(&m.ctx), name, params };
        let h = sim().functions.insert(Arc::new(f));
        // SAFETY: the caller's out-pointer, not null.
        unsafe { out(function, h as Handle) }
    }

    /// `cuLaunchKernel`: `CUDA_ERROR_NOT_SUPPORTED` for any kernel but the simulator's
    /// built-in one.
    fn cuLaunchKernel(f: Handle, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint, _shared: c_uint, stream: Handle, params: *mut *mut c_void, _extra: *mut *mut c_void) {
        let s = stream_of(stream)?;
        let func = sim().functions.get(f as usize).ok_or(INVALID_HANDLE)?;
        if sim().modules.get(func.module).is_none() {
            return Err(INVALID_HANDLE);
        }
        if [gx, gy, gz, bx, by, bz].contains(&0) {
            return Err(INVALID_VALUE);
        }
        // SAFETY: `params` holds one pointer per kernel parameter (the driver's contract).
        let k = unsafe { func.launch(params.cast::<*const u64>()) }?;
        submit(&s, Work::Kernel(k), "cuLaunchKernel", vec![]).map(drop)
    }
}
