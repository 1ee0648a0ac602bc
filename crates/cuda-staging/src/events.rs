//! The pipeline's events, kept per context: a [`crate::StagingBuffer`] that one
//! thread drives on several GPUs (device 0, then device 1, then device 0 ...) keeps
//! the events of each of the last [`EVENT_CONTEXTS`] contexts it used, so switching
//! among that many devices creates no events (cycling through more re-creates
//! them). An event belongs to one context and can be recorded
//! only on that context's streams, so one set per context is needed; the pinned
//! memory itself is portable (`CU_MEMHOSTALLOC_PORTABLE`) and is shared by all.

use cuda_core::{Context, Event};

/// How many contexts' events a staging buffer keeps; using a further context drops
/// the events of the least recently used one.
pub(crate) const EVENT_CONTEXTS: usize = 4;

/// Sets of items, one per key, most recently used first, at most `limit` of them.
///
/// Generic so that its policy is tested without a driver; the staging buffer uses
/// [`PipelineEvents`].
#[derive(Debug)]
pub(crate) struct PerKey<K, E> {
    /// Most recently used first.
    sets: Vec<(K, Vec<E>)>,
    limit: usize,
}

/// The pipeline events of a staging buffer, per context.
pub(crate) type PipelineEvents = PerKey<Context, Event>;

impl<K, E> Default for PerKey<K, E> {
    fn default() -> Self {
        PerKey::with_limit(EVENT_CONTEXTS)
    }
}

impl<K, E> PerKey<K, E> {
    /// Keeps at most `limit` sets (at least one).
    pub(crate) fn with_limit(limit: usize) -> Self {
        PerKey {
            sets: Vec::new(),
            limit: limit.max(1),
        }
    }

    /// Makes `key`'s set the current (most recently used) one, with at least `n`
    /// items, creating the missing ones with `make`. A key not held yet gets a new
    /// set, dropping the least recently used set when `limit` are held. Returns how
    /// many items were created. On an error the set keeps the items made before it.
    pub(crate) fn ensure<Er>(
        &mut self,
        key: &K,
        n: usize,
        mut make: impl FnMut(&K) -> std::result::Result<E, Er>,
    ) -> std::result::Result<usize, Er>
    where
        K: PartialEq + Clone,
    {
        match self.sets.iter().position(|(k, _)| k == key) {
            Some(i) => self.sets[..=i].rotate_right(1),
            None => {
                self.sets.truncate(self.limit - 1);
                self.sets.insert(0, (key.clone(), Vec::new()));
            }
        }
        let set = &mut self.sets[0].1;
        let mut created = 0;
        while set.len() < n {
            set.push(make(key)?);
            created += 1;
        }
        Ok(created)
    }

    /// The current set: that of the last [`PerKey::ensure`]'s key (empty before
    /// the first).
    pub(crate) fn current(&mut self) -> &mut [E] {
        self.sets
            .first_mut()
            .map_or(&mut [], |(_, s)| s.as_mut_slice())
    }

    /// The keys held, most recently used first.
    #[cfg(test)]
    fn keys(&self) -> impl Iterator<Item = &K> {
        self.sets.iter().map(|(k, _)| k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Items are (key, serial): which key made them, and in what order.
    fn make(serial: &mut u32) -> impl FnMut(&char) -> std::result::Result<(char, u32), ()> + '_ {
        move |k| {
            *serial += 1;
            Ok((*k, *serial))
        }
    }

    #[test]
    fn switching_back_and_forth_creates_nothing_after_the_first_use_of_each_key() {
        let mut sets = PerKey::<char, (char, u32)>::default();
        assert!(sets.current().is_empty(), "nothing before the first ensure");
        let mut serial = 0;
        assert_eq!(sets.ensure(&'a', 3, make(&mut serial)), Ok(3));
        assert_eq!(sets.ensure(&'b', 3, make(&mut serial)), Ok(3));
        for round in 0..100 {
            let key = if round % 2 == 0 { 'a' } else { 'b' };
            assert_eq!(sets.ensure(&key, 3, make(&mut serial)), Ok(0), "{round}");
            assert!(sets.current().iter().all(|(k, _)| *k == key), "{round}");
        }
        assert_eq!(serial, 6);
        // Fewer needed: the set is kept whole; more: only the missing ones are made.
        assert_eq!(sets.ensure(&'a', 1, make(&mut serial)), Ok(0));
        assert_eq!(sets.current().len(), 3);
        assert_eq!(sets.ensure(&'a', 5, make(&mut serial)), Ok(2));
        assert_eq!(
            sets.current().iter().map(|e| e.1).collect::<Vec<_>>(),
            [1, 2, 3, 7, 8]
        );
    }

    #[test]
    fn a_fifth_key_drops_the_least_recently_used_set() {
        let mut sets = PerKey::<char, (char, u32)>::default();
        let mut serial = 0;
        for key in ['a', 'b', 'c', 'd'] {
            assert_eq!(sets.ensure(&key, 2, make(&mut serial)), Ok(2));
        }
        assert_eq!(sets.keys().collect::<String>(), "dcba");
        // Using 'a' again makes it the most recent; 'b' is now the oldest.
        assert_eq!(sets.ensure(&'a', 2, make(&mut serial)), Ok(0));
        assert_eq!(sets.keys().collect::<String>(), "adcb");
        assert_eq!(sets.ensure(&'e', 2, make(&mut serial)), Ok(2));
        assert_eq!(sets.keys().collect::<String>(), "eadc", "b was dropped");
        // 'b' comes back with new items.
        assert_eq!(sets.ensure(&'b', 2, make(&mut serial)), Ok(2));
        assert_eq!(sets.keys().collect::<String>(), "bead");
        assert_eq!(sets.current(), [('b', 11), ('b', 12)]);
    }

    #[test]
    fn a_limit_of_one_keeps_only_the_current_set() {
        let mut sets = PerKey::<char, (char, u32)>::with_limit(0);
        let mut serial = 0;
        assert_eq!(sets.ensure(&'a', 1, make(&mut serial)), Ok(1));
        assert_eq!(sets.ensure(&'b', 1, make(&mut serial)), Ok(1));
        assert_eq!(sets.ensure(&'a', 1, make(&mut serial)), Ok(1));
        assert_eq!(sets.keys().collect::<String>(), "a");
    }

    #[test]
    fn a_failed_creation_keeps_what_was_made_and_the_next_call_completes_it() {
        let mut sets = PerKey::<char, u32>::default();
        let mut left = 2;
        let failing = |_: &char| {
            if left == 0 {
                return Err("out of events");
            }
            left -= 1;
            Ok(left)
        };
        assert_eq!(sets.ensure(&'a', 4, failing), Err("out of events"));
        assert_eq!(sets.current(), [1, 0]);
        assert_eq!(sets.ensure(&'a', 4, |_| Ok::<_, ()>(9)), Ok(2));
        assert_eq!(sets.current(), [1, 0, 9, 9]);
    }
}
