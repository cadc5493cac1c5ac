//! gtpu-input and gtpu-encap, each alone and then through the forwarding node either side.

use crate::counters::DropReason;
use crate::graph::harness::{eth, ip4, ip6, Harness, APN_IF, GTPU_ADDR, MAC0, PEER1};
use crate::graph::NodeId;
use crate::gtp::{Context, GtpTable};
use packet::checksum;

const SGSN: [u8; 4] = [10, 1, 0, 9];
const UE: u32 = 0x0a40_0005;
const UE6: u64 = 0x2001_0db8_0100_0003;

fn context(t: &GtpTable) -> u32 {
    let teid = t.teid(3, 1);
    t.install(
        teid,
        &Context {
            apn: 0,
            peer_teid: 0xabcd_0001,
            peer: u32::from_be_bytes(SGSN),
            ue_v4: Some(UE),
            ue_v6: Some(UE6),
        },
    );
    teid
}

/// An IPv4/UDP frame from the SGSN to the GGSN's GTP-U address, to `port`, carrying `gtp`.
fn to_ggsn(port: u16, gtp: &[u8]) -> Vec<u8> {
    let mut f = eth(MAC0, 0x0800);
    let mut h = [0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&((28 + gtp.len()) as u16).to_be_bytes());
    h[8] = 64;
    h[9] = 17;
    h[12..16].copy_from_slice(&SGSN);
    h[16..20].copy_from_slice(&GTPU_ADDR.to_be_bytes());
    let c = checksum::fold(checksum::sum(&h));
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(&2152u16.to_be_bytes());
    f.extend_from_slice(&port.to_be_bytes());
    f.extend_from_slice(&((8 + gtp.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(gtp);
    f
}

/// A G-PDU header for `teid` (with `ext`, extension headers after the optional fields) and
/// its T-PDU.
fn gpdu(teid: u32, ext: &[u8], tpdu: &[u8]) -> Vec<u8> {
    let mut g = vec![if ext.is_empty() { 0x30 } else { 0x34 }, 255];
    let opt = if ext.is_empty() { 0 } else { 4 };
    g.extend_from_slice(&((opt + ext.len() + tpdu.len()) as u16).to_be_bytes());
    g.extend_from_slice(&teid.to_be_bytes());
    if !ext.is_empty() {
        // Sequence number, N-PDU number, then the first extension header's type.
        g.extend_from_slice(&[0, 0, 0, 0x85]);
        g.extend_from_slice(ext);
    }
    g.extend_from_slice(tpdu);
    g
}

/// An IPv4 packet (no Ethernet header) from `src` to 10.1.0.5.
fn inner4(src: u32) -> Vec<u8> {
    let mut p = ip4(src.to_be_bytes(), [10, 1, 0, 5], 64)[14..].to_vec();
    p.extend_from_slice(&[]);
    p
}

#[test]
fn uplink_g_pdus_are_decapsulated_checked_and_counted() {
    let (mut h, table) = Harness::with_gtp();
    let teid = context(&table);
    // A PDU session container, then a UDP port extension: two headers chained.
    let ext = [1, 0x10, 0x20, 0x40, 1, 0x08, 0x68, 0];
    let out = h.push(
        NodeId::GtpuInput,
        0,
        &[
            to_ggsn(2152, &gpdu(teid, &[], &inner4(UE))),
            to_ggsn(2152, &gpdu(teid, &ext, &inner4(UE))),
            to_ggsn(2152, &gpdu(teid, &[], &inner4(UE + 1))),
            to_ggsn(2152, &gpdu(table.teid(3, 2), &[], &inner4(UE))),
            to_ggsn(2152, &gpdu(teid, &[0, 0, 0, 0], &inner4(UE))),
            to_ggsn(2152, &gpdu(teid, &[], &[0x45, 0, 0])),
            to_ggsn(2123, &[0x32, 1, 0, 4, 0, 0, 0, 0, 0, 1, 0, 0]),
            to_ggsn(2152, &[0x32, 1, 0, 4, 0, 0, 0, 0, 0, 1, 0, 0]),
        ],
    );
    let up = &out.to["ip4-forward"];
    assert_eq!(up.len(), 2);
    for b in up {
        let d = &b.data()[b.meta().l3_off as usize..];
        assert_eq!(d, &inner4(UE)[..], "the inner packet, nothing after it");
        assert_eq!(b.meta().rx_if, APN_IF);
    }
    assert_eq!(out.dropped(DropReason::GtpuSpoofed), 1);
    assert_eq!(
        out.dropped(DropReason::GtpuUnknownTeid),
        1,
        "an old generation"
    );
    assert_eq!(
        out.dropped(DropReason::GtpuMalformed),
        1,
        "extension length 0"
    );
    assert_eq!(out.dropped(DropReason::GtpuBadInner), 1);
    assert_eq!(out.count("slow-path"), 1, "GTP-C goes to the control plane");
    // An Echo on the GTP-U port goes to the GTP service: without a punt path, dropped.
    assert_eq!(out.dropped(DropReason::LocalUnhandled), 1);
    let [p, bytes, ..] = table.read_counters(3);
    assert_eq!((p, bytes), (2, 2 * 28));
    // Routed on from the APN's interface: out of eth1 with TTL 63.
    let v: Vec<_> = out
        .to
        .into_iter()
        .flat_map(|(k, v)| {
            assert!(k == "ip4-forward" || k == "slow-path");
            v
        })
        .filter(|b| b.meta().rx_if == APN_IF)
        .collect();
    let fwd = h.run_bufs(NodeId::Ip4Forward, v);
    let sent = &fwd.to["tx 1"];
    assert_eq!(sent.len(), 2);
    let d = sent[0].data();
    assert_eq!(&d[..6], &PEER1[..]);
    assert_eq!(
        &d[14..],
        &{
            let mut p = inner4(UE);
            p[8] = 63;
            let c = checksum::update16(u16::from_be_bytes([p[10], p[11]]), 0x4011, 0x3f11);
            p[10..12].copy_from_slice(&c.to_be_bytes());
            p
        }[..]
    );
}

#[test]
fn downlink_packets_are_tunnelled_to_their_sgsn() {
    let (mut h, table) = Harness::with_gtp();
    context(&table);
    // From a server on eth1 to the UE and to a pool address nobody has.
    let mut to_ue = ip4([10, 1, 0, 5], UE.to_be_bytes(), 64);
    to_ue.extend_from_slice(&[0; 6]); // Ethernet padding: not tunnelled
    let out = h.push(
        NodeId::Ip4Forward,
        1,
        &[
            to_ue,
            ip4([10, 1, 0, 5], (UE + 1).to_be_bytes(), 64),
            ip6(0x2001_0db8_0001 << 80 | 5, (UE6 as u128) << 64 | 1, 64),
        ],
    );
    let v = out.to.into_values().flatten().collect();
    let out = h.run_bufs(NodeId::GtpuEncap, v);
    assert_eq!(out.dropped(DropReason::GtpNoContext), 1);
    let sent = &out.to["tx 1"];
    assert_eq!(
        sent.len(),
        1,
        "the IPv6 packet went to ip6-forward, not here"
    );
    let d = &sent[0].data()[14..];
    assert!(checksum::ipv4_header_ok(&d[..20]));
    assert_eq!(&d[12..16], &GTPU_ADDR.to_be_bytes());
    assert_eq!(&d[16..20], &SGSN);
    assert_eq!(u16::from_be_bytes([d[2], d[3]]), 36 + 28);
    assert_eq!(&d[20..24], &[0x08, 0x68, 0x08, 0x68]);
    assert_eq!(&d[28..36], &[0x30, 255, 0, 28, 0xab, 0xcd, 0, 1]);
    assert_eq!(d[36 + 8], 63, "the inner TTL is decremented");
    assert!(checksum::ipv4_header_ok(&d[36..56]));
    assert_eq!(d.len(), 36 + 28);
    assert_eq!(table.read_counters(3)[2..], [1, 28]);
}

#[test]
fn ipv6_downlink_is_found_by_its_64() {
    let (mut h, table) = Harness::with_gtp();
    context(&table);
    let out = h.push(
        NodeId::Ip6Forward,
        1,
        &[ip6(
            0x2001_0db8_0001 << 80 | 5,
            (UE6 as u128) << 64 | 0x99,
            64,
        )],
    );
    let v = out.to.into_values().flatten().collect();
    let out = h.run_bufs(NodeId::GtpuEncap, v);
    let d = &out.to["tx 1"][0].data()[14..];
    assert_eq!(&d[32..36], &[0xab, 0xcd, 0, 1]);
    assert_eq!(d[36] >> 4, 6);
    assert_eq!(d[36 + 7], 63, "hop limit decremented");
}

/// The APN's interface applies its services to the UE's packets, not to the tunnel that brought
/// them: an ACL in denying DNS drops the UE's DNS query and passes its web packet, QoS in
/// re-marks the UE's packet, and `flow: in` accounts the UE's flow (its address and port, not
/// the SGSN's and 2152).
#[test]
fn services_on_the_apn_interface_see_the_ue_packet_not_the_tunnel() {
    use crate::feature::Step;
    use crate::graph::harness::{bind, deny_dns, mark_all};
    use std::sync::Arc;
    let (mut h, table) = Harness::with_gtp();
    h.add_flows();
    let teid = context(&table);
    let (acl, hits) = deny_dns();
    let remark = mark_all(Some(46), None);
    bind(
        &mut h.t,
        APN_IF as usize,
        vec![
            Step::Acl(Arc::new(acl)),
            Step::Qos(Arc::new(remark)),
            Step::Flow,
        ],
        vec![],
    );
    let dns = inner4(UE);
    let mut web = inner4(UE);
    web[20 + 3] = 80;
    let out = h.push(
        NodeId::GtpuInput,
        0,
        &[
            to_ggsn(2152, &gpdu(teid, &[], &dns)),
            to_ggsn(2152, &gpdu(teid, &[], &web)),
        ],
    );
    let up: Vec<_> = out.to.into_values().flatten().collect();
    assert_eq!(up.len(), 2);
    let fwd = h.run_bufs(NodeId::Ip4Forward, up);
    assert_eq!(fwd.dropped(DropReason::AclDenied), 1);
    assert_eq!(hits.get(0), 1, "the deny entry counted the UE's DNS query");
    let sent = &fwd.to["tx 1"];
    assert_eq!(sent.len(), 1);
    let d = sent[0].data();
    assert_eq!(u16::from_be_bytes([d[14 + 22], d[14 + 23]]), 80);
    assert_eq!(d[14 + 1] >> 2, 46, "the UE's packet re-marked");
    assert_eq!(
        checksum::fold(checksum::sum(&d[14..34])),
        0,
        "its header checksum kept right"
    );
    let mut recs = Vec::new();
    let fl = h.ctx.flows.as_mut().unwrap();
    fl.cache.flush(1, &mut |r| recs.push(r));
    let seen: Vec<_> = recs
        .iter()
        .map(|r| (r.key.src, r.key.dst_port, r.key.in_if, r.packets))
        .collect();
    assert_eq!(seen, [(UE as u128, 80, APN_IF, 1)]);
}

/// Downlink: the Gi interface's input arc sees the packet for the UE before it is tunnelled
/// (its ACL denies the UE's DNS answer), and the interface the G-PDU leaves by applies its output
/// arc to the tunnel, the router's own packet to the SGSN (QoS out re-marks the outer header and
/// leaves the UE's packet alone; `flow: out` accounts GGSN -> SGSN, UDP 2152).
#[test]
fn downlink_services_see_the_ue_packet_in_and_the_tunnel_out() {
    use crate::feature::Step;
    use crate::graph::harness::{deny_dns, mark_all};
    use std::sync::Arc;
    let (mut h, table) = Harness::with_gtp();
    h.add_flows();
    context(&table);
    let (acl, hits) = deny_dns();
    // eth1 is both the servers' side (Gi) and the SGSN's (Gn) in the harness.
    let f = crate::feature::IfFeatures::new(
        vec![Step::Acl(Arc::new(acl))],
        vec![Step::Qos(Arc::new(mark_all(Some(10), None))), Step::Flow],
    )
    .unwrap();
    let mut all: Vec<_> = (0..h.t.ifs.len()).map(|_| None).collect();
    all[1] = Some(Arc::new(f));
    h.t.features = all.into_boxed_slice();
    h.t.any_features = true;
    // Two packets for the UE: to UDP port 53 (which the list denies) and to 80.
    let mut dns = ip4([10, 1, 0, 5], UE.to_be_bytes(), 64);
    let mut web = dns.clone();
    web[14 + 22..14 + 24].copy_from_slice(&80u16.to_be_bytes());
    dns[14 + 22..14 + 24].copy_from_slice(&53u16.to_be_bytes());
    let out = h.push(NodeId::Ip4Forward, 1, &[dns, web]);
    assert_eq!(
        out.dropped(DropReason::AclDenied),
        1,
        "the Gi list saw the UE's packet"
    );
    assert_eq!(hits.get(0), 1);
    let v = out.to.into_values().flatten().collect();
    let mut enc = h.run_bufs(NodeId::GtpuEncap, v);
    let v = enc
        .to
        .remove("output-features")
        .expect("eth1 has output features");
    let sent = h.run_bufs(NodeId::OutputFeatures, v);
    let d = &sent.to["tx 1"][0].data()[14..];
    assert_eq!(&d[16..20], &SGSN);
    assert_eq!(d[1] >> 2, 10, "the outer header re-marked");
    assert!(checksum::ipv4_header_ok(&d[..20]));
    assert_eq!(d[36 + 1], 0, "the UE's packet untouched");
    let mut recs = Vec::new();
    let fl = h.ctx.flows.as_mut().unwrap();
    fl.cache.flush(1, &mut |r| recs.push(r));
    let seen: Vec<_> = recs
        .iter()
        .map(|r| {
            (
                r.key.src,
                r.key.dst,
                r.key.dst_port,
                r.key.direction,
                r.out_if,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [(
            GTPU_ADDR as u128,
            u32::from_be_bytes(SGSN) as u128,
            2152,
            flow::Direction::Egress,
            1
        )]
    );
}
