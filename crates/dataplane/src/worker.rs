//! A worker: a pinned thread that polls its receive queues and runs each burst through the nodes,
//! then transmits. It reads the tables published by the control plane and announces a quiescent
//! point once per loop, so table memory can be reclaimed behind it. Nothing here allocates, locks
//! or makes a system call per packet (pcap ports do file I/O per burst, by their nature).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use fib::EpochReader;

use crate::buffer::{BufCache, PktBuf};
use crate::counters::{bump, DropReason, WorkerCounters};
use crate::node::{self, Ctx, VECTOR};
use crate::port::PortQueues;
use crate::tables::SharedTables;

pub struct Worker {
    pub id: usize,
    /// Pin to this CPU, if set.
    pub core: Option<usize>,
    pub ports: Vec<PortQueues>,
    pub cache: BufCache,
    pub tables: SharedTables,
    pub epoch: EpochReader,
    pub counters: Arc<WorkerCounters>,
    pub stop: Arc<AtomicBool>,
    /// Give the CPU away (yield) after this many empty polls; 0 spins forever, as a dedicated
    /// core should. On a machine with fewer cores than threads, yielding keeps the rest alive.
    pub idle_yield_after: u32,
}

impl Worker {
    /// Runs until `stop` is set, or until every receive queue is exhausted (capture files).
    pub fn run(self) {
        let Worker {
            id: _,
            core,
            mut ports,
            cache,
            tables,
            epoch,
            counters,
            stop,
            idle_yield_after,
        } = self;
        if let Some(c) = core {
            core_affinity::set_for_current(core_affinity::CoreId { id: c });
        }
        let mut tcache = arc_swap::Cache::new(tables);
        let icmp_rate = tcache.load().icmp_rate;
        let mut ctx = Ctx::new(cache, ports.len(), icmp_rate);
        let mut rx: Vec<PktBuf> = Vec::with_capacity(VECTOR);
        let mut ip4: Vec<PktBuf> = Vec::with_capacity(VECTOR);
        let mut ip6: Vec<PktBuf> = Vec::with_capacity(VECTOR);
        let start = Instant::now();
        let mut idle = 0u32;
        let mut polls = 0u32;
        loop {
            // Checked busy or idle: a worker whose ports never run dry must still stop.
            polls = polls.wrapping_add(1);
            if polls % 1024 == 0 && stop.load(Ordering::Relaxed) {
                break;
            }
            epoch.quiescent();
            let t = &**tcache.load();
            let mut did = 0;
            for p in 0..ports.len() {
                let Some(q) = ports[p].rx.as_mut() else {
                    continue;
                };
                let n = q.rx_burst(&mut ctx.cache, &mut rx, VECTOR);
                if n == 0 {
                    continue;
                }
                did += n;
                let t0 = start.elapsed().as_nanos() as u64;
                ctx.icmp.refill(t0);
                let bytes = node::ethernet::ethernet_input(
                    &mut ctx, t, p as u16, &mut rx, &mut ip4, &mut ip6,
                );
                let pc = &counters.ports[p];
                bump(&pc.rx_packets, n as u64);
                bump(&pc.rx_bytes, bytes);
                if !ip4.is_empty() {
                    node::ip4::ip4_forward(&mut ctx, t, &mut ip4);
                }
                if !ip6.is_empty() {
                    node::ip6::ip6_forward(&mut ctx, t, &mut ip6);
                }
                if !ctx.slow4.is_empty() || !ctx.slow6.is_empty() {
                    node::slow::run(&mut ctx, t);
                }
                transmit(&mut ctx, &mut ports, &counters);
                flush_counters(&mut ctx, &counters);
                bump(&counters.vectors, 1);
                bump(&counters.busy_ns, start.elapsed().as_nanos() as u64 - t0);
            }
            if did > 0 {
                idle = 0;
                continue;
            }
            idle = idle.saturating_add(1);
            if idle == 64 {
                for p in ports.iter_mut() {
                    if let Some(tx) = p.tx.as_mut() {
                        tx.flush();
                    }
                }
            }
            if idle % 1024 == 0 {
                let drained = ports
                    .iter()
                    .all(|p| p.rx.as_ref().is_none_or(|q| q.is_exhausted()));
                if drained && ports.iter().any(|p| p.rx.is_some()) {
                    break;
                }
            }
            if idle_yield_after > 0 && idle >= idle_yield_after {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        epoch.offline();
        for p in ports.iter_mut() {
            if let Some(tx) = p.tx.as_mut() {
                tx.flush();
            }
        }
        ctx.cache.flush();
    }
}

fn transmit(ctx: &mut Ctx, ports: &mut [PortQueues], counters: &WorkerCounters) {
    for (p, out) in ctx.out.iter_mut().enumerate() {
        if out.is_empty() {
            continue;
        }
        let Some(tx) = ports[p].tx.as_mut() else {
            ctx.drops[DropReason::TxQueueFull as usize] += out.len() as u64;
            ctx.cache.free_all(out);
            continue;
        };
        let bytes: usize = out.iter().map(PktBuf::len).sum();
        let before = out.len();
        tx.tx_burst(out, &mut ctx.cache);
        let left: usize = out.iter().map(PktBuf::len).sum();
        let pc = &counters.ports[p];
        bump(&pc.tx_packets, (before - out.len()) as u64);
        bump(&pc.tx_bytes, (bytes - left) as u64);
        if !out.is_empty() {
            ctx.drops[DropReason::TxQueueFull as usize] += out.len() as u64;
            ctx.cache.free_all(out);
        }
    }
}

fn flush_counters(ctx: &mut Ctx, c: &WorkerCounters) {
    for (i, d) in ctx.drops.iter_mut().enumerate() {
        if *d != 0 {
            bump(&c.drops[i], *d);
            *d = 0;
        }
    }
    for (counter, local) in [
        (&c.icmp_sent, &mut ctx.icmp_sent),
        (&c.icmp_rate_limited, &mut ctx.icmp_rate_limited),
        (&c.echo_replies, &mut ctx.echo_replies),
        (&c.slow_path, &mut ctx.slow_path),
    ] {
        if *local != 0 {
            bump(counter, *local);
            *local = 0;
        }
    }
}
