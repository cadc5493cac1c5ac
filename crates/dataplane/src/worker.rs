//! A worker: a pinned thread that polls its receive queues and runs each burst through the packet
//! graph ([`crate::graph`]), then transmits. It reads the tables published by the control plane and announces a quiescent
//! point once per loop, so table memory can be reclaimed behind it. Nothing here allocates, locks
//! or makes a system call per packet (pcap ports do file I/O per burst, by their nature).
//!
//! Which queues a worker polls changes at run time: the control plane posts [`Command`]s to the
//! worker's [`Mailbox`] (a port added or removed, a receive queue moved to another worker, the
//! worker retired). The worker looks at one relaxed flag per loop and handles commands between
//! vectors, so a queue changes hands between two bursts and no frame in it is lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use fib::EpochReader;

use crate::buffer::{BufCache, PktBuf};
use crate::counters::{bump, DropReason, WorkerCounters};
use crate::graph;
use crate::node::{Ctx, VECTOR};
use crate::port::{RxQueue, TxQueue};
use crate::tables::SharedTables;
use crate::tap::Taps;

/// One receive queue of one port, as owned by a worker.
pub struct RxSlot {
    pub port: u16,
    pub queue: u16,
    pub q: Box<dyn RxQueue>,
}

/// What a retiring worker hands back: every queue it owned.
pub struct Retired {
    pub rx: Vec<RxSlot>,
    pub tx: Vec<(u16, Box<dyn TxQueue>)>,
}

/// A change to what a worker polls, applied between two vectors.
pub enum Command {
    /// Start polling this queue.
    AddRx(RxSlot),
    /// Stop polling the queues of `port` (all of them, or only `queue`) and send them back.
    TakeRx {
        port: u16,
        queue: Option<u16>,
        reply: Sender<Vec<RxSlot>>,
    },
    /// Transmit to `port` through `tx` (None: the port is gone); the old queue is sent back,
    /// flushed.
    SetTx {
        port: u16,
        tx: Option<Box<dyn TxQueue>>,
        reply: Sender<Option<Box<dyn TxQueue>>>,
    },
    /// Flush, hand every queue back and end the thread.
    Retire { reply: Sender<Retired> },
}

/// Where the control plane posts commands for one worker.
#[derive(Default)]
pub struct Mailbox {
    pending: AtomicBool,
    cmds: Mutex<Vec<Command>>,
}

impl Mailbox {
    pub fn post(&self, c: Command) {
        self.cmds.lock().unwrap_or_else(|e| e.into_inner()).push(c);
        self.pending.store(true, Ordering::Release);
    }

    fn take(&self) -> Vec<Command> {
        self.pending.store(false, Ordering::Relaxed);
        std::mem::take(&mut *self.cmds.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

pub struct Worker {
    pub id: usize,
    /// Pin to this CPU, if set.
    pub core: Option<usize>,
    pub rx: Vec<RxSlot>,
    /// Transmit queue per port index; None where the port is absent or not served by this worker.
    pub tx: Vec<Option<Box<dyn TxQueue>>>,
    pub cache: BufCache,
    pub tables: SharedTables,
    pub epoch: EpochReader,
    pub counters: Arc<WorkerCounters>,
    pub mailbox: Arc<Mailbox>,
    pub stop: Arc<AtomicBool>,
    /// Capture and trace points (see [`crate::tap`]); one relaxed load per vector when idle.
    pub taps: Arc<Taps>,
    /// Give the CPU away (yield) after this many empty polls; 0 spins forever, as a dedicated
    /// core should. On a machine with fewer cores than threads, yielding keeps the rest alive.
    pub idle_yield_after: u32,
    /// Once idle for `idle_yield_after` polls, sleep this long instead of yielding (zero:
    /// yield). For test beds that run several routers on fewer cores than their workers:
    /// a yielding worker still takes every slice the scheduler offers it.
    pub idle_sleep: std::time::Duration,
    /// End the thread once every receive queue is exhausted (capture-file runs); a daemon's
    /// workers stay for ports added later.
    pub exit_when_drained: bool,
    /// The punt path to the control plane (see [`crate::punt`]); None in embedded runs.
    pub punt: Option<Arc<crate::punt::PuntHub>>,
}

impl Worker {
    /// Runs until `stop` is set, the worker is retired, or (with `exit_when_drained`) every
    /// receive queue is exhausted.
    pub fn run(self) {
        let Worker {
            id,
            core,
            mut rx,
            mut tx,
            cache,
            tables,
            epoch,
            counters,
            mailbox,
            stop,
            taps,
            idle_yield_after,
            idle_sleep,
            exit_when_drained,
            punt,
        } = self;
        if let Some(c) = core {
            core_affinity::set_for_current(core_affinity::CoreId { id: c });
        }
        let mut tcache = arc_swap::Cache::new(tables);
        let icmp_rate = tcache.load().icmp_rate;
        let mut ctx = Ctx::new(cache, tx.len(), icmp_rate);
        ctx.worker = id as u16;
        ctx.taps = Some(taps.clone());
        ctx.punt = punt.map(|h| h.attach(id));
        // The worker's registration with the tables' epoch domain: nodes that read through it
        // (ip-mcast's FIB) borrow it from here for a vector.
        ctx.epoch = Some(epoch);
        let mut orphans: Vec<PktBuf> = Vec::new();
        let mut bridged: Vec<PktBuf> = Vec::new();
        let mut buf: Vec<PktBuf> = Vec::with_capacity(VECTOR * 2);
        let start = Instant::now();
        // The features' clock (shared by all workers) at this worker's start: one clock read per
        // vector gives both the worker's own time and the shared one.
        let clock0 = crate::feature::clock_ns().saturating_sub(start.elapsed().as_nanos() as u64);
        let mut idle = 0u32;
        let mut polls = 0u32;
        loop {
            // Checked busy or idle: a worker whose ports never run dry must still stop.
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(1024) && stop.load(Ordering::Relaxed) {
                break;
            }
            if mailbox.pending.load(Ordering::Acquire) {
                let mut retire = None;
                for c in mailbox.take() {
                    match c {
                        Command::AddRx(s) => rx.push(s),
                        Command::TakeRx { port, queue, reply } => {
                            let (give, keep) = std::mem::take(&mut rx).into_iter().partition(|s| {
                                s.port == port && queue.is_none_or(|q| q == s.queue)
                            });
                            rx = keep;
                            let _ = reply.send(give);
                        }
                        Command::SetTx {
                            port,
                            tx: new,
                            reply,
                        } => {
                            let p = port as usize;
                            if tx.len() <= p {
                                tx.resize_with(p + 1, || None);
                            }
                            if ctx.out.len() <= p {
                                ctx.out
                                    .resize_with(p + 1, || Vec::with_capacity(VECTOR * 2));
                            }
                            let mut old = std::mem::replace(&mut tx[p], new);
                            if let Some(o) = old.as_mut() {
                                o.flush();
                            }
                            let _ = reply.send(old);
                        }
                        Command::Retire { reply } => retire = Some(reply),
                    }
                }
                if let Some(reply) = retire {
                    finish(&mut tx, &mut ctx);
                    let tx = tx
                        .into_iter()
                        .enumerate()
                        .filter_map(|(p, q)| q.map(|q| (p as u16, q)))
                        .collect();
                    let _ = reply.send(Retired { rx, tx });
                    return;
                }
            }
            if let Some(e) = &ctx.epoch {
                e.quiescent();
            }
            let t = &**tcache.load();
            let tapping = taps.armed();
            let mut did = 0;
            for s in rx.iter_mut() {
                let n = s.q.rx_burst(&mut ctx.cache, &mut buf, VECTOR);
                let lost = s.q.take_rx_errors();
                if lost > 0 {
                    bump(&counters.ports[s.port as usize].rx_errors, lost);
                }
                if n == 0 {
                    continue;
                }
                did += n;
                let p = s.port;
                let t0 = start.elapsed().as_nanos() as u64;
                ctx.now_ns = t0;
                ctx.clock_ns = clock0 + t0;
                ctx.icmp.refill(t0);
                ctx.punt_policer.sync(&t.punt);
                ctx.generation = t.generation;
                if t.flow.is_some() || ctx.flows.is_some() || t.acl_log.is_some() {
                    crate::feature::output::housekeeping(&mut ctx, t);
                }
                if tapping {
                    taps.on_rx(&mut ctx, t, p, &mut buf);
                }
                ctx.runtime.begin_vector();
                graph::receive(&mut ctx, t, p, &mut buf);
                let pc = &counters.ports[p as usize];
                bump(&pc.rx_packets, n as u64);
                bump(&pc.rx_bytes, ctx.rx_bytes);
                if tapping {
                    taps.on_tx(&mut ctx);
                }
                transmit(&mut ctx, &mut tx, &counters);
                flush_counters(&mut ctx, &counters);
                bump(&counters.vectors, 1);
                bump(&counters.busy_ns, start.elapsed().as_nanos() as u64 - t0);
            }
            // Frames the control plane injects (its replies, what the kernel sends on a TAP,
            // packets held for a neighbour): one atomic load when there are none.
            if ctx.punt.as_ref().is_some_and(|p| p.inject_pending()) {
                let p = ctx.punt.as_mut().expect("checked");
                did += p.drain_inject(t, &mut ctx.out, &mut bridged, &mut orphans, VECTOR);
                if !bridged.is_empty() {
                    // Into a bridge through its routed interface (ARP, ND and the kernel's
                    // frames out of a BVI): bvi-output switches them to their members.
                    for b in bridged.drain(..) {
                        ctx.frames.push(crate::graph::NodeId::BviOutput, b);
                    }
                    crate::graph::run(&mut ctx, t);
                }
                if !orphans.is_empty() {
                    ctx.drops[DropReason::InterfaceDown as usize] += orphans.len() as u64;
                    ctx.cache.free_all(&mut orphans);
                }
                transmit(&mut ctx, &mut tx, &counters);
                flush_counters(&mut ctx, &counters);
            }
            if did > 0 {
                idle = 0;
                continue;
            }
            idle = idle.saturating_add(1);
            // Flows time out and logged counts fall due on an idle router too.
            if idle.is_multiple_of(4096)
                && (t.flow.is_some() || ctx.flows.is_some() || t.acl_log.is_some())
            {
                ctx.now_ns = start.elapsed().as_nanos() as u64;
                ctx.clock_ns = clock0 + ctx.now_ns;
                crate::feature::output::housekeeping(&mut ctx, t);
            }
            if idle == 64 {
                for q in tx.iter_mut().flatten() {
                    q.flush();
                }
            }
            if exit_when_drained && idle.is_multiple_of(1024) {
                let drained = rx.iter().all(|s| s.q.is_exhausted());
                if drained && !rx.is_empty() {
                    break;
                }
            }
            if idle_yield_after > 0 && idle >= idle_yield_after {
                if idle_sleep.is_zero() {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(idle_sleep);
                }
            } else {
                std::hint::spin_loop();
            }
        }
        finish(&mut tx, &mut ctx);
    }
}

fn finish(tx: &mut [Option<Box<dyn TxQueue>>], ctx: &mut Ctx) {
    ctx.acl_log.flush_all();
    // The flows this worker holds go to the exporter, ended as a flush.
    if let Some(mut fl) = ctx.flows.take() {
        let now = crate::feature::clock_ns();
        let out = &mut fl.out;
        fl.cache.flush(now, &mut |r| out.push(r));
        fl.shared
            .push_all(&mut fl.out, std::time::Duration::from_secs(10));
        // Published after the flush: otherwise `show flows` after a stop reads the counts of
        // up to 250 ms before it (no flows flushed, the cache still full).
        fl.publish_stats(ctx.worker as usize);
    }
    if let Some(e) = &ctx.epoch {
        e.offline();
    }
    for q in tx.iter_mut().flatten() {
        q.flush();
    }
    ctx.cache.flush();
}

/// interface-output: hands each port's transmit vector to its queue.
fn transmit(ctx: &mut Ctx, ports: &mut [Option<Box<dyn TxQueue>>], counters: &WorkerCounters) {
    for (p, out) in ctx.out.iter_mut().enumerate() {
        if out.is_empty() {
            continue;
        }
        let t0 = ctx.runtime.start();
        let offered = out.len();
        let Some(tx) = ports.get_mut(p).and_then(|q| q.as_mut()) else {
            // The port was removed while these frames were on their way to it.
            ctx.drops[DropReason::InterfaceDown as usize] += out.len() as u64;
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
        ctx.runtime.count(graph::TX_ROW, offered, t0);
    }
}

fn flush_counters(ctx: &mut Ctx, c: &WorkerCounters) {
    ctx.punt_policer.flush(&c.punt);
    ctx.runtime.flush(&c.nodes);
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
