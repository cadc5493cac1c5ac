//! Routes from FRR: zebra's `dplane_fpm_nl` connects to the FPM server (crate `fpm`), whose
//! reader thread decodes frames and queues them; the thread here applies them to the router's
//! FIBs under the management lock, a bounded slice at a time, and publishes.
//!
//! - Next hops: zebra names an interface by kernel ifindex. The router's interfaces are known to
//!   the kernel as their TAP twins, so a twin's ifindex maps to its host name and that to its
//!   interface (after a commit, the new config's twins: [`FpmRoutes::reinstall`]); without
//!   twins (or for an unknown ifindex) a gateway on a connected subnet picks the interface. A
//!   next hop that fits no interface leaves its routes uninstalled (counted).
//! - FPM is a route source of the core (`mgmt::sources`), the weakest: a prefix the config or
//!   the API holds is not replaced (counted as a conflict) nor removed by FPM, and an API route
//!   deleted over an FPM route gives the prefix back to it ([`FpmRoutes::restore`]).
//! - Reconnects and restarts: a new connection marks every FPM route stale; zebra re-sends what
//!   it still has; `stale-time` later whatever was not re-sent is swept. Until then the router
//!   forwards on the routes it had: a restarting FRR costs no traffic.
//! - A config commit builds a new router; [`FpmRoutes::reinstall`] puts the FPM routes into it,
//!   through the twins of the new config.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fpm::{Change, Event, NhSet, Rib, RouteKey};

use crate::config::{FpmCfg, Prefix};
use crate::mgmt::sources::{Adapter, Origin, Refused, RouteSource, RouteWriter};
use crate::mgmt::{ApiResult, Core};
use crate::router::{PathDef, Router};

/// What `show fpm` prints.
pub use api::views::FpmStatus;

/// The FPM routes as the router holds them: zebra's rib and its mapping onto next hops. Lives
/// in the management state, next to the router, so commits can carry it.
pub struct FpmRoutes {
    pub rib: Rib,
    /// Next-hop set id -> the router's next-hop id (None: unresolved).
    sets: Vec<Option<u32>>,
    /// Kernel ifindex of a TAP twin -> its host name (`InterfaceCfg::host_name`).
    twins: HashMap<u32, String>,
    /// Kernel table id -> VRF index.
    tables: HashMap<u32, usize>,
    pub status: FpmStatus,
}

impl FpmRoutes {
    pub fn new(cfg: &FpmCfg, router: &Router, twins: HashMap<u32, String>) -> Self {
        let mut tables = HashMap::new();
        tables.insert(254, 0);
        for (id, vrf) in &cfg.tables {
            if let Some(i) = router.cfg.vrfs.iter().position(|v| v == vrf) {
                tables.insert(*id, i);
            }
        }
        Self {
            rib: Rib::new(),
            sets: Vec::new(),
            twins,
            tables,
            status: FpmStatus {
                listen: cfg.listen.to_string(),
                ..Default::default()
            },
        }
    }

    /// The path a set forwards through, or `None` if some next hop of it fits no interface.
    fn resolve_set(&self, r: &mut RouteWriter<'_>, set: &NhSet) -> Option<PathDef> {
        match set {
            NhSet::Blackhole => Some(PathDef::Blackhole),
            NhSet::Unreachable | NhSet::Prohibit => Some(PathDef::Reject),
            NhSet::Forward(hops) => {
                let mut members = Vec::with_capacity(hops.len());
                for h in hops.iter() {
                    let twin = self.twins.get(&h.ifindex).and_then(|host| {
                        r.cfg().interfaces.iter().position(|i| i.host_name == *host)
                    });
                    let ifx = twin.map(|i| i as u32).or_else(|| {
                        let gw = h.gateway?;
                        // Any VRF: the route's own VRF is checked when it is installed.
                        (0..r.cfg().vrfs.len() as u32).find_map(|v| r.connected_if(v, gw))
                    })?;
                    members.push((r.nh_via(ifx, h.gateway), h.weight));
                }
                Some(PathDef::Members {
                    primary: PathDef::weighted(&members),
                    backup: Box::new([]),
                })
            }
        }
    }

    fn prefix(key: &RouteKey) -> Prefix {
        match key.prefix.addr() {
            IpAddr::V4(a) => Prefix::V4(u32::from(a), key.prefix.len()),
            IpAddr::V6(a) => Prefix::V6(u128::from(a), key.prefix.len()),
        }
    }

    /// Applies the rib's changes to the router's FIBs (the caller publishes).
    pub fn apply_changes(&mut self, r: &mut RouteWriter<'_>, changes: &[Change]) {
        // In runs: first start every FIB miss of the run, then apply it (see
        // `Router::prefetch_route`); 32 changes' lines stay well inside the L1 and L2 caches.
        for run in changes.chunks(32) {
            for c in run {
                if let Change::Upsert { key, .. } | Change::Removed { key } = c {
                    if let Some(&vrf) = self.tables.get(&key.table) {
                        r.prefetch(vrf, Self::prefix(key));
                    }
                }
            }
            for c in run {
                self.apply_change(r, c);
            }
        }
        let c = self.rib.counters();
        self.status.routes = c.routes;
        self.status.labelled = c.labelled;
        self.status.next_hop_sets = self.sets.iter().filter(|s| s.is_some()).count() as u64;
    }

    fn apply_change(&mut self, r: &mut RouteWriter<'_>, c: &Change) {
        match c {
            Change::SetAdded { id, set } => {
                let path = self.resolve_set(r, set).map(|d| r.path_new(d));
                let i = id.0 as usize;
                if self.sets.len() <= i {
                    self.sets.resize(i + 1, None);
                }
                if let Some(old) = std::mem::replace(&mut self.sets[i], path) {
                    r.path_free(old);
                }
            }
            Change::SetChanged { id, set } => {
                // A next-hop object changed: its path changes in place, and every route using
                // it follows without being touched. Only a path that stops or starts fitting
                // an interface takes its routes out or puts them in.
                self.status.next_hop_changes += 1;
                let i = id.0 as usize;
                if self.sets.len() <= i {
                    self.sets.resize(i + 1, None);
                }
                match (self.sets[i], self.resolve_set(r, set)) {
                    (Some(path), Some(def)) => r.path_set(path, def),
                    (Some(path), None) => {
                        self.sets[i] = None;
                        for key in self.rib.routes_using(*id) {
                            if let Some(&vrf) = self.tables.get(&key.table) {
                                if r.remove(vrf, Self::prefix(&key)) {
                                    self.status.routes_removed += 1;
                                }
                            }
                            self.status.unresolved += 1;
                        }
                        r.path_free(path);
                    }
                    (None, Some(def)) => {
                        self.sets[i] = Some(r.path_new(def));
                        for key in self.rib.routes_using(*id) {
                            let set = *id;
                            self.apply_change(
                                r,
                                &Change::Upsert {
                                    key,
                                    set,
                                    replaced: false,
                                },
                            );
                        }
                    }
                    (None, None) => {}
                }
            }
            Change::SetRemoved { id } => {
                if let Some(path) = self.sets.get_mut(id.0 as usize).and_then(Option::take) {
                    r.path_free(path);
                }
            }
            Change::Upsert { key, set, .. } => {
                let (Some(&vrf), Some(Some(nh))) =
                    (self.tables.get(&key.table), self.sets.get(set.0 as usize))
                else {
                    self.status.unresolved += 1;
                    return;
                };
                match r.install(vrf, Self::prefix(key), *nh) {
                    Ok(()) => self.status.routes_installed += 1,
                    Err(Refused::Held) => self.status.conflicts += 1,
                    Err(Refused::Table(_)) => self.status.unresolved += 1,
                }
            }
            Change::Removed { key } => {
                let Some(&vrf) = self.tables.get(&key.table) else {
                    return;
                };
                if r.remove(vrf, Self::prefix(key)) {
                    self.status.routes_removed += 1;
                }
            }
        }
    }
}

impl RouteSource for FpmRoutes {
    fn origin(&self) -> Origin {
        Origin::Fpm
    }

    /// Puts every FPM route into `w`'s router (one a config commit just built), its next hops
    /// matched to interfaces through the new config's twins.
    fn reinstall(&mut self, w: &mut RouteWriter<'_>) {
        if w.cfg().control_plane.taps {
            self.twins = crate::punt::twins::kernel_indexes(w.cfg());
        }
        self.sets.clear();
        let mut changes: Vec<Change> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (key, st) in self.rib.routes() {
            if let Some(set) = st.set {
                if seen.insert(set) {
                    if let Some(s) = self.rib.set(set) {
                        changes.push(Change::SetAdded {
                            id: set,
                            set: s.clone(),
                        });
                    }
                }
                changes.push(Change::Upsert {
                    key,
                    set,
                    replaced: false,
                });
            }
        }
        self.apply_changes(w, &changes);
    }

    /// The API let go of `p`: zebra's route for it, if zebra has one, goes back in.
    fn restore(&mut self, w: &mut RouteWriter<'_>, vrf: usize, p: Prefix) -> bool {
        let (addr, len) = match p {
            Prefix::V4(a, l) => (IpAddr::V4(a.into()), l),
            Prefix::V6(a, l) => (IpAddr::V6(a.into()), l),
        };
        let Some(prefix) = fpm::netlink::Prefix::new(addr, len) else {
            return false;
        };
        let installed = self.status.routes_installed;
        let tables: Vec<u32> = self
            .tables
            .iter()
            .filter(|(_, &v)| v == vrf)
            .map(|(&t, _)| t)
            .collect();
        for table in tables {
            let key = RouteKey { table, prefix };
            if let Some(set) = self.rib.route(&key).and_then(|st| st.set) {
                self.apply_change(
                    w,
                    &Change::Upsert {
                        key,
                        set,
                        replaced: false,
                    },
                );
            }
        }
        self.status.routes_installed > installed
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// Starts serving FPM (zebra's `dplane_fpm_nl`) for `core`: its routes become a route source
/// of the core; `twins` maps the TAP twins' kernel interface indexes to their host names.
pub fn start(core: &Arc<Core>, cfg: &FpmCfg, twins: HashMap<u32, String>) -> Result<(), String> {
    let routes = {
        let s = core.lock("fpm.start");
        FpmRoutes::new(cfg, &s.router, twins)
    };
    core.add_route_source(Box::new(routes));
    let plane = FpmPlane::start(cfg, core)?;
    core.keep_adapter(Box::new(plane));
    Ok(())
}

/// FRR's routes as this router holds them, appended to `out` as netlink messages (for the
/// process that takes over in a hitless restart); how many routes.
pub fn write_table(s: &crate::mgmt::State, out: &mut Vec<u8>) -> usize {
    s.sources
        .iter()
        .find_map(|src| src.as_any().downcast_ref::<FpmRoutes>())
        .map_or(0, |f| {
            f.rib.write_messages(out);
            f.rib.counters().routes as usize
        })
}

/// FPM's route source in a process that takes over, filled with the routes the old process
/// held (`table`, from [`write_table`]) and published, before the server starts
/// ([`start_server`]): the new process forwards to FRR's routes from its first frame, and
/// zebra's re-sending after it reconnects changes nothing but what changed meanwhile (the rest
/// is swept after `stale-time`, as after any reconnect). How many routes.
pub fn install_table(
    core: &Arc<Core>,
    cfg: &FpmCfg,
    twins: HashMap<u32, String>,
    table: &[u8],
) -> Result<u64, String> {
    let msgs = fpm::netlink::decode::messages(table)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the FPM table handed over: {e:?}"))?;
    let routes = {
        let s = core.lock("fpm.install");
        FpmRoutes::new(cfg, &s.router, twins)
    };
    core.add_route_source(Box::new(routes));
    core.with_route_source("fpm.install", |f: &mut FpmRoutes, w| {
        let mut changes = Vec::new();
        for chunk in msgs.chunks(SLICE) {
            changes.clear();
            f.rib.apply_batch_into(chunk, &mut changes);
            f.apply_changes(w, &changes);
        }
        w.publish().map_err(|e| e.to_string())?;
        Ok(f.status.routes)
    })
    .unwrap_or_else(|| Err("the FPM route source is missing".into()))
}

/// The FPM server for a route source already installed ([`install_table`]).
pub fn start_server(core: &Arc<Core>, cfg: &FpmCfg) -> Result<(), String> {
    let plane = FpmPlane::start(cfg, core)?;
    core.keep_adapter(Box::new(plane));
    Ok(())
}

/// `show fpm`: the FPM session and what it installed.
pub fn status(core: &Core) -> ApiResult<FpmStatus> {
    core.route_source(|f: &FpmRoutes| f.status.clone())
        .map_err(|_| crate::mgmt::ApiError::not_found("FPM is not configured (control-plane.fpm)"))
}

/// The FPM server and the thread that applies what it receives.
pub struct FpmPlane {
    server: Option<fpm::Server>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Messages applied per hold of the management lock (about 10-20 ms of routes)...
const SLICE: usize = 16_384;

/// ...and no more than this long a hold, whatever the messages cost: the API and the punt thread
/// get the lock between holds.
const HOLD_MAX: Duration = Duration::from_millis(20);

/// Publishing rebuilds every lookup subtree the applied routes touched, so its cost grows with the
/// table, not with the batch: at 3M routes, publishing after every slice of zebra's stream spent
/// most of the applier's time rebuilding the same subtrees over and over. So after a publish
/// that took `d`, the next one waits until `PUBLISH_RATIO * d` has passed while more of the
/// stream is queued (publishing stays near a sixth of the applier's time at any table size),
/// and `d` once the queue is empty (the last routes of a burst wait no longer than that; a
/// trickle of updates still costs at most half the applier's time in publishing). A route
/// reaches the workers within a few hundred microseconds of a trickle, and within a second or
/// so in the middle of a multi-million route load.
const PUBLISH_RATIO: u32 = 5;

/// The most a published route may wait for the next publish.
const PUBLISH_MAX_WAIT: Duration = Duration::from_millis(1000);

impl FpmPlane {
    /// Listens on `cfg.listen` and starts applying into `core`'s router.
    pub fn start(cfg: &FpmCfg, core: &Arc<Core>) -> Result<FpmPlane, String> {
        let (server, rx) = fpm::Server::bind(cfg.listen)
            .map_err(|e| format!("FPM server on {}: {e}", cfg.listen))?;
        let stats = server.stats().clone();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let weak = Arc::downgrade(core);
        let stale = Duration::from_secs(cfg.stale_s as u64);
        let thread = std::thread::Builder::new()
            .name("fpm".into())
            .spawn(move || apply_loop(rx, weak, stale, s2, stats))
            .map_err(|e| format!("cannot start the FPM thread: {e}"))?;
        Ok(FpmPlane {
            server: Some(server),
            stop,
            thread: Some(thread),
        })
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Adapter for FpmPlane {
    fn stop(&mut self) {
        FpmPlane::stop(self)
    }
}

impl Drop for FpmPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

fn apply_loop(
    rx: Receiver<Event>,
    core: Weak<Core>,
    stale: Duration,
    stop: Arc<AtomicBool>,
    stats: Arc<fpm::server::Stats>,
) {
    let mut sweep_at: Option<Instant> = None;
    let mut changes: Vec<Change> = Vec::new();
    let mut pending: std::collections::VecDeque<Event> = Default::default();
    // Set while applied routes wait to be published. The last publish ended at `published`
    // and took `took`; see `PUBLISH_RATIO`.
    let mut unpublished = false;
    let mut published = Instant::now();
    let mut took = Duration::ZERO;
    let publish_at = |published: Instant, took: Duration, busy: bool| {
        published
            + if busy {
                (took * PUBLISH_RATIO).min(PUBLISH_MAX_WAIT)
            } else {
                took
            }
    };
    while !stop.load(Ordering::Relaxed) {
        if pending.is_empty() {
            let wait = if unpublished {
                publish_at(published, took, false).saturating_duration_since(Instant::now())
            } else {
                Duration::from_millis(100)
            };
            match rx.recv_timeout(wait) {
                Ok(e) => pending.push_back(e),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        let Some(core) = core.upgrade() else { break };
        let due = sweep_at.is_some_and(|t| Instant::now() >= t);
        let publish_due = unpublished && Instant::now() >= publish_at(published, took, false);
        if pending.is_empty() && !due && !publish_due {
            continue;
        }
        let applied = core.with_route_source("fpm.apply", |f: &mut FpmRoutes, w| {
            let t0 = Instant::now();
            let mut n = 0;
            while n < SLICE && t0.elapsed() < HOLD_MAX {
                let e = match pending.pop_front() {
                    Some(e) => e,
                    None => match rx.try_recv() {
                        Ok(e) => e,
                        Err(_) => break,
                    },
                };
                match e {
                    Event::Connected { peer } => {
                        f.rib.begin_replay();
                        sweep_at = Some(Instant::now() + stale);
                        f.status.connected = true;
                        f.status.peer = Some(peer.to_string());
                    }
                    Event::Batch(msgs) => {
                        n += msgs.len();
                        f.status.messages += msgs.len() as u64;
                        changes.clear();
                        f.rib.apply_batch_into(&msgs, &mut changes);
                        f.apply_changes(w, &changes);
                        f.status.batches += 1;
                    }
                    Event::Idle => {}
                    Event::Disconnected { .. } => f.status.connected = false,
                }
            }
            if sweep_at.is_some_and(|t| Instant::now() >= t) {
                sweep_at = None;
                unpublished = true;
                let gone = f.rib.sweep();
                f.status.stale_sweeps += 1;
                f.status.swept += gone
                    .iter()
                    .filter(|c| matches!(c, Change::Removed { .. }))
                    .count() as u64;
                f.apply_changes(w, &gone);
            }
            f.status.sweep_in_s =
                sweep_at.map(|t| t.saturating_duration_since(Instant::now()).as_secs_f64());
            let snap = stats.snapshot();
            f.status.connections = snap.connections;
            f.status.frames = snap.frames;
            f.status.bytes = snap.bytes;
            f.status.malformed = snap.malformed;
            unpublished |= n > 0;
            // Whether more of the stream is already queued.
            if pending.is_empty() {
                if let Ok(e) = rx.try_recv() {
                    pending.push_back(e);
                }
            }
            let busy = !pending.is_empty();
            if unpublished && Instant::now() >= publish_at(published, took, busy) {
                let p0 = Instant::now();
                if let Err(e) = w.publish() {
                    core.logger.log(
                        crate::syslog::Severity::Error,
                        "FPM",
                        &[],
                        format!("publishing FPM routes: {e}"),
                    );
                }
                took = p0.elapsed();
                published = Instant::now();
                unpublished = false;
                f.status.publishes += 1;
            }
            f.status.unpublished = unpublished;
            f.status.apply_ms += t0.elapsed().as_secs_f64() * 1e3;
        });
        if applied.is_none() {
            pending.clear();
            continue;
        }
        if !pending.is_empty() {
            // The lock is not fair: without a pause this thread would take it straight back
            // from a waiting API call.
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// For tests and `show`: whether FPM is running.
pub type SharedStatus = Arc<Mutex<FpmStatus>>;
