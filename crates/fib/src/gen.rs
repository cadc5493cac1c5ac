//! Route tables shaped like the ones the seed reports' testers advertised, and like today's
//! Internet table, for benchmarks and scenarios. `docs/routes.md` says where every number comes
//! from.
//!
//! A table is a pure function of (profile, seed, scale): the same [`Spec`] gives the same routes in
//! the same order, so a benchmark can be rerun and a failing scenario replayed. `SmallRng` is not
//! promised to give the same stream across `rand` versions or between 32- and 64-bit targets, so a
//! table is reproducible for a given build, not forever.
//!
//! Routes come out shuffled: a router learns its table in no particular order, and an insert path
//! measured on sorted input would look better than it is.

use std::collections::HashSet;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, BufWriter, Write};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// A table shape, named after the scenario that needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    /// XR-6: one logical router's eBGP table in the Cisco XR 12000 test.
    Xr6,
    /// ME-1: the OSPFv2 external routes offered to the Cisco ME 6524.
    Me1,
    /// ME-2: the OSPFv3 routes offered to the Cisco ME 6524.
    Me2,
    /// GR-3: the Class C space as /24s, the destinations of the Ascend GRF test.
    Gr3,
    /// A table shaped like the global BGP table.
    Internet,
}

impl Profile {
    /// Every profile, in the order `docs/routes.md` lists them.
    pub const ALL: [Profile; 5] = [
        Profile::Xr6,
        Profile::Me1,
        Profile::Me2,
        Profile::Gr3,
        Profile::Internet,
    ];

    /// The name `FromStr` accepts and the CLI's `--profile` takes.
    pub fn name(&self) -> &'static str {
        match self {
            Profile::Xr6 => "xr6",
            Profile::Me1 => "me1",
            Profile::Me2 => "me2",
            Profile::Gr3 => "gr3",
            Profile::Internet => "internet",
        }
    }

    /// One line for `--help` and listings.
    pub fn describe(&self) -> &'static str {
        match self {
            Profile::Xr6 => {
                "XR-6 (Cisco XR 12000 BGP test), one logical router: IPv4 /19 60,000, /24 360,000, \
                 /29 180,000; IPv6 /48 15,000, /64 90,000, /96 45,000"
            }
            Profile::Me1 => {
                "ME-1 (Cisco ME 6524 OSPFv2 test): 240,000 external /24s, 8 uplinks x 30,000"
            }
            Profile::Me2 => "ME-2 (Cisco ME 6524 OSPFv3 test): 118,000 /64s, 8 uplinks x 14,750",
            Profile::Gr3 => {
                "GR-3 (Ascend GRF 1600 test): every Class C /24 in 192.0.0.0/3, 2,097,152 routes"
            }
            Profile::Internet => {
                "global BGP table shape: 1,000,000 IPv4 and 230,000 IPv6 prefixes, clustered in \
                 allocation blocks with nested more-specifics"
            }
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Profile {
    type Err = String;

    /// Case-insensitive; the test plan's spelling ("XR-6") is accepted too.
    fn from_str(s: &str) -> Result<Profile, String> {
        let wanted: String = s.trim().chars().filter(|&c| c != '-').collect();
        Profile::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(&wanted))
            .ok_or_else(|| {
                let names: Vec<&str> = Profile::ALL.iter().map(|p| p.name()).collect();
                format!(
                    "unknown route profile {s:?}; valid profiles: {}",
                    names.join(", ")
                )
            })
    }
}

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spec {
    pub profile: Profile,
    pub seed: u64,
    /// Multiplies every count of the profile's mix, rounded to the nearest route; 1.0 is the
    /// seed report's (or the Internet's) size.
    pub scale: f64,
}

impl Spec {
    /// Says why [`v4`] or [`v6`] would refuse this spec: a scale that is negative or not a
    /// number, or one that asks for more prefixes of some length than the profile's address space
    /// holds (GR-3 above 1.0, for instance). Callers that take the scale from a user should check
    /// here first rather than let the generator panic.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.scale.is_finite() && self.scale >= 0.0) {
            return Err(format!(
                "route scale must be a finite number >= 0, not {}",
                self.scale
            ));
        }
        let families = [
            ("IPv4", mix_v4(&self.profile), v4_space(self.profile)),
            ("IPv6", mix_v6(&self.profile), Space::v6()),
        ];
        for (family, mix, space) in families {
            for (len, n) in scaled(mix, self.scale) {
                let room = space.capacity(len);
                if n as u128 > room {
                    return Err(format!(
                        "profile {} at scale {} needs {n} {family} /{len} prefixes, but its \
                         address space holds only {room}",
                        self.profile, self.scale
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The IPv4 prefix-length mix of a profile at scale 1.0, as (length, count), shortest first.
/// Empty if the profile has no IPv4 routes.
pub fn mix_v4(profile: &Profile) -> &'static [(u8, u32)] {
    match profile {
        Profile::Xr6 => XR6_V4,
        Profile::Me1 => ME1_V4,
        Profile::Me2 => &[],
        Profile::Gr3 => GR3_V4,
        Profile::Internet => INTERNET_V4,
    }
}

/// The IPv6 prefix-length mix of a profile at scale 1.0, as (length, count), shortest first.
/// Empty if the profile has no IPv6 routes.
pub fn mix_v6(profile: &Profile) -> &'static [(u8, u32)] {
    match profile {
        Profile::Xr6 => XR6_V6,
        Profile::Me1 | Profile::Gr3 => &[],
        Profile::Me2 => ME2_V6,
        Profile::Internet => INTERNET_V6,
    }
}

/// The IPv4 table: (network address with host bits zero, prefix length), shuffled. Every prefix
/// is unique and lies in 1.0.0.0-223.255.255.255 outside 127.0.0.0/8.
///
/// # Panics
/// If [`Spec::validate`] refuses the spec.
pub fn v4(spec: &Spec) -> Vec<(u32, u8)> {
    table(spec, Family::V4)
        .into_iter()
        // The space is 32 bits wide, so nothing is lost.
        .map(|(addr, len)| (addr as u32, len))
        .collect()
}

/// The IPv6 table: (network address with host bits zero, prefix length), shuffled. Every prefix
/// is unique and lies in 2000::/3.
///
/// # Panics
/// If [`Spec::validate`] refuses the spec.
pub fn v6(spec: &Spec) -> Vec<(u128, u8)> {
    table(spec, Family::V6)
}

/// Writes one route per line, `PREFIX/LEN` and, when `next_hops` is not empty, ` via NEXTHOP`
/// taking the next hops in turn; IPv4 routes first. This is the route-file format the CLI reads.
pub fn write_route_lines<W: Write>(
    w: W,
    v4: &[(u32, u8)],
    v6: &[(u128, u8)],
    next_hops: &[String],
) -> io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 16, w);
    let mut hops = next_hops.iter().cycle();
    for &(addr, len) in v4 {
        write!(w, "{}/{len}", Ipv4Addr::from(addr))?;
        end_line(&mut w, hops.next())?;
    }
    for &(addr, len) in v6 {
        write!(w, "{}/{len}", Ipv6Addr::from(addr))?;
        end_line(&mut w, hops.next())?;
    }
    // Dropping a BufWriter flushes too, but swallows the error.
    w.flush()
}

fn end_line<W: Write>(w: &mut W, hop: Option<&String>) -> io::Result<()> {
    match hop {
        Some(hop) => writeln!(w, " via {hop}"),
        None => writeln!(w),
    }
}

// XR-6 per logical router, from the report's prefix table: 10/60/30 % by length per protocol.
const XR6_V4: &[(u8, u32)] = &[(19, 60_000), (24, 360_000), (29, 180_000)];
const XR6_V6: &[(u8, u32)] = &[(48, 15_000), (64, 90_000), (96, 45_000)];
// The ME 6524 report gives counts but no lengths; /24 and /64 are assumed, the usual lengths of
// emulated networks.
const ME1_V4: &[(u8, u32)] = &[(24, 240_000)];
const ME2_V6: &[(u8, u32)] = &[(64, 118_000)];
// 192.0.0.0/3 holds 2^21 /24s.
const GR3_V4: &[(u8, u32)] = &[(24, 1 << 21)];

// Calibrated to bgp.potaroo.net's AS65000 table of 2025-11-05 (1,036,829 entries, average prefix
// length 22.93); see docs/routes.md. No /25-/32: the DFZ filters them.
const INTERNET_V4: &[(u8, u32)] = &[
    (8, 15),
    (9, 12),
    (10, 35),
    (11, 95),
    (12, 290),
    (13, 560),
    (14, 1_150),
    (15, 2_000),
    (16, 13_500),
    (17, 8_600),
    (18, 14_500),
    (19, 25_000),
    (20, 45_000),
    (21, 52_000),
    (22, 120_000),
    (23, 92_000),
    (24, 625_243),
];

// Calibrated to bgp.potaroo.net's AS131072 table of 2025-04-24 (222,878 entries, average prefix
// length 42.87); see docs/routes.md. No longer than /48: the DFZ filters them.
const INTERNET_V6: &[(u8, u32)] = &[
    (19, 10),
    (20, 40),
    (21, 20),
    (22, 30),
    (23, 30),
    (24, 120),
    (25, 50),
    (26, 80),
    (27, 150),
    (28, 2_500),
    (29, 6_500),
    (30, 1_100),
    (31, 300),
    (32, 31_000),
    (33, 1_700),
    (34, 1_300),
    (35, 800),
    (36, 9_200),
    (37, 400),
    (38, 800),
    (39, 700),
    (40, 17_200),
    (41, 400),
    (42, 2_000),
    (43, 600),
    (44, 24_000),
    (45, 3_000),
    (46, 6_500),
    (47, 4_000),
    (48, 115_470),
];

/// How an Internet table is laid out: see `clustered`.
struct Shape {
    /// Allocation blocks, shortest first.
    blocks: Vec<(u128, u8)>,
    /// Prefixes up to this long are mostly aggregates: legacy /8-/16s, registry allocations
    /// announced whole.
    short: u8,
    /// Chance that a short prefix is carved out of a shorter prefix already in the table.
    nest_short: f64,
    /// The same chance for the longer prefixes, most of which are deaggregates.
    nest: f64,
}

// A few thousand clusters. The IPv4 blocks overlap and together cover about 90% of the unicast
// space: nearly all of it is allocated.
const V4_BLOCKS: usize = 3_000;
const V6_BLOCKS: usize = 3_000;

// Chosen so that, at any scale, about half of the IPv4 table and 57% of the IPv6 table are
// more-specifics of another entry (bgp.potaroo.net measured 57% for IPv6 on 2025-04-24), and so
// that the IPv4 table's top-level prefixes span about 70% of all IPv4 space (72% on 2025-11-05).
const V4_SHAPE: (u8, f64, f64) = (16, 0.15, 0.51);
const V6_SHAPE: (u8, f64, f64) = (32, 0.15, 0.66);

// After this many rejected draws in a row, a prefix that should be top-level looks for free space
// outside the blocks; after twice as many it goes anywhere new, nested or not. Neither a full
// block nor a scale with more aggregates than free space can then stall the generator.
const MAX_MISSES: u32 = 64;
// This many top-level prefixes in a row that found no free space mean that less than about 1% of
// the space is free for their length.
const FULL_AFTER: u32 = 16;

// IANA's /12s for the RIRs, and 2001::/16 whose /23s went to the RIRs first; IPv6 routes live
// almost entirely under these.
const V6_REGIONS: [(u128, u8); 7] = [
    (0x2001 << 112, 16),
    (0x2400 << 112, 12),
    (0x2600 << 112, 12),
    (0x2800 << 112, 12),
    (0x2a00 << 112, 12),
    (0x2a10 << 112, 12),
    (0x2c00 << 112, 12),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

fn table(spec: &Spec, family: Family) -> Vec<(u128, u8)> {
    if let Err(why) = spec.validate() {
        panic!("{why}");
    }
    let mix = match family {
        Family::V4 => mix_v4(&spec.profile),
        Family::V6 => mix_v6(&spec.profile),
    };
    let counts = scaled(mix, spec.scale);
    let mut rng = rng_for(spec, family);
    let mut routes = match (spec.profile, family) {
        (Profile::Gr3, Family::V4) => evenly_spaced(&Space::class_c(), &counts),
        (Profile::Internet, Family::V4) => {
            let space = Space::v4();
            let (short, nest_short, nest) = V4_SHAPE;
            let shape = Shape {
                blocks: v4_blocks(&space, &mut rng),
                short,
                nest_short,
                nest,
            };
            clustered(&space, &shape, &counts, &mut rng)
        }
        (Profile::Internet, Family::V6) => {
            let (short, nest_short, nest) = V6_SHAPE;
            let shape = Shape {
                blocks: v6_blocks(&mut rng),
                short,
                nest_short,
                nest,
            };
            clustered(&Space::v6(), &shape, &counts, &mut rng)
        }
        (_, Family::V4) => random_table(&Space::v4(), &counts, &mut rng),
        (_, Family::V6) => random_table(&Space::v6(), &counts, &mut rng),
    };
    routes.shuffle(&mut rng);
    routes
}

// Each (profile, family) draws from its own stream, so that growing one family's mix never moves
// the other family's routes.
fn rng_for(spec: &Spec, family: Family) -> SmallRng {
    let family_salt = match family {
        Family::V4 => 0x7634_0000_0000_0000,
        Family::V6 => 0x7636_0000_0000_0000,
    };
    let profile_salt = (spec.profile as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    SmallRng::seed_from_u64(spec.seed ^ family_salt ^ profile_salt)
}

fn scaled(mix: &[(u8, u32)], scale: f64) -> Vec<(u8, usize)> {
    mix.iter()
        .map(|&(len, n)| (len, (f64::from(n) * scale).round() as usize))
        .collect()
}

fn v4_space(profile: Profile) -> Space {
    match profile {
        Profile::Gr3 => Space::class_c(),
        _ => Space::v4(),
    }
}

/// Where random prefixes of one family may fall: equal-sized root prefixes, so that a uniform
/// pick of root and offset is a uniform pick of address.
struct Space {
    width: u8,
    root_len: u8,
    roots: Vec<u128>,
}

impl Space {
    fn v4() -> Space {
        // 0/8 is "this network", 127/8 loopback, 224/3 multicast and reserved.
        let roots = (1u128..224)
            .filter(|&o| o != 127)
            .map(|o| o << 24)
            .collect();
        Space {
            width: 32,
            root_len: 8,
            roots,
        }
    }

    fn v6() -> Space {
        Space {
            width: 128,
            root_len: 3,
            roots: vec![0x2000 << 112],
        }
    }

    fn class_c() -> Space {
        Space {
            width: 32,
            root_len: 3,
            roots: vec![0xc000_0000],
        }
    }

    /// How many prefixes of this length the space holds.
    fn capacity(&self, len: u8) -> u128 {
        assert!(
            (self.root_len..=self.width).contains(&len),
            "prefix length /{len} does not fit a space of /{} roots",
            self.root_len
        );
        (self.roots.len() as u128) << (len - self.root_len)
    }

    /// The `index`th prefix of this length, in address order.
    fn nth(&self, len: u8, index: u128) -> u128 {
        let bits = len - self.root_len;
        let root = self.roots[(index >> bits) as usize];
        root | ((index & low_mask(bits)) << (self.width - len))
    }

    fn random(&self, rng: &mut SmallRng, len: u8) -> u128 {
        let root = self.roots[rng.gen_range(0..self.roots.len())];
        random_under(rng, root, self.root_len, len, self.width)
    }
}

fn low_mask(bits: u8) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

/// A random prefix of length `len` inside `parent`/`parent_len`.
fn random_under(rng: &mut SmallRng, parent: u128, parent_len: u8, len: u8, width: u8) -> u128 {
    let bits = len - parent_len;
    // Half the draws of a u128 suffice for nearly every length, and the generator is hot.
    let r = if bits <= 64 {
        u128::from(rng.gen::<u64>())
    } else {
        rng.gen::<u128>()
    };
    parent | ((r & low_mask(bits)) << (width - len))
}

/// Dedupe sets hold millions of addresses; SipHash's flood resistance buys nothing against our own
/// generator and costs time.
#[derive(Default)]
struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn write_u128(&mut self, n: u128) {
        // Prefixes differ only in their top bits (host bits are zero), so both halves are folded
        // and then mixed with splitmix64's finalizer before the table takes its low bits.
        let mut x = self.0 ^ (n as u64) ^ ((n >> 64) as u64).rotate_left(29);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        self.0 = x ^ (x >> 31);
    }
}

/// Addresses already placed at one prefix length; a prefix is (address, length) and lengths are
/// generated one at a time, so the address alone is the key.
type Seen = HashSet<u128, BuildHasherDefault<MixHasher>>;

fn total(counts: &[(u8, usize)]) -> usize {
    counts.iter().map(|&(_, n)| n).sum()
}

/// `n` prefixes spread evenly over the space: the GR-3 tester swept the whole Class C range, so a
/// reduced table should still span it rather than bunch up.
fn evenly_spaced(space: &Space, counts: &[(u8, usize)]) -> Vec<(u128, u8)> {
    let mut out = Vec::with_capacity(total(counts));
    for &(len, n) in counts {
        let room = space.capacity(len);
        // validate() guarantees n <= room, so the step is at least one prefix.
        out.extend((0..n as u128).map(|i| (space.nth(len, i * room / n as u128), len)));
    }
    out
}

/// Uniformly random prefixes, as a tester's randomized route blocks give.
fn random_table(space: &Space, counts: &[(u8, usize)], rng: &mut SmallRng) -> Vec<(u128, u8)> {
    let mut out = Vec::with_capacity(total(counts));
    for &(len, n) in counts {
        if !dense(space, len, n, rng, &mut out) {
            let mut seen = Seen::with_capacity_and_hasher(n, Default::default());
            while seen.len() < n {
                let addr = space.random(rng, len);
                if seen.insert(addr) {
                    out.push((addr, len));
                }
            }
        }
    }
    out
}

/// When a length asks for more than half of its space, drawing and rejecting duplicates slows to a
/// crawl near the end; sample indices without replacement instead (the space is then at most twice
/// the count, so listing it is cheap). Returns false, having done nothing, for sparse lengths.
fn dense(space: &Space, len: u8, n: usize, rng: &mut SmallRng, out: &mut Vec<(u128, u8)>) -> bool {
    let room = space.capacity(len);
    if (n as u128) * 2 <= room {
        return false;
    }
    let picked = rand::seq::index::sample(rng, room as usize, n);
    out.extend(picked.into_iter().map(|i| (space.nth(len, i as u128), len)));
    true
}

/// Internet-shaped placement. Real tables are not uniform: registries hand out blocks, networks
/// announce pieces of them, and many also announce more-specifics inside their own or their
/// customers' shorter prefixes. So a prefix is either carved out of a shorter prefix already in the
/// table (with a chance that depends on its length), or placed in an allocation block where
/// nothing in the table covers it yet. Lengths are generated shortest first, so every possible
/// parent exists when it is needed, and a free slot found now stays free.
///
/// Free space matters: the short prefixes span most of the IPv4 space, so placing the rest at
/// random would make nearly every prefix a more-specific by accident (85% in a trial, against about
/// half in the real table).
fn clustered(
    space: &Space,
    shape: &Shape,
    counts: &[(u8, usize)],
    rng: &mut SmallRng,
) -> Vec<(u128, u8)> {
    debug_assert!(counts.windows(2).all(|w| w[0].0 < w[1].0));
    debug_assert!(shape.blocks.windows(2).all(|w| w[0].1 <= w[1].1));
    let mut out = Vec::with_capacity(total(counts));
    let mut placed = Coverage::new(space, counts);
    for &(len, n) in counts {
        let first = out.len();
        let done = if dense(space, len, n, rng, &mut out) {
            out[first..].iter().map(|&(addr, _)| addr).collect()
        } else {
            let parents = first;
            let nest = if len <= shape.short {
                shape.nest_short
            } else {
                shape.nest
            };
            let blocks = &shape.blocks;
            let usable_blocks = blocks.partition_point(|&(_, block_len)| block_len <= len);
            let mut seen = Seen::with_capacity_and_hasher(n, Default::default());
            // Free space only shrinks while a length is placed; once top-level prefixes keep
            // failing to find any, stop looking (at Internet scale 4 the aggregates alone
            // outgrow the IPv4 space, and looking took 4x the time).
            let mut full = false;
            let mut fallbacks_in_row = 0;
            while seen.len() < n {
                // Decided once per prefix: deciding again on every retry would let the easy case
                // (nesting) win whenever free space is scarce.
                let nested = parents > 0 && rng.gen_bool(nest);
                let mut misses = if full && !nested { 2 * MAX_MISSES } else { 0 };
                let addr = loop {
                    let addr = if misses >= 2 * MAX_MISSES {
                        space.random(rng, len)
                    } else if nested {
                        let (parent, parent_len) = out[rng.gen_range(0..parents)];
                        random_under(rng, parent, parent_len, len, space.width)
                    } else {
                        let addr = if misses < MAX_MISSES && usable_blocks > 0 {
                            let (block, block_len) = blocks[rng.gen_range(0..usable_blocks)];
                            random_under(rng, block, block_len, len, space.width)
                        } else {
                            space.random(rng, len)
                        };
                        if placed.covers(addr, space.width) {
                            misses += 1;
                            continue;
                        }
                        addr
                    };
                    if !seen.contains(&addr) {
                        break addr;
                    }
                    misses += 1;
                };
                seen.insert(addr);
                out.push((addr, len));
                if !nested && !full {
                    fallbacks_in_row = if misses >= 2 * MAX_MISSES {
                        fallbacks_in_row + 1
                    } else {
                        0
                    };
                    full = fallbacks_in_row >= FULL_AFTER;
                }
            }
            seen
        };
        placed.add(len, done, &out[first..]);
    }
    out
}

/// The prefixes placed so far, for the "is this slot free" test.
enum Coverage {
    /// One bit per /24. Internet IPv4 tables stop at /24, so one probe answers; walking a set per
    /// shorter length took most of the generation time, as IPv4 free space is scarce and a
    /// top-level /24 needs about 17 draws.
    Slash24(Vec<u64>),
    /// Every placed prefix by length.
    Sets(Vec<(u8, Seen)>),
}

impl Coverage {
    fn new(space: &Space, counts: &[(u8, usize)]) -> Coverage {
        if space.width == 32 && counts.iter().all(|&(len, _)| len <= 24) {
            Coverage::Slash24(vec![0; (1 << 24) / 64])
        } else {
            Coverage::Sets(Vec::new())
        }
    }

    /// Whether a prefix of a length already finished contains `addr`. Lengths are generated
    /// shortest first, so that is any placed prefix that overlaps it.
    fn covers(&self, addr: u128, width: u8) -> bool {
        match self {
            Coverage::Slash24(bits) => {
                let i = (addr >> 8) as usize;
                bits[i / 64] >> (i % 64) & 1 == 1
            }
            Coverage::Sets(placed) => placed.iter().any(|(len, set)| {
                let network = addr & !low_mask(width - len) & low_mask(width);
                set.contains(&network)
            }),
        }
    }

    /// Records a finished length: its addresses as a set, and the same routes as a slice.
    fn add(&mut self, len: u8, set: Seen, routes: &[(u128, u8)]) {
        match self {
            Coverage::Slash24(bits) => {
                for &(addr, _) in routes {
                    let start = (addr >> 8) as usize;
                    let end = start + (1 << (24 - len));
                    let mut i = start;
                    while i < end {
                        let (word, bit) = (i / 64, i % 64);
                        if bit == 0 && end - i >= 64 {
                            bits[word] = u64::MAX;
                            i += 64;
                        } else {
                            bits[word] |= 1 << bit;
                            i += 1;
                        }
                    }
                }
            }
            Coverage::Sets(placed) => placed.push((len, set)),
        }
    }
}

/// IPv4 allocation blocks, /8 to /12, mostly the longer ones as the registries' later
/// allocations were. Sorted by length for `clustered`.
fn v4_blocks(space: &Space, rng: &mut SmallRng) -> Vec<(u128, u8)> {
    // (length, percent of blocks)
    const WEIGHTS: [(u8, u32); 5] = [(8, 5), (9, 5), (10, 15), (11, 25), (12, 50)];
    distinct_blocks(V4_BLOCKS, rng, |rng| {
        let mut pick = rng.gen_range(0..100);
        let mut len = WEIGHTS[WEIGHTS.len() - 1].0;
        for (l, percent) in WEIGHTS {
            if pick < percent {
                len = l;
                break;
            }
            pick -= percent;
        }
        (space.random(rng, len), len)
    })
}

/// IPv6 allocation blocks, /12 to /23, under the RIRs' regions. Sorted by length for `clustered`.
fn v6_blocks(rng: &mut SmallRng) -> Vec<(u128, u8)> {
    distinct_blocks(V6_BLOCKS, rng, |rng| {
        let (region, region_len) = V6_REGIONS[rng.gen_range(0..V6_REGIONS.len())];
        let len = rng.gen_range(region_len.max(12)..=23);
        (random_under(rng, region, region_len, len, 128), len)
    })
}

fn distinct_blocks(
    count: usize,
    rng: &mut SmallRng,
    mut draw: impl FnMut(&mut SmallRng) -> (u128, u8),
) -> Vec<(u128, u8)> {
    let mut seen = HashSet::with_capacity(count);
    let mut blocks = Vec::with_capacity(count);
    while blocks.len() < count {
        let block = draw(rng);
        if seen.insert(block) {
            blocks.push(block);
        }
    }
    // Stable, so the order (and with it the table) depends only on the seed.
    blocks.sort_by_key(|&(_, len)| len);
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn spec(profile: Profile, seed: u64, scale: f64) -> Spec {
        Spec {
            profile,
            seed,
            scale,
        }
    }

    fn histogram<A>(routes: &[(A, u8)]) -> BTreeMap<u8, usize> {
        let mut h = BTreeMap::new();
        for &(_, len) in routes {
            *h.entry(len).or_insert(0) += 1;
        }
        h
    }

    fn expected(mix: &[(u8, u32)], scale: f64) -> BTreeMap<u8, usize> {
        scaled(mix, scale)
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .collect()
    }

    fn check_v4(profile: Profile, routes: &[(u32, u8)]) {
        let mut seen = HashSet::new();
        for &(addr, len) in routes {
            assert!((1..=32).contains(&len), "{profile}: bad length /{len}");
            let host = u32::MAX.checked_shr(u32::from(len)).unwrap_or(0);
            assert_eq!(
                addr & host,
                0,
                "{profile}: host bits set in {addr:#x}/{len}"
            );
            let first = addr >> 24;
            assert!(
                first != 0 && first != 127 && first < 224,
                "{profile}: {}/{len} outside unicast space",
                Ipv4Addr::from(addr)
            );
            assert!(
                seen.insert((addr, len)),
                "{profile}: duplicate {addr:#x}/{len}"
            );
        }
    }

    fn check_v6(profile: Profile, routes: &[(u128, u8)]) {
        let mut seen = HashSet::new();
        for &(addr, len) in routes {
            assert!((3..=128).contains(&len), "{profile}: bad length /{len}");
            let host = u128::MAX.checked_shr(u32::from(len)).unwrap_or(0);
            assert_eq!(
                addr & host,
                0,
                "{profile}: host bits set in {addr:#x}/{len}"
            );
            assert_eq!(
                addr >> 125,
                0b001,
                "{profile}: {addr:#x}/{len} outside 2000::/3"
            );
            assert!(
                seen.insert((addr, len)),
                "{profile}: duplicate {addr:#x}/{len}"
            );
        }
    }

    /// Generates both families at both scales the tests care about and checks every rule that
    /// holds for all profiles.
    fn check_profile(profile: Profile) {
        for scale in [1.0, 0.01] {
            let s = spec(profile, 7, scale);
            let routes4 = v4(&s);
            check_v4(profile, &routes4);
            assert_eq!(
                histogram(&routes4),
                expected(mix_v4(&profile), scale),
                "{profile} IPv4 at scale {scale}"
            );
            let routes6 = v6(&s);
            check_v6(profile, &routes6);
            assert_eq!(
                histogram(&routes6),
                expected(mix_v6(&profile), scale),
                "{profile} IPv6 at scale {scale}"
            );
        }
    }

    #[test]
    fn xr6_counts_and_rules() {
        check_profile(Profile::Xr6);
        let one = spec(Profile::Xr6, 1, 1.0);
        assert_eq!(v4(&one).len() + v6(&one).len(), 750_000);
    }

    #[test]
    fn me1_counts_and_rules() {
        check_profile(Profile::Me1);
        assert_eq!(v4(&spec(Profile::Me1, 1, 1.0)).len(), 8 * 30_000);
    }

    #[test]
    fn me2_counts_and_rules() {
        check_profile(Profile::Me2);
        assert_eq!(v6(&spec(Profile::Me2, 1, 1.0)).len(), 8 * 14_750);
    }

    #[test]
    fn gr3_counts_and_rules() {
        check_profile(Profile::Gr3);
    }

    #[test]
    fn internet_counts_and_rules() {
        check_profile(Profile::Internet);
        let total4: u32 = mix_v4(&Profile::Internet).iter().map(|&(_, n)| n).sum();
        let total6: u32 = mix_v6(&Profile::Internet).iter().map(|&(_, n)| n).sum();
        assert_eq!((total4, total6), (1_000_000, 230_000));
    }

    #[test]
    fn mixes_are_sorted_and_match_the_reports() {
        for p in Profile::ALL {
            for mix in [mix_v4(&p), mix_v6(&p)] {
                assert!(mix.windows(2).all(|w| w[0].0 < w[1].0), "{p}");
            }
        }
        let sum = |mix: &[(u8, u32)]| mix.iter().map(|&(_, n)| u64::from(n)).sum::<u64>();
        // Four XR-6 logical routers carried 3,000,000 routes, 20% of them IPv6.
        let xr6 = Profile::Xr6;
        assert_eq!(4 * (sum(mix_v4(&xr6)) + sum(mix_v6(&xr6))), 3_000_000);
        assert_eq!(4 * sum(mix_v6(&xr6)), 600_000);
        assert!(mix_v6(&Profile::Me1).is_empty() && mix_v6(&Profile::Gr3).is_empty());
        assert!(mix_v4(&Profile::Me2).is_empty());
        // /24 dominates the Internet mix at about 60%, /48 at about half.
        let share = |mix: &[(u8, u32)], len| {
            let n = mix.iter().find(|&&(l, _)| l == len).unwrap().1;
            f64::from(n) / sum(mix) as f64
        };
        assert!((0.58..0.65).contains(&share(INTERNET_V4, 24)));
        assert!((0.45..0.55).contains(&share(INTERNET_V6, 48)));
    }

    #[test]
    fn scale_rounds_to_nearest() {
        // 60,000 x 0.00001 = 0.6 -> 1; 360,000 x 0.00001 = 3.6 -> 4; 180,000 x 0.00001 = 1.8 -> 2
        let routes = v4(&spec(Profile::Xr6, 3, 0.000_01));
        let want: BTreeMap<u8, usize> = [(19, 1), (24, 4), (29, 2)].into();
        assert_eq!(histogram(&routes), want);
        assert!(v4(&spec(Profile::Internet, 3, 0.0)).is_empty());
        // XR-6 at four logical routers: 2,400,000 IPv4 and 600,000 IPv6 routes.
        let four = spec(Profile::Xr6, 3, 4.0);
        assert_eq!(
            scaled(mix_v4(&Profile::Xr6), 4.0)
                .iter()
                .map(|c| c.1)
                .sum::<usize>(),
            2_400_000
        );
        assert_eq!(v6(&four).len(), 600_000);
    }

    #[test]
    fn same_seed_same_table_other_seed_other_table() {
        for p in Profile::ALL {
            let a = spec(p, 42, 0.01);
            let b = spec(p, 43, 0.01);
            assert_eq!(v4(&a), v4(&a), "{p}");
            assert_eq!(v6(&a), v6(&a), "{p}");
            if !mix_v4(&p).is_empty() {
                assert_ne!(v4(&a), v4(&b), "{p}");
            }
            if !mix_v6(&p).is_empty() {
                assert_ne!(v6(&a), v6(&b), "{p}");
            }
        }
    }

    #[test]
    fn output_is_shuffled() {
        let routes = v4(&spec(Profile::Me1, 5, 0.01));
        assert!(!routes.windows(2).all(|w| w[0] <= w[1]));
        let gr3 = v4(&spec(Profile::Gr3, 5, 0.01));
        assert!(!gr3.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn gr3_is_the_class_c_space_evenly_spaced() {
        let scale = 0.01;
        let mut routes = v4(&spec(Profile::Gr3, 9, scale));
        for &(addr, len) in &routes {
            assert!(
                (0xc000_0000..=0xdfff_ffff).contains(&addr),
                "{} outside 192.0.0.0-223.255.255.255",
                Ipv4Addr::from(addr)
            );
            assert_eq!(len, 24);
        }
        routes.sort_unstable();
        let n = routes.len() as u32;
        let step = (1u32 << 21) / n;
        assert_eq!(routes[0].0, 0xc000_0000);
        for w in routes.windows(2) {
            let gap = (w[1].0 - w[0].0) >> 8;
            assert!(gap == step || gap == step + 1, "gap of {gap} /24s");
        }
        // At full scale it is every /24, first and last included.
        let full = v4(&spec(Profile::Gr3, 9, 1.0));
        let max = full.iter().map(|r| r.0).max().unwrap();
        assert_eq!(max, 0xdfff_ff00);
        assert!(v6(&spec(Profile::Gr3, 9, 1.0)).is_empty());
    }

    /// Fraction of prefixes that lie inside a shorter prefix of the same table.
    fn more_specific_share(routes: &[(u128, u8)], width: u8) -> f64 {
        let set: HashSet<(u128, u8)> = routes.iter().copied().collect();
        let nested = routes
            .iter()
            .filter(|&&(addr, len)| {
                (1..len).any(|l| {
                    let keep = !low_mask(width - l) & low_mask(width);
                    set.contains(&(addr & keep, l))
                })
            })
            .count();
        nested as f64 / routes.len() as f64
    }

    #[test]
    fn internet_tables_are_clustered_and_nested() {
        let s = spec(Profile::Internet, 11, 0.1);
        let routes4: Vec<(u128, u8)> = v4(&s)
            .into_iter()
            .map(|(a, l)| (u128::from(a), l))
            .collect();
        let share4 = more_specific_share(&routes4, 32);
        assert!(
            (0.4..0.6).contains(&share4),
            "IPv4 more-specifics {share4:.2}"
        );
        let routes6 = v6(&s);
        let share6 = more_specific_share(&routes6, 128);
        assert!(
            (0.45..0.7).contains(&share6),
            "IPv6 more-specifics {share6:.2}"
        );
        // Uniform placement in 2000::/3 almost never nests.
        let xr6 = v6(&spec(Profile::Xr6, 11, 0.1));
        assert!(more_specific_share(&xr6, 128) < 0.01);
        // IPv6 routes sit under the RIR regions, not all over 2000::/3.
        let in_regions = routes6
            .iter()
            .filter(|&&(addr, _)| {
                V6_REGIONS
                    .iter()
                    .any(|&(region, len)| addr & !low_mask(128 - len) == region)
            })
            .count();
        assert!(in_regions as f64 >= 0.99 * routes6.len() as f64);
        // And they crowd into a few thousand blocks: far fewer distinct /23s than routes.
        let mut slash23: Vec<u128> = routes6.iter().map(|&(a, _)| a >> 105).collect();
        slash23.sort_unstable();
        slash23.dedup();
        assert!(
            slash23.len() < V6_BLOCKS * 2,
            "{} distinct /23s",
            slash23.len()
        );
    }

    #[test]
    fn write_route_lines_parses_back() {
        let s = spec(Profile::Xr6, 2, 0.001);
        let (r4, r6) = (v4(&s), v6(&s));
        let hops = vec!["192.0.2.1".to_string(), "192.0.2.2".to_string()];
        let mut buf = Vec::new();
        write_route_lines(&mut buf, &r4, &r6, &hops).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), r4.len() + r6.len());
        for (i, line) in lines.iter().enumerate() {
            let (prefix, via) = line.split_once(" via ").expect("next hop present");
            assert_eq!(via, hops[i % hops.len()]);
            let (addr, len) = prefix.split_once('/').unwrap();
            let len: u8 = len.parse().unwrap();
            if i < r4.len() {
                let addr: Ipv4Addr = addr.parse().unwrap();
                assert_eq!((u32::from(addr), len), r4[i]);
            } else {
                let addr: Ipv6Addr = addr.parse().unwrap();
                assert_eq!((u128::from(addr), len), r6[i - r4.len()]);
            }
        }
        let mut bare = Vec::new();
        write_route_lines(
            &mut bare,
            &[(0x0a00_0000, 8)],
            &[(0x2001_0db8 << 96, 32)],
            &[],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(bare).unwrap(),
            "10.0.0.0/8\n2001:db8::/32\n"
        );
    }

    #[test]
    fn profile_names_parse() {
        for p in Profile::ALL {
            assert_eq!(p.name().parse::<Profile>(), Ok(p));
            assert_eq!(p.name().to_uppercase().parse::<Profile>(), Ok(p));
            assert!(!p.describe().is_empty());
        }
        assert_eq!("XR-6".parse::<Profile>(), Ok(Profile::Xr6));
        let err = "xr7".parse::<Profile>().unwrap_err();
        for p in Profile::ALL {
            assert!(err.contains(p.name()), "{err}");
        }
    }

    #[test]
    fn impossible_specs_are_refused() {
        assert!(spec(Profile::Xr6, 0, -1.0).validate().is_err());
        assert!(spec(Profile::Xr6, 0, f64::NAN).validate().is_err());
        assert!(spec(Profile::Xr6, 0, f64::INFINITY).validate().is_err());
        // GR-3 is already the whole Class C space at 1.0.
        assert!(spec(Profile::Gr3, 0, 1.0).validate().is_ok());
        let err = spec(Profile::Gr3, 0, 1.5).validate().unwrap_err();
        assert!(err.contains("/24"), "{err}");
        assert!(spec(Profile::Internet, 0, 4.0).validate().is_ok());
    }

    #[test]
    #[should_panic(expected = "address space holds only")]
    fn generating_an_impossible_spec_panics() {
        v4(&spec(Profile::Gr3, 0, 2.0));
    }

    #[test]
    fn dense_lengths_are_exact_and_unique() {
        // 3 of every 4 /24s in the Class C space goes through the sampling path, not rejection.
        let space = Space::class_c();
        let mut rng = SmallRng::seed_from_u64(1);
        let n = 3 << 19;
        let routes = random_table(&space, &[(24, n)], &mut rng);
        let set: HashSet<u128> = routes.iter().map(|r| r.0).collect();
        assert_eq!((routes.len(), set.len()), (n, n));
        assert!(routes
            .iter()
            .all(|&(a, _)| a >> 29 == 0b110 && a & 0xff == 0));
    }
}
