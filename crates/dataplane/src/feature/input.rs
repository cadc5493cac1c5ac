//! The input features: ACL in, QoS in (classify, mark, police), uRPF. They run inside ip4-forward
//! and ip6-forward between header validation and the route lookup, on the vector of packets that
//! passed validation, and take out the packets they drop. A packet a VPN label popped into a
//! VRF takes the arc of the core interface it came in by (`Meta::arc_if`), uRPF excepted.
//!
//! Work is done per run of packets from one interface (a vector usually is one run): the keys of
//! the run are extracted once and each classifier is asked for the whole run in one batch.
//! Ingress flow accounting waits for the forwarding decision (a record carries its output
//! interface): the keys stay in `Ctx::fkeys` at their packets' places in the vector, and the
//! forward node accounts the flows right after its route lookup ([`super::output::account`]),
//! so a packet is parsed once for the ACL, QoS and its flow.

use classify::{Key, NO_MATCH};

use super::{dscp_color, mark, Acl, IfFeatures, Qos, Step, Urpf, Verdict};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::node::{Ctx, VECTOR};
use crate::tables::{NextHop, Tables};

/// What became of one packet.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    Pass,
    Drop(DropReason),
    /// Not an IP packet (a pseudowire's frame may be anything): the IP features leave it alone
    /// and it goes on.
    Bypass,
}

/// Runs the input features over `good` (with `keys`, its route lookup keys, kept in step) and
/// removes the packets they drop. `v6` says which family the vector is. True if some packet's
/// arrival interface accounts flows in: then the classification keys of those packets are in
/// `ctx.fkeys` at their places in `good`, for the forward node to account them after its lookup.
pub fn run<K: Copy>(
    ctx: &mut Ctx,
    t: &Tables,
    good: &mut Vec<PktBuf>,
    keys: &mut [K],
    v6: bool,
) -> bool {
    let n = good.len();
    let mut fate = [Fate::Pass; VECTOR];
    let mut fkeys = std::mem::take(&mut ctx.fkeys);
    let flows_on = ctx.flows.is_some();
    let mut flows = false;
    let mut a = 0;
    while a < n {
        // The arrival interface's arc; for a packet popped into a VRF, the core interface's.
        let rx_if = good[a].meta().arc_if();
        let mut b = a + 1;
        while b < n && good[b].meta().arc_if() == rx_if {
            b += 1;
        }
        if let Some(f) = t.features.get(rx_if as usize).and_then(|f| f.as_deref()) {
            let flow = f.flow_in && flows_on;
            let run = (&mut good[a..b], &mut fate[a..b], &mut fkeys[a..b]);
            run_interface(ctx, t, f, run, rx_if, v6, flow);
            flows |= flow;
        }
        a = b;
    }
    remove_dropped(ctx, good, &mut fate[..n], |to, from| {
        keys[to] = keys[from];
        if flows {
            fkeys[to] = fkeys[from];
        }
    });
    ctx.fkeys = fkeys;
    flows
}

/// Takes the packets whose fate is `Drop` out of the first `fate.len()` of `pkts` and drops
/// them (counted by reason), keeping the others in order at the front; `also(to, from)` moves
/// the caller's arrays kept in step with the packets (keys) the same way. No allocation.
pub(crate) fn remove_dropped(
    ctx: &mut Ctx,
    pkts: &mut Vec<PktBuf>,
    fate: &mut [Fate],
    mut also: impl FnMut(usize, usize),
) {
    let n = fate.len();
    if !fate.iter().any(|f| matches!(f, Fate::Drop(_))) {
        return;
    }
    let mut kept = 0;
    for i in 0..n {
        if !matches!(fate[i], Fate::Drop(_)) {
            pkts.swap(kept, i);
            fate.swap(kept, i);
            also(kept, i);
            kept += 1;
        }
    }
    for (j, p) in pkts.drain(kept..n).enumerate() {
        if let Fate::Drop(why) = fate[kept + j] {
            ctx.drop(p, why);
        }
    }
}

/// One interface's input arc over a run of its packets (`pkts`, their fates and their
/// classification keys, in step). `flow`: the interface accounts flows in, so the keys are
/// wanted after the run even if no classifier asks for them.
fn run_interface(
    ctx: &mut Ctx,
    t: &Tables,
    f: &IfFeatures,
    (pkts, fate, keys): (&mut [PktBuf], &mut [Fate], &mut [Key]),
    rx_if: u32,
    v6: bool,
    flow: bool,
) {
    let mut keyed = false;
    for step in f.input.iter() {
        match step {
            Step::Urpf(mode) => urpf(t, *mode, pkts, fate, rx_if, v6),
            // Accounted by the forward node after its lookup (see the module's comment).
            Step::Flow => {}
            _ => classify_step(ctx, step, (pkts, fate, keys), rx_if, true, &mut keyed),
        }
    }
    if flow {
        extract_keys(keys, pkts, &mut keyed);
    }
}

/// An ACL or QoS step of an arc over a run of packets, of interface `ifx` in the direction
/// `ingress` says (the keys extracted the first time a step asks: `keyed`). uRPF and flow
/// accounting are each caller's to place; this does nothing for them.
#[inline]
pub(super) fn classify_step(
    ctx: &mut Ctx,
    step: &Step,
    (pkts, fate, keys): (&mut [PktBuf], &mut [Fate], &mut [Key]),
    ifx: u32,
    ingress: bool,
    keyed: &mut bool,
) {
    match step {
        Step::Acl(acl) => {
            extract_keys(keys, pkts, keyed);
            apply_acl(ctx, acl, pkts, keys, fate, ifx, ingress);
        }
        Step::Qos(q) => {
            extract_keys(keys, pkts, keyed);
            apply_qos(ctx, q, pkts, keys, fate);
        }
        Step::Urpf(_) | Step::Flow => {}
    }
}

/// The classification keys of `pkts`, into `keys`, once per run.
#[inline]
pub(super) fn extract_keys(keys: &mut [Key], pkts: &[PktBuf], done: &mut bool) {
    if !*done {
        for (k, p) in keys.iter_mut().zip(pkts.iter()) {
            // At `l3_off`: a decapsulated G-PDU is classified as the UE's packet it carries.
            classify::extract_at_into(k, p.data(), p.meta().l3_off as usize);
        }
        *done = true;
    }
}

fn urpf(t: &Tables, mode: Urpf, pkts: &[PktBuf], fate: &mut [Fate], rx_if: u32, v6: bool) {
    let vrf = &t.vrfs[t.ifs[rx_if as usize].vrf as usize];
    for (p, fate) in pkts.iter().zip(fate.iter_mut()) {
        // A VPN packet's source is a route of its VRF, not of the core interface's table: the
        // check belongs to the PE where it entered the VPN (it is not made here).
        if *fate != Fate::Pass || p.meta().labelled_on != 0 {
            continue;
        }
        let h = &p.data()[p.meta().l3_off as usize..];
        let nh = if v6 {
            vrf.v6
                .lookup(u128::from_be_bytes(h[8..24].try_into().expect("16 bytes")))
        } else {
            vrf.v4
                .lookup(u32::from_be_bytes([h[12], h[13], h[14], h[15]]))
        };
        if !urpf_ok(t, nh, rx_if, mode) {
            *fate = Fate::Drop(DropReason::UrpfFailed);
        }
    }
}

/// RFC 3704: strict mode wants the best route back to the source to leave through the arrival
/// interface (any member of an ECMP group will do); loose mode wants some route that is not a
/// null route. A packet claiming one of the router's own addresses as its source fails both.
#[inline]
pub fn urpf_ok(t: &Tables, nh: u32, rx_if: u32, mode: Urpf) -> bool {
    let via = |nh: &NextHop| match nh {
        NextHop::Forward { tx_if, .. } | NextHop::Glean { tx_if, .. } | NextHop::Down { tx_if } => {
            Some(*tx_if)
        }
        _ => None,
    };
    match &t.next_hops[nh as usize] {
        NextHop::NoRoute
        | NextHop::Blackhole
        | NextHop::Reject
        | NextHop::Local
        | NextHop::GtpuLocal => false,
        // A UE's address: it comes from the APN's interface (decapsulated).
        NextHop::GtpApn { apn } => {
            mode == Urpf::Loose
                || t.gtpu
                    .as_ref()
                    .and_then(|g| g.apns.get(*apn as usize))
                    .is_some_and(|a| a.ifx == rx_if)
        }
        NextHop::Ecmp(members) => {
            mode == Urpf::Loose
                || members
                    .iter()
                    .any(|&m| via(&t.next_hops[m as usize]) == Some(rx_if))
        }
        other => mode == Urpf::Loose || via(other) == Some(rx_if),
    }
}

/// Classifies `pkts` (their keys in `keys`) against `acl`, counts hits, logs what asks to be
/// logged and marks denied packets. Shared by both directions.
pub(super) fn apply_acl(
    ctx: &mut Ctx,
    acl: &Acl,
    pkts: &[PktBuf],
    keys: &[Key],
    fate: &mut [Fate],
    ifx: u32,
    ingress: bool,
) {
    let n = pkts.len();
    let mut res = [0u32; VECTOR];
    acl.classifier.classify_batch(&keys[..n], &mut res[..n]);
    // Hits are bumped once per run of equal results: a vector is usually one flow or a few.
    let mut run = (u32::MAX, 0u64);
    for i in 0..n {
        if fate[i] != Fate::Pass {
            continue;
        }
        let r = res[i];
        if r == NO_MATCH {
            // Of a family none of the bound lists is for (every list ends in its family's
            // implicit deny): an IPv4 list leaves IPv6 alone, as `ip access-group` does, and
            // IP lists leave a bridged frame that is not IP (ARP) alone.
            continue;
        }
        if r == run.0 {
            run.1 += 1;
        } else {
            flush_hits(acl, run);
            run = (r, 1);
        }
        let e = acl.entries[r as usize];
        if e.log {
            let seq = acl.seqs[e.list as usize]
                .get(e.index as usize)
                .copied()
                .unwrap_or(0);
            ctx.acl_log.hit(
                &acl.lists[e.list as usize],
                seq,
                e.permit,
                &keys[i],
                ifx,
                ingress,
                ctx.now_ns,
            );
        }
        if !e.permit {
            fate[i] = Fate::Drop(DropReason::AclDenied);
        }
    }
    flush_hits(acl, run);
}

#[inline]
fn flush_hits(acl: &Acl, (r, count): (u32, u64)) {
    if count == 0 {
        return;
    }
    let e = acl.entries[r as usize];
    acl.lists[e.list as usize].hits[e.index as usize]
        .fetch_add(count, std::sync::atomic::Ordering::Relaxed);
}

/// Classifies `pkts` against the policy, counts each class, re-marks and polices. Shared by both
/// directions; `keys` are the packets' and are updated with the new DSCP (flow records show the
/// marking the packet leaves with).
pub(super) fn apply_qos(
    ctx: &mut Ctx,
    q: &Qos,
    pkts: &mut [PktBuf],
    keys: &mut [Key],
    fate: &mut [Fate],
) {
    let n = pkts.len();
    let mut res = [0u32; VECTOR];
    q.classifier.classify_batch(&keys[..n], &mut res[..n]);
    let now = ctx.clock_ns;
    // Class counters are shared by the workers serving the interface: bumped once per run.
    let mut run = (u16::MAX, 0u64, 0u64);
    let mut guard: Option<(u16, super::police::PolicerGuard<'_>)> = None;
    for i in 0..n {
        if fate[i] != Fate::Pass {
            continue;
        }
        let class = match res[i] {
            NO_MATCH => match q.default_class {
                Some(c) => c,
                None => continue,
            },
            r => q.rule_class[r as usize],
        };
        let c = &q.classes[class as usize];
        let p = &mut pkts[i];
        let l3 = p.meta().l3_off as usize;
        let bytes = p.len() - l3;
        if run.0 != class {
            flush_class(q, run);
            run = (class, 0, 0);
        }
        run.1 += 1;
        run.2 += bytes as u64;
        if let Some(d) = c.set_dscp {
            set_dscp(p, l3, d, &mut keys[i]);
        }
        if let Some(cos) = c.set_cos {
            mark::set_pcp(p.data_mut(), cos);
        }
        if let Some(exp) = c.set_exp {
            // Carried to where labels are pushed (here or at the far end of the router).
            p.meta_mut().exp = exp + 1;
        }
        if let Some(pol) = &c.policer {
            let pre = dscp_color(keys[i].get(classify::Dim::Dscp) as u8);
            // One lock per run of packets of one class, not one per packet.
            if guard.as_ref().is_none_or(|g| g.0 != class) {
                guard = Some((class, pol.lock()));
            }
            let g = &mut guard.as_mut().expect("just set").1;
            let (_, verdict) = g.police(now, bytes as u32, pre);
            match verdict {
                Verdict::Transmit => {}
                Verdict::SetDscpTransmit(d) => set_dscp(p, l3, d, &mut keys[i]),
                Verdict::SetPcpTransmit(cos) => {
                    mark::set_pcp(p.data_mut(), cos);
                }
                Verdict::Drop => fate[i] = Fate::Drop(DropReason::PolicerDropped),
            }
        }
    }
    drop(guard);
    flush_class(q, run);
}

fn flush_class(q: &Qos, (class, packets, bytes): (u16, u64, u64)) {
    if packets > 0 {
        let c = &q.classes[class as usize];
        c.packets
            .fetch_add(packets, std::sync::atomic::Ordering::Relaxed);
        c.bytes
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Re-marks by the packet's own family (a run of one interface may hold both); a labelled
/// frame in transit has no IP header to re-mark. A routed packet's header was checked by its
/// forwarding node; a bridged frame's was not, so one too short for its header, or of another
/// IP version than its EtherType says, is left as it is.
fn set_dscp(p: &mut PktBuf, l3: usize, d: u8, k: &mut Key) {
    let f = p.data();
    let version = f.get(l3).map_or(0, |b| b >> 4);
    match k.get(classify::Dim::EtherType) {
        classify::rule::ETHERTYPE_IPV6 if version == 6 && f.len() >= l3 + 40 => {
            mark::set_dscp_v6(p.data_mut(), l3, d)
        }
        classify::rule::ETHERTYPE_IPV4 if version == 4 && f.len() >= l3 + 20 => {
            mark::set_dscp_v4(p.data_mut(), l3, d)
        }
        _ => return,
    }
    k.set(classify::Dim::Dscp, d as u32);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::counters::DropReason;
    use crate::feature::{Step, Urpf};
    use crate::graph::harness::{bind, deny_dns, ip4, mpls, Harness};
    use crate::graph::NodeId;

    /// An IPv4 list filters IPv4 only (as `ip access-group` does): an IPv6 packet matches no
    /// entry of it, not even its implicit deny, and is forwarded.
    #[test]
    fn an_ipv4_list_leaves_ipv6_alone() {
        use crate::graph::harness::{acl, ip6};
        let mut h = Harness::new();
        let mut dns = classify::Rule::any().ipv4();
        dns.ranges[classify::Dim::DstPort as usize] = (53, 53);
        let (acl, hits) = acl("V4", &[(dns, false)], classify::Rule::any().ipv4());
        bind(&mut h.t, 0, vec![Step::Acl(Arc::new(acl))], vec![]);
        let v4 = h.push(
            NodeId::Ip4Forward,
            0,
            &[ip4([10, 0, 0, 2], [10, 1, 0, 5], 64)],
        );
        assert_eq!(v4.dropped(DropReason::AclDenied), 1);
        let v6 = ip6(0x2001_0db8 << 96 | 2, 0x2001_0db8_0001 << 80 | 5, 64);
        let out = h.push(NodeId::Ip6Forward, 0, &[v6]);
        assert_eq!(
            (out.dropped(DropReason::AclDenied), out.count("tx 1")),
            (0, 1)
        );
        assert_eq!((hits.get(0), hits.get(1)), (1, 0));
    }

    #[test]
    fn a_packet_popped_into_a_vrf_takes_the_core_interfaces_input_arc() {
        let mut h = Harness::with_mpls();
        let (acl, hits) = deny_dns();
        // On eth1, where the labelled frames come in. Strict uRPF would fail every one of them
        // (their source is reached through eth0) were it asked of VPN packets.
        bind(
            &mut h.t,
            1,
            vec![Step::Acl(Arc::new(acl)), Step::Urpf(Urpf::Strict)],
            vec![],
        );
        let dns = ip4([10, 0, 0, 2], [10, 1, 0, 5], 64)[14..].to_vec();
        let mut other = dns.clone();
        other[20 + 3] = 54;
        let frames = [mpls(&[(102, 30)], &dns), mpls(&[(102, 30)], &other)];
        let mut out = h.push(NodeId::MplsInput, 1, &frames);
        let v = out.to.remove("ip4-forward").expect("both popped");
        // The label gone, the frame reads as the IP frame it carried, received on eth1.
        let d = v[0].data();
        assert_eq!((v[0].meta().l3_off, &d[12..14]), (14, &[0x08, 0x00][..]));
        assert_eq!(&d[..12], &frames[0][..12], "the core's MACs kept");
        assert_eq!((&d[26..34], &d[34..]), (&dns[12..20], &dns[20..]));
        let out = h.run_bufs(NodeId::Ip4Forward, v);
        assert_eq!(out.dropped(DropReason::AclDenied), 1);
        assert_eq!((hits.get(0), hits.get(1)), (1, 1), "eth1's list saw both");
        assert_eq!(out.dropped(DropReason::UrpfFailed), 0);
        assert_eq!(out.count("tx 1"), 1);
        // The same frames with the list on eth0 (the interface whose VRF the label names)
        // cross untouched: the arc is the arrival interface's.
        let mut h = Harness::with_mpls();
        let (acl, hits) = deny_dns();
        bind(&mut h.t, 0, vec![Step::Acl(Arc::new(acl))], vec![]);
        let mut out = h.push(NodeId::MplsInput, 1, &frames);
        let v = out.to.remove("ip4-forward").expect("both popped");
        let out = h.run_bufs(NodeId::Ip4Forward, v);
        assert_eq!((out.count("tx 1"), hits.get(0)), (2, 0));
    }
}
