//! Device allocations and page-locked host memory (allocated or registered): the
//! tables that say what an address is, and the checks that ranges stay inside one
//! allocation.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use crate::backing::Backing;
use crate::context::Context;
use crate::errors::{
    Res, HOST_MEMORY_ALREADY_REGISTERED, HOST_MEMORY_NOT_REGISTERED, INVALID_VALUE, OUT_OF_MEMORY,
};

/// One device allocation.
pub struct DeviceAlloc {
    /// Its first address.
    pub start: u64,
    /// Its bytes.
    pub backing: Backing,
    /// The context it was allocated in.
    pub ctx: Arc<Context>,
    /// Made by `cuMemAllocAsync`.
    pub stream_ordered: bool,
    /// Freed, or its stream-ordered free queued: no longer the program's to free.
    released: AtomicBool,
}

impl DeviceAlloc {
    /// Its address range.
    pub fn range(&self) -> Range<u64> {
        self.start..self.start + self.backing.len() as u64
    }
}

/// How host memory became page-locked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostKind {
    /// `cuMemHostAlloc` / `cuMemAllocHost`: the simulator mapped it.
    Allocated,
    /// `cuMemHostRegister`: the program's own memory.
    Registered,
}

/// One block of page-locked host memory.
pub struct HostBlock {
    /// Its first address.
    pub start: usize,
    /// Its length in bytes (as asked for).
    pub len: usize,
    /// Allocated or registered.
    pub kind: HostKind,
    /// The flags it was made with.
    pub flags: u32,
    /// The context current when it was made.
    pub ctx: Arc<Context>,
    /// For allocated blocks, the length of the mapping (whole pages).
    map_len: usize,
}

impl HostBlock {
    /// Its address range.
    pub fn range(&self) -> Range<usize> {
        self.start..self.start + self.len
    }
}

/// How many allocations of each kind the program holds: made, and neither freed nor
/// handed to a queued stream-ordered free. Each count goes up under its table's lock,
/// and is read without it (the leak report, at exit, while stream threads may still
/// run).
#[derive(Default)]
pub struct Held {
    /// `cuMemAlloc`, `cuMemAllocPitch`.
    pub device: AtomicUsize,
    /// `cuMemAllocAsync`.
    pub stream_ordered: AtomicUsize,
    /// `cuMemHostAlloc`, `cuMemAllocHost`.
    pub host: AtomicUsize,
    /// `cuMemHostRegister`.
    pub registered: AtomicUsize,
}

/// The two tables.
#[derive(Default)]
pub struct Memory {
    device: RwLock<BTreeMap<u64, Arc<DeviceAlloc>>>,
    host: RwLock<BTreeMap<usize, Arc<HostBlock>>>,
    host_allocated: AtomicU64,
    /// What the program holds, by kind.
    pub held: Held,
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

/// What an address is.
pub enum Kind {
    /// Inside a device allocation.
    Device(Arc<DeviceAlloc>),
    /// Inside a block of page-locked host memory.
    PageLocked(Arc<HostBlock>),
    /// Anything else: pageable host memory, or nothing at all.
    Other,
}

/// What every byte of a fresh device allocation reads as. The driver promises no
/// contents (a recycled allocation holds whatever its last owner left), so a program
/// that reads memory it never wrote must not find the zeros it might hope for.
const FRESH_DEVICE_BYTE: u8 = 0xA5;

impl Memory {
    /// `cuMemAlloc` in `ctx` (`cuMemAllocAsync` when `stream_ordered`): a fresh
    /// address in the device's reserved range.
    pub fn alloc_device(&self, ctx: &Arc<Context>, bytes: usize, stream_ordered: bool) -> Res<u64> {
        if bytes == 0 {
            return Err(INVALID_VALUE);
        }
        let dev = ctx.dev;
        dev.charge(bytes)?;
        let Some(start) = crate::table::lock(&dev.vas).take(bytes as u64) else {
            dev.refund(bytes);
            return Err(OUT_OF_MEMORY);
        };
        let alloc = DeviceAlloc {
            start,
            backing: Backing::new(bytes, FRESH_DEVICE_BYTE),
            ctx: Arc::clone(ctx),
            stream_ordered,
            released: AtomicBool::new(false),
        };
        let mut t = write(&self.device);
        t.insert(start, Arc::new(alloc));
        self.held_device(stream_ordered)
            .fetch_add(1, Ordering::Relaxed);
        Ok(start)
    }

    /// The allocation `addr` points into, and the offset there.
    pub fn find_device(&self, addr: u64) -> Option<(Arc<DeviceAlloc>, usize)> {
        let t = read(&self.device);
        let (_, a) = t.range(..=addr).next_back()?;
        a.range()
            .contains(&addr)
            .then(|| (Arc::clone(a), (addr - a.start) as usize))
    }

    /// `[addr, addr + len)` as a range of one device allocation, or
    /// `CUDA_ERROR_INVALID_VALUE` (freed, never allocated, or running past its end).
    pub fn device_range(&self, addr: u64, len: usize) -> Res<(Arc<DeviceAlloc>, usize)> {
        let (a, off) = self.find_device(addr).ok_or(INVALID_VALUE)?;
        match off.checked_add(len) {
            Some(end) if end <= a.backing.len() => Ok((a, off)),
            _ => Err(INVALID_VALUE),
        }
    }

    /// Takes the allocation that starts at `addr` out of the table (the caller has
    /// checked that nothing queued still uses it) and gives its memory back.
    pub fn free_device(&self, addr: u64) -> Res<Arc<DeviceAlloc>> {
        let a = write(&self.device).remove(&addr).ok_or(INVALID_VALUE)?;
        self.release(&a);
        let dev = a.ctx.dev;
        dev.refund(a.backing.len());
        crate::table::lock(&dev.vas).give_back(a.start);
        Ok(a)
    }

    /// Counts `a` as no longer held by the program (once): it was freed, or its
    /// stream-ordered free is queued and will run without the program's help.
    pub fn release(&self, a: &DeviceAlloc) {
        if !a.released.swap(true, Ordering::AcqRel) {
            self.held_device(a.stream_ordered)
                .fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn held_device(&self, stream_ordered: bool) -> &AtomicUsize {
        if stream_ordered {
            &self.held.stream_ordered
        } else {
            &self.held.device
        }
    }

    /// The allocation that starts at `addr`, if one does.
    pub fn device_at(&self, addr: u64) -> Option<Arc<DeviceAlloc>> {
        read(&self.device).get(&addr).cloned()
    }

    /// Every device allocation of `ctx`.
    pub fn device_allocs_of(&self, ctx: &Arc<Context>) -> Vec<Arc<DeviceAlloc>> {
        read(&self.device)
            .values()
            .filter(|a| Arc::ptr_eq(&a.ctx, ctx))
            .cloned()
            .collect()
    }

    /// `cuMemHostAlloc`: fresh page-locked memory, mapped by the simulator.
    pub fn alloc_host(&self, ctx: &Arc<Context>, bytes: usize, flags: u32) -> Res<*mut u8> {
        if bytes == 0 {
            return Err(INVALID_VALUE);
        }
        let map_len = bytes.checked_next_multiple_of(4096).ok_or(OUT_OF_MEMORY)?;
        // SAFETY: a fresh anonymous private mapping at an address the kernel chooses.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(OUT_OF_MEMORY);
        }
        let block = HostBlock {
            start: p as usize,
            len: bytes,
            kind: HostKind::Allocated,
            flags,
            ctx: Arc::clone(ctx),
            map_len,
        };
        let mut t = write(&self.host);
        t.insert(p as usize, Arc::new(block));
        self.held.host.fetch_add(1, Ordering::Relaxed);
        drop(t);
        self.host_allocated
            .fetch_add(map_len as u64, Ordering::Relaxed);
        Ok(p.cast())
    }

    /// `cuMemHostRegister`: `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED` when any
    /// byte of the range is registered already, `CUDA_ERROR_INVALID_VALUE` when it
    /// is `cuMemHostAlloc` memory (as the driver answers on the H200).
    pub fn register(&self, ctx: &Arc<Context>, start: usize, len: usize, flags: u32) -> Res<()> {
        if len == 0 || start == 0 {
            return Err(INVALID_VALUE);
        }
        let end = start.checked_add(len).ok_or(INVALID_VALUE)?;
        let mut t = write(&self.host);
        let overlapped = t
            .range(..end)
            .next_back()
            .filter(|(_, b)| b.range().end > start)
            .map(|(_, b)| b.kind);
        match overlapped {
            Some(HostKind::Registered) => return Err(HOST_MEMORY_ALREADY_REGISTERED),
            Some(HostKind::Allocated) => return Err(INVALID_VALUE),
            None => {}
        }
        let block = HostBlock {
            start,
            len,
            kind: HostKind::Registered,
            flags,
            ctx: Arc::clone(ctx),
            map_len: 0,
        };
        t.insert(start, Arc::new(block));
        self.held.registered.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The block of `kind` that starts at `start`.
    pub fn host_at(&self, start: usize, kind: HostKind) -> Res<Arc<HostBlock>> {
        let err = match kind {
            HostKind::Allocated => INVALID_VALUE,
            HostKind::Registered => HOST_MEMORY_NOT_REGISTERED,
        };
        read(&self.host)
            .get(&start)
            .filter(|b| b.kind == kind)
            .cloned()
            .ok_or(err)
    }

    /// Takes `block` out of the table (the caller has checked that nothing queued
    /// still uses it); allocated memory is unmapped, so a later host access crashes.
    /// Nothing happens when `block` is no longer in the table (another thread freed
    /// it first, and the address may hold a new block by now).
    pub fn free_host(&self, block: &HostBlock) {
        {
            let mut t = write(&self.host);
            let mine = t
                .get(&block.start)
                .is_some_and(|b| std::ptr::eq(Arc::as_ptr(b), block));
            if !mine {
                return;
            }
            t.remove(&block.start);
        }
        let held = match block.kind {
            HostKind::Allocated => &self.held.host,
            HostKind::Registered => &self.held.registered,
        };
        held.fetch_sub(1, Ordering::Relaxed);
        if block.kind == HostKind::Allocated {
            // SAFETY: the block's mapping was made by `alloc_host` with this start and
            // length, and it is no longer in the table: nothing hands it out again.
            unsafe { libc::munmap(block.start as *mut libc::c_void, block.map_len) };
            self.host_allocated
                .fetch_sub(block.map_len as u64, Ordering::Relaxed);
        }
    }

    /// The page-locked block holding `addr`.
    pub fn host_block(&self, addr: usize) -> Option<Arc<HostBlock>> {
        let t = read(&self.host);
        let (_, b) = t.range(..=addr).next_back()?;
        b.range().contains(&addr).then(|| Arc::clone(b))
    }

    /// Every page-locked block made in `ctx`.
    pub fn host_blocks_of(&self, ctx: &Arc<Context>) -> Vec<Arc<HostBlock>> {
        read(&self.host)
            .values()
            .filter(|b| Arc::ptr_eq(&b.ctx, ctx))
            .cloned()
            .collect()
    }

    /// What `addr` is.
    pub fn kind(&self, addr: u64) -> Kind {
        if let Some((a, _)) = self.find_device(addr) {
            return Kind::Device(a);
        }
        match usize::try_from(addr).ok().and_then(|a| self.host_block(a)) {
            Some(b) => Kind::PageLocked(b),
            None => Kind::Other,
        }
    }
}
