//! l2-input: switches the frames of bridge-domain members: learns each source, looks up each
//! destination, and sends the frame to the member its destination is on.
//!
//! Reads: `meta.rx_if` (a member: its `L2Port`), `meta.l3_off` (14 or 18: past the EtherType),
//! the frame's MACs; the MAC table (`Tables::macs`). Writes: the MAC table (sources learned,
//! refreshed or moved, once per vector as a batch), the frame's tag for the member it leaves by
//! (`l2::bridge::retag`), the domain's counters. Next: a member's transmit vector (known
//! unicast); bvi-input (to the MAC of the domain's routed interface); l2-mcast (IP multicast
//! where the domain snoops IGMP/MLD); l2-flood (broadcast, other multicast, unknown unicast
//! where the domain floods it);
//! l2-control (the 802.1D reserved addresses: LACP, LLDP, and BPDUs where the domain punts
//! them); the punt path under `sna` (every LLC frame where DLSw serves the domain). Dropped: a destination on the member the frame came from, an unknown destination in a
//! domain that does not flood, BPDUs where the domain drops them, a member that is down, and a
//! frame to be flooded over its member's storm-control rate (`l2::bridge::StormControl`).
//!
//! Both table passes are batched over the vector (`MacTable::learn_batch`, `lookup_batch`),
//! prefetching buckets ahead, so a table of a million addresses costs overlapping misses, not
//! one at a time. Learning writes nothing for a source already known on its member this second,
//! so steady traffic does not bounce the table's lines between workers.

use super::{Ctx, VECTOR};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{Edge, Node, NodeId, To};
use crate::l2::bridge::{dlsw_llc, l2pt, reserved_group, retag, Bpdu, VectorCounts};
use crate::l2::{Learn, MacKey, NotLearned};
use crate::tables::{Tables, NO_IF};

pub struct L2Input;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Flood,
    /// IP multicast in a domain that snoops IGMP/MLD.
    Mcast,
    Control,
    /// To the domain's routed interface (its MAC): routed.
    Bvi,
    /// To a member with output features.
    Output,
}

impl Edge for Next {
    const ALL: &'static [Self] = &[
        Next::Flood,
        Next::Mcast,
        Next::Control,
        Next::Bvi,
        Next::Output,
    ];
    #[inline(always)]
    fn node(self) -> NodeId {
        match self {
            Next::Flood => NodeId::L2Flood,
            Next::Mcast => NodeId::L2Mcast,
            Next::Control => NodeId::L2Control,
            Next::Bvi => NodeId::BviInput,
            Next::Output => NodeId::L2Output,
        }
    }
}

impl Node for L2Input {
    const NAME: &'static str = "l2-input";
    type Next = Next;
    const TRANSMITS: bool = true;
    const DROPS: &'static [DropReason] = &[
        DropReason::L2SameInterface,
        DropReason::L2UnknownUnicast,
        DropReason::L2BpduDropped,
        DropReason::L2StormControl,
        DropReason::L2Blocked,
    ];
    const CONSUMED: &'static str = "handed to DLSw (the `sna` punt class)";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        l2_input(ctx, t, pkts);
    }

    fn trace(t: &Tables, b: &PktBuf, to: To) -> String {
        let m = b.meta();
        let Some(l2) = t.ifs[m.rx_if as usize].l2 else {
            return String::new();
        };
        let bridge = &t.bridges[l2.bridge as usize];
        match to {
            To::Tx(_) => {
                let d = b.data();
                let out = t
                    .macs
                    .as_ref()
                    .and_then(|macs| macs.lookup(MacKey::new(bridge.id, mac6(d, 0))))
                    .and_then(|member| t.l2_members.get(member as usize))
                    .and_then(|&ifx| t.ifs.get(ifx as usize))
                    .map_or("?", |i| i.name.as_str());
                format!("bridge {}: to {} on {out}", bridge.name, fmt_mac(&d[..6]))
            }
            To::Node(NodeId::L2Flood) => format!("bridge {}: flood", bridge.name),
            To::Node(NodeId::L2Mcast) => format!("bridge {}: IP multicast, snooped", bridge.name),
            To::Node(NodeId::BviInput) => {
                format!("bridge {}: to its routed interface", bridge.name)
            }
            _ => format!("bridge {}: L2 control frame", bridge.name),
        }
    }
}

/// Sends a switched frame to member `ifx`, tagged for it (through l2-output, by edge `e`, where
/// the member has output features): dropped if the member is down, or if the tag needs room
/// the buffer lacks.
#[inline(always)]
pub(crate) fn to_member<E: Edge>(
    ctx: &mut Ctx,
    t: &Tables,
    ifx: u32,
    mut b: PktBuf,
    c: &mut VectorCounts,
    e: E,
) {
    let out = &t.ifs[ifx as usize];
    if !out.up {
        ctx.drop(b, DropReason::InterfaceDown);
    } else if !retag(&mut b, out.s_vlan, out.vlan) {
        ctx.drop(b, DropReason::NoBuffer);
    } else {
        c.forwarded += 1;
        super::l2_output::leave(ctx, t, b, ifx, out, e);
    }
}

/// Storm control's kind of a flooded frame: 0 broadcast, 1 multicast, 2 unknown unicast.
#[inline(always)]
fn flood_kind(d: &[u8]) -> usize {
    if d[..6] == [0xff; 6] {
        0
    } else if d[0] & 1 != 0 {
        1
    } else {
        2
    }
}

/// An IPv4 (01:00:5E, RFC 1112) or IPv6 (33:33, RFC 2464) multicast address.
#[inline(always)]
fn ip_multicast_mac(d: &[u8]) -> bool {
    d[..3] == [0x01, 0x00, 0x5e] || d[..2] == [0x33, 0x33]
}

#[inline(always)]
fn mac6(d: &[u8], at: usize) -> [u8; 6] {
    [d[at], d[at + 1], d[at + 2], d[at + 3], d[at + 4], d[at + 5]]
}

fn fmt_mac(m: &[u8]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Where one frame goes.
#[derive(Clone, Copy)]
enum Verdict {
    Tx(u32),
    Flood,
    Control,
    /// To DLSw, under a punt class of its own (`sna`).
    Sna,
    Drop(DropReason),
}

fn l2_input(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
    let Some(macs) = t.macs.as_deref() else {
        // Members without a table are a control-plane bug; flooding stays correct.
        for b in pkts.drain(..) {
            ctx.to(Next::Flood, b);
        }
        return;
    };
    // The members' input features, before anything is learned: a frame their ACL denies
    // teaches the table nothing.
    let flows = t.any_features && crate::feature::bridged::input(ctx, t, pkts);
    let n = pkts.len();
    let now = (ctx.clock_ns / 1_000_000_000) as u32;
    let mut dst = [MacKey::new(0, [0; 6]); VECTOR];
    let mut src = [MacKey::new(0, [0; 6]); VECTOR];
    let mut member = [0u32; VECTOR];
    // The frames whose source is learned: their index in the vector.
    let mut learners = [0u8; VECTOR];
    let mut k = 0;
    for (i, b) in pkts.iter().enumerate() {
        let l2 = t.ifs[b.meta().rx_if as usize]
            .l2
            .expect("ethernet-input sends only members here");
        let id = t.bridges[l2.bridge as usize].id;
        let d = b.data();
        dst[i] = MacKey::new(id, mac6(d, 0));
        if l2.learn && !l2.blocked {
            src[k] = MacKey::new(id, mac6(d, 6));
            member[k] = l2.member;
            learners[k] = i as u8;
            k += 1;
        }
    }
    let mut learned = [Learn::Known; VECTOR];
    macs.learn_batch(&src[..k], &member[..k], now, &mut learned[..k]);
    let mut found = [None; VECTOR];
    macs.lookup_batch(&dst[..n], &mut found[..n]);

    // Counts per domain: a vector nearly always holds one, so a run is flushed when it changes.
    let mut run = (u16::MAX, VectorCounts::default());
    let flush = |run: &mut (u16, VectorCounts)| {
        if run.0 != u16::MAX && !run.1.is_zero() {
            t.bridges[run.0 as usize].counters.add(&run.1);
        }
        run.1 = VectorCounts::default();
    };
    if flows {
        // Ingress flow records name where each frame goes: the member its destination was
        // learned on (the BVI's member for the routed interface), else none (flooded, or
        // dropped by what follows: NetFlow accounts what entered).
        let mut out_if = [NO_IF; VECTOR];
        for (i, (o, b)) in out_if.iter_mut().zip(pkts.iter()).enumerate() {
            let member = |m: u32| t.l2_members.get(m as usize).copied().unwrap_or(NO_IF);
            let to = found[i].map_or(NO_IF, member);
            if b.data()[0] & 1 == 0 && to != b.meta().rx_if {
                *o = to;
            }
        }
        crate::feature::bridged::account_in(ctx, t, pkts, &out_if[..n]);
    }
    let mut li = 0;
    for (i, mut b) in pkts.drain(..).enumerate() {
        let rx_if = b.meta().rx_if;
        let l2 = t.ifs[rx_if as usize].l2.expect("checked above");
        if run.0 != l2.bridge {
            flush(&mut run);
            run.0 = l2.bridge;
        }
        let c = &mut run.1;
        if li < k && learners[li] as usize == i {
            match learned[li] {
                Learn::Learned => c.learned += 1,
                Learn::Moved { .. } => c.moved += 1,
                Learn::NotLearned(NotLearned::Limit) => {
                    c.limit += 1;
                    c.limit_member = l2.member;
                }
                Learn::NotLearned(NotLearned::TableFull) => c.table_full += 1,
                Learn::NotLearned(NotLearned::Flap) => c.flaps += 1,
                _ => {}
            }
            li += 1;
        }
        let bridge = &t.bridges[l2.bridge as usize];
        let d = b.data();
        let verdict = if l2.blocked {
            Verdict::Drop(DropReason::L2Blocked)
        } else if bridge.dlsw && dlsw_llc(d, b.meta().l3_off as usize) {
            Verdict::Sna
        } else if d[0] & 1 != 0 {
            if l2.l2pt & l2pt::protocol(d) != 0 {
                // A tunnel customer's protocol frame: across the bridge under the L2PT address.
                b.data_mut()[..6].copy_from_slice(&l2pt::MAC);
                c.l2pt += 1;
                Verdict::Flood
            } else if reserved_group(d) {
                match bridge.bpdu {
                    Bpdu::Flood if d[5] == 0 => Verdict::Flood,
                    Bpdu::Drop if d[5] == 0 => Verdict::Drop(DropReason::L2BpduDropped),
                    _ => Verdict::Control,
                }
            } else {
                Verdict::Flood
            }
        } else {
            match found[i].map(|m| t.l2_members.get(m as usize).copied().unwrap_or(NO_IF)) {
                Some(ifx) if ifx == rx_if => Verdict::Drop(DropReason::L2SameInterface),
                Some(ifx) if ifx != NO_IF => Verdict::Tx(ifx),
                // Unknown, or learned on a member since removed.
                _ if bridge.flood_unknown => {
                    c.unknown_unicast += 1;
                    Verdict::Flood
                }
                _ => Verdict::Drop(DropReason::L2UnknownUnicast),
            }
        };
        match verdict {
            Verdict::Tx(ifx) => {
                let out = &t.ifs[ifx as usize];
                if out.bvi.is_some() {
                    c.forwarded += 1;
                    ctx.to(Next::Bvi, b);
                } else {
                    to_member(ctx, t, ifx, b, c, Next::Output);
                }
            }
            Verdict::Flood => {
                // Storm control: broadcast, multicast or unknown unicast, per member.
                let storm = t
                    .l2_storm
                    .get(l2.member as usize)
                    .and_then(|s| s.as_deref());
                match storm {
                    Some(sc) if !sc.admit(flood_kind(b.data()), ctx.clock_ns) => {
                        c.storm_dropped += 1;
                        ctx.drop(b, DropReason::L2StormControl);
                    }
                    _ if bridge.snoop.is_some() && ip_multicast_mac(b.data()) => {
                        ctx.to(Next::Mcast, b)
                    }
                    _ => ctx.to(Next::Flood, b),
                }
            }
            Verdict::Control => ctx.to(Next::Control, b),
            Verdict::Sna => ctx.punt(b, crate::punt::PuntClass::Sna, NO_IF),
            Verdict::Drop(why) => ctx.drop(b, why),
        }
    }
    flush(&mut run);
}

#[cfg(test)]
pub(crate) mod tests;
