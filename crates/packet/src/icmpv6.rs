//! ICMP for IPv6 (RFC 4443), and the messages a router originates.

use crate::checksum;
use crate::ipv6;
use crate::{be16, be32, put16, put32, Error, Result};

pub const HEADER_LEN: usize = 8;

/// The next-header value of ICMPv6, for the pseudo-header.
pub const PROTO: u8 = 58;

// Message types. Errors are below 128, informational messages from 128 up.
pub const DST_UNREACHABLE: u8 = 1;
pub const PACKET_TOO_BIG: u8 = 2;
pub const TIME_EXCEEDED: u8 = 3;
pub const PARAM_PROBLEM: u8 = 4;
pub const ECHO_REQUEST: u8 = 128;
pub const ECHO_REPLY: u8 = 129;
pub const ROUTER_SOLICIT: u8 = 133;
pub const ROUTER_ADVERT: u8 = 134;
pub const NEIGHBOR_SOLICIT: u8 = 135;
pub const NEIGHBOR_ADVERT: u8 = 136;
pub const REDIRECT: u8 = 137;

// Codes of DST_UNREACHABLE.
pub const NO_ROUTE: u8 = 0;
pub const ADMIN_PROHIBITED: u8 = 1;
pub const BEYOND_SCOPE: u8 = 2;
pub const ADDR_UNREACHABLE: u8 = 3;
pub const PORT_UNREACHABLE: u8 = 4;
pub const SRC_POLICY_FAILED: u8 = 5;
pub const REJECT_ROUTE: u8 = 6;

// Codes of TIME_EXCEEDED.
pub const HOP_LIMIT_EXCEEDED: u8 = 0;
pub const REASSEMBLY_EXCEEDED: u8 = 1;

// Codes of PARAM_PROBLEM; `rest` is the pointer to the offending octet.
pub const ERRONEOUS_HEADER: u8 = 0;
pub const UNRECOGNIZED_NEXT_HEADER: u8 = 1;
pub const UNRECOGNIZED_OPTION: u8 = 2;

/// IPv6 minimum MTU: RFC 4443 2.4(c) quotes as much as fits in it.
pub const MIN_MTU: usize = 1280;

/// Whether a message type is an error (RFC 4443 2.1). Never answer an error with an error.
pub fn is_error(msg_type: u8) -> bool {
    msg_type < 128
}

mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const REST: Range<usize> = 4..8;
}

/// A view of an ICMPv6 message: the whole upper-layer payload, since the checksum covers it all.
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

    /// The second word of the header: MTU for Packet Too Big, pointer for Parameter Problem,
    /// identifier and sequence for echoes, unused (zero) otherwise.
    pub fn rest(&self) -> u32 {
        be32(self.buffer.as_ref(), field::REST.start)
    }

    pub fn echo_ident(&self) -> u16 {
        (self.rest() >> 16) as u16
    }

    pub fn echo_seq(&self) -> u16 {
        self.rest() as u16
    }

    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// Whether the checksum is right for a message from `src` to `dst`.
    pub fn verify_checksum(&self, src: &[u8; 16], dst: &[u8; 16]) -> bool {
        message_checksum(self.buffer.as_ref(), src, dst) == 0
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

    /// Computes the checksum for a message from `src` to `dst`.
    pub fn fill_checksum(&mut self, src: &[u8; 16], dst: &[u8; 16]) {
        self.set_checksum(0);
        let c = message_checksum(self.buffer.as_ref(), src, dst);
        self.set_checksum(c);
    }
}

fn message_checksum(msg: &[u8], src: &[u8; 16], dst: &[u8; 16]) -> u16 {
    let pseudo = checksum::pseudo_v6(src, dst, PROTO, msg.len() as u32);
    checksum::fold(checksum::combine(pseudo, checksum::sum(msg)))
}

/// Writes an ICMPv6 error message from `src` to `dst` into `out`, quoting the offending packet,
/// and returns the message length.
///
/// RFC 4443 2.4(c): quote as much of the offending packet as fits without the error exceeding the
/// minimum MTU, so the quote is limited to 1280 - 40 (outer IPv6 header) - 8 bytes, and to `out`.
/// When `offending` parses as an IPv6 packet, bytes past its payload length (link padding) are not
/// quoted. The checksum covers the pseudo-header of `src` and `dst`, which must therefore be the
/// addresses the error will be sent with. Returns 0 if `out` cannot hold even the ICMP header.
pub fn build_error(
    out: &mut [u8],
    msg_type: u8,
    code: u8,
    rest: u32,
    offending: &[u8],
    src: &[u8; 16],
    dst: &[u8; 16],
) -> usize {
    if out.len() < HEADER_LEN {
        return 0;
    }
    let quote = match ipv6::Packet::new_checked(offending) {
        Ok(ip) => &offending[..ipv6::HEADER_LEN + usize::from(ip.payload_len())],
        Err(_) => offending,
    };
    let room = (MIN_MTU - ipv6::HEADER_LEN - HEADER_LEN).min(out.len() - HEADER_LEN);
    let n = quote.len().min(room);
    let len = HEADER_LEN + n;
    let mut p = Packet::new_unchecked(&mut out[..len]);
    p.set_msg_type(msg_type);
    p.set_code(code);
    p.set_rest(rest);
    p.data_mut().copy_from_slice(&quote[..n]);
    p.fill_checksum(src, dst);
    len
}

/// Turns an echo request into an echo reply in place. `src` and `dst` are the reply's addresses:
/// the request is taken to have come from `dst` to `src`, and its checksum is checked that way.
/// The reply's checksum is recomputed with the reply's pseudo-header. Returns false, leaving
/// `icmp` untouched, if it is not an echo request with a correct checksum.
pub fn echo_reply_in_place(icmp: &mut [u8], src: &[u8; 16], dst: &[u8; 16]) -> bool {
    let Ok(mut p) = Packet::new_checked(icmp) else {
        return false;
    };
    if p.msg_type() != ECHO_REQUEST || !p.verify_checksum(dst, src) {
        return false;
    }
    p.set_msg_type(ECHO_REPLY);
    p.fill_checksum(src, dst);
    true
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ipv6::tests::{DST, GOLDEN as UDP6, SRC};

    /// Echo request 2001:db8::1 -> 2001:db8::2, identifier 0x4321, sequence 7, data "v6".
    pub(crate) const ECHO: [u8; 10] = [0x80, 0x00, 0x6a, 0xe7, 0x43, 0x21, 0x00, 0x07, 0x76, 0x36];
    /// Its reply 2001:db8::2 -> 2001:db8::1.
    const REPLY: [u8; 10] = [0x81, 0x00, 0x69, 0xe7, 0x43, 0x21, 0x00, 0x07, 0x76, 0x36];
    pub(crate) const ROUTER: [u8; 16] = [
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff,
    ];

    #[test]
    fn parse_golden_echo() {
        let p = Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(p.msg_type(), ECHO_REQUEST);
        assert_eq!(p.code(), 0);
        assert_eq!(p.checksum(), 0x6ae7);
        assert_eq!(p.rest(), 0x4321_0007);
        assert_eq!(p.echo_ident(), 0x4321);
        assert_eq!(p.echo_seq(), 7);
        assert_eq!(p.data(), b"v6");
        assert!(p.verify_checksum(&SRC, &DST));
        assert!(!p.verify_checksum(&SRC, &ROUTER));
        assert!(!is_error(p.msg_type()));
    }

    #[test]
    fn build_golden_echo() {
        let mut buf = [0u8; 10];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_msg_type(ECHO_REQUEST);
        p.set_code(0);
        p.set_rest(0x4321_0007);
        p.data_mut().copy_from_slice(b"v6");
        p.fill_checksum(&SRC, &DST);
        assert_eq!(buf, ECHO);
    }

    #[test]
    fn echo_reply_golden() {
        let mut b = ECHO;
        assert!(echo_reply_in_place(&mut b, &DST, &SRC));
        assert_eq!(b, REPLY);
        assert!(Packet::new_unchecked(&b).verify_checksum(&DST, &SRC));
        assert!(
            !echo_reply_in_place(&mut b, &SRC, &DST),
            "a reply is not a request"
        );
        let mut wrong_addr = ECHO;
        assert!(!echo_reply_in_place(&mut wrong_addr, &ROUTER, &SRC));
        assert_eq!(wrong_addr, ECHO);
        assert!(!echo_reply_in_place(&mut [128, 0, 0, 0], &DST, &SRC));
    }

    #[test]
    fn build_error_golden_packet_too_big() {
        let mut out = [0u8; 100];
        let n = build_error(&mut out, PACKET_TOO_BIG, 0, 1280, &UDP6, &ROUTER, &SRC);
        // The golden packet's trailing padding byte is left out.
        assert_eq!(n, 8 + 51);
        assert_eq!(out[..8], [0x02, 0x00, 0xfc, 0x22, 0x00, 0x00, 0x05, 0x00]);
        assert_eq!(out[8..n], UDP6[..51]);
        let p = Packet::new_checked(&out[..n]).unwrap();
        assert!(p.verify_checksum(&ROUTER, &SRC));
        assert!(is_error(p.msg_type()));
        assert_eq!(p.rest(), 1280);
    }

    #[test]
    fn build_error_limits_quote_to_min_mtu() {
        let mut big = vec![0u8; 1500];
        crate::ipv6::Repr {
            src: SRC,
            dst: DST,
            next_header: 17,
            hop_limit: 1,
            payload_len: 1460,
            traffic_class: 0,
            flow_label: 0,
        }
        .emit(&mut big)
        .unwrap();
        let mut out = vec![0u8; 2000];
        let n = build_error(
            &mut out,
            TIME_EXCEEDED,
            HOP_LIMIT_EXCEEDED,
            0,
            &big,
            &ROUTER,
            &SRC,
        );
        assert_eq!(ipv6::HEADER_LEN + n, MIN_MTU);
        assert_eq!(&out[8..n], &big[..1232]);
        assert!(Packet::new_checked(&out[..n])
            .unwrap()
            .verify_checksum(&ROUTER, &SRC));

        let n = build_error(
            &mut out[..50],
            DST_UNREACHABLE,
            NO_ROUTE,
            0,
            &big,
            &ROUTER,
            &SRC,
        );
        assert_eq!(n, 50);
        assert!(Packet::new_checked(&out[..50])
            .unwrap()
            .verify_checksum(&ROUTER, &SRC));
        assert_eq!(build_error(&mut out[..7], 1, 0, 0, &big, &ROUTER, &SRC), 0);
    }

    #[test]
    fn new_checked_rejects_short() {
        assert_eq!(Packet::new_checked(&ECHO[..7]), Err(Error::Truncated));
        assert_eq!(Packet::new_checked(&ECHO[..8]).unwrap().data(), b"");
    }
}
