//! IGMP/MLD snooping's table (RFC 4541): per bridge domain, which members want each group (and,
//! from IGMPv3/MLDv2 hosts in include mode, from which sources), and which members lead to
//! multicast routers.
//!
//! Written by the workers as they read membership messages (`node::l2_mcast`: rare, under a
//! lock) and by a sweep that ages memberships out; read by the workers for every multicast data
//! frame, without a lock: each group's forwarding entry is an immutable [`Entry`] in a slot of
//! an open-addressed array of `ArcSwapOption`, replaced whole when its membership changes, so a
//! reader sees the old list or the new one, never a mix, and a join is forwarded to as soon as
//! the worker that read it has published it (microseconds, not a commit).
//!
//! Slots are claimed by a group's key and never given back (an entry whose members all left
//! stays as an empty one, with its counters, until the table is made again at start): probing
//! never meets a hole that was once full, which is what lets readers probe without a lock. The
//! table holds `2 x groups` slots for the `limits.mcast-groups` groups it is made for.
//!
//! Membership follows RFC 3376's host records loosely, as RFC 4541 allows a snooping switch:
//! exclude-mode records (IGMPv2 and MLDv1 joins among them) are "every source", include-mode
//! records name sources; a leave (or a source blocked) lives on for the last-member interval
//! while a querier asks whether anyone else on the member still wants it, or ends at once on a
//! fast-leave member. Exclude-mode source lists are not kept: such a member gets every source
//! (more than asked, never less).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arc_swap::ArcSwapOption;
use packet::mcast::{Record, RecordKind};

/// A group in a bridge domain (IPv4 groups in the low 32 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey {
    pub bridge: u16,
    pub v6: bool,
    pub group: u128,
}

impl GroupKey {
    /// The key under which a bridge's multicast-router members are kept (0 is no group).
    pub fn routers(bridge: u16) -> GroupKey {
        GroupKey {
            bridge,
            v6: false,
            group: 0,
        }
    }

    #[inline(always)]
    fn hash(&self) -> usize {
        let x = (self.group as u64)
            ^ ((self.group >> 64) as u64).rotate_left(17)
            ^ u64::from(self.bridge) << 48
            ^ u64::from(self.v6);
        (x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20) as usize
    }
}

/// What one group's traffic did, kept across the entry's versions.
#[derive(Debug, Default)]
pub struct EntryCounters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Copies sent (a frame to 24 members is 24).
    pub replicas: AtomicU64,
}

/// One group's forwarding entry as the workers read it.
#[derive(Debug)]
pub struct Entry {
    pub key: GroupKey,
    /// Member ids that get the group from every source, sorted.
    pub any: Box<[u32]>,
    /// Per source some member asked for by name: the members that get it (`any` included),
    /// sorted by source.
    pub by_source: Box<[(u128, Box<[u32]>)]>,
    pub counters: Arc<EntryCounters>,
}

impl Entry {
    /// The members that get the group's traffic from `source`.
    #[inline(always)]
    pub fn members_for(&self, source: u128) -> &[u32] {
        if self.by_source.is_empty() {
            return &self.any;
        }
        match self.by_source.binary_search_by_key(&source, |s| s.0) {
            Ok(i) => &self.by_source[i].1,
            Err(_) => &self.any,
        }
    }

    /// Nobody wants the group: its traffic is unregistered.
    pub fn is_empty(&self) -> bool {
        self.any.is_empty() && self.by_source.is_empty()
    }
}

/// A bridge domain's snooping settings (from its config; `Bridge::snoop`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnoopSettings {
    /// Groups nobody joined are flooded (else sent to multicast-router members only).
    pub flood_unregistered: bool,
    /// Every member leaves at once on a leave (one host per member).
    pub fast_leave_all: bool,
    /// Member ids that leave at once.
    pub fast_leave: Box<[u32]>,
    /// Member ids configured as multicast-router members (others are learned).
    pub static_mrouters: Box<[u32]>,
    /// Groups with members in the bridge, at most (0: no limit beyond the table's).
    pub max_groups: u32,
    /// Groups one member may join, at most (0: no limit).
    pub max_groups_per_member: u32,
    /// How long a join (or a router's query or hello) lives without a refresh.
    pub membership_ms: u64,
    /// How long a leave waits for another host on the member to say it still listens.
    pub last_member_ms: u64,
    /// The bridge's own querier, where it has one (sent by the control plane).
    pub querier: Option<Querier>,
}

/// A bridge's own IGMP/MLD querier (RFC 4541 2.1.1's "proxy querier" when it has no address):
/// general queries every `interval_ms`, from `mac`, IPv4 source `src_v4` (0.0.0.0 without one)
/// and the IPv6 link-local address made from `mac` (EUI-64).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Querier {
    pub interval_ms: u64,
    pub mac: [u8; 6],
    pub src_v4: std::net::Ipv4Addr,
}

impl Default for SnoopSettings {
    fn default() -> Self {
        SnoopSettings {
            flood_unregistered: true,
            fast_leave_all: false,
            fast_leave: Box::new([]),
            static_mrouters: Box::new([]),
            max_groups: 0,
            max_groups_per_member: 0,
            // RFC 3376 8.4: robustness 2 x query interval 125 s + response 10 s.
            membership_ms: 260_000,
            // RFC 3376 8.8: last member query count 2 x interval 1 s.
            last_member_ms: 2_000,
            querier: None,
        }
    }
}

/// The table's counters (all bridges).
#[derive(Debug, Default)]
pub struct SnoopCounters {
    pub reports: AtomicU64,
    pub leaves: AtomicU64,
    pub queries: AtomicU64,
    /// General queries the bridges' own queriers sent (IGMP and MLD each count).
    pub queries_sent: AtomicU64,
    pub pim_hellos: AtomicU64,
    /// Membership messages that did not parse (dropped, not forwarded).
    pub malformed: AtomicU64,
    /// Memberships (group, member) made and ended (by a leave or by age).
    pub joined: AtomicU64,
    pub ended: AtomicU64,
    /// Joins refused: at a bridge's or a member's group limit, or with the table full.
    pub limit: AtomicU64,
    pub table_full: AtomicU64,
}

/// What one member wants of a group: every source until `any` (ms on the table's clock; 0 or
/// past: no), and these sources until their times.
#[derive(Clone, Debug, Default)]
struct Membership {
    any: u64,
    sources: Vec<(u128, u64)>,
    /// Counted in its member's groups (for the per-member limit).
    counted: bool,
}

impl Membership {
    fn live(&self, now: u64) -> bool {
        self.any > now || self.sources.iter().any(|s| s.1 > now)
    }
}

#[derive(Debug)]
struct Group {
    slot: usize,
    members: HashMap<u32, Membership>,
    counters: Arc<EntryCounters>,
    /// Counted in its bridge's groups (for the per-bridge limit).
    counted: bool,
}

#[derive(Default)]
struct State {
    groups: HashMap<GroupKey, Group>,
    /// Live memberships per member, and groups with members per bridge (for the limits).
    per_member: HashMap<u32, u32>,
    per_bridge: HashMap<u16, u32>,
    used: usize,
}

/// One membership as `show igmp snooping groups` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberView {
    pub member: u32,
    /// Gets every source: for this many more ms.
    pub any_ms: Option<u64>,
    /// Sources asked for by name, each with the ms it has left.
    pub sources: Vec<(u128, u64)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupView {
    pub key: GroupKey,
    pub members: Vec<MemberView>,
    pub packets: u64,
    pub bytes: u64,
    pub replicas: u64,
}

pub struct SnoopTable {
    slots: Box<[ArcSwapOption<Entry>]>,
    mask: usize,
    epoch: Instant,
    state: Mutex<State>,
    pub counters: SnoopCounters,
}

/// What one membership message changed, for the node's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    pub joined: u32,
    pub refused: u32,
}

impl SnoopTable {
    /// A table for `groups` groups (and routers' keys) in all bridges together.
    pub fn new(groups: usize) -> SnoopTable {
        let n = (groups.max(16) * 2).next_power_of_two();
        SnoopTable {
            slots: (0..n).map(|_| ArcSwapOption::empty()).collect(),
            mask: n - 1,
            epoch: Instant::now(),
            state: Mutex::new(State::default()),
            counters: SnoopCounters::default(),
        }
    }

    /// Groups the table is made for.
    pub fn capacity(&self) -> usize {
        self.slots.len() / 2
    }

    /// The table's clock, in ms.
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    /// Calls `f` with the entry of `key`, if the table has one (empty or not).
    #[inline(always)]
    pub fn with<R>(&self, key: GroupKey, f: impl FnOnce(Option<&Entry>) -> R) -> R {
        let mut i = key.hash() & self.mask;
        for _ in 0..self.slots.len() {
            let g = self.slots[i].load();
            match g.as_deref() {
                None => return f(None),
                Some(e) if e.key == key => return f(Some(e)),
                Some(_) => i = (i + 1) & self.mask,
            }
        }
        f(None)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for `key` (claimed by it already, or free); None when the table is full.
    fn claim(&self, st: &mut State, key: GroupKey) -> Option<usize> {
        if st.used >= self.capacity() {
            return None;
        }
        let mut i = key.hash() & self.mask;
        loop {
            match self.slots[i].load().as_deref() {
                None => break,
                Some(e) if e.key == key => return Some(i),
                Some(_) => i = (i + 1) & self.mask,
            }
        }
        st.used += 1;
        Some(i)
    }

    /// Applies the group records a member sent (`v6`: MLD), at `now` on the table's clock.
    pub fn apply(
        &self,
        bridge: u16,
        member: u32,
        v6: bool,
        records: &[Record],
        s: &SnoopSettings,
        now: u64,
    ) -> Applied {
        let fast = s.fast_leave_all || s.fast_leave.contains(&member);
        let gone = if fast { now } else { now + s.last_member_ms };
        let live_until = now + s.membership_ms;
        let mut st = self.lock();
        let mut out = Applied::default();
        for r in records {
            if link_scope(r.group) {
                // Always flooded (RFC 4541 2.1.2): hosts report their solicited-node groups
                // when queried, and such groups must not take the table's or a member's room.
                continue;
            }
            let group = match r.group {
                std::net::IpAddr::V4(g) => u128::from(u32::from(g)),
                std::net::IpAddr::V6(g) => u128::from(g),
            };
            let key = GroupKey { bridge, v6, group };
            let srcs = r.sources.iter().map(|s| match s {
                std::net::IpAddr::V4(a) => u128::from(u32::from(*a)),
                std::net::IpAddr::V6(a) => u128::from(*a),
            });
            let wants = match r.kind {
                RecordKind::IsExclude | RecordKind::ToExclude => true,
                RecordKind::IsInclude | RecordKind::Allow | RecordKind::ToInclude => {
                    !r.sources.is_empty()
                }
                RecordKind::Block => false,
            };
            // A new membership must pass the limits first.
            let was_live = st
                .groups
                .get(&key)
                .and_then(|g| g.members.get(&member))
                .is_some_and(|m| m.live(now));
            if wants && !was_live {
                let group_live = st
                    .groups
                    .get(&key)
                    .is_some_and(|g| g.members.values().any(|m| m.live(now)));
                let member_n = st.per_member.get(&member).copied().unwrap_or(0);
                let bridge_n = st.per_bridge.get(&bridge).copied().unwrap_or(0);
                let over = (s.max_groups_per_member > 0 && member_n >= s.max_groups_per_member)
                    || (!group_live && s.max_groups > 0 && bridge_n >= s.max_groups);
                if over {
                    self.counters.limit.fetch_add(1, Ordering::Relaxed);
                    out.refused += 1;
                    continue;
                }
                if !st.groups.contains_key(&key) {
                    let Some(slot) = self.claim(&mut st, key) else {
                        self.counters.table_full.fetch_add(1, Ordering::Relaxed);
                        out.refused += 1;
                        continue;
                    };
                    st.groups.insert(
                        key,
                        Group {
                            slot,
                            members: HashMap::new(),
                            counters: Arc::default(),
                            counted: false,
                        },
                    );
                }
            }
            let Some(g) = st.groups.get_mut(&key) else {
                // A leave or block for a group nobody joined.
                continue;
            };
            let m = g.members.entry(member).or_default();
            match r.kind {
                RecordKind::IsExclude | RecordKind::ToExclude => m.any = live_until,
                RecordKind::IsInclude | RecordKind::Allow | RecordKind::ToInclude => {
                    let listed: Vec<u128> = srcs.collect();
                    if r.kind == RecordKind::ToInclude {
                        // The member's hosts now want only these: the rest (every source
                        // included) ends after the last-member interval.
                        if m.any > now {
                            m.any = m.any.min(gone);
                        }
                        for s in &mut m.sources {
                            if !listed.contains(&s.0) {
                                s.1 = s.1.min(gone);
                            }
                        }
                    }
                    for a in listed {
                        match m.sources.iter_mut().find(|s| s.0 == a) {
                            Some(s) => s.1 = live_until,
                            None => m.sources.push((a, live_until)),
                        }
                    }
                }
                RecordKind::Block => {
                    let listed: Vec<u128> = srcs.collect();
                    for s in &mut m.sources {
                        if listed.contains(&s.0) {
                            s.1 = s.1.min(gone);
                        }
                    }
                }
            }
            let now_live = m.live(now);
            if now_live && !was_live {
                out.joined += 1;
                self.counters.joined.fetch_add(1, Ordering::Relaxed);
            }
            self.settle(&mut st, key, member, now);
        }
        out
    }

    /// After a change of `member` in group `key`: the counts for the limits (each membership
    /// and group knows whether it is counted, so one that expired unseen is put right by the
    /// next look), the membership removed if nothing of it is left, the entry published again.
    fn settle(&self, st: &mut State, key: GroupKey, member: u32, now: u64) {
        let Some(g) = st.groups.get_mut(&key) else {
            return;
        };
        let mut member_delta = 0i32;
        if let Some(m) = g.members.get_mut(&member) {
            let live = m.live(now);
            if live != m.counted {
                m.counted = live;
                member_delta = if live { 1 } else { -1 };
            }
            if !live {
                g.members.remove(&member);
            }
        }
        let group_live = g.members.values().any(|m| m.live(now));
        let mut bridge_delta = 0i32;
        if group_live != g.counted {
            g.counted = group_live;
            bridge_delta = if group_live { 1 } else { -1 };
        }
        let entry = build_entry(key, g, now);
        self.slots[g.slot].store(Some(Arc::new(entry)));
        if member_delta < 0 {
            self.counters.ended.fetch_add(1, Ordering::Relaxed);
        }
        let add = |n: &mut u32, d: i32| *n = n.saturating_add_signed(d);
        add(st.per_member.entry(member).or_default(), member_delta);
        add(st.per_bridge.entry(key.bridge).or_default(), bridge_delta);
    }

    /// A multicast router is on `member` (it sent a query or a PIM hello): it gets every group's
    /// traffic, and the reports, for the membership interval.
    pub fn router_seen(&self, bridge: u16, member: u32, s: &SnoopSettings, now: u64) {
        let key = GroupKey::routers(bridge);
        let mut st = self.lock();
        if !st.groups.contains_key(&key) {
            let Some(slot) = self.claim(&mut st, key) else {
                self.counters.table_full.fetch_add(1, Ordering::Relaxed);
                return;
            };
            st.groups.insert(
                key,
                Group {
                    slot,
                    members: HashMap::new(),
                    counters: Arc::default(),
                    counted: false,
                },
            );
        }
        let g = st.groups.get_mut(&key).expect("inserted above");
        let m = g.members.entry(member).or_default();
        let fresh = m.any <= now;
        m.any = now + s.membership_ms;
        // Republished only when the list changes: a query a minute must not churn entries.
        if fresh {
            let entry = build_entry(key, g, now);
            self.slots[g.slot].store(Some(Arc::new(entry)));
        }
    }

    /// Ends every membership (and router member) whose time has passed; returns how many.
    pub fn sweep(&self, now: u64) -> usize {
        let mut st = self.lock();
        let due: Vec<(GroupKey, u32)> = st
            .groups
            .iter()
            .flat_map(|(k, g)| {
                g.members
                    .iter()
                    .filter(|(_, m)| {
                        // Something in it expired (a part or all of it).
                        (m.any != 0 && m.any <= now) || m.sources.iter().any(|s| s.1 <= now)
                    })
                    .map(move |(&id, _)| (*k, id))
            })
            .collect();
        let n = due.len();
        for (key, member) in due {
            if key.group == 0 {
                self.routers_settle(&mut st, key, now);
                continue;
            }
            let g = st.groups.get_mut(&key).expect("listed above");
            let m = g.members.get_mut(&member).expect("listed above");
            // It was live (else it would have been removed when it stopped being so): the
            // parts that expired go, and settle counts it ended if nothing is left.
            if m.any <= now {
                m.any = 0;
            }
            m.sources.retain(|s| s.1 > now);
            self.settle(&mut st, key, member, now);
        }
        n
    }

    fn routers_settle(&self, st: &mut State, key: GroupKey, now: u64) {
        let g = st.groups.get_mut(&key).expect("listed");
        g.members.retain(|_, m| m.any > now);
        let entry = build_entry(key, g, now);
        self.slots[g.slot].store(Some(Arc::new(entry)));
    }

    /// Ends every membership in `bridge` (None: all bridges), routers included; returns how
    /// many memberships ended.
    pub fn clear(&self, bridge: Option<u16>) -> usize {
        let mut st = self.lock();
        let keys: Vec<GroupKey> = st
            .groups
            .keys()
            .filter(|k| bridge.is_none_or(|b| k.bridge == b))
            .copied()
            .collect();
        let mut n = 0;
        let now = self.now_ms();
        for key in keys {
            let members: Vec<u32> = st.groups[&key].members.keys().copied().collect();
            for member in members {
                let g = st.groups.get_mut(&key).expect("listed");
                let m = g.members.get_mut(&member).expect("listed");
                let counted = m.counted;
                m.any = 0;
                m.sources.clear();
                if key.group == 0 {
                    continue;
                }
                n += usize::from(counted);
                self.settle(&mut st, key, member, now);
            }
            if key.group == 0 {
                self.routers_settle(&mut st, key, now);
            }
        }
        n
    }

    /// Every group with members (routers' keys included, as group 0), sorted by key.
    pub fn view(&self, bridge: Option<u16>) -> Vec<GroupView> {
        let now = self.now_ms();
        let st = self.lock();
        let mut out: Vec<GroupView> = st
            .groups
            .iter()
            .filter(|(k, g)| bridge.is_none_or(|b| k.bridge == b) && !g.members.is_empty())
            .map(|(k, g)| {
                let mut members: Vec<MemberView> = g
                    .members
                    .iter()
                    .filter(|(_, m)| m.live(now))
                    .map(|(&id, m)| MemberView {
                        member: id,
                        any_ms: (m.any > now).then(|| m.any - now),
                        sources: m
                            .sources
                            .iter()
                            .filter(|s| s.1 > now)
                            .map(|s| (s.0, s.1 - now))
                            .collect(),
                    })
                    .collect();
                members.sort_by_key(|m| m.member);
                let c = &g.counters;
                GroupView {
                    key: *k,
                    members,
                    packets: c.packets.load(Ordering::Relaxed),
                    bytes: c.bytes.load(Ordering::Relaxed),
                    replicas: c.replicas.load(Ordering::Relaxed),
                }
            })
            .filter(|v| !v.members.is_empty())
            .collect();
        out.sort_by_key(|v| v.key);
        out
    }

    /// Groups with members, in all bridges (routers' keys not counted).
    pub fn groups(&self) -> usize {
        self.lock().per_bridge.values().map(|&n| n as usize).sum()
    }
}

/// 224.0.0.0/24, or an IPv6 group of scope 2 or less: flooded whoever joined it.
fn link_scope(g: std::net::IpAddr) -> bool {
    match g {
        std::net::IpAddr::V4(a) => a.octets()[..3] == [224, 0, 0],
        std::net::IpAddr::V6(a) => a.octets()[1] & 0x0f <= 2,
    }
}

/// The entry the workers read for `g` at `now`: members live for every source, and per source
/// named by someone, those plus `any`.
fn build_entry(key: GroupKey, g: &Group, now: u64) -> Entry {
    let mut any: Vec<u32> = g
        .members
        .iter()
        .filter(|(_, m)| m.any > now)
        .map(|(&id, _)| id)
        .collect();
    any.sort_unstable();
    let mut by: HashMap<u128, Vec<u32>> = HashMap::new();
    for (&id, m) in &g.members {
        for s in m.sources.iter().filter(|s| s.1 > now) {
            by.entry(s.0).or_default().push(id);
        }
    }
    let mut by_source: Vec<(u128, Box<[u32]>)> = by
        .into_iter()
        .map(|(s, mut ids)| {
            ids.extend(any.iter().copied());
            ids.sort_unstable();
            ids.dedup();
            (s, ids.into_boxed_slice())
        })
        .collect();
    by_source.sort_unstable_by_key(|s| s.0);
    Entry {
        key,
        any: any.into_boxed_slice(),
        by_source: by_source.into_boxed_slice(),
        counters: g.counters.clone(),
    }
}

#[cfg(test)]
mod tests;
