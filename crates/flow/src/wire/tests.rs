use super::*;
use crate::decode::Collector;
use crate::{Direction, EndReason, FlowKey};
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};

const MS: u64 = 1_000_000;
/// 2024-01-01T00:00:00Z, plus a few ms so ms and s rounding both show.
const CLOCK: Clock = Clock {
    boot_unix_ns: 1_704_067_200_000_000_000 + 250 * MS,
};

fn rec4() -> FlowRecord {
    FlowRecord {
        key: FlowKey::v4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(192, 0, 2, 9),
            1234,
            80,
            6,
            0x28,
            3,
            Direction::Ingress,
        ),
        out_if: 4,
        packets: 5,
        bytes: 3000,
        first_ns: 1_000 * MS,
        last_ns: 2_500 * MS,
        tcp_flags: 0x1b,
        end: EndReason::EndOfFlow,
    }
}

fn rec6() -> FlowRecord {
    FlowRecord {
        key: FlowKey::v6(
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
            Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2),
            5353,
            53,
            17,
            0,
            7,
            Direction::Egress,
        ),
        out_if: 8,
        packets: 1,
        bytes: 120,
        first_ns: 3_000 * MS,
        last_ns: 3_000 * MS,
        tcp_flags: 0,
        end: EndReason::IdleTimeout,
    }
}

fn msg<'a>(templates: Option<&'a Options>, records: &'a [FlowRecord]) -> Message<'a> {
    Message {
        domain_id: 0x0102_0304,
        clock: CLOCK,
        sequence: 77,
        now_ns: 5_000 * MS,
        templates,
        records,
    }
}

#[test]
fn template_lengths() {
    assert_eq!(template_len(V9_V4), 48);
    assert_eq!(template_len(V9_V6), 72);
    assert_eq!(template_len(IPFIX_V4), 57);
    assert_eq!(template_len(IPFIX_V6), 81);
    assert_eq!(Builder::min_mtu(Version::V9), 20 + 4 + 72);
    assert_eq!(Builder::min_mtu(Version::Ipfix), 16 + 4 + 84);
}

#[test]
fn v9_header_bytes() {
    let b = encode_v9(&msg(None, &[]));
    let unix = (CLOCK.boot_unix_ns / 1_000_000_000 + 5) as u32;
    // sysUptime for the whole second of unix_secs: 5.25 s after boot, that second began at
    // 4.75 s of uptime.
    let mut want = vec![0, 9, 0, 0, 0, 0, 0x12, 0x8e];
    want.extend_from_slice(&unix.to_be_bytes());
    want.extend_from_slice(&[0, 0, 0, 77, 1, 2, 3, 4]);
    assert_eq!(b, want);
}

#[test]
fn ipfix_header_bytes() {
    let b = encode_ipfix(&msg(None, &[]));
    let unix = (CLOCK.boot_unix_ns / 1_000_000_000 + 5) as u32;
    let mut want = vec![0, 10, 0, 16];
    want.extend_from_slice(&unix.to_be_bytes());
    want.extend_from_slice(&[0, 0, 0, 77, 1, 2, 3, 4]);
    assert_eq!(b, want);
}

#[test]
fn v9_template_set_bytes() {
    let b = encode_v9(&msg(Some(&Options::default()), &[]));
    // count: two template records
    assert_eq!(&b[2..4], &[0, 2]);
    let set = &b[20..];
    // FlowSet 0, length 4 + (4 + 14 * 4) * 2 = 124
    assert_eq!(&set[..4], &[0, 0, 0, 124]);
    assert_eq!(set.len(), 124);
    #[rustfmt::skip]
    let v4: [u16; 30] = [256, 14, 8, 4, 12, 4, 7, 2, 11, 2, 4, 1, 5, 1, 6, 1, 10, 4, 14, 4, 2, 8, 1, 8,
                         22, 4, 21, 4, 61, 1];
    let got: Vec<u16> = set[4..64]
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(got, v4);
    assert_eq!(&set[64..72], &[1, 1, 0, 14, 0, 27, 0, 16]);
}

#[test]
fn v9_data_record_bytes() {
    let b = encode_v9(&msg(None, &[rec4()]));
    assert_eq!(&b[2..4], &[0, 1]);
    let set = &b[20..];
    // 48-byte record padded to 52 with the set header.
    assert_eq!(set.len(), 4 + 48);
    #[rustfmt::skip]
    let want: Vec<u8> = [
        &[1, 0, 0, 52][..],
        &[10, 0, 0, 1], &[192, 0, 2, 9], &[0x04, 0xd2], &[0, 80], &[6], &[0x28], &[0x1b],
        &[0, 0, 0, 3], &[0, 0, 0, 4], &[0, 0, 0, 0, 0, 0, 0, 5], &[0, 0, 0, 0, 0, 0, 0x0b, 0xb8],
        &[0, 0, 0x03, 0xe8], &[0, 0, 0x09, 0xc4], &[0],
    ]
    .concat();
    assert_eq!(set, &want[..]);
}

#[test]
fn ipfix_data_record_bytes_and_padding() {
    let b = encode_ipfix(&msg(None, &[rec4()]));
    let set = &b[16..];
    // 57-byte record: padded to 60 + 4.
    assert_eq!(&set[..4], &[1, 0, 0, 64]);
    let start = (CLOCK.boot_unix_ns / MS + 1_000).to_be_bytes();
    let end = (CLOCK.boot_unix_ns / MS + 2_500).to_be_bytes();
    assert_eq!(&set[4 + 39..4 + 47], &start);
    assert_eq!(&set[4 + 47..4 + 55], &end);
    assert_eq!(&set[4 + 55..], &[0, 3, 0, 0, 0]);
    assert_eq!(u16::from_be_bytes([b[2], b[3]]) as usize, b.len());
}

#[test]
fn options_record_announces_sampling_and_exporter() {
    for v in [Version::V9, Version::Ipfix] {
        let o = Options {
            sampling: Some(100),
            exporter_addr: Some(Ipv4Addr::new(198, 51, 100, 1).into()),
        };
        let b = encode(v, &msg(Some(&o), &[]));
        let mut c = Collector::new(CLOCK);
        let p = c.parse(&b).unwrap();
        assert_eq!(p.template_ids, vec![256, 257]);
        assert_eq!(p.options_template_ids, vec![258]);
        let t = &c.options_templates[&258];
        let scope = if v == Version::V9 { (1, 4) } else { (149, 4) };
        assert_eq!(t.scope, vec![scope]);
        let mut want: Vec<(u16, Vec<u8>)> = vec![(scope.0, vec![1, 2, 3, 4])];
        if v == Version::Ipfix {
            want.extend([
                (304, vec![0, 1]),
                (305, vec![0, 0, 0, 1]),
                (306, vec![0, 0, 0, 99]),
            ]);
        } else {
            want.extend([(34, vec![0, 0, 0, 100]), (35, vec![1])]);
        }
        want.push((130, vec![198, 51, 100, 1]));
        assert_eq!(p.options, vec![want]);
    }
    // Nothing to announce: no options template.
    let b = encode_ipfix(&msg(Some(&Options::default()), &[]));
    let p = Collector::new(CLOCK).parse(&b).unwrap();
    assert!(p.options_template_ids.is_empty() && p.options.is_empty());
    // An IPv6 exporter address.
    let o = Options {
        sampling: None,
        exporter_addr: Some(Ipv6Addr::LOCALHOST.into()),
    };
    let p = Collector::new(CLOCK)
        .parse(&encode_ipfix(&msg(Some(&o), &[])))
        .unwrap();
    assert_eq!(
        p.options[0][1],
        (131, Ipv6Addr::LOCALHOST.octets().to_vec())
    );
}

#[test]
fn decodes_back_mixed_families() {
    let recs = [rec4(), rec6(), rec6(), rec4()];
    for v in [Version::V9, Version::Ipfix] {
        let o = Options {
            sampling: Some(10),
            exporter_addr: None,
        };
        let b = encode(v, &msg(Some(&o), &recs));
        let p = Collector::new(CLOCK).parse(&b).unwrap();
        let h = p.header.unwrap();
        assert_eq!((h.sequence, h.domain_id), (77, 0x0102_0304));
        // templates, options template, options data, then v4, v6, v4 data sets
        let ids: Vec<u16> = p.sets.iter().map(|s| s.0).collect();
        let (t, o) = if v == Version::V9 { (0, 1) } else { (2, 3) };
        assert_eq!(ids, vec![t, o, 258, 256, 257, 256]);
        let want: Vec<FlowRecord> = recs
            .iter()
            .map(|r| {
                if v == Version::V9 {
                    FlowRecord {
                        end: EndReason::Flush,
                        ..*r
                    }
                } else {
                    *r
                }
            })
            .collect();
        assert_eq!(p.flows, want);
    }
}

#[test]
fn builder_respects_mtu() {
    for v in [Version::V9, Version::Ipfix] {
        for mtu in [Builder::min_mtu(v), 300, 1400, 9000] {
            let mut b = Builder::new(v, 1, CLOCK, mtu);
            let mut c = Collector::new(CLOCK);
            let mut t = Builder::new(v, 1, CLOCK, 1400);
            assert!(t.push_templates(&Options::default()));
            c.parse(t.finish(0, 0)).unwrap();
            let mut n = 0;
            while b.push_record(&if n % 3 == 0 { rec6() } else { rec4() }) {
                n += 1;
            }
            assert!(n >= 1);
            let bytes = b.finish(0, 0);
            assert!(bytes.len() <= mtu, "{} > {mtu}", bytes.len());
            assert_eq!(c.parse(bytes).unwrap().flows.len(), n);
            // the next record would have pushed it over
            let next = if n % 3 == 0 { 81 } else { 57 };
            assert!(
                bytes.len() + next + 4 > mtu - 3,
                "{v:?} mtu {mtu}: {} bytes, room left",
                bytes.len()
            );
        }
    }
}

fn arb_record() -> impl Strategy<Value = FlowRecord> {
    (
        (
            any::<u128>(),
            any::<u128>(),
            any::<u16>(),
            any::<u16>(),
            any::<u8>(),
            any::<u8>(),
            any::<bool>(),
        ),
        (
            any::<u32>(),
            any::<bool>(),
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
        ),
        (0u64..1 << 40, 0u64..1 << 30, any::<u8>(), 0u8..5),
    )
        .prop_map(
            |(
                (src, dst, sp, dp, proto, tos, v6),
                (in_if, egress, out_if, packets, bytes),
                (first_ms, dur_ms, flags, end),
            )| {
                let mask = if v6 { u128::MAX } else { 0xFFFF_FFFF };
                FlowRecord {
                    key: FlowKey {
                        src: src & mask,
                        dst: dst & mask,
                        src_port: sp,
                        dst_port: dp,
                        proto,
                        tos,
                        v6,
                        in_if,
                        direction: if egress {
                            Direction::Egress
                        } else {
                            Direction::Ingress
                        },
                    },
                    out_if,
                    packets,
                    bytes,
                    first_ns: first_ms * MS,
                    last_ns: (first_ms + dur_ms) * MS,
                    tcp_flags: flags,
                    end: EndReason::from_ipfix_code(end + 1).unwrap(),
                }
            },
        )
}

proptest! {
    /// Whatever the records and the mtu, the builder's messages parse strictly and give back
    /// exactly the records, in order (v9: uptime wraps at 2^32 ms and has no end reason).
    #[test]
    fn encoded_messages_always_parse_back(
        recs in prop::collection::vec(arb_record(), 0..60),
        mtu in 104usize..3000,
        ipfix in any::<bool>(),
        sampling in prop::option::of(1u32..100_000),
        exporter in prop::option::of(any::<u32>()),
    ) {
        let v = if ipfix { Version::Ipfix } else { Version::V9 };
        let mtu = mtu.max(Builder::min_mtu(v));
        let o = Options { sampling, exporter_addr: exporter.map(|a| Ipv4Addr::from(a).into()) };
        let mut c = Collector::new(CLOCK);
        let mut t = Builder::new(v, 9, CLOCK, mtu.max(300));
        prop_assert!(t.push_templates(&o));
        let p = c.parse(t.finish(0, 0)).map_err(TestCaseError::fail)?;
        prop_assert_eq!(p.options.len(), usize::from(!o.is_empty()));

        let mut b = Builder::new(v, 9, CLOCK, mtu);
        let mut got = Vec::new();
        let mut seq = 0;
        for r in &recs {
            if !b.push_record(r) {
                let bytes = b.finish(seq, 0);
                prop_assert!(bytes.len() <= mtu);
                got.extend(c.parse(bytes).map_err(TestCaseError::fail)?.flows);
                b.reset();
                seq += 1;
                prop_assert!(b.push_record(r));
            }
        }
        let bytes = b.finish(seq, 0);
        prop_assert!(bytes.len() <= mtu);
        got.extend(c.parse(bytes).map_err(TestCaseError::fail)?.flows);
        let want: Vec<FlowRecord> = recs.iter().map(|r| match v {
            Version::V9 => FlowRecord {
                first_ns: u64::from((r.first_ns / MS) as u32) * MS,
                last_ns: u64::from((r.last_ns / MS) as u32) * MS,
                end: EndReason::Flush,
                ..*r
            },
            Version::Ipfix => *r,
        }).collect();
        prop_assert_eq!(got, want);
    }
}
