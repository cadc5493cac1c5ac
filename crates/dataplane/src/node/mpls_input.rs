//! mpls-input: label switching. Looks each labelled packet's top label up in the label table
//! ([`crate::mpls::LabelTable`]) and does what its entry says.
//!
//! Reads: `meta.l3_off` (the top label stack entry), `meta.rx_if` (it must take MPLS), the
//! label table, the pseudowires. Sets: the label stack (swap, push, pop), the TTL (one less; on
//! the last pop copied into the IP header in the uniform model, RFC 3443), the L2 header,
//! `meta.next_hop`, `meta.rx_if` and `meta.l3_off` of what it hands to IP, the label's and
//! pseudowire's counters. Next:
//! - swap or pop towards a neighbour (`LabelAction::Forward`, its next hop plain or labelled,
//!   as LDP's swaps are; ECMP by a hash of the labels and the IP addresses under them): the
//!   egress port's transmit vector, after the arrival interface's QoS classified the frame on
//!   its top label's EXP (a class's `set exp` is the outgoing top label's traffic class, else
//!   the incoming label's is kept; see [`crate::feature::labelled`]);
//! - pop and look up (`LabelAction::Lookup`: an L3VPN's label, or explicit null with no entry
//!   of its own): ip4-forward or ip6-forward, as if received on the VRF's MPLS interface (which
//!   chooses the table) with the core interface's input features (`meta.labelled_on`);
//! - a pseudowire's label (`LabelAction::Pseudowire`): the Ethernet frame under it (control
//!   word stripped, type 4's VLAN tag rewritten to the attachment circuit's; `meta.next_hop`
//!   the pseudowire) to the attachment circuit's port, after the core interface's input
//!   features ([`crate::feature::labelled`]).
//!
//! Dropped and counted: an interface without MPLS, an unknown label, an expired TTL (no ICMP
//! error is built from a labelled packet: RFC 4950 is not implemented), a truncated stack, a
//! VPN or pseudowire label not at the bottom of the stack, a payload that is not what the label
//! says, a packet larger than the egress MTU, a pseudowire that is down; and what the features
//! drop (policers, pseudowire frames' ACLs).

use super::{be16, mix, Ctx, VECTOR};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::feature::input::Fate;
use crate::feature::labelled::Side;
use crate::graph::{Edge, Node, NodeId, To};
use crate::mpls::{Entry, LabelAction, Mpls, TtlMode, VcType, EXPLICIT_NULL_V4, EXPLICIT_NULL_V6};
use crate::tables::Tables;

pub struct MplsInput;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// An IPv4 packet popped for a lookup in a VRF.
    Ip4,
    Ip6,
}

impl Edge for Next {
    const ALL: &'static [Self] = &[Next::Ip4, Next::Ip6];
    #[inline(always)]
    fn node(self) -> NodeId {
        match self {
            Next::Ip4 => NodeId::Ip4Forward,
            Next::Ip6 => NodeId::Ip6Forward,
        }
    }
}

impl Node for MplsInput {
    const NAME: &'static str = "mpls-input";
    type Next = Next;
    const TRANSMITS: bool = true;
    const DROPS: &'static [DropReason] = &[
        DropReason::MplsNotEnabled,
        DropReason::MplsUnknownLabel,
        DropReason::MplsTtlExpired,
        DropReason::MplsMalformed,
        DropReason::MplsTooBig,
        DropReason::PwDown,
    ];
    const CONSUMED: &'static str = "";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        let Some(m) = t.mpls.as_deref() else {
            for b in pkts.drain(..) {
                ctx.drop(b, DropReason::MplsNotEnabled);
            }
            return;
        };
        // The label entries of the whole vector are asked for first: at 3,072 pseudowires or a
        // large LFIB they are cache misses, and this way they overlap.
        let mut entry = [u32::MAX; VECTOR];
        for (i, b) in pkts.iter().enumerate() {
            let d = b.data();
            let l3 = b.meta().l3_off as usize;
            if d.len() >= l3 + 4 {
                let label = u32::from_be_bytes([d[l3], d[l3 + 1], d[l3 + 2], 0]) >> 12;
                entry[i] = m.labels.index_of(label);
                m.labels.prefetch(entry[i]);
            }
        }
        // Then what the pseudowire labels lead to: the pseudowire and its counters.
        let counters = m.pw_counters(ctx.worker);
        for &e in entry.iter().take(pkts.len()) {
            if let Some(LabelAction::Pseudowire { pw }) = m.labels.at(e) {
                m.prefetch_pw(pw);
                counters.prefetch(pw);
            }
        }
        // Labels swapped or popped towards a neighbour take the arrival interface's QoS (on
        // their EXP) first; the rest wait for what their label leads to.
        let mut fate = [Fate::Pass; VECTOR];
        if t.any_features {
            let n = pkts.len();
            for (f, &e) in fate.iter_mut().zip(&entry[..n]) {
                if !matches!(m.labels.at(e), Some(LabelAction::Forward { .. })) {
                    *f = Fate::Bypass;
                }
            }
            crate::feature::labelled::judge(ctx, t, m, Side::Transit, pkts, &mut fate[..n]);
        }
        // Where features are on, frames a pseudowire label hands to their circuits are
        // gathered: the core interface's input features see them together before they leave.
        let mut disposed = std::mem::take(&mut ctx.tmp);
        for (i, b) in pkts.drain(..).enumerate() {
            match fate[i] {
                Fate::Drop(why) => ctx.drop(b, why),
                _ => one(ctx, t, m, b, entry[i], &mut disposed),
            }
        }
        if !disposed.is_empty() {
            if t.any_features {
                crate::feature::labelled::run(ctx, t, m, Side::Disposition, &mut disposed);
            }
            for b in disposed.drain(..) {
                match m.pws.get(b.meta().next_hop as usize) {
                    Some(p) => ctx.tx(p.ac_port, b),
                    None => ctx.drop(b, DropReason::PwDown),
                }
            }
        }
        ctx.tmp = disposed;
    }

    fn trace(t: &Tables, b: &PktBuf, to: To) -> String {
        let what = match to {
            To::Node(NodeId::Ip4Forward) | To::Node(NodeId::Ip6Forward) => {
                let ifc = t.ifs.get(b.meta().rx_if as usize);
                format!(
                    "popped; looked up as from {}",
                    ifc.map_or("?", |i| i.name.as_str())
                )
            }
            To::Tx(p) => {
                let d = b.data();
                let l3 = b.meta().l3_off as usize;
                if be16(d, l3.saturating_sub(2)) == crate::mpls::ETHERTYPE_MPLS && d.len() >= l3 + 4
                {
                    let e = Entry::parse(&d[l3..]);
                    format!("out port {p} with label {} TTL {}", e.label, e.ttl)
                } else {
                    format!("out port {p}")
                }
            }
            _ => String::new(),
        };
        what
    }
}

#[inline(always)]
fn one(ctx: &mut Ctx, t: &Tables, m: &Mpls, mut b: PktBuf, index: u32, disposed: &mut Vec<PktBuf>) {
    if !m.enabled(b.meta().rx_if) {
        return ctx.drop(b, DropReason::MplsNotEnabled);
    }
    let l3 = b.meta().l3_off as usize;
    let len = b.len();
    if len < l3 + 4 {
        return ctx.drop(b, DropReason::MplsMalformed);
    }
    let e = Entry::parse(&b.data()[l3..]);
    let action = match m.labels.at(index) {
        Some(a) => {
            m.labels.count(ctx.worker, index, (len - l3) as u64);
            a
        }
        // Explicit null with no entry of its own: the packet under it is the receiving
        // interface's VRF's.
        None if e.bottom && matches!(e.label, EXPLICIT_NULL_V4 | EXPLICIT_NULL_V6) => {
            LabelAction::Lookup {
                ifx: b.meta().rx_if,
            }
        }
        None => return ctx.drop(b, DropReason::MplsUnknownLabel),
    };
    match action {
        LabelAction::Forward { nh, push } => {
            if e.ttl <= 1 {
                return ctx.drop(b, DropReason::MplsTtlExpired);
            }
            let (nh, a) = super::resolve(t, nh, || payload_hash(b.data(), l3));
            let (port, mtu, rw, push) = match a {
                super::Action::Transmit { port, mtu, rewrite } => (port, mtu, rewrite, push),
                // A labelled next hop (LDP's swap towards a peer: the peer's label is the next
                // hop's, one per ECMP member): its labels go on top of the entry's. Its MTU is
                // already less its labels, so only the entry's count below.
                super::Action::Push {
                    port,
                    mtu,
                    rewrite,
                    labels,
                    ..
                } => match labels.then(&push) {
                    Some(all) => (port, mtu + 4 * labels.len() as u16, rewrite, all),
                    None => return ctx.drop(b, DropReason::MplsMalformed),
                },
                super::Action::Drop(why) => return ctx.drop(b, why),
                // The neighbour's address is not resolved yet: the control plane asks for it
                // (it resolves labels' next hops ahead of traffic), and a labelled packet cannot
                // wait in the slow path without losing its stack.
                super::Action::Slow(super::Slow::Glean) => {
                    return ctx.drop(b, DropReason::NeighborUnresolved)
                }
                // A label's next hop is a neighbour: anything else is a control-plane bug.
                _ => return ctx.drop(b, DropReason::NoRoute),
            };
            b.meta_mut().next_hop = nh;
            let ttl = e.ttl - 1;
            // The class the arrival interface's QoS chose (`set exp`), else the label's own.
            let tc = match b.meta().exp {
                0 => e.tc,
                x => x - 1,
            };
            // What stays under the popped label, then what is pushed on it.
            let payload = len - l3 - 4;
            if payload + 4 * push.len() > mtu as usize {
                return ctx.drop(b, DropReason::MplsTooBig);
            }
            if push.is_empty() && e.bottom {
                // The last label popped (penultimate-hop popping): an IP packet goes on.
                let ip = l3 + 4;
                let et = match b.data()[ip..].first().map(|v| v >> 4) {
                    Some(4) if payload >= 20 => 0x0800,
                    Some(6) if payload >= 40 => 0x86dd,
                    _ => return ctx.drop(b, DropReason::MplsMalformed),
                };
                if m.ttl == TtlMode::Uniform {
                    set_ip_ttl(&mut b.data_mut()[ip..], ttl);
                }
                b.meta_mut().l3_off = ip as u16;
                if !super::rewrite_l2(&mut b, rw) {
                    return ctx.drop(b, DropReason::NoBuffer);
                }
                let n = rw.len as usize;
                b.data_mut()[n - 2..n].copy_from_slice(&u16::to_be_bytes(et));
            } else {
                if push.is_empty() {
                    let d = b.data_mut();
                    if m.ttl == TtlMode::Uniform {
                        // Popped down to the label under it, which now carries the LSP's TTL.
                        d[l3 + 7] = d[l3 + 7].min(ttl);
                    }
                    if tc != e.tc {
                        // ... and QoS's traffic class, as the new top label.
                        d[l3 + 6] = d[l3 + 6] & 0xf1 | tc << 1;
                    }
                }
                b.meta_mut().l3_off = (l3 + 4) as u16;
                // Over a deeper stack, the labels left under the new ones keep their TTLs
                // (RFC 3443: in the uniform model the top entry carries the LSP's TTL).
                if !super::push_labels(&mut b, rw, &push, tc, ttl, e.bottom) {
                    return ctx.drop(b, DropReason::NoBuffer);
                }
            }
            ctx.tx(port, b);
        }
        LabelAction::Lookup { ifx } => {
            if !e.bottom {
                return ctx.drop(b, DropReason::MplsMalformed);
            }
            let ip = l3 + 4;
            let next = match b.data()[ip..].first().map(|v| v >> 4) {
                Some(4) => Next::Ip4,
                Some(6) => Next::Ip6,
                _ => return ctx.drop(b, DropReason::MplsMalformed),
            };
            if m.ttl == TtlMode::Uniform {
                // The forwarding node decrements it once more: this router's hop.
                set_ip_ttl(&mut b.data_mut()[ip..], e.ttl);
            }
            let meta = b.meta_mut();
            meta.labelled_on = meta.rx_if + 1;
            meta.l3_off = ip as u16;
            meta.rx_if = ifx;
            if t.any_features {
                // The label goes: the frame reads as the IP frame it carried, received on the
                // core interface (its L2 header moved up to the IP header, EtherType IP), so
                // the input features classify it as they would an unlabelled one. (Without
                // features nothing reads the L2 header again before it is rewritten.)
                let et: u16 = if next == Next::Ip4 { 0x0800 } else { 0x86dd };
                let d = b.data_mut();
                d.copy_within(..l3, 4);
                d[l3 + 2..l3 + 4].copy_from_slice(&et.to_be_bytes());
                b.pull_front(4);
                b.meta_mut().l3_off = l3 as u16;
            }
            ctx.to(next, b);
        }
        LabelAction::Pseudowire { pw } => {
            let Some(p) = m.pws.get(pw as usize) else {
                return ctx.drop(b, DropReason::PwDown);
            };
            if !e.bottom {
                return ctx.drop(b, DropReason::MplsMalformed);
            }
            if !p.up {
                return ctx.drop(b, DropReason::PwDown);
            }
            let mut off = l3 + 4;
            if p.control_word {
                // RFC 4385: the first nibble is 0 (1 would be the associated channel).
                if len < off + 4 || b.data()[off] >> 4 != 0 {
                    return ctx.drop(b, DropReason::MplsMalformed);
                }
                off += 4;
            }
            if len < off + 14 {
                return ctx.drop(b, DropReason::MplsMalformed);
            }
            let tagged = be16(b.data(), off + 12) == 0x8100;
            let l2 = if tagged { 18 } else { 14 };
            if len - off - l2 > p.mtu as usize {
                return ctx.drop(b, DropReason::MplsTooBig);
            }
            b.pull_front(off);
            match (p.vc_type, p.ac_vlan) {
                // Tagged mode: the tag delimits the service; it leaves with the attachment
                // circuit's VLAN id (its priority kept).
                (VcType::Vlan, Some(vid)) => {
                    if !tagged || len - off < 18 {
                        return ctx.drop(b, DropReason::MplsMalformed);
                    }
                    let d = b.data_mut();
                    let tci = be16(d, 14) & 0xf000 | vid;
                    d[14..16].copy_from_slice(&tci.to_be_bytes());
                }
                // Raw mode onto a VLAN: the attachment circuit's tag goes on.
                (VcType::Ethernet, Some(vid)) => {
                    if !b.push_front(4) {
                        return ctx.drop(b, DropReason::NoBuffer);
                    }
                    let d = b.data_mut();
                    d.copy_within(4..16, 0);
                    d[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
                    d[14..16].copy_from_slice(&vid.to_be_bytes());
                }
                _ => {}
            }
            // The Ethernet header's end (the features find the packet past any tags).
            let meta = b.meta_mut();
            meta.l3_off = 14;
            meta.next_hop = pw;
            let bytes = b.len() as u64;
            m.pw_counters(ctx.worker)
                .add(pw, crate::mpls::PW_RX_PACKETS, 1, bytes);
            if t.any_features {
                disposed.push(b);
            } else {
                ctx.tx(p.ac_port, b);
            }
        }
    }
}

/// The TTL of labels pushed on an IP packet whose TTL (already decremented) is `ip_ttl`.
#[inline(always)]
pub fn push_ttl(t: &Tables, ip_ttl: u8) -> u8 {
    match t.mpls.as_deref().map(|m| m.ttl) {
        Some(TtlMode::Pipe) => 255,
        _ => ip_ttl,
    }
}

/// Writes `ttl` into the IPv4 (checksum updated) or IPv6 header at the start of `h`, if lower
/// than the one there (RFC 3443: the smaller of the two).
#[inline(always)]
fn set_ip_ttl(h: &mut [u8], ttl: u8) {
    if h[0] >> 4 == 4 && h.len() >= 20 {
        if ttl < h[8] {
            let old = u16::from_be_bytes([h[8], h[9]]);
            h[8] = ttl;
            let new = u16::from_be_bytes([h[8], h[9]]);
            let c = packet::checksum::update16(be16(h, 10), old, new);
            h[10..12].copy_from_slice(&c.to_be_bytes());
        }
    } else if h.len() >= 40 && ttl < h[7] {
        h[7] = ttl;
    }
}

/// The hash ECMP over labelled paths uses: the labels of the stack and, under the bottom one,
/// the IP addresses (so a VPN's flows spread, as the payload's own hash would).
#[inline]
pub fn payload_hash(d: &[u8], l3: usize) -> u32 {
    let mut labels = 0u64;
    let mut at = l3;
    let mut ip = None;
    for _ in 0..crate::mpls::MAX_LABELS {
        if d.len() < at + 4 {
            break;
        }
        let e = Entry::parse(&d[at..]);
        labels = labels.rotate_left(20) ^ u64::from(e.label);
        at += 4;
        if e.bottom {
            ip = Some(at);
            break;
        }
    }
    let addrs = match ip.and_then(|i| d.get(i..)) {
        Some(h) if h.len() >= 20 && h[0] >> 4 == 4 => {
            u64::from(super::be32(h, 12)) << 32 | u64::from(super::be32(h, 16))
        }
        Some(h) if h.len() >= 40 && h[0] >> 4 == 6 => {
            u64::from(super::be32(h, 20)) << 32 | u64::from(super::be32(h, 36))
        }
        _ => 0,
    };
    let x = mix(labels, addrs);
    (x >> 32) as u32 ^ x as u32
}

#[cfg(test)]
mod tests {
    use crate::counters::DropReason;
    use crate::graph::harness::{ip4, mpls, Harness, MAC1, PEER1};
    use crate::graph::{NodeId, To};
    use crate::mpls::Entry;

    /// The IPv4 packet (no Ethernet header) of a harness frame.
    fn packet(ttl: u8) -> Vec<u8> {
        ip4([10, 0, 0, 2], [10, 1, 0, 5], ttl)[14..].to_vec()
    }

    #[test]
    fn swaps_pops_and_pushes_with_the_ttl_one_less() {
        let mut h = Harness::with_mpls();
        let p = packet(64);
        let out = h.push(
            NodeId::MplsInput,
            0,
            &[
                mpls(&[(100, 64)], &p),
                mpls(&[(101, 10)], &p),
                mpls(&[(103, 64)], &p),
                mpls(&[(100, 9), (555, 1)], &p),
                mpls(&[(101, 9), (555, 64)], &p),
            ],
        );
        let sent = &out.to["tx 1"];
        assert_eq!(sent.len(), 5);
        for b in sent {
            let d = b.data();
            assert_eq!((&d[..6], &d[6..12]), (&PEER1[..], &MAC1[..]));
        }
        // Swap: 100 -> 200, TTL 63, still the bottom.
        let d = sent[0].data();
        assert_eq!(u16::from_be_bytes([d[12], d[13]]), 0x8847);
        let e = Entry::parse(&d[14..]);
        assert_eq!((e.label, e.ttl, e.bottom), (200, 63, true));
        assert_eq!(&d[18..], &p[..]);
        // Penultimate-hop pop: IPv4 with the label's TTL less one (9 < 64), checksum right.
        let d = sent[1].data();
        assert_eq!(u16::from_be_bytes([d[12], d[13]]), 0x0800);
        assert_eq!(d[14 + 8], 9);
        assert!(packet::checksum::ipv4_header_ok(&d[14..34]));
        // Swap and push: 200 over 300, the bottom bit on 300.
        let d = sent[2].data();
        let (a, b) = (Entry::parse(&d[14..]), Entry::parse(&d[18..]));
        assert_eq!(
            (a.label, a.bottom, b.label, b.bottom),
            (200, false, 300, true)
        );
        assert_eq!((a.ttl, b.ttl), (63, 63));
        assert_eq!(&d[22..], &p[..]);
        // A label over another: swapped, the one under it untouched.
        let d = sent[3].data();
        let (a, b) = (Entry::parse(&d[14..]), Entry::parse(&d[18..]));
        assert_eq!((a.label, a.ttl, a.bottom), (200, 8, false));
        assert_eq!((b.label, b.ttl, b.bottom), (555, 1, true));
        // Popped down to a label: it takes the outgoing TTL.
        let d = sent[4].data();
        let e = Entry::parse(&d[14..]);
        assert_eq!(u16::from_be_bytes([d[12], d[13]]), 0x8847);
        assert_eq!((e.label, e.ttl, e.bottom), (555, 8, true));
        assert_eq!(&d[18..], &p[..]);
        let line = h.trace(NodeId::MplsInput, &sent[0], To::Tx(1));
        assert_eq!(line, "out port 1 with label 200 TTL 63");
        let counted = h.t.mpls.as_ref().unwrap().labels.entries();
        assert_eq!((counted[0].0, counted[0].2), (100, 2));
    }

    #[test]
    fn pops_into_the_vrf_and_honours_explicit_null() {
        let mut h = Harness::with_mpls();
        let p = packet(64);
        let out = h.push(
            NodeId::MplsInput,
            1,
            &[mpls(&[(102, 30)], &p), mpls(&[(0, 64)], &p)],
        );
        let up = &out.to["ip4-forward"];
        assert_eq!(up.len(), 2);
        // Uniform TTL: the label's 30 replaces the IP 64; ip4-forward takes one off.
        assert_eq!((up[0].meta().l3_off, up[0].meta().rx_if), (18, 0));
        assert_eq!(up[0].data()[18 + 8], 30);
        assert!(packet::checksum::ipv4_header_ok(&up[0].data()[18..38]));
        // It takes the input features of the interface it came in by.
        assert_eq!((up[0].meta().labelled_on, up[0].meta().arc_if()), (2, 1));
        assert_eq!(
            up[1].meta().rx_if,
            1,
            "explicit null: the receiving interface's VRF"
        );
        assert_eq!(up[1].data()[18 + 8], 64);
    }

    #[test]
    fn bad_labelled_packets_are_counted_by_reason() {
        let mut h = Harness::with_mpls();
        let p = packet(64);
        let mut no_mpls = h.buf(&mpls(&[(100, 64)], &p));
        no_mpls.meta_mut().rx_if = 2;
        no_mpls.meta_mut().l3_off = 14;
        let out = h.run_bufs(NodeId::MplsInput, vec![no_mpls]);
        assert_eq!(out.dropped(DropReason::MplsNotEnabled), 1);
        let mut truncated = mpls(&[(100, 64)], &[]);
        truncated.truncate(16);
        let out = h.push(
            NodeId::MplsInput,
            0,
            &[
                mpls(&[(4000, 64)], &p),
                mpls(&[(100, 1)], &p),
                truncated,
                mpls(&[(102, 64), (16, 64)], &p),
                mpls(&[(101, 64)], &[0x99; 30]),
                mpls(&[(1000, 64), (16, 64)], &p),
            ],
        );
        assert_eq!(out.dropped(DropReason::MplsUnknownLabel), 1);
        assert_eq!(out.dropped(DropReason::MplsTtlExpired), 1);
        assert_eq!(
            out.dropped(DropReason::MplsMalformed),
            4,
            "truncated, VPN or PW label not at the bottom, not IP under the last label"
        );
        // The egress MTU counts the labels.
        let mut big = ip4([10, 0, 0, 2], [10, 1, 0, 5], 64)[14..].to_vec();
        big.resize(1500, 0);
        let out = h.push(NodeId::MplsInput, 0, &[mpls(&[(103, 64)], &big)]);
        assert_eq!(out.dropped(DropReason::MplsTooBig), 1);
    }

    #[test]
    fn a_pseudowire_label_hands_the_frame_to_its_attachment_circuit() {
        let mut h = Harness::with_mpls();
        // The far end's frame: tagged with its own VLAN 555, priority 5.
        let mut frame = vec![
            2, 0, 0, 0, 0xaa, 1, 2, 0, 0, 0, 0xbb, 2, 0x81, 0, 0xa2, 0x2b,
        ];
        frame.extend_from_slice(&0x0800u16.to_be_bytes());
        frame.extend_from_slice(&packet(64));
        let mut payload = vec![0, 0, 0, 0];
        payload.extend_from_slice(&frame);
        let out = h.push(
            NodeId::MplsInput,
            0,
            &[
                mpls(&[(1000, 2)], &payload),
                mpls(&[(1000, 2)], &[1, 0, 0, 0]),
            ],
        );
        let d = out.to["tx 1"][0].data();
        assert_eq!(&d[..12], &frame[..12]);
        assert_eq!(
            u16::from_be_bytes([d[14], d[15]]),
            0xa000 | 100,
            "VLAN 100, PCP 5"
        );
        assert_eq!(&d[16..], &frame[16..]);
        assert_eq!(
            out.dropped(DropReason::MplsMalformed),
            1,
            "not a control word"
        );
        let m = h.t.mpls.as_ref().unwrap();
        assert_eq!(m.read_pw(0)[2..], [1, frame.len() as u64]);
    }

    #[test]
    fn attachment_circuit_frames_go_over_their_pseudowire() {
        let mut h = Harness::with_mpls();
        let mut frame = vec![2, 0, 0, 0, 0xbb, 2, 2, 0, 0, 0, 0xaa, 1, 0x81, 0, 0x60, 100];
        frame.extend_from_slice(&0x0800u16.to_be_bytes());
        frame.extend_from_slice(&packet(64));
        let out = h.push(NodeId::EthernetInput, 1, &[frame.clone()]);
        let to_pw = out.to["pw-encap"].iter().map(|b| h.buf(b.data())).count();
        assert_eq!(
            to_pw, 1,
            "any destination MAC: an attachment circuit is not an L3 port"
        );
        let mut b = h.buf(&frame);
        b.meta_mut().rx_if = 2;
        b.meta_mut().l3_off = 18;
        let out = h.run_bufs(NodeId::PwEncap, vec![b]);
        let d = out.to["tx 0"][0].data();
        assert_eq!(u16::from_be_bytes([d[12], d[13]]), 0x8847);
        let (t, p) = (Entry::parse(&d[14..]), Entry::parse(&d[18..]));
        assert_eq!((t.label, t.bottom, t.ttl, t.tc), (300, false, 255, 3));
        assert_eq!((p.label, p.bottom), (2000, true));
        assert_eq!(&d[22..26], &[0; 4], "control word");
        assert_eq!(
            &d[26..],
            &frame[..],
            "the frame whole, tag and all (type 4)"
        );
        let m = h.t.mpls.as_ref().unwrap();
        assert_eq!(m.read_pw(0)[..2], [1, frame.len() as u64]);
    }

    #[test]
    fn a_labelled_route_pushes_its_labels_with_the_ip_ttl() {
        let mut h = Harness::with_mpls();
        let out = h.push(
            NodeId::Ip4Forward,
            0,
            &[ip4([10, 0, 0, 2], [10, 9, 1, 1], 64)],
        );
        let d = out.to["tx 1"][0].data();
        assert_eq!(u16::from_be_bytes([d[12], d[13]]), 0x8847);
        let (a, b) = (Entry::parse(&d[14..]), Entry::parse(&d[18..]));
        assert_eq!((a.label, a.bottom, a.ttl), (16, false, 63));
        assert_eq!((b.label, b.bottom, b.ttl), (17, true, 63));
        assert_eq!(d[22 + 8], 63, "the IP TTL decremented");
        assert!(packet::checksum::ipv4_header_ok(&d[22..42]));
    }
}
