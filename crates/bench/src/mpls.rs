//! Label switching at its rate (`bench mpls`): each MPLS operation beside plain IPv4 forwarding
//! on the same router, runs alternated round by round, each worker replaying frames to itself.
//!
//! The router: p0 is where every frame arrives (the replay feeds one port): untagged IPv4 from
//! 192.0.2.2, labelled frames (it takes MPLS), tagged frames on its VLAN sub-interfaces 1..N
//! (pseudowire attachment circuits), VLAN 4000 a VRF's CE; p1 is the core (MPLS, its
//! neighbour 198.51.100.2). Modes, each with N entries (labels, routes or pseudowires) and the
//! traffic spread over them in a random order:
//! - `ip`: IPv4 from p0 to N /24 routes out of p1 (the baseline);
//! - `swap`: labelled frames into p0, each label swapped to another, out of p1;
//! - `pop`: the same labels popped (penultimate hop): IPv4 out of p1;
//! - `push`: IPv4 from p0 to N labelled /24 routes: one label pushed, out of p1;
//! - `vpn`: labelled frames into p0, each label popped into the VRF and routed to its CE;
//! - `pw-encap`: tagged frames into p0's VLAN sub-interfaces, onto their pseudowires (control
//!   word, one transport label): out of p1;
//! - `pw-decap`: pseudowire frames into p0, out of p0 on their attachment circuits.
//!
//! Frame sizes are the IPv4 packet's with an untagged Ethernet header (64 B: the tester's
//! smallest frame); labelled and tagged frames are longer by their headers, as on a wire.

use std::fmt::Write as _;
use std::time::Instant;

use control::Router;
use dataplane::Pool;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::forward::{frame, replay, Opts, Result};

pub const MODES: &[&str] = &["ip", "swap", "pop", "push", "vpn", "pw-encap", "pw-decap"];

const P0_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const CORE: [u8; 6] = [2, 0, 0, 0, 1, 2];
const FIRST_LABEL: u32 = 16;
const FIRST_PW_LABEL: u32 = 100_000;

/// The router of every mode: `n` of each kind of entry.
fn config(o: &Opts, n: usize) -> String {
    let cores: Vec<String> = (0..o.workers).map(|i| i.to_string()).collect();
    let mut s = format!(
        "router: {{ workers: {w}, cores: [{c}], buffers: 65536 }}
vrfs: [vpn]
limits: {{ ipv4-routes: 65536, ipv6-routes: 1024 }}
ports:
  - {{ name: p0, driver: mem }}
  - {{ name: p1, driver: mem }}
interfaces:
  - {{ name: p0, port: p0, mac: \"02:00:00:00:00:01\", mtu: 9198, ipv4: [192.0.2.1/24] }}
  - {{ name: p1, port: p1, mac: \"02:00:00:00:01:01\", mtu: 9198, ipv4: [198.51.100.1/24] }}
  - {{ name: ce, port: p0, vlan: 4000, vrf: vpn, mac: \"02:00:00:00:00:01\", mtu: 9198, ipv4: [203.0.113.1/24] }}
",
        w = o.workers,
        c = cores.join(", ")
    );
    for v in 1..=n {
        let _ = writeln!(
            s,
            "  - {{ name: ac{v}, port: p0, vlan: {v}, mac: \"02:00:00:00:00:01\", mtu: 9198 }}"
        );
    }
    s += "neighbors:
  - { interface: p0, ip: 192.0.2.2, mac: \"02:00:00:00:00:02\" }
  - { interface: p1, ip: 198.51.100.2, mac: \"02:00:00:00:01:02\" }
  - { interface: ce, ip: 203.0.113.2, mac: \"02:00:00:00:00:03\" }
routes:
";
    for i in 0..n {
        let (a, b) = (i >> 8, i & 0xff);
        let _ = writeln!(
            s,
            "  - {{ prefix: 10.{a}.{b}.0/24, via: 198.51.100.2 }}\n  - {{ prefix: 11.{a}.{b}.0/24, via: 198.51.100.2, labels: [{}] }}\n  - {{ prefix: 12.{a}.{b}.0/24, vrf: vpn, via: 203.0.113.2 }}",
            FIRST_LABEL + 3 * n as u32 + i as u32
        );
    }
    s += "mpls:\n  interfaces: [p0, p1]\n  labels:\n";
    for i in 0..n as u32 {
        let _ = writeln!(
            s,
            "    - {{ in: {}, out: [{}], via: 198.51.100.2 }}\n    - {{ in: {}, out: pop, via: 198.51.100.2 }}\n    - {{ in: {}, lookup: vpn }}",
            FIRST_LABEL + i,
            FIRST_LABEL + 500_000 + i,
            FIRST_LABEL + n as u32 + i,
            FIRST_LABEL + 2 * n as u32 + i
        );
    }
    s += "  pseudowires:\n";
    for v in 1..=n as u32 {
        let _ = writeln!(
            s,
            "    - {{ name: pw{v}, interface: ac{v}, peer: 10.255.0.2, vc-id: {v}, local-label: {}, remote-label: {}, transport: [300], via: 198.51.100.2, control-word: true }}",
            FIRST_PW_LABEL + v,
            FIRST_PW_LABEL + 200_000 + v
        );
    }
    s
}

/// A labelled frame into p0: `labels` (TTL 64; the last at the bottom) over `payload`.
fn labelled(labels: &[u32], payload: &[u8]) -> Vec<u8> {
    let mut f = P0_MAC.to_vec();
    f.extend_from_slice(&CORE);
    f.extend_from_slice(&dataplane::mpls::ETHERTYPE_MPLS.to_be_bytes());
    for (i, &l) in labels.iter().enumerate() {
        let s = u32::from(i + 1 == labels.len());
        f.extend_from_slice(&(l << 12 | s << 8 | 64).to_be_bytes());
    }
    f.extend_from_slice(payload);
    f
}

/// A customer's frame on VLAN `vid` (any MAC: the attachment circuit takes every frame).
fn tagged(vid: u16, ip: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0xc, 0, 1, 2, 0, 0, 0xc, 0, 2, 0x81, 0];
    f.extend_from_slice(&vid.to_be_bytes());
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    f.extend_from_slice(ip);
    f
}

/// The frames of `mode`, over `n` entries in a random order.
fn templates(mode: &str, n: usize, size: usize) -> std::result::Result<Vec<Vec<u8>>, String> {
    let mut rng = SmallRng::seed_from_u64(9);
    let count = n.clamp(1, 1 << 16).max(256);
    let mut out = Vec::with_capacity(count);
    for k in 0..count {
        let i = rng.gen_range(0..n) as u32;
        let net = |first: u32| first << 24 | i << 8 | 5;
        let f = match mode {
            "ip" => frame(net(10), size, k as u16),
            "push" => frame(net(11), size, k as u16),
            "swap" | "pop" | "vpn" => {
                let (dst, label) = match mode {
                    "swap" => (net(10), FIRST_LABEL + i),
                    "pop" => (net(10), FIRST_LABEL + n as u32 + i),
                    _ => (net(12), FIRST_LABEL + 2 * n as u32 + i),
                };
                labelled(&[label], &frame(dst, size, k as u16)[14..])
            }
            "pw-encap" => tagged(i as u16 + 1, &frame(net(10), size, k as u16)[14..]),
            "pw-decap" => {
                let mut p = vec![0u8; 4];
                p.extend_from_slice(&tagged(7, &frame(net(10), size, k as u16)[14..]));
                labelled(&[FIRST_PW_LABEL + i + 1], &p)
            }
            other => {
                return Err(format!(
                    "`{other}` is not an MPLS mode ({})",
                    MODES.join(", ")
                ))
            }
        };
        out.push(f);
    }
    Ok(out)
}

/// One run of `mode` with `n` entries: the router built, then replayed by each worker, with
/// buffers from `pool` (a pool's memory is never returned, so a series of runs shares one).
pub fn run(
    o: &Opts,
    mode: &str,
    n: usize,
    dir: &std::path::Path,
    pool: &std::sync::Arc<Pool>,
) -> std::result::Result<Result, String> {
    if !(1..=4000).contains(&n) {
        return Err("MPLS runs take 1 to 4,000 entries (pseudowires are VLANs of one port)".into());
    }
    let frames = templates(mode, n, o.frame_size)?;
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let cfg_path = dir.join("mpls.yaml");
    std::fs::write(&cfg_path, config(o, n)).map_err(|e| e.to_string())?;
    let cfg = control::config::load(&cfg_path).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let router = Router::build(cfg).map_err(|e| e.to_string())?;
    let build_s = t0.elapsed().as_secs_f64();
    // Frames move within their buffers (labels pushed and popped): copied whole each time.
    replay(o, router, pool.clone(), frames, n, build_s, true)
}
