//! The event manager: rules from the config's `event-manager` section (see
//! `config::events`) watch what the router already counts and logs, and act on it.
//!
//! One thread (`events`) reads every syslog record as it is logged (link changes, commands,
//! anything a syslog rule matches) and reacts at once; every `poll-ms` it samples what its
//! rules read (the metric families they name, CPU per thread) and lets time pass for `for`,
//! `keep-firing-for` and timers. Firings go to actions, each on a thread of its own so that a
//! slow mail relay never delays the next detection. Nothing is added to the workers' path: the
//! detectors read the counters the workers keep anyway, as `show` and `/metrics` do.
//!
//! - [`rule`]: a rule's condition (for, debounce, keep-firing-for) per instance.
//! - [`engine`]: the detectors feeding the rules.
//! - [`action`]: running an action.

pub mod action;
pub mod engine;
pub mod flows;
pub mod rule;
pub mod snmp;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use api::views::{EventActionView, EventManagerView, EventRuleView};

pub use action::CommandRunner;
use engine::{Engine, Firing, Poll};

use crate::config::events::{ActionCfg, Detector, EventsCfg, MetricKind, RuleCfg, Threshold};
use crate::mgmt::Core;
use crate::syslog::{Record, Severity};

/// Actions running at once at most; a firing beyond finds its actions dropped (counted).
pub const MAX_RUNNING: u64 = 32;

enum Ctl {
    Reconfigure(Option<EventsCfg>),
    Stop,
}

/// One action's counters.
#[derive(Clone, Debug, Default)]
struct ActionStats {
    view: EventActionView,
    /// Runs within the rate limit's window.
    recent: std::collections::VecDeque<Instant>,
}

/// What `show event-manager` reads, kept by the thread and by the actions as they end.
#[derive(Default)]
struct Status {
    /// Per rule (by name): its actions' counters, firing actions then resolve actions.
    actions: BTreeMap<String, Vec<ActionStats>>,
    rules: Vec<EventRuleView>,
    view: EventManagerView,
}

struct Shared {
    status: Mutex<Status>,
    running: AtomicU64,
}

pub struct EventManager {
    shared: Arc<Shared>,
    ctl: Mutex<Sender<Ctl>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl EventManager {
    /// Starts the thread with `cfg`'s rules (none: idle until a commit brings some).
    pub fn start(
        core: Weak<Core>,
        cfg: Option<EventsCfg>,
        runner: Option<CommandRunner>,
    ) -> Result<EventManager, String> {
        let c = core.upgrade().ok_or("the router is stopping")?;
        let records = c.logger.subscribe();
        let links = c.port_links();
        drop(c);
        let shared = Arc::new(Shared {
            status: Mutex::new(Status::default()),
            running: AtomicU64::new(0),
        });
        let (tx, rx) = channel();
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("events".into())
            .spawn(move || {
                Loop {
                    core,
                    runner,
                    shared: sh,
                    engine: Engine::new(Vec::new(), links, Instant::now()),
                    cfg: None,
                    polls: 0,
                    last_poll_us: 0,
                    max_poll_us: 0,
                    cpu_seen: Vec::new(),
                    mutes_logged: BTreeMap::new(),
                    published: Instant::now(),
                    watching: false,
                }
                .run(cfg, records, rx)
            })
            .map_err(|e| format!("cannot start the event manager: {e}"))?;
        Ok(EventManager {
            shared,
            ctl: Mutex::new(tx),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// New rules from a commit (rules whose definition is unchanged keep their state).
    pub fn reconfigure(&self, cfg: Option<EventsCfg>) {
        let _ = self
            .ctl
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(Ctl::Reconfigure(cfg));
    }

    pub fn view(&self) -> EventManagerView {
        let st = self.shared.status.lock().unwrap_or_else(|e| e.into_inner());
        let mut v = st.view.clone();
        v.running = true;
        v.rules = st
            .rules
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.actions = st
                    .actions
                    .get(&r.name)
                    .map(|a| a.iter().map(|s| s.view.clone()).collect())
                    .unwrap_or_default();
                r
            })
            .collect();
        v.actions_running = self.shared.running.load(Ordering::Relaxed);
        v
    }

    pub fn stop(&self) {
        let _ = self
            .ctl
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(Ctl::Stop);
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }
}

impl Drop for EventManager {
    fn drop(&mut self) {
        self.stop();
    }
}

struct Loop {
    core: Weak<Core>,
    runner: Option<CommandRunner>,
    shared: Arc<Shared>,
    engine: Engine,
    cfg: Option<EventsCfg>,
    polls: u64,
    last_poll_us: u64,
    max_poll_us: u64,
    /// The last CPU rows read, to evaluate CPU rules only when the sampler has a new one.
    cpu_seen: Vec<(String, crate::cpu::Kind, f64, f64)>,
    mutes_logged: BTreeMap<String, u64>,
    published: Instant,
    /// Whether the workers were last asked to scan their flow caches.
    watching: bool,
}

/// CPU time this thread has used, ns: what a poll costs, not the time it waited for a CPU.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration; the clock id is a
    // constant the kernel knows; the call writes nothing else.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn ms_since(t: SystemTime) -> f64 {
    SystemTime::now()
        .duration_since(t)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// A rule's detector as one line.
pub fn describe(d: &Detector) -> String {
    let th = |t: &Threshold| match t {
        Threshold::Above(x) => format!("> {x}"),
        Threshold::Below(x) => format!("< {x}"),
    };
    match d {
        Detector::Link { port, state } => {
            format!("link {} {:?}", port.as_deref().unwrap_or("any"), state).to_lowercase()
        }
        Detector::Metric {
            name,
            labels,
            kind,
            threshold,
            window_ms,
        } => {
            let l = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{v}\""))
                .collect::<Vec<_>>()
                .join(",");
            let k = match kind {
                MetricKind::Value => String::new(),
                MetricKind::Increase => format!(" increase/{window_ms}ms"),
                MetricKind::Rate => format!(" rate/{window_ms}ms"),
            };
            format!("metric {name}{{{l}}}{k} {}", th(threshold))
        }
        Detector::Cpu { of, threshold } => format!("cpu {of:?} {}", th(threshold)).to_lowercase(),
        Detector::Syslog { pattern, msgid } => format!(
            "syslog /{}/{}",
            pattern.0.as_str(),
            msgid
                .as_ref()
                .map_or(String::new(), |m| format!(" msgid {m}"))
        ),
        Detector::Command { pattern } => format!("command /{}/", pattern.0.as_str()),
        Detector::Timer { every_ms, repeat } => {
            format!(
                "timer {} {every_ms} ms",
                if *repeat { "every" } else { "countdown" }
            )
        }
        Detector::Cron { pattern } => format!("timer cron \"{}\"", pattern.text()),
        Detector::Flows {
            lines,
            interface,
            per,
            threshold,
            active_ms,
            ..
        } => format!(
            "flows per {}{}{} within {active_ms} ms {}",
            per.name(),
            interface
                .as_ref()
                .map_or(String::new(), |i| format!(" on {i}")),
            if lines.is_empty() {
                String::new()
            } else {
                format!(" matching [{}]", lines.join("; "))
            },
            th(threshold)
        ),
    }
}

impl Loop {
    fn run(mut self, cfg: Option<EventsCfg>, records: Receiver<Record>, ctl: Receiver<Ctl>) {
        self.apply_cfg(cfg);
        let mut next_poll = Instant::now();
        loop {
            match ctl.try_recv() {
                Ok(Ctl::Stop) | Err(std::sync::mpsc::TryRecvError::Disconnected) => return,
                Ok(Ctl::Reconfigure(c)) => self.apply_cfg(c),
                Err(_) => {}
            }
            let poll = Duration::from_millis(self.cfg.as_ref().map_or(200, |c| c.poll_ms));
            let now = Instant::now();
            if now >= next_poll {
                next_poll = now + poll;
                if self.cfg.is_some() {
                    self.poll();
                }
                continue;
            }
            // Records wake the thread at once: a link change is acted on as it is logged.
            let wait = (next_poll - now).min(Duration::from_millis(50));
            match records.recv_timeout(wait) {
                Ok(rec) => {
                    if self.cfg.is_some() {
                        let f = self.engine.on_record(&rec, Instant::now());
                        self.dispatch(f);
                    }
                    // Whatever else is queued, before the next look at the clock.
                    while let Ok(rec) = records.try_recv() {
                        if self.cfg.is_some() {
                            let f = self.engine.on_record(&rec, Instant::now());
                            self.dispatch(f);
                        }
                    }
                    self.publish();
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    fn apply_cfg(&mut self, cfg: Option<EventsCfg>) {
        let rules: Vec<RuleCfg> = cfg.as_ref().map(|c| c.rules.clone()).unwrap_or_default();
        self.engine.reconfigure(rules, Instant::now());
        if cfg.is_none() && self.watching {
            // No poll will run to tell the workers: stop their scans here.
            if let Some(core) = self.core.upgrade() {
                core.flow_watch().0.set(None);
            }
            self.watching = false;
        }
        self.cfg = cfg;
        let mut st = self.shared.status.lock().unwrap_or_else(|e| e.into_inner());
        let mut actions = BTreeMap::new();
        for r in &self.engine.rules {
            let kinds = |list: &[ActionCfg], on_resolve: bool| {
                list.iter()
                    .map(|a| ActionStats {
                        view: EventActionView {
                            kind: a.action.kind_name().into(),
                            on_resolve,
                            ..Default::default()
                        },
                        recent: Default::default(),
                    })
                    .collect::<Vec<_>>()
            };
            let mut fresh = kinds(&r.cfg.actions, false);
            fresh.extend(kinds(&r.cfg.resolve_actions, true));
            // Counters carry on where the rule's actions are the same kinds as before.
            let keep = st.actions.get(&r.cfg.name).is_some_and(|old| {
                old.len() == fresh.len()
                    && old.iter().zip(&fresh).all(|(a, b)| {
                        a.view.kind == b.view.kind && a.view.on_resolve == b.view.on_resolve
                    })
            });
            let v = if keep {
                st.actions.remove(&r.cfg.name).unwrap_or(fresh)
            } else {
                fresh
            };
            actions.insert(r.cfg.name.clone(), v);
        }
        st.actions = actions;
        drop(st);
        self.publish();
    }

    fn poll(&mut self) {
        let cpu0 = thread_cpu_ns();
        let Some(core) = self.core.upgrade() else {
            return;
        };
        let wanted = self.engine.wanted_metrics();
        let mut p = Poll::default();
        if !wanted.is_empty() {
            p.series = core.metric_series(wanted);
        }
        if self.engine.wants_cpu() {
            let rows = core.cpu_latest();
            if rows != self.cpu_seen {
                self.cpu_seen = rows.clone();
                p.cpu = Some(rows);
            }
        }
        let cfgs = self.engine.rule_cfgs();
        let flow_rules = cfgs
            .iter()
            .any(|r| r.enabled && matches!(r.detector, Detector::Flows { .. }));
        if flow_rules || self.watching {
            let (watch, names) = core.flow_watch();
            let scan_ms = self.cfg.as_ref().map_or(500, |c| c.flow_scan_ms);
            let (spec, index) = flows::spec(&cfgs, &names, scan_ms);
            self.watching = spec.is_some();
            watch.set(spec);
            p.flows = flows::read(&watch, &cfgs, &index, &names);
        }
        drop(core);
        let f = self.engine.on_poll(&p, Instant::now(), SystemTime::now());
        let fired = !f.is_empty();
        self.dispatch(f);
        let us = thread_cpu_ns().saturating_sub(cpu0) / 1000;
        self.polls += 1;
        self.last_poll_us = us;
        self.max_poll_us = self.max_poll_us.max(us);
        // The view is rebuilt at once after a firing, else at most ten times a second.
        if fired || self.published.elapsed() >= Duration::from_millis(100) {
            self.publish();
        }
    }

    fn publish(&mut self) {
        let now = Instant::now();
        self.published = now;
        let rules: Vec<EventRuleView> = self
            .engine
            .rules
            .iter()
            .map(|r| {
                let (state, firing) = r.phase(now);
                EventRuleView {
                    name: r.cfg.name.clone(),
                    detector: describe(&r.cfg.detector),
                    state: state.into(),
                    firing,
                    fired: r.fired,
                    resolved: r.resolved,
                    suppressed: r.state.suppressed,
                    self_triggered: r.self_triggered,
                    muted: r.muted,
                    last_fired_unix: r.last_fired.map(unix),
                    last_instance: r.last_instance.clone(),
                    last_value: r.last_value.clone(),
                    last_event_to_dispatch_ms: r.last_dispatch_ms,
                    flows: r.flows.map(|f| api::views::EventFlowsView {
                        now: f.now,
                        average: (f.average() * 10.0).round() / 10.0,
                        peak: f.peak,
                        truncated: f.truncated,
                    }),
                    actions: Vec::new(),
                }
            })
            .collect();
        let mut st = self.shared.status.lock().unwrap_or_else(|e| e.into_inner());
        st.rules = rules;
        st.view.poll_ms = self.cfg.as_ref().map_or(0, |c| c.poll_ms);
        st.view.records_seen = self.engine.records_seen;
        st.view.too_deep = self.engine.too_deep;
        st.view.polls = self.polls;
        st.view.last_poll_us = self.last_poll_us;
        st.view.max_poll_us = self.max_poll_us;
    }

    fn dispatch(&mut self, firings: Vec<Firing>) {
        if firings.is_empty() {
            return;
        }
        let Some(core) = self.core.upgrade() else {
            return;
        };
        let host = core
            .logger
            .config()
            .hostname
            .unwrap_or_else(crate::syslog::system_hostname);
        for f in firings {
            let Some(r) = self.engine.rules.get(f.rule) else {
                continue;
            };
            let cfg = r.cfg.clone();
            let mut vars = f.vars.clone();
            vars.insert("rule".into(), cfg.name.clone());
            vars.insert("host".into(), host.clone());
            vars.insert("time".into(), crate::syslog::format_timestamp(f.event_time));
            vars.insert("instance".into(), f.instance.clone());
            vars.entry("value".into()).or_default();
            vars.entry("event".into()).or_default();
            let dispatch_ms = ms_since(f.event_time);
            core.logger.log(
                if f.resolve {
                    Severity::Notice
                } else {
                    Severity::Warning
                },
                if f.resolve {
                    "EVENT_RESOLVED"
                } else {
                    "EVENT_FIRED"
                },
                &[
                    ("rule", cfg.name.clone()),
                    ("instance", f.instance.clone()),
                    ("detector", cfg.detector.kind_name().into()),
                    ("value", vars["value"].clone()),
                    ("eem-rule", cfg.name.clone()),
                    ("eem-depth", (f.depth + 1).to_string()),
                ],
                format!(
                    "event-manager rule {} {}{}: {}",
                    cfg.name,
                    if f.resolve { "resolved" } else { "fired" },
                    if f.instance.is_empty() {
                        String::new()
                    } else {
                        format!(" for {}", f.instance)
                    },
                    vars["event"]
                ),
            );
            if let Some(r) = self.engine.rules.get_mut(f.rule) {
                r.last_dispatch_ms = Some(dispatch_ms);
            }
            let (list, offset) = if f.resolve {
                (&cfg.resolve_actions, cfg.actions.len())
            } else {
                (&cfg.actions, 0)
            };
            for (k, a) in list.iter().enumerate() {
                self.start_action(&cfg.name, offset + k, a, &vars, &f);
            }
        }
        self.log_mutes(&core);
    }

    /// One record per rule newly muted for firing too often.
    fn log_mutes(&mut self, core: &Core) {
        for r in &self.engine.rules {
            let logged = self.mutes_logged.entry(r.cfg.name.clone()).or_insert(0);
            if r.muted > *logged {
                *logged = r.muted;
                let name = &r.cfg.name;
                core.logger.log(
                    Severity::Error,
                    "EVENT_RULE_MUTED",
                    &[("rule", name.clone()), ("eem-rule", name.clone())],
                    format!(
                        "event-manager rule {name} fired more than {} times in {} s (it may trigger itself): muted for {} s",
                        engine::RUNAWAY_FIRINGS,
                        engine::RUNAWAY_WINDOW.as_secs(),
                        engine::MUTE_FOR.as_secs()
                    ),
                );
            }
        }
    }

    fn start_action(&self, rule: &str, idx: usize, a: &ActionCfg, vars: &rule::Vars, f: &Firing) {
        let now = Instant::now();
        {
            let mut st = self.shared.status.lock().unwrap_or_else(|e| e.into_inner());
            let Some(s) = st.actions.get_mut(rule).and_then(|v| v.get_mut(idx)) else {
                return;
            };
            let window = Duration::from_millis(a.rate_per_ms);
            while s
                .recent
                .front()
                .is_some_and(|&t| now.saturating_duration_since(t) >= window)
            {
                s.recent.pop_front();
            }
            if s.recent.len() >= a.rate_count as usize {
                s.view.rate_limited += 1;
                return;
            }
            if self.shared.running.load(Ordering::Relaxed) >= MAX_RUNNING {
                s.view.dropped += 1;
                return;
            }
            s.recent.push_back(now);
            s.view.runs += 1;
        }
        self.shared.running.fetch_add(1, Ordering::Relaxed);
        let ctx = action::Context {
            core: self.core.clone(),
            runner: self.runner.clone(),
            mail: self.cfg.as_ref().and_then(|c| c.mail.clone()),
            agentx: self.cfg.as_ref().and_then(|c| c.agentx.clone()),
            rule: rule.to_string(),
            depth: f.depth + 1,
            resolve: f.resolve,
        };
        let (action, vars, timeout) = (
            a.action.clone(),
            vars.clone(),
            Duration::from_millis(a.timeout_ms),
        );
        let shared = self.shared.clone();
        let event_time = f.event_time;
        let rule = rule.to_string();
        let spawned = std::thread::Builder::new()
            .name("eem-action".into())
            .spawn(move || {
                let o = action::run(&action, &vars, &ctx, timeout);
                let done_ms = ms_since(event_time);
                if !o.ok {
                    if let Some(core) = ctx.core.upgrade() {
                        core.logger.log(
                            action::FAILURE_SEVERITY,
                            "EVENT_ACTION_FAILED",
                            &[
                                ("rule", rule.clone()),
                                ("action", action.kind_name().into()),
                                ("eem-rule", rule.clone()),
                                ("eem-depth", ctx.depth.to_string()),
                            ],
                            format!(
                                "event-manager rule {rule}: {} action failed: {}",
                                action.kind_name(),
                                o.detail
                            ),
                        );
                    }
                }
                let mut st = shared.status.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(s) = st.actions.get_mut(&rule).and_then(|v| v.get_mut(idx)) {
                    if o.ok {
                        s.view.ok += 1;
                    } else {
                        s.view.failed += 1;
                    }
                    if o.timed_out {
                        s.view.timed_out += 1;
                    }
                    s.view.last_detail = o.detail;
                    s.view.last_output = o.output;
                    s.view.last_event_to_done_ms = Some(done_ms);
                }
                drop(st);
                shared.running.fetch_sub(1, Ordering::Relaxed);
            });
        if spawned.is_err() {
            self.shared.running.fetch_sub(1, Ordering::Relaxed);
        }
    }
}
