//! A rule's condition, in the manner of Prometheus alerting rules: per instance (a port, a
//! metric series, a thread) it is idle, pending (the condition holds, `for` not yet elapsed) or
//! firing; it fires once when it starts firing and resolves once when it stops. Sans I/O: the
//! caller feeds observations with their time and acts on the transitions returned.
//!
//! - A level detector (link, metric, CPU) says, for each instance it sees, whether the
//!   condition holds now. It fires once the condition has held for `for` and, with `debounce`,
//!   once it has become true `count` times within `within`; it resolves when the condition has
//!   been false for `keep_firing_for`.
//! - An edge detector (syslog, command, timer) reports single events. It fires on an event once
//!   `count` events fell within `within` (the first, without `debounce`); further events while
//!   firing are absorbed (counted as suppressed); it resolves after `keep_firing_for` without an
//!   event, at once without it (and then resolves silently: a single event has no "back to
//!   normal").
//!
//! Occurrences are forgotten when the rule fires, as IOS EEM's "occurs N within T" counts anew.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// An event's variables (`{port}`, `{value}`, ...).
pub type Vars = BTreeMap<String, String>;

/// Instances a rule keeps at most (a metric rule over many series); beyond, new ones are not
/// tracked and are counted.
pub const MAX_INSTANCES: usize = 10_000;

#[derive(Clone, Debug, PartialEq)]
pub enum Transition {
    Fire { instance: String, vars: Vars },
    Resolve { instance: String, vars: Vars },
}

#[derive(Clone, Debug, Default)]
struct Instance {
    /// Since when the condition holds (level), None while it does not.
    active_since: Option<Instant>,
    /// The last time it held (level) or the last event (edge).
    last_active: Option<Instant>,
    /// Rising edges (level) or events (edge) within the debounce window.
    occurrences: VecDeque<Instant>,
    firing: bool,
    vars: Vars,
}

/// What an instance is doing, for `show event-manager`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Idle,
    Pending,
    Firing,
}

#[derive(Clone, Debug)]
pub struct Condition {
    pub level: bool,
    pub for_: Duration,
    pub debounce: Option<(u32, Duration)>,
    pub keep_firing_for: Duration,
}

#[derive(Debug)]
pub struct RuleState {
    cond: Condition,
    instances: BTreeMap<String, Instance>,
    /// Events absorbed while the instance was already firing.
    pub suppressed: u64,
    /// Instances not tracked for lack of room.
    pub untracked: u64,
}

impl RuleState {
    pub fn new(cond: Condition) -> RuleState {
        RuleState {
            cond,
            instances: BTreeMap::new(),
            suppressed: 0,
            untracked: 0,
        }
    }

    fn instance(&mut self, key: &str) -> Option<&mut Instance> {
        if !self.instances.contains_key(key) {
            if self.instances.len() >= MAX_INSTANCES {
                self.untracked += 1;
                return None;
            }
            self.instances.insert(key.to_string(), Instance::default());
        }
        self.instances.get_mut(key)
    }

    fn debounced(cond: &Condition, i: &mut Instance, now: Instant) -> bool {
        match cond.debounce {
            None => true,
            Some((count, within)) => {
                while i
                    .occurrences
                    .front()
                    .is_some_and(|&t| now.saturating_duration_since(t) > within)
                {
                    i.occurrences.pop_front();
                }
                i.occurrences.len() >= count as usize
            }
        }
    }

    /// A level detector's reading of one instance.
    pub fn level(
        &mut self,
        key: &str,
        active: bool,
        vars: Vars,
        now: Instant,
    ) -> Option<Transition> {
        let cond = self.cond.clone();
        if !active && !self.instances.contains_key(key) {
            // Nothing to track: an instance exists only once its condition held.
            return None;
        }
        let i = self.instance(key)?;
        if active {
            if i.active_since.is_none() {
                i.active_since = Some(now);
                if cond.debounce.is_some() {
                    i.occurrences.push_back(now);
                }
            }
            i.last_active = Some(now);
            i.vars = vars;
        } else if i.active_since.take().is_some() {
            // keep-firing-for counts from the first reading that found it false.
            i.last_active = Some(now);
        }
        self.step(key, now)
    }

    /// An edge detector's event on one instance.
    pub fn edge(&mut self, key: &str, vars: Vars, now: Instant) -> Option<Transition> {
        let cond = self.cond.clone();
        let debounce = cond.debounce.is_some();
        let i = self.instance(key)?;
        if i.firing {
            i.last_active = Some(now);
            i.vars = vars;
            self.suppressed += 1;
            return None;
        }
        if debounce {
            i.occurrences.push_back(now);
        }
        i.last_active = Some(now);
        i.vars = vars;
        if Self::debounced(&cond, i, now) {
            i.occurrences.clear();
            i.firing = !cond.keep_firing_for.is_zero();
            return Some(Transition::Fire {
                instance: key.to_string(),
                vars: i.vars.clone(),
            });
        }
        None
    }

    /// One instance's state after a change or as time passes.
    fn step(&mut self, key: &str, now: Instant) -> Option<Transition> {
        let cond = self.cond.clone();
        let i = self.instances.get_mut(key)?;
        if cond.level {
            if let Some(since) = i.active_since {
                if !i.firing
                    && now.saturating_duration_since(since) >= cond.for_
                    && Self::debounced(&cond, i, now)
                {
                    i.firing = true;
                    i.occurrences.clear();
                    return Some(Transition::Fire {
                        instance: key.to_string(),
                        vars: i.vars.clone(),
                    });
                }
                return None;
            }
        }
        if i.firing
            && i.active_since.is_none()
            && i.last_active
                .is_none_or(|t| now.saturating_duration_since(t) >= cond.keep_firing_for)
        {
            i.firing = false;
            return Some(Transition::Resolve {
                instance: key.to_string(),
                vars: i.vars.clone(),
            });
        }
        None
    }

    /// Time passing: `for` elapsing, `keep_firing_for` running out; idle instances forgotten.
    pub fn tick(&mut self, now: Instant) -> Vec<Transition> {
        let keys: Vec<String> = self.instances.keys().cloned().collect();
        let mut out = Vec::new();
        for k in keys {
            if let Some(t) = self.step(&k, now) {
                out.push(t);
            }
        }
        let cond = self.cond.clone();
        self.instances.retain(|_, i| {
            i.firing
                || i.active_since.is_some()
                || i.occurrences.back().is_some_and(|&t| {
                    cond.debounce
                        .is_some_and(|(_, w)| now.saturating_duration_since(t) <= w)
                })
        });
        out
    }

    /// The instances whose condition held at their last reading.
    pub fn active_keys(&self) -> Vec<String> {
        self.instances
            .iter()
            .filter(|(_, i)| i.active_since.is_some())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Each instance's phase (idle instances are not kept for long).
    pub fn phases(&self, now: Instant) -> Vec<(String, Phase)> {
        self.instances
            .iter()
            .map(|(k, i)| {
                let p = if i.firing {
                    Phase::Firing
                } else if i.active_since.is_some()
                    || (!self.cond.level
                        && i.last_active.is_some_and(|t| {
                            now.saturating_duration_since(t) < Duration::from_millis(1)
                        }))
                {
                    Phase::Pending
                } else {
                    Phase::Idle
                };
                (k.clone(), p)
            })
            .collect()
    }

    /// Whether the rule's definition of its condition is `cond` (a commit keeps the state of
    /// rules whose condition did not change).
    pub fn same_condition(&self, cond: &Condition) -> bool {
        self.cond.level == cond.level
            && self.cond.for_ == cond.for_
            && self.cond.debounce == cond.debounce
            && self.cond.keep_firing_for == cond.keep_firing_for
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn cond(level: bool, for_ms: u64, debounce: Option<(u32, u64)>, keep_ms: u64) -> Condition {
        Condition {
            level,
            for_: ms(for_ms),
            debounce: debounce.map(|(c, w)| (c, ms(w))),
            keep_firing_for: ms(keep_ms),
        }
    }

    fn fires(t: &Option<Transition>) -> bool {
        matches!(t, Some(Transition::Fire { .. }))
    }

    fn resolves(t: &Option<Transition>) -> bool {
        matches!(t, Some(Transition::Resolve { .. }))
    }

    #[test]
    fn a_level_fires_at_once_without_for_and_resolves_when_it_clears() {
        let t0 = Instant::now();
        let mut r = RuleState::new(cond(true, 0, None, 0));
        assert!(fires(&r.level("p1", true, Vars::new(), t0)));
        assert_eq!(r.level("p1", true, Vars::new(), t0 + ms(10)), None, "once");
        assert!(resolves(&r.level("p1", false, Vars::new(), t0 + ms(20))));
        assert_eq!(r.level("p1", false, Vars::new(), t0 + ms(30)), None);
        assert!(
            fires(&r.level("p1", true, Vars::new(), t0 + ms(40))),
            "again"
        );
    }

    #[test]
    fn for_holds_the_fire_until_the_condition_has_lasted() {
        let t0 = Instant::now();
        let mut r = RuleState::new(cond(true, 100, None, 0));
        assert_eq!(r.level("p1", true, Vars::new(), t0), None);
        assert_eq!(r.tick(t0 + ms(99)), vec![]);
        assert_eq!(r.phases(t0 + ms(99)), vec![("p1".into(), Phase::Pending)]);
        let t = r.tick(t0 + ms(100));
        assert_eq!(t.len(), 1);
        assert!(matches!(&t[0], Transition::Fire { instance, .. } if instance == "p1"));
        // A blip shorter than `for` never fires.
        assert_eq!(r.level("p2", true, Vars::new(), t0), None);
        assert_eq!(r.level("p2", false, Vars::new(), t0 + ms(50)), None);
        assert!(r.tick(t0 + ms(200)).is_empty());
    }

    #[test]
    fn keep_firing_for_rides_out_a_flap() {
        let t0 = Instant::now();
        let mut r = RuleState::new(cond(true, 0, None, 1000));
        assert!(fires(&r.level("p1", true, Vars::new(), t0)));
        assert_eq!(r.level("p1", false, Vars::new(), t0 + ms(100)), None);
        assert_eq!(
            r.level("p1", true, Vars::new(), t0 + ms(300)),
            None,
            "no second fire"
        );
        assert_eq!(r.level("p1", false, Vars::new(), t0 + ms(400)), None);
        assert!(r.tick(t0 + ms(1399)).is_empty());
        let t = r.tick(t0 + ms(1400));
        assert!(matches!(&t[..], [Transition::Resolve { .. }]));
    }

    #[test]
    fn debounce_counts_rising_edges_within_the_window() {
        let t0 = Instant::now();
        let mut r = RuleState::new(cond(true, 0, Some((3, 1000)), 0));
        let mut fired = 0;
        for k in 0..3u64 {
            fired += fires(&r.level("p1", true, Vars::new(), t0 + ms(k * 200))) as u32;
            r.level("p1", false, Vars::new(), t0 + ms(k * 200 + 100));
        }
        assert_eq!(fired, 1, "the third rising edge in 1 s fires");
        // Slower flapping (one per 600 ms, 2 per second) never reaches 3 within 1 s.
        let mut r = RuleState::new(cond(true, 0, Some((3, 1000)), 0));
        for k in 0..10u64 {
            assert!(!fires(&r.level("p1", true, Vars::new(), t0 + ms(k * 600))));
            r.level("p1", false, Vars::new(), t0 + ms(k * 600 + 100));
        }
    }

    #[test]
    fn an_edge_fires_per_event_without_keep_and_absorbs_events_with_it() {
        let t0 = Instant::now();
        let mut r = RuleState::new(cond(false, 0, None, 0));
        assert!(fires(&r.edge("", Vars::new(), t0)));
        assert!(fires(&r.edge("", Vars::new(), t0 + ms(1))));
        assert!(
            r.tick(t0 + ms(2)).is_empty(),
            "no resolve for single events"
        );

        let mut r = RuleState::new(cond(false, 0, None, 500));
        assert!(fires(&r.edge("", Vars::new(), t0)));
        assert_eq!(r.edge("", Vars::new(), t0 + ms(300)), None);
        assert_eq!(r.suppressed, 1);
        assert!(r.tick(t0 + ms(799)).is_empty(), "the last event extends it");
        assert!(matches!(
            &r.tick(t0 + ms(800))[..],
            [Transition::Resolve { .. }]
        ));
        assert!(fires(&r.edge("", Vars::new(), t0 + ms(900))));
    }

    #[test]
    fn an_edge_with_debounce_fires_on_the_nth_event_in_the_window_then_counts_anew() {
        let t0 = Instant::now();
        let mut r = RuleState::new(cond(false, 0, Some((3, 1000)), 0));
        let got: Vec<bool> = (0..7u64)
            .map(|k| fires(&r.edge("", Vars::new(), t0 + ms(k * 100))))
            .collect();
        assert_eq!(got, [false, false, true, false, false, true, false]);
        // Events further apart than the window never add up.
        let mut r = RuleState::new(cond(false, 0, Some((2, 1000)), 0));
        assert!(!fires(&r.edge("", Vars::new(), t0)));
        assert!(!fires(&r.edge("", Vars::new(), t0 + ms(1500))));
        assert!(fires(&r.edge("", Vars::new(), t0 + ms(1600))));
    }

    #[test]
    fn instances_are_separate_and_idle_ones_are_forgotten() {
        let t0 = Instant::now();
        let mut r = RuleState::new(cond(true, 0, None, 0));
        assert!(fires(&r.level("p1", true, Vars::new(), t0)));
        assert!(fires(&r.level("p2", true, Vars::new(), t0)));
        assert!(resolves(&r.level("p1", false, Vars::new(), t0 + ms(5))));
        r.tick(t0 + ms(6));
        assert_eq!(r.phases(t0 + ms(6)), vec![("p2".into(), Phase::Firing)]);
    }

    #[test]
    fn the_vars_of_the_latest_reading_go_with_the_transition() {
        let t0 = Instant::now();
        let mut r = RuleState::new(cond(true, 50, None, 0));
        let v = |x: &str| Vars::from([("value".to_string(), x.to_string())]);
        r.level("a", true, v("91"), t0);
        r.level("a", true, v("97"), t0 + ms(40));
        let t = r.tick(t0 + ms(60));
        assert!(matches!(&t[..], [Transition::Fire { vars, .. }] if vars["value"] == "97"));
    }
}
