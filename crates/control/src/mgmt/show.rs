//! Read-only views of the running router, as `linerate show ...` prints them and the API
//! returns them (JSON). Counters in shows count from the last `clear counters`; metrics
//! (`exposition.rs`) never reset.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::Ordering;

use api::requests::{Family, RoutesQuery};
use api::views::{
    CountersView, ErrorView, InterfaceView, LogView, NeighborView, NextHopKind, PortCountersView,
    PortDriver, PortView, QueueView, RouteOrigin, RouteView, RoutesView, StepView, SystemView,
    TableView, TraceView, WorkerView,
};
use dataplane::counters::{DropReason, MAX_PORTS};
use dataplane::tap::Traced;
use fib::Key;

use super::{ApiError, ApiResult, Core, PrefixKey};
use crate::config::{Driver, Prefix};

/// A traced packet as the API answers it.
pub fn trace_view(t: Traced) -> TraceView {
    TraceView {
        id: t.id,
        worker: t.worker,
        summary: t.summary,
        steps: t
            .steps
            .into_iter()
            .map(|s| StepView {
                node: s.node.into(),
                decision: s.decision,
                next: s.next,
            })
            .collect(),
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

/// The prefix a route query asks for, if any, and whether it must match exactly (it was given
/// with a length) rather than be the longest match for an address; refused if it is not of the
/// family asked for.
pub fn wanted(q: &RoutesQuery) -> ApiResult<Option<(Prefix, bool)>> {
    let Some(text) = q.prefix.as_deref() else {
        return Ok(None);
    };
    let exact = text.contains('/');
    let p = Prefix::parse(text).map_err(ApiError::invalid)?;
    match (p, q.family) {
        (Prefix::V4(..), Family::Ipv6) | (Prefix::V6(..), Family::Ipv4) => {
            Err(ApiError::invalid(format!(
                "`{text}` is not an {} prefix",
                if q.family == Family::Ipv6 {
                    "IPv6"
                } else {
                    "IPv4"
                }
            )))
        }
        _ => Ok(Some((p, exact))),
    }
}

/// Whether interface `i` is up, administratively and operationally: its port in service with
/// its link up; a bridge's routed interface while a member of its bridge is.
pub(crate) fn oper_up(s: &super::State, i: &dataplane::tables::Interface) -> bool {
    let r = &s.router;
    let port_up = |i: &dataplane::tables::Interface| {
        i.up && s.runtime.is_in_service(i.port) && !r.links_down.contains(r.port_name(i.port))
    };
    match i.bvi.and(i.l2) {
        Some(l2) => {
            i.up && r.bridges.bridges[l2.bridge as usize]
                .members
                .iter()
                .any(|&m| r.ifs.get(m as usize).is_some_and(port_up))
        }
        None => port_up(i),
    }
}

impl Core {
    pub fn interfaces(&self) -> Vec<InterfaceView> {
        let s = self.lock("show.interfaces");
        let r = &s.router;
        r.ifs
            .iter()
            .map(|i| {
                let bvi = i
                    .bvi
                    .and(i.l2)
                    .map(|l2| &r.bridges.bridges[l2.bridge as usize]);
                let port = match bvi {
                    Some(_) => "-".to_string(),
                    None => r.port_name(i.port).to_string(),
                };
                InterfaceView {
                    name: i.name.clone(),
                    vlan: i.vlan,
                    s_vlan: i.s_vlan,
                    mac: i.mac.to_string(),
                    mtu: i.mtu,
                    vrf: r.cfg.vrfs[i.vrf as usize].clone(),
                    admin_up: i.up,
                    oper_up: oper_up(&s, i),
                    ipv4: i.v4.iter().map(|&(a, l)| v4(a, l)).collect(),
                    ipv6: i.v6.iter().map(|&(a, l)| v6(a, l)).collect(),
                    bridge: i
                        .l2
                        .filter(|_| bvi.is_none())
                        .map(|l2| r.bridges.bridges[l2.bridge as usize].name.clone()),
                    bvi: bvi.map(|b| b.name.clone()),
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
                    Some(Driver::Pcap { .. }) => PortDriver::Pcap,
                    Some(Driver::AfPacket { .. }) => PortDriver::AfPacket,
                    Some(Driver::AfXdp { .. }) => PortDriver::AfXdp,
                    Some(Driver::Shm { .. }) => PortDriver::Shm,
                    // A port in the runtime is one of the config's.
                    Some(Driver::Mem) | None => PortDriver::Mem,
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

    pub fn routes(&self, q: &RoutesQuery) -> ApiResult<RoutesView> {
        let s = self.lock("show.routes");
        let r = &s.router;
        let vrf_name = q.vrf.as_deref().unwrap_or("default");
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
        let mut found = Smallest::new(q.limit.unwrap_or(usize::MAX));
        let want = wanted(q)?;
        let ipv6 = q.family == Family::Ipv6;
        let total;
        if ipv6 {
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
        let vpn = s
            .sources
            .iter()
            .find_map(|x| x.as_any().downcast_ref::<crate::l3vpn::VpnRoutes>());
        let routes = found
            .into_sorted()
            .into_iter()
            .map(|(a, l, nh)| {
                let (key, prefix, host) = if ipv6 {
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
                let (kind, via) = desc
                    .get(nh as usize)
                    .cloned()
                    .unwrap_or((NextHopKind::None, Vec::new()));
                let origin = if matches!(kind, NextHopKind::Local | NextHopKind::Connected) {
                    RouteOrigin::Connected
                } else if s.api_routes.contains_key(&(vrf, key)) {
                    RouteOrigin::Api
                } else if statics.contains(&key) {
                    RouteOrigin::Static
                } else if host.is_some_and(|h| neighbors.contains(&h)) {
                    RouteOrigin::Neighbor
                } else if s.router.is_configured(vrf, Prefix::from(key)) {
                    RouteOrigin::File
                } else if vpn.is_some_and(|v| v.holds(vrf, Prefix::from(key))) {
                    RouteOrigin::Vpn
                } else {
                    // Not from the config, the API, a neighbour or a far PE: FRR's, over FPM.
                    RouteOrigin::Fpm
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
            family: q.family,
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
                state: "static".into(),
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
                state: n.state.into(),
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
                    node: d.node().into(),
                    reason: d.name().into(),
                    text: d.text().into(),
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
        if let Some(m) = &s.router.bridges.table {
            t.push(TableView {
                table: "mac addresses".into(),
                entries: m.len(),
                limit: s.router.cfg.max_macs,
                bytes: m.bytes(),
            });
        }
        t
    }

    pub fn system(&self) -> SystemView {
        let pending = self.pending_confirm();
        let api = self.command_stats();
        let s = self.lock("show.system");
        SystemView {
            hostname: self
                .logger
                .config()
                .hostname
                .unwrap_or_else(crate::syslog::system_hostname),
            version: env!("CARGO_PKG_VERSION").into(),
            uptime_s: self.uptime().as_secs(),
            commit: s.history.last_id(),
            pending_confirm: pending,
            workers: s.runtime.workers().len(),
            ports: s.router.port_slots.iter().flatten().count(),
            buffers: s.runtime.pool.capacity(),
            buffers_free: s.runtime.pool.available(),
            tables: Self::tables(&s),
            api: api.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
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
                severity: r.severity.name().into(),
                msgid: r.msgid,
                params: r.params,
                text: r.text,
            })
            .collect()
    }
}
