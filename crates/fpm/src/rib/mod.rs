//! The routes and next-hop objects zebra has pushed over FPM, independent of the router: messages
//! in, a compact list of [`Change`]s out for the consumer to apply to its forwarding tables.
//!
//! Model.
//! - Next-hop objects by id: a single next hop, a blackhole, or a group of other ids with weights.
//! - Routes keyed by [`RouteKey`] (table, prefix). zebra sends one route per prefix and table (the
//!   selected one), so the metric is not part of the key.
//! - A route resolves to an interned [`NhSet`] ([`NhSetId`]): through its next-hop object
//!   (`RTA_NH_ID`), its inline next hops (`RTA_GATEWAY`/`RTA_OIF`/`RTA_MULTIPATH`), or its type
//!   (blackhole, unreachable, prohibit). A route whose object is not defined (yet) is held
//!   *unresolved*: it is not installed, and is installed as soon as the object arrives.
//!   `RTA_NH_ID` wins over inline next hops (zebra sends one or the other). Other route types
//!   (local, broadcast, ...) are counted as ignored.
//!
//! Semantics (the decisions a consumer relies on).
//! - The latest `RTM_NEWROUTE` for a key wins, with or without `NLM_F_REPLACE` (zebra sets it for
//!   IPv4 only); a re-sent identical route produces no change at all.
//! - [`Rib::apply_batch`] coalesces: a route removed and re-added within one batch (zebra's delete
//!   then add for a change, which it puts in a single frame) comes out as one
//!   [`Change::Upsert`] with `replaced: true`, never as a removal, so the forwarding table has no
//!   gap. Sets are freed only at the end of a batch, so the old set stays valid meanwhile.
//! - Each next-hop object has a set of its own (bound), shared by every route naming the object.
//!   A changed object changes its set in place ([`Change::SetChanged`]), and a member's change
//!   reaches the groups holding it the same way: one change, whatever the number of routes
//!   (zebra replaces groups often, and a group may carry a full table). Only when an object
//!   stops or starts resolving to anything are its routes removed or installed one by one
//!   (reverse indexes: an intrusive list of routes per object, and the groups per member).
//! - Deleting a next-hop object behaves as Linux does: routes using it are deleted, it leaves every
//!   group holding it, and a group left empty is deleted in turn, with its routes.
//! - Reconnects: [`Rib::begin_replay`] marks everything stale, whatever zebra re-sends is fresh
//!   again (and unchanged, so silent), and [`Rib::sweep`] deletes what is still stale. The table
//!   is never flushed and re-added.
//! - Handover: [`Rib::write_messages`] writes the whole RIB as netlink messages from which a
//!   fresh RIB (a replacing process's) rebuilds an equal one.

mod check;
mod dump;
mod index;
mod objects;
mod sets;

#[cfg(test)]
mod dump_tests;
#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;

use rustc_hash::FxHashMap;

use index::KeyIndex;
use sets::{Kind, SetTable};
pub use sets::{NhSet, NhSetId};

use crate::netlink::{GroupMember, Msg, NextHop, Nexthop, Op, Prefix, Route, RouteType};

/// Where a route lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RouteKey {
    pub table: u32,
    pub prefix: Prefix,
}

/// What the consumer must do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A new set, before the first route using it: map it to a forwarding next hop.
    SetAdded { id: NhSetId, set: NhSet },
    /// Install or replace `key` to forward through `set`. `replaced`: the consumer had the route.
    Upsert {
        key: RouteKey,
        set: NhSetId,
        replaced: bool,
    },
    /// Remove `key` (it was installed).
    Removed { key: RouteKey },
    /// The next-hop object behind the bound set `id` changed: every route using `id` now
    /// forwards through `set`, with no change of its own (the consumer updates one object).
    SetChanged { id: NhSetId, set: NhSet },
    /// No route uses `id` any more (always after the changes that stopped using it).
    SetRemoved { id: NhSetId },
}

/// Counters: gauges of what is held, and totals of what happened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Routes held, resolved or not.
    pub routes: u64,
    /// Routes held whose next-hop object is not defined (not installed).
    pub routes_unresolved: u64,
    /// Next-hop objects defined.
    pub nexthops: u64,
    /// Interned sets alive.
    pub sets: u64,
    pub route_adds: u64,
    /// A new route for a key that had one (with `NLM_F_REPLACE` or not).
    pub route_replaces: u64,
    /// A route re-sent as it was (a replay, mostly).
    pub route_unchanged: u64,
    pub route_dels: u64,
    /// Deletes of a key not held.
    pub route_del_unknown: u64,
    pub nh_adds: u64,
    pub nh_changes: u64,
    pub nh_unchanged: u64,
    pub nh_dels: u64,
    pub nh_del_unknown: u64,
    /// Route references to a next-hop id not defined at the time.
    pub unresolved_refs: u64,
    /// Routes deleted because their next-hop object was.
    pub routes_flushed: u64,
    /// Delete + add pairs within a batch given as one replace.
    pub coalesced: u64,
    /// Messages that do not concern forwarding: other types, other route types.
    pub ignored: u64,
    /// Routes and next-hop objects with MPLS labels (an encapsulation): not installed, and what
    /// they replace removed, until Linerate pushes labels itself.
    pub labelled: u64,
    pub swept_routes: u64,
    pub swept_nexthops: u64,
}

/// The state of one route, as [`Rib::route`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteState {
    /// `None`: unresolved, not installed.
    pub set: Option<NhSetId>,
    /// The next-hop object it refers to, 0 if none.
    pub nh_id: u32,
}

const NIL: u32 = u32::MAX;

/// Routes warmed at a time (see [`Rib::warm`]): their lines must still be cached when applied.
const WARM_CHUNK: usize = 256;

struct RouteEntry {
    key: RouteKey,
    set: Option<NhSetId>,
    nh_id: u32,
    gen: u32,
    /// Links in the user list of `nh_id` (NIL-terminated).
    prev: u32,
    next: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum NhDef {
    Single(NextHop),
    Blackhole,
    Group(Box<[GroupMember]>),
}

/// A next-hop object, or a placeholder (`def: None`) for an id that routes or groups name before
/// it is defined.
#[derive(Default)]
struct NhObj {
    def: Option<NhDef>,
    set: Option<NhSetId>,
    gen: u32,
    /// First route of the user list.
    head: u32,
    users: u32,
    /// Groups listing this id, once each.
    parents: Vec<u32>,
}

impl NhObj {
    fn placeholder() -> Self {
        Self {
            head: NIL,
            ..Self::default()
        }
    }
}

/// The FPM RIB. See the module documentation for its semantics.
pub struct Rib {
    routes: Vec<RouteEntry>,
    free_routes: Vec<u32>,
    index: KeyIndex,
    nhs: FxHashMap<u32, NhObj>,
    sets: SetTable,
    /// Current replay generation; an entry with another is stale.
    gen: u32,
    c: Counters,
    defined_nhs: u64,
    unresolved: u64,
    scratch: Vec<NextHop>,
    /// Batch-local: where in the output a key's removal was emitted.
    removed_at: FxHashMap<RouteKey, usize>,
    /// Batch-local: output positions to drop (removals a later add made a replace).
    dead: Vec<usize>,
}

impl Default for Rib {
    fn default() -> Self {
        Self::new()
    }
}

impl Rib {
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// A RIB with room for `routes` routes before its tables grow (a full table is known in
    /// advance; growing a million-entry map mid-replay costs a pause).
    pub fn with_capacity(routes: usize) -> Self {
        Self {
            routes: Vec::with_capacity(routes),
            free_routes: Vec::new(),
            index: KeyIndex::with_capacity(routes),
            nhs: FxHashMap::default(),
            sets: SetTable::default(),
            gen: 0,
            c: Counters::default(),
            defined_nhs: 0,
            unresolved: 0,
            scratch: Vec::new(),
            removed_at: FxHashMap::default(),
            dead: Vec::new(),
        }
    }

    /// Applies one message (a batch of one).
    pub fn apply(&mut self, msg: &Msg<'_>) -> Vec<Change> {
        self.apply_batch(std::slice::from_ref(msg))
    }

    /// Applies `msgs` in order and returns their net effect (see the module documentation).
    pub fn apply_batch(&mut self, msgs: &[Msg<'_>]) -> Vec<Change> {
        let mut out = Vec::new();
        self.apply_batch_into(msgs, &mut out);
        out
    }

    /// [`apply_batch`](Self::apply_batch), appending to `out` (reused by the caller).
    pub fn apply_batch_into(&mut self, msgs: &[Msg<'_>], out: &mut Vec<Change>) {
        for chunk in msgs.chunks(WARM_CHUNK) {
            self.warm(chunk);
            for m in chunk {
                match m {
                    Msg::Route(r) => self.route_msg(r, out),
                    Msg::Nexthop(n) => self.nexthop_msg(n, out),
                    Msg::Other { .. } => self.c.ignored += 1,
                }
            }
        }
        self.finish_batch(out);
    }

    /// Loads the index slots (and slab entries) the routes of `msgs` are about to touch, all
    /// at once: the loads are independent, so their cache misses overlap instead of following
    /// one another as they do when each route is applied in turn. Safe code's prefetch.
    fn warm(&self, msgs: &[Msg<'_>]) {
        if msgs.len() < 8 {
            return;
        }
        let mut acc = 0u64;
        for m in msgs {
            if let Msg::Route(r) = m {
                let key = RouteKey {
                    table: r.table,
                    prefix: r.prefix,
                };
                acc ^= self.index.touch(&self.routes, &key);
            }
        }
        std::hint::black_box(acc);
    }

    /// Marks every route and next-hop object stale; call when zebra (re)connects, before its
    /// replay.
    pub fn begin_replay(&mut self) {
        self.gen = self.gen.wrapping_add(1);
    }

    /// Deletes what the replay did not re-send: stale routes, then stale next-hop objects (with
    /// the Linux semantics of a delete). Returns the removals.
    pub fn sweep(&mut self) -> Vec<Change> {
        let mut out = Vec::new();
        let stale: Vec<u32> = self
            .index
            .iter()
            .filter(|&i| self.routes[i as usize].gen != self.gen)
            .collect();
        self.c.swept_routes += stale.len() as u64;
        for i in stale {
            self.remove_route(i, &mut out);
        }
        let stale: Vec<u32> = self
            .nhs
            .iter()
            .filter(|(_, o)| o.def.is_some() && o.gen != self.gen)
            .map(|(&id, _)| id)
            .collect();
        for id in stale {
            if self.nhs.get(&id).is_some_and(|o| o.def.is_some()) {
                self.c.swept_nexthops += 1;
                self.delete_nh(id, &mut out);
            }
        }
        self.finish_batch(&mut out);
        out
    }

    /// The content of a live set.
    pub fn set(&self, id: NhSetId) -> Option<&NhSet> {
        self.sets.get(id)
    }

    /// The routes using set `id`: those naming its next-hop object if it is bound (the
    /// consumer needs them only when a bound set starts or stops resolving for it), otherwise
    /// found by a walk over every route.
    pub fn routes_using(&self, id: NhSetId) -> Vec<RouteKey> {
        if self.sets.is_bound(id) {
            if let Some((&nh, _)) = self.nhs.iter().find(|(_, o)| o.set == Some(id)) {
                return self
                    .users(nh)
                    .into_iter()
                    .map(|i| self.routes[i as usize].key)
                    .collect();
            }
        }
        self.index
            .iter()
            .map(|i| &self.routes[i as usize])
            .filter(|e| e.set == Some(id))
            .map(|e| e.key)
            .collect()
    }

    pub fn route(&self, key: &RouteKey) -> Option<RouteState> {
        let e = &self.routes[self.index.get(&self.routes, key)? as usize];
        Some(RouteState {
            set: e.set,
            nh_id: e.nh_id,
        })
    }

    /// Every route held, in no particular order.
    pub fn routes(&self) -> impl Iterator<Item = (RouteKey, RouteState)> + '_ {
        self.index.iter().map(|i| {
            let e = &self.routes[i as usize];
            let st = RouteState {
                set: e.set,
                nh_id: e.nh_id,
            };
            (e.key, st)
        })
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.len() == 0
    }

    pub fn counters(&self) -> Counters {
        Counters {
            routes: self.index.len() as u64,
            routes_unresolved: self.unresolved,
            nexthops: self.defined_nhs,
            sets: self.sets.live() as u64,
            ..self.c
        }
    }

    // ---- routes ----

    fn route_msg(&mut self, r: &Route<'_>, out: &mut Vec<Change>) {
        let key = RouteKey {
            table: r.table,
            prefix: r.prefix,
        };
        // A labelled route cannot be forwarded without its labels: it replaces (removes) what
        // the prefix had and is not installed.
        if r.op == Op::New && r.encap {
            self.c.labelled += 1;
            if let Some(i) = self.index.get(&self.routes, &key) {
                self.remove_route(i, out);
            }
            return;
        }
        if r.op == Op::Del {
            match self.index.get(&self.routes, &key) {
                Some(i) => {
                    self.c.route_dels += 1;
                    self.remove_route(i, out);
                }
                None => self.c.route_del_unknown += 1,
            }
            return;
        }
        let (nh_id, set) = match r.rtype {
            RouteType::Unicast if r.nh_id != 0 => (r.nh_id, None),
            RouteType::Unicast => (0, self.inline_set(r, out)),
            RouteType::Blackhole => (0, Some(self.sets.acquire(Kind::Blackhole, &[], out))),
            RouteType::Unreachable => (0, Some(self.sets.acquire(Kind::Unreachable, &[], out))),
            RouteType::Prohibit => (0, Some(self.sets.acquire(Kind::Prohibit, &[], out))),
            RouteType::Other(_) => {
                self.c.ignored += 1;
                return;
            }
        };
        // One probe of the (large, cache-cold) key index for both the lookup and the insert.
        let (idx, existed) = match self.index.entry(&self.routes, &key) {
            Ok(i) => (i, true),
            Err(v) => {
                let e = RouteEntry {
                    key,
                    set: None,
                    nh_id: 0,
                    gen: self.gen,
                    prev: NIL,
                    next: NIL,
                };
                let idx = match self.free_routes.pop() {
                    Some(i) => {
                        self.routes[i as usize] = e;
                        i
                    }
                    None => {
                        self.routes.push(e);
                        (self.routes.len() - 1) as u32
                    }
                };
                self.index.insert(v, idx);
                self.unresolved += 1;
                (idx, false)
            }
        };
        let e = &mut self.routes[idx as usize];
        e.gen = self.gen;
        if e.nh_id != nh_id {
            self.unlink(idx);
            if nh_id != 0 {
                self.link(idx, nh_id);
            }
        }
        let set = if nh_id != 0 {
            let obj = &self.nhs[&nh_id];
            if obj.def.is_none() {
                self.c.unresolved_refs += 1;
            }
            let s = obj.set;
            if let Some(s) = s {
                self.sets.retain(s);
            }
            s
        } else {
            set
        };
        let changed = self.set_route(idx, set, out);
        if !existed {
            self.c.route_adds += 1;
        } else if changed {
            self.c.route_replaces += 1;
        } else {
            self.c.route_unchanged += 1;
        }
    }

    /// The set of a route's own next hops (`RTA_GATEWAY`/`RTA_OIF` or `RTA_MULTIPATH`); `None`
    /// if it has none.
    fn inline_set(&mut self, r: &Route<'_>, out: &mut Vec<Change>) -> Option<NhSetId> {
        self.scratch.clear();
        if !r.multipath.is_empty() {
            self.scratch.extend(r.multipath.iter());
        } else if r.gateway.is_some() || r.oif != 0 {
            self.scratch.push(NextHop::new(r.gateway, r.oif));
        }
        if self.scratch.is_empty() {
            return None;
        }
        self.scratch.sort_unstable();
        Some(self.sets.acquire(Kind::Forward, &self.scratch, out))
    }

    /// Gives route `idx` the set `new` (a reference already taken); emits and counts. Returns
    /// whether the installed state changed.
    fn set_route(&mut self, idx: u32, new: Option<NhSetId>, out: &mut Vec<Change>) -> bool {
        let e = &mut self.routes[idx as usize];
        let old = std::mem::replace(&mut e.set, new);
        let key = e.key;
        match (old, new) {
            (Some(a), Some(b)) if a == b => {
                self.sets.release(a);
                false
            }
            (old, Some(b)) => {
                match old {
                    Some(a) => self.sets.release(a),
                    None => self.unresolved -= 1,
                }
                self.emit_upsert(key, b, old.is_some(), out);
                true
            }
            (Some(a), None) => {
                self.sets.release(a);
                self.unresolved += 1;
                self.emit_removed(key, out);
                true
            }
            (None, None) => false,
        }
    }

    fn remove_route(&mut self, idx: u32, out: &mut Vec<Change>) {
        self.set_route(idx, None, out);
        self.unresolved -= 1;
        self.unlink(idx);
        let key = self.routes[idx as usize].key;
        self.index.remove(&self.routes, &key);
        self.free_routes.push(idx);
    }

    fn emit_upsert(
        &mut self,
        key: RouteKey,
        set: NhSetId,
        mut replaced: bool,
        out: &mut Vec<Change>,
    ) {
        if !self.removed_at.is_empty() {
            if let Some(at) = self.removed_at.remove(&key) {
                self.dead.push(at);
                self.c.coalesced += 1;
                replaced = true;
            }
        }
        out.push(Change::Upsert { key, set, replaced });
    }

    fn emit_removed(&mut self, key: RouteKey, out: &mut Vec<Change>) {
        self.removed_at.insert(key, out.len());
        out.push(Change::Removed { key });
    }

    fn finish_batch(&mut self, out: &mut Vec<Change>) {
        self.sets.collect(out);
        if !self.dead.is_empty() {
            self.dead.sort_unstable();
            let mut dead = self.dead.iter().peekable();
            let mut i = 0;
            out.retain(|_| {
                let drop = dead.next_if_eq(&&i).is_some();
                i += 1;
                !drop
            });
            self.dead.clear();
        }
        if !self.removed_at.is_empty() {
            self.removed_at.clear();
        }
    }

    // ---- user lists ----

    /// Puts route `idx` on the user list of `nh_id`, creating a placeholder if the id is unknown.
    fn link(&mut self, idx: u32, nh_id: u32) {
        let obj = self.nhs.entry(nh_id).or_insert_with(NhObj::placeholder);
        let head = obj.head;
        obj.head = idx;
        obj.users += 1;
        if head != NIL {
            self.routes[head as usize].prev = idx;
        }
        let e = &mut self.routes[idx as usize];
        e.nh_id = nh_id;
        e.prev = NIL;
        e.next = head;
    }

    /// Takes route `idx` off its next-hop object's user list (if any).
    fn unlink(&mut self, idx: u32) {
        let e = &mut self.routes[idx as usize];
        let (nh_id, prev, next) = (e.nh_id, e.prev, e.next);
        if nh_id == 0 {
            return;
        }
        e.nh_id = 0;
        e.prev = NIL;
        e.next = NIL;
        if next != NIL {
            self.routes[next as usize].prev = prev;
        }
        if prev != NIL {
            self.routes[prev as usize].next = next;
        }
        let obj = self
            .nhs
            .get_mut(&nh_id)
            .expect("linked route's object exists");
        if prev == NIL {
            obj.head = next;
        }
        obj.users -= 1;
        self.gc(nh_id);
    }

    fn users(&self, nh_id: u32) -> Vec<u32> {
        let mut v = Vec::new();
        let mut i = self.nhs.get(&nh_id).map_or(NIL, |o| o.head);
        while i != NIL {
            v.push(i);
            i = self.routes[i as usize].next;
        }
        v
    }

    /// Drops a placeholder nothing refers to any more.
    fn gc(&mut self, id: u32) {
        if let Some(o) = self.nhs.get(&id) {
            if o.def.is_none() && o.users == 0 && o.parents.is_empty() {
                self.nhs.remove(&id);
            }
        }
    }
}
