//! Each context's streams: its legacy default stream and its per-thread default
//! streams, made at first use, and the streams created in it.
//!
//! They are kept here, by context handle (a handle is never reused, `src/table.rs`),
//! rather than in the context: a stream refers to its context, so the context cannot
//! refer to its streams' type. A context's entry goes when its reset forgets its
//! streams.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::thread::ThreadId;

use crate::context::Context;
use crate::stream::{Stream, StreamKind};
use crate::table::lock;

/// The streams of one context.
#[derive(Default)]
struct Streams {
    /// The legacy default stream (made at first use).
    legacy: Option<Arc<Stream>>,
    /// Each thread's per-thread default stream (made at first use).
    per_thread: HashMap<ThreadId, Arc<Stream>>,
    /// Streams created in the context (still alive or not).
    created: Vec<Weak<Stream>>,
}

/// Every context's streams, by context handle.
static STREAMS: Mutex<BTreeMap<usize, Streams>> = Mutex::new(BTreeMap::new());

impl Context {
    /// The legacy default stream.
    pub fn legacy(self: &Arc<Self>) -> Arc<Stream> {
        let mut all = lock(&STREAMS);
        let l = &mut all.entry(self.handle).or_default().legacy;
        Arc::clone(l.get_or_insert_with(|| Stream::start(self, StreamKind::Legacy, 0, 0)))
    }

    /// The calling thread's per-thread default stream.
    pub fn per_thread(self: &Arc<Self>) -> Arc<Stream> {
        let mut all = lock(&STREAMS);
        let s = all
            .entry(self.handle)
            .or_default()
            .per_thread
            .entry(std::thread::current().id())
            .or_insert_with(|| Stream::start(self, StreamKind::PerThread, 0, 0));
        Arc::clone(s)
    }

    /// Records a stream created in this context.
    pub fn add_created(&self, s: &Arc<Stream>) {
        let mut all = lock(&STREAMS);
        let c = &mut all.entry(self.handle).or_default().created;
        c.retain(|w| w.strong_count() > 0);
        c.push(Arc::downgrade(s));
    }

    /// Every stream of the context that exists now: legacy, per-thread, created.
    pub fn streams(&self) -> Vec<Arc<Stream>> {
        let all = lock(&STREAMS);
        let Some(mine) = all.get(&self.handle) else {
            return Vec::new();
        };
        let mut streams: Vec<Arc<Stream>> = mine.legacy.iter().cloned().collect();
        streams.extend(mine.per_thread.values().cloned());
        streams.extend(mine.created.iter().filter_map(Weak::upgrade));
        streams
    }

    /// Streams that synchronise with the legacy stream: the per-thread ones and the
    /// created ones without `CU_STREAM_NON_BLOCKING`.
    pub fn blocking_streams(&self) -> Vec<Arc<Stream>> {
        self.streams()
            .into_iter()
            .filter(|s| s.kind != StreamKind::Legacy && !s.non_blocking)
            .collect()
    }

    /// Forgets the per-thread and legacy streams, and the created ones (at a reset or
    /// destroy, once drained).
    pub fn drop_default_streams(&self) {
        let gone = lock(&STREAMS).remove(&self.handle);
        drop(gone);
    }
}
