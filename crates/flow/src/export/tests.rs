use super::*;
use crate::decode::{Collector, Parsed};
use crate::{Direction, EndReason, FlowKey};
use std::net::Ipv4Addr;

const MS: u64 = 1_000_000;
const S: u64 = 1_000 * MS;
const CLOCK: Clock = Clock {
    boot_unix_ns: 1_700_000_000 * S,
};

fn rec(i: u32, v6: bool) -> FlowRecord {
    let mut key = FlowKey::v4(
        Ipv4Addr::from(0x0a00_0000 + i),
        Ipv4Addr::new(192, 0, 2, 1),
        1,
        2,
        17,
        0,
        1,
        Direction::Ingress,
    );
    if v6 {
        key.v6 = true;
        key.src |= 0x2001_0db8 << 96;
    }
    FlowRecord {
        key,
        out_if: 2,
        packets: 1,
        bytes: 100,
        first_ns: S,
        last_ns: S,
        tcp_flags: 0,
        end: EndReason::IdleTimeout,
    }
}

struct Sink {
    sock: UdpSocket,
    collector: Collector,
}

impl Sink {
    fn new() -> Sink {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        Sink {
            sock,
            collector: Collector::new(CLOCK),
        }
    }

    fn addr(&self) -> SocketAddr {
        self.sock.local_addr().unwrap()
    }

    /// Every datagram waiting, parsed.
    fn drain(&mut self) -> Vec<Parsed> {
        let mut out = Vec::new();
        let mut buf = [0u8; 65536];
        while let Ok(n) = self.sock.recv(&mut buf) {
            out.push(self.collector.parse(&buf[..n]).unwrap());
            self.sock
                .set_read_timeout(Some(Duration::from_millis(50)))
                .unwrap();
        }
        out
    }
}

fn config(sink: &[&Sink], v: Version) -> ExportConfig {
    ExportConfig {
        domain_id: 42,
        ..ExportConfig::new(sink.iter().map(|s| s.addr()).collect(), v)
    }
}

#[test]
fn rejects_bad_configs() {
    let s = Sink::new();
    assert!(Exporter::new(ExportConfig::new(vec![], Version::V9), CLOCK).is_err());
    assert!(Exporter::new(
        ExportConfig {
            mtu: 100,
            ..config(&[&s], Version::Ipfix)
        },
        CLOCK
    )
    .is_err());
    assert!(Exporter::new(
        ExportConfig {
            sampling: Some(0),
            ..config(&[&s], Version::V9)
        },
        CLOCK
    )
    .is_err());
}

#[test]
fn templates_first_then_batched_data_with_sequence_numbers() {
    for v in [Version::V9, Version::Ipfix] {
        let mut s = Sink::new();
        let mut e = Exporter::new(config(&[&s], v), CLOCK).unwrap();
        // 1400 bytes hold 28 IPv4 v9 records or 23 IPFIX ones; 100 records make 4 or 5 datagrams.
        for i in 0..100 {
            e.push(&rec(i, false), S).unwrap();
        }
        e.flush(S).unwrap();
        let got = s.drain();
        assert!(!got[0].template_ids.is_empty() && got[0].flows.is_empty());
        let flows: Vec<FlowRecord> = got.iter().flat_map(|p| p.flows.clone()).collect();
        assert_eq!(flows.len(), 100);
        assert_eq!(flows[99].key.src, 0x0a00_0000 + 99);
        let seqs: Vec<u32> = got
            .iter()
            .map(|p| p.header.as_ref().unwrap().sequence)
            .collect();
        let want: Vec<u32> = match v {
            Version::V9 => (0..got.len() as u32).collect(),
            // data records before each message: none before the templates (no options here)
            Version::Ipfix => {
                let mut n = 0;
                got.iter()
                    .map(|p| {
                        let s = n;
                        n += p.flows.len() as u32;
                        s
                    })
                    .collect()
            }
        };
        assert_eq!(seqs, want);
        assert!(got
            .iter()
            .all(|p| p.header.as_ref().unwrap().domain_id == 42));
        let st = e.stats();
        assert_eq!(
            (st.records, st.datagrams, st.templates, st.send_errors),
            (100, got.len() as u64, 1, 0)
        );
    }
}

#[test]
fn tick_sends_a_partial_datagram_after_a_second() {
    let mut s = Sink::new();
    let mut e = Exporter::new(config(&[&s], Version::Ipfix), CLOCK).unwrap();
    e.push(&rec(1, true), 10 * S).unwrap();
    e.tick(10 * S + 900 * MS).unwrap();
    let got = s.drain();
    assert_eq!(got.len(), 1); // templates only
    e.tick(11 * S).unwrap();
    let got = s.drain();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].flows, vec![rec(1, true)]);
}

#[test]
fn templates_refresh_by_time_and_by_datagrams() {
    let mut s = Sink::new();
    let cfg = ExportConfig {
        template_refresh: Duration::from_secs(30),
        template_refresh_packets: 3,
        sampling: Some(64),
        exporter_addr: Some(Ipv4Addr::new(192, 0, 2, 254).into()),
        ..config(&[&s], Version::V9)
    };
    let mut e = Exporter::new(cfg, CLOCK).unwrap();
    e.tick(0).unwrap();
    e.tick(29 * S).unwrap();
    assert_eq!(e.stats().templates, 1);
    e.tick(30 * S).unwrap();
    assert_eq!(e.stats().templates, 2);
    for i in 0..3 {
        e.push(&rec(i, false), 31 * S).unwrap();
        e.flush(31 * S).unwrap();
    }
    assert_eq!(e.stats().templates, 2);
    e.push(&rec(9, false), 32 * S).unwrap();
    assert_eq!(e.stats().templates, 3);
    let got = s.drain();
    let with_templates: Vec<bool> = got.iter().map(|p| !p.template_ids.is_empty()).collect();
    assert_eq!(with_templates, [true, true, false, false, false, true]);
    // each templates datagram carries the options record
    assert!(got
        .iter()
        .filter(|p| !p.template_ids.is_empty())
        .all(|p| p.options.len() == 1));
}

#[test]
fn every_collector_gets_everything() {
    let mut a = Sink::new();
    let mut b = Sink::new();
    let mut e = Exporter::new(config(&[&a, &b], Version::Ipfix), CLOCK).unwrap();
    for i in 0..50 {
        e.push(&rec(i, i % 2 == 0), S).unwrap();
    }
    e.flush(S).unwrap();
    let (ga, gb) = (a.drain(), b.drain());
    assert_eq!(ga.len(), gb.len());
    let fa: Vec<FlowRecord> = ga.into_iter().flat_map(|p| p.flows).collect();
    let fb: Vec<FlowRecord> = gb.into_iter().flat_map(|p| p.flows).collect();
    assert_eq!(fa.len(), 50);
    assert_eq!(fa, fb);
}

#[test]
fn send_errors_are_counted_not_hidden() {
    let s = Sink::new();
    // An IPv6 collector on a host without IPv6 routes fails; so does a broadcast address
    // without SO_BROADCAST, which works everywhere.
    let bad: SocketAddr = "255.255.255.255:9".parse().unwrap();
    let mut e = Exporter::new(ExportConfig::new(vec![s.addr(), bad], Version::V9), CLOCK).unwrap();
    e.push(&rec(1, false), S).unwrap_or(());
    assert!(e.flush(S).is_err());
    let st = e.stats();
    assert_eq!(st.datagrams, 2);
    assert_eq!(st.send_errors, 2);
    assert_eq!(st.records_lost, 0);
    let mut e = Exporter::new(ExportConfig::new(vec![bad], Version::V9), CLOCK).unwrap();
    e.push(&rec(1, false), S).unwrap_or(());
    assert!(e.flush(S).is_err());
    assert_eq!(e.stats().records_lost, 1);
}
