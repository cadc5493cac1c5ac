//! AF_PACKET ports: a Linux network device read and written through packet sockets with
//! memory-mapped rings. It works on any device the kernel has (veth, a NIC without an AF_XDP
//! driver, a tap) and needs no kernel program, at the cost of one copy per frame each way.
//!
//! Receive: one socket per queue, each with a `TPACKET_V2` ring of one slot per frame
//! ([`rx_frames`], [`RxRing::Frames`]: each frame is the reader's as soon as the kernel wrote it,
//! with the kernel's receive time), or a `TPACKET_V3` ring ([`RxRing::Blocks`]). V3 hands over
//! whole blocks of variable-length frames, so a burst touches one status word per block rather
//! than one per frame, and a 64-byte frame takes ~130 bytes of ring instead of a fixed slot; but
//! a block is handed over only when full or after its timeout (at least 1 ms), which at low rates
//! is the frames' extra latency (580 us median at 100,000 frames/s on veth, against 28 us). Several queues
//! are several sockets in one `PACKET_FANOUT` group: the kernel spreads frames by the device's
//! receive queue (`FANOUT_QM`, when the device has several and so already spreads flows) or by
//! flow hash (`FANOUT_HASH`), so a flow stays on one worker and in order. Fragment reassembly
//! (`FANOUT_FLAG_DEFRAG`) stays off: the router forwards fragments, it does not reassemble them.
//!
//! Transmit: one socket per worker (no locks), each with a `TPACKET_V2` ring. A burst fills slots
//! and issues one `send()` to make the kernel take them all; `PACKET_QDISC_BYPASS` skips the
//! qdisc layer, since the router schedules (QoS) itself. V2 rather than V3 for transmit: the
//! kernel's V3 transmit ring is the same fixed-slot ring with a larger header, so V3 buys nothing
//! there. Transmit sockets bind with protocol 0, so they receive nothing.
//!
//! Frames the kernel untagged (`TP_STATUS_VLAN_VALID`: it strips the outer 802.1Q/802.1ad tag
//! before packet sockets see the frame) get their tag re-inserted, since ethernet-input parses
//! tags itself. Frames whose TCP/UDP checksum was left to a checksum offload that never happened
//! (`TP_STATUS_CSUMNOTREADY`: sent by the kernel's own stack over a veth, for example) get it
//! completed here; forwarded as they are, they would reach the next host with a wrong checksum.
//! TCP from such a sender can also arrive as segmentation-offload super-frames (up to 64 KiB),
//! which no packet buffer holds: they are counted as `oversize`; turn TSO/GSO off on the sending
//! device (`ethtool -K DEV tso off gso off`) when that matters.
//!
//! All `unsafe` is in the small helpers at the end of this file ([`Mmap`] and the socket calls);
//! ring walking uses them with the ownership rule of the ring protocol: a block or slot whose
//! status word says it belongs to user space is not written by the kernel until user space
//! gives it back through that word.

use std::io;
use std::mem::offset_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::{link, RingPosition, RxQueue, TxQueue};
use crate::buffer::{BufCache, PktBuf, MAX_FRAME};

mod rx_frames;
pub use rx_frames::AfPacketRxFrames;

/// Which kind of receive ring a port reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxRing {
    /// `TPACKET_V3` blocks (`block_size` x `block_count`): the least work per frame; a frame is
    /// handed over when its block fills or times out (`block_timeout_ms`).
    Blocks,
    /// `TPACKET_V2`, one slot per frame, at least this many: each frame is readable at once and
    /// carries the kernel's receive time. The tester's ports, and the router's unless its
    /// config says `rx-ring: blocks`.
    Frames(u32),
}

/// How a port with several receive queues spreads frames over them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanoutMode {
    /// [`QueueMapping`](Self::QueueMapping) if the device has more than one receive queue,
    /// else [`Hash`](Self::Hash).
    Auto,
    /// By flow hash (the NIC's, or computed from the addresses and ports): a flow stays on one
    /// queue.
    Hash,
    /// By the device's receive queue: the NIC's RSS has spread the flows already, no hashing in
    /// software.
    QueueMapping,
    /// By the CPU that received the frame (follows the NIC's interrupt affinity).
    Cpu,
}

/// How to open an AF_PACKET port.
#[derive(Clone, Debug)]
pub struct AfPacketConfig {
    /// Receive queues (sockets in one fanout group); one worker reads each.
    pub queues: usize,
    /// Receive ring block size in bytes: a multiple of the page size that holds at least one
    /// frame of the device's MTU. Larger blocks mean fewer hand-overs.
    pub block_size: u32,
    /// Receive ring blocks per queue. The ring holds `block_size * block_count` bytes of frames
    /// (a 64-byte frame takes ~130 bytes); a full ring drops (counted as `kernel_drops`).
    pub block_count: u32,
    /// The kernel hands over a partly filled block after this many milliseconds: the extra
    /// latency at low rates. At high rates blocks fill (and are handed over) much sooner.
    pub block_timeout_ms: u32,
    /// Transmit ring slot size in bytes (a 32-byte header plus the frame). `None`: the smallest
    /// that holds a frame of the device's MTU plus a VLAN tag, at least 2,048.
    pub tx_frame_size: Option<u32>,
    /// Transmit ring slots per transmit queue (rounded up to fill the ring's blocks).
    pub tx_frame_count: u32,
    /// The transmit socket's send buffer, bytes (`None`: the kernel's default, about 212 KB).
    /// The kernel takes no more frames from the ring while the frames it sent hold this much
    /// memory (~770 bytes each for a small frame), which on a veth lasts until the receiving
    /// side has processed them: a larger buffer absorbs a burst without refusing it.
    pub tx_sndbuf: Option<usize>,
    /// Receive frames for any destination MAC. On by default: the router's interface MAC need
    /// not be the kernel device's.
    pub promiscuous: bool,
    /// How several receive queues share the frames (unused with one queue).
    pub fanout: FanoutMode,
    /// The receive ring's kind (the block settings above apply to [`RxRing::Blocks`]).
    pub rx_ring: RxRing,
}

impl Default for AfPacketConfig {
    fn default() -> Self {
        AfPacketConfig {
            queues: 1,
            block_size: 256 * 1024,
            block_count: 32,
            block_timeout_ms: 1,
            tx_frame_size: None,
            tx_frame_count: 1024,
            tx_sndbuf: None,
            promiscuous: true,
            fanout: FanoutMode::Auto,
            rx_ring: RxRing::Blocks,
        }
    }
}

/// Counters of one receive queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxQueueStats {
    /// Frames delivered to the worker.
    pub frames: u64,
    /// Their bytes (with re-inserted VLAN tags).
    pub bytes: u64,
    /// Frames skipped because they do not fit a packet buffer (over `MAX_FRAME` bytes, or cut
    /// short by a block too small for them).
    pub oversize: u64,
    /// Frames the kernel dropped because the ring was full (`PACKET_STATISTICS` `tp_drops`).
    pub kernel_drops: u64,
    /// Times the kernel found the ring full and froze it until a block came back
    /// (`tp_freeze_q_cnt`).
    pub ring_freezes: u64,
    /// TCP/UDP checksums completed here because the sender left them to an offload.
    pub checksums_completed: u64,
}

/// Counters of one transmit queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxQueueStats {
    /// Frames put in the ring (handed to the kernel).
    pub frames: u64,
    pub bytes: u64,
    /// Frames left with the caller because the ring was full.
    pub ring_full: u64,
    /// Frames dropped because they do not fit a ring slot.
    pub oversize: u64,
    /// Frames dropped because they are shorter than an Ethernet header (the kernel would refuse
    /// them).
    pub runts: u64,
    /// `send()` kicks that failed (device down, socket buffer full); the frames stay in the ring
    /// and go with the next kick.
    pub send_errors: u64,
    /// Frames put in the ring and taken back before the kernel sent them (no longer in
    /// `frames`).
    pub taken_back: u64,
}

/// A port's counters, one entry per queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AfPacketStats {
    pub rx: Vec<RxQueueStats>,
    pub tx: Vec<TxQueueStats>,
}

impl AfPacketStats {
    pub fn rx_total(&self) -> RxQueueStats {
        self.rx
            .iter()
            .fold(RxQueueStats::default(), |a, q| RxQueueStats {
                frames: a.frames + q.frames,
                bytes: a.bytes + q.bytes,
                oversize: a.oversize + q.oversize,
                kernel_drops: a.kernel_drops + q.kernel_drops,
                ring_freezes: a.ring_freezes + q.ring_freezes,
                checksums_completed: a.checksums_completed + q.checksums_completed,
            })
    }

    pub fn tx_total(&self) -> TxQueueStats {
        self.tx
            .iter()
            .fold(TxQueueStats::default(), |a, q| TxQueueStats {
                frames: a.frames + q.frames,
                bytes: a.bytes + q.bytes,
                ring_full: a.ring_full + q.ring_full,
                oversize: a.oversize + q.oversize,
                runts: a.runts + q.runts,
                send_errors: a.send_errors + q.send_errors,
                taken_back: a.taken_back + q.taken_back,
            })
    }
}

/// A Linux network device as a port. Open it, hand its receive queues to the workers, create one
/// transmit queue per worker; [`stats`](Self::stats) reads the counters of all of them.
pub struct AfPacketPort {
    dev: String,
    ifindex: u32,
    cfg: AfPacketConfig,
    fanout: Option<FanoutMode>,
    rx: Mutex<Vec<Box<dyn RxQueue>>>,
    rx_shared: Vec<Arc<RxShared>>,
    tx_shared: Mutex<Vec<Arc<TxCounters>>>,
}

impl AfPacketPort {
    /// Opens device `dev` (in the calling thread's network namespace) with `cfg.queues` receive
    /// sockets. Needs CAP_NET_RAW.
    pub fn open(dev: &str, cfg: &AfPacketConfig) -> Result<AfPacketPort, String> {
        AfPacketPort::open_or_adopt(dev, cfg, None)
    }

    /// The port another router process opened with `cfg`, from its receive sockets (passed
    /// over a Unix socket; in queue order): their rings are mapped again here, nothing about
    /// the sockets changes (fanout group, binding, filters), so frames keep landing in the same
    /// rings. The queues read from where the old process stopped once given its positions
    /// ([`RxQueue::take_over`]).
    pub fn adopt(
        dev: &str,
        cfg: &AfPacketConfig,
        fds: Vec<OwnedFd>,
    ) -> Result<AfPacketPort, String> {
        if fds.len() != cfg.queues {
            return Err(format!(
                "af_packet {dev}: {} receive sockets handed over for {} queues",
                fds.len(),
                cfg.queues
            ));
        }
        AfPacketPort::open_or_adopt(dev, cfg, Some(fds))
    }

    /// The receive sockets, in queue order (to hand the port to another process).
    pub fn rx_fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        self.rx_shared.iter().map(|s| s.fd.as_fd()).collect()
    }

    fn open_or_adopt(
        dev: &str,
        cfg: &AfPacketConfig,
        given: Option<Vec<OwnedFd>>,
    ) -> Result<AfPacketPort, String> {
        let err = |what: &str, e: io::Error| af_err(dev, what, e);
        let link = link::link_state(dev).map_err(|e| format!("af_packet {e}"))?;
        let page = page_size();
        let bs = cfg.block_size as usize;
        if cfg.queues == 0 || cfg.queues > 256 {
            return Err(format!(
                "af_packet {dev}: {} receive queues (1 to 256)",
                cfg.queues
            ));
        }
        if bs < page || !bs.is_multiple_of(page) || cfg.block_count == 0 {
            return Err(format!(
                "af_packet {dev}: ring block size {bs} must be a multiple of the page size \
                 ({page}), and the block count ({}) at least 1",
                cfg.block_count
            ));
        }
        let need = link.mtu as usize + 18 + RX_FRAME_OVERHEAD;
        if bs < need {
            return Err(format!(
                "af_packet {dev}: ring block size {bs} cannot hold a frame of the device's MTU \
                 {} (needs {need})",
                link.mtu
            ));
        }
        let fanout = match (cfg.queues, cfg.fanout) {
            (1, _) => None,
            (_, FanoutMode::Auto) if link.rx_queues > 1 => Some(FanoutMode::QueueMapping),
            (_, FanoutMode::Auto) => Some(FanoutMode::Hash),
            (_, m) => Some(m),
        };
        let adopting = given.is_some();
        let mut given = given.unwrap_or_default().into_iter();
        if fanout.is_some() && !link.admin_up && !adopting {
            return Err(format!(
                "af_packet {dev}: the device is down; a fanout group (queues > 1) can only be \
                 joined on an up device"
            ));
        }
        let mut group: Option<u16> = None;
        let mut queues: Vec<Box<dyn RxQueue>> = Vec::with_capacity(cfg.queues);
        let mut shared = Vec::with_capacity(cfg.queues);
        let frames_geo = match cfg.rx_ring {
            RxRing::Frames(n) => Some(rx_frames::Geometry::new(
                link.mtu as usize,
                n as usize,
                page,
            )),
            RxRing::Blocks => None,
        };
        for q in 0..cfg.queues {
            if let Some(fd) = given.next() {
                let len = match frames_geo {
                    None => bs * cfg.block_count as usize,
                    Some(g) => g.bytes(),
                };
                let map = Mmap::map(fd.as_raw_fd(), len)
                    .map_err(|e| err("mapping a handed-over receive ring", e))?;
                let sh = Arc::new(RxShared {
                    fd,
                    c: RxCounters::default(),
                });
                queues.push(rx_queue(map, sh.clone(), frames_geo, cfg, q));
                shared.push(sh);
                continue;
            }
            let fd = packet_socket().map_err(|e| err("opening a packet socket", e))?;
            let raw = fd.as_raw_fd();
            let map = match frames_geo {
                None => {
                    set_int(raw, libc::SOL_PACKET, libc::PACKET_VERSION, TPACKET_V3)
                        .map_err(|e| err("selecting TPACKET_V3", e))?;
                    let frame = RX_NOMINAL_FRAME.min(bs);
                    let req = libc::tpacket_req3 {
                        tp_block_size: cfg.block_size,
                        tp_block_nr: cfg.block_count,
                        tp_frame_size: frame as u32,
                        tp_frame_nr: (bs / frame) as u32 * cfg.block_count,
                        tp_retire_blk_tov: cfg.block_timeout_ms,
                        tp_sizeof_priv: 0,
                        tp_feature_req_word: 0,
                    };
                    setsockopt(raw, libc::SOL_PACKET, libc::PACKET_RX_RING, &req).map_err(|e| {
                        err(
                            &format!("setting up the receive ring ({bs} B x {})", cfg.block_count),
                            e,
                        )
                    })?;
                    Mmap::map(raw, bs * cfg.block_count as usize)
                        .map_err(|e| err("mapping the receive ring", e))?
                }
                Some(g) => {
                    set_int(raw, libc::SOL_PACKET, libc::PACKET_VERSION, TPACKET_V2)
                        .map_err(|e| err("selecting TPACKET_V2", e))?;
                    let req = libc::tpacket_req {
                        tp_block_size: g.block as u32,
                        tp_block_nr: (g.slots / g.per_block) as u32,
                        tp_frame_size: g.frame as u32,
                        tp_frame_nr: g.slots as u32,
                    };
                    setsockopt(raw, libc::SOL_PACKET, libc::PACKET_RX_RING, &req).map_err(|e| {
                        err(
                            &format!(
                                "setting up the receive ring ({} slots of {} B)",
                                g.slots, g.frame
                            ),
                            e,
                        )
                    })?;
                    Mmap::map(raw, g.bytes()).map_err(|e| err("mapping the receive ring", e))?
                }
            };
            set_int(raw, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1)
                .map_err(|e| err("setting PACKET_IGNORE_OUTGOING", e))?;
            if fanout.is_some() {
                // Until the socket is in the group it would see every frame on its own, and
                // frames would arrive twice; drop everything until then.
                attach_drop_all(raw).map_err(|e| err("attaching a drop-all filter", e))?;
            }
            bind_ll(raw, link.ifindex, ETH_P_ALL).map_err(|e| err("binding", e))?;
            if cfg.promiscuous {
                set_promisc(raw, link.ifindex).map_err(|e| err("setting promiscuous mode", e))?;
            }
            if let Some(mode) = fanout {
                let kind = match mode {
                    FanoutMode::Hash | FanoutMode::Auto => libc::PACKET_FANOUT_HASH,
                    FanoutMode::QueueMapping => libc::PACKET_FANOUT_QM,
                    FanoutMode::Cpu => libc::PACKET_FANOUT_CPU,
                };
                // The group's own hook replaces the sockets' hooks, so it needs its own
                // ignore-outgoing flag.
                let flags = kind | libc::PACKET_FANOUT_FLAG_IGNORE_OUTGOING;
                match group {
                    None => {
                        // The kernel picks an id no other group in the namespace uses.
                        fanout_join(raw, 0, flags | libc::PACKET_FANOUT_FLAG_UNIQUEID)
                            .map_err(|e| err("creating the fanout group", e))?;
                        group = Some(fanout_id(raw).map_err(|e| err("reading the fanout id", e))?);
                    }
                    Some(id) => fanout_join(raw, id, flags)
                        .map_err(|e| err(&format!("joining fanout group {id}"), e))?,
                }
            }
            let sh = Arc::new(RxShared {
                fd,
                c: RxCounters::default(),
            });
            queues.push(rx_queue(map, sh.clone(), frames_geo, cfg, q));
            shared.push(sh);
        }
        if fanout.is_some() && !adopting {
            // Every socket is in the group now: let frames in.
            for s in &shared {
                detach_filter(s.fd.as_raw_fd()).map_err(|e| err("removing the filter", e))?;
            }
        }
        Ok(AfPacketPort {
            dev: dev.to_string(),
            ifindex: link.ifindex,
            cfg: cfg.clone(),
            fanout,
            rx: Mutex::new(queues),
            rx_shared: shared,
            tx_shared: Mutex::new(Vec::new()),
        })
    }

    pub fn name(&self) -> &str {
        &self.dev
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The fanout mode in use (after resolving `Auto`); `None` with one queue.
    pub fn fanout(&self) -> Option<FanoutMode> {
        self.fanout
    }

    /// The receive queues, once (later calls return none): queue `i` is `stats().rx[i]`.
    pub fn take_rx_queues(&self) -> Vec<Box<dyn RxQueue>> {
        let mut g = self.rx.lock().unwrap_or_else(|e| e.into_inner());
        g.drain(..).collect()
    }

    /// A new transmit queue (its own socket and ring), for one worker.
    pub fn tx_queue(&self) -> Result<Box<dyn TxQueue>, String> {
        let dev = &self.dev;
        let err = |what: &str, e: io::Error| af_err(dev, what, e);
        let link = link::link_state(dev).map_err(|e| format!("af_packet {e}"))?;
        let frame = match self.cfg.tx_frame_size {
            Some(f) => {
                let f = f as usize;
                if !f.is_multiple_of(16) || f < TX_DATA_OFF + 64 {
                    return Err(format!(
                        "af_packet {dev}: transmit slot size {f} must be a multiple of 16 and \
                         at least {}",
                        TX_DATA_OFF + 64
                    ));
                }
                f
            }
            None => (TX_DATA_OFF + link.mtu as usize + 18)
                .next_multiple_of(16)
                .max(2048),
        };
        let page = page_size();
        // Blocks of a power-of-two size holding at least four slots: the kernel allocates
        // blocks in powers of two pages, so other sizes would waste kernel memory.
        let block = (frame * 4).next_power_of_two().max(page);
        let per_block = block / frame;
        let blocks = (self.cfg.tx_frame_count.max(1) as usize).div_ceil(per_block);
        let slots = per_block * blocks;

        let fd = packet_socket().map_err(|e| err("opening a packet socket", e))?;
        let raw = fd.as_raw_fd();
        set_int(raw, libc::SOL_PACKET, libc::PACKET_VERSION, TPACKET_V2)
            .map_err(|e| err("selecting TPACKET_V2", e))?;
        set_int(raw, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1)
            .map_err(|e| err("setting PACKET_QDISC_BYPASS", e))?;
        // A frame the kernel refuses (longer than the MTU) is skipped instead of stopping the
        // ring until someone resets it.
        set_int(raw, libc::SOL_PACKET, libc::PACKET_LOSS, 1)
            .map_err(|e| err("setting PACKET_LOSS", e))?;
        if let Some(bytes) = self.cfg.tx_sndbuf {
            let v = bytes.min(i32::MAX as usize) as libc::c_int;
            // Past net.core.wmem_max needs CAP_NET_ADMIN; without it, as much as the limit
            // allows.
            set_int(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, v)
                .or_else(|_| set_int(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, v))
                .map_err(|e| err("setting the send buffer", e))?;
        }
        let req = libc::tpacket_req {
            tp_block_size: block as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: frame as u32,
            tp_frame_nr: slots as u32,
        };
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_TX_RING, &req).map_err(|e| {
            err(
                &format!("setting up the transmit ring ({slots} slots of {frame} B)"),
                e,
            )
        })?;
        let map =
            Mmap::map(raw, block * blocks).map_err(|e| err("mapping the transmit ring", e))?;
        bind_ll(raw, link.ifindex, 0).map_err(|e| err("binding", e))?;
        let c = Arc::new(TxCounters::default());
        self.tx_shared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(c.clone());
        Ok(Box::new(AfPacketTxQueue {
            map,
            fd,
            c,
            frame_size: frame,
            per_block,
            block_size: block,
            slots,
            head: 0,
            need_kick: false,
        }))
    }

    /// The counters of every receive queue (taken or not) and every transmit queue made.
    pub fn stats(&self) -> AfPacketStats {
        AfPacketStats {
            rx: self.rx_shared.iter().map(|s| s.snapshot()).collect(),
            tx: self
                .tx_shared
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|c| c.snapshot())
                .collect(),
        }
    }
}

const TPACKET_V2: libc::c_int = 1;
const TPACKET_V3: libc::c_int = 2;
const ETH_P_ALL: u16 = 0x0003;
const ETH_HLEN: usize = 14;
/// Room a V3 receive ring needs besides the frame: the block header (48), the frame header and
/// its alignment (82 before the MAC header); rounded up.
const RX_FRAME_OVERHEAD: usize = 256;
/// The V3 ring's nominal frame size: the kernel checks it but lays frames out by their length.
const RX_NOMINAL_FRAME: usize = 2048;
/// Where frame data starts in a V2 transmit slot: the kernel reads it at
/// `tp_hdrlen - sizeof(sockaddr_ll)`, i.e. `TPACKET_ALIGN(sizeof(tpacket2_hdr))`.
const TX_DATA_OFF: usize = 32;
const _: () =
    assert!(TX_DATA_OFF == libc::TPACKET2_HDRLEN - std::mem::size_of::<libc::sockaddr_ll>());

// Field offsets in the kernel's ring structures.
const BLK_HDR: usize = offset_of!(libc::tpacket_block_desc, hdr);
const BLK_STATUS: usize = BLK_HDR + offset_of!(libc::tpacket_hdr_v1, block_status);
const BLK_NUM_PKTS: usize = BLK_HDR + offset_of!(libc::tpacket_hdr_v1, num_pkts);
const BLK_FIRST: usize = BLK_HDR + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);
const BLK_HDR_END: usize = BLK_FIRST + 4;
const P3_NEXT: usize = offset_of!(libc::tpacket3_hdr, tp_next_offset);
const P3_SNAPLEN: usize = offset_of!(libc::tpacket3_hdr, tp_snaplen);
const P3_LEN: usize = offset_of!(libc::tpacket3_hdr, tp_len);
const P3_STATUS: usize = offset_of!(libc::tpacket3_hdr, tp_status);
const P3_MAC: usize = offset_of!(libc::tpacket3_hdr, tp_mac);
const P3_VLAN_TCI: usize =
    offset_of!(libc::tpacket3_hdr, hv1) + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tci);
const P3_VLAN_TPID: usize =
    offset_of!(libc::tpacket3_hdr, hv1) + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tpid);
const P3_HDR_LEN: usize = std::mem::size_of::<libc::tpacket3_hdr>();
const P2_STATUS: usize = offset_of!(libc::tpacket2_hdr, tp_status);
const P2_LEN: usize = offset_of!(libc::tpacket2_hdr, tp_len);

fn af_err(dev: &str, what: &str, e: io::Error) -> String {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => " (packet sockets need root or CAP_NET_RAW)",
        Some(libc::ENODEV) | Some(libc::ENXIO) => " (the device is gone)",
        Some(libc::ENOMEM) => " (ring too large?)",
        _ => "",
    };
    format!("af_packet {dev}: {what}: {e}{hint}")
}

#[derive(Default)]
struct RxCounters {
    frames: AtomicU64,
    bytes: AtomicU64,
    oversize: AtomicU64,
    kernel_drops: AtomicU64,
    ring_freezes: AtomicU64,
    checksums_completed: AtomicU64,
}

impl RxCounters {
    /// Adds one burst's counts (atomics touched only for what is not zero).
    fn add(&self, frames: u64, bytes: u64, oversize: u64, csums: u64) {
        if frames > 0 {
            self.frames.fetch_add(frames, Ordering::Relaxed);
            self.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        if oversize > 0 {
            self.oversize.fetch_add(oversize, Ordering::Relaxed);
        }
        if csums > 0 {
            self.checksums_completed.fetch_add(csums, Ordering::Relaxed);
        }
    }
}

/// What a receive queue shares with its port: the socket (for the kernel's counters) and ours.
struct RxShared {
    fd: OwnedFd,
    c: RxCounters,
}

impl RxShared {
    fn snapshot(&self) -> RxQueueStats {
        // The kernel zeroes its counters on each read, so every read is added up here.
        if let Ok(s) = packet_stats(self.fd.as_raw_fd()) {
            self.c
                .kernel_drops
                .fetch_add(s.tp_drops as u64, Ordering::Relaxed);
            self.c
                .ring_freezes
                .fetch_add(s.tp_freeze_q_cnt as u64, Ordering::Relaxed);
        }
        RxQueueStats {
            frames: self.c.frames.load(Ordering::Relaxed),
            bytes: self.c.bytes.load(Ordering::Relaxed),
            oversize: self.c.oversize.load(Ordering::Relaxed),
            kernel_drops: self.c.kernel_drops.load(Ordering::Relaxed),
            ring_freezes: self.c.ring_freezes.load(Ordering::Relaxed),
            checksums_completed: self.c.checksums_completed.load(Ordering::Relaxed),
        }
    }
}

#[derive(Default)]
struct TxCounters {
    frames: AtomicU64,
    bytes: AtomicU64,
    ring_full: AtomicU64,
    oversize: AtomicU64,
    runts: AtomicU64,
    send_errors: AtomicU64,
    taken_back: AtomicU64,
}

impl TxCounters {
    fn snapshot(&self) -> TxQueueStats {
        TxQueueStats {
            frames: self.frames.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            ring_full: self.ring_full.load(Ordering::Relaxed),
            oversize: self.oversize.load(Ordering::Relaxed),
            runts: self.runts.load(Ordering::Relaxed),
            send_errors: self.send_errors.load(Ordering::Relaxed),
            taken_back: self.taken_back.load(Ordering::Relaxed),
        }
    }
}

/// A receive queue over a socket's mapped ring, reading from its start.
fn rx_queue(
    map: Mmap,
    shared: Arc<RxShared>,
    frames_geo: Option<rx_frames::Geometry>,
    cfg: &AfPacketConfig,
    q: usize,
) -> Box<dyn RxQueue> {
    match frames_geo {
        None => Box::new(AfPacketRxQueue {
            map,
            shared,
            block_size: cfg.block_size as usize,
            blocks: cfg.block_count as usize,
            block: 0,
            cur: None,
            queue: q,
            handed_over: false,
        }),
        Some(geo) => Box::new(AfPacketRxFrames {
            map,
            shared,
            geo,
            next: 0,
            queue: q,
            handed_over: false,
        }),
    }
}

/// Where the reader is in a block it owns.
#[derive(Clone, Copy)]
struct Cursor {
    /// Frames not yet read.
    left: u32,
    /// Offset of the next frame's header in the mapping.
    off: usize,
}

/// One receive socket's ring, read by one worker.
pub struct AfPacketRxQueue {
    // Declared first so it is unmapped before the socket can close.
    map: Mmap,
    shared: Arc<RxShared>,
    block_size: usize,
    blocks: usize,
    /// The block the kernel fills next after the one we hold (or the one we wait for).
    block: usize,
    /// Set while we own `block` (its status said TP_STATUS_USER).
    cur: Option<Cursor>,
    queue: usize,
    /// Another process reads the ring now: dropping the queue leaves the socket alone.
    handed_over: bool,
}

/// A frame's place and properties, read from its header.
struct FrameInfo {
    next: usize,
    data_off: usize,
    snaplen: usize,
    len: usize,
    vlan: Option<(u16, u16)>,
    /// The L4 checksum is only the pseudo-header's (TP_STATUS_CSUMNOTREADY).
    csum_partial: bool,
}

impl AfPacketRxQueue {
    /// The queue's index within its port.
    pub fn queue(&self) -> usize {
        self.queue
    }

    fn block_status(&self) -> &AtomicU32 {
        self.map
            .atomic_u32(self.block * self.block_size + BLK_STATUS)
    }

    /// Takes the next block if the kernel has handed it over.
    fn open_block(&mut self) -> bool {
        if self.block_status().load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
            return false;
        }
        let base = self.block * self.block_size;
        // SAFETY: the acquire load above saw TP_STATUS_USER, so the kernel has finished this
        // block (it wrote the status last, after a write barrier) and will not touch it until
        // we store TP_STATUS_KERNEL.
        let hdr = unsafe { self.map.bytes(base, BLK_HDR_END) };
        let left = rd_u32(hdr, BLK_NUM_PKTS);
        let first = rd_u32(hdr, BLK_FIRST) as usize;
        self.cur = Some(Cursor {
            left,
            off: base + first,
        });
        true
    }

    /// Gives the current block back to the kernel and moves to the next.
    fn release_block(&mut self) {
        self.block_status()
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.block = (self.block + 1) % self.blocks;
        self.cur = None;
    }

    /// Reads the header at `off` in the block we own; None if it does not lie within the block
    /// (never seen; it would mean a kernel bug, and the rest of the block is skipped).
    fn frame(&self, off: usize) -> Option<FrameInfo> {
        let end = (self.block + 1) * self.block_size;
        if off + P3_HDR_LEN > end {
            return None;
        }
        // SAFETY: in the block we own (see open_block), bounds checked just above.
        let h = unsafe { self.map.bytes(off, P3_HDR_LEN) };
        let status = rd_u32(h, P3_STATUS);
        let snaplen = rd_u32(h, P3_SNAPLEN) as usize;
        let data_off = off + rd_u16(h, P3_MAC) as usize;
        if data_off + snaplen > end {
            return None;
        }
        let vlan = stripped_tag(
            status,
            rd_u16(h, P3_VLAN_TPID),
            rd_u32(h, P3_VLAN_TCI) as u16,
        );
        Some(FrameInfo {
            next: rd_u32(h, P3_NEXT) as usize,
            data_off,
            snaplen,
            len: rd_u32(h, P3_LEN) as usize,
            vlan,
            csum_partial: status & libc::TP_STATUS_CSUMNOTREADY != 0,
        })
    }
}

impl RxQueue for AfPacketRxQueue {
    fn rx_burst(&mut self, cache: &mut BufCache, out: &mut Vec<PktBuf>, max: usize) -> usize {
        let (mut n, mut bytes, mut oversize, mut csums) = (0usize, 0u64, 0u64, 0u64);
        while n < max {
            let Some(cur) = self.cur else {
                if !self.open_block() {
                    break;
                }
                continue;
            };
            if cur.left == 0 {
                self.release_block();
                continue;
            }
            let Some(f) = self.frame(cur.off) else {
                self.release_block();
                continue;
            };
            let tag = if f.vlan.is_some() { 4 } else { 0 };
            if f.snaplen < f.len || f.len + tag > MAX_FRAME {
                oversize += 1;
            } else {
                let Some(mut b) = cache.alloc() else { break };
                // SAFETY: the frame lies in the block we own (checked by frame()).
                let data = unsafe { self.map.bytes(f.data_off, f.snaplen) };
                if copy_in(&mut b, data, f.vlan, f.csum_partial) {
                    csums += 1;
                }
                out.push(b);
                n += 1;
                bytes += (f.len + tag) as u64;
            }
            let left = cur.left - 1;
            if left == 0 || f.next == 0 {
                // Done with the block: give it back now rather than on the next call.
                self.release_block();
            } else {
                self.cur = Some(Cursor {
                    left,
                    off: cur.off + f.next,
                });
            }
        }
        self.shared.c.add(n as u64, bytes, oversize, csums);
        n
    }

    fn hand_over(&mut self) -> Option<RingPosition> {
        self.handed_over = true;
        let (left, off) = self.cur.map_or((0, 0), |c| (c.left, c.off as u64));
        Some(RingPosition::Block {
            block: self.block as u64,
            left,
            off,
        })
    }

    fn take_over(&mut self, at: RingPosition) {
        if let RingPosition::Block { block, left, off } = at {
            // What the old reader said is checked as anything read from a ring: a block out
            // of range starts over at 0, a cursor outside its block is dropped (frame() would
            // refuse it anyway).
            self.block = if (block as usize) < self.blocks {
                block as usize
            } else {
                0
            };
            let base = self.block * self.block_size;
            let inside = (base..base + self.block_size).contains(&(off as usize));
            self.cur = (left > 0 && inside).then_some(Cursor {
                left,
                off: off as usize,
            });
        }
    }
}

impl Drop for AfPacketRxQueue {
    fn drop(&mut self) {
        // The socket stays open while the port lives (it holds the kernel's counters); stop it
        // from filling a ring nobody reads. Not when another process reads it now.
        if !self.handed_over {
            let _ = attach_drop_all(self.shared.fd.as_raw_fd());
        }
    }
}

/// The (TPID, TCI) of the outer tag the kernel stripped, from a frame header's status word and
/// its tag fields (an old kernel that does not say the TPID stripped an 802.1Q tag).
#[inline]
fn stripped_tag(status: u32, tpid: u16, tci: u16) -> Option<(u16, u16)> {
    (status & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
        let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
            tpid
        } else {
            0x8100
        };
        (tpid, tci)
    })
}

/// Copies a received frame into `b`: its stripped tag put back, its checksum completed if its
/// sender left that to an offload. True if a checksum was completed.
#[inline]
fn copy_in(b: &mut PktBuf, data: &[u8], vlan: Option<(u16, u16)>, csum_partial: bool) -> bool {
    match vlan {
        None => {
            b.fill(data);
        }
        Some((tpid, tci)) => fill_tagged(b, data, tpid, tci),
    }
    csum_partial && complete_l4_checksum(b.data_mut())
}

/// Copies a frame the kernel untagged into `b` with its tag back after the MAC addresses.
fn fill_tagged(b: &mut PktBuf, frame: &[u8], tpid: u16, tci: u16) {
    if frame.len() < 12 {
        b.fill(frame);
        return;
    }
    b.reset();
    let ok = b.set_len(frame.len() + 4);
    debug_assert!(ok, "the caller checked the length");
    let d = b.data_mut();
    d[..12].copy_from_slice(&frame[..12]);
    d[12..14].copy_from_slice(&tpid.to_be_bytes());
    d[14..16].copy_from_slice(&tci.to_be_bytes());
    d[16..].copy_from_slice(&frame[12..]);
}

/// Fills in the TCP or UDP checksum of an Ethernet frame whose sender left it to an offload: the
/// field then holds the pseudo-header's sum, so the checksum is the folded sum over the whole
/// segment as it stands (what the NIC would have done). False if the frame is not TCP or UDP
/// over IPv4/IPv6 in one piece.
fn complete_l4_checksum(f: &mut [u8]) -> bool {
    let rd = |f: &[u8], at: usize| f.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let mut l3 = 12;
    let mut ethertype = rd(f, l3);
    while matches!(ethertype, Some(0x8100 | 0x88a8)) {
        l3 += 4;
        ethertype = rd(f, l3);
    }
    l3 += 2;
    let (proto, l4, end) = match ethertype {
        Some(0x0800) => {
            let Some(h) = f.get(l3..l3 + 20) else {
                return false;
            };
            let ihl = (h[0] & 0x0f) as usize * 4;
            let total = u16::from_be_bytes([h[2], h[3]]) as usize;
            if ihl < 20 || total < ihl || u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0 {
                return false; // a bad header, or a fragment
            }
            (h[9], l3 + ihl, l3 + total)
        }
        Some(0x86dd) => {
            let Some(h) = f.get(l3..l3 + 40) else {
                return false;
            };
            let end = l3 + 40 + u16::from_be_bytes([h[4], h[5]]) as usize;
            let (mut next, mut at) = (h[6], l3 + 40);
            // Hop-by-hop, routing and destination options may precede TCP/UDP.
            while matches!(next, 0 | 43 | 60) {
                let Some(x) = f.get(at..at + 2) else {
                    return false;
                };
                next = x[0];
                at += (x[1] as usize + 1) * 8;
            }
            (next, at, end)
        }
        _ => return false,
    };
    let off = match proto {
        6 => 16,
        17 => 6,
        _ => return false,
    };
    if end > f.len() || l4 + off + 2 > end {
        return false;
    }
    let mut c = packet::checksum::fold(packet::checksum::sum(&f[l4..end]));
    if c == 0 {
        c = 0xffff; // UDP's "no checksum" is 0; 0xffff is the same one's-complement value
    }
    f[l4 + off..l4 + off + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// One transmit socket's ring, filled by one worker.
pub struct AfPacketTxQueue {
    // Declared first so it is unmapped before the socket closes.
    map: Mmap,
    fd: OwnedFd,
    c: Arc<TxCounters>,
    frame_size: usize,
    per_block: usize,
    block_size: usize,
    slots: usize,
    /// The next slot to fill; the kernel sends slots in the same order.
    head: usize,
    /// A kick failed, so slots may wait for one.
    need_kick: bool,
}

impl AfPacketTxQueue {
    fn slot(&self, i: usize) -> usize {
        (i / self.per_block) * self.block_size + (i % self.per_block) * self.frame_size
    }

    /// Asks the kernel to send every filled slot, without waiting for them to go out.
    fn kick(&mut self) {
        // SAFETY: send() with a null buffer of length 0 is the TX ring protocol's "send the
        // ring"; the kernel reads nothing through the pointer.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        self.need_kick = r < 0;
        if r < 0 {
            self.c.send_errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl TxQueue for AfPacketTxQueue {
    fn tx_burst(&mut self, pkts: &mut Vec<PktBuf>, cache: &mut BufCache) -> usize {
        let room = self.frame_size - TX_DATA_OFF;
        let (mut taken, mut queued, mut bytes) = (0usize, 0u64, 0u64);
        let (mut oversize, mut runts) = (0u64, 0u64);
        let mut full = false;
        for b in pkts.iter() {
            let len = b.len();
            if len > room || len < ETH_HLEN {
                // Can never be sent: take it (and drop it) rather than block the queue.
                if len < ETH_HLEN {
                    runts += 1;
                } else {
                    oversize += 1;
                }
                taken += 1;
                continue;
            }
            let slot = self.slot(self.head);
            let status = self.map.atomic_u32(slot + P2_STATUS);
            if status.load(Ordering::Acquire) != libc::TP_STATUS_AVAILABLE {
                full = true;
                break;
            }
            // SAFETY: the acquire load saw TP_STATUS_AVAILABLE, so the kernel is done with the
            // slot and will not read it before we store TP_STATUS_SEND_REQUEST below; the
            // range is inside the slot since len <= frame_size - TX_DATA_OFF.
            unsafe { self.map.bytes_mut(slot + TX_DATA_OFF, len) }.copy_from_slice(b.data());
            // SAFETY: as above, the slot's header is ours until the status store.
            unsafe { self.map.bytes_mut(slot + P2_LEN, 4) }
                .copy_from_slice(&(len as u32).to_ne_bytes());
            self.map
                .atomic_u32(slot + P2_STATUS)
                .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
            self.head = (self.head + 1) % self.slots;
            taken += 1;
            queued += 1;
            bytes += len as u64;
        }
        for b in pkts.drain(..taken) {
            cache.free(b);
        }
        if queued > 0 || self.need_kick {
            self.kick();
        }
        let c = &self.c;
        if queued > 0 {
            c.frames.fetch_add(queued, Ordering::Relaxed);
            c.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        if oversize + runts > 0 {
            c.oversize.fetch_add(oversize, Ordering::Relaxed);
            c.runts.fetch_add(runts, Ordering::Relaxed);
        }
        if full {
            c.ring_full.fetch_add(pkts.len() as u64, Ordering::Relaxed);
        }
        taken
    }

    fn flush(&mut self) {
        if self.need_kick || self.unsent() > 0 {
            self.kick();
        }
    }

    fn unsent(&self) -> usize {
        // The kernel sends slots in ring order, so the ones it has not taken yet are a run
        // ending at the last one filled.
        let mut n = 0;
        while n < self.slots {
            let i = (self.head + self.slots - 1 - n) % self.slots;
            let status = self.map.atomic_u32(self.slot(i) + P2_STATUS);
            if status.load(Ordering::Acquire) != libc::TP_STATUS_SEND_REQUEST {
                break;
            }
            n += 1;
        }
        n
    }

    fn take_back_unsent(&mut self) -> usize {
        let n = self.unsent();
        for k in 0..n {
            let i = (self.head + self.slots - 1 - k) % self.slots;
            // The kernel reads a SEND_REQUEST slot only inside send() on this socket, which
            // only this queue's owner calls and is not calling now; it stopped its own walk at
            // the first of these slots, so moving our head back there keeps the two in step.
            self.map
                .atomic_u32(self.slot(i) + P2_STATUS)
                .store(libc::TP_STATUS_AVAILABLE, Ordering::Release);
        }
        self.head = (self.head + self.slots - n) % self.slots;
        if n > 0 {
            self.c.frames.fetch_sub(n as u64, Ordering::Relaxed);
            self.c.taken_back.fetch_add(n as u64, Ordering::Relaxed);
        }
        self.need_kick = false;
        n
    }
}

impl Drop for AfPacketTxQueue {
    fn drop(&mut self) {
        self.flush();
    }
}

// ---- The unsafe helpers: a shared mapping and the socket calls. ----

/// A `MAP_SHARED` mapping of a packet socket's ring, unmapped on drop.
struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this handle; moving the handle to another thread
// moves that ownership (the kernel side is not tied to a thread).
unsafe impl Send for Mmap {}

impl Mmap {
    fn map(fd: RawFd, len: usize) -> io::Result<Mmap> {
        // SAFETY: a fresh mapping at an address the kernel chooses, so no existing memory is
        // affected; the result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap {
            ptr: NonNull::new(p.cast()).expect("mmap returned null"),
            len,
        })
    }

    /// The 32-bit word at `off`, shared with the kernel (a status word).
    fn atomic_u32(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.len);
        // SAFETY: in bounds and 4-byte aligned (checked; the mapping is page-aligned), valid
        // for as long as &self. The kernel reads and writes status words only with single
        // aligned 32-bit accesses paired with barriers, which is what an atomic expects.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(off).cast()) }
    }

    /// Bytes `off..off + len` of the mapping.
    ///
    /// # Safety
    /// The caller owns the range under the ring protocol (its block or slot status says user
    /// space), so the kernel does not write it while the slice lives.
    unsafe fn bytes(&self, off: usize, len: usize) -> &[u8] {
        assert!(off <= self.len && len <= self.len - off);
        // SAFETY: in bounds (checked); not written concurrently (the caller's promise).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(off), len) }
    }

    /// Bytes `off..off + len` of the mapping, to write.
    ///
    /// # Safety
    /// As [`bytes`](Self::bytes): the kernel does not read or write the range while the slice
    /// lives.
    unsafe fn bytes_mut(&mut self, off: usize, len: usize) -> &mut [u8] {
        assert!(off <= self.len && len <= self.len - off);
        // SAFETY: in bounds (checked); &mut self makes it the only slice we hand out, and the
        // kernel stays away (the caller's promise).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(off), len) }
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned, and no slice into the mapping can
        // outlive &mut self.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

fn rd_u16(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}
fn rd_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn page_size() -> usize {
    // SAFETY: sysconf takes no pointers.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// A packet socket that receives nothing until it is bound with a protocol.
fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket() takes no pointers; a non-negative result is a new descriptor we own.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sets a socket option from a plain value.
fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: the pointer and size describe `*v`, which lives across the call; the kernel only
    // reads that many bytes.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    setsockopt(fd, level, name, &v)
}

fn bind_ll(fd: RawFd, ifindex: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain integers and bytes; all-zero is a valid value.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as u16;
    sa.sll_protocol = protocol.to_be();
    sa.sll_ifindex = ifindex as i32;
    // SAFETY: the pointer and size describe `sa`, which lives across the call.
    let r = unsafe {
        libc::bind(
            fd,
            (&sa as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn set_promisc(fd: RawFd, ifindex: u32) -> io::Result<()> {
    let m = libc::packet_mreq {
        mr_ifindex: ifindex as i32,
        mr_type: libc::PACKET_MR_PROMISC as u16,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &m)
}

fn fanout_join(fd: RawFd, id: u16, type_flags: u32) -> io::Result<()> {
    let v: u32 = id as u32 | (type_flags << 16);
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &v)
}

/// The id of the fanout group the socket is in.
fn fanout_id(fd: RawFd) -> io::Result<u16> {
    let mut v: u32 = 0;
    let mut len = std::mem::size_of::<u32>() as libc::socklen_t;
    // SAFETY: the pointers describe `v` and `len`, which live across the call; the kernel
    // writes at most `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_FANOUT,
            (&mut v as *mut u32).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v as u16)
}

/// The kernel's counters since the last read (it zeroes them on read).
fn packet_stats(fd: RawFd) -> io::Result<libc::tpacket_stats_v3> {
    let mut s = libc::tpacket_stats_v3 {
        tp_packets: 0,
        tp_drops: 0,
        tp_freeze_q_cnt: 0,
    };
    let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
    // SAFETY: the pointers describe `s` and `len`, which live across the call; the kernel
    // writes at most `len` bytes of plain integers.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut s as *mut libc::tpacket_stats_v3).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(s)
}

/// A classic BPF filter that accepts nothing ("ret #0").
fn attach_drop_all(fd: RawFd) -> io::Result<()> {
    let mut insn = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: 0,
    }];
    let prog = libc::sock_fprog {
        len: 1,
        filter: insn.as_mut_ptr(),
    };
    // The kernel copies the program during the call, so `insn` need only outlive it.
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog)
}

fn detach_filter(fd: RawFd) -> io::Result<()> {
    set_int(fd, libc::SOL_SOCKET, libc::SO_DETACH_FILTER, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::Pool;

    #[test]
    fn vlan_tags_go_back_after_the_mac_addresses() {
        let pool = Pool::new(4);
        let mut c = BufCache::new(pool);
        let mut b = c.alloc().unwrap();
        let frame: Vec<u8> = (0..60u8).collect();
        fill_tagged(&mut b, &frame, 0x88a8, 0x2064);
        let d = b.data();
        assert_eq!(d.len(), 64);
        assert_eq!(&d[..12], &frame[..12]);
        assert_eq!(&d[12..16], &[0x88, 0xa8, 0x20, 0x64]);
        assert_eq!(&d[16..], &frame[12..]);
        c.free(b);
    }

    #[test]
    fn partial_checksums_are_completed() {
        use packet::checksum::{combine, fold, pseudo_v4, pseudo_v6, sum};
        // IPv4/UDP behind a VLAN tag, with the pseudo-header sum where the checksum goes, as a
        // stack that leaves the checksum to the NIC writes it.
        let payload = b"hello, partial checksum!!";
        let ulen = 8 + payload.len();
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x64, 0x08, 0x00]);
        let l4 = f.len() + 20;
        f.extend_from_slice(&[0x45, 0, 0, (20 + ulen) as u8, 0, 0, 0x40, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        f.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, ulen as u8, 0, 0]);
        f.extend_from_slice(payload);
        f.extend_from_slice(&[0; 6]); // Ethernet padding, not part of the datagram
        let pseudo = pseudo_v4([10, 0, 0, 1], [10, 0, 0, 2], 17, ulen as u32);
        f[l4 + 6..l4 + 8].copy_from_slice(&(!fold(pseudo)).to_be_bytes());
        assert!(complete_l4_checksum(&mut f));
        assert_eq!(
            fold(combine(pseudo, sum(&f[l4..l4 + ulen]))),
            0,
            "the datagram now verifies"
        );

        // IPv6/TCP behind a destination-options header.
        let tcp_len = 20 + 5;
        let (src, dst) = ([0x20; 16], [0x30; 16]);
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x86, 0xdd]);
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, (8 + tcp_len) as u8, 60, 64]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]); // next: TCP; a 6-byte PadN option
        let l4 = f.len();
        f.extend_from_slice(&[0x04, 0xd2, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18]);
        f.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
        f.extend_from_slice(b"abcde");
        let pseudo = pseudo_v6(&src, &dst, 6, tcp_len as u32);
        f[l4 + 16..l4 + 18].copy_from_slice(&(!fold(pseudo)).to_be_bytes());
        assert!(complete_l4_checksum(&mut f));
        assert_eq!(fold(combine(pseudo, sum(&f[l4..]))), 0);

        // Not TCP/UDP, fragments, short frames: left alone.
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(!complete_l4_checksum(&mut arp));
        assert!(!complete_l4_checksum(&mut [0u8; 20]));
        let mut frag = vec![0u8; 60];
        frag[12..16].copy_from_slice(&[0x08, 0x00, 0x45, 0]);
        frag[17] = 46;
        frag[20] = 0x20; // more fragments
        frag[23] = 17;
        let before = frag.clone();
        assert!(!complete_l4_checksum(&mut frag));
        assert_eq!(frag, before);
    }

    #[test]
    fn ports_can_be_shared_and_queues_moved_to_workers() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<AfPacketPort>();
        send::<AfPacketRxQueue>();
        send::<AfPacketTxQueue>();
    }

    #[test]
    fn ring_offsets_match_the_kernel_headers() {
        // The layout in linux/if_packet.h.
        assert_eq!((BLK_STATUS, BLK_NUM_PKTS, BLK_FIRST), (8, 12, 16));
        assert_eq!((P3_NEXT, P3_SNAPLEN, P3_LEN, P3_STATUS), (0, 12, 16, 20));
        assert_eq!(
            (P3_MAC, P3_VLAN_TCI, P3_VLAN_TPID, P3_HDR_LEN),
            (24, 32, 36, 48)
        );
        assert_eq!((P2_STATUS, P2_LEN), (0, 4));
    }

    #[test]
    fn bad_devices_and_geometry_are_named_in_errors() {
        let cfg = AfPacketConfig::default();
        let e = AfPacketPort::open("lr-nosuchdev0", &cfg).err().unwrap();
        assert_eq!(e, "af_packet lr-nosuchdev0: no such network device");
        let e = AfPacketPort::open("way-too-long-a-name", &cfg)
            .err()
            .unwrap();
        assert!(e.starts_with("af_packet way-too-long-a-name: not a network device name"));
        let e = AfPacketPort::open(
            "lo",
            &AfPacketConfig {
                block_size: 5000,
                ..cfg.clone()
            },
        )
        .err()
        .unwrap();
        assert!(e.contains("af_packet lo: ring block size 5000"), "{e}");
        let e = AfPacketPort::open(
            "lo",
            &AfPacketConfig {
                block_size: 4096,
                ..cfg.clone()
            },
        )
        .err()
        .unwrap();
        assert!(
            e.contains("cannot hold a frame of the device's MTU 65536"),
            "{e}"
        );
        let e = AfPacketPort::open("lo", &AfPacketConfig { queues: 0, ..cfg })
            .err()
            .unwrap();
        assert!(e.contains("0 receive queues"), "{e}");
    }
}
