//! The punt table's policers: per worker, one token bucket per class ([`super::PuntClass`]),
//! at the rate and burst the config gives ([`PuntLimits`], published with the tables, so a
//! commit changes them under traffic). A bucket is refilled when a frame of its class asks, not
//! per vector: a class that sees no traffic costs nothing.
//!
//! Counts (punted, policed, queue full) are kept per worker and class and written to the
//! worker's counters once per vector, when any moved.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::class::{Limit, PuntClass, CLASSES};
use crate::counters::bump;

/// Every class's limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PuntLimits {
    pub limits: [Limit; CLASSES],
}

impl Default for PuntLimits {
    fn default() -> Self {
        PuntLimits {
            limits: std::array::from_fn(|i| PuntClass::ALL[i].default_limit()),
        }
    }
}

impl PuntLimits {
    pub fn get(&self, c: PuntClass) -> Limit {
        self.limits[c as usize]
    }
}

/// One class's counts within one worker (its only writer).
#[derive(Default, Debug)]
pub struct PuntClassCounters {
    /// Handed to the control plane (or, for the slow path's classes, let through).
    pub punted: AtomicU64,
    /// Over the class's rate: dropped (`PuntPoliced`).
    pub policed: AtomicU64,
    /// The ring to the control plane was full: dropped (`PuntQueueFull`).
    pub queue_full: AtomicU64,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: u64,
    last_ns: u64,
}

/// What happened to a frame, for the counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Punted = 0,
    Policed = 1,
    QueueFull = 2,
}

/// A worker's policers.
pub struct PuntPolicer {
    limits: Arc<PuntLimits>,
    buckets: [Bucket; CLASSES],
    counts: [[u64; 3]; CLASSES],
    moved: bool,
}

impl Default for PuntPolicer {
    fn default() -> Self {
        PuntPolicer::new(Arc::new(PuntLimits::default()))
    }
}

impl PuntPolicer {
    pub fn new(limits: Arc<PuntLimits>) -> Self {
        let buckets = std::array::from_fn(|i| Bucket {
            tokens: limits.limits[i].burst as u64,
            last_ns: 0,
        });
        PuntPolicer {
            limits,
            buckets,
            counts: [[0; 3]; CLASSES],
            moved: false,
        }
    }

    /// Takes up new limits if the tables carry others (one pointer compare per vector). A
    /// class whose limit changed starts with a full burst.
    #[inline]
    pub fn sync(&mut self, limits: &Arc<PuntLimits>) {
        if Arc::ptr_eq(&self.limits, limits) {
            return;
        }
        for (i, b) in self.buckets.iter_mut().enumerate() {
            if limits.limits[i] != self.limits.limits[i] {
                b.tokens = limits.limits[i].burst as u64;
            }
        }
        self.limits = limits.clone();
    }

    /// Whether a frame of `class` may pass at `now_ns`; counts a refusal as policed.
    pub fn admit(&mut self, class: PuntClass, now_ns: u64) -> bool {
        let Limit { rate, burst } = self.limits.limits[class as usize];
        let b = &mut self.buckets[class as usize];
        let rate = rate.max(1) as u128;
        let elapsed = now_ns.saturating_sub(b.last_ns) as u128;
        let earned = elapsed * rate / 1_000_000_000;
        if earned > 0 {
            b.tokens = (b.tokens as u128 + earned).min(burst as u128) as u64;
            // Keep the part of a token not yet earned.
            b.last_ns += (earned * 1_000_000_000 / rate) as u64;
            if b.tokens == burst as u64 {
                b.last_ns = now_ns;
            }
        }
        if b.tokens > 0 {
            b.tokens -= 1;
            true
        } else {
            self.count(class, Outcome::Policed);
            false
        }
    }

    #[inline]
    pub fn count(&mut self, class: PuntClass, o: Outcome) {
        self.counts[class as usize][o as usize] += 1;
        self.moved = true;
    }

    /// Writes the counts to the worker's shared counters.
    #[inline]
    pub fn flush(&mut self, shared: &[PuntClassCounters]) {
        if !self.moved {
            return;
        }
        self.moved = false;
        for (c, s) in self.counts.iter_mut().zip(shared) {
            for (v, a) in c.iter_mut().zip([&s.punted, &s.policed, &s.queue_full]) {
                if *v != 0 {
                    bump(a, *v);
                    *v = 0;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(class: PuntClass, rate: u32, burst: u32) -> Arc<PuntLimits> {
        let mut l = PuntLimits::default();
        l.limits[class as usize] = Limit { rate, burst };
        Arc::new(l)
    }

    #[test]
    fn each_class_passes_its_burst_then_its_rate() {
        let mut p = PuntPolicer::new(limits(PuntClass::Arp, 100, 10));
        let passed = (0..50).filter(|_| p.admit(PuntClass::Arp, 0)).count();
        assert_eq!(passed, 10, "the burst");
        // Another class has its own bucket.
        assert!(p.admit(PuntClass::Bgp, 0));
        // Over two seconds in 1 ms steps, 5 tries each: the rate, nothing more.
        let mut later = 0;
        for ms in 1..=2000u64 {
            for _ in 0..5 {
                later += p.admit(PuntClass::Arp, ms * 1_000_000) as u32;
            }
        }
        assert!((199..=201).contains(&later), "{later}");
        let shared: Vec<PuntClassCounters> =
            (0..CLASSES).map(|_| PuntClassCounters::default()).collect();
        p.flush(&shared);
        let policed = shared[PuntClass::Arp as usize]
            .policed
            .load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(policed, 40 + 10_000 - later as u64);
    }

    #[test]
    fn new_limits_apply_at_once() {
        let mut p = PuntPolicer::new(limits(PuntClass::Ospf, 10, 1));
        assert!(p.admit(PuntClass::Ospf, 0));
        assert!(!p.admit(PuntClass::Ospf, 0));
        p.sync(&limits(PuntClass::Ospf, 1000, 100));
        assert_eq!(
            (0..200).filter(|_| p.admit(PuntClass::Ospf, 0)).count(),
            100
        );
    }
}
