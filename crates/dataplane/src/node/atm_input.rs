//! atm-input: finds the PVC sub-interface an AAL5 PDU arrived on and hands its packet to L3.
//!
//! The entry node of ports that carry ATM cells (their receive queues reassemble, see
//! [`crate::atm`]), as ethernet-input is of Ethernet ports. Reads: the SunATM pseudo-header in
//! front of the SDU (the VC), the port's PVC map ([`crate::tables::AtmVcMap`]), the RFC 2684
//! LLC/SNAP header of LLC-encapsulated VCs. Sets: `meta.rx_if`, `meta.rx_port`, `meta.l3_off`
//! (past the pseudo-header and the LLC/SNAP header). Next: ip4-forward, ip6-forward. Dropped: a
//! VC with no sub-interface (a commit removed it while its cells were in flight), an interface
//! that is down, an LLC payload that is not routed IP (bridged PDUs, other protocols).
//!
//! The forward nodes rewrite a packet leaving by a PVC with that PVC's pseudo-header and
//! LLC/SNAP header (`Rewrite::atm`), which the port's segmenter reads: a packet forwarded from
//! one PVC to another has its 12 header bytes overwritten and is not moved.

use super::Ctx;
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{Node, To};
use crate::tables::{AtmEncap, Tables};
use packet::atm::{self, PREFIX};

pub struct AtmInput;

/// ip4-forward or ip6-forward, by the packet's version.
pub use super::ToIp as Next;

impl Node for AtmInput {
    const NAME: &'static str = "atm-input";
    type Next = Next;
    const TRANSMITS: bool = false;
    const DROPS: &'static [DropReason] = &[DropReason::UnknownVc, DropReason::AtmNotIp];
    const CONSUMED: &'static str = "";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        let port = ctx.rx_port;
        let Some(map) = t.atm_port(port) else {
            // The port stopped carrying cells in a commit: what it received is not ours.
            for b in pkts.drain(..) {
                ctx.drop(b, DropReason::UnknownVc);
            }
            return;
        };
        let mut ip4 = ctx.frames.take(Next::Ip4);
        let mut ip6 = ctx.frames.take(Next::Ip6);
        let mut bytes = 0u64;
        for mut b in pkts.drain(..) {
            bytes += b.len() as u64;
            let d = b.data();
            if d.len() < PREFIX {
                ctx.drop(b, DropReason::BadLength);
                continue;
            }
            let Some((ifx, encap)) = map.get(atm::sunatm_vc(d)) else {
                ctx.drop(b, DropReason::UnknownVc);
                continue;
            };
            if !t.ifs.get(ifx as usize).is_some_and(|i| i.up) {
                ctx.drop(b, DropReason::InterfaceDown);
                continue;
            }
            let (v6, l3) = match encap {
                AtmEncap::LlcSnap => match atm::parse_llc(&d[PREFIX..]) {
                    Some((atm::LlcPayload::Ipv4, n)) => (false, PREFIX + n),
                    Some((atm::LlcPayload::Ipv6, n)) => (true, PREFIX + n),
                    _ => {
                        ctx.drop(b, DropReason::AtmNotIp);
                        continue;
                    }
                },
                AtmEncap::VcMuxIpv4 => (false, PREFIX),
                AtmEncap::VcMuxIpv6 => (true, PREFIX),
            };
            let m = b.meta_mut();
            m.rx_if = ifx;
            m.rx_port = port;
            m.l3_off = l3 as u16;
            m.l2_group = false;
            if v6 {
                ip6.push(b);
            } else {
                ip4.push(b);
            }
        }
        ctx.frames.put(Next::Ip4, ip4);
        ctx.frames.put(Next::Ip6, ip6);
        ctx.rx_bytes = bytes;
    }

    fn trace(t: &Tables, b: &PktBuf, _to: To) -> String {
        let d = b.data();
        let vc = atm::sunatm_vc(d);
        let ifc = t
            .ifs
            .get(b.meta().rx_if as usize)
            .map_or("?", |i| i.name.as_str());
        format!("vc {}/{}, interface {ifc}", vc >> 16, vc & 0xFFFF)
    }
}
