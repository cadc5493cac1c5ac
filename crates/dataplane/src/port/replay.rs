//! A port with no other thread behind it: the receive queue replays a set of frames forever and
//! the transmit queue counts what it is given and frees it. With it a benchmark measures how the
//! packet path scales across workers on a machine with no spare core for a generator (the idea of
//! Click's `fake-iprouter`). The replay's own work, a header rewrite per frame, is charged to the
//! worker; buffers recycle within the worker's cache, so frames arrive warm, unlike frames from
//! another core or a NIC: quote this figure as the path's cost, not as a port's rate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{RxQueue, TxQueue};
use crate::buffer::{BufCache, PktBuf};

pub struct ReplayRx {
    frames: Arc<[Vec<u8>]>,
    next: usize,
    /// Length of the frame each buffer last held: the same length means only the first 64 bytes
    /// (the headers the router rewrites and the frames differ in) need copying again.
    last_len: Vec<u32>,
    /// Copy every frame whole (see [`ReplayRx::new`]).
    whole: bool,
}

impl ReplayRx {
    /// Unless `whole`, `frames` must differ only in their first 64 bytes when they have the
    /// same length, and the path must leave a frame where it found it in its buffer: only
    /// those 64 bytes are copied into a buffer that last held a frame of the same length.
    pub fn new(frames: Arc<[Vec<u8>]>, pool_capacity: usize, whole: bool) -> Self {
        assert!(!frames.is_empty());
        Self {
            frames,
            next: 0,
            last_len: vec![0; pool_capacity],
            whole,
        }
    }
}

impl RxQueue for ReplayRx {
    fn rx_burst(&mut self, cache: &mut BufCache, out: &mut Vec<PktBuf>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Some(mut b) = cache.alloc() else { break };
            let f = &self.frames[self.next % self.frames.len()];
            self.next = self.next.wrapping_add(1);
            let i = b.meta().index as usize;
            if !self.whole && self.last_len.get(i) == Some(&(f.len() as u32)) {
                b.set_len(f.len());
                let h = f.len().min(64);
                b.data_mut()[..h].copy_from_slice(&f[..h]);
            } else {
                b.fill(f);
                if let Some(l) = self.last_len.get_mut(i) {
                    *l = f.len() as u32;
                }
            }
            out.push(b);
            n += 1;
        }
        n
    }
}

/// Counts frames and frees them.
pub struct SinkTx {
    pub frames: Arc<AtomicU64>,
}

impl TxQueue for SinkTx {
    fn tx_burst(&mut self, pkts: &mut Vec<PktBuf>, cache: &mut BufCache) -> usize {
        let n = pkts.len();
        self.frames.fetch_add(n as u64, Ordering::Relaxed);
        cache.free_all(pkts);
        n
    }
}
