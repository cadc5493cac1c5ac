use super::*;
use packet::mcast::Record;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

fn g(i: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(239, 1, 0, i))
}

fn key(bridge: u16, i: u8) -> GroupKey {
    GroupKey {
        bridge,
        v6: false,
        group: u128::from(u32::from(Ipv4Addr::new(239, 1, 0, i))),
    }
}

fn members(t: &SnoopTable, k: GroupKey, source: u128) -> Vec<u32> {
    t.with(k, |e| {
        e.map(|e| e.members_for(source).to_vec())
            .unwrap_or_default()
    })
}

fn include(group: IpAddr, sources: &[u32]) -> Record {
    Record {
        kind: RecordKind::IsInclude,
        group,
        sources: sources
            .iter()
            .map(|&s| IpAddr::V4(Ipv4Addr::from(s)))
            .collect(),
    }
}

#[test]
fn joins_are_forwarded_to_at_once_and_leaves_wait_the_last_member_interval() {
    let t = SnoopTable::new(64);
    let s = SnoopSettings::default();
    let now = 1_000;
    for m in [3, 1, 2] {
        let a = t.apply(7, m, false, &[Record::join(g(1))], &s, now);
        assert_eq!(
            a,
            Applied {
                joined: 1,
                refused: 0
            }
        );
    }
    assert_eq!(members(&t, key(7, 1), 99), vec![1, 2, 3]);
    // Another bridge's group of the same address is another entry.
    assert!(members(&t, key(8, 1), 99).is_empty());
    // A leave: member 2 still gets it for the last-member interval, then not.
    t.apply(7, 2, false, &[Record::leave(g(1))], &s, now + 10);
    assert_eq!(members(&t, key(7, 1), 99), vec![1, 2, 3]);
    assert_eq!(t.sweep(now + 10 + s.last_member_ms), 1);
    assert_eq!(members(&t, key(7, 1), 99), vec![1, 3]);
    // Unrefreshed joins age out.
    t.sweep(now + s.membership_ms);
    assert!(t.with(key(7, 1), |e| e.unwrap().is_empty()));
    assert_eq!(t.groups(), 0);
    assert_eq!(t.counters.ended.load(Ordering::Relaxed), 3);
}

#[test]
fn link_scope_groups_are_not_kept() {
    let t = SnoopTable::new(64);
    let s = SnoopSettings::default();
    let groups = ["224.0.0.251", "ff02::1:ff00:2", "ff01::1", "239.1.1.1"];
    let records: Vec<Record> = groups
        .iter()
        .map(|g| Record::join(g.parse().unwrap()))
        .collect();
    let a = t.apply(1, 1, false, &records, &s, 10);
    assert_eq!(a.joined, 1, "only 239.1.1.1");
    assert_eq!(t.groups(), 1);
}

#[test]
fn fast_leave_members_leave_at_once() {
    let t = SnoopTable::new(64);
    let s = SnoopSettings {
        fast_leave: Box::new([5]),
        ..Default::default()
    };
    t.apply(1, 5, false, &[Record::join(g(2))], &s, 10);
    t.apply(1, 6, false, &[Record::join(g(2))], &s, 10);
    t.apply(1, 5, false, &[Record::leave(g(2))], &s, 20);
    t.apply(1, 6, false, &[Record::leave(g(2))], &s, 20);
    assert_eq!(members(&t, key(1, 2), 0), vec![6]);
}

#[test]
fn include_mode_members_get_only_their_sources() {
    let t = SnoopTable::new(64);
    let s = SnoopSettings::default();
    t.apply(1, 1, false, &[include(g(3), &[0x0a00_0001])], &s, 10);
    t.apply(1, 2, false, &[include(g(3), &[0x0a00_0002])], &s, 10);
    t.apply(1, 3, false, &[Record::join(g(3))], &s, 10);
    assert_eq!(members(&t, key(1, 3), 0x0a00_0001), vec![1, 3]);
    assert_eq!(members(&t, key(1, 3), 0x0a00_0002), vec![2, 3]);
    assert_eq!(members(&t, key(1, 3), 0x0a00_0009), vec![3]);
    // Member 1 blocks its source: gone after the last-member interval.
    let block = Record {
        kind: RecordKind::Block,
        ..include(g(3), &[0x0a00_0001])
    };
    t.apply(1, 1, false, &[block], &s, 20);
    t.sweep(20 + s.last_member_ms);
    assert_eq!(members(&t, key(1, 3), 0x0a00_0001), vec![3]);
    assert_eq!(t.groups(), 1);
}

#[test]
fn limits_refuse_new_groups_and_count() {
    let t = SnoopTable::new(64);
    let s = SnoopSettings {
        max_groups: 3,
        max_groups_per_member: 2,
        ..Default::default()
    };
    let mut refused = 0;
    for i in 0..4 {
        refused += t.apply(1, 1, false, &[Record::join(g(i))], &s, 10).refused;
    }
    assert_eq!(refused, 2, "member 1 holds 2 groups at most");
    for i in 0..4 {
        refused += t.apply(1, 2, false, &[Record::join(g(i))], &s, 10).refused;
    }
    // Member 2 joins groups 0 and 1 (already in the bridge) up to its own limit of 2.
    assert_eq!(refused, 4);
    assert_eq!(t.groups(), 2);
    t.apply(1, 3, false, &[Record::join(g(5))], &s, 10);
    assert_eq!(t.groups(), 3);
    // The bridge's limit: a fourth group is refused even to a member under its own.
    assert_eq!(
        t.apply(1, 4, false, &[Record::join(g(6))], &s, 10).refused,
        1
    );
    assert_eq!(t.counters.limit.load(Ordering::Relaxed), 5);
    // A refresh of a group a member holds is never refused.
    assert_eq!(
        t.apply(1, 1, false, &[Record::join(g(0))], &s, 20).refused,
        0
    );
}

#[test]
fn a_full_table_refuses_and_routers_are_learned_and_age() {
    let t = SnoopTable::new(16);
    let s = SnoopSettings::default();
    let mut refused = 0;
    for i in 0..40 {
        refused += t.apply(1, 1, false, &[Record::join(g(i))], &s, 10).refused;
    }
    assert_eq!(refused, 40 - t.capacity() as u32);
    assert_eq!(
        t.counters.table_full.load(Ordering::Relaxed),
        u64::from(refused)
    );
    let t = SnoopTable::new(16);
    t.router_seen(1, 9, &s, 10);
    assert_eq!(members(&t, GroupKey::routers(1), 0), vec![9]);
    t.sweep(10 + s.membership_ms);
    assert!(members(&t, GroupKey::routers(1), 0).is_empty());
}

#[test]
fn clear_ends_a_bridges_memberships_only() {
    let t = SnoopTable::new(64);
    let s = SnoopSettings::default();
    t.apply(1, 1, false, &[Record::join(g(1))], &s, 10);
    t.apply(2, 2, false, &[Record::join(g(1))], &s, 10);
    assert_eq!(t.clear(Some(1)), 1);
    assert!(members(&t, key(1, 1), 0).is_empty());
    assert_eq!(members(&t, key(2, 1), 0), vec![2]);
    assert_eq!(t.view(None).len(), 1);
    assert_eq!(t.groups(), 1);
}

/// One step of the property test.
#[derive(Clone, Debug)]
enum Op {
    Join { member: u32, group: u8 },
    Include { member: u32, group: u8, source: u32 },
    Leave { member: u32, group: u8 },
    Wait(u64),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (0u32..4, 0u8..6).prop_map(|(member, group)| Op::Join { member, group }),
        (0u32..4, 0u8..6, 1u32..4).prop_map(|(member, group, source)| Op::Include {
            member,
            group,
            source
        }),
        (0u32..4, 0u8..6).prop_map(|(member, group)| Op::Leave { member, group }),
        (1u64..3_000).prop_map(Op::Wait),
    ]
}

proptest::proptest! {
    /// The lock-free entries against a plain map of who wants what until when, with a
    /// sweep after every step, on a table small enough to probe past other groups.
    #[test]
    fn entries_match_a_reference(ops in proptest::collection::vec(op(), 1..80)) {
        let t = SnoopTable::new(16);
        let s = SnoopSettings { membership_ms: 5_000, last_member_ms: 1_000, ..Default::default() };
        // (group, member) -> (any until, source -> until)
        let mut r: BTreeMap<(u8, u32), (u64, BTreeMap<u32, u64>)> = BTreeMap::new();
        let mut now = 1u64;
        for o in ops {
            match o {
                Op::Join { member, group } => {
                    t.apply(1, member, false, &[Record::join(g(group))], &s, now);
                    r.entry((group, member)).or_default().0 = now + s.membership_ms;
                }
                Op::Include { member, group, source } => {
                    t.apply(1, member, false, &[include(g(group), &[source])], &s, now);
                    r.entry((group, member)).or_default().1.insert(source, now + s.membership_ms);
                }
                Op::Leave { member, group } => {
                    t.apply(1, member, false, &[Record::leave(g(group))], &s, now);
                    if let Some(m) = r.get_mut(&(group, member)) {
                        let gone = now + s.last_member_ms;
                        if m.0 > now { m.0 = m.0.min(gone); }
                        for v in m.1.values_mut() { *v = (*v).min(gone); }
                    }
                }
                Op::Wait(ms) => now += ms,
            }
            t.sweep(now);
            for group in 0u8..6 {
                for source in 0u32..4 {
                    let want: BTreeSet<u32> = r
                        .iter()
                        .filter(|((gr, _), m)| *gr == group
                            && (m.0 > now || m.1.get(&source).is_some_and(|&u| u > now)))
                        .map(|((_, id), _)| *id)
                        .collect();
                    let got: BTreeSet<u32> =
                        members(&t, key(1, group), u128::from(source)).into_iter().collect();
                    proptest::prop_assert_eq!(&got, &want, "group {} source {} at {}", group, source, now);
                }
            }
            let live = (0u8..6).filter(|gr| r.iter().any(|((x, _), m)| x == gr
                && (m.0 > now || m.1.values().any(|&u| u > now)))).count();
            proptest::prop_assert_eq!(t.groups(), live);
        }
    }
}
