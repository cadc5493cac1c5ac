//! The multicast FIB: per VRF, (S,G) and (*,G) routes, each with the interface its traffic
//! must arrive on (the RPF interface) and the interfaces it is replicated to.
//!
//! Written by the control plane (the mirror of the routing namespace's kernel multicast cache,
//! which pimd programs, and the config's static routes); read by the workers for every routed
//! multicast packet (`node::ip_mcast`), without a lock: a route is an immutable [`Mroute`] in a
//! slot of an open-addressed array of `ArcSwapOption`, replaced whole when it changes, so a
//! reader sees the old output list or the new one, never a mix, and a change is forwarded by
//! from the next packet, with no pause and no new `Tables`.
//!
//! A slot, once claimed by a key, keeps it: a deleted route leaves an empty one behind (no
//! interfaces, `live` false), so readers probe without a lock and never meet a hole that was
//! once full. When the array fills with such leftovers, the writer makes a new one of the live
//! routes and swaps it in whole ([`Mfib::set`]); readers on the old array finish on it.
//!
//! Interface indexes are those of one generation of the tables (`Tables::generation`): a commit
//! that renumbers interfaces makes a new FIB from the control plane's copy and publishes it with
//! its tables.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arc_swap::{ArcSwap, ArcSwapOption};

/// A route's key. IPv4 addresses are in the low 32 bits; `source` 0 is (*,G).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MrouteKey {
    pub vrf: u32,
    pub v6: bool,
    pub source: u128,
    pub group: u128,
}

impl MrouteKey {
    /// The (*,G) key of the same group.
    pub fn any_source(self) -> MrouteKey {
        MrouteKey { source: 0, ..self }
    }

    #[inline(always)]
    fn hash(&self) -> usize {
        let s = (self.source as u64) ^ ((self.source >> 64) as u64).rotate_left(23);
        let g = (self.group as u64) ^ ((self.group >> 64) as u64).rotate_left(41);
        let x = (s.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ g).wrapping_mul(0xff51_afd7_ed55_8ccd)
            ^ u64::from(self.vrf) << 1
            ^ u64::from(self.v6);
        (x ^ x >> 29) as usize
    }
}

/// Where a route comes from, which decides what goes up to the control plane besides the
/// routed copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The config's: nothing goes up.
    Static,
    /// The kernel's multicast cache (pimd's): a keepalive copy every [`KEEPALIVE_MS`], the
    /// first with the route's first packet, at TTL 1 (the kernel counts it and sends it out of
    /// none of its twins).
    Kernel,
    /// The kernel's, with an output the data plane does not have (pimd's register device,
    /// while a first-hop router registers the source with the RP): every packet also goes up,
    /// within the `mcast-data` punt class's rate, for the kernel to hand pimd.
    KernelRegistering,
}

/// One output interface: where copies go, if the packet's TTL (hop limit) is above `ttl`
/// (the kernel's threshold: 1 forwards every packet that may be forwarded at all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Oif {
    pub ifx: u32,
    pub ttl: u8,
}

/// What one route's traffic did, kept across the route's versions.
#[derive(Debug, Default)]
pub struct MrouteCounters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Copies sent (a packet to 24 interfaces is 24).
    pub replicas: AtomicU64,
    /// Packets that arrived on another interface than the RPF one.
    pub wrong_if: AtomicU64,
    /// When (ms on the FIB's clock) a copy last went to the control plane to keep the
    /// kernel's entry alive (every [`KEEPALIVE_MS`]); 0 before the first.
    pub last_keepalive_ms: AtomicU64,
}

/// One route as the workers read it.
#[derive(Debug)]
pub struct Mroute {
    pub key: MrouteKey,
    /// The interface its traffic must arrive on; [`crate::tables::NO_IF`]: none (dropped).
    pub iif: u32,
    pub oifs: Box<[Oif]>,
    /// False for what a deleted route leaves in its slot.
    pub live: bool,
    /// Where it comes from. A kernel route's owner (pimd) deletes it when the kernel's
    /// counters for it stop moving: a copy of its traffic goes up every [`KEEPALIVE_MS`] so
    /// that they move.
    pub origin: Origin,
    pub counters: Arc<MrouteCounters>,
}

/// How often a kernel route's traffic is copied up to keep the kernel's counters moving. pimd's
/// keepalive timer is 210 s (RFC 7761 4.11) and it reads the counters more often than that.
pub const KEEPALIVE_MS: u64 = 5_000;

/// The FIB's counters.
#[derive(Debug, Default)]
pub struct MfibCounters {
    /// Routes refused with the table full of live routes.
    pub table_full: AtomicU64,
    /// Times the array was made again without the deleted routes' leftovers.
    pub compactions: AtomicU64,
}

/// A route as `show ip mroute` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MrouteView {
    pub key: MrouteKey,
    pub iif: u32,
    pub oifs: Vec<Oif>,
    pub origin: Origin,
    pub packets: u64,
    pub bytes: u64,
    pub replicas: u64,
    pub wrong_if: u64,
}

type Slots = Box<[ArcSwapOption<Mroute>]>;

pub struct Mfib {
    slots: ArcSwap<Slots>,
    /// Slots claimed (live routes and leftovers), and live routes.
    used: AtomicUsize,
    live: AtomicUsize,
    capacity: usize,
    epoch: Instant,
    /// Serializes writers (the mirror, the config, the sweeps).
    write: Mutex<()>,
    pub counters: MfibCounters,
}

/// A route refused because the FIB holds its capacity of live routes.
#[derive(Debug, PartialEq, Eq)]
pub struct Full;

fn new_slots(n: usize) -> Arc<Slots> {
    Arc::new((0..n).map(|_| ArcSwapOption::empty()).collect())
}

impl Mfib {
    /// A FIB for `routes` routes in all VRFs together.
    pub fn new(routes: usize) -> Mfib {
        let n = (routes.max(16) * 2).next_power_of_two();
        Mfib {
            slots: ArcSwap::new(new_slots(n)),
            used: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            capacity: routes.max(16),
            epoch: Instant::now(),
            write: Mutex::new(()),
            counters: MfibCounters::default(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Live routes.
    pub fn len(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The FIB's clock, in ms (never 0).
    #[inline(always)]
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    /// Calls `f` with the live route of `key`, if there is one.
    #[inline(always)]
    pub fn with<R>(&self, key: MrouteKey, f: impl FnOnce(Option<&Mroute>) -> R) -> R {
        let slots = self.slots.load();
        let mask = slots.len() - 1;
        let mut i = key.hash() & mask;
        for _ in 0..slots.len() {
            let g = slots[i].load();
            match g.as_deref() {
                None => return f(None),
                Some(r) if r.key == key => return f(r.live.then_some(r)),
                Some(_) => i = (i + 1) & mask,
            }
        }
        f(None)
    }

    /// The (S,G) route of a packet from `source` to `group`, else the group's (*,G).
    #[inline(always)]
    pub fn lookup<R>(&self, key: MrouteKey, f: impl FnOnce(Option<&Mroute>) -> R) -> R {
        let mut f = Some(f);
        let found = self.with(key, |r| r.map(|r| (f.take().expect("once"))(Some(r))));
        match found {
            Some(out) => out,
            None => self.with(key.any_source(), |r| (f.take().expect("once"))(r)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.write.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The slot index of `key` in `slots`: its own, or the free one where it would go.
    fn find(slots: &Slots, key: MrouteKey) -> (usize, Option<Arc<Mroute>>) {
        let mask = slots.len() - 1;
        let mut i = key.hash() & mask;
        loop {
            match slots[i].load_full() {
                None => return (i, None),
                Some(r) if r.key == key => return (i, Some(r)),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    /// Adds or replaces the route of `key`; its counters carry over from the route it replaces.
    pub fn set(
        &self,
        key: MrouteKey,
        iif: u32,
        oifs: Vec<Oif>,
        origin: Origin,
    ) -> Result<(), Full> {
        let _w = self.lock();
        let mut slots = self.slots.load_full();
        let (mut i, mut old) = Self::find(&slots, key);
        if old.is_none() {
            if self.live.load(Ordering::Relaxed) >= self.capacity {
                self.counters.table_full.fetch_add(1, Ordering::Relaxed);
                return Err(Full);
            }
            if self.used.load(Ordering::Relaxed) >= self.capacity {
                slots = self.compact(&slots);
                (i, old) = Self::find(&slots, key);
            }
            self.used.fetch_add(1, Ordering::Relaxed);
        }
        let counters = old
            .as_ref()
            .map_or_else(Default::default, |o| o.counters.clone());
        if !old.as_ref().is_some_and(|o| o.live) {
            self.live.fetch_add(1, Ordering::Relaxed);
        }
        slots[i].store(Some(Arc::new(Mroute {
            key,
            iif,
            oifs: oifs.into_boxed_slice(),
            live: true,
            origin,
            counters,
        })));
        Ok(())
    }

    /// Deletes the route of `key`; false if it had none.
    pub fn remove(&self, key: MrouteKey) -> bool {
        let _w = self.lock();
        let slots = self.slots.load_full();
        let (i, old) = Self::find(&slots, key);
        match old {
            Some(o) if o.live => {
                slots[i].store(Some(Arc::new(Mroute {
                    key,
                    iif: crate::tables::NO_IF,
                    oifs: Box::new([]),
                    live: false,
                    origin: Origin::Static,
                    counters: o.counters.clone(),
                })));
                self.live.fetch_sub(1, Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }

    /// A new array of the live routes, swapped in (called with the write lock held).
    fn compact(&self, old: &Slots) -> Arc<Slots> {
        let fresh = new_slots(old.len());
        let mut used = 0;
        for s in old.iter() {
            if let Some(r) = s.load_full().filter(|r| r.live) {
                let (i, _) = Self::find(&fresh, r.key);
                fresh[i].store(Some(r));
                used += 1;
            }
        }
        self.used.store(used, Ordering::Relaxed);
        self.slots.store(fresh.clone());
        self.counters.compactions.fetch_add(1, Ordering::Relaxed);
        fresh
    }

    /// Every live route.
    pub fn routes(&self) -> Vec<Arc<Mroute>> {
        self.slots
            .load()
            .iter()
            .filter_map(|s| s.load_full())
            .filter(|r| r.live)
            .collect()
    }

    /// Every live route with its counters, sorted by key.
    pub fn view(&self) -> Vec<MrouteView> {
        let mut v: Vec<MrouteView> = self
            .routes()
            .iter()
            .map(|r| {
                let c = &r.counters;
                MrouteView {
                    key: r.key,
                    iif: r.iif,
                    oifs: r.oifs.to_vec(),
                    origin: r.origin,
                    packets: c.packets.load(Ordering::Relaxed),
                    bytes: c.bytes.load(Ordering::Relaxed),
                    replicas: c.replicas.load(Ordering::Relaxed),
                    wrong_if: c.wrong_if.load(Ordering::Relaxed),
                }
            })
            .collect();
        v.sort_by_key(|r| r.key);
        v
    }
}

#[cfg(test)]
mod tests;
