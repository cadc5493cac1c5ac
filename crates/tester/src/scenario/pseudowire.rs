//! The Cisco ME 6524's pseudowire tests: ME-3 (type 4, VLAN mode: 128 VLAN sub-interfaces on each
//! of 24 access ports, 3,072 pseudowires), ME-4 (type 5, port mode: 24 pseudowires, untagged) and
//! ME-5 (100 pseudowires on a protected LSP, its primary's cable cut: [`protected`]).
//!
//! The router is the uPE of the report's figures 2 and 3: access ports a0..a23 face the CEs, the
//! uplinks u0..u7 face the emulated P router (the tester's host on each uplink), behind which sit
//! eight emulated PEs, 172.16.u.1, one per uplink. Pseudowire k (access port a, VLAN index j) goes
//! to the PE of uplink j mod 8, so each uplink carries 384 of ME-3's pseudowires (3 of ME-4's).
//! Labels are static here: local label 1000 + k, the PE's label 100000 + k; the pseudowires name
//! no next hop and take the route to their PE, labelled with the P router's label for it
//! (transport) 200 + u, as LDP labels such a route. LDP signals pseudowires and labels routes
//! against FRR's ldpd in the system tests; the tester has no LDP speaker to emulate 8 PEs with.
//!
//! Traffic is the backbone pattern of ME-1, both ways: each CE sends its pseudowires' frames
//! (tagged for type 4) into its access port, and each uplink sends frames from the PEs, labelled
//! with the router's pseudowire labels (the P router popped the transport label: penultimate hop),
//! with the control word, carrying the far CE's frame. The frame size of a row is the CE's frame;
//! the uplinks' frames are 22 bytes longer (Ethernet, label, control word), those the router sends
//! to the uplinks 26 (the transport label too).

use std::sync::Arc;

use super::*;
use crate::load::FrameSizes;
use crate::stream::{Field, FieldKind, Mpls, PwFrame, Vary};

const ACCESS: usize = 24;
const UPLINKS: usize = 8;
const FIRST_VLAN: u16 = 100;
const LOCAL_LABEL: u32 = 1000;
const REMOTE_LABEL: u32 = 100_000;
const TRANSPORT_LABEL: u32 = 200;

/// The far side's CE behind PE `u`: the source of frames to the access ports, the destination
/// of theirs.
fn far_ce_mac(u: usize) -> [u8; 6] {
    [2, 0xce, 0, 0, u as u8, 2]
}

/// The PE behind uplink `u`: the pseudowires' peer.
fn pe(u: usize) -> String {
    format!("172.16.{u}.1")
}

/// ME-3 (`vlan_mode`) or ME-4.
pub(super) fn pseudowires(o: &ScenarioOpts, vlan_mode: bool) -> Scenario {
    // Per access port: ME-3's 128 VLANs (16 to each uplink), scaled down for CI but at least one
    // per uplink; ME-4's one port-mode circuit.
    let per_port = if vlan_mode {
        let want = (128.0 * o.scale).round() as usize;
        (want.div_ceil(UPLINKS) * UPLINKS).clamp(UPLINKS, 128)
    } else {
        1
    };
    let ports = access_and_uplinks(ACCESS, UPLINKS);
    // Pseudowire k = a * per_port + j: (access port, VLAN or None, uplink).
    let pws: Vec<(usize, Option<u16>, usize)> = (0..ACCESS)
        .flat_map(|a| {
            (0..per_port).map(move |j| {
                let vlan = vlan_mode.then_some(FIRST_VLAN + j as u16);
                let u = if vlan_mode { j % UPLINKS } else { a % UPLINKS };
                (a, vlan, u)
            })
        })
        .collect();
    let config_yaml = config_text(&ports, &pws, o.workers);

    let mut streams = Vec::new();
    for a in 0..ACCESS {
        for u in 0..UPLINKS {
            let mine: Vec<usize> = (0..pws.len())
                .filter(|&k| pws[k].0 == a && pws[k].2 == u)
                .collect();
            let Some(&first) = mine.first() else {
                continue;
            };
            let up = ACCESS + u;
            let vlan = pws[first].1;
            let ip = L3::V4 {
                src: v4(0x0a00_0002 | (a as u32) << 16),
                dst: v4(0x0a00_0002 | (up as u32) << 16),
            };
            let vlans: Arc<[u128]> = mine
                .iter()
                .map(|&k| pws[k].1.unwrap_or(0) as u128)
                .collect();
            // CE to core: the CE's frames (to the far CE) into its circuits.
            let mut s = base_stream(format!("a{a}>u{u}"), a, up);
            s.dst_mac = far_ce_mac(u);
            s.vlan = vlan;
            s.l3 = ip;
            if vlan_mode {
                s.fields.push(Field {
                    kind: FieldKind::VlanId,
                    vary: Vary::List(vlans.clone()),
                    nested: false,
                });
            }
            // Core to CE: the PE's frames under the router's pseudowire labels.
            let mut back = base_stream(format!("u{u}>a{a}"), up, a);
            back.l3 = match ip {
                L3::V4 { src, dst } => L3::V4 { src: dst, dst: src },
                other => other,
            };
            back.mpls = Some(Mpls {
                labels: vec![LOCAL_LABEL + first as u32],
                pw: Some(PwFrame {
                    control_word: true,
                    dst_mac: host_mac(a),
                    src_mac: far_ce_mac(u),
                    vlan,
                }),
            });
            back.fields.push(Field {
                kind: FieldKind::Label,
                vary: Vary::List(
                    mine.iter()
                        .map(|&k| (LOCAL_LABEL + k as u32) as u128)
                        .collect(),
                ),
                nested: false,
            });
            if vlan_mode {
                back.fields.push(Field {
                    kind: FieldKind::VlanId,
                    vary: Vary::List(vlans),
                    nested: false,
                });
            }
            streams.push(s);
            streams.push(back);
        }
    }
    // The backbone pattern: the 24 access ports share the 8 uplinks' capacity, as in ME-1.
    let load_scale = backbone_load_scale(ACCESS, UPLINKS);
    // The largest CE frame that fits the core side: 9,216-byte frames there (the buffers' and
    // ports' limit) less 26 bytes of Ethernet, two labels and the control word.
    let largest = 9190;
    let first = if vlan_mode { 68 } else { 64 };
    let sizes: Vec<u16> = vec![first, 128, 256, 512, 1024, 1280, 1518, 2034, 4068, largest];
    let seed_fps: [f64; 10] = [
        if vlan_mode {
            11_136_538.0
        } else {
            11_429_145.0
        },
        9_528_185.0,
        5_887_980.0,
        3_205_048.0,
        1_700_212.0,
        1_371_135.0,
        1_143_183.0,
        865_532.0,
        427_715.0,
        190_641.0,
    ];
    let seed_largest = if vlan_mode { "9,212" } else { "9,216" };
    let flows = streams.iter().map(|s| s.flows()).sum();
    let npw = pws.len();
    Scenario {
        id: if vlan_mode { "ME-3" } else { "ME-4" },
        title: if vlan_mode {
            format!(
                "Type 4 (VLAN) EoMPLS pseudowires: {npw} ({per_port} VLAN sub-interfaces on each \
                 of 24 access ports, {} per uplink), control word, static labels; backbone \
                 pattern both ways",
                npw / UPLINKS
            )
        } else {
            format!(
                "Type 5 (port) EoMPLS pseudowires: {npw}, untagged, control word, static labels; \
                 backbone pattern both ways"
            )
        },
        seed_title: if vlan_mode {
            "Cisco ME 6524, table 3: type 4 VLAN-mode pseudowire scalability and throughput \
             (3,072 pseudowires, 300 s; with the 10,000-line ACL, QoS re-marking and NetFlow)"
        } else {
            "Cisco ME 6524, table 4: type 5 port-mode pseudowire scalability and throughput \
             (24 pseudowires, 300 s; with the 10,000-line ACL, QoS re-marking and NetFlow)"
        },
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
        seed: seed_per_size(&sizes, &seed_fps, |s| {
            if s == largest {
                format!("at {seed_largest} B")
            } else {
                String::new()
            }
        }),
        notes: vec![
            "Frame sizes are the CE's frames; on the uplinks they are 22 bytes longer from the \
             core (Ethernet, pseudowire label, control word) and 26 towards it (the transport \
             label too). The seed offered 80-byte frames from its emulated P router, which cannot \
             hold a 68-byte customer frame and a label; the tester sends what the CE frame needs."
                .into(),
            format!(
                "The largest row is {largest} B, not the seed's {seed_largest}: with the \
                 control word and two labels the core's frame would pass the 9,216-byte frame \
                 limit of the router's buffers and ports."
            ),
            "Labels are static (the tester emulates no LDP speaker for the 8 PEs); Linerate's LDP \
             signals the same pseudowires against FRR's ldpd in the system tests, and `linerate \
             bench ldp` signals 3,072 of them."
                .into(),
            format!(
                "The seed ran with its 10,000-line ACL, QoS re-marking and NetFlow on; ME-{n} \
                 measures the pseudowires alone, ME-{n}S the same with the services off, then on.",
                n = if vlan_mode { 3 } else { 4 }
            ),
        ],
        flows,
        vpn: VpnPlan::default(),
    }
}

/// ME-5's pseudowires and rate: 100 on one LSP, 100,000 frames/s over all of them.
const ME5_PWS: usize = 100;
const ME5_FPS: f64 = 100_000.0;
const ME5_FRAME: u16 = 68;

/// ME-5: R1 (the router) has one access port with 100 VLAN sub-interfaces, each cross-connected
/// to a pseudowire to R2 over LSP `to-r2`: tunnel 1 straight to R2 out of `primary` (one hop: no
/// transport label, R2 being the next hop), tunnel 2 through R3 out of `backup` (R3's label 500
/// for it), pre-installed. The CEs' frames go down every pseudowire at 100,000 frames/s, and the
/// primary's cable is cut mid-trial: frames lost over the rate is the convergence time, as the
/// seed derived it. RSVP-TE is not run (no open peer here): the LSPs are configured paths; what
/// is measured is the protection.
pub(super) fn protected(o: &ScenarioOpts) -> Scenario {
    let ports: Vec<(String, f64)> = ["access", "primary", "backup"]
        .iter()
        .map(|p| (p.to_string(), 1e9))
        .collect();
    let mut y = router_line(o.workers);
    y += &mem_ports(&ports);
    y += "interfaces:\n";
    let mac0 = MacAddr(router_mac(0));
    y += &format!("  - {{ name: access, port: access, mac: \"{mac0}\", mtu: 9198 }}\n");
    for k in 0..ME5_PWS {
        let v = FIRST_VLAN as usize + k;
        y += &format!(
            "  - {{ name: access.{v}, port: access, vlan: {v}, mac: \"{mac0}\", mtu: 9198 }}\n"
        );
    }
    for i in 1..3 {
        y += &format!(
            "  - {{ name: {n}, port: {n}, mac: \"{}\", mtu: 9198, ipv4: [{}/24] }}\n",
            MacAddr(router_mac(i)),
            std::net::Ipv4Addr::from(if_v4(i) | 1),
            n = ports[i].0
        );
    }
    y += "neighbors:\n";
    for i in 1..3 {
        y += &format!(
            "  - {{ interface: {}, ip: {}, mac: \"{}\" }}\n",
            ports[i].0,
            std::net::Ipv4Addr::from(if_v4(i) | 2),
            MacAddr(host_mac(i))
        );
    }
    y += &format!(
        "mpls:\n  interfaces: [primary, backup]\n  lsps:\n    - {{ name: to-r2, primary: {{ via: {} }}, backup: {{ via: {}, labels: [500] }} }}\n  pseudowires:\n",
        std::net::Ipv4Addr::from(if_v4(1) | 2),
        std::net::Ipv4Addr::from(if_v4(2) | 2)
    );
    for k in 0..ME5_PWS {
        y += &format!(
            "    - {{ name: pw{k}, interface: access.{}, peer: 172.16.0.1, vc-id: {}, \
             local-label: {}, remote-label: {}, lsp: to-r2, control-word: true }}\n",
            FIRST_VLAN as usize + k,
            k + 1,
            LOCAL_LABEL + k as u32,
            REMOTE_LABEL + k as u32
        );
    }
    // One stream: the CEs' frames, VLAN by VLAN, to R2 (over the primary, or the backup).
    let mut s = base_stream("ces>r2".into(), 0, 1);
    s.dst_mac = far_ce_mac(0);
    s.vlan = Some(FIRST_VLAN);
    s.fields.push(Field {
        kind: FieldKind::VlanId,
        vary: Vary::List(
            (0..ME5_PWS)
                .map(|k| (FIRST_VLAN as usize + k) as u128)
                .collect(),
        ),
        nested: false,
    });
    let streams = vec![s];
    let plan = crate::failover::FailoverPlan {
        access: 0,
        primary: 1,
        backup: 2,
        primary_port: "primary".into(),
        protected: crate::failover::Protected::Lsp {
            lsp: "to-r2".into(),
            pseudowires: ME5_PWS as u32,
        },
        fps: ME5_FPS,
        line_fps: 1e9 / ((f64::from(ME5_FRAME) + 20.0) * 8.0),
        cut_at: 0.4,
        seed_ms: 58.01,
    };
    let flows = streams.iter().map(|s| s.flows()).sum();
    Scenario {
        id: "ME-5",
        title: format!(
            "Pseudowire failover: {ME5_PWS} type 4 pseudowires on an LSP with a pre-installed \
             backup through another port, {ME5_FRAME} B at 100,000 fps, the primary's cable cut"
        ),
        seed_title: "Cisco ME 6524, table 5: pseudowire failover and convergence time (100 \
                     pseudowires on RSVP-TE tunnel 1 with fast reroute to tunnel 2 through R3, \
                     100,000 fps, the R1-R2 link disconnected): 58.01 ms",
        config_yaml: y,
        route_lines: vec![],
        files: vec![],
        load_scale: vec![1.0; ports.len()],
        ports,
        streams,
        sizes: vec![FrameSizes::Fixed(ME5_FRAME)],
        procedure: Procedure::Failover(plan),
        loss_tolerance: 0.0,
        seed_seconds: 0.0,
        seed: vec![SeedRow {
            key: ME5_FRAME.to_string(),
            fps: None,
            note: "58.01 ms convergence (100 pseudowires, 100,000 fps)".into(),
        }],
        notes: vec![
            "The LSPs are configured paths (`mpls.lsps`): RSVP-TE has no open peer to signal \
             them with here. The backup is pre-installed as the path object's backup, so the \
             cut moves every pseudowire at once: one path changes, no pseudowire is rewritten."
                .into(),
            "Embedded mode: the cable is the tester's (frames the router sends to the cut port \
             are lost) and the link-down is the API's `port link-down`, as a link monitor \
             reports it; detection is that call, so the figure is the wait for the call's thread \
             to get a core plus the switchover (both in the table)."
                .into(),
        ],
        flows,
        vpn: VpnPlan::default(),
    }
}

/// The uPE: access ports (with their VLAN sub-interfaces for type 4), uplinks with addresses and
/// MPLS, each uplink's P router as a static neighbour, the pseudowires.
fn config_text(
    ports: &[(String, f64)],
    pws: &[(usize, Option<u16>, usize)],
    workers: usize,
) -> String {
    let mut y = router_line(workers);
    y += &mem_ports(ports);
    y += "interfaces:\n";
    let vlan_mode = pws.iter().any(|p| p.1.is_some());
    for (i, (n, _)) in ports.iter().enumerate() {
        let mac = MacAddr(router_mac(i));
        if i < ACCESS {
            // The port itself: type 5's attachment circuit; under type 4 the parent of the
            // sub-interfaces.
            y += &format!("  - {{ name: {n}, port: {n}, mac: \"{mac}\", mtu: 9198 }}\n");
            if vlan_mode {
                for &(_, v, _) in pws.iter().filter(|p| p.0 == i) {
                    let v = v.unwrap_or_default();
                    y += &format!(
                        "  - {{ name: {n}.{v}, port: {n}, vlan: {v}, mac: \"{mac}\", mtu: 9198 }}\n"
                    );
                }
            }
        } else {
            let a = std::net::Ipv4Addr::from(if_v4(i) | 1);
            y += &format!(
                "  - {{ name: {n}, port: {n}, mac: \"{mac}\", mtu: 9198, ipv4: [{a}/24] }}\n"
            );
        }
    }
    y += "neighbors:\n";
    for (i, (n, _)) in ports.iter().enumerate().skip(ACCESS) {
        y += &format!(
            "  - {{ interface: {n}, ip: {}, mac: \"{}\" }}\n",
            std::net::Ipv4Addr::from(if_v4(i) | 2),
            MacAddr(host_mac(i))
        );
    }
    // Each PE is reached through its uplink's P router, under the P router's label for it (a
    // labelled route, as LDP makes one): the pseudowires take their way from it.
    y += "routes:\n";
    for u in 0..UPLINKS {
        y += &format!(
            "  - {{ prefix: 172.16.{u}.0/24, via: {}, labels: [{}] }}\n",
            std::net::Ipv4Addr::from(if_v4(ACCESS + u) | 2),
            TRANSPORT_LABEL + u as u32
        );
    }
    y += "mpls:\n  interfaces: [";
    y += &(0..UPLINKS)
        .map(|u| format!("u{u}"))
        .collect::<Vec<_>>()
        .join(", ");
    y += "]\n  pseudowires:\n";
    for (k, &(a, v, u)) in pws.iter().enumerate() {
        let ifname = match v {
            Some(v) => format!("a{a}.{v}"),
            None => format!("a{a}"),
        };
        y += &format!(
            "    - {{ name: pw{k}, interface: {ifname}, peer: {}, vc-id: {}, local-label: {}, \
             remote-label: {}, control-word: true }}\n",
            pe(u),
            k + 1,
            LOCAL_LABEL + k as u32,
            REMOTE_LABEL + k as u32,
        );
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_scale_has_the_reports_pseudowires() {
        let me3 = pseudowires(&ScenarioOpts::default(), true);
        assert_eq!(me3.config_yaml.matches("local-label:").count(), 3072);
        assert_eq!(me3.config_yaml.matches(", vlan: ").count(), 3072);
        // 384 pseudowires per uplink's PE, which the route labelled 200 reaches.
        assert_eq!(me3.config_yaml.matches("peer: 172.16.0.1,").count(), 384);
        assert_eq!(me3.config_yaml.matches("labels: [200] }").count(), 1);
        assert_eq!(me3.flows, 2 * 3072);
        let me4 = pseudowires(&ScenarioOpts::default(), false);
        assert_eq!(me4.config_yaml.matches("local-label:").count(), 24);
        assert_eq!(me4.streams.len(), 2 * 24);
        assert!(!me4.config_yaml.contains("vlan:"));
    }
}
