//! The per-interface features on the packet path, as feature arcs ([`arc`]) in the order
//! DESIGN.md gives:
//!
//! ```text
//! input:  ACL in -> QoS classify / mark / police -> uRPF -> flow accounting   (before the lookup)
//! output: ACL out -> QoS re-mark / police -> flow accounting                  (after it, before TX)
//! ```
//!
//! What is bound where is published with the [`Tables`](crate::tables::Tables): one
//! [`IfFeatures`] (an input and an output arc) per interface that has any. A feature that is off
//! costs nothing: forwarding checks one flag per vector, and an interface without features never
//! enters these steps.
//!
//! Compiled rule lists ([`Acl`], [`Qos`]) are immutable and published whole, so a list replaced
//! under traffic is never seen half old, half new. Their counters live beside them in shared
//! atomics, bumped once per run of equal results rather than per packet.

pub mod acl_log;
pub mod arc;
pub mod bridged;
pub mod input;
pub mod labelled;
pub mod mark;
pub mod output;
pub mod police;
pub mod watch;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use classify::Classifier;

pub use police::{Color, Policer, Verdict};

/// Per-entry hit counters of one configured ACL, shared by every binding compiled from it (and
/// carried over when a commit leaves the list unchanged). The last slot counts the implicit deny.
#[derive(Debug)]
pub struct AclCounters {
    pub name: String,
    pub hits: Box<[AtomicU64]>,
}

impl AclCounters {
    pub fn new(name: &str, entries: usize) -> AclCounters {
        AclCounters {
            name: name.to_string(),
            hits: (0..=entries).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub fn get(&self, i: usize) -> u64 {
        self.hits[i].load(Ordering::Relaxed)
    }
}

/// What a classifier rule of a compiled binding means.
#[derive(Clone, Copy, Debug)]
pub struct AclEntry {
    pub permit: bool,
    pub log: bool,
    /// Which list (index into the binding's `lists`) and entry of it; the implicit deny is the
    /// entry past the last.
    pub list: u16,
    pub index: u32,
}

/// One direction's access control on one interface: one list, or one list per family,
/// compiled together (entries carry their family in the EtherType, so lists cannot collide).
pub struct Acl {
    pub classifier: Classifier,
    pub entries: Box<[AclEntry]>,
    pub lists: Box<[Arc<AclCounters>]>,
    /// Sequence numbers and protocols per list entry, for log records.
    pub seqs: Box<[Box<[u32]>]>,
}

/// A QoS class as a policy applies it on one interface.
pub struct QosClass {
    pub name: String,
    pub set_dscp: Option<u8>,
    pub set_cos: Option<u8>,
    /// The MPLS traffic class (EXP) of labels pushed on the class's packets (input: wherever
    /// the packet leaves labelled; output: on this interface).
    pub set_exp: Option<u8>,
    /// This interface's own policer for the class.
    pub policer: Option<Arc<Policer>>,
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
}

/// A QoS policy bound to one interface and direction.
pub struct Qos {
    pub policy: String,
    pub classifier: Arc<Classifier>,
    /// The class of each classifier rule.
    pub rule_class: Arc<[u16]>,
    pub classes: Box<[QosClass]>,
    /// `class-default`, if the policy has one: what no class matched.
    pub default_class: Option<u16>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Urpf {
    Strict,
    Loose,
}

pub use arc::{Direction, Step, StepKind};

/// Where an Ethernet frame's payload starts, past its 802.1Q and 802.1ad tags (as
/// [`classify::extract`] reads it).
#[inline]
pub(crate) fn past_tags(d: &[u8]) -> u16 {
    let mut l3 = 14;
    while d.len() >= l3 + 4 && matches!(u16::from_be_bytes([d[l3 - 2], d[l3 - 1]]), 0x8100 | 0x88a8)
    {
        l3 += 4;
    }
    l3 as u16
}

/// Everything bound to one interface: its two feature arcs, each in [`arc::RUNS_BEFORE`] order.
pub struct IfFeatures {
    pub input: Box<[Step]>,
    pub output: Box<[Step]>,
    /// Read per packet by forwarding (does the packet need output-features?), so kept apart
    /// from a walk of the arcs.
    pub flow_in: bool,
    pub flow_out: bool,
}

impl IfFeatures {
    /// The arcs of `input` and `output` steps, ordered; refused if a step is on an arc twice or
    /// on an arc of the wrong direction.
    pub fn new(input: Vec<Step>, output: Vec<Step>) -> Result<IfFeatures, String> {
        let input = arc::order(input, Direction::Input)?;
        let output = arc::order(output, Direction::Output)?;
        let flow = |a: &[Step]| a.iter().any(|s| matches!(s, Step::Flow));
        Ok(IfFeatures {
            flow_in: flow(&input),
            flow_out: flow(&output),
            input,
            output,
        })
    }

    pub fn arc(&self, d: Direction) -> &[Step] {
        match d {
            Direction::Input => &self.input,
            Direction::Output => &self.output,
        }
    }

    pub fn acl(&self, d: Direction) -> Option<&Arc<Acl>> {
        self.arc(d).iter().find_map(|s| match s {
            Step::Acl(a) => Some(a),
            _ => None,
        })
    }

    pub fn qos(&self, d: Direction) -> Option<&Arc<Qos>> {
        self.arc(d).iter().find_map(|s| match s {
            Step::Qos(q) => Some(q),
            _ => None,
        })
    }

    pub fn urpf(&self) -> Option<Urpf> {
        self.input.iter().find_map(|s| match s {
            Step::Urpf(u) => Some(*u),
            _ => None,
        })
    }

    pub fn has_output(&self) -> bool {
        !self.output.is_empty()
    }
}

/// Flow accounting's shared half: the cache settings each worker sizes its own cache by, the
/// caches built for the workers ahead of time, and the queue expired records go to (drained by
/// the exporter off the fast path).
///
/// A worker never builds a cache: a cache of millions of flows is a gigabyte to allocate and
/// touch, which would stop forwarding for a second. The control plane builds them
/// ([`FlowShared::prepare`]) before it publishes the tables naming this `FlowShared`, and a
/// worker takes one whole; a retired cache is flushed and freed on a thread of its own.
pub struct FlowShared {
    /// A new value makes workers start a fresh cache (after flushing the old one).
    pub generation: u64,
    pub cache: flow::CacheConfig,
    /// 1-in-N packet sampling (1: every packet).
    pub sampling: u32,
    pub queue: Mutex<Vec<flow::FlowRecord>>,
    /// Records the queue had no room for (the exporter fell behind): counted, never silent.
    pub queue_dropped: AtomicU64,
    pub queue_limit: usize,
    /// Per worker: the cache's counters, published once per second by each worker.
    pub stats: Mutex<Vec<flow::CacheStats>>,
    /// Caches built and touched, waiting for a worker to take one.
    pub spares: Mutex<Vec<flow::FlowCache>>,
    /// Caches taken by workers so far.
    pub taken: AtomicU64,
    /// Caches a worker had to build itself, none being ready: each one a pause in forwarding.
    /// [`FlowShared::prepare`] keeps it at 0.
    pub built_by_workers: AtomicU64,
    /// What the event manager asks of the live flows; the same one across settings changes
    /// (see [`FlowShared::watching`]).
    pub watch: Arc<watch::FlowWatch>,
}

impl FlowShared {
    /// Settings and an empty queue; no cache built yet (see [`FlowShared::prepare`]).
    pub fn new(cache: flow::CacheConfig, sampling: u32, queue_limit: usize) -> FlowShared {
        FlowShared {
            generation: 0,
            cache,
            sampling,
            queue: Mutex::new(Vec::new()),
            queue_dropped: AtomicU64::new(0),
            queue_limit,
            stats: Mutex::new(Vec::new()),
            spares: Mutex::new(Vec::new()),
            taken: AtomicU64::new(0),
            built_by_workers: AtomicU64::new(0),
            watch: Arc::default(),
        }
    }

    /// Workers scan their caches for `watch` (the router's, which outlives these settings).
    pub fn watching(mut self, watch: Arc<watch::FlowWatch>) -> FlowShared {
        self.watch = watch;
        self
    }

    /// Builds (allocates and touches) caches until `workers` of them are spare or taken. Called
    /// off the workers, before the tables naming this `FlowShared` are published.
    pub fn prepare(&self, workers: usize) {
        loop {
            let have = self.spares.lock().unwrap_or_else(|p| p.into_inner()).len() as u64
                + self.taken.load(Ordering::Relaxed);
            if have >= workers as u64 {
                return;
            }
            // Built without the lock held: a worker may take a spare meanwhile.
            let c = flow::FlowCache::new(self.cache);
            self.spares
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(c);
        }
    }

    /// Builds one spare cache unless one is waiting: for a worker about to start.
    pub fn ensure_spare(&self) {
        let none = self
            .spares
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty();
        if none {
            let c = flow::FlowCache::new(self.cache);
            self.spares
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(c);
        }
    }

    /// A cache for a worker: a spare if one is ready, otherwise one it builds itself (counted).
    pub fn take_cache(&self) -> flow::FlowCache {
        self.taken.fetch_add(1, Ordering::Relaxed);
        let spare = self.spares.lock().unwrap_or_else(|p| p.into_inner()).pop();
        spare.unwrap_or_else(|| {
            self.built_by_workers.fetch_add(1, Ordering::Relaxed);
            flow::FlowCache::new(self.cache)
        })
    }

    /// Hands a worker's expired records over; keeps the rest counted if the exporter is behind.
    pub fn push(&self, recs: &mut Vec<flow::FlowRecord>) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let room = self.queue_limit.saturating_sub(q.len());
        if recs.len() > room {
            self.queue_dropped
                .fetch_add((recs.len() - room) as u64, Ordering::Relaxed);
            recs.truncate(room);
        }
        q.append(recs);
    }

    /// As [`FlowShared::push`], but waits (up to `patience`) for the exporter to make room: for
    /// a worker's final flush, off the packet path, where a whole cache of records is handed
    /// over at once.
    pub fn push_all(&self, recs: &mut Vec<flow::FlowRecord>, patience: std::time::Duration) {
        let deadline = std::time::Instant::now() + patience;
        loop {
            {
                let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
                let room = self.queue_limit.saturating_sub(q.len()).min(recs.len());
                let rest = recs.split_off(room);
                q.append(recs);
                *recs = rest;
            }
            if recs.is_empty() {
                return;
            }
            if std::time::Instant::now() >= deadline {
                self.push(recs);
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// The common clock of policers and flow records: nanoseconds since the process's first call.
pub fn clock_ns() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
}

/// The pre-colour a colour-aware policer reads from DSCP: AF drop precedence 2 is yellow,
/// 3 is red (RFC 2597), everything else green.
#[inline]
pub fn dscp_color(dscp: u8) -> Color {
    match dscp {
        12 | 20 | 28 | 36 => Color::Yellow,
        14 | 22 | 30 | 38 => Color::Red,
        _ => Color::Green,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> FlowShared {
        FlowShared::new(
            flow::CacheConfig {
                capacity: 1000,
                active_timeout_ns: 60_000_000_000,
                inactive_timeout_ns: 5_000_000_000,
            },
            1,
            1024,
        )
    }

    #[test]
    fn prepared_caches_are_taken_whole_and_none_is_built_twice() {
        let s = shared();
        s.prepare(2);
        s.prepare(2);
        assert_eq!(s.spares.lock().unwrap().len(), 2, "idempotent");
        let _a = s.take_cache();
        s.prepare(2);
        assert_eq!(s.spares.lock().unwrap().len(), 1, "a taken cache counts");
        let _b = s.take_cache();
        assert_eq!(s.built_by_workers.load(Ordering::Relaxed), 0);
        // A third worker with no cache ready builds one, and it is counted.
        let _c = s.take_cache();
        assert_eq!(s.built_by_workers.load(Ordering::Relaxed), 1);
        s.ensure_spare();
        let _d = s.take_cache();
        assert_eq!(s.built_by_workers.load(Ordering::Relaxed), 1);
    }
}
