//! [`Rib::write_messages`]: the dump, decoded and applied to a fresh RIB, rebuilds an equal one
//! (same routes with the same next-hop object or next hops, same objects and groups, same
//! placeholders), whatever the batching; and the rebuilt RIB dumps the same bytes again.

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;

use super::model_tests::{a_msg, Step};
use super::tests::*;
use super::*;
use crate::fuzzing::Mirror;
use crate::netlink::{decode, encode, messages, AF_INET, AF_INET6, RT_TABLE_MAIN};

fn dump(rib: &Rib) -> Vec<u8> {
    let mut out = Vec::new();
    rib.write_messages(&mut out);
    out
}

fn decoded(buf: &[u8]) -> Vec<Msg<'_>> {
    messages(buf)
        .collect::<Result<Vec<_>, _>>()
        .expect("the dump decodes")
}

/// Every route: its object and what it resolves to.
fn route_view(rib: &Rib) -> HashMap<RouteKey, (u32, Option<NhSet>)> {
    rib.routes()
        .map(|(k, st)| (k, (st.nh_id, st.set.map(|s| rib.set(s).unwrap().clone()))))
        .collect()
}

/// Every object, placeholders included: its definition and what it resolves to.
fn object_view(rib: &Rib) -> BTreeMap<u32, (Option<NhDef>, Option<NhSet>)> {
    rib.nhs
        .iter()
        .map(|(&id, o)| {
            let set = o.set.map(|s| rib.set(s).unwrap().clone());
            (id, (o.def.clone(), set))
        })
        .collect()
}

fn gauges(rib: &Rib) -> [u64; 4] {
    let c = rib.counters();
    [c.routes, c.routes_unresolved, c.nexthops, c.sets]
}

fn assert_same(a: &Rib, b: &Rib) {
    assert_eq!(route_view(a), route_view(b), "routes");
    assert_eq!(object_view(a), object_view(b), "next-hop objects");
    assert_eq!(gauges(a), gauges(b), "routes, unresolved, objects, sets");
}

/// A fresh RIB fed `msgs` in batches of `chunk` (1: through [`Rib::apply`]), checked by a
/// consumer mirror starting empty, as the replacing process's would.
fn rebuild(msgs: &[Msg<'_>], chunk: usize) -> (Rib, Mirror) {
    let mut rib = Rib::new();
    let mut changes = Vec::new();
    for c in msgs.chunks(chunk.max(1)) {
        if c.len() == 1 {
            changes.extend(rib.apply(&c[0]));
        } else {
            rib.apply_batch_into(c, &mut changes);
        }
    }
    assert!(
        changes.iter().all(|c| matches!(
            c,
            Change::SetAdded { .. }
                | Change::Upsert {
                    replaced: false,
                    ..
                }
        )),
        "rebuilding only adds"
    );
    // Once, on the whole stream (the mirror compares itself with the whole RIB every call).
    let mut mirror = Mirror::default();
    mirror.apply(&changes, &rib);
    rib.check_invariants();
    (rib, mirror)
}

/// The dump of `rib`: well-formed (only adds; plain objects, then groups, then routes; one
/// route per key), rebuilding an equal RIB one message at a time, in `chunk`s and all at once,
/// whose own dump is the same bytes. Returns the decoded dump.
fn check_dump(rib: &Rib, chunk: usize) -> Vec<Msg<'static>> {
    let buf = dump(rib);
    let msgs: Vec<Msg<'static>> = decoded(&buf).into_iter().map(Msg::into_owned).collect();
    let rank = |m: &Msg<'_>| match m {
        Msg::Nexthop(n) if n.group.is_empty() => 0,
        Msg::Nexthop(_) => 1,
        Msg::Route(_) => 2,
        Msg::Other { .. } => panic!("other message in the dump"),
    };
    assert!(msgs.windows(2).all(|w| rank(&w[0]) <= rank(&w[1])));
    let mut keys = std::collections::HashSet::new();
    for m in &msgs {
        match m {
            Msg::Route(r) => {
                assert_eq!((r.op, r.encap), (Op::New, false));
                assert!(keys.insert((r.table, r.prefix)), "one message per route");
            }
            Msg::Nexthop(n) => assert_eq!((n.op, n.encap), (Op::New, false)),
            Msg::Other { .. } => unreachable!(),
        }
    }
    assert_eq!(keys.len(), rib.len());
    assert_eq!(
        msgs.len() as u64 - keys.len() as u64,
        rib.counters().nexthops
    );
    let installed: HashMap<RouteKey, NhSet> = route_view(rib)
        .into_iter()
        .filter_map(|(k, (_, s))| Some((k, s?)))
        .collect();
    for chunk in [1, chunk, msgs.len()] {
        let (again, mirror) = rebuild(&msgs, chunk);
        assert_same(rib, &again);
        let got: HashMap<RouteKey, NhSet> = mirror
            .routes
            .iter()
            .map(|(k, s)| (*k, mirror.sets[s].clone()))
            .collect();
        assert_eq!(got, installed, "what the new consumer installs");
        assert_eq!(dump(&again), buf, "the rebuilt RIB dumps the same");
    }
    msgs
}

fn routes_of(msgs: &[Msg<'static>]) -> HashMap<RouteKey, Route<'static>> {
    msgs.iter()
        .filter_map(|m| match m {
            Msg::Route(r) => Some((
                RouteKey {
                    table: r.table,
                    prefix: r.prefix,
                },
                r.clone(),
            )),
            _ => None,
        })
        .collect()
}

fn in_table(p: &str, table: u32) -> RouteKey {
    RouteKey {
        table,
        prefix: p.parse().unwrap(),
    }
}

fn hop(gw: Option<&str>, ifindex: u32, weight: u16) -> NextHop {
    NextHop {
        gateway: gw.map(ip),
        ifindex,
        weight,
    }
}

/// Zebra's single-path form (`RTA_GATEWAY`/`RTA_VIA` and `RTA_OIF`).
fn rt_single(k: RouteKey, gw: Option<&str>, oif: u32) -> Msg<'static> {
    let Msg::Route(r) = rt_hops(k, &[]) else {
        unreachable!()
    };
    Msg::Route(Route {
        gateway: gw.map(ip),
        oif,
        ..r
    })
}

fn apply_all(rib: &mut Rib, msgs: &[Msg<'_>]) {
    rib.apply_batch(msgs);
    rib.check_invariants();
}

#[test]
fn an_empty_rib_dumps_nothing() {
    let rib = Rib::new();
    assert!(dump(&rib).is_empty());
    check_dump(&rib, 1);
    // appends, does not overwrite
    let mut out = vec![1, 2, 3];
    rib.write_messages(&mut out);
    assert_eq!(out, [1, 2, 3]);
}

#[test]
fn ipv4_and_ipv6_routes_with_their_own_next_hops() {
    let mut rib = Rib::new();
    let k = |p: &str| key(p);
    let msgs = [
        rt_single(k("192.0.2.0/24"), Some("10.0.0.2"), 3),
        rt_single(k("192.0.2.128/25"), Some("10.0.0.2"), 0), // gateway only
        rt_single(k("198.51.100.0/24"), None, 7),            // connected
        rt_single(k("203.0.113.0/24"), Some("fe80::1"), 4),  // RFC 5549: RTA_VIA
        rt_single(k("2001:db8::/32"), Some("2001:db8:ffff::1"), 5),
        rt_single(k("2001:db8:1::/48"), Some("10.0.0.9"), 5), // IPv4 gateway of an IPv6 route
        rt_hops(
            k("10.20.0.0/16"),
            &[
                hop(Some("10.0.0.2"), 3, 1),
                hop(Some("10.0.1.2"), 5, 3),
                hop(Some("fe80::2"), 6, 256),
            ],
        ),
        rt_hops(
            k("2001:db8:2::/48"),
            &[hop(Some("fe80::1"), 3, 1), hop(Some("fe80::2"), 4, 1)],
        ),
        // one path with a weight, one with neither gateway nor device
        rt_hops(k("10.30.0.0/16"), &[hop(Some("10.0.0.2"), 3, 2)]),
        rt_hops(k("10.40.0.0/16"), &[hop(None, 0, 1)]),
        // no next hop at all: held unresolved
        rt_hops(k("10.50.0.0/16"), &[]),
        rt_type(k("0.0.0.0/0"), RouteType::Blackhole),
        rt_type(k("::/0"), RouteType::Unreachable),
        rt_type(k("10.60.0.0/16"), RouteType::Prohibit),
    ];
    apply_all(&mut rib, &msgs);
    assert_eq!(rib.len(), msgs.len());
    assert_eq!(rib.counters().routes_unresolved, 1);
    let out = routes_of(&check_dump(&rib, 3));
    assert_eq!(out.len(), msgs.len());
    // each route in the form that keeps it: single path when it can, else multipath
    let r = &out[&k("203.0.113.0/24")];
    assert_eq!((r.gateway, r.oif), (Some(ip("fe80::1")), 4));
    assert!(r.multipath.is_empty());
    let r = &out[&k("10.30.0.0/16")];
    assert_eq!(r.gateway, None);
    assert_eq!(
        r.multipath.iter().collect::<Vec<_>>(),
        [hop(Some("10.0.0.2"), 3, 2)]
    );
    assert_eq!(out[&k("10.40.0.0/16")].multipath.iter().count(), 1);
    assert_eq!(out[&k("10.20.0.0/16")].multipath.iter().count(), 3);
    let r = &out[&k("10.50.0.0/16")];
    assert_eq!(r.rtype, RouteType::Unicast);
    assert!(r.gateway.is_none() && r.oif == 0 && r.multipath.is_empty() && r.nh_id == 0);
    assert_eq!(out[&k("::/0")].rtype, RouteType::Unreachable);
}

#[test]
fn next_hop_objects_and_groups_come_first_and_are_kept() {
    let mut rib = Rib::new();
    let (a, b, c, d, e) = (
        key("192.0.2.0/24"),
        key("2001:db8::/48"),
        key("198.51.100.0/24"),
        key("203.0.113.0/24"),
        key("10.0.0.0/8"),
    );
    apply_all(
        &mut rib,
        &[
            // routes first: they wait for their objects
            rt_nh(a, 10),
            rt_nh(b, 20),
            rt_nh(e, 99), // never defined: stays unresolved, 99 a placeholder
            nh_group(20, &[(4, 1), (5, 2)]),
            nh_single(4, Some(ip("fe80::4")), 3),
            nh_single(5, Some(ip("2001:db8:ffff::5")), 4),
            nh_single(1, Some(ip("10.0.0.2")), 3),
            nh_single(2, Some(ip("10.0.1.2")), 5),
            nh_single(3, None, 9), // device only
            nh_blackhole(6),
            // members: a blackhole, a group (skipped), an undefined id (a placeholder)
            nh_group(10, &[(1, 1), (2, 7), (3, 1), (6, 1), (20, 1), (77, 1)]),
            nh_group(11, &[(6, 1)]),
            rt_nh(c, 11),
            rt_nh(d, 3),
        ],
    );
    let before = object_view(&rib);
    assert_eq!(before[&77].0, None, "placeholder");
    assert_eq!(before[&99].0, None, "placeholder");
    let msgs = check_dump(&rib, 2);
    let ids: Vec<u32> = msgs
        .iter()
        .filter_map(|m| match m {
            Msg::Nexthop(n) => Some(n.id),
            _ => None,
        })
        .collect();
    assert_eq!(
        ids,
        [1, 2, 3, 4, 5, 6, 10, 11, 20],
        "plain by id, then groups"
    );
    let nh = |id| {
        msgs.iter()
            .find_map(|m| match m {
                Msg::Nexthop(n) if n.id == id => Some(n.clone()),
                _ => None,
            })
            .unwrap()
    };
    assert_eq!(nh(4).family, AF_INET6);
    assert_eq!((nh(3).family, nh(3).oif, nh(3).gateway), (AF_INET, 9, None));
    assert!(nh(6).blackhole);
    assert_eq!(
        nh(10)
            .group
            .iter()
            .map(|m| (m.id, m.weight))
            .collect::<Vec<_>>(),
        [(1, 1), (2, 7), (3, 1), (6, 1), (20, 1), (77, 1)]
    );
    let out = routes_of(&msgs);
    assert_eq!(
        [a, b, c, d, e].map(|k| out[&k].nh_id),
        [10, 20, 11, 3, 99],
        "routes name their objects"
    );
    assert!(out
        .values()
        .all(|r| r.multipath.is_empty() && r.gateway.is_none()));
}

#[test]
fn several_tables_of_both_families() {
    let mut rib = Rib::new();
    let mut msgs = vec![nh_single(1, Some(ip("10.0.0.2")), 3)];
    for (i, t) in [0, 10, 254, 255, 256, 1000, u32::MAX]
        .into_iter()
        .enumerate()
    {
        msgs.push(rt_nh(in_table("10.0.0.0/8", t), 1));
        msgs.push(rt_type(in_table("2001:db8::/32", t), RouteType::Prohibit));
        msgs.push(rt_single(
            in_table("192.0.2.0/24", t),
            Some("10.0.0.9"),
            i as u32 + 1,
        ));
    }
    apply_all(&mut rib, &msgs);
    assert_eq!(rib.len(), 21);
    let out = routes_of(&check_dump(&rib, 5));
    assert_eq!(out.len(), 21);
    assert_eq!(out[&in_table("192.0.2.0/24", 1000)].oif, 6);
}

#[test]
fn replaced_routes_and_objects_are_dumped_as_they_are_now() {
    let mut rib = Rib::new();
    let k = key("192.0.2.0/24");
    let k6 = key("2001:db8::/48");
    apply_all(
        &mut rib,
        &[
            nh_single(1, Some(ip("10.0.0.2")), 3),
            nh_single(2, Some(ip("10.0.1.2")), 5),
            nh_group(10, &[(1, 1), (2, 1)]),
            rt_single(k, Some("10.0.0.2"), 3),
            rt_nh(k6, 10),
        ],
    );
    // k moves to a group, the group to other weights, k6 to its own paths, object 1 changes
    apply_all(&mut rib, &[rt_nh(k, 10)]);
    apply_all(&mut rib, &[nh_group(10, &[(1, 2), (2, 1)])]);
    apply_all(
        &mut rib,
        &[
            rt_del(k6),
            rt_hops(
                k6,
                &[hop(Some("fe80::1"), 3, 1), hop(Some("fe80::2"), 3, 1)],
            ),
        ],
    );
    apply_all(&mut rib, &[nh_single(1, Some(ip("10.0.0.3")), 3)]);
    let msgs = check_dump(&rib, 2);
    let out = routes_of(&msgs);
    assert_eq!(out[&k].nh_id, 10);
    assert_eq!(out[&k6].nh_id, 0);
    assert_eq!(out[&k6].multipath.iter().count(), 2);
    assert!(msgs.iter().any(|m| matches!(m,
        Msg::Nexthop(n) if n.id == 1 && n.gateway == Some(ip("10.0.0.3")))));
    let (again, _) = rebuild(&msgs, 1);
    let st = again.route(&k).unwrap();
    assert_eq!(
        again.set(st.set.unwrap()).unwrap().hops(),
        [hop(Some("10.0.0.3"), 3, 2), hop(Some("10.0.1.2"), 5, 1)]
    );
}

#[test]
fn deleted_routes_and_objects_are_not_dumped() {
    let mut rib = Rib::new();
    let keys: Vec<RouteKey> = (0..300u32)
        .map(|i| key(&format!("10.{}.{}.0/24", i / 256, i % 256)))
        .collect();
    let mut msgs = two_objects_and_a_group();
    msgs.extend(keys.iter().enumerate().map(|(i, &k)| match i % 3 {
        0 => rt_nh(k, 10),
        1 => rt_nh(k, 1),
        _ => rt_single(k, Some("10.0.0.2"), 3),
    }));
    apply_all(&mut rib, &msgs);
    // every 5th route deleted (holes in the slab), object 1 deleted (its routes go, the group
    // shrinks), then some new routes (reusing the holes)
    let dels: Vec<Msg<'_>> = keys.iter().step_by(5).map(|&k| rt_del(k)).collect();
    apply_all(&mut rib, &dels);
    apply_all(&mut rib, &[nh_del(1)]);
    let fresh: Vec<Msg<'_>> = (0..20u32)
        .map(|i| rt_nh(key(&format!("172.16.{i}.0/24")), 10))
        .collect();
    apply_all(&mut rib, &fresh);
    assert!(!rib.free_routes.is_empty(), "the slab has holes");
    let out = routes_of(&check_dump(&rib, 64));
    assert_eq!(out.len(), rib.len());
    for (i, k) in keys.iter().enumerate() {
        let gone = i % 5 == 0 || i % 3 == 1;
        assert_eq!(out.contains_key(k), !gone, "{k:?}");
    }
    let Msg::Nexthop(g) = &check_dump(&rib, 1)[1] else {
        panic!("group expected")
    };
    assert_eq!(g.group.iter().map(|m| m.id).collect::<Vec<_>>(), [2]);
}

fn two_objects_and_a_group() -> Vec<Msg<'static>> {
    vec![
        nh_single(1, Some(ip("10.0.0.2")), 3),
        nh_single(2, Some(ip("10.0.1.2")), 5),
        nh_group(10, &[(1, 1), (2, 2)]),
    ]
}

#[test]
fn a_dump_during_a_replay_carries_the_stale_entries_too() {
    let mut rib = Rib::new();
    let (a, b) = (key("192.0.2.0/24"), key("198.51.100.0/24"));
    let mut msgs = two_objects_and_a_group();
    msgs.extend([rt_nh(a, 10), rt_nh(b, 1)]);
    apply_all(&mut rib, &msgs);
    rib.begin_replay();
    apply_all(&mut rib, &[rt_nh(a, 10)]);
    let (mut again, _) = rebuild(&check_dump(&rib, 1), 1);
    assert!(again.route(&b).is_some());
    // all fresh there: the new process's own replay and sweep are what removes them
    assert!(again.sweep().is_empty());
}

/// Thousands of routes, mostly with their own next hops (`check_invariants` walks the user
/// list of an object for each of its routes: a big one is quadratic in a debug build).
#[test]
fn a_large_table_round_trips() {
    const N: u32 = 10_000;
    let mut rib = Rib::with_capacity(2 * N as usize);
    let mut msgs = two_objects_and_a_group();
    msgs.push(nh_single(3, Some(ip("2001:db8:ffff::1")), 4));
    for i in 0..N {
        let v4 = Prefix::new(std::net::Ipv4Addr::from(0x0a00_0000 | i << 8).into(), 24).unwrap();
        let v6 = Prefix::new(
            std::net::Ipv6Addr::from(0x2001_0db8_u128 << 96 | (i as u128) << 64).into(),
            64,
        )
        .unwrap();
        let k4 = RouteKey {
            table: RT_TABLE_MAIN,
            prefix: v4,
        };
        let k6 = RouteKey {
            table: 1000,
            prefix: v6,
        };
        msgs.push(match i % 100 {
            0 => rt_nh(k4, 10),
            1 => rt_nh(k4, 1),
            n if n % 2 == 0 => rt_single(k4, Some("10.0.0.2"), 3),
            _ => rt_hops(
                k4,
                &[hop(Some("10.0.0.2"), 3, 1), hop(Some("10.0.1.2"), 5, 1)],
            ),
        });
        msgs.push(match i % 100 {
            0 => rt_nh(k6, 3),
            _ => rt_single(k6, Some("fe80::1"), 4),
        });
    }
    apply_all(&mut rib, &msgs);
    assert_eq!(rib.len(), 2 * N as usize);
    let msgs = check_dump(&rib, 4096);
    assert_eq!(msgs.len(), 2 * N as usize + 4);
}

/// A next-hop message of any family: IPv6 gateways, devices only.
fn nh_any(id: u32, gw: Option<&str>, oif: u32) -> Msg<'static> {
    let Msg::Nexthop(n) = nh_single(id, gw.map(ip), oif) else {
        unreachable!()
    };
    let family = if gw.is_some_and(|g| g.contains(':')) {
        AF_INET6
    } else {
        AF_INET
    };
    Msg::Nexthop(Nexthop { family, ..n })
}

const KEYS: [(&str, u32); 8] = [
    ("10.0.0.0/8", 254),
    ("10.1.0.0/16", 254),
    ("192.0.2.1/32", 254),
    ("10.0.0.0/8", 1000),
    ("0.0.0.0/0", 10),
    ("2001:db8::/32", 254),
    ("2001:db8::/32", 1000),
    ("::/0", 254),
];

fn a_key() -> impl Strategy<Value = RouteKey> {
    (0..KEYS.len()).prop_map(|i| in_table(KEYS[i].0, KEYS[i].1))
}

const GWS: [Option<&str>; 5] = [
    None,
    Some("10.9.0.1"),
    Some("10.9.0.2"),
    Some("fe80::1"),
    Some("2001:db8::9"),
];

/// What the model tests' messages do not cover: both families' gateways on both families'
/// routes, single-path routes, paths without gateway or device, heavy weights, IPv6 and
/// device-only objects.
fn a_wider_msg() -> impl Strategy<Value = Msg<'static>> {
    let a_hop =
        (0..GWS.len(), 0..3u32, prop_oneof![Just(1u16), 1..=256u16]).prop_map(|(g, oif, w)| {
            NextHop {
                gateway: GWS[g].map(ip),
                ifindex: oif,
                weight: w,
            }
        });
    prop_oneof![
        (a_key(), 0..GWS.len(), 0..3u32).prop_map(|(k, g, oif)| rt_single(k, GWS[g], oif)),
        (a_key(), proptest::collection::vec(a_hop, 0..4)).prop_map(|(k, h)| rt_hops(k, &h)),
        (1..7u32, 0..GWS.len(), 1..3u32).prop_map(|(i, g, oif)| nh_any(i, GWS[g], oif)),
        (a_key(), 1..7u32).prop_map(|(k, i)| rt_nh(k, i)),
        a_key().prop_map(rt_del),
    ]
}

fn a_step() -> impl Strategy<Value = Step> {
    let msg = prop_oneof![3 => a_msg(), 2 => a_wider_msg()];
    prop_oneof![
        8 => proptest::collection::vec(msg, 1..8).prop_map(Step::Batch),
        1 => Just(Step::Replay),
        1 => Just(Step::Sweep),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random histories (through the wire, as the server delivers them), dumped after every
    /// step: the dump rebuilds an equal RIB however it is batched.
    #[test]
    fn the_dump_rebuilds_an_equal_rib(
        steps in proptest::collection::vec(a_step(), 1..30),
        chunk in 1..12usize,
    ) {
        let mut rib = Rib::new();
        for step in &steps {
            match step {
                Step::Batch(msgs) => {
                    let mut wire = Vec::new();
                    for m in msgs {
                        encode::message(&mut wire, m, 1);
                    }
                    let mut msgs = Vec::new();
                    let mut rest = &wire[..];
                    while !rest.is_empty() {
                        let (m, used) = decode(rest).unwrap();
                        msgs.push(m);
                        rest = &rest[used..];
                    }
                    rib.apply_batch(&msgs);
                }
                Step::Replay => rib.begin_replay(),
                Step::Sweep => {
                    rib.sweep();
                }
            }
            check_dump(&rib, chunk);
        }
    }
}
