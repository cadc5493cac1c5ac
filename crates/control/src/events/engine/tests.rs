use super::*;
use crate::config::events::{Action, ActionCfg, Pattern, Threshold};
use crate::config::Origin;
use crate::syslog::Severity;

fn rule(name: &str, detector: Detector) -> RuleCfg {
    RuleCfg {
        name: name.into(),
        enabled: true,
        detector,
        for_ms: 0,
        debounce: None,
        keep_firing_for_ms: 0,
        actions: vec![ActionCfg {
            action: Action::Syslog {
                severity: Severity::Notice,
                msgid: "EVENT".into(),
                text: "x".into(),
            },
            rate_count: 10,
            rate_per_ms: 60_000,
            timeout_ms: 1000,
        }],
        resolve_actions: Vec::new(),
        origin: Origin::default(),
    }
}

fn record(msgid: &str, params: &[(&str, &str)], text: &str) -> Record {
    Record {
        seq: 1,
        time: SystemTime::now(),
        severity: Severity::Notice,
        msgid: msgid.into(),
        params: params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        text: text.into(),
    }
}

fn link_rule() -> RuleCfg {
    rule(
        "down",
        Detector::Link {
            port: Some("p1".into()),
            state: LinkState::Down,
        },
    )
}

#[test]
fn a_link_down_record_fires_the_port_s_rule_with_its_variables() {
    let t0 = Instant::now();
    let mut e = Engine::new(vec![link_rule()], BTreeMap::new(), t0);
    assert!(e
        .on_record(
            &record("LINK_DOWN", &[("port", "p2")], "port p2: link down"),
            t0
        )
        .is_empty());
    let f = e.on_record(
        &record("LINK_DOWN", &[("port", "p1")], "port p1: link down"),
        t0,
    );
    assert_eq!(f.len(), 1);
    assert!(!f[0].resolve);
    assert_eq!(f[0].vars["port"], "p1");
    assert_eq!(f[0].vars["state"], "down");
    let f = e.on_record(
        &record("LINK_UP", &[("port", "p1")], "port p1: link up"),
        t0,
    );
    assert!(f.len() == 1 && f[0].resolve);
    assert_eq!(e.rules[0].fired, 1);
    assert_eq!(e.rules[0].resolved, 1);
}

#[test]
fn a_port_down_at_start_holds_for_its_for_time() {
    let t0 = Instant::now();
    let mut r = link_rule();
    r.for_ms = 500;
    let links = BTreeMap::from([("p1".to_string(), true)]);
    let mut e = Engine::new(vec![r], links, t0);
    assert!(e
        .on_poll(&Poll::default(), t0, SystemTime::now())
        .is_empty());
    assert!(e
        .on_poll(
            &Poll::default(),
            t0 + Duration::from_millis(400),
            SystemTime::now()
        )
        .is_empty());
    let f = e.on_poll(
        &Poll::default(),
        t0 + Duration::from_millis(500),
        SystemTime::now(),
    );
    assert_eq!(f.len(), 1);
}

#[test]
fn a_rule_never_triggers_itself_and_chains_stop_at_the_depth_limit() {
    let t0 = Instant::now();
    let syslog = |name: &str| {
        rule(
            name,
            Detector::Syslog {
                pattern: Pattern(regex::Regex::new("EVENT").unwrap()),
                msgid: None,
            },
        )
    };
    let mut e = Engine::new(vec![syslog("a"), syslog("b")], BTreeMap::new(), t0);
    let own = record("EVENT", &[("eem-rule", "a"), ("eem-depth", "1")], "from a");
    let f = e.on_record(&own, t0);
    assert_eq!(f.len(), 1, "b fires on a's record, a does not");
    assert_eq!(f[0].rule, 1);
    assert_eq!(f[0].depth, 1);
    assert_eq!(e.rules[0].self_triggered, 1);
    let deep = record("EVENT", &[("eem-rule", "b"), ("eem-depth", "3")], "deep");
    assert!(e.on_record(&deep, t0).is_empty());
    assert_eq!(e.too_deep, 1);
}

#[test]
fn a_runaway_rule_is_muted() {
    let t0 = Instant::now();
    let r = rule(
        "loud",
        Detector::Syslog {
            pattern: Pattern(regex::Regex::new("X").unwrap()),
            msgid: None,
        },
    );
    let mut e = Engine::new(vec![r], BTreeMap::new(), t0);
    let mut fired = 0;
    for k in 0..100u64 {
        fired += e
            .on_record(&record("X", &[], "x"), t0 + Duration::from_millis(k))
            .len();
    }
    assert_eq!(fired, RUNAWAY_FIRINGS + 1);
    assert_eq!(e.rules[0].muted, 1);
    assert_eq!(e.rules[0].phase(t0 + Duration::from_millis(100)).0, "muted");
    // After the mute it fires again.
    let later = t0 + MUTE_FOR + Duration::from_secs(1);
    assert_eq!(e.on_record(&record("X", &[], "x"), later).len(), 1);
}

#[test]
fn many_instances_firing_once_each_are_no_runaway() {
    use crate::config::events::FlowsPer;
    use crate::events::flows::{Agg, RuleFlows};
    let t0 = Instant::now();
    let r = rule(
        "worm",
        Detector::Flows {
            lines: vec![],
            rules: vec![],
            interface: None,
            direction: None,
            per: FlowsPer::Source,
            threshold: Threshold::Above(10.0),
            active_ms: 2000,
        },
    );
    let mut e = Engine::new(vec![r], BTreeMap::new(), t0);
    // 100 infected hosts found in one pass: 100 firings within a second, one per source.
    let sources: Vec<(String, Agg)> = (0..100)
        .map(|i| {
            (
                format!("198.18.0.{i}"),
                Agg {
                    flows: 50,
                    ..Agg::default()
                },
            )
        })
        .collect();
    let poll = Poll {
        flows: vec![Some(RuleFlows {
            instances: sources,
            total: 5000,
            ..RuleFlows::default()
        })],
        ..Poll::default()
    };
    let f = e.on_poll(&poll, t0, SystemTime::now());
    assert_eq!(f.len(), 100);
    assert_eq!(e.rules[0].muted, 0, "distinct sources are not a loop");
}

fn series(name: &str, port: &str, v: f64) -> Series {
    Series {
        name: name.into(),
        labels: vec![("port".into(), port.into())],
        value: v,
    }
}

#[test]
fn a_rate_rule_fires_per_series_over_its_window() {
    let t0 = Instant::now();
    let r = rule(
        "rx",
        Detector::Metric {
            name: "linerate_port_rx_packets_total".into(),
            labels: vec![],
            kind: MetricKind::Rate,
            threshold: Threshold::Above(1000.0),
            window_ms: 1000,
        },
    );
    let mut e = Engine::new(vec![r], BTreeMap::new(), t0);
    let poll = |a: f64, b: f64| Poll {
        series: vec![
            series("linerate_port_rx_packets_total", "p0", a),
            series("linerate_port_rx_packets_total", "p1", b),
            series("linerate_port_tx_packets_total", "p1", 1e12),
        ],
        cpu: None,
        flows: vec![],
    };
    let now = SystemTime::now();
    assert!(
        e.on_poll(&poll(0.0, 0.0), t0, now).is_empty(),
        "no rate from one sample"
    );
    let f = e.on_poll(&poll(500.0, 5000.0), t0 + Duration::from_millis(500), now);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].vars["port"], "p1");
    assert_eq!(f[0].vars["value"], "10000");
    // p1 stops: its rate over the window falls under the threshold once the burst leaves it.
    let f = e.on_poll(&poll(1000.0, 5000.0), t0 + Duration::from_millis(1600), now);
    assert!(f.len() == 1 && f[0].resolve, "{f:?}");
}

#[test]
fn an_increase_and_a_value_read_the_same_series_differently() {
    let t0 = Instant::now();
    let inc = rule(
        "inc",
        Detector::Metric {
            name: "m_total".into(),
            labels: vec![("port".into(), "p0".into())],
            kind: MetricKind::Increase,
            threshold: Threshold::Above(5.0),
            window_ms: 10_000,
        },
    );
    let val = rule(
        "val",
        Detector::Metric {
            name: "m_total".into(),
            labels: vec![],
            kind: MetricKind::Value,
            threshold: Threshold::Above(100.0),
            window_ms: 1000,
        },
    );
    let mut e = Engine::new(vec![inc, val], BTreeMap::new(), t0);
    let now = SystemTime::now();
    let p = |v: f64| Poll {
        series: vec![series("m_total", "p0", v)],
        cpu: None,
        flows: vec![],
    };
    let f = e.on_poll(&p(200.0), t0, now);
    assert_eq!(f.iter().map(|f| f.rule).collect::<Vec<_>>(), vec![1]);
    let f = e.on_poll(&p(204.0), t0 + Duration::from_millis(100), now);
    assert!(f.is_empty());
    let f = e.on_poll(&p(206.0), t0 + Duration::from_millis(200), now);
    assert_eq!(f.iter().map(|f| f.rule).collect::<Vec<_>>(), vec![0]);
}

#[test]
fn cpu_rules_read_control_threads_together_and_workers_by_their_busy_share() {
    let t0 = Instant::now();
    let control = rule(
        "cp",
        Detector::Cpu {
            of: CpuOf::Control,
            threshold: Threshold::Above(90.0),
        },
    );
    let workers = rule(
        "w",
        Detector::Cpu {
            of: CpuOf::Workers,
            threshold: Threshold::Above(50.0),
        },
    );
    let mut e = Engine::new(vec![control, workers], BTreeMap::new(), t0);
    let poll = Poll {
        series: vec![],
        cpu: Some(vec![
            ("punt".into(), Kind::Control, 60.0, 60.0),
            ("api".into(), Kind::Control, 35.0, 35.0),
            ("worker0".into(), Kind::Worker, 100.0, 20.0),
            ("worker1".into(), Kind::Worker, 100.0, 70.0),
        ]),
        flows: vec![],
    };
    let f = e.on_poll(&poll, t0, SystemTime::now());
    let got: Vec<(usize, String)> = f.iter().map(|f| (f.rule, f.instance.clone())).collect();
    assert_eq!(got, vec![(0, "control".into()), (1, "worker1".into())]);
    assert_eq!(f[0].vars["value"], "95.0");
}

#[test]
fn timers_tick_and_countdowns_fire_once() {
    let t0 = Instant::now();
    let every = rule(
        "every",
        Detector::Timer {
            every_ms: 100,
            repeat: true,
        },
    );
    let once = rule(
        "once",
        Detector::Timer {
            every_ms: 150,
            repeat: false,
        },
    );
    let mut e = Engine::new(vec![every, once], BTreeMap::new(), t0);
    let mut count = [0; 2];
    for k in 0..=10u64 {
        for f in e.on_poll(
            &Poll::default(),
            t0 + Duration::from_millis(k * 50),
            SystemTime::now(),
        ) {
            count[f.rule] += 1;
        }
    }
    assert_eq!(count, [5, 1]);
}

#[test]
fn a_commit_keeps_the_state_of_unchanged_rules() {
    let t0 = Instant::now();
    let mut e = Engine::new(vec![link_rule()], BTreeMap::new(), t0);
    e.on_record(&record("LINK_DOWN", &[("port", "p1")], ""), t0);
    assert_eq!(e.rules[0].phase(t0).0, "firing");
    e.reconfigure(vec![link_rule()], t0);
    assert_eq!(e.rules[0].phase(t0).0, "firing");
    assert_eq!(e.rules[0].fired, 1);
    let mut changed = link_rule();
    changed.for_ms = 10;
    e.reconfigure(vec![changed], t0);
    assert_eq!(e.rules[0].fired, 0, "a changed rule starts afresh");
}

#[test]
fn a_flow_rule_fires_per_source_above_its_count_and_resolves_when_the_source_goes_quiet() {
    use crate::config::events::FlowsPer;
    use crate::events::flows::{Agg, RuleFlows};
    let t0 = Instant::now();
    let r = rule(
        "worm",
        Detector::Flows {
            lines: vec!["udp dport 1434".into()],
            rules: vec![],
            interface: None,
            direction: None,
            per: FlowsPer::Source,
            threshold: Threshold::Above(100.0),
            active_ms: 2000,
        },
    );
    let mut e = Engine::new(vec![r], BTreeMap::new(), t0);
    let agg = |flows| Agg {
        flows,
        packets: flows * 2,
        bytes: flows * 808,
        interface: "p0".into(),
    };
    let poll = |sources: &[(&str, u64)]| Poll {
        flows: vec![Some(RuleFlows {
            instances: sources
                .iter()
                .map(|(s, n)| (s.to_string(), agg(*n)))
                .collect(),
            total: sources.iter().map(|x| x.1).sum(),
            top_sources: sources
                .iter()
                .map(|(s, n)| (s.parse().unwrap(), *n))
                .collect(),
            truncated: 0,
        })],
        ..Poll::default()
    };
    let now = SystemTime::now();
    let f = e.on_poll(&poll(&[("198.18.0.7", 250), ("198.18.0.9", 3)]), t0, now);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].instance, "198.18.0.7");
    assert_eq!(f[0].vars["source"], "198.18.0.7");
    assert_eq!(f[0].vars["interface"], "p0");
    assert_eq!(f[0].vars["flows"], "250");
    // Still attacking: nothing new; a second source joins and fires on its own.
    let f = e.on_poll(
        &poll(&[("198.18.0.7", 260), ("198.18.0.8", 120)]),
        t0 + Duration::from_millis(500),
        now,
    );
    assert_eq!(
        f.iter().map(|f| f.instance.as_str()).collect::<Vec<_>>(),
        ["198.18.0.8"]
    );
    // Both stop: their flows age out of the passes and each resolves once.
    let f = e.on_poll(&poll(&[]), t0 + Duration::from_millis(1000), now);
    assert!(f.iter().all(|f| f.resolve) && f.len() == 2, "{f:?}");
    let figures = e.rules[0].flows.expect("figures kept");
    assert_eq!((figures.now, figures.peak, figures.samples), (0, 380, 3));
}

#[test]
fn a_cron_timer_fires_at_its_times_and_not_between() {
    use crate::config::events::CronPattern;
    let t0 = Instant::now();
    let every_second = CronPattern::parse("* * * * * *").unwrap();
    let yearly = CronPattern::parse("@yearly").unwrap();
    let mut e = Engine::new(
        vec![
            rule(
                "tick",
                Detector::Cron {
                    pattern: every_second,
                },
            ),
            rule("newyear", Detector::Cron { pattern: yearly }),
        ],
        BTreeMap::new(),
        t0,
    );
    let now = SystemTime::now();
    // Within a second of the start: the next whole second may or may not have come.
    let early = e.on_poll(&Poll::default(), t0, now);
    assert!(early.is_empty(), "{early:?}");
    let f = e.on_poll(&Poll::default(), t0 + Duration::from_millis(1100), now);
    assert_eq!(f.iter().map(|f| f.rule).collect::<Vec<_>>(), [0]);
    assert!(f[0].vars["event"].contains("* * * * * *"), "{f:?}");
    // The same poll time again fires nothing: the next time lies ahead.
    assert!(e
        .on_poll(&Poll::default(), t0 + Duration::from_millis(1100), now)
        .is_empty());
    assert!(CronPattern::parse("61 * * * *").is_err());
}
