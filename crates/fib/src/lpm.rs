//! Longest-prefix match: a direct-pointing table followed by 64-ary compressed nodes, in the manner
//! of Poptrie (Asai and Ohara, SIGCOMM 2015).
//!
//! Shape. The top `S` bits of the key index `direct`. An entry there is either a leaf (the next-hop
//! id for the whole /S) or the root of a subtree. A subtree node consumes 6 bits: `vector` marks the
//! children that are nodes (stored contiguously from `base1`, found with a popcount), `leafvec`
//! marks where a run of equal leaves starts (leaves stored contiguously from `base0`), so a node
//! costs 24 bytes and runs of equal next hops cost one leaf.
//!
//! Updates. The control plane owns an [`LpmWriter`]: it keeps the routes, and on `publish` rebuilds
//! the subtree of every direct slot the changes touched into freshly allocated ranges of the node
//! and leaf arenas, then swings the slot's direct entry with one release store. A worker therefore
//! sees, for any address, either the old or the new answer and never a half-built subtree; nothing
//! is locked and no worker waits. Old ranges are reused only after every worker has passed a
//! quiescent point ([`crate::epoch`]).
//!
//! Memory. Arenas are allocated zeroed at their full capacity; the kernel commits pages only as
//! they are first written, so capacity is address space, and [`LpmStats`] reports what is used.
//! A zero direct entry is the leaf "no route", so an empty table touches nothing.

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::epoch::{EpochDomain, EpochReader};
use crate::key::Key;

/// The next-hop id a lookup returns when no route matches.
pub const NO_ROUTE: u32 = 0;
/// Next-hop ids must fit in 31 bits (the direct entry keeps one bit for its kind).
pub const MAX_NEXT_HOP: u32 = (1 << 31) - 1;

const STRIDE: u32 = 6;

/// Sizing of one table. Capacities are limits, not reservations (see the module comment).
#[derive(Clone, Copy, Debug)]
pub struct LpmConfig {
    /// Bits resolved by the direct table (IPv4: 18, IPv6: 24).
    pub direct_bits: u32,
    /// The most routes the table accepts; inserts beyond it fail with [`FibError::TableFull`].
    pub max_routes: usize,
}

impl LpmConfig {
    pub fn v4(max_routes: usize) -> Self {
        Self {
            direct_bits: 18,
            max_routes,
        }
    }
    pub fn v6(max_routes: usize) -> Self {
        Self {
            direct_bits: 24,
            max_routes,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FibError {
    /// The table holds `max_routes` routes already.
    TableFull {
        max_routes: usize,
    },
    /// The node or leaf arena is exhausted (fragmentation, or readers that never go quiescent).
    ArenaFull,
    BadPrefixLength {
        len: u8,
        bits: u32,
    },
    NextHopOutOfRange(u32),
}

impl std::fmt::Display for FibError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FibError::TableFull { max_routes } => {
                write!(
                    f,
                    "route table full ({max_routes} routes); raise the limit in the config"
                )
            }
            FibError::ArenaFull => write!(f, "route table memory exhausted"),
            FibError::BadPrefixLength { len, bits } => {
                write!(f, "prefix length /{len} is longer than {bits} bits")
            }
            FibError::NextHopOutOfRange(n) => write!(f, "next-hop id {n} out of range"),
        }
    }
}

impl std::error::Error for FibError {}

/// The part workers read. Shared by `Arc`; written only by the one `LpmWriter`.
pub struct LpmTable<K: Key> {
    direct_bits: u32,
    direct: Box<[AtomicU32]>,
    /// Three words per node: vector, leafvec, base0 | base1 << 32.
    nodes: Box<[AtomicU64]>,
    leaves: Box<[AtomicU32]>,
    _key: std::marker::PhantomData<K>,
}

#[inline(always)]
fn upto(v: u32) -> u64 {
    // Bits 0..=v set; v is at most 63, so the shift never overflows.
    u64::MAX >> (63 - v)
}

/// Starts loading the cache line at `p` (a hint: any address, never a fault).
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of the x86_64 baseline, and a prefetch is only a hint: it never
        // faults and never reads into the program, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

impl<K: Key> LpmTable<K> {
    fn new(direct_bits: u32, node_cap: usize, leaf_cap: usize) -> Self {
        Self {
            direct_bits,
            direct: zeroed_u32(1usize << direct_bits),
            nodes: zeroed_u64(node_cap * 3),
            leaves: zeroed_u32(leaf_cap),
            _key: std::marker::PhantomData,
        }
    }

    /// The next-hop id of the longest prefix that matches `key`, or [`NO_ROUTE`].
    #[inline]
    pub fn lookup(&self, key: K) -> u32 {
        let e = self.direct[key.bits(0, self.direct_bits) as usize].load(Ordering::Acquire);
        if e & 1 == 0 {
            return e >> 1;
        }
        let mut node = (e >> 1) as usize;
        let mut off = self.direct_bits;
        loop {
            let w = node * 3;
            let vector = self.nodes[w].load(Ordering::Relaxed);
            let v = key.bits(off, STRIDE);
            let bases = self.nodes[w + 2].load(Ordering::Relaxed);
            if vector & (1u64 << v) != 0 {
                node = (bases >> 32) as usize + (vector & upto(v)).count_ones() as usize - 1;
                off += STRIDE;
            } else {
                let leafvec = self.nodes[w + 1].load(Ordering::Relaxed);
                let i = bases as u32 as usize + (leafvec & upto(v)).count_ones() as usize - 1;
                return self.leaves[i].load(Ordering::Relaxed);
            }
        }
    }

    /// Looks up a batch, interleaving the lookups so that their cache misses overlap: each round
    /// advances every unfinished lookup by one level and prefetches what it reads next.
    ///
    /// Measured alternatives (XR-6 table, 600k IPv4 routes, Xeon 2.8 GHz; see docs/results.md):
    /// groups of 16/32/64 lanes gave 46/58/53 M lookups/s on random addresses; a branch-free
    /// lockstep variant, a compacted active list, a level-by-level pass (with and without
    /// prefetch) and a plain scalar loop were all slower (28-47 M/s); storing each slot's leaves
    /// beside its nodes in one cache-line-aligned block cost 70% more memory for no gain.
    pub fn lookup_batch(&self, keys: &[K], out: &mut [u32]) {
        const GROUP: usize = 32;
        assert!(out.len() >= keys.len());
        for (ks, os) in keys.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
            self.lookup_group(ks, os);
        }
    }

    #[inline(always)]
    fn lookup_group(&self, keys: &[K], out: &mut [u32]) {
        const GROUP: usize = 32;
        // Per lane: node index, or u32::MAX when finished, and the bit offset.
        let mut node = [u32::MAX; GROUP];
        let mut off = [0u32; GROUP];
        let n = keys.len();
        let db = self.direct_bits;
        for i in 0..n {
            prefetch(
                self.direct
                    .as_ptr()
                    .wrapping_add(keys[i].bits(0, db) as usize),
            );
        }
        let mut live = 0;
        for i in 0..n {
            let e = self.direct[keys[i].bits(0, db) as usize].load(Ordering::Acquire);
            if e & 1 == 0 {
                out[i] = e >> 1;
            } else {
                node[i] = e >> 1;
                off[i] = db;
                prefetch(self.nodes.as_ptr().wrapping_add(node[i] as usize * 3));
                live += 1;
            }
        }
        // Leaves found in a round are read in the next one, after their prefetch had time to land.
        let mut leaf = [u32::MAX; GROUP];
        while live > 0 {
            for i in 0..n {
                if leaf[i] != u32::MAX {
                    out[i] = self.leaves[leaf[i] as usize].load(Ordering::Relaxed);
                    leaf[i] = u32::MAX;
                    live -= 1;
                    continue;
                }
                if node[i] == u32::MAX {
                    continue;
                }
                let w = node[i] as usize * 3;
                let vector = self.nodes[w].load(Ordering::Relaxed);
                let bases = self.nodes[w + 2].load(Ordering::Relaxed);
                let v = keys[i].bits(off[i], STRIDE);
                if vector & (1u64 << v) != 0 {
                    let c = (bases >> 32) as u32 + (vector & upto(v)).count_ones() - 1;
                    node[i] = c;
                    off[i] += STRIDE;
                    prefetch(self.nodes.as_ptr().wrapping_add(c as usize * 3));
                } else {
                    let leafvec = self.nodes[w + 1].load(Ordering::Relaxed);
                    let l = bases as u32 + (leafvec & upto(v)).count_ones() - 1;
                    node[i] = u32::MAX;
                    leaf[i] = l;
                    prefetch(self.leaves.as_ptr().wrapping_add(l as usize));
                }
            }
        }
    }

    pub fn direct_bits(&self) -> u32 {
        self.direct_bits
    }
}

static HUGE_PAGES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Whether tables created from now on ask for transparent huge pages (on by default). Benchmarks
/// turn it off to compare with engines running on 4 KiB pages.
pub fn set_huge_pages(on: bool) {
    HUGE_PAGES.store(on, Ordering::Relaxed);
}

/// Asks the kernel to back a large table with transparent huge pages: random lookups over tens
/// of megabytes otherwise miss the TLB on nearly every access. Only a hint; harmless if refused.
fn huge_pages<T>(s: &[T]) {
    let len = std::mem::size_of_val(s);
    if len < 4 << 20 || !HUGE_PAGES.load(Ordering::Relaxed) {
        return;
    }
    // madvise wants a page-aligned start: advise the aligned part inside the slice.
    let start = s.as_ptr() as usize;
    let aligned = (start + 4095) & !4095;
    let end = (start + len) & !4095;
    if end > aligned {
        // SAFETY: the range lies inside a live allocation we own; MADV_HUGEPAGE changes how the
        // kernel backs it, never its contents or validity.
        unsafe {
            libc::madvise(
                aligned as *mut libc::c_void,
                end - aligned,
                libc::MADV_HUGEPAGE,
            );
        }
    }
}

fn zeroed_u32(n: usize) -> Box<[AtomicU32]> {
    let b: Box<[u32]> = vec![0u32; n].into_boxed_slice();
    huge_pages(&b);
    // SAFETY: AtomicU32 has the same size, alignment and bit validity as u32 (documented in
    // std::sync::atomic), so a boxed slice of one is a valid boxed slice of the other. We go through
    // vec![0; n] because it gets lazily mapped zero pages from the allocator; building the atomics
    // one by one would touch every page of a capacity that is mostly never used.
    unsafe { Box::from_raw(Box::into_raw(b) as *mut [AtomicU32]) }
}

fn zeroed_u64(n: usize) -> Box<[AtomicU64]> {
    let b: Box<[u64]> = vec![0u64; n].into_boxed_slice();
    huge_pages(&b);
    // SAFETY: as in zeroed_u32; AtomicU64 has the size and alignment of u64 on every 64-bit target
    // this crate builds for (checked at compile time below).
    unsafe { Box::from_raw(Box::into_raw(b) as *mut [AtomicU64]) }
}

const _: () = assert!(std::mem::align_of::<AtomicU64>() == std::mem::align_of::<u64>());
const _: () = assert!(std::mem::size_of::<AtomicU64>() == std::mem::size_of::<u64>());

/// A reader's handle: the shared table plus the worker's epoch registration.
pub struct LpmReader<K: Key> {
    table: Arc<LpmTable<K>>,
    epoch: EpochReader,
}

impl<K: Key> LpmReader<K> {
    #[inline]
    pub fn table(&self) -> &LpmTable<K> {
        &self.table
    }
    /// Call between batches of lookups: the reader keeps no reference across this point.
    #[inline]
    pub fn quiescent(&self) {
        self.epoch.quiescent()
    }
    pub fn offline(&self) {
        self.epoch.offline()
    }
    #[inline]
    pub fn lookup(&self, key: K) -> u32 {
        self.table.lookup(key)
    }
}

/// One route as stored by the writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route<K> {
    pub prefix: K,
    pub len: u8,
    pub next_hop: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Block {
    node: u32,
    nodes: u32,
    leaf: u32,
    leaves: u32,
    /// The slot's default (its best route of length <= S), kept here because the direct entry
    /// of a slot with a subtree no longer holds it.
    default: u32,
}

/// First-fit-by-exact-size allocator over an arena index space; freed ranges wait in limbo for the
/// epoch to pass before they are handed out again.
#[derive(Debug)]
struct Arena {
    cap: usize,
    top: usize,
    live: usize,
    free: FxHashMap<u32, Vec<u32>>,
}

impl Arena {
    fn new(cap: usize) -> Self {
        Self {
            cap,
            top: 0,
            live: 0,
            free: FxHashMap::default(),
        }
    }
    fn alloc(&mut self, n: u32) -> Option<u32> {
        if n == 0 {
            return Some(0);
        }
        let start = match self.free.get_mut(&n).and_then(Vec::pop) {
            Some(s) => s,
            None if self.top + n as usize <= self.cap => {
                let s = self.top as u32;
                self.top += n as usize;
                s
            }
            None => return None,
        };
        self.live += n as usize;
        Some(start)
    }
    fn release(&mut self, start: u32, n: u32) {
        if n > 0 {
            self.live -= n as usize;
            self.free.entry(n).or_default().push(start);
        }
    }
}

/// Memory and occupancy of one table.
#[derive(Clone, Copy, Debug, Default)]
pub struct LpmStats {
    pub routes: usize,
    pub direct_bytes: usize,
    pub node_bytes_live: usize,
    pub node_bytes_peak: usize,
    pub leaf_bytes_live: usize,
    pub leaf_bytes_peak: usize,
    /// The writer's own copy of the routes (what `show ip route` reads), estimated.
    pub store_bytes: usize,
    pub subtrees: usize,
}

impl LpmStats {
    /// Bytes the lookup structure occupies (what workers touch), at its peak.
    pub fn lookup_bytes(&self) -> usize {
        self.direct_bytes + self.node_bytes_peak + self.leaf_bytes_peak
    }
}

/// Counters of one publish.
#[derive(Clone, Copy, Debug, Default)]
pub struct PublishStats {
    pub slots_rebuilt: usize,
    pub nodes_written: usize,
    pub leaves_written: usize,
}

/// The control plane's side of one table. Single writer; see the module comment.
pub struct LpmWriter<K: Key> {
    cfg: LpmConfig,
    table: Arc<LpmTable<K>>,
    epoch: Arc<EpochDomain>,
    /// Routes no longer than the direct stride, per length: they set slot defaults.
    short: Vec<HashMap<K, u32>>,
    /// Routes longer than the direct stride, per direct slot. Slot-keyed maps use a fast integer
    /// hash: a slot number is not something a peer can choose to collide (the prefix-keyed maps
    /// above keep the standard, randomised hash).
    long: FxHashMap<u32, Vec<Route<K>>>,
    blocks: FxHashMap<u32, Block>,
    routes: usize,
    nodes: Arena,
    leaves: Arena,
    limbo: Vec<(u64, Block)>,
    dirty: Vec<u32>,
    /// Changed routes of length <= S, applied at publish (they can span many slots).
    pending_short: Vec<(K, u8)>,
    /// During a publish: new defaults of slots whose first subtree is about to be built.
    new_defaults: FxHashMap<u32, u32>,
    scratch_nodes: Vec<[u64; 3]>,
    scratch_leaves: Vec<u32>,
    scratch_routes: Vec<Route<K>>,
}

impl<K: Key> LpmWriter<K> {
    pub fn new(cfg: LpmConfig, epoch: Arc<EpochDomain>) -> Self {
        assert!(cfg.direct_bits >= 8 && cfg.direct_bits <= 24 && cfg.direct_bits < K::BITS);
        // Worst case per route: one chain of nodes below its slot, each with a handful of leaves.
        let depth = (K::BITS - cfg.direct_bits).div_ceil(STRIDE) as usize;
        let node_cap = (cfg.max_routes * depth + 4096).min(1 << 31);
        let leaf_cap = (cfg.max_routes * depth * 3 + 16384).min(1 << 31);
        Self {
            cfg,
            table: Arc::new(LpmTable::new(cfg.direct_bits, node_cap, leaf_cap)),
            epoch,
            short: (0..=cfg.direct_bits).map(|_| HashMap::new()).collect(),
            long: FxHashMap::default(),
            blocks: FxHashMap::default(),
            routes: 0,
            nodes: Arena::new(node_cap),
            leaves: Arena::new(leaf_cap),
            limbo: Vec::new(),
            dirty: Vec::new(),
            pending_short: Vec::new(),
            new_defaults: FxHashMap::default(),
            scratch_nodes: Vec::new(),
            scratch_leaves: Vec::new(),
            scratch_routes: Vec::new(),
        }
    }

    /// A handle for a worker (or any thread) that will look up in this table.
    pub fn reader(&self) -> LpmReader<K> {
        LpmReader {
            table: Arc::clone(&self.table),
            epoch: self.epoch.register(),
        }
    }

    pub fn table(&self) -> &Arc<LpmTable<K>> {
        &self.table
    }

    pub fn len(&self) -> usize {
        self.routes
    }

    pub fn is_empty(&self) -> bool {
        self.routes == 0
    }

    pub fn config(&self) -> LpmConfig {
        self.cfg
    }

    fn check(&self, len: u8, nh: u32) -> Result<(), FibError> {
        if len as u32 > K::BITS {
            return Err(FibError::BadPrefixLength { len, bits: K::BITS });
        }
        if nh == NO_ROUTE || nh > MAX_NEXT_HOP {
            return Err(FibError::NextHopOutOfRange(nh));
        }
        Ok(())
    }

    fn slot_of(&self, prefix: K) -> u32 {
        prefix.bits(0, self.cfg.direct_bits)
    }

    /// Adds or replaces a route (staged until [`publish`](Self::publish)); returns the previous
    /// next hop. Host bits of `prefix` are ignored.
    pub fn insert(&mut self, prefix: K, len: u8, next_hop: u32) -> Result<Option<u32>, FibError> {
        self.check(len, next_hop)?;
        let prefix = prefix.masked(len);
        let s = self.cfg.direct_bits;
        let old = if len as u32 <= s {
            self.short[len as usize].get(&prefix).copied()
        } else {
            let slot = self.slot_of(prefix);
            self.long
                .get(&slot)
                .and_then(|v| v.iter().find(|r| r.prefix == prefix && r.len == len))
                .map(|r| r.next_hop)
        };
        if old.is_none() && self.routes >= self.cfg.max_routes {
            return Err(FibError::TableFull {
                max_routes: self.cfg.max_routes,
            });
        }
        if old == Some(next_hop) {
            return Ok(old);
        }
        if len as u32 <= s {
            self.short[len as usize].insert(prefix, next_hop);
            self.mark_short(prefix, len);
        } else {
            let slot = self.slot_of(prefix);
            let v = self.long.entry(slot).or_default();
            match v.iter_mut().find(|r| r.prefix == prefix && r.len == len) {
                Some(r) => r.next_hop = next_hop,
                None => v.push(Route {
                    prefix,
                    len,
                    next_hop,
                }),
            }
            self.dirty.push(slot);
        }
        if old.is_none() {
            self.routes += 1;
        }
        Ok(old)
    }

    /// Starts fetching what an insert or remove of this prefix will read. The writer's route
    /// lists are far larger than the caches, so a bulk load spends most of an insert waiting on
    /// two misses (the slot's entry, then its list); a caller that knows the next few dozen
    /// prefixes calls this for all of them first, and the misses overlap instead of queueing.
    #[inline]
    pub fn prefetch(&self, prefix: K, len: u8) {
        if len as u32 > self.cfg.direct_bits {
            if let Some(v) = self.long.get(&self.slot_of(prefix)) {
                prefetch(v.as_ptr());
            }
        }
    }

    /// Removes a route (staged until publish); returns its next hop if it existed.
    pub fn remove(&mut self, prefix: K, len: u8) -> Option<u32> {
        if len as u32 > K::BITS {
            return None;
        }
        let prefix = prefix.masked(len);
        let old = if len as u32 <= self.cfg.direct_bits {
            let old = self.short[len as usize].remove(&prefix);
            if old.is_some() {
                self.mark_short(prefix, len);
            }
            old
        } else {
            let slot = self.slot_of(prefix);
            let v = self.long.get_mut(&slot)?;
            let i = v.iter().position(|r| r.prefix == prefix && r.len == len)?;
            let old = v.swap_remove(i).next_hop;
            if v.is_empty() {
                self.long.remove(&slot);
            }
            self.dirty.push(slot);
            Some(old)
        };
        if old.is_some() {
            self.routes -= 1;
        }
        old
    }

    /// The next hop of an exact prefix, as staged.
    pub fn get(&self, prefix: K, len: u8) -> Option<u32> {
        if len as u32 > K::BITS {
            return None;
        }
        let prefix = prefix.masked(len);
        if len as u32 <= self.cfg.direct_bits {
            self.short[len as usize].get(&prefix).copied()
        } else {
            self.long
                .get(&self.slot_of(prefix))?
                .iter()
                .find(|r| r.prefix == prefix && r.len == len)
                .map(|r| r.next_hop)
        }
    }

    /// Every route, in no particular order.
    pub fn routes(&self) -> impl Iterator<Item = Route<K>> + '_ {
        let short = self.short.iter().enumerate().flat_map(|(len, m)| {
            m.iter().map(move |(&prefix, &next_hop)| Route {
                prefix,
                len: len as u8,
                next_hop,
            })
        });
        short.chain(self.long.values().flatten().copied())
    }

    fn mark_short(&mut self, prefix: K, len: u8) {
        self.pending_short.push((prefix, len));
    }

    /// Applies one changed short route: every slot inside it that no more-specific short route
    /// covers now resolves to the same default. Leaf slots are written here; slots with a subtree
    /// are queued for a rebuild, since their default sits in their leaves.
    fn apply_short(&mut self, prefix: K, len: u8) {
        let s = self.cfg.direct_bits;
        let first = prefix.bits(0, s);
        let end = first as u64 + (1u64 << (s - len as u32));
        let default = (0..=len)
            .rev()
            .find_map(|l| self.short[l as usize].get(&prefix.masked(l)).copied())
            .unwrap_or(NO_ROUTE);
        // Slot ranges owned by more-specific short routes keep their value.
        let mut owned: Vec<(u64, u64)> = Vec::new();
        for l in len as u32 + 1..=s {
            let m = &self.short[l as usize];
            if m.len() as u64 <= 1u64 << (l - len as u32) {
                for p in m.keys().filter(|p| p.masked(len) == prefix) {
                    let f = p.bits(0, s) as u64;
                    owned.push((f, f + (1u64 << (s - l))));
                }
            } else {
                for i in 0..1u32 << (l - len as u32) {
                    let p = prefix.with_bits(len as u32, l - len as u32, i);
                    if m.contains_key(&p) {
                        let f = p.bits(0, s) as u64;
                        owned.push((f, f + (1u64 << (s - l))));
                    }
                }
            }
        }
        owned.sort_unstable();
        let mut owned = owned.into_iter().peekable();
        let mut slot = first as u64;
        while slot < end {
            if let Some(&(f, e)) = owned.peek() {
                if f <= slot {
                    slot = slot.max(e);
                    owned.next();
                    continue;
                }
            }
            let stop = owned.peek().map_or(end, |&(f, _)| f.min(end));
            for sl in slot..stop {
                let sl = sl as u32;
                if let Some(b) = self.blocks.get_mut(&sl) {
                    b.default = default;
                    self.dirty.push(sl);
                } else if self.long.contains_key(&sl) {
                    // Its first subtree is built on this publish, right after; until then its
                    // direct entry must keep the old default (readers would see the new one
                    // without the routes below it).
                    self.new_defaults.insert(sl, default);
                    self.dirty.push(sl);
                } else {
                    self.table.direct[sl as usize].store(default << 1, Ordering::Release);
                }
            }
            slot = stop;
        }
    }

    /// The best route of length <= S covering a direct slot. Short routes are applied to the
    /// slots first at publish, so this is current when subtrees are rebuilt; it used to be
    /// found by a hash lookup per short length, which was most of a full rebuild's cost.
    fn slot_default(&self, slot: u32) -> u32 {
        if let Some(&d) = self.new_defaults.get(&slot) {
            return d;
        }
        match self.blocks.get(&slot) {
            Some(b) => b.default,
            None => {
                let e = self.table.direct[slot as usize].load(Ordering::Relaxed);
                debug_assert_eq!(e & 1, 0, "a slot without a block holds a leaf");
                e >> 1
            }
        }
    }

    /// The same, the slow way: from the short routes themselves (for tests).
    #[cfg(test)]
    fn slot_default_from_routes(&self, slot: u32) -> u32 {
        let s = self.cfg.direct_bits;
        let key = K::ZERO.with_bits(0, s, slot);
        for len in (0..=s).rev() {
            let m = &self.short[len as usize];
            if m.is_empty() {
                continue;
            }
            if let Some(&nh) = m.get(&key.masked(len as u8)) {
                return nh;
            }
        }
        NO_ROUTE
    }

    /// Makes every staged change visible to readers and reclaims memory readers have left.
    pub fn publish(&mut self) -> Result<PublishStats, FibError> {
        let mut stats = PublishStats::default();
        let mut pending = std::mem::take(&mut self.pending_short);
        pending.sort_unstable_by_key(|&(p, l)| (l, p));
        pending.dedup();
        for &(p, l) in &pending {
            self.apply_short(p, l);
        }
        pending.clear();
        self.pending_short = pending;
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        let mut result = Ok(());
        let mut retired = Vec::new();
        for (i, &slot) in dirty.iter().enumerate() {
            match self.rebuild_slot(slot, &mut stats) {
                Ok(Some(old)) => retired.push(old),
                Ok(None) => {}
                Err(e) => {
                    // Keep what is not done yet for the next publish; the slot stays as it was.
                    self.dirty.extend_from_slice(&dirty[i..]);
                    result = Err(e);
                    break;
                }
            }
        }
        dirty.clear();
        if self.dirty.is_empty() {
            self.dirty = dirty;
        }
        let e = self.epoch.advance();
        self.limbo.extend(retired.into_iter().map(|b| (e, b)));
        self.reclaim();
        result.map(|_| stats)
    }

    /// Returns limbo ranges to the arenas once all readers have moved past their epoch.
    pub fn reclaim(&mut self) {
        if self.limbo.is_empty() {
            return;
        }
        let safe = self.epoch.safe_epoch();
        let (nodes, leaves) = (&mut self.nodes, &mut self.leaves);
        self.limbo.retain(|&(e, b)| {
            if e <= safe {
                nodes.release(b.node, b.nodes);
                leaves.release(b.leaf, b.leaves);
                false
            } else {
                true
            }
        });
    }

    /// Rebuilds one slot; returns the block it replaced, to be retired.
    fn rebuild_slot(
        &mut self,
        slot: u32,
        stats: &mut PublishStats,
    ) -> Result<Option<Block>, FibError> {
        let default = self.slot_default(slot);
        let old = self.blocks.get(&slot).copied();
        let entry;
        let mut new_block = None;
        match self.long.get(&slot) {
            None => {
                entry = default << 1;
            }
            Some(routes) => {
                self.scratch_routes.clear();
                self.scratch_routes.extend_from_slice(routes);
                self.scratch_nodes.clear();
                self.scratch_leaves.clear();
                self.scratch_nodes.push([0; 3]);
                let mut routes = std::mem::take(&mut self.scratch_routes);
                build_node(
                    &mut routes,
                    self.cfg.direct_bits,
                    default,
                    0,
                    &mut self.scratch_nodes,
                    &mut self.scratch_leaves,
                );
                self.scratch_routes = routes;
                let nn = self.scratch_nodes.len() as u32;
                let nl = self.scratch_leaves.len() as u32;
                let node = self.nodes.alloc(nn).ok_or(FibError::ArenaFull)?;
                let Some(leaf) = self.leaves.alloc(nl) else {
                    self.nodes.release(node, nn);
                    return Err(FibError::ArenaFull);
                };
                let t = &self.table;
                for (i, n) in self.scratch_nodes.iter().enumerate() {
                    let w = (node as usize + i) * 3;
                    let base0 = (n[2] as u32).wrapping_add(leaf);
                    let base1 = ((n[2] >> 32) as u32).wrapping_add(node);
                    t.nodes[w].store(n[0], Ordering::Relaxed);
                    t.nodes[w + 1].store(n[1], Ordering::Relaxed);
                    t.nodes[w + 2].store(base0 as u64 | (base1 as u64) << 32, Ordering::Relaxed);
                }
                for (i, &l) in self.scratch_leaves.iter().enumerate() {
                    t.leaves[leaf as usize + i].store(l, Ordering::Relaxed);
                }
                stats.nodes_written += nn as usize;
                stats.leaves_written += nl as usize;
                entry = node << 1 | 1;
                new_block = Some(Block {
                    node,
                    nodes: nn,
                    leaf,
                    leaves: nl,
                    default,
                });
            }
        }
        // The release store orders the subtree writes above before any reader can reach them.
        self.table.direct[slot as usize].store(entry, Ordering::Release);
        self.new_defaults.remove(&slot);
        stats.slots_rebuilt += 1;
        match new_block {
            Some(b) => {
                self.blocks.insert(slot, b);
            }
            None => {
                self.blocks.remove(&slot);
            }
        }
        Ok(old)
    }

    pub fn stats(&self) -> LpmStats {
        let route_size = std::mem::size_of::<Route<K>>();
        LpmStats {
            routes: self.routes,
            direct_bytes: self.table.direct.len() * 4,
            node_bytes_live: self.nodes.live * 24,
            node_bytes_peak: self.nodes.top * 24,
            leaf_bytes_live: self.leaves.live * 4,
            leaf_bytes_peak: self.leaves.top * 4,
            // Hash maps hold roughly 1.15 slots per entry plus a control byte.
            store_bytes: self.routes * (route_size + route_size / 8 + 2),
            subtrees: self.blocks.len(),
        }
    }
}

/// Builds the node at `scratch_nodes[at]` for `routes` (all longer than `off`, all inside the
/// node's region), whose uncovered addresses resolve to `default`. Node words hold arena-relative
/// bases; the caller relocates them.
fn build_node<K: Key>(
    routes: &mut [Route<K>],
    off: u32,
    default: u32,
    at: usize,
    nodes: &mut Vec<[u64; 3]>,
    leaves: &mut Vec<u32>,
) {
    let end = off + STRIDE;
    // Routes that end in this node paint leaves; longer ones hang below a child node.
    let split = partition(routes, |r| r.len as u32 <= end);
    let (ending, deeper) = routes.split_at_mut(split);
    ending.sort_unstable_by_key(|r| r.len);
    let mut vals = [default; 64];
    for r in ending.iter() {
        let start = r.prefix.bits(off, STRIDE) as usize;
        let span = 1usize << (end - r.len as u32);
        vals[start..start + span].fill(r.next_hop);
    }
    let mut vector = 0u64;
    for r in deeper.iter() {
        vector |= 1u64 << r.prefix.bits(off, STRIDE);
    }
    let base0 = leaves.len() as u32;
    let mut leafvec = 0u64;
    // Positions not taken by children hold leaves; a new leaf starts wherever the value
    // changes. Most nodes of a sparse table (every interior node of an IPv6 /48) end no
    // route, so they are one run of the default: that case skips the scan of 64 values,
    // which was most of a table build.
    let free = !vector;
    if ending.is_empty() {
        if free != 0 {
            leafvec = free & free.wrapping_neg();
            leaves.push(default);
        }
    } else {
        let mut prev = u64::MAX;
        let mut m = free;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if vals[i] as u64 != prev {
                leafvec |= 1u64 << i;
                leaves.push(vals[i]);
                prev = vals[i] as u64;
            }
        }
    }
    let base1 = nodes.len() as u32;
    nodes.resize(nodes.len() + vector.count_ones() as usize, [0; 3]);
    nodes[at] = [vector, leafvec, base0 as u64 | (base1 as u64) << 32];
    if deeper.is_empty() {
        return;
    }
    deeper.sort_unstable_by_key(|r| r.prefix.bits(off, STRIDE));
    let mut child = base1 as usize;
    let mut rest = deeper;
    while !rest.is_empty() {
        let c = rest[0].prefix.bits(off, STRIDE);
        let n = rest
            .iter()
            .take_while(|r| r.prefix.bits(off, STRIDE) == c)
            .count();
        let (group, tail) = rest.split_at_mut(n);
        build_node(group, end, vals[c as usize], child, nodes, leaves);
        child += 1;
        rest = tail;
    }
}

/// Moves the elements for which `pred` holds to the front; returns how many there are.
fn partition<T, F: Fn(&T) -> bool>(v: &mut [T], pred: F) -> usize {
    let mut i = 0;
    for j in 0..v.len() {
        if pred(&v[j]) {
            v.swap(i, j);
            i += 1;
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults kept per slot (in blocks and direct leaves) agree with the short routes after
    /// every publish, through short routes added, replaced and removed over slots that do and do
    /// not have subtrees.
    #[test]
    fn kept_slot_defaults_match_the_short_routes() {
        let mut w = LpmWriter::<u32>::new(
            LpmConfig {
                direct_bits: 8,
                max_routes: 10_000,
            },
            EpochDomain::new(),
        );
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..200 {
            for _ in 0..20 {
                let r = next();
                let addr = (r >> 32) as u32;
                // Lengths 0..=8 are short (slot defaults), 9..=28 hang in subtrees.
                let len = (r % 29) as u8;
                if r & 0x3000 == 0 {
                    w.remove(addr, len);
                } else {
                    w.insert(addr, len, 1 + (r >> 8) as u32 % 50).unwrap();
                }
            }
            w.publish().unwrap();
            for slot in 0..256u32 {
                assert_eq!(
                    w.slot_default(slot),
                    w.slot_default_from_routes(slot),
                    "slot {slot} after round {round}"
                );
            }
        }
        assert!(
            w.stats().subtrees > 0,
            "the test reached slots with subtrees"
        );
    }
}
