//! TCP headers (RFC 9293). The router reads ports and flags (ACLs, flow hashing, NAT) and
//! rewrites ports and checksums; it never runs TCP itself.

use crate::checksum;
use crate::{be16, be32, put16, put32, Error, Result};

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;

const PROTO: u8 = 6;

/// The eight flag bits of byte 13.
pub mod flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    pub const DATA_OFF: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
}

/// A view of a TCP segment. TCP has no length field, so the segment is the whole buffer: give the
/// view exactly the IP payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a received segment: a fixed header, a data offset of at least 5 words, and all the
    /// options it claims.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hlen = Packet::new_unchecked(b).header_len();
        if hlen < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if b.len() < hlen {
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

    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }

    pub fn seq(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SEQ)
    }

    pub fn ack(&self) -> u32 {
        be32(self.buffer.as_ref(), field::ACK)
    }

    /// Header length in bytes (data offset * 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::DATA_OFF] >> 4) * 4
    }

    /// The eight flag bits; test them against the constants in [`flags`].
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    pub fn window(&self) -> u16 {
        be16(self.buffer.as_ref(), field::WINDOW)
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    pub fn urgent(&self) -> u16 {
        be16(self.buffer.as_ref(), field::URGENT)
    }

    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    pub fn verify_checksum_v4(&self, src: [u8; 4], dst: [u8; 4]) -> bool {
        let b = self.buffer.as_ref();
        let pseudo = checksum::pseudo_v4(src, dst, PROTO, b.len() as u32);
        checksum::fold(checksum::combine(pseudo, checksum::sum(b))) == 0
    }

    pub fn verify_checksum_v6(&self, src: &[u8; 16], dst: &[u8; 16]) -> bool {
        let b = self.buffer.as_ref();
        let pseudo = checksum::pseudo_v6(src, dst, PROTO, b.len() as u32);
        checksum::fold(checksum::combine(pseudo, checksum::sum(b))) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, port: u16) {
        put16(self.buffer.as_mut(), field::SRC_PORT, port);
    }

    pub fn set_dst_port(&mut self, port: u16) {
        put16(self.buffer.as_mut(), field::DST_PORT, port);
    }

    pub fn set_seq(&mut self, seq: u32) {
        put32(self.buffer.as_mut(), field::SEQ, seq);
    }

    pub fn set_ack(&mut self, ack: u32) {
        put32(self.buffer.as_mut(), field::ACK, ack);
    }

    /// Sets the data offset from a length in bytes, a multiple of 4 between 20 and 60. The low
    /// nibble of the byte (reserved bits) is kept.
    pub fn set_header_len(&mut self, len: usize) {
        debug_assert!(len.is_multiple_of(4) && (HEADER_LEN..=60).contains(&len));
        let b = &mut self.buffer.as_mut()[field::DATA_OFF];
        *b = (*b & 0x0F) | (((len / 4) as u8) << 4);
    }

    pub fn set_flags(&mut self, flags: u8) {
        self.buffer.as_mut()[field::FLAGS] = flags;
    }

    pub fn set_window(&mut self, w: u16) {
        put16(self.buffer.as_mut(), field::WINDOW, w);
    }

    pub fn set_checksum(&mut self, c: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    pub fn set_urgent(&mut self, u: u16) {
        put16(self.buffer.as_mut(), field::URGENT, u);
    }

    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }

    /// Computes the checksum over the IPv4 pseudo-header and the whole buffer.
    pub fn fill_checksum_v4(&mut self, src: [u8; 4], dst: [u8; 4]) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let pseudo = checksum::pseudo_v4(src, dst, PROTO, b.len() as u32);
        let c = checksum::fold(checksum::combine(pseudo, checksum::sum(b)));
        self.set_checksum(c);
    }

    /// Computes the checksum over the IPv6 pseudo-header and the whole buffer.
    pub fn fill_checksum_v6(&mut self, src: &[u8; 16], dst: &[u8; 16]) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let pseudo = checksum::pseudo_v6(src, dst, PROTO, b.len() as u32);
        let c = checksum::fold(checksum::combine(pseudo, checksum::sum(b)));
        self.set_checksum(c);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// SYN 10.1.1.1:40000 -> 10.2.2.2:80, seq 0x01020304, window 64240, MSS 1460; checksum
    /// confirmed by tshark.
    pub(crate) const GOLDEN: [u8; 24] = [
        0x9c, 0x40, 0x00, 0x50, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x00, 0x60, 0x02, 0xfa,
        0xf0, 0xe5, 0x99, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4,
    ];
    const SRC: [u8; 4] = [10, 1, 1, 1];
    const DST: [u8; 4] = [10, 2, 2, 2];

    #[test]
    fn parse_golden() {
        let p = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(p.src_port(), 40000);
        assert_eq!(p.dst_port(), 80);
        assert_eq!(p.seq(), 0x0102_0304);
        assert_eq!(p.ack(), 0);
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.flags(), flags::SYN);
        assert_eq!(p.window(), 64240);
        assert_eq!(p.checksum(), 0xe599);
        assert_eq!(p.urgent(), 0);
        assert_eq!(p.options(), &[0x02, 0x04, 0x05, 0xb4]);
        assert!(p.payload().is_empty());
        assert!(p.verify_checksum_v4(SRC, DST));
        assert!(!p.verify_checksum_v4(DST, SRC.map(|b| b ^ 1)));
    }

    #[test]
    fn build_golden_with_setters() {
        let mut buf = [0u8; 24];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_src_port(40000);
        p.set_dst_port(80);
        p.set_seq(0x0102_0304);
        p.set_ack(0);
        p.set_header_len(24);
        p.set_flags(flags::SYN);
        p.set_window(64240);
        p.set_urgent(0);
        p.options_mut().copy_from_slice(&[0x02, 0x04, 0x05, 0xb4]);
        p.fill_checksum_v4(SRC, DST);
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn ipv6_checksum_round_trip() {
        let (s, d) = (crate::ipv6::tests::SRC, crate::ipv6::tests::DST);
        let mut buf = GOLDEN.to_vec();
        buf.extend_from_slice(b"data!");
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_flags(flags::ACK | flags::PSH);
        p.fill_checksum_v6(&s, &d);
        assert!(p.verify_checksum_v6(&s, &d));
        assert!(!p.verify_checksum_v6(&d, &d));
        assert_eq!(p.payload(), b"data!");
        p.payload_mut()[0] = b'D';
        assert!(!p.verify_checksum_v6(&s, &d));
    }

    #[test]
    fn new_checked_rejects() {
        assert_eq!(Packet::new_checked(&GOLDEN[..19]), Err(Error::Truncated));
        assert_eq!(Packet::new_checked(&GOLDEN[..23]), Err(Error::Truncated));
        let mut b = GOLDEN;
        b[12] = 0x40;
        assert_eq!(Packet::new_checked(&b[..]), Err(Error::Malformed));
        b[12] = 0x50;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.options().is_empty());
        assert_eq!(p.payload().len(), 4);
    }
}
