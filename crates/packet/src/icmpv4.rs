//! ICMP for IPv4 (RFC 792), and the messages a router originates (RFC 1812 section 4.3).

use crate::checksum;
use crate::ipv4;
use crate::{be16, be32, put16, put32, Error, Result};

pub const HEADER_LEN: usize = 8;

// Message types.
pub const ECHO_REPLY: u8 = 0;
pub const DEST_UNREACHABLE: u8 = 3;
pub const SOURCE_QUENCH: u8 = 4;
pub const REDIRECT: u8 = 5;
pub const ECHO_REQUEST: u8 = 8;
pub const TIME_EXCEEDED: u8 = 11;
pub const PARAM_PROBLEM: u8 = 12;
pub const TIMESTAMP: u8 = 13;
pub const TIMESTAMP_REPLY: u8 = 14;

// Codes of DEST_UNREACHABLE (RFC 792, RFC 1812 section 5.2.7.1).
pub const NET_UNREACHABLE: u8 = 0;
pub const HOST_UNREACHABLE: u8 = 1;
pub const PROTO_UNREACHABLE: u8 = 2;
pub const PORT_UNREACHABLE: u8 = 3;
/// Fragmentation needed and DF set; the next-hop MTU goes in the low 16 bits of `rest`
/// (RFC 1191).
pub const FRAG_NEEDED: u8 = 4;
pub const SOURCE_ROUTE_FAILED: u8 = 5;
pub const NET_UNKNOWN: u8 = 6;
pub const HOST_UNKNOWN: u8 = 7;
pub const NET_PROHIBITED: u8 = 9;
pub const HOST_PROHIBITED: u8 = 10;
pub const ADMIN_PROHIBITED: u8 = 13;

// Codes of TIME_EXCEEDED.
pub const TTL_EXCEEDED: u8 = 0;
pub const REASSEMBLY_EXCEEDED: u8 = 1;

/// RFC 1812 4.3.2.3: an ICMP error, IP header included, should not exceed 576 bytes.
pub const MAX_ERROR_DATAGRAM: usize = 576;

/// Whether a message type is an error. RFC 1812 4.3.2.7: never answer an error with an error.
pub fn is_error(msg_type: u8) -> bool {
    matches!(
        msg_type,
        DEST_UNREACHABLE | SOURCE_QUENCH | REDIRECT | TIME_EXCEEDED | PARAM_PROBLEM
    )
}

mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const REST: Range<usize> = 4..8;
}

/// A view of an ICMPv4 message: the whole IP payload, since the checksum covers all of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        if buffer.as_ref().len() < HEADER_LEN {
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

    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The second word of the header, whose meaning depends on the type.
    pub fn rest(&self) -> u32 {
        be32(self.buffer.as_ref(), field::REST.start)
    }

    /// Identifier of an echo request or reply.
    pub fn echo_ident(&self) -> u16 {
        (self.rest() >> 16) as u16
    }

    /// Sequence number of an echo request or reply.
    pub fn echo_seq(&self) -> u16 {
        self.rest() as u16
    }

    /// Next-hop MTU of a "fragmentation needed" message (RFC 1191).
    pub fn next_hop_mtu(&self) -> u16 {
        self.rest() as u16
    }

    /// For errors, the quoted datagram; for echoes, the echoed data.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    pub fn verify_checksum(&self) -> bool {
        checksum::fold(checksum::sum(self.buffer.as_ref())) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_msg_type(&mut self, t: u8) {
        self.buffer.as_mut()[field::TYPE] = t;
    }

    pub fn set_code(&mut self, c: u8) {
        self.buffer.as_mut()[field::CODE] = c;
    }

    pub fn set_checksum(&mut self, c: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    pub fn set_rest(&mut self, rest: u32) {
        put32(self.buffer.as_mut(), field::REST.start, rest);
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }

    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::fold(checksum::sum(self.buffer.as_ref()));
        self.set_checksum(c);
    }
}

/// Writes an ICMP error message (type, code, `rest` word, checksum) into `out`, quoting the
/// offending IP datagram, and returns the message length.
///
/// RFC 792 asks for the IP header and 8 bytes of payload; RFC 1812 4.3.2.3 asks routers to quote
/// as much as fits in a 576-byte datagram. The quote is therefore limited so that a 20-byte outer
/// IP header plus this message stay within 576 bytes, and to `out`. When `offending` parses as an
/// IPv4 packet, bytes past its total length (link padding) are not quoted. Returns 0 if `out`
/// cannot hold even the ICMP header.
pub fn build_error(
    out: &mut [u8],
    msg_type: u8,
    code: u8,
    rest: u32,
    offending_ip_packet: &[u8],
) -> usize {
    if out.len() < HEADER_LEN {
        return 0;
    }
    let quote = match ipv4::Packet::new_checked(offending_ip_packet) {
        Ok(ip) => &offending_ip_packet[..usize::from(ip.total_len())],
        Err(_) => offending_ip_packet,
    };
    let room = (MAX_ERROR_DATAGRAM - ipv4::HEADER_LEN - HEADER_LEN).min(out.len() - HEADER_LEN);
    let n = quote.len().min(room);
    let len = HEADER_LEN + n;
    let mut p = Packet::new_unchecked(&mut out[..len]);
    p.set_msg_type(msg_type);
    p.set_code(code);
    p.set_rest(rest);
    p.data_mut().copy_from_slice(&quote[..n]);
    p.fill_checksum();
    len
}

/// Turns an echo request into an echo reply in place: the type becomes 0 and the checksum is
/// patched incrementally, everything else (identifier, sequence, data) is echoed as it is.
/// Returns false, leaving `icmp` untouched, if it is not an echo request with a correct checksum.
pub fn echo_reply_in_place(icmp: &mut [u8]) -> bool {
    let Ok(mut p) = Packet::new_checked(icmp) else {
        return false;
    };
    if p.msg_type() != ECHO_REQUEST || !p.verify_checksum() {
        return false;
    }
    let code = p.code();
    let old = u16::from_be_bytes([ECHO_REQUEST, code]);
    let new = u16::from_be_bytes([ECHO_REPLY, code]);
    let c = checksum::update16(p.checksum(), old, new);
    p.set_msg_type(ECHO_REPLY);
    if c == 0 {
        // Eqn. 3 says 0x0000 where recomputation says 0xFFFF if the reply is all zeros
        // (identifier 0, sequence 0, no data); only recomputation can tell, and it is rare.
        p.fill_checksum();
    } else {
        p.set_checksum(c);
    }
    true
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Echo request, identifier 0x1234, sequence 1, data "pingdata".
    pub(crate) const ECHO: [u8; 16] = [
        0x08, 0x00, 0x2e, 0x37, 0x12, 0x34, 0x00, 0x01, 0x70, 0x69, 0x6e, 0x67, 0x64, 0x61, 0x74,
        0x61,
    ];
    const REPLY: [u8; 16] = [
        0x00, 0x00, 0x36, 0x37, 0x12, 0x34, 0x00, 0x01, 0x70, 0x69, 0x6e, 0x67, 0x64, 0x61, 0x74,
        0x61,
    ];
    /// The UDP-over-IPv4 golden packet (33 bytes), as an offending datagram.
    pub(crate) const UDP4: [u8; 33] = [
        0x45, 0x00, 0x00, 0x21, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, 0x32, 0x4f, 0xc0, 0x00, 0x02,
        0x01, 0xc6, 0x33, 0x64, 0x02, 0x04, 0xd2, 0x00, 0x35, 0x00, 0x0d, 0xca, 0xc3, 0x68, 0x65,
        0x6c, 0x6c, 0x6f,
    ];

    #[test]
    fn parse_golden_echo() {
        let p = Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(p.msg_type(), ECHO_REQUEST);
        assert_eq!(p.code(), 0);
        assert_eq!(p.checksum(), 0x2e37);
        assert_eq!(p.rest(), 0x1234_0001);
        assert_eq!(p.echo_ident(), 0x1234);
        assert_eq!(p.echo_seq(), 1);
        assert_eq!(p.data(), b"pingdata");
        assert!(p.verify_checksum());
        assert!(!is_error(p.msg_type()));
    }

    #[test]
    fn build_golden_echo() {
        let mut buf = [0u8; 16];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_msg_type(ECHO_REQUEST);
        p.set_code(0);
        p.set_rest(0x1234_0001);
        p.data_mut().copy_from_slice(b"pingdata");
        p.fill_checksum();
        assert_eq!(buf, ECHO);
    }

    #[test]
    fn echo_reply_golden() {
        let mut b = ECHO;
        assert!(echo_reply_in_place(&mut b));
        assert_eq!(b, REPLY);
        assert!(!echo_reply_in_place(&mut b), "a reply is not a request");
        assert_eq!(b, REPLY);
        let mut bad = ECHO;
        bad[9] ^= 0x40;
        assert!(!echo_reply_in_place(&mut bad), "bad checksum");
        assert!(
            !echo_reply_in_place(&mut [8, 0, 0xf7, 0xff, 0, 0, 0]),
            "short"
        );
    }

    #[test]
    fn echo_reply_all_zero_corner() {
        let mut b = [8, 0, 0xf7, 0xff, 0, 0, 0, 0];
        assert!(echo_reply_in_place(&mut b));
        assert_eq!(b, [0, 0, 0xff, 0xff, 0, 0, 0, 0]);
        assert!(Packet::new_checked(&b[..]).unwrap().verify_checksum());
    }

    #[test]
    fn echo_reply_random_matches_recomputation() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for len in 8..200 {
            let mut b: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            b[0] = ECHO_REQUEST;
            Packet::new_unchecked(&mut b[..]).fill_checksum();
            assert!(echo_reply_in_place(&mut b));
            let mut expect = b.clone();
            Packet::new_unchecked(&mut expect[..]).fill_checksum();
            assert_eq!(b, expect);
        }
    }

    #[test]
    fn build_error_golden_time_exceeded() {
        let mut out = [0u8; 128];
        let mut offending = UDP4.to_vec();
        offending.extend_from_slice(&[0; 13]); // Ethernet padding to 46 bytes: not quoted
        let n = build_error(&mut out, TIME_EXCEEDED, TTL_EXCEEDED, 0, &offending);
        assert_eq!(n, 8 + 33);
        assert_eq!(out[..8], [0x0b, 0x00, 0xe1, 0x55, 0x00, 0x00, 0x00, 0x00]);
        assert_eq!(out[8..n], UDP4);
        let p = Packet::new_checked(&out[..n]).unwrap();
        assert!(p.verify_checksum());
        assert!(is_error(p.msg_type()));
    }

    #[test]
    fn build_error_limits_quote_to_576() {
        let mut big = vec![0u8; 1500];
        crate::ipv4::Repr {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            protocol: crate::ipv4::Protocol::Tcp,
            ttl: 1,
            payload_len: 1480,
            dscp: 0,
            dont_frag: true,
            ident: 7,
        }
        .emit(&mut big)
        .unwrap();
        let mut out = [0u8; 2000];
        let rest = u32::from(1400u16);
        let n = build_error(&mut out, DEST_UNREACHABLE, FRAG_NEEDED, rest, &big);
        assert_eq!(ipv4::HEADER_LEN + n, MAX_ERROR_DATAGRAM);
        let p = Packet::new_checked(&out[..n]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.next_hop_mtu(), 1400);
        assert_eq!(p.data(), &big[..548]);

        // A small output buffer limits the quote further; a tiny one gets nothing.
        let n = build_error(&mut out[..30], DEST_UNREACHABLE, HOST_UNREACHABLE, 0, &big);
        assert_eq!(n, 30);
        assert!(Packet::new_checked(&out[..30]).unwrap().verify_checksum());
        assert_eq!(build_error(&mut out[..7], 3, 1, 0, &big), 0);

        // Something that is not IPv4 is quoted as given.
        let n = build_error(&mut out, DEST_UNREACHABLE, 0, 0, &[1, 2, 3]);
        assert_eq!(n, 11);
        assert!(Packet::new_checked(&out[..n]).unwrap().verify_checksum());
    }

    #[test]
    fn new_checked_rejects_short() {
        assert_eq!(Packet::new_checked(&ECHO[..7]), Err(Error::Truncated));
        assert!(Packet::new_checked(&ECHO[..8]).unwrap().data().is_empty());
    }
}
