//! The multicast FIB: per VRF, (S,G) and (*,G) routes, each with the interface its traffic
//! must arrive on (the RPF interface) and the interfaces it is replicated to.
//!
//! Written by the control plane (the mirror of the routing namespace's kernel multicast cache,
//! which pimd programs, and the config's static routes); read by the workers for every routed
//! multicast packet (`node::ip_mcast`), without a lock: a route is an immutable [`Mroute`]
//! behind a pointer in a slot of an open-addressed array, replaced whole when it changes, so a
//! reader sees the old output list or the new one, never a mix, and a change is forwarded
//! from the next packet, with no pause and no new `Tables`.
//!
//! A slot, once claimed by a key, keeps it: a deleted route leaves an empty one behind (no
//! interfaces, `live` false), so readers probe without a lock and never meet a hole that was
//! once full. When the array fills with such leftovers, the writer makes a new one of the live
//! routes and swaps it in whole ([`Mfib::set`]); readers on the old array finish on it.
//!
//! Reclamation. A replaced route or array is freed once every worker has passed a quiescent
//! point since (the epoch scheme the unicast FIB uses, `fib::epoch`): a worker reads through a
//! [`Pinned`] FIB, made from its `EpochReader` borrowed mutably for the vector, so it cannot
//! announce a quiescent point while it holds a route. Reads cost two plain loads (the array,
//! the slot); with `ArcSwap` slots they were two reference-count debts, a fifth of a routed
//! packet's time. The control plane reads under the writers' lock ([`Mfib::with`],
//! [`Mfib::view`]), where nothing is freed.
//!
//! Interface indexes are those of one generation of the tables (`Tables::generation`): a commit
//! that renumbers interfaces makes a new FIB from the control plane's copy and publishes it with
//! its tables.

use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use fib::{EpochDomain, EpochReader};

/// A route's key. IPv4 addresses are in the low 32 bits; `source` 0 is (*,G).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
#[derive(Clone, Debug)]
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

/// The open-addressed array: each slot null (never claimed) or a route it owns.
struct Table {
    slots: Box<[AtomicPtr<Mroute>]>,
}

impl Table {
    fn new(n: usize) -> Box<Table> {
        Box::new(Table {
            slots: (0..n)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
        })
    }

    /// The slot index of `key`: its own, or the free one where it would go; and its route.
    /// The caller must hold a reference that keeps the routes alive (a pin, or the writers'
    /// lock).
    #[inline(always)]
    fn find(&self, key: MrouteKey) -> (usize, Option<&Mroute>) {
        let mask = self.slots.len() - 1;
        let mut i = key.hash() & mask;
        for _ in 0..self.slots.len() {
            let p = self.slots[i].load(Ordering::Acquire);
            // SAFETY: a non-null slot points to a route made by Box::into_raw and freed only
            // through `Writer::retire`, once no reader can hold it: after every worker passed a
            // quiescent point (readers hold a Pinned, which borrows their EpochReader mutably
            // so that they cannot), or under the writers' lock (control-plane readers hold it).
            match unsafe { p.as_ref() } {
                None => return (i, None),
                Some(r) if r.key == key => return (i, Some(r)),
                Some(_) => i = (i + 1) & mask,
            }
        }
        (usize::MAX, None)
    }
}

/// What a writer unlinked, kept until no reader can hold it.
enum Garbage {
    Route(*mut Mroute),
    /// An array replaced by a compaction; its routes live on in the new one, except those
    /// retired with it.
    Table(*mut Table),
}

/// The writers' side: serializes them (the mirror, the config, the sweeps) and keeps what they
/// unlinked until it is safe to free.
struct Writer {
    limbo: Vec<(u64, Garbage)>,
}

// SAFETY: the raw pointers in `limbo` are owned (Box::into_raw) and touched only by the thread
// holding the writers' lock.
unsafe impl Send for Writer {}

pub struct Mfib {
    table: AtomicPtr<Table>,
    domain: Arc<EpochDomain>,
    /// Slots claimed (live routes and leftovers), and live routes.
    used: AtomicUsize,
    live: AtomicUsize,
    capacity: usize,
    clock: Instant,
    write: Mutex<Writer>,
    pub counters: MfibCounters,
}

// SAFETY: the pointers are shared with workers only as described in the module's doc: routes
// are immutable once published (their counters are atomics), and freed only when unreachable.
unsafe impl Send for Mfib {}
// SAFETY: as above.
unsafe impl Sync for Mfib {}

/// A route refused because the FIB holds its capacity of live routes.
#[derive(Debug, PartialEq, Eq)]
pub struct Full;

/// A worker's view of the FIB for one vector: while it lives, its `EpochReader` is borrowed
/// and no route it returns can be freed.
pub struct Pinned<'a> {
    table: &'a Table,
}

impl<'a> Pinned<'a> {
    /// The (S,G) route of a packet from `source` to `group`, else the group's (*,G).
    #[inline(always)]
    pub fn lookup(&self, key: MrouteKey) -> Option<&'a Mroute> {
        self.get(key).or_else(|| self.get(key.any_source()))
    }

    /// Starts loading the slot `key` hashes to (the first of a lookup's two dependent loads).
    #[inline(always)]
    pub fn prefetch_slot(&self, key: MrouteKey) {
        let mask = self.table.slots.len() - 1;
        fib::lpm::prefetch(&self.table.slots[key.hash() & mask]);
    }

    /// Starts loading the route in `key`'s first slot, once [`Pinned::prefetch_slot`] has had
    /// time to bring the slot in (the second load).
    #[inline(always)]
    pub fn prefetch_route(&self, key: MrouteKey) {
        let mask = self.table.slots.len() - 1;
        let p = self.table.slots[key.hash() & mask].load(Ordering::Relaxed);
        fib::lpm::prefetch(p);
    }

    #[inline(always)]
    fn get(&self, key: MrouteKey) -> Option<&'a Mroute> {
        self.table.find(key).1.filter(|r| r.live)
    }
}

impl Mfib {
    /// A FIB for `routes` routes in all VRFs together, read by workers registered with
    /// `domain`.
    pub fn new(routes: usize, domain: Arc<EpochDomain>) -> Mfib {
        let n = (routes.max(16) * 2).next_power_of_two();
        Mfib {
            table: AtomicPtr::new(Box::into_raw(Table::new(n))),
            domain,
            used: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            capacity: routes.max(16),
            clock: Instant::now(),
            write: Mutex::new(Writer { limbo: Vec::new() }),
            counters: MfibCounters::default(),
        }
    }

    /// The FIB as worker `reader` reads it for one vector. Panics if the reader is not of this
    /// FIB's domain or is offline (either would let a route be freed under it).
    #[inline(always)]
    pub fn pin<'a>(&'a self, reader: &'a mut EpochReader) -> Pinned<'a> {
        assert!(
            reader.reads(&self.domain) && reader.is_online(),
            "the multicast FIB is read by an online reader of its epoch domain"
        );
        // SAFETY: the array is freed only through `Writer::retire` once every online reader
        // of the domain has passed a quiescent point after it was unlinked; this reader is
        // online and cannot pass one while `reader` is borrowed.
        let table = unsafe { &*self.table.load(Ordering::Acquire) };
        Pinned { table }
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
        self.clock.elapsed().as_millis() as u64 + 1
    }

    /// Calls `f` with the live route of `key`, if there is one (under the writers' lock: for
    /// the control plane and tests; workers read through [`Mfib::pin`]).
    pub fn with<R>(&self, key: MrouteKey, f: impl FnOnce(Option<&Mroute>) -> R) -> R {
        let w = self.lock();
        f(self.locked(&w).get(key))
    }

    /// As [`Pinned::lookup`], under the writers' lock.
    pub fn lookup<R>(&self, key: MrouteKey, f: impl FnOnce(Option<&Mroute>) -> R) -> R {
        let w = self.lock();
        f(self.locked(&w).lookup(key))
    }

    /// The current array as a reader holding the writers' lock `w` sees it.
    fn locked<'w>(&self, w: &'w MutexGuard<'_, Writer>) -> Pinned<'w> {
        Pinned {
            table: self.current(w),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        self.write.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current array, read by a writer (or a control-plane reader) holding the lock `_w`.
    fn current<'w>(&self, _w: &'w MutexGuard<'_, Writer>) -> &'w Table {
        // SAFETY: the array is replaced and retired only by a writer holding the lock, and
        // freed only after that; the lock is held for 'w.
        unsafe { &*self.table.load(Ordering::Acquire) }
    }

    /// Adds or replaces the route of `key`; its counters carry over from the route it replaces.
    pub fn set(
        &self,
        key: MrouteKey,
        iif: u32,
        oifs: Vec<Oif>,
        origin: Origin,
    ) -> Result<(), Full> {
        let mut w = self.lock();
        let (mut i, mut old) = self.current(&w).find(key);
        let mut counters = old.map(|o| (o.counters.clone(), o.live));
        if old.is_none() {
            if self.live.load(Ordering::Relaxed) >= self.capacity {
                self.counters.table_full.fetch_add(1, Ordering::Relaxed);
                return Err(Full);
            }
            if self.used.load(Ordering::Relaxed) >= self.capacity {
                self.compact(&mut w);
                (i, old) = self.current(&w).find(key);
                counters = old.map(|o| (o.counters.clone(), o.live));
            }
            self.used.fetch_add(1, Ordering::Relaxed);
        }
        let (counters, was_live) = counters.unwrap_or_default();
        if !was_live {
            self.live.fetch_add(1, Ordering::Relaxed);
        }
        let new = Box::into_raw(Box::new(Mroute {
            key,
            iif,
            oifs: oifs.into_boxed_slice(),
            live: true,
            origin,
            counters,
        }));
        let prev = self.current(&w).slots[i].swap(new, Ordering::AcqRel);
        self.retire(&mut w, [Garbage::Route(prev)]);
        Ok(())
    }

    /// Deletes the route of `key`; false if it had none.
    pub fn remove(&self, key: MrouteKey) -> bool {
        let mut w = self.lock();
        let (i, old) = self.current(&w).find(key);
        let Some(o) = old.filter(|o| o.live) else {
            return false;
        };
        let leftover = Box::into_raw(Box::new(Mroute {
            key,
            iif: crate::tables::NO_IF,
            oifs: Box::new([]),
            live: false,
            origin: Origin::Static,
            counters: o.counters.clone(),
        }));
        let prev = self.current(&w).slots[i].swap(leftover, Ordering::AcqRel);
        self.retire(&mut w, [Garbage::Route(prev)]);
        self.live.fetch_sub(1, Ordering::Relaxed);
        true
    }

    /// A new array of the live routes, swapped in; the old array and its leftovers retired.
    fn compact(&self, w: &mut MutexGuard<'_, Writer>) {
        let old = self.current(w);
        let fresh = Table::new(old.slots.len());
        let mut used = 0;
        let mut gone = Vec::new();
        for s in old.slots.iter() {
            let p = s.load(Ordering::Acquire);
            // SAFETY: as in `Table::find`; the lock is held.
            match unsafe { p.as_ref() } {
                Some(r) if r.live => {
                    let (i, _) = fresh.find(r.key);
                    fresh.slots[i].store(p, Ordering::Relaxed);
                    used += 1;
                }
                Some(_) => gone.push(Garbage::Route(p)),
                None => {}
            }
        }
        self.used.store(used, Ordering::Relaxed);
        let prev = self.table.swap(Box::into_raw(fresh), Ordering::AcqRel);
        gone.push(Garbage::Table(prev));
        self.retire(w, gone);
        self.counters.compactions.fetch_add(1, Ordering::Relaxed);
    }

    /// Keeps what was just unlinked until every worker has passed a quiescent point, and frees
    /// what earlier calls kept that is past that now.
    fn retire(&self, w: &mut MutexGuard<'_, Writer>, unlinked: impl IntoIterator<Item = Garbage>) {
        let e = self.domain.advance();
        w.limbo.extend(
            unlinked
                .into_iter()
                .filter(|g| !matches!(g, Garbage::Route(p) if p.is_null()))
                .map(|g| (e, g)),
        );
        let safe = self.domain.safe_epoch();
        w.limbo.retain(|(e, g)| {
            if *e > safe {
                return true;
            }
            free(g);
            false
        });
    }

    /// Routes unlinked and not yet freed (a worker has not passed a quiescent point since).
    pub fn retired(&self) -> usize {
        self.lock().limbo.len()
    }

    /// Every live route, copied (under the writers' lock).
    pub fn routes(&self) -> Vec<Mroute> {
        let w = self.lock();
        self.current(&w)
            .slots
            .iter()
            .filter_map(|s| {
                // SAFETY: as in `Table::find`; the lock is held.
                unsafe { s.load(Ordering::Acquire).as_ref() }
            })
            .filter(|r| r.live)
            .cloned()
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

/// Frees what a writer retired.
fn free(g: &Garbage) {
    // SAFETY: each pointer came from Box::into_raw, was unlinked from every place a reader
    // could find it, is past every reader's quiescent point (or no reader exists: `drop`), and
    // is in limbo once, so it is freed once. A retired array does not own its routes.
    unsafe {
        match *g {
            Garbage::Route(p) => drop(Box::from_raw(p)),
            Garbage::Table(p) => drop(Box::from_raw(p)),
        }
    }
}

impl Drop for Mfib {
    fn drop(&mut self) {
        // No reader is left: each holds the FIB through an Arc, and this is its last owner.
        let w = self.write.get_mut().unwrap_or_else(|e| e.into_inner());
        for (_, g) in w.limbo.drain(..) {
            free(&g);
        }
        let t = *self.table.get_mut();
        // SAFETY: the current array and its routes are owned by the FIB alone now.
        let table = unsafe { Box::from_raw(t) };
        for s in table.slots.iter() {
            let p = s.load(Ordering::Relaxed);
            if !p.is_null() {
                free(&Garbage::Route(p));
            }
        }
    }
}

#[cfg(test)]
mod tests;
