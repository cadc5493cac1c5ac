//! The Cisco XR 12000 tests: XR-3 (IPv4) and XR-4 (IPv4 and IPv6).

use super::*;
use crate::load::FrameSizes;
use crate::stream::{Field, FieldKind, Vary, L3};

/// The XR 12000 tests (XR-3, XR-4): four logical routers (VRFs here), LR1 and LR2 with two
/// 10 GbE ports each, LR3 and LR4 with one 10 GbE and ten 1 GbE ports each; streams in pairs
/// inside each LR, full-mesh flows between the ports' flat networks.
pub(super) fn xr(o: &ScenarioOpts, dual: bool) -> Scenario {
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
        files: vec![],
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
        vpn: VpnPlan::default(),
    }
}
