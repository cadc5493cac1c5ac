//! l2-flood: sends a bridged frame to every member of its bridge domain but the one it came in
//! on (split horizon): broadcast, multicast and unknown unicast.
//!
//! Reads: `meta.rx_if` (its member and domain), `meta.l3_off`; the domain's member list. Writes:
//! a copy of the frame per member but the last, which takes the frame itself, each tagged for
//! its member (`l2::bridge::retag`); the domain's flood counters. Next: the members' transmit
//! vectors; bvi-input, with a copy of each broadcast and multicast frame, where the domain has a
//! routed interface (BVI) and the frame did not come from it. Dropped: a frame with no other
//! member up to go to; a copy with no buffer for it is counted as `NoBuffer` (the other members
//! still get theirs).

use super::Ctx;
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{Edge, Node, NodeId, To};
use crate::l2::bridge::{l2pt, retag, VectorCounts};
use crate::tables::{Tables, NO_IF};

pub struct L2Flood;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// The copy for the domain's routed interface.
    Bvi,
    /// A copy for a member with output features.
    Output,
}

impl Edge for Next {
    const ALL: &'static [Self] = &[Next::Bvi, Next::Output];
    #[inline(always)]
    fn node(self) -> NodeId {
        match self {
            Next::Bvi => NodeId::BviInput,
            Next::Output => NodeId::L2Output,
        }
    }
}

impl Node for L2Flood {
    const NAME: &'static str = "l2-flood";
    type Next = Next;
    const TRANSMITS: bool = true;
    const DROPS: &'static [DropReason] = &[DropReason::L2NoFloodMember];
    const CONSUMED: &'static str = "";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        // Counts per domain, flushed when the domain changes (a vector nearly always has one).
        let mut run = (u16::MAX, VectorCounts::default());
        for b in pkts.drain(..) {
            let l2 = t.ifs[b.meta().rx_if as usize]
                .l2
                .expect("l2-input sends only members");
            if run.0 != l2.bridge {
                flush(t, &mut run);
                run.0 = l2.bridge;
            }
            flood(ctx, t, b, l2.bridge, &mut run.1, Next::Output);
        }
        flush(t, &mut run);
    }

    fn trace(t: &Tables, b: &PktBuf, to: To) -> String {
        if to == To::Node(NodeId::BviInput) {
            return "a copy for the routed interface".into();
        }
        let Some(l2) = t.ifs[b.meta().rx_if as usize].l2 else {
            return String::new();
        };
        let bridge = &t.bridges[l2.bridge as usize];
        format!(
            "bridge {}: flooded to {} other member(s)",
            bridge.name,
            bridge.members.len().saturating_sub(1)
        )
    }
}

fn flush(t: &Tables, run: &mut (u16, VectorCounts)) {
    if run.0 != u16::MAX && !run.1.is_zero() {
        t.bridges[run.0 as usize].counters.add(&run.1);
    }
    run.1 = VectorCounts::default();
}

/// Floods `b` in bridge `bridge` (an index into `Tables::bridges`): to every member but the one
/// it came in on (`meta.rx_if`), and to the bridge's BVI if it is a group frame from a member.
/// Copies for members with output features go along `e` (the calling node's edge to l2-output).
pub(crate) fn flood<E: Edge>(
    ctx: &mut Ctx,
    t: &Tables,
    b: PktBuf,
    bridge: u16,
    v: &mut VectorCounts,
    e: E,
) {
    let rx_if = b.meta().rx_if;
    let bridge = &t.bridges[bridge as usize];
    let to_bvi = bridge.bvi != NO_IF && bridge.bvi != rx_if && b.data()[0] & 1 != 0;
    let up = |&&ifx: &&u32| {
        let out = &t.ifs[ifx as usize];
        ifx != rx_if && out.up && !out.l2.is_some_and(|l2| l2.blocked)
    };
    let Some(&last) = bridge.members.iter().rev().find(up) else {
        if to_bvi {
            // The routed interface is the only one left to hear it.
            return ctx.to(Next::Bvi, b);
        }
        return ctx.drop(b, DropReason::L2NoFloodMember);
    };
    v.flooded += 1;
    if to_bvi {
        if let Some(c) = copy(ctx, &b) {
            ctx.to(Next::Bvi, c);
        }
    }
    for &ifx in bridge.members.iter().filter(up) {
        if ifx == last {
            break;
        }
        if let Some(c) = copy(ctx, &b) {
            send(ctx, t, c, ifx, v, e);
        }
    }
    send(ctx, t, b, last, v, e);
}

/// A copy of `b` with the metadata its path set (the buffer's identity, pool and index, is its
/// own); None, counted, when no buffer is left.
#[inline(always)]
pub(crate) fn copy(ctx: &mut Ctx, b: &PktBuf) -> Option<PktBuf> {
    let Some(mut c) = ctx.cache.alloc() else {
        ctx.drops[DropReason::NoBuffer as usize] += 1;
        return None;
    };
    c.fill(b.data());
    let (m, cm) = (b.meta(), c.meta_mut());
    cm.l3_off = m.l3_off;
    cm.rx_if = m.rx_if;
    cm.rx_port = m.rx_port;
    cm.l2_group = m.l2_group;
    // Accounted in already (a member's `flow: in`): a copy is not a new packet for it.
    cm.flowed = m.flowed;
    Some(c)
}

#[inline(always)]
fn send<E: Edge>(ctx: &mut Ctx, t: &Tables, mut b: PktBuf, ifx: u32, v: &mut VectorCounts, e: E) {
    let out = &t.ifs[ifx as usize];
    if retag(&mut b, out.s_vlan, out.vlan) {
        if out.l2.is_some_and(|l2| l2.l2pt != 0) && b.data()[..6] == l2pt::MAC {
            // Back to the tunnel customer: the protocol frame's own destination.
            let l3 = b.meta().l3_off as usize;
            if let Some(dst) = l2pt::original(b.data(), l3) {
                b.data_mut()[..6].copy_from_slice(&dst);
                v.l2pt += 1;
            }
        }
        v.flood_copies += 1;
        super::l2_output::leave(ctx, t, b, ifx, out, e);
    } else {
        ctx.drop(b, DropReason::NoBuffer);
    }
}
