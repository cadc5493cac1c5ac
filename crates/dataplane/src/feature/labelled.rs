//! The features of labelled traffic that is not routed here: pseudowire frames, and labels
//! swapped in transit. A frame on a pseudowire is not routed, but the IP packet it carries is
//! what an operator's lists are written for (the seed's ME-3 ran EoMPLS with its 10,000-line
//! ACL, its QoS list and NetFlow on), so such frames take an input arc on that packet, as an
//! L3VPN's packets do; a transit LSR classifies on the top label's EXP:
//!
//! - imposition (pw-encap, before the frame goes on its pseudowire): the attachment circuit's
//!   input arc; the flow record names the core interface the pseudowire leaves by as output,
//!   and QoS's `set exp` becomes the pseudowire's labels' traffic class;
//! - disposition (mpls-input, a frame a pseudowire label handed to its circuit): the input arc
//!   of the core interface the labelled frame came in by, as for a packet a VPN label popped
//!   into a VRF; the flow record names the attachment circuit as output;
//! - transit (mpls-input, a label swapped or popped towards a neighbour): the arrival
//!   interface's QoS in, on the frame's L2 header and its top label's EXP (`match: ["exp 3"]`;
//!   no IP field is read), its `set exp` the outgoing top label's traffic class. An ACL does not
//!   see labelled frames, nor are they accounted as flows (a NetFlow record has no label).
//!
//! Reads: `meta.rx_if` (whose arc; for imposition also its pseudowire, for the record's output
//! interface), `meta.next_hop` on disposition (the pseudowire), the frame's headers (tags and
//! all: the key reads past them; `meta.l3_off` is the IP header, or the top label in transit).
//! Sets: what the QoS classes set (DSCP and PCP in the frame, `meta.exp`). Drops: ACL deny,
//! policers. A pseudowire frame that carries no IP packet (ARP, or any other EtherType a
//! customer sends) is left alone by the IP lists and not accounted. uRPF is not asked: a
//! customer's addresses are not in this router's tables. Output arcs are not taken: imposed
//! frames leave labelled, where an IP list does not look, and disposed ones leave by a circuit
//! that is not routed.

use super::input::{apply_acl, apply_qos, extract_keys, remove_dropped, Fate};
use super::{past_tags, Step};
use crate::buffer::PktBuf;
use crate::mpls::Mpls;
use crate::node::{Ctx, VECTOR};
use crate::tables::Tables;

/// Which way the frames cross the router.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// From an attachment circuit onto its pseudowire.
    Imposition,
    /// From the core to the attachment circuit (`meta.next_hop`: the pseudowire).
    Disposition,
    /// A label swapped or popped towards a neighbour.
    Transit,
}

/// Runs each frame's arc over `pkts` (at most a vector) and removes the frames it drops,
/// keeping the order of the rest.
pub fn run(ctx: &mut Ctx, t: &Tables, m: &Mpls, side: Side, pkts: &mut Vec<PktBuf>) {
    let n = pkts.len().min(VECTOR);
    let mut fate = [Fate::Pass; VECTOR];
    if judge(ctx, t, m, side, &mut pkts[..n], &mut fate[..n]) {
        remove_dropped(ctx, pkts, &mut fate[..n], |_, _| {});
    }
}

/// Runs each frame's arc over `pkts`, writing into `fate` what becomes of each; frames whose
/// fate is already `Bypass` are left alone. True if any frame is to be dropped.
pub(crate) fn judge(
    ctx: &mut Ctx,
    t: &Tables,
    m: &Mpls,
    side: Side,
    pkts: &mut [PktBuf],
    fate: &mut [Fate],
) -> bool {
    let n = pkts.len();
    let mut a = 0;
    while a < n {
        let rx_if = pkts[a].meta().rx_if;
        let mut b = a + 1;
        while b < n && pkts[b].meta().rx_if == rx_if {
            b += 1;
        }
        if let Some(f) = t.features.get(rx_if as usize).and_then(|f| f.as_deref()) {
            run_interface(ctx, t, m, side, f, &mut pkts[a..b], &mut fate[a..b], rx_if);
        }
        a = b;
    }
    fate.iter().any(|f| matches!(f, Fate::Drop(_)))
}

#[allow(clippy::too_many_arguments)]
fn run_interface(
    ctx: &mut Ctx,
    t: &Tables,
    m: &Mpls,
    side: Side,
    f: &super::IfFeatures,
    pkts: &mut [PktBuf],
    fate: &mut [Fate],
    rx_if: u32,
) {
    if side == Side::Transit && !f.input.iter().any(|s| matches!(s, Step::Qos(_))) {
        return;
    }
    let mut keyed = false;
    let mut keys = std::mem::take(&mut ctx.fkeys);
    extract_keys(&mut keys, pkts, &mut keyed);
    if side != Side::Transit {
        for ((k, fate), p) in keys.iter().zip(fate.iter_mut()).zip(pkts.iter_mut()) {
            let et = k.get(classify::Dim::EtherType);
            if et != classify::rule::ETHERTYPE_IPV4 && et != classify::rule::ETHERTYPE_IPV6 {
                *fate = Fate::Bypass;
            } else {
                // The key read the packet past every tag (a customer's own inside the
                // circuit's too): QoS re-marks it there.
                let l3 = past_tags(p.data());
                p.meta_mut().l3_off = l3;
            }
        }
    }
    for step in f.input.iter() {
        match step {
            Step::Acl(acl) if side != Side::Transit => {
                apply_acl(ctx, acl, pkts, &keys, fate, rx_if, true)
            }
            Step::Qos(q) => apply_qos(ctx, q, pkts, &mut keys, fate),
            // See the module's comment.
            Step::Acl(_) | Step::Urpf(_) | Step::Flow => {}
        }
    }
    if f.flow_in && ctx.flows.is_some() {
        account_in(ctx, t, m, side, pkts, &keys, fate, rx_if);
    }
    ctx.fkeys = keys;
}

/// Ingress flow accounting of a run from `rx_if` (an attachment circuit's frames going onto
/// their pseudowire, or a pseudowire's handed to their circuit).
#[allow(clippy::too_many_arguments)]
fn account_in(
    ctx: &mut Ctx,
    t: &Tables,
    m: &Mpls,
    side: Side,
    pkts: &mut [PktBuf],
    keys: &[classify::Key],
    fate: &[Fate],
    rx_if: u32,
) {
    match side {
        Side::Imposition => {
            // One circuit, one pseudowire: one output interface for the run.
            let tx_if = m
                .xconnect(rx_if)
                .and_then(|pw| m.pws.get(pw as usize))
                .map_or(crate::tables::NO_IF, |p| {
                    super::output::tx_if_of(t, crate::node::resolve(t, p.nh, || 0).0).0
                });
            super::output::account(ctx, t, pkts, keys, fate, |_| tx_if, false);
        }
        Side::Disposition => {
            let ac = |p: &PktBuf| {
                m.pws
                    .get(p.meta().next_hop as usize)
                    .map_or(crate::tables::NO_IF, |pw| pw.ac_if)
            };
            super::output::account(ctx, t, pkts, keys, fate, ac, false);
        }
        Side::Transit => {}
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::counters::DropReason;
    use crate::feature::{IfFeatures, Step};
    use crate::graph::harness::{deny_dns, ip4, mark_all, mpls, Harness};
    use crate::graph::NodeId;
    use crate::mpls::Entry;

    /// A frame on `pw0`'s attachment circuit (eth1.100, VLAN 100 with PCP 3) carrying
    /// `payload` (an EtherType and what follows).
    fn on_circuit(h: &mut Harness, et: u16, payload: &[u8]) -> crate::buffer::PktBuf {
        let mut f = vec![2, 0, 0, 0, 0xbb, 2, 2, 0, 0, 0, 0xaa, 1, 0x81, 0, 0x60, 100];
        f.extend_from_slice(&et.to_be_bytes());
        f.extend_from_slice(payload);
        let mut b = h.buf(&f);
        b.meta_mut().rx_if = 2;
        b.meta_mut().l3_off = 18;
        b
    }

    /// The harness with MPLS, interface `ifx` given an ACL denying DNS, a QoS class marking
    /// everything DSCP 46 and EXP 5, strict uRPF and `flow: in`, and a flow cache; the ACL's
    /// counters, a DNS packet and a web packet (IPv4 headers on).
    fn with_services(ifx: usize) -> (Harness, Arc<crate::feature::AclCounters>, Vec<u8>, Vec<u8>) {
        let mut h = Harness::with_mpls();
        let (acl, hits) = deny_dns();
        let input = vec![
            Step::Acl(Arc::new(acl)),
            Step::Qos(Arc::new(mark_all(Some(46), Some(5)))),
            Step::Urpf(crate::feature::Urpf::Strict),
            Step::Flow,
        ];
        let mut all: Vec<_> = (0..h.t.ifs.len()).map(|_| None).collect();
        all[ifx] = Some(Arc::new(IfFeatures::new(input, vec![]).unwrap()));
        h.t.features = all.into_boxed_slice();
        h.t.any_features = true;
        h.add_flows();
        let dns = ip4([10, 0, 0, 2], [10, 1, 0, 5], 64)[14..].to_vec();
        let mut web = dns.clone();
        web[20 + 3] = 80;
        (h, hits, dns, web)
    }

    fn flushed(h: &mut Harness) -> Vec<flow::FlowRecord> {
        let mut recs = Vec::new();
        let fl = h.ctx.flows.as_mut().unwrap();
        fl.cache.flush(1, &mut |r| recs.push(r));
        recs
    }

    #[test]
    fn frames_from_the_core_take_the_core_interfaces_arc_on_their_way_to_the_circuit() {
        // pw0's frames come in on eth0 (interface 0) and leave by eth1.100 (interface 2).
        let (mut h, hits, dns, web) = with_services(0);
        let frame = |ip: &[u8]| {
            let mut f = vec![
                2, 0, 0, 0, 0xaa, 1, 2, 0, 0, 0, 0xbb, 2, 0x81, 0, 0x00, 0x2b,
            ];
            f.extend_from_slice(&0x0800u16.to_be_bytes());
            f.extend_from_slice(ip);
            let mut cw = vec![0, 0, 0, 0];
            cw.extend_from_slice(&f);
            mpls(&[(1000, 2)], &cw)
        };
        let out = h.push(NodeId::MplsInput, 0, &[frame(&dns), frame(&web)]);
        assert_eq!(out.dropped(DropReason::AclDenied), 1, "the DNS packet");
        assert_eq!((hits.get(0), hits.get(1)), (1, 1));
        let sent = &out.to["tx 1"];
        assert_eq!(sent.len(), 1);
        let d = sent[0].data();
        assert_eq!(be16(d, 14) & 0x0fff, 100, "onto the circuit's VLAN");
        assert_eq!(
            (d[18 + 1] >> 2, d[18 + 23]),
            (46, 80),
            "re-marked, the web packet"
        );
        assert!(packet::checksum::ipv4_header_ok(&d[18..38]));
        let recs = flushed(&mut h);
        assert_eq!(recs.len(), 1, "{recs:?}");
        let r = &recs[0];
        assert_eq!((r.key.in_if, r.out_if, r.key.dst_port), (0, 2, 80));
    }

    /// A QoS policy whose one class matches labelled frames with EXP `exp` and sets EXP `to`.
    fn exp_class(exp: u32, to: u8) -> crate::feature::Qos {
        let mut q = mark_all(None, Some(to));
        let rule = classify::Rule::any()
            .exact(classify::Dim::EtherType, 0x8847)
            .exact(classify::Dim::Exp, exp);
        q.classifier = Arc::new(classify::Classifier::compile(&[rule]));
        q
    }

    #[test]
    fn a_transit_label_is_classified_on_its_exp_and_leaves_with_the_class_exp() {
        let mut h = Harness::with_mpls();
        let (acl, hits) = deny_dns();
        let q = Arc::new(exp_class(5, 2));
        let input = vec![Step::Acl(Arc::new(acl)), Step::Qos(q.clone()), Step::Flow];
        let mut all: Vec<_> = (0..h.t.ifs.len()).map(|_| None).collect();
        all[0] = Some(Arc::new(IfFeatures::new(input, vec![]).unwrap()));
        h.t.features = all.into_boxed_slice();
        h.t.any_features = true;
        let dns = ip4([10, 0, 0, 2], [10, 1, 0, 5], 64)[14..].to_vec();
        // Sets the traffic class of stack entry `j` of a frame `mpls` made.
        let tc = |mut f: Vec<u8>, j: usize, tc: u8| {
            f[14 + 4 * j + 2] |= tc << 1;
            f
        };
        let frames = [
            tc(mpls(&[(100, 64)], &dns), 0, 5),
            tc(mpls(&[(100, 64)], &dns), 0, 1),
            tc(mpls(&[(103, 64)], &dns), 0, 5),
            // Popped down to the label under it, which takes the class's EXP.
            tc(tc(mpls(&[(101, 64), (77, 64)], &dns), 0, 5), 1, 6),
        ];
        let out = h.push(NodeId::MplsInput, 0, &frames);
        let v = &out.to["tx 1"];
        assert_eq!(
            v.len(),
            4,
            "the DNS packets under the labels are not the ACL's"
        );
        assert_eq!((hits.get(0), hits.get(1)), (0, 0));
        let top = |i: usize, j: usize| Entry::parse(&v[i].data()[14 + 4 * j..]);
        assert_eq!(
            (top(0, 0).label, top(0, 0).tc),
            (200, 2),
            "EXP 5: re-marked 2"
        );
        assert_eq!((top(1, 0).label, top(1, 0).tc), (200, 1), "EXP 1: kept");
        assert_eq!([top(2, 0).tc, top(2, 1).tc], [2, 2], "both pushed");
        assert_eq!((top(3, 0).label, top(3, 0).tc), (77, 2));
        assert_eq!(
            q.classes[0]
                .packets
                .load(std::sync::atomic::Ordering::Relaxed),
            3
        );
    }

    fn be16(d: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([d[at], d[at + 1]])
    }

    #[test]
    fn a_circuits_lists_and_flows_see_the_ip_packet_inside_its_pseudowire_frames() {
        let (mut h, hits, dns, web) = with_services(2);
        let arp = vec![0u8; 28];
        let v = vec![
            on_circuit(&mut h, 0x0800, &dns),
            on_circuit(&mut h, 0x0800, &web),
            on_circuit(&mut h, 0x0806, &arp),
        ];
        let out = h.run_bufs(NodeId::PwEncap, v);
        assert_eq!(out.dropped(DropReason::AclDenied), 1, "the DNS packet");
        assert_eq!(
            (hits.get(0), hits.get(1)),
            (1, 1),
            "ARP is not the IP list's"
        );
        let sent = &out.to["tx 0"];
        assert_eq!(sent.len(), 2);
        // Labels, control word, then the customer frame: its IP header at 26 + 18.
        let (d, l3) = (sent[0].data(), 26 + 18);
        assert_eq!(
            (Entry::parse(&d[14..]).tc, Entry::parse(&d[18..]).tc),
            (5, 5)
        );
        assert_eq!(d[l3 + 1] >> 2, 46, "re-marked");
        assert!(packet::checksum::ipv4_header_ok(&d[l3..l3 + 20]));
        let d = sent[1].data();
        assert_eq!(Entry::parse(&d[14..]).tc, 3, "ARP: the frame's PCP");
        assert_eq!(&d[26 + 16..26 + 18], &[0x08, 0x06]);
        // The web packet's flow: in on the circuit (ifIndex 2), out on eth0 (the way pw0 takes).
        let recs = flushed(&mut h);
        assert_eq!(recs.len(), 1, "{recs:?}");
        let r = &recs[0];
        assert_eq!(
            (r.key.in_if, r.out_if, r.key.dst_port, r.packets),
            (2, 0, 80, 1)
        );
        assert_eq!(r.key.tos, 46 << 2, "as it left");
    }

    #[test]
    fn a_customers_own_tag_inside_the_circuits_is_looked_past() {
        let (mut h, _, _, web) = with_services(2);
        let mut inner = vec![0x00, 0x07, 0x08, 0x00];
        inner.extend_from_slice(&web);
        let b = on_circuit(&mut h, 0x8100, &inner);
        let out = h.run_bufs(NodeId::PwEncap, vec![b]);
        // Labels, control word, then the frame: two tags, its IP header at 26 + 22.
        let (d, l3) = (out.to["tx 0"][0].data(), 26 + 22);
        assert_eq!((d[l3 + 1] >> 2, d[l3 + 23]), (46, 80), "re-marked in place");
        assert!(packet::checksum::ipv4_header_ok(&d[l3..l3 + 20]));
        assert_eq!(
            &d[26 + 16..26 + 20],
            &[0x81, 0x00, 0x00, 0x07],
            "the inner tag untouched"
        );
    }
}
