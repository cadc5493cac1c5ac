//! Two engines signalling to each other through real bytes (the wire between them is these
//! tests' loop), and one fed what a broken or hostile peer sends.

use super::*;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn pw(name: &str, peer: Ipv4Addr, id: u32, label: u32, cw: bool) -> PwSpec {
    PwSpec {
        name: name.into(),
        peer,
        pw_id: id,
        pw_type: 5,
        control_word: cw,
        mtu: 1500,
        local_label: label,
        ac_up: true,
    }
}

fn cfg(me: Ipv4Addr, pws: Vec<PwSpec>) -> EngineCfg {
    EngineCfg {
        lsr_id: me,
        transport: me,
        hello_interval_ms: 1000,
        hold_time: 3,
        keepalive: 6,
        neighbors: vec![],
        pws,
        links: vec![],
        link_hello_interval_ms: 1000,
        link_hold_time: 3,
        label_range: (16_000, 99_999),
        egress: vec![(me, 32), (Ipv4Addr::new(10, 0, 0, 0), 24)],
    }
}

/// Moves hellos, connections and bytes between two engines until nothing moves.
fn run(a: &mut Engine, b: &mut Engine, now: u64) {
    for _ in 0..20 {
        let mut moved = false;
        for (to, pdu) in a.hellos(now) {
            if to == B {
                b.hello_in(now, A, &pdu);
                moved = true;
            }
        }
        for (to, pdu) in b.hellos(now) {
            if to == A {
                a.hello_in(now, B, &pdu);
                moved = true;
            }
        }
        // One link between them: what each says on it, the other hears.
        for (_, pdu) in a.link_hellos(now) {
            if !b.cfg.links.is_empty() {
                b.link_hello_in(now, 0, A, &pdu);
                moved = true;
            }
        }
        for (_, pdu) in b.link_hellos(now) {
            if !a.cfg.links.is_empty() {
                a.link_hello_in(now, 0, B, &pdu);
                moved = true;
            }
        }
        // A's transport address is lower: B opens the connection, A accepts it.
        for (lsr, _) in b.to_connect(now) {
            assert_eq!(lsr, A);
            if a.accepted(now, B).is_some() {
                b.connected(now, A);
                moved = true;
            }
        }
        assert!(
            a.to_connect(now).is_empty(),
            "the lower address never opens"
        );
        moved |= carry(a, b, now);
        moved |= carry(b, a, now);
        a.tick(now);
        b.tick(now);
        // What the timers queued (labels worked out again) goes on the next round.
        moved |= [&*a, &*b]
            .iter()
            .any(|e| e.sessions.values().any(|s| !s.out.is_empty()));
        if !moved {
            break;
        }
    }
}

/// What `x` queued for `y` goes to `y`.
fn carry(x: &mut Engine, y: &mut Engine, now: u64) -> bool {
    let (me, peer) = (x.cfg.lsr_id, y.cfg.lsr_id);
    let Some(s) = x.sessions.get_mut(&peer) else {
        return false;
    };
    let out = std::mem::take(&mut s.out);
    if out.is_empty() {
        return false;
    }
    y.bytes_in(now, me, &out);
    true
}

fn state(e: &Engine, name: &str) -> (u32, bool, bool) {
    let s = e.signalled();
    let (_, l, cw, up) = s.iter().find(|x| x.0 == name).unwrap();
    (*l, *cw, *up)
}

#[test]
fn a_pseudowire_comes_up_with_each_sides_label() {
    let mut a = Engine::new(cfg(A, vec![pw("pw1", B, 100, 16, true)]));
    let mut b = Engine::new(cfg(B, vec![pw("pw1", A, 100, 40, true)]));
    run(&mut a, &mut b, 0);
    assert_eq!(a.sessions[&B].state, State::Operational);
    assert_eq!(b.sessions[&A].state, State::Operational);
    assert!(!a.sessions[&B].active && b.sessions[&A].active);
    assert_eq!(a.sessions[&B].addresses, vec![B]);
    assert_eq!(state(&a, "pw1"), (40, true, true));
    assert_eq!(state(&b, "pw1"), (16, true, true));
    assert!(a.events.contains(&LdpEvent::SessionUp { peer: B }));
    assert!(a.events.contains(&LdpEvent::PwUp { name: "pw1".into() }));
    assert_eq!(a.sessions[&B].keepalive, 6);
    // Each is the egress of its address and subnet: implicit null, kept by the other.
    let n: std::net::IpAddr = "10.0.0.0".parse().unwrap();
    assert_eq!(a.prefix_bindings.get(&(B, B.into(), 32)), Some(&3));
    assert_eq!(a.prefix_bindings.get(&(B, n, 24)), Some(&3));
    assert_eq!(b.prefix_bindings.get(&(A, A.into(), 32)), Some(&3));
}

#[test]
fn the_control_word_falls_back_when_the_peer_does_not_use_it() {
    let mut a = Engine::new(cfg(A, vec![pw("pw1", B, 100, 16, true)]));
    let mut b = Engine::new(cfg(B, vec![pw("pw1", A, 100, 40, false)]));
    run(&mut a, &mut b, 0);
    // A withdrew its mapping with the word and mapped again without (RFC 4447 7).
    assert_eq!(state(&a, "pw1"), (40, false, true));
    assert_eq!(state(&b, "pw1"), (16, false, true));
}

#[test]
fn mismatched_mtus_keep_the_pseudowire_down_and_say_why() {
    let mut a = Engine::new(cfg(A, vec![pw("pw1", B, 100, 16, false)]));
    let mut other = pw("pw1", A, 100, 40, false);
    other.mtu = 9000;
    let mut b = Engine::new(cfg(B, vec![other]));
    run(&mut a, &mut b, 0);
    assert!(!state(&a, "pw1").2);
    assert_eq!(a.pws[0].why, "MTU mismatch (local 1500, remote 9000)");
}

#[test]
fn a_circuit_going_down_is_signalled_by_pw_status_and_back() {
    let mut a = Engine::new(cfg(A, vec![pw("pw1", B, 100, 16, false)]));
    let mut b = Engine::new(cfg(B, vec![pw("pw1", A, 100, 40, false)]));
    run(&mut a, &mut b, 0);
    a.set_ac(10, "pw1", false);
    run(&mut a, &mut b, 10);
    assert!(!state(&a, "pw1").2);
    assert_eq!(a.pws[0].why, "attachment circuit down");
    assert!(!state(&b, "pw1").2);
    assert_eq!(b.pws[0].why, "peer not forwarding (status 0x6)");
    a.set_ac(20, "pw1", true);
    run(&mut a, &mut b, 20);
    assert!(state(&a, "pw1").2 && state(&b, "pw1").2);
}

#[test]
fn thousands_of_pseudowires_go_in_pdus_within_the_peers_limit() {
    let n = 3072;
    let pa = (0..n)
        .map(|i| pw(&format!("pw{i}"), B, i, 16 + i, true))
        .collect();
    let pb = (0..n)
        .map(|i| pw(&format!("pw{i}"), A, i, 5000 + i, true))
        .collect();
    let mut a = Engine::new(cfg(A, pa));
    let mut b = Engine::new(cfg(B, pb));
    run(&mut a, &mut b, 0);
    assert!(a.signalled().iter().all(|x| x.3));
    assert_eq!(state(&a, "pw3071"), (5000 + 3071, true, true));
    assert_eq!(state(&b, "pw17"), (16 + 17, true, true));
    // 3,072 mappings of ~40 bytes: many PDUs, none over 4,096 bytes.
    assert!(a.sessions[&B].pdus_out > 25, "{}", a.sessions[&B].pdus_out);
}

#[test]
fn keepalives_keep_the_session_and_silence_ends_it() {
    let mut a = Engine::new(cfg(A, vec![pw("pw1", B, 100, 16, false)]));
    let mut b = Engine::new(cfg(B, vec![pw("pw1", A, 100, 40, false)]));
    run(&mut a, &mut b, 0);
    // Hellos every second, keepalives every 2 s (6 s / 3): ten seconds of both, still up.
    for t in (1..=10).map(|s| s * 1000) {
        run(&mut a, &mut b, t);
    }
    assert_eq!(a.sessions[&B].state, State::Operational);
    // B goes silent: A's hello adjacency (3 s) runs out first and ends the session.
    for t in (11..=15).map(|s| s * 1000) {
        a.tick(t);
        let _ = a.hellos(t);
    }
    assert!(!a.sessions.contains_key(&B) || a.sessions[&B].state != State::Operational);
    assert!(!state(&a, "pw1").2);
    assert!(a.events.iter().any(
        |e| matches!(e, LdpEvent::SessionDown { why, .. } if why == "hello adjacency expired")
    ));
}

#[test]
fn a_withdraw_takes_the_peers_label_away_and_is_released() {
    let mut a = Engine::new(cfg(A, vec![pw("pw1", B, 100, 16, false)]));
    let mut b = Engine::new(cfg(B, vec![pw("pw1", A, 100, 40, false)]));
    run(&mut a, &mut b, 0);
    let mut pdu = PduBuilder::new(B, 0);
    ldp::encode(
        &mut pdu,
        99,
        &Msg::LabelWithdraw {
            fecs: vec![Fec::PwId {
                control_word: false,
                pw_type: 5,
                group: 0,
                pw_id: Some(100),
                mtu: None,
                vlan: None,
            }],
            label: Some(40),
        },
    );
    a.bytes_in(5, B, &pdu.finish());
    assert!(!state(&a, "pw1").2);
    assert_eq!(a.pws[0].why, "no label from the peer");
    let (_, msgs) = ldp::decode_pdu(&a.sessions[&B].out).unwrap();
    assert!(matches!(
        &msgs[..],
        [Msg::LabelRelease {
            label: Some(40),
            ..
        }]
    ));
}

#[test]
fn malformed_input_gets_the_rfcs_notification_never_a_panic() {
    let mut a = Engine::new(cfg(A, vec![pw("pw1", B, 100, 16, false)]));
    let mut b = Engine::new(cfg(B, vec![pw("pw1", A, 100, 40, false)]));
    run(&mut a, &mut b, 0);
    // An unknown message type without the U bit: a non-fatal "unknown message" and on.
    let mut pdu = PduBuilder::new(B, 0);
    pdu.message(0x3f00, 7, |_| {});
    a.bytes_in(1, B, &pdu.finish());
    assert_eq!(a.sessions[&B].state, State::Operational);
    let (_, msgs) =
        ldp::decode_pdu(&std::mem::take(&mut a.sessions.get_mut(&B).unwrap().out)).unwrap();
    assert!(
        matches!(&msgs[..], [Msg::Notification(s)] if s.code == status::UNKNOWN_MESSAGE && !s.fatal)
    );
    // A PDU of the wrong version: fatal, the session ends and its connection is closed.
    a.bytes_in(2, B, &[0, 9, 0, 6, 10, 0, 0, 2, 0, 0]);
    assert!(a.sessions[&B].close);
    assert_eq!(a.sessions[&B].state, State::Initialized);
    assert!(!state(&a, "pw1").2);
    assert_eq!(a.stats.malformed, 2);
    // Garbage before any session: a hello that does not parse is counted.
    a.hello_in(3, B, &[1, 2, 3]);
    assert_eq!(a.stats.malformed, 3);
}

#[test]
fn hellos_from_strangers_and_link_hellos_are_ignored() {
    let mut a = Engine::new(cfg(A, vec![pw("pw1", B, 100, 16, false)]));
    let stranger = Ipv4Addr::new(10, 0, 0, 9);
    let mut s = Engine::new(cfg(stranger, vec![pw("pw1", A, 100, 40, false)]));
    for (_, pdu) in s.hellos(0) {
        a.hello_in(0, stranger, &pdu);
    }
    assert!(a.adjacencies.is_empty());
    assert_eq!(a.stats.hellos_ignored, 1);
}

/// An engine with basic discovery on one link and no pseudowires.
fn linked(me: Ipv4Addr) -> Engine {
    let mut c = cfg(me, vec![]);
    c.links = vec![LinkSpec {
        name: "core".into(),
        host: "lr-core".into(),
        address: me,
    }];
    Engine::new(c)
}

fn route(p: &str, len: u8, via: &[Ipv4Addr]) -> fec::FecRoute {
    fec::FecRoute {
        prefix: p.parse().unwrap(),
        len,
        next_hops: via.to_vec(),
    }
}

const OUTSIDE: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 9);

#[test]
fn link_hellos_alone_bring_a_session_up() {
    let (mut a, mut b) = (linked(A), linked(B));
    run(&mut a, &mut b, 0);
    assert_eq!(a.sessions[&B].state, State::Operational);
    let kinds: Vec<_> = a.adjacencies.keys().copied().collect();
    assert_eq!(kinds, vec![(B, Discovery::Link(0))]);
    // The link adjacency's hold is the lower proposal (3 s here), and the session ends with it.
    for _ in 0..3 {
        let _ = a.link_hellos(1000);
    }
    a.tick(10_000);
    assert!(a.adjacencies.is_empty());
    assert!(a
        .events
        .iter()
        .any(|e| matches!(e, LdpEvent::SessionDown { peer, .. } if *peer == B)));
}

#[test]
fn a_targeted_hello_on_a_link_or_a_link_hello_targeted_is_ignored() {
    let (mut a, mut t) = (
        linked(A),
        Engine::new(cfg(B, vec![pw("pw1", A, 1, 16, false)])),
    );
    for (_, pdu) in t.hellos(0) {
        a.link_hello_in(0, 0, B, &pdu);
    }
    let mut l = linked(B);
    for (_, pdu) in l.link_hellos(0) {
        // A targets nobody: a link hello is no targeted one.
        a.hello_in(0, B, &pdu);
    }
    assert!(a.adjacencies.is_empty());
    assert_eq!(a.stats.hellos_ignored, 2);
}

#[test]
fn prefix_labels_follow_ordered_control_from_the_egress_back() {
    // B reaches 10.9.0.0/16 outside the MPLS domain (its egress); A reaches it through B.
    let (mut a, mut b) = (linked(A), linked(B));
    b.set_routes(0, vec![route("10.9.0.0", 16, &[OUTSIDE])]);
    a.set_routes(0, vec![route("10.9.0.0", 16, &[B])]);
    run(&mut a, &mut b, 0);
    let n: Ipv4Addr = "10.9.0.0".parse().unwrap();
    let bb = b.fec_bindings();
    assert_eq!(bb.len(), 1);
    assert_eq!(bb[0].local, Some(16_000), "B is the egress: it advertises");
    assert_eq!(
        bb[0].out,
        vec![(OUTSIDE, None)],
        "and pops towards an IP next hop"
    );
    let ab = a.fec_bindings();
    assert_eq!(ab[0].out, vec![(B, Some(16_000))], "A swaps to B's label");
    assert_eq!(ab[0].local, Some(16_000));
    assert_eq!(b.prefix_bindings.get(&(A, n.into(), 16)), Some(&16_000));
    assert!(a.fec_changed && b.fec_changed);

    // B's route goes: B withdraws; A, ordered, withdraws its own, and its next hop is left
    // with no label.
    a.fec_changed = false;
    b.set_routes(1, vec![]);
    run(&mut a, &mut b, 1);
    assert!(b.fec_bindings().is_empty());
    let ab = a.fec_bindings();
    assert_eq!((ab[0].local, ab[0].out.clone()), (None, vec![(B, None)]));
    assert!(a.fec_changed);
    assert!(!b.prefix_bindings.contains_key(&(A, n.into(), 16)));
    assert!(!a.prefix_bindings.contains_key(&(B, n.into(), 16)));

    // It comes back: labels again, B's from the range's next (16,000 is on its way back).
    b.set_routes(2, vec![route("10.9.0.0", 16, &[OUTSIDE])]);
    run(&mut a, &mut b, 2);
    assert_eq!(a.fec_bindings()[0].out, vec![(B, Some(16_001))]);
    assert!(a.fec_bindings()[0].local.is_some());
}

#[test]
fn a_peer_that_is_the_egress_gives_implicit_null_and_a_used_up_range_is_counted() {
    let (mut a, mut b) = (linked(A), linked(B));
    a.cfg.label_range = (16_000, 16_000);
    a.labels = fec::Labels::new(a.cfg.label_range);
    // B's own address and subnet: B maps them to implicit null, and A's routes to them get no
    // label pushed (the packet goes on as IP: penultimate-hop popping).
    let b_host = route("10.0.0.2", 32, &[B]);
    a.set_routes(0, vec![b_host, route("10.7.0.0", 16, &[OUTSIDE])]);
    run(&mut a, &mut b, 0);
    let ab = a.fec_bindings();
    let host = ab.iter().find(|x| x.len == 32).unwrap();
    assert_eq!(host.out, vec![(B, Some(dataplane::mpls::IMPLICIT_NULL))]);
    // Two FECs to label, one label in the range: one waits, counted.
    assert_eq!(ab.iter().filter(|x| x.local.is_some()).count(), 1);
    assert!(a.stats.labels_exhausted > 0);
}
