//! ip4-forward: validates IPv4 headers, looks the destinations up in the interface's VRF as one
//! batch, and rewrites what can be forwarded.
//!
//! Reads: `meta.l3_off`, `meta.rx_if`, the IPv4 header. Sets: `meta.next_hop`, the TTL and header
//! checksum (RFC 1624 incremental update), the L2 header. Next: the egress port's transmit vector;
//! the slow path for TTL expiry, no route, reject, options, MTU and local delivery; drops by
//! reason for malformed headers (RFC 1812 5.2.2: version, IHL, checksum, length) and martian
//! addresses (5.3.7); the slow path for unicast destinations in link-layer group frames (5.3.4,
//! reading `meta.l2_group`).

use packet::checksum;

use super::{
    be16, be32, enqueue, lookup_and_forward, mix, resolve, rewrite_l2, Action, Ctx, Slow, VECTOR,
};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::tables::Tables;

pub fn ip4_forward(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
    let mut keys = [0u32; VECTOR];
    let mut vrf = u32::MAX;
    let mut mixed = false;
    let mut good = std::mem::take(&mut ctx.tmp);
    for b in pkts.drain(..) {
        let l3 = b.meta().l3_off as usize;
        let d = b.data();
        if d.len() < l3 + 20 {
            ctx.drop(b, DropReason::BadLength);
            continue;
        }
        let h = &d[l3..];
        if h[0] != 0x45 {
            if h[0] >> 4 != 4 || h[0] & 0x0f < 5 {
                ctx.drop(b, DropReason::Ip4BadHeader);
            } else {
                ctx.slow4.push((b, Slow::Options));
            }
            continue;
        }
        if !checksum::ipv4_header_ok(&h[..20]) {
            ctx.drop(b, DropReason::Ip4BadChecksum);
            continue;
        }
        let total = be16(h, 2) as usize;
        if total < 20 || total > h.len() {
            ctx.drop(b, DropReason::BadLength);
            continue;
        }
        let dst = be32(h, 16);
        let src = be32(h, 12);
        if martian(t, src, dst) {
            ctx.drop(b, DropReason::Ip4Martian);
            continue;
        }
        if dst >> 28 == 14 || dst == u32::MAX {
            // Link-scope groups (OSPF, PIM, IGMP, VRRP) and the limited broadcast belong to the
            // control plane; wider multicast is not routed.
            if dst >> 8 == 0x00e0_0000 || dst == u32::MAX {
                let class = crate::punt::class_ip4(h);
                ctx.punt(b, class, crate::tables::NO_IF);
            } else {
                ctx.drop(b, DropReason::MulticastNotRouted);
            }
            continue;
        }
        if b.meta().l2_group {
            // A unicast destination in a link-layer broadcast or multicast frame: delivered if
            // it is the router's, never forwarded nor answered with an error (RFC 1812 5.3.4).
            ctx.slow4.push((b, Slow::L2Group));
            continue;
        }
        if h[8] <= 1 {
            // Unless it is for us: a packet to the router's address may arrive with TTL 1.
            ctx.slow4.push((b, Slow::TtlExpired));
            continue;
        }
        let v = t.ifs[b.meta().rx_if as usize].vrf;
        mixed |= vrf != v && vrf != u32::MAX;
        vrf = v;
        keys[good.len()] = dst;
        good.push(b);
    }
    if t.any_features && !good.is_empty() {
        crate::feature::input::run(ctx, t, &mut good, &mut keys, false);
    }
    if !good.is_empty() {
        let vrf = (!mixed).then_some(vrf);
        lookup_and_forward(ctx, t, &mut good, &keys, vrf, |v| &v.v4, forward);
    }
    ctx.tmp = good;
}

/// RFC 1812 5.3.7: never forward from or to 0/8 or 127/8, nor from multicast or class E, nor to
/// class E (240/4 but the limited broadcast) unless the network routes it.
#[inline(always)]
pub fn martian(t: &Tables, src: u32, dst: u32) -> bool {
    let class_e_dst = dst >> 28 == 15 && dst != u32::MAX && !t.route_class_e;
    matches!(src >> 24, 0 | 127) || src >> 28 >= 14 || matches!(dst >> 24, 0 | 127) || class_e_dst
}

/// Sends `b` (whose IPv4 header is valid) towards next hop `nh`. `transit` packets get their TTL
/// decremented; packets the router generated do not.
#[inline]
pub fn forward(ctx: &mut Ctx, t: &Tables, mut b: PktBuf, nh: u32, transit: bool) {
    let (nh, action) = resolve(t, nh, || flow_hash(&b));
    b.meta_mut().next_hop = nh;
    let (port, mtu, rewrite) = match action {
        Action::Transmit { port, mtu, rewrite } => (port, mtu, rewrite),
        Action::Slow(why) => {
            // A packet held for a neighbour is finished by the control plane, which must know
            // whether the hop-limit decrement is still due.
            b.meta_mut().hop_done = !transit;
            return ctx.slow4.push((b, why));
        }
        Action::Drop(why) => return ctx.drop(b, why),
    };
    let l3 = b.meta().l3_off as usize;
    let h = &mut b.data_mut()[l3..];
    if be16(h, 2) > mtu {
        let why = if h[6] & 0x40 != 0 {
            Slow::TooBig { mtu }
        } else {
            Slow::Fragment { next_hop: nh }
        };
        return ctx.slow4.push((b, why));
    }
    if transit {
        let old = u16::from_be_bytes([h[8], h[9]]);
        h[8] -= 1;
        let new = u16::from_be_bytes([h[8], h[9]]);
        let c = checksum::update16(be16(h, 10), old, new);
        h[10..12].copy_from_slice(&c.to_be_bytes());
    }
    if !rewrite_l2(&mut b, rewrite) {
        return ctx.drop(b, DropReason::NoBuffer);
    }
    enqueue(ctx, t, b, port);
}

/// 5-tuple hash; ports only for the first (or only) fragment of TCP, UDP and SCTP.
#[inline]
pub fn flow_hash(b: &PktBuf) -> u32 {
    let h = &b.data()[b.meta().l3_off as usize..];
    let ihl = (h[0] & 0x0f) as usize * 4;
    let proto = h[9];
    let addrs = u64::from(be32(h, 12)) << 32 | u64::from(be32(h, 16));
    let frag = be16(h, 6) & 0x3fff != 0;
    let ports = if !frag && matches!(proto, 6 | 17 | 132) && h.len() >= ihl + 4 {
        be32(h, ihl)
    } else {
        0
    };
    let x = mix(addrs, u64::from(proto) << 32 | u64::from(ports));
    (x >> 32) as u32 ^ x as u32
}
