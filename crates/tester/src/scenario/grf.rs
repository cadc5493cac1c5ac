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

/// The GRF 1600 tests: 16 modules (ports at OC-12's 622 Mbit/s nominal), stream k from port k
/// to port k+1; a stream passes when it loses at most 2%.
pub(super) fn grf(o: &ScenarioOpts, kind: Grf) -> Scenario {
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
        files: vec![],
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
