//! The FPM server over loopback TCP, with a client standing in for zebra.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use fpm::frame::FrameError;
use fpm::netlink::{encode, Members, Paths, AF_UNSPEC, RTPROT_ZEBRA, RT_TABLE_MAIN};
use fpm::server::Malformed;
use fpm::{Event, GroupMember, Msg, Nexthop, Op, Prefix, Reason, Route, RouteType, Server};
use fpm::{Rib, ServerConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn route(i: u32, nh_id: u32) -> Msg<'static> {
    let a = Ipv4Addr::from(0x0A00_0000 + (i << 8));
    Msg::Route(Route {
        op: Op::New,
        replace: true,
        table: RT_TABLE_MAIN,
        prefix: Prefix::new(a.into(), 24).unwrap(),
        rtype: RouteType::Unicast,
        protocol: 196,
        priority: 20,
        nh_id,
        gateway: None,
        oif: 0,
        multipath: Paths::default(),
        encap: false,
    })
}

fn group(id: u32, members: &[u32]) -> Msg<'static> {
    let ms: Vec<GroupMember> = members
        .iter()
        .map(|&id| GroupMember { id, weight: 1 })
        .collect();
    Msg::Nexthop(Nexthop {
        op: Op::New,
        id,
        family: AF_UNSPEC,
        protocol: RTPROT_ZEBRA,
        flags: 0,
        blackhole: false,
        oif: 0,
        gateway: None,
        group: Members::from_members(&ms),
        group_type: 0,
        encap: false,
    })
}

/// zebra's stream: one message per frame.
fn stream(msgs: &[Msg<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    for m in msgs {
        encode::frame(&mut out, &mut scratch, std::slice::from_ref(m), 42).unwrap();
    }
    out
}

fn messages(n: u32) -> Vec<Msg<'static>> {
    let mut v = vec![group(1, &[2, 3])];
    v.extend((0..n).map(|i| route(i, 1)));
    v
}

fn next(rx: &Receiver<Event>) -> Event {
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(e) => e,
        Err(e) => panic!("no event: {e}"),
    }
}

/// Skips `Idle`; collects batches until something else comes.
fn collect(rx: &Receiver<Event>, want: usize) -> (Vec<Msg<'static>>, Option<Event>) {
    let mut got = Vec::new();
    while got.len() < want {
        match next(rx) {
            Event::Batch(b) => got.extend(b),
            Event::Idle => {}
            e => return (got, Some(e)),
        }
    }
    (got, None)
}

fn connected(rx: &Receiver<Event>) {
    assert!(matches!(next(rx), Event::Connected { .. }));
}

#[test]
fn frames_in_random_chunks_arrive_intact() {
    let (server, rx) = Server::bind("127.0.0.1:0").unwrap();
    let msgs = messages(20_000);
    let bytes = stream(&msgs);
    let mut c = TcpStream::connect(server.local_addr()).unwrap();
    connected(&rx);
    let mut rng = SmallRng::seed_from_u64(7);
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let n = rng.gen_range(1..3000).min(rest.len());
        c.write_all(&rest[..n]).unwrap();
        rest = &rest[n..];
        if rng.gen_ratio(1, 50) {
            thread::sleep(Duration::from_millis(1));
        }
    }
    let (got, other) = collect(&rx, msgs.len());
    assert!(other.is_none(), "{other:?}");
    assert_eq!(got, msgs);
    drop(c);
    let (rest, e) = collect(&rx, usize::MAX);
    assert!(rest.is_empty());
    assert!(matches!(
        e,
        Some(Event::Disconnected {
            reason: Reason::PeerClosed
        })
    ));
    let s = server.stats().snapshot();
    assert_eq!(s.bytes, bytes.len() as u64);
    assert_eq!(s.frames, msgs.len() as u64);
    assert_eq!((s.route_new, s.nexthop_new, s.malformed), (20_000, 1, 0));
    assert!(s.batches < 2000, "batched: {} sends", s.batches);
}

fn expect_malformed(bad: &[u8], why: Malformed) {
    let (server, rx) = Server::bind("127.0.0.1:0").unwrap();
    let good = messages(3);
    let mut bytes = stream(&good);
    bytes.extend_from_slice(bad);
    bytes.extend(stream(&messages(3)));
    let mut c = TcpStream::connect(server.local_addr()).unwrap();
    connected(&rx);
    c.write_all(&bytes).unwrap();
    let (got, e) = collect(&rx, usize::MAX);
    assert_eq!(got, good, "what came before the bad frame is delivered");
    match e {
        Some(Event::Disconnected {
            reason: Reason::Malformed(m),
        }) => assert_eq!(m, why),
        e => panic!("{e:?}"),
    }
    // the server closed the connection: the client sees the end of the stream
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 16];
    assert!(matches!(c.read(&mut buf), Ok(0) | Err(_)));
    let s = server.stats().snapshot();
    assert_eq!((s.malformed, s.resets, s.disconnects), (1, 1, 1));
}

#[test]
fn a_malformed_frame_closes_the_connection() {
    expect_malformed(
        &[2, 1, 0, 8, 0, 0, 0, 0],
        Malformed::Frame(FrameError::BadVersion(2)),
    );
    expect_malformed(
        &[1, 2, 0, 8, 0, 0, 0, 0],
        Malformed::Frame(FrameError::Protobuf),
    );
    expect_malformed(&[1, 1, 0, 2], Malformed::Frame(FrameError::BadLength(2)));
}

#[test]
fn a_malformed_message_closes_the_connection() {
    // a well-formed frame whose netlink message claims more bytes than the frame has
    let mut nl = Vec::new();
    encode::message(&mut nl, &route(1, 1), 1);
    nl[0] = 200;
    let mut f = Vec::new();
    fpm::encode_frame(&nl, &mut f).unwrap();
    expect_malformed(
        &f,
        Malformed::Netlink(fpm::DecodeError::BadMsgLen(u32::from_ne_bytes([
            200, nl[1], nl[2], nl[3],
        ]))),
    );
}

#[test]
fn the_reader_keeps_reading_while_the_consumer_sleeps() {
    let (server, rx) = Server::bind("127.0.0.1:0").unwrap();
    let msgs = messages(300_000);
    let bytes = stream(&msgs);
    let total = bytes.len() as u64;
    let addr = server.local_addr();
    let writer = thread::spawn(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(&bytes).unwrap();
        c
    });
    // Do not touch the receiver until the server has read every byte: a reader waiting on the
    // consumer would leave the writer blocked on a full socket and never get there.
    let t0 = Instant::now();
    while server.stats().bytes.load(Relaxed) < total {
        assert!(t0.elapsed() < Duration::from_secs(60), "reader stalled");
        thread::sleep(Duration::from_millis(10));
    }
    let _client = writer.join().unwrap();
    connected(&rx);
    let (got, e) = collect(&rx, msgs.len());
    assert!(e.is_none());
    assert_eq!(got.len(), msgs.len());
    // and the consumer can apply them
    let mut rib = Rib::new();
    rib.apply_batch(&got);
    assert_eq!(
        rib.counters().routes_unresolved,
        300_000,
        "members 2, 3 never sent"
    );
}

#[test]
fn a_new_connection_replaces_the_old_one() {
    let (server, rx) = Server::bind("127.0.0.1:0").unwrap();
    let mut a = TcpStream::connect(server.local_addr()).unwrap();
    connected(&rx);
    a.write_all(&stream(&messages(5))).unwrap();
    let (got, _) = collect(&rx, 6);
    assert_eq!(got.len(), 6);
    let mut b = TcpStream::connect(server.local_addr()).unwrap();
    let (_, e) = collect(&rx, usize::MAX);
    assert!(matches!(
        e,
        Some(Event::Disconnected {
            reason: Reason::Replaced
        })
    ));
    connected(&rx);
    b.write_all(&stream(&messages(2))).unwrap();
    let (got, _) = collect(&rx, 3);
    assert_eq!(got.len(), 3);
    let s = server.stats().snapshot();
    assert_eq!((s.connections, s.resets), (2, 1));
}

#[test]
fn idle_after_connecting_and_after_a_burst() {
    let cfg = ServerConfig {
        idle: Duration::from_millis(100),
        ..ServerConfig::default()
    };
    let (server, rx) = Server::bind_with("127.0.0.1:0", cfg).unwrap();
    let mut c = TcpStream::connect(server.local_addr()).unwrap();
    connected(&rx);
    assert!(matches!(next(&rx), Event::Idle), "an empty replay ends too");
    c.write_all(&stream(&messages(10))).unwrap();
    let mut got = 0;
    loop {
        match next(&rx) {
            Event::Batch(b) => got += b.len(),
            Event::Idle => break,
            e => panic!("{e:?}"),
        }
    }
    assert_eq!(got, 11);
    // once per quiet spell
    assert!(matches!(
        rx.recv_timeout(Duration::from_millis(400)),
        Err(RecvTimeoutError::Timeout)
    ));
}

#[test]
fn shutdown_closes_the_connection_and_ends_the_channel() {
    let (server, rx) = Server::bind("127.0.0.1:0").unwrap();
    let _c = TcpStream::connect(server.local_addr()).unwrap();
    connected(&rx);
    server.shutdown();
    let mut saw = false;
    while let Ok(e) = rx.recv_timeout(Duration::from_secs(5)) {
        if let Event::Disconnected { reason } = e {
            assert_eq!(reason, Reason::Shutdown);
            saw = true;
        }
    }
    assert!(saw);
    assert!(rx.recv().is_err(), "channel closed");
}
