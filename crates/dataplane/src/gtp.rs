//! The GGSN's PDP contexts as the data plane reads them: by the TEID an uplink G-PDU carries
//! (gtpu-input) and by the UE's address a downlink packet is sent to (gtpu-encap).
//!
//! Sized once, when the router starts, for `limits.gtp-contexts` contexts (a million and more):
//! - contexts live in a flat array of slots, one cache line each. The TEID the GGSN hands the
//!   SGSN *is* the slot's index, with a generation in the bits above it, so an uplink lookup
//!   is one load, and a TEID of a deleted context (an old generation) misses instead of
//!   reaching whoever has the slot now;
//! - each APN's pools map the UE's address to its slot by the address's offset in the pool
//!   (IPv4: the host number; IPv6: the /64 prefix's number), one array load, no hash;
//! - traffic counters are per worker, one row of four per slot ([`Counters`]), written only by
//!   their worker; the control plane reads them and keeps each context's starting point, so a
//!   reused slot's old counts are never charged to the new context.
//!
//! One writer (the GTP-C service) installs and removes contexts while workers read: each slot
//! is a sequence lock (odd while being written), so a reader either sees the whole context or
//! retries; slots are never freed, so nothing needs reclaiming. A context is visible to the
//! workers from the moment [`GtpTable::install`] returns.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// The GGSN's user plane as the tables carry it (rebuilt with them; the context table itself
/// outlives commits).
pub struct Gtpu {
    pub table: Arc<GtpTable>,
    /// The GGSN's GTP-U address: the source of the tunnels it sends.
    pub local_v4: u32,
    /// The VRF the Gn side (the SGSNs) is in: where tunnelled packets are routed.
    pub gn_vrf: u32,
    /// Per APN (the index the context table and `NextHop::GtpApn` use).
    pub apns: Box<[ApnPlane]>,
}

/// One APN as the data plane sees it.
#[derive(Clone, Debug)]
pub struct ApnPlane {
    pub name: String,
    /// The APN's interface (`apn-NAME`): decapsulated packets arrive on it, in its VRF.
    pub ifx: u32,
}

/// A context's uplink view: what gtpu-input checks and where it sends the inner packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Uplink {
    pub slot: u32,
    pub apn: u16,
    /// The UE's IPv4 address (None: no IPv4 PDP address).
    pub ue_v4: Option<u32>,
    /// The UE's IPv6 /64 prefix, upper 64 bits (None: no IPv6 PDP address).
    pub ue_v6: Option<u64>,
}

/// A context's downlink view: where gtpu-encap sends the tunnelled packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Downlink {
    pub slot: u32,
    /// The SGSN's TEID for user data.
    pub peer_teid: u32,
    /// The SGSN's user-plane address (IPv4).
    pub peer: u32,
}

/// A context as the control plane installs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context {
    pub apn: u16,
    pub peer_teid: u32,
    pub peer: u32,
    pub ue_v4: Option<u32>,
    pub ue_v6: Option<u64>,
}

const HAS_V4: u32 = 1 << 16;
const HAS_V6: u32 = 1 << 17;

#[repr(C, align(64))]
#[derive(Default)]
struct Slot {
    /// Even: stable; odd: being written.
    seq: AtomicU32,
    /// The context's TEID (slot index and generation); 0 while the slot is free.
    teid: AtomicU32,
    peer_teid: AtomicU32,
    peer: AtomicU32,
    /// APN index in the low 16 bits, HAS_V4 / HAS_V6 above.
    apn: AtomicU32,
    ue_v4: AtomicU32,
    ue_v6: AtomicU64,
}

/// One APN's pools: address offset -> slot + 1 (0: none).
struct ApnMap {
    v4_base: u32,
    v4: Box<[AtomicU32]>,
    v6_base: u64,
    v6: Box<[AtomicU32]>,
}

/// An APN's pools as the table is built: the IPv4 pool's first address and size, and the
/// IPv6 pool's first /64 (upper 64 bits) and number of /64s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApnPools {
    pub v4: Option<(u32, u32)>,
    pub v6: Option<(u64, u32)>,
}

/// Per-context counters of one worker: uplink packets and bytes, downlink packets and bytes.
pub struct Counters(Box<[AtomicU64]>);

/// The counters' order within a slot's row.
pub const UP_PACKETS: usize = 0;
pub const UP_BYTES: usize = 1;
pub const DOWN_PACKETS: usize = 2;
pub const DOWN_BYTES: usize = 3;

impl Counters {
    /// Rows of four for `slots` slots, all zero.
    pub fn new(slots: usize) -> Counters {
        Counters((0..slots * 4).map(|_| AtomicU64::new(0)).collect())
    }

    /// `slot`'s row (zeros beyond the table).
    pub fn read(&self, slot: u32) -> [u64; 4] {
        let i = slot as usize * 4;
        let mut out = [0u64; 4];
        if let Some(row) = self.0.get(i..i + 4) {
            for (o, c) in out.iter_mut().zip(row) {
                *o = c.load(Ordering::Relaxed);
            }
        }
        out
    }

    /// Starts loading `slot`'s row (a context's four counters share a cache line).
    #[inline(always)]
    pub fn prefetch(&self, slot: u32) {
        if let Some(c) = self.0.get(slot as usize * 4) {
            fib::lpm::prefetch(c as *const AtomicU64 as *const u8);
        }
    }

    /// Adds `packets` and `bytes` to `slot`'s uplink (`dir` 0) or downlink (`dir` 2) counters.
    /// Only this worker writes its row: a load and a store, no atomic read-modify-write.
    #[inline(always)]
    pub fn add(&self, slot: u32, dir: usize, packets: u64, bytes: u64) {
        let i = slot as usize * 4 + dir;
        if let Some(c) = self.0.get(i..i + 2) {
            c[0].store(c[0].load(Ordering::Relaxed) + packets, Ordering::Relaxed);
            c[1].store(c[1].load(Ordering::Relaxed) + bytes, Ordering::Relaxed);
        }
    }
}

pub struct GtpTable {
    slots: Box<[Slot]>,
    /// Bits of a TEID that are the slot index; the generation is above them.
    slot_bits: u32,
    apns: Box<[ApnMap]>,
    counters: Box<[Counters]>,
}

impl GtpTable {
    /// A table for `capacity` contexts (at most 2^24), `apns` APNs' pools (each at most 2^24
    /// addresses or prefixes) and `workers` workers' counters.
    pub fn new(capacity: u32, apns: &[ApnPools], workers: usize) -> GtpTable {
        let capacity = capacity.clamp(1, 1 << 24);
        let slot_bits = 32 - (capacity - 1).leading_zeros().min(31);
        let zeros = |n: u32| (0..n.min(1 << 24)).map(|_| AtomicU32::new(0)).collect();
        GtpTable {
            slots: (0..capacity).map(|_| Slot::default()).collect(),
            slot_bits: slot_bits.max(1),
            apns: apns
                .iter()
                .map(|p| ApnMap {
                    v4_base: p.v4.map_or(0, |v| v.0),
                    v4: zeros(p.v4.map_or(0, |v| v.1)),
                    v6_base: p.v6.map_or(0, |v| v.0),
                    v6: zeros(p.v6.map_or(0, |v| v.1)),
                })
                .collect(),
            counters: (0..workers.max(1))
                .map(|_| Counters::new(capacity as usize))
                .collect(),
        }
    }

    pub fn capacity(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Bytes the table holds per context slot (the slot, its pool entries, its counters).
    pub fn bytes(&self) -> usize {
        let maps: usize = self
            .apns
            .iter()
            .map(|a| (a.v4.len() + a.v6.len()) * 4)
            .sum();
        self.slots.len() * std::mem::size_of::<Slot>()
            + maps
            + self.counters.len() * self.slots.len() * 32
    }

    /// The TEID of generation `generation` of slot `slot` (never 0: generations start at 1).
    pub fn teid(&self, slot: u32, generation: u32) -> u32 {
        let g = generation & (u32::MAX >> self.slot_bits);
        (g.max(1) << self.slot_bits) | slot
    }

    /// The slot a TEID names.
    #[inline(always)]
    pub fn slot_of(&self, teid: u32) -> u32 {
        teid & ((1u32 << self.slot_bits) - 1)
    }

    /// The next generation after `teid`'s, as [`GtpTable::teid`] takes it.
    pub fn next_generation(&self, teid: u32) -> u32 {
        let g = teid >> self.slot_bits;
        let max = u32::MAX >> self.slot_bits;
        if g >= max {
            1
        } else {
            g + 1
        }
    }

    /// Worker `w`'s counters (workers beyond the table's share the last row set; the runtime
    /// sizes the table for every worker).
    #[inline(always)]
    pub fn counters(&self, w: u16) -> &Counters {
        &self.counters[(w as usize).min(self.counters.len() - 1)]
    }

    /// The context uplink G-PDUs with `teid` belong to.
    #[inline(always)]
    pub fn uplink(&self, teid: u32) -> Option<Uplink> {
        let slot = self.slot_of(teid);
        let s = self.slots.get(slot as usize)?;
        loop {
            let seq = s.seq.load(Ordering::Acquire);
            let cur = s.teid.load(Ordering::Relaxed);
            let apn = s.apn.load(Ordering::Relaxed);
            let v4 = s.ue_v4.load(Ordering::Relaxed);
            let v6 = s.ue_v6.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if seq & 1 == 0 && s.seq.load(Ordering::Relaxed) == seq {
                if cur != teid || teid == 0 {
                    return None;
                }
                return Some(Uplink {
                    slot,
                    apn: apn as u16,
                    ue_v4: (apn & HAS_V4 != 0).then_some(v4),
                    ue_v6: (apn & HAS_V6 != 0).then_some(v6),
                });
            }
            std::hint::spin_loop();
        }
    }

    /// Prefetches the slot of `teid` (a vector's lookups overlap their cache misses).
    #[inline(always)]
    pub fn prefetch_teid(&self, teid: u32) {
        if let Some(s) = self.slots.get(self.slot_of(teid) as usize) {
            fib::lpm::prefetch(s as *const Slot as *const u8);
        }
    }

    /// Prefetches slot `slot` (its context, for [`GtpTable::downlink`]).
    #[inline(always)]
    pub fn prefetch_slot(&self, slot: u32) {
        if let Some(s) = self.slots.get(slot as usize) {
            fib::lpm::prefetch(s as *const Slot as *const u8);
        }
    }

    /// The slot holding IPv4 address `ue` of APN `apn`, if a context has it.
    #[inline(always)]
    pub fn slot_v4(&self, apn: u16, ue: u32) -> Option<u32> {
        let m = self.apns.get(apn as usize)?;
        let e = m.v4.get(ue.wrapping_sub(m.v4_base) as usize)?;
        e.load(Ordering::Acquire).checked_sub(1)
    }

    /// The slot holding the /64 whose upper bits are `prefix` in APN `apn`.
    #[inline(always)]
    pub fn slot_v6(&self, apn: u16, prefix: u64) -> Option<u32> {
        let m = self.apns.get(apn as usize)?;
        let off = prefix.wrapping_sub(m.v6_base);
        let e = m.v6.get(usize::try_from(off).ok()?)?;
        e.load(Ordering::Acquire).checked_sub(1)
    }

    /// Where a downlink packet for the context in `slot` goes: None if the slot was freed (or
    /// reused by another APN) since the address map pointed at it.
    #[inline(always)]
    pub fn downlink(&self, slot: u32, apn: u16) -> Option<Downlink> {
        let s = self.slots.get(slot as usize)?;
        loop {
            let seq = s.seq.load(Ordering::Acquire);
            let teid = s.teid.load(Ordering::Relaxed);
            let a = s.apn.load(Ordering::Relaxed);
            let peer_teid = s.peer_teid.load(Ordering::Relaxed);
            let peer = s.peer.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if seq & 1 == 0 && s.seq.load(Ordering::Relaxed) == seq {
                if teid == 0 || a as u16 != apn {
                    return None;
                }
                return Some(Downlink {
                    slot,
                    peer_teid,
                    peer,
                });
            }
            std::hint::spin_loop();
        }
    }

    /// Prefetches the address-map entry of `ue` in APN `apn`.
    #[inline(always)]
    pub fn prefetch_v4(&self, apn: u16, ue: u32) {
        if let Some(m) = self.apns.get(apn as usize) {
            if let Some(e) = m.v4.get(ue.wrapping_sub(m.v4_base) as usize) {
                fib::lpm::prefetch(e as *const AtomicU32 as *const u8);
            }
        }
    }

    /// Writes `ctx` into its slot under the TEID `teid` and maps its addresses (the writer's
    /// side: one thread at a time). The pools' owner has checked the addresses are in them.
    pub fn install(&self, teid: u32, ctx: &Context) {
        let slot = self.slot_of(teid);
        let s = &self.slots[slot as usize];
        self.write(s, |s| {
            s.teid.store(teid, Ordering::Relaxed);
            s.peer_teid.store(ctx.peer_teid, Ordering::Relaxed);
            s.peer.store(ctx.peer, Ordering::Relaxed);
            let flags = u32::from(ctx.apn)
                | if ctx.ue_v4.is_some() { HAS_V4 } else { 0 }
                | if ctx.ue_v6.is_some() { HAS_V6 } else { 0 };
            s.apn.store(flags, Ordering::Relaxed);
            s.ue_v4.store(ctx.ue_v4.unwrap_or(0), Ordering::Relaxed);
            s.ue_v6.store(ctx.ue_v6.unwrap_or(0), Ordering::Relaxed);
        });
        if let Some(m) = self.apns.get(ctx.apn as usize) {
            if let Some(e) = ctx
                .ue_v4
                .and_then(|a| m.v4.get(a.wrapping_sub(m.v4_base) as usize))
            {
                e.store(slot + 1, Ordering::Release);
            }
            if let Some(e) = ctx
                .ue_v6
                .and_then(|p| usize::try_from(p.wrapping_sub(m.v6_base)).ok())
                .and_then(|i| m.v6.get(i))
            {
                e.store(slot + 1, Ordering::Release);
            }
        }
    }

    /// Changes where a context's downlink goes (an Update PDP Context from a new SGSN).
    pub fn update_peer(&self, teid: u32, peer_teid: u32, peer: u32) {
        let s = &self.slots[self.slot_of(teid) as usize];
        self.write(s, |s| {
            s.peer_teid.store(peer_teid, Ordering::Relaxed);
            s.peer.store(peer, Ordering::Relaxed);
        });
    }

    /// Frees the context with `teid`: its addresses unmapped, then its slot.
    pub fn remove(&self, teid: u32, ctx: &Context) {
        if let Some(m) = self.apns.get(ctx.apn as usize) {
            let slot = self.slot_of(teid) + 1;
            let clear = |e: Option<&AtomicU32>| {
                if let Some(e) = e {
                    let _ = e.compare_exchange(slot, 0, Ordering::AcqRel, Ordering::Relaxed);
                }
            };
            clear(
                ctx.ue_v4
                    .and_then(|a| m.v4.get(a.wrapping_sub(m.v4_base) as usize)),
            );
            clear(
                ctx.ue_v6
                    .and_then(|p| usize::try_from(p.wrapping_sub(m.v6_base)).ok())
                    .and_then(|i| m.v6.get(i)),
            );
        }
        let s = &self.slots[self.slot_of(teid) as usize];
        self.write(s, |s| s.teid.store(0, Ordering::Relaxed));
    }

    fn write(&self, s: &Slot, f: impl FnOnce(&Slot)) {
        let seq = s.seq.load(Ordering::Relaxed);
        s.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // Readers that see any of the new fields see the odd sequence first.
        fence(Ordering::Release);
        f(s);
        s.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// The sum of every slot's counters over every worker (all contexts ever: what the GGSN
    /// carried since it started).
    pub fn totals(&self) -> [u64; 4] {
        let mut out = [0u64; 4];
        for w in self.counters.iter() {
            for row in w.0.chunks_exact(4) {
                for (o, c) in out.iter_mut().zip(row) {
                    *o += c.load(Ordering::Relaxed);
                }
            }
        }
        out
    }

    /// The sum over workers of `slot`'s four counters (up packets, up bytes, down packets,
    /// down bytes).
    pub fn read_counters(&self, slot: u32) -> [u64; 4] {
        let mut out = [0u64; 4];
        for w in self.counters.iter() {
            for (o, c) in out.iter_mut().zip(w.read(slot)) {
                *o += c;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> GtpTable {
        GtpTable::new(
            1000,
            &[ApnPools {
                v4: Some((0x0a40_0000, 4096)),
                v6: Some((0x2001_0db8_0100_0000, 256)),
            }],
            2,
        )
    }

    #[test]
    fn a_context_is_found_by_teid_and_by_address_until_removed() {
        let t = table();
        let teid = t.teid(7, 1);
        assert_eq!(t.slot_of(teid), 7);
        let c = Context {
            apn: 0,
            peer_teid: 0x1234,
            peer: 0xc000_0202,
            ue_v4: Some(0x0a40_0005),
            ue_v6: Some(0x2001_0db8_0100_0003),
        };
        t.install(teid, &c);
        let up = t.uplink(teid).unwrap();
        assert_eq!(
            (up.slot, up.ue_v4, up.ue_v6),
            (7, c.ue_v4, c.ue_v6),
            "uplink view"
        );
        assert_eq!(t.slot_v4(0, 0x0a40_0005), Some(7));
        assert_eq!(t.slot_v6(0, 0x2001_0db8_0100_0003), Some(7));
        assert_eq!(t.slot_v4(0, 0x0a40_0006), None);
        assert_eq!(t.slot_v4(0, 0x0b00_0000), None, "outside the pool");
        assert_eq!(t.downlink(7, 0).unwrap().peer_teid, 0x1234);
        // Another generation of the same slot is another context.
        assert_eq!(t.uplink(t.teid(7, 2)), None);
        t.update_peer(teid, 0x99, 0xc000_0203);
        assert_eq!(t.downlink(7, 0).unwrap().peer, 0xc000_0203);
        t.remove(teid, &c);
        assert_eq!(t.uplink(teid), None);
        assert_eq!(t.slot_v4(0, 0x0a40_0005), None);
        assert_eq!(t.downlink(7, 0), None);
    }

    #[test]
    fn teids_are_never_zero_and_generations_wrap_past_it() {
        let t = table();
        assert_eq!(t.slot_bits, 10);
        assert_ne!(t.teid(0, 0), 0);
        let last = t.teid(3, u32::MAX >> 10);
        assert_eq!(t.next_generation(last), 1);
        assert_eq!(t.uplink(0), None);
    }

    #[test]
    fn counters_sum_over_workers() {
        let t = table();
        t.counters(0).add(5, UP_PACKETS, 2, 200);
        t.counters(1).add(5, UP_PACKETS, 1, 64);
        t.counters(1).add(5, DOWN_PACKETS, 3, 300);
        assert_eq!(t.read_counters(5), [3, 264, 3, 300]);
    }

    #[test]
    fn readers_never_see_a_torn_context() {
        use std::sync::atomic::AtomicU64;
        use std::sync::Arc;
        let t = Arc::new(table());
        let teid = t.teid(1, 1);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = Arc::new(AtomicU64::new(0));
        let reader = {
            let (t, stop, seen) = (t.clone(), stop.clone(), seen.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(d) = t.downlink(1, 0) {
                        // The writer keeps peer == peer_teid + 1.
                        assert_eq!(d.peer, d.peer_teid + 1);
                        seen.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        // Writes until the reader has read many times while they were going on (a release
        // build's writer can otherwise finish before the reader starts), and at least 200,000
        // times, within ten seconds.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut i = 0u32;
        while (i < 200_000 || seen.load(Ordering::Relaxed) < 100_000)
            && std::time::Instant::now() < deadline
        {
            let c = Context {
                apn: 0,
                peer_teid: i,
                peer: i + 1,
                ue_v4: Some(0x0a40_0001),
                ue_v6: None,
            };
            t.install(teid, &c);
            t.update_peer(teid, i + 7, i + 8);
            i = i.wrapping_add(1);
        }
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap();
        assert!(
            seen.load(Ordering::Relaxed) >= 100_000,
            "the reader read while writes went on"
        );
    }
}
