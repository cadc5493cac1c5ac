//! The output features: ACL out, QoS out, and flow accounting of both directions. Forwarding
//! sends a packet here instead of straight to its port's transmit vector when the interface it
//! leaves by has output features or the one it arrived on accounts flows (an ingress flow record
//! names its output interface, known only now). Survivors go to their port's transmit vector;
//! a packet going over an LSP comes here as the IP packet and gets its labels on the way out,
//! their traffic class the one QoS chose (`set exp`).

use std::sync::{Arc, Mutex};

use classify::{Dim, Key};
use flow::{Direction, FlowCache, FlowKey, FlowRecord};

use super::input::{classify_step, extract_keys, Fate};
use super::FlowShared;
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{Node, To};
use crate::node::{mix, Ctx, VECTOR};
use crate::tables::{NextHop, Tables};

/// output-features. Reads: `meta.next_hop` (the interface the packet leaves by, and the labels
/// of a labelled one), `meta.rx_if` (or `meta.labelled_on`: `Meta::arc_if`), the headers the
/// classifiers and the flow key need. Sets: DSCP, PCP and `meta.exp` where QoS re-marks; the
/// labels of a labelled next hop.
/// Next: the transmit vector of the next hop's port (bvi-output for a bridge's routed
/// interface); drops for the output ACL and policers.
pub struct OutputFeatures;

/// Survivors leave by their port, or by bvi-output when they leave by a bridge's routed
/// interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Bridge,
}

impl crate::graph::Edge for Next {
    const ALL: &'static [Self] = &[Next::Bridge];
    #[inline(always)]
    fn node(self) -> crate::graph::NodeId {
        match self {
            Next::Bridge => crate::graph::NodeId::BviOutput,
        }
    }
}

impl Node for OutputFeatures {
    const NAME: &'static str = "output-features";
    type Next = Next;
    const TRANSMITS: bool = true;
    const DROPS: &'static [DropReason] = &[];
    const CONSUMED: &'static str = "consumed";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        run(ctx, t, pkts)
    }

    fn trace(t: &Tables, b: &PktBuf, _to: To) -> String {
        passed(t, tx_if(t, b).0)
    }
}

/// The trace line of a packet that passed interface `ifx`'s output arc: its name and steps.
pub(crate) fn passed(t: &Tables, ifx: u32) -> String {
    let name = t.ifs.get(ifx as usize).map_or("?", |i| i.name.as_str());
    let steps = t
        .features
        .get(ifx as usize)
        .and_then(|f| f.as_deref())
        .map(|f| {
            f.output
                .iter()
                .map(|s| s.kind().name())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    format!("passed output features of {name} [{steps}]")
}

/// A worker's flow cache and what goes with it.
pub struct WorkerFlows {
    pub shared: Arc<FlowShared>,
    pub cache: FlowCache,
    /// Expired records waiting to be handed to the exporter (once per vector).
    pub out: Vec<FlowRecord>,
    /// Packets until the next sampled one.
    pub skip: u32,
    pub last_stats_ns: u64,
    /// The flows of the run being accounted (key, hash, IP bytes, TCP flags, output interface).
    batch: Vec<(FlowKey, u32, u32, u8, u32)>,
    /// The event manager's look at the live flows (idle unless a flow rule asks).
    scanner: super::watch::Scanner,
}

impl WorkerFlows {
    /// Publishes this worker's cache counters for `show flows`.
    pub fn publish_stats(&self, worker: usize) {
        let mut st = self.shared.stats.lock().unwrap_or_else(|p| p.into_inner());
        if st.len() <= worker {
            st.resize_with(worker + 1, Default::default);
        }
        st[worker] = self.cache.stats();
    }

    /// A worker's accounting with a cache the control plane built (see [`FlowShared::prepare`]).
    pub fn new(shared: Arc<FlowShared>) -> WorkerFlows {
        WorkerFlows {
            cache: shared.take_cache(),
            shared,
            out: Vec::new(),
            skip: 0,
            last_stats_ns: 0,
            batch: Vec::with_capacity(VECTOR * 2),
            scanner: Default::default(),
        }
    }
}

/// Does packet `b` leaving by `tx_if` need the output stage? It does if that interface has
/// output features, or if the one it came in by (`Meta::arc_if`) accounts flows in and the
/// packet was not accounted yet (`Meta::flowed`).
#[inline(always)]
pub fn needed(t: &Tables, b: &PktBuf, tx_if: u32) -> bool {
    let f = |i: u32| t.features.get(i as usize).and_then(|f| f.as_deref());
    let m = b.meta();
    f(tx_if).is_some_and(|f| f.has_output())
        || !m.flowed && f(m.arc_if()).is_some_and(|f| f.flow_in)
}

/// Runs the output features over `pkts`, draining it.
fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
    let mut fates = std::mem::take(&mut ctx.egress_fate);
    fates.clear();
    fates.resize(pkts.len(), Fate::Pass);
    let mut start = 0;
    while start < pkts.len() {
        // A run: one output interface, at most a vector.
        let (ifx, _) = tx_if(t, &pkts[start]);
        let mut end = start + 1;
        while end < pkts.len() && end - start < VECTOR && tx_if(t, &pkts[end]).0 == ifx {
            end += 1;
        }
        run_interface(ctx, t, &mut pkts[start..end], &mut fates[start..end], ifx);
        start = end;
    }
    for (i, p) in pkts.drain(..).enumerate() {
        match fates[i] {
            // (Bypass is an attachment circuit's non-IP frame: none comes here.)
            Fate::Pass | Fate::Bypass => {
                let (_, port) = tx_if(t, &p);
                match &t.next_hops[p.meta().next_hop as usize] {
                    // Over an LSP: the labels go on now, with the traffic class QoS chose.
                    NextHop::Labelled { via, labels } => match &t.next_hops[*via as usize] {
                        NextHop::Forward { rewrite, .. } => {
                            crate::node::impose(ctx, t, p, port, rewrite, labels, Next::Bridge)
                        }
                        _ => ctx.drop(p, DropReason::NoRoute),
                    },
                    _ => crate::node::send(ctx, t, p, port, Next::Bridge),
                }
            }
            Fate::Drop(why) => ctx.drop(p, why),
        }
    }
    ctx.egress_fate = fates;
}

/// The interface and port a packet leaves by: its next hop's, or for a labelled next hop
/// (an LSP) the neighbour's it goes through.
#[inline(always)]
fn tx_if(t: &Tables, p: &PktBuf) -> (u32, u16) {
    tx_if_of(t, p.meta().next_hop)
}

/// The interface and port next hop `nh` leaves by (through the neighbour of a labelled one).
#[inline(always)]
pub(super) fn tx_if_of(t: &Tables, nh: u32) -> (u32, u16) {
    let mut nh = &t.next_hops[nh as usize];
    if let NextHop::Labelled { via, .. } = nh {
        nh = &t.next_hops[*via as usize];
    }
    match nh {
        NextHop::Forward { tx_if, port, .. } => (*tx_if, *port),
        _ => (crate::tables::NO_IF, u16::MAX),
    }
}

fn run_interface(ctx: &mut Ctx, t: &Tables, pkts: &mut [PktBuf], fate: &mut [Fate], tx_if: u32) {
    let n = pkts.len();
    let mut keyed = false;
    let mut keys = std::mem::take(&mut ctx.fkeys);
    let out = t.features.get(tx_if as usize).and_then(|f| f.as_deref());
    // (uRPF is never on an output arc; both directions' flows are accounted below, once the
    // survivors are known.)
    for step in out.map_or(&[][..], |f| &f.output[..]) {
        let run = (&mut *pkts, &mut fate[..n], &mut keys[..n]);
        classify_step(ctx, step, run, tx_if, false, &mut keyed);
    }
    if ctx.flows.is_some() {
        extract_keys(&mut keys, pkts, &mut keyed);
        let out_flow = out.is_some_and(|f| f.flow_out);
        account(ctx, t, pkts, &keys, fate, |_| tx_if, out_flow);
    }
    ctx.fkeys = keys;
}

/// Accounts the packets of `pkts` that passed (`fate`) to the flow caches: ingress where their
/// arrival interface (`Meta::arc_if`) has `flow: in` and they were not accounted in yet
/// (`Meta::flowed`; the forward nodes account most packets right after their lookup, and
/// mark them), egress where `out_flow` (the output interface has `flow: out`). `tx_if` gives a
/// packet's output interface (the record's); `keys` are the packets' classification keys.
pub(crate) fn account(
    ctx: &mut Ctx,
    t: &Tables,
    pkts: &mut [PktBuf],
    keys: &[Key],
    fate: &[Fate],
    tx_if: impl Fn(&PktBuf) -> u32,
    out_flow: bool,
) {
    let n = pkts.len();
    if let Some(fl) = ctx.flows.as_mut() {
        let now = ctx.clock_ns;
        // Keys first, then the updates with the cache lines they need asked for ahead.
        let mut batch = std::mem::take(&mut fl.batch);
        batch.clear();
        for i in 0..n {
            if fate[i] != Fate::Pass {
                continue;
            }
            let p = &mut pkts[i];
            // The arrival interface's `flow: in` decides (the core interface's for a packet a
            // VPN label popped into a VRF); the record names the interface the packet entered
            // its table by: for such a packet the VRF's MPLS interface, one per VRF, so that
            // VPNs reusing addresses keep their flows apart (a record has no VRF field).
            let arc_if = p.meta().arc_if();
            let rx_if = p.meta().rx_if;
            let in_flow = !p.meta().flowed
                && t.features
                    .get(arc_if as usize)
                    .and_then(|f| f.as_deref())
                    .is_some_and(|f| f.flow_in);
            if !in_flow && !out_flow {
                continue;
            }
            // Sampled or not, the packet has had its turn in: no later stage accounts it in.
            p.meta_mut().flowed |= in_flow;
            if fl.skip > 0 {
                fl.skip -= 1;
                continue;
            }
            fl.skip = fl.shared.sampling.saturating_sub(1);
            let l3 = p.meta().l3_off as usize;
            let bytes = l3_len(&p.data()[l3..]);
            let k = &keys[i];
            let tcp_flags = k.get(Dim::TcpFlags) as u8;
            let out_if = tx_if(p);
            for (on, dir) in [(in_flow, Direction::Ingress), (out_flow, Direction::Egress)] {
                if on {
                    let (key, h) = flow_key(k, rx_if, dir);
                    batch.push((key, h, bytes, tcp_flags, out_if));
                }
            }
        }
        // A sliding window rather than whole passes: a core keeps only about ten misses in
        // flight, so prefetches issued hundreds ahead are dropped or wait; a bucket line is
        // asked for BUCKET_AHEAD flows before its update, the entry line ENTRY_AHEAD before.
        const BUCKET_AHEAD: usize = 8;
        const ENTRY_AHEAD: usize = 4;
        for b in batch.iter().take(BUCKET_AHEAD) {
            fl.cache.prefetch(b.1);
        }
        for b in batch.iter().take(ENTRY_AHEAD) {
            fl.cache.prefetch_entry(b.1);
        }
        let out = &mut fl.out;
        for i in 0..batch.len() {
            if let Some(b) = batch.get(i + BUCKET_AHEAD) {
                fl.cache.prefetch(b.1);
            }
            if let Some(b) = batch.get(i + ENTRY_AHEAD) {
                fl.cache.prefetch_entry(b.1);
            }
            let (key, h, bytes, tcp_flags, out_if) = &batch[i];
            fl.cache
                .account(key, *h, *bytes, *tcp_flags, *out_if, now, &mut |r| {
                    out.push(r)
                });
        }
        batch.clear();
        fl.batch = batch;
    }
}

/// Ingress flow accounting in the forward nodes, right after the route lookup: `nhs` are the
/// packets' next hops, resolved here to an ECMP group's member (by `hash`, as forwarding would
/// pick it; the forward node then finds it resolved). A packet that leaves by an interface
/// (directly or over an LSP) is accounted with it as output interface and marked, so the output
/// stage neither accounts it again nor needs to see it for that; any other (for the router, held
/// for a neighbour, tunnelled) is left to whoever sends it on. Keys are in `ctx.fkeys`, in step
/// with `pkts` (see [`super::input::run`]).
pub(crate) fn account_routed(
    ctx: &mut Ctx,
    t: &Tables,
    pkts: &mut [PktBuf],
    nhs: &mut [u32],
    hash: fn(&PktBuf) -> u32,
) {
    let n = pkts.len();
    let mut fate = [Fate::Pass; VECTOR];
    for i in 0..n {
        let nh = crate::node::ecmp_member(t, nhs[i], || hash(&pkts[i]));
        nhs[i] = nh;
        if tx_if_of(t, nh).0 == crate::tables::NO_IF {
            fate[i] = Fate::Bypass;
        } else {
            pkts[i].meta_mut().next_hop = nh;
        }
    }
    let keys = std::mem::take(&mut ctx.fkeys);
    account(
        ctx,
        t,
        pkts,
        &keys[..n],
        &fate[..n],
        |p| tx_if_of(t, p.meta().next_hop).0,
        false,
    );
    ctx.fkeys = keys;
}

/// The IP length of the packet (what NetFlow counts as bytes).
#[inline]
fn l3_len(h: &[u8]) -> u32 {
    match h.first().map(|b| b >> 4) {
        Some(4) if h.len() >= 4 => u16::from_be_bytes([h[2], h[3]]) as u32,
        Some(6) if h.len() >= 6 => 40 + u16::from_be_bytes([h[4], h[5]]) as u32,
        _ => h.len() as u32,
    }
}

#[inline]
pub fn flow_key(k: &Key, in_if: u32, direction: Direction) -> (FlowKey, u32) {
    let v6 = k.get(Dim::EtherType) == classify::rule::ETHERTYPE_IPV6;
    let (src, dst) = if v6 {
        (k.src_v6(), k.dst_v6())
    } else {
        (k.get(Dim::Src0) as u128, k.get(Dim::Dst0) as u128)
    };
    let key = FlowKey {
        src,
        dst,
        src_port: k.get(Dim::SrcPort) as u16,
        dst_port: k.get(Dim::DstPort) as u16,
        proto: k.get(Dim::Proto) as u8,
        tos: (k.get(Dim::Dscp) as u8) << 2,
        v6,
        in_if,
        direction,
    };
    let a = (src as u64)
        ^ ((src >> 64) as u64).rotate_left(17)
        ^ (dst as u64).rotate_left(31)
        ^ ((dst >> 64) as u64).rotate_left(47);
    let b = (key.src_port as u64) << 48
        | (key.dst_port as u64) << 32
        | (key.proto as u64) << 24
        | (direction as u64) << 20
        | in_if as u64 & 0xfffff;
    let x = mix(a, b);
    (key, (x >> 32) as u32 ^ x as u32)
}

/// Ends a worker's cache off the worker: flushing a cache of millions of flows and freeing its
/// gigabyte takes long enough to stop forwarding, so a thread of its own does it. Its flows go
/// to the exporter of `next` (the new settings), or of their own if accounting is now off.
/// Inline only if no thread can be had.
fn retire(fl: WorkerFlows, next: Option<Arc<FlowShared>>, now: u64, worker: usize) {
    let job = move || {
        let mut fl = fl;
        let out = &mut fl.out;
        fl.cache.flush(now, &mut |r| out.push(r));
        let to = next.as_deref().unwrap_or(&fl.shared);
        to.push_all(&mut fl.out, std::time::Duration::from_secs(2));
        // The retired cache's last counts, flushed flows included.
        fl.publish_stats(worker);
    };
    let spare = std::sync::Arc::new(Mutex::new(Some(job)));
    let again = spare.clone();
    let spawned = std::thread::Builder::new()
        .name("flow-retire".into())
        .spawn(move || {
            if let Some(job) = again.lock().unwrap_or_else(|p| p.into_inner()).take() {
                job()
            }
        });
    if spawned.is_err() {
        if let Some(job) = spare.lock().unwrap_or_else(|p| p.into_inner()).take() {
            job()
        }
    }
}

/// Once per vector: hands expired records and logged flows over, keeps the caches' timeouts
/// moving, and starts or retires the flow cache when the config turns accounting on or off.
pub fn housekeeping(ctx: &mut Ctx, t: &Tables) {
    let now = ctx.clock_ns;
    match (&t.flow, &mut ctx.flows) {
        (Some(s), Some(fl)) if Arc::ptr_eq(s, &fl.shared) => {}
        (want, have) => {
            if let Some(fl) = have.take() {
                retire(fl, want.clone(), now, ctx.worker as usize);
            }
            *have = want.as_ref().map(|s| WorkerFlows::new(s.clone()));
        }
    }
    if let Some(fl) = ctx.flows.as_mut() {
        let out = &mut fl.out;
        fl.cache.sweep(now, 64, &mut |r| out.push(r));
        fl.scanner.step(
            &fl.cache,
            &fl.shared.watch,
            ctx.worker as usize,
            now,
            t.ifs.len(),
        );
        if !fl.out.is_empty() {
            fl.shared.push(&mut fl.out);
        }
        if now.saturating_sub(fl.last_stats_ns) >= 250_000_000 {
            fl.last_stats_ns = now;
            fl.publish_stats(ctx.worker as usize);
        }
    }
    if let Some(sink) = &t.acl_log {
        ctx.acl_log.flush(sink, ctx.now_ns);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use crate::counters::DropReason;
    use crate::feature::Step;
    use crate::graph::harness::{
        bind, deny_dns, deny_dns_out, ip4, mark_all, Harness, NH_ETH1, PEER1,
    };
    use crate::graph::{NodeId, To};
    use crate::mpls::Entry;

    /// Flow records flushed from the harness's cache.
    fn flushed(h: &mut Harness) -> Vec<flow::FlowRecord> {
        let mut recs = Vec::new();
        let fl = h.ctx.flows.as_mut().unwrap();
        fl.cache.flush(1, &mut |r| recs.push(r));
        recs.sort_by_key(|r| r.key.dst_port);
        recs
    }

    #[test]
    fn ingress_flows_are_accounted_once_after_the_lookup_and_need_no_output_stage() {
        let mut h = Harness::new();
        h.add_flows();
        // eth0 accounts flows in; eth1, by which 10.1.0.0/24 leaves, has no output features.
        let in_only = crate::feature::IfFeatures::new(vec![Step::Flow], vec![]).unwrap();
        let mut all: Vec<_> = (0..h.t.ifs.len()).map(|_| None).collect();
        all[0] = Some(Arc::new(in_only));
        h.t.features = all.into_boxed_slice();
        h.t.any_features = true;
        let dns = ip4([10, 0, 0, 2], [10, 1, 0, 5], 64);
        let mut web = dns.clone();
        web[14 + 20 + 3] = 80;
        let out = h.push(NodeId::Ip4Forward, 0, &[dns.clone(), web.clone()]);
        assert_eq!(out.count("tx 1"), 2, "straight to the port");
        assert!(!out.to.contains_key("output-features"));
        let recs = flushed(&mut h);
        let seen: Vec<_> = recs
            .iter()
            .map(|r| {
                (
                    r.key.dst_port,
                    r.key.in_if,
                    r.out_if,
                    r.packets,
                    r.key.direction,
                )
            })
            .collect();
        let ingress = flow::Direction::Ingress;
        assert_eq!(seen, [(53, 0, 1, 1, ingress), (80, 0, 1, 1, ingress)]);

        // With an output ACL on eth1 both go through the output stage, which must not account
        // them in again; the denied one was accounted in already (ingress accounting comes
        // before the egress arc, as on the routers NetFlow comes from).
        let counters = deny_dns_out(&mut h.t, 1);
        let mut feats = h.t.features.to_vec();
        feats[0] = Some(Arc::new(
            crate::feature::IfFeatures::new(vec![Step::Flow], vec![]).unwrap(),
        ));
        h.t.features = feats.into_boxed_slice();
        let mut out = h.push(NodeId::Ip4Forward, 0, &[dns, web]);
        let v = out.to.remove("output-features").expect("both to the arc");
        let out = h.run_bufs(NodeId::OutputFeatures, v);
        assert_eq!(out.count("tx 1"), 1);
        assert_eq!(out.dropped(DropReason::AclDenied), 1);
        assert_eq!(counters.get(0), 1);
        let recs = flushed(&mut h);
        let seen: Vec<_> = recs
            .iter()
            .map(|r| (r.key.dst_port, r.out_if, r.packets))
            .collect();
        assert_eq!(seen, [(53, 1, 1), (80, 1, 1)], "once each");
    }

    #[test]
    fn a_packet_leaving_over_an_lsp_passes_the_output_arc_before_its_labels_go_on() {
        let mut h = Harness::with_mpls();
        let (acl, hits) = deny_dns();
        let qos = mark_all(Some(46), Some(5));
        bind(
            &mut h.t,
            1,
            vec![],
            vec![Step::Acl(Arc::new(acl)), Step::Qos(Arc::new(qos))],
        );
        let mut other = ip4([10, 0, 0, 2], [10, 9, 1, 1], 64);
        other[14 + 20 + 3] = 54;
        let dns = ip4([10, 0, 0, 2], [10, 9, 1, 1], 64);
        let mut out = h.push(NodeId::Ip4Forward, 0, &[dns, other]);
        let v = out
            .to
            .remove("output-features")
            .expect("both through the arc");
        for b in &v {
            // The features see the IP packet as it will leave: TTL one less, the L2 header
            // written for the neighbour, no label yet.
            let d = b.data();
            assert_eq!((&d[..6], &d[12..14]), (&PEER1[..], &[0x08, 0x00][..]));
            assert_eq!(d[14 + 8], 63);
        }
        let out = h.run_bufs(NodeId::OutputFeatures, v);
        assert_eq!(out.dropped(DropReason::AclDenied), 1);
        assert_eq!(hits.get(0), 1, "the DNS packet denied by the output ACL");
        let d = out.to["tx 1"][0].data();
        assert_eq!(u16::from_be_bytes([d[12], d[13]]), 0x8847);
        let (a, b) = (Entry::parse(&d[14..]), Entry::parse(&d[18..]));
        assert_eq!((a.label, a.tc, a.ttl, a.bottom), (16, 5, 63, false));
        assert_eq!((b.label, b.tc, b.ttl, b.bottom), (17, 5, 63, true));
        assert_eq!(d[22 + 1] >> 2, 46, "re-marked under the labels");
        assert!(packet::checksum::ipv4_header_ok(&d[22..42]));
    }

    #[test]
    fn the_exp_an_input_class_sets_goes_on_the_labels_pushed_later() {
        let mut h = Harness::with_mpls();
        let qos = mark_all(None, Some(3));
        bind(&mut h.t, 0, vec![Step::Qos(Arc::new(qos))], vec![]);
        let plain = ip4([10, 0, 0, 2], [10, 9, 1, 1], 64);
        let out = h.push(NodeId::Ip4Forward, 0, std::slice::from_ref(&plain));
        let d = out.to["tx 1"][0].data();
        let (a, b) = (Entry::parse(&d[14..]), Entry::parse(&d[18..]));
        assert_eq!((a.label, a.tc, b.label, b.tc), (16, 3, 17, 3));
        assert_eq!(d[22 + 1], plain[14 + 1], "the DSCP left as it was");
        // Without a class asking, the labels carry the IP precedence.
        let mut h = Harness::with_mpls();
        let mut ef = plain;
        ef[14 + 1] = 46 << 2;
        ef[14 + 10..14 + 12].fill(0);
        let c = packet::checksum::fold(packet::checksum::sum(&ef[14..34]));
        ef[14 + 10..14 + 12].copy_from_slice(&c.to_be_bytes());
        let out = h.push(NodeId::Ip4Forward, 0, &[ef]);
        let d = out.to["tx 1"][0].data();
        assert_eq!(Entry::parse(&d[14..]).tc, 46 >> 3);
    }

    #[test]
    fn the_output_arc_filters_and_survivors_go_to_their_port() {
        let mut h = Harness::new();
        let hits = deny_dns_out(&mut h.t, 1);
        let mut other = ip4([10, 0, 0, 2], [10, 1, 0, 5], 64);
        other[14 + 20 + 3] = 54; // UDP to port 54
        let v = [ip4([10, 0, 0, 2], [10, 1, 0, 5], 64), other]
            .iter()
            .map(|f| {
                let mut b = h.buf(f);
                let m = b.meta_mut();
                m.l3_off = 14;
                m.next_hop = NH_ETH1;
                b
            })
            .collect();
        let out = h.run_bufs(NodeId::OutputFeatures, v);
        assert_eq!(out.dropped(DropReason::AclDenied), 1);
        assert_eq!(out.count("tx 1"), 1);
        assert_eq!(
            hits.hits[0].load(Ordering::Relaxed),
            1,
            "the deny entry counted"
        );
        assert_eq!(
            hits.hits[1].load(Ordering::Relaxed),
            1,
            "the permit entry counted"
        );
        let line = h.trace(NodeId::OutputFeatures, &out.to["tx 1"][0], To::Tx(1));
        assert_eq!(line, "passed output features of eth1 [acl]");
    }
}
