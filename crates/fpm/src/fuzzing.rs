//! The body of the cargo-fuzz target `fuzz/fuzz_targets/fpm.rs`, kept in the crate so that an
//! ordinary test runs the same code on stable Rust. Not part of the API.
//!
//! Bytes go through the whole receive path: [`FrameReader`] (fed in chunks whose size the first
//! byte picks) or, if the first byte's top bit is set, straight to the netlink decoder; every
//! decoded message must re-encode to itself; the [`Rib`] must keep its invariants, and a consumer
//! applying its changes must end up with exactly the routes the RIB holds as installed.

use std::collections::HashMap;

use crate::frame::FrameReader;
use crate::netlink::{decode, encode, messages, Msg};
use crate::rib::{Change, NhSet, NhSetId, Rib, RouteKey};

/// Runs one input; panics on any inconsistency.
pub fn fpm(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let mut rib = Rib::new();
    let mut mirror = Mirror::default();
    let mut apply = |payload: &[u8], rib: &mut Rib| {
        let mut msgs = Vec::new();
        for m in messages(payload) {
            let Ok(m) = m else { break };
            roundtrip(&m);
            msgs.push(m);
        }
        let changes = rib.apply_batch(&msgs);
        mirror.apply(&changes, rib);
        rib.check_invariants();
    };
    if first & 0x80 != 0 {
        apply(rest, &mut rib);
    } else {
        let mut fr = FrameReader::with_capacity(0);
        for piece in rest.chunks(first as usize % 61 + 1) {
            fr.feed(piece);
            while let Ok(Some(p)) = fr.next_frame() {
                let p = p.to_vec();
                apply(&p, &mut rib);
            }
        }
    }
    // A replay that re-sends nothing leaves nothing behind.
    rib.begin_replay();
    let changes = rib.sweep();
    mirror.apply(&changes, &rib);
    rib.check_invariants();
    assert!(rib.is_empty(), "sweep left routes");
    assert!(mirror.routes.is_empty() && mirror.sets.is_empty());
    assert_eq!(rib.counters().sets, 0);
}

/// Encoding a decoded message and decoding it again gives the same message.
pub fn roundtrip(m: &Msg<'_>) {
    if let Msg::Other { .. } = m {
        return;
    }
    let mut buf = Vec::new();
    encode::message(&mut buf, m, 0);
    let (again, used) = decode(&buf).expect("re-encoded message decodes");
    assert_eq!(used, buf.len());
    assert_eq!(&again, m);
}

/// What a consumer of [`Change`]s holds: its routes and sets. Applying changes checks that they
/// make sense in order (sets announced before use, removed after last use, `replaced` telling
/// the truth), and [`Mirror::check`] that the result equals the RIB.
#[derive(Default, Debug)]
pub struct Mirror {
    pub routes: HashMap<RouteKey, NhSetId>,
    pub sets: HashMap<NhSetId, NhSet>,
}

impl Mirror {
    pub fn apply(&mut self, changes: &[Change], rib: &Rib) {
        for c in changes {
            match c {
                Change::SetAdded { id, set } => {
                    assert!(
                        self.sets.insert(*id, set.clone()).is_none(),
                        "{id:?} re-added"
                    );
                }
                Change::Upsert { key, set, replaced } => {
                    assert!(self.sets.contains_key(set), "{set:?} used before added");
                    let had = self.routes.insert(*key, *set);
                    assert_eq!(had.is_some(), *replaced, "replaced flag of {key:?}");
                }
                Change::Removed { key } => {
                    assert!(
                        self.routes.remove(key).is_some(),
                        "{key:?} removed, not held"
                    );
                }
                Change::SetChanged { id, set } => {
                    assert!(
                        self.sets.insert(*id, set.clone()).is_some(),
                        "{id:?} changed before added"
                    );
                }
                Change::SetRemoved { id } => {
                    assert!(self.sets.remove(id).is_some(), "{id:?} removed, not held");
                    assert!(
                        !self.routes.values().any(|s| s == id),
                        "{id:?} removed while in use"
                    );
                }
            }
        }
        self.check(rib);
    }

    /// The mirror holds exactly the RIB's installed routes, with the same set contents.
    pub fn check(&self, rib: &Rib) {
        let installed: HashMap<RouteKey, NhSetId> = rib
            .routes()
            .filter_map(|(k, st)| st.set.map(|s| (k, s)))
            .collect();
        assert_eq!(installed, self.routes);
        for (id, set) in &self.sets {
            assert_eq!(rib.set(*id), Some(set), "content of {id:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use crate::netlink::*;

    #[test]
    fn fpm_inputs() {
        for (name, data) in packet::fuzz_inputs::saved("fpm") {
            eprintln!("{name}");
            super::fpm(&data);
        }
    }

    /// Random bytes, and random mutations of valid zebra-like streams (which get much further
    /// into the decoder than noise does).
    #[test]
    fn fuzz_body_on_random_input() {
        let mut rng = SmallRng::seed_from_u64(0x1f9a);
        let seed = valid_stream();
        for i in 0..4000 {
            let data: Vec<u8> = if i % 4 == 0 {
                let n = rng.gen_range(0..300);
                (0..n).map(|_| rng.gen()).collect()
            } else {
                let mut d = seed.clone();
                for _ in 0..rng.gen_range(0..6) {
                    let at = rng.gen_range(0..d.len());
                    match rng.gen_range(0..3) {
                        0 => d[at] = rng.gen(),
                        1 => d.truncate(at.max(2)),
                        _ => d.insert(at, rng.gen()),
                    }
                }
                d
            };
            super::fpm(&data);
        }
    }

    fn valid_stream() -> Vec<u8> {
        let mut out = vec![7u8];
        let mut scratch = Vec::new();
        let nh = |id, gw: [u8; 4], oif| {
            Msg::Nexthop(Nexthop {
                op: Op::New,
                id,
                family: AF_INET,
                protocol: RTPROT_ZEBRA,
                flags: 0,
                blackhole: false,
                oif,
                gateway: Some(gw.into()),
                group: Members::default(),
                group_type: 0,
                encap: false,
            })
        };
        let group = Msg::Nexthop(Nexthop {
            op: Op::New,
            id: 3,
            family: AF_UNSPEC,
            protocol: RTPROT_ZEBRA,
            flags: 0,
            blackhole: false,
            oif: 0,
            gateway: None,
            group: Members::from_members(&[
                GroupMember { id: 1, weight: 1 },
                GroupMember { id: 2, weight: 3 },
            ]),
            group_type: 0,
            encap: false,
        });
        let route = |p: &str, nh_id, mp: Vec<NextHop>| {
            let prefix: Prefix = p.parse().unwrap();
            Msg::Route(Route {
                op: Op::New,
                replace: true,
                table: RT_TABLE_MAIN,
                prefix,
                rtype: RouteType::Unicast,
                protocol: 196,
                priority: 20,
                nh_id,
                gateway: None,
                oif: 0,
                multipath: Paths::from_hops(prefix.is_ipv4(), &mp),
                encap: false,
            })
        };
        let msgs = [
            nh(1, [10, 0, 0, 2], 3),
            nh(2, [10, 0, 1, 2], 5),
            group,
            route("192.0.2.0/24", 3, vec![]),
            route("2001:db8::/48", 1, vec![]),
            route(
                "198.51.100.0/24",
                0,
                vec![
                    NextHop::new(Some([10, 0, 0, 9].into()), 3),
                    NextHop::new(Some("2001:db8::9".parse().unwrap()), 4),
                ],
            ),
        ];
        for m in &msgs {
            encode::frame(&mut out, &mut scratch, std::slice::from_ref(m), 1).unwrap();
        }
        out
    }
}
