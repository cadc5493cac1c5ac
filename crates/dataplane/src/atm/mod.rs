//! ATM: AAL5 segmentation and reassembly and per-VC traffic shaping, the work an ATM port
//! adapter's SAR chip does, between a port that carries cells and the graph, which sees PDUs.
//!
//! A cell-carrying port moves *cell trains*: buffers holding whole 53-byte cells in wire order,
//! cells of any VC interleaved (a span of the link's cell stream, as a SAR's DMA delivers it).
//! [`reassembly::Reassembler`] turns trains into PDUs, each a buffer holding the SunATM
//! pseudo-header (the VC) and the SDU; [`segmentation::Segmenter`] turns such PDUs back into
//! trains, shaping the VCs that have a traffic contract. [`port::AtmRx`] and [`port::AtmTx`]
//! wrap a port's queues with them, so a worker reads and writes PDUs; the graph's `atm-input`
//! node takes them from there.
//!
//! The wire formats (cells, HEC, the AAL5 trailer and CRC, OAM, RFC 2684) are `packet::atm`.

pub mod crc;
pub mod port;
pub mod reassembly;
pub mod segmentation;
pub mod shaper;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

pub use packet::atm::{vc_key, CELL};

/// Cells in one train buffer at most (3,392 bytes: a train fills about a page).
pub const TRAIN_CELLS: usize = 64;

/// A VC's service category and contract (ATM Forum TM 4.0): what the segmenter shapes it to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TrafficClass {
    /// Unspecified bit rate: cells leave as soon as they are made.
    Ubr,
    /// Constant bit rate: at most `pcr` cells per second, evenly spaced.
    Cbr { pcr: u32 },
    /// Variable bit rate: at most `pcr` cells/s, `scr` on average, bursts of up to `mbs` cells
    /// at the peak rate.
    Vbr { pcr: u32, scr: u32, mbs: u32 },
}

/// A configured permanent virtual circuit of a port.
#[derive(Clone, Debug, PartialEq)]
pub struct VcConfig {
    pub vpi: u8,
    pub vci: u16,
    pub class: TrafficClass,
}

impl VcConfig {
    pub fn key(&self) -> u32 {
        vc_key(self.vpi, self.vci)
    }
}

/// A VC's counters, shared by the queues of its port and read by `show` and metrics.
#[derive(Default, Debug)]
pub struct VcStats {
    pub rx_pdus: AtomicU64,
    pub rx_cells: AtomicU64,
    pub rx_bytes: AtomicU64,
    pub tx_pdus: AtomicU64,
    pub tx_cells: AtomicU64,
    /// PDUs whose CRC-32 was wrong (a cell lost, damaged or from another PDU).
    pub crc_errors: AtomicU64,
    /// PDUs whose trailer length does not fit the cells received.
    pub length_errors: AtomicU64,
    /// Partial PDUs discarded because their last cell did not come in time.
    pub timeouts: AtomicU64,
    /// PDUs larger than a buffer (the interface's MTU), discarded.
    pub oversize: AtomicU64,
    /// F5 loopback requests answered.
    pub oam_loopbacks: AtomicU64,
    /// OAM cells with a bad CRC-10, and other OAM or resource-management cells, not acted on.
    pub oam_dropped: AtomicU64,
    /// PDUs the shaper's queue could not hold.
    pub shaper_drops: AtomicU64,
}

impl VcStats {
    pub fn snapshot(&self) -> VcCounts {
        VcCounts {
            rx_pdus: self.rx_pdus.load(Relaxed),
            rx_cells: self.rx_cells.load(Relaxed),
            rx_bytes: self.rx_bytes.load(Relaxed),
            tx_pdus: self.tx_pdus.load(Relaxed),
            tx_cells: self.tx_cells.load(Relaxed),
            crc_errors: self.crc_errors.load(Relaxed),
            length_errors: self.length_errors.load(Relaxed),
            timeouts: self.timeouts.load(Relaxed),
            oversize: self.oversize.load(Relaxed),
            oam_loopbacks: self.oam_loopbacks.load(Relaxed),
            oam_dropped: self.oam_dropped.load(Relaxed),
            shaper_drops: self.shaper_drops.load(Relaxed),
        }
    }
}

/// A VC's counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VcCounts {
    pub rx_pdus: u64,
    pub rx_cells: u64,
    pub rx_bytes: u64,
    pub tx_pdus: u64,
    pub tx_cells: u64,
    pub crc_errors: u64,
    pub length_errors: u64,
    pub timeouts: u64,
    pub oversize: u64,
    pub oam_loopbacks: u64,
    pub oam_dropped: u64,
    pub shaper_drops: u64,
}

/// A port's VCs and their counters, and the port-wide cell counters.
#[derive(Debug)]
pub struct AtmPortState {
    pub vcs: Vec<VcConfig>,
    pub stats: Box<[VcStats]>,
    /// Cells whose header error check failed.
    pub hec_errors: AtomicU64,
    /// Cells on a VC that is not configured.
    pub unknown_vc: AtomicU64,
    /// PDUs lost because no buffer was free when their first cell came.
    pub no_buffers: AtomicU64,
    /// Cell trains whose length is not a whole number of cells (a driver fault).
    pub bad_trains: AtomicU64,
    /// How long a partial PDU may wait for its last cell.
    pub reassembly_timeout_ns: u64,
    index: VcIndex,
    /// OAM answers from the receive queues for whichever transmit queue runs next (rare: a
    /// flag keeps the lock off the transmit path while there are none).
    oam: Mutex<Vec<[u8; CELL]>>,
    oam_waiting: AtomicBool,
}

/// OAM answers that may wait for a transmit queue; more are dropped (the far end asks again).
const OAM_OUTBOX: usize = 256;

impl AtmPortState {
    pub fn new(vcs: Vec<VcConfig>, reassembly_timeout_ns: u64) -> Arc<Self> {
        let index = VcIndex::new(vcs.iter().map(VcConfig::key));
        Arc::new(AtmPortState {
            stats: vcs.iter().map(|_| VcStats::default()).collect(),
            vcs,
            hec_errors: AtomicU64::new(0),
            unknown_vc: AtomicU64::new(0),
            bad_trains: AtomicU64::new(0),
            no_buffers: AtomicU64::new(0),
            reassembly_timeout_ns,
            index,
            oam: Mutex::new(Vec::new()),
            oam_waiting: AtomicBool::new(false),
        })
    }

    /// Hands OAM cells (loopback answers) to the port's transmit side, emptying `cells`.
    pub fn send_oam(&self, cells: &mut Vec<[u8; CELL]>) {
        let mut q = self.oam.lock().unwrap_or_else(|e| e.into_inner());
        let room = OAM_OUTBOX.saturating_sub(q.len());
        q.extend(cells.drain(..).take(room));
        cells.clear();
        self.oam_waiting.store(true, Relaxed);
    }

    /// Takes the OAM cells waiting to be sent into `out`; false (without locking) if none.
    #[inline]
    pub fn take_oam(&self, out: &mut Vec<[u8; CELL]>) -> bool {
        if !self.oam_waiting.load(Relaxed) {
            return false;
        }
        let mut q = self.oam.lock().unwrap_or_else(|e| e.into_inner());
        self.oam_waiting.store(false, Relaxed);
        out.append(&mut q);
        true
    }

    /// The index of VC `key` among [`AtmPortState::vcs`].
    #[inline(always)]
    pub fn vc(&self, key: u32) -> Option<usize> {
        self.index.get(key)
    }
}

/// VC key to VC index: open addressing over a power-of-two table at most half full.
#[derive(Clone, Debug)]
pub struct VcIndex {
    slots: Box<[(u32, u32)]>,
    mask: usize,
}

const EMPTY: u32 = u32::MAX;

impl VcIndex {
    pub fn new(keys: impl Iterator<Item = u32>) -> Self {
        let keys: Vec<u32> = keys.collect();
        let size = (keys.len() * 2).next_power_of_two().max(16);
        let mut slots = vec![(EMPTY, 0u32); size].into_boxed_slice();
        let mask = size - 1;
        for (i, k) in keys.into_iter().enumerate() {
            let mut s = Self::hash(k) & mask;
            while slots[s].0 != EMPTY && slots[s].0 != k {
                s = (s + 1) & mask;
            }
            slots[s] = (k, i as u32);
        }
        VcIndex { slots, mask }
    }

    #[inline(always)]
    fn hash(k: u32) -> usize {
        (k.wrapping_mul(0x9E37_79B1) >> 8) as usize
    }

    #[inline(always)]
    pub fn get(&self, k: u32) -> Option<usize> {
        let mut s = Self::hash(k) & self.mask;
        loop {
            let (key, v) = self.slots[s];
            if key == k {
                return Some(v as usize);
            }
            if key == EMPTY {
                return None;
            }
            s = (s + 1) & self.mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_finds_every_vc_and_nothing_else() {
        let keys: Vec<u32> = (0..3000u32)
            .map(|i| vc_key((i % 7) as u8, 32 + i as u16))
            .collect();
        let ix = VcIndex::new(keys.iter().copied());
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(ix.get(k), Some(i));
        }
        assert_eq!(ix.get(vc_key(200, 5)), None);
    }
}
