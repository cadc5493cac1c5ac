//! The Cisco ME 6524's MPLS VPN test (ME-6): 192 VRFs (8 VLAN sub-interfaces on each of 24
//! access ports), 230,400 routes, 95% of them VPN routes from the far PEs and 5% from the CEs,
//! the backbone pattern both ways ([`l3vpn`]); [`super::services::me6s`] runs it with the
//! services off and then on, as the seed did.
//!
//! The router is the PE of the report's figure 5. Sub-interface `a<p>.<100+j>` is VRF
//! `v<8p+j>`, every VRF with the same addressing (10.0.0.1/24 towards its CE 10.0.0.2: the point
//! of VRFs). Behind the 8 uplinks' P routers sit 8 far PEs, 10.255.0.<u+1>, reached over a
//! labelled route (the P router's label 200 + u for its PE). Each VRF holds:
//! - its CE's routes 10.1.k.0/24 (5%: static routes towards the CE; the seed's CEs spoke OSPF);
//! - VPN routes 11.x.y.0/24 (95%), route i from far PE i mod 8 with that PE's RD for the VRF
//!   (`10.255.0.<u+1>:<v+1>`), route target 65000:<v+1> and VPN label 100,000 + 8v + u. They
//!   are handed to the router's L3VPN route source as GoBGP's watch hands them, or with
//!   `--through-gobgp` sent over BGP from a far GoBGP to the router's own ([`crate::gobgp`]);
//!   either way each is read back from its VRF ([`crate::l3vpn`]).
//!
//! Traffic: each CE sends, on each of its port's 8 sub-interfaces, to the VPN routes of every
//! far PE (out of that PE's uplink with the transport label over the VPN label); each uplink
//! sends to each access port's CE routes under the VRFs' labels (1000 + v, which pop into the
//! VRF: the P router popped its own, penultimate hop).

use std::sync::Arc;

use control::config::l3vpn::VpnId;
use control::config::Prefix;
use control::l3vpn::VpnRoute;

use super::*;
use crate::load::FrameSizes;
use crate::stream::{Field, FieldKind, Mpls, Vary};

const ACCESS: usize = 24;
const UPLINKS: usize = 8;
const SUBIFS: usize = 8;
const FIRST_VLAN: usize = 100;
const VRF_LABEL: u32 = 1000;
const PE_VPN_LABEL: u32 = 100_000;
const TRANSPORT_LABEL: u32 = 200;
/// Per VRF at the seed's scale: 230,400 / 192 = 1,200 routes, 95% VPN.
const VPN_PER_VRF: usize = 1140;
const CE_PER_VRF: usize = 60;

fn pe(u: usize) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(10, 255, 0, u as u8 + 1)
}

/// VPN route i's prefix (the same in every VRF): 11.(i / 256).(i % 256).0/24.
fn vpn_net(i: usize) -> u32 {
    0x0b00_0000 | (i as u32) << 8
}

/// CE route k's prefix: 10.1.k.0/24.
fn ce_net(k: usize) -> u32 {
    0x0a01_0000 | (k as u32) << 8
}

pub(super) fn l3vpn(o: &ScenarioOpts) -> Scenario {
    let vrfs = ACCESS * SUBIFS;
    let vpn_per_vrf = ((VPN_PER_VRF as f64 * o.scale).round() as usize).clamp(UPLINKS, 255 * 256);
    let ce_per_vrf = ((CE_PER_VRF as f64 * o.scale).round() as usize).clamp(1, 255);
    let ports = access_and_uplinks(ACCESS, UPLINKS);
    let config_yaml = config_text(&ports, ce_per_vrf, o.workers);

    let mut vpn_routes = Vec::with_capacity(vrfs * vpn_per_vrf);
    for v in 0..vrfs {
        for i in 0..vpn_per_vrf {
            let u = i % UPLINKS;
            vpn_routes.push(VpnRoute {
                rd: VpnId::Ip(pe(u), v as u16 + 1),
                prefix: Prefix::V4(vpn_net(i), 24),
                label: PE_VPN_LABEL + (v * UPLINKS + u) as u32,
                next_hop: pe(u).into(),
                rts: vec![VpnId::As2(65000, v as u32 + 1)],
                peer: std::net::Ipv4Addr::from(if_v4(ACCESS + u) | 2).into(),
            });
        }
    }

    let mut streams = Vec::new();
    let vlans: Arc<[u128]> = (0..SUBIFS).map(|j| (FIRST_VLAN + j) as u128).collect();
    let ce_dsts: Arc<[u128]> = (0..ce_per_vrf).map(|k| (ce_net(k) | 1) as u128).collect();
    for a in 0..ACCESS {
        for u in 0..UPLINKS {
            let up = ACCESS + u;
            // CE to core: on each sub-interface, to far PE u's VPN routes.
            let mut s = base_stream(format!("a{a}>u{u}"), a, up);
            s.vlan = Some(FIRST_VLAN as u16);
            s.l3 = L3::V4 {
                src: v4(ce_net(0) | 5),
                dst: v4(vpn_net(u) | 1),
            };
            s.fields.push(Field {
                kind: FieldKind::VlanId,
                vary: Vary::List(vlans.clone()),
                nested: false,
            });
            s.fields.push(Field {
                kind: FieldKind::DstIp,
                vary: Vary::List(
                    (u..vpn_per_vrf)
                        .step_by(UPLINKS)
                        .map(|i| (vpn_net(i) | 1) as u128)
                        .collect(),
                ),
                nested: false,
            });
            // Core to CE: under the port's VRFs' labels, to their CE routes.
            let mut back = base_stream(format!("u{u}>a{a}"), up, a);
            back.l3 = L3::V4 {
                src: v4(vpn_net(u) | 1),
                dst: v4(ce_net(0) | 1),
            };
            back.mpls = Some(Mpls {
                labels: vec![VRF_LABEL + (a * SUBIFS) as u32],
                pw: None,
            });
            back.fields.push(Field {
                kind: FieldKind::Label,
                vary: Vary::List(
                    (0..SUBIFS)
                        .map(|j| (VRF_LABEL + (a * SUBIFS + j) as u32) as u128)
                        .collect(),
                ),
                nested: false,
            });
            back.fields.push(Field {
                kind: FieldKind::DstIp,
                vary: Vary::List(ce_dsts.clone()),
                nested: false,
            });
            streams.push(s);
            streams.push(back);
        }
    }
    let load_scale = backbone_load_scale(ACCESS, UPLINKS);
    // The CE's frame; towards the core 4 bytes longer (its tag gone, two labels on). The
    // uplinks' MTU (9,198: the most a 9,216-byte frame allows an interface) counts the labels,
    // so the largest CE frame is 9,198 - 8 + 18 = 9,208.
    let largest = 9208;
    // The smallest CE frame is 68 bytes: 64 and the tag (a tagged 64-byte frame cannot hold
    // the tester's headers and signature), as the issue reads the report's 64 B row.
    let sizes: Vec<u16> = vec![68, 128, 256, 512, 1024, 1280, 1518, 2034, 4068, largest];
    let seed_fps: [f64; 10] = [
        12_488_251.0,
        8_909_819.0,
        5_649_236.0,
        3_238_209.0,
        1_696_991.0,
        1_369_027.0,
        1_141_717.0,
        864_694.0,
        427_509.0,
        190_601.0,
    ];
    let flows = streams.iter().map(|s| s.flows()).sum();
    let total = vrfs * (vpn_per_vrf + ce_per_vrf);
    Scenario {
        id: "ME-6",
        title: format!(
            "MPLS VPN: {vrfs} VRFs (8 VLAN sub-interfaces on each of 24 access ports), {total} \
             routes ({} VPN routes from 8 far PEs, {} CE routes); backbone pattern both ways",
            vrfs * vpn_per_vrf,
            vrfs * ce_per_vrf
        ),
        seed_title: "Cisco ME 6524, table 6: MPLS VPN scalability and throughput (192 VRFs, \
                     230,400 routes, 300 s; with the 10,000-line ACL, QoS re-marking and NetFlow)",
        config_yaml,
        route_lines: Vec::new(),
        files: vec![],
        ports,
        load_scale,
        streams,
        sizes: sizes.iter().map(|&s| FrameSizes::Fixed(s)).collect(),
        procedure: Procedure::ThroughputPerSize,
        loss_tolerance: 0.0,
        seed_seconds: 300.0,
        seed: seed_per_size(&sizes, &seed_fps, |s| match s {
            68 => "at 64 B".into(),
            s if s == largest => "at 9,216 B".into(),
            _ => String::new(),
        }),
        notes: vec![
            "Frame sizes are the CE's (tagged) frames; towards the core they are 4 bytes longer \
             (tag off, transport and VPN labels on), from the core the same (one label, no tag)."
                .into(),
            "The largest row is 9,208 B, not the seed's 9,216: the IP packet under two labels \
             must fit the uplinks' MTU of 9,198 (the most an interface takes: 9,216-byte frames \
             with a VLAN tag)."
                .into(),
            "CE routes are static (the seed's CEs spoke OSPF).".into(),
        ],
        flows,
        vpn: VpnPlan {
            routes: vpn_routes,
            // Each VRF's CE routes and its connected subnet towards the CE.
            exports: vrfs * (ce_per_vrf + 1),
        },
    }
}

fn config_text(ports: &[(String, f64)], ce_per_vrf: usize, workers: usize) -> String {
    let vrfs = ACCESS * SUBIFS;
    let mut y = router_line(workers);
    y += "vrfs: [";
    y += &(0..vrfs)
        .map(|v| format!("v{v}"))
        .collect::<Vec<_>>()
        .join(", ");
    y += "]\n";
    y += &mem_ports(ports);
    y += "interfaces:\n";
    for (i, (n, _)) in ports.iter().enumerate() {
        let mac = MacAddr(router_mac(i));
        if i < ACCESS {
            y += &format!("  - {{ name: {n}, port: {n}, mac: \"{mac}\", mtu: 9198 }}\n");
            for j in 0..SUBIFS {
                let vl = FIRST_VLAN + j;
                let v = i * SUBIFS + j;
                y += &format!(
                    "  - {{ name: {n}.{vl}, port: {n}, vlan: {vl}, mac: \"{mac}\", mtu: 9198, \
                     vrf: v{v}, ipv4: [10.0.0.1/24] }}\n"
                );
            }
        } else {
            let a = std::net::Ipv4Addr::from(if_v4(i) | 1);
            y += &format!(
                "  - {{ name: {n}, port: {n}, mac: \"{mac}\", mtu: 9198, ipv4: [{a}/24] }}\n"
            );
        }
    }
    y += "neighbors:\n";
    for (i, (n, _)) in ports.iter().enumerate() {
        let mac = MacAddr(host_mac(i));
        if i < ACCESS {
            for j in 0..SUBIFS {
                let vl = FIRST_VLAN + j;
                y += &format!("  - {{ interface: {n}.{vl}, ip: 10.0.0.2, mac: \"{mac}\" }}\n");
            }
        } else {
            let ip = std::net::Ipv4Addr::from(if_v4(i) | 2);
            y += &format!("  - {{ interface: {n}, ip: {ip}, mac: \"{mac}\" }}\n");
        }
    }
    y += "routes:\n";
    for u in 0..UPLINKS {
        let p = std::net::Ipv4Addr::from(if_v4(ACCESS + u) | 2);
        y += &format!(
            "  - {{ prefix: {}/32, via: {p}, labels: [{}] }}\n",
            pe(u),
            TRANSPORT_LABEL + u as u32
        );
    }
    for v in 0..vrfs {
        for k in 0..ce_per_vrf {
            y += &format!(
                "  - {{ prefix: {}/24, via: 10.0.0.2, vrf: v{v} }}\n",
                std::net::Ipv4Addr::from(ce_net(k))
            );
        }
    }
    y += "mpls:\n  interfaces: [";
    y += &(0..UPLINKS)
        .map(|u| format!("u{u}"))
        .collect::<Vec<_>>()
        .join(", ");
    y += "]\n";
    // The router's own next hop for what it exports: its first uplink's address.
    y += &format!(
        "l3vpn:\n  bgp: {{ api: \"127.0.0.1:50051\", next-hop: {} }}\n  vrfs:\n",
        std::net::Ipv4Addr::from(if_v4(ACCESS) | 1)
    );
    for v in 0..vrfs {
        y += &format!(
            "    - {{ name: v{v}, rd: \"65000:{0}\", import: [\"65000:{0}\"], export: \
             [\"65000:{0}\"], label: {1} }}\n",
            v + 1,
            VRF_LABEL + v as u32
        );
    }
    y
}
