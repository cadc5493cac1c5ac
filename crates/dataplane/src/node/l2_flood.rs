//! l2-flood: sends a bridged frame to every member of its bridge domain but the one it came in
//! on (split horizon): broadcast, multicast and unknown unicast.
//!
//! Reads: `meta.rx_if` (its member and domain), `meta.l3_off`; the domain's member list. Writes:
//! a copy of the frame per member but the last, which takes the frame itself, each tagged for
//! its member (`l2::bridge::retag`); the domain's flood counters. Next: the members' transmit
//! vectors. Dropped: a frame with no other member up to go to; a copy with no buffer for it is
//! counted as `NoBuffer` (the other members still get theirs).

use super::Ctx;
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{NoEdges, Node, To};
use crate::l2::bridge::{l2pt, retag, VectorCounts};
use crate::tables::Tables;

pub struct L2Flood;

impl Node for L2Flood {
    const NAME: &'static str = "l2-flood";
    type Next = NoEdges;
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
            flood(ctx, t, b, l2.bridge, &mut run.1);
        }
        flush(t, &mut run);
    }

    fn trace(t: &Tables, b: &PktBuf, _to: To) -> String {
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

fn flood(ctx: &mut Ctx, t: &Tables, b: PktBuf, bridge: u16, v: &mut VectorCounts) {
    let rx_if = b.meta().rx_if;
    let bridge = &t.bridges[bridge as usize];
    let up = |&&ifx: &&u32| {
        let out = &t.ifs[ifx as usize];
        ifx != rx_if && out.up && !out.l2.is_some_and(|l2| l2.blocked)
    };
    let Some(&last) = bridge.members.iter().rev().find(up) else {
        return ctx.drop(b, DropReason::L2NoFloodMember);
    };
    v.flooded += 1;
    for &ifx in bridge.members.iter().filter(up) {
        if ifx == last {
            break;
        }
        let Some(mut c) = ctx.cache.alloc() else {
            ctx.drops[DropReason::NoBuffer as usize] += 1;
            continue;
        };
        c.fill(b.data());
        // Only what the frame's path set: the buffer's identity (pool, index) is its own.
        let (m, cm) = (b.meta(), c.meta_mut());
        cm.l3_off = m.l3_off;
        cm.rx_if = m.rx_if;
        cm.rx_port = m.rx_port;
        cm.l2_group = m.l2_group;
        send(ctx, t, c, ifx, v);
    }
    send(ctx, t, b, last, v);
}

#[inline(always)]
fn send(ctx: &mut Ctx, t: &Tables, mut b: PktBuf, ifx: u32, v: &mut VectorCounts) {
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
        ctx.tx(out.port, b);
    } else {
        ctx.drop(b, DropReason::NoBuffer);
    }
}
