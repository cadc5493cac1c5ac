//! ethernet-input: finds the interface a frame belongs to and hands it to its L3 node.
//!
//! Reads: the Ethernet and 802.1Q headers, the receive port. Sets: `meta.rx_if`, `meta.rx_port`,
//! `meta.l3_off`, `meta.l2_group` (sent to a group address). Next: ip4-forward (EtherType 0x0800), ip6-forward (0x86dd), the punt path (ARP,
//! 0x0806); everything else is dropped with a reason. Unicast frames must be addressed to the interface's MAC (an L3 port is
//! not promiscuous); broadcast and multicast frames pass to L3, which
//! decides: only IP multicast and broadcast may arrive in them (RFC 1812 5.3.4).
//!
//! Two passes, as VPP's nodes do: the first reads every frame in place and records its next node,
//! requesting the metadata and header lines of the frame `PREFETCH` places ahead (frames arrive
//! cold from another core or a NIC); the second only moves buffer handles.

use super::{be16, Ctx, VECTOR};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::tables::{Tables, NO_IF};

const PREFETCH: usize = 4;
const TO_IP4: u8 = u8::MAX;
const TO_IP6: u8 = u8::MAX - 1;
const TO_ARP: u8 = u8::MAX - 2;

/// Returns the bytes received, counted here while the lines are hot.
pub fn ethernet_input(
    ctx: &mut Ctx,
    t: &Tables,
    port: u16,
    pkts: &mut Vec<PktBuf>,
    ip4: &mut Vec<PktBuf>,
    ip6: &mut Vec<PktBuf>,
) -> u64 {
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
    for (i, b) in pkts.drain(..).enumerate() {
        match next[i] {
            TO_IP4 => ip4.push(b),
            TO_IP6 => ip6.push(b),
            TO_ARP => ctx.punt(b, crate::punt::PuntClass::Neighbor, NO_IF),
            r => ctx.drop(b, DropReason::ALL[r as usize]),
        }
    }
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
    if et == 0x8100 {
        if d.len() < 18 {
            return DropReason::BadLength as usize;
        }
        ifx = pm.by_vlan(be16(d, 14) & 0x0fff);
        et = be16(d, 16);
        l3 = 18;
    }
    if ifx == NO_IF {
        return DropReason::UnknownVlan as usize;
    }
    let ifc = &t.ifs[ifx as usize];
    if !ifc.up {
        return DropReason::InterfaceDown as usize;
    }
    let group = d[0] & 1 != 0;
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
        _ => DropReason::UnknownEthertype as usize,
    }
}
