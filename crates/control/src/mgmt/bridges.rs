//! Bridges as the management plane sees them: `show bridge`, `show mac address-table`,
//! `clear mac address-table`, their metrics, and the syslog records of learning refused (a
//! limit, a full table), of flapping addresses and of multicast joins refused.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Weak;
use std::time::{Duration, Instant};

use api::requests::MacQuery;
use api::views::{
    BridgeMemberView, BridgeView, MacCleared, MacEntryView, MacTableStats, MacTableView,
};
use dataplane::l2::{BridgeCounters, MacEntry, MacTable};
use packet::ethernet::MacAddr;

use super::{ApiError, ApiResult, Core};
use crate::bridges::{now_s, BridgesState};
use crate::metrics::{Exposition, Kind};
use crate::syslog::Severity;

/// Entries listed when the query gives no limit.
const DEFAULT_LIMIT: usize = 1000;

impl Core {
    pub fn bridges(&self) -> Vec<BridgeView> {
        let s = self.lock("show.bridge");
        let st = &s.router.bridges;
        let live = s.router.shared.load();
        // Entries per member and statics per bridge: one pass over the table.
        let mut per_member: HashMap<u32, u64> = HashMap::new();
        let mut statics: HashMap<u16, u64> = HashMap::new();
        if let Some(t) = &st.table {
            for e in t.entries(now_s()) {
                *per_member.entry(e.member).or_default() += 1;
                if e.fixed {
                    *statics.entry(e.key.bridge()).or_default() += 1;
                }
            }
        }
        let get = BridgeCounters::get;
        s.router
            .cfg
            .bridges
            .iter()
            .zip(&st.bridges)
            .map(|(cfg, b)| {
                let c = &b.counters;
                BridgeView {
                    name: b.name.clone(),
                    id: b.id,
                    members: b
                        .members
                        .iter()
                        .map(|&ifx| {
                            let ifc = &live.ifs[ifx as usize];
                            let name = &ifc.name;
                            let port = st.ports[name];
                            let m = cfg.members.iter().find(|m| &m.interface == name);
                            BridgeMemberView {
                                interface: name.clone(),
                                vlan: ifc.vlan,
                                s_vlan: ifc.s_vlan,
                                learning: port.learn,
                                blocked: ifc.l2.is_some_and(|l2| l2.blocked),
                                shut: st.shut.contains(name),
                                up: ifc.up,
                                macs: per_member.get(&port.member).copied().unwrap_or(0),
                                tunnel: m.is_some_and(|m| m.tunnel),
                                flexlink: flexlink_role(st, name),
                                storm_dropped: st.storms.get(&port.member).map(|(_, sc)| {
                                    sc.dropped.each_ref().map(|d| d.load(Ordering::Relaxed))
                                }),
                            }
                        })
                        .collect(),
                    learning: cfg.learning,
                    mac_limit: cfg.mac_limit,
                    aging_s: cfg.aging_s,
                    flood_unknown_unicast: b.flood_unknown,
                    bpdu: b.bpdu.name().into(),
                    stp: false,
                    routed_interface: (b.bvi != dataplane::tables::NO_IF)
                        .then(|| live.ifs.get(b.bvi as usize).map(|i| i.name.clone()))
                        .flatten(),
                    macs: st.table.as_ref().map_or(0, |t| t.bridge_len(b.id).into()),
                    static_macs: statics.get(&b.id).copied().unwrap_or(0),
                    forwarded: get(&c.forwarded),
                    flooded: get(&c.flooded),
                    flood_copies: get(&c.flood_copies),
                    unknown_unicast: get(&c.unknown_unicast),
                    learned: get(&c.learned),
                    moved: get(&c.moved),
                    not_learned_limit: get(&c.limit),
                    not_learned_table_full: get(&c.table_full),
                    flaps: get(&c.flaps),
                    storm_control: cfg.storm,
                    storm_dropped: get(&c.storm_dropped),
                    l2pt_tunnelled: get(&c.l2pt),
                }
            })
            .collect()
    }

    pub fn mac_table(&self, q: &MacQuery) -> ApiResult<MacTableView> {
        let s = self.lock("show.mac");
        let st = &s.router.bridges;
        let which = Filter::new(st, q)?;
        let live = s.router.shared.load();
        let mut view = MacTableView {
            table: stats(st.table.as_deref(), s.router.cfg.max_macs),
            ..Default::default()
        };
        let Some(t) = &st.table else {
            return Ok(view);
        };
        let limit = match q.limit {
            Some(0) => usize::MAX,
            Some(n) => n,
            None => DEFAULT_LIMIT,
        };
        let mut rows: Vec<MacEntry> = t
            .entries(now_s())
            .into_iter()
            .filter(|e| which.matches(e))
            .collect();
        view.matched = rows.len() as u64;
        rows.sort_by_key(|e| e.key);
        view.entries = rows
            .iter()
            .take(limit)
            .map(|e| MacEntryView {
                bridge: st
                    .bridge_name(e.key.bridge())
                    .map_or_else(|| format!("id {}", e.key.bridge()), str::to_string),
                mac: MacAddr(e.key.mac()).to_string(),
                interface: live
                    .l2_members
                    .get(e.member as usize)
                    .and_then(|&ifx| live.ifs.get(ifx as usize))
                    .map_or_else(|| "-".into(), |i| i.name.clone()),
                fixed: e.fixed,
                age_s: e.age_s,
            })
            .collect();
        Ok(view)
    }

    /// Removes the dynamic entries `q` picks (static ones are the config's).
    /// Removes learned addresses; a member the learn limit shut (`mac-limit-action:
    /// shutdown`) whose addresses this clears is opened again.
    pub fn mac_clear(&self, q: &MacQuery) -> ApiResult<MacCleared> {
        let mut s = self.lock("clear.mac");
        let st = &s.router.bridges;
        let which = Filter::new(st, q)?;
        let removed = st
            .table
            .as_ref()
            .map_or(0, |t| t.clear(false, |e| which.matches(e)));
        let reopened: Vec<String> = st
            .shut
            .iter()
            .filter(|name| {
                let p = st.ports[name.as_str()];
                let bridge = st.bridges[p.bridge as usize].id;
                which.bridge.is_none_or(|b| b == bridge)
                    && which.member.is_none_or(|m| m == p.member)
            })
            .cloned()
            .collect();
        if !reopened.is_empty() {
            for name in &reopened {
                s.router.bridges.shut.remove(name);
            }
            s.router
                .publish()
                .map_err(|e| ApiError::internal(e.to_string()))?;
            for name in reopened {
                self.logger.log(
                    Severity::Notice,
                    "MAC_LIMIT_RECOVERED",
                    &[("interface", name.clone())],
                    format!("{name}: addresses cleared, the member shut at its bridge's learn limit is open again"),
                );
            }
        }
        Ok(MacCleared {
            removed: removed as u64,
        })
    }

    /// The bridges' and the MAC table's metrics.
    pub(super) fn bridge_metrics(&self, s: &super::State, e: &mut Exposition) {
        let st = &s.router.bridges;
        let Some(t) = &st.table else {
            return;
        };
        e.family(
            "linerate_mac_table_entries",
            Kind::Gauge,
            "Addresses in the MAC table",
        );
        e.sample(&[], t.len() as f64);
        let c = &t.counters;
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        e.family(
            "linerate_mac_table_events_total",
            Kind::Counter,
            "MAC table events: learned, moved, aged, cleared, and sources not learned by why",
        );
        for (what, v) in [
            ("learned", &c.learned),
            ("moved", &c.moved),
            ("aged", &c.aged),
            ("cleared", &c.cleared),
            ("not_learned_limit", &c.limit),
            ("not_learned_table_full", &c.table_full),
            ("not_learned_not_unicast", &c.not_unicast),
            ("flap", &c.flaps),
        ] {
            e.sample(&[("event", what)], r(v));
        }
        e.family(
            "linerate_bridge_frames_total",
            Kind::Counter,
            "Frames switched per bridge domain: forwarded to a learned member, flooded, flood copies sent, unknown unicast, dropped by storm control",
        );
        for b in &st.bridges {
            let c = &b.counters;
            for (what, v) in [
                ("forwarded", &c.forwarded),
                ("flooded", &c.flooded),
                ("flood_copies", &c.flood_copies),
                ("unknown_unicast", &c.unknown_unicast),
                ("storm_dropped", &c.storm_dropped),
                ("l2pt_tunnelled", &c.l2pt),
            ] {
                e.sample(&[("bridge", &b.name), ("kind", what)], r(v));
            }
        }
        e.family(
            "linerate_flexlink_switchovers_total",
            Kind::Counter,
            "Flexlink switchovers per pair (named by its primary)",
        );
        for f in &st.flexlinks {
            let n = f
                .state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .switchovers;
            e.sample(&[("bridge", &f.bridge), ("primary", &f.primary)], n as f64);
        }
        e.family(
            "linerate_flexlink_move_updates_total",
            Kind::Counter,
            "MAC-move update frames sent out of the link that took over, one per address",
        );
        for f in &st.flexlinks {
            let n = f
                .state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .move_updates;
            e.sample(&[("bridge", &f.bridge), ("primary", &f.primary)], n as f64);
        }
        e.family(
            "linerate_bridge_macs",
            Kind::Gauge,
            "Addresses learned per bridge domain",
        );
        for b in &st.bridges {
            e.sample(&[("bridge", &b.name)], t.bridge_len(b.id) as f64);
        }
    }
}

impl Core {
    /// Sends the MAC-move updates owed by Flexlink switchovers: for each pair that switched
    /// since the last call, one frame per address learned behind it (the pair's shared member),
    /// out of the link that took over (see [`crate::bridges::move_update_frame`]). They go
    /// through the punt thread's outbox, paced; without a punt path (the tester's embedded
    /// router) there is no way out and nothing is sent. Returns the frames queued.
    pub fn send_flexlink_updates(&self) -> usize {
        if !self.has_punt_plane() {
            // Nowhere to send them: forget what is owed, so a later switchover starts afresh.
            let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            for f in &s.router.bridges.flexlinks {
                f.state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .move_update_owed = None;
            }
            return 0;
        }
        let frames: Vec<(u16, Vec<u8>)> = {
            let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let st = &s.router.bridges;
            let live = s.router.shared.load();
            let mut frames = Vec::new();
            for f in &st.flexlinks {
                let mut fs = f.state.lock().unwrap_or_else(|e| e.into_inner());
                let Some(to) = fs.move_update_owed.take() else {
                    continue;
                };
                let (Some(b), Some(ifc), Some(t)) = (
                    st.bridges.iter().find(|b| b.name == f.bridge),
                    live.ifs.iter().find(|i| i.name == to),
                    st.table.as_ref(),
                ) else {
                    continue;
                };
                let before = frames.len();
                frames.extend(
                    t.entries(now_s())
                        .into_iter()
                        .filter(|e| e.key.bridge() == b.id && e.member == f.member && !e.fixed)
                        .map(|e| {
                            (
                                ifc.port,
                                crate::bridges::move_update_frame(
                                    e.key.mac(),
                                    ifc.s_vlan,
                                    ifc.vlan,
                                ),
                            )
                        }),
                );
                fs.move_updates += (frames.len() - before) as u64;
            }
            frames
        };
        let n = frames.len();
        if n > 0 {
            self.with_punt_plane(|p| p.send(frames));
        }
        n
    }
}

/// A member's Flexlink role: "primary" or "backup", and whether it is the active one.
fn flexlink_role(st: &BridgesState, name: &str) -> Option<String> {
    st.flexlinks.iter().find_map(|f| {
        let active = f
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .backup_active;
        let role = if f.primary == name {
            ("primary", !active)
        } else if f.backup == name {
            ("backup", active)
        } else {
            return None;
        };
        Some(format!(
            "{} ({})",
            role.0,
            if role.1 { "active" } else { "standby" }
        ))
    })
}

/// Which entries a query names: a bridge, a member, both or all.
struct Filter {
    bridge: Option<u16>,
    member: Option<u32>,
}

impl Filter {
    fn new(st: &BridgesState, q: &MacQuery) -> ApiResult<Filter> {
        let bridge = match &q.bridge {
            Some(n) => Some(
                st.bridges
                    .iter()
                    .find(|b| &b.name == n)
                    .map(|b| b.id)
                    .ok_or_else(|| ApiError::not_found(format!("no bridge named `{n}`")))?,
            ),
            None => None,
        };
        let member = match &q.interface {
            Some(i) => Some(st.ports.get(i).map(|p| p.member).ok_or_else(|| {
                ApiError::not_found(format!("`{i}` is not a member of any bridge"))
            })?),
            None => None,
        };
        Ok(Filter { bridge, member })
    }

    fn matches(&self, e: &MacEntry) -> bool {
        self.bridge.is_none_or(|b| e.key.bridge() == b) && self.member.is_none_or(|m| e.member == m)
    }
}

fn stats(t: Option<&MacTable>, capacity: usize) -> MacTableStats {
    let Some(t) = t else {
        return MacTableStats {
            capacity: capacity as u64,
            ..Default::default()
        };
    };
    let c = &t.counters;
    let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
    MacTableStats {
        capacity: capacity as u64,
        slots: t.slots() as u64,
        bytes: t.bytes() as u64,
        entries: t.len() as u64,
        learned: r(&c.learned),
        moved: r(&c.moved),
        aged: r(&c.aged),
        cleared: r(&c.cleared),
        not_unicast: r(&c.not_unicast),
        limit: r(&c.limit),
        table_full: r(&c.table_full),
        flaps: r(&c.flaps),
    }
}

/// How often a bridge's learning trouble is logged again while it goes on.
const EVENT_INTERVAL: Duration = Duration::from_secs(10);

/// What is logged: per counter, its msgid, severity and text.
const EVENTS: &[(&str, Severity, &str)] = &[
    (
        "MAC_LIMIT",
        Severity::Warning,
        "learn limit reached: addresses beyond it are flooded, not learned",
    ),
    (
        "MAC_TABLE_FULL",
        Severity::Error,
        "MAC table full: new addresses are flooded, not learned",
    ),
    (
        "MAC_FLAP",
        Severity::Warning,
        "addresses flapping between members: moves refused",
    ),
    (
        "IGMP_SNOOPING_LIMIT",
        Severity::Warning,
        "multicast group joins refused: a group limit (max-groups, max-groups-per-port) or the snooping table is full",
    ),
];

fn event_counts(c: &BridgeCounters) -> [u64; 4] {
    [
        BridgeCounters::get(&c.limit),
        BridgeCounters::get(&c.table_full),
        BridgeCounters::get(&c.flaps),
        BridgeCounters::get(&c.mcast_limit),
    ]
}

/// Logs, once a second at most and then once per [`EVENT_INTERVAL`] while it goes on, each
/// bridge whose learning is refused (its limit, a full table) or whose addresses flap: one
/// record per kind with the count since the last one, never one per frame.
pub(super) fn spawn_events(core: Weak<Core>) {
    let _ = std::thread::Builder::new()
        .name("bridge-events".into())
        .spawn(move || {
            // Per (bridge name, kind): the count last logged and when.
            let mut last: HashMap<(String, usize), (u64, Option<Instant>)> = HashMap::new();
            let mut mroute_last: Option<(u64, Option<Instant>)> = None;
            loop {
                std::thread::sleep(Duration::from_secs(1));
                let Some(core) = core.upgrade() else {
                    return;
                };
                let mut switchovers = Vec::new();
                let mut shut_now: Vec<(String, String, u32)> = Vec::new();
                let mroutes_refused: u64;
                let now: Vec<(String, [u64; 4], u32)> = {
                    // Not `lock`: a look a second is not an API command to time.
                    let mut s = core.state.lock().unwrap_or_else(|e| e.into_inner());
                    // Flexlink: a pair whose preemption delay has passed switches back (the
                    // tables are made again), and switchovers are logged.
                    if s.router.bridges.preemption_due() {
                        let _ = s.router.publish();
                    }
                    for f in &s.router.bridges.flexlinks {
                        let mut st = f.state.lock().unwrap_or_else(|e| e.into_inner());
                        switchovers.extend(st.events.drain(..).map(|e| (f.bridge.clone(), e)));
                    }
                    // `mac-limit-action: shutdown`: the member whose source was last refused
                    // at the limit, if the limit refused any since the last look.
                    let st = &s.router.bridges;
                    for (b, c) in st.bridges.iter().zip(&s.router.cfg.bridges) {
                        let refused = BridgeCounters::get(&b.counters.limit);
                        let seen = last.get(&(b.name.clone(), 0)).map_or(0, |e| e.0);
                        if !c.limit_shutdown || refused <= seen {
                            continue;
                        }
                        let m = b.counters.limit_member.load(Ordering::Relaxed);
                        if let Some(name) = st.member_names.get(&m) {
                            if !st.shut.contains(name) {
                                shut_now.push((b.name.clone(), name.clone(), c.mac_limit));
                            }
                        }
                    }
                    if !shut_now.is_empty() {
                        for (_, name, _) in &shut_now {
                            s.router.bridges.shut.insert(name.clone());
                        }
                        let _ = s.router.publish();
                    }
                    mroutes_refused = s
                        .router
                        .mcast
                        .fib
                        .as_ref()
                        .map_or(0, |f| f.counters.table_full.load(Ordering::Relaxed));
                    s.router
                        .bridges
                        .bridges
                        .iter()
                        .zip(&s.router.cfg.bridges)
                        .map(|(b, c)| (b.name.clone(), event_counts(&b.counters), c.mac_limit))
                        .collect()
                };
                core.send_flexlink_updates();
                for (bridge, name, limit) in shut_now {
                    core.logger.log(
                        Severity::Error,
                        "MAC_LIMIT_SHUTDOWN",
                        &[("bridge", bridge.clone()), ("interface", name.clone())],
                        format!("bridge {bridge}: {name} shut: a new address beyond the learn limit ({limit}) came from it; `clear mac address-table --interface {name}` opens it again"),
                    );
                }
                for (bridge, text) in switchovers {
                    core.logger.log(
                        Severity::Warning,
                        "FLEXLINK_SWITCHOVER",
                        &[("bridge", bridge)],
                        text,
                    );
                }
                // The multicast FIB full: routes refused (each commit makes a new FIB, whose
                // count starts from zero).
                let e = mroute_last.get_or_insert((0, None));
                if mroutes_refused > e.0 && e.1.is_none_or(|t| t.elapsed() >= EVENT_INTERVAL) {
                    let n = mroutes_refused - e.0;
                    core.logger.log(
                        Severity::Warning,
                        "MROUTE_LIMIT",
                        &[("count", n.to_string())],
                        format!("multicast routes refused: the multicast FIB is full (limits.mroutes); {n} since the last record"),
                    );
                    *e = (mroutes_refused, Some(Instant::now()));
                } else if mroutes_refused < e.0 {
                    *e = (mroutes_refused, None);
                }
                for (name, counts, limit) in now {
                    for (k, &(msgid, severity, text)) in EVENTS.iter().enumerate() {
                        // A bridge first seen counts from zero: its counters are new (a
                        // bridge a commit keeps keeps its entry here).
                        let e = last.entry((name.clone(), k)).or_insert((0, None));
                        let due = e.1.is_none_or(|t| t.elapsed() >= EVENT_INTERVAL);
                        if counts[k] > e.0 && due {
                            let n = counts[k] - e.0;
                            let mut params =
                                vec![("bridge", name.clone()), ("count", n.to_string())];
                            if k == 0 {
                                params.push(("limit", limit.to_string()));
                            }
                            core.logger.log(
                                severity,
                                msgid,
                                &params,
                                format!("bridge {name}: {text} ({n} since the last record)"),
                            );
                            *e = (counts[k], Some(Instant::now()));
                        } else if counts[k] < e.0 {
                            // The bridge was replaced by a commit: its counters start again.
                            *e = (counts[k], None);
                        }
                    }
                }
            }
        });
}
