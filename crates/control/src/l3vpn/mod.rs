//! L3VPN (RFC 4364): this router as a PE. The VPN routes are spoken by GoBGP, which carries
//! VPNv4/VPNv6 with labels and installs nothing itself; Linerate drives it through its gRPC API
//! (`service`, with the messages in `gobgp`):
//!
//! - **Import**: GoBGP's best path of each VPN destination (RD + prefix) arrives as a
//!   [`VpnUpdate`]. [`VpnRoutes`] installs a route into every VPN VRF whose import route targets
//!   meet the route's (of several RDs for one prefix, the lowest RD wins, so every PE picks
//!   alike): next hop = the far PE resolved in the default VRF, with the route's VPN label pushed
//!   under the labels of the way there (`Router::vpn_next_hop`). A PE that does not resolve
//!   leaves the route uninstalled and counted, and it is tried again at every commit and
//!   every `retry` the service makes.
//! - **Export**: every route a VPN VRF holds that is not a VPN route itself nor an address of
//!   the router (connected subnets, static routes, route files, API routes, FRR's over FPM) is
//!   added to GoBGP's table as a VPN route with the VRF's RD, export route targets and VPN label
//!   (which pops into the VRF: `config::l3vpn::allocate_labels`), next hop `l3vpn.bgp.next-hop`.
//!   [`VpnRoutes::export_diff`] gives what to add and withdraw; the service calls GoBGP.
//! - VPN routes are a route source of the core (`mgmt::sources`, origin `Vpn`): a prefix the
//!   config, the API or FRR holds in a VRF keeps its route there (counted as held).

pub mod client;
pub mod gobgp;
pub mod service;

use std::collections::{BTreeSet, HashMap, HashSet};

use rustc_hash::{FxHashMap, FxHashSet};
use std::net::IpAddr;

use api::views::{VpnRouteView, VpnStatus, VpnVrfView};
use dataplane::tables::NextHop;

use crate::config::l3vpn::{L3vpnCfg, VpnId};
use crate::config::Prefix;
use crate::mgmt::sources::{Origin, Refused, RouteSource, RouteWriter};
use crate::router::Router;

/// A VPN route as a peer sent it (GoBGP's best path for its RD and prefix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VpnRoute {
    pub rd: VpnId,
    pub prefix: Prefix,
    /// The VPN label: what the far PE pops into its VRF.
    pub label: u32,
    /// The far PE.
    pub next_hop: IpAddr,
    /// Route targets (sorted).
    pub rts: Vec<VpnId>,
    /// The BGP peer it came from.
    pub peer: IpAddr,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VpnUpdate {
    Add(VpnRoute),
    Withdraw { rd: VpnId, prefix: Prefix },
}

/// What became of a VPN route in one VRF.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Import {
    /// In the FIB through this next hop.
    Installed(u32),
    /// The far PE has no route in the default VRF (or is this router).
    Unresolved,
    /// A stronger source holds the prefix in this VRF.
    Held,
    /// The FIB refused it.
    Refused(String),
}

/// The imported VPN routes and the exported ones: the route source the service writes through.
pub struct VpnRoutes {
    pub cfg: L3vpnCfg,
    /// Router VRF index of each `cfg.vrfs` entry, for the router the routes are in now.
    vrf_idx: Vec<usize>,
    /// Route target -> the `cfg.vrfs` entries importing it.
    by_rt: HashMap<VpnId, Vec<usize>>,
    /// The best path of each VPN destination.
    paths: FxHashMap<(VpnId, Prefix), VpnRoute>,
    /// (prefix, route target) -> the RDs the prefix is known under with that target: a VRF's
    /// candidates for a prefix are found by its import targets, without scanning every RD (a
    /// prefix every VRF uses is known under as many RDs as there are VRFs).
    candidates: FxHashMap<(Prefix, VpnId), BTreeSet<VpnId>>,
    /// (index into `cfg.vrfs`, prefix) -> the RD imported there and what became of it.
    imported: FxHashMap<(usize, Prefix), (VpnId, Import)>,
    /// (far PE, VPN label) -> the next hop its routes were last installed through, asked again
    /// every tick so that routes follow a change of the way to their PE ([`Self::reresolve`]).
    resolved: FxHashMap<(IpAddr, u32), u32>,
    /// (index into `cfg.vrfs`, prefix) -> the id GoBGP gave the exported path (empty until
    /// GoBGP has answered).
    exported: HashMap<(usize, Prefix), Vec<u8>>,
    pub status: VpnStatus,
}

/// What the service has to tell GoBGP to bring the exports in line.
#[derive(Debug, Default, PartialEq)]
pub struct ExportDiff {
    /// (VRF entry, prefix): to add.
    pub add: Vec<(usize, Prefix)>,
    /// (VRF entry, prefix, GoBGP's id of the path): to withdraw.
    pub withdraw: Vec<(usize, Prefix, Vec<u8>)>,
}

impl VpnRoutes {
    pub fn new(cfg: L3vpnCfg, router: &Router) -> Self {
        let mut s = Self {
            cfg,
            vrf_idx: Vec::new(),
            by_rt: HashMap::new(),
            paths: FxHashMap::default(),
            candidates: FxHashMap::default(),
            imported: FxHashMap::default(),
            resolved: FxHashMap::default(),
            exported: HashMap::new(),
            status: VpnStatus::default(),
        };
        s.map_vrfs(&router.cfg);
        for (i, v) in s.cfg.vrfs.iter().enumerate() {
            for rt in &v.import {
                s.by_rt.entry(*rt).or_default().push(i);
            }
        }
        s.status.api = s.cfg.api.to_string();
        s
    }

    fn map_vrfs(&mut self, cfg: &crate::config::Config) {
        self.vrf_idx = self
            .cfg
            .vrfs
            .iter()
            .map(|v| cfg.vrfs.iter().position(|x| *x == v.name).unwrap_or(0))
            .collect();
    }

    /// Applies what the speaker sent; the caller publishes.
    pub fn apply(&mut self, w: &mut RouteWriter<'_>, updates: &[VpnUpdate]) {
        // The (VRF entry, prefix) pairs to look at again: only VRFs importing a target of the
        // path that came or went (a VRF that imports none of them cannot change).
        let mut touched: FxHashSet<(usize, Prefix)> = FxHashSet::default();
        let mut touch = |rts: &[VpnId], p: Prefix, by_rt: &HashMap<VpnId, Vec<usize>>| {
            for rt in rts {
                for &i in by_rt.get(rt).map(Vec::as_slice).unwrap_or_default() {
                    touched.insert((i, p));
                }
            }
        };
        for u in updates {
            match u {
                VpnUpdate::Add(r) => {
                    self.status.updates += 1;
                    let key = (r.rd, r.prefix);
                    if let Some(old) = self.paths.insert(key, r.clone()) {
                        // Its targets may have changed: the VRFs it left look again too.
                        unindex(&mut self.candidates, &old);
                        touch(&old.rts, old.prefix, &self.by_rt);
                    }
                    for rt in &r.rts {
                        self.candidates
                            .entry((r.prefix, *rt))
                            .or_default()
                            .insert(r.rd);
                    }
                    touch(&r.rts, r.prefix, &self.by_rt);
                }
                VpnUpdate::Withdraw { rd, prefix } => {
                    if let Some(old) = self.paths.remove(&(*rd, *prefix)) {
                        self.status.withdrawals += 1;
                        unindex(&mut self.candidates, &old);
                        touch(&old.rts, old.prefix, &self.by_rt);
                    }
                }
            }
        }
        for (i, p) in touched {
            self.place(w, i, p);
        }
        self.count();
    }

    /// Drops every imported route (the speaker went away: its sessions, and so its routes, are
    /// gone with it); the caller publishes.
    pub fn clear(&mut self, w: &mut RouteWriter<'_>) {
        for ((i, p), (_, imp)) in std::mem::take(&mut self.imported) {
            if matches!(imp, Import::Installed(_)) {
                w.remove(self.vrf_idx[i], p);
            }
        }
        self.paths.clear();
        self.candidates.clear();
        self.resolved.clear();
        // GoBGP forgets the paths added through its API when it stops.
        self.exported.clear();
        self.count();
    }

    /// Tries again the routes whose PE did not resolve (a route to it may have come since) and
    /// those a stronger source held (it may have let go).
    pub fn retry(&mut self, w: &mut RouteWriter<'_>) -> usize {
        let waiting: Vec<(usize, Prefix)> = self
            .imported
            .iter()
            .filter(|(_, (_, imp))| matches!(imp, Import::Unresolved | Import::Held))
            .map(|(k, _)| *k)
            .collect();
        self.place_all(w, &waiting)
    }

    /// Places each (VRF entry, prefix) again; returns how many.
    fn place_all(&mut self, w: &mut RouteWriter<'_>, keys: &[(usize, Prefix)]) -> usize {
        for &(i, p) in keys {
            self.place(w, i, p);
        }
        self.count();
        keys.len()
    }

    /// Moves the routes whose way to their far PE changed (the route to the PE replaced,
    /// relabelled, or gone: then they wait as unresolved) onto the new way. The next hop of each
    /// (PE, VPN label) in use is asked again and compared with the one its routes went in
    /// through: one lookup per PE and label, not per route; the routes are looked at only when
    /// one changed. Returns how many were placed again.
    pub fn reresolve(&mut self, w: &mut RouteWriter<'_>) -> usize {
        let mut moved: FxHashSet<(IpAddr, u32)> = FxHashSet::default();
        let keys: Vec<((IpAddr, u32), u32)> = self.resolved.iter().map(|(k, v)| (*k, *v)).collect();
        for ((pe, label), nh) in keys {
            if w.vpn_next_hop(pe, label) != Some(nh) {
                moved.insert((pe, label));
                self.resolved.remove(&(pe, label));
            }
        }
        if moved.is_empty() {
            return 0;
        }
        let again: Vec<(usize, Prefix)> = self
            .imported
            .iter()
            .filter(|((_, p), (rd, imp))| {
                matches!(imp, Import::Installed(_))
                    && self
                        .paths
                        .get(&(*rd, *p))
                        .is_some_and(|r| moved.contains(&(r.next_hop, r.label)))
            })
            .map(|(k, _)| *k)
            .collect();
        self.place_all(w, &again)
    }

    /// The path VRF entry `i` should take for `p`: of the RDs `p` is known under whose route
    /// targets it imports, the lowest.
    fn best(&self, i: usize, p: Prefix) -> Option<&VpnRoute> {
        let rd = self.cfg.vrfs[i]
            .import
            .iter()
            .filter_map(|rt| self.candidates.get(&(p, *rt))?.first())
            .min()?;
        self.paths.get(&(*rd, p))
    }

    /// Installs, replaces or removes VRF entry `i`'s route for `p`.
    fn place(&mut self, w: &mut RouteWriter<'_>, i: usize, p: Prefix) {
        let vrf = self.vrf_idx[i];
        let want = self.best(i, p).map(|r| (r.rd, r.next_hop, r.label));
        let was = self.imported.remove(&(i, p));
        // What the FIB holds for `p` is this source's only while it is the next hop this source
        // put there: any other is a stronger source's (FRR's over FPM, which the writer does not
        // know of), never to be replaced or removed from here.
        let ours = match was {
            Some((_, Import::Installed(nh))) => Some(nh),
            _ => None,
        };
        let current = in_fib(w.router(), vrf, p);
        let foreign = current.is_some() && current != ours;
        let Some((rd, pe, label)) = want else {
            if !foreign && ours.is_some() {
                w.remove(vrf, p);
            }
            return;
        };
        let imp = if foreign {
            Import::Held
        } else {
            match w.vpn_next_hop(pe, label) {
                Some(nh) => match w.install(vrf, p, nh) {
                    Ok(()) => {
                        self.resolved.insert((pe, label), nh);
                        Import::Installed(nh)
                    }
                    Err(Refused::Held) => Import::Held,
                    Err(Refused::Table(e)) => Import::Refused(e),
                },
                None => {
                    if ours.is_some() {
                        w.remove(vrf, p);
                    }
                    Import::Unresolved
                }
            }
        };
        self.imported.insert((i, p), (rd, imp));
    }

    fn count(&mut self) {
        let s = &mut self.status;
        s.paths = self.paths.len();
        s.installed = 0;
        s.unresolved = 0;
        s.held = 0;
        s.refused = 0;
        for (_, imp) in self.imported.values() {
            match imp {
                Import::Installed(_) => s.installed += 1,
                Import::Unresolved => s.unresolved += 1,
                Import::Held => s.held += 1,
                Import::Refused(_) => s.refused += 1,
            }
        }
        s.exported = self.exported.len();
    }

    /// Whether `p` in router VRF `vrf` is a VPN route this source installed.
    pub fn holds(&self, vrf: usize, p: Prefix) -> bool {
        self.vrf_idx
            .iter()
            .enumerate()
            .filter(|(_, &v)| v == vrf)
            .any(|(i, _)| matches!(self.imported.get(&(i, p)), Some((_, Import::Installed(_)))))
    }

    /// What each exporting VRF should advertise now (its routes less VPN ones and the router's
    /// own addresses and neighbours), against what was: to add, to withdraw. The ones to
    /// withdraw leave the export list here; the ones to add enter it when GoBGP has taken them
    /// ([`VpnRoutes::exported_as`]).
    pub fn export_diff(&mut self, r: &Router) -> ExportDiff {
        let mut want = HashSet::new();
        for (i, v) in self.cfg.vrfs.iter().enumerate() {
            if v.export.is_empty() {
                continue;
            }
            let vrf = self.vrf_idx[i];
            let Some(fib) = r.fibs.get(vrf) else {
                continue;
            };
            let hosts: HashSet<IpAddr> = neighbor_hosts(r, vrf);
            let v4 = fib
                .v4
                .routes()
                .map(|x| (Prefix::V4(x.prefix, x.len), x.next_hop));
            let v6 = fib
                .v6
                .routes()
                .map(|x| (Prefix::V6(x.prefix, x.len), x.next_hop));
            for (p, nh) in v4.chain(v6) {
                if exportable(r, nh)
                    && !host_of(p).is_some_and(|h| hosts.contains(&h))
                    && !matches!(self.imported.get(&(i, p)), Some((_, Import::Installed(_))))
                {
                    want.insert((i, p));
                }
            }
        }
        let mut d = ExportDiff::default();
        let gone: Vec<(usize, Prefix)> = self
            .exported
            .keys()
            .filter(|k| !want.contains(k))
            .copied()
            .collect();
        for k in gone {
            if let Some(uuid) = self.exported.remove(&k) {
                d.withdraw.push((k.0, k.1, uuid));
            }
        }
        d.add = want
            .into_iter()
            .filter(|k| !self.exported.contains_key(k))
            .collect();
        d.add.sort_by_key(|(i, p)| (*i, prefix_order(*p)));
        self.count();
        d
    }

    /// GoBGP took the export of `p` from VRF entry `i` under path id `uuid`.
    pub fn exported_as(&mut self, i: usize, p: Prefix, uuid: Vec<u8>) {
        self.exported.insert((i, p), uuid);
        self.status.exported = self.exported.len();
    }

    /// The path that exports `p` from VRF entry `i`.
    pub fn export_path(&self, i: usize, p: Prefix) -> gobgp::Path {
        let v = &self.cfg.vrfs[i];
        gobgp::export_path(v.rd, p, v.label, self.cfg.next_hop, &v.export)
    }

    /// `show vrf`: each VPN VRF with its RD, route targets, label and route counts.
    pub fn vrf_views(&self) -> Vec<VpnVrfView> {
        self.cfg
            .vrfs
            .iter()
            .enumerate()
            .map(|(i, v)| VpnVrfView {
                name: v.name.clone(),
                rd: v.rd.to_string(),
                import: v.import.iter().map(|x| x.to_string()).collect(),
                export: v.export.iter().map(|x| x.to_string()).collect(),
                label: v.label,
                imported: self
                    .imported
                    .iter()
                    .filter(|((k, _), (_, imp))| *k == i && matches!(imp, Import::Installed(_)))
                    .count(),
                exported: self.exported.keys().filter(|(k, _)| *k == i).count(),
            })
            .collect()
    }

    /// `show bgp vpn`: the VPN routes from peers, each with where it went (at most `limit`, in
    /// RD and prefix order).
    pub fn route_views(&self, limit: usize) -> Vec<VpnRouteView> {
        let mut keys: Vec<&(VpnId, Prefix)> = self.paths.keys().collect();
        keys.sort_by_key(|(rd, p)| (*rd, prefix_order(*p)));
        keys.into_iter()
            .take(limit)
            .map(|k| {
                let r = &self.paths[k];
                let mut installed = Vec::new();
                let mut not_installed = Vec::new();
                for (i, v) in self.cfg.vrfs.iter().enumerate() {
                    match self.imported.get(&(i, r.prefix)) {
                        Some((rd, Import::Installed(_))) if *rd == r.rd => {
                            installed.push(v.name.clone())
                        }
                        Some((rd, imp)) if *rd == r.rd => not_installed.push(format!(
                            "{}: {}",
                            v.name,
                            match imp {
                                Import::Unresolved => "next hop unresolved".to_string(),
                                Import::Held => "held by a stronger source".to_string(),
                                Import::Refused(e) => e.clone(),
                                Import::Installed(_) => unreachable!(),
                            }
                        )),
                        _ => {}
                    }
                }
                VpnRouteView {
                    rd: r.rd.to_string(),
                    prefix: r.prefix.to_string(),
                    label: r.label,
                    next_hop: r.next_hop.to_string(),
                    route_targets: r.rts.iter().map(|x| x.to_string()).collect(),
                    peer: r.peer.to_string(),
                    installed,
                    not_installed,
                }
            })
            .collect()
    }
}

/// Takes route `r` out of the candidates of each of its targets.
fn unindex(c: &mut FxHashMap<(Prefix, VpnId), BTreeSet<VpnId>>, r: &VpnRoute) {
    for rt in &r.rts {
        if let Some(set) = c.get_mut(&(r.prefix, *rt)) {
            set.remove(&r.rd);
            if set.is_empty() {
                c.remove(&(r.prefix, *rt));
            }
        }
    }
}

/// The next hop VRF `vrf`'s FIB holds for exactly `p`.
fn in_fib(r: &Router, vrf: usize, p: Prefix) -> Option<u32> {
    let f = r.fibs.get(vrf)?;
    match p {
        Prefix::V4(a, l) => f.v4.get(a, l),
        Prefix::V6(a, l) => f.v6.get(a, l),
    }
}

/// Prefixes in address order, IPv4 first.
fn prefix_order(p: Prefix) -> (u8, u128, u8) {
    match p {
        Prefix::V4(a, l) => (4, a.into(), l),
        Prefix::V6(a, l) => (6, a, l),
    }
}

fn host_of(p: Prefix) -> Option<IpAddr> {
    match p {
        Prefix::V4(a, 32) => Some(IpAddr::V4(a.into())),
        Prefix::V6(a, 128) => Some(IpAddr::V6(a.into())),
        _ => None,
    }
}

/// The neighbours of VRF `vrf`, configured and learned: their host routes are the router's
/// bookkeeping, not routes to advertise.
fn neighbor_hosts(r: &Router, vrf: usize) -> HashSet<IpAddr> {
    let in_vrf = |ifx: usize| r.ifs.get(ifx).is_some_and(|i| i.vrf as usize == vrf);
    r.cfg
        .neighbors
        .iter()
        .filter(|n| {
            r.ifs
                .iter()
                .position(|i| i.name == n.interface)
                .is_some_and(in_vrf)
        })
        .map(|n| n.ip)
        .chain(
            r.learned
                .keys()
                .filter(|(ifx, _)| in_vrf(*ifx as usize))
                .map(|&(_, ip)| ip),
        )
        .collect()
}

/// Whether a route through next hop `nh` is one to advertise: not the router's own address,
/// not a host being resolved, not multicast or GTP bookkeeping.
fn exportable(r: &Router, nh: u32) -> bool {
    !matches!(
        r.next_hops.get(nh as usize),
        None | Some(
            NextHop::Local
                | NextHop::NoRoute
                | NextHop::GtpuLocal
                | NextHop::Glean {
                    neighbor: Some(_),
                    ..
                }
        )
    )
}

impl RouteSource for VpnRoutes {
    fn origin(&self) -> Origin {
        Origin::Vpn
    }

    /// A commit built a new router: its next-hop ids are new, and so may be the VRFs' indices
    /// and the ways to the PEs.
    fn reinstall(&mut self, w: &mut RouteWriter<'_>) {
        self.map_vrfs(w.cfg());
        let keys: Vec<(usize, Prefix)> = self.imported.keys().copied().collect();
        self.imported.clear();
        self.resolved.clear();
        self.place_all(w, &keys);
    }

    fn restore(&mut self, w: &mut RouteWriter<'_>, vrf: usize, p: Prefix) -> bool {
        let entries: Vec<usize> = (0..self.cfg.vrfs.len())
            .filter(|&i| self.vrf_idx[i] == vrf && self.imported.contains_key(&(i, p)))
            .collect();
        for &i in &entries {
            self.place(w, i, p);
        }
        self.count();
        !entries.is_empty()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
