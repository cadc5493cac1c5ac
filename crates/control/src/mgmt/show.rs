//! Read-only views of the running router, as `linerate show ...` prints them and the API
//! returns them (JSON). Counters in shows count from the last `clear counters`; metrics
//! (`exposition.rs`) never reset.

use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::Ordering;

use dataplane::counters::{DropReason, MAX_PORTS};
use dataplane::tap::Traced;
use fib::Key;
use serde::Serialize;

use super::{ApiError, ApiResult, CommandStats, Core, PrefixKey};
use crate::config::{Driver, Prefix};

#[derive(Serialize)]
pub struct InterfaceView {
    pub name: String,
    pub port: String,
    pub vlan: Option<u16>,
    pub mac: String,
    pub mtu: u16,
    pub vrf: String,
    pub admin_up: bool,
    pub oper_up: bool,
    pub ipv4: Vec<String>,
    pub ipv6: Vec<String>,
}

#[derive(Serialize)]
pub struct QueueView {
    pub queue: u16,
    pub worker: usize,
}

#[derive(Serialize)]
pub struct PortView {
    pub name: String,
    pub index: u16,
    pub driver: &'static str,
    pub in_service: bool,
    pub queues: Vec<QueueView>,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Frames that arrived but could not be taken in (capture records skipped or unreadable).
    pub rx_errors: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

#[derive(Serialize)]
pub struct RouteView {
    pub prefix: String,
    pub origin: &'static str,
    pub kind: &'static str,
    pub via: Vec<String>,
    pub next_hop_id: u32,
}

#[derive(Serialize)]
pub struct RoutesView {
    pub vrf: String,
    pub family: &'static str,
    /// Routes in the table (the whole VRF and family).
    pub total: usize,
    /// Routes that matched the query, of which `routes` holds the first `limit`.
    pub matched: usize,
    pub routes: Vec<RouteView>,
}

#[derive(Serialize)]
pub struct NeighborView {
    pub interface: String,
    pub ip: String,
    pub mac: String,
    pub state: &'static str,
    /// Seconds since the last confirmation (learned entries).
    pub age_s: Option<f64>,
    /// Packets held while it resolves.
    pub held: usize,
}

#[derive(Serialize)]
pub struct PortCountersView {
    pub port: String,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_errors: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

#[derive(Serialize)]
pub struct CountersView {
    pub ports: Vec<PortCountersView>,
    pub drops: u64,
    pub icmp_sent: u64,
    pub icmp_rate_limited: u64,
    pub echo_replies: u64,
    pub slow_path: u64,
    pub vectors: u64,
    pub busy_ns: u64,
    pub since_clear: bool,
}

#[derive(Serialize)]
pub struct ErrorView {
    pub node: &'static str,
    pub reason: &'static str,
    pub text: &'static str,
    pub count: u64,
    /// Per live worker (by id); removed workers' drops count in `count` only.
    pub per_worker: BTreeMap<usize, u64>,
}

#[derive(Serialize)]
pub struct WorkerView {
    pub id: usize,
    pub core: Option<usize>,
    /// `port/queue` pairs it polls.
    pub rx_queues: Vec<String>,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub drops: u64,
    pub vectors: u64,
    pub busy_ns: u64,
}

#[derive(Serialize)]
pub struct TableView {
    pub table: String,
    pub entries: usize,
    pub limit: usize,
    pub bytes: usize,
}

#[derive(Serialize)]
pub struct SystemView {
    pub version: &'static str,
    pub uptime_s: u64,
    pub commit: u64,
    pub pending_confirm: Option<(u64, u64)>,
    pub workers: usize,
    pub ports: usize,
    pub buffers: usize,
    pub buffers_free: usize,
    pub tables: Vec<TableView>,
    pub api: BTreeMap<&'static str, CommandStats>,
}

#[derive(Serialize)]
pub struct LogView {
    pub seq: u64,
    pub unix_ms: u64,
    pub severity: &'static str,
    pub msgid: String,
    pub params: Vec<(String, String)>,
    pub text: String,
}

#[derive(Serialize)]
pub struct StepView {
    pub node: &'static str,
    pub decision: String,
    pub next: String,
}

#[derive(Serialize)]
pub struct TraceView {
    pub id: u32,
    pub worker: u16,
    pub summary: String,
    pub steps: Vec<StepView>,
}

impl From<Traced> for TraceView {
    fn from(t: Traced) -> Self {
        TraceView {
            id: t.id,
            worker: t.worker,
            summary: t.summary,
            steps: t
                .steps
                .into_iter()
                .map(|s| StepView {
                    node: s.node,
                    decision: s.decision,
                    next: s.next,
                })
                .collect(),
        }
    }
}

fn sub(a: &[u64], b: &[u64], i: usize) -> u64 {
    a.get(i)
        .copied()
        .unwrap_or(0)
        .saturating_sub(b.get(i).copied().unwrap_or(0))
}

fn v4(a: u32, l: u8) -> String {
    format!("{}/{l}", Ipv4Addr::from(a))
}

fn v6(a: u128, l: u8) -> String {
    format!("{}/{l}", Ipv6Addr::from(a))
}

/// The `limit` smallest items of a stream, and how many there were.
struct Smallest {
    heap: std::collections::BinaryHeap<(u128, u8, u32)>,
    limit: usize,
    count: usize,
}

impl Smallest {
    fn new(limit: usize) -> Self {
        Smallest {
            heap: std::collections::BinaryHeap::new(),
            limit,
            count: 0,
        }
    }

    fn push(&mut self, x: (u128, u8, u32)) {
        self.count += 1;
        if self.heap.len() < self.limit {
            self.heap.push(x);
        } else if self.heap.peek().is_some_and(|top| x < *top) {
            self.heap.pop();
            self.heap.push(x);
        }
    }

    fn into_sorted(self) -> Vec<(u128, u8, u32)> {
        self.heap.into_sorted_vec()
    }
}

impl Extend<(u128, u8, u32)> for Smallest {
    fn extend<I: IntoIterator<Item = (u128, u8, u32)>>(&mut self, it: I) {
        for x in it {
            self.push(x);
        }
    }
}

/// A route query: the whole table, one prefix (with `longer`: and everything inside it), or the
/// longest match of an address.
pub struct RouteQuery<'a> {
    pub vrf: Option<&'a str>,
    pub ipv6: bool,
    pub prefix: Option<&'a str>,
    pub longer: bool,
    pub limit: usize,
}

impl RouteQuery<'_> {
    /// The prefix asked for, if any, and whether it must match exactly (it was given with a
    /// length) rather than be the longest match for an address; refused if it is not of the
    /// family asked for.
    pub fn wanted(&self) -> ApiResult<Option<(Prefix, bool)>> {
        let Some(text) = self.prefix else {
            return Ok(None);
        };
        let exact = text.contains('/');
        let p = Prefix::parse(text).map_err(ApiError::invalid)?;
        match (p, self.ipv6) {
            (Prefix::V4(..), true) | (Prefix::V6(..), false) => Err(ApiError::invalid(format!(
                "`{text}` is not an {} prefix",
                if self.ipv6 { "IPv6" } else { "IPv4" }
            ))),
            _ => Ok(Some((p, exact))),
        }
    }
}

impl Core {
    pub fn interfaces(&self) -> Vec<InterfaceView> {
        let s = self.lock("show.interfaces");
        let r = &s.router;
        r.ifs
            .iter()
            .map(|i| {
                let port = r.port_slots[i.port as usize].clone().unwrap_or_default();
                let in_service = s.runtime.is_in_service(i.port);
                InterfaceView {
                    name: i.name.clone(),
                    vlan: i.vlan,
                    mac: i.mac.to_string(),
                    mtu: i.mtu,
                    vrf: r.cfg.vrfs[i.vrf as usize].clone(),
                    admin_up: i.up,
                    oper_up: i.up && in_service && !r.links_down.contains(&port),
                    ipv4: i.v4.iter().map(|&(a, l)| v4(a, l)).collect(),
                    ipv6: i.v6.iter().map(|&(a, l)| v6(a, l)).collect(),
                    port,
                }
            })
            .collect()
    }

    pub fn ports(&self) -> Vec<PortView> {
        let s = self.lock("show.ports");
        let snap = s.runtime.snapshot();
        let b = &s.baseline;
        let workers = s.runtime.workers();
        s.router
            .port_slots
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|n| (i, n)))
            .map(|(i, name)| {
                let pc = s.router.cfg.ports.iter().find(|p| &p.name == name);
                let driver = match pc.map(|p| &p.driver) {
                    Some(Driver::Mem) => "mem",
                    Some(Driver::Pcap { .. }) => "pcap",
                    Some(Driver::AfPacket { .. }) => "af_packet",
                    Some(Driver::AfXdp { .. }) => "af_xdp",
                    None => "?",
                };
                let mut queues: Vec<QueueView> = workers
                    .iter()
                    .flat_map(|w| {
                        w.rx.iter()
                            .filter(|(p, _)| *p as usize == i)
                            .map(|&(_, q)| QueueView {
                                queue: q,
                                worker: w.id,
                            })
                    })
                    .collect();
                queues.sort_by_key(|q| q.queue);
                PortView {
                    name: name.clone(),
                    index: i as u16,
                    driver,
                    in_service: s.runtime.is_in_service(i as u16),
                    queues,
                    rx_packets: sub(&snap.rx_packets, &b.rx_packets, i),
                    rx_bytes: sub(&snap.rx_bytes, &b.rx_bytes, i),
                    rx_errors: sub(&snap.rx_errors, &b.rx_errors, i),
                    tx_packets: sub(&snap.tx_packets, &b.tx_packets, i),
                    tx_bytes: sub(&snap.tx_bytes, &b.tx_bytes, i),
                }
            })
            .collect()
    }

    pub fn routes(&self, q: &RouteQuery<'_>) -> ApiResult<RoutesView> {
        let s = self.lock("show.routes");
        let r = &s.router;
        let vrf_name = q.vrf.unwrap_or("default");
        let vrf = r
            .cfg
            .vrfs
            .iter()
            .position(|v| v == vrf_name)
            .ok_or_else(|| ApiError::not_found(format!("no VRF `{vrf_name}`")))?;
        let fib = &r.fibs[vrf];
        let desc = r.next_hop_descriptions();
        let statics: HashSet<PrefixKey> = r
            .cfg
            .routes
            .iter()
            .filter(|x| x.vrf == vrf_name)
            .map(|x| x.prefix.into())
            .collect();
        let neighbors: HashSet<IpAddr> = r
            .cfg
            .neighbors
            .iter()
            .filter(|n| {
                r.ifs
                    .iter()
                    .find(|i| i.name == n.interface)
                    .is_some_and(|i| i.vrf as usize == vrf)
            })
            .map(|n| n.ip)
            .chain(
                // and those learned by ARP and ND, whose host routes the router added
                r.learned
                    .keys()
                    .filter(|(ifx, _)| {
                        r.ifs
                            .get(*ifx as usize)
                            .is_some_and(|i| i.vrf as usize == vrf)
                    })
                    .map(|&(_, ip)| ip),
            )
            .collect();
        // (key, len, next hop) of the first `limit` matching routes in prefix order: a bounded
        // heap, so listing the first hundred of millions of routes allocates a hundred.
        let mut found = Smallest::new(q.limit);
        let want = q.wanted()?;
        let total;
        if q.ipv6 {
            total = fib.v6.len();
            match want {
                Some((Prefix::V6(a, l), false)) => {
                    // Longest match for an address.
                    if let Some(m) = (0..=l)
                        .rev()
                        .find_map(|len| fib.v6.get(a.masked(len), len).map(|nh| (len, nh)))
                    {
                        found.push((a.masked(m.0), m.0, m.1));
                    }
                }
                Some((Prefix::V6(a, l), true)) => {
                    if q.longer {
                        found.extend(
                            fib.v6
                                .routes()
                                .filter(|x| x.len >= l && x.prefix.masked(l) == a)
                                .map(|x| (x.prefix, x.len, x.next_hop)),
                        );
                    } else if let Some(nh) = fib.v6.get(a, l) {
                        found.push((a, l, nh));
                    }
                }
                _ => found.extend(fib.v6.routes().map(|x| (x.prefix, x.len, x.next_hop))),
            }
        } else {
            total = fib.v4.len();
            match want {
                Some((Prefix::V4(a, l), false)) => {
                    if let Some(m) = (0..=l)
                        .rev()
                        .find_map(|len| fib.v4.get(a.masked(len), len).map(|nh| (len, nh)))
                    {
                        found.push((a.masked(m.0) as u128, m.0, m.1));
                    }
                }
                Some((Prefix::V4(a, l), true)) => {
                    if q.longer {
                        found.extend(
                            fib.v4
                                .routes()
                                .filter(|x| x.len >= l && x.prefix.masked(l) == a)
                                .map(|x| (x.prefix as u128, x.len, x.next_hop)),
                        );
                    } else if let Some(nh) = fib.v4.get(a, l) {
                        found.push((a as u128, l, nh));
                    }
                }
                _ => found.extend(
                    fib.v4
                        .routes()
                        .map(|x| (x.prefix as u128, x.len, x.next_hop)),
                ),
            }
        }
        let matched = found.count;
        let routes = found
            .into_sorted()
            .into_iter()
            .map(|(a, l, nh)| {
                let (key, prefix, host) = if q.ipv6 {
                    (
                        PrefixKey::V6(a, l),
                        v6(a, l),
                        (l == 128).then(|| IpAddr::V6(Ipv6Addr::from(a))),
                    )
                } else {
                    (
                        PrefixKey::V4(a as u32, l),
                        v4(a as u32, l),
                        (l == 32).then(|| IpAddr::V4(Ipv4Addr::from(a as u32))),
                    )
                };
                let (kind, via) = desc.get(nh as usize).cloned().unwrap_or(("?", Vec::new()));
                let origin = if matches!(kind, "local" | "connected") {
                    "connected"
                } else if s.api_routes.contains_key(&(vrf, key)) {
                    "api"
                } else if statics.contains(&key) {
                    "static"
                } else if host.is_some_and(|h| neighbors.contains(&h)) {
                    "neighbor"
                } else if s.router.is_configured(vrf, Prefix::from(key)) {
                    "file"
                } else {
                    // Not from the config, the API or a neighbour: FRR's, over FPM.
                    "fpm"
                };
                RouteView {
                    prefix,
                    origin,
                    kind,
                    via,
                    next_hop_id: nh,
                }
            })
            .collect();
        Ok(RoutesView {
            vrf: vrf_name.to_string(),
            family: if q.ipv6 { "ipv6" } else { "ipv4" },
            total,
            matched,
            routes,
        })
    }

    pub fn neighbors(&self) -> Vec<NeighborView> {
        let dynamic = self
            .punt
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|p| p.status().neighbors)
            .unwrap_or_default();
        let s = self.lock("show.neighbors");
        let mut v: Vec<NeighborView> = s
            .router
            .cfg
            .neighbors
            .iter()
            .map(|n| NeighborView {
                interface: n.interface.clone(),
                ip: n.ip.to_string(),
                mac: n.mac.to_string(),
                state: "static",
                age_s: None,
                held: 0,
            })
            .collect();
        v.extend(dynamic.into_iter().map(|n| {
            NeighborView {
                interface: s
                    .router
                    .ifs
                    .get(n.ifx as usize)
                    .map(|i| i.name.clone())
                    .unwrap_or_default(),
                ip: n.ip.to_string(),
                mac: n.mac.unwrap_or_else(|| "-".into()),
                state: n.state,
                age_s: Some((n.age_s * 10.0).round() / 10.0),
                held: n.held,
            }
        }));
        v
    }

    pub fn counters(&self) -> CountersView {
        let s = self.lock("show.counters");
        let snap = s.runtime.snapshot();
        let b = &s.baseline;
        let since_clear = !b.rx_packets.is_empty();
        let ports = s
            .router
            .port_slots
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|n| (i, n)))
            .map(|(i, n)| PortCountersView {
                port: n.clone(),
                rx_packets: sub(&snap.rx_packets, &b.rx_packets, i),
                rx_bytes: sub(&snap.rx_bytes, &b.rx_bytes, i),
                rx_errors: sub(&snap.rx_errors, &b.rx_errors, i),
                tx_packets: sub(&snap.tx_packets, &b.tx_packets, i),
                tx_bytes: sub(&snap.tx_bytes, &b.tx_bytes, i),
            })
            .collect();
        CountersView {
            ports,
            drops: snap.total_drops().saturating_sub(b.drops.iter().sum()),
            icmp_sent: snap.icmp_sent.saturating_sub(b.icmp_sent),
            icmp_rate_limited: snap.icmp_rate_limited.saturating_sub(b.icmp_rate_limited),
            echo_replies: snap.echo_replies.saturating_sub(b.echo_replies),
            slow_path: snap.slow_path.saturating_sub(b.slow_path),
            vectors: snap.vectors.saturating_sub(b.vectors),
            busy_ns: snap.busy_ns.saturating_sub(b.busy_ns),
            since_clear,
        }
    }

    /// Drops by node and reason, with each live worker's share; only reasons that counted.
    pub fn errors(&self) -> Vec<ErrorView> {
        let s = self.lock("show.errors");
        let snap = s.runtime.snapshot();
        let per = s.runtime.worker_counters();
        DropReason::ALL
            .iter()
            .map(|&d| {
                let i = d as usize;
                let per_worker = per
                    .iter()
                    .map(|(id, c)| {
                        let base = s.worker_baseline.get(id).map_or(0, |b| b[i]);
                        (*id, c.drops[i].load(Ordering::Relaxed).saturating_sub(base))
                    })
                    .filter(|x| x.1 > 0)
                    .collect();
                ErrorView {
                    node: d.node(),
                    reason: d.name(),
                    text: d.text(),
                    count: sub(&snap.drops, &s.baseline.drops, i),
                    per_worker,
                }
            })
            .filter(|e| e.count > 0)
            .collect()
    }

    pub fn workers(&self) -> Vec<WorkerView> {
        let s = self.lock("show.workers");
        let counters = s.runtime.worker_counters();
        s.runtime
            .workers()
            .into_iter()
            .map(|w| {
                let c = counters
                    .iter()
                    .find(|(id, _)| *id == w.id)
                    .map(|(_, c)| c.clone());
                let r = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
                let (mut rx, mut tx, mut drops, mut vectors, mut busy) = (0, 0, 0, 0, 0);
                if let Some(c) = c {
                    for p in c.ports.iter().take(MAX_PORTS) {
                        rx += r(&p.rx_packets);
                        tx += r(&p.tx_packets);
                    }
                    drops = c.drops.iter().map(r).sum();
                    vectors = r(&c.vectors);
                    busy = r(&c.busy_ns);
                }
                WorkerView {
                    id: w.id,
                    core: w.core,
                    rx_queues: w
                        .rx
                        .iter()
                        .map(|(p, q)| format!("{}/{q}", s.runtime.port_name(*p).unwrap_or("?")))
                        .collect(),
                    rx_packets: rx,
                    tx_packets: tx,
                    drops,
                    vectors,
                    busy_ns: busy,
                }
            })
            .collect()
    }

    pub(super) fn tables(s: &super::State) -> Vec<TableView> {
        let mut t = Vec::new();
        for f in &s.router.fibs {
            let v4s = f.v4.stats();
            let v6s = f.v6.stats();
            t.push(TableView {
                table: format!("ipv4 routes vrf {}", f.name),
                entries: f.v4.len(),
                limit: f.v4.config().max_routes,
                bytes: v4s.lookup_bytes() + v4s.store_bytes,
            });
            t.push(TableView {
                table: format!("ipv6 routes vrf {}", f.name),
                entries: f.v6.len(),
                limit: f.v6.config().max_routes,
                bytes: v6s.lookup_bytes() + v6s.store_bytes,
            });
        }
        t.push(TableView {
            table: "next hops".into(),
            entries: s.router.next_hops.len(),
            limit: fib::lpm::MAX_NEXT_HOP as usize,
            bytes: s.router.next_hops.len() * std::mem::size_of::<dataplane::NextHop>(),
        });
        t.push(TableView {
            table: "neighbors".into(),
            entries: s.router.cfg.neighbors.len(),
            limit: fib::lpm::MAX_NEXT_HOP as usize,
            bytes: 0,
        });
        t
    }

    pub fn system(&self) -> SystemView {
        let pending = self.pending_confirm();
        let api = self.command_stats();
        let s = self.lock("show.system");
        SystemView {
            version: env!("CARGO_PKG_VERSION"),
            uptime_s: self.uptime().as_secs(),
            commit: s.history.last_id(),
            pending_confirm: pending,
            workers: s.runtime.workers().len(),
            ports: s.router.port_slots.iter().flatten().count(),
            buffers: s.runtime.pool.capacity(),
            buffers_free: s.runtime.pool.available(),
            tables: Self::tables(&s),
            api,
        }
    }

    pub fn logging(&self, n: usize) -> Vec<LogView> {
        self.logger
            .recent(n)
            .into_iter()
            .map(|r| LogView {
                seq: r.seq,
                unix_ms: r
                    .time
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
                severity: r.severity.name(),
                msgid: r.msgid,
                params: r.params,
                text: r.text,
            })
            .collect()
    }
}
