//! The running data plane: ports, their queues, and the workers that poll them, all of which can
//! change while frames flow.
//!
//! A port has a fixed set of receive queues (a NIC's RSS queues) and one transmit queue per
//! worker. Receive queues are placed on workers (VPP's rx-placement) and move between them when a
//! worker is added or removed: the old worker hands the queue back between two bursts and the new
//! one takes it, so no frame waiting in it is lost. Transmit queues are made per worker as it
//! starts: for a `mem` port that is a new ring whose far end joins the port's [`PeerRx`].
//!
//! A port can be taken out of service (pulled, in hardware terms) and put back: its interfaces go
//! down, routes through it stop being used, its queues are parked, and nothing else is touched.

pub mod handover;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use dataplane::atm::port::{AtmRx, AtmTx};
use dataplane::atm::{AtmPortState, VcConfig};
use dataplane::counters::MAX_PORTS;
use dataplane::port::mem::{ring, RingRx, RingTx};
use dataplane::port::pcap::{PcapRx, PcapTx, RxReport};
use dataplane::port::replay::{ReplayRx, SinkTx};
use dataplane::port::{RxQueue, TxQueue};
use dataplane::tap::Taps;
use dataplane::worker::{Command, Mailbox, Retired, RxSlot, Worker};
use dataplane::{BufCache, PktBuf, Pool, SharedTables, Snapshot, WorkerCounters};
use fib::EpochDomain;

use crate::config::{Driver, PortCfg};
use crate::router::{BuildError, Router};

/// How long a worker may take to answer a command before the control plane gives up on it.
const WORKER_REPLY: Duration = Duration::from_secs(5);
/// Slots of an AF_PACKET port's receive ring with `rx-ring: frames` (the default): 8,192 of
/// 2 KiB on a 1,500-byte MTU, 16 MiB per queue, 16 ms of a veth's best rate while a worker is
/// away (the block ring's 8 MiB holds ~60,000 small frames but hands them over late).
const RX_RING_FRAMES: u32 = 8192;

/// The other ends of a `mem` port, for the tester: it sends into `to_router[q]` (receive queue
/// q of the port) and receives from `from_router`, which gathers every worker's transmit ring.
pub struct MemPeer {
    pub name: String,
    pub to_router: Vec<RingTx>,
    pub from_router: PeerRx,
}

/// The far side of a `mem` port's transmit rings, one per worker; rings of workers added later
/// join it, rings of workers removed leave once drained.
pub struct PeerRx {
    rings: Vec<RingRx>,
    inbox: Arc<Inbox>,
    next: usize,
}

#[derive(Default)]
struct Inbox {
    fresh: AtomicBool,
    rings: Mutex<Vec<RingRx>>,
}

impl Inbox {
    fn push(&self, r: RingRx) {
        self.rings.lock().unwrap_or_else(|e| e.into_inner()).push(r);
        self.fresh.store(true, Ordering::Release);
    }
}

impl PeerRx {
    fn new(inbox: Arc<Inbox>) -> Self {
        Self {
            rings: Vec::new(),
            inbox,
            next: 0,
        }
    }

    /// Moves up to `max` frames to `out`, taking from each ring in turn; returns how many.
    pub fn pop_burst(&mut self, out: &mut Vec<PktBuf>, max: usize) -> usize {
        if self.inbox.fresh.load(Ordering::Acquire) {
            self.inbox.fresh.store(false, Ordering::Relaxed);
            let mut new = self.inbox.rings.lock().unwrap_or_else(|e| e.into_inner());
            self.rings.append(&mut new);
        }
        let n = self.rings.len();
        let mut got = 0;
        for i in 0..n {
            if got >= max {
                break;
            }
            let r = (self.next + i) % n;
            got += self.rings[r].pop_burst(out, max - got);
        }
        if n > 0 {
            self.next = (self.next + 1) % n;
        }
        if got == 0 && self.rings.iter().any(|r| r.is_abandoned() && r.is_empty()) {
            self.rings.retain(|r| !(r.is_abandoned() && r.is_empty()));
            self.next = 0;
        }
        got
    }

    /// Rings currently gathered (one per worker serving the port).
    pub fn rings(&self) -> usize {
        self.rings.len()
    }
}

impl RxQueue for PeerRx {
    fn rx_burst(&mut self, _cache: &mut BufCache, out: &mut Vec<PktBuf>, max: usize) -> usize {
        self.pop_burst(out, max)
    }
}

/// Options for starting workers that the config does not carry (the tester sets them).
#[derive(Clone)]
pub struct StartOptions {
    /// Frames each receive ring holds (a NIC's receive descriptor ring).
    pub ring_size: usize,
    /// Frames each transmit ring towards a mem peer holds; None: `ring_size`. The tester makes
    /// these deep: they stand for the wire and the tester's own receive side, which a real
    /// tester never lets overflow.
    pub tx_ring_size: Option<usize>,
    pub idle_yield_after: u32,
    /// Sleep this long (µs) instead of yielding, once idle (`router.idle-sleep-us`); 0: yield.
    pub idle_sleep_us: u32,
    /// Pool to use; a new one of the config's size if None.
    pub pool: Option<Arc<Pool>>,
    /// Benchmarks only: the first `mem` port replays these frames on every worker and every
    /// `mem` port's transmit queue counts and frees (see `dataplane::port::replay`). No peers.
    pub replay: Option<Arc<[Vec<u8>]>>,
    /// Replay copies each frame whole, not just its first 64 bytes: for paths that move the
    /// frame within its buffer (encapsulation, decapsulation), where a buffer's old bytes are
    /// not where the next frame of the same length wants them.
    pub replay_whole: bool,
    /// End workers once every input is drained (capture-file runs); a daemon keeps them.
    pub exit_when_drained: bool,
    /// The punt path to the control plane (ARP/ND, TAP twins); None: workers drop what they
    /// would punt, as in embedded runs.
    pub punt: Option<Arc<dataplane::punt::PuntHub>>,
    /// Ports taken over from the router process before this one (a hitless restart): their
    /// receive queues are held, not polled, until [`Runtime::release_held`].
    pub adopt: Option<handover::Adopted>,
}

impl Default for StartOptions {
    fn default() -> Self {
        Self {
            ring_size: 4096,
            tx_ring_size: None,
            idle_yield_after: 256,
            idle_sleep_us: 0,
            pool: None,
            replay: None,
            replay_whole: false,
            exit_when_drained: true,
            punt: None,
            adopt: None,
        }
    }
}

enum PortDriver {
    Mem {
        inbox: Arc<Inbox>,
    },
    /// The capture file writer, while no worker holds it (only one can), and how reading the
    /// input file ended.
    Pcap {
        tx: Option<Box<dyn TxQueue>>,
        rx_report: Option<Arc<RxReport>>,
    },
    Replay,
    /// A Linux device through AF_PACKET: each worker opens its own transmit socket.
    AfPacket(Arc<dataplane::port::af_packet::AfPacketPort>),
    /// A Linux device through AF_XDP: a transmit queue per worker, bound to the device's
    /// queues in turn (the device's queue count caps the workers that can send on it).
    AfXdp(dataplane::port::af_xdp::AfXdpPort),
    /// Rings in a shared-memory file: a sending ring per worker while the file has one free.
    Shm(dataplane::port::shm::ShmPort),
}

struct PortRt {
    name: String,
    driver: PortDriver,
    /// A port that carries ATM cells: its VCs and their counters, shared by the SAR of each of
    /// its queues (mem ports; a pcap port's records are already PDUs).
    atm: Option<Arc<AtmPortState>>,
    queues: u16,
    in_service: bool,
    /// Receive queues of a port out of service.
    parked: Vec<RxSlot>,
}

struct WorkerRt {
    id: usize,
    core: Option<usize>,
    mailbox: Arc<Mailbox>,
    handle: Option<JoinHandle<()>>,
    counters: Arc<WorkerCounters>,
}

/// Every worker's counters, live and retired.
pub type CounterRegistry = Arc<Mutex<Vec<Arc<WorkerCounters>>>>;

impl Router {
    /// Opens the ports and starts the workers; returns the tester's ends of the mem ports.
    pub fn start(&self, opts: StartOptions) -> Result<(Runtime, Vec<MemPeer>), BuildError> {
        let mut rt = Runtime::start(self, opts)?;
        let peers = rt.take_peers();
        Ok((rt, peers))
    }
}

/// What `show workers` tells about one worker.
#[derive(Clone, Debug)]
pub struct WorkerInfo {
    pub id: usize,
    pub core: Option<usize>,
    /// (port index, queue) pairs it polls.
    pub rx: Vec<(u16, u16)>,
}

/// A router's data plane, started.
pub struct Runtime {
    pub pool: Arc<Pool>,
    pub stop: Arc<AtomicBool>,
    pub taps: Arc<Taps>,
    epoch: Arc<EpochDomain>,
    shared: SharedTables,
    opts: StartOptions,
    ports: Vec<Option<PortRt>>,
    workers: Vec<WorkerRt>,
    /// Counters of every worker ever started, live or removed: totals never go backwards.
    registry: CounterRegistry,
    placement: HashMap<(u16, u16), usize>,
    next_id: usize,
    peers: Vec<MemPeer>,
    /// Receive queues of adopted ports, until the old process lets go of them.
    held: Vec<RxSlot>,
    /// Receive queues handed over to the next process: kept, unpolled, until this one ends.
    handed: Vec<RxSlot>,
}

/// A port's receive queues as the slots of port `idx`, in queue order.
fn slots(idx: u16, qs: Vec<Box<dyn RxQueue>>) -> impl Iterator<Item = RxSlot> {
    qs.into_iter().enumerate().map(move |(q, rq)| RxSlot {
        port: idx,
        queue: q as u16,
        q: rq,
    })
}

fn recv<T>(rx: Receiver<T>, what: &str) -> Result<T, BuildError> {
    rx.recv_timeout(WORKER_REPLY)
        .map_err(|_| BuildError(format!("a worker did not answer ({what})")))
}

impl Runtime {
    /// Opens the ports and starts the workers the config asks for.
    pub fn start(router: &Router, mut opts: StartOptions) -> Result<Runtime, BuildError> {
        if opts.idle_sleep_us == 0 {
            opts.idle_sleep_us = router.cfg.idle_sleep_us;
        }
        let pool = match &opts.pool {
            Some(p) => p.clone(),
            None => Pool::try_new(router.cfg.buffers).map_err(BuildError)?,
        };
        let mut rt = Runtime {
            pool,
            stop: Arc::new(AtomicBool::new(false)),
            taps: Arc::new(Taps::default()),
            epoch: router.epoch.clone(),
            shared: router.shared.clone(),
            opts,
            ports: Vec::new(),
            workers: Vec::new(),
            registry: Default::default(),
            placement: HashMap::new(),
            next_id: 0,
            peers: Vec::new(),
            held: Vec::new(),
            handed: Vec::new(),
        };
        let nw = router.cfg.workers;
        // Flow caches are built here, not by the workers (see `FlowShared`).
        if let Some(f) = &router.shared.load().flow {
            f.prepare(nw);
        }
        let mut first_mem = true;
        let mut rx_of: Vec<Vec<RxSlot>> = (0..nw).map(|_| Vec::new()).collect();
        for (idx, slot) in router.port_slots.iter().enumerate() {
            let Some(name) = slot else {
                rt.ports.push(None);
                continue;
            };
            let pc = router
                .cfg
                .ports
                .iter()
                .find(|p| &p.name == name)
                .expect("slot");
            let replay = matches!(pc.driver, Driver::Mem) && rt.opts.replay.is_some();
            let (port, rx) = if replay {
                let rx = if first_mem {
                    let f = rt.opts.replay.clone().expect("replay");
                    (0..nw)
                        .map(|q| RxSlot {
                            port: idx as u16,
                            queue: q as u16,
                            q: Box::new(ReplayRx::new(
                                f.clone(),
                                rt.pool.capacity(),
                                rt.opts.replay_whole,
                            )),
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                first_mem = false;
                let p = PortRt {
                    name: name.clone(),
                    driver: PortDriver::Replay,
                    atm: None,
                    queues: rx.len() as u16,
                    in_service: true,
                    parked: Vec::new(),
                };
                (p, rx)
            } else {
                rt.open_port(idx as u16, pc, nw, router.atm_vcs(name))?
            };
            for s in rx {
                let w = s.queue as usize % nw;
                rt.placement.insert((s.port, s.queue), w);
                if rt.opts.adopt.is_some() {
                    rt.held.push(s);
                } else {
                    rx_of[w].push(s);
                }
            }
            rt.ports.push(Some(port));
        }
        for (w, rx) in rx_of.into_iter().enumerate() {
            let core = router.cfg.cores.get(w).copied();
            rt.spawn_worker(core, rx)?;
        }
        Ok(rt)
    }

    /// Opens a port's driver: its receive queues (returned, to be placed) and, for mem ports,
    /// the tester's ends.
    fn open_port(
        &mut self,
        idx: u16,
        pc: &PortCfg,
        queues: usize,
        atm_vcs: Vec<VcConfig>,
    ) -> Result<(PortRt, Vec<RxSlot>), BuildError> {
        let mut rx: Vec<RxSlot> = Vec::new();
        let atm = pc
            .atm
            .as_ref()
            .map(|a| AtmPortState::new(atm_vcs, u64::from(a.reassembly_timeout_ms) * 1_000_000));
        let linktype = match atm {
            Some(_) => packet::atm::LINKTYPE_SUNATM,
            None => packet::pcap::LINKTYPE_ETHERNET,
        };
        let driver = match &pc.driver {
            Driver::Pcap { rx: rxf, tx: txf } => {
                let mut rx_report = None;
                if let Some(p) = rxf {
                    let q = PcapRx::open_linktype(p, linktype).map_err(BuildError)?;
                    rx_report = Some(q.report());
                    rx.push(RxSlot {
                        port: idx,
                        queue: 0,
                        q: Box::new(q),
                    });
                }
                let tx = match txf {
                    Some(p) => Some(Box::new(
                        PcapTx::create_linktype(p, &pc.name, linktype).map_err(BuildError)?,
                    ) as Box<_>),
                    None => None,
                };
                PortDriver::Pcap { tx, rx_report }
            }
            Driver::Mem => {
                let inbox = Arc::new(Inbox::default());
                let mut to_router = Vec::new();
                for q in 0..queues.max(1) {
                    let (t, r) = ring(self.opts.ring_size);
                    to_router.push(t);
                    let queue: Box<dyn RxQueue> = match &atm {
                        Some(st) => {
                            Box::new(AtmRx::new(st.clone(), Box::new(r), self.pool.clone()))
                        }
                        None => Box::new(r),
                    };
                    rx.push(RxSlot {
                        port: idx,
                        queue: q as u16,
                        q: queue,
                    });
                }
                self.peers.push(MemPeer {
                    name: pc.name.clone(),
                    to_router,
                    from_router: PeerRx::new(inbox.clone()),
                });
                PortDriver::Mem { inbox }
            }
            Driver::AfPacket {
                device,
                queues,
                frames,
            } => {
                use dataplane::port::af_packet::{AfPacketConfig, AfPacketPort, RxRing};
                let cfg = AfPacketConfig {
                    queues: (*queues).max(1) as usize,
                    rx_ring: if *frames {
                        RxRing::Frames(RX_RING_FRAMES)
                    } else {
                        RxRing::Blocks
                    },
                    ..Default::default()
                };
                let handed = self.opts.adopt.as_ref().and_then(|a| a.take_fds(&pc.name));
                let port = match handed {
                    Some(fds) => AfPacketPort::adopt(device, &cfg, fds),
                    None => {
                        crate::punt::tap::claim_device(device).map_err(|e| {
                            BuildError(format!("port {}: device {device}: {e}", pc.name))
                        })?;
                        AfPacketPort::open(device, &cfg)
                    }
                }
                .map_err(|e| BuildError(format!("port {}: {e}", pc.name)))?;
                rx.extend(slots(idx, port.take_rx_queues()));
                PortDriver::AfPacket(Arc::new(port))
            }
            Driver::AfXdp { device, queues } => {
                use dataplane::port::af_xdp::{AfXdpConfig, AfXdpPort};
                crate::punt::tap::claim_device(device)
                    .map_err(|e| BuildError(format!("port {}: device {device}: {e}", pc.name)))?;
                // Frames land on the device queue the sender's hash picks; an XDP socket sees
                // only the queues it is bound to, so by default bind them all.
                let n = match *queues {
                    0 => dataplane::port::link::link_state(device)
                        .map(|l| l.rx_queues.max(1))
                        .map_err(|e| BuildError(format!("port {}: {e}", pc.name)))?,
                    q => q as u32,
                };
                let cfg = AfXdpConfig {
                    queues: n,
                    ..Default::default()
                };
                let mut port = AfXdpPort::open(device, &cfg)
                    .map_err(|e| BuildError(format!("port {}: {e}", pc.name)))?;
                rx.extend(slots(idx, port.take_rx_queues()));
                PortDriver::AfXdp(port)
            }
            Driver::Shm {
                path,
                server,
                queues: want,
                slots,
                max_frame,
            } => {
                use dataplane::port::shm::{Layout, ShmPort};
                let port = if *server {
                    let layout = Layout {
                        queues: if *want == 0 {
                            queues.max(1) as u32
                        } else {
                            *want as u32
                        },
                        slots: *slots,
                        slot_bytes: *max_frame,
                    };
                    if self.opts.adopt.is_some() && path.exists() {
                        ShmPort::adopt(path)
                    } else {
                        ShmPort::serve(path, layout)
                    }
                } else {
                    ShmPort::connect(path)
                }
                .map_err(|e| {
                    let hint = if *server { "" } else { " (is its server up?)" };
                    BuildError(format!(
                        "port {}: shm file {}: {e}{hint}",
                        pc.name,
                        path.display()
                    ))
                })?;
                for q in 0..port.layout().queues {
                    rx.push(RxSlot {
                        port: idx,
                        queue: q as u16,
                        q: Box::new(port.rx_queue(q)),
                    });
                }
                PortDriver::Shm(port)
            }
        };
        let port = PortRt {
            name: pc.name.clone(),
            driver,
            atm,
            queues: rx.len() as u16,
            in_service: true,
            parked: Vec::new(),
        };
        Ok((port, rx))
    }

    /// A transmit queue on port `idx` for a new (or newly serving) worker.
    fn tx_queue(&mut self, idx: usize) -> Option<Box<dyn TxQueue>> {
        let tx_ring = self.opts.tx_ring_size.unwrap_or(self.opts.ring_size);
        let p = self.ports.get_mut(idx)?.as_mut()?;
        if !p.in_service {
            return None;
        }
        match &mut p.driver {
            PortDriver::Mem { inbox } => {
                let (t, r) = ring(tx_ring);
                inbox.push(r);
                match &p.atm {
                    Some(st) => Some(Box::new(AtmTx::new(
                        st.clone(),
                        Box::new(t),
                        self.pool.clone(),
                    ))),
                    None => Some(Box::new(t)),
                }
            }
            PortDriver::Pcap { tx, .. } => tx.take(),
            PortDriver::Replay => Some(Box::new(SinkTx {
                frames: Arc::new(AtomicU64::new(0)),
            })),
            PortDriver::AfXdp(p) => match p.tx_queue() {
                Ok(q) => Some(q),
                Err(e) => {
                    eprintln!("linerate: port {}: no transmit queue: {e}", p.name());
                    None
                }
            },
            PortDriver::AfPacket(p) => match p.tx_queue() {
                Ok(q) => Some(q),
                Err(e) => {
                    eprintln!("linerate: port {}: no transmit queue: {e}", p.name());
                    None
                }
            },
            PortDriver::Shm(s) => match s.take_tx() {
                Some(q) => Some(Box::new(q)),
                None => {
                    eprintln!(
                        "linerate: port {}: every queue of {} has its sender (more workers than queues)",
                        p.name,
                        s.path().display()
                    );
                    None
                }
            },
        }
    }

    /// Takes a queue back from a worker (the port is going away or out of service).
    fn return_tx(&mut self, idx: usize, q: Box<dyn TxQueue>) {
        if let Some(Some(p)) = self.ports.get_mut(idx) {
            if let PortDriver::Pcap { tx, .. } = &mut p.driver {
                *tx = Some(q);
            }
        }
        // A mem ring dropped here is abandoned: the peer drains what is in it, then lets it go.
    }

    fn spawn_worker(&mut self, core: Option<usize>, rx: Vec<RxSlot>) -> Result<usize, BuildError> {
        if let Some(f) = &self.shared.load().flow {
            f.ensure_spare();
        }
        let id = self.next_id;
        self.next_id += 1;
        let mut tx: Vec<Option<Box<dyn TxQueue>>> = Vec::new();
        for idx in 0..self.ports.len() {
            tx.push(self.tx_queue(idx));
        }
        let counters = Arc::new(WorkerCounters::new(MAX_PORTS));
        self.registry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(counters.clone());
        let mailbox = Arc::new(Mailbox::default());
        let w = Worker {
            id,
            core,
            rx,
            tx,
            cache: BufCache::new(self.pool.clone()),
            tables: self.shared.clone(),
            epoch: self.epoch.register(),
            counters: counters.clone(),
            mailbox: mailbox.clone(),
            stop: self.stop.clone(),
            taps: self.taps.clone(),
            idle_yield_after: self.opts.idle_yield_after,
            idle_sleep: std::time::Duration::from_micros(self.opts.idle_sleep_us.into()),
            exit_when_drained: self.opts.exit_when_drained,
            punt: self.opts.punt.clone(),
        };
        let handle = std::thread::Builder::new()
            .name(format!("worker{id}"))
            .spawn(move || w.run())
            .map_err(|e| BuildError(format!("cannot start worker {id}: {e}")))?;
        self.workers.push(WorkerRt {
            id,
            core,
            mailbox,
            handle: Some(handle),
            counters,
        });
        Ok(id)
    }

    /// The tester's ends of the mem ports opened so far (each handed out once).
    pub fn take_peers(&mut self) -> Vec<MemPeer> {
        std::mem::take(&mut self.peers)
    }

    fn worker(&self, id: usize) -> Option<&WorkerRt> {
        self.workers.iter().find(|w| w.id == id)
    }

    fn take_rx(&self, w: usize, port: u16, queue: Option<u16>) -> Result<Vec<RxSlot>, BuildError> {
        let Some(wr) = self.worker(w) else {
            return Ok(Vec::new());
        };
        let (reply, rx) = channel();
        wr.mailbox.post(Command::TakeRx { port, queue, reply });
        recv(rx, "take a receive queue")
    }

    fn give_rx(&mut self, w: usize, s: RxSlot) {
        self.placement.insert((s.port, s.queue), w);
        if let Some(wr) = self.worker(w) {
            wr.mailbox.post(Command::AddRx(s));
        }
    }

    fn set_tx(
        &self,
        w: usize,
        port: u16,
        tx: Option<Box<dyn TxQueue>>,
    ) -> Result<Option<Box<dyn TxQueue>>, BuildError> {
        let wr = self.worker(w).expect("worker");
        let (reply, rx) = channel();
        wr.mailbox.post(Command::SetTx { port, tx, reply });
        recv(rx, "change a transmit queue")
    }

    /// Places every receive queue of ports in service evenly over the workers, moving only the
    /// queues whose worker changes.
    fn rebalance(&mut self) -> Result<(), BuildError> {
        let ids: Vec<usize> = self.workers.iter().map(|w| w.id).collect();
        if ids.is_empty() {
            return Ok(());
        }
        let mut all: Vec<(u16, u16)> = self.placement.keys().copied().collect();
        all.sort_unstable();
        for (k, (port, queue)) in all.into_iter().enumerate() {
            let want = ids[k % ids.len()];
            let have = self.placement[&(port, queue)];
            if have == want {
                continue;
            }
            for s in self.take_rx(have, port, Some(queue))? {
                self.give_rx(want, s);
            }
        }
        Ok(())
    }

    /// Adds a worker (pinned to `core` if given) and gives it its share of the receive queues.
    pub fn add_worker(&mut self, core: Option<usize>) -> Result<usize, BuildError> {
        let id = self.spawn_worker(core, Vec::new())?;
        self.rebalance()?;
        Ok(id)
    }

    /// Retires worker `id`: its receive queues move to the others first, then it stops.
    pub fn remove_worker(&mut self, id: usize) -> Result<(), BuildError> {
        if self.worker(id).is_none() {
            return Err(BuildError(format!("no worker {id}")));
        }
        if self.workers.len() == 1 {
            return Err(BuildError("the last worker cannot be removed".into()));
        }
        let pos = self.workers.iter().position(|w| w.id == id).expect("found");
        let mut wr = self.workers.remove(pos);
        let (reply, rx) = channel();
        wr.mailbox.post(Command::Retire { reply });
        let Retired { rx: slots, tx } = recv(rx, "retire")?;
        if let Some(h) = wr.handle.take() {
            let _ = h.join();
        }
        // Its queues go to the remaining workers; then spread evenly.
        let first = self.workers[0].id;
        for s in slots {
            self.give_rx(first, s);
        }
        for (port, q) in tx {
            self.return_tx(port as usize, q);
        }
        // A pcap writer it held goes to a worker that has none.
        for idx in 0..self.ports.len() {
            if let Some(Some(PortRt {
                driver: PortDriver::Pcap { tx: Some(_), .. },
                ..
            })) = self.ports.get(idx)
            {
                let q = self.tx_queue(idx);
                if let Some(old) = self.set_tx(first, idx as u16, q)? {
                    self.return_tx(idx, old);
                }
            }
        }
        self.rebalance()
    }

    /// The VCs and SAR counters of port `idx`, if it carries ATM cells.
    pub fn atm_port(&self, idx: usize) -> Option<Arc<AtmPortState>> {
        self.ports.get(idx)?.as_ref()?.atm.clone()
    }

    /// Opens a port added to the config at index `idx` and starts serving it.
    pub fn add_port(
        &mut self,
        idx: u16,
        pc: &PortCfg,
        atm_vcs: Vec<VcConfig>,
    ) -> Result<(), BuildError> {
        let nq = self.workers.len();
        let (port, rx) = self.open_port(idx, pc, nq, atm_vcs)?;
        let i = idx as usize;
        if self.ports.len() <= i {
            self.ports.resize_with(i + 1, || None);
        }
        self.ports[i] = Some(port);
        let ids: Vec<usize> = self.workers.iter().map(|w| w.id).collect();
        for &w in &ids {
            let q = self.tx_queue(i);
            self.set_tx(w, idx, q)?;
        }
        for s in rx {
            let w = ids[s.queue as usize % ids.len()];
            self.give_rx(w, s);
        }
        self.rebalance()
    }

    /// Stops serving port `idx` and closes it (it left the config).
    pub fn remove_port(&mut self, idx: u16) -> Result<(), BuildError> {
        self.out_of_service(idx)?;
        if let Some(p) = self.ports.get_mut(idx as usize) {
            *p = None;
        }
        Ok(())
    }

    /// Takes port `idx` out of service: its queues are parked, nothing else is touched. The
    /// caller has already published tables in which its interfaces are down.
    pub fn out_of_service(&mut self, idx: u16) -> Result<(), BuildError> {
        let ids: Vec<usize> = self.workers.iter().map(|w| w.id).collect();
        let mut parked = Vec::new();
        for &w in &ids {
            parked.extend(self.take_rx(w, idx, None)?);
            if let Some(old) = self.set_tx(w, idx, None)? {
                self.return_tx(idx as usize, old);
            }
        }
        self.placement.retain(|k, _| k.0 != idx);
        let p = self
            .ports
            .get_mut(idx as usize)
            .and_then(|p| p.as_mut())
            .ok_or_else(|| BuildError(format!("no port {idx}")))?;
        p.in_service = false;
        p.parked.extend(parked);
        Ok(())
    }

    /// Puts port `idx` back in service with the queues it had.
    pub fn in_service(&mut self, idx: u16) -> Result<(), BuildError> {
        let i = idx as usize;
        let parked = {
            let p = self
                .ports
                .get_mut(i)
                .and_then(|p| p.as_mut())
                .ok_or_else(|| BuildError(format!("no port {idx}")))?;
            if p.in_service {
                return Ok(());
            }
            p.in_service = true;
            std::mem::take(&mut p.parked)
        };
        let ids: Vec<usize> = self.workers.iter().map(|w| w.id).collect();
        for &w in &ids {
            let q = self.tx_queue(i);
            if let Some(old) = self.set_tx(w, idx, q)? {
                self.return_tx(i, old);
            }
        }
        for s in parked {
            let w = ids[s.queue as usize % ids.len()];
            self.give_rx(w, s);
        }
        self.rebalance()
    }

    pub fn is_in_service(&self, idx: u16) -> bool {
        self.ports
            .get(idx as usize)
            .and_then(|p| p.as_ref())
            .is_some_and(|p| p.in_service)
    }

    /// Receive queues of port `idx`.
    pub fn queues(&self, idx: u16) -> u16 {
        self.ports
            .get(idx as usize)
            .and_then(|p| p.as_ref())
            .map_or(0, |p| p.queues)
    }

    pub fn port_name(&self, idx: u16) -> Option<&str> {
        self.ports
            .get(idx as usize)
            .and_then(|p| p.as_ref())
            .map(|p| p.name.as_str())
    }

    pub fn workers(&self) -> Vec<WorkerInfo> {
        self.workers
            .iter()
            .map(|w| {
                let mut rx: Vec<(u16, u16)> = self
                    .placement
                    .iter()
                    .filter(|(_, &v)| v == w.id)
                    .map(|(k, _)| *k)
                    .collect();
                rx.sort_unstable();
                WorkerInfo {
                    id: w.id,
                    core: w.core,
                    rx,
                }
            })
            .collect()
    }

    /// Each live worker's counters, by worker id.
    pub fn worker_counters(&self) -> Vec<(usize, Arc<WorkerCounters>)> {
        self.workers
            .iter()
            .map(|w| (w.id, w.counters.clone()))
            .collect()
    }

    /// Every worker's counters, live and retired (for totals).
    pub fn all_counters(&self) -> Vec<Arc<WorkerCounters>> {
        self.registry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The list of every worker's counters, which grows as workers are added: for readers that
    /// outlive a snapshot (the tester's drop probe).
    pub fn counter_registry(&self) -> CounterRegistry {
        self.registry.clone()
    }

    /// Totals over all workers, for every port slot.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::sum(&self.all_counters(), self.ports.len().max(1))
    }

    /// How reading each input capture file ends, by port name: a report's error is set once a
    /// file turns out damaged (cut short, an impossible record header).
    pub fn capture_reports(&self) -> Vec<(String, Arc<RxReport>)> {
        self.ports
            .iter()
            .flatten()
            .filter_map(|p| match &p.driver {
                PortDriver::Pcap {
                    rx_report: Some(r), ..
                } => Some((p.name.clone(), r.clone())),
                _ => None,
            })
            .collect()
    }

    /// Waits for workers that stop by themselves (drained capture files).
    pub fn join(mut self) -> Snapshot {
        for w in self.workers.iter_mut() {
            if let Some(h) = w.handle.take() {
                let _ = h.join();
            }
        }
        self.snapshot()
    }

    /// Stops the workers and waits for them to finish (they flush what they hold).
    pub fn stop_and_wait(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for w in self.workers.iter_mut() {
            if let Some(h) = w.handle.take() {
                let _ = h.join();
            }
        }
    }

    pub fn stop(self) -> Snapshot {
        self.stop.store(true, Ordering::Relaxed);
        self.join()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for w in self.workers.iter_mut() {
            if let Some(h) = w.handle.take() {
                let _ = h.join();
            }
        }
    }
}
