//! Bytes to [`Msg`]: every length is checked before it is used, so a short or contradictory
//! message is a [`DecodeError`] and never a panic or an out-of-bounds read.
//!
//! The variable-length parts are checked once here and then read lazily through [`PathIter`] and
//! [`Members::iter`](super::Members::iter), which therefore need no error path.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;

/// Why a netlink message was rejected. One word, so the hot path carries no payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The buffer ends inside a fixed header (`nlmsghdr`, `rtmsg`, `nhmsg`).
    Truncated,
    /// `nlmsg_len` is below the header or beyond the buffer.
    BadMsgLen(u32),
    /// An attribute header that is short, or a length beyond its message.
    BadAttr,
    /// A fixed-size attribute (address, u32) with the wrong length for it or the family.
    BadAttrLen { attr: u16, len: usize },
    /// A prefix length beyond the address width.
    BadPrefixLen(u8),
    /// An `rtnexthop` record in `RTA_MULTIPATH` that is short or overruns the list.
    BadMultipath,
    /// `NHA_GROUP` not a whole number of entries, empty, or with a member id 0.
    BadGroup,
    /// A next-hop message without `NHA_ID`.
    MissingId,
    /// `NHA_ID` or `RTA_NH_ID` of 0, which names no object.
    ZeroId,
    /// Attributes that cannot hold together (see the text).
    Conflict(&'static str),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated => write!(f, "netlink message truncated inside a header"),
            Self::BadMsgLen(l) => write!(f, "nlmsg_len {l} outside the buffer"),
            Self::BadAttr => write!(f, "malformed netlink attribute header"),
            Self::BadAttrLen { attr, len } => write!(f, "attribute {attr} has bad length {len}"),
            Self::BadPrefixLen(l) => write!(f, "prefix length {l} too long"),
            Self::BadMultipath => write!(f, "malformed RTA_MULTIPATH record"),
            Self::BadGroup => write!(f, "malformed NHA_GROUP"),
            Self::MissingId => write!(f, "next-hop message without NHA_ID"),
            Self::ZeroId => write!(f, "next-hop id 0"),
            Self::Conflict(why) => write!(f, "contradictory message: {why}"),
        }
    }
}

impl std::error::Error for DecodeError {}

fn ne16(b: &[u8]) -> u16 {
    u16::from_ne_bytes([b[0], b[1]])
}

fn ne32(b: &[u8]) -> u32 {
    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}

/// Walks `rtattr`s: yields `(type without flag bits, payload)`, or one error and then nothing.
struct Attrs<'a>(&'a [u8]);

impl<'a> Iterator for Attrs<'a> {
    type Item = Result<(u16, &'a [u8]), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        let b = self.0;
        if b.is_empty() {
            return None;
        }
        let len = if b.len() >= 4 { ne16(b) as usize } else { 0 };
        if len < 4 || len > b.len() {
            self.0 = &[];
            return Some(Err(DecodeError::BadAttr));
        }
        let t = ne16(&b[2..]) & NLA_TYPE_MASK;
        self.0 = &b[align4(len).min(b.len())..];
        Some(Ok((t, &b[4..len])))
    }
}

fn attr_u32(t: u16, p: &[u8]) -> Result<u32, DecodeError> {
    if p.len() != 4 {
        return Err(DecodeError::BadAttrLen {
            attr: t,
            len: p.len(),
        });
    }
    Ok(ne32(p))
}

fn addr_len(family: u8) -> usize {
    if family == AF_INET {
        4
    } else {
        16
    }
}

/// An address attribute of the given family's width.
fn attr_addr(t: u16, p: &[u8], family: u8) -> Result<IpAddr, DecodeError> {
    match (family, p.len()) {
        (AF_INET, 4) => Ok(IpAddr::V4(Ipv4Addr::new(p[0], p[1], p[2], p[3]))),
        (AF_INET6, 16) => {
            let mut a = [0u8; 16];
            a.copy_from_slice(p);
            Ok(IpAddr::V6(Ipv6Addr::from(a)))
        }
        _ => Err(DecodeError::BadAttrLen {
            attr: t,
            len: p.len(),
        }),
    }
}

/// `RTA_VIA`: `struct rtvia { u16 family; u8 addr[]; }` (an IPv6 gateway for an IPv4 route).
fn attr_via(p: &[u8]) -> Result<IpAddr, DecodeError> {
    let bad = DecodeError::BadAttrLen {
        attr: RTA_VIA,
        len: p.len(),
    };
    if p.len() < 2 {
        return Err(bad);
    }
    let fam = ne16(p);
    let fam = u8::try_from(fam).map_err(|_| bad)?;
    if fam != AF_INET && fam != AF_INET6 {
        return Err(bad);
    }
    attr_addr(RTA_VIA, &p[2..], fam).map_err(|_| bad)
}

/// Decodes the message at the start of `buf`; returns it and the bytes it took (aligned).
pub fn decode(buf: &[u8]) -> Result<(Msg<'_>, usize), DecodeError> {
    if buf.len() < NLMSG_HDRLEN {
        return Err(DecodeError::Truncated);
    }
    let len = ne32(buf);
    if (len as usize) < NLMSG_HDRLEN || len as usize > buf.len() {
        return Err(DecodeError::BadMsgLen(len));
    }
    let len = len as usize;
    let t = ne16(&buf[4..]);
    let flags = ne16(&buf[6..]);
    let body = &buf[NLMSG_HDRLEN..len];
    let msg = match t {
        RTM_NEWROUTE | RTM_DELROUTE => route(t, flags, body)?,
        RTM_NEWNEXTHOP | RTM_DELNEXTHOP => nexthop(t, body)?,
        t => Msg::Other { nlmsg_type: t },
    };
    Ok((msg, align4(len).min(buf.len())))
}

/// The messages of one FPM payload, in order; stops after the first error.
pub fn messages(buf: &[u8]) -> Messages<'_> {
    Messages(buf)
}

/// Iterator returned by [`messages`].
pub struct Messages<'a>(&'a [u8]);

impl<'a> Iterator for Messages<'a> {
    type Item = Result<Msg<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        match decode(self.0) {
            Ok((m, used)) => {
                self.0 = &self.0[used..];
                Some(Ok(m))
            }
            Err(e) => {
                self.0 = &[];
                Some(Err(e))
            }
        }
    }
}

fn route(t: u16, flags: u16, body: &[u8]) -> Result<Msg<'_>, DecodeError> {
    if body.len() < RTMSG_LEN {
        return Err(DecodeError::Truncated);
    }
    let family = body[0];
    if family != AF_INET && family != AF_INET6 {
        return Ok(Msg::Other { nlmsg_type: t });
    }
    let dst_len = body[1];
    if dst_len as usize > addr_len(family) * 8 {
        return Err(DecodeError::BadPrefixLen(dst_len));
    }
    let mut r = Route {
        op: if t == RTM_NEWROUTE { Op::New } else { Op::Del },
        replace: flags & NLM_F_REPLACE != 0,
        table: body[4] as u32,
        prefix: Prefix::default_route(family == AF_INET),
        rtype: RouteType::from_raw(body[7]),
        protocol: body[5],
        priority: 0,
        nh_id: 0,
        gateway: None,
        oif: 0,
        multipath: Paths::default(),
        encap: false,
    };
    let mut dst = unspecified(family);
    for a in Attrs(&body[RTMSG_LEN..]) {
        let (t, p) = a?;
        match t {
            RTA_DST => dst = attr_addr(t, p, family)?,
            RTA_GATEWAY => r.gateway = Some(attr_addr(t, p, family)?),
            RTA_VIA => r.gateway = Some(attr_via(p)?),
            RTA_OIF => r.oif = attr_u32(t, p)?,
            RTA_PRIORITY => r.priority = attr_u32(t, p)?,
            RTA_TABLE => r.table = attr_u32(t, p)?,
            RTA_NH_ID => {
                r.nh_id = attr_u32(t, p)?;
                if r.nh_id == 0 {
                    return Err(DecodeError::ZeroId);
                }
            }
            RTA_MULTIPATH => {
                r.encap |= check_multipath(p, family)?;
                r.multipath = Paths::from_checked(p);
            }
            RTA_ENCAP_TYPE | RTA_ENCAP => r.encap = true,
            _ => {}
        }
    }
    r.prefix = Prefix::new(dst, dst_len).ok_or(DecodeError::BadPrefixLen(dst_len))?;
    Ok(Msg::Route(r))
}

fn unspecified(family: u8) -> IpAddr {
    if family == AF_INET {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    } else {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    }
}

/// Validates an `RTA_MULTIPATH` payload so that [`PathIter`] can read it without checks; says
/// whether a path carries an encapsulation.
pub(crate) fn check_multipath(mut rest: &[u8], family: u8) -> Result<bool, DecodeError> {
    let mut encap = false;
    while !rest.is_empty() {
        let len = if rest.len() >= RTNH_LEN {
            ne16(rest) as usize
        } else {
            0
        };
        if len < RTNH_LEN || len > rest.len() {
            return Err(DecodeError::BadMultipath);
        }
        for a in Attrs(&rest[RTNH_LEN..len]) {
            match a? {
                (RTA_GATEWAY, p) => {
                    attr_addr(RTA_GATEWAY, p, family)?;
                }
                (RTA_VIA, p) => {
                    attr_via(p)?;
                }
                (RTA_ENCAP_TYPE | RTA_ENCAP, _) => encap = true,
                _ => {}
            }
        }
        rest = &rest[align4(len).min(rest.len())..];
    }
    Ok(encap)
}

/// The next hops of a checked `RTA_MULTIPATH` payload (`weight` = `rtnh_hops` + 1).
pub struct PathIter<'a>(&'a [u8]);

impl<'a> PathIter<'a> {
    pub(crate) fn new(raw: &'a [u8]) -> Self {
        Self(raw)
    }
}

impl Iterator for PathIter<'_> {
    type Item = NextHop;

    fn next(&mut self) -> Option<NextHop> {
        let b = self.0;
        if b.len() < RTNH_LEN {
            return None;
        }
        let len = ne16(b) as usize;
        if len < RTNH_LEN || len > b.len() {
            self.0 = &[];
            return None;
        }
        let mut h = NextHop {
            gateway: None,
            ifindex: ne32(&b[4..]),
            weight: b[3] as u16 + 1,
        };
        for (t, p) in Attrs(&b[RTNH_LEN..len]).map_while(Result::ok) {
            match (t, p.len()) {
                (RTA_GATEWAY, 4) => h.gateway = attr_addr(t, p, AF_INET).ok(),
                (RTA_GATEWAY, 16) => h.gateway = attr_addr(t, p, AF_INET6).ok(),
                (RTA_VIA, _) => h.gateway = attr_via(p).ok(),
                _ => {}
            }
        }
        self.0 = &b[align4(len).min(b.len())..];
        Some(h)
    }
}

fn nexthop(t: u16, body: &[u8]) -> Result<Msg<'_>, DecodeError> {
    if body.len() < NHMSG_LEN {
        return Err(DecodeError::Truncated);
    }
    let family = body[0];
    if !matches!(family, AF_UNSPEC | AF_INET | AF_INET6) {
        return Ok(Msg::Other { nlmsg_type: t });
    }
    let mut n = Nexthop {
        op: if t == RTM_NEWNEXTHOP {
            Op::New
        } else {
            Op::Del
        },
        id: 0,
        family,
        protocol: body[2],
        flags: ne32(&body[4..]),
        blackhole: false,
        oif: 0,
        gateway: None,
        group: Members::default(),
        group_type: 0,
        encap: false,
    };
    for a in Attrs(&body[NHMSG_LEN..]) {
        let (t, p) = a?;
        match t {
            NHA_ID => {
                n.id = attr_u32(t, p)?;
                if n.id == 0 {
                    return Err(DecodeError::ZeroId);
                }
            }
            NHA_GROUP => {
                if p.is_empty() || p.len() % NH_GRP_LEN != 0 {
                    return Err(DecodeError::BadGroup);
                }
                if p.chunks_exact(NH_GRP_LEN).any(|c| ne32(c) == 0) {
                    return Err(DecodeError::BadGroup);
                }
                n.group = Members::from_checked(p);
            }
            NHA_GROUP_TYPE => {
                if p.len() != 2 {
                    return Err(DecodeError::BadAttrLen {
                        attr: t,
                        len: p.len(),
                    });
                }
                n.group_type = ne16(p);
            }
            NHA_BLACKHOLE => n.blackhole = true,
            NHA_OIF => n.oif = attr_u32(t, p)?,
            NHA_ENCAP_TYPE | NHA_ENCAP => n.encap = true,
            NHA_GATEWAY => {
                if family == AF_UNSPEC {
                    return Err(DecodeError::Conflict("gateway in an AF_UNSPEC next hop"));
                }
                n.gateway = Some(attr_addr(t, p, family)?);
            }
            _ => {}
        }
    }
    if n.id == 0 {
        return Err(DecodeError::MissingId);
    }
    if n.op == Op::New {
        // A device index of 0 names no device (zebra never sends one).
        let single = n.oif != 0 || n.gateway.is_some();
        if !n.group.is_empty() {
            if single || n.blackhole {
                return Err(DecodeError::Conflict("group with a next hop of its own"));
            }
            if n.group.iter().any(|m| m.id == n.id) {
                return Err(DecodeError::Conflict("group contains itself"));
            }
        } else if n.blackhole && single {
            return Err(DecodeError::Conflict("blackhole with a gateway or device"));
        } else if !n.blackhole && !single {
            return Err(DecodeError::Conflict(
                "next hop without group, blackhole, gateway or device",
            ));
        }
    }
    Ok(Msg::Nexthop(n))
}
