//! Shared-memory ports, in the manner of VPP's memif (copy mode): two processes on one host
//! exchange frames through rings in a file both map (under /dev/shm), so that a tester, or
//! another logical router, can be at the far end of a port without a kernel device between.
//!
//! A port has `queues` pairs of rings, one ring each way per queue; each ring has one producer
//! and one consumer (a worker of each process), so nothing is locked. The **server** makes the
//! file (and removes it when it goes); the **client** maps it and may come and go: the rings'
//! indices live in the file, so a client that restarts (a logical router's process replaced by
//! a new one) resumes where the old one stopped, and frames written meanwhile wait in the rings.
//!
//! Frames are copied into a ring's slot by the producer and out of it into a buffer by the
//! consumer: one copy each way, as AF_PACKET costs, with no system call. What the peer wrote is
//! untrusted: a length longer than a slot or indices that do not add up are counted as receive
//! errors and skipped, never followed. The raw memory is all in [`region`].

pub mod region;

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub use region::{Layout, Region};

use super::{RingPosition, RxQueue, TxQueue};
use crate::buffer::{BufCache, PktBuf, MAX_FRAME};

/// Which end of the port this process is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Makes the file; owns it.
    Server,
    /// Maps a file a server made.
    Client,
}

/// One process's end of a shared-memory port.
pub struct ShmPort {
    region: Arc<Region>,
    role: Role,
    /// Frames longer than a slot, dropped on the way out.
    pub oversize: Arc<AtomicU64>,
    /// Which queues' sending rings a worker holds ([`ShmPort::take_tx`]).
    tx_held: Arc<Mutex<Vec<bool>>>,
}

impl ShmPort {
    /// The server's end: makes the file at `path` with `layout` (replacing a stale one).
    pub fn serve(path: &Path, layout: Layout) -> io::Result<ShmPort> {
        Ok(ShmPort::new(Region::create(path, layout)?, Role::Server))
    }

    /// The client's end: maps the file the server made at `path`.
    pub fn connect(path: &Path) -> io::Result<ShmPort> {
        Ok(ShmPort::new(Region::attach(path)?, Role::Client))
    }

    /// The server's end taken over from the server process before this one (a hitless
    /// restart): the file, its rings and whatever waits in them stay as they are. The queues
    /// read and write from where the old process stopped once they start ([`RxQueue::take_over`],
    /// and a sending ring's first burst).
    pub fn adopt(path: &Path) -> io::Result<ShmPort> {
        Ok(ShmPort::new(Region::adopt(path)?, Role::Server))
    }

    /// Leaves the file to the process that adopts it: this end no longer removes it.
    pub fn disown(&self) {
        self.region.disown();
    }

    fn new(region: Region, role: Role) -> ShmPort {
        ShmPort {
            tx_held: Arc::new(Mutex::new(vec![false; region.layout.queues as usize])),
            region: Arc::new(region),
            role,
            oversize: Default::default(),
        }
    }

    /// The sending ring of the first queue no worker holds, held until the queue is dropped;
    /// None if every one is held (a ring has one producer).
    pub fn take_tx(&self) -> Option<ShmTx> {
        let mut held = self.tx_held.lock().unwrap_or_else(|e| e.into_inner());
        let q = held.iter().position(|h| !h)?;
        held[q] = true;
        drop(held);
        let mut tx = self.tx_queue(q as u32);
        tx.held = Some((self.tx_held.clone(), q));
        Some(tx)
    }

    pub fn path(&self) -> &Path {
        &self.region.path
    }

    pub fn layout(&self) -> Layout {
        self.region.layout
    }

    /// The ring this end sends on in queue `q`, and the one it receives on.
    fn rings(&self, q: u32) -> (usize, usize) {
        let (a, b) = (2 * q as usize, 2 * q as usize + 1);
        match self.role {
            Role::Server => (a, b),
            Role::Client => (b, a),
        }
    }

    /// Queue `q`'s receiving end (one per queue: it is the ring's only consumer).
    pub fn rx_queue(&self, q: u32) -> ShmRx {
        let ring = self.rings(q).1;
        ShmRx {
            tail: self.region.tail(ring).load(Ordering::Acquire),
            region: self.region.clone(),
            ring,
            errors: 0,
        }
    }

    /// Queue `q`'s sending end (one per queue: it is the ring's only producer).
    pub fn tx_queue(&self, q: u32) -> ShmTx {
        let ring = self.rings(q).0;
        ShmTx {
            head: 0,
            started: false,
            region: self.region.clone(),
            ring,
            oversize: self.oversize.clone(),
            held: None,
        }
    }
}

/// A queue's receiving ring. Indices count frames ever moved and wrap at 2^64 (a peer may
/// start them anywhere); only their difference is read.
pub struct ShmRx {
    region: Arc<Region>,
    ring: usize,
    /// Frames read so far (this end's copy of the ring's tail).
    tail: u64,
    errors: u64,
}

impl RxQueue for ShmRx {
    fn rx_burst(&mut self, cache: &mut BufCache, out: &mut Vec<PktBuf>, max: usize) -> usize {
        let r = &*self.region;
        let slots = r.layout.slots as u64;
        let head = r.head(self.ring).load(Ordering::Acquire);
        let avail = head.wrapping_sub(self.tail);
        if avail > slots {
            // Indices that cannot be (the peer wrote garbage, or a new server made the file
            // over): whatever the ring holds is lost; start again from the producer's index.
            self.errors += 1;
            self.tail = head;
            r.tail(self.ring).store(head, Ordering::Release);
            return 0;
        }
        let limit = (r.layout.slot_bytes as usize).min(MAX_FRAME);
        let mut read = 0;
        let mut got = 0;
        while read < avail.min(max as u64) {
            let slot = self.tail.wrapping_add(read) as u32;
            let len = r.slot_len(self.ring, slot) as usize;
            if len > limit {
                self.errors += 1;
                read += 1;
                continue;
            }
            // No buffer: the frame waits in the ring for the next burst.
            let Some(mut b) = cache.alloc() else { break };
            b.set_len(len);
            r.read_slot(self.ring, slot, b.data_mut());
            out.push(b);
            read += 1;
            got += 1;
        }
        if read > 0 {
            self.tail = self.tail.wrapping_add(read);
            r.tail(self.ring).store(self.tail, Ordering::Release);
        }
        got
    }

    fn take_rx_errors(&mut self) -> u64 {
        std::mem::take(&mut self.errors)
    }

    fn hand_over(&mut self) -> Option<RingPosition> {
        // The tail is in the file after every burst.
        Some(RingPosition::InRing)
    }

    fn take_over(&mut self, _at: RingPosition) {
        self.tail = self.region.tail(self.ring).load(Ordering::Acquire);
    }
}

/// A queue's sending ring.
pub struct ShmTx {
    region: Arc<Region>,
    ring: usize,
    /// Frames written so far (this end's copy of the ring's head).
    head: u64,
    /// The head is read from the ring at the first burst, not when the queue is made: a new
    /// process makes its queues while the old one still sends (a hitless restart).
    started: bool,
    oversize: Arc<AtomicU64>,
    /// The port's record of held rings and this one's queue, when taken by `take_tx`.
    held: Option<(Arc<Mutex<Vec<bool>>>, usize)>,
}

impl Drop for ShmTx {
    fn drop(&mut self) {
        if let Some((held, q)) = &self.held {
            held.lock().unwrap_or_else(|e| e.into_inner())[*q] = false;
        }
    }
}

impl TxQueue for ShmTx {
    fn tx_burst(&mut self, pkts: &mut Vec<PktBuf>, cache: &mut BufCache) -> usize {
        let r = &*self.region;
        if !self.started {
            self.head = r.head(self.ring).load(Ordering::Acquire);
            self.started = true;
        }
        let slots = r.layout.slots as u64;
        let tail = r.tail(self.ring).load(Ordering::Acquire);
        let used = self.head.wrapping_sub(tail);
        if used > slots {
            // The consumer's index is past ours or far behind it: nothing is sent until it
            // makes sense again (the frames stay with the caller, counted as not taken).
            return 0;
        }
        let n = pkts.len().min((slots - used) as usize);
        for b in pkts.drain(..n) {
            if r.write_slot(self.ring, self.head as u32, b.data()) {
                self.head = self.head.wrapping_add(1);
            } else {
                self.oversize.fetch_add(1, Ordering::Relaxed);
            }
            cache.free(b);
        }
        if n > 0 {
            r.head(self.ring).store(self.head, Ordering::Release);
        }
        n
    }
}

#[cfg(test)]
mod tests;
