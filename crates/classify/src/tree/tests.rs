use super::*;
use crate::rule::{ETHERTYPE_IPV4, ETHERTYPE_IPV6};

fn v4(src: u32, dst: u32, proto: u32, sport: u32, dport: u32) -> Key {
    let mut k = Key::default();
    k.set(Dim::EtherType, ETHERTYPE_IPV4);
    k.set(Dim::Src0, src);
    k.set(Dim::Dst0, dst);
    k.set(Dim::Proto, proto);
    k.set(Dim::SrcPort, sport);
    k.set(Dim::DstPort, dport);
    k
}

/// Checks `classify` and `classify_batch` against the reference on `keys`.
fn agree(rules: &[Rule], keys: &[Key]) {
    let c = Classifier::compile(rules);
    let (mut out, mut portable) = (vec![0; keys.len()], vec![0; keys.len()]);
    c.classify_batch(keys, &mut out);
    c.classify_batch_portable(keys, &mut portable);
    for ((k, &o), &p) in keys.iter().zip(&out).zip(&portable) {
        let want = linear(rules, k).unwrap_or(NO_MATCH);
        assert_eq!(c.classify(k), want, "{k:?}");
        assert_eq!(o, want, "batch {k:?}");
        assert_eq!(p, want, "portable batch {k:?}");
    }
}

#[test]
fn empty_list_matches_nothing() {
    let c = Classifier::compile(&[]);
    assert!(c.is_empty());
    assert_eq!(c.len(), 0);
    assert_eq!(c.classify(&Key::default()), NO_MATCH);
    assert_eq!(c.classify(&v4(1, 2, 6, 3, 4)), NO_MATCH);
    let mut out = [0; 3];
    c.classify_batch(&[Key::default(); 3], &mut out);
    assert_eq!(out, [NO_MATCH; 3]);
}

#[test]
fn single_rule() {
    let r = Rule::any()
        .src_v4(0x0a00_0000, 8)
        .proto(17)
        .dst_ports(53, 53);
    let c = Classifier::compile(&[r]);
    assert_eq!(c.len(), 1);
    assert_eq!(c.rules(), &[r]);
    assert_eq!(c.classify(&v4(0x0a01_0203, 9, 17, 1000, 53)), 0);
    assert_eq!(c.classify(&v4(0x0b01_0203, 9, 17, 1000, 53)), NO_MATCH);
    assert_eq!(c.classify(&v4(0x0a01_0203, 9, 6, 1000, 53)), NO_MATCH);
    assert_eq!(c.classify(&v4(0x0a01_0203, 9, 17, 1000, 54)), NO_MATCH);
}

#[test]
fn permit_all_prunes_what_follows() {
    let mut rules: Vec<Rule> = (0..200u32)
        .map(|i| {
            Rule::any()
                .dst_v4(0xc000_0200 + i, 32)
                .proto(17)
                .dst_ports(7, 7)
        })
        .collect();
    rules.push(Rule::any());
    rules.extend((0..100u32).map(|i| Rule::any().src_v4(i, 32)));
    let c = Classifier::compile(&rules);
    // Nothing after the PERMIT ALL can be reached, so the tree is the one without those rules.
    let head = Classifier::compile(&rules[..201]);
    assert_eq!(
        (c.nodes.len(), c.leaves.len()),
        (head.nodes.len(), head.leaves.len())
    );
    assert_eq!(c.classify(&v4(5, 0xc000_0205, 17, 9, 7)), 5);
    assert_eq!(c.classify(&v4(5, 0xc000_0205, 17, 9, 8)), 200);
    assert_eq!(c.classify(&v4(5, 0, 0, 0, 0)), 200);
    // A PERMIT ALL alone is a final answer at the root: no node, no leaf.
    let c = Classifier::compile(&[Rule::any(), Rule::any().proto(6)]);
    assert!(c.nodes.len() == 1 && c.leaves.is_empty());
    assert_eq!(c.classify(&Key::default()), 0);
}

#[test]
fn tcp_flags_keep_later_candidates() {
    let syn = Rule::any().proto(6).tcp_flags(0x02, 0x12);
    let rules = [syn, Rule::any().proto(6), Rule::any()];
    let c = Classifier::compile(&rules);
    let mut k = v4(1, 2, 6, 3, 4);
    k.set(Dim::TcpFlags, 0x02);
    assert_eq!(c.classify(&k), 0);
    k.set(Dim::TcpFlags, 0x12);
    assert_eq!(c.classify(&k), 1);
    k.set(Dim::Proto, 17);
    k.set(Dim::TcpFlags, 0);
    assert_eq!(c.classify(&k), 2);
    // A flag condition never shadows what follows, even when it covers the region otherwise.
    let c = Classifier::compile(&[Rule::any().tcp_flags(1, 1), Rule::any()]);
    k.set(Dim::TcpFlags, 1);
    assert_eq!(c.classify(&k), 0);
    k.set(Dim::TcpFlags, 2);
    assert_eq!(c.classify(&k), 1);
}

#[test]
fn ipv6_words() {
    let net = 0x2001_0db8_0000_0000_0000_0000_0000_0000u128;
    let rules = [
        Rule::any().dst_v6(net | 0x1234 << 64, 80),
        Rule::any().dst_v6(net, 48).proto(58),
        Rule::any().src_v6(net | 7, 128),
        Rule::any().ipv6(),
    ];
    let c = Classifier::compile(&rules);
    let key = |src: u128, dst: u128, proto: u32| {
        let mut k = Key::default();
        k.set(Dim::EtherType, ETHERTYPE_IPV6);
        k.set_src_v6(src);
        k.set_dst_v6(dst);
        k.set(Dim::Proto, proto);
        k
    };
    assert_eq!(c.classify(&key(1, net | 0x1234 << 64 | 99, 6)), 0);
    assert_eq!(c.classify(&key(1, net | 0x1235 << 64, 58)), 1);
    assert_eq!(c.classify(&key(net | 7, net | 1 << 80, 58)), 2);
    assert_eq!(c.classify(&key(net | 8, net | 1 << 80, 58)), 3);
    assert_eq!(c.classify(&v4(1, 2, 58, 0, 0)), NO_MATCH);
    let mut keys = vec![];
    for i in 0..300u128 {
        keys.push(key(
            net | (i % 9),
            net | (i % 5) << 64 | i,
            (i % 3 * 26) as u32,
        ));
        keys.push(key(i << 100, net | 0x1234 << 64 | i << 40, 6));
    }
    agree(&rules, &keys);
}

#[test]
fn batches_equal_single_lookups() {
    let mut rules = vec![];
    for i in 0..500u32 {
        let r = Rule::any()
            .src_v4(0x0a00_0000 | (i * 7919) << 8, 16 + (i % 17) as u8)
            .dst_v4(0xc0a8_0000 | i << 4, 28)
            .dst_ports((i * 13 % 60000) as u16, (i * 13 % 60000 + i % 100) as u16);
        rules.push(if i % 3 == 0 { r.proto(6) } else { r });
    }
    rules.push(Rule::any().ipv4().proto(17));
    let keys: Vec<Key> = (0..256u32)
        .map(|i| {
            let r = &rules[(i * 37 % 501) as usize];
            v4(
                r.range(Dim::Src0).0 + i,
                r.range(Dim::Dst0).1,
                [6, 17, 1][i as usize % 3],
                i,
                r.range(Dim::DstPort).0 + i % 3,
            )
        })
        .collect();
    let c = Classifier::compile(&rules);
    assert!(c.nodes.len() > 1, "500 rules should build a tree");
    let mut out = vec![0; 256];
    c.classify_batch(&keys, &mut out);
    let single: Vec<u32> = keys.iter().map(|k| c.classify(k)).collect();
    assert_eq!(out, single);
    assert!(out.iter().any(|&o| o < 500) && out.contains(&500));
    agree(&rules, &keys);
}

#[test]
fn l2_rules_and_values_outside_a_field() {
    let mac = [2, 0, 0, 0, 0, 9];
    let rules = [
        Rule::any().eth_src(mac).vlan(10),
        Rule::any().exact(Dim::EtherType, 0x88cc),
        Rule::any().pcp(5),
        Rule::any(),
    ];
    let c = Classifier::compile(&rules);
    let mut k = Key::default();
    let (hi, lo) = crate::rule::mac_words(mac);
    k.set(Dim::EthSrcHi, hi);
    k.set(Dim::EthSrcLo, lo);
    k.set(Dim::Vlan, 10);
    assert_eq!(c.classify(&k), 0);
    k.set(Dim::Vlan, 11);
    assert_eq!(c.classify(&k), 3);
    k.set(Dim::Pcp, 5);
    assert_eq!(c.classify(&k), 2);
    // A value no packet carries falls outside every wildcard, as in the reference.
    k.set(Dim::Pcp, 9);
    assert_eq!(c.classify(&k), NO_MATCH);
    k.set(Dim::Pcp, 0);
    k.set(Dim::Frag, 3);
    assert_eq!(c.classify(&k), NO_MATCH);
}

#[test]
fn unsatisfiable_rules_are_skipped() {
    let mut empty = Rule::any();
    empty.ranges[Dim::DstPort as usize] = (9, 3);
    let mut flags = Rule::any();
    flags.tcp_flags = Some((0x3, 0x1));
    let rules = [empty, flags, Rule::any().proto(6)];
    let mut k = v4(1, 2, 6, 5, 5);
    k.set(Dim::TcpFlags, 0x3);
    assert_eq!(Classifier::compile(&rules).classify(&k), 2);
    agree(&rules, &[k, Key::default()]);
}

#[test]
fn a_list_too_large_for_a_tree_is_scanned() {
    let rules = [
        Rule::any().proto(6),
        Rule::any().dst_ports(80, 80),
        Rule::any(),
    ];
    let c = Classifier {
        scan: true,
        ..Classifier::compile(&[])
    };
    let c = Classifier {
        rules: rules.to_vec(),
        ..c
    };
    let keys = [v4(1, 2, 6, 3, 4), v4(1, 2, 17, 3, 80), v4(1, 2, 17, 3, 81)];
    let mut out = [0; 3];
    c.classify_batch(&keys, &mut out);
    assert_eq!(out, [0, 1, 2]);
    assert_eq!(c.classify(&keys[1]), 1);
}

/// The QoS policy's shape: rules exact on DSCP only beside rules on protocol and ports, and
/// rules before a PERMIT that small cuts turn into final answers.
#[test]
fn crossed_dscp_and_ports() {
    let mut rules = vec![];
    for i in 0..300u32 {
        let port = (6000 + i * 7) as u16;
        rules.push(match i % 4 {
            0 => Rule::any().ipv4().proto(17).dst_ports(port, port),
            1 => Rule::any().ipv4().proto(6).dst_ports(port, port + 3),
            2 => Rule::any().dscp(1 + (i % 62) as u8),
            _ => Rule::any()
                .src_v4(0x0a00_0000 | (i % 250) << 16, 16)
                .proto(17)
                .src_ports(port, port),
        });
    }
    rules.push(Rule::any().ipv4().proto(17).dst_ports(5000, 5000));
    let mut keys = vec![];
    for i in 0..2000u32 {
        let mut k = v4(
            0x0a00_0000 | (i % 300) << 16 | i,
            i.wrapping_mul(2_654_435_761),
            [6, 17, 1][i as usize % 3],
            6000 + (i * 13) % 2200,
            [5000, 6000 + (i * 7) % 2200, i][i as usize % 3],
        );
        k.set(Dim::Dscp, i % 64);
        keys.push(k);
    }
    agree(&rules, &keys);
    rules.push(Rule::any());
    agree(&rules, &keys);
}
