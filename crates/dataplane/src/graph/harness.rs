//! A test harness for one node at a time: it pushes frames into a node, as the node before it
//! would have left them, runs that node alone, and returns what came out grouped by edge (the next
//! node, a port's transmit vector, the punt path) and the drops by reason.
//!
//! Its router: port 0 is `eth0` (10.0.0.1/24, 2001:db8::1/64), port 1 is `eth1` (10.1.0.1/24,
//! 2001:db8:1::1/64) with VLAN 100 as `eth1.100`; routes 10.1.0.0/24 and 2001:db8:1::/64 go out
//! of `eth1` to a known neighbour, 192.0.2.0/24 is a null route, 198.51.100.0/24 waits for its
//! neighbour's MAC, and the router's addresses are local. VLANs 200 and 300 of port 1
//! (`eth1.200`, `eth1.300`) are the members of bridge domain `lab` (id 7). [`Harness::with_bvi`]
//! gives `lab` a routed interface, `bvi7` (10.7.0.1/24), with a known neighbour at 10.7.0.5
//! (`HOST7`); the route to 10.7.0.0/24 is there either way.

use std::collections::BTreeMap;
use std::sync::Arc;

use fib::{EpochDomain, LpmConfig, LpmWriter};
use packet::checksum;
use packet::ethernet::MacAddr;

use super::{dispatch, NodeId, To};
use crate::buffer::{BufCache, PktBuf, Pool};
use crate::counters::DropReason;
use crate::node::Ctx;
use crate::tables::{Interface, NextHop, PortMap, Rewrite, Tables, Vrf, NO_IF};

pub const MAC0: [u8; 6] = [2, 0, 0, 0, 0, 1];
pub const MAC1: [u8; 6] = [2, 0, 0, 0, 0, 2];
pub const PEER1: [u8; 6] = [2, 0, 0, 0, 1, 2];

/// Next-hop ids of the harness's tables.
pub const NH_LOCAL: u32 = 1;
pub const NH_ETH1: u32 = 2;
pub const NH_BLACKHOLE: u32 = 3;
pub const NH_GLEAN: u32 = 4;
pub const NH_ETH0: u32 = 5;
pub const NH_BVI: u32 = 6;
/// [`Harness::with_mpls`]'s labelled next hop (16 over 17 via eth1's neighbour).
pub const NH_LSP: u32 = 7;

pub const MAC_BVI: [u8; 6] = [2, 0, 0, 0, 0, 7];
/// The neighbour at 10.7.0.5 behind `lab`'s routed interface.
pub const HOST7: [u8; 6] = [2, 0, 0, 0, 7, 5];
/// `bvi7`'s interface index and member id.
pub const BVI_IF: u32 = 7;
pub const BVI_MEMBER: u32 = 5;
/// [`Harness::with_gtp`]'s GTP-U address (10.0.0.10), next hops and APN interface.
pub const GTPU_ADDR: u32 = 0x0a00_000a;
pub const NH_GTPU: u32 = 7;
pub const NH_APN: u32 = 8;
pub const APN_IF: u32 = 7;

/// What one node did with the frames pushed into it.
#[derive(Default)]
pub struct Out {
    /// Frames per edge: a node's name, or "tx N" for port N's transmit vector.
    pub to: BTreeMap<String, Vec<PktBuf>>,
    pub drops: BTreeMap<DropReason, u64>,
}

impl Out {
    pub fn count(&self, edge: &str) -> usize {
        self.to.get(edge).map_or(0, Vec::len)
    }
    pub fn dropped(&self, why: DropReason) -> u64 {
        self.drops.get(&why).copied().unwrap_or(0)
    }
}

pub struct Harness {
    pub t: Tables,
    pub ctx: Ctx,
    /// The writers of the one VRF's FIBs, for routes added after the harness is made.
    v4w: LpmWriter<u32>,
    v6w: LpmWriter<u128>,
}

fn ifc(name: &str, port: u16, vlan: Option<u16>, mac: [u8; 6], v4: u32, v6: u128) -> Interface {
    Interface {
        name: name.into(),
        port,
        vlan,
        s_vlan: None,
        mac: MacAddr(mac),
        mtu: 1500,
        vrf: 0,
        up: true,
        v4: vec![(v4, 24)],
        v6: vec![(v6, 64)],
        punt_local: false,
        l2: None,
        bvi: None,
    }
}

impl Default for Harness {
    fn default() -> Self {
        Harness::new()
    }
}

impl Harness {
    pub fn new() -> Harness {
        let epoch = EpochDomain::new();
        let mut v4 = LpmWriter::<u32>::new(LpmConfig::v4(64), epoch.clone());
        let mut v6 = LpmWriter::<u128>::new(LpmConfig::v6(64), epoch);
        let ip4 = |a: [u8; 4]| u32::from_be_bytes(a);
        for (p, l, nh) in [
            (ip4([10, 0, 0, 1]), 32, NH_LOCAL),
            (ip4([10, 0, 0, 0]), 24, NH_ETH0),
            (ip4([10, 1, 0, 1]), 32, NH_LOCAL),
            (ip4([10, 1, 0, 0]), 24, NH_ETH1),
            (ip4([192, 0, 2, 0]), 24, NH_BLACKHOLE),
            (ip4([198, 51, 100, 0]), 24, NH_GLEAN),
            (ip4([10, 7, 0, 1]), 32, NH_LOCAL),
            (ip4([10, 7, 0, 0]), 24, NH_BVI),
        ] {
            v4.insert(p, l, nh).unwrap();
        }
        v6.insert(0x2001_0db8_0001 << 80, 64, NH_ETH1).unwrap();
        v6.insert(0x2001_0db8 << 96 | 1, 128, NH_LOCAL).unwrap();
        v6.insert(0x2001_0db8 << 96, 64, NH_ETH0).unwrap();
        v4.publish().unwrap();
        v6.publish().unwrap();
        let rw = |et| Rewrite::ethernet(MacAddr(PEER1), MacAddr(MAC1), None, et);
        let mut vlans = vec![NO_IF; 4096];
        vlans[100] = 2;
        vlans[200] = 3;
        vlans[300] = 4;
        let member = |name: &str, vlan: u16, member: u32| Interface {
            l2: Some(crate::l2::L2Port {
                bridge: 0,
                blocked: false,
                member,
                learn: true,
                l2pt: 0,
            }),
            v4: vec![],
            v6: vec![],
            ..ifc(name, 1, Some(vlan), MAC1, 0, 0)
        };
        let t = Tables {
            ifs: vec![
                ifc(
                    "eth0",
                    0,
                    None,
                    MAC0,
                    ip4([10, 0, 0, 1]),
                    0x2001_0db8 << 96 | 1,
                ),
                ifc(
                    "eth1",
                    1,
                    None,
                    MAC1,
                    ip4([10, 1, 0, 1]),
                    0x2001_0db8_0001 << 80 | 1,
                ),
                ifc(
                    "eth1.100",
                    1,
                    Some(100),
                    MAC1,
                    ip4([10, 2, 0, 1]),
                    0x2001_0db8_0002 << 80 | 1,
                ),
                member("eth1.200", 200, 1),
                member("eth1.300", 300, 2),
                // 802.1ad: S-tag 10 with C-tag 20, and every frame of S-tag 11.
                Interface {
                    s_vlan: Some(10),
                    ..member("eth1.10.20", 20, 3)
                },
                // ...tunnelling its customers' STP, CDP and LACP frames (L2PT).
                Interface {
                    s_vlan: Some(11),
                    vlan: None,
                    l2: Some(crate::l2::L2Port {
                        bridge: 0,
                        blocked: false,
                        member: 4,
                        learn: true,
                        l2pt: 7,
                    }),
                    ..member("eth1.11", 0, 4)
                },
            ]
            .into_boxed_slice(),
            bridges: vec![crate::l2::Bridge {
                name: "lab".into(),
                id: 7,
                members: vec![3, 4, 5, 6].into_boxed_slice(),
                flood_unknown: true,
                bpdu: Default::default(),
                bvi: NO_IF,
                snoop: None,
                dlsw: false,
                counters: Default::default(),
            }]
            .into_boxed_slice(),
            l2_members: vec![NO_IF, 3, 4, 5, 6].into_boxed_slice(),
            macs: Some(Arc::new(crate::l2::MacTable::new(4096))),
            ports: vec![
                PortMap {
                    untagged: 0,
                    tunnel: false,
                    vlans: Box::new([]),
                    qinq: Box::new([]),
                },
                PortMap {
                    untagged: 1,
                    tunnel: false,
                    vlans: vlans.into_boxed_slice(),
                    qinq: Box::new([
                        (PortMap::qinq_key(10, 20), 5),
                        (PortMap::qinq_key(11, crate::tables::ANY_C_TAG), 6),
                    ]),
                },
            ]
            .into_boxed_slice(),
            next_hops: vec![
                NextHop::NoRoute,
                NextHop::Local,
                NextHop::Forward {
                    tx_if: 1,
                    port: 1,
                    mtu: 1500,
                    rewrite: rw(0x0800),
                },
                NextHop::Blackhole,
                NextHop::Glean {
                    tx_if: 1,
                    neighbor: None,
                },
                NextHop::Forward {
                    tx_if: 0,
                    port: 0,
                    mtu: 1500,
                    rewrite: Rewrite::ethernet(
                        MacAddr([2, 0, 0, 0, 9, 9]),
                        MacAddr(MAC0),
                        None,
                        0x0800,
                    ),
                },
                NextHop::Forward {
                    tx_if: BVI_IF,
                    port: crate::tables::BVI_PORT,
                    mtu: 1500,
                    rewrite: Rewrite::ethernet(MacAddr(HOST7), MacAddr(MAC_BVI), None, 0x0800),
                },
            ]
            .into_boxed_slice(),
            vrfs: vec![Vrf {
                name: "default".into(),
                v4: v4.table().clone(),
                v6: v6.table().clone(),
            }]
            .into_boxed_slice(),
            ..Tables::empty(1000)
        };
        let cache = BufCache::new(Pool::new(1024));
        Harness {
            ctx: Ctx::new(cache, 2, 1000),
            t,
            v4w: v4,
            v6w: v6,
        }
    }

    /// The harness with `bvi7`, bridge `lab`'s routed interface (its MAC a static entry).
    pub fn with_bvi() -> Harness {
        let mut h = Harness::new();
        let mut ifs = h.t.ifs.to_vec();
        assert_eq!(ifs.len(), BVI_IF as usize);
        ifs.push(Interface {
            port: crate::tables::BVI_PORT,
            l2: Some(crate::l2::L2Port {
                bridge: 0,
                blocked: false,
                member: BVI_MEMBER,
                learn: false,
                l2pt: 0,
            }),
            bvi: Some(7),
            ..ifc("bvi7", 0, None, MAC_BVI, 0x0a07_0001, 0)
        });
        h.t.ifs = ifs.into_boxed_slice();
        let mut bridges = h.t.bridges.to_vec();
        bridges[0].bvi = BVI_IF;
        h.t.bridges = bridges.into_boxed_slice();
        let mut members = h.t.l2_members.to_vec();
        members.push(BVI_IF);
        h.t.l2_members = members.into_boxed_slice();
        let macs = h.t.macs.as_ref().expect("the harness has a MAC table");
        macs.set_static(crate::l2::MacKey::new(7, MAC_BVI), BVI_MEMBER)
            .expect("room");
        h
    }

    /// The harness as a GGSN: GTP-U address [`GTPU_ADDR`] (a host route to `GtpuLocal`), APN
    /// `internet` (index 0) with pools 10.64.0.0/16 and 2001:db8:100::/48 (by /64), its
    /// interface `apn-internet` ([`APN_IF`]) in the one VRF; contexts are the caller's to add
    /// to the table it returns. The SGSNs are on eth1 (10.1.0.0/24).
    pub fn with_gtp() -> (Harness, Arc<crate::gtp::GtpTable>) {
        let mut h = Harness::new();
        assert_eq!(
            (h.t.next_hops.len(), h.t.ifs.len()),
            (NH_GTPU as usize, APN_IF as usize)
        );
        let table = h.add_gtp();
        (h, table)
    }

    /// Makes the harness a GGSN (see [`Harness::with_gtp`]), its next hops and APN interface
    /// appended to what it has.
    pub fn add_gtp(&mut self) -> Arc<crate::gtp::GtpTable> {
        let h = self;
        let mut nhs = h.t.next_hops.to_vec();
        let (local, apn) = (nhs.len() as u32, nhs.len() as u32 + 1);
        nhs.push(NextHop::GtpuLocal);
        nhs.push(NextHop::GtpApn { apn: 0 });
        h.t.next_hops = nhs.into_boxed_slice();
        h.v4w.insert(GTPU_ADDR, 32, local).unwrap();
        h.v4w.insert(0x0a40_0000, 16, apn).unwrap();
        h.v6w.insert(0x2001_0db8_0100 << 80, 48, apn).unwrap();
        h.v4w.publish().unwrap();
        h.v6w.publish().unwrap();
        let mut ifs = h.t.ifs.to_vec();
        let ifx = ifs.len() as u32;
        ifs.push(Interface {
            port: crate::tables::TUNNEL_PORT,
            v4: vec![],
            v6: vec![],
            ..ifc("apn-internet", 0, None, [0; 6], 0, 0)
        });
        h.t.ifs = ifs.into_boxed_slice();
        let table = Arc::new(crate::gtp::GtpTable::new(
            1024,
            &[crate::gtp::ApnPools {
                v4: Some((0x0a40_0000, 65536)),
                v6: Some((0x2001_0db8_0100_0000, 65536)),
            }],
            1,
        ));
        h.t.gtpu = Some(Arc::new(crate::gtp::Gtpu {
            table: table.clone(),
            local_v4: GTPU_ADDR,
            gn_vrf: 0,
            apns: vec![crate::gtp::ApnPlane {
                name: "internet".into(),
                ifx,
            }]
            .into_boxed_slice(),
        }));
        table
    }

    /// The harness with multicast routing in its VRF: an empty multicast FIB, and multicast
    /// next hops (IPv4, IPv6) for eth0, eth1 and eth1.100.
    pub fn with_mcast() -> Harness {
        let mut h = Harness::new();
        h.add_mcast();
        h
    }

    /// Multicast routing in the harness's VRF (see [`Harness::with_mcast`]).
    pub fn add_mcast(&mut self) {
        let h = self;
        let mut nhs = h.t.next_hops.to_vec();
        let mut per_if = vec![[0u32; 2]; h.t.ifs.len()];
        for ifx in [0u32, 1, 2] {
            let i = &h.t.ifs[ifx as usize];
            for (fam, et) in [(0, 0x0800), (1, 0x86dd)] {
                per_if[ifx as usize][fam] = nhs.len() as u32;
                nhs.push(NextHop::Forward {
                    tx_if: ifx,
                    port: i.port,
                    mtu: i.mtu,
                    rewrite: Rewrite::ethernet(MacAddr([0; 6]), i.mac, i.vlan, et),
                });
            }
        }
        h.t.next_hops = nhs.into_boxed_slice();
        h.t.mcast_nh = per_if.into_boxed_slice();
        h.t.mcast_vrfs = Box::new([true]);
        // Its own epoch domain, with the harness's context as its one reader.
        let domain = EpochDomain::new();
        h.ctx.epoch = Some(domain.register());
        h.t.mfib = Some(Arc::new(crate::mfib::Mfib::new(64, domain)));
    }

    /// The harness with MPLS (see [`Harness::add_mpls`]).
    pub fn with_mpls() -> Harness {
        let mut h = Harness::new();
        assert_eq!(h.t.next_hops.len(), NH_LSP as usize);
        h.add_mpls();
        h
    }

    /// MPLS on eth0 and eth1. Labels: 100 swaps to 200 towards eth1's neighbour, 101 pops
    /// there (penultimate hop), 102 pops into the VRF (as if received on eth0), 103 swaps to
    /// 200 over 300; 1000 is pseudowire `pw0`. `pw0`: eth1.100 (VLAN 100), type 4 with the
    /// control word, to its peer over eth0's neighbour with labels 300 (transport) and 2000.
    /// 10.9.0.0/16 is labelled (16 over 17) towards eth1's neighbour (its next hop appended to
    /// the harness's: [`NH_LSP`] on a fresh harness).
    pub fn add_mpls(&mut self) {
        use crate::mpls::{LabelAction, LabelStack, LabelTable, Mpls, Pseudowire, VcType};
        let h = self;
        let st = |l: &[u32]| LabelStack::new(l).unwrap();
        let mut nhs = h.t.next_hops.to_vec();
        let lsp = nhs.len() as u32;
        nhs.push(NextHop::Labelled {
            via: NH_ETH1,
            labels: st(&[16, 17]),
        });
        h.t.next_hops = nhs.into_boxed_slice();
        h.v4w.insert(0x0a09_0000, 16, lsp).unwrap();
        h.v4w.publish().unwrap();
        let fwd = |push: &[u32]| LabelAction::Forward {
            nh: NH_ETH1,
            push: st(push),
        };
        let labels = LabelTable::new(
            vec![
                (100, fwd(&[200])),
                (101, fwd(&[])),
                (102, LabelAction::Lookup { ifx: 0 }),
                (103, fwd(&[200, 300])),
                (1000, LabelAction::Pseudowire { pw: 0 }),
            ],
            1,
        );
        let pw = Pseudowire {
            name: "pw0".into(),
            ac_if: 2,
            ac_port: 1,
            ac_vlan: Some(100),
            vc_type: VcType::Vlan,
            control_word: true,
            local_label: 1000,
            push: st(&[300, 2000]),
            nh: NH_ETH0,
            mtu: 1500,
            up: true,
        };
        h.t.mpls = Some(Arc::new(Mpls::new(
            labels,
            vec![pw],
            h.t.ifs.len(),
            &[0, 1],
            crate::mpls::TtlMode::Uniform,
            1,
        )));
    }

    /// A flow cache for the harness's worker (1,024 flows, no timeouts: records leave only when
    /// flushed or evicted), as `flow: in` / `flow: out` need.
    pub fn add_flows(&mut self) {
        let cache = flow::CacheConfig {
            capacity: 1024,
            active_timeout_ns: 0,
            inactive_timeout_ns: 0,
        };
        let shared = Arc::new(crate::feature::FlowShared::new(cache, 1, 1024));
        self.ctx.flows = Some(crate::feature::output::WorkerFlows::new(shared));
    }

    pub fn buf(&mut self, bytes: &[u8]) -> PktBuf {
        let mut b = self.ctx.cache.alloc().expect("the harness's pool has room");
        b.set_len(bytes.len());
        b.data_mut().copy_from_slice(bytes);
        b
    }

    /// Runs `node` alone on `frames`, received on `port`. Frames for a node after
    /// ethernet-input arrive as ethernet-input leaves them (the interface of `port`'s untagged
    /// frames, `l3_off` after the Ethernet header).
    pub fn push(&mut self, node: NodeId, port: u16, frames: &[Vec<u8>]) -> Out {
        let mut v: Vec<PktBuf> = frames.iter().map(|f| self.buf(f)).collect();
        if node != NodeId::EthernetInput {
            for b in v.iter_mut() {
                let m = b.meta_mut();
                m.rx_port = port;
                m.rx_if = self.t.ports[port as usize].untagged;
                m.l3_off = 14;
                m.l2_group = false;
            }
        }
        self.ctx.rx_port = port;
        self.run_bufs(node, v)
    }

    /// Runs `node` alone on buffers whose metadata the caller set.
    pub fn run_bufs(&mut self, node: NodeId, mut v: Vec<PktBuf>) -> Out {
        self.ctx.drops = [0; crate::counters::DROP_COUNT];
        dispatch(node, &mut self.ctx, &self.t, &mut v);
        assert!(v.is_empty(), "{} left frames in its input", node.name());
        let mut out = Out::default();
        for &n in NodeId::ALL {
            let got: Vec<PktBuf> = self.ctx.frames.v[n as usize].drain(..).collect();
            if !got.is_empty() {
                assert!(
                    node.next().contains(&n),
                    "{} sent to {}, which is not one of its edges",
                    node.name(),
                    n.name()
                );
                out.to.insert(n.name().into(), got);
            }
        }
        for (p, q) in self.ctx.out.iter_mut().enumerate() {
            if !q.is_empty() {
                assert!(node.transmits(), "{} transmitted", node.name());
                out.to.insert(format!("tx {p}"), std::mem::take(q));
            }
        }
        for (i, &d) in self.ctx.drops.iter().enumerate() {
            if d > 0 {
                out.drops.insert(DropReason::ALL[i], d);
            }
        }
        out
    }

    /// The trace line `node` writes for `b` sent to `to`.
    pub fn trace(&self, node: NodeId, b: &PktBuf, to: To) -> String {
        node.trace(&self.t, b, to)
    }
}

/// An Ethernet header to `dst` from a peer, of EtherType `et`.
pub fn eth(dst: [u8; 6], et: u16) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 9, 9]);
    f.extend_from_slice(&et.to_be_bytes());
    f
}

/// A labelled frame to the router's MAC on port 0: `labels` (label, TTL; the last at the bottom)
/// in front of `payload`.
pub fn mpls(labels: &[(u32, u8)], payload: &[u8]) -> Vec<u8> {
    let mut f = eth(MAC0, 0x8847);
    for (i, &(l, ttl)) in labels.iter().enumerate() {
        let s = u32::from(i + 1 == labels.len());
        f.extend_from_slice(&(l << 12 | s << 8 | u32::from(ttl)).to_be_bytes());
    }
    f.extend_from_slice(payload);
    f
}

/// A UDP-in-IPv4 frame to `dst` (the router's MAC on port 0) with this TTL.
pub fn ip4(src: [u8; 4], dst: [u8; 4], ttl: u8) -> Vec<u8> {
    let mut f = eth(MAC0, 0x0800);
    let mut h = [0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&28u16.to_be_bytes());
    h[8] = ttl;
    h[9] = 17;
    h[12..16].copy_from_slice(&src);
    h[16..20].copy_from_slice(&dst);
    let c = checksum::fold(checksum::sum(&h));
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 8, 0, 0]);
    f
}

/// A UDP-in-IPv6 frame to `dst` with this hop limit.
pub fn ip6(src: u128, dst: u128, hlim: u8) -> Vec<u8> {
    let mut f = eth(MAC0, 0x86dd);
    let mut h = [0u8; 40];
    h[0] = 0x60;
    h[4..6].copy_from_slice(&8u16.to_be_bytes());
    h[6] = 17;
    h[7] = hlim;
    h[8..24].copy_from_slice(&src.to_be_bytes());
    h[24..40].copy_from_slice(&dst.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 8, 0, 0]);
    f
}

/// An access list for `ifx`'s output arc that denies UDP to port 53 and permits the rest.
pub fn deny_dns_out(t: &mut Tables, ifx: usize) -> Arc<crate::feature::AclCounters> {
    let (acl, counters) = deny_dns();
    bind(
        t,
        ifx,
        vec![],
        vec![crate::feature::Step::Acl(Arc::new(acl))],
    );
    counters
}

/// An access list that denies UDP to port 53 and permits the rest, and its counters.
pub fn deny_dns() -> (crate::feature::Acl, Arc<crate::feature::AclCounters>) {
    let mut deny = classify::Rule::any();
    deny.ranges[classify::Dim::DstPort as usize] = (53, 53);
    let (mut a, _) = acl("NO-DNS", &[(deny, false)], classify::Rule::any());
    // Its last entry permits (a list whose own end is `permit`), counted as entry 1.
    a.entries[1].permit = true;
    let counters = a.lists[0].clone();
    (a, counters)
}

/// A compiled list `name` of `entries` (rule, permit), ending in `implicit` (its family's deny,
/// as the control plane compiles a list), and its counters; entries numbered 10, 20, ...
pub fn acl(
    name: &str,
    entries: &[(classify::Rule, bool)],
    implicit: classify::Rule,
) -> (crate::feature::Acl, Arc<crate::feature::AclCounters>) {
    use crate::feature::{Acl, AclCounters, AclEntry};
    let counters = Arc::new(AclCounters::new(name, entries.len()));
    let mut rules: Vec<classify::Rule> = entries.iter().map(|e| e.0).collect();
    rules.push(implicit);
    let meaning = entries
        .iter()
        .map(|e| e.1)
        .chain([false])
        .enumerate()
        .map(|(i, permit)| AclEntry {
            permit,
            log: false,
            list: 0,
            index: i as u32,
        })
        .collect();
    let a = Acl {
        classifier: classify::Classifier::compile(&rules),
        entries: meaning,
        lists: vec![counters.clone()].into_boxed_slice(),
        seqs: vec![(1..=entries.len() as u32).map(|s| s * 10).collect()].into_boxed_slice(),
    };
    (a, counters)
}

/// A QoS policy of one class matching everything, which sets DSCP `dscp` and MPLS EXP `exp`.
pub fn mark_all(dscp: Option<u8>, exp: Option<u8>) -> crate::feature::Qos {
    use crate::feature::{Qos, QosClass};
    Qos {
        policy: "MARK".into(),
        classifier: Arc::new(classify::Classifier::compile(&[classify::Rule::any()])),
        rule_class: vec![0u16].into(),
        classes: vec![QosClass {
            name: "all".into(),
            set_dscp: dscp,
            set_cos: None,
            set_exp: exp,
            policer: None,
            packets: Default::default(),
            bytes: Default::default(),
        }]
        .into_boxed_slice(),
        default_class: None,
    }
}

/// Binds feature arcs to `ifx` (replacing every other interface's).
pub fn bind(
    t: &mut Tables,
    ifx: usize,
    input: Vec<crate::feature::Step>,
    output: Vec<crate::feature::Step>,
) {
    let f = crate::feature::IfFeatures::new(input, output).unwrap();
    let mut all: Vec<_> = (0..t.ifs.len()).map(|_| None).collect();
    all[ifx] = Some(Arc::new(f));
    t.features = all.into_boxed_slice();
    t.any_features = true;
}
