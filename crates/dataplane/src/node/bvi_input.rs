//! bvi-input: where a bridge hands frames to the L3 path: each becomes a frame received on the
//! bridge's routed interface (BVI).
//!
//! Reads: `meta.rx_if` (the member the frame came in on: its bridge, and that bridge's BVI),
//! `meta.l3_off` (past the member's tags), the EtherType in front of it. Sets: `meta.rx_if` to
//! the BVI (the L3 path's ingress interface: its VRF, features, TAP twin), and clears
//! `meta.flowed` (the BVI's `flow: in` accounts the packet whatever its member did). `meta.l2_group` stays
//! as ethernet-input set it, so a unicast IP destination in a flooded broadcast is never
//! forwarded (RFC 1812 5.3.4). Next: ip4-forward, ip6-forward, the punt path (ARP, with the BVI
//! as its interface). Dropped: other EtherTypes (an L3 interface speaks IP and ARP), frames of a
//! BVI that is down.
//!
//! Frames come here from l2-input (known unicast to the BVI's MAC, a static entry of its
//! member id) and from l2-flood (a copy of every broadcast and multicast frame of the bridge).

use super::{be16, Ctx};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{Node, To};
use crate::tables::{Tables, NO_IF};

pub struct BviInput;

/// ip4-forward or ip6-forward, by the packet's version.
pub use super::ToIp as Next;

impl Node for BviInput {
    const NAME: &'static str = "bvi-input";
    type Next = Next;
    const TRANSMITS: bool = false;
    const DROPS: &'static [DropReason] = &[DropReason::BviNotIp];
    const CONSUMED: &'static str = "handed to the control plane (ARP)";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        for mut b in pkts.drain(..) {
            let bvi = bvi_of(t, b.meta().rx_if);
            let up = t.ifs.get(bvi as usize).is_some_and(|i| i.up);
            if !up {
                ctx.drop(b, DropReason::InterfaceDown);
                continue;
            }
            // A new packet for the BVI's arcs: what its member's `flow: in` accounted, the
            // BVI's own accounts again (under the BVI, as its record's input interface).
            let m = b.meta_mut();
            m.rx_if = bvi;
            m.flowed = false;
            let l3 = b.meta().l3_off as usize;
            match be16(b.data(), l3 - 2) {
                0x0800 => ctx.to(Next::Ip4, b),
                0x86dd => ctx.to(Next::Ip6, b),
                0x0806 => ctx.punt(b, crate::punt::PuntClass::Arp, NO_IF),
                _ => ctx.drop(b, DropReason::BviNotIp),
            }
        }
    }

    fn trace(t: &Tables, b: &PktBuf, _to: To) -> String {
        let name = |i: u32| t.ifs.get(i as usize).map_or("?", |i| i.name.as_str());
        format!("routed on {}", name(b.meta().rx_if))
    }
}

/// The BVI of the bridge member `rx_if` is on (`NO_IF` if none).
#[inline(always)]
pub(crate) fn bvi_of(t: &Tables, rx_if: u32) -> u32 {
    t.ifs
        .get(rx_if as usize)
        .and_then(|i| i.l2)
        .and_then(|l2| t.bridges.get(l2.bridge as usize))
        .map_or(NO_IF, |b| b.bvi)
}

#[cfg(test)]
mod tests;
