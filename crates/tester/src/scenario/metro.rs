//! The Cisco ME 6524 tests: ME-1 (IPv4) and ME-2 (IPv6).

use std::sync::Arc;

use fib::gen::{self, Profile, Spec};

use super::*;
use crate::load::FrameSizes;
use crate::stream::{Field, FieldKind, Vary, L3};

/// The ME 6524 tests (ME-1, ME-2): 24 access ports and 8 uplinks at 1 Gbit/s, a generated OSPF
/// table spread over the uplinks, backbone traffic both ways.
pub(super) fn metro(o: &ScenarioOpts, ipv6: bool) -> Scenario {
    const ACCESS: usize = 24;
    const UPLINKS: usize = 8;
    let ports = access_and_uplinks(ACCESS, UPLINKS);
    // Per uplink, the routes it owns (one destination host per route).
    let mut per_uplink: Vec<Vec<u128>> = vec![Vec::new(); UPLINKS];
    let mut lines = Vec::new();
    let target = if ipv6 { 118_000 } else { 240_000 };
    let want = ((target as f64 * o.scale).round() as usize).max(UPLINKS);
    if ipv6 {
        let spec = Spec {
            profile: Profile::Me2,
            seed: 1,
            scale: (o.scale * 1.02).min(2.0),
        };
        // The customer and interface ranges are 2001:db8::/32; generated routes live in 2000::/3
        // and are kept out of it.
        let routes: Vec<(u128, u8)> = gen::v6(&spec)
            .into_iter()
            .filter(|&(p, _)| p >> 96 != 0x2001_0db8)
            .take(want)
            .collect();
        for (k, &(p, l)) in routes.iter().enumerate() {
            let u = k % UPLINKS;
            per_uplink[u].push(p | 1);
            lines.push(format!(
                "{}/{l} via {}",
                std::net::Ipv6Addr::from(p),
                std::net::Ipv6Addr::from(if_v6(ACCESS + u) | 2)
            ));
        }
    } else {
        let spec = Spec {
            profile: Profile::Me1,
            seed: 1,
            scale: (o.scale * 1.02).min(2.0),
        };
        let routes: Vec<(u32, u8)> = gen::v4(&spec)
            .into_iter()
            .filter(|&(p, _)| p >> 24 != 10 && p >> 16 != 0x6440)
            .take(want)
            .collect();
        for (k, &(p, l)) in routes.iter().enumerate() {
            let u = k % UPLINKS;
            per_uplink[u].push((p | 1) as u128);
            lines.push(format!(
                "{}/{l} via {}",
                std::net::Ipv4Addr::from(p),
                std::net::Ipv4Addr::from(if_v4(ACCESS + u) | 2)
            ));
        }
    }
    let nroutes = lines.len();
    let lists: Vec<Arc<[u128]>> = per_uplink.into_iter().map(Arc::from).collect();
    // Customer networks behind each access port's host.
    let mut extra = Vec::new();
    for a in 0..ACCESS {
        if ipv6 {
            extra.push(format!(
                "  - {{ prefix: \"{}/64\", via: \"{}\" }}",
                std::net::Ipv6Addr::from(cust_v6(a)),
                std::net::Ipv6Addr::from(if_v6(a) | 2)
            ));
        } else {
            extra.push(format!(
                "  - {{ prefix: 10.{a}.0.0/16, via: {} }}",
                std::net::Ipv4Addr::from(if_v4(a) | 2)
            ));
        }
    }
    let mut streams = Vec::new();
    for a in 0..ACCESS {
        for u in 0..UPLINKS {
            let up = ACCESS + u;
            // Access to uplink: every route of the uplink in turn.
            let mut s = base_stream(format!("a{a}>u{u}"), a, up);
            let mut back = base_stream(format!("u{u}>a{a}"), up, a);
            if ipv6 {
                s.l3 = L3::V6 {
                    src: v6(cust_v6(a) | 2),
                    dst: v6(lists[u][0]),
                };
                back.l3 = L3::V6 {
                    src: v6(lists[u][0]),
                    dst: v6(cust_v6(a) | 2),
                };
                // 78-byte frames: the signature straight after the IPv6 header.
                s.udp = None;
                back.udp = None;
                s.min_size = 78;
                back.min_size = 78;
            }
            s.fields.push(Field {
                kind: FieldKind::DstIp,
                vary: Vary::List(lists[u].clone()),
                nested: false,
            });
            // Uplink to access: one source per route, to hosts of the customer network.
            back.fields.push(Field {
                kind: FieldKind::SrcIp,
                vary: Vary::List(lists[u].clone()),
                nested: false,
            });
            streams.push(s);
            streams.push(back);
        }
    }
    // The backbone pattern: 24 access ports send to 8 uplinks, so each access port offers 8/24 of
    // its rate and 100% load fills the uplinks exactly in both directions.
    let load_scale = backbone_load_scale(ACCESS, UPLINKS);
    let sizes: Vec<u16> = if ipv6 {
        vec![78, 128, 256, 512, 1024, 1280, 1518, 2034, 4068, 9216]
    } else {
        vec![64, 128, 256, 512, 1024, 1280, 1518, 2034, 4068, 9216]
    };
    let seed_fps: &[f64] = if ipv6 {
        &[
            11_720_831.0,
            9_965_234.0,
            5_942_222.0,
            3_242_502.0,
            1_676_237.0,
            1_363_103.0,
            1_137_828.0,
            856_863.0,
            424_411.0,
            187_851.0,
        ]
    } else {
        &[
            15_009_592.0,
            9_933_748.0,
            5_954_112.0,
            3_250_110.0,
            1_700_212.0,
            1_371_135.0,
            1_143_183.0,
            865_532.0,
            427_715.0,
            190_559.0,
        ]
    };
    let flows = streams.iter().map(|s| s.flows()).sum();
    let family = if ipv6 { "IPv6" } else { "IPv4" };
    Scenario {
        id: if ipv6 { "ME-2" } else { "ME-1" },
        title: format!(
            "{family} unicast routing, {nroutes} routes over 8 uplinks, 24 access + 8 uplink ports \
             (1 Gbit/s nominal), backbone pattern both ways"
        ),
        seed_title: if ipv6 {
            "Cisco ME 6524, table 2: IPv6 unicast routing scalability and throughput (118,000 OSPFv3 routes, 300 s)"
        } else {
            "Cisco ME 6524, table 1: IPv4 unicast routing scalability and throughput (240,000 OSPFv2 routes, 300 s)"
        },
        config_yaml: config(&ports, &|_| "default".into(), &extra, o.workers, ipv6),
        route_lines: lines,
        files: vec![],
        ports,
        load_scale,
        streams,
        sizes: sizes.iter().map(|&s| FrameSizes::Fixed(s)).collect(),
        procedure: Procedure::ThroughputPerSize,
        loss_tolerance: 0.0,
        seed_seconds: 300.0,
        seed: seed_per_size(&sizes, seed_fps, |_| String::new()),
        notes: vec![
            "Routes come from the route generator (static), not OSPF: OSPF arrives with FRR."
                .into(),
            "The seed ran with a 10,000-line ACL, QoS re-marking and NetFlow on; this table is \
             forwarding only. `linerate bench scenario ME-1S` runs ME-1 with those services, off \
             and on, side by side."
                .into(),
        ],
        flows,
        vpn: VpnPlan::default(),
    }
}

/// ME-15: the ME-2 setup (IPv6, backbone both ways) at a load below its throughput, during which
/// an access port is removed and put back, a worker is added and the first one removed, and the
/// config is reloaded with a change. Each change must be logged, and no frame may be lost on
/// the ports not involved.
pub(super) fn hot_swap(o: &ScenarioOpts) -> Scenario {
    let mut s = metro(o, true);
    s.id = "ME-15";
    s.title = format!("Hot swap under IPv6 traffic: {}", s.title);
    s.seed_title = "Cisco ME 6524, section 2.6: fan tray and power supply removed and re-inserted \
                    during the IPv6 throughput test: a syslog alert for each, no frame lost";
    s.sizes = vec![FrameSizes::Fixed(512)];
    s.procedure = Procedure::HotSwap {
        load: 0.5,
        port: "a23".into(),
    };
    s.seed = vec![SeedRow {
        key: "512".into(),
        fps: None,
        note: "no loss, a syslog alert per change".into(),
    }];
    s.notes = vec![
        "A router has no fan tray or power supply to pull; the parts that can be replaced under \
         traffic are ports, workers and the config, so those are what is changed."
            .into(),
        "Streams to or from the removed port lose frames while it is out; the pass criterion is \
         zero loss on every other stream."
            .into(),
    ];
    s
}
