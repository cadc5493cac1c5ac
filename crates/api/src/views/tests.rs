//! Every view goes to JSON and back unchanged, and renders what the CLI has always printed.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::*;
use crate::requests::Family;

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T) {
    let json = serde_json::to_string(v).unwrap();
    let back: T = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, v, "{json}");
}

/// The text with every run of spaces made one: column widths are the table's business.
fn words(s: &str) -> String {
    s.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

fn routes() -> RoutesView {
    RoutesView {
        vrf: "default".into(),
        family: Family::Ipv4,
        total: 5,
        matched: 3,
        routes: vec![
            RouteView {
                prefix: "10.0.0.0/24".into(),
                origin: RouteOrigin::Connected,
                kind: NextHopKind::Connected,
                via: vec!["p0".into()],
                next_hop_id: 2,
            },
            RouteView {
                prefix: "10.9.0.0/16".into(),
                origin: RouteOrigin::Fpm,
                kind: NextHopKind::Ecmp,
                via: vec!["10.0.0.2 on p0".into(), "10.1.0.2 on p1".into()],
                next_hop_id: 7,
            },
        ],
    }
}

#[test]
fn routes_keep_their_wire_names_and_render_with_codes() {
    let r = routes();
    round_trip(&r);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["family"], "ipv4");
    assert_eq!(v["routes"][1]["origin"], "fpm");
    assert_eq!(v["routes"][1]["kind"], "ecmp");
    let text = words(&r.render());
    assert!(
        text.starts_with("VRF default, ipv4: 5 routes, 3 matched\n"),
        "{text}"
    );
    assert!(
        text.contains("C 10.0.0.0/24 directly connected, p0\n"),
        "{text}"
    );
    assert!(
        text.contains("R 10.9.0.0/16 via 10.0.0.2 on p0, 10.1.0.2 on p1\n"),
        "{text}"
    );
    assert!(
        text.ends_with("... 1 more (use --limit 0 for all)"),
        "{text}"
    );
}

#[test]
fn interfaces_ports_neighbors_workers_and_counters() {
    let mut i = vec![InterfaceView {
        name: "p0.7".into(),
        port: "p0".into(),
        vlan: Some(7),
        s_vlan: None,
        mac: "02:00:00:00:00:01".into(),
        mtu: 1500,
        vrf: "default".into(),
        admin_up: true,
        oper_up: false,
        ipv4: vec!["10.0.0.1/24".into()],
        ipv6: vec!["2001:db8::1/64".into()],
        bridge: None,
        bvi: None,
    }];
    i.push(InterfaceView {
        name: "p0.10.20".into(),
        vlan: Some(20),
        s_vlan: Some(10),
        ipv4: vec![],
        ipv6: vec![],
        bridge: Some("metro".into()),
        ..i[0].clone()
    });
    i.push(InterfaceView {
        name: "bvi10".into(),
        port: "-".into(),
        vlan: None,
        ipv4: vec!["10.10.0.1/24".into()],
        ipv6: vec![],
        bvi: Some("metro".into()),
        ..i[0].clone()
    });
    round_trip(&i);
    let t = words(&i.render());
    assert!(t.contains("p0.10.20 p0 S10/C20"), "{t}");
    assert!(t.contains("10.10.0.1/24, routes bridge metro"), "{t}");
    assert!(t.contains("up/down"), "{t}");
    assert!(t.contains("10.0.0.1/24, 2001:db8::1/64"), "{t}");

    let p = vec![PortView {
        name: "p0".into(),
        driver: PortDriver::AfXdp,
        in_service: true,
        queues: vec![QueueView {
            queue: 0,
            worker: 1,
        }],
        rx_packets: 9,
        ..Default::default()
    }];
    round_trip(&p);
    assert_eq!(serde_json::to_value(&p).unwrap()[0]["driver"], "af_xdp");
    assert!(words(&p.render()).contains("af_xdp in service q0:w1 9"));

    let n = vec![NeighborView {
        interface: "p0".into(),
        ip: "10.0.0.2".into(),
        mac: "-".into(),
        state: "incomplete".into(),
        age_s: Some(1.25),
        held: 3,
    }];
    round_trip(&n);
    assert!(words(&n.render()).contains("incomplete 1.2"));

    let w = vec![WorkerView {
        id: 1,
        core: None,
        rx_queues: vec!["p0/0".into(), "p1/0".into()],
        ..Default::default()
    }];
    round_trip(&w);
    assert!(
        words(&w.render()).contains("1 - p0/0, p1/0"),
        "{}",
        w.render()
    );

    let c = CountersView {
        ports: vec![PortCountersView {
            port: "p0".into(),
            rx_packets: 1,
            ..Default::default()
        }],
        drops: 4,
        slow_path: 2,
        ..Default::default()
    };
    round_trip(&c);
    assert!(words(&c.render()).contains("drops 4 icmp-sent 0"));
}

#[test]
fn system_logging_errors_runtime_cpu_and_traces() {
    let mut api = BTreeMap::new();
    api.insert("show.routes".to_string(), CommandStats::default());
    let s = SystemView {
        version: "0.1.0".into(),
        pending_confirm: Some((4, 30)),
        tables: vec![TableView {
            table: "next hops".into(),
            entries: 3,
            limit: 10,
            bytes: 96,
        }],
        api,
        ..Default::default()
    };
    round_trip(&s);
    assert!(words(&s.render()).contains("(commit 4 rolls back in 30 s unless confirmed)"));

    let l = vec![LogView {
        unix_ms: 3_723_004,
        severity: "notice".into(),
        msgid: "LINK".into(),
        params: vec![("port".into(), "p0".into())],
        text: "p0 up".into(),
        ..Default::default()
    }];
    round_trip(&l);
    assert_eq!(l.render(), "01:02:03.004 notice  LINK             p0 up\n");

    let mut per = BTreeMap::new();
    per.insert(0, 5);
    let e = vec![ErrorView {
        node: "ip4-forward".into(),
        reason: "no_route".into(),
        text: "no route".into(),
        count: 5,
        per_worker: per,
    }];
    round_trip(&e);
    assert!(words(&e.render()).contains("w0:5"));
    assert_eq!(Vec::<ErrorView>::new().render(), "no drops\n");

    let node = NodeRuntime {
        node: "ip4-forward".into(),
        calls: 2,
        packets: 512,
        vector_size: 256.0,
        ns_per_packet: Some(11.04),
        timed_calls: 1,
    };
    let r = RuntimeView {
        timed_every: 64,
        workers: vec![WorkerRuntime {
            worker: 0,
            core: Some(1),
            nodes: vec![node.clone()],
        }],
        total: vec![node],
    };
    round_trip(&r);
    let t = words(&r.render());
    assert!(t.starts_with("worker 0 (core 1)\n"), "{t}");
    assert!(t.contains("256.0 11.0"), "{t}");

    let c = CpuView {
        covered_s: [5.0, 60.0, 300.0],
        rows: vec![CpuRow {
            name: "linerate-w0".into(),
            kind: ThreadKind::Worker,
            id: 42,
            core: Some(1),
            cpu: [100.0, 99.5, 99.0],
            busy: [12.5, 10.0, 8.0],
            cpu_1s: 0.0,
            busy_1s: 0.0,
        }],
    };
    round_trip(&c);
    assert_eq!(
        serde_json::to_value(&c).unwrap()["rows"][0]["kind"],
        "worker"
    );
    assert!(words(&c.render()).contains("12.5%"));

    let tr = vec![TraceView {
        id: 1,
        worker: 0,
        summary: "IPv4 10.0.0.2 > 10.9.0.1 udp".into(),
        steps: vec![StepView {
            node: "ip4-forward".into(),
            decision: "route 10.9.0.0/16".into(),
            next: "ip4-rewrite".into(),
        }],
    }];
    round_trip(&tr);
    assert!(words(&tr.render()).contains("ip4-forward route 10.9.0.0/16 -> ip4-rewrite"));
}

#[test]
fn services_control_plane_and_config() {
    let a = vec![AclView {
        name: "edge".into(),
        family: "ipv4".into(),
        entries: vec![AclEntryView {
            seq: 10,
            text: "10 deny udp any any".into(),
            hits: 7,
        }],
        implicit_deny: 2,
        ..Default::default()
    }];
    round_trip(&a);
    let t = words(&a.render());
    assert!(t.contains("bound: nowhere"), "{t}");
    assert!(t.contains("(implicit deny) 2"), "{t}");

    let q = vec![QosView {
        interface: "p0".into(),
        direction: "in".into(),
        policy: "mark".into(),
        classes: vec![QosClassView {
            class: "voice".into(),
            set_dscp: Some(46),
            policer: Some(PolicerView {
                dropped_packets: 3,
                ..Default::default()
            }),
            ..Default::default()
        }],
    }];
    round_trip(&q);
    assert!(words(&q.render()).contains("dropped 3 pkts"));
    assert_eq!(Vec::<QosView>::new().render(), "no QoS policy is bound\n");

    let f = FlowsView {
        enabled: true,
        version: "ipfix".into(),
        export: ExportCounters {
            records: 11,
            ..Default::default()
        },
        ..Default::default()
    };
    round_trip(&f);
    assert!(words(&f.render()).contains("records exported 11"));
    assert!(FlowsView::default().render().contains("off"));

    let fpm = FpmStatus {
        listen: "127.0.0.1:2620".into(),
        connected: true,
        sweep_in_s: Some(2.5),
        ..Default::default()
    };
    round_trip(&fpm);
    assert!(words(&fpm.render()).contains("sweep due in (s)"));

    let p = PuntView {
        classes: vec![PuntClassView {
            class: "arp".into(),
            rate: 1000,
            burst: 100,
            punted: 5,
            ..Default::default()
        }],
        punt_path: true,
        taps: vec![TapView {
            interface: "p0".into(),
            tap: "lr-p0".into(),
            ..Default::default()
        }],
        neighbor_stats: NeighborStats {
            learned: 2,
            ..Default::default()
        },
        ..Default::default()
    };
    round_trip(&p);
    assert!(words(&p.render()).contains("learned 2"));
    // A router without a punt path answers only the classes: the rest take their defaults.
    let bare: PuntView = serde_json::from_str(r#"{"classes": [], "punt_path": false}"#).unwrap();
    assert!(words(&bare.render()).contains("no punt path"));

    let o = ApplyOutcome {
        commit: Some(3),
        changed: true,
        summary: vec!["+ port p9".into()],
        confirm_deadline_s: Some(60),
        ..Default::default()
    };
    round_trip(&o);
    assert!(words(&o.render()).contains("commit 3 applied; it rolls back in 60 s"));
    let h = vec![CommitView {
        id: 1,
        unix_time: 60,
        status: "committed".into(),
        ..Default::default()
    }];
    round_trip(&h);
    assert!(words(&h.render()).contains("00:01:00.000 committed"));
    round_trip(&CommitText::default());
    round_trip(&RunningConfig::default());
}
