//! l2-mcast in the harness's bridge `lab`: members `eth1.200` (member 1) and `eth1.300`
//! (member 2), among others, all on port 1, told apart by the tag they leave with.

use std::net::IpAddr;
use std::sync::Arc;

use packet::mcast::{build, group_mac, Message, Record};

use crate::counters::DropReason;
use crate::graph::harness::{ip4, ip6, Harness};
use crate::graph::NodeId;
use crate::l2::snoop::{SnoopSettings, SnoopTable};

const HOST: [u8; 6] = [2, 0, 0, 0, 0x33, 1];

fn snooping(settings: SnoopSettings) -> Harness {
    let mut h = Harness::new();
    let mut bridges = h.t.bridges.to_vec();
    bridges[0].snoop = Some(Arc::new(settings));
    h.t.bridges = bridges.into_boxed_slice();
    h.t.snoop = Some(Arc::new(SnoopTable::new(64)));
    h
}

/// `f` as received on VLAN `vid` of port 1.
fn tagged(f: &[u8], vid: u16) -> Vec<u8> {
    let mut t = f[..12].to_vec();
    t.extend_from_slice(&[0x81, 0x00]);
    t.extend_from_slice(&vid.to_be_bytes());
    t.extend_from_slice(&f[12..]);
    t
}

fn join(group: &str, leave: bool) -> Vec<u8> {
    let g: IpAddr = group.parse().unwrap();
    let src: IpAddr = if g.is_ipv4() {
        "10.7.0.20".parse().unwrap()
    } else {
        "fe80::20".parse().unwrap()
    };
    let r = if leave {
        Record::leave(g)
    } else {
        Record::join(g)
    };
    let version = if g.is_ipv4() { 2 } else { 1 };
    build(
        HOST,
        src,
        &Message::Report {
            version,
            records: vec![r],
        },
    )
    .unwrap()
}

fn data4(group: [u8; 4]) -> Vec<u8> {
    let mut f = ip4([10, 9, 0, 1], group, 16);
    f[..6].copy_from_slice(&group_mac(IpAddr::from(group)));
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0x44, 1]);
    f
}

/// Ethernet-input, l2-input, l2-mcast in turn on `frames` from VLAN `vid`: what l2-mcast did.
fn through(h: &mut Harness, vid: u16, frames: &[Vec<u8>]) -> crate::graph::harness::Out {
    let frames: Vec<Vec<u8>> = frames.iter().map(|f| tagged(f, vid)).collect();
    let out = h.push(NodeId::EthernetInput, 1, &frames);
    let v = out.to.into_values().next().expect("to l2-input");
    let mut out = h.run_bufs(NodeId::L2Input, v);
    let v = out.to.remove("l2-mcast").unwrap_or_default();
    assert!(
        out.to.is_empty(),
        "l2-input sent elsewhere: {:?}",
        out.to.keys()
    );
    h.run_bufs(NodeId::L2Mcast, v)
}

fn vids(out: &crate::graph::harness::Out) -> Vec<u16> {
    out.to
        .get("tx 1")
        .map(|v| {
            v.iter()
                .map(|b| u16::from_be_bytes([b.data()[14], b.data()[15]]) & 0xfff)
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_join_steers_the_group_to_its_member_and_unjoined_groups_flood() {
    let mut h = snooping(SnoopSettings::default());
    let out = through(&mut h, 300, &[join("239.1.1.1", false)]);
    // No router member: the snooper reads the report and nobody else hears it.
    assert!(out.to.is_empty() && out.drops.is_empty());
    let out = through(&mut h, 200, &[data4([239, 1, 1, 1]), data4([239, 2, 2, 2])]);
    assert_eq!(vids(&out), vec![300], "the joined group to its member only");
    assert_eq!(
        out.count("l2-flood"),
        1,
        "the group nobody joined is flooded"
    );
    let c = &h.t.bridges[0].counters;
    assert_eq!(
        (
            c.mcast_forwarded.load(std::sync::atomic::Ordering::Relaxed),
            c.mcast_unregistered
                .load(std::sync::atomic::Ordering::Relaxed)
        ),
        (1, 1)
    );
    // Link-local groups are flooded whoever joined.
    let out = through(&mut h, 200, &[data4([224, 0, 0, 251])]);
    assert_eq!(out.count("l2-flood"), 1);
    // The member's own frames never come back to it.
    let out = through(&mut h, 300, &[data4([239, 1, 1, 1])]);
    assert_eq!(out.dropped(DropReason::L2NoFloodMember), 1);
    let view = h.t.snoop.as_ref().unwrap().view(None);
    assert_eq!(view.len(), 1);
    assert_eq!((view[0].packets, view[0].replicas), (2, 1));
}

#[test]
fn reports_go_to_router_members_and_queries_make_them() {
    let mut h = snooping(SnoopSettings {
        flood_unregistered: false,
        ..Default::default()
    });
    // No listener and no router: dropped, counted.
    let out = through(&mut h, 200, &[data4([239, 5, 5, 5])]);
    assert_eq!(out.dropped(DropReason::McastNoListener), 1);
    // A general query from VLAN 300: flooded, and that member is a router member from now on.
    let q = build(
        [2, 0, 0, 0, 0x55, 1],
        "10.7.0.1".parse().unwrap(),
        &Message::Query {
            version: 2,
            group: None,
            max_resp_ms: 10_000,
            sources: vec![],
        },
    )
    .unwrap();
    let out = through(&mut h, 300, &[q]);
    assert_eq!(out.count("l2-flood"), 1);
    // A host's report on VLAN 200 goes to the router member only.
    let out = through(&mut h, 200, &[join("239.3.3.3", false)]);
    assert_eq!(vids(&out), vec![300]);
    // Unregistered data goes to the router member (not flooded).
    let out = through(&mut h, 200, &[data4([239, 5, 5, 5])]);
    assert_eq!(vids(&out), vec![300]);
}

#[test]
fn leaves_end_memberships_at_once_on_fast_leave_members() {
    let mut h = snooping(SnoopSettings {
        fast_leave_all: true,
        flood_unregistered: false,
        ..Default::default()
    });
    through(&mut h, 300, &[join("239.1.1.1", false)]);
    through(&mut h, 300, &[join("239.1.1.1", true)]);
    let out = through(&mut h, 200, &[data4([239, 1, 1, 1])]);
    assert_eq!(out.dropped(DropReason::McastNoListener), 1);
}

#[test]
fn mld_joins_steer_ipv6_groups() {
    let mut h = snooping(SnoopSettings::default());
    through(&mut h, 300, &[join("ff3e::1:2", false)]);
    let group: u128 = "ff3e::1:2".parse::<std::net::Ipv6Addr>().unwrap().into();
    let mut d = ip6(0x2001_0db8 << 96 | 9, group, 16);
    d[..6].copy_from_slice(&group_mac(IpAddr::V6(group.into())));
    let out = through(&mut h, 200, &[d]);
    assert_eq!(vids(&out), vec![300]);
}

#[test]
fn malformed_and_flooding_membership_messages_are_dropped_and_counted() {
    let mut h = snooping(SnoopSettings::default());
    let mut bad = join("239.1.1.1", false);
    let n = bad.len();
    // The group address, under the checksum.
    bad[n - 1 - (60 - 14 - 24 - 8)] ^= 1;
    let out = through(&mut h, 300, &[bad]);
    assert_eq!(out.dropped(DropReason::McastMalformed), 1);
    // The igmp-mld class admits its burst (200) and polices the rest of a flood.
    let flood: Vec<Vec<u8>> = (0..250).map(|_| join("239.1.1.2", false)).collect();
    let mut policed = 0;
    for chunk in flood.chunks(50) {
        policed += through(&mut h, 300, chunk).dropped(DropReason::PuntPoliced);
    }
    assert!(policed >= 40, "{policed} of 250 policed");
}

#[test]
fn routed_multicast_out_of_a_bvi_goes_to_the_members_that_joined() {
    use crate::graph::harness::{BVI_IF, MAC_BVI};
    let mut h = Harness::with_bvi();
    let mut bridges = h.t.bridges.to_vec();
    bridges[0].snoop = Some(Arc::new(SnoopSettings {
        flood_unregistered: false,
        ..Default::default()
    }));
    h.t.bridges = bridges.into_boxed_slice();
    h.t.snoop = Some(Arc::new(SnoopTable::new(64)));
    through(&mut h, 200, &[join("239.7.7.7", false)]);
    // As bvi-output gets a packet ip-mcast routed out of bvi7: the BVI's MAC as source.
    let routed = |h: &mut Harness, group: [u8; 4]| {
        let mut f = data4(group);
        f[6..12].copy_from_slice(&MAC_BVI);
        let mut b = h.buf(&f);
        let m = b.meta_mut();
        m.rx_if = BVI_IF;
        m.l3_off = 14;
        h.run_bufs(NodeId::BviOutput, vec![b])
    };
    let out = routed(&mut h, [239, 7, 7, 7]);
    assert_eq!(vids(&out), [200], "only the member that joined");
    let out = routed(&mut h, [239, 8, 8, 8]);
    assert_eq!(out.dropped(DropReason::McastNoListener), 1, "nobody joined");
    assert_eq!(out.count("tx 1"), 0);
}
