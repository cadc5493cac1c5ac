//! ATM ports end to end: cells into one mem port, AAL5 reassembly, routing between PVCs, and
//! segmentation out of another, checked cell by cell; OAM loopback; what is dropped and why.

mod common;

use std::time::{Duration, Instant};

use common::*;
use dataplane::DropReason;
use packet::atm::{self, vc_key, CELL};

const CONFIG: &str = r#"
router: { workers: 1 }
ports:
  - { name: a0, driver: mem, media: atm }
  - { name: a1, driver: mem, media: atm, reassembly-timeout-ms: 50 }
  - { name: e0, driver: mem }
interfaces:
  - { name: a0.32, port: a0, atm: { vpi: 0, vci: 32 }, ipv4: [10.0.0.1/30], ipv6: ["2001:db8:a::1/64"] }
  - { name: a0.33, port: a0, atm: { vpi: 0, vci: 33 }, ipv4: [10.0.1.1/30] }
  - { name: a1.40, port: a1, atm: { vpi: 1, vci: 40, class: cbr, pcr: 1000000 }, ipv4: [10.1.0.1/30], ipv6: ["2001:db8:b::1/64"] }
  - { name: a1.41, port: a1, atm: { vpi: 1, vci: 41, encap: vc-mux-ipv4 }, ipv4: [10.2.0.1/30] }
  - { name: e0, port: e0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24] }
neighbors:
  - { interface: e0, ip: 192.0.2.2, mac: "02:00:00:00:00:02" }
routes:
  - { prefix: 172.16.0.0/16, via: 10.1.0.2 }
  - { prefix: 172.17.0.0/16, via: 10.2.0.2 }
  - { prefix: 172.18.0.0/16, via: 192.0.2.2 }
  - { prefix: "2001:db8:ff::/48", via: "2001:db8:b::2" }
"#;

/// An IPv4 packet (no link header) to `dst` with `payload` bytes of UDP.
fn ip4(dst: [u8; 4], ttl: u8, payload: usize) -> Vec<u8> {
    ip4_frame(dst, ttl, payload, false, 17, 7)[14..].to_vec()
}

/// Cells of `sdu` on VC `key`.
fn cells(key: u32, sdu: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    atm::segment(key, sdu, 0, &mut v).unwrap();
    v
}

/// Pushes cell trains into port `p` and returns the cells that come out of each port within
/// `wait` (Ethernet frames for the Ethernet port).
fn exchange(bed: &mut Bed, p: usize, trains: &[Vec<u8>], wait: Duration) -> Vec<Vec<u8>> {
    let mut v: Vec<_> = trains
        .iter()
        .map(|t| {
            let mut b = bed.cache.alloc().unwrap();
            assert!(b.fill(t));
            b
        })
        .collect();
    while !v.is_empty() {
        bed.peers[p].to_router[0].push_burst(&mut v);
    }
    let deadline = Instant::now() + wait;
    let mut out = vec![Vec::new(); bed.peers.len()];
    while Instant::now() < deadline {
        for (i, peer) in bed.peers.iter_mut().enumerate() {
            let mut bufs = Vec::new();
            peer.from_router.pop_burst(&mut bufs, usize::MAX);
            for b in bufs {
                out[i].extend_from_slice(b.data());
                if i == 2 {
                    out[i].push(0xEE); // frame separator for the Ethernet port
                }
                bed.cache.free(b);
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    out
}

/// Reassembles a cell stream into (VC, SDU) pairs, checking every HEC and CRC.
fn reassemble(stream: &[u8]) -> Vec<(u32, Vec<u8>)> {
    assert_eq!(stream.len() % CELL, 0);
    let mut pdus = Vec::new();
    let mut partial: std::collections::HashMap<u32, Vec<u8>> = Default::default();
    for c in stream.chunks(CELL) {
        let h = atm::CellHeader::parse(c).expect("HEC");
        let key = vc_key(h.vpi, h.vci);
        if h.pti & 0b100 != 0 {
            pdus.push((key | 1 << 31, c.to_vec()));
            continue;
        }
        let p = partial.entry(key).or_default();
        p.extend_from_slice(&c[5..]);
        if h.pti & 1 == 1 {
            let pdu = partial.remove(&key).unwrap();
            assert_eq!(atm::crc32_update(!0, &pdu), atm::AAL5_RESIDUE, "AAL5 CRC");
            let t = atm::Trailer::parse(&pdu).unwrap();
            pdus.push((key, pdu[..t.len as usize].to_vec()));
        }
    }
    assert!(partial.is_empty(), "no PDU left half sent");
    pdus
}

#[test]
fn ipv4_and_ipv6_are_routed_between_pvcs_with_llc_snap_and_vc_mux() {
    let mut bed = Bed::from_text(CONFIG);
    let mut sdu4 = atm::LLC_SNAP_IPV4.to_vec();
    let pkt = ip4([172, 16, 1, 1], 64, 1000);
    sdu4.extend_from_slice(&pkt);
    let mut sdu_mux = atm::LLC_SNAP_IPV4.to_vec();
    sdu_mux.extend_from_slice(&ip4([172, 17, 0, 9], 9, 30));
    let mut sdu_eth = atm::LLC_SNAP_IPV4.to_vec();
    sdu_eth.extend_from_slice(&ip4([172, 18, 0, 9], 20, 46));
    let v6 = ip6_frame(v6("2001:db8:ff::5"), 30, 100)[14..].to_vec();
    let mut sdu6 = atm::LLC_SNAP_IPV6.to_vec();
    sdu6.extend_from_slice(&v6);
    // Two PDUs after each other on each of two VCs, the VCs interleaved cell by cell in one
    // train, as a link carries them (AAL5 never interleaves PDUs within a VC).
    let streams: Vec<Vec<u8>> = vec![
        [cells(vc_key(0, 32), &sdu4), cells(vc_key(0, 32), &sdu6)].concat(),
        [
            cells(vc_key(0, 33), &sdu_mux),
            cells(vc_key(0, 33), &sdu_eth),
        ]
        .concat(),
    ];
    let mut train = Vec::new();
    let most = streams.iter().map(|s| s.len()).max().unwrap();
    for at in (0..most).step_by(CELL) {
        for s in &streams {
            if at < s.len() {
                train.extend_from_slice(&s[at..at + CELL]);
            }
        }
    }
    let out = exchange(&mut bed, 0, &[train], Duration::from_millis(200));
    let pdus = reassemble(&out[1]);
    assert_eq!(pdus.len(), 3, "{pdus:?}");
    let by_vc = |k| {
        pdus.iter()
            .filter(|p| p.0 == k)
            .map(|p| &p.1)
            .collect::<Vec<_>>()
    };
    // LLC/SNAP VC 1/40: the IPv4 packet, TTL 63, checksum right, payload untouched.
    let llc = by_vc(vc_key(1, 40));
    assert_eq!(llc.len(), 2);
    let got4 = llc
        .iter()
        .find(|s| s[6..8] == [0x08, 0x00])
        .expect("IPv4 on 1/40");
    assert_eq!(&got4[..8], &atm::LLC_SNAP_IPV4);
    assert_eq!(got4[8 + 8], 63);
    assert!(header_ok(&got4[8..28]));
    assert_eq!(&got4[28..], &pkt[20..]);
    let got6 = llc
        .iter()
        .find(|s| s[6..8] == [0x86, 0xdd])
        .expect("IPv6 on 1/40");
    assert_eq!(got6[8 + 7], 29, "hop limit decremented");
    assert_eq!(&got6[8 + 8..], &v6[8..]);
    // VC-multiplexed 1/41: the bare IPv4 packet.
    let mux = by_vc(vc_key(1, 41));
    assert_eq!(mux.len(), 1);
    assert_eq!(mux[0][0], 0x45);
    assert_eq!(mux[0][8], 8);
    // And the Ethernet port got its packet with the neighbour's MAC.
    assert_eq!(&out[2][0..6], &[2, 0, 0, 0, 0, 2]);
    assert_eq!(out[2][14 + 8], 19);
    let s = bed.snapshot();
    assert_eq!(s.rx_packets[0], 4, "four PDUs reassembled");
}

#[test]
fn damaged_pdus_unknown_vcs_and_non_ip_are_counted_and_loopbacks_answered() {
    let mut bed = Bed::from_text(CONFIG);
    let mut sdu = atm::LLC_SNAP_IPV4.to_vec();
    sdu.extend_from_slice(&ip4([172, 16, 1, 1], 64, 200));
    let good = cells(vc_key(0, 32), &sdu);
    // A lost cell (CRC), a damaged header (HEC), an unknown VC, an LLC header that is not IP.
    let mut lost = good.clone();
    lost.drain(CELL..2 * CELL);
    let mut hec = good.clone();
    hec[1] ^= 0x10;
    let unknown = cells(vc_key(3, 99), &sdu);
    let mut arp = vec![0xAA, 0xAA, 0x03, 0, 0, 0, 0x08, 0x06];
    arp.extend_from_slice(&[0u8; 28]);
    let not_ip = cells(vc_key(0, 32), &arp);
    let oam = atm::oam_loopback_cell(vc_key(0, 32), true, true, 77).to_vec();
    let out = exchange(
        &mut bed,
        0,
        &[lost, hec, unknown, not_ip, oam],
        Duration::from_millis(200),
    );
    assert!(out[1].is_empty(), "nothing forwarded");
    // The loopback answer came back out of a0 on the same VC.
    assert_eq!(out[0].len(), CELL);
    assert_eq!(atm::header_vc(&out[0]), vc_key(0, 32));
    assert_eq!(
        atm::parse_oam(&out[0][5..]),
        Ok(atm::Oam::LoopbackReply { tag: 77 })
    );
    let st = bed
        .running
        .as_ref()
        .unwrap()
        .atm_port(0)
        .expect("a0 is ATM");
    let vc = st.stats[0].snapshot();
    // The lost cell's PDU, and the HEC-damaged one's (its first cell dropped, the other four
    // fail the CRC).
    assert_eq!(vc.crc_errors, 2);
    assert_eq!(vc.oam_loopbacks, 1);
    assert_eq!(st.hec_errors.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(
        st.unknown_vc.load(std::sync::atomic::Ordering::Relaxed),
        atm::cells_for(sdu.len()) as u64
    );
    let s = bed.snapshot();
    assert_eq!(s.drop_count(DropReason::AtmNotIp), 1);
}

#[test]
fn a_partial_pdu_times_out() {
    let mut bed = Bed::from_text(CONFIG);
    let mut sdu = atm::LLC_SNAP_IPV4.to_vec();
    sdu.extend_from_slice(&ip4([10, 0, 0, 1], 64, 500));
    let c = cells(vc_key(1, 40), &sdu);
    // Three cells of a PDU into a1 (50 ms timeout), then nothing.
    exchange(
        &mut bed,
        1,
        &[c[..3 * CELL].to_vec()],
        Duration::from_millis(150),
    );
    // The sweep runs on receive bursts: give it one more (an idle cell train of a good PDU).
    exchange(
        &mut bed,
        1,
        std::slice::from_ref(&c),
        Duration::from_millis(100),
    );
    let st = bed.running.as_ref().unwrap().atm_port(1).unwrap();
    assert_eq!(st.stats[0].snapshot().timeouts, 1);
    // The whole PDU after it was reassembled whole (it is UDP to the router's own address,
    // consumed there).
    assert_eq!(st.stats[0].snapshot().rx_pdus, 1);
    assert_eq!(st.stats[0].snapshot().crc_errors, 0);
}

#[test]
fn show_atm_pvc_reports_each_vc_and_the_port() {
    let dir = std::env::temp_dir().join(format!("linerate-atm-show-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (core, mut peers) = core_with(&dir, CONFIG);
    let mut sdu = atm::LLC_SNAP_IPV4.to_vec();
    sdu.extend_from_slice(&ip4([172, 16, 1, 1], 64, 200));
    let mut train = cells(vc_key(0, 32), &sdu);
    train.extend(cells(vc_key(0, 32), &sdu));
    let mut bad = cells(vc_key(0, 32), &sdu);
    bad[CELL + 10] ^= 1; // a payload bit: CRC error
    train.extend(bad);
    let mut hec = cells(vc_key(0, 33), &sdu);
    hec[2] ^= 0x40;
    train.extend(hec);
    let pool = core.lock("test").runtime.pool.clone();
    let mut cache = dataplane::BufCache::new(pool);
    let mut b = cache.alloc().unwrap();
    assert!(b.fill(&train));
    let mut v = vec![b];
    while !v.is_empty() {
        peers[0].to_router[0].push_burst(&mut v);
    }
    std::thread::sleep(Duration::from_millis(100));
    let view = core.atm_pvcs();
    assert_eq!(view.ports.len(), 2, "a0 and a1");
    assert_eq!(view.ports[0].hec_errors, 1);
    let a032 = view.pvcs.iter().find(|p| p.interface == "a0.32").unwrap();
    assert_eq!(
        (a032.vpi, a032.vci, a032.encap.as_str()),
        (0, 32, "llc-snap")
    );
    assert_eq!(a032.rx_pdus, 2);
    assert_eq!(a032.crc_errors, 1);
    let a140 = view.pvcs.iter().find(|p| p.interface == "a1.40").unwrap();
    assert_eq!(a140.class, "cbr pcr 1000000");
    assert_eq!(a140.tx_pdus, 2, "both good PDUs routed out of 1/40");
    assert_eq!(a140.tx_cells, 2 * atm::cells_for(sdu.len()) as u64);
    let text = api::Render::render(&view);
    assert!(
        text.contains("a1.41") && text.contains("vc-mux-ipv4"),
        "{text}"
    );
    assert!(text.contains("port a0: 1 cells with a bad HEC"), "{text}");
    core.shutdown();
}
