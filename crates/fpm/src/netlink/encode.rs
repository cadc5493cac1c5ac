//! [`Msg`] to bytes, laid out as zebra 8.4's `dplane_fpm_nl` does (checked byte for byte against
//! the captures in `tests/data/`): for tests, replay files and benchmarks.
//!
//! Routes: `nlmsghdr` (`NLM_F_CREATE | NLM_F_REQUEST`, plus `NLM_F_REPLACE` when asked; zebra asks
//! for IPv4 adds only), `rtmsg` (tables from 256 up in `RTA_TABLE`), then `RTA_DST`,
//! `RTA_PRIORITY`, `RTA_TABLE`, and the forwarding part: `RTA_NH_ID`, or `RTA_GATEWAY` and
//! `RTA_OIF`, or a nested `RTA_MULTIPATH`. Next hops: `NHA_ID`, then `NHA_GROUP` or `NHA_GATEWAY`,
//! `NHA_BLACKHOLE`, `NHA_OIF`. `nlmsg_seq` is 0 and `nlmsg_pid` the caller's, as zebra's are.

use std::net::IpAddr;

use super::*;
use crate::frame::{encode_frame, FrameError};

fn begin(out: &mut Vec<u8>, t: u16, flags: u16, pid: u32) -> usize {
    let start = out.len();
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&t.to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&pid.to_ne_bytes());
    start
}

fn finish(out: &mut [u8], start: usize) {
    let len = (out.len() - start) as u32;
    out[start..start + 4].copy_from_slice(&len.to_ne_bytes());
}

fn attr(out: &mut Vec<u8>, t: u16, payload: &[u8]) {
    out.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&t.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize(align4(out.len()), 0);
}

fn attr_u32(out: &mut Vec<u8>, t: u16, v: u32) {
    attr(out, t, &v.to_ne_bytes());
}

fn addr_bytes(a: &IpAddr) -> ([u8; 16], usize) {
    let mut b = [0u8; 16];
    match a {
        IpAddr::V4(v) => {
            b[..4].copy_from_slice(&v.octets());
            (b, 4)
        }
        IpAddr::V6(v) => (v.octets(), 16),
    }
}

/// A gateway of the route's own family as `RTA_GATEWAY`, of the other family as `RTA_VIA`.
fn put_gateway(out: &mut Vec<u8>, route_is_v4: bool, gw: &IpAddr) {
    let (b, n) = addr_bytes(gw);
    if gw.is_ipv4() == route_is_v4 {
        attr(out, RTA_GATEWAY, &b[..n]);
    } else {
        let fam = if gw.is_ipv4() { AF_INET } else { AF_INET6 } as u16;
        let mut via = [0u8; 18];
        via[..2].copy_from_slice(&fam.to_ne_bytes());
        via[2..2 + n].copy_from_slice(&b[..n]);
        attr(out, RTA_VIA, &via[..2 + n]);
    }
}

/// One `struct rtnexthop` with its nested gateway.
pub(crate) fn put_rtnexthop(out: &mut Vec<u8>, route_is_v4: bool, h: &NextHop) {
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0, (h.weight.clamp(1, 256) - 1) as u8]);
    out.extend_from_slice(&h.ifindex.to_ne_bytes());
    if let Some(gw) = &h.gateway {
        put_gateway(out, route_is_v4, gw);
    }
    let len = (out.len() - start) as u16;
    out[start..start + 2].copy_from_slice(&len.to_ne_bytes());
}

/// One `struct nexthop_grp` (`NHA_GROUP` entry); the weight is clamped to 1..=256.
pub(crate) fn put_group_member(out: &mut Vec<u8>, m: &GroupMember) {
    out.extend_from_slice(&m.id.to_ne_bytes());
    out.push((m.weight.clamp(1, 256) - 1) as u8);
    out.extend_from_slice(&[0, 0, 0]);
}

/// Appends one route message.
pub fn route(out: &mut Vec<u8>, r: &Route<'_>, pid: u32) {
    let (t, mut flags) = match r.op {
        Op::New => (RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REQUEST),
        Op::Del => (RTM_DELROUTE, NLM_F_CREATE | NLM_F_REQUEST),
    };
    if r.replace {
        flags |= NLM_F_REPLACE;
    }
    let start = begin(out, t, flags, pid);
    let v4 = r.prefix.is_ipv4();
    let table8 = if r.table < 256 {
        r.table as u8
    } else {
        RT_TABLE_UNSPEC
    };
    out.extend_from_slice(&[
        if v4 { AF_INET } else { AF_INET6 },
        r.prefix.len(),
        0,
        0,
        table8,
        r.protocol,
        0,
        r.rtype.raw(),
    ]);
    out.extend_from_slice(&0u32.to_ne_bytes());
    let (dst, n) = addr_bytes(&r.prefix.addr());
    attr(out, RTA_DST, &dst[..n]);
    if r.priority != 0 {
        attr_u32(out, RTA_PRIORITY, r.priority);
    }
    if r.table >= 256 {
        attr_u32(out, RTA_TABLE, r.table);
    }
    if r.nh_id != 0 {
        attr_u32(out, RTA_NH_ID, r.nh_id);
    }
    if let Some(gw) = &r.gateway {
        put_gateway(out, v4, gw);
    }
    if r.oif != 0 {
        attr_u32(out, RTA_OIF, r.oif);
    }
    if !r.multipath.is_empty() {
        attr(out, RTA_MULTIPATH | NLA_F_NESTED, r.multipath.raw());
    }
    if r.encap {
        put_mpls_encap(out, RTA_ENCAP_TYPE, RTA_ENCAP);
    }
    finish(out, start);
}

/// An MPLS encapsulation of one label (100) as zebra gives a labelled route or next hop: the
/// type (`LWTUNNEL_ENCAP_MPLS`) and the nested `MPLS_IPTUNNEL_DST` label stack entry.
fn put_mpls_encap(out: &mut Vec<u8>, type_attr: u16, encap_attr: u16) {
    const LWTUNNEL_ENCAP_MPLS: u16 = 1;
    const MPLS_IPTUNNEL_DST: u16 = 1;
    attr(out, type_attr, &LWTUNNEL_ENCAP_MPLS.to_ne_bytes());
    let mut nested = Vec::new();
    // label 100, bottom of stack
    attr(
        &mut nested,
        MPLS_IPTUNNEL_DST,
        &(100u32 << 12 | 1 << 8).to_be_bytes(),
    );
    attr(out, encap_attr | NLA_F_NESTED, &nested);
}

/// Appends one next-hop message.
pub fn nexthop(out: &mut Vec<u8>, n: &Nexthop<'_>, pid: u32) {
    let (t, flags) = match n.op {
        Op::New => (RTM_NEWNEXTHOP, NLM_F_CREATE | NLM_F_REQUEST | NLM_F_REPLACE),
        Op::Del => (RTM_DELNEXTHOP, NLM_F_CREATE | NLM_F_REQUEST),
    };
    let start = begin(out, t, flags, pid);
    out.extend_from_slice(&[n.family, 0, n.protocol, 0]);
    out.extend_from_slice(&n.flags.to_ne_bytes());
    attr_u32(out, NHA_ID, n.id);
    // zebra sends one of: a group, a blackhole, or a gateway and/or device.
    if !n.group.is_empty() {
        attr(out, NHA_GROUP, n.group.raw());
    }
    if n.group_type != 0 {
        attr(out, NHA_GROUP_TYPE, &n.group_type.to_ne_bytes());
    }
    if let Some(gw) = &n.gateway {
        let (b, len) = addr_bytes(gw);
        attr(out, NHA_GATEWAY, &b[..len]);
    }
    if n.blackhole {
        attr(out, NHA_BLACKHOLE, &[]);
    }
    if n.oif != 0 {
        attr_u32(out, NHA_OIF, n.oif);
    }
    if n.encap {
        put_mpls_encap(out, NHA_ENCAP_TYPE, NHA_ENCAP);
    }
    finish(out, start);
}

/// Appends any message; [`Msg::Other`] becomes a bare header of its type.
pub fn message(out: &mut Vec<u8>, m: &Msg<'_>, pid: u32) {
    match m {
        Msg::Route(r) => route(out, r, pid),
        Msg::Nexthop(n) => nexthop(out, n, pid),
        Msg::Other { nlmsg_type } => {
            let s = begin(out, *nlmsg_type, NLM_F_REQUEST, pid);
            finish(out, s);
        }
    }
}

/// Appends one FPM frame holding `msgs` back to back (zebra sends one per frame, or a delete and
/// an add together for a route change). `scratch` is reused to avoid an allocation per frame.
pub fn frame(
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    msgs: &[Msg<'_>],
    pid: u32,
) -> Result<(), FrameError> {
    scratch.clear();
    for m in msgs {
        message(scratch, m, pid);
    }
    encode_frame(scratch, out)
}
