//! IPv4 headers (RFC 791).

use crate::checksum;
use crate::{be16, be32, put16, Error, Result};

/// The IP protocol numbers (also IPv6 next-header values) the router looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    Icmp,
    Igmp,
    Tcp,
    Udp,
    Gre,
    Ipv6Icmp,
    Unknown(u8),
}

impl From<u8> for Protocol {
    fn from(v: u8) -> Self {
        match v {
            1 => Protocol::Icmp,
            2 => Protocol::Igmp,
            6 => Protocol::Tcp,
            17 => Protocol::Udp,
            47 => Protocol::Gre,
            58 => Protocol::Ipv6Icmp,
            other => Protocol::Unknown(other),
        }
    }
}

impl From<Protocol> for u8 {
    fn from(p: Protocol) -> Self {
        match p {
            Protocol::Icmp => 1,
            Protocol::Igmp => 2,
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
            Protocol::Gre => 47,
            Protocol::Ipv6Icmp => 58,
            Protocol::Unknown(v) => v,
        }
    }
}

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLG_OFF: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1FFF;

/// A view of an IPv4 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a received packet after checking every length the getters rely on: the buffer holds
    /// the whole header with its options and the whole datagram `total_len` claims. Bytes past
    /// `total_len` (Ethernet padding) are allowed and ignored by `payload()`. The checksum is not
    /// checked here: a router checks it once with [`checksum::ipv4_header_ok`] or
    /// [`Packet::verify_checksum`], where its own policy says.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let p = Packet::new_unchecked(b);
        if p.version() != 4 {
            return Err(Error::Malformed);
        }
        let hlen = p.header_len();
        if hlen < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if b.len() < hlen {
            return Err(Error::Truncated);
        }
        let total = usize::from(p.total_len());
        if total < hlen {
            return Err(Error::Malformed);
        }
        if b.len() < total {
            return Err(Error::Truncated);
        }
        Ok(Packet { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL * 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0F) * 4
    }

    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Length of the datagram, header included.
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }

    fn flags_offset(&self) -> u16 {
        be16(self.buffer.as_ref(), field::FLG_OFF)
    }

    pub fn dont_frag(&self) -> bool {
        self.flags_offset() & FLAG_DF != 0
    }

    pub fn more_frags(&self) -> bool {
        self.flags_offset() & FLAG_MF != 0
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (self.flags_offset() & OFFSET_MASK) << 3
    }

    /// Whether this is any fragment, first or not: such packets have no usable transport ports
    /// past the first one, and need reassembly before local delivery.
    pub fn is_fragment(&self) -> bool {
        self.flags_offset() & (FLAG_MF | OFFSET_MASK) != 0
    }

    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    pub fn protocol(&self) -> Protocol {
        Protocol::from(self.protocol_raw())
    }

    pub fn protocol_raw(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    pub fn src_addr(&self) -> [u8; 4] {
        let mut a = [0u8; 4];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        a
    }

    pub fn dst_addr(&self) -> [u8; 4] {
        let mut a = [0u8; 4];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        a
    }

    /// Source address as a big-endian number, the form the FIB keys on.
    pub fn src_u32(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SRC_ADDR.start)
    }

    pub fn dst_u32(&self) -> u32 {
        be32(self.buffer.as_ref(), field::DST_ADDR.start)
    }

    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// The datagram's payload: from the end of the header to `total_len`, padding excluded.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }

    /// Whether the header, options included, sums to the one's-complement zero.
    pub fn verify_checksum(&self) -> bool {
        checksum::fold(checksum::sum(&self.buffer.as_ref()[..self.header_len()])) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_version(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0F) | (v << 4);
    }

    /// Sets IHL from a length in bytes, which must be a multiple of 4 between 20 and 60.
    pub fn set_header_len(&mut self, len: usize) {
        debug_assert!(len.is_multiple_of(4) && (HEADER_LEN..=60).contains(&len));
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xF0) | ((len / 4) as u8 & 0x0F);
    }

    pub fn set_dscp(&mut self, dscp: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | (dscp << 2);
    }

    pub fn set_ecn(&mut self, ecn: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0xFC) | (ecn & 0x03);
    }

    pub fn set_total_len(&mut self, len: u16) {
        put16(self.buffer.as_mut(), field::LENGTH, len);
    }

    pub fn set_ident(&mut self, ident: u16) {
        put16(self.buffer.as_mut(), field::IDENT, ident);
    }

    fn set_flags_offset(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::FLG_OFF, v);
    }

    pub fn set_dont_frag(&mut self, df: bool) {
        let v = (self.flags_offset() & !FLAG_DF) | if df { FLAG_DF } else { 0 };
        self.set_flags_offset(v);
    }

    pub fn set_more_frags(&mut self, mf: bool) {
        let v = (self.flags_offset() & !FLAG_MF) | if mf { FLAG_MF } else { 0 };
        self.set_flags_offset(v);
    }

    /// Sets the fragment offset from a byte count, which must be a multiple of 8.
    pub fn set_frag_offset(&mut self, bytes: u16) {
        debug_assert!(bytes.is_multiple_of(8));
        let v = (self.flags_offset() & !OFFSET_MASK) | ((bytes >> 3) & OFFSET_MASK);
        self.set_flags_offset(v);
    }

    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    pub fn set_protocol(&mut self, p: Protocol) {
        self.buffer.as_mut()[field::PROTOCOL] = p.into();
    }

    pub fn set_checksum(&mut self, c: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    pub fn set_src_addr(&mut self, a: [u8; 4]) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a);
    }

    pub fn set_dst_addr(&mut self, a: [u8; 4]) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a);
    }

    /// Recomputes the header checksum over the header and its options.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::fold(checksum::sum(&self.buffer.as_ref()[..self.header_len()]));
        self.set_checksum(c);
    }

    /// Decrements the TTL and patches the checksum incrementally (RFC 1624), the forwarding
    /// path's only header change. Returns the new TTL; a TTL of 0 is left alone (the caller should
    /// have sent Time Exceeded before getting here).
    pub fn decrement_ttl(&mut self) -> u8 {
        let ttl = self.ttl();
        if ttl == 0 {
            return 0;
        }
        let proto = self.protocol_raw();
        let old = u16::from_be_bytes([ttl, proto]);
        let new = u16::from_be_bytes([ttl - 1, proto]);
        let c = checksum::update16(self.checksum(), old, new);
        self.set_ttl(ttl - 1);
        self.set_checksum(c);
        ttl - 1
    }

    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (start, end) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buffer.as_mut()[start..end]
    }
}

/// The fields of an option-less, unfragmented header, for building packets on the slow path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub protocol: Protocol,
    pub ttl: u8,
    /// Bytes after the header; the header's total length is this plus 20.
    pub payload_len: usize,
    pub dscp: u8,
    pub dont_frag: bool,
    pub ident: u16,
}

impl Repr {
    /// Reads a checked packet whose header checksum is correct. Options, ECN and fragmentation
    /// fields are not represented and are dropped.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        if !p.verify_checksum() {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            protocol: p.protocol(),
            ttl: p.ttl(),
            payload_len: p.payload().len(),
            dscp: p.dscp(),
            dont_frag: p.dont_frag(),
            ident: p.ident(),
        })
    }

    /// Writes a 20-byte header with a correct checksum at the start of `buf`; returns 20.
    /// The payload is the caller's to write after it.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let total = u16::try_from(HEADER_LEN + self.payload_len).map_err(|_| Error::Malformed)?;
        if self.dscp > 63 {
            return Err(Error::Malformed);
        }
        buf[..HEADER_LEN].fill(0);
        let mut p = Packet::new_unchecked(&mut buf[..HEADER_LEN]);
        p.set_version(4);
        p.set_header_len(HEADER_LEN);
        p.set_dscp(self.dscp);
        p.set_total_len(total);
        p.set_ident(self.ident);
        p.set_dont_frag(self.dont_frag);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src);
        p.set_dst_addr(self.dst);
        p.fill_checksum();
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// IGMP to 224.0.0.22 with a Router Alert option, DSCP EF, ECN ECT(1), DF, TTL 1, followed by
    /// two bytes of Ethernet padding. Checksum checked with tshark.
    pub(crate) const GOLDEN: [u8; 30] = [
        0x46, 0xb9, 0x00, 0x1c, 0xab, 0xcd, 0x40, 0x00, 0x01, 0x02, 0x4e, 0x3e, 0x0a, 0x00, 0x00,
        0x01, 0xe0, 0x00, 0x00, 0x16, 0x94, 0x04, 0x00, 0x00, 0x11, 0x22, 0x33, 0x44, 0x00, 0x00,
    ];

    /// The header from the Wikipedia article on the IPv4 checksum: UDP, 192.168.0.1 ->
    /// 192.168.0.199, total length 115, DF, TTL 64, checksum 0xb861.
    const WIKI: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn parse_golden() {
        let p = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.dscp(), 46);
        assert_eq!(p.ecn(), 1);
        assert_eq!(p.total_len(), 28);
        assert_eq!(p.ident(), 0xabcd);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert!(!p.is_fragment());
        assert_eq!(p.ttl(), 1);
        assert_eq!(p.protocol(), Protocol::Igmp);
        assert_eq!(p.protocol_raw(), 2);
        assert_eq!(p.checksum(), 0x4e3e);
        assert_eq!(p.src_addr(), [10, 0, 0, 1]);
        assert_eq!(p.dst_addr(), [224, 0, 0, 22]);
        assert_eq!(p.src_u32(), 0x0a00_0001);
        assert_eq!(p.dst_u32(), 0xe000_0016);
        assert_eq!(p.options(), &[0x94, 0x04, 0x00, 0x00]);
        assert_eq!(p.payload(), &[0x11, 0x22, 0x33, 0x44]);
        assert!(p.verify_checksum());
    }

    #[test]
    fn build_golden_with_setters() {
        let mut buf = [0u8; 30];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_version(4);
        p.set_header_len(24);
        p.set_dscp(46);
        p.set_ecn(1);
        p.set_total_len(28);
        p.set_ident(0xabcd);
        p.set_dont_frag(true);
        p.set_more_frags(false);
        p.set_frag_offset(0);
        p.set_ttl(1);
        p.set_protocol(Protocol::Igmp);
        p.set_src_addr([10, 0, 0, 1]);
        p.set_dst_addr([224, 0, 0, 22]);
        p.options_mut().copy_from_slice(&[0x94, 0x04, 0x00, 0x00]);
        p.payload_mut().copy_from_slice(&[0x11, 0x22, 0x33, 0x44]);
        p.fill_checksum();
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn repr_emit_and_parse_wikipedia_header() {
        let repr = Repr {
            src: [192, 168, 0, 1],
            dst: [192, 168, 0, 199],
            protocol: Protocol::Udp,
            ttl: 64,
            payload_len: 95,
            dscp: 0,
            dont_frag: true,
            ident: 0,
        };
        let mut buf = [0xAAu8; 115];
        assert_eq!(repr.emit(&mut buf), Ok(20));
        assert_eq!(buf[..20], WIKI);
        assert!(crate::checksum::ipv4_header_ok(&buf));
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Repr::parse(&p), Ok(repr));

        assert_eq!(repr.emit(&mut buf[..19]), Err(Error::Truncated));
        let too_long = Repr {
            payload_len: 65516,
            ..repr
        };
        assert_eq!(too_long.emit(&mut buf), Err(Error::Malformed));
        buf[11] ^= 1;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&buf[..]).unwrap()),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn fragment_fields() {
        let mut buf = WIKI;
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_dont_frag(false);
        p.set_more_frags(true);
        p.set_frag_offset(1480);
        assert_eq!(p.flags_offset(), 0x2000 | 185);
        assert!(p.more_frags() && !p.dont_frag() && p.is_fragment());
        assert_eq!(p.frag_offset(), 1480);
        p.set_more_frags(false);
        assert!(p.is_fragment(), "the last fragment is still a fragment");
        p.set_frag_offset(0);
        assert!(!p.is_fragment());
        p.set_frag_offset(0xFFF8);
        assert_eq!(p.frag_offset(), 0xFFF8);
        assert!(!p.more_frags() && !p.dont_frag());
    }

    #[test]
    fn decrement_ttl_keeps_checksum_valid() {
        let mut buf = GOLDEN;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.decrement_ttl(), 0);
        assert!(p.verify_checksum());
        assert_eq!(p.checksum(), 0x4f3e);
        assert_eq!(p.decrement_ttl(), 0, "TTL 0 is left for the caller to drop");
        assert_eq!(p.checksum(), 0x4f3e);
        let mut buf = WIKI;
        let mut p = Packet::new_unchecked(&mut buf[..]);
        for expect in (0..64).rev() {
            assert_eq!(p.decrement_ttl(), expect);
            assert!(crate::checksum::ipv4_header_ok(p.as_bytes()));
        }
    }

    #[test]
    fn new_checked_rejects() {
        assert_eq!(
            Packet::new_checked(&GOLDEN[..19]),
            Err(Error::Truncated),
            "shorter than a header"
        );
        let mut b = GOLDEN;
        b[0] = 0x66;
        assert_eq!(
            Packet::new_checked(&b[..]),
            Err(Error::Malformed),
            "version"
        );
        b[0] = 0x44;
        assert_eq!(
            Packet::new_checked(&b[..]),
            Err(Error::Malformed),
            "ihl < 5"
        );
        b[0] = 0x4f;
        assert_eq!(
            Packet::new_checked(&b[..]),
            Err(Error::Truncated),
            "options"
        );
        let mut b = GOLDEN;
        b[3] = 23;
        assert_eq!(
            Packet::new_checked(&b[..]),
            Err(Error::Malformed),
            "len < ihl"
        );
        b[3] = 31;
        assert_eq!(
            Packet::new_checked(&b[..]),
            Err(Error::Truncated),
            "len > buf"
        );
        b[3] = 30;
        assert!(Packet::new_checked(&b[..]).is_ok());
        assert_eq!(Packet::new_checked(&GOLDEN[..27]), Err(Error::Truncated));
        assert!(Packet::new_checked(&GOLDEN[..28]).is_ok());
    }

    #[test]
    fn protocol_round_trip() {
        for v in 0..=255u8 {
            assert_eq!(u8::from(Protocol::from(v)), v);
        }
        assert_eq!(Protocol::from(1), Protocol::Icmp);
        assert_eq!(Protocol::from(6), Protocol::Tcp);
        assert_eq!(Protocol::from(17), Protocol::Udp);
        assert_eq!(Protocol::from(47), Protocol::Gre);
        assert_eq!(Protocol::from(58), Protocol::Ipv6Icmp);
        assert_eq!(Protocol::from(41), Protocol::Unknown(41));
    }
}
