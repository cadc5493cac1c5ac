//! SNA endpoints over LLC2 on Ethernet, as the DLSw+ report's test tools emulated them
//! (sans I/O): on the *terminal* LAN, type 2.0 PUs with their LUs; on the *host* LAN, the host
//! they all talk to.
//!
//! A PU comes up as a real one does: TEST to the host's MAC (answered by the DLSw router in
//! front of it), a format 0 XID (fixed, PU 2.0) exchanged end to end, SABME/UA; then the link
//! is an LLC2 connection ([`control::dlsw::station::Station`], T1 2 s, Ti 30 s, N2 8 as the
//! report's Dominos). A PU whose link goes down starts again at once (TEST), which is what DL-2
//! times.
//!
//! Traffic is transactions: per LU, the host sends a 128-byte data frame (an SNA PIU: FID2
//! transmission header, request header, the tester's signature) and the PU answers with a
//! 128-byte definite response carrying the same LU and sequence number. Each side checks what
//! it receives (order per LU, signature), and the host times each transaction.

use std::collections::{HashMap, VecDeque};

use control::dlsw::station::{Event, State, Station, Timers, Tx};
use packet::llc2::{self, Control, Unnumbered};

/// The SAP SNA PUs use here.
pub const SAP: u8 = llc2::SNA_SAP;
/// Bytes of a data frame's and a response's information field (the report's 128 bytes).
pub const PIU_LEN: usize = 128;
/// The signature's magic, after the 9 bytes of TH and RH.
const MAGIC: [u8; 4] = *b"LRSN";
const SIG_AT: usize = 9;
/// An answer to TEST or XID not back in this long: the PU tries again.
const SETUP_TIMEOUT_MS: u64 = 2_000;

/// The report's Domino LLC2 parameters: T1 2 s, Ti 30 s, 8 retries.
pub fn domino_timers() -> Timers {
    Timers {
        t1_ms: 2_000,
        ti_ms: 30_000,
        n2: 8,
        window: 7,
        ack_delay_ms: 100,
        ack_max: 3,
    }
}

/// The MAC of terminal PU `i` (locally administered).
pub fn pu_mac(i: u32) -> [u8; 6] {
    let b = i.to_be_bytes();
    [0x02, 0x00, 0x5e, b[1], b[2], b[3]]
}

/// The host's MAC.
pub const HOST_MAC: [u8; 6] = [0x02, 0x00, 0x5e, 0xff, 0x00, 0x01];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PuState {
    Idle,
    TestSent,
    XidSent,
    Connecting,
    Active,
    /// Told to leave: disconnects and stays down.
    Leaving,
}

struct Pu {
    mac: [u8; 6],
    state: PuState,
    st: Station,
    since: u64,
    /// Per LU: the next sequence number expected from the host.
    expect: Vec<u32>,
    /// When the link last went down (ms), while it is down after having been up.
    down_at: Option<u64>,
}

/// A host's end of one PU's link, with that PU's LUs.
struct HostEnd {
    st: Station,
    /// Per LU: next sequence number to send, and when each outstanding one was sent (ns).
    next_seq: Vec<u32>,
    outstanding: Vec<VecDeque<(u32, u64)>>,
    up: bool,
}

/// What the endpoints counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnaCounts {
    /// Host data frames sent, and received by the PUs.
    pub data_sent: u64,
    pub data_received: u64,
    /// PU responses sent, and received by the host.
    pub responses_sent: u64,
    pub responses_received: u64,
    /// Frames whose signature or order was wrong.
    pub corrupt: u64,
    pub out_of_order: u64,
    /// Transactions the host could not send because the link was down or busy.
    pub skipped: u64,
    /// Links that went down after being up.
    pub link_drops: u64,
    /// Transaction times (host send to response), microseconds.
    pub rtt_sum_us: u64,
    pub rtt_max_us: u64,
}

impl SnaCounts {
    /// Frames of SNA data both ways (the report's frames).
    pub fn frames(&self) -> u64 {
        self.data_received + self.responses_received
    }
}

/// The endpoints: PUs on the terminal LAN and the host on the host LAN.
pub struct Endpoints {
    pus: Vec<Pu>,
    by_mac: HashMap<[u8; 6], usize>,
    host: Vec<HostEnd>,
    timers: Timers,
    /// Transactions due: (due time ns, PU, LU), in due order (every LU has the same period).
    due: VecDeque<(u64, u32, u16)>,
    period_ns: u64,
    pub counts: SnaCounts,
    /// Frames to send: (to the terminal LAN?, frame).
    pub out: Vec<(bool, Vec<u8>)>,
    /// Transaction times, microseconds (for percentiles).
    pub rtts: Vec<u32>,
    /// When every PU was last up at once (ms), and downtime records of links (down, up ms).
    pub recoveries: Vec<(u64, u64)>,
    tx: Vec<Tx>,
    ev: Vec<Event>,
    last_scan: u64,
}

/// How often the endpoints' timers are scanned (ms): well inside the ack delay (100 ms).
const SCAN_MS: u64 = 5;

fn piu(response: bool, lu: u16, seq: u32, t_ns: u64) -> Vec<u8> {
    let mut p = vec![0u8; PIU_LEN];
    // FID2 TH: format/flags, reserved, DAF', OAF', sequence number.
    p[0] = 0x2c;
    p[2] = (lu & 0xff) as u8;
    p[3] = 0x01;
    p[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
    // RH: a request (definite response asked for) or its positive response.
    p[6] = if response { 0x83 } else { 0x03 };
    p[7] = 0x80;
    p[SIG_AT..SIG_AT + 4].copy_from_slice(&MAGIC);
    p[13..15].copy_from_slice(&lu.to_be_bytes());
    p[15..19].copy_from_slice(&seq.to_be_bytes());
    p[19..27].copy_from_slice(&t_ns.to_be_bytes());
    for (i, b) in p[27..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31) ^ (seq as u8);
    }
    p
}

/// (response?, LU, sequence, send time) of a PIU the tester made; None if it is not one.
fn read_piu(p: &[u8]) -> Option<(bool, u16, u32, u64)> {
    if p.len() != PIU_LEN || p[SIG_AT..SIG_AT + 4] != MAGIC {
        return None;
    }
    let seq = u32::from_be_bytes(p[15..19].try_into().ok()?);
    let ok = p[27..]
        .iter()
        .enumerate()
        .all(|(i, b)| *b == (i as u8).wrapping_mul(31) ^ (seq as u8));
    if !ok {
        return None;
    }
    Some((
        p[6] & 0x80 != 0,
        u16::from_be_bytes([p[13], p[14]]),
        seq,
        u64::from_be_bytes(p[19..27].try_into().ok()?),
    ))
}

impl Endpoints {
    /// `lus[i]`: the LUs of PU `i`; each LU does `tps` transactions per second.
    pub fn new(lus: &[u16], tps: f64) -> Endpoints {
        let timers = domino_timers();
        let pus: Vec<Pu> = lus
            .iter()
            .enumerate()
            .map(|(i, &n)| Pu {
                mac: pu_mac(i as u32),
                state: PuState::Idle,
                st: Station::new(timers),
                since: 0,
                expect: vec![0; n as usize],
                down_at: None,
            })
            .collect();
        let host = lus
            .iter()
            .map(|&n| HostEnd {
                st: Station::new(timers),
                next_seq: vec![0; n as usize],
                outstanding: vec![VecDeque::new(); n as usize],
                up: false,
            })
            .collect();
        let by_mac = pus.iter().enumerate().map(|(i, p)| (p.mac, i)).collect();
        Endpoints {
            pus,
            by_mac,
            host,
            timers,
            due: VecDeque::new(),
            period_ns: (1e9 / tps.max(1e-3)) as u64,
            counts: SnaCounts::default(),
            out: Vec::new(),
            rtts: Vec::new(),
            recoveries: Vec::new(),
            tx: Vec::new(),
            ev: Vec::new(),
            last_scan: 0,
        }
    }

    pub fn pus(&self) -> usize {
        self.pus.len()
    }

    /// PUs whose link is up.
    pub fn active(&self) -> usize {
        self.pus
            .iter()
            .filter(|p| p.state == PuState::Active)
            .count()
    }

    /// Every PU told to leave has its link down (its DISC answered, or given up on).
    pub fn all_left(&self) -> bool {
        self.pus
            .iter()
            .all(|p| p.state == PuState::Leaving && p.st.state == State::Disconnected)
    }

    /// PUs down after having been up (waiting to recover).
    pub fn recovering(&self) -> usize {
        self.pus.iter().filter(|p| p.down_at.is_some()).count()
    }

    fn term_frame(&mut self, pu: usize, control: Control, response: bool, info: &[u8]) {
        let f = llc2::frame(&llc2::Frame {
            dst: HOST_MAC,
            src: self.pus[pu].mac,
            dsap: SAP,
            ssap: SAP,
            response,
            control,
            info,
        });
        self.out.push((true, f));
    }

    fn host_frame(&mut self, pu: usize, control: Control, response: bool, info: &[u8]) {
        let f = llc2::frame(&llc2::Frame {
            dst: self.pus[pu].mac,
            src: HOST_MAC,
            dsap: SAP,
            ssap: SAP,
            response,
            control,
            info,
        });
        self.out.push((false, f));
    }

    /// Starts bringing PU `i` up (TEST).
    fn start(&mut self, now: u64, i: usize) {
        self.pus[i].state = PuState::TestSent;
        self.pus[i].since = now;
        self.term_frame(
            i,
            Control::U {
                kind: Unnumbered::Test,
                pf: true,
            },
            false,
            b"",
        );
    }

    /// A frame received on the terminal LAN.
    pub fn on_term(&mut self, now: u64, frame: &[u8]) {
        let Ok(f) = llc2::parse(frame) else {
            return;
        };
        let Some(&i) = self.by_mac.get(&f.dst) else {
            return;
        };
        if f.src != HOST_MAC {
            return;
        }
        match f.control {
            Control::U {
                kind: Unnumbered::Test,
                ..
            } if f.response => {
                if self.pus[i].state == PuState::TestSent {
                    self.pus[i].state = PuState::XidSent;
                    self.pus[i].since = now;
                    let x = llc2::xid0_t2(0x05d, i as u32);
                    self.term_frame(
                        i,
                        Control::U {
                            kind: Unnumbered::Xid,
                            pf: true,
                        },
                        false,
                        &x,
                    );
                }
            }
            Control::U {
                kind: Unnumbered::Xid,
                ..
            } if f.response => {
                if self.pus[i].state == PuState::XidSent {
                    self.pus[i].state = PuState::Connecting;
                    self.pus[i].since = now;
                    let mut tx = std::mem::take(&mut self.tx);
                    self.pus[i].st = Station::new(self.timers);
                    self.pus[i].st.connect(now, &mut tx);
                    self.send_term(i, &mut tx);
                    self.tx = tx;
                }
            }
            Control::U {
                kind: Unnumbered::Test | Unnumbered::Xid,
                ..
            } => {}
            c => {
                let mut tx = std::mem::take(&mut self.tx);
                let mut ev = std::mem::take(&mut self.ev);
                self.pus[i]
                    .st
                    .on_frame(now, c, f.response, f.info, &mut tx, &mut ev);
                self.pu_events(now, i, &mut tx, &mut ev);
                self.send_term(i, &mut tx);
                self.tx = tx;
                self.ev = ev;
            }
        }
    }

    fn send_term(&mut self, i: usize, tx: &mut Vec<Tx>) {
        for t in tx.drain(..) {
            self.term_frame(i, t.control, t.response, &t.info);
        }
    }

    fn send_host(&mut self, i: usize, tx: &mut Vec<Tx>) {
        for t in tx.drain(..) {
            self.host_frame(i, t.control, t.response, &t.info);
        }
    }

    fn pu_events(&mut self, now: u64, i: usize, tx: &mut Vec<Tx>, ev: &mut Vec<Event>) {
        for e in ev.drain(..) {
            match e {
                Event::ConnectRequest => self.pus[i].st.accept(now, tx),
                Event::Connected => {
                    let p = &mut self.pus[i];
                    if p.state == PuState::Leaving {
                        continue;
                    }
                    p.state = PuState::Active;
                    p.since = now;
                    if let Some(d) = p.down_at.take() {
                        self.recoveries.push((d, now));
                    }
                }
                Event::Data(d) => {
                    let Some((false, lu, seq, t)) = read_piu(&d) else {
                        self.counts.corrupt += 1;
                        continue;
                    };
                    self.counts.data_received += 1;
                    let p = &mut self.pus[i];
                    match p.expect.get_mut(lu as usize) {
                        Some(x) if *x == seq => *x = seq.wrapping_add(1),
                        Some(x) => {
                            self.counts.out_of_order += 1;
                            *x = seq.wrapping_add(1);
                        }
                        None => {
                            self.counts.corrupt += 1;
                            continue;
                        }
                    }
                    p.st.send(now, piu(true, lu, seq, t), tx);
                    self.counts.responses_sent += 1;
                }
                Event::Disconnected(_) => {
                    let p = &mut self.pus[i];
                    if p.state == PuState::Leaving {
                        continue;
                    }
                    if p.state == PuState::Active {
                        self.counts.link_drops += 1;
                        p.down_at = Some(now);
                    }
                    p.state = PuState::Idle;
                    p.since = now;
                    p.expect.iter_mut().for_each(|x| *x = 0);
                }
            }
        }
    }

    /// A frame received on the host LAN.
    pub fn on_host(&mut self, now: u64, now_ns: u64, frame: &[u8]) {
        let Ok(f) = llc2::parse(frame) else {
            return;
        };
        if f.dst != HOST_MAC {
            return;
        }
        let Some(&i) = self.by_mac.get(&f.src) else {
            return;
        };
        let pf = f.control.pf();
        match f.control {
            Control::U {
                kind: Unnumbered::Test,
                ..
            } if !f.response => {
                let info = f.info.to_vec();
                self.host_frame(
                    i,
                    Control::U {
                        kind: Unnumbered::Test,
                        pf,
                    },
                    true,
                    &info,
                );
            }
            Control::U {
                kind: Unnumbered::Xid,
                ..
            } if !f.response => {
                let x = llc2::xid0_t2(0x017, 1);
                self.host_frame(
                    i,
                    Control::U {
                        kind: Unnumbered::Xid,
                        pf,
                    },
                    true,
                    &x,
                );
            }
            Control::U {
                kind: Unnumbered::Test | Unnumbered::Xid,
                ..
            } => {}
            c => {
                let mut tx = std::mem::take(&mut self.tx);
                let mut ev = std::mem::take(&mut self.ev);
                self.host[i]
                    .st
                    .on_frame(now, c, f.response, f.info, &mut tx, &mut ev);
                for e in ev.drain(..) {
                    let h = &mut self.host[i];
                    match e {
                        Event::ConnectRequest => {
                            h.st.accept(now, &mut tx);
                            h.up = true;
                            h.next_seq.iter_mut().for_each(|x| *x = 0);
                            h.outstanding.iter_mut().for_each(|o| o.clear());
                        }
                        Event::Connected => h.up = true,
                        Event::Disconnected(_) => {
                            h.up = false;
                            h.outstanding.iter_mut().for_each(|o| o.clear());
                        }
                        Event::Data(d) => match read_piu(&d) {
                            Some((true, lu, seq, t)) => {
                                self.counts.responses_received += 1;
                                let o = h.outstanding.get_mut(lu as usize);
                                match o.and_then(|o| o.pop_front()) {
                                    Some((s, _)) if s == seq => {
                                        let us = (now_ns.saturating_sub(t) / 1000) as u32;
                                        self.counts.rtt_sum_us += us as u64;
                                        self.counts.rtt_max_us =
                                            self.counts.rtt_max_us.max(us as u64);
                                        if self.rtts.len() < 1_000_000 {
                                            self.rtts.push(us);
                                        }
                                    }
                                    _ => self.counts.out_of_order += 1,
                                }
                            }
                            _ => self.counts.corrupt += 1,
                        },
                    }
                }
                self.send_host(i, &mut tx);
                self.tx = tx;
                self.ev = ev;
            }
        }
    }

    /// Starts the transactions: every LU of every PU, spread evenly over one period.
    pub fn schedule(&mut self, now_ns: u64) {
        self.due.clear();
        let total: usize = self.host.iter().map(|h| h.next_seq.len()).sum();
        let step = self.period_ns / total.max(1) as u64;
        let mut k = 0u64;
        for (i, h) in self.host.iter().enumerate() {
            for lu in 0..h.next_seq.len() {
                self.due.push_back((now_ns + k * step, i as u32, lu as u16));
                k += 1;
            }
        }
    }

    /// Every PU with a link sends DISC (and tries no more).
    pub fn disconnect_all(&mut self, now: u64) {
        let mut tx = std::mem::take(&mut self.tx);
        self.due.clear();
        for i in 0..self.pus.len() {
            self.pus[i].state = PuState::Leaving;
            self.pus[i].down_at = None;
            self.pus[i].st.disconnect(now, &mut tx);
            self.send_term(i, &mut tx);
        }
        self.tx = tx;
    }

    /// Stops the transactions (links stay up).
    pub fn stop_traffic(&mut self) {
        self.due.clear();
    }

    /// Timers, setup retries and the transactions due by `now_ns`.
    pub fn tick(&mut self, now: u64, now_ns: u64) {
        let mut tx = std::mem::take(&mut self.tx);
        let mut ev = std::mem::take(&mut self.ev);
        // The PUs' and host's timers (T1, Ti, acks) and setup retries: scanned every few
        // milliseconds, not on every call (10,000 PUs per call would be the tester's own limit).
        let scan = now >= self.last_scan + SCAN_MS;
        if scan {
            self.last_scan = now;
        }
        for i in (0..self.pus.len()).filter(|_| scan) {
            let p = &self.pus[i];
            if p.state == PuState::Leaving {
                if self.pus[i].st.deadline().is_some_and(|d| now >= d) {
                    self.pus[i].st.tick(now, &mut tx, &mut ev);
                    ev.clear();
                    self.send_term(i, &mut tx);
                }
                continue;
            }
            let stale = matches!(p.state, PuState::TestSent | PuState::XidSent)
                && now >= p.since + SETUP_TIMEOUT_MS;
            if p.state == PuState::Idle || stale {
                self.start(now, i);
                continue;
            }
            if self.pus[i].st.deadline().is_some_and(|d| now >= d) {
                self.pus[i].st.tick(now, &mut tx, &mut ev);
                self.pu_events(now, i, &mut tx, &mut ev);
                self.send_term(i, &mut tx);
            }
            if self.host[i].st.deadline().is_some_and(|d| now >= d) {
                self.host[i].st.tick(now, &mut tx, &mut ev);
                for e in ev.drain(..) {
                    if let Event::Disconnected(_) = e {
                        self.host[i].up = false;
                    }
                }
                self.send_host(i, &mut tx);
            }
        }
        while let Some(&(t, i, lu)) = self.due.front() {
            if t > now_ns {
                break;
            }
            self.due.pop_front();
            self.due.push_back((t + self.period_ns, i, lu));
            let h = &mut self.host[i as usize];
            // One transaction at a time per LU, as a terminal session has: a response not
            // back by the next turn means this turn is skipped.
            if !h.up || h.st.state != State::Connected || !h.outstanding[lu as usize].is_empty() {
                self.counts.skipped += 1;
                continue;
            }
            let seq = h.next_seq[lu as usize];
            h.next_seq[lu as usize] = seq.wrapping_add(1);
            h.outstanding[lu as usize].push_back((seq, now_ns));
            h.st.send(now, piu(false, lu, seq, now_ns), &mut tx);
            self.counts.data_sent += 1;
            self.send_host(i as usize, &mut tx);
        }
        self.tx = tx;
        self.ev = ev;
    }
}

/// The report's PU and LU mix for a rate of `fps` frames per second (one transaction, two
/// frames, per LU per second): below 800 fps one LU per PU; multiples of 800 as PUs of four
/// LUs; between, four-LU PUs up to the multiple of 800 and one-LU PUs for the rest. Returns
/// the LUs of each PU.
pub fn report_mix(fps: u32) -> Vec<u16> {
    let lus = (fps / 2).max(1);
    if fps < 800 {
        return vec![1; lus as usize];
    }
    let four = (fps / 800) * 100;
    let ones = (fps % 800) / 2;
    let mut v = vec![4u16; four as usize];
    v.extend(std::iter::repeat_n(1u16, ones as usize));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_mixes_come_out_as_its_table() {
        let count = |v: &[u16], n: u16| v.iter().filter(|&&x| x == n).count();
        assert_eq!(report_mix(24).len(), 12);
        assert_eq!(report_mix(100).len(), 50);
        let m = report_mix(800);
        assert_eq!((count(&m, 4), count(&m, 1)), (100, 0));
        let m = report_mix(900);
        assert_eq!((count(&m, 4), count(&m, 1)), (100, 50));
        let m = report_mix(1600);
        assert_eq!((count(&m, 4), count(&m, 1)), (200, 0));
        // Two frames per LU per second.
        for f in [24, 50, 100, 800, 900, 1600, 1700] {
            let lus: u32 = report_mix(f).iter().map(|&x| x as u32).sum();
            assert_eq!(lus * 2, f);
        }
    }

    #[test]
    fn a_piu_carries_its_lu_and_sequence_and_damage_is_seen() {
        let p = piu(true, 3, 77, 12345);
        assert_eq!(read_piu(&p), Some((true, 3, 77, 12345)));
        let mut bad = p.clone();
        bad[100] ^= 1;
        assert_eq!(read_piu(&bad), None);
        assert_eq!(read_piu(&p[..100]), None);
    }

    /// Terminal and host LANs joined directly (the host answers for itself): a PU comes up,
    /// transactions flow, every one is answered in order.
    #[test]
    fn pus_come_up_and_transactions_complete_over_a_direct_link() {
        let mut e = Endpoints::new(&[1, 4], 10.0);
        let mut now = 0u64;
        for _ in 0..3000 {
            now += 1;
            let ns = now * 1_000_000;
            if now == 100 {
                e.schedule(ns);
            }
            e.tick(now, ns);
            for _ in 0..10 {
                let out = std::mem::take(&mut e.out);
                if out.is_empty() {
                    break;
                }
                for (to_term_lan, f) in out {
                    // Sent on the terminal LAN: the host receives it; and the reverse.
                    if to_term_lan {
                        e.on_host(now, ns, &f);
                    } else {
                        e.on_term(now, &f);
                    }
                }
            }
        }
        assert_eq!(e.active(), 2);
        let c = e.counts;
        assert!(c.data_sent >= 140, "{c:?}");
        assert!(c.responses_received + 5 >= c.data_sent, "{c:?}");
        assert_eq!((c.corrupt, c.out_of_order, c.link_drops), (0, 0, 0));
    }
}
