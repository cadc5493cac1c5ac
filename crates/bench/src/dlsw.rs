//! `linerate bench dlsw`: the DLSw engine alone on one core, what DL-1 measures without the
//! kernel's TCP, the TAP twins and the punt path: two engines (the terminal side and the host
//! side) joined byte for byte, `circuits` SNA PUs brought up through them (TEST, XID, SABME),
//! then rounds of transactions (a 128-byte data frame from the host to each PU, the PU's
//! 128-byte response back), each end station an LLC2 station of its own.
//!
//! Only the time spent inside the two engines is counted (the stations and the frame shuttle
//! are the test bed): frames/s per core is SNA data frames (both directions) over that time,
//! and since each frame crosses both engines, one engine's share is half of it.

use std::time::{Duration, Instant};

use control::dlsw::engine::{Engine, EngineCfg};
use control::dlsw::station::{Event, Station, Timers, Tx};
use packet::llc2::{self, Control, Unnumbered};

pub struct Opts {
    pub circuits: usize,
    pub seconds: f64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub circuits: usize,
    /// SNA data frames (data and responses) carried, and the engines' time for them.
    pub frames: u64,
    pub engine_s: f64,
    /// Frames per second of one core running both engines.
    pub frames_per_s_both: f64,
    /// One engine's cost per frame, and the frames/s one core gives one engine.
    pub ns_per_frame_one: f64,
    pub frames_per_s_one: f64,
    pub setup_s: f64,
}

const HOST: [u8; 6] = [0x02, 0, 0x5e, 0xff, 0, 1];

fn pu(i: usize) -> [u8; 6] {
    let b = (i as u32).to_be_bytes();
    [0x02, 0, 0x5e, b[1], b[2], b[3]]
}

fn frame(dst: [u8; 6], src: [u8; 6], response: bool, control: Control, info: &[u8]) -> Vec<u8> {
    llc2::frame(&llc2::Frame {
        dst,
        src,
        dsap: 4,
        ssap: 4,
        response,
        control,
        info,
    })
}

struct Bed {
    a: Engine,
    b: Engine,
    pus: Vec<Station>,
    hosts: Vec<Station>,
    now: u64,
    engine: Duration,
    data: u64,
}

fn cfg(local: [u8; 4], peer: [u8; 4], circuits: usize) -> EngineCfg {
    EngineCfg {
        local: local.into(),
        peers: vec![peer.into()],
        keepalive_ms: 0,
        dead_after: 3,
        pacing_window: 20,
        llc2: Timers::default(),
        load_balance: false,
        explorer_ms: 5_000,
        cache_ms: 3_600_000,
        lan_ports: vec![0],
        max_circuits: circuits + 16,
    }
}

impl Bed {
    fn timed<T>(engine: &mut Duration, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let r = f();
        *engine += t.elapsed();
        r
    }

    /// Moves everything until quiet: SSP both ways, LAN frames to the stations, the stations'
    /// answers back to the engines.
    fn run(&mut self) {
        loop {
            let mut moved = false;
            let ab = std::mem::take(&mut self.a.peers[0].out);
            let ba = std::mem::take(&mut self.b.peers[0].out);
            let now = self.now;
            if !ab.is_empty() {
                moved = true;
                Self::timed(&mut self.engine, || self.b.peer_bytes(now, 0, &ab));
            }
            if !ba.is_empty() {
                moved = true;
                Self::timed(&mut self.engine, || self.a.peer_bytes(now, 0, &ba));
            }
            let la = std::mem::take(&mut self.a.lan_out);
            let lb = std::mem::take(&mut self.b.lan_out);
            moved |= !la.is_empty() || !lb.is_empty();
            let mut back_a = Vec::new();
            let mut back_b = Vec::new();
            for (_, f) in la {
                self.station_frame(true, &f, &mut back_a);
            }
            for (_, f) in lb {
                self.station_frame(false, &f, &mut back_b);
            }
            for f in back_a {
                Self::timed(&mut self.engine, || self.a.lan_frame(now, 0, &f));
            }
            for f in back_b {
                Self::timed(&mut self.engine, || self.b.lan_frame(now, 0, &f));
            }
            if !moved {
                return;
            }
        }
    }

    /// A frame the engine sent to a station: on the terminal side (`term`) to a PU, else to
    /// the host; what the station answers goes into `back`.
    fn station_frame(&mut self, term: bool, f: &[u8], back: &mut Vec<Vec<u8>>) {
        let p = llc2::parse(f).expect("the engine sends LLC");
        let i = if term { p.dst } else { p.src };
        let i = u32::from_be_bytes([0, i[3], i[4], i[5]]) as usize;
        let (me, peer) = if term { (pu(i), HOST) } else { (HOST, pu(i)) };
        if !term && p.dst != HOST {
            return;
        }
        match p.control {
            Control::U {
                kind: kind @ (Unnumbered::Test | Unnumbered::Xid),
                pf,
            } => {
                if !p.response {
                    let info = if kind == Unnumbered::Xid {
                        llc2::xid0_t2(0x017, 1).to_vec()
                    } else {
                        p.info.to_vec()
                    };
                    back.push(frame(peer, me, true, Control::U { kind, pf }, &info));
                } else if term && kind == Unnumbered::Test {
                    let x = llc2::xid0_t2(0x05d, i as u32);
                    back.push(frame(
                        HOST,
                        me,
                        false,
                        Control::U {
                            kind: Unnumbered::Xid,
                            pf: true,
                        },
                        &x,
                    ));
                } else if term {
                    let mut tx = Vec::new();
                    self.pus[i].connect(self.now, &mut tx);
                    push(back, HOST, me, tx);
                }
            }
            c => {
                let st = if term {
                    &mut self.pus[i]
                } else {
                    &mut self.hosts[i]
                };
                let (mut tx, mut ev) = (Vec::new(), Vec::new());
                st.on_frame(self.now, c, p.response, p.info, &mut tx, &mut ev);
                for e in ev {
                    match e {
                        Event::ConnectRequest => st.accept(self.now, &mut tx),
                        Event::Data(d) => {
                            self.data += 1;
                            if term {
                                st.send(self.now, d, &mut tx);
                            }
                        }
                        _ => {}
                    }
                }
                push(back, peer, me, tx);
            }
        }
    }
}

fn push(back: &mut Vec<Vec<u8>>, dst: [u8; 6], src: [u8; 6], tx: Vec<Tx>) {
    for t in tx {
        back.push(frame(dst, src, t.response, t.control, &t.info));
    }
}

pub fn run(o: &Opts) -> Result<Row, String> {
    let n = o.circuits.max(1);
    let mut bed = Bed {
        a: Engine::new(cfg([10, 0, 0, 1], [10, 0, 0, 2], n)),
        b: Engine::new(cfg([10, 0, 0, 2], [10, 0, 0, 1], n)),
        pus: (0..n).map(|_| Station::new(Timers::default())).collect(),
        hosts: (0..n).map(|_| Station::new(Timers::default())).collect(),
        now: 1,
        engine: Duration::ZERO,
        data: 0,
    };
    bed.a.peer_connected(1, 0);
    bed.b.peer_connected(1, 0);
    bed.run();
    let t0 = Instant::now();
    for i in 0..n {
        let f = frame(
            HOST,
            pu(i),
            false,
            Control::U {
                kind: Unnumbered::Test,
                pf: true,
            },
            b"",
        );
        bed.a.lan_frame(bed.now, 0, &f);
        bed.run();
    }
    let setup_s = t0.elapsed().as_secs_f64();
    if bed.a.circuit_count() != n || bed.b.circuit_count() != n {
        return Err(format!(
            "{} and {} circuits came up of {n}",
            bed.a.circuit_count(),
            bed.b.circuit_count()
        ));
    }
    let payload = vec![0x5a; 128];
    bed.engine = Duration::ZERO;
    bed.data = 0;
    let until = Instant::now() + Duration::from_secs_f64(o.seconds);
    while Instant::now() < until {
        // One round: a data frame from the host to every PU; the PUs answer as they get them.
        let mut back = Vec::new();
        for i in 0..n {
            let mut tx = Vec::new();
            bed.hosts[i].send(bed.now, payload.clone(), &mut tx);
            push(&mut back, pu(i), HOST, tx);
        }
        for f in back {
            let now = bed.now;
            Bed::timed(&mut bed.engine, || bed.b.lan_frame(now, 0, &f));
        }
        bed.run();
        // The delayed acknowledgements fall due.
        bed.now += 200;
        let now = bed.now;
        let (mut tx, mut ev) = (Vec::new(), Vec::new());
        let mut back = Vec::new();
        for i in 0..n {
            bed.pus[i].tick(now, &mut tx, &mut ev);
            push(&mut back, HOST, pu(i), std::mem::take(&mut tx));
        }
        let mut back_b = Vec::new();
        for i in 0..n {
            bed.hosts[i].tick(now, &mut tx, &mut ev);
            push(&mut back_b, pu(i), HOST, std::mem::take(&mut tx));
        }
        ev.clear();
        Bed::timed(&mut bed.engine, || {
            bed.a.tick(now);
            bed.b.tick(now);
            for f in &back {
                bed.a.lan_frame(now, 0, f);
            }
            for f in &back_b {
                bed.b.lan_frame(now, 0, f);
            }
        });
        bed.run();
    }
    let s = bed.engine.as_secs_f64();
    let both = bed.data as f64 / s;
    Ok(Row {
        circuits: n,
        frames: bed.data,
        engine_s: s,
        frames_per_s_both: both,
        ns_per_frame_one: s * 1e9 / bed.data.max(1) as f64 / 2.0,
        frames_per_s_one: both * 2.0,
        setup_s,
    })
}
