//! The seed reports' tests as runnable profiles (names from ../shared/TESTPLAN.md). Each builds a
//! router config and route table, the tester's ports and streams, and says which procedure to
//! run and what the seed measured, so `linerate bench scenario ME-1` reproduces a table of the
//! report with one command.
//!
//! Addressing, the same in every scenario:
//! - tester port i faces router interface i, 100.64.i.1/24 (outside every test destination
//!   range) and 2001:db8:0:i::1/64; the tester's host on it is .2 / ::2, a static neighbour;
//! - behind each port's host are "customer" networks: 10.i.0.0/16 and 2001:db8:1:i::/64
//!   (XR-3/XR-4: a flat /8 per port, as the report's flat networks);
//! - generated route tables (ME-1, ME-2, GR-3) are spread over the uplinks' hosts.

use std::sync::Arc;

use fib::gen::{self, Profile, Spec};

use crate::load::FrameSizes;
use crate::stream::{Field, FieldKind, StreamSpec, Vary, L3};

/// What a scenario measures.
#[derive(Clone, Debug)]
pub enum Procedure {
    /// RFC 2544 throughput (and latency at it) for each frame size.
    ThroughputPerSize,
    /// Throughput with 1, 2, ... streams (GR-1, GR-3).
    StreamScaling { counts: Vec<usize> },
}

/// A seed figure for one row of the table.
#[derive(Clone, Debug)]
pub struct SeedRow {
    /// Frame size label ("64", "IMIX") or stream count ("16").
    pub key: String,
    pub fps: Option<f64>,
    /// What the figure means when it is not frames/s ("line rate", "529.54 Mbit/s").
    pub note: String,
}

pub struct Scenario {
    pub id: &'static str,
    pub title: String,
    /// The seed's own description of its table.
    pub seed_title: &'static str,
    pub config_yaml: String,
    pub route_lines: Vec<String>,
    pub ports: Vec<(String, f64)>,
    pub load_scale: Vec<f64>,
    pub streams: Vec<StreamSpec>,
    pub sizes: Vec<FrameSizes>,
    pub procedure: Procedure,
    pub loss_tolerance: f64,
    /// The report's trial duration, seconds.
    pub seed_seconds: f64,
    pub seed: Vec<SeedRow>,
    pub notes: Vec<String>,
    /// Flows across all streams.
    pub flows: u64,
}

/// Options that scale a scenario down (CI) or change its defaults.
#[derive(Clone, Debug)]
pub struct ScenarioOpts {
    /// Fraction of the seed's routes and flows (1.0: seed scale).
    pub scale: f64,
    pub workers: usize,
    /// Stream-scaling scenarios: the largest stream count.
    pub max_streams: Option<usize>,
    /// Stream-scaling scenarios: exactly these stream counts (instead of 1..=max).
    pub counts: Option<Vec<usize>>,
}

impl Default for ScenarioOpts {
    fn default() -> Self {
        ScenarioOpts {
            scale: 1.0,
            workers: 1,
            max_streams: None,
            counts: None,
        }
    }
}

pub const NAMES: &[(&str, &str)] = &[
    (
        "ME-1",
        "ME 6524 IPv4: 240,000 OSPF routes, 24 access + 8 uplinks, backbone, 64..9216 B",
    ),
    (
        "ME-2",
        "ME 6524 IPv6: 118,000 OSPFv3 routes, 24 access + 8 uplinks, backbone, 78..9216 B",
    ),
    (
        "XR-3",
        "XR 12000 IPv4: 4 logical routers, 1,600,000 flows, IMIX and 64 B",
    ),
    (
        "XR-4",
        "XR 12000 IPv4+IPv6: 4 logical routers, 3,200,000 flows, IMIX",
    ),
    (
        "GR-1",
        "GRF 1600: 64 B streams added one by one, 1..16, 2% loss rule",
    ),
    (
        "GR-2",
        "GRF 1600: 1,518 B streams on 16 modules, each at line rate",
    ),
    (
        "GR-3",
        "GRF 1600: as GR-1 to random Class C destinations (2,097,152 routes)",
    ),
];

pub fn build(id: &str, o: &ScenarioOpts) -> Result<Scenario, String> {
    if !(o.scale > 0.0 && o.scale <= 1.0) {
        return Err(format!(
            "--scale {}: must be above 0 and at most 1",
            o.scale
        ));
    }
    match id.to_ascii_uppercase().as_str() {
        "ME-1" => Ok(metro(o, false)),
        "ME-2" => Ok(metro(o, true)),
        "XR-3" => Ok(xr(o, false)),
        "XR-4" => Ok(xr(o, true)),
        "GR-1" => Ok(grf(o, Grf::Scaling)),
        "GR-2" => Ok(grf(o, Grf::Large)),
        "GR-3" => Ok(grf(o, Grf::ClassC)),
        other => Err(format!(
            "no scenario {other:?}; known: {}",
            NAMES.iter().map(|n| n.0).collect::<Vec<_>>().join(", ")
        )),
    }
}

fn v4(a: u32) -> [u8; 4] {
    a.to_be_bytes()
}
fn v6(a: u128) -> [u8; 16] {
    a.to_be_bytes()
}
fn router_mac(i: usize) -> String {
    format!("02:00:00:00:{:02x}:01", i)
}
fn host_mac(i: usize) -> [u8; 6] {
    [2, 0, 0, 0, i as u8, 2]
}
/// Port subnets: 100.64.i.0/24, outside the Class C space GR-3 sends to and the flat networks
/// XR-3 uses, so no test destination lands on an interface subnet.
fn if_v4(i: usize) -> u32 {
    0x6440_0000 | (i as u32) << 8 // 100.64.i.0
}
fn if_v6(i: usize) -> u128 {
    0x2001_0db8_0000_0000u128 << 64 | (i as u128) << 64
}
fn cust_v6(i: usize) -> u128 {
    0x2001_0db8_0001_0000u128 << 64 | (i as u128) << 64
}

/// Config text: one mem port and interface per tester port (in `vrfs[i]`), the tester host as a
/// static neighbour, and `routes` (YAML lines, already indented).
fn config(
    ports: &[(String, f64)],
    vrf_of: &dyn Fn(usize) -> String,
    extra_routes: &[String],
    workers: usize,
    v6: bool,
) -> String {
    let mut y = String::new();
    let cores: Vec<String> = (0..workers).map(|w| (w + 1).to_string()).collect();
    y += &format!(
        "router: {{ workers: {workers}, cores: [{}], buffers: 1024 }}\n",
        cores.join(", ")
    );
    y += "limits: { ipv4-routes: 4000000, ipv6-routes: 1000000 }\n";
    let mut vrfs: Vec<String> = (0..ports.len())
        .map(vrf_of)
        .filter(|v| v != "default")
        .collect();
    vrfs.sort();
    vrfs.dedup();
    if !vrfs.is_empty() {
        y += &format!("vrfs: [{}]\n", vrfs.join(", "));
    }
    y += "ports:\n";
    for (n, _) in ports {
        y += &format!("  - {{ name: {n}, driver: mem }}\n");
    }
    y += "interfaces:\n";
    for (i, (n, _)) in ports.iter().enumerate() {
        let a = std::net::Ipv4Addr::from(if_v4(i) | 1);
        let six = if v6 {
            format!(
                ", ipv6: [\"{}/64\"]",
                std::net::Ipv6Addr::from(if_v6(i) | 1)
            )
        } else {
            String::new()
        };
        y += &format!(
            "  - {{ name: {n}, port: {n}, vrf: {}, mac: \"{}\", mtu: 9198, ipv4: [{a}/24]{six} }}\n",
            vrf_of(i),
            router_mac(i)
        );
    }
    y += "neighbors:\n";
    for (i, (n, _)) in ports.iter().enumerate() {
        let m = host_mac(i);
        let mac = format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        );
        y += &format!(
            "  - {{ interface: {n}, ip: {}, mac: \"{mac}\" }}\n",
            std::net::Ipv4Addr::from(if_v4(i) | 2)
        );
        if v6 {
            y += &format!(
                "  - {{ interface: {n}, ip: \"{}\", mac: \"{mac}\" }}\n",
                std::net::Ipv6Addr::from(if_v6(i) | 2)
            );
        }
    }
    if !extra_routes.is_empty() {
        y += "routes:\n";
        for r in extra_routes {
            y += r;
            y += "\n";
        }
    }
    y += "route-files:\n  - { path: scenario.routes }\n";
    y
}

fn base_stream(name: String, from: usize, to: usize) -> StreamSpec {
    StreamSpec {
        name,
        tx_port: from,
        rx_port: to,
        src_mac: host_mac(from),
        dst_mac: {
            let mut m = [2, 0, 0, 0, from as u8, 1];
            m[4] = from as u8;
            m
        },
        vlan: None,
        l3: L3::V4 {
            src: v4(0x0a00_0002 | (from as u32) << 16),
            dst: v4(0x0a00_0002 | (to as u32) << 16),
        },
        udp: Some((1024, 5000)),
        ttl: 64,
        dscp: 0,
        fields: vec![],
        weight: 1.0,
        min_size: 0,
    }
}

/// The ME 6524 tests (ME-1, ME-2): 24 access ports and 8 uplinks at 1 Gbit/s, a generated OSPF
/// table spread over the uplinks, backbone traffic both ways.
fn metro(o: &ScenarioOpts, ipv6: bool) -> Scenario {
    const ACCESS: usize = 24;
    const UPLINKS: usize = 8;
    let n = ACCESS + UPLINKS;
    let ports: Vec<(String, f64)> = (0..n)
        .map(|i| {
            let name = if i < ACCESS {
                format!("a{i}")
            } else {
                format!("u{}", i - ACCESS)
            };
            (name, 1e9)
        })
        .collect();
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
    let load_scale: Vec<f64> = (0..n)
        .map(|i| {
            if i < ACCESS {
                UPLINKS as f64 / ACCESS as f64
            } else {
                1.0
            }
        })
        .collect();
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
        ports,
        load_scale,
        streams,
        sizes: sizes.iter().map(|&s| FrameSizes::Fixed(s)).collect(),
        procedure: Procedure::ThroughputPerSize,
        loss_tolerance: 0.0,
        seed_seconds: 300.0,
        seed: sizes
            .iter()
            .zip(seed_fps)
            .map(|(s, &f)| SeedRow {
                key: s.to_string(),
                fps: Some(f),
                note: String::new(),
            })
            .collect(),
        notes: vec![
            "Routes come from the route generator (static), not OSPF: OSPF arrives with FRR."
                .into(),
            "The seed ran with a 10,000-line ACL, QoS re-marking and NetFlow on; those services \
             are not in Linerate yet, so these figures are forwarding only."
                .into(),
        ],
        flows,
    }
}

/// The XR 12000 tests (XR-3, XR-4): four logical routers (VRFs here), LR1 and LR2 with two
/// 10 GbE ports each, LR3 and LR4 with one 10 GbE and ten 1 GbE ports each; streams in pairs
/// inside each LR, full-mesh flows between the ports' flat networks.
fn xr(o: &ScenarioOpts, dual: bool) -> Scenario {
    let mut ports: Vec<(String, f64)> = Vec::new();
    let mut lr_of = Vec::new();
    for lr in 0..4 {
        let (tens, gigs) = if lr < 2 { (2, 0) } else { (1, 10) };
        for k in 0..tens {
            ports.push((format!("lr{}x{k}", lr + 1), 10e9));
            lr_of.push(lr);
        }
        for k in 0..gigs {
            ports.push((format!("lr{}g{k}", lr + 1), 1e9));
            lr_of.push(lr);
        }
    }
    let n = ports.len();
    // Flat networks: (20 + i).0.0.0/8 and 2001:db8:1:i::/64 behind port i's host.
    let mut extra = Vec::new();
    for i in 0..n {
        extra.push(format!(
            "  - {{ vrf: lr{}, prefix: {}.0.0.0/8, via: {} }}",
            lr_of[i] + 1,
            20 + i,
            std::net::Ipv4Addr::from(if_v4(i) | 2)
        ));
        if dual {
            extra.push(format!(
                "  - {{ vrf: lr{}, prefix: \"{}/64\", via: \"{}\" }}",
                lr_of[i] + 1,
                std::net::Ipv6Addr::from(cust_v6(i)),
                std::net::Ipv6Addr::from(if_v6(i) | 2)
            ));
        }
    }
    // Stream pairs: LR1/LR2 between their two 10 GbE ports; LR3/LR4 between the 10 GbE port and
    // each 1 GbE port. Flows: the seed's 1,600,000 per family, 200,000 per 10G-10G stream and
    // 20,000 per 10G-1G stream (src x dst hosts, nested).
    let mut pairs: Vec<(usize, usize, u32, u32)> = Vec::new();
    let mut i = 0;
    for lr in 0..4 {
        if lr < 2 {
            pairs.push((i, i + 1, 400, 500));
            pairs.push((i + 1, i, 400, 500));
            i += 2;
        } else {
            for g in 0..10 {
                pairs.push((i, i + 1 + g, 100, 200));
                pairs.push((i + 1 + g, i, 100, 200));
            }
            i += 11;
        }
    }
    let scale_n = |v: u32| ((v as f64 * o.scale.sqrt()).round() as u32).max(1);
    let mut streams = Vec::new();
    for fam in 0..if dual { 2 } else { 1 } {
        for &(a, b, ns, nd) in &pairs {
            let mut s = base_stream(
                format!(
                    "{}{}>{}",
                    if fam == 1 { "v6 " } else { "" },
                    ports[a].0,
                    ports[b].0
                ),
                a,
                b,
            );
            if fam == 0 {
                s.l3 = L3::V4 {
                    src: v4((20 + a as u32) << 24 | 1 << 8 | 1),
                    dst: v4((20 + b as u32) << 24 | 1 << 8 | 1),
                };
            } else {
                s.l3 = L3::V6 {
                    src: v6(cust_v6(a) | 1 << 16 | 1),
                    dst: v6(cust_v6(b) | 1 << 16 | 1),
                };
                s.udp = None;
                s.min_size = 78;
            }
            // Source and destination hosts: every combination (full-mesh flows).
            s.fields.push(Field {
                kind: FieldKind::SrcIp,
                vary: Vary::Step {
                    count: scale_n(ns),
                    step: 1,
                },
                nested: false,
            });
            s.fields.push(Field {
                kind: FieldKind::DstIp,
                vary: Vary::Step {
                    count: scale_n(nd),
                    step: 1,
                },
                nested: true,
            });
            streams.push(s);
        }
    }
    // Each 10G port of LR3/LR4 feeds ten 1G ports: its streams share its rate equally, and
    // 100% load is line rate on every port.
    let flows = streams.iter().map(|s| s.flows()).sum();
    let sizes = if dual {
        vec![FrameSizes::imix()]
    } else {
        vec![FrameSizes::imix(), FrameSizes::Fixed(64)]
    };
    let agg_bps: f64 = ports.iter().map(|p| p.1).sum();
    let mut seed = vec![SeedRow {
        key: "IMIX".into(),
        fps: None,
        note: "line rate (the report's IMIX distribution is in a figure, not the text), 24.5 us"
            .into(),
    }];
    if !dual {
        seed.push(SeedRow {
            key: "64".into(),
            fps: Some(crate::load::line_rate_fps(agg_bps, 64.0)),
            note: "line rate, 24.5 us".into(),
        });
    } else {
        seed[0].note = "line rate, 24.1 us".into();
    }
    Scenario {
        id: if dual { "XR-4" } else { "XR-3" },
        title: format!(
            "{} forwarding, 4 logical routers (VRFs), 6 x 10 GbE + 20 x 1 GbE nominal, {} flows",
            if dual { "IPv4+IPv6" } else { "IPv4" },
            flows
        ),
        seed_title: if dual {
            "Cisco XR 12000, test 4: IPv4/IPv6 IMIX forwarding, 3,200,000 flows, RFC 2544"
        } else {
            "Cisco XR 12000, test 3: IPv4 IMIX and 64-byte forwarding, 1,600,000 flows, RFC 2544"
        },
        config_yaml: config(
            &ports,
            &|i| format!("lr{}", lr_of[i] + 1),
            &extra,
            o.workers,
            dual,
        ),
        route_lines: vec![],
        load_scale: vec![1.0; n],
        ports,
        streams,
        sizes,
        procedure: Procedure::ThroughputPerSize,
        loss_tolerance: 0.0,
        seed_seconds: 60.0,
        seed,
        notes: vec![
            "Logical routers are VRFs of one router process here; separate processes per LR \
             come with the logical-router issue."
                .into(),
            "IPv6 frames carry the signature straight after the IPv6 header (no UDP), as testers \
             do at 78 bytes; IMIX's 64-byte frames are 78 bytes for IPv6."
                .into(),
        ],
        flows,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Grf {
    Scaling,
    Large,
    ClassC,
}

/// The GRF 1600 tests: 16 modules (ports at OC-12's 622 Mbit/s nominal), stream k from port k
/// to port k+1; a stream passes when it loses at most 2%.
fn grf(o: &ScenarioOpts, kind: Grf) -> Scenario {
    const N: usize = 16;
    let ports: Vec<(String, f64)> = (0..N).map(|i| (format!("m{i}"), 622.08e6)).collect();
    // Port j owns the Class C block (192 + 2j).0.0.0/7; GR-3 adds every /24 in 192.0.0.0/3
    // (the Gr3 profile) through the port that owns its block. GR-1/GR-2: 80 /24 entries, as the
    // report's forwarding table had.
    let mut lines = Vec::new();
    let block = |j: usize| (192u32 + 2 * j as u32) << 24;
    for j in 0..N {
        lines.push(format!(
            "{}/7 via {}",
            std::net::Ipv4Addr::from(block(j)),
            std::net::Ipv4Addr::from(if_v4(j) | 2)
        ));
    }
    if kind == Grf::ClassC {
        let spec = Spec {
            profile: Profile::Gr3,
            seed: 1,
            scale: o.scale,
        };
        for (p, l) in gen::v4(&spec) {
            let j = ((p >> 24) - 192) as usize / 2;
            lines.push(format!(
                "{}/{l} via {}",
                std::net::Ipv4Addr::from(p),
                std::net::Ipv4Addr::from(if_v4(j) | 2)
            ));
        }
    } else {
        for j in 0..N {
            for k in 0..5u32 {
                lines.push(format!(
                    "{}/24 via {}",
                    std::net::Ipv4Addr::from(block(j) | k << 8),
                    std::net::Ipv4Addr::from(if_v4(j) | 2)
                ));
            }
        }
    }
    let mut streams = Vec::new();
    for k in 0..N {
        let to = (k + 1) % N;
        let mut s = base_stream(format!("m{k}>m{to}"), k, to);
        s.l3 = L3::V4 {
            src: v4(0x0a00_0002 | (k as u32) << 16),
            dst: v4(block(to) | 1),
        };
        if kind == Grf::ClassC {
            s.fields.push(Field {
                kind: FieldKind::DstIp,
                vary: Vary::Random { count: 1 << 25 },
                nested: false,
            });
            s.l3 = L3::V4 {
                src: v4(0x0a00_0002 | (k as u32) << 16),
                dst: v4(block(to)),
            };
        }
        streams.push(s);
    }
    let max = o.max_streams.unwrap_or(N).clamp(1, N);
    let counts: Vec<usize> = match &o.counts {
        Some(c) => c.iter().map(|&n| n.clamp(1, N)).collect(),
        None => (1..=max).collect(),
    };
    let flows = streams.iter().map(|s| s.flows()).sum();
    let (id, title, seed_title, sizes, procedure, seed) = match kind {
        Grf::Scaling => (
            "GR-1",
            "64-byte streams added one by one, each from one module to the next, single destination",
            "Ascend GRF 1600, figure 1: aggregate 64-byte throughput, ATM OC-12, 1..16 streams",
            vec![FrameSizes::Fixed(64)],
            Procedure::StreamScaling {
                counts: counts.clone(),
            },
            vec![
                seed_row("1", Some(295_604.0), ""),
                seed_row("16", Some(4_707_451.0), ""),
            ],
        ),
        Grf::ClassC => (
            "GR-3",
            "64-byte streams to random Class C destinations (192.0.0.0/3), 1..16 streams",
            "Ascend GRF 1600, figure 3: varying Class C destinations, 1..16 streams",
            vec![FrameSizes::Fixed(64)],
            Procedure::StreamScaling {
                counts: counts.clone(),
            },
            vec![
                seed_row("1", Some(295_604.0), ""),
                seed_row("2", Some(553_771.0), ""),
                seed_row("5", Some(1_387_515.0), ""),
                seed_row("16", Some(4_480_309.0), "95.17% of GR-1"),
            ],
        ),
        Grf::Large => (
            "GR-2",
            "1,518-byte streams, one per module, each at its line rate",
            "Ascend GRF 1600, figure 2: aggregate 1,518-byte throughput, 16 modules",
            vec![FrameSizes::Fixed(1518)],
            Procedure::StreamScaling {
                counts: o.counts.clone().unwrap_or_else(|| vec![1, max]),
            },
            vec![
                seed_row("1", Some(529.54e6 / (1518.0 * 8.0)), "529.54 Mbit/s"),
                seed_row("16", Some(8_324.86e6 / (1518.0 * 8.0)), "8,324.86 Mbit/s"),
            ],
        ),
    };
    Scenario {
        id,
        title: format!(
            "{title}; 16 ports at 622 Mbit/s nominal, {} routes",
            lines.len()
        ),
        seed_title,
        config_yaml: config(&ports, &|_| "default".into(), &[], o.workers, false),
        route_lines: lines,
        load_scale: vec![1.0; N],
        ports,
        streams,
        sizes,
        procedure,
        loss_tolerance: 0.02,
        seed_seconds: 60.0,
        seed,
        notes: vec![
            "The seed's interfaces were ATM OC-12 (AAL5, RFC 2684); these are Ethernet ports with \
             OC-12's nominal rate. Mbit/s counts frame bits, as the report did."
                .into(),
            "A stream passes when its output is at most 2% below its input (the report's rule)."
                .into(),
        ],
        flows,
    }
}

fn seed_row(key: &str, fps: Option<f64>, note: &str) -> SeedRow {
    SeedRow {
        key: key.into(),
        fps,
        note: note.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_builds_a_valid_config_and_valid_streams() {
        let o = ScenarioOpts {
            scale: 0.01,
            ..Default::default()
        };
        let dir = std::env::temp_dir().join(format!("lr-scen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (id, _) in NAMES {
            let s = build(id, &o).unwrap();
            let router = crate::run::build_router(&s, &dir)
                .unwrap_or_else(|e| panic!("{id}: {e}\n{}", s.config_yaml));
            assert_eq!(router.cfg.ports.len(), s.ports.len(), "{id}");
            let (v4, v6) = router.route_counts();
            // Plus the connected and local routes of the interfaces.
            assert!(
                v4 + v6 >= s.route_lines.len() + router.cfg.routes.len(),
                "{id}"
            );
            for sz in &s.sizes {
                for st in &s.streams {
                    st.validate(&sz.sizes(), s.ports.len())
                        .unwrap_or_else(|e| panic!("{id}: {e}"));
                }
            }
            assert_eq!(s.load_scale.len(), s.ports.len());
            assert!(!s.seed.is_empty());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn seed_scale_counts() {
        let full = ScenarioOpts::default();
        let me1 = build("ME-1", &full).unwrap();
        assert_eq!(me1.route_lines.len(), 240_000);
        assert_eq!(me1.streams.len(), 2 * 24 * 8);
        let xr3 = build("xr-3", &full).unwrap();
        assert_eq!(xr3.flows, 1_600_000);
        let xr4 = build("XR-4", &full).unwrap();
        assert_eq!(xr4.flows, 3_200_000);
        assert!(build("ME-99", &full).is_err());
    }
}
