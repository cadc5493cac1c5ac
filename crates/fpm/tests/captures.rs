//! What real zebra 8.4 sent (see tests/data/README.md): decoded completely, re-encoded byte for
//! byte, and applied to the RIB, which must then hold exactly the routes that were configured.

use std::collections::BTreeMap;
use std::net::IpAddr;

use fpm::netlink::{encode, RT_TABLE_MAIN};
use fpm::rib::{Change, NhSet, NhSetId, RouteKey};
use fpm::{FrameReader, Msg, NextHop, Rib};

fn frames(file: &str) -> Vec<Vec<u8>> {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut r = FrameReader::new();
    r.feed(&bytes);
    let mut out = Vec::new();
    while let Some(p) = r.next_frame().expect("valid framing") {
        out.push(p.to_vec());
    }
    assert_eq!(r.buffered(), 0, "no trailing partial frame");
    out
}

fn decode(payload: &[u8]) -> Vec<Msg<'_>> {
    fpm::netlink::messages(payload)
        .map(|m| m.expect("zebra's messages decode"))
        .collect()
}

/// Every frame re-encodes to exactly zebra's bytes (`nlmsg_pid` is the only thing taken from it).
fn check_layout(file: &str) {
    for payload in frames(file) {
        let pid = u32::from_ne_bytes(payload[12..16].try_into().unwrap());
        let msgs = decode(&payload);
        let mut again = Vec::new();
        let mut scratch = Vec::new();
        encode::frame(&mut again, &mut scratch, &msgs, pid).unwrap();
        assert_eq!(&again[4..], &payload[..], "{msgs:?}");
    }
}

fn ip(s: &str) -> Option<IpAddr> {
    Some(s.parse().unwrap())
}

fn key(p: &str) -> RouteKey {
    RouteKey {
        table: RT_TABLE_MAIN,
        prefix: p.parse().unwrap(),
    }
}

/// Applies the capture one frame per batch, as the server would deliver it slowly, and returns
/// what a consumer ends up with, and the RIB.
fn apply(file: &str) -> (BTreeMap<RouteKey, NhSet>, Rib) {
    let mut rib = Rib::new();
    let mut routes: BTreeMap<RouteKey, NhSetId> = BTreeMap::new();
    let mut sets: BTreeMap<NhSetId, NhSet> = BTreeMap::new();
    for payload in frames(file) {
        for c in rib.apply_batch(&decode(&payload)) {
            match c {
                Change::SetAdded { id, set } | Change::SetChanged { id, set } => {
                    sets.insert(id, set);
                }
                Change::Upsert { key, set, .. } => {
                    routes.insert(key, set);
                }
                Change::Removed { key } => {
                    routes.remove(&key);
                }
                Change::SetRemoved { id } => {
                    sets.remove(&id);
                }
            }
        }
    }
    rib.check_invariants();
    let resolved = routes
        .into_iter()
        .map(|(k, s)| (k, sets[&s].clone()))
        .collect();
    (resolved, rib)
}

fn fwd(hops: &[(Option<IpAddr>, u32)]) -> NhSet {
    let mut v: Vec<NextHop> = hops.iter().map(|&(g, i)| NextHop::new(g, i)).collect();
    v.sort();
    NhSet::Forward(v.into())
}

/// The configuration of capture.sh after its changes: eth0 is ifindex 3, eth1 5.
/// `fe80::/64` is on whichever interface zebra picked (`fe80_oif`).
fn expected(fe80_oif: u32) -> BTreeMap<RouteKey, NhSet> {
    [
        (key("10.0.0.0/24"), fwd(&[(None, 3)])),
        (key("10.0.1.0/24"), fwd(&[(None, 5)])),
        (key("198.51.100.0/24"), fwd(&[(ip("10.0.0.2"), 3)])),
        (key("203.0.113.0/25"), NhSet::Blackhole),
        (key("203.0.113.128/25"), NhSet::Unreachable),
        (key("2001:db8::/64"), fwd(&[(None, 3)])),
        (key("2001:db8:1::/64"), fwd(&[(None, 5)])),
        (key("2001:db8:100::/48"), fwd(&[(ip("2001:db8::2"), 3)])),
        (
            key("2001:db8:200::/48"),
            fwd(&[(ip("2001:db8::2"), 3), (ip("2001:db8:1::2"), 5)]),
        ),
        (key("fe80::/64"), fwd(&[(None, fe80_oif)])),
    ]
    .into_iter()
    .collect()
}

#[test]
fn zebra_with_next_hop_groups() {
    let file = "zebra84-nhg.fpm";
    check_layout(file);
    let (routes, rib) = apply(file);
    assert_eq!(routes, expected(5));
    let c = rib.counters();
    assert_eq!(c.routes, 10);
    assert_eq!(c.routes_unresolved, 0);
    assert_eq!(c.nexthops, 13, "15 objects sent, 2 deleted");
    assert_eq!(c.nh_dels, 2);
    assert_eq!(c.route_dels, 3, "two deletions and one change");
    assert_eq!(
        c.coalesced, 1,
        "the change came as delete + add in one frame"
    );
    assert_eq!(c.ignored, 0);
}

#[test]
fn zebra_without_next_hop_groups() {
    let file = "zebra84-nonhg.fpm";
    check_layout(file);
    let (routes, rib) = apply(file);
    assert_eq!(routes, expected(2));
    let c = rib.counters();
    assert_eq!((c.routes, c.routes_unresolved, c.nexthops), (10, 0, 0));
    assert_eq!(c.coalesced, 1);
    assert_eq!(c.ignored, 0);
}

/// Both captures end in the same state whether applied frame by frame or as one batch.
#[test]
fn one_batch_gives_the_same_state() {
    for file in ["zebra84-nhg.fpm", "zebra84-nonhg.fpm"] {
        let all = frames(file);
        let msgs: Vec<Msg<'_>> = all.iter().flat_map(|p| decode(p)).collect();
        let mut rib = Rib::new();
        rib.apply_batch(&msgs);
        let (_, per_frame) = apply(file);
        let mut a: Vec<_> = rib.routes().map(|(k, _)| k).collect();
        let mut b: Vec<_> = per_frame.routes().map(|(k, _)| k).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b, "{file}");
    }
}
