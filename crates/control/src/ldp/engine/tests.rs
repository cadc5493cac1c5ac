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
