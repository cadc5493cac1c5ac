//! Quick figures for the compiled engine (ignored by default; needs a release build):
//!
//! ```text
//! cargo test --release -p classify --test timing -- --ignored --nocapture
//! ```
//!
//! For each rule set: compile time, bytes, and lookups per second through `classify` (one key at
//! a time) and `classify_batch` (256 keys a call) over a 100k-key trace; each rate is the best of
//! three short runs, timed by the thread's on-CPU time, since this VM's cores are shared and its
//! figures move 2-3x from run to run. The sets are small
//! stand-ins made here (so this file builds whatever `classify::gen` looks like): ClassBench-like
//! acl and fw lists, the XR-5 list and its traffic, an L2/L3/L4 mix, IPv6 acl.

use std::hint::black_box;
use std::time::Instant;

use classify::rule::{ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use classify::{linear, Classifier, Dim, Key, Rule, NO_MATCH};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Weighted choices: `(value, weight)`.
type Table = &'static [(u32, u32)];

#[derive(Clone, Copy)]
enum Kind {
    Acl,
    Fw,
}

fn pick(g: &mut SmallRng, table: &[(u32, u32)]) -> u32 {
    let total: u32 = table.iter().map(|t| t.1).sum();
    let mut x = g.gen_range(0..total);
    for &(v, w) in table {
        if x < w {
            return v;
        }
        x -= w;
    }
    unreachable!()
}

/// Zipf-ish: index `i` with weight `1 / (i + 1)`.
fn zipf(g: &mut SmallRng, n: usize) -> usize {
    let h: f64 = (1..=n).map(|i| 1.0 / i as f64).sum();
    let mut x = g.gen::<f64>() * h;
    for i in 0..n {
        x -= 1.0 / (i + 1) as f64;
        if x <= 0.0 {
            return i;
        }
    }
    n - 1
}

fn ports(g: &mut SmallRng, classes: [u32; 5]) -> (u16, u16) {
    match pick(
        g,
        &[
            (0, classes[0]),
            (1, classes[1]),
            (2, classes[2]),
            (3, classes[3]),
            (4, classes[4]),
        ],
    ) {
        0 => (0, 65535),
        1 => (1024, 65535),
        2 => (0, 1023),
        3 => {
            let p = if g.gen_bool(0.7) {
                [
                    20, 21, 22, 23, 25, 53, 80, 110, 123, 143, 161, 443, 445, 993, 3306, 8080,
                ][g.gen_range(0..16)]
            } else {
                g.gen_range(1..=65535)
            };
            (p, p)
        }
        _ => {
            let w = 1u32 << g.gen_range(1..=12);
            let lo = g.gen_range(0..=65535 - w) as u16;
            (lo, lo + w as u16 - 1)
        }
    }
}

/// A ClassBench-like list: clustered prefixes, port classes, protocols; broad rules late.
fn classbench(kind: Kind, v6: bool, n: usize, seed: u64) -> Vec<Rule> {
    let mut g = SmallRng::seed_from_u64(seed);
    let sites = ((n as f64).sqrt() as usize).max(4);
    let pool = |g: &mut SmallRng| -> Vec<(u128, Vec<u128>)> {
        (0..sites)
            .map(|_| {
                let site = (g.gen::<u128>() >> 4 | 1 << 125) & !((1u128 << 116) - 1);
                let subnets = (0..8)
                    .map(|_| site | (g.gen::<u128>() >> 12) & !((1u128 << 64) - 1))
                    .collect();
                (site, subnets)
            })
            .collect()
    };
    let (src_pool, dst_pool) = (pool(&mut g), pool(&mut g));
    let (src_len, dst_len, sp, dp, proto): (Table, Table, _, _, Table) = match kind {
        Kind::Acl => (
            &[
                (0, 8),
                (8, 2),
                (16, 10),
                (20, 5),
                (24, 20),
                (27, 5),
                (28, 10),
                (30, 5),
                (32, 35),
            ],
            &[
                (0, 2),
                (16, 5),
                (23, 5),
                (24, 25),
                (26, 5),
                (28, 8),
                (29, 5),
                (30, 5),
                (32, 40),
            ],
            [95, 2, 0, 2, 1],
            [20, 8, 2, 55, 15],
            &[(6, 70), (17, 20), (1, 5), (256, 5)],
        ),
        Kind::Fw => (
            &[(0, 30), (8, 5), (16, 10), (24, 15), (28, 5), (32, 35)],
            &[(0, 15), (16, 5), (24, 20), (28, 5), (30, 5), (32, 50)],
            [70, 15, 0, 10, 5],
            [20, 10, 5, 40, 25],
            &[(6, 50), (17, 25), (1, 5), (256, 20)],
        ),
    };
    let v6len = |l: u32| -> u8 {
        match l {
            0 => 0,
            1..=8 => 32,
            9..=16 => 40,
            17..=20 => 44,
            21..=24 => 48,
            25..=27 => 56,
            28..=29 => 64,
            30..=31 => 96,
            _ => 128,
        }
    };
    let mut rules: Vec<(f64, Rule)> = Vec::with_capacity(n);
    while rules.len() + 1 < n {
        let mut r = Rule::any();
        let mut volume = 0.0;
        for (pool, lens, is_src) in [(&src_pool, src_len, true), (&dst_pool, dst_len, false)] {
            let (_, subnets) = &pool[zipf(&mut g, sites)];
            let a = subnets[zipf(&mut g, 8)] | g.gen::<u64>() as u128;
            let l = pick(&mut g, lens);
            volume += 32.0 - l as f64;
            r = match (v6, is_src) {
                (false, true) => r.src_v4((a >> 96) as u32, l as u8),
                (false, false) => r.dst_v4((a >> 96) as u32, l as u8),
                (true, true) => r.src_v6(a, v6len(l)),
                (true, false) => r.dst_v6(a, v6len(l)),
            };
        }
        let p = pick(&mut g, proto);
        if p == 6 || p == 17 {
            r = r.proto(p as u8);
            let (a, b) = ports(&mut g, sp);
            let (c, d) = ports(&mut g, dp);
            volume += ((b - a) as f64 + 1.0).log2() + ((d - c) as f64 + 1.0).log2();
            r = r.src_ports(a, b).dst_ports(c, d);
        } else if p == 1 {
            r = r.proto(if v6 { 58 } else { 1 });
            volume += 32.0;
        } else {
            volume += 40.0;
        }
        rules.push((volume + g.gen::<f64>() * 40.0, r));
    }
    rules.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut rules: Vec<Rule> = rules.into_iter().map(|x| x.1).collect();
    rules.push(if v6 {
        Rule::any().ipv6()
    } else {
        Rule::any().ipv4()
    });
    rules
}

/// 90% of keys inside a random rule, 10% uniform over the family's fields.
fn trace(rules: &[Rule], n: usize, seed: u64) -> Vec<Key> {
    let mut g = SmallRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let r = if g.gen_bool(0.9) {
                rules[g.gen_range(0..rules.len())]
            } else {
                *rules.last().unwrap()
            };
            let mut k = Key::default();
            for d in Dim::ALL {
                let (lo, hi) = r.range(d);
                k.set(d, g.gen_range(lo..=hi));
            }
            let v4 = r.range(Dim::EtherType) == (ETHERTYPE_IPV4, ETHERTYPE_IPV4);
            let v6 = r.range(Dim::EtherType) == (ETHERTYPE_IPV6, ETHERTYPE_IPV6);
            if v4 {
                for d in [
                    Dim::Src1,
                    Dim::Src2,
                    Dim::Src3,
                    Dim::Dst1,
                    Dim::Dst2,
                    Dim::Dst3,
                ] {
                    k.set(d, 0);
                }
            }
            if v4 || v6 {
                for d in [Dim::Vlan, Dim::Pcp, Dim::Frag] {
                    k.set(d, 0);
                }
                if r.is_wild(Dim::Proto) {
                    k.set(Dim::Proto, [6, 17, 1][g.gen_range(0..3)]);
                }
                if !matches!(k.get(Dim::Proto), 6 | 17) {
                    k.set(Dim::SrcPort, 0);
                    k.set(Dim::DstPort, 0);
                }
            }
            k
        })
        .collect()
}

/// The XR-5 list: 5,000 exact UDP DENY entries (half on the traffic's hosts, ports it never
/// uses), then PERMIT ALL; and that traffic.
fn xr5(seed: u64) -> (Vec<Rule>, Vec<Key>) {
    let mut g = SmallRng::seed_from_u64(seed);
    let srcs: Vec<u32> = (0..300).map(|i| 0x0a00_0000 + i * 7 + 1).collect();
    let dsts: Vec<u32> = (0..300).map(|i| 0x1400_0000 + i * 13 + 1).collect();
    let mut rules: Vec<Rule> = (0..5000)
        .map(|i| {
            let (s, d) = if i % 2 == 0 {
                (*srcs.choose(&mut g).unwrap(), *dsts.choose(&mut g).unwrap())
            } else {
                (
                    g.gen_range(0x0100_0000..0xe000_0000),
                    g.gen_range(0x0100_0000..0xe000_0000),
                )
            };
            let sp = g.gen_range(10000..60000u16);
            let dp = g.gen_range(10000..60000u16);
            let dw = if g.gen_bool(0.2) {
                g.gen_range(0..16)
            } else {
                0
            };
            Rule::any()
                .src_v4(s, 32)
                .dst_v4(d, if g.gen_bool(0.1) { 30 } else { 32 })
                .proto(17)
                .src_ports(sp, sp)
                .dst_ports(dp, dp + dw)
        })
        .collect();
    rules.shuffle(&mut g);
    rules.push(Rule::any());
    let keys = (0..100_000)
        .map(|i| {
            let mut k = Key::default();
            k.set(Dim::EtherType, ETHERTYPE_IPV4);
            k.set(Dim::Src0, srcs[i % 300]);
            k.set(Dim::Dst0, dsts[(i * 7 + i / 300) % 300]);
            k.set(Dim::Proto, 17);
            k.set(Dim::SrcPort, 1024);
            k.set(Dim::DstPort, 5000 + (i as u32 * 31) % 2501);
            k
        })
        .collect();
    (rules, keys)
}

/// 25% L2 entries, 60% IPv4 acl, 15% IPv6 acl, shuffled, then PERMIT ALL.
fn l2_mix(n: usize, seed: u64) -> Vec<Rule> {
    let mut g = SmallRng::seed_from_u64(seed);
    let v4 = classbench(Kind::Acl, false, n * 60 / 100, seed + 1);
    let v6 = classbench(Kind::Acl, true, n * 15 / 100, seed + 2);
    let mut rules: Vec<Rule> = v4[..v4.len() - 1]
        .iter()
        .chain(&v6[..v6.len() - 1])
        .copied()
        .collect();
    while rules.len() + 1 < n {
        let mac = [2, 0, g.gen(), g.gen(), g.gen(), g.gen()];
        rules.push(match g.gen_range(0..5) {
            0 => Rule::any().eth_src(mac),
            1 => Rule::any().eth_dst(mac),
            2 => Rule::any().exact(
                Dim::EtherType,
                [0x0806, 0x88cc, 0x8847, 0x8864][g.gen_range(0..4)],
            ),
            3 => Rule::any().vlan(g.gen_range(1..4095)),
            _ => Rule::any()
                .vlan(g.gen_range(1..4095))
                .pcp(g.gen_range(0..8)),
        });
    }
    rules.shuffle(&mut g);
    rules.push(Rule::any());
    rules
}

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
    let (rules, keys) = xr5(5);
    measure("xr5", &rules, &keys);
    for n in sizes() {
        for (name, kind) in [("acl", Kind::Acl), ("fw", Kind::Fw)] {
            let rules = classbench(kind, false, n, n as u64);
            let keys = trace(&rules, 100_000, 1);
            measure(&format!("{name}-{n}"), &rules, &keys);
        }
        let rules = classbench(Kind::Acl, true, n, n as u64 + 1);
        let keys = trace(&rules, 100_000, 2);
        measure(&format!("acl6-{n}"), &rules, &keys);
        let rules = l2_mix(n, 3);
        let keys = trace(&rules, 100_000, 3);
        measure(&format!("l2mix-{n}"), &rules, &keys);
    }
}
