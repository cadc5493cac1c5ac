//! Quick figures for the compiled engine (ignored by default; needs a release build):
//!
//! ```text
//! cargo test --release -p classify --test timing -- --ignored --nocapture
//! ```
//!
//! For each rule set: compile time, bytes, and lookups per second through `classify` (one key at
//! a time) and `classify_batch` (256 keys a call) over a 100k-key trace; each rate is the best of
//! three short runs, timed by the thread's on-CPU time, since this VM's cores are shared and its
//! figures move 2-3x from run to run. The sets come from `classify::gen` (ClassBench-style acl and
//! fw lists, the XR-5 list and its traffic, the L2/L3/L4 mix, IPv6 acl), plus the router's
//! ME 6524 services lists rebuilt here.

use std::hint::black_box;
use std::time::Instant;

use classify::gen::{self, Family, Kind};
use classify::rule::ETHERTYPE_IPV4;
use classify::{linear, Classifier, Dim, Key, Rule, NO_MATCH};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// This thread's time on a CPU, in seconds: the VM's cores are shared with other jobs, so wall time
/// would count the time we sat descheduled.
fn cpu_time() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    match s
        .split_whitespace()
        .next()
        .and_then(|x| x.parse::<u64>().ok())
    {
        Some(ns) => ns as f64 / 1e9,
        None => 0.0,
    }
}

/// Best-of-three lookups per second of `f` over `keys` (by on-CPU time), each run about `secs`
/// of wall time.
fn rate(keys: &[Key], secs: f64, mut f: impl FnMut(&[Key]) -> u64) -> f64 {
    let mut best: f64 = 0.0;
    for _ in 0..3 {
        let t = Instant::now();
        let c = cpu_time();
        let mut n = 0u64;
        while t.elapsed().as_secs_f64() < secs {
            black_box(f(keys));
            n += keys.len() as u64;
        }
        let spent = match cpu_time() - c {
            x if x > 0.0 => x,
            _ => t.elapsed().as_secs_f64(),
        };
        best = best.max(n as f64 / spent);
    }
    best
}

fn measure(name: &str, rules: &[Rule], keys: &[Key]) {
    if let Ok(only) = std::env::var("TIMING_ONLY") {
        if !only.split(',').any(|o| name.starts_with(o)) {
            return;
        }
    }
    let t = cpu_time();
    let c = Classifier::compile(rules);
    let build = cpu_time() - t;
    for k in keys.iter().step_by(keys.len() / 500 + 1) {
        assert_eq!(c.classify(k), linear(rules, k).unwrap_or(NO_MATCH));
    }
    let single = rate(keys, 0.4, |ks| {
        ks.iter().map(|k| c.classify(k) as u64).sum()
    });
    let mut out = vec![0u32; 256];
    let batch = rate(keys, 0.4, |ks| {
        let mut s = 0u64;
        for ch in ks.chunks(256) {
            c.classify_batch(ch, &mut out[..ch.len()]);
            s += out[..ch.len()].iter().map(|&x| x as u64).sum::<u64>();
        }
        s
    });
    let matched = keys.iter().filter(|k| c.classify(k) != NO_MATCH).count();
    println!(
        "{name:<16} rules {:>6}  compile {:>7.3} s  bytes {:>11}  single {:>6.1} M/s  batch {:>6.1} M/s  matched {:.0}%",
        rules.len(),
        build,
        c.bytes(),
        single / 1e6,
        batch / 1e6,
        100.0 * matched as f64 / keys.len() as f64
    );
    if std::env::var_os("TIMING_SHAPE").is_some() {
        println!("    {c:?}");
    }
}

/// The two lists of `bench forward --services` (`bench::forward::services_config`), rebuilt rule
/// by rule from the same generator and seed, and that benchmark's traffic: the 10,001-line ACL
/// (only its final permit matches the traffic) and the 500-line QoS policy (its last line
/// matches). `crates/bench/examples/services_classify.rs` times the same lists compiled from
/// their config text.
fn services() -> (Vec<Rule>, Vec<Rule>, Vec<Key>) {
    let mut rng = SmallRng::seed_from_u64(11);
    let l4 = |r: Rule| r.with(Dim::Frag, 0, 1);
    let mut acl = Vec::new();
    for i in 0..9_999u32 {
        let a = rng.gen::<u32>() | 0x0100_0000;
        let b = rng.gen::<u32>();
        let port = 6000 + rng.gen_range(0..50_000u32);
        acl.push(match i % 10 {
            0 | 1 => {
                let mac = [
                    2,
                    (a >> 24) as u8,
                    (a >> 16) as u8,
                    (a >> 8) as u8,
                    a as u8,
                    b as u8,
                ];
                Rule::any()
                    .eth_src(mac)
                    .exact(Dim::EtherType, 0x8800 + (b >> 16) % 0x700)
            }
            2..=4 => Rule::any()
                .src_v4(a & 0xffff_ff00 | 0x6400_0000, (24 - (i % 8)) as u8)
                .dst_v4(b, (16 + (i % 17)) as u8),
            5 | 6 => l4(Rule::any().proto(17).src_v4(0xc000_0202, 32))
                .dst_ports(port as u16, port as u16),
            7 => l4(Rule::any().proto(17).src_v4(a, 28)).dst_ports(5000, 5000),
            _ => l4(Rule::any().proto(6).dst_v4(b, 24))
                .dst_ports(port as u16, (port + i % 100) as u16),
        });
    }
    // The list's last line, and the implicit deny a binding appends.
    acl.push(Rule::any());
    acl.push(Rule::any());
    let mut qos = Vec::new();
    for i in 0..499u32 {
        let port = (6000 + i * 7) as u16;
        qos.push(match i % 4 {
            0 => l4(Rule::any().proto(17)).dst_ports(port, port),
            1 => l4(Rule::any().proto(6)).dst_ports(port, port + 3),
            2 => Rule::any().dscp((1 + i % 62) as u8),
            _ => l4(Rule::any().proto(17).src_v4(10 << 24 | (i % 250) << 16, 16))
                .src_ports(port, port),
        });
    }
    qos.push(l4(Rule::any().proto(17)).dst_ports(5000, 5000));
    let keys = (0..4096u32)
        .map(|i| {
            let mut k = Key::default();
            k.set(Dim::EtherType, ETHERTYPE_IPV4);
            k.set(Dim::Src0, 0xc000_0202);
            k.set(
                Dim::Dst0,
                0x0a00_0000 | (i.wrapping_mul(2_654_435_761) >> 8),
            );
            k.set(Dim::Proto, 17);
            k.set(Dim::SrcPort, 1024 + i);
            k.set(Dim::DstPort, 5000);
            k.set(Dim::EthDstHi, 0x0200);
            k.set(Dim::EthDstLo, 1);
            k.set(Dim::EthSrcHi, 0x0200);
            k.set(Dim::EthSrcLo, 2);
            k
        })
        .collect();
    (acl, qos, keys)
}

fn sizes() -> Vec<usize> {
    std::env::var("TIMING_SIZES")
        .map(|s| s.split(',').map(|x| x.parse().unwrap()).collect())
        .unwrap_or_else(|_| vec![1000, 10_000, 50_000])
}

#[test]
#[ignore = "timing: run in release with --ignored --nocapture"]
fn figures() {
    let (acl, qos, keys) = services();
    measure("services-acl", &acl, &keys);
    measure("services-qos", &qos, &keys);
    // XR-5: 300 stream sources and destinations.
    let srcs: Vec<u32> = (0..300).map(|i| 0x0a00_0000 + i * 7 + 1).collect();
    let dsts: Vec<u32> = (0..300).map(|i| 0x1400_0000 + i * 13 + 1).collect();
    let rules = gen::xr5(5000, &srcs, &dsts, 5);
    let keys = gen::xr5_traffic(&srcs, &dsts, 1024, 100_000, 5);
    measure("xr5", &rules, &keys);
    for n in sizes() {
        for (name, kind) in [("acl", Kind::Acl), ("fw", Kind::Fw)] {
            let rules = gen::classbench(kind, Family::V4, n, n as u64);
            let keys = gen::trace(&rules, 100_000, 1);
            measure(&format!("{name}-{n}"), &rules, &keys);
        }
        let rules = gen::classbench(Kind::Acl, Family::V6, n, n as u64 + 1);
        let keys = gen::trace(&rules, 100_000, 2);
        measure(&format!("acl6-{n}"), &rules, &keys);
        let rules = gen::l2_mix(n, 3);
        let keys = gen::trace(&rules, 100_000, 3);
        measure(&format!("l2mix-{n}"), &rules, &keys);
    }
}
