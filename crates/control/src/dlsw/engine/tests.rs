//! Engines back to back: an origin DLSw with a terminal station on its LAN, one or two target
//! DLSws with a host on theirs, SSP carried byte for byte between them, the LAN stations being
//! LLC2 stations of their own ([`Station`]), so every exchange is checked end to end.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use packet::llc2::{self, Control, Unnumbered};

use super::*;

const HOST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x99];

fn term(i: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, 1, i]
}

fn cfg(local: [u8; 4], peers: &[[u8; 4]], load_balance: bool) -> EngineCfg {
    EngineCfg {
        local: Ipv4Addr::from(local),
        peers: peers.iter().map(|p| Ipv4Addr::from(*p)).collect(),
        keepalive_ms: 1_000,
        dead_after: 3,
        pacing_window: 20,
        llc2: Timers::default(),
        load_balance,
        explorer_ms: 2_000,
        cache_ms: 600_000,
        lan_ports: vec![0],
        max_circuits: 1000,
    }
}

/// An end station's side of one link.
struct End {
    st: Station,
    got: Vec<Vec<u8>>,
    events: Vec<StEvent>,
    /// TEST and XID responses received (their info).
    tests: usize,
    xids: Vec<Vec<u8>>,
}

impl End {
    fn new() -> End {
        End {
            st: Station::new(Timers::default()),
            got: vec![],
            events: vec![],
            tests: 0,
            xids: vec![],
        }
    }
}

struct Net {
    now: u64,
    /// engines[0] is the origin; the rest are targets with the host on their LAN.
    e: Vec<Engine>,
    /// Terminal ends on the origin's LAN, by MAC.
    terms: HashMap<[u8; 6], End>,
    /// The host's ends, by the terminal MAC they talk to.
    host: HashMap<[u8; 6], End>,
    /// Frames the host received per target engine.
    host_frames: Vec<usize>,
}

impl Net {
    fn new(targets: usize, load_balance: bool) -> Net {
        let peers: Vec<[u8; 4]> = (0..targets).map(|k| [10, 0, 0, 2 + k as u8]).collect();
        let mut e = vec![Engine::new(cfg([10, 0, 0, 1], &peers, load_balance))];
        for p in &peers {
            e.push(Engine::new(cfg(*p, &[[10, 0, 0, 1]], false)));
        }
        let mut n = Net {
            now: 1,
            e,
            terms: HashMap::new(),
            host: HashMap::new(),
            host_frames: vec![0; targets + 1],
        };
        for k in 0..targets {
            n.e[0].peer_connected(n.now, k);
            n.e[k + 1].peer_connected(n.now, 0);
        }
        n.run();
        for k in 0..targets {
            assert_eq!(n.e[0].peers[k].state, PeerState::Connected);
            assert_eq!(n.e[k + 1].peers[0].state, PeerState::Connected);
        }
        n
    }

    /// Moves SSP and LAN frames until nothing moves.
    fn run(&mut self) {
        for _ in 0..10_000 {
            let mut moved = false;
            for k in 1..self.e.len() {
                let a = std::mem::take(&mut self.e[0].peers[k - 1].out);
                let b = std::mem::take(&mut self.e[k].peers[0].out);
                moved |= !a.is_empty() || !b.is_empty();
                if !a.is_empty() {
                    self.e[k].peer_bytes(self.now, 0, &a);
                }
                if !b.is_empty() {
                    self.e[0].peer_bytes(self.now, k - 1, &b);
                }
            }
            for k in 0..self.e.len() {
                let out = std::mem::take(&mut self.e[k].lan_out);
                moved |= !out.is_empty();
                for (_, f) in out {
                    if k == 0 {
                        self.deliver_term(&f);
                    } else {
                        self.deliver_host(k, &f);
                    }
                }
            }
            if !moved {
                return;
            }
        }
        panic!("the network never went quiet");
    }

    fn deliver_term(&mut self, f: &[u8]) {
        let p = llc2::parse(f).expect("the engine sends well-formed LLC");
        let now = self.now;
        let Some(t) = self.terms.get_mut(&p.dst) else {
            return;
        };
        match p.control {
            Control::U {
                kind: Unnumbered::Test,
                ..
            } => t.tests += 1,
            Control::U {
                kind: Unnumbered::Xid,
                ..
            } => t.xids.push(p.info.to_vec()),
            c => {
                let mut tx = vec![];
                t.st.on_frame(now, c, p.response, p.info, &mut tx, &mut t.events);
                if t.events.contains(&StEvent::ConnectRequest) {
                    t.st.accept(now, &mut tx);
                }
                for e in t.events.drain(..) {
                    if let StEvent::Data(d) = e {
                        t.got.push(d);
                    }
                }
                let src = p.dst;
                for x in tx {
                    self.e[0].lan_frame(now, 0, &wrap(src, HOST, &x));
                }
            }
        }
    }

    /// The host answers TEST and XID, accepts every SABME, and keeps its data.
    fn deliver_host(&mut self, k: usize, f: &[u8]) {
        let p = llc2::parse(f).expect("the engine sends well-formed LLC");
        if p.dst != HOST {
            return;
        }
        self.host_frames[k] += 1;
        let now = self.now;
        let reply = |control, info: &[u8]| {
            llc2::frame(&llc2::Frame {
                dst: p.src,
                src: HOST,
                dsap: p.ssap,
                ssap: if p.dsap == 0 { 4 } else { p.dsap },
                response: true,
                control,
                info,
            })
        };
        match p.control {
            Control::U {
                kind: Unnumbered::Test,
                pf,
            } if !p.response => {
                let r = reply(
                    Control::U {
                        kind: Unnumbered::Test,
                        pf,
                    },
                    p.info,
                );
                self.e[k].lan_frame(now, 0, &r);
            }
            Control::U {
                kind: Unnumbered::Xid,
                pf,
            } if !p.response => {
                let r = reply(
                    Control::U {
                        kind: Unnumbered::Xid,
                        pf,
                    },
                    &llc2::xid0_t2(0x017, 1),
                );
                self.e[k].lan_frame(now, 0, &r);
            }
            c => {
                let h = self.host.entry(p.src).or_insert_with(End::new);
                let mut tx = vec![];
                h.st.on_frame(now, c, p.response, p.info, &mut tx, &mut h.events);
                if h.events.contains(&StEvent::ConnectRequest) {
                    h.st.accept(now, &mut tx);
                }
                for e in h.events.drain(..) {
                    if let StEvent::Data(d) = e {
                        h.got.push(d);
                    }
                }
                for x in tx {
                    self.e[k].lan_frame(now, 0, &wrap(HOST, p.src, &x));
                }
            }
        }
    }

    /// Terminal `i` sends a U frame to the host.
    fn term_u(&mut self, i: u8, kind: Unnumbered, info: &[u8]) {
        self.terms.entry(term(i)).or_insert_with(End::new);
        let f = llc2::frame(&llc2::Frame {
            dst: HOST,
            src: term(i),
            dsap: 4,
            ssap: 4,
            response: false,
            control: Control::U { kind, pf: true },
            info,
        });
        self.e[0].lan_frame(self.now, 0, &f);
        self.run();
    }

    /// Terminal `i` connects to the host as an SNA PU would: TEST, XID, SABME.
    fn bring_up(&mut self, i: u8) {
        self.term_u(i, Unnumbered::Test, b"");
        assert_eq!(self.terms[&term(i)].tests, 1, "TEST answered");
        self.term_u(i, Unnumbered::Xid, &llc2::xid0_t2(0x05d, i as u32));
        assert_eq!(
            self.terms[&term(i)].xids,
            vec![llc2::xid0_t2(0x017, 1).to_vec()]
        );
        let t = self.terms.get_mut(&term(i)).unwrap();
        let mut tx = vec![];
        t.st.connect(self.now, &mut tx);
        for x in tx {
            self.e[0].lan_frame(self.now, 0, &wrap(term(i), HOST, &x));
        }
        self.run();
        assert_eq!(self.terms[&term(i)].st.state, StState::Connected);
        assert_eq!(self.host[&term(i)].st.state, StState::Connected);
    }

    fn advance(&mut self, ms: u64) {
        for _ in 0..ms / 10 {
            self.now += 10;
            for e in &mut self.e {
                e.tick(self.now);
            }
            self.run();
            let now = self.now;
            // The end stations' own timers.
            let mut sends = vec![];
            for (mac, t) in self.terms.iter_mut() {
                let mut tx = vec![];
                t.st.tick(now, &mut tx, &mut t.events);
                sends.extend(tx.into_iter().map(|x| (0, wrap(*mac, HOST, &x))));
            }
            for (mac, h) in self.host.iter_mut() {
                let mut tx = vec![];
                h.st.tick(now, &mut tx, &mut h.events);
                sends.extend(tx.into_iter().map(|x| (1, wrap(HOST, *mac, &x))));
            }
            for (k, f) in sends {
                self.e[k].lan_frame(now, 0, &f);
            }
            self.run();
        }
    }
}

fn wrap(src: [u8; 6], dst: [u8; 6], t: &Tx) -> Vec<u8> {
    llc2::frame(&llc2::Frame {
        dst,
        src,
        dsap: 4,
        ssap: 4,
        response: t.response,
        control: t.control,
        info: &t.info,
    })
}

#[test]
fn a_circuit_comes_up_carries_data_both_ways_and_goes_down() {
    let mut n = Net::new(1, false);
    n.bring_up(1);
    assert_eq!(n.e[0].circuit_count(), 1);
    assert_eq!(n.e[1].circuit_count(), 1);
    let c = n.e[0].circuits().next().unwrap();
    assert_eq!(c.state, CircuitState::Connected);
    // 100 frames each way, interleaved: host data, terminal responses.
    for k in 0..100u32 {
        let mut tx = vec![];
        let h = n.host.get_mut(&term(1)).unwrap();
        h.st.send(n.now, k.to_be_bytes().repeat(32), &mut tx);
        for x in tx {
            n.e[1].lan_frame(n.now, 0, &wrap(HOST, term(1), &x));
        }
        n.run();
        let mut tx = vec![];
        let t = n.terms.get_mut(&term(1)).unwrap();
        t.st.send(n.now, (k + 1000).to_be_bytes().repeat(32), &mut tx);
        for x in tx {
            n.e[0].lan_frame(n.now, 0, &wrap(term(1), HOST, &x));
        }
        n.run();
        n.advance(20);
    }
    n.advance(500);
    let t = &n.terms[&term(1)];
    let h = &n.host[&term(1)];
    assert_eq!(t.got.len(), 100);
    assert_eq!(h.got.len(), 100);
    for k in 0..100u32 {
        assert_eq!(t.got[k as usize], k.to_be_bytes().repeat(32));
        assert_eq!(h.got[k as usize], (k + 1000).to_be_bytes().repeat(32));
    }
    assert_eq!(
        t.st.backlog() + h.st.backlog(),
        0,
        "everything acknowledged"
    );
    let c = n.e[0].circuits().next().unwrap();
    assert_eq!((c.from_station, c.to_station), (100, 100));
    // Local acknowledgement: the WAN carried INFOFRAMEs only (and pacing), no RR.
    assert_eq!(n.e[0].peers[0].stats.info_out, 100);
    assert_eq!(n.e[1].peers[0].stats.info_out, 100);
    // The terminal leaves: DISC through HALT_DL reaches the host; both sides forget.
    let mut tx = vec![];
    n.terms
        .get_mut(&term(1))
        .unwrap()
        .st
        .disconnect(n.now, &mut tx);
    for x in tx {
        n.e[0].lan_frame(n.now, 0, &wrap(term(1), HOST, &x));
    }
    n.run();
    assert_eq!(n.host[&term(1)].st.state, StState::Disconnected);
    assert_eq!(n.terms[&term(1)].st.state, StState::Disconnected);
    assert_eq!((n.e[0].circuit_count(), n.e[1].circuit_count()), (0, 0));
    assert_eq!(n.e[0].peers[0].circuits, 0);
    assert!(n.e[0]
        .events
        .iter()
        .any(|e| matches!(e, DlswEvent::CircuitUp { .. })));
    assert!(n.e[0]
        .events
        .iter()
        .any(|e| matches!(e, DlswEvent::CircuitDown { .. })));
}

#[test]
fn pacing_holds_a_sender_to_its_window_and_grants_more() {
    let mut n = Net::new(1, false);
    n.bring_up(1);
    // 200 frames from the host at once: the target's window (20) is used up and granted again
    // as the origin takes them; none is lost or reordered.
    let mut tx = vec![];
    let h = n.host.get_mut(&term(1)).unwrap();
    for k in 0..200u32 {
        h.st.send(n.now, k.to_be_bytes().to_vec(), &mut tx);
    }
    for x in tx {
        n.e[1].lan_frame(n.now, 0, &wrap(HOST, term(1), &x));
    }
    n.run();
    n.advance(3_000);
    let t = &n.terms[&term(1)];
    assert_eq!(t.got.len(), 200);
    assert!(t
        .got
        .iter()
        .enumerate()
        .all(|(k, d)| d[..] == (k as u32).to_be_bytes()));
    // Grants came back as flow control acknowledgements.
    assert!(n.e[1].peers[0].stats.messages_in > 200 / 20);
}

#[test]
fn a_lost_peer_takes_its_circuits_down_and_the_stations_are_told() {
    let mut n = Net::new(1, false);
    n.bring_up(1);
    n.bring_up(2);
    n.e[0].peer_closed(n.now, 0, "test");
    n.run();
    for i in [1, 2] {
        assert_eq!(
            n.terms[&term(i)].st.state,
            StState::Disconnected,
            "DISC to {i}"
        );
    }
    assert_eq!(n.e[0].circuit_count(), 0);
    assert!(
        n.e[0].reachability().0.is_empty(),
        "the host is no longer reachable"
    );
    assert!(n.e[0]
        .events
        .iter()
        .any(|e| matches!(e, DlswEvent::PeerDown { circuits: 2, .. })));
}

#[test]
fn a_silent_peer_is_declared_down_after_the_dead_interval() {
    let mut n = Net::new(1, false);
    n.bring_up(1);
    // The target stops answering: nothing it sends arrives any more.
    for _ in 0..400 {
        n.now += 10;
        n.e[0].tick(n.now);
        n.e[0].peers[0].out.clear();
        n.e[1].peers[0].out.clear();
        if n.e[0].peers[0].state == PeerState::Disconnected {
            break;
        }
    }
    assert_eq!(n.e[0].peers[0].state, PeerState::Disconnected);
    assert!(
        n.now <= 1 + 3 * 1000 + 1000,
        "within dead-after keepalives: {}",
        n.now
    );
}

#[test]
fn circuits_are_spread_over_redundant_peers_and_move_when_one_fails() {
    let mut n = Net::new(2, true);
    for i in 1..=8 {
        n.bring_up(i);
    }
    let per_peer: Vec<u32> = n.e[0].peers.iter().map(|p| p.circuits).collect();
    assert_eq!(per_peer, vec![4, 4]);
    // Peer 1 fails: its four circuits end; the stations come back through peer 2.
    n.e[0].peer_closed(n.now, 0, "test");
    n.run();
    let down: Vec<u8> = (1..=8)
        .filter(|i| n.terms[&term(*i)].st.state == StState::Disconnected)
        .collect();
    assert_eq!(down.len(), 4);
    for i in down {
        n.terms.remove(&term(i));
        n.host.remove(&term(i));
        n.bring_up(i);
    }
    assert_eq!(n.e[0].peers[1].circuits, 8);
    assert_eq!(n.e[0].circuit_count(), 8);
}

#[test]
fn an_unreachable_partner_ends_the_circuit_after_the_explorer_wait() {
    let mut n = Net::new(1, false);
    let nobody = [0x02, 0, 0, 0, 0, 0x55];
    n.terms.insert(term(1), End::new());
    let f = llc2::frame(&llc2::Frame {
        dst: nobody,
        src: term(1),
        dsap: 4,
        ssap: 4,
        response: false,
        control: Control::U {
            kind: Unnumbered::Sabme,
            pf: true,
        },
        info: &[],
    });
    n.e[0].lan_frame(n.now, 0, &f);
    n.run();
    assert_eq!(n.e[0].circuit_count(), 1);
    assert_eq!(
        n.e[0].circuits().next().unwrap().state,
        CircuitState::Resolving
    );
    n.advance(2_500);
    assert_eq!(n.e[0].circuit_count(), 0);
    assert_eq!(n.e[0].stats.explorers_timed_out, 1);
}

#[test]
fn a_bad_capabilities_request_is_refused_and_garbage_closes_the_connection() {
    let mut e = Engine::new(cfg([10, 0, 0, 1], &[[10, 0, 0, 2]], false));
    e.peer_connected(0, 0);
    e.peers[0].out.clear();
    // A request without the SAP list.
    let mut m = Vec::new();
    let caps = dlsw::Capabilities {
        vendor: [0, 0, 0x0c],
        version: (1, 0),
        pacing_window: 20,
        version_string: String::new(),
        saps: [0xff; 16],
        tcp_connections: None,
    };
    dlsw::write_capex_request(&mut m, &caps);
    // Drop the last vector (the SAP list: 18 bytes) and fix both lengths.
    m.truncate(m.len() - 18);
    let g = (m.len() - dlsw::CONTROL_HEADER) as u16;
    m[2..4].copy_from_slice(&g.to_be_bytes());
    m[dlsw::CONTROL_HEADER..dlsw::CONTROL_HEADER + 2].copy_from_slice(&g.to_be_bytes());
    e.peer_bytes(1, 0, &m);
    assert!(e.peers[0].close);
    let r = dlsw::parse(&e.peers[0].out).unwrap();
    assert_eq!(
        dlsw::parse_capex(r.data),
        Ok(dlsw::CapEx::Refuse {
            pointer: 0,
            cause: dlsw::refuse::NO_SAP_LIST
        })
    );
    assert!(matches!(e.events[..], [DlswEvent::CapRefused { .. }]));
    // A stream that is not SSP.
    let mut e = Engine::new(cfg([10, 0, 0, 1], &[[10, 0, 0, 2]], false));
    e.peer_connected(0, 0);
    e.peer_bytes(1, 0, b"GET / HTTP/1.1\r\n");
    assert!(e.peers[0].close);
    assert_eq!(e.peers[0].stats.malformed, 1);
}

#[test]
fn malformed_lan_frames_are_counted_and_change_nothing() {
    let mut n = Net::new(1, false);
    let before = n.e[0].circuit_count();
    for bad in [&[0u8; 10][..], &[0xff; 20][..], &[0u8; 60][..]] {
        n.e[0].lan_frame(n.now, 0, bad);
    }
    n.run();
    assert_eq!(n.e[0].stats.lan_malformed, 3);
    assert_eq!(n.e[0].circuit_count(), before);
    assert!(n.e[0].lan_out.is_empty());
}
