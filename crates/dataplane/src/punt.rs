//! Punt and inject: the data plane's door to the control plane, in the manner of VPP's linux-cp.
//!
//! Frames the workers cannot finish (ARP and ND, routing protocols and anything else addressed
//! to the router, packets waiting for a neighbour's MAC address) are *punted*: each worker hands
//! them to the control plane through its own single-producer ring, after a per-class policer.
//! The control plane (`control::punt`) answers ARP and ND, holds packets while it resolves a
//! neighbour, and passes the rest up the interface's TAP twin to the kernel, where FRR runs.
//! Frames going the other way (what the kernel sends on a TAP, ARP requests, held packets once
//! resolved) are *injected*: pushed onto a worker's inject ring with the port to leave by, and
//! the worker sends them with its next transmit burst.
//!
//! Why this shape:
//! - one ring pair per worker, so neither side ever takes a lock per frame;
//! - a policer per class per worker, so an ARP flood cannot crowd out BGP keepalives, and no
//!   flood of any kind reaches the control plane faster than it can read (the ring's fill level
//!   is a second limit: a full ring drops and counts);
//! - the policer runs in the worker before the hand-over, so a flood costs the worker a token
//!   check and a free, nothing more.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rtrb::{Consumer, Producer, RingBuffer};

use crate::buffer::PktBuf;
use crate::node::TokenBucket;

/// Why a frame goes to the control plane. Each class has its own policer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PuntClass {
    /// ARP, and ICMPv6 neighbour and router discovery.
    Neighbor = 0,
    /// Routing and control protocols: OSPF, BGP, BFD, LDP, PIM, IGMP, MLD, VRRP, RIP.
    Routing = 1,
    /// Everything else addressed to the router (ICMP echo, SSH, ...).
    Local = 2,
    /// A forwarded packet whose next hop's MAC address is not known yet.
    Glean = 3,
}

pub const CLASSES: usize = 4;

impl PuntClass {
    pub const ALL: [PuntClass; CLASSES] = [
        PuntClass::Neighbor,
        PuntClass::Routing,
        PuntClass::Local,
        PuntClass::Glean,
    ];
    pub fn name(self) -> &'static str {
        match self {
            PuntClass::Neighbor => "neighbor",
            PuntClass::Routing => "routing",
            PuntClass::Local => "local",
            PuntClass::Glean => "glean",
        }
    }
}

/// A punted frame. `meta.rx_if` and `meta.l3_off` are set; for `Glean`, `meta.next_hop` is the
/// unresolved next hop and `tx_if` the interface it leads out of.
pub struct Punted {
    pub buf: PktBuf,
    pub class: PuntClass,
    pub tx_if: u32,
}

/// A frame to send as it is out of `port`.
pub struct Injected {
    pub buf: PktBuf,
    pub port: u16,
}

/// Policer rates, frames per second per worker, by class (indexed by `PuntClass as usize`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PuntConfig {
    pub rates: [u32; CLASSES],
    /// Ring size, each direction, per worker.
    pub ring: usize,
}

impl Default for PuntConfig {
    fn default() -> Self {
        Self {
            // Routing traffic is what keeps sessions up: the largest share. A BGP full-table
            // transfer is about one 1,400-byte segment per 300 prefixes.
            rates: [2_000, 20_000, 2_000, 2_000],
            ring: 4096,
        }
    }
}

/// Counters shared by all workers, by class.
#[derive(Default)]
pub struct PuntCounters {
    pub punted: [AtomicU64; CLASSES],
    pub policed: [AtomicU64; CLASSES],
    pub ring_full: [AtomicU64; CLASSES],
    pub injected: AtomicU64,
}

impl PuntCounters {
    pub fn get(c: &[AtomicU64; CLASSES], class: PuntClass) -> u64 {
        c[class as usize].load(Ordering::Relaxed)
    }
}

/// The control plane's end of one worker's rings.
pub struct ControlLink {
    pub worker: usize,
    pub from_worker: Consumer<Punted>,
    pub to_worker: Producer<Injected>,
}

impl ControlLink {
    /// The worker is gone (retired or stopped) and will never read or write again.
    pub fn is_abandoned(&self) -> bool {
        self.from_worker.is_abandoned()
    }
}

/// Where workers attach their rings and the control plane collects them.
pub struct PuntHub {
    pub cfg: PuntConfig,
    new_links: Mutex<Vec<ControlLink>>,
    pub counters: PuntCounters,
}

impl PuntHub {
    pub fn new(cfg: PuntConfig) -> Arc<Self> {
        Arc::new(Self {
            cfg,
            new_links: Mutex::new(Vec::new()),
            counters: PuntCounters::default(),
        })
    }

    /// A worker's end of a new ring pair; the control end waits in the hub for `take_new`.
    pub fn attach(self: &Arc<Self>, worker: usize) -> WorkerPunt {
        let (to_cp, from_worker) = RingBuffer::new(self.cfg.ring);
        let (to_worker, from_cp) = RingBuffer::new(self.cfg.ring);
        self.new_links
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ControlLink {
                worker,
                from_worker,
                to_worker,
            });
        WorkerPunt {
            to_cp,
            from_cp,
            buckets: self.cfg.rates.map(TokenBucket::new),
            hub: self.clone(),
            punted: [0; CLASSES],
            policed: [0; CLASSES],
            ring_full: [0; CLASSES],
        }
    }

    /// The control ends attached since the last call.
    pub fn take_new(&self) -> Vec<ControlLink> {
        std::mem::take(&mut *self.new_links.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// What a worker does with a frame it offers to punt.
pub enum Offer {
    Taken,
    /// Over the class's rate: the caller drops and counts it.
    Policed(PktBuf),
    /// The ring is full: the control plane is behind. The caller drops and counts it.
    Full(PktBuf),
}

/// A worker's end: its rings and policers. Counts locally and publishes once per vector.
pub struct WorkerPunt {
    to_cp: Producer<Punted>,
    from_cp: Consumer<Injected>,
    buckets: [TokenBucket; CLASSES],
    hub: Arc<PuntHub>,
    punted: [u64; CLASSES],
    policed: [u64; CLASSES],
    ring_full: [u64; CLASSES],
}

impl WorkerPunt {
    /// Adds the tokens earned since the last vector.
    pub fn refill(&mut self, now_ns: u64) {
        for b in &mut self.buckets {
            b.refill(now_ns);
        }
    }

    pub fn offer(&mut self, buf: PktBuf, class: PuntClass, tx_if: u32) -> Offer {
        let c = class as usize;
        if !self.buckets[c].take() {
            self.policed[c] += 1;
            return Offer::Policed(buf);
        }
        match self.to_cp.push(Punted { buf, class, tx_if }) {
            Ok(()) => {
                self.punted[c] += 1;
                Offer::Taken
            }
            Err(rtrb::PushError::Full(p)) => {
                self.ring_full[c] += 1;
                Offer::Full(p.buf)
            }
        }
    }

    /// True when the control plane has frames for this worker to send (one atomic load).
    #[inline]
    pub fn inject_pending(&self) -> bool {
        !self.from_cp.is_empty()
    }

    /// Moves up to `max` injected frames onto the per-port transmit vectors; frames for ports
    /// beyond `out` are returned in `orphans` for the caller to free and count.
    pub fn drain_inject(
        &mut self,
        out: &mut [Vec<PktBuf>],
        orphans: &mut Vec<PktBuf>,
        max: usize,
    ) -> usize {
        let mut n = 0;
        while n < max {
            let Ok(i) = self.from_cp.pop() else { break };
            match out.get_mut(i.port as usize) {
                Some(v) => v.push(i.buf),
                None => orphans.push(i.buf),
            }
            n += 1;
        }
        if n > 0 {
            self.hub
                .counters
                .injected
                .fetch_add(n as u64, Ordering::Relaxed);
        }
        n
    }

    /// Publishes the counts of this vector.
    pub fn flush_counters(&mut self) {
        let c = &self.hub.counters;
        for i in 0..CLASSES {
            for (local, shared) in [
                (&mut self.punted[i], &c.punted[i]),
                (&mut self.policed[i], &c.policed[i]),
                (&mut self.ring_full[i], &c.ring_full[i]),
            ] {
                if *local != 0 {
                    shared.fetch_add(*local, Ordering::Relaxed);
                    *local = 0;
                }
            }
        }
    }
}

/// The class of an IPv4 packet addressed to the router: `h` is the IPv4 header onwards.
pub fn class_ip4(h: &[u8]) -> PuntClass {
    if h.len() < 20 {
        return PuntClass::Local;
    }
    let ihl = (h[0] & 0x0f) as usize * 4;
    let ports = h.get(ihl..ihl + 4).map(|p| {
        (
            u16::from_be_bytes([p[0], p[1]]),
            u16::from_be_bytes([p[2], p[3]]),
        )
    });
    class_l4(h[9], ports)
}

/// The class of an IPv6 packet addressed to the router (or to a link-scope group).
pub fn class_ip6(h: &[u8]) -> PuntClass {
    let Ok(p) = packet::ipv6::Packet::new_checked(h) else {
        return PuntClass::Local;
    };
    let Some((proto, off, _)) = p.transport() else {
        return PuntClass::Local;
    };
    if proto == 58 {
        return match h.get(off) {
            // Router and neighbour discovery, redirects.
            Some(133..=137) => PuntClass::Neighbor,
            // MLD queries and reports.
            Some(130..=132 | 143) => PuntClass::Routing,
            _ => PuntClass::Local,
        };
    }
    let ports = h.get(off..off + 4).map(|p| {
        (
            u16::from_be_bytes([p[0], p[1]]),
            u16::from_be_bytes([p[2], p[3]]),
        )
    });
    class_l4(proto, ports)
}

fn class_l4(proto: u8, ports: Option<(u16, u16)>) -> PuntClass {
    const ROUTING_TCP: [u16; 2] = [179, 646]; // BGP, LDP
    const ROUTING_UDP: [u16; 6] = [646, 3784, 3785, 4784, 520, 521]; // LDP, BFD, RIP
    match proto {
        // IGMP, OSPF, PIM, VRRP.
        2 | 89 | 103 | 112 => PuntClass::Routing,
        6 | 17 => match ports {
            Some((s, d)) => {
                let list: &[u16] = if proto == 6 {
                    &ROUTING_TCP
                } else {
                    &ROUTING_UDP
                };
                if list.contains(&s) || list.contains(&d) {
                    PuntClass::Routing
                } else {
                    PuntClass::Local
                }
            }
            None => PuntClass::Local,
        },
        _ => PuntClass::Local,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::{BufCache, Pool};

    #[test]
    fn policer_and_ring_limit_each_class() {
        let hub = PuntHub::new(PuntConfig {
            rates: [10, 1000, 10, 10],
            ring: 64,
        });
        let mut w = hub.attach(0);
        let mut link = hub.take_new().pop().unwrap();
        let mut cache = BufCache::new(Pool::new(512));
        w.refill(0);
        // Neighbor: a burst of 10 passes, the rest is policed.
        let (mut taken, mut policed) = (0, 0);
        for _ in 0..100 {
            match w.offer(cache.alloc().unwrap(), PuntClass::Neighbor, 0) {
                Offer::Taken => taken += 1,
                Offer::Policed(b) | Offer::Full(b) => {
                    policed += 1;
                    cache.free(b)
                }
            }
        }
        assert_eq!((taken, policed), (10, 90));
        // Routing has its own bucket (burst 100), but the ring holds 64 - 10 more.
        let mut full = 0;
        for _ in 0..100 {
            match w.offer(cache.alloc().unwrap(), PuntClass::Routing, 0) {
                Offer::Taken => {}
                Offer::Full(b) => {
                    full += 1;
                    cache.free(b)
                }
                Offer::Policed(b) => cache.free(b),
            }
        }
        assert!(full > 0);
        w.flush_counters();
        assert_eq!(
            PuntCounters::get(&hub.counters.punted, PuntClass::Neighbor),
            10
        );
        assert_eq!(
            PuntCounters::get(&hub.counters.policed, PuntClass::Neighbor),
            90
        );
        assert_eq!(
            PuntCounters::get(&hub.counters.ring_full, PuntClass::Routing),
            full
        );
        // One second later the neighbor class has earned its rate again.
        w.refill(1_000_000_000);
        let mut n = 0;
        while let Ok(p) = link.from_worker.pop() {
            cache.free(p.buf);
            n += 1;
        }
        assert_eq!(n, 64);
        // Inject: frames reach their port's vector, unknown ports are orphans.
        for port in [0u16, 1, 7] {
            let b = cache.alloc().unwrap();
            assert!(link.to_worker.push(Injected { buf: b, port }).is_ok());
        }
        assert!(w.inject_pending());
        let mut out = vec![Vec::new(), Vec::new()];
        let mut orphans = Vec::new();
        assert_eq!(w.drain_inject(&mut out, &mut orphans, 256), 3);
        assert_eq!((out[0].len(), out[1].len(), orphans.len()), (1, 1, 1));
        assert_eq!(hub.counters.injected.load(Ordering::Relaxed), 3);
        for v in out.iter_mut().chain([&mut orphans]) {
            cache.free_all(v);
        }
        drop(w);
        assert!(link.is_abandoned());
    }

    #[test]
    fn protocols_are_classified() {
        let mut v4 = [0u8; 28];
        v4[0] = 0x45;
        v4[9] = 89;
        assert_eq!(class_ip4(&v4), PuntClass::Routing);
        v4[9] = 6;
        v4[22..24].copy_from_slice(&179u16.to_be_bytes());
        assert_eq!(class_ip4(&v4), PuntClass::Routing);
        v4[22..24].copy_from_slice(&22u16.to_be_bytes());
        assert_eq!(class_ip4(&v4), PuntClass::Local);
        v4[9] = 1;
        assert_eq!(class_ip4(&v4), PuntClass::Local);
        let mut v6 = [0u8; 48];
        v6[0] = 0x60;
        v6[5] = 8;
        v6[6] = 58;
        v6[40] = 135;
        assert_eq!(class_ip6(&v6), PuntClass::Neighbor);
        v6[40] = 128;
        assert_eq!(class_ip6(&v6), PuntClass::Local);
        v6[6] = 89;
        assert_eq!(class_ip6(&v6), PuntClass::Routing);
        assert_eq!(class_ip6(&v6[..10]), PuntClass::Local);
    }
}
