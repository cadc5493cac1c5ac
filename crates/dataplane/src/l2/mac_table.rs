//! The MAC address table: (bridge domain, MAC) -> member, shared by every worker.
//!
//! Reads: every worker looks up destinations and learns sources, at line rate, with no lock: a
//! MAC one worker learns is seen by every other at its next lookup (no per-worker copies, so a
//! frame to a learned address is never flooded because another worker learned it).
//! Sets: entries (learned by workers, static from the config), per bridge domain counts, and
//! the table's counters. Aging and `clear` run on a control thread, also without stopping the
//! workers.
//!
//! Layout. Buckets of four slots, one cache line each (four 8-byte keys, then four 8-byte
//! values); a key lives in one of two buckets (two hashes of the key), so a lookup reads at most
//! two lines. When both of a new key's buckets are full, entries are moved to their other bucket
//! along the shortest path that ends in a free slot (cuckoo hashing, as DPDK's rte_hash does), so
//! the table fills to ~95% before it refuses a key (measured by a test). A key is the bridge
//! domain (16 bits) and the MAC (48 bits) in one `u64`; the value packs the member (20 bits),
//! flags (4), the second it was last seen (24) and 16 check bits of the key (so a reader that
//! raced a slot being reused for another key cannot take that key's value).
//!
//! Writes. A refresh (the same member, a new second) and a move (another member) are one
//! compare-and-swap on the value; a frame from a known MAC within the same second writes nothing,
//! so steady traffic does not bounce cache lines between workers. A new key is inserted under
//! the locks of its two buckets (4,096 lock stripes, taken in order; only inserts and moves
//! take them), so inserts of the same key are serialised and no key is ever in two slots, while
//! workers learning different keys do not wait for one another. A slot is claimed with a
//! reserved key, the value written, then the key published (release); a reader checks the key
//! again after reading the value. When both buckets are full, room is made under the table's
//! one move lock: each move holds the moved key's two bucket locks, copies the entry to its other
//! bucket, then frees the old slot, inside a window a change counter marks (odd while a move is
//! under way): a lookup that misses while a move may have crossed its scan looks again, so a
//! learned address is never missed because it was moving.
//!
//! Full. When both buckets of a key are full, or its bridge domain is at its learn limit, the
//! key is not learned (counted by why) and the caller floods as for an unknown address; nothing
//! is evicted (the table never blocks forwarding and an attacker cannot push out learned hosts);
//! aging frees slots.
//!
//! Moves. A MAC may move at most once a second (a flapping MAC between two ports at full rate
//! then costs one write a second, not one a frame); the moves refused are counted as flaps.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// A bridge domain and a MAC, as one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacKey(u64);

impl MacKey {
    pub fn new(bridge: u16, mac: [u8; 6]) -> MacKey {
        let mut m = 0u64;
        for b in mac {
            m = m << 8 | u64::from(b);
        }
        MacKey(u64::from(bridge) << 48 | m)
    }

    pub fn bridge(self) -> u16 {
        (self.0 >> 48) as u16
    }

    pub fn mac(self) -> [u8; 6] {
        let b = self.0.to_be_bytes();
        [b[2], b[3], b[4], b[5], b[6], b[7]]
    }

    /// A multicast (or broadcast) or all-zero MAC is never a source worth learning.
    pub fn learnable(self) -> bool {
        let mac = self.0 & MAC_BITS;
        mac != 0 && (mac >> 40) & 1 == 0
    }
}

const MAC_BITS: u64 = (1 << 48) - 1;
/// No key: the all-zero MAC is never learned.
const EMPTY: u64 = 0;
/// A slot being filled: bridge 0xffff with the broadcast MAC, never learned either.
const BUSY: u64 = u64::MAX;

const MEMBER_BITS: u32 = 20;
/// Members are numbered below this.
pub const MAX_MEMBERS: u32 = 1 << MEMBER_BITS;
const FLAG_STATIC: u64 = 1 << 20;
const STAMP_SHIFT: u32 = 24;
const STAMP_MASK: u64 = (1 << 24) - 1;
const CHECK_SHIFT: u32 = 48;
/// Aging times beyond this would be confused by the 24-bit seconds' wrap (97 days).
pub const MAX_AGING_S: u32 = 1 << 23;

fn pack(member: u32, fixed: bool, now: u32, check: u16) -> u64 {
    u64::from(member & (MAX_MEMBERS - 1))
        | if fixed { FLAG_STATIC } else { 0 }
        | (u64::from(now) & STAMP_MASK) << STAMP_SHIFT
        | u64::from(check) << CHECK_SHIFT
}

fn member_of(v: u64) -> u32 {
    (v & u64::from(MAX_MEMBERS - 1)) as u32
}

fn stamp_of(v: u64) -> u32 {
    ((v >> STAMP_SHIFT) & STAMP_MASK) as u32
}

fn check_of(v: u64) -> u16 {
    (v >> CHECK_SHIFT) as u16
}

/// Seconds between two 24-bit stamps.
fn age(now: u32, stamp: u32) -> u32 {
    now.wrapping_sub(stamp) & STAMP_MASK as u32
}

const SLOTS: usize = 4;
const LOCK_STRIPES: usize = 4096;
/// Buckets aged or cleared per hold of the insert lock.
const CHUNK: usize = 256;

#[repr(align(64))]
#[derive(Default)]
struct Bucket {
    keys: [AtomicU64; SLOTS],
    values: [AtomicU64; SLOTS],
}

/// What a frame's source did to the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learn {
    /// Known on this member, seen already this second: nothing written.
    Known,
    /// Known on this member; its age starts again.
    Refreshed,
    Learned,
    /// It was on `from`; it is on the frame's member now.
    Moved {
        from: u32,
    },
    NotLearned(NotLearned),
}

/// Why a source was not learned (each counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotLearned {
    /// A multicast or zero source MAC.
    NotUnicast,
    /// Its bridge domain holds its learn limit.
    Limit,
    /// Both of its buckets are full.
    TableFull,
    /// It moved less than a second ago (a flapping MAC).
    Flap,
    /// A static entry holds it on another member.
    Static,
}

/// The table's counters, since it was made.
#[derive(Default, Debug)]
pub struct MacCounters {
    pub learned: AtomicU64,
    pub moved: AtomicU64,
    pub aged: AtomicU64,
    pub cleared: AtomicU64,
    pub not_unicast: AtomicU64,
    pub limit: AtomicU64,
    pub table_full: AtomicU64,
    pub flaps: AtomicU64,
    pub static_refused: AtomicU64,
}

impl MacCounters {
    fn count(&self, why: NotLearned) {
        let c = match why {
            NotLearned::NotUnicast => &self.not_unicast,
            NotLearned::Limit => &self.limit,
            NotLearned::TableFull => &self.table_full,
            NotLearned::Flap => &self.flaps,
            NotLearned::Static => &self.static_refused,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// One entry, as `show mac address-table` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacEntry {
    pub key: MacKey,
    pub member: u32,
    pub fixed: bool,
    /// Seconds since it was last seen (0 for static entries).
    pub age_s: u32,
}

pub struct MacTable {
    buckets: Box<[Bucket]>,
    /// Lock stripes: bucket `b`'s lock is `b % LOCK_STRIPES`. An insert holds its key's two
    /// buckets', a move the moved key's two. Few enough to stay in the cache (a lock per
    /// bucket would be one more miss per new key), many enough that workers rarely meet.
    bucket_locks: Box<[AtomicBool]>,
    /// Taken to move entries (one mover at a time), and by aging and clears.
    insert_lock: AtomicBool,
    /// Odd while a move is under way; counts moves started and ended.
    moving: AtomicU64,
    /// Entries per bridge domain, and each one's learn limit (0: none).
    per_bridge: Box<[AtomicU32]>,
    limits: Box<[AtomicU32]>,
    entries: AtomicU64,
    pub counters: MacCounters,
}

const BRIDGES: usize = 1 << 16;

impl MacTable {
    /// A table for `capacity` entries: slots for 10% more, as cuckoo hashing with four-slot
    /// buckets fills to ~95% before it refuses a key.
    pub fn new(capacity: usize) -> MacTable {
        let n = (capacity.max(SLOTS) * 10 / 9).div_ceil(SLOTS).max(2);
        MacTable {
            buckets: (0..n).map(|_| Bucket::default()).collect(),
            bucket_locks: (0..LOCK_STRIPES).map(|_| AtomicBool::new(false)).collect(),
            insert_lock: AtomicBool::new(false),
            moving: AtomicU64::new(0),
            per_bridge: (0..BRIDGES).map(|_| AtomicU32::new(0)).collect(),
            limits: (0..BRIDGES).map(|_| AtomicU32::new(0)).collect(),
            entries: AtomicU64::new(0),
            counters: MacCounters::default(),
        }
    }

    /// Slots in all (the table's memory is 16 bytes a slot).
    pub fn slots(&self) -> usize {
        self.buckets.len() * SLOTS
    }

    /// Bytes the table takes (buckets, locks, per bridge domain counts and limits).
    pub fn bytes(&self) -> usize {
        self.buckets.len() * std::mem::size_of::<Bucket>() + LOCK_STRIPES + BRIDGES * 8
    }

    pub fn len(&self) -> usize {
        self.entries.load(Ordering::Relaxed) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries in one bridge domain.
    pub fn bridge_len(&self, bridge: u16) -> u32 {
        self.per_bridge[usize::from(bridge)].load(Ordering::Relaxed)
    }

    /// Sets a bridge domain's learn limit (0: none). Entries above a lowered limit stay until
    /// they age; no new ones are learned meanwhile.
    pub fn set_limit(&self, bridge: u16, limit: u32) {
        self.limits[usize::from(bridge)].store(limit, Ordering::Relaxed);
    }

    /// The two buckets of a key and its check bits.
    #[inline]
    fn place(&self, k: u64) -> (usize, usize, u16) {
        let mut h = (k ^ k >> 31).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 29;
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 32;
        let n = self.buckets.len() as u64;
        // Multiply-shift maps a hash onto any bucket count (not only powers of two).
        let b1 = (((h & 0xffff_ffff) * n) >> 32) as usize;
        let mut b2 = (((h >> 32) * n) >> 32) as usize;
        if b2 == b1 {
            b2 = if b1 + 1 == n as usize { 0 } else { b1 + 1 };
        }
        let check = (k.wrapping_mul(0x94d0_49bb_1331_11eb) >> 48) as u16;
        (b1, b2, check)
    }

    /// The slot holding `k` and its value, if any.
    #[inline(always)]
    fn find(&self, k: u64, b1: usize, b2: usize, check: u16) -> Option<(&AtomicU64, u64)> {
        for b in [b1, b2] {
            let bucket = &self.buckets[b];
            for i in 0..SLOTS {
                if bucket.keys[i].load(Ordering::Acquire) != k {
                    continue;
                }
                let v = bucket.values[i].load(Ordering::Acquire);
                // The key again: the value read belongs to it unless the slot was freed and
                // reused meanwhile, which the check bits catch.
                if bucket.keys[i].load(Ordering::Acquire) == k && check_of(v) == check {
                    return Some((&bucket.values[i], v));
                }
            }
        }
        None
    }

    /// The member a destination is on, if known.
    #[inline]
    pub fn lookup(&self, key: MacKey) -> Option<u32> {
        let (b1, b2, check) = self.place(key.0);
        loop {
            let before = self.moving.load(Ordering::Acquire);
            if let Some((_, v)) = self.find(key.0, b1, b2, check) {
                return Some(member_of(v));
            }
            // A miss counts only if no move started or ended during the scan (the key loads
            // are acquires: this load cannot pass them).
            if before & 1 == 0 && self.moving.load(Ordering::Acquire) == before {
                return None;
            }
            std::hint::spin_loop();
        }
    }

    /// Hints the cache to fetch a bucket.
    #[inline(always)]
    fn prefetch(&self, b: usize) {
        prefetch(self.buckets.as_ptr().wrapping_add(b).cast());
    }

    /// How far ahead a batch prefetches: enough misses in flight to hide memory's latency.
    const AHEAD: usize = 8;

    /// Calls `f(i, place)` for each key in order, with the buckets of the key `AHEAD` on
    /// prefetched, so a cold table costs overlapping misses instead of one at a time. Places
    /// are kept in a ring on the stack: no allocation per vector.
    #[inline(always)]
    fn each_prefetched(&self, keys: &[MacKey], mut f: impl FnMut(usize, (usize, usize, u16))) {
        let mut ring = [(0usize, 0usize, 0u16); Self::AHEAD];
        for (i, k) in keys.iter().enumerate().take(Self::AHEAD) {
            ring[i] = self.place(k.0);
            self.prefetch(ring[i].0);
            self.prefetch(ring[i].1);
        }
        for i in 0..keys.len() {
            let here = ring[i % Self::AHEAD];
            if let Some(k) = keys.get(i + Self::AHEAD) {
                let p = self.place(k.0);
                self.prefetch(p.0);
                self.prefetch(p.1);
                ring[i % Self::AHEAD] = p;
            }
            f(i, here);
        }
    }

    /// [`lookup`](Self::lookup) for a vector of keys, prefetched `AHEAD` keys on.
    pub fn lookup_batch(&self, keys: &[MacKey], out: &mut [Option<u32>]) {
        let n = keys.len().min(out.len());
        self.each_prefetched(&keys[..n], |i, (b1, b2, check)| {
            let k = keys[i];
            out[i] = match self.find(k.0, b1, b2, check) {
                Some((_, v)) => Some(member_of(v)),
                // A group address is never in the table (sources are unicast, and so are
                // static entries): no second look. Multicast through a bridge is all misses.
                None if k.0 >> 40 & 1 == 1 => None,
                // Rare: a miss, checked against moves as a single lookup does.
                None => self.lookup(k),
            };
        });
    }

    /// [`learn`](Self::learn) for a vector of sources (`members[i]` is where `keys[i]` came
    /// from), prefetched `AHEAD` keys on.
    pub fn learn_batch(&self, keys: &[MacKey], members: &[u32], now: u32, out: &mut [Learn]) {
        let n = keys.len().min(members.len()).min(out.len());
        let mut learned = 0;
        self.each_prefetched(&keys[..n], |i, place| {
            let r = self.learn_at(keys[i], members[i], now, false, place);
            match r {
                Learn::NotLearned(why) => self.counters.count(why),
                Learn::Learned => learned += 1,
                _ => {}
            }
            out[i] = r;
        });
        // Once a vector: the counter's line is shared by every learning worker.
        if learned > 0 {
            self.counters.learned.fetch_add(learned, Ordering::Relaxed);
        }
    }

    /// Learns or refreshes a frame's source on `member` at second `now`.
    pub fn learn(&self, key: MacKey, member: u32, now: u32) -> Learn {
        let r = self.learn_inner(key, member, now, false);
        match r {
            Learn::NotLearned(why) => self.counters.count(why),
            Learn::Learned => {
                self.counters.learned.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        r
    }

    /// Sets a static entry (the config's): never aged, never moved by traffic. Refused only
    /// when the key's buckets are full.
    pub fn set_static(&self, key: MacKey, member: u32) -> Result<(), NotLearned> {
        match self.learn_inner(key, member, 0, true) {
            Learn::NotLearned(why) => Err(why),
            _ => Ok(()),
        }
    }

    fn learn_inner(&self, key: MacKey, member: u32, now: u32, fixed: bool) -> Learn {
        self.learn_at(key, member, now, fixed, self.place(key.0))
    }

    #[inline]
    fn learn_at(
        &self,
        key: MacKey,
        member: u32,
        now: u32,
        fixed: bool,
        (b1, b2, check): (usize, usize, u16),
    ) -> Learn {
        if !key.learnable() {
            return Learn::NotLearned(NotLearned::NotUnicast);
        }
        let k = key.0;
        if let Some(r) = self.update(k, b1, b2, check, member, now, fixed) {
            return r;
        }
        let bridge = usize::from(key.bridge());
        let limit = self.limits[bridge].load(Ordering::Relaxed);
        if !fixed && limit != 0 && self.per_bridge[bridge].load(Ordering::Relaxed) >= limit {
            return Learn::NotLearned(NotLearned::Limit);
        }
        let value = pack(member, fixed, now, check);
        loop {
            // Another worker may have inserted it meanwhile; under the two locks no other insert
            // of this key and no move of it is under way, so a miss is a miss.
            let done = self.with_buckets(b1, b2, || {
                match self.update(k, b1, b2, check, member, now, fixed) {
                    Some(r) => Some(r),
                    None => self.claim(k, b1, b2, value, bridge),
                }
            });
            if let Some(r) = done {
                return r;
            }
            // Both buckets full: make room, then try again (another insert may take the room
            // first; then the search runs again).
            let made = self.locked(|| match self.cuckoo_path(b1, b2) {
                Some(path) => {
                    self.shift(&path);
                    true
                }
                None => false,
            });
            if !made {
                return Learn::NotLearned(NotLearned::TableFull);
            }
        }
    }

    /// Runs `f` holding the locks of buckets `a` and `b` (taken in stripe order; one if they
    /// share a stripe).
    fn with_buckets<T>(&self, a: usize, b: usize, f: impl FnOnce() -> T) -> T {
        let (a, b) = (a % LOCK_STRIPES, b % LOCK_STRIPES);
        let (lo, hi) = if a < b { (a, b) } else { (b, a) };
        let take = |i: usize| {
            while self.bucket_locks[i]
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                std::hint::spin_loop();
            }
        };
        take(lo);
        if hi != lo {
            take(hi);
        }
        let r = f();
        if hi != lo {
            self.bucket_locks[hi].store(false, Ordering::Release);
        }
        self.bucket_locks[lo].store(false, Ordering::Release);
        r
    }

    /// Refreshes or moves `k` if present.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn update(
        &self,
        k: u64,
        b1: usize,
        b2: usize,
        check: u16,
        member: u32,
        now: u32,
        fixed: bool,
    ) -> Option<Learn> {
        let (slot, mut v) = self.find(k, b1, b2, check)?;
        loop {
            let was_static = v & FLAG_STATIC != 0;
            let (new, result) = if fixed {
                (pack(member, true, 0, check), Learn::Refreshed)
            } else if was_static {
                if member_of(v) == member {
                    return Some(Learn::Known);
                }
                return Some(Learn::NotLearned(NotLearned::Static));
            } else if member_of(v) == member {
                if stamp_of(v) == now & STAMP_MASK as u32 {
                    return Some(Learn::Known);
                }
                (pack(member, false, now, check), Learn::Refreshed)
            } else if stamp_of(v) == now & STAMP_MASK as u32 {
                // Moved (or learned) this very second: a flap.
                return Some(Learn::NotLearned(NotLearned::Flap));
            } else {
                (
                    pack(member, false, now, check),
                    Learn::Moved { from: member_of(v) },
                )
            };
            match slot.compare_exchange_weak(v, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    if let Learn::Moved { .. } = result {
                        self.counters.moved.fetch_add(1, Ordering::Relaxed);
                    }
                    return Some(result);
                }
                // Its check bits changed: the slot went to another key; learn it afresh.
                Err(now_v) if check_of(now_v) != check => return None,
                Err(now_v) => v = now_v,
            }
        }
    }

    /// Puts `k` in a free slot of one of its buckets, if one has one (called with both
    /// buckets' locks).
    fn claim(&self, k: u64, b1: usize, b2: usize, value: u64, bridge: usize) -> Option<Learn> {
        for b in [b1, b2] {
            let bucket = &self.buckets[b];
            for i in 0..SLOTS {
                // Whoever claims a slot of a bucket holds that bucket's stripe (inserts hold
                // both of their key's, a move its destination's), and aging only frees slots:
                // a free slot seen here stays free, so no compare-and-swap is needed. BUSY
                // marks it while the value is written; the key is published last.
                if bucket.keys[i].load(Ordering::Relaxed) == EMPTY {
                    bucket.keys[i].store(BUSY, Ordering::Relaxed);
                    bucket.values[i].store(value, Ordering::Release);
                    bucket.keys[i].store(k, Ordering::Release);
                    self.per_bridge[bridge].fetch_add(1, Ordering::Relaxed);
                    self.entries.fetch_add(1, Ordering::Relaxed);
                    return Some(Learn::Learned);
                }
            }
        }
        None
    }

    fn free_slot(&self, b: usize) -> Option<(usize, usize)> {
        (0..SLOTS)
            .find(|&i| self.buckets[b].keys[i].load(Ordering::Acquire) == EMPTY)
            .map(|i| (b, i))
    }

    /// The shortest chain of moves (breadth first, at most `MAX_PATH` buckets explored) that
    /// frees a slot in `b1` or `b2`: `(bucket, slot)` from a slot of `b1`/`b2` to the bucket
    /// with a free slot, each entry to move into the next bucket.
    fn cuckoo_path(&self, b1: usize, b2: usize) -> Option<Vec<(usize, usize)>> {
        const MAX_PATH: usize = 2048;
        // (bucket, the node it came from, the slot of that node's bucket moved into it)
        let mut nodes: Vec<(usize, usize, usize)> = vec![(b1, usize::MAX, 0), (b2, usize::MAX, 0)];
        let mut at = 0;
        while at < nodes.len() && nodes.len() < MAX_PATH {
            let b = nodes[at].0;
            if at >= 2 && self.free_slot(b).is_some() {
                // Walk back to the start: each step is (bucket, slot) whose entry moves on.
                let mut path = Vec::new();
                let mut n = at;
                while nodes[n].1 != usize::MAX {
                    let (_, parent, slot) = nodes[n];
                    path.push((nodes[parent].0, slot));
                    n = parent;
                }
                path.reverse();
                path.push((b, usize::MAX));
                return Some(path);
            }
            for i in 0..SLOTS {
                let k = self.buckets[b].keys[i].load(Ordering::Acquire);
                if k == EMPTY || k == BUSY {
                    continue;
                }
                let (x1, x2, _) = self.place(k);
                let other = if x1 == b { x2 } else { x1 };
                nodes.push((other, at, i));
            }
            at += 1;
        }
        None
    }

    /// Moves the entries of a cuckoo path along it, last first, so each lands in a free slot and
    /// the first slot of the path ends free (called with the move lock; each move holds the moved
    /// key's two bucket locks, so no insert of that key runs meanwhile). Stops early if an
    /// insert took the free slot a move needed; the caller searches again.
    fn shift(&self, path: &[(usize, usize)]) {
        for w in path.windows(2).rev() {
            let (from, i) = w[0];
            let to = w[1].0;
            let moved = self.with_buckets(from, to, || {
                let (src, dst) = (&self.buckets[from], &self.buckets[to]);
                let k = src.keys[i].load(Ordering::Acquire);
                if k == EMPTY || k == BUSY {
                    return true; // free already
                }
                let Some(j) = (0..SLOTS).find(|&j| {
                    dst.keys[j].load(Ordering::Relaxed) == EMPTY
                        && dst.keys[j]
                            .compare_exchange(EMPTY, BUSY, Ordering::Acquire, Ordering::Relaxed)
                            .is_ok()
                }) else {
                    return false;
                };
                self.moving.fetch_add(1, Ordering::AcqRel);
                let v = src.values[i].load(Ordering::Acquire);
                dst.values[j].store(v, Ordering::Release);
                dst.keys[j].store(k, Ordering::Release);
                // Only aging and clears free slots, and they hold the move lock.
                src.keys[i].store(EMPTY, Ordering::Release);
                // A refresh or move that landed on the old slot after the copy carries over.
                let last = src.values[i].load(Ordering::Acquire);
                if last != v {
                    let _ = dst.values[j].compare_exchange(
                        v,
                        last,
                        Ordering::AcqRel,
                        Ordering::Relaxed,
                    );
                }
                self.moving.fetch_add(1, Ordering::Release);
                true
            });
            if !moved {
                return;
            }
        }
    }

    /// Runs `f` with the move lock, so no move crosses what it does.
    fn locked<T>(&self, f: impl FnOnce() -> T) -> T {
        while self
            .insert_lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        let r = f();
        self.insert_lock.store(false, Ordering::Release);
        r
    }

    /// Frees the slot `(b, i)` if it still holds `k`.
    fn remove_slot(&self, b: usize, i: usize, k: u64) -> bool {
        let ok = self.buckets[b].keys[i]
            .compare_exchange(k, EMPTY, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok();
        if ok {
            self.per_bridge[usize::from(MacKey(k).bridge())].fetch_sub(1, Ordering::Relaxed);
            self.entries.fetch_sub(1, Ordering::Relaxed);
        }
        ok
    }

    /// Removes learned entries of `buckets` (a range, so a control thread can spread a sweep
    /// over time) not seen for their bridge domain's aging time (`aging(bridge)`, seconds; 0
    /// never ages). Returns how many went.
    pub fn age(
        &self,
        buckets: std::ops::Range<usize>,
        now: u32,
        aging: impl Fn(u16) -> u32,
    ) -> usize {
        let mut n = 0;
        let end = buckets.end.min(self.buckets.len());
        // Under the insert lock, a chunk at a time: a move never copies an entry being aged,
        // and inserts wait microseconds, not a whole sweep.
        for chunk in (buckets.start..end).step_by(CHUNK) {
            n += self.locked(|| {
                let mut n = 0;
                for b in chunk..(chunk + CHUNK).min(end) {
                    for i in 0..SLOTS {
                        let k = self.buckets[b].keys[i].load(Ordering::Acquire);
                        if k == EMPTY || k == BUSY {
                            continue;
                        }
                        let v = self.buckets[b].values[i].load(Ordering::Acquire);
                        let limit = aging(MacKey(k).bridge()).min(MAX_AGING_S);
                        // An age of MAX_AGING_S or more is a stamp ahead of `now`: a worker
                        // refreshed the entry in the second after this sweep read the clock.
                        let a = age(now, stamp_of(v));
                        if v & FLAG_STATIC == 0
                            && limit != 0
                            && a >= limit
                            && a < MAX_AGING_S
                            && self.remove_slot(b, i, k)
                        {
                            n += 1;
                        }
                    }
                }
                n
            });
        }
        self.counters.aged.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// Buckets in all: the range `age` sweeps.
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Removes the entries `which` picks (`clear mac address-table`, a member removed); static
    /// ones only if `statics`. Returns how many went.
    pub fn clear(&self, statics: bool, which: impl Fn(&MacEntry) -> bool) -> usize {
        let mut n = 0;
        for chunk in (0..self.buckets.len()).step_by(CHUNK) {
            n += self.locked(|| {
                let mut n = 0;
                for b in chunk..(chunk + CHUNK).min(self.buckets.len()) {
                    for i in 0..SLOTS {
                        let k = self.buckets[b].keys[i].load(Ordering::Acquire);
                        if k == EMPTY || k == BUSY {
                            continue;
                        }
                        let v = self.buckets[b].values[i].load(Ordering::Acquire);
                        let e = entry(k, v, 0);
                        if (statics || !e.fixed) && which(&e) && self.remove_slot(b, i, k) {
                            n += 1;
                        }
                    }
                }
                n
            });
        }
        self.counters.cleared.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// Every entry, in table order, with its age at `now`.
    pub fn entries(&self, now: u32) -> Vec<MacEntry> {
        let mut out = Vec::with_capacity(self.len());
        for b in self.buckets.iter() {
            for i in 0..SLOTS {
                let k = b.keys[i].load(Ordering::Acquire);
                if k != EMPTY && k != BUSY {
                    out.push(entry(k, b.values[i].load(Ordering::Acquire), now));
                }
            }
        }
        out
    }
}

/// Hints the cache to fetch the line at `p`.
#[inline(always)]
fn prefetch(p: *const i8) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch only hints the cache: it never faults, whatever the address, and
        // reads nothing we see (callers pass addresses inside the table anyway).
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

fn entry(k: u64, v: u64, now: u32) -> MacEntry {
    let fixed = v & FLAG_STATIC != 0;
    MacEntry {
        key: MacKey(k),
        member: member_of(v),
        fixed,
        age_s: if fixed { 0 } else { age(now, stamp_of(v)) },
    }
}

#[cfg(test)]
mod tests;
