//! `linerate bench atm`: the AAL5 SAR (`dataplane::atm`) on one core, against the cell rate it
//! must keep up with: 16 OC-12c ports, 16 x 1,412,830 = 22.6 M cells/s each way (the GRF 1600's
//! chassis full).
//!
//! Reassembly is fed cell trains of 64 cells in which `vcs` VCs take turns cell by cell (every
//! VC has a PDU open at once, the worst case for the per-VC state), as one port carrying every
//! module's traffic would see them; every PDU's CRC is checked and its buffer handed on and
//! freed. Segmentation turns PDUs (already in buffers, as the graph hands them over) into
//! trains of cells, writing trailers and CRCs. Both at 2-cell PDUs (the seed's 64-byte IP
//! packets) and 32-cell PDUs (1,518 bytes).

use std::time::Instant;

use dataplane::atm::reassembly::Reassembler;
use dataplane::atm::segmentation::Segmenter;
use dataplane::atm::{AtmPortState, TrafficClass, VcConfig};
use dataplane::{BufCache, PktBuf, Pool};
use packet::atm::{self, vc_key, CELL, PREFIX};

pub struct Opts {
    pub vcs: usize,
    pub seconds: f64,
}

/// One measurement.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub direction: &'static str,
    pub ip_bytes: usize,
    pub cells_per_pdu: usize,
    pub vcs: usize,
    pub cells_per_s: f64,
    pub pdus_per_s: f64,
    pub ns_per_cell: f64,
    /// OC-12c ports whose cell rate this is (1,412,830 cells/s each).
    pub oc12_ports: f64,
}

const OC12: f64 = 599.04e6 / 424.0;

fn port(vcs: usize) -> std::sync::Arc<AtmPortState> {
    AtmPortState::new(
        (0..vcs)
            .map(|i| VcConfig {
                vpi: (i / 1000) as u8,
                vci: 32 + (i % 1000) as u16,
                class: TrafficClass::Ubr,
            })
            .collect(),
        1_000_000_000,
    )
}

fn key(i: usize) -> u32 {
    vc_key((i / 1000) as u8, 32 + (i % 1000) as u16)
}

/// An LLC/SNAP SDU holding an IPv4 packet of `ip` bytes.
fn sdu(ip: usize, seed: usize) -> Vec<u8> {
    let mut s = atm::LLC_SNAP_IPV4.to_vec();
    s.extend((0..ip).map(|i| (i * 7 + seed) as u8));
    s
}

pub fn run(o: &Opts) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for ip in [64usize, 1518] {
        rows.push(reassembly(o, ip));
        rows.push(segmentation(o, ip));
    }
    Ok(rows)
}

fn row(dir: &'static str, ip: usize, vcs: usize, cells: u64, pdus: u64, s: f64) -> Row {
    let cps = cells as f64 / s;
    Row {
        direction: dir,
        ip_bytes: ip,
        cells_per_pdu: atm::cells_for(ip + 8),
        vcs,
        cells_per_s: cps,
        pdus_per_s: pdus as f64 / s,
        ns_per_cell: 1e9 / cps,
        oc12_ports: cps / OC12,
    }
}

fn reassembly(o: &Opts, ip: usize) -> Row {
    let pool = Pool::new(8192);
    let mut cache = BufCache::new(pool.clone());
    let st = port(o.vcs);
    let mut r = Reassembler::new(st.clone());
    // Each VC's PDU as cells, the VCs interleaved cell by cell, cut into 64-cell trains.
    let per: Vec<Vec<u8>> = (0..o.vcs)
        .map(|v| {
            let mut c = Vec::new();
            atm::segment(key(v), &sdu(ip, v), 0, &mut c).expect("fits");
            c
        })
        .collect();
    let n = per[0].len() / CELL;
    let mut stream = Vec::with_capacity(n * o.vcs * CELL);
    for c in 0..n {
        for p in &per {
            stream.extend_from_slice(&p[c * CELL..(c + 1) * CELL]);
        }
    }
    let trains: Vec<PktBuf> = stream
        .chunks(64 * CELL)
        .map(|t| {
            let mut b = cache.alloc().expect("buffers");
            b.fill(t);
            b
        })
        .collect();
    let (mut out, mut oam) = (Vec::with_capacity(4096), Vec::new());
    let (mut cells, mut pdus) = (0u64, 0u64);
    let t0 = Instant::now();
    let mut now = 0;
    while t0.elapsed().as_secs_f64() < o.seconds {
        for _ in 0..64 {
            for t in &trains {
                cells += r.push_train(t.data(), now, &mut cache, &mut out, &mut oam) as u64;
                pdus += out.len() as u64;
                cache.free_all(&mut out);
            }
            now += 1;
        }
    }
    let s = t0.elapsed().as_secs_f64();
    let errs = st
        .stats
        .iter()
        .map(|v| v.snapshot().crc_errors)
        .sum::<u64>();
    assert_eq!(errs, 0, "the benchmark's cells are whole");
    assert_eq!(pdus * n as u64, cells, "every PDU reassembled");
    row("reassembly", ip, o.vcs, cells, pdus, s)
}

fn segmentation(o: &Opts, ip: usize) -> Row {
    let pool = Pool::new(16384);
    let mut cache = BufCache::new(pool.clone());
    let st = port(o.vcs);
    let mut seg = Segmenter::new(st);
    let sdus: Vec<Vec<u8>> = (0..o.vcs).map(|v| sdu(ip, v)).collect();
    // The PDUs in buffers, as the graph hands them over; reset to their SDU after each use.
    let mut pdus: Vec<PktBuf> = (0..o.vcs)
        .map(|v| {
            let mut b = cache.alloc().expect("buffers");
            let mut d = atm::sunatm(key(v), atm::SUNATM_LLC).to_vec();
            d.extend_from_slice(&sdus[v]);
            b.fill(&d);
            b
        })
        .collect();
    let len = PREFIX + sdus[0].len();
    let mut trains = Vec::with_capacity(1024);
    let (mut cells, mut n) = (0u64, 0u64);
    let per = atm::cells_for(sdus[0].len()) as u64;
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < o.seconds {
        for _ in 0..64 {
            for b in pdus.iter_mut() {
                b.set_len(len);
                seg.segment(b, 0, &mut cache);
            }
            n += pdus.len() as u64;
            cells += per * pdus.len() as u64;
            seg.take_trains(&mut trains);
            cache.free_all(&mut trains);
        }
    }
    let s = t0.elapsed().as_secs_f64();
    row("segmentation", ip, o.vcs, cells, n, s)
}
