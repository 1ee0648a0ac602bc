//! What a queued operation does, and doing it: copies (1-D, 2-D, batches), memsets,
//! event records, host functions, the built-in kernel, stream-ordered frees.
//!
//! Every operation reads its source and writes its destination when it executes on
//! its stream's thread, never when it is queued (a pageable source the driver stages
//! at the call is the one exception the driver documents, and is [`Src::Staged`]).

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::inflight::{Area, Uses};
use crate::machine::machine;
use crate::memory::DeviceAlloc;
use crate::module::Kernel;

/// A host address, carried to a stream's thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostPtr(pub usize);

/// One side of a copy.
#[derive(Clone)]
pub enum Place {
    /// Device memory: an allocation and an offset in it.
    Device(Arc<DeviceAlloc>, usize),
    /// Host memory; `true` when it is page-locked.
    Host(HostPtr, bool),
}

impl Place {
    /// A short description for messages.
    pub fn describe(&self) -> String {
        match self {
            Place::Device(a, off) => format!("device {:#x}", a.start + *off as u64),
            Place::Host(p, true) => format!("page-locked host {:#x}", p.0),
            Place::Host(p, false) => format!("pageable host {:#x}", p.0),
        }
    }
}

/// Where a copy's bytes come from.
#[derive(Clone)]
pub enum Src {
    /// Read when the copy executes.
    Place(Place),
    /// Bytes the call copied out of pageable memory (packed rows for a 2-D copy).
    Staged(Arc<Vec<u8>>),
}

/// A 1-D copy.
#[derive(Clone)]
pub struct Copy1d {
    /// Destination.
    pub dst: Place,
    /// Source.
    pub src: Src,
    /// Bytes.
    pub bytes: usize,
}

/// A 2-D copy: `height` rows of `width` bytes.
#[derive(Clone)]
pub struct Copy2d {
    /// Destination's first row.
    pub dst: Place,
    /// Bytes between destination rows.
    pub dst_pitch: usize,
    /// Source's first row.
    pub src: Src,
    /// Bytes between source rows (`width` for staged rows).
    pub src_pitch: usize,
    /// Bytes per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
}

/// A queued operation's work.
#[derive(Clone)]
pub enum Work {
    /// A 1-D copy.
    Copy(Copy1d),
    /// A 2-D copy.
    Copy2d(Copy2d),
    /// A batch of 1-D copies (`cuMemcpyBatchAsync`).
    Batch(Vec<Copy1d>),
    /// `count` elements of `pattern` from `dst`.
    Memset {
        /// Where.
        dst: Place,
        /// The element (1, 2 or 4 bytes).
        pattern: Vec<u8>,
        /// How many elements.
        count: usize,
    },
    /// `cuEventRecord`: notes when it executes, in the cell the event keeps for this
    /// record (`src/event.rs`).
    Record(Arc<OnceLock<Instant>>),
    /// Nothing (a `cuStreamWaitEvent`, whose dependency is the operation's own).
    Nothing,
    /// `cuLaunchHostFunc`: the function and its argument.
    HostFunc(usize, usize),
    /// A launch of a kernel the simulator knows.
    Kernel(Kernel),
    /// `cuMemFreeAsync`.
    Free(Arc<DeviceAlloc>),
}

/// How fast device-local operations (device-to-device copies, memsets) are taken to
/// run, in bytes per microsecond (100 GB/s): the simulator does not measure speed,
/// but work the tests queue to keep a stream busy for a while must take a while.
const DEVICE_BYTES_PER_US: u64 = 100_000;

impl Work {
    /// The call's name for an operation of this kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Work::Copy(_) => "copy",
            Work::Copy2d(_) => "2-D copy",
            Work::Batch(_) => "batch of copies",
            Work::Memset { .. } => "memset",
            Work::Record(_) => "event record",
            Work::Nothing => "wait",
            Work::HostFunc(..) => "host function",
            Work::Kernel(_) => "kernel",
            Work::Free(_) => "free",
        }
    }

    /// The memory this work will touch, for the race checks.
    pub fn uses(&self) -> Uses {
        let mut u = Uses::default();
        let mut add = |place: &Place, area: Area, write: bool| match place {
            Place::Device(a, off) => {
                let start = a.start + *off as u64;
                u.device.push(start..start + area.span().len() as u64);
            }
            Place::Host(_, true) => u.host.push((area, write)),
            Place::Host(_, false) => {}
        };
        let host_start = |p: &Place| match p {
            Place::Host(h, _) => h.0,
            Place::Device(..) => 0,
        };
        match self {
            Work::Copy(c) => add_copy(&mut add, c, &host_start),
            Work::Batch(cs) => cs.iter().for_each(|c| add_copy(&mut add, c, &host_start)),
            Work::Copy2d(c) => {
                let rows = |p: &Place, pitch| Area {
                    start: host_start(p),
                    width: c.width,
                    pitch,
                    rows: c.height,
                };
                add(&c.dst, rows(&c.dst, c.dst_pitch), true);
                if let Src::Place(p) = &c.src {
                    add(p, rows(p, c.src_pitch), false);
                }
            }
            Work::Memset {
                dst,
                pattern,
                count,
            } => add(
                dst,
                Area::linear(host_start(dst), pattern.len() * count),
                true,
            ),
            // A stream-ordered free checks, when it executes, that nothing else queued
            // still uses the memory; it is no use of its own.
            Work::Free(_)
            | Work::Record(_)
            | Work::Nothing
            | Work::HostFunc(..)
            | Work::Kernel(_) => {}
        }
        u
    }

    /// Does the work on the calling (stream) thread; `Err` is a fault's sticky code.
    pub fn execute(&self) -> Result<(), u32> {
        match self {
            Work::Copy(c) => {
                let t = Instant::now();
                copy(&c.dst, &c.src, 0, 0, c.bytes);
                pace_device(t, c);
            }
            Work::Batch(cs) => cs.iter().for_each(|c| copy(&c.dst, &c.src, 0, 0, c.bytes)),
            Work::Copy2d(c) => {
                for r in 0..c.height {
                    copy(&c.dst, &c.src, r * c.dst_pitch, r * c.src_pitch, c.width);
                }
            }
            Work::Memset {
                dst,
                pattern,
                count,
            } => {
                let t = Instant::now();
                memset(dst, pattern, *count);
                pace(t, (pattern.len() * count) as u64);
            }
            Work::Record(at) => {
                let _ = at.set(Instant::now());
            }
            Work::Nothing => {}
            Work::HostFunc(f, data) => {
                // SAFETY: `f` is the `CUhostFn` the program passed to
                // cuLaunchHostFunc, called with its argument as the driver does.
                let f: extern "C" fn(*mut std::ffi::c_void) = unsafe { std::mem::transmute(*f) };
                f(*data as *mut std::ffi::c_void);
            }
            Work::Kernel(k) => return k.run(),
            Work::Free(a) => {
                machine().inflight.assert_device_unused(
                    a.range(),
                    "cuMemFreeAsync (in stream order)",
                    None,
                );
                let _ = machine().mem.free_device(a.start);
            }
        }
        Ok(())
    }
}

fn add_copy(
    add: &mut impl FnMut(&Place, Area, bool),
    c: &Copy1d,
    start: &impl Fn(&Place) -> usize,
) {
    add(&c.dst, Area::linear(start(&c.dst), c.bytes), true);
    if let Src::Place(p) = &c.src {
        add(p, Area::linear(start(p), c.bytes), false);
    }
}

/// Sleeps out the rest of the time a device-local copy of `c` is taken to run.
fn pace_device(t: Instant, c: &Copy1d) {
    if matches!(
        (&c.dst, &c.src),
        (Place::Device(..), Src::Place(Place::Device(..)))
    ) {
        pace(t, c.bytes as u64);
    }
}

fn pace(t: Instant, bytes: u64) {
    let model = Duration::from_micros(bytes / DEVICE_BYTES_PER_US);
    if let Some(rest) = model.checked_sub(t.elapsed()) {
        std::thread::sleep(rest);
    }
}

/// Copies `bytes` from `src + src_off` to `dst + dst_off`.
fn copy(dst: &Place, src: &Src, dst_off: usize, src_off: usize, bytes: usize) {
    match (dst, src) {
        (Place::Device(d, doff), Src::Place(Place::Device(s, soff))) => {
            d.backing
                .copy_from(doff + dst_off, &s.backing, soff + src_off, bytes)
        }
        (Place::Device(d, doff), Src::Place(Place::Host(p, _))) => {
            // SAFETY: the queuing call checked the device range; the host range is
            // the program's, valid until the copy completes (the driver's contract,
            // and the memory tables refuse to free page-locked memory before).
            unsafe {
                d.backing
                    .write(doff + dst_off, (p.0 + src_off) as *const u8, bytes)
            }
        }
        (Place::Device(d, doff), Src::Staged(v)) => {
            // SAFETY: the staged bytes hold the whole copy.
            unsafe {
                d.backing
                    .write(doff + dst_off, v[src_off..].as_ptr(), bytes)
            }
        }
        (Place::Host(p, _), Src::Place(Place::Device(s, soff))) => {
            // SAFETY: as above, for the destination.
            unsafe {
                s.backing
                    .read(soff + src_off, (p.0 + dst_off) as *mut u8, bytes)
            }
        }
        (Place::Host(p, _), Src::Place(Place::Host(q, _))) => {
            // SAFETY: as above, for both host ranges.
            unsafe {
                std::ptr::copy(
                    (q.0 + src_off) as *const u8,
                    (p.0 + dst_off) as *mut u8,
                    bytes,
                )
            }
        }
        (Place::Host(p, _), Src::Staged(v)) => {
            // SAFETY: as above; the staged bytes hold the whole copy.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    v[src_off..].as_ptr(),
                    (p.0 + dst_off) as *mut u8,
                    bytes,
                )
            }
        }
    }
}

fn memset(dst: &Place, pattern: &[u8], count: usize) {
    match dst {
        Place::Device(a, off) => a.backing.fill(*off, count, pattern),
        Place::Host(p, _) => {
            for i in 0..count * pattern.len() {
                // SAFETY: the queuing call took the destination as memory of
                // `count` elements that the program keeps valid until it completes.
                unsafe { *((p.0 + i) as *mut u8) = pattern[i % pattern.len()] };
            }
        }
    }
}
