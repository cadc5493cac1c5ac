//! The scenarios with services on (issue 5): XR-5 (XR-4 through long ACLs), ME-1S (ME-1 with the
//! ME 6524 report's ACL, QoS and NetFlow) and QOS-1 (policer accuracy). Their ACLs are generated
//! here, as entry lines, from a fixed seed: the same scenario always builds the same lists.

use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::*;
use crate::load::FrameSizes;
use crate::services::{AclPlan, OnOffPlan, PolicedStream, PolicerPlan};
use crate::stream::{Field, FieldKind, Vary, L3};

/// splitmix64: small, seedable, and the same on every machine, so a list is reproducible from its
/// seed alone.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// ACL entries scaled with the scenario (CI runs lists of tens, not thousands, of entries).
fn scaled(seed: usize, scale: f64, min: usize) -> usize {
    ((seed as f64 * scale).round() as usize).clamp(min, seed)
}

/// The host addresses a stream sends from and to: (base, count) of its source and destination.
fn hosts(s: &StreamSpec) -> ((u128, u32), (u128, u32)) {
    let (src, dst) = match s.l3 {
        L3::V4 { src, dst } => (
            u32::from_be_bytes(src) as u128,
            u32::from_be_bytes(dst) as u128,
        ),
        L3::V6 { src, dst } => (u128::from_be_bytes(src), u128::from_be_bytes(dst)),
    };
    let count = |k: FieldKind| {
        s.fields
            .iter()
            .find(|f| f.kind == k)
            .map_or(1, |f| match &f.vary {
                Vary::Step { count, .. } | Vary::Random { count } => *count,
                Vary::List(l) => l.len() as u32,
            })
    };
    (
        (src, count(FieldKind::SrcIp)),
        (dst, count(FieldKind::DstIp)),
    )
}

/// One XR-5 DENY entry: addresses and UDP ports.
type Tuple = (u128, u128, u16, u16);

fn addr(v6: bool, a: u128) -> String {
    if v6 {
        Ipv6Addr::from(a).to_string()
    } else {
        Ipv4Addr::from(a as u32).to_string()
    }
}

/// XR-5's DENY entries for one family: `n` entries, pseudo-random, none equal to another or one
/// step from it in any field (so no two could merge into a range); half of them between the
/// addresses of `streams` (on ports the streams never use), half between addresses nobody
/// sends from; the last one `last` when given (the flow part 2 denies).
fn xr5_tuples(streams: &[&StreamSpec], v6: bool, n: usize, last: Option<Tuple>) -> Vec<Tuple> {
    let mut rng = Rng(if v6 { 0x5856_3600 } else { 0x5834_0000 });
    let mut seen: HashSet<Tuple> = HashSet::new();
    let mut out = Vec::with_capacity(n);
    // Exactly half match the streams' addresses, in a shuffled order.
    let mut matching: Vec<bool> = (0..n).map(|i| i % 2 == 0).collect();
    for i in (1..matching.len()).rev() {
        let j = rng.range(0, i as u64) as usize;
        matching.swap(i, j);
    }
    let mergeable = |seen: &HashSet<Tuple>, t: Tuple| {
        let (a, b, p, q) = t;
        seen.contains(&t)
            || [
                (a.wrapping_add(1), b, p, q),
                (a.wrapping_sub(1), b, p, q),
                (a, b.wrapping_add(1), p, q),
                (a, b.wrapping_sub(1), p, q),
                (a, b, p.wrapping_add(1), q),
                (a, b, p.wrapping_sub(1), q),
                (a, b, p, q.wrapping_add(1)),
                (a, b, p, q.wrapping_sub(1)),
            ]
            .iter()
            .any(|x| seen.contains(x))
    };
    if let Some(t) = last {
        seen.insert(t);
    }
    let wanted = n - usize::from(last.is_some());
    let mut i = 0;
    while out.len() < wanted {
        // Ports the streams never use: they send from 1024 (1025: the denied flow) to 5000-7500.
        let sport = rng.range(10_000, 65_535) as u16;
        let dport = rng.range(10_000, 65_535) as u16;
        let (src, dst) = if matching[i % n] && !streams.is_empty() {
            let s = streams[rng.range(0, streams.len() as u64 - 1) as usize];
            let ((sb, sc), (db, dc)) = hosts(s);
            (
                sb + rng.range(0, sc as u64 - 1) as u128,
                db + rng.range(0, dc as u64 - 1) as u128,
            )
        } else if v6 {
            // 2001:db8:8c00::/48 to 2001:db8:8d00::/48: outside every test network.
            let lo = |r: &mut Rng| r.next() as u128 | (r.next() as u128 & 0xffff) << 64;
            (
                0x2001_0db8_8c00u128 << 80 | lo(&mut rng),
                0x2001_0db8_8d00u128 << 80 | lo(&mut rng),
            )
        } else {
            // 140/8 to 141/8, as the report's example; the streams use 20/8 to 45/8.
            (
                0x8c00_0000 | (rng.next() & 0xff_ffff) as u128,
                0x8d00_0000 | (rng.next() & 0xff_ffff) as u128,
            )
        };
        let t = (src, dst, sport, dport);
        if mergeable(&seen, t) {
            continue;
        }
        seen.insert(t);
        out.push(t);
        i += 1;
    }
    out.extend(last);
    out
}

fn xr5_lines(tuples: &[Tuple], v6: bool, log: bool) -> String {
    let mut s = String::with_capacity(tuples.len() * 90);
    s += "# XR-5: generated by the tester (seeded; see crates/tester/src/scenario/services.rs)\n";
    for &(a, b, p, q) in tuples {
        s += &format!(
            "deny udp src host {} sport {p} dst host {} dport {q}{}\n",
            addr(v6, a),
            addr(v6, b),
            if log { " log" } else { "" }
        );
    }
    s += "permit\n";
    s
}

/// XR-5: XR-4's setup, every stream's UDP destination port varying over 5000-7500, IPv4 and
/// IPv6 ACLs of 5,000 DENY entries and a final PERMIT bound in and out on every interface, and
/// one more single-flow stream whose exact 5-tuple is the 5,000th DENY.
pub(super) fn xr5(o: &ScenarioOpts) -> Scenario {
    let mut s = xr::xr(o, true);
    for st in &mut s.streams {
        if st.is_v6() {
            // The ports are the point of the test: IPv6 frames carry UDP too, so the smallest
            // is the one that holds the UDP header and the signature.
            st.udp = Some((1024, 5000));
            st.min_size = 0;
            st.min_size = st.min_frame() as u16;
        }
        st.fields.push(Field {
            kind: FieldKind::DstPort,
            vary: Vary::Step {
                count: 2501,
                step: 1,
            },
            nested: false,
        });
    }
    // The denied flow: from a 1 GbE port of LR3 to its 10 GbE port, one source, one destination,
    // source port 1025 (no other stream sends from it, so no other frame matches its entry).
    let port = |n: &str| s.ports.iter().position(|p| p.0 == n).expect("an XR port");
    let (g, x) = (port("lr3g0"), port("lr3x0"));
    let mut denied = base_stream(format!("denied {}>{}", s.ports[g].0, s.ports[x].0), g, x);
    let (src, dst) = (
        (20 + g as u32) << 24 | 1 << 8 | 1,
        (20 + x as u32) << 24 | 1 << 8 | 1,
    );
    denied.l3 = L3::V4 {
        src: v4(src),
        dst: v4(dst),
    };
    denied.udp = Some((1025, 5000));
    let n = scaled(5000, o.scale, 10);
    let v4s: Vec<&StreamSpec> = s.streams.iter().filter(|x| !x.is_v6()).collect();
    let v6s: Vec<&StreamSpec> = s.streams.iter().filter(|x| x.is_v6()).collect();
    let t4 = xr5_tuples(&v4s, false, n, Some((src as u128, dst as u128, 1025, 5000)));
    let t6 = xr5_tuples(&v6s, true, n, None);
    let denied_index = s.streams.len();
    s.streams.push(denied);
    s.files = vec![
        ("xr5-ipv4.acl".into(), xr5_lines(&t4, false, false)),
        ("xr5-ipv6.acl".into(), xr5_lines(&t6, true, false)),
        ("xr5-ipv4-log.acl".into(), xr5_lines(&t4, false, true)),
        ("xr5-ipv6-log.acl".into(), xr5_lines(&t6, true, true)),
    ];
    let lists = |suffix: &str| {
        format!(
            "acls:\n  - {{ name: IPV4_Test, family: ipv4, file: xr5-ipv4{suffix}.acl }}\n  \
             - {{ name: IPV6_Test, family: ipv6, file: xr5-ipv6{suffix}.acl }}\n"
        )
    };
    let bound = with_if_services(&s.config_yaml, &|_| {
        Some("acl-in: [IPV4_Test, IPV6_Test], acl-out: [IPV4_Test, IPV6_Test]".into())
    });
    s.id = "XR-5";
    s.flows = s.streams.iter().map(|x| x.flows()).sum();
    s.title = format!(
        "IPv4+IPv6 forwarding with ACLs of {} entries per family in and out on every port, 4 \
         logical routers (VRFs), 6 x 10 GbE + 20 x 1 GbE nominal, {} flows",
        n + 1,
        s.flows
    );
    s.seed_title = "Cisco XR 12000, test 5: IPv4/IPv6 IMIX with 5,001-entry ACLs in and out, a \
                    denied flow, ACL logging";
    s.procedure = Procedure::Acl(AclPlan {
        with_acl: format!("{bound}{}", lists("")),
        with_log: format!("{bound}{}", lists("-log")),
        entries_per_list: n + 1,
        denied_stream: denied_index,
        denied_flow: format!(
            "{}(1025) -> {}(5000)",
            Ipv4Addr::from(src),
            Ipv4Addr::from(dst)
        ),
        denied_seq: n as u32 * 10,
        list: "IPV4_Test".into(),
    });
    s.seed = vec![SeedRow {
        key: "IMIX".into(),
        fps: None,
        note: "line rate, 25.5 us".into(),
    }];
    s.notes.push(format!(
        "Each list: {n} DENY entries (`deny udp src host A sport P dst host B dport Q`, seeded \
         pseudo-random, no two mergeable; half between the streams' addresses on ports they do \
         not use) and a final `permit`; the {n}th IPv4 DENY is the denied flow's 5-tuple. Every \
         other frame matches only the PERMIT, in and out: two lookups through the whole list."
    ));
    s.notes.push(
        "IPv6 frames carry UDP here (their destination ports vary too), so IMIX's small IPv6 \
         frames are 82 bytes, the least that holds IPv6, UDP and the signature."
            .into(),
    );
    s
}

/// ME-1S's ACL (family `any`): `n - 1` entries the traffic never matches (L2 by MAC, EtherType
/// and VLAN; L3 by prefixes; L4 by protocol and ports) and a final `permit`.
fn me1_acl(n: usize) -> String {
    let mut rng = Rng(0x4d45_3153);
    let mut s = String::with_capacity(n * 64);
    s += "# ME-1S: generated by the tester (seeded); the traffic matches only the final permit\n";
    // A MAC no host uses (the tester's hosts are 02:00:00:00:i:02).
    let mac = |r: &mut Rng| {
        let v = r.next();
        format!(
            "0e:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            v as u8,
            (v >> 8) as u8,
            (v >> 16) as u8,
            (v >> 24) as u8,
            (v >> 32) as u8
        )
    };
    // Prefixes anywhere, and destinations in 10.24.0.0-10.255.255.255: the customer networks are
    // 10.0-23/16 and the routes leave 10/8 out, so no frame is sent there.
    let any_pfx = |r: &mut Rng| {
        let len = r.range(8, 32) as u32;
        let a = (r.next() as u32) & (u32::MAX << (32 - len));
        format!("{}/{len}", Ipv4Addr::from(a))
    };
    let unused_dst = |r: &mut Rng| {
        let len = r.range(16, 32) as u32;
        let a = (10 << 24 | (r.range(24, 255) as u32) << 16 | (r.next() as u32 & 0xffff))
            & (u32::MAX << (32 - len));
        format!("{}/{len}", Ipv4Addr::from(a))
    };
    for i in 0..n.saturating_sub(1) {
        let line = match i % 20 {
            // L2: a quarter.
            0 | 1 => format!(
                "deny src-mac {} ethertype 0x{:04x}",
                mac(&mut rng),
                rng.range(0x8800, 0x88ff)
            ),
            2 => format!("deny dst-mac {}", mac(&mut rng)),
            3 => format!("deny src-mac {} vlan {}", mac(&mut rng), rng.range(1, 4094)),
            4 => format!("deny ethertype 0x{:04x}", rng.range(0x8900, 0x89ff)),
            // L3: about a third.
            5..=9 => format!(
                "deny src {} dst {}",
                any_pfx(&mut rng),
                unused_dst(&mut rng)
            ),
            10 => format!("deny icmp src {} dst any", any_pfx(&mut rng)),
            // L4: the rest. TCP never matches (the traffic is UDP); UDP entries use ports or
            // destinations the traffic does not.
            11..=14 => format!(
                "deny tcp src {} dst {} dport {}",
                any_pfx(&mut rng),
                any_pfx(&mut rng),
                rng.range(1, 65_535)
            ),
            15 => format!(
                "deny tcp src any dst any dport {} established",
                rng.range(1, 1023)
            ),
            16 | 17 => format!(
                "deny udp src {} dst any dport {}",
                any_pfx(&mut rng),
                rng.range(5001, 65_535)
            ),
            18 => format!(
                "deny udp src any sport {} dst {}",
                rng.range(1025, 65_535),
                unused_dst(&mut rng)
            ),
            _ => format!(
                "deny udp src any dst {} dport {}-{}",
                unused_dst(&mut rng),
                rng.range(1, 30_000),
                rng.range(30_001, 65_535)
            ),
        };
        s += &line;
        s.push('\n');
    }
    s += "permit\n";
    s
}

/// ME-1S's QoS: `n` match lines over ten classes; the traffic matches only the last line of the
/// last class (so every packet is checked against all of them), which re-marks it DSCP 26.
fn me1_qos(n: usize) -> (String, &'static str) {
    let mut rng = Rng(0x514f_5331);
    let per = n.div_ceil(10).max(1);
    let mut y = String::from("qos:\n  classes:\n");
    let mut left = n;
    let mut names = Vec::new();
    for c in 0..10 {
        let last = c == 9;
        let name = if last {
            "me1-traffic".to_string()
        } else {
            format!("c{c}")
        };
        let lines = if last { left } else { per.min(left - 1) };
        left -= lines;
        let mut m = Vec::new();
        for k in 0..lines {
            if last && k + 1 == lines {
                m.push("\"udp sport 1024 dport 5000\"".to_string());
                break;
            }
            m.push(format!(
                "\"{}\"",
                match k % 4 {
                    0 => format!("tcp dport {}", rng.range(1, 65_535)),
                    1 => format!("udp dport {}", rng.range(5001, 65_535)),
                    2 => format!("dscp {}", rng.range(1, 63)),
                    _ => format!("src 10.{}.{}.0/24", rng.range(24, 255), rng.range(0, 255)),
                }
            ));
        }
        y += &format!("    - {{ name: {name}, match: [{}] }}\n", m.join(", "));
        names.push(name);
    }
    y += "  policies:\n    - name: ME_QOS\n      classes:\n";
    for (i, n) in names.iter().enumerate() {
        // The traffic's class: AF31, and EXP 3 (its class selector) on labels it leaves with
        // (the seed re-marked "MPLS EXP bits where relevant").
        let set = if n == "me1-traffic" {
            "dscp: 26, exp: 3".to_string()
        } else {
            format!("dscp: {}", i + 1)
        };
        y += &format!("        - {{ class: {n}, set: {{ {set} }} }}\n");
    }
    y += "        - { class: class-default, set: { dscp: 0 } }\n";
    (y, "me1-traffic")
}

/// ME-1S: ME-1, each frame size searched with the services off and then on (the ME 6524 report's
/// 10,000-line ACL, 500-line QoS ACL re-marking DSCP, and NetFlow on every interface).
pub(super) fn me1s(o: &ScenarioOpts) -> Scenario {
    let mut s = services_off_then_on(
        metro::metro(o, false),
        o,
        "ME-1S",
        "Cisco ME 6524, table 1: IPv4 unicast routing with a 10,000-line ACL, a 500-line QoS \
         ACL re-marking DSCP, and NetFlow on all interfaces (300 s)",
    );
    // ME-1's own notes give way to these two.
    let services = s.notes.pop().unwrap_or_default();
    s.notes = vec![
        "Routes come from the route generator (static), not OSPF: OSPF arrives with FRR.".into(),
        services,
    ];
    s
}

/// ME-6S: ME-6 (the MPLS VPN) with the services off and then on, as ME-1S. Both directions
/// take them: the CEs' frames on their sub-interface's input arc (leaving labelled with the
/// class's EXP), the labelled frames from the core on their uplink's input arc once their VPN
/// label has popped them into the VRF.
pub(super) fn me6s(o: &ScenarioOpts) -> Scenario {
    let mut s = services_off_then_on(
        super::l3vpn::l3vpn(o),
        o,
        "ME-6S",
        "Cisco ME 6524, table 6: MPLS VPN scalability and throughput (192 VRFs, 230,400 \
         routes, 300 s) with the 10,000-line ACL, QoS re-marking and NetFlow",
    );
    s.notes.push(
        "Services on, both ways: the CEs' frames take their sub-interface's input arc and leave \
         labelled with EXP 3 (the traffic's class sets it); the core's labelled frames take \
         their uplink's input arc once their VPN label has popped them into the VRF (classified \
         on the IP packet they carry, accounted to the uplink)."
            .into(),
    );
    s
}

/// ME-3S and ME-4S: the pseudowire scenarios (ME-3 type 4 with `vlan_mode`, else ME-4 type 5)
/// with the services off and then on, as the seed ran them. Both directions take them: the
/// CEs' frames on their attachment circuit's input arc (classified on the IP packet inside,
/// their pseudowire's labels given the class's EXP), the core's frames on their uplink's input
/// arc once their pseudowire label has handed them to their circuit.
pub(super) fn me3s(o: &ScenarioOpts, vlan_mode: bool) -> Scenario {
    let (id, seed_title) = if vlan_mode {
        (
            "ME-3S",
            "Cisco ME 6524, table 3: EoMPLS VC type 4 (3,072 pseudowires, 300 s) with the \
             10,000-line ACL, QoS re-marking and NetFlow",
        )
    } else {
        (
            "ME-4S",
            "Cisco ME 6524, table 4: EoMPLS VC type 5 (24 pseudowires, 300 s) with the \
             10,000-line ACL, QoS re-marking and NetFlow",
        )
    };
    let mut s = services_off_then_on(
        super::pseudowire::pseudowires(o, vlan_mode),
        o,
        id,
        seed_title,
    );
    s.notes.push(
        "Services on, both ways, on the IP packet each pseudowire frame carries: the CEs' \
         frames take their attachment circuit's input arc and leave on their pseudowire with \
         EXP 3 (the traffic's class sets it); the core's frames take their uplink's input arc \
         once their pseudowire label has handed them to their circuit (accounted to the \
         uplink, the circuit as output). Frames that carry no IP packet would pass untouched."
            .into(),
    );
    s
}

/// `s` with each frame size searched with the services off and then on (the ME 6524 report's
/// 10,000-line ACL, 500-line QoS ACL re-marking DSCP, and NetFlow on every interface), scaled
/// with the scenario.
fn services_off_then_on(
    mut s: Scenario,
    o: &ScenarioOpts,
    id: &'static str,
    seed_title: &'static str,
) -> Scenario {
    let acl_n = scaled(10_000, o.scale, 20);
    let qos_n = scaled(500, o.scale, 10);
    s.files = vec![("me1s.acl".into(), me1_acl(acl_n))];
    let (qos, class) = me1_qos(qos_n);
    // NetFlow on all packets: ingress accounting on every interface records each packet once
    // (with its output interface), as `ip flow ingress` does. Room to spare for the two-choice
    // table.
    let cache = (s.flows as usize * 5 / 4).clamp(1024, 64 << 20);
    let bound = with_if_services(&s.config_yaml, &|_| {
        Some("acl-in: [ME_ACL], qos-in: ME_QOS, flow: in".into())
    });
    let with = format!(
        "{bound}acls:\n  - {{ name: ME_ACL, family: any, file: me1s.acl }}\n{qos}\
         flow-export: {{ version: 9, collectors: [\"{{COLLECTOR}}\"], cache-size: {cache}, \
         active-timeout: 60, inactive-timeout: 5 }}\n"
    );
    s.id = id;
    s.title = format!("{}; services off, then on", s.title);
    s.seed_title = seed_title;
    s.procedure = Procedure::ServicesOnOff(OnOffPlan {
        with_services: with,
        acl: "ME_ACL".into(),
        acl_lines: acl_n,
        qos_lines: qos_n,
        qos_class: class.into(),
        cache,
        flows: s.flows,
    });
    s.notes.push(format!(
        "Services on: an ACL of {acl_n} lines (family any: L2, L3 and L4 entries the traffic \
         does not match, then `permit`) in on every interface; a QoS policy of {qos_n} match \
         lines in 10 classes, the traffic matching the last line (re-marked DSCP 26), in on \
         every interface; NetFlow v9 on ingress of every interface (each packet once), cache \
         {cache} flows, to a collector socket the tester holds."
    ));
    s
}

/// QOS-1: two streams at a fixed load above PIR, each through an input policer: a two-rate
/// (RFC 2698: conform transmit, exceed re-marked and transmitted, violate dropped) and a
/// single-rate one (RFC 2697). Bursts are 1 s of their rate, so a tester that loses its core
/// for up to that long (on this shared VM: hundreds of milliseconds) costs the buckets no credit:
/// an idle spell longer than the bucket's time fills it and wastes the rest, as it should, and
/// would read as a rate below CIR that the policer is not to blame for (measured with 250 ms
/// bursts under contention: -0.6%). Both buckets start full, so their fill is taken out of the
/// rates. The load, 90% of 1 GbE, is far above every rate, so
/// between such spells the buckets never fill.
pub(super) fn qos1(o: &ScenarioOpts) -> Scenario {
    let ports: Vec<(String, f64)> = (0..4).map(|i| (format!("p{i}"), 1e9)).collect();
    let extra: Vec<String> = (0..4)
        .map(|i| {
            format!(
                "  - {{ prefix: 10.{i}.0.0/16, via: {} }}",
                Ipv4Addr::from(if_v4(i) | 2)
            )
        })
        .collect();
    let base = config(&ports, &|_| "default".into(), &extra, o.workers, false);
    let two = PolicedStream {
        stream: 0,
        interface: "p0".into(),
        policy: "two-rate".into(),
        class: "policed".into(),
        cir: 100_000_000,
        pir: Some(200_000_000),
        cbs: 12_500_000,
        pbs: 25_000_000,
    };
    let one = PolicedStream {
        stream: 1,
        interface: "p2".into(),
        policy: "single-rate".into(),
        class: "policed".into(),
        cir: 150_000_000,
        pir: None,
        cbs: 18_750_000,
        pbs: 18_750_000,
    };
    let mut y = with_if_services(&base, &|n| match n {
        "p0" => Some("qos-in: two-rate".into()),
        "p2" => Some("qos-in: single-rate".into()),
        _ => None,
    });
    y += "qos:\n  classes:\n    - { name: policed, match: [\"udp\"] }\n  policies:\n";
    y += &format!(
        "    - name: two-rate\n      classes:\n        - {{ class: policed, police: {{ cir: {}, \
         cbs: {}, pir: {}, pbs: {}, conform: transmit, exceed: set-dscp 10, violate: drop }} }}\n",
        two.cir,
        two.cbs,
        two.pir.unwrap_or(0),
        two.pbs
    );
    y += &format!(
        "    - name: single-rate\n      classes:\n        - {{ class: policed, police: {{ cir: {}, \
         cbs: {}, ebs: {}, conform: transmit, exceed: set-dscp 12, violate: drop }} }}\n",
        one.cir, one.cbs, one.pbs
    );
    let streams = vec![
        base_stream("p0>p1 two-rate".into(), 0, 1),
        base_stream("p2>p3 single-rate".into(), 2, 3),
    ];
    let flows = streams.iter().map(|s| s.flows()).sum();
    Scenario {
        id: "QOS-1",
        title: "Policer accuracy: a two-rate (CIR 100 Mbit/s, PIR 200 Mbit/s) and a single-rate \
                (CIR 150 Mbit/s) policer, each metering one stream offered above its rates"
            .into(),
        seed_title: "Issue 5 acceptance: conform / exceed / violate rates within 1% of the \
                     configured CIR and PIR, measured against the tester's offered load",
        config_yaml: y,
        route_lines: vec![],
        files: vec![],
        load_scale: vec![1.0; ports.len()],
        ports,
        streams,
        sizes: vec![FrameSizes::Fixed(512)],
        procedure: Procedure::Policer(PolicerPlan {
            load: 0.9,
            policers: vec![two, one],
        }),
        loss_tolerance: 0.0,
        seed_seconds: 0.0,
        seed: vec![SeedRow {
            key: "512".into(),
            fps: None,
            note: "within 1% of CIR and PIR".into(),
        }],
        notes: vec![
            "Rates are IP-packet bits (what the policers meter): a 512-byte frame is a 494-byte \
             packet. Bursts are 1 s of their rate; both buckets start full (RFC 2697/2698), so \
             each measured rate leaves the buckets' initial fill out."
                .into(),
        ],
        flows,
        vpn: VpnPlan::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use control::config::entry::{self, Family};

    #[test]
    fn xr5_lists_are_seeded_unmergeable_and_end_with_the_denied_flow() {
        let o = ScenarioOpts::default();
        let a = xr5(&o);
        let b = xr5(&o);
        assert_eq!(a.files, b.files, "the same seed, the same lists");
        let Procedure::Acl(p) = &a.procedure else {
            panic!("XR-5 runs the ACL procedure")
        };
        assert_eq!(p.entries_per_list, 5001);
        assert_eq!(p.denied_seq, 50_000);
        for (name, text) in &a.files {
            let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
            assert_eq!(lines.len(), 5001, "{name}");
            assert_eq!(lines[5000], "permit");
            let fam = if name.contains("ipv6") {
                Family::Ipv6
            } else {
                Family::Ipv4
            };
            let mut seen = HashSet::new();
            for l in &lines {
                let e = entry::parse(l, fam, true).unwrap_or_else(|e| panic!("{l}: {e:?}"));
                assert_eq!(e.log, name.contains("-log") && *l != "permit");
                assert!(seen.insert(l.to_string()), "{name}: {l} twice");
            }
        }
        let v4 = &a.files[0].1;
        let last_deny = v4.lines().rev().nth(1).unwrap();
        assert_eq!(
            last_deny,
            format!(
                "deny udp src host {} sport 1025 dst host {} dport 5000",
                p.denied_flow.split('(').next().unwrap(),
                p.denied_flow
                    .split("-> ")
                    .nth(1)
                    .unwrap()
                    .split('(')
                    .next()
                    .unwrap()
            )
        );
        // Half the entries use the streams' addresses (20/8 to 45/8), the other half 140/8.
        let others = v4.lines().filter(|l| l.contains("src host 140.")).count();
        assert!((2499..=2500).contains(&others), "{others}");
        // The denied stream is the only one sending from port 1025.
        let st = &a.streams[p.denied_stream];
        assert_eq!(st.udp, Some((1025, 5000)));
        assert!(
            a.streams
                .iter()
                .filter(|s| s.udp.unwrap().0 == 1025)
                .count()
                == 1
        );
    }

    #[test]
    fn no_two_xr5_entries_merge() {
        let t = xr5_tuples(&[], false, 3000, None);
        let set: HashSet<Tuple> = t.iter().copied().collect();
        assert_eq!(set.len(), 3000);
        for &(a, b, p, q) in &t {
            for n in [
                (a + 1, b, p, q),
                (a, b + 1, p, q),
                (a, b, p.wrapping_add(1), q),
                (a, b, p, q.wrapping_add(1)),
            ] {
                assert!(!set.contains(&n), "{a} {b} {p} {q} has a neighbour");
            }
        }
    }

    #[test]
    fn me1s_lists_parse_and_have_their_sizes() {
        let acl = me1_acl(10_000);
        let lines: Vec<&str> = acl.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(lines.len(), 10_000);
        assert_eq!(*lines.last().unwrap(), "permit");
        let mut l2 = 0;
        for l in &lines {
            entry::parse(l, Family::Any, true).unwrap_or_else(|e| panic!("{l}: {e:?}"));
            l2 += usize::from(l.contains("mac") || l.starts_with("deny ethertype"));
        }
        assert_eq!(l2, 2500);
        let (qos, class) = me1_qos(500);
        let n: usize = qos
            .lines()
            .filter(|l| l.contains("match:"))
            .map(|l| l.matches('"').count() / 2)
            .sum();
        assert_eq!(n, 500);
        assert!(qos.contains(&format!("class: {class}, set: {{ dscp: 26, exp: 3 }}")));
    }
}

#[cfg(test)]
mod config_tests {
    use super::*;

    /// The configs the procedures apply under the running router load as they will be applied:
    /// from a file beside the entry files.
    #[test]
    fn the_applied_configs_load() {
        let dir = std::env::temp_dir().join(format!("lr-svc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let o = ScenarioOpts {
            scale: 0.01,
            ..Default::default()
        };
        for id in ["XR-5", "ME-1S", "ME-3S", "ME-4S", "ME-6S", "QOS-1"] {
            let s = build(id, &o).unwrap();
            for (n, t) in &s.files {
                std::fs::write(dir.join(n), t).unwrap();
            }
            std::fs::write(dir.join("scenario.routes"), s.route_lines.join("\n")).unwrap();
            let texts = match &s.procedure {
                Procedure::Acl(p) => vec![p.with_acl.clone(), p.with_log.clone()],
                Procedure::ServicesOnOff(p) => {
                    vec![p.with_services.replace("{COLLECTOR}", "127.0.0.1:9")]
                }
                _ => vec![s.config_yaml.clone()],
            };
            for t in texts {
                let path = dir.join("scenario.yaml");
                std::fs::write(&path, &t).unwrap();
                let cfg = control::config::load(&path).unwrap_or_else(|e| panic!("{id}: {e}\n{t}"));
                let svc = &cfg.services;
                match id {
                    "XR-5" => {
                        assert_eq!(svc.acls.len(), 2);
                        assert!(
                            cfg.interfaces
                                .iter()
                                .all(|i| i.services.acl_in.len() == 2
                                    && i.services.acl_out.len() == 2)
                        );
                    }
                    "ME-1S" | "ME-3S" | "ME-4S" | "ME-6S" => {
                        assert_eq!(svc.acls[0].entries.len(), 100);
                        assert!(svc.flow_export.is_some());
                        // Ingress accounting everywhere: each packet is one record's.
                        assert!(cfg.interfaces.iter().all(|i| i.services.flow_in
                            && !i.services.flow_out
                            && i.services.qos_in.is_some()));
                        // The traffic's class re-marks EXP too (ME-6S's labels carry it).
                        let c = svc.policies[0]
                            .classes
                            .iter()
                            .find(|c| c.class == "me1-traffic");
                        assert_eq!(
                            c.map(|c| (c.set_dscp, c.set_exp)),
                            Some((Some(26), Some(3)))
                        );
                    }
                    _ => assert_eq!(svc.policies.len(), 2),
                }
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
