//! The kernel's multicast forwarding cache (MFC) entries as rtnetlink carries them: the
//! `RTM_NEWROUTE` / `RTM_DELROUTE` messages of families `RTNL_FAMILY_IPMR` (IPv4) and
//! `RTNL_FAMILY_IP6MR` (IPv6), sent to `RTNLGRP_IPV4_MROUTE` / `RTNLGRP_IPV6_MROUTE` when pimd
//! adds or deletes an entry and in answer to a dump (the kernel's `mr_fill_mroute`).
//!
//! An entry is an `rtmsg` with `RTA_TABLE`, `RTA_SRC` (the source; 0 for (*,G)), `RTA_DST` (the
//! group), `RTA_IIF` (the device of its input VIF), `RTA_MULTIPATH` (per output VIF an
//! `rtnexthop` whose `rtnh_hops` is the VIF's TTL threshold and `rtnh_ifindex` its device) and
//! `RTA_MFC_STATS` (and `RTA_EXPIRES`, the time since last use). Entries still waiting for pimd
//! (unresolved: `RTNH_F_UNRESOLVED` in `rtm_flags`, no interfaces) are not routes yet. Decoded by hand, as the link monitor's messages are: five attributes.

use dataplane::port::netlink::{attrs, raw_messages, rd_u32};

pub const RTNL_FAMILY_IPMR: u8 = 128;
pub const RTNL_FAMILY_IP6MR: u8 = 129;
pub const RTM_NEWROUTE: u16 = 24;
pub const RTM_DELROUTE: u16 = 25;
pub const RTM_GETROUTE: u16 = 26;
const RTMSG_LEN: usize = 12;
const RTA_DST: u16 = 1;
const RTA_SRC: u16 = 2;
const RTA_IIF: u16 = 3;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
const RTA_MFC_STATS: u16 = 17;
/// `rtm_flags`: the entry waits for the daemon (`RTNH_F_UNRESOLVED`).
const RTNH_F_UNRESOLVED: u32 = 0x20;

/// One MFC entry (or its deletion).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MfcEntry {
    pub add: bool,
    pub v6: bool,
    pub table: u32,
    /// 0 for (*,G); IPv4 in the low 32 bits.
    pub source: u128,
    pub group: u128,
    /// The input VIF's device (0: none given).
    pub iif: u32,
    /// Output VIFs' devices and TTL thresholds.
    pub oifs: Vec<(u32, u8)>,
    /// Packets the kernel forwarded by it (its counters, `RTA_MFC_STATS`).
    pub packets: u64,
}

/// What one message of a datagram was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MfcMsg {
    Entry(MfcEntry),
    /// An entry waiting for the daemon: not a route.
    Unresolved,
    /// `NLMSG_ERROR` with this errno (0: an acknowledgement).
    Error(i32),
    Done,
    /// Another family or message type; or a malformed entry (counted by the caller).
    Other,
    Malformed,
}

/// The messages of one datagram.
pub fn decode(buf: &[u8]) -> Vec<MfcMsg> {
    raw_messages(buf)
        .map(|m| match m.ty {
            RTM_NEWROUTE | RTM_DELROUTE => entry(m.ty == RTM_NEWROUTE, m.payload),
            2 => MfcMsg::Error(rd_u32(m.payload, 0).map_or(0, |e| (e as i32).wrapping_neg())),
            3 => MfcMsg::Done,
            _ => MfcMsg::Other,
        })
        .collect()
}

fn addr(p: &[u8], v6: bool) -> Option<u128> {
    if v6 {
        Some(u128::from_be_bytes(p.try_into().ok()?))
    } else {
        Some(u128::from(u32::from_be_bytes(p.try_into().ok()?)))
    }
}

fn entry(add: bool, p: &[u8]) -> MfcMsg {
    if p.len() < RTMSG_LEN {
        return MfcMsg::Malformed;
    }
    let v6 = match p[0] {
        RTNL_FAMILY_IPMR => false,
        RTNL_FAMILY_IP6MR => true,
        _ => return MfcMsg::Other,
    };
    if rd_u32(p, 8).unwrap_or(0) & RTNH_F_UNRESOLVED != 0 {
        return MfcMsg::Unresolved;
    }
    let mut e = MfcEntry {
        add,
        v6,
        table: u32::from(p[4]),
        source: 0,
        group: 0,
        iif: 0,
        oifs: Vec::new(),
        packets: 0,
    };
    let mut has_group = false;
    for (ty, a) in attrs(&p[RTMSG_LEN..]) {
        match ty {
            RTA_TABLE => match rd_u32(a, 0) {
                Some(t) => e.table = t,
                None => return MfcMsg::Malformed,
            },
            RTA_SRC => match addr(a, v6) {
                Some(s) => e.source = s,
                None => return MfcMsg::Malformed,
            },
            RTA_DST => match addr(a, v6) {
                Some(g) => {
                    e.group = g;
                    has_group = true;
                }
                None => return MfcMsg::Malformed,
            },
            RTA_IIF => match rd_u32(a, 0) {
                Some(i) => e.iif = i,
                None => return MfcMsg::Malformed,
            },
            RTA_MULTIPATH => {
                let mut rest = a;
                while rest.len() >= 8 {
                    let len = usize::from(u16::from_ne_bytes([rest[0], rest[1]]));
                    if len < 8 || len > rest.len() {
                        return MfcMsg::Malformed;
                    }
                    let ifindex = rd_u32(rest, 4).unwrap_or(0);
                    e.oifs.push((ifindex, rest[3]));
                    rest = &rest[((len + 3) & !3).min(rest.len())..];
                }
                if !rest.is_empty() {
                    return MfcMsg::Malformed;
                }
            }
            RTA_MFC_STATS => {
                if let Some(b) = a.get(..8) {
                    e.packets = u64::from_ne_bytes(b.try_into().expect("8 bytes"));
                }
            }
            _ => {}
        }
    }
    if !has_group {
        return MfcMsg::Malformed;
    }
    MfcMsg::Entry(e)
}

/// A dump request for every entry of one family.
pub fn dump_request(v6: bool, seq: u32) -> Vec<u8> {
    let mut r = dataplane::port::netlink::NlRequest::new(
        RTM_GETROUTE,
        (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16,
        seq,
    );
    let mut rtm = [0u8; RTMSG_LEN];
    rtm[0] = if v6 {
        RTNL_FAMILY_IP6MR
    } else {
        RTNL_FAMILY_IPMR
    };
    r.body(&rtm);
    r.finish()
}

/// An entry laid out as the kernel sends it (for tests and the fuzz target's seeds).
pub fn encode(e: &MfcEntry) -> Vec<u8> {
    let mut r = dataplane::port::netlink::NlRequest::new(
        if e.add { RTM_NEWROUTE } else { RTM_DELROUTE },
        0,
        0,
    );
    let mut rtm = [0u8; RTMSG_LEN];
    rtm[0] = if e.v6 {
        RTNL_FAMILY_IP6MR
    } else {
        RTNL_FAMILY_IPMR
    };
    let bits = if e.v6 { 128 } else { 32 };
    rtm[1] = bits;
    rtm[2] = bits;
    rtm[4] = e.table.min(255) as u8;
    rtm[5] = 17; // RTPROT_MROUTED
    rtm[7] = 5; // RTN_MULTICAST
    r.body(&rtm);
    r.attr(RTA_TABLE, &e.table.to_ne_bytes());
    let a = |x: u128| -> Vec<u8> {
        if e.v6 {
            x.to_be_bytes().to_vec()
        } else {
            (x as u32).to_be_bytes().to_vec()
        }
    };
    r.attr(RTA_SRC, &a(e.source));
    r.attr(RTA_DST, &a(e.group));
    if e.iif != 0 {
        r.attr(RTA_IIF, &e.iif.to_ne_bytes());
    }
    let mut mp = Vec::new();
    for &(ifindex, ttl) in &e.oifs {
        mp.extend_from_slice(&8u16.to_ne_bytes());
        mp.push(0);
        mp.push(ttl);
        mp.extend_from_slice(&ifindex.to_ne_bytes());
    }
    r.attr(RTA_MULTIPATH, &mp);
    let mut stats = Vec::new();
    stats.extend_from_slice(&e.packets.to_ne_bytes());
    stats.extend_from_slice(&0u64.to_ne_bytes());
    stats.extend_from_slice(&0u64.to_ne_bytes());
    r.attr(RTA_MFC_STATS, &stats);
    r.finish()
}

/// Fuzzing entry: any bytes decode without a panic, and a decoded entry encodes and decodes
/// back to itself.
pub fn fuzz(data: &[u8]) {
    for m in decode(data) {
        if let MfcMsg::Entry(e) = m {
            if e.table <= 255 {
                let again = decode(&encode(&e));
                assert_eq!(again, vec![MfcMsg::Entry(e)]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sg() -> MfcEntry {
        MfcEntry {
            add: true,
            v6: false,
            table: 253,
            source: 0x0a00_0002,
            group: 0xe801_0203,
            iif: 7,
            oifs: vec![(8, 1), (9, 1)],
            packets: 42,
        }
    }

    #[test]
    fn entries_round_trip_and_several_share_a_datagram() {
        let mut v6 = sg();
        v6.v6 = true;
        v6.source = 0x2001_0db8 << 96 | 2;
        v6.group = 0xff3e << 112 | 1;
        v6.add = false;
        let mut buf = encode(&sg());
        buf.extend(encode(&v6));
        assert_eq!(decode(&buf), vec![MfcMsg::Entry(sg()), MfcMsg::Entry(v6)]);
    }

    #[test]
    fn unresolved_other_families_and_bad_lengths_are_told_apart() {
        let mut raw = encode(&sg());
        raw[16 + 8] = RTNH_F_UNRESOLVED as u8;
        assert_eq!(decode(&raw), vec![MfcMsg::Unresolved]);
        let mut raw = encode(&sg());
        raw[16] = 2; // AF_INET: a unicast route
        assert_eq!(decode(&raw), vec![MfcMsg::Other]);
        // RTA_DST cut to 3 bytes.
        let mut e = encode(&sg());
        let at = e
            .windows(4)
            .position(|w| w == [8, 0, 1, 0])
            .expect("RTA_DST");
        e[at] = 7;
        assert_eq!(decode(&e), vec![MfcMsg::Malformed]);
        for n in 0..encode(&sg()).len() {
            fuzz(&encode(&sg())[..n]);
        }
    }
}
