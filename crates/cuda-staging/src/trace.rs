//! Which route a transfer took, as a `tracing` span (the `tracing` feature).
//!
//! Every transfer entry point that moves bytes opens one [`TransferSpan`] once its
//! input checks have passed, records what it decided as it goes (the route, the
//! pipeline's chunks, the copy threads), and closes it when it returns, recording
//! how long it took. The span:
//!
//! - name `transfer`, target `cuda_staging`, level `DEBUG`;
//! - `op`: the method, named as the crate's errors name it (`upload`,
//!   `download_into`, `upload_2d`, `download_batch`, `StagingRing::upload`, ...);
//! - `direction`: `h2d` or `d2h`;
//! - `bytes`: the bytes moved (a 2-D transfer's rows without padding, a batch's
//!   parts without the gaps between them);
//! - `route`: see [`SpanRoute`];
//! - `chunks`: the pieces a staged `upload` / `download` was cut into (1 for
//!   `staged`, more for `pipelined`);
//! - `parts`: a batch's parts;
//! - `copy_threads`: the threads this crate's host copy of the transfer ran on, the
//!   calling thread included (0 where the crate makes no host copy: the driver's
//!   path, a DMA straight from or into page-locked memory, `upload_with`,
//!   `download_into` and the ring's downloads);
//! - `helpers`: of those, the copy pool's helpers enlisted (`copy_threads - 1`, or 0);
//! - `elapsed_us`: the transfer's time, in µs to a tenth, from the span's start
//!   (after the input checks) until its data has landed, and been copied out where
//!   the call copies it out (a ring's call: until it is queued);
//! - `failed`: `true` when the call returned an error (or `fill` panicked or failed).
//!
//! The span is entered for all of that, so a subscriber's busy time (`time.busy`
//! with `FmtSpan::CLOSE`) is the transfer's time too, and events the caller's own
//! code emits inside `fill` nest under it.
//!
//! Cost. Without the feature, [`TransferSpan`] is a zero-sized type whose methods
//! test an `Option` that is always `None`, of a type with no values, so the compiler
//! drops them: nothing of it is compiled into a transfer. With the
//! feature and no subscriber that wants `DEBUG` spans of `cuda_staging`, opening the
//! span is tracing's level check and callsite check (two relaxed atomic loads), and
//! every later method a test of an `Option`: no clock read, no field formatted, no
//! allocation.

use crate::copy::Copier;
use crate::direction::Direction;

/// The `route` field of a transfer's span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SpanRoute {
    /// `driver`: the driver's own copy from or into the caller's pageable memory.
    Driver,
    /// `staged`: through the pinned buffer in one piece (every `upload_with`,
    /// `download_into` and 2-D transfer, and `upload` / `download` staged uncut).
    Staged,
    /// `pipelined`: through the pinned window in chunks whose host copies overlap
    /// the DMA of the others.
    Pipelined,
    /// `page-locked`: DMA straight from or into the caller's page-locked memory.
    PageLocked,
    /// `batched`: a `StagingBuffer` batch, one pinned region and one wait.
    Batched,
    /// `ring`: queued through a `StagingRing` slot; the span ends once it is queued.
    Ring,
}

impl SpanRoute {
    /// How a staged `upload` / `download` went, in `chunks` pieces.
    pub(crate) fn staged(chunks: usize) -> SpanRoute {
        if chunks > 1 {
            SpanRoute::Pipelined
        } else {
            SpanRoute::Staged
        }
    }

    /// The field's value.
    pub(crate) const fn label(self) -> &'static str {
        match self {
            SpanRoute::Driver => "driver",
            SpanRoute::Staged => "staged",
            SpanRoute::Pipelined => "pipelined",
            SpanRoute::PageLocked => "page-locked",
            SpanRoute::Batched => "batched",
            SpanRoute::Ring => "ring",
        }
    }
}

/// The `direction` field's value.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) const fn direction_label(direction: Direction) -> &'static str {
    match direction {
        Direction::HostToDevice => "h2d",
        Direction::DeviceToHost => "d2h",
    }
}

/// One transfer's span: opened by [`TransferSpan::start`], closed when dropped;
/// `None` when no subscriber wants it, and always without the feature.
pub(crate) struct TransferSpan(Option<Active>);

/// A span some subscriber wants.
#[cfg(feature = "tracing")]
struct Active {
    span: tracing::span::EnteredSpan,
    start: std::time::Instant,
    succeeded: bool,
}

/// Without the `tracing` feature no span is wanted: `TransferSpan` holds an
/// `Option` of this empty type, which takes no space, so every method below
/// compiles to nothing.
#[cfg(not(feature = "tracing"))]
enum Active {}

#[cfg(feature = "tracing")]
impl Active {
    /// Records `value` in `field`.
    #[inline]
    fn record(&self, field: &str, value: impl tracing::Value) -> &Active {
        self.span.record(field, value);
        self
    }

    /// Records the time since the span opened, and `failed` unless it succeeded.
    fn close(&self) {
        self.record("elapsed_us", tenths_of_us(self.start.elapsed()));
        if !self.succeeded {
            self.record("failed", true);
        }
    }
}

#[cfg(not(feature = "tracing"))]
impl Active {
    #[inline(always)]
    fn record<V>(&self, _field: &str, _value: V) -> &Active {
        match *self {}
    }
}

impl TransferSpan {
    /// Opens and enters the span of a transfer of `bytes` (non-zero, checked), moving
    /// `direction`, made by the method `op`.
    #[cfg(feature = "tracing")]
    #[inline]
    pub(crate) fn start(op: &'static str, direction: Direction, bytes: usize) -> TransferSpan {
        use tracing::field::Empty;
        let span = tracing::debug_span!(
            target: "cuda_staging",
            "transfer",
            op,
            direction = direction_label(direction),
            bytes = bytes as u64,
            route = Empty,
            chunks = Empty,
            parts = Empty,
            copy_threads = Empty,
            helpers = Empty,
            elapsed_us = Empty,
            failed = Empty,
        );
        if span.is_disabled() {
            return TransferSpan(None);
        }
        TransferSpan(Some(Active {
            span: span.entered(),
            start: std::time::Instant::now(),
            succeeded: false,
        }))
    }

    /// Without the feature: no span.
    #[cfg(not(feature = "tracing"))]
    #[inline(always)]
    pub(crate) fn start(_op: &'static str, _direction: Direction, _bytes: usize) -> TransferSpan {
        TransferSpan(None)
    }

    /// Whether a subscriber records this span.
    #[cfg(all(test, feature = "tracing"))]
    pub(crate) fn is_recorded(&self) -> bool {
        self.0.is_some()
    }

    /// Records the route.
    #[inline]
    pub(crate) fn route(&self, route: SpanRoute) {
        if let Some(a) = &self.0 {
            a.record("route", route.label());
        }
    }

    /// Records a staged `upload` / `download`'s route and its `chunks`.
    #[inline]
    pub(crate) fn staged(&self, chunks: usize) {
        if let Some(a) = &self.0 {
            a.record("route", SpanRoute::staged(chunks).label())
                .record("chunks", chunks as u64);
        }
    }

    /// Records a batch's `parts`.
    #[inline]
    pub(crate) fn parts(&self, parts: usize) {
        if let Some(a) = &self.0 {
            a.record("parts", parts as u64);
        }
    }

    /// Records the threads of a host copy of `copy_bytes` (the largest the transfer
    /// makes) that `copier` runs.
    #[inline]
    pub(crate) fn copied(&self, copier: Copier<'_>, copy_bytes: usize) {
        if let Some(a) = &self.0 {
            let threads = copier.threads_for(copy_bytes);
            a.record("copy_threads", threads as u64)
                .record("helpers", threads.saturating_sub(1) as u64);
        }
    }

    /// Records the threads of the largest of several host copies (a batch's parts)
    /// that `copier` runs.
    #[inline]
    pub(crate) fn copied_parts(&self, copier: Copier<'_>, lens: &[usize]) {
        if self.0.is_some() {
            self.copied(copier, lens.iter().copied().max().unwrap_or(0));
        }
    }

    /// Records that this crate made no host copy of the transfer.
    #[inline]
    pub(crate) fn no_copy(&self) {
        if let Some(a) = &self.0 {
            a.record("copy_threads", 0u64).record("helpers", 0u64);
        }
    }

    /// Marks the transfer done.
    #[inline]
    pub(crate) fn succeeded(&mut self) {
        #[cfg(feature = "tracing")]
        if let Some(a) = &mut self.0 {
            a.succeeded = true;
        }
    }
}

#[cfg(feature = "tracing")]
impl Drop for TransferSpan {
    fn drop(&mut self) {
        if let Some(a) = &self.0 {
            a.close();
        }
    }
}

/// `d` in µs, to a tenth.
#[cfg(feature = "tracing")]
fn tenths_of_us(d: std::time::Duration) -> f64 {
    (d.as_nanos() as f64 / 100.0).round() / 10.0
}

#[cfg(test)]
pub(crate) mod tests;
