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
//! - a policer per class per worker (the punt table: [`class`], [`policer`]), so an ARP flood
//!   cannot crowd out BGP keepalives, and no flood of any kind reaches the control plane faster
//!   than it can read (the ring's fill level is a second limit: a full ring drops and counts);
//! - the policer runs in the worker before the hand-over, so a flood costs the worker a token
//!   check and a free, nothing more.

pub mod class;
pub mod doorbell;
pub mod policer;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rtrb::{Consumer, Producer, RingBuffer};

use crate::buffer::PktBuf;

pub use class::{class_ip4, class_ip6, class_l2, Limit, PuntClass, CLASSES};
pub use policer::{Outcome, PuntClassCounters, PuntLimits, PuntPolicer};

/// A punted frame. `meta.rx_if` and `meta.l3_off` are set; for `Glean`, `meta.next_hop` is the
/// unresolved next hop and `tx_if` the interface it leads out of. Those indexes are the
/// tables' of `generation` ([`crate::tables::Tables::generation`]).
pub struct Punted {
    pub buf: PktBuf,
    pub class: PuntClass,
    pub tx_if: u32,
    pub generation: u64,
}

/// A frame to send as it is: out of a port, or into a bridge through its routed interface.
pub struct Injected {
    pub buf: PktBuf,
    pub to: Egress,
}

/// Where an injected frame leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Egress {
    /// Out of this port, as it is.
    Port(u16),
    /// Into the bridge of this id (`Bridge::id`, stable across commits), as if its routed
    /// interface (BVI) had received it: switched to the member its destination is on, or
    /// flooded (`node::bvi_output`).
    Bridge(u16),
}

impl Egress {
    /// The way out of interface `ifc`.
    pub fn of(ifc: &crate::tables::Interface) -> Egress {
        match ifc.bvi {
            Some(id) => Egress::Bridge(id),
            None => Egress::Port(ifc.port),
        }
    }
}

/// The rings' size, each direction, per worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PuntConfig {
    pub ring: usize,
}

impl Default for PuntConfig {
    fn default() -> Self {
        Self { ring: 4096 }
    }
}

/// Counters shared by all workers (the per-class counts are each worker's own:
/// `WorkerCounters::punt`).
#[derive(Default)]
pub struct PuntCounters {
    pub injected: AtomicU64,
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
    /// Wakes the control plane's thread when a worker punts while it sleeps; None if the
    /// system gave no eventfd (the thread then wakes by its poll timeout alone).
    pub doorbell: Option<doorbell::Doorbell>,
}

impl PuntHub {
    pub fn new(cfg: PuntConfig) -> Arc<Self> {
        Arc::new(Self {
            cfg,
            new_links: Mutex::new(Vec::new()),
            counters: PuntCounters::default(),
            doorbell: doorbell::Doorbell::new().ok(),
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
            hub: self.clone(),
        }
    }

    /// The control ends attached since the last call.
    pub fn take_new(&self) -> Vec<ControlLink> {
        std::mem::take(&mut *self.new_links.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// A worker's end: its rings (its policers are in the worker's `Ctx`, beside the slow
/// path's).
pub struct WorkerPunt {
    to_cp: Producer<Punted>,
    from_cp: Consumer<Injected>,
    hub: Arc<PuntHub>,
}

impl WorkerPunt {
    /// Hands `buf` to the control plane; gives it back if the ring is full (the control plane
    /// is behind): the caller drops and counts it.
    pub fn offer(
        &mut self,
        buf: PktBuf,
        class: PuntClass,
        tx_if: u32,
        generation: u64,
    ) -> Result<(), PktBuf> {
        self.to_cp
            .push(Punted {
                buf,
                class,
                tx_if,
                generation,
            })
            .map_err(|rtrb::PushError::Full(p)| p.buf)?;
        if let Some(d) = &self.hub.doorbell {
            d.ring();
        }
        Ok(())
    }

    /// True when the control plane has frames for this worker to send (one atomic load).
    #[inline]
    pub fn inject_pending(&self) -> bool {
        !self.from_cp.is_empty()
    }

    /// Moves up to `max` injected frames onto the per-port transmit vectors, and those for a
    /// bridge onto `bridged` (with `meta.rx_if` its routed interface in `t`, for bvi-output);
    /// frames for ports beyond `out`, or for a bridge `t` has no routed interface for, are
    /// returned in `orphans` for the caller to free and count.
    pub fn drain_inject(
        &mut self,
        t: &crate::tables::Tables,
        out: &mut [Vec<PktBuf>],
        bridged: &mut Vec<PktBuf>,
        orphans: &mut Vec<PktBuf>,
        max: usize,
    ) -> usize {
        let mut n = 0;
        while n < max {
            let Ok(mut i) = self.from_cp.pop() else { break };
            match i.to {
                Egress::Port(p) => match out.get_mut(p as usize) {
                    Some(v) => v.push(i.buf),
                    None => orphans.push(i.buf),
                },
                Egress::Bridge(id) => match t.bridges.iter().find(|b| b.id == id) {
                    Some(b) if b.bvi != crate::tables::NO_IF && i.buf.len() >= 14 => {
                        let group = i.buf.data()[0] & 1 != 0;
                        let m = i.buf.meta_mut();
                        m.rx_if = b.bvi;
                        m.rx_port = crate::tables::BVI_PORT;
                        m.l3_off = 14;
                        m.l2_group = group;
                        bridged.push(i.buf);
                    }
                    _ => orphans.push(i.buf),
                },
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::{BufCache, Pool};

    #[test]
    fn the_ring_limits_and_inject_reaches_the_ports() {
        let hub = PuntHub::new(PuntConfig { ring: 64 });
        let mut w = hub.attach(0);
        let mut link = hub.take_new().pop().unwrap();
        let mut cache = BufCache::new(Pool::new(512));
        let mut full = 0;
        for _ in 0..100 {
            if let Err(b) = w.offer(cache.alloc().unwrap(), PuntClass::Bgp, 0, 0) {
                full += 1;
                cache.free(b);
            }
        }
        assert_eq!(full, 100 - 64);
        let mut n = 0;
        while let Ok(p) = link.from_worker.pop() {
            assert_eq!(p.class, PuntClass::Bgp);
            cache.free(p.buf);
            n += 1;
        }
        assert_eq!(n, 64);
        // Inject: frames reach their port's vector, or their bridge's routed interface;
        // unknown ports and bridges without one are orphans.
        let h = crate::graph::harness::Harness::with_bvi();
        for to in [
            Egress::Port(0),
            Egress::Port(1),
            Egress::Port(7),
            Egress::Bridge(7),
            Egress::Bridge(8),
        ] {
            let mut b = cache.alloc().unwrap();
            b.fill(&[0xff; 60]);
            assert!(link.to_worker.push(Injected { buf: b, to }).is_ok());
        }
        assert!(w.inject_pending());
        let mut out = vec![Vec::new(), Vec::new()];
        let (mut bridged, mut orphans) = (Vec::new(), Vec::new());
        assert_eq!(
            w.drain_inject(&h.t, &mut out, &mut bridged, &mut orphans, 256),
            5
        );
        assert_eq!((out[0].len(), out[1].len(), orphans.len()), (1, 1, 2));
        assert_eq!(bridged.len(), 1);
        let m = bridged[0].meta();
        assert_eq!((m.rx_if, m.l3_off, m.l2_group), (7, 14, true));
        assert_eq!(hub.counters.injected.load(Ordering::Relaxed), 5);
        for v in out.iter_mut().chain([&mut orphans, &mut bridged]) {
            cache.free_all(v);
        }
        drop(w);
        assert!(link.is_abandoned());
    }
}
