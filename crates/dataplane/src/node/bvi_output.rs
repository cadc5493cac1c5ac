//! bvi-output: sends what the L3 path routed out of a bridge's routed interface (BVI) into its
//! bridge, as if the BVI were a member that received it.
//!
//! Reads: `meta.rx_if` (the BVI, set by whoever sent the frame here: [`to_bridge`] for routed
//! packets, the worker for frames the control plane injects), the Ethernet header in front of
//! `meta.l3_off` (written by the next hop's rewrite: the neighbour's MAC, the BVI's), the MAC
//! table. Writes: the tag of the member a frame leaves by (`l2::bridge::retag`), the bridge's
//! counters. Next: the member's transmit vector (known unicast); a copy per member (broadcast,
//! multicast, unknown unicast: `l2_flood::flood`, whose split horizon leaves the BVI out); in a
//! bridge that snoops IGMP/MLD, multicast data only to the members that joined its group and
//! the multicast-router members (`l2_mcast::from_bvi`).
//! Dropped: a destination that is the BVI itself, an unknown destination in a bridge that does
//! not flood, a member that is down. Nothing is learned: the BVI's address is a static entry.

use super::Ctx;
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{Node, To};
use crate::l2::bridge::VectorCounts;
use crate::l2::MacKey;
use crate::tables::{NextHop, Tables, NO_IF};

pub struct BviOutput;

/// Frames leave by their members' ports, or through l2-output where a member has output
/// features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Output,
}

impl crate::graph::Edge for Next {
    const ALL: &'static [Self] = &[Next::Output];
    #[inline(always)]
    fn node(self) -> crate::graph::NodeId {
        match self {
            Next::Output => crate::graph::NodeId::L2Output,
        }
    }
}

impl Node for BviOutput {
    const NAME: &'static str = "bvi-output";
    type Next = Next;
    const TRANSMITS: bool = true;
    const DROPS: &'static [DropReason] = &[];
    const CONSUMED: &'static str = "";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        // Counts per bridge, flushed when the bridge changes (a vector nearly always has one).
        let mut run = (u16::MAX, VectorCounts::default());
        for b in pkts.drain(..) {
            let Some(l2) = t.ifs.get(b.meta().rx_if as usize).and_then(|i| i.l2) else {
                // A BVI removed under the frame (a commit between its routing and now).
                ctx.drop(b, DropReason::InterfaceDown);
                continue;
            };
            if run.0 != l2.bridge {
                flush(t, &mut run);
                run.0 = l2.bridge;
            }
            switch(ctx, t, b, l2.bridge, &mut run.1);
        }
        flush(t, &mut run);
    }

    fn trace(t: &Tables, b: &PktBuf, to: To) -> String {
        let bridge = t
            .ifs
            .get(b.meta().rx_if as usize)
            .and_then(|i| i.l2)
            .and_then(|l2| t.bridges.get(l2.bridge as usize))
            .map_or("?", |x| x.name.as_str());
        match to {
            To::Tx(p) => format!("bridge {bridge}: switched out of port {p}"),
            _ => format!("bridge {bridge}"),
        }
    }
}

fn flush(t: &Tables, run: &mut (u16, VectorCounts)) {
    if run.0 != u16::MAX && !run.1.is_zero() {
        t.bridges[run.0 as usize].counters.add(&run.1);
    }
    run.1 = VectorCounts::default();
}

fn switch(ctx: &mut Ctx, t: &Tables, b: PktBuf, bridge: u16, c: &mut VectorCounts) {
    let rx_if = b.meta().rx_if;
    let br = &t.bridges[bridge as usize];
    let d = b.data();
    let group = d[0] & 1 != 0;
    let found = if group {
        None
    } else {
        let mut dst = [0u8; 6];
        dst.copy_from_slice(&d[..6]);
        t.macs
            .as_deref()
            .and_then(|m| m.lookup(MacKey::new(br.id, dst)))
            .map(|m| t.l2_members.get(m as usize).copied().unwrap_or(NO_IF))
    };
    match found {
        Some(ifx) if ifx == rx_if => ctx.drop(b, DropReason::L2SameInterface),
        Some(ifx) if ifx != NO_IF => super::l2_input::to_member(ctx, t, ifx, b, c, Next::Output),
        _ if !group && !br.flood_unknown => ctx.drop(b, DropReason::L2UnknownUnicast),
        // Multicast into a snooping bridge goes to the members that joined.
        _ if group && br.snoop.is_some() => {
            super::l2_mcast::from_bvi(ctx, t, bridge, b, c, Next::Output)
        }
        _ => {
            if !group {
                c.unknown_unicast += 1;
            }
            super::l2_flood::flood(ctx, t, b, bridge, c, Next::Output);
        }
    }
}

/// Hands a routed packet whose next hop leads out of a BVI (`meta.next_hop`, port
/// [`crate::tables::BVI_PORT`]) to bvi-output, with the BVI as its `meta.rx_if`.
#[inline(never)]
pub(crate) fn to_bridge<E: crate::graph::Edge>(ctx: &mut Ctx, t: &Tables, mut b: PktBuf, e: E) {
    match t.next_hops.get(b.meta().next_hop as usize) {
        Some(NextHop::Forward { tx_if, .. }) => {
            b.meta_mut().rx_if = *tx_if;
            ctx.to(e, b);
        }
        _ => ctx.drop(b, DropReason::InterfaceDown),
    }
}
