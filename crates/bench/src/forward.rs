//! The forwarding path's rate through `mem` ports: a router with two ports and a full table, a
//! generator/sink thread feeding 64-byte (or larger) frames to destinations drawn from the table,
//! and optionally a control thread churning routes while traffic runs (updates/s and frames lost).
//!
//! The generator never drops: when a ring is full it waits, so the figure is the worker's maximum
//! rate (the tester's RFC 2544 search comes with `linerate bench` scenarios). Worker busy time,
//! counted by the worker around each non-empty vector, gives nanoseconds and cycles per packet.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use control::{Router, StartOptions};
use dataplane::graph::{row_names, NodeSnapshot, NODE_ROWS};
use dataplane::{BufCache, NextHop, Pool};
use fib::gen::{self, Profile, Spec};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

pub struct Opts {
    pub profile: Profile,
    pub scale: f64,
    pub workers: usize,
    pub frame_size: usize,
    pub seconds: f64,
    /// Route updates per second to attempt while forwarding (0: none). Updates replace next hops
    /// of existing routes and delete/re-add routes not used by the traffic.
    pub churn: bool,
    /// Each worker replays frames to itself instead of a tester thread feeding mem rings: for
    /// measuring how workers scale when there is no spare core for a generator.
    pub replay: bool,
    /// Which of the ME 6524 services are on, on both ports: a 10,000-line ACL in, a 500-line
    /// QoS policy that re-marks every packet, flow accounting in (see [`services_config`]).
    pub services: Services,
    /// Distinct flows (5-tuples) in the traffic; a flow cache sized for them with `services`.
    pub flows: usize,
    /// Switch instead of routing (0: route): p0 and p1 are the members of one bridge domain
    /// with this many hosts learned behind p1 (and as many senders behind p0), and the frames
    /// go to them, each destination in turn: known unicast at this table size.
    pub bridge_macs: usize,
    /// Replicate instead (0: no): a bridge domain snooping IGMP, p0 the source port and this
    /// many receiver ports, every group joined on each; ME-11's 200 sources x 100 groups
    /// replayed in on p0 (with --replay). The rate is copies out.
    pub multicast_receivers: usize,
    /// The replication run's sources and groups (ME-11's: 200 x 100).
    pub multicast_sources: u32,
    pub multicast_groups: u32,
    /// Route the replicated traffic (ME-13) instead of switching it: every port a routed
    /// interface, each (S,G) a multicast route from p0 to every other port.
    pub multicast_routed: bool,
    /// The GGSN instead (0: no): this many PDP contexts, uplink G-PDUs and downlink packets
    /// in turn (see `crate::gtp`).
    pub gtp_contexts: usize,
    pub workdir: PathBuf,
}

#[derive(Debug, Clone)]
pub struct Result {
    pub routes: usize,
    pub workers: usize,
    pub frame_size: usize,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub seconds: f64,
    pub mpps: f64,
    pub busy_ns_per_packet: f64,
    pub cycles_per_packet: f64,
    pub updates: u64,
    pub updates_per_s: f64,
    pub build_s: f64,
    /// Drops inside the router, by reason (non-zero only).
    pub drops: Vec<(&'static str, u64)>,
    /// With services: flows in the flow caches at the end, and flows evicted early (cache full).
    pub flows_in_cache: u64,
    pub flows_evicted: u64,
    /// Distinct flows in the offered traffic (`--flows`; in a switching run, the host pairs
    /// its frames were drawn from).
    pub flows_offered: usize,
    /// `show runtime` over the measured interval, summed over the workers: each graph node's
    /// name and counts.
    pub nodes: Vec<(&'static str, NodeSnapshot)>,
}

/// The graph nodes' counts, summed over the running workers.
fn node_rows(running: &control::Runtime) -> [NodeSnapshot; NODE_ROWS] {
    let mut rows = [NodeSnapshot::default(); NODE_ROWS];
    for (_, c) in running.worker_counters() {
        for (r, n) in rows.iter_mut().zip(NodeSnapshot::read_rows(&c.nodes)) {
            r.add(&n);
        }
    }
    rows
}

/// `after - before`, row by row, with the rows' names.
fn node_delta(
    before: &[NodeSnapshot; NODE_ROWS],
    after: &[NodeSnapshot; NODE_ROWS],
) -> Vec<(&'static str, NodeSnapshot)> {
    row_names()
        .zip(after.iter().zip(before.iter()))
        .map(|(n, (a, b))| (n, a.since(b)))
        .collect()
}

/// The flow caches' occupancy and evictions, once the workers have published them.
fn flow_state(router: &Router) -> (u64, u64) {
    let Some(f) = &router.services.flow else {
        return (0, 0);
    };
    std::thread::sleep(Duration::from_millis(300));
    let st = f.stats.lock().unwrap_or_else(|e| e.into_inner());
    (
        st.iter().map(|s| s.occupancy).sum(),
        st.iter().map(|s| s.evicted).sum(),
    )
}

const CONFIG: &str = r#"
router: { workers: WORKERS, cores: [CORES], buffers: 65536 }
limits: { ipv4-routes: 4000000 }
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", mtu: 9198, ipv4: [192.0.2.1/24] SERVICES }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", mtu: 9198, ipv4: [198.51.100.1/24] SERVICES }
neighbors:
  - { interface: p0, ip: 192.0.2.2, mac: "02:00:00:00:00:02" }
  - { interface: p1, ip: 198.51.100.2, mac: "02:00:00:00:01:02" }
  - { interface: p1, ip: 198.51.100.3, mac: "02:00:00:00:01:03" }
route-files:
  - { path: bench.routes }
"#;

const BRIDGE_CONFIG: &str = r#"
router: { workers: WORKERS, cores: [CORES], buffers: 65536 }
limits: { macs: MACS }
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", mtu: 9198 }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", mtu: 9198 }
bridges:
  - { name: bench, id: 1, members: [p0, p1] }
"#;

/// Host `i` of the switching benchmark: behind p1 (destinations) or p0 (senders).
fn bench_host(i: usize, behind_p1: bool) -> [u8; 6] {
    let b = (i as u32).to_be_bytes();
    [
        2,
        if behind_p1 { 0x11 } else { 0x10 },
        b[0],
        b[1],
        b[2],
        b[3],
    ]
}

/// A test frame of `size` bytes on the wire: RFC 2544 sizes count the 4-byte FCS, which a
/// buffer does not hold, so a 64-byte frame is 60 bytes here.
pub(crate) fn frame(dst: u32, size: usize, flow: u16) -> Vec<u8> {
    let mut f = vec![0u8; size.saturating_sub(4).max(60)];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (f.len() - 14) as u16;
    let repr = packet::ipv4::Repr {
        src: [192, 0, 2, 2],
        dst: dst.to_be_bytes(),
        protocol: packet::ipv4::Protocol::Udp,
        ttl: 64,
        payload_len: ip_len as usize - 20,
        dscp: 0,
        dont_frag: true,
        ident: 0,
    };
    repr.emit(&mut f[14..]).expect("room for the header");
    f[34..36].copy_from_slice(&(1024 + flow).to_be_bytes());
    f[36..38].copy_from_slice(&5000u16.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

/// Which services a run binds (each alone, for where the cost goes, or all three as the ME 6524
/// ran them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Services {
    pub acl: bool,
    pub qos: bool,
    pub flow: bool,
}

impl Services {
    pub const ALL: Services = Services {
        acl: true,
        qos: true,
        flow: true,
    };

    pub fn any(self) -> bool {
        self.acl || self.qos || self.flow
    }

    /// `all`, or a comma-separated list of `acl`, `qos` and `flow` (or `netflow`).
    pub fn parse(s: &str) -> std::result::Result<Services, String> {
        let mut v = Services::default();
        for w in s.split(',').map(str::trim) {
            match w {
                "all" => v = Services::ALL,
                "acl" => v.acl = true,
                "qos" => v.qos = true,
                "flow" | "netflow" => v.flow = true,
                other => {
                    return Err(format!(
                        "unknown service '{other}' (all, or a list of acl, qos, flow)"
                    ))
                }
            }
        }
        Ok(v)
    }

    /// Each service selected: how a report names it and how an interface's line binds it.
    fn selected(self) -> impl Iterator<Item = (&'static str, &'static str)> {
        [
            (self.acl, "10,000-line ACL", "acl-in: SERVICES"),
            (self.qos, "500-line QoS", "qos-in: remark"),
            (self.flow, "NetFlow on every packet", "flow: in"),
        ]
        .into_iter()
        .filter(|s| s.0)
        .map(|s| (s.1, s.2))
    }

    /// How a report names the selection.
    pub fn describe(self) -> String {
        self.selected().map(|s| s.0).collect::<Vec<_>>().join(", ")
    }
}

/// The services of the ME 6524 report's runs, against this benchmark's traffic (UDP from
/// 192.0.2.2, source ports 1024..5119, destination port 5000, destinations in the table):
/// - a 10,000-line ACL of L2, L3 and L4 entries that the traffic never matches, some near misses
///   (its source with other ports, its ports with other addresses), then `permit`: every packet
///   goes through the whole list;
/// - a 500-line QoS policy whose last line is the one the traffic matches, re-marking DSCP;
/// - flow accounting on every packet (ingress on both ports: each packet is one record's), exported
///   as NetFlow v9 to the discard port, its cache sized for `flows` (None: no exporter, so no
///   cache is built and swept when the run binds no flow accounting).
///
/// Returns the config's services section; [`services_binding`] gives the interfaces' part.
pub fn services_config(dir: &std::path::Path, flows: Option<usize>) -> std::io::Result<String> {
    let mut rng = SmallRng::seed_from_u64(11);
    let mut acl = std::io::BufWriter::new(std::fs::File::create(dir.join("services.acl"))?);
    for i in 0..9_999u32 {
        let a = rng.gen::<u32>() | 0x0100_0000;
        let b = rng.gen::<u32>();
        let port = 6000 + rng.gen_range(0..50_000u32);
        match i % 10 {
            // L2: a MAC and an EtherType.
            0 | 1 => writeln!(
                acl,
                "deny src-mac 02:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} ethertype 0x{:04x}",
                a >> 24,
                (a >> 16) & 0xff,
                (a >> 8) & 0xff,
                a & 0xff,
                b & 0xff,
                0x8800 + (b >> 16) % 0x700
            )?,
            // L3: prefix pairs outside the traffic's source.
            2..=4 => writeln!(
                acl,
                "deny ip src {}/{} dst {}/{}",
                std::net::Ipv4Addr::from(a & 0xffff_ff00 | 0x6400_0000),
                24 - (i % 8),
                std::net::Ipv4Addr::from(b),
                16 + (i % 17)
            )?,
            // L4, near misses: the traffic's source, other destination ports.
            5 | 6 => writeln!(acl, "deny udp src host 192.0.2.2 dport {port}")?,
            // L4: the traffic's destination port, other sources.
            7 => writeln!(
                acl,
                "deny udp src {}/28 dport 5000",
                std::net::Ipv4Addr::from(a)
            )?,
            _ => writeln!(
                acl,
                "deny tcp dst {}/24 dport {}-{}",
                std::net::Ipv4Addr::from(b),
                port,
                port + (i % 100)
            )?,
        }
    }
    writeln!(acl, "permit")?;
    acl.flush()?;
    let mut lines = String::new();
    for i in 0..499u32 {
        let port = 6000 + i * 7;
        let line = match i % 4 {
            0 => format!("udp dport {port}"),
            1 => format!("tcp dport {port}-{}", port + 3),
            2 => format!("dscp {}", 1 + i % 62),
            _ => format!("udp src 10.{}.0.0/16 sport {port}", i % 250),
        };
        lines.push_str(&format!("\"{line}\", "));
    }
    Ok(format!(
        r#"acls:
  - {{ name: SERVICES, family: any, file: services.acl }}
qos:
  classes:
    - {{ name: other, match: [{lines}] }}
    - {{ name: bulk, match: ["udp dport 5000"] }}
  policies:
    - name: remark
      classes:
        - {{ class: other, set: {{ dscp: 46 }} }}
        - {{ class: bulk, set: {{ dscp: 10 }} }}
{export}"#,
        export = flows.map_or(String::new(), |f| format!(
            "flow-export: {{ version: 9, collectors: [\"127.0.0.1:9\"], cache-size: {} }}\n",
            (f + f / 10).max(1 << 16)
        ))
    ))
}

/// The end of an interface's line in the benchmark's config binding `which` services.
pub fn services_binding(which: Services) -> String {
    which
        .selected()
        .map(|s| format!(", {}", s.1))
        .collect::<String>()
        + " }"
}

/// The switching run (`bridge_macs` > 0): known unicast to a table of that many hosts,
/// replayed by each worker to itself; with `services`, the ME 6524's lists on both members
/// (one flow per host pair).
fn switch(o: &Opts, dir: &std::path::Path) -> std::result::Result<Result, String> {
    if !o.replay {
        return Err("switching is measured with --replay (each worker feeds itself)".into());
    }
    let n = o.bridge_macs;
    let cores: Vec<String> = (0..o.workers).map(|i| i.to_string()).collect();
    let mut text = BRIDGE_CONFIG
        .replace("WORKERS", &o.workers.to_string())
        .replace("CORES", &cores.join(", "))
        .replace("MACS", &(n * 2 + 1024).to_string());
    if o.services.any() {
        // The same lists on both members: bridged frames take the members' arcs.
        text = text.replace(
            " mtu: 9198 }",
            &format!(" mtu: 9198{}", services_binding(o.services)),
        );
        let flows = o.services.flow.then_some(n);
        text.push_str(&services_config(dir, flows).map_err(|e| e.to_string())?);
    }
    let cfg_path = dir.join("bench.yaml");
    std::fs::write(&cfg_path, &text).map_err(|e| e.to_string())?;
    let cfg = control::config::load(&cfg_path).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let router = Router::build(cfg).map_err(|e| e.to_string())?;
    // The hosts learned as traffic would learn them: destinations on p1, senders on p0.
    let st = &router.bridges;
    let table = st.table.clone().ok_or("no MAC table")?;
    let (on_p0, on_p1) = (st.ports["p0"].member, st.ports["p1"].member);
    let now = control::bridges::now_s();
    for i in 0..n {
        table.learn(
            dataplane::l2::MacKey::new(1, bench_host(i, true)),
            on_p1,
            now,
        );
        table.learn(
            dataplane::l2::MacKey::new(1, bench_host(i, false)),
            on_p0,
            now,
        );
    }
    if table.len() != 2 * n {
        return Err(format!("{} of {} hosts learned", table.len(), 2 * n));
    }
    let build_s = t0.elapsed().as_secs_f64();
    // Destinations in a random order, so each frame's bucket is a cold line at 1M hosts.
    let mut rng = SmallRng::seed_from_u64(3);
    let templates: Vec<Vec<u8>> = (0..n)
        .map(|_| {
            let i = rng.gen_range(0..n);
            let mut f = frame(0x0a00_0001, o.frame_size, i as u16);
            f[0..6].copy_from_slice(&bench_host(i, true));
            f[6..12].copy_from_slice(&bench_host(i, false));
            f
        })
        .collect();
    let offered = templates
        .iter()
        .map(|f| &f[..12])
        .collect::<std::collections::HashSet<_>>()
        .len();
    let pool = Pool::new(65536);
    let mut r = replay(o, router, pool, templates, n, build_s, false)?;
    r.flows_offered = offered;
    Ok(r)
}

/// The replication run (`multicast_receivers` > 0): sources x groups (S,G) (ME-11's 20,000 by
/// default) into p0 of a snooping bridge, each group joined on every other port; replayed by
/// each worker to itself.
fn multicast(o: &Opts, dir: &std::path::Path) -> std::result::Result<Result, String> {
    use std::net::{IpAddr, Ipv4Addr};
    if !o.replay {
        return Err("replication is measured with --replay (each worker feeds itself)".into());
    }
    let r = o.multicast_receivers;
    let (sources, groups) = (
        o.multicast_sources.max(1),
        o.multicast_groups.clamp(1, 65_000),
    );
    let cores: Vec<String> = (0..o.workers).map(|i| i.to_string()).collect();
    let mut text = format!(
        "router: {{ workers: {}, cores: [{}], buffers: 65536 }}\nports:\n",
        o.workers,
        cores.join(", ")
    );
    for p in 0..=r {
        text += &format!("  - {{ name: p{p}, driver: mem }}\n");
    }
    text += "interfaces:\n";
    for p in 0..=r {
        text += &format!(
            "  - {{ name: p{p}, port: p{p}, mac: \"02:00:00:00:{p:02x}:01\", mtu: 9198 }}\n"
        );
    }
    let group = |g: u32| IpAddr::V4(Ipv4Addr::from(0xef01_0001 + g));
    let members: Vec<String> = (0..=r).map(|p| format!("p{p}")).collect();
    if o.multicast_routed {
        text += &format!(
            "limits: {{ mroutes: {} }}\nmulticast-routing: true\n",
            (sources * groups * 2).max(1024)
        );
    } else {
        text += &format!(
            "bridges:\n  - {{ name: bench, id: 1, members: [{}], igmp-snooping: {{ flood-unregistered: false }} }}\n",
            members.join(", ")
        );
    }
    let cfg_path = dir.join("bench.yaml");
    std::fs::write(&cfg_path, &text).map_err(|e| e.to_string())?;
    let cfg = control::config::load(&cfg_path).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let router = Router::build(cfg).map_err(|e| e.to_string())?;
    if o.multicast_routed {
        // Every (S,G) a route from p0 (interface 0) to every receiver, as pimd would make it.
        let fib = router.mcast.fib.clone().ok_or("no multicast FIB")?;
        let oifs: Vec<dataplane::mfib::Oif> = (1..=r as u32)
            .map(|ifx| dataplane::mfib::Oif { ifx, ttl: 1 })
            .collect();
        for g in 0..groups {
            for s in 0..sources {
                let key = dataplane::mfib::MrouteKey {
                    vrf: 0,
                    v6: false,
                    source: u128::from(0x0ac8_0000 + s),
                    group: u128::from(0xef01_0001 + g),
                };
                fib.set(key, 0, oifs.clone(), dataplane::mfib::Origin::Static)
                    .map_err(|_| "the multicast FIB is full")?;
            }
        }
    } else {
        // Every receiver joins every group, as a report would make it.
        let st = &router.bridges;
        let snoop = st.snoop.clone().ok_or("no snooping table")?;
        let settings = dataplane::l2::snoop::SnoopSettings::default();
        let records: Vec<packet::mcast::Record> = (0..groups)
            .map(|g| packet::mcast::Record::join(group(g)))
            .collect();
        for p in 1..=r {
            let m = st.ports[&format!("p{p}")].member;
            snoop.apply(1, m, false, &records, &settings, snoop.now_ms());
        }
    }
    let build_s = t0.elapsed().as_secs_f64();
    let mut templates = Vec::with_capacity((sources * groups) as usize);
    for g in 0..groups {
        for s in 0..sources {
            let mut f = frame(0xef01_0001 + g, o.frame_size, s as u16);
            let gip = (0xef01_0001 + g).to_be_bytes();
            f[0..6].copy_from_slice(&packet::mcast::group_mac(IpAddr::V4(gip.into())));
            f[6..12].copy_from_slice(&[2, 0, 0, 0x10, 0, 2]);
            // Source 10.200.s, checksum made again.
            f[26..30].copy_from_slice(&(0x0ac8_0000 + s).to_be_bytes());
            f[24..26].fill(0);
            let c = packet::checksum::fold(packet::checksum::sum(&f[14..34]));
            f[24..26].copy_from_slice(&c.to_be_bytes());
            templates.push(f);
        }
    }
    let pool = Pool::new(65536);
    replay(
        o,
        router,
        pool,
        templates,
        (sources * groups) as usize,
        build_s,
        false,
    )
}

const RING: usize = 16384;
const IN_FLIGHT: usize = 1024;

pub fn run(o: &Opts) -> std::result::Result<Result, String> {
    // This run's own files, so concurrent runs cannot replace each other's table.
    let dir = o.workdir.join(format!("fwd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let r = run_in(o, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn run_in(o: &Opts, dir: &std::path::Path) -> std::result::Result<Result, String> {
    if o.multicast_receivers > 0 {
        return multicast(o, dir);
    }
    if o.gtp_contexts > 0 {
        return crate::gtp::run(o, dir);
    }
    if o.bridge_macs > 0 {
        return switch(o, dir);
    }
    let spec = Spec {
        profile: o.profile,
        seed: 1,
        scale: o.scale,
    };
    spec.validate()?;
    let routes = gen::v4(&spec);
    {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(dir.join("bench.routes")).map_err(|e| e.to_string())?,
        );
        for (i, &(p, l)) in routes.iter().enumerate() {
            let via = if i % 2 == 0 {
                "198.51.100.2"
            } else {
                "198.51.100.2,198.51.100.3"
            };
            writeln!(f, "{}/{} via {via}", std::net::Ipv4Addr::from(p), l)
                .map_err(|e| e.to_string())?;
        }
    }
    let cores: Vec<String> = (0..o.workers).map(|i| i.to_string()).collect();
    let mut text = CONFIG
        .replace("WORKERS", &o.workers.to_string())
        .replace("CORES", &cores.join(", "));
    if o.services.any() {
        text = text.replace(" SERVICES }", &services_binding(o.services));
        let flows = o.services.flow.then_some(o.flows);
        text.push_str(&services_config(dir, flows).map_err(|e| e.to_string())?);
    } else {
        text = text.replace(" SERVICES }", " }");
    }
    let cfg_path = dir.join("bench.yaml");
    std::fs::write(&cfg_path, &text).map_err(|e| e.to_string())?;
    let cfg = control::config::load(&cfg_path).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let router = Router::build(cfg).map_err(|e| e.to_string())?;
    let build_s = t0.elapsed().as_secs_f64();
    let nroutes = router.route_counts().0;
    // Destinations inside the routes; one frame per flow, replayed.
    let mut rng = SmallRng::seed_from_u64(3);
    let templates: Vec<Vec<u8>> = (0..o.flows.max(1))
        .map(|i| {
            let (p, l) = routes[rng.gen_range(0..routes.len())];
            let host = if l >= 32 { 0 } else { rng.gen::<u32>() >> l };
            frame(p | host, o.frame_size, i as u16)
        })
        .collect();

    let pool = Pool::new(65536);
    if o.replay {
        return replay(o, router, pool, templates, nroutes, build_s, false);
    }
    let (running, mut peers) = router
        .start(StartOptions {
            ring_size: RING,
            tx_ring_size: None,
            idle_yield_after: 0,
            idle_sleep_us: 0,
            pool: Some(pool.clone()),
            replay: None,
            replay_whole: false,
            exit_when_drained: false,
            punt: None,
            adopt: None,
        })
        .map_err(|e| e.to_string())?;

    let stop = Arc::new(AtomicBool::new(false));
    let updates = Arc::new(AtomicU64::new(0));
    let mut keep = None;
    let churn = if o.churn {
        let stop = stop.clone();
        let updates = updates.clone();
        let routes = routes.clone();
        Some(std::thread::spawn(move || {
            // Re-point existing routes between the two next hops and back, in batches, publishing
            // after each batch: every route stays present, so no frame may be lost.
            let mut router = router;
            // Two next hops out of p1: a single one and the ECMP pair.
            let to_p1: Vec<u32> = router
                .next_hops
                .iter()
                .enumerate()
                .filter(|(_, n)| match n {
                    NextHop::Forward { port, .. } => *port == 1,
                    NextHop::Ecmp(_) => true,
                    _ => false,
                })
                .map(|(i, _)| i as u32)
                .collect();
            let (a, b) = (to_p1[0], to_p1[to_p1.len() - 1]);
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let fib = &mut router.fibs[0].v4;
                for _ in 0..10_000 {
                    let (p, l) = routes[i % routes.len()];
                    i += 1;
                    let next = if fib.get(p, l) == Some(a) { b } else { a };
                    fib.insert(p, l, next).expect("replace");
                }
                fib.publish().expect("publish");
                updates.fetch_add(10_000, Ordering::Relaxed);
            }
            router
        }))
    } else {
        keep = Some(router);
        None
    };

    let mut cache = BufCache::new(pool.clone());
    // Touch every buffer once before timing: first-touch page faults would stall the sink and
    // let the router's transmit rings overflow, a loss that is the tester's, not the router's.
    {
        let mut all = Vec::new();
        while let Some(mut b) = cache.alloc() {
            b.fill(&templates[0]);
            all.push(b);
        }
        cache.free_all(&mut all);
    }
    // Templates differ only in their first 64 bytes (addresses, ports, checksums); payloads are
    // identical and the router never writes them. A buffer that last held a frame of this size
    // therefore needs only its headers rewritten, which keeps the generator's cost per frame flat
    // across frame sizes.
    let mut last_len = vec![0u32; pool.capacity()];
    let mut burst = Vec::with_capacity(256);
    let mut rx = Vec::with_capacity(256);
    let (mut sent, mut received) = (0u64, 0u64);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(o.seconds);
    let mut ti = 0usize;
    let busy0 = running.snapshot();
    let nodes0 = node_rows(&running);
    let u0 = updates.load(Ordering::Relaxed);
    // The sink: takes everything the router has sent, from every worker's ring.
    let drain =
        |_q: usize, peers: &mut [control::MemPeer], cache: &mut BufCache, rx: &mut Vec<_>| {
            let mut n = 0;
            for p in peers.iter_mut() {
                rx.clear();
                n += p.from_router.pop_burst(rx, usize::MAX) as u64;
                cache.free_all(rx);
            }
            n
        };
    while Instant::now() < deadline {
        for q in 0..o.workers {
            received += drain(q, &mut peers, &mut cache, &mut rx);
            let peer = &mut peers[0];
            // At most IN_FLIGHT frames queued ahead of the worker: if this thread is descheduled,
            // the worker runs dry instead of overflowing the transmit ring nobody is draining.
            let room = peer.to_router[q]
                .free_slots()
                .saturating_sub(RING - IN_FLIGHT)
                .min(256);
            for _ in 0..room {
                let Some(mut b) = cache.alloc() else { break };
                let t = &templates[ti % templates.len()];
                let idx = b.meta().index as usize;
                if last_len[idx] == t.len() as u32 {
                    b.set_len(t.len());
                    let h = t.len().min(64);
                    b.data_mut()[..h].copy_from_slice(&t[..h]);
                } else {
                    b.fill(t);
                    last_len[idx] = t.len() as u32;
                }
                ti += 1;
                burst.push(b);
            }
            sent += peer.to_router[q].push_burst(&mut burst) as u64;
            cache.free_all(&mut burst);
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let u1 = updates.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    // Drain what is in flight.
    let drain_until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < drain_until {
        for q in 0..o.workers {
            received += drain(q, &mut peers, &mut cache, &mut rx);
        }
    }
    if let Some(h) = churn {
        keep = Some(h.join().map_err(|_| "churn thread panicked".to_string())?);
    }
    let (flows_in_cache, flows_evicted) = keep.as_ref().map_or((0, 0), flow_state);
    drop(keep);
    let nodes = node_delta(&nodes0, &node_rows(&running));
    let snap = running.stop();
    let busy_ns = snap.busy_ns - busy0.busy_ns;
    let fwd: u64 = snap.tx_packets.iter().sum();
    let per_pkt = busy_ns as f64 / fwd.max(1) as f64;
    Ok(Result {
        routes: nroutes,
        workers: o.workers,
        frame_size: o.frame_size,
        sent,
        received,
        lost: sent - received,
        seconds: elapsed,
        mpps: received as f64 / elapsed / 1e6,
        busy_ns_per_packet: per_pkt,
        cycles_per_packet: per_pkt * crate::cpu_ghz(),
        updates: u1 - u0,
        updates_per_s: (u1 - u0) as f64 / elapsed,
        build_s,
        drops: dataplane::DropReason::ALL
            .iter()
            .filter(|d| snap.drop_count(**d) > 0)
            .map(|d| (d.name(), snap.drop_count(*d)))
            .collect(),
        flows_in_cache,
        flows_evicted,
        flows_offered: o.flows,
        nodes,
    })
}

pub(crate) fn replay(
    o: &Opts,
    router: Router,
    pool: Arc<Pool>,
    templates: Vec<Vec<u8>>,
    routes: usize,
    build_s: f64,
    // Frames move within their buffers (tunnels, labels): the replay copies each one whole.
    whole: bool,
) -> std::result::Result<Result, String> {
    let (running, _) = router
        .start(StartOptions {
            ring_size: 64,
            tx_ring_size: None,
            idle_yield_after: 0,
            idle_sleep_us: 0,
            pool: Some(pool),
            replay: Some(templates.into()),
            replay_whole: whole,
            exit_when_drained: false,
            punt: None,
            adopt: None,
        })
        .map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(500));
    let s0 = running.snapshot();
    let nodes0 = node_rows(&running);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(o.seconds));
    let s1 = running.snapshot();
    let nodes = node_delta(&nodes0, &node_rows(&running));
    let elapsed = t0.elapsed().as_secs_f64();
    let (flows_in_cache, flows_evicted) = flow_state(&router);
    let snap = running.stop();
    let tx = |s: &dataplane::Snapshot| s.tx_packets.iter().sum::<u64>();
    let rx = |s: &dataplane::Snapshot| s.rx_packets.iter().sum::<u64>();
    let fwd = tx(&s1) - tx(&s0);
    let per_pkt = (s1.busy_ns - s0.busy_ns) as f64 / fwd.max(1) as f64 / o.workers as f64;
    Ok(Result {
        routes,
        workers: o.workers,
        frame_size: o.frame_size,
        sent: rx(&s1) - rx(&s0),
        received: fwd,
        // Counters are read while workers run, so rx - tx includes the vector in flight; what the
        // router lost is what it dropped.
        lost: snap.total_drops(),
        seconds: elapsed,
        mpps: fwd as f64 / elapsed / 1e6,
        busy_ns_per_packet: per_pkt * o.workers as f64,
        cycles_per_packet: per_pkt * o.workers as f64 * crate::cpu_ghz(),
        updates: 0,
        updates_per_s: 0.0,
        build_s,
        drops: dataplane::DropReason::ALL
            .iter()
            .filter(|d| snap.drop_count(**d) > 0)
            .map(|d| (d.name(), snap.drop_count(*d)))
            .collect(),
        flows_in_cache,
        flows_evicted,
        flows_offered: o.flows,
        nodes,
    })
}

#[cfg(test)]
mod tests {
    use super::{services_binding, Services};

    #[test]
    fn a_services_list_binds_what_it_names_and_refuses_the_rest() {
        let s = Services::parse("acl,netflow").unwrap();
        assert_eq!((s.acl, s.qos, s.flow), (true, false, true));
        assert_eq!(services_binding(s), ", acl-in: SERVICES, flow: in }");
        assert_eq!(s.describe(), "10,000-line ACL, NetFlow on every packet");
        assert_eq!(Services::parse("all").unwrap(), Services::ALL);
        assert_eq!(services_binding(Services::default()), " }");
        assert!(Services::parse("acl,nat").unwrap_err().contains("'nat'"));
        assert!(Services::parse("").is_err());
    }
}
