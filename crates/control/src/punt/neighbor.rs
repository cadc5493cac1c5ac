//! The neighbour manager: ARP (RFC 826) and IPv6 neighbour discovery (RFC 4861) for the
//! router's interfaces. It answers requests for the router's addresses, learns the neighbours
//! that answer (or ask), resolves next hops the workers found unresolved while holding a few of
//! their packets, and probes learned entries once they have been trusted for `reachable-time`.
//!
//! It is a state machine with no threads or sockets of its own: the punt thread feeds it frames
//! and clock ticks, and carries out what it returns ([`Out`]): frames to send, neighbours to
//! install or forget in the router's next hops, held packets to release or free.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use dataplane::punt::Egress;
use dataplane::tables::{Interface, NextHop, Tables};
use dataplane::PktBuf;
use packet::ethernet::{self, MacAddr};
use packet::{arp, nd};

use crate::config::NeighborTimers;

/// What the caller must do.
pub enum Out {
    /// Send this frame as it is, out of a port or into a bridge (a routed interface's).
    Send { to: Egress, frame: Vec<u8> },
    /// Install (or update) a neighbour in the router's tables, then `release` its held packets.
    Learned { ifx: u32, ip: IpAddr, mac: MacAddr },
    /// A learned neighbour stopped answering: its next hop must glean again.
    Lost { ifx: u32, ip: IpAddr },
    /// A held packet that will not be sent (resolution failed, or the hold queue overflowed).
    Free(PktBuf),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Incomplete,
    Reachable,
    Probe,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Incomplete => "incomplete",
            State::Reachable => "reachable",
            State::Probe => "probe",
        }
    }
}

struct Entry {
    mac: Option<MacAddr>,
    state: State,
    /// Last confirmation (an answer, or a request from it).
    confirmed: Instant,
    /// When the next request or probe is due.
    next: Instant,
    tries: u32,
    held: Vec<PktBuf>,
}

impl Entry {
    /// A neighbour being resolved, with nothing held yet.
    fn incomplete(now: Instant) -> Self {
        Entry {
            mac: None,
            state: State::Incomplete,
            confirmed: now,
            next: now,
            tries: 0,
            held: Vec::new(),
        }
    }
}

/// Counters for `show neighbors` and the metrics.
pub use api::views::NeighborStats;

/// One neighbour as `show neighbors` lists it.
#[derive(Clone, Debug)]
pub struct NeighborView {
    pub ifx: u32,
    pub ip: IpAddr,
    pub mac: Option<String>,
    pub state: &'static str,
    pub age_s: f64,
    pub held: usize,
}

pub struct Neighbors {
    timers: NeighborTimers,
    entries: HashMap<(u32, IpAddr), Entry>,
    /// Next hops that failed to resolve: not asked for again by the next-hop scan before this.
    backoff: HashMap<(u32, IpAddr), Instant>,
    /// The next-hop table last scanned (by address), so an unchanged table is not walked again.
    scanned: usize,
    pub stats: NeighborStats,
}

/// How long a next hop that did not answer waits before the scan asks again (traffic towards
/// it still asks at once).
const FAILED_BACKOFF: Duration = Duration::from_secs(10);

impl Neighbors {
    pub fn new(timers: NeighborTimers) -> Self {
        Self {
            timers,
            entries: HashMap::new(),
            backoff: HashMap::new(),
            scanned: 0,
            stats: NeighborStats::default(),
        }
    }

    /// A neighbour another process resolved (a hitless restart), already in the tables:
    /// reachable as of `now`, probed once reachable-time has passed, as if learned here.
    pub fn adopt(&mut self, ifx: u32, ip: IpAddr, mac: MacAddr, now: Instant) {
        let mut e = Entry::incomplete(now);
        e.mac = Some(mac);
        e.state = State::Reachable;
        self.entries.insert((ifx, ip), e);
    }

    fn retrans(&self) -> Duration {
        Duration::from_millis(self.timers.retransmit_ms as u64)
    }

    /// An ARP message received on interface `ifx` (`msg` starts at the ARP header).
    /// Returns whether the kernel's TAP twin should see a copy (answers, which its own
    /// requests are waiting for, and gratuitous announcements).
    pub fn on_arp(
        &mut self,
        t: &Tables,
        ifx: u32,
        msg: &[u8],
        now: Instant,
        out: &mut Vec<Out>,
    ) -> bool {
        let Ok(r) = arp::Repr::parse(msg) else {
            self.stats.malformed += 1;
            return false;
        };
        let Some(ifc) = t.ifs.get(ifx as usize) else {
            return false;
        };
        let ours = ifc.v4.iter().any(|&(a, _)| a == r.target_ip);
        let sender = IpAddr::V4(Ipv4Addr::from(r.sender_ip));
        if on_link(ifc, sender) && r.sender_mac.is_unicast() && !r.sender_mac.is_zero() {
            // RFC 826: update an entry we have; create one when the request is for us.
            if self.entries.contains_key(&(ifx, sender)) || ours {
                self.confirm(ifx, sender, r.sender_mac, now, out);
            }
        }
        if r.op == arp::REQUEST && ours {
            let reply = arp::Repr {
                op: arp::REPLY,
                sender_mac: ifc.mac,
                sender_ip: r.target_ip,
                target_mac: r.sender_mac,
                target_ip: r.sender_ip,
            };
            out.push(Out::Send {
                to: Egress::of(ifc),
                frame: arp_frame(ifc, r.sender_mac, &reply),
            });
            self.stats.replies_sent += 1;
            return false;
        }
        r.op == arp::REPLY || r.sender_ip == r.target_ip
    }

    /// An ICMPv6 ND message received on `ifx` from `src_mac` (`ip6` starts at the IPv6 header).
    /// Returns whether the TAP twin should see a copy (advertisements, router discovery).
    pub fn on_nd(
        &mut self,
        t: &Tables,
        ifx: u32,
        src_mac: MacAddr,
        ip6: &[u8],
        now: Instant,
        out: &mut Vec<Out>,
    ) -> bool {
        let Some(ifc) = t.ifs.get(ifx as usize) else {
            return false;
        };
        if ip6.len() < 40 || ip6[6] != 58 {
            return true;
        }
        let plen = u16::from_be_bytes([ip6[4], ip6[5]]) as usize;
        let Some(icmp) = ip6.get(40..40 + plen) else {
            self.stats.malformed += 1;
            return false;
        };
        if !matches!(
            icmp.first(),
            Some(&nd::NEIGHBOR_SOLICIT | &nd::NEIGHBOR_ADVERT)
        ) {
            // Router solicitations and advertisements, redirects: the kernel's business.
            return true;
        }
        let src: [u8; 16] = ip6[8..24].try_into().expect("16 bytes");
        let dst: [u8; 16] = ip6[24..40].try_into().expect("16 bytes");
        let Ok(r) = nd::Repr::parse(icmp, &src, &dst, ip6[7]) else {
            self.stats.malformed += 1;
            return false;
        };
        let ll = nd::link_local(ifc.mac);
        if r.msg_type == nd::NEIGHBOR_SOLICIT {
            let ours = r.target == ll || ifc.v6.iter().any(|&(a, _)| a.to_be_bytes() == r.target);
            let unspecified = src == [0u8; 16];
            if !unspecified {
                if let Some(mac) = r.lladdr {
                    let sender = IpAddr::V6(Ipv6Addr::from(src));
                    if ours || self.entries.contains_key(&(ifx, sender)) {
                        self.confirm(ifx, sender, mac, now, out);
                    }
                }
            }
            if ours {
                // RFC 4861 7.2.4: to the soliciting address, or all-nodes for DAD.
                let (to, to_mac, flags) = if unspecified {
                    let all = [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
                    (
                        all,
                        nd::multicast_mac(&all),
                        nd::FLAG_ROUTER | nd::FLAG_OVERRIDE,
                    )
                } else {
                    (
                        src,
                        r.lladdr.unwrap_or(src_mac),
                        nd::FLAG_ROUTER | nd::FLAG_SOLICITED | nd::FLAG_OVERRIDE,
                    )
                };
                let na = nd::Repr {
                    msg_type: nd::NEIGHBOR_ADVERT,
                    flags,
                    target: r.target,
                    lladdr: Some(ifc.mac),
                };
                out.push(Out::Send {
                    to: Egress::of(ifc),
                    frame: nd_frame(ifc, to_mac, &r.target, &to, &na),
                });
                self.stats.replies_sent += 1;
            }
            return false;
        }
        // An advertisement: updates an entry we have (RFC 4861 7.2.5), and creates one when it
        // answers a solicitation of ours: sent to one of our addresses, solicited. The twin's
        // kernel solicits in the router's name (same MAC, same addresses), so what it resolves
        // the router knows too, as with ARP replies.
        let target = IpAddr::V6(Ipv6Addr::from(r.target));
        let mac = r.lladdr.unwrap_or(src_mac);
        let to_us = dst == ll || ifc.v6.iter().any(|&(a, _)| a.to_be_bytes() == dst);
        let answer = r.flags & nd::FLAG_SOLICITED != 0 && to_us;
        if (answer || self.entries.contains_key(&(ifx, target))) && mac.is_unicast() {
            self.confirm(ifx, target, mac, now, out);
        }
        true
    }

    fn confirm(&mut self, ifx: u32, ip: IpAddr, mac: MacAddr, now: Instant, out: &mut Vec<Out>) {
        let e = self
            .entries
            .entry((ifx, ip))
            .or_insert_with(|| Entry::incomplete(now));
        let changed = e.mac != Some(mac) || e.state == State::Incomplete;
        e.mac = Some(mac);
        e.state = State::Reachable;
        e.confirmed = now;
        e.tries = 0;
        if changed {
            self.stats.learned += 1;
            out.push(Out::Learned { ifx, ip, mac });
        }
    }

    /// A commit renumbered the interfaces: each entry follows its interface (`map` gives the
    /// new index of an old one); entries of interfaces that are gone are forgotten and what they
    /// held is freed. The next-hop table is scanned again.
    pub fn renumber(&mut self, map: impl Fn(u32) -> Option<u32>, out: &mut Vec<Out>) {
        let entries = std::mem::take(&mut self.entries);
        for ((ifx, ip), e) in entries {
            match map(ifx) {
                Some(n) => {
                    self.entries.insert((n, ip), e);
                }
                None => out.extend(e.held.into_iter().map(Out::Free)),
            }
        }
        self.backoff = std::mem::take(&mut self.backoff)
            .into_iter()
            .filter_map(|((ifx, ip), until)| Some(((map(ifx)?, ip), until)))
            .collect();
        self.scanned = 0;
    }

    /// The packets held for `(ifx, ip)`, to send now that the router's tables know its MAC.
    pub fn release(&mut self, ifx: u32, ip: IpAddr) -> (Option<MacAddr>, Vec<PktBuf>) {
        match self.entries.get_mut(&(ifx, ip)) {
            Some(e) => {
                let held = std::mem::take(&mut e.held);
                self.stats.released += held.len() as u64;
                (e.mac, held)
            }
            None => (None, Vec::new()),
        }
    }

    /// A packet the workers could not forward for want of a MAC address: hold it and resolve.
    /// `ip6` says which family the packet is; its next hop (`meta.next_hop`) names the neighbour
    /// or, for a connected subnet, the packet's own destination is the neighbour.
    pub fn glean(&mut self, t: &Tables, b: PktBuf, now: Instant, out: &mut Vec<Out>) {
        let Some((ifx, ip)) = glean_target(t, &b) else {
            out.push(Out::Free(b));
            return;
        };
        let hold = self.timers.hold;
        let e = self
            .entries
            .entry((ifx, ip))
            .or_insert_with(|| Entry::incomplete(now));
        if let Some(mac) = e.mac {
            // Resolved while this packet was on its way: the tables may not show it yet.
            e.held.push(b);
            out.push(Out::Learned { ifx, ip, mac });
            return;
        }
        if e.held.len() >= hold {
            self.stats.hold_dropped += 1;
            out.push(Out::Free(e.held.remove(0)));
        }
        e.held.push(b);
        self.stats.held += 1;
        if e.tries == 0 {
            self.solicit(t, ifx, ip, None, now, out);
        }
    }

    /// Starts resolving every next hop the routes name whose MAC is not known yet (a BGP next
    /// hop, say), as a router resolves its adjacencies when they are created, before traffic
    /// needs them: otherwise the first burst towards a new next hop overflows the hold queue.
    pub fn scan_next_hops(&mut self, t: &Tables, now: Instant, out: &mut Vec<Out>) {
        let id = t.next_hops.as_ptr() as usize;
        if id == self.scanned && self.backoff.is_empty() {
            return;
        }
        self.scanned = id;
        self.backoff.retain(|_, until| *until > now);
        for nh in t.next_hops.iter() {
            let NextHop::Glean {
                tx_if,
                neighbor: Some(ip),
            } = nh
            else {
                continue;
            };
            let k = (*tx_if, *ip);
            if self.entries.contains_key(&k) || self.backoff.contains_key(&k) {
                continue;
            }
            self.entries.insert(k, Entry::incomplete(now));
            self.solicit(t, k.0, k.1, None, now, out);
        }
    }

    /// Retransmissions, probes, failures; call every few tens of milliseconds.
    pub fn tick(&mut self, t: &Tables, now: Instant, out: &mut Vec<Out>) {
        let reachable = Duration::from_secs(self.timers.reachable_s as u64);
        let retries = self.timers.retries;
        let mut due = Vec::new();
        let mut gone = Vec::new();
        for (&k, e) in self.entries.iter_mut() {
            match e.state {
                State::Reachable if now >= e.confirmed + reachable => {
                    e.state = State::Probe;
                    e.tries = 0;
                    e.next = now;
                    due.push((k, e.mac));
                }
                State::Incomplete | State::Probe if now >= e.next => {
                    if e.tries >= retries {
                        gone.push(k);
                    } else {
                        due.push((k, if e.state == State::Probe { e.mac } else { None }));
                    }
                }
                _ => {}
            }
        }
        for ((ifx, ip), unicast) in due {
            self.solicit(t, ifx, ip, unicast, now, out);
        }
        for k in gone {
            let e = self.entries.remove(&k).expect("listed");
            if e.state == State::Probe {
                self.stats.lost += 1;
                out.push(Out::Lost { ifx: k.0, ip: k.1 });
            } else {
                self.stats.failed += 1;
                self.backoff.insert(k, now + FAILED_BACKOFF);
            }
            out.extend(e.held.into_iter().map(Out::Free));
        }
    }

    /// Sends a request (broadcast or solicited-node multicast), or a unicast probe to `unicast`.
    fn solicit(
        &mut self,
        t: &Tables,
        ifx: u32,
        ip: IpAddr,
        unicast: Option<MacAddr>,
        now: Instant,
        out: &mut Vec<Out>,
    ) {
        let retrans = self.retrans();
        if let Some(e) = self.entries.get_mut(&(ifx, ip)) {
            e.tries += 1;
            e.next = now + retrans;
        }
        let Some(ifc) = t.ifs.get(ifx as usize) else {
            return;
        };
        let frame = match ip {
            IpAddr::V4(a) => {
                let target = u32::from(a);
                let Some(&(src, _)) = ifc
                    .v4
                    .iter()
                    .find(|&&(n, l)| same_subnet4(n, target, l))
                    .or(ifc.v4.first())
                else {
                    return;
                };
                let req = arp::Repr {
                    op: arp::REQUEST,
                    sender_mac: ifc.mac,
                    sender_ip: src,
                    target_mac: MacAddr::ZERO,
                    target_ip: target,
                };
                arp_frame(ifc, unicast.unwrap_or(MacAddr::BROADCAST), &req)
            }
            IpAddr::V6(a) => {
                let target = a.octets();
                let src = if target[0] == 0xfe && target[1] & 0xc0 == 0x80 {
                    nd::link_local(ifc.mac)
                } else {
                    ifc.v6
                        .iter()
                        .find(|&&(n, l)| same_subnet6(n, u128::from(a), l))
                        .map(|&(n, _)| n.to_be_bytes())
                        .unwrap_or_else(|| nd::link_local(ifc.mac))
                };
                let (dst, dst_mac) = match unicast {
                    Some(m) => (target, m),
                    None => {
                        let g = nd::solicited_node(&target);
                        (g, nd::multicast_mac(&g))
                    }
                };
                let ns = nd::Repr {
                    msg_type: nd::NEIGHBOR_SOLICIT,
                    flags: 0,
                    target,
                    lladdr: Some(ifc.mac),
                };
                nd_frame(ifc, dst_mac, &src, &dst, &ns)
            }
        };
        self.stats.requests_sent += 1;
        out.push(Out::Send {
            to: Egress::of(ifc),
            frame,
        });
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn view(&self, now: Instant) -> Vec<NeighborView> {
        let mut v: Vec<NeighborView> = self
            .entries
            .iter()
            .map(|(&(ifx, ip), e)| NeighborView {
                ifx,
                ip,
                mac: e.mac.map(|m| m.to_string()),
                state: e.state.name(),
                age_s: now.saturating_duration_since(e.confirmed).as_secs_f64(),
                held: e.held.len(),
            })
            .collect();
        v.sort_by_key(|n| (n.ifx, n.ip));
        v
    }
}

/// The neighbour a gleaned packet waits for.
fn glean_target(t: &Tables, b: &PktBuf) -> Option<(u32, IpAddr)> {
    let NextHop::Glean { tx_if, neighbor } = t.next_hops.get(b.meta().next_hop as usize)? else {
        return None;
    };
    if let Some(ip) = neighbor {
        return Some((*tx_if, *ip));
    }
    let l3 = b.meta().l3_off as usize;
    let h = b.data().get(l3..)?;
    match h.first()? >> 4 {
        4 if h.len() >= 20 => Some((
            *tx_if,
            IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(&h[16..20]).ok()?)),
        )),
        6 if h.len() >= 40 => Some((
            *tx_if,
            IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&h[24..40]).ok()?)),
        )),
        _ => None,
    }
}

fn same_subnet4(a: u32, b: u32, len: u8) -> bool {
    let m = u32::MAX.checked_shl(32 - len as u32).unwrap_or(0);
    a & m == b & m
}

fn same_subnet6(a: u128, b: u128, len: u8) -> bool {
    let m = u128::MAX.checked_shl(128 - len as u32).unwrap_or(0);
    a & m == b & m
}

/// On one of the interface's subnets (not its own address), or IPv6 link-local.
fn on_link(ifc: &Interface, ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => {
            let a = u32::from(a);
            ifc.v4.iter().any(|&(n, l)| same_subnet4(n, a, l) && a != n)
        }
        IpAddr::V6(a) => {
            let o = a.octets();
            let a = u128::from(a);
            (o[0] == 0xfe && o[1] & 0xc0 == 0x80)
                || ifc.v6.iter().any(|&(n, l)| same_subnet6(n, a, l) && a != n)
        }
    }
}

/// The Ethernet (and VLAN) header of a frame from `ifc` to `dst`.
fn l2(ifc: &Interface, dst: MacAddr) -> ethernet::Header {
    ethernet::Header {
        dst,
        src: ifc.mac,
        tags: ethernet::Tags::from_vlan(ifc.vlan),
        ethertype: 0,
    }
}

fn arp_frame(ifc: &Interface, dst: MacAddr, r: &arp::Repr) -> Vec<u8> {
    arp::frame(l2(ifc, dst), r)
}

fn nd_frame(
    ifc: &Interface,
    dst_mac: MacAddr,
    src: &[u8; 16],
    dst: &[u8; 16],
    m: &nd::Repr,
) -> Vec<u8> {
    nd::frame(l2(ifc, dst_mac), src, dst, m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane::buffer::{BufCache, Pool};
    use dataplane::tables::Interface;

    const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const PEER: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

    fn tables() -> Tables {
        let mut t = Tables::empty(1000);
        t.ifs = vec![Interface {
            name: "p0".into(),
            port: 3,
            vlan: Some(100),
            s_vlan: None,
            mac: MAC,
            mtu: 1500,
            vrf: 0,
            up: true,
            v4: vec![(0xC000_0201, 24)],
            v6: vec![(0x2001_0db8_0000_0000_0000_0000_0000_0001, 64)],
            punt_local: true,
            l2: None,
            bvi: None,
        }]
        .into_boxed_slice();
        t.next_hops = vec![
            NextHop::NoRoute,
            NextHop::Glean {
                tx_if: 0,
                neighbor: Some("192.0.2.2".parse().unwrap()),
            },
            NextHop::Glean {
                tx_if: 0,
                neighbor: None,
            },
        ]
        .into_boxed_slice();
        t
    }

    fn timers() -> NeighborTimers {
        NeighborTimers {
            reachable_s: 30,
            retransmit_ms: 1000,
            retries: 3,
            hold: 2,
        }
    }

    /// A neighbour manager on `tables()`, with a pool, the time and a list for what it asks.
    fn fresh() -> (Tables, Neighbors, BufCache, Instant, Vec<Out>) {
        let nb = Neighbors::new(timers());
        let cache = BufCache::new(Pool::new(64));
        (tables(), nb, cache, Instant::now(), Vec::new())
    }

    fn sends(out: &[Out]) -> Vec<Vec<u8>> {
        out.iter()
            .filter_map(|o| match o {
                Out::Send {
                    to: Egress::Port(3),
                    frame,
                } => Some(frame.clone()),
                _ => None,
            })
            .collect()
    }

    /// A commit that moves the interface to another index takes its neighbours (and what they
    /// hold) along; one that removes it frees what they held.
    #[test]
    fn neighbours_follow_their_interface_across_a_renumbering_commit() {
        let (t, mut nb, mut cache, now, mut out) = fresh();
        let mut b = cache.alloc().unwrap();
        b.fill(&[0u8; 60]);
        b.meta_mut().next_hop = 1;
        nb.glean(&t, b, now, &mut out);
        out.clear();
        let ip: IpAddr = "192.0.2.2".parse().unwrap();
        nb.renumber(|ifx| (ifx == 0).then_some(5), &mut out);
        assert!(out.is_empty());
        assert!(
            nb.release(0, ip).1.is_empty(),
            "nothing left under the old index"
        );
        nb.renumber(|ifx| (ifx == 5).then_some(0), &mut out);
        assert_eq!(nb.view(now)[0].ifx, 0);
        nb.renumber(|_| None, &mut out);
        assert!(nb.is_empty());
        let freed: Vec<PktBuf> = out
            .drain(..)
            .filter_map(|o| match o {
                Out::Free(b) => Some(b),
                _ => None,
            })
            .collect();
        assert_eq!(freed.len(), 1, "the held packet is freed, not lost");
        for b in freed {
            cache.free(b);
        }
    }

    #[test]
    fn arp_resolves_holds_retries_and_answers() {
        let (t, mut nb, mut cache, now, mut out) = fresh();
        // Three packets for 192.0.2.2: one request, two held, the oldest dropped.
        for _ in 0..3 {
            let mut b = cache.alloc().unwrap();
            b.fill(&[0u8; 60]);
            b.meta_mut().next_hop = 1;
            nb.glean(&t, b, now, &mut out);
        }
        let f = sends(&out);
        assert_eq!(f.len(), 1);
        // Broadcast, tagged VLAN 100, ARP request from 192.0.2.1 for 192.0.2.2.
        assert_eq!(&f[0][0..6], &[0xff; 6]);
        assert_eq!(&f[0][12..16], &[0x81, 0, 0, 100]);
        let req = arp::Repr::parse(&f[0][18..]).unwrap();
        assert_eq!(
            (req.op, req.sender_ip, req.target_ip),
            (arp::REQUEST, 0xC000_0201, 0xC000_0202)
        );
        assert_eq!((nb.stats.held, nb.stats.hold_dropped), (3, 1));
        for o in out.drain(..) {
            if let Out::Free(b) = o {
                cache.free(b)
            }
        }
        // Retransmitted after a second, not before.
        nb.tick(&t, now + Duration::from_millis(500), &mut out);
        assert!(sends(&out).is_empty());
        nb.tick(&t, now + Duration::from_millis(1000), &mut out);
        assert_eq!(sends(&out).len(), 1);
        out.clear();
        // The reply: learned, and the two held packets released.
        let reply = arp::Repr {
            op: arp::REPLY,
            sender_mac: PEER,
            sender_ip: 0xC000_0202,
            target_mac: MAC,
            target_ip: 0xC000_0201,
        };
        let mut m = [0u8; arp::LEN];
        reply.emit(&mut m);
        assert!(
            nb.on_arp(&t, 0, &m, now, &mut out),
            "replies are copied to the TAP"
        );
        assert!(matches!(
            out[..],
            [Out::Learned {
                ifx: 0,
                mac: PEER,
                ..
            }]
        ));
        let (mac, held) = nb.release(0, "192.0.2.2".parse().unwrap());
        assert_eq!((mac, held.len()), (Some(PEER), 2));
        for b in held {
            cache.free(b);
        }
        out.clear();
        // A request for the router's address is answered (and not copied up).
        let ask = arp::Repr {
            op: arp::REQUEST,
            sender_mac: PEER,
            sender_ip: 0xC000_0209,
            target_mac: MacAddr::ZERO,
            target_ip: 0xC000_0201,
        };
        ask.emit(&mut m);
        assert!(!nb.on_arp(&t, 0, &m, now, &mut out));
        let f = sends(&out);
        let ans = arp::Repr::parse(&f[0][18..]).unwrap();
        assert_eq!(
            (ans.op, ans.sender_mac, ans.target_ip),
            (arp::REPLY, MAC, 0xC000_0209)
        );
        // The asker was learned too (RFC 826).
        assert!(out
            .iter()
            .any(|o| matches!(o, Out::Learned { mac: PEER, .. })));
        out.clear();
        // After reachable-time: unicast probes; three unanswered: lost.
        let later = now + Duration::from_secs(31);
        nb.tick(&t, later, &mut out);
        let f = sends(&out);
        assert_eq!(f.len(), 2, "both entries probed");
        assert!(f.iter().all(|f| f[0..6] == PEER.0));
        out.clear();
        for s in 1..=3 {
            nb.tick(&t, later + Duration::from_secs(s), &mut out);
        }
        let lost = out.iter().filter(|o| matches!(o, Out::Lost { .. })).count();
        assert_eq!(lost, 2);
        assert!(nb.is_empty());
    }

    #[test]
    fn next_hops_are_resolved_before_traffic_needs_them() {
        let t = tables();
        let mut nb = Neighbors::new(timers());
        let now = Instant::now();
        let mut out = Vec::new();
        nb.scan_next_hops(&t, now, &mut out);
        // Next hop 1 names 192.0.2.2; next hop 2 (a connected subnet) names no one.
        let f = sends(&out);
        assert_eq!(f.len(), 1);
        assert_eq!(
            arp::Repr::parse(&f[0][18..]).unwrap().target_ip,
            0xC000_0202
        );
        out.clear();
        nb.scan_next_hops(&t, now, &mut out);
        assert!(out.is_empty(), "asked once");
        // No answer: failed, and the scan waits before asking again.
        for s in 1..=3 {
            nb.tick(&t, now + Duration::from_secs(s), &mut out);
        }
        assert_eq!(nb.stats.failed, 1);
        out.clear();
        nb.scan_next_hops(&t, now + Duration::from_secs(4), &mut out);
        assert!(out.is_empty(), "backing off");
        nb.scan_next_hops(&t, now + Duration::from_secs(14), &mut out);
        assert_eq!(sends(&out).len(), 1, "asked again after the back-off");
    }

    #[test]
    fn unanswered_resolution_fails_and_frees_held() {
        let (t, mut nb, mut cache, now, mut out) = fresh();
        // A connected-subnet glean: the neighbour is the packet's destination.
        let mut b = cache.alloc().unwrap();
        let mut f = vec![0u8; 18 + 20];
        f[18] = 0x45;
        f[18 + 16..18 + 20].copy_from_slice(&[192, 0, 2, 77]);
        b.fill(&f);
        b.meta_mut().l3_off = 18;
        b.meta_mut().next_hop = 2;
        nb.glean(&t, b, now, &mut out);
        let req = arp::Repr::parse(&sends(&out)[0][18..]).unwrap();
        assert_eq!(req.target_ip, 0xC000_024D);
        out.clear();
        for s in 1..=3 {
            nb.tick(&t, now + Duration::from_secs(s), &mut out);
        }
        assert_eq!(sends(&out).len(), 2, "two retransmissions");
        assert!(out.iter().any(|o| matches!(o, Out::Free(_))));
        assert_eq!(nb.stats.failed, 1);
        for o in out {
            if let Out::Free(b) = o {
                cache.free(b)
            }
        }
    }

    #[test]
    fn neighbor_solicitation_is_answered_and_advertisement_learned() {
        let t = tables();
        let mut nb = Neighbors::new(timers());
        let now = Instant::now();
        let mut out = Vec::new();
        let ours: [u8; 16] = "2001:db8::1".parse::<Ipv6Addr>().unwrap().octets();
        let peer: [u8; 16] = "2001:db8::2".parse::<Ipv6Addr>().unwrap().octets();
        let ns = nd::Repr {
            msg_type: nd::NEIGHBOR_SOLICIT,
            flags: 0,
            target: ours,
            lladdr: Some(PEER),
        };
        let dst = nd::solicited_node(&ours);
        let mut ip6 = vec![0x60, 0, 0, 0, 0, 32, 58, 255];
        ip6.extend_from_slice(&peer);
        ip6.extend_from_slice(&dst);
        ip6.resize(72, 0);
        ns.emit(&mut ip6[40..], &peer, &dst);
        assert!(!nb.on_nd(&t, 0, PEER, &ip6, now, &mut out));
        let f = sends(&out);
        assert_eq!(f.len(), 1);
        // To the solicitor's MAC, from ours, an NA for our address with our MAC.
        assert_eq!(&f[0][0..6], &PEER.0);
        let na = nd::Repr::parse(&f[0][18 + 40..], &ours, &peer, 255).unwrap();
        assert_eq!(
            (na.msg_type, na.target, na.lladdr),
            (nd::NEIGHBOR_ADVERT, ours, Some(MAC))
        );
        assert!(na.flags & nd::FLAG_SOLICITED != 0);
        assert!(out
            .iter()
            .any(|o| matches!(o, Out::Learned { mac: PEER, .. })));
        // A hop limit below 255 came through a router: ignored and counted.
        out.clear();
        ip6[7] = 64;
        nb.on_nd(&t, 0, PEER, &ip6, now, &mut out);
        assert!(out.is_empty());
        assert_eq!(nb.stats.malformed, 1);
    }
}
