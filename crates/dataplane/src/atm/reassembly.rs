//! AAL5 reassembly: cells to PDUs, per VC.
//!
//! Reads: cell trains (whole 53-byte cells, any VCs interleaved). Writes: one buffer per good
//! PDU (SunATM pseudo-header with the VC, then the SDU), and the answers to F5 loopback requests
//! (cells, for the port's transmit side). Counts per VC: PDUs, cells, bytes, CRC errors, length
//! errors, oversize PDUs, timeouts, loopbacks; per port: HEC errors and unknown VCs.
//!
//! Each VC's partial PDU is written straight into the buffer it will leave in, and its CRC-32 is
//! run over each cell payload as that cell is copied (the bytes are in cache once), so the last
//! cell's check is one compare against the residue. A cell that fails its HEC is discarded
//! (detection mode); the PDU it belonged to then fails its CRC or length check, or its
//! reassembly times out. One reassembler per receive queue: cells of one VC arrive on one queue.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use packet::atm::{self, CELL, CELL_HEADER, CELL_PAYLOAD, PREFIX};

use super::crc::{Crc, CrcEngine};
use super::AtmPortState;
use crate::buffer::{BufCache, PktBuf, HEADROOM, MAX_FRAME};

/// The largest SDU a buffer holds after the pseudo-header: the MTU of an ATM interface here.
pub const MAX_SDU: usize = MAX_FRAME - PREFIX;

/// A VC's PDU in progress.
#[derive(Default)]
struct Partial {
    buf: Option<PktBuf>,
    /// The CRC of the cells so far (meaningful while `buf` holds a PDU).
    crc: Crc,
    cells: u32,
    started_ns: u64,
    /// The PDU outgrew a buffer: its cells are dropped until its last one.
    discarding: bool,
}

pub struct Reassembler {
    port: Arc<AtmPortState>,
    partial: Box<[Partial]>,
    /// VCs with a PDU in progress (the timeout sweep is skipped when 0).
    open: usize,
    last_sweep_ns: u64,
    crc: CrcEngine,
}

/// How often partial PDUs are checked for their timeout.
const SWEEP_EVERY_NS: u64 = 1_000_000;

impl Reassembler {
    pub fn new(port: Arc<AtmPortState>) -> Self {
        Reassembler {
            partial: (0..port.vcs.len()).map(|_| Partial::default()).collect(),
            port,
            open: 0,
            last_sweep_ns: 0,
            crc: CrcEngine::detect(),
        }
    }

    pub fn state(&self) -> &Arc<AtmPortState> {
        &self.port
    }

    /// Reassembles the cells of `train`; completed PDUs are appended to `out`, loopback answers
    /// to `oam`. Returns the cells read.
    pub fn push_train(
        &mut self,
        train: &[u8],
        now_ns: u64,
        cache: &mut BufCache,
        out: &mut impl Extend<PktBuf>,
        oam: &mut Vec<[u8; CELL]>,
    ) -> usize {
        if !train.len().is_multiple_of(CELL) {
            self.port.bad_trains.fetch_add(1, Relaxed);
        }
        let mut n = 0;
        for cell in train.chunks_exact(CELL) {
            n += 1;
            self.push_cell(cell, now_ns, cache, out, oam);
        }
        n
    }

    #[inline(always)]
    fn push_cell(
        &mut self,
        cell: &[u8],
        now_ns: u64,
        cache: &mut BufCache,
        out: &mut impl Extend<PktBuf>,
        oam: &mut Vec<[u8; CELL]>,
    ) {
        if atm::hec(cell) != cell[4] {
            self.port.hec_errors.fetch_add(1, Relaxed);
            return;
        }
        let key = atm::header_vc(cell);
        let Some(vc) = self.port.vc(key) else {
            self.port.unknown_vc.fetch_add(1, Relaxed);
            return;
        };
        let pti = atm::header_pti(cell);
        let payload = &cell[CELL_HEADER..];
        if pti & 0b100 != 0 {
            return self.oam_cell(vc, pti, cell, oam);
        }
        let stats = &self.port.stats[vc];
        let p = &mut self.partial[vc];
        if p.buf.is_none() && !p.discarding {
            let Some(mut b) = cache.alloc() else {
                // No buffer: the PDU is lost, as on a NIC whose ring is empty.
                p.discarding = pti & atm::PTI_LAST == 0;
                self.port.no_buffers.fetch_add(1, Relaxed);
                return;
            };
            b.reset();
            b.set_len(PREFIX);
            b.data_mut()
                .copy_from_slice(&atm::sunatm(key, atm::SUNATM_LLC));
            p.buf = Some(b);
            p.crc = self.crc.start();
            p.cells = 0;
            p.started_ns = now_ns;
            self.open += 1;
        }
        p.cells += 1;
        if let Some(b) = p.buf.as_mut() {
            let at = b.len();
            if at + CELL_PAYLOAD > MAX_FRAME {
                // Larger than a buffer: drop it, and the rest of its cells.
                stats.oversize.fetch_add(1, Relaxed);
                cache.free(p.buf.take().expect("present"));
                self.open -= 1;
                p.discarding = true;
            } else {
                b.set_len(at + CELL_PAYLOAD);
                b.data_mut()[at..].copy_from_slice(payload);
                p.crc = self.crc.cell(p.crc, payload);
            }
        }
        if pti & atm::PTI_LAST == 0 {
            return;
        }
        // The last cell: check and hand on the PDU, or count why not.
        let cells = std::mem::take(&mut p.cells);
        stats.rx_cells.fetch_add(u64::from(cells), Relaxed);
        if std::mem::take(&mut p.discarding) {
            return;
        }
        let Some(mut b) = p.buf.take() else { return };
        self.open -= 1;
        if self.crc.residue(p.crc) != atm::AAL5_RESIDUE {
            stats.crc_errors.fetch_add(1, Relaxed);
            return cache.free(b);
        }
        let len = usize::from(u16::from_be_bytes([payload[42], payload[43]]));
        if atm::cells_for(len) != cells as usize {
            stats.length_errors.fetch_add(1, Relaxed);
            return cache.free(b);
        }
        b.set_len(PREFIX + len);
        stats.rx_pdus.fetch_add(1, Relaxed);
        stats.rx_bytes.fetch_add(len as u64, Relaxed);
        out.extend(std::iter::once(b));
    }

    #[cold]
    fn oam_cell(&mut self, vc: usize, pti: u8, cell: &[u8], oam: &mut Vec<[u8; CELL]>) {
        let stats = &self.port.stats[vc];
        let f5 = pti == atm::PTI_OAM_SEGMENT || pti == atm::PTI_OAM_END_TO_END;
        match atm::parse_oam(&cell[CELL_HEADER..]) {
            Ok(atm::Oam::LoopbackRequest { .. }) if f5 => {
                let mut c = [0u8; CELL];
                c.copy_from_slice(cell);
                atm::answer_loopback(&mut c);
                oam.push(c);
                stats.oam_loopbacks.fetch_add(1, Relaxed);
            }
            _ => {
                stats.oam_dropped.fetch_add(1, Relaxed);
            }
        }
    }

    /// Discards PDUs whose first cell came more than the port's timeout ago (checked once a
    /// millisecond at most).
    pub fn expire(&mut self, now_ns: u64, cache: &mut BufCache) {
        if self.open == 0 || now_ns.saturating_sub(self.last_sweep_ns) < SWEEP_EVERY_NS {
            return;
        }
        self.last_sweep_ns = now_ns;
        let timeout = self.port.reassembly_timeout_ns;
        for (vc, p) in self.partial.iter_mut().enumerate() {
            if p.buf.is_some() && now_ns.saturating_sub(p.started_ns) > timeout {
                cache.free(p.buf.take().expect("present"));
                p.cells = 0;
                self.open -= 1;
                self.port.stats[vc].timeouts.fetch_add(1, Relaxed);
            }
        }
    }

    /// Frees every partial PDU (the queue is being dropped).
    pub fn clear(&mut self, cache: &mut BufCache) {
        for p in self.partial.iter_mut() {
            if let Some(b) = p.buf.take() {
                cache.free(b);
            }
            *p = Partial::default();
        }
        self.open = 0;
    }
}

const _: () = assert!(HEADROOM >= PREFIX);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::atm::{TrafficClass, VcConfig};
    use crate::buffer::Pool;
    use packet::atm::vc_key;

    fn port(vcs: &[(u8, u16)]) -> Arc<AtmPortState> {
        AtmPortState::new(
            vcs.iter()
                .map(|&(vpi, vci)| VcConfig {
                    vpi,
                    vci,
                    class: TrafficClass::Ubr,
                })
                .collect(),
            10_000_000,
        )
    }

    fn cells_of(key: u32, sdu: &[u8]) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        atm::segment(key, sdu, 0, &mut v).unwrap();
        v.chunks(CELL).map(|c| c.to_vec()).collect()
    }

    #[test]
    fn interleaved_vcs_reassemble_and_damage_is_counted_by_kind() {
        let pool = Pool::new(256);
        let mut cache = BufCache::new(pool.clone());
        let st = port(&[(0, 32), (1, 100)]);
        let mut r = Reassembler::new(st.clone());
        let a: Vec<u8> = (0..1500u32).map(|i| i as u8).collect();
        let b: Vec<u8> = (0..64u32).map(|i| (i * 3) as u8).collect();
        let ca = cells_of(vc_key(0, 32), &a);
        let cb = cells_of(vc_key(1, 100), &b);
        // Interleave: b's two cells between a's.
        let mut train = Vec::new();
        for (i, c) in ca.iter().enumerate() {
            train.extend_from_slice(c);
            if i == 3 || i == 10 {
                train.extend_from_slice(&cb[if i == 3 { 0 } else { 1 }]);
            }
        }
        let mut out = Vec::new();
        let mut oam = Vec::new();
        assert_eq!(r.push_train(&train, 0, &mut cache, &mut out, &mut oam), 34);
        assert_eq!(out.len(), 2);
        assert_eq!(&out[0].data()[PREFIX..], &b[..]);
        assert_eq!(atm::sunatm_vc(out[0].data()), vc_key(1, 100));
        assert_eq!(&out[1].data()[PREFIX..], &a[..]);
        cache.free_all(&mut out);

        // A lost middle cell: the CRC fails.
        let mut t = Vec::new();
        for (i, c) in ca.iter().enumerate() {
            if i != 5 {
                t.extend_from_slice(c);
            }
        }
        r.push_train(&t, 0, &mut cache, &mut out, &mut oam);
        assert!(out.is_empty());
        assert_eq!(st.stats[0].crc_errors.load(Relaxed), 1);
        // A damaged header: HEC error, and the PDU then fails too.
        let mut t = ca.concat();
        t[CELL * 2 + 1] ^= 0x20;
        r.push_train(&t, 0, &mut cache, &mut out, &mut oam);
        assert!(out.is_empty());
        assert_eq!(st.hec_errors.load(Relaxed), 1);
        assert_eq!(st.stats[0].crc_errors.load(Relaxed), 2);
        // A trailer whose length disagrees with the cells (CRC recomputed to match).
        let mut pdu = vec![0u8; 96];
        pdu[..64].copy_from_slice(&b);
        atm::seal_pdu(&mut pdu, 64, 0);
        pdu[90..92].copy_from_slice(&10u16.to_be_bytes());
        let crc = atm::aal5_crc(&pdu[..92]);
        pdu[92..].copy_from_slice(&crc.to_be_bytes());
        let mut t = Vec::new();
        for (i, p) in pdu.chunks(48).enumerate() {
            let h = atm::CellHeader {
                vpi: 1,
                vci: 100,
                pti: if i == 1 { 1 } else { 0 },
                ..Default::default()
            };
            t.extend_from_slice(&h.emit());
            t.extend_from_slice(p);
        }
        r.push_train(&t, 0, &mut cache, &mut out, &mut oam);
        assert!(out.is_empty());
        assert_eq!(st.stats[1].length_errors.load(Relaxed), 1);
        // An unknown VC.
        r.push_train(
            &cells_of(vc_key(9, 9), &b).concat(),
            0,
            &mut cache,
            &mut out,
            &mut oam,
        );
        assert_eq!(st.unknown_vc.load(Relaxed), 2);
        // Nothing left in progress, no buffer leaked.
        assert_eq!(r.open, 0);
        cache.flush();
        assert_eq!(pool.available(), pool.capacity());
    }

    #[test]
    fn a_pdu_missing_its_last_cell_times_out_and_loopbacks_are_answered() {
        let pool = Pool::new(64);
        let mut cache = BufCache::new(pool.clone());
        let st = port(&[(0, 32)]);
        let mut r = Reassembler::new(st.clone());
        let cells = cells_of(vc_key(0, 32), &[7u8; 200]);
        let (mut out, mut oam) = (Vec::new(), Vec::new());
        r.push_train(&cells[..3].concat(), 1_000, &mut cache, &mut out, &mut oam);
        r.expire(5_000_000, &mut cache);
        assert_eq!(st.stats[0].timeouts.load(Relaxed), 0);
        r.expire(20_000_000, &mut cache);
        assert_eq!(st.stats[0].timeouts.load(Relaxed), 1);
        let req = atm::oam_loopback_cell(vc_key(0, 32), true, true, 42);
        r.push_train(&req, 0, &mut cache, &mut out, &mut oam);
        assert_eq!(oam.len(), 1);
        assert_eq!(
            atm::parse_oam(&oam[0][5..]),
            Ok(atm::Oam::LoopbackReply { tag: 42 })
        );
        assert_eq!(&oam[0][..5], &req[..5], "answered on the same VC and flow");
        // A reply is not answered again.
        r.push_train(&oam[0].clone(), 0, &mut cache, &mut out, &mut oam);
        assert_eq!(oam.len(), 1);
        assert_eq!(st.stats[0].oam_dropped.load(Relaxed), 1);
        cache.flush();
        assert_eq!(pool.available(), pool.capacity());
    }

    #[test]
    fn an_sdu_larger_than_a_buffer_is_dropped_whole() {
        let pool = Pool::new(64);
        let mut cache = BufCache::new(pool.clone());
        let st = port(&[(0, 32)]);
        let mut r = Reassembler::new(st.clone());
        let big = vec![1u8; MAX_SDU + 100];
        let (mut out, mut oam) = (Vec::new(), Vec::new());
        r.push_train(
            &cells_of(vc_key(0, 32), &big).concat(),
            0,
            &mut cache,
            &mut out,
            &mut oam,
        );
        assert!(out.is_empty());
        assert_eq!(st.stats[0].oversize.load(Relaxed), 1);
        // The next PDU is whole again.
        r.push_train(
            &cells_of(vc_key(0, 32), &[5u8; 100]).concat(),
            0,
            &mut cache,
            &mut out,
            &mut oam,
        );
        assert_eq!(out.len(), 1);
        cache.free_all(&mut out);
        cache.flush();
        assert_eq!(pool.available(), pool.capacity());
    }
}
