//! The API over its socket, read back as the `api` crate's types: every GET answers a body that
//! deserializes into its view, requests built from the typed requests do what they say, and a
//! refusal is an `ApiError` of the right kind with the HTTP status that kind means.

use std::path::Path;
use std::sync::Arc;

use api::requests::{
    AclEntryRequest, AclQuery, ApplyOptions, ApplyRequest, Family, LogQuery, MacQuery, RouteDelete,
    RouteRequest, RoutesQuery, TraceRequest, WorkerRequest,
};
use api::views::*;
use api::{ApiError, Client, Endpoint, ErrorKind, Render};
use control::{Router, Runtime, StartOptions};

const CONFIG: &str = r#"
router: { workers: 1, buffers: 8192 }
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
  - { name: p2, driver: mem }
  - { name: p3, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24], acl-in: [EDGE], qos-in: mark }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [198.51.100.1/24], ipv6: [2001:db8:1::1/64] }
  - { name: p2, port: p2, mac: "02:00:00:00:02:01" }
  - { name: p3, port: p3, mac: "02:00:00:00:03:01" }
bridges:
  - { name: lan, members: [p2, p3], static-macs: [{ mac: "02:00:00:00:0f:01", interface: p3 }] }
neighbors:
  - { interface: p1, ip: 198.51.100.2, mac: "02:00:00:00:01:02" }
routes:
  - { prefix: 10.0.0.0/8, via: 198.51.100.2 }
acls:
  - name: EDGE
    entries: ["10 deny udp dst 10.9.0.0/16", "20 permit ip"]
qos:
  classes:
    - { name: bulk, match: ["udp sport 1024"] }
  policies:
    - name: mark
      classes:
        - { class: bulk, set: { dscp: 10 } }
"#;

fn core(dir: &Path) -> Arc<control::mgmt::Core> {
    let path = dir.join("r.yaml");
    std::fs::write(&path, CONFIG).unwrap();
    let cfg = control::config::load(&path).unwrap();
    let router = Router::build(cfg).unwrap();
    let rt = Runtime::start(
        &router,
        StartOptions {
            exit_when_drained: false,
            punt: None,
            ..Default::default()
        },
    )
    .unwrap();
    let logger = Arc::new(control::syslog::Logger::new(Default::default()).unwrap());
    control::mgmt::Core::new(router, rt, CONFIG.to_string(), path, logger, None).unwrap()
}

/// The refusal a request got, as the client reads it.
fn refusal(r: api::Response) -> (u16, ApiError) {
    assert!(!r.ok(), "expected a refusal");
    (r.status, r.view().expect("an ApiError body"))
}

#[test]
fn every_answer_reads_back_as_its_view() {
    let dir = std::env::temp_dir().join(format!("linerate-typed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let core = core(&dir);
    let socket = dir.join("api.sock");
    let server = api_server::serve(
        core.clone(),
        api_server::ServeOptions {
            socket: socket.clone(),
            tcp: None,
            metrics: None,
            nice: 0,
            admin_group: "linerate-admin".into(),
        },
    )
    .unwrap();
    let c = Client::new(Endpoint::Unix(socket)).unwrap();

    let ifs: Vec<InterfaceView> = c.view("/v1/interfaces").unwrap();
    assert_eq!(ifs.len(), 4);
    assert_eq!(ifs[3].bridge.as_deref(), Some("lan"));
    assert_eq!(ifs[1].ipv6, vec!["2001:db8:1::1/64".to_string()]);
    let ports: Vec<PortView> = c.view("/v1/ports").unwrap();
    assert!(ports
        .iter()
        .all(|p| p.driver == PortDriver::Mem && p.in_service));
    let n: Vec<NeighborView> = c.view("/v1/neighbors").unwrap();
    assert_eq!(
        (n[0].ip.as_str(), n[0].state.as_str()),
        ("198.51.100.2", "static")
    );
    let _: CountersView = c.view("/v1/counters").unwrap();
    let _: Vec<ErrorView> = c.view("/v1/errors").unwrap();
    let w: Vec<WorkerView> = c.view("/v1/workers").unwrap();
    assert_eq!(w.len(), 1);
    let rt: RuntimeView = c.view("/v1/runtime").unwrap();
    assert!(rt.total.iter().any(|n| n.node == "ethernet-input"));
    let sys: SystemView = c.view("/v1/system").unwrap();
    assert_eq!((sys.workers, sys.ports, sys.commit), (1, 4, 1));
    assert!(sys.tables.iter().any(|t| t.table == "next hops"));
    assert!(sys
        .tables
        .iter()
        .any(|t| t.table == "mac addresses" && t.entries == 1));
    let logs: Vec<LogView> = c.view(&LogQuery { n: Some(5) }.path()).unwrap();
    assert!(logs.len() <= 5);
    let acls: Vec<AclView> = c
        .view(
            &AclQuery {
                name: Some("EDGE".into()),
            }
            .path(),
        )
        .unwrap();
    assert_eq!(acls[0].bound, vec!["p0 in".to_string()]);
    let qos: Vec<QosView> = c.view("/v1/qos").unwrap();
    assert_eq!(qos[0].classes[0].set_dscp, Some(10));
    let flows: FlowsView = c.view("/v1/flows").unwrap();
    assert!(!flows.enabled);
    let punt: PuntView = c.view("/v1/punt").unwrap();
    assert!(!punt.punt_path && punt.classes.iter().any(|k| k.class == "arp"));
    let cfg: RunningConfig = c.view("/v1/config").unwrap();
    assert_eq!(cfg.text, CONFIG);
    let hist: Vec<CommitView> = c.view("/v1/config/history").unwrap();
    assert_eq!(hist[0].id, 1);
    let one: CommitText = c.view("/v1/config/history/1").unwrap();
    assert_eq!(one.text, CONFIG);
    // The sampler reads the threads once a second: a worker started after the first sample
    // appears with the next one.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let cpu: CpuView = loop {
        let cpu: CpuView = c.view("/v1/cpu").unwrap();
        if cpu.rows.iter().any(|r| r.kind == ThreadKind::Worker)
            || std::time::Instant::now() > deadline
        {
            break cpu;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        cpu.rows.iter().any(|r| r.kind == ThreadKind::Worker),
        "{cpu:?}"
    );
    let bridges: Vec<BridgeView> = c.view("/v1/bridges").unwrap();
    assert_eq!(
        (bridges[0].name.as_str(), bridges[0].static_macs),
        ("lan", 1)
    );
    assert!(bridges.render().contains("spanning tree not run"));
    let q = MacQuery {
        bridge: Some("lan".into()),
        ..Default::default()
    };
    let macs: MacTableView = c.view(&q.path()).unwrap();
    assert_eq!(macs.entries[0].interface, "p3");
    assert!(macs.entries[0].fixed && macs.table.capacity == 1 << 20);
    // Clearing removes learned entries only: the static one is the config's.
    let cleared: MacCleared = c.post("/v1/mac-table/clear", &q).unwrap().view().unwrap();
    assert_eq!(cleared.removed, 0);
    let none = MacQuery {
        bridge: Some("wan".into()),
        ..Default::default()
    };
    let (status, e) = refusal(c.get(&none.path()).unwrap());
    assert_eq!((status, e.kind), (404, ErrorKind::NotFound));

    // A route through the typed request, seen with its origin, then removed.
    let add = RouteRequest {
        prefix: "172.20.0.0/16".into(),
        via: vec!["198.51.100.2".into()],
        ..Default::default()
    };
    c.post("/v1/routes", &add).unwrap().checked().unwrap();
    let q = RoutesQuery {
        prefix: Some("172.20.1.1".into()),
        ..Default::default()
    };
    let r: RoutesView = c.view(&q.path()).unwrap();
    assert_eq!(r.family, Family::Ipv4);
    assert_eq!(
        (
            r.routes[0].prefix.as_str(),
            r.routes[0].origin,
            r.routes[0].kind
        ),
        ("172.20.0.0/16", RouteOrigin::Api, NextHopKind::Forward)
    );
    assert!(r
        .render()
        .contains("A  172.20.0.0/16  via 198.51.100.2 on p1"));
    let del = RouteDelete {
        vrf: None,
        prefix: "172.20.0.0/16".into(),
    };
    c.delete(&del.path()).unwrap().checked().unwrap();
    let (status, e) = refusal(c.delete(&del.path()).unwrap());
    assert_eq!((status, e.kind), (404, ErrorKind::NotFound));

    // Refusals: each kind with its status and its message.
    let bad = RouteRequest {
        prefix: "10.1.0.0/16".into(),
        blackhole: true,
        reject: true,
        ..Default::default()
    };
    let (status, e) = refusal(c.post("/v1/routes", &bad).unwrap());
    assert_eq!((status, e.kind), (400, ErrorKind::Invalid));
    assert!(e.message.contains("exactly one"), "{e}");
    let (status, e) = refusal(
        c.post(
            "/v1/config/apply",
            &ApplyRequest {
                text: "ports: [\n".into(),
                source: dir.join("bad.yaml"),
                opts: ApplyOptions::default(),
            },
        )
        .unwrap(),
    );
    assert_eq!((status, e.kind), (400, ErrorKind::Invalid));
    assert!(
        e.errors.iter().all(|l| l.contains("bad.yaml:")) && !e.errors.is_empty(),
        "{e:?}"
    );

    // An ACL entry, a dry run, a worker, a trace: each answers its type.
    let seq: u32 = c
        .call(
            "/v1/acl/EDGE/entries",
            &AclEntryRequest {
                entry: "15 deny tcp dport 23".into(),
            },
        )
        .unwrap();
    assert_eq!(seq, 15);
    let dry: ApplyOutcome = c
        .call(
            "/v1/config/apply",
            &ApplyRequest {
                text: CONFIG.replace("10.0.0.0/8", "10.0.0.0/9"),
                source: dir.join("r.yaml"),
                opts: ApplyOptions {
                    dry_run: true,
                    ..Default::default()
                },
            },
        )
        .unwrap();
    assert!(dry.changed && dry.dry_run && dry.commit.is_none());
    assert!(dry.render().contains("dry run: nothing was applied"));
    let added: WorkerAdded = c
        .call("/v1/workers", &WorkerRequest { core: None })
        .unwrap();
    assert_eq!(added.worker, 1);
    let traces: Vec<TraceView> = c
        .call(
            "/v1/trace",
            &TraceRequest {
                timeout_ms: 50,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(traces.is_empty());

    server.stop();
    core.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
