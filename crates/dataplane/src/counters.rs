//! Counters. Each worker owns its counters and is their only writer, so an update is a plain
//! load and store (no locked instruction); readers sum across workers. Per-packet counts are kept
//! in locals during a vector and written out once per vector.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! reasons {
    ($($v:ident => $s:literal,)*) => {
        /// Why a frame was dropped. Every drop has exactly one.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(u8)]
        pub enum DropReason { $($v,)* }
        impl DropReason {
            pub const ALL: &'static [DropReason] = &[$(DropReason::$v,)*];
            pub const COUNT: usize = Self::ALL.len();
            /// Human text, as `show errors` prints it.
            pub fn text(self) -> &'static str {
                match self { $(DropReason::$v => $s,)* }
            }
            /// Stable machine name (metrics label, JSON key).
            pub fn name(self) -> &'static str {
                match self { $(DropReason::$v => stringify!($v),)* }
            }
        }
    };
}

reasons! {
    NotForUs => "destination MAC is not ours",
    UnknownEthertype => "EtherType not handled",
    UnknownVlan => "no sub-interface for the VLAN",
    UnknownVc => "no ATM sub-interface for the VC",
    AtmNotIp => "ATM PDU carrying neither IPv4 nor IPv6 (LLC/SNAP header unknown, or bridged)",
    InterfaceDown => "interface is down",
    BadLength => "frame shorter than its headers claim",
    Ip4BadHeader => "IPv4 header malformed (version, IHL)",
    Ip4BadChecksum => "IPv4 header checksum wrong",
    Ip4Martian => "IPv4 martian source or destination (RFC 1812 5.3.7)",
    L2GroupUnicast => "unicast IP in a link-layer broadcast or multicast frame (RFC 1812 5.3.4)",
    Ip6BadHeader => "IPv6 header malformed",
    Ip6Scope => "IPv6 link-local or multicast not forwarded",
    TtlExpired => "TTL or hop limit expired",
    NoRoute => "no route to destination",
    Blackhole => "null route",
    Reject => "route rejects (administratively prohibited)",
    NeighborUnresolved => "next hop has no known MAC address",
    MtuExceeded => "packet larger than egress MTU",
    LocalUnhandled => "addressed to the router, no service for it",
    TxQueueFull => "transmit queue full",
    NoBuffer => "no buffer for a generated packet",
    AclDenied => "denied by an access list",
    PolicerDropped => "dropped by a policer",
    UrpfFailed => "source address fails the reverse-path check (uRPF)",
    PuntPoliced => "punt to the control plane over its class's rate",
    PuntQueueFull => "punt queue to the control plane full",
    MulticastNotRouted => "multicast beyond the link scope (no multicast routing)",
    L2SameInterface => "bridged to the interface it came in on (filtered)",
    L2UnknownUnicast => "unknown unicast destination; the bridge domain does not flood",
    L2BpduDropped => "spanning-tree BPDU; the bridge domain drops them",
    L2NoFloodMember => "flooded with no other member up in the bridge domain",
    L2StormControl => "flooded frame over its member's storm-control rate",
    L2Blocked => "received on a Flexlink member on standby (blocking)",
    BviNotIp => "neither IP nor ARP, to a bridge's routed interface",
    McastMalformed => "IGMP or MLD message malformed (length, checksum, fields)",
    McastNoListener => "multicast to a group nobody joined, in a bridge that does not flood such groups and has no multicast router",
    McastNoRoute => "routed multicast with no (S,G) or (*,G) route and no control plane to ask",
    McastWrongIf => "routed multicast from another interface than its route's RPF interface",
    McastTtl => "routed multicast whose TTL or hop limit would expire (no ICMP error for multicast)",
    McastNoOutput => "routed multicast whose route has no output interface for it (pruned)",
    McastTooBig => "a multicast copy larger than its output interface's MTU",
    GtpuMalformed => "GTP-U header malformed (version, length, extension headers) or a fragment",
    GtpuUnknownTeid => "G-PDU for a TEID with no PDP context, and no control plane to answer it",
    GtpuSpoofed => "uplink packet whose source is not its PDP context's address (anti-spoofing)",
    GtpuBadInner => "G-PDU whose payload is not an IP packet of its PDP context's type",
    GtpNoContext => "downlink packet to a pool address with no PDP context",
    MplsNotEnabled => "labelled frame on an interface that does not take MPLS",
    MplsUnknownLabel => "no entry for the top label",
    MplsTtlExpired => "label TTL expired (counted; no ICMP error is built from a labelled packet)",
    MplsMalformed => "label stack truncated or deeper than four, or its payload not what the label says",
    MplsTooBig => "labelled packet or pseudowire frame larger than the egress MTU",
    PwDown => "frame for a pseudowire that is down",
}

pub const DROP_COUNT: usize = DropReason::COUNT;

/// Port slots every worker counts for: ports are added at run time, and a port's counters must
/// exist before its first frame. A port's index is its slot for as long as it exists.
pub const MAX_PORTS: usize = 256;

impl DropReason {
    /// The node that owns this reason, as `show errors` groups them (each node declares its
    /// reasons in the graph: [`crate::graph::Node::DROPS`]).
    pub fn node(self) -> &'static str {
        crate::graph::NodeId::of_drop(self)
    }
}

/// One port's counters within one worker.
#[derive(Default)]
pub struct PortCounters {
    pub rx_packets: AtomicU64,
    pub rx_bytes: AtomicU64,
    /// Frames that arrived but could not be taken in: for a capture file, records skipped
    /// (longer than a buffer, not Ethernet) or unreadable. Not in `rx_packets`.
    pub rx_errors: AtomicU64,
    pub tx_packets: AtomicU64,
    pub tx_bytes: AtomicU64,
}

/// Everything one worker counts.
pub struct WorkerCounters {
    pub ports: Box<[PortCounters]>,
    pub drops: [AtomicU64; DROP_COUNT],
    pub icmp_sent: AtomicU64,
    pub icmp_rate_limited: AtomicU64,
    pub echo_replies: AtomicU64,
    pub slow_path: AtomicU64,
    pub vectors: AtomicU64,
    /// Nanoseconds spent on vectors that carried frames (the worker's busy time).
    pub busy_ns: AtomicU64,
    /// Per graph node (and interface-output, last): `show runtime`'s counts.
    pub nodes: [crate::graph::NodeCounters; crate::graph::NODE_ROWS],
    /// Per punt class: punted, policed, queue full.
    pub punt: [crate::punt::PuntClassCounters; crate::punt::CLASSES],
}

#[inline(always)]
pub fn bump(c: &AtomicU64, n: u64) {
    // Single writer: a plain read-modify-write is exact and avoids a locked instruction.
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl WorkerCounters {
    pub fn new(ports: usize) -> Self {
        Self {
            ports: (0..ports).map(|_| PortCounters::default()).collect(),
            drops: std::array::from_fn(|_| AtomicU64::new(0)),
            icmp_sent: AtomicU64::new(0),
            icmp_rate_limited: AtomicU64::new(0),
            echo_replies: AtomicU64::new(0),
            slow_path: AtomicU64::new(0),
            vectors: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            nodes: std::array::from_fn(|_| Default::default()),
            punt: std::array::from_fn(|_| Default::default()),
        }
    }
}

/// A plain snapshot, summed over workers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub rx_packets: Vec<u64>,
    pub rx_bytes: Vec<u64>,
    pub rx_errors: Vec<u64>,
    pub tx_packets: Vec<u64>,
    pub tx_bytes: Vec<u64>,
    pub drops: Vec<u64>,
    pub icmp_sent: u64,
    pub icmp_rate_limited: u64,
    pub echo_replies: u64,
    pub slow_path: u64,
    pub vectors: u64,
    pub busy_ns: u64,
}

impl Snapshot {
    pub fn sum(workers: &[std::sync::Arc<WorkerCounters>], ports: usize) -> Snapshot {
        let mut s = Snapshot {
            rx_packets: vec![0; ports],
            rx_bytes: vec![0; ports],
            rx_errors: vec![0; ports],
            tx_packets: vec![0; ports],
            tx_bytes: vec![0; ports],
            drops: vec![0; DROP_COUNT],
            ..Default::default()
        };
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        for w in workers {
            for (p, c) in w.ports.iter().enumerate().take(ports) {
                s.rx_packets[p] += r(&c.rx_packets);
                s.rx_bytes[p] += r(&c.rx_bytes);
                s.rx_errors[p] += r(&c.rx_errors);
                s.tx_packets[p] += r(&c.tx_packets);
                s.tx_bytes[p] += r(&c.tx_bytes);
            }
            for (d, c) in s.drops.iter_mut().zip(w.drops.iter()) {
                *d += r(c);
            }
            s.icmp_sent += r(&w.icmp_sent);
            s.icmp_rate_limited += r(&w.icmp_rate_limited);
            s.echo_replies += r(&w.echo_replies);
            s.slow_path += r(&w.slow_path);
            s.vectors += r(&w.vectors);
            s.busy_ns += r(&w.busy_ns);
        }
        s
    }

    pub fn drop_count(&self, d: DropReason) -> u64 {
        self.drops[d as usize]
    }

    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }
}
