//! pw-encap: pseudowire imposition (RFC 4448). Every frame of an interface cross-connected to a
//! pseudowire (a port in Ethernet mode, or a VLAN sub-interface) leaves over the pseudowire's
//! LSP: the frame whole, a control word if the pseudowire uses one, the peer's label for the
//! pseudowire (bottom of the stack) and the transport labels, in a new Ethernet header to the
//! next hop towards the peer.
//!
//! Reads: `meta.rx_if` (its pseudowire, [`crate::mpls::Mpls::xconnect`]), `meta.l3_off` (where
//! the frame's tags end), the pseudowire (labels, next hop, state), and for a pseudowire over an
//! LSP the LSP's path object (the way it takes now, primary or backup, and that way's labels,
//! pushed above the pseudowire's). Sets: the new headers,
//! `meta.next_hop`, `meta.l3_off` (the first label), the pseudowire's counters. A type 5
//! pseudowire from a VLAN sub-interface sends the frame without its tag (raw mode); type 4
//! keeps it (tagged mode: the far end rewrites it to its own VLAN). Labels go out with TTL 255
//! and as traffic class the one the attachment circuit's QoS chose (`set exp`), else the
//! frame's 802.1p priority. First the attachment circuit's input features run on the frames
//! ([`crate::feature::labelled`]). Next: the next hop's transmit vector.
//! Dropped: by the attachment circuit's ACL or policers, a pseudowire that is down, a next hop
//! without a neighbour, a frame that with its labels exceeds the core interface's MTU.

use super::{be16, Action, Ctx};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{NoEdges, Node, To};
use crate::mpls::VcType;
use crate::tables::Tables;

pub struct PwEncap;

impl Node for PwEncap {
    const NAME: &'static str = "pw-encap";
    type Next = NoEdges;
    const TRANSMITS: bool = true;
    const DROPS: &'static [DropReason] = &[];
    const CONSUMED: &'static str = "";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        let Some(m) = t.mpls.as_deref() else {
            for b in pkts.drain(..) {
                ctx.drop(b, DropReason::PwDown);
            }
            return;
        };
        if t.any_features {
            // The attachment circuit's input arc, on the IP packet the frame carries.
            crate::feature::labelled::run(
                ctx,
                t,
                m,
                crate::feature::labelled::Side::Imposition,
                pkts,
            );
        }
        let counters = m.pw_counters(ctx.worker);
        // Each frame's pseudowire and its counters are asked for before the first is used: at
        // 3,072 pseudowires they are two cache misses a frame, and this way they overlap.
        let mut pws = [u32::MAX; super::VECTOR];
        for (i, b) in pkts.iter().enumerate() {
            if let Some(pw) = m.xconnect(b.meta().rx_if) {
                pws[i] = pw;
                m.prefetch_pw(pw);
                counters.prefetch(pw);
            }
        }
        for (i, mut b) in pkts.drain(..).enumerate() {
            let pw = pws[i];
            let Some(p) = m.pws.get(pw as usize) else {
                ctx.drop(b, DropReason::PwDown);
                continue;
            };
            if !p.up {
                ctx.drop(b, DropReason::PwDown);
                continue;
            }
            // Over an LSP the path object says which way (primary or backup) and brings that
            // way's labels, which go above the pseudowire's own.
            let (port, mtu, rw, transport) = match super::resolve(t, p.nh, || 0).1 {
                Action::Transmit { port, mtu, rewrite } => (port, mtu, rewrite, None),
                Action::Push {
                    port,
                    mtu,
                    rewrite,
                    labels,
                    ..
                } => (port, mtu, rewrite, Some(labels)),
                Action::Drop(why) => {
                    ctx.drop(b, why);
                    continue;
                }
                Action::Slow(super::Slow::Glean) => {
                    ctx.drop(b, DropReason::NeighborUnresolved);
                    continue;
                }
                // The next hop towards the peer is a neighbour: anything else is a
                // control-plane bug.
                _ => {
                    ctx.drop(b, DropReason::NoRoute);
                    continue;
                }
            };
            let l3 = b.meta().l3_off as usize;
            let tagged = l3 >= 18 && be16(b.data(), 12) == 0x8100;
            // The class QoS chose (`set exp`), else the frame's 802.1p priority.
            let tc = match b.meta().exp {
                0 if tagged => b.data()[14] >> 5,
                0 => 0,
                e => e - 1,
            };
            if p.vc_type == VcType::Ethernet && p.ac_vlan.is_some() && tagged {
                // Raw mode: the sub-interface's tag stays here.
                let d = b.data_mut();
                d.copy_within(0..12, 4);
                b.pull_front(4);
            }
            let frame = b.len();
            let cw = if p.control_word { 4 } else { 0 };
            let outer = 4 * transport.as_ref().map_or(0, |l| l.len());
            let labels = outer + 4 * p.push.len();
            // `mtu` is already less the path's labels.
            if frame + cw + labels - outer > mtu as usize {
                ctx.drop(b, DropReason::MplsTooBig);
                continue;
            }
            let n = rw.len as usize;
            if !b.push_front(n + labels + cw) {
                ctx.drop(b, DropReason::NoBuffer);
                continue;
            }
            let d = b.data_mut();
            d[..n].copy_from_slice(&rw.bytes[..n]);
            d[n - 2..n].copy_from_slice(&crate::mpls::ETHERTYPE_MPLS.to_be_bytes());
            if let Some(t) = &transport {
                t.write(&mut d[n..n + outer], tc, 255, false);
            }
            p.push.write(&mut d[n + outer..n + labels], tc, 255, true);
            if cw != 0 {
                // RFC 4385: all zero (flags, length for frames under 64 bytes, sequence 0).
                d[n + labels..n + labels + 4].copy_from_slice(&[0; 4]);
            }
            let meta = b.meta_mut();
            meta.l3_off = n as u16;
            meta.next_hop = p.nh;
            counters.add(pw, crate::mpls::PW_TX_PACKETS, 1, frame as u64);
            ctx.tx(port, b);
        }
    }

    fn trace(t: &Tables, b: &PktBuf, _to: To) -> String {
        let pw = t.mpls.as_deref().and_then(|m| {
            m.xconnect(b.meta().rx_if)
                .and_then(|i| m.pws.get(i as usize))
        });
        match pw {
            Some(p) => format!("pseudowire {}: labels {}", p.name, p.push),
            None => "no pseudowire".into(),
        }
    }
}
