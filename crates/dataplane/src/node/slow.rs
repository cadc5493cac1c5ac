//! The slow path: whatever the forwarding nodes could not finish at vector speed. It runs after
//! the fast nodes, on the few packets they set aside, so its cost never touches ordinary traffic:
//! ICMP and ICMPv6 errors (rate-limited, RFC 1812 4.3.2.8 / RFC 4443 2.4(f)), echo replies for
//! the router's own addresses, IPv4 options and IPv6 hop-by-hop headers (forwarded by scalar
//! code), and IPv4 fragmentation.

use packet::{checksum, icmpv4, icmpv6, ipv4, ipv6};

use super::{be16, be32, ip4, ip6, Ctx, Slow};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{Node, To};
use crate::punt::{self, PuntClass};
use crate::tables::{NextHop, Tables, Vrf};

/// slow-path. Reads: `meta.slow` (why the packet is here), `meta.next_hop`, `meta.hop_done`, the
/// IP header (its version says the family). Next: the transmit vectors (ICMP errors, echo
/// replies, fragments, packets with options forwarded), output-features, itself (a packet it
/// forwards may need it again: too big, waiting for a neighbour), the punt path.
pub struct SlowPath;

impl Node for SlowPath {
    const NAME: &'static str = "slow-path";
    type Next = super::IpNext;
    const TRANSMITS: bool = true;
    const DROPS: &'static [DropReason] = &[
        DropReason::TtlExpired,
        DropReason::NoRoute,
        DropReason::Reject,
        DropReason::NeighborUnresolved,
        DropReason::MtuExceeded,
        DropReason::LocalUnhandled,
        DropReason::NoBuffer,
        DropReason::L2GroupUnicast,
    ];
    const CONSUMED: &'static str = "consumed (ICMP error sent or delivered locally)";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        for b in pkts.drain(..) {
            ctx.slow_path += 1;
            let l3 = b.meta().l3_off as usize;
            let why = b.meta().slow;
            if b.data().get(l3).is_some_and(|v| v >> 4 == 6) {
                slow6(ctx, t, b, why);
            } else {
                slow4(ctx, t, b, why);
            }
        }
    }

    fn trace(t: &Tables, b: &PktBuf, to: To) -> String {
        super::trace_ip(t, b, to)
    }
}

/// The MTU of the interface `b`'s next hop leaves by.
fn egress_mtu(t: &Tables, b: &PktBuf) -> u16 {
    match &t.next_hops[b.meta().next_hop as usize] {
        NextHop::Forward { mtu, .. } => *mtu,
        NextHop::Labelled { via, labels } => match &t.next_hops[*via as usize] {
            NextHop::Forward { mtu, .. } => mtu.saturating_sub(4 * labels.len() as u16),
            _ => 0,
        },
        _ => 0,
    }
}

fn vrf_of(t: &Tables, b: &PktBuf) -> usize {
    t.ifs[b.meta().rx_if as usize].vrf as usize
}

fn slow4(ctx: &mut Ctx, t: &Tables, b: PktBuf, why: Slow) {
    let l3 = b.meta().l3_off as usize;
    match why {
        Slow::TtlExpired => {
            let dst = be32(b.data(), l3 + 16);
            match t.next_hops[t.vrfs[vrf_of(t, &b)].v4.lookup(dst) as usize] {
                NextHop::Local => return local4(ctx, t, b),
                // A tunnelled packet's outer TTL may end here: it is for us.
                NextHop::GtpuLocal => return ctx.to(super::IpNext::GtpuInput, b),
                _ => {}
            }
            if !ctx.police(PuntClass::TtlExpired) {
                return ctx.drop(b, DropReason::PuntPoliced);
            }
            ctx.count_drop(&b, DropReason::TtlExpired);
            icmp4_error(ctx, t, b, icmpv4::TIME_EXCEEDED, 0, 0);
        }
        Slow::NoRoute => {
            ctx.count_drop(&b, DropReason::NoRoute);
            icmp4_error(
                ctx,
                t,
                b,
                icmpv4::DEST_UNREACHABLE,
                icmpv4::NET_UNREACHABLE,
                0,
            );
        }
        Slow::Reject => {
            ctx.count_drop(&b, DropReason::Reject);
            icmp4_error(ctx, t, b, icmpv4::DEST_UNREACHABLE, 13, 0);
        }
        Slow::TooBig => {
            ctx.count_drop(&b, DropReason::MtuExceeded);
            let mtu = egress_mtu(t, &b);
            icmp4_error(
                ctx,
                t,
                b,
                icmpv4::DEST_UNREACHABLE,
                icmpv4::FRAG_NEEDED,
                mtu as u32,
            );
        }
        Slow::Fragment => {
            let nh = b.meta().next_hop;
            fragment4(ctx, t, b, nh)
        }
        Slow::Options => {
            if !ctx.police(PuntClass::Options) {
                return ctx.drop(b, DropReason::PuntPoliced);
            }
            // The fast node saw IHL > 5: check the whole header here.
            let d = b.data();
            let ihl = (d[l3] & 0x0f) as usize * 4;
            let total = be16(d, l3 + 2) as usize;
            if d.len() < l3 + ihl || total < ihl || l3 + total > d.len() {
                return ctx.drop(b, DropReason::BadLength);
            }
            if checksum::fold(checksum::sum(&d[l3..l3 + ihl])) != 0 {
                return ctx.drop(b, DropReason::Ip4BadChecksum);
            }
            // The fast node's address checks, which it left for here.
            let (src, dst) = (be32(d, l3 + 12), be32(d, l3 + 16));
            if ip4::martian(t, src, dst) {
                return ctx.drop(b, DropReason::Ip4Martian);
            }
            if dst >> 28 == 14 || dst == u32::MAX {
                return ctx.drop(b, DropReason::MulticastNotRouted);
            }
            if b.meta().l2_group {
                return slow4(ctx, t, b, Slow::L2Group);
            }
            if d[l3 + 8] <= 1 {
                return slow4(ctx, t, b, Slow::TtlExpired);
            }
            let nh = t.vrfs[vrf_of(t, &b)].v4.lookup(dst);
            ip4::forward(ctx, t, b, nh, true);
        }
        Slow::Local => local4(ctx, t, b),
        Slow::Glean => glean(ctx, t, b),
        Slow::L2Group => {
            let dst = be32(b.data(), l3 + 16);
            match t.next_hops[t.vrfs[vrf_of(t, &b)].v4.lookup(dst) as usize] {
                NextHop::Local | NextHop::GtpuLocal => local4(ctx, t, b),
                _ => ctx.drop(b, DropReason::L2GroupUnicast),
            }
        }
    }
}

/// A packet whose next hop waits for ARP or ND: the control plane holds it while it resolves.
fn glean(ctx: &mut Ctx, t: &Tables, b: PktBuf) {
    let tx_if = match &t.next_hops[b.meta().next_hop as usize] {
        NextHop::Glean { tx_if, .. } => *tx_if,
        _ => crate::tables::NO_IF,
    };
    ctx.punt(b, PuntClass::Glean, tx_if);
}

/// Traffic for the router: up the punt path where the interface has a TAP twin; otherwise echo
/// requests are answered here and the rest is dropped.
fn local4(ctx: &mut Ctx, t: &Tables, mut b: PktBuf) {
    let l3 = b.meta().l3_off as usize;
    if ctx.punt.is_some() && t.ifs[b.meta().rx_if as usize].punt_local {
        let class = punt::class_ip4(&b.data()[l3..]);
        return ctx.punt(b, class, crate::tables::NO_IF);
    }
    let d = b.data_mut();
    let ihl = (d[l3] & 0x0f) as usize * 4;
    let total = be16(d, l3 + 2) as usize;
    let frag = be16(d, l3 + 6) & 0x3fff != 0;
    if d[l3 + 9] != 1
        || frag
        || total < ihl + 8
        || !icmpv4::echo_reply_in_place(&mut d[l3 + ihl..l3 + total])
    {
        return ctx.drop(b, DropReason::LocalUnhandled);
    }
    let h = &mut d[l3..l3 + ihl];
    let (src, dst): ([u8; 4], [u8; 4]) =
        (h[12..16].try_into().unwrap(), h[16..20].try_into().unwrap());
    h[12..16].copy_from_slice(&dst);
    h[16..20].copy_from_slice(&src);
    h[8] = 64;
    h[10] = 0;
    h[11] = 0;
    let c = checksum::fold(checksum::sum(h));
    h[10..12].copy_from_slice(&c.to_be_bytes());
    ctx.echo_replies += 1;
    let nh = t.vrfs[vrf_of(t, &b)].v4.lookup(u32::from_be_bytes(src));
    ip4::forward(ctx, t, b, nh, false);
}

/// Sends an ICMP error about `b` back to its source, unless RFC 1812 4.3.2.7 forbids it or the
/// rate limit is spent. Consumes `b` (its drop is already counted).
fn icmp4_error(ctx: &mut Ctx, t: &Tables, b: PktBuf, msg_type: u8, code: u8, rest: u32) {
    let l3 = b.meta().l3_off as usize;
    let h = &b.data()[l3..];
    let src = be32(h, 12);
    let dst = be32(h, 16);
    let ihl = (h[0] & 0x0f) as usize * 4;
    let bad_src = src == 0 || src >> 24 == 127 || src >> 28 == 14 || src == u32::MAX;
    let bad_dst = dst >> 28 == 14 || dst == u32::MAX;
    let non_first = be16(h, 6) & 0x1fff != 0;
    let about_error = h[9] == 1 && h.len() > ihl && icmpv4::is_error(h[ihl]);
    if bad_src || bad_dst || non_first || about_error || b.meta().l2_group {
        return ctx.cache.free(b);
    }
    let ifc = &t.ifs[b.meta().rx_if as usize];
    let Some(&(me, _)) = ifc.v4.first() else {
        return ctx.cache.free(b);
    };
    if !ctx.icmp.take() {
        ctx.icmp_rate_limited += 1;
        return ctx.cache.free(b);
    }
    let Some(mut nb) = ctx.cache.alloc() else {
        ctx.drops[DropReason::NoBuffer as usize] += 1;
        return ctx.cache.free(b);
    };
    nb.set_len(14 + icmpv4::MAX_ERROR_DATAGRAM);
    let n = icmpv4::build_error(&mut nb.data_mut()[34..], msg_type, code, rest, h);
    let repr = ipv4::Repr {
        src: me.to_be_bytes(),
        dst: src.to_be_bytes(),
        protocol: ipv4::Protocol::Icmp,
        ttl: 64,
        payload_len: n,
        dscp: 48, // CS6, network control
        dont_frag: false,
        ident: 0,
    };
    let ok = repr.emit(&mut nb.data_mut()[14..]).is_ok() && n > 0;
    send_error(
        ctx,
        t,
        b,
        nb,
        34 + n,
        ok,
        |v| v.v4.lookup(src),
        ip4::forward,
    );
}

/// Sends the ICMP or ICMPv6 error `nb` (IP header at byte 14, `len` bytes in all) back out of
/// the VRF `b` came in on, and frees `b`. `route` finds the next hop of the error's destination.
// Eight arguments: the two families differ in exactly the last three, and a struct bundling them
// would be built at one place and read at one place.
#[allow(clippy::too_many_arguments)]
fn send_error(
    ctx: &mut Ctx,
    t: &Tables,
    b: PktBuf,
    mut nb: PktBuf,
    len: usize,
    ok: bool,
    route: impl FnOnce(&Vrf) -> u32,
    forward: fn(&mut Ctx, &Tables, PktBuf, u32, bool),
) {
    nb.set_len(len);
    let vrf = vrf_of(t, &b);
    let m = nb.meta_mut();
    m.l3_off = 14;
    m.rx_if = b.meta().rx_if;
    ctx.cache.free(b);
    if !ok {
        return ctx.cache.free(nb);
    }
    ctx.icmp_sent += 1;
    let nh = route(&t.vrfs[vrf]);
    forward(ctx, t, nb, nh, false);
}

/// Splits `b` into fragments that fit the next hop's MTU (RFC 791). Options are copied into every
/// fragment, which is what RFC 791 asks of the options that matter (the "copied" ones).
fn fragment4(ctx: &mut Ctx, t: &Tables, mut b: PktBuf, nh: u32) {
    let NextHop::Forward {
        port, mtu, rewrite, ..
    } = &t.next_hops[nh as usize]
    else {
        return ctx.drop(b, DropReason::MtuExceeded);
    };
    let l3 = b.meta().l3_off as usize;
    let d = b.data_mut();
    let ihl = (d[l3] & 0x0f) as usize * 4;
    let total = be16(d, l3 + 2) as usize;
    let chunk = (*mtu as usize).saturating_sub(ihl) / 8 * 8;
    if chunk == 0 {
        return ctx.drop(b, DropReason::MtuExceeded);
    }
    d[l3 + 8] -= 1; // TTL, once for all fragments
    let frag = be16(d, l3 + 6);
    let (base_off, more) = ((frag & 0x1fff) as usize, frag & 0x2000 != 0);
    let payload = total - ihl;
    let rw = rewrite.len as usize;
    let mut off = 0;
    while off < payload {
        let len = chunk.min(payload - off);
        let Some(mut nb) = ctx.cache.alloc() else {
            ctx.drops[DropReason::NoBuffer as usize] += 1;
            break;
        };
        nb.set_len(rw + ihl + len);
        let src = b.data();
        let o = nb.data_mut();
        o[..rw].copy_from_slice(&rewrite.bytes[..rw]);
        o[rw..rw + ihl].copy_from_slice(&src[l3..l3 + ihl]);
        o[rw + ihl..].copy_from_slice(&src[l3 + ihl + off..l3 + ihl + off + len]);
        let h = &mut o[rw..rw + ihl];
        h[2..4].copy_from_slice(&((ihl + len) as u16).to_be_bytes());
        let mf = more || off + len < payload;
        let f = (base_off + off / 8) as u16 | if mf { 0x2000 } else { 0 };
        h[6..8].copy_from_slice(&f.to_be_bytes());
        h[10] = 0;
        h[11] = 0;
        let c = checksum::fold(checksum::sum(h));
        h[10..12].copy_from_slice(&c.to_be_bytes());
        let m = nb.meta_mut();
        m.l3_off = rw as u16;
        m.next_hop = nh;
        super::send(ctx, t, nb, *port, super::IpNext::Bridge);
        off += len;
    }
    ctx.cache.free(b);
}

fn addr6(h: &[u8], at: usize) -> [u8; 16] {
    h[at..at + 16].try_into().expect("16 bytes")
}

fn slow6(ctx: &mut Ctx, t: &Tables, b: PktBuf, why: Slow) {
    let l3 = b.meta().l3_off as usize;
    match why {
        Slow::TtlExpired => {
            let dst = u128::from_be_bytes(addr6(b.data(), l3 + 24));
            match t.next_hops[t.vrfs[vrf_of(t, &b)].v6.lookup(dst) as usize] {
                NextHop::Local => return local6(ctx, t, b),
                // A tunnelled packet's outer TTL may end here: it is for us.
                NextHop::GtpuLocal => return ctx.to(super::IpNext::GtpuInput, b),
                _ => {}
            }
            if !ctx.police(PuntClass::TtlExpired) {
                return ctx.drop(b, DropReason::PuntPoliced);
            }
            ctx.count_drop(&b, DropReason::TtlExpired);
            icmp6_error(ctx, t, b, icmpv6::TIME_EXCEEDED, 0, 0);
        }
        Slow::NoRoute => {
            ctx.count_drop(&b, DropReason::NoRoute);
            icmp6_error(ctx, t, b, icmpv6::DST_UNREACHABLE, 0, 0);
        }
        Slow::Reject => {
            ctx.count_drop(&b, DropReason::Reject);
            icmp6_error(ctx, t, b, icmpv6::DST_UNREACHABLE, 1, 0);
        }
        Slow::TooBig => {
            ctx.count_drop(&b, DropReason::MtuExceeded);
            let mtu = egress_mtu(t, &b);
            icmp6_error(ctx, t, b, icmpv6::PACKET_TOO_BIG, 0, mtu as u32);
        }
        // IPv6 routers never fragment; the fast node never asks.
        Slow::Fragment => ctx.drop(b, DropReason::MtuExceeded),
        Slow::Options => {
            if !ctx.police(PuntClass::Options) {
                return ctx.drop(b, DropReason::PuntPoliced);
            }
            if b.data()[l3 + 7] <= 1 {
                return slow6(ctx, t, b, Slow::TtlExpired);
            }
            let dst = u128::from_be_bytes(addr6(b.data(), l3 + 24));
            let nh = t.vrfs[vrf_of(t, &b)].v6.lookup(dst);
            ip6::forward(ctx, t, b, nh, true);
        }
        Slow::Local => local6(ctx, t, b),
        Slow::Glean => glean(ctx, t, b),
        Slow::L2Group => {
            let dst = u128::from_be_bytes(addr6(b.data(), l3 + 24));
            match t.next_hops[t.vrfs[vrf_of(t, &b)].v6.lookup(dst) as usize] {
                NextHop::Local | NextHop::GtpuLocal => local6(ctx, t, b),
                _ => ctx.drop(b, DropReason::L2GroupUnicast),
            }
        }
    }
}

fn local6(ctx: &mut Ctx, t: &Tables, mut b: PktBuf) {
    let l3 = b.meta().l3_off as usize;
    if ctx.punt.is_some() && t.ifs[b.meta().rx_if as usize].punt_local {
        let class = punt::class_ip6(&b.data()[l3..]);
        return ctx.punt(b, class, crate::tables::NO_IF);
    }
    let d = b.data_mut();
    let plen = be16(d, l3 + 4) as usize;
    let (src, dst) = (addr6(d, l3 + 8), addr6(d, l3 + 24));
    // The reply goes from the address the request was sent to, back to its sender.
    if d[l3 + 6] != icmpv6::PROTO
        || !icmpv6::echo_reply_in_place(&mut d[l3 + 40..l3 + 40 + plen], &dst, &src)
    {
        return ctx.drop(b, DropReason::LocalUnhandled);
    }
    d[l3 + 8..l3 + 24].copy_from_slice(&dst);
    d[l3 + 24..l3 + 40].copy_from_slice(&src);
    d[l3 + 7] = 64;
    ctx.echo_replies += 1;
    let nh = t.vrfs[vrf_of(t, &b)].v6.lookup(u128::from_be_bytes(src));
    ip6::forward(ctx, t, b, nh, false);
}

/// ICMPv6 error back to the source, within RFC 4443 2.4(e)'s rules and the rate limit.
fn icmp6_error(ctx: &mut Ctx, t: &Tables, b: PktBuf, msg_type: u8, code: u8, rest: u32) {
    let l3 = b.meta().l3_off as usize;
    let h = &b.data()[l3..];
    let src = addr6(h, 8);
    let src_n = u128::from_be_bytes(src);
    let bad_src = src_n == 0 || src[0] == 0xff;
    let about_error = h[6] == icmpv6::PROTO && h.len() > 40 && h[40] < 128;
    // RFC 4443 2.4(e.4): nothing about a packet sent as a link-layer multicast (its exceptions,
    // Packet Too Big and Parameter Problem code 2, arise only for forwarded packets, and a
    // unicast packet in a group frame is never forwarded).
    if bad_src || about_error || b.meta().l2_group {
        return ctx.cache.free(b);
    }
    let ifc = &t.ifs[b.meta().rx_if as usize];
    let Some(&(me, _)) = ifc.v6.iter().find(|(a, _)| (a >> 118) != 0x3fa) else {
        return ctx.cache.free(b);
    };
    if !ctx.icmp.take() {
        ctx.icmp_rate_limited += 1;
        return ctx.cache.free(b);
    }
    let Some(mut nb) = ctx.cache.alloc() else {
        ctx.drops[DropReason::NoBuffer as usize] += 1;
        return ctx.cache.free(b);
    };
    let me = me.to_be_bytes();
    nb.set_len(14 + icmpv6::MIN_MTU);
    let n = icmpv6::build_error(&mut nb.data_mut()[54..], msg_type, code, rest, h, &me, &src);
    let repr = ipv6::Repr {
        src: me,
        dst: src,
        next_header: icmpv6::PROTO,
        hop_limit: 64,
        payload_len: n,
        traffic_class: 0xc0,
        flow_label: 0,
    };
    let ok = repr.emit(&mut nb.data_mut()[14..]).is_ok() && n > 0;
    send_error(
        ctx,
        t,
        b,
        nb,
        54 + n,
        ok,
        |v| v.v6.lookup(src_n),
        ip6::forward,
    );
}

#[cfg(test)]
mod tests {
    use crate::counters::DropReason;
    use crate::graph::harness::{ip4, Harness};
    use crate::graph::NodeId;

    #[test]
    fn errors_are_sent_back_and_the_rest_is_finished_or_dropped() {
        let mut h = Harness::new();
        // Through ip4-forward first, as the graph does, so `meta.slow` is set by its owner.
        let fwd = h.push(
            NodeId::Ip4Forward,
            0,
            &[
                ip4([10, 0, 0, 2], [10, 1, 0, 6], 1),
                ip4([10, 0, 0, 2], [10, 9, 9, 9], 64),
                ip4([10, 0, 0, 2], [198, 51, 100, 7], 64),
            ],
        );
        let mut fwd = fwd;
        let v = fwd.to.remove("slow-path").unwrap();
        assert_eq!(v.len(), 3);
        let mut out = h.run_bufs(NodeId::SlowPath, v);
        // Time exceeded and net unreachable, both back to 10.0.0.2 out of eth0.
        let errors = out.to.remove("tx 0").unwrap();
        assert_eq!(errors.len(), 2);
        assert!(errors.iter().all(|e| e.data()[14 + 9] == 1), "ICMP");
        assert_eq!(errors[0].data()[34], packet::icmpv4::TIME_EXCEEDED);
        assert_eq!(errors[1].data()[34], packet::icmpv4::DEST_UNREACHABLE);
        assert_eq!(out.dropped(DropReason::TtlExpired), 1);
        assert_eq!(out.dropped(DropReason::NoRoute), 1);
        // Waiting for a neighbour with no control plane to hold it: counted.
        assert_eq!(out.dropped(DropReason::NeighborUnresolved), 1);
    }
}
