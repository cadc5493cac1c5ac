//! Entry points for the cargo-fuzz targets in `fuzz/`, kept in the crate so that the unit tests
//! below run exactly the same code on stable Rust. Not part of the API.
//!
//! What the kernel sends over rtnetlink is trusted less than it might be: a message the link
//! monitor or the XDP attach misreads must not panic the router. A panic here is a bug.

/// `data` as frames received by the packet graph: a byte for the port (even: 0, odd: 1), two
/// for the length, then the frame; and so on. Every frame goes through the whole graph of the
/// two-port harness router (forwarding, the slow path with its ICMP errors, l2-control, output
/// features on one interface, bridging between two VLANs and two Q-in-Q members of port 1 with
/// learning and flooding, the bridge's routed interface, `bvi7`, routing in and out of it, and
/// a GGSN at 10.0.0.10 with two PDP contexts: 10.64.0.5 / 2001:db8:100:3::/64 at TEID 0x403,
/// peer TEID 0xabcd0001 at 10.1.0.9, and 10.64.0.6 at TEID 0x404; MPLS on eth0 and eth1 with
/// the harness's labels, labelled route and pseudowire, `Harness::add_mpls`, with input
/// features where labelled traffic takes them: [`labelled_features`]; services on bridge
/// members: [`bridged_features`]).
/// Asserted: nothing panics, and every buffer taken comes back to the pool once what was
/// transmitted is freed (no frame is lost or freed twice).
pub fn graph(data: &[u8]) {
    use crate::graph::harness::Harness;
    thread_local! {
        static H: std::cell::RefCell<Option<Harness>> = const { std::cell::RefCell::new(None) };
    }
    H.with(|h| {
        let mut h = h.borrow_mut();
        let h = h.get_or_insert_with(|| {
            let mut h = Harness::with_bvi();
            crate::graph::harness::deny_dns_out(&mut h.t, 1);
            // Bridge `lab` snoops IGMP/MLD (a small table: full tables are reached too).
            let mut bridges = h.t.bridges.to_vec();
            bridges[0].snoop = Some(std::sync::Arc::new(crate::l2::snoop::SnoopSettings {
                flood_unregistered: false,
                max_groups_per_member: 8,
                ..Default::default()
            }));
            h.t.bridges = bridges.into_boxed_slice();
            h.t.snoop = Some(std::sync::Arc::new(crate::l2::snoop::SnoopTable::new(16)));
            // Multicast routing: a (*,G) and an (S,G) per family, to every routed interface.
            h.add_mcast();
            let fib = h.t.mfib.clone().expect("added");
            let oifs = [0u32, 1, 2]
                .map(|ifx| crate::mfib::Oif { ifx, ttl: 1 })
                .to_vec();
            for (v6, source, group) in [
                (false, 0, 0xef01_0101u128),
                (false, 0x0a00_0002, 0xe801_0101),
                (true, 0, 0xff3e << 112 | 1),
                (true, 0x2001_0db8 << 96 | 2, 0xff3e << 112 | 2),
            ] {
                let key = crate::mfib::MrouteKey {
                    vrf: 0,
                    v6,
                    source,
                    group,
                };
                let _ = fib.set(key, 0, oifs.clone(), crate::mfib::Origin::Kernel);
            }
            let gtp = h.add_gtp();
            for (slot, ue_v4, ue_v6) in [
                (3, 0x0a40_0005, Some(0x2001_0db8_0100_0003)),
                (4, 0x0a40_0006, None),
            ] {
                let c = crate::gtp::Context {
                    apn: 0,
                    peer_teid: 0xabcd_0001,
                    peer: 0x0a01_0009,
                    ue_v4: Some(ue_v4),
                    ue_v6,
                };
                gtp.install(gtp.teid(slot, 1), &c);
            }
            h.add_mpls();
            labelled_features(&mut h);
            bridged_features(&mut h);
            h
        });
        if let Some(f) = h.ctx.flows.as_mut() {
            // Evicted records would pile up: no exporter drains them here.
            f.out.clear();
        }
        h.ctx.cache.flush();
        let before = h.ctx.cache.pool().available();
        let mut rest = data;
        while rest.len() >= 3 {
            let port = (rest[0] & 1) as u16;
            let len = (u16::from_be_bytes([rest[1], rest[2]]) as usize).min(rest.len() - 3);
            let frame = &rest[3..3 + len];
            rest = &rest[3 + len..];
            let Some(mut b) = h.ctx.cache.alloc() else {
                break;
            };
            if !b.fill(frame) {
                h.ctx.cache.free(b);
                continue;
            }
            let mut v = vec![b];
            crate::graph::receive(&mut h.ctx, &h.t, port, &mut v);
            assert!(v.is_empty());
            for q in h.ctx.out.iter_mut() {
                h.ctx.cache.free_all(q);
            }
        }
        h.ctx.cache.flush();
        assert_eq!(h.ctx.cache.pool().available(), before, "buffers leaked");
    });
}

/// Input features where labelled traffic takes them: on eth0 (where the pseudowire's and the
/// transit labels' frames come in) and on eth1.100 (the pseudowire's circuit), each an ACL
/// denying DNS, a QoS policy (on eth0 a class of EXP 5 setting EXP 2; on eth1.100 one class
/// setting DSCP 46 and EXP 5) and `flow: in`, with a flow cache; eth1's output ACL kept.
fn labelled_features(h: &mut crate::graph::harness::Harness) {
    use crate::feature::{IfFeatures, Step};
    use crate::graph::harness::{deny_dns, mark_all};
    use std::sync::Arc;
    let mut transit = mark_all(None, Some(2));
    let exp5 = classify::Rule::any()
        .exact(classify::Dim::EtherType, 0x8847)
        .exact(classify::Dim::Exp, 5);
    transit.classifier = Arc::new(classify::Classifier::compile(&[exp5]));
    let mut all = h.t.features.to_vec();
    for (ifx, qos) in [(0, transit), (2, mark_all(Some(46), Some(5)))] {
        let input = vec![
            Step::Acl(Arc::new(deny_dns().0)),
            Step::Qos(Arc::new(qos)),
            Step::Flow,
        ];
        all[ifx] = Some(Arc::new(IfFeatures::new(input, vec![]).expect("valid")));
    }
    h.t.features = all.into_boxed_slice();
    h.t.any_features = true;
    h.add_flows();
}

/// Services on members of bridge `lab`: on eth1.200 and on eth1.11 (whose frames carry their
/// customers' tags inside its S-tag) an ACL denying DNS, a QoS class setting DSCP 46 and CoS 5,
/// and `flow: in`; on eth1.300 the same as its output arc (so flooded copies and switched frames
/// go through l2-output).
fn bridged_features(h: &mut crate::graph::harness::Harness) {
    use crate::feature::{IfFeatures, Step};
    use crate::graph::harness::{deny_dns, mark_all};
    use std::sync::Arc;
    let steps = || {
        let mut q = mark_all(Some(46), None);
        q.classes[0].set_cos = Some(5);
        vec![
            Step::Acl(Arc::new(deny_dns().0)),
            Step::Qos(Arc::new(q)),
            Step::Flow,
        ]
    };
    let mut all = h.t.features.to_vec();
    for ifx in [3, 6] {
        all[ifx] = Some(Arc::new(IfFeatures::new(steps(), vec![]).expect("valid")));
    }
    all[4] = Some(Arc::new(IfFeatures::new(vec![], steps()).expect("valid")));
    h.t.features = all.into_boxed_slice();
}

/// `data` as what a broken or hostile server left in an shm port's file: its first three bytes
/// choose a layout (1 or 2 queues, 2..=16 slots, 64..=319 bytes a slot), the header is made
/// right, and the rest of the file (every ring's indices, lengths and frames) is `data`'s
/// remaining bytes, repeated. A client maps it, reads every queue twice and sends on each.
/// Asserted: no panic, no frame longer than a slot, every buffer back in the pool.
#[cfg(target_os = "linux")]
pub fn shm_region(data: &[u8]) {
    use crate::buffer::{BufCache, Pool};
    use crate::port::shm::{Layout, ShmPort};
    use crate::port::{RxQueue, TxQueue};
    let [a, b, c, rest @ ..] = data else {
        return;
    };
    let layout = Layout {
        queues: 1 + u32::from(a & 1),
        slots: 2 << (b % 4),
        slot_bytes: 64 + u32::from(*c),
    };
    let path = std::env::temp_dir().join(format!("lr-fuzz-shm-{}", std::process::id()));
    let server = ShmPort::serve(&path, layout).expect("a file in the temporary directory");
    if !rest.is_empty() {
        let mut f = std::fs::read(&path).expect("its own file");
        for (i, x) in f[4096..].iter_mut().enumerate() {
            *x = rest[i % rest.len()];
        }
        // Written through the file, not the mapping: the server's view is the same memory.
        std::fs::write(&path, &f).expect("its own file");
    }
    let client = ShmPort::connect(&path).expect("the layout is good");
    thread_local! {
        // A pool is never freed (its buffers' memory lives as long as the process): one for
        // every input.
        static POOL: std::sync::Arc<Pool> = Pool::new(256);
    }
    let pool = POOL.with(|p| p.clone());
    let mut cache = BufCache::new(pool.clone());
    let before = pool.available();
    for q in 0..layout.queues {
        let mut rx = client.rx_queue(q);
        let mut got = Vec::new();
        for _ in 0..2 {
            rx.rx_burst(&mut cache, &mut got, 64);
            rx.take_rx_errors();
        }
        assert!(got.iter().all(|b| b.len() <= layout.slot_bytes as usize));
        cache.free_all(&mut got);
        let mut tx = client.tx_queue(q);
        let mut v = vec![cache.alloc().expect("room")];
        v[0].fill(&[0xa5; 60]);
        tx.tx_burst(&mut v, &mut cache);
        cache.free_all(&mut v);
    }
    drop(client);
    drop(server);
    cache.flush();
    assert_eq!(pool.available(), before, "buffers leaked");
}

/// `data` as one rtnetlink datagram: the link monitor's decoder (`RTM_NEWLINK`, `RTM_DELLINK`,
/// `NLMSG_ERROR`, `NLMSG_DONE`, the `ifinfomsg` attributes), then the reader of the kernel's
/// answer to the XDP attach (`RTM_SETLINK`, with extended-ack attributes).
#[cfg(target_os = "linux")]
pub fn rtnetlink(data: &[u8]) {
    use crate::port::link::{messages, Msg};
    let mut n = 0;
    for m in messages(data) {
        n += 1;
        if let Msg::Link(ev) = m {
            assert!(!ev.removed || !ev.admin_up && !ev.oper_up);
            assert!(ev.admin_up || !ev.oper_up, "oper up implies admin up");
        }
    }
    // Each message takes at least a 16-byte header.
    assert!(n <= data.len() / 16);
    let _ = crate::port::af_xdp::parse_setlink_ack(data);
}

/// `data` as cells on an ATM port's receive queue (a first byte per train: how many of the
/// following cells it holds, the time advancing 3 ms a train so reassembly timeouts fire):
/// every PDU the reassembler hands on is on a configured VC, fits a buffer, and segments and
/// reassembles back to itself; no buffer is lost, whatever the cells were.
pub fn atm(data: &[u8]) {
    use crate::atm::reassembly::Reassembler;
    use crate::atm::segmentation::Segmenter;
    use crate::atm::{AtmPortState, TrafficClass, VcConfig};
    use packet::atm::{self as wire, CELL, PREFIX};
    // One pool for every run: a pool's memory is never freed (buffers may outlive it).
    thread_local! {
        static POOL: std::sync::Arc<crate::Pool> = crate::Pool::new(512);
    }
    let pool = POOL.with(|p| p.clone());
    let mut cache = crate::BufCache::new(pool.clone());
    let vcs = |class| {
        vec![
            VcConfig {
                vpi: 0,
                vci: 32,
                class: TrafficClass::Ubr,
            },
            VcConfig {
                vpi: 1,
                vci: 40,
                class,
            },
        ]
    };
    let st = AtmPortState::new(vcs(TrafficClass::Ubr), 2_000_000);
    let mut r = Reassembler::new(st.clone());
    let back = AtmPortState::new(vcs(TrafficClass::Cbr { pcr: 100_000 }), 2_000_000);
    let mut seg = Segmenter::new(back.clone());
    let mut check = Reassembler::new(back.clone());
    let (mut out, mut oam) = (Vec::new(), Vec::new());
    let mut rest = data;
    let mut now = 0u64;
    while let Some((&n, tail)) = rest.split_first() {
        let take = (usize::from(n % 40) * CELL).min(tail.len());
        let (train, more) = tail.split_at(take);
        rest = more;
        now += 3_000_000;
        r.push_train(train, now, &mut cache, &mut out, &mut oam);
        r.expire(now, &mut cache);
        assert!(oam.len() <= take / CELL);
        for b in out.drain(..) {
            let d = b.data();
            assert!(d.len() >= PREFIX && d.len() <= crate::buffer::MAX_FRAME);
            assert!(
                st.vc(wire::sunatm_vc(d)).is_some(),
                "a PDU on a configured VC"
            );
            let sdu = d[PREFIX..].to_vec();
            // Out through the segmenter (shaped on 1/40) and in again: the same SDU.
            seg.push_pdu(b, now * 1000, &mut cache);
            seg.run(u64::MAX / 2, &mut cache);
            let mut trains = Vec::new();
            seg.take_trains(&mut trains);
            let mut again = Vec::new();
            for t in trains {
                check.push_train(t.data(), now, &mut cache, &mut again, &mut oam);
                cache.free(t);
            }
            assert_eq!(again.len(), 1, "one PDU back");
            assert_eq!(&again[0].data()[PREFIX..], &sdu[..]);
            cache.free_all(&mut again);
        }
        oam.clear();
    }
    r.clear(&mut cache);
    check.clear(&mut cache);
    seg.clear(&mut cache);
    cache.flush();
    assert_eq!(pool.available(), pool.capacity(), "no buffer lost");
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A netlink header of type `ty` around `payload`.
    fn msg(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut m = ((16 + payload.len()) as u32).to_ne_bytes().to_vec();
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(payload);
        m
    }

    #[test]
    fn rtnetlink_survives_odd_datagrams() {
        let mut link = vec![0u8; 16];
        link[8] = 1; // IFF_UP
        link.extend_from_slice(&[8, 0, 3, 0, b'e', b't', b'h', 0]); // IFLA_IFNAME
        link.extend_from_slice(&[3, 0, 4, 0]); // IFLA_MTU, too short
        let cases = [
            vec![],
            vec![0xff; 15],
            msg(libc::RTM_NEWLINK, &link),
            msg(libc::RTM_DELLINK, &link[..16]),
            msg(libc::RTM_NEWLINK, &link[..15]),
            msg(libc::NLMSG_ERROR as u16, &[0, 0, 0, 0x80]),
            msg(libc::NLMSG_ERROR as u16, &[0xff; 40]),
            msg(libc::NLMSG_DONE as u16, &[]),
            // A length that claims more than the datagram holds.
            [&u32::MAX.to_ne_bytes()[..], &[16, 0, 0, 0]].concat(),
        ];
        for c in &cases {
            rtnetlink(c);
        }
        for (name, c) in packet::fuzz_inputs::saved("rtnetlink") {
            eprintln!("{name}");
            rtnetlink(&c);
        }
    }

    #[test]
    fn atm_reassembly_survives_odd_cells_and_loses_no_buffer() {
        use packet::atm::{self as wire, vc_key};
        let mut good = Vec::new();
        wire::segment(vc_key(0, 32), &[7u8; 100], 0, &mut good).unwrap();
        wire::segment(vc_key(1, 40), &[8u8; 9000], 0, &mut good).unwrap();
        let cells = good.len() / wire::CELL;
        let mut whole = vec![39u8];
        whole.extend_from_slice(&good[..39 * wire::CELL]);
        whole.push(39);
        whole.extend_from_slice(&good[39 * wire::CELL..78 * wire::CELL]);
        whole.push(39);
        whole.extend_from_slice(&good[78 * wire::CELL..(cells.min(117)) * wire::CELL]);
        whole.push(39);
        whole.extend_from_slice(&good[117.min(cells) * wire::CELL..]);
        let cases = [vec![], vec![5, 1, 2, 3], whole.clone(), {
            let mut w = whole.clone();
            w[300] ^= 0x55;
            w
        }];
        for c in &cases {
            atm(c);
        }
        for (name, c) in packet::fuzz_inputs::saved("atm") {
            eprintln!("{name}");
            atm(&c);
        }
    }

    #[test]
    fn an_shm_client_survives_any_ring_contents() {
        let cases: [&[u8]; 6] = [
            &[],
            &[0, 0, 0],
            &[1, 3, 255, 0xff],
            &[0, 1, 0, 7, 0, 0, 0, 0, 0, 0, 0],
            &[
                1, 2, 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 2, 3,
            ],
            &[0, 0, 200, 40, 0, 0, 0],
        ];
        for c in cases {
            shm_region(c);
        }
        for (name, c) in packet::fuzz_inputs::saved("shm_region") {
            eprintln!("{name}");
            shm_region(&c);
        }
    }

    #[test]
    fn the_graph_survives_odd_frames_and_loses_no_buffer() {
        let h = crate::graph::harness::ip4([10, 0, 0, 2], [10, 1, 0, 5], 64);
        let ttl1 = crate::graph::harness::ip4([10, 0, 0, 2], [10, 1, 0, 5], 1);
        let mut cases: Vec<Vec<u8>> = vec![vec![], vec![0; 3], vec![1, 0xff, 0xff, 1, 2]];
        // Labelled: swapped, popped, into the VRF, a pseudowire's (short), a deep stack.
        use crate::graph::harness::mpls;
        let ip = &h[14..];
        let labelled = [
            mpls(&[(100, 64)], ip),
            mpls(&[(101, 2)], ip),
            mpls(&[(102, 64)], ip),
            mpls(&[(1000, 64)], &[0, 0, 0, 0, 1, 2]),
            mpls(&[(103, 64), (100, 3), (101, 1), (0, 9), (2, 1)], ip),
        ];
        for f in [&h, &ttl1, &h[..20].to_vec(), &vec![0xff; 100]]
            .into_iter()
            .chain(labelled.iter())
        {
            let mut c = vec![0, (f.len() >> 8) as u8, f.len() as u8];
            c.extend_from_slice(f);
            cases.push(c);
        }
        // Bridged on port 1 through members with services: VLAN 200 (broadcast, then to the
        // learned sender), and S-tag 11 with a customer's C-tag inside.
        let tag = |f: &[u8], tags: &[[u8; 4]]| {
            let mut t = vec![0xff; 6];
            t.extend_from_slice(&[2, 0, 0, 0, 0x20, 1]);
            for x in tags {
                t.extend_from_slice(x);
            }
            t.extend_from_slice(&f[12..]);
            t
        };
        let v200 = tag(&h, &[[0x81, 0x00, 0x00, 200]]);
        let mut back = tag(&h, &[[0x81, 0x00, 0x00, 200]]);
        back[..6].copy_from_slice(&[2, 0, 0, 0, 0x20, 1]);
        back[6..12].copy_from_slice(&[2, 0, 0, 0, 0x20, 2]);
        let qinq = tag(&h, &[[0x88, 0xa8, 0x00, 11], [0x81, 0x00, 0x00, 7]]);
        for f in [v200, back, qinq] {
            let mut c = vec![1, (f.len() >> 8) as u8, f.len() as u8];
            c.extend_from_slice(&f);
            cases.push(c);
        }
        for c in &cases {
            graph(c);
        }
        for (name, c) in packet::fuzz_inputs::saved("graph") {
            eprintln!("{name}");
            graph(&c);
        }
    }
}
