use std::net::IpAddr;

use super::*;
use crate::fuzzing::Mirror;
use crate::netlink::{Members, Paths, AF_INET, AF_UNSPEC, RTPROT_ZEBRA, RT_TABLE_MAIN};

pub(crate) fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

pub(crate) fn key(p: &str) -> RouteKey {
    RouteKey {
        table: RT_TABLE_MAIN,
        prefix: p.parse().unwrap(),
    }
}

fn nexthop(id: u32) -> Nexthop<'static> {
    Nexthop {
        op: Op::New,
        id,
        family: AF_INET,
        protocol: RTPROT_ZEBRA,
        flags: 0,
        blackhole: false,
        oif: 0,
        gateway: None,
        group: Members::default(),
        group_type: 0,
        encap: false,
    }
}

pub(crate) fn nh_single(id: u32, gw: Option<IpAddr>, oif: u32) -> Msg<'static> {
    Msg::Nexthop(Nexthop {
        gateway: gw,
        oif,
        ..nexthop(id)
    })
}

pub(crate) fn nh_blackhole(id: u32) -> Msg<'static> {
    Msg::Nexthop(Nexthop {
        blackhole: true,
        ..nexthop(id)
    })
}

pub(crate) fn nh_group(id: u32, members: &[(u32, u16)]) -> Msg<'static> {
    let ms: Vec<GroupMember> = members
        .iter()
        .map(|&(id, weight)| GroupMember { id, weight })
        .collect();
    Msg::Nexthop(Nexthop {
        family: AF_UNSPEC,
        group: Members::from_members(&ms),
        ..nexthop(id)
    })
}

pub(crate) fn nh_del(id: u32) -> Msg<'static> {
    Msg::Nexthop(Nexthop {
        op: Op::Del,
        family: AF_UNSPEC,
        ..nexthop(id)
    })
}

fn route(k: RouteKey) -> Route<'static> {
    Route {
        op: Op::New,
        replace: true,
        table: k.table,
        prefix: k.prefix,
        rtype: RouteType::Unicast,
        protocol: 196,
        priority: 20,
        nh_id: 0,
        gateway: None,
        oif: 0,
        multipath: Paths::default(),
        encap: false,
    }
}

pub(crate) fn rt_nh(k: RouteKey, nh_id: u32) -> Msg<'static> {
    Msg::Route(Route { nh_id, ..route(k) })
}

pub(crate) fn rt_hops(k: RouteKey, hops: &[NextHop]) -> Msg<'static> {
    let r = route(k);
    let v4 = r.prefix.is_ipv4();
    Msg::Route(Route {
        multipath: Paths::from_hops(v4, hops),
        ..r
    })
}

pub(crate) fn rt_type(k: RouteKey, rtype: RouteType) -> Msg<'static> {
    Msg::Route(Route { rtype, ..route(k) })
}

pub(crate) fn rt_del(k: RouteKey) -> Msg<'static> {
    Msg::Route(Route {
        op: Op::Del,
        replace: false,
        rtype: RouteType::Other(0),
        ..route(k)
    })
}

/// A RIB with a consumer mirror that checks every change list.
struct Fixture {
    rib: Rib,
    mirror: Mirror,
}

impl Fixture {
    fn new() -> Self {
        Self {
            rib: Rib::new(),
            mirror: Mirror::default(),
        }
    }

    fn batch(&mut self, msgs: &[Msg<'_>]) -> Vec<Change> {
        let c = self.rib.apply_batch(msgs);
        self.mirror.apply(&c, &self.rib);
        self.rib.check_invariants();
        c
    }

    fn sweep(&mut self) -> Vec<Change> {
        let c = self.rib.sweep();
        self.mirror.apply(&c, &self.rib);
        self.rib.check_invariants();
        c
    }

    /// The installed next hops of `k` (`None`: not installed).
    fn hops(&self, k: &RouteKey) -> Option<NhSet> {
        let id = self.mirror.routes.get(k)?;
        Some(self.mirror.sets[id].clone())
    }
}

fn route_changes(c: &[Change]) -> Vec<&Change> {
    c.iter()
        .filter(|c| matches!(c, Change::Upsert { .. } | Change::Removed { .. }))
        .collect()
}

fn fwd(hops: &[(&str, u32, u16)]) -> NhSet {
    let mut v: Vec<NextHop> = hops
        .iter()
        .map(|&(g, i, w)| NextHop {
            gateway: Some(ip(g)),
            ifindex: i,
            weight: w,
        })
        .collect();
    v.sort();
    NhSet::Forward(v.into())
}

fn two_paths() -> Vec<Msg<'static>> {
    vec![
        nh_single(1, Some(ip("10.0.0.2")), 3),
        nh_single(2, Some(ip("10.0.1.2")), 5),
        nh_group(10, &[(1, 1), (2, 2)]),
    ]
}

#[test]
fn route_through_a_group_resolves_to_its_members() {
    let mut f = Fixture::new();
    let c = f.batch(&two_paths());
    assert!(route_changes(&c).is_empty());
    let k = key("192.0.2.0/24");
    let c = f.batch(&[rt_nh(k, 10)]);
    assert_eq!(route_changes(&c).len(), 1);
    assert_eq!(
        f.hops(&k),
        Some(fwd(&[("10.0.0.2", 3, 1), ("10.0.1.2", 5, 2)]))
    );
    let n = f.rib.counters();
    assert_eq!((n.routes, n.nexthops, n.route_adds), (1, 3, 1));
}

#[test]
fn replace_moves_the_route_and_frees_the_old_set_after() {
    let mut f = Fixture::new();
    let k = key("198.51.100.0/24");
    f.batch(&[rt_hops(k, &[NextHop::new(Some(ip("10.0.0.2")), 3)])]);
    let c = f.batch(&[rt_hops(k, &[NextHop::new(Some(ip("10.0.0.9")), 3)])]);
    // new set announced, route replaced, old set removed last
    assert!(matches!(c[0], Change::SetAdded { .. }));
    assert!(matches!(c[1], Change::Upsert { replaced: true, .. }));
    assert!(matches!(c[2], Change::SetRemoved { .. }));
    assert_eq!(c.len(), 3);
    assert_eq!(f.rib.counters().route_replaces, 1);
}

#[test]
fn identical_resend_is_silent() {
    let mut f = Fixture::new();
    let mut msgs = two_paths();
    msgs.push(rt_nh(key("192.0.2.0/24"), 10));
    f.batch(&msgs);
    assert!(f.batch(&msgs).is_empty());
    let n = f.rib.counters();
    assert_eq!((n.route_unchanged, n.nh_unchanged), (1, 3));
}

#[test]
fn delete_then_add_in_one_batch_is_one_replace() {
    let mut f = Fixture::new();
    let k = key("2001:db8:200::/48");
    let mut msgs = two_paths();
    msgs.push(rt_nh(k, 10));
    f.batch(&msgs);
    // zebra's change of an IPv6 route: RTM_DELROUTE then RTM_NEWROUTE without NLM_F_REPLACE
    let mut add = rt_nh(k, 1);
    if let Msg::Route(r) = &mut add {
        r.replace = false;
    }
    let c = f.batch(&[rt_del(k), add]);
    assert_eq!(
        route_changes(&c),
        [&Change::Upsert {
            key: k,
            set: f.mirror.routes[&k],
            replaced: true
        }]
    );
    assert_eq!(f.rib.counters().coalesced, 1);
    // the same delete and re-add of the same next hop: the route's set survives the batch
    let c = f.batch(&[rt_del(k), rt_nh(k, 1)]);
    assert_eq!(route_changes(&c).len(), 1);
    assert!(c.iter().all(|c| !matches!(c, Change::SetRemoved { .. })));
}

#[test]
fn delete_then_add_in_two_batches_has_a_gap() {
    let mut f = Fixture::new();
    let k = key("192.0.2.0/24");
    f.batch(&[rt_type(k, RouteType::Blackhole)]);
    let c = f.batch(&[rt_del(k)]);
    assert!(matches!(c[0], Change::Removed { .. }));
    let c = f.batch(&[rt_type(k, RouteType::Blackhole)]);
    assert!(c.iter().any(|c| matches!(
        c,
        Change::Upsert {
            replaced: false,
            ..
        }
    )));
}

#[test]
fn a_group_change_is_one_set_change_whatever_the_number_of_routes() {
    let mut f = Fixture::new();
    f.batch(&two_paths());
    let keys: Vec<RouteKey> = (0..1000u32)
        .map(|i| key(&format!("10.{}.{}.0/24", 100 + i / 256, i % 256)))
        .collect();
    let adds: Vec<Msg<'_>> = keys.iter().map(|&k| rt_nh(k, 10)).collect();
    f.batch(&adds);
    let c = f.batch(&[nh_group(10, &[(2, 1)])]);
    assert!(route_changes(&c).is_empty(), "no route touched: {c:?}");
    assert_eq!(c.len(), 1);
    assert!(matches!(&c[0], Change::SetChanged { set, .. } if *set == fwd(&[("10.0.1.2", 5, 1)])));
    for k in &keys {
        assert_eq!(f.hops(k), Some(fwd(&[("10.0.1.2", 5, 1)])));
    }
    // a member's own change reaches routes through the group: its set and the group's change
    let c = f.batch(&[nh_single(2, Some(ip("10.0.1.3")), 5)]);
    assert!(route_changes(&c).is_empty());
    assert_eq!(c.len(), 2, "{c:?}");
    assert_eq!(f.hops(&keys[7]), Some(fwd(&[("10.0.1.3", 5, 1)])));
    assert_eq!(f.rib.counters().nh_changes, 2);
    // a group left with no usable member takes its routes away, one by one, and back again
    let c = f.batch(&[nh_group(10, &[(77, 1)])]);
    assert_eq!(route_changes(&c).len(), 1000);
    assert_eq!(f.hops(&keys[7]), None);
    let c = f.batch(&[nh_group(10, &[(1, 1)])]);
    assert_eq!(route_changes(&c).len(), 1000);
    assert_eq!(f.hops(&keys[7]), Some(fwd(&[("10.0.0.2", 3, 1)])));
}

#[test]
fn objects_of_the_same_content_keep_sets_of_their_own() {
    let mut f = Fixture::new();
    let (a, b) = (key("10.1.0.0/16"), key("10.2.0.0/16"));
    f.batch(&[
        nh_single(1, Some(ip("10.0.0.2")), 3),
        nh_single(2, Some(ip("10.0.0.2")), 3),
        rt_nh(a, 1),
        rt_nh(b, 2),
    ]);
    assert_ne!(f.mirror.routes[&a], f.mirror.routes[&b]);
    let c = f.batch(&[nh_single(2, Some(ip("10.0.0.9")), 3)]);
    assert_eq!(c.len(), 1, "only object 2's set changes: {c:?}");
    assert_eq!(f.hops(&a), Some(fwd(&[("10.0.0.2", 3, 1)])));
    assert_eq!(f.hops(&b), Some(fwd(&[("10.0.0.9", 3, 1)])));
    assert_eq!(f.rib.routes_using(f.mirror.routes[&b]), vec![b]);
}

#[test]
fn a_route_before_its_next_hop_waits_unresolved() {
    let mut f = Fixture::new();
    let k = key("192.0.2.0/24");
    assert!(route_changes(&f.batch(&[rt_nh(k, 10)])).is_empty());
    let n = f.rib.counters();
    assert_eq!(
        (n.routes, n.routes_unresolved, n.unresolved_refs),
        (1, 1, 1)
    );
    // the group arrives before its members: still nothing to forward through
    assert!(route_changes(&f.batch(&[nh_group(10, &[(1, 1), (2, 1)])])).is_empty());
    let c = f.batch(&[nh_single(1, Some(ip("10.0.0.2")), 3)]);
    assert_eq!(route_changes(&c).len(), 1);
    assert_eq!(f.hops(&k), Some(fwd(&[("10.0.0.2", 3, 1)])));
    assert_eq!(f.rib.counters().routes_unresolved, 0);
}

#[test]
fn deleting_a_group_in_use_deletes_its_routes() {
    let mut f = Fixture::new();
    let mut msgs = two_paths();
    let (a, b) = (key("192.0.2.0/24"), key("198.51.100.0/24"));
    msgs.extend([rt_nh(a, 10), rt_nh(b, 1)]);
    f.batch(&msgs);
    let c = f.batch(&[nh_del(10)]);
    assert_eq!(route_changes(&c), [&Change::Removed { key: a }]);
    assert!(f.rib.route(&a).is_none(), "deleted, not left unresolved");
    assert!(f.rib.route(&b).is_some());
    let n = f.rib.counters();
    assert_eq!((n.routes_flushed, n.nh_dels, n.nexthops), (1, 1, 2));
}

#[test]
fn deleting_members_shrinks_then_deletes_the_group() {
    let mut f = Fixture::new();
    let mut msgs = two_paths();
    let k = key("192.0.2.0/24");
    msgs.push(rt_nh(k, 10));
    f.batch(&msgs);
    f.batch(&[nh_del(1)]);
    assert_eq!(f.hops(&k), Some(fwd(&[("10.0.1.2", 5, 2)])));
    // re-adding id 1 does not bring it back into the group (as with Linux)
    f.batch(&[nh_single(1, Some(ip("10.0.0.2")), 3)]);
    assert_eq!(f.hops(&k), Some(fwd(&[("10.0.1.2", 5, 2)])));
    let c = f.batch(&[nh_del(2)]);
    assert_eq!(route_changes(&c), [&Change::Removed { key: k }]);
    assert!(f.rib.route(&k).is_none());
    assert_eq!(f.rib.counters().nexthops, 1, "only id 1 is left");
}

#[test]
fn replay_then_sweep_removes_only_what_was_not_resent() {
    let mut f = Fixture::new();
    let (a, b, c6) = (
        key("192.0.2.0/24"),
        key("198.51.100.0/24"),
        key("2001:db8::/48"),
    );
    let mut first = two_paths();
    first.extend([
        nh_single(3, Some(ip("10.0.0.7")), 3),
        rt_nh(a, 10),
        rt_nh(b, 3),
        rt_type(c6, RouteType::Unreachable),
    ]);
    f.batch(&first);
    f.rib.begin_replay();
    // zebra re-sends its current state: group 10 and route a unchanged, c6 moved to id 1
    let replay = [
        nh_single(1, Some(ip("10.0.0.2")), 3),
        nh_single(2, Some(ip("10.0.1.2")), 5),
        nh_group(10, &[(1, 1), (2, 2)]),
        rt_nh(a, 10),
        rt_nh(c6, 1),
    ];
    let c = f.batch(&replay);
    assert_eq!(route_changes(&c).len(), 1, "only c6 changed");
    let c = f.sweep();
    assert_eq!(route_changes(&c), [&Change::Removed { key: b }]);
    assert!(c.iter().any(|c| matches!(c, Change::SetRemoved { .. })));
    let n = f.rib.counters();
    assert_eq!(
        (n.swept_routes, n.swept_nexthops, n.routes, n.nexthops),
        (1, 1, 2, 3)
    );
    // a second sweep without a replay finds nothing stale
    assert!(f.sweep().is_empty());
}

#[test]
fn sweeping_a_stale_next_hop_takes_its_fresh_routes_too() {
    let mut f = Fixture::new();
    let k = key("192.0.2.0/24");
    f.batch(&[nh_single(1, Some(ip("10.0.0.2")), 3), rt_nh(k, 1)]);
    f.rib.begin_replay();
    f.batch(&[rt_nh(k, 1)]);
    let c = f.sweep();
    assert_eq!(route_changes(&c), [&Change::Removed { key: k }]);
    assert_eq!(f.rib.counters().routes_flushed, 1);
}

#[test]
fn drop_kinds_and_blackhole_objects() {
    let mut f = Fixture::new();
    let ks = [
        key("10.1.0.0/16"),
        key("10.2.0.0/16"),
        key("10.3.0.0/16"),
        key("10.4.0.0/16"),
    ];
    f.batch(&[
        rt_type(ks[0], RouteType::Blackhole),
        rt_type(ks[1], RouteType::Unreachable),
        rt_type(ks[2], RouteType::Prohibit),
        nh_blackhole(24),
        rt_nh(ks[3], 24),
    ]);
    let got: Vec<Option<NhSet>> = ks.iter().map(|k| f.hops(k)).collect();
    assert_eq!(
        got,
        [
            Some(NhSet::Blackhole),
            Some(NhSet::Unreachable),
            Some(NhSet::Prohibit),
            Some(NhSet::Blackhole)
        ]
    );
    assert_eq!(
        f.rib.counters().sets,
        4,
        "three route types interned, and object 24's own set"
    );
}

#[test]
fn ignored_and_unknown_are_counted() {
    let mut f = Fixture::new();
    f.batch(&[
        Msg::Other { nlmsg_type: 28 },
        rt_type(key("10.0.0.1/32"), RouteType::Other(2)),
        rt_del(key("10.9.0.0/16")),
        nh_del(77),
    ]);
    let n = f.rib.counters();
    assert_eq!(
        (n.ignored, n.route_del_unknown, n.nh_del_unknown, n.routes),
        (2, 1, 1, 0)
    );
}

#[test]
fn set_ids_are_reused_but_not_within_a_batch() {
    let mut f = Fixture::new();
    let (a, b) = (key("10.1.0.0/16"), key("10.2.0.0/16"));
    let h = |g: &str| [NextHop::new(Some(ip(g)), 1)];
    let c = f.batch(&[rt_hops(a, &h("10.0.0.1"))]);
    let Change::SetAdded { id: first, .. } = c[0] else {
        panic!("{c:?}")
    };
    // a's set dies and b's is created in the same batch: a fresh id
    let c = f.batch(&[rt_del(a), rt_hops(b, &h("10.0.0.2"))]);
    let added: Vec<NhSetId> = c
        .iter()
        .filter_map(|c| match c {
            Change::SetAdded { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(added.len(), 1);
    assert_ne!(added[0], first);
    // the next batch may reuse it
    let c = f.batch(&[rt_hops(a, &h("10.0.0.3"))]);
    assert!(matches!(c[0], Change::SetAdded { id, .. } if id == first));
}

#[test]
fn tables_are_separate() {
    let mut f = Fixture::new();
    let main = key("10.0.0.0/8");
    let other = RouteKey {
        table: 1000,
        ..main
    };
    f.batch(&[
        rt_type(main, RouteType::Blackhole),
        rt_type(other, RouteType::Prohibit),
    ]);
    f.batch(&[rt_del(main)]);
    assert_eq!(f.hops(&other), Some(NhSet::Prohibit));
    assert_eq!(f.rib.len(), 1);
}

#[test]
fn labelled_routes_and_objects_are_never_installed_and_remove_what_they_replace() {
    let mut f = Fixture::new();
    let (a, b) = (key("192.0.2.0/24"), key("198.51.100.0/24"));
    f.batch(&[
        nh_single(1, Some(ip("10.0.0.2")), 3),
        nh_single(2, Some(ip("10.0.0.3")), 3),
        rt_nh(a, 1),
        rt_nh(b, 2),
    ]);
    assert!(f.hops(&a).is_some() && f.hops(&b).is_some());
    // zebra's replay after a reconnect: route a again, now with its BGP label.
    let mut labelled = rt_nh(a, 1);
    if let Msg::Route(r) = &mut labelled {
        r.encap = true;
    }
    let c = f.batch(&[labelled]);
    assert_eq!(route_changes(&c), [&Change::Removed { key: a }]);
    assert!(f.rib.route(&a).is_none());
    // Object 2 redefined with a label: as if deleted, so route b goes too.
    let mut obj = nh_single(2, Some(ip("10.0.0.3")), 3);
    if let Msg::Nexthop(n) = &mut obj {
        n.encap = true;
    }
    let c = f.batch(&[obj]);
    assert_eq!(route_changes(&c), [&Change::Removed { key: b }]);
    let n = f.rib.counters();
    assert_eq!((n.labelled, n.routes, n.nexthops), (2, 0, 1));
    // Unlabelled again: installed again.
    f.batch(&[rt_nh(a, 1)]);
    assert!(f.hops(&a).is_some());
}
