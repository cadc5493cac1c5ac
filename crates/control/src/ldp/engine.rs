//! The LDP speaker as a function of what arrives (sans I/O): hello adjacencies (targeted, and
//! basic discovery on interfaces), sessions (RFC 5036 2.5.4's state machine), the pseudowires
//! they signal (RFC 4447: the PWid FEC, downstream unsolicited, liberal retention) and the
//! prefix FECs of the router's routes ([`fec`]: labels allocated, advertised under ordered
//! control, and the peers' labels turned into swaps and pushes).
//!
//! The service thread hands in hellos, TCP connections and their bytes, the routes and the
//! clock; the engine queues hellos and each session's bytes, says which sessions to open and
//! close, and keeps each pseudowire's signalled state, which the router turns into the data
//! plane's pseudowire (the peer's label, the agreed control word, up or down), and each
//! prefix FEC's labels, which the router turns into label table entries and labelled routes.
//!
//! Roles: the side with the higher transport address opens the TCP connection (active), the
//! other accepts it (passive), RFC 5036 2.5.2. A session is named by its peer's LSR id.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use packet::ldp::{self, status, Fec, Hello, Init, Msg, PduBuilder};

/// Seconds a targeted hello adjacency lasts when the peer proposes 0 (RFC 5036 3.5.2).
const TARGETED_DEFAULT_HOLD: u16 = 45;
/// ... and a link hello adjacency.
const LINK_DEFAULT_HOLD: u16 = 15;
/// Time between attempts to open a session to a peer that does not answer.
pub const RETRY_MS: u64 = 2_000;
/// PW status bits (RFC 4447 5.4.3): the attachment circuit cannot receive nor send.
pub const PW_STATUS_AC_FAULT: u32 = 0x02 | 0x04;

/// One pseudowire LDP signals, as configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PwSpec {
    pub name: String,
    /// The far PE: its LSR id, and where targeted hellos go.
    pub peer: Ipv4Addr,
    pub pw_id: u32,
    /// 4 (Ethernet VLAN) or 5 (Ethernet).
    pub pw_type: u16,
    /// Configured to use the control word (RFC 4385).
    pub control_word: bool,
    /// The attachment circuit's MTU, the interface parameter both ends must agree on.
    pub mtu: u16,
    pub local_label: u32,
    pub ac_up: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineCfg {
    pub lsr_id: Ipv4Addr,
    pub transport: Ipv4Addr,
    pub hello_interval_ms: u64,
    /// Proposed targeted hello hold time and session keepalive time, seconds.
    pub hold_time: u16,
    pub keepalive: u16,
    /// Targeted neighbours besides the pseudowires' peers.
    pub neighbors: Vec<Ipv4Addr>,
    pub pws: Vec<PwSpec>,
    /// Prefixes this router is the egress for (its addresses and connected subnets), mapped
    /// to implicit null on every session: the peer's route to this router is then labelled,
    /// which a peer's pseudowire needs before it forwards (FRR's zebra: "unlabeled route").
    pub egress: Vec<(Ipv4Addr, u8)>,
    /// Interfaces with basic discovery (link hellos to 224.0.0.2).
    pub links: Vec<LinkSpec>,
    pub link_hello_interval_ms: u64,
    /// Proposed link hello hold time, seconds.
    pub link_hold_time: u16,
    /// The labels prefix FECs take, lowest first.
    pub label_range: (u32, u32),
}

/// An interface LDP sends link hellos on and takes them from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkSpec {
    /// The router's interface name.
    pub name: String,
    /// Its TAP twin's device name: where the service's hello socket is bound.
    pub host: String,
    /// Its IPv4 address: the hellos' source.
    pub address: Ipv4Addr,
}

/// How a hello adjacency was discovered: targeted hellos, or link hellos on `cfg.links[i]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Discovery {
    Targeted,
    Link(u16),
}

/// What the log reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LdpEvent {
    SessionUp {
        peer: Ipv4Addr,
    },
    SessionDown {
        peer: Ipv4Addr,
        why: String,
    },
    PwUp {
        name: String,
    },
    PwDown {
        name: String,
        why: String,
    },
    /// A notification sent or received that did not end the session.
    Notice {
        peer: Ipv4Addr,
        what: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Active: waiting for the TCP connection to open.
    Connecting,
    /// Passive: connected, waiting for the peer's Initialization.
    Initialized,
    /// Active: Initialization sent, waiting for the peer's.
    OpenSent,
    /// Initialization exchanged, waiting for the peer's KeepAlive.
    OpenRec,
    Operational,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Connecting => "connecting",
            State::Initialized => "initialized",
            State::OpenSent => "opensent",
            State::OpenRec => "openrec",
            State::Operational => "operational",
        }
    }
}

/// A hello adjacency with one peer (by LSR id and how it was discovered: a peer may be both a
/// link neighbour and a targeted one, over one session).
#[derive(Clone, Debug)]
pub struct Adjacency {
    /// The peer's transport address (its hello's, or the hello's source).
    pub transport: Ipv4Addr,
    pub source: Ipv4Addr,
    /// The negotiated hold time, seconds.
    pub hold: u16,
    pub expires_ms: u64,
}

/// A session with one peer.
#[derive(Debug)]
pub struct Session {
    pub state: State,
    pub active: bool,
    pub transport: Ipv4Addr,
    /// Bytes received and not yet a whole PDU.
    rx: Vec<u8>,
    /// Bytes queued for the connection, taken by the service.
    pub out: Vec<u8>,
    /// The service is asked to open the connection (active) once.
    pub connect_asked: bool,
    pub last_attempt_ms: u64,
    /// The negotiated keepalive time (seconds) and when anything was last received and sent.
    pub keepalive: u16,
    last_rx_ms: u64,
    last_tx_ms: u64,
    pub max_pdu: usize,
    /// The service closes the connection after writing what is queued.
    pub close: bool,
    pub since_ms: u64,
    /// Addresses the peer advertised.
    pub addresses: Vec<Ipv4Addr>,
    pub pdus_in: u64,
    pub pdus_out: u64,
    pub bytes_out: u64,
}

/// What the peer sent for a pseudowire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteMapping {
    pub label: u32,
    pub control_word: bool,
    pub mtu: Option<u16>,
    /// The peer's PW status (0: forwarding; no status TLV counts as forwarding).
    pub status: u32,
}

/// A pseudowire's signalling state.
#[derive(Clone, Debug, Default)]
pub struct PwState {
    pub remote: Option<RemoteMapping>,
    /// The control word this end advertised (its configuration, or off after the peer's
    /// mapping said it does not use one: RFC 4447 7).
    pub control_word: bool,
    /// A mapping was sent on the current session.
    pub advertised: bool,
    pub up: bool,
    /// Why it is down (empty when up).
    pub why: String,
}

/// Counters for `show mpls ldp`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub hellos_in: u64,
    pub hellos_out: u64,
    pub hellos_ignored: u64,
    pub malformed: u64,
    pub notifications_out: u64,
    pub notifications_in: u64,
    /// Prefix FECs left without a label: the label range is used up.
    pub labels_exhausted: u64,
}

pub struct Engine {
    pub cfg: EngineCfg,
    /// Where targeted hellos go, and when next.
    targets: BTreeMap<Ipv4Addr, u64>,
    /// When each link's next hello goes (parallel to `cfg.links`).
    link_next: Vec<u64>,
    pub adjacencies: BTreeMap<(Ipv4Addr, Discovery), Adjacency>,
    pub sessions: BTreeMap<Ipv4Addr, Session>,
    /// Parallel to `cfg.pws`.
    pub pws: Vec<PwState>,
    /// Mappings received that match no pseudowire (kept: liberal retention).
    pub unmatched: BTreeMap<(Ipv4Addr, u16, u32), RemoteMapping>,
    /// Prefix mappings received (kept: liberal retention), by peer and prefix: the label.
    pub prefix_bindings: BTreeMap<(Ipv4Addr, std::net::IpAddr, u8), u32>,
    pub events: Vec<LdpEvent>,
    /// A pseudowire's signalled state changed since the router last took them.
    pub changed: bool,
    /// The prefix FECs of the router's routes ([`fec`]).
    pub fecs: BTreeMap<(Ipv4Addr, u8), fec::FecState>,
    labels: fec::Labels,
    /// Something every FEC's labels depend on changed (a session, a peer's addresses, an
    /// adjacency): all are looked at again at the next tick ...
    fec_dirty: bool,
    /// ... or only these (a mapping or withdraw for them came, their route changed).
    fec_dirty_keys: Vec<(Ipv4Addr, u8)>,
    /// While a PDU's messages are handled, what they answer is gathered here and sent in as
    /// few PDUs as fit (a thousand withdraws get their releases in a handful, not a thousand).
    batch: Option<(Ipv4Addr, Vec<Msg>)>,
    /// A FEC's labels changed since the router last took them.
    pub fec_changed: bool,
    pub stats: Stats,
    msg_id: u32,
}

impl Engine {
    pub fn new(cfg: EngineCfg) -> Engine {
        let mut targets = BTreeMap::new();
        for a in cfg.neighbors.iter().chain(cfg.pws.iter().map(|p| &p.peer)) {
            targets.insert(*a, 0);
        }
        let pws = cfg
            .pws
            .iter()
            .map(|p| PwState {
                control_word: p.control_word,
                why: "no session".into(),
                ..Default::default()
            })
            .collect();
        let labels = fec::Labels::new(cfg.label_range);
        Engine {
            link_next: vec![0; cfg.links.len()],
            cfg,
            targets,
            adjacencies: BTreeMap::new(),
            sessions: BTreeMap::new(),
            pws,
            unmatched: BTreeMap::new(),
            prefix_bindings: BTreeMap::new(),
            events: Vec::new(),
            changed: true,
            fecs: BTreeMap::new(),
            labels,
            fec_dirty: false,
            fec_dirty_keys: Vec::new(),
            batch: None,
            fec_changed: false,
            stats: Stats::default(),
            msg_id: 0,
        }
    }

    fn next_id(&mut self) -> u32 {
        self.msg_id = self.msg_id.wrapping_add(1);
        self.msg_id
    }

    /// The hellos due at `now`: (destination, PDU).
    pub fn hellos(&mut self, now: u64) -> Vec<(Ipv4Addr, Vec<u8>)> {
        let mut out = Vec::new();
        let due: Vec<Ipv4Addr> = self
            .targets
            .iter()
            .filter(|(_, &t)| t <= now)
            .map(|(a, _)| *a)
            .collect();
        for a in due {
            self.targets.insert(a, now + self.cfg.hello_interval_ms);
            out.push((a, self.hello_pdu(Discovery::Targeted)));
        }
        out
    }

    /// A hello of this router's: targeted (asking for targeted ones back) or a link hello,
    /// with its hold time for that kind and its transport address.
    fn hello_pdu(&mut self, how: Discovery) -> Vec<u8> {
        let targeted = how == Discovery::Targeted;
        let mut b = PduBuilder::new(self.cfg.lsr_id, 0);
        let id = self.next_id();
        ldp::encode(
            &mut b,
            id,
            &Msg::Hello(Hello {
                hold: if targeted {
                    self.cfg.hold_time
                } else {
                    self.cfg.link_hold_time
                },
                targeted,
                request_targeted: targeted,
                transport: Some(self.cfg.transport),
                config_seq: None,
            }),
        );
        self.stats.hellos_out += 1;
        b.finish()
    }

    /// The link hellos due at `now`: (index into `cfg.links`, PDU), sent to 224.0.0.2 out of
    /// that interface.
    pub fn link_hellos(&mut self, now: u64) -> Vec<(usize, Vec<u8>)> {
        let mut out = Vec::new();
        for i in 0..self.cfg.links.len() {
            if self.link_next[i] > now {
                continue;
            }
            self.link_next[i] = now + self.cfg.link_hello_interval_ms;
            out.push((i, self.hello_pdu(Discovery::Link(i as u16))));
        }
        out
    }

    /// A targeted hello PDU from `source`.
    pub fn hello_in(&mut self, now: u64, source: Ipv4Addr, pdu: &[u8]) {
        self.any_hello_in(now, source, Discovery::Targeted, pdu);
    }

    /// A link hello PDU from `source`, received on `cfg.links[link]`.
    pub fn link_hello_in(&mut self, now: u64, link: usize, source: Ipv4Addr, pdu: &[u8]) {
        if link >= self.cfg.links.len() {
            return;
        }
        self.any_hello_in(now, source, Discovery::Link(link as u16), pdu);
    }

    fn any_hello_in(&mut self, now: u64, source: Ipv4Addr, how: Discovery, pdu: &[u8]) {
        let Ok((h, msgs)) = ldp::decode_pdu(pdu) else {
            self.stats.malformed += 1;
            return;
        };
        let Some(Msg::Hello(hello)) = msgs.first() else {
            self.stats.malformed += 1;
            return;
        };
        // Targeted hellos from a neighbour this router targets (by LSR id or address); link
        // hellos from anyone on the link (RFC 5036 2.4.1), never another kind on either.
        let wanted = match how {
            Discovery::Targeted => {
                hello.targeted
                    && (self.targets.contains_key(&h.lsr_id) || self.targets.contains_key(&source))
            }
            Discovery::Link(_) => !hello.targeted,
        };
        if !wanted || h.label_space != 0 || h.lsr_id == self.cfg.lsr_id {
            self.stats.hellos_ignored += 1;
            return;
        }
        self.stats.hellos_in += 1;
        let (default_hold, ours) = match how {
            Discovery::Targeted => (TARGETED_DEFAULT_HOLD, self.cfg.hold_time),
            Discovery::Link(_) => (LINK_DEFAULT_HOLD, self.cfg.link_hold_time),
        };
        let theirs = if hello.hold == 0 {
            default_hold
        } else {
            hello.hold
        };
        let hold = theirs.min(ours);
        let transport = hello.transport.unwrap_or(source);
        let expires_ms = if hold == 0xffff {
            u64::MAX
        } else {
            now + u64::from(hold) * 1000
        };
        let new = self
            .adjacencies
            .insert(
                (h.lsr_id, how),
                Adjacency {
                    transport,
                    source,
                    hold,
                    expires_ms,
                },
            )
            .is_none();
        // A new link neighbour's address may be a route's next hop.
        self.fec_dirty |= new && how != Discovery::Targeted;
        if !self.sessions.contains_key(&h.lsr_id) {
            let active = u32::from(self.cfg.transport) > u32::from(transport);
            self.sessions.insert(
                h.lsr_id,
                Session {
                    state: if active {
                        State::Connecting
                    } else {
                        State::Initialized
                    },
                    active,
                    transport,
                    rx: Vec::new(),
                    out: Vec::new(),
                    connect_asked: false,
                    last_attempt_ms: 0,
                    keepalive: self.cfg.keepalive,
                    last_rx_ms: now,
                    last_tx_ms: now,
                    max_pdu: ldp::DEFAULT_MAX_PDU,
                    close: false,
                    since_ms: now,
                    addresses: Vec::new(),
                    pdus_in: 0,
                    pdus_out: 0,
                    bytes_out: 0,
                },
            );
        }
    }

    /// Active sessions whose connection the service should open now: (LSR id, transport).
    pub fn to_connect(&mut self, now: u64) -> Vec<(Ipv4Addr, Ipv4Addr)> {
        let mut out = Vec::new();
        for (lsr, s) in self.sessions.iter_mut() {
            if s.active
                && has_adjacency(&self.adjacencies, *lsr)
                && s.state == State::Connecting
                && !s.connect_asked
                && (s.last_attempt_ms == 0 || now >= s.last_attempt_ms + RETRY_MS)
            {
                s.connect_asked = true;
                s.last_attempt_ms = now.max(1);
                out.push((*lsr, s.transport));
            }
        }
        out
    }

    /// The connection to `lsr` opened (active): Initialization goes out.
    pub fn connected(&mut self, now: u64, lsr: Ipv4Addr) -> bool {
        let Some(s) = self.sessions.get_mut(&lsr) else {
            return false;
        };
        if s.state != State::Connecting {
            return false;
        }
        s.state = State::OpenSent;
        s.last_rx_ms = now;
        s.since_ms = now;
        let init = self.init_msg(lsr);
        self.send(now, lsr, &[init]);
        true
    }

    /// Opening the connection to `lsr` failed: tried again later.
    pub fn connect_failed(&mut self, lsr: Ipv4Addr) {
        if let Some(s) = self.sessions.get_mut(&lsr) {
            s.connect_asked = false;
        }
    }

    /// A connection arrived from `from`: the LSR id of the adjacency whose transport address
    /// it is, if this side is passive towards it (else the connection is refused).
    pub fn accepted(&mut self, now: u64, from: Ipv4Addr) -> Option<Ipv4Addr> {
        let lsr = self
            .adjacencies
            .iter()
            .find(|(_, a)| a.transport == from)
            .map(|(k, _)| k.0)?;
        let s = self.sessions.get_mut(&lsr)?;
        if s.active {
            return None;
        }
        // A new connection replaces an old one (the peer restarted).
        s.state = State::Initialized;
        s.rx.clear();
        s.out.clear();
        s.close = false;
        s.last_rx_ms = now;
        s.since_ms = now;
        Some(lsr)
    }

    fn init_msg(&self, lsr: Ipv4Addr) -> Msg {
        Msg::Init(Init {
            keepalive: self.cfg.keepalive,
            on_demand: false,
            loop_detection: false,
            path_vector_limit: 0,
            max_pdu: 0,
            receiver: (lsr, 0),
        })
    }

    /// Queues `msgs` on the session, in PDUs within the peer's maximum length (gathered until
    /// the PDU being handled is done, if it is this session's).
    fn send(&mut self, now: u64, lsr: Ipv4Addr, msgs: &[Msg]) {
        if let Some((l, v)) = &mut self.batch {
            if *l == lsr {
                v.extend_from_slice(msgs);
                return;
            }
        }
        let ids: Vec<u32> = msgs.iter().map(|_| self.next_id()).collect();
        let me = self.cfg.lsr_id;
        let Some(s) = self.sessions.get_mut(&lsr) else {
            return;
        };
        let mut body: Vec<u8> = Vec::new();
        let flush = |body: &mut Vec<u8>, s: &mut Session| {
            if body.is_empty() {
                return;
            }
            s.out.extend_from_slice(&1u16.to_be_bytes());
            s.out
                .extend_from_slice(&((body.len() + 6) as u16).to_be_bytes());
            s.out.extend_from_slice(&me.octets());
            s.out.extend_from_slice(&0u16.to_be_bytes());
            s.bytes_out += body.len() as u64 + ldp::HEADER_LEN as u64;
            s.out.append(body);
            s.pdus_out += 1;
        };
        for (m, id) in msgs.iter().zip(ids) {
            let mut one = PduBuilder::new(me, 0);
            ldp::encode(&mut one, id, m);
            let bytes = one.finish();
            let msg = &bytes[ldp::HEADER_LEN..];
            if !body.is_empty() && ldp::HEADER_LEN + body.len() + msg.len() > s.max_pdu {
                flush(&mut body, s);
            }
            body.extend_from_slice(msg);
        }
        flush(&mut body, s);
        s.last_tx_ms = now;
    }

    /// Sends a notification; a fatal one ends the session once it is written.
    fn notify(&mut self, now: u64, lsr: Ipv4Addr, e: ldp::Error) {
        let fatal = status::fatal(e.code);
        self.stats.notifications_out += 1;
        self.send(
            now,
            lsr,
            &[Msg::Notification(ldp::Status {
                fatal,
                forward: false,
                code: e.code,
                msg_id: e.msg_id,
                msg_type: e.msg_type,
            })],
        );
        if fatal {
            self.session_down(lsr, &format!("sent notification: {e}"), true);
        } else {
            self.events.push(LdpEvent::Notice {
                peer: lsr,
                what: format!("sent notification: {e}"),
            });
        }
    }

    /// Bytes from the session with `lsr`.
    pub fn bytes_in(&mut self, now: u64, lsr: Ipv4Addr, bytes: &[u8]) {
        let Some(s) = self.sessions.get_mut(&lsr) else {
            return;
        };
        s.rx.extend_from_slice(bytes);
        s.last_rx_ms = now;
        loop {
            let Some(s) = self.sessions.get_mut(&lsr) else {
                return;
            };
            if s.close {
                return;
            }
            let rx = std::mem::take(&mut s.rx);
            match ldp::parse_pdu(&rx, ldp::DEFAULT_MAX_PDU.max(s.max_pdu)) {
                Ok(None) => {
                    s.rx = rx;
                    return;
                }
                Err(e) => {
                    self.stats.malformed += 1;
                    self.notify(
                        now,
                        lsr,
                        ldp::Error {
                            code: e.code,
                            msg_id: 0,
                            msg_type: 0,
                        },
                    );
                    // The framing is lost: nothing after this can be read.
                    self.session_down(lsr, "malformed PDU", true);
                    return;
                }
                Ok(Some((h, body))) => {
                    s.pdus_in += 1;
                    let used = h.len;
                    if h.lsr_id != lsr || h.label_space != 0 {
                        self.stats.malformed += 1;
                        self.notify(
                            now,
                            lsr,
                            ldp::Error {
                                code: status::BAD_LDP_ID,
                                msg_id: 0,
                                msg_type: 0,
                            },
                        );
                        return;
                    }
                    let body = body.to_vec();
                    if let Some(s) = self.sessions.get_mut(&lsr) {
                        s.rx = rx[used..].to_vec();
                    }
                    self.pdu(now, lsr, &body);
                }
            }
        }
    }

    /// One PDU's messages; what they answer goes out together after the last.
    fn pdu(&mut self, now: u64, lsr: Ipv4Addr, body: &[u8]) {
        self.batch = Some((lsr, Vec::new()));
        self.pdu_messages(now, lsr, body);
        if let Some((l, msgs)) = self.batch.take() {
            if !msgs.is_empty() {
                self.send(now, l, &msgs);
            }
        }
    }

    fn pdu_messages(&mut self, now: u64, lsr: Ipv4Addr, body: &[u8]) {
        for m in ldp::messages(body) {
            let m = match m {
                Ok(m) => m,
                Err(e) => {
                    // The message framing is lost: the rest of the PDU cannot be read.
                    self.stats.malformed += 1;
                    self.notify(now, lsr, e);
                    return;
                }
            };
            let msg = match ldp::decode(&m) {
                Ok(x) => x,
                Err(e) => {
                    self.stats.malformed += 1;
                    self.notify(now, lsr, e);
                    if status::fatal(e.code) {
                        return;
                    }
                    continue;
                }
            };
            if !self.message(now, lsr, msg, m.id, m.ty) {
                return;
            }
        }
    }

    /// One message; false when the session ended.
    fn message(&mut self, now: u64, lsr: Ipv4Addr, msg: Msg, id: u32, ty: u16) -> bool {
        let Some(state) = self.sessions.get(&lsr).map(|s| s.state) else {
            return false;
        };
        let shutdown = |code| ldp::Error {
            code,
            msg_id: id,
            msg_type: ty,
        };
        match (state, msg) {
            (_, Msg::Notification(st)) => {
                self.stats.notifications_in += 1;
                let what = format!(
                    "received notification: {}",
                    ldp::Error {
                        code: st.code,
                        msg_id: st.msg_id,
                        msg_type: st.msg_type
                    }
                );
                if st.fatal {
                    self.session_down(lsr, &what, true);
                    return false;
                }
                self.events.push(LdpEvent::Notice { peer: lsr, what });
            }
            (State::Initialized, Msg::Init(i)) | (State::OpenSent, Msg::Init(i)) => {
                if i.receiver.0 != self.cfg.lsr_id || i.receiver.1 != 0 {
                    self.notify(now, lsr, shutdown(status::SESSION_REJECTED_NO_HELLO));
                    return false;
                }
                let their = if i.keepalive == 0 {
                    self.cfg.keepalive
                } else {
                    i.keepalive
                };
                let mut reply = Vec::new();
                if state == State::Initialized {
                    reply.push(self.init_msg(lsr));
                }
                reply.push(Msg::KeepAlive);
                if let Some(s) = self.sessions.get_mut(&lsr) {
                    s.keepalive = their.min(self.cfg.keepalive);
                    s.max_pdu = if i.max_pdu <= 255 {
                        ldp::DEFAULT_MAX_PDU
                    } else {
                        usize::from(i.max_pdu)
                    };
                    s.state = State::OpenRec;
                }
                self.send(now, lsr, &reply);
            }
            (State::OpenRec, Msg::KeepAlive) => {
                if let Some(s) = self.sessions.get_mut(&lsr) {
                    s.state = State::Operational;
                    s.since_ms = now;
                }
                self.events.push(LdpEvent::SessionUp { peer: lsr });
                let mut out = vec![Msg::Address(self.addresses())];
                out.extend(self.egress_mappings());
                out.extend(self.fec_mappings());
                out.extend(self.mappings_for(lsr));
                self.fec_dirty = true;
                self.send(now, lsr, &out);
                self.evaluate();
            }
            (State::Operational, m) => self.operational(now, lsr, m, id),
            // Anything else before the session is up ends it (RFC 5036 2.5.4).
            _ => {
                self.notify(now, lsr, shutdown(status::SHUTDOWN));
                return false;
            }
        }
        true
    }

    /// A message on an operational session.
    fn operational(&mut self, now: u64, lsr: Ipv4Addr, m: Msg, id: u32) {
        match m {
            Msg::KeepAlive | Msg::Ignored(_) | Msg::Hello(_) | Msg::Init(_) => {}
            Msg::Notification(_) => {}
            Msg::Address(a) => {
                self.fec_dirty = true;
                if let Some(s) = self.sessions.get_mut(&lsr) {
                    for x in a {
                        if !s.addresses.contains(&x) {
                            s.addresses.push(x);
                        }
                    }
                }
            }
            Msg::AddressWithdraw(a) => {
                self.fec_dirty = true;
                if let Some(s) = self.sessions.get_mut(&lsr) {
                    s.addresses.retain(|x| !a.contains(x));
                }
            }
            Msg::LabelMapping {
                fecs,
                label,
                pw_status,
            } => {
                for f in fecs {
                    if let Fec::Prefix(a, len) = f {
                        self.prefix_bindings.insert((lsr, a, len), label);
                        if let std::net::IpAddr::V4(a) = a {
                            self.fec_dirty_keys.push((a, len));
                        }
                        continue;
                    }
                    if let Fec::PwId {
                        control_word,
                        pw_type,
                        pw_id: Some(pw_id),
                        mtu,
                        ..
                    } = f
                    {
                        let r = RemoteMapping {
                            label,
                            control_word,
                            mtu,
                            status: pw_status.unwrap_or(0),
                        };
                        self.remote_mapping(now, lsr, pw_type, pw_id, r);
                    }
                }
            }
            Msg::LabelWithdraw { fecs, label } => {
                let mut released = Vec::new();
                for f in &fecs {
                    for i in self.matching(lsr, f) {
                        if let Some(r) = self.pws[i].remote.take() {
                            released.push((self.fec_of(i, r.control_word), r.label));
                        }
                        self.changed = true;
                    }
                    match f {
                        Fec::Wildcard | Fec::TypedWildcard { .. } => {
                            self.unmatched.retain(|k, _| k.0 != lsr);
                            self.prefix_bindings.retain(|k, _| k.0 != lsr);
                            self.fec_dirty = true;
                        }
                        Fec::Prefix(a, len) => {
                            self.prefix_bindings.remove(&(lsr, *a, *len));
                            if let std::net::IpAddr::V4(a) = a {
                                self.fec_dirty_keys.push((*a, *len));
                            }
                        }
                        Fec::PwId { .. } => {}
                    }
                }
                // RFC 5036 3.5.10: a withdraw is answered with a release.
                let msgs: Vec<Msg> = if released.is_empty() {
                    vec![Msg::LabelRelease { fecs, label }]
                } else {
                    released
                        .into_iter()
                        .map(|(f, l)| Msg::LabelRelease {
                            fecs: vec![f],
                            label: Some(l),
                        })
                        .collect()
                };
                self.send(now, lsr, &msgs);
                self.evaluate();
            }
            Msg::LabelRelease { .. } => {
                // The peer no longer uses a label of ours; the pseudowire's local label stays
                // allocated to it, and a new mapping goes with the next change.
            }
            Msg::LabelRequest(fecs) => {
                let mut out = Vec::new();
                for f in &fecs {
                    if let Fec::Prefix(std::net::IpAddr::V4(a), len) = f {
                        // Ordered control: what this router is the egress for, or has a label
                        // for (its next hop's came); a route still waiting for its next hop's
                        // label is answered when that comes, as every peer is (downstream
                        // unsolicited).
                        let fec = self.fecs.get(&(*a, *len));
                        if self.cfg.egress.contains(&(*a, *len)) {
                            out.push(egress_mapping(*a, *len));
                        } else if let Some(label) = fec.and_then(|f| f.local) {
                            out.push(fec::prefix_mapping(*a, *len, label));
                        } else if fec.is_none() {
                            out.push(Msg::Notification(ldp::Status {
                                fatal: false,
                                forward: false,
                                code: status::NO_ROUTE,
                                msg_id: id,
                                msg_type: ldp::msg::LABEL_REQUEST,
                            }));
                        }
                        continue;
                    }
                    for i in self.matching(lsr, f) {
                        out.push(self.mapping(i));
                    }
                }
                if !out.is_empty() {
                    self.send(now, lsr, &out);
                }
            }
            Msg::PwStatus { fecs, status } => {
                for f in &fecs {
                    for i in self.matching(lsr, f) {
                        if let Some(r) = self.pws[i].remote.as_mut() {
                            r.status = status;
                        }
                    }
                }
                self.evaluate();
            }
        }
    }

    /// The configured pseudowires with peer `lsr` a FEC names.
    fn matching(&self, lsr: Ipv4Addr, f: &Fec) -> Vec<usize> {
        self.cfg
            .pws
            .iter()
            .enumerate()
            .filter(|(_, p)| p.peer == lsr)
            .filter(|(_, p)| match f {
                Fec::Wildcard => true,
                Fec::TypedWildcard { fec_type, .. } => *fec_type == 0x80,
                Fec::PwId { pw_type, pw_id, .. } => {
                    *pw_type == p.pw_type && pw_id.is_none_or(|id| id == p.pw_id)
                }
                Fec::Prefix(..) => false,
            })
            .map(|(i, _)| i)
            .collect()
    }

    fn remote_mapping(
        &mut self,
        now: u64,
        lsr: Ipv4Addr,
        pw_type: u16,
        pw_id: u32,
        r: RemoteMapping,
    ) {
        let Some(i) = self
            .cfg
            .pws
            .iter()
            .position(|p| p.peer == lsr && p.pw_id == pw_id && p.pw_type == pw_type)
        else {
            self.unmatched.insert((lsr, pw_type, pw_id), r);
            return;
        };
        self.pws[i].remote = Some(r);
        self.changed = true;
        // RFC 4447 7: the peer does not use the control word and this end offered it: this
        // end withdraws its mapping and maps again without.
        if self.pws[i].control_word && !r.control_word {
            let old = self.fec_of(i, true);
            let label = self.cfg.pws[i].local_label;
            self.pws[i].control_word = false;
            let again = self.mapping(i);
            self.send(
                now,
                lsr,
                &[
                    Msg::LabelWithdraw {
                        fecs: vec![old],
                        label: Some(label),
                    },
                    again,
                ],
            );
        }
        self.evaluate();
    }

    fn fec_of(&self, i: usize, control_word: bool) -> Fec {
        let p = &self.cfg.pws[i];
        Fec::PwId {
            control_word,
            pw_type: p.pw_type,
            group: 0,
            pw_id: Some(p.pw_id),
            mtu: Some(p.mtu),
            vlan: None,
        }
    }

    /// The PW status this end sends for pseudowire `i`: 0 (forwarding) or its circuit's fault.
    pub fn local_status(&self, i: usize) -> u32 {
        if self.cfg.pws[i].ac_up {
            0
        } else {
            PW_STATUS_AC_FAULT
        }
    }

    fn mapping(&mut self, i: usize) -> Msg {
        self.pws[i].advertised = true;
        Msg::LabelMapping {
            fecs: vec![self.fec_of(i, self.pws[i].control_word)],
            label: self.cfg.pws[i].local_label,
            pw_status: Some(self.local_status(i)),
        }
    }

    /// This router's addresses for the Address message: the transport address and every
    /// address it is the egress for as a host.
    fn addresses(&self) -> Vec<Ipv4Addr> {
        let mut a = vec![self.cfg.transport];
        for &(x, len) in &self.cfg.egress {
            if len == 32 && !a.contains(&x) {
                a.push(x);
            }
        }
        a
    }

    fn egress_mappings(&self) -> Vec<Msg> {
        self.cfg
            .egress
            .iter()
            .map(|&(a, len)| egress_mapping(a, len))
            .collect()
    }

    /// The mappings of every pseudowire with peer `lsr` (downstream unsolicited).
    fn mappings_for(&mut self, lsr: Ipv4Addr) -> Vec<Msg> {
        let mine: Vec<usize> = (0..self.cfg.pws.len())
            .filter(|&i| self.cfg.pws[i].peer == lsr)
            .collect();
        mine.into_iter().map(|i| self.mapping(i)).collect()
    }

    /// Works out each pseudowire's state from its session, mappings and circuit.
    fn evaluate(&mut self) {
        for i in 0..self.pws.len() {
            let p = &self.cfg.pws[i];
            let st = &self.pws[i];
            let operational = self
                .sessions
                .get(&p.peer)
                .is_some_and(|s| s.state == State::Operational);
            let why = if !operational {
                "no session".to_string()
            } else if let Some(r) = st.remote {
                if r.mtu.is_some_and(|m| m != p.mtu) {
                    format!(
                        "MTU mismatch (local {}, remote {})",
                        p.mtu,
                        r.mtu.unwrap_or(0)
                    )
                } else if r.control_word != st.control_word {
                    "control word mismatch".into()
                } else if r.status != 0 {
                    format!("peer not forwarding (status {:#x})", r.status)
                } else if !p.ac_up {
                    "attachment circuit down".into()
                } else {
                    String::new()
                }
            } else {
                "no label from the peer".into()
            };
            let up = why.is_empty();
            let was = self.pws[i].up;
            if up != was {
                self.events.push(if up {
                    LdpEvent::PwUp {
                        name: p.name.clone(),
                    }
                } else {
                    LdpEvent::PwDown {
                        name: p.name.clone(),
                        why: why.clone(),
                    }
                });
                self.changed = true;
            }
            self.pws[i].up = up;
            self.pws[i].why = why;
        }
    }

    /// The session with `lsr` ended: its mappings go, its pseudowires go down. `close`: the
    /// service closes the connection after writing what is queued.
    fn session_down(&mut self, lsr: Ipv4Addr, why: &str, close: bool) {
        let Some(s) = self.sessions.get_mut(&lsr) else {
            return;
        };
        let was_up = s.state == State::Operational;
        s.close |= close;
        s.rx.clear();
        s.state = if s.active {
            State::Connecting
        } else {
            State::Initialized
        };
        s.connect_asked = s.close && s.active;
        s.addresses.clear();
        if was_up {
            self.events.push(LdpEvent::SessionDown {
                peer: lsr,
                why: why.to_string(),
            });
        }
        for i in 0..self.pws.len() {
            if self.cfg.pws[i].peer == lsr {
                self.pws[i].remote = None;
                self.pws[i].advertised = false;
                self.pws[i].control_word = self.cfg.pws[i].control_word;
            }
        }
        self.unmatched.retain(|k, _| k.0 != lsr);
        self.prefix_bindings.retain(|k, _| k.0 != lsr);
        self.changed = true;
        self.fec_dirty = true;
        self.evaluate();
    }

    /// The service closed (or lost) the connection to `lsr`.
    pub fn closed(&mut self, lsr: Ipv4Addr, why: &str) {
        self.session_down(lsr, why, false);
        if let Some(s) = self.sessions.get_mut(&lsr) {
            s.close = false;
            s.connect_asked = false;
            s.out.clear();
        }
    }

    /// Timers: keepalives, keepalive expiry, hello adjacency expiry; then the prefix FECs,
    /// if anything they depend on changed.
    pub fn tick(&mut self, now: u64) {
        self.timers(now);
        if self.fec_dirty || !self.fec_dirty_keys.is_empty() {
            self.refresh_fecs(now);
        }
    }

    fn timers(&mut self, now: u64) {
        let expired: Vec<(Ipv4Addr, Discovery)> = self
            .adjacencies
            .iter()
            .filter(|(_, a)| a.expires_ms <= now)
            .map(|(k, _)| *k)
            .collect();
        for key in expired {
            self.adjacencies.remove(&key);
            self.fec_dirty = true;
            let lsr = key.0;
            // The session lasts while any adjacency with the peer does (RFC 5036 2.5.5).
            if has_adjacency(&self.adjacencies, lsr) {
                continue;
            }
            let had = self
                .sessions
                .get(&lsr)
                .is_some_and(|s| s.state != State::Connecting && s.state != State::Initialized);
            self.session_down(lsr, "hello adjacency expired", had);
            if had {
                self.stats.notifications_out += 1;
                let m = Msg::Notification(ldp::Status {
                    fatal: true,
                    forward: false,
                    code: status::HOLD_EXPIRED,
                    msg_id: 0,
                    msg_type: 0,
                });
                self.send(now, lsr, &[m]);
            }
            if let Some(s) = self.sessions.get(&lsr) {
                if !s.close {
                    self.sessions.remove(&lsr);
                }
            }
        }
        let lsrs: Vec<Ipv4Addr> = self.sessions.keys().copied().collect();
        for lsr in lsrs {
            let Some(s) = self.sessions.get(&lsr) else {
                continue;
            };
            if !matches!(
                s.state,
                State::OpenSent | State::OpenRec | State::Operational
            ) || s.close
            {
                continue;
            }
            let hold = u64::from(s.keepalive) * 1000;
            if now >= s.last_rx_ms + hold {
                self.notify(
                    now,
                    lsr,
                    ldp::Error {
                        code: status::KEEPALIVE_EXPIRED,
                        msg_id: 0,
                        msg_type: 0,
                    },
                );
            } else if s.state == State::Operational && now >= s.last_tx_ms + hold / 3 {
                self.send(now, lsr, &[Msg::KeepAlive]);
            }
        }
    }

    /// The attachment circuit of pseudowire `name` went up or down: the peer hears it in a PW
    /// status notification.
    pub fn set_ac(&mut self, now: u64, name: &str, up: bool) {
        let Some(i) = self.cfg.pws.iter().position(|p| p.name == name) else {
            return;
        };
        if self.cfg.pws[i].ac_up == up {
            return;
        }
        self.cfg.pws[i].ac_up = up;
        let peer = self.cfg.pws[i].peer;
        if self.pws[i].advertised {
            let m = Msg::PwStatus {
                fecs: vec![self.fec_of(i, self.pws[i].control_word)],
                status: self.local_status(i),
            };
            self.send(now, peer, &[m]);
        }
        self.evaluate();
    }

    /// Each pseudowire's signalled state for the router: (name, peer's label, agreed control
    /// word, up).
    pub fn signalled(&self) -> Vec<(String, u32, bool, bool)> {
        self.cfg
            .pws
            .iter()
            .zip(&self.pws)
            .map(|(p, s)| {
                (
                    p.name.clone(),
                    s.remote.map_or(dataplane::mpls::IMPLICIT_NULL, |r| r.label),
                    s.control_word,
                    s.up,
                )
            })
            .collect()
    }
}

/// Whether any hello adjacency with `lsr` is alive.
fn has_adjacency(adj: &BTreeMap<(Ipv4Addr, Discovery), Adjacency>, lsr: Ipv4Addr) -> bool {
    adj.range((lsr, Discovery::Targeted)..=(lsr, Discovery::Link(u16::MAX)))
        .next()
        .is_some()
}

/// A mapping of a prefix this router is the egress for: implicit null (the peer pops).
fn egress_mapping(a: Ipv4Addr, len: u8) -> Msg {
    Msg::LabelMapping {
        fecs: vec![Fec::Prefix(std::net::IpAddr::V4(a), len)],
        label: dataplane::mpls::IMPLICIT_NULL,
        pw_status: None,
    }
}

pub mod fec;
#[cfg(test)]
mod tests;
