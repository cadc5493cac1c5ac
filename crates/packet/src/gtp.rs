//! GTPv1 (3GPP TS 29.060, and TS 29.281 for the user plane): the header shared by GTP-C
//! (UDP 2123) and GTP-U (UDP 2152), the information elements of GTP-C messages, and the
//! decoders a GGSN needs for the IEs it reads and writes.
//!
//! [`parse_header`] is cheap enough for the GTP-U fast path: it reads the 8 fixed bytes, the 4
//! optional ones when a flag asks for them, and walks the extension headers, allocating nothing.
//! Everything else (the IE walk, the builders, the TBCD and APN codecs) is for the control plane,
//! which sees a few messages per session.
//!
//! IEs come in two shapes (7.7.0): TV, for types below 128, whose value length is fixed by the
//! type alone ([`tv_len`]), and TLV, for types from 128, with a 2-byte length, except the
//! Extension Header Type List (141) whose length is 1 byte. An IE of a TV type this module does
//! not know cannot be stepped over, so it ends the walk; an unknown TLV type can be.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::{be16, be32, put16, put32, Error, Result};

pub const GTPC_PORT: u16 = 2123;
pub const GTPU_PORT: u16 = 2152;

/// The fixed part of every GTPv1 header: flags, type, length, TEID.
pub const HEADER_LEN: usize = 8;
/// The fixed part plus the sequence number, N-PDU number and next extension header type, present
/// as a whole when any of the E, S and PN flags is set.
pub const LONG_HEADER_LEN: usize = 12;

/// At most this many extension headers are accepted in one header. TS 29.281 defines few enough
/// that a real packet carries one or two; a longer chain is an attack on the walk.
pub const MAX_EXT_HEADERS: usize = 4;

const VERSION_1: u8 = 1;
const FLAG_PT: u8 = 0x10;
const FLAG_E: u8 = 0x04;
const FLAG_S: u8 = 0x02;
const FLAG_PN: u8 = 0x01;

/// Message types (TS 29.060 7.1; END_MARKER from TS 29.281 7.1).
pub mod msg {
    pub const ECHO_REQUEST: u8 = 1;
    pub const ECHO_RESPONSE: u8 = 2;
    pub const VERSION_NOT_SUPPORTED: u8 = 3;
    pub const CREATE_PDP_REQUEST: u8 = 16;
    pub const CREATE_PDP_RESPONSE: u8 = 17;
    pub const UPDATE_PDP_REQUEST: u8 = 18;
    pub const UPDATE_PDP_RESPONSE: u8 = 19;
    pub const DELETE_PDP_REQUEST: u8 = 20;
    pub const DELETE_PDP_RESPONSE: u8 = 21;
    pub const ERROR_INDICATION: u8 = 26;
    pub const SUPPORTED_EXT_HEADERS_NOTIFICATION: u8 = 31;
    pub const END_MARKER: u8 = 254;
    pub const G_PDU: u8 = 255;
}

/// Information element types (TS 29.060 7.7, table 37). Below 128 the TV types, all of them
/// (see [`tv_len`]); from 128 the TLV types a GGSN meets.
pub mod ie {
    pub const CAUSE: u8 = 1;
    pub const IMSI: u8 = 2;
    pub const RAI: u8 = 3;
    pub const TLLI: u8 = 4;
    pub const PTMSI: u8 = 5;
    pub const REORDERING_REQUIRED: u8 = 8;
    pub const AUTH_TRIPLET: u8 = 9;
    pub const MAP_CAUSE: u8 = 11;
    pub const PTMSI_SIGNATURE: u8 = 12;
    pub const MS_VALIDATED: u8 = 13;
    pub const RECOVERY: u8 = 14;
    pub const SELECTION_MODE: u8 = 15;
    pub const TEID_DATA_I: u8 = 16;
    pub const TEID_C: u8 = 17;
    pub const TEID_DATA_II: u8 = 18;
    pub const TEARDOWN_IND: u8 = 19;
    pub const NSAPI: u8 = 20;
    pub const RANAP_CAUSE: u8 = 21;
    pub const RAB_CONTEXT: u8 = 22;
    pub const RADIO_PRIORITY_SMS: u8 = 23;
    pub const RADIO_PRIORITY: u8 = 24;
    pub const PACKET_FLOW_ID: u8 = 25;
    pub const CHARGING_CHARACTERISTICS: u8 = 26;
    pub const TRACE_REFERENCE: u8 = 27;
    pub const TRACE_TYPE: u8 = 28;
    pub const MS_NOT_REACHABLE_REASON: u8 = 29;
    pub const CHARGING_ID: u8 = 127;
    pub const END_USER_ADDRESS: u8 = 128;
    pub const MM_CONTEXT: u8 = 129;
    pub const PDP_CONTEXT: u8 = 130;
    pub const APN: u8 = 131;
    pub const PCO: u8 = 132;
    pub const GSN_ADDRESS: u8 = 133;
    pub const MSISDN: u8 = 134;
    pub const QOS_PROFILE: u8 = 135;
    pub const AUTH_QUINTUPLET: u8 = 136;
    pub const TFT: u8 = 137;
    pub const EXT_HEADER_TYPE_LIST: u8 = 141;
    pub const COMMON_FLAGS: u8 = 148;
    pub const APN_RESTRICTION: u8 = 149;
    pub const RAT_TYPE: u8 = 151;
    pub const USER_LOCATION_INFO: u8 = 152;
    pub const MS_TIMEZONE: u8 = 153;
    pub const IMEI_SV: u8 = 154;
    pub const BEARER_CONTROL_MODE: u8 = 184;
    pub const EVOLVED_ARP_I: u8 = 191;
    pub const APN_AMBR: u8 = 198;
    pub const CHARGING_GATEWAY_ADDRESS: u8 = 251;
    pub const PRIVATE_EXTENSION: u8 = 255;
}

/// Cause values (TS 29.060 7.7.1). From 128 the request was accepted, from 192 rejected.
pub mod cause {
    pub const REQUEST_ACCEPTED: u8 = 128;
    pub const NON_EXISTENT: u8 = 192;
    pub const INVALID_MESSAGE_FORMAT: u8 = 193;
    pub const IMSI_NOT_KNOWN: u8 = 194;
    pub const MS_DETACHED: u8 = 195;
    pub const NO_RESOURCES: u8 = 199;
    pub const SERVICE_NOT_SUPPORTED: u8 = 200;
    pub const MANDATORY_IE_INCORRECT: u8 = 201;
    pub const MANDATORY_IE_MISSING: u8 = 202;
    pub const OPTIONAL_IE_INCORRECT: u8 = 203;
    pub const SYSTEM_FAILURE: u8 = 204;
    pub const ROAMING_RESTRICTION: u8 = 205;
    pub const PTMSI_SIG_MISMATCH: u8 = 206;
    pub const GPRS_CONN_SUSPENDED: u8 = 207;
    pub const AUTH_FAILURE: u8 = 208;
    pub const USER_AUTH_FAILED: u8 = 209;
    pub const CONTEXT_NOT_FOUND: u8 = 210;
    pub const ALL_DYNAMIC_ADDRESSES_OCCUPIED: u8 = 211;
    pub const NO_MEMORY: u8 = 212;
    pub const RELOCATION_FAILURE: u8 = 213;
    pub const UNKNOWN_MANDATORY_EXTENSION_HEADER: u8 = 214;
    pub const SEMANTIC_ERROR_TFT: u8 = 215;
    pub const SYNTACTIC_ERROR_TFT: u8 = 216;
    pub const SEMANTIC_ERRORS_PACKET_FILTER: u8 = 217;
    pub const SYNTACTIC_ERRORS_PACKET_FILTER: u8 = 218;
    pub const MISSING_OR_UNKNOWN_APN: u8 = 219;
    pub const UNKNOWN_PDP_ADDRESS_OR_TYPE: u8 = 220;
}

/// Extension header types (TS 29.281 5.2.1). The two high bits say who must understand one:
/// 00 and 01 nobody, 10 the endpoint receiver, 11 every node on the path (see
/// [`ext_hdr::comprehension_required`]).
pub mod ext_hdr {
    pub const NO_MORE: u8 = 0x00;
    pub const UDP_PORT: u8 = 0x40;
    pub const RAN_CONTAINER: u8 = 0x81;
    pub const LONG_PDCP_PDU_NUMBER: u8 = 0x82;
    pub const NR_RAN_CONTAINER: u8 = 0x84;
    pub const PDU_SESSION_CONTAINER: u8 = 0x85;
    pub const PDCP_PDU_NUMBER: u8 = 0xC0;

    /// Whether an endpoint that does not know extension header type `ty` must drop the packet
    /// (and answer with a Supported Extension Headers Notification).
    pub const fn comprehension_required(ty: u8) -> bool {
        ty & 0x80 != 0
    }
}

/// The extension header types of one header, in the order met. A fixed array, so that the
/// header stays `Copy` and parsing allocates nothing; it reads as a `[u8]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ExtList {
    types: [u8; MAX_EXT_HEADERS],
    len: u8,
}

impl ExtList {
    pub fn as_slice(&self) -> &[u8] {
        &self.types[..usize::from(self.len)]
    }

    /// Appends `ty`; false (and nothing kept) if the list is full.
    fn push(&mut self, ty: u8) -> bool {
        let n = usize::from(self.len);
        if n == MAX_EXT_HEADERS {
            return false;
        }
        self.types[n] = ty;
        self.len += 1;
        true
    }
}

impl core::ops::Deref for ExtList {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

/// A GTPv1 header, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub msg_type: u8,
    /// The length field: every byte after the 8 fixed ones (optional fields, extension headers
    /// and payload).
    pub length: u16,
    pub teid: u32,
    /// The sequence number, when the S flag says it is meaningful.
    pub seq: Option<u16>,
    /// The N-PDU number, when the PN flag says it is meaningful.
    pub npdu: Option<u8>,
    /// The extension header types met, in order (at most [`MAX_EXT_HEADERS`]).
    pub ext: ExtList,
    /// The 8 fixed bytes, the 4 optional ones (present when any of E, S and PN is set) and every
    /// extension header: where the payload starts.
    pub header_len: usize,
}

impl Header {
    /// The payload: the IEs of a signalling message, the T-PDU of a G-PDU. `b` is the buffer
    /// this header was parsed from (the slicing panics on a shorter one).
    pub fn payload<'a>(&self, b: &'a [u8]) -> &'a [u8] {
        &b[self.header_len..self.end()]
    }

    /// Where the message ends in its buffer, by the length field; bytes past it are not part of
    /// the message.
    pub fn end(&self) -> usize {
        HEADER_LEN + usize::from(self.length)
    }
}

/// The version in the first byte, whatever the rest holds: a GTP node answers a message of a
/// version it does not speak with Version Not Supported (TS 29.060 11.1.1), so it needs the
/// version of headers [`parse_header`] rejects. None for an empty buffer.
pub fn version_of(b: &[u8]) -> Option<u8> {
    b.first().map(|f| f >> 5)
}

/// Parses a GTPv1 header (TS 29.060 6, TS 29.281 5) at the start of `b`, a UDP payload.
///
/// Reads the flags (version 1 and protocol type 1, GTP rather than GTP', or the message is
/// `Malformed`), the message type, the length (all of the message must be in `b`, or it is
/// `Truncated`; bytes after it are ignored) and the TEID. When any of E, S and PN is set, the
/// next 4 bytes are there as a whole and the length must cover them; the sequence number and
/// N-PDU number are reported only when their own flag is set, since a sender may leave garbage
/// in a field its flag disowns. With E set, the extension headers are walked: each is a length
/// in 4-byte units (0 is `Malformed`: the walk could not advance), its content, and the type of
/// the next one, 0 ending the chain. A chain that runs past the message, or holds more than
/// [`MAX_EXT_HEADERS`] headers, is `Malformed`.
#[inline]
pub fn parse_header(b: &[u8]) -> Result<Header> {
    if b.len() < HEADER_LEN {
        return Err(Error::Truncated);
    }
    let flags = b[0];
    if flags >> 5 != VERSION_1 || flags & FLAG_PT == 0 {
        return Err(Error::Malformed);
    }
    let length = be16(b, 2);
    let end = HEADER_LEN + usize::from(length);
    if b.len() < end {
        return Err(Error::Truncated);
    }
    let mut h = Header {
        msg_type: b[1],
        length,
        teid: be32(b, 4),
        seq: None,
        npdu: None,
        ext: ExtList::default(),
        header_len: HEADER_LEN,
    };
    if flags & (FLAG_E | FLAG_S | FLAG_PN) == 0 {
        return Ok(h);
    }
    if end < LONG_HEADER_LEN {
        return Err(Error::Malformed);
    }
    h.header_len = LONG_HEADER_LEN;
    if flags & FLAG_S != 0 {
        h.seq = Some(be16(b, 8));
    }
    if flags & FLAG_PN != 0 {
        h.npdu = Some(b[10]);
    }
    if flags & FLAG_E == 0 {
        return Ok(h);
    }
    let mut next = b[11];
    let mut at = LONG_HEADER_LEN;
    while next != ext_hdr::NO_MORE {
        if !h.ext.push(next) || at >= end {
            return Err(Error::Malformed);
        }
        let units = usize::from(b[at]);
        if units == 0 {
            return Err(Error::Malformed);
        }
        let this_end = at + 4 * units;
        if this_end > end {
            return Err(Error::Malformed);
        }
        next = b[this_end - 1];
        at = this_end;
    }
    h.header_len = at;
    Ok(h)
}

/// Writes the 8-byte header of a G-PDU (no sequence number, no extension header) carrying a
/// T-PDU of `payload_len` bytes to tunnel `teid` into `out[..8]`. The fast path's encapsulation:
/// the data plane does not number G-PDUs (TS 29.281 5.1 makes the sequence number optional). Panics if `out`
/// is shorter than 8 bytes.
#[inline]
pub fn gpdu_header(out: &mut [u8], teid: u32, payload_len: u16) {
    out[0] = VERSION_1 << 5 | FLAG_PT;
    out[1] = msg::G_PDU;
    put16(out, 2, payload_len);
    put32(out, 4, teid);
}

/// The value length of TV information element type `ty` (TS 29.060 table 37), None if `ty` is a
/// TLV type or a TV type the table does not define (0, 6, 7, 10 and 30 to 126 are reserved,
/// 117 to 126 of them for GTP' charging, which a GGSN never receives).
pub const fn tv_len(ty: u8) -> Option<usize> {
    Some(match ty {
        ie::CAUSE => 1,
        ie::IMSI => 8,
        ie::RAI => 6,
        ie::TLLI => 4,
        ie::PTMSI => 4,
        ie::REORDERING_REQUIRED => 1,
        ie::AUTH_TRIPLET => 28,
        ie::MAP_CAUSE => 1,
        ie::PTMSI_SIGNATURE => 3,
        ie::MS_VALIDATED => 1,
        ie::RECOVERY => 1,
        ie::SELECTION_MODE => 1,
        ie::TEID_DATA_I => 4,
        ie::TEID_C => 4,
        ie::TEID_DATA_II => 5,
        ie::TEARDOWN_IND => 1,
        ie::NSAPI => 1,
        ie::RANAP_CAUSE => 1,
        ie::RAB_CONTEXT => 9,
        ie::RADIO_PRIORITY_SMS => 1,
        ie::RADIO_PRIORITY => 1,
        ie::PACKET_FLOW_ID => 2,
        ie::CHARGING_CHARACTERISTICS => 2,
        ie::TRACE_REFERENCE => 2,
        ie::TRACE_TYPE => 2,
        ie::MS_NOT_REACHABLE_REASON => 1,
        ie::CHARGING_ID => 4,
        _ => return None,
    })
}

/// Whether IE type `ty` is TLV (the high bit set, 7.7.0).
const fn is_tlv(ty: u8) -> bool {
    ty & 0x80 != 0
}

/// Builds a GTPv1 signalling message: the header with the S flag set (GTP-C always carries a
/// sequence number, and so do GTP-U's Echo and Error Indication), then the IEs in the order
/// pushed. TS 29.060 7.7.0 wants them in ascending type order; the caller pushes them so, and
/// debug builds check it. [`MsgBuilder::finish`] fills in the length.
#[derive(Debug, Clone)]
pub struct MsgBuilder {
    buf: Vec<u8>,
    /// The last IE type pushed, for the order check.
    last: u8,
}

impl MsgBuilder {
    pub fn new(msg_type: u8, teid: u32, seq: u16) -> Self {
        let mut buf = Vec::with_capacity(128);
        buf.extend_from_slice(&[VERSION_1 << 5 | FLAG_PT | FLAG_S, msg_type, 0, 0]);
        buf.extend_from_slice(&teid.to_be_bytes());
        buf.extend_from_slice(&seq.to_be_bytes());
        // N-PDU number and next extension header type: present with S, unused.
        buf.extend_from_slice(&[0, 0]);
        MsgBuilder { buf, last: 0 }
    }

    fn order(&mut self, ty: u8) {
        debug_assert!(
            ty >= self.last,
            "IE {ty} pushed after IE {}: TS 29.060 wants ascending types",
            self.last
        );
        self.last = ty;
    }

    /// Appends a TV information element. In debug builds, panics if `ty` is not a TV type of
    /// table 37 or `value` is not its fixed length (a receiver would misread everything after).
    pub fn tv(&mut self, ty: u8, value: &[u8]) -> &mut Self {
        debug_assert_eq!(tv_len(ty), Some(value.len()), "TV IE {ty}");
        self.order(ty);
        self.buf.push(ty);
        self.buf.extend_from_slice(value);
        self
    }

    /// Appends a TLV information element: 2-byte length, except the Extension Header Type List
    /// whose length is 1 byte. Panics if `value` is longer than its length field can say.
    pub fn tlv(&mut self, ty: u8, value: &[u8]) -> &mut Self {
        debug_assert!(is_tlv(ty), "IE {ty} is TV");
        self.order(ty);
        self.buf.push(ty);
        if ty == ie::EXT_HEADER_TYPE_LIST {
            let len = u8::try_from(value.len()).expect("extension header type list over 255");
            self.buf.push(len);
        } else {
            let len = u16::try_from(value.len()).expect("IE value over 65535 bytes");
            self.buf.extend_from_slice(&len.to_be_bytes());
        }
        self.buf.extend_from_slice(value);
        self
    }

    /// The message, its length field filled in. Panics if the IEs came to more than the length
    /// field can say (65531 bytes).
    pub fn finish(mut self) -> Vec<u8> {
        let len = u16::try_from(self.buf.len() - HEADER_LEN).expect("GTP message over 64 KiB");
        put16(&mut self.buf, 2, len);
        self.buf
    }
}

/// One information element: its type and its value (without type and length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ie<'a> {
    pub ty: u8,
    pub value: &'a [u8],
}

/// The information elements of a signalling message's payload, in order. An error ends the
/// walk: `Truncated` if an IE runs past the payload, `Malformed` for a TV type [`tv_len`] does
/// not know (its length is unknowable, so nothing after it can be found).
#[derive(Debug, Clone)]
pub struct Ies<'a> {
    rest: &'a [u8],
}

/// Walks the IEs of `payload` (see [`Header::payload`]).
pub fn ies(payload: &[u8]) -> Ies<'_> {
    Ies { rest: payload }
}

impl<'a> Ies<'a> {
    fn step(&mut self) -> Result<Ie<'a>> {
        let b = self.rest;
        let ty = b[0];
        let (start, len) = if !is_tlv(ty) {
            (1, tv_len(ty).ok_or(Error::Malformed)?)
        } else if ty == ie::EXT_HEADER_TYPE_LIST {
            (2, usize::from(*b.get(1).ok_or(Error::Truncated)?))
        } else if b.len() < 3 {
            return Err(Error::Truncated);
        } else {
            (3, usize::from(be16(b, 1)))
        };
        let value = b.get(start..start + len).ok_or(Error::Truncated)?;
        self.rest = &b[start + len..];
        Ok(Ie { ty, value })
    }
}

impl<'a> Iterator for Ies<'a> {
    type Item = Result<Ie<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let r = self.step();
        if r.is_err() {
            self.rest = &[];
        }
        Some(r)
    }
}

/// The digits of an IMSI IE's value (TS 29.060 7.7.2, TS 24.008 10.5.1.4): 8 bytes of TBCD,
/// the low nibble of each byte first, 0xF filling the nibbles after the last digit. None unless
/// `v` is exactly that: 8 bytes, 1 to 15 decimal digits, then only fillers. Being that strict
/// keeps a decoded IMSI one-to-one with its bytes, so it can key a session.
pub fn imsi_digits(v: &[u8]) -> Option<String> {
    if v.len() != 8 {
        return None;
    }
    let mut s = String::with_capacity(15);
    let mut ended = false;
    for n in v.iter().flat_map(|b| [b & 0x0F, b >> 4]) {
        match n {
            0xF => ended = true,
            0..=9 if !ended => s.push(char::from(b'0' + n)),
            _ => return None,
        }
    }
    (1..=15).contains(&s.len()).then_some(s)
}

/// The IMSI IE value for `digits` (1 to 15 decimal digits; None otherwise).
pub fn imsi_encode(digits: &str) -> Option<[u8; 8]> {
    let d = digits.as_bytes();
    if !(1..=15).contains(&d.len()) || !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut out = [0xFF; 8];
    for (i, c) in d.iter().enumerate() {
        let n = c - b'0';
        let b = &mut out[i / 2];
        *b = if i % 2 == 0 {
            (*b & 0xF0) | n
        } else {
            (*b & 0x0F) | n << 4
        };
    }
    Some(out)
}

/// The name in an APN IE's value (TS 29.060 7.7.30, TS 23.003 9.1): DNS labels, each a length
/// byte and that many bytes, read into "a.b.c". None for an empty value, a label of length 0 or
/// over 63, a label running past the value, or a label byte that is not printable ASCII or is a
/// '.' (the name could not be encoded back to the same bytes).
pub fn apn_decode(v: &[u8]) -> Option<String> {
    if v.is_empty() {
        return None;
    }
    let mut s = String::with_capacity(v.len());
    let mut rest = v;
    while let Some((&n, tail)) = rest.split_first() {
        let n = usize::from(n);
        if !(1..=63).contains(&n) || tail.len() < n {
            return None;
        }
        let (label, tail) = tail.split_at(n);
        if !label.iter().all(|c| c.is_ascii_graphic() && *c != b'.') {
            return None;
        }
        if !s.is_empty() {
            s.push('.');
        }
        s.extend(label.iter().map(|&c| char::from(c)));
        rest = tail;
    }
    Some(s)
}

/// The APN IE value for `name` ("internet", "apn.mnc001.mcc001.gprs"): each '.'-separated label
/// behind its length byte. The labels must be 1 to 63 bytes (checked in debug builds): names
/// come from configuration, which checks them, or from [`apn_decode`], whose names all encode
/// back to the bytes they came from.
pub fn apn_encode(name: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len() + 1);
    for label in name.split('.') {
        debug_assert!((1..=63).contains(&label.len()), "APN label {label:?}");
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out
}

/// PDP type organisation IETF and its PDP type numbers (TS 29.060 7.7.27).
const PDP_ORG_IETF: u8 = 1;
const PDP_IPV4: u8 = 0x21;
const PDP_IPV6: u8 = 0x57;
const PDP_IPV4V6: u8 = 0x8D;

/// An End User Address IE (TS 29.060 7.7.27): the PDP type and the address(es) of the MS, an
/// address left out (None) when the request asks for a dynamic one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EndUserAddress {
    Ipv4(Option<Ipv4Addr>),
    Ipv6(Option<Ipv6Addr>),
    Ipv4v6(Option<Ipv4Addr>, Option<Ipv6Addr>),
    /// Another PDP type: PPP (organisation 0 ETSI, number 1), non-IP, or a number IETF does not
    /// define. The GGSN answers these with "unknown PDP address or PDP type".
    Other {
        org: u8,
        number: u8,
    },
}

/// Reads an End User Address IE's value: the PDP type organisation in the low nibble of the first
/// byte (the high nibble is spare), the PDP type number, then 0 bytes (dynamic), 4 (IPv4) or 16
/// (IPv6), or for IPv4v6 either or both, IPv4 first. None if the value is shorter than 2 bytes or
/// an IETF type's address is of another length. For other types the bytes after the number are
/// not read.
pub fn end_user_address(v: &[u8]) -> Option<EndUserAddress> {
    let (&first, rest) = v.split_first()?;
    let (&number, addr) = rest.split_first()?;
    let org = first & 0x0F;
    if org != PDP_ORG_IETF {
        return Some(EndUserAddress::Other { org, number });
    }
    let v4 = |a: &[u8]| Ipv4Addr::from(<[u8; 4]>::try_from(a).expect("4 bytes"));
    let v6 = |a: &[u8]| Ipv6Addr::from(<[u8; 16]>::try_from(a).expect("16 bytes"));
    Some(match (number, addr.len()) {
        (PDP_IPV4, 0) => EndUserAddress::Ipv4(None),
        (PDP_IPV4, 4) => EndUserAddress::Ipv4(Some(v4(addr))),
        (PDP_IPV6, 0) => EndUserAddress::Ipv6(None),
        (PDP_IPV6, 16) => EndUserAddress::Ipv6(Some(v6(addr))),
        (PDP_IPV4V6, 0) => EndUserAddress::Ipv4v6(None, None),
        (PDP_IPV4V6, 4) => EndUserAddress::Ipv4v6(Some(v4(addr)), None),
        (PDP_IPV4V6, 16) => EndUserAddress::Ipv4v6(None, Some(v6(addr))),
        (PDP_IPV4V6, 20) => EndUserAddress::Ipv4v6(Some(v4(&addr[..4])), Some(v6(&addr[4..]))),
        (PDP_IPV4 | PDP_IPV6 | PDP_IPV4V6, _) => return None,
        _ => EndUserAddress::Other { org, number },
    })
}

impl EndUserAddress {
    /// The IE value, the spare nibble set to 1s as TS 29.060 asks.
    pub fn encode(&self) -> Vec<u8> {
        let (org, number) = match *self {
            EndUserAddress::Ipv4(_) => (PDP_ORG_IETF, PDP_IPV4),
            EndUserAddress::Ipv6(_) => (PDP_ORG_IETF, PDP_IPV6),
            EndUserAddress::Ipv4v6(..) => (PDP_ORG_IETF, PDP_IPV4V6),
            EndUserAddress::Other { org, number } => (org & 0x0F, number),
        };
        let mut out = Vec::with_capacity(22);
        out.extend_from_slice(&[0xF0 | org, number]);
        let (v4, v6) = match *self {
            EndUserAddress::Ipv4(a) => (a, None),
            EndUserAddress::Ipv6(a) => (None, a),
            EndUserAddress::Ipv4v6(a, b) => (a, b),
            EndUserAddress::Other { .. } => (None, None),
        };
        if let Some(a) = v4 {
            out.extend_from_slice(&a.octets());
        }
        if let Some(a) = v6 {
            out.extend_from_slice(&a.octets());
        }
        out
    }
}

/// Reads a GSN Address IE's value (TS 29.060 7.7.32): an IPv4 (4 bytes) or IPv6 (16 bytes)
/// address. None for any other length.
pub fn gsn_address(v: &[u8]) -> Option<IpAddr> {
    match v.len() {
        4 => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(v).ok()?))),
        16 => Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(v).ok()?))),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A Create PDP Context Request as OsmoGGSN's sgsnemu sends one, laid out by hand from
    /// TS 29.060 7.3.1: to TEID 0 (no context yet), sequence 0x1a2b, IEs in ascending order.
    #[rustfmt::skip]
    pub(crate) const CREATE_REQUEST: [u8; 85] = [
        0x32, 0x10, 0x00, 0x4d, 0x00, 0x00, 0x00, 0x00, 0x1a, 0x2b, 0x00, 0x00,
        // IMSI 262011234567890, TBCD low nibble first, one filler.
        0x02, 0x62, 0x02, 0x11, 0x32, 0x54, 0x76, 0x98, 0xf0,
        // Recovery (restart counter 3), selection mode 1 (sgsnemu's).
        0x0e, 0x03, 0x0f, 0x01,
        // TEID data I, TEID control plane, NSAPI 5.
        0x10, 0x11, 0x22, 0x33, 0x44, 0x11, 0x55, 0x66, 0x77, 0x88, 0x14, 0x05,
        // End user address: IETF IPv4, dynamic.
        0x80, 0x00, 0x02, 0xf1, 0x21,
        // APN "internet".
        0x83, 0x00, 0x09, 0x08, b'i', b'n', b't', b'e', b'r', b'n', b'e', b't',
        // SGSN address for signalling, then for user traffic.
        0x85, 0x00, 0x04, 192, 168, 0, 1,
        0x85, 0x00, 0x04, 192, 168, 0, 2,
        // MSISDN: international E.164 49171023456.
        0x86, 0x00, 0x07, 0x91, 0x94, 0x71, 0x01, 0x32, 0x54, 0xf6,
        // QoS profile: allocation/retention priority 1, then R97 QoS 0b 92 1f.
        0x87, 0x00, 0x04, 0x01, 0x0b, 0x92, 0x1f,
    ];

    /// A G-PDU with a PDU Session Container (QFI 9) then a UDP Port extension header (2152),
    /// then an 8-byte T-PDU.
    #[rustfmt::skip]
    pub(crate) const GPDU_EXT: [u8; 28] = [
        0x34, 0xff, 0x00, 0x14, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x85,
        0x01, 0x00, 0x09, 0x40,
        0x01, 0x08, 0x68, 0x00,
        0x45, 0x00, 0x00, 0x1c, 0x12, 0x34, 0x40, 0x00,
    ];

    fn list(payload: &[u8]) -> Vec<Result<(u8, Vec<u8>)>> {
        ies(payload)
            .map(|r| r.map(|i| (i.ty, i.value.to_vec())))
            .collect()
    }

    #[test]
    fn echo_request_builds_and_parses() {
        let m = MsgBuilder::new(msg::ECHO_REQUEST, 0, 7).finish();
        assert_eq!(m, [0x32, 1, 0, 4, 0, 0, 0, 0, 0, 7, 0, 0]);
        let h = parse_header(&m).unwrap();
        assert_eq!(
            h,
            Header {
                msg_type: msg::ECHO_REQUEST,
                length: 4,
                teid: 0,
                seq: Some(7),
                npdu: None,
                ext: ExtList::default(),
                header_len: 12,
            }
        );
        assert_eq!(h.payload(&m), b"");
        assert_eq!(ies(h.payload(&m)).next(), None);
    }

    #[test]
    fn response_builds_in_order_and_reads_back() {
        let eua = EndUserAddress::Ipv4(Some(Ipv4Addr::new(10, 45, 0, 2)));
        let mut b = MsgBuilder::new(msg::CREATE_PDP_RESPONSE, 0x1122_3344, 0x1a2b);
        b.tv(ie::CAUSE, &[cause::REQUEST_ACCEPTED])
            .tv(ie::REORDERING_REQUIRED, &[0])
            .tv(ie::RECOVERY, &[9])
            .tv(ie::TEID_DATA_I, &0x0000_0101u32.to_be_bytes())
            .tv(ie::TEID_C, &0x0000_0102u32.to_be_bytes())
            .tv(ie::CHARGING_ID, &[0, 0, 0, 42])
            .tlv(ie::END_USER_ADDRESS, &eua.encode())
            .tlv(ie::GSN_ADDRESS, &[10, 0, 0, 1])
            .tlv(ie::GSN_ADDRESS, &[10, 0, 0, 1])
            .tlv(ie::EXT_HEADER_TYPE_LIST, &[ext_hdr::UDP_PORT])
            .tlv(ie::PRIVATE_EXTENSION, &[0x12, 0x34, 0xaa]);
        let m = b.finish();
        #[rustfmt::skip]
        let want = [
            0x32, 0x11, 0x00, 0x39, 0x11, 0x22, 0x33, 0x44, 0x1a, 0x2b, 0x00, 0x00,
            0x01, 0x80, 0x08, 0x00, 0x0e, 0x09,
            0x10, 0x00, 0x00, 0x01, 0x01, 0x11, 0x00, 0x00, 0x01, 0x02,
            0x7f, 0x00, 0x00, 0x00, 0x2a,
            0x80, 0x00, 0x06, 0xf1, 0x21, 10, 45, 0, 2,
            0x85, 0x00, 0x04, 10, 0, 0, 1, 0x85, 0x00, 0x04, 10, 0, 0, 1,
            0x8d, 0x01, 0x40,
            0xff, 0x00, 0x03, 0x12, 0x34, 0xaa,
        ];
        assert_eq!(m, want);
        let h = parse_header(&m).unwrap();
        assert_eq!(
            (h.msg_type, h.length, h.teid, h.seq, h.header_len),
            (msg::CREATE_PDP_RESPONSE, 57, 0x1122_3344, Some(0x1a2b), 12)
        );
        let got: Vec<_> = ies(h.payload(&m)).map(|r| r.unwrap()).collect();
        let types: Vec<u8> = got.iter().map(|i| i.ty).collect();
        assert_eq!(types, [1, 8, 14, 16, 17, 127, 128, 133, 133, 141, 255]);
        assert_eq!(got[5].value, [0, 0, 0, 42]);
        assert_eq!(end_user_address(got[6].value), Some(eua));
        assert_eq!(got[9].value, [0x40]);
        assert_eq!(got[10].value, [0x12, 0x34, 0xaa]);
    }

    #[test]
    fn sgsnemu_create_request_reads_as_sent() {
        let m = &CREATE_REQUEST;
        let h = parse_header(m).unwrap();
        assert_eq!(
            h,
            Header {
                msg_type: msg::CREATE_PDP_REQUEST,
                length: 77,
                teid: 0,
                seq: Some(0x1a2b),
                npdu: None,
                ext: ExtList::default(),
                header_len: 12,
            }
        );
        let got: Vec<Ie> = ies(h.payload(m)).map(|r| r.unwrap()).collect();
        let want: [(u8, &[u8]); 12] = [
            (ie::IMSI, &[0x62, 0x02, 0x11, 0x32, 0x54, 0x76, 0x98, 0xf0]),
            (ie::RECOVERY, &[3]),
            (ie::SELECTION_MODE, &[1]),
            (ie::TEID_DATA_I, &[0x11, 0x22, 0x33, 0x44]),
            (ie::TEID_C, &[0x55, 0x66, 0x77, 0x88]),
            (ie::NSAPI, &[5]),
            (ie::END_USER_ADDRESS, &[0xf1, 0x21]),
            (ie::APN, b"\x08internet"),
            (ie::GSN_ADDRESS, &[192, 168, 0, 1]),
            (ie::GSN_ADDRESS, &[192, 168, 0, 2]),
            (ie::MSISDN, &[0x91, 0x94, 0x71, 0x01, 0x32, 0x54, 0xf6]),
            (ie::QOS_PROFILE, &[0x01, 0x0b, 0x92, 0x1f]),
        ];
        let want: Vec<Ie> = want.iter().map(|&(ty, value)| Ie { ty, value }).collect();
        assert_eq!(got, want);

        assert_eq!(
            imsi_digits(got[0].value).as_deref(),
            Some("262011234567890")
        );
        assert_eq!(be32(got[3].value, 0), 0x1122_3344);
        assert_eq!(be32(got[4].value, 0), 0x5566_7788);
        assert_eq!(
            end_user_address(got[6].value),
            Some(EndUserAddress::Ipv4(None))
        );
        assert_eq!(apn_decode(got[7].value).as_deref(), Some("internet"));
        assert_eq!(
            gsn_address(got[8].value),
            Some("192.168.0.1".parse().unwrap())
        );
        assert_eq!(
            gsn_address(got[9].value),
            Some("192.168.0.2".parse().unwrap())
        );

        // The builder lays the same IEs out byte for byte.
        let mut b = MsgBuilder::new(msg::CREATE_PDP_REQUEST, 0, 0x1a2b);
        for i in &got {
            if i.ty < 128 {
                b.tv(i.ty, i.value);
            } else {
                b.tlv(i.ty, i.value);
            }
        }
        assert_eq!(b.finish(), m);
    }

    #[test]
    fn extension_headers_are_walked() {
        let h = parse_header(&GPDU_EXT).unwrap();
        assert_eq!(
            (h.msg_type, h.length, h.teid, h.seq, h.npdu),
            (msg::G_PDU, 20, 0xdead_beef, None, None)
        );
        assert_eq!(
            h.ext.as_slice(),
            [ext_hdr::PDU_SESSION_CONTAINER, ext_hdr::UDP_PORT]
        );
        assert_eq!(h.header_len, 20);
        assert_eq!(h.payload(&GPDU_EXT), &GPDU_EXT[20..]);
        assert!(ext_hdr::comprehension_required(h.ext[0]));
        assert!(!ext_hdr::comprehension_required(h.ext[1]));

        // S and PN too: both fields read; a header of 2 units (8 bytes) is skipped whole.
        let mut m = vec![0x37, 0xff, 0x00, 0x10, 0, 0, 0, 1, 0x12, 0x34, 0x56, 0xc0];
        m.extend_from_slice(&[0x02, 1, 2, 3, 4, 5, 6, 0x00]);
        m.extend_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd]);
        let h = parse_header(&m).unwrap();
        assert_eq!((h.seq, h.npdu), (Some(0x1234), Some(0x56)));
        assert_eq!(h.ext.as_slice(), [ext_hdr::PDCP_PDU_NUMBER]);
        assert_eq!(
            (h.header_len, h.payload(&m)),
            (20, &[0xaa, 0xbb, 0xcc, 0xdd][..])
        );

        // E set with next type 0: the optional fields and no extension header.
        let m = [
            0x34, 0xff, 0x00, 0x05, 0, 0, 0, 9, 0xff, 0xff, 0xff, 0x00, 0x45,
        ];
        let h = parse_header(&m).unwrap();
        assert_eq!(
            (h.seq, h.npdu, h.ext.len(), h.header_len),
            (None, None, 0, 12)
        );
        assert_eq!(h.payload(&m), [0x45]);

        // Four headers is the most kept.
        let mut m = vec![0x34, 0xff, 0x00, 0x14, 0, 0, 0, 9, 0, 0, 0, 0x40];
        for next in [0x40, 0x40, 0x40, 0x00] {
            m.extend_from_slice(&[0x01, 0x08, 0x68, next]);
        }
        assert_eq!(parse_header(&m).unwrap().ext.as_slice(), [0x40; 4]);
        assert_eq!(parse_header(&m).unwrap().header_len, 28);
    }

    #[test]
    fn header_errors() {
        use Error::{Malformed, Truncated};
        let echo = MsgBuilder::new(msg::ECHO_REQUEST, 0, 1).finish();
        for len in 0..echo.len() {
            assert_eq!(parse_header(&echo[..len]), Err(Truncated), "length {len}");
        }
        for len in 0..CREATE_REQUEST.len() {
            assert_eq!(parse_header(&CREATE_REQUEST[..len]), Err(Truncated));
        }
        for len in 0..GPDU_EXT.len() {
            assert_eq!(parse_header(&GPDU_EXT[..len]), Err(Truncated));
        }
        // Bytes after the message (Ethernet padding) are not part of it.
        let mut padded = echo.clone();
        padded.extend_from_slice(&[0; 6]);
        let h = parse_header(&padded).unwrap();
        assert_eq!((h.header_len, h.payload(&padded)), (12, &[][..]));

        let with = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut m = GPDU_EXT.to_vec();
            f(&mut m);
            parse_header(&m)
        };
        // GTPv0, GTPv2, GTP' (PT 0).
        assert_eq!(with(&|m| m[0] = 0x1e), Err(Malformed));
        assert_eq!(with(&|m| m[0] = 0x48), Err(Malformed));
        assert_eq!(with(&|m| m[0] = 0x24), Err(Malformed));
        // The length claims more than is there.
        assert_eq!(with(&|m| m[3] = 0x15), Err(Truncated));
        // Flags set but the length does not cover the optional fields.
        assert_eq!(
            parse_header(&[0x32, 1, 0, 3, 0, 0, 0, 0, 0, 1, 0]),
            Err(Malformed)
        );
        // An extension header of length 0.
        assert_eq!(with(&|m| m[12] = 0), Err(Malformed));
        // An extension header running past the message, or a chain that does not end in it.
        assert_eq!(with(&|m| m[16] = 4), Err(Malformed));
        assert_eq!(
            with(&|m| {
                m[3] = 8;
                m.truncate(16);
            }),
            Err(Malformed)
        );
        // Five headers.
        let mut m = vec![0x34, 0xff, 0x00, 0x18, 0, 0, 0, 9, 0, 0, 0, 0x40];
        for next in [0x40, 0x40, 0x40, 0x40, 0x00] {
            m.extend_from_slice(&[0x01, 0x08, 0x68, next]);
        }
        assert_eq!(parse_header(&m), Err(Malformed));
    }

    #[test]
    fn ie_walk_errors_end_the_walk() {
        use Error::{Malformed, Truncated};
        // An unknown TV type (6 is reserved, 126 GTP'), after a good IE.
        for ty in [6, 7, 10, 30, 116, 126] {
            assert_eq!(
                list(&[0x0e, 3, ty, 0, 0x0f, 1]),
                [Ok((14, vec![3])), Err(Malformed)]
            );
        }
        // A TV IE cut short.
        assert_eq!(list(&[0x02, 1, 2, 3]), [Err(Truncated)]);
        assert_eq!(list(&[0x10, 0, 0, 1]), [Err(Truncated)]);
        // A TLV whose length runs past the payload, or whose length is cut.
        assert_eq!(list(&[0x85, 0, 5, 1, 2, 3, 4]), [Err(Truncated)]);
        assert_eq!(list(&[0x85, 0]), [Err(Truncated)]);
        assert_eq!(list(&[0x85]), [Err(Truncated)]);
        assert_eq!(list(&[0x8d]), [Err(Truncated)]);
        assert_eq!(list(&[0x8d, 2, 0x40]), [Err(Truncated)]);
        // An unknown TLV type is stepped over; an empty TLV is fine.
        assert_eq!(
            list(&[0xc8, 0, 2, 7, 7, 0x84, 0, 0, 0x8d, 0]),
            [
                Ok((0xc8, vec![7, 7])),
                Ok((ie::PCO, vec![])),
                Ok((ie::EXT_HEADER_TYPE_LIST, vec![]))
            ]
        );
        // Every prefix of the request's IEs ends in an error or at an IE boundary.
        let payload = &CREATE_REQUEST[12..];
        let bounds = [0, 9, 11, 13, 18, 23, 25, 30, 42, 49, 56, 66, 73];
        for len in 0..=payload.len() {
            let l = list(&payload[..len]);
            let ok = l.iter().filter(|r| r.is_ok()).count();
            if bounds.contains(&len) {
                assert!(l.iter().all(|r| r.is_ok()), "length {len}");
                assert_eq!(bounds[ok], len);
            } else {
                assert_eq!(l.last(), Some(&Err(Truncated)), "length {len}");
            }
        }
    }

    #[test]
    fn tv_lengths_follow_table_37() {
        let lens: Vec<(u8, usize)> = (0..=255u8)
            .filter_map(|t| tv_len(t).map(|n| (t, n)))
            .collect();
        #[rustfmt::skip]
        let want = [
            (1, 1), (2, 8), (3, 6), (4, 4), (5, 4), (8, 1), (9, 28), (11, 1), (12, 3), (13, 1),
            (14, 1), (15, 1), (16, 4), (17, 4), (18, 5), (19, 1), (20, 1), (21, 1), (22, 9),
            (23, 1), (24, 1), (25, 2), (26, 2), (27, 2), (28, 2), (29, 1), (127, 4),
        ];
        assert_eq!(lens, want);
    }

    #[test]
    fn imsi_tbcd() {
        let v = imsi_encode("262011234567890").unwrap();
        assert_eq!(v, [0x62, 0x02, 0x11, 0x32, 0x54, 0x76, 0x98, 0xf0]);
        assert_eq!(imsi_digits(&v).as_deref(), Some("262011234567890"));
        // An even count fills a whole byte; a short one fills the rest.
        let v = imsi_encode("00101").unwrap();
        assert_eq!(v, [0x00, 0x01, 0xf1, 0xff, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(imsi_digits(&v).as_deref(), Some("00101"));
        let v = imsi_encode("001010000000001").unwrap();
        assert_eq!(imsi_digits(&v).as_deref(), Some("001010000000001"));
        let v = imsi_encode("12").unwrap();
        assert_eq!(v, [0x21, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(imsi_digits(&v).as_deref(), Some("12"));

        for bad in ["", "0010100000000012", "00101a", "+49", " 1", "١٢٣"] {
            assert_eq!(imsi_encode(bad), None, "{bad:?}");
        }
        // 16 digits, a nibble over 9, a digit after the filler, no digit at all, wrong lengths.
        assert_eq!(imsi_digits(&[0x11; 8]), None);
        assert_eq!(
            imsi_digits(&[0x62, 0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            None
        );
        assert_eq!(
            imsi_digits(&[0x62, 0x02, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xf1]),
            None
        );
        assert_eq!(
            imsi_digits(&[0x62, 0x2f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            None
        );
        assert_eq!(imsi_digits(&[0xff; 8]), None);
        assert_eq!(imsi_digits(&[0x62, 0x02, 0xf1]), None);
        assert_eq!(imsi_digits(&[0x62; 9]), None);
    }

    #[test]
    fn apn_labels() {
        assert_eq!(apn_encode("internet"), b"\x08internet");
        let full = b"\x03apn\x06mnc001\x06mcc001\x04gprs";
        assert_eq!(apn_encode("apn.mnc001.mcc001.gprs"), full);
        assert_eq!(apn_decode(full).as_deref(), Some("apn.mnc001.mcc001.gprs"));
        assert_eq!(apn_decode(b"\x01a").as_deref(), Some("a"));
        let long = [&[63][..], &[b'x'; 63]].concat();
        assert_eq!(apn_decode(&long), Some("x".repeat(63)));
        assert_eq!(apn_encode(&"x".repeat(63)), long);

        for bad in [
            &b""[..],
            b"\x00",
            b"\x03apn\x00",
            b"\x05abc",
            b"\x03abc\x02d",
            b"\x03a.b",
            b"\x03a b",
            b"\x02a\xff",
            b"internet",
        ] {
            assert_eq!(apn_decode(bad), None, "{bad:?}");
        }
        let mut over = vec![64];
        over.extend_from_slice(&[b'x'; 64]);
        assert_eq!(apn_decode(&over), None);
    }

    #[test]
    fn end_user_addresses() {
        let a4: Ipv4Addr = "10.45.0.2".parse().unwrap();
        let a6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let o6 = a6.octets();
        let cases: [(EndUserAddress, Vec<u8>); 9] = [
            (EndUserAddress::Ipv4(None), vec![0xf1, 0x21]),
            (
                EndUserAddress::Ipv4(Some(a4)),
                vec![0xf1, 0x21, 10, 45, 0, 2],
            ),
            (EndUserAddress::Ipv6(None), vec![0xf1, 0x57]),
            (
                EndUserAddress::Ipv6(Some(a6)),
                [&[0xf1, 0x57][..], &o6[..]].concat(),
            ),
            (EndUserAddress::Ipv4v6(None, None), vec![0xf1, 0x8d]),
            (
                EndUserAddress::Ipv4v6(Some(a4), None),
                vec![0xf1, 0x8d, 10, 45, 0, 2],
            ),
            (
                EndUserAddress::Ipv4v6(None, Some(a6)),
                [&[0xf1, 0x8d][..], &o6[..]].concat(),
            ),
            (
                EndUserAddress::Ipv4v6(Some(a4), Some(a6)),
                [&[0xf1, 0x8d, 10, 45, 0, 2][..], &o6[..]].concat(),
            ),
            (
                EndUserAddress::Other { org: 0, number: 1 },
                vec![0xf0, 0x01],
            ),
        ];
        for (eua, bytes) in &cases {
            assert_eq!(eua.encode(), *bytes, "{eua:?}");
            assert_eq!(end_user_address(bytes), Some(*eua), "{bytes:02x?}");
        }
        // The spare nibble is not read.
        assert_eq!(
            end_user_address(&[0x01, 0x21]),
            Some(EndUserAddress::Ipv4(None))
        );
        // An IETF number nobody defined.
        assert_eq!(
            end_user_address(&[0xf1, 0x22, 1]),
            Some(EndUserAddress::Other {
                org: 1,
                number: 0x22
            })
        );
        for bad in [
            &[][..],
            &[0xf1],
            &[0xf1, 0x21, 10, 45, 0],
            &[0xf1, 0x21, 10, 45, 0, 2, 0],
            &[0xf1, 0x57, 10, 45, 0, 2],
            &[0xf1, 0x8d, 1, 2, 3, 4, 5, 6, 7, 8],
        ] {
            assert_eq!(end_user_address(bad), None, "{bad:02x?}");
        }
    }

    #[test]
    fn gsn_addresses_and_versions() {
        assert_eq!(
            gsn_address(&[192, 0, 2, 1]),
            Some("192.0.2.1".parse().unwrap())
        );
        let v6: Ipv6Addr = "2001:db8::7".parse().unwrap();
        assert_eq!(gsn_address(&v6.octets()), Some(IpAddr::V6(v6)));
        assert_eq!(gsn_address(&[1, 2, 3]), None);
        assert_eq!(gsn_address(&[0; 5]), None);
        assert_eq!(gsn_address(&[]), None);

        assert_eq!(version_of(&[]), None);
        assert_eq!(version_of(&[0x32]), Some(1));
        assert_eq!(version_of(&[0x48, 0x20]), Some(2));
        assert_eq!(version_of(&[0x1e]), Some(0));
    }

    #[test]
    fn gpdu_header_encapsulates() {
        let mut out = [0u8; 14];
        gpdu_header(&mut out, 0x0102_0304, 6);
        out[8..].copy_from_slice(b"packet");
        assert_eq!(out[..8], [0x30, 0xff, 0x00, 0x06, 0x01, 0x02, 0x03, 0x04]);
        let h = parse_header(&out).unwrap();
        assert_eq!(
            (h.msg_type, h.teid, h.seq, h.header_len),
            (msg::G_PDU, 0x0102_0304, None, 8)
        );
        assert_eq!(h.payload(&out), b"packet");
    }
}

#[cfg(test)]
mod seeds {
    use super::*;

    /// Writes the fuzz target's seeds (whole GTP messages, as UDP payloads) when asked:
    /// `GTP_SEEDS=$PWD/fuzz/seeds/gtp cargo test -p packet gtp::seeds`.
    #[test]
    fn write_seeds() {
        let Ok(dir) = std::env::var("GTP_SEEDS") else {
            return;
        };
        let echo = MsgBuilder::new(msg::ECHO_REQUEST, 0, 1).finish();
        let mut echo_resp = MsgBuilder::new(msg::ECHO_RESPONSE, 0, 1);
        echo_resp.tv(ie::RECOVERY, &[0]);
        let v6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let mut create_resp = MsgBuilder::new(msg::CREATE_PDP_RESPONSE, 0x5566_7788, 0x1a2b);
        create_resp
            .tv(ie::CAUSE, &[cause::REQUEST_ACCEPTED])
            .tv(ie::REORDERING_REQUIRED, &[0])
            .tv(ie::RECOVERY, &[1])
            .tv(ie::TEID_DATA_I, &[0, 0, 1, 1])
            .tv(ie::TEID_C, &[0, 0, 1, 2])
            .tv(ie::CHARGING_ID, &[0, 0, 1, 2])
            .tlv(
                ie::END_USER_ADDRESS,
                &EndUserAddress::Ipv4v6(Some(Ipv4Addr::new(10, 45, 0, 2)), Some(v6)).encode(),
            )
            .tlv(ie::PCO, &[0x80, 0x80, 0x21, 0x04, 0x03, 0x00, 0x00, 0x04])
            .tlv(ie::GSN_ADDRESS, &[10, 0, 0, 1])
            .tlv(ie::GSN_ADDRESS, &[10, 0, 0, 1])
            .tlv(ie::QOS_PROFILE, &[0x01, 0x0b, 0x92, 0x1f]);
        let mut delete = MsgBuilder::new(msg::DELETE_PDP_REQUEST, 0x0000_0102, 0x1a2c);
        delete.tv(ie::TEARDOWN_IND, &[0xff]).tv(ie::NSAPI, &[5]);
        let mut err_ind = MsgBuilder::new(msg::ERROR_INDICATION, 0, 0);
        err_ind
            .tv(ie::TEID_DATA_I, &[0xde, 0xad, 0xbe, 0xef])
            .tlv(ie::GSN_ADDRESS, &[10, 0, 0, 1]);
        let mut gpdu = vec![0u8; 8];
        gpdu_header(&mut gpdu, 0x0000_0101, 4);
        gpdu.extend_from_slice(&[0x45, 0, 0, 4]);
        let seeds: [(&str, &[u8]); 8] = [
            ("echo-request", &echo),
            ("echo-response", &echo_resp.finish()),
            ("create-pdp-request", &tests::CREATE_REQUEST),
            ("create-pdp-response", &create_resp.finish()),
            ("delete-pdp-request", &delete.finish()),
            ("error-indication", &err_ind.finish()),
            ("gpdu", &gpdu),
            ("gpdu-ext-headers", &tests::GPDU_EXT),
        ];
        for (name, m) in seeds {
            std::fs::write(format!("{dir}/{name}"), m).unwrap();
        }
    }
}
