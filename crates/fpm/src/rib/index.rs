//! The key index of the route slab: (table, prefix) to slab index.
//!
//! Why not a `HashMap<RouteKey, u32>`: with a million routes the map is far larger than the
//! caches, and a lookup in hashbrown costs two misses (control bytes, then the bucket) before the
//! slab entry costs a third. Here a slot is 8 bytes, `tag << 32 | index + 1` (0 = empty), in one
//! array probed linearly from `tag & mask`: one miss finds the slot, and the 32-bit hash tag
//! avoids reading slab entries that cannot match. An add costs one miss, a re-sent route two.
//!
//! The load stays at most one half, so probes are short and usually within one cache line.
//! Deletion shifts the following entries back (no tombstones), so lookups never slow down with
//! churn.

use std::hash::{Hash, Hasher};

use rustc_hash::FxHasher;

use super::{RouteEntry, RouteKey};

/// Where a missing key goes; valid until the index is changed otherwise.
pub(super) struct Vacant {
    pos: usize,
    tag: u32,
}

#[derive(Default)]
pub(super) struct KeyIndex {
    slots: Vec<u64>,
    len: usize,
}

fn tag_of(key: &RouteKey) -> u32 {
    let mut h = FxHasher::default();
    key.hash(&mut h);
    // Fx mixes little for keys that differ only in a few bits (consecutive prefixes), and
    // linear probing punishes clusters: finish with a full avalanche.
    let mut x = h.finish();
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x as u32
}

fn slot_tag(s: u64) -> u32 {
    (s >> 32) as u32
}

fn slot_idx(s: u64) -> u32 {
    (s as u32).wrapping_sub(1)
}

impl KeyIndex {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn with_capacity(n: usize) -> Self {
        let mut s = Self::default();
        s.grow_to(n);
        s
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// Probes for `key`: `Ok(slab index)` or `Err((position of the empty slot ending the probe,
    /// tag))`.
    fn probe(&self, routes: &[RouteEntry], key: &RouteKey) -> Result<u32, (usize, u32)> {
        let tag = tag_of(key);
        if self.slots.is_empty() {
            return Err((0, tag));
        }
        let mask = self.mask();
        let mut pos = tag as usize & mask;
        loop {
            let s = self.slots[pos];
            if s == 0 {
                return Err((pos, tag));
            }
            if slot_tag(s) == tag && routes[slot_idx(s) as usize].key == *key {
                return Ok(slot_idx(s));
            }
            pos = (pos + 1) & mask;
        }
    }

    /// Reads the home slot of `key` and, if it holds a candidate, its slab entry; returns a
    /// value only so the loads are not optimised away.
    pub fn touch(&self, routes: &[RouteEntry], key: &RouteKey) -> u64 {
        if self.slots.is_empty() {
            return 0;
        }
        let tag = tag_of(key);
        let s = self.slots[tag as usize & self.mask()];
        if s != 0 && slot_tag(s) == tag {
            s ^ routes[slot_idx(s) as usize].gen as u64
        } else {
            s
        }
    }

    pub fn get(&self, routes: &[RouteEntry], key: &RouteKey) -> Option<u32> {
        self.probe(routes, key).ok()
    }

    /// The slab index of `key`, or where to [`insert`](Self::insert) it (room is made first).
    pub fn entry(&mut self, routes: &[RouteEntry], key: &RouteKey) -> Result<u32, Vacant> {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow_to(self.len + 1);
        }
        self.probe(routes, key)
            .map_err(|(pos, tag)| Vacant { pos, tag })
    }

    pub fn insert(&mut self, v: Vacant, idx: u32) {
        debug_assert_eq!(self.slots[v.pos], 0);
        self.slots[v.pos] = (v.tag as u64) << 32 | (idx as u64 + 1);
        self.len += 1;
    }

    /// Removes `key`; returns its slab index.
    pub fn remove(&mut self, routes: &[RouteEntry], key: &RouteKey) -> Option<u32> {
        let tag = tag_of(key);
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut pos = tag as usize & mask;
        let idx = loop {
            let s = self.slots[pos];
            if s == 0 {
                return None;
            }
            if slot_tag(s) == tag && routes[slot_idx(s) as usize].key == *key {
                break slot_idx(s);
            }
            pos = (pos + 1) & mask;
        };
        // Backward shift: move later entries of the run into the hole when their home allows.
        let mut hole = pos;
        let mut j = pos;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s == 0 {
                break;
            }
            let home = slot_tag(s) as usize & mask;
            if j.wrapping_sub(home) & mask >= j.wrapping_sub(hole) & mask {
                self.slots[hole] = s;
                hole = j;
            }
        }
        self.slots[hole] = 0;
        self.len -= 1;
        Some(idx)
    }

    /// Slab indexes of every key, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.iter().filter(|&&s| s != 0).map(|&s| slot_idx(s))
    }

    /// Makes room for `n` keys at load one half; entries are placed again by their tags (the
    /// slab is not read).
    fn grow_to(&mut self, n: usize) {
        let cap = (n * 2).next_power_of_two().max(16);
        if cap <= self.slots.len() {
            return;
        }
        // Stored to, not allocated zeroed: a zeroed allocation maps the shared zero page, and the
        // first store to each of its pages after a probe has read it costs a copy-on-write fault
        // that shoots down the TLBs of every core running this process (the workers). That was a
        // tenth of a 3M-route load. `black_box` keeps the compiler from turning the fill back
        // into a zeroed allocation.
        let mut fresh = Vec::with_capacity(cap);
        fresh.resize(cap, std::hint::black_box(0u64));
        let old = std::mem::replace(&mut self.slots, fresh);
        let mask = cap - 1;
        for s in old.into_iter().filter(|&s| s != 0) {
            let mut pos = slot_tag(s) as usize & mask;
            while self.slots[pos] != 0 {
                pos = (pos + 1) & mask;
            }
            self.slots[pos] = s;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    fn entry(key: RouteKey) -> RouteEntry {
        RouteEntry {
            key,
            set: None,
            nh_id: 0,
            gen: 0,
            prev: u32::MAX,
            next: u32::MAX,
        }
    }

    fn key(i: u16) -> RouteKey {
        RouteKey {
            table: (i % 3) as u32,
            prefix: crate::Prefix::new(std::net::Ipv4Addr::from((i as u32) << 8).into(), 24)
                .unwrap(),
        }
    }

    proptest! {
        /// Against a HashMap, with a small key space so that runs collide and removals shift.
        #[test]
        fn behaves_as_a_map(ops in proptest::collection::vec((any::<bool>(), 0..400u16), 1..2000)) {
            let mut ix = KeyIndex::default();
            let mut slab: Vec<RouteEntry> = Vec::new();
            let mut model: HashMap<RouteKey, u32> = HashMap::new();
            for (add, k) in ops {
                let k = key(k);
                if add {
                    match ix.entry(&slab, &k) {
                        Ok(i) => prop_assert_eq!(model.get(&k), Some(&i)),
                        Err(v) => {
                            prop_assert!(!model.contains_key(&k));
                            slab.push(entry(k));
                            let i = (slab.len() - 1) as u32;
                            ix.insert(v, i);
                            model.insert(k, i);
                        }
                    }
                } else {
                    prop_assert_eq!(ix.remove(&slab, &k), model.remove(&k));
                }
                prop_assert_eq!(ix.len(), model.len());
            }
            for (k, i) in &model {
                prop_assert_eq!(ix.get(&slab, k), Some(*i));
            }
            let mut all: Vec<u32> = ix.iter().collect();
            let mut want: Vec<u32> = model.values().copied().collect();
            all.sort();
            want.sort();
            prop_assert_eq!(all, want);
        }
    }
}
