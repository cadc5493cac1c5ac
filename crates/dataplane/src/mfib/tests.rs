use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn key(vrf: u32, source: u128, group: u128) -> MrouteKey {
    MrouteKey {
        vrf,
        v6: false,
        source,
        group,
    }
}

fn oifs(list: &[u32]) -> Vec<Oif> {
    list.iter().map(|&ifx| Oif { ifx, ttl: 1 }).collect()
}

#[test]
fn source_routes_win_over_the_groups_any_source_route() {
    let f = Mfib::new(16, EpochDomain::new());
    let g = 0xe801_0101;
    f.set(key(0, 0, g), 0, oifs(&[1]), Origin::Static).unwrap();
    f.set(key(0, 0x0a00_0002, g), 2, oifs(&[3, 4]), Origin::Kernel)
        .unwrap();
    let iif = |s| f.lookup(key(0, s, g), |r| r.map(|r| r.iif));
    assert_eq!(iif(0x0a00_0002), Some(2), "(S,G)");
    assert_eq!(iif(0x0a00_0009), Some(0), "(*,G) for another source");
    assert!(
        !f.lookup(key(1, 0x0a00_0002, g), |r| r.is_some()),
        "another VRF"
    );
    assert!(f.remove(key(0, 0x0a00_0002, g)));
    assert_eq!(iif(0x0a00_0002), Some(0), "deleted: the (*,G) again");
    assert!(!f.remove(key(0, 0x0a00_0002, g)), "deleted once");
    assert_eq!(f.len(), 1);
}

#[test]
fn counters_carry_over_a_replacement_and_a_delete_and_re_add() {
    let f = Mfib::new(16, EpochDomain::new());
    let k = key(0, 1, 0xe800_0001);
    f.set(k, 0, oifs(&[1]), Origin::Static).unwrap();
    f.with(k, |r| {
        r.unwrap().counters.packets.fetch_add(5, Ordering::Relaxed)
    });
    f.set(k, 0, oifs(&[1, 2]), Origin::Static).unwrap();
    f.remove(k);
    f.set(k, 0, oifs(&[2]), Origin::Static).unwrap();
    let v = f.view();
    assert_eq!((v.len(), v[0].packets, v[0].oifs.len()), (1, 5, 1));
}

#[test]
fn a_full_table_refuses_then_compacts_its_leftovers() {
    let f = Mfib::new(16, EpochDomain::new());
    for g in 0..16 {
        f.set(key(0, 1, 0xe800_0000 + g), 0, oifs(&[1]), Origin::Static)
            .unwrap();
    }
    assert_eq!(
        f.set(key(0, 1, 0xe900_0000), 0, vec![], Origin::Static),
        Err(Full)
    );
    assert_eq!(f.counters.table_full.load(Ordering::Relaxed), 1);
    // Churn: each delete leaves a leftover; the array is made again when they fill it.
    for round in 0..10u128 {
        for g in 0..16 {
            assert!(f.remove(key(0, 1 + round, 0xe800_0000 + g)));
        }
        for g in 0..16 {
            f.set(
                key(0, 2 + round, 0xe800_0000 + g),
                0,
                oifs(&[1]),
                Origin::Static,
            )
            .unwrap();
        }
    }
    assert_eq!(f.len(), 16);
    assert!(f.counters.compactions.load(Ordering::Relaxed) >= 5);
    for g in 0..16 {
        assert!(f.with(key(0, 11, 0xe800_0000 + g), |r| r.is_some()));
    }
}

#[derive(Clone, Debug)]
enum Op {
    Set(u8, u8, u8),
    Remove(u8, u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..6u8, 0..12u8, 0..4u8).prop_map(|(s, g, o)| Op::Set(s, g, o)),
        (0..6u8, 0..12u8).prop_map(|(s, g)| Op::Remove(s, g)),
    ]
}

proptest! {
    /// The FIB answers every lookup, the control plane's and a worker's, as a plain map of its
    /// live routes would, through deletes, replacements, refusals at capacity and compactions
    /// (a 16-route table, 72 keys).
    #[test]
    fn matches_a_map_of_its_live_routes(ops in proptest::collection::vec(op(), 1..300)) {
        let domain = EpochDomain::new();
        let f = Mfib::new(16, domain.clone());
        let mut model: BTreeMap<MrouteKey, u32> = BTreeMap::new();
        for o in ops {
            match o {
                Op::Set(s, g, oif) => {
                    let k = key(0, u128::from(s), 0xe800_0000 + u128::from(g));
                    let full = model.len() >= 16 && !model.contains_key(&k);
                    let r = f.set(k, 0, oifs(&[u32::from(oif)]), Origin::Static);
                    prop_assert_eq!(r.is_err(), full);
                    if !full {
                        model.insert(k, u32::from(oif));
                    }
                }
                Op::Remove(s, g) => {
                    let k = key(0, u128::from(s), 0xe800_0000 + u128::from(g));
                    prop_assert_eq!(f.remove(k), model.remove(&k).is_some());
                }
            }
            prop_assert_eq!(f.len(), model.len());
        }
        let mut reader = domain.register();
        let pinned = f.pin(&mut reader);
        for s in 0..6u128 {
            for g in 0..12u128 {
                let k = key(0, s, 0xe800_0000 + g);
                let got = f.with(k, |r| r.map(|r| r.oifs[0].ifx));
                prop_assert_eq!(got, model.get(&k).copied());
                // A worker's lookup: the (S,G), else the group's (*,G) (source 0).
                let want = model.get(&k).or_else(|| model.get(&k.any_source())).copied();
                prop_assert_eq!(pinned.lookup(k).map(|r| r.oifs[0].ifx), want);
            }
        }
    }
}

#[test]
fn a_worker_reads_while_routes_change_and_what_no_worker_holds_is_freed() {
    use std::sync::atomic::AtomicBool;
    let domain = EpochDomain::new();
    let f = Arc::new(Mfib::new(64, domain.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut rd = domain.register();
    let worker = {
        let (f, stop) = (f.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seen = 0u64;
            while !stop.load(Ordering::Relaxed) {
                rd.quiescent();
                let p = f.pin(&mut rd);
                for g in 0..32u128 {
                    if let Some(r) = p.lookup(key(0, 1, 0xe800_0000 + g)) {
                        // Every version the writer publishes lists v and v + 1: never a mix,
                        // never freed memory.
                        assert_eq!(r.oifs.len(), 2, "{r:?}");
                        assert_eq!(r.oifs[1].ifx, r.oifs[0].ifx + 1, "{r:?}");
                        seen += 1;
                    }
                }
            }
            rd.offline();
            seen
        })
    };
    for v in 0..20_000u32 {
        let k = key(0, 1, 0xe800_0000 + u128::from(v % 32));
        f.set(k, 0, oifs(&[v, v + 1]), Origin::Kernel).unwrap();
        if v % 7 == 0 {
            assert!(f.remove(k));
        }
    }
    stop.store(true, Ordering::Relaxed);
    assert!(worker.join().unwrap() > 0, "the worker found routes");
    // With the worker offline, the next change frees everything retired, itself included.
    f.set(key(0, 1, 0xe800_0000), 0, oifs(&[1, 2]), Origin::Kernel)
        .unwrap();
    assert_eq!(f.retired(), 0);
}

#[test]
#[should_panic(expected = "online reader of its epoch domain")]
fn a_reader_of_another_domain_is_refused() {
    let f = Mfib::new(16, EpochDomain::new());
    let mut other = EpochDomain::new().register();
    let _ = f.pin(&mut other);
}
