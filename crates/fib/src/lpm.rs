//! Longest-prefix match: a direct-pointing table followed by 256-ary nodes whose bitmap, counts
//! and first entries share one cache line (a descendant of Poptrie, Asai and Ohara, SIGCOMM 2015,
//! reshaped for fewer dependent loads per lookup).
//!
//! Shape. The top `S` bits of the key index `direct`. Every entry, there and in nodes, is one
//! 32-bit word: `next_hop << 1` (a leaf) or `line << 3 | size << 1 | 1` (the node starting at
//! that 64-byte line of the arena, spanning `size + 1` lines, 4 meaning 4 or more). A node
//! consumes 8 bits. Its 256 positions fall into runs of equal entries (a child node is a run of
//! one); the node's first line holds a bitmap of where runs start (4 words), the number of runs
//! before each bitmap word (one byte each, in word 4's low half), then the runs' entries, 32 bits
//! each, from word 4's high half on into the following lines as needed. A step is therefore:
//! one bitmap word and the counts (the same line), a popcount, and the entry: in that same line
//! for nodes of up to 7 runs, else in a later one, which the batch prefetches beside the first
//! by guessing from the position (the entry's size field makes the guess possible). A node's
//! children follow it, each starting on a line; a direct slot's nodes form one block.
//!
//! Against the previous engine (Poptrie's 6-bit nodes of 24 bytes with leaves in an arena of
//! their own) a lookup that ends one node down reads two lines, not three dependent ones, and
//! the batch steps only the lookups still walking; see [`LpmTable::lookup_batch`].
//!
//! Batches. Where the CPU has AVX-512 (F and VPOPCNTDQ), a batch walks sixteen addresses per
//! vector with gathers (module `avx512`): the same steps; for IPv4 2-4x the portable batch's rate
//! on a CPU whose caches hold the table (the portable batch is bound by its instructions there).
//!
//! Updates. The control plane owns an [`LpmWriter`]: it keeps the routes, and on `publish` rebuilds
//! the block of every direct slot the changes touched into a freshly allocated range of the arena,
//! then swings the slot's direct entry with one release store. A worker therefore sees, for any
//! address, either the old or the new answer and never a half-built block; nothing is locked and
//! no worker waits. Old ranges are reused only after every worker has passed a quiescent point
//! ([`crate::epoch`]).
//!
//! Memory. The arena is allocated zeroed at its full capacity; the kernel commits pages only as
//! they are first written, so capacity is address space, and [`LpmStats`] reports what is used.
//! A zero direct entry is the leaf "no route", so an empty table touches nothing.

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::epoch::{EpochDomain, EpochReader};
use crate::key::Key;

#[cfg(target_arch = "x86_64")]
mod avx512;

/// The next-hop id a lookup returns when no route matches.
pub const NO_ROUTE: u32 = 0;
/// Next-hop ids must fit in 31 bits (an entry keeps one bit for its kind).
pub const MAX_NEXT_HOP: u32 = (1 << 31) - 1;

/// Bits a node consumes.
const STRIDE: u32 = 8;
/// 64-bit words per cache line; every node starts on a line.
const LINE: usize = 8;
/// Word of a node's first line holding the run counts (low half) and its first entry (high half).
const COUNTS: usize = 4;
/// The most lines the arena addresses (an entry keeps 29 bits for the line).
const MAX_LINES: usize = 1 << 29;

/// The entry pointing to a node at `line` that spans `lines` lines.
fn node_entry(line: u32, lines: usize) -> u32 {
    line << 3 | (lines.clamp(1, 4) as u32 - 1) << 1 | 1
}

/// Sizing of one table. Capacities are limits, not reservations (see the module comment).
#[derive(Clone, Copy, Debug)]
pub struct LpmConfig {
    /// Bits resolved by the direct table (IPv4: 16 or 18 by size, IPv6: 24; see `v4`, `v6`).
    pub direct_bits: u32,
    /// The most routes the table accepts; inserts beyond it fail with [`FibError::TableFull`].
    pub max_routes: usize,
}

impl LpmConfig {
    /// IPv4: a table sized for up to 512k routes resolves 16 bits directly (256 KiB, inside L2,
    /// with a /24 one node down); a larger one 18 (1 MiB). Measured on Internet-shaped tables,
    /// random addresses, one process alternating widths: at 300k routes 16 bits gave 89-94 M
    /// lookups/s against 68-78 for 18; at 1M, 49-51 against 62-65, and at 3M 24 against 34,
    /// because a /16's node grows past a few lines as the table fills (a /16 of a 1M table
    /// holds ~37 runs: 3 lines) while an /18's stays at one or two. Updates favour 18 too:
    /// a publish rebuilds a slot's whole block, a quarter of the routes under 18 bits.
    pub fn v4(max_routes: usize) -> Self {
        Self {
            direct_bits: if max_routes <= 512 * 1024 { 16 } else { 18 },
            max_routes,
        }
    }
    /// IPv6 keeps 24 bits: a publish rebuilds a slot's whole block, and under 16 bits one slot
    /// (2001::/16) holds most of an Internet table, which made every update there rebuild
    /// ~100,000 routes (measured: 102,000 updates/s at 230k routes, against 190,000 with 24).
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
    /// Nodes and their entries, in lines of [`LINE`] words (see the module comment).
    arena: Box<[AtomicU64]>,
    /// Words from the arena's start to its first 64-byte boundary: line `l` starts at word
    /// `skew + l * LINE`. (The allocator aligns to 16 bytes; a node must not straddle lines.)
    skew: usize,
    /// Whether `lookup_batch` walks sixteen addresses at a time (module `avx512`).
    vector: bool,
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
    fn new(direct_bits: u32, lines: usize) -> Self {
        let arena = zeroed_u64(lines * LINE + LINE);
        let skew = (arena.as_ptr() as usize).wrapping_neg() % 64 / 8;
        #[cfg(target_arch = "x86_64")]
        let vector =
            (K::BITS == 32 || direct_bits.is_multiple_of(8)) && avx512::usable(arena.len());
        #[cfg(not(target_arch = "x86_64"))]
        let vector = false;
        Self {
            direct_bits,
            direct: zeroed_u32(1usize << direct_bits),
            arena,
            skew,
            vector,
            _key: std::marker::PhantomData,
        }
    }

    /// The first word of the node an entry points to.
    #[inline(always)]
    fn node_word(&self, entry: u32) -> usize {
        self.skew + (entry >> 3) as usize * LINE
    }

    /// One step down: the entry for position `p` (8 bits) of the node `entry` points to.
    #[inline(always)]
    fn step(&self, entry: u32, p: u32) -> u32 {
        let n = self.node_word(entry);
        let w = (p >> 6) as usize;
        let starts = self.arena[n + w].load(Ordering::Relaxed);
        let counts = self.arena[n + COUNTS].load(Ordering::Relaxed);
        let before = (counts >> (8 * w)) as u8 as usize;
        // The run holding p is the last run starting at or before it; runs count from 1, and
        // entry j sits in 32-bit half 2n + 8 + j.
        let half = 2 * n + 2 * COUNTS + before + (starts & upto(p & 63)).count_ones() as usize;
        (self.arena[half >> 1].load(Ordering::Relaxed) >> (32 * (half & 1))) as u32
    }

    /// Starts loading what a step into the node `entry` points to will read for position `p`:
    /// its first line (bitmap and counts), and for a node of several lines the line where p's
    /// entry most likely sits, assuming runs spread evenly over the positions (the entry
    /// says how many lines the node spans). Prefetching both in parallel saves a dependent miss
    /// whenever the guess is right. Against prefetching simply the second line (alternated in
    /// one process, random addresses): XR-6 1M routes 58 vs 39 M lookups/s with 16-bit direct
    /// stages, 57 vs 51 with 18; Internet 1M 49 vs 44; Internet 300k 89 vs 92 (its nodes are
    /// mostly two lines, where both choices read the same).
    #[inline(always)]
    fn prefetch_node(&self, entry: u32, p: u32) {
        let first = self.arena.as_ptr().wrapping_add(self.node_word(entry));
        prefetch(first);
        let lines = (entry >> 1 & 3) as usize + 1;
        // Entries fill words 4.. of the node's lines: word 4 + (8 * lines - 4) * p / 256.
        let word = COUNTS + (((LINE * lines - COUNTS) * p as usize) >> STRIDE);
        prefetch(first.wrapping_add(word & !(LINE - 1)));
    }

    /// The next-hop id of the longest prefix that matches `key`, or [`NO_ROUTE`].
    #[inline]
    pub fn lookup(&self, key: K) -> u32 {
        let mut e = self.direct[key.bits(0, self.direct_bits) as usize].load(Ordering::Acquire);
        let mut off = self.direct_bits;
        while e & 1 != 0 {
            e = self.step(e, key.bits(off, STRIDE));
            off += STRIDE;
        }
        e >> 1
    }

    /// Looks up a batch, interleaving the lookups so that their cache misses overlap: the direct
    /// entries of a group are prefetched, read, and those that point to a node are listed
    /// (without a branch) and their node prefetched; each round then steps only the listed
    /// lookups one level down (they are all at the same depth), listing those still on a node.
    ///
    /// Measured alternatives (Internet IPv4 table, 300,000 routes, random addresses, AMD EPYC,
    /// all variants alternated in one process; the machine's speed moved by 1.5x between runs,
    /// so only the order within a run counts): this list, groups of 32, 114-120 M lookups/s
    /// median; of 64, 112-129; of 128, 110; every lane stepped through a dummy node without a
    /// branch, 99-108 (groups of 64: 102-109); the branching rounds of the previous engine's
    /// loop, 72-81; a three-stage pipeline over groups of 8/16/32 (direct entries prefetched
    /// two groups ahead), 93-98; a per-address software pipeline, 81-88. Prefetching only a
    /// node's first line instead of two cost 10-20%.
    ///
    /// On a CPU with AVX-512 (F and VPOPCNTDQ) the table walks sixteen addresses per vector
    /// instead (module `avx512`; IPv6 tables whose direct stage ends on a byte); the answers are
    /// the same (the property tests compare both paths with the reference engine wherever the
    /// CPU has it).
    pub fn lookup_batch(&self, keys: &[K], out: &mut [u32]) {
        #[cfg(target_arch = "x86_64")]
        if self.vector {
            let v = avx512::View {
                direct: &self.direct,
                arena: &self.arena,
                skew: self.skew,
                direct_bits: self.direct_bits,
            };
            return avx512::lookup_batch(&v, keys, out);
        }
        self.lookup_batch_scalar(keys, out)
    }

    /// The portable batch (what `lookup_batch` does without AVX-512; benchmarks measure it beside
    /// the vector walk).
    pub fn lookup_batch_scalar(&self, keys: &[K], out: &mut [u32]) {
        const GROUP: usize = 32;
        assert!(out.len() >= keys.len());
        for (ks, os) in keys.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
            self.lookup_group::<GROUP>(ks, os);
        }
    }

    #[inline(always)]
    fn lookup_group<const G: usize>(&self, keys: &[K], out: &mut [u32]) {
        // The list of walking lookups holds lane numbers in bytes.
        const { assert!(G <= 256) };
        let n = keys.len().min(G);
        let db = self.direct_bits;
        let mut e = [0u32; G];
        let mut act = [0u8; G];
        for k in &keys[..n] {
            prefetch(self.direct.as_ptr().wrapping_add(k.bits(0, db) as usize));
        }
        let mut live = 0usize;
        for i in 0..n {
            let x = self.direct[keys[i].bits(0, db) as usize].load(Ordering::Acquire);
            e[i] = x;
            act[live] = i as u8;
            live += (x & 1) as usize;
            self.prefetch_node(if x & 1 != 0 { x } else { DUMMY }, keys[i].bits(db, STRIDE));
        }
        let mut off = db;
        while live > 0 {
            let mut next = 0usize;
            for k in 0..live {
                let i = act[k] as usize;
                let r = self.step(e[i], keys[i].bits(off, STRIDE));
                e[i] = r;
                act[next] = i as u8;
                next += (r & 1) as usize;
                if r & 1 != 0 {
                    self.prefetch_node(r, keys[i].bits(off + STRIDE, STRIDE));
                }
            }
            live = next;
            off += STRIDE;
        }
        for i in 0..n {
            out[i] = e[i] >> 1;
        }
    }

    pub fn direct_bits(&self) -> u32 {
        self.direct_bits
    }

    /// Whether `lookup_batch` takes the AVX-512 walk on this table.
    pub fn vector_lookups(&self) -> bool {
        self.vector
    }
}

/// An entry pointing to the arena's line 0: what the batch prefetches, instead of branching, for
/// a lookup that ended in the direct table (a prefetch of any address inside the arena is
/// harmless).
const DUMMY: u32 = 1;

static HUGE_PAGES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Whether tables created from now on ask for transparent huge pages (on by default). Benchmarks
/// turn it off to compare with engines running on 4 KiB pages.
pub fn set_huge_pages(on: bool) {
    HUGE_PAGES.store(on, Ordering::Relaxed);
}

/// Asks the kernel to back a large table with transparent huge pages (see the `hugepages`
/// crate), unless benchmarks turned it off.
fn huge_pages<T>(s: &[T]) {
    if HUGE_PAGES.load(Ordering::Relaxed) {
        hugepages::advise(s);
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

/// What the writer keeps of one direct slot with routes longer than the direct stride: the routes,
/// and the block built from them (if published). One map entry holds both, so that a slot's
/// rebuild finds everything with one probe (at a million routes each probe is a cache miss).
#[derive(Debug)]
struct Slot<K> {
    routes: Vec<Route<K>>,
    block: Option<Block>,
}

impl<K> Default for Slot<K> {
    fn default() -> Self {
        Self {
            routes: Vec::new(),
            block: None,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Block {
    /// The block's first line (its root node) and how many lines it spans.
    line: u32,
    lines: u32,
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
    /// The arena's lines (nodes with their entries) in use, and at their high-water mark.
    pub node_bytes_live: usize,
    pub node_bytes_peak: usize,
    /// The writer's own copy of the routes (what `show ip route` reads), estimated.
    pub store_bytes: usize,
    pub subtrees: usize,
}

impl LpmStats {
    /// Bytes the lookup structure occupies (what workers touch), at its peak.
    pub fn lookup_bytes(&self) -> usize {
        self.direct_bytes + self.node_bytes_peak
    }
}

/// Counters of one publish.
#[derive(Clone, Copy, Debug, Default)]
pub struct PublishStats {
    pub slots_rebuilt: usize,
    pub lines_written: usize,
}

/// The control plane's side of one table. Single writer; see the module comment.
pub struct LpmWriter<K: Key> {
    cfg: LpmConfig,
    table: Arc<LpmTable<K>>,
    epoch: Arc<EpochDomain>,
    /// Routes no longer than the direct stride, per length: they set slot defaults.
    short: Vec<HashMap<K, u32>>,
    /// Routes longer than the direct stride and the block built from them, per direct slot (an
    /// entry stays while either is there). Slot-keyed maps use a fast integer hash: a slot number
    /// is not something a peer can choose to collide (the prefix-keyed maps above keep the
    /// standard, randomised hash).
    long: FxHashMap<u32, Slot<K>>,
    /// Slots holding a block.
    subtrees: usize,
    routes: usize,
    /// The table's arena, in lines.
    lines: Arena,
    limbo: Vec<(u64, Block)>,
    dirty: Vec<u32>,
    /// Changed routes of length <= S, applied at publish (they can span many slots).
    pending_short: Vec<(K, u8)>,
    /// During a publish: new defaults of slots whose first subtree is about to be built.
    new_defaults: FxHashMap<u32, u32>,
    /// A block being built: its words, and the 32-bit halves holding child entries (relative
    /// lines until the block is placed).
    scratch_words: Vec<u64>,
    scratch_children: Vec<usize>,
    scratch_routes: Vec<Route<K>>,
}

impl<K: Key> LpmWriter<K> {
    pub fn new(cfg: LpmConfig, epoch: Arc<EpochDomain>) -> Self {
        assert!(cfg.direct_bits >= 8 && cfg.direct_bits <= 24 && cfg.direct_bits < K::BITS);
        // Worst case per route: one chain of nodes below its slot, each a line, plus the two
        // entries (a run and the one after it) a route can add to a node it does not create.
        let depth = (K::BITS - cfg.direct_bits).div_ceil(STRIDE) as usize;
        let line_cap = (cfg.max_routes * (depth + 1) + 4096).min(MAX_LINES - 1);
        Self {
            cfg,
            table: Arc::new(LpmTable::new(cfg.direct_bits, line_cap)),
            epoch,
            short: (0..=cfg.direct_bits).map(|_| HashMap::new()).collect(),
            long: FxHashMap::default(),
            subtrees: 0,
            routes: 0,
            lines: Arena::new(line_cap),
            limbo: Vec::new(),
            dirty: Vec::new(),
            pending_short: Vec::new(),
            new_defaults: FxHashMap::default(),
            scratch_words: Vec::new(),
            scratch_children: Vec::new(),
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
        let full = self.routes >= self.cfg.max_routes;
        let table_full = FibError::TableFull {
            max_routes: self.cfg.max_routes,
        };
        if len as u32 > self.cfg.direct_bits {
            // One probe of the slot's list and one scan of it: at a million routes the probe
            // is a cache miss, and this is most of a route replacement's cost.
            let slot = self.slot_of(prefix);
            let st = self.long.entry(slot).or_default();
            let old = match st
                .routes
                .iter_mut()
                .find(|r| r.prefix == prefix && r.len == len)
            {
                Some(r) if r.next_hop == next_hop => return Ok(Some(next_hop)),
                Some(r) => Some(std::mem::replace(&mut r.next_hop, next_hop)),
                None if full => {
                    if st.routes.is_empty() && st.block.is_none() {
                        self.long.remove(&slot);
                    }
                    return Err(table_full);
                }
                None => {
                    st.routes.push(Route {
                        prefix,
                        len,
                        next_hop,
                    });
                    self.routes += 1;
                    None
                }
            };
            self.dirty.push(slot);
            return Ok(old);
        }
        let old = self.short[len as usize].get(&prefix).copied();
        if old.is_none() && full {
            return Err(table_full);
        }
        if old == Some(next_hop) {
            return Ok(old);
        }
        self.short[len as usize].insert(prefix, next_hop);
        self.mark_short(prefix, len);
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
            if let Some(st) = self.long.get(&self.slot_of(prefix)) {
                prefetch(st.routes.as_ptr());
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
            let st = self.long.get_mut(&slot)?;
            let i = st
                .routes
                .iter()
                .position(|r| r.prefix == prefix && r.len == len)?;
            let old = st.routes.swap_remove(i).next_hop;
            // A slot whose last long route went keeps its entry until the rebuild retires its
            // block.
            if st.routes.is_empty() && st.block.is_none() {
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
                .routes
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
        short.chain(self.long.values().flat_map(|st| st.routes.iter().copied()))
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
                let st = self.long.get_mut(&sl);
                if let Some(b) = st.as_ref().and_then(|st| st.block) {
                    st.expect("the slot's entry").block = Some(Block { default, ..b });
                    self.dirty.push(sl);
                } else if st.is_some() {
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

    /// The slot's default as a rebuild finds it (see the free function `slot_default`).
    #[cfg(test)]
    fn slot_default(&self, slot: u32) -> u32 {
        let block = self.long.get(&slot).and_then(|st| st.block);
        slot_default(&self.new_defaults, &self.table, slot, block)
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
            // Start the misses of a slot a few rebuilds ahead (its map entry, its routes), so
            // that they overlap this one's work instead of stalling the next.
            if let Some(st) = dirty.get(i + 8).and_then(|s| self.long.get(s)) {
                prefetch(st.routes.as_ptr());
            }
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
        let lines = &mut self.lines;
        self.limbo.retain(|&(e, b)| {
            if e <= safe {
                lines.release(b.line, b.lines);
                false
            } else {
                true
            }
        });
    }

    /// Rebuilds one slot; returns the block it replaced, to be retired. One probe of the slot
    /// map finds the routes and the old block, and takes the new block.
    fn rebuild_slot(
        &mut self,
        slot: u32,
        stats: &mut PublishStats,
    ) -> Result<Option<Block>, FibError> {
        let st = self.long.get_mut(&slot);
        let old = st.as_ref().and_then(|st| st.block);
        let default = slot_default(&self.new_defaults, &self.table, slot, old);
        let entry;
        let mut new_block = None;
        match st.as_ref().filter(|st| !st.routes.is_empty()) {
            None => {
                entry = default << 1;
            }
            Some(st) => {
                self.scratch_routes.clear();
                self.scratch_routes.extend_from_slice(&st.routes);
                self.scratch_words.clear();
                self.scratch_children.clear();
                let root = build_node(
                    &mut self.scratch_routes,
                    self.cfg.direct_bits,
                    default,
                    &mut self.scratch_words,
                    &mut self.scratch_children,
                );
                let n = (self.scratch_words.len() / LINE) as u32;
                let line = self.lines.alloc(n).ok_or(FibError::ArenaFull)?;
                // Child entries hold lines relative to the block: place them.
                for &h in &self.scratch_children {
                    let word = &mut self.scratch_words[h >> 1];
                    let shift = 32 * (h & 1);
                    let e = (*word >> shift) as u32 + (line << 3);
                    *word = *word & !(0xffff_ffffu64 << shift) | (e as u64) << shift;
                }
                let t = &self.table;
                let at = t.skew + line as usize * LINE;
                for (i, &w) in self.scratch_words.iter().enumerate() {
                    t.arena[at + i].store(w, Ordering::Relaxed);
                }
                stats.lines_written += n as usize;
                entry = root + (line << 3);
                new_block = Some(Block {
                    line,
                    lines: n,
                    default,
                });
            }
        }
        // The release store orders the subtree writes above before any reader can reach them.
        self.table.direct[slot as usize].store(entry, Ordering::Release);
        stats.slots_rebuilt += 1;
        self.subtrees = self.subtrees + new_block.is_some() as usize - old.is_some() as usize;
        match st {
            Some(st) if new_block.is_some() => st.block = new_block,
            // No routes left below the slot: its entry goes with its block.
            Some(_) => {
                self.long.remove(&slot);
            }
            None => {}
        }
        if !self.new_defaults.is_empty() {
            self.new_defaults.remove(&slot);
        }
        Ok(old)
    }

    pub fn stats(&self) -> LpmStats {
        let route_size = std::mem::size_of::<Route<K>>();
        LpmStats {
            routes: self.routes,
            direct_bytes: self.table.direct.len() * 4,
            node_bytes_live: self.lines.live * LINE * 8,
            node_bytes_peak: self.lines.top * LINE * 8,
            // Hash maps hold roughly 1.15 slots per entry plus a control byte.
            store_bytes: self.routes * (route_size + route_size / 8 + 2),
            subtrees: self.subtrees,
        }
    }
}

/// The best route of length <= S covering a direct slot whose block (if any) is `block`. Short
/// routes are applied to the slots first at publish, so this is current when subtrees are
/// rebuilt; it used to be found by a hash lookup per short length, which was most of a full
/// rebuild's cost. A free function so that a rebuild can call it while it holds the slot.
fn slot_default<K: Key>(
    new_defaults: &FxHashMap<u32, u32>,
    table: &LpmTable<K>,
    slot: u32,
    block: Option<Block>,
) -> u32 {
    if let Some(&d) = new_defaults.get(&slot) {
        return d;
    }
    match block {
        Some(b) => b.default,
        None => {
            let e = table.direct[slot as usize].load(Ordering::Relaxed);
            debug_assert_eq!(e & 1, 0, "a slot without a block holds a leaf");
            e >> 1
        }
    }
}

/// Builds the node for `routes` (all longer than `off`, all inside the node's region), whose
/// uncovered addresses resolve to `default`, at the end of `words` (which ends on a line), then
/// its children after it; returns the entry pointing to it, its line relative to the block. The
/// halves of child entries are added to `children`: they hold relative lines until the caller
/// places the block.
fn build_node<K: Key>(
    routes: &mut [Route<K>],
    off: u32,
    default: u32,
    words: &mut Vec<u64>,
    children: &mut Vec<usize>,
) -> u32 {
    let end = off + STRIDE;
    // Routes that end in this node paint positions; longer ones hang below a child node.
    let split = partition(routes, |r| r.len as u32 <= end);
    let (ending, deeper) = routes.split_at_mut(split);
    ending.sort_unstable_by_key(|r| r.len);
    let mut vals = [default; 256];
    for r in ending.iter() {
        let start = r.prefix.bits(off, STRIDE) as usize;
        let span = 1usize << (end - r.len as u32);
        vals[start..start + span].fill(r.next_hop);
    }
    let mut child = [0u64; 4];
    for r in deeper.iter() {
        let p = r.prefix.bits(off, STRIDE);
        child[p as usize >> 6] |= 1u64 << (p & 63);
    }
    // Runs: a new one starts at position 0, at every child, right after a child, and wherever
    // the value changes. Entries hold the leaf, or 1 for a child (its line comes later).
    let mut starts = [0u64; 4];
    let mut entries = [0u32; 256];
    let mut runs = 0usize;
    // Values change only where an ending route starts or ends, and around children: visit those
    // boundaries, not all 256 positions (most of a rebuild's time when scanned). A node that
    // ends no route (most interior nodes of an IPv6 chain) has only its children's.
    // The boundaries are a bitmap of positions (one past the end is not kept: the walk stops
    // there), visited in order by their set bits: no sort (a sort was a fifth of a rebuild).
    let mut cuts = [0u64; 4];
    let mut cut = |c: usize| {
        if c < 256 {
            cuts[c >> 6] |= 1u64 << (c & 63);
        }
    };
    for r in ending.iter() {
        let start = r.prefix.bits(off, STRIDE) as usize;
        cut(start);
        cut(start + (1usize << (end - r.len as u32)));
    }
    for (w, &c) in child.iter().enumerate() {
        let mut m = c;
        while m != 0 {
            let p = w * 64 + m.trailing_zeros() as usize;
            m &= m - 1;
            cut(p);
            cut(p + 1);
        }
    }
    let mut prev = u64::MAX;
    let mut p = 0usize;
    while p < 256 {
        let is_child = child[p >> 6] >> (p & 63) & 1 != 0;
        if is_child || vals[p] as u64 != prev {
            starts[p >> 6] |= 1u64 << (p & 63);
            entries[runs] = if is_child { 1 } else { vals[p] << 1 };
            runs += 1;
            prev = if is_child { u64::MAX } else { vals[p] as u64 };
        }
        // Jump to the next boundary after p: the value holds until there.
        p = next_after(&cuts, p);
    }
    let at = words.len();
    debug_assert_eq!(at % LINE, 0);
    // Entry j (from 1) is 32-bit half 2 * at + 8 + j: the last one ends word at + 4 + runs / 2.
    let lines = (COUNTS + 1 + runs / 2).div_ceil(LINE);
    words.resize(at + lines * LINE, 0);
    words[at..at + 4].copy_from_slice(&starts);
    // Runs starting before each bitmap word.
    let mut before = [0u32; 4];
    for w in 1..4 {
        before[w] = before[w - 1] + starts[w - 1].count_ones();
    }
    words[at + COUNTS] = (before[1] << 8 | before[2] << 16 | before[3] << 24) as u64;
    let half = |j: usize| 2 * at + 2 * COUNTS + j;
    for (j, &e) in entries[..runs].iter().enumerate() {
        let h = half(j + 1);
        words[h >> 1] |= (e as u64) << (32 * (h & 1));
    }
    let entry = node_entry((at / LINE) as u32, lines);
    if deeper.is_empty() {
        return entry;
    }
    deeper.sort_unstable_by_key(|r| r.prefix.bits(off, STRIDE));
    let mut rest = deeper;
    while !rest.is_empty() {
        let p = rest[0].prefix.bits(off, STRIDE);
        let n = rest
            .iter()
            .take_while(|r| r.prefix.bits(off, STRIDE) == p)
            .count();
        let (group, tail) = rest.split_at_mut(n);
        let c = build_node(group, end, vals[p as usize], words, children);
        // The child's run: the runs starting at or before p.
        let w = p as usize >> 6;
        let j = (before[w] + (starts[w] & upto(p & 63)).count_ones()) as usize;
        let h = half(j);
        words[h >> 1] |= (c as u64) << (32 * (h & 1));
        children.push(h);
        rest = tail;
    }
    entry
}

/// The first set bit of a 256-bit map after position `p`, or 256.
fn next_after(bits: &[u64; 4], p: usize) -> usize {
    let mut w = p >> 6;
    // `!1 << b` keeps the bits above b (none for b = 63).
    let mut m = bits[w] & (!1u64 << (p & 63));
    loop {
        if m != 0 {
            return w * 64 + m.trailing_zeros() as usize;
        }
        w += 1;
        if w == 4 {
            return 256;
        }
        m = bits[w];
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

    /// A full table refuses new routes, short and long, and leaves nothing behind (no empty
    /// route list for the refused route's slot); replacing an existing route still works.
    #[test]
    fn a_full_table_refuses_new_routes_and_still_replaces() {
        let mut w = LpmWriter::<u32>::new(LpmConfig::v4(2), EpochDomain::new());
        assert_eq!(w.insert(0x0a00_0100, 24, 1), Ok(None));
        assert_eq!(w.insert(0x0a00_0000, 8, 2), Ok(None));
        let full = Err(FibError::TableFull { max_routes: 2 });
        assert_eq!(w.insert(0x0b00_0100, 24, 3), full);
        assert_eq!(w.insert(0x0c00_0000, 8, 3), full);
        assert!(!w.long.contains_key(&w.slot_of(0x0b00_0100)));
        assert_eq!(w.insert(0x0a00_0100, 24, 4), Ok(Some(1)));
        assert_eq!(w.insert(0x0a00_0100, 24, 4), Ok(Some(4)));
        assert_eq!(w.insert(0x0a00_0000, 8, 5), Ok(Some(2)));
        w.publish().unwrap();
        assert_eq!(w.len(), 2);
        assert_eq!(w.table().lookup(0x0a00_0107), 4);
        assert_eq!(w.table().lookup(0x0a63_0000), 5);
        assert_eq!(w.table().lookup(0x0b00_0107), NO_ROUTE);
    }

    /// A node as full as it gets: every prefix from /17 to /24 inside one /16 ends in the same
    /// node, and every /24 has a /32 below it (a child at each of the 256 positions).
    #[test]
    fn a_node_with_every_prefix_and_every_child() {
        let mut w = LpmWriter::<u32>::new(LpmConfig::v4(1000), EpochDomain::new());
        let mut reference = crate::ReferenceLpm::<u32>::default();
        let base = 0x0a0b_0000u32;
        let mut nh = 1;
        for len in 17..=24u8 {
            for i in 0..1u32 << (len - 16) {
                let p = base | i << (32 - len);
                w.insert(p, len, nh).unwrap();
                reference.insert(p, len, nh);
                nh += 1;
            }
        }
        for i in 0..256u32 {
            let p = base | i << 8 | 7;
            w.insert(p, 32, nh).unwrap();
            reference.insert(p, 32, nh);
            nh += 1;
        }
        w.publish().unwrap();
        for a in (0..1u32 << 16).map(|h| base | h) {
            assert_eq!(w.table().lookup(a), reference.lookup(a), "{a:#x}");
        }
    }

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
