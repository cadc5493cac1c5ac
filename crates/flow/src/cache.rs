//! The per-worker flow cache.
//!
//! Layout: a table of buckets of [`WAYS`] slots. Each bucket has one 64-byte line of metadata
//! (a 32-bit signature and a last-seen time per slot) and [`WAYS`] 64-byte entries, in a second
//! array (the key, the out interface, the counters and the first-seen time). A flow may live in
//! either of two buckets chosen from its signature ("two-choice" hashing): a new flow goes to
//! the less loaded of the two; when both are full, one of their flows is moved to its own other
//! bucket if that has room (one cuckoo step), and only if none can move is the least recently
//! used of the 16 evicted. Measured: 2M random flows into a 2M-capacity cache (2.125M slots,
//! 94% full) evict 52 of them (0.003%).
//!
//! Costs: a packet of a cached flow reads the bucket line, compares eight signatures at once,
//! then reads and writes its entry: two cache lines, no allocation. A miss reads the second
//! bucket line as well; past the configured capacity a new flow evicts at once (no cuckoo
//! search), so a flood of new flows costs at most three lines each. Measured with
//! `examples/flow_bench.rs` (release, on a shared 2-core VM with 4K pages, CPU time):
//! - hit, working set in L1/L2: 21-30 ns per update;
//! - hit, 2M flows in random order: ~230 ns (bucket line and entry line each a cache and TLB
//!   miss); ~120 ns when the caller runs [`FlowCache::prefetch`] then
//!   [`FlowCache::prefetch_entry`] over a vector of 32 packets before accounting them. On huge
//!   pages (an Intel Xeon, model 207, alternated with the small-page build): 156-174 ns against
//!   198-218 unprefetched, 102-110 against 128-138 prefetched; building the 153 MB table takes
//!   24-44 ms instead of 72-84, but once in five runs 330-410 ms (the kernel making huge pages
//!   free; no compaction stall counted); either way off the workers;
//! - [`FlowCache::sweep`]: 9-15 ns per slot.
//!
//! Memory: 72 bytes per slot (64 entry + 8 metadata); the table has `capacity * 17 / 16` slots
//! (see [`FlowCache::new`]), so 76.5 bytes per flow of configured capacity, 153 MB for 2M
//! flows. All of it is written at construction so the packet path never takes a page fault.
//!
//! Eviction and every other removal goes through the `export` closure and a counter in
//! [`CacheStats`]: nothing leaves the cache unseen.
//!
//! Time: the cache keeps milliseconds as wrapping `u32`s (49.7 days); ages are computed with
//! wrapping subtraction, which is exact as long as every slot is visited by [`FlowCache::sweep`]
//! more often than that, which any sweep budget achieves by orders of magnitude.
//!
//! Counters: the packet count is 40 bits (32 in `packets_lo`, 8 at the top of `bytes_pk`) and the
//! byte count 56 bits, so 2^40 packets and 2^55 bytes per record; a flow that gets near either
//! is exported early as an active timeout (at 10 Mpps that is after 30 hours).

use crate::{Direction, EndReason, FlowKey, FlowRecord};

/// Slots per bucket: eight 32-bit signatures and eight 32-bit times fill one cache line.
pub const WAYS: usize = 8;

const TCP: u8 = 6;
const TCP_FIN: u8 = 0x01;
const TCP_RST: u8 = 0x04;

/// Low 24 bits of `Entry::tag` are key (proto, tos, v6, direction); the top 8 are TCP flags.
const TAG_KEY_MASK: u32 = 0x00FF_FFFF;
const BYTES_MASK: u64 = (1 << 56) - 1;
/// Past either limit a record is exported before the next add can overflow its counters.
const BYTES_LIMIT: u64 = 1 << 55;
const PKT_HI_LIMIT: u64 = 0xFF;
const NS_PER_MS: u64 = 1_000_000;

#[derive(Clone, Copy, Debug)]
pub struct CacheConfig {
    /// Flows the cache must hold (the table gets a little headroom on top, see [`FlowCache::new`]).
    pub capacity: usize,
    /// A flow older than this is exported and its counters restart; 0 disables.
    pub active_timeout_ns: u64,
    /// A flow without packets for this long is exported and removed; 0 disables.
    pub inactive_timeout_ns: u64,
}

/// What the cache did since it was created. `created == occupancy + expired_idle + ended_tcp +
/// evicted + flushed` always holds; `records` counts every record handed to `export` (an entry
/// whose counters were just restarted by an active timeout and which then idles out or is
/// evicted carries no packets and produces no record).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub occupancy: u64,
    /// Slots in the table, the most flows it can ever hold.
    pub slots: u64,
    pub created: u64,
    pub expired_idle: u64,
    pub expired_active: u64,
    pub ended_tcp: u64,
    pub evicted: u64,
    pub flushed: u64,
    pub records: u64,
}

/// A live flow as [`FlowCache::scan`] shows it: its key and counters since the last export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowSeen {
    pub key: FlowKey,
    pub packets: u64,
    pub bytes: u64,
    /// Since its last packet.
    pub idle_ms: u32,
}

/// The metadata line of a bucket: `sig[w] == 0` marks slot `w` free.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Bucket {
    sig: [u32; WAYS],
    /// Last-seen time (wrapping ms) of each slot: LRU choice and idle checks without touching
    /// the entries.
    last: [u32; WAYS],
}

/// One flow: key, counters and first-seen time in exactly one cache line.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Entry {
    src: u128,
    dst: u128,
    /// `src_port << 16 | dst_port`.
    ports: u32,
    in_if: u32,
    /// proto | tos << 8 | v6 << 16 | direction << 17 | tcp_flags << 24.
    tag: u32,
    out_if: u32,
    first: u32,
    packets_lo: u32,
    /// Bytes in the low 56 bits, packet count bits 32..40 in the top 8.
    bytes_pk: u64,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 64);
const _: () = assert!(std::mem::size_of::<Bucket>() == 64);

/// A key in the entry's own encoding, built once per packet so the compare is a few word
/// compares.
#[derive(Clone, Copy)]
struct Probe {
    src: u128,
    dst: u128,
    ports: u32,
    in_if: u32,
    tag: u32,
}

impl Probe {
    #[inline(always)]
    fn new(k: &FlowKey) -> Probe {
        let mask = if k.v6 { u128::MAX } else { 0xFFFF_FFFF };
        Probe {
            src: k.src & mask,
            dst: k.dst & mask,
            ports: u32::from(k.src_port) << 16 | u32::from(k.dst_port),
            in_if: k.in_if,
            tag: u32::from(k.proto)
                | u32::from(k.tos) << 8
                | u32::from(k.v6) << 16
                | (k.direction as u32) << 17,
        }
    }
}

impl Entry {
    #[inline(always)]
    fn matches(&self, p: &Probe) -> bool {
        // One combined test for the small fields keeps this to a couple of branches.
        self.src == p.src
            && self.dst == p.dst
            && ((self.ports ^ p.ports)
                | (self.in_if ^ p.in_if)
                | ((self.tag ^ p.tag) & TAG_KEY_MASK))
                == 0
    }

    fn packets(&self) -> u64 {
        u64::from(self.packets_lo) | (self.bytes_pk >> 56) << 32
    }

    fn bytes(&self) -> u64 {
        self.bytes_pk & BYTES_MASK
    }

    fn near_overflow(&self) -> bool {
        self.bytes_pk >> 56 >= PKT_HI_LIMIT || self.bytes() >= BYTES_LIMIT
    }

    fn reset_counters(&mut self) {
        self.packets_lo = 0;
        self.bytes_pk = 0;
        self.tag &= TAG_KEY_MASK;
    }

    fn key(&self) -> FlowKey {
        FlowKey {
            src: self.src,
            dst: self.dst,
            src_port: (self.ports >> 16) as u16,
            dst_port: self.ports as u16,
            proto: self.tag as u8,
            tos: (self.tag >> 8) as u8,
            v6: self.tag & 1 << 16 != 0,
            in_if: self.in_if,
            direction: if self.tag & 1 << 17 != 0 {
                Direction::Egress
            } else {
                Direction::Ingress
            },
        }
    }
}

/// Wrapping milliseconds of the monotonic clock, the cache's unit of time.
#[inline(always)]
fn ms32(now_ns: u64) -> u32 {
    (now_ns / NS_PER_MS) as u32
}

/// Timeouts kept in ms and clamped below 2^31 so wrapping ages compare correctly; 0 = never.
fn timeout_ms(ns: u64) -> u32 {
    if ns == 0 {
        u32::MAX
    } else {
        (ns / NS_PER_MS).clamp(1, i32::MAX as u64) as u32
    }
}

pub struct FlowCache {
    buckets: Vec<Bucket>,
    entries: Vec<Entry>,
    active_ms: u32,
    inactive_ms: u32,
    /// The configured capacity, below the slot count.
    capacity: u64,
    /// Next slot [`FlowCache::sweep`] looks at.
    cursor: usize,
    stats: CacheStats,
}

impl FlowCache {
    /// Allocates and touches the whole table, on transparent huge pages where the kernel gives
    /// them (see the `hugepages` crate). The table has `capacity * 17 / 16` slots, rounded
    /// up to whole buckets: with two bucket choices that is enough to hold `capacity` random
    /// flows with practically no evictions (2M flows in a 2M-capacity cache: see the tests).
    pub fn new(cfg: CacheConfig) -> FlowCache {
        let want = cfg.capacity.max(1).saturating_mul(17) / 16;
        let nbuckets = want.div_ceil(WAYS).max(2);
        let slots = nbuckets * WAYS;
        FlowCache {
            buckets: hugepages::filled(
                nbuckets,
                Bucket {
                    sig: [0; WAYS],
                    last: [0; WAYS],
                },
            ),
            entries: hugepages::filled(slots, Entry::default()),
            active_ms: timeout_ms(cfg.active_timeout_ns),
            capacity: cfg.capacity as u64,
            inactive_ms: timeout_ms(cfg.inactive_timeout_ns),
            cursor: 0,
            stats: CacheStats {
                slots: slots as u64,
                ..CacheStats::default()
            },
        }
    }

    /// The two candidate buckets of a signature (computed from the signature, not the caller's
    /// hash, so a stored entry's other bucket can be found again when making room). Multiply-
    /// shift maps to any bucket count; the two multipliers differ so that flows sharing one
    /// bucket are spread over different second ones.
    #[inline(always)]
    fn bucket_pair(&self, hash: u32) -> (usize, usize) {
        let n = self.buckets.len() as u64;
        let h1 = hash.wrapping_mul(0x9E37_79B1);
        let h2 = (hash ^ hash >> 16).wrapping_mul(0x85EB_CA77) ^ 0x5bd1_e995;
        let b1 = ((u64::from(h1) * n) >> 32) as usize;
        let mut b2 = ((u64::from(h2) * n) >> 32) as usize;
        if b2 == b1 {
            b2 = if b1 + 1 == n as usize { 0 } else { b1 + 1 };
        }
        (b1, b2)
    }

    #[inline(always)]
    fn find(&self, b: usize, sig: u32, p: &Probe) -> Option<usize> {
        let sigs = &self.buckets[b].sig;
        // One byte per lane, read as a word: the compiler compares all eight lanes in one
        // vector instruction and packs the result, with no branch per lane.
        let lanes: [u8; WAYS] = std::array::from_fn(|w| u8::from(sigs[w] == sig));
        let mut m = u64::from_le_bytes(lanes);
        while m != 0 {
            let w = (m.trailing_zeros() / 8) as usize;
            let s = b * WAYS + w;
            if self.entries[s].matches(p) {
                return Some(s);
            }
            m &= m - 1;
        }
        None
    }

    /// Starts loading the bucket lines of a flow about to be accounted: called for every packet
    /// of a vector before [`FlowCache::account`] is called for the first, it overlaps the cache
    /// misses of the whole vector instead of taking them one after the other.
    #[inline]
    pub fn prefetch(&self, hash: u32) {
        let (b1, b2) = self.bucket_pair(hash | 1);
        prefetch_line(&self.buckets[b1]);
        prefetch_line(&self.buckets[b2]);
    }

    /// The second stage of [`FlowCache::prefetch`]: once the bucket lines are in (call it for
    /// the whole vector after `prefetch` for the whole vector), starts loading the entry whose
    /// signature matches, so `account` finds both of its lines in cache.
    #[inline]
    pub fn prefetch_entry(&self, hash: u32) {
        let sig = hash | 1;
        let (b1, b2) = self.bucket_pair(sig);
        for b in [b1, b2] {
            if let Some(w) = self.buckets[b].sig.iter().position(|&s| s == sig) {
                prefetch_line(&self.entries[b * WAYS + w]);
                return;
            }
        }
    }

    /// Counts one packet of `key`. `hash` must be a function of the key (any 32-bit hash; see
    /// [`FlowKey::hash32`]). `l3_bytes` is the IP packet length. May call `export` with a record
    /// that this packet pushed out: the flow's own (active timeout, TCP FIN/RST) or another's
    /// (eviction from a full bucket).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn account(
        &mut self,
        key: &FlowKey,
        hash: u32,
        l3_bytes: u32,
        tcp_flags: u8,
        out_if: u32,
        now_ns: u64,
        export: &mut impl FnMut(FlowRecord),
    ) {
        let now = ms32(now_ns);
        let probe = Probe::new(key);
        // 0 marks a free slot, so signatures are never 0.
        let sig = hash | 1;
        let (b1, b2) = self.bucket_pair(sig);
        let slot = match self.find(b1, sig, &probe) {
            Some(s) => s,
            None => match self.find(b2, sig, &probe) {
                Some(s) => s,
                None => self.insert(b1, b2, sig, &probe, now_ns, export),
            },
        };

        let e = &self.entries[slot];
        if e.packets() != 0 {
            if now.wrapping_sub(e.first) >= self.active_ms || e.near_overflow() {
                self.export_slot(slot, EndReason::ActiveTimeout, now_ns, export);
                self.stats.expired_active += 1;
                self.entries[slot].reset_counters();
                self.entries[slot].first = now;
            }
        } else {
            self.entries[slot].first = now;
        }

        let e = &mut self.entries[slot];
        let (lo, carry) = e.packets_lo.overflowing_add(1);
        e.packets_lo = lo;
        e.bytes_pk += u64::from(l3_bytes) + (u64::from(carry) << 56);
        e.tag |= u32::from(tcp_flags) << 24;
        e.out_if = out_if;
        self.buckets[slot / WAYS].last[slot % WAYS] = now;

        if key.proto == TCP && tcp_flags & (TCP_FIN | TCP_RST) != 0 {
            self.export_slot(slot, EndReason::EndOfFlow, now_ns, export);
            self.stats.ended_tcp += 1;
            self.free(slot);
        }
    }

    /// Finds room for a new flow in `b1` or `b2`, evicting the least recently used of their
    /// slots when both are full. Cold: only new flows come here.
    #[cold]
    #[inline(never)]
    fn insert(
        &mut self,
        b1: usize,
        b2: usize,
        sig: u32,
        p: &Probe,
        now_ns: u64,
        export: &mut impl FnMut(FlowRecord),
    ) -> usize {
        let now = ms32(now_ns);
        let used = |b: &Bucket| b.sig.iter().filter(|&&s| s != 0).count();
        let (u1, u2) = (used(&self.buckets[b1]), used(&self.buckets[b2]));
        let slot = if u1.min(u2) < WAYS {
            let b = if u1 <= u2 { b1 } else { b2 };
            b * WAYS + self.free_way(b).unwrap_or(0)
        } else if let Some(s) = self.relocate(b1, b2) {
            // (Only tried below the configured capacity, see `relocate`.)
            s
        } else {
            let mut victim = b1 * WAYS;
            let mut oldest = 0u32;
            for b in [b1, b2] {
                for w in 0..WAYS {
                    let age = now.wrapping_sub(self.buckets[b].last[w]);
                    if age >= oldest {
                        oldest = age;
                        victim = b * WAYS + w;
                    }
                }
            }
            if oldest >= self.inactive_ms {
                self.stats.expired_idle += 1;
                self.export_slot(victim, EndReason::IdleTimeout, now_ns, export);
            } else {
                self.stats.evicted += 1;
                self.export_slot(victim, EndReason::ForcedEnd, now_ns, export);
            }
            self.free(victim);
            victim
        };
        self.buckets[slot / WAYS].sig[slot % WAYS] = sig;
        self.entries[slot] = Entry {
            src: p.src,
            dst: p.dst,
            ports: p.ports,
            in_if: p.in_if,
            tag: p.tag,
            out_if: 0,
            first: now,
            packets_lo: 0,
            bytes_pk: 0,
        };
        self.stats.created += 1;
        self.stats.occupancy += 1;
        slot
    }

    fn free_way(&self, b: usize) -> Option<usize> {
        self.buckets[b].sig.iter().position(|&s| s == 0)
    }

    /// Both buckets are full: moves one of their flows to its own other bucket if that has room
    /// (one step of cuckoo hashing) and returns the slot it left. This is what lets the table
    /// fill to ~99% of its slots before evicting, against ~90% for plain two-choice; it costs up
    /// to 16 extra bucket reads, only on inserts into a nearly full table.
    fn relocate(&mut self, b1: usize, b2: usize) -> Option<usize> {
        // At or past the configured capacity a flood of new flows would pay 16 misses each for
        // moves that mostly fail; evicting at once bounds a new flow to 3 cache lines.
        if self.stats.occupancy >= self.capacity {
            return None;
        }
        for b in [b1, b2] {
            for w in 0..WAYS {
                let sig = self.buckets[b].sig[w];
                let (x1, x2) = self.bucket_pair(sig);
                let alt = if x1 == b { x2 } else { x1 };
                if let Some(aw) = self.free_way(alt) {
                    let (from, to) = (b * WAYS + w, alt * WAYS + aw);
                    self.entries[to] = self.entries[from];
                    self.buckets[alt].sig[aw] = sig;
                    self.buckets[alt].last[aw] = self.buckets[b].last[w];
                    self.buckets[b].sig[w] = 0;
                    return Some(from);
                }
            }
        }
        None
    }

    fn free(&mut self, slot: usize) {
        self.buckets[slot / WAYS].sig[slot % WAYS] = 0;
        self.stats.occupancy -= 1;
    }

    /// Hands the slot's record to `export` unless it carries no packets (an entry restarted by an
    /// active timeout and not seen since).
    fn export_slot(
        &mut self,
        slot: usize,
        end: EndReason,
        now_ns: u64,
        export: &mut impl FnMut(FlowRecord),
    ) {
        let e = &self.entries[slot];
        let packets = e.packets();
        if packets == 0 {
            return;
        }
        let now = ms32(now_ns);
        let now_ms = now_ns / NS_PER_MS;
        // Back from wrapping ms to the 64-bit clock: subtract the age, never below 0.
        let at = |t: u32| now_ms.saturating_sub(u64::from(now.wrapping_sub(t))) * NS_PER_MS;
        let rec = FlowRecord {
            key: e.key(),
            out_if: e.out_if,
            packets,
            bytes: e.bytes(),
            first_ns: at(e.first),
            last_ns: at(self.buckets[slot / WAYS].last[slot % WAYS]),
            tcp_flags: (e.tag >> 24) as u8,
            end,
        };
        self.stats.records += 1;
        export(rec);
    }

    /// Visits the next `budget` slots (wrapping around the table) and expires what timed out:
    /// idle flows are exported and removed, flows older than the active timeout are exported and
    /// restarted. To bound how late a timeout fires, call it so that the whole table
    /// (`stats().slots`) is covered within a fraction of the inactive timeout: e.g. 2.2M slots
    /// every 5 s is 44 000 slots per 100 ms. An empty slot costs one metadata read.
    pub fn sweep(&mut self, now_ns: u64, budget: usize, export: &mut impl FnMut(FlowRecord)) {
        let now = ms32(now_ns);
        let slots = self.entries.len();
        for _ in 0..budget.min(slots) {
            let s = self.cursor;
            self.cursor = if s + 1 == slots { 0 } else { s + 1 };
            let (b, w) = (s / WAYS, s % WAYS);
            if self.buckets[b].sig[w] == 0 {
                continue;
            }
            if now.wrapping_sub(self.buckets[b].last[w]) >= self.inactive_ms {
                self.export_slot(s, EndReason::IdleTimeout, now_ns, export);
                self.stats.expired_idle += 1;
                self.free(s);
            } else if self.entries[s].packets() > 0
                && now.wrapping_sub(self.entries[s].first) >= self.active_ms
            {
                self.export_slot(s, EndReason::ActiveTimeout, now_ns, export);
                self.stats.expired_active += 1;
                self.entries[s].reset_counters();
            }
        }
    }

    /// Reads (changes nothing) the `budget` slots from `from` on, stopping at the table's end,
    /// and hands `visit` every flow that saw a packet within the last `active_ms`. Returns the
    /// slot to go on from: 0 once the end is reached, so a caller knows a pass is complete.
    /// For looking at the live flows (the event manager's flow detector) a slice at a time,
    /// without holding the worker for a whole table: an empty or idle slot costs one metadata
    /// read, a live one the read of its entry.
    pub fn scan(
        &self,
        from: usize,
        budget: usize,
        now_ns: u64,
        active_ms: u32,
        visit: &mut impl FnMut(&FlowSeen),
    ) -> usize {
        let now = ms32(now_ns);
        let slots = self.entries.len();
        let end = from.saturating_add(budget).min(slots);
        for s in from.min(end)..end {
            let b = &self.buckets[s / WAYS];
            let w = s % WAYS;
            if b.sig[w] == 0 {
                continue;
            }
            let age = now.wrapping_sub(b.last[w]);
            if age > active_ms {
                continue;
            }
            let e = &self.entries[s];
            visit(&FlowSeen {
                key: e.key(),
                packets: e.packets(),
                bytes: e.bytes(),
                idle_ms: age,
            });
        }
        if end == slots {
            0
        } else {
            end
        }
    }

    /// Exports every flow as [`EndReason::Flush`] and empties the cache.
    pub fn flush(&mut self, now_ns: u64, export: &mut impl FnMut(FlowRecord)) {
        for s in 0..self.entries.len() {
            if self.buckets[s / WAYS].sig[s % WAYS] != 0 {
                self.export_slot(s, EndReason::Flush, now_ns, export);
                self.stats.flushed += 1;
                self.free(s);
            }
        }
    }

    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Memory held by the table.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(self.buckets.as_slice())
            + std::mem::size_of_val(self.entries.as_slice())
            + std::mem::size_of::<Self>()
    }
}

#[cfg(test)]
mod tests;

/// Asks for the cache line holding `x` without waiting for it. (A plain load kept alive with
/// `black_box` was tried first: the store that keeps it stalls the core until the line arrives,
/// which measured slower than no prefetch at all.)
#[inline(always)]
fn prefetch_line<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint: it never faults and reads nothing the program sees; the
        // pointer comes from a live reference anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((x as *const T).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}
