//! The forwarding state workers read: interfaces, the next-hop (adjacency) table and one IPv4 and
//! one IPv6 LPM per VRF. The control plane builds a new `Tables` whenever interfaces, next hops or
//! VRFs change and publishes it whole (an atomically swapped `Arc`); workers pick up the new
//! version at their next vector. Routes change more often and more finely: the LPMs inside are
//! updated in place by their writers (see `fib::lpm`), without a new `Tables`.

use std::sync::Arc;

use arc_swap::ArcSwap;
use fib::LpmTable;
use packet::ethernet::MacAddr;

/// Interface index meaning "none".
pub const NO_IF: u32 = u32::MAX;

/// The `port` of a bridge's routed interface (BVI), which has no port of its own: what is sent
/// out of it is switched by its bridge (`node::bvi_output`) to the member its destination is on.
pub const BVI_PORT: u16 = u16::MAX;

/// The `port` of a tunnel's interface (an APN's), which has no port: packets arrive on it
/// decapsulated and leave it encapsulated, never as frames of a port.
pub const TUNNEL_PORT: u16 = u16::MAX - 1;

#[derive(Clone, Debug)]
pub struct Interface {
    pub name: String,
    /// The port it is on; [`BVI_PORT`] for a bridge's routed interface.
    pub port: u16,
    /// 802.1Q VLAN id of a sub-interface; None for the port's untagged interface. With `s_vlan`
    /// it is the inner (customer) tag.
    pub vlan: Option<u16>,
    /// 802.1ad service tag (TPID 0x88a8) of a Q-in-Q sub-interface: with `vlan`, frames with
    /// exactly this S-tag and C-tag; alone, every frame with this S-tag (what is inside it,
    /// customer tag included, is payload). Such interfaces are bridge members only.
    pub s_vlan: Option<u16>,
    pub mac: MacAddr,
    /// IP MTU: the largest L3 packet sent out of this interface.
    pub mtu: u16,
    pub vrf: u32,
    pub up: bool,
    /// Addresses with prefix length; the first is the source of ICMP errors sent from here.
    pub v4: Vec<(u32, u8)>,
    pub v6: Vec<(u128, u8)>,
    /// Traffic for the router arriving here goes up the punt path (the interface has a TAP twin
    /// in the kernel); otherwise the data plane answers echo requests and drops the rest.
    pub punt_local: bool,
    /// A member of a bridge domain: its frames are switched (`l2-input`), not routed. A
    /// bridge's routed interface has one too (its MAC is a static entry of its member id).
    pub l2: Option<crate::l2::L2Port>,
    /// A bridge's routed interface (BVI): the id of its bridge (`Bridge::id`). Frames to its
    /// MAC, and the copies of what the bridge floods, are routed as if received here
    /// (`node::bvi_input`); its port is [`BVI_PORT`].
    pub bvi: Option<u16>,
}

/// How a port's frames map to interfaces.
#[derive(Clone, Debug)]
pub struct PortMap {
    pub untagged: u32,
    /// Every frame, tagged or not, belongs to the untagged interface: a bridge member in
    /// dot1q-tunnel mode (a customer's tags are payload, carried inside the provider's tag).
    pub tunnel: bool,
    /// Indexed by VLAN id; empty when the port has no sub-interfaces.
    pub vlans: Box<[u32]>,
    /// 802.1ad sub-interfaces: (key, interface) sorted by key, [`PortMap::qinq_key`].
    pub qinq: Box<[(u32, u32)]>,
}

/// A Q-in-Q key's inner tag meaning "any C-tag, or none".
pub const ANY_C_TAG: u16 = 0xffff;

impl PortMap {
    #[inline]
    pub fn by_vlan(&self, vid: u16) -> u32 {
        self.vlans.get(vid as usize).copied().unwrap_or(NO_IF)
    }

    pub fn qinq_key(s: u16, c: u16) -> u32 {
        u32::from(s) << 16 | u32::from(c)
    }

    /// The 802.1ad sub-interface of S-tag `s` and C-tag `c` ([`ANY_C_TAG`]: the S-tag's own).
    #[inline]
    pub fn by_qinq(&self, s: u16, c: u16) -> u32 {
        let k = Self::qinq_key(s, c);
        self.qinq
            .binary_search_by_key(&k, |e| e.0)
            .map_or(NO_IF, |i| self.qinq[i].1)
    }
}

/// How an ATM VC's PDUs carry packets (RFC 2684).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtmEncap {
    /// LLC/SNAP: each PDU says what it carries (routed IPv4, IPv6).
    LlcSnap,
    /// VC multiplexing: the VC carries one protocol, with no header.
    VcMuxIpv4,
    VcMuxIpv6,
}

/// The PVCs of an ATM port: VC key (`packet::atm::vc_key`) to interface and encapsulation.
#[derive(Clone, Debug)]
pub struct AtmVcMap {
    pub index: crate::atm::VcIndex,
    /// Indexed by what `index` returns: (interface, encapsulation).
    pub vcs: Box<[(u32, AtmEncap)]>,
}

impl AtmVcMap {
    pub fn new(vcs: &[(u32, u32, AtmEncap)]) -> Self {
        AtmVcMap {
            index: crate::atm::VcIndex::new(vcs.iter().map(|v| v.0)),
            vcs: vcs.iter().map(|v| (v.1, v.2)).collect(),
        }
    }

    #[inline(always)]
    pub fn get(&self, key: u32) -> Option<(u32, AtmEncap)> {
        self.index.get(key).map(|i| self.vcs[i])
    }
}

/// The L2 header to write in front of a forwarded packet (Ethernet, with a VLAN tag for a
/// sub-interface), precomputed so forwarding is one copy.
#[derive(Clone, Copy, Debug)]
pub struct Rewrite {
    pub bytes: [u8; 18],
    pub len: u8,
}

impl Rewrite {
    /// An ATM PVC's: the SunATM pseudo-header naming the VC (read by the port's segmenter),
    /// then the RFC 2684 LLC/SNAP header for `ethertype` (none for a VC-multiplexed VC).
    pub fn atm(vc: u32, encap: AtmEncap, ethertype: u16) -> Self {
        let mut bytes = [0u8; 18];
        let traffic = match encap {
            AtmEncap::LlcSnap => packet::atm::SUNATM_LLC,
            AtmEncap::VcMuxIpv4 | AtmEncap::VcMuxIpv6 => packet::atm::SUNATM_VC_MUX,
        };
        bytes[..4].copy_from_slice(&packet::atm::sunatm(vc, traffic));
        let len = match encap {
            AtmEncap::LlcSnap => {
                bytes[4..12].copy_from_slice(if ethertype == 0x86dd {
                    &packet::atm::LLC_SNAP_IPV6
                } else {
                    &packet::atm::LLC_SNAP_IPV4
                });
                12
            }
            AtmEncap::VcMuxIpv4 | AtmEncap::VcMuxIpv6 => 4,
        };
        Self { bytes, len }
    }

    /// `ethertype` is the EtherType of the payload (0x0800 or 0x86dd).
    pub fn ethernet(dst: MacAddr, src: MacAddr, vlan: Option<u16>, ethertype: u16) -> Self {
        let mut bytes = [0u8; 18];
        let len = packet::ethernet::Header {
            dst,
            src,
            tags: packet::ethernet::Tags::from_vlan(vlan),
            ethertype,
        }
        .emit(&mut bytes)
        .expect("18 bytes hold a header with one tag");
        Self {
            bytes,
            len: len as u8,
        }
    }
}

/// What a route resolves to. Id 0 is always `NoRoute`: the LPM answers 0 when nothing matches.
#[derive(Clone, Debug)]
pub enum NextHop {
    /// Nothing matched: drop, ICMP destination unreachable (net).
    NoRoute,
    /// Send out of `tx_if` with this L2 header.
    Forward {
        tx_if: u32,
        port: u16,
        mtu: u16,
        rewrite: Rewrite,
    },
    /// Equal-cost multipath: one of these `Forward` next hops, chosen by the flow hash.
    Ecmp(Box<[u32]>),
    /// Addressed to the router itself.
    Local,
    /// A neighbour whose MAC address is not known yet (`neighbor`), or a connected subnet whose
    /// destination is the neighbour (None): punted to the control plane, which holds the packet
    /// and resolves the address with ARP or ND; dropped and counted where there is no punt path.
    Glean {
        tx_if: u32,
        neighbor: Option<std::net::IpAddr>,
    },
    /// Through an interface that is down (its port was removed): dropped and counted.
    Down { tx_if: u32 },
    /// Silently discarded (a null route).
    Blackhole,
    /// Discarded with ICMP destination unreachable, administratively prohibited.
    Reject,
    /// The GGSN's GTP-U address (a host route in the Gn VRF, [`crate::gtp::Gtpu::gn_vrf`]):
    /// G-PDUs to it are decapsulated (gtpu-input); anything else to it is the router's own
    /// traffic, as for `Local`.
    GtpuLocal,
    /// An APN's address pool (routes in the APN's VRF): packets to a UE are tunnelled to its
    /// SGSN (gtpu-encap). `apn` indexes [`crate::gtp::Gtpu::apns`].
    GtpApn { apn: u16 },
    /// Out of neighbour next hop `via` (a `Forward`) with `labels` pushed in front of the packet:
    /// a route over an LSP, or an L3VPN route (the VPN label under the transport labels).
    Labelled {
        via: u32,
        labels: crate::mpls::LabelStack,
    },
}

impl NextHop {
    /// Addressed to the router itself (its own addresses, the GGSN's GTP-U address among them).
    pub fn is_local(&self) -> bool {
        matches!(self, NextHop::Local | NextHop::GtpuLocal)
    }
}

pub struct Vrf {
    pub name: String,
    pub v4: Arc<LpmTable<u32>>,
    pub v6: Arc<LpmTable<u128>>,
}

pub struct Tables {
    pub ifs: Box<[Interface]>,
    pub ports: Box<[PortMap]>,
    pub next_hops: Box<[NextHop]>,
    pub vrfs: Box<[Vrf]>,
    /// ICMP errors each worker may send per second (RFC 1812 4.3.2.8 rate limiting).
    pub icmp_rate: u32,
    /// Per interface: the features bound to it (ACLs, QoS, uRPF, flow accounting), if any.
    pub features: Box<[Option<Arc<crate::feature::IfFeatures>>]>,
    /// Some interface has features: the one check forwarding makes when none has.
    pub any_features: bool,
    /// Flow accounting's settings and export queue, when any interface accounts flows.
    pub flow: Option<Arc<crate::feature::FlowShared>>,
    /// Where logged ACL matches go, when any entry logs.
    pub acl_log: Option<Arc<crate::feature::acl_log::AclLogSink>>,
    /// Forward IPv4 packets to class E destinations (240.0.0.0/4), which RFC 1812 5.3.7 says a
    /// router should not: for the rare network that has made them unicast.
    pub route_class_e: bool,
    /// The punt table's rates and bursts (control-plane protection).
    pub punt: Arc<crate::punt::PuntLimits>,
    /// Which build of the router these tables come from: every config commit builds a new one,
    /// whose interface and next-hop indexes may differ. Punted frames carry it, so the control
    /// plane reads a frame's `rx_if` against the interface list the worker used.
    pub generation: u64,
    /// Bridge domains (indexed by `L2Port::bridge`), the interface each MAC table member id
    /// is today (`NO_IF` for a member removed), and the MAC table they share (None without
    /// bridges). The table outlives commits: learned addresses stay.
    pub bridges: Box<[crate::l2::Bridge]>,
    pub l2_members: Box<[u32]>,
    pub macs: Option<Arc<crate::l2::MacTable>>,
    /// Storm control per member id (None: none on that member).
    pub l2_storm: Box<[Option<Arc<crate::l2::bridge::StormControl>>]>,
    /// IGMP/MLD snooping's groups, shared by the bridges that snoop (None without them); like
    /// the MAC table it outlives commits.
    pub snoop: Option<Arc<crate::l2::snoop::SnoopTable>>,
    /// The multicast FIB, where some VRF routes multicast (see [`crate::mfib`]).
    pub mfib: Option<Arc<crate::mfib::Mfib>>,
    /// Per VRF: it routes multicast (else multicast beyond the link scope is dropped).
    pub mcast_vrfs: Box<[bool]>,
    /// Per interface: the next hops multicast copies leave it by, IPv4 and IPv6 (a `Forward`
    /// whose rewrite has the interface's MAC as source; the group's MAC is written per packet);
    /// 0 where it routes no multicast.
    pub mcast_nh: Box<[[u32; 2]]>,
    /// The GGSN's user plane, when it is configured (see [`crate::gtp`]).
    pub gtpu: Option<Arc<crate::gtp::Gtpu>>,
    /// Per port: its PVCs, for a port that carries ATM cells (its frames are PDUs, received by
    /// atm-input); empty when no port does.
    pub atm: Box<[Option<Arc<AtmVcMap>>]>,
    /// The label table and pseudowires, when some interface takes MPLS (see [`crate::mpls`]).
    pub mpls: Option<Arc<crate::mpls::Mpls>>,
}

impl Tables {
    /// Tables with nothing in them: every frame is dropped as arriving on an unknown interface.
    pub fn empty(icmp_rate: u32) -> Tables {
        Tables {
            ifs: Box::new([]),
            ports: Box::new([]),
            next_hops: vec![NextHop::NoRoute].into_boxed_slice(),
            vrfs: Box::new([]),
            icmp_rate,
            features: Box::new([]),
            any_features: false,
            flow: None,
            acl_log: None,
            route_class_e: false,
            punt: Default::default(),
            generation: 0,
            bridges: Box::new([]),
            l2_members: Box::new([]),
            macs: None,
            l2_storm: Box::new([]),
            snoop: None,
            mfib: None,
            mcast_vrfs: Box::new([]),
            mcast_nh: Box::new([]),
            gtpu: None,
            atm: Box::new([]),
            mpls: None,
        }
    }
}

impl Tables {
    /// Whether VRF `vrf` routes multicast.
    #[inline(always)]
    pub fn routes_mcast(&self, vrf: u32) -> bool {
        self.mcast_vrfs.get(vrf as usize).copied().unwrap_or(false)
    }

    /// Port `port`'s PVCs, if it carries ATM cells.
    #[inline(always)]
    pub fn atm_port(&self, port: u16) -> Option<&AtmVcMap> {
        self.atm.get(port as usize)?.as_deref()
    }
}

/// Where the current tables are published.
pub type SharedTables = Arc<ArcSwap<Tables>>;
