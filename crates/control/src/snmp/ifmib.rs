//! IF-MIB (RFC 2863) as the subagent serves it: one row per interface of the config, ifIndex
//! its position + 1 (the numbers NetFlow/IPFIX records carry, so a collector's interfaces and
//! the MIB's agree), ifNumber, the ifTable and ifXTable columns the data plane counts, and the
//! Get, GetNext and GetBulk walks over them. A pure view, built afresh for each request from
//! [`IfRow`]s, so a walk sees counters as they are.
//!
//! What is served: ifIndex, ifDescr, ifType (ethernetCsmacd; l2vlan for a VLAN sub-interface;
//! propVirtual for a BVI), ifMtu, ifSpeed (when the device says it), ifPhysAddress,
//! ifAdminStatus, ifOperStatus, ifInOctets, ifInUcastPkts, ifInErrors, ifOutOctets,
//! ifOutUcastPkts; ifName, ifHCInOctets, ifHCInUcastPkts, ifHCOutOctets, ifHCOutUcastPkts,
//! ifHighSpeed (when known). What is not: the data plane counts per port, so an interface
//! alone on its port has the port's counters and one that shares its port (VLAN
//! sub-interfaces) has none; it does not count unicast apart from multicast and broadcast, so
//! the Ucast columns carry every packet. What is not counted (those interfaces' counters,
//! discards, unknown protocols, multicast and broadcast) is absent, not zero: a walk skips it
//! and a Get says noSuchInstance or noSuchObject.

use packet::agentx::request::{Answer, Request, SearchRange};
use packet::agentx::Value;

/// `interfaces` (1.3.6.1.2.1.2) and `ifXTable` (1.3.6.1.2.1.31.1.1): the subtrees registered.
pub const INTERFACES: &[u32] = &[1, 3, 6, 1, 2, 1, 2];
pub const IF_X_TABLE: &[u32] = &[1, 3, 6, 1, 2, 1, 31, 1, 1];

const IF_ENTRY: &[u32] = &[1, 3, 6, 1, 2, 1, 2, 2, 1];
const IF_X_ENTRY: &[u32] = &[1, 3, 6, 1, 2, 1, 31, 1, 1, 1];

/// At most this many varbinds in one GetBulk answer (snmpd caps what it asks for anyway).
const MAX_BULK: usize = 2048;

/// One interface as IF-MIB sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IfRow {
    /// ifIndex: the interface's position in the config + 1.
    pub index: u32,
    pub name: String,
    /// What ifDescr says: the name, its port and the port's driver.
    pub descr: String,
    /// ifType (IANAifType): 6 ethernetCsmacd, 135 l2vlan, 53 propVirtual.
    pub if_type: i32,
    pub mtu: u32,
    /// Bits per second, when the device says (AF_PACKET/AF_XDP on a NIC).
    pub speed_bps: Option<u64>,
    pub mac: [u8; 6],
    pub admin_up: bool,
    pub oper_up: bool,
    /// Its port's counters, when it is alone on its port.
    pub counters: Option<IfCounters>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IfCounters {
    pub in_octets: u64,
    pub in_pkts: u64,
    pub in_errors: u64,
    pub out_octets: u64,
    pub out_pkts: u64,
}

/// The MIB objects in OID order.
pub struct View {
    entries: Vec<(Vec<u32>, Value)>,
}

fn oid(base: &[u32], tail: &[u32]) -> Vec<u32> {
    let mut v = base.to_vec();
    v.extend_from_slice(tail);
    v
}

impl View {
    pub fn of(rows: &[IfRow]) -> View {
        let mut e: Vec<(Vec<u32>, Value)> =
            vec![(oid(INTERFACES, &[1, 0]), Value::Integer(rows.len() as i32))];
        let status = |up: bool| Value::Integer(if up { 1 } else { 2 });
        for r in rows {
            let i = r.index;
            let mut col = |base: &[u32], c: u32, v: Value| e.push((oid(base, &[c, i]), v));
            col(IF_ENTRY, 1, Value::Integer(i as i32));
            col(
                IF_ENTRY,
                2,
                Value::OctetString(r.descr.clone().into_bytes()),
            );
            col(IF_ENTRY, 3, Value::Integer(r.if_type));
            col(IF_ENTRY, 4, Value::Integer(r.mtu as i32));
            if let Some(s) = r.speed_bps {
                col(
                    IF_ENTRY,
                    5,
                    Value::Gauge32(s.min(u64::from(u32::MAX)) as u32),
                );
            }
            col(IF_ENTRY, 6, Value::OctetString(r.mac.to_vec()));
            col(IF_ENTRY, 7, status(r.admin_up));
            col(IF_ENTRY, 8, status(r.oper_up));
            if let Some(c) = &r.counters {
                // Counter32 columns wrap, as the MIB says they do.
                col(IF_ENTRY, 10, Value::Counter32(c.in_octets as u32));
                col(IF_ENTRY, 11, Value::Counter32(c.in_pkts as u32));
                col(IF_ENTRY, 14, Value::Counter32(c.in_errors as u32));
                col(IF_ENTRY, 16, Value::Counter32(c.out_octets as u32));
                col(IF_ENTRY, 17, Value::Counter32(c.out_pkts as u32));
            }
            col(
                IF_X_ENTRY,
                1,
                Value::OctetString(r.name.clone().into_bytes()),
            );
            if let Some(c) = &r.counters {
                col(IF_X_ENTRY, 6, Value::Counter64(c.in_octets));
                col(IF_X_ENTRY, 7, Value::Counter64(c.in_pkts));
                col(IF_X_ENTRY, 10, Value::Counter64(c.out_octets));
                col(IF_X_ENTRY, 11, Value::Counter64(c.out_pkts));
            }
            if let Some(s) = r.speed_bps {
                col(IF_X_ENTRY, 15, Value::Gauge32((s / 1_000_000) as u32));
            }
        }
        // Rows were pushed column by column per row; the MIB's order is row within column.
        e.sort_by(|a, b| a.0.cmp(&b.0));
        View { entries: e }
    }

    /// The value of exactly `name`, or why there is none (an object of a column we serve,
    /// absent for that index: noSuchInstance; anything else: noSuchObject).
    pub fn get(&self, name: &[u32]) -> Answer {
        match self
            .entries
            .binary_search_by(|(o, _)| o.as_slice().cmp(name))
        {
            Ok(i) => Answer::Value(self.entries[i].1.clone()),
            Err(_) => {
                let column = |o: &[u32]| {
                    o.len() > 1 && name.len() > 1 && o[..o.len() - 1] == name[..name.len() - 1]
                };
                let known = self.entries.iter().any(|(o, _)| column(o));
                if known {
                    Answer::NoSuchInstance
                } else {
                    Answer::NoSuchObject
                }
            }
        }
    }

    /// The first object after `start` (or at it, with `include`) and before `end` (if not
    /// empty).
    pub fn next(&self, start: &[u32], include: bool, end: &[u32]) -> Option<(&[u32], &Value)> {
        let i = self
            .entries
            .partition_point(|(o, _)| o.as_slice() < start || (!include && o.as_slice() == start));
        let (o, v) = self.entries.get(i)?;
        (end.is_empty() || o.as_slice() < end).then_some((o.as_slice(), v))
    }

    fn next_answer(&self, r: &SearchRange) -> (Vec<u32>, Answer) {
        match self.next(&r.start, r.include, &r.end) {
            Some((o, v)) => (o.to_vec(), Answer::Value(v.clone())),
            None => (r.start.clone(), Answer::EndOfMibView),
        }
    }

    /// The varbinds answering `req` (RFC 2741 7.2.3); None for a set, which a read-only
    /// subagent refuses.
    pub fn answer(&self, req: &Request) -> Option<Vec<(Vec<u32>, Answer)>> {
        Some(match req {
            Request::Get(ranges) => ranges
                .iter()
                .map(|r| (r.start.clone(), self.get(&r.start)))
                .collect(),
            Request::GetNext(ranges) => ranges.iter().map(|r| self.next_answer(r)).collect(),
            Request::GetBulk {
                non_repeaters,
                max_repetitions,
                ranges,
            } => {
                let n = (*non_repeaters as usize).min(ranges.len());
                let mut out: Vec<_> = ranges[..n].iter().map(|r| self.next_answer(r)).collect();
                let mut cur: Vec<SearchRange> = ranges[n..].to_vec();
                for _ in 0..*max_repetitions {
                    if cur.is_empty() || out.len() + cur.len() > MAX_BULK {
                        break;
                    }
                    let mut all_end = true;
                    for r in cur.iter_mut() {
                        let (o, a) = self.next_answer(r);
                        all_end &= a == Answer::EndOfMibView;
                        // The next repetition goes on after what this one found.
                        r.start = o.clone();
                        r.include = false;
                        out.push((o, a));
                    }
                    if all_end {
                        break;
                    }
                }
                out
            }
            Request::TestSet | Request::OtherSet(_) => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn row(i: u32, pkts: u64) -> IfRow {
        IfRow {
            index: i,
            name: format!("p{i}"),
            descr: format!("p{i} (port p{i}, shm)"),
            if_type: 6,
            mtu: 1500,
            speed_bps: (i == 1).then_some(10_000_000_000),
            mac: [2, 0, 0, 0, 0, i as u8],
            admin_up: true,
            oper_up: i != 2,
            // The third shares its port: no counters.
            counters: (i != 3).then_some(IfCounters {
                in_octets: pkts * 64 + (1 << 32),
                in_pkts: pkts,
                out_octets: pkts * 60,
                out_pkts: pkts,
                ..Default::default()
            }),
        }
    }

    fn walk(v: &View, from: &[u32]) -> Vec<Vec<u32>> {
        let mut at = from.to_vec();
        let mut out = Vec::new();
        while let Some((o, _)) = v.next(&at, false, &[]) {
            at = o.to_vec();
            out.push(at.clone());
        }
        out
    }

    #[test]
    fn a_walk_goes_column_by_column_row_within_column() {
        let v = View::of(&[row(1, 10), row(2, 20)]);
        let w = walk(&v, INTERFACES);
        assert_eq!(w[0], oid(INTERFACES, &[1, 0]), "ifNumber first");
        assert_eq!(w[1], oid(IF_ENTRY, &[1, 1]));
        assert_eq!(w[2], oid(IF_ENTRY, &[1, 2]));
        assert_eq!(w[3], oid(IF_ENTRY, &[2, 1]));
        // ifSpeed only for the port that knows it.
        assert!(w.contains(&oid(IF_ENTRY, &[5, 1])) && !w.contains(&oid(IF_ENTRY, &[5, 2])));
        assert!(w.windows(2).all(|p| p[0] < p[1]));
        assert_eq!(
            v.get(&oid(INTERFACES, &[1, 0])),
            Answer::Value(Value::Integer(2))
        );
        assert_eq!(
            v.get(&oid(IF_ENTRY, &[8, 2])),
            Answer::Value(Value::Integer(2)),
            "p2 down"
        );
        // Counter32 wraps; the HC column does not.
        assert_eq!(
            v.get(&oid(IF_ENTRY, &[10, 1])),
            Answer::Value(Value::Counter32(640))
        );
        assert_eq!(
            v.get(&oid(IF_X_ENTRY, &[6, 1])),
            Answer::Value(Value::Counter64(640 + (1 << 32)))
        );
        assert_eq!(v.get(&oid(IF_ENTRY, &[5, 2])), Answer::NoSuchInstance);
        assert_eq!(
            v.get(&oid(IF_ENTRY, &[13, 1])),
            Answer::NoSuchObject,
            "discards: not counted"
        );
        assert_eq!(v.get(&oid(IF_ENTRY, &[1, 9])), Answer::NoSuchInstance);
        // An interface sharing its port has no counters: absent, not zero.
        let v = View::of(&[row(1, 10), row(3, 30)]);
        assert_eq!(v.get(&oid(IF_X_ENTRY, &[6, 3])), Answer::NoSuchInstance);
        assert_eq!(
            v.next(&oid(IF_X_ENTRY, &[6, 1]), false, &[]).unwrap().0,
            oid(IF_X_ENTRY, &[7, 1]).as_slice()
        );
    }

    #[test]
    fn getbulk_repeats_after_what_it_found_and_stops_at_the_end() {
        let v = View::of(&[row(1, 10), row(2, 20)]);
        let r = |start: Vec<u32>| SearchRange {
            start,
            include: false,
            end: Vec::new(),
        };
        let a = v
            .answer(&Request::GetBulk {
                non_repeaters: 1,
                max_repetitions: 3,
                ranges: vec![r(oid(INTERFACES, &[1])), r(oid(IF_ENTRY, &[2]))],
            })
            .unwrap();
        let names: Vec<Vec<u32>> = a.iter().map(|x| x.0.clone()).collect();
        assert_eq!(
            names,
            vec![
                oid(INTERFACES, &[1, 0]),
                oid(IF_ENTRY, &[2, 1]),
                oid(IF_ENTRY, &[2, 2]),
                oid(IF_ENTRY, &[3, 1]),
            ]
        );
        // Past the last object: endOfMibView, and the repetitions stop.
        let last = walk(&v, IF_X_TABLE).pop().unwrap();
        let a = v
            .answer(&Request::GetBulk {
                non_repeaters: 0,
                max_repetitions: 50,
                ranges: vec![r(last.clone())],
            })
            .unwrap();
        assert_eq!(a, vec![(last, Answer::EndOfMibView)]);
        assert!(v.answer(&Request::TestSet).is_none());
    }

    proptest! {
        /// next() against a linear scan, for any start, include flag and end.
        #[test]
        fn next_is_the_first_object_in_range(
            n in 0u32..4,
            start in proptest::collection::vec(0u32..20, 0..12),
            include in any::<bool>(),
            end in proptest::collection::vec(0u32..20, 0..12),
        ) {
            let rows: Vec<IfRow> = (1..=n).map(|i| row(i, u64::from(i) * 7)).collect();
            let v = View::of(&rows);
            let mut start = start;
            if start.len() > 3 { start[..4].copy_from_slice(&[1, 3, 6, 1]); }
            let want = v.entries.iter().find(|(o, _)| {
                (o.as_slice() > start.as_slice() || (include && o.as_slice() == start.as_slice()))
                    && (end.is_empty() || o.as_slice() < end.as_slice())
            }).map(|(o, _)| o.clone());
            prop_assert_eq!(v.next(&start, include, &end).map(|(o, _)| o.to_vec()), want);
        }
    }
}
