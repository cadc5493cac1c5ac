//! LDP signalling speed: two of Linerate's LDP speakers (the daemon's service threads, over the
//! kernel's UDP and TCP on loopback addresses 127.0.0.1 and 127.0.0.2) signal N pseudowires to
//! each other. Measured per round, from the moment both speakers start: the session coming up
//! (hello, TCP, initialization, keepalive) and then every pseudowire up on both sides (mappings
//! both ways, parameters checked). Also the bytes on the wire per pseudowire and what the
//! engine keeps per pseudowire.
//!
//! With `fecs`, each speaker also has that many routes: 127.0.0.2 reaches them outside the MPLS
//! domain (their egress), 127.0.0.1 through 127.0.0.2. Measured: from the sessions up to every
//! route of 127.0.0.1 swapping to 127.0.0.2's label and 127.0.0.2 holding 127.0.0.1's (ordered
//! control: 127.0.0.1 advertises each once 127.0.0.2's label came).

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use control::config::mpls::LdpCfg;
use control::ldp::engine::fec::{FecBinding, FecRoute};
use control::ldp::engine::{EngineCfg, PwSpec, PwState, State};
use control::ldp::service::{Hooks, Service};
use control::ldp::Ldp;
use serde::Serialize;

pub struct Opts {
    pub pws: usize,
    /// Prefix FECs (routes) per speaker.
    pub fecs: usize,
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
    pub fecs: usize,
    /// Sessions operational -> every FEC labelled both ways (0 without FECs).
    pub fecs_ms: f64,
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
        // Targeted at the peer also without pseudowires (a FEC-only run).
        neighbors: vec![peer],
        pws,
        links: vec![],
        link_hello_interval_ms: 1000,
        link_hold_time: 3,
        // The whole label space: runs of more routes than the default range holds.
        label_range: (16_000, dataplane::mpls::MAX_LABEL),
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
        // 127.0.0.2 is the egress of N /24s from 32.0.0.0 (an address outside the domain); 127.0.0.1
        // reaches them through it.
        let routes = |via: Ipv4Addr, n: usize| -> Vec<FecRoute> {
            (0..n as u32)
                .map(|i| FecRoute {
                    prefix: Ipv4Addr::from(0x2000_0000 + (i << 8)),
                    len: 24,
                    next_hops: vec![via],
                })
                .collect()
        };
        let labelled = Arc::new(Mutex::new(0usize));
        let hooks = |i: usize| {
            let (via, l) = if i == 0 {
                (b, labelled.clone())
            } else {
                (Ipv4Addr::new(192, 0, 2, 1), Arc::new(Mutex::new(0)))
            };
            let n = o.fecs;
            Hooks {
                signalled: sink(i),
                circuits: Box::new(Default::default),
                // The routes never change: read once.
                routes: Box::new(move |since| (since == 0).then(|| (1, routes(via, n)))),
                bindings: Box::new(move |bs: Vec<FecBinding>| {
                    let done = bs
                        .iter()
                        .filter(|x| x.out.iter().all(|o| o.1.is_some()))
                        .count();
                    *l.lock().unwrap_or_else(|e| e.into_inner()) = done;
                }),
            }
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
        let mut pws_done = None;
        let deadline = start + Duration::from_secs(60);
        let fecs_done = || {
            *labelled.lock().unwrap_or_else(|e| e.into_inner()) == o.fecs
                && lb.engine().prefix_bindings.len() >= o.fecs
        };
        loop {
            if session.is_none() && operational(&la, b) && operational(&lb, a) {
                session = Some(start.elapsed());
            }
            let u = *up.lock().unwrap_or_else(|e| e.into_inner());
            if session.is_some() && pws_done.is_none() && u.0 == o.pws && u.1 == o.pws {
                pws_done = Some(start.elapsed());
            }
            if pws_done.is_some() && fecs_done() {
                break;
            }
            if Instant::now() > deadline {
                let (ea, eb) = (la.engine(), lb.engine());
                return Err(format!(
                    "round {round}: not signalled within 60 s (session {session:?}, up {u:?}, FECs labelled {}; first speaker: sessions {:?}, {} FECs advertised, {} labels held; second: {} FECs advertised, {} labels held)",
                    *labelled.lock().unwrap_or_else(|e| e.into_inner()),
                    ea.sessions.values().map(|s| s.state).collect::<Vec<_>>(),
                    ea.fecs.values().filter(|f| f.local.is_some()).count(),
                    ea.prefix_bindings.len(),
                    eb.fecs.values().filter(|f| f.local.is_some()).count(),
                    eb.prefix_bindings.len(),
                ));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let done = start.elapsed();
        let session = session.unwrap_or(done);
        let pws_done = pws_done.unwrap_or(done);
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
            signalled_ms: (pws_done - session).as_secs_f64() * 1e3,
            fecs: o.fecs,
            fecs_ms: if o.fecs == 0 {
                0.0
            } else {
                (done - session).as_secs_f64() * 1e3
            },
            pdus_out,
            wire_bytes_per_pw: wire as f64 / o.pws.max(1) as f64,
            engine_bytes_per_pw,
        });
    }
    Ok(rows)
}
