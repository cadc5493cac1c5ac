//! ip6-forward: validates IPv6 headers, looks destinations up as one batch, rewrites.
//!
//! Reads: `meta.l3_off`, `meta.rx_if`, the IPv6 header (and extension headers for the flow hash).
//! Sets: `meta.next_hop`, the hop limit (IPv6 has no header checksum), the L2 header. Next: the
//! egress port's transmit vector; the slow path for hop-limit expiry, no route, reject, too big
//! (routers never fragment IPv6), hop-by-hop options and local delivery; ip-mcast for multicast
//! wider than the link in a VRF that routes multicast. Link-local sources or destinations and
//! other multicast are not forwarded (RFC 4291 2.5.6).

use super::{
    be16, be32, enqueue, lookup_and_forward, mix, resolve, rewrite_l2, Action, Ctx, Slow, VECTOR,
};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{Node, To};
use crate::tables::Tables;

pub struct Ip6Forward;

impl Node for Ip6Forward {
    const NAME: &'static str = "ip6-forward";
    type Next = super::IpNext;
    const TRANSMITS: bool = true;
    const DROPS: &'static [DropReason] = &[DropReason::Ip6BadHeader, DropReason::Ip6Scope];
    const CONSUMED: &'static str = "handed to the control plane";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        ip6_forward(ctx, t, pkts)
    }

    fn trace(t: &Tables, b: &PktBuf, to: To) -> String {
        super::trace_ip(t, b, to)
    }
}

#[inline(always)]
fn addr(h: &[u8], at: usize) -> u128 {
    u128::from_be_bytes(h[at..at + 16].try_into().expect("16 bytes"))
}

#[inline(always)]
fn ip6_forward(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
    let mut keys = [0u128; VECTOR];
    let mut vrf = u32::MAX;
    let mut mixed = false;
    let mut good = std::mem::take(&mut ctx.tmp);
    for b in pkts.drain(..) {
        let l3 = b.meta().l3_off as usize;
        let d = b.data();
        if d.len() < l3 + 40 {
            ctx.drop(b, DropReason::BadLength);
            continue;
        }
        let h = &d[l3..];
        if h[0] >> 4 != 6 {
            ctx.drop(b, DropReason::Ip6BadHeader);
            continue;
        }
        if 40 + be16(h, 4) as usize > h.len() {
            ctx.drop(b, DropReason::BadLength);
            continue;
        }
        let dst = addr(h, 24);
        let src_hi = be16(h, 8);
        let dst_hi = (dst >> 112) as u16;
        if dst_hi & 0xffc0 == 0xfe80 || dst_hi & 0xff0f == 0xff02 {
            // Link-local unicast and link-scope multicast (ND, OSPFv3, MLD, PIM) belong to the
            // control plane: up the punt path (dropped and counted where there is none).
            if ctx.punt.is_some() {
                let class = crate::punt::class_ip6(h);
                ctx.punt(b, class, crate::tables::NO_IF);
            } else {
                ctx.drop(b, DropReason::Ip6Scope);
            }
            continue;
        }
        if dst_hi >> 8 == 0xff
            && dst_hi & 0x000f > 2
            && t.routes_mcast(t.ifs[b.meta().rx_if as usize].vrf)
        {
            // Multicast wider than the link (RFC 4291 2.7 scope 3 and up), from any source.
            ctx.to(super::IpNext::Mcast, b);
            continue;
        }
        if src_hi & 0xffc0 == 0xfe80 || dst_hi >> 8 == 0xff {
            // RFC 4291 2.5.6: link-local sources are not forwarded; no multicast routing.
            ctx.drop(b, DropReason::Ip6Scope);
            continue;
        }
        if b.meta().l2_group {
            // Unicast in a link-layer multicast frame: the router's own, or dropped without an
            // error (RFC 4443 2.4(e.4); RFC 1812 5.3.4 in IPv6's terms).
            ctx.slow(b, Slow::L2Group);
            continue;
        }
        if h[6] == 0 {
            ctx.slow(b, Slow::Options);
            continue;
        }
        if h[7] <= 1 {
            ctx.slow(b, Slow::TtlExpired);
            continue;
        }
        let v = t.ifs[b.meta().rx_if as usize].vrf;
        mixed |= vrf != v && vrf != u32::MAX;
        vrf = v;
        keys[good.len()] = dst;
        good.push(b);
    }
    let mut flows_in = false;
    if t.any_features && !good.is_empty() {
        flows_in = crate::feature::input::run(ctx, t, &mut good, &mut keys, true);
    }
    if !good.is_empty() {
        let vrf = (!mixed).then_some(vrf);
        let hash = flows_in.then_some(flow_hash as fn(&PktBuf) -> u32);
        lookup_and_forward(ctx, t, &mut good, &keys, vrf, |v| &v.v6, forward, hash);
    }
    ctx.tmp = good;
}

/// Sends `b` towards next hop `nh`; `transit` packets get their hop limit decremented.
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
            return ctx.slow(b, why);
        }
        Action::Drop(why) => return ctx.drop(b, why),
        Action::Node(next) => return ctx.to(next, b),
        Action::Push {
            tx_if,
            port,
            mtu,
            rewrite,
            labels,
        } => {
            let l3 = b.meta().l3_off as usize;
            let exp = b.meta().exp;
            let h = &mut b.data_mut()[l3..];
            if 40 + be16(h, 4) as usize > mtu as usize {
                return ctx.slow(b, Slow::TooBig);
            }
            if transit {
                h[7] -= 1;
            }
            let ttl = super::mpls_input::push_ttl(t, h[7]);
            // The traffic class's top three bits (the DSCP's class selector).
            let tc = super::label_tc(exp, h[0] << 4 >> 5);
            if super::labelled_needs_features(t, &b, tx_if) {
                return super::labelled_to_features(ctx, b, rewrite);
            }
            if !super::push_labels(&mut b, rewrite, &labels, tc, ttl, true) {
                return ctx.drop(b, DropReason::NoBuffer);
            }
            return super::send(ctx, t, b, port, super::IpNext::Bridge);
        }
    };
    let l3 = b.meta().l3_off as usize;
    let h = &mut b.data_mut()[l3..];
    if 40 + be16(h, 4) as usize > mtu as usize {
        return ctx.slow(b, Slow::TooBig);
    }
    if transit {
        h[7] -= 1;
    }
    if !rewrite_l2(&mut b, rewrite) {
        return ctx.drop(b, DropReason::NoBuffer);
    }
    enqueue(ctx, t, b, port);
}

/// Addresses, flow label and, where the extension-header walk finds them, protocol and ports.
#[inline]
pub fn flow_hash(b: &PktBuf) -> u32 {
    let l3 = b.meta().l3_off as usize;
    let h = &b.data()[l3..];
    let src = addr(h, 8);
    let dst = addr(h, 24);
    let label = be32(h, 0) & 0x000f_ffff;
    let mut tail = u64::from(label);
    if let Ok(p) = packet::ipv6::Packet::new_checked(h) {
        if let Some((proto, off, non_first)) = p.transport() {
            tail |= u64::from(proto) << 20;
            if !non_first && matches!(proto, 6 | 17 | 132) && h.len() >= off + 4 {
                tail |= u64::from(be32(h, off)) << 32;
            }
        }
    }
    let x = mix(
        mix(
            (src >> 64) as u64 ^ src as u64,
            (dst >> 64) as u64 ^ dst as u64,
        ),
        tail,
    );
    (x >> 32) as u32 ^ x as u32
}

#[cfg(test)]
mod tests {
    use crate::counters::DropReason;
    use crate::graph::harness::{ip6, Harness};
    use crate::graph::NodeId;
    use crate::node::Slow;

    #[test]
    fn forwards_sends_to_the_slow_path_or_drops_by_reason() {
        let mut h = Harness::new();
        let src = 0x2001_0db8 << 96 | 2;
        let out = h.push(
            NodeId::Ip6Forward,
            0,
            &[
                ip6(src, 0x2001_0db8_0001 << 80 | 5, 64),
                ip6(src, 0x2001_0db8_0001 << 80 | 6, 1),
                ip6(src, 0x2001_0db8_0009 << 80 | 5, 64),
                ip6(src, 0xfe80 << 112 | 1, 64),
                ip6(0xfe80 << 112 | 1, 0x2001_0db8_0001 << 80 | 5, 64),
            ],
        );
        let sent = &out.to["tx 1"];
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].data()[14 + 7], 63, "hop limit decremented");
        let slow: Vec<Slow> = out.to["slow-path"].iter().map(|b| b.meta().slow).collect();
        assert_eq!(slow, [Slow::TtlExpired, Slow::NoRoute]);
        // Link-local: to the control plane where there is one; counted here, where there is not.
        assert_eq!(out.dropped(DropReason::Ip6Scope), 2);
    }
}
