//! l2-mcast: IP multicast in a bridge domain that snoops IGMP and MLD (RFC 4541).
//!
//! Reads: `meta.rx_if` (a member), `meta.l3_off`, the IP header (and a membership message
//! whole); the domain's settings (`Bridge::snoop`) and groups (`Tables::snoop`). Writes: the
//! groups, from the joins, leaves, queries and PIM hellos it reads (a join is forwarded to from
//! the next frame on, on every worker); each group's counters; the domain's counters.
//! Next: the members' transmit vectors: data to a group goes to its members and the
//! multicast-router members, reports and leaves to the router members only (hosts must not
//! hear each other's reports, or they would hold theirs back); bvi-input, a copy of each
//! report and leave where the domain has a routed interface; l2-flood: queries, PIM,
//! link-local groups (224.0.0.0/24, ff02::/16), groups nobody joined where the domain floods
//! them, and what is not IP. Consumed: a report with no router member to go to. Dropped: a
//! membership message over the `igmp-mld` punt class's rate (`PuntPoliced`: a join flood), or
//! that does not parse, or a PIM message that does not (`McastMalformed`), data to a group nobody joined where the domain neither floods such
//! groups nor has a router member (`McastNoListener`), a frame with no member to go to.
//!
//! A frame goes to at most [`MAX_OUT`] members; a list longer than that (a bridge of more
//! members) is flooded instead, which gives every listener its copy and more.

use packet::mcast::{self, Kind, Message};

use super::Ctx;
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{Edge, Node, NodeId, To};
use crate::l2::bridge::{retag, VectorCounts};
use crate::l2::snoop::{GroupKey, SnoopSettings, SnoopTable};
use crate::l2::{Bridge, L2Port};
use crate::node::l2_flood::copy;
use crate::tables::{Tables, NO_IF};

pub struct L2Mcast;

/// Members one frame is sent to, at most.
pub const MAX_OUT: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Flood,
    /// A copy of a report or leave for the domain's routed interface.
    Bvi,
    /// A copy for a member with output features.
    Output,
}

impl Edge for Next {
    const ALL: &'static [Self] = &[Next::Flood, Next::Bvi, Next::Output];
    #[inline(always)]
    fn node(self) -> NodeId {
        match self {
            Next::Flood => NodeId::L2Flood,
            Next::Bvi => NodeId::BviInput,
            Next::Output => NodeId::L2Output,
        }
    }
}

impl Node for L2Mcast {
    const NAME: &'static str = "l2-mcast";
    type Next = Next;
    const TRANSMITS: bool = true;
    const DROPS: &'static [DropReason] = &[DropReason::McastMalformed, DropReason::McastNoListener];
    const CONSUMED: &'static str =
        "membership reports read by the snooper with no router member to go to";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        let mut run = (u16::MAX, VectorCounts::default());
        // The output list, made once a vector and refilled per frame (not 1 KB per frame).
        let mut o = Outs {
            ifx: [0; MAX_OUT],
            n: 0,
            overflow: false,
        };
        for b in pkts.drain(..) {
            let l2 = t.ifs[b.meta().rx_if as usize]
                .l2
                .expect("l2-input sends only members");
            if run.0 != l2.bridge {
                flush(t, &mut run);
                run.0 = l2.bridge;
            }
            let bridge = &t.bridges[l2.bridge as usize];
            match (bridge.snoop.as_deref(), t.snoop.as_deref()) {
                (Some(s), Some(table)) => one(ctx, t, table, s, bridge, l2, b, &mut o, &mut run.1),
                _ => ctx.to(Next::Flood, b),
            }
        }
        flush(t, &mut run);
    }

    fn trace(t: &Tables, b: &PktBuf, to: To) -> String {
        let Some(l2) = t.ifs[b.meta().rx_if as usize].l2 else {
            return String::new();
        };
        let bridge = &t.bridges[l2.bridge as usize];
        match to {
            To::Node(NodeId::L2Flood) => format!("bridge {}: multicast flooded", bridge.name),
            To::Node(NodeId::BviInput) => "a report's copy for the routed interface".into(),
            To::Tx(_) => format!("bridge {}: to the group's members", bridge.name),
            _ => String::new(),
        }
    }
}

fn flush(t: &Tables, run: &mut (u16, VectorCounts)) {
    if run.0 != u16::MAX && !run.1.is_zero() {
        t.bridges[run.0 as usize].counters.add(&run.1);
    }
    run.1 = VectorCounts::default();
}

/// Member ids chosen for one frame, as interface indexes.
struct Outs {
    ifx: [u32; MAX_OUT],
    n: usize,
    /// More members than [`MAX_OUT`]: flood instead.
    overflow: bool,
}

impl Outs {
    /// Adds member `m` unless it is the frame's own, gone, down or blocked, or (`dedup`)
    /// already in.
    #[inline(always)]
    fn push(&mut self, t: &Tables, m: u32, rx_if: u32, dedup: bool) {
        let ifx = t.l2_members.get(m as usize).copied().unwrap_or(NO_IF);
        if ifx == NO_IF || ifx == rx_if {
            return;
        }
        let i = &t.ifs[ifx as usize];
        if !i.up || i.l2.is_some_and(|l| l.blocked) || i.bvi.is_some() {
            return;
        }
        if dedup && self.ifx[..self.n].contains(&ifx) {
            return;
        }
        if self.n == MAX_OUT {
            self.overflow = true;
            return;
        }
        self.ifx[self.n] = ifx;
        self.n += 1;
    }
}

/// Fills `o` with the multicast-router members of a bridge (learned and configured).
#[inline(always)]
fn routers(
    o: &mut Outs,
    t: &Tables,
    table: &SnoopTable,
    s: &SnoopSettings,
    bridge: &Bridge,
    rx_if: u32,
) {
    o.n = 0;
    o.overflow = false;
    table.with(GroupKey::routers(bridge.id), |e| {
        if let Some(e) = e {
            for &m in e.any.iter() {
                o.push(t, m, rx_if, false);
            }
        }
    });
    for &m in s.static_mrouters.iter() {
        o.push(t, m, rx_if, true);
    }
}

/// What a frame to a multicast MAC carries (its IP header at `l3`), and whether it is IPv6.
#[inline(always)]
fn classify(d: &[u8], l3: usize) -> (Kind, bool) {
    let et = if l3 >= 14 && d.len() > l3 {
        u16::from_be_bytes([d[l3 - 2], d[l3 - 1]])
    } else {
        0
    };
    match et {
        0x0800 => (mcast::classify_v4(&d[l3..]), false),
        0x86dd => (mcast::classify_v6(&d[l3..]), true),
        _ => (Kind::Other, false),
    }
}

/// Fills `o` with where data to `key` from `source` goes: the router members, then the members
/// that joined (for that source), and counts the frame against the group; whether the group
/// is registered (someone joined it).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn outputs(
    o: &mut Outs,
    t: &Tables,
    table: &SnoopTable,
    s: &SnoopSettings,
    bridge: &Bridge,
    key: GroupKey,
    source: u128,
    rx_if: u32,
    len: usize,
) -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    routers(o, t, table, s, bridge, rx_if);
    let routers_n = o.n;
    table.with(key, |e| match e {
        Some(e) if !e.is_empty() => {
            for &m in e.members_for(source) {
                o.push(t, m, rx_if, routers_n > 0);
            }
            let k = &e.counters;
            k.packets.fetch_add(1, Relaxed);
            k.bytes.fetch_add(len as u64, Relaxed);
            k.replicas.fetch_add(o.n as u64, Relaxed);
            true
        }
        _ => false,
    })
}

#[allow(clippy::too_many_arguments)]
fn one(
    ctx: &mut Ctx,
    t: &Tables,
    table: &SnoopTable,
    s: &SnoopSettings,
    bridge: &Bridge,
    l2: L2Port,
    b: PktBuf,
    o: &mut Outs,
    c: &mut VectorCounts,
) {
    let d = b.data();
    let l3 = b.meta().l3_off as usize;
    let (kind, v6) = classify(d, l3);
    let rx_if = b.meta().rx_if;
    match kind {
        Kind::Data { group, source } => {
            let key = GroupKey {
                bridge: bridge.id,
                v6,
                group,
            };
            let registered = outputs(o, t, table, s, bridge, key, source, rx_if, d.len());
            if o.overflow {
                return ctx.to(Next::Flood, b);
            }
            if registered {
                c.mcast_forwarded += 1;
            } else {
                c.mcast_unregistered += 1;
                if s.flood_unregistered {
                    return ctx.to(Next::Flood, b);
                }
                if o.n == 0 {
                    return ctx.drop(b, DropReason::McastNoListener);
                }
            }
            replicate(ctx, t, b, o, c, Next::Output);
        }
        Kind::Membership => {
            // A join flood is policed under the igmp-mld punt class (per worker), like the
            // membership messages a router's control plane takes.
            if !ctx.police(crate::punt::PuntClass::IgmpMld) {
                return ctx.drop(b, DropReason::PuntPoliced);
            }
            let parsed = if v6 {
                mcast::parse_v6(&d[l3..]).map(|(m, a)| (m, !a.is_unspecified()))
            } else {
                mcast::parse_v4(&d[l3..]).map(|(m, a)| (m, !a.is_unspecified()))
            };
            let counters = &table.counters;
            let inc = |a: &std::sync::atomic::AtomicU64| {
                a.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            };
            match parsed {
                Err(_) => {
                    inc(&counters.malformed);
                    ctx.drop(b, DropReason::McastMalformed);
                }
                Ok((Message::Query { .. }, from_router)) => {
                    inc(&counters.queries);
                    // A query from 0.0.0.0 is a switch's proxy querier, not a router (RFC
                    // 4541 2.1.1).
                    if from_router {
                        table.router_seen(bridge.id, l2.member, s, table.now_ms());
                    }
                    ctx.to(Next::Flood, b);
                }
                Ok((Message::Report { records, .. }, _)) => {
                    let leave = records.iter().all(|r| {
                        r.kind == mcast::RecordKind::ToInclude && r.sources.is_empty()
                            || r.kind == mcast::RecordKind::Block
                    });
                    inc(if leave {
                        &counters.leaves
                    } else {
                        &counters.reports
                    });
                    let a = table.apply(bridge.id, l2.member, v6, &records, s, table.now_ms());
                    c.mcast_limit += u64::from(a.refused);
                    routers(o, t, table, s, bridge, rx_if);
                    let to_bvi = bridge.bvi != NO_IF && bridge.bvi != rx_if;
                    if to_bvi {
                        if o.n == 0 {
                            return ctx.to(Next::Bvi, b);
                        }
                        if let Some(cp) = copy(ctx, &b) {
                            ctx.to(Next::Bvi, cp);
                        }
                    }
                    if o.n == 0 {
                        // No router to tell: the snooper was its only reader.
                        ctx.cache.free(b);
                        return;
                    }
                    replicate(ctx, t, b, o, c, Next::Output);
                }
            }
        }
        Kind::Pim => match mcast::parse_pim_ip(&d[l3..]) {
            // A router is behind the member: learned from its Hellos (RFC 4541 2.1.1).
            Ok(p) => {
                if p.kind == mcast::PIM_HELLO {
                    table.router_seen(bridge.id, l2.member, s, table.now_ms());
                    table
                        .counters
                        .pim_hellos
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                ctx.to(Next::Flood, b);
            }
            Err(_) => {
                table
                    .counters
                    .malformed
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                ctx.drop(b, DropReason::McastMalformed);
            }
        },
        Kind::LinkLocal | Kind::Other => ctx.to(Next::Flood, b),
    }
}

/// Routed multicast sent out of a snooping bridge's routed interface (from `bvi-output`): data
/// to a group goes to the members that joined it (for its source) and the multicast-router
/// members, as data a member sent would; a group nobody joined is flooded or dropped as the
/// bridge's settings say; anything else (the router's own queries and PIM) is flooded. `b`'s
/// `rx_if` is the BVI, which is never among the outputs.
/// Copies for members with output features go along `e` (bvi-output's edge to l2-output).
pub(crate) fn from_bvi<E: Edge>(
    ctx: &mut Ctx,
    t: &Tables,
    bridge: u16,
    b: PktBuf,
    c: &mut VectorCounts,
    e: E,
) {
    let br = &t.bridges[bridge as usize];
    let (Some(s), Some(table)) = (br.snoop.as_deref(), t.snoop.as_deref()) else {
        return super::l2_flood::flood(ctx, t, b, bridge, c, e);
    };
    let d = b.data();
    let l3 = b.meta().l3_off as usize;
    let (kind, v6) = classify(d, l3);
    let Kind::Data { group, source } = kind else {
        return super::l2_flood::flood(ctx, t, b, bridge, c, e);
    };
    let mut o = Outs {
        ifx: [0; MAX_OUT],
        n: 0,
        overflow: false,
    };
    let key = GroupKey {
        bridge: br.id,
        v6,
        group,
    };
    let registered = outputs(
        &mut o,
        t,
        table,
        s,
        br,
        key,
        source,
        b.meta().rx_if,
        d.len(),
    );
    if o.overflow || (!registered && s.flood_unregistered) {
        if !registered {
            c.mcast_unregistered += 1;
        }
        return super::l2_flood::flood(ctx, t, b, bridge, c, e);
    }
    if registered {
        c.mcast_forwarded += 1;
    } else {
        c.mcast_unregistered += 1;
        if o.n == 0 {
            return ctx.drop(b, DropReason::McastNoListener);
        }
    }
    replicate(ctx, t, b, &o, c, e);
}

/// Sends `b` to every interface of `o` (copies to all but the last), tagged for each.
#[inline(always)]
fn replicate<E: Edge>(ctx: &mut Ctx, t: &Tables, b: PktBuf, o: &Outs, c: &mut VectorCounts, e: E) {
    let Some((&last, rest)) = o.ifx[..o.n].split_last() else {
        return ctx.drop(b, DropReason::L2NoFloodMember);
    };
    for &ifx in rest {
        if let Some(cp) = copy(ctx, &b) {
            send(ctx, t, cp, ifx, c, e);
        }
    }
    send(ctx, t, b, last, c, e);
}

#[inline(always)]
fn send<E: Edge>(ctx: &mut Ctx, t: &Tables, mut b: PktBuf, ifx: u32, c: &mut VectorCounts, e: E) {
    let out = &t.ifs[ifx as usize];
    if retag(&mut b, out.s_vlan, out.vlan) {
        c.mcast_copies += 1;
        super::l2_output::leave(ctx, t, b, ifx, out, e);
    } else {
        ctx.drop(b, DropReason::NoBuffer);
    }
}

#[cfg(test)]
mod tests;
