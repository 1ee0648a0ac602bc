//! Events: the last record's place in its stream, its completion time, and the
//! capture it was recorded in, if any.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use crate::capture::CaptureLink;
use crate::context::Context;
use crate::errors::{Res, CAPTURED_EVENT, INVALID_HANDLE, NOT_READY};
use crate::stream::Stream;
use crate::table::lock;

/// `CU_EVENT_DISABLE_TIMING`.
pub const DISABLE_TIMING: u32 = 2;
/// `CU_EVENT_INTERPROCESS`.
pub const INTERPROCESS: u32 = 4;

/// An event.
pub struct Event {
    /// The context it was created in.
    pub ctx: Arc<Context>,
    /// Its creation flags.
    pub flags: u32,
    st: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The last record outside a capture.
    last: Option<Record>,
    /// The last record, when it was made in a capture that may still be going on.
    captured: Option<CaptureLink>,
}

/// A record queued on a stream.
struct Record {
    /// The stream.
    stream: Arc<Stream>,
    /// Its place there.
    seq: u64,
    /// When it executed, set by the record's operation (`Work::Record`).
    at: Arc<OnceLock<Instant>>,
}

impl Event {
    /// A fresh event, never recorded.
    pub fn new(ctx: Arc<Context>, flags: u32) -> Event {
        Event {
            ctx,
            flags,
            st: Mutex::new(State::default()),
        }
    }

    /// A record was queued on `stream` as operation `seq`; it notes in `at` when it
    /// executes.
    pub fn recorded(&self, stream: &Arc<Stream>, seq: u64, at: Arc<OnceLock<Instant>>) {
        let mut st = lock(&self.st);
        st.last = Some(Record {
            stream: Arc::clone(stream),
            seq,
            at,
        });
        st.captured = None;
    }

    /// A record was made in a capture, with the capture's dependencies at that point.
    pub fn recorded_in_capture(&self, link: CaptureLink) {
        lock(&self.st).captured = Some(link);
    }

    /// The capture the last record was made in, while that capture goes on.
    pub fn capture(&self) -> Option<CaptureLink> {
        let st = lock(&self.st);
        st.captured.clone().filter(|l| l.cap.is_active())
    }

    /// What a wait for this event waits for: the last record's stream and place
    /// (`None` if never recorded, or recorded only in a capture).
    pub fn target(&self) -> Option<(Arc<Stream>, u64)> {
        let st = lock(&self.st);
        st.last.as_ref().map(|r| (Arc::clone(&r.stream), r.seq))
    }

    /// `cuEventQuery`: whether the work before the last record has completed.
    pub fn query(&self) -> Res<bool> {
        if self.capture().is_some() {
            return Err(CAPTURED_EVENT);
        }
        Ok(self.target().is_none_or(|(s, seq)| s.completed() >= seq))
    }

    /// The time the last record executed, for `cuEventElapsedTime`.
    pub fn time(&self) -> Res<Instant> {
        if self.flags & DISABLE_TIMING != 0 {
            return Err(INVALID_HANDLE);
        }
        if self.capture().is_some() {
            return Err(CAPTURED_EVENT);
        }
        let st = lock(&self.st);
        match &st.last {
            None => Err(INVALID_HANDLE),
            Some(r) => r.at.get().copied().ok_or(NOT_READY),
        }
    }
}
