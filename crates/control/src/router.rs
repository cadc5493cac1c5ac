//! Turns a checked [`Config`] into a running router: interfaces, next hops, FIBs per VRF, ports
//! and workers. The control plane is the single owner of the route tables ([`Fibs`]); it
//! publishes the small tables (interfaces, next hops) whole and the FIBs slot by slot.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use arc_swap::ArcSwap;
use dataplane::port::mem::{ring, RingRx, RingTx};
use dataplane::port::pcap::{PcapRx, PcapTx};
use dataplane::port::replay::{ReplayRx, SinkTx};
use dataplane::port::PortQueues;
use dataplane::tables::{Interface, NextHop, PortMap, Rewrite, SharedTables, Tables, Vrf, NO_IF};
use dataplane::worker::Worker;
use dataplane::{BufCache, Pool, Snapshot, WorkerCounters};
use fib::{EpochDomain, LpmConfig, LpmWriter};

use crate::config::{find_neighbor, Config, Driver, Prefix, Target};

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
}

pub struct Router {
    pub cfg: Config,
    pub epoch: Arc<EpochDomain>,
    pub fibs: Vec<Fibs>,
    pub next_hops: Vec<NextHop>,
    nh_ids: HashMap<NhKey, u32>,
    pub ifs: Vec<Interface>,
    pub ports: Vec<PortMap>,
    pub port_names: Vec<String>,
    pub shared: SharedTables,
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
        let epoch = EpochDomain::new();
        let fibs: Vec<Fibs> = cfg
            .vrfs
            .iter()
            .map(|name| Fibs {
                name: name.clone(),
                v4: LpmWriter::new(LpmConfig::v4(cfg.max_v4_routes), epoch.clone()),
                v6: LpmWriter::new(LpmConfig::v6(cfg.max_v6_routes), epoch.clone()),
            })
            .collect();
        let port_names: Vec<String> = cfg.ports.iter().map(|p| p.name.clone()).collect();
        let mut ports: Vec<PortMap> = port_names
            .iter()
            .map(|_| PortMap {
                untagged: NO_IF,
                vlans: Box::new([]),
            })
            .collect();
        let vrf_idx = |name: &str| cfg.vrfs.iter().position(|v| v == name).expect("checked") as u32;
        let mut ifs = Vec::new();
        for (i, ic) in cfg.interfaces.iter().enumerate() {
            let port = port_names
                .iter()
                .position(|p| *p == ic.port)
                .expect("checked");
            let pm = &mut ports[port];
            match ic.vlan {
                None => pm.untagged = i as u32,
                Some(v) => {
                    if pm.vlans.is_empty() {
                        pm.vlans = vec![NO_IF; 4096].into_boxed_slice();
                    }
                    pm.vlans[v as usize] = i as u32;
                }
            }
            ifs.push(Interface {
                name: ic.name.clone(),
                port: port as u16,
                vlan: ic.vlan,
                mac: ic.mac,
                mtu: ic.mtu,
                vrf: vrf_idx(&ic.vrf),
                up: ic.up,
                v4: ic.ipv4.clone(),
                v6: ic.ipv6.clone(),
            });
        }
        let shared: SharedTables = Arc::new(ArcSwap::from_pointee(Tables {
            ifs: Box::new([]),
            ports: Box::new([]),
            next_hops: vec![NextHop::NoRoute].into_boxed_slice(),
            vrfs: Box::new([]),
            icmp_rate: cfg.icmp_rate,
        }));
        let mut r = Router {
            cfg,
            epoch,
            fibs,
            next_hops: vec![NextHop::NoRoute],
            nh_ids: HashMap::new(),
            ifs,
            ports,
            port_names,
            shared,
        };
        r.install_connected()?;
        r.install_static()?;
        let files = r.cfg.route_files.clone();
        for rf in &files {
            r.load_route_file(&rf.path, &rf.vrf)?;
        }
        r.publish()?;
        Ok(r)
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

    fn neighbor_nh(&mut self, ifx: u32, ip: IpAddr, mac: packet::ethernet::MacAddr) -> u32 {
        self.nh(NhKey::Neighbor(ifx, ip), |r| {
            let ifc = &r.ifs[ifx as usize];
            let et = if ip.is_ipv4() { 0x0800 } else { 0x86dd };
            NextHop::Forward {
                tx_if: ifx,
                port: ifc.port,
                mtu: ifc.mtu,
                rewrite: Rewrite::ethernet(mac, ifc.mac, ifc.vlan, et),
            }
        })
    }

    fn add(&mut self, vrf: usize, p: Prefix, nh: u32) -> Result<(), BuildError> {
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
            });
            let vrf = ifc.vrf as usize;
            for &(a, l) in &ifc.v4 {
                let m = u32::MAX << (32 - l as u32);
                self.add(vrf, Prefix::V4(a & m, l), glean)?;
                self.add(vrf, Prefix::V4(a, 32), local)?;
            }
            for &(a, l) in &ifc.v6 {
                let m = u128::MAX << (128 - l as u32);
                self.add(vrf, Prefix::V6(a & m, l), glean)?;
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
            let nh = self.neighbor_nh(ifx, nb.ip, nb.mac);
            let p = match nb.ip {
                IpAddr::V4(a) => Prefix::V4(u32::from(a), 32),
                IpAddr::V6(a) => Prefix::V6(u128::from(a), 128),
            };
            self.add(vrf, p, nh)?;
        }
        Ok(())
    }

    /// The next-hop id for a route target in a VRF, resolving gateways to their neighbours.
    fn resolve(&mut self, vrf: &str, t: &Target) -> Result<u32, String> {
        match t {
            Target::Blackhole => Ok(self.nh(NhKey::Blackhole, |_| NextHop::Blackhole)),
            Target::Reject => Ok(self.nh(NhKey::Reject, |_| NextHop::Reject)),
            Target::Via(v) => {
                let mut members = Vec::with_capacity(v.len());
                for &a in v {
                    let nb = find_neighbor(&self.cfg, vrf, a)
                        .ok_or_else(|| format!("next hop {a} is not a neighbor in VRF `{vrf}`"))?
                        .clone();
                    let ifx = self
                        .ifs
                        .iter()
                        .position(|i| i.name == nb.interface)
                        .expect("checked");
                    members.push(self.neighbor_nh(ifx as u32, a, nb.mac));
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
                    "{}:{}: {}: {m}",
                    self.cfg.source.display(),
                    rc.origin.line,
                    rc.origin.field
                ))
            })?;
            let vrf = self.vrf_index(&rc.vrf);
            self.add(vrf, rc.prefix, nh).map_err(|e| {
                BuildError(format!(
                    "{}:{}: {e}",
                    self.cfg.source.display(),
                    rc.origin.line
                ))
            })?;
        }
        Ok(())
    }

    pub fn vrf_index(&self, name: &str) -> usize {
        self.cfg.vrfs.iter().position(|v| v == name).unwrap_or(0)
    }

    /// Loads a route file: one route per line, `PREFIX/LEN via ADDR[,ADDR...]`, `PREFIX/LEN
    /// blackhole` or `PREFIX/LEN reject`; `#` starts a comment. Returns the number of routes.
    pub fn load_route_file(&mut self, path: &Path, vrf: &str) -> Result<usize, BuildError> {
        let f = std::fs::File::open(path)
            .map_err(|e| BuildError(format!("{}: {e}", path.display())))?;
        let vrf_i = self.vrf_index(vrf);
        let mut n = 0;
        let mut cache: HashMap<String, u32> = HashMap::new();
        for (i, line) in BufReader::new(f).lines().enumerate() {
            let at = |m: String| BuildError(format!("{}:{}: {m}", path.display(), i + 1));
            let line = line.map_err(|e| at(e.to_string()))?;
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut it = line.split_whitespace();
            let p = Prefix::parse(it.next().unwrap_or_default()).map_err(at)?;
            let rest: Vec<&str> = it.collect();
            let target_text = rest.join(" ");
            let nh = match cache.get(&target_text) {
                Some(&nh) => nh,
                None => {
                    let t = match rest.as_slice() {
                        ["via", list] => Target::Via(
                            list.split(',')
                                .map(|a| a.parse().map_err(|_| format!("`{a}` is not an IP address")))
                                .collect::<Result<_, _>>()
                                .map_err(at)?,
                        ),
                        ["blackhole"] => Target::Blackhole,
                        ["reject"] => Target::Reject,
                        _ => {
                            return Err(at(format!(
                                "expected `via ADDR[,ADDR...]`, `blackhole` or `reject` after the prefix, found `{target_text}`"
                            )))
                        }
                    };
                    let nh = self.resolve(vrf, &t).map_err(at)?;
                    cache.insert(target_text, nh);
                    nh
                }
            };
            self.add(vrf_i, p, nh).map_err(|e| at(e.0))?;
            n += 1;
        }
        Ok(n)
    }

    /// Publishes the FIB changes and a new version of the small tables.
    pub fn publish(&mut self) -> Result<(), BuildError> {
        let t = Tables {
            ifs: self.ifs.clone().into_boxed_slice(),
            ports: self.ports.clone().into_boxed_slice(),
            next_hops: self.next_hops.clone().into_boxed_slice(),
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
        };
        // Next hops first, so no route can point at an id the workers do not know yet.
        self.shared.store(Arc::new(t));
        for f in &mut self.fibs {
            f.v4.publish()
                .map_err(|e| BuildError(format!("VRF {}: IPv4: {e}", f.name)))?;
            f.v6.publish()
                .map_err(|e| BuildError(format!("VRF {}: IPv6: {e}", f.name)))?;
        }
        Ok(())
    }

    pub fn route_counts(&self) -> (usize, usize) {
        self.fibs
            .iter()
            .fold((0, 0), |(a, b), f| (a + f.v4.len(), b + f.v6.len()))
    }
}

/// The other ends of a `mem` port's rings, for the tester: it sends into `to_router[q]` (the
/// router's receive queue of worker q) and receives from `from_router[q]`.
pub struct MemPeer {
    pub name: String,
    pub to_router: Vec<RingTx>,
    pub from_router: Vec<RingRx>,
}

/// A router with its workers started.
pub struct Running {
    pub workers: Vec<JoinHandle<()>>,
    pub counters: Vec<Arc<WorkerCounters>>,
    pub stop: Arc<AtomicBool>,
    pub pool: Arc<Pool>,
    pub ports: usize,
}

/// Options for starting workers that the config does not carry (the tester sets them).
#[derive(Clone)]
pub struct StartOptions {
    /// Frames each receive ring holds (a NIC's receive descriptor ring).
    pub ring_size: usize,
    /// Frames each transmit ring towards a mem peer holds; None: `ring_size`. The tester makes
    /// these deep: they stand for the wire and the tester's own receive side, which a real
    /// tester never lets overflow.
    pub tx_ring_size: Option<usize>,
    pub idle_yield_after: u32,
    /// Pool to use; a new one of the config's size if None.
    pub pool: Option<Arc<Pool>>,
    /// Benchmarks only: the first `mem` port replays these frames on every worker and every
    /// `mem` port's transmit queue counts and frees (see `dataplane::port::replay`). No peers.
    pub replay: Option<Arc<[Vec<u8>]>>,
}

impl Default for StartOptions {
    fn default() -> Self {
        Self {
            ring_size: 4096,
            tx_ring_size: None,
            idle_yield_after: 256,
            pool: None,
            replay: None,
        }
    }
}

impl Router {
    /// Opens the ports and starts the workers. Capture-file ports are served by worker 0; every
    /// worker gets its own queue pair on every `mem` port. Returns the mem ports' other ends.
    pub fn start(&self, opts: StartOptions) -> Result<(Running, Vec<MemPeer>), BuildError> {
        let nw = self.cfg.workers;
        let pool = opts
            .pool
            .clone()
            .unwrap_or_else(|| Pool::new(self.cfg.buffers));
        let mut per_worker: Vec<Vec<PortQueues>> = (0..nw).map(|_| Vec::new()).collect();
        let mut peers = Vec::new();
        for pc in &self.cfg.ports {
            match &pc.driver {
                Driver::Pcap { rx, tx } => {
                    for (w, queues) in per_worker.iter_mut().enumerate() {
                        let (mut rxq, mut txq) = (None, None);
                        if w == 0 {
                            if let Some(p) = rx {
                                rxq =
                                    Some(Box::new(PcapRx::open(p).map_err(BuildError)?) as Box<_>);
                            }
                            if let Some(p) = tx {
                                txq = Some(
                                    Box::new(PcapTx::create(p).map_err(BuildError)?) as Box<_>
                                );
                            }
                        }
                        queues.push(PortQueues {
                            name: pc.name.clone(),
                            rx: rxq,
                            tx: txq,
                        });
                    }
                }
                Driver::Mem if opts.replay.is_some() => {
                    let first = !self
                        .cfg
                        .ports
                        .iter()
                        .take_while(|p| p.name != pc.name)
                        .any(|p| p.driver == Driver::Mem);
                    for queues in per_worker.iter_mut() {
                        let rx = opts.replay.as_ref().filter(|_| first).map(|f| {
                            Box::new(ReplayRx::new(f.clone(), pool.capacity()))
                                as Box<dyn dataplane::port::RxQueue>
                        });
                        queues.push(PortQueues {
                            name: pc.name.clone(),
                            rx,
                            tx: Some(Box::new(SinkTx {
                                frames: Arc::new(AtomicU64::new(0)),
                            })),
                        });
                    }
                }
                Driver::Mem => {
                    let mut peer = MemPeer {
                        name: pc.name.clone(),
                        to_router: Vec::new(),
                        from_router: Vec::new(),
                    };
                    for queues in per_worker.iter_mut() {
                        let (to_tx, to_rx) = ring(opts.ring_size);
                        let (from_tx, from_rx) = ring(opts.tx_ring_size.unwrap_or(opts.ring_size));
                        peer.to_router.push(to_tx);
                        peer.from_router.push(from_rx);
                        queues.push(PortQueues {
                            name: pc.name.clone(),
                            rx: Some(Box::new(to_rx)),
                            tx: Some(Box::new(from_tx)),
                        });
                    }
                    peers.push(peer);
                }
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let nports = self.cfg.ports.len();
        let mut counters = Vec::new();
        let mut workers = Vec::new();
        for (id, ports) in per_worker.into_iter().enumerate() {
            let c = Arc::new(WorkerCounters::new(nports));
            counters.push(c.clone());
            let w = Worker {
                id,
                core: self.cfg.cores.get(id).copied(),
                ports,
                cache: BufCache::new(pool.clone()),
                tables: self.shared.clone(),
                epoch: self.epoch.register(),
                counters: c,
                stop: stop.clone(),
                idle_yield_after: opts.idle_yield_after,
            };
            let h = std::thread::Builder::new()
                .name(format!("worker{id}"))
                .spawn(move || w.run())
                .map_err(|e| BuildError(format!("cannot start worker {id}: {e}")))?;
            workers.push(h);
        }
        Ok((
            Running {
                workers,
                counters,
                stop,
                pool,
                ports: nports,
            },
            peers,
        ))
    }
}

impl Running {
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::sum(&self.counters, self.ports)
    }

    /// Waits for workers that stop by themselves (drained capture files).
    pub fn join(self) -> Snapshot {
        for h in self.workers {
            let _ = h.join();
        }
        Snapshot::sum(&self.counters, self.ports)
    }

    pub fn stop(self) -> Snapshot {
        self.stop.store(true, Ordering::Relaxed);
        self.join()
    }
}
