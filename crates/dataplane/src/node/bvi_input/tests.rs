//! The bridge and the L3 path meeting at a routed interface (BVI): the harness's bridge `lab`
//! (members eth1.200, eth1.300 and two Q-in-Q members, all on port 1) with `bvi7`, 10.7.0.1/24.

use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::harness::{
    eth, ip4, Harness, BVI_IF, BVI_MEMBER, HOST7, MAC0, MAC1, MAC_BVI, PEER1,
};
use crate::graph::{NodeId, To};
use crate::l2::MacKey;

const HOST: [u8; 6] = [2, 0, 0, 0, 2, 9];

/// `f` (an untagged frame) from `src`, to `dst`, tagged with VLAN `vid`.
fn tagged(mut f: Vec<u8>, dst: [u8; 6], src: [u8; 6], vid: u16) -> Vec<u8> {
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    let mut t = f[..12].to_vec();
    t.extend_from_slice(&[0x81, 0x00]);
    t.extend_from_slice(&vid.to_be_bytes());
    t.extend_from_slice(&f[12..]);
    t
}

/// Runs `frames`, received on port 1, through the whole graph; returns what port `p` sent.
fn through_graph(h: &mut Harness, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut v: Vec<PktBuf> = frames.iter().map(|f| h.buf(f)).collect();
    crate::graph::receive(&mut h.ctx, &h.t, 1, &mut v);
    let mut sent = Vec::new();
    for q in h.ctx.out.iter_mut() {
        for b in q.drain(..) {
            sent.push(b.data().to_vec());
            h.ctx.cache.free(b);
        }
    }
    sent
}

#[test]
fn a_frame_to_the_bvi_mac_is_routed_and_arp_and_the_rest_get_their_fate() {
    let mut h = Harness::with_bvi();
    let ip = ip4([10, 7, 0, 5], [10, 1, 0, 5], 64);
    let frames = [
        tagged(ip.clone(), MAC_BVI, HOST, 200),
        tagged(eth(MAC_BVI, 0x0806), MAC_BVI, HOST, 200),
        tagged(eth(MAC_BVI, 0x88b5), MAC_BVI, HOST, 200),
    ];
    let out = h.push(NodeId::EthernetInput, 1, &frames);
    let v = out.to.into_values().next().expect("to l2-input");
    let l2 = h.run_bufs(NodeId::L2Input, v);
    assert_eq!(
        l2.count("bvi-input"),
        3,
        "the BVI's MAC is its member's static entry"
    );
    let line = h.trace(
        NodeId::L2Input,
        &l2.to["bvi-input"][0],
        To::Node(NodeId::BviInput),
    );
    assert_eq!(line, "bridge lab: to its routed interface");
    let v = l2.to.into_values().next().unwrap();
    let out = h.run_bufs(NodeId::BviInput, v);
    let routed = &out.to["ip4-forward"];
    assert_eq!(routed.len(), 1);
    let m = routed[0].meta();
    assert_eq!(
        (m.rx_if, m.l3_off),
        (BVI_IF, 18),
        "received on bvi7, past the member's tag"
    );
    assert_eq!(
        h.trace(NodeId::BviInput, &routed[0], To::Node(NodeId::Ip4Forward)),
        "routed on bvi7"
    );
    // ARP goes up the punt path (counted here, where there is none); the rest is dropped.
    assert_eq!(out.dropped(DropReason::LocalUnhandled), 1);
    assert_eq!(out.dropped(DropReason::BviNotIp), 1);
    // The host was learned where it spoke from.
    let macs = h.t.macs.clone().unwrap();
    assert_eq!(
        macs.lookup(MacKey::new(7, HOST)),
        Some(1),
        "eth1.200's member id"
    );
}

#[test]
fn broadcasts_reach_the_bvi_as_well_as_every_member() {
    let mut h = Harness::with_bvi();
    let f = tagged(eth([0xff; 6], 0x0806), [0xff; 6], HOST, 200);
    let out = h.push(NodeId::EthernetInput, 1, &[f]);
    let v = out.to.into_values().next().unwrap();
    let mut l2 = h.run_bufs(NodeId::L2Input, v);
    let flood = h.run_bufs(NodeId::L2Flood, l2.to.remove("l2-flood").unwrap());
    assert_eq!(flood.count("bvi-input"), 1);
    assert_eq!(
        flood.count("tx 1"),
        3,
        "eth1.300 and the two Q-in-Q members"
    );
    let copy = &flood.to["bvi-input"][0];
    assert!(copy.meta().l2_group);
    assert_eq!(copy.meta().rx_if, 3, "still the member it came in on");
    // A unicast frame to an unknown address is not the BVI's business.
    let f = tagged(eth(PEER1, 0x0800), PEER1, HOST, 200);
    let out = h.push(NodeId::EthernetInput, 1, &[f]);
    let v = out.to.into_values().next().unwrap();
    let mut l2 = h.run_bufs(NodeId::L2Input, v);
    let flood = h.run_bufs(NodeId::L2Flood, l2.to.remove("l2-flood").unwrap());
    assert_eq!(flood.count("bvi-input"), 0);
    assert_eq!(flood.count("tx 1"), 3);
}

#[test]
fn a_packet_routed_out_of_the_bvi_is_switched_to_its_member_or_flooded() {
    let mut h = Harness::with_bvi();
    // To 10.7.0.5 (HOST7), whose MAC the bridge does not know yet: flooded to every member.
    let out = h.push(
        NodeId::Ip4Forward,
        0,
        &[ip4([10, 0, 0, 2], [10, 7, 0, 5], 64)],
    );
    let v = out.to.into_values().next().expect("one edge");
    assert_eq!(
        v[0].meta().rx_if,
        BVI_IF,
        "handed on as if the BVI received it"
    );
    let flooded = h.run_bufs(NodeId::BviOutput, v);
    let sent = &flooded.to["tx 1"];
    assert_eq!(sent.len(), 4, "every member, none of them the BVI");
    let d = sent[0].data();
    assert_eq!((&d[..6], &d[6..12]), (&HOST7[..], &MAC_BVI[..]));
    assert_eq!(&d[12..16], &[0x81, 0x00, 0x00, 200], "eth1.200's tag");
    assert_eq!(d[18 + 8], 63, "TTL decremented once");
    let c = &h.t.bridges[0].counters;
    assert_eq!(crate::l2::BridgeCounters::get(&c.unknown_unicast), 1);
    // Once HOST7 speaks from eth1.300, it goes there alone.
    let f = tagged(eth([0xff; 6], 0x0806), [0xff; 6], HOST7, 300);
    let out = h.push(NodeId::EthernetInput, 1, &[f]);
    h.run_bufs(NodeId::L2Input, out.to.into_values().next().unwrap());
    let out = h.push(
        NodeId::Ip4Forward,
        0,
        &[ip4([10, 0, 0, 2], [10, 7, 0, 5], 64)],
    );
    let sent = h.run_bufs(NodeId::BviOutput, out.to.into_values().next().unwrap());
    let only = &sent.to["tx 1"];
    assert_eq!(only.len(), 1);
    assert_eq!(
        &only[0].data()[12..16],
        &[0x81, 0x00, 0x01, 0x2c],
        "tagged 300"
    );
    assert_eq!(
        h.trace(NodeId::BviOutput, &only[0], To::Tx(1)),
        "bridge lab: switched out of port 1"
    );
}

#[test]
fn hosts_in_two_vlans_of_one_bridge_reach_each_other_and_the_world_through_the_bvi() {
    let mut h = Harness::with_bvi();
    // HOST7 lives on eth1.300: learned from a frame of its own.
    through_graph(
        &mut h,
        &[tagged(eth([0xff; 6], 0x88b5), [0xff; 6], HOST7, 300)],
    );
    // HOST (on eth1.200) sends to 10.7.0.5 through its gateway, the BVI...
    let ip = ip4([10, 7, 0, 9], [10, 7, 0, 5], 64);
    let sent = through_graph(&mut h, &[tagged(ip, MAC_BVI, HOST, 200)]);
    assert_eq!(sent.len(), 1);
    let d = &sent[0];
    assert_eq!(
        (&d[..6], &d[6..12]),
        (&HOST7[..], &MAC_BVI[..]),
        "routed: new MACs"
    );
    assert_eq!(&d[12..16], &[0x81, 0x00, 0x01, 0x2c], "out of eth1.300");
    assert_eq!(d[18 + 8], 63);
    assert!(packet::checksum::ipv4_header_ok(&d[18..38]));
    // ...and to 10.1.0.5, out of the routed port eth1, untagged.
    let ip = ip4([10, 7, 0, 9], [10, 1, 0, 5], 64);
    let sent = through_graph(&mut h, &[tagged(ip, MAC_BVI, HOST, 200)]);
    assert_eq!(sent.len(), 1);
    assert_eq!((&sent[0][..6], &sent[0][6..12]), (&PEER1[..], &MAC1[..]));
    assert_eq!(&sent[0][12..14], &[0x08, 0x00]);
    // And back from the routed side into the bridge: to HOST7 on eth1.300.
    let mut back = ip4([10, 0, 0, 2], [10, 7, 0, 5], 64);
    back[..6].copy_from_slice(&MAC0);
    let mut v = vec![h.buf(&back)];
    crate::graph::receive(&mut h.ctx, &h.t, 0, &mut v);
    let q = std::mem::take(&mut h.ctx.out[1]);
    assert_eq!(q.len(), 1);
    assert_eq!(&q[0].data()[12..16], &[0x81, 0x00, 0x01, 0x2c]);
    h.ctx.cache.free_all(&mut q.into_iter().collect());
}

#[test]
fn the_bvi_mac_is_never_taken_by_a_host() {
    let h = Harness::with_bvi();
    let macs = h.t.macs.clone().unwrap();
    // A host that sends from the BVI's address does not steal it.
    let mut h = h;
    through_graph(
        &mut h,
        &[tagged(eth([0xff; 6], 0x88b5), [0xff; 6], MAC_BVI, 200)],
    );
    assert_eq!(macs.lookup(MacKey::new(7, MAC_BVI)), Some(BVI_MEMBER));
}
