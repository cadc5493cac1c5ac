//! LDP's prefix labels in the router's tables: the label table's entries for the labels this
//! router advertised, and the labels pushed on routes whose next hop's peer advertised one.
//!
//! Reads: the FEC bindings the speaker works out (`ldp::engine::fec`), the default VRF's IPv4
//! routes and their next hops. Sets: label-table entries (built with the rest of the MPLS
//! tables by `build_mpls`), and routes replaced by labelled versions of themselves.
//!
//! A labelled route stays the route source's: LDP remembers which next hop it replaced, reads
//! the route through it (the FEC's next hops are the source's), and puts it back when the label
//! goes. When the source replaces the route (FPM, the API), LDP's version is gone; the next
//! [`Router::ldp_sync`] labels the new one. A commit builds the tables again and takes the
//! bindings over.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use dataplane::mpls::{LabelAction, LabelStack, IMPLICIT_NULL};
use dataplane::tables::NextHop;

use super::{BuildError, NhKey, Router};
use crate::config::Prefix;
use crate::ldp::engine::fec::{FecBinding, FecRoute};

/// What LDP put in the router's tables.
#[derive(Clone, Debug, Default)]
pub struct LdpTables {
    /// The speaker's bindings as last taken.
    pub bindings: Vec<FecBinding>,
    /// Routes LDP labelled, by prefix: (the source's next hop, the labelled one that replaced
    /// it).
    pub labelled: HashMap<(u32, u8), (u32, u32)>,
}

impl Router {
    /// Next-hop id -> the neighbour it forwards to.
    fn neighbors_by_id(&self) -> Vec<Option<Ipv4Addr>> {
        let mut by_id = vec![None; self.next_hops.len()];
        for (k, &id) in &self.nh_ids {
            if let NhKey::Neighbor(_, IpAddr::V4(a)) = k {
                by_id[id as usize] = Some(*a);
            }
        }
        by_id
    }

    /// The single-path next hops of `nh` with their neighbours: itself, or an ECMP group's
    /// members; none for anything that does not forward to a neighbour.
    fn members(&self, by_id: &[Option<Ipv4Addr>], nh: u32) -> Vec<(u32, Ipv4Addr)> {
        let one = |id: u32| match self.next_hops.get(id as usize) {
            Some(NextHop::Forward { .. } | NextHop::Glean { .. }) => {
                by_id.get(id as usize).copied().flatten().map(|a| (id, a))
            }
            _ => None,
        };
        match self.next_hops.get(nh as usize) {
            Some(NextHop::Ecmp(m)) => {
                let mut v: Vec<(u32, Ipv4Addr)> = m.iter().filter_map(|&id| one(id)).collect();
                v.dedup();
                v
            }
            _ => one(nh).into_iter().collect(),
        }
    }

    /// The route's own next hop: the one LDP replaced, if LDP's version is what is installed.
    fn source_next_hop(&self, key: (u32, u8), installed: u32) -> u32 {
        match self.ldp.labelled.get(&key) {
            Some(&(source, ours)) if ours == installed => source,
            _ => installed,
        }
    }

    /// The routes LDP makes FECs of: each IPv4 route of the default VRF through neighbours
    /// (not connected subnets, local addresses, neighbours' host routes or routes configured
    /// with labels of their own).
    pub fn ldp_routes(&self) -> Vec<FecRoute> {
        let Some(f) = self.fibs.first() else {
            return Vec::new();
        };
        let by_id = self.neighbors_by_id();
        f.v4.routes()
            .filter_map(|r| {
                let nh = self.source_next_hop((r.prefix, r.len), r.next_hop);
                let gws: Vec<Ipv4Addr> = self.members(&by_id, nh).iter().map(|m| m.1).collect();
                // A neighbour's host route is its connected subnet's, which this router maps
                // as the egress.
                let neighbor = r.len == 32 && gws == [Ipv4Addr::from(r.prefix)];
                (!gws.is_empty() && !neighbor).then(|| FecRoute {
                    prefix: Ipv4Addr::from(r.prefix),
                    len: r.len,
                    next_hops: gws,
                })
            })
            .collect()
    }

    /// Takes the speaker's bindings: the label table is built again when they changed, and the
    /// routes are labelled as they say. Returns whether anything changed (the caller publishes).
    pub fn set_ldp(&mut self, bindings: Vec<FecBinding>) -> Result<bool, BuildError> {
        let mut changed = false;
        if bindings != self.ldp.bindings {
            self.ldp.bindings = bindings;
            self.build_mpls()?;
            changed = true;
        }
        Ok(self.ldp_sync() | changed)
    }

    /// Labels the routes whose next hop's peer gave a label (again, where their source
    /// replaced LDP's version), and puts back the ones whose label went. Returns whether a
    /// route changed (the caller publishes).
    pub fn ldp_sync(&mut self) -> bool {
        if self.fibs.is_empty() {
            return false;
        }
        let by_id = self.neighbors_by_id();
        let mut want: HashMap<(u32, u8), HashMap<Ipv4Addr, u32>> = HashMap::new();
        for b in &self.ldp.bindings {
            let labels: HashMap<Ipv4Addr, u32> = b
                .out
                .iter()
                .filter_map(|&(gw, l)| l.filter(|&l| l != IMPLICIT_NULL).map(|l| (gw, l)))
                .collect();
            if !labels.is_empty() {
                want.insert((u32::from(b.prefix), b.len), labels);
            }
        }
        let mut changed = false;
        let mut next = HashMap::new();
        for (&key, labels) in &want {
            let Some(installed) = self.fibs[0].v4.get(key.0, key.1) else {
                continue;
            };
            let source = self.source_next_hop(key, installed);
            let members = self.members(&by_id, source);
            if members.is_empty() {
                continue;
            }
            let labelled: Vec<u32> = members
                .iter()
                .map(
                    |&(id, gw)| match labels.get(&gw).and_then(|&l| LabelStack::new(&[l])) {
                        Some(stack) => self.labelled(id, stack),
                        None => id,
                    },
                )
                .collect();
            let ours = self.nh_ecmp(labelled);
            if ours != installed {
                let p = Prefix::V4(key.0, key.1);
                if self.install(0, p, ours).is_err() {
                    continue;
                }
                changed = true;
            }
            next.insert(key, (source, ours));
        }
        // Routes whose label went: back to their source's next hop, if LDP's is still there.
        for (key, (source, ours)) in std::mem::take(&mut self.ldp.labelled) {
            if next.contains_key(&key) {
                continue;
            }
            if self.fibs[0].v4.get(key.0, key.1) == Some(ours) {
                let _ = self.install(0, Prefix::V4(key.0, key.1), source);
                changed = true;
            }
        }
        self.ldp.labelled = next;
        changed
    }

    /// The label table's entries for the labels LDP advertised: pop, and push the next hop's
    /// peer's label (none for implicit null, or a next hop outside the MPLS domain: the packet
    /// goes on as IP), over every next hop of the FEC's route.
    pub(super) fn ldp_label_entries(&mut self) -> Vec<(u32, LabelAction)> {
        let bindings = std::mem::take(&mut self.ldp.bindings);
        let mut out = Vec::new();
        for b in &bindings {
            let Some(local) = b.local else { continue };
            let mut members = Vec::new();
            for &(gw, label) in &b.out {
                let Some(ifx) = self.connected_if(0, IpAddr::V4(gw)) else {
                    continue;
                };
                let nh = self.nh_via(ifx, Some(IpAddr::V4(gw)));
                members.push(match label.filter(|&l| l != IMPLICIT_NULL) {
                    Some(l) => match LabelStack::new(&[l]) {
                        Some(s) => self.labelled(nh, s),
                        None => continue,
                    },
                    None => nh,
                });
            }
            if members.is_empty() {
                continue;
            }
            let nh = self.nh_ecmp(members);
            out.push((
                local,
                LabelAction::Forward {
                    nh,
                    push: LabelStack::default(),
                },
            ));
        }
        self.ldp.bindings = bindings;
        out
    }
}
