//! ip4-forward: validates IPv4 headers, looks the destinations up in the interface's VRF as one
//! batch, and rewrites what can be forwarded.
//!
//! Reads: `meta.l3_off`, `meta.rx_if`, the IPv4 header. Sets: `meta.next_hop`, the TTL and header
//! checksum (RFC 1624 incremental update), the L2 header. Next: the egress port's transmit vector;
//! the slow path for TTL expiry, no route, reject, options, MTU and local delivery; drops by
//! reason for malformed headers (RFC 1812 5.2.2: version, IHL, checksum, length) and martian
//! addresses (5.3.7); the slow path for unicast destinations in link-layer group frames (5.3.4,
//! reading `meta.l2_group`); ip-mcast for multicast beyond the link scope in a VRF that routes
//! multicast (dropped as `MulticastNotRouted` elsewhere).

use packet::checksum;

use super::{
    be16, be32, enqueue, lookup_and_forward, mix, resolve, rewrite_l2, Action, Ctx, Slow, VECTOR,
};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{Node, To};
use crate::tables::Tables;

pub struct Ip4Forward;

impl Node for Ip4Forward {
    const NAME: &'static str = "ip4-forward";
    type Next = super::IpNext;
    const TRANSMITS: bool = true;
    const DROPS: &'static [DropReason] = &[
        DropReason::Ip4BadHeader,
        DropReason::Ip4BadChecksum,
        DropReason::Ip4Martian,
        DropReason::MulticastNotRouted,
        // The lookup's verdict, shared with ip6-forward.
        DropReason::Blackhole,
    ];
    const CONSUMED: &'static str = "handed to the control plane";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        ip4_forward(ctx, t, pkts)
    }

    fn trace(t: &Tables, b: &PktBuf, to: To) -> String {
        super::trace_ip(t, b, to)
    }
}

#[inline(always)]
fn ip4_forward(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
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
            } else if be32(h, 16) >> 28 == 14 && t.routes_mcast(t.ifs[b.meta().rx_if as usize].vrf)
            {
                // An IGMPv2 report's router alert: ip-mcast checks the header and punts it.
                ctx.to(super::IpNext::Mcast, b);
            } else {
                ctx.slow(b, Slow::Options);
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
            // control plane; wider multicast is routed by ip-mcast where the VRF routes it.
            if dst >> 8 == 0x00e0_0000 || dst == u32::MAX {
                let class = crate::punt::class_ip4(h);
                ctx.punt(b, class, crate::tables::NO_IF);
            } else if t.routes_mcast(t.ifs[b.meta().rx_if as usize].vrf) {
                ctx.to(super::IpNext::Mcast, b);
            } else {
                ctx.drop(b, DropReason::MulticastNotRouted);
            }
            continue;
        }
        if b.meta().l2_group {
            // A unicast destination in a link-layer broadcast or multicast frame: delivered if
            // it is the router's, never forwarded nor answered with an error (RFC 1812 5.3.4).
            ctx.slow(b, Slow::L2Group);
            continue;
        }
        if h[8] <= 1 {
            // Unless it is for us: a packet to the router's address may arrive with TTL 1.
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
        flows_in = crate::feature::input::run(ctx, t, &mut good, &mut keys, false);
    }
    if !good.is_empty() {
        let vrf = (!mixed).then_some(vrf);
        let hash = flows_in.then_some(flow_hash as fn(&PktBuf) -> u32);
        lookup_and_forward(ctx, t, &mut good, &keys, vrf, |v| &v.v4, forward, hash);
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
        } => return push(ctx, t, b, (tx_if, port, mtu), rewrite, &labels, transit),
    };
    let l3 = b.meta().l3_off as usize;
    let h = &mut b.data_mut()[l3..];
    if be16(h, 2) > mtu {
        let why = if h[6] & 0x40 != 0 {
            Slow::TooBig
        } else {
            Slow::Fragment
        };
        return ctx.slow(b, why);
    }
    if transit {
        decrement_ttl(h);
    }
    if !rewrite_l2(&mut b, rewrite) {
        return ctx.drop(b, DropReason::NoBuffer);
    }
    enqueue(ctx, t, b, port);
}

/// Sends `b` over an LSP: the TTL decremented as for any routed hop, then `labels` pushed with
/// the IP TTL (uniform) or 255 (pipe) and as traffic class the one QoS chose or the IP
/// precedence; through the output features first where the interfaces have any. Too big
/// with DF set goes to the slow path (an ICMP error with the MTU less the labels); without DF
/// it is dropped and counted (no fragmentation before imposition).
#[inline]
fn push(
    ctx: &mut Ctx,
    t: &Tables,
    mut b: PktBuf,
    (tx_if, port, mtu): (u32, u16, u16),
    rewrite: &crate::tables::Rewrite,
    labels: &crate::mpls::LabelStack,
    transit: bool,
) {
    let l3 = b.meta().l3_off as usize;
    let exp = b.meta().exp;
    let h = &mut b.data_mut()[l3..];
    if be16(h, 2) > mtu {
        if h[6] & 0x40 != 0 {
            return ctx.slow(b, Slow::TooBig);
        }
        return ctx.drop(b, DropReason::MplsTooBig);
    }
    if transit {
        decrement_ttl(h);
    }
    let ttl = super::mpls_input::push_ttl(t, h[8]);
    let tc = super::label_tc(exp, h[1] >> 5);
    if super::labelled_needs_features(t, &b, tx_if) {
        return super::labelled_to_features(ctx, b, rewrite);
    }
    if !super::push_labels(&mut b, rewrite, labels, tc, ttl, true) {
        return ctx.drop(b, DropReason::NoBuffer);
    }
    super::send(ctx, t, b, port, super::IpNext::Bridge);
}

/// One less TTL, the header checksum updated to match (RFC 1624).
#[inline(always)]
fn decrement_ttl(h: &mut [u8]) {
    let old = u16::from_be_bytes([h[8], h[9]]);
    h[8] -= 1;
    let new = u16::from_be_bytes([h[8], h[9]]);
    let c = checksum::update16(be16(h, 10), old, new);
    h[10..12].copy_from_slice(&c.to_be_bytes());
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

#[cfg(test)]
mod tests {
    use crate::counters::DropReason;
    use crate::graph::harness::{ip4, Harness, MAC1, PEER1};
    use crate::graph::{NodeId, To};
    use crate::node::Slow;

    #[test]
    fn forwards_sends_to_the_slow_path_or_drops_by_reason() {
        let mut h = Harness::new();
        let mut bad_sum = ip4([10, 0, 0, 2], [10, 1, 0, 5], 64);
        bad_sum[24] ^= 0xff;
        let out = h.push(
            NodeId::Ip4Forward,
            0,
            &[
                ip4([10, 0, 0, 2], [10, 1, 0, 5], 64),
                ip4([10, 0, 0, 2], [10, 1, 0, 6], 1),
                ip4([10, 0, 0, 2], [10, 9, 9, 9], 64),
                ip4([10, 0, 0, 2], [192, 0, 2, 1], 64),
                ip4([127, 0, 0, 1], [10, 1, 0, 5], 64),
                ip4([10, 0, 0, 2], [239, 1, 1, 1], 64),
                bad_sum,
            ],
        );
        let sent = &out.to["tx 1"];
        assert_eq!(sent.len(), 1);
        let d = sent[0].data();
        assert_eq!((&d[..6], &d[6..12]), (&PEER1[..], &MAC1[..]));
        assert_eq!(d[14 + 8], 63, "TTL decremented");
        assert!(packet::checksum::ipv4_header_ok(&d[14..34]));
        let slow: Vec<Slow> = out.to["slow-path"].iter().map(|b| b.meta().slow).collect();
        assert_eq!(slow, [Slow::TtlExpired, Slow::NoRoute]);
        assert_eq!(out.dropped(DropReason::Blackhole), 1);
        assert_eq!(out.dropped(DropReason::Ip4Martian), 1);
        assert_eq!(out.dropped(DropReason::MulticastNotRouted), 1);
        assert_eq!(out.dropped(DropReason::Ip4BadChecksum), 1);
        let line = h.trace(NodeId::Ip4Forward, &sent[0], To::Tx(1));
        assert_eq!(line, "next hop 2: out eth1, to 02:00:00:00:01:02");
        let line = h.trace(
            NodeId::Ip4Forward,
            &out.to["slow-path"][0],
            To::Node(NodeId::SlowPath),
        );
        assert_eq!(line, "TTL / hop limit expired");
    }

    #[test]
    fn an_interface_with_output_features_sends_its_packets_through_them() {
        let mut h = Harness::new();
        crate::graph::harness::deny_dns_out(&mut h.t, 1);
        let out = h.push(
            NodeId::Ip4Forward,
            0,
            &[
                ip4([10, 0, 0, 2], [10, 1, 0, 5], 64),
                ip4([10, 0, 0, 2], [10, 0, 0, 7], 64),
            ],
        );
        assert_eq!(
            out.count("output-features"),
            1,
            "to eth1, which has an ACL out"
        );
        assert_eq!(out.count("tx 0"), 1, "to eth0, which has none");
    }
}
