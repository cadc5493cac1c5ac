//! ethernet-input: finds the interface a frame belongs to and hands it to its L3 node.
//!
//! Reads: the Ethernet and 802.1Q headers, the receive port. Sets: `meta.rx_if`, `meta.l3_off`.
//! Next: ip4-forward (EtherType 0x0800), ip6-forward (0x86dd); everything else is dropped with a
//! reason. Unicast frames must be addressed to the interface's MAC (an L3 port is not
//! promiscuous); broadcast and multicast frames pass to L3, which decides.

use super::{be16, Ctx};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::tables::{Tables, NO_IF};

pub fn ethernet_input(
    ctx: &mut Ctx,
    t: &Tables,
    port: u16,
    pkts: &mut Vec<PktBuf>,
    ip4: &mut Vec<PktBuf>,
    ip6: &mut Vec<PktBuf>,
) {
    let pm = &t.ports[port as usize];
    for mut b in pkts.drain(..) {
        let d = b.data();
        if d.len() < 14 {
            ctx.drop(b, DropReason::BadLength);
            continue;
        }
        let mut et = be16(d, 12);
        let mut l3 = 14u16;
        let mut ifx = pm.untagged;
        if et == 0x8100 {
            if d.len() < 18 {
                ctx.drop(b, DropReason::BadLength);
                continue;
            }
            ifx = pm.by_vlan(be16(d, 14) & 0x0fff);
            et = be16(d, 16);
            l3 = 18;
        }
        if ifx == NO_IF {
            ctx.drop(b, DropReason::UnknownVlan);
            continue;
        }
        let ifc = &t.ifs[ifx as usize];
        if !ifc.up {
            ctx.drop(b, DropReason::InterfaceDown);
            continue;
        }
        if d[0] & 1 == 0 && d[0..6] != ifc.mac.0 {
            ctx.drop(b, DropReason::NotForUs);
            continue;
        }
        let m = b.meta_mut();
        m.rx_if = ifx;
        m.rx_port = port;
        m.l3_off = l3;
        match et {
            0x0800 => ip4.push(b),
            0x86dd => ip6.push(b),
            // ARP and ND arrive with real ports and the control plane; counted until then.
            0x0806 => ctx.drop(b, DropReason::LocalUnhandled),
            _ => ctx.drop(b, DropReason::UnknownEthertype),
        }
    }
}
