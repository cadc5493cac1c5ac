//! The control plane's side of punt and inject (see `dataplane::punt`): one thread that reads
//! every worker's punt ring, runs the neighbour manager ([`neighbor`]) on ARP and ND, holds and
//! releases packets waiting for a neighbour, passes traffic for the router up the interfaces'
//! TAP twins ([`tap`]) and injects what the kernel sends on them out of the router's ports.
//!
//! A commit may add, remove and renumber interfaces while the thread runs: the twins follow
//! ([`twins`]), and a frame punted under the tables before a commit is read against the list
//! its worker used (each carries its tables' generation), so none goes up the wrong twin.
//!
//! The thread never blocks on a worker: rings are read with a budget per pass, a TAP the kernel
//! does not drain loses frames (counted), and a full inject ring loses frames (counted). When
//! there is nothing to do it sleeps in poll(2) on the TAPs for at most a few milliseconds.

pub mod neighbor;
pub mod tap;
pub mod twins;

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::gtp::direct::Direct;
use dataplane::buffer::{BufCache, Pool};
use dataplane::punt::{ControlLink, Egress, Injected, PuntClass, PuntHub, Punted};
use dataplane::tables::{Rewrite, SharedTables, Tables};
use dataplane::PktBuf;
use packet::ethernet::MacAddr;

use crate::config::NeighborTimers;
use neighbor::{NeighborStats, NeighborView, Neighbors, Out};
pub use tap::{Tap, TwinSpec};
use twins::{Plans, TwinPlan, Twins};

/// Where learned and lost neighbours go: the router's tables, published. `ifx` numbers the
/// interfaces as the tables of `generation` do.
pub trait NeighborSink: Send + 'static {
    fn learned(&self, generation: u64, ifx: u32, ip: IpAddr, mac: MacAddr);
    fn lost(&self, generation: u64, ifx: u32, ip: IpAddr);
}

/// One TAP twin as `show` reports it.
pub use api::views::TapView;

/// What the punt thread last published (every 250 ms and at each neighbour change).
#[derive(Clone, Debug, Default)]
pub struct PuntStatus {
    pub neighbors: Vec<NeighborView>,
    pub stats: NeighborStats,
    pub taps: Vec<TapView>,
    /// Frames for the router on an interface without a TAP twin.
    pub no_tap: u64,
    /// Injected frames lost to a full inject ring (or no worker to send them).
    pub inject_dropped: u64,
    /// Frames punted under tables a commit has since replaced that could not be read against
    /// the new ones (their interface removed or renamed, or a packet waiting for a neighbour,
    /// which the next packet resolves again).
    pub stale: u64,
    /// Multicast data the kernel routed out of the twins (copies of what was punted for pimd,
    /// which the data plane has replicated already): dropped, not sent again.
    pub kernel_mcast: u64,
    /// LLC frames for DLSw dropped because its inbox was full (it fell behind).
    pub dlsw_dropped: u64,
}

pub struct PuntPlane {
    stop: Arc<AtomicBool>,
    /// The thread gives its twins back when it ends.
    handle: Option<JoinHandle<Vec<Tap>>>,
    /// The twins, once the thread has ended.
    ended: Vec<Tap>,
    pub status: Arc<Mutex<PuntStatus>>,
    pub hub: Arc<PuntHub>,
    plans: Plans,
    outbox: Outbox,
    gtpc: GtpcHook,
    dlsw: DlswHook,
}

/// Frames the control plane originates in bulk (a Flexlink's MAC-move updates: one per
/// address), each with the port to leave by. The punt thread sends them a few hundred at a
/// time, while the inject rings have room, so a burst of 100,000 is paced, not dropped.
type Outbox = Arc<Mutex<std::collections::VecDeque<(u16, Vec<u8>)>>>;

/// Frames of the outbox sent per round of the punt thread.
const OUTBOX_BUDGET: usize = 256;

impl PuntPlane {
    /// Starts the punt thread. `taps` is indexed by interface index (None: no twin); `known`
    /// are neighbours already in the tables (resolved by the process this one took over from).
    pub fn start(
        hub: Arc<PuntHub>,
        pool: Arc<Pool>,
        shared: SharedTables,
        timers: NeighborTimers,
        taps: Vec<Option<Tap>>,
        known: Vec<(u32, IpAddr, MacAddr)>,
        sink: Box<dyn NeighborSink>,
    ) -> Result<PuntPlane, String> {
        let mut nb = Neighbors::new(timers);
        let now = Instant::now();
        for (ifx, ip, mac) in known {
            nb.adopt(ifx, ip, mac, now);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let status = Arc::new(Mutex::new(PuntStatus::default()));
        let plans = Plans::default();
        let outbox = Outbox::default();
        let gtpc = GtpcHook::default();
        let dlsw = DlswHook::default();
        let mut th = PuntThread {
            gtpc: gtpc.clone(),
            dlsw: dlsw.clone(),
            dlsw_dropped: 0,
            outbox: outbox.clone(),
            hub: hub.clone(),
            cache: BufCache::new(pool),
            cur: shared.load_full(),
            recent: Vec::new(),
            shared,
            links: Vec::new(),
            nb,
            twins: Twins::new(taps),
            plans: plans.clone(),
            sink,
            status: status.clone(),
            no_tap: 0,
            inject_dropped: 0,
            stale: 0,
            kernel_mcast: 0,
            next_link: 0,
            queriers: Default::default(),
        };
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("punt".into())
            .spawn(move || {
                th.run(&s);
                th.twins.into_taps()
            })
            .map_err(|e| format!("cannot start the punt thread: {e}"))?;
        Ok(PuntPlane {
            stop,
            handle: Some(handle),
            ended: Vec::new(),
            status,
            hub,
            plans,
            outbox,
            gtpc,
            dlsw,
        })
    }

    /// From now on the LLC frames of DLSw's bridge domains (the `sna` class) go to DLSw. Once.
    pub fn serve_dlsw(&self, d: Arc<crate::dlsw::Dlsw>) {
        let _ = self.dlsw.set(d);
    }

    /// A function that queues frames on the outbox ([`PuntPlane::send`]), for a service
    /// thread that outlives no punt plane of its own.
    pub fn sender(&self) -> impl Fn(Vec<(u16, Vec<u8>)>) + Send + 'static {
        let outbox = self.outbox.clone();
        move |frames| {
            outbox
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(frames)
        }
    }

    /// From now on the GGSN's GTP-C requests are answered in this thread ([`Direct`]) instead
    /// of going up the twin to the GTP-C socket. Once: a second call changes nothing.
    pub fn answer_gtpc(&self, d: Direct) {
        let _ = self.gtpc.set(d);
    }

    /// Queues frames to send as they are, each out of its port (in order, paced: see [`Outbox`]).
    pub fn send(&self, frames: impl IntoIterator<Item = (u16, Vec<u8>)>) {
        self.outbox
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(frames);
    }

    /// Frames queued by [`PuntPlane::send`] and not yet handed to a worker.
    pub fn outbox_len(&self) -> usize {
        self.outbox.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Hands over the twins of a commit's tables, before they go live: the thread applies the
    /// plan when it first sees tables of `plan.generation`.
    pub fn plan(&self, plan: TwinPlan) {
        self.plans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(plan);
    }

    pub fn status(&self) -> PuntStatus {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            self.ended = h.join().unwrap_or_default();
        }
    }

    /// Stops the thread and takes its twins (for the process that takes over: a hitless
    /// restart); dropped here they would vanish from the kernel.
    pub fn take_taps(&mut self) -> Vec<Tap> {
        self.stop();
        std::mem::take(&mut self.ended)
    }
}

impl Drop for PuntPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The GGSN's direct GTP-C path, once the daemon has started it.
type GtpcHook = Arc<std::sync::OnceLock<Direct>>;
/// DLSw, once the daemon has started it.
type DlswHook = Arc<std::sync::OnceLock<Arc<crate::dlsw::Dlsw>>>;

struct PuntThread {
    hub: Arc<PuntHub>,
    gtpc: GtpcHook,
    dlsw: DlswHook,
    /// LLC frames DLSw had no room for.
    dlsw_dropped: u64,
    cache: BufCache,
    shared: SharedTables,
    /// The tables the thread works with, and the last few generations before them (to read
    /// frames punted under those).
    cur: Arc<Tables>,
    recent: Vec<Arc<Tables>>,
    links: Vec<ControlLink>,
    nb: Neighbors,
    twins: Twins,
    plans: Plans,
    sink: Box<dyn NeighborSink>,
    status: Arc<Mutex<PuntStatus>>,
    no_tap: u64,
    inject_dropped: u64,
    stale: u64,
    kernel_mcast: u64,
    next_link: usize,
    outbox: Outbox,
    /// The bridges' own IGMP/MLD queriers.
    queriers: crate::querier::Queriers,
}

/// Generations of the tables kept to read frames punted under them: a frame waits in a ring
/// for milliseconds, and commits come seconds apart.
const RECENT: usize = 4;

fn names(t: &Tables) -> Vec<String> {
    t.ifs.iter().map(|i| i.name.clone()).collect()
}

/// Frames read from the rings per pass, so the TAPs and timers get their turn under a flood.
const BUDGET: usize = 1024;

impl PuntThread {
    fn run(&mut self, stop: &AtomicBool) {
        let mut out: Vec<Out> = Vec::new();
        let mut frame = vec![0u8; dataplane::buffer::MAX_FRAME];
        let mut last_tick = Instant::now();
        let mut last_status = Instant::now() - Duration::from_secs(1);
        while !stop.load(Ordering::Relaxed) {
            self.links.extend(self.hub.take_new());
            let mut t = self.refresh(&mut out);
            let now = Instant::now();
            let mut did = 0;
            for li in 0..self.links.len() {
                let mut n = 0;
                while n < BUDGET {
                    let Ok(p) = self.links[li].from_worker.pop() else {
                        break;
                    };
                    n += 1;
                    if p.generation > t.generation {
                        // A worker is on tables this thread has not seen yet.
                        t = self.refresh(&mut out);
                    }
                    let Some((buf, class)) = self.read_against(&t, p) else {
                        continue;
                    };
                    self.punted(&t, buf, class, now, &mut out);
                }
                did += n;
            }
            self.links
                .retain(|l| !(l.is_abandoned() && l.from_worker.is_empty()));
            did += self.read_taps(&t, &mut frame);
            did += self.send_outbox();
            if now.duration_since(last_tick) >= Duration::from_millis(20) {
                let queries = self.queriers.due(&t, now);
                if !queries.is_empty() {
                    self.outbox
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend(queries);
                }
                self.nb.tick(&t, now, &mut out);
                self.nb.scan_next_hops(&t, now, &mut out);
                last_tick = now;
            }
            let changed = out
                .iter()
                .any(|o| matches!(o, Out::Learned { .. } | Out::Lost { .. }));
            self.carry_out(&mut out);
            if changed || now.duration_since(last_status) >= Duration::from_millis(250) {
                self.publish_status(now);
                last_status = now;
            }
            if did == 0 {
                self.wait();
            }
        }
        self.cache.flush();
    }

    /// The current tables; when a commit has replaced them since the last call, the twins take
    /// the commit's plan and the neighbours are renumbered by interface name.
    fn refresh(&mut self, out: &mut Vec<Out>) -> Arc<Tables> {
        let t = self.shared.load_full();
        if t.generation == self.cur.generation {
            return t;
        }
        let old = std::mem::replace(&mut self.cur, t.clone());
        let (old_names, new_names) = (names(&old), names(&t));
        let mut mine: Vec<TwinPlan> = {
            let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
            let (mine, later) = std::mem::take(&mut *plans)
                .into_iter()
                .partition(|p| p.generation <= t.generation);
            *plans = later;
            mine
        };
        mine.sort_by_key(|p| p.generation);
        if mine.is_empty() {
            let hosts = twins::carried_hosts(&self.twins.hosts(), &old_names, &new_names);
            self.twins.apply(TwinPlan {
                generation: t.generation,
                hosts,
                new: Vec::new(),
            });
        }
        for p in mine {
            self.twins.apply(p);
        }
        self.nb
            .renumber(|ifx| twins::renumbered(&old_names, &new_names, ifx), out);
        self.recent.push(old);
        if self.recent.len() > RECENT {
            self.recent.remove(0);
        }
        t
    }

    /// A punted frame with its indexes in the numbering of `t`; None (freed and counted) if it
    /// was punted under older tables and cannot be read against these.
    fn read_against(&mut self, t: &Tables, p: Punted) -> Option<(PktBuf, PuntClass)> {
        let Punted {
            mut buf,
            class,
            generation,
            ..
        } = p;
        if generation == t.generation {
            return Some((buf, class));
        }
        let ifx = match self.recent.iter().find(|r| r.generation == generation) {
            // The next hop a glean names is an index into the old tables' next hops.
            Some(old) if class != PuntClass::Glean => {
                twins::renumbered(&names(old), &names(t), buf.meta().rx_if)
            }
            _ => None,
        };
        match ifx {
            Some(ifx) => {
                buf.meta_mut().rx_if = ifx;
                Some((buf, class))
            }
            None => {
                self.stale += 1;
                self.cache.free(buf);
                None
            }
        }
    }

    fn punted(
        &mut self,
        t: &Tables,
        b: PktBuf,
        class: PuntClass,
        now: Instant,
        out: &mut Vec<Out>,
    ) {
        let ifx = b.meta().rx_if;
        match class {
            PuntClass::Glean => return self.nb.glean(t, b, now, out),
            PuntClass::Arp | PuntClass::Nd => {
                let l3 = b.meta().l3_off as usize;
                let d = b.data();
                let et = if l3 >= 14 {
                    u16::from_be_bytes([d[l3 - 2], d[l3 - 1]])
                } else {
                    0
                };
                let src_mac = MacAddr(d[6..12].try_into().expect("ethernet-input checked"));
                let copy = match et {
                    0x0806 => self.nb.on_arp(t, ifx, &d[l3..], now, out),
                    0x86dd => self.nb.on_nd(t, ifx, src_mac, &d[l3..], now, out),
                    _ => false,
                };
                if copy {
                    self.up_to_kernel(t, ifx, &b);
                }
            }
            PuntClass::GtpC => match self.gtpc.get().and_then(|d| d.handle(b.data())) {
                Some(answers) => {
                    let to = t.ifs.get(ifx as usize).map(Egress::of);
                    for a in answers {
                        self.send_frame(&a, to);
                    }
                }
                None => self.up_to_kernel(t, ifx, &b),
            },
            PuntClass::Sna if self.dlsw.get().is_some() => {
                let d = self.dlsw.get().expect("checked");
                if !d.lan_frame(b.meta().rx_port, b.data()) {
                    self.dlsw_dropped += 1;
                }
            }
            // Everything else, routing protocols and L2 control frames alike, goes up the
            // interface's twin to the kernel and the daemons listening there.
            _ => self.up_to_kernel(t, ifx, &b),
        }
        self.cache.free(b);
    }

    /// Writes a punted frame to the TAP twin of interface `ifx`, without its VLAN tag (the
    /// twin stands for the sub-interface itself).
    fn up_to_kernel(&mut self, t: &Tables, ifx: u32, b: &PktBuf) {
        let Some((tap, v)) = self.twins.get(ifx) else {
            self.no_tap += 1;
            return;
        };
        let d = b.data();
        let sub = t.ifs.get(ifx as usize).is_some_and(|i| i.vlan.is_some());
        let ok = match sub.then(|| packet::ethernet::without_tag(d)).flatten() {
            Some(f) => tap.write(&f),
            None => tap.write(d),
        };
        if ok {
            v.to_kernel += 1;
        } else {
            v.to_kernel_dropped += 1;
        }
    }

    /// What the kernel sends on the twins goes out of their interfaces' ports.
    fn read_taps(&mut self, t: &Tables, frame: &mut [u8]) -> usize {
        let mut did = 0;
        for (ifx, ifc) in t.ifs.iter().enumerate() {
            let (to, vlan) = (Egress::of(ifc), ifc.vlan);
            for _ in 0..64 {
                let Some((tap, view)) = self.twins.get(ifx as u32) else {
                    break;
                };
                let Some(n) = tap.read(frame) else {
                    break;
                };
                did += 1;
                view.from_kernel += 1;
                if n < 14 {
                    continue;
                }
                if kernel_routed_mcast(&frame[..n]) {
                    self.kernel_mcast += 1;
                    continue;
                }
                let Some(mut b) = self.cache.alloc() else {
                    self.inject_dropped += 1;
                    continue;
                };
                let ok = match vlan {
                    None => b.fill(&frame[..n]),
                    Some(v) => b.fill(&packet::ethernet::with_dot1q(&frame[..n], v)),
                };
                if ok {
                    self.inject(b, to);
                } else {
                    self.cache.free(b);
                    self.inject_dropped += 1;
                }
            }
        }
        did
    }

    /// Sends up to [`OUTBOX_BUDGET`] frames of the outbox, leaving each inject ring half free
    /// for the frames the kernel and the neighbour manager send.
    fn send_outbox(&mut self) -> usize {
        let room: usize = self
            .links
            .iter()
            .map(|l| {
                l.to_worker
                    .slots()
                    .saturating_sub(l.to_worker.buffer().capacity() / 2)
            })
            .sum();
        let mut n = 0;
        while n < OUTBOX_BUDGET.min(room) {
            let Some((port, frame)) = self
                .outbox
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front()
            else {
                break;
            };
            n += 1;
            let Some(mut b) = self.cache.alloc() else {
                self.inject_dropped += 1;
                continue;
            };
            if b.fill(&frame) {
                self.inject(b, Egress::Port(port));
            } else {
                self.cache.free(b);
                self.inject_dropped += 1;
            }
        }
        n
    }

    /// A frame the control plane made, out of `to` (dropped and counted without a way out or a
    /// buffer).
    fn send_frame(&mut self, frame: &[u8], to: Option<Egress>) {
        let Some(to) = to else {
            self.inject_dropped += 1;
            return;
        };
        let Some(mut b) = self.cache.alloc() else {
            self.inject_dropped += 1;
            return;
        };
        if b.fill(frame) {
            self.inject(b, to);
        } else {
            self.cache.free(b);
            self.inject_dropped += 1;
        }
    }

    fn inject(&mut self, b: PktBuf, to: Egress) {
        let n = self.links.len();
        if n == 0 {
            self.inject_dropped += 1;
            return self.cache.free(b);
        }
        // Spread over the workers, so one busy worker does not delay the control plane's frames.
        self.next_link = (self.next_link + 1) % n;
        if let Err(rtrb::PushError::Full(i)) = self.links[self.next_link]
            .to_worker
            .push(Injected { buf: b, to })
        {
            self.inject_dropped += 1;
            self.cache.free(i.buf);
        }
    }

    fn carry_out(&mut self, out: &mut Vec<Out>) {
        for o in std::mem::take(out) {
            match o {
                Out::Send { to, frame } => self.send_frame(&frame, Some(to)),
                Out::Learned { ifx, ip, mac } => {
                    self.sink.learned(self.cur.generation, ifx, ip, mac);
                    let t = self.cur.clone();
                    let (_, held) = self.nb.release(ifx, ip);
                    for b in held {
                        self.send_held(&t, ifx, mac, b);
                    }
                }
                Out::Lost { ifx, ip } => self.sink.lost(self.cur.generation, ifx, ip),
                Out::Free(b) => self.cache.free(b),
            }
        }
    }

    /// Finishes forwarding a held packet and sends it.
    fn send_held(&mut self, t: &Tables, ifx: u32, mac: MacAddr, mut b: PktBuf) {
        match finish_held(t, ifx, mac, &mut b) {
            Some(to) => self.inject(b, to),
            None => self.cache.free(b),
        }
    }

    fn publish_status(&mut self, now: Instant) {
        let taps = self.twins.views(&names(&self.cur));
        let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        s.neighbors = self.nb.view(now);
        s.stats = self.nb.stats;
        s.taps = taps;
        s.no_tap = self.no_tap;
        s.inject_dropped = self.inject_dropped;
        s.stale = self.stale;
        s.kernel_mcast = self.kernel_mcast;
        s.dlsw_dropped = self.dlsw_dropped;
    }

    /// Sleeps until a worker punts (the hub's doorbell), a TAP has a frame, or 2 ms pass (what
    /// other threads hand over, queries and frames for the outbox, waits for that).
    fn wait(&self) {
        let mut fds: Vec<libc::pollfd> = self
            .twins
            .fds()
            .chain(self.hub.doorbell.as_ref().map(|d| d.fd()))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if let Some(d) = &self.hub.doorbell {
            if !d.sleep_unless(|| self.links.iter().any(|l| !l.from_worker.is_empty())) {
                return;
            }
        }
        if fds.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        } else {
            // SAFETY: `fds` is a live array of pollfd of the given length.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 2) };
        }
        if let Some(d) = &self.hub.doorbell {
            d.woke();
        }
    }
}

/// Finishes forwarding a packet held for a neighbour on interface `ifx` now known at `mac`:
/// the workers stopped before the hop-limit decrement (due unless the router generated the
/// packet: `hop_done`) and the L2 rewrite. Returns the way out (a port, or a bridge), or None if the
/// interface is gone or the frame cannot take the header.
/// Whether a frame the kernel sent on a twin is multicast data it routed: to a group wider than
/// the link and neither IGMP/MLD nor PIM. The kernel sees such packets only because the data
/// plane punted them (an unknown (S,G)'s first packets, keepalive copies) after, or instead of,
/// forwarding them itself; sending the kernel's copies too would duplicate them. Nothing else
/// on the twins' side sends to such groups (applications on the router are not multicast
/// sources).
fn kernel_routed_mcast(f: &[u8]) -> bool {
    // The kernel writes untagged frames to a twin (the VLAN tag is added on the way out).
    let et = u16::from_be_bytes([f[12], f[13]]);
    let h = &f[14..];
    match et {
        0x0800 if h.len() >= 20 => {
            let dst = &h[16..20];
            dst[0] >> 4 == 14 && dst[..3] != [224, 0, 0] && !matches!(h[9], 2 | 103)
        }
        0x86dd if h.len() >= 40 => {
            h[24] == 0xff
                && h[25] & 0x0f > 2
                && !matches!(
                    dataplane::punt::class_ip6(h),
                    dataplane::punt::PuntClass::IgmpMld | dataplane::punt::PuntClass::Pim
                )
        }
        _ => false,
    }
}

fn finish_held(t: &Tables, ifx: u32, mac: MacAddr, b: &mut PktBuf) -> Option<Egress> {
    let ifc = t.ifs.get(ifx as usize)?;
    let l3 = b.meta().l3_off as usize;
    let v4 = b.data().get(l3).is_some_and(|v| v >> 4 == 4);
    let decrement = !b.meta().hop_done;
    let h = &mut b.data_mut()[l3..];
    if decrement && v4 && h.len() >= 20 {
        let old = u16::from_be_bytes([h[8], h[9]]);
        h[8] = h[8].saturating_sub(1);
        let new = u16::from_be_bytes([h[8], h[9]]);
        let c = packet::checksum::update16(u16::from_be_bytes([h[10], h[11]]), old, new);
        h[10..12].copy_from_slice(&c.to_be_bytes());
    } else if decrement && !v4 && h.len() >= 40 {
        h[7] = h[7].saturating_sub(1);
    }
    let et = if v4 { 0x0800 } else { 0x86dd };
    let rw = Rewrite::ethernet(mac, ifc.mac, ifc.vlan, et);
    dataplane::node::rewrite_l2(b, &rw).then_some(Egress::of(ifc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane::buffer::{BufCache, Pool};
    use dataplane::tables::Interface;

    const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const PEER: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

    fn tables() -> Tables {
        let mut t = Tables::empty(16);
        t.ifs = vec![Interface {
            name: "p0".into(),
            port: 3,
            vlan: None,
            s_vlan: None,
            mac: MAC,
            mtu: 1500,
            vrf: 0,
            up: true,
            v4: vec![(0xC000_0201, 24)],
            v6: vec![],
            punt_local: true,
            l2: None,
            bvi: None,
        }]
        .into_boxed_slice();
        t
    }

    fn ifc(name: &str, port: u16, addr: u32) -> Interface {
        Interface {
            name: name.into(),
            port,
            vlan: None,
            s_vlan: None,
            mac: MAC,
            mtu: 1500,
            vrf: 0,
            up: true,
            v4: vec![(addr, 24)],
            v6: vec![],
            punt_local: true,
            l2: None,
            bvi: None,
        }
    }

    /// What the punt thread told the router, as (generation, interface index, address).
    #[derive(Clone, Default)]
    struct Told(Arc<Mutex<Vec<(u64, u32, IpAddr)>>>);

    impl NeighborSink for Told {
        fn learned(&self, generation: u64, ifx: u32, ip: IpAddr, _: MacAddr) {
            self.0.lock().unwrap().push((generation, ifx, ip));
        }
        fn lost(&self, _: u64, _: u32, _: IpAddr) {}
    }

    /// An ARP request for the router's `target` from `sender` at PEER, as a worker punts it.
    fn arp_request(cache: &mut BufCache, ifx: u32, sender: u32, target: u32) -> PktBuf {
        let eth = packet::ethernet::Header {
            dst: MacAddr([0xff; 6]),
            src: PEER,
            tags: Default::default(),
            ethertype: 0,
        };
        let r = packet::arp::Repr {
            op: packet::arp::REQUEST,
            sender_mac: PEER,
            sender_ip: sender,
            target_mac: MacAddr([0; 6]),
            target_ip: target,
        };
        let mut b = cache.alloc().unwrap();
        assert!(b.fill(&packet::arp::frame(eth, &r)));
        b.meta_mut().rx_if = ifx;
        b.meta_mut().l3_off = 14;
        b
    }

    /// A commit removes the first of two interfaces, so the second becomes index 0. A frame a
    /// worker punted under the old tables is read against the list it used: the neighbour is
    /// learned on the interface it came in on (now index 0), the router hears of it under the
    /// new numbering, and a frame of the removed interface is counted stale, not misread.
    #[test]
    fn frames_punted_before_a_renumbering_commit_keep_their_interface() {
        let pool = Pool::new(256);
        let mut cache = BufCache::new(pool.clone());
        let mut t1 = Tables::empty(16);
        t1.generation = 1;
        t1.ifs = vec![ifc("a", 0, 0xC000_0201), ifc("b", 1, 0xC633_6401)].into_boxed_slice();
        let shared: SharedTables = Arc::new(arc_swap::ArcSwap::from_pointee(t1));
        let hub = PuntHub::new(dataplane::punt::PuntConfig { ring: 64 });
        let mut worker = hub.attach(0);
        let told = Told::default();
        let timers = crate::config::NeighborTimers {
            reachable_s: 30,
            retransmit_ms: 1000,
            retries: 3,
            hold: 2,
        };
        let mut plane = PuntPlane::start(
            hub,
            pool,
            shared.clone(),
            timers,
            vec![None, None],
            Vec::new(),
            Box::new(told.clone()),
        )
        .unwrap();
        let mut t2 = Tables::empty(16);
        t2.generation = 2;
        t2.ifs = vec![ifc("b", 1, 0xC633_6401)].into_boxed_slice();
        shared.store(Arc::new(t2));
        // Punted by a worker still on generation 1: one on b (index 1 then), one on a.
        let on_b = arp_request(&mut cache, 1, 0xC633_6402, 0xC633_6401);
        let on_a = arp_request(&mut cache, 0, 0xC000_0202, 0xC000_0201);
        for b in [on_b, on_a] {
            assert!(worker.offer(b, PuntClass::Arp, 0, 1).is_ok());
        }
        let b_peer: IpAddr = "198.51.100.2".parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while plane.status().stale == 0 || told.0.lock().unwrap().is_empty() {
            assert!(
                Instant::now() < deadline,
                "the punt thread did not read both"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(*told.0.lock().unwrap(), vec![(2, 0, b_peer)]);
        std::thread::sleep(Duration::from_millis(300));
        let st = plane.status();
        assert_eq!(st.stale, 1);
        assert_eq!(
            st.neighbors
                .iter()
                .map(|n| (n.ifx, n.ip))
                .collect::<Vec<_>>(),
            vec![(0, b_peer)]
        );
        plane.stop();
    }

    /// An IPv4 packet as a worker hands it over: Ethernet header still the received one.
    fn held(cache: &mut BufCache, ttl: u8, hop_done: bool) -> PktBuf {
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&20u16.to_be_bytes());
        ip[8] = ttl;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[192, 0, 2, 1]);
        ip[16..20].copy_from_slice(&[192, 0, 2, 9]);
        let c = packet::checksum::fold(packet::checksum::sum(&ip));
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let mut frame = vec![0u8; 14];
        frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        frame.extend_from_slice(&ip);
        let mut b = cache.alloc().unwrap();
        assert!(b.fill(&frame));
        b.meta_mut().l3_off = 14;
        b.meta_mut().hop_done = hop_done;
        b
    }

    #[test]
    fn a_held_packet_loses_one_hop_only_if_it_was_forwarded() {
        let t = tables();
        let mut cache = BufCache::new(Pool::new(16));
        for (hop_done, want_ttl) in [(false, 63u8), (true, 64)] {
            let mut b = held(&mut cache, 64, hop_done);
            assert_eq!(finish_held(&t, 0, PEER, &mut b), Some(Egress::Port(3)));
            let d = b.data();
            assert_eq!(&d[0..6], &PEER.0, "destination MAC");
            assert_eq!(&d[6..12], &MAC.0, "source MAC");
            let ip = &d[14..34];
            assert_eq!(ip[8], want_ttl, "hop_done {hop_done}");
            assert!(
                packet::checksum::ipv4_header_ok(ip),
                "header checksum still valid"
            );
            cache.free(b);
        }
        let mut b = held(&mut cache, 64, false);
        assert_eq!(finish_held(&t, 5, PEER, &mut b), None, "no such interface");
        cache.free(b);
    }
}
