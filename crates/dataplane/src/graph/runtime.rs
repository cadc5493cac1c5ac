//! `show runtime`'s counts, in the manner of VPP's: per node and worker, the calls (vectors), the
//! packets and the time spent.
//!
//! How it is collected, and why it costs nothing measurable: calls and packets are two adds per
//! node call into the worker's own array, written to its shared counters once per vector (only
//! the rows that moved). Time is sampled: one vector in [`TIMED_EVERY`] reads the clock around
//! each node (two `clock_gettime` per node in that vector, about 40 ns, so well under 0.1 ns per
//! packet on average at full vectors); the time per packet is the sampled time over the sampled
//! packets, an unbiased estimate as long as vectors are not correlated with the sampling period.

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use super::NODE_COUNT;
use crate::counters::bump;

/// The names of the rows: every graph node, then interface-output.
pub fn row_names() -> impl Iterator<Item = &'static str> {
    super::NodeId::ALL
        .iter()
        .map(|n| n.name())
        .chain(std::iter::once(super::TX_NODE_NAME))
}

/// One vector in this many is timed.
pub const TIMED_EVERY: u64 = 16;
/// The rows: every graph node, then interface-output.
pub const NODE_ROWS: usize = NODE_COUNT + 1;
/// interface-output's row.
pub const TX_ROW: usize = NODE_COUNT;

const CALLS: usize = 0;
const PACKETS: usize = 1;
const TIMED_CALLS: usize = 2;
const TIMED_PACKETS: usize = 3;
const TIMED_NS: usize = 4;

/// One node's counters within one worker (its only writer).
#[derive(Default, Debug)]
pub struct NodeCounters {
    /// Times the node ran (each on one vector).
    pub calls: AtomicU64,
    pub packets: AtomicU64,
    /// Of those, the timed calls, their packets and their nanoseconds.
    pub timed_calls: AtomicU64,
    pub timed_packets: AtomicU64,
    pub timed_ns: AtomicU64,
}

impl NodeCounters {
    fn fields(&self) -> [&AtomicU64; 5] {
        [
            &self.calls,
            &self.packets,
            &self.timed_calls,
            &self.timed_packets,
            &self.timed_ns,
        ]
    }
}

/// A worker's tally of the vector in progress.
pub struct Runtime {
    origin: Instant,
    vectors: u64,
    timed: bool,
    local: [[u64; 5]; NODE_ROWS],
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime {
            origin: Instant::now(),
            vectors: 0,
            timed: false,
            local: [[0; 5]; NODE_ROWS],
        }
    }
}

impl Runtime {
    /// A new received vector: decides whether it is timed.
    #[inline(always)]
    pub fn begin_vector(&mut self) {
        self.vectors = self.vectors.wrapping_add(1);
        self.timed = self.vectors.is_multiple_of(TIMED_EVERY);
    }

    /// The start of a node call: the clock if this vector is timed, else 0 (no clock read).
    #[inline(always)]
    pub fn start(&self) -> u64 {
        if self.timed {
            self.origin.elapsed().as_nanos() as u64
        } else {
            0
        }
    }

    /// Counts a call of row `row` on `n` packets that started at `t0` (from [`Runtime::start`]).
    #[inline(always)]
    pub fn count(&mut self, row: usize, n: usize, t0: u64) {
        let r = &mut self.local[row];
        r[CALLS] += 1;
        r[PACKETS] += n as u64;
        if self.timed {
            r[TIMED_CALLS] += 1;
            r[TIMED_PACKETS] += n as u64;
            r[TIMED_NS] += (self.origin.elapsed().as_nanos() as u64).saturating_sub(t0);
        }
    }

    /// Writes the vector's tally to the worker's shared counters.
    #[inline]
    pub fn flush(&mut self, shared: &[NodeCounters; NODE_ROWS]) {
        for (r, c) in self.local.iter_mut().zip(shared.iter()) {
            if r[CALLS] == 0 {
                continue;
            }
            for (v, a) in r.iter_mut().zip(c.fields()) {
                if *v != 0 {
                    bump(a, *v);
                    *v = 0;
                }
            }
        }
    }
}

/// A plain copy of one node's counters (summed, or one worker's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeSnapshot {
    pub calls: u64,
    pub packets: u64,
    pub timed_calls: u64,
    pub timed_packets: u64,
    pub timed_ns: u64,
}

impl NodeSnapshot {
    pub fn read(c: &NodeCounters) -> NodeSnapshot {
        let r = |a: &AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        NodeSnapshot {
            calls: r(&c.calls),
            packets: r(&c.packets),
            timed_calls: r(&c.timed_calls),
            timed_packets: r(&c.timed_packets),
            timed_ns: r(&c.timed_ns),
        }
    }

    /// Every row of one worker's counters.
    pub fn read_rows(c: &[NodeCounters; NODE_ROWS]) -> [NodeSnapshot; NODE_ROWS] {
        std::array::from_fn(|i| NodeSnapshot::read(&c[i]))
    }

    /// `self - base`, field by field (a counter cleared since reads as counted from then).
    pub fn since(&self, base: &NodeSnapshot) -> NodeSnapshot {
        NodeSnapshot {
            calls: self.calls.saturating_sub(base.calls),
            packets: self.packets.saturating_sub(base.packets),
            timed_calls: self.timed_calls.saturating_sub(base.timed_calls),
            timed_packets: self.timed_packets.saturating_sub(base.timed_packets),
            timed_ns: self.timed_ns.saturating_sub(base.timed_ns),
        }
    }

    pub fn add(&mut self, o: &NodeSnapshot) {
        self.calls += o.calls;
        self.packets += o.packets;
        self.timed_calls += o.timed_calls;
        self.timed_packets += o.timed_packets;
        self.timed_ns += o.timed_ns;
    }

    /// Packets per call.
    pub fn vector_size(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.packets as f64 / self.calls as f64
        }
    }

    /// Nanoseconds per packet, from the timed calls; None before any was timed.
    pub fn ns_per_packet(&self) -> Option<f64> {
        (self.timed_packets > 0).then(|| self.timed_ns as f64 / self.timed_packets as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_vector_in_sixteen_is_timed_and_counts_reach_the_shared_counters() {
        let shared: [NodeCounters; NODE_ROWS] = std::array::from_fn(|_| NodeCounters::default());
        let mut rt = Runtime::default();
        for _ in 0..64 {
            rt.begin_vector();
            let t0 = rt.start();
            rt.count(1, 100, t0);
            rt.count(TX_ROW, 3, 0);
            rt.flush(&shared);
        }
        let s = NodeSnapshot::read(&shared[1]);
        assert_eq!((s.calls, s.packets), (64, 6400));
        assert_eq!((s.timed_calls, s.timed_packets), (4, 400));
        assert_eq!(NodeSnapshot::read(&shared[TX_ROW]).packets, 192);
        assert_eq!(NodeSnapshot::read(&shared[0]), NodeSnapshot::default());
        assert_eq!(s.vector_size(), 100.0);
        assert!(s.ns_per_packet().is_some());
    }
}
