//! Rule sets for tests and benchmarks: the XR-5 list, ClassBench-style sets, an L2/L3/L4 mix,
//! and traces. Everything is deterministic from a seed ([`SmallRng`]).
//!
//! # XR-5 ([`xr5`], [`xr5_with_target`], [`xr5_traffic`])
//!
//! `n_deny` DENY entries, then one PERMIT ALL ([`Rule::any`]) at index `n_deny`. Every DENY entry
//! is UDP and exact in all four fields (source host, destination host, source port, destination
//! port), and no two entries can merge into a range: no two are equal, and no two differ in one
//! field alone by one (an address or a port next to the other's). Half of them (rounded down) take
//! their addresses from the streams (`src` from the sources, `dst` from the destinations, chosen
//! independently, so paired and meshed streams are both covered); the rest are random hosts
//! (IPv4 in 1.0.0.0-223.255.255.255, IPv6 in 2000::/3). The two halves are shuffled together.
//!
//! Ports: both ports of every DENY entry are drawn from [`XR5_PORTS`] (10000-60000). The XR-5
//! traffic uses destination ports 5000-7500 and one source port per stream (the tester's default
//! is 1024), so an entry never matches a stream's packet even when its addresses are the stream's:
//! the destination port alone rules it out, whatever the source port. The range also keeps clear
//! of the well-known ports and the tester's defaults. [`xr5_traffic`] is that traffic: every key
//! matches only the final PERMIT.
//!
//! [`xr5_with_target`] puts one given flow's exact 5-tuple at the last DENY (index `n_deny - 1`,
//! the 5,000th of XR-5 part 2); no other entry matches that flow.
//!
//! # ClassBench-style sets ([`classbench`])
//!
//! Imitations of the ClassBench seeds acl1, fw1 and ipc1 (Taylor and Turner, 2005): not their
//! parameter files, but the same shape. `n` rules, the last a default (the family's EtherType, all
//! else wildcard), no duplicates, random order. Per rule:
//!
//! - **Addresses**, clustered: a pool of sites (about √n, at least 4; an IPv4 /12 or an IPv6 /32 in
//!   2000::/3), each with 8 subnets (an IPv4 /24 or an IPv6 /64 inside the site). A rule picks a
//!   site and a subnet with Zipf weights (the i-th with weight 1/(i+1)), random host bits, and cuts
//!   the result to its prefix length. Rules therefore share leading bits and nest, as real ones do.
//!   Sources and destinations have separate pools.
//! - **Prefix lengths** (IPv4; weight in percent):
//!
//!   | kind | source | destination |
//!   |------|--------|-------------|
//!   | acl  | 0:8 8:2 16:10 20:5 24:20 27:5 28:10 30:5 32:35 | 0:2 16:5 23:5 24:25 26:5 28:8 29:5 30:5 32:40 |
//!   | fw   | 0:30 8:5 16:10 24:15 28:5 32:35 | 0:15 16:5 24:20 28:5 30:5 32:50 |
//!   | ipc  | 0:15 8:5 16:15 24:25 28:5 32:35 | 0:10 16:10 24:30 28:10 32:40 |
//!
//!   IPv6 maps each IPv4 length: 0→0, 1-8→32, 9-16→40, 17-20→44, 21-24→48, 25-27→56, 28-29→64,
//!   30-31→96, 32→128.
//! - **Port classes** (percent, in the order WC / HI 1024-65535 / LO 0-1023 / EM exact / AR
//!   arbitrary range), source port then destination port:
//!
//!   | kind | source port | destination port |
//!   |------|-------------|------------------|
//!   | acl  | 95/2/0/2/1  | 20/8/2/55/15     |
//!   | fw   | 70/15/0/10/5| 20/10/5/40/25    |
//!   | ipc  | 70/5/2/15/8 | 35/10/5/40/10    |
//!
//!   EM takes a common service port ([`COMMON_PORTS`]) 70% of the time, else any of 1-65535. AR
//!   takes a common range ([`COMMON_RANGES`]) 60% of the time, else a random start and a width of
//!   2^k (k in 1..=12).
//! - **Protocol** (percent TCP / UDP / ICMP / any): acl 70/20/5/5, fw 50/25/5/20, ipc 45/30/10/15.
//!   ICMP is 1 for IPv4 and 58 for IPv6. ICMP and any-protocol rules have wildcard ports.
//! - **Order**: no rule has both addresses wild (only the default does). Rules are sorted by their
//!   volume (log2 of the 5-tuples they cover) plus uniform noise worth 40 bits, so broad rules
//!   tend to come late, as in hand-written lists, without a strict order; otherwise an early
//!   broad rule shadows most of what follows and deep rules are never reached.
//!
//! # The ME 6524 ACL ([`l2_mix`])
//!
//! The "10,000-line ACL of L2/L3/L4 entries": 25% L2 entries (source MAC, destination MAC, both,
//! an EtherType such as ARP, LLDP, MPLS or PPPoE, a VLAN, a VLAN and PCP, or a VLAN and source
//! MAC), 60% IPv4 and 15% IPv6 entries drawn as in the acl kind, shuffled, then PERMIT ALL.
//!
//! # Traces ([`trace`])
//!
//! As ClassBench's trace generator does, most keys (90%) are points inside a randomly chosen rule
//! (uniform over the list, so deep rules are exercised; the key may still match an earlier,
//! overlapping rule), and the rest (10%) are uniformly random keys of the set's family. Keys are
//! consistent: the EtherType is the family's (0x0800 or 0x86dd), IPv4 keys have zero in the upper
//! address words, ports and TCP flags are zero unless the protocol has them, most keys are
//! untagged and unfragmented. No header is repeated on purpose (ClassBench's Pareto locality is
//! left out, so caches get no help).

use std::collections::HashSet;
use std::ops::RangeInclusive;

use rand::distributions::{Distribution, WeightedIndex};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::rule::{Dim, Frag, Key, Rule, ETHERTYPE_IPV4, ETHERTYPE_IPV6};

/// An address family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn bits(self) -> u8 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }

    pub fn ethertype(self) -> u32 {
        match self {
            Family::V4 => ETHERTYPE_IPV4,
            Family::V6 => ETHERTYPE_IPV6,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Family::V4 => "ipv4",
            Family::V6 => "ipv6",
        }
    }

    fn icmp(self) -> u8 {
        match self {
            Family::V4 => 1,
            Family::V6 => 58,
        }
    }
}

/// An IP address: `u32` for IPv4, `u128` for IPv6 (host order, most significant bit first).
pub trait Addr: Copy + Eq + std::hash::Hash + std::fmt::Debug {
    const FAMILY: Family;
    fn to_u128(self) -> u128;
    /// The low bits of `v` for IPv4.
    fn from_u128(v: u128) -> Self;
}

impl Addr for u32 {
    const FAMILY: Family = Family::V4;
    fn to_u128(self) -> u128 {
        self as u128
    }
    fn from_u128(v: u128) -> Self {
        v as u32
    }
}

impl Addr for u128 {
    const FAMILY: Family = Family::V6;
    fn to_u128(self) -> u128 {
        self
    }
    fn from_u128(v: u128) -> Self {
        v
    }
}

/// `r` with a source prefix of family `fam` (and that family's EtherType).
pub fn with_src(r: Rule, fam: Family, addr: u128, len: u8) -> Rule {
    match fam {
        Family::V4 => r.src_v4(addr as u32, len),
        Family::V6 => r.src_v6(addr, len),
    }
}

/// `r` with a destination prefix of family `fam` (and that family's EtherType).
pub fn with_dst(r: Rule, fam: Family, addr: u128, len: u8) -> Rule {
    match fam {
        Family::V4 => r.dst_v4(addr as u32, len),
        Family::V6 => r.dst_v6(addr, len),
    }
}

fn set_src(k: &mut Key, fam: Family, a: u128) {
    match fam {
        Family::V4 => k.set(Dim::Src0, a as u32),
        Family::V6 => k.set_src_v6(a),
    }
}

fn set_dst(k: &mut Key, fam: Family, a: u128) {
    match fam {
        Family::V4 => k.set(Dim::Dst0, a as u32),
        Family::V6 => k.set_dst_v6(a),
    }
}

// ------------------------------------------------------------------------------------------ XR-5

/// One UDP flow: the 5-tuple of a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Flow<A> {
    pub src: A,
    pub dst: A,
    pub sport: u16,
    pub dport: u16,
}

impl<A: Addr> Flow<A> {
    /// The key of this flow's (unfragmented, untagged) UDP packets.
    pub fn key(&self) -> Key {
        let fam = A::FAMILY;
        let mut k = Key::default();
        k.set(Dim::EtherType, fam.ethertype());
        set_src(&mut k, fam, self.src.to_u128());
        set_dst(&mut k, fam, self.dst.to_u128());
        k.set(Dim::Proto, 17);
        k.set(Dim::SrcPort, self.sport as u32);
        k.set(Dim::DstPort, self.dport as u32);
        k
    }

    /// The one rule that matches this flow exactly (UDP, both hosts, both ports).
    pub fn rule(&self) -> Rule {
        let fam = A::FAMILY;
        let b = fam.bits();
        let r = with_src(Rule::any(), fam, self.src.to_u128(), b);
        with_dst(r, fam, self.dst.to_u128(), b)
            .proto(17)
            .src_ports(self.sport, self.sport)
            .dst_ports(self.dport, self.dport)
    }
}

/// The ports of XR-5's DENY entries (both source and destination): clear of the traffic's
/// destination ports (5000-7500), its source ports (1024 by default) and the well-known ports.
pub const XR5_PORTS: RangeInclusive<u16> = 10000..=60000;

/// The XR-5 traffic's destination ports.
pub const XR5_TRAFFIC_DPORTS: RangeInclusive<u16> = 5000..=7500;

/// The XR-5 list: `n_deny` DENY entries, then PERMIT ALL (see the module doc).
pub fn xr5<A: Addr>(n_deny: usize, stream_src: &[A], stream_dst: &[A], seed: u64) -> Vec<Rule> {
    xr5_with_target(n_deny, stream_src, stream_dst, None, seed)
}

/// The XR-5 list with `target` (when given) as the last DENY, index `n_deny - 1`; no other entry
/// matches it. The entries before it are the same kind as [`xr5`]'s.
pub fn xr5_with_target<A: Addr>(
    n_deny: usize,
    stream_src: &[A],
    stream_dst: &[A],
    target: Option<Flow<A>>,
    seed: u64,
) -> Vec<Rule> {
    let fam = A::FAMILY;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut taken: HashSet<Flow<u128>> = HashSet::with_capacity(n_deny * 2);
    let widen = |f: Flow<A>| Flow {
        src: f.src.to_u128(),
        dst: f.dst.to_u128(),
        sport: f.sport,
        dport: f.dport,
    };
    if let Some(t) = target {
        taken.insert(widen(t));
    }
    let others = n_deny.saturating_sub(target.is_some() as usize);
    let from_streams = if stream_src.is_empty() || stream_dst.is_empty() {
        0
    } else {
        n_deny / 2
    };
    let mut entries: Vec<Flow<u128>> = Vec::with_capacity(n_deny);
    while entries.len() < others {
        let (src, dst) = if entries.len() < from_streams {
            (
                stream_src[rng.gen_range(0..stream_src.len())].to_u128(),
                stream_dst[rng.gen_range(0..stream_dst.len())].to_u128(),
            )
        } else {
            (random_host(&mut rng, fam), random_host(&mut rng, fam))
        };
        let f = Flow {
            src,
            dst,
            sport: rng.gen_range(XR5_PORTS),
            dport: rng.gen_range(XR5_PORTS),
        };
        if taken.contains(&f) || has_neighbour(&taken, &f) {
            continue;
        }
        taken.insert(f);
        entries.push(f);
    }
    entries.shuffle(&mut rng);
    let mut rules: Vec<Rule> = entries
        .iter()
        .map(|f| {
            Flow {
                src: A::from_u128(f.src),
                dst: A::from_u128(f.dst),
                sport: f.sport,
                dport: f.dport,
            }
            .rule()
        })
        .collect();
    if let Some(t) = target {
        rules.push(t.rule());
    }
    rules.push(Rule::any());
    rules
}

/// Is there an entry that differs from `f` in one field alone, by one?
fn has_neighbour(taken: &HashSet<Flow<u128>>, f: &Flow<u128>) -> bool {
    let mut near = Vec::with_capacity(8);
    for d in [1u128, u128::MAX] {
        near.push(Flow {
            src: f.src.wrapping_add(d),
            ..*f
        });
        near.push(Flow {
            dst: f.dst.wrapping_add(d),
            ..*f
        });
    }
    for d in [1u16, u16::MAX] {
        near.push(Flow {
            sport: f.sport.wrapping_add(d),
            ..*f
        });
        near.push(Flow {
            dport: f.dport.wrapping_add(d),
            ..*f
        });
    }
    near.iter().any(|n| taken.contains(n))
}

/// A unicast host: IPv4 in 1.0.0.0-223.255.255.255, IPv6 in 2000::/3.
fn random_host(rng: &mut SmallRng, fam: Family) -> u128 {
    match fam {
        Family::V4 => rng.gen_range(0x0100_0000u32..=0xdfff_ffff) as u128,
        Family::V6 => (rng.gen::<u128>() >> 3) | (1u128 << 125),
    }
}

/// XR-5's traffic: `n` keys of UDP flows between random stream sources and destinations, source
/// port `sport`, destination ports over [`XR5_TRAFFIC_DPORTS`]. Against [`xr5`]'s list every key
/// matches only the final PERMIT.
pub fn xr5_traffic<A: Addr>(
    stream_src: &[A],
    stream_dst: &[A],
    sport: u16,
    n: usize,
    seed: u64,
) -> Vec<Key> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            Flow {
                src: stream_src[rng.gen_range(0..stream_src.len())],
                dst: stream_dst[rng.gen_range(0..stream_dst.len())],
                sport,
                dport: rng.gen_range(XR5_TRAFFIC_DPORTS),
            }
            .key()
        })
        .collect()
}

// ------------------------------------------------------------------------------------ ClassBench

/// Which ClassBench seed a set imitates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Access control lists (acl1): specific destinations, exact destination ports.
    Acl,
    /// Firewalls (fw1): many wildcard addresses, port ranges.
    Fw,
    /// IP chains (ipc1): a mix of both.
    Ipc,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Acl => "acl",
            Kind::Fw => "fw",
            Kind::Ipc => "ipc",
        }
    }

    fn profile(self) -> &'static Profile {
        match self {
            Kind::Acl => &ACL,
            Kind::Fw => &FW,
            Kind::Ipc => &IPC,
        }
    }
}

impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Kind, String> {
        match s {
            "acl" => Ok(Kind::Acl),
            "fw" => Ok(Kind::Fw),
            "ipc" => Ok(Kind::Ipc),
            _ => Err(format!("unknown ClassBench kind '{s}' (acl, fw, ipc)")),
        }
    }
}

/// Weights in percent. Port classes: WC, HI, LO, EM, AR. Protocols: TCP, UDP, ICMP, any.
struct Profile {
    src_len: &'static [(u8, u32)],
    dst_len: &'static [(u8, u32)],
    sport: [u32; 5],
    dport: [u32; 5],
    proto: [u32; 4],
}

const ACL: Profile = Profile {
    src_len: &[
        (0, 8),
        (8, 2),
        (16, 10),
        (20, 5),
        (24, 20),
        (27, 5),
        (28, 10),
        (30, 5),
        (32, 35),
    ],
    dst_len: &[
        (0, 2),
        (16, 5),
        (23, 5),
        (24, 25),
        (26, 5),
        (28, 8),
        (29, 5),
        (30, 5),
        (32, 40),
    ],
    sport: [95, 2, 0, 2, 1],
    dport: [20, 8, 2, 55, 15],
    proto: [70, 20, 5, 5],
};

const FW: Profile = Profile {
    src_len: &[(0, 30), (8, 5), (16, 10), (24, 15), (28, 5), (32, 35)],
    dst_len: &[(0, 15), (16, 5), (24, 20), (28, 5), (30, 5), (32, 50)],
    sport: [70, 15, 0, 10, 5],
    dport: [20, 10, 5, 40, 25],
    proto: [50, 25, 5, 20],
};

const IPC: Profile = Profile {
    src_len: &[(0, 15), (8, 5), (16, 15), (24, 25), (28, 5), (32, 35)],
    dst_len: &[(0, 10), (16, 10), (24, 30), (28, 10), (32, 40)],
    sport: [70, 5, 2, 15, 8],
    dport: [35, 10, 5, 40, 10],
    proto: [45, 30, 10, 15],
};

/// Service ports an EM (exact match) port takes most often.
pub const COMMON_PORTS: &[u16] = &[
    20, 21, 22, 23, 25, 53, 67, 68, 69, 80, 88, 110, 123, 135, 137, 138, 139, 143, 161, 162, 179,
    389, 443, 445, 465, 514, 587, 636, 993, 995, 1433, 1521, 1723, 1812, 3306, 3389, 5060, 5432,
    8080, 8443,
];

/// Ranges an AR (arbitrary range) port takes most often.
pub const COMMON_RANGES: &[(u16, u16)] = &[
    (20, 21),
    (137, 139),
    (1024, 5000),
    (1024, 49151),
    (5060, 5061),
    (6000, 6063),
    (6881, 6889),
    (8000, 8080),
    (10000, 20000),
    (16384, 32767),
    (33434, 33534),
    (49152, 65535),
];

/// Site and subnet prefix lengths of the address pools.
fn pool_lens(fam: Family) -> (u8, u8) {
    match fam {
        Family::V4 => (12, 24),
        Family::V6 => (32, 64),
    }
}

/// The IPv6 length standing for an IPv4 one.
fn v6_len(v4: u8) -> u8 {
    match v4 {
        0 => 0,
        1..=8 => 32,
        9..=16 => 40,
        17..=20 => 44,
        21..=24 => 48,
        25..=27 => 56,
        28..=29 => 64,
        30..=31 => 96,
        _ => 128,
    }
}

fn mask(fam: Family, len: u8) -> u128 {
    let bits = fam.bits() as u32;
    let all = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    if len == 0 {
        0
    } else if len as u32 >= bits {
        all
    } else {
        all & !(all >> len as u32)
    }
}

/// Clustered addresses: sites, subnets inside them, Zipf-weighted.
struct Pool {
    fam: Family,
    sites: Vec<(u128, Vec<u128>)>,
    site_pick: WeightedIndex<f64>,
    subnet_pick: WeightedIndex<f64>,
}

impl Pool {
    fn new(fam: Family, n_sites: usize, rng: &mut SmallRng) -> Pool {
        const SUBNETS: usize = 8;
        let (site_len, subnet_len) = pool_lens(fam);
        let sites = (0..n_sites)
            .map(|_| {
                let site = random_host(rng, fam) & mask(fam, site_len);
                let subnets = (0..SUBNETS)
                    .map(|_| {
                        let r = rng.gen::<u128>() & !mask(fam, site_len);
                        site | (r & mask(fam, subnet_len))
                    })
                    .collect();
                (site, subnets)
            })
            .collect();
        let zipf = |n: usize| WeightedIndex::new((0..n).map(|i| 1.0 / (i + 1) as f64)).unwrap();
        Pool {
            fam,
            sites,
            site_pick: zipf(n_sites),
            subnet_pick: zipf(SUBNETS),
        }
    }

    /// An address of `len` bits: a site's subnet, random host bits, cut to `len`.
    fn prefix(&self, rng: &mut SmallRng, len: u8) -> u128 {
        let fam = self.fam;
        let (_, subnets) = &self.sites[self.site_pick.sample(rng)];
        let subnet = subnets[self.subnet_pick.sample(rng)];
        let (_, subnet_len) = pool_lens(fam);
        let host = rng.gen::<u128>() & !mask(fam, subnet_len) & mask(fam, fam.bits());
        (subnet | host) & mask(fam, len)
    }
}

fn weighted<T: Copy>(rng: &mut SmallRng, items: &[(T, u32)]) -> T {
    let total: u32 = items.iter().map(|x| x.1).sum();
    let mut x = rng.gen_range(0..total);
    for &(v, w) in items {
        if x < w {
            return v;
        }
        x -= w;
    }
    items[items.len() - 1].0
}

fn port_range(rng: &mut SmallRng, weights: [u32; 5]) -> (u16, u16) {
    let class = weighted(
        rng,
        &[
            (0, weights[0]),
            (1, weights[1]),
            (2, weights[2]),
            (3, weights[3]),
            (4, weights[4]),
        ],
    );
    match class {
        0 => (0, u16::MAX),
        1 => (1024, u16::MAX),
        2 => (0, 1023),
        3 => {
            let p = if rng.gen_bool(0.7) {
                *COMMON_PORTS.choose(rng).unwrap()
            } else {
                rng.gen_range(1..=u16::MAX)
            };
            (p, p)
        }
        _ => {
            if rng.gen_bool(0.6) {
                *COMMON_RANGES.choose(rng).unwrap()
            } else {
                let width = 1u32 << rng.gen_range(1..=12);
                let lo = rng.gen_range(0..=u16::MAX as u32 - (width - 1));
                (lo as u16, (lo + width - 1) as u16)
            }
        }
    }
}

/// A ClassBench-style set of `n` rules (at least 1): `n - 1` distinct rules of `kind`, then the
/// family's default rule (see the module doc).
pub fn classbench(kind: Kind, fam: Family, n: usize, seed: u64) -> Vec<Rule> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let sites = ((n as f64).sqrt() as usize).max(4);
    let src_pool = Pool::new(fam, sites, &mut rng);
    let dst_pool = Pool::new(fam, sites, &mut rng);
    let want = n.saturating_sub(1);
    let mut seen = HashSet::with_capacity(n);
    let mut rules = Vec::with_capacity(n);
    let mut tries = 0usize;
    while rules.len() < want && tries < want * 100 + 1000 {
        tries += 1;
        let r = classbench_rule(kind, fam, &src_pool, &dst_pool, &mut rng);
        if seen.insert(r) {
            rules.push(r);
        }
    }
    // Broad rules tend to come late, as in real lists, but only tend: a rule's place is its
    // volume plus noise worth 40 bits.
    let mut keyed: Vec<(f64, Rule)> = rules
        .into_iter()
        .map(|r| (volume_bits(&r) + rng.gen_range(0.0..40.0), r))
        .collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut rules: Vec<Rule> = keyed.into_iter().map(|(_, r)| r).collect();
    rules.push(Rule::any().exact(Dim::EtherType, fam.ethertype()));
    rules
}

/// log2 of the number of 5-tuples a rule covers.
fn volume_bits(r: &Rule) -> f64 {
    [
        Dim::Src0,
        Dim::Src1,
        Dim::Src2,
        Dim::Src3,
        Dim::Dst0,
        Dim::Dst1,
        Dim::Dst2,
        Dim::Dst3,
        Dim::Proto,
        Dim::SrcPort,
        Dim::DstPort,
    ]
    .iter()
    .map(|&d| {
        let (lo, hi) = r.range(d);
        ((hi - lo) as f64 + 1.0).log2()
    })
    .sum()
}

fn classbench_rule(
    kind: Kind,
    fam: Family,
    src_pool: &Pool,
    dst_pool: &Pool,
    rng: &mut SmallRng,
) -> Rule {
    let p = kind.profile();
    let len = |rng: &mut SmallRng, table: &[(u8, u32)]| {
        let l = weighted(rng, table);
        match fam {
            Family::V4 => l,
            Family::V6 => v6_len(l),
        }
    };
    let sl = len(rng, p.src_len);
    let mut dl = len(rng, p.dst_len);
    while sl == 0 && dl == 0 {
        // Both addresses wild would shadow much of the list: ClassBench's seeds have that only
        // in the default rule.
        dl = len(rng, p.dst_len);
    }
    let mut r = with_src(Rule::any(), fam, src_pool.prefix(rng, sl), sl);
    r = with_dst(r, fam, dst_pool.prefix(rng, dl), dl);
    let proto = weighted(
        rng,
        &[
            (Some(6u8), p.proto[0]),
            (Some(17), p.proto[1]),
            (Some(fam.icmp()), p.proto[2]),
            (None, p.proto[3]),
        ],
    );
    match proto {
        Some(pr @ (6 | 17)) => {
            let (slo, shi) = port_range(rng, p.sport);
            let (dlo, dhi) = port_range(rng, p.dport);
            r.proto(pr).src_ports(slo, shi).dst_ports(dlo, dhi)
        }
        Some(pr) => r.proto(pr),
        None => r,
    }
}

// ------------------------------------------------------------------------------------- L2 mix

/// EtherTypes an L2 entry names: ARP, RARP, LLDP, MPLS unicast and multicast, PPPoE discovery and
/// session, 802.1X, PTP, MACsec.
pub const L2_ETHERTYPES: &[u16] = &[
    0x0806, 0x8035, 0x88cc, 0x8847, 0x8848, 0x8863, 0x8864, 0x888e, 0x88f7, 0x88e5,
];

fn random_mac(rng: &mut SmallRng) -> [u8; 6] {
    let mut m: [u8; 6] = rng.gen();
    m[0] = (m[0] & 0xfc) | 0x02; // locally administered unicast
    m
}

/// One L2 entry.
fn l2_rule(rng: &mut SmallRng) -> Rule {
    let r = Rule::any();
    match rng.gen_range(0..7) {
        0 => r.eth_src(random_mac(rng)),
        1 => r.eth_dst(random_mac(rng)),
        2 => r.eth_src(random_mac(rng)).eth_dst(random_mac(rng)),
        3 => r.exact(Dim::EtherType, *L2_ETHERTYPES.choose(rng).unwrap() as u32),
        4 => r.vlan(rng.gen_range(1..=4094)),
        5 => r.vlan(rng.gen_range(1..=4094)).pcp(rng.gen_range(0..=7)),
        _ => r.vlan(rng.gen_range(1..=4094)).eth_src(random_mac(rng)),
    }
}

/// The ME 6524 report's ACL of `n` lines (at least 1): L2, IPv4 and IPv6 entries mixed, then
/// PERMIT ALL (see the module doc).
pub fn l2_mix(n: usize, seed: u64) -> Vec<Rule> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let want = n.saturating_sub(1);
    let n_l2 = want / 4;
    let n_v6 = want * 15 / 100;
    let n_v4 = want - n_l2 - n_v6;
    let mut rules = classbench(Kind::Acl, Family::V4, n_v4 + 1, rng.gen());
    rules.pop();
    let mut v6 = classbench(Kind::Acl, Family::V6, n_v6 + 1, rng.gen());
    v6.pop();
    rules.extend(v6);
    let mut seen: HashSet<Rule> = rules.iter().copied().collect();
    let mut tries = 0usize;
    while rules.len() < want && tries < want * 100 + 1000 {
        tries += 1;
        let r = l2_rule(&mut rng);
        if seen.insert(r) {
            rules.push(r);
        }
    }
    rules.shuffle(&mut rng);
    rules.push(Rule::any());
    rules
}

// ----------------------------------------------------------------------------------------- traces

/// `n` keys: 90% points inside random rules, 10% uniform random (see the module doc).
pub fn trace(rules: &[Rule], n: usize, seed: u64) -> Vec<Key> {
    let mut rng = SmallRng::seed_from_u64(seed);
    if rules.is_empty() {
        let any = Rule::any().exact(Dim::EtherType, ETHERTYPE_IPV4);
        return (0..n).map(|_| point_in(&any, &mut rng)).collect();
    }
    let families: Vec<u32> = [ETHERTYPE_IPV4, ETHERTYPE_IPV6]
        .into_iter()
        .filter(|&et| rules.iter().any(|r| r.range(Dim::EtherType) == (et, et)))
        .collect();
    let families = if families.is_empty() {
        vec![ETHERTYPE_IPV4]
    } else {
        families
    };
    (0..n)
        .map(|_| {
            if rng.gen_bool(0.9) {
                let r = &rules[rng.gen_range(0..rules.len())];
                point_in(r, &mut rng)
            } else {
                let et = *families.choose(&mut rng).unwrap();
                point_in(&Rule::any().exact(Dim::EtherType, et), &mut rng)
            }
        })
        .collect()
}

/// `prefer` when the range holds it, else a random value of the range.
fn pick(rng: &mut SmallRng, (lo, hi): (u32, u32), prefer: u32) -> u32 {
    if (lo..=hi).contains(&prefer) {
        prefer
    } else {
        rng.gen_range(lo..=hi)
    }
}

fn any_in(rng: &mut SmallRng, (lo, hi): (u32, u32)) -> u32 {
    rng.gen_range(lo..=hi)
}

/// A consistent key inside `r` where the rule allows one (a rule whose ranges contradict the
/// protocol's fields yields a key that may miss it).
fn point_in(r: &Rule, rng: &mut SmallRng) -> Key {
    let mut k = Key::default();
    let et_range = r.range(Dim::EtherType);
    let ips: Vec<u32> = [ETHERTYPE_IPV4, ETHERTYPE_IPV6]
        .into_iter()
        .filter(|et| (et_range.0..=et_range.1).contains(et))
        .collect();
    let et = match ips.choose(rng) {
        Some(&et) if et_range.0 != et_range.1 => et,
        _ if et_range.0 == et_range.1 => et_range.0,
        _ => any_in(rng, et_range),
    };
    k.set(Dim::EtherType, et);
    for d in [Dim::EthSrcHi, Dim::EthSrcLo, Dim::EthDstHi, Dim::EthDstLo] {
        k.set(d, any_in(rng, r.range(d)));
    }
    let vlan = if r.is_wild(Dim::Vlan) && rng.gen_bool(0.8) {
        0
    } else {
        any_in(rng, r.range(Dim::Vlan))
    };
    k.set(Dim::Vlan, vlan);
    let pcp = if vlan == 0 {
        pick(rng, r.range(Dim::Pcp), 0)
    } else {
        any_in(rng, r.range(Dim::Pcp))
    };
    k.set(Dim::Pcp, pcp);
    let (v4, v6) = (et == ETHERTYPE_IPV4, et == ETHERTYPE_IPV6);
    let ip_dims = [
        [Dim::Src0, Dim::Src1, Dim::Src2, Dim::Src3],
        [Dim::Dst0, Dim::Dst1, Dim::Dst2, Dim::Dst3],
    ];
    for words in ip_dims {
        for (i, d) in words.into_iter().enumerate() {
            let used = v6 || (v4 && i == 0);
            let v = if used {
                any_in(rng, r.range(d))
            } else {
                pick(rng, r.range(d), 0)
            };
            k.set(d, v);
        }
    }
    if !(v4 || v6) {
        for d in [Dim::Proto, Dim::SrcPort, Dim::DstPort, Dim::Dscp, Dim::Frag] {
            k.set(d, pick(rng, r.range(d), 0));
        }
        k.set(Dim::TcpFlags, pick(rng, r.range(Dim::TcpFlags), 0));
        return k;
    }
    let pr = r.range(Dim::Proto);
    let icmp = if v4 { 1 } else { 58 };
    let proto = if pr.0 == pr.1 {
        pr.0
    } else {
        let wants_ports = !(r.range(Dim::SrcPort).0 == 0 && r.range(Dim::DstPort).0 == 0);
        let favourite = if wants_ports {
            *[6, 17].choose(rng).unwrap()
        } else {
            weighted(rng, &[(6, 50), (17, 35), (icmp, 10), (47, 5)])
        };
        pick(rng, pr, favourite)
    };
    k.set(Dim::Proto, proto);
    k.set(Dim::Dscp, any_in(rng, r.range(Dim::Dscp)));
    let frag = if rng.gen_bool(0.98) {
        pick(rng, r.range(Dim::Frag), Frag::NONE)
    } else {
        any_in(rng, r.range(Dim::Frag))
    };
    k.set(Dim::Frag, frag);
    let has_ports = matches!(proto, 6 | 17 | 132) && frag != Frag::LATER;
    for d in [Dim::SrcPort, Dim::DstPort] {
        let v = if has_ports {
            any_in(rng, r.range(d))
        } else {
            pick(rng, r.range(d), 0)
        };
        k.set(d, v);
    }
    let flags = if proto == 6 && has_ports {
        let f = any_in(rng, r.range(Dim::TcpFlags)) as u8;
        match r.tcp_flags {
            Some((value, m)) => ((f & !m) | value) as u32,
            None => f as u32,
        }
    } else {
        pick(rng, r.range(Dim::TcpFlags), 0)
    };
    k.set(Dim::TcpFlags, flags);
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::{linear, DIMS};
    use std::collections::HashMap;

    /// Can two rules merge into one: equal in every dimension but one, where they overlap or
    /// touch?
    fn merge_pairs(rules: &[Rule]) -> usize {
        let mut found = 0;
        for d in 0..DIMS {
            let mut groups: HashMap<_, Vec<(u32, u32)>> = HashMap::new();
            for r in rules {
                let mut rest = r.ranges;
                rest[d] = (0, 0);
                groups
                    .entry((rest, r.tcp_flags))
                    .or_default()
                    .push(r.ranges[d]);
            }
            for mut v in groups.into_values() {
                v.sort();
                for w in v.windows(2) {
                    if w[1].0 <= w[0].1.saturating_add(1) {
                        found += 1;
                    }
                }
            }
        }
        found
    }

    fn streams_v4() -> (Vec<u32>, Vec<u32>) {
        let src = (0..8).map(|i| 0x8c00_0001 + (i << 8)).collect();
        let dst = (0..8).map(|i| 0x8d64_0001 + (i << 8)).collect();
        (src, dst)
    }

    fn streams_v6() -> (Vec<u128>, Vec<u128>) {
        let src = (0..8).map(|i| 0x2001_0db8_0001u128 << 80 | i).collect();
        let dst = (0..8).map(|i| 0x2001_0db8_0002u128 << 80 | i).collect();
        (src, dst)
    }

    #[test]
    fn same_seed_same_sets() {
        let (s, d) = streams_v4();
        assert_eq!(xr5(500, &s, &d, 3), xr5(500, &s, &d, 3));
        assert_ne!(xr5(500, &s, &d, 3), xr5(500, &s, &d, 4));
        for kind in [Kind::Acl, Kind::Fw, Kind::Ipc] {
            for fam in [Family::V4, Family::V6] {
                let a = classbench(kind, fam, 2000, 9);
                assert_eq!(a, classbench(kind, fam, 2000, 9));
                assert_eq!(a.len(), 2000);
                assert_eq!(trace(&a, 1000, 5), trace(&a, 1000, 5));
            }
        }
        assert_eq!(l2_mix(3000, 1), l2_mix(3000, 1));
        assert_eq!(l2_mix(3000, 1).len(), 3000);
    }

    #[test]
    fn xr5_entries_never_merge_and_traffic_reaches_the_permit() {
        let (s, d) = streams_v4();
        let rules = xr5(5000, &s, &d, 1);
        assert_eq!(rules.len(), 5001);
        assert_eq!(rules[5000], Rule::any());
        assert_eq!(merge_pairs(&rules[..5000]), 0);
        let on_streams = rules[..5000]
            .iter()
            .filter(|r| s.contains(&r.range(Dim::Src0).0) && d.contains(&r.range(Dim::Dst0).0))
            .count();
        assert_eq!(on_streams, 2500);
        for k in xr5_traffic(&s, &d, 1024, 2000, 2) {
            assert_eq!(linear(&rules, &k), Some(5000));
        }
        let (s6, d6) = streams_v6();
        let rules6 = xr5(5000, &s6, &d6, 1);
        assert_eq!(merge_pairs(&rules6[..5000]), 0);
        for k in xr5_traffic(&s6, &d6, 1024, 2000, 2) {
            assert_eq!(linear(&rules6, &k), Some(5000));
        }
        // The merge check itself finds adjacent entries.
        let f = Flow {
            src: 1u32,
            dst: 2,
            sport: 10,
            dport: 20,
        };
        let g = Flow { dport: 21, ..f };
        assert_eq!(merge_pairs(&[f.rule(), g.rule()]), 1);
    }

    #[test]
    fn the_target_flow_hits_the_last_deny() {
        let (s, d) = streams_v4();
        let t = Flow {
            src: s[3],
            dst: d[5],
            sport: 1024,
            dport: 5000,
        };
        let rules = xr5_with_target(5000, &s, &d, Some(t), 7);
        assert_eq!(rules.len(), 5001);
        assert_eq!(merge_pairs(&rules[..5000]), 0);
        assert_eq!(linear(&rules, &t.key()), Some(4999));
        assert_eq!(linear(&rules, &Flow { dport: 5001, ..t }.key()), Some(5000));
        let (s6, d6) = streams_v6();
        let t6 = Flow {
            src: s6[0],
            dst: d6[7],
            sport: 1024,
            dport: 7500,
        };
        let rules6 = xr5_with_target(5000, &s6, &d6, Some(t6), 7);
        assert_eq!(linear(&rules6, &t6.key()), Some(4999));
    }

    #[test]
    fn traces_hit_a_spread_of_rules() {
        for kind in [Kind::Acl, Kind::Fw, Kind::Ipc] {
            for fam in [Family::V4, Family::V6] {
                let rules = classbench(kind, fam, 1000, 11);
                let keys = trace(&rules, 20_000, 12);
                let mut hit = HashSet::new();
                let mut deep = 0;
                for k in &keys {
                    assert_eq!(k.get(Dim::EtherType), fam.ethertype());
                    let i = linear(&rules, k).expect("the default rule matches everything");
                    hit.insert(i);
                    deep += (i >= 500) as usize;
                }
                assert!(
                    hit.len() > 800,
                    "{kind:?} {fam:?}: only {} distinct rules",
                    hit.len()
                );
                assert!(deep > 8000, "{kind:?} {fam:?}: {deep} keys past rule 500");
            }
        }
        let mix = l2_mix(2000, 3);
        let mut hit = HashSet::new();
        for k in trace(&mix, 20_000, 4) {
            hit.insert(linear(&mix, &k).unwrap());
        }
        assert!(hit.len() > 800, "{}", hit.len());
    }

    #[test]
    fn classbench_sets_look_like_their_kind() {
        let frac = |rules: &[Rule], f: &dyn Fn(&Rule) -> bool| {
            rules.iter().filter(|r| f(r)).count() as f64 / rules.len() as f64
        };
        let acl = classbench(Kind::Acl, Family::V4, 5000, 1);
        let fw = classbench(Kind::Fw, Family::V4, 5000, 1);
        let src_wild = |r: &Rule| r.is_wild(Dim::Src0);
        assert!(frac(&fw, &src_wild) > 0.2 && frac(&acl, &src_wild) < 0.15);
        let dport_exact = |r: &Rule| {
            let (lo, hi) = r.range(Dim::DstPort);
            lo == hi
        };
        assert!(frac(&acl, &dport_exact) > 0.4);
        // Clustered: many rules share a /12 with another.
        let mut tops = HashMap::new();
        for r in &acl {
            *tops.entry(r.range(Dim::Dst0).0 >> 20).or_insert(0) += 1;
        }
        assert!(tops.len() < 400, "{} distinct /12s", tops.len());
        // IPv6 prefixes end where the length map says.
        let v6 = classbench(Kind::Ipc, Family::V6, 2000, 1);
        assert!(v6
            .iter()
            .all(|r| r.range(Dim::EtherType) == (ETHERTYPE_IPV6, ETHERTYPE_IPV6)));
    }
}
