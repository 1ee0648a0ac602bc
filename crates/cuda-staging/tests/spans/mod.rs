//! A capturing `tracing` layer for the tests of the `tracing` feature:
//! `tests/route_tracing.rs` (on a GPU) and the unit tests of `src/trace.rs` (which
//! include this file by path).
//!
//! [`capture`] runs a closure with a subscriber (tracing-subscriber's registry and
//! this layer) as the calling thread's default, and returns every span that closed
//! meanwhile, in the order they closed, with the values of their fields: those given
//! when the span opened and those recorded later.

#![allow(dead_code)] // each user takes its own subset

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// A field's value, as the span recorded it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    Str(String),
    /// Recorded through `Debug` (or `Display`).
    Debug(String),
}

/// A span that closed.
#[derive(Clone, Debug)]
pub struct SpanRecord {
    pub name: &'static str,
    pub target: &'static str,
    pub level: Level,
    /// Every field given a value, by name. A field recorded twice keeps its last
    /// value and counts twice in `recorded`.
    pub fields: BTreeMap<&'static str, Value>,
    /// How many times each field was given a value.
    pub recorded: BTreeMap<&'static str, usize>,
}

impl SpanRecord {
    /// A string field, `None` when absent or not a string.
    pub fn str(&self, field: &str) -> Option<&str> {
        match self.fields.get(field)? {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// An unsigned integer field.
    pub fn u64(&self, field: &str) -> Option<u64> {
        match self.fields.get(field)? {
            Value::U64(v) => Some(*v),
            _ => None,
        }
    }

    /// A floating-point field.
    pub fn f64(&self, field: &str) -> Option<f64> {
        match self.fields.get(field)? {
            Value::F64(v) => Some(*v),
            _ => None,
        }
    }

    /// A boolean field.
    pub fn bool(&self, field: &str) -> Option<bool> {
        match self.fields.get(field)? {
            Value::Bool(v) => Some(*v),
            _ => None,
        }
    }
}

/// Collects the values of one span's fields.
struct Fields<'a>(&'a mut SpanRecord);

impl Fields<'_> {
    fn put(&mut self, field: &Field, v: Value) {
        self.0.fields.insert(field.name(), v);
        *self.0.recorded.entry(field.name()).or_default() += 1;
    }
}

impl Visit for Fields<'_> {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::U64(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::I64(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::Str(value.to_owned()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field, Value::Debug(format!("{value:?}")));
    }
}

/// The layer: a [`SpanRecord`] per open span in its extensions, moved to `closed`
/// when the span closes.
struct Capture {
    closed: Arc<Mutex<Vec<SpanRecord>>>,
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        let mut record = SpanRecord {
            name: meta.name(),
            target: meta.target(),
            level: *meta.level(),
            fields: BTreeMap::new(),
            recorded: BTreeMap::new(),
        };
        attrs.record(&mut Fields(&mut record));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(record);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(record) = span.extensions_mut().get_mut::<SpanRecord>() {
                values.record(&mut Fields(record));
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            if let Some(record) = span.extensions_mut().remove::<SpanRecord>() {
                self.closed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(record);
            }
        }
    }
}

/// Runs `f` with a capturing subscriber as this thread's default (other threads
/// are not affected) and returns what `f` returned and the spans that closed
/// meanwhile, in order.
pub fn capture<R>(f: impl FnOnce() -> R) -> (R, Vec<SpanRecord>) {
    let closed = Arc::new(Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::registry().with(Capture {
        closed: Arc::clone(&closed),
    });
    let r = tracing::subscriber::with_default(subscriber, f);
    let spans = std::mem::take(&mut *closed.lock().unwrap_or_else(|e| e.into_inner()));
    (r, spans)
}

/// The spans of `cuda_staging`'s transfers among `spans`.
pub fn transfers(spans: &[SpanRecord]) -> Vec<&SpanRecord> {
    spans
        .iter()
        .filter(|s| s.target == "cuda_staging" && s.name == "transfer")
        .collect()
}
