//! AAL5 segmentation: PDUs to cells, per VC, shaped to each VC's contract.
//!
//! Reads: PDU buffers (SunATM pseudo-header naming the VC, then the SDU), the port's VCs and
//! their traffic classes, the time. Writes: cell trains (whole cells in send order) for the
//! port's cell queue. Counts per VC: PDUs and cells sent, shaper drops; per port: PDUs for an
//! unknown VC.
//!
//! The padding and trailer are written in place behind the SDU and the CRC-32 run once over
//! the PDU (a cell at a time, [`super::crc`]); each 48-byte piece then goes out behind one of the VC's two precomputed headers
//! (more cells follow / last cell). A UBR VC's cells go straight into the train being filled. A
//! shaped VC's cells wait in its queue, and a timer heap ordered by each VC's next conforming
//! time releases them ([`Segmenter::run`], called on every transmit burst and when the worker
//! is idle), so a VC never leaves faster than its contract and the others are not held back.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use packet::atm::{self, CELL, CELL_PAYLOAD, PREFIX};

use super::crc::CrcEngine;
use super::shaper::Contract;
use super::{AtmPortState, TRAIN_CELLS};
use crate::buffer::{BufCache, PktBuf};

/// Cells a shaped VC may hold waiting (about 250 KB): PDUs beyond it are dropped and counted.
pub const SHAPER_QUEUE_CELLS: usize = 4096;
/// The cell delay variation tolerance of shaped VCs: the scheduler may serve a VC this late and
/// still keep its rate.
pub const CDVT_PS: u64 = 200_000_000;

struct Shaped {
    contract: Contract,
    queue: VecDeque<[u8; CELL]>,
    scheduled: bool,
}

pub struct Segmenter {
    port: Arc<AtmPortState>,
    /// Per VC: the header of a cell that more follow, and of the last one.
    headers: Box<[[[u8; 5]; 2]]>,
    shaped: Box<[Option<Shaped>]>,
    /// Shaped VCs with cells waiting, by the time their next cell conforms.
    timers: BinaryHeap<Reverse<(u64, u32)>>,
    /// The train being filled, and the full ones not yet taken.
    train: Option<PktBuf>,
    full: Vec<PktBuf>,
    crc: CrcEngine,
}

impl Segmenter {
    pub fn new(port: Arc<AtmPortState>) -> Self {
        let headers = port
            .vcs
            .iter()
            .map(|v| {
                let h = |pti| {
                    atm::CellHeader {
                        vpi: v.vpi,
                        vci: v.vci,
                        pti,
                        ..Default::default()
                    }
                    .emit()
                };
                [h(0), h(atm::PTI_LAST)]
            })
            .collect();
        let shaped = port
            .vcs
            .iter()
            .map(|v| {
                Contract::new(v.class, CDVT_PS).map(|contract| Shaped {
                    contract,
                    queue: VecDeque::new(),
                    scheduled: false,
                })
            })
            .collect();
        Segmenter {
            port,
            headers,
            shaped,
            timers: BinaryHeap::new(),
            train: None,
            full: Vec::new(),
            crc: CrcEngine::detect(),
        }
    }

    pub fn state(&self) -> &Arc<AtmPortState> {
        &self.port
    }

    /// Segments one PDU (freeing its buffer); false if it was dropped (unknown VC, too large, a
    /// shaper queue full, no buffer for a train).
    pub fn push_pdu(&mut self, mut b: PktBuf, now_ps: u64, cache: &mut BufCache) -> bool {
        let ok = self.segment(&mut b, now_ps, cache);
        cache.free(b);
        ok
    }

    /// Segments the PDU in `b` (its trailer written in place behind the SDU), leaving the
    /// buffer to the caller; false if it was dropped.
    pub fn segment(&mut self, b: &mut PktBuf, now_ps: u64, cache: &mut BufCache) -> bool {
        if b.len() < PREFIX {
            self.port.unknown_vc.fetch_add(1, Relaxed);
            return false;
        }
        let Some(vc) = self.port.vc(atm::sunatm_vc(b.data())) else {
            self.port.unknown_vc.fetch_add(1, Relaxed);
            return false;
        };
        let stats = &self.port.stats[vc];
        let sdu = b.len() - PREFIX;
        let cells = atm::cells_for(sdu);
        if sdu > atm::MAX_SDU || !b.set_len(PREFIX + cells * CELL_PAYLOAD) {
            stats.oversize.fetch_add(1, Relaxed);
            return false;
        }
        let pdu = &mut b.data_mut()[PREFIX..];
        atm::trailer_without_crc(pdu, sdu, 0);
        let mut crc = self.crc.start();
        for p in pdu.chunks_exact(CELL_PAYLOAD) {
            crc = self.crc.cell(crc, p);
        }
        let n = pdu.len();
        pdu[n - 4..].copy_from_slice(&self.crc.crc_of_sealed(crc).to_be_bytes());
        let pdu = &b.data()[PREFIX..];
        let [more, last] = self.headers[vc];
        if let Some(s) = self.shaped[vc].as_mut() {
            if s.queue.len() + cells > SHAPER_QUEUE_CELLS {
                stats.shaper_drops.fetch_add(1, Relaxed);
                return false;
            }
            for (i, p) in pdu.chunks_exact(CELL_PAYLOAD).enumerate() {
                let mut c = [0u8; CELL];
                c[..5].copy_from_slice(if i + 1 == cells { &last } else { &more });
                c[5..].copy_from_slice(p);
                s.queue.push_back(c);
            }
            if !s.scheduled {
                s.scheduled = true;
                s.contract.idle_until(now_ps);
                self.timers
                    .push(Reverse((s.contract.eligible(), vc as u32)));
            }
        } else {
            for (i, p) in pdu.chunks_exact(CELL_PAYLOAD).enumerate() {
                let h = if i + 1 == cells { &last } else { &more };
                if !Self::put(&mut self.train, &mut self.full, cache, h, p) {
                    // No buffer for a train: the rest of the PDU cannot go; its cells so far
                    // will fail the far end's CRC, as a cell loss would.
                    self.port.no_buffers.fetch_add(1, Relaxed);
                    return false;
                }
            }
        }
        stats.tx_pdus.fetch_add(1, Relaxed);
        stats.tx_cells.fetch_add(cells as u64, Relaxed);
        true
    }

    /// Appends one cell (header and payload) to the train being filled.
    #[inline(always)]
    fn put(
        train: &mut Option<PktBuf>,
        full: &mut Vec<PktBuf>,
        cache: &mut BufCache,
        header: &[u8],
        payload: &[u8],
    ) -> bool {
        if train.is_none() {
            let Some(mut t) = cache.alloc() else {
                return false;
            };
            t.reset();
            *train = Some(t);
        }
        let t = train.as_mut().expect("just made");
        let at = t.len();
        t.set_len(at + CELL);
        let d = &mut t.data_mut()[at..];
        d[..5].copy_from_slice(header);
        d[5..].copy_from_slice(payload);
        if at + CELL == TRAIN_CELLS * CELL {
            full.push(train.take().expect("present"));
        }
        true
    }

    /// Queues a whole cell (an OAM answer) unshaped.
    pub fn push_cell(&mut self, cell: &[u8; CELL], cache: &mut BufCache) -> bool {
        Self::put(
            &mut self.train,
            &mut self.full,
            cache,
            &cell[..5],
            &cell[5..],
        )
    }

    /// Releases the shaped VCs' cells that conform by `now_ps`.
    pub fn run(&mut self, now_ps: u64, cache: &mut BufCache) {
        while let Some(&Reverse((at, vc))) = self.timers.peek() {
            if at > now_ps {
                break;
            }
            self.timers.pop();
            let s = self.shaped[vc as usize]
                .as_mut()
                .expect("only shaped VCs are timed");
            while s.contract.eligible() <= now_ps {
                let Some(c) = s.queue.front() else { break };
                if !Self::put(&mut self.train, &mut self.full, cache, &c[..5], &c[5..]) {
                    break;
                }
                s.queue.pop_front();
                s.contract.sent(now_ps);
            }
            if s.queue.is_empty() {
                s.scheduled = false;
            } else {
                self.timers
                    .push(Reverse((s.contract.eligible().max(now_ps + 1), vc)));
            }
        }
    }

    /// Cells waiting in shaper queues.
    pub fn queued_cells(&self) -> usize {
        self.shaped.iter().flatten().map(|s| s.queue.len()).sum()
    }

    /// Moves the trains made so far (the partly filled one too) to `out`.
    pub fn take_trains(&mut self, out: &mut impl Extend<PktBuf>) {
        if let Some(t) = self.train.take() {
            self.full.push(t);
        }
        out.extend(self.full.drain(..));
    }

    /// Frees everything held (the queue is being dropped).
    pub fn clear(&mut self, cache: &mut BufCache) {
        if let Some(t) = self.train.take() {
            cache.free(t);
        }
        cache.free_all(&mut self.full);
        for s in self.shaped.iter_mut().flatten() {
            s.queue.clear();
            s.scheduled = false;
        }
        self.timers.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::atm::reassembly::Reassembler;
    use crate::atm::{TrafficClass, VcConfig};
    use crate::buffer::Pool;
    use packet::atm::vc_key;

    fn pdu(cache: &mut BufCache, key: u32, sdu: &[u8]) -> PktBuf {
        let mut b = cache.alloc().unwrap();
        let mut v = atm::sunatm(key, atm::SUNATM_LLC).to_vec();
        v.extend_from_slice(sdu);
        b.fill(&v);
        b
    }

    #[test]
    fn segmented_pdus_reassemble_to_what_went_in() {
        let pool = Pool::new(1024);
        let mut cache = BufCache::new(pool.clone());
        let vcs = vec![
            VcConfig {
                vpi: 0,
                vci: 32,
                class: TrafficClass::Ubr,
            },
            VcConfig {
                vpi: 2,
                vci: 40,
                class: TrafficClass::Ubr,
            },
        ];
        let st = crate::atm::AtmPortState::new(vcs, 1_000_000_000);
        let mut s = Segmenter::new(st.clone());
        let mut r = Reassembler::new(st.clone());
        let sizes = [0usize, 1, 40, 41, 64, 1500, 9000];
        for (i, &n) in sizes.iter().enumerate() {
            let key = if i % 2 == 0 {
                vc_key(0, 32)
            } else {
                vc_key(2, 40)
            };
            let sdu: Vec<u8> = (0..n).map(|j| (j + i) as u8).collect();
            assert!(s.push_pdu(pdu(&mut cache, key, &sdu), 0, &mut cache));
        }
        let mut trains = Vec::new();
        s.take_trains(&mut trains);
        let (mut out, mut oam) = (Vec::new(), Vec::new());
        for t in trains.drain(..) {
            r.push_train(t.data(), 0, &mut cache, &mut out, &mut oam);
            cache.free(t);
        }
        assert_eq!(out.len(), sizes.len());
        for (i, (b, &n)) in out.iter().zip(&sizes).enumerate() {
            let sdu: Vec<u8> = (0..n).map(|j| (j + i) as u8).collect();
            assert_eq!(&b.data()[PREFIX..], &sdu[..], "pdu {i}");
        }
        let total: usize = sizes.iter().map(|&n| atm::cells_for(n)).sum();
        assert_eq!(
            st.stats[0].tx_cells.load(Relaxed) + st.stats[1].tx_cells.load(Relaxed),
            total as u64
        );
        cache.free_all(&mut out);
        cache.flush();
        assert_eq!(pool.available(), pool.capacity());
    }

    #[test]
    fn a_cbr_vc_leaves_at_its_rate_while_ubr_goes_at_once() {
        let pool = Pool::new(4096);
        let mut cache = BufCache::new(pool.clone());
        let vcs = vec![
            VcConfig {
                vpi: 0,
                vci: 32,
                class: TrafficClass::Cbr { pcr: 10_000 },
            },
            VcConfig {
                vpi: 0,
                vci: 33,
                class: TrafficClass::Ubr,
            },
        ];
        let st = crate::atm::AtmPortState::new(vcs, 1_000_000_000);
        let mut s = Segmenter::new(st.clone());
        // 100 PDUs of 2 cells each on both VCs at time 0.
        for _ in 0..100 {
            s.push_pdu(pdu(&mut cache, vc_key(0, 32), &[1u8; 64]), 0, &mut cache);
            s.push_pdu(pdu(&mut cache, vc_key(0, 33), &[2u8; 64]), 0, &mut cache);
        }
        // Served every 50 us for 10 ms: the CBR VC may send 100 cells (+ its tolerance).
        let mut cells = [0usize; 2];
        let mut trains = Vec::new();
        let mut now = 0u64;
        while now <= 10_000_000_000 {
            s.run(now, &mut cache);
            s.take_trains(&mut trains);
            for t in trains.drain(..) {
                for c in t.data().chunks(CELL) {
                    cells[(atm::header_vc(c) & 1) as usize] += 1;
                }
                cache.free(t);
            }
            now += 50_000_000;
        }
        assert_eq!(cells[1], 200, "UBR: every cell at once");
        assert!(
            (100..=103).contains(&cells[0]),
            "CBR: {} cells in 10 ms",
            cells[0]
        );
        assert_eq!(s.queued_cells(), 200 - cells[0]);
        s.clear(&mut cache);
        cache.flush();
        assert_eq!(pool.available(), pool.capacity());
    }
}
