//! The memory that queued operations will use, from the call that queues them until
//! they execute, and the race checks built on it:
//!
//! - a page-locked host range a queued copy will **read** is checksummed when the
//!   copy is queued and checked again just before it executes: a mismatch means the
//!   host changed the bytes while the copy was in flight, and aborts the process with
//!   the call, the stream and the range;
//! - a page-locked host range a queued copy will **write** is filled with
//!   [`POISON_BYTE`] when the copy is queued (`CUDA_SIM_POISON`, on by default), so a
//!   program that reads it before the copy has executed reads poison, not the
//!   previous contents or the right answer by luck;
//! - freeing or unregistering host memory, or freeing device memory, that a queued
//!   operation still uses aborts the process, naming both.
//!
//! A queued write and a queued read of the same host bytes are ordered by the
//! program's streams (a download into a slot, then an upload out of it), so the two
//! checks give way to each other: a write that overlaps a pending read is poisoned
//! only once that read has executed, and a read that overlaps a pending write is
//! checksummed only once that write has executed.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::config::POISON_BYTE;
use crate::table::lock;

/// Host bytes a copy touches: `rows` rows of `width` bytes, `pitch` apart, from
/// `start` (a 1-D copy is one row).
#[derive(Clone, Copy, Debug)]
pub struct Area {
    /// First byte.
    pub start: usize,
    /// Bytes per row.
    pub width: usize,
    /// Bytes from one row's start to the next.
    pub pitch: usize,
    /// How many rows.
    pub rows: usize,
}

impl Area {
    /// One row of `len` bytes.
    pub fn linear(start: usize, len: usize) -> Area {
        Area {
            start,
            width: len,
            pitch: len,
            rows: 1,
        }
    }

    /// The smallest range covering every row.
    pub fn span(&self) -> Range<usize> {
        if self.rows == 0 || self.width == 0 {
            return self.start..self.start;
        }
        self.start..self.start + (self.rows - 1) * self.pitch + self.width
    }

    fn overlaps(&self, r: &Range<usize>) -> bool {
        let s = self.span();
        s.start < r.end && r.start < s.end
    }

    /// A checksum of the area's bytes.
    ///
    /// # Safety
    /// 1. Every row is readable host memory.
    unsafe fn checksum(&self) -> u64 {
        let mut h: u64 = 0x243F_6A88_85A3_08D3;
        for r in 0..self.rows {
            // SAFETY: condition 1: the row is readable for `width` bytes. Another
            // thread may write it meanwhile: that is the race this looks for, and
            // the bytes are plain `u8`.
            let row = unsafe {
                std::slice::from_raw_parts((self.start + r * self.pitch) as *const u8, self.width)
            };
            let mut words = row.chunks_exact(8);
            for w in &mut words {
                let v = u64::from_le_bytes(w.try_into().expect("8 bytes"));
                h = (h ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
            }
            for &b in words.remainder() {
                h = (h ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            }
            h = h.rotate_left(7) ^ r as u64;
        }
        h
    }

    /// Fills every row with poison.
    ///
    /// # Safety
    /// 1. Every row is writable host memory that nothing may read until the copy that
    ///    writes it has executed.
    unsafe fn poison(&self) {
        for r in 0..self.rows {
            // SAFETY: condition 1.
            unsafe {
                std::ptr::write_bytes(
                    (self.start + r * self.pitch) as *mut u8,
                    POISON_BYTE,
                    self.width,
                )
            };
        }
    }
}

/// How a queued operation uses page-locked host memory.
#[derive(Debug)]
struct HostUse {
    area: Area,
    write: bool,
    /// For a read: the checksum taken (None while a pending write overlaps).
    checksum: Option<u64>,
    /// For a write: whether the poison is in (false while a pending read overlaps).
    poisoned: bool,
}

/// One queued operation's uses.
struct Entry {
    id: u64,
    what: String,
    host: Vec<HostUse>,
    device: Vec<Range<u64>>,
}

/// The record of queued operations' memory.
#[derive(Default)]
pub struct Inflight {
    next: AtomicU64,
    entries: Mutex<Vec<Entry>>,
}

/// What an operation about to be queued will use.
#[derive(Default)]
pub struct Uses {
    /// Page-locked host areas, each with `true` where the operation writes it.
    pub host: Vec<(Area, bool)>,
    /// Device address ranges.
    pub device: Vec<Range<u64>>,
}

fn abort(msg: &str) -> ! {
    eprintln!("cuda-sim: {msg}");
    eprintln!(
        "cuda-sim: aborting (this is a bug in the program under test, found by the simulator)"
    );
    std::process::abort()
}

impl Inflight {
    /// Enters an operation described by `what` (its call and stream) that will use
    /// `uses`: checksums what it reads, poisons what it writes (when `poison`).
    ///
    /// # Safety
    /// 1. Every host area is page-locked memory that stays valid until [`Inflight::done`]
    ///    (the memory tables refuse to free it before).
    pub unsafe fn register(&self, what: String, uses: Uses, poison: bool) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut entries = lock(&self.entries);
        let mut host = Vec::with_capacity(uses.host.len());
        for (area, write) in uses.host {
            let span = area.span();
            let conflict = entries
                .iter()
                .flat_map(|e| &e.host)
                .any(|u| u.write != write && u.area.overlaps(&span));
            let mut u = HostUse {
                area,
                write,
                checksum: None,
                poisoned: false,
            };
            if !conflict {
                if write {
                    if poison {
                        // SAFETY: condition 1; no pending read overlaps it.
                        unsafe { area.poison() };
                    }
                    u.poisoned = true;
                } else {
                    // SAFETY: condition 1.
                    u.checksum = Some(unsafe { area.checksum() });
                }
            }
            host.push(u);
        }
        entries.push(Entry {
            id,
            what,
            host,
            device: uses.device,
        });
        id
    }

    /// Just before operation `id` executes: aborts if a host area it reads changed
    /// since it was checksummed.
    pub fn check(&self, id: u64) {
        let entries = lock(&self.entries);
        let Some(e) = entries.iter().find(|e| e.id == id) else {
            return;
        };
        for u in e.host.iter().filter(|u| !u.write) {
            let Some(sum) = u.checksum else { continue };
            // SAFETY: `register`'s condition 1: the area is still valid page-locked
            // memory, since the operation has not executed yet.
            if unsafe { u.area.checksum() } != sum {
                let s = u.area.span();
                abort(&format!(
                    "RACE: the page-locked source of {} changed after the call queued it and \
                     before the copy executed: host bytes {:#x}..{:#x} ({} bytes{})",
                    e.what,
                    s.start,
                    s.end,
                    s.len(),
                    rows(&u.area),
                ));
            }
        }
    }

    /// Operation `id` has executed: forgets it, and takes the checksums and lays the
    /// poison that waited for it.
    pub fn done(&self, id: u64, poison: bool) {
        let mut entries = lock(&self.entries);
        let Some(at) = entries.iter().position(|e| e.id == id) else {
            return;
        };
        entries.swap_remove(at);
        // Poison and checksums that waited for this operation, when nothing else
        // pending conflicts any more.
        for i in 0..entries.len() {
            for j in 0..entries[i].host.len() {
                let u = &entries[i].host[j];
                let pending = if u.write {
                    !u.poisoned
                } else {
                    u.checksum.is_none()
                };
                if !pending {
                    continue;
                }
                let (area, write) = (u.area, u.write);
                let span = area.span();
                let conflict = entries
                    .iter()
                    .flat_map(|e| &e.host)
                    .any(|o| o.write != write && o.area.overlaps(&span));
                if conflict {
                    continue;
                }
                let u = &mut entries[i].host[j];
                if write {
                    if poison {
                        // SAFETY: `register`'s condition 1; the reads that overlapped
                        // it have executed.
                        unsafe { area.poison() };
                    }
                    u.poisoned = true;
                } else {
                    // SAFETY: `register`'s condition 1.
                    u.checksum = Some(unsafe { area.checksum() });
                }
            }
        }
    }

    /// Aborts if a queued operation still uses host bytes in `range`, which `call` is
    /// about to free or unregister.
    pub fn assert_host_unused(&self, range: Range<usize>, call: &str) {
        let entries = lock(&self.entries);
        if let Some((e, u)) = entries.iter().find_map(|e| {
            e.host
                .iter()
                .find(|u| u.area.overlaps(&range))
                .map(|u| (e, u))
        }) {
            let s = u.area.span();
            abort(&format!(
                "USE AFTER FREE: {call} of host memory {:#x}..{:#x} while {} still {} \
                 {:#x}..{:#x} (queued, not yet executed)",
                range.start,
                range.end,
                e.what,
                if u.write { "writes" } else { "reads" },
                s.start,
                s.end
            ));
        }
    }

    /// Aborts if a queued operation other than `except` still uses device addresses in
    /// `range`, which `call` is about to free.
    pub fn assert_device_unused(&self, range: Range<u64>, call: &str, except: Option<u64>) {
        let entries = lock(&self.entries);
        if let Some((e, r)) = entries
            .iter()
            .filter(|e| Some(e.id) != except)
            .find_map(|e| {
                e.device
                    .iter()
                    .find(|r| r.start < range.end && range.start < r.end)
                    .map(|r| (e, r))
            })
        {
            abort(&format!(
                "USE AFTER FREE: {call} of device memory {:#x}..{:#x} while {} still uses \
                 {:#x}..{:#x} (queued, not yet executed)",
                range.start, range.end, e.what, r.start, r.end
            ));
        }
    }
}

fn rows(a: &Area) -> String {
    if a.rows > 1 {
        format!(", {} rows of {} bytes, {} apart", a.rows, a.width, a.pitch)
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_behind_a_pending_read_is_poisoned_once_the_read_has_run() {
        let mut buf = vec![7u8; 64];
        let start = buf.as_mut_ptr() as usize;
        let f = Inflight::default();
        let uses = |write| Uses {
            host: vec![(Area::linear(start, 64), write)],
            device: vec![],
        };
        // SAFETY: `buf` outlives every entry.
        let read = unsafe { f.register("read".into(), uses(false), true) };
        // SAFETY: as above.
        let write = unsafe { f.register("write".into(), uses(true), true) };
        assert!(
            buf.iter().all(|&b| b == 7),
            "the pending read's bytes are kept"
        );
        f.check(read);
        f.done(read, true);
        assert!(
            buf.iter().all(|&b| b == POISON_BYTE),
            "poisoned once the read ran"
        );
        // A read queued behind the write is checksummed only after it.
        // SAFETY: as above.
        let again = unsafe { f.register("read again".into(), uses(false), true) };
        buf.fill(9); // what the write's copy puts there
        f.done(write, true);
        f.check(again);
        f.done(again, true);
    }
}
