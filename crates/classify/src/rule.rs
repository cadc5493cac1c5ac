//! What a rule matches and what a packet offers: both as one fixed array of 32-bit dimensions, so
//! the engine is one algorithm over ranges, whatever the field.
//!
//! Prefixes become ranges: an IPv4 prefix is a range of the one address dimension; an IPv6 prefix is
//! exact on the 32-bit words before its length, a range on the word it ends in and a wildcard after.
//! Port ranges, DSCP, protocol, VLAN, PCP and EtherType are plain ranges. TCP flags are matched
//! under a mask, which is not a range: the engine treats them as a wildcard when it splits and
//! checks them on the candidates it finds (every candidate is checked in full before it wins).

/// The dimensions of a key, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Dim {
    EtherType = 0,
    /// 802.1Q VLAN id, 0 when untagged.
    Vlan,
    /// 802.1p priority, 0 when untagged.
    Pcp,
    /// The top 16 bits of the source MAC address.
    EthSrcHi,
    /// The low 32 bits of the source MAC address.
    EthSrcLo,
    EthDstHi,
    EthDstLo,
    /// Source address: the IPv4 address, or IPv6 bits 0..32 (most significant first).
    Src0,
    Src1,
    Src2,
    Src3,
    Dst0,
    Dst1,
    Dst2,
    Dst3,
    /// IPv4 protocol or IPv6 next header (after the extension headers the decoder skips).
    Proto,
    /// L4 ports: 0 when the packet has none (not TCP/UDP/SCTP, or a later fragment).
    SrcPort,
    DstPort,
    Dscp,
    /// The traffic class (EXP) of the top label stack entry of a labelled frame; 0 otherwise.
    Exp,
    /// 0 not a fragment, 1 first fragment, 2 later fragment (see [`Frag`]).
    Frag,
    /// The TCP flags byte, 0 for other protocols. Matched under a mask, never split on.
    TcpFlags,
}

/// How many dimensions a key has.
pub const DIMS: usize = Dim::TcpFlags as usize + 1;

impl Dim {
    pub const ALL: [Dim; DIMS] = [
        Dim::EtherType,
        Dim::Vlan,
        Dim::Pcp,
        Dim::EthSrcHi,
        Dim::EthSrcLo,
        Dim::EthDstHi,
        Dim::EthDstLo,
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
        Dim::Dscp,
        Dim::Exp,
        Dim::Frag,
        Dim::TcpFlags,
    ];

    /// The largest value this dimension takes.
    pub const fn max(self) -> u32 {
        match self {
            Dim::EtherType | Dim::EthSrcHi | Dim::EthDstHi | Dim::SrcPort | Dim::DstPort => 0xffff,
            Dim::Vlan => 0xfff,
            Dim::Pcp | Dim::Exp => 7,
            Dim::Proto | Dim::TcpFlags => 0xff,
            Dim::Dscp => 63,
            Dim::Frag => 2,
            _ => u32::MAX,
        }
    }
}

/// Values of [`Dim::Frag`].
pub struct Frag;
impl Frag {
    pub const NONE: u32 = 0;
    pub const FIRST: u32 = 1;
    pub const LATER: u32 = 2;
}

pub const ETHERTYPE_IPV4: u32 = 0x0800;
pub const ETHERTYPE_IPV6: u32 = 0x86dd;

/// A packet as the classifier sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Key(pub [u32; DIMS]);

impl Key {
    #[inline(always)]
    pub fn get(&self, d: Dim) -> u32 {
        self.0[d as usize]
    }

    #[inline(always)]
    pub fn set(&mut self, d: Dim, v: u32) {
        self.0[d as usize] = v;
    }

    pub fn set_src_v6(&mut self, a: u128) {
        for (i, w) in words(a).into_iter().enumerate() {
            self.0[Dim::Src0 as usize + i] = w;
        }
    }

    pub fn set_dst_v6(&mut self, a: u128) {
        for (i, w) in words(a).into_iter().enumerate() {
            self.0[Dim::Dst0 as usize + i] = w;
        }
    }

    pub fn src_v6(&self) -> u128 {
        join(&self.0[Dim::Src0 as usize..Dim::Src0 as usize + 4])
    }

    pub fn dst_v6(&self) -> u128 {
        join(&self.0[Dim::Dst0 as usize..Dim::Dst0 as usize + 4])
    }
}

fn words(a: u128) -> [u32; 4] {
    [
        (a >> 96) as u32,
        (a >> 64) as u32,
        (a >> 32) as u32,
        a as u32,
    ]
}

fn join(w: &[u32]) -> u128 {
    w.iter().fold(0u128, |acc, &x| acc << 32 | x as u128)
}

/// One rule: a range per dimension (inclusive), and optionally TCP flags under a mask. The rule
/// matches a key when every dimension lies in its range and `key.TcpFlags & mask == value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rule {
    pub ranges: [(u32, u32); DIMS],
    pub tcp_flags: Option<(u8, u8)>,
}

impl Default for Rule {
    fn default() -> Self {
        Self::any()
    }
}

impl Rule {
    /// Matches every key.
    pub fn any() -> Rule {
        let mut ranges = [(0, 0); DIMS];
        for d in Dim::ALL {
            ranges[d as usize] = (0, d.max());
        }
        Rule {
            ranges,
            tcp_flags: None,
        }
    }

    #[inline(always)]
    pub fn range(&self, d: Dim) -> (u32, u32) {
        self.ranges[d as usize]
    }

    /// True when dimension `d` matches anything.
    pub fn is_wild(&self, d: Dim) -> bool {
        self.ranges[d as usize] == (0, d.max())
    }

    pub fn with(mut self, d: Dim, lo: u32, hi: u32) -> Rule {
        debug_assert!(lo <= hi && hi <= d.max(), "{d:?} {lo}..{hi}");
        self.ranges[d as usize] = (lo, hi);
        self
    }

    pub fn exact(self, d: Dim, v: u32) -> Rule {
        self.with(d, v, v)
    }

    /// IPv4 packets only.
    pub fn ipv4(self) -> Rule {
        self.exact(Dim::EtherType, ETHERTYPE_IPV4)
    }

    /// IPv6 packets only.
    pub fn ipv6(self) -> Rule {
        self.exact(Dim::EtherType, ETHERTYPE_IPV6)
    }

    pub fn src_v4(self, addr: u32, len: u8) -> Rule {
        let (lo, hi) = prefix32(addr, len);
        self.ipv4().with(Dim::Src0, lo, hi)
    }

    pub fn dst_v4(self, addr: u32, len: u8) -> Rule {
        let (lo, hi) = prefix32(addr, len);
        self.ipv4().with(Dim::Dst0, lo, hi)
    }

    pub fn src_v6(self, addr: u128, len: u8) -> Rule {
        self.ipv6().prefix128(Dim::Src0, addr, len)
    }

    pub fn dst_v6(self, addr: u128, len: u8) -> Rule {
        self.ipv6().prefix128(Dim::Dst0, addr, len)
    }

    fn prefix128(mut self, first: Dim, addr: u128, len: u8) -> Rule {
        let w = words(addr);
        for i in 0..4 {
            let bits = (len as i32 - 32 * i as i32).clamp(0, 32) as u8;
            self.ranges[first as usize + i] = prefix32(w[i], bits);
        }
        self
    }

    pub fn proto(self, p: u8) -> Rule {
        self.exact(Dim::Proto, p as u32)
    }

    pub fn src_ports(self, lo: u16, hi: u16) -> Rule {
        self.with(Dim::SrcPort, lo as u32, hi as u32)
    }

    pub fn dst_ports(self, lo: u16, hi: u16) -> Rule {
        self.with(Dim::DstPort, lo as u32, hi as u32)
    }

    pub fn dscp(self, d: u8) -> Rule {
        self.exact(Dim::Dscp, d as u32)
    }

    pub fn vlan(self, vid: u16) -> Rule {
        self.exact(Dim::Vlan, vid as u32)
    }

    pub fn pcp(self, p: u8) -> Rule {
        self.exact(Dim::Pcp, p as u32)
    }

    pub fn eth_src(self, mac: [u8; 6]) -> Rule {
        let (hi, lo) = mac_words(mac);
        self.exact(Dim::EthSrcHi, hi).exact(Dim::EthSrcLo, lo)
    }

    pub fn eth_dst(self, mac: [u8; 6]) -> Rule {
        let (hi, lo) = mac_words(mac);
        self.exact(Dim::EthDstHi, hi).exact(Dim::EthDstLo, lo)
    }

    pub fn tcp_flags(mut self, value: u8, mask: u8) -> Rule {
        self.tcp_flags = Some((value & mask, mask));
        self
    }

    /// Does this rule match `k`? The definition every engine must agree with.
    #[inline]
    pub fn matches(&self, k: &Key) -> bool {
        for i in 0..DIMS {
            let (lo, hi) = self.ranges[i];
            let v = k.0[i];
            if v < lo || v > hi {
                return false;
            }
        }
        match self.tcp_flags {
            Some((value, mask)) => (k.get(Dim::TcpFlags) as u8) & mask == value,
            None => true,
        }
    }
}

/// The range of 32-bit values a prefix covers.
pub fn prefix32(addr: u32, len: u8) -> (u32, u32) {
    if len == 0 {
        return (0, u32::MAX);
    }
    let mask = u32::MAX << (32 - len.min(32) as u32);
    (addr & mask, addr | !mask)
}

pub fn mac_words(mac: [u8; 6]) -> (u32, u32) {
    (
        u32::from_be_bytes([0, 0, mac[0], mac[1]]),
        u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]),
    )
}

/// The reference engine: a first-match scan. Slow by design; the compiled engines are tested
/// against it.
pub fn linear(rules: &[Rule], k: &Key) -> Option<u32> {
    rules.iter().position(|r| r.matches(k)).map(|i| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_become_ranges() {
        assert_eq!(prefix32(0x0a01_0203, 8), (0x0a00_0000, 0x0aff_ffff));
        assert_eq!(prefix32(0x0a01_0203, 32), (0x0a01_0203, 0x0a01_0203));
        assert_eq!(prefix32(7, 0), (0, u32::MAX));
        let r = Rule::any().src_v6(0x2001_0db8_0000_0000_0000_0000_0000_0000, 40);
        assert_eq!(r.range(Dim::Src0), (0x2001_0db8, 0x2001_0db8));
        assert_eq!(r.range(Dim::Src1), (0, 0x00ff_ffff));
        assert!(r.is_wild(Dim::Src2) && r.is_wild(Dim::Src3));
        assert_eq!(r.range(Dim::EtherType), (0x86dd, 0x86dd));
    }

    #[test]
    fn a_rule_matches_only_inside_every_range() {
        let r = Rule::any()
            .src_v4(0x0a00_0000, 8)
            .proto(17)
            .dst_ports(5000, 7500)
            .tcp_flags(0x10, 0x10);
        let mut k = Key::default();
        k.set(Dim::EtherType, ETHERTYPE_IPV4);
        k.set(Dim::Src0, 0x0a01_0101);
        k.set(Dim::Proto, 17);
        k.set(Dim::DstPort, 6000);
        k.set(Dim::TcpFlags, 0x12);
        assert!(r.matches(&k));
        k.set(Dim::TcpFlags, 0x02);
        assert!(!r.matches(&k));
        k.set(Dim::TcpFlags, 0x10);
        k.set(Dim::DstPort, 7501);
        assert!(!r.matches(&k));
        assert_eq!(linear(&[r, Rule::any()], &k), Some(1));
        assert_eq!(linear(&[r], &k), None);
    }

    #[test]
    fn v6_words_round_trip() {
        let mut k = Key::default();
        let a = 0x2001_0db8_1234_5678_9abc_def0_1122_3344u128;
        k.set_src_v6(a);
        k.set_dst_v6(!a);
        assert_eq!(k.src_v6(), a);
        assert_eq!(k.dst_v6(), !a);
        assert!(Rule::any().src_v6(a, 128).matches(&{
            let mut k = k;
            k.set(Dim::EtherType, ETHERTYPE_IPV6);
            k
        }));
    }
}
