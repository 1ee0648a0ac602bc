//! Several copies between the device and one page-locked region, queued as one batch:
//! [`Stream::memcpy_dtoh_batch`] and [`Stream::memcpy_htod_batch`].

use bytemuck::Pod;
use cuda_sys::CUdeviceptr;

use crate::device_view::{DeviceView, DeviceViewMut};
use crate::error::{Error, Result};
use crate::memory::{DeviceSlice, HostAccess, PageLockedSlice, PageLockedSliceMut};
use crate::result;
use crate::stream::{host_uses, Stream};
use crate::tracking::{Access, Tracker, Use};

/// The most copies one batch takes.
pub const MAX_BATCH: usize = 16;

/// Trackers one batch locks at most: the host side's two and one per device region.
const MAX_USES: usize = MAX_BATCH + 2;

impl Stream {
    /// Whether this driver queues batches with one `cuMemcpyBatchAsync` call (CUDA
    /// 12.8 and later); otherwise the batch copies are queued one by one.
    pub fn has_batch_copies(&self) -> bool {
        result::has_memcpy_batch()
    }

    /// Queues copies of each `srcs[i]` into `dst` from element `offsets[i]` on, as
    /// one batch (`cuMemcpyBatchAsync` with every source read in stream order where
    /// the driver has it, one queued copy per region otherwise), and returns. Reading
    /// `dst` waits for all of them.
    ///
    /// Errors, before any driver call: [`Error::InvalidArgument`] for more than
    /// [`MAX_BATCH`] regions, `offsets` of another length than `srcs`, or regions of
    /// `dst` that overlap; [`Error::OutOfRange`] for a region past the end of `dst`;
    /// [`Error::ContextMismatch`] for a source from another context.
    pub fn memcpy_dtoh_batch<T: Pod>(
        &self,
        srcs: &[DeviceView<'_, T>],
        offsets: &[usize],
        dst: &mut impl PageLockedSliceMut<T>,
    ) -> Result<()> {
        let op = "memcpy_dtoh_batch";
        let lens: [usize; MAX_BATCH] = lens_of(op, srcs.iter().map(|s| s.len()), offsets.len())?;
        check_regions(op, &lens[..srcs.len()], offsets, dst.len())?;
        for s in srcs {
            self.check_device(op, &s.device_access(), "a source device region")?;
        }
        let h = dst.host_access();
        let mut uses = self.lock_batch(
            &h,
            Access::Write,
            srcs.iter().map(|s| s.device_access().tracker),
            Access::Read,
        );
        let elem = std::mem::size_of::<T>();
        let mut copies = Copies::default();
        for (s, (&len, &off)) in srcs.iter().zip(lens.iter().zip(offsets)) {
            // `offsets[i] + len <= dst.len()` (checked), inside the host region.
            copies.push(
                h.ptr.wrapping_add(off * elem) as CUdeviceptr,
                s.device_access().ptr,
                len * elem,
            );
        }
        self.queue_batch(op, &mut uses, &mut copies, Direction::DeviceToHost)
    }

    /// Queues copies of `src` from element `offsets[i]` on into each `dsts[i]` (its
    /// whole length), as one batch, and returns. Errors as
    /// [`Stream::memcpy_dtoh_batch`], with the regions taken from `src`.
    pub fn memcpy_htod_batch<T: Pod>(
        &self,
        src: &impl PageLockedSlice<T>,
        offsets: &[usize],
        dsts: &mut [DeviceViewMut<'_, T>],
    ) -> Result<()> {
        let op = "memcpy_htod_batch";
        let lens: [usize; MAX_BATCH] = lens_of(op, dsts.iter().map(|d| d.len()), offsets.len())?;
        check_regions(op, &lens[..dsts.len()], offsets, src.len())?;
        for d in dsts.iter() {
            self.check_device(op, &d.device_access(), "a destination device region")?;
        }
        let h = src.host_access();
        let mut uses = self.lock_batch(
            &h,
            Access::Read,
            dsts.iter().map(|d| d.device_access().tracker),
            Access::Write,
        );
        let elem = std::mem::size_of::<T>();
        let mut copies = Copies::default();
        for (d, (&len, &off)) in dsts.iter().zip(lens.iter().zip(offsets)) {
            copies.push(
                d.device_access().ptr,
                h.ptr.wrapping_add(off * elem) as CUdeviceptr,
                len * elem,
            );
        }
        self.queue_batch(op, &mut uses, &mut copies, Direction::HostToDevice)
    }

    /// Locks the host side's trackers and each distinct device tracker (two views of
    /// one buffer share one; locking it twice would deadlock).
    fn lock_batch<'a>(
        &self,
        h: &HostAccess<'a>,
        host: Access,
        devices: impl Iterator<Item = &'a Tracker>,
        device: Access,
    ) -> [Option<Use<'a>>; MAX_USES] {
        let mut uses: [Option<Use<'a>>; MAX_USES] = std::array::from_fn(|_| None);
        let [root, region, ..] = host_uses(h, host);
        uses[0] = root;
        uses[1] = region;
        let mut seen: [*const Tracker; MAX_BATCH] = [std::ptr::null(); MAX_BATCH];
        let mut n = 0;
        for t in devices {
            if seen[..n].contains(&(t as *const Tracker)) {
                continue;
            }
            seen[n] = t;
            uses[2 + n] = Some(Use::lock(t, device));
            n += 1;
        }
        uses
    }

    /// Queues the batch: one `cuMemcpyBatchAsync`, or one copy after another. Should
    /// one of those fail, the ones before it are queued: [`crate::tracking::queue`]
    /// tracks a failed operation as if all of it were.
    fn queue_batch(
        &self,
        op: &'static str,
        uses: &mut [Option<Use<'_>>],
        copies: &mut Copies,
        direction: Direction,
    ) -> Result<()> {
        if copies.n == 0 {
            return Ok(());
        }
        let raw = self.as_raw();
        self.queue(op, uses, || {
            let n = copies.n;
            if result::has_memcpy_batch() {
                // SAFETY: every destination and source lies inside the tracked,
                // borrowed regions checked above (sizes in bytes); host regions do
                // not overlap each other (checked) and device regions belong to
                // distinct views or are only read; stream live, context current.
                return unsafe {
                    result::memcpy_batch_async(
                        &mut copies.dsts[..n],
                        &mut copies.srcs[..n],
                        &mut copies.sizes[..n],
                        raw,
                    )
                };
            }
            for i in 0..n {
                let (dst, src, bytes) = (copies.dsts[i], copies.srcs[i], copies.sizes[i]);
                // SAFETY: as above, one region at a time.
                unsafe {
                    match direction {
                        Direction::DeviceToHost => {
                            result::memcpy_dtoh_async(dst as *mut _, src, bytes, raw)
                        }
                        Direction::HostToDevice => {
                            result::memcpy_htod_async(dst, src as *const _, bytes, raw)
                        }
                    }
                }?;
            }
            Ok(())
        })
    }
}

#[derive(Clone, Copy)]
enum Direction {
    DeviceToHost,
    HostToDevice,
}

/// The address arrays of one batch (no allocation).
#[derive(Default)]
struct Copies {
    dsts: [CUdeviceptr; MAX_BATCH],
    srcs: [CUdeviceptr; MAX_BATCH],
    sizes: [usize; MAX_BATCH],
    n: usize,
}

impl Copies {
    fn push(&mut self, dst: CUdeviceptr, src: CUdeviceptr, bytes: usize) {
        if bytes == 0 {
            return;
        }
        self.dsts[self.n] = dst;
        self.srcs[self.n] = src;
        self.sizes[self.n] = bytes;
        self.n += 1;
    }
}

/// The regions' lengths in a fixed array, or an error for too many regions or a
/// mismatched `offsets`.
fn lens_of(
    op: &'static str,
    lens: impl ExactSizeIterator<Item = usize>,
    offsets: usize,
) -> Result<[usize; MAX_BATCH]> {
    let n = lens.len();
    if n > MAX_BATCH {
        return Err(Error::InvalidArgument {
            op,
            reason: format!("{n} regions; a batch takes at most {MAX_BATCH}"),
        });
    }
    if offsets != n {
        return Err(Error::InvalidArgument {
            op,
            reason: format!("{offsets} offsets for {n} regions"),
        });
    }
    let mut out = [0; MAX_BATCH];
    for (o, l) in out.iter_mut().zip(lens) {
        *o = l;
    }
    Ok(out)
}

/// Every `offsets[i]..offsets[i] + lens[i]` fits `host_len` elements and none
/// overlaps another (empty regions overlap nothing).
pub(crate) fn check_regions(
    op: &'static str,
    lens: &[usize],
    offsets: &[usize],
    host_len: usize,
) -> Result<()> {
    for (i, (&len, &off)) in lens.iter().zip(offsets).enumerate() {
        let end = off
            .checked_add(len)
            .filter(|&e| e <= host_len)
            .ok_or(Error::OutOfRange {
                op,
                start: off,
                end: off.saturating_add(len),
                len: host_len,
            })?;
        for (j, (&len2, &off2)) in lens.iter().zip(offsets).enumerate().take(i) {
            let end2 = off2 + len2;
            if len > 0 && len2 > 0 && off < end2 && off2 < end {
                return Err(Error::InvalidArgument {
                    op,
                    reason: format!(
                        "region {i} ({off}..{end}) overlaps region {j} ({off2}..{end2})"
                    ),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_must_fit_and_not_overlap() {
        check_regions("x", &[4, 4, 0], &[0, 4, 2], 8).unwrap();
        assert_eq!(
            check_regions("x", &[4, 5], &[0, 4], 8).unwrap_err(),
            Error::OutOfRange {
                op: "x",
                start: 4,
                end: 9,
                len: 8
            }
        );
        let e = check_regions("x", &[4, 4], &[0, 3], 16).unwrap_err();
        assert!(
            e.to_string()
                .contains("region 1 (3..7) overlaps region 0 (0..4)"),
            "{e}"
        );
        assert!(
            check_regions("x", &[1], &[usize::MAX], 8).is_err(),
            "an end that overflows"
        );
    }

    #[test]
    fn too_many_regions_or_offsets_of_another_length_are_refused() {
        let e = lens_of("x", std::iter::repeat_n(1, MAX_BATCH + 1), MAX_BATCH + 1).unwrap_err();
        assert!(e.to_string().contains("at most 16"), "{e}");
        let e = lens_of("x", [1, 2].into_iter(), 3).unwrap_err();
        assert!(e.to_string().contains("3 offsets for 2 regions"), "{e}");
        assert_eq!(lens_of("x", [1, 2].into_iter(), 2).unwrap()[..2], [1, 2]);
    }
}
