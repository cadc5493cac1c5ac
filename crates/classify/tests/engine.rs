//! The compiled engine against the reference scan, on random rule lists and keys.
//!
//! Rules draw their addresses, ports and L2 fields from small pools so that they overlap, nest
//! and share boundaries, as real lists do; keys are mostly made from rules' edges (an endpoint,
//! one past it) and interiors, so they land where a wrong cut or a wrong prune would show.

use classify::rule::{mac_words, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use classify::{linear, Classifier, Dim, Key, Rule, DIMS, NO_MATCH};
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const POOL4: [u32; 6] = [
    0x0a00_0000,
    0x0a01_0000,
    0xc0a8_0100,
    0xc0a8_0180,
    0xffff_ff00,
    0,
];
const POOL6: [u128; 4] = [
    0x2001_0db8_0000_0000_0000_0000_0000_0000,
    0x2001_0db8_0001_0000_0000_0000_0000_0000,
    0x2001_0db8_0000_0000_ffff_0000_0000_0000,
    0xfe80_0000_0000_0000_0000_0000_0000_0000,
];
const LENS: [u8; 9] = [0, 1, 8, 16, 24, 25, 31, 32, 32];
const PORTS: [u16; 6] = [0, 53, 80, 1023, 1024, 65535];
const MACS: [[u8; 6]; 3] = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [0xff; 6]];

/// A rule from 12 random words, each steering one choice.
fn rule(w: &[u32; 12]) -> Rule {
    let mut r = Rule::any();
    match w[0] % 8 {
        0..=3 => {
            let len = |x: u32| LENS[(x % 9) as usize];
            r = r.src_v4(POOL4[(w[1] % 6) as usize] ^ (w[1] >> 20), len(w[2]));
            r = r.dst_v4(POOL4[(w[3] % 6) as usize] ^ (w[3] >> 24), len(w[2] >> 8));
        }
        4 | 5 => {
            let len = |x: u32| [0u8, 16, 32, 40, 48, 64, 72, 96, 100, 127, 128][(x % 11) as usize];
            let a = POOL6[(w[1] % 4) as usize] ^ ((w[1] >> 16) as u128) << (w[2] % 128);
            r = r.src_v6(a, len(w[2] >> 8));
            let a = POOL6[(w[3] % 4) as usize] ^ ((w[3] >> 16) as u128) << (w[2] % 100);
            r = r.dst_v6(a, len(w[3] >> 8));
        }
        6 => {
            let mac = MACS[(w[1] % 3) as usize];
            r = match w[2] % 3 {
                0 => r.eth_src(mac),
                1 => r.eth_dst(mac),
                _ => r.eth_src(mac).eth_dst(MACS[(w[3] % 3) as usize]),
            };
            if w[4].is_multiple_of(2) {
                r = r.exact(
                    Dim::EtherType,
                    [0x88cc, 0x0806, ETHERTYPE_IPV4][(w[4] / 2 % 3) as usize],
                );
            }
        }
        _ => {}
    }
    match w[5] % 5 {
        1 => r = r.proto(6),
        2 => r = r.proto(17),
        3 => r = r.proto(1),
        _ => {}
    }
    let ports = |x: u32| -> (u16, u16) {
        let a = PORTS[(x % 6) as usize].wrapping_add((x >> 16) as u16 % 3);
        match x / 6 % 6 {
            0 => (a, a),
            1 => (0, 1023),
            2 => (1024, 65535),
            3 => (a, a.saturating_add((x >> 8) as u16 % 300)),
            _ => (0, 65535),
        }
    };
    let (lo, hi) = ports(w[6]);
    r = r.src_ports(lo, hi);
    let (lo, hi) = ports(w[7]);
    r = r.dst_ports(lo, hi);
    if w[8].is_multiple_of(5) {
        r = r.tcp_flags(w[8] as u8, (w[8] >> 8) as u8);
    }
    match w[9] % 12 {
        0 => r = r.dscp((w[9] >> 8) as u8 % 64),
        1 => r = r.exact(Dim::Frag, (w[9] >> 8) % 3),
        2 => {
            r = r.with(
                Dim::Vlan,
                (w[9] >> 8) % 20,
                (w[9] >> 8) % 20 + (w[10] % 4000),
            )
        }
        3 => r = r.pcp((w[9] >> 8) as u8 % 8),
        4 => {
            r = r.with(
                Dim::TcpFlags,
                (w[9] >> 8) % 0x20,
                0x20 + (w[10] % 0x100) / 2,
            )
        }
        _ => {}
    }
    if w[11].is_multiple_of(30) {
        r = Rule::any();
    }
    r
}

/// A key near `rules[pick]`: per dimension, one of its edges, a point inside, a neighbour's edge
/// or a uniform value; now and then a value no packet has.
fn key(rules: &[Rule], pick: usize, seed: u64) -> Key {
    let mut g = SmallRng::seed_from_u64(seed);
    let t = &rules[pick % rules.len()];
    let mut k = Key::default();
    let base = g.gen_range(0..4u32);
    for d in Dim::ALL {
        let max = d.max();
        let other = &rules[g.gen_range(0..rules.len())];
        let (lo, hi) = t.range(d);
        let v = match g.gen_range(0..12u32) {
            0 | 1 => lo,
            2 | 3 => hi,
            4 => lo.wrapping_sub(1).min(max),
            5 => hi.saturating_add(1).min(max),
            6 | 7 => g.gen_range(lo..=hi),
            8 => other.range(d).0,
            9 => other.range(d).1.saturating_add(base % 2).min(max),
            10 => g.gen_range(0..=max),
            _ => lo.saturating_add(base).min(hi),
        };
        k.set(d, v);
    }
    if let (Some((v, m)), true) = (t.tcp_flags, g.gen_bool(0.5)) {
        k.set(Dim::TcpFlags, (v | (g.gen::<u8>() & !m)) as u32);
    }
    match g.gen_range(0..40u32) {
        0 => k.set(Dim::EtherType, ETHERTYPE_IPV6),
        1 => k.set(Dim::EtherType, ETHERTYPE_IPV4),
        2 => {
            let (hi, lo) = mac_words(MACS[g.gen_range(0..3)]);
            k.set(Dim::EthDstHi, hi);
            k.set(Dim::EthDstLo, lo);
        }
        3 => {
            // Outside every field's values: only the reference path can answer.
            let d = Dim::ALL[g.gen_range(0..DIMS)];
            if d.max() < u32::MAX {
                k.set(d, d.max() + 1 + g.gen_range(0..3));
            }
        }
        _ => {}
    }
    k
}

fn check(rules: &[Rule], keys: &[Key]) -> Result<(), TestCaseError> {
    let c = Classifier::compile(rules);
    prop_assert_eq!(c.len(), rules.len());
    // Batches of every shape the vector walk has: whole groups of 64, partial vectors, one key.
    let (mut out, mut portable) = (vec![0; keys.len()], vec![0; keys.len()]);
    let (mut at, mut sizes) = (0, [256, 1, 17, 63, 64, 100, 16].iter().cycle());
    while at < keys.len() {
        let end = (at + sizes.next().unwrap()).min(keys.len());
        c.classify_batch(&keys[at..end], &mut out[at..end]);
        c.classify_batch_portable(&keys[at..end], &mut portable[at..end]);
        at = end;
    }
    for ((k, &o), &p) in keys.iter().zip(&out).zip(&portable) {
        let want = linear(rules, k).unwrap_or(NO_MATCH);
        prop_assert_eq!(c.classify(k), want, "key {:?}", k);
        prop_assert_eq!(o, want, "batch, key {:?}", k);
        prop_assert_eq!(p, want, "portable batch, key {:?}", k);
    }
    Ok(())
}

fn rules_strategy(max: usize) -> impl Strategy<Value = Vec<Rule>> {
    prop::collection::vec(any::<[u32; 12]>(), 1..max).prop_map(|ws| ws.iter().map(rule).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn engine_equals_the_reference(
        rules in rules_strategy(300),
        picks in prop::collection::vec((any::<usize>(), any::<u64>()), 1..600),
    ) {
        let keys: Vec<Key> = picks.iter().map(|&(p, s)| key(&rules, p, s)).collect();
        check(&rules, &keys)?;
    }

    /// Lists ending in PERMIT ALL, or with one in the middle: the pruning's home ground.
    #[test]
    fn with_permit_all(
        mut rules in rules_strategy(200),
        at in any::<prop::sample::Index>(),
        seeds in prop::collection::vec(any::<u64>(), 1..400),
    ) {
        let i = at.index(rules.len() + 1);
        rules.insert(i, Rule::any());
        rules.push(Rule::any());
        let keys: Vec<Key> = seeds.iter().enumerate().map(|(j, &s)| key(&rules, j, s)).collect();
        check(&rules, &keys)?;
    }
}

/// A larger list than proptest would build per case, so the tree gets deep and its limits bite.
#[test]
fn thousands_of_rules() {
    let mut g = SmallRng::seed_from_u64(7);
    let rules: Vec<Rule> = (0..3000)
        .map(|_| {
            let mut w = [0u32; 12];
            g.fill(&mut w[..]);
            // No PERMIT ALL among them: it would prune the list down to a few rules.
            w[11] = 1;
            rule(&w)
        })
        .collect();
    let keys: Vec<Key> = (0..20_000).map(|i| key(&rules, i, g.gen())).collect();
    check(&rules, &keys).unwrap();
}

/// Rules open in the source beside rules open in the destination (and the same for MACs): one
/// tree would copy each kind into every piece of the other's cuts, so the engine builds one tree
/// per group, and must still answer as the reference does.
#[test]
fn crossed_wildcards_take_several_trees() {
    let mut g = SmallRng::seed_from_u64(11);
    let mut rules = vec![];
    for i in 0..2000u32 {
        let a = g.gen_range(0..1 << 20) << 8;
        let r = match i % 5 {
            0 => Rule::any().src_v4(a, 24 + (i % 9) as u8).proto(6),
            1 => Rule::any()
                .dst_v4(a, 24 + (i % 9) as u8)
                .dst_ports(80, 80 + (i % 3) as u16),
            2 => Rule::any().eth_src([2, 0, 0, 0, (i >> 8) as u8, i as u8]),
            3 => Rule::any()
                .eth_dst([2, 0, 0, 0, (i >> 8) as u8, i as u8])
                .vlan((i % 50) as u16),
            _ => Rule::any()
                .src_ports(i as u16, i as u16 + 7)
                .tcp_flags(2, 2),
        };
        rules.push(r);
    }
    rules.push(Rule::any().ipv4());
    let c = Classifier::compile(&rules);
    let shape = format!("{c:?}");
    assert!(!shape.contains("trees: 1,"), "{shape}");
    let keys: Vec<Key> = (0..20_000).map(|i| key(&rules, i * 7, g.gen())).collect();
    check(&rules, &keys).unwrap();
}

/// Rules exact on one narrow field beside rules exact on another (DSCP values beside destination
/// ports beside source prefix and port, as in a QoS policy): the engine gives each shape its own
/// tree, and must still answer as the reference does, for lists in any order and with ties.
#[test]
fn narrow_fields_take_a_tree_each() {
    for seed in 0..4u64 {
        let mut g = SmallRng::seed_from_u64(seed);
        let mut rules = vec![];
        for i in 0..600u32 {
            let port = g.gen_range(1000..1400u16);
            let r = match (i + seed as u32) % 4 {
                0 => Rule::any().proto(17).dst_ports(port, port),
                1 => Rule::any().proto(6).dst_ports(port, port + 3),
                2 => Rule::any().dscp(g.gen_range(0..64)),
                _ => Rule::any()
                    .proto(17)
                    .src_v4(0x0a00_0000 | g.gen_range(0..250u32) << 16, 16)
                    .src_ports(port, port),
            };
            rules.push(r);
        }
        if seed % 2 == 1 {
            rules.push(Rule::any().ipv4().tcp_flags(2, 2));
        }
        let c = Classifier::compile(&rules);
        let shape = format!("{c:?}");
        assert!(!shape.contains("trees: 1,"), "{shape}");
        let keys: Vec<Key> = (0..20_000).map(|i| key(&rules, i * 5, g.gen())).collect();
        check(&rules, &keys).unwrap();
    }
}
