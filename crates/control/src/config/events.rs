//! `event-manager`: rules that watch what the router already counts and logs, and act on it (the
//! ME 6524's Embedded Event Manager, with the flap guards of Prometheus alerting rules).
//!
//! ```yaml
//! event-manager:
//!   poll-ms: 50                        # how often metric, CPU and table detectors sample
//!   mail: { server: 127.0.0.1:25, from: linerate@edge1, timeout-ms: 5000 }
//!   snmp: { agentx: /var/agentx/master }   # snmpd's AgentX socket (or tcp:HOST:PORT)
//!   rules:
//!     - name: uplink-down
//!       detector: { link: { port: p1, state: down } }
//!       for-ms: 0                      # the condition must hold this long (level detectors)
//!       debounce: { count: 3, within-ms: 60000 }   # fire on the 3rd occurrence in a minute
//!       keep-firing-for-ms: 10000      # stay firing this long after the condition clears
//!       actions:
//!         - syslog: { severity: crit, text: "port {port} lost its link" }
//!         - mail: { to: [noc@example.net], subject: "{host}: {port} down",
//!                   show: ["show counters", "show link {port}"] }
//!         - webhook: { url: "http://127.0.0.1:9000/hook" }
//!         - cli: ["clear counters"]
//!         - commit: { set: { "control-plane.punt.local": "{ rate: 100, burst: 20 }" },
//!                     rollback-after-s: 600 }
//!           rate-limit: { count: 1, per-s: 60 }
//!         - script: { run: [/usr/local/bin/page, "{port}"] }
//!           timeout-ms: 2000
//!         - snmp-trap: { oid: 1.3.6.1.6.3.1.1.5.3, objects: { 1.3.6.1.4.1.8072.9999.76.1: "{port}" } }
//!       resolve-actions: [ { syslog: { text: "port {port} back" } } ]
//! ```
//!
//! Detectors (one per rule):
//! - `link: { port: NAME | any, state: down | up }`: a port's link (level: down or up).
//! - `metric: { name: METRIC, labels: {k: v}, kind: value | increase | rate, above: X | below:
//!   X, window-ms: W }`: any series of `show metrics`, one instance per matching series
//!   (interface, drop, punt, table counters and gauges alike); `increase` over the window,
//!   `rate` per second over it.
//! - `cpu: { of: control | workers | THREAD, above: PCT }`: CPU over the last second: the
//!   control-plane threads together, the busiest worker's busy share (work, not polling), or
//!   the threads of that name.
//! - `syslog: { pattern: REGEX, msgid: ID }`: each record whose `MSGID text` matches (edge).
//! - `command: { pattern: REGEX }`: each CLI or API command (and entering configuration mode)
//!   whose text matches, with its user (edge).
//! - `timer: { every-ms: N } | { countdown-ms: N } | { cron: "MIN HOUR DOM MON DOW" }`: ticks
//!   (edge): periodic (EEM's watchdog timer), once after N ms from the rule's start, or at the
//!   times a cron pattern names in the router's local time (seconds may come first; `@daily`
//!   and the like work).
//! - `flows: { match: [LINE, ...], interface: NAME, direction: in | out | any, per: source |
//!   destination | interface | all, above: N, active-ms: W }`: the live flows in the workers'
//!   flow caches (`flow-export` and an interface's `flow: in` turn accounting on) that had a
//!   packet within the last W ms and match any of the lines (the QoS match grammar, L3/L4
//!   fields only), counted per source address (one instance each), destination, input
//!   interface, or in all; `{sources}` names the busiest sources. The workers read their caches
//!   a slice per vector, a whole pass every `flow-scan-ms` (default 500).
//!
//! Conditions: `for-ms` (level detectors), `debounce` (occurrences: an edge's events, a level's
//! rising edges), `keep-firing-for-ms`. Actions take `rate-limit` (default 10 per 60 s) and
//! `timeout-ms` (default 10,000); texts take `{variables}` from the event (`{rule}`, `{host}`,
//! `{time}`, `{value}`, the detector's labels such as `{port}`, `{msgid}`, `{text}`,
//! `{user}`); an unknown variable is refused here, not at firing time.

use super::fields::{seq, Errs, Fields};
use super::Origin;
use crate::syslog::Severity;
use crate::yaml::{Node, Value};

/// A compiled regular expression that compares (and prints) as the text it was written as.
#[derive(Clone, Debug)]
pub struct Pattern(pub regex::Regex);

impl PartialEq for Pattern {
    fn eq(&self, o: &Pattern) -> bool {
        self.0.as_str() == o.0.as_str()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct EventsCfg {
    pub poll_ms: u64,
    /// How long the workers take to read their flow caches once (flow detectors).
    pub flow_scan_ms: u64,
    pub mail: Option<MailCfg>,
    /// The SNMP master agent's AgentX socket (a path, or `tcp:HOST:PORT`).
    pub agentx: Option<String>,
    pub rules: Vec<RuleCfg>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MailCfg {
    /// `host:port` of the SMTP relay (plain SMTP: a local MTA or relay on the management side).
    pub server: String,
    pub from: String,
    pub timeout_ms: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RuleCfg {
    pub name: String,
    pub enabled: bool,
    pub detector: Detector,
    pub for_ms: u64,
    /// Fire on the `count`th occurrence within `within_ms`.
    pub debounce: Option<(u32, u64)>,
    pub keep_firing_for_ms: u64,
    pub actions: Vec<ActionCfg>,
    pub resolve_actions: Vec<ActionCfg>,
    pub origin: Origin,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    Down,
    Up,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    Value,
    Increase,
    Rate,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Threshold {
    Above(f64),
    Below(f64),
}

impl Threshold {
    pub fn holds(self, v: f64) -> bool {
        match self {
            Threshold::Above(x) => v > x,
            Threshold::Below(x) => v < x,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuOf {
    Control,
    Workers,
    Thread(String),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Detector {
    Link {
        port: Option<String>,
        state: LinkState,
    },
    Metric {
        name: String,
        labels: Vec<(String, String)>,
        kind: MetricKind,
        threshold: Threshold,
        window_ms: u64,
    },
    Cpu {
        of: CpuOf,
        threshold: Threshold,
    },
    Syslog {
        pattern: Pattern,
        msgid: Option<String>,
    },
    Command {
        pattern: Pattern,
    },
    Timer {
        every_ms: u64,
        repeat: bool,
    },
    /// At the times a cron pattern names, in the router's local time.
    Cron {
        pattern: CronPattern,
    },
    Flows {
        /// The match lines as written, and what they compile to (any one matches; none: every
        /// flow).
        lines: Vec<String>,
        rules: Vec<classify::Rule>,
        interface: Option<String>,
        /// Records of this direction only (None: both).
        direction: Option<flow::Direction>,
        per: FlowsPer,
        threshold: Threshold,
        active_ms: u64,
    },
}

/// A cron pattern (`MIN HOUR DOM MON DOW`, optionally with seconds first) that compares (and
/// prints) as the text it was written as.
#[derive(Clone, Debug)]
pub struct CronPattern(pub Box<croner::Cron>);

impl PartialEq for CronPattern {
    fn eq(&self, o: &CronPattern) -> bool {
        self.0.pattern.to_string() == o.0.pattern.to_string()
    }
}

impl CronPattern {
    pub fn parse(s: &str) -> Result<CronPattern, String> {
        croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .build()
            .parse(s)
            .map(|c| CronPattern(Box::new(c)))
            .map_err(|e| e.to_string())
    }

    pub fn text(&self) -> String {
        self.0.pattern.to_string()
    }

    /// How long from now to its next time (None: it names no time to come).
    pub fn until_next(&self) -> Option<std::time::Duration> {
        let now = chrono::Local::now();
        let next = self.0.find_next_occurrence(&now, false).ok()?;
        (next - now).to_std().ok()
    }
}

/// What a flow detector counts flows of: each instance is one source address, destination
/// address, input interface, or the router as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowsPer {
    Source,
    Destination,
    Interface,
    All,
}

impl FlowsPer {
    pub fn name(self) -> &'static str {
        match self {
            FlowsPer::Source => "source",
            FlowsPer::Destination => "destination",
            FlowsPer::Interface => "interface",
            FlowsPer::All => "all",
        }
    }
}

impl Detector {
    /// Whether the detector reports a state that holds (level) rather than single events.
    pub fn is_level(&self) -> bool {
        matches!(
            self,
            Detector::Link { .. }
                | Detector::Metric { .. }
                | Detector::Cpu { .. }
                | Detector::Flows { .. }
        )
    }

    /// The variables its events carry besides the common ones.
    fn variables(&self) -> Vec<String> {
        let mut v: Vec<String> = match self {
            Detector::Link { .. } => vec!["port".into(), "state".into()],
            Detector::Metric { .. } => vec!["metric".into(), "labels".into()],
            Detector::Cpu { .. } => vec!["thread".into()],
            Detector::Syslog { .. } => vec![
                "msgid".into(),
                "text".into(),
                "severity".into(),
                "params".into(),
            ],
            Detector::Command { .. } => vec![
                "command".into(),
                "user".into(),
                "terminal".into(),
                "text".into(),
            ],
            Detector::Timer { .. } | Detector::Cron { .. } => vec![],
            Detector::Flows { .. } => [
                "source",
                "destination",
                "interface",
                "flows",
                "packets",
                "bytes",
                "sources",
            ]
            .map(String::from)
            .to_vec(),
        };
        // A metric's labels and a record's parameters are not known here: any name passes
        // for them (an absent one is left as written at firing time).
        if matches!(self, Detector::Metric { .. } | Detector::Syslog { .. }) {
            v.push("*".into());
        }
        v
    }

    pub fn kind_name(&self) -> &'static str {
        match self {
            Detector::Link { .. } => "link",
            Detector::Metric { .. } => "metric",
            Detector::Cpu { .. } => "cpu",
            Detector::Syslog { .. } => "syslog",
            Detector::Command { .. } => "command",
            Detector::Timer { .. } | Detector::Cron { .. } => "timer",
            Detector::Flows { .. } => "flows",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ActionCfg {
    pub action: Action,
    /// At most `count` runs per `per_ms`; more are skipped and counted.
    pub rate_count: u32,
    pub rate_per_ms: u64,
    pub timeout_ms: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Syslog {
        severity: Severity,
        msgid: String,
        text: String,
    },
    Mail {
        to: Vec<String>,
        subject: String,
        body: String,
        show: Vec<String>,
    },
    Webhook {
        url: String,
    },
    Cli {
        commands: Vec<String>,
    },
    Commit {
        set: Vec<(String, String)>,
        delete: Vec<String>,
        rollback_after_s: Option<u64>,
    },
    Script {
        argv: Vec<String>,
    },
    SnmpTrap {
        oid: Vec<u32>,
        /// Objects sent with it: OID and text (an OCTET STRING).
        objects: Vec<(Vec<u32>, String)>,
    },
}

impl Action {
    pub fn kind_name(&self) -> &'static str {
        match self {
            Action::Syslog { .. } => "syslog",
            Action::Mail { .. } => "mail",
            Action::Webhook { .. } => "webhook",
            Action::Cli { .. } => "cli",
            Action::Commit { .. } => "commit",
            Action::Script { .. } => "script",
            Action::SnmpTrap { .. } => "snmp-trap",
        }
    }

    /// Every text the action substitutes variables into.
    fn texts(&self) -> Vec<&str> {
        match self {
            Action::Syslog { text, .. } => vec![text],
            Action::Mail {
                to,
                subject,
                body,
                show,
            } => to
                .iter()
                .chain(show)
                .map(String::as_str)
                .chain([subject.as_str(), body.as_str()])
                .collect(),
            Action::Webhook { url } => vec![url],
            Action::Cli { commands } => commands.iter().map(String::as_str).collect(),
            Action::Commit { set, delete, .. } => set
                .iter()
                .flat_map(|(p, v)| [p.as_str(), v.as_str()])
                .chain(delete.iter().map(String::as_str))
                .collect(),
            Action::Script { argv } => argv.iter().map(String::as_str).collect(),
            Action::SnmpTrap { objects, .. } => objects.iter().map(|(_, t)| t.as_str()).collect(),
        }
    }
}

/// Variables every event carries.
pub const COMMON_VARIABLES: &[&str] = &["rule", "host", "time", "value", "event", "instance"];

/// The `{name}` references in `text` (`{{` is a literal brace).
pub fn variables_in(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('{') {
        if rest[i..].starts_with("{{") {
            rest = &rest[i + 2..];
            continue;
        }
        let after = &rest[i + 1..];
        match after.find('}') {
            Some(j)
                if j > 0
                    && after[..j]
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
            {
                out.push(&after[..j]);
                rest = &after[j + 1..];
            }
            _ => rest = after,
        }
    }
    out
}

/// Rules at most (each is evaluated every poll).
pub const MAX_RULES: usize = 1000;

pub(super) fn parse(top: &mut Fields<'_>, e: &mut Errs) -> Option<EventsCfg> {
    let n = top.get("event-manager")?;
    let mut f = Fields::new("event-manager".into(), n, e)?;
    let poll_ms = f.parse::<u64>("poll-ms", "a time in ms", e).unwrap_or(50);
    if !(10..=60_000).contains(&poll_ms) {
        let at = f.node("poll-ms").unwrap_or(n);
        e.at(at, "event-manager.poll-ms", "10 ms to 60,000 ms");
    }
    let flow_scan_ms = f
        .parse::<u64>("flow-scan-ms", "a time in ms", e)
        .unwrap_or(500);
    if !(10..=60_000).contains(&flow_scan_ms) {
        let at = f.node("flow-scan-ms").unwrap_or(n);
        e.at(at, "event-manager.flow-scan-ms", "10 ms to 60,000 ms");
    }
    let mail = f.get("mail").and_then(|m| parse_mail(m, e));
    let agentx = f.get("snmp").and_then(|m| {
        let mut g = Fields::new("event-manager.snmp".into(), m, e)?;
        let a = g.required("agentx", e);
        g.finish(e);
        a
    });
    let mut rules: Vec<RuleCfg> = Vec::new();
    for (rn, path) in seq(&mut f, "rules", e) {
        if let Some(r) = parse_rule(rn, &path, e) {
            if rules.iter().any(|x| x.name == r.name) {
                e.at(rn, &path, format!("rule `{}` is defined twice", r.name));
                continue;
            }
            if r.actions
                .iter()
                .chain(&r.resolve_actions)
                .any(|a| matches!(a.action, Action::Mail { .. }))
                && mail.is_none()
            {
                e.at(
                    rn,
                    &path,
                    "a mail action needs `event-manager.mail: { server, from }`",
                );
            }
            if r.actions
                .iter()
                .chain(&r.resolve_actions)
                .any(|a| matches!(a.action, Action::SnmpTrap { .. }))
                && agentx.is_none()
            {
                e.at(
                    rn,
                    &path,
                    "an snmp-trap action needs `event-manager.snmp: { agentx: SOCKET }` (snmpd's master agentx socket)",
                );
            }
            rules.push(r);
        }
    }
    if rules.len() > MAX_RULES {
        e.at(
            n,
            "event-manager.rules",
            format!("at most {MAX_RULES} rules"),
        );
    }
    f.finish(e);
    if rules
        .iter()
        .filter(|r| matches!(r.detector, Detector::Flows { .. }))
        .count()
        > dataplane::feature::watch::MAX_FILTERS
    {
        e.at(
            n,
            "event-manager.rules",
            format!(
                "at most {} flow detectors (the workers test each flow against all of them)",
                dataplane::feature::watch::MAX_FILTERS
            ),
        );
    }
    Some(EventsCfg {
        poll_ms,
        flow_scan_ms,
        mail,
        agentx,
        rules,
    })
}

fn parse_mail(n: &Node, e: &mut Errs) -> Option<MailCfg> {
    let mut f = Fields::new("event-manager.mail".into(), n, e)?;
    let server = f.required("server", e);
    if let Some(s) = &server {
        let ok = s
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        if !ok {
            let at = f.node("server").unwrap_or(n);
            e.at(
                at,
                "event-manager.mail.server",
                format!("`{s}` is not HOST:PORT"),
            );
        }
    }
    let from = f.required("from", e);
    if let Some(a) = &from {
        check_address(a, f.node("from").unwrap_or(n), "event-manager.mail.from", e);
    }
    let timeout_ms = f
        .parse::<u64>("timeout-ms", "a time in ms", e)
        .unwrap_or(5000);
    f.finish(e);
    Some(MailCfg {
        server: server?,
        from: from?,
        timeout_ms,
    })
}

fn check_address(a: &str, n: &Node, field: &str, e: &mut Errs) {
    if a.parse::<lettre::Address>().is_err() {
        e.at(n, field, format!("`{a}` is not a mail address"));
    }
}

fn parse_rule(n: &Node, path: &str, e: &mut Errs) -> Option<RuleCfg> {
    let mut f = Fields::new(path.to_string(), n, e)?;
    let origin = f.origin();
    let name = f.required("name", e);
    if let Some(nm) = &name {
        if nm.is_empty() || !nm.bytes().all(|b| b.is_ascii_graphic()) {
            let at = f.node("name").unwrap_or(n);
            e.at(
                at,
                &f.field("name"),
                format!("`{nm}`: a rule's name is printable characters without spaces"),
            );
        }
    }
    let enabled = f
        .parse::<bool>("enabled", "true or false", e)
        .unwrap_or(true);
    let detector = match f.get("detector") {
        Some(d) => parse_detector(d, &f.field("detector"), e),
        None => {
            e.at(
                n,
                &f.field("detector"),
                "`detector` is required (link, metric, cpu, syslog, command, timer or flows)",
            );
            None
        }
    };
    let for_ms = f.parse::<u64>("for-ms", "a time in ms", e).unwrap_or(0);
    if for_ms > 0 && detector.as_ref().is_some_and(|d| !d.is_level()) {
        let at = f.node("for-ms").unwrap_or(n);
        e.at(
            at,
            &f.field("for-ms"),
            "`for-ms` needs a detector whose condition holds over time (link, metric, cpu); \
             for single events use `debounce`",
        );
    }
    let debounce = f.get("debounce").and_then(|d| {
        let mut g = Fields::new(f.field("debounce"), d, e)?;
        let count = g.parse::<u32>("count", "a count", e).unwrap_or(1);
        let within = g.parse::<u64>("within-ms", "a time in ms", e);
        if count == 0 {
            let at = g.node("count").unwrap_or(d);
            e.at(at, &g.field("count"), "at least 1");
        }
        if within.is_none() && g.node("within-ms").is_none() {
            e.at(d, &g.field("within-ms"), "`within-ms` is required");
        }
        g.finish(e);
        Some((count.max(1), within?))
    });
    let keep_firing_for_ms = f
        .parse::<u64>("keep-firing-for-ms", "a time in ms", e)
        .unwrap_or(0);
    let vars: Vec<String> = detector.as_ref().map(|d| d.variables()).unwrap_or_default();
    let actions = parse_actions(&mut f, "actions", &vars, e);
    let resolve_actions = parse_actions(&mut f, "resolve-actions", &vars, e);
    if actions.is_empty() && resolve_actions.is_empty() && f.node("actions").is_none() {
        e.at(
            n,
            &f.field("actions"),
            "`actions` is required (what the rule does when it fires)",
        );
    }
    f.finish(e);
    Some(RuleCfg {
        name: name?,
        enabled,
        detector: detector?,
        for_ms,
        debounce,
        keep_firing_for_ms,
        actions,
        resolve_actions,
        origin,
    })
}

/// The one key of a `{ kind: { ... } }` mapping, with its value.
fn one_key<'a>(n: &'a Node, field: &str, what: &str, e: &mut Errs) -> Option<(&'a str, &'a Node)> {
    match &n.value {
        Value::Map(m) if m.len() == 1 => Some((m[0].0.as_str(), &m[0].1)),
        _ => {
            e.at(
                n,
                field,
                format!("expected one of {what}, e.g. `{{ link: {{ port: p1 }} }}`"),
            );
            None
        }
    }
}

fn threshold(f: &mut Fields<'_>, n: &Node, e: &mut Errs) -> Option<Threshold> {
    let above = f.parse::<f64>("above", "a number", e);
    let below = f.parse::<f64>("below", "a number", e);
    match (above, below) {
        (Some(a), None) => Some(Threshold::Above(a)),
        (None, Some(b)) => Some(Threshold::Below(b)),
        (Some(_), Some(_)) => {
            e.at(n, &f.path, "`above` or `below`, not both");
            None
        }
        (None, None) => {
            if f.node("above").is_none() && f.node("below").is_none() {
                e.at(
                    n,
                    &f.path,
                    "a threshold is required: `above: X` or `below: X`",
                );
            }
            None
        }
    }
}

fn pattern(f: &mut Fields<'_>, n: &Node, e: &mut Errs) -> Option<Pattern> {
    let s = f.required("pattern", e)?;
    match regex::Regex::new(&s) {
        Ok(r) => Some(Pattern(r)),
        Err(err) => {
            let at = f.node("pattern").unwrap_or(n);
            let why = err.to_string();
            let last = why.lines().last().unwrap_or("").trim().to_string();
            e.at(
                at,
                &f.field("pattern"),
                format!("`{s}` is not a regular expression: {last}"),
            );
            None
        }
    }
}

const DETECTORS: &str = "link, metric, cpu, syslog, command, timer, flows";

fn parse_detector(n: &Node, path: &str, e: &mut Errs) -> Option<Detector> {
    let (kind, body) = one_key(n, path, DETECTORS, e)?;
    let path = format!("{path}.{kind}");
    let mut f = Fields::new(path.clone(), body, e)?;
    let d = match kind {
        "link" => {
            let port = f.str("port", e).filter(|p| p != "any");
            let state = match f.str("state", e).as_deref() {
                None | Some("down") => Some(LinkState::Down),
                Some("up") => Some(LinkState::Up),
                Some(s) => {
                    let at = f.node("state").unwrap_or(body);
                    e.at(at, &f.field("state"), format!("`{s}` is not down or up"));
                    None
                }
            };
            state.map(|state| Detector::Link { port, state })
        }
        "metric" => {
            let name = f.required("name", e);
            if let Some(nm) = &name {
                if !crate::metrics::valid_metric_name(nm) {
                    let at = f.node("name").unwrap_or(body);
                    e.at(at, &f.field("name"), format!("`{nm}` is not a metric name"));
                }
            }
            let mut labels = Vec::new();
            if let Some(ln) = f.get("labels") {
                match &ln.value {
                    Value::Map(m) => {
                        for (k, v) in m {
                            match &v.value {
                                Value::Scalar(s) => labels.push((k.clone(), s.clone())),
                                _ => e.at(
                                    v,
                                    &format!("{path}.labels.{k}"),
                                    "expected a single value",
                                ),
                            }
                        }
                    }
                    _ => e.at(ln, &f.field("labels"), "expected a mapping (label: value)"),
                }
            }
            let kind = match f.str("kind", e).as_deref() {
                None | Some("value") => Some(MetricKind::Value),
                Some("increase") => Some(MetricKind::Increase),
                Some("rate") => Some(MetricKind::Rate),
                Some(s) => {
                    let at = f.node("kind").unwrap_or(body);
                    e.at(
                        at,
                        &f.field("kind"),
                        format!("`{s}` is not value, increase or rate"),
                    );
                    None
                }
            };
            let window_ms = f
                .parse::<u64>("window-ms", "a time in ms", e)
                .unwrap_or(1000);
            if window_ms == 0 {
                let at = f.node("window-ms").unwrap_or(body);
                e.at(at, &f.field("window-ms"), "at least 1 ms");
            }
            let threshold = threshold(&mut f, body, e);
            Some(Detector::Metric {
                name: name?,
                labels,
                kind: kind?,
                threshold: threshold?,
                window_ms: window_ms.max(1),
            })
        }
        "cpu" => {
            let of = match f.str("of", e).as_deref() {
                None | Some("control") => CpuOf::Control,
                Some("workers") => CpuOf::Workers,
                Some(t) => CpuOf::Thread(t.to_string()),
            };
            let threshold = threshold(&mut f, body, e);
            Some(Detector::Cpu {
                of,
                threshold: threshold?,
            })
        }
        "syslog" => {
            let pattern = pattern(&mut f, body, e);
            let msgid = f.str("msgid", e);
            Some(Detector::Syslog {
                pattern: pattern?,
                msgid,
            })
        }
        "command" => pattern(&mut f, body, e).map(|pattern| Detector::Command { pattern }),
        "timer" => {
            let every = f.parse::<u64>("every-ms", "a time in ms", e);
            let countdown = f.parse::<u64>("countdown-ms", "a time in ms", e);
            let cron = f.str("cron", e);
            if let Some(c) = cron {
                if every.is_some() || countdown.is_some() {
                    e.at(body, &path, "one of `every-ms`, `countdown-ms` or `cron`");
                    return None;
                }
                let d = match CronPattern::parse(&c) {
                    Ok(pattern) => Some(Detector::Cron { pattern }),
                    Err(why) => {
                        let at = f.node("cron").unwrap_or(body);
                        e.at(
                            at,
                            &f.field("cron"),
                            format!("`{c}` is not a cron pattern (MIN HOUR DOM MON DOW, seconds optional first): {why}"),
                        );
                        None
                    }
                };
                f.finish(e);
                return d;
            }
            match (every, countdown) {
                (Some(ms), None) | (None, Some(ms)) if ms == 0 => {
                    e.at(body, &path, "at least 1 ms");
                    None
                }
                (Some(ms), None) => Some(Detector::Timer {
                    every_ms: ms,
                    repeat: true,
                }),
                (None, Some(ms)) => Some(Detector::Timer {
                    every_ms: ms,
                    repeat: false,
                }),
                _ => {
                    e.at(body, &path, "one of `every-ms`, `countdown-ms` or `cron`");
                    None
                }
            }
        }
        "flows" => parse_flows(&mut f, body, e),
        other => {
            e.at(
                n,
                &path,
                format!("unknown detector `{other}` (known: {DETECTORS})"),
            );
            return None;
        }
    };
    f.finish(e);
    d
}

fn parse_flows(f: &mut Fields<'_>, body: &Node, e: &mut Errs) -> Option<Detector> {
    use classify::rule::Dim;
    let mut lines = Vec::new();
    let mut rules = Vec::new();
    let mut ok = true;
    for (line, node, field) in f.list("match", e) {
        match super::entry::parse(&line, super::entry::Family::Any, false) {
            Ok(x) => {
                let l2 = [
                    Dim::Vlan,
                    Dim::Pcp,
                    Dim::EthSrcHi,
                    Dim::EthSrcLo,
                    Dim::EthDstHi,
                    Dim::EthDstLo,
                    Dim::Exp,
                ]
                .iter()
                .any(|&d| !x.rule.is_wild(d))
                    // `fragments`: a flow's key is never a later fragment's.
                    || x.rule.range(Dim::Frag).0 > 0;
                if l2 || x.rule.tcp_flags.is_some() {
                    e.at(
                        node,
                        &field,
                        format!(
                            "`{line}`: a flow's key has addresses, protocol, ports and DSCP \
                             only (no VLAN, CoS, MAC, EXP, fragment or TCP-flag fields)"
                        ),
                    );
                    ok = false;
                }
                lines.push(line);
                rules.push(x.rule);
            }
            Err(err) => {
                super::services::entry_err(e, node, &field, &line, err);
                ok = false;
            }
        }
    }
    let interface = f.str("interface", e).filter(|i| i != "any");
    let direction = match f.str("direction", e).as_deref() {
        None | Some("in") => Some(flow::Direction::Ingress),
        Some("out") => Some(flow::Direction::Egress),
        Some("any") => None,
        Some(s) => {
            let at = f.node("direction").unwrap_or(body);
            e.at(
                at,
                &f.field("direction"),
                format!("`{s}` is not in, out or any"),
            );
            ok = false;
            None
        }
    };
    let per = match f.str("per", e).as_deref() {
        None | Some("source") => Some(FlowsPer::Source),
        Some("destination") => Some(FlowsPer::Destination),
        Some("interface") => Some(FlowsPer::Interface),
        Some("all") => Some(FlowsPer::All),
        Some(s) => {
            let at = f.node("per").unwrap_or(body);
            e.at(
                at,
                &f.field("per"),
                format!("`{s}` is not source, destination, interface or all"),
            );
            None
        }
    };
    let active_ms = f
        .parse::<u64>("active-ms", "a time in ms", e)
        .unwrap_or(5000);
    if !(100..=3_600_000).contains(&active_ms) {
        let at = f.node("active-ms").unwrap_or(body);
        e.at(
            at,
            &f.field("active-ms"),
            "100 ms to 3,600,000 ms (an hour)",
        );
    }
    let threshold = threshold(f, body, e);
    if !ok {
        return None;
    }
    Some(Detector::Flows {
        lines,
        rules,
        interface,
        direction,
        per: per?,
        threshold: threshold?,
        active_ms,
    })
}

const ACTIONS: &str = "syslog, mail, webhook, cli, commit, script, snmp-trap";

fn parse_actions(
    f: &mut Fields<'_>,
    key: &'static str,
    vars: &[String],
    e: &mut Errs,
) -> Vec<ActionCfg> {
    let mut out = Vec::new();
    for (an, path) in seq(f, key, e) {
        if let Some(a) = parse_action(an, &path, vars, e) {
            out.push(a);
        }
    }
    out
}

fn parse_action(n: &Node, path: &str, vars: &[String], e: &mut Errs) -> Option<ActionCfg> {
    let Value::Map(m) = &n.value else {
        e.at(n, path, format!("expected an action ({ACTIONS})"));
        return None;
    };
    let kinds: Vec<&(String, Node)> = m
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "rate-limit" | "timeout-ms"))
        .collect();
    if kinds.len() != 1 {
        e.at(
            n,
            path,
            format!(
                "one action per entry ({ACTIONS}), with `rate-limit` and `timeout-ms` beside it"
            ),
        );
        return None;
    }
    let mut f = Fields::new(path.to_string(), n, e)?;
    let (kind, body) = (&kinds[0].0, &kinds[0].1);
    let _ = f.get(kind.as_str());
    let (rate_count, rate_per_ms) = match f.get("rate-limit") {
        Some(rn) => match Fields::new(f.field("rate-limit"), rn, e) {
            Some(mut g) => {
                let c = g.parse::<u32>("count", "a count", e).unwrap_or(10);
                let per = g
                    .parse::<u64>("per-s", "a number of seconds", e)
                    .unwrap_or(60);
                if c == 0 || per == 0 {
                    e.at(rn, &g.path, "count and per-s are at least 1");
                }
                g.finish(e);
                (c.max(1), per.max(1) * 1000)
            }
            None => (10, 60_000),
        },
        None => (10, 60_000),
    };
    let timeout_ms = f
        .parse::<u64>("timeout-ms", "a time in ms", e)
        .unwrap_or(10_000)
        .max(1);
    f.finish(e);
    let apath = format!("{path}.{kind}");
    let action = match kind.as_str() {
        "syslog" => {
            let mut g = Fields::new(apath.clone(), body, e)?;
            let severity = match g.str("severity", e) {
                None => Some(Severity::Notice),
                Some(s) => match Severity::parse(&s) {
                    Some(x) => Some(x),
                    None => {
                        let at = g.node("severity").unwrap_or(body);
                        e.at(
                            at,
                            &g.field("severity"),
                            format!("unknown severity `{s}` (emerg, alert, crit, err, warning, notice, info, debug)"),
                        );
                        None
                    }
                },
            };
            let msgid = g.str("msgid", e).unwrap_or_else(|| "EVENT".into());
            let text = g.required("text", e);
            g.finish(e);
            Action::Syslog {
                severity: severity?,
                msgid,
                text: text?,
            }
        }
        "mail" => {
            let mut g = Fields::new(apath.clone(), body, e)?;
            let to: Vec<String> = g
                .list("to", e)
                .into_iter()
                .map(|(s, tn, field)| {
                    if variables_in(&s).is_empty() {
                        check_address(&s, tn, &field, e);
                    }
                    s
                })
                .collect();
            if to.is_empty() {
                e.at(
                    body,
                    &g.field("to"),
                    "`to` is required: one or more addresses",
                );
            }
            let subject = g
                .str("subject", e)
                .unwrap_or_else(|| "{host}: event {rule}".into());
            let body_text = g.str("body", e).unwrap_or_else(|| "{event}".into());
            let show = g.list("show", e).into_iter().map(|(s, _, _)| s).collect();
            g.finish(e);
            Action::Mail {
                to,
                subject,
                body: body_text,
                show,
            }
        }
        "webhook" => {
            let mut g = Fields::new(apath.clone(), body, e)?;
            let url = g.required("url", e);
            if let Some(u) = &url {
                if !u.starts_with("http://") {
                    let at = g.node("url").unwrap_or(body);
                    e.at(at, &g.field("url"), format!("`{u}`: an http:// URL"));
                }
            }
            g.finish(e);
            Action::Webhook { url: url? }
        }
        "cli" => {
            let commands: Vec<String> = match &body.value {
                Value::Scalar(s) => vec![s.clone()],
                Value::Seq(items) => items
                    .iter()
                    .filter_map(|it| match &it.value {
                        Value::Scalar(s) => Some(s.clone()),
                        _ => {
                            e.at(it, &apath, "expected a command line");
                            None
                        }
                    })
                    .collect(),
                _ => {
                    e.at(body, &apath, "expected a command line or a list of them");
                    Vec::new()
                }
            };
            if commands.is_empty() {
                return None;
            }
            Action::Cli { commands }
        }
        "commit" => {
            let mut g = Fields::new(apath.clone(), body, e)?;
            let mut set = Vec::new();
            if let Some(sn) = g.get("set") {
                match &sn.value {
                    Value::Map(m) => {
                        for (k, v) in m {
                            match &v.value {
                                Value::Scalar(s) => set.push((k.clone(), s.clone())),
                                _ => e.at(
                                    v,
                                    &format!("{apath}.set.{k}"),
                                    "the value as YAML text, in quotes (e.g. \"{ rate: 100, burst: 10 }\")",
                                ),
                            }
                        }
                    }
                    _ => e.at(sn, &g.field("set"), "expected a mapping (path: value)"),
                }
            }
            let delete: Vec<String> = g.list("delete", e).into_iter().map(|(s, _, _)| s).collect();
            let rollback_after_s = g.parse::<u64>("rollback-after-s", "a number of seconds", e);
            if set.is_empty() && delete.is_empty() {
                e.at(body, &apath, "`set` or `delete` is required");
            }
            g.finish(e);
            Action::Commit {
                set,
                delete,
                rollback_after_s,
            }
        }
        "script" => {
            let mut g = Fields::new(apath.clone(), body, e)?;
            let argv: Vec<String> = g.list("run", e).into_iter().map(|(s, _, _)| s).collect();
            if argv.is_empty() {
                e.at(
                    body,
                    &g.field("run"),
                    "`run` is required: the program and its arguments",
                );
            } else if !argv[0].starts_with('/') {
                let at = g.node("run").unwrap_or(body);
                e.at(
                    at,
                    &g.field("run"),
                    format!("`{}`: the program by its absolute path", argv[0]),
                );
            }
            g.finish(e);
            Action::Script { argv }
        }
        "snmp-trap" => {
            let mut g = Fields::new(apath.clone(), body, e)?;
            let oid_text = g.required("oid", e);
            let oid = oid_text.as_ref().and_then(|o| {
                let v = packet::agentx::parse_oid(o);
                if v.is_none() {
                    let at = g.node("oid").unwrap_or(body);
                    e.at(
                        at,
                        &g.field("oid"),
                        format!("`{o}` is not an OID (1.3.6.1.4.1.N...)"),
                    );
                }
                v
            });
            let mut objects = Vec::new();
            if let Some(on) = g.get("objects") {
                match &on.value {
                    Value::Map(m) => {
                        for (k, v) in m {
                            let field = format!("{apath}.objects.{k}");
                            match (packet::agentx::parse_oid(k), &v.value) {
                                (Some(o), Value::Scalar(t)) => objects.push((o, t.clone())),
                                (None, _) => e.at(v, &field, format!("`{k}` is not an OID")),
                                _ => e.at(v, &field, "expected a text"),
                            }
                        }
                    }
                    _ => e.at(on, &g.field("objects"), "expected a mapping (OID: text)"),
                }
            }
            g.finish(e);
            Action::SnmpTrap { oid: oid?, objects }
        }
        other => {
            e.at(
                n,
                &apath,
                format!("unknown action `{other}` (known: {ACTIONS})"),
            );
            return None;
        }
    };
    // Every `{variable}` must be one the detector's events carry.
    for t in action.texts() {
        for v in variables_in(t) {
            let known = COMMON_VARIABLES.contains(&v) || vars.iter().any(|x| x == v || x == "*");
            if !known {
                let mut all: Vec<&str> = COMMON_VARIABLES.to_vec();
                all.extend(vars.iter().map(String::as_str).filter(|x| *x != "*"));
                e.at(
                    body,
                    &apath,
                    format!(
                        "unknown variable `{{{v}}}` (this rule's events carry: {})",
                        all.join(", ")
                    ),
                );
            }
        }
    }
    Some(ActionCfg {
        action,
        rate_count,
        rate_per_ms,
        timeout_ms,
    })
}

/// Where each rule is, for checks against the rest of the config.
pub(super) fn cross_check(cfg: &super::Config, e: &mut Errs) {
    let Some(ev) = &cfg.events else {
        return;
    };
    for r in &ev.rules {
        if let Detector::Flows { interface, .. } = &r.detector {
            let at = |field: &str| Origin {
                field: format!("{}.detector.flows{field}", r.origin.field),
                ..r.origin.clone()
            };
            if cfg.services.flow_export.is_none() {
                e.origin(
                    &at(""),
                    format!(
                        "rule {}: a flows detector reads the flow caches, and flow accounting \
                         is off (no `flow-export`)",
                        r.name
                    ),
                );
            }
            if let Some(i) = interface {
                match cfg.interfaces.iter().find(|x| &x.name == i) {
                    None => e.origin(
                        &at(".interface"),
                        format!("rule {}: no interface is named `{i}`", r.name),
                    ),
                    Some(x) if !x.services.flow_in && !x.services.flow_out => e.origin(
                        &at(".interface"),
                        format!(
                            "rule {}: interface `{i}` accounts no flows (give it `flow: in`)",
                            r.name
                        ),
                    ),
                    _ => {}
                }
            }
        }
        if let Detector::Link { port: Some(p), .. } = &r.detector {
            if !cfg.ports.iter().any(|x| &x.name == p) {
                e.origin(
                    &Origin {
                        field: format!("{}.detector.link.port", r.origin.field),
                        ..r.origin.clone()
                    },
                    format!("rule {}: no port is named `{p}`", r.name),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const BASE: &str = "\
ports:
  - { name: p1, driver: mem }
interfaces:
  - { name: p1, port: p1, mac: 02:00:00:00:00:01, ipv4: [192.0.2.1/24] }
";

    fn parse(events: &str) -> Result<super::super::Config, Vec<String>> {
        let text = format!("{BASE}{events}");
        super::super::parse(&text, Path::new("r.yaml"))
            .map_err(|e| e.0.iter().map(|x| x.to_string()).collect())
    }

    #[test]
    fn every_detector_and_action_parses() {
        let c = parse(
            r#"event-manager:
  poll-ms: 20
  mail: { server: "127.0.0.1:8025", from: router@lab.example }
  rules:
    - name: down
      detector: { link: { port: p1 } }
      for-ms: 100
      keep-firing-for-ms: 1000
      actions:
        - mail: { to: [noc@lab.example], subject: "{port} down", show: ["show counters"] }
        - syslog: { severity: crit, text: "{port} {state}" }
          rate-limit: { count: 1, per-s: 10 }
    - name: drops
      detector: { metric: { name: linerate_drops_total, kind: rate, above: 100, labels: { reason: no-route } } }
      actions: [ { webhook: { url: "http://127.0.0.1:9/x" } } ]
    - name: cpu
      detector: { cpu: { of: control, above: 90 } }
      debounce: { count: 2, within-ms: 5000 }
      actions:
        - commit: { set: { "control-plane.punt.local": "{ rate: 100, burst: 10 }" }, rollback-after-s: 60 }
      resolve-actions: [ { cli: "show processes cpu" } ]
    - name: conf
      detector: { command: { pattern: "^configure" } }
      actions: [ { syslog: { text: "{user} on {terminal}: {command}" } } ]
    - name: tick
      detector: { timer: { every-ms: 60000 } }
      actions: [ { script: { run: [/bin/true, "{time}"] }, timeout-ms: 500 } ]
    - name: log
      detector: { syslog: { pattern: "BGP.*Down", msgid: FRR } }
      actions: [ { syslog: { text: "{text} {neighbor}" } } ]
"#,
        )
        .unwrap();
        let ev = c.events.unwrap();
        assert_eq!(ev.poll_ms, 20);
        assert_eq!(ev.rules.len(), 6);
        assert_eq!(
            ev.rules[0].detector,
            Detector::Link {
                port: Some("p1".into()),
                state: LinkState::Down
            }
        );
        assert_eq!(ev.rules[0].actions[1].rate_count, 1);
        assert_eq!(ev.rules[0].actions[1].rate_per_ms, 10_000);
        assert_eq!(ev.rules[2].debounce, Some((2, 5000)));
        assert!(matches!(
            &ev.rules[2].actions[0].action,
            Action::Commit {
                rollback_after_s: Some(60),
                ..
            }
        ));
        assert_eq!(ev.rules[4].actions[0].timeout_ms, 500);
    }

    fn one_error(events: &str) -> String {
        let e = parse(events).unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        e[0].clone()
    }

    #[test]
    fn mistakes_name_the_line_and_field() {
        let head = "event-manager:\n  rules:\n    - name: r\n";
        let e = one_error(&format!(
            "{head}      detector: {{ syslog: {{ pattern: \"(unclosed\" }} }}\n      actions: [ {{ syslog: {{ text: x }} }} ]\n"
        ));
        assert!(e.starts_with("r.yaml:8:"), "{e}");
        assert!(
            e.contains("event-manager.rules[0].detector.syslog.pattern"),
            "{e}"
        );
        assert!(e.contains("not a regular expression"), "{e}");

        let e = one_error(&format!(
            "{head}      detector: {{ link: {{ port: p1 }} }}\n      actions: [ {{ syslog: {{ text: \"{{user}}\" }} }} ]\n"
        ));
        assert!(e.contains("unknown variable `{user}`"), "{e}");
        assert!(e.contains("port, state"), "{e}");

        let e = one_error(&format!(
            "{head}      detector: {{ link: {{ port: p9 }} }}\n      actions: [ {{ syslog: {{ text: x }} }} ]\n"
        ));
        assert!(e.contains("no port is named `p9`"), "{e}");

        let e = one_error(&format!(
            "{head}      detector: {{ timer: {{ every-ms: 10 }} }}\n      for-ms: 5\n      actions: [ {{ syslog: {{ text: x }} }} ]\n"
        ));
        assert!(e.contains("r.yaml:9:") && e.contains("for-ms"), "{e}");

        let e = one_error(&format!(
            "{head}      detector: {{ link: {{ port: p1 }} }}\n      actions: [ {{ mail: {{ to: [a@b.example] }} }} ]\n"
        ));
        assert!(e.contains("event-manager.mail"), "{e}");

        let e = one_error(&format!(
            "{head}      detector: {{ flood: {{}} }}\n      actions: [ {{ syslog: {{ text: x }} }} ]\n"
        ));
        assert!(e.contains("unknown detector `flood`"), "{e}");

        let e = one_error(&format!(
            "{head}      detector: {{ cpu: {{ of: control }} }}\n      actions: [ {{ script: {{ run: [/bin/true] }} }} ]\n"
        ));
        assert!(e.contains("threshold is required"), "{e}");

        let e = one_error(&format!(
            "{head}      detector: {{ timer: {{ cron: \"61 * * * *\" }} }}\n      actions: [ {{ syslog: {{ text: x }} }} ]\n"
        ));
        assert!(
            e.starts_with("r.yaml:8:") && e.contains("`61 * * * *` is not a cron pattern"),
            "{e}"
        );

        // Flow detectors: accounting must be on, the lines must be L3/L4 only.
        let e = one_error(&format!(
            "{head}      detector: {{ flows: {{ match: [\"udp dport 1434\"], above: 100 }} }}\n      actions: [ {{ syslog: {{ text: \"{{source}}\" }} }} ]\n"
        ));
        assert!(e.contains("flow accounting is off"), "{e}");
        let e = one_error(&format!(
            "flow-export: {{ collectors: [\"127.0.0.1:9\"] }}\n{head}      detector: {{ flows: {{ match: [\"udp vlan 7\"], above: 100 }} }}\n      actions: [ {{ syslog: {{ text: x }} }} ]\n"
        ));
        assert!(e.contains("match[0]") && e.contains("no VLAN"), "{e}");
        let e = one_error(&format!(
            "flow-export: {{ collectors: [\"127.0.0.1:9\"] }}\n{head}      detector: {{ flows: {{ match: [\"udp dport 1434\"], interface: p1, above: 100 }} }}\n      actions: [ {{ syslog: {{ text: x }} }} ]\n"
        ));
        assert!(e.contains("accounts no flows"), "{e}");
        let e = one_error(&format!(
            "flow-export: {{ collectors: [\"127.0.0.1:9\"] }}\n{head}      detector: {{ flows: {{ match: [\"udp dport 99999\"], above: 100 }} }}\n      actions: [ {{ syslog: {{ text: x }} }} ]\n"
        ));
        assert!(
            e.contains("r.yaml:9:47:") && e.contains("`99999` is not a port"),
            "{e}"
        );
    }

    #[test]
    fn a_flow_detector_parses_with_its_defaults() {
        let c = parse(
            "flow-export: { collectors: [\"127.0.0.1:9\"] }\nevent-manager:\n  flow-scan-ms: 250\n  rules:\n    - name: worm\n      detector: { flows: { match: [\"udp dport 1434\"], per: source, above: 100 } }\n      actions: [ { syslog: { text: \"{flows} flows from {source} on {interface}: {sources}\" } } ]\n",
        )
        .unwrap();
        let ev = c.events.unwrap();
        assert_eq!(ev.flow_scan_ms, 250);
        match &ev.rules[0].detector {
            Detector::Flows {
                lines,
                rules,
                direction,
                per,
                active_ms,
                ..
            } => {
                assert_eq!(lines, &["udp dport 1434"]);
                assert_eq!(rules.len(), 1);
                assert_eq!(*direction, Some(flow::Direction::Ingress));
                assert_eq!(*per, FlowsPer::Source);
                assert_eq!(*active_ms, 5000);
            }
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn variables_are_found_and_escaped_braces_are_not() {
        assert_eq!(
            variables_in("{a} {{b}} {c-d} {not a var} {"),
            vec!["a", "c-d"]
        );
    }
}
