//! In-process rings: a single-producer single-consumer ring of buffer handles, so a frame moves
//! from the tester to a worker (and back) without a copy. The ring's release/acquire indices make
//! the producer's writes to the frame visible to the consumer.

use super::{RxQueue, TxQueue};
use crate::buffer::{BufCache, PktBuf};

/// The sending end of a ring.
pub struct RingTx(rtrb::Producer<PktBuf>);
/// The receiving end of a ring.
pub struct RingRx(rtrb::Consumer<PktBuf>);

/// A ring of `capacity` frames.
pub fn ring(capacity: usize) -> (RingTx, RingRx) {
    let (p, c) = rtrb::RingBuffer::new(capacity);
    (RingTx(p), RingRx(c))
}

impl RingTx {
    /// Moves as many frames from the front of `pkts` into the ring as fit; returns how many.
    #[inline]
    pub fn push_burst(&mut self, pkts: &mut Vec<PktBuf>) -> usize {
        let n = pkts.len().min(self.0.slots());
        if n == 0 {
            return 0;
        }
        let chunk = self
            .0
            .write_chunk_uninit(n)
            .expect("slots() said there was room");
        let moved = chunk.fill_from_iter(pkts.drain(..n));
        debug_assert_eq!(moved, n);
        n
    }

    pub fn free_slots(&self) -> usize {
        self.0.slots()
    }
}

impl RingRx {
    /// Moves up to `max` frames from the ring to `out`; returns how many.
    #[inline]
    pub fn pop_burst(&mut self, out: &mut Vec<PktBuf>, max: usize) -> usize {
        let n = self.0.slots().min(max);
        if n == 0 {
            return 0;
        }
        let chunk = self
            .0
            .read_chunk(n)
            .expect("slots() said there were frames");
        out.extend(chunk);
        n
    }

    pub fn len(&self) -> usize {
        self.0.slots()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True once the sending end is gone: nothing more will arrive after what is in the ring.
    pub fn is_abandoned(&self) -> bool {
        self.0.is_abandoned()
    }
}

impl RxQueue for RingRx {
    fn rx_burst(&mut self, _cache: &mut BufCache, out: &mut Vec<PktBuf>, max: usize) -> usize {
        self.pop_burst(out, max)
    }
}

impl TxQueue for RingTx {
    fn tx_burst(&mut self, pkts: &mut Vec<PktBuf>, _cache: &mut BufCache) -> usize {
        self.push_burst(pkts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::Pool;

    #[test]
    fn frames_cross_threads_in_order_and_full_rings_refuse() {
        let pool = Pool::new(4096);
        let (mut tx, mut rx) = ring(1024);
        let mut cache = BufCache::new(pool.clone());
        let mut v: Vec<_> = (0..1500u32)
            .map(|i| {
                let mut b = cache.alloc().unwrap();
                b.fill(&i.to_be_bytes());
                b
            })
            .collect();
        assert_eq!(tx.push_burst(&mut v), 1024, "the ring takes what fits");
        assert_eq!(v.len(), 476, "the rest stays with the caller");
        let h = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut out = Vec::new();
            while got.len() < 1500 {
                out.clear();
                rx.pop_burst(&mut out, 256);
                got.extend(
                    out.drain(..)
                        .map(|b| u32::from_be_bytes(b.data().try_into().unwrap())),
                );
            }
            got
        });
        while !v.is_empty() {
            tx.push_burst(&mut v);
        }
        let got = h.join().unwrap();
        assert_eq!(got, (0..1500).collect::<Vec<_>>());
    }
}
