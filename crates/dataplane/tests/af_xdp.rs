//! The AF_XDP driver against real veth pairs, each test in its own network namespace. They need
//! root (BPF, raw sockets, namespaces); as another user they print why and pass without running.

#[path = "xdp_netns/mod.rs"]
mod netns;

use std::time::{Duration, Instant};

use dataplane::port::af_xdp::{AfXdpConfig, AfXdpPort, AttachApi, BindMode, XdpMode, MAX_RX_FRAME};
use dataplane::port::{RxQueue, TxQueue};
use dataplane::{BufCache, PktBuf, Pool};
use netns::{in_fresh_netns, ip_output, veth_pair, RawSock};

const MARK: &[u8; 6] = b"LRXDP:";

fn skip(test: &str) -> bool {
    if !netns::is_root() {
        eprintln!("{test}: skipped: needs root (BPF, AF_XDP and raw sockets, namespaces)");
        return true;
    }
    false
}

/// A frame that is not IP: the local experimental EtherType, the mark, `seq`, a pattern.
fn raw_frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5];
    f.extend_from_slice(MARK);
    f.extend_from_slice(&seq.to_be_bytes());
    while f.len() < len {
        f.push((f.len() as u32 ^ seq) as u8);
    }
    f
}

/// An IPv4/UDP frame carrying the mark and `seq`, with a correct header checksum.
fn ipv4_frame(seq: u32, payload: usize) -> Vec<u8> {
    let mut body = MARK.to_vec();
    body.extend_from_slice(&seq.to_be_bytes());
    while body.len() < payload {
        body.push(body.len() as u8);
    }
    let udp_len = 8 + body.len();
    let total = 20 + udp_len;
    let mut ip = vec![
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        1,
        0x40,
        0,
        64,
        17,
        0,
        0,
        10,
        0,
        0,
        1,
        10,
        0,
        0,
        2,
    ];
    let sum = ip
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
        .sum::<u32>();
    let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(&ip);
    f.extend_from_slice(&4000u16.to_be_bytes());
    f.extend_from_slice(&9u16.to_be_bytes());
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&body);
    f
}

/// Frame `seq` of a mixed test stream: every third one IPv4, the rest not IP, lengths varied.
fn test_frame(seq: u32) -> Vec<u8> {
    if seq.is_multiple_of(3) {
        ipv4_frame(seq, 18 + (seq as usize * 37) % 1400)
    } else {
        raw_frame(seq, 60 + (seq as usize * 53) % 1455)
    }
}

/// The sequence number a test frame carries, if it is one.
fn seq_of(f: &[u8]) -> Option<u32> {
    let at = f.windows(MARK.len()).position(|w| w == MARK)? + MARK.len();
    Some(u32::from_be_bytes(f.get(at..at + 4)?.try_into().ok()?))
}

/// Polls `rxs` until `want` test frames arrived or `timeout` passed; returns (queue, frame).
fn receive(
    rxs: &mut [Box<dyn RxQueue>],
    cache: &mut BufCache,
    want: usize,
    timeout: Duration,
) -> Vec<(usize, Vec<u8>)> {
    let end = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut out = Vec::new();
    while got.len() < want && Instant::now() < end {
        for (q, rx) in rxs.iter_mut().enumerate() {
            rx.rx_burst(cache, &mut out, 64);
            for b in out.drain(..) {
                if seq_of(b.data()).is_some() {
                    got.push((q, b.data().to_vec()));
                }
                cache.free(b);
            }
        }
    }
    got
}

fn bufs(cache: &mut BufCache, frames: &[Vec<u8>]) -> Vec<PktBuf> {
    frames
        .iter()
        .map(|f| {
            let mut b = cache.alloc().unwrap();
            assert!(b.fill(f));
            b
        })
        .collect()
}

/// Sends every frame, retrying what a full ring hands back.
fn send_all(tx: &mut dyn TxQueue, cache: &mut BufCache, frames: &[Vec<u8>]) {
    let mut pkts = bufs(cache, frames);
    let end = Instant::now() + Duration::from_secs(5);
    while !pkts.is_empty() {
        tx.tx_burst(&mut pkts, cache);
        assert!(Instant::now() < end, "{} frames never went out", pkts.len());
    }
    tx.flush();
}

fn assert_same_frames(sent: &[Vec<u8>], got: &[Vec<u8>]) {
    assert_eq!(got.len(), sent.len(), "every frame arrives once");
    for f in got {
        let s = seq_of(f).unwrap() as usize;
        assert_eq!(f, &sent[s], "frame {s} arrives intact");
    }
    let mut seqs: Vec<_> = got.iter().map(|f| seq_of(f).unwrap()).collect();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), sent.len(), "no frame twice");
}

#[test]
fn frames_sent_at_the_peer_arrive_intact_on_one_queue() {
    if skip("frames_sent_at_the_peer_arrive_intact_on_one_queue") {
        return;
    }
    in_fresh_netns(|| {
        veth_pair("xa", "xb", 2);
        let mut port = AfXdpPort::open("xa", &AfXdpConfig::default()).unwrap();
        let mode = port.mode();
        assert!(!mode.zero_copy, "veth has no zero-copy AF_XDP");
        assert_eq!(mode.xdp, XdpMode::Native, "veth takes native XDP");
        assert_eq!(mode.attach, AttachApi::Link);
        let mut rxs = port.take_rx_queues();
        assert_eq!(rxs.len(), 1);
        let mut cache = BufCache::new(Pool::new(4096));

        // Sent past the qdisc from CPU 0, the peer's frames leave on its transmit queue 0, which
        // veth delivers to receive queue 0 here, the one the port listens on. (Through the
        // qdisc, a flow hash would spread them over both queues.)
        netns::pin_to_cpu(0);
        let peer = RawSock::open("xb");
        peer.qdisc_bypass();
        let sent: Vec<_> = (0..300).map(test_frame).collect();
        for f in &sent {
            peer.send(f);
        }
        let got = receive(&mut rxs, &mut cache, sent.len(), Duration::from_secs(5));
        let got: Vec<_> = got.into_iter().map(|(_, f)| f).collect();
        assert_same_frames(&sent, &got);
        assert!(got.iter().any(|f| f[12..14] == [0x08, 0x00]), "IPv4 frames");
        assert!(
            got.iter().any(|f| f[12..14] == [0x88, 0xb5]),
            "non-IP frames"
        );

        let st = &port.stats().unwrap()[0];
        assert!(st.has_rx);
        assert!(st.rx_packets >= 300, "{st:?}");
        assert_eq!(st.kernel.rx_dropped, 0, "{st:?}");
        assert_eq!(st.kernel.rx_ring_full, 0, "{st:?}");
    });
}

#[test]
fn frames_sent_through_af_xdp_arrive_at_the_peer() {
    if skip("frames_sent_through_af_xdp_arrive_at_the_peer") {
        return;
    }
    in_fresh_netns(|| {
        veth_pair("xa", "xb", 2);
        let peer = RawSock::open("xb");
        let mut port = AfXdpPort::open("xa", &AfXdpConfig::default()).unwrap();
        let mut tx = port.tx_queue().unwrap();
        let mut cache = BufCache::new(Pool::new(4096));
        let sent: Vec<_> = (0..500).map(test_frame).collect();
        send_all(tx.as_mut(), &mut cache, &sent);
        let got = peer.recv_matching(sent.len(), Duration::from_secs(5), |f| seq_of(f).is_some());
        assert_same_frames(&sent, &got);
        assert!(got.iter().any(|f| f[12..14] == [0x08, 0x00]), "IPv4 frames");
        assert!(
            got.iter().any(|f| f[12..14] == [0x88, 0xb5]),
            "non-IP frames"
        );
        let st = &port.stats().unwrap()[0];
        assert_eq!(st.tx_packets, 500, "{st:?}");
        assert_eq!(st.kernel.tx_invalid_descs, 0, "{st:?}");
    });
}

#[test]
fn two_queues_each_way_keep_their_frames_apart() {
    if skip("two_queues_each_way_keep_their_frames_apart") {
        return;
    }
    in_fresh_netns(|| {
        veth_pair("xa", "xb", 2);
        let cfg = AfXdpConfig {
            queues: 2,
            ..Default::default()
        };
        let mut a = AfXdpPort::open("xa", &cfg).unwrap();
        let mut b = AfXdpPort::open("xb", &cfg).unwrap();
        let mut cache = BufCache::new(Pool::new(8192));
        let mut rxs = [a.take_rx_queues(), b.take_rx_queues()];
        // A second take finds nothing: each receive queue is handed out once.
        assert!(a.take_rx_queues().is_empty());
        let mut txs = [
            vec![a.tx_queue().unwrap(), a.tx_queue().unwrap()],
            vec![b.tx_queue().unwrap(), b.tx_queue().unwrap()],
        ];
        for (from, to) in [(0, 1), (1, 0)] {
            assert_eq!(rxs[to].len(), 2);
            // Transmit queue q of one end feeds receive queue q of the other (veth keeps the
            // queue index), so each queue's frames arrive on the same queue number.
            let mut sent = Vec::new();
            for (q, tx) in txs[from].iter_mut().enumerate() {
                let frames: Vec<_> = (0..200).map(|i| test_frame(q as u32 * 200 + i)).collect();
                send_all(tx.as_mut(), &mut cache, &frames);
                sent.extend(frames);
            }
            let got = receive(&mut rxs[to], &mut cache, 400, Duration::from_secs(5));
            for (q, f) in &got {
                assert_eq!(seq_of(f).unwrap() as usize / 200, *q, "frame on its queue");
            }
            let frames: Vec<_> = got.into_iter().map(|(_, f)| f).collect();
            assert_same_frames(&sent, &frames);
        }
        // Both ports had both their transmit halves taken; a third needs a queue 2 the veth
        // does not have.
        let e = a.tx_queue().err().unwrap();
        assert!(e.contains("xa") && e.contains("queue 2"), "{e}");
        eprintln!("no queue left: {e}");
        let st = a.stats().unwrap();
        assert_eq!(st.len(), 2);
        assert!(
            st.iter()
                .all(|s| s.rx_packets >= 200 && s.tx_packets == 200),
            "{st:?}"
        );
    });
}

#[test]
fn a_port_reopened_right_after_close_works() {
    if skip("a_port_reopened_right_after_close_works") {
        return;
    }
    in_fresh_netns(|| {
        veth_pair("xa", "xb", 2);
        let peer = RawSock::open("xb");
        let mut cache = BufCache::new(Pool::new(4096));
        for round in 0..4u32 {
            let t = Instant::now();
            let mut port = AfXdpPort::open("xa", &AfXdpConfig::default())
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
            eprintln!("round {round}: opened in {:?}", t.elapsed());
            let mut tx = port.tx_queue().unwrap();
            let sent: Vec<_> = (0..50).map(|i| raw_frame(round * 50 + i, 100)).collect();
            send_all(tx.as_mut(), &mut cache, &sent);
            let got = peer.recv_matching(50, Duration::from_secs(5), |f| {
                seq_of(f).is_some_and(|s| s / 50 == round)
            });
            assert_eq!(got.len(), 50, "round {round}");
            // Dropping the queue and the port closes the socket and detaches the program.
        }
        assert!(
            !ip_output(&["link", "show", "dev", "xa"]).contains("xdp"),
            "no program left on the device"
        );
    });
}

#[test]
fn generic_mode_and_netlink_attach_work_and_detach() {
    if skip("generic_mode_and_netlink_attach_work_and_detach") {
        return;
    }
    in_fresh_netns(|| {
        veth_pair("xa", "xb", 2);
        let mut cache = BufCache::new(Pool::new(4096));
        for (xdp, attach) in [
            (XdpMode::Generic, AttachApi::Link),
            (XdpMode::Native, AttachApi::Netlink),
            (XdpMode::Generic, AttachApi::Netlink),
        ] {
            let cfg = AfXdpConfig {
                queues: 2,
                xdp,
                attach,
                bind: BindMode::Copy,
                ..Default::default()
            };
            let mut port = AfXdpPort::open("xa", &cfg).unwrap();
            assert_eq!((port.mode().xdp, port.mode().attach), (xdp, attach));
            let shown = ip_output(&["link", "show", "dev", "xa"]);
            let want = if xdp == XdpMode::Native {
                "xdp "
            } else {
                "xdpgeneric"
            };
            assert!(shown.contains(want), "{xdp:?}/{attach:?}: {shown}");
            let mut rxs = port.take_rx_queues();
            let peer = RawSock::open("xb");
            let sent: Vec<_> = (0..100).map(test_frame).collect();
            for f in &sent {
                peer.send(f);
            }
            let got = receive(&mut rxs, &mut cache, 100, Duration::from_secs(5));
            let got: Vec<_> = got.into_iter().map(|(_, f)| f).collect();
            assert_same_frames(&sent, &got);
            drop(rxs);
            drop(port);
            let shown = ip_output(&["link", "show", "dev", "xa"]);
            assert!(
                !shown.contains("xdp"),
                "{xdp:?}/{attach:?} detached: {shown}"
            );
        }
    });
}

#[test]
fn the_program_stays_while_queues_live() {
    if skip("the_program_stays_while_queues_live") {
        return;
    }
    in_fresh_netns(|| {
        veth_pair("xa", "xb", 2);
        let mut port = AfXdpPort::open("xa", &AfXdpConfig::default()).unwrap();
        let rxs = port.take_rx_queues();
        drop(port);
        assert!(ip_output(&["link", "show", "dev", "xa"]).contains("xdp"));
        drop(rxs);
        assert!(!ip_output(&["link", "show", "dev", "xa"]).contains("xdp"));
    });
}

#[test]
fn a_full_ring_leaves_frames_with_the_caller() {
    if skip("a_full_ring_leaves_frames_with_the_caller") {
        return;
    }
    in_fresh_netns(|| {
        veth_pair("xa", "xb", 2);
        let cfg = AfXdpConfig {
            tx_ring: 64,
            ..Default::default()
        };
        let mut port = AfXdpPort::open("xa", &cfg).unwrap();
        let mut tx = port.tx_queue().unwrap();
        let mut cache = BufCache::new(Pool::new(4096));
        let mut pkts = bufs(
            &mut cache,
            &(0..1000).map(|i| raw_frame(i, 64)).collect::<Vec<_>>(),
        );
        let taken = tx.tx_burst(&mut pkts, &mut cache);
        assert!(taken > 0 && taken <= 64, "took {taken} with 64 chunks");
        assert_eq!(pkts.len(), 1000 - taken, "the rest stays with the caller");
        assert_eq!(
            seq_of(pkts[0].data()),
            Some(taken as u32),
            "from the front, in order"
        );
        // An empty frame and one longer than a chunk are taken and dropped, not sent.
        let mut big = cache.alloc().unwrap();
        assert!(big.fill(&vec![0u8; 5000]));
        let mut odd = vec![cache.alloc().unwrap(), big];
        assert_eq!(tx.tx_burst(&mut odd, &mut cache), 2);
        let st = &port.stats().unwrap()[0];
        assert_eq!(st.tx_oversize, 2, "{st:?}");
        assert_eq!(st.tx_full, 1000 - taken as u64, "{st:?}");
        cache.free_all(&mut pkts);
    });
}

#[test]
fn bad_devices_and_queues_give_clear_errors() {
    if skip("bad_devices_and_queues_give_clear_errors") {
        return;
    }
    in_fresh_netns(|| {
        let e = AfXdpPort::open("lr-nope0", &AfXdpConfig::default())
            .err()
            .unwrap();
        assert!(
            e.contains("lr-nope0") && e.contains("no such device"),
            "{e}"
        );
        eprintln!("bad name: {e}");

        veth_pair("xa", "xb", 2);
        let cfg = AfXdpConfig {
            queues: 3,
            ..Default::default()
        };
        let e = AfXdpPort::open("xa", &cfg).err().unwrap();
        assert!(
            e.contains("xa") && e.contains("queue 2") && e.contains("bind"),
            "{e}"
        );
        eprintln!("bad queue: {e}");

        // veth has no zero-copy support: asking for it fails at the bind and says so.
        let cfg = AfXdpConfig {
            bind: BindMode::ZeroCopy,
            ..Default::default()
        };
        let e = AfXdpPort::open("xa", &cfg).err().unwrap();
        assert!(
            e.contains("zero-copy") && e.contains("not supported"),
            "{e}"
        );
        eprintln!("zero-copy on veth: {e}");

        // Nothing is left attached after the failures, and the device still opens.
        assert!(!ip_output(&["link", "show", "dev", "xa"]).contains("xdp"));
        assert!(AfXdpPort::open("xa", &AfXdpConfig::default()).is_ok());
    });
}

#[test]
fn frames_up_to_the_rx_limit_arrive_and_longer_ones_are_counted() {
    if skip("frames_up_to_the_rx_limit_arrive_and_longer_ones_are_counted") {
        return;
    }
    in_fresh_netns(|| {
        veth_pair("xa", "xb", 2);
        // Native XDP on veth limits the peer's MTU to what fits a page; generic mode does not.
        netns::ip(&["link", "set", "xa", "mtu", "9000"]);
        netns::ip(&["link", "set", "xb", "mtu", "9000"]);
        let cfg = AfXdpConfig {
            xdp: XdpMode::Generic,
            ..Default::default()
        };
        let mut port = AfXdpPort::open("xa", &cfg).unwrap();
        let mut rxs = port.take_rx_queues();
        let mut cache = BufCache::new(Pool::new(4096));
        netns::pin_to_cpu(0);
        let peer = RawSock::open("xb");
        peer.qdisc_bypass();
        let fits = raw_frame(0, MAX_RX_FRAME);
        peer.send(&fits);
        peer.send(&raw_frame(1, MAX_RX_FRAME + 1));
        let got = receive(&mut rxs, &mut cache, 2, Duration::from_millis(500));
        assert_eq!(got.len(), 1, "only the frame that fits a chunk");
        assert_eq!(got[0].1, fits);
        let st = &port.stats().unwrap()[0];
        assert_eq!(st.kernel.rx_dropped, 1, "{st:?}");
    });
}
