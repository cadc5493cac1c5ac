//! A fake device under test with faults set on purpose, to test the tester: it forwards by IP
//! destination (or learns MAC addresses, as a bridge) and can drop every Nth frame, drop above a
//! set rate, reorder, duplicate, delay, corrupt, deliver to the wrong port, or go dark for a
//! while. Each fault has an exact expected count, so the tester's report can be checked against
//! it (`tests/known_answers.rs`).
//!
//! It runs on its own thread, polling `mem` rings like a router worker.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dataplane::port::mem::{ring, RingRx, RingTx};
use dataplane::{BufCache, PktBuf, Pool};

use crate::engine::TesterPort;

/// How the fake device picks the output port.
#[derive(Clone, Debug)]
pub enum Forwarding {
    /// Longest match over (prefix, length, port); IPv4 prefixes as u128 in the low 32 bits.
    Routes {
        v4: Vec<(u32, u8, usize)>,
        v6: Vec<(u128, u8, usize)>,
    },
    /// A learning bridge with room for `capacity` addresses: unknown destinations are flooded to
    /// every other port.
    Bridge { capacity: usize },
}

/// Faults, all off by default. Counters run over every frame the device receives, in arrival
/// order, so "every Nth" is exact: of T frames, T / N are affected.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    pub drop_every: u64,
    /// The first N frames are dropped (a device that pauses just as the test starts).
    pub drop_first: u64,
    /// Frames above this rate (frames/s, all ports together) are dropped: a token-bucket
    /// policer...
    pub max_fps: f64,
    /// ... with a bucket of this many frames (0: 256, enough to ride out the device's own
    /// polling jitter).
    pub max_burst: u32,
    /// The Nth frame is held back and sent after the next frame to the same port.
    pub reorder_every: u64,
    pub duplicate_every: u64,
    pub corrupt_every: u64,
    pub misdeliver_every: u64,
    /// Every frame is held this long.
    pub delay: Duration,
    /// Bridge: learns at most this many new addresses per second (0: no limit), a learning
    /// engine with a fixed speed for RFC 2889's learning-rate test.
    pub learn_per_s: f64,
}

/// Switches a running fake device responds to.
#[derive(Default)]
pub struct Control {
    /// Frames arriving before this time (ns on the device's clock) are dropped: an outage.
    down_until_ns: AtomicU64,
    /// Set to have the bridge forget every address (as if they aged out).
    flush: AtomicBool,
    epoch: std::sync::OnceLock<Instant>,
}

impl Control {
    fn now_ns(&self) -> u64 {
        self.epoch.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }

    /// Forgets every learned address before the next frame (RFC 2889's aging between steps).
    pub fn flush_addresses(&self) {
        self.flush.store(true, Ordering::Release);
    }

    /// Drops everything for `d` from now (a link cut followed by a reroute).
    pub fn outage(&self, d: Duration) {
        self.down_until_ns
            .store(self.now_ns() + d.as_nanos() as u64, Ordering::Relaxed);
    }
}

/// What the fake device did, for cross-checking.
#[derive(Clone, Debug, Default)]
pub struct DutStats {
    pub received: u64,
    pub sent: u64,
    pub dropped: u64,
    pub flooded: u64,
    pub learned: usize,
    /// Frames held back to be reordered (`Faults::reorder_every`).
    pub held: u64,
    /// Held frames that went out alone because nothing followed them within a millisecond (the
    /// last frame of a trial, or the tester stalled): these arrive in order.
    pub held_sent_alone: u64,
    /// Times the device's thread lost its core (a loop gap over `STALL_NS`) while frames were
    /// waiting, the longest such gap and their sum: timing measured across a long one is the
    /// host's, not the device's.
    pub stalls: u64,
    pub longest_stall_ns: u64,
    pub stalled_ns: u64,
}

/// A gap between two turns of the device's loop longer than this is a stall: a turn takes
/// microseconds, and this VM's host takes a core away for 1-3 ms several times a second.
pub const STALL_NS: u64 = 1_000_000;

pub struct FakeDut {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<DutStats>>,
    pub control: Arc<Control>,
}

impl FakeDut {
    /// Starts the device with `nports` ports of `speed_bps` nominal rate; returns it and the
    /// tester's side of its ports.
    pub fn start(
        nports: usize,
        speed_bps: f64,
        fwd: Forwarding,
        faults: Faults,
        pool: Arc<Pool>,
    ) -> (FakeDut, Vec<TesterPort>) {
        let mut tester_ports = Vec::new();
        let mut dut_rx = Vec::new();
        let mut dut_tx = Vec::new();
        for p in 0..nports {
            let (to_dut, from_tester) = ring(16384);
            let (to_tester, from_dut) = ring(16384);
            tester_ports.push(TesterPort {
                name: format!("p{p}"),
                speed_bps,
                tx: vec![Box::new(to_dut)],
                rx: vec![Box::new(from_dut)],
                load_scale: 1.0,
                wire: crate::atm::Wire::Ethernet,
                refusal: crate::engine::Refusal::DeviceDrop,
            });
            dut_rx.push(from_tester);
            dut_tx.push(to_tester);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let control = Arc::new(Control::default());
        control.now_ns();
        let dev = Device {
            rx: dut_rx,
            tx: dut_tx,
            fwd,
            faults,
            cache: BufCache::new(pool),
            control: control.clone(),
            macs: HashMap::new(),
            n: 0,
            tokens: 0.0,
            last_refill: 0,
            delayed: (0..nports).map(|_| VecDeque::new()).collect(),
            held: (0..nports).map(|_| None).collect(),
            stats: DutStats::default(),
            outs: Vec::with_capacity(64),
            release_buf: Vec::with_capacity(256),
            learn_tokens: 64.0,
            learn_refill: 0,
        };
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("fake-dut".into())
            .spawn(move || dev.run(&s))
            .expect("spawn the fake device");
        (
            FakeDut {
                stop,
                handle: Some(handle),
                control,
            },
            tester_ports,
        )
    }

    pub fn stop(mut self) -> DutStats {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .map(|h| h.join().expect("fake device thread"))
            .unwrap_or_default()
    }
}

impl Drop for FakeDut {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

struct Device {
    rx: Vec<RingRx>,
    tx: Vec<RingTx>,
    fwd: Forwarding,
    faults: Faults,
    cache: BufCache,
    control: Arc<Control>,
    macs: HashMap<[u8; 6], usize>,
    n: u64,
    tokens: f64,
    last_refill: u64,
    delayed: Vec<VecDeque<(u64, PktBuf)>>,
    held: Vec<Option<PktBuf>>,
    stats: DutStats,
    /// Output ports of the frame at hand (kept to save an allocation per frame).
    outs: Vec<usize>,
    release_buf: Vec<PktBuf>,
    learn_tokens: f64,
    learn_refill: u64,
}

fn every(n: u64, k: u64) -> bool {
    k != 0 && n.is_multiple_of(k)
}

impl Device {
    fn run(mut self, stop: &AtomicBool) -> DutStats {
        let mut v = Vec::with_capacity(256);
        let mut idle_since = self.control.now_ns();
        let mut last_turn = idle_since;
        while !stop.load(Ordering::Relaxed) {
            let turn = self.control.now_ns();
            let gap = turn - last_turn;
            last_turn = turn;
            let mut got = 0;
            for p in 0..self.rx.len() {
                v.clear();
                got += self.rx[p].pop_burst(&mut v, 256);
                for b in v.drain(..) {
                    self.frame(p, b);
                }
            }
            if gap > STALL_NS && got > 0 {
                self.stats.stalls += 1;
                self.stats.longest_stall_ns = self.stats.longest_stall_ns.max(gap);
                self.stats.stalled_ns += gap;
            }
            let now = self.control.now_ns();
            self.release(now);
            if got == 0 {
                if now - idle_since > 1_000_000 {
                    // Nothing came for a millisecond: a held (reordered) frame goes out alone.
                    for p in 0..self.held.len() {
                        if let Some(b) = self.held[p].take() {
                            self.stats.held_sent_alone += 1;
                            self.queue(p, b, now);
                        }
                    }
                    self.release(now);
                }
                // Between frames the core goes to whoever else wants it: the tester's thread
                // and the kernel share two cores with this one on the machines it runs on.
                std::thread::yield_now();
            } else {
                idle_since = now;
            }
        }
        self.stats.learned = self.macs.len();
        self.stats
    }

    fn out_ports(&mut self, in_port: usize, f: &[u8], outs: &mut Vec<usize>) {
        outs.clear();
        match &self.fwd {
            Forwarding::Routes { v4, v6 } => {
                let Some((l3, _, ver)) = crate::signature::locate(f) else {
                    return;
                };
                let best = if ver == 4 {
                    let d = u32::from_be_bytes(f[l3 + 16..l3 + 20].try_into().unwrap());
                    v4.iter()
                        .filter(|&&(p, l, _)| {
                            l == 0 || d >> (32 - l as u32) == p >> (32 - l as u32)
                        })
                        .max_by_key(|r| r.1)
                        .map(|r| r.2)
                } else {
                    let d = u128::from_be_bytes(f[l3 + 24..l3 + 40].try_into().unwrap());
                    v6.iter()
                        .filter(|&&(p, l, _)| {
                            l == 0 || d >> (128 - l as u32) == p >> (128 - l as u32)
                        })
                        .max_by_key(|r| r.1)
                        .map(|r| r.2)
                };
                outs.extend(best);
            }
            Forwarding::Bridge { capacity } => {
                let src: [u8; 6] = f[6..12].try_into().unwrap();
                let dst: [u8; 6] = f[0..6].try_into().unwrap();
                if self.control.flush.swap(false, Ordering::Acquire) {
                    self.macs.clear();
                }
                if self.macs.contains_key(&src) {
                    self.macs.insert(src, in_port);
                } else if self.macs.len() < *capacity {
                    let rate = self.faults.learn_per_s;
                    let now = self.control.now_ns();
                    let ok = rate <= 0.0 || {
                        let dt = (now - self.learn_refill) as f64 / 1e9;
                        self.learn_refill = now;
                        self.learn_tokens = (self.learn_tokens + dt * rate).min(64.0);
                        if self.learn_tokens >= 1.0 {
                            self.learn_tokens -= 1.0;
                            true
                        } else {
                            false
                        }
                    };
                    if ok {
                        self.macs.insert(src, in_port);
                    }
                }
                match self.macs.get(&dst) {
                    Some(&p) if p != in_port => outs.push(p),
                    Some(_) => {}
                    None => {
                        self.stats.flooded += 1;
                        outs.extend((0..self.tx.len()).filter(|&p| p != in_port));
                    }
                }
            }
        }
    }

    fn frame(&mut self, in_port: usize, mut b: PktBuf) {
        self.stats.received += 1;
        self.n += 1;
        let n = self.n;
        let now = self.control.now_ns();
        let f = &self.faults;
        let mut drop = now < self.control.down_until_ns.load(Ordering::Relaxed);
        if f.max_fps > 0.0 {
            let dt = (now - self.last_refill) as f64 / 1e9;
            self.last_refill = now;
            let depth = if f.max_burst == 0 {
                256.0
            } else {
                f.max_burst as f64
            };
            self.tokens = (self.tokens + dt * f.max_fps).min(depth);
            if self.tokens >= 1.0 {
                self.tokens -= 1.0;
            } else {
                drop = true;
            }
        }
        drop |= every(n, f.drop_every) || n <= f.drop_first;
        let mut outs = std::mem::take(&mut self.outs);
        if drop {
            outs.clear();
        } else {
            self.out_ports(in_port, b.data(), &mut outs);
        }
        if outs.is_empty() {
            self.stats.dropped += 1;
            self.cache.free(b);
            self.outs = outs;
            return;
        }
        let f = &self.faults;
        if every(n, f.corrupt_every) {
            let l = b.len();
            b.data_mut()[l - 8] ^= 0x01; // in the signature's sequence number
        }
        let misdeliver = every(n, f.misdeliver_every);
        let duplicate = every(n, f.duplicate_every);
        let reorder = every(n, f.reorder_every);
        let nports = self.tx.len();
        let wrong = |o: usize| if misdeliver { (o + 1) % nports } else { o };
        // A copy for every output but the last (flooding).
        for i in 0..outs.len() - 1 {
            if let Some(c) = self.copy(&b) {
                self.queue(wrong(outs[i]), c, now);
            }
        }
        let last = wrong(outs[outs.len() - 1]);
        self.outs = outs;
        if duplicate {
            if let Some(c) = self.copy(&b) {
                self.queue(last, c, now);
            }
        }
        if reorder && self.held[last].is_none() {
            self.stats.held += 1;
            self.held[last] = Some(b);
            return;
        }
        self.queue(last, b, now);
        if let Some(h) = self.held[last].take() {
            self.queue(last, h, now);
        }
    }

    fn copy(&mut self, b: &PktBuf) -> Option<PktBuf> {
        let mut c = self.cache.alloc()?;
        c.fill(b.data());
        Some(c)
    }

    fn queue(&mut self, port: usize, b: PktBuf, now: u64) {
        let at = now + self.faults.delay.as_nanos() as u64;
        self.delayed[port].push_back((at, b));
    }

    fn release(&mut self, now: u64) {
        let mut out = std::mem::take(&mut self.release_buf);
        for p in 0..self.delayed.len() {
            while let Some((at, _)) = self.delayed[p].front() {
                if *at > now {
                    break;
                }
                out.push(self.delayed[p].pop_front().unwrap().1);
            }
            if out.is_empty() {
                continue;
            }
            let n = out.len() as u64;
            self.tx[p].push_burst(&mut out);
            self.stats.sent += n - out.len() as u64;
            self.stats.dropped += out.len() as u64;
            self.cache.free_all(&mut out);
        }
        self.release_buf = out;
    }
}
