//! IEEE 802.1Q tags: the four bytes that follow an 0x8100 (or 0x88a8 for Q-in-Q) EtherType.
//!
//! The view covers the tag control information and the EtherType it wraps, so that after a tag the
//! demux goes on with `inner_ethertype()` exactly as it would with an untagged frame's EtherType.

use crate::ethernet::EtherType;
use crate::{be16, put16, Error, Result};

pub const HEADER_LEN: usize = 4;

mod field {
    pub const TCI: usize = 0;
    pub const ETHERTYPE: usize = 2;
    pub const PAYLOAD: usize = 4;
}

/// A view of one VLAN tag and what follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Tag<T> {
    pub const fn new_unchecked(buffer: T) -> Tag<T> {
        Tag { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Tag<T>> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Tag { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The whole tag control information: PCP (3 bits), DEI (1), VID (12).
    pub fn tci(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TCI)
    }

    /// Priority code point (802.1p class of service).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier, 0..=4095 (0 means priority-tagged only, 4095 is reserved).
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0FFF
    }

    pub fn inner_ethertype(&self) -> EtherType {
        EtherType::from(self.inner_ethertype_raw())
    }

    pub fn inner_ethertype_raw(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Tag<T> {
    pub fn set_tci(&mut self, tci: u16) {
        put16(self.buffer.as_mut(), field::TCI, tci);
    }

    /// Only the low 3 bits of `pcp` are used.
    pub fn set_pcp(&mut self, pcp: u8) {
        let tci = (self.tci() & 0x1FFF) | (u16::from(pcp & 0x7) << 13);
        self.set_tci(tci);
    }

    pub fn set_dei(&mut self, dei: bool) {
        let tci = (self.tci() & !0x1000) | if dei { 0x1000 } else { 0 };
        self.set_tci(tci);
    }

    /// Only the low 12 bits of `vid` are used.
    pub fn set_vid(&mut self, vid: u16) {
        let tci = (self.tci() & 0xF000) | (vid & 0x0FFF);
        self.set_tci(tci);
    }

    pub fn set_inner_ethertype(&mut self, t: EtherType) {
        put16(self.buffer.as_mut(), field::ETHERTYPE, t.into());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub pcp: u8,
    pub dei: bool,
    pub vid: u16,
    pub inner_ethertype: EtherType,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(tag: &Tag<T>) -> Repr {
        Repr {
            pcp: tag.pcp(),
            dei: tag.dei(),
            vid: tag.vid(),
            inner_ethertype: tag.inner_ethertype(),
        }
    }

    /// Writes the 4-byte tag at the start of `buf`. A PCP above 7 or a VID above 4095 is refused
    /// rather than silently truncated into another VLAN.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.pcp > 7 || self.vid > 0x0FFF {
            return Err(Error::Malformed);
        }
        let mut t = Tag::new_unchecked(buf);
        t.set_tci(0);
        t.set_pcp(self.pcp);
        t.set_dei(self.dei);
        t.set_vid(self.vid);
        t.set_inner_ethertype(self.inner_ethertype);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// PCP 5, DEI 1, VID 0x123, inner IPv6, then one payload byte.
    pub(crate) const GOLDEN: [u8; 5] = [0xb1, 0x23, 0x86, 0xdd, 0x60];

    #[test]
    fn parse_golden() {
        let t = Tag::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(t.tci(), 0xb123);
        assert_eq!(t.pcp(), 5);
        assert!(t.dei());
        assert_eq!(t.vid(), 0x123);
        assert_eq!(t.inner_ethertype(), EtherType::Ipv6);
        assert_eq!(t.inner_ethertype_raw(), 0x86dd);
        assert_eq!(t.payload(), &[0x60]);
    }

    #[test]
    fn emit_golden() {
        let repr = Repr {
            pcp: 5,
            dei: true,
            vid: 0x123,
            inner_ethertype: EtherType::Ipv6,
        };
        let mut buf = [0u8; 5];
        buf[4] = 0x60;
        assert_eq!(repr.emit(&mut buf), Ok(4));
        assert_eq!(buf, GOLDEN);
        assert_eq!(Repr::parse(&Tag::new_unchecked(&buf)), repr);
        let bad_vid = Repr { vid: 4096, ..repr };
        assert_eq!(bad_vid.emit(&mut buf), Err(Error::Malformed));
        let bad_pcp = Repr { pcp: 8, ..repr };
        assert_eq!(bad_pcp.emit(&mut buf), Err(Error::Malformed));
        assert_eq!(repr.emit(&mut buf[..3]), Err(Error::Truncated));
    }

    #[test]
    fn setters_touch_only_their_bits() {
        let mut buf = GOLDEN;
        let mut t = Tag::new_checked(&mut buf[..]).unwrap();
        t.set_vid(0xFFFF);
        assert_eq!((t.pcp(), t.dei(), t.vid()), (5, true, 0x0FFF));
        t.set_pcp(0xFF);
        assert_eq!((t.pcp(), t.dei(), t.vid()), (7, true, 0x0FFF));
        t.set_dei(false);
        assert_eq!((t.pcp(), t.dei(), t.vid()), (7, false, 0x0FFF));
        t.set_pcp(0);
        t.set_vid(1);
        t.set_inner_ethertype(EtherType::Ipv4);
        t.payload_mut()[0] = 0x45;
        assert_eq!(buf, [0x00, 0x01, 0x08, 0x00, 0x45]);
    }

    #[test]
    fn truncated() {
        assert_eq!(Tag::new_checked(&GOLDEN[..3]), Err(Error::Truncated));
        assert!(Tag::new_checked(&GOLDEN[..4]).is_ok());
    }
}
