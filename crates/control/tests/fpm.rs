//! Routes from zebra applied to a router: next-hop objects and groups, ECMP, blackhole, the
//! configured routes FPM must not touch, deletions, and a replay with its sweep.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::Path;

mod common;

use api::views::{NextHopKind, RouteOrigin};
use control::config::{self, Prefix};
use control::fpm::FpmRoutes;
use control::mgmt::sources::{Origin, RouteSource, RouteWriter};
use control::Router;
use dataplane::NextHop;
use fpm::netlink::{GroupMember, Members, Nexthop, Paths};
use fpm::{Msg, Op, Route, RouteType};

const CONFIG: &str = r#"
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24], ipv6: ["2001:db8:1::1/64"] }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [198.51.100.1/24] }
neighbors:
  - { interface: p1, ip: 198.51.100.2, mac: "02:00:00:00:01:02" }
routes:
  - { prefix: 172.16.0.0/12, blackhole: true }
control-plane:
  fpm: { listen: "127.0.0.1:0" }
"#;

/// The kernel ifindexes zebra would name p0's and p1's TAP twins by.
const IF_P0: u32 = 11;
const IF_P1: u32 = 12;

fn router() -> (Router, FpmRoutes) {
    let cfg = config::parse(CONFIG, Path::new("fpm.yaml")).expect("config");
    let fpm_cfg = cfg.control_plane.fpm.clone().expect("fpm section");
    let r = Router::build(cfg).expect("router");
    let f = FpmRoutes::new(
        &fpm_cfg,
        &r,
        HashMap::from([(IF_P0, "lr-p0".to_string()), (IF_P1, "lr-p1".to_string())]),
    );
    (r, f)
}

fn nexthop(id: u32, gw: &str, oif: u32) -> Msg<'static> {
    let gateway: IpAddr = gw.parse().unwrap();
    Msg::Nexthop(Nexthop {
        op: Op::New,
        id,
        family: if gateway.is_ipv4() { 2 } else { 10 },
        protocol: 11,
        flags: 0,
        blackhole: false,
        oif,
        gateway: Some(gateway),
        group: Members::default(),
        group_type: 0,
        encap: false,
    })
}

fn group(id: u32, members: &[u32]) -> Msg<'static> {
    let even: Vec<(u32, u16)> = members.iter().map(|&id| (id, 1)).collect();
    weighted_group(id, &even)
}

fn route(op: Op, prefix: &str, nh_id: u32, rtype: RouteType) -> Msg<'static> {
    Msg::Route(Route {
        op,
        replace: op == Op::New,
        table: 254,
        prefix: prefix.parse().unwrap(),
        rtype,
        protocol: 186,
        priority: 20,
        nh_id,
        gateway: None,
        oif: 0,
        multipath: Paths::default(),
        encap: false,
    })
}

/// FPM's hands on `r`, with no API routes.
fn writer(r: &mut Router) -> RouteWriter<'_> {
    static NO_API: BTreeMap<(usize, control::mgmt::PrefixKey), control::config::Target> =
        BTreeMap::new();
    RouteWriter::new(r, &NO_API, Origin::Fpm)
}

fn apply(r: &mut Router, f: &mut FpmRoutes, msgs: &[Msg<'static>]) {
    let changes = f.rib.apply_batch(msgs);
    f.apply_changes(&mut writer(r), &changes);
    r.publish().unwrap();
}

/// What next hop `nh` forwards through: FPM's next-hop objects are path objects, and a path of
/// one member is that member (as the workers resolve it).
fn via(r: &Router, nh: u32) -> &NextHop {
    match &r.next_hops[nh as usize] {
        NextHop::Ecmp(m) if m.len() == 1 => &r.next_hops[m[0] as usize],
        other => other,
    }
}

fn v4(r: &Router, p: &str) -> Option<u32> {
    match Prefix::parse(p).unwrap() {
        Prefix::V4(a, l) => r.fibs[0].v4.get(a, l),
        Prefix::V6(..) => unreachable!(),
    }
}

#[test]
fn routes_groups_and_conflicts_reach_the_fib() {
    let (mut r, mut f) = router();
    apply(
        &mut r,
        &mut f,
        &[
            nexthop(1, "198.51.100.2", IF_P1),
            nexthop(2, "192.0.2.9", IF_P0),
            group(3, &[1, 2]),
            route(Op::New, "10.0.0.0/8", 1, RouteType::Unicast),
            route(Op::New, "10.1.0.0/16", 3, RouteType::Unicast),
            route(Op::New, "203.0.113.0/24", 0, RouteType::Blackhole),
            // The config holds these: FPM leaves them alone.
            route(Op::New, "172.16.0.0/12", 1, RouteType::Unicast),
            route(Op::New, "192.0.2.0/24", 1, RouteType::Unicast),
        ],
    );
    // Through a configured neighbour: forwarding with its MAC at once.
    let nh = v4(&r, "10.0.0.0/8").expect("installed");
    assert!(
        matches!(via(&r, nh), NextHop::Forward { tx_if: 1, .. }),
        "{:?}",
        r.next_hops[nh as usize]
    );
    // The group: ECMP over the configured neighbour and one to resolve by ARP on p0.
    let nh = v4(&r, "10.1.0.0/16").unwrap();
    let NextHop::Ecmp(m) = &r.next_hops[nh as usize] else {
        panic!("{:?}", r.next_hops[nh as usize])
    };
    assert_eq!(m.len(), 2);
    assert!(m.iter().any(|&x| matches!(
        r.next_hops[x as usize],
        NextHop::Glean { tx_if: 0, neighbor: Some(ip) } if ip == "192.0.2.9".parse::<IpAddr>().unwrap()
    )));
    let nh = v4(&r, "203.0.113.0/24").unwrap();
    assert!(matches!(r.next_hops[nh as usize], NextHop::Blackhole));
    assert!(matches!(
        r.next_hops[v4(&r, "172.16.0.0/12").unwrap() as usize],
        NextHop::Blackhole
    ));
    assert!(matches!(
        r.next_hops[v4(&r, "192.0.2.0/24").unwrap() as usize],
        NextHop::Glean {
            tx_if: 0,
            neighbor: None
        }
    ));
    assert_eq!(f.status.conflicts, 2);
    assert_eq!(f.status.routes_installed, 3);
    // The group loses a member: its routes follow at once.
    apply(&mut r, &mut f, &[group(3, &[1])]);
    let nh = v4(&r, "10.1.0.0/16").unwrap();
    assert!(matches!(via(&r, nh), NextHop::Forward { tx_if: 1, .. }));
    // Deleted, and a delete of a configured prefix does not remove it.
    apply(
        &mut r,
        &mut f,
        &[
            route(Op::Del, "10.0.0.0/8", 0, RouteType::Other(0)),
            route(Op::Del, "172.16.0.0/12", 0, RouteType::Other(0)),
        ],
    );
    assert!(v4(&r, "10.0.0.0/8").is_none());
    assert!(v4(&r, "172.16.0.0/12").is_some());
}

#[test]
fn a_replay_keeps_forwarding_and_sweeps_only_what_was_not_resent() {
    let (mut r, mut f) = router();
    let mut msgs = vec![nexthop(1, "198.51.100.2", IF_P1)];
    for i in 0..100u32 {
        msgs.push(route(
            Op::New,
            &format!("10.{}.{}.0/24", i / 256, i % 256),
            1,
            RouteType::Unicast,
        ));
    }
    apply(&mut r, &mut f, &msgs);
    assert_eq!(f.status.routes_installed, 100);
    // zebra reconnects (FRR restarted) and re-sends 60 of the 100.
    f.rib.begin_replay();
    apply(&mut r, &mut f, &msgs[..61]);
    // Until the sweep every route still forwards.
    assert!(v4(&r, "10.0.99.0/24").is_some());
    let gone = f.rib.sweep();
    f.apply_changes(&mut writer(&mut r), &gone);
    r.publish().unwrap();
    assert!(v4(&r, "10.0.59.0/24").is_some());
    assert!(v4(&r, "10.0.60.0/24").is_none());
    assert_eq!(f.status.routes_removed, 40);
    // The replayed routes were not re-installed (unchanged: no change at all).
    assert_eq!(f.status.routes_installed, 100);
}

#[test]
fn unknown_interfaces_and_tables_are_counted_not_installed() {
    let (mut r, mut f) = router();
    let mut other_table = route(Op::New, "10.9.0.0/16", 1, RouteType::Unicast);
    if let Msg::Route(rt) = &mut other_table {
        rt.table = 77;
    }
    apply(
        &mut r,
        &mut f,
        &[
            // ifindex 99 is no twin and 203.0.113.1 on no subnet: no interface fits.
            nexthop(1, "203.0.113.1", 99),
            route(Op::New, "10.8.0.0/16", 1, RouteType::Unicast),
            nexthop(2, "198.51.100.2", IF_P1),
            other_table,
        ],
    );
    assert!(v4(&r, "10.8.0.0/16").is_none());
    assert_eq!(
        f.status.unresolved, 2,
        "the route without an interface, the unmapped table"
    );
}

#[test]
fn a_config_commit_keeps_the_fpm_routes() {
    let (mut r, mut f) = router();
    apply(
        &mut r,
        &mut f,
        &[
            nexthop(1, "198.51.100.2", IF_P1),
            route(Op::New, "10.0.0.0/8", 1, RouteType::Unicast),
            route(Op::New, "203.0.113.0/24", 0, RouteType::Blackhole),
        ],
    );
    // A commit builds a new router from the (changed) config; the FPM routes go into it
    // before it goes live.
    let text = CONFIG.replace("172.16.0.0/12", "172.17.0.0/16");
    let cfg = config::parse(&text, Path::new("fpm.yaml")).unwrap();
    let mut new = Router::build(cfg).unwrap();
    assert!(v4(&new, "10.0.0.0/8").is_none());
    f.reinstall(&mut writer(&mut new));
    new.publish().unwrap();
    let nh = v4(&new, "10.0.0.0/8").expect("carried");
    assert!(matches!(via(&new, nh), NextHop::Forward { tx_if: 1, .. }));
    assert!(v4(&new, "203.0.113.0/24").is_some());
}

fn weighted_group(id: u32, members: &[(u32, u16)]) -> Msg<'static> {
    let m: Vec<GroupMember> = members
        .iter()
        .map(|&(id, weight)| GroupMember { id, weight })
        .collect();
    Msg::Nexthop(Nexthop {
        op: Op::New,
        id,
        family: 0,
        protocol: 11,
        flags: 0,
        blackhole: false,
        oif: 0,
        gateway: None,
        group: Members::from_members(&m),
        group_type: 0,
        encap: false,
    })
}

/// zebra's group weights (UCMP, e.g. from BGP link bandwidth) become bucket shares: weights 1
/// and 3 give one member a quarter of the flows and the other three quarters; weights that need
/// more than 64 buckets are scaled to fit, each member keeping at least one.
#[test]
fn group_weights_become_bucket_shares() {
    let (mut r, mut f) = router();
    apply(
        &mut r,
        &mut f,
        &[
            nexthop(1, "192.0.2.2", IF_P0),
            nexthop(2, "198.51.100.2", IF_P1),
            weighted_group(10, &[(1, 1), (2, 3)]),
            weighted_group(11, &[(1, 2), (2, 2)]),
            weighted_group(12, &[(1, 1), (2, 255)]),
            route(Op::New, "10.1.0.0/16", 10, RouteType::Unicast),
            route(Op::New, "10.2.0.0/16", 11, RouteType::Unicast),
            route(Op::New, "10.3.0.0/16", 12, RouteType::Unicast),
        ],
    );
    let members = |p: &str| match &r.next_hops[v4(&r, p).expect("installed") as usize] {
        NextHop::Ecmp(m) => m.to_vec(),
        other => panic!("{p}: {other:?}"),
    };
    let share = |m: &[u32], id: u32| m.iter().filter(|&&x| x == id).count();
    let uneven = members("10.1.0.0/16");
    assert_eq!(uneven.len(), 4);
    // The same member (p0's neighbour, weight 1) in every group: next hops are interned.
    let a = *uneven
        .iter()
        .find(|&&x| share(&uneven, x) == 1)
        .expect("a member with one bucket");
    let b = *uneven.iter().find(|&&x| x != a).expect("two members");
    assert_eq!(share(&uneven, b), 3);
    assert!(matches!(
        r.next_hops[a as usize],
        NextHop::Forward { tx_if: 0, .. } | NextHop::Glean { tx_if: 0, .. }
    ));
    // `show` gives each member once, with its share.
    let desc = r.next_hop_descriptions();
    let (kind, lines) = &desc[v4(&r, "10.1.0.0/16").unwrap() as usize];
    assert_eq!(*kind, NextHopKind::Ecmp);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("192.0.2.2 on p0") && l.ends_with("(1/4 buckets)")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.ends_with("(3/4 buckets)")),
        "{lines:?}"
    );
    // Equal weights: the plain two-member group.
    let even = members("10.2.0.0/16");
    assert_eq!(even.len(), 2);
    assert_ne!(even[0], even[1]);
    // 1:255 does not fit 64 buckets: scaled, the light member keeps one.
    let wide = members("10.3.0.0/16");
    assert!(wide.len() <= 64 + 1, "{}", wide.len());
    assert_eq!(share(&wide, a), 1);
    assert_eq!(share(&wide, b), wide.len() - 1);
}

/// zebra replaces a next-hop group in place (RTM_NEWNEXTHOP for a known id) whenever a member
/// comes or goes. However many routes use the group, a replace is one write to its path object:
/// no route is re-installed, the next-hop table does not grow, and what the workers see follows.
#[test]
fn a_group_replace_is_one_path_write_whatever_the_routes_using_it() {
    let (mut r, mut f) = router();
    let mut msgs = vec![
        nexthop(1, "198.51.100.2", IF_P1),
        nexthop(2, "192.0.2.9", IF_P0),
        group(3, &[1, 2]),
    ];
    for i in 0..20_000u32 {
        let p = format!("10.{}.{}.0/24", i >> 8, i & 255);
        msgs.push(route(Op::New, &p, 3, RouteType::Unicast));
    }
    apply(&mut r, &mut f, &msgs);
    assert_eq!(f.status.routes_installed, 20_000);
    let nh = v4(&r, "10.0.7.0/24").expect("installed");
    let (table_len, paths) = (r.next_hops.len(), r.path_count());
    for k in 0..500 {
        let members: &[u32] = if k % 2 == 0 { &[1] } else { &[1, 2] };
        apply(&mut r, &mut f, &[group(3, members)]);
    }
    assert_eq!(f.status.routes_installed, 20_000, "no route re-installed");
    assert_eq!(f.status.next_hop_changes, 500);
    assert_eq!(
        r.next_hops.len(),
        table_len,
        "the next-hop table did not grow"
    );
    assert_eq!(r.path_count(), paths);
    assert_eq!(
        v4(&r, "10.0.7.0/24"),
        Some(nh),
        "the route still names its path"
    );
    // The last replace left both members; what the workers use now says so.
    let live = r.shared.load();
    assert!(matches!(&live.next_hops[nh as usize], NextHop::Ecmp(m) if m.len() == 2));
    apply(&mut r, &mut f, &[group(3, &[1])]);
    let live = r.shared.load();
    match &live.next_hops[nh as usize] {
        NextHop::Ecmp(m) => assert!(
            m.len() == 1
                && matches!(
                    live.next_hops[m[0] as usize],
                    NextHop::Forward { tx_if: 1, .. }
                )
        ),
        other => panic!("{other:?}"),
    }
}

/// A group whose every member stops fitting an interface takes its routes out (a less
/// specific route takes over), and puts them back when it fits again.
#[test]
fn a_group_that_stops_resolving_takes_its_routes_out_and_back() {
    let (mut r, mut f) = router();
    apply(
        &mut r,
        &mut f,
        &[
            nexthop(1, "198.51.100.2", IF_P1),
            nexthop(9, "203.0.113.1", 99), // fits no interface
            group(3, &[1]),
            route(Op::New, "10.1.0.0/16", 3, RouteType::Unicast),
        ],
    );
    assert!(v4(&r, "10.1.0.0/16").is_some());
    apply(&mut r, &mut f, &[group(3, &[9])]);
    assert!(v4(&r, "10.1.0.0/16").is_none());
    apply(&mut r, &mut f, &[group(3, &[1, 9])]);
    assert!(
        v4(&r, "10.1.0.0/16").is_none(),
        "one member fits no interface"
    );
    apply(&mut r, &mut f, &[group(3, &[1])]);
    assert!(matches!(
        via(&r, v4(&r, "10.1.0.0/16").expect("back")),
        NextHop::Forward { tx_if: 1, .. }
    ));
}

/// The route sources' priority through the core (connected > static > API > FPM): an API route
/// replaces the route FRR gave over FPM for the same prefix, and deleting it gives the prefix
/// back to FRR's route; FPM cannot take a configured prefix; a commit's new tables carry FRR's
/// routes.
#[test]
fn api_routes_beat_fpm_routes_and_give_them_back() {
    let dir = std::env::temp_dir().join(format!("linerate-fpm-sources-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (core, _peers) = common::core_with(&dir, CONFIG);
    let fpm_cfg = {
        let cfg = config::parse(CONFIG, Path::new("fpm.yaml")).unwrap();
        cfg.control_plane.fpm.unwrap()
    };
    let before = core.with_route_source("test", |_: &mut FpmRoutes, _| ());
    assert!(before.is_none(), "no FPM source before one is registered");
    let (r, _) = router();
    core.add_route_source(Box::new(FpmRoutes::new(&fpm_cfg, &r, HashMap::new())));
    let msgs = [
        nexthop(1, "198.51.100.2", 0),
        route(Op::New, "172.20.0.0/16", 1, RouteType::Unicast),
        route(Op::New, "172.16.0.0/12", 1, RouteType::Unicast),
    ];
    core.with_route_source("test.fpm", |f: &mut FpmRoutes, w| {
        let changes = f.rib.apply_batch(&msgs);
        f.apply_changes(w, &changes);
        w.publish().unwrap();
    })
    .expect("registered");
    let origin = |p: &str| {
        let r = core
            .routes(&api::requests::RoutesQuery {
                prefix: Some(p.split('/').next().unwrap().to_string()),
                limit: Some(10),
                ..Default::default()
            })
            .unwrap();
        r.routes
            .iter()
            .find(|x| x.prefix == p)
            .map(|x| (x.origin, x.kind, x.via.clone()))
    };
    let frr = origin("172.20.0.0/16").expect("FRR's route");
    assert_eq!(
        (frr.0, frr.1),
        (RouteOrigin::Fpm, NextHopKind::Forward),
        "{frr:?}"
    );
    let configured = origin("172.16.0.0/12").unwrap();
    assert_eq!(
        (configured.0, configured.1),
        (RouteOrigin::Static, NextHopKind::Blackhole),
        "FPM cannot take it"
    );
    let st = control::fpm::status(&core).unwrap();
    assert_eq!((st.routes_installed, st.conflicts), (1, 1));
    // The API takes the prefix over, and gives it back.
    core.route_add(
        &serde_json::from_value(serde_json::json!({"prefix": "172.20.0.0/16", "blackhole": true}))
            .unwrap(),
    )
    .expect("an API route replaces an FPM one");
    let api = origin("172.20.0.0/16").unwrap();
    assert_eq!((api.0, api.1), (RouteOrigin::Api, NextHopKind::Blackhole));
    core.route_del(None, "172.20.0.0/16").unwrap();
    assert_eq!(
        origin("172.20.0.0/16").as_ref(),
        Some(&frr),
        "FRR's route is back"
    );
    // A commit builds new tables: FRR's route is in them, and the prefix the config lets go
    // of goes to FRR's route for it.
    let text = core
        .running_config()
        .0
        .replace("172.16.0.0/12", "172.17.0.0/16");
    core.apply(
        &text,
        &dir.join("x.yaml"),
        control::mgmt::ApplyOptions::default(),
    )
    .unwrap();
    assert_eq!(origin("172.20.0.0/16"), Some(frr));
    assert_eq!(origin("172.16.0.0/12").map(|o| o.0), Some(RouteOrigin::Fpm));
    core.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
