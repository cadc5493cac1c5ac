use crate::counters::DropReason;
use crate::graph::harness::{ip4, ip6, Harness, MAC1};
use crate::graph::NodeId;
use crate::mfib::{MrouteKey, Oif, Origin};

const SRC: [u8; 4] = [10, 0, 0, 2];
const G: [u8; 4] = [232, 1, 2, 3];

fn key(source: [u8; 4], group: [u8; 4]) -> MrouteKey {
    MrouteKey {
        vrf: 0,
        v6: false,
        source: u128::from(u32::from_be_bytes(source)),
        group: u128::from(u32::from_be_bytes(group)),
    }
}

fn oifs(list: &[u32]) -> Vec<Oif> {
    list.iter().map(|&ifx| Oif { ifx, ttl: 1 }).collect()
}

#[test]
fn a_routed_packet_is_copied_to_each_output_interface_with_its_own_header() {
    let mut h = Harness::with_mcast();
    let fib = h.t.mfib.clone().unwrap();
    fib.set(key(SRC, G), 0, oifs(&[1, 2, 0]), Origin::Static)
        .unwrap();
    let out = h.push(NodeId::IpMcast, 0, &[ip4(SRC, G, 64)]);
    let sent = &out.to["tx 1"];
    assert_eq!(sent.len(), 2, "eth1 and eth1.100 (not eth0, the input)");
    let group_mac = [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03];
    for f in sent {
        let d = f.data();
        assert_eq!((&d[..6], &d[6..12]), (&group_mac[..], &MAC1[..]));
    }
    let tagged = sent
        .iter()
        .find(|f| f.data()[12..14] == [0x81, 0x00])
        .unwrap();
    assert_eq!(
        u16::from_be_bytes([tagged.data()[14], tagged.data()[15]]) & 0xfff,
        100
    );
    let untagged = sent
        .iter()
        .find(|f| f.data()[12..14] == [0x08, 0x00])
        .unwrap();
    let ip = &untagged.data()[14..34];
    assert_eq!(ip[8], 63, "TTL decremented once");
    assert!(packet::checksum::ipv4_header_ok(ip));
    let v = fib.view();
    assert_eq!((v[0].packets, v[0].replicas), (1, 2));
}

#[test]
fn the_rpf_check_ttl_and_an_empty_list_drop_and_count() {
    let mut h = Harness::with_mcast();
    let fib = h.t.mfib.clone().unwrap();
    fib.set(key(SRC, G), 1, oifs(&[2]), Origin::Static).unwrap();
    fib.set(key(SRC, [232, 9, 9, 9]), 0, vec![], Origin::Static)
        .unwrap();
    let out = h.push(
        NodeId::IpMcast,
        0,
        &[
            ip4(SRC, G, 64),
            ip4(SRC, [232, 9, 9, 9], 64),
            ip4(SRC, [232, 7, 7, 7], 64),
        ],
    );
    assert_eq!(
        out.dropped(DropReason::McastWrongIf),
        1,
        "arrived on eth0, RPF eth1"
    );
    assert_eq!(out.dropped(DropReason::McastNoOutput), 1);
    assert_eq!(
        out.dropped(DropReason::McastNoRoute),
        1,
        "no route, no control plane"
    );
    assert_eq!(fib.view()[0].wrong_if, 1);
    fib.set(key(SRC, G), 0, oifs(&[1]), Origin::Static).unwrap();
    let out = h.push(NodeId::IpMcast, 0, &[ip4(SRC, G, 1)]);
    assert_eq!(
        out.dropped(DropReason::McastTtl),
        1,
        "and no ICMP time exceeded"
    );
}

#[test]
fn a_threshold_keeps_low_ttl_packets_off_an_interface() {
    let mut h = Harness::with_mcast();
    let fib = h.t.mfib.clone().unwrap();
    let list = vec![Oif { ifx: 1, ttl: 1 }, Oif { ifx: 2, ttl: 16 }];
    fib.set(key(SRC, G), 0, list, Origin::Static).unwrap();
    let out = h.push(NodeId::IpMcast, 0, &[ip4(SRC, G, 10), ip4(SRC, G, 17)]);
    assert_eq!(out.count("tx 1"), 3, "TTL 10 to eth1 only, TTL 17 to both");
}

#[test]
fn any_source_routes_and_ipv6_by_scope() {
    let mut h = Harness::with_mcast();
    let fib = h.t.mfib.clone().unwrap();
    let g6: u128 = 0xff3e << 112 | 0x8000_0001;
    let s6: u128 = 0x2001_0db8 << 96 | 2;
    fib.set(
        MrouteKey {
            vrf: 0,
            v6: true,
            source: 0,
            group: g6,
        },
        0,
        oifs(&[1]),
        Origin::Static,
    )
    .unwrap();
    let link_scope = ip6(s6, 0xff02 << 112 | 5, 9);
    let out = h.push(NodeId::Ip6Forward, 0, &[ip6(s6, g6, 9), link_scope]);
    assert_eq!(
        out.count("ip-mcast"),
        1,
        "ff02::5 is link scope, not routed"
    );
    let out = h.push(NodeId::IpMcast, 0, &[ip6(s6, g6, 9)]);
    let sent = &out.to["tx 1"];
    assert_eq!(sent.len(), 1, "by the (*,G) route");
    let d = sent[0].data();
    assert_eq!(&d[..6], &[0x33, 0x33, 0x80, 0, 0, 1]);
    assert_eq!(d[14 + 7], 8, "hop limit decremented");
}

#[test]
fn ip4_forward_hands_multicast_off_only_where_the_vrf_routes_it() {
    let mut igmp = ip4([10, 0, 0, 9], G, 1);
    // An IGMPv2 report: the router alert option makes the header 24 bytes.
    igmp[14] = 0x46;
    igmp[14 + 9] = 2;
    let mut h = Harness::with_mcast();
    let out = h.push(NodeId::Ip4Forward, 0, &[ip4(SRC, G, 1), igmp.clone()]);
    assert_eq!(
        out.count("ip-mcast"),
        2,
        "before the TTL and options checks"
    );
    let mut h = Harness::new();
    let out = h.push(NodeId::Ip4Forward, 0, &[ip4(SRC, G, 64), igmp]);
    assert_eq!(out.dropped(DropReason::MulticastNotRouted), 1);
    assert_eq!(out.count("slow-path"), 1, "options, as before");
}

#[test]
fn joins_to_a_group_and_unknown_sources_go_up_to_pim() {
    let mut h = Harness::with_mcast();
    let mut igmp = ip4([10, 0, 0, 9], G, 1);
    igmp.splice(34..34, [0x94, 0x04, 0, 0]);
    igmp[14] = 0x46;
    igmp[14 + 3] += 4;
    igmp[14 + 9] = 2;
    igmp[24..26].copy_from_slice(&[0, 0]);
    let c = packet::checksum::fold(packet::checksum::sum(&igmp[14..38]));
    igmp[24..26].copy_from_slice(&c.to_be_bytes());
    let out = h.push(NodeId::IpMcast, 0, &[igmp, ip4(SRC, G, 64)]);
    // Without a punt path both are dropped, each for its own reason.
    assert_eq!(
        out.dropped(DropReason::LocalUnhandled),
        1,
        "the join, for pimd"
    );
    assert_eq!(
        out.dropped(DropReason::McastNoRoute),
        1,
        "the unknown (S,G)"
    );
}

#[test]
fn a_kernel_routes_keepalive_goes_up_at_ttl_1_and_a_registering_routes_packets_as_they_came() {
    use crate::punt::{PuntConfig, PuntHub};
    let mut h = Harness::with_mcast();
    let hub = PuntHub::new(PuntConfig { ring: 64 });
    h.ctx.punt = Some(hub.attach(0));
    let mut link = hub.take_new().pop().unwrap();
    let fib = h.t.mfib.clone().unwrap();
    let reg = [232, 7, 7, 7];
    fib.set(key(SRC, G), 0, oifs(&[1]), Origin::Kernel).unwrap();
    fib.set(key(SRC, reg), 0, oifs(&[1]), Origin::KernelRegistering)
        .unwrap();
    // The punt thread sleeps: the first punt rings it.
    let bell = hub.doorbell.as_ref().unwrap();
    assert!(bell.sleep_unless(|| false));
    let out = h.push(
        NodeId::IpMcast,
        0,
        &[ip4(SRC, G, 64), ip4(SRC, G, 64), ip4(SRC, reg, 64)],
    );
    let mut p = libc::pollfd {
        fd: bell.fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one live pollfd.
    assert_eq!(unsafe { libc::poll(&mut p, 1, 0) }, 1, "the worker rang");
    bell.woke();
    assert_eq!(out.count("tx 1"), 3, "every packet still routed");
    let mut up = Vec::new();
    while let Ok(p) = link.from_worker.pop() {
        up.push(p);
    }
    // One keepalive per period for the kernel's route (the second packet is inside it), and
    // every packet of the registering one.
    assert_eq!(up.len(), 2);
    let ka = up[0].buf.data()[14..34].to_vec();
    assert_eq!((&ka[16..20], ka[8]), (&G[..], 1), "the keepalive at TTL 1");
    assert!(packet::checksum::ipv4_header_ok(&ka));
    let rg = &up[1].buf.data()[14..34];
    assert_eq!(
        (&rg[16..20], rg[8]),
        (&reg[..], 64),
        "for the register device: as it came"
    );
    for p in up {
        h.ctx.cache.free(p.buf);
    }
}
