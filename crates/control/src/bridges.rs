//! Bridge domains on the control side: the MAC table the workers share, the member ids it
//! stores, and what a config commit changes in it.
//!
//! Reads: the config's `bridges` (see `config::bridges`) and the interfaces' order. Sets: each
//! member interface's `L2Port`, the workers' `Tables::{bridges, l2_members, macs}`; in the MAC
//! table, learn limits, static entries, and the entries a commit makes stale (those of members
//! and bridges removed, statics no longer configured), once the new tables are live
//! ([`BridgesState::apply`]). An ager thread removes entries unseen for their bridge's aging
//! time, sweeping the whole table once a second in ten slices.
//!
//! Member ids are handed out by interface name and kept while the interface stays in the same
//! bridge; ids are never reused, so an entry left by a removed member can only point at no
//! interface (its frames flood), never at a new member.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use dataplane::l2::bridge::StormControl;
use dataplane::l2::snoop::{SnoopSettings, SnoopTable};
use dataplane::l2::{Bridge, BridgeCounters, L2Port, MacKey, MacTable};
use dataplane::tables::NO_IF;

use crate::config::Config;

/// Per bridge id, its aging time in seconds (0: never), read by the ager thread.
type AgingTimes = Arc<Box<[AtomicU32]>>;

pub struct BridgesState {
    /// Made when the first bridge is configured (its size is fixed at start), then kept.
    pub table: Option<Arc<MacTable>>,
    /// The bridges as the workers see them, in config order.
    pub bridges: Vec<Bridge>,
    /// Each member interface's place, by interface name.
    pub ports: HashMap<String, L2Port>,
    /// Member id -> interface name (ids of removed members are absent).
    pub member_names: HashMap<u32, String>,
    next_member: u32,
    /// Each member's bridge id, by interface name: a member that changes bridge gets a new id.
    member_bridge: HashMap<String, u16>,
    /// Static entries: (bridge id, MAC) -> member id.
    statics: HashMap<MacKey, u32>,
    /// Storm control by member id, with the rates it was made for (kept, with its buckets and
    /// counts, while they do not change).
    pub storms: HashMap<u32, ([Option<u32>; 3], Arc<StormControl>)>,
    /// Members in dot1q-tunnel mode, by interface name.
    pub tunnels: HashSet<String>,
    /// Flexlink pairs.
    pub flexlinks: Vec<Flexlink>,
    /// Members shut by `mac-limit-action: shutdown` (by interface name), until their addresses
    /// are cleared.
    pub shut: HashSet<String>,
    aging: Option<AgingTimes>,
    /// IGMP/MLD snooping's groups: made when the first bridge snoops (sized at start), then
    /// kept, with a sweeper thread that ages memberships out.
    pub snoop: Option<Arc<SnoopTable>>,
    /// The table changes this build makes when it goes live (taken by the first `apply`).
    pending: Mutex<Option<Pending>>,
}

#[derive(Default)]
struct Pending {
    clear_members: HashSet<u32>,
    clear_bridges: HashSet<u16>,
    clear_statics: Vec<MacKey>,
    limits: Vec<(u16, u32)>,
    set_statics: Vec<(MacKey, u32)>,
    aging: Vec<(u16, u32)>,
    /// Bridges (ids) that snooped and no longer do: their groups are cleared.
    clear_snoop: Vec<u16>,
}

impl BridgesState {
    /// The bridges of `cfg`, keeping from `prev` the table, the member ids of members that stay
    /// in their bridge, and the counters of bridges that stay.
    pub fn build(cfg: &Config, prev: Option<&BridgesState>) -> BridgesState {
        let table = prev
            .and_then(|p| p.table.clone())
            .or_else(|| (!cfg.bridges.is_empty()).then(|| Arc::new(MacTable::new(cfg.max_macs))));
        let aging = prev.and_then(|p| p.aging.clone()).or_else(|| {
            table.as_ref().map(|t| {
                let a: AgingTimes = Arc::new((0..1 << 16).map(|_| AtomicU32::new(0)).collect());
                spawn_ager(Arc::downgrade(t), a.clone());
                a
            })
        });
        let mut st = BridgesState {
            table,
            bridges: Vec::new(),
            ports: HashMap::new(),
            member_names: HashMap::new(),
            next_member: prev.map_or(1, |p| p.next_member),
            member_bridge: HashMap::new(),
            statics: HashMap::new(),
            storms: HashMap::new(),
            tunnels: HashSet::new(),
            flexlinks: Vec::new(),
            shut: HashSet::new(),
            aging,
            snoop: prev.and_then(|p| p.snoop.clone()).or_else(|| {
                cfg.bridges.iter().any(|b| b.snoop.is_some()).then(|| {
                    let t = Arc::new(SnoopTable::new(cfg.max_mcast_groups));
                    spawn_snoop_sweeper(Arc::downgrade(&t));
                    t
                })
            }),
            pending: Mutex::new(None),
        };
        let mut pending = Pending::default();
        let index = |name: &str| {
            cfg.interfaces
                .iter()
                .position(|i| i.name == name)
                .expect("checked") as u32
        };
        for (bi, b) in cfg.bridges.iter().enumerate() {
            let counters = prev
                .and_then(|p| p.bridges.iter().find(|o| o.name == b.name && o.id == b.id))
                .map(|o| o.counters.clone())
                .unwrap_or_else(|| Arc::new(BridgeCounters::default()));
            let mut members = Vec::new();
            for m in &b.members {
                let member = st.member_id(prev, &m.interface, b.id);
                st.ports.insert(
                    m.interface.clone(),
                    L2Port {
                        bridge: bi as u16,
                        blocked: false,
                        member,
                        learn: b.learning && m.learning,
                        l2pt: m.l2pt,
                    },
                );
                st.member_names.insert(member, m.interface.clone());
                if b.limit_shutdown && prev.is_some_and(|p| p.shut.contains(&m.interface)) {
                    st.shut.insert(m.interface.clone());
                }
                if m.tunnel {
                    st.tunnels.insert(m.interface.clone());
                }
                if b.storm.iter().any(Option::is_some) {
                    let sc = prev
                        .and_then(|p| p.storms.get(&member))
                        .filter(|(rates, _)| *rates == b.storm)
                        .map(|(_, sc)| sc.clone())
                        .unwrap_or_else(|| Arc::new(StormControl::new(b.storm)));
                    st.storms.insert(member, (b.storm, sc));
                }
                st.member_bridge.insert(m.interface.clone(), b.id);
                members.push(index(&m.interface));
                if let Some(bk) = &m.backup {
                    // The backup shares the primary's member id: the addresses learned on the
                    // pair lead to whichever is active.
                    let port = st.ports[&m.interface];
                    st.ports.insert(bk.clone(), port);
                    st.member_bridge.insert(bk.clone(), b.id);
                    members.push(index(bk));
                    let state = prev
                        .and_then(|p| {
                            p.flexlinks
                                .iter()
                                .find(|f| f.primary == m.interface && f.backup == *bk)
                        })
                        .map(|f| f.state.clone())
                        .unwrap_or_default();
                    st.flexlinks.push(Flexlink {
                        bridge: b.name.clone(),
                        member: port.member,
                        primary: m.interface.clone(),
                        backup: bk.clone(),
                        preempt_s: m.preempt_s,
                        state,
                    });
                }
            }
            for s in &b.statics {
                let member = st.ports[&s.interface].member;
                st.statics.insert(MacKey::new(b.id, s.mac.0), member);
            }
            // The routed interface: a member id of its own (not in the flood list), whose MAC
            // is a static entry, so frames to it reach bvi-input and no host can take it.
            let bvi = cfg
                .interfaces
                .iter()
                .find(|i| i.bvi.as_ref() == Some(&b.name));
            if let Some(ifc) = bvi {
                let member = st.member_id(prev, &ifc.name, b.id);
                st.ports.insert(
                    ifc.name.clone(),
                    L2Port {
                        bridge: bi as u16,
                        blocked: false,
                        member,
                        learn: false,
                        l2pt: 0,
                    },
                );
                st.member_names.insert(member, ifc.name.clone());
                st.member_bridge.insert(ifc.name.clone(), b.id);
                st.statics.insert(MacKey::new(b.id, ifc.mac.0), member);
            }
            pending.limits.push((b.id, b.mac_limit));
            pending.aging.push((b.id, b.aging_s));
            st.bridges.push(Bridge {
                name: b.name.clone(),
                id: b.id,
                members: members.into_boxed_slice(),
                flood_unknown: b.flood_unknown,
                bpdu: b.bpdu,
                bvi: bvi.map_or(NO_IF, |i| index(&i.name)),
                snoop: b
                    .snoop
                    .as_ref()
                    .map(|c| Arc::new(snoop_settings(c, &st.ports, b.id, bvi))),
                dlsw: cfg
                    .dlsw
                    .as_ref()
                    .is_some_and(|d| d.bridge_domains.iter().any(|(n, _)| *n == b.name)),
                counters,
            });
        }
        if let Some(p) = prev {
            for o in p.bridges.iter().filter(|o| o.snoop.is_some()) {
                let still = st.bridges.iter().any(|b| b.id == o.id && b.snoop.is_some());
                if !still {
                    pending.clear_snoop.push(o.id);
                }
            }
        }
        if let Some(p) = prev {
            for (id, name) in &p.member_names {
                if st.ports.get(name).map(|x| x.member) != Some(*id) {
                    pending.clear_members.insert(*id);
                }
            }
            for b in &p.bridges {
                if !st.bridges.iter().any(|x| x.id == b.id) {
                    pending.clear_bridges.insert(b.id);
                    pending.limits.push((b.id, 0));
                    pending.aging.push((b.id, 0));
                }
            }
            for (k, m) in &p.statics {
                if st.statics.get(k) != Some(m) {
                    pending.clear_statics.push(*k);
                }
            }
        }
        pending.set_statics = st.statics.iter().map(|(k, m)| (*k, *m)).collect();
        pending.set_statics.sort();
        st.pending = Mutex::new(Some(pending));
        st
    }

    /// The member id of interface `name` in bridge `bridge_id`: the one it had in `prev` if it
    /// stays in that bridge, else a new one (ids are never reused).
    fn member_id(&mut self, prev: Option<&BridgesState>, name: &str, bridge_id: u16) -> u32 {
        let kept = prev.and_then(|p| {
            (p.member_bridge.get(name) == Some(&bridge_id))
                .then(|| p.ports.get(name).map(|x| x.member))
                .flatten()
        });
        kept.unwrap_or_else(|| {
            let id = self.next_member;
            self.next_member += 1;
            id
        })
    }

    /// Member id -> interface index, for `Tables::l2_members` (a Flexlink pair's id leads to
    /// its active member: call [`BridgesState::flexlink_apply`] first).
    pub fn l2_members(&self, ifs: &[dataplane::tables::Interface]) -> Box<[u32]> {
        let mut v = vec![NO_IF; self.next_member as usize];
        for (i, ifc) in ifs.iter().enumerate() {
            if let Some(l2) = ifc.l2.filter(|l2| !l2.blocked) {
                v[l2.member as usize] = i as u32;
            }
        }
        v.into_boxed_slice()
    }

    /// Decides each Flexlink pair's active member from its members' state in `ifs` (as the
    /// workers will see them) and blocks the other. The backup takes over when the primary is
    /// down and it is up; the primary takes over again when the backup fails, or `preempt_s`
    /// after its own link returned. A switchover is counted and queued for the log.
    pub fn flexlink_apply(&self, ifs: &mut [dataplane::tables::Interface]) {
        for f in &self.flexlinks {
            let at = |name: &str| ifs.iter().position(|i| i.name == name);
            let (Some(p), Some(b)) = (at(&f.primary), at(&f.backup)) else {
                continue;
            };
            let (p_up, b_up) = (ifs[p].up, ifs[b].up);
            let mut st = f.state.lock().unwrap_or_else(|e| e.into_inner());
            st.primary_up_since = match (p_up, st.primary_up_since) {
                (true, None) => Some(Instant::now()),
                (true, t) => t,
                (false, _) => None,
            };
            let to_backup = !st.backup_active && !p_up && b_up;
            let preempted = st.backup_active
                && p_up
                && f.preempt_s.is_some_and(|d| {
                    st.primary_up_since
                        .is_some_and(|t| t.elapsed() >= Duration::from_secs(d.into()))
                });
            let to_primary = st.backup_active && p_up && (!b_up || preempted);
            if to_backup || to_primary {
                st.backup_active = to_backup;
                st.switchovers += 1;
                let (from, to) = if to_backup {
                    (&f.primary, &f.backup)
                } else {
                    (&f.backup, &f.primary)
                };
                let why = if to_backup || !b_up {
                    format!("{from} down")
                } else {
                    format!(
                        "preempted {}s after {to} came back",
                        f.preempt_s.unwrap_or(0)
                    )
                };
                st.events.push(format!(
                    "bridge {}: Flexlink {from} -> {to} ({why})",
                    f.bridge
                ));
                st.move_update_owed = Some(to.clone());
            }
            let standby = if st.backup_active { p } else { b };
            if let Some(l2) = ifs[standby].l2.as_mut() {
                l2.blocked = true;
            }
        }
    }

    /// Blocks the members `mac-limit-action: shutdown` shut.
    pub fn shut_apply(&self, ifs: &mut [dataplane::tables::Interface]) {
        for i in ifs.iter_mut().filter(|i| self.shut.contains(&i.name)) {
            if let Some(l2) = i.l2.as_mut() {
                l2.blocked = true;
            }
        }
    }

    /// Whether a pair waits for its preemption delay (the tables must be made again when it
    /// ends).
    pub fn preemption_due(&self) -> bool {
        self.flexlinks.iter().any(|f| {
            let st = f.state.lock().unwrap_or_else(|e| e.into_inner());
            st.backup_active
                && f.preempt_s.is_some_and(|d| {
                    st.primary_up_since
                        .is_some_and(|t| t.elapsed() >= Duration::from_secs(d.into()))
                })
        })
    }

    /// Member id -> its storm control, for `Tables::l2_storm`.
    pub fn l2_storm(&self) -> Box<[Option<Arc<StormControl>>]> {
        let mut v = vec![None; self.next_member as usize];
        for (&m, (_, sc)) in &self.storms {
            v[m as usize] = Some(sc.clone());
        }
        v.into_boxed_slice()
    }

    /// Makes the MAC table agree with this build, once its tables are live: removes what it
    /// made stale, sets limits, aging times and static entries. Returns the static entries that
    /// did not fit (their buckets full), as messages.
    pub fn apply(&self) -> Vec<String> {
        let Some(p) = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return Vec::new();
        };
        if let Some(snoop) = &self.snoop {
            for id in &p.clear_snoop {
                snoop.clear(Some(*id));
            }
        }
        let Some(table) = &self.table else {
            return Vec::new();
        };
        if !p.clear_members.is_empty() || !p.clear_bridges.is_empty() {
            table.clear(true, |e| {
                p.clear_members.contains(&e.member) || p.clear_bridges.contains(&e.key.bridge())
            });
        }
        if !p.clear_statics.is_empty() {
            let gone: HashSet<MacKey> = p.clear_statics.iter().copied().collect();
            table.clear(true, |e| e.fixed && gone.contains(&e.key));
        }
        for (id, limit) in p.limits {
            table.set_limit(id, limit);
        }
        if let Some(a) = &self.aging {
            for (id, s) in p.aging {
                a[id as usize].store(s, Ordering::Relaxed);
            }
        }
        let mut failed = Vec::new();
        for (k, m) in p.set_statics {
            if let Err(why) = table.set_static(k, m) {
                let mac = packet::ethernet::MacAddr(k.mac());
                failed.push(format!(
                    "static MAC {mac} in bridge id {} not installed: {why:?}",
                    k.bridge()
                ));
            }
        }
        failed
    }

    /// The name of the bridge with id `id`.
    pub fn bridge_name(&self, id: u16) -> Option<&str> {
        self.bridges
            .iter()
            .find(|b| b.id == id)
            .map(|b| b.name.as_str())
    }
}

/// A Flexlink pair: a primary member and its backup, sharing one member id.
pub struct Flexlink {
    pub bridge: String,
    pub member: u32,
    pub primary: String,
    pub backup: String,
    pub preempt_s: Option<u32>,
    /// Kept across commits that keep the pair.
    pub state: Arc<Mutex<FlexState>>,
}

#[derive(Default, Debug)]
pub struct FlexState {
    pub backup_active: bool,
    primary_up_since: Option<std::time::Instant>,
    pub switchovers: u64,
    /// Switchovers not yet logged.
    pub events: Vec<String>,
    /// The interface that took over at the last switchover, until its MAC-move updates are
    /// sent (`Core::send_flexlink_updates`).
    pub move_update_owed: Option<String>,
    /// MAC-move update frames sent, all switchovers together.
    pub move_updates: u64,
}

/// A MAC-move update: a RARP broadcast from `mac` (as Open vSwitch announces the addresses
/// behind an active-backup bond that failed over), tagged as the link that took over is: an
/// 802.1ad S-tag `s_vlan`, an 802.1Q tag `vlan` (inside the S-tag if both). Upstream switches learn `mac` on the new path from it at once,
/// instead of flooding toward the dead link until the host speaks again.
pub fn move_update_frame(mac: [u8; 6], s_vlan: Option<u16>, vlan: Option<u16>) -> Vec<u8> {
    let mut f = Vec::with_capacity(68);
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&mac);
    for (tpid, v) in [(0x88a8u16, s_vlan), (0x8100, vlan)] {
        if let Some(v) = v {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&(v & 0x0fff).to_be_bytes());
        }
    }
    // RARP (RFC 903): Ethernet, IPv4, lengths 6 and 4, opcode 3 (request reverse), sender and
    // target hardware address the host's own, protocol addresses unknown (zero).
    f.extend_from_slice(&[0x80, 0x35, 0, 1, 0x08, 0x00, 6, 4, 0, 3]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0; 4]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0; 4]);
    // Padded to the 60-byte minimum (the FCS is the port's).
    f.resize(f.len().max(60), 0);
    f
}

/// Seconds on the clock the workers stamp entries with.
pub fn now_s() -> u32 {
    (dataplane::feature::clock_ns() / 1_000_000_000) as u32
}

/// Ages the table while it exists: every 100 ms a tenth of it.
/// The workers' snooping settings of a bridge, its members named by member id.
fn snoop_settings(
    c: &crate::config::snooping::SnoopCfg,
    ports: &HashMap<String, L2Port>,
    bridge_id: u16,
    bvi: Option<&crate::config::InterfaceCfg>,
) -> SnoopSettings {
    // The querier speaks as the routed interface where the bridge has one, else from a MAC
    // of its own (locally administered, made from the bridge's id).
    let querier = c.querier.then(|| dataplane::l2::snoop::Querier {
        interval_ms: u64::from(c.query_interval_s) * 1000,
        mac: bvi.map_or(
            [
                0x02,
                0x00,
                0x5e,
                0x10,
                (bridge_id >> 8) as u8,
                bridge_id as u8,
            ],
            |i| i.mac.0,
        ),
        src_v4: c
            .querier_address
            .or_else(|| bvi.and_then(|i| i.ipv4.first()).map(|a| a.0.into()))
            .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED),
    });
    let ids = |names: &[(String, crate::config::Origin)]| -> Box<[u32]> {
        names
            .iter()
            .filter_map(|(n, _)| ports.get(n).map(|p| p.member))
            .collect()
    };
    SnoopSettings {
        flood_unregistered: c.flood_unregistered,
        fast_leave_all: c.fast_leave_all,
        fast_leave: ids(&c.fast_leave),
        static_mrouters: ids(&c.mrouters),
        max_groups: c.max_groups,
        max_groups_per_member: c.max_groups_per_port,
        membership_ms: u64::from(c.membership_s) * 1000,
        last_member_ms: u64::from(c.last_member_s) * 1000,
        querier,
    }
}

/// Ages snooped memberships out: a sweep every 100 ms (a leave waits its last-member interval
/// to within that).
fn spawn_snoop_sweeper(table: Weak<SnoopTable>) {
    let _ = std::thread::Builder::new()
        .name("snoop-sweep".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(100));
            let Some(t) = table.upgrade() else {
                return;
            };
            t.sweep(t.now_ms());
        });
}

fn spawn_ager(table: Weak<MacTable>, aging: AgingTimes) {
    let _ = std::thread::Builder::new()
        .name("mac-ager".into())
        .spawn(move || {
            let mut slice = 0usize;
            loop {
                std::thread::sleep(Duration::from_millis(100));
                let Some(t) = table.upgrade() else {
                    return;
                };
                let n = t.buckets();
                let (from, to) = (n * slice / 10, n * (slice + 1) / 10);
                t.age(from..to, now_s(), |b| {
                    aging[b as usize].load(Ordering::Relaxed)
                });
                slice = (slice + 1) % 10;
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn cfg(bridges: &str) -> Config {
        let text = format!(
            "ports:\n  - {{ name: p1, driver: mem }}\n  - {{ name: p2, driver: mem }}\n  - {{ name: p3, driver: mem }}\ninterfaces:\n  - {{ name: p1, port: p1, mac: 02:00:00:00:00:01 }}\n  - {{ name: p2, port: p2, mac: 02:00:00:00:00:02 }}\n  - {{ name: p3, port: p3, mac: 02:00:00:00:00:03 }}\nbridges:\n{bridges}"
        );
        crate::config::parse(&text, Path::new("lab.yaml")).unwrap()
    }

    #[test]
    fn a_move_update_is_a_rarp_broadcast_from_the_address_tagged_as_its_link() {
        let mac = [2, 0, 0, 0xaa, 0, 7];
        let f = move_update_frame(mac, None, None);
        assert_eq!(f.len(), 60);
        assert_eq!(
            (&f[..6], &f[6..12], &f[12..14]),
            (&[0xff; 6][..], &mac[..], &[0x80, 0x35][..])
        );
        // Hardware type 1, IPv4, 6/4, opcode 3, sender and target hardware = the address.
        assert_eq!(&f[14..22], &[0, 1, 8, 0, 6, 4, 0, 3]);
        assert_eq!((&f[22..28], &f[32..38]), (&mac[..], &mac[..]));
        let t = move_update_frame(mac, None, Some(100));
        assert_eq!(t.len(), 60);
        assert_eq!(&t[12..18], &[0x81, 0, 0, 100, 0x80, 0x35]);
        assert_eq!(&t[18..], &f[14..56]);
        let q = move_update_frame(mac, Some(10), Some(20));
        assert_eq!(&q[12..22], &[0x88, 0xa8, 0, 10, 0x81, 0, 0, 20, 0x80, 0x35]);
        assert_eq!(&q[22..50], &f[14..42]);
    }

    #[test]
    fn a_commit_keeps_the_members_that_stay_and_clears_what_went() {
        let a = cfg("  - { name: a, id: 5, members: [p1, p2], mac-limit: 100, static-macs: [{ mac: 02:00:00:00:00:99, interface: p2 }] }\n");
        let s1 = BridgesState::build(&a, None);
        assert!(s1.apply().is_empty());
        let t = s1.table.clone().unwrap();
        let (m1, m2) = (s1.ports["p1"].member, s1.ports["p2"].member);
        assert_ne!(m1, m2);
        let k99 = MacKey::new(5, [2, 0, 0, 0, 0, 0x99]);
        assert_eq!(t.lookup(k99), Some(m2));
        let learned = MacKey::new(5, [2, 0, 0, 0, 1, 1]);
        t.learn(MacKey::new(5, [2, 0, 0, 0, 2, 2]), m1, now_s());
        t.learn(learned, m2, now_s());
        // p2 leaves (and its static with it), p3 joins: p1 keeps its id and its entry.
        let b = cfg("  - { name: a, id: 5, members: [p1, p3] }\n");
        let s2 = BridgesState::build(&b, Some(&s1));
        assert_eq!(s2.ports["p1"].member, m1);
        assert!(s2.ports["p3"].member > m2, "ids are never reused");
        assert_eq!(t.len(), 3, "nothing changes before the new tables are live");
        s2.apply();
        assert_eq!(t.lookup(learned), None);
        assert_eq!(t.lookup(k99), None);
        assert_eq!(t.lookup(MacKey::new(5, [2, 0, 0, 0, 2, 2])), Some(m1));
        assert!(Arc::ptr_eq(
            &s2.bridges[0].counters,
            &s1.bridges[0].counters
        ));
        let ifs: Vec<_> = ["p1", "p2", "p3"]
            .iter()
            .map(|n| dataplane::tables::Interface {
                name: n.to_string(),
                port: 0,
                vlan: None,
                s_vlan: None,
                mac: packet::ethernet::MacAddr([2, 0, 0, 0, 0, 1]),
                mtu: 1500,
                vrf: 0,
                up: true,
                v4: vec![],
                v6: vec![],
                punt_local: false,
                l2: s2.ports.get(*n).copied(),
                bvi: None,
            })
            .collect();
        let map = s2.l2_members(&ifs);
        assert_eq!((map[m1 as usize], map[m2 as usize]), (0, NO_IF));
        assert_eq!(map[s2.ports["p3"].member as usize], 2);
        // The bridge goes: its entries go too.
        let none = cfg("  - { name: other, id: 6, members: [p2] }\n");
        let s3 = BridgesState::build(&none, Some(&s2));
        s3.apply();
        assert_eq!(t.bridge_len(5), 0);
    }
}
