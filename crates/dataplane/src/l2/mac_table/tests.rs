use std::collections::HashMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;

fn key(bridge: u16, n: u32) -> MacKey {
    let b = n.to_be_bytes();
    // A locally administered unicast MAC per n.
    MacKey::new(bridge, [0x02, 0x00, b[0], b[1], b[2], b[3]])
}

#[test]
fn keys_pack_the_bridge_and_the_mac() {
    let k = MacKey::new(7, [0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
    assert_eq!(k.bridge(), 7);
    assert_eq!(k.mac(), [0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
    assert!(k.learnable());
    assert!(!MacKey::new(7, [0x01, 0, 0x5e, 0, 0, 1]).learnable());
    assert!(!MacKey::new(7, [0xff; 6]).learnable());
    assert!(!MacKey::new(7, [0; 6]).learnable());
}

#[test]
fn learn_refresh_move_flap_and_lookup() {
    let t = MacTable::new(1000);
    let k = key(1, 1);
    assert_eq!(t.lookup(k), None);
    assert_eq!(t.learn(k, 3, 10), Learn::Learned);
    assert_eq!(t.lookup(k), Some(3));
    assert_eq!(t.lookup(key(2, 1)), None, "another bridge domain");
    assert_eq!(t.learn(k, 3, 10), Learn::Known);
    assert_eq!(t.learn(k, 3, 11), Learn::Refreshed);
    // A move in the second it was last seen is a flap; a second later it moves.
    assert_eq!(t.learn(k, 4, 11), Learn::NotLearned(NotLearned::Flap));
    assert_eq!(t.lookup(k), Some(3));
    assert_eq!(t.learn(k, 4, 12), Learn::Moved { from: 3 });
    assert_eq!(t.lookup(k), Some(4));
    assert_eq!(t.learn(k, 3, 12), Learn::NotLearned(NotLearned::Flap));
    assert_eq!(
        t.learn(MacKey::new(1, [1, 0, 0, 0, 0, 1]), 3, 12),
        Learn::NotLearned(NotLearned::NotUnicast)
    );
    let c = &t.counters;
    assert_eq!(
        [&c.learned, &c.moved, &c.flaps, &c.not_unicast].map(|x| x.load(Ordering::Relaxed)),
        [1, 1, 2, 1]
    );
    assert_eq!((t.len(), t.bridge_len(1)), (1, 1));
}

#[test]
fn static_entries_neither_age_nor_move() {
    let t = MacTable::new(100);
    let k = key(1, 9);
    t.set_static(k, 5).unwrap();
    assert_eq!(t.learn(k, 6, 100), Learn::NotLearned(NotLearned::Static));
    assert_eq!(t.learn(k, 5, 100), Learn::Known);
    assert_eq!(t.age(0..t.buckets(), 1_000_000, |_| 300), 0);
    assert_eq!(t.lookup(k), Some(5));
    assert_eq!(t.clear(false, |_| true), 0, "clear keeps static entries");
    assert_eq!(t.clear(true, |e| e.member == 5), 1);
    assert_eq!(t.lookup(k), None);
}

#[test]
fn aging_per_bridge_domain_and_the_wrap_of_seconds() {
    let t = MacTable::new(100);
    t.learn(key(1, 1), 1, 100);
    t.learn(key(2, 1), 1, 100);
    t.learn(key(1, 2), 1, 350);
    // Bridge 1 ages at 300 s, bridge 2 never.
    let aging = |b: u16| if b == 1 { 300 } else { 0 };
    assert_eq!(t.age(0..t.buckets(), 399, aging), 0);
    assert_eq!(t.age(0..t.buckets(), 400, aging), 1);
    assert_eq!(t.lookup(key(1, 1)), None);
    assert_eq!(t.lookup(key(2, 1)), Some(1));
    assert_eq!(t.lookup(key(1, 2)), Some(1));
    assert_eq!(t.counters.aged.load(Ordering::Relaxed), 1);
    // Seconds are kept in 24 bits: an entry stamped just before the wrap ages after it.
    let w = (1u32 << 24) - 10;
    t.learn(key(3, 1), 1, w);
    let aging = |b: u16| if b == 3 { 20 } else { 0 };
    assert_eq!(t.age(0..t.buckets(), w + 19, aging), 0);
    assert_eq!(t.age(0..t.buckets(), w + 20, aging), 1);
    // A sweep that read the clock just before a worker stamped an entry in the next second
    // sees the stamp ahead of its `now`: that entry is fresh, not 2^24 - 1 seconds old.
    t.learn(key(3, 2), 1, 501);
    assert_eq!(t.age(0..t.buckets(), 500, aging), 0);
    assert_eq!(t.lookup(key(3, 2)), Some(1));
}

#[test]
fn a_learn_limit_stops_learning_in_its_bridge_domain_only() {
    let t = MacTable::new(10_000);
    t.set_limit(1, 100);
    let mut refused = 0;
    for i in 0..300 {
        if t.learn(key(1, i), 1, 5) == Learn::NotLearned(NotLearned::Limit) {
            refused += 1;
        }
        t.learn(key(2, i), 1, 5);
    }
    assert_eq!((t.bridge_len(1), refused), (100, 200));
    assert_eq!(t.bridge_len(2), 300);
    assert_eq!(t.counters.limit.load(Ordering::Relaxed), 200);
    // A known address still refreshes at the limit.
    assert_eq!(t.learn(key(1, 0), 1, 6), Learn::Refreshed);
}

#[test]
fn the_table_fills_past_its_capacity_before_refusing_and_never_evicts() {
    let cap = 100_000;
    let t = MacTable::new(cap);
    let mut first_full = None;
    for i in 0..(t.slots() as u32) {
        if t.learn(key(1, i), 1, 1) == Learn::NotLearned(NotLearned::TableFull) {
            first_full.get_or_insert(i);
        }
    }
    let first_full = first_full.expect("a full table refuses") as usize;
    let load = first_full as f64 / t.slots() as f64;
    eprintln!(
        "first refusal at {first_full} of {} slots ({:.1}% full); {} entries at the end ({:.1}%); {} bytes, {:.1} per capacity entry",
        t.slots(),
        load * 100.0,
        t.len(),
        t.len() as f64 * 100.0 / t.slots() as f64,
        t.bytes(),
        t.bytes() as f64 / cap as f64
    );
    assert!(
        first_full >= cap,
        "capacity {cap} holds: first refusal at {first_full}"
    );
    // Nothing learned before is lost to what came after.
    for i in 0..cap as u32 {
        assert!(t.lookup(key(1, i)).is_some(), "{i} evicted");
    }
}

#[test]
fn two_workers_learning_see_each_others_addresses_and_never_duplicate() {
    let t = Arc::new(MacTable::new(200_000));
    let n = 50_000u32;
    // Both learn the same addresses (on their own members) and their own.
    let threads: Vec<_> = (0..2u32)
        .map(|w| {
            let t = t.clone();
            std::thread::spawn(move || {
                for i in 0..n {
                    t.learn(key(1, i), 1, 1);
                    t.learn(key(2, i * 2 + w), w, 1);
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    let entries = t.entries(1);
    let mut keys: Vec<_> = entries.iter().map(|e| e.key).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), entries.len(), "a key in two slots");
    assert_eq!(t.len(), entries.len());
    assert_eq!(t.len() as u32, 3 * n);
    assert_eq!(t.bridge_len(1), n);
    for i in 0..2 * n {
        assert_eq!(t.lookup(key(2, i)), Some(i % 2));
    }
}

#[test]
fn a_lookup_during_learning_elsewhere_finds_what_was_learned_before_it() {
    let t = Arc::new(MacTable::new(100_000));
    for i in 0..10_000 {
        t.learn(key(1, i), 7, 1);
    }
    let writer = {
        let t = t.clone();
        std::thread::spawn(move || {
            for i in 10_000..60_000 {
                t.learn(key(1, i), 8, 1);
            }
            t.age(0..t.buckets(), 2, |b| u32::from(b == 2));
        })
    };
    for round in 0..20 {
        for i in (round..10_000).step_by(7) {
            assert_eq!(t.lookup(key(1, i)), Some(7));
        }
    }
    writer.join().unwrap();
}

/// The model: a map and the rules, without slots.
#[derive(Default)]
struct Model {
    map: HashMap<MacKey, (u32, bool, u32)>,
    limits: HashMap<u16, u32>,
}

impl Model {
    fn learn(&mut self, k: MacKey, m: u32, now: u32) -> Learn {
        if !k.learnable() {
            return Learn::NotLearned(NotLearned::NotUnicast);
        }
        let count = self.map.keys().filter(|x| x.bridge() == k.bridge()).count() as u32;
        let limit = self.limits.get(&k.bridge()).copied().unwrap_or(0);
        match self.map.get_mut(&k) {
            None if limit != 0 && count >= limit => Learn::NotLearned(NotLearned::Limit),
            None => {
                self.map.insert(k, (m, false, now));
                Learn::Learned
            }
            Some(e) if e.1 && e.0 != m => Learn::NotLearned(NotLearned::Static),
            Some(e) if e.1 => Learn::Known,
            Some(e) if e.0 == m && e.2 == now => Learn::Known,
            Some(e) if e.0 == m => {
                e.2 = now;
                Learn::Refreshed
            }
            Some(e) if e.2 == now => Learn::NotLearned(NotLearned::Flap),
            Some(e) => {
                let from = e.0;
                *e = (m, false, now);
                Learn::Moved { from }
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Learn(u16, u32, u32),
    Static(u16, u32, u32),
    Lookup(u16, u32),
    Tick(u32),
    Age(u32),
    ClearMember(u32),
    Limit(u16, u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..3u16, 0..40u32, 0..4u32).prop_map(|(b, k, m)| Op::Learn(b, k, m)),
        1 => (0..3u16, 0..40u32, 0..4u32).prop_map(|(b, k, m)| Op::Static(b, k, m)),
        4 => (0..3u16, 0..40u32).prop_map(|(b, k)| Op::Lookup(b, k)),
        2 => (1..5u32).prop_map(Op::Tick),
        1 => (1..8u32).prop_map(Op::Age),
        1 => (0..4u32).prop_map(Op::ClearMember),
        1 => (0..3u16, 0..20u32).prop_map(|(b, l)| Op::Limit(b, l)),
    ]
}

proptest! {
    #[test]
    fn the_table_agrees_with_a_map(ops in proptest::collection::vec(op(), 1..300)) {
        let t = MacTable::new(4096);
        let mut m = Model::default();
        let mut now = 1u32;
        for o in ops {
            match o {
                Op::Learn(b, k, mem) => {
                    prop_assert_eq!(t.learn(key(b, k), mem, now), m.learn(key(b, k), mem, now));
                }
                Op::Static(b, k, mem) => {
                    t.set_static(key(b, k), mem).unwrap();
                    m.map.insert(key(b, k), (mem, true, 0));
                }
                Op::Lookup(b, k) => {
                    prop_assert_eq!(t.lookup(key(b, k)), m.map.get(&key(b, k)).map(|e| e.0));
                }
                Op::Tick(d) => now += d,
                Op::Age(limit) => {
                    let before = m.map.len();
                    m.map.retain(|_, e| e.1 || now - e.2 < limit);
                    prop_assert_eq!(t.age(0..t.buckets(), now, |_| limit), before - m.map.len());
                }
                Op::ClearMember(mem) => {
                    let before = m.map.len();
                    m.map.retain(|_, e| e.1 || e.0 != mem);
                    prop_assert_eq!(t.clear(false, |e| e.member == mem), before - m.map.len());
                }
                Op::Limit(b, l) => {
                    t.set_limit(b, l);
                    m.limits.insert(b, l);
                }
            }
            prop_assert_eq!(t.len(), m.map.len());
        }
        let mut got: Vec<_> = t.entries(now).into_iter().map(|e| (e.key, e.member, e.fixed)).collect();
        got.sort();
        let mut want: Vec<_> = m.map.iter().map(|(k, e)| (*k, e.0, e.1)).collect();
        want.sort();
        prop_assert_eq!(got, want);
    }
}

#[test]
fn a_vector_learns_and_looks_up_as_one_frame_at_a_time_does() {
    let single = MacTable::new(2000);
    let batch = MacTable::new(2000);
    // Repeats (a refresh and a flap within the vector), a multicast source, a move.
    let keys: Vec<MacKey> = (0..600u32)
        .map(|i| key(1, i % 500))
        .chain([MacKey::new(1, [1, 0, 0, 0, 0, 9])])
        .collect();
    let members: Vec<u32> = (0..keys.len() as u32).map(|i| i / 500).collect();
    for now in [1, 2] {
        let want: Vec<Learn> = keys
            .iter()
            .zip(&members)
            .map(|(&k, &m)| single.learn(k, m + now, now))
            .collect();
        let mut got = vec![Learn::Known; keys.len()];
        batch.learn_batch(
            &keys,
            &members.iter().map(|m| m + now).collect::<Vec<_>>(),
            now,
            &mut got,
        );
        assert_eq!(got, want, "second {now}");
    }
    let probe: Vec<MacKey> = (0..700u32).map(|i| key(1, i)).collect();
    let mut out = vec![None; probe.len()];
    batch.lookup_batch(&probe, &mut out);
    let want: Vec<Option<u32>> = probe.iter().map(|&k| single.lookup(k)).collect();
    assert_eq!(out, want);
    assert_eq!(out.iter().filter(|x| x.is_some()).count(), 500);
}

#[test]
fn learning_into_a_nearly_full_table_from_two_workers_moves_entries_without_losing_any() {
    // Sized so that the last inserts need cuckoo moves, while two workers insert and a third
    // looks up addresses learned before: none may be missed while it moves.
    let cap = 40_000u32;
    let t = Arc::new(MacTable::new(cap as usize));
    let early = 2_000u32;
    for i in 0..early {
        t.learn(key(9, i), 5, 1);
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (t, stop) = (t.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rounds = 0;
            while !stop.load(Ordering::Relaxed) {
                for i in 0..early {
                    assert_eq!(t.lookup(key(9, i)), Some(5), "{i} missed while moving");
                }
                rounds += 1;
            }
            rounds
        })
    };
    let writers: Vec<_> = (0..2u32)
        .map(|w| {
            let t = t.clone();
            std::thread::spawn(move || {
                let mut learned = 0;
                for i in 0..(cap - early) / 2 {
                    if t.learn(key(1, i * 2 + w), w, 1) == Learn::Learned {
                        learned += 1;
                    }
                }
                learned
            })
        })
        .collect();
    let learned: u32 = writers.into_iter().map(|h| h.join().unwrap()).sum();
    stop.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    assert_eq!(learned, cap - early, "the capacity holds");
    let entries = t.entries(1);
    let mut keys: Vec<_> = entries.iter().map(|e| e.key).collect();
    keys.sort();
    keys.dedup();
    assert_eq!((keys.len(), t.len()), (entries.len(), cap as usize));
    for i in 0..cap - early {
        assert_eq!(t.lookup(key(1, i)), Some(i % 2));
    }
}
