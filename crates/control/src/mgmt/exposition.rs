//! `show metrics`: every counter and gauge of the router in the Prometheus text format (0.0.4),
//! read at the moment of the scrape. Metrics never reset (`clear counters` only moves what the
//! shows count from).

use std::sync::atomic::Ordering;

use dataplane::counters::DropReason;
use dataplane::Snapshot;

use super::Core;
use crate::metrics::{Exposition, Kind, Series};

impl Core {
    /// Every counter and table gauge in the Prometheus text format.
    pub fn metrics(&self) -> String {
        let mut e = Exposition::new();
        self.expose(&mut e);
        e.finish()
    }

    /// The samples of the families named in `wanted` (what the event manager's metric rules
    /// read; the others are computed but not formatted).
    pub fn metric_series(&self, wanted: std::collections::HashSet<String>) -> Vec<Series> {
        let mut e = Exposition::collecting(wanted);
        self.expose(&mut e);
        e.series()
    }

    fn expose(&self, e: &mut Exposition) {
        let api = self.command_stats();
        let log = self.logger.stats();
        // Before the state lock: the CPU sampler takes that lock to read the workers.
        let cpu = self.cpu().ok();
        // Before the state lock too: the event manager's view has a lock of its own.
        if e.wants_prefix("linerate_event_") {
            let events = self.event_manager();
            expose_events(e, &events);
        }
        let s = self.lock("metrics");
        let snap: Snapshot = s.runtime.snapshot();
        let per = s.runtime.worker_counters();
        let names: Vec<(usize, String)> = s
            .router
            .port_slots
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.clone().map(|n| (i, n)))
            .collect();
        let port_families: [(&str, &str, &Vec<u64>); 5] = [
            (
                "linerate_port_rx_packets_total",
                "Frames received on the port.",
                &snap.rx_packets,
            ),
            (
                "linerate_port_rx_bytes_total",
                "Bytes received on the port.",
                &snap.rx_bytes,
            ),
            (
                "linerate_port_rx_errors_total",
                "Frames that arrived on the port but could not be taken in (capture records skipped or unreadable).",
                &snap.rx_errors,
            ),
            (
                "linerate_port_tx_packets_total",
                "Frames transmitted on the port.",
                &snap.tx_packets,
            ),
            (
                "linerate_port_tx_bytes_total",
                "Bytes transmitted on the port.",
                &snap.tx_bytes,
            ),
        ];
        for (name, help, v) in port_families {
            e.family(name, Kind::Counter, help);
            for (i, n) in &names {
                e.sample(&[("port", n)], v.get(*i).copied().unwrap_or(0) as f64);
            }
        }
        e.family(
            "linerate_port_up",
            Kind::Gauge,
            "1 if the port is in service, 0 if it was removed.",
        );
        for (i, n) in &names {
            e.sample(
                &[("port", n)],
                s.runtime.is_in_service(*i as u16) as u8 as f64,
            );
        }
        e.family(
            "linerate_interface_up",
            Kind::Gauge,
            "1 if the interface is administratively and operationally up.",
        );
        for i in &s.router.ifs {
            let up = super::show::oper_up(&s, i);
            e.sample(&[("interface", &i.name)], up as u8 as f64);
        }
        let r = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
        e.family(
            "linerate_drops_total",
            Kind::Counter,
            "Frames dropped, by node, reason and worker.",
        );
        for (id, c) in &per {
            let w = id.to_string();
            for &d in DropReason::ALL {
                e.sample(
                    &[("worker", &w), ("node", d.node()), ("reason", d.name())],
                    r(&c.drops[d as usize]),
                );
            }
        }
        type NodeField = fn(&dataplane::graph::NodeCounters) -> &std::sync::atomic::AtomicU64;
        let node_families: [(&str, &str, NodeField); 4] = [
            (
                "linerate_node_calls_total",
                "Times a graph node ran (each on one vector), by worker.",
                |c| &c.calls,
            ),
            (
                "linerate_node_packets_total",
                "Packets a graph node took in, by worker.",
                |c| &c.packets,
            ),
            (
                "linerate_node_sampled_packets_total",
                "Packets of the timed calls (one vector in 16): divide the sampled nanoseconds by these.",
                |c| &c.timed_packets,
            ),
            (
                "linerate_node_sampled_nanoseconds_total",
                "Nanoseconds spent in the timed calls of a graph node.",
                |c| &c.timed_ns,
            ),
        ];
        for (name, help, f) in node_families {
            e.family(name, Kind::Counter, help);
            for (id, c) in &per {
                let w = id.to_string();
                for (node, nc) in dataplane::graph::row_names().zip(c.nodes.iter()) {
                    e.sample(&[("worker", &w), ("node", node)], r(f(nc)));
                }
            }
        }
        if let Some(v) = &cpu {
            e.family(
                "linerate_thread_cpu_percent",
                Kind::Gauge,
                "Per thread (workers, the router's own, FRR's daemons): % of one CPU over the \
                 window; measure cpu is time on a CPU (polling included), busy is work done.",
            );
            for r in &v.rows {
                let kind = match r.kind {
                    crate::cpu::Kind::Worker => "worker",
                    crate::cpu::Kind::Control => "control",
                    crate::cpu::Kind::Frr => "frr",
                };
                for (i, w) in ["5s", "1m", "5m"].iter().enumerate() {
                    for (measure, x) in [("cpu", r.cpu[i]), ("busy", r.busy[i])] {
                        e.sample(
                            &[
                                ("thread", &r.name),
                                ("id", &r.id.to_string()),
                                ("kind", kind),
                                ("window", w),
                                ("measure", measure),
                            ],
                            x,
                        );
                    }
                }
            }
        }
        e.family(
            "linerate_punt_frames_total",
            Kind::Counter,
            "Frames of each punt class, by outcome: punted (passed its policer), policed, \
             queue_full (the ring to the control plane was full).",
        );
        for (id, c) in &per {
            let w = id.to_string();
            for &k in dataplane::punt::PuntClass::ALL {
                let pc = &c.punt[k as usize];
                for (outcome, a) in [
                    ("punted", &pc.punted),
                    ("policed", &pc.policed),
                    ("queue_full", &pc.queue_full),
                ] {
                    e.sample(
                        &[("worker", &w), ("class", k.name()), ("outcome", outcome)],
                        r(a),
                    );
                }
            }
        }
        type Field = fn(&dataplane::WorkerCounters) -> &std::sync::atomic::AtomicU64;
        let worker_families: [(&str, &str, Field); 6] = [
            (
                "linerate_worker_vectors_total",
                "Vectors (bursts) processed by the worker.",
                |c| &c.vectors,
            ),
            (
                "linerate_worker_icmp_sent_total",
                "ICMP and ICMPv6 errors sent by the worker.",
                |c| &c.icmp_sent,
            ),
            (
                "linerate_worker_icmp_rate_limited_total",
                "ICMP errors not sent because of the rate limit.",
                |c| &c.icmp_rate_limited,
            ),
            (
                "linerate_worker_echo_replies_total",
                "Echo replies sent for the router's addresses.",
                |c| &c.echo_replies,
            ),
            (
                "linerate_worker_slow_path_total",
                "Packets handled by the slow path.",
                |c| &c.slow_path,
            ),
            (
                "linerate_worker_busy_nanoseconds_total",
                "Nanoseconds the worker spent on vectors that carried frames.",
                |c| &c.busy_ns,
            ),
        ];
        for (name, help, f) in worker_families {
            e.family(name, Kind::Counter, help);
            for (id, c) in &per {
                e.sample(&[("worker", &id.to_string())], r(f(c)));
            }
        }
        type PortField = fn(&dataplane::counters::PortCounters) -> &std::sync::atomic::AtomicU64;
        let per_port: [(&str, &str, PortField); 2] = [
            (
                "linerate_worker_rx_packets_total",
                "Frames received by the worker, by port.",
                |p| &p.rx_packets,
            ),
            (
                "linerate_worker_tx_packets_total",
                "Frames transmitted by the worker, by port.",
                |p| &p.tx_packets,
            ),
        ];
        for (name, help, f) in per_port {
            e.family(name, Kind::Counter, help);
            for (id, c) in &per {
                for (i, n) in &names {
                    e.sample(
                        &[("worker", &id.to_string()), ("port", n)],
                        r(f(&c.ports[*i])),
                    );
                }
            }
        }
        e.family("linerate_workers", Kind::Gauge, "Workers running.");
        e.sample(&[], per.len() as f64);
        e.family(
            "linerate_table_entries",
            Kind::Gauge,
            "Entries in each table (routes per VRF and family, next hops, neighbours).",
        );
        let tables = Self::tables(&s);
        for t in &tables {
            e.sample(&[("table", &t.table)], t.entries as f64);
        }
        e.family(
            "linerate_table_limit",
            Kind::Gauge,
            "The most entries each table can hold.",
        );
        for t in &tables {
            e.sample(&[("table", &t.table)], t.limit as f64);
        }
        e.family(
            "linerate_table_bytes",
            Kind::Gauge,
            "Memory each table uses, in bytes.",
        );
        for t in &tables {
            e.sample(&[("table", &t.table)], t.bytes as f64);
        }
        e.family(
            "linerate_buffers",
            Kind::Gauge,
            "Packet buffers in the pool.",
        );
        e.sample(&[], s.runtime.pool.capacity() as f64);
        e.family(
            "linerate_buffers_free",
            Kind::Gauge,
            "Packet buffers not in use.",
        );
        e.sample(&[], s.runtime.pool.available() as f64);
        e.family(
            "linerate_config_commit",
            Kind::Gauge,
            "Id of the running config's commit.",
        );
        e.sample(&[], s.history.last_id() as f64);
        e.family(
            "linerate_api_routes",
            Kind::Gauge,
            "Routes added through the API.",
        );
        e.sample(&[], s.api_routes.len() as f64);
        e.family(
            "linerate_syslog_records_total",
            Kind::Counter,
            "Syslog records produced.",
        );
        e.sample(&[], log.records as f64);
        e.family(
            "linerate_syslog_send_errors_total",
            Kind::Counter,
            "Syslog records that could not be sent to a server.",
        );
        e.sample(&[], log.send_errors as f64);
        e.family(
            "linerate_api_commands_total",
            Kind::Counter,
            "Commands run by the control plane, by command.",
        );
        for (k, v) in &api {
            e.sample(&[("command", k)], v.count as f64);
        }
        e.family(
            "linerate_api_command_wait_seconds_total",
            Kind::Counter,
            "Time commands waited for the control-plane state, by command.",
        );
        for (k, v) in &api {
            e.sample(&[("command", k)], v.wait_ns as f64 / 1e9);
        }
        e.family(
            "linerate_api_command_run_seconds_total",
            Kind::Counter,
            "Time commands ran holding the control-plane state, by command.",
        );
        for (k, v) in &api {
            e.sample(&[("command", k)], v.run_ns as f64 / 1e9);
        }
        e.family(
            "linerate_uptime_seconds",
            Kind::Gauge,
            "Seconds since the router started.",
        );
        e.sample(&[], self.uptime().as_secs_f64());
        self.services_metrics(&s, e);
        self.bridge_metrics(&s, e);
        self.snoop_metrics(&s, e);
        self.mroute_metrics(&s, e);
        self.gtp_metrics(&s, e);
        self.atm_metrics(&s, e);
        self.mpls_metrics(&s, e);
        drop(s);
        self.dlsw_metrics(e);
        self.ldp_metrics(e);
    }
}

/// The event manager's rules and actions (families present only while it runs).
fn expose_events(e: &mut Exposition, v: &api::views::EventManagerView) {
    if !v.running {
        return;
    }
    type RuleField = fn(&api::views::EventRuleView) -> f64;
    let rule_families: [(&str, Kind, &str, RuleField); 4] = [
        (
            "linerate_event_rule_fired_total",
            Kind::Counter,
            "Times an event-manager rule fired (an instance started firing).",
            |r| r.fired as f64,
        ),
        (
            "linerate_event_rule_resolved_total",
            Kind::Counter,
            "Times an event-manager rule's instance stopped firing.",
            |r| r.resolved as f64,
        ),
        (
            "linerate_event_rule_firing",
            Kind::Gauge,
            "Instances of the rule firing now (ports, series, sources).",
            |r| r.firing.len() as f64,
        ),
        (
            "linerate_event_rule_self_triggered_total",
            Kind::Counter,
            "Records a rule's own actions logged that would have triggered it (not acted on).",
            |r| r.self_triggered as f64,
        ),
    ];
    for (name, kind, help, f) in rule_families {
        e.family(name, kind, help);
        for r in &v.rules {
            e.sample(&[("rule", &r.name)], f(r));
        }
    }
    e.family(
        "linerate_event_rule_flows",
        Kind::Gauge,
        "Live flows matching a flow rule's filter in the workers' latest scans.",
    );
    for r in &v.rules {
        if let Some(f) = r.flows {
            e.sample(&[("rule", &r.name)], f.now as f64);
        }
    }
    e.family(
        "linerate_event_action_runs_total",
        Kind::Counter,
        "Runs of an event-manager action by outcome (ok, failed, timeout), and runs skipped (rate_limited, dropped: too many running).",
    );
    for r in &v.rules {
        for (i, a) in r.actions.iter().enumerate() {
            let index = i.to_string();
            for (outcome, n) in [
                ("ok", a.ok),
                ("failed", a.failed),
                ("timeout", a.timed_out),
                ("rate_limited", a.rate_limited),
                ("dropped", a.dropped),
            ] {
                e.sample(
                    &[
                        ("rule", &r.name),
                        ("action", &a.kind),
                        ("index", &index),
                        ("outcome", outcome),
                    ],
                    n as f64,
                );
            }
        }
    }
    e.family(
        "linerate_event_poll_seconds",
        Kind::Gauge,
        "CPU time of the event manager's last poll (sampling and evaluating every rule).",
    );
    e.sample(&[], v.last_poll_us as f64 / 1e6);
}
