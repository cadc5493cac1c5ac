//! Turns a checked [`Config`] into a running router: interfaces, next hops, FIBs per VRF, ports
//! and workers. The control plane is the single owner of the route tables ([`Fibs`]); it
//! publishes the small tables (interfaces, next hops) whole and the FIBs slot by slot.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use api::views::NextHopKind;
use arc_swap::ArcSwap;
use dataplane::tables::{Interface, NextHop, PortMap, Rewrite, SharedTables, Tables, Vrf, NO_IF};
use fib::{EpochDomain, LpmConfig, LpmWriter};

use crate::config::{find_connected, find_neighbor, Config, ConfigError, Prefix, Target};
use packet::ethernet::MacAddr;

mod ldp;
pub use ldp::LdpTables;
mod mpls;
pub use mpls::{LspState, SignalledPw};
mod paths;
pub use paths::{PathDef, ECMP_BUCKETS};

pub struct Fibs {
    pub name: String,
    pub v4: LpmWriter<u32>,
    pub v6: LpmWriter<u128>,
}

/// What a next hop is, for sharing one id among all routes that resolve alike.
#[derive(Clone, PartialEq, Eq, Hash)]
enum NhKey {
    Neighbor(u32, IpAddr),
    Ecmp(Vec<u32>),
    Local,
    Glean(u32),
    Blackhole,
    Reject,
    /// Multicast copies out of an interface (IPv6 or not).
    Mcast(u32, bool),
    GtpuLocal,
    GtpApn(u16),
    /// Out of an ATM PVC (IPv6 or not): no neighbour to resolve, the VC is the adjacency.
    Pvc(u32, bool),
    /// Through next hop `via` with labels pushed.
    Labelled(u32, dataplane::mpls::LabelStack),
}

pub struct Router {
    pub cfg: Config,
    pub epoch: Arc<EpochDomain>,
    pub fibs: Vec<Fibs>,
    pub next_hops: Vec<NextHop>,
    nh_ids: HashMap<NhKey, u32>,
    pub ifs: Vec<Interface>,
    /// Port index -> how its frames map to interfaces; indexed like `port_slots`.
    pub ports: Vec<PortMap>,
    /// Port index -> port name; None for a free slot. A port keeps its index across config
    /// commits, so counters and queues stay attached to it.
    pub port_slots: Vec<Option<String>>,
    /// Ports that are present in the config but out of service (removed at run time): their
    /// interfaces are operationally down and next hops through them are not used.
    pub ports_down: std::collections::HashSet<String>,
    /// Ports whose kernel device has no link (carrier lost, or set down): like ports out of
    /// service, their interfaces are operationally down until the link returns.
    pub links_down: std::collections::HashSet<String>,
    pub shared: SharedTables,
    /// Compiled ACLs and QoS policies, policers, flow accounting (see `services`).
    pub services: crate::services::ServicesState,
    /// Bridge domains and the MAC table (see `bridges`).
    pub bridges: crate::bridges::BridgesState,
    /// Multicast routing: its VRFs, FIB and next hops (see `mcast`).
    pub mcast: crate::mcast::McastState,
    /// The GGSN, where the config has one (see `gtp`): set by [`Router::build`], carried by
    /// commits.
    pub gtp: Option<Arc<crate::gtp::Ggsn>>,
    /// Neighbours learned by ARP and ND (the configured ones are in `cfg.neighbors`).
    pub learned: HashMap<(u32, IpAddr), MacAddr>,
    /// The prefixes the config built (connected, local, static, neighbours, route files) and
    /// where each came from: routes from other sources (FPM) do not replace them, and a route
    /// file may not configure one twice.
    configured: HashMap<(usize, Prefix), Configured>,
    /// The route files read so far, as `Configured::File` numbers them.
    route_file_names: Vec<String>,
    /// Set once the config's routes are in; later additions are not "configured".
    sealed: bool,
    /// Next hops owned by route sources and changed in place (see `paths`).
    paths: paths::Paths,
    /// This build's number ([`Tables::generation`]): one more than the tables live when it
    /// was built.
    pub generation: u64,
    /// Per port slot: the PVCs of a port that carries ATM cells.
    pub atm_maps: Vec<Option<Arc<dataplane::tables::AtmVcMap>>>,
    /// The label table and pseudowires as published, where the config has `mpls`.
    pub mpls: Option<Arc<dataplane::mpls::Mpls>>,
    /// What LDP signalled for each pseudowire it signals, by name (carried across commits).
    pub signalled: HashMap<String, mpls::SignalledPw>,
    /// Each configured LSP's path object (`mpls.lsps`): its pseudowires point at it.
    pub lsp_paths: HashMap<String, u32>,
    /// The pseudowires that follow the route to their peer: the way each took when last built
    /// (None: no route), and the route change count then (see [`Router::follow_pw_routes`]).
    pub pw_routes: mpls::PwRoutes,
    /// LDP's prefix labels: its bindings (carried across commits) and the routes it labelled.
    pub ldp: LdpTables,
}

/// Counts changes to any router's routes or path objects (one counter for all, so a commit's
/// new router never repeats a number the old one gave): readers that walk the routes (LDP)
/// skip the walk when it has not moved.
static ROUTE_CHANGES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn routes_changed() {
    ROUTE_CHANGES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// The route change count now (see [`ROUTE_CHANGES`]).
pub fn route_changes() -> u64 {
    ROUTE_CHANGES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Where a configured prefix came from.
#[derive(Clone, Copy, Debug)]
enum Configured {
    /// The config file itself: a connected subnet, a local address, a neighbour, a static route.
    Config,
    /// Line `line` of route file `file` (an index into `Router::route_file_names`).
    File { file: u32, line: u32 },
}

/// An interface with no port that packets arrive on decapsulated (an APN's, a VRF's MPLS
/// interface): in VRF `vrf`, always up, no addresses.
fn tunnel_interface(name: String, vrf: u32) -> Interface {
    Interface {
        name,
        port: dataplane::tables::TUNNEL_PORT,
        vlan: None,
        s_vlan: None,
        mac: MacAddr([0; 6]),
        mtu: 1500,
        vrf,
        up: true,
        v4: Vec::new(),
        v6: Vec::new(),
        punt_local: false,
        l2: None,
        bvi: None,
    }
}

fn host_prefix(ip: IpAddr) -> Prefix {
    match ip {
        IpAddr::V4(a) => Prefix::V4(u32::from(a), 32),
        IpAddr::V6(a) => Prefix::V6(u128::from(a), 128),
    }
}

/// The errors found in route files: the first few in full, and how many in all (a file of a
/// million bad lines must not become a million error records).
#[derive(Default)]
struct RouteFileErrors {
    first: Vec<ConfigError>,
    total: usize,
}

impl RouteFileErrors {
    fn push(&mut self, file: &str, line: usize, col: usize, field: &str, message: String) {
        self.total += 1;
        if self.first.len() < crate::config::MAX_PRINTED {
            self.first.push(ConfigError {
                file: file.to_string(),
                line,
                col,
                field: field.to_string(),
                message: crate::config::excerpt_quoted(&message),
            });
        }
    }
}

/// The words of a route-file line, each with its column (1-based, in characters).
fn words(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start: Option<(usize, usize)> = None;
    for (col, (i, c)) in line.char_indices().enumerate() {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some((col + 1, i)),
            (true, Some((sc, si))) => {
                out.push((sc, &line[si..i]));
                start = None;
            }
            _ => {}
        }
    }
    if let Some((sc, si)) = start {
        out.push((sc, &line[si..]));
    }
    out
}

/// An error while loading routes or building tables: says which file and line when it can.
#[derive(Debug)]
pub struct BuildError(pub String);

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for BuildError {}

impl Router {
    /// Builds every table from the config and loads its route files; nothing is visible to
    /// workers until all of it succeeded.
    pub fn build(cfg: Config) -> Result<Router, BuildError> {
        let shared: SharedTables = Arc::new(ArcSwap::from_pointee(Tables::empty(cfg.icmp_rate)));
        let mut r = Self::build_unpublished(cfg, &[], EpochDomain::new(), shared)?;
        if let Some(g) = &r.cfg.ggsn {
            let recovery = crate::gtp::next_recovery(g.restart_counter.as_deref())
                .map_err(|e| BuildError(format!("ggsn.restart-counter: {e}")))?;
            r.gtp = Some(crate::gtp::Ggsn::new(
                g,
                r.cfg.max_gtp_contexts,
                r.cfg.workers,
                recovery,
            ));
        }
        r.mcast.go_live(&r.cfg);
        r.publish()?;
        Ok(r)
    }

    /// Builds every table from `cfg` without making any of it visible: the workers go on with
    /// whatever `shared` holds until [`Router::activate`]. Ports named in `slots` keep their
    /// index; new ports take free slots. This is how a config commit is prepared.
    pub fn build_unpublished(
        cfg: Config,
        slots: &[Option<String>],
        epoch: Arc<EpochDomain>,
        shared: SharedTables,
    ) -> Result<Router, BuildError> {
        Self::build_unpublished_from(cfg, slots, epoch, shared, None, None, None)
    }

    /// As [`Router::build_unpublished`], reusing from `prev` the compiled services (and their
    /// counters) that the new config leaves unchanged, from `prev_bridges` the MAC table
    /// and the member ids of members that stay, and from `prev_mcast` the kernel's multicast
    /// routes.
    pub fn build_unpublished_from(
        cfg: Config,
        slots: &[Option<String>],
        epoch: Arc<EpochDomain>,
        shared: SharedTables,
        prev: Option<&crate::services::ServicesState>,
        prev_bridges: Option<&crate::bridges::BridgesState>,
        prev_mcast: Option<&crate::mcast::McastState>,
    ) -> Result<Router, BuildError> {
        let services = crate::services::ServicesState::build(&cfg, prev);
        let bridges = crate::bridges::BridgesState::build(&cfg, prev_bridges);
        let mcast = crate::mcast::McastState::build(&cfg, prev_mcast, &epoch);
        let fibs: Vec<Fibs> = cfg
            .vrfs
            .iter()
            .map(|name| Fibs {
                name: name.clone(),
                v4: LpmWriter::new(LpmConfig::v4(cfg.max_v4_routes), epoch.clone()),
                v6: LpmWriter::new(LpmConfig::v6(cfg.max_v6_routes), epoch.clone()),
            })
            .collect();
        let port_slots = assign_slots(slots, cfg.ports.iter().map(|p| p.name.as_str()))?;
        let mut ports: Vec<PortMap> = port_slots
            .iter()
            .map(|_| PortMap {
                untagged: NO_IF,
                tunnel: false,
                vlans: Box::new([]),
                qinq: Box::new([]),
            })
            .collect();
        let mut qinq: Vec<Vec<(u32, u32)>> = vec![Vec::new(); port_slots.len()];
        let vrf_idx = |name: &str| cfg.vrfs.iter().position(|v| v == name).expect("checked") as u32;
        let mut ifs = Vec::new();
        for (i, ic) in cfg.interfaces.iter().enumerate() {
            let bvi = ic.bvi.as_ref().map(|b| {
                cfg.bridges
                    .iter()
                    .find(|x| &x.name == b)
                    .expect("checked")
                    .id
            });
            // A bridge's routed interface has no port: no frames of a port's map to it.
            let port = match bvi {
                Some(_) => dataplane::tables::BVI_PORT,
                None => {
                    let port = port_slots
                        .iter()
                        .position(|p| p.as_deref() == Some(ic.port.as_str()))
                        .expect("checked");
                    let pm = &mut ports[port];
                    match (ic.s_vlan, ic.vlan) {
                        (Some(s), c) => qinq[port].push((
                            PortMap::qinq_key(s, c.unwrap_or(dataplane::tables::ANY_C_TAG)),
                            i as u32,
                        )),
                        (None, None) => {
                            pm.untagged = i as u32;
                            pm.tunnel = bridges.tunnels.contains(&ic.name);
                        }
                        (None, Some(v)) => {
                            if pm.vlans.is_empty() {
                                pm.vlans = vec![NO_IF; 4096].into_boxed_slice();
                            }
                            pm.vlans[v as usize] = i as u32;
                        }
                    }
                    port as u16
                }
            };
            ifs.push(Interface {
                name: ic.name.clone(),
                port,
                vlan: ic.vlan,
                s_vlan: ic.s_vlan,
                mac: ic.mac,
                mtu: ic.mtu,
                vrf: vrf_idx(&ic.vrf),
                up: ic.up,
                v4: ic.ipv4.clone(),
                v6: ic.ipv6.clone(),
                punt_local: cfg.control_plane.taps,
                l2: bridges.ports.get(&ic.name).copied(),
                bvi,
            });
        }
        // Each APN's interface: its decapsulated packets arrive on it, in its VRF.
        for apn in cfg.ggsn.iter().flat_map(|g| &g.apns) {
            ifs.push(tunnel_interface(apn.interface(), vrf_idx(&apn.vrf)));
        }
        // Each VRF a label pops into: such packets arrive on it.
        ifs.extend(mpls::lookup_interfaces(&cfg, vrf_idx));
        for (pm, mut q) in ports.iter_mut().zip(qinq) {
            q.sort_unstable();
            pm.qinq = q.into_boxed_slice();
        }
        let generation = shared.load().generation + 1;
        let mut r = Router {
            cfg,
            epoch,
            fibs,
            next_hops: vec![NextHop::NoRoute],
            nh_ids: HashMap::new(),
            ifs,
            ports,
            port_slots,
            ports_down: Default::default(),
            links_down: Default::default(),
            shared,
            services,
            bridges,
            mcast,
            gtp: None,
            learned: HashMap::new(),
            configured: Default::default(),
            route_file_names: Vec::new(),
            sealed: false,
            paths: Default::default(),
            generation,
            atm_maps: Vec::new(),
            mpls: None,
            signalled: HashMap::new(),
            lsp_paths: HashMap::new(),
            pw_routes: Default::default(),
            ldp: LdpTables::default(),
        };
        r.atm_maps = r.build_atm_maps();
        r.mcast_next_hops();
        r.install_connected()?;
        r.install_gtp()?;
        r.install_static()?;
        r.build_mpls()?;
        let files = r.cfg.route_files.clone();
        // Every bad line of every file is reported at once, as for the config itself.
        let mut errors = RouteFileErrors::default();
        for rf in &files {
            r.read_route_file(&rf.path, &rf.vrf, &mut errors);
        }
        if errors.total > 0 {
            return Err(BuildError(crate::config::report(
                &errors.first,
                errors.total,
            )));
        }
        r.sealed = true;
        // Fills this router's own (not yet shared) tables.
        r.publish_fibs()?;
        Ok(r)
    }

    /// Per interface that routes multicast, the next hops its copies leave by (IPv4, IPv6):
    /// the interface's MAC as source; ip-mcast writes the group's MAC per packet.
    fn mcast_next_hops(&mut self) {
        let mut per_if = vec![[0u32; 2]; self.ifs.len()];
        for i in 0..self.ifs.len() {
            let ifc = &self.ifs[i];
            let bridged = ifc.l2.is_some() && ifc.bvi.is_none();
            if !self.mcast.routes_on(&self.cfg, i, bridged) {
                continue;
            }
            let (port, mtu, mac, vlan) = (ifc.port, ifc.mtu, ifc.mac, ifc.vlan);
            for (fam, et) in [(0usize, 0x0800u16), (1, 0x86dd)] {
                per_if[i][fam] = self.nh(NhKey::Mcast(i as u32, fam == 1), |_| NextHop::Forward {
                    tx_if: i as u32,
                    port,
                    mtu,
                    rewrite: Rewrite::ethernet(MacAddr([0; 6]), mac, vlan, et),
                });
            }
        }
        self.mcast.nh = per_if;
    }

    /// The name of port `idx` ("" for none: a bridge's routed interface has no port).
    pub fn port_name(&self, idx: u16) -> &str {
        self.port_slots
            .get(idx as usize)
            .and_then(|p| p.as_deref())
            .unwrap_or("")
    }

    /// Makes this router's tables the ones the workers use, in one pointer swap: interfaces, next
    /// hops and every FIB change together, so no frame is forwarded by a mix of two versions.
    pub fn activate(&mut self) {
        // Large tables are built whole before they go live, never by a worker.
        self.services.prepare(self.cfg.workers);
        self.paths.publishes += 1;
        self.mcast.go_live(&self.cfg);
        self.shared.store(Arc::new(self.tables()));
        self.services.publish_plan(&self.cfg);
        self.apply_bridges();
    }

    /// The MAC table changes of this build, once its tables are live (the first call does them).
    fn apply_bridges(&self) {
        for w in self.bridges.apply() {
            eprintln!("linerate: {w}");
        }
    }

    fn nh(&mut self, key: NhKey, make: impl FnOnce(&Self) -> NextHop) -> u32 {
        if let Some(&id) = self.nh_ids.get(&key) {
            return id;
        }
        let id = self.next_hops.len() as u32;
        let nh = make(self);
        self.next_hops.push(nh);
        self.nh_ids.insert(key, id);
        id
    }

    /// The next hop towards neighbour `ip` on interface `ifx`: forwarding with its MAC address
    /// where known (configured, or learned), otherwise a glean that asks the control plane to
    /// resolve it.
    fn neighbor_nh(&mut self, ifx: u32, ip: IpAddr, mac: Option<MacAddr>) -> u32 {
        let mac = mac.or_else(|| self.learned.get(&(ifx, ip)).copied());
        self.nh(NhKey::Neighbor(ifx, ip), |r| r.adjacency(ifx, ip, mac))
    }

    fn adjacency(&self, ifx: u32, ip: IpAddr, mac: Option<MacAddr>) -> NextHop {
        let ifc = &self.ifs[ifx as usize];
        let et = if ip.is_ipv4() { 0x0800 } else { 0x86dd };
        if let Some(pvc) = self.pvc_next_hop(ifx, ip.is_ipv6()) {
            return pvc;
        }
        match mac {
            Some(mac) => NextHop::Forward {
                tx_if: ifx,
                port: ifc.port,
                mtu: ifc.mtu,
                rewrite: Rewrite::ethernet(mac, ifc.mac, ifc.vlan, et),
            },
            None => NextHop::Glean {
                tx_if: ifx,
                neighbor: Some(ip),
            },
        }
    }

    /// The PVC interface `ifx` is, if it is one.
    pub fn pvc(&self, ifx: u32) -> Option<&crate::config::atm::AtmVcCfg> {
        self.cfg.interfaces.get(ifx as usize)?.atm.as_ref()
    }

    /// Out of PVC `ifx` (IPv6 or not): forwarding with the VC's header; None if `ifx` is not a
    /// PVC. A PVC is point to point: every address on its subnet is the far end.
    fn pvc_next_hop(&self, ifx: u32, v6: bool) -> Option<NextHop> {
        let vc = self.pvc(ifx)?;
        let ifc = &self.ifs[ifx as usize];
        Some(NextHop::Forward {
            tx_if: ifx,
            port: ifc.port,
            mtu: ifc.mtu,
            rewrite: Rewrite::atm(vc.key(), vc.encap, if v6 { 0x86dd } else { 0x0800 }),
        })
    }

    /// The PVC map of every port that carries ATM cells, by port slot.
    fn build_atm_maps(&self) -> Vec<Option<Arc<dataplane::tables::AtmVcMap>>> {
        self.port_slots
            .iter()
            .map(|slot| {
                let name = slot.as_deref()?;
                self.cfg
                    .ports
                    .iter()
                    .find(|p| p.name == name)?
                    .atm
                    .as_ref()?;
                let vcs: Vec<_> = self
                    .cfg
                    .interfaces
                    .iter()
                    .enumerate()
                    .filter(|(_, i)| i.port == name)
                    .filter_map(|(k, i)| i.atm.as_ref().map(|a| (a.key(), k as u32, a.encap)))
                    .collect();
                Some(Arc::new(dataplane::tables::AtmVcMap::new(&vcs)))
            })
            .collect()
    }

    /// The interface that is VC `vpi`/`vci` of ATM port `port`.
    pub fn pvc_interface(
        &self,
        port: &str,
        vpi: u8,
        vci: u16,
    ) -> Option<&crate::config::InterfaceCfg> {
        self.cfg.interfaces.iter().find(|i| {
            i.port == port && i.atm.as_ref().is_some_and(|a| a.vpi == vpi && a.vci == vci)
        })
    }

    /// The VCs of ATM port `name` with their traffic classes, for its queues' SAR.
    pub fn atm_vcs(&self, name: &str) -> Vec<dataplane::atm::VcConfig> {
        self.cfg
            .interfaces
            .iter()
            .filter(|i| i.port == name)
            .filter_map(|i| i.atm.as_ref())
            .map(|a| dataplane::atm::VcConfig {
                vpi: a.vpi,
                vci: a.vci,
                class: a.class,
            })
            .collect()
    }

    /// Records a neighbour learned by ARP or ND: its next hop forwards from now on, and a host
    /// route leads to it (so traffic to it through the connected subnet stops gleaning). Returns
    /// whether anything changed; the caller publishes. Configured neighbours are not overridden.
    pub fn neighbor_learned(&mut self, ifx: u32, ip: IpAddr, mac: MacAddr) -> bool {
        if ifx as usize >= self.ifs.len() || self.static_neighbor(ifx, ip) {
            return false;
        }
        if self.learned.insert((ifx, ip), mac) == Some(mac) {
            return false;
        }
        let nh = self.neighbor_nh(ifx, ip, Some(mac));
        self.next_hops[nh as usize] = self.adjacency(ifx, ip, Some(mac));
        let vrf = self.ifs[ifx as usize].vrf as usize;
        let p = host_prefix(ip);
        let exists = match p {
            Prefix::V4(a, l) => self.fibs[vrf].v4.get(a, l).is_some(),
            Prefix::V6(a, l) => self.fibs[vrf].v6.get(a, l).is_some(),
        };
        if !exists {
            let _ = self.add(vrf, p, nh);
        }
        true
    }

    /// Forgets a learned neighbour that stopped answering: its next hop gleans again (the next
    /// packet towards it starts a new resolution). The caller publishes.
    pub fn neighbor_lost(&mut self, ifx: u32, ip: IpAddr) -> bool {
        if self.learned.remove(&(ifx, ip)).is_none() {
            return false;
        }
        if let Some(&nh) = self.nh_ids.get(&NhKey::Neighbor(ifx, ip)) {
            self.next_hops[nh as usize] = self.adjacency(ifx, ip, None);
        }
        true
    }

    /// Out of interface `ifx` through gateway `gw` (its MAC configured, learned, or to be
    /// resolved), or straight onto the link without one (the destination is the neighbour).
    pub fn nh_via(&mut self, ifx: u32, gw: Option<IpAddr>) -> u32 {
        match gw {
            Some(ip) => {
                let name = self.ifs[ifx as usize].name.clone();
                let mac = self
                    .cfg
                    .neighbors
                    .iter()
                    .find(|n| n.ip == ip && n.interface == name)
                    .map(|n| n.mac);
                self.neighbor_nh(ifx, ip, mac)
            }
            None => self.nh(NhKey::Glean(ifx), |_| NextHop::Glean {
                tx_if: ifx,
                neighbor: None,
            }),
        }
    }

    /// Equal-cost multipath over `members` (next-hop ids of single paths).
    pub fn nh_ecmp(&mut self, mut members: Vec<u32>) -> u32 {
        members.sort_unstable();
        members.dedup();
        if members.len() == 1 {
            return members[0];
        }
        let key = NhKey::Ecmp(members.clone());
        self.nh(key, |_| NextHop::Ecmp(members.into_boxed_slice()))
    }

    /// The interface of VRF `vrf` whose subnet holds `ip`.
    pub fn connected_if(&self, vrf: u32, ip: IpAddr) -> Option<u32> {
        // `ifs` is built in the config's interface order.
        self.cfg
            .interfaces
            .iter()
            .enumerate()
            .position(|(k, i)| self.ifs[k].vrf == vrf && crate::config::on_subnet(i, ip))
            .map(|i| i as u32)
    }

    /// Installs (or replaces) a route; the caller publishes.
    pub fn install(&mut self, vrf: usize, p: Prefix, nh: u32) -> Result<(), String> {
        self.add(vrf, p, nh).map_err(|e| e.0)
    }

    /// Warms the caches for a coming `install` or `remove_route` of `p` (see
    /// [`fib::LpmWriter::prefetch`]).
    #[inline]
    pub fn prefetch_route(&self, vrf: usize, p: Prefix) {
        if let Some(f) = self.fibs.get(vrf) {
            match p {
                Prefix::V4(a, l) => f.v4.prefetch(a, l),
                Prefix::V6(a, l) => f.v6.prefetch(a, l),
            }
        }
    }

    /// Whether the config put `p` in VRF `vrf` (connected, static, neighbour, route file).
    pub fn is_configured(&self, vrf: usize, p: Prefix) -> bool {
        self.configured.contains_key(&(vrf, p))
    }

    /// Whether the FIB of VRF `vrf` holds exactly `p`.
    pub fn has_route(&self, vrf: usize, p: Prefix) -> bool {
        match p {
            Prefix::V4(a, l) => self.fibs[vrf].v4.get(a, l).is_some(),
            Prefix::V6(a, l) => self.fibs[vrf].v6.get(a, l).is_some(),
        }
    }

    fn static_neighbor(&self, ifx: u32, ip: IpAddr) -> bool {
        let name = &self.ifs[ifx as usize].name;
        self.cfg
            .neighbors
            .iter()
            .any(|n| n.ip == ip && &n.interface == name)
    }

    /// The neighbours learned (not configured), by interface name, for the process that takes
    /// over (a hitless restart).
    pub fn learned_neighbors(&self) -> Vec<(String, IpAddr, [u8; 6])> {
        self.learned
            .iter()
            .filter_map(|(&(ifx, ip), mac)| {
                Some((self.ifs.get(ifx as usize)?.name.clone(), ip, mac.0))
            })
            .collect()
    }

    /// Installs neighbours another process learned (see [`Router::learned_neighbors`]): those
    /// on a subnet of an interface of that name; how many.
    pub fn learn_neighbors(&mut self, list: &[(String, IpAddr, [u8; 6])]) -> usize {
        let mut n = 0;
        for (name, ip, mac) in list {
            let Some(ifx) = self.ifs.iter().position(|i| &i.name == name) else {
                continue;
            };
            if crate::config::on_subnet(&self.cfg.interfaces[ifx], *ip) {
                self.neighbor_learned(ifx as u32, *ip, packet::ethernet::MacAddr(*mac));
                n += 1;
            }
        }
        n
    }

    /// Takes over the neighbours `prev` learned (a config commit builds a new router): those
    /// still on a subnet of the same interface keep forwarding without a new resolution.
    pub fn carry_neighbors(&mut self, prev: &Router) {
        for (&(ifx, ip), &mac) in &prev.learned {
            let Some(name) = prev.ifs.get(ifx as usize).map(|i| i.name.clone()) else {
                continue;
            };
            let Some(new_ifx) = self.ifs.iter().position(|i| i.name == name) else {
                continue;
            };
            let ic = &self.cfg.interfaces[new_ifx];
            if crate::config::on_subnet(ic, ip) {
                self.neighbor_learned(new_ifx as u32, ip, mac);
            }
        }
    }

    fn add(&mut self, vrf: usize, p: Prefix, nh: u32) -> Result<(), BuildError> {
        routes_changed();
        if !self.sealed {
            self.configured
                .entry((vrf, p))
                .or_insert(Configured::Config);
        }
        let f = &mut self.fibs[vrf];
        let res = match p {
            Prefix::V4(a, l) => f.v4.insert(a, l, nh).map(|_| ()),
            Prefix::V6(a, l) => f.v6.insert(a, l, nh).map(|_| ()),
        };
        res.map_err(|e| BuildError(format!("{p} in VRF {}: {e}", f.name)))
    }

    /// Each interface address: a local host route and a glean route for its subnet; each static
    /// neighbour: a host route to its adjacency.
    fn install_connected(&mut self) -> Result<(), BuildError> {
        let local = self.nh(NhKey::Local, |_| NextHop::Local);
        for ifx in 0..self.ifs.len() {
            let ifc = self.ifs[ifx].clone();
            let glean = self.nh(NhKey::Glean(ifx as u32), |_| NextHop::Glean {
                tx_if: ifx as u32,
                neighbor: None,
            });
            let vrf = ifc.vrf as usize;
            let (sub4, sub6) = if self.pvc(ifx as u32).is_some() {
                let i = ifx as u32;
                let nh4 = self.pvc_next_hop(i, false).expect("a PVC");
                let nh6 = self.pvc_next_hop(i, true).expect("a PVC");
                (
                    self.nh(NhKey::Pvc(i, false), |_| nh4),
                    self.nh(NhKey::Pvc(i, true), |_| nh6),
                )
            } else {
                (glean, glean)
            };
            for &(a, l) in &ifc.v4 {
                let m = u32::MAX << (32 - l as u32);
                self.add(vrf, Prefix::V4(a & m, l), sub4)?;
                self.add(vrf, Prefix::V4(a, 32), local)?;
            }
            for &(a, l) in &ifc.v6 {
                let m = u128::MAX << (128 - l as u32);
                self.add(vrf, Prefix::V6(a & m, l), sub6)?;
                self.add(vrf, Prefix::V6(a, 128), local)?;
            }
        }
        for nb in self.cfg.neighbors.clone() {
            let ifx = self
                .ifs
                .iter()
                .position(|i| i.name == nb.interface)
                .expect("checked") as u32;
            let vrf = self.ifs[ifx as usize].vrf as usize;
            let nh = self.neighbor_nh(ifx, nb.ip, Some(nb.mac));
            self.add(vrf, host_prefix(nb.ip), nh)?;
        }
        Ok(())
    }

    /// The GGSN's routes: its Gn address to gtpu-input (replacing the address's local route),
    /// each APN's pools to gtpu-encap, in the APN's VRF.
    fn install_gtp(&mut self) -> Result<(), BuildError> {
        let Some(g) = self.cfg.ggsn.clone() else {
            return Ok(());
        };
        let a = u32::from(g.address);
        let gn = self.gn_vrf(a) as usize;
        let local = self.nh(NhKey::GtpuLocal, |_| NextHop::GtpuLocal);
        self.add(gn, Prefix::V4(a, 32), local)?;
        for (i, apn) in g.apns.iter().enumerate() {
            let nh = self.nh(NhKey::GtpApn(i as u16), |_| NextHop::GtpApn {
                apn: i as u16,
            });
            let vrf = self.vrf_index(&apn.vrf);
            if let Some((p, l)) = apn.v4_pool {
                self.add(vrf, Prefix::V4(p, l), nh)?;
            }
            if let Some((p, l)) = apn.v6_pool {
                self.add(vrf, Prefix::V6(p, l), nh)?;
            }
        }
        Ok(())
    }

    /// The Gn side's VRF: that of the interface holding the GGSN's address `a` (the config
    /// check made sure one does).
    fn gn_vrf(&self, a: u32) -> u32 {
        self.ifs
            .iter()
            .find(|i| i.v4.iter().any(|&(x, _)| x == a))
            .map_or(0, |i| i.vrf)
    }

    /// The GGSN's user plane as the tables carry it.
    fn gtpu(&self) -> Option<Arc<dataplane::gtp::Gtpu>> {
        let g = self.gtp.as_ref()?;
        let a = u32::from(g.cfg.address);
        let gn_vrf = self.gn_vrf(a);
        let apns = g
            .cfg
            .apns
            .iter()
            .map(|apn| {
                let name = apn.interface();
                dataplane::gtp::ApnPlane {
                    name: apn.name.clone(),
                    ifx: self
                        .ifs
                        .iter()
                        .position(|i| i.name == name)
                        .map_or(NO_IF, |i| i as u32),
                }
            })
            .collect();
        Some(Arc::new(dataplane::gtp::Gtpu {
            table: g.table.clone(),
            local_v4: a,
            gn_vrf,
            apns,
        }))
    }

    /// The next-hop id for a route target in a VRF, resolving gateways to their neighbours.
    fn resolve(&mut self, vrf: &str, t: &Target) -> Result<u32, String> {
        match t {
            Target::Blackhole => Ok(self.nh(NhKey::Blackhole, |_| NextHop::Blackhole)),
            Target::Reject => Ok(self.nh(NhKey::Reject, |_| NextHop::Reject)),
            Target::Via(v) => {
                let mut members = Vec::with_capacity(v.len());
                for &a in v {
                    let (ifname, mac) = match find_neighbor(&self.cfg, vrf, a) {
                        Some(nb) => (nb.interface.clone(), Some(nb.mac)),
                        None => match find_connected(&self.cfg, vrf, a) {
                            Some(ic) => (ic.name.clone(), None),
                            None => {
                                return Err(format!(
                                    "next hop {a} is not a neighbor nor on a connected subnet in VRF `{vrf}`"
                                ))
                            }
                        },
                    };
                    let ifx = self
                        .ifs
                        .iter()
                        .position(|i| i.name == ifname)
                        .expect("checked");
                    members.push(self.neighbor_nh(ifx as u32, a, mac));
                }
                members.sort_unstable();
                members.dedup();
                if members.len() == 1 {
                    return Ok(members[0]);
                }
                let key = NhKey::Ecmp(members.clone());
                Ok(self.nh(key, |_| NextHop::Ecmp(members.into_boxed_slice())))
            }
        }
    }

    fn install_static(&mut self) -> Result<(), BuildError> {
        for rc in self.cfg.routes.clone() {
            let nh = self.resolve(&rc.vrf, &rc.target).map_err(|m| {
                BuildError(format!(
                    "{}:{}:{}: {}: {m}",
                    self.cfg.source.display(),
                    rc.origin.line,
                    rc.origin.col,
                    rc.origin.field
                ))
            })?;
            let nh = match dataplane::mpls::LabelStack::new(&rc.labels) {
                Some(labels) => self.labelled(nh, labels),
                None => nh,
            };
            let vrf = self.vrf_index(&rc.vrf);
            self.add(vrf, rc.prefix, nh).map_err(|e| {
                BuildError(format!(
                    "{}:{}:{}: {}: {e}",
                    self.cfg.source.display(),
                    rc.origin.line,
                    rc.origin.col,
                    rc.origin.field
                ))
            })?;
        }
        Ok(())
    }

    pub fn vrf_index(&self, name: &str) -> usize {
        self.cfg.vrfs.iter().position(|v| v == name).unwrap_or(0)
    }

    /// Loads a route file: one route per line, `PREFIX/LEN via ADDR[,ADDR...]`, `PREFIX/LEN
    /// blackhole` or `PREFIX/LEN reject`; `#` starts a comment. Returns the number of routes, or
    /// every bad line's error (the first [`crate::config::MAX_PRINTED`] of them, with the count).
    pub fn load_route_file(&mut self, path: &Path, vrf: &str) -> Result<usize, BuildError> {
        let mut errors = RouteFileErrors::default();
        let n = self.read_route_file(path, vrf, &mut errors);
        if errors.total > 0 {
            return Err(BuildError(crate::config::report(
                &errors.first,
                errors.total,
            )));
        }
        Ok(n)
    }

    fn read_route_file(&mut self, path: &Path, vrf: &str, errors: &mut RouteFileErrors) -> usize {
        let file = path.display().to_string();
        let f = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) => {
                errors.push(&file, 1, 1, "path", format!("cannot read: {e}"));
                return 0;
            }
        };
        let vrf_i = self.vrf_index(vrf);
        let file_no = self.route_file_names.len() as u32;
        self.route_file_names.push(file.clone());
        let mut n = 0;
        let mut cache: HashMap<String, u32> = HashMap::new();
        let mut reader = BufReader::new(f);
        let mut raw = Vec::new();
        let mut lineno = 0;
        loop {
            raw.clear();
            match reader.read_until(b'\n', &mut raw) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    errors.push(&file, lineno + 1, 1, "line", format!("cannot read: {e}"));
                    break;
                }
            }
            lineno += 1;
            let line = match std::str::from_utf8(&raw) {
                Ok(s) => s,
                Err(e) => {
                    let at = e.valid_up_to();
                    let col = std::str::from_utf8(&raw[..at]).map_or(at, |s| s.chars().count()) + 1;
                    errors.push(
                        &file,
                        lineno,
                        col,
                        "line",
                        format!("byte 0x{:02X} is not UTF-8 text", raw[at]),
                    );
                    continue;
                }
            };
            let line = line.split('#').next().unwrap_or("");
            let words = words(line);
            let Some(&(pcol, ptext)) = words.first() else {
                continue;
            };
            let mut at =
                |col: usize, field: &str, m: String| errors.push(&file, lineno, col, field, m);
            let p = match Prefix::parse(ptext) {
                Ok(p) => match self.configured.get(&(vrf_i, p)) {
                    // Twice, the last would silently win (or, alike, be a copy that an edit of
                    // one of them turns into that case); ECMP is one line with several `via`.
                    Some(&first) if !self.sealed => {
                        let where_ = match first {
                            Configured::Config => {
                                "by the config (a connected subnet, a local address, a neighbour or a static route)".to_string()
                            }
                            Configured::File { file: f, line } if f == file_no => {
                                format!("at line {line}")
                            }
                            Configured::File { file: f, line } => {
                                format!("in {}:{line}", self.route_file_names[f as usize])
                            }
                        };
                        at(
                            pcol,
                            "prefix",
                            format!("{p} in VRF `{vrf}` is already configured {where_}: a prefix is configured once (ECMP: list every next hop after one `via`)"),
                        );
                        None
                    }
                    _ => Some(p),
                },
                Err(m) => {
                    at(pcol, "prefix", m);
                    None
                }
            };
            let rest: Vec<&str> = words[1..].iter().map(|w| w.1).collect();
            let target_text = rest.join(" ");
            let nh = match cache.get(&target_text) {
                Some(&nh) => Some(nh),
                None => {
                    let tcol = words
                        .get(1)
                        .map_or(line.trim_end().chars().count() + 1, |w| w.0);
                    let t = match rest.as_slice() {
                        ["via", list] => {
                            let lcol = words[2].0;
                            let mut via = Vec::new();
                            let mut ok = true;
                            let mut off = 0;
                            for a in list.split(',') {
                                let col = lcol + list[..off].chars().count();
                                off += a.len() + 1;
                                let ip: Option<IpAddr> = a.parse().ok();
                                let problem = match ip {
                                    None => Some(format!("`{a}` is not an IP address")),
                                    Some(ip) if p.is_some_and(|p| matches!(p, Prefix::V4(..)) != ip.is_ipv4()) => {
                                        Some(format!("next hop {ip} is not of the prefix's family"))
                                    }
                                    Some(ip) if find_neighbor(&self.cfg, vrf, ip).is_none()
                                        && find_connected(&self.cfg, vrf, ip).is_none() =>
                                    {
                                        Some(format!(
                                            "next hop {ip} is not a neighbor nor on a connected subnet in VRF `{vrf}`"
                                        ))
                                    }
                                    Some(ip) => {
                                        via.push(ip);
                                        None
                                    }
                                };
                                if let Some(m) = problem {
                                    at(col, "via", m);
                                    ok = false;
                                }
                            }
                            ok.then_some(Target::Via(via))
                        }
                        ["blackhole"] => Some(Target::Blackhole),
                        ["reject"] => Some(Target::Reject),
                        // A lone word that is no prefix: one error, not two.
                        [] if p.is_none() => None,
                        _ => {
                            at(
                                tcol,
                                "target",
                                format!(
                                    "expected `via ADDR[,ADDR...]`, `blackhole` or `reject` after the prefix, found `{target_text}`"
                                ),
                            );
                            None
                        }
                    };
                    match t.map(|t| self.resolve(vrf, &t)) {
                        Some(Ok(nh)) => {
                            cache.insert(target_text, nh);
                            Some(nh)
                        }
                        Some(Err(m)) => {
                            at(tcol, "via", m);
                            None
                        }
                        None => None,
                    }
                }
            };
            if let (Some(p), Some(nh)) = (p, nh) {
                match self.add(vrf_i, p, nh) {
                    Ok(()) => {
                        n += 1;
                        if !self.sealed {
                            let line = u32::try_from(lineno).unwrap_or(u32::MAX);
                            self.configured.insert(
                                (vrf_i, p),
                                Configured::File {
                                    file: file_no,
                                    line,
                                },
                            );
                        }
                    }
                    Err(e) => at(pcol, "prefix", e.0),
                }
            }
        }
        n
    }

    /// The small tables as the workers should see them: interfaces on ports that are out of
    /// service are down, and next hops through them are replaced (ECMP groups lose the member).
    fn tables(&self) -> Tables {
        let mut ifs = self.ifs.clone();
        for i in ifs.iter_mut() {
            let port = self.port_name(i.port);
            i.up &= !self.ports_down.contains(port) && !self.links_down.contains(port);
        }
        // Flexlink: each pair's active member from its members' state; the other blocks.
        self.bridges.flexlink_apply(&mut ifs);
        self.bridges.shut_apply(&mut ifs);
        let l2_members = self.bridges.l2_members(&ifs);
        let down = |nh: u32| {
            let tx_down = |nh: u32| match &self.next_hops[nh as usize] {
                NextHop::Forward { tx_if, .. } => !ifs[*tx_if as usize].up,
                _ => false,
            };
            match &self.next_hops[nh as usize] {
                // A labelled member (an LSP's way, a labelled route's path) is down with the
                // neighbour it goes through.
                NextHop::Labelled { via, .. } => tx_down(*via),
                _ => tx_down(nh),
            }
        };
        let next_hops = self
            .next_hops
            .iter()
            .enumerate()
            .map(|(id, nh)| match nh {
                NextHop::Forward { tx_if, .. } if !ifs[*tx_if as usize].up => {
                    NextHop::Down { tx_if: *tx_if }
                }
                NextHop::Ecmp(m) if m.iter().any(|&x| down(x)) => {
                    let mut live: Box<[u32]> = m.iter().copied().filter(|&x| !down(x)).collect();
                    if live.is_empty() {
                        // A path with a backup falls back to it.
                        if let Some(b) = self.paths.backups.get(&(id as u32)) {
                            live = b.iter().copied().filter(|&x| !down(x)).collect();
                        }
                    }
                    match live.len() {
                        0 => NextHop::Down { tx_if: NO_IF },
                        1 => self.next_hops[live[0] as usize].clone(),
                        _ => NextHop::Ecmp(live),
                    }
                }
                other => other.clone(),
            })
            .collect();
        Tables {
            ifs: ifs.into_boxed_slice(),
            ports: self.ports.clone().into_boxed_slice(),
            next_hops,
            vrfs: self
                .fibs
                .iter()
                .map(|f| Vrf {
                    name: f.name.clone(),
                    v4: f.v4.table().clone(),
                    v6: f.v6.table().clone(),
                })
                .collect(),
            icmp_rate: self.cfg.icmp_rate,
            any_features: self.services.features.iter().any(|f| f.is_some()),
            route_class_e: self.cfg.route_class_e,
            features: self.services.features.clone().into_boxed_slice(),
            flow: self.services.flow.clone(),
            acl_log: self.services.acl_log.clone(),
            punt: self.services.punt.clone(),
            generation: self.generation,
            l2_members,
            l2_storm: self.bridges.l2_storm(),
            snoop: self.bridges.snoop.clone(),
            bridges: self.bridges.bridges.clone().into_boxed_slice(),
            macs: self.bridges.table.clone(),
            mfib: self.mcast.fib.clone(),
            mcast_vrfs: self.mcast.vrfs.clone().into_boxed_slice(),
            mcast_nh: self.mcast.nh.clone().into_boxed_slice(),
            gtpu: self.gtpu(),
            atm: self.atm_maps.clone().into_boxed_slice(),
            mpls: self.mpls.clone(),
        }
    }

    /// Publishes route changes made to the live FIBs, and a new version of the small tables.
    pub fn publish(&mut self) -> Result<(), BuildError> {
        // A pseudowire whose route to its peer changed takes the new way in the same tables.
        self.follow_pw_routes()?;
        // Next hops first, so no route can point at an id the workers do not know yet.
        self.paths.publishes += 1;
        self.shared.store(Arc::new(self.tables()));
        self.services.publish_plan(&self.cfg);
        self.apply_bridges();
        self.publish_fibs()
    }

    /// Adds (or replaces) a route in VRF index `vrf`; the caller publishes.
    pub fn add_route(&mut self, vrf: usize, p: Prefix, t: &Target) -> Result<(), String> {
        let name = self
            .cfg
            .vrfs
            .get(vrf)
            .cloned()
            .ok_or_else(|| format!("no VRF {vrf}"))?;
        let nh = self.resolve(&name, t)?;
        self.add(vrf, p, nh).map_err(|e| e.0)
    }

    /// Removes a route; returns whether it was there. The caller publishes.
    pub fn remove_route(&mut self, vrf: usize, p: Prefix) -> bool {
        routes_changed();
        let Some(f) = self.fibs.get_mut(vrf) else {
            return false;
        };
        match p {
            Prefix::V4(a, l) => f.v4.remove(a, l).is_some(),
            Prefix::V6(a, l) => f.v6.remove(a, l).is_some(),
        }
    }

    /// Publishes the FIBs' pending changes into their own tables (visible to workers only if
    /// these tables are the active ones).
    pub fn publish_fibs(&mut self) -> Result<(), BuildError> {
        for f in &mut self.fibs {
            f.v4.publish()
                .map_err(|e| BuildError(format!("VRF {}: IPv4: {e}", f.name)))?;
            f.v6.publish()
                .map_err(|e| BuildError(format!("VRF {}: IPv6: {e}", f.name)))?;
        }
        Ok(())
    }

    /// For `show`: each next hop's kind and what it points at (`192.0.2.2 on p0`), by id.
    pub fn next_hop_descriptions(&self) -> Vec<(NextHopKind, Vec<String>)> {
        let mut by_id: Vec<Option<&NhKey>> = vec![None; self.next_hops.len()];
        for (k, &id) in &self.nh_ids {
            by_id[id as usize] = Some(k);
        }
        let ifname = |i: u32| {
            self.ifs
                .get(i as usize)
                .map_or("?".to_string(), |x| x.name.clone())
        };
        let down = |i: u32| {
            self.ifs
                .get(i as usize)
                .is_some_and(|x| self.ports_down.contains(self.port_name(x.port)))
        };
        let neighbor = |k: Option<&NhKey>| match k {
            Some(NhKey::Neighbor(i, ip)) if down(*i) => format!("{ip} on {} (down)", ifname(*i)),
            Some(NhKey::Neighbor(i, ip)) => format!("{ip} on {}", ifname(*i)),
            _ => "?".into(),
        };
        by_id
            .iter()
            .enumerate()
            .map(|(id, k)| match (&self.next_hops[id], k) {
                (NextHop::NoRoute, _) => (NextHopKind::None, vec![]),
                (NextHop::Forward { .. }, k) => (NextHopKind::Forward, vec![neighbor(*k)]),
                (NextHop::Ecmp(m), _) if m.len() == 1 => {
                    (NextHopKind::Forward, vec![neighbor(by_id[m[0] as usize])])
                }
                (NextHop::Ecmp(m), _) => {
                    // An uneven group repeats a member once per bucket (adjacent): one line
                    // each, with its share of the buckets.
                    let uneven = m.windows(2).any(|w| w[0] == w[1]);
                    let out = m
                        .chunk_by(|a, b| a == b)
                        .map(|run| {
                            let what = neighbor(by_id[run[0] as usize]);
                            if uneven {
                                format!("{what} ({}/{} buckets)", run.len(), m.len())
                            } else {
                                what
                            }
                        })
                        .collect();
                    (NextHopKind::Ecmp, out)
                }
                (NextHop::Local, _) => (NextHopKind::Local, vec![]),
                (
                    NextHop::Glean {
                        tx_if,
                        neighbor: None,
                    },
                    _,
                ) => (NextHopKind::Connected, vec![ifname(*tx_if)]),
                (
                    NextHop::Glean {
                        tx_if,
                        neighbor: Some(ip),
                    },
                    _,
                ) => (
                    NextHopKind::Incomplete,
                    vec![format!("{ip} on {}", ifname(*tx_if))],
                ),
                (NextHop::Down { tx_if }, _) => (NextHopKind::Down, vec![ifname(*tx_if)]),
                (NextHop::Blackhole, _) => (NextHopKind::Blackhole, vec![]),
                (NextHop::Reject, _) => (NextHopKind::Reject, vec![]),
                (NextHop::GtpuLocal, _) => (NextHopKind::GtpuLocal, vec![]),
                (NextHop::GtpApn { apn }, _) => (
                    NextHopKind::Gtp,
                    vec![self
                        .cfg
                        .ggsn
                        .as_ref()
                        .and_then(|g| g.apns.get(*apn as usize))
                        .map_or("?".into(), |a| format!("APN {}", a.name))],
                ),
                (NextHop::Labelled { via, labels }, _) => {
                    let v = match &self.next_hops[*via as usize] {
                        NextHop::Ecmp(m) => {
                            m.iter().map(|&x| neighbor(by_id[x as usize])).collect()
                        }
                        _ => vec![neighbor(by_id[*via as usize])],
                    };
                    (
                        NextHopKind::Labelled,
                        v.into_iter()
                            .map(|n| format!("{n} labels {labels}"))
                            .collect(),
                    )
                }
            })
            .collect()
    }

    /// The index of a port by name.
    pub fn port_index(&self, name: &str) -> Option<u16> {
        self.port_slots
            .iter()
            .position(|p| p.as_deref() == Some(name))
            .map(|i| i as u16)
    }

    pub fn route_counts(&self) -> (usize, usize) {
        self.fibs
            .iter()
            .fold((0, 0), |(a, b), f| (a + f.v4.len(), b + f.v6.len()))
    }
}

/// Gives each port name an index: the one it had in `old` if any, else the first free slot.
fn assign_slots<'a>(
    old: &[Option<String>],
    names: impl Iterator<Item = &'a str> + Clone,
) -> Result<Vec<Option<String>>, BuildError> {
    let mut slots: Vec<Option<String>> = old
        .iter()
        .map(|s| s.clone().filter(|n| names.clone().any(|m| m == n)))
        .collect();
    for n in names {
        if slots.iter().any(|s| s.as_deref() == Some(n)) {
            continue;
        }
        match slots.iter().position(Option::is_none) {
            Some(i) => slots[i] = Some(n.to_string()),
            None => slots.push(Some(n.to_string())),
        }
    }
    while slots.last().is_some_and(Option::is_none) {
        slots.pop();
    }
    if slots.len() > dataplane::counters::MAX_PORTS {
        return Err(BuildError(format!(
            "{} ports: at most {} are supported",
            slots.len(),
            dataplane::counters::MAX_PORTS
        )));
    }
    Ok(slots)
}

#[cfg(test)]
mod tests {
    use super::assign_slots;

    fn names(v: &[Option<String>]) -> Vec<&str> {
        v.iter().map(|s| s.as_deref().unwrap_or("-")).collect()
    }

    #[test]
    fn ports_keep_their_index_and_new_ones_fill_holes() {
        let a = assign_slots(&[], ["p0", "p1", "p2"].into_iter()).unwrap();
        assert_eq!(names(&a), ["p0", "p1", "p2"]);
        let b = assign_slots(&a, ["p2", "p0"].into_iter()).unwrap();
        assert_eq!(names(&b), ["p0", "-", "p2"]);
        let c = assign_slots(&b, ["p0", "p2", "p9", "p8"].into_iter()).unwrap();
        assert_eq!(names(&c), ["p0", "p9", "p2", "p8"]);
        let d = assign_slots(&c, ["p0"].into_iter()).unwrap();
        assert_eq!(names(&d), ["p0"], "trailing free slots are trimmed");
    }
}
