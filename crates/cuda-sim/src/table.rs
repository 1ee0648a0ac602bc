//! Handle tables: the opaque values the simulator hands out for contexts, streams,
//! events, modules, functions and graphs, and the objects behind them.
//!
//! A handle is `TAG << 48 | serial`. The serial is never reused, so a destroyed
//! handle stays invalid for good (`CUDA_ERROR_INVALID_HANDLE`, or
//! `CUDA_ERROR_INVALID_CONTEXT` for contexts), and each kind has its own tag, so a
//! stream passed where an event belongs is refused too. Handles lie above the
//! user-space half of the address space: dereferencing one on the host crashes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The objects of one kind, by handle.
pub struct Table<T> {
    tag: usize,
    next: AtomicUsize,
    map: Mutex<HashMap<usize, Arc<T>>>,
    /// How many handles are live, changed under the map's lock and read without it
    /// (the leak report, at exit, while stream threads may still run).
    live: AtomicUsize,
}

impl<T> Table<T> {
    /// An empty table whose handles carry `tag` (one byte).
    pub fn new(tag: u8) -> Table<T> {
        Table {
            tag: usize::from(tag) << 48,
            next: AtomicUsize::new(1),
            map: Mutex::new(HashMap::new()),
            live: AtomicUsize::new(0),
        }
    }

    /// A fresh handle, not yet naming anything (for objects that hold their own).
    pub fn reserve(&self) -> usize {
        self.tag | self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Makes `handle` (from [`Table::reserve`]) name `value`.
    pub fn insert_at(&self, handle: usize, value: Arc<T>) {
        let mut map = lock(&self.map);
        if map.insert(handle, value).is_none() {
            self.live.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A fresh handle naming `value`.
    pub fn insert(&self, value: Arc<T>) -> usize {
        let h = self.reserve();
        self.insert_at(h, value);
        h
    }

    /// What `handle` names, if it is live.
    pub fn get(&self, handle: usize) -> Option<Arc<T>> {
        lock(&self.map).get(&handle).cloned()
    }

    /// Ends `handle`; returns what it named.
    pub fn remove(&self, handle: usize) -> Option<Arc<T>> {
        let mut map = lock(&self.map);
        let gone = map.remove(&handle);
        if gone.is_some() {
            self.live.fetch_sub(1, Ordering::Relaxed);
        }
        gone
    }

    /// How many handles are live; takes no lock.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Every live object, for which `keep` says yes, with its handle.
    pub fn select(&self, mut keep: impl FnMut(&T) -> bool) -> Vec<(usize, Arc<T>)> {
        lock(&self.map)
            .iter()
            .filter(|(_, v)| keep(v))
            .map(|(h, v)| (*h, Arc::clone(v)))
            .collect()
    }
}

/// Locks `m`, ignoring poisoning: the simulator's state stays consistent across a
/// panic in a user callback (its own code does not panic while holding a lock).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
