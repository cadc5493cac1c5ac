//! The Ascend GRF 1600 tests: GR-1, GR-2 and GR-3.

use fib::gen::{self, Profile, Spec};

use super::*;
use crate::load::FrameSizes;
use crate::stream::{Field, FieldKind, Vary, L3};

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Grf {
    Scaling,
    Large,
    ClassC,
}

/// The GRF 1600 tests: 16 modules (ATM OC-12 ports, each with one LLC/SNAP PVC, 0/32; or
/// Ethernet ports at OC-12's 622 Mbit/s with `grf_ethernet`), stream k from port k to port
/// k+1; a stream passes when it loses at most 2%.
pub(super) fn grf(o: &ScenarioOpts, kind: Grf) -> Scenario {
    const N: usize = 16;
    let atm = !o.grf_ethernet;
    // The seed's sizes are IP packets: a test frame carries an IP packet 18 bytes shorter (its
    // Ethernet header and FCS), which on ATM is replaced by the PVC's LLC/SNAP header.
    let ip_size = |ip: u16| if atm { ip + 18 } else { ip };
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
            vec![FrameSizes::Fixed(ip_size(64))],
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
            vec![FrameSizes::Fixed(ip_size(64))],
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
            vec![FrameSizes::Fixed(ip_size(1518))],
            Procedure::StreamScaling {
                counts: o.counts.clone().unwrap_or_else(|| vec![1, max]),
            },
            vec![
                seed_row("1", Some(529.54e6 / (1518.0 * 8.0)), "529.54 Mbit/s"),
                seed_row("16", Some(8_324.86e6 / (1518.0 * 8.0)), "8,324.86 Mbit/s"),
            ],
        ),
    };
    let medium = if atm {
        "16 ATM OC-12 ports (AAL5, LLC/SNAP PVC 0/32 each)"
    } else {
        "16 Ethernet ports at 622 Mbit/s nominal"
    };
    let config_yaml = config(&ports, &|_| "default".into(), &[], o.workers, false);
    let mut notes = if atm {
        vec![
            "Each module is an ATM OC-12c port carrying cells (the router's AAL5 SAR on its \
             queues); the tester sends each test packet as an RFC 2684 LLC/SNAP PDU on PVC 0/32 \
             and reassembles what comes back. 100% of nominal is every cell slot of the SONET \
             payload (1,412,830 cells/s): the seed's \"usable OC-12 bandwidth\"."
                .into(),
            format!(
                "Sizes are the seed's IP packets plus 18 (the test frames' Ethernet header and FCS, \
                 which the ATM ports replace with 8 bytes of LLC/SNAP): {} B frames are {}-byte \
                 IP packets in {} cells. Mbit/s counts the frame bits; the seed counted IP bits, \
                 so compare packets/s.",
                ip_size(if kind == Grf::Large { 1518 } else { 64 }),
                if kind == Grf::Large { 1518 } else { 64 },
                crate::atm::cells_per_frame(f64::from(ip_size(if kind == Grf::Large { 1518 } else { 64 })))
            ),
        ]
    } else {
        vec![
            "The seed's interfaces were ATM OC-12 (AAL5, RFC 2684); these are Ethernet ports with \
             OC-12's nominal rate (the stand-in). Mbit/s counts frame bits, as the report did."
                .into(),
        ]
    };
    notes.push(
        "A stream passes when its output is at most 2% below its input (the report's rule).".into(),
    );
    Scenario {
        id,
        title: format!("{title}; {medium}, {} routes", lines.len()),
        seed_title,
        config_yaml: if atm {
            atm_config(&config_yaml)
        } else {
            config_yaml
        },
        route_lines: lines,
        files: vec![],
        load_scale: vec![1.0; N],
        ports,
        streams,
        sizes,
        procedure,
        loss_tolerance: 0.02,
        seed_seconds: 60.0,
        seed,
        notes,
        flows,
        vpn: VpnPlan::default(),
    }
}

/// The scenario's config with every port an ATM OC-12 port and every interface its PVC 0/32
/// (LLC/SNAP, UBR): a PVC needs no MAC and no neighbour entry.
fn atm_config(yaml: &str) -> String {
    let mut out = String::with_capacity(yaml.len());
    let mut section = "";
    for line in yaml.lines() {
        if !line.starts_with(' ') {
            section = line.trim_end_matches(':');
        }
        match section {
            "ports" if line.contains("driver: mem }") => {
                out += &line.replace("driver: mem }", "driver: mem, media: atm }");
            }
            "interfaces" if line.contains("mac: \"") => {
                let start = line.find("mac: \"").expect("found");
                let end = start + line[start..].find("\", ").expect("a MAC's end") + 3;
                let mut l = line.to_string();
                l.replace_range(start..end, "atm: { vpi: 0, vci: 32 }, ");
                out += &l;
            }
            "neighbors" if line.starts_with("  -") => continue,
            _ => out += line,
        }
        out.push('\n');
    }
    out
}

fn seed_row(key: &str, fps: Option<f64>, note: &str) -> SeedRow {
    SeedRow {
        key: key.into(),
        fps,
        note: note.into(),
    }
}
