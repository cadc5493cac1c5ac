//! The test bed shared by the packet-path tests: a router built from YAML, started on mem ports,
//! and frames to feed it.
#![allow(dead_code)] // each test file uses its own share of the helpers

use std::time::{Duration, Instant};

use control::{MemPeer, Router, Runtime, StartOptions};
use dataplane::{BufCache, Pool, Snapshot};
use packet::checksum;

pub struct Bed {
    pub router: Router,
    pub running: Option<Runtime>,
    pub peers: Vec<MemPeer>,
    pub cache: BufCache,
}

impl Bed {
    /// A router built from `text` and started on mem ports.
    pub fn from_text(text: &str) -> Bed {
        let dir = std::env::temp_dir().join(format!("linerate-fwd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.yaml");
        let cfg = control::config::parse(text, &path).unwrap();
        let router = Router::build(cfg).unwrap();
        let pool = Pool::new(8192);
        let (running, peers) = router
            .start(StartOptions {
                pool: Some(pool.clone()),
                ..Default::default()
            })
            .unwrap();
        Bed {
            router,
            running: Some(running),
            peers,
            cache: BufCache::new(pool),
        }
    }

    /// Sends frames into port `p`, waits until the router has handled them, returns what came
    /// out of each port.
    pub fn send(&mut self, p: usize, frames: &[Vec<u8>]) -> Vec<Vec<Vec<u8>>> {
        self.send_on(p, 0, frames)
    }

    /// As [`Bed::send`], on receive queue `q` of port `p` (with several workers, each polls
    /// its own queue of every mem port).
    pub fn send_on(&mut self, p: usize, q: usize, frames: &[Vec<u8>]) -> Vec<Vec<Vec<u8>>> {
        let before = self.snapshot().rx_packets[p];
        let mut v: Vec<_> = frames
            .iter()
            .map(|f| {
                let mut b = self.cache.alloc().unwrap();
                assert!(b.fill(f));
                b
            })
            .collect();
        while !v.is_empty() {
            self.peers[p].to_router[q].push_burst(&mut v);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.snapshot().rx_packets[p] < before + frames.len() as u64 {
            assert!(Instant::now() < deadline, "router did not take the frames");
            std::thread::sleep(Duration::from_millis(1));
        }
        // Counters are written after transmit: one more vector's worth of time to be safe.
        std::thread::sleep(Duration::from_millis(20));
        let mut out = Vec::new();
        for peer in self.peers.iter_mut() {
            let mut got = Vec::new();
            let mut bufs = Vec::new();
            peer.from_router.pop_burst(&mut bufs, usize::MAX);
            for b in bufs {
                got.push(b.data().to_vec());
                self.cache.free(b);
            }
            out.push(got);
        }
        out
    }

    pub fn snapshot(&self) -> Snapshot {
        self.running.as_ref().unwrap().snapshot()
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            r.stop();
        }
    }
}

/// A router built from `text` (written to `dir`/r.yaml), started on mem ports with no punt
/// path, and its management core: for the tests that use the shows, metrics and taps.
pub fn core_with(
    dir: &std::path::Path,
    text: &str,
) -> (std::sync::Arc<control::mgmt::Core>, Vec<MemPeer>) {
    let path = dir.join("r.yaml");
    std::fs::write(&path, text).unwrap();
    let cfg = control::config::load(&path).unwrap();
    let router = Router::build(cfg).unwrap();
    let mut rt = Runtime::start(
        &router,
        StartOptions {
            exit_when_drained: false,
            punt: None,
            // Transmit rings towards the test's peers larger than any buffer pool here: a peer
            // thread the busy test machine starves for a few milliseconds then holds the
            // router's output in its ring instead of seeing it dropped as `TxQueueFull`, and a
            // sender out of buffers waits (the pool is the back-pressure). What the tests count
            // as lost is then the router's doing, not the test machine's.
            tx_ring_size: Some(1 << 16),
            ..Default::default()
        },
    )
    .unwrap();
    let peers = rt.take_peers();
    let logger = std::sync::Arc::new(control::syslog::Logger::new(Default::default()).unwrap());
    let core = control::mgmt::Core::new(router, rt, text.to_string(), path, logger, None).unwrap();
    (core, peers)
}

pub const P0_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
pub const PEER0: [u8; 6] = [2, 0, 0, 0, 0, 2];

pub fn ip4_frame(
    dst: [u8; 4],
    ttl: u8,
    payload: usize,
    df: bool,
    proto: u8,
    sport: u16,
) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + payload];
    f[0..6].copy_from_slice(&P0_MAC);
    f[6..12].copy_from_slice(&PEER0);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let total = (20 + payload) as u16;
    let h = &mut f[14..34];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
    if df {
        h[6] = 0x40;
    }
    h[8] = ttl;
    h[9] = proto;
    h[12..16].copy_from_slice(&[192, 0, 2, 2]);
    h[16..20].copy_from_slice(&dst);
    let c = checksum::fold(checksum::sum(h));
    h[10..12].copy_from_slice(&c.to_be_bytes());
    if payload >= 8 {
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&5000u16.to_be_bytes());
    }
    let start = 42.min(f.len());
    for (i, b) in f[start..].iter_mut().enumerate() {
        *b = i as u8;
    }
    f
}

pub fn ip6_frame(dst: [u8; 16], hop: u8, payload: usize) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 40 + payload];
    f[0..6].copy_from_slice(&P0_MAC);
    f[6..12].copy_from_slice(&PEER0);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    let h = &mut f[14..54];
    h[0] = 0x60;
    h[4..6].copy_from_slice(&(payload as u16).to_be_bytes());
    h[6] = 17;
    h[7] = hop;
    h[8..24].copy_from_slice(
        &"2001:db8:1::2"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    h[24..40].copy_from_slice(&dst);
    f
}

pub fn v6(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>().unwrap().octets()
}

pub fn header_ok(ip: &[u8]) -> bool {
    let ihl = (ip[0] & 0x0f) as usize * 4;
    checksum::fold(checksum::sum(&ip[..ihl])) == 0
}
