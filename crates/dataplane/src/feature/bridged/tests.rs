//! Services on bridged frames, on l2-input's test bridge: `eth0` and `eth1` untagged on ports 0
//! and 1, `eth2.100` tagged with VLAN 100 on port 2.

use std::sync::Arc;

use classify::{Dim, Rule};

use crate::counters::DropReason;
use crate::feature::{IfFeatures, Qos, QosClass, Step};
use crate::graph::harness::{acl, Harness, Out};
use crate::graph::NodeId;
use crate::l2::bridge::Bpdu;
use crate::l2::MacKey;
use crate::node::l2_input::tests::{bridged, tx, A, B, BRIDGE_ID, C};
use crate::tables::NO_IF;

/// An IPv4 UDP frame from `src` to `dst`, tagged (VLAN, PCP) if asked, to UDP port `dport`.
fn udp(dst: [u8; 6], src: [u8; 6], tag: Option<(u16, u8)>, dport: u16) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    if let Some((v, pcp)) = tag {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&(u16::from(pcp) << 13 | v).to_be_bytes());
    }
    f.extend_from_slice(&[0x08, 0x00]);
    let mut h = [0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&36u16.to_be_bytes());
    h[8] = 64;
    h[9] = 17;
    h[12..16].copy_from_slice(&[10, 0, 0, 1]);
    h[16..20].copy_from_slice(&[10, 0, 0, 2]);
    let c = packet::checksum::fold(packet::checksum::sum(&h));
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(&4000u16.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 16, 0, 0]);
    f.extend_from_slice(&[0xab; 8]);
    f
}

/// A broadcast ARP request from `src`.
fn arp(src: [u8; 6]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x06]);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&[0; 20]);
    f
}

fn mac_hi_lo(m: [u8; 6]) -> (u32, u32) {
    (
        u32::from(u16::from_be_bytes([m[0], m[1]])),
        u32::from_be_bytes([m[2], m[3], m[4], m[5]]),
    )
}

/// Puts arcs on member `ifx`, leaving the other members' as they are.
fn set(h: &mut Harness, ifx: usize, input: Vec<Step>, output: Vec<Step>) {
    let mut all = h.t.features.to_vec();
    all.resize_with(h.t.ifs.len(), || None);
    all[ifx] = Some(Arc::new(IfFeatures::new(input, output).unwrap()));
    h.t.features = all.into_boxed_slice();
    h.t.any_features = true;
}

/// A policy of one class that takes every frame and sets what it is given.
fn mark(dscp: Option<u8>, cos: Option<u8>) -> Qos {
    Qos {
        policy: "MARK".into(),
        classifier: Arc::new(classify::Classifier::compile(&[Rule::any()])),
        rule_class: vec![0u16].into(),
        classes: vec![QosClass {
            name: "all".into(),
            set_dscp: dscp,
            set_cos: cos,
            set_exp: None,
            policer: None,
            packets: Default::default(),
            bytes: Default::default(),
        }]
        .into_boxed_slice(),
        default_class: None,
    }
}

/// What frames received on one port met on their way through the L2 nodes.
struct Through {
    outs: Vec<Out>,
    /// Frames handed to each node after l2-input.
    handed: std::collections::BTreeMap<&'static str, usize>,
}

impl Through {
    fn sent(&self, port: u16) -> Vec<Vec<u8>> {
        self.outs.iter().flat_map(|o| tx(o, port)).collect()
    }

    fn dropped(&self, why: DropReason) -> u64 {
        self.outs.iter().map(|o| o.dropped(why)).sum()
    }

    fn reached(&self, node: &str) -> usize {
        self.handed.get(node).copied().unwrap_or(0)
    }
}

/// Runs `frames`, received on `port`, through ethernet-input, l2-input, l2-flood and
/// l2-output, each node on what the ones before it sent it.
fn through(h: &mut Harness, port: u16, frames: &[Vec<u8>]) -> Through {
    let out = h.push(NodeId::EthernetInput, port, frames);
    let v = out.to.into_values().next().unwrap_or_default();
    assert_eq!(v.len(), frames.len(), "members' frames go to l2-input");
    let mut r = Through {
        outs: vec![h.run_bufs(NodeId::L2Input, v)],
        handed: Default::default(),
    };
    for node in [NodeId::L2Flood, NodeId::L2Output] {
        let v: Vec<_> = r
            .outs
            .iter_mut()
            .filter_map(|o| o.to.remove(node.name()))
            .flatten()
            .collect();
        r.handed.insert(node.name(), v.len());
        if !v.is_empty() {
            let o = h.run_bufs(node, v);
            r.outs.push(o);
        }
    }
    r
}

#[test]
fn a_member_acl_filters_before_anything_is_learned_and_ip_lists_leave_arp_alone() {
    let mut h = bridged(true, Bpdu::Punt);
    // A MAC list (family any) on eth0: A may not send; its implicit deny takes any frame.
    let (hi, lo) = mac_hi_lo(A);
    let mut no_a = Rule::any();
    no_a.ranges[Dim::EthSrcHi as usize] = (hi, hi);
    no_a.ranges[Dim::EthSrcLo as usize] = (lo, lo);
    let (list, hits) = acl("NO-A", &[(no_a, false), (Rule::any(), true)], Rule::any());
    set(&mut h, 0, vec![Step::Acl(Arc::new(list))], vec![]);
    let r = through(
        &mut h,
        0,
        &[udp(B, A, None, 80), arp(A), udp(B, C, None, 80)],
    );
    assert_eq!(r.dropped(DropReason::AclDenied), 2, "A's IP and ARP frames");
    assert_eq!(r.sent(1).len(), 1, "C's frame flooded");
    assert_eq!(r.sent(2).len(), 1);
    let macs = h.t.macs.clone().unwrap();
    assert_eq!(
        macs.lookup(MacKey::new(BRIDGE_ID, A)),
        None,
        "denied: not learned"
    );
    assert_eq!(macs.lookup(MacKey::new(BRIDGE_ID, C)), Some(7));
    assert_eq!((hits.get(0), hits.get(1), hits.get(2)), (2, 1, 0));

    // An IPv4 list instead: it filters IPv4 (DNS denied, the rest permitted) and leaves ARP
    // alone, as an IP access list on a switch port does; its implicit deny is IPv4's only.
    let mut dns = Rule::any().ipv4();
    dns.ranges[Dim::DstPort as usize] = (53, 53);
    let (list, hits) = acl(
        "NO-DNS",
        &[(dns, false), (Rule::any().ipv4(), true)],
        Rule::any().ipv4(),
    );
    set(&mut h, 0, vec![Step::Acl(Arc::new(list))], vec![]);
    let r = through(
        &mut h,
        0,
        &[udp(B, A, None, 53), arp(A), udp(B, A, None, 80)],
    );
    assert_eq!(r.dropped(DropReason::AclDenied), 1);
    let got = r.sent(1);
    assert_eq!(got.len(), 2, "ARP and the web frame");
    assert_eq!(&got[0][12..14], &[0x08, 0x06]);
    assert_eq!(&got[1][36..38], &80u16.to_be_bytes());
    assert_eq!((hits.get(0), hits.get(1), hits.get(2)), (1, 1, 0));
    assert_eq!(
        macs.lookup(MacKey::new(BRIDGE_ID, A)),
        Some(7),
        "learned now"
    );
}

#[test]
fn member_qos_remarks_dscp_on_the_way_in_and_cos_on_the_copy_leaving_tagged() {
    let mut h = bridged(true, Bpdu::Punt);
    // eth0 re-marks DSCP 46 on input; eth2.100 sets CoS 5 on what leaves by it.
    set(
        &mut h,
        0,
        vec![Step::Qos(Arc::new(mark(Some(46), None)))],
        vec![],
    );
    let q_out = Arc::new(mark(None, Some(5)));
    set(&mut h, 2, vec![], vec![Step::Qos(q_out.clone())]);
    let r = through(&mut h, 0, &[udp(B, A, None, 80), arp(A)]);
    assert_eq!(r.reached("l2-output"), 2, "eth2.100's copies");
    let to1 = r.sent(1);
    let to2 = r.sent(2);
    assert_eq!((to1.len(), to2.len()), (2, 2));
    // DSCP 46 in both copies, the IPv4 checksum still right; ARP untouched.
    for f in [&to1[0], &to2[0]] {
        let l3 = if f[12] == 0x81 { 18 } else { 14 };
        assert_eq!(f[l3 + 1] >> 2, 46);
        assert_eq!(
            packet::checksum::fold(packet::checksum::sum(&f[l3..l3 + 20])),
            0
        );
    }
    assert_eq!(to1[1], arp(A));
    // eth1's copies leave untagged; eth2.100's tagged 100 with PCP 5, the ARP one too.
    assert_eq!(&to2[0][12..16], &[0x81, 0x00, 0xa0, 100]);
    assert_eq!(&to2[1][12..16], &[0x81, 0x00, 0xa0, 100]);
    assert_eq!(
        q_out.classes[0]
            .packets
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
}

#[test]
fn a_member_output_acl_sees_each_frame_as_it_leaves_by_that_member() {
    let mut h = bridged(true, Bpdu::Punt);
    // eth2.100 lets no DNS out on VLAN 100 (the tag it sends with).
    let mut dns = Rule::any().ipv4();
    dns.ranges[Dim::DstPort as usize] = (53, 53);
    dns.ranges[Dim::Vlan as usize] = (100, 100);
    let (list, hits) = acl(
        "OUT",
        &[(dns, false), (Rule::any().ipv4(), true)],
        Rule::any().ipv4(),
    );
    set(&mut h, 2, vec![], vec![Step::Acl(Arc::new(list))]);
    // Flooded: eth1 gets both, eth2.100 the web frame only.
    let r = through(&mut h, 0, &[udp(B, A, None, 53), udp(B, A, None, 80)]);
    assert_eq!(r.sent(1).len(), 2);
    let to2 = r.sent(2);
    assert_eq!(to2.len(), 1);
    assert_eq!(&to2[0][40..42], &80u16.to_be_bytes(), "tagged: 4 bytes on");
    assert_eq!(r.dropped(DropReason::AclDenied), 1);
    // Switched to B, learned behind eth2.100: through l2-output as well.
    let mut tagged_arp = arp(B);
    tagged_arp.splice(12..12, [0x81, 0x00, 0x00, 100]);
    through(&mut h, 2, &[tagged_arp]);
    let r = through(&mut h, 0, &[udp(B, A, None, 53), udp(B, A, None, 80)]);
    assert_eq!(r.reached("l2-flood"), 0);
    assert_eq!(r.sent(2).len(), 1);
    assert_eq!(r.dropped(DropReason::AclDenied), 1);
    assert_eq!((hits.get(0), hits.get(1)), (2, 2));
    // A frame leaving by a member without output features goes straight to its port.
    let r = through(&mut h, 2, &[udp(A, B, Some((100, 0)), 53)]);
    assert_eq!((r.sent(0).len(), r.reached("l2-output")), (1, 0));
}

#[test]
fn bridged_flows_name_the_member_each_frame_leaves_by() {
    let mut h = bridged(true, Bpdu::Punt);
    h.add_flows();
    // eth0 accounts what comes in, eth1 and eth2.100 what goes out.
    set(&mut h, 0, vec![Step::Flow], vec![]);
    set(&mut h, 1, vec![], vec![Step::Flow]);
    set(&mut h, 2, vec![], vec![Step::Flow]);
    // Flooded: the ingress record has no output interface. Each copy is accounted out, into one
    // egress flow (a flow's key is its 5-tuple, ToS, input interface and direction: the copies
    // to eth1 and eth2.100 are its packets, the record naming the last one's interface).
    through(&mut h, 0, &[udp(B, A, None, 53), arp(A)]);
    // B speaks from eth1, then A's frame to it is switched there.
    through(&mut h, 1, &[arp(B)]);
    through(&mut h, 0, &[udp(B, A, None, 80), udp(B, A, None, 80)]);
    let mut recs = Vec::new();
    let fl = h.ctx.flows.as_mut().unwrap();
    fl.cache.flush(1, &mut |r| recs.push(r));
    let mut seen: Vec<_> = recs
        .iter()
        .map(|r| {
            (
                r.key.dst_port,
                r.key.direction,
                r.key.in_if,
                r.out_if,
                r.packets,
                r.bytes,
            )
        })
        .collect();
    seen.sort();
    let (i, e) = (flow::Direction::Ingress, flow::Direction::Egress);
    assert_eq!(
        seen,
        [
            (53, i, 0, NO_IF, 1, 36),
            (53, e, 0, 2, 2, 72),
            (80, i, 0, 1, 2, 72),
            (80, e, 0, 1, 2, 72)
        ],
        "each frame accounted in once (its flood copies are not); ARP is not a flow"
    );
}

#[test]
fn a_frame_routed_through_the_bvi_takes_the_bvis_arcs_and_a_record_of_its_own() {
    use crate::graph::harness::{deny_dns, ip4, BVI_IF, MAC_BVI};
    const ETH1_200: u32 = 3;
    let mut h = Harness::with_bvi();
    h.add_flows();
    // The member accounts flows in; the BVI filters DNS and accounts what it routes.
    let (list, hits) = deny_dns();
    set(&mut h, ETH1_200 as usize, vec![Step::Flow], vec![]);
    set(
        &mut h,
        BVI_IF as usize,
        vec![Step::Acl(Arc::new(list)), Step::Flow],
        vec![],
    );
    let tagged = |dport: u8| {
        let mut f = ip4([10, 7, 0, 5], [10, 1, 0, 5], 64);
        f[14 + 20 + 3] = dport;
        f[..6].copy_from_slice(&MAC_BVI);
        f[6..12].copy_from_slice(&A);
        let mut t = f[..12].to_vec();
        t.extend_from_slice(&[0x81, 0x00, 0x00, 200]);
        t.extend_from_slice(&f[12..]);
        t
    };
    let mut v: Vec<_> = [tagged(53), tagged(80)].iter().map(|f| h.buf(f)).collect();
    crate::graph::receive(&mut h.ctx, &h.t, 1, &mut v);
    let sent: Vec<_> = h.ctx.out[1].drain(..).map(|b| b.data().to_vec()).collect();
    assert_eq!(sent.len(), 1, "DNS denied by the BVI's list");
    assert_eq!(
        &sent[0][12..14],
        &[0x08, 0x00],
        "routed out of eth1, untagged"
    );
    assert_eq!(sent[0][14 + 20 + 3], 80);
    assert_eq!((hits.get(0), hits.get(1)), (1, 1));
    let mut recs = Vec::new();
    let fl = h.ctx.flows.as_mut().unwrap();
    fl.cache.flush(1, &mut |r| recs.push(r));
    let mut seen: Vec<_> = recs
        .iter()
        .map(|r| (r.key.in_if, r.key.dst_port, r.out_if, r.packets))
        .collect();
    seen.sort();
    // The member's records end at the BVI (both frames entered the bridge); the BVI's names
    // the interface its route left by, for the packet its list let through.
    assert_eq!(
        seen,
        [
            (ETH1_200, 53, BVI_IF, 1),
            (ETH1_200, 80, BVI_IF, 1),
            (BVI_IF, 80, 1, 1)
        ]
    );
}
