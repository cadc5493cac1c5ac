//! l2-input and l2-flood on a bridge domain of three members: `eth0` and `eth1` untagged on
//! ports 0 and 1, `eth2.100` tagged with VLAN 100 on port 2.

use std::sync::Arc;

use packet::ethernet::MacAddr;

use crate::counters::DropReason;
use crate::graph::harness::{Harness, Out};
use crate::graph::{NodeId, To};
use crate::l2::bridge::{l2pt, Bpdu, Bridge, BridgeCounters};
use crate::l2::{L2Port, MacKey, MacTable};
use crate::node::Ctx;
use crate::tables::{Interface, PortMap, Tables, NO_IF};

pub(crate) const A: [u8; 6] = [2, 0, 0, 0, 0xa, 1];
pub(crate) const B: [u8; 6] = [2, 0, 0, 0, 0xb, 1];
pub(crate) const C: [u8; 6] = [2, 0, 0, 0, 0xc, 1];
const BROADCAST: [u8; 6] = [0xff; 6];
pub(crate) const BRIDGE_ID: u16 = 10;

fn member(name: &str, port: u16, vlan: Option<u16>, member: u32, learn: bool) -> Interface {
    Interface {
        name: name.into(),
        port,
        vlan,
        s_vlan: None,
        mac: MacAddr([2, 0, 0, 0, 0, port as u8]),
        mtu: 1500,
        vrf: 0,
        up: true,
        v4: vec![],
        v6: vec![],
        punt_local: false,
        l2: Some(L2Port {
            bridge: 0,
            blocked: false,
            member,
            learn,
            l2pt: 0,
        }),
        bvi: None,
    }
}

pub(crate) fn bridged(flood_unknown: bool, bpdu: Bpdu) -> Harness {
    let mut h = Harness::new();
    let mut vlans = vec![NO_IF; 4096];
    vlans[100] = 2;
    let mut t = Tables::empty(1000);
    t.ifs = vec![
        member("eth0", 0, None, 7, true),
        member("eth1", 1, None, 8, true),
        member("eth2.100", 2, Some(100), 9, true),
    ]
    .into_boxed_slice();
    t.ports = vec![
        PortMap {
            untagged: 0,
            tunnel: false,
            vlans: Box::new([]),
            qinq: Box::new([]),
        },
        PortMap {
            untagged: 1,
            tunnel: false,
            vlans: Box::new([]),
            qinq: Box::new([]),
        },
        PortMap {
            untagged: NO_IF,
            tunnel: false,
            vlans: vlans.into_boxed_slice(),
            qinq: Box::new([]),
        },
    ]
    .into_boxed_slice();
    t.bridges = vec![Bridge {
        name: "office".into(),
        id: BRIDGE_ID,
        members: vec![0, 1, 2].into_boxed_slice(),
        flood_unknown,
        bpdu,
        bvi: NO_IF,
        snoop: None,
        dlsw: false,
        counters: Arc::new(BridgeCounters::default()),
    }]
    .into_boxed_slice();
    // Member ids 7, 8, 9 are interfaces 0, 1, 2; id 3 was a member since removed.
    let mut members = vec![NO_IF; 10];
    members[7] = 0;
    members[8] = 1;
    members[9] = 2;
    t.l2_members = members.into_boxed_slice();
    t.macs = Some(Arc::new(MacTable::new(1024)));
    h.t = t;
    let cache = std::mem::replace(
        &mut h.ctx.cache,
        crate::buffer::BufCache::new(crate::buffer::Pool::new(1)),
    );
    h.ctx = Ctx::new(cache, 3, 1000);
    h
}

fn frame(dst: [u8; 6], src: [u8; 6], vlan: Option<u16>) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    if let Some(v) = vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&v.to_be_bytes());
    }
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&[0xee; 46]);
    f
}

/// Runs frames received on `port` through ethernet-input, then the L2 nodes.
fn switch(h: &mut Harness, port: u16, frames: &[Vec<u8>]) -> (Out, Out) {
    let out = h.push(NodeId::EthernetInput, port, frames);
    let v = out.to.into_values().next().unwrap_or_default();
    assert!(
        v.len() == frames.len(),
        "ethernet-input sends members' frames to l2-input"
    );
    let mut l2 = h.run_bufs(NodeId::L2Input, v);
    let flood = match l2.to.remove("l2-flood") {
        Some(v) => h.run_bufs(NodeId::L2Flood, v),
        None => Out::default(),
    };
    (l2, flood)
}

pub(crate) fn tx(out: &Out, port: u16) -> Vec<Vec<u8>> {
    out.to
        .get(&format!("tx {port}"))
        .map(|v| v.iter().map(|b| b.data().to_vec()).collect())
        .unwrap_or_default()
}

#[test]
fn unknown_destinations_flood_to_every_other_member_tagged_for_each() {
    let mut h = bridged(true, Bpdu::Punt);
    let f = frame(B, A, None);
    let (l2, flood) = switch(&mut h, 0, std::slice::from_ref(&f));
    assert!(l2.to.is_empty(), "nothing known yet");
    // Split horizon: nothing back out of port 0; port 1 as it came, port 2 tagged 100.
    assert_eq!(tx(&flood, 0).len(), 0);
    assert_eq!(tx(&flood, 1), vec![f.clone()]);
    assert_eq!(tx(&flood, 2), vec![frame(B, A, Some(100))]);
    let c = &h.t.bridges[0].counters;
    assert_eq!(BridgeCounters::get(&c.flooded), 1);
    assert_eq!(BridgeCounters::get(&c.flood_copies), 2);
    assert_eq!(BridgeCounters::get(&c.unknown_unicast), 1);
    assert_eq!(BridgeCounters::get(&c.learned), 1);
    // A was learned on member 7 (eth0).
    let macs = h.t.macs.clone().unwrap();
    assert_eq!(macs.lookup(MacKey::new(BRIDGE_ID, A)), Some(7));
}

#[test]
fn a_learned_destination_gets_the_frame_alone_with_its_tag_rewritten() {
    let mut h = bridged(true, Bpdu::Punt);
    // B speaks from eth2.100 (tagged), then A answers from eth0 (untagged).
    switch(&mut h, 2, &[frame(BROADCAST, B, Some(100))]);
    let (l2, flood) = switch(&mut h, 0, &[frame(B, A, None), frame(B, A, None)]);
    assert!(flood.to.is_empty(), "known: not flooded");
    let sent = tx(&l2, 2);
    assert_eq!(sent.len(), 2);
    assert_eq!(&sent[0][12..16], &[0x81, 0x00, 0x00, 0x64], "tag pushed");
    // And back: the tag popped on the way to eth0.
    let (l2, _) = switch(&mut h, 2, &[frame(A, B, Some(100))]);
    assert_eq!(tx(&l2, 0), vec![frame(A, B, None)]);
    let c = &h.t.bridges[0].counters;
    assert_eq!(BridgeCounters::get(&c.forwarded), 3);
    let line = h.trace(NodeId::L2Input, &l2.to["tx 0"][0], To::Tx(0));
    assert_eq!(line, "bridge office: to 02:00:00:00:0a:01 on eth0");
}

#[test]
fn filtered_unknown_reserved_and_moved_frames_each_get_their_fate() {
    let mut h = bridged(false, Bpdu::Drop);
    switch(&mut h, 0, &[frame(BROADCAST, A, None)]);
    // To A from A's own member: filtered. To C (unknown) with flooding off: dropped.
    let mut bpdu = frame([0x01, 0x80, 0xc2, 0, 0, 0], B, None);
    bpdu[12..14].copy_from_slice(&38u16.to_be_bytes());
    let mut lldp = frame([0x01, 0x80, 0xc2, 0, 0, 0x0e], B, None);
    lldp[12..14].copy_from_slice(&0x88ccu16.to_be_bytes());
    let (l2, flood) = switch(
        &mut h,
        0,
        &[frame(A, B, None), frame(C, B, None), bpdu, lldp],
    );
    assert!(flood.to.is_empty());
    assert_eq!(l2.dropped(DropReason::L2SameInterface), 1);
    assert_eq!(l2.dropped(DropReason::L2UnknownUnicast), 1);
    assert_eq!(l2.dropped(DropReason::L2BpduDropped), 1);
    assert_eq!(l2.count("l2-control"), 1, "LLDP goes to the control plane");
    // B came from eth0; now it speaks from eth1: moved (after its first second: a move within
    // the second it was learned is refused as a flap).
    let macs = h.t.macs.clone().unwrap();
    assert_eq!(macs.lookup(MacKey::new(BRIDGE_ID, B)), Some(7));
    h.ctx.clock_ns += 2_000_000_000;
    switch(&mut h, 1, &[frame(BROADCAST, B, None)]);
    assert_eq!(macs.lookup(MacKey::new(BRIDGE_ID, B)), Some(8));
    assert_eq!(BridgeCounters::get(&h.t.bridges[0].counters.moved), 1);
}

#[test]
fn an_address_on_a_removed_member_is_flooded_not_sent_astray() {
    let mut h = bridged(true, Bpdu::Punt);
    let macs = h.t.macs.clone().unwrap();
    macs.set_static(MacKey::new(BRIDGE_ID, C), 3).unwrap();
    let (l2, flood) = switch(&mut h, 0, &[frame(C, A, None)]);
    assert!(l2.to.is_empty());
    assert_eq!(tx(&flood, 1).len() + tx(&flood, 2).len(), 2);
}

#[test]
fn a_member_that_does_not_learn_leaves_the_table_alone() {
    let mut h = bridged(true, Bpdu::Punt);
    h.t.ifs[0].l2.as_mut().unwrap().learn = false;
    switch(&mut h, 0, &[frame(BROADCAST, A, None)]);
    assert_eq!(h.t.macs.as_ref().unwrap().len(), 0);
    // With no other member up, a flood has nowhere to go.
    h.t.ifs[1].up = false;
    h.t.ifs[2].up = false;
    let (_, flood) = switch(&mut h, 0, &[frame(BROADCAST, A, None)]);
    assert_eq!(flood.dropped(DropReason::L2NoFloodMember), 1);
}

#[test]
fn a_dot1q_tunnel_member_carries_customer_tags_inside_the_members_tag() {
    let mut h = bridged(true, Bpdu::Punt);
    h.t.ports[0].tunnel = true;
    // A customer frame tagged 55 on the tunnel port: the whole frame is eth0's.
    let customer = frame(BROADCAST, A, Some(55));
    let (_, flood) = switch(&mut h, 0, std::slice::from_ref(&customer));
    assert_eq!(
        tx(&flood, 1),
        vec![customer.clone()],
        "untagged member: as it came"
    );
    let out = &tx(&flood, 2)[0];
    assert_eq!(
        &out[12..20],
        &[0x81, 0x00, 0, 100, 0x81, 0x00, 0, 55],
        "Q-in-Q"
    );
    // And back from the provider side: the outer tag comes off, the customer's stays.
    let mut provider = frame(A, B, Some(55));
    provider.splice(12..12, [0x81, 0x00, 0, 100]);
    let (l2, _) = switch(&mut h, 2, &[provider]);
    let back = &tx(&l2, 0)[0];
    assert_eq!(&back[12..16], &[0x81, 0x00, 0, 55]);
}

#[test]
fn storm_control_polices_each_kind_of_flooded_frame_per_member() {
    use crate::l2::bridge::StormControl;
    let mut h = bridged(true, Bpdu::Punt);
    // Member 7 (eth0): 160 broadcasts a second (a burst of 16), multicast not policed.
    let sc = Arc::new(StormControl::new([Some(160), None, Some(160)]));
    let mut storms = vec![None; 10];
    storms[7] = Some(sc.clone());
    h.t.l2_storm = storms.into_boxed_slice();
    let bcast: Vec<_> = (0..40).map(|_| frame(BROADCAST, A, None)).collect();
    let mcast: Vec<_> = (0..40)
        .map(|_| frame([1, 0, 0x5e, 0, 0, 1], A, None))
        .collect();
    let (l2, flood) = switch(&mut h, 0, &bcast);
    assert_eq!(l2.dropped(DropReason::L2StormControl), 24);
    assert_eq!(tx(&flood, 1).len(), 16);
    let (l2, _) = switch(&mut h, 0, &mcast);
    assert_eq!(l2.dropped(DropReason::L2StormControl), 0);
    assert_eq!(sc.dropped[0].load(std::sync::atomic::Ordering::Relaxed), 24);
    assert_eq!(
        BridgeCounters::get(&h.t.bridges[0].counters.storm_dropped),
        24
    );
    // Another member is not policed by eth0's buckets.
    let (l2, _) = switch(&mut h, 1, &bcast[..20]);
    assert_eq!(l2.dropped(DropReason::L2StormControl), 0);
}

/// `bridged` plus port 3 with two 802.1ad members: S-tag 10 with C-tag 20 (member 10), and
/// every frame of S-tag 11 (member 11: the customer's tags ride inside).
fn qinq_bridged() -> Harness {
    let mut h = bridged(true, Bpdu::Punt);
    let mut ifs = h.t.ifs.to_vec();
    ifs.push(Interface {
        s_vlan: Some(10),
        ..member("eth3.10.20", 3, Some(20), 10, true)
    });
    ifs.push(Interface {
        s_vlan: Some(11),
        ..member("eth3.11", 3, None, 11, true)
    });
    h.t.ifs = ifs.into_boxed_slice();
    let mut ports = h.t.ports.to_vec();
    ports.push(PortMap {
        untagged: NO_IF,
        tunnel: false,
        vlans: Box::new([]),
        qinq: Box::new([
            (PortMap::qinq_key(10, 20), 3),
            (PortMap::qinq_key(11, crate::tables::ANY_C_TAG), 4),
        ]),
    });
    h.t.ports = ports.into_boxed_slice();
    let mut b = h.t.bridges.to_vec();
    b[0].members = vec![0, 1, 2, 3, 4].into_boxed_slice();
    h.t.bridges = b.into_boxed_slice();
    let mut m = h.t.l2_members.to_vec();
    m.resize(12, NO_IF);
    m[10] = 3;
    m[11] = 4;
    h.t.l2_members = m.into_boxed_slice();
    let cache = std::mem::replace(
        &mut h.ctx.cache,
        crate::buffer::BufCache::new(crate::buffer::Pool::new(1)),
    );
    h.ctx = Ctx::new(cache, 4, 1000);
    h
}

/// A frame with an S-tag (0x88a8) and optionally a C-tag inside it.
fn qinq_frame(dst: [u8; 6], src: [u8; 6], s: u16, c: Option<u16>) -> Vec<u8> {
    let inner = frame(dst, src, c);
    let mut f = inner[..12].to_vec();
    f.extend_from_slice(&[0x88, 0xa8]);
    f.extend_from_slice(&s.to_be_bytes());
    f.extend_from_slice(&inner[12..]);
    f
}

#[test]
fn q_in_q_members_take_their_s_and_c_tags_in_and_out() {
    let mut h = qinq_bridged();
    // Flooded from eth0 (untagged): port 3 gets one copy per member, each with its own tags.
    let f = frame(B, A, None);
    let (_, flood) = switch(&mut h, 0, std::slice::from_ref(&f));
    let mut out3 = tx(&flood, 3);
    out3.sort();
    let mut want = vec![qinq_frame(B, A, 10, Some(20)), qinq_frame(B, A, 11, None)];
    want.sort();
    assert_eq!(out3, want);
    // From S10/C20: learned on member 10, both tags popped on the way to eth0.
    let (l2, _) = switch(&mut h, 3, &[qinq_frame(A, B, 10, Some(20))]);
    assert_eq!(tx(&l2, 0), vec![frame(A, B, None)]);
    let macs = h.t.macs.clone().unwrap();
    assert_eq!(macs.lookup(MacKey::new(BRIDGE_ID, B)), Some(10));
    // From S11 with a customer tag 99 inside: the S-tag's own member; the C-tag is payload and
    // stays; to eth2.100 the S-tag is replaced by the member's 802.1Q tag.
    let (_, flood) = switch(
        &mut h,
        3,
        &[qinq_frame(C, [2, 0, 0, 0, 0xd, 1], 11, Some(99))],
    );
    let customer = frame(C, [2, 0, 0, 0, 0xd, 1], Some(99));
    assert_eq!(tx(&flood, 0), vec![customer.clone()]);
    let mut on_vlan100 = customer[..12].to_vec();
    on_vlan100.extend_from_slice(&[0x81, 0x00, 0x00, 100]);
    on_vlan100.extend_from_slice(&customer[12..]);
    assert_eq!(tx(&flood, 2), vec![on_vlan100]);
    assert_eq!(
        macs.lookup(MacKey::new(BRIDGE_ID, [2, 0, 0, 0, 0xd, 1])),
        Some(11)
    );
    // An S-tag no member has is dropped as an unknown VLAN; priority bits are kept.
    let out = h.push(NodeId::EthernetInput, 3, &[qinq_frame(A, B, 12, Some(20))]);
    assert_eq!(out.dropped(DropReason::UnknownVlan), 1);
    let mut prio = qinq_frame(A, B, 10, Some(20));
    prio[14] |= 0xa0; // PCP 5 on the S-tag
    let (l2, _) = switch(&mut h, 3, &[prio]);
    assert_eq!(tx(&l2, 0).len(), 1);
    let (l2, _) = switch(&mut h, 0, &[frame(B, A, None)]);
    assert_eq!(tx(&l2, 3), vec![qinq_frame(B, A, 10, Some(20))]);
}

/// An 802.3 frame to `dst` with an LLC header (`llc`) and padding.
fn llc_frame(dst: [u8; 6], src: [u8; 6], llc: &[u8]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&(llc.len() as u16 + 40).to_be_bytes());
    f.extend_from_slice(llc);
    f.resize(14 + llc.len() + 40, 0);
    f
}

#[test]
fn a_tunnel_customers_protocol_frames_cross_under_the_l2pt_address_and_come_back_whole() {
    let mut h = qinq_bridged();
    // eth0 is the customer's tunnel port, tunnelling STP, CDP and LACP.
    let mut ifs = h.t.ifs.to_vec();
    ifs[0].l2.as_mut().unwrap().l2pt = l2pt::STP | l2pt::CDP | l2pt::LACP;
    h.t.ifs = ifs.into_boxed_slice();
    let stp_dst = [0x01, 0x80, 0xc2, 0, 0, 0];
    let cdp_dst = [0x01, 0x00, 0x0c, 0xcc, 0xcc, 0xcc];
    let bpdu = llc_frame(stp_dst, A, &[0x42, 0x42, 0x03, 0, 0]);
    let cdp = llc_frame(cdp_dst, A, &[0xaa, 0xaa, 0x03, 0, 0, 0x0c, 0x20, 0x00]);
    let mut lacp = frame([0x01, 0x80, 0xc2, 0, 0, 2], A, None);
    lacp[12..14].copy_from_slice(&0x8809u16.to_be_bytes());
    let (l2, flood) = switch(&mut h, 0, &[bpdu.clone(), cdp.clone(), lacp.clone()]);
    assert_eq!(l2.count("l2-control"), 0, "tunnelled, not taken");
    // Every other member gets them under the L2PT address, the rest of the frame untouched.
    let out1 = tx(&flood, 1);
    assert_eq!(out1.len(), 3);
    for (got, sent) in out1.iter().zip([&bpdu, &cdp, &lacp]) {
        assert_eq!(&got[..6], &l2pt::MAC);
        assert_eq!(&got[6..], &sent[6..]);
    }
    assert_eq!(tx(&flood, 3).len(), 6, "both provider members, three each");
    // Back from the provider side (S-tag 11): restored for the tunnel member, each to its own
    // address, and left under the L2PT address for the member that does not tunnel.
    let back: Vec<Vec<u8>> = [&bpdu, &cdp, &lacp]
        .iter()
        .map(|f| {
            let mut g = f.to_vec();
            g[..6].copy_from_slice(&l2pt::MAC);
            g[6..12].copy_from_slice(&B);
            g.splice(12..12, [0x88, 0xa8, 0x00, 11]);
            g
        })
        .collect();
    let (_, flood) = switch(&mut h, 3, &back);
    let to_customer = tx(&flood, 0);
    let dsts: Vec<&[u8]> = to_customer.iter().map(|f| &f[..6]).collect();
    assert_eq!(
        dsts,
        [&stp_dst[..], &cdp_dst[..], &[0x01, 0x80, 0xc2, 0, 0, 2][..]]
    );
    assert_eq!(
        &to_customer[0][12..],
        &bpdu[12..],
        "S-tag gone, the BPDU whole"
    );
    assert!(tx(&flood, 1).iter().all(|f| f[..6] == l2pt::MAC));
    let c = &h.t.bridges[0].counters;
    assert_eq!(BridgeCounters::get(&c.l2pt), 6, "3 in, 3 out");
}

/// An 802.3 LLC frame (DSAP and SSAP `sap`, a U frame's control byte) from `src` to `dst`.
fn llc(dst: [u8; 6], src: [u8; 6], sap: u8) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0, 3, sap, sap, 0xaf]);
    f.resize(60, 0);
    f
}

#[test]
fn where_dlsw_serves_the_domain_its_llc_frames_go_to_the_control_plane_not_across() {
    let mut h = bridged(true, Bpdu::Flood);
    let mut b = h.t.bridges[0].clone();
    b.dlsw = true;
    h.t.bridges = vec![b].into_boxed_slice();
    // SNA (SAP 4) to a MAC nobody has: to DLSw, not flooded; an IP frame still floods; a
    // spanning-tree BPDU (SAP 0x42) keeps the domain's BPDU rule (here: flooded).
    let mut bpdu = llc([0x01, 0x80, 0xc2, 0, 0, 0], A, 0x42);
    bpdu[12..14].copy_from_slice(&[0, 38]);
    let (l2, flood) = switch(&mut h, 0, &[llc(C, A, 4), frame(C, A, None), bpdu]);
    assert_eq!(l2.count("l2-control"), 0);
    // Punted under `sna`: the harness has no punt path, so it is counted as having no service.
    assert_eq!(l2.dropped(DropReason::LocalUnhandled), 1);
    assert_eq!(tx(&flood, 1).len(), 2, "the IP frame and the BPDU flood");
    // Without DLSw, the same SNA frame is switched like any other.
    let mut h = bridged(true, Bpdu::Flood);
    let (l2, flood) = switch(&mut h, 0, &[llc(C, A, 4)]);
    assert_eq!(l2.count("l2-control"), 0);
    assert_eq!(tx(&flood, 1).len(), 1);
}
