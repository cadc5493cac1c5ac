//! What a trial is given (ports, settings) and what it returns (per-stream and aggregate counts,
//! latency), and what a device under test may report about itself.

use std::time::Duration;

use dataplane::port::{RxQueue, TxQueue};

use crate::histogram::Histogram;
use crate::load::FrameSizes;

/// A tester port: queues to and from the device under test, and the nominal rate that offered
/// load is a percentage of.
pub struct TesterPort {
    pub name: String,
    pub speed_bps: f64,
    pub tx: Vec<Box<dyn TxQueue>>,
    pub rx: Vec<Box<dyn RxQueue>>,
    /// Multiplies the trial's load on this port (a backbone pattern offers less on the side with
    /// more ports, so 100% fills the other side exactly).
    pub load_scale: f64,
    /// Where a frame the transmit queue refuses was.
    pub refusal: Refusal,
    /// How frames go on the wire (what 100% load is).
    pub wire: crate::atm::Wire,
}

/// What a frame refused by a tester port's transmit queue means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The queue is the device's own receive queue (embedded mode's `mem` rings, which are the
    /// wire there): the frame was sent and the device dropped it, as a NIC drops what its full
    /// ring cannot take. It counts as sent and lost (`TrialResult::refused`).
    DeviceDrop,
    /// The queue is the tester's own transmit ring on a Linux interface: the frame never left
    /// the tester. It is neither sent nor lost (`TrialResult::tx_refused`), and the trial is
    /// tester-limited.
    NeverSent,
}

/// What the device under test can tell the tester about a trial (embedded mode): its drop
/// counters, so loss can be attributed.
pub trait DutProbe {
    /// Drops by reason since start.
    fn drops(&self) -> Vec<(&'static str, u64)>;

    /// Of a trial's drops, those that are the tester's doing (in embedded mode: a full queue
    /// towards the tester, which the tester did not drain in time).
    fn tester_fault(&self, _trial_drops: &[(&'static str, u64)]) -> u64 {
        0
    }
}

/// Measures around each counted trial (not its warm-up): [`start`](Self::start) just before the
/// traffic, [`finish`](Self::finish) once the trial has drained, with the result to add to. In
/// external mode it reads the CPU the trial cost ([`crate::cpu`]) and the tester's own receive
/// drops, which only the ports know.
pub trait TrialMeter {
    fn start(&mut self);
    fn finish(&mut self, r: &mut TrialResult);
}

/// One trial's settings.
pub struct TrialSpec {
    /// Offered load, a fraction of each port's nominal rate (times its `load_scale`).
    pub load: f64,
    pub sizes: FrameSizes,
    pub seconds: f64,
    /// Traffic at the trial's rate before the trial, not counted (its frames are stale).
    pub warmup: f64,
    /// The streams that send; None: all.
    pub active: Option<Vec<usize>>,
    /// Each port stops after this many frames (back-to-back bursts); the trial ends when every
    /// port has sent them, or after `seconds`.
    pub frames_per_port: Option<u64>,
    /// The trial is over when no frame has arrived for this long after the generators stopped...
    pub drain_quiet: Duration,
    /// ... or after this long, whichever comes first.
    pub drain_max: Duration,
    pub verify_payload: bool,
    /// Called once, this many seconds into the trial (to cut a link, withdraw a route, ...).
    pub events: Vec<(f64, Box<dyn FnMut()>)>,
    /// Frames sent as they are, each once, this many seconds into the trial, out of a port
    /// (a join or leave in the middle of a multicast trial); when each left is in
    /// `TrialResult::injected_ns`, in their order here.
    pub inject: Vec<(f64, usize, Vec<u8>)>,
}

impl TrialSpec {
    pub fn new(load: f64, sizes: FrameSizes, seconds: f64) -> Self {
        TrialSpec {
            load,
            sizes,
            seconds,
            warmup: 0.0,
            active: None,
            frames_per_port: None,
            drain_quiet: Duration::from_millis(50),
            drain_max: Duration::from_secs(2),
            verify_payload: false,
            events: Vec::new(),
            inject: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct LatencyStats {
    pub min_ns: u64,
    pub avg_ns: f64,
    pub max_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
}

impl LatencyStats {
    pub(crate) fn from_samples(
        min: u32,
        sum: u64,
        max: u32,
        n: u64,
        h: &Histogram,
    ) -> Option<Self> {
        if n == 0 {
            return None;
        }
        Some(LatencyStats {
            min_ns: min as u64,
            avg_ns: sum as f64 / n as f64,
            max_ns: max as u64,
            p50_ns: h.quantile(0.5)?,
            p99_ns: h.quantile(0.99)?,
            p999_ns: h.quantile(0.999)?,
        })
    }
}

#[derive(Debug, Clone, Default)]
pub struct StreamResult {
    pub name: String,
    pub tx: u64,
    pub rx: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub misdelivered: u64,
    pub corrupted: u64,
    pub latency: Option<LatencyStats>,
    /// A multicast stream's receivers, its own port first (empty for a stream with one):
    /// `rx`, `lost` and `duplicated` above are their sums.
    pub receivers: Vec<ReceiverResult>,
}

/// One receiver (port) of a multicast stream in one trial.
#[derive(Debug, Clone, Default)]
pub struct ReceiverResult {
    pub port: usize,
    pub rx: u64,
    pub lost: u64,
    pub duplicated: u64,
    /// When its first and last frame arrived (tester clock, low 32 bits of ns), and when those
    /// two had been sent.
    pub first_ns: Option<u32>,
    pub last_ns: Option<u32>,
    pub first_tx_ns: Option<u32>,
    pub last_tx_ns: Option<u32>,
    pub lat_min_ns: u32,
    pub lat_avg_ns: u64,
    pub lat_max_ns: u32,
}

#[derive(Debug, Clone, Default)]
pub struct TrialResult {
    pub load: f64,
    pub sizes: String,
    pub seconds: f64,
    /// The rate asked for, all ports, frames/s.
    pub offered_fps: f64,
    /// The rate the generators achieved.
    pub tx_fps: f64,
    /// Frames received where they belonged, per second of the trial.
    pub rx_fps: f64,
    /// Mean frame size of what was sent (FCS included), for bit rates.
    pub mean_size: f64,
    pub tx: u64,
    /// Frames the receivers should have got: `tx`, but a multicast stream's frames count once
    /// per receiver. `rx` and `lost` count copies.
    pub expected_rx: u64,
    pub rx: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub misdelivered: u64,
    pub corrupted: u64,
    pub foreign: u64,
    pub stale: u64,
    /// Frames the device's receive queues refused (full; embedded mode): part of `tx` and
    /// `lost`.
    pub refused: u64,
    /// Frames the tester's own transmit rings refused (external mode): never sent, so neither
    /// in `tx` nor in `lost`; the trial is tester-limited.
    pub tx_refused: u64,
    /// Frames still in the tester's transmit rings when the trial closed, taken back so they
    /// never leave (external mode): not in `tx` nor `lost`; the trial is tester-limited.
    pub tx_unsent: u64,
    /// The generators fell behind the schedule (the tester, not the device, set the rate).
    pub tester_limited: bool,
    /// Frames the schedule asked for that the generators could not send in time.
    pub behind: u64,
    pub latency: Option<LatencyStats>,
    /// Longest gap between two polls of a receive queue: latency resolution.
    pub poll_gap_ns: u64,
    /// From the first burst sent to the last, seconds: how long the device saw traffic (less
    /// than `seconds` when the tester lost its core at either end of the trial).
    pub tx_span_s: f64,
    /// Device drops during the trial, by reason (embedded mode).
    pub dut_drops: Vec<(&'static str, u64)>,
    /// Frames the tester's own receive path dropped (external mode: a packet socket's ring was
    /// full). They count as lost, and the trial as tester-limited.
    pub tester_drops: u64,
    /// What the trial cost in CPU, when a meter measured it (external mode).
    pub cpu: Option<crate::cpu::CpuUsage>,
    pub streams: Vec<StreamResult>,
    /// Frames each tester port received in the trial, whatever their stream or fate (flooded
    /// copies included): what a switch test counts per port.
    pub port_rx: Vec<u64>,
    /// Of `port_rx`, the frames of no stream of this trial (foreign, stale, damaged beyond
    /// telling): a switch test's per-port count of its own frames is the difference.
    pub port_other: Vec<u64>,
    /// Frames the device sent to a port whose cable a failover procedure had cut: lost on the
    /// wire (they are in `lost`), counted apart so the loss can be read.
    pub cable_cut: u64,
    /// Why the trial could not run (streams that do not fit its frame sizes); nothing was sent.
    pub error: Option<String>,
    /// When each of `TrialSpec::inject`'s frames left (tester clock, low 32 bits of ns, as
    /// receivers' `first_ns`); None: not sent (no buffer, or the queue refused it).
    pub injected_ns: Vec<Option<u32>>,
}

impl TrialResult {
    /// Every frame built went on the wire: no tester ring refused or kept any.
    pub fn carried_whole(&self) -> bool {
        self.tx_refused + self.tx_unsent == 0
    }

    /// Frames a second delivered, a multicast frame counting once however many receivers it
    /// owes (the copies received over the copies owed, times the frames sent): `rx_fps` for
    /// unicast streams; for multicast the rate into the device, as RFC 2544 reports
    /// throughput (the offered rate at which nothing is lost).
    pub fn frames_fps(&self) -> f64 {
        if self.expected_rx > self.tx && self.expected_rx > 0 {
            self.rx_fps * self.tx as f64 / self.expected_rx as f64
        } else {
            self.rx_fps
        }
    }

    pub fn loss_ratio(&self) -> f64 {
        let expected = self.expected_rx.max(self.tx);
        if expected == 0 {
            0.0
        } else {
            self.lost as f64 / expected as f64
        }
    }
}

/// Progress of a running trial, for displays.
pub struct Progress {
    pub elapsed: f64,
    pub seconds: f64,
    pub tx: u64,
    pub rx: u64,
}
