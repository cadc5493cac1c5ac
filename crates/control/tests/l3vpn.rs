//! L3VPN routes through the route source the GoBGP service writes with (the gRPC side has its
//! own tests and the system test): VPN routes land in the VRFs that import their route
//! targets, with the VPN label under the way to the far PE, and packets leave so labelled; the
//! lowest RD wins; a PE with no route waits and is retried; a prefix a stronger source holds
//! stays that source's; the export set is the VRF's own routes and follows them; a commit
//! puts the VPN routes into the new router.

mod common;

use std::time::{Duration, Instant};

use api::requests::RouteRequest;
use control::config::l3vpn::VpnId;
use control::config::Prefix;
use control::l3vpn::{VpnRoute, VpnRoutes, VpnUpdate};
use dataplane::mpls::Entry;

const CONFIG: &str = r#"
router: { workers: 1 }
vrfs: [cust-a, cust-b]
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
  - { name: p2, driver: mem }
  - { name: p3, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", vrf: cust-a, ipv4: [10.1.0.1/24] }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [198.51.100.1/24] }
  - { name: p2, port: p2, mac: "02:00:00:00:02:01", ipv4: [203.0.113.1/24] }
  - { name: p3, port: p3, mac: "02:00:00:00:03:01", vrf: cust-b, ipv4: [10.1.0.1/24] }
neighbors:
  - { interface: p0, ip: 10.1.0.2, mac: "02:00:00:00:00:02" }
  - { interface: p1, ip: 198.51.100.2, mac: "02:00:00:00:01:02" }
  - { interface: p2, ip: 203.0.113.2, mac: "02:00:00:00:02:02" }
routes:
  - { prefix: 10.255.0.3/32, via: 203.0.113.2, labels: [700] }
  - { prefix: 10.5.0.0/24, via: 10.1.0.2, vrf: cust-a }
mpls:
  interfaces: [p1, p2]
l3vpn:
  bgp: { api: "127.0.0.1:50051", next-hop: 198.51.100.1 }
  vrfs:
    - { name: cust-a, rd: "65000:1", import: ["65000:1"], export: ["65000:1"] }
    - { name: cust-b, rd: "65000:9", import: ["65000:99"], label: 99 }
"#;

fn id(s: &str) -> VpnId {
    s.parse().unwrap()
}

fn p(s: &str) -> Prefix {
    Prefix::parse(s).unwrap()
}

fn route(rd: &str, prefix: &str, label: u32, pe: &str, rt: &str) -> VpnUpdate {
    VpnUpdate::Add(VpnRoute {
        rd: id(rd),
        prefix: p(prefix),
        label,
        next_hop: pe.parse().unwrap(),
        rts: vec![id(rt)],
        peer: "198.51.100.2".parse().unwrap(),
    })
}

fn apply(core: &control::mgmt::Core, updates: &[VpnUpdate]) {
    core.with_route_source::<VpnRoutes, _>("t", |src, w| {
        src.apply(w, updates);
        w.publish().unwrap();
    })
    .unwrap();
}

/// A packet from the CE on `port` to `dst`: where it left (port) and its label stack.
fn send(
    peers: &mut [control::MemPeer],
    cache: &mut dataplane::BufCache,
    port: usize,
    dst: [u8; 4],
) -> Option<(usize, Vec<u32>)> {
    let mut f = common::ip4_frame(dst, 64, 26, false, 17, 7);
    f[..6].copy_from_slice(&[2, 0, 0, 0, port as u8, 1]);
    let mut b = cache.alloc().unwrap();
    assert!(b.fill(&f));
    let mut v = vec![b];
    while !v.is_empty() {
        peers[port].to_router[0].push_burst(&mut v);
    }
    let deadline = Instant::now() + Duration::from_millis(300);
    while Instant::now() < deadline {
        for (q, peer) in peers.iter_mut().enumerate() {
            let mut bufs = Vec::new();
            peer.from_router.pop_burst(&mut bufs, usize::MAX);
            if let Some(b) = bufs.into_iter().next() {
                let d = b.data().to_vec();
                cache.free(b);
                let mut labels = Vec::new();
                if d[12..14] == [0x88, 0x47] {
                    let mut at = 14;
                    loop {
                        let e = Entry::parse(&d[at..]);
                        labels.push(e.label);
                        at += 4;
                        if e.bottom {
                            break;
                        }
                    }
                }
                return Some((q, labels));
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

/// The route to far PE 10.255.0.9, through neighbour `via` (replacing any before).
fn route_to_pe(core: &control::mgmt::Core, via: &str) {
    core.route_add(&RouteRequest {
        prefix: "10.255.0.9/32".into(),
        via: vec![via.into()],
        ..Default::default()
    })
    .unwrap();
}

/// One of the service's periodic steps (`retry`, `reresolve`), published; what it returns.
fn tick(
    core: &control::mgmt::Core,
    step: fn(&mut VpnRoutes, &mut control::mgmt::sources::RouteWriter<'_>) -> usize,
) -> usize {
    core.with_route_source::<VpnRoutes, _>("t", |src, w| {
        let n = step(src, w);
        w.publish().unwrap();
        n
    })
    .unwrap()
}

fn status(core: &control::mgmt::Core) -> api::views::VpnStatus {
    core.vrf_view().status
}

#[test]
fn vpn_routes_go_where_their_targets_are_imported_and_forward_labelled() {
    let dir = std::env::temp_dir().join(format!("linerate-l3vpn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (core, mut peers) = common::core_with(&dir, CONFIG);
    let l3 = core.lock("t").router.cfg.l3vpn.clone().unwrap();
    let routes = VpnRoutes::new(l3, &core.lock("t").router);
    core.add_route_source(Box::new(routes));
    let pool = core.lock("t").runtime.pool.clone();
    let mut cache = dataplane::BufCache::new(pool);

    apply(
        &core,
        &[
            // PE on p1's subnet: the VPN label alone.
            route("65000:2", "10.2.0.0/24", 3000, "198.51.100.2", "65000:1"),
            // PE behind a labelled route: its label over the VPN label.
            route("65000:3", "10.3.0.0/24", 3001, "10.255.0.3", "65000:99"),
            // A PE nothing reaches yet.
            route("65000:5", "10.4.0.0/24", 3002, "10.255.0.9", "65000:1"),
            // A prefix cust-a's own static route holds.
            route("65000:6", "10.5.0.0/24", 3003, "198.51.100.2", "65000:1"),
            // Nobody imports this target.
            route("65000:7", "10.6.0.0/24", 3004, "198.51.100.2", "65000:7"),
        ],
    );
    let s = status(&core);
    assert_eq!(
        (s.paths, s.installed, s.unresolved, s.held),
        (5, 2, 1, 1),
        "{s:?}"
    );
    // cust-a's CE (p0) reaches 10.2/24 through p1 under 3000; not 10.3/24 (cust-b's).
    assert_eq!(
        send(&mut peers, &mut cache, 0, [10, 2, 0, 5]),
        Some((1, vec![3000]))
    );
    // cust-b's CE (p3) reaches 10.3/24 through p2 under [700, 3001].
    assert_eq!(
        send(&mut peers, &mut cache, 3, [10, 3, 0, 5]),
        Some((2, vec![700, 3001]))
    );
    assert_eq!(send(&mut peers, &mut cache, 3, [10, 2, 0, 5]), None);
    assert_eq!(send(&mut peers, &mut cache, 0, [10, 6, 0, 5]), None);
    // The held prefix still goes to the CE side (the static route), unlabelled.
    assert_eq!(
        send(&mut peers, &mut cache, 0, [10, 5, 0, 5]),
        Some((0, vec![]))
    );
    let v = core.routes(&api::requests::RoutesQuery {
        vrf: Some("cust-a".into()),
        ..Default::default()
    });
    let r = v.unwrap();
    let vpn = r.routes.iter().find(|x| x.prefix == "10.2.0.0/24").unwrap();
    assert_eq!(vpn.origin, api::views::RouteOrigin::Vpn);

    // A second RD for the same prefix: the lower stays; withdrawn, the other takes over.
    apply(
        &core,
        &[route(
            "65000:4",
            "10.2.0.0/24",
            4000,
            "198.51.100.2",
            "65000:1",
        )],
    );
    assert_eq!(
        send(&mut peers, &mut cache, 0, [10, 2, 0, 5]),
        Some((1, vec![3000]))
    );
    apply(
        &core,
        &[VpnUpdate::Withdraw {
            rd: id("65000:2"),
            prefix: p("10.2.0.0/24"),
        }],
    );
    assert_eq!(
        send(&mut peers, &mut cache, 0, [10, 2, 0, 5]),
        Some((1, vec![4000]))
    );

    // A route to the unreachable PE arrives: the retry installs the waiting VPN route (and
    // tries the held one again: the static route still holds it).
    route_to_pe(&core, "203.0.113.2");
    assert_eq!(tick(&core, VpnRoutes::retry), 2);
    assert_eq!(status(&core).unresolved, 0);
    assert_eq!(
        send(&mut peers, &mut cache, 0, [10, 4, 0, 5]),
        Some((2, vec![3002]))
    );
    // The way to that PE changes: its routes follow it at the next tick (and only they do).
    assert_eq!(tick(&core, VpnRoutes::reresolve), 0);
    route_to_pe(&core, "198.51.100.2");
    assert_eq!(tick(&core, VpnRoutes::reresolve), 1);
    assert_eq!(
        send(&mut peers, &mut cache, 0, [10, 4, 0, 5]),
        Some((1, vec![3002]))
    );
    // Gone: its routes wait as unresolved rather than follow a way that is no more.
    core.route_del(None, "10.255.0.9/32").unwrap();
    assert_eq!(tick(&core, VpnRoutes::reresolve), 1);
    assert_eq!(status(&core).unresolved, 1);
    assert!(!matches!(
        send(&mut peers, &mut cache, 0, [10, 4, 0, 5]),
        Some((1 | 2, _))
    ));
    route_to_pe(&core, "203.0.113.2");
    assert_eq!(tick(&core, VpnRoutes::retry), 2);
    assert_eq!(status(&core).unresolved, 0);
    let bgp = core.bgp_vpn_view(None);
    let r4 = bgp
        .routes
        .iter()
        .find(|r| r.prefix == "10.4.0.0/24")
        .unwrap();
    assert_eq!(r4.installed, vec!["cust-a".to_string()]);
    let r6 = bgp
        .routes
        .iter()
        .find(|r| r.prefix == "10.5.0.0/24")
        .unwrap();
    assert_eq!(
        r6.not_installed,
        vec!["cust-a: held by a stronger source".to_string()]
    );

    // A route of a source the writer does not rank (FRR's over FPM is put in this way) is
    // neither replaced by a VPN route nor removed when the VPN route goes.
    {
        let mut s = core.lock("t");
        let vrf = s.router.vrf_index("cust-a");
        let nh = s.router.nh_via(0, Some("10.1.0.2".parse().unwrap()));
        s.router.install(vrf, p("10.9.0.0/24"), nh).unwrap();
        s.router.publish().unwrap();
    }
    apply(
        &core,
        &[route(
            "65000:8",
            "10.9.0.0/24",
            3009,
            "198.51.100.2",
            "65000:1",
        )],
    );
    assert_eq!(
        send(&mut peers, &mut cache, 0, [10, 9, 0, 5]),
        Some((0, vec![]))
    );
    assert_eq!(status(&core).held, 2);
    apply(
        &core,
        &[VpnUpdate::Withdraw {
            rd: id("65000:8"),
            prefix: p("10.9.0.0/24"),
        }],
    );
    assert_eq!(
        send(&mut peers, &mut cache, 0, [10, 9, 0, 5]),
        Some((0, vec![])),
        "the other source's route stays"
    );

    // A commit builds a new router: the VPN routes are in it.
    let text = std::fs::read_to_string(dir.join("r.yaml")).unwrap();
    let edited = text.replace(
        "  - { prefix: 10.5.0.0/24, via: 10.1.0.2, vrf: cust-a }\n",
        "  - { prefix: 10.5.0.0/24, via: 10.1.0.2, vrf: cust-a }\n  - { prefix: 10.7.0.0/24, blackhole: true }\n",
    );
    let out = core
        .apply(
            &edited,
            &dir.join("r.yaml"),
            api::requests::ApplyOptions::default(),
        )
        .unwrap();
    assert!(out.commit.is_some(), "{out:?}");
    assert_eq!(
        send(&mut peers, &mut cache, 0, [10, 2, 0, 5]),
        Some((1, vec![4000]))
    );
    assert_eq!(
        send(&mut peers, &mut cache, 3, [10, 3, 0, 5]),
        Some((2, vec![700, 3001]))
    );

    // The speaker goes: everything imported goes with it.
    core.with_route_source::<VpnRoutes, _>("t", |src, w| {
        src.clear(w);
        w.publish().unwrap();
    });
    assert_eq!(send(&mut peers, &mut cache, 0, [10, 2, 0, 5]), None);
    assert_eq!(status(&core).installed, 0);
}

#[test]
fn the_export_set_is_the_vrfs_own_routes_and_follows_them() {
    let dir = std::env::temp_dir().join(format!("linerate-l3vpn-x-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (core, _peers) = common::core_with(&dir, CONFIG);
    let l3 = core.lock("t").router.cfg.l3vpn.clone().unwrap();
    let routes = VpnRoutes::new(l3, &core.lock("t").router);
    core.add_route_source(Box::new(routes));
    apply(
        &core,
        &[route(
            "65000:2",
            "10.2.0.0/24",
            3000,
            "198.51.100.2",
            "65000:1",
        )],
    );
    let diff = || {
        core.with_route_source::<VpnRoutes, _>("t", |src, w| src.export_diff(w.router()))
            .unwrap()
    };
    let d = diff();
    // cust-a's connected subnet and static route; not its address, its neighbour's host
    // route or the VPN route it imported; cust-b exports nothing.
    assert_eq!(d.add, vec![(0, p("10.1.0.0/24")), (0, p("10.5.0.0/24"))]);
    assert!(d.withdraw.is_empty());
    core.with_route_source::<VpnRoutes, _>("t", |src, _| {
        for (i, q) in &d.add {
            let path = src.export_path(*i, *q);
            // The path carries cust-a's RD, label and target, this router as next hop.
            let back = control::l3vpn::gobgp::decode_path(&control::l3vpn::gobgp::Path {
                neighbor_ip: "192.0.2.99".into(),
                ..path
            })
            .unwrap();
            let Some(VpnUpdate::Add(r)) = back else {
                panic!("{back:?}")
            };
            assert_eq!(r.rd, id("65000:1"));
            assert_eq!(r.rts, vec![id("65000:1")]);
            assert_eq!(r.next_hop.to_string(), "198.51.100.1");
            assert_eq!(r.label, src.cfg.vrfs[0].label);
            src.exported_as(*i, *q, vec![*i as u8, 1]);
        }
    });
    assert_eq!(diff(), Default::default(), "nothing new");
    // A route added in cust-a is exported; removed, it is withdrawn by the id GoBGP gave.
    core.route_add(&RouteRequest {
        vrf: Some("cust-a".into()),
        prefix: "10.8.0.0/16".into(),
        via: vec!["10.1.0.2".into()],
        ..Default::default()
    })
    .unwrap();
    assert_eq!(diff().add, vec![(0, p("10.8.0.0/16"))]);
    core.with_route_source::<VpnRoutes, _>("t", |src, _| {
        src.exported_as(0, p("10.8.0.0/16"), vec![8])
    });
    core.route_del(Some("cust-a"), "10.8.0.0/16").unwrap();
    let d = diff();
    assert!(d.add.is_empty());
    assert_eq!(d.withdraw, vec![(0, p("10.8.0.0/16"), vec![8])]);
    assert_eq!(core.vrf_view().vrfs[0].exported, 2);
    // cust-b's label is the one given; cust-a's allocated, and both pop into their VRF.
    let v = core.vrf_view();
    assert_eq!(v.vrfs[1].label, 99);
    let table = core.mpls_view();
    for vrf in &v.vrfs {
        let l = table.labels.iter().find(|l| l.label == vrf.label).unwrap();
        assert_eq!(l.action, "lookup", "{l:?}");
        assert_eq!(l.to, vec![format!("vrf {}", vrf.name)], "{l:?}");
    }
}
