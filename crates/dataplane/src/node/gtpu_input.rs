//! gtpu-input: the GGSN's uplink. Takes what the lookup sent to the GGSN's GTP-U address
//! (`NextHop::GtpuLocal`), decapsulates G-PDUs (TS 29.281) and hands the UE's packet to be
//! routed on the Gi side, in its APN's VRF.
//!
//! Reads: `meta.l3_off` (the outer IPv4 header, checked by ip4-forward), the UDP and GTP-U
//! headers, the context table ([`crate::gtp::GtpTable::uplink`], by TEID). Sets: `meta.l3_off`
//! (the inner packet), `meta.rx_if` (the APN's interface, so the inner packet is looked up in
//! its VRF and answered from it), the context's uplink counters. Next: ip4-forward or
//! ip6-forward (a back edge: run on the driver's next pass); the slow path for whatever else is
//! addressed to that address (not UDP to 2152: delivered locally); the punt path, class
//! `gtp-u`, for GTP-U signalling (Echo, Error Indication, End Marker, Supported Extension
//! Headers) and G-PDUs for unknown TEIDs, which the GTP service answers with an Error
//! Indication. Dropped and counted: malformed GTP-U and fragments of it (reassembly is not
//! done), a source that is not the context's address, a payload that is not IP of the
//! context's type.

use packet::gtp::{msg::G_PDU, GTPU_PORT};

use super::{be16, be32, Ctx, Slow, VECTOR};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{Edge, Node, NodeId, To};
use crate::punt::PuntClass;
use crate::tables::{Tables, NO_IF};

pub struct GtpuInput;

/// Where gtpu-input hands a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GtpuInputNext {
    Ip4,
    Ip6,
    SlowPath,
}

impl Edge for GtpuInputNext {
    const ALL: &'static [Self] = &[Self::Ip4, Self::Ip6, Self::SlowPath];
    fn node(self) -> NodeId {
        match self {
            Self::Ip4 => NodeId::Ip4Forward,
            Self::Ip6 => NodeId::Ip6Forward,
            Self::SlowPath => NodeId::SlowPath,
        }
    }
}

/// Outer IPv4 (no options: ip4-forward sent those to the slow path), UDP, GTP-U.
const UDP_OFF: usize = 20;
const GTP_OFF: usize = 28;

impl Node for GtpuInput {
    const NAME: &'static str = "gtpu-input";
    type Next = GtpuInputNext;
    const TRANSMITS: bool = false;
    const LOOPS_BACK: bool = true;
    const DROPS: &'static [DropReason] = &[
        DropReason::GtpuMalformed,
        DropReason::GtpuUnknownTeid,
        DropReason::GtpuSpoofed,
        DropReason::GtpuBadInner,
    ];
    const CONSUMED: &'static str = "handed to the GTP service (signalling, unknown TEID)";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        let Some(g) = t.gtpu.as_deref() else {
            // The GGSN was removed under these packets: they are the router's own traffic.
            for b in pkts.drain(..) {
                ctx.slow(b, Slow::Local);
            }
            return;
        };
        // Each packet's context slot and counters are a cache miss each (at a million
        // contexts, DRAM): while packet i is decapsulated, packet i + D's are asked for, so
        // the misses overlap without more lines asked for than the core has in flight.
        const D: usize = 8;
        let counters = g.table.counters(ctx.worker);
        let mut teids = [0u32; VECTOR];
        for (t, b) in teids.iter_mut().zip(pkts.iter()) {
            *t = teid_of(b).unwrap_or(0);
        }
        let ask = |teid: u32| {
            g.table.prefetch_teid(teid);
            counters.prefetch(g.table.slot_of(teid));
        };
        let n = pkts.len();
        for &t in teids.iter().take(n.min(D)) {
            ask(t);
        }
        let mut to4 = ctx.frames.take(GtpuInputNext::Ip4);
        let mut to6 = ctx.frames.take(GtpuInputNext::Ip6);
        for (i, mut b) in pkts.drain(..).enumerate() {
            if i + D < n {
                ask(teids[i + D]);
            }
            let l3 = b.meta().l3_off as usize;
            let d = &b.data()[l3..];
            // ip4-forward checked the header and that the total length is within the frame.
            let total = be16(d, 2) as usize;
            if d[9] != 17 || total < GTP_OFF + 8 || be16(d, UDP_OFF + 2) != GTPU_PORT {
                ctx.slow(b, Slow::Local);
                continue;
            }
            if be16(d, 6) & 0x3fff != 0 {
                // A fragment: its UDP header may be elsewhere, and it is not reassembled here.
                ctx.drop(b, DropReason::GtpuMalformed);
                continue;
            }
            // The UDP datagram within the IP packet, and the GTP-U message within it (the
            // packet crate's parser: version, length, the extension header chain).
            let udp_len = be16(d, UDP_OFF + 4) as usize;
            let h = match (udp_len >= 16 && UDP_OFF + udp_len <= total)
                .then(|| packet::gtp::parse_header(&d[GTP_OFF..UDP_OFF + udp_len]))
            {
                Some(Ok(h)) => h,
                _ => {
                    ctx.drop(b, DropReason::GtpuMalformed);
                    continue;
                }
            };
            if h.msg_type != G_PDU {
                ctx.punt(b, PuntClass::GtpU, NO_IF);
                continue;
            }
            let (inner, end) = (GTP_OFF + h.header_len, GTP_OFF + h.end());
            let teid = h.teid;
            let Some(up) = g.table.uplink(teid) else {
                if ctx.punt.is_some() {
                    ctx.punt(b, PuntClass::GtpU, NO_IF);
                } else {
                    ctx.drop(b, DropReason::GtpuUnknownTeid);
                }
                continue;
            };
            let p = &d[inner..end];
            let v6 = match p.first().map(|v| v >> 4) {
                Some(4) if p.len() >= 20 => false,
                Some(6) if p.len() >= 40 => true,
                _ => {
                    ctx.drop(b, DropReason::GtpuBadInner);
                    continue;
                }
            };
            let ok = if v6 {
                let src = u64::from_be_bytes(p[8..16].try_into().expect("8 bytes"));
                up.ue_v6.map(|u| u == src)
            } else {
                up.ue_v4.map(|u| u == be32(p, 12))
            };
            match ok {
                Some(true) => {}
                Some(false) => {
                    ctx.drop(b, DropReason::GtpuSpoofed);
                    continue;
                }
                None => {
                    ctx.drop(b, DropReason::GtpuBadInner);
                    continue;
                }
            }
            let Some(apn) = g.apns.get(up.apn as usize) else {
                ctx.drop(b, DropReason::GtpuBadInner);
                continue;
            };
            counters.add(up.slot, crate::gtp::UP_PACKETS, 1, p.len() as u64);
            // The outer bytes behind the inner packet stay in the buffer: the rewrite in
            // front of the inner header replaces them. What follows the G-PDU (padding) is cut.
            let keep = l3 + end;
            b.set_len(keep);
            let m = b.meta_mut();
            m.l3_off = (l3 + inner) as u16;
            m.rx_if = apn.ifx;
            if v6 {
                to6.push(b);
            } else {
                to4.push(b);
            }
        }
        ctx.frames.put(GtpuInputNext::Ip4, to4);
        ctx.frames.put(GtpuInputNext::Ip6, to6);
    }

    fn trace(t: &Tables, b: &PktBuf, to: To) -> String {
        match to {
            To::Node(NodeId::SlowPath) => "not GTP-U: addressed to the router".into(),
            _ => {
                let apn = t
                    .ifs
                    .get(b.meta().rx_if as usize)
                    .map_or("?", |i| i.name.as_str());
                format!("decapsulated, routed from {apn}")
            }
        }
    }
}

/// The TEID of a frame that looks like a G-PDU to us (for prefetching only: not checked).
#[inline(always)]
fn teid_of(b: &PktBuf) -> Option<u32> {
    let d = b.data().get(b.meta().l3_off as usize..)?;
    (d.len() >= GTP_OFF + 8).then(|| be32(d, GTP_OFF + 4))
}

#[cfg(test)]
mod tests;
