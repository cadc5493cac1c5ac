//! Interned next-hop sets: every distinct resolved forwarding behaviour gets one small id, so the
//! consumer maps a set to its own next-hop object once and a million routes share it.
//!
//! Ids are dense and reused, so a consumer can index a `Vec` with them. A set lives while a route
//! or a next-hop object resolves to it. Freeing is deferred to the end of a batch: a set whose last
//! user goes away and comes back within one batch (a delete then re-add of a route) is never
//! announced as removed, and an id is never reused within the batch that freed it.

use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHasher};

use super::Change;
use crate::netlink::NextHop;

/// Names one interned [`NhSet`]; dense, reused after a [`Change::SetRemoved`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NhSetId(pub u32);

/// What a route resolves to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NhSet {
    /// ECMP over these next hops (at least one), sorted, weights included.
    Forward(Box<[NextHop]>),
    /// Drop silently (`RTN_BLACKHOLE`, or a blackhole next-hop object).
    Blackhole,
    /// Drop with ICMP unreachable (`RTN_UNREACHABLE`, zebra's `reject`).
    Unreachable,
    /// Drop with ICMP administratively prohibited (`RTN_PROHIBIT`).
    Prohibit,
}

impl NhSet {
    /// The forwarding next hops; empty for the drop kinds.
    pub fn hops(&self) -> &[NextHop] {
        match self {
            NhSet::Forward(h) => h,
            _ => &[],
        }
    }

    fn kind(&self) -> Kind {
        match self {
            NhSet::Forward(_) => Kind::Forward,
            NhSet::Blackhole => Kind::Blackhole,
            NhSet::Unreachable => Kind::Unreachable,
            NhSet::Prohibit => Kind::Prohibit,
        }
    }
}

/// The variant of an [`NhSet`], for lookups that must not build one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Forward,
    Blackhole,
    Unreachable,
    Prohibit,
}

struct Slot {
    set: NhSet,
    hash: u64,
    refs: u32,
}

/// The table of live sets with their reference counts.
#[derive(Default)]
pub(crate) struct SetTable {
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    /// Content hash to the ids with that hash (more than one only on a 64-bit collision).
    index: FxHashMap<u64, Vec<u32>>,
    /// Sets whose count reached 0 during the current batch.
    dying: Vec<u32>,
    live: usize,
}

fn content_hash(kind: Kind, hops: &[NextHop]) -> u64 {
    let mut h = FxHasher::default();
    kind.hash(&mut h);
    hops.hash(&mut h);
    h.finish()
}

impl SetTable {
    pub fn get(&self, id: NhSetId) -> Option<&NhSet> {
        self.slots.get(id.0 as usize)?.as_ref().map(|s| &s.set)
    }

    pub fn live(&self) -> usize {
        self.live
    }

    /// Takes a reference to the set `(kind, hops)` (`hops` sorted, empty unless `Forward`),
    /// creating it, and announcing it in `out`, if it is new.
    pub fn acquire(&mut self, kind: Kind, hops: &[NextHop], out: &mut Vec<Change>) -> NhSetId {
        let hash = content_hash(kind, hops);
        if let Some(ids) = self.index.get(&hash) {
            for &id in ids {
                let slot = self.slots[id as usize]
                    .as_mut()
                    .expect("indexed set is live");
                if slot.set.kind() == kind && slot.set.hops() == hops {
                    slot.refs += 1;
                    return NhSetId(id);
                }
            }
        }
        let set = match kind {
            Kind::Forward => NhSet::Forward(hops.into()),
            Kind::Blackhole => NhSet::Blackhole,
            Kind::Unreachable => NhSet::Unreachable,
            Kind::Prohibit => NhSet::Prohibit,
        };
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        out.push(Change::SetAdded {
            id: NhSetId(id),
            set: set.clone(),
        });
        self.slots[id as usize] = Some(Slot { set, hash, refs: 1 });
        self.index.entry(hash).or_default().push(id);
        self.live += 1;
        NhSetId(id)
    }

    /// Takes one more reference to a live set.
    pub fn retain(&mut self, id: NhSetId) {
        let slot = self.slots[id.0 as usize]
            .as_mut()
            .expect("retain of a live set");
        slot.refs += 1;
    }

    /// Drops a reference; the set is freed at the end of the batch if none is left by then.
    pub fn release(&mut self, id: NhSetId) {
        let slot = self.slots[id.0 as usize]
            .as_mut()
            .expect("release of a live set");
        slot.refs -= 1;
        if slot.refs == 0 {
            self.dying.push(id.0);
        }
    }

    /// End of batch: frees the sets still unreferenced and announces them.
    pub fn collect(&mut self, out: &mut Vec<Change>) {
        for id in std::mem::take(&mut self.dying) {
            let Some(slot) = &self.slots[id as usize] else {
                continue; // listed twice (died, revived, died again)
            };
            if slot.refs != 0 {
                continue;
            }
            let hash = slot.hash;
            self.slots[id as usize] = None;
            if let Some(ids) = self.index.get_mut(&hash) {
                ids.retain(|&i| i != id);
                if ids.is_empty() {
                    self.index.remove(&hash);
                }
            }
            self.free.push(id);
            self.live -= 1;
            out.push(Change::SetRemoved { id: NhSetId(id) });
        }
    }

    /// Every live set with its count (for invariant checks).
    pub fn iter(&self) -> impl Iterator<Item = (NhSetId, &NhSet, u32)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|s| (NhSetId(i as u32), &s.set, s.refs)))
    }
}
