//! The event manager: `show event-manager` (`GET /v1/event-manager`): each rule's detector,
//! state, firings and its actions' runs.

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::table;

/// One action of a rule (its firing actions, then its resolve actions).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventActionView {
    /// `syslog`, `mail`, `webhook`, `cli`, `commit`, `script`.
    pub kind: String,
    /// Whether it runs when the rule resolves (else when it fires).
    pub on_resolve: bool,
    pub runs: u64,
    pub ok: u64,
    pub failed: u64,
    pub timed_out: u64,
    /// Skipped by the action's rate limit.
    pub rate_limited: u64,
    /// Skipped because too many actions were running already.
    pub dropped: u64,
    /// The last run: what it did or why not, and how long from the event to its end.
    pub last_detail: String,
    pub last_event_to_done_ms: Option<f64>,
    pub last_output: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventRuleView {
    pub name: String,
    /// The detector's kind and settings, as a line.
    pub detector: String,
    /// `idle`, `pending`, `firing`, `muted` (fired too often: see the manager's doc) or
    /// `disabled`.
    pub state: String,
    /// Instances firing now (ports, series, threads).
    pub firing: Vec<String>,
    pub fired: u64,
    pub resolved: u64,
    /// Events absorbed while firing (keep-firing-for, debounce).
    pub suppressed: u64,
    /// Records the rule's own actions logged that would have triggered it.
    pub self_triggered: u64,
    pub muted: u64,
    pub last_fired_unix: Option<f64>,
    pub last_instance: String,
    pub last_value: String,
    /// From the event (a record's time, a sample's) to the firing's dispatch, ms.
    pub last_event_to_dispatch_ms: Option<f64>,
    /// A flow rule's matching live flows (the seed's average and peak flow count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<EventFlowsView>,
    pub actions: Vec<EventActionView>,
}

/// A flow rule's count of matching live flows, over the rule's life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventFlowsView {
    pub now: u64,
    pub average: f64,
    pub peak: u64,
    /// Matching flows the workers did not keep for per-source figures (counts stay exact).
    pub truncated: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventManagerView {
    /// False: the event manager does not run (a router that is no daemon).
    pub running: bool,
    pub poll_ms: u64,
    pub rules: Vec<EventRuleView>,
    pub records_seen: u64,
    /// Records of a chain of actions too deep to trigger anything.
    pub too_deep: u64,
    pub polls: u64,
    /// CPU time one poll takes (sampling and evaluation), the last and the longest, µs.
    pub last_poll_us: u64,
    pub max_poll_us: u64,
    pub actions_running: u64,
}

impl Render for EventManagerView {
    fn render(&self) -> String {
        if !self.running {
            return "The event manager is not running (it runs in `linerate daemon`).\n".into();
        }
        let ms = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.1}"));
        let rows = self
            .rules
            .iter()
            .map(|r| {
                vec![
                    r.name.clone(),
                    r.state.clone(),
                    r.fired.to_string(),
                    r.resolved.to_string(),
                    r.suppressed.to_string(),
                    if r.last_instance.is_empty() {
                        "-".into()
                    } else {
                        r.last_instance.clone()
                    },
                    ms(r.last_event_to_dispatch_ms),
                    r.detector.clone(),
                ]
            })
            .collect();
        let mut out = table(
            &[
                "Rule",
                "State",
                "Fired",
                "Resolved",
                "Absorbed",
                "Last",
                "Event->ms",
                "Detector",
            ],
            rows,
        );
        let arows: Vec<Vec<String>> = self
            .rules
            .iter()
            .flat_map(|r| {
                r.actions.iter().map(move |a| {
                    vec![
                        r.name.clone(),
                        format!("{}{}", a.kind, if a.on_resolve { " (resolve)" } else { "" }),
                        a.runs.to_string(),
                        a.ok.to_string(),
                        a.failed.to_string(),
                        a.timed_out.to_string(),
                        a.rate_limited.to_string(),
                        ms(a.last_event_to_done_ms),
                        a.last_detail.chars().take(70).collect(),
                    ]
                })
            })
            .collect();
        let frows: Vec<Vec<String>> = self
            .rules
            .iter()
            .filter_map(|r| {
                r.flows.map(|f| {
                    vec![
                        r.name.clone(),
                        f.now.to_string(),
                        format!("{:.1}", f.average),
                        f.peak.to_string(),
                        f.truncated.to_string(),
                    ]
                })
            })
            .collect();
        if !frows.is_empty() {
            out.push('\n');
            out.push_str(&table(
                &["Rule", "Flows now", "Average", "Peak", "Not kept"],
                frows,
            ));
        }
        if !arows.is_empty() {
            out.push('\n');
            out.push_str(&table(
                &[
                    "Rule", "Action", "Runs", "OK", "Failed", "Timeout", "Limited", "Done ms",
                    "Last",
                ],
                arows,
            ));
        }
        out.push_str(&format!(
            "\nrecords seen {}, too deep {}, polls {} (every {} ms; last {} us, longest {} us), actions running {}\n",
            self.records_seen,
            self.too_deep,
            self.polls,
            self.poll_ms,
            self.last_poll_us,
            self.max_poll_us,
            self.actions_running
        ));
        out
    }
}
