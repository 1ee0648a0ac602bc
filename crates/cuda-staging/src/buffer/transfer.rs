//! The path `upload` and `download` share: the transfer's two sides ([`Leg`]), what
//! routing is told about it and asks of the machine, and the move itself (the
//! driver's copy, or staged through the pinned window).

use cuda_core::{DeviceView, DeviceViewMut, Result, Stream, WaitPolicy};

use super::StagingBuffer;
use crate::copy::Copier;
use crate::direction::Direction;
use crate::errors::internal;
use crate::pipeline::Stage;
use crate::plan::{MAX_SLOTS, PIPELINE_WINDOW_BYTES};
use crate::routing::{self, Decision, Host, Staged, Transfer};
use crate::trace::{SpanRoute, TransferSpan};

/// One transfer's host side and device side, as bytes.
pub(crate) enum Leg<'a> {
    Upload {
        src: &'a [u8],
        dst: DeviceViewMut<'a, u8>,
    },
    Download {
        src: DeviceView<'a, u8>,
        dst: &'a mut [u8],
    },
}

impl Leg<'_> {
    fn direction(&self) -> Direction {
        match self {
            Leg::Upload { .. } => Direction::HostToDevice,
            Leg::Download { .. } => Direction::DeviceToHost,
        }
    }

    fn host(&self) -> (*const u8, usize) {
        match self {
            Leg::Upload { src, .. } => (src.as_ptr(), src.len()),
            Leg::Download { dst, .. } => (dst.as_ptr(), dst.len()),
        }
    }

    /// The driver's own copy (pageable or page-locked host memory), in stream order,
    /// waiting until it has landed, as `wait` says.
    fn driver_copy(self, stream: &Stream, wait: WaitPolicy) -> Result<()> {
        match self {
            Leg::Upload { src, mut dst } => stream.memcpy_htod_sync_with(src, &mut dst, wait),
            Leg::Download { src, dst } => stream.memcpy_dtoh_sync_with(&src, dst, wait),
        }
    }
}

impl StagingBuffer {
    /// The path `upload` and `download` share: route, move, count.
    pub(crate) fn transfer(&mut self, leg: Leg<'_>, stream: &Stream) -> Result<()> {
        let direction = leg.direction();
        let (host, bytes) = leg.host();
        let op = match direction {
            Direction::HostToDevice => "upload",
            Direction::DeviceToHost => "download",
        };
        let mut span = TransferSpan::start(op, direction, bytes);
        let (decision, r) = self.in_transfer(|s| -> (Decision, Result<()>) {
            let t = s.transfer_facts(bytes, direction, Host::Caller);
            let page_locks = &mut s.page_locks;
            let page_locked = || page_locks.page_locked(stream.context(), direction, host, bytes);
            let decision = routing::decide(&s.config, &t, page_locked, crate::copy::free_helpers);
            let policy = s.config.wait_policy;
            let r = match decision {
                Decision::Staged(plan) => s.staged(leg, stream, plan, &span),
                Decision::Driver => {
                    span.route(SpanRoute::Driver);
                    span.no_copy();
                    crate::waiting::for_driver_copy(policy, direction, bytes, stream)
                        .and_then(|wait| leg.driver_copy(stream, wait))
                }
                Decision::PageLocked => {
                    span.route(SpanRoute::PageLocked);
                    span.no_copy();
                    let wait = crate::waiting::for_transfer(policy, bytes, stream);
                    leg.driver_copy(stream, wait)
                }
            };
            (decision, r)
        });
        r?;
        match decision {
            Decision::Driver => self.stats.direct_transfers += 1,
            Decision::PageLocked => self.stats.pinned_source_transfers += 1,
            Decision::Staged(_) => self.stats.staged_transfers += 1,
        }
        self.stats.add_bytes(direction, bytes);
        span.succeeded();
        Ok(())
    }

    /// Through the pinned window, pipelined as `staged` says; the plan goes into
    /// `span`.
    fn staged(
        &mut self,
        leg: Leg<'_>,
        stream: &Stream,
        staged: Staged,
        span: &TransferSpan,
    ) -> Result<()> {
        let (_, bytes) = leg.host();
        let ctx = stream.context();
        let plan = staged
            .plan
            .ok_or_else(|| internal("a staged transfer without a plan"))?;
        self.grow(staged.window, PIPELINE_WINDOW_BYTES, ctx)?;
        let copier = Copier::shaped(staged.copy);
        span.staged(plan.chunks);
        span.copied(copier, plan.chunk_bytes.min(bytes));
        if plan.chunks > 1 {
            // Every slot's event at the first pipelined transfer, whatever this plan
            // needs: a plan's slots depend on whether pool helpers are free (a solo
            // mid-size upload goes in two halves), so a later plan may need more,
            // and creating them then allocated inside a steady loop (3 heap
            // allocations in steady_state's 8-thread test, seed 2, 1 ms jitter).
            self.ensure_events(MAX_SLOTS, ctx)?;
        }
        let StagingBuffer {
            capacity, events, ..
        } = self;
        let stage = Stage {
            window: capacity.buffer(plan.slots * plan.chunk_bytes)?,
            events: events.current(),
            stream,
            copier,
            plan,
            wait: crate::waiting::for_transfer(self.config.wait_policy, bytes, stream),
        };
        let r = match leg {
            Leg::Upload { src, mut dst } => stage.upload(src, &mut dst),
            Leg::Download { src, dst } => stage.download(&src, dst),
        };
        if r.is_err() {
            // Leave nothing in flight that uses the pinned window or the caller's
            // memory; the error to report is the first one.
            let _ = stream.synchronize();
        }
        r
    }

    /// Transfer `bytes` moving `direction` from or into `host`, starting now (inside
    /// [`StagingBuffer::in_transfer`]), as routing sees it.
    pub(crate) fn transfer_facts(
        &self,
        bytes: usize,
        direction: Direction,
        host: Host,
    ) -> Transfer {
        Transfer {
            bytes,
            direction,
            host,
            back_to_back: self.burst.back_to_back(),
            paced: self.burst.paced(),
            long_gap: self.burst.long_gap(),
            pinned: self.capacity().max(self.reserved),
        }
    }

    /// The route and plan of 2-D transfer of `bytes` of rows moving `direction`,
    /// starting now; `contiguous` when the host's rows lie back to back.
    pub(crate) fn decide_rows(
        &self,
        bytes: usize,
        direction: Direction,
        contiguous: bool,
    ) -> Decision {
        let t = self.transfer_facts(bytes, direction, Host::Rows { contiguous });
        // Rows are never asked about page-locking.
        routing::decide(&self.config, &t, || false, crate::copy::free_helpers)
    }
}
