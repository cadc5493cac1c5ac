//! The tester's ATM ports: its test frames carried over a PVC as RFC 2684 LLC/SNAP PDUs in AAL5
//! cells, as the seed's OC-12 generators sent them, and reassembled on the way back.
//!
//! [`AtmHostTx`] takes the generator's Ethernet frames, replaces each Ethernet header with the
//! PVC's pseudo-header and LLC/SNAP header (the IP packet is not touched), and segments the PDU
//! into cell trains for the port; [`AtmHostRx`] reassembles what the port sends back and puts
//! an Ethernet header in front of each packet again, so the analyzer reads them as any frame.
//! The SAR is the router's own queues (`dataplane::atm::port`), run here on the tester's core.
//!
//! Sizes: a test frame of `s` bytes (Ethernet, FCS counted) carries an IP packet of `s - 18`
//! bytes, which travels as `cells_for(s - 18 + 8)` cells. [`Wire::Atm`] paces frames by that
//! count against the port's cell rate: OC-12's SONET payload, 599.04 Mbit/s, is 1,412,830 cells
//! a second, and 100% load is every cell slot filled (the seed's "usable OC-12 bandwidth").

use std::sync::Arc;

use dataplane::atm::port::{AtmRx, AtmTx};
use dataplane::atm::{AtmPortState, TrafficClass, VcConfig};
use dataplane::port::{RxQueue, TxQueue};
use dataplane::{BufCache, PktBuf, Pool};
use packet::atm::{self, PREFIX};

/// OC-12c's cell rate: the STS-12c synchronous payload (599.04 Mbit/s) in 53-byte cells.
pub const OC12_CELLS_PER_S: f64 = 599.04e6 / (53.0 * 8.0);

/// The cell rate of a SONET port of line rate `bits_per_s` (OC-3c 155.52, OC-12c 622.08
/// Mbit/s): its synchronous payload, 26/27 of the line less the path overhead (599.04 of 622.08).
pub fn sonet_cells_per_s(bits_per_s: f64) -> f64 {
    bits_per_s * (599.04 / 622.08) / (53.0 * 8.0)
}

/// How a tester port's frames go on the wire, for pacing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Wire {
    /// Ethernet: each frame plus preamble and gap at the port's bit rate.
    Ethernet,
    /// ATM: each frame's IP packet as an LLC/SNAP AAL5 PDU, in cells at `cells_per_s`.
    Atm { cells_per_s: f64 },
}

/// The cells a test frame of `size` bytes (Ethernet, FCS counted) takes as an LLC/SNAP PDU.
pub fn cells_per_frame(size: f64) -> f64 {
    let ip = (size - 18.0).max(0.0) as usize;
    atm::cells_for(ip + 8) as f64
}

impl Wire {
    /// Frames per second at 100% of a port of `bits_per_s` (Ethernet) for frames of mean size
    /// `size`.
    pub fn line_fps(&self, bits_per_s: f64, size: f64) -> f64 {
        match *self {
            Wire::Ethernet => crate::load::line_rate_fps(bits_per_s, size),
            Wire::Atm { cells_per_s } => cells_per_s / cells_per_frame(size),
        }
    }
}

/// The tester's end of one PVC: its VC, UBR (the generator paces), and a long reassembly
/// timeout (a trial's tail may sit in a ring).
fn state(vpi: u8, vci: u16) -> Arc<AtmPortState> {
    AtmPortState::new(
        vec![VcConfig {
            vpi,
            vci,
            class: TrafficClass::Ubr,
        }],
        1_000_000_000,
    )
}

/// The generator's frames out as PDUs on one PVC, through the router's own segmenting queue.
pub struct AtmHostTx {
    inner: AtmTx,
    prefix: [u8; PREFIX],
}

impl AtmHostTx {
    /// Frames sent on `inner` as cells on VC `vpi`/`vci`.
    pub fn new(inner: Box<dyn TxQueue>, vpi: u8, vci: u16, pool: Arc<Pool>) -> Self {
        AtmHostTx {
            inner: AtmTx::new(state(vpi, vci), inner, pool),
            prefix: atm::sunatm(atm::vc_key(vpi, vci), atm::SUNATM_LLC),
        }
    }

    /// The frame's IP packet behind the PVC's headers, in place; false if it carries no IP.
    fn to_pdu(&self, b: &mut PktBuf) -> bool {
        let d = b.data();
        if d.len() < 14 {
            return false;
        }
        let llc = match [d[12], d[13]] {
            [0x08, 0x00] => &atm::LLC_SNAP_IPV4,
            [0x86, 0xdd] => &atm::LLC_SNAP_IPV6,
            _ => return false,
        };
        b.pull_front(14);
        if !b.push_front(PREFIX + 8) {
            return false;
        }
        let d = b.data_mut();
        d[..PREFIX].copy_from_slice(&self.prefix);
        d[PREFIX..PREFIX + 8].copy_from_slice(llc);
        true
    }
}

impl TxQueue for AtmHostTx {
    fn tx_burst(&mut self, pkts: &mut Vec<PktBuf>, cache: &mut BufCache) -> usize {
        // Frames that carry no IP cannot be PDUs of an LLC/SNAP PVC: they are dropped here.
        let mut i = 0;
        while i < pkts.len() {
            if self.to_pdu(&mut pkts[i]) {
                i += 1;
            } else {
                cache.free(pkts.swap_remove(i));
            }
        }
        self.inner.tx_burst(pkts, cache)
    }

    fn flush(&mut self) {
        self.inner.flush();
    }

    fn unsent(&self) -> usize {
        self.inner.unsent()
    }

    fn take_back_unsent(&mut self) -> usize {
        self.inner.take_back_unsent()
    }
}

/// What the router sends on one PVC, reassembled by the router's own queue, as Ethernet frames
/// again for the analyzer.
pub struct AtmHostRx {
    inner: AtmRx,
    pdus: Vec<PktBuf>,
}

impl AtmHostRx {
    /// Cells received on `inner` for VC `vpi`/`vci`, reassembled.
    pub fn new(inner: Box<dyn RxQueue>, vpi: u8, vci: u16, pool: Arc<Pool>) -> Self {
        AtmHostRx {
            inner: AtmRx::new(state(vpi, vci), inner, pool),
            pdus: Vec::new(),
        }
    }

    /// The VC's counters (CRC errors, timeouts: what the router sent damaged).
    pub fn state(&self) -> &Arc<AtmPortState> {
        self.inner.state()
    }
}

impl RxQueue for AtmHostRx {
    fn rx_burst(&mut self, cache: &mut BufCache, out: &mut Vec<PktBuf>, max: usize) -> usize {
        self.inner.rx_burst(cache, &mut self.pdus, max);
        let mut n = 0;
        for mut b in self.pdus.drain(..) {
            let ethertype = match atm::parse_llc(&b.data()[PREFIX..]) {
                Some((atm::LlcPayload::Ipv4, 8)) => [0x08, 0x00],
                Some((atm::LlcPayload::Ipv6, 8)) => [0x86, 0xdd],
                _ => {
                    cache.free(b);
                    continue;
                }
            };
            b.pull_front(PREFIX + 8);
            b.push_front(14);
            let d = b.data_mut();
            d[..12].fill(0);
            d[12..14].copy_from_slice(&ethertype);
            out.push(b);
            n += 1;
        }
        n
    }

    fn take_rx_errors(&mut self) -> u64 {
        self.inner.take_rx_errors()
    }

    fn is_exhausted(&self) -> bool {
        self.inner.is_exhausted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane::port::mem::ring;

    #[test]
    fn frames_cross_as_cells_and_come_back_as_the_same_packets() {
        let pool = Pool::new(2048);
        let mut cache = BufCache::new(pool.clone());
        let (t, r) = ring(1024);
        let mut tx = AtmHostTx::new(Box::new(t), 0, 32, pool.clone());
        let mut rx = AtmHostRx::new(Box::new(r), 0, 32, pool.clone());
        let mut frames = Vec::new();
        for size in [64usize, 82, 1518, 1536] {
            let mut f = vec![0u8; size - 4];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[16..18].copy_from_slice(&((size - 18) as u16).to_be_bytes());
            for (i, x) in f[34..].iter_mut().enumerate() {
                *x = i as u8;
            }
            let mut b = cache.alloc().unwrap();
            b.fill(&f);
            frames.push(b);
        }
        let want: Vec<Vec<u8>> = frames.iter().map(|b| b.data()[14..].to_vec()).collect();
        assert_eq!(tx.tx_burst(&mut frames, &mut cache), 4);
        let mut out = Vec::new();
        rx.rx_burst(&mut cache, &mut out, 256);
        assert_eq!(out.len(), 4);
        for (b, w) in out.iter().zip(&want) {
            assert_eq!(&b.data()[12..14], &[0x08, 0x00]);
            assert_eq!(&b.data()[14..], &w[..]);
        }
        assert_eq!(rx.state().stats[0].snapshot().crc_errors, 0);
        // 64 B: IP 46 + LLC 8 + trailer 8 -> 2 cells; 82 B (a 64-byte IP packet) 2; 1518 B
        // (IP 1500) 32; 1536 B (IP 1518) 32.
        assert_eq!(cells_per_frame(64.0), 2.0);
        assert_eq!(cells_per_frame(82.0), 2.0);
        assert_eq!(cells_per_frame(1518.0), 32.0);
        assert_eq!(cells_per_frame(1536.0), 32.0);
        let w = Wire::Atm {
            cells_per_s: OC12_CELLS_PER_S,
        };
        // 1,518-byte IP packets at 100%: 44,151 a second, 536.2 Mbit/s of IP.
        let fps = w.line_fps(0.0, 1536.0);
        assert!((fps - 44_150.9).abs() < 1.0, "{fps}");
        cache.free_all(&mut out);
    }
}
