//! LDP signalling speed: two of Linerate's LDP speakers (the daemon's service threads, over the
//! kernel's UDP and TCP on loopback addresses 127.0.0.1 and 127.0.0.2) signal N pseudowires to
//! each other. Measured per round, from the moment both speakers start: the session coming up
//! (hello, TCP, initialization, keepalive) and then every pseudowire up on both sides (mappings
//! both ways, parameters checked). Also the bytes on the wire per pseudowire and what the
//! engine keeps per pseudowire.

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use control::config::mpls::LdpCfg;
use control::ldp::engine::{EngineCfg, PwSpec, PwState, State};
use control::ldp::service::{Hooks, Service};
use control::ldp::Ldp;
use serde::Serialize;

pub struct Opts {
    pub pws: usize,
    pub rounds: usize,
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub pws: usize,
    pub round: usize,
    /// Both speakers started -> both sessions operational.
    pub session_ms: f64,
    /// Sessions operational -> every pseudowire up on both sides.
    pub signalled_ms: f64,
    /// PDUs and bytes the active side sent for the whole exchange, per pseudowire.
    pub pdus_out: u64,
    pub wire_bytes_per_pw: f64,
    /// What an engine keeps per pseudowire (its settings and state, name included).
    pub engine_bytes_per_pw: usize,
}

fn speaker(me: Ipv4Addr, peer: Ipv4Addr, n: usize) -> Arc<Ldp> {
    let pws = (0..n)
        .map(|i| PwSpec {
            name: format!("pw{i}"),
            peer,
            pw_id: i as u32 + 1,
            pw_type: 4,
            control_word: true,
            mtu: 1500,
            local_label: 16 + i as u32,
            ac_up: true,
        })
        .collect();
    let lcfg = LdpCfg {
        router_id: me,
        transport: me,
        hello_interval_ms: 100,
        hold_time: 15,
        keepalive: 30,
        neighbors: vec![],
        interfaces: vec![],
        link_hello_interval_ms: 5000,
        link_hold_time: 15,
        label_range: control::config::mpls::LDP_LABEL_RANGE,
        origin: Default::default(),
    };
    let ecfg = EngineCfg {
        lsr_id: me,
        transport: me,
        hello_interval_ms: 100,
        hold_time: 15,
        keepalive: 30,
        neighbors: vec![],
        pws,
        links: vec![],
        link_hello_interval_ms: 1000,
        link_hold_time: 3,
        label_range: (16_000, 99_999),
        egress: vec![(me, 32)],
    };
    Ldp::new(lcfg, ecfg)
}

pub fn run(o: &Opts) -> Result<Vec<Row>, String> {
    let (a, b) = (Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(127, 0, 0, 2));
    let mut rows = Vec::new();
    for round in 0..o.rounds {
        let (la, lb) = (speaker(a, b, o.pws), speaker(b, a, o.pws));
        let up = Arc::new(Mutex::new((0usize, 0usize)));
        let sink = |side: usize| -> control::ldp::service::SignalledSink {
            let up = up.clone();
            Box::new(move |s| {
                let n = s.iter().filter(|x| x.3).count();
                let mut u = up.lock().unwrap_or_else(|e| e.into_inner());
                if side == 0 {
                    u.0 = n
                } else {
                    u.1 = n
                }
            })
        };
        let start = Instant::now();
        let hooks = |i| Hooks {
            signalled: sink(i),
            circuits: Box::new(Default::default),
            routes: Box::new(Vec::new),
            bindings: Box::new(|_| {}),
        };
        let sa = Service::start(la.clone(), hooks(0), None)?;
        let sb = Service::start(lb.clone(), hooks(1), None)?;
        let operational = |l: &Ldp, peer| {
            l.engine()
                .sessions
                .get(&peer)
                .is_some_and(|s| s.state == State::Operational)
        };
        let mut session = None;
        let deadline = start + Duration::from_secs(30);
        loop {
            if session.is_none() && operational(&la, b) && operational(&lb, a) {
                session = Some(start.elapsed());
            }
            let u = *up.lock().unwrap_or_else(|e| e.into_inner());
            if session.is_some() && u.0 == o.pws && u.1 == o.pws {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "round {round}: not signalled within 30 s (session {session:?}, up {u:?})"
                ));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let done = start.elapsed();
        let session = session.unwrap_or(done);
        // b (127.0.0.2) is the active side; its counters cover the whole exchange.
        let (pdus_out, wire) = {
            let e = lb.engine();
            let s = &e.sessions[&a];
            (s.pdus_out, s.bytes_out)
        };
        let engine_bytes_per_pw = std::mem::size_of::<PwSpec>()
            + std::mem::size_of::<PwState>()
            + format!("pw{}", o.pws / 2).len();
        drop((sa, sb));
        rows.push(Row {
            pws: o.pws,
            round,
            session_ms: session.as_secs_f64() * 1e3,
            signalled_ms: (done - session).as_secs_f64() * 1e3,
            pdus_out,
            wire_bytes_per_pw: wire as f64 / o.pws.max(1) as f64,
            engine_bytes_per_pw,
        });
    }
    Ok(rows)
}
