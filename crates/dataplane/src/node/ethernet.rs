//! ethernet-input: finds the interface a frame belongs to and hands it to its L3 node.
//!
//! Reads: the Ethernet, 802.1Q and 802.1ad (Q-in-Q) headers, the receive port. Sets: `meta.rx_if`, `meta.rx_port`,
//! `meta.l3_off`, `meta.l2_group` (sent to a group address). Next: ip4-forward (EtherType
//! 0x0800), ip6-forward (0x86dd), the punt path (ARP, 0x0806), l2-control (802.3 LLC frames,
//! LACP, LLDP), l2-input (every frame of a bridge-domain member); everything else is dropped
//! with a reason; mpls-input (0x8847); pw-encap (every frame of a pseudowire's attachment
//! circuit). Unicast frames must be addressed to the interface's MAC (an L3 port is
//! not promiscuous); broadcast and multicast frames pass to L3, which
//! decides: only IP multicast and broadcast may arrive in them (RFC 1812 5.3.4).
//!
//! Two passes, as VPP's nodes do: the first reads every frame in place and records its next node,
//! requesting the metadata and header lines of the frame `PREFETCH` places ahead (frames arrive
//! cold from another core or a NIC); the second only moves buffer handles.

use super::{be16, Ctx, VECTOR};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{Edge, Node, NodeId, To};
use crate::tables::{Tables, NO_IF};

const PREFETCH: usize = 4;
const TO_IP4: u8 = u8::MAX;
const TO_IP6: u8 = u8::MAX - 1;
const TO_ARP: u8 = u8::MAX - 2;
const TO_L2: u8 = u8::MAX - 3;
const TO_BRIDGE: u8 = u8::MAX - 4;
const TO_MPLS: u8 = u8::MAX - 5;
const TO_PW: u8 = u8::MAX - 6;

pub struct EthernetInput;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Ip4,
    Ip6,
    /// Non-IP control frames: LLC/SNAP (IS-IS, BPDUs), LACP, LLDP.
    L2Control,
    /// Every frame of a bridge-domain member.
    L2Input,
    /// Labelled frames (EtherType 0x8847).
    Mpls,
    /// Every frame of an interface cross-connected to a pseudowire.
    PwEncap,
}

impl Edge for Next {
    const ALL: &'static [Self] = &[
        Next::Ip4,
        Next::Ip6,
        Next::L2Control,
        Next::L2Input,
        Next::Mpls,
        Next::PwEncap,
    ];
    #[inline(always)]
    fn node(self) -> NodeId {
        match self {
            Next::Ip4 => NodeId::Ip4Forward,
            Next::Ip6 => NodeId::Ip6Forward,
            Next::L2Control => NodeId::L2Control,
            Next::L2Input => NodeId::L2Input,
            Next::Mpls => NodeId::MplsInput,
            Next::PwEncap => NodeId::PwEncap,
        }
    }
}

impl Node for EthernetInput {
    const NAME: &'static str = "ethernet-input";
    type Next = Next;
    const TRANSMITS: bool = false;
    const DROPS: &'static [DropReason] = &[
        DropReason::NotForUs,
        DropReason::UnknownEthertype,
        DropReason::UnknownVlan,
        DropReason::InterfaceDown,
        DropReason::BadLength,
    ];
    const CONSUMED: &'static str = "handed to the control plane (ARP)";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        ctx.rx_bytes = ethernet_input(ctx, t, ctx.rx_port, pkts);
    }

    fn trace(t: &Tables, b: &PktBuf, _to: To) -> String {
        let ifc = &t.ifs[b.meta().rx_if as usize];
        let vrf = t.vrfs.get(ifc.vrf as usize).map(|v| v.name.as_str());
        let vlan = ifc.vlan.map(|v| format!(", vlan {v}")).unwrap_or_default();
        format!("interface {}{vlan}, vrf {}", ifc.name, vrf.unwrap_or("?"))
    }
}

/// Returns the bytes received, counted here while the lines are hot.
#[inline(always)]
fn ethernet_input(ctx: &mut Ctx, t: &Tables, port: u16, pkts: &mut Vec<PktBuf>) -> u64 {
    let pm = &t.ports[port as usize];
    let n = pkts.len();
    let mut next = [0u8; VECTOR];
    let mut bytes = 0u64;
    for b in pkts.iter().take(PREFETCH) {
        b.prefetch();
    }
    for i in 0..n {
        if i + PREFETCH < n {
            pkts[i + PREFETCH].prefetch();
        }
        let b = &mut pkts[i];
        bytes += b.len() as u64;
        next[i] = classify(t, pm, port, b) as u8;
    }
    let mut ip4 = ctx.frames.take(Next::Ip4);
    let mut ip6 = ctx.frames.take(Next::Ip6);
    for (i, b) in pkts.drain(..).enumerate() {
        match next[i] {
            TO_IP4 => ip4.push(b),
            TO_IP6 => ip6.push(b),
            TO_ARP => ctx.punt(b, crate::punt::PuntClass::Arp, NO_IF),
            TO_L2 => ctx.to(Next::L2Control, b),
            TO_BRIDGE => ctx.to(Next::L2Input, b),
            TO_MPLS => ctx.to(Next::Mpls, b),
            TO_PW => ctx.to(Next::PwEncap, b),
            r => ctx.drop(b, DropReason::ALL[r as usize]),
        }
    }
    ctx.frames.put(Next::Ip4, ip4);
    ctx.frames.put(Next::Ip6, ip6);
    bytes
}

/// The next node of one frame: `TO_IP4`, `TO_IP6`, or a drop reason's index.
#[inline(always)]
fn classify(t: &Tables, pm: &crate::tables::PortMap, port: u16, b: &mut PktBuf) -> usize {
    let d = b.data();
    if d.len() < 14 {
        return DropReason::BadLength as usize;
    }
    let mut et = be16(d, 12);
    let mut l3 = 14u16;
    let mut ifx = pm.untagged;
    if et == 0x8100 && !pm.tunnel {
        if d.len() < 18 {
            return DropReason::BadLength as usize;
        }
        ifx = pm.by_vlan(be16(d, 14) & 0x0fff);
        et = be16(d, 16);
        l3 = 18;
    } else if et == 0x88a8 && !pm.qinq.is_empty() {
        // 802.1ad: an S-tag and C-tag pair's sub-interface, else the S-tag's own.
        if d.len() < 18 {
            return DropReason::BadLength as usize;
        }
        let s = be16(d, 14) & 0x0fff;
        ifx = NO_IF;
        if be16(d, 16) == 0x8100 && d.len() >= 22 {
            ifx = pm.by_qinq(s, be16(d, 18) & 0x0fff);
            l3 = 22;
        }
        if ifx == NO_IF {
            ifx = pm.by_qinq(s, crate::tables::ANY_C_TAG);
            l3 = 18;
        }
        et = be16(d, l3 as usize - 2);
    }
    if ifx == NO_IF {
        return DropReason::UnknownVlan as usize;
    }
    let ifc = &t.ifs[ifx as usize];
    if !ifc.up {
        return DropReason::InterfaceDown as usize;
    }
    let group = d[0] & 1 != 0;
    if ifc.l2.is_some() {
        // A bridge member: switched whatever its addresses and EtherType.
        let m = b.meta_mut();
        m.l2_group = group;
        m.rx_if = ifx;
        m.rx_port = port;
        m.l3_off = l3;
        return TO_BRIDGE as usize;
    }
    if let Some(m) = t.mpls.as_deref() {
        if m.xconnect(ifx).is_some() {
            // An attachment circuit: every frame goes over its pseudowire, whatever its
            // addresses and EtherType.
            let meta = b.meta_mut();
            meta.rx_if = ifx;
            meta.rx_port = port;
            meta.l3_off = l3;
            return TO_PW as usize;
        }
    }
    if !group && d[0..6] != ifc.mac.0 {
        return DropReason::NotForUs as usize;
    }
    let m = b.meta_mut();
    m.l2_group = group;
    m.rx_if = ifx;
    m.rx_port = port;
    m.l3_off = l3;
    match et {
        0x0800 => TO_IP4 as usize,
        0x86dd => TO_IP6 as usize,
        // ARP goes to the control plane's neighbour manager (dropped and counted without one).
        0x0806 => TO_ARP as usize,
        // Labelled: mpls-input checks that the interface takes MPLS.
        0x8847 => TO_MPLS as usize,
        // 802.3 frames (LLC), slow protocols (LACP) and LLDP: l2-control.
        0..=1500 | 0x8809 | 0x88cc => TO_L2 as usize,
        _ => DropReason::UnknownEthertype as usize,
    }
}

#[cfg(test)]
mod tests {
    use crate::counters::DropReason;
    use crate::graph::harness::{eth, ip4, ip6, Harness, MAC0, MAC1};
    use crate::graph::{NodeId, To};

    #[test]
    fn frames_go_to_their_family_or_are_dropped_with_a_reason() {
        let mut h = Harness::new();
        let mut other_mac = ip4([10, 0, 0, 2], [10, 1, 0, 5], 64);
        other_mac[..6].copy_from_slice(&[2, 9, 9, 9, 9, 9]);
        let mut broadcast = ip4([10, 0, 0, 2], [10, 0, 0, 255], 64);
        broadcast[..6].copy_from_slice(&[0xff; 6]);
        let out = h.push(
            NodeId::EthernetInput,
            0,
            &[
                ip4([10, 0, 0, 2], [10, 1, 0, 5], 64),
                ip6(1, 2, 64),
                broadcast,
                other_mac,
                eth(MAC0, 0x88cc),
                eth(MAC0, 0x88b5),
                vec![0; 10],
                eth(MAC0, 0x0806),
            ],
        );
        assert_eq!(out.count("ip4-forward"), 2);
        assert_eq!(out.count("ip6-forward"), 1);
        assert_eq!(out.count("l2-control"), 1, "LLDP");
        assert!(out.to["ip4-forward"][1].meta().l2_group);
        assert_eq!(out.dropped(DropReason::NotForUs), 1);
        assert_eq!(out.dropped(DropReason::UnknownEthertype), 1);
        assert_eq!(out.dropped(DropReason::BadLength), 1);
        // ARP goes up the punt path; without one (this harness) it is counted, not lost.
        assert_eq!(out.dropped(DropReason::LocalUnhandled), 1);
        let b = &out.to["ip4-forward"][0];
        assert_eq!(
            (b.meta().rx_if, b.meta().l3_off, b.meta().rx_port),
            (0, 14, 0)
        );
        let line = h.trace(NodeId::EthernetInput, b, To::Node(NodeId::Ip4Forward));
        assert_eq!(line, "interface eth0, vrf default");
    }

    #[test]
    fn tagged_frames_find_their_sub_interface() {
        let mut h = Harness::new();
        let tag = |vid: u16| {
            let mut f = ip4([10, 2, 0, 2], [10, 1, 0, 5], 64);
            f[..6].copy_from_slice(&MAC1);
            let mut t = f[..12].to_vec();
            t.extend_from_slice(&[0x81, 0x00]);
            t.extend_from_slice(&vid.to_be_bytes());
            t.extend_from_slice(&f[12..]);
            t
        };
        let out = h.push(NodeId::EthernetInput, 1, &[tag(100), tag(7)]);
        assert_eq!(out.count("ip4-forward"), 1);
        let b = &out.to["ip4-forward"][0];
        assert_eq!((b.meta().rx_if, b.meta().l3_off), (2, 18));
        assert_eq!(out.dropped(DropReason::UnknownVlan), 1);
        let line = h.trace(NodeId::EthernetInput, b, To::Node(NodeId::Ip4Forward));
        assert_eq!(line, "interface eth1.100, vlan 100, vrf default");
    }
}
