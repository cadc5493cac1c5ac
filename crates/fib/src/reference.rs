//! The obviously correct LPM: one hash map per prefix length, probed from the longest length down.
//! Slow; it exists to check the fast engine against (property tests, benchmarks' cross-checks).

use std::collections::HashMap;

use crate::key::Key;
use crate::lpm::NO_ROUTE;

pub struct ReferenceLpm<K: Key> {
    by_len: Vec<HashMap<K, u32>>,
}

impl<K: Key> Default for ReferenceLpm<K> {
    fn default() -> Self {
        Self {
            by_len: (0..=K::BITS).map(|_| HashMap::new()).collect(),
        }
    }
}

impl<K: Key> ReferenceLpm<K> {
    pub fn insert(&mut self, prefix: K, len: u8, nh: u32) {
        self.by_len[len as usize].insert(prefix.masked(len), nh);
    }

    pub fn remove(&mut self, prefix: K, len: u8) -> Option<u32> {
        self.by_len[len as usize].remove(&prefix.masked(len))
    }

    pub fn lookup(&self, key: K) -> u32 {
        for len in (0..=K::BITS as usize).rev() {
            if let Some(&nh) = self.by_len[len].get(&key.masked(len as u8)) {
                return nh;
            }
        }
        NO_ROUTE
    }

    pub fn len(&self) -> usize {
        self.by_len.iter().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
