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

mod grf;
mod l3vpn;
mod metro;
mod multicast;
mod pseudowire;
mod services;
mod switching;
mod xr;

use packet::ethernet::MacAddr;

use crate::load::FrameSizes;
use crate::stream::{StreamSpec, L3};

/// What a scenario measures.
#[derive(Clone, Debug)]
pub enum Procedure {
    /// RFC 2544 throughput (and latency at it) for each frame size.
    ThroughputPerSize,
    /// Throughput with 1, 2, ... streams (GR-1, GR-3).
    StreamScaling { counts: Vec<usize> },
    /// One trial at `load` during which components are removed and added (ME-15): see
    /// [`crate::hotswap`].
    HotSwap { load: f64, port: String },
    /// XR-5: throughput without and with ACLs, the denied flow, logging: see [`crate::services`].
    Acl(crate::services::AclPlan),
    /// ME-1S: throughput per size with the services off, then on: see [`crate::services`].
    ServicesOnOff(crate::services::OnOffPlan),
    /// QOS-1: one trial at a load above PIR, policer counters against the offered load.
    Policer(crate::services::PolicerPlan),
    /// ME-7..ME-9: address learning through a bridge domain: see [`crate::bridging`].
    Learning(crate::bridging::LearningPlan),
    /// ME-10: a Flexlink pair's primary cut under traffic: see [`crate::failover`].
    Failover(crate::failover::FailoverPlan),
    /// L2-1M: RFC 2889 learning capacity and rate searched, and flooding, through one bridge:
    /// see [`crate::switching::run_embedded`].
    Switching(crate::switching::Plan),
    /// ME-11, ME-12: joins, then throughput per size of multicast streams counted per
    /// receiver, then a probe group's join and leave times: see [`crate::multicast`].
    Multicast(crate::multicast::McastPlan),
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
    /// Further files written beside the config (ACL entry files its `file:` keys name).
    pub files: Vec<(String, String)>,
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
    /// L3VPN routes (ME-6): put into the router before the first trial, each checked installed.
    pub vpn: VpnPlan,
}

/// A scenario's L3VPN routes: those the far PEs advertise (each to be installed in every VRF
/// importing one of its route targets) and how many the router should export for its CEs.
#[derive(Clone, Debug, Default)]
pub struct VpnPlan {
    pub routes: Vec<control::l3vpn::VpnRoute>,
    /// The VRFs' own routes (CE routes and connected subnets) the router exports.
    pub exports: usize,
}

impl VpnPlan {
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
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
    /// GR-1..3 on Ethernet ports at OC-12's bit rate instead of ATM OC-12 PVCs (the stand-in
    /// they ran on before the router had ATM).
    pub grf_ethernet: bool,
}

impl Default for ScenarioOpts {
    fn default() -> Self {
        ScenarioOpts {
            scale: 1.0,
            workers: 1,
            max_streams: None,
            counts: None,
            grf_ethernet: false,
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
        "ME-3",
        "ME 6524 type 4 (VLAN) EoMPLS: 3,072 pseudowires, 128 VLANs on each of 24 access ports, 384 per uplink, 68..9190 B",
    ),
    (
        "ME-3S",
        "ME-3 with the services off, then on (10,000-line ACL, QoS re-marking, NetFlow)",
    ),
    (
        "ME-4",
        "ME 6524 type 5 (port) EoMPLS: 24 pseudowires, untagged, 64..9190 B",
    ),
    (
        "ME-4S",
        "ME-4 with the services off, then on (10,000-line ACL, QoS re-marking, NetFlow)",
    ),
    (
        "ME-5",
        "ME 6524 pseudowire failover: 100 pseudowires on an LSP with a pre-installed backup, 100,000 fps, the primary cut",
    ),
    (
        "ME-6",
        "ME 6524 MPLS VPN: 192 VRFs, 230,400 routes (95% VPN), 24 access + 8 uplinks, backbone, 68..9208 B",
    ),
    (
        "ME-6S",
        "ME-6 with the services off, then on (10,000-line ACL, QoS re-marking, NetFlow)",
    ),
    (
        "ME-7",
        "ME 6524 MAC learning: 90,000 addresses from 3 ports, test frames from 3 others, a monitor port, 30 kfps and line rate",
    ),
    (
        "ME-8",
        "ME 6524 MAC learning disabled on the VLAN: 90,000 test frames flooded to 4 ports",
    ),
    (
        "ME-9",
        "ME 6524 MAC learning limited to 15,000 on the VLAN: 30,000 offered, 15,000 flooded",
    ),
    (
        "ME-10",
        "ME 6524 Flexlink: 90,000 addresses behind a primary/backup pair, 64 B at 176,190 fps, the primary cut",
    ),
    (
        "L2-1M",
        "RFC 2889 learning capacity and rate at 1,000,000 MACs, and flooding, through one bridge (the ME 6524 claimed 96,000)",
    ),
    (
        "ME-11",
        "ME 6524 IGMP snooping, 1 uplink: 200 sources x 100 groups, each joined on 24 access ports, 64..9216 B",
    ),
    (
        "ME-12",
        "ME 6524 IGMP snooping, 8 uplinks x 25 sources, 800 groups each joined on 3 access ports, 64..9216 B",
    ),
    (
        "ME-13",
        "ME 6524 multicast routing, 1 uplink: 200 sources x 100 groups, each (S,G) routed to 24 access ports, 64..9216 B",
    ),
    (
        "ME-14",
        "ME 6524 multicast routing, 8 uplinks x 25 sources, 800 groups each routed to 3 access ports, 64..9216 B",
    ),
    (
        "ME-15",
        "ME 6524 hot swap: under ME-2's IPv6 traffic, a port, a worker and the config changed",
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
        "XR-5",
        "XR 12000 with services: XR-4 through 5,001-entry ACLs in and out per family, a denied flow, logging",
    ),
    (
        "ME-1S",
        "ME 6524 IPv4 as ME-1, services off then on: 10,000-line ACL, 500-line QoS re-marking, NetFlow v9",
    ),
    (
        "QOS-1",
        "Policer accuracy: two-rate and single-rate policers against the tester's offered load (1%)",
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
        "ME-1" => Ok(metro::metro(o, false)),
        "ME-2" => Ok(metro::metro(o, true)),
        "ME-15" => Ok(metro::hot_swap(o)),
        "ME-3" => Ok(pseudowire::pseudowires(o, true)),
        "ME-4" => Ok(pseudowire::pseudowires(o, false)),
        "ME-3S" => Ok(services::me3s(o, true)),
        "ME-4S" => Ok(services::me3s(o, false)),
        "ME-5" => Ok(pseudowire::protected(o)),
        "ME-6" => Ok(l3vpn::l3vpn(o)),
        "ME-6S" => Ok(services::me6s(o)),
        "ME-7" => Ok(switching::switching(o, crate::bridging::Learning::On)),
        "ME-8" => Ok(switching::switching(o, crate::bridging::Learning::Off)),
        "ME-9" => Ok(switching::switching(
            o,
            crate::bridging::Learning::Limited(15_000),
        )),
        "ME-10" => Ok(switching::flexlink(o)),
        "L2-1M" => Ok(switching::searches(o)),
        "ME-11" => Ok(multicast::multicast(o, 1)),
        "ME-12" => Ok(multicast::multicast(o, 8)),
        "ME-13" => Ok(multicast::routed(o, 1)),
        "ME-14" => Ok(multicast::routed(o, 8)),
        "XR-3" => Ok(xr::xr(o, false)),
        "XR-4" => Ok(xr::xr(o, true)),
        "XR-5" => Ok(services::xr5(o)),
        "ME-1S" => Ok(services::me1s(o)),
        "QOS-1" => Ok(services::qos1(o)),
        "GR-1" => Ok(grf::grf(o, grf::Grf::Scaling)),
        "GR-2" => Ok(grf::grf(o, grf::Grf::Large)),
        "GR-3" => Ok(grf::grf(o, grf::Grf::ClassC)),
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
fn router_mac(i: usize) -> [u8; 6] {
    [2, 0, 0, 0, i as u8, 1]
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

/// The seed's table as rows keyed by frame size: `fps[i]` at `sizes[i]`, with `note(size)`
/// where the seed's row was at another size than ours (empty otherwise).
fn seed_per_size(sizes: &[u16], fps: &[f64], note: impl Fn(u16) -> String) -> Vec<SeedRow> {
    sizes
        .iter()
        .zip(fps)
        .map(|(&s, &f)| SeedRow {
            key: s.to_string(),
            fps: Some(f),
            note: note(s),
        })
        .collect()
}

/// The `router:` line: `workers` workers on cores 1, 2, ... (the tester keeps core 0).
fn router_line(workers: usize) -> String {
    let cores: Vec<String> = (0..workers).map(|w| (w + 1).to_string()).collect();
    format!(
        "router: {{ workers: {workers}, cores: [{}], buffers: 1024 }}\n",
        cores.join(", ")
    )
}

/// The `ports:` section: one mem port per tester port.
fn mem_ports(ports: &[(String, f64)]) -> String {
    let mut y = "ports:\n".to_string();
    for (n, _) in ports {
        y += &format!("  - {{ name: {n}, driver: mem }}\n");
    }
    y
}

/// The metro topology's tester ports: access ports a0.., then uplinks u0.., each 1 Gbit/s.
fn access_and_uplinks(access: usize, uplinks: usize) -> Vec<(String, f64)> {
    (0..access + uplinks)
        .map(|i| {
            let name = if i < access {
                format!("a{i}")
            } else {
                format!("u{}", i - access)
            };
            (name, 1e9)
        })
        .collect()
}

/// The backbone pattern's load shares: the first `access` ports share the `uplinks`' capacity
/// (each offers uplinks/access of its rate), so 100% load fills the uplinks exactly both ways.
fn backbone_load_scale(access: usize, uplinks: usize) -> Vec<f64> {
    (0..access + uplinks)
        .map(|i| {
            if i < access {
                uplinks as f64 / access as f64
            } else {
                1.0
            }
        })
        .collect()
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
    let mut y = router_line(workers);
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
    y += &mem_ports(ports);
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
            MacAddr(router_mac(i))
        );
    }
    y += "neighbors:\n";
    for (i, (n, _)) in ports.iter().enumerate() {
        let mac = MacAddr(host_mac(i));
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

/// `config` with `extra(interface name)` (YAML keys, e.g. `acl-in: [A]`) added to the flow
/// mapping of each interface it returns text for.
fn with_if_services(config: &str, extra: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(config.len() + 4096);
    let mut in_ifs = false;
    for line in config.lines() {
        if !line.starts_with(' ') {
            in_ifs = line == "interfaces:";
        }
        let name = line
            .strip_prefix("  - { name: ")
            .and_then(|r| r.split(',').next());
        match (in_ifs, name, line.strip_suffix(" }")) {
            (true, Some(n), Some(body)) => match extra(n) {
                Some(x) => out += &format!("{body}, {x} }}"),
                None => out += line,
            },
            _ => out += line,
        }
        out.push('\n');
    }
    out
}

fn base_stream(name: String, from: usize, to: usize) -> StreamSpec {
    StreamSpec {
        name,
        tx_port: from,
        rx_port: to,
        src_mac: host_mac(from),
        dst_mac: router_mac(from),
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
        also_rx: Vec::new(),
        multicast_mac: false,
        tunnel: None,
        mpls: None,
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
            let (router, _) = crate::run::build_router(&s, &dir)
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
