//! Next-hop sets: what routes resolve to, by small ids, so the consumer maps a set to its own
//! next-hop (path) object once and a million routes share it. Two kinds:
//! - interned: every distinct resolved behaviour of routes with inline next hops (or a route
//!   type: blackhole, unreachable, prohibit) gets one id, shared by content;
//! - bound: each next-hop object zebra defines gets a set of its own, whose content follows the
//!   object. When the object changes, the set changes in place ([`Change::SetChanged`]) and the
//!   routes using it are not touched: the cost of a group change is O(1), not O(routes).
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
    /// The content hash of an interned set; `None` for a bound set (not in the index).
    hash: Option<u64>,
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
                if slot.set.kind() == kind && slot.set.hops() == hops && slot.hash.is_some() {
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
        let id = self.add(set, Some(hash), out);
        self.index.entry(hash).or_default().push(id.0);
        id
    }

    /// A new bound set with `set` as its content (one reference taken: the object's).
    pub fn acquire_bound(&mut self, set: NhSet, out: &mut Vec<Change>) -> NhSetId {
        self.add(set, None, out)
    }

    /// Gives the bound set `id` new content, announced as one [`Change::SetChanged`] if it
    /// differs.
    pub fn update_bound(&mut self, id: NhSetId, set: NhSet, out: &mut Vec<Change>) {
        let slot = self.slots[id.0 as usize]
            .as_mut()
            .expect("update of a live set");
        debug_assert!(slot.hash.is_none(), "only bound sets change");
        if slot.set != set {
            slot.set = set.clone();
            out.push(Change::SetChanged { id, set });
        }
    }

    fn add(&mut self, set: NhSet, hash: Option<u64>, out: &mut Vec<Change>) -> NhSetId {
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
            if let Some(ids) = hash.and_then(|h| self.index.get_mut(&h)) {
                ids.retain(|&i| i != id);
                if ids.is_empty() {
                    self.index.remove(&hash.expect("indexed"));
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

    /// Whether `id` is a live bound set.
    pub fn is_bound(&self, id: NhSetId) -> bool {
        self.slots
            .get(id.0 as usize)
            .and_then(Option::as_ref)
            .is_some_and(|s| s.hash.is_none())
    }
}
