//! The rtnetlink messages zebra puts in FPM frames: routes (`RTM_NEWROUTE`/`RTM_DELROUTE`) and
//! next-hop objects (`RTM_NEWNEXTHOP`/`RTM_DELNEXTHOP`), IPv4 and IPv6.
//!
//! [`decode()`] turns bytes into [`Msg`] views that borrow the variable-length parts (the multipath
//! list, the group members) from the frame, so decoding allocates nothing; [`Msg::into_owned`]
//! makes a message outlive its frame. [`encode`] lays the same messages out byte for byte as zebra
//! 8.4 does (see `tests/data/` for the captures this was checked against).
//!
//! Multi-byte fields are native-endian, as netlink is; FPM runs between processes on one host.

pub mod decode;
pub mod encode;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use decode::{decode, messages, DecodeError, Messages};

/// Length of `struct nlmsghdr`.
pub const NLMSG_HDRLEN: usize = 16;
/// Length of `struct rtmsg`.
pub const RTMSG_LEN: usize = 12;
/// Length of `struct nhmsg`.
pub const NHMSG_LEN: usize = 8;
/// Length of `struct rtnexthop`.
pub const RTNH_LEN: usize = 8;
/// Length of `struct nexthop_grp`.
pub const NH_GRP_LEN: usize = 8;

pub const RTM_NEWROUTE: u16 = 24;
pub const RTM_DELROUTE: u16 = 25;
pub const RTM_NEWNEXTHOP: u16 = 104;
pub const RTM_DELNEXTHOP: u16 = 105;

pub const NLM_F_REQUEST: u16 = 0x1;
pub const NLM_F_REPLACE: u16 = 0x100;
pub const NLM_F_CREATE: u16 = 0x400;

pub const AF_UNSPEC: u8 = 0;
pub const AF_INET: u8 = 2;
pub const AF_INET6: u8 = 10;

pub const RTA_DST: u16 = 1;
pub const RTA_OIF: u16 = 4;
pub const RTA_GATEWAY: u16 = 5;
pub const RTA_PRIORITY: u16 = 6;
pub const RTA_MULTIPATH: u16 = 9;
pub const RTA_TABLE: u16 = 15;
pub const RTA_VIA: u16 = 18;
pub const RTA_ENCAP_TYPE: u16 = 21;
pub const RTA_ENCAP: u16 = 22;
pub const RTA_NH_ID: u16 = 30;

pub const NHA_ID: u16 = 1;
pub const NHA_GROUP: u16 = 2;
pub const NHA_GROUP_TYPE: u16 = 3;
pub const NHA_BLACKHOLE: u16 = 4;
pub const NHA_OIF: u16 = 5;
pub const NHA_GATEWAY: u16 = 6;
pub const NHA_ENCAP_TYPE: u16 = 7;
pub const NHA_ENCAP: u16 = 8;

/// Attribute types carry two flag bits (nested, network byte order) that zebra sets on
/// `RTA_MULTIPATH`; the type proper is the rest.
pub const NLA_TYPE_MASK: u16 = 0x3FFF;
pub const NLA_F_NESTED: u16 = 0x8000;

pub const RTN_UNSPEC: u8 = 0;
pub const RTN_UNICAST: u8 = 1;
pub const RTN_BLACKHOLE: u8 = 6;
pub const RTN_UNREACHABLE: u8 = 7;
pub const RTN_PROHIBIT: u8 = 8;

/// Tables from 256 up travel in `RTA_TABLE` with `rtm_table` = `RT_TABLE_UNSPEC`.
pub const RT_TABLE_UNSPEC: u8 = 0;
pub const RT_TABLE_MAIN: u32 = 254;
/// `rtm_protocol` of zebra's own routes and next hops.
pub const RTPROT_ZEBRA: u8 = 11;

/// Netlink alignment: every message and attribute starts on a 4-byte boundary.
pub const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// An IPv4 or IPv6 prefix whose address has no bits set past its length (the decoder masks them,
/// so equal prefixes are equal keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl Prefix {
    /// `None` if `len` exceeds the address width; host bits are cleared.
    pub fn new(addr: IpAddr, len: u8) -> Option<Self> {
        let addr = match addr {
            IpAddr::V4(a) if len <= 32 => {
                let m = u32::MAX.checked_shl(32 - len as u32).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
            }
            IpAddr::V6(a) if len <= 128 => {
                let m = u128::MAX.checked_shl(128 - len as u32).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
            }
            _ => return None,
        };
        Some(Self { addr, len })
    }

    /// `0.0.0.0/0` or `::/0`.
    pub fn default_route(ipv4: bool) -> Self {
        let addr = if ipv4 {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        } else {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        };
        Self { addr, len: 0 }
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn len(&self) -> u8 {
        self.len
    }

    /// True for the default route (length 0); there is no empty prefix otherwise.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl std::str::FromStr for Prefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, l) = s.split_once('/').ok_or_else(|| format!("{s}: no /len"))?;
        let addr: IpAddr = a.parse().map_err(|e| format!("{s}: {e}"))?;
        let len: u8 = l.parse().map_err(|e| format!("{s}: {e}"))?;
        Prefix::new(addr, len).ok_or_else(|| format!("{s}: length too long"))
    }
}

/// One forwarding next hop: out of `ifindex`, to `gateway` if any (none: directly connected),
/// with an ECMP `weight` of 1..=256.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NextHop {
    pub gateway: Option<IpAddr>,
    pub ifindex: u32,
    pub weight: u16,
}

impl NextHop {
    pub fn new(gateway: Option<IpAddr>, ifindex: u32) -> Self {
        Self {
            gateway,
            ifindex,
            weight: 1,
        }
    }
}

/// A message creates/replaces (`New`) or deletes (`Del`) its object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    New,
    Del,
}

/// `rtm_type`, as far as forwarding cares. zebra leaves it `RTN_UNSPEC` (`Other(0)`) on deletes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RouteType {
    Unicast,
    Blackhole,
    Unreachable,
    Prohibit,
    Other(u8),
}

impl RouteType {
    pub fn from_raw(t: u8) -> Self {
        match t {
            RTN_UNICAST => Self::Unicast,
            RTN_BLACKHOLE => Self::Blackhole,
            RTN_UNREACHABLE => Self::Unreachable,
            RTN_PROHIBIT => Self::Prohibit,
            t => Self::Other(t),
        }
    }

    pub fn raw(self) -> u8 {
        match self {
            Self::Unicast => RTN_UNICAST,
            Self::Blackhole => RTN_BLACKHOLE,
            Self::Unreachable => RTN_UNREACHABLE,
            Self::Prohibit => RTN_PROHIBIT,
            Self::Other(t) => t,
        }
    }
}

/// `RTM_NEWROUTE` / `RTM_DELROUTE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route<'a> {
    pub op: Op,
    /// `NLM_F_REPLACE` was set.
    pub replace: bool,
    /// `RTA_TABLE` if present, else `rtm_table`.
    pub table: u32,
    pub prefix: Prefix,
    pub rtype: RouteType,
    pub protocol: u8,
    /// `RTA_PRIORITY` (zebra always sends 20), 0 if absent.
    pub priority: u32,
    /// `RTA_NH_ID`: the route forwards through this next-hop object; 0 = none.
    pub nh_id: u32,
    /// Single path: `RTA_GATEWAY` (or `RTA_VIA`) and `RTA_OIF`.
    pub gateway: Option<IpAddr>,
    pub oif: u32,
    /// `RTA_MULTIPATH`, empty if absent.
    pub multipath: Paths<'a>,
    /// The route (or one of its paths) carries an encapsulation (`RTA_ENCAP`): from zebra, MPLS
    /// labels to push. Zebra sends such routes when it replays its table on a (re)connect, even
    /// ones the kernel refused; forwarding one without its labels would be wrong.
    pub encap: bool,
}

/// `RTM_NEWNEXTHOP` / `RTM_DELNEXTHOP`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nexthop<'a> {
    pub op: Op,
    /// `NHA_ID` (never 0).
    pub id: u32,
    /// `nh_family`: `AF_INET`/`AF_INET6` for single next hops, `AF_UNSPEC` for groups.
    pub family: u8,
    pub protocol: u8,
    /// `nh_flags` (`RTNH_F_ONLINK`, ...).
    pub flags: u32,
    pub blackhole: bool,
    pub oif: u32,
    pub gateway: Option<IpAddr>,
    /// `NHA_GROUP`, empty for a single next hop.
    pub group: Members<'a>,
    /// `NHA_GROUP_TYPE` (0 = multipath, 1 = resilient).
    pub group_type: u16,
    /// It carries an encapsulation (`NHA_ENCAP`: from zebra, MPLS labels), as on a replay of
    /// labelled routes the kernel refused.
    pub encap: bool,
}

/// A decoded netlink message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg<'a> {
    Route(Route<'a>),
    Nexthop(Nexthop<'a>),
    /// Anything else (neighbours, MPLS, other families, `NLMSG_NOOP`...): counted and ignored.
    Other {
        nlmsg_type: u16,
    },
}

impl Msg<'_> {
    /// Copies the borrowed lists (only multipath routes and groups have any), so the message can
    /// cross a channel.
    pub fn into_owned(self) -> Msg<'static> {
        match self {
            Msg::Route(r) => Msg::Route(Route {
                multipath: r.multipath.into_owned(),
                ..r
            }),
            Msg::Nexthop(n) => Msg::Nexthop(Nexthop {
                group: n.group.into_owned(),
                ..n
            }),
            Msg::Other { nlmsg_type } => Msg::Other { nlmsg_type },
        }
    }
}

/// The `RTA_MULTIPATH` payload: validated `rtnexthop` records, read lazily. Owning or borrowing,
/// so that a message can be decoded in place and still be sent on.
#[derive(Clone, Default)]
pub struct Paths<'a>(Cow<'a, [u8]>);

impl<'a> Paths<'a> {
    /// Wraps bytes that [`decode::check_multipath`] accepted.
    pub(crate) fn from_checked(raw: &'a [u8]) -> Self {
        Self(Cow::Borrowed(raw))
    }

    /// Builds the wire form of `hops` as zebra does (`rtnh_hops` = weight - 1; the gateway in a
    /// nested `RTA_GATEWAY`, or `RTA_VIA` for an IPv6 gateway of an IPv4 route).
    pub fn from_hops(route_is_v4: bool, hops: &[NextHop]) -> Paths<'static> {
        let mut raw = Vec::with_capacity(hops.len() * 16);
        for h in hops {
            encode::put_rtnexthop(&mut raw, route_is_v4, h);
        }
        Paths(Cow::Owned(raw))
    }

    pub fn raw(&self) -> &[u8] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> decode::PathIter<'_> {
        decode::PathIter::new(&self.0)
    }

    pub fn into_owned(self) -> Paths<'static> {
        Paths(Cow::Owned(self.0.into_owned()))
    }
}

impl PartialEq for Paths<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Paths<'_> {}

impl std::fmt::Debug for Paths<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// One member of a next-hop group: a next-hop id and its weight (1..=256; the wire holds
/// weight - 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupMember {
    pub id: u32,
    pub weight: u16,
}

/// The `NHA_GROUP` payload: validated `struct nexthop_grp` entries, read lazily.
#[derive(Clone, Default)]
pub struct Members<'a>(Cow<'a, [u8]>);

impl<'a> Members<'a> {
    pub(crate) fn from_checked(raw: &'a [u8]) -> Self {
        Self(Cow::Borrowed(raw))
    }

    /// The wire form of `members`; weights are clamped to 1..=256.
    pub fn from_members(members: &[GroupMember]) -> Members<'static> {
        let mut raw = Vec::with_capacity(members.len() * NH_GRP_LEN);
        for m in members {
            encode::put_group_member(&mut raw, m);
        }
        Members(Cow::Owned(raw))
    }

    pub fn raw(&self) -> &[u8] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len() / NH_GRP_LEN
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = GroupMember> + '_ {
        self.0.chunks_exact(NH_GRP_LEN).map(|c| GroupMember {
            id: u32::from_ne_bytes([c[0], c[1], c[2], c[3]]),
            weight: c[4] as u16 + 1,
        })
    }

    pub fn into_owned(self) -> Members<'static> {
        Members(Cow::Owned(self.0.into_owned()))
    }
}

impl PartialEq for Members<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Members<'_> {}

impl std::fmt::Debug for Members<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}
