//! The RIB against a model that recomputes everything from plain maps: random sequences of
//! batches (encoded and decoded, so the decoder is on the path), replays and sweeps. After every
//! step, a consumer that applied the changes must hold exactly the model's resolved routes.

use std::collections::HashMap;

use proptest::prelude::*;

use super::tests::*;
use super::*;
use crate::fuzzing::Mirror;
use crate::netlink::{decode, encode};

#[derive(Clone, Debug)]
enum MDef {
    Single(NextHop),
    Blackhole,
    Group(Vec<GroupMember>),
}

#[derive(Clone, Debug, PartialEq)]
enum MRoute {
    Nh(u32),
    Set(Option<NhSet>),
}

#[derive(Default)]
struct Model {
    routes: HashMap<RouteKey, (MRoute, bool)>,
    nhs: HashMap<u32, (MDef, bool)>,
}

fn forward(mut hops: Vec<NextHop>) -> Option<NhSet> {
    hops.sort();
    Some(NhSet::Forward(hops.into()))
}

impl Model {
    fn apply(&mut self, m: &Msg<'_>) {
        match m {
            Msg::Route(r) if r.op == Op::Del || r.encap => {
                self.routes.remove(&RouteKey {
                    table: r.table,
                    prefix: r.prefix,
                });
            }
            Msg::Route(r) => {
                let v = match r.rtype {
                    RouteType::Unicast if r.nh_id != 0 => MRoute::Nh(r.nh_id),
                    RouteType::Unicast => {
                        let mut hops: Vec<NextHop> = r.multipath.iter().collect();
                        if hops.is_empty() && (r.gateway.is_some() || r.oif != 0) {
                            hops.push(NextHop::new(r.gateway, r.oif));
                        }
                        MRoute::Set(if hops.is_empty() { None } else { forward(hops) })
                    }
                    RouteType::Blackhole => MRoute::Set(Some(NhSet::Blackhole)),
                    RouteType::Unreachable => MRoute::Set(Some(NhSet::Unreachable)),
                    RouteType::Prohibit => MRoute::Set(Some(NhSet::Prohibit)),
                    RouteType::Other(_) => return,
                };
                let k = RouteKey {
                    table: r.table,
                    prefix: r.prefix,
                };
                self.routes.insert(k, (v, true));
            }
            Msg::Nexthop(n) if n.op == Op::Del || n.encap => self.delete(n.id),
            Msg::Nexthop(n) => {
                let def = if !n.group.is_empty() {
                    MDef::Group(n.group.iter().collect())
                } else if n.blackhole {
                    MDef::Blackhole
                } else {
                    MDef::Single(NextHop::new(n.gateway, n.oif))
                };
                self.nhs.insert(n.id, (def, true));
            }
            Msg::Other { .. } => {}
        }
    }

    /// Linux: routes using it go, groups lose it, empty groups go too.
    fn delete(&mut self, id: u32) {
        let mut work = vec![id];
        while let Some(id) = work.pop() {
            if self.nhs.remove(&id).is_none() {
                continue;
            }
            self.routes.retain(|_, (r, _)| *r != MRoute::Nh(id));
            for (&g, (def, _)) in self.nhs.iter_mut() {
                if let MDef::Group(ms) = def {
                    if ms.iter().any(|m| m.id == id) {
                        ms.retain(|m| m.id != id);
                        if ms.is_empty() {
                            work.push(g);
                        }
                    }
                }
            }
        }
    }

    fn begin_replay(&mut self) {
        self.routes.values_mut().for_each(|v| v.1 = false);
        self.nhs.values_mut().for_each(|v| v.1 = false);
    }

    fn sweep(&mut self) {
        self.routes.retain(|_, v| v.1);
        let stale: Vec<u32> = self.nhs.iter().filter(|v| !v.1 .1).map(|v| *v.0).collect();
        for id in stale {
            self.delete(id);
        }
    }

    fn resolve(&self, r: &MRoute) -> Option<NhSet> {
        let id = match r {
            MRoute::Set(s) => return s.clone(),
            MRoute::Nh(id) => id,
        };
        match &self.nhs.get(id)?.0 {
            MDef::Single(h) => forward(vec![*h]),
            MDef::Blackhole => Some(NhSet::Blackhole),
            MDef::Group(ms) => {
                let mut hops = Vec::new();
                let mut bh = false;
                for m in ms {
                    match self.nhs.get(&m.id).map(|v| &v.0) {
                        Some(MDef::Single(h)) => hops.push(NextHop {
                            weight: m.weight,
                            ..*h
                        }),
                        Some(MDef::Blackhole) => bh = true,
                        _ => {}
                    }
                }
                if !hops.is_empty() {
                    forward(hops)
                } else if bh {
                    Some(NhSet::Blackhole)
                } else {
                    None
                }
            }
        }
    }

    fn check(&self, rib: &Rib, mirror: &Mirror) {
        assert_eq!(rib.len(), self.routes.len(), "routes held");
        let mut want = HashMap::new();
        for (k, (r, _)) in &self.routes {
            if let Some(s) = self.resolve(r) {
                want.insert(*k, s);
            }
        }
        let got: HashMap<RouteKey, NhSet> = mirror
            .routes
            .iter()
            .map(|(k, id)| (*k, mirror.sets[id].clone()))
            .collect();
        assert_eq!(got, want);
        assert_eq!(rib.counters().nexthops as usize, self.nhs.len());
    }
}

#[derive(Clone, Debug)]
pub(super) enum Step {
    Batch(Vec<Msg<'static>>),
    Replay,
    Sweep,
}

const KEYS: [(&str, u32); 6] = [
    ("10.0.0.0/8", 254),
    ("10.1.0.0/16", 254),
    ("10.1.2.0/24", 254),
    ("192.0.2.1/32", 254),
    ("10.0.0.0/8", 1000),
    ("2001:db8::/32", 254),
];

fn a_key() -> impl Strategy<Value = RouteKey> {
    (0..KEYS.len()).prop_map(|i| RouteKey {
        table: KEYS[i].1,
        prefix: KEYS[i].0.parse().unwrap(),
    })
}

fn a_hop() -> impl Strategy<Value = NextHop> {
    (0..3u8, 1..3u32, 1..4u16).prop_map(|(g, oif, weight)| NextHop {
        gateway: (g > 0).then(|| ip(&format!("10.9.0.{g}"))),
        ifindex: oif,
        weight,
    })
}

pub(super) fn a_msg() -> impl Strategy<Value = Msg<'static>> {
    let id = 1..7u32;
    prop_oneof![
        3 => (a_key(), id.clone()).prop_map(|(k, i)| rt_nh(k, i)),
        1 => (a_key(), proptest::collection::vec(a_hop(), 0..3))
            .prop_map(|(k, h)| rt_hops(k, &h)),
        1 => (a_key(), 0..4u8).prop_map(|(k, t)| rt_type(k, [
            RouteType::Blackhole, RouteType::Unreachable, RouteType::Prohibit, RouteType::Other(2)
        ][t as usize])),
        2 => a_key().prop_map(rt_del),
        2 => (id.clone(), 1..3u8, 1..3u32)
            .prop_map(|(i, g, oif)| nh_single(i, Some(ip(&format!("10.9.0.{g}"))), oif)),
        1 => id.clone().prop_map(nh_blackhole),
        2 => (id.clone(), proptest::collection::vec((1..7u32, 1..4u16), 1..4)).prop_map(
            |(i, ms)| {
                let ms: Vec<(u32, u16)> =
                    ms.into_iter().map(|(m, w)| (if m == i { m % 6 + 1 } else { m }, w)).collect();
                nh_group(i, &ms)
            }
        ),
        1 => id.clone().prop_map(nh_del),
        // Labelled, as zebra replays routes the kernel refused: never installed.
        1 => (a_key(), id.clone()).prop_map(|(k, i)| labelled(rt_nh(k, i))),
        1 => (id, 1..3u32).prop_map(|(i, oif)| labelled(nh_single(i, Some(ip("10.9.0.1")), oif))),
    ]
}

fn labelled(mut m: Msg<'static>) -> Msg<'static> {
    match &mut m {
        Msg::Route(r) => r.encap = true,
        Msg::Nexthop(n) => n.encap = true,
        Msg::Other { .. } => {}
    }
    m
}

fn a_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => proptest::collection::vec(a_msg(), 1..8).prop_map(Step::Batch),
        1 => Just(Step::Replay),
        1 => Just(Step::Sweep),
    ]
}

/// Through the wire: encode and decode again, as the server would deliver it.
fn via_wire(msgs: &[Msg<'_>]) -> Vec<u8> {
    let mut b = Vec::new();
    for m in msgs {
        encode::message(&mut b, m, 1);
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn rib_matches_the_model(steps in proptest::collection::vec(a_step(), 1..30)) {
        let mut rib = Rib::new();
        let mut mirror = Mirror::default();
        let mut model = Model::default();
        for step in &steps {
            let changes = match step {
                Step::Batch(msgs) => {
                    let wire = via_wire(msgs);
                    let mut decoded = Vec::new();
                    let mut rest = &wire[..];
                    while !rest.is_empty() {
                        let (m, used) = decode(rest).unwrap();
                        decoded.push(m);
                        rest = &rest[used..];
                    }
                    prop_assert_eq!(&decoded, msgs);
                    decoded.iter().for_each(|m| model.apply(m));
                    rib.apply_batch(&decoded)
                }
                Step::Replay => {
                    rib.begin_replay();
                    model.begin_replay();
                    Vec::new()
                }
                Step::Sweep => {
                    model.sweep();
                    rib.sweep()
                }
            };
            mirror.apply(&changes, &rib);
            rib.check_invariants();
            model.check(&rib, &mirror);
        }
    }
}
