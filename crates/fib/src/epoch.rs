//! Quiescent-state reclamation for tables that workers read while the control plane rewrites them.
//!
//! Workers announce the global epoch at the start of every vector (one relaxed load and one
//! release store per 256 packets). Memory retired when the epoch was `e` may be reused once every
//! online reader has announced `e` or later: such a reader started a new vector after the retire,
//! so it can hold no reference into the old memory. This is the QSBR scheme DPDK's rte_rcu and
//! liburcu-qsbr use, reduced to what a run-to-completion worker needs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Marks a reader that holds no references (parked, or between runs).
const OFFLINE: u64 = u64::MAX;

#[derive(Default)]
pub struct EpochDomain {
    global: AtomicU64,
    readers: Mutex<Vec<Weak<ReaderSlot>>>,
}

/// Padded so that readers on different cores never share a cache line.
#[repr(align(128))]
struct ReaderSlot(AtomicU64);

/// One reader's registration; dropped when the worker stops.
pub struct EpochReader {
    slot: Arc<ReaderSlot>,
    domain: Arc<EpochDomain>,
}

impl EpochDomain {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn register(self: &Arc<Self>) -> EpochReader {
        let slot = Arc::new(ReaderSlot(AtomicU64::new(
            self.global.load(Ordering::Acquire),
        )));
        let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        readers.retain(|w| w.strong_count() > 0);
        readers.push(Arc::downgrade(&slot));
        EpochReader {
            slot,
            domain: Arc::clone(self),
        }
    }

    /// Starts a new epoch; memory unlinked before this call is tagged with the returned value.
    pub fn advance(&self) -> u64 {
        self.global.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The epoch memory retired now would be tagged with.
    pub fn current(&self) -> u64 {
        self.global.load(Ordering::Acquire)
    }

    /// Every epoch up to and including the returned one has been left by all online readers.
    pub fn safe_epoch(&self) -> u64 {
        let readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        let mut min = self.global.load(Ordering::Acquire);
        for r in readers.iter().filter_map(Weak::upgrade) {
            let e = r.0.load(Ordering::Acquire);
            if e != OFFLINE {
                min = min.min(e);
            }
        }
        min
    }
}

impl EpochReader {
    /// Declares that this reader holds no reference obtained before this call.
    #[inline]
    pub fn quiescent(&self) {
        let e = self.domain.global.load(Ordering::Acquire);
        // Skip the store when nothing changed: keeps the line in the reader's cache.
        if self.slot.0.load(Ordering::Relaxed) != e {
            self.slot.0.store(e, Ordering::Release);
        }
    }

    /// Whether the reader is online (registered, and not `offline` since its last
    /// `quiescent`): only an online reader's references are waited for.
    pub fn is_online(&self) -> bool {
        self.slot.0.load(Ordering::Relaxed) != OFFLINE
    }

    /// Whether this reader is registered with `domain`.
    pub fn reads(&self, domain: &Arc<EpochDomain>) -> bool {
        Arc::ptr_eq(&self.domain, domain)
    }

    /// The reader will hold no references until its next `quiescent` call.
    pub fn offline(&self) {
        self.slot.0.store(OFFLINE, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_epoch_waits_for_every_online_reader() {
        let d = EpochDomain::new();
        let a = d.register();
        let b = d.register();
        let e = d.advance();
        assert!(d.safe_epoch() < e);
        a.quiescent();
        assert!(d.safe_epoch() < e, "b has not moved on yet");
        b.quiescent();
        assert_eq!(d.safe_epoch(), e);
        let e2 = d.advance();
        b.offline();
        assert!(d.safe_epoch() < e2, "a is still online and behind");
        drop(a);
        assert_eq!(
            d.safe_epoch(),
            e2,
            "dropped and offline readers do not hold memory"
        );
    }
}
