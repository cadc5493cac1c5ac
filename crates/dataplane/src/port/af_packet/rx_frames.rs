//! A receive queue on a `TPACKET_V2` ring: one fixed slot per frame, each with its own status
//! word, so a frame is the reader's the moment the kernel has written it. The V3 block ring the
//! router reads ([`super::AfPacketRxQueue`]) hands frames over a block at a time, which at low
//! rates means after its block timeout (at least a millisecond): fine for forwarding, not for a
//! tester that measures a device's latency in microseconds. Each frame also carries the time the
//! kernel gave it to the socket (`tp_sec`/`tp_nsec`, `CLOCK_REALTIME`), which goes to
//! [`Meta::rx_ns`](crate::buffer::Meta::rx_ns): the receive time without the reader's polling
//! delay.
//!
//! Reads: slot status words; sets: `rx_ns`, and VLAN tags and partial checksums are restored as
//! the V3 queue does. A 64-byte frame takes a whole slot (2 KiB for a 1,500-byte MTU), so the
//! ring holds fewer frames per megabyte than V3's.

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{copy_in, rd_u16, rd_u32, stripped_tag, Mmap, RxShared};
use crate::buffer::{BufCache, PktBuf, MAX_FRAME};
use crate::port::{RingPosition, RxQueue};

const P2_STATUS: usize = std::mem::offset_of!(libc::tpacket2_hdr, tp_status);
const P2_LEN: usize = std::mem::offset_of!(libc::tpacket2_hdr, tp_len);
const P2_SNAPLEN: usize = std::mem::offset_of!(libc::tpacket2_hdr, tp_snaplen);
const P2_MAC: usize = std::mem::offset_of!(libc::tpacket2_hdr, tp_mac);
const P2_SEC: usize = std::mem::offset_of!(libc::tpacket2_hdr, tp_sec);
const P2_NSEC: usize = std::mem::offset_of!(libc::tpacket2_hdr, tp_nsec);
const P2_VLAN_TCI: usize = std::mem::offset_of!(libc::tpacket2_hdr, tp_vlan_tci);
const P2_VLAN_TPID: usize = std::mem::offset_of!(libc::tpacket2_hdr, tp_vlan_tpid);
const P2_HDR_LEN: usize = std::mem::size_of::<libc::tpacket2_hdr>();
const _: () = assert!(P2_HDR_LEN <= libc::TPACKET2_HDRLEN);

/// The ring's geometry: `slots` slots of `frame` bytes, `per_block` to a block of `block` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Geometry {
    pub frame: usize,
    pub block: usize,
    pub per_block: usize,
    pub slots: usize,
}

impl Geometry {
    /// Slots of the smallest power of two that holds the V2 header, its alignment and a frame
    /// of `mtu` with a VLAN tag (at least 2 KiB), `frames` of them at least, in blocks of a page
    /// or one slot, whichever is larger.
    pub fn new(mtu: usize, frames: usize, page: usize) -> Geometry {
        let frame = (libc::TPACKET2_HDRLEN + 16 + mtu + 18)
            .next_power_of_two()
            .max(2048);
        let block = frame.max(page);
        let per_block = block / frame;
        let blocks = frames.max(1).div_ceil(per_block);
        Geometry {
            frame,
            block,
            per_block,
            slots: blocks * per_block,
        }
    }

    /// Offset of slot `i` in the mapping.
    pub fn slot(&self, i: usize) -> usize {
        (i / self.per_block) * self.block + (i % self.per_block) * self.frame
    }

    pub fn bytes(&self) -> usize {
        self.slots / self.per_block * self.block
    }
}

/// One receive socket's V2 ring, read by one thread.
pub struct AfPacketRxFrames {
    // Declared first so it is unmapped before the socket can close.
    pub(super) map: Mmap,
    pub(super) shared: Arc<RxShared>,
    pub(super) geo: Geometry,
    /// The slot the kernel fills next.
    pub(super) next: usize,
    pub(super) queue: usize,
    /// Another process reads the ring now: dropping the queue leaves the socket alone.
    pub(super) handed_over: bool,
}

impl AfPacketRxFrames {
    /// The queue's index within its port.
    pub fn queue(&self) -> usize {
        self.queue
    }
}

impl RxQueue for AfPacketRxFrames {
    fn rx_burst(&mut self, cache: &mut BufCache, out: &mut Vec<PktBuf>, max: usize) -> usize {
        let (mut n, mut bytes, mut oversize, mut csums) = (0usize, 0u64, 0u64, 0u64);
        while n < max {
            let off = self.geo.slot(self.next);
            let status = self.map.atomic_u32(off + P2_STATUS).load(Ordering::Acquire);
            if status & libc::TP_STATUS_USER == 0 {
                break;
            }
            // SAFETY: the acquire load saw TP_STATUS_USER: the kernel has written the slot (its
            // status last) and will not touch it until we store TP_STATUS_KERNEL below; the
            // header lies at the slot's start, inside the mapping.
            let h = unsafe { self.map.bytes(off, P2_HDR_LEN) };
            let len = rd_u32(h, P2_LEN) as usize;
            let snaplen = rd_u32(h, P2_SNAPLEN) as usize;
            let mac = rd_u16(h, P2_MAC) as usize;
            let rx_ns =
                u64::from(rd_u32(h, P2_SEC)) * 1_000_000_000 + u64::from(rd_u32(h, P2_NSEC));
            let vlan = stripped_tag(status, rd_u16(h, P2_VLAN_TPID), rd_u16(h, P2_VLAN_TCI));
            let tag = if vlan.is_some() { 4 } else { 0 };
            let fits = mac + snaplen <= self.geo.frame;
            if !fits || snaplen < len || len + tag > MAX_FRAME {
                oversize += 1;
            } else {
                let Some(mut b) = cache.alloc() else { break };
                // SAFETY: as above; mac + snaplen <= frame keeps the data inside the slot.
                let data = unsafe { self.map.bytes(off + mac, snaplen) };
                if copy_in(
                    &mut b,
                    data,
                    vlan,
                    status & libc::TP_STATUS_CSUMNOTREADY != 0,
                ) {
                    csums += 1;
                }
                b.meta_mut().rx_ns = rx_ns;
                out.push(b);
                n += 1;
                bytes += (len + tag) as u64;
            }
            self.map
                .atomic_u32(off + P2_STATUS)
                .store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.next = (self.next + 1) % self.geo.slots;
        }
        self.shared.c.add(n as u64, bytes, oversize, csums);
        n
    }

    fn hand_over(&mut self) -> Option<RingPosition> {
        self.handed_over = true;
        Some(RingPosition::Slot(self.next as u64))
    }

    fn take_over(&mut self, at: RingPosition) {
        if let RingPosition::Slot(next) = at {
            self.next = if (next as usize) < self.geo.slots {
                next as usize
            } else {
                0
            };
        }
    }
}

impl Drop for AfPacketRxFrames {
    fn drop(&mut self) {
        // As the V3 queue: the socket outlives the queue (its counters), so stop it filling;
        // not when another process reads it now.
        if !self.handed_over {
            let _ = super::attach_drop_all(self.shared.fd.as_raw_fd());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_hold_a_frame_of_the_mtu_and_fill_whole_pages() {
        let g = Geometry::new(1500, 16384, 4096);
        assert_eq!((g.frame, g.block, g.per_block), (2048, 4096, 2));
        assert_eq!(g.slots, 16384);
        assert_eq!(g.bytes(), 32 << 20);
        assert_eq!(g.slot(3), 4096 + 2048);
        // A jumbo MTU takes 16 KiB slots, one to a block.
        let j = Geometry::new(9000, 100, 4096);
        assert_eq!(
            (j.frame, j.block, j.per_block, j.slots),
            (16384, 16384, 1, 100)
        );
    }
}
