//! The bridges' own IGMP/MLD queriers: for each bridge whose `igmp-snooping` has `querier:
//! true`, an IGMPv3 and an MLDv2 general query every query interval (and at once when the
//! querier starts), sent out of every member that is up, tagged for it. Hosts answer with
//! reports, which the workers' snooping reads: without a querier, a join lives only its
//! membership interval after the host's unsolicited reports.
//!
//! Reads: the tables' bridges (`Bridge::snoop`'s `Querier`), members and interfaces. Sends: the
//! frames, through the punt thread's inject rings (`PuntThread`), one per member. Counts
//! `SnoopCounters::queries_sent`.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

use dataplane::l2::snoop::Querier;
use dataplane::tables::Tables;
use packet::mcast::{build, Message};

/// The maximum response time queries ask for: RFC 3376's default (10 s), or half the query
/// interval where that is shorter (it must be less than the interval, RFC 3376 8.3).
fn max_response_ms(q: &Querier) -> u32 {
    (q.interval_ms / 2).min(10_000) as u32
}

/// When each bridge (by id) queries next.
#[derive(Default)]
pub struct Queriers {
    next: HashMap<u16, Instant>,
}

/// The IPv6 link-local address of a MAC (modified EUI-64, RFC 4291 appendix A).
pub fn link_local(mac: [u8; 6]) -> Ipv6Addr {
    Ipv6Addr::new(
        0xfe80,
        0,
        0,
        0,
        u16::from_be_bytes([mac[0] ^ 2, mac[1]]),
        u16::from_be_bytes([mac[2], 0xff]),
        u16::from_be_bytes([0xfe, mac[3]]),
        u16::from_be_bytes([mac[4], mac[5]]),
    )
}

/// The two general queries of `q`, untagged.
pub fn queries(q: &Querier) -> [Vec<u8>; 2] {
    let general = |version| Message::Query {
        version,
        group: None,
        max_resp_ms: max_response_ms(q),
        sources: vec![],
    };
    [
        build(q.mac, IpAddr::V4(q.src_v4), &general(3)).expect("a general query builds"),
        build(q.mac, IpAddr::V6(link_local(q.mac)), &general(2)).expect("a general query builds"),
    ]
}

/// `frame` as it leaves by interface `ifx`: with the interface's tags.
fn tagged(t: &Tables, ifx: u32, frame: &[u8]) -> Option<(u16, Vec<u8>)> {
    let i = t.ifs.get(ifx as usize)?;
    if !i.up || i.l2.is_some_and(|l| l.blocked) || i.bvi.is_some() {
        return None;
    }
    let mut f = frame[..12].to_vec();
    for (tpid, vid) in [(0x88a8u16, i.s_vlan), (0x8100, i.vlan)] {
        if let Some(v) = vid {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&v.to_be_bytes());
        }
    }
    f.extend_from_slice(&frame[12..]);
    Some((i.port, f))
}

impl Queriers {
    /// The frames due at `now` (each with its port), for every bridge with a querier; bridges
    /// that no longer have one are forgotten.
    pub fn due(&mut self, t: &Tables, now: Instant) -> Vec<(u16, Vec<u8>)> {
        let mut out = Vec::new();
        let mut live = Vec::new();
        for b in t.bridges.iter() {
            let Some(q) = b.snoop.as_ref().and_then(|s| s.querier.as_ref()) else {
                continue;
            };
            live.push(b.id);
            let next = self.next.entry(b.id).or_insert(now);
            if now < *next {
                continue;
            }
            *next = now + Duration::from_millis(q.interval_ms.max(1000));
            for f in queries(q) {
                out.extend(b.members.iter().filter_map(|&ifx| tagged(t, ifx, &f)));
            }
            if let Some(s) = &t.snoop {
                s.counters
                    .queries_sent
                    .fetch_add(2, std::sync::atomic::Ordering::Relaxed);
            }
        }
        self.next.retain(|id, _| live.contains(id));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_general_and_from_the_querier() {
        let q = Querier {
            interval_ms: 125_000,
            mac: [2, 0, 0x5e, 0x10, 0, 7],
            src_v4: "10.7.0.1".parse().unwrap(),
        };
        let [v4, v6] = queries(&q);
        assert_eq!(&v4[..6], &[1, 0, 0x5e, 0, 0, 1], "to all hosts");
        let (m, src) = packet::mcast::parse_v4(&v4[14..]).unwrap();
        assert_eq!(src.to_string(), "10.7.0.1");
        assert!(matches!(
            m,
            Message::Query {
                version: 3,
                group: None,
                max_resp_ms: 10_000,
                ..
            }
        ));
        let (m, src) = packet::mcast::parse_v6(&v6[14..]).unwrap();
        assert_eq!(src, "fe80::5eff:fe10:7".parse::<Ipv6Addr>().unwrap());
        assert!(matches!(
            m,
            Message::Query {
                version: 2,
                group: None,
                ..
            }
        ));
    }
}
