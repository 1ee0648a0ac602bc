//! [`PinnedView`] / [`PinnedViewMut`]: parts of a [`PinnedBuffer`](super::PinnedBuffer), the host side of
//! queued copies into and out of part of an allocation.

use std::fmt;
use std::ops::{Deref, DerefMut, RangeBounds};
use std::ptr::NonNull;

use bytemuck::Pod;

use super::{elems, elems_mut, wait_or_record};
use crate::error::Result;
use crate::memory::{checked_range, sealed, HostAccess, PageLockedSlice, PageLockedSliceMut};
use crate::tracking::Tracker;

/// Part of a [`PinnedBuffer`](super::PinnedBuffer), read-only: the source of queued copies. Dereferences
/// to `[T]` once queued copies into it have landed.
pub struct PinnedView<'a, T: Pod> {
    pub(super) ptr: NonNull<T>,
    pub(super) len: usize,
    pub(super) root: &'a Tracker,
    /// The tracker of the mutable view this one was taken from, if any.
    pub(super) region: Option<&'a Tracker>,
}

/// Part of a [`PinnedBuffer`](super::PinnedBuffer), writable, with its own record of queued copies: host
/// access through it waits only for copies queued through it (and through views of
/// it), so two views of one allocation can be filled and transferred independently.
pub struct PinnedViewMut<'a, T: Pod> {
    pub(super) ptr: NonNull<T>,
    pub(super) len: usize,
    pub(super) root: &'a Tracker,
    pub(super) region: Tracker,
}

// SAFETY: views are borrows of a `PinnedBuffer`, with `&[T]` / `&mut [T]` semantics;
// trackers are thread-safe.
unsafe impl<T: Pod + Sync> Send for PinnedView<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Pod + Sync> Sync for PinnedView<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Pod + Send> Send for PinnedViewMut<'_, T> {}
// SAFETY: as above; shared access reads only.
unsafe impl<T: Pod + Sync> Sync for PinnedViewMut<'_, T> {}

impl<'a, T: Pod> PinnedView<'a, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A read-only view of elements `range` of this view.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<PinnedView<'a, T>> {
        let r = checked_range("PinnedView::slice", range, self.len)?;
        Ok(PinnedView {
            // SAFETY: `r.start <= len`, inside (or one past) the view.
            ptr: unsafe { self.ptr.add(r.start) },
            len: r.len(),
            root: self.root,
            region: self.region,
        })
    }

    fn tracker(&self) -> &Tracker {
        self.region.unwrap_or(self.root)
    }
}

impl<'a, T: Pod> PinnedViewMut<'a, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements, once queued copies into this view have landed.
    pub fn as_slice(&self) -> Result<&[T]> {
        self.region.wait_host(false)?;
        // SAFETY: the view's elements are valid and initialised for the borrow of the
        // buffer; no queued copy writes them any more (waited above).
        Ok(unsafe { elems(self.ptr, self.len) })
    }

    /// The elements, writable, once every copy queued through this view is done.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.region.wait_host(true)?;
        // SAFETY: as in `as_slice`, with exclusive access (`&mut self`, and the view
        // is the only one over these elements).
        Ok(unsafe { elems_mut(self.ptr, self.len) })
    }

    /// Waits for every copy queued through this view.
    pub fn wait(&self) -> Result<()> {
        self.region.wait_host(true)
    }

    /// Whether no copy queued through this view may still be running (no driver
    /// call: a copy counts as running until a synchronisation through this crate has
    /// seen it complete).
    pub fn is_idle(&self) -> bool {
        self.region.is_idle()
    }

    /// A read-only view of elements `range` of this view, the source of queued
    /// copies; they are recorded in this view too.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<PinnedView<'_, T>> {
        let r = checked_range("PinnedViewMut::slice", range, self.len)?;
        Ok(PinnedView {
            // SAFETY: `r.start <= len`, inside (or one past) the view.
            ptr: unsafe { self.ptr.add(r.start) },
            len: r.len(),
            root: self.root,
            region: Some(&self.region),
        })
    }

    /// Splits the view in two at `mid`, each half with its own record of queued
    /// copies (starting with this view's). [`crate::Error::OutOfRange`] when
    /// `mid > len`.
    pub fn split_at(self, mid: usize) -> Result<(PinnedViewMut<'a, T>, PinnedViewMut<'a, T>)> {
        checked_range("PinnedViewMut::split_at", ..mid, self.len)?;
        let left = PinnedViewMut {
            ptr: self.ptr,
            len: mid,
            root: self.root,
            region: self.region.snapshot(),
        };
        let right = PinnedViewMut {
            // SAFETY: `mid <= len`, inside (or one past) the view.
            ptr: unsafe { self.ptr.add(mid) },
            len: self.len - mid,
            root: self.root,
            region: self.region.snapshot(),
        };
        Ok((left, right))
    }
}

impl<T: Pod> Deref for PinnedView<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        wait_or_record(self.tracker(), false);
        // SAFETY: elements of the borrowed buffer; queued writes into them are over
        // (waited above; only mutable views and the buffer itself can queue writes,
        // and neither can while this shared view lives... except a mutable view this
        // one was taken from, whose tracker is the one waited on).
        unsafe { elems(self.ptr, self.len) }
    }
}

impl<T: Pod> Deref for PinnedViewMut<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        wait_or_record(&self.region, false);
        // SAFETY: the view's elements, borrowed from the buffer; queued writes through
        // this view are over (waited above), and no other view covers them.
        unsafe { elems(self.ptr, self.len) }
    }
}

impl<T: Pod> DerefMut for PinnedViewMut<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        wait_or_record(&self.region, true);
        // SAFETY: as in `deref`, with every queued use over and `&mut self` exclusive.
        unsafe { elems_mut(self.ptr, self.len) }
    }
}

impl<T: Pod> sealed::Sealed for PinnedView<'_, T> {}
impl<T: Pod> sealed::Sealed for PinnedViewMut<'_, T> {}

impl<T: Pod> PageLockedSlice<T> for PinnedView<'_, T> {
    fn len(&self) -> usize {
        self.len
    }
    fn host_access(&self) -> HostAccess<'_> {
        HostAccess {
            ptr: self.ptr.as_ptr().cast(),
            root: self.root,
            region: self.region,
        }
    }
}

impl<T: Pod> PageLockedSlice<T> for PinnedViewMut<'_, T> {
    fn len(&self) -> usize {
        self.len
    }
    fn host_access(&self) -> HostAccess<'_> {
        HostAccess {
            ptr: self.ptr.as_ptr().cast(),
            root: self.root,
            region: Some(&self.region),
        }
    }
}

impl<T: Pod> PageLockedSliceMut<T> for PinnedViewMut<'_, T> {}

impl<T: Pod> fmt::Debug for PinnedView<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedView")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

impl<T: Pod> fmt::Debug for PinnedViewMut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedViewMut")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}
