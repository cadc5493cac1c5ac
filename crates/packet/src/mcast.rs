//! Group membership: IGMP (v1 RFC 1112, v2 RFC 2236, v3 RFC 3376) and MLD (v1 RFC 2710, v2
//! RFC 3810), the messages a snooping bridge reads and a tester or querier sends.
//!
//! Every version is read into one shape, [`Message`]: a query, or a report of group records in
//! IGMPv3/MLDv2 terms. An IGMPv1/v2 or MLDv1 report is the record "change to exclude {}" (join
//! the group from any source) and a leave or done is "change to include {}" (leave it), as
//! RFC 3376 7.3.2 maps them. These are slow-path parsers (membership messages are rare next to
//! the traffic they steer): they check lengths, the message checksum and, for MLD, that the
//! source is link-local and the hop limit 1 (RFC 3810 5), and say `Malformed` for anything else.
//!
//! [`classify_v4`] and [`classify_v6`] are the fast path's part: one look at a multicast packet
//! to tell membership control, link-local traffic (always flooded) and data to a group apart.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::{checksum, ipv4, ipv6, Error, Result};

/// IPv4 protocol number of IGMP and PIM; IPv6 next header of ICMPv6 and PIM.
pub const PROTO_IGMP: u8 = 2;
pub const PROTO_PIM: u8 = 103;
pub const PROTO_ICMPV6: u8 = 58;

const IGMP_QUERY: u8 = 0x11;
const IGMP_V1_REPORT: u8 = 0x12;
const IGMP_V2_REPORT: u8 = 0x16;
const IGMP_LEAVE: u8 = 0x17;
const IGMP_V3_REPORT: u8 = 0x22;
const MLD_QUERY: u8 = 130;
const MLD_V1_REPORT: u8 = 131;
const MLD_DONE: u8 = 132;
const MLD_V2_REPORT: u8 = 143;

/// A group record's type (RFC 3376 4.2.12, RFC 3810 5.2.12).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecordKind {
    IsInclude = 1,
    IsExclude = 2,
    ToInclude = 3,
    ToExclude = 4,
    Allow = 5,
    Block = 6,
}

impl RecordKind {
    fn from_u8(v: u8) -> Option<RecordKind> {
        Some(match v {
            1 => RecordKind::IsInclude,
            2 => RecordKind::IsExclude,
            3 => RecordKind::ToInclude,
            4 => RecordKind::ToExclude,
            5 => RecordKind::Allow,
            6 => RecordKind::Block,
            _ => return None,
        })
    }
}

/// One group record: what a host wants of `group`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub kind: RecordKind,
    pub group: IpAddr,
    pub sources: Vec<IpAddr>,
}

impl Record {
    /// Join `group` from any source (an IGMPv2 report).
    pub fn join(group: IpAddr) -> Record {
        Record {
            kind: RecordKind::ToExclude,
            group,
            sources: Vec::new(),
        }
    }

    /// Leave `group` (an IGMPv2 leave).
    pub fn leave(group: IpAddr) -> Record {
        Record {
            kind: RecordKind::ToInclude,
            group,
            sources: Vec::new(),
        }
    }
}

/// A membership message, whatever its version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A query: general (`group` None) or group-specific; `version` 1..=3 (IGMP) or 1..=2
    /// (MLD), as told by its length (RFC 3376 7.1); `max_resp_ms` is the answer window.
    Query {
        version: u8,
        group: Option<IpAddr>,
        max_resp_ms: u32,
        sources: Vec<IpAddr>,
    },
    /// A report (any version) or a leave/done, as group records.
    Report { version: u8, records: Vec<Record> },
}

/// What a multicast packet is to a snooping bridge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// IGMP or MLD: read by the snooper.
    Membership,
    /// PIM (a router is on this port).
    Pim,
    /// To a link-local group (224.0.0.0/24, ff02::/16 and narrower scopes): every member gets it.
    LinkLocal,
    /// Data to `group` from `source` (IPv4 addresses in the low 32 bits).
    Data { group: u128, source: u128 },
    /// Too short or not the version it claims: switched as unknown multicast.
    Other,
}

/// Classifies an IPv4 packet to a multicast MAC (`ip` starts at its header).
#[inline]
pub fn classify_v4(ip: &[u8]) -> Kind {
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return Kind::Other;
    }
    let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
    if dst >> 28 != 0xe {
        return Kind::Other;
    }
    match ip[9] {
        PROTO_IGMP => Kind::Membership,
        PROTO_PIM => Kind::Pim,
        _ if dst >> 8 == 0x00e0_0000 => Kind::LinkLocal,
        _ => Kind::Data {
            group: u128::from(dst),
            source: u128::from(u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]])),
        },
    }
}

/// Classifies an IPv6 packet to a multicast MAC (`ip` starts at its header). MLD travels with a
/// Hop-by-Hop header (the router alert), so a packet with one is walked to its upper layer.
#[inline]
pub fn classify_v6(ip: &[u8]) -> Kind {
    if ip.len() < 40 || ip[0] >> 4 != 6 || ip[24] != 0xff {
        return Kind::Other;
    }
    let upper = match ip[6] {
        ipv6::HOP_BY_HOP => match ipv6::Packet::new_checked(ip)
            .ok()
            .and_then(|p| p.transport())
        {
            Some((nh, off, false)) => Some((nh, off)),
            _ => return Kind::Other,
        },
        nh => Some((nh, 40)),
    };
    match upper {
        Some((PROTO_ICMPV6, off)) if matches!(ip.get(off), Some(130..=132 | 143)) => {
            Kind::Membership
        }
        Some((PROTO_PIM, _)) => Kind::Pim,
        // Scope 0-2: reserved, interface-local, link-local.
        _ if ip[25] & 0x0f <= 2 => Kind::LinkLocal,
        _ => Kind::Data {
            group: u128::from_be_bytes(ip[24..40].try_into().expect("40 bytes checked")),
            source: u128::from_be_bytes(ip[8..24].try_into().expect("40 bytes checked")),
        },
    }
}

/// Reads an IGMP message from an IPv4 packet (`ip` starts at its header). Returns the message
/// and the sender's address.
pub fn parse_v4(ip: &[u8]) -> Result<(Message, Ipv4Addr)> {
    let p = ipv4::Packet::new_checked(ip)?;
    if p.protocol_raw() != PROTO_IGMP || p.is_fragment() {
        return Err(Error::Malformed);
    }
    let src = Ipv4Addr::from(p.src_addr());
    let m = p.payload();
    if m.len() < 8 {
        return Err(Error::Truncated);
    }
    if checksum::fold(checksum::sum(m)) != 0 {
        return Err(Error::Malformed);
    }
    let v4 = |at: usize| IpAddr::V4(Ipv4Addr::new(m[at], m[at + 1], m[at + 2], m[at + 3]));
    let group_at = |at: usize| -> Result<IpAddr> {
        let g = v4(at);
        if g.is_multicast() {
            Ok(g)
        } else {
            Err(Error::Malformed)
        }
    };
    let msg = match m[0] {
        IGMP_QUERY => {
            let group = (m[4..8] != [0; 4]).then(|| group_at(4)).transpose()?;
            if m.len() >= 12 {
                // IGMPv3 (RFC 3376 4.1): the max response code's exponential form, sources.
                let n = usize::from(crate::be16(m, 10));
                if m.len() < 12 + 4 * n {
                    return Err(Error::Truncated);
                }
                Message::Query {
                    version: 3,
                    group,
                    max_resp_ms: code_v3(m[1]) * 100,
                    sources: (0..n).map(|i| v4(12 + 4 * i)).collect(),
                }
            } else {
                Message::Query {
                    version: if m[1] == 0 { 1 } else { 2 },
                    group,
                    max_resp_ms: u32::from(m[1]) * 100,
                    sources: Vec::new(),
                }
            }
        }
        IGMP_V1_REPORT | IGMP_V2_REPORT => Message::Report {
            version: if m[0] == IGMP_V1_REPORT { 1 } else { 2 },
            records: vec![Record::join(group_at(4)?)],
        },
        IGMP_LEAVE => Message::Report {
            version: 2,
            records: vec![Record::leave(group_at(4)?)],
        },
        IGMP_V3_REPORT => Message::Report {
            version: 3,
            records: records(m, 6, 4, |b| {
                IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
            })?,
        },
        _ => return Err(Error::Malformed),
    };
    Ok((msg, src))
}

/// Reads an MLD message from an IPv6 packet (`ip` starts at its header). Returns the message and
/// the sender's address.
pub fn parse_v6(ip: &[u8]) -> Result<(Message, Ipv6Addr)> {
    let p = ipv6::Packet::new_checked(ip)?;
    let (nh, off, frag) = p.transport().ok_or(Error::Truncated)?;
    if nh != PROTO_ICMPV6 || frag {
        return Err(Error::Malformed);
    }
    let src = Ipv6Addr::from(p.src_addr());
    // RFC 3810 5: link-local source (or unspecified, for a report before an address is
    // configured), hop limit 1.
    let link_local = src.segments()[0] & 0xffc0 == 0xfe80 || src.is_unspecified();
    if !link_local || p.hop_limit() != 1 {
        return Err(Error::Malformed);
    }
    let end = 40 + usize::from(p.payload_len());
    let m = ip.get(off..end).ok_or(Error::Truncated)?;
    // A v2 report of no records is 8 bytes; queries and v1 messages carry a group (24).
    if m.len() < 8 || (m[0] != MLD_V2_REPORT && m.len() < 24) {
        return Err(Error::Truncated);
    }
    if p.upper_checksum(PROTO_ICMPV6, m) != 0 {
        return Err(Error::Malformed);
    }
    let v6 = |b: &[u8]| IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&b[..16]).unwrap()));
    let group_at = |at: usize| -> Result<IpAddr> {
        let g = v6(&m[at..at + 16]);
        if g.is_multicast() {
            Ok(g)
        } else {
            Err(Error::Malformed)
        }
    };
    let msg = match m[0] {
        MLD_QUERY => {
            let group = (m[8..24] != [0; 16]).then(|| group_at(8)).transpose()?;
            let code = crate::be16(m, 4);
            if m.len() >= 28 {
                let n = usize::from(crate::be16(m, 26));
                if m.len() < 28 + 16 * n {
                    return Err(Error::Truncated);
                }
                Message::Query {
                    version: 2,
                    group,
                    max_resp_ms: code_v2_mld(code),
                    sources: (0..n).map(|i| v6(&m[28 + 16 * i..])).collect(),
                }
            } else {
                Message::Query {
                    version: 1,
                    group,
                    max_resp_ms: u32::from(code),
                    sources: Vec::new(),
                }
            }
        }
        MLD_V1_REPORT => Message::Report {
            version: 1,
            records: vec![Record::join(group_at(8)?)],
        },
        MLD_DONE => Message::Report {
            version: 1,
            records: vec![Record::leave(group_at(8)?)],
        },
        MLD_V2_REPORT => Message::Report {
            version: 2,
            records: records(m, 6, 16, v6)?,
        },
        _ => return Err(Error::Malformed),
    };
    Ok((msg, src))
}

/// The group records of an IGMPv3 or MLDv2 report `m`: their count at `count_at`, the first
/// right after it, addresses `alen` bytes long.
fn records(
    m: &[u8],
    count_at: usize,
    alen: usize,
    addr: impl Fn(&[u8]) -> IpAddr,
) -> Result<Vec<Record>> {
    let n = usize::from(crate::be16(m, count_at));
    let mut at = count_at + 2;
    let mut out = Vec::with_capacity(n.min(m.len() / (4 + alen)));
    for _ in 0..n {
        let hdr = m.get(at..at + 4).ok_or(Error::Truncated)?;
        let kind = RecordKind::from_u8(hdr[0]).ok_or(Error::Malformed)?;
        let aux = usize::from(hdr[1]) * 4;
        let ns = usize::from(u16::from_be_bytes([hdr[2], hdr[3]]));
        let len = 4 + alen + ns * alen + aux;
        let rec = m.get(at..at + len).ok_or(Error::Truncated)?;
        let group = addr(&rec[4..]);
        if !group.is_multicast() {
            return Err(Error::Malformed);
        }
        let sources = (0..ns).map(|i| addr(&rec[4 + alen * (i + 1)..])).collect();
        out.push(Record {
            kind,
            group,
            sources,
        });
        at += len;
    }
    Ok(out)
}

/// IGMPv3's max response code (RFC 3376 4.1.1): under 128 a value, else a floating point one.
fn code_v3(c: u8) -> u32 {
    if c < 128 {
        u32::from(c)
    } else {
        (u32::from(c & 0x0f) | 0x10) << ((c >> 4 & 7) + 3)
    }
}

/// MLDv2's maximum response code (RFC 3810 5.1.3), in milliseconds.
fn code_v2_mld(c: u16) -> u32 {
    if c < 32768 {
        u32::from(c)
    } else {
        (u32::from(c & 0x0fff) | 0x1000) << ((c >> 12 & 7) + 3)
    }
}

/// A PIM message's header as a snooping switch needs it (RFC 7761 4.9): the type, and for a
/// Hello its holdtime (option 1; 105 s when absent, RFC 7761 4.11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pim {
    pub kind: u8,
    pub hello_holdtime_s: Option<u16>,
}

/// PIM message types (RFC 7761 4.9).
pub const PIM_HELLO: u8 = 0;
const PIM_REGISTER: u8 = 1;

/// Checks a PIMv2 message (`m`, after its IP header) and reads its header. `pseudo` is the
/// IPv6 pseudo-header sum (RFC 7761 4.9: PIM over IPv6 sums it; over IPv4 it does not). A
/// Register's checksum covers its 8-byte header only; every other type's, the whole message.
/// A Hello's options must tile its body exactly.
pub fn parse_pim(m: &[u8], pseudo: u32) -> Result<Pim> {
    if m.len() < 4 {
        return Err(Error::Truncated);
    }
    if m[0] >> 4 != 2 {
        return Err(Error::Malformed);
    }
    let kind = m[0] & 0x0f;
    let covered = if kind == PIM_REGISTER {
        m.get(..8).ok_or(Error::Truncated)?
    } else {
        m
    };
    if checksum::fold(checksum::combine(pseudo, checksum::sum(covered))) != 0 {
        return Err(Error::Malformed);
    }
    let mut out = Pim {
        kind,
        hello_holdtime_s: None,
    };
    if kind == PIM_HELLO {
        let mut o = &m[4..];
        out.hello_holdtime_s = Some(105);
        while !o.is_empty() {
            if o.len() < 4 {
                return Err(Error::Truncated);
            }
            let (t, len) = (crate::be16(o, 0), usize::from(crate::be16(o, 2)));
            let v = o.get(4..4 + len).ok_or(Error::Truncated)?;
            if t == 1 {
                if len != 2 {
                    return Err(Error::Malformed);
                }
                out.hello_holdtime_s = Some(crate::be16(v, 0));
            }
            o = &o[4 + len..];
        }
    }
    Ok(out)
}

/// The PIM message of an IPv4 or IPv6 packet (`ip` starts at its header), checked.
pub fn parse_pim_ip(ip: &[u8]) -> Result<Pim> {
    match ip.first().map(|v| v >> 4) {
        Some(4) => {
            let p = ipv4::Packet::new_checked(ip)?;
            if p.protocol_raw() != PROTO_PIM || p.is_fragment() {
                return Err(Error::Malformed);
            }
            parse_pim(p.payload(), 0)
        }
        Some(6) => {
            let p = ipv6::Packet::new_checked(ip)?;
            let (nh, off, frag) = p.transport().ok_or(Error::Truncated)?;
            if nh != PROTO_PIM || frag {
                return Err(Error::Malformed);
            }
            let end = 40 + usize::from(p.payload_len());
            let m = ip.get(off..end).ok_or(Error::Truncated)?;
            let src: [u8; 16] = ip[8..24].try_into().expect("40 bytes checked");
            let dst: [u8; 16] = ip[24..40].try_into().expect("40 bytes checked");
            let pseudo = checksum::pseudo_v6(&src, &dst, PROTO_PIM, m.len() as u32);
            parse_pim(m, pseudo)
        }
        _ => Err(Error::Malformed),
    }
}

/// A PIMv2 Hello with a holdtime option, checksummed (`pseudo` as for [`parse_pim`]): for tests
/// and fuzz seeds.
pub fn build_pim_hello(holdtime_s: u16, pseudo: u32) -> Vec<u8> {
    let mut m = vec![0x20, 0, 0, 0, 0, 1, 0, 2];
    m.extend_from_slice(&holdtime_s.to_be_bytes());
    let c = checksum::fold(checksum::combine(pseudo, checksum::sum(&m)));
    m[2..4].copy_from_slice(&c.to_be_bytes());
    m
}

/// The Ethernet multicast address of a group (RFC 1112 6.4, RFC 2464 7).
pub fn group_mac(group: IpAddr) -> [u8; 6] {
    match group {
        IpAddr::V4(g) => {
            let o = g.octets();
            [0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]]
        }
        IpAddr::V6(g) => {
            let o = g.octets();
            [0x33, 0x33, o[12], o[13], o[14], o[15]]
        }
    }
}

/// A whole Ethernet frame carrying `msg` from `src_mac`/`src` (an IGMP message in IPv4 with the
/// router alert option, TTL 1; an MLD message in IPv6 with a Hop-by-Hop router alert, hop limit
/// 1). Reports and leaves go where their version sends them (v3/MLDv2 reports to 224.0.0.22 and
/// ff02::16, v2 reports to the group, leaves to 224.0.0.2 and ff02::2); queries to all hosts or
/// to their group. IGMPv1 is not built (nothing sends it any more).
pub fn build(src_mac: [u8; 6], src: IpAddr, msg: &Message) -> Result<Vec<u8>> {
    let (dst, body) = match src {
        IpAddr::V4(_) => body_v4(msg)?,
        IpAddr::V6(_) => body_v6(msg)?,
    };
    let mut f = group_mac(dst).to_vec();
    f.extend_from_slice(&src_mac);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            f.extend_from_slice(&0x0800u16.to_be_bytes());
            let total = 24 + body.len();
            let mut ip = [0u8; 24];
            ip[0] = 0x46;
            ip[1] = 0xc0;
            ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
            ip[8] = 1;
            ip[9] = PROTO_IGMP;
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&d.octets());
            ip[20..24].copy_from_slice(&[0x94, 0x04, 0, 0]);
            let c = checksum::fold(checksum::sum(&ip));
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&ip);
            let mut body = body;
            let c = checksum::fold(checksum::sum(&body));
            body[2..4].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&body);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f.extend_from_slice(&0x86ddu16.to_be_bytes());
            let mut ip = [0u8; 48];
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&((8 + body.len()) as u16).to_be_bytes());
            ip[6] = ipv6::HOP_BY_HOP;
            ip[7] = 1;
            ip[8..24].copy_from_slice(&s.octets());
            ip[24..40].copy_from_slice(&d.octets());
            // Hop-by-Hop: next header ICMPv6, router alert (MLD), PadN of 0.
            ip[40..48].copy_from_slice(&[PROTO_ICMPV6, 0, 5, 2, 0, 0, 1, 0]);
            let mut body = body;
            let pseudo =
                checksum::pseudo_v6(&s.octets(), &d.octets(), PROTO_ICMPV6, body.len() as u32);
            let c = checksum::fold(checksum::combine(pseudo, checksum::sum(&body)));
            body[2..4].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&ip);
            f.extend_from_slice(&body);
        }
        _ => return Err(Error::Malformed),
    }
    if f.len() < 60 {
        f.resize(60, 0);
    }
    Ok(f)
}

fn v4_of(a: &IpAddr) -> Result<Ipv4Addr> {
    match a {
        IpAddr::V4(a) => Ok(*a),
        IpAddr::V6(_) => Err(Error::Malformed),
    }
}

fn v6_of(a: &IpAddr) -> Result<Ipv6Addr> {
    match a {
        IpAddr::V6(a) => Ok(*a),
        IpAddr::V4(_) => Err(Error::Malformed),
    }
}

/// An address's bytes in the family of the message (IPv6 or not); the other family is
/// malformed.
fn octets(a: &IpAddr, v6: bool) -> Result<Vec<u8>> {
    Ok(if v6 {
        v6_of(a)?.octets().to_vec()
    } else {
        v4_of(a)?.octets().to_vec()
    })
}

/// A query's source count and sources.
fn put_sources(b: &mut Vec<u8>, sources: &[IpAddr], v6: bool) -> Result<()> {
    b.extend_from_slice(&(sources.len() as u16).to_be_bytes());
    for s in sources {
        b.extend_from_slice(&octets(s, v6)?);
    }
    Ok(())
}

/// An IGMPv3 or MLDv2 report's record count and records (the same layout but for the
/// addresses' width).
fn put_records(b: &mut Vec<u8>, records: &[Record], v6: bool) -> Result<()> {
    b.extend_from_slice(&(records.len() as u16).to_be_bytes());
    for r in records {
        b.extend_from_slice(&[r.kind as u8, 0]);
        b.extend_from_slice(&(r.sources.len() as u16).to_be_bytes());
        b.extend_from_slice(&octets(&r.group, v6)?);
        for s in &r.sources {
            b.extend_from_slice(&octets(s, v6)?);
        }
    }
    Ok(())
}

/// The one record a v1/v2 report or leave carries, and whether it is a join: a v3-only record
/// (sources, include mode other than a leave) cannot be said that way.
fn one_record(records: &[Record]) -> Result<(&Record, bool)> {
    let [r] = records else {
        return Err(Error::Malformed);
    };
    match (r.kind, r.sources.is_empty()) {
        (RecordKind::ToExclude | RecordKind::IsExclude, true) => Ok((r, true)),
        (RecordKind::ToInclude, true) => Ok((r, false)),
        _ => Err(Error::Malformed),
    }
}

/// The IGMP message (checksum left 0) and the address it goes to.
fn body_v4(msg: &Message) -> Result<(IpAddr, Vec<u8>)> {
    const ALL_HOSTS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 1);
    const ALL_ROUTERS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 2);
    const V3_REPORTS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 22);
    let mut b = Vec::new();
    let dst = match msg {
        Message::Query {
            version,
            group,
            max_resp_ms,
            sources,
        } => {
            let g = group.as_ref().map(v4_of).transpose()?;
            let code = (max_resp_ms / 100).min(127) as u8;
            b.extend_from_slice(&[IGMP_QUERY, code, 0, 0]);
            b.extend_from_slice(&g.unwrap_or(Ipv4Addr::UNSPECIFIED).octets());
            if *version >= 3 {
                b.extend_from_slice(&[2, 125]);
                put_sources(&mut b, sources, false)?;
            }
            g.unwrap_or(ALL_HOSTS)
        }
        Message::Report {
            version: 3,
            records,
        } => {
            b.extend_from_slice(&[IGMP_V3_REPORT, 0, 0, 0, 0, 0]);
            put_records(&mut b, records, false)?;
            V3_REPORTS
        }
        Message::Report { records, .. } => {
            let (r, join) = one_record(records)?;
            let g = v4_of(&r.group)?;
            let (t, dst) = if join {
                (IGMP_V2_REPORT, g)
            } else {
                (IGMP_LEAVE, ALL_ROUTERS)
            };
            b.extend_from_slice(&[t, 0, 0, 0]);
            b.extend_from_slice(&g.octets());
            dst
        }
    };
    Ok((IpAddr::V4(dst), b))
}

/// The MLD message (checksum left 0) and the address it goes to.
fn body_v6(msg: &Message) -> Result<(IpAddr, Vec<u8>)> {
    const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
    const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);
    const V2_REPORTS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x16);
    let mut b = Vec::new();
    let dst = match msg {
        Message::Query {
            version,
            group,
            max_resp_ms,
            sources,
        } => {
            let g = group.as_ref().map(v6_of).transpose()?;
            b.extend_from_slice(&[MLD_QUERY, 0, 0, 0]);
            b.extend_from_slice(&((*max_resp_ms).min(32767) as u16).to_be_bytes());
            b.extend_from_slice(&[0, 0]);
            b.extend_from_slice(&g.unwrap_or(Ipv6Addr::UNSPECIFIED).octets());
            if *version >= 2 {
                b.extend_from_slice(&[2, 125]);
                put_sources(&mut b, sources, true)?;
            }
            g.unwrap_or(ALL_NODES)
        }
        Message::Report {
            version: 2,
            records,
        } => {
            b.extend_from_slice(&[MLD_V2_REPORT, 0, 0, 0, 0, 0]);
            put_records(&mut b, records, true)?;
            V2_REPORTS
        }
        Message::Report { records, .. } => {
            let (r, join) = one_record(records)?;
            let g = v6_of(&r.group)?;
            let (t, dst) = if join {
                (MLD_V1_REPORT, g)
            } else {
                (MLD_DONE, ALL_ROUTERS)
            };
            b.extend_from_slice(&[t, 0, 0, 0, 0, 0, 0, 0]);
            b.extend_from_slice(&g.octets());
            dst
        }
    };
    Ok((IpAddr::V6(dst), b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l3(f: &[u8]) -> &[u8] {
        &f[14..]
    }

    #[test]
    fn pim_hellos_are_checked_and_their_holdtime_read() {
        let h = build_pim_hello(105, 0);
        assert_eq!(
            parse_pim(&h, 0),
            Ok(Pim {
                kind: PIM_HELLO,
                hello_holdtime_s: Some(105)
            })
        );
        let mut bad = h.clone();
        bad[9] ^= 1;
        assert_eq!(parse_pim(&bad, 0), Err(Error::Malformed), "checksum");
        let mut cut = vec![0x20, 0, 0, 0, 0, 1, 0, 2, 0];
        let c = checksum::fold(checksum::sum(&cut));
        cut[2..4].copy_from_slice(&c.to_be_bytes());
        assert_eq!(parse_pim(&cut, 0), Err(Error::Truncated), "an option cut");
        let mut v1 = h.clone();
        v1[0] = 0x10;
        assert_eq!(parse_pim(&v1, 0), Err(Error::Malformed), "PIMv1");
        // IPv6 sums the pseudo-header: the same bytes fail without it.
        let src = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let mut dst = [0u8; 16];
        dst[0] = 0xff;
        dst[1] = 0x02;
        dst[15] = 0x0d;
        let ps = checksum::pseudo_v6(&src, &dst, PROTO_PIM, 10);
        let h6 = build_pim_hello(30, ps);
        assert_eq!(parse_pim(&h6, ps).unwrap().hello_holdtime_s, Some(30));
        assert!(parse_pim(&h6, 0).is_err());
        // A Register's checksum covers its header only: its payload may be anything.
        let mut reg = vec![0x21, 0, 0, 0, 0, 0, 0, 0];
        let c = checksum::fold(checksum::sum(&reg));
        reg[2..4].copy_from_slice(&c.to_be_bytes());
        reg.extend_from_slice(&[0x45, 1, 2, 3]);
        assert_eq!(parse_pim(&reg, 0).unwrap().kind, 1);
    }

    #[test]
    fn igmp_reports_leaves_and_queries_round_trip_through_frames() {
        let mac = [2, 0, 0, 0, 0, 1];
        let src = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9));
        let g: IpAddr = "239.1.2.3".parse().unwrap();
        let s1: IpAddr = "10.9.9.9".parse().unwrap();
        for msg in [
            Message::Report {
                version: 2,
                records: vec![Record::join(g)],
            },
            Message::Report {
                version: 2,
                records: vec![Record::leave(g)],
            },
            Message::Report {
                version: 3,
                records: vec![
                    Record {
                        kind: RecordKind::IsInclude,
                        group: g,
                        sources: vec![s1],
                    },
                    Record::join("239.9.9.9".parse().unwrap()),
                ],
            },
            Message::Query {
                version: 2,
                group: None,
                max_resp_ms: 10_000,
                sources: vec![],
            },
            Message::Query {
                version: 3,
                group: Some(g),
                max_resp_ms: 1_000,
                sources: vec![s1],
            },
        ] {
            let f = build(mac, src, &msg).unwrap();
            assert_eq!(&f[..3], &[0x01, 0x00, 0x5e]);
            assert_eq!(classify_v4(l3(&f)), Kind::Membership);
            let (back, from) = parse_v4(l3(&f)).unwrap();
            assert_eq!((back, IpAddr::V4(from)), (msg.clone(), src), "{msg:?}");
        }
    }

    #[test]
    fn mld_reports_and_queries_round_trip_and_need_a_link_local_source() {
        let mac = [2, 0, 0, 0, 0, 1];
        let src: IpAddr = "fe80::1".parse().unwrap();
        let g: IpAddr = "ff3e::8000:1".parse().unwrap();
        for msg in [
            Message::Report {
                version: 1,
                records: vec![Record::join(g)],
            },
            Message::Report {
                version: 1,
                records: vec![Record::leave(g)],
            },
            Message::Report {
                version: 2,
                records: vec![Record {
                    kind: RecordKind::Allow,
                    group: g,
                    sources: vec!["2001:db8::5".parse().unwrap()],
                }],
            },
            Message::Query {
                version: 2,
                group: None,
                max_resp_ms: 10_000,
                sources: vec![],
            },
        ] {
            let f = build(mac, src, &msg).unwrap();
            assert_eq!(&f[..2], &[0x33, 0x33]);
            assert_eq!(classify_v6(l3(&f)), Kind::Membership, "{msg:?}");
            let (back, from) = parse_v6(l3(&f)).unwrap();
            assert_eq!((back, IpAddr::V6(from)), (msg.clone(), src));
        }
        let global: IpAddr = "2001:db8::1".parse().unwrap();
        let f = build(
            mac,
            global,
            &Message::Report {
                version: 1,
                records: vec![Record::join(g)],
            },
        )
        .unwrap();
        assert_eq!(parse_v6(l3(&f)), Err(Error::Malformed));
    }

    #[test]
    fn damaged_checksums_and_unicast_groups_are_refused() {
        let src = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9));
        let join = |g: &str| Message::Report {
            version: 2,
            records: vec![Record::join(g.parse().unwrap())],
        };
        let mut f = build([2; 6], src, &join("239.1.1.1")).unwrap();
        f[14 + 24 + 5] ^= 1;
        assert_eq!(parse_v4(l3(&f)), Err(Error::Malformed));
        // A checksum right over a unicast group.
        let mut f = build([2; 6], src, &join("239.1.1.1")).unwrap();
        let m = 14 + 24;
        f[m + 4] = 10;
        f[m + 2..m + 4].fill(0);
        let c = checksum::fold(checksum::sum(&f[m..m + 8]));
        f[m + 2..m + 4].copy_from_slice(&c.to_be_bytes());
        assert_eq!(parse_v4(l3(&f)), Err(Error::Malformed));
        assert_eq!(parse_v4(&l3(&f)[..30]), Err(Error::Truncated));
    }

    #[test]
    fn data_and_link_local_traffic_is_told_apart() {
        let mut ip = [0u8; 40];
        ip[0] = 0x45;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[239, 1, 0, 5]);
        assert_eq!(
            classify_v4(&ip),
            Kind::Data {
                group: 0xef01_0005,
                source: 0x0a00_0001
            }
        );
        ip[16..20].copy_from_slice(&[224, 0, 0, 251]);
        assert_eq!(classify_v4(&ip), Kind::LinkLocal);
        ip[9] = PROTO_PIM;
        assert_eq!(classify_v4(&ip), Kind::Pim);
        let mut v6 = [0u8; 48];
        v6[0] = 0x60;
        v6[6] = 17;
        v6[24] = 0xff;
        v6[25] = 0x02;
        assert_eq!(classify_v6(&v6), Kind::LinkLocal);
        v6[25] = 0x0e;
        assert!(matches!(classify_v6(&v6), Kind::Data { .. }));
        assert_eq!(classify_v6(&v6[..30]), Kind::Other);
    }

    #[test]
    fn v3_max_response_codes_decode_as_the_rfc_says() {
        assert_eq!(code_v3(100), 100);
        // 0x80: mantissa 0, exponent 0: (0 | 0x10) << 3 = 128.
        assert_eq!(code_v3(0x80), 128);
        assert_eq!(code_v3(0xff), 31744);
        assert_eq!(code_v2_mld(0x8000), 0x1000 << 3);
    }
}

#[cfg(test)]
mod seeds {
    use super::*;

    /// Writes the fuzz target's seeds (IP packets of each message kind) when asked:
    /// `MCAST_SEEDS=fuzz/seeds/mcast cargo test -p packet write_seeds`.
    #[test]
    fn write_seeds() {
        let Ok(dir) = std::env::var("MCAST_SEEDS") else {
            return;
        };
        let v4 = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9));
        let v6: IpAddr = "fe80::9".parse().unwrap();
        let g4: IpAddr = "239.1.2.3".parse().unwrap();
        let g6: IpAddr = "ff3e::1".parse().unwrap();
        let rec = |g: IpAddr, s: IpAddr| Record {
            kind: RecordKind::IsInclude,
            group: g,
            sources: vec![s],
        };
        let msgs = [
            (
                "igmp2-join",
                v4,
                Message::Report {
                    version: 2,
                    records: vec![Record::join(g4)],
                },
            ),
            (
                "igmp2-leave",
                v4,
                Message::Report {
                    version: 2,
                    records: vec![Record::leave(g4)],
                },
            ),
            (
                "igmp3-report",
                v4,
                Message::Report {
                    version: 3,
                    records: vec![rec(g4, v4), Record::join(g4)],
                },
            ),
            (
                "igmp3-query",
                v4,
                Message::Query {
                    version: 3,
                    group: Some(g4),
                    max_resp_ms: 1000,
                    sources: vec![v4],
                },
            ),
            (
                "mld1-join",
                v6,
                Message::Report {
                    version: 1,
                    records: vec![Record::join(g6)],
                },
            ),
            (
                "mld2-report",
                v6,
                Message::Report {
                    version: 2,
                    records: vec![rec(g6, "2001:db8::1".parse().unwrap())],
                },
            ),
            (
                "mld2-query",
                v6,
                Message::Query {
                    version: 2,
                    group: None,
                    max_resp_ms: 10000,
                    sources: vec![],
                },
            ),
        ];
        for (name, src, m) in msgs {
            let f = build([2, 0, 0, 0, 0, 9], src, &m).unwrap();
            std::fs::write(format!("{dir}/{name}"), &f[14..]).unwrap();
        }
    }
}
