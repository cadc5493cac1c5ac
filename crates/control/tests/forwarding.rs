//! Black-box tests of the packet path: a router built from a YAML config, frames pushed into its
//! mem ports, and what comes out of each port checked field by field.

mod common;

use common::*;
use dataplane::DropReason;
use packet::checksum;

const CONFIG: &str = r#"
router: { workers: 1, icmp-rate: ICMP_RATE }
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
  - { name: p2, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24], ipv6: ["2001:db8:1::1/64"] }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", mtu: 1400, ipv4: [198.51.100.1/24], ipv6: ["2001:db8:2::1/64"] }
  - { name: p1.100, port: p1, vlan: 100, mac: "02:00:00:00:01:01", ipv4: [203.0.113.1/24] }
  - { name: p2, port: p2, mac: "02:00:00:00:02:01", ipv4: [198.18.0.1/24] }
neighbors:
  - { interface: p0, ip: 192.0.2.2, mac: "02:00:00:00:00:02" }
  - { interface: p0, ip: "2001:db8:1::2", mac: "02:00:00:00:00:02" }
  - { interface: p1, ip: 198.51.100.2, mac: "02:00:00:00:01:02" }
  - { interface: p1, ip: "2001:db8:2::2", mac: "02:00:00:00:01:02" }
  - { interface: p1.100, ip: 203.0.113.2, mac: "02:00:00:00:01:03" }
  - { interface: p2, ip: 198.18.0.2, mac: "02:00:00:00:02:02" }
routes:
  - { prefix: 10.0.0.0/8, via: 198.51.100.2 }
  - { prefix: 10.100.0.0/16, via: 203.0.113.2 }
  - { prefix: 10.200.0.0/16, via: [198.51.100.2, 198.18.0.2] }
  - { prefix: "2001:db8:ff::/48", via: "2001:db8:2::2" }
  - { prefix: 10.66.0.0/16, blackhole: true }
  - { prefix: 10.67.0.0/16, reject: true }
"#;

fn bed(icmp_rate: u32) -> Bed {
    Bed::from_text(&CONFIG.replace("ICMP_RATE", &icmp_rate.to_string()))
}

#[test]
fn ipv4_forwarded_with_ttl_checksum_and_macs_rewritten() {
    let mut bed = bed(1000);
    let input = ip4_frame([10, 1, 2, 3], 64, 100, false, 17, 1000);
    let out = bed.send(0, std::slice::from_ref(&input));
    assert_eq!(out[1].len(), 1, "one frame out of p1");
    let f = &out[1][0];
    assert_eq!(&f[0..6], &[2, 0, 0, 0, 1, 2], "neighbour's MAC");
    assert_eq!(&f[6..12], &[2, 0, 0, 0, 1, 1], "egress interface's MAC");
    assert_eq!(f[14 + 8], 63, "TTL decremented");
    assert!(header_ok(&f[14..34]), "checksum updated");
    assert_eq!(&f[34..], &input[34..], "payload untouched");
    assert!(out[0].is_empty() && out[2].is_empty());
}

#[test]
fn vlan_subinterface_egress_is_tagged() {
    let mut bed = bed(1000);
    let out = bed.send(0, &[ip4_frame([10, 100, 0, 9], 10, 46, false, 17, 1)]);
    let f = &out[1][0];
    assert_eq!(&f[12..14], &[0x81, 0x00]);
    assert_eq!(u16::from_be_bytes([f[14], f[15]]) & 0x0fff, 100);
    assert_eq!(&f[16..18], &[0x08, 0x00]);
    assert_eq!(&f[0..6], &[2, 0, 0, 0, 1, 3]);
    assert_eq!(f[18 + 8], 9);
    assert!(header_ok(&f[18..38]));
}

#[test]
fn tagged_ingress_is_untagged_on_egress() {
    let mut bed = bed(1000);
    // Into p1 with VLAN 100 (p1.100), towards 192.0.2.2 on p0, untagged.
    let mut f = ip4_frame([192, 0, 2, 2], 30, 46, false, 17, 1);
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 1, 1]);
    let mut tagged = f[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x00, 100]);
    tagged.extend_from_slice(&f[12..]);
    // Its source must be on p1.100's side for nothing to matter; the route lookup is by dst.
    let out = bed.send(1, &[tagged]);
    let g = &out[0][0];
    assert_eq!(&g[12..14], &[0x08, 0x00], "untagged out of p0");
    assert_eq!(&g[0..6], &PEER0);
    assert_eq!(g[14 + 8], 29);
}

#[test]
fn ipv6_forwarded_with_hop_limit_decremented() {
    let mut bed = bed(1000);
    let out = bed.send(0, &[ip6_frame(v6("2001:db8:ff::99"), 64, 32)]);
    let f = &out[1][0];
    assert_eq!(&f[0..6], &[2, 0, 0, 0, 1, 2]);
    assert_eq!(f[14 + 7], 63);
}

#[test]
fn ecmp_spreads_flows_and_keeps_each_flow_on_one_path() {
    let mut bed = bed(1000);
    let frames: Vec<_> = (0..400u16)
        .map(|i| {
            ip4_frame(
                [10, 200, (i >> 8) as u8, i as u8],
                64,
                46,
                false,
                17,
                1000 + i,
            )
        })
        .collect();
    let a = bed.send(0, &frames);
    let b = bed.send(0, &frames);
    let (n1, n2) = (a[1].len(), a[2].len());
    assert_eq!(n1 + n2, 400);
    assert!(n1 > 120 && n2 > 120, "both paths used: {n1} / {n2}");
    assert_eq!((b[1].len(), b[2].len()), (n1, n2), "same flows, same paths");
}

#[test]
fn ttl_expiry_sends_time_exceeded_from_the_ingress_address() {
    let mut bed = bed(1000);
    let input = ip4_frame([10, 1, 2, 3], 1, 64, false, 17, 7);
    let out = bed.send(0, std::slice::from_ref(&input));
    assert!(out[1].is_empty());
    let f = &out[0][0];
    assert_eq!(&f[0..6], &PEER0);
    let ip = &f[14..];
    assert!(header_ok(ip));
    assert_eq!(&ip[12..16], &[192, 0, 2, 1], "from the ingress interface");
    assert_eq!(&ip[16..20], &[192, 0, 2, 2]);
    assert_eq!(ip[9], 1);
    assert_eq!((ip[20], ip[21]), (11, 0), "time exceeded, TTL in transit");
    assert_eq!(checksum::fold(checksum::sum(&ip[20..])), 0, "ICMP checksum");
    assert_eq!(&ip[28..48], &input[14..34], "quotes the original header");
    let s = bed.snapshot();
    assert_eq!(s.drop_count(DropReason::TtlExpired), 1);
    assert_eq!(s.icmp_sent, 1);
}

#[test]
fn unreachable_blackhole_reject_and_bad_checksum() {
    let mut bed = bed(1000);
    let mut bad = ip4_frame([10, 1, 1, 1], 64, 30, false, 17, 1);
    bad[24] ^= 0xff;
    let out = bed.send(
        0,
        &[
            ip4_frame([172, 16, 0, 1], 64, 30, false, 17, 1),
            ip4_frame([10, 66, 1, 1], 64, 30, false, 17, 1),
            ip4_frame([10, 67, 1, 1], 64, 30, false, 17, 1),
            bad,
        ],
    );
    let s = bed.snapshot();
    assert_eq!(s.drop_count(DropReason::NoRoute), 1);
    assert_eq!(s.drop_count(DropReason::Blackhole), 1);
    assert_eq!(s.drop_count(DropReason::Reject), 1);
    assert_eq!(s.drop_count(DropReason::Ip4BadChecksum), 1);
    let codes: Vec<(u8, u8)> = out[0].iter().map(|f| (f[34], f[35])).collect();
    assert_eq!(
        codes.len(),
        2,
        "ICMP for no-route and reject, nothing for blackhole or bad checksum"
    );
    assert!(
        codes.contains(&(3, 0)) && codes.contains(&(3, 13)),
        "{codes:?}"
    );
}

#[test]
fn df_too_big_gets_frag_needed_and_no_df_is_fragmented() {
    let mut bed = bed(1000);
    // p1's MTU is 1400.
    let out = bed.send(0, &[ip4_frame([10, 1, 2, 3], 64, 1480, true, 17, 1)]);
    let f = &out[0][0];
    assert_eq!((f[34], f[35]), (3, 4));
    assert_eq!(u16::from_be_bytes([f[40], f[41]]), 1400, "next-hop MTU");
    assert_eq!(bed.snapshot().drop_count(DropReason::MtuExceeded), 1);

    let input = ip4_frame([10, 1, 2, 3], 64, 3000, false, 17, 1);
    let out = bed.send(0, std::slice::from_ref(&input));
    assert_eq!(out[1].len(), 3, "3,020 bytes over a 1,400 MTU");
    let mut data = Vec::new();
    let mut expect_off = 0usize;
    for (i, f) in out[1].iter().enumerate() {
        let ip = &f[14..];
        assert!(header_ok(ip));
        let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
        assert!(total <= 1400);
        let frag = u16::from_be_bytes([ip[6], ip[7]]);
        assert_eq!((frag & 0x1fff) as usize * 8, expect_off);
        assert_eq!(frag & 0x2000 != 0, i < 2, "MF on all but the last");
        assert_eq!(ip[8], 63);
        data.extend_from_slice(&ip[20..total]);
        expect_off += total - 20;
    }
    assert_eq!(
        data,
        &input[34..],
        "fragments reassemble to the original payload"
    );
}

/// An ICMP echo request from the neighbour on p0 to `dst`.
fn echo_request4(dst: [u8; 4]) -> Vec<u8> {
    let mut f = ip4_frame(dst, 64, 16, false, 1, 0);
    f[34] = 8; // echo request
    f[35] = 0;
    f[36..38].copy_from_slice(&[0, 0]);
    f[38..42].copy_from_slice(&[0x12, 0x34, 0, 1]);
    let c = checksum::fold(checksum::sum(&f[34..]));
    f[36..38].copy_from_slice(&c.to_be_bytes());
    f
}

#[test]
fn echo_requests_to_router_addresses_are_answered() {
    let mut bed = bed(1000);
    let f = echo_request4([192, 0, 2, 1]);
    let mut f6 = ip6_frame(v6("2001:db8:1::1"), 64, 16);
    f6[14 + 6] = 58;
    f6[54] = 128;
    let src: [u8; 16] = f6[22..38].try_into().unwrap();
    let dst: [u8; 16] = f6[38..54].try_into().unwrap();
    let c = checksum::fold(checksum::combine(
        checksum::pseudo_v6(&src, &dst, 58, 16),
        checksum::sum(&f6[54..]),
    ));
    f6[56..58].copy_from_slice(&c.to_be_bytes());
    let out = bed.send(0, &[f, f6]);
    assert_eq!(out[0].len(), 2);
    let r4 = out[0].iter().find(|g| g[12..14] == [8, 0]).unwrap();
    assert_eq!(&r4[26..30], &[192, 0, 2, 1]);
    assert_eq!(&r4[30..34], &[192, 0, 2, 2]);
    assert_eq!(r4[34], 0, "echo reply");
    assert_eq!(checksum::fold(checksum::sum(&r4[34..])), 0);
    let r6 = out[0].iter().find(|g| g[12..14] == [0x86, 0xdd]).unwrap();
    assert_eq!(r6[54], 129);
    assert_eq!(bed.snapshot().echo_replies, 2);
}

#[test]
fn icmp_errors_are_rate_limited() {
    let mut bed = bed(10);
    let frames: Vec<_> = (0..200)
        .map(|_| ip4_frame([10, 1, 2, 3], 1, 30, false, 17, 1))
        .collect();
    let out = bed.send(0, &frames);
    let s = bed.snapshot();
    assert_eq!(s.drop_count(DropReason::TtlExpired), 200);
    let sent = out[0].len();
    assert!(
        (10..=11).contains(&sent),
        "burst of 10 (plus one token earned), got {sent}"
    );
    assert_eq!(s.icmp_sent, sent as u64);
    assert_eq!(s.icmp_sent + s.icmp_rate_limited, 200);
}

#[test]
fn frames_for_other_macs_and_unknown_vlans_are_dropped_and_counted() {
    let mut bed = bed(1000);
    let mut other = ip4_frame([10, 1, 2, 3], 64, 30, false, 17, 1);
    other[0..6].copy_from_slice(&[2, 9, 9, 9, 9, 9]);
    let mut tagged = other[..12].to_vec();
    tagged[0..6].copy_from_slice(&P0_MAC);
    tagged.extend_from_slice(&[0x81, 0, 0, 55]);
    tagged.extend_from_slice(&other[12..]);
    let mut arp = ip4_frame([10, 1, 2, 3], 64, 30, false, 17, 1);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    bed.send(0, &[other, tagged, arp, vec![0u8; 10]]);
    let s = bed.snapshot();
    assert_eq!(s.drop_count(DropReason::NotForUs), 1);
    assert_eq!(s.drop_count(DropReason::UnknownVlan), 1);
    assert_eq!(s.drop_count(DropReason::LocalUnhandled), 1);
    assert_eq!(s.drop_count(DropReason::BadLength), 1);
    assert_eq!(s.total_drops(), 4);
}

#[test]
fn route_changes_while_forwarding_lose_nothing() {
    let mut bed = bed(1000);
    let frames: Vec<_> = (0..256u16)
        .map(|i| ip4_frame([10, 1, (i >> 8) as u8, i as u8], 64, 46, false, 17, i))
        .collect();
    let ecmp = bed
        .router
        .next_hops
        .iter()
        .position(|n| matches!(n, dataplane::NextHop::Ecmp(_)))
        .unwrap() as u32;
    let single = bed.router.fibs[0].v4.get(0x0a00_0000, 8).unwrap();
    let mut got = 0;
    for round in 0..40 {
        // Flip 10.0.0.0/8 between the single next hop and the ECMP pair, and add and remove a
        // more-specific route, between bursts.
        let nh = if round % 2 == 0 { ecmp } else { single };
        bed.router.fibs[0].v4.insert(0x0a00_0000, 8, nh).unwrap();
        if round % 2 == 0 {
            bed.router.fibs[0]
                .v4
                .insert(0x0a01_0000, 16, single)
                .unwrap();
        } else {
            bed.router.fibs[0].v4.remove(0x0a01_0000, 16);
        }
        bed.router.publish().unwrap();
        let out = bed.send(0, &frames);
        got += out[1].len() + out[2].len();
    }
    assert_eq!(got, 40 * 256);
    assert_eq!(bed.snapshot().total_drops(), 0);
}

#[test]
fn martian_sources_and_destinations_are_not_forwarded() {
    let mut bed = bed(1000);
    let mut from_loopback = ip4_frame([10, 1, 2, 3], 64, 30, false, 17, 1);
    from_loopback[26..30].copy_from_slice(&[127, 0, 0, 1]);
    from_loopback[24..26].copy_from_slice(&[0, 0]);
    let c = checksum::fold(checksum::sum(&from_loopback[14..34]));
    from_loopback[24..26].copy_from_slice(&c.to_be_bytes());
    let out = bed.send(
        0,
        &[
            from_loopback,
            ip4_frame([127, 0, 0, 9], 64, 30, false, 17, 1),
        ],
    );
    assert!(
        out.iter().all(|p| p.is_empty()),
        "nothing forwarded, no ICMP"
    );
    assert_eq!(bed.snapshot().drop_count(DropReason::Ip4Martian), 2);
}

/// An IPv4 frame with one 4-byte option (IHL 6): the slow path forwards it.
fn ip4_frame_with_option(dst: [u8; 4]) -> Vec<u8> {
    let plain = ip4_frame(dst, 64, 30, false, 17, 1);
    let mut f = plain[..34].to_vec();
    f.extend_from_slice(&[1, 1, 1, 0]); // NOP, NOP, NOP, end of options
    f.extend_from_slice(&plain[34..]);
    f[14] = 0x46;
    let total = u16::from_be_bytes([f[16], f[17]]) + 4;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f[24..26].copy_from_slice(&[0, 0]);
    let c = checksum::fold(checksum::sum(&f[14..38]));
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

#[test]
fn class_e_destinations_are_not_forwarded_even_with_a_default_route() {
    // RFC 1812 5.3.7: a class E destination (but the limited broadcast) is invalid.
    let mut bed = Bed::from_text(
        &(CONFIG.replace("ICMP_RATE", "1000") + "  - { prefix: 0.0.0.0/0, via: 198.51.100.2 }\n"),
    );
    let out = bed.send(
        0,
        &[
            ip4_frame([240, 1, 2, 3], 64, 30, false, 17, 1),
            ip4_frame([250, 0, 0, 1], 64, 30, false, 17, 1),
            ip4_frame([255, 255, 255, 254], 64, 30, false, 17, 1),
            ip4_frame_with_option([241, 0, 0, 1]),
            ip4_frame([11, 1, 2, 3], 64, 30, false, 17, 1),
        ],
    );
    assert_eq!(
        out[1].len(),
        1,
        "only 11.1.2.3 goes out of p1 (default route)"
    );
    assert_eq!(&out[1][0][30..34], &[11, 1, 2, 3]);
    assert!(out[0].is_empty(), "no ICMP error for a martian");
    assert_eq!(bed.snapshot().drop_count(DropReason::Ip4Martian), 4);
}

#[test]
fn class_e_is_forwarded_where_the_network_routes_it() {
    let text = CONFIG.replace("ICMP_RATE", "1000").replace(
        "router: { workers: 1, icmp-rate: 1000 }",
        "router: { workers: 1, icmp-rate: 1000, route-class-e: true }",
    ) + "  - { prefix: 240.0.0.0/4, via: 198.51.100.2 }\n";
    let mut bed = Bed::from_text(&text);
    let out = bed.send(0, &[ip4_frame([240, 1, 2, 3], 64, 30, false, 17, 1)]);
    assert_eq!(out[1].len(), 1);
    assert_eq!(bed.snapshot().drop_count(DropReason::Ip4Martian), 0);
}

/// `f` with its destination MAC replaced.
fn to_mac(mut f: Vec<u8>, mac: [u8; 6]) -> Vec<u8> {
    f[0..6].copy_from_slice(&mac);
    f
}

const BROADCAST: [u8; 6] = [0xff; 6];
const IP4_GROUP_MAC: [u8; 6] = [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03];
const IP6_GROUP_MAC: [u8; 6] = [0x33, 0x33, 0x00, 0x00, 0x00, 0x01];

#[test]
fn unicast_ip_in_link_layer_group_frames_is_neither_forwarded_nor_answered() {
    // RFC 1812 5.3.4 (must not forward, should discard), 4.3.2.7 and RFC 4443 2.4(e.4) (no
    // ICMP error about a packet sent as a link-layer broadcast or multicast).
    let mut bed = bed(1000);
    let frames = [
        to_mac(ip4_frame([10, 1, 2, 3], 64, 30, false, 17, 1), BROADCAST),
        to_mac(
            ip4_frame([10, 1, 2, 3], 64, 30, false, 17, 1),
            IP4_GROUP_MAC,
        ),
        to_mac(ip4_frame([10, 1, 2, 3], 1, 30, false, 17, 1), BROADCAST),
        to_mac(ip4_frame([10, 1, 2, 3], 1, 30, false, 17, 1), IP4_GROUP_MAC),
        to_mac(ip4_frame([172, 16, 0, 1], 64, 30, false, 17, 1), BROADCAST),
        to_mac(ip4_frame_with_option([10, 1, 2, 3]), BROADCAST),
        to_mac(ip6_frame(v6("2001:db8:ff::1"), 64, 30), IP6_GROUP_MAC),
        to_mac(ip6_frame(v6("2001:db8:ff::1"), 1, 30), IP6_GROUP_MAC),
        to_mac(ip6_frame(v6("2001:db8:ee::1"), 64, 30), IP6_GROUP_MAC),
    ];
    let out = bed.send(0, &frames);
    assert!(
        out.iter().all(|p| p.is_empty()),
        "nothing forwarded, no ICMP error: {:?}",
        out.iter().map(Vec::len).collect::<Vec<_>>()
    );
    let s = bed.snapshot();
    assert_eq!(
        s.drop_count(DropReason::L2GroupUnicast),
        frames.len() as u64
    );
    assert_eq!(s.total_drops(), frames.len() as u64);
    // The same packets in unicast frames are forwarded: the frame's address made the difference.
    let out = bed.send(
        0,
        &[
            ip4_frame([10, 1, 2, 3], 64, 30, false, 17, 1),
            ip6_frame(v6("2001:db8:ff::1"), 64, 30),
        ],
    );
    assert_eq!(out[1].len(), 2);
}

#[test]
fn a_ping_to_the_router_in_a_broadcast_frame_is_still_answered() {
    // Local delivery is not forwarding: the router's own address in a broadcast frame is its.
    let mut bed = bed(1000);
    let f = to_mac(echo_request4([192, 0, 2, 1]), BROADCAST);
    let out = bed.send(0, &[f]);
    assert_eq!(out[0].len(), 1, "echo reply");
    assert_eq!(out[0][0][34], 0);
    assert_eq!(bed.snapshot().echo_replies, 1);
}
