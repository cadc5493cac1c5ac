//! An LLC2 link station (IEEE 802.2 type 2, asynchronous balanced mode, modulo 128): one end
//! of a connection-mode link between two MAC/SAP pairs, as a function of the frames it is
//! given and the time (sans I/O). DLSw terminates the end stations' links with one per
//! circuit ("local acknowledgement": the WAN never carries an RR); the tester's SNA endpoints
//! run the same station on their side.
//!
//! What it does, in the standard's terms:
//! - set-up and tear-down: SABME/UA, DISC/UA, DM; a SABME received is held for the owner to
//!   accept or refuse (DLSw answers only once the far end station is contacted);
//! - I frames sent up to the window `k` ahead of the last acknowledgement, kept until
//!   acknowledged (N(R) of an I, RR, RNR or REJ), sent again after a REJ or a checkpoint;
//! - acknowledgements of received I frames delayed up to `ack-max` frames or `ack-delay`, or
//!   carried by the next I frame sent (piggybacked), and sent at once to a poll;
//! - out-of-sequence I frames rejected once (REJ) until the expected one arrives;
//! - T1: an unacknowledged frame or an unanswered poll is followed by an RR poll (P=1), up to
//!   N2 times, then the link is declared down; Ti: a link silent for Ti is polled;
//! - RNR received stops sending until RR or REJ clears it.
//!
//! Frames go out through [`Tx`] records (control, command/response, information) the owner
//! wraps with addresses; what happened comes back as [`Event`]s.

use std::collections::VecDeque;

use packet::llc2::{seq_diff, Control, Supervisory, Unnumbered};

/// Timers and counts (milliseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timers {
    pub t1_ms: u64,
    pub ti_ms: u64,
    pub n2: u8,
    /// I frames sent ahead of the last acknowledgement (k, at most 127).
    pub window: u8,
    pub ack_delay_ms: u64,
    pub ack_max: u8,
}

impl Default for Timers {
    /// Cisco IOS's LLC2 defaults (T1 1 s, idle 10 s, N2 8, local window 7, ack delay 100 ms,
    /// ack max 3), except idle, which the report's endpoints set to 30 s (Ti).
    fn default() -> Timers {
        Timers {
            t1_ms: 1_000,
            ti_ms: 30_000,
            n2: 8,
            window: 7,
            ack_delay_ms: 100,
            ack_max: 3,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Disconnected,
    /// SABME sent, waiting for UA.
    Connecting,
    /// SABME received, not yet answered.
    Incoming,
    Connected,
    /// DISC sent, waiting for UA or DM.
    Disconnecting,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Disconnected => "disconnected",
            State::Connecting => "connecting",
            State::Incoming => "incoming",
            State::Connected => "connected",
            State::Disconnecting => "disconnecting",
        }
    }
}

/// Why a link went down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Down {
    /// The other end sent DISC.
    Disc,
    /// The other end answered DM (refused, or not connected).
    Dm,
    /// FRMR received: the other end found our frames invalid.
    Frmr,
    /// N2 polls went unanswered.
    Retries,
    /// Our own DISC was answered (or our DM sent).
    Local,
    /// The other end sent SABME on the connected link (a reset): a new link is asked for.
    Reset,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The other end asked for a connection (SABME); `accept` or `refuse` it.
    ConnectRequest,
    /// The link is up (our SABME answered, or a SABME collision).
    Connected,
    /// An in-sequence I frame's information field.
    Data(Vec<u8>),
    /// The link went down.
    Disconnected(Down),
}

/// A frame for the owner to address and send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tx {
    pub control: Control,
    pub response: bool,
    pub info: Vec<u8>,
}

/// Counters of one station.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StationStats {
    pub i_sent: u64,
    pub i_received: u64,
    pub retransmitted: u64,
    pub rej_sent: u64,
    pub rnr_received: u64,
    pub polls_sent: u64,
    /// Frames whose N(R) acknowledged nothing we sent (ignored).
    pub invalid_nr: u64,
}

pub struct Station {
    pub state: State,
    timers: Timers,
    vs: u8,
    vr: u8,
    va: u8,
    /// Sent, not yet acknowledged: the frame with N(S) = va first.
    unacked: VecDeque<Vec<u8>>,
    /// Waiting for the window.
    queue: VecDeque<Vec<u8>>,
    t1: Option<u64>,
    ti: u64,
    retries: u8,
    /// Our poll (P=1) is outstanding: no new I frames until its F=1 answer.
    polling: bool,
    remote_busy: bool,
    rej_sent: bool,
    /// Received I frames not yet acknowledged, and when the delayed acknowledgement is due.
    ack_count: u8,
    ack_at: Option<u64>,
    /// The P bit of a SABME held for `accept`.
    held_pf: bool,
    /// We cannot take more I frames (the owner's queue towards the far end is full): RNR.
    local_busy: bool,
    pub stats: StationStats,
}

impl Station {
    pub fn new(timers: Timers) -> Station {
        Station {
            state: State::Disconnected,
            timers,
            vs: 0,
            vr: 0,
            va: 0,
            unacked: VecDeque::new(),
            queue: VecDeque::new(),
            t1: None,
            ti: u64::MAX,
            retries: 0,
            polling: false,
            remote_busy: false,
            rej_sent: false,
            ack_count: 0,
            ack_at: None,
            held_pf: false,
            local_busy: false,
            stats: StationStats::default(),
        }
    }

    /// I frames queued or sent and not yet acknowledged.
    pub fn backlog(&self) -> usize {
        self.queue.len() + self.unacked.len()
    }

    pub fn remote_busy(&self) -> bool {
        self.remote_busy
    }

    /// The earliest time `tick` has something to do.
    pub fn deadline(&self) -> Option<u64> {
        let ti = (self.state == State::Connected).then_some(self.ti);
        [self.t1, self.ack_at, ti].into_iter().flatten().min()
    }

    fn reset_link(&mut self) {
        self.vs = 0;
        self.vr = 0;
        self.va = 0;
        self.unacked.clear();
        self.t1 = None;
        self.retries = 0;
        self.polling = false;
        self.remote_busy = false;
        self.rej_sent = false;
        self.ack_count = 0;
        self.ack_at = None;
    }

    fn u(kind: Unnumbered, pf: bool, response: bool) -> Tx {
        Tx {
            control: Control::U { kind, pf },
            response,
            info: Vec::new(),
        }
    }

    fn s(&self, kind: Supervisory, pf: bool, response: bool) -> Tx {
        Tx {
            control: Control::S {
                kind,
                nr: self.vr,
                pf,
            },
            response,
            info: Vec::new(),
        }
    }

    /// Sends SABME (P=1) and waits for UA.
    pub fn connect(&mut self, now: u64, tx: &mut Vec<Tx>) {
        self.reset_link();
        self.state = State::Connecting;
        tx.push(Self::u(Unnumbered::Sabme, true, false));
        self.t1 = Some(now + self.timers.t1_ms);
    }

    /// Answers a held SABME with UA: the link is up.
    pub fn accept(&mut self, now: u64, tx: &mut Vec<Tx>) {
        if self.state != State::Incoming {
            return;
        }
        self.reset_link();
        self.state = State::Connected;
        self.ti = now + self.timers.ti_ms;
        tx.push(Self::u(Unnumbered::Ua, self.held_pf, true));
        self.pump(now, tx);
    }

    /// Answers a held SABME with DM.
    pub fn refuse(&mut self, tx: &mut Vec<Tx>) {
        if self.state == State::Incoming {
            self.state = State::Disconnected;
            tx.push(Self::u(Unnumbered::Dm, self.held_pf, true));
        }
    }

    /// Sends DISC (P=1); the link is down once it is answered, or after N2 tries.
    pub fn disconnect(&mut self, now: u64, tx: &mut Vec<Tx>) {
        match self.state {
            State::Disconnected | State::Disconnecting => {}
            State::Incoming => self.refuse(tx),
            _ => {
                self.state = State::Disconnecting;
                self.queue.clear();
                self.unacked.clear();
                self.retries = 0;
                tx.push(Self::u(Unnumbered::Disc, true, false));
                self.t1 = Some(now + self.timers.t1_ms);
                self.ack_at = None;
            }
        }
    }

    /// Queues an information field; sent as soon as the window and the other end allow.
    pub fn send(&mut self, now: u64, data: Vec<u8>, tx: &mut Vec<Tx>) {
        self.queue.push_back(data);
        self.pump(now, tx);
    }

    /// Sends what the window allows.
    fn pump(&mut self, now: u64, tx: &mut Vec<Tx>) {
        if self.state != State::Connected || self.remote_busy || self.polling {
            return;
        }
        while seq_diff(self.va, self.vs) < self.timers.window {
            let Some(d) = self.queue.pop_front() else {
                break;
            };
            tx.push(Tx {
                control: Control::I {
                    ns: self.vs,
                    nr: self.vr,
                    pf: false,
                },
                response: false,
                info: d.clone(),
            });
            self.stats.i_sent += 1;
            self.unacked.push_back(d);
            self.vs = (self.vs + 1) & 0x7f;
            // The I frame carries our N(R): nothing left to acknowledge.
            self.ack_count = 0;
            self.ack_at = None;
            if self.t1.is_none() {
                self.t1 = Some(now + self.timers.t1_ms);
            }
        }
    }

    /// Takes an acknowledgement up to `nr`. False (and nothing changed) if `nr` acknowledges
    /// frames never sent.
    fn ack(&mut self, now: u64, nr: u8) -> bool {
        let n = seq_diff(self.va, nr);
        if n > seq_diff(self.va, self.vs) {
            self.stats.invalid_nr += 1;
            return false;
        }
        for _ in 0..n {
            self.unacked.pop_front();
        }
        self.va = nr;
        if n > 0 && !self.polling {
            // While our poll is out, T1 times the poll, not the frames.
            self.retries = 0;
            self.t1 = (!self.unacked.is_empty()).then_some(now + self.timers.t1_ms);
        }
        true
    }

    /// Sends again every unacknowledged frame from N(S) = `nr` (after a REJ or a checkpoint).
    fn resend_from(&mut self, now: u64, tx: &mut Vec<Tx>) {
        let n = self.unacked.len();
        self.stats.retransmitted += n as u64;
        for d in self.unacked.drain(..).rev() {
            self.queue.push_front(d);
        }
        self.vs = self.va;
        self.t1 = None;
        self.pump(now, tx);
    }

    /// An I or S frame may be taken: the link is up and its N(R) acknowledges frames we sent.
    /// Without a link, a poll is answered DM (the other end thinks it has one).
    fn numbered_ok(
        &mut self,
        now: u64,
        nr: u8,
        pf: bool,
        response: bool,
        tx: &mut Vec<Tx>,
    ) -> bool {
        if self.state != State::Connected {
            if self.state == State::Disconnected && pf && !response {
                tx.push(Self::u(Unnumbered::Dm, true, true));
            }
            return false;
        }
        self.ack(now, nr)
    }

    /// One frame from the other end.
    pub fn on_frame(
        &mut self,
        now: u64,
        control: Control,
        response: bool,
        info: &[u8],
        tx: &mut Vec<Tx>,
        ev: &mut Vec<Event>,
    ) {
        if self.state == State::Connected {
            self.ti = now + self.timers.ti_ms;
        }
        match control {
            Control::U { kind, pf } => self.on_u(now, kind, pf, response, tx, ev),
            Control::I { ns, nr, pf } => {
                if !self.numbered_ok(now, nr, pf, response, tx) {
                    return;
                }
                if ns == self.vr {
                    self.vr = (self.vr + 1) & 0x7f;
                    self.rej_sent = false;
                    self.stats.i_received += 1;
                    ev.push(Event::Data(info.to_vec()));
                    self.ack_count = self.ack_count.saturating_add(1);
                } else if !self.rej_sent {
                    self.rej_sent = true;
                    self.stats.rej_sent += 1;
                    tx.push(self.s(Supervisory::Rej, pf && !response, true));
                    self.ack_count = 0;
                    self.ack_at = None;
                    return self.pump(now, tx);
                }
                if pf && !response {
                    tx.push(self.s(self.rr_or_rnr(), true, true));
                    self.ack_count = 0;
                    self.ack_at = None;
                }
                self.pump(now, tx);
                self.schedule_ack(now, tx);
            }
            Control::S { kind, nr, pf } => {
                if !self.numbered_ok(now, nr, pf, response, tx) {
                    return;
                }
                match kind {
                    Supervisory::Rr => self.remote_busy = false,
                    Supervisory::Rnr => {
                        self.remote_busy = true;
                        self.stats.rnr_received += 1;
                    }
                    Supervisory::Rej => {
                        self.remote_busy = false;
                        self.resend_from(now, tx);
                    }
                }
                if pf && !response {
                    tx.push(self.s(self.rr_or_rnr(), true, true));
                    self.ack_count = 0;
                    self.ack_at = None;
                } else if pf && response && self.polling {
                    // The checkpoint: our poll answered; whatever it did not acknowledge is
                    // sent again.
                    self.polling = false;
                    self.retries = 0;
                    self.t1 = None;
                    if kind != Supervisory::Rej {
                        self.resend_from(now, tx);
                    }
                }
                if self.remote_busy && self.t1.is_none() {
                    // Poll a busy end now and then, so its RR is not missed for ever.
                    self.t1 = Some(now + self.timers.t1_ms);
                }
                self.pump(now, tx);
            }
        }
    }

    fn on_u(
        &mut self,
        now: u64,
        kind: Unnumbered,
        pf: bool,
        response: bool,
        tx: &mut Vec<Tx>,
        ev: &mut Vec<Event>,
    ) {
        match (kind, response) {
            (Unnumbered::Sabme, false) => match self.state {
                State::Disconnected | State::Incoming => {
                    self.state = State::Incoming;
                    self.held_pf = pf;
                    ev.push(Event::ConnectRequest);
                }
                State::Connecting => {
                    // Both ends sent SABME: each answers the other's, the link is up.
                    self.state = State::Connected;
                    self.t1 = None;
                    self.ti = now + self.timers.ti_ms;
                    tx.push(Self::u(Unnumbered::Ua, pf, true));
                    ev.push(Event::Connected);
                }
                State::Connected => {
                    // A reset: the link as it was is gone (unacknowledged frames with it), and
                    // the other end asks for a new one, which the owner accepts or refuses.
                    self.reset_link();
                    self.queue.clear();
                    self.state = State::Incoming;
                    self.held_pf = pf;
                    ev.push(Event::Disconnected(Down::Reset));
                    ev.push(Event::ConnectRequest);
                }
                State::Disconnecting => tx.push(Self::u(Unnumbered::Dm, pf, true)),
            },
            (Unnumbered::Ua, true) => match self.state {
                State::Connecting => {
                    self.state = State::Connected;
                    self.t1 = None;
                    self.retries = 0;
                    self.ti = now + self.timers.ti_ms;
                    ev.push(Event::Connected);
                    self.pump(now, tx);
                }
                State::Disconnecting => {
                    self.state = State::Disconnected;
                    self.t1 = None;
                    ev.push(Event::Disconnected(Down::Local));
                }
                _ => {}
            },
            (Unnumbered::Disc, false) => {
                if self.state == State::Disconnected {
                    tx.push(Self::u(Unnumbered::Dm, pf, true));
                    return;
                }
                tx.push(Self::u(Unnumbered::Ua, pf, true));
                let was = self.state;
                self.state = State::Disconnected;
                self.reset_link();
                self.queue.clear();
                if was != State::Disconnecting {
                    ev.push(Event::Disconnected(Down::Disc));
                } else {
                    ev.push(Event::Disconnected(Down::Local));
                }
            }
            (Unnumbered::Dm, true) | (Unnumbered::Frmr, true)
                if self.state != State::Disconnected =>
            {
                let why = if self.state == State::Disconnecting {
                    Down::Local
                } else if kind == Unnumbered::Frmr {
                    Down::Frmr
                } else {
                    Down::Dm
                };
                self.state = State::Disconnected;
                self.reset_link();
                self.queue.clear();
                ev.push(Event::Disconnected(why));
            }
            // XID, TEST and UI belong to the owner; a U frame with the wrong C/R is ignored.
            _ => {}
        }
    }

    fn schedule_ack(&mut self, now: u64, tx: &mut Vec<Tx>) {
        if self.ack_count == 0 {
            return;
        }
        if self.ack_count >= self.timers.ack_max {
            tx.push(self.s(self.rr_or_rnr(), false, true));
            self.ack_count = 0;
            self.ack_at = None;
        } else if self.ack_at.is_none() {
            self.ack_at = Some(now + self.timers.ack_delay_ms);
        }
    }

    fn rr_or_rnr(&self) -> Supervisory {
        if self.local_busy {
            Supervisory::Rnr
        } else {
            Supervisory::Rr
        }
    }

    /// Enters or leaves the local busy condition: RNR (then RR) tells the other end.
    pub fn set_busy(&mut self, busy: bool, tx: &mut Vec<Tx>) {
        if busy != self.local_busy && self.state == State::Connected {
            self.local_busy = busy;
            tx.push(self.s(self.rr_or_rnr(), false, true));
            self.ack_count = 0;
            self.ack_at = None;
        }
    }

    /// Runs the timers due at `now`.
    pub fn tick(&mut self, now: u64, tx: &mut Vec<Tx>, ev: &mut Vec<Event>) {
        if self.ack_at.is_some_and(|t| now >= t) {
            tx.push(self.s(self.rr_or_rnr(), false, true));
            self.ack_count = 0;
            self.ack_at = None;
        }
        if self.t1.is_some_and(|t| now >= t) {
            self.t1 = None;
            if self.retries >= self.timers.n2 {
                let was = self.state;
                self.state = State::Disconnected;
                self.reset_link();
                self.queue.clear();
                if was == State::Connected {
                    tx.push(Self::u(Unnumbered::Dm, false, true));
                }
                ev.push(Event::Disconnected(if was == State::Disconnecting {
                    Down::Local
                } else {
                    Down::Retries
                }));
                return;
            }
            self.retries += 1;
            match self.state {
                State::Connecting => tx.push(Self::u(Unnumbered::Sabme, true, false)),
                State::Disconnecting => tx.push(Self::u(Unnumbered::Disc, true, false)),
                State::Connected => {
                    self.polling = true;
                    self.stats.polls_sent += 1;
                    tx.push(self.s(Supervisory::Rr, true, false));
                }
                _ => return,
            }
            self.t1 = Some(now + self.timers.t1_ms);
        }
        if self.state == State::Connected && now >= self.ti && self.t1.is_none() {
            // Idle for Ti: is the other end still there?
            self.polling = true;
            self.stats.polls_sent += 1;
            tx.push(self.s(Supervisory::Rr, true, false));
            self.t1 = Some(now + self.timers.t1_ms);
            self.ti = now + self.timers.ti_ms;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two stations joined by a lossy wire: frames from one are handed to the other unless
    /// `drop` says otherwise.
    struct Pair {
        a: Station,
        b: Station,
        now: u64,
        a_got: Vec<Vec<u8>>,
        b_got: Vec<Vec<u8>>,
        a_ev: Vec<Event>,
        b_ev: Vec<Event>,
        wire: Vec<(bool, Tx)>,
        frames: usize,
    }

    impl Pair {
        fn new() -> Pair {
            Pair {
                a: Station::new(Timers::default()),
                b: Station::new(Timers::default()),
                now: 0,
                a_got: vec![],
                b_got: vec![],
                a_ev: vec![],
                b_ev: vec![],
                wire: vec![],
                frames: 0,
            }
        }

        /// Delivers what is on the wire (dropping frames for which `drop` is true) until it is
        /// quiet.
        fn run(&mut self, mut drop: impl FnMut(bool, &Tx) -> bool) {
            while !self.wire.is_empty() {
                for (to_b, f) in std::mem::take(&mut self.wire) {
                    self.frames += 1;
                    if drop(to_b, &f) {
                        continue;
                    }
                    let (st, ev) = if to_b {
                        (&mut self.b, &mut self.b_ev)
                    } else {
                        (&mut self.a, &mut self.a_ev)
                    };
                    let mut tx = vec![];
                    st.on_frame(self.now, f.control, f.response, &f.info, &mut tx, ev);
                    self.wire.extend(tx.into_iter().map(|t| (!to_b, t)));
                }
                self.collect();
            }
        }

        fn collect(&mut self) {
            for (ev, got) in [
                (&mut self.a_ev, &mut self.a_got),
                (&mut self.b_ev, &mut self.b_got),
            ] {
                ev.retain(|e| match e {
                    Event::Data(d) => {
                        got.push(d.clone());
                        false
                    }
                    _ => true,
                });
            }
        }

        fn advance(&mut self, ms: u64, drop: impl FnMut(bool, &Tx) -> bool) {
            self.now += ms;
            let mut tx = vec![];
            self.a.tick(self.now, &mut tx, &mut self.a_ev);
            self.wire.extend(tx.drain(..).map(|t| (true, t)));
            self.b.tick(self.now, &mut tx, &mut self.b_ev);
            self.wire.extend(tx.drain(..).map(|t| (false, t)));
            self.run(drop);
        }

        fn connect(&mut self) {
            let mut tx = vec![];
            self.a.connect(self.now, &mut tx);
            self.wire.extend(tx.into_iter().map(|t| (true, t)));
            self.run(|_, _| false);
            assert_eq!(self.b_ev, vec![Event::ConnectRequest]);
            self.b_ev.clear();
            let mut tx = vec![];
            self.b.accept(self.now, &mut tx);
            self.wire.extend(tx.into_iter().map(|t| (false, t)));
            self.run(|_, _| false);
            assert_eq!(self.a_ev, vec![Event::Connected]);
            self.a_ev.clear();
            assert_eq!(
                (self.a.state, self.b.state),
                (State::Connected, State::Connected)
            );
        }

        fn a_sends(&mut self, n: usize) {
            let mut tx = vec![];
            for i in 0..n {
                self.a.send(self.now, vec![i as u8; 4], &mut tx);
            }
            self.wire.extend(tx.into_iter().map(|t| (true, t)));
        }
    }

    #[test]
    fn data_flows_in_order_within_the_window_and_is_acknowledged() {
        let mut p = Pair::new();
        p.connect();
        p.a_sends(300);
        p.run(|_, _| false);
        // Acknowledgements every ack-max frames open the window again; the rest wait for the
        // delayed acknowledgement.
        for _ in 0..200 {
            p.advance(100, |_, _| false);
        }
        assert_eq!(p.b_got.len(), 300);
        assert!(p.b_got.iter().enumerate().all(|(i, d)| d[0] == i as u8));
        assert_eq!(p.a.backlog(), 0);
        assert_eq!(p.a.stats.retransmitted, 0);
    }

    #[test]
    fn a_lost_frame_is_rejected_and_sent_again() {
        let mut p = Pair::new();
        p.connect();
        p.a_sends(5);
        let mut n = 0;
        p.run(|to_b, f| {
            let i = matches!(f.control, Control::I { .. });
            n += (to_b && i) as usize;
            to_b && i && n == 2
        });
        for _ in 0..30 {
            p.advance(100, |_, _| false);
        }
        assert_eq!(p.b_got.len(), 5);
        assert!(p.b_got.iter().enumerate().all(|(i, d)| d[0] == i as u8));
        assert_eq!(p.b.stats.rej_sent, 1);
        assert!(p.a.stats.retransmitted >= 4);
    }

    #[test]
    fn a_lost_last_frame_is_recovered_by_the_t1_poll() {
        let mut p = Pair::new();
        p.connect();
        p.a_sends(1);
        p.run(|to_b, f| to_b && matches!(f.control, Control::I { .. }));
        assert!(p.b_got.is_empty());
        for _ in 0..20 {
            p.advance(100, |_, _| false);
        }
        assert_eq!(p.b_got, vec![vec![0u8; 4]]);
        assert_eq!(p.a.stats.polls_sent, 1);
        assert_eq!(p.a.backlog(), 0);
    }

    #[test]
    fn an_unanswering_end_is_declared_down_after_n2_polls() {
        let mut p = Pair::new();
        p.connect();
        p.a_sends(1);
        let t = Timers::default();
        for _ in 0..((t.n2 as u64 + 2) * t.t1_ms / 100) {
            p.advance(100, |to_b, _| to_b);
        }
        assert_eq!(p.a.state, State::Disconnected);
        assert_eq!(p.a_ev, vec![Event::Disconnected(Down::Retries)]);
        assert_eq!(p.a.stats.polls_sent, t.n2 as u64);
    }

    #[test]
    fn rnr_stops_the_sender_until_rr() {
        let mut p = Pair::new();
        p.connect();
        let mut tx = vec![];
        p.a.on_frame(
            0,
            Control::S {
                kind: Supervisory::Rnr,
                nr: 0,
                pf: false,
            },
            true,
            &[],
            &mut tx,
            &mut p.a_ev,
        );
        p.a.send(0, vec![1], &mut tx);
        assert!(tx.is_empty(), "busy: nothing sent");
        p.a.on_frame(
            0,
            Control::S {
                kind: Supervisory::Rr,
                nr: 0,
                pf: false,
            },
            true,
            &[],
            &mut tx,
            &mut p.a_ev,
        );
        assert!(matches!(
            tx[..],
            [Tx {
                control: Control::I { ns: 0, .. },
                ..
            }]
        ));
    }

    #[test]
    fn disc_takes_both_ends_down_and_a_poll_is_answered() {
        let mut p = Pair::new();
        p.connect();
        let mut tx = vec![];
        let mut ev = vec![];
        p.b.on_frame(
            0,
            Control::S {
                kind: Supervisory::Rr,
                nr: 0,
                pf: true,
            },
            false,
            &[],
            &mut tx,
            &mut ev,
        );
        assert!(matches!(
            tx[..],
            [Tx {
                control: Control::S {
                    kind: Supervisory::Rr,
                    pf: true,
                    ..
                },
                response: true,
                ..
            }]
        ));
        let mut tx = vec![];
        p.a.disconnect(0, &mut tx);
        p.wire.extend(tx.into_iter().map(|t| (true, t)));
        p.run(|_, _| false);
        assert_eq!(p.b_ev, vec![Event::Disconnected(Down::Disc)]);
        assert_eq!(p.a_ev, vec![Event::Disconnected(Down::Local)]);
        assert_eq!(
            (p.a.state, p.b.state),
            (State::Disconnected, State::Disconnected)
        );
    }

    #[test]
    fn a_sabme_on_a_connected_link_is_a_reset_the_owner_answers() {
        let mut p = Pair::new();
        p.connect();
        p.a_sends(3);
        p.run(|_, _| false);
        let mut tx = vec![];
        let mut ev = vec![];
        p.b.on_frame(
            0,
            Control::U {
                kind: Unnumbered::Sabme,
                pf: true,
            },
            false,
            &[],
            &mut tx,
            &mut ev,
        );
        assert!(tx.is_empty(), "UA waits for the owner");
        assert_eq!(
            ev,
            vec![Event::Disconnected(Down::Reset), Event::ConnectRequest]
        );
        p.b.accept(0, &mut tx);
        assert!(matches!(
            tx[..],
            [Tx {
                control: Control::U {
                    kind: Unnumbered::Ua,
                    pf: true
                },
                ..
            }]
        ));
        assert_eq!(p.b.state, State::Connected);
    }

    #[test]
    fn a_refused_connection_is_reported() {
        let mut p = Pair::new();
        let mut tx = vec![];
        p.a.connect(0, &mut tx);
        p.wire.extend(tx.into_iter().map(|t| (true, t)));
        p.run(|_, _| false);
        let mut tx = vec![];
        p.b.refuse(&mut tx);
        p.wire.extend(tx.into_iter().map(|t| (false, t)));
        p.run(|_, _| false);
        assert_eq!(p.a_ev, vec![Event::Disconnected(Down::Dm)]);
    }

    #[test]
    fn sequence_numbers_wrap_without_loss() {
        let mut p = Pair::new();
        p.connect();
        for _ in 0..3 {
            p.a_sends(100);
            for _ in 0..100 {
                p.advance(100, |_, _| false);
            }
        }
        assert_eq!(p.b_got.len(), 300);
        assert_eq!(p.a.stats.retransmitted, 0);
    }
}
