//! gtpu-encap: the GGSN's downlink. Takes what the lookup sent to an APN's pool
//! (`NextHop::GtpApn`), finds the PDP context holding the destination address, and tunnels the
//! packet to the context's SGSN in a G-PDU (TS 29.281) over IPv4 and UDP.
//!
//! Reads: `meta.next_hop` (the APN), `meta.l3_off` (the inner IPv4 or IPv6 header, checked by
//! the forwarding node), the context table ([`crate::gtp::GtpTable::slot_v4`] / `slot_v6`,
//! then `downlink`). Sets: the inner TTL or hop limit (one less: this is a routed hop), the
//! outer IPv4, UDP and GTP-U headers in the headroom, `meta.l3_off` (the outer header), the
//! context's downlink counters. Next: the outer packet is looked up in the Gn VRF (one batch)
//! and forwarded as the router's own ([`super::ip4::forward`]): a transmit vector, output
//! features, a bridge, or the slow path (fragmentation when the tunnel makes it larger than
//! the Gn side's MTU: the outer header's DF bit is clear, so it is fragmented rather than
//! refused; waiting for the SGSN's MAC). Dropped: a pool address with no context.

use packet::checksum;
use packet::gtp::{gpdu_header, GTPU_PORT};

use super::{be16, be32, lookup_and_forward, Ctx, IpNext, VECTOR};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{Node, To};
use crate::tables::{NextHop, Tables};

pub struct GtpuEncap;

/// Outer IPv4 (20), UDP (8) and GTP-U (8) headers.
pub const OVERHEAD: usize = 36;

impl Node for GtpuEncap {
    const NAME: &'static str = "gtpu-encap";
    type Next = IpNext;
    const TRANSMITS: bool = true;
    const LOOPS_BACK: bool = true;
    const DROPS: &'static [DropReason] = &[DropReason::GtpNoContext];
    const CONSUMED: &'static str = "";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        let Some(g) = t.gtpu.as_deref() else {
            for b in pkts.drain(..) {
                ctx.drop(b, DropReason::GtpNoContext);
            }
            return;
        };
        let apn_of = |b: &PktBuf| match t.next_hops.get(b.meta().next_hop as usize) {
            Some(NextHop::GtpApn { apn }) => *apn,
            _ => u16::MAX,
        };
        // Three dependent misses per packet at a million contexts (the address map, the
        // context, its counters). Each packet's key is read first (its lines are warm); then,
        // while packet i is encapsulated, packet i + D's context and counters and packet
        // i + 2D's map entry are asked for: the misses overlap, without asking for more lines
        // than the core can have in flight.
        const D: usize = 6;
        let counters = g.table.counters(ctx.worker);
        let n = pkts.len();
        // (APN, IPv4 address or the IPv6 /64, IPv6)
        let mut ue = [(u16::MAX, 0u64, false); VECTOR];
        for (k, b) in ue.iter_mut().zip(pkts.iter()) {
            let d = &b.data()[b.meta().l3_off as usize..];
            *k = if d[0] >> 4 == 4 {
                (apn_of(b), u64::from(be32(d, 16)), false)
            } else {
                let prefix = u64::from_be_bytes(d[24..32].try_into().expect("8 bytes"));
                (apn_of(b), prefix, true)
            };
        }
        let map = |i: usize| {
            let (apn, a, v6) = ue[i];
            if !v6 {
                g.table.prefetch_v4(apn, a as u32);
            }
        };
        let mut slots = [u32::MAX; VECTOR];
        let resolve = |i: usize, slots: &mut [u32; VECTOR]| {
            let (apn, a, v6) = ue[i];
            let s = if v6 {
                g.table.slot_v6(apn, a)
            } else {
                g.table.slot_v4(apn, a as u32)
            };
            if let Some(s) = s {
                g.table.prefetch_slot(s);
                counters.prefetch(s);
                slots[i] = s;
            }
        };
        for i in 0..n.min(2 * D) {
            map(i);
        }
        for i in 0..n.min(D) {
            resolve(i, &mut slots);
        }
        let mut keys = [0u32; VECTOR];
        let mut good = std::mem::take(&mut ctx.tmp);
        for (i, mut b) in pkts.drain(..).enumerate() {
            if i + 2 * D < n {
                map(i + 2 * D);
            }
            if i + D < n {
                resolve(i + D, &mut slots);
            }
            let apn = ue[i].0;
            let l3 = b.meta().l3_off as usize;
            let d = &b.data()[l3..];
            let len = if d[0] >> 4 == 4 {
                be16(d, 2) as usize
            } else {
                40 + be16(d, 4) as usize
            };
            let slot = (slots[i] != u32::MAX).then_some(slots[i]);
            let Some(dl) = slot.and_then(|s| g.table.downlink(s, apn)) else {
                ctx.drop(b, DropReason::GtpNoContext);
                continue;
            };
            // This is a routed hop: the forwarding node left the TTL for us (it checked that
            // it was above 1).
            let h = &mut b.data_mut()[l3..];
            if h[0] >> 4 == 4 {
                let old = u16::from_be_bytes([h[8], h[9]]);
                h[8] -= 1;
                let new = u16::from_be_bytes([h[8], h[9]]);
                let c = checksum::update16(be16(h, 10), old, new);
                h[10..12].copy_from_slice(&c.to_be_bytes());
            } else {
                h[7] -= 1;
            }
            counters.add(dl.slot, crate::gtp::DOWN_PACKETS, 1, len as u64);
            // The inner packet alone (no Ethernet padding behind it), then the tunnel in front.
            b.set_len(l3 + len);
            b.pull_front(l3);
            if !b.push_front(OVERHEAD) {
                ctx.drop(b, DropReason::NoBuffer);
                continue;
            }
            write_headers(
                &mut b.data_mut()[..OVERHEAD],
                g.local_v4,
                dl.peer,
                dl.peer_teid,
                len,
            );
            let m = b.meta_mut();
            m.l3_off = 0;
            keys[good.len()] = dl.peer;
            good.push(b);
        }
        if !good.is_empty() {
            lookup_and_forward(
                ctx,
                t,
                &mut good,
                &keys,
                Some(g.gn_vrf),
                |v| &v.v4,
                |ctx, t, b, nh, _| super::ip4::forward(ctx, t, b, nh, false),
                None,
            );
        }
        ctx.tmp = good;
    }

    fn trace(t: &Tables, b: &PktBuf, to: To) -> String {
        let d = &b.data()[b.meta().l3_off as usize..];
        let teid = if d.len() >= 36 { be32(d, 32) } else { 0 };
        format!(
            "tunnelled to {} TEID {teid:#x}: {}",
            std::net::Ipv4Addr::from(if d.len() >= 20 { be32(d, 16) } else { 0 }),
            super::trace_ip(t, b, to)
        )
    }
}

/// Writes the outer IPv4 (DF clear, TTL 64, checksum), UDP (2152 both ways, no checksum, as
/// RFC 768 allows over IPv4) and GTP-U G-PDU headers in front of an inner packet of `len`.
#[inline(always)]
pub fn write_headers(h: &mut [u8], src: u32, dst: u32, teid: u32, len: usize) {
    let total = (OVERHEAD + len) as u16;
    h[0] = 0x45;
    h[1] = 0;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[4..8].copy_from_slice(&[0, 0, 0, 0]);
    h[8] = 64;
    h[9] = 17;
    h[10..12].copy_from_slice(&[0, 0]);
    h[12..16].copy_from_slice(&src.to_be_bytes());
    h[16..20].copy_from_slice(&dst.to_be_bytes());
    let c = checksum::fold(checksum::sum(&h[..20]));
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h[20..22].copy_from_slice(&GTPU_PORT.to_be_bytes());
    h[22..24].copy_from_slice(&GTPU_PORT.to_be_bytes());
    h[24..26].copy_from_slice(&(total - 20).to_be_bytes());
    h[26..28].copy_from_slice(&[0, 0]);
    gpdu_header(&mut h[28..36], teid, len as u16);
}
