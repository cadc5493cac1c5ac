//! Prefix FECs (RFC 5036 2.1, 2.6): the router's IPv4 routes with a next hop, each given a
//! label of this router's and advertised to every peer, and the labels the peers advertise
//! for them, turned into what the data plane does.
//!
//! Reads: the routes the router hands in ([`Engine::set_routes`]: prefix and next-hop
//! addresses), the peers' prefix mappings (`Engine::prefix_bindings`, kept whoever sent them:
//! liberal retention) and which peer owns a next hop's address (its Address messages, its link
//! hellos' source). Sets: each FEC's local label and the label of each next hop's peer
//! ([`Engine::fec_bindings`], which the router makes into label-table swaps and labelled
//! routes); sends mappings and withdraws.
//!
//! Ordered control (RFC 5036 2.6.1.2): a FEC is advertised once this router is its egress (no
//! next hop of its route is an LDP peer: the route leaves the MPLS domain here) or a next hop's
//! peer has advertised a label for it; it is withdrawn when neither holds any more or its route
//! goes. Its local label then pops towards an IP next hop or swaps to the peer's label; an
//! implicit null from the peer (it is the egress) pops.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};

use packet::ldp::{Fec, Msg};

use super::{Engine, State};

/// One route as LDP sees it: the prefix and the addresses of its next hops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FecRoute {
    pub prefix: Ipv4Addr,
    pub len: u8,
    pub next_hops: Vec<Ipv4Addr>,
}

/// A FEC's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FecState {
    /// Its route's next hops, sorted.
    pub next_hops: Vec<Ipv4Addr>,
    /// The label this router advertised for it (None: not advertised).
    pub local: Option<u32>,
    /// Per next hop: the label its peer advertised (None: not a peer, or no label from it).
    pub out: Vec<Option<u32>>,
}

/// What LDP says a FEC's packets get: its local label (what arrives with it) and, per next
/// hop, the label to push towards it (None or implicit null: none, the packet goes as IP).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FecBinding {
    pub prefix: Ipv4Addr,
    pub len: u8,
    pub local: Option<u32>,
    pub out: Vec<(Ipv4Addr, Option<u32>)>,
}

/// The label range's allocator: lowest first (the data plane's label index is as long as the
/// highest label in use), labels given back reused oldest first, so a label a peer may still
/// hold from a withdraw in flight is the last to come back.
#[derive(Debug)]
pub(super) struct Labels {
    next: u32,
    last: u32,
    free: VecDeque<u32>,
}

impl Labels {
    pub(super) fn new((first, last): (u32, u32)) -> Labels {
        Labels {
            next: first,
            last,
            free: VecDeque::new(),
        }
    }

    fn take(&mut self) -> Option<u32> {
        if self.next <= self.last {
            self.next += 1;
            return Some(self.next - 1);
        }
        self.free.pop_front()
    }

    fn give(&mut self, l: u32) {
        self.free.push_back(l);
    }
}

/// A mapping of prefix `a/len` to `label`.
pub(super) fn prefix_mapping(a: Ipv4Addr, len: u8, label: u32) -> Msg {
    Msg::LabelMapping {
        fecs: vec![Fec::Prefix(IpAddr::V4(a), len)],
        label,
        pw_status: None,
    }
}

impl Engine {
    /// The router's routes now (each IPv4 route of the default VRF with next-hop addresses; the
    /// prefixes it is the egress for are left out, they are mapped to implicit null). FECs
    /// whose route went are withdrawn; the rest is looked at on the next tick.
    pub fn set_routes(&mut self, now: u64, routes: Vec<FecRoute>) {
        let mut next: BTreeMap<(Ipv4Addr, u8), Vec<Ipv4Addr>> = BTreeMap::new();
        for r in routes {
            if self.cfg.egress.contains(&(r.prefix, r.len)) || r.next_hops.is_empty() {
                continue;
            }
            let mut nh = r.next_hops;
            nh.sort_unstable();
            nh.dedup();
            next.insert((r.prefix, r.len), nh);
        }
        let gone: Vec<(Ipv4Addr, u8)> = self
            .fecs
            .keys()
            .filter(|k| !next.contains_key(k))
            .copied()
            .collect();
        let mut withdraw = Vec::new();
        for k in gone {
            if let Some(st) = self.fecs.remove(&k) {
                self.fec_changed = true;
                if let Some(l) = st.local {
                    withdraw.push((k, l));
                }
            }
        }
        for (k, nh) in next {
            let st = self.fecs.entry(k).or_default();
            if st.next_hops != nh {
                st.next_hops = nh;
                self.fec_dirty_keys.push(k);
            }
        }
        self.withdraw_fecs(now, withdraw);
    }

    /// Each FEC's labels, for the router.
    pub fn fec_bindings(&self) -> Vec<FecBinding> {
        self.fecs
            .iter()
            .map(|(&(prefix, len), st)| FecBinding {
                prefix,
                len,
                local: st.local,
                out: st
                    .next_hops
                    .iter()
                    .copied()
                    .zip(st.out.iter().copied())
                    .collect(),
            })
            .collect()
    }

    /// The mappings of every advertised FEC (for a session that just came up).
    pub(super) fn fec_mappings(&self) -> Vec<Msg> {
        self.fecs
            .iter()
            .filter_map(|(&(a, len), st)| st.local.map(|l| prefix_mapping(a, len, l)))
            .collect()
    }

    /// The LDP neighbours by their addresses: the ones an operational peer advertised, and
    /// every hello adjacency's source and transport address (a neighbour whose session is not
    /// up yet is one all the same: ordered control waits for its label rather than advertise
    /// as the egress and withdraw a moment later).
    fn peers_by_address(&self) -> HashMap<Ipv4Addr, Ipv4Addr> {
        let mut m = HashMap::new();
        for (lsr, s) in &self.sessions {
            if s.state != State::Operational {
                continue;
            }
            for a in &s.addresses {
                m.insert(*a, *lsr);
            }
        }
        for ((lsr, _), a) in &self.adjacencies {
            m.entry(a.source).or_insert(*lsr);
            m.entry(a.transport).or_insert(*lsr);
        }
        m
    }

    /// Works out every FEC's labels again: advertises the ones that became advertisable,
    /// withdraws the ones that are no longer, notes what changed for the router.
    pub(super) fn refresh_fecs(&mut self, now: u64) {
        let keys: Vec<(Ipv4Addr, u8)> = if std::mem::take(&mut self.fec_dirty) {
            self.fec_dirty_keys.clear();
            self.fecs.keys().copied().collect()
        } else {
            let mut k = std::mem::take(&mut self.fec_dirty_keys);
            k.sort_unstable();
            k.dedup();
            k
        };
        let peers = self.peers_by_address();
        let mut advertise = Vec::new();
        let mut withdraw = Vec::new();
        for (a, len) in keys {
            let Some(st) = self.fecs.get_mut(&(a, len)) else {
                continue;
            };
            let mut any_peer = false;
            let mut any_label = false;
            let out: Vec<Option<u32>> = st
                .next_hops
                .iter()
                .map(|gw| {
                    let lsr = peers.get(gw)?;
                    any_peer = true;
                    let l = self
                        .prefix_bindings
                        .get(&(*lsr, IpAddr::V4(a), len))
                        .copied();
                    any_label |= l.is_some();
                    l
                })
                .collect();
            let want = !any_peer || any_label;
            match (want, st.local) {
                (true, None) => match self.labels.take() {
                    Some(l) => {
                        st.local = Some(l);
                        advertise.push(prefix_mapping(a, len, l));
                        self.fec_changed = true;
                    }
                    None => self.stats.labels_exhausted += 1,
                },
                (false, Some(l)) => {
                    st.local = None;
                    withdraw.push(((a, len), l));
                    self.fec_changed = true;
                }
                _ => {}
            }
            if st.out != out {
                st.out = out;
                self.fec_changed = true;
            }
        }
        if !advertise.is_empty() {
            for lsr in self.operational_peers() {
                self.send(now, lsr, &advertise);
            }
        }
        self.withdraw_fecs(now, withdraw);
    }

    /// Withdraws these FECs' labels from every peer; the labels go back to the range.
    fn withdraw_fecs(&mut self, now: u64, fecs: Vec<((Ipv4Addr, u8), u32)>) {
        if fecs.is_empty() {
            return;
        }
        let msgs: Vec<Msg> = fecs
            .iter()
            .map(|&((a, len), l)| Msg::LabelWithdraw {
                fecs: vec![Fec::Prefix(IpAddr::V4(a), len)],
                label: Some(l),
            })
            .collect();
        for lsr in self.operational_peers() {
            self.send(now, lsr, &msgs);
        }
        for (_, l) in fecs {
            self.labels.give(l);
        }
    }

    fn operational_peers(&self) -> Vec<Ipv4Addr> {
        self.sessions
            .iter()
            .filter(|(_, s)| s.state == State::Operational)
            .map(|(l, _)| *l)
            .collect()
    }
}
