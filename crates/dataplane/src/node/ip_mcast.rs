//! ip-mcast: routes IPv4 and IPv6 multicast beyond the link scope in the VRFs that route
//! multicast, by the multicast FIB (`mfib`): one received packet, a copy per output interface.
//!
//! Reads: `meta.rx_if` (its VRF and the RPF check), `meta.l3_off`, the IP header; the route of
//! (VRF, source, group), else of (VRF, *, group). Sets: the TTL (hop limit) and IPv4 checksum,
//! once for all copies; each copy's L2 header (the output interface's, to the group's MAC
//! address) and `meta.next_hop` (the interface's multicast next hop, `Tables::mcast_nh`, so the
//! output features and bridges read the copy as any routed packet); the route's counters.
//! Next: the output interfaces' transmit vectors; output-features, for an interface with
//! output features; bvi-output, out of a bridge's routed interface (the bridge's snooping then
//! picks its members). To the control plane (class `mcast-data`), where pimd on the TAP twins
//! reads them from the kernel: a packet with no route (the kernel's upcall makes pimd create
//! one), one from the wrong interface (for PIM asserts), a keepalive copy of a kernel route's
//! traffic every [`crate::mfib::KEEPALIVE_MS`] (at TTL 1: the kernel counts it for pimd and
//! replicates it to none of its twins), or every packet of a route pimd is registering
//! (`mfib::Origin::KernelRegistering`); IGMP and MLD messages to any group (joins).
//! Dropped: those without a punt path (`McastNoRoute`, `McastWrongIf`), TTL or hop limit
//! expired (no ICMP error for multicast, RFC 1812 5.3.5.2 / RFC 4443 2.4), a route with no
//! output interface for the packet (`McastNoOutput`, a pruned route), too big for an output
//! interface (`McastTooBig`: counted per copy, the others still go), bad IPv4 headers
//! (ip4-forward checks 20-byte headers before it hands them here; this node checks those with
//! options).

use super::{be16, be32, Ctx};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{Edge, Node, NodeId, To};
use crate::mfib::{Mroute, MrouteKey, Origin, Pinned, KEEPALIVE_MS};
use crate::node::l2_flood::copy;
use crate::punt::PuntClass;
use crate::tables::{NextHop, Tables, NO_IF};

pub struct IpMcast;

/// Output interfaces one packet is copied to, at most (a longer list is cut, counted).
pub const MAX_OIFS: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    OutputFeatures,
    /// Out of a bridge's routed interface.
    Bridge,
}

impl Edge for Next {
    const ALL: &'static [Self] = &[Next::OutputFeatures, Next::Bridge];
    #[inline(always)]
    fn node(self) -> NodeId {
        match self {
            Next::OutputFeatures => NodeId::OutputFeatures,
            Next::Bridge => NodeId::BviOutput,
        }
    }
}

impl Node for IpMcast {
    const NAME: &'static str = "ip-mcast";
    type Next = Next;
    const TRANSMITS: bool = true;
    const DROPS: &'static [DropReason] = &[
        DropReason::McastNoRoute,
        DropReason::McastWrongIf,
        DropReason::McastTtl,
        DropReason::McastNoOutput,
        DropReason::McastTooBig,
    ];
    const CONSUMED: &'static str =
        "handed to the control plane (IGMP/MLD, unknown (S,G), wrong interface)";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        let Some(fib) = t.mfib.as_deref() else {
            for b in pkts.drain(..) {
                ctx.drop(b, DropReason::McastNoRoute);
            }
            return;
        };
        let Some(mut reader) = ctx.epoch.take() else {
            // A worker without an epoch registration cannot read the FIB safely.
            for b in pkts.drain(..) {
                ctx.drop(b, DropReason::McastNoRoute);
            }
            return;
        };
        let now = fib.now_ms();
        {
            let pinned = fib.pin(&mut reader);
            // Each lookup is two dependent loads (the slot, the route) in a FIB larger than
            // the caches at ME-13's 20,000 routes: start them for the whole vector first, so
            // that the misses overlap instead of following one another.
            let mut keys = [MrouteKey::default(); super::VECTOR];
            for (k, b) in keys.iter_mut().zip(pkts.iter()) {
                if let Ok(h) = head(b) {
                    *k = key_of(t, b, &h);
                    pinned.prefetch_slot(*k);
                }
            }
            for k in &keys[..pkts.len().min(super::VECTOR)] {
                pinned.prefetch_route(*k);
            }
            for b in pkts.drain(..) {
                one(ctx, t, &pinned, b, now);
            }
        }
        ctx.epoch = Some(reader);
    }

    fn trace(t: &Tables, b: &PktBuf, to: To) -> String {
        let out = match to {
            To::Tx(p) => format!("copy out of port {p}"),
            To::Node(NodeId::OutputFeatures) => "copy through output features".into(),
            To::Node(NodeId::BviOutput) => "copy out of a bridge's routed interface".into(),
            _ => String::new(),
        };
        match t.ifs.get(b.meta().rx_if as usize) {
            Some(i) => format!("multicast routed in VRF {}: {out}", i.vrf),
            None => out,
        }
    }
}

/// What the IP header says: family, source, group, TTL, whether it carries IGMP/MLD, total
/// length.
struct Head {
    v6: bool,
    source: u128,
    group: u128,
    ttl: u8,
    membership: bool,
    len: usize,
}

fn head(b: &PktBuf) -> Result<Head, DropReason> {
    let d = b.data();
    let l3 = b.meta().l3_off as usize;
    let h = d.get(l3..).ok_or(DropReason::BadLength)?;
    match h.first().map(|v| v >> 4) {
        Some(4) => {
            let ihl = (h[0] & 0x0f) as usize * 4;
            if ihl < 20 || h.len() < ihl {
                return Err(DropReason::Ip4BadHeader);
            }
            // ip4-forward checked 20-byte headers; options packets (an IGMPv2 report's router
            // alert) come here unchecked.
            if ihl > 20 && packet::checksum::fold(packet::checksum::sum(&h[..ihl])) != 0 {
                return Err(DropReason::Ip4BadChecksum);
            }
            let len = be16(h, 2) as usize;
            if len < ihl || len > h.len() {
                return Err(DropReason::BadLength);
            }
            Ok(Head {
                v6: false,
                source: u128::from(be32(h, 12)),
                group: u128::from(be32(h, 16)),
                ttl: h[8],
                membership: h[9] == 2,
                len,
            })
        }
        Some(6) if h.len() >= 40 => {
            // MLD comes behind a hop-by-hop header (its router alert): only such packets are
            // walked to their upper layer.
            let membership = h[6] == 0 && matches!(crate::punt::class_ip6(h), PuntClass::IgmpMld);
            Ok(Head {
                v6: true,
                source: u128::from_be_bytes(h[8..24].try_into().expect("16 bytes")),
                group: u128::from_be_bytes(h[24..40].try_into().expect("16 bytes")),
                ttl: h[7],
                membership,
                len: 40 + be16(h, 4) as usize,
            })
        }
        _ => Err(DropReason::BadLength),
    }
}

#[inline(always)]
fn one(ctx: &mut Ctx, t: &Tables, fib: &Pinned, b: PktBuf, now: u64) {
    let h = match head(&b) {
        Ok(h) => h,
        Err(why) => return ctx.drop(b, why),
    };
    if h.membership {
        // A host's join or leave sent to the group itself (IGMPv2, MLDv1): for pimd.
        return ctx.punt(b, PuntClass::IgmpMld, NO_IF);
    }
    if h.v6 && (h.source >> 118) == 0x3fa {
        // A link-local source never leaves its link (RFC 4291 2.5.6).
        return ctx.drop(b, DropReason::Ip6Scope);
    }
    match fib.lookup(key_of(t, &b, &h)) {
        Some(r) => routed(ctx, t, r, b, &h, now),
        // pimd learns of the source from the kernel's upcall for this packet.
        None if ctx.punt.is_some() => ctx.punt(b, PuntClass::McastData, NO_IF),
        None => ctx.drop(b, DropReason::McastNoRoute),
    }
}

/// The route key of packet `b` with header `h`: its input interface's VRF, source, group.
#[inline(always)]
fn key_of(t: &Tables, b: &PktBuf, h: &Head) -> MrouteKey {
    MrouteKey {
        vrf: t.ifs[b.meta().rx_if as usize].vrf,
        v6: h.v6,
        source: h.source,
        group: h.group,
    }
}

#[inline(always)]
fn routed(ctx: &mut Ctx, t: &Tables, r: &Mroute, mut b: PktBuf, h: &Head, now: u64) {
    use std::sync::atomic::Ordering::Relaxed;
    let rx_if = b.meta().rx_if;
    let c = &r.counters;
    if r.iif != rx_if {
        c.wrong_if.fetch_add(1, Relaxed);
        if ctx.punt.is_some() {
            // The kernel reports it to pimd (WRONGVIF), which may send an assert.
            return ctx.punt(b, PuntClass::McastData, NO_IF);
        }
        return ctx.drop(b, DropReason::McastWrongIf);
    }
    if h.ttl <= 1 {
        return ctx.drop(b, DropReason::McastTtl);
    }
    if r.origin != Origin::Static && ctx.punt.is_some() {
        let up = match r.origin {
            // The kernel hands these to pimd, which sends them to the RP in Registers.
            Origin::KernelRegistering => true,
            _ => {
                // 0: none sent yet (the clock starts at 1): the route's first packet goes.
                let last = c.last_keepalive_ms.load(Relaxed);
                (last == 0 || now.saturating_sub(last) >= KEEPALIVE_MS)
                    && c.last_keepalive_ms
                        .compare_exchange(last, now, Relaxed, Relaxed)
                        .is_ok()
            }
        };
        match (up, r.origin) {
            (false, _) => {}
            // pimd's register device is one of the kernel route's outputs: the copy goes as
            // it came.
            (true, Origin::KernelRegistering) => ctx.punt_copy(&b, PuntClass::McastData, |_| {}),
            // A keepalive: the kernel counts it against its route (pimd reads that count) and,
            // at TTL 1, sends it out of no twin (its outputs' thresholds are 1): Linerate has
            // replicated the packet already.
            (true, _) => ctx.punt_copy(&b, PuntClass::McastData, |cp| set_ttl(cp, h.v6, 1)),
        }
    }
    // The output interfaces this packet goes to.
    let mut outs = [0u32; MAX_OIFS];
    let mut n = 0;
    let fam = usize::from(h.v6);
    for o in r.oifs.iter() {
        if o.ifx == rx_if || h.ttl <= o.ttl {
            continue;
        }
        let nh = t.mcast_nh.get(o.ifx as usize).map_or(0, |p| p[fam]);
        if nh == 0 || n == MAX_OIFS {
            continue;
        }
        outs[n] = nh;
        n += 1;
    }
    c.packets.fetch_add(1, Relaxed);
    c.bytes.fetch_add(h.len as u64, Relaxed);
    if n == 0 {
        return ctx.drop(b, DropReason::McastNoOutput);
    }
    c.replicas.fetch_add(n as u64, Relaxed);
    // One TTL decrement for every copy.
    set_ttl(&mut b, h.v6, h.ttl - 1);
    let gmac = group_mac(h);
    for &nh in &outs[..n - 1] {
        if let Some(cp) = copy(ctx, &b) {
            send(ctx, t, cp, nh, h.len, &gmac);
        }
    }
    send(ctx, t, b, outs[n - 1], h.len, &gmac);
}

/// Sets the TTL (hop limit) of `b`'s IP header, the IPv4 checksum updated (RFC 1624).
#[inline(always)]
fn set_ttl(b: &mut PktBuf, v6: bool, ttl: u8) {
    let l3 = b.meta().l3_off as usize;
    let ip = &mut b.data_mut()[l3..];
    if v6 {
        ip[7] = ttl;
    } else {
        let old = u16::from_be_bytes([ip[8], ip[9]]);
        ip[8] = ttl;
        let new = u16::from_be_bytes([ip[8], ip[9]]);
        let s = packet::checksum::update16(be16(ip, 10), old, new);
        ip[10..12].copy_from_slice(&s.to_be_bytes());
    }
}

fn group_mac(h: &Head) -> [u8; 6] {
    let g = if h.v6 {
        std::net::IpAddr::V6(h.group.into())
    } else {
        std::net::IpAddr::V4((h.group as u32).into())
    };
    packet::mcast::group_mac(g)
}

/// Sends one copy out of next hop `nh` (an interface's multicast next hop).
#[inline(always)]
fn send(ctx: &mut Ctx, t: &Tables, mut b: PktBuf, nh: u32, len: usize, gmac: &[u8; 6]) {
    let NextHop::Forward {
        tx_if,
        port,
        mtu,
        rewrite,
    } = &t.next_hops[nh as usize]
    else {
        return ctx.drop(b, DropReason::InterfaceDown);
    };
    if len > usize::from(*mtu) {
        return ctx.drop(b, DropReason::McastTooBig);
    }
    if !super::rewrite_l2(&mut b, rewrite) {
        return ctx.drop(b, DropReason::NoBuffer);
    }
    b.data_mut()[..6].copy_from_slice(gmac);
    b.meta_mut().next_hop = nh;
    if t.any_features && crate::feature::output::needed(t, &b, *tx_if) {
        return ctx.to(Next::OutputFeatures, b);
    }
    if *port == crate::tables::BVI_PORT {
        b.meta_mut().rx_if = *tx_if;
        return ctx.to(Next::Bridge, b);
    }
    ctx.tx(*port, b);
}

#[cfg(test)]
mod tests;
