//! The supervisor: runs one Linerate process per logical router, each in its own network
//! namespace and control group (CPUs, memory limit), and keeps them running.
//!
//! Reads: the checked LR set ([`crate::config::lr`]), each LR's group usage, its children's
//! exit. Sets: the namespaces (made if missing, removed at stop if it made them), the ports'
//! kernel devices (moved into their LR's namespace, and back to the host's at stop), the groups,
//! each LR's process (`<binary> daemon` with its own config, state folder and API socket under
//! `run-dir`, its output appended to `<run-dir>/<name>.log`). An LR whose process exits on its
//! own is restarted after a backoff (1 s, doubling to 30 s; back to 1 s once it has run a
//! minute), and the event is logged; the other LRs see nothing of it.
//!
//! Restart and upgrade are hitless by default (see `crate::handover`): the supervisor starts
//! the new process beside the running one, in the same namespace and group, with `--take-over`;
//! the old one exits once the new one forwards, and the new one is the LR's process from then
//! on. A new process that fails before it takes over leaves the old one running, and says why.
//! `--cold` stops the old process first, as a restart after a crash does.
//!
//! How a process gets into its place: the supervisor starts `<its own binary> lr-exec --group G
//! --netns N -- <LR binary> daemon ...`, which joins the group (so that everything the router
//! allocates is counted against its limit from its first byte) and becomes `ip netns exec N
//! <LR binary> daemon ...`: one process throughout, the PID the supervisor watches.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use api::views::{LogicalRouterView, LogicalRoutersView};
use api::ApiError;

use super::cgroup::{Group, Hierarchy, Limits};
use crate::config::lr::{LrCfg, LrSet};

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// An LR that ran this long before it exited is restarted after the first backoff again.
const STABLE: Duration = Duration::from_secs(60);
/// A stopped LR's process gets this long after SIGTERM, then SIGKILL.
const GRACE: Duration = Duration::from_secs(5);
const TICK: Duration = Duration::from_millis(20);

/// One LR's process and what the supervisor knows of it.
struct Slot {
    cfg: LrCfg,
    binary: PathBuf,
    group: Group,
    /// It should be running (false after `stop`).
    want: bool,
    child: Option<Child>,
    spawned: Option<Instant>,
    ready: Option<Instant>,
    start_ms: Option<u64>,
    /// When SIGTERM was sent, for the SIGKILL after [`GRACE`].
    term_sent: Option<Instant>,
    restarts: u32,
    last_exit: Option<String>,
    retry_at: Option<Instant>,
    backoff: Duration,
    /// The last CPU sample (when, CPU ns) and the share of a CPU since the one before.
    cpu_sample: (Instant, u64),
    cpu_percent: f64,
    /// A process taking over from `child` (hitless restart or upgrade), on this binary.
    successor: Option<(Child, PathBuf)>,
    /// How the last hand-over ended, once it has.
    handover: Option<Result<String, String>>,
    handovers: u32,
}

pub struct Supervisor {
    set: LrSet,
    /// This binary, which `lr-exec` is a subcommand of.
    exe: PathBuf,
    slots: Mutex<Vec<Slot>>,
    /// Namespaces the supervisor made (removed at stop).
    made_namespaces: Vec<String>,
    stopping: AtomicBool,
    monitor: Mutex<Option<JoinHandle<()>>>,
}

/// Logs a supervisor event (to its standard error: the service manager's journal).
fn log(msg: &str) {
    eprintln!(
        "{} linerate-supervisor: {msg}",
        chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ")
    );
}

fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip").args(args).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

fn namespace_exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}

/// Sends `sig` to process `pid`.
fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) takes two integers and touches no memory of ours; at worst it fails
    // (ESRCH for a process already gone), which is ignored.
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

/// How a process ended, as `show logical-routers` says it.
fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => status.to_string(),
    }
}

impl Supervisor {
    /// Makes the namespaces and groups and starts every LR; returns once they are spawned (not
    /// yet answering: `show logical-routers` says when each is). `exe` is the binary that has
    /// the `lr-exec` subcommand (this one).
    pub fn start(set: LrSet, exe: PathBuf) -> Result<Arc<Supervisor>, String> {
        let h = Hierarchy::detect().map_err(|e| format!("cgroups: {e}"))?;
        std::fs::create_dir_all(&set.run_dir)
            .map_err(|e| format!("{}: {e}", set.run_dir.display()))?;
        let mut made = Vec::new();
        let mut slots = Vec::new();
        // What was made for the LRs before one failed is undone: nothing is left half started.
        let undo = |made: &[String], slots: Vec<Slot>| {
            for s in slots {
                let _ = s.group.remove();
            }
            for ns in made {
                let _ = ip(&["netns", "del", ns]);
            }
        };
        for lr in &set.lrs {
            let placed = (|| -> Result<Group, String> {
                if !namespace_exists(&lr.namespace) {
                    ip(&["netns", "add", &lr.namespace])
                        .map_err(|e| format!("{}: {e}", lr.name))?;
                    made.push(lr.namespace.clone());
                }
                ip(&["-n", &lr.namespace, "link", "set", "lo", "up"])
                    .map_err(|e| format!("{}: {e}", lr.name))?;
                let limits = Limits {
                    cpus: lr.cpus.clone(),
                    memory: lr.memory,
                };
                let group = Group::create(&h, &lr.name, &limits)
                    .map_err(|e| format!("{}: cgroup: {e}", lr.name))?;
                // Processes in it are an earlier supervisor's LR, still running: two routers
                // on the same ports and socket would fight.
                match group.pids() {
                    Ok(p) if !p.is_empty() => Err(format!(
                        "{}: its control group already holds processes {p:?} (an LR of an earlier supervisor?): stop them first",
                        lr.name
                    )),
                    _ => Ok(group),
                }
            })();
            let group = match placed {
                Ok(g) => g,
                Err(e) => {
                    undo(&made, slots);
                    return Err(e);
                }
            };
            let cpu = group.usage().map(|u| u.cpu_ns).unwrap_or(0);
            slots.push(Slot {
                cfg: lr.clone(),
                binary: exe.clone(),
                group,
                want: true,
                child: None,
                spawned: None,
                ready: None,
                start_ms: None,
                term_sent: None,
                restarts: 0,
                last_exit: None,
                retry_at: Some(Instant::now()),
                backoff: FIRST_BACKOFF,
                cpu_sample: (Instant::now(), cpu),
                cpu_percent: 0.0,
                successor: None,
                handover: None,
                handovers: 0,
            });
        }
        let sup = Arc::new(Supervisor {
            set,
            exe,
            slots: Mutex::new(slots),
            made_namespaces: made,
            stopping: AtomicBool::new(false),
            monitor: Mutex::new(None),
        });
        {
            let mut slots = sup.slots.lock().unwrap_or_else(|p| p.into_inner());
            for s in slots.iter_mut() {
                sup.spawn(s);
            }
        }
        let weak = Arc::downgrade(&sup);
        let t = std::thread::Builder::new()
            .name("lr-monitor".into())
            .spawn(move || {
                while let Some(s) = weak.upgrade() {
                    if s.stopping.load(Ordering::Relaxed) {
                        break;
                    }
                    s.tick();
                    drop(s);
                    std::thread::sleep(TICK);
                }
            })
            .map_err(|e| e.to_string())?;
        *sup.monitor.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
        Ok(sup)
    }

    fn lr_socket(&self, lr: &LrCfg) -> PathBuf {
        self.set.run_dir.join(format!("{}.sock", lr.name))
    }

    /// Moves the LR's devices into its namespace (those still in the host's) and brings them
    /// up.
    fn place_devices(lr: &LrCfg) -> io::Result<()> {
        for d in &lr.devices {
            if Path::new("/sys/class/net").join(d).exists() {
                ip(&["link", "set", d, "netns", &lr.namespace])?;
            }
            ip(&["-n", &lr.namespace, "link", "set", d, "up"])
                .map_err(|e| io::Error::other(format!("device {d}: {e}")))?;
        }
        Ok(())
    }

    /// Starts the LR's process; on failure records why and backs off.
    fn spawn(&self, s: &mut Slot) {
        s.retry_at = None;
        match self.try_spawn(s) {
            Ok(child) => {
                log(&format!("{}: started, pid {}", s.cfg.name, child.id()));
                s.child = Some(child);
                s.spawned = Some(Instant::now());
                s.ready = None;
                s.term_sent = None;
            }
            Err(e) => {
                log(&format!(
                    "{}: cannot start: {e}; again in {:?}",
                    s.cfg.name, s.backoff
                ));
                s.last_exit = Some(format!("not started: {e}"));
                s.retry_at = Some(Instant::now() + s.backoff);
                s.backoff = (s.backoff * 2).min(MAX_BACKOFF);
            }
        }
    }

    fn try_spawn(&self, s: &Slot) -> io::Result<Child> {
        Self::place_devices(&s.cfg)?;
        let sock = self.lr_socket(&s.cfg);
        let _ = std::fs::remove_file(&sock);
        self.command(s, &s.binary, false)?.spawn()
    }

    /// The command that runs LR `s`'s router on `binary`, taking over from its running process
    /// with `take_over`.
    fn command(&self, s: &Slot, binary: &Path, take_over: bool) -> io::Result<Command> {
        let sock = self.lr_socket(&s.cfg);
        let state = self.set.state_dir.join(&s.cfg.name);
        std::fs::create_dir_all(&state)?;
        let logf = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.set.run_dir.join(format!("{}.log", s.cfg.name)))?;
        use std::os::unix::process::CommandExt;
        let mut c = Command::new(&self.exe);
        c.arg("lr-exec")
            .arg("--group")
            .arg(&s.cfg.name)
            .arg("--netns")
            .arg(&s.cfg.namespace)
            .arg("--")
            .arg(binary)
            .arg("--socket")
            .arg(&sock)
            .arg("daemon")
            .arg("--config")
            .arg(&s.cfg.config)
            .arg("--state")
            .arg(&state)
            .stdin(Stdio::null())
            .stdout(logf.try_clone()?)
            .stderr(logf)
            // Its own process group: a terminal's ^C reaches the supervisor, which stops the
            // LRs in order, not every LR at once.
            .process_group(0);
        if take_over {
            c.arg("--take-over");
        }
        Ok(c)
    }

    /// One pass over the LRs: reap, restart, see who answers, sample CPU.
    fn tick(&self) {
        let now = Instant::now();
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        for s in slots.iter_mut() {
            if let Some((c, _)) = s.successor.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    let why = format!(
                        "the new process exited ({}) before it took over; the LR runs on in pid {} (see {})",
                        describe(status),
                        s.child.as_ref().map_or(0, |c| c.id()),
                        self.set.run_dir.join(format!("{}.log", s.cfg.name)).display()
                    );
                    log(&format!("{}: hand-over failed: {why}", s.cfg.name));
                    s.handover = Some(Err(why));
                    s.successor = None;
                }
            }
            if let Some(c) = s.child.as_mut() {
                match c.try_wait() {
                    Ok(Some(status)) if s.successor.is_some() => {
                        // Handed over: the successor is the LR's process now.
                        let (new, binary) = s.successor.take().expect("successor");
                        let msg = format!(
                            "pid {} handed over to pid {} ({}) and exited ({})",
                            c.id(),
                            new.id(),
                            binary.display(),
                            describe(status)
                        );
                        log(&format!("{}: {msg}", s.cfg.name));
                        s.child = Some(new);
                        s.binary = binary;
                        s.spawned = Some(now);
                        s.ready = None;
                        s.last_exit = Some("handed over".into());
                        s.handovers += 1;
                        s.handover = Some(Ok(msg));
                    }
                    Ok(Some(status)) => {
                        let how = describe(status);
                        let ran = s.spawned.map_or(Duration::ZERO, |t| now - t);
                        s.child = None;
                        s.ready = None;
                        s.last_exit = Some(how.clone());
                        if s.want {
                            if ran >= STABLE {
                                s.backoff = FIRST_BACKOFF;
                            }
                            s.restarts += 1;
                            log(&format!(
                                "{}: exited ({how}) after {:.1} s; restarting in {:?}",
                                s.cfg.name,
                                ran.as_secs_f64(),
                                s.backoff
                            ));
                            s.retry_at = Some(now + s.backoff);
                            s.backoff = (s.backoff * 2).min(MAX_BACKOFF);
                        } else {
                            log(&format!("{}: stopped ({how})", s.cfg.name));
                        }
                    }
                    Ok(None) => {
                        if s.ready.is_none() && UnixStream::connect(self.lr_socket(&s.cfg)).is_ok()
                        {
                            s.ready = Some(now);
                            let ms = s.spawned.map_or(0, |t| (now - t).as_millis() as u64);
                            s.start_ms = Some(ms);
                            log(&format!(
                                "{}: running (API up {ms} ms after start)",
                                s.cfg.name
                            ));
                        }
                        if let Some(t) = s.term_sent {
                            if now - t > GRACE {
                                log(&format!(
                                    "{}: still running {GRACE:?} after SIGTERM: SIGKILL",
                                    s.cfg.name
                                ));
                                let _ = c.kill();
                                s.term_sent = None;
                            }
                        }
                    }
                    Err(e) => log(&format!("{}: wait: {e}", s.cfg.name)),
                }
            } else if s.want && s.retry_at.is_some_and(|t| t <= now) {
                self.spawn(s);
            }
            let dt = now - s.cpu_sample.0;
            if dt >= Duration::from_secs(1) {
                if let Ok(u) = s.group.usage() {
                    let used = u.cpu_ns.saturating_sub(s.cpu_sample.1);
                    s.cpu_percent = used as f64 / dt.as_nanos() as f64 * 100.0;
                    s.cpu_sample = (now, u.cpu_ns);
                }
            }
        }
    }

    fn view_of(&self, s: &Slot) -> LogicalRouterView {
        let now = Instant::now();
        let u = s.group.usage().unwrap_or_default();
        let state = match (&s.child, s.ready, s.want) {
            (Some(_), _, _) if s.successor.is_some() => "handing-over",
            (Some(_), Some(_), _) => "running",
            (Some(_), None, true) => "starting",
            (Some(_), None, false) => "stopping",
            (None, _, true) => "backoff",
            (None, _, false) => "stopped",
        };
        LogicalRouterView {
            name: s.cfg.name.clone(),
            state: state.into(),
            pid: s.child.as_ref().map(|c| c.id()),
            namespace: s.cfg.namespace.clone(),
            cpus: s.cfg.cpus.clone(),
            memory_limit: s.cfg.memory,
            memory_used: u.memory,
            cpu_percent: s.cpu_percent,
            cpu_seconds: u.cpu_ns as f64 / 1e9,
            uptime_s: match (&s.child, s.spawned) {
                (Some(_), Some(t)) => (now - t).as_secs(),
                _ => 0,
            },
            restarts: s.restarts,
            handovers: s.handovers,
            start_ms: s.start_ms,
            last_exit: s.last_exit.clone(),
            backoff_s: s
                .retry_at
                .filter(|_| s.child.is_none() && s.want)
                .map(|t| t.saturating_duration_since(now).as_secs_f64()),
            socket: self.lr_socket(&s.cfg).display().to_string(),
            config: s.cfg.config.display().to_string(),
            binary: s.binary.display().to_string(),
            devices: s.cfg.devices.clone(),
        }
    }

    pub fn list(&self) -> LogicalRoutersView {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        LogicalRoutersView {
            routers: slots.iter().map(|s| self.view_of(s)).collect(),
            share_cores: self.set.share_cores,
        }
    }

    fn with_slot<T>(
        &self,
        name: &str,
        f: impl FnOnce(&Self, &mut Slot) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let known: Vec<String> = slots.iter().map(|s| s.cfg.name.clone()).collect();
        let s = slots
            .iter_mut()
            .find(|s| s.cfg.name == name)
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "no logical router `{name}` (there are: {})",
                    known.join(", ")
                ))
            })?;
        f(self, s)
    }

    pub fn get(&self, name: &str) -> Result<LogicalRouterView, ApiError> {
        self.with_slot(name, |me, s| Ok(me.view_of(s)))
    }

    /// Stops the LR's process (SIGTERM, SIGKILL after 5 s) and waits for it to end.
    pub fn stop(&self, name: &str) -> Result<LogicalRouterView, ApiError> {
        self.with_slot(name, |_, s| {
            s.want = false;
            s.retry_at = None;
            if let Some(c) = &s.child {
                signal(c.id(), libc::SIGTERM);
                s.term_sent = Some(Instant::now());
            }
            Ok(())
        })?;
        self.wait_for(name, |v| v.pid.is_none(), GRACE + Duration::from_secs(2))
    }

    /// Starts a stopped LR (at once, whatever its backoff) and waits until its API answers
    /// (up to 10 s; `show logical-routers` then says where it is).
    pub fn start_lr(&self, name: &str) -> Result<LogicalRouterView, ApiError> {
        self.with_slot(name, |me, s| {
            s.want = true;
            s.backoff = FIRST_BACKOFF;
            if s.child.is_none() {
                me.spawn(s);
            }
            Ok(())
        })?;
        self.wait_for(name, |v| v.state == "running", Duration::from_secs(10))
    }

    /// Restarts the LR's process: hitless (a new process takes over), or with `cold` stopped
    /// and started.
    pub fn restart(&self, name: &str, cold: bool) -> Result<LogicalRouterView, ApiError> {
        if !cold {
            return self.hand_over(name, None);
        }
        self.stop(name)?;
        self.start_lr(name)
    }

    /// Starts a process on `binary` (the LR's own if None) that takes over from the LR's
    /// running one, and waits until it has (the old one exited, the new one's API answers) or
    /// failed, for up to 90 s (a full table takes a while to hand over).
    pub fn hand_over(
        &self,
        name: &str,
        binary: Option<PathBuf>,
    ) -> Result<LogicalRouterView, ApiError> {
        let new_pid = self.with_slot(name, |me, s| {
            if s.child.is_none() || s.ready.is_none() {
                return Err(ApiError::conflict(format!(
                    "{name} is not running: nothing to take over from (start it, or restart it --cold)"
                )));
            }
            if s.successor.is_some() {
                return Err(ApiError::conflict(format!(
                    "{name}: a hand-over is under way"
                )));
            }
            let binary = binary.unwrap_or_else(|| s.binary.clone());
            let child = me
                .command(s, &binary, true)
                .and_then(|mut c| c.spawn())
                .map_err(|e| ApiError::internal(format!("{name}: cannot start: {e}")))?;
            log(&format!(
                "{name}: pid {} taking over from pid {}",
                child.id(),
                s.child.as_ref().map_or(0, |c| c.id())
            ));
            let pid = child.id();
            s.handover = None;
            s.successor = Some((child, binary));
            Ok(pid)
        })?;
        let v = self.wait_for(
            name,
            |v| v.pid == Some(new_pid) && v.state == "running",
            Duration::from_secs(90),
        )?;
        let outcome = self.with_slot(name, |_, s| Ok(s.handover.clone()))?;
        match outcome {
            Some(Ok(_)) if v.pid == Some(new_pid) => Ok(v),
            Some(Err(why)) => Err(ApiError::conflict(format!("{name}: {why}"))),
            _ => Err(ApiError::internal(format!(
                "{name}: the hand-over to pid {new_pid} did not finish in 90 s"
            ))),
        }
    }

    /// Runs the LR on another binary: hitless (a process on it takes over), or with `cold`
    /// stopped and started on it.
    pub fn upgrade(
        &self,
        name: &str,
        binary: &Path,
        cold: bool,
    ) -> Result<LogicalRouterView, ApiError> {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(binary)
            .map_err(|e| ApiError::invalid(format!("{}: {e}", binary.display())))?;
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            return Err(ApiError::invalid(format!(
                "{}: not an executable file",
                binary.display()
            )));
        }
        let binary = std::fs::canonicalize(binary)
            .map_err(|e| ApiError::invalid(format!("{}: {e}", binary.display())))?;
        if !cold {
            log(&format!(
                "{name}: upgrade to {} (hitless)",
                binary.display()
            ));
            return self.hand_over(name, Some(binary));
        }
        self.stop(name)?;
        self.with_slot(name, |_, s| {
            log(&format!("{}: upgrade to {}", s.cfg.name, binary.display()));
            s.binary = binary;
            Ok(())
        })?;
        self.start_lr(name)
    }

    /// Polls the LR's view until `done` (or `limit`), answering it either way.
    fn wait_for(
        &self,
        name: &str,
        done: impl Fn(&LogicalRouterView) -> bool,
        limit: Duration,
    ) -> Result<LogicalRouterView, ApiError> {
        let until = Instant::now() + limit;
        loop {
            let v = self.get(name)?;
            if done(&v) || Instant::now() >= until {
                return Ok(v);
            }
            std::thread::sleep(TICK);
        }
    }

    /// Stops every LR, hands their devices back to the host's namespace, removes what the
    /// supervisor made (namespaces, groups).
    pub fn shutdown(&self) {
        let names: Vec<String> = {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.iter().map(|s| s.cfg.name.clone()).collect()
        };
        for n in &names {
            let _ = self.stop(n);
        }
        self.stopping.store(true, Ordering::Relaxed);
        if let Some(t) = self
            .monitor
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = t.join();
        }
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        for s in slots.iter_mut() {
            if let Some(mut c) = s.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
            for d in &s.cfg.devices {
                let _ = ip(&["-n", &s.cfg.namespace, "link", "set", d, "netns", "1"]);
            }
            let _ = std::fs::remove_file(self.lr_socket(&s.cfg));
        }
        for s in slots.drain(..) {
            if let Err(e) = s.group.remove() {
                log(&format!("{}: cgroup: {e}", s.cfg.name));
            }
        }
        for ns in &self.made_namespaces {
            let _ = ip(&["netns", "del", ns]);
        }
        log("stopped");
    }
}
