//! AF_XDP ports: a Linux device's queues read and written through XDP sockets, bypassing the
//! kernel's network stack (and, on drivers that support it, its copies).
//!
//! # How it is put together
//!
//! [`AfXdpPort::open`] creates, for each queue `0..queues`, one XDP socket (XSK) with its own
//! UMEM, binds it to that queue and puts it in slot `queue` of an XSKMAP; then it attaches a tiny
//! XDP program (see `xdp_prog.rs`) that redirects every frame to the slot of the queue it arrived
//! on. Frames on queues without a socket pass to the kernel stack untouched.
//!
//! Each socket serves one worker's receive queue *and* one worker's transmit queue: its rx and
//! fill rings go to the [`RxQueue`], its tx and completion rings to the [`TxQueue`], and the UMEM
//! is split in two fixed halves, receive frames first, transmit frames after. Every ring has a
//! single user-side owner, so the two halves can run on different threads without a lock. This
//! is sound where the alternatives are not: the kernel lets only one UMEM be bound per (device,
//! queue), so a second socket on the queue would have to share the first one's fill and
//! completion rings (`XDP_SHARED_UMEM` on the same queue), which two threads could then only use
//! under a lock. [`AfXdpPort::tx_queue`] hands out the sockets' tx halves in queue order; beyond
//! `queues` it binds a transmit-only socket to the next queue id, so a port opened with fewer
//! receive queues than the device has can still give every worker its own transmit queue. The
//! number of transmit queues is thus bounded by the device's queue count.
//!
//! # Frames and copies
//!
//! UMEM chunks are 4,096 bytes (the largest aligned chunk; a page). The kernel keeps
//! `XDP_PACKET_HEADROOM` (256 bytes) at the front of each receive chunk, so the largest frame
//! that can be received is [`MAX_RX_FRAME`] = 3,840 bytes; a transmitted frame may fill a chunk
//! ([`MAX_TX_FRAME`], and the device's MTU still applies). Jumbo frames (up to the 9,216 bytes a
//! [`PktBuf`] holds) would need multi-buffer XSKs (`XDP_USE_SG`) and are out of scope: the kernel
//! drops longer frames and counts them in [`XskKernelStats::rx_dropped`].
//!
//! Received frames are copied from the UMEM into a [`PktBuf`] from the worker's pool and the chunk
//! goes straight back to the fill ring; transmitted frames are copied from their [`PktBuf`] into a
//! free transmit chunk. That is one copy each way on top of whatever the kernel does, accepted for
//! now so the rest of the data plane keeps a single buffer type; allocating the pool inside the
//! UMEM would remove it.
//!
//! # Modes
//!
//! The socket binds zero-copy when the driver supports it and [`BindMode`] allows it, else in copy
//! mode (the kernel copies between its buffers and the UMEM). The program attaches in native
//! (driver) mode when the driver supports it, else generic (skb) mode. On veth, zero-copy is not
//! supported (the bind fails with EOPNOTSUPP) and native mode works. [`AfXdpPort::mode`] says what
//! was obtained.
//!
//! # Ring protocol
//!
//! The four rings are single-producer single-consumer rings shared with the kernel through
//! `mmap`. The producer writes entries and then publishes its index with a release store; the
//! consumer reads the index with an acquire load before reading entries, and publishes its own
//! index with a release store after it is done with them, so neither side touches an entry the
//! other still owns. Indices are free-running `u32`s; ring sizes are powers of two.

#[path = "xdp_prog.rs"]
mod xdp_prog;

use std::collections::VecDeque;
use std::ffi::CString;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{RxQueue, TxQueue};
use crate::buffer::{BufCache, PktBuf, MAX_FRAME};
/// The reader of the kernel's answer to `RTM_SETLINK`, for [`crate::fuzzing`].
pub(crate) use xdp_prog::parse_ack as parse_setlink_ack;
use xdp_prog::XdpProgram;

/// UMEM chunk size: the largest the kernel accepts in aligned mode.
pub const FRAME_SIZE: usize = 4096;
/// What the kernel reserves at the front of each receive chunk (`XDP_PACKET_HEADROOM`).
const XDP_PACKET_HEADROOM: usize = 256;
/// The longest frame a port can receive (longer ones are dropped by the kernel).
pub const MAX_RX_FRAME: usize = FRAME_SIZE - XDP_PACKET_HEADROOM;
/// The longest frame a port can send (longer ones are dropped and counted).
pub const MAX_TX_FRAME: usize = FRAME_SIZE;

/// `XDP_MAX_TX_SKB_BUDGET` (Linux 6.17): how many frames one `sendto` may push in copy mode
/// (32 otherwise). Not in the libc crate yet.
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;
/// At most this many `sendto` kicks per burst: each moves up to the budget; more than a few in a
/// row means the device is pushing back and spinning would only burn the worker's time.
const MAX_KICKS: usize = 8;
/// Pauses before re-binding a queue that is still busy: a socket closed just before keeps the
/// queue until the kernel's deferred release runs (about a scheduler tick).
const BIND_BUSY_RETRIES: [Duration; 4] = [
    Duration::from_millis(10),
    Duration::from_millis(30),
    Duration::from_millis(100),
    Duration::from_millis(300),
];

/// Zero-copy or copy binding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BindMode {
    /// Zero-copy if the driver supports it, else copy.
    #[default]
    Auto,
    Copy,
    /// Zero-copy or fail.
    ZeroCopy,
}

/// Where the XDP program runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XdpMode {
    /// Native if the driver supports it, else generic.
    #[default]
    Auto,
    /// In the driver (`XDP_FLAGS_DRV_MODE`): before any skb is built.
    Native,
    /// In the stack (`XDP_FLAGS_SKB_MODE`): after the skb is built; works on any device.
    Generic,
}

/// How the XDP program is attached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AttachApi {
    /// A BPF link, or netlink on kernels without XDP links.
    #[default]
    Auto,
    /// `BPF_LINK_CREATE`: detached by the kernel when the last fd closes, even on a crash.
    Link,
    /// `RTM_SETLINK` with `IFLA_XDP`: detached explicitly on drop (a crash leaves it attached).
    Netlink,
}

/// Port settings. Ring sizes are entries and must be powers of two.
#[derive(Clone, Debug)]
pub struct AfXdpConfig {
    /// Sockets on queues `0..queues`: one receive queue (and one transmit queue) each.
    pub queues: u32,
    /// Receive ring entries per socket.
    pub rx_ring: u32,
    /// Fill ring entries per socket; also the number of receive chunks in the UMEM (so every
    /// chunk can sit in the fill ring at once and returning one never finds the ring full).
    pub fill_ring: u32,
    /// Transmit and completion ring entries per socket; also the number of transmit chunks.
    pub tx_ring: u32,
    pub bind: BindMode,
    pub xdp: XdpMode,
    pub attach: AttachApi,
}

impl Default for AfXdpConfig {
    fn default() -> Self {
        // 3,072 chunks: 12 MiB of UMEM per socket.
        AfXdpConfig {
            queues: 1,
            rx_ring: 1024,
            fill_ring: 2048,
            tx_ring: 1024,
            bind: BindMode::Auto,
            xdp: XdpMode::Auto,
            attach: AttachApi::Auto,
        }
    }
}

impl AfXdpConfig {
    fn check(&self) -> Result<(), String> {
        if self.queues == 0 {
            return Err("queues must be at least 1".into());
        }
        for (name, v) in [
            ("rx_ring", self.rx_ring),
            ("fill_ring", self.fill_ring),
            ("tx_ring", self.tx_ring),
        ] {
            if !v.is_power_of_two() || v > 1 << 20 {
                return Err(format!("{name} = {v}: must be a power of two up to 2^20"));
            }
        }
        Ok(())
    }
}

/// What [`AfXdpPort::open`] obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AfXdpMode {
    pub zero_copy: bool,
    /// [`XdpMode::Native`] or [`XdpMode::Generic`].
    pub xdp: XdpMode,
    /// [`AttachApi::Link`] or [`AttachApi::Netlink`].
    pub attach: AttachApi,
}

impl fmt::Display for AfXdpMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let copy = if self.zero_copy { "zero-copy" } else { "copy" };
        let xdp = if self.xdp == XdpMode::Native {
            "drv"
        } else {
            "skb"
        };
        let api = if self.attach == AttachApi::Link {
            "bpf link"
        } else {
            "netlink"
        };
        write!(f, "{copy}, {xdp} mode, {api}")
    }
}

/// The kernel's counters for one socket (`XDP_STATISTICS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XskKernelStats {
    /// Frames dropped for reasons other than bad descriptors: no free chunk in the fill ring
    /// (copy mode), or too long for a chunk.
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    /// Frames dropped because the receive ring was full (the worker fell behind).
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the kernel found the transmit ring empty when woken.
    pub tx_ring_empty_descs: u64,
}

/// One socket's counters: the kernel's and the driver's own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AfXdpQueueStats {
    pub queue: u32,
    /// False for the transmit-only sockets [`AfXdpPort::tx_queue`] adds beyond `queues`.
    pub has_rx: bool,
    pub kernel: XskKernelStats,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Bursts cut short because the worker's buffer pool was empty (the frames wait in the ring).
    pub rx_no_buf: u64,
    /// Descriptors outside the receive chunks (never expected; the chunk is not reused).
    pub rx_bad_desc: u64,
    /// `recvfrom` calls made because the kernel asked to be woken (zero-copy drivers).
    pub rx_wakeups: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Frames handed back to the caller because no chunk or ring slot was free (a frame
    /// offered again is counted again).
    pub tx_full: u64,
    /// Frames dropped because they were empty or longer than [`MAX_TX_FRAME`].
    pub tx_oversize: u64,
    /// `sendto` calls.
    pub tx_kicks: u64,
    /// `sendto` failures other than the expected EAGAIN/EBUSY, e.g. ENETDOWN.
    pub tx_kick_errors: u64,
    /// Frames the device dropped after taking them (`sendto` said EBUSY; veth does this when the
    /// peer's ring is full).
    pub tx_dev_drops: u64,
}

/// An AF_XDP port: the XDP program and one socket per queue.
pub struct AfXdpPort {
    dev: String,
    ifindex: u32,
    cfg: AfXdpConfig,
    mode: AfXdpMode,
    /// Receive halves not yet taken, in queue order.
    rx: Vec<XskRx>,
    /// Transmit halves not yet handed out, in queue order.
    tx: VecDeque<XskTx>,
    /// The queue id the next transmit-only socket binds to.
    next_tx_only: u32,
    /// Every socket, for the counters.
    socks: Vec<Arc<Xsk>>,
    prog: Arc<XdpProgram>,
}

impl AfXdpPort {
    /// Opens `dev`: loads and attaches the XDP program and binds one socket per queue. The
    /// program stays attached until the port and every queue taken from it are dropped.
    pub fn open(dev: &str, cfg: &AfXdpConfig) -> Result<AfXdpPort, String> {
        cfg.check().map_err(|e| format!("af_xdp {dev}: {e}"))?;
        let ifindex = ifindex(dev)?;
        let mut prog = XdpProgram::load(dev, ifindex, cfg.queues)?;
        let mut parts = Vec::new();
        let mut bind = cfg.bind;
        for q in 0..cfg.queues {
            let p = open_xsk(dev, ifindex, q, cfg, true, bind)?;
            // Every queue binds as the first did, so the port has one mode.
            bind = if p.zero_copy {
                BindMode::ZeroCopy
            } else {
                BindMode::Copy
            };
            prog.insert(q, p.xsk.fd.as_raw_fd())?;
            parts.push(p);
        }
        let (xdp, attach) = prog.attach(cfg.xdp, cfg.attach)?;
        let prog = Arc::new(prog);
        let mode = AfXdpMode {
            zero_copy: parts[0].zero_copy,
            xdp,
            attach,
        };
        let mut port = AfXdpPort {
            dev: dev.to_string(),
            ifindex,
            cfg: cfg.clone(),
            mode,
            rx: Vec::new(),
            tx: VecDeque::new(),
            next_tx_only: cfg.queues,
            socks: Vec::new(),
            prog,
        };
        for p in parts {
            port.socks.push(p.xsk);
            let mut rx = p.rx.expect("receive sockets have a receive half");
            rx.prog = Some(port.prog.clone());
            port.rx.push(rx);
            let mut tx = p.tx;
            tx.prog = Some(port.prog.clone());
            port.tx.push_back(tx);
        }
        Ok(port)
    }

    pub fn name(&self) -> &str {
        &self.dev
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Zero-copy or copy, native or generic XDP, link or netlink.
    pub fn mode(&self) -> AfXdpMode {
        self.mode
    }

    /// The receive queues, in queue order (queue `i` at index `i`); empty once taken.
    pub fn take_rx_queues(&mut self) -> Vec<Box<dyn RxQueue>> {
        self.rx
            .drain(..)
            .map(|q| Box::new(q) as Box<dyn RxQueue>)
            .collect()
    }

    /// A transmit queue for one worker: the next socket's transmit half, or, once all `queues`
    /// are handed out, a transmit-only socket on the next queue id (an error once the device has
    /// no queue left).
    pub fn tx_queue(&mut self) -> Result<Box<dyn TxQueue>, String> {
        if let Some(tx) = self.tx.pop_front() {
            return Ok(Box::new(tx));
        }
        let q = self.next_tx_only;
        let bind = if self.mode.zero_copy {
            BindMode::ZeroCopy
        } else {
            BindMode::Copy
        };
        let p = open_xsk(&self.dev, self.ifindex, q, &self.cfg, false, bind).map_err(|e| {
            format!(
                "{e} (the {} receive sockets' transmit halves are all handed out; a transmit-only \
                 socket needs a queue id the device has)",
                self.cfg.queues
            )
        })?;
        self.next_tx_only += 1;
        self.socks.push(p.xsk);
        let mut tx = p.tx;
        tx.prog = Some(self.prog.clone());
        Ok(Box::new(tx))
    }

    /// Counters per socket, receive sockets first in queue order.
    pub fn stats(&self) -> Result<Vec<AfXdpQueueStats>, String> {
        self.socks
            .iter()
            .map(|x| x.stats().map_err(|e| format!("af_xdp {}: {e}", self.dev)))
            .collect()
    }
}

fn ifindex(dev: &str) -> Result<u32, String> {
    if dev.is_empty() || dev.len() >= libc::IFNAMSIZ {
        return Err(format!(
            "af_xdp {dev:?}: not a valid interface name (1 to {} bytes)",
            libc::IFNAMSIZ - 1
        ));
    }
    let c = CString::new(dev).map_err(|_| format!("af_xdp {dev:?}: name contains a NUL byte"))?;
    // SAFETY: `c` is a live NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(format!(
            "af_xdp {dev}: no such device in this network namespace ({})",
            io::Error::last_os_error()
        ));
    }
    Ok(i)
}

// ---------------------------------------------------------------------------------------------
// Memory maps and rings

/// An owned memory mapping, unmapped on drop. It never reads or writes the memory itself; the
/// rings and queue halves do, under the ownership rules described on them.
struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a Mmap is just the ownership of an address range; nothing in it is tied to a thread.
unsafe impl Send for Mmap {}
// SAFETY: as above: &Mmap gives no access to the memory.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// Zeroed private memory, for a UMEM.
    fn anon(len: usize) -> io::Result<Mmap> {
        // SAFETY: a fresh anonymous mapping; it cannot overlap memory anything else uses.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        Self::checked(p, len)
    }

    /// A ring of socket `fd`, at the kernel's page offset for it.
    fn ring(fd: RawFd, len: usize, pgoff: u64) -> io::Result<Mmap> {
        // SAFETY: a fresh shared mapping of the socket's ring; the kernel checks the offset and
        // that `len` fits the ring.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff as libc::off_t,
            )
        };
        Self::checked(p, len)
    }

    fn checked(p: *mut libc::c_void, len: usize) -> io::Result<Mmap> {
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap {
            ptr: NonNull::new(p as *mut u8).expect("mmap returned null"),
            len,
        })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: we own the mapping, and every pointer into it lives in a value that holds
        // (an Arc of) the owner of this Mmap, so none outlives it.
        unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len) };
    }
}

/// A user-side view of one ring: where its indices and entries are, and the cached copies of
/// both indices. The same type serves producer rings (fill, tx) and consumer rings (rx,
/// completion); each instance is used in one role only, by one thread at a time.
struct Ring<T> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    entries: NonNull<T>,
    mask: u32,
    size: u32,
    /// Producer rings: our next index to publish. Consumer rings: the last producer index read.
    cached_prod: u32,
    /// Consumer rings: our next index to release. Producer rings: the last consumer index read.
    cached_cons: u32,
    _t: PhantomData<T>,
}

impl<T: Copy> Ring<T> {
    /// The ring in `map`, laid out as `off` says, with `size` entries. Checks that every part
    /// lies inside the mapping and is aligned, which is what makes the accessors sound.
    fn new(map: &Mmap, off: &libc::xdp_ring_offset, size: u32) -> io::Result<Ring<T>> {
        let bad = || io::Error::other("ring offsets outside the mapping");
        let field = |o: u64| -> io::Result<NonNull<AtomicU32>> {
            let o = o as usize;
            if !o.is_multiple_of(4) || o + 4 > map.len {
                return Err(bad());
            }
            // SAFETY: o + 4 <= len, so the pointer stays inside the mapping.
            Ok(unsafe { map.ptr.add(o) }.cast())
        };
        let d = off.desc as usize;
        if !d.is_multiple_of(std::mem::align_of::<T>())
            || d + size as usize * std::mem::size_of::<T>() > map.len
        {
            return Err(bad());
        }
        let producer = field(off.producer)?;
        let consumer = field(off.consumer)?;
        let flags = field(off.flags)?;
        // SAFETY: checked above: the entries lie inside the mapping.
        let entries = unsafe { map.ptr.add(d) }.cast();
        let mut r = Ring {
            producer,
            consumer,
            flags,
            entries,
            mask: size - 1,
            size,
            cached_prod: 0,
            cached_cons: 0,
            _t: PhantomData,
        };
        r.cached_prod = r.prod().load(Ordering::Acquire);
        r.cached_cons = r.cons().load(Ordering::Acquire);
        Ok(r)
    }

    #[inline(always)]
    fn prod(&self) -> &AtomicU32 {
        // SAFETY: inside the ring's mapping and 4-aligned (checked in new); the mapping outlives
        // self (see Mmap's drop); the kernel accesses the index only atomically.
        unsafe { self.producer.as_ref() }
    }

    #[inline(always)]
    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as in prod().
        unsafe { self.consumer.as_ref() }
    }

    /// True if the kernel asks to be woken with a syscall (`XDP_RING_NEED_WAKEUP`).
    #[inline]
    fn needs_wakeup(&self) -> bool {
        // SAFETY: as in prod().
        let f = unsafe { self.flags.as_ref() };
        f.load(Ordering::Acquire) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    // Producer side.

    /// How many of `want` entries can be written now.
    #[inline]
    fn free_slots(&mut self, want: u32) -> u32 {
        let mut free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        if free < want {
            // Acquire: the kernel's reads of the entries it released happened before.
            self.cached_cons = self.cons().load(Ordering::Acquire);
            free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        }
        free.min(want)
    }

    /// Writes entry `i` past the published index (i < what free_slots granted).
    #[inline]
    fn put(&mut self, i: u32, v: T) {
        let idx = (self.cached_prod.wrapping_add(i) & self.mask) as usize;
        // SAFETY: idx < size, so inside the entries (checked in new). The slot is free (the
        // caller asked free_slots), so the kernel does not read it until we publish.
        unsafe { self.entries.as_ptr().add(idx).write(v) };
    }

    /// Publishes `n` written entries.
    #[inline]
    fn submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        // Release: the entries are written before the kernel can see the new index.
        self.prod().store(self.cached_prod, Ordering::Release);
    }

    /// Published entries the kernel has not consumed yet.
    #[inline]
    fn unconsumed(&self) -> u32 {
        self.cached_prod
            .wrapping_sub(self.cons().load(Ordering::Acquire))
    }

    // Consumer side.

    /// How many entries (up to `max`) are ready to read.
    #[inline]
    fn ready(&mut self, max: u32) -> u32 {
        let mut n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n == 0 {
            // Acquire: the kernel's writes of the entries happened before.
            self.cached_prod = self.prod().load(Ordering::Acquire);
            n = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        n.min(max)
    }

    /// Reads entry `i` past our released index (i < what ready granted).
    #[inline]
    fn get(&self, i: u32) -> T {
        let idx = (self.cached_cons.wrapping_add(i) & self.mask) as usize;
        // SAFETY: idx < size, so inside the entries. The entry was published (ready() loaded the
        // producer index with acquire) and the kernel does not rewrite it until we release.
        unsafe { self.entries.as_ptr().add(idx).read() }
    }

    /// Gives `n` read entries back to the kernel.
    #[inline]
    fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        // Release: our reads of the entries are done before the kernel may reuse them.
        self.cons().store(self.cached_cons, Ordering::Release);
    }
}

// ---------------------------------------------------------------------------------------------
// Sockets

#[derive(Default)]
struct Counters {
    rx_packets: AtomicU64,
    rx_bytes: AtomicU64,
    rx_no_buf: AtomicU64,
    rx_bad_desc: AtomicU64,
    rx_wakeups: AtomicU64,
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
    tx_full: AtomicU64,
    tx_oversize: AtomicU64,
    tx_kicks: AtomicU64,
    tx_kick_errors: AtomicU64,
    tx_dev_drops: AtomicU64,
}

/// Adds to a counter only one thread writes (per-burst, never per-frame).
#[inline]
fn add(c: &AtomicU64, n: u64) {
    if n != 0 {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

/// What both halves of a socket share. Fields drop in order: rings unmapped, socket closed,
/// then the UMEM unmapped.
struct Xsk {
    /// Held for their unmapping only; the rings reach them through raw pointers.
    _rings: Vec<Mmap>,
    fd: OwnedFd,
    /// Held for its unmapping only; the halves reach it through raw pointers.
    _umem: Mmap,
    queue: u32,
    has_rx: bool,
    counters: Counters,
}

impl Xsk {
    fn stats(&self) -> io::Result<AfXdpQueueStats> {
        // SAFETY: xdp_statistics is plain u64s; all zeroes is a valid value.
        let mut k: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        getsockopt(self.fd.as_raw_fd(), libc::XDP_STATISTICS, &mut k)?;
        let c = &self.counters;
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Ok(AfXdpQueueStats {
            queue: self.queue,
            has_rx: self.has_rx,
            kernel: XskKernelStats {
                rx_dropped: k.rx_dropped,
                rx_invalid_descs: k.rx_invalid_descs,
                tx_invalid_descs: k.tx_invalid_descs,
                rx_ring_full: k.rx_ring_full,
                rx_fill_ring_empty_descs: k.rx_fill_ring_empty_descs,
                tx_ring_empty_descs: k.tx_ring_empty_descs,
            },
            rx_packets: r(&c.rx_packets),
            rx_bytes: r(&c.rx_bytes),
            rx_no_buf: r(&c.rx_no_buf),
            rx_bad_desc: r(&c.rx_bad_desc),
            rx_wakeups: r(&c.rx_wakeups),
            tx_packets: r(&c.tx_packets),
            tx_bytes: r(&c.tx_bytes),
            tx_full: r(&c.tx_full),
            tx_oversize: r(&c.tx_oversize),
            tx_kicks: r(&c.tx_kicks),
            tx_kick_errors: r(&c.tx_kick_errors),
            tx_dev_drops: r(&c.tx_dev_drops),
        })
    }
}

fn setsockopt<T>(fd: RawFd, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` is a live T and we pass its exact size; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Fills `v` (plain integers only) from a SOL_XDP option.
fn getsockopt<T: Copy>(fd: RawFd, name: libc::c_int, v: &mut T) -> io::Result<()> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` is a live, writable T and `len` its size: the kernel writes at most len bytes,
    // and any bytes are a valid T for the plain-integer structs this is used with.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            name,
            v as *mut T as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn bind_xsk(fd: RawFd, ifindex: u32, queue: u32, flags: u16) -> io::Result<()> {
    let sa = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    // SAFETY: `sa` is a live sockaddr_xdp and we pass its size.
    let r = unsafe {
        libc::bind(
            fd,
            &sa as *const libc::sockaddr_xdp as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Binds, waiting out EBUSY: the queue of a socket closed just before stays registered until
/// the kernel's deferred release has run.
fn bind_retrying_busy(fd: RawFd, ifindex: u32, queue: u32, flags: u16) -> io::Result<()> {
    let mut waits = BIND_BUSY_RETRIES.iter();
    loop {
        match bind_xsk(fd, ifindex, queue, flags) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => match waits.next() {
                Some(d) => std::thread::sleep(*d),
                None => return Err(e),
            },
            r => return r,
        }
    }
}

struct XskParts {
    xsk: Arc<Xsk>,
    rx: Option<XskRx>,
    tx: XskTx,
    zero_copy: bool,
}

/// Creates a socket with its UMEM and rings and binds it to `queue`. `with_rx`: a receive ring
/// and receive chunks too (else transmit only).
fn open_xsk(
    dev: &str,
    ifindex: u32,
    queue: u32,
    cfg: &AfXdpConfig,
    with_rx: bool,
    bind: BindMode,
) -> Result<XskParts, String> {
    let step = |what: &str, e: io::Error| {
        // Binding to a queue id the device does not have is EINVAL, which says little.
        let hint = if what.starts_with("binding") && e.raw_os_error() == Some(libc::EINVAL) {
            format!(" (does {dev} have a queue {queue}?)")
        } else {
            String::new()
        };
        format!("af_xdp {dev}: queue {queue}: {what}: {e}{hint}")
    };
    // SAFETY: plain socket(2) call; the result is checked before use.
    let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(step(
            "creating the AF_XDP socket",
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: `raw` is a fresh socket nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };

    // A transmit-only socket still needs a fill ring to bind; the smallest will do.
    let fill_size = if with_rx { cfg.fill_ring } else { 2 };
    let rx_frames = if with_rx { cfg.fill_ring as usize } else { 0 };
    let tx_frames = cfg.tx_ring as usize;
    let umem_len = (rx_frames + tx_frames) * FRAME_SIZE;
    let umem = Mmap::anon(umem_len).map_err(|e| step("allocating the UMEM", e))?;
    let reg = libc::xdp_umem_reg {
        addr: umem.ptr.as_ptr() as u64,
        len: umem_len as u64,
        chunk_size: FRAME_SIZE as u32,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    setsockopt(raw, libc::XDP_UMEM_REG, &reg).map_err(|e| step("registering the UMEM", e))?;
    setsockopt(raw, libc::XDP_UMEM_FILL_RING, &fill_size)
        .map_err(|e| step("sizing the fill ring", e))?;
    setsockopt(raw, libc::XDP_UMEM_COMPLETION_RING, &cfg.tx_ring)
        .map_err(|e| step("sizing the completion ring", e))?;
    if with_rx {
        setsockopt(raw, libc::XDP_RX_RING, &cfg.rx_ring)
            .map_err(|e| step("sizing the rx ring", e))?;
    }
    setsockopt(raw, libc::XDP_TX_RING, &cfg.tx_ring).map_err(|e| step("sizing the tx ring", e))?;

    // SAFETY: xdp_mmap_offsets is plain u64s; all zeroes is a valid value.
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    getsockopt(raw, libc::XDP_MMAP_OFFSETS, &mut off)
        .map_err(|e| step("reading the ring offsets (XDP_MMAP_OFFSETS)", e))?;
    let desc = std::mem::size_of::<libc::xdp_desc>();
    let map = |o: &libc::xdp_ring_offset, n: u32, entry: usize, pgoff: u64, what: &str| {
        Mmap::ring(raw, o.desc as usize + n as usize * entry, pgoff)
            .map_err(|e| step(&format!("mapping the {what} ring"), e))
    };
    let fill_map = map(
        &off.fr,
        fill_size,
        8,
        libc::XDP_UMEM_PGOFF_FILL_RING,
        "fill",
    )?;
    let comp_map = map(
        &off.cr,
        cfg.tx_ring,
        8,
        libc::XDP_UMEM_PGOFF_COMPLETION_RING,
        "completion",
    )?;
    let tx_map = map(
        &off.tx,
        cfg.tx_ring,
        desc,
        libc::XDP_PGOFF_TX_RING as u64,
        "tx",
    )?;
    let ring_err = |e| step("laying out the rings", e);
    let mut fill = Ring::<u64>::new(&fill_map, &off.fr, fill_size).map_err(ring_err)?;
    let comp = Ring::<u64>::new(&comp_map, &off.cr, cfg.tx_ring).map_err(ring_err)?;
    let tx = Ring::<libc::xdp_desc>::new(&tx_map, &off.tx, cfg.tx_ring).map_err(ring_err)?;
    let mut rings = vec![fill_map, comp_map, tx_map];
    let rx = if with_rx {
        let rx_map = map(
            &off.rx,
            cfg.rx_ring,
            desc,
            libc::XDP_PGOFF_RX_RING as u64,
            "rx",
        )?;
        let r = Ring::<libc::xdp_desc>::new(&rx_map, &off.rx, cfg.rx_ring).map_err(ring_err)?;
        rings.push(rx_map);
        Some(r)
    } else {
        None
    };

    // Every receive chunk starts in the fill ring, before the bind, so the first frames find
    // room.
    let n = fill.free_slots(rx_frames as u32);
    for i in 0..n {
        fill.put(i, i as u64 * FRAME_SIZE as u64);
    }
    fill.submit(n);

    let wake = libc::XDP_USE_NEED_WAKEUP;
    let zero_copy = match bind {
        BindMode::Copy => {
            bind_retrying_busy(raw, ifindex, queue, libc::XDP_COPY | wake)
                .map_err(|e| step("binding (copy mode)", e))?;
            false
        }
        BindMode::ZeroCopy => {
            bind_retrying_busy(raw, ifindex, queue, libc::XDP_ZEROCOPY | wake)
                .map_err(|e| step("binding (zero-copy mode)", e))?;
            true
        }
        BindMode::Auto => {
            match bind_retrying_busy(raw, ifindex, queue, libc::XDP_ZEROCOPY | wake) {
                Ok(()) => true,
                Err(zc) => {
                    bind_retrying_busy(raw, ifindex, queue, libc::XDP_COPY | wake).map_err(
                        |e| {
                            step(
                                "binding",
                                io::Error::other(format!("zero-copy: {zc}; copy: {e}")),
                            )
                        },
                    )?;
                    false
                }
            }
        }
    };
    // Ask the kernel what it gave us rather than trusting the flags.
    let mut opts = libc::xdp_options { flags: 0 };
    getsockopt(raw, libc::XDP_OPTIONS, &mut opts)
        .map_err(|e| step("reading the bind mode (XDP_OPTIONS)", e))?;
    let zero_copy_now = opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0;
    debug_assert_eq!(zero_copy, zero_copy_now);
    // A larger copy-mode budget lets one sendto push a whole burst; older kernels refuse the
    // option (ENOPROTOOPT), which only costs more sendto calls.
    let budget = cfg.tx_ring.min(1024);
    if !zero_copy_now && budget >= 32 {
        let _ = setsockopt(raw, XDP_MAX_TX_SKB_BUDGET, &budget);
    }

    let umem_base = umem.ptr;
    let xsk = Arc::new(Xsk {
        _rings: rings,
        fd,
        _umem: umem,
        queue,
        has_rx: with_rx,
        counters: Counters::default(),
    });
    let rx_end = (rx_frames * FRAME_SIZE) as u64;
    let rx = rx.map(|rx| XskRx {
        xsk: xsk.clone(),
        prog: None,
        rx,
        fill,
        umem: umem_base,
        end: rx_end,
    });
    let tx = XskTx {
        xsk: xsk.clone(),
        prog: None,
        tx,
        comp,
        free: (0..tx_frames as u64)
            .rev()
            .map(|i| rx_end + i * FRAME_SIZE as u64)
            .collect(),
        umem: umem_base,
        start: rx_end,
        end: rx_end + (tx_frames * FRAME_SIZE) as u64,
        copy_mode: !zero_copy_now,
    };
    Ok(XskParts {
        xsk,
        rx,
        tx,
        zero_copy: zero_copy_now,
    })
}

// ---------------------------------------------------------------------------------------------
// The queues

const CHUNK_MASK: u64 = !(FRAME_SIZE as u64 - 1);

/// A socket's receive half: the rx ring, the fill ring and the receive chunks `[0, end)`.
struct XskRx {
    xsk: Arc<Xsk>,
    /// Keeps the program attached while the queue lives.
    prog: Option<Arc<XdpProgram>>,
    rx: Ring<libc::xdp_desc>,
    fill: Ring<u64>,
    umem: NonNull<u8>,
    end: u64,
}

// SAFETY: the raw pointers point into mappings owned by `xsk`, which this value keeps alive. The
// rx and fill rings and the receive chunks are used by this value only (the transmit half uses
// other rings and chunks), so moving it to another thread moves that exclusive use with it.
unsafe impl Send for XskRx {}

impl XskRx {
    /// The frame a descriptor points at, if it lies inside the receive chunks.
    #[inline]
    fn frame(&self, d: &libc::xdp_desc) -> Option<&[u8]> {
        let (a, len) = (d.addr, d.len as u64);
        if a.checked_add(len)? > self.end || len as usize > MAX_FRAME {
            return None;
        }
        // SAFETY: [a, a+len) lies in the receive chunks of the live UMEM (checked). The kernel
        // wrote the frame before publishing the descriptor (ready() acquired the producer
        // index) and will not write that chunk again until we give it back through the fill
        // ring, which happens after this borrow ends.
        Some(unsafe {
            std::slice::from_raw_parts(self.umem.as_ptr().add(a as usize), len as usize)
        })
    }
}

impl RxQueue for XskRx {
    fn rx_burst(&mut self, cache: &mut BufCache, out: &mut Vec<PktBuf>, max: usize) -> usize {
        let c = &self.xsk.counters;
        let n = self.rx.ready(max.min(u32::MAX as usize) as u32);
        if n == 0 {
            if self.fill.needs_wakeup() {
                // SAFETY: a zero-length non-blocking recvfrom on our socket with no buffers.
                unsafe {
                    libc::recvfrom(
                        self.xsk.fd.as_raw_fd(),
                        std::ptr::null_mut(),
                        0,
                        libc::MSG_DONTWAIT,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
                add(&c.rx_wakeups, 1);
            }
            return 0;
        }
        // Each chunk taken from the rx ring goes straight back to the fill ring. The fill ring
        // holds every receive chunk, so there is always room; the min only guards the logic.
        let n = self.fill.free_slots(n);
        let (mut done, mut refill, mut got, mut bytes, mut bad) = (0, 0, 0u64, 0u64, 0u64);
        while done < n {
            let d = self.rx.get(done);
            let Some(mut b) = cache.alloc() else {
                add(&c.rx_no_buf, 1);
                break;
            };
            match self.frame(&d) {
                Some(f) => {
                    b.fill(f);
                    bytes += f.len() as u64;
                    got += 1;
                    out.push(b);
                }
                None => {
                    bad += 1;
                    cache.free(b);
                }
            }
            if d.addr < self.end {
                self.fill.put(refill, d.addr & CHUNK_MASK);
                refill += 1;
            }
            done += 1;
        }
        self.rx.release(done);
        self.fill.submit(refill);
        add(&c.rx_packets, got);
        add(&c.rx_bytes, bytes);
        add(&c.rx_bad_desc, bad);
        got as usize
    }
}

/// A socket's transmit half: the tx ring, the completion ring and the transmit chunks
/// `[start, end)`, of which `free` are not in flight.
struct XskTx {
    xsk: Arc<Xsk>,
    /// Keeps the program attached while the queue lives (the socket shares its queue with the
    /// receive half, whose frames the program steers).
    prog: Option<Arc<XdpProgram>>,
    tx: Ring<libc::xdp_desc>,
    comp: Ring<u64>,
    free: Vec<u64>,
    umem: NonNull<u8>,
    start: u64,
    end: u64,
    /// Copy mode transmits inside sendto, so every burst needs one; zero-copy drivers say when.
    copy_mode: bool,
}

// SAFETY: as for XskRx: the tx and completion rings and the transmit chunks are this value's
// alone, in mappings `xsk` keeps alive.
unsafe impl Send for XskTx {}

impl XskTx {
    /// Takes the chunks the kernel has finished sending back into `free`.
    fn reap(&mut self) {
        let n = self.comp.ready(u32::MAX);
        for i in 0..n {
            let a = self.comp.get(i);
            if a >= self.start && a < self.end {
                self.free.push(a & CHUNK_MASK);
            }
        }
        self.comp.release(n);
    }

    /// Makes the kernel send what is in the tx ring. In copy mode each sendto transmits up to the
    /// socket's budget and says EAGAIN if more remains, so kick again while it makes progress.
    fn kick(&mut self) {
        let c = &self.xsk.counters;
        let mut left = self.tx.unconsumed();
        if left == 0 || !(self.copy_mode || self.tx.needs_wakeup()) {
            return;
        }
        for _ in 0..MAX_KICKS {
            // SAFETY: a zero-length non-blocking sendto on our socket with no buffers.
            let r = unsafe {
                libc::sendto(
                    self.xsk.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            add(&c.tx_kicks, 1);
            if r >= 0 {
                return;
            }
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EAGAIN) => {}
                Some(libc::EBUSY) => add(&c.tx_dev_drops, 1),
                _ => {
                    add(&c.tx_kick_errors, 1);
                    return;
                }
            }
            let now = self.tx.unconsumed();
            if now == 0 || now == left {
                return;
            }
            left = now;
        }
    }
}

impl TxQueue for XskTx {
    fn tx_burst(&mut self, pkts: &mut Vec<PktBuf>, cache: &mut BufCache) -> usize {
        self.reap();
        let want = pkts.len().min(self.free.len()).min(u32::MAX as usize) as u32;
        let room = self.tx.free_slots(want);
        let (mut queued, mut taken, mut bytes, mut oversize) = (0u32, 0usize, 0u64, 0u64);
        for b in pkts.iter() {
            let len = b.len();
            if len == 0 || len > MAX_TX_FRAME {
                oversize += 1;
                taken += 1;
                continue;
            }
            if queued == room {
                break;
            }
            let Some(addr) = self.free.pop() else { break };
            // SAFETY: `addr` is a free transmit chunk (in [start, end), FRAME_SIZE long, inside
            // the live UMEM) that the kernel is not reading: it came back through the completion
            // ring or was never sent. len <= FRAME_SIZE, and the PktBuf is separate memory.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    b.data().as_ptr(),
                    self.umem.as_ptr().add(addr as usize),
                    len,
                )
            };
            self.tx.put(
                queued,
                libc::xdp_desc {
                    addr,
                    len: len as u32,
                    options: 0,
                },
            );
            queued += 1;
            taken += 1;
            bytes += len as u64;
        }
        if queued > 0 {
            self.tx.submit(queued);
        }
        for b in pkts.drain(..taken) {
            cache.free(b);
        }
        self.kick();
        let c = &self.xsk.counters;
        add(&c.tx_packets, queued as u64);
        add(&c.tx_bytes, bytes);
        add(&c.tx_oversize, oversize);
        add(&c.tx_full, pkts.len() as u64);
        taken
    }

    fn flush(&mut self) {
        self.reap();
        self.kick();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_queues_can_move_to_workers() {
        fn send<T: Send>() {}
        send::<AfXdpPort>();
        send::<XskRx>();
        send::<XskTx>();
    }

    #[test]
    fn configs_are_checked() {
        assert!(AfXdpConfig::default().check().is_ok());
        let bad = AfXdpConfig {
            rx_ring: 1000,
            ..Default::default()
        };
        assert!(bad.check().unwrap_err().contains("rx_ring = 1000"));
        let none = AfXdpConfig {
            queues: 0,
            ..Default::default()
        };
        assert!(none.check().is_err());
    }

    #[test]
    fn bad_device_names_say_so() {
        let e = AfXdpPort::open("no-such-dev0", &AfXdpConfig::default())
            .err()
            .unwrap();
        assert!(
            e.contains("no-such-dev0") && e.contains("no such device"),
            "{e}"
        );
        let e = AfXdpPort::open("a-name-far-too-long-for-linux", &AfXdpConfig::default())
            .err()
            .unwrap();
        assert!(e.contains("not a valid interface name"), "{e}");
    }

    #[test]
    fn rings_follow_the_kernel_protocol() {
        // A ring in plain memory, playing the kernel's side by hand.
        let map = Mmap::anon(4096).unwrap();
        let off = libc::xdp_ring_offset {
            producer: 0,
            consumer: 64,
            flags: 128,
            desc: 192,
        };
        let mut p = Ring::<u64>::new(&map, &off, 8).unwrap();
        assert_eq!(p.free_slots(10), 8);
        for i in 0..8 {
            p.put(i, 100 + i as u64);
        }
        p.submit(8);
        assert_eq!(p.free_slots(1), 0, "full until the consumer moves");
        assert_eq!(p.unconsumed(), 8);
        // The same memory seen from the consumer side.
        let mut c = Ring::<u64>::new(&map, &off, 8).unwrap();
        c.cached_prod = 0;
        c.cached_cons = 0;
        assert_eq!(c.ready(3), 3);
        assert_eq!((c.get(0), c.get(2)), (100, 102));
        c.release(3);
        assert_eq!(p.free_slots(8), 3, "released entries are free again");
        assert_eq!(p.unconsumed(), 5);
        assert!(
            Ring::<u64>::new(&map, &off, 1024).is_err(),
            "entries past the map"
        );
    }
}
