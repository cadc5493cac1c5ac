//! A cell-carrying port's queues as a worker sees them: PDUs in, PDUs out.
//!
//! [`AtmRx`] reads cell trains from the port's receive queue and hands on the PDUs its
//! reassembler completes; [`AtmTx`] segments and shapes the PDUs it is given and writes cell
//! trains to the port's transmit queue. The receive side's F5 loopback answers reach the
//! transmit side through the port's OAM outbox ([`AtmPortState::send_oam`]), as one adapter's
//! SAR answers them, whichever queues the workers hold.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use packet::atm::CELL;

use super::reassembly::Reassembler;
use super::segmentation::Segmenter;
use super::AtmPortState;
use crate::buffer::{BufCache, PktBuf, Pool};
use crate::port::{RxQueue, TxQueue};

/// Trains read from the port per burst.
const TRAINS_PER_BURST: usize = 32;
/// Trains made but refused by the port's queue that are held for the next try; beyond this the
/// transmit side refuses PDUs (the worker counts them as a full transmit queue).
const MAX_PENDING_TRAINS: usize = 256;

pub struct AtmRx {
    inner: Box<dyn RxQueue>,
    reassembler: Reassembler,
    trains: Vec<PktBuf>,
    ready: VecDeque<PktBuf>,
    oam: Vec<[u8; CELL]>,
    start: Instant,
    /// For the buffers still held when the queue is dropped.
    spare: BufCache,
}

pub struct AtmTx {
    inner: Box<dyn TxQueue>,
    segmenter: Segmenter,
    pending: Vec<PktBuf>,
    oam: Vec<[u8; CELL]>,
    /// The transmit side's own buffers for trains (`flush` is given no cache).
    cache: BufCache,
    start: Instant,
}

impl AtmRx {
    /// Wraps a port's cell receive queue `rx` with a reassembler over the port's VCs.
    pub fn new(state: Arc<AtmPortState>, rx: Box<dyn RxQueue>, pool: Arc<Pool>) -> Self {
        AtmRx {
            inner: rx,
            reassembler: Reassembler::new(state),
            trains: Vec::with_capacity(TRAINS_PER_BURST),
            ready: VecDeque::new(),
            oam: Vec::new(),
            start: Instant::now(),
            spare: BufCache::new(pool),
        }
    }

    /// The port's VCs and counters.
    pub fn state(&self) -> &Arc<AtmPortState> {
        self.reassembler.state()
    }
}

impl Drop for AtmRx {
    fn drop(&mut self) {
        self.reassembler.clear(&mut self.spare);
        for b in self.ready.drain(..) {
            self.spare.free(b);
        }
    }
}

impl AtmTx {
    /// Wraps a port's cell transmit queue `tx` with a segmenter and shaper over the port's VCs.
    pub fn new(state: Arc<AtmPortState>, tx: Box<dyn TxQueue>, pool: Arc<Pool>) -> Self {
        AtmTx {
            inner: tx,
            segmenter: Segmenter::new(state),
            pending: Vec::new(),
            oam: Vec::new(),
            cache: BufCache::new(pool),
            start: Instant::now(),
        }
    }
}

impl RxQueue for AtmRx {
    fn rx_burst(&mut self, cache: &mut BufCache, out: &mut Vec<PktBuf>, max: usize) -> usize {
        let now_ns = self.start.elapsed().as_nanos() as u64;
        if self.ready.len() < max {
            self.trains.clear();
            self.inner
                .rx_burst(cache, &mut self.trains, TRAINS_PER_BURST);
            for t in self.trains.drain(..) {
                self.reassembler.push_train(
                    t.data(),
                    now_ns,
                    cache,
                    &mut self.ready,
                    &mut self.oam,
                );
                cache.free(t);
            }
            if !self.oam.is_empty() {
                self.reassembler.state().send_oam(&mut self.oam);
            }
            self.reassembler.expire(now_ns, cache);
        }
        let n = self.ready.len().min(max);
        out.extend(self.ready.drain(..n));
        n
    }

    fn take_rx_errors(&mut self) -> u64 {
        self.inner.take_rx_errors()
    }

    fn is_exhausted(&self) -> bool {
        self.inner.is_exhausted() && self.ready.is_empty()
    }
}

impl AtmTx {
    fn now_ps(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64 * 1000
    }

    /// Runs the shaper at `now` (ps), collects the trains made and offers them to the port.
    fn push_out(&mut self, now: u64) {
        if self.segmenter.state().take_oam(&mut self.oam) {
            for c in self.oam.drain(..) {
                self.segmenter.push_cell(&c, &mut self.cache);
            }
        }
        self.segmenter.run(now, &mut self.cache);
        self.segmenter.take_trains(&mut self.pending);
        if !self.pending.is_empty() {
            self.inner.tx_burst(&mut self.pending, &mut self.cache);
        }
    }
}

impl TxQueue for AtmTx {
    fn tx_burst(&mut self, pkts: &mut Vec<PktBuf>, cache: &mut BufCache) -> usize {
        let now = self.now_ps();
        if self.pending.len() >= MAX_PENDING_TRAINS {
            self.push_out(now);
            if self.pending.len() >= MAX_PENDING_TRAINS {
                return 0;
            }
        }
        let n = pkts.len();
        for b in pkts.drain(..) {
            // Dropped PDUs are counted per VC by the segmenter.
            self.segmenter.push_pdu(b, now, cache);
        }
        self.push_out(now);
        n
    }

    fn flush(&mut self) {
        self.push_out(self.now_ps());
        self.inner.flush();
        self.cache.flush();
    }

    fn unsent(&self) -> usize {
        self.inner.unsent() + self.pending.len()
    }

    /// Frees the trains the port has not taken; returns the PDUs whose last cell they held
    /// (those never arrive whole).
    fn take_back_unsent(&mut self) -> usize {
        let mut pdus = 0;
        for t in self.pending.drain(..) {
            pdus += t
                .data()
                .chunks_exact(CELL)
                .filter(|c| packet::atm::header_pti(c) & packet::atm::PTI_LAST != 0)
                .count();
            self.cache.free(t);
        }
        self.cache.flush();
        pdus + self.inner.take_back_unsent()
    }
}

impl Drop for AtmTx {
    fn drop(&mut self) {
        self.segmenter.clear(&mut self.cache);
        self.cache.free_all(&mut self.pending);
    }
}
