//! LDP (RFC 5036) PDUs, with the pseudowire FEC and status of RFC 4447: the reader every
//! received PDU goes through, and a builder for the ones the router sends.
//!
//! A PDU is a header (version 1, length, the sender's LDP identifier: LSR id and label space)
//! and messages; a message is a type (with the U bit: ignore if unknown), a length, an id and
//! TLVs (each with U and F bits, RFC 5036 3.3). [`parse_pdu`] checks the header,
//! [`messages`] splits the body, [`decode`] reads one message into a [`Msg`]. A malformed PDU or
//! message yields the [`Status`] code the RFC says the notification must carry; whether the
//! session must close is [`status::fatal`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// UDP (discovery) and TCP (sessions) port.
pub const PORT: u16 = 646;
/// Where basic discovery's hellos go: all routers on this subnet.
pub const ALL_ROUTERS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 2);
/// The PDU header: version, length, LDP identifier.
pub const HEADER_LEN: usize = 10;
/// The largest PDU unless the peer says otherwise (RFC 5036 3.5.3: 0 means 4096).
pub const DEFAULT_MAX_PDU: usize = 4096;

/// Message types (RFC 5036 3.7).
pub mod msg {
    pub const NOTIFICATION: u16 = 0x0001;
    pub const HELLO: u16 = 0x0100;
    pub const INITIALIZATION: u16 = 0x0200;
    pub const KEEPALIVE: u16 = 0x0201;
    pub const ADDRESS: u16 = 0x0300;
    pub const ADDRESS_WITHDRAW: u16 = 0x0301;
    pub const LABEL_MAPPING: u16 = 0x0400;
    pub const LABEL_REQUEST: u16 = 0x0401;
    pub const LABEL_WITHDRAW: u16 = 0x0402;
    pub const LABEL_RELEASE: u16 = 0x0403;
    pub const LABEL_ABORT: u16 = 0x0404;
    /// RFC 5561: capabilities announced after initialization.
    pub const CAPABILITY: u16 = 0x0202;
}

/// TLV types (RFC 5036 3.4, RFC 4447 5.4.3).
pub mod tlv {
    pub const FEC: u16 = 0x0100;
    pub const ADDRESS_LIST: u16 = 0x0101;
    pub const HOP_COUNT: u16 = 0x0103;
    pub const PATH_VECTOR: u16 = 0x0104;
    pub const GENERIC_LABEL: u16 = 0x0200;
    pub const STATUS: u16 = 0x0300;
    pub const EXTENDED_STATUS: u16 = 0x0301;
    pub const RETURNED_PDU: u16 = 0x0302;
    pub const RETURNED_MESSAGE: u16 = 0x0303;
    pub const COMMON_HELLO: u16 = 0x0400;
    pub const IPV4_TRANSPORT: u16 = 0x0401;
    pub const CONFIG_SEQUENCE: u16 = 0x0402;
    pub const IPV6_TRANSPORT: u16 = 0x0403;
    pub const COMMON_SESSION: u16 = 0x0500;
    pub const LABEL_REQUEST_ID: u16 = 0x0600;
    pub const PW_STATUS: u16 = 0x096a;
}

/// Status codes (RFC 5036 3.9, RFC 4447 8.2).
pub mod status {
    pub const SUCCESS: u32 = 0x00;
    pub const BAD_LDP_ID: u32 = 0x01;
    pub const BAD_VERSION: u32 = 0x02;
    pub const BAD_PDU_LENGTH: u32 = 0x03;
    pub const UNKNOWN_MESSAGE: u32 = 0x04;
    pub const BAD_MESSAGE_LENGTH: u32 = 0x05;
    pub const UNKNOWN_TLV: u32 = 0x06;
    pub const BAD_TLV_LENGTH: u32 = 0x07;
    pub const MALFORMED_TLV: u32 = 0x08;
    pub const HOLD_EXPIRED: u32 = 0x09;
    pub const SHUTDOWN: u32 = 0x0a;
    pub const UNKNOWN_FEC: u32 = 0x0c;
    pub const NO_ROUTE: u32 = 0x0d;
    pub const NO_LABEL_RESOURCES: u32 = 0x0e;
    pub const SESSION_REJECTED_NO_HELLO: u32 = 0x10;
    pub const SESSION_REJECTED_PARAMETERS: u32 = 0x11;
    pub const SESSION_REJECTED_MAX_PDU: u32 = 0x12;
    pub const KEEPALIVE_EXPIRED: u32 = 0x14;
    pub const MISSING_PARAMETERS: u32 = 0x16;
    pub const UNSUPPORTED_ADDRESS_FAMILY: u32 = 0x17;
    pub const SESSION_REJECTED_KEEPALIVE: u32 = 0x18;
    pub const INTERNAL_ERROR: u32 = 0x19;
    /// RFC 4447 5.4.3: a notification carrying a pseudowire's new status.
    pub const PW_STATUS: u32 = 0x28;

    /// Whether a notification with `code` closes the session (RFC 5036 3.5.1.2: the errors
    /// of the PDU header, lengths, hold and keepalive expiry, shutdown, rejections, internal).
    pub fn fatal(code: u32) -> bool {
        matches!(
            code,
            BAD_LDP_ID
                | BAD_VERSION
                | BAD_PDU_LENGTH
                | BAD_MESSAGE_LENGTH
                | BAD_TLV_LENGTH
                | MALFORMED_TLV
                | HOLD_EXPIRED
                | SHUTDOWN
                | SESSION_REJECTED_NO_HELLO
                | SESSION_REJECTED_PARAMETERS
                | SESSION_REJECTED_MAX_PDU
                | KEEPALIVE_EXPIRED
                | SESSION_REJECTED_KEEPALIVE
                | INTERNAL_ERROR
        )
    }
}

/// What was wrong with what arrived: the status code to send back, and the message it is about
/// (0 where the PDU itself is at fault).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error {
    pub code: u32,
    pub msg_id: u32,
    pub msg_type: u16,
}

impl Error {
    fn pdu(code: u32) -> Error {
        Error {
            code,
            msg_id: 0,
            msg_type: 0,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.code {
            status::BAD_LDP_ID => "bad LDP identifier",
            status::BAD_VERSION => "bad protocol version",
            status::BAD_PDU_LENGTH => "bad PDU length",
            status::UNKNOWN_MESSAGE => "unknown message type",
            status::BAD_MESSAGE_LENGTH => "bad message length",
            status::UNKNOWN_TLV => "unknown TLV",
            status::BAD_TLV_LENGTH => "bad TLV length",
            status::MALFORMED_TLV => "malformed TLV value",
            status::MISSING_PARAMETERS => "missing message parameters",
            status::UNSUPPORTED_ADDRESS_FAMILY => "unsupported address family",
            _ => "error",
        };
        write!(f, "{what} (status {:#x})", self.code)?;
        if self.msg_type != 0 {
            write!(
                f,
                " in message type {:#06x} id {}",
                self.msg_type, self.msg_id
            )?;
        }
        Ok(())
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// A PDU's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub lsr_id: Ipv4Addr,
    pub label_space: u16,
    /// Bytes of the whole PDU (header included).
    pub len: usize,
}

/// Reads the PDU at the start of `b` (a TCP stream may hold several, or part of one): its
/// header and its messages' bytes; None when `b` does not hold the whole PDU yet. `max_pdu` is
/// the largest PDU this session accepts.
pub fn parse_pdu(b: &[u8], max_pdu: usize) -> Result<Option<(Header, &[u8])>, Error> {
    if b.len() < 4 {
        return Ok(None);
    }
    if be16(b, 0) != 1 {
        return Err(Error::pdu(status::BAD_VERSION));
    }
    let len = be16(b, 2) as usize + 4;
    // The length covers the LDP identifier at least; RFC 5036 3.5.1.2.
    if len < HEADER_LEN || len > max_pdu.max(DEFAULT_MAX_PDU) {
        return Err(Error::pdu(status::BAD_PDU_LENGTH));
    }
    if b.len() < len {
        return Ok(None);
    }
    let h = Header {
        lsr_id: Ipv4Addr::new(b[4], b[5], b[6], b[7]),
        label_space: be16(b, 8),
        len,
    };
    Ok(Some((h, &b[HEADER_LEN..len])))
}

/// One message, its TLVs not yet read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// The U bit: an unknown message of this type is ignored silently.
    pub unknown_ok: bool,
    pub ty: u16,
    pub id: u32,
    pub tlvs: &'a [u8],
}

/// The messages of a PDU's body.
pub fn messages(body: &[u8]) -> Messages<'_> {
    Messages { rest: body }
}

pub struct Messages<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Messages<'a> {
    type Item = Result<Message<'a>, Error>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let b = self.rest;
        if b.len() < 8 {
            self.rest = &[];
            return Some(Err(Error::pdu(status::BAD_MESSAGE_LENGTH)));
        }
        let ty = be16(b, 0) & 0x7fff;
        let len = be16(b, 2) as usize;
        let id = be32(b, 4);
        if len < 4 || 4 + len > b.len() {
            self.rest = &[];
            return Some(Err(Error {
                code: status::BAD_MESSAGE_LENGTH,
                msg_id: id,
                msg_type: ty,
            }));
        }
        self.rest = &b[4 + len..];
        Some(Ok(Message {
            unknown_ok: b[0] & 0x80 != 0,
            ty,
            id,
            tlvs: &b[8..4 + len],
        }))
    }
}

/// One TLV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tlv<'a> {
    /// The U bit: an unknown TLV is ignored (set) or the message refused (clear).
    pub unknown_ok: bool,
    /// The F bit: an unknown TLV with U set is forwarded with the message.
    pub forward: bool,
    pub ty: u16,
    pub value: &'a [u8],
}

/// The TLVs of `b` (a message's, or a TLV's nested ones).
pub fn tlvs(b: &[u8]) -> Tlvs<'_> {
    Tlvs { rest: b }
}

pub struct Tlvs<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Tlvs<'a> {
    type Item = Result<Tlv<'a>, u32>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let b = self.rest;
        if b.len() < 4 {
            self.rest = &[];
            return Some(Err(status::BAD_TLV_LENGTH));
        }
        let len = be16(b, 2) as usize;
        if 4 + len > b.len() {
            self.rest = &[];
            return Some(Err(status::BAD_TLV_LENGTH));
        }
        self.rest = &b[4 + len..];
        Some(Ok(Tlv {
            unknown_ok: b[0] & 0x80 != 0,
            forward: b[0] & 0x40 != 0,
            ty: be16(b, 0) & 0x3fff,
            value: &b[4..4 + len],
        }))
    }
}

/// Pseudowire types (RFC 4446) as the PWid FEC carries them.
pub const PW_TYPE_ETHERNET_VLAN: u16 = 0x0004;
pub const PW_TYPE_ETHERNET: u16 = 0x0005;

/// A FEC element (RFC 5036 3.4.1, RFC 4447 5.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fec {
    /// Every FEC (withdraw and release only).
    Wildcard,
    Prefix(IpAddr, u8),
    /// A pseudowire: its type, whether the sender uses the control word, the group and PW id,
    /// and the interface parameters it sent (MTU, requested VLAN).
    PwId {
        control_word: bool,
        pw_type: u16,
        group: u32,
        pw_id: Option<u32>,
        mtu: Option<u16>,
        vlan: Option<u16>,
    },
    /// RFC 5918: every FEC of one type (of an address family for prefixes).
    TypedWildcard {
        fec_type: u8,
        family: Option<u16>,
    },
}

fn fec_elements(v: &[u8]) -> Result<Vec<Fec>, u32> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < v.len() {
        match v[at] {
            0x01 => {
                out.push(Fec::Wildcard);
                at += 1;
            }
            0x02 => {
                if v.len() < at + 4 {
                    return Err(status::MALFORMED_TLV);
                }
                let family = be16(v, at + 1);
                let plen = v[at + 3];
                let n = (plen as usize).div_ceil(8);
                let bytes = v.get(at + 4..at + 4 + n).ok_or(status::MALFORMED_TLV)?;
                let addr = match family {
                    1 if plen <= 32 => {
                        let mut a = [0u8; 4];
                        a[..n].copy_from_slice(bytes);
                        IpAddr::V4(Ipv4Addr::from(a))
                    }
                    2 if plen <= 128 => {
                        let mut a = [0u8; 16];
                        a[..n].copy_from_slice(bytes);
                        IpAddr::V6(Ipv6Addr::from(a))
                    }
                    1 | 2 => return Err(status::MALFORMED_TLV),
                    _ => return Err(status::UNSUPPORTED_ADDRESS_FAMILY),
                };
                out.push(Fec::Prefix(addr, plen));
                at += 4 + n;
            }
            0x80 => {
                // C bit and type (2), info length (1), group id (4), then the PW id (4) and
                // interface parameters, `info length` bytes of them.
                if v.len() < at + 8 {
                    return Err(status::MALFORMED_TLV);
                }
                let ct = be16(v, at + 1);
                let info = v[at + 3] as usize;
                let group = be32(v, at + 4);
                let body = v.get(at + 8..at + 8 + info).ok_or(status::MALFORMED_TLV)?;
                let (mut pw_id, mut mtu, mut vlan) = (None, None, None);
                if !body.is_empty() {
                    if body.len() < 4 {
                        return Err(status::MALFORMED_TLV);
                    }
                    pw_id = Some(be32(body, 0));
                    let mut p = 4;
                    while p < body.len() {
                        // Sub-TLV: type, length (including these two bytes), value.
                        let (t, l) = (body[p], body.get(p + 1).copied().unwrap_or(0) as usize);
                        if l < 2 || p + l > body.len() {
                            return Err(status::MALFORMED_TLV);
                        }
                        let val = &body[p + 2..p + l];
                        match (t, val.len()) {
                            (0x01, 2) => mtu = Some(be16(val, 0)),
                            (0x06, 2) => vlan = Some(be16(val, 0)),
                            _ => {}
                        }
                        p += l;
                    }
                }
                out.push(Fec::PwId {
                    control_word: ct & 0x8000 != 0,
                    pw_type: ct & 0x7fff,
                    group,
                    pw_id,
                    mtu,
                    vlan,
                });
                at += 8 + info;
            }
            0x05 => {
                // Typed wildcard: the FEC type, a length, and for prefixes the family.
                if v.len() < at + 3 {
                    return Err(status::MALFORMED_TLV);
                }
                let (t, l) = (v[at + 1], v[at + 2] as usize);
                let extra = v.get(at + 3..at + 3 + l).ok_or(status::MALFORMED_TLV)?;
                let family = (extra.len() >= 2).then(|| be16(extra, 0));
                out.push(Fec::TypedWildcard {
                    fec_type: t,
                    family,
                });
                at += 3 + l;
            }
            _ => return Err(status::UNKNOWN_FEC),
        }
    }
    if out.is_empty() {
        return Err(status::MALFORMED_TLV);
    }
    Ok(out)
}

/// A status TLV's contents (RFC 5036 3.4.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub fatal: bool,
    pub forward: bool,
    pub code: u32,
    pub msg_id: u32,
    pub msg_type: u16,
}

/// Hello (RFC 5036 3.5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Seconds (0: the default, 15 link / 45 targeted; 0xffff: infinite).
    pub hold: u16,
    pub targeted: bool,
    pub request_targeted: bool,
    pub transport: Option<Ipv4Addr>,
    pub config_seq: Option<u32>,
}

/// Initialization (RFC 5036 3.5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Init {
    pub keepalive: u16,
    /// Downstream on demand (set) or unsolicited.
    pub on_demand: bool,
    pub loop_detection: bool,
    pub path_vector_limit: u8,
    pub max_pdu: u16,
    /// The receiver's LDP identifier as the sender believes it.
    pub receiver: (Ipv4Addr, u16),
}

/// A decoded message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    Notification(Status),
    Hello(Hello),
    Init(Init),
    KeepAlive,
    Address(Vec<Ipv4Addr>),
    AddressWithdraw(Vec<Ipv4Addr>),
    /// FECs, label, request id it answers, PW status (RFC 4447 5.4.3: 0 is forwarding).
    LabelMapping {
        fecs: Vec<Fec>,
        label: u32,
        pw_status: Option<u32>,
    },
    LabelRequest(Vec<Fec>),
    /// A notification of a pseudowire's new status (RFC 4447 5.4.3: 0 is forwarding).
    PwStatus {
        fecs: Vec<Fec>,
        status: u32,
    },
    LabelWithdraw {
        fecs: Vec<Fec>,
        label: Option<u32>,
    },
    LabelRelease {
        fecs: Vec<Fec>,
        label: Option<u32>,
    },
    /// A message this router does not act on (abort, capability, an unknown type with the U
    /// bit set): nothing to do.
    Ignored(u16),
}

/// Reads one message. Unknown TLVs with the U bit clear, unknown message types with the U bit
/// clear, missing mandatory TLVs and malformed values are errors carrying the status to send.
pub fn decode(m: &Message<'_>) -> Result<Msg, Error> {
    let err = |code| Error {
        code,
        msg_id: m.id,
        msg_type: m.ty,
    };
    let mut list: Vec<Tlv<'_>> = Vec::new();
    for t in tlvs(m.tlvs) {
        list.push(t.map_err(err)?);
    }
    let find = |ty: u16| list.iter().find(|t| t.ty == ty);
    let known: &[u16] = match m.ty {
        msg::NOTIFICATION => &[
            tlv::STATUS,
            tlv::EXTENDED_STATUS,
            tlv::RETURNED_PDU,
            tlv::RETURNED_MESSAGE,
            tlv::FEC,
            tlv::PW_STATUS,
        ],
        msg::HELLO => &[
            tlv::COMMON_HELLO,
            tlv::IPV4_TRANSPORT,
            tlv::IPV6_TRANSPORT,
            tlv::CONFIG_SEQUENCE,
        ],
        msg::INITIALIZATION => &[tlv::COMMON_SESSION],
        msg::ADDRESS | msg::ADDRESS_WITHDRAW => &[tlv::ADDRESS_LIST],
        msg::LABEL_MAPPING | msg::LABEL_REQUEST | msg::LABEL_WITHDRAW | msg::LABEL_RELEASE => &[
            tlv::FEC,
            tlv::GENERIC_LABEL,
            tlv::LABEL_REQUEST_ID,
            tlv::HOP_COUNT,
            tlv::PATH_VECTOR,
            tlv::PW_STATUS,
            tlv::STATUS,
        ],
        _ => &[],
    };
    // Messages this speaker reads refuse an unknown TLV without the U bit (RFC 5036 3.5.1.2.2);
    // the others are ignored whole.
    let read = !matches!(m.ty, msg::LABEL_ABORT | msg::CAPABILITY) && !known.is_empty()
        || m.ty == msg::KEEPALIVE;
    if read && list.iter().any(|t| !t.unknown_ok && !known.contains(&t.ty)) {
        return Err(err(status::UNKNOWN_TLV));
    }
    let label = |t: Option<&Tlv<'_>>| -> Result<Option<u32>, Error> {
        match t {
            None => Ok(None),
            Some(t) if t.value.len() == 4 => {
                let l = be32(t.value, 0);
                if l > 0x000f_ffff {
                    return Err(err(status::MALFORMED_TLV));
                }
                Ok(Some(l))
            }
            Some(_) => Err(err(status::BAD_TLV_LENGTH)),
        }
    };
    let fecs = || -> Result<Vec<Fec>, Error> {
        let t = find(tlv::FEC).ok_or(err(status::MISSING_PARAMETERS))?;
        fec_elements(t.value).map_err(err)
    };
    let addresses = || -> Result<Vec<Ipv4Addr>, Error> {
        let t = find(tlv::ADDRESS_LIST).ok_or(err(status::MISSING_PARAMETERS))?;
        let v = t.value;
        if v.len() < 2 {
            return Err(err(status::BAD_TLV_LENGTH));
        }
        match be16(v, 0) {
            1 if (v.len() - 2) % 4 == 0 => Ok(v[2..]
                .chunks_exact(4)
                .map(|c| Ipv4Addr::new(c[0], c[1], c[2], c[3]))
                .collect()),
            1 => Err(err(status::MALFORMED_TLV)),
            // IPv6 addresses are accepted and not used: this speaker binds IPv4 FECs.
            2 if (v.len() - 2) % 16 == 0 => Ok(Vec::new()),
            2 => Err(err(status::MALFORMED_TLV)),
            _ => Err(err(status::UNSUPPORTED_ADDRESS_FAMILY)),
        }
    };
    Ok(match m.ty {
        msg::NOTIFICATION => {
            let t = find(tlv::STATUS).ok_or(err(status::MISSING_PARAMETERS))?;
            if t.value.len() != 10 {
                return Err(err(status::BAD_TLV_LENGTH));
            }
            let c = be32(t.value, 0);
            if let Some(pw) = find(tlv::PW_STATUS) {
                if pw.value.len() != 4 {
                    return Err(err(status::BAD_TLV_LENGTH));
                }
                return Ok(Msg::PwStatus {
                    fecs: fecs()?,
                    status: be32(pw.value, 0),
                });
            }
            Msg::Notification(Status {
                fatal: c & 0x8000_0000 != 0,
                forward: c & 0x4000_0000 != 0,
                code: c & 0x3fff_ffff,
                msg_id: be32(t.value, 4),
                msg_type: be16(t.value, 8),
            })
        }
        msg::HELLO => {
            let t = find(tlv::COMMON_HELLO).ok_or(err(status::MISSING_PARAMETERS))?;
            if t.value.len() != 4 {
                return Err(err(status::BAD_TLV_LENGTH));
            }
            let transport = match find(tlv::IPV4_TRANSPORT) {
                Some(a) if a.value.len() == 4 => Some(Ipv4Addr::new(
                    a.value[0], a.value[1], a.value[2], a.value[3],
                )),
                Some(_) => return Err(err(status::BAD_TLV_LENGTH)),
                None => None,
            };
            let config_seq = match find(tlv::CONFIG_SEQUENCE) {
                Some(a) if a.value.len() == 4 => Some(be32(a.value, 0)),
                Some(_) => return Err(err(status::BAD_TLV_LENGTH)),
                None => None,
            };
            Msg::Hello(Hello {
                hold: be16(t.value, 0),
                targeted: t.value[2] & 0x80 != 0,
                request_targeted: t.value[2] & 0x40 != 0,
                transport,
                config_seq,
            })
        }
        msg::INITIALIZATION => {
            let t = find(tlv::COMMON_SESSION).ok_or(err(status::MISSING_PARAMETERS))?;
            let v = t.value;
            if v.len() != 14 {
                return Err(err(status::BAD_TLV_LENGTH));
            }
            if be16(v, 0) != 1 {
                return Err(err(status::SESSION_REJECTED_PARAMETERS));
            }
            Msg::Init(Init {
                keepalive: be16(v, 2),
                on_demand: v[4] & 0x80 != 0,
                loop_detection: v[4] & 0x40 != 0,
                path_vector_limit: v[5],
                max_pdu: be16(v, 6),
                receiver: (Ipv4Addr::new(v[8], v[9], v[10], v[11]), be16(v, 12)),
            })
        }
        msg::KEEPALIVE => Msg::KeepAlive,
        msg::ADDRESS => Msg::Address(addresses()?),
        msg::ADDRESS_WITHDRAW => Msg::AddressWithdraw(addresses()?),
        msg::LABEL_MAPPING => {
            let label = label(find(tlv::GENERIC_LABEL))?.ok_or(err(status::MISSING_PARAMETERS))?;
            let pw_status = match find(tlv::PW_STATUS) {
                Some(t) if t.value.len() == 4 => Some(be32(t.value, 0)),
                Some(_) => return Err(err(status::BAD_TLV_LENGTH)),
                None => None,
            };
            Msg::LabelMapping {
                fecs: fecs()?,
                label,
                pw_status,
            }
        }
        msg::LABEL_REQUEST => Msg::LabelRequest(fecs()?),
        msg::LABEL_WITHDRAW => Msg::LabelWithdraw {
            fecs: fecs()?,
            label: label(find(tlv::GENERIC_LABEL))?,
        },
        msg::LABEL_RELEASE => Msg::LabelRelease {
            fecs: fecs()?,
            label: label(find(tlv::GENERIC_LABEL))?,
        },
        msg::LABEL_ABORT | msg::CAPABILITY => Msg::Ignored(m.ty),
        ty if m.unknown_ok => Msg::Ignored(ty),
        _ => return Err(err(status::UNKNOWN_MESSAGE)),
    })
}

/// Builds one PDU of messages.
pub struct PduBuilder {
    buf: Vec<u8>,
}

impl PduBuilder {
    pub fn new(lsr_id: Ipv4Addr, label_space: u16) -> PduBuilder {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&1u16.to_be_bytes());
        buf.extend_from_slice(&[0, 0]);
        buf.extend_from_slice(&lsr_id.octets());
        buf.extend_from_slice(&label_space.to_be_bytes());
        PduBuilder { buf }
    }

    /// Appends a message of type `ty` with id `id`, its TLVs written by `f`.
    pub fn message(&mut self, ty: u16, id: u32, f: impl FnOnce(&mut TlvWriter<'_>)) -> &mut Self {
        let start = self.buf.len();
        self.buf.extend_from_slice(&ty.to_be_bytes());
        self.buf.extend_from_slice(&[0, 0]);
        self.buf.extend_from_slice(&id.to_be_bytes());
        f(&mut TlvWriter { buf: &mut self.buf });
        let len = (self.buf.len() - start - 4) as u16;
        self.buf[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
        self
    }

    /// The bytes of the PDU built.
    pub fn finish(mut self) -> Vec<u8> {
        let len = (self.buf.len() - 4) as u16;
        self.buf[2..4].copy_from_slice(&len.to_be_bytes());
        self.buf
    }

    /// Whether there is no message yet.
    pub fn is_empty(&self) -> bool {
        self.buf.len() == HEADER_LEN
    }

    /// Bytes so far (to stay within the peer's maximum PDU length).
    pub fn len(&self) -> usize {
        self.buf.len()
    }
}

/// Writes a message's TLVs.
pub struct TlvWriter<'a> {
    buf: &'a mut Vec<u8>,
}

impl TlvWriter<'_> {
    /// A TLV of type `ty` (U and F clear) with `value`.
    pub fn tlv(&mut self, ty: u16, value: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(&(ty & 0x3fff).to_be_bytes());
        self.buf
            .extend_from_slice(&(value.len() as u16).to_be_bytes());
        self.buf.extend_from_slice(value);
        self
    }

    /// The Common Hello Parameters (and a transport address).
    pub fn hello(&mut self, h: &Hello) -> &mut Self {
        let flags = u8::from(h.targeted) << 7 | u8::from(h.request_targeted) << 6;
        let mut v = h.hold.to_be_bytes().to_vec();
        v.extend_from_slice(&[flags, 0]);
        self.tlv(tlv::COMMON_HELLO, &v);
        if let Some(a) = h.transport {
            self.tlv(tlv::IPV4_TRANSPORT, &a.octets());
        }
        if let Some(s) = h.config_seq {
            self.tlv(tlv::CONFIG_SEQUENCE, &s.to_be_bytes());
        }
        self
    }

    /// The Common Session Parameters.
    pub fn init(&mut self, i: &Init) -> &mut Self {
        let mut v = Vec::with_capacity(14);
        v.extend_from_slice(&1u16.to_be_bytes());
        v.extend_from_slice(&i.keepalive.to_be_bytes());
        v.push(u8::from(i.on_demand) << 7 | u8::from(i.loop_detection) << 6);
        v.push(i.path_vector_limit);
        v.extend_from_slice(&i.max_pdu.to_be_bytes());
        v.extend_from_slice(&i.receiver.0.octets());
        v.extend_from_slice(&i.receiver.1.to_be_bytes());
        self.tlv(tlv::COMMON_SESSION, &v)
    }

    /// An IPv4 address list.
    pub fn addresses(&mut self, a: &[Ipv4Addr]) -> &mut Self {
        let mut v = 1u16.to_be_bytes().to_vec();
        for x in a {
            v.extend_from_slice(&x.octets());
        }
        self.tlv(tlv::ADDRESS_LIST, &v)
    }

    /// A FEC TLV of `fecs`.
    pub fn fecs(&mut self, fecs: &[Fec]) -> &mut Self {
        let mut v = Vec::new();
        for f in fecs {
            match *f {
                Fec::Wildcard => v.push(0x01),
                Fec::Prefix(a, len) => {
                    v.push(0x02);
                    let (family, bytes) = match a {
                        IpAddr::V4(x) => (1u16, x.octets().to_vec()),
                        IpAddr::V6(x) => (2u16, x.octets().to_vec()),
                    };
                    v.extend_from_slice(&family.to_be_bytes());
                    v.push(len);
                    let n = (len as usize).div_ceil(8).min(bytes.len());
                    v.extend_from_slice(&bytes[..n]);
                }
                Fec::PwId {
                    control_word,
                    pw_type,
                    group,
                    pw_id,
                    mtu,
                    vlan,
                } => {
                    v.push(0x80);
                    v.extend_from_slice(&(u16::from(control_word) << 15 | pw_type).to_be_bytes());
                    let mut info = Vec::new();
                    if let Some(id) = pw_id {
                        info.extend_from_slice(&id.to_be_bytes());
                        if let Some(m) = mtu {
                            info.extend_from_slice(&[0x01, 4]);
                            info.extend_from_slice(&m.to_be_bytes());
                        }
                        if let Some(x) = vlan {
                            info.extend_from_slice(&[0x06, 4]);
                            info.extend_from_slice(&x.to_be_bytes());
                        }
                    }
                    v.push(info.len() as u8);
                    v.extend_from_slice(&group.to_be_bytes());
                    v.extend_from_slice(&info);
                }
                Fec::TypedWildcard { fec_type, family } => {
                    v.extend_from_slice(&[0x05, fec_type]);
                    match family {
                        Some(f) => {
                            v.push(2);
                            v.extend_from_slice(&f.to_be_bytes());
                        }
                        None => v.push(0),
                    }
                }
            }
        }
        self.tlv(tlv::FEC, &v)
    }

    pub fn label(&mut self, label: u32) -> &mut Self {
        self.tlv(tlv::GENERIC_LABEL, &label.to_be_bytes())
    }

    /// The PW Status TLV, with the U bit set as RFC 4447 5.4.3 has it (a speaker that does
    /// not know it ignores it).
    pub fn pw_status(&mut self, s: u32) -> &mut Self {
        self.buf
            .extend_from_slice(&(0x8000 | tlv::PW_STATUS).to_be_bytes());
        self.buf.extend_from_slice(&4u16.to_be_bytes());
        self.buf.extend_from_slice(&s.to_be_bytes());
        self
    }

    /// A Status TLV for a notification.
    pub fn status(&mut self, s: &Status) -> &mut Self {
        let c = u32::from(s.fatal) << 31 | u32::from(s.forward) << 30 | (s.code & 0x3fff_ffff);
        let mut v = c.to_be_bytes().to_vec();
        v.extend_from_slice(&s.msg_id.to_be_bytes());
        v.extend_from_slice(&s.msg_type.to_be_bytes());
        self.tlv(tlv::STATUS, &v)
    }
}

/// Writes `m` as message `id` (nothing for [`Msg::Ignored`]).
pub fn encode(b: &mut PduBuilder, id: u32, m: &Msg) {
    match m {
        Msg::Notification(st) => b.message(msg::NOTIFICATION, id, |t| {
            t.status(st);
        }),
        Msg::Hello(h) => b.message(msg::HELLO, id, |t| {
            t.hello(h);
        }),
        Msg::Init(i) => b.message(msg::INITIALIZATION, id, |t| {
            t.init(i);
        }),
        Msg::KeepAlive => b.message(msg::KEEPALIVE, id, |_| {}),
        Msg::Address(a) => b.message(msg::ADDRESS, id, |t| {
            t.addresses(a);
        }),
        Msg::AddressWithdraw(a) => b.message(msg::ADDRESS_WITHDRAW, id, |t| {
            t.addresses(a);
        }),
        Msg::LabelMapping {
            fecs,
            label,
            pw_status,
        } => b.message(msg::LABEL_MAPPING, id, |t| {
            t.fecs(fecs).label(*label);
            if let Some(s) = pw_status {
                t.pw_status(*s);
            }
        }),
        Msg::LabelRequest(fecs) => b.message(msg::LABEL_REQUEST, id, |t| {
            t.fecs(fecs);
        }),
        Msg::PwStatus { fecs, status: pw } => b.message(msg::NOTIFICATION, id, |t| {
            t.status(&Status {
                fatal: false,
                forward: false,
                code: status::PW_STATUS,
                msg_id: 0,
                msg_type: 0,
            })
            .pw_status(*pw)
            .fecs(fecs);
        }),
        Msg::LabelWithdraw { fecs, label } | Msg::LabelRelease { fecs, label } => {
            let ty = if matches!(m, Msg::LabelWithdraw { .. }) {
                msg::LABEL_WITHDRAW
            } else {
                msg::LABEL_RELEASE
            };
            b.message(ty, id, |t| {
                t.fecs(fecs);
                if let Some(l) = label {
                    t.label(*l);
                }
            })
        }
        Msg::Ignored(_) => b,
    };
}

/// Reads every message of a whole PDU (the fuzz target's and the tests' view): the header and
/// each message decoded, or the first error.
pub fn decode_pdu(b: &[u8]) -> Result<(Header, Vec<Msg>), Error> {
    let (h, body) = parse_pdu(b, usize::MAX)?.ok_or(Error::pdu(status::BAD_PDU_LENGTH))?;
    let mut out = Vec::new();
    for m in messages(body) {
        out.push(decode(&m?)?);
    }
    Ok((h, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: Ipv4Addr = Ipv4Addr::new(10, 255, 0, 1);

    #[test]
    fn every_message_round_trips() {
        let pw = Fec::PwId {
            control_word: true,
            pw_type: PW_TYPE_ETHERNET_VLAN,
            group: 0,
            pw_id: Some(100),
            mtu: Some(1500),
            vlan: None,
        };
        let hello = Hello {
            hold: 45,
            targeted: true,
            request_targeted: true,
            transport: Some(ME),
            config_seq: Some(7),
        };
        let init = Init {
            keepalive: 180,
            on_demand: false,
            loop_detection: false,
            path_vector_limit: 0,
            max_pdu: 4096,
            receiver: (Ipv4Addr::new(10, 255, 0, 2), 0),
        };
        let st = Status {
            fatal: true,
            forward: false,
            code: status::SHUTDOWN,
            msg_id: 9,
            msg_type: msg::LABEL_MAPPING,
        };
        let mut b = PduBuilder::new(ME, 0);
        b.message(msg::HELLO, 1, |t| {
            t.hello(&hello);
        })
        .message(msg::INITIALIZATION, 2, |t| {
            t.init(&init);
        })
        .message(msg::KEEPALIVE, 3, |_| {})
        .message(msg::ADDRESS, 4, |t| {
            t.addresses(&[ME, Ipv4Addr::new(192, 0, 2, 1)]);
        })
        .message(msg::LABEL_MAPPING, 5, |t| {
            t.fecs(&[
                Fec::Prefix("10.1.0.0".parse().unwrap(), 16),
                Fec::Prefix("2001:db8::".parse().unwrap(), 33),
            ])
            .label(16);
        })
        .message(msg::LABEL_MAPPING, 6, |t| {
            t.fecs(std::slice::from_ref(&pw)).label(1000).pw_status(0);
        })
        .message(msg::LABEL_WITHDRAW, 7, |t| {
            t.fecs(&[Fec::Wildcard]);
        })
        .message(msg::LABEL_RELEASE, 8, |t| {
            t.fecs(&[Fec::TypedWildcard {
                fec_type: 0x80,
                family: None,
            }])
            .label(17);
        })
        .message(msg::NOTIFICATION, 9, |t| {
            t.status(&st);
        });
        encode(
            &mut b,
            10,
            &Msg::PwStatus {
                fecs: vec![pw.clone()],
                status: 0x06,
            },
        );
        let bytes = b.finish();
        let (h, msgs) = decode_pdu(&bytes).unwrap();
        assert_eq!((h.lsr_id, h.label_space, h.len), (ME, 0, bytes.len()));
        assert_eq!(
            msgs,
            vec![
                Msg::Hello(hello),
                Msg::Init(init),
                Msg::KeepAlive,
                Msg::Address(vec![ME, Ipv4Addr::new(192, 0, 2, 1)]),
                Msg::LabelMapping {
                    fecs: vec![
                        Fec::Prefix("10.1.0.0".parse().unwrap(), 16),
                        Fec::Prefix("2001:db8::".parse().unwrap(), 33),
                    ],
                    label: 16,
                    pw_status: None
                },
                Msg::LabelMapping {
                    fecs: vec![pw.clone()],
                    label: 1000,
                    pw_status: Some(0)
                },
                Msg::LabelWithdraw {
                    fecs: vec![Fec::Wildcard],
                    label: None
                },
                Msg::LabelRelease {
                    fecs: vec![Fec::TypedWildcard {
                        fec_type: 0x80,
                        family: None
                    }],
                    label: Some(17)
                },
                Msg::Notification(st),
                Msg::PwStatus {
                    fecs: vec![pw],
                    status: 0x06
                },
            ]
        );
        // The PW Status TLV goes with its U bit set (RFC 4447 5.4.3).
        let at = bytes
            .windows(2)
            .position(|w| w == [0x89, 0x6a])
            .expect("a PW Status TLV with the U bit");
        assert_eq!(&bytes[at + 2..at + 4], &[0, 4]);
    }

    /// A PWid FEC written out byte by byte as RFC 4447 5.2 draws it (type 5, control word,
    /// group 0, PW id 100, the MTU sub-TLV 1500).
    #[test]
    fn reads_a_pwid_mapping_as_frr_sends_it() {
        let fec = [
            0x80, 0x80, 0x05, 0x08, 0, 0, 0, 0, 0, 0, 0, 100, 0x01, 0x04, 0x05, 0xdc,
        ];
        assert_eq!(
            fec_elements(&fec).unwrap(),
            vec![Fec::PwId {
                control_word: true,
                pw_type: PW_TYPE_ETHERNET,
                group: 0,
                pw_id: Some(100),
                mtu: Some(1500),
                vlan: None
            }]
        );
    }

    #[test]
    fn malformed_input_names_its_status() {
        // Version 2, a short length, a length beyond the maximum, a partial PDU.
        assert_eq!(
            parse_pdu(&[0, 2, 0, 6, 1, 1, 1, 1, 0, 0], 4096)
                .unwrap_err()
                .code,
            status::BAD_VERSION
        );
        assert_eq!(
            parse_pdu(&[0, 1, 0, 2, 1, 1, 1, 1, 0, 0], 4096)
                .unwrap_err()
                .code,
            status::BAD_PDU_LENGTH
        );
        assert_eq!(
            parse_pdu(&[0, 1, 0xff, 0xff], 4096).unwrap_err().code,
            status::BAD_PDU_LENGTH
        );
        assert_eq!(parse_pdu(&[0, 1, 0, 20, 1], 4096).unwrap(), None);
        let pdu = |f: &dyn Fn(&mut PduBuilder)| {
            let mut b = PduBuilder::new(ME, 0);
            f(&mut b);
            b.finish()
        };
        // A mapping without a label; an unknown TLV without the U bit; with it; an unknown
        // message with and without U; a prefix FEC of family 7.
        let e = decode_pdu(&pdu(&|b| {
            b.message(msg::LABEL_MAPPING, 11, |t| {
                t.fecs(&[Fec::Wildcard]);
            });
        }))
        .unwrap_err();
        assert_eq!(
            (e.code, e.msg_id, e.msg_type),
            (status::MISSING_PARAMETERS, 11, msg::LABEL_MAPPING)
        );
        let e = decode_pdu(&pdu(&|b| {
            b.message(msg::KEEPALIVE, 12, |t| {
                t.tlv(0x3333, &[1]);
            });
        }))
        .unwrap_err();
        assert_eq!(e.code, status::UNKNOWN_TLV);
        let ok = pdu(&|b| {
            b.message(msg::KEEPALIVE, 13, |t| {
                t.tlv(0x3333, &[1]);
            });
        });
        let mut ok = ok;
        ok[HEADER_LEN + 8] |= 0x80;
        assert_eq!(decode_pdu(&ok).unwrap().1, vec![Msg::KeepAlive]);
        let mut unknown = pdu(&|b| {
            b.message(0x0777, 14, |_| {});
        });
        assert_eq!(
            decode_pdu(&unknown).unwrap_err().code,
            status::UNKNOWN_MESSAGE
        );
        unknown[HEADER_LEN] |= 0x80;
        assert_eq!(decode_pdu(&unknown).unwrap().1, vec![Msg::Ignored(0x0777)]);
        let e = decode_pdu(&pdu(&|b| {
            b.message(msg::LABEL_REQUEST, 15, |t| {
                t.tlv(tlv::FEC, &[0x02, 0, 7, 8, 10]);
            });
        }))
        .unwrap_err();
        assert_eq!(e.code, status::UNSUPPORTED_ADDRESS_FAMILY);
        // A message longer than its PDU.
        let mut long = pdu(&|b| {
            b.message(msg::KEEPALIVE, 16, |_| {});
        });
        long[HEADER_LEN + 3] = 40;
        assert_eq!(
            decode_pdu(&long).unwrap_err().code,
            status::BAD_MESSAGE_LENGTH
        );
        assert!(status::fatal(status::BAD_MESSAGE_LENGTH));
        assert!(!status::fatal(status::UNKNOWN_TLV));
    }
}
