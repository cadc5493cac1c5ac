//! MPLS through a router built from YAML: labels swapped, popped and pushed, a VPN label popped
//! into its VRF, pseudowires both ways (VLAN and port mode), and the config's refusals.

mod common;

use std::path::Path;

use common::*;
use dataplane::mpls::Entry;
use dataplane::DropReason;

const CONFIG: &str = r#"
router: { workers: 1 }
vrfs: [cust]
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
  - { name: p2, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24] }
  - { name: p0.100, port: p0, vlan: 100, mac: "02:00:00:00:00:01" }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [198.51.100.1/24] }
  - { name: p2, port: p2, mac: "02:00:00:00:02:01" }
  - { name: c1, port: p0, vlan: 200, vrf: cust, mac: "02:00:00:00:00:01", ipv4: [203.0.113.1/24] }
neighbors:
  - { interface: p0, ip: 192.0.2.2, mac: "02:00:00:00:00:02" }
  - { interface: p1, ip: 198.51.100.2, mac: "02:00:00:00:01:02" }
  - { interface: c1, ip: 203.0.113.2, mac: "02:00:00:00:00:03" }
routes:
  - { prefix: 10.9.0.0/16, via: 198.51.100.2, labels: [16, 17] }
  - { prefix: 10.8.0.0/16, via: [198.51.100.2, 192.0.2.2], labels: [40] }
  - { prefix: 10.50.0.0/16, vrf: cust, via: 203.0.113.2 }
mpls:
  interfaces: [p1]
  labels:
    - { in: 100, out: [200], via: 198.51.100.2 }
    - { in: 101, out: pop, via: 192.0.2.2 }
    - { in: 102, lookup: cust }
  pseudowires:
    - { name: pw-vlan, interface: p0.100, peer: 10.255.0.2, vc-id: 100, local-label: 1000,
        remote-label: 2000, transport: [300], via: 198.51.100.2, control-word: true }
    - { name: pw-port, interface: p2, peer: 10.255.0.2, vc-id: 5, local-label: 1001,
        remote-label: 2001, via: 198.51.100.2 }
"#;

const P1_MAC: [u8; 6] = [2, 0, 0, 0, 1, 1];
const CORE_PEER: [u8; 6] = [2, 0, 0, 0, 1, 2];

/// A labelled frame into p1 (from its neighbour): `labels` (label, TTL) over `payload`.
fn labelled(labels: &[(u32, u8)], payload: &[u8]) -> Vec<u8> {
    let mut f = P1_MAC.to_vec();
    f.extend_from_slice(&CORE_PEER);
    f.extend_from_slice(&[0x88, 0x47]);
    for (i, &(l, ttl)) in labels.iter().enumerate() {
        let s = u32::from(i + 1 == labels.len());
        f.extend_from_slice(&(l << 12 | s << 8 | u32::from(ttl)).to_be_bytes());
    }
    f.extend_from_slice(payload);
    f
}

fn ip4(dst: [u8; 4], ttl: u8) -> Vec<u8> {
    ip4_frame(dst, ttl, 26, false, 17, 1000)[14..].to_vec()
}

#[test]
fn labels_are_switched_popped_and_pushed() {
    let mut bed = Bed::from_text(CONFIG);
    let out = bed.send(
        1,
        &[
            labelled(&[(100, 64)], &ip4([10, 1, 1, 1], 64)),
            labelled(&[(101, 20)], &ip4([10, 1, 1, 1], 64)),
            labelled(&[(102, 64)], &ip4([10, 50, 0, 9], 64)),
            labelled(&[(555, 64)], &ip4([10, 1, 1, 1], 64)),
        ],
    );
    // Swapped back out of p1 with TTL 63.
    let f = &out[1][0];
    assert_eq!(&f[..6], &CORE_PEER);
    let e = Entry::parse(&f[14..]);
    assert_eq!((e.label, e.ttl, e.bottom), (200, 63, true));
    // Popped towards p0's neighbour: plain IPv4 with TTL 19.
    let f = &out[0][0];
    assert_eq!(
        (&f[..6], &f[12..14]),
        (&[2, 0, 0, 0, 0, 2][..], &[8, 0][..])
    );
    assert_eq!(f[14 + 8], 19);
    assert!(header_ok(&f[14..34]));
    // Popped into VRF cust, routed out of c1 (VLAN 200) to its CE.
    let f = &out[0][1];
    assert_eq!(&f[..6], &[2, 0, 0, 0, 0, 3]);
    assert_eq!(u16::from_be_bytes([f[14], f[15]]) & 0xfff, 200);
    assert_eq!(f[18 + 8], 63);
    assert_eq!(out[0].len() + out[1].len() + out[2].len(), 3);
    let snap = bed.snapshot();
    assert_eq!(snap.drops[DropReason::MplsUnknownLabel as usize], 1);

    // A labelled route: 16 over 17 out of p1.
    let out = bed.send(0, &[ip4_frame([10, 9, 0, 1], 64, 26, false, 17, 1)]);
    let f = &out[1][0];
    let (a, b) = (Entry::parse(&f[14..]), Entry::parse(&f[18..]));
    assert_eq!(
        (a.label, a.bottom, b.label, b.bottom, b.ttl),
        (16, false, 17, true, 63)
    );
}

#[test]
fn a_label_towards_an_unresolved_neighbour_is_counted_as_such() {
    // 198.51.100.9 is on p1's subnet but has no neighbour entry: its MAC is not known.
    let text = CONFIG.replace(
        "    - { in: 102, lookup: cust }\n",
        "    - { in: 102, lookup: cust }\n    - { in: 103, out: [201], via: 198.51.100.9 }\n",
    );
    let mut bed = Bed::from_text(&text);
    let out = bed.send(1, &[labelled(&[(103, 64)], &ip4([10, 1, 1, 1], 64))]);
    // Not switched; perhaps an ARP request for the neighbour, never the labelled packet.
    assert!(out.iter().flatten().all(|f| f[12..14] != [0x88, 0x47]));
    let snap = bed.snapshot();
    assert_eq!(snap.drops[DropReason::NeighborUnresolved as usize], 1);
    assert_eq!(snap.drops[DropReason::NoRoute as usize], 0);
}

#[test]
fn a_labelled_route_over_two_paths_spreads_its_flows() {
    let mut bed = Bed::from_text(CONFIG);
    let frames: Vec<_> = (0..64)
        .map(|i| ip4_frame([10, 8, 0, 1], 64, 26, false, 17, 1000 + i))
        .collect();
    let out = bed.send(0, &frames);
    let (p0, p1) = (out[0].len(), out[1].len());
    assert_eq!(p0 + p1, 64);
    assert!(p0 > 8 && p1 > 8, "{p0} / {p1}");
    for f in out[0].iter().chain(&out[1]) {
        let e = Entry::parse(&f[14..]);
        assert_eq!((e.label, e.bottom, e.ttl), (40, true, 63));
    }
    // A flow keeps its path.
    let again = bed.send(0, &frames[..1]);
    let first_on_p0 = out[0].iter().any(|f| f[14 + 4 + 20..] == frames[0][34..]);
    assert_eq!(again[0].len() == 1, first_on_p0);
}

#[test]
fn pseudowires_carry_frames_both_ways() {
    let mut bed = Bed::from_text(CONFIG);
    // A customer frame on p0.100 (to any MAC) goes over pw-vlan: 300 / 2000, control word.
    let mut cust = vec![
        2, 0, 0, 0, 0xaa, 1, 2, 0, 0, 0, 0xbb, 2, 0x81, 0, 0, 100, 0x08, 0x00,
    ];
    cust.extend_from_slice(&ip4([10, 1, 1, 1], 64));
    let out = bed.send(0, std::slice::from_ref(&cust));
    let f = &out[1][0];
    assert_eq!(&f[12..14], &[0x88, 0x47]);
    let (t, p) = (Entry::parse(&f[14..]), Entry::parse(&f[18..]));
    assert_eq!((t.label, p.label, p.bottom), (300, 2000, true));
    assert_eq!(&f[22..26], &[0; 4]);
    assert_eq!(&f[26..], &cust[..]);
    // An untagged frame into p2 (port mode, no control word) goes over pw-port: 2001 alone.
    let mut raw = vec![2, 0, 0, 0, 0xaa, 1, 2, 0, 0, 0, 0xbb, 2, 0x08, 0x00];
    raw.extend_from_slice(&ip4([10, 1, 1, 1], 64));
    let out = bed.send(2, std::slice::from_ref(&raw));
    let f = &out[1][0];
    let p = Entry::parse(&f[14..]);
    assert_eq!((p.label, p.bottom, p.ttl), (2001, true, 255));
    assert_eq!(&f[18..], &raw[..]);
    // Back: the far end's frame on 1000 leaves p0 tagged 100; on 1001 leaves p2 as it came.
    let mut back = vec![0, 0, 0, 0];
    let mut far = cust.clone();
    far[14..16].copy_from_slice(&[0x00, 0x07]);
    back.extend_from_slice(&far);
    let out = bed.send(
        1,
        &[
            labelled(&[(1000, 255)], &back),
            labelled(&[(1001, 255)], &raw),
        ],
    );
    assert_eq!(
        out[0][0], cust,
        "VLAN rewritten to the attachment circuit's"
    );
    assert_eq!(out[2][0], raw);
}

/// Services on labelled traffic as configured: a transit label classified on its EXP and
/// re-marked, a pseudowire's circuit with an ACL on the IP packet inside its frames and a class
/// giving the pseudowire's labels their EXP.
#[test]
fn a_transit_lsr_marks_exp_and_a_circuits_services_see_inside_its_frames() {
    let text = CONFIG
        .replace(
            r#"{ name: p0.100, port: p0, vlan: 100, mac: "02:00:00:00:00:01" }"#,
            r#"{ name: p0.100, port: p0, vlan: 100, mac: "02:00:00:00:00:01", acl-in: [NO-DNS], qos-in: AC }"#,
        )
        .replace(
            r#"ipv4: [198.51.100.1/24] }"#,
            r#"ipv4: [198.51.100.1/24], qos-in: CORE }"#,
        )
        + r#"
acls:
  - { name: NO-DNS, family: any, entries: ["10 deny udp dport 53", "20 permit"] }
qos:
  classes:
    - { name: gold, match: ["exp 5"] }
    - { name: cust, match: ["udp"] }
  policies:
    - name: CORE
      classes:
        - { class: gold, set: { exp: 2 } }
    - name: AC
      classes:
        - { class: cust, set: { exp: 4 } }
"#;
    let mut bed = Bed::from_text(&text);
    let with_tc = |mut f: Vec<u8>, tc: u8| {
        f[14 + 2] |= tc << 1;
        f
    };
    let out = bed.send(
        1,
        &[
            with_tc(labelled(&[(100, 64)], &ip4([10, 1, 1, 1], 64)), 5),
            with_tc(labelled(&[(100, 64)], &ip4([10, 1, 1, 1], 64)), 1),
        ],
    );
    let tcs: Vec<(u32, u8)> = out[1]
        .iter()
        .map(|f| Entry::parse(&f[14..]))
        .map(|e| (e.label, e.tc))
        .collect();
    assert_eq!(tcs, [(200, 2), (200, 1)], "EXP 5 re-marked 2; EXP 1 kept");
    // Onto pw-vlan: the UDP packet to 5000 leaves with EXP 4 on both labels; DNS is denied.
    let cust = |dport: u16| {
        let mut f = vec![
            2, 0, 0, 0, 0xaa, 1, 2, 0, 0, 0, 0xbb, 2, 0x81, 0, 0, 100, 8, 0,
        ];
        let mut ip = ip4([10, 1, 1, 1], 64);
        ip[22..24].copy_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&ip);
        f
    };
    let out = bed.send(0, &[cust(5000), cust(53)]);
    assert_eq!(out[1].len(), 1, "the DNS packet denied");
    let f = &out[1][0];
    let (t, p) = (Entry::parse(&f[14..]), Entry::parse(&f[18..]));
    assert_eq!([(t.label, t.tc), (p.label, p.tc)], [(300, 4), (2000, 4)]);
    assert_eq!(&f[26 + 18 + 22..26 + 18 + 24], &5000u16.to_be_bytes());
    let snap = bed.snapshot();
    assert_eq!(snap.drops[DropReason::AclDenied as usize], 1);
}

fn errors(text: &str) -> Vec<String> {
    control::config::parse(text, Path::new("r.yaml"))
        .expect_err("refused")
        .0
        .iter()
        .map(|e| e.to_string())
        .collect()
}

#[test]
fn bad_mpls_config_is_refused_with_positions() {
    let bad = CONFIG
        .replace("{ in: 101, out: pop", "{ in: 100, out: pop")
        .replace("lookup: cust", "lookup: nowhere")
        .replace("interfaces: [p1]", "interfaces: [p1, p9]")
        .replace("interface: p2,", "interface: p1,");
    let e = errors(&bad);
    let want = [
        "r.yaml:23:20: mpls.interfaces[1]: no interface named `p9`",
        "r.yaml:26:7: mpls.labels[1]: label 100 is already used (line 25, `mpls.labels[0]`)",
        "r.yaml:27:7: mpls.labels[2]: label 102: VRF `nowhere` is not defined under `vrfs`",
        "r.yaml:31:7: mpls.pseudowires[1]: interface `p1` has addresses: an attachment circuit carries frames, not routes",
    ];
    assert_eq!(e, want);
    let e = errors(&CONFIG.replace("out: [200]", "out: [200, 1048576, 3, 4, 5, 6]"));
    assert_eq!(
        e,
        [
            "r.yaml:25:23: mpls.labels[0].out: at most 4 labels are pushed",
            "r.yaml:25:29: mpls.labels[0].out[1]: `1048576` is not a label (a number from 0 to 1048575)",
        ]
    );
    let e = errors(&CONFIG.replace("{ in: 100,", "{ in: 7,"));
    assert_eq!(
        e,
        ["r.yaml:25:13: mpls.labels[0].in: label 7 is reserved (0-15); incoming labels start at 16"]
    );
}

#[test]
fn the_shows_count_labels_and_pseudowires() {
    use api::views::Render;
    let dir = std::env::temp_dir().join(format!("linerate-mpls-show-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (core, mut peers) = control_core(&dir);
    let pool = core.lock("test").runtime.pool.clone();
    let mut cache = dataplane::BufCache::new(pool);
    let mut cust = vec![
        2, 0, 0, 0, 0xaa, 1, 2, 0, 0, 0, 0xbb, 2, 0x81, 0, 0, 100, 0x08, 0x00,
    ];
    cust.extend_from_slice(&ip4([10, 1, 1, 1], 64));
    let mut send = |peer: usize, f: &[u8], cache: &mut dataplane::BufCache| {
        let mut b = cache.alloc().unwrap();
        assert!(b.fill(f));
        let mut v = vec![b];
        while !v.is_empty() {
            peers[peer].to_router[0].push_burst(&mut v);
        }
    };
    for _ in 0..3 {
        send(0, &cust, &mut cache);
        send(
            1,
            &labelled(&[(100, 64)], &ip4([10, 1, 1, 1], 64)),
            &mut cache,
        );
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let l2 = loop {
        let l2 = core.l2vpn_view();
        let t = core.mpls_view();
        if l2.pseudowires[0].tx_packets == 3 && t.labels[0].packets == 3 {
            break l2;
        }
        assert!(std::time::Instant::now() < deadline, "{l2:?} {t:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let pw = &l2.pseudowires[0];
    assert_eq!(
        (pw.name.as_str(), pw.vc_type, pw.state.as_str(), pw.tx_bytes),
        ("pw-vlan", 4, "up", 3 * cust.len() as u64)
    );
    assert_eq!(pw.next_hop, "198.51.100.2 on p1");
    assert_eq!(
        (pw.local_label, pw.remote_label, pw.transport.as_str()),
        (1000, Some(2000), "300")
    );
    assert_eq!(
        (
            l2.pseudowires[1].vc_type,
            l2.pseudowires[1].transport.as_str()
        ),
        (5, "")
    );
    let t = core.mpls_view();
    let labels: Vec<(u32, &str, &str)> = t
        .labels
        .iter()
        .map(|l| (l.label, l.action.as_str(), l.out.as_str()))
        .collect();
    assert_eq!(
        labels,
        [
            (100, "swap", "200"),
            (101, "pop", ""),
            (102, "lookup", ""),
            (1000, "pseudowire", ""),
            (1001, "pseudowire", "")
        ]
    );
    assert_eq!(t.labels[0].to, ["198.51.100.2 on p1"]);
    assert_eq!(t.labels[2].to, ["vrf cust"]);
    let text = t.render();
    assert!(text.contains("MPLS on p1; TTL uniform; 5 labels"), "{text}");
    let metrics = core.metrics();
    assert!(
        metrics.contains(
            "linerate_pseudowire_packets_total{pseudowire=\"pw-vlan\",direction=\"to_pw\"} 3"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("linerate_mpls_label_packets_total{label=\"100\"} 3"));
    drop(peers);
}

fn control_core(dir: &Path) -> (std::sync::Arc<control::mgmt::Core>, Vec<control::MemPeer>) {
    common::core_with(dir, CONFIG)
}

/// LDP's prefix labels (what the speaker works out, `control::ldp`) through the data plane:
/// a label it advertised swapped to the next hop's peer's, one popped where the peer is the
/// egress, the peer's label pushed on the route's IP packets, and the route put back when the
/// label goes.
#[test]
fn ldp_labels_are_swapped_popped_and_pushed_on_routes() {
    use control::ldp::engine::fec::FecBinding;
    let text = CONFIG
        .replace(
            "  - { prefix: 10.50.0.0/16, vrf: cust, via: 203.0.113.2 }",
            "  - { prefix: 10.50.0.0/16, vrf: cust, via: 203.0.113.2 }\n  - { prefix: 10.60.0.0/16, via: 198.51.100.2 }\n  - { prefix: 10.61.0.0/16, via: 192.0.2.2 }",
        )
        .replace(
            "mpls:\n  interfaces: [p1]",
            "mpls:\n  interfaces: [p1]\n  ldp: { router-id: 192.0.2.1, interfaces: [p1] }",
        );
    let mut bed = Bed::from_text(&text);
    let (core, edge): (std::net::Ipv4Addr, std::net::Ipv4Addr) = (
        "198.51.100.2".parse().unwrap(),
        "192.0.2.2".parse().unwrap(),
    );
    // The FECs: routes through neighbours, not the statically labelled ones nor connected ones.
    let mut fecs: Vec<(String, Vec<std::net::Ipv4Addr>)> = bed
        .router
        .ldp_routes()
        .into_iter()
        .map(|r| (format!("{}/{}", r.prefix, r.len), r.next_hops))
        .collect();
    fecs.sort();
    assert_eq!(
        fecs,
        vec![
            ("10.60.0.0/16".to_string(), vec![core]),
            ("10.61.0.0/16".to_string(), vec![edge]),
        ]
    );
    let bindings = vec![
        FecBinding {
            prefix: "10.60.0.0".parse().unwrap(),
            len: 16,
            local: Some(16_000),
            out: vec![(core, Some(500))],
        },
        FecBinding {
            prefix: "10.61.0.0".parse().unwrap(),
            len: 16,
            local: Some(16_001),
            out: vec![(edge, None)],
        },
    ];
    assert!(bed.router.set_ldp(bindings).unwrap());
    bed.router.publish().unwrap();
    let out = bed.send(
        1,
        &[
            labelled(&[(16_000, 64)], &ip4([10, 60, 1, 1], 64)),
            labelled(&[(16_001, 64)], &ip4([10, 61, 1, 1], 64)),
        ],
    );
    // Swapped to the peer's 500, TTL one less, back out of p1.
    let f = &out[1][0];
    assert_eq!(&f[..6], &CORE_PEER);
    let e = Entry::parse(&f[14..]);
    assert_eq!((e.label, e.ttl, e.bottom), (500, 63, true));
    // Popped: out of p0 as the IP packet, its TTL the label's less one.
    let f = &out[0][0];
    assert_eq!(&f[12..14], &[0x08, 0x00]);
    assert_eq!(f[14 + 8], 63);
    // An IP packet to the labelled route leaves under the peer's label; the route reads as
    // its own next hop still.
    let out = bed.send(0, &[ip4_frame([10, 60, 2, 2], 64, 26, false, 17, 1000)]);
    let f = &out[1][0];
    assert_eq!(&f[12..14], &[0x88, 0x47]);
    assert_eq!(Entry::parse(&f[14..]).label, 500);
    let fecs = bed.router.ldp_routes();
    assert!(fecs.iter().any(|r| r.len == 16
        && r.prefix == "10.60.0.0".parse::<std::net::Ipv4Addr>().unwrap()
        && r.next_hops == vec![core]));
    // The label goes: the route is its source's again.
    assert!(bed.router.set_ldp(vec![]).unwrap());
    bed.router.publish().unwrap();
    let out = bed.send(
        0,
        &[
            ip4_frame([10, 60, 2, 2], 64, 26, false, 17, 1000),
            labelled(&[(16_000, 64)], &ip4([10, 60, 1, 1], 64)),
        ],
    );
    assert_eq!(out[1].len(), 1);
    assert_eq!(&out[1][0][12..14], &[0x08, 0x00]);
    assert!(bed.router.ldp.labelled.is_empty());
}

#[test]
fn a_configured_label_in_ldps_range_is_refused() {
    let text = CONFIG.replace(
        "mpls:\n  interfaces: [p1]",
        "mpls:\n  interfaces: [p1]\n  ldp: { router-id: 192.0.2.1, interfaces: [p0, p1], label-range: [100, 200] }",
    );
    let e = errors(&text);
    assert!(
        e.iter()
            .any(|m| m.contains("label 100 is in LDP's label range (100-200")),
        "{e:?}"
    );
    assert!(
        e.iter()
            .any(|m| m.contains("interface `p0` is not in `mpls.interfaces`")),
        "{e:?}"
    );
}

/// A pseudowire with neither `via` nor `lsp` takes the default VRF's route to its peer: the
/// route's neighbour, and LDP's label for the peer's /32 as the transport label once LDP gives
/// one; it follows the route when it moves, and is down (dropping, counted) while there is none.
#[test]
fn a_pseudowire_without_via_follows_the_route_to_its_peer_and_ldps_label() {
    use control::config::{Prefix, Target};
    use control::ldp::engine::fec::FecBinding;
    let text = CONFIG
        .replace(
            "  - { name: p2, port: p2, mac: \"02:00:00:00:02:01\" }",
            "  - { name: p2, port: p2, mac: \"02:00:00:00:02:01\" }\n  - { name: p0.300, port: p0, vlan: 300, mac: \"02:00:00:00:00:01\" }",
        )
        .replace(
            "  - { prefix: 10.50.0.0/16, vrf: cust, via: 203.0.113.2 }",
            "  - { prefix: 10.50.0.0/16, vrf: cust, via: 203.0.113.2 }\n  - { prefix: 10.255.0.3/32, via: 198.51.100.2 }",
        )
        .replace(
            "mpls:\n  interfaces: [p1]",
            "mpls:\n  interfaces: [p1]\n  ldp: { router-id: 192.0.2.1, interfaces: [p1] }",
        )
        .replace(
            "  pseudowires:\n",
            "  pseudowires:\n    - { name: pw-route, interface: p0.300, peer: 10.255.0.3, vc-id: 300, local-label: 1002,\n        remote-label: 2002 }\n",
        );
    let mut bed = Bed::from_text(&text);
    let mut cust = vec![
        2, 0, 0, 0, 0xaa, 1, 2, 0, 0, 0, 0xbb, 2, 0x81, 0, 1, 44, 0x08, 0x00,
    ];
    cust.extend_from_slice(&ip4([10, 1, 1, 1], 64));
    let labels_out = |f: &[u8]| {
        assert_eq!(&f[12..14], &[0x88, 0x47]);
        let mut out = Vec::new();
        let mut at = 14;
        loop {
            let e = Entry::parse(&f[at..]);
            out.push(e.label);
            at += 4;
            if e.bottom {
                return out;
            }
        }
    };
    // The route is unlabelled: the pseudowire's own label alone, to the route's neighbour.
    let out = bed.send(0, std::slice::from_ref(&cust));
    assert_eq!(out[1].len(), 1);
    assert_eq!(&out[1][0][..6], &CORE_PEER);
    assert_eq!(labels_out(&out[1][0]), [2002]);
    // LDP's label for the peer's /32 from that neighbour: the transport label.
    let core: std::net::Ipv4Addr = "198.51.100.2".parse().unwrap();
    let binding = FecBinding {
        prefix: "10.255.0.3".parse().unwrap(),
        len: 32,
        local: Some(16_000),
        out: vec![(core, Some(600))],
    };
    assert!(bed.router.set_ldp(vec![binding]).unwrap());
    bed.router.publish().unwrap();
    let out = bed.send(0, std::slice::from_ref(&cust));
    assert_eq!(labels_out(&out[1][0]), [600, 2002]);
    // Rebuilt twice since (LDP's bindings, the route moved): the pseudowire kept its count.
    assert_eq!(bed.router.mpls.as_ref().unwrap().read_pw(0)[0], 2);
    assert_eq!(
        &out[1][0][22..],
        &cust[..],
        "the frame whole behind the labels"
    );
    // The route goes: the pseudowire is down and drops what its circuit sends.
    let peer = Prefix::V4(u32::from(std::net::Ipv4Addr::new(10, 255, 0, 3)), 32);
    assert!(bed.router.remove_route(0, peer));
    bed.router.publish().unwrap();
    let out = bed.send(0, std::slice::from_ref(&cust));
    assert!(out.iter().all(|p| p.is_empty()), "{out:?}");
    assert!(!bed.router.mpls.as_ref().unwrap().pws[0].up);
    assert_eq!(bed.snapshot().drops[DropReason::PwDown as usize], 1);
    // Back through the other neighbour: the pseudowire follows it (no LDP label from it).
    bed.router
        .add_route(0, peer, &Target::Via(vec!["192.0.2.2".parse().unwrap()]))
        .unwrap();
    bed.router.publish().unwrap();
    let out = bed.send(0, std::slice::from_ref(&cust));
    assert_eq!(out[0].len(), 1);
    assert_eq!(&out[0][0][..6], &[2, 0, 0, 0, 0, 2]);
    assert_eq!(labels_out(&out[0][0]), [2002]);
    // A pseudowire that names transport labels names its next hop too.
    let e = errors(&text.replace(
        "remote-label: 2002 }",
        "remote-label: 2002, transport: [5000] }",
    ));
    assert_eq!(
        e,
        ["r.yaml:32:7: mpls.pseudowires[0].transport: `transport` goes with `via` (without both, the way to the peer is the route to it)"]
    );
}
