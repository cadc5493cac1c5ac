//! Every record of an input capture ends up delivered or counted, and a damaged file is reported
//! by file, record and offset.

use super::*;
use crate::buffer::Pool;

/// A capture file in a fresh temporary folder (removed when dropped).
struct TempCapture {
    dir: std::path::PathBuf,
}

impl TempCapture {
    fn new(name: &str, bytes: &[u8]) -> (Self, std::path::PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("linerate-pcap-rx-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        (Self { dir }, path)
    }
}

impl Drop for TempCapture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn pcap_file(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut w = pcap::Writer::new(Vec::new(), pcap::LINKTYPE_ETHERNET, 262_144).unwrap();
    for f in frames {
        w.write(0, f).unwrap();
    }
    w.into_inner()
}

/// Drains the port as a worker would: (frames delivered with their lengths, rx_errors).
fn drain(rx: &mut PcapRx) -> (Vec<usize>, u64) {
    let mut cache = BufCache::new(Pool::new(64));
    let mut out = Vec::new();
    let mut errors = 0;
    let mut lens = Vec::new();
    for _ in 0..100 {
        rx.rx_burst(&mut cache, &mut out, 2);
        errors += rx.take_rx_errors();
        lens.extend(out.iter().map(|b| b.len()));
        cache.free_all(&mut out);
        if rx.is_exhausted() {
            break;
        }
    }
    assert!(rx.is_exhausted());
    (lens, errors)
}

#[test]
fn oversize_records_are_skipped_and_counted() {
    let f = pcap_file(&[vec![1; 60], vec![2; 9300], vec![3; 60], vec![4; MAX_FRAME]]);
    let (_t, path) = TempCapture::new("oversize.pcap", &f);
    let mut rx = PcapRx::open(&path).unwrap();
    let report = rx.report();
    assert_eq!(drain(&mut rx), (vec![60, 60, MAX_FRAME], 1));
    assert_eq!(report.error(), None, "a skip is no read error");
}

#[test]
fn a_truncated_file_is_counted_and_reported() {
    let f = pcap_file(&[vec![1; 60], vec![2; 60], vec![3; 60]]);
    let (_t, path) = TempCapture::new("truncated.pcap", &f[..f.len() - 30]);
    let mut rx = PcapRx::open(&path).unwrap();
    let report = rx.report();
    assert_eq!(drain(&mut rx), (vec![60, 60], 1));
    let e = report.error().expect("reported");
    assert!(
        e.ends_with(
            "truncated.pcap: record 3 at byte offset 176: malformed pcap file: truncated record"
        ),
        "{e}"
    );
}

#[test]
fn an_impossible_record_header_is_reported() {
    let mut f = pcap_file(&[vec![1; 60], vec![2; 60], vec![3; 60]]);
    f[24 + 76 + 8..24 + 76 + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    let (_t, path) = TempCapture::new("badheader.pcap", &f);
    let mut rx = PcapRx::open(&path).unwrap();
    let report = rx.report();
    assert_eq!(drain(&mut rx), (vec![60], 1));
    let e = report.error().expect("reported");
    assert!(
        e.contains("badheader.pcap: record 2 at byte offset 100: malformed pcap file"),
        "{e}"
    );
}

#[test]
fn frames_wait_for_a_free_buffer() {
    let frames: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 60]).collect();
    let (_t, path) = TempCapture::new("nobuf.pcap", &pcap_file(&frames));
    let mut rx = PcapRx::open(&path).unwrap();
    let mut cache = BufCache::new(Pool::new(2));
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for _ in 0..20 {
        // Buffers run out inside a burst; the record read for the missing one waits.
        rx.rx_burst(&mut cache, &mut out, 8);
        seen.extend(out.iter().map(|b| b.data()[0]));
        cache.free_all(&mut out);
    }
    assert_eq!(seen, [0, 1, 2, 3, 4]);
    assert!(rx.is_exhausted());
}

/// A little-endian pcapng block of `kind` around `body`.
fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let total = (body.len() + 12) as u32;
    let mut b = kind.to_le_bytes().to_vec();
    b.extend_from_slice(&total.to_le_bytes());
    b.extend_from_slice(body);
    b.extend_from_slice(&total.to_le_bytes());
    b
}

#[test]
fn pcapng_with_an_fcs_and_a_second_link_type() {
    let mut f = packet::pcapng::Writer::new(Vec::new(), "test")
        .unwrap()
        .into_inner();
    // Interface 0: Ethernet with a 4-byte FCS (if_fcslen 4); interface 1: raw IP.
    f.extend(block(1, &[1, 0, 0, 0, 0, 0, 0, 0, 13, 0, 1, 0, 4, 0, 0, 0]));
    f.extend(block(1, &[101, 0, 0, 0, 0, 0, 0, 0]));
    for (interface, len) in [(0u32, 64u32), (1, 40), (0, 68)] {
        let mut body = interface.to_le_bytes().to_vec();
        body.extend_from_slice(&[0; 8]);
        body.extend_from_slice(&len.to_le_bytes());
        body.extend_from_slice(&len.to_le_bytes());
        body.extend(vec![7; len as usize]);
        f.extend(block(6, &body));
    }
    let (_t, path) = TempCapture::new("mixed.pcapng", &f);
    let mut rx = PcapRx::open(&path).unwrap();
    assert_eq!(drain(&mut rx), (vec![60, 64], 1));
    assert_eq!(rx.report().error(), None);
}

#[test]
fn open_refuses_what_it_cannot_read() {
    let (_t, path) = TempCapture::new("gif.pcap", b"GIF89a..................");
    let e = PcapRx::open(&path).err().unwrap();
    assert!(
        e.ends_with("gif.pcap: not a pcap or pcapng file (bad magic number)"),
        "{e}"
    );
    let mut f = pcap_file(&[]);
    f[20] = 113; // Linux cooked capture
    let (_t, path) = TempCapture::new("sll.pcap", &f);
    let e = PcapRx::open(&path).err().unwrap();
    assert!(
        e.ends_with("sll.pcap: link type 113 is not Ethernet (1)"),
        "{e}"
    );
    let mut f = pcap_file(&[vec![1; 60]]);
    f[20..24].copy_from_slice(&0x3000_0001u32.to_le_bytes());
    let (_t, path) = TempCapture::new("lt30000001.pcap", &f);
    let mut rx = PcapRx::open(&path).unwrap();
    assert_eq!(drain(&mut rx), (vec![60], 0));
}

#[test]
fn transmitted_frames_go_to_pcap_or_pcapng_by_the_name() {
    let (t, _) = TempCapture::new("tx", b"");
    let mut cache = BufCache::new(Pool::new(8));
    for (name, magic) in [
        ("out.pcap", [0x4d, 0x3c, 0xb2, 0xa1]),
        ("out.pcapng", [10, 13, 13, 10]),
    ] {
        let path = t.dir.join(name);
        let mut tx = PcapTx::create(&path, "p1").unwrap();
        let mut b = cache.alloc().unwrap();
        b.fill(&[5; 60]);
        let mut v = vec![b];
        assert_eq!(tx.tx_burst(&mut v, &mut cache), 1);
        tx.flush();
        let f = std::fs::read(&path).unwrap();
        assert_eq!(f[..4], magic, "{name}");
        let mut r = AnyReader::new(&f[..]).unwrap();
        let mut buf = Vec::new();
        let rec = r.next_into(&mut buf).unwrap().unwrap();
        assert_eq!((rec.caplen, rec.orig_len, buf), (60, 60, vec![5; 60]));
        if let AnyReader::PcapNg(ng) = &r {
            assert_eq!(ng.interfaces().len(), 1);
            assert!(f.windows(4).any(|w| w == b"p1\0\0"), "if_name p1");
        }
    }
}
