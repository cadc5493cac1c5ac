//! The router's one typed API: everything that reads or changes a running router goes through
//! [`Core`]. The HTTP/JSON server, the CLI (through the server), the config loader and the
//! tester's scenarios are adapters over it; so will FPM and the event manager be.
//!
//! `Core` owns the control-plane state (the [`Router`] with its tables, the [`Runtime`] with its
//! ports and workers, the config history) behind one lock: commands are serialized, and each
//! records how long it waited for the lock and how long it ran. Workers never take this lock;
//! they read what the commands publish, so reads and changes never pause forwarding.
//!
//! - [`show`]: read-only views (interfaces, ports, routes, neighbours, counters, errors,
//!   workers, logging, metrics).
//! - [`commit`]: the config lifecycle (apply with a diff, history, rollback, commit-confirmed,
//!   persistence in the state folder).
//! - [`ops`]: run-time operations (routes through the API, ports out of and back in service,
//!   workers added and removed, capture, trace, counters cleared).
//! - [`capture_file`]: captured frames as a pcap or pcapng file.

pub mod atm;
pub mod bridges;
pub mod capture_file;
pub mod commit;
pub mod dlsw;
pub mod exposition;
pub mod graph;
pub mod gtp;
mod l3vpn;
mod ldp;
pub mod link_diag;
pub mod mpls;
pub mod mroute;
pub mod ops;
pub mod services;
pub mod show;
pub mod snooping;
pub mod sources;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use dataplane::counters::DROP_COUNT;
use dataplane::Snapshot;
use packet::ethernet::MacAddr;

use crate::config::{Prefix, Target};
use crate::router::Router;
use crate::runtime::Runtime;
use crate::syslog::{Logger, Severity};

pub use api::requests::ApplyOptions;
pub use api::views::ApplyOutcome;
pub use commit::Commit;

/// A failed command and its result, as the API reports them (the types are the API's).
pub use api::{ApiError, ApiResult, ErrorKind};

pub use api::views::CommandStats;

/// Everything the control plane owns.
pub struct State {
    pub router: Router,
    pub runtime: Runtime,
    /// The running config as committed, and the path it was read from (relative paths inside it
    /// are relative to that path's folder).
    pub text: String,
    pub source: PathBuf,
    /// Routes added through the API, by VRF index and prefix; they survive config commits.
    pub api_routes: BTreeMap<(usize, PrefixKey), Target>,
    /// Route sources beside the config and the API (FPM where the daemon serves it), strongest
    /// first (see `sources`).
    pub sources: Vec<Box<dyn sources::RouteSource>>,
    /// ACL entries set (Some) or removed (None) through the API, by list and sequence number;
    /// applied on top of every config committed after them.
    pub acl_edits: BTreeMap<String, BTreeMap<u32, Option<crate::config::services::AclEntryCfg>>>,
    pub history: commit::History,
    /// Counters as they were at the last `clear counters` (shows subtract them; metrics never).
    pub baseline: Snapshot,
    pub worker_baseline: HashMap<usize, [u64; DROP_COUNT]>,
    /// Per worker: the runtime rows at the last `clear runtime` or `clear counters`.
    pub runtime_baseline:
        HashMap<usize, [dataplane::graph::NodeSnapshot; dataplane::graph::NODE_ROWS]>,
}

/// `Prefix` ordered for the API route map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PrefixKey {
    V4(u32, u8),
    V6(u128, u8),
}

impl From<Prefix> for PrefixKey {
    fn from(p: Prefix) -> Self {
        match p {
            Prefix::V4(a, l) => PrefixKey::V4(a, l),
            Prefix::V6(a, l) => PrefixKey::V6(a, l),
        }
    }
}

impl From<PrefixKey> for Prefix {
    fn from(p: PrefixKey) -> Self {
        match p {
            PrefixKey::V4(a, l) => Prefix::V4(a, l),
            PrefixKey::V6(a, l) => Prefix::V6(a, l),
        }
    }
}

/// The router's control plane, shared by every adapter.
pub struct Core {
    state: Mutex<State>,
    pub logger: Arc<Logger>,
    pub started: Instant,
    stats: Mutex<BTreeMap<&'static str, CommandStats>>,
    /// Where the running config and the history persist; None: nothing persists.
    pub state_dir: Option<PathBuf>,
    /// The services' control-plane thread (ACL log records, flow export).
    services_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The punt thread (ARP/ND, TAP twins), in a daemon on real ports.
    pub punt: Mutex<Option<crate::punt::PuntPlane>>,
    /// DLSw, where the config makes the router a DLSw peer (a daemon on real ports).
    pub dlsw: Mutex<Option<Arc<crate::dlsw::Dlsw>>>,
    /// The LDP speaker, where the config has `mpls.ldp` (a daemon on real ports).
    pub ldp: Mutex<Option<Arc<crate::ldp::Ldp>>>,
    /// The FPM server and its applier, where the config asks for FPM.
    /// What adapters keep running (an FPM server), stopped at shutdown.
    pub adapters: Mutex<Vec<Box<dyn sources::Adapter>>>,
    /// The link-state thread, where ports sit on kernel devices.
    pub links: Mutex<Option<crate::link::LinkWatch>>,
    /// The CPU sampler (`show processes cpu`).
    pub cpu: Mutex<Option<crate::cpu::CpuMonitor>>,
    /// The event manager, in a daemon.
    pub events: Mutex<Option<crate::events::EventManager>>,
}

/// A held state lock, which records the command's run time when dropped.
pub struct Locked<'a> {
    guard: MutexGuard<'a, State>,
    core: &'a Core,
    name: &'static str,
    start: Instant,
}

impl std::ops::Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.guard
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.guard
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let run = self.start.elapsed().as_nanos() as u64;
        let mut s = self.core.stats.lock().unwrap_or_else(|e| e.into_inner());
        let e = s.entry(self.name).or_default();
        e.run_ns += run;
        e.max_run_ns = e.max_run_ns.max(run);
    }
}

/// The punt thread's way into the router's tables. Weak: the core owns the punt thread.
pub struct CoreNeighbors(pub std::sync::Weak<Core>);

impl crate::punt::NeighborSink for CoreNeighbors {
    fn learned(&self, generation: u64, ifx: u32, ip: std::net::IpAddr, mac: MacAddr) {
        if let Some(c) = self.0.upgrade() {
            c.neighbor_learned(generation, ifx, ip, mac);
        }
    }
    fn lost(&self, generation: u64, ifx: u32, ip: std::net::IpAddr) {
        if let Some(c) = self.0.upgrade() {
            c.neighbor_lost(generation, ifx, ip);
        }
    }
}

impl Core {
    /// Wraps a built router and its started runtime. `text`/`source` are the config they were
    /// built from (committed as the first history entry unless the history has it already).
    pub fn new(
        router: Router,
        runtime: Runtime,
        text: String,
        source: PathBuf,
        logger: Arc<Logger>,
        state_dir: Option<PathBuf>,
    ) -> ApiResult<Arc<Core>> {
        let history = match &state_dir {
            Some(d) => commit::History::load(d).map_err(ApiError::internal)?,
            None => commit::History::default(),
        };
        let services_thread = crate::services::spawn_thread(
            router.services.plan.clone(),
            router.services.export.clone(),
            logger.clone(),
            router.services.stop.clone(),
        );
        let core = Arc::new(Core {
            services_thread: Mutex::new(Some(services_thread)),
            punt: Mutex::new(None),
            dlsw: Mutex::new(None),
            ldp: Mutex::new(None),
            adapters: Mutex::new(Vec::new()),
            links: Mutex::new(None),
            cpu: Mutex::new(None),
            events: Mutex::new(None),
            state: Mutex::new(State {
                router,
                runtime,
                text,
                source,
                api_routes: BTreeMap::new(),
                sources: Vec::new(),
                acl_edits: BTreeMap::new(),
                history,
                baseline: Snapshot::default(),
                worker_baseline: HashMap::new(),
                runtime_baseline: HashMap::new(),
            }),
            logger,
            started: Instant::now(),
            stats: Mutex::new(BTreeMap::new()),
            state_dir,
        });
        {
            let mut s = core.lock("startup");
            commit::record_startup(&core, &mut s)?;
        }
        let weak = Arc::downgrade(&core);
        let monitor = crate::cpu::CpuMonitor::start(Box::new(move || {
            let core = weak.upgrade()?;
            // Not `lock`: a sample a second is not an API command to time.
            let s = core.state.lock().unwrap_or_else(|e| e.into_inner());
            let cores: HashMap<usize, Option<usize>> = s
                .runtime
                .workers()
                .into_iter()
                .map(|w| (w.id, w.core))
                .collect();
            Some(
                s.runtime
                    .worker_counters()
                    .into_iter()
                    .map(|(id, c)| {
                        let busy = c.busy_ns.load(std::sync::atomic::Ordering::Relaxed);
                        (id, busy, cores.get(&id).copied().flatten())
                    })
                    .collect(),
            )
        }));
        *core.cpu.lock().unwrap_or_else(|e| e.into_inner()) = Some(monitor);
        bridges::spawn_events(Arc::downgrade(&core));
        core.logger.log(
            Severity::Notice,
            "SYSTEM_START",
            &[("version", env!("CARGO_PKG_VERSION").to_string())],
            "linerate started",
        );
        Ok(core)
    }

    /// Installs a neighbour learned by ARP or ND in the router's next hops and publishes them.
    ///
    /// `ifx` numbers interfaces as the tables of `generation` do: news from before a commit
    /// that renumbered them is not applied (the punt thread renumbers its neighbours when it
    /// sees the new tables, and the next packet towards one resolves it again).
    pub fn neighbor_learned(&self, generation: u64, ifx: u32, ip: std::net::IpAddr, mac: MacAddr) {
        let mut s = self.lock("neighbor.learned");
        if s.router.generation != generation {
            return;
        }
        if s.router.neighbor_learned(ifx, ip, mac) {
            if let Err(e) = s.router.publish() {
                self.logger.log(
                    Severity::Error,
                    "NEIGHBOR",
                    &[],
                    format!("publishing a neighbour: {e}"),
                );
            }
        }
    }

    /// A learned neighbour stopped answering: its next hop gleans again.
    pub fn neighbor_lost(&self, generation: u64, ifx: u32, ip: std::net::IpAddr) {
        let mut s = self.lock("neighbor.lost");
        if s.router.generation != generation {
            return;
        }
        if s.router.neighbor_lost(ifx, ip) {
            let _ = s.router.publish();
        }
    }

    /// The kernel device under `port` gained or lost its link: the port's interfaces go
    /// operationally up or down (next hops through them stop being used), and it is logged.
    pub fn link_changed(&self, port: &str, up: bool) {
        let mut s = self.lock("link.changed");
        let lsps_before = s.router.lsp_states();
        let changed = if up {
            s.router.links_down.remove(port)
        } else {
            s.router.links_down.insert(port.to_string())
        };
        if !changed {
            return;
        }
        if let Err(e) = s.router.publish() {
            self.logger
                .log(Severity::Error, "LINK", &[], format!("publishing: {e}"));
        }
        let lsps_after = s.router.lsp_states();
        drop(s);
        self.log_lsp_changes(&lsps_before, &lsps_after);
        // A Flexlink pair this change switched announces its addresses on the new link now,
        // not at the next once-a-second look.
        self.send_flexlink_updates();
        let (id, sev, what) = if up {
            ("LINK_UP", Severity::Notice, "up")
        } else {
            ("LINK_DOWN", Severity::Error, "down")
        };
        self.logger.log(
            sev,
            id,
            &[("port", port.to_string())],
            format!("port {port}: link {what}"),
        );
    }

    /// Whether the punt thread runs (a daemon on real ports).
    pub(crate) fn has_punt_plane(&self) -> bool {
        self.punt
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Runs `f` on the punt thread's handle, if it runs.
    pub(crate) fn with_punt_plane(&self, f: impl FnOnce(&crate::punt::PuntPlane)) {
        if let Some(p) = self.punt.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            f(p)
        }
    }

    /// `show punt`: the punt table (each class's rate, burst, and what it passed, policed and
    /// found the queue full for, summed over every worker that ran), and where there is a punt
    /// path, its TAP twins and neighbour statistics.
    pub fn punt_status(&self) -> ApiResult<api::views::PuntView> {
        use dataplane::punt::PuntClass;
        use std::sync::atomic::Ordering::Relaxed;
        let (limits, counters) = {
            let s = self.lock("show.punt");
            (s.router.services.punt.clone(), s.runtime.all_counters())
        };
        let classes = PuntClass::ALL
            .iter()
            .map(|&k| {
                let sum = |f: fn(
                    &dataplane::punt::PuntClassCounters,
                ) -> &std::sync::atomic::AtomicU64| {
                    counters
                        .iter()
                        .map(|c| f(&c.punt[k as usize]).load(Relaxed))
                        .sum::<u64>()
                };
                let l = limits.get(k);
                api::views::PuntClassView {
                    class: k.name().into(),
                    rate: l.rate.into(),
                    burst: l.burst.into(),
                    punted: sum(|c| &c.punted),
                    policed: sum(|c| &c.policed),
                    queue_full: sum(|c| &c.queue_full),
                    text: k.text().into(),
                }
            })
            .collect();
        let g = self.punt.lock().unwrap_or_else(|e| e.into_inner());
        let Some(p) = g.as_ref() else {
            return Ok(api::views::PuntView {
                classes,
                ..Default::default()
            });
        };
        let st = p.status();
        Ok(api::views::PuntView {
            classes,
            punt_path: true,
            injected: p.hub.counters.injected.load(Relaxed),
            inject_dropped: st.inject_dropped,
            no_tap: st.no_tap,
            stale: st.stale,
            taps: st.taps,
            neighbor_stats: st.stats,
        })
    }

    /// `show processes cpu`: per thread (workers, the router's own, FRR's daemons), CPU used
    /// and work done over 5 s, 1 min and 5 min.
    pub fn cpu(&self) -> ApiResult<crate::cpu::CpuView> {
        let g = self.cpu.lock().unwrap_or_else(|e| e.into_inner());
        let m = g
            .as_ref()
            .ok_or_else(|| ApiError::not_found("the CPU sampler is not running"))?;
        Ok(m.view())
    }

    /// Per thread over the last second: `(name, kind, cpu %, busy %)` (see
    /// `CpuMonitor::latest`); empty without the sampler.
    pub fn cpu_latest(&self) -> Vec<(String, crate::cpu::Kind, f64, f64)> {
        let g = self.cpu.lock().unwrap_or_else(|e| e.into_inner());
        g.as_ref().map(|m| m.latest()).unwrap_or_default()
    }

    /// The router's flow watch (the flow detectors' request to the workers) and each
    /// interface's name by index, as the published tables name them.
    pub fn flow_watch(&self) -> (Arc<dataplane::feature::watch::FlowWatch>, Vec<String>) {
        let s = self.lock("events.flows");
        let names = s
            .router
            .shared
            .load()
            .ifs
            .iter()
            .map(|i| i.name.clone())
            .collect();
        (s.router.services.watch.clone(), names)
    }

    /// Each port and whether its link is down (as the link thread last reported).
    pub fn port_links(&self) -> BTreeMap<String, bool> {
        let s = self.lock("link.state");
        s.router
            .port_slots
            .iter()
            .flatten()
            .map(|p| (p.clone(), s.router.links_down.contains(p)))
            .collect()
    }

    /// Starts the event manager with the running config's rules (a daemon does, once its API
    /// serves: the commands the rules run go through it).
    pub fn start_events(
        self: &Arc<Self>,
        runner: Option<crate::events::CommandRunner>,
    ) -> Result<(), String> {
        let cfg = self.lock("events.start").router.cfg.events.clone();
        let ev = crate::events::EventManager::start(Arc::downgrade(self), cfg, runner)?;
        let old = self
            .events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(ev);
        // Dropped (stopped) outside the lock, as in `shutdown`.
        drop(old);
        Ok(())
    }

    /// `show event-manager`.
    pub fn event_manager(&self) -> api::views::EventManagerView {
        match &*self.events.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(ev) => ev.view(),
            None => api::views::EventManagerView::default(),
        }
    }

    /// Takes the state lock for command `name`, recording the wait.
    pub fn lock(&self, name: &'static str) -> Locked<'_> {
        let t0 = Instant::now();
        let guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let wait = t0.elapsed().as_nanos() as u64;
        {
            let mut s = self.stats.lock().unwrap_or_else(|e| e.into_inner());
            let e = s.entry(name).or_default();
            e.count += 1;
            e.wait_ns += wait;
            e.max_wait_ns = e.max_wait_ns.max(wait);
        }
        Locked {
            guard,
            core: self,
            name,
            start: Instant::now(),
        }
    }

    pub fn command_stats(&self) -> BTreeMap<&'static str, CommandStats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Stops the workers and returns the final counters.
    pub fn shutdown(&self) {
        // Taken out before it is stopped: its thread may be reading the metrics, which read its
        // view through this lock.
        let events = self.events.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(ev) = events {
            ev.stop();
        }
        if let Some(mut c) = self.cpu.lock().unwrap_or_else(|e| e.into_inner()).take() {
            c.stop();
        }
        if let Some(mut l) = self.links.lock().unwrap_or_else(|e| e.into_inner()).take() {
            l.stop();
        }
        for mut a in std::mem::take(&mut *self.adapters.lock().unwrap_or_else(|e| e.into_inner())) {
            a.stop();
        }
        if let Some(mut p) = self.punt.lock().unwrap_or_else(|e| e.into_inner()).take() {
            p.stop();
        }
        let mut s = self.lock("shutdown");
        // Workers first: they hand over the flows they hold; then the services thread exports
        // them and the last logged matches before it ends.
        s.runtime.stop_and_wait();
        s.router
            .services
            .stop
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let t = self
            .services_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(t) = t {
            let _ = t.join();
        }
        self.logger
            .log(Severity::Notice, "SYSTEM_STOP", &[], "linerate stopping");
    }
}
