//! IPv6 headers (RFC 8200) and the walk over extension headers to the transport header.

use crate::checksum;
use crate::{be16, be32, put16, put32, Error, Result};

pub const HEADER_LEN: usize = 40;

/// Extension header numbers that `Packet::transport` steps over.
pub const HOP_BY_HOP: u8 = 0;
pub const ROUTING: u8 = 43;
pub const FRAGMENT: u8 = 44;
pub const AUTH: u8 = 51;
pub const DST_OPTIONS: u8 = 60;
pub const NO_NEXT_HEADER: u8 = 59;

/// More than this many extension headers is treated as an attack on the walk, not a packet.
pub const MAX_EXT_HEADERS: usize = 8;

mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: usize = 0;
    pub const LENGTH: usize = 4;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Range<usize> = 8..24;
    pub const DST_ADDR: Range<usize> = 24..40;
}

/// A view of an IPv6 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a received packet: a whole fixed header, version 6, and all of `payload_len` present.
    /// Trailing bytes (Ethernet padding) are allowed and left out of `payload()`.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let p = Packet::new_unchecked(b);
        if p.version() != 6 {
            return Err(Error::Malformed);
        }
        if b.len() < HEADER_LEN + usize::from(p.payload_len()) {
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

    fn first_word(&self) -> u32 {
        be32(self.buffer.as_ref(), field::VER_TC_FLOW)
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TC_FLOW] >> 4
    }

    /// DSCP in the high six bits, ECN in the low two.
    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }

    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 0x03
    }

    pub fn flow_label(&self) -> u32 {
        self.first_word() & 0x000F_FFFF
    }

    /// Bytes after the fixed header, extension headers included.
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    pub fn src_addr(&self) -> [u8; 16] {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        a
    }

    pub fn dst_addr(&self) -> [u8; 16] {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        a
    }

    /// Source address as a big-endian number, the form the FIB keys on.
    pub fn src_u128(&self) -> u128 {
        u128::from_be_bytes(self.src_addr())
    }

    pub fn dst_u128(&self) -> u128 {
        u128::from_be_bytes(self.dst_addr())
    }

    /// Everything after the fixed header up to `payload_len`, extension headers included.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }

    /// Walks the extension headers to the upper-layer header.
    ///
    /// Returns the upper-layer protocol, the offset of its header from the start of the IPv6
    /// header, and whether this is a non-first fragment (then the offset is where the fragment's
    /// data starts and no transport header is there). Hop-by-Hop, Routing, Fragment, Destination
    /// Options and AH are stepped over; any other value is the answer, including 59 (no next
    /// header) and ESP (50), whose contents are opaque. Returns `None` when a header runs past
    /// `payload_len` or the buffer, or when there are more than [`MAX_EXT_HEADERS`] of them.
    pub fn transport(&self) -> Option<(u8, usize, bool)> {
        let b = self.buffer.as_ref();
        let end = b
            .len()
            .min(HEADER_LEN.saturating_add(usize::from(self.payload_len())));
        if end < HEADER_LEN {
            return None;
        }
        let mut nh = self.next_header();
        let mut off = HEADER_LEN;
        for _ in 0..=MAX_EXT_HEADERS {
            let len = match nh {
                HOP_BY_HOP | ROUTING | DST_OPTIONS | AUTH => {
                    if off + 2 > end {
                        return None;
                    }
                    let n = usize::from(b[off + 1]);
                    // AH counts 4-byte words less two (RFC 4302); the others 8-byte units less one.
                    if nh == AUTH {
                        (n + 2) * 4
                    } else {
                        (n + 1) * 8
                    }
                }
                FRAGMENT => 8,
                _ => return Some((nh, off, false)),
            };
            if off + len > end {
                return None;
            }
            let next = b[off];
            if nh == FRAGMENT && be16(b, off + 2) & 0xFFF8 != 0 {
                return Some((next, off + len, true));
            }
            nh = next;
            off += len;
        }
        None
    }

    /// Checksum of an upper-layer message over this packet's pseudo-header: `upper` is the message
    /// (checksum field included) and `proto` its next-header value. Zero means it verifies.
    pub fn upper_checksum(&self, proto: u8, upper: &[u8]) -> u16 {
        let pseudo = checksum::pseudo_v6(
            &self.src_addr(),
            &self.dst_addr(),
            proto,
            upper.len() as u32,
        );
        checksum::fold(checksum::combine(pseudo, checksum::sum(upper)))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_first_word(&mut self, w: u32) {
        put32(self.buffer.as_mut(), field::VER_TC_FLOW, w);
    }

    pub fn set_version(&mut self, v: u8) {
        let w = (self.first_word() & 0x0FFF_FFFF) | (u32::from(v & 0x0F) << 28);
        self.set_first_word(w);
    }

    pub fn set_traffic_class(&mut self, tc: u8) {
        let w = (self.first_word() & 0xF00F_FFFF) | (u32::from(tc) << 20);
        self.set_first_word(w);
    }

    pub fn set_dscp(&mut self, dscp: u8) {
        self.set_traffic_class((self.traffic_class() & 0x03) | (dscp << 2));
    }

    pub fn set_ecn(&mut self, ecn: u8) {
        self.set_traffic_class((self.traffic_class() & 0xFC) | (ecn & 0x03));
    }

    /// Only the low 20 bits of `label` are used.
    pub fn set_flow_label(&mut self, label: u32) {
        let w = (self.first_word() & 0xFFF0_0000) | (label & 0x000F_FFFF);
        self.set_first_word(w);
    }

    pub fn set_payload_len(&mut self, len: u16) {
        put16(self.buffer.as_mut(), field::LENGTH, len);
    }

    pub fn set_next_header(&mut self, nh: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = nh;
    }

    pub fn set_hop_limit(&mut self, h: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = h;
    }

    pub fn set_src_addr(&mut self, a: &[u8; 16]) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(a);
    }

    pub fn set_dst_addr(&mut self, a: &[u8; 16]) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(a);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// The fields of a fixed header, for building packets on the slow path. Extension headers, if
/// any, are part of the payload and `next_header` names the first of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub next_header: u8,
    pub hop_limit: u8,
    pub payload_len: usize,
    pub traffic_class: u8,
    pub flow_label: u32,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            next_header: p.next_header(),
            hop_limit: p.hop_limit(),
            payload_len: usize::from(p.payload_len()),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
        }
    }

    /// Writes the 40-byte fixed header at the start of `buf`; returns 40.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = u16::try_from(self.payload_len).map_err(|_| Error::Malformed)?;
        if self.flow_label > 0x000F_FFFF {
            return Err(Error::Malformed);
        }
        buf[..HEADER_LEN].fill(0);
        let mut p = Packet::new_unchecked(&mut buf[..HEADER_LEN]);
        p.set_version(6);
        p.set_traffic_class(self.traffic_class);
        p.set_flow_label(self.flow_label);
        p.set_payload_len(len);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src_addr(&self.src);
        p.set_dst_addr(&self.dst);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// UDP 2001:db8::1 port 5000 -> 2001:db8::2 port 6000, payload "abc", traffic class 0xb8 (EF),
    /// flow label 0x12345, hop limit 64, then one byte of padding. Checked with tshark.
    pub(crate) const GOLDEN: [u8; 52] = [
        0x6b, 0x81, 0x23, 0x45, 0x00, 0x0b, 0x11, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x13, 0x88, 0x17, 0x70, 0x00,
        0x0b, 0xb5, 0x08, 0x61, 0x62, 0x63, 0x00,
    ];

    pub(crate) const SRC: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    pub(crate) const DST: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

    #[test]
    fn parse_golden() {
        let p = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.dscp(), 46);
        assert_eq!(p.ecn(), 0);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 11);
        assert_eq!(p.next_header(), 17);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), SRC);
        assert_eq!(p.dst_addr(), DST);
        assert_eq!(p.src_u128(), 0x2001_0db8_0000_0000_0000_0000_0000_0001);
        assert_eq!(p.dst_u128(), 0x2001_0db8_0000_0000_0000_0000_0000_0002);
        assert_eq!(p.payload(), &GOLDEN[40..51]);
        assert_eq!(p.transport(), Some((17, 40, false)));
        assert_eq!(p.upper_checksum(17, p.payload()), 0);
    }

    #[test]
    fn emit_golden() {
        let repr = Repr {
            src: SRC,
            dst: DST,
            next_header: 17,
            hop_limit: 64,
            payload_len: 11,
            traffic_class: 0xb8,
            flow_label: 0x12345,
        };
        let mut buf = [0xFFu8; 52];
        assert_eq!(repr.emit(&mut buf), Ok(40));
        assert_eq!(buf[..40], GOLDEN[..40]);
        assert_eq!(Repr::parse(&Packet::new_unchecked(&GOLDEN[..])), repr);
        assert_eq!(repr.emit(&mut buf[..39]), Err(Error::Truncated));
        let big = Repr {
            payload_len: 65536,
            ..repr
        };
        assert_eq!(big.emit(&mut buf), Err(Error::Malformed));
        let bad_flow = Repr {
            flow_label: 0x100000,
            ..repr
        };
        assert_eq!(bad_flow.emit(&mut buf), Err(Error::Malformed));
    }

    #[test]
    fn setters_touch_only_their_bits() {
        let mut buf = GOLDEN;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_flow_label(0xFFFF_FFFF);
        assert_eq!(
            (p.version(), p.traffic_class(), p.flow_label()),
            (6, 0xb8, 0xFFFFF)
        );
        p.set_traffic_class(0x01);
        assert_eq!(
            (p.version(), p.traffic_class(), p.flow_label()),
            (6, 0x01, 0xFFFFF)
        );
        p.set_dscp(10);
        assert_eq!((p.dscp(), p.ecn()), (10, 1));
        p.set_ecn(3);
        assert_eq!((p.dscp(), p.ecn()), (10, 3));
        p.set_hop_limit(1);
        p.set_next_header(58);
        p.set_src_addr(&DST);
        p.set_dst_addr(&SRC);
        p.payload_mut()[0] = 0xEE;
        assert_eq!(p.hop_limit(), 1);
        assert_eq!(p.next_header(), 58);
        assert_eq!(p.src_addr(), DST);
        assert_eq!(p.dst_addr(), SRC);
        p.set_version(4);
        assert_eq!(p.version(), 4);
        assert_eq!(p.flow_label(), 0xFFFFF);
        assert_eq!(buf[40], 0xEE);
    }

    #[test]
    fn new_checked_rejects() {
        assert_eq!(Packet::new_checked(&GOLDEN[..39]), Err(Error::Truncated));
        assert_eq!(Packet::new_checked(&GOLDEN[..50]), Err(Error::Truncated));
        assert!(Packet::new_checked(&GOLDEN[..51]).is_ok());
        let mut b = GOLDEN;
        b[0] = 0x4b;
        assert_eq!(Packet::new_checked(&b[..]), Err(Error::Malformed));
    }

    /// Builds a packet whose payload is `ext` followed by 8 bytes of "transport".
    fn with_ext(first: u8, ext: &[u8]) -> Vec<u8> {
        let mut v = GOLDEN[..40].to_vec();
        v[6] = first;
        let len = (ext.len() + 8) as u16;
        v[4..6].copy_from_slice(&len.to_be_bytes());
        v.extend_from_slice(ext);
        v.extend_from_slice(&[0xAA; 8]);
        v
    }

    #[test]
    fn transport_walks_extension_headers() {
        // Hop-by-Hop (8 bytes) -> Routing (24) -> Destination Options (16) -> AH (length field 4,
        // so (4+2)*4 = 24 bytes) -> TCP at 40 + 72.
        let mut ext = vec![ROUTING, 0, 5, 2, 0, 0, 1, 0];
        ext.extend_from_slice(&[DST_OPTIONS, 2, 0, 1, 0, 0, 0, 0]);
        ext.extend_from_slice(&[0; 16]);
        ext.extend_from_slice(&[AUTH, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        ext.extend_from_slice(&[6, 4, 0, 0]);
        ext.extend_from_slice(&[0; 20]);
        let v = with_ext(HOP_BY_HOP, &ext);
        let p = Packet::new_checked(&v[..]).unwrap();
        assert_eq!(p.transport(), Some((6, 40 + 8 + 24 + 16 + 24, false)));
        // Cut anywhere inside the chain: never a wrong answer, only None.
        for cut in 0..ext.len() {
            let mut t = v.clone();
            let len = cut as u16;
            t[4..6].copy_from_slice(&len.to_be_bytes());
            t.truncate(40 + cut);
            let p = Packet::new_checked(&t[..]).unwrap();
            assert_eq!(p.transport(), None, "cut at {cut}");
        }
        // A chain that ends exactly at payload_len with nothing after it is still an answer.
        let mut t = v.clone();
        t[4..6].copy_from_slice(&(ext.len() as u16).to_be_bytes());
        t.truncate(40 + ext.len());
        let p = Packet::new_checked(&t[..]).unwrap();
        assert_eq!(p.transport(), Some((6, 112, false)));
    }

    #[test]
    fn transport_fragments() {
        // First fragment (offset 0, M set): the walk goes on to UDP.
        let first = with_ext(FRAGMENT, &[17, 0, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef]);
        let p = Packet::new_checked(&first[..]).unwrap();
        assert_eq!(p.transport(), Some((17, 48, false)));
        // Later fragment (offset 1448 = 181 units): no transport header.
        let off: u16 = 181 << 3;
        let [hi, lo] = off.to_be_bytes();
        let later = with_ext(FRAGMENT, &[17, 0, hi, lo, 0xde, 0xad, 0xbe, 0xef]);
        let p = Packet::new_checked(&later[..]).unwrap();
        assert_eq!(p.transport(), Some((17, 48, true)));
        // Fragment header cut short.
        let mut cut = first.clone();
        cut[4..6].copy_from_slice(&7u16.to_be_bytes());
        cut.truncate(47);
        assert_eq!(Packet::new_checked(&cut[..]).unwrap().transport(), None);
    }

    #[test]
    fn transport_stops_at_unknown_and_limits_depth() {
        let esp = with_ext(50, &[]);
        assert_eq!(
            Packet::new_checked(&esp[..]).unwrap().transport(),
            Some((50, 40, false))
        );
        let none = with_ext(NO_NEXT_HEADER, &[]);
        assert_eq!(
            Packet::new_checked(&none[..]).unwrap().transport(),
            Some((59, 40, false))
        );
        let chain = |n: usize| {
            let mut ext = Vec::new();
            for i in 0..n {
                let next = if i + 1 == n { 58 } else { DST_OPTIONS };
                ext.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]);
            }
            with_ext(DST_OPTIONS, &ext)
        };
        let ok = chain(MAX_EXT_HEADERS);
        assert_eq!(
            Packet::new_checked(&ok[..]).unwrap().transport(),
            Some((58, 40 + 8 * MAX_EXT_HEADERS, false))
        );
        let deep = chain(MAX_EXT_HEADERS + 1);
        assert_eq!(Packet::new_checked(&deep[..]).unwrap().transport(), None);
    }
}
