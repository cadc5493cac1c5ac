//! The embedded mode's accounting checked against the router's own counters, as the external
//! mode's is against veth, nft and tc counters (tests/system/test_external_known_answers.py).
//! There the `mem` rings are the wire and the router's receive queues at once: a frame a full
//! ring refuses was sent and the router dropped it (a NIC's missed frame), so in every trial of
//! a search driven past the router's rate, what the tester lost is exactly what the rings
//! refused plus what the router counted as dropped, and what the router received is what the
//! tester sent less what the rings refused.

use std::path::PathBuf;

use control::Router;
use tester::embedded::Embedded;
use tester::procedures::{Quiet, SearchOpts, TrialOpts};
use tester::stream::{v4_stream, StreamSpec, L3};
use tester::{procedures, FrameSizes, Tester};

const CONFIG: &str = r#"
router: { workers: 1, buffers: 65536 }
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [10.0.0.1/24] }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [10.1.0.1/24] }
neighbors:
  - { interface: p0, ip: 10.0.0.2, mac: "02:00:00:00:00:02" }
  - { interface: p1, ip: 10.1.0.2, mac: "02:00:00:00:01:02" }
"#;

fn stream(name: &str, from: usize, to: usize) -> StreamSpec {
    let mut s = v4_stream();
    s.name = name.into();
    (s.tx_port, s.rx_port) = (from, to);
    s.src_mac = [2, 0, 0, 0, from as u8, 2];
    s.dst_mac = [2, 0, 0, 0, from as u8, 1];
    s.l3 = L3::V4 {
        src: [10, from as u8, 0, 2],
        dst: [10, to as u8, 0, 2],
    };
    s
}

#[test]
fn loss_is_what_the_rings_refused_plus_what_the_router_dropped() {
    let cfg = control::config::parse(CONFIG, &PathBuf::from("embedded.yaml")).unwrap();
    let router = Router::build(cfg).unwrap();
    // Small rings, so a burst beyond the router's rate overflows them.
    let (mut emb, ports, probe) = Embedded::start(
        router,
        (CONFIG.into(), "embedded.yaml".into()),
        256,
        65536,
        &[10e9, 10e9],
    )
    .unwrap();
    let counters = || {
        let c = emb.core.as_ref().unwrap().lock("test").runtime.snapshot();
        (
            c.rx_packets.iter().sum::<u64>(),
            c.tx_packets.iter().sum::<u64>(),
        )
    };
    let streams = vec![stream("a", 0, 1), stream("b", 1, 0)];
    let pool = emb.pool.clone();
    let mut t = Tester::new(ports, streams, pool);
    t.probe = Some(Box::new(probe));
    let before = counters();
    let sizes = FrameSizes::Fixed(64);
    let trial = TrialOpts {
        seconds: 0.3,
        ..Default::default()
    };
    let search = SearchOpts {
        resolution: 0.05,
        relative: true,
        ..Default::default()
    };
    let r = procedures::throughput(&mut t, &sizes, &trial, &search, &mut Quiet);
    let after = counters();
    let (mut sent, mut refused, mut received) = (0, 0, 0);
    let mut overloaded = false;
    for (_, _, x) in &r.trials {
        let dropped: u64 = x.dut_drops.iter().map(|d| d.1).sum();
        assert_eq!(
            x.lost,
            x.refused + dropped,
            "every lost frame was refused by a ring or dropped by the router: {x:?}"
        );
        assert_eq!(
            (x.tx_refused, x.tx_unsent),
            (0, 0),
            "a mem ring never keeps frames"
        );
        overloaded |= x.refused > 0;
        sent += x.tx;
        refused += x.refused;
        received += x.rx;
    }
    assert!(overloaded, "100% of 10G must overflow a 256-frame ring");
    // The router received what reached its rings and sent on what came back (its drops on
    // the way out, a full ring towards the tester, are in the trials' dut_drops).
    assert_eq!(after.0 - before.0, sent - refused);
    assert!(after.1 - before.1 >= received);
    emb.stop();
}
