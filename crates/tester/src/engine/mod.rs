//! The trial engine: one thread that paces every port's generator, polls every port's receive
//! queues into the analyzer, and at the end of a trial waits for the queues to drain before it
//! reads anything. Procedures (RFC 2544, RFC 2889) are sequences of trials. [`trial`] holds what a
//! trial is given and what it returns.
//!
//! The engine sees ports only as [`TxQueue`](dataplane::port::TxQueue)/[`RxQueue`](dataplane::port::RxQueue)
//! pairs: in embedded mode they are `mem` rings into a router in the same process, in external
//! mode Linux interfaces through AF_PACKET ([`crate::external`]).
//!
//! Timing. A burst is stamped once built, just before it is handed to its port; received frames are
//! taken from every port in a sweep, then stamped with one clock read. A frame's latency is
//! therefore over-read by at most one sweep (never under-read), and the trial reports the longest
//! gap between sweeps (`poll_gap_ns`), which on a shared machine is mostly the scheduler's.

mod trial;

pub use trial::{
    DutProbe, LatencyStats, Progress, ReceiverResult, Refusal, StreamResult, TesterPort,
    TrialMeter, TrialResult, TrialSpec,
};

use std::sync::Arc;
use std::time::{Duration, Instant};

use dataplane::{BufCache, PktBuf, Pool};

use crate::analyzer::Analyzer;
use crate::histogram::Histogram;
use crate::load::FrameSizes;
use crate::stream::{finish, GenStream, StreamSpec};

/// Frames built per port per turn: small enough that a burst's timestamp is close to every
/// frame's departure, big enough to amortize the clock read and the queue call.
const BURST: usize = 32;
/// Frames taken from the receive queues in one sweep before they are analyzed.
const SWEEP: usize = 256;
/// Frames built in one turn over the ports, at most.
const TURN: usize = 512;
/// How far (frames per port) the generator may fall behind its schedule and still catch up.
/// The tester thread can lose its core for milliseconds (a virtual machine's host, the kernel);
/// afterwards it sends what it owes at up to a burst per port per turn, so the trial's offered
/// rate stays exact. A quarter of a typical 1,024-frame receive ring: a device that drops such a
/// burst would drop it from a real network too. Beyond this the frames are skipped and counted
/// as `behind`.
const MAX_DEBT: u64 = 256;
/// The streams of the last frames each transmit queue took, so that frames taken back from a
/// ring at the end of a trial are taken off their own streams' counts. Larger than any ring the
/// tester opens (external mode: 2,048 slots).
const RECENT: usize = 8192;

/// The last [`RECENT`] frames' streams, per transmit queue.
struct Recent {
    streams: Vec<u32>,
    next: usize,
}

impl Recent {
    fn new() -> Self {
        Recent {
            streams: vec![0; RECENT],
            next: 0,
        }
    }

    fn push(&mut self, s: u32) {
        self.streams[self.next % RECENT] = s;
        self.next += 1;
    }

    /// The streams of the last `n` frames pushed (at most [`RECENT`] of them).
    fn last(&self, n: usize) -> impl Iterator<Item = u32> + '_ {
        let n = n.min(RECENT).min(self.next);
        (self.next - n..self.next).map(|i| self.streams[i % RECENT])
    }
}

/// What became of the frames handed to the transmit queues in one trial, beyond `sent`.
struct Settled {
    /// Per stream: built but never sent (a tester ring refused or kept them).
    not_sent: Vec<u64>,
    /// Refused by a tester ring ([`Refusal::NeverSent`]).
    tx_refused: u64,
    /// Refused by the device's own receive queues ([`Refusal::DeviceDrop`]).
    refused: u64,
}

impl Settled {
    /// A queue took the first `taken` of the frames of `streams` (its own order) and refused
    /// the rest; `recent` is the queue's record where its refusals are the tester's.
    fn burst(
        &mut self,
        recent: Option<&mut Recent>,
        taken: usize,
        streams: impl ExactSizeIterator<Item = u32>,
    ) {
        let left = (streams.len() - taken) as u64;
        match recent {
            None => self.refused += left,
            Some(rec) => {
                for (i, s) in streams.enumerate() {
                    if i < taken {
                        rec.push(s);
                    } else {
                        self.not_sent[s as usize] += 1;
                    }
                }
                self.tx_refused += left;
            }
        }
    }
}

/// Writes the first page of every free buffer once (metadata, headroom and the first 3.8 KB of
/// frame), so the kernel commits that memory now and not during the first trial: a page fault
/// costs more than building twenty frames. Jumbo frames fault their later pages in on first use,
/// at rates where that does not matter.
fn touch_pool(pool: &Arc<Pool>) {
    let mut cache = BufCache::new(pool.clone());
    let mut all = Vec::with_capacity(pool.available());
    while let Some(mut b) = cache.alloc() {
        if b.set_len(1) {
            b.data_mut()[0] = 0;
        }
        all.push(b);
    }
    cache.free_all(&mut all);
    cache.flush();
}

/// An analyzer expecting `streams` on `ports` ports: each at its port, and a multicast
/// stream at each of its receivers too.
fn analyzer_for(streams: &[StreamSpec], ports: usize) -> Analyzer {
    let expect: Vec<usize> = streams.iter().map(|s| s.rx_port).collect();
    let mut a = Analyzer::new(&expect, ports);
    for (i, s) in streams.iter().enumerate() {
        if !s.also_rx.is_empty() {
            a.set_receivers(i, &s.also_rx);
        }
    }
    a
}

pub struct Tester {
    pub ports: Vec<TesterPort>,
    pub streams: Vec<StreamSpec>,
    pub probe: Option<Box<dyn DutProbe>>,
    /// Measures around every counted trial (external mode: CPU per frame).
    pub meter: Option<Box<dyn TrialMeter>>,
    cache: BufCache,
    analyzer: Analyzer,
    clock: Instant,
    trial_no: u32,
    compiled: Option<(Vec<u16>, Vec<GenStream>)>,
    /// Where the next receive sweep starts, and its bookkeeping.
    sweep_next: usize,
    sweep_ends: Vec<(u16, u32)>,
    last_sweep_ns: u64,
    /// Bit p: tester port p's cable is cut (see [`Tester::cables`]).
    cables: Arc<std::sync::atomic::AtomicU64>,
    /// `CLOCK_REALTIME` at `clock`'s zero, in ns: turns a receive queue's own timestamp
    /// (`Meta::rx_ns`, the kernel's) into the tester's clock. Measured at each trial's start.
    realtime_at_zero_ns: u64,
    /// Frames the tester's hosts send again before a trial once `Refresh::every` has passed
    /// since they last did (IGMP reports: a run longer than the device's membership interval
    /// keeps its groups, as hosts that answer a querier do).
    pub refresh: Option<Refresh>,
}

/// Frames to send again, paced, before trials (see [`Tester::refresh`]).
pub struct Refresh {
    pub every: std::time::Duration,
    pub last: Instant,
    /// Per tester port, its frames.
    pub frames: Vec<(usize, Vec<Vec<u8>>)>,
    pub fps: f64,
}

impl Tester {
    /// Streams must already be validated against the sizes they will be sent at
    /// ([`Tester::validate`] does it for a size set).
    pub fn new(ports: Vec<TesterPort>, streams: Vec<StreamSpec>, pool: Arc<Pool>) -> Self {
        let n = ports.len();
        let analyzer = analyzer_for(&streams, n);
        touch_pool(&pool);
        Tester {
            ports,
            streams,
            probe: None,
            meter: None,
            cache: BufCache::new(pool),
            analyzer,
            clock: Instant::now(),
            trial_no: 0,
            compiled: None,
            sweep_next: 0,
            sweep_ends: Vec::new(),
            last_sweep_ns: 0,
            realtime_at_zero_ns: 0,
            cables: Default::default(),
            refresh: None,
        }
    }

    /// The tester's cables, as a mask a procedure may change from any thread or trial event:
    /// bit p set cuts port p's cable, so what the device sends there from then on is lost on
    /// the wire (`TrialResult::cable_cut`), as when a tester pulls a cable. The procedure mends
    /// what it cut.
    pub fn cables(&self) -> Arc<std::sync::atomic::AtomicU64> {
        self.cables.clone()
    }

    /// Lets stream `stream` arrive at `port` as well as its own (a Flexlink backup that takes
    /// the traffic over): frames there are received, not misdelivered. Until the streams are
    /// replaced.
    pub fn accept_also(&mut self, stream: usize, port: usize) {
        if let Some(s) = self.analyzer.streams.get_mut(stream) {
            s.also_port = port as u16;
        }
    }

    /// Replaces the streams (a procedure that changes what it sends between steps).
    pub fn set_streams(&mut self, streams: Vec<StreamSpec>) {
        self.analyzer = analyzer_for(&streams, self.ports.len());
        self.streams = streams;
        self.compiled = None;
    }

    pub fn validate(&self, sizes: &FrameSizes) -> Result<(), String> {
        let s = sizes.sizes();
        for st in &self.streams {
            st.validate(&s, self.ports.len())?;
        }
        Ok(())
    }

    fn now_ns(&self) -> u64 {
        self.clock.elapsed().as_nanos() as u64
    }

    fn compile(&mut self, sizes: &[u16]) {
        if matches!(&self.compiled, Some((s, _)) if s == sizes) {
            return;
        }
        let gens = self
            .streams
            .iter()
            .enumerate()
            .map(|(i, s)| GenStream::new(s, sizes, i as u64 + 1))
            .collect();
        self.compiled = Some((sizes.to_vec(), gens));
    }

    /// Runs one trial: warm-up, traffic, drain, then the count.
    pub fn trial(
        &mut self,
        spec: &mut TrialSpec,
        progress: &mut dyn FnMut(&Progress),
    ) -> TrialResult {
        if let Err(e) = self.validate(&spec.sizes) {
            // Nothing is sent; the trial fails with the reason (callers normally validate first).
            return TrialResult {
                load: spec.load,
                sizes: spec.sizes.to_string(),
                error: Some(e),
                ..Default::default()
            };
        }
        if let Some(mut r) = self.refresh.take() {
            if r.last.elapsed() >= r.every {
                for (p, frames) in &r.frames {
                    self.send_frames(*p, frames, r.fps);
                }
                r.last = Instant::now();
            }
            self.refresh = Some(r);
        }
        let sizes = spec.sizes.sizes();
        self.compile(&sizes);
        let active: Vec<usize> = match &spec.active {
            Some(a) => a.clone(),
            None => (0..self.streams.len()).collect(),
        };
        if spec.warmup > 0.0 {
            self.trial_no += 1;
            let mut w = TrialSpec::new(spec.load, spec.sizes.clone(), spec.warmup);
            w.active = Some(active.clone());
            w.drain_quiet = spec.drain_quiet;
            w.drain_max = spec.drain_max;
            self.run(&mut w, &active, &mut |_| {});
        }
        self.trial_no += 1;
        let before = self.probe.as_ref().map(|p| p.drops()).unwrap_or_default();
        if let Some(m) = &mut self.meter {
            m.start();
        }
        let mut r = self.run(spec, &active, progress);
        if let Some(m) = &mut self.meter {
            m.finish(&mut r);
        }
        if let Some(p) = &self.probe {
            let after = p.drops();
            r.dut_drops = after
                .iter()
                .map(|&(k, v)| {
                    let b = before.iter().find(|x| x.0 == k).map_or(0, |x| x.1);
                    (k, v - b)
                })
                .filter(|x| x.1 > 0)
                .collect();
            if p.tester_fault(&r.dut_drops) > 0 {
                r.tester_limited = true;
            }
        }
        r
    }

    fn run(
        &mut self,
        spec: &mut TrialSpec,
        active: &[usize],
        progress: &mut dyn FnMut(&Progress),
    ) -> TrialResult {
        let trial = self.trial_no as u8;
        self.realtime_at_zero_ns = self.realtime_at_zero();
        // Moved out for the trial so the loop can borrow the rest of self.
        let (compiled_sizes, mut gens) = self.compiled.take().expect("compiled");
        for (i, g) in gens.iter_mut().enumerate() {
            g.restart(i as u64 + 1 + ((trial as u64) << 32));
        }
        self.analyzer.reset(trial);
        self.analyzer.verify_payload = spec.verify_payload;
        let nports = self.ports.len();
        let size_cycle = spec.sizes.cycle();
        // Each port's streams, in the order they take turns.
        let mut port_streams: Vec<Vec<u32>> = vec![Vec::new(); nports];
        for &s in active {
            port_streams[self.streams[s].tx_port].push(s as u32);
        }
        // Each port's rate from the mean size of what it sends (streams may raise small sizes).
        let rate: Vec<f64> = (0..nports)
            .map(|p| {
                let ps = &port_streams[p];
                if ps.is_empty() {
                    return 0.0;
                }
                let m = ps
                    .iter()
                    .map(|&s| gens[s as usize].mean_size(&size_cycle))
                    .sum::<f64>()
                    / ps.len() as f64;
                spec.load
                    * self.ports[p].load_scale
                    * self.ports[p].wire.line_fps(self.ports[p].speed_bps, m)
            })
            .collect();
        let mean = {
            let (mut bytes, mut fps) = (0.0, 0.0);
            for p in 0..nports {
                for &s in &port_streams[p] {
                    let share = rate[p] / port_streams[p].len() as f64;
                    bytes += share * gens[s as usize].mean_size(&size_cycle);
                    fps += share;
                }
            }
            if fps > 0.0 {
                bytes / fps
            } else {
                spec.sizes.mean()
            }
        };
        let offered_fps: f64 = rate.iter().sum();
        // Per-stream position in the size cycle; per-port turn among its streams.
        let mut size_pos = vec![0usize; self.streams.len()];
        let mut turn = vec![0usize; nports];
        let mut sent = vec![0u64; nports];
        let mut behind = 0u64;
        // Per port, frames the schedule was moved back by (fixed-count trials that fell behind).
        let mut late = vec![0u64; nports];
        // Frames built but not sent as they left the generators: taken off the streams' counts
        // where a tester ring refused or kept them.
        let mut settled = Settled {
            not_sent: vec![0; self.streams.len()],
            tx_refused: 0,
            refused: 0,
        };
        let mut tx_unsent = 0u64;
        // Per port and queue, what its last frames were, where a ring can keep frames.
        let mut recent: Vec<Vec<Recent>> = self
            .ports
            .iter()
            .map(|p| match p.refusal {
                Refusal::NeverSent => p.tx.iter().map(|_| Recent::new()).collect(),
                Refusal::DeviceDrop => Vec::new(),
            })
            .collect();
        // When the first and the last burst left (ns): the span the device saw traffic.
        let (mut tx_first, mut tx_last) = (None::<u64>, 0u64);
        let limit = spec.frames_per_port.unwrap_or(u64::MAX);
        let mut burst: Vec<PktBuf> = Vec::with_capacity(BURST);
        let mut gen_next = 0usize;
        let mut meta: Vec<(u32, u8, u32)> = Vec::with_capacity(BURST);
        let mut per_q: Vec<Vec<PktBuf>> = Vec::new();
        let mut per_q_streams: Vec<Vec<u32>> = Vec::new();
        let mut rxv: Vec<PktBuf> = Vec::with_capacity(256);
        let mut poll_gap = 0u64;
        let dur_ns = (spec.seconds * 1e9) as u64;
        // A port sends when it owes a batch worth 20 us of its rate (1..16 frames), not frame by
        // frame: per-burst costs (queue call, ring indices) stay amortized at high rates, and 20
        // us is far below any queue the device under test has.
        let min_batch: Vec<u64> = rate
            .iter()
            .map(|&r| ((r * 20e-6) as u64).clamp(1, 16))
            .collect();
        let t0 = Instant::now();
        let t0_ns = self.now_ns();
        let mut next_progress = t0 + Duration::from_millis(250);
        let mut events = std::mem::take(&mut spec.events);
        events.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut events = events.into_iter().peekable();
        let inject = std::mem::take(&mut spec.inject);
        let mut injected_ns: Vec<Option<u32>> = vec![None; inject.len()];
        // In time order, by index into `inject`.
        let mut inject_order: Vec<usize> = (0..inject.len()).collect();
        inject_order.sort_by(|&a, &b| inject[a].0.total_cmp(&inject[b].0));
        let mut inject_next = 0usize;
        let mut loops = 0u64;
        let (mut tx_total, mut rx_total) = (0u64, 0u64);
        loop {
            // One clock read per turn paces every port.
            let now_ns = self.now_ns();
            let el_ns = now_ns.saturating_sub(t0_ns);
            if el_ns >= dur_ns {
                break;
            }
            let el_s = el_ns as f64 * 1e-9;
            while let Some(&k) = inject_order.get(inject_next) {
                if inject[k].0 > el_s {
                    break;
                }
                inject_next += 1;
                injected_ns[k] = self.send_one(inject[k].1, &inject[k].2);
            }
            let mut all_done = true;
            // A turn builds at most TURN frames, starting where the last turn stopped, so the
            // receive side is polled often enough whatever the generators owe.
            let mut budget = TURN;
            let first = gen_next;
            for k in 0..nports {
                let p = (first + k) % nports;
                if budget == 0 {
                    gen_next = p;
                    all_done = false;
                    break;
                }
                if rate[p] == 0.0 || sent[p] >= limit {
                    continue;
                }
                all_done = false;
                let due = ((el_s * rate[p]) as u64 + 1)
                    .saturating_sub(late[p])
                    .min(limit);
                let mut want = due.saturating_sub(sent[p]);
                if want < min_batch[p] && due < limit {
                    continue;
                }
                if want > MAX_DEBT {
                    behind += want - MAX_DEBT;
                    if spec.frames_per_port.is_some() {
                        // A fixed count is sent whole: the schedule moves later instead.
                        late[p] += want - MAX_DEBT;
                    } else {
                        sent[p] += want - MAX_DEBT;
                    }
                    want = MAX_DEBT;
                }
                // What the port owes, in bursts: a fast port on a slow turn may owe several.
                let mut left = (want as usize).min(budget);
                budget -= left;
                while left > 0 {
                    let n = left.min(BURST);
                    left -= n;
                    let ps = &port_streams[p];
                    // No prefetch here: the buffers' lines were last written on the device's core,
                    // and a read prefetch before the write costs a second coherence round trip
                    // (measured: 40% fewer frames/s).
                    for _ in 0..n {
                        let Some(mut b) = self.cache.alloc() else {
                            break;
                        };
                        let s = ps[turn[p]] as usize;
                        turn[p] += 1;
                        if turn[p] == ps.len() {
                            turn[p] = 0;
                        }
                        let z = size_cycle[size_pos[s]] as usize;
                        size_pos[s] += 1;
                        if size_pos[s] == size_cycle.len() {
                            size_pos[s] = 0;
                        }
                        let g = &mut gens[s];
                        let len = g.templates[z].len;
                        b.set_len(len as usize);
                        // The buffer's own tag says which length's payload it holds: the line is
                        // the metadata line, which alloc just wrote anyway.
                        let ok = !spec.verify_payload && b.meta().owner_tag == len as u32;
                        let sum = g.build(z, b.data_mut(), trial, s as u32, ok);
                        b.meta_mut().owner_tag = len as u32;
                        meta.push((s as u32, z as u8, sum));
                        burst.push(b);
                    }
                    // Stamped once built, just before the burst leaves: early by at most the time
                    // to hand the burst to the port.
                    let now = self.now_ns();
                    let ts = now as u32;
                    if !burst.is_empty() {
                        tx_first.get_or_insert(now);
                        tx_last = now;
                    }
                    for (b, &(s, z, sum)) in burst.iter_mut().zip(&meta) {
                        finish(
                            &gens[s as usize].templates[z as usize],
                            b.data_mut(),
                            ts,
                            sum,
                        );
                    }
                    let built = burst.len() as u64;
                    sent[p] += built;
                    tx_total += built;
                    let port = &mut self.ports[p];
                    let nq = port.tx.len();
                    if nq == 1 {
                        // The queue takes frames from the front: the rest were refused.
                        let taken = port.tx[0].tx_burst(&mut burst, &mut self.cache);
                        settled.burst(recent[p].get_mut(0), taken, meta.iter().map(|m| m.0));
                        self.cache.free_all(&mut burst);
                        meta.clear();
                        continue;
                    }
                    // A stream always uses the same queue, so its frames stay in order.
                    per_q.resize_with(nq, Vec::new);
                    per_q_streams.resize_with(nq, Vec::new);
                    for (b, &(s, _, _)) in burst.drain(..).zip(&meta) {
                        let q = s as usize % nq;
                        per_q[q].push(b);
                        per_q_streams[q].push(s);
                    }
                    for q in 0..nq {
                        let (v, streams) = (&mut per_q[q], &mut per_q_streams[q]);
                        if v.is_empty() {
                            continue;
                        }
                        let taken = port.tx[q].tx_burst(v, &mut self.cache);
                        settled.burst(recent[p].get_mut(q), taken, streams.iter().copied());
                        self.cache.free_all(v);
                        streams.clear();
                    }
                    meta.clear();
                }
            }
            // Everything waiting, sweep after sweep: the analyzer must never leave frames behind
            // for the device's transmit queues to overflow on (then the generator falls behind,
            // which the trial reports, instead).
            loop {
                let n = self.poll(&mut rxv, &mut poll_gap);
                rx_total += n;
                if n < SWEEP as u64 {
                    break;
                }
            }
            if all_done {
                break;
            }
            loops += 1;
            if loops & 63 == 0 {
                let now = Instant::now();
                while let Some((_, mut f)) =
                    events.next_if(|(at, _)| now.duration_since(t0).as_secs_f64() >= *at)
                {
                    f();
                }
                if now >= next_progress {
                    next_progress = now + Duration::from_millis(250);
                    progress(&Progress {
                        elapsed: now.duration_since(t0).as_secs_f64(),
                        seconds: spec.seconds,
                        tx: tx_total,
                        rx: rx_total,
                    });
                }
            }
        }
        // A trial that ran its time sent what was due up to `seconds`: that is its duration (a
        // stall of the tester thread at the very end would otherwise read as a lower rate).
        let elapsed = if spec.frames_per_port.is_some() {
            t0.elapsed().as_secs_f64()
        } else {
            // What the schedule owed at the close and never got (the tester thread lost its
            // core near the end) is behind too, not only what a turn skipped past MAX_DEBT.
            for p in 0..nports {
                behind += ((spec.seconds * rate[p]) as u64).saturating_sub(sent[p]);
            }
            spec.seconds
        };
        // Drain: the generators have stopped. Frames still waiting in a tester ring are asked
        // out again until none waits (they are on their way, not lost); then wait until
        // nothing has arrived for drain_quiet.
        let stop = Instant::now();
        let mut quiet_since = stop;
        let mut spins = 0u32;
        while stop.elapsed() < spec.drain_max && quiet_since.elapsed() < spec.drain_quiet {
            if self.poll(&mut rxv, &mut poll_gap) > 0 {
                quiet_since = Instant::now();
            } else {
                std::hint::spin_loop();
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(16) && self.kick_unsent() {
                quiet_since = Instant::now();
            }
        }
        // What is still in a ring now would leave during the next trial: take it back, off
        // its streams' counts.
        for (p, port) in self.ports.iter_mut().enumerate() {
            if port.refusal != Refusal::NeverSent {
                continue;
            }
            for (q, tx) in port.tx.iter_mut().enumerate() {
                let n = tx.take_back_unsent();
                if n == 0 {
                    continue;
                }
                tx_unsent += n as u64;
                let mut attributed = 0;
                for s in recent[p][q].last(n) {
                    settled.not_sent[s as usize] += 1;
                    attributed += 1;
                }
                // More than the record holds (a ring over RECENT slots): the rest go to the
                // port's first stream, so the totals stay exact.
                if let Some(&s) = port_streams[p].first() {
                    settled.not_sent[s as usize] += (n - attributed) as u64;
                }
            }
        }
        self.compiled = Some((compiled_sizes, gens));
        let mut r = self.summarize(
            spec,
            active,
            elapsed,
            offered_fps,
            mean,
            behind,
            settled.refused,
            poll_gap,
            &settled.not_sent,
        );
        r.tx_refused = settled.tx_refused;
        r.tx_unsent = tx_unsent;
        if r.tx_refused + tx_unsent > 0 {
            r.tester_limited = true;
        }
        r.tx_span_s = tx_first.map_or(0.0, |f| tx_last.saturating_sub(f) as f64 * 1e-9);
        r.injected_ns = injected_ns;
        r
    }

    /// Sends `frame` as it is out of `port`'s first queue; when it left (low 32 bits of the
    /// tester clock), or None if there was no buffer or the queue refused it.
    fn send_one(&mut self, port: usize, frame: &[u8]) -> Option<u32> {
        let mut b = self.cache.alloc()?;
        if !b.fill(frame) {
            self.cache.free(b);
            return None;
        }
        // Not a test frame: its payload must be laid down afresh if the buffer is reused.
        b.meta_mut().owner_tag = 0;
        let mut v = vec![b];
        let at = self.now_ns() as u32;
        let taken = self.ports[port].tx[0].tx_burst(&mut v, &mut self.cache);
        self.cache.free_all(&mut v);
        (taken == 1).then_some(at)
    }

    /// Sends `frames` out of `port` at `fps` (membership reports before a multicast trial),
    /// taking in whatever arrives meanwhile; returns how many the port took.
    pub fn send_frames(&mut self, port: usize, frames: &[Vec<u8>], fps: f64) -> usize {
        let t0 = Instant::now();
        let mut rxv: Vec<PktBuf> = Vec::with_capacity(SWEEP);
        let mut gap = 0u64;
        let mut sent = 0;
        for (i, f) in frames.iter().enumerate() {
            let due = Duration::from_secs_f64(i as f64 / fps.max(1.0));
            while t0.elapsed() < due {
                if self.poll(&mut rxv, &mut gap) == 0 {
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
            sent += usize::from(self.send_one(port, f).is_some());
        }
        // What the device sends back in the next moments (reports to routers, queries
        // flooded) is taken in too, so it does not count in the first trial.
        let quiet = Instant::now();
        while quiet.elapsed() < Duration::from_millis(20) {
            if self.poll(&mut rxv, &mut gap) == 0 {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        sent
    }

    /// `CLOCK_REALTIME` when the tester's clock read 0, from one realtime read between two
    /// reads of the tester's clock (their midpoint: off by well under a microsecond).
    fn realtime_at_zero(&self) -> u64 {
        let before = self.now_ns();
        let rt = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let after = self.now_ns();
        rt.wrapping_sub(before + (after - before) / 2)
    }

    /// Asks every tester ring that still holds frames to send them; whether any did.
    fn kick_unsent(&mut self) -> bool {
        let mut waiting = false;
        for port in &mut self.ports {
            if port.refusal != Refusal::NeverSent {
                continue;
            }
            for tx in &mut port.tx {
                if tx.unsent() > 0 {
                    waiting = true;
                    tx.flush();
                }
            }
        }
        waiting
    }

    /// Takes everything waiting on every receive queue into the analyzer. Returns frames taken.
    fn poll(&mut self, rxv: &mut Vec<PktBuf>, poll_gap: &mut u64) -> u64 {
        // Take what every port has first, then read the clock once: every frame is stamped after
        // it was taken, late by at most this sweep of queue reads (latency is never under-read,
        // even if the thread loses its core mid-sweep).
        // Sweeps start where the last one stopped, so no port waits behind busier ones.
        let nports = self.ports.len();
        self.analyzer.cut_mask = self.cables.load(std::sync::atomic::Ordering::Relaxed);
        let mut ends: Vec<(u16, u32)> = std::mem::take(&mut self.sweep_ends);
        ends.clear();
        let mut visited = 0;
        while visited < nports && rxv.len() < SWEEP {
            let p = self.sweep_next;
            self.sweep_next = if p + 1 == nports { 0 } else { p + 1 };
            visited += 1;
            for q in 0..self.ports[p].rx.len() {
                // A sweep holds at most a few hundred frames, so their lines are still in
                // cache when the analysis reaches them.
                let room = SWEEP.saturating_sub(rxv.len());
                let n = self.ports[p].rx[q].rx_burst(&mut self.cache, rxv, room);
                if n > 0 {
                    ends.push((p as u16, rxv.len() as u32));
                }
            }
        }
        let now = self.now_ns();
        // The longest a port went unpolled (approximately: per sweep, not per port).
        if self.last_sweep_ns != 0 && visited == nports {
            *poll_gap = (*poll_gap).max(now - self.last_sweep_ns);
        }
        if visited == nports {
            self.last_sweep_ns = now;
        }
        if rxv.is_empty() {
            return 0;
        }
        let ts = now as u32;
        // The frames were last written on the device's core: start loading their metadata and
        // first line 8 frames ahead, and the line that holds the signature (the frame's end) 4
        // ahead, once the metadata says where that is.
        for b in rxv.iter().take(8) {
            b.prefetch();
        }
        let mut start = 0usize;
        for &(port, end) in &ends {
            let port = port as usize;
            for i in start..end as usize {
                if let Some(b) = rxv.get(i + 8) {
                    b.prefetch();
                }
                if let Some(b) = rxv.get(i + 4) {
                    b.prefetch_frame_byte(b.len().saturating_sub(16));
                }
                // The receive queue's own time if it has one (the kernel's, on the tester's
                // frame rings), else the sweep's.
                let ts = match rxv[i].meta().rx_ns {
                    0 => ts,
                    rx => rx.wrapping_sub(self.realtime_at_zero_ns) as u32,
                };
                if !self.analyzer.frame(port, rxv[i].data(), ts) {
                    // Damaged on the way: lay the payload down afresh next time.
                    rxv[i].meta_mut().owner_tag = 0;
                }
            }
            start = end as usize;
        }
        let total = rxv.len() as u64;
        self.cache.free_all(rxv);
        self.sweep_ends = ends;
        total
    }

    #[allow(clippy::too_many_arguments)]
    fn summarize(
        &self,
        spec: &TrialSpec,
        active: &[usize],
        elapsed: f64,
        offered_fps: f64,
        mean: f64,
        behind: u64,
        refused: u64,
        poll_gap: u64,
        not_sent: &[u64],
    ) -> TrialResult {
        let gens = &self.compiled.as_ref().unwrap().1;
        let a = &self.analyzer;
        let mut r = TrialResult {
            load: spec.load,
            sizes: spec.sizes.to_string(),
            seconds: elapsed,
            offered_fps,
            mean_size: mean,
            refused,
            behind,
            poll_gap_ns: poll_gap,
            ..Default::default()
        };
        let mut hist = Histogram::new();
        let (mut lmin, mut lmax, mut lsum) = (u32::MAX, 0u32, 0u64);
        for &i in active {
            let g = &gens[i];
            let s = &a.streams[i];
            // On the wire: built, less what a tester ring refused or kept.
            let tx = g.tx - not_sent[i].min(g.tx);
            // Its own port, and a multicast stream's other receivers: each gets every frame.
            let own = self.streams[i].rx_port as u16;
            let all: Vec<(u16, &crate::analyzer::RxStream)> =
                std::iter::once((own, s)).chain(a.receivers_of(i)).collect();
            let mut sr = StreamResult {
                name: self.streams[i].name.clone(),
                tx,
                misdelivered: s.misdelivered,
                corrupted: s.corrupted,
                ..Default::default()
            };
            let (mut smin, mut smax, mut ssum) = (u32::MAX, 0u32, 0u64);
            for &(port, x) in &all {
                let lost = tx.saturating_sub(x.received);
                sr.rx += x.received;
                sr.lost += lost;
                sr.duplicated += x.duplicated;
                sr.reordered += x.reordered;
                smin = smin.min(x.lat_min);
                smax = smax.max(x.lat_max);
                ssum += x.lat_sum;
                if all.len() > 1 || self.streams[i].multicast_mac {
                    sr.receivers.push(ReceiverResult {
                        port: port as usize,
                        rx: x.received,
                        lost,
                        duplicated: x.duplicated,
                        first_ns: (x.received > 0).then_some(x.first_ns),
                        last_ns: (x.received > 0).then_some(x.last_ns),
                        first_tx_ns: (x.received > 0).then_some(x.first_tx_ns),
                        last_tx_ns: (x.received > 0).then_some(x.last_tx_ns),
                        lat_min_ns: x.lat_min,
                        lat_avg_ns: x.lat_sum.checked_div(x.received).unwrap_or(0),
                        lat_max_ns: x.lat_max,
                    });
                }
            }
            sr.latency = LatencyStats::from_samples(smin, ssum, smax, sr.rx, &a.hist[i]);
            r.tx += tx;
            r.expected_rx += tx * all.len() as u64;
            r.rx += sr.rx;
            r.lost += sr.lost;
            r.duplicated += sr.duplicated;
            r.reordered += sr.reordered;
            r.misdelivered += sr.misdelivered;
            r.corrupted += sr.corrupted;
            hist.merge(&a.hist[i]);
            lmin = lmin.min(smin);
            lmax = lmax.max(smax);
            lsum += ssum;
            r.streams.push(sr);
        }
        r.port_rx = a.ports.iter().map(|p| p.frames).collect();
        r.port_other = a
            .ports
            .iter()
            .map(|p| p.foreign + p.stale + p.corrupted_unknown)
            .collect();
        for p in &a.ports {
            r.cable_cut += p.cut;
            r.foreign += p.foreign;
            r.stale += p.stale;
            r.corrupted += p.corrupted_unknown;
        }
        r.latency = LatencyStats::from_samples(lmin, lsum, lmax, r.rx, &hist);
        r.tx_fps = r.tx as f64 / elapsed;
        r.rx_fps = r.rx as f64 / elapsed;
        // Short of the schedule by over 0.5%: the tester, not the device, set the rate (a few
        // frames skipped after the tester thread lost its core are within that).
        // A fixed-count trial sends every frame; if the generators fell behind, they sent them
        // later than scheduled.
        r.tester_limited = match spec.frames_per_port {
            None => r.tx_fps < offered_fps * 0.995,
            Some(_) => behind > 0,
        };
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::v4_stream;
    use dataplane::port::mem::{ring, RingRx, RingTx};
    use dataplane::port::{RxQueue, TxQueue};

    /// A tester ring on a link that pushes back: it refuses every `refuse_every`-th burst whole
    /// and hands what it takes on to a loopback ring, except that after `hold_after` frames it
    /// keeps everything in its slots and never sends it (a link gone dead near the end of the
    /// trial). Refusing by call, not by burst size, keeps the test independent of how the
    /// tester's pacing batches frames on a given machine.
    struct PushBack {
        out: RingTx,
        refuse_every: usize,
        calls: usize,
        hold_after: usize,
        taken: usize,
        held: Vec<PktBuf>,
        cache: BufCache,
    }

    impl TxQueue for PushBack {
        fn tx_burst(&mut self, pkts: &mut Vec<PktBuf>, cache: &mut BufCache) -> usize {
            self.calls += 1;
            if self.calls.is_multiple_of(self.refuse_every) {
                return 0;
            }
            let n = pkts.len();
            for b in pkts.drain(..n) {
                self.taken += 1;
                if self.taken > self.hold_after {
                    self.held.push(b);
                } else {
                    let mut one = vec![b];
                    self.out.push_burst(&mut one);
                    cache.free_all(&mut one);
                }
            }
            n
        }

        fn unsent(&self) -> usize {
            self.held.len()
        }

        fn take_back_unsent(&mut self) -> usize {
            let n = self.held.len();
            self.cache.free_all(&mut self.held);
            self.cache.flush();
            n
        }
    }

    fn port(name: &str, tx: PushBack, rx: RingRx) -> TesterPort {
        TesterPort {
            name: name.into(),
            speed_bps: 1e9,
            tx: vec![Box::new(tx)],
            rx: vec![Box::new(rx) as Box<dyn RxQueue>],
            load_scale: 1.0,
            wire: crate::atm::Wire::Ethernet,
            refusal: Refusal::NeverSent,
        }
    }

    #[test]
    fn frames_a_tester_ring_refused_or_kept_are_neither_sent_nor_lost() {
        let pool = Pool::new(8192);
        let (tx, rx) = ring(65536);
        let link = PushBack {
            out: tx,
            refuse_every: 4,
            calls: 0,
            hold_after: 5_000,
            taken: 0,
            held: Vec::new(),
            cache: BufCache::new(pool.clone()),
        };
        let mut streams = vec![v4_stream(), v4_stream()];
        streams[1].name = "second".into();
        for s in &mut streams {
            s.rx_port = 0;
        }
        let mut t = Tester::new(vec![port("p0", link, rx)], streams, pool);
        // 1% of 1 Gbit/s: ~14,880 frames/s, for 0.5 s.
        let mut spec = TrialSpec::new(0.01, FrameSizes::Fixed(64), 0.5);
        let r = t.trial(&mut spec, &mut |_| {});
        assert!(r.tx_refused > 0, "{r:?}");
        // Sent = what reached the loopback: the 5,000 taken before the link died.
        assert_eq!((r.tx, r.rx, r.lost), (5_000, 5_000, 0), "{r:?}");
        assert!(
            r.tx_unsent > 0 && r.tester_limited && !r.carried_whole(),
            "{r:?}"
        );
        assert_eq!(r.streams.iter().map(|s| s.tx).sum::<u64>(), r.tx);
        assert!(r.streams.iter().all(|s| s.lost == 0), "{:?}", r.streams);
        assert_eq!(r.stale, 0);
    }
}
