//! The detectors and the rules' states, without threads or I/O: the event manager's thread
//! feeds it syslog records as they are logged and, every poll, the samples its rules read
//! (metric series, CPU per thread, ports' links), and dispatches the firings it returns.
//!
//! Reads: [`Record`]s (link, syslog and command detectors), [`Series`] (metric detectors),
//! CPU rows (CPU detectors), the clock (timers, `for`, `keep-firing-for`). Sets: each rule's
//! [`RuleState`] and counters. Sends: [`Firing`]s to the caller.
//!
//! Loops are cut twice: a record an action of rule R logged (it carries `eem-rule: R`) never
//! triggers R again, and one made by a chain of [`MAX_DEPTH`] actions triggers nothing; a rule
//! one of whose instances still fires more than [`RUNAWAY_FIRINGS`] times in [`RUNAWAY_WINDOW`]
//! is muted for [`MUTE_FOR`] (logged once). Counted per instance: many instances firing once
//! each (a worm's sources, a line card's ports) is what a rule is for, not a loop.

use std::collections::{BTreeMap, VecDeque};

// The detectors' maps are keyed by our own strings: a fast hash, no DoS exposure.
use rustc_hash::FxHashMap as HashMap;
use std::time::{Duration, Instant, SystemTime};

use super::flows::RuleFlows;
use super::rule::{Condition, Phase, RuleState, Transition, Vars};
use crate::config::events::{CpuOf, Detector, LinkState, MetricKind, RuleCfg};
use crate::cpu::Kind;
use crate::metrics::Series;
use crate::syslog::Record;

/// Actions of actions of ... of a rule: records deeper than this trigger nothing.
pub const MAX_DEPTH: u32 = 3;
pub const RUNAWAY_FIRINGS: usize = 20;
pub const RUNAWAY_WINDOW: Duration = Duration::from_secs(10);
pub const MUTE_FOR: Duration = Duration::from_secs(60);

/// A rule firing or resolving, with what its actions need.
#[derive(Clone, Debug)]
pub struct Firing {
    pub rule: usize,
    pub resolve: bool,
    pub instance: String,
    pub vars: Vars,
    /// When the event happened (a record's time; a sample's), for the event-to-action time.
    pub event_time: SystemTime,
    pub event_at: Instant,
    /// How deep in a chain of actions the event was (0: not made by an action).
    pub depth: u32,
}

/// One rule and what its detector remembers.
pub struct RuleRt {
    pub cfg: RuleCfg,
    pub state: RuleState,
    next_timer: Option<Instant>,
    /// Per metric series: the poll that last saw it, and its samples within the window (and
    /// one before it).
    history: HashMap<String, (u64, VecDeque<(Instant, f64)>)>,
    generation: u64,
    /// Recent firings and their instances (the runaway guard's window).
    firings: VecDeque<(Instant, String)>,
    pub muted_until: Option<Instant>,
    pub fired: u64,
    pub resolved: u64,
    pub self_triggered: u64,
    pub muted: u64,
    pub last_fired: Option<SystemTime>,
    pub last_instance: String,
    pub last_value: String,
    /// From the last firing's event to its dispatch, ms (set by the thread that dispatches).
    pub last_dispatch_ms: Option<f64>,
    /// A flow rule's matching flows: now, on average over its polls, at the peak.
    pub flows: Option<FlowFigures>,
}

/// The seed's "average and peak flow count", per flow rule.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FlowFigures {
    pub now: u64,
    pub peak: u64,
    pub sum: f64,
    pub samples: u64,
    /// Matching flows past what the workers keep (per-source figures are a lower bound).
    pub truncated: u64,
}

impl FlowFigures {
    pub fn average(&self) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            self.sum / self.samples as f64
        }
    }
}

impl RuleRt {
    pub fn new(cfg: RuleCfg, now: Instant) -> RuleRt {
        let next_timer = match &cfg.detector {
            Detector::Timer { every_ms, .. } => Some(now + Duration::from_millis(*every_ms)),
            Detector::Cron { pattern } => pattern.until_next().map(|d| now + d),
            _ => None,
        };
        let state = RuleState::new(condition(&cfg));
        RuleRt {
            cfg,
            state,
            next_timer,
            history: HashMap::default(),
            generation: 0,
            firings: VecDeque::new(),
            muted_until: None,
            fired: 0,
            resolved: 0,
            self_triggered: 0,
            muted: 0,
            last_fired: None,
            last_instance: String::new(),
            last_value: String::new(),
            last_dispatch_ms: None,
            flows: None,
        }
    }

    /// The rule's phase: firing if any instance fires, pending if any waits.
    pub fn phase(&self, now: Instant) -> (&'static str, Vec<String>) {
        if self.muted_until.is_some_and(|t| t > now) {
            return ("muted", Vec::new());
        }
        if !self.cfg.enabled {
            return ("disabled", Vec::new());
        }
        let phases = self.state.phases(now);
        let firing: Vec<String> = phases
            .iter()
            .filter(|(_, p)| *p == Phase::Firing)
            .map(|(k, _)| k.clone())
            .collect();
        let name = if !firing.is_empty() {
            "firing"
        } else if phases.iter().any(|(_, p)| *p == Phase::Pending) {
            "pending"
        } else {
            "idle"
        };
        (name, firing)
    }
}

pub fn condition(cfg: &RuleCfg) -> Condition {
    Condition {
        level: cfg.detector.is_level(),
        for_: Duration::from_millis(cfg.for_ms),
        debounce: cfg.debounce.map(|(c, w)| (c, Duration::from_millis(w))),
        keep_firing_for: Duration::from_millis(cfg.keep_firing_for_ms),
    }
}

/// What one poll read.
#[derive(Default)]
pub struct Poll {
    pub series: Vec<Series>,
    /// `(thread, kind, cpu %, busy %)` over the last second; None: no new CPU sample.
    pub cpu: Option<Vec<(String, Kind, f64, f64)>>,
    /// Per rule (by index): what its flow detector sees (None: not a flow rule, or no pass
    /// published yet).
    pub flows: Vec<Option<RuleFlows>>,
}

pub struct Engine {
    pub rules: Vec<RuleRt>,
    /// Each port's link as last logged: true when down.
    links: BTreeMap<String, bool>,
    pub records_seen: u64,
    pub too_deep: u64,
}

fn record_param<'a>(r: &'a Record, key: &str) -> Option<&'a str> {
    r.params
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

impl Engine {
    pub fn new(rules: Vec<RuleCfg>, links: BTreeMap<String, bool>, now: Instant) -> Engine {
        Engine {
            rules: rules.into_iter().map(|r| RuleRt::new(r, now)).collect(),
            links,
            records_seen: 0,
            too_deep: 0,
        }
    }

    /// New rules: those whose definition did not change keep their state and counters.
    pub fn reconfigure(&mut self, rules: Vec<RuleCfg>, now: Instant) {
        let mut old: HashMap<String, RuleRt> = self
            .rules
            .drain(..)
            .map(|r| (r.cfg.name.clone(), r))
            .collect();
        self.rules = rules
            .into_iter()
            .map(|cfg| match old.remove(&cfg.name) {
                Some(mut r)
                    if r.cfg.detector == cfg.detector
                        && r.state.same_condition(&condition(&cfg)) =>
                {
                    r.cfg = cfg;
                    r
                }
                _ => RuleRt::new(cfg, now),
            })
            .collect();
    }

    /// The metric families the enabled rules read.
    pub fn wanted_metrics(&self) -> std::collections::HashSet<String> {
        self.rules
            .iter()
            .filter(|r| r.cfg.enabled)
            .filter_map(|r| match &r.cfg.detector {
                Detector::Metric { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    /// Every rule's config, in order (the flow detectors' spec is built from them).
    pub fn rule_cfgs(&self) -> Vec<&RuleCfg> {
        self.rules.iter().map(|r| &r.cfg).collect()
    }

    pub fn wants_cpu(&self) -> bool {
        self.rules
            .iter()
            .any(|r| r.cfg.enabled && matches!(r.cfg.detector, Detector::Cpu { .. }))
    }

    fn push(
        rule: usize,
        r: &mut RuleRt,
        t: Option<Transition>,
        time: SystemTime,
        at: Instant,
        depth: u32,
        out: &mut Vec<Firing>,
    ) {
        let Some(t) = t else { return };
        let (resolve, instance, vars) = match t {
            Transition::Fire { instance, vars } => (false, instance, vars),
            Transition::Resolve { instance, vars } => (true, instance, vars),
        };
        if !resolve {
            r.fired += 1;
            r.last_fired = Some(time);
            r.last_instance = instance.clone();
            r.last_value = vars.get("value").cloned().unwrap_or_default();
            r.firings.push_back((at, instance.clone()));
            while r
                .firings
                .front()
                .is_some_and(|f| at.saturating_duration_since(f.0) > RUNAWAY_WINDOW)
            {
                r.firings.pop_front();
            }
        } else {
            r.resolved += 1;
        }
        out.push(Firing {
            rule,
            resolve,
            instance,
            vars,
            event_time: time,
            event_at: at,
            depth,
        });
    }

    /// A record as it is logged.
    pub fn on_record(&mut self, rec: &Record, now: Instant) -> Vec<Firing> {
        self.records_seen += 1;
        let mut out = Vec::new();
        let depth: u32 = record_param(rec, "eem-depth")
            .and_then(|d| d.parse().ok())
            .unwrap_or(0);
        let origin = record_param(rec, "eem-rule");
        let port_change = match rec.msgid.as_str() {
            "LINK_DOWN" => record_param(rec, "port").map(|p| (p.to_string(), true)),
            "LINK_UP" => record_param(rec, "port").map(|p| (p.to_string(), false)),
            _ => None,
        };
        if let Some((p, down)) = &port_change {
            self.links.insert(p.clone(), *down);
        }
        if depth >= MAX_DEPTH {
            self.too_deep += 1;
            return out;
        }
        for (i, r) in self.rules.iter_mut().enumerate() {
            if !r.cfg.enabled || r.muted_until.is_some_and(|t| t > now) {
                continue;
            }
            let detector = r.cfg.detector.clone();
            match &detector {
                Detector::Link { port, state } => {
                    let Some((p, down)) = &port_change else {
                        continue;
                    };
                    if port.as_ref().is_some_and(|x| x != p) {
                        continue;
                    }
                    let active = *down == (*state == LinkState::Down);
                    let vars = Vars::from([
                        ("port".into(), p.clone()),
                        ("state".into(), if *down { "down" } else { "up" }.into()),
                        ("event".into(), rec.text.clone()),
                    ]);
                    let t = r.state.level(p, active, vars, now);
                    Self::push(i, r, t, rec.time, now, depth, &mut out);
                }
                Detector::Syslog { pattern, msgid } => {
                    if msgid.as_ref().is_some_and(|m| m != &rec.msgid) {
                        continue;
                    }
                    let line = format!("{} {}", rec.msgid, rec.text);
                    if !pattern.0.is_match(&line) {
                        continue;
                    }
                    if origin == Some(r.cfg.name.as_str()) {
                        r.self_triggered += 1;
                        continue;
                    }
                    let mut vars: Vars = rec
                        .params
                        .iter()
                        .filter(|(k, _)| !k.starts_with("eem-"))
                        .cloned()
                        .collect();
                    vars.insert("msgid".into(), rec.msgid.clone());
                    vars.insert("text".into(), rec.text.clone());
                    vars.insert("severity".into(), rec.severity.name().into());
                    vars.insert(
                        "params".into(),
                        rec.params
                            .iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(" "),
                    );
                    vars.insert("event".into(), line);
                    let t = r.state.edge("", vars, now);
                    Self::push(i, r, t, rec.time, now, depth, &mut out);
                }
                Detector::Command { pattern } => {
                    if !matches!(rec.msgid.as_str(), "COMMAND" | "CONFIG_MODE") {
                        continue;
                    }
                    let cmd = record_param(rec, "command").unwrap_or("");
                    if !pattern.0.is_match(cmd) {
                        continue;
                    }
                    if origin == Some(r.cfg.name.as_str()) {
                        r.self_triggered += 1;
                        continue;
                    }
                    let mut vars = Vars::new();
                    for k in ["command", "user", "terminal"] {
                        vars.insert(k.into(), record_param(rec, k).unwrap_or("-").into());
                    }
                    vars.insert("text".into(), rec.text.clone());
                    vars.insert("event".into(), rec.text.clone());
                    let t = r.state.edge("", vars, now);
                    Self::push(i, r, t, rec.time, now, depth, &mut out);
                }
                _ => {}
            }
        }
        self.mute_runaways(now);
        out
    }

    /// One poll: metric and CPU readings, link `for`s, timers, keep-firing-for.
    pub fn on_poll(&mut self, poll: &Poll, now: Instant, time: SystemTime) -> Vec<Firing> {
        let mut out = Vec::new();
        // Each series' instance key (`port=p0,reason=x`), once for every rule.
        let keys: Vec<String> = poll
            .series
            .iter()
            .map(|s| {
                let mut k = String::new();
                for (i, (a, b)) in s.labels.iter().enumerate() {
                    if i > 0 {
                        k.push(',');
                    }
                    k.push_str(a);
                    k.push('=');
                    k.push_str(b);
                }
                k
            })
            .collect();
        // Each family's series, so that a rule looks at its own family's only.
        let mut families: HashMap<&str, Vec<usize>> = HashMap::default();
        for (j, s) in poll.series.iter().enumerate() {
            families.entry(s.name.as_str()).or_default().push(j);
        }
        for (i, r) in self.rules.iter_mut().enumerate() {
            if !r.cfg.enabled || r.muted_until.is_some_and(|t| t > now) {
                continue;
            }
            let detector = r.cfg.detector.clone();
            match &detector {
                Detector::Metric {
                    name,
                    labels,
                    kind,
                    threshold,
                    window_ms,
                } => {
                    let window = Duration::from_millis(*window_ms);
                    r.generation += 1;
                    let generation = r.generation;
                    for &j in families
                        .get(name.as_str())
                        .map_or(&[][..], |v| v.as_slice())
                    {
                        let (s, key) = (&poll.series[j], &keys[j]);
                        if !labels
                            .iter()
                            .all(|(k, v)| s.labels.iter().any(|(k2, v2)| k2 == k && v2 == v))
                        {
                            continue;
                        }
                        let value = if *kind == MetricKind::Value {
                            Some(s.value)
                        } else {
                            let h = match r.history.get_mut(key.as_str()) {
                                Some(h) => h,
                                None => r.history.entry(key.clone()).or_default(),
                            };
                            h.0 = generation;
                            let h = &mut h.1;
                            // A sample every sixteenth of the window at most: the rate is read
                            // against the newest sample at or before the window's start, so
                            // more would only cost memory (and cache misses) per series.
                            if h.back().is_none_or(|&(t, _)| {
                                now.saturating_duration_since(t) >= window / 16
                            }) {
                                h.push_back((now, s.value));
                            }
                            while h.len() > 2 && now.saturating_duration_since(h[1].0) >= window {
                                h.pop_front();
                            }
                            let (t0, v0) = h[0];
                            let dt = now.saturating_duration_since(t0).as_secs_f64();
                            match kind {
                                MetricKind::Increase => (dt > 0.0).then(|| (s.value - v0).max(0.0)),
                                _ => (dt > 0.0).then(|| (s.value - v0).max(0.0) / dt),
                            }
                        };
                        let Some(value) = value else { continue };
                        let active = threshold.holds(value);
                        // Variables only for a reading that holds: most readings do not, and
                        // they are what a poll over many series spends its time on.
                        let vars = if active {
                            let mut vars: Vars = s.labels.iter().cloned().collect();
                            vars.insert("metric".into(), name.clone());
                            vars.insert("labels".into(), key.clone());
                            vars.insert("value".into(), fmt_value(value));
                            vars.insert(
                                "event".into(),
                                format!("{name}{{{key}}} = {}", fmt_value(value)),
                            );
                            vars
                        } else {
                            Vars::new()
                        };
                        let t = r.state.level(key, active, vars, now);
                        Self::push(i, r, t, time, now, 0, &mut out);
                    }
                    // Series that went away (a port removed) no longer hold.
                    r.history.retain(|_, (g, _)| *g == generation);
                }
                Detector::Cpu { of, threshold } => {
                    let Some(rows) = &poll.cpu else { continue };
                    let mut readings: Vec<(String, f64)> = Vec::new();
                    match of {
                        CpuOf::Control => readings.push((
                            "control".into(),
                            rows.iter()
                                .filter(|r| r.1 == Kind::Control)
                                .map(|r| r.2)
                                .sum(),
                        )),
                        CpuOf::Workers => readings.extend(
                            rows.iter()
                                .filter(|r| r.1 == Kind::Worker)
                                .map(|r| (r.0.clone(), r.3)),
                        ),
                        CpuOf::Thread(t) => readings.extend(
                            rows.iter()
                                .filter(|r| &r.0 == t)
                                .map(|r| (r.0.clone(), r.2)),
                        ),
                    }
                    for (thread, pct) in readings {
                        let vars = Vars::from([
                            ("thread".into(), thread.clone()),
                            ("value".into(), format!("{pct:.1}")),
                            ("event".into(), format!("CPU of {thread}: {pct:.1}%")),
                        ]);
                        let t = r.state.level(&thread, threshold.holds(pct), vars, now);
                        Self::push(i, r, t, time, now, 0, &mut out);
                    }
                }
                Detector::Link { port, state } => {
                    // Ports no record has spoken of yet count as up.
                    for (p, down) in &self.links {
                        if port.as_ref().is_some_and(|x| x != p) {
                            continue;
                        }
                        let active = *down == (*state == LinkState::Down);
                        if active {
                            // Only to start `for` for ports already down at start.
                            let vars = Vars::from([
                                ("port".into(), p.clone()),
                                ("state".into(), if *down { "down" } else { "up" }.into()),
                                (
                                    "event".into(),
                                    format!("port {p}: link {}", if *down { "down" } else { "up" }),
                                ),
                            ]);
                            let t = r.state.level(p, true, vars, now);
                            Self::push(i, r, t, time, now, 0, &mut out);
                        }
                    }
                }
                Detector::Timer { every_ms, repeat } => {
                    if let Some(at) = r.next_timer {
                        if now >= at {
                            r.next_timer = repeat.then(|| {
                                let period = Duration::from_millis(*every_ms);
                                let mut next = at + period;
                                // Behind by more than a period (a stalled poll): no burst.
                                if next <= now {
                                    next = now + period;
                                }
                                next
                            });
                            let vars =
                                Vars::from([("event".into(), format!("timer {} ms", every_ms))]);
                            let t = r.state.edge("", vars, now);
                            Self::push(i, r, t, time, now, 0, &mut out);
                        }
                    }
                }
                Detector::Flows {
                    per,
                    threshold,
                    lines,
                    ..
                } => {
                    if let Some(Some(fr)) = poll.flows.get(i) {
                        let f = r.flows.get_or_insert_with(Default::default);
                        f.now = fr.total;
                        f.peak = f.peak.max(fr.total);
                        f.sum += fr.total as f64;
                        f.samples += 1;
                        f.truncated = fr.truncated;
                        let mut present = std::collections::HashSet::new();
                        for (key, a) in &fr.instances {
                            present.insert(key.as_str());
                            let active = threshold.holds(a.flows as f64);
                            let vars = if active {
                                flow_vars(*per, key, a, fr, lines)
                            } else {
                                Vars::new()
                            };
                            let t = r.state.level(key, active, vars, now);
                            Self::push(i, r, t, time, now, 0, &mut out);
                        }
                        // Sources whose flows went idle no longer hold.
                        for k in r.state.active_keys() {
                            if !present.contains(k.as_str()) {
                                let t = r.state.level(&k, false, Vars::new(), now);
                                Self::push(i, r, t, time, now, 0, &mut out);
                            }
                        }
                    }
                }
                Detector::Cron { pattern } => {
                    if let Some(at) = r.next_timer {
                        if now >= at {
                            // The next time from the calendar, not from the last tick: a late
                            // poll neither drifts the schedule nor fires twice.
                            r.next_timer = pattern
                                .until_next()
                                .map(|d| now + d.max(Duration::from_millis(1)));
                            let vars = Vars::from([(
                                "event".into(),
                                format!("cron \"{}\"", pattern.text()),
                            )]);
                            let t = r.state.edge("", vars, now);
                            Self::push(i, r, t, time, now, 0, &mut out);
                        }
                    }
                }
                Detector::Syslog { .. } | Detector::Command { .. } => {}
            }
            for t in r.state.tick(now) {
                Self::push(i, r, Some(t), time, now, 0, &mut out);
            }
        }
        self.mute_runaways(now);
        out
    }

    /// Rules past the runaway limit: muted (their firing instances are left as they are).
    fn mute_runaways(&mut self, now: Instant) {
        for r in &mut self.rules {
            if r.firings.len() <= RUNAWAY_FIRINGS || r.muted_until.is_some_and(|t| t > now) {
                continue;
            }
            let mut per: HashMap<&str, usize> = HashMap::default();
            for (_, i) in &r.firings {
                *per.entry(i.as_str()).or_default() += 1;
            }
            if per.values().any(|&n| n > RUNAWAY_FIRINGS) {
                r.muted_until = Some(now + MUTE_FOR);
                r.muted += 1;
                r.firings.clear();
            }
        }
    }

    /// Rules muted at `now` that were not muted before: (index) for logging once.
    pub fn newly_muted(&self, before: &[u64]) -> Vec<usize> {
        self.rules
            .iter()
            .enumerate()
            .filter(|(i, r)| before.get(*i).is_some_and(|&m| r.muted > m))
            .map(|(i, _)| i)
            .collect()
    }
}

/// A flow instance's variables (only for readings that hold).
fn flow_vars(
    per: crate::config::events::FlowsPer,
    key: &str,
    a: &super::flows::Agg,
    fr: &RuleFlows,
    lines: &[String],
) -> Vars {
    use crate::config::events::FlowsPer;
    let first_source = fr
        .top_sources
        .first()
        .map_or_else(|| "-".to_string(), |(a, _)| a.to_string());
    let (source, destination, interface) = match per {
        FlowsPer::Source => (key.to_string(), "-".to_string(), a.interface.clone()),
        FlowsPer::Destination => (first_source, key.to_string(), a.interface.clone()),
        FlowsPer::Interface => (first_source, "-".to_string(), key.to_string()),
        FlowsPer::All => (first_source, "-".to_string(), a.interface.clone()),
    };
    let what = if lines.is_empty() {
        String::new()
    } else {
        format!(" matching {}", lines.join("; "))
    };
    Vars::from([
        ("source".into(), source),
        ("destination".into(), destination),
        ("interface".into(), interface),
        ("flows".into(), a.flows.to_string()),
        ("packets".into(), a.packets.to_string()),
        ("bytes".into(), a.bytes.to_string()),
        ("sources".into(), fr.sources_text()),
        ("value".into(), a.flows.to_string()),
        (
            "event".into(),
            format!("{} live flows{what} for {} {key}", a.flows, per.name()),
        ),
    ])
}

#[cfg(test)]
mod tests;
