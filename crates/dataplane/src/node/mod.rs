//! The nodes of the IP path (the graph, its table and its driver are in [`crate::graph`]), and
//! the scratch state they share, [`Ctx`].
//!
//! Each node's doc comment says which metadata it reads and sets and how it picks the next node.
//! Drops are counted by reason in [`Ctx`] and written to the worker's counters once per vector.

pub mod atm_input;
pub mod bvi_input;
pub mod bvi_output;
pub mod ethernet;
pub mod gtpu_encap;
pub mod gtpu_input;
pub mod ip4;
pub mod ip6;
pub mod ip_mcast;
pub mod l2_control;
pub mod l2_flood;
pub mod l2_input;
pub mod l2_mcast;
pub mod l2_output;
pub mod mpls_input;
pub mod pw_encap;
pub mod slow;

use crate::buffer::{BufCache, PktBuf};
use crate::counters::{DropReason, DROP_COUNT};
use crate::tables::{NextHop, Rewrite, Tables};

/// The most frames in one vector.
pub const VECTOR: usize = 256;

/// Why a packet left the fast path (carried to the slow path in `meta.slow`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum Slow {
    #[default]
    TtlExpired,
    NoRoute,
    Reject,
    /// Too big for the egress MTU (that of `meta.next_hop`) with DF set (IPv4) or at all (IPv6).
    TooBig,
    /// Too big, DF clear: fragment (IPv4), towards `meta.next_hop`.
    Fragment,
    /// IPv4 options or an IPv6 hop-by-hop header: forwarded by the scalar path.
    Options,
    Local,
    /// The next hop (`meta.next_hop`) waits for its neighbour's MAC address.
    Glean,
    /// A unicast destination that came in a link-layer broadcast or multicast frame: local
    /// delivery if it is the router's, otherwise dropped without an ICMP error.
    L2Group,
}

/// A worker's scratch state for one vector.
pub struct Ctx {
    pub cache: BufCache,
    /// Frames to transmit, per port (interface-output's input).
    pub out: Vec<Vec<PktBuf>>,
    /// Every other node's input (see [`crate::graph`]).
    pub frames: crate::graph::Frames,
    /// `show runtime`'s tally of this vector.
    pub runtime: crate::graph::Runtime,
    /// The port the vector being run was received on.
    pub rx_port: u16,
    /// Bytes received in the vector (counted by ethernet-input while the lines are hot).
    pub rx_bytes: u64,
    pub drops: [u64; DROP_COUNT],
    pub icmp: TokenBucket,
    pub icmp_sent: u64,
    pub icmp_rate_limited: u64,
    pub echo_replies: u64,
    pub slow_path: u64,
    pub(crate) tmp: Vec<PktBuf>,
    /// This worker's id (for captures and traces).
    pub worker: u16,
    /// Nanoseconds since the worker started, at the start of the vector.
    pub now_ns: u64,
    /// The same moment on the clock all workers share (`feature::clock_ns`): policers and flow
    /// records, which several workers update or compare, use this one.
    pub clock_ns: u64,
    /// Capture and trace recordings of this vector (see `tap`).
    pub tap: crate::tap::Scratch,
    pub taps: Option<std::sync::Arc<crate::tap::Taps>>,
    /// Classification keys of the run of packets a feature is working on.
    pub fkeys: Box<[classify::Key]>,
    pub(crate) egress_fate: Vec<crate::feature::input::Fate>,
    /// This worker's flow cache, while flow accounting is on.
    pub flows: Option<crate::feature::output::WorkerFlows>,
    pub acl_log: crate::feature::acl_log::Local,
    /// The punt and inject rings to the control plane, where there is one (a daemon on real
    /// ports); None in embedded runs, where ARP is not spoken and echo is answered here.
    pub punt: Option<crate::punt::WorkerPunt>,
    /// The punt table's policers (see `punt::policer`).
    pub punt_policer: crate::punt::PuntPolicer,
    /// The generation of the tables the vector is run with (punted frames carry it).
    pub generation: u64,
    /// The worker's registration with the tables' epoch domain (announced quiescent between
    /// vectors); a node borrows it to read a table whose memory is reclaimed by epochs (the
    /// multicast FIB, [`crate::mfib::Mfib::pin`]). None: such tables are not read.
    pub epoch: Option<fib::EpochReader>,
}

impl Ctx {
    pub fn new(cache: BufCache, ports: usize, icmp_rate: u32) -> Self {
        Self {
            cache,
            out: (0..ports).map(|_| Vec::with_capacity(VECTOR * 2)).collect(),
            frames: Default::default(),
            runtime: Default::default(),
            rx_port: 0,
            rx_bytes: 0,
            drops: [0; DROP_COUNT],
            icmp: TokenBucket::new(icmp_rate),
            icmp_sent: 0,
            icmp_rate_limited: 0,
            echo_replies: 0,
            slow_path: 0,
            tmp: Vec::with_capacity(VECTOR),
            worker: 0,
            now_ns: 0,
            clock_ns: 0,
            tap: Default::default(),
            taps: None,
            fkeys: vec![classify::Key::default(); VECTOR].into_boxed_slice(),
            egress_fate: Vec::with_capacity(VECTOR * 2),
            flows: None,
            acl_log: Default::default(),
            punt: None,
            punt_policer: Default::default(),
            generation: 0,
            epoch: None,
        }
    }

    /// Hands `b` to the control plane (see [`crate::punt`]) through its class's policer;
    /// without a punt path, or over the class's rate, or with the ring full, it is dropped and
    /// counted.
    pub fn punt(&mut self, b: PktBuf, class: crate::punt::PuntClass, tx_if: u32) {
        use crate::punt::{Outcome, PuntClass};
        if self.punt.is_none() {
            let why = match class {
                PuntClass::Glean => DropReason::NeighborUnresolved,
                _ => DropReason::LocalUnhandled,
            };
            return self.drop(b, why);
        }
        if !self.punt_policer.admit(class, self.now_ns) {
            return self.drop(b, DropReason::PuntPoliced);
        }
        if self.tap.active {
            self.tap.on_punt(&b, class);
        }
        let p = self.punt.as_mut().expect("checked");
        match p.offer(b, class, tx_if, self.generation) {
            Ok(()) => self.punt_policer.count(class, Outcome::Punted),
            Err(b) => {
                self.punt_policer.count(class, Outcome::QueueFull);
                self.drop(b, DropReason::PuntQueueFull)
            }
        }
    }

    /// Hands a copy of `b` to the control plane (class `class`) if the class's policer admits
    /// one now: the packet itself goes on, so a copy refused is counted as policed under the
    /// class, not as a drop; nothing without a punt path. `edit` changes the copy before it
    /// goes (the original is untouched).
    pub fn punt_copy(
        &mut self,
        b: &PktBuf,
        class: crate::punt::PuntClass,
        edit: impl FnOnce(&mut PktBuf),
    ) {
        use crate::punt::Outcome;
        if self.punt.is_none() || !self.punt_policer.admit(class, self.now_ns) {
            return;
        }
        let Some(mut cp) = crate::node::l2_flood::copy(self, b) else {
            return;
        };
        edit(&mut cp);
        if self.tap.active {
            self.tap.on_punt(&cp, class);
        }
        let generation = self.generation;
        let p = self.punt.as_mut().expect("checked");
        match p.offer(cp, class, crate::tables::NO_IF, generation) {
            Ok(()) => self.punt_policer.count(class, Outcome::Punted),
            Err(cp) => {
                self.punt_policer.count(class, Outcome::QueueFull);
                self.cache.free(cp);
            }
        }
    }

    /// Polices a packet of one of the slow path's own classes (`ttl-expired`, `options`):
    /// whether the slow path may handle it. Counted as punted or policed under the class.
    pub fn police(&mut self, class: crate::punt::PuntClass) -> bool {
        let ok = self.punt_policer.admit(class, self.now_ns);
        if ok {
            self.punt_policer.count(class, crate::punt::Outcome::Punted);
        }
        ok
    }

    /// Hands `b` to the slow path, for `why`.
    #[inline(always)]
    pub fn slow(&mut self, mut b: PktBuf, why: Slow) {
        b.meta_mut().slow = why;
        self.to(IpNext::SlowPath, b);
    }

    /// Counts `b` as dropped for `why` without freeing it: the slow path answers it with an
    /// ICMP error built from it first.
    #[inline(always)]
    pub fn count_drop(&mut self, b: &PktBuf, why: DropReason) {
        self.drops[why as usize] += 1;
        if self.tap.active {
            self.tap.on_drop(self.worker, b, why, self.taps.as_deref());
        }
    }

    #[inline(always)]
    pub fn drop(&mut self, b: PktBuf, why: DropReason) {
        self.drops[why as usize] += 1;
        if self.tap.active {
            self.tap.on_drop(self.worker, &b, why, self.taps.as_deref());
        }
        self.cache.free(b);
    }
}

/// ICMP error rate limiting: `rate` per second with a burst of a tenth of that (at least 10).
pub struct TokenBucket {
    rate: u32,
    burst: u32,
    tokens: u32,
    last_ns: u64,
}

impl TokenBucket {
    pub fn new(rate: u32) -> Self {
        let burst = (rate / 10).max(10).min(rate.max(1));
        Self {
            rate,
            burst,
            tokens: burst,
            last_ns: 0,
        }
    }

    /// Adds the tokens earned since the last call.
    pub fn refill(&mut self, now_ns: u64) {
        if self.rate == 0 {
            return;
        }
        let per = 1_000_000_000 / self.rate as u64;
        let earned = now_ns.saturating_sub(self.last_ns) / per.max(1);
        if earned > 0 {
            self.tokens = (self.tokens as u64 + earned).min(self.burst as u64) as u32;
            self.last_ns += earned * per;
        }
        if self.last_ns + per * (self.burst as u64) < now_ns {
            self.last_ns = now_ns;
        }
    }

    pub fn take(&mut self) -> bool {
        if self.tokens > 0 {
            self.tokens -= 1;
            true
        } else {
            false
        }
    }
}

/// The edges of the IP nodes (ip4-forward, ip6-forward, slow-path): besides transmitting, a
/// packet goes to the slow path or, when an interface on its way has output features, to them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpNext {
    SlowPath,
    /// Multicast beyond the link scope in a VRF that routes it.
    Mcast,
    OutputFeatures,
    /// Out of a bridge's routed interface: switched by its bridge.
    Bridge,
    /// To the GGSN's GTP-U address: decapsulated.
    GtpuInput,
    /// To a UE in an APN's pool: tunnelled to its SGSN.
    GtpuEncap,
}

/// The edges of a node that hands packets to L3 by their IP version (bvi-input, atm-input).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToIp {
    Ip4,
    Ip6,
}

impl crate::graph::Edge for ToIp {
    const ALL: &'static [Self] = &[ToIp::Ip4, ToIp::Ip6];
    #[inline(always)]
    fn node(self) -> crate::graph::NodeId {
        match self {
            ToIp::Ip4 => crate::graph::NodeId::Ip4Forward,
            ToIp::Ip6 => crate::graph::NodeId::Ip6Forward,
        }
    }
}

impl crate::graph::Edge for IpNext {
    const ALL: &'static [Self] = &[
        IpNext::SlowPath,
        IpNext::Mcast,
        IpNext::OutputFeatures,
        IpNext::Bridge,
        IpNext::GtpuInput,
        IpNext::GtpuEncap,
    ];
    #[inline(always)]
    fn node(self) -> crate::graph::NodeId {
        match self {
            IpNext::SlowPath => crate::graph::NodeId::SlowPath,
            IpNext::Mcast => crate::graph::NodeId::IpMcast,
            IpNext::OutputFeatures => crate::graph::NodeId::OutputFeatures,
            IpNext::Bridge => crate::graph::NodeId::BviOutput,
            IpNext::GtpuInput => crate::graph::NodeId::GtpuInput,
            IpNext::GtpuEncap => crate::graph::NodeId::GtpuEncap,
        }
    }
}

/// What a next hop asks of a packet, the same for both address families.
pub enum Action<'t> {
    Transmit {
        port: u16,
        mtu: u16,
        rewrite: &'t Rewrite,
    },
    Slow(Slow),
    Drop(DropReason),
    /// Handed whole (TTL untouched) to another node: GTP-U decapsulation or encapsulation.
    Node(IpNext),
    /// Transmit with `labels` pushed in front of the packet; `mtu` is the egress interface's
    /// less the labels.
    Push {
        tx_if: u32,
        port: u16,
        mtu: u16,
        rewrite: &'t Rewrite,
        labels: crate::mpls::LabelStack,
    },
}

/// Resolves next hop `nh` (an ECMP group to one member, by `hash`, computed only for groups);
/// returns the next hop used and what to do.
#[inline(always)]
pub fn resolve(t: &Tables, nh: u32, hash: impl FnOnce() -> u32) -> (u32, Action<'_>) {
    let nh = ecmp_member(t, nh, hash);
    let a = match &t.next_hops[nh as usize] {
        NextHop::Forward {
            port, mtu, rewrite, ..
        } => Action::Transmit {
            port: *port,
            mtu: *mtu,
            rewrite,
        },
        NextHop::NoRoute => Action::Slow(Slow::NoRoute),
        NextHop::Local => Action::Slow(Slow::Local),
        NextHop::Reject => Action::Slow(Slow::Reject),
        NextHop::Glean { .. } => Action::Slow(Slow::Glean),
        NextHop::Blackhole => Action::Drop(DropReason::Blackhole),
        NextHop::Down { .. } => Action::Drop(DropReason::InterfaceDown),
        NextHop::GtpuLocal => Action::Node(IpNext::GtpuInput),
        NextHop::GtpApn { .. } => Action::Node(IpNext::GtpuEncap),
        NextHop::Labelled { via, labels } => match &t.next_hops[*via as usize] {
            NextHop::Forward {
                tx_if,
                port,
                mtu,
                rewrite,
            } => Action::Push {
                tx_if: *tx_if,
                port: *port,
                mtu: mtu.saturating_sub(4 * labels.len() as u16),
                rewrite,
                labels: *labels,
            },
            // The control plane resolves a labelled route's neighbour before traffic needs it
            // (`scan_next_hops`); a packet held for it would leave without its labels.
            NextHop::Glean { .. } => Action::Drop(DropReason::NeighborUnresolved),
            NextHop::Down { .. } => Action::Drop(DropReason::InterfaceDown),
            _ => Action::Drop(DropReason::NoRoute),
        },
        // ECMP members are Forward next hops; a nested group is a control-plane bug.
        NextHop::Ecmp(_) => Action::Drop(DropReason::NoRoute),
    };
    (nh, a)
}

/// Next hop `nh`, or if it is an ECMP group the member the packet's flow `hash` picks.
#[inline(always)]
pub fn ecmp_member(t: &Tables, nh: u32, hash: impl FnOnce() -> u32) -> u32 {
    match &t.next_hops[nh as usize] {
        // A path object of one member (FPM's single next hops) needs no flow hash.
        NextHop::Ecmp(members) => match members.len() {
            1 => members[0],
            n => members[pick(hash(), n)],
        },
        _ => nh,
    }
}

/// The second half of both forwarding nodes: looks `keys` up in each packet's VRF (as one batch
/// when the whole vector shares a VRF, the usual case) and hands each packet to `forward`.
/// `flows_in`: the input features left flow keys for packets whose interface accounts flows
/// in; they are accounted between the lookup and forwarding (the family's ECMP flow hash
/// given, to name the member the packet will leave by).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn lookup_and_forward<K: fib::Key>(
    ctx: &mut Ctx,
    t: &Tables,
    good: &mut Vec<PktBuf>,
    keys: &[K],
    vrf: Option<u32>,
    fib: impl Fn(&crate::tables::Vrf) -> &fib::LpmTable<K>,
    forward: fn(&mut Ctx, &Tables, PktBuf, u32, bool),
    flows_in: Option<fn(&PktBuf) -> u32>,
) {
    let n = good.len();
    let mut nhs = [0u32; VECTOR];
    match vrf {
        Some(v) => fib(&t.vrfs[v as usize]).lookup_batch(&keys[..n], &mut nhs[..n]),
        None => {
            for i in 0..n {
                let v = t.ifs[good[i].meta().rx_if as usize].vrf;
                nhs[i] = fib(&t.vrfs[v as usize]).lookup(keys[i]);
            }
        }
    }
    if let Some(hash) = flows_in {
        crate::feature::output::account_routed(ctx, t, good, &mut nhs[..n], hash);
    }
    for (i, b) in good.drain(..).enumerate() {
        forward(ctx, t, b, nhs[i], true);
    }
}

/// Queues a forwarded packet for `port`, through the output features (`feature::output`) when
/// the interface it leaves by has any or the one it came in by accounts flows.
#[inline(always)]
pub(crate) fn enqueue(ctx: &mut Ctx, t: &Tables, b: PktBuf, port: u16) {
    if t.any_features {
        if let NextHop::Forward { tx_if, .. } = &t.next_hops[b.meta().next_hop as usize] {
            if crate::feature::output::needed(t, &b, *tx_if) {
                return ctx.to(IpNext::OutputFeatures, b);
            }
        }
    }
    send(ctx, t, b, port, IpNext::Bridge);
}

/// Does a packet leaving over an LSP by `tx_if` take the output features first (the interface
/// has some, or the one it came in by accounts flows)? They see the IP packet, and push the
/// labels when it passes ([`impose`]).
#[inline(always)]
pub(crate) fn labelled_needs_features(t: &Tables, b: &PktBuf, tx_if: u32) -> bool {
    t.any_features && crate::feature::output::needed(t, b, tx_if)
}

/// Hands an IP packet leaving over an LSP to the output features, its L2 header written for
/// the neighbour; they push the labels when it passes.
#[inline(never)]
pub(crate) fn labelled_to_features(ctx: &mut Ctx, mut b: PktBuf, rw: &Rewrite) {
    if !rewrite_l2(&mut b, rw) {
        return ctx.drop(b, DropReason::NoBuffer);
    }
    ctx.to(IpNext::OutputFeatures, b);
}

/// The traffic class of labels pushed on a packet: what QoS chose (`meta.exp`, plus one), else
/// the IP precedence (the DSCP's class selector).
#[inline(always)]
pub(crate) fn label_tc(exp: u8, precedence: u8) -> u8 {
    match exp {
        0 => precedence,
        x => x - 1,
    }
}

/// Pushes `labels` on the IP packet at `meta.l3_off` and sends it out of `port` with L2
/// header `rw` (output-features, once the packet has passed). The labels carry the IP TTL
/// (uniform) or 255 (pipe), and as traffic class [`label_tc`].
#[inline(always)]
pub(crate) fn impose<E: crate::graph::Edge>(
    ctx: &mut Ctx,
    t: &Tables,
    mut b: PktBuf,
    port: u16,
    rw: &Rewrite,
    labels: &crate::mpls::LabelStack,
    bridge: E,
) {
    let h = &b.data()[b.meta().l3_off as usize..];
    let (ip_ttl, precedence) = if h[0] >> 4 == 4 {
        (h[8], h[1] >> 5)
    } else {
        (h[7], h[0] << 4 >> 5)
    };
    let ttl = mpls_input::push_ttl(t, ip_ttl);
    let tc = label_tc(b.meta().exp, precedence);
    if !push_labels(&mut b, rw, labels, tc, ttl, true) {
        return ctx.drop(b, DropReason::NoBuffer);
    }
    send(ctx, t, b, port, bridge);
}

/// Sends a routed packet (its L2 header written for next hop `meta.next_hop`) out of `port`:
/// onto the port's transmit vector, or along `bridge` (an edge to bvi-output) when the next hop
/// leads out of a bridge's routed interface ([`crate::tables::BVI_PORT`]).
#[inline(always)]
pub(crate) fn send<E: crate::graph::Edge>(
    ctx: &mut Ctx,
    t: &Tables,
    b: PktBuf,
    port: u16,
    bridge: E,
) {
    if port == crate::tables::BVI_PORT {
        return bvi_output::to_bridge(ctx, t, b, bridge);
    }
    ctx.tx(port, b);
}

/// The trace line of the IP nodes: where the packet goes and why.
pub(crate) fn trace_ip(t: &Tables, b: &PktBuf, to: crate::graph::To) -> String {
    use crate::graph::{NodeId, To};
    match to {
        To::Node(NodeId::SlowPath) => slow_text(b.meta().slow),
        To::Node(NodeId::OutputFeatures) => {
            format!("{}, through output features", forward_decision(t, b))
        }
        _ => forward_decision(t, b),
    }
}

fn forward_decision(t: &Tables, b: &PktBuf) -> String {
    let nh = b.meta().next_hop;
    match t.next_hops.get(nh as usize) {
        Some(NextHop::Forward { tx_if, rewrite, .. }) => {
            let ifc = t
                .ifs
                .get(*tx_if as usize)
                .map(|i| i.name.as_str())
                .unwrap_or("?");
            let r = &rewrite.bytes;
            format!(
                "next hop {nh}: out {ifc}, to {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                r[0], r[1], r[2], r[3], r[4], r[5]
            )
        }
        Some(other) => format!("next hop {nh}: {other:?}"),
        None => format!("next hop {nh}"),
    }
}

fn slow_text(s: Slow) -> String {
    match s {
        Slow::TtlExpired => "TTL / hop limit expired".into(),
        Slow::NoRoute => "no route".into(),
        Slow::Reject => "route rejects".into(),
        Slow::TooBig => "larger than the egress MTU".into(),
        Slow::Fragment => "to be fragmented".into(),
        Slow::Options => "IPv4 options or IPv6 hop-by-hop header".into(),
        Slow::Local => "addressed to the router".into(),
        Slow::Glean => "waiting for the next hop's MAC address".into(),
        Slow::L2Group => "unicast destination in a link-layer broadcast or multicast frame".into(),
    }
}

/// Replaces the L2 header in front of `meta.l3_off` with `rw`, growing into the headroom or
/// shrinking as needed. Reads and sets `meta.l3_off`.
#[inline(always)]
pub fn rewrite_l2(b: &mut PktBuf, rw: &Rewrite) -> bool {
    let l3 = b.meta().l3_off as usize;
    let new = rw.len as usize;
    if new > l3 {
        if !b.push_front(new - l3) {
            return false;
        }
    } else if new < l3 {
        b.pull_front(l3 - new);
    }
    b.meta_mut().l3_off = new as u16;
    b.data_mut()[..new].copy_from_slice(&rw.bytes[..new]);
    true
}

/// Pushes `labels` in front of what starts at `meta.l3_off` (an IP packet, or labels still under
/// a popped one) and then the L2 header `rw` (its EtherType made MPLS), the labels carrying
/// `ttl` and traffic class `tc`, the last one the bottom-of-stack bit if `bottom` (nothing is
/// under it but the payload). Sets `meta.l3_off` to the first label. False when the headroom is
/// short.
#[inline(always)]
pub fn push_labels(
    b: &mut PktBuf,
    rw: &Rewrite,
    labels: &crate::mpls::LabelStack,
    tc: u8,
    ttl: u8,
    bottom: bool,
) -> bool {
    let l3 = b.meta().l3_off as usize;
    let new = rw.len as usize + 4 * labels.len();
    if new > l3 {
        if !b.push_front(new - l3) {
            return false;
        }
    } else if new < l3 {
        b.pull_front(l3 - new);
    }
    let n = rw.len as usize;
    let d = b.data_mut();
    d[..n].copy_from_slice(&rw.bytes[..n]);
    d[n - 2..n].copy_from_slice(&crate::mpls::ETHERTYPE_MPLS.to_be_bytes());
    labels.write(&mut d[n..new], tc, ttl, bottom);
    b.meta_mut().l3_off = n as u16;
    true
}

/// The flow hash used to pick among equal-cost next hops: a multiply-xorshift mix of the
/// addresses, protocol and ports (and the IPv6 flow label), so a flow always takes one path.
#[inline]
pub fn mix(a: u64, b: u64) -> u64 {
    let x = (a ^ b.rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^ (x >> 31)
}

/// Maps a 32-bit hash onto 0..n without a division.
#[inline(always)]
pub fn pick(hash: u32, n: usize) -> usize {
    ((hash as u64 * n as u64) >> 32) as usize
}

#[inline(always)]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_bucket_limits_to_rate() {
        let mut tb = TokenBucket::new(100);
        let mut sent = 0;
        // 2 seconds in 1 ms steps, trying 5 per step.
        for ms in 0..2000u64 {
            tb.refill(ms * 1_000_000);
            for _ in 0..5 {
                if tb.take() {
                    sent += 1;
                }
            }
        }
        // The initial burst (10) plus 100 per second.
        assert!((205..=212).contains(&sent), "sent {sent}");
    }

    #[test]
    fn pick_spreads_evenly() {
        let mut counts = [0u32; 7];
        for i in 0..70_000u64 {
            counts[pick(mix(i, i * 31) as u32, 7)] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }
}
