//! `linerate bench fpm`: how fast routes from zebra reach the FIB through Linerate's own FPM
//! path, measured the way production runs it: a router with its workers running, the FPM
//! server on loopback TCP, the applier thread taking the management lock a slice at a time and
//! publishing. A client plays zebra: it sends the XR-6 table (next-hop objects, then one
//! RTM_NEWROUTE per frame, as zebra 8.4 lays them out) as fast as the socket takes it.
//!
//! Timed: from the first byte sent to the last route installed in the FIB (what `show fpm`
//! counts). Reported beside it: the time the client needed to write (the socket and the
//! server's reader), and the time spent applying under the lock.

use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use control::mgmt::Core;
use control::runtime::{Runtime, StartOptions};
use control::syslog::Logger;
use control::Router;
use fib::gen::{Profile, Spec};
use fpm::netlink::{encode, GroupMember, Members, Nexthop, Paths};
use fpm::{Msg, Op, Prefix, Route, RouteType};

pub struct FpmOpts {
    /// Multiplies XR-6's one-logical-router table (750,000 routes); 4.0 is the whole test.
    pub scale: f64,
    /// Routes through next-hop objects (zebra's default) or with inline next hops.
    pub nhg: bool,
    pub seed: u64,
}

#[derive(Debug, serde::Serialize)]
pub struct FpmReport {
    pub routes_v4: usize,
    pub routes_v6: usize,
    pub frames: usize,
    pub bytes: usize,
    /// First byte sent to the last route in the FIB.
    pub seconds: f64,
    pub routes_per_s: f64,
    /// How long the client took to write everything (the socket and the server's reader).
    pub send_s: f64,
    /// Time spent applying under the management lock (rib, FIB inserts, publishing).
    pub apply_s: f64,
    pub batches: u64,
    /// How many times the applied routes were made visible to the workers.
    pub publishes: u64,
    pub fib_bytes: usize,
}

const IF_P0: u32 = 11;
const IF_P1: u32 = 12;

fn config(port: u16) -> String {
    format!(
        r#"
router: {{ workers: 1 }}
limits: {{ ipv4-routes: 4000000, ipv6-routes: 1500000 }}
ports:
  - {{ name: p0, driver: mem }}
  - {{ name: p1, driver: mem }}
interfaces:
  - {{ name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24], ipv6: ["2001:db8:1::1/64"] }}
  - {{ name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [198.51.100.1/24], ipv6: ["2001:db8:2::1/64"] }}
neighbors:
  - {{ interface: p0, ip: 192.0.2.2, mac: "02:00:00:00:00:02" }}
  - {{ interface: p1, ip: 198.51.100.2, mac: "02:00:00:00:01:02" }}
  - {{ interface: p0, ip: "2001:db8:1::2", mac: "02:00:00:00:00:02" }}
  - {{ interface: p1, ip: "2001:db8:2::2", mac: "02:00:00:00:01:02" }}
control-plane:
  fpm: {{ listen: "127.0.0.1:{port}", stale-time: 600 }}
"#
    )
}

fn nexthop(id: u32, gw: Option<&str>, oif: u32, group: &[u32]) -> Msg<'static> {
    let gateway: Option<IpAddr> = gw.map(|g| g.parse().expect("literal"));
    let m: Vec<GroupMember> = group
        .iter()
        .map(|&id| GroupMember { id, weight: 1 })
        .collect();
    Msg::Nexthop(Nexthop {
        op: Op::New,
        id,
        family: match gateway {
            Some(IpAddr::V4(_)) => 2,
            Some(IpAddr::V6(_)) => 10,
            None => 0,
        },
        protocol: 186,
        flags: 0,
        blackhole: false,
        oif,
        gateway,
        group: if m.is_empty() {
            Members::default()
        } else {
            Members::from_members(&m)
        },
        group_type: 0,
        encap: false,
    })
}

/// The table as zebra would send it: one frame per message.
fn encode_table(o: &FpmOpts) -> (Vec<u8>, usize, usize, usize) {
    let spec = Spec {
        profile: Profile::Xr6,
        seed: o.seed,
        scale: o.scale,
    };
    let v4 = fib::gen::v4(&spec);
    let v6 = fib::gen::v6(&spec);
    let mut out = Vec::with_capacity((v4.len() + v6.len()) * 72);
    let mut scratch = Vec::with_capacity(256);
    let mut frames = 0;
    let mut put = |m: Msg<'_>, out: &mut Vec<u8>| {
        encode::frame(out, &mut scratch, &[m], 1).expect("a route fits a frame");
        frames += 1;
    };
    if o.nhg {
        put(nexthop(1, Some("192.0.2.2"), IF_P0, &[]), &mut out);
        put(nexthop(2, Some("198.51.100.2"), IF_P1, &[]), &mut out);
        put(nexthop(3, None, 0, &[1, 2]), &mut out);
        put(nexthop(4, Some("2001:db8:1::2"), IF_P0, &[]), &mut out);
        put(nexthop(5, Some("2001:db8:2::2"), IF_P1, &[]), &mut out);
        put(nexthop(6, None, 0, &[4, 5]), &mut out);
    }
    let route = |prefix: Prefix, i: usize, v6: bool| {
        let (gw, oif) = match (v6, i % 2) {
            (false, 0) => ("192.0.2.2", IF_P0),
            (false, _) => ("198.51.100.2", IF_P1),
            (true, 0) => ("2001:db8:1::2", IF_P0),
            (true, _) => ("2001:db8:2::2", IF_P1),
        };
        let nh_id = if o.nhg {
            // A third of the routes through the ECMP group, as BGP multipath would.
            (if v6 { 4 } else { 1 }) + (i % 3) as u32
        } else {
            0
        };
        Msg::Route(Route {
            op: Op::New,
            // zebra sets NLM_F_REPLACE on IPv4 only.
            replace: !v6,
            table: 254,
            prefix,
            rtype: RouteType::Unicast,
            protocol: 186,
            priority: 20,
            nh_id,
            gateway: if o.nhg { None } else { gw.parse().ok() },
            oif: if o.nhg { 0 } else { oif },
            multipath: Paths::default(),
            encap: false,
        })
    };
    for (i, &(a, l)) in v4.iter().enumerate() {
        let p = Prefix::new(IpAddr::V4(a.into()), l).expect("valid");
        put(route(p, i, false), &mut out);
    }
    for (i, &(a, l)) in v6.iter().enumerate() {
        let p = Prefix::new(IpAddr::V6(a.into()), l).expect("valid");
        put(route(p, i, true), &mut out);
    }
    (out, frames, v4.len(), v6.len())
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

pub fn run(o: &FpmOpts) -> Result<FpmReport, String> {
    let (wire, frames, n4, n6) = encode_table(o);
    let total = (n4 + n6) as u64;
    let port = free_port()?;
    let text = config(port);
    let source = PathBuf::from("bench-fpm.yaml");
    let cfg = control::config::parse(&text, &source).map_err(|e| e.to_string())?;
    let fpm_cfg = cfg.control_plane.fpm.clone().expect("the config has fpm");
    let logger = Arc::new(Logger::new(cfg.logging.clone()).map_err(|e| e.to_string())?);
    let router = Router::build(cfg).map_err(|e| e.to_string())?;
    let runtime = Runtime::start(
        &router,
        StartOptions {
            exit_when_drained: false,
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let core = Core::new(router, runtime, text, source, logger, None).map_err(|e| e.to_string())?;
    control::fpm::start(
        &core,
        &fpm_cfg,
        HashMap::from([(IF_P0, "lr-p0".into()), (IF_P1, "lr-p1".into())]),
    )?;
    let mut sock = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    sock.set_nodelay(true).ok();
    let t0 = Instant::now();
    sock.write_all(&wire)
        .map_err(|e| format!("writing the table: {e}"))?;
    let send_s = t0.elapsed().as_secs_f64();
    let deadline = t0 + Duration::from_secs(600);
    let status = loop {
        let s = control::fpm::status(&core).map_err(|e| e.to_string())?;
        if s.routes_installed >= total && !s.unpublished {
            break s;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "only {} of {total} routes installed after 600 s ({} unresolved, {} malformed)",
                s.routes_installed, s.unresolved, s.malformed
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let seconds = t0.elapsed().as_secs_f64();
    let fib_bytes = core
        .system()
        .tables
        .iter()
        .filter(|t| t.table.starts_with("ipv"))
        .map(|t| t.bytes)
        .sum();
    drop(sock);
    core.shutdown();
    Ok(FpmReport {
        routes_v4: n4,
        routes_v6: n6,
        frames,
        bytes: wire.len(),
        seconds,
        routes_per_s: total as f64 / seconds,
        send_s,
        apply_s: status.apply_ms / 1e3,
        batches: status.batches,
        publishes: status.publishes,
        fib_bytes,
    })
}
