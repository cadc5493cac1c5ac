//! The flow watch: what the event manager's flow detector sees of the workers' flow caches,
//! read live, because an exported record arrives a timeout (seconds to minutes) after the
//! attack it describes began.
//!
//! The control plane publishes a [`WatchSpec`]: filters (match lines in the ACL grammar, an
//! interface, a direction), how recently a flow must have seen a packet to count, and how long
//! one pass over a cache should take. Each worker walks its own cache a slice at a time from its
//! housekeeping ([`Scanner::step`], between vectors), sized so that a pass takes about
//! `period_ms` whatever the table's size: a 2M-flow cache read once a second is ~2.2M metadata
//! reads a second spread over every vector, and no vector waits for a whole table. The packet
//! path itself does nothing more: the scan reads what flow accounting already keeps.
//!
//! At the end of a pass a worker publishes a [`WatchPass`]: per filter and input interface the
//! number of live flows that matched (exact), and up to `max_hits` of the matching flows
//! themselves (those past it counted in `truncated`, never silent). A worker never waits for
//! the control plane: if the passes are being read when it finishes, it publishes on a later
//! vector.
//!
//! Reads: the worker's [`FlowCache`]. Sets: the worker's slot in [`FlowWatch`]. Sends: nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwapOption;
use classify::rule::{Dim, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use classify::{Key, Rule};
use flow::{Direction, FlowCache, FlowSeen};

/// The most filters one spec holds (one bit each in [`WatchHit::filters`]).
pub const MAX_FILTERS: usize = 64;

/// Which live flows one detector counts.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowFilter {
    /// Any of these matches (none: every flow).
    pub rules: Vec<Rule>,
    /// Only flows that came in on this interface.
    pub in_if: Option<u32>,
    /// Only records of this direction (None: both).
    pub direction: Option<Direction>,
}

impl FlowFilter {
    pub fn matches(&self, f: &FlowSeen, key: &Key) -> bool {
        self.in_if.is_none_or(|i| i == f.key.in_if)
            && self.direction.is_none_or(|d| d == f.key.direction)
            && (self.rules.is_empty() || self.rules.iter().any(|r| r.matches(key)))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct WatchSpec {
    pub filters: Vec<FlowFilter>,
    /// A flow counts if its last packet is at most this old.
    pub active_ms: u32,
    /// One pass over a worker's cache takes about this long.
    pub period_ms: u32,
    /// Matching flows kept per worker and pass (beyond: counted).
    pub max_hits: usize,
}

/// One matching flow and the filters it matched (bit i: filter i).
#[derive(Clone, Copy, Debug)]
pub struct WatchHit {
    pub flow: FlowSeen,
    pub filters: u64,
}

/// What one worker found in one complete pass.
#[derive(Clone, Debug, Default)]
pub struct WatchPass {
    /// The spec generation it was made under.
    pub generation: u64,
    /// Features' clock (ns) at the pass's start and end.
    pub started_ns: u64,
    pub done_ns: u64,
    /// Slots read and live flows seen (matching or not).
    pub slots: u64,
    pub live: u64,
    /// Matching flows per filter and input interface: `counts[filter * ifs + in_if]`.
    pub counts: Vec<u64>,
    pub ifs: usize,
    pub hits: Vec<WatchHit>,
    pub truncated: u64,
}

impl WatchPass {
    pub fn count(&self, filter: usize, in_if: usize) -> u64 {
        if in_if >= self.ifs {
            return 0;
        }
        self.counts
            .get(filter * self.ifs + in_if)
            .copied()
            .unwrap_or(0)
    }
}

/// The spec the workers follow and the passes they published, one slot per worker.
#[derive(Default)]
pub struct FlowWatch {
    spec: ArcSwapOption<WatchSpec>,
    generation: AtomicU64,
    passes: Mutex<Vec<Option<WatchPass>>>,
    /// Passes completed by all workers, and how many found the passes being read and waited.
    pub passes_done: AtomicU64,
    pub publish_deferred: AtomicU64,
}

impl FlowWatch {
    /// Starts (or stops, with None) the workers' scans; passes of an older spec are dropped.
    pub fn set(&self, spec: Option<WatchSpec>) {
        if self.spec.load().as_deref() == spec.as_ref() {
            return;
        }
        self.spec.store(spec.map(Arc::new));
        let mut p = self.passes.lock().unwrap_or_else(|e| e.into_inner());
        let g = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        p.iter_mut().for_each(|s| {
            if s.as_ref().is_some_and(|x| x.generation != g) {
                *s = None
            }
        });
    }

    pub fn spec(&self) -> Option<Arc<WatchSpec>> {
        self.spec.load_full()
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The latest pass of each worker under the current spec (workers keep publishing while
    /// `f` runs: keep it short).
    pub fn read<R>(&self, f: impl FnOnce(&[Option<WatchPass>]) -> R) -> R {
        let p = self.passes.lock().unwrap_or_else(|e| e.into_inner());
        f(&p)
    }
}

/// A worker's walk over its cache under the current spec.
#[derive(Default)]
pub struct Scanner {
    generation: u64,
    spec: Option<Arc<WatchSpec>>,
    cursor: usize,
    last_ns: u64,
    pass: WatchPass,
    /// A finished pass the worker could not publish yet (the passes were being read).
    unpublished: bool,
}

/// Slots read per step: at least this many (a pass always moves) and at most this many (a step
/// never holds the worker long: 64K metadata reads are some 100-200 us).
const MIN_STEP: usize = 64;
const MAX_STEP: usize = 65_536;

impl Scanner {
    /// One slice of the pass (called between vectors). `ifs`: the interface count, for the
    /// per-interface counts.
    pub fn step(
        &mut self,
        cache: &FlowCache,
        watch: &FlowWatch,
        worker: usize,
        now_ns: u64,
        ifs: usize,
    ) {
        let g = watch.generation();
        if g != self.generation {
            self.generation = g;
            self.spec = watch.spec();
            self.start(now_ns, ifs);
            self.unpublished = false;
        }
        if self.spec.is_none() {
            return;
        }
        if self.unpublished {
            self.publish(watch, worker, now_ns, ifs);
            return;
        }
        // Borrowed field by field: no reference count taken per vector on the spec every
        // worker shares.
        let Scanner {
            spec: Some(spec),
            cursor,
            last_ns,
            pass,
            ..
        } = self
        else {
            return;
        };
        let slots = cache.stats().slots as usize;
        let elapsed = now_ns.saturating_sub(*last_ns);
        *last_ns = now_ns;
        let period_ns = u64::from(spec.period_ms.max(1)) * 1_000_000;
        let budget = ((slots as u128 * elapsed as u128) / period_ns as u128) as usize;
        let budget = budget.clamp(MIN_STEP, MAX_STEP);
        let from = *cursor;
        let nf = spec.filters.len().min(MAX_FILTERS);
        let next = cache.scan(from, budget, now_ns, spec.active_ms, &mut |f| {
            pass.live += 1;
            let key = classify_key(f);
            let in_if = f.key.in_if as usize;
            let mut mask = 0u64;
            for (i, filt) in spec.filters[..nf].iter().enumerate() {
                if filt.matches(f, &key) {
                    mask |= 1 << i;
                    // An interface added since the pass began has no row yet.
                    if in_if < pass.ifs {
                        pass.counts[i * pass.ifs + in_if] += 1;
                    }
                }
            }
            if mask != 0 {
                if pass.hits.len() < spec.max_hits {
                    pass.hits.push(WatchHit {
                        flow: *f,
                        filters: mask,
                    });
                } else {
                    pass.truncated += 1;
                }
            }
        });
        self.pass.slots += (if next == 0 { slots } else { next } - from) as u64;
        self.cursor = next;
        if next == 0 {
            self.pass.done_ns = now_ns;
            self.publish(watch, worker, now_ns, ifs);
        }
    }

    fn start(&mut self, now_ns: u64, ifs: usize) {
        let nf = self
            .spec
            .as_ref()
            .map_or(0, |s| s.filters.len().min(MAX_FILTERS));
        let p = &mut self.pass;
        p.generation = self.generation;
        p.started_ns = now_ns;
        p.done_ns = 0;
        p.slots = 0;
        p.live = 0;
        p.ifs = ifs;
        p.counts.clear();
        p.counts.resize(nf * ifs, 0);
        p.hits.clear();
        p.truncated = 0;
        self.cursor = 0;
        self.last_ns = now_ns;
    }

    /// Hands the finished pass over (taking the previous one's memory back for the next
    /// pass), or leaves it for a later step if the passes are being read.
    fn publish(&mut self, watch: &FlowWatch, worker: usize, now_ns: u64, ifs: usize) {
        let Ok(mut slots) = watch.passes.try_lock() else {
            self.unpublished = true;
            watch.publish_deferred.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if watch.generation() != self.generation {
            // A new spec came while this pass ran: it is of no use.
            drop(slots);
            self.unpublished = false;
            return;
        }
        if slots.len() <= worker {
            slots.resize_with(worker + 1, || None);
        }
        let old = slots[worker].replace(std::mem::take(&mut self.pass));
        drop(slots);
        watch.passes_done.fetch_add(1, Ordering::Relaxed);
        if let Some(old) = old {
            self.pass = old;
        }
        self.unpublished = false;
        self.start(now_ns, ifs);
    }
}

/// The classifier's key of a flow, so that the filters read as ACL entries do. L2 fields are
/// not in a flow's key and read as 0 (the config refuses filters on them).
pub fn classify_key(f: &FlowSeen) -> Key {
    let mut k = Key::default();
    let k_ = &f.key;
    if k_.v6 {
        k.set(Dim::EtherType, ETHERTYPE_IPV6);
        k.set_src_v6(k_.src);
        k.set_dst_v6(k_.dst);
    } else {
        k.set(Dim::EtherType, ETHERTYPE_IPV4);
        k.set(Dim::Src0, k_.src as u32);
        k.set(Dim::Dst0, k_.dst as u32);
    }
    k.set(Dim::Proto, u32::from(k_.proto));
    k.set(Dim::SrcPort, u32::from(k_.src_port));
    k.set(Dim::DstPort, u32::from(k_.dst_port));
    k.set(Dim::Dscp, u32::from(k_.tos >> 2));
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow::{CacheConfig, FlowKey};
    use std::net::Ipv4Addr;

    const MS: u64 = 1_000_000;

    fn cache_with(flows: &[(Ipv4Addr, u16, u32)], now: u64) -> FlowCache {
        let mut c = FlowCache::new(CacheConfig {
            capacity: 4096,
            active_timeout_ns: 0,
            inactive_timeout_ns: 0,
        });
        for &(src, dport, in_if) in flows {
            for dst in 0..3u32 {
                let k = FlowKey::v4(
                    src,
                    Ipv4Addr::from(0x0a00_0000 + dst),
                    1024,
                    dport,
                    17,
                    0,
                    in_if,
                    Direction::Ingress,
                );
                c.account(&k, k.hash32(), 100, 0, 2, now, &mut |_| {});
            }
        }
        c
    }

    fn slammer() -> FlowFilter {
        FlowFilter {
            rules: vec![Rule::any().ipv4().proto(17).dst_ports(1434, 1434)],
            in_if: None,
            direction: Some(Direction::Ingress),
        }
    }

    /// Steps until one pass is published; returns the steps it took.
    fn run_pass(s: &mut Scanner, c: &FlowCache, w: &FlowWatch, now: &mut u64, dt: u64) -> usize {
        let before = w.passes_done.load(Ordering::Relaxed);
        for n in 1..100_000 {
            *now += dt;
            s.step(c, w, 0, *now, 4);
            if w.passes_done.load(Ordering::Relaxed) > before {
                return n;
            }
        }
        panic!("no pass completed");
    }

    #[test]
    fn a_pass_counts_matching_flows_per_filter_and_interface_and_keeps_them() {
        let mut now = 1_000 * MS;
        let c = cache_with(
            &[
                (Ipv4Addr::new(198, 18, 0, 5), 1434, 1),
                (Ipv4Addr::new(198, 18, 0, 6), 1434, 2),
                (Ipv4Addr::new(198, 18, 0, 7), 80, 1),
            ],
            now,
        );
        let w = FlowWatch::default();
        let mut s = Scanner::default();
        s.step(&c, &w, 0, now, 4); // no spec: nothing happens
        assert_eq!(w.passes_done.load(Ordering::Relaxed), 0);
        let everything = FlowFilter {
            rules: vec![],
            in_if: None,
            direction: None,
        };
        w.set(Some(WatchSpec {
            filters: vec![slammer(), everything],
            active_ms: 5_000,
            period_ms: 100,
            max_hits: 4,
        }));
        run_pass(&mut s, &c, &w, &mut now, MS);
        w.read(|p| {
            let p = p[0].as_ref().expect("published");
            assert_eq!((p.count(0, 1), p.count(0, 2), p.count(1, 1)), (3, 3, 6));
            assert_eq!(p.live, 9);
            assert_eq!(p.slots, c.stats().slots);
            // Six match the slammer filter, nine match everything: four kept, five counted.
            assert_eq!((p.hits.len(), p.truncated), (4, 5));
            assert!(p.hits.iter().all(|h| h.filters & 2 != 0));
        });
    }

    #[test]
    fn a_pass_takes_about_its_period_and_forgets_idle_flows() {
        let mut now = 1_000 * MS;
        let c = cache_with(&[(Ipv4Addr::new(198, 18, 0, 5), 1434, 1)], now);
        let w = FlowWatch::default();
        let mut s = Scanner::default();
        w.set(Some(WatchSpec {
            filters: vec![slammer()],
            active_ms: 2_000,
            period_ms: 500,
            max_hits: 100,
        }));
        // Steps every 10 us: the pass spreads over ~500 ms of them (bounded by MIN_STEP).
        let steps = run_pass(&mut s, &c, &w, &mut now, 10_000);
        let slots = c.stats().slots as usize;
        assert!(
            steps >= slots / MIN_STEP - 1,
            "{steps} steps for {slots} slots"
        );
        // 3 s later the flows are idle past active-ms: the next pass finds none.
        now += 3_000 * MS;
        run_pass(&mut s, &c, &w, &mut now, MS);
        run_pass(&mut s, &c, &w, &mut now, MS);
        w.read(|p| assert_eq!(p[0].as_ref().unwrap().count(0, 1), 0));
    }

    #[test]
    fn a_new_spec_drops_the_old_passes_and_a_busy_reader_defers_publishing() {
        let mut now = 1_000 * MS;
        let c = cache_with(&[(Ipv4Addr::new(198, 18, 0, 5), 1434, 1)], now);
        let w = FlowWatch::default();
        let mut s = Scanner::default();
        let spec = |ms| WatchSpec {
            filters: vec![slammer()],
            active_ms: ms,
            period_ms: 10,
            max_hits: 100,
        };
        w.set(Some(spec(1000)));
        run_pass(&mut s, &c, &w, &mut now, MS);
        w.set(Some(spec(2000)));
        w.read(|p| assert!(p[0].is_none(), "the old spec's pass is gone"));
        // The reader holds the passes while the worker finishes: it defers, then publishes.
        let held = w.passes.lock().unwrap();
        for _ in 0..10_000 {
            now += MS;
            s.step(&c, &w, 0, now, 4);
            if w.publish_deferred.load(Ordering::Relaxed) > 0 {
                break;
            }
        }
        assert!(w.publish_deferred.load(Ordering::Relaxed) > 0);
        drop(held);
        now += MS;
        s.step(&c, &w, 0, now, 4);
        w.read(|p| assert_eq!(p[0].as_ref().unwrap().count(0, 1), 3));
        w.set(None);
        now += MS;
        s.step(&c, &w, 0, now, 4);
        assert!(s.spec.is_none());
    }
}
