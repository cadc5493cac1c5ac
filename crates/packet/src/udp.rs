//! UDP headers (RFC 768).

use crate::checksum;
use crate::{be16, put16, Error, Result};

pub const HEADER_LEN: usize = 8;

/// The IP protocol number, for pseudo-headers.
const PROTO: u8 = 17;

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

/// A view of a UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a received datagram: the header is there, its length is at least 8 and all of it is
    /// in the buffer. Bytes past the length are ignored.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = usize::from(be16(b, field::LENGTH));
        if len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if b.len() < len {
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

    /// The length field: header plus payload.
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }

    /// The datagram as the length field sees it, clamped to the buffer so that an unchecked view
    /// cannot make the checksum code index past the end.
    fn datagram(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[..usize::from(self.len()).min(b.len())]
    }

    /// Whether the checksum is right for these IPv4 addresses. Zero means the sender did not
    /// compute one, which IPv4 allows.
    pub fn verify_checksum_v4(&self, src: [u8; 4], dst: [u8; 4]) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let d = self.datagram();
        let pseudo = checksum::pseudo_v4(src, dst, PROTO, d.len() as u32);
        checksum::fold(checksum::combine(pseudo, checksum::sum(d))) == 0
    }

    /// Whether the checksum is right for these IPv6 addresses. IPv6 makes the checksum
    /// mandatory (RFC 8200 section 8.1), so zero is wrong.
    pub fn verify_checksum_v6(&self, src: &[u8; 16], dst: &[u8; 16]) -> bool {
        if self.checksum() == 0 {
            return false;
        }
        let d = self.datagram();
        let pseudo = checksum::pseudo_v6(src, dst, PROTO, d.len() as u32);
        checksum::fold(checksum::combine(pseudo, checksum::sum(d))) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, port: u16) {
        put16(self.buffer.as_mut(), field::SRC_PORT, port);
    }

    pub fn set_dst_port(&mut self, port: u16) {
        put16(self.buffer.as_mut(), field::DST_PORT, port);
    }

    pub fn set_len(&mut self, len: u16) {
        put16(self.buffer.as_mut(), field::LENGTH, len);
    }

    pub fn set_checksum(&mut self, c: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    fn fill_with(&mut self, pseudo: u32) {
        self.set_checksum(0);
        let c = checksum::fold(checksum::combine(pseudo, checksum::sum(self.datagram())));
        // A computed zero goes out as 0xFFFF, since zero on the wire means "no checksum".
        self.set_checksum(if c == 0 { 0xFFFF } else { c });
    }

    /// Computes the checksum over the IPv4 pseudo-header and the datagram (to its length field).
    pub fn fill_checksum_v4(&mut self, src: [u8; 4], dst: [u8; 4]) {
        let len = self.datagram().len() as u32;
        self.fill_with(checksum::pseudo_v4(src, dst, PROTO, len));
    }

    /// Computes the checksum over the IPv6 pseudo-header and the datagram (to its length field).
    pub fn fill_checksum_v6(&mut self, src: &[u8; 16], dst: &[u8; 16]) {
        let len = self.datagram().len() as u32;
        self.fill_with(checksum::pseudo_v6(src, dst, PROTO, len));
    }
}

/// The header fields, for the slow path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    pub payload_len: usize,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload_len: usize::from(p.len()).saturating_sub(HEADER_LEN),
        }
    }

    /// Writes the 8-byte header with a zero checksum; once the payload is in place, the caller
    /// fills the checksum with `fill_checksum_v4` or `fill_checksum_v6`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = u16::try_from(HEADER_LEN + self.payload_len).map_err(|_| Error::Malformed)?;
        let mut p = Packet::new_unchecked(&mut buf[..HEADER_LEN]);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(len);
        p.set_checksum(0);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ipv6::tests::{DST as DST6, SRC as SRC6};

    /// 192.0.2.1:1234 -> 198.51.100.2:53, "hello"; the UDP part of an IPv4 packet whose checksum
    /// tshark confirmed.
    pub(crate) const GOLDEN: [u8; 13] = [
        0x04, 0xd2, 0x00, 0x35, 0x00, 0x0d, 0xca, 0xc3, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
    ];
    pub(crate) const SRC: [u8; 4] = [192, 0, 2, 1];
    pub(crate) const DST: [u8; 4] = [198, 51, 100, 2];

    #[test]
    fn parse_golden() {
        let p = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(p.src_port(), 1234);
        assert_eq!(p.dst_port(), 53);
        assert_eq!(p.len(), 13);
        assert!(!p.is_empty());
        assert_eq!(p.checksum(), 0xcac3);
        assert_eq!(p.payload(), b"hello");
        assert!(p.verify_checksum_v4(SRC, DST));
        assert!(!p.verify_checksum_v4(DST, [198, 51, 100, 3]));
    }

    #[test]
    fn emit_golden() {
        let repr = Repr {
            src_port: 1234,
            dst_port: 53,
            payload_len: 5,
        };
        let mut buf = [0u8; 13];
        assert_eq!(repr.emit(&mut buf), Ok(8));
        buf[8..].copy_from_slice(b"hello");
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.fill_checksum_v4(SRC, DST);
        assert_eq!(buf, GOLDEN);
        assert_eq!(Repr::parse(&Packet::new_unchecked(&buf)), repr);
        assert_eq!(repr.emit(&mut buf[..7]), Err(Error::Truncated));
    }

    #[test]
    fn ipv6_golden() {
        let g = &crate::ipv6::tests::GOLDEN[40..51];
        let p = Packet::new_checked(g).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.len()), (5000, 6000, 11));
        assert_eq!(p.checksum(), 0xb508);
        assert_eq!(p.payload(), b"abc");
        assert!(p.verify_checksum_v6(&SRC6, &DST6));
        let mut b = g.to_vec();
        let mut q = Packet::new_checked(&mut b[..]).unwrap();
        q.set_checksum(0);
        assert!(
            !q.verify_checksum_v6(&SRC6, &DST6),
            "zero is not allowed over IPv6"
        );
        q.fill_checksum_v6(&SRC6, &DST6);
        assert_eq!(&b[..], g);
    }

    #[test]
    fn computed_zero_is_sent_as_ffff() {
        // Choose the payload word so the whole sum is 0xFFFF and the checksum computes to 0.
        let mut buf = [0u8; 10];
        Repr {
            src_port: 1,
            dst_port: 2,
            payload_len: 2,
        }
        .emit(&mut buf)
        .unwrap();
        let pseudo = checksum::pseudo_v4(SRC, DST, 17, 10);
        let partial = !checksum::fold(checksum::combine(pseudo, checksum::sum(&buf)));
        buf[8..].copy_from_slice(&(0xFFFF - partial).to_be_bytes());
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.fill_checksum_v4(SRC, DST);
        assert_eq!(p.checksum(), 0xFFFF);
        assert!(p.verify_checksum_v4(SRC, DST));
    }

    #[test]
    fn setters() {
        let mut buf = GOLDEN;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_src_port(7);
        p.set_dst_port(9);
        p.set_len(9);
        p.payload_mut()[0] = b'H';
        assert_eq!((p.src_port(), p.dst_port(), p.len()), (7, 9, 9));
        assert_eq!(p.payload(), b"H");
    }

    #[test]
    fn new_checked_rejects() {
        assert_eq!(Packet::new_checked(&GOLDEN[..7]), Err(Error::Truncated));
        assert_eq!(Packet::new_checked(&GOLDEN[..12]), Err(Error::Truncated));
        let mut b = GOLDEN;
        b[5] = 7;
        assert_eq!(Packet::new_checked(&b[..]), Err(Error::Malformed));
        b[5] = 8;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.is_empty() && p.payload().is_empty());
    }
}
