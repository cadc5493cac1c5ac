//! Ethernet II frames (IEEE 802.3 with an EtherType, no FCS: NICs strip it).

use core::fmt;
use core::str::FromStr;

use crate::{be16, put16, Error, Result};

/// A 48-bit MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xFF; 6]);
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    pub const fn octets(&self) -> [u8; 6] {
        self.0
    }

    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// The I/G bit: set for group addresses, which includes broadcast.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// The U/L bit: set for addresses assigned locally rather than by the vendor.
    pub fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }

    pub fn is_zero(&self) -> bool {
        *self == Self::ZERO
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(b: [u8; 6]) -> Self {
        MacAddr(b)
    }
}

impl From<MacAddr> for [u8; 6] {
    fn from(m: MacAddr) -> Self {
        m.0
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// Parses six groups of two hex digits separated all by ':' or all by '-' (the Linux and the
/// Windows/IEEE spellings). Config files are written by hand, so anything looser is rejected rather
/// than guessed at.
impl FromStr for MacAddr {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let b = s.as_bytes();
        if b.len() != 17 {
            return Err(Error::Malformed);
        }
        let sep = b[2];
        if sep != b':' && sep != b'-' {
            return Err(Error::Malformed);
        }
        let mut out = [0u8; 6];
        for (i, o) in out.iter_mut().enumerate() {
            let at = i * 3;
            if i > 0 && b[at - 1] != sep {
                return Err(Error::Malformed);
            }
            let hi = hex_digit(b[at]).ok_or(Error::Malformed)?;
            let lo = hex_digit(b[at + 1]).ok_or(Error::Malformed)?;
            *o = hi << 4 | lo;
        }
        Ok(MacAddr(out))
    }
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// The EtherType code points the router acts on; anything else is carried as `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EtherType {
    Ipv4,
    Arp,
    Vlan,
    QinQ,
    Ipv6,
    Mpls,
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        match v {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x8100 => EtherType::Vlan,
            0x88a8 => EtherType::QinQ,
            0x86dd => EtherType::Ipv6,
            0x8847 => EtherType::Mpls,
            other => EtherType::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(t: EtherType) -> Self {
        match t {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Vlan => 0x8100,
            EtherType::QinQ => 0x88a8,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Mpls => 0x8847,
            EtherType::Unknown(v) => v,
        }
    }
}

pub const HEADER_LEN: usize = 14;

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: usize = 12;
    pub const PAYLOAD: usize = 14;
}

/// A view of an Ethernet II frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wraps a received frame; only the 14-byte header has to be there.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Frame { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn dst(&self) -> MacAddr {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        MacAddr(a)
    }

    pub fn src(&self) -> MacAddr {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        MacAddr(a)
    }

    pub fn ethertype(&self) -> EtherType {
        EtherType::from(self.ethertype_raw())
    }

    /// The raw field, for dispatch tables indexed by number.
    pub fn ethertype_raw(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    pub fn set_dst(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&addr.0);
    }

    pub fn set_src(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&addr.0);
    }

    pub fn set_ethertype(&mut self, t: EtherType) {
        put16(self.buffer.as_mut(), field::ETHERTYPE, t.into());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// The header fields of a frame, for the slow path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub dst: MacAddr,
    pub src: MacAddr,
    pub ethertype: EtherType,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Repr {
        Repr {
            dst: frame.dst(),
            src: frame.src(),
            ethertype: frame.ethertype(),
        }
    }

    /// Writes the 14-byte header at the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let mut f = Frame::new_unchecked(buf);
        f.set_dst(self.dst);
        f.set_src(self.src);
        f.set_ethertype(self.ethertype);
        Ok(HEADER_LEN)
    }
}

/// 802.1Q's tag protocol identifier (a C-tag).
pub const TPID_DOT1Q: u16 = 0x8100;
/// 802.1ad's (an S-tag, the outer tag of Q-in-Q).
pub const TPID_DOT1AD: u16 = 0x88a8;

/// The VLAN tags of a header, outermost first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tags {
    #[default]
    None,
    /// One 802.1Q tag with this VLAN id.
    Dot1q(u16),
    /// 802.1ad Q-in-Q: an S-tag (TPID 0x88a8) with `outer`, then a C-tag with `inner`.
    QinQ { outer: u16, inner: u16 },
}

impl Tags {
    /// One 802.1Q tag if `vlan` is set, else none: a sub-interface's tagging.
    pub fn from_vlan(vlan: Option<u16>) -> Tags {
        vlan.map_or(Tags::None, Tags::Dot1q)
    }

    /// The bytes the tags take.
    pub fn len(self) -> usize {
        match self {
            Tags::None => 0,
            Tags::Dot1q(_) => 4,
            Tags::QinQ { .. } => 8,
        }
    }

    pub fn is_empty(self) -> bool {
        self == Tags::None
    }
}

/// An Ethernet header with its VLAN tags, for building frames. The one place Linerate writes a
/// tag: forwarding's rewrites, the control plane's ARP and ND, the tester's streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub dst: MacAddr,
    pub src: MacAddr,
    pub tags: Tags,
    /// The EtherType of what follows the tags.
    pub ethertype: u16,
}

impl Header {
    /// The header's length: where the payload starts.
    pub fn len(&self) -> usize {
        HEADER_LEN + self.tags.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the header at the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let n = self.len();
        if buf.len() < n {
            return Err(Error::Truncated);
        }
        buf[0..6].copy_from_slice(&self.dst.0);
        buf[6..12].copy_from_slice(&self.src.0);
        let mut at = 12;
        let mut tag = |buf: &mut [u8], tpid: u16, vid: u16| {
            put16(buf, at, tpid);
            put16(buf, at + 2, vid & 0x0fff);
            at += 4;
        };
        match self.tags {
            Tags::None => {}
            Tags::Dot1q(v) => tag(buf, TPID_DOT1Q, v),
            Tags::QinQ { outer, inner } => {
                tag(buf, TPID_DOT1AD, outer);
                tag(buf, TPID_DOT1Q, inner);
            }
        }
        put16(buf, at, self.ethertype);
        Ok(n)
    }

    /// Appends the header to `out`; returns where the payload starts in `out`.
    pub fn push_to(&self, out: &mut Vec<u8>) -> usize {
        let at = out.len();
        out.resize(at + self.len(), 0);
        self.emit(&mut out[at..]).expect("sized");
        out.len()
    }
}

/// `frame` (an untagged Ethernet frame) with an 802.1Q tag of `vid` after its addresses.
pub fn with_dot1q(frame: &[u8], vid: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(frame.len() + 4);
    f.extend_from_slice(&frame[..12.min(frame.len())]);
    f.extend_from_slice(&TPID_DOT1Q.to_be_bytes());
    f.extend_from_slice(&(vid & 0x0fff).to_be_bytes());
    f.extend_from_slice(frame.get(12..).unwrap_or(&[]));
    f
}

/// `frame` without its outer 802.1Q or 802.1ad tag; None if it has none.
pub fn without_tag(frame: &[u8]) -> Option<Vec<u8>> {
    if frame.len() < 18 || !matches!(be16(frame, 12), TPID_DOT1Q | TPID_DOT1AD) {
        return None;
    }
    let mut f = Vec::with_capacity(frame.len() - 4);
    f.extend_from_slice(&frame[..12]);
    f.extend_from_slice(&frame[16..]);
    Some(f)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Broadcast ARP request header from 52:54:00:12:34:56, with two payload bytes.
    pub(crate) const GOLDEN: [u8; 16] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x06, 0x00,
        0x01,
    ];

    #[test]
    fn headers_write_their_tags() {
        let h = |tags| Header {
            dst: MacAddr::BROADCAST,
            src: MacAddr([2, 0, 0, 0, 0, 1]),
            tags,
            ethertype: 0x0806,
        };
        let mut b = [0u8; 22];
        assert_eq!(h(Tags::None).emit(&mut b), Ok(14));
        assert_eq!(&b[12..14], &[0x08, 0x06]);
        assert_eq!(h(Tags::Dot1q(0x1064)).emit(&mut b), Ok(18));
        assert_eq!(
            &b[12..18],
            &[0x81, 0x00, 0x00, 0x64, 0x08, 0x06],
            "VID masked to 12 bits"
        );
        let q = h(Tags::QinQ {
            outer: 100,
            inner: 7,
        });
        assert_eq!(q.emit(&mut b), Ok(22));
        assert_eq!(
            &b[12..22],
            &[0x88, 0xa8, 0x00, 100, 0x81, 0x00, 0x00, 7, 0x08, 0x06]
        );
        assert_eq!(q.emit(&mut b[..21]), Err(Error::Truncated));
        let mut v = vec![9];
        assert_eq!(h(Tags::Dot1q(5)).push_to(&mut v), 19);
        let tagged = with_dot1q(&GOLDEN, 5);
        assert_eq!(&tagged[12..18], &[0x81, 0x00, 0, 5, 0x08, 0x06]);
        assert_eq!(without_tag(&tagged).as_deref(), Some(&GOLDEN[..]));
        assert_eq!(without_tag(&GOLDEN), None);
    }

    #[test]
    fn parse_golden() {
        let f = Frame::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(f.dst(), MacAddr::BROADCAST);
        assert_eq!(f.src(), MacAddr([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]));
        assert_eq!(f.ethertype(), EtherType::Arp);
        assert_eq!(f.ethertype_raw(), 0x0806);
        assert_eq!(f.payload(), &[0x00, 0x01]);
    }

    #[test]
    fn emit_golden() {
        let mut buf = [0u8; 16];
        let repr = Repr {
            dst: MacAddr::BROADCAST,
            src: "52:54:00:12:34:56".parse().unwrap(),
            ethertype: EtherType::Arp,
        };
        assert_eq!(repr.emit(&mut buf), Ok(14));
        buf[14..].copy_from_slice(&[0x00, 0x01]);
        assert_eq!(buf, GOLDEN);
        assert_eq!(Repr::parse(&Frame::new_checked(&buf[..]).unwrap()), repr);
        assert_eq!(repr.emit(&mut buf[..13]), Err(Error::Truncated));
    }

    #[test]
    fn setters() {
        let mut buf = GOLDEN;
        let mut f = Frame::new_checked(&mut buf[..]).unwrap();
        f.set_dst(MacAddr([2, 0, 0, 0, 0, 1]));
        f.set_src(MacAddr::ZERO);
        f.set_ethertype(EtherType::Unknown(0x88cc));
        f.payload_mut()[0] = 9;
        assert_eq!(f.dst(), MacAddr([2, 0, 0, 0, 0, 1]));
        assert!(f.src().is_zero());
        assert_eq!(f.ethertype(), EtherType::Unknown(0x88cc));
        assert_eq!(buf[14], 9);
    }

    #[test]
    fn truncated() {
        assert_eq!(Frame::new_checked(&GOLDEN[..13]), Err(Error::Truncated));
        assert!(Frame::new_checked(&GOLDEN[..14])
            .unwrap()
            .payload()
            .is_empty());
    }

    #[test]
    fn ethertype_round_trip() {
        for v in [
            0x0800, 0x0806, 0x8100, 0x88a8, 0x86dd, 0x8847, 0x0000, 0x88cc, 0xffff,
        ] {
            assert_eq!(u16::from(EtherType::from(v)), v);
        }
        assert_eq!(EtherType::from(0x86dd), EtherType::Ipv6);
        assert_eq!(EtherType::from(0x8847), EtherType::Mpls);
        assert_eq!(EtherType::from(0x88a8), EtherType::QinQ);
        assert_eq!(EtherType::from(0x1234), EtherType::Unknown(0x1234));
    }

    #[test]
    fn mac_display_and_parse() {
        let m = MacAddr([0xaa, 0xbb, 0xcc, 0x0d, 0xee, 0xff]);
        assert_eq!(m.to_string(), "aa:bb:cc:0d:ee:ff");
        assert_eq!("aa:bb:cc:0d:ee:ff".parse::<MacAddr>(), Ok(m));
        assert_eq!("AA-BB-CC-0D-EE-FF".parse::<MacAddr>(), Ok(m));
        for bad in [
            "",
            "aa:bb:cc:dd:ee",
            "aa:bb:cc:dd:ee:ff:00",
            "aa:bb-cc:dd:ee:ff",
            "aa:bb:cc:dd:ee:fg",
            "aabb.ccdd.eeff...",
            "a:bb:cc:dd:ee:fff",
            "aa:bb:cc:dd:ee:f",
            "aa bb cc dd ee ff",
            "é:bb:cc:dd:ee:ff",
        ] {
            assert_eq!(bad.parse::<MacAddr>(), Err(Error::Malformed), "{bad:?}");
        }
    }

    #[test]
    fn mac_classes() {
        assert!(MacAddr::BROADCAST.is_broadcast());
        assert!(MacAddr::BROADCAST.is_multicast());
        assert!(!MacAddr::BROADCAST.is_unicast());
        let mcast = MacAddr([0x01, 0x00, 0x5e, 0x00, 0x00, 0x05]);
        assert!(mcast.is_multicast() && !mcast.is_broadcast() && !mcast.is_unicast());
        let ucast = MacAddr([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        assert!(ucast.is_unicast() && !ucast.is_multicast() && ucast.is_local());
        assert!(MacAddr::ZERO.is_unicast() && MacAddr::ZERO.is_zero());
        assert_eq!(<[u8; 6]>::from(ucast), ucast.octets());
    }
}
