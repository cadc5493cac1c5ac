//! Packet buffers: a preallocated pool of fixed-size slots, handed around as owning handles.
//!
//! Each slot is 64 bytes of metadata, 128 bytes of headroom (room to push VLAN, MPLS or GTP-U
//! headers without copying) and room for a 9,216-byte frame. A [`PktBuf`] is the only way to reach
//! a slot and it is not `Clone`, so holding one is holding the slot exclusively; it moves between
//! threads through the port rings, which order the writes before the hand-over.
//!
//! The slot memory comes from one zeroed allocation that is never freed (pools live as long as the
//! process, as NIC buffer pools do); the kernel commits its pages as they are first touched.
//! Threads take and return buffers through a [`BufCache`], which moves them to and from the shared
//! free list 256 at a time, so the list's lock is taken once per vector, never per packet.

use std::alloc::{alloc_zeroed, Layout};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

pub const HEADROOM: usize = 128;
pub const MAX_FRAME: usize = 9216;
const BATCH: usize = 256;

/// Per-packet metadata, set by the nodes that the pipeline documents.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct Meta {
    /// Offset of the first frame byte within the slot's room.
    pub data_off: u16,
    pub len: u16,
    /// Offset of the L3 header from the frame start (set by ethernet-input).
    pub l3_off: u16,
    pub rx_port: u16,
    /// The (sub-)interface the frame arrived on.
    pub rx_if: u32,
    /// Chosen next hop (set by the lookup nodes); for a frame a pseudowire label hands to its
    /// attachment circuit, the pseudowire (set by mpls-input).
    pub next_hop: u32,
    pub pool: u32,
    pub index: u32,
    /// Free for the buffer's owner across uses; nothing in the data plane reads or writes it, and
    /// `reset` keeps it. The tester records here which frame length's payload pattern the buffer
    /// holds, so it need not write the payload again.
    pub owner_tag: u32,
    /// Nonzero while the frame is being traced (see `tap`): its trace id.
    pub trace: u32,
    /// Set by the forward nodes when they hand a packet to the slow path: its hop-limit
    /// decrement is not due (the router generated it). Whoever finishes a packet held for a
    /// neighbour reads it.
    pub hop_done: bool,
    /// Set by ethernet-input: the frame was sent to a link-layer broadcast or multicast address.
    /// A router must not forward such a frame's unicast IP packet nor answer it with an ICMP
    /// error (RFC 1812 5.3.4 and 4.3.2.7, RFC 4443 2.4(e.4)).
    pub l2_group: bool,
    /// Set by the forward nodes when they hand a packet to the slow path: why.
    pub slow: crate::node::Slow,
    /// The traffic class QoS chose for labels pushed on this packet, plus one; 0: the labels
    /// carry the IP precedence. Set by a QoS class's `set exp`, read where labels are pushed.
    pub exp: u8,
    /// Set where the packet was accounted to the flow cache on the way in (or its turn passed
    /// by sampling), so that no later stage accounts it in again; see `feature::output::needed`.
    pub flowed: bool,
    /// For a packet a VPN label popped into a VRF (it then arrives on the VRF's MPLS
    /// interface): the interface the labelled frame came in by, plus one, whose input features
    /// it takes and whose flows it is accounted to; 0 for every other packet. See
    /// [`Meta::arc_if`].
    pub labelled_on: u32,
    /// When the frame was received, by `CLOCK_REALTIME` in nanoseconds, where the receive queue
    /// knows it better than its reader's clock would (a `TPACKET_V2` ring: the kernel's time);
    /// 0 if not known. The tester's latency reads it; nothing in the router does.
    pub rx_ns: u64,
}

impl Meta {
    /// The interface whose feature arcs the packet takes: the one it arrived on, or for a
    /// packet popped into a VRF the interface the labelled frame came in by (its `rx_if` is the
    /// VRF's MPLS interface, which chooses the table).
    #[inline(always)]
    pub fn arc_if(&self) -> u32 {
        match self.labelled_on {
            0 => self.rx_if,
            n => n - 1,
        }
    }
}

const META_SIZE: usize = 64;
const _: () = assert!(std::mem::size_of::<Meta>() <= META_SIZE);

#[repr(C, align(64))]
struct Slot {
    meta: Meta,
    _pad: [u8; META_SIZE - std::mem::size_of::<Meta>()],
    room: [u8; HEADROOM + MAX_FRAME],
}

/// The bytes one buffer takes in its pool (metadata, headroom, frame room).
pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

/// An exclusively owned packet buffer.
pub struct PktBuf(NonNull<Slot>);

// SAFETY: a PktBuf is the unique handle to its slot (not Clone, created only by the pool for a
// free slot), so moving it to another thread moves exclusive access with it.
unsafe impl Send for PktBuf {}

impl PktBuf {
    #[inline(always)]
    fn slot(&self) -> &Slot {
        // SAFETY: the pointer is into the pool's never-freed allocation, and this handle is the
        // only one to the slot, so shared access through &self is exclusive of any writer.
        unsafe { self.0.as_ref() }
    }
    #[inline(always)]
    fn slot_mut(&mut self) -> &mut Slot {
        // SAFETY: as in slot(); &mut self makes the access unique.
        unsafe { self.0.as_mut() }
    }

    #[inline(always)]
    pub fn meta(&self) -> &Meta {
        &self.slot().meta
    }
    #[inline(always)]
    pub fn meta_mut(&mut self) -> &mut Meta {
        &mut self.slot_mut().meta
    }

    #[inline(always)]
    pub fn data(&self) -> &[u8] {
        let s = self.slot();
        let o = s.meta.data_off as usize;
        &s.room[o..o + s.meta.len as usize]
    }

    #[inline(always)]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let s = self.slot_mut();
        let o = s.meta.data_off as usize;
        &mut s.room[o..o + s.meta.len as usize]
    }

    pub fn len(&self) -> usize {
        self.meta().len as usize
    }
    pub fn is_empty(&self) -> bool {
        self.meta().len == 0
    }

    /// Empties the buffer, leaving the default headroom in front.
    #[inline]
    pub fn reset(&mut self) {
        let m = &mut self.slot_mut().meta;
        m.data_off = HEADROOM as u16;
        m.len = 0;
        m.l3_off = 0;
        m.trace = 0;
        m.hop_done = false;
        m.l2_group = false;
        m.exp = 0;
        m.flowed = false;
        m.labelled_on = 0;
        m.rx_ns = 0;
    }

    /// Sets the frame length; the bytes are whatever the room held. False if too long.
    #[inline]
    pub fn set_len(&mut self, len: usize) -> bool {
        let m = &mut self.slot_mut().meta;
        if m.data_off as usize + len > HEADROOM + MAX_FRAME {
            return false;
        }
        m.len = len as u16;
        true
    }

    /// Copies `frame` in as the whole content (after the default headroom).
    pub fn fill(&mut self, frame: &[u8]) -> bool {
        self.reset();
        if !self.set_len(frame.len()) {
            return false;
        }
        self.data_mut().copy_from_slice(frame);
        true
    }

    /// Grows the frame at the front by `n` bytes of headroom (to push a header). False if there is
    /// not that much headroom.
    #[inline]
    pub fn push_front(&mut self, n: usize) -> bool {
        let m = &mut self.slot_mut().meta;
        if (m.data_off as usize) < n {
            return false;
        }
        m.data_off -= n as u16;
        m.len += n as u16;
        true
    }

    /// Drops `n` bytes from the front (to strip a header). False if the frame is shorter.
    #[inline]
    pub fn pull_front(&mut self, n: usize) -> bool {
        let m = &mut self.slot_mut().meta;
        if (m.len as usize) < n {
            return false;
        }
        m.data_off += n as u16;
        m.len -= n as u16;
        true
    }

    /// Starts loading the metadata line and the first line of the frame (at the default
    /// headroom), for a node about to read them a few packets from now.
    #[inline(always)]
    pub fn prefetch(&self) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let p = self.0.as_ptr() as *const i8;
            // SAFETY: prefetch never faults and reads nothing into the program; both addresses
            // are inside this slot anyway.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(p);
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(META_SIZE + HEADROOM));
            }
        }
    }

    /// Starts loading the line that holds frame byte `off` (the metadata must already be
    /// readable: this reads the frame's start from it). Out-of-range offsets are clamped to the
    /// slot, so any value is safe.
    #[inline(always)]
    pub fn prefetch_frame_byte(&self, off: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let at = (META_SIZE + self.meta().data_off as usize + off)
                .min(std::mem::size_of::<Slot>() - 1);
            let p = (self.0.as_ptr() as *const i8).wrapping_add(at);
            // SAFETY: prefetch never faults and reads nothing into the program; `at` is clamped
            // to lie inside this slot.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = off;
    }

    pub fn headroom(&self) -> usize {
        self.meta().data_off as usize
    }
}

/// A process-lifetime pool of buffers.
pub struct Pool {
    id: u32,
    count: usize,
    free: Mutex<Vec<PktBuf>>,
}

static NEXT_POOL: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Pool {
    /// Allocates `count` buffers. The memory is never returned to the system. Panics if it
    /// cannot be had; see [`Pool::try_new`].
    pub fn new(count: usize) -> Arc<Pool> {
        Self::try_new(count).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Allocates `count` buffers, or says why it cannot: a count out of range, or not enough
    /// memory for the slots or their free list.
    pub fn try_new(count: usize) -> Result<Arc<Pool>, String> {
        if count == 0 || count >= u32::MAX as usize {
            return Err(format!(
                "buffer pool: {count} buffers (1..{} are possible)",
                u32::MAX
            ));
        }
        let too_big = || {
            format!(
                "buffer pool: cannot allocate {count} buffers of {SLOT_BYTES} bytes \
                 ({count} x {SLOT_BYTES} bytes): out of memory; lower router.buffers"
            )
        };
        let layout = Layout::array::<Slot>(count).map_err(|_| too_big())?;
        // The free list first: it is the smaller allocation, and a failed one leaves nothing.
        let mut free = Vec::new();
        free.try_reserve_exact(count).map_err(|_| too_big())?;
        // SAFETY: the layout has non-zero size (count > 0). Zeroed memory is a valid Slot (plain
        // integers and bytes).
        let base = unsafe { alloc_zeroed(layout) } as *mut Slot;
        // A null pointer is the allocator's "no": reported, not a panic.
        let base = NonNull::new(base).ok_or_else(too_big)?;
        let id = NEXT_POOL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for i in (0..count).rev() {
            // SAFETY: i < count, so the pointer stays inside the allocation; each slot gets
            // exactly one handle, here.
            let mut b = PktBuf(unsafe { NonNull::new_unchecked(base.as_ptr().add(i)) });
            let m = b.meta_mut();
            m.pool = id;
            m.index = i as u32;
            free.push(b);
        }
        let pool = Arc::new(Pool {
            id,
            count,
            free: Mutex::new(free),
        });
        REGISTRY
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::downgrade(&pool));
        Ok(pool)
    }

    pub fn id(&self) -> u32 {
        self.id
    }
    pub fn capacity(&self) -> usize {
        self.count
    }
    /// Buffers in the shared free list (not counting those in thread caches).
    pub fn available(&self) -> usize {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
    pub fn bytes(&self) -> usize {
        self.count * std::mem::size_of::<Slot>()
    }
}

/// A thread's local stock of buffers from one pool.
pub struct BufCache {
    pool: Arc<Pool>,
    local: Vec<PktBuf>,
}

impl BufCache {
    pub fn new(pool: Arc<Pool>) -> Self {
        Self {
            pool,
            local: Vec::with_capacity(BATCH * 2),
        }
    }

    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// A fresh, empty buffer, or None if the pool is exhausted.
    #[inline]
    pub fn alloc(&mut self) -> Option<PktBuf> {
        if self.local.is_empty() {
            self.refill();
        }
        let mut b = self.local.pop()?;
        b.reset();
        Some(b)
    }

    /// Returns a buffer. Buffers of another pool are sent home (a lock per buffer: only the slow
    /// path mixes pools).
    #[inline]
    pub fn free(&mut self, b: PktBuf) {
        if b.meta().pool != self.pool.id {
            drop_foreign(b);
            return;
        }
        self.local.push(b);
        if self.local.len() >= BATCH * 2 {
            self.spill();
        }
    }

    pub fn free_all(&mut self, bufs: &mut Vec<PktBuf>) {
        for b in bufs.drain(..) {
            self.free(b);
        }
    }

    fn refill(&mut self) {
        let mut g = self.pool.free.lock().unwrap_or_else(|e| e.into_inner());
        let n = g.len().min(BATCH);
        let at = g.len() - n;
        self.local.extend(g.drain(at..));
    }

    fn spill(&mut self) {
        let keep = BATCH;
        let mut g = self.pool.free.lock().unwrap_or_else(|e| e.into_inner());
        g.extend(self.local.drain(keep..));
    }

    /// Gives every cached buffer back to the shared list (when a thread stops).
    pub fn flush(&mut self) {
        let mut g = self.pool.free.lock().unwrap_or_else(|e| e.into_inner());
        g.append(&mut self.local);
    }
}

impl Drop for BufCache {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Registry of live pools, so a buffer that strays into another pool's cache still goes home.
static REGISTRY: Mutex<Vec<std::sync::Weak<Pool>>> = Mutex::new(Vec::new());

fn drop_foreign(b: PktBuf) {
    let reg = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    let id = b.meta().pool;
    if let Some(p) = reg.iter().filter_map(|w| w.upgrade()).find(|p| p.id == id) {
        p.free.lock().unwrap_or_else(|e| e.into_inner()).push(b);
    }
    // A pool that is gone can take nothing back; its memory is never freed, so the slot leaks
    // harmlessly.
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_that_cannot_be_had_is_an_error_not_a_panic() {
        assert!(Pool::try_new(0).is_err());
        assert!(Pool::try_new(u32::MAX as usize).is_err());
        // About 40 TB: refused by the kernel unless it overcommits without limit (mode 1), where
        // the attempt would instead succeed and touch every page.
        let mode = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap_or_default();
        if matches!(mode.trim(), "0" | "2") {
            let e = Pool::try_new(u32::MAX as usize - 1)
                .err()
                .expect("40 TB pool");
            assert!(e.contains("out of memory"), "{e}");
        }
    }

    #[test]
    fn alloc_fill_push_pull_free() {
        let pool = Pool::new(600);
        let mut c = BufCache::new(pool.clone());
        let mut b = c.alloc().unwrap();
        assert!(b.fill(&[1, 2, 3, 4]));
        assert_eq!(b.data(), &[1, 2, 3, 4]);
        assert!(b.push_front(4));
        b.data_mut()[..4].copy_from_slice(&[9, 9, 9, 9]);
        assert_eq!(b.data(), &[9, 9, 9, 9, 1, 2, 3, 4]);
        assert!(b.pull_front(6));
        assert_eq!(b.data(), &[3, 4]);
        assert!(
            !b.push_front(HEADROOM + 7),
            "only the headroom can be pushed"
        );
        assert!(
            !b.set_len(MAX_FRAME),
            "the pull moved the start past the headroom"
        );
        b.reset();
        assert!(
            b.set_len(MAX_FRAME),
            "a full jumbo frame fits after the headroom"
        );
        assert!(!b.set_len(MAX_FRAME + 1));
        c.free(b);
        // Every buffer can be taken once, then the pool is dry, and all come back.
        let all: Vec<_> = std::iter::from_fn(|| c.alloc()).collect();
        assert_eq!(all.len(), 600);
        let mut idx: Vec<_> = all.iter().map(|b| b.meta().index).collect();
        idx.sort_unstable();
        idx.dedup();
        assert_eq!(idx.len(), 600, "no slot handed out twice");
        for b in all {
            c.free(b);
        }
        c.flush();
        assert_eq!(pool.available(), 600);
    }

    #[test]
    fn buffers_move_between_threads() {
        let pool = Pool::new(1024);
        let mut c = BufCache::new(pool.clone());
        let bufs: Vec<_> = (0..512u32)
            .map(|i| {
                let mut b = c.alloc().unwrap();
                b.fill(&i.to_be_bytes());
                b
            })
            .collect();
        let other = pool.clone();
        let back = std::thread::spawn(move || {
            let mut c2 = BufCache::new(other);
            let mut sum = 0u64;
            for b in bufs {
                sum += u32::from_be_bytes(b.data().try_into().unwrap()) as u64;
                c2.free(b);
            }
            sum
        })
        .join()
        .unwrap();
        assert_eq!(back, (0..512u64).sum());
        drop(c);
        assert_eq!(pool.available(), 1024);
    }
}
