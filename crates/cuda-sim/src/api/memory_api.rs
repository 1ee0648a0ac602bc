//! Memory management: device allocations (plain, pitched, stream-ordered),
//! page-locked host memory (allocated and registered), and pointer attributes.

use std::ffi::{c_int, c_uint, c_void};
use std::sync::Arc;

use super::{out, stream_of, Handle};
use crate::capture::refuse_unsafe_call;
use crate::context::current_usable;
use crate::errors::{Res, INVALID_VALUE, NOT_FOUND};
use crate::machine::machine;
use crate::memory::{HostKind, Kind};
use crate::ops::Work;
use crate::state::sim;
use crate::submit::{submit, Queued};

/// `cuMemAllocPitch` rounds each row up to a multiple of this.
pub const PITCH_ALIGN: usize = 512;

/// `CU_MEMHOSTALLOC_PORTABLE | DEVICEMAP | WRITECOMBINED`.
const HOST_ALLOC_FLAGS: u32 = 0x7;
/// `CU_MEMHOSTREGISTER_PORTABLE | DEVICEMAP | IOMEMORY | READ_ONLY`.
const HOST_REGISTER_FLAGS: u32 = 0xF;

/// A pointer attribute's value, by the size the driver writes.
enum Val {
    U32(u32),
    U64(u64),
}

/// The bytes attribute `attr` is written as (0 for an attribute the simulator does
/// not know, which is refused).
fn attribute_size(attr: c_int) -> usize {
    match attr {
        2 | 6 | 8 | 9 | 10 | 13 | 15 | 16 => 4,
        1 | 3 | 4 | 7 | 11 | 12 | 14 | 17..=20 => 8,
        _ => 0,
    }
}

/// Pointer attribute `attr` of address `p`; `CUDA_ERROR_INVALID_VALUE` for an address
/// the driver does not know, or an attribute that does not apply to it.
fn attribute(attr: c_int, p: u64) -> Res<Val> {
    let v = match machine().mem.kind(p) {
        Kind::Device(a) => match attr {
            1 => Val::U64(a.ctx.handle as u64),
            2 => Val::U32(2), // CU_MEMORYTYPE_DEVICE
            3 => Val::U64(p),
            7 => Val::U64(a.start),
            8 | 10 | 15 => Val::U32(0),
            9 => Val::U32(a.ctx.device as u32),
            11 => Val::U64(a.start),
            12 | 18 => Val::U64(a.backing.len() as u64),
            13 | 6 => Val::U32(1),
            16 => Val::U32(3), // CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE
            19 => Val::U64(a.start),
            _ => return Err(INVALID_VALUE),
        },
        Kind::PageLocked(b) => match attr {
            1 => Val::U64(b.ctx.handle as u64),
            2 => Val::U32(1), // CU_MEMORYTYPE_HOST
            3 | 4 => Val::U64(p),
            7 => Val::U64(b.start as u64),
            8 | 10 | 15 => Val::U32(0),
            9 => Val::U32(b.ctx.device as u32),
            11 => Val::U64(b.start as u64),
            12 => Val::U64(b.len as u64),
            13 | 6 => Val::U32(1),
            16 => Val::U32(3),
            _ => return Err(INVALID_VALUE),
        },
        Kind::Other => return Err(INVALID_VALUE),
    };
    Ok(v)
}

/// Writes `v` where `data` points (its size is the attribute's).
///
/// # Safety
/// 1. `data` is valid for a write of the attribute's size.
unsafe fn write_val(data: *mut c_void, v: Val) {
    match v {
        // SAFETY: condition 1.
        Val::U32(x) => unsafe { data.cast::<u32>().write_unaligned(x) },
        // SAFETY: condition 1.
        Val::U64(x) => unsafe { data.cast::<u64>().write_unaligned(x) },
    }
}

export! {
    /// `cuMemGetInfo_v2` of the current context's device.
    fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) {
        let c = current_usable()?;
        let d = machine().device(c.device);
        // SAFETY: the caller's out-pointers.
        unsafe { out(free, d.free_bytes())? };
        // SAFETY: as above.
        unsafe { out(total, d.total) }
    }

    /// `cuMemAlloc_v2` in the current context.
    fn cuMemAlloc_v2(dptr: *mut u64, bytes: usize) {
        let c = current_usable()?;
        refuse_unsafe_call()?;
        if dptr.is_null() {
            return Err(INVALID_VALUE);
        }
        let p = machine().mem.alloc_device(&c, bytes, false)?;
        // SAFETY: the caller's out-pointer, not null.
        unsafe { out(dptr, p) }
    }

    /// `cuMemAllocPitch_v2`: `height` rows of `width` bytes, each starting at a
    /// multiple of the pitch written back (`width` rounded up to 512 bytes).
    fn cuMemAllocPitch_v2(dptr: *mut u64, pitch: *mut usize, width: usize, height: usize, element_bytes: c_uint) {
        let c = current_usable()?;
        refuse_unsafe_call()?;
        if dptr.is_null() || pitch.is_null() || !matches!(element_bytes, 4 | 8 | 16) {
            return Err(INVALID_VALUE);
        }
        if width == 0 || height == 0 {
            return Err(INVALID_VALUE);
        }
        let p = width.checked_next_multiple_of(PITCH_ALIGN).ok_or(INVALID_VALUE)?;
        let bytes = p.checked_mul(height).ok_or(crate::errors::OUT_OF_MEMORY)?;
        let start = machine().mem.alloc_device(&c, bytes, false)?;
        // SAFETY: the caller's out-pointers, not null.
        unsafe {
            out(dptr, start)?;
            out(pitch, p)
        }
    }

    /// `cuMemFree_v2`: the address must start an allocation; memory a queued
    /// operation still uses aborts the process (the simulator's check).
    fn cuMemFree_v2(dptr: u64) {
        sim().ready()?;
        refuse_unsafe_call()?;
        let a = machine().mem.device_at(dptr).ok_or(INVALID_VALUE)?;
        a.ctx.usable()?;
        machine().inflight.assert_device_unused(a.range(), "cuMemFree_v2", None);
        machine().mem.free_device(dptr).map(drop)
    }

    /// `cuMemAllocAsync`: allocated at once (a stream-ordered allocation may be used
    /// in stream order after the call; the simulator's is usable earlier too).
    fn cuMemAllocAsync(dptr: *mut u64, bytes: usize, stream: Handle) {
        let s = stream_of(stream)?;
        if dptr.is_null() {
            return Err(INVALID_VALUE);
        }
        let p = machine().mem.alloc_device(&s.ctx, bytes, true)?;
        // SAFETY: the caller's out-pointer, not null.
        unsafe { out(dptr, p) }
    }

    /// `cuMemFreeAsync`: freed when it executes in stream order.
    fn cuMemFreeAsync(dptr: u64, stream: Handle) {
        let s = stream_of(stream)?;
        let a = machine().mem.device_at(dptr).ok_or(INVALID_VALUE)?;
        let queued = submit(&s, Work::Free(Arc::clone(&a)), "cuMemFreeAsync", vec![])?;
        // Queued on a stream, the free runs without the program's help; recorded in a
        // capture, it runs only if the graph is launched.
        if matches!(queued, Queued::At(..)) {
            machine().mem.release(&a);
        }
        Ok(())
    }

    /// `cuMemHostAlloc`: fresh page-locked memory, mapped for the device.
    fn cuMemHostAlloc(pp: *mut *mut c_void, bytes: usize, flags: c_uint) {
        let c = current_usable()?;
        refuse_unsafe_call()?;
        if pp.is_null() || flags & !HOST_ALLOC_FLAGS != 0 {
            return Err(INVALID_VALUE);
        }
        let p = machine().mem.alloc_host(&c, bytes, flags)?;
        // SAFETY: the caller's out-pointer, not null.
        unsafe { out(pp, p.cast()) }
    }

    /// `cuMemAllocHost_v2`: `cuMemHostAlloc` without flags.
    fn cuMemAllocHost_v2(pp: *mut *mut c_void, bytes: usize) {
        let c = current_usable()?;
        refuse_unsafe_call()?;
        if pp.is_null() {
            return Err(INVALID_VALUE);
        }
        let p = machine().mem.alloc_host(&c, bytes, 0)?;
        // SAFETY: the caller's out-pointer, not null.
        unsafe { out(pp, p.cast()) }
    }

    /// `cuMemFreeHost`: unmaps the memory (a later host access crashes); memory a
    /// queued copy still uses aborts the process.
    fn cuMemFreeHost(p: *mut c_void) {
        sim().ready()?;
        refuse_unsafe_call()?;
        let b = machine().mem.host_at(p as usize, HostKind::Allocated)?;
        b.ctx.usable()?;
        machine().inflight.assert_host_unused(b.range(), "cuMemFreeHost");
        machine().mem.free_host(&b);
        Ok(())
    }

    /// `cuMemHostRegister_v2`: page-locks the program's memory;
    /// `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED` when any of it already is.
    fn cuMemHostRegister_v2(p: *mut c_void, bytes: usize, flags: c_uint) {
        let c = current_usable()?;
        refuse_unsafe_call()?;
        if flags & !HOST_REGISTER_FLAGS != 0 {
            return Err(INVALID_VALUE);
        }
        machine().mem.register(&c, p as usize, bytes, flags)
    }

    /// `cuMemHostUnregister`: `p` must start a registered range; memory a queued copy
    /// still uses aborts the process.
    fn cuMemHostUnregister(p: *mut c_void) {
        sim().ready()?;
        refuse_unsafe_call()?;
        let b = machine().mem.host_at(p as usize, HostKind::Registered)?;
        b.ctx.usable()?;
        machine().inflight.assert_host_unused(b.range(), "cuMemHostUnregister");
        machine().mem.free_host(&b);
        Ok(())
    }

    /// `cuMemHostGetDevicePointer_v2`: the same address (unified addressing).
    fn cuMemHostGetDevicePointer_v2(dptr: *mut u64, p: *mut c_void, flags: c_uint) {
        current_usable()?;
        if flags != 0 || machine().mem.host_block(p as usize).is_none() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's out-pointer.
        unsafe { out(dptr, p as u64) }
    }

    /// `cuMemHostGetFlags`.
    fn cuMemHostGetFlags(flags: *mut c_uint, p: *mut c_void) {
        current_usable()?;
        let b = machine().mem.host_block(p as usize).ok_or(INVALID_VALUE)?;
        // SAFETY: the caller's out-pointer.
        unsafe { out(flags, b.flags) }
    }

    /// `cuMemGetAddressRange_v2`: the allocation holding `dptr`.
    fn cuMemGetAddressRange_v2(base: *mut u64, size: *mut usize, dptr: u64) {
        current_usable()?;
        let (a, _) = machine().mem.find_device(dptr).ok_or(NOT_FOUND)?;
        if !base.is_null() {
            // SAFETY: the caller's out-pointer, not null.
            unsafe { out(base, a.start)? };
        }
        if !size.is_null() {
            // SAFETY: as above.
            unsafe { out(size, a.backing.len())? };
        }
        Ok(())
    }

    /// `cuPointerGetAttribute`: `CUDA_ERROR_INVALID_VALUE` for an address the driver
    /// does not know (pageable memory among them).
    fn cuPointerGetAttribute(data: *mut c_void, attr: c_int, p: u64) {
        sim().ready()?;
        if data.is_null() || attribute_size(attr) == 0 {
            return Err(INVALID_VALUE);
        }
        let v = attribute(attr, p)?;
        // SAFETY: `data` is valid for the attribute's size (the driver's contract).
        unsafe { write_val(data, v) };
        Ok(())
    }

    /// `cuPointerGetAttributes`: never fails for an unknown address; its attributes
    /// read as zero (null) then, except the range's start and size, which are left
    /// as they were (as the driver leaves them on the H200).
    fn cuPointerGetAttributes(count: c_uint, attrs: *mut c_int, data: *mut *mut c_void, p: u64) {
        sim().ready()?;
        if count == 0 || attrs.is_null() || data.is_null() {
            return Err(INVALID_VALUE);
        }
        for i in 0..count as usize {
            // SAFETY: `attrs` and `data` hold `count` entries (the driver's contract).
            let (attr, slot) = unsafe { (*attrs.add(i), *data.add(i)) };
            let size = attribute_size(attr);
            if size == 0 || slot.is_null() {
                return Err(INVALID_VALUE);
            }
            let v = match attribute(attr, p) {
                Ok(v) => v,
                // CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE
                Err(_) if matches!(attr, 11 | 12) => continue,
                Err(_) if size == 4 => Val::U32(0),
                Err(_) => Val::U64(0),
            };
            // SAFETY: `slot` is valid for the attribute's size (the driver's contract).
            unsafe { write_val(slot, v) };
        }
        Ok(())
    }
}
