//! AgentX (RFC 2741): the protocol a subagent speaks to an SNMP master agent (net-snmp's snmpd)
//! to send notifications and to serve MIB objects. Here: Open, Notify and Close PDUs written,
//! Response PDUs read (the event manager's SNMP action); [`request`]: Register written,
//! Get/GetNext/GetBulk read and answered (the IF-MIB subagent).
//!
//! Every PDU is a 20-byte header (version 1, type, flags, session, transaction and packet ids,
//! payload length) and its payload. We always write network byte order (flag bit 4) and read
//! either order, as the RFC requires of a receiver.

pub mod request;

/// PDU types (RFC 2741 6.1).
pub const OPEN: u8 = 1;
pub const CLOSE: u8 = 2;
pub const NOTIFY: u8 = 12;
pub const RESPONSE: u8 = 18;

/// Header flag: the PDU's integers are big-endian.
pub const NETWORK_BYTE_ORDER: u8 = 0x10;
pub const HEADER_LEN: usize = 20;

/// Close reasons (6.2.2).
pub const REASON_SHUTDOWN: u8 = 5;

/// SNMPv2 varbind value types (5.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Integer(i32),
    OctetString(Vec<u8>),
    ObjectId(Vec<u32>),
    Counter32(u32),
    Gauge32(u32),
    TimeTicks(u32),
    Counter64(u64),
}

impl Value {
    pub(crate) fn tag(&self) -> u16 {
        match self {
            Value::Integer(_) => 2,
            Value::OctetString(_) => 4,
            Value::ObjectId(_) => 6,
            Value::Counter32(_) => 65,
            Value::Gauge32(_) => 66,
            Value::TimeTicks(_) => 67,
            Value::Counter64(_) => 70,
        }
    }
}

/// `1.3.6.1.6.3.1.1.4.1.0`, which a notification's second varbind names.
pub const SNMP_TRAP_OID: &[u32] = &[1, 3, 6, 1, 6, 3, 1, 1, 4, 1, 0];
/// `1.3.6.1.2.1.1.3.0`, its first.
pub const SYS_UP_TIME: &[u32] = &[1, 3, 6, 1, 2, 1, 1, 3, 0];

/// Parses `1.3.6.1.4.1.8072` (a leading dot allowed).
pub fn parse_oid(s: &str) -> Option<Vec<u32>> {
    let s = s.strip_prefix('.').unwrap_or(s);
    let v: Option<Vec<u32>> = s.split('.').map(|x| x.parse().ok()).collect();
    v.filter(|v| v.len() >= 2 && v.len() <= 128)
}

pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// An OID, with the `1.3.6.1.x` prefix compressed where it applies (5.1).
pub(crate) fn put_oid(out: &mut Vec<u8>, oid: &[u32], include: bool) {
    let (prefix, rest) = match oid {
        [1, 3, 6, 1, x, rest @ ..] if *x > 0 && *x < 256 => (*x as u8, rest),
        _ => (0, oid),
    };
    out.push(rest.len() as u8);
    out.push(prefix);
    out.push(include as u8);
    out.push(0);
    for s in rest {
        put_u32(out, *s);
    }
}

pub(crate) fn put_octets(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len() as u32);
    out.extend_from_slice(b);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

pub(crate) fn header(out: &mut Vec<u8>, ty: u8, session: u32, transaction: u32, packet: u32) {
    out.extend_from_slice(&[1, ty, NETWORK_BYTE_ORDER, 0]);
    put_u32(out, session);
    put_u32(out, transaction);
    put_u32(out, packet);
    put_u32(out, 0); // payload length, set by `finish`
}

pub(crate) fn finish(mut out: Vec<u8>) -> Vec<u8> {
    let len = (out.len() - HEADER_LEN) as u32;
    out[16..20].copy_from_slice(&len.to_be_bytes());
    out
}

/// An Open-PDU: `timeout` seconds (0: the master's default), the subagent's id and name.
pub fn open(packet: u32, timeout: u8, id: &[u32], descr: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    header(&mut out, OPEN, 0, 0, packet);
    out.extend_from_slice(&[timeout, 0, 0, 0]);
    put_oid(&mut out, id, false);
    put_octets(&mut out, descr.as_bytes());
    finish(out)
}

/// A Notify-PDU carrying `varbinds` (which must start with sysUpTime.0 and snmpTrapOID.0,
/// see [`notification`]).
pub fn notify(
    session: u32,
    transaction: u32,
    packet: u32,
    varbinds: &[(Vec<u32>, Value)],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    header(&mut out, NOTIFY, session, transaction, packet);
    for (name, v) in varbinds {
        put_u16(&mut out, v.tag());
        put_u16(&mut out, 0);
        put_oid(&mut out, name, false);
        put_value(&mut out, v);
    }
    finish(out)
}

/// A varbind's data (5.4), in network byte order.
pub(crate) fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Integer(i) => put_u32(out, *i as u32),
        Value::OctetString(b) => put_octets(out, b),
        Value::ObjectId(o) => put_oid(out, o, false),
        Value::Counter32(x) | Value::Gauge32(x) | Value::TimeTicks(x) => put_u32(out, *x),
        Value::Counter64(x) => out.extend_from_slice(&x.to_be_bytes()),
    }
}

/// The varbinds of a notification: sysUpTime.0, snmpTrapOID.0 = `trap`, then `objects`.
pub fn notification(
    uptime_cs: u32,
    trap: &[u32],
    objects: Vec<(Vec<u32>, Value)>,
) -> Vec<(Vec<u32>, Value)> {
    let mut v = vec![
        (SYS_UP_TIME.to_vec(), Value::TimeTicks(uptime_cs)),
        (SNMP_TRAP_OID.to_vec(), Value::ObjectId(trap.to_vec())),
    ];
    v.extend(objects);
    v
}

/// A Close-PDU.
pub fn close(session: u32, packet: u32, reason: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    header(&mut out, CLOSE, session, 0, packet);
    out.extend_from_slice(&[reason, 0, 0, 0]);
    finish(out)
}

/// A PDU's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub ty: u8,
    pub flags: u8,
    pub session: u32,
    pub transaction: u32,
    pub packet: u32,
    pub payload_len: u32,
}

/// The header at the start of `b`, or why not (not version 1, too short, a payload length
/// that is not a multiple of 4 or over `max`).
pub fn parse_header(b: &[u8], max: u32) -> Result<Header, &'static str> {
    if b.len() < HEADER_LEN {
        return Err("short header");
    }
    if b[0] != 1 {
        return Err("not AgentX version 1");
    }
    let flags = b[2];
    let word = |i: usize| {
        let w = [b[i], b[i + 1], b[i + 2], b[i + 3]];
        if flags & NETWORK_BYTE_ORDER != 0 {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        }
    };
    let h = Header {
        ty: b[1],
        flags,
        session: word(4),
        transaction: word(8),
        packet: word(12),
        payload_len: word(16),
    };
    if !h.payload_len.is_multiple_of(4) {
        return Err("payload length not a multiple of 4");
    }
    if h.payload_len > max {
        return Err("payload too long");
    }
    Ok(h)
}

/// A Response-PDU's payload: `(sysUpTime, error, index)`; what follows (varbinds) is ignored.
pub fn parse_response(h: &Header, payload: &[u8]) -> Result<(u32, u16, u16), &'static str> {
    if h.ty != RESPONSE {
        return Err("not a Response-PDU");
    }
    if payload.len() < 8 {
        return Err("short Response-PDU");
    }
    let be = h.flags & NETWORK_BYTE_ORDER != 0;
    let u32_at = |i: usize| {
        let w = [payload[i], payload[i + 1], payload[i + 2], payload[i + 3]];
        if be {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        }
    };
    let u16_at = |i: usize| {
        let w = [payload[i], payload[i + 1]];
        if be {
            u16::from_be_bytes(w)
        } else {
            u16::from_le_bytes(w)
        }
    };
    Ok((u32_at(0), u16_at(4), u16_at(6)))
}

/// AgentX error codes a master may answer with (6.2.16), named for logs.
pub fn error_name(e: u16) -> &'static str {
    match e {
        0 => "noAgentXError",
        256 => "openFailed",
        257 => "notOpen",
        258 => "indexWrongType",
        259 => "indexAlreadyAllocated",
        260 => "indexNoneAvailable",
        261 => "indexNotAllocated",
        262 => "unsupportedContext",
        263 => "duplicateRegistration",
        264 => "unknownRegistration",
        265 => "unknownAgentCaps",
        266 => "parseError",
        267 => "requestDenied",
        268 => "processingError",
        _ => "an error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_pdu_is_laid_out_as_rfc_2741_says() {
        let p = open(7, 5, &[1, 3, 6, 1, 4, 1, 8072, 9999], "linerate");
        assert_eq!(&p[..4], &[1, OPEN, NETWORK_BYTE_ORDER, 0]);
        assert_eq!(&p[12..16], &7u32.to_be_bytes());
        let h = parse_header(&p, 1 << 16).unwrap();
        assert_eq!(h.payload_len as usize, p.len() - HEADER_LEN);
        // timeout, then the OID compressed under prefix 4 (1.3.6.1.4): 3 subids 1.8072.9999.
        assert_eq!(&p[20..28], &[5, 0, 0, 0, 3, 4, 0, 0]);
        assert_eq!(&p[28..32], &1u32.to_be_bytes());
        assert_eq!(&p[40..44], &8u32.to_be_bytes(), "descr length");
        assert_eq!(&p[44..52], b"linerate");
    }

    #[test]
    fn a_notify_carries_uptime_trap_oid_and_objects() {
        let vb = notification(
            1234,
            &[1, 3, 6, 1, 6, 3, 1, 1, 5, 3],
            vec![(
                vec![1, 3, 6, 1, 4, 1, 8072, 9999, 1],
                Value::OctetString(b"p1".to_vec()),
            )],
        );
        let p = notify(9, 1, 2, &vb);
        let h = parse_header(&p, 1 << 16).unwrap();
        assert_eq!(
            (h.ty, h.session, h.transaction, h.packet),
            (NOTIFY, 9, 1, 2)
        );
        // First varbind: TimeTicks (67) sysUpTime.0 under prefix 2 (1.3.6.1.2): 1.1.3.0.
        assert_eq!(&p[20..24], &[0, 67, 0, 0]);
        assert_eq!(&p[24..28], &[4, 2, 0, 0]);
        assert_eq!(&p[44..48], &1234u32.to_be_bytes());
        assert_eq!(p.len() % 4, 0);
        // The string padded to 4.
        assert!(p.ends_with(&[2, 0, 0, 0, b'p', b'1', 0, 0][2..]) || p.ends_with(b"p1\0\0"));
    }

    #[test]
    fn responses_are_read_in_either_byte_order() {
        let mut be = vec![1, RESPONSE, NETWORK_BYTE_ORDER, 0];
        for w in [3u32, 0, 1, 8] {
            be.extend_from_slice(&w.to_be_bytes());
        }
        be.extend_from_slice(&100u32.to_be_bytes());
        be.extend_from_slice(&[1, 1, 0, 0]);
        let h = parse_header(&be, 64).unwrap();
        assert_eq!(h.session, 3);
        assert_eq!(parse_response(&h, &be[20..]).unwrap(), (100, 257, 0));
        let mut le = vec![1, RESPONSE, 0, 0];
        for w in [3u32, 0, 1, 8] {
            le.extend_from_slice(&w.to_le_bytes());
        }
        le.extend_from_slice(&100u32.to_le_bytes());
        le.extend_from_slice(&[0, 0, 0, 0]);
        let h = parse_header(&le, 64).unwrap();
        assert_eq!(parse_response(&h, &le[20..]).unwrap(), (100, 0, 0));
    }

    #[test]
    fn bad_headers_are_refused() {
        assert!(parse_header(&[1; 10], 64).is_err());
        let mut b = close(1, 1, REASON_SHUTDOWN);
        b[0] = 2;
        assert!(parse_header(&b, 64).is_err());
        let mut b = close(1, 1, REASON_SHUTDOWN);
        b[19] = 3;
        assert!(parse_header(&b, 64).is_err());
        assert_eq!(parse_oid(".1.3.6.1.4.1"), Some(vec![1, 3, 6, 1, 4, 1]));
        assert_eq!(parse_oid("1.x"), None);
        assert_eq!(parse_oid("1"), None);
    }
}
