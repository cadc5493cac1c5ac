//! DLSw as a function of what arrives (sans I/O): LLC frames from the LAN side, SSP messages
//! from the peers, transport connections coming and going, and the time. What it sends comes
//! out as LAN frames (`lan_out`, each with its port) and bytes appended to each peer's
//! `out` buffer, which the service writes to that peer's TCP connection.
//!
//! - **Peers** ([`Peer`]): a transport connection per configured remote peer; the capabilities
//!   exchange (RFC 1795 7.7: our request, their response, and the reverse) brings a peer up;
//!   KEEPALIVEs every `keepalive` while idle, and a peer silent for `dead-after` keepalives is
//!   declared down, as is one whose connection closes. A peer going down takes its circuits
//!   with it (DISC to the LAN stations) and its entries out of the reachability cache.
//! - **Reachability**: MACs learned behind peers (from ICANREACH_ex) and on the LAN (from any
//!   frame a station sends, and TEST responses to our explorers). An end station's TEST to a
//!   MAC behind a peer is answered here; an unknown MAC is searched for with CANUREACH_ex to
//!   every peer, and a peer's search with a TEST on every LAN port.
//! - **Circuits** ([`Circuit`], RFC 1795 7.6): one per pair of end stations (MAC and SAP each),
//!   started by the station that sends XID or SABME (the *origin* side): CANUREACH_cs,
//!   ICANREACH_cs, REACH_ACK; then XIDs end to end (XIDFRAME), CONTACT/CONTACTED around the
//!   SABME/UA of the two LLC2 links, INFOFRAMEs for data, HALT_DL/DL_HALTED for DISC. Each
//!   LAN link is terminated here by a [`Station`] (local acknowledgement). With load balancing,
//!   new circuits go round the peers that reach the MAC.
//! - **Pacing** (RFC 1795 8): each direction of a circuit has a window granted by its receiver:
//!   the sender marks the first frame of a window (FCI) and stops at zero; the receiver answers
//!   with FCA and an operator, repeat while its station keeps up, halve when it falls behind.
//!   A sender out of window holds its station's frames and tells it so (RNR).

use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;

use packet::dlsw::{self, flow, msg, Circuit as Ids};
use packet::llc2::{self, Control, Unnumbered};

use super::station::{Down, Event as StEvent, State as StState, Station, Timers, Tx};

/// What the engine needs of the config.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineCfg {
    pub local: Ipv4Addr,
    pub peers: Vec<Ipv4Addr>,
    pub keepalive_ms: u64,
    pub dead_after: u32,
    pub pacing_window: u16,
    pub llc2: Timers,
    /// New circuits go round the peers that reach a MAC (else: the first that answered).
    pub load_balance: bool,
    /// How long an explorer waits for an answer.
    pub explorer_ms: u64,
    /// How long a reachability entry lives without being confirmed.
    pub cache_ms: u64,
    /// The LAN ports (the bridge domains' members): explorers go out of each.
    pub lan_ports: Vec<u16>,
    /// Circuits held at most.
    pub max_circuits: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerState {
    /// No transport connection.
    Disconnected,
    /// Connected, capabilities not yet exchanged both ways.
    CapExchange,
    Connected,
}

impl PeerState {
    pub fn name(self) -> &'static str {
        match self {
            PeerState::Disconnected => "disconnected",
            PeerState::CapExchange => "cap-exchange",
            PeerState::Connected => "connected",
        }
    }
}

/// Counters of one peer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerStats {
    pub messages_in: u64,
    pub messages_out: u64,
    pub info_in: u64,
    pub info_out: u64,
    pub keepalives_in: u64,
    pub keepalives_out: u64,
    pub explorers_in: u64,
    pub explorers_out: u64,
    /// Messages that could not be read (the connection is closed: the stream is lost).
    pub malformed: u64,
    /// Messages for a circuit this DLSw does not hold.
    pub unknown_circuit: u64,
    pub connects: u64,
    pub drops: u64,
}

pub struct Peer {
    pub addr: Ipv4Addr,
    pub state: PeerState,
    /// Bytes to write to the connection.
    pub out: Vec<u8>,
    /// Bytes read and not yet a whole message.
    inb: Vec<u8>,
    caps_received: bool,
    caps_acked: bool,
    /// Their initial pacing window and version string, from their capabilities.
    pub window: u16,
    pub version: String,
    last_rx: u64,
    last_tx: u64,
    /// When the peer last changed state (ms).
    pub since: u64,
    pub circuits: u32,
    pub stats: PeerStats,
    /// The service must close the connection (the peer was declared down here).
    pub close: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CircuitState {
    /// Origin: waiting for an explorer to find the partner.
    Resolving,
    /// Origin: CANUREACH_cs sent.
    CircuitPending,
    /// Target: ICANREACH_cs sent, waiting for REACH_ACK.
    ReachPending,
    Established,
    /// Our station sent SABME; CONTACT sent, waiting for CONTACTED.
    ContactPending,
    /// CONTACT received; SABME sent to our station.
    Contacting,
    Connected,
    /// HALT_DL sent (our station left), waiting for DL_HALTED.
    Halting,
    /// HALT_DL received: DISC sent to our station.
    Halted,
}

impl CircuitState {
    pub fn name(self) -> &'static str {
        match self {
            CircuitState::Resolving => "resolving",
            CircuitState::CircuitPending => "circuit-pending",
            CircuitState::ReachPending => "reach-pending",
            CircuitState::Established => "circuit-established",
            CircuitState::ContactPending => "contact-pending",
            CircuitState::Contacting => "contacting",
            CircuitState::Connected => "connected",
            CircuitState::Halting => "halt-pending",
            CircuitState::Halted => "halted",
        }
    }
}

/// The LAN side of a circuit: our station and its partner behind the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LanKey {
    pub station: [u8; 6],
    pub station_sap: u8,
    pub partner: [u8; 6],
    pub partner_sap: u8,
}

pub struct Circuit {
    pub key: LanKey,
    pub lan_port: u16,
    pub peer: usize,
    pub origin: bool,
    pub state: CircuitState,
    /// Both ends' identifiers, in the SSP's origin/target terms.
    pub ids: Ids,
    pub station: Station,
    /// Frames from our station held until the circuit is established (XIDs).
    held: Vec<Vec<u8>>,
    /// Our station's XID command waits for the far end's answer (its P bit).
    xid_from_station: Option<bool>,
    /// Pacing towards the peer: window and units left; data waiting for a grant.
    send_window: u16,
    granted: u16,
    fci_sent: bool,
    backlog: VecDeque<Vec<u8>>,
    /// Pacing from the peer: a grant to send (FCA and operator) on the next message.
    grant_due: Option<u8>,
    /// I frames from our station sent on to the peer, and from the peer to our station.
    pub from_station: u64,
    pub to_station: u64,
    pub since: u64,
}

/// Who waits for an explorer's answer.
#[derive(Clone, Debug)]
enum Waiter {
    /// An end station's TEST: answered with a TEST response.
    Test {
        port: u16,
        target: [u8; 6],
        station: [u8; 6],
        station_sap: u8,
        target_sap: u8,
        pf: bool,
        info: Vec<u8>,
    },
    /// A circuit in `Resolving`.
    Circuit(u32),
    /// A peer's CANUREACH (ex or cs) for a MAC on our LAN.
    Peer { peer: usize, ids: Ids },
}

struct Explorer {
    mac: [u8; 6],
    deadline: u64,
    waiters: Vec<Waiter>,
}

/// Engine-wide counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub lan_frames_in: u64,
    pub lan_frames_out: u64,
    pub lan_malformed: u64,
    /// LAN frames for no circuit (and not starting one).
    pub lan_no_circuit: u64,
    pub tests_answered: u64,
    pub explorers_sent: u64,
    pub explorers_timed_out: u64,
    pub circuits_started: u64,
    pub circuits_connected: u64,
    pub circuits_ended: u64,
    /// Circuits refused for want of room (`max-circuits`).
    pub circuits_refused: u64,
    /// Frames held for want of a pacing grant.
    pub paced: u64,
}

/// What happened that the log wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DlswEvent {
    PeerUp {
        peer: Ipv4Addr,
    },
    PeerDown {
        peer: Ipv4Addr,
        why: &'static str,
        circuits: u32,
    },
    CapRefused {
        peer: Ipv4Addr,
        cause: u16,
    },
    CircuitUp {
        key: LanKey,
        peer: Ipv4Addr,
    },
    CircuitDown {
        key: LanKey,
        peer: Ipv4Addr,
        why: &'static str,
    },
}

/// A MAC behind peers: the MAC and the peers' addresses.
pub type RemoteEntry = ([u8; 6], Vec<Ipv4Addr>);

/// The DLSw "vendor": the locally administered OUI this implementation sends in its
/// capabilities (no IEEE OUI is registered for it).
pub const VENDOR: [u8; 3] = [0x02, 0x4c, 0x52];

/// A correlator is the slab index in its low 20 bits and a generation above, so a message
/// for a freed circuit is not taken by the next one in its slot.
const SLOT_BITS: u32 = 20;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;

pub struct Engine {
    pub cfg: EngineCfg,
    pub peers: Vec<Peer>,
    slots: Vec<Option<Circuit>>,
    free: Vec<u32>,
    generation: u32,
    by_lan: HashMap<LanKey, u32>,
    /// MAC -> (peers that reach it, as bits; when last confirmed).
    remote: HashMap<[u8; 6], (u64, u64)>,
    /// MAC -> (LAN port, when last seen).
    local: HashMap<[u8; 6], (u16, u64)>,
    /// CANUREACH_ex sent to the peers, for our stations and circuits.
    peer_search: Vec<Explorer>,
    /// TESTs sent on the LAN, for the peers' CANUREACHes.
    lan_search: Vec<Explorer>,
    next_peer: usize,
    pub lan_out: Vec<(u16, Vec<u8>)>,
    pub stats: Stats,
    pub events: Vec<DlswEvent>,
    last_sweep: u64,
    last_expiry: u64,
    tx: Vec<Tx>,
    ev: Vec<StEvent>,
}

fn is_zero(m: &[u8; 6]) -> bool {
    m.iter().all(|&b| b == 0)
}

impl Engine {
    pub fn new(cfg: EngineCfg) -> Engine {
        let peers = cfg
            .peers
            .iter()
            .map(|&addr| Peer {
                addr,
                state: PeerState::Disconnected,
                out: Vec::new(),
                inb: Vec::new(),
                caps_received: false,
                caps_acked: false,
                window: 0,
                version: String::new(),
                last_rx: 0,
                last_tx: 0,
                since: 0,
                circuits: 0,
                stats: PeerStats::default(),
                close: false,
            })
            .collect();
        Engine {
            cfg,
            peers,
            slots: Vec::new(),
            free: Vec::new(),
            generation: 1,
            by_lan: HashMap::new(),
            remote: HashMap::new(),
            local: HashMap::new(),
            peer_search: Vec::new(),
            lan_search: Vec::new(),
            next_peer: 0,
            lan_out: Vec::new(),
            stats: Stats::default(),
            events: Vec::new(),
            last_sweep: 0,
            last_expiry: 0,
            tx: Vec::new(),
            ev: Vec::new(),
        }
    }

    /// The peer of address `a`.
    pub fn peer_index(&self, a: Ipv4Addr) -> Option<usize> {
        self.peers.iter().position(|p| p.addr == a)
    }

    pub fn circuits(&self) -> impl Iterator<Item = &Circuit> {
        self.slots.iter().flatten()
    }

    pub fn circuit_count(&self) -> usize {
        self.by_lan.len()
    }

    /// The reachability cache: (MAC, where: peers as addresses, or the LAN port).
    pub fn reachability(&self) -> (Vec<RemoteEntry>, Vec<([u8; 6], u16)>) {
        let mut r: Vec<_> = self
            .remote
            .iter()
            .map(|(m, (bits, _))| {
                let peers = (0..self.peers.len())
                    .filter(|i| bits & (1 << i) != 0)
                    .map(|i| self.peers[i].addr)
                    .collect();
                (*m, peers)
            })
            .collect();
        r.sort();
        let mut l: Vec<_> = self.local.iter().map(|(m, (p, _))| (*m, *p)).collect();
        l.sort();
        (r, l)
    }

    // ---- transport ----

    /// The connection to peer `i` is up: our capabilities go first.
    pub fn peer_connected(&mut self, now: u64, i: usize) {
        let p = &mut self.peers[i];
        p.state = PeerState::CapExchange;
        p.caps_received = false;
        p.caps_acked = false;
        p.inb.clear();
        p.out.clear();
        p.close = false;
        p.last_rx = now;
        p.since = now;
        p.stats.connects += 1;
        let caps = dlsw::Capabilities {
            vendor: VENDOR,
            version: (1, 0),
            pacing_window: self.cfg.pacing_window,
            version_string: concat!("Linerate ", env!("CARGO_PKG_VERSION")).into(),
            saps: [0xff; 16],
            tcp_connections: Some(1),
        };
        dlsw::write_capex_request(&mut p.out, &caps);
        p.stats.messages_out += 1;
        p.last_tx = now;
    }

    /// The connection to peer `i` closed (or could not be made).
    pub fn peer_closed(&mut self, now: u64, i: usize, why: &'static str) {
        let was = self.peers[i].state;
        self.peers[i].state = PeerState::Disconnected;
        self.peers[i].inb.clear();
        self.peers[i].out.clear();
        self.peers[i].since = now;
        if was == PeerState::Disconnected {
            return;
        }
        self.peers[i].stats.drops += 1;
        // Its circuits end: the stations are told (DISC) and will start again, through
        // another peer if one reaches their partner.
        let mut n = 0;
        for s in 0..self.slots.len() {
            if self.slots[s].as_ref().is_some_and(|c| c.peer == i) {
                n += 1;
                self.end_circuit(now, s as u32, true, "peer down");
            }
        }
        let bit = 1u64 << i;
        self.remote.retain(|_, (bits, _)| {
            *bits &= !bit;
            *bits != 0
        });
        for e in &mut self.lan_search {
            e.waiters
                .retain(|w| !matches!(w, Waiter::Peer { peer, .. } if *peer == i));
        }
        if was == PeerState::Connected {
            self.events.push(DlswEvent::PeerDown {
                peer: self.peers[i].addr,
                why,
                circuits: n,
            });
        }
    }

    /// Bytes read from peer `i`'s connection. A message that cannot be read closes the
    /// connection (`close` set): there is no finding the next one in a TCP stream.
    pub fn peer_bytes(&mut self, now: u64, i: usize, bytes: &[u8]) {
        let mut inb = std::mem::take(&mut self.peers[i].inb);
        inb.extend_from_slice(bytes);
        let mut at = 0;
        loop {
            let n = match dlsw::message_len(&inb[at..]) {
                None => break,
                Some(Err(_)) => {
                    self.peers[i].stats.malformed += 1;
                    self.peers[i].close = true;
                    inb.clear();
                    at = 0;
                    break;
                }
                Some(Ok(n)) => n,
            };
            if inb.len() - at < n {
                break;
            }
            let m = &inb[at..at + n];
            at += n;
            match dlsw::parse(m) {
                Ok(msg) => self.message(now, i, &msg),
                Err(_) => self.peers[i].stats.malformed += 1,
            }
            if self.peers[i].close {
                inb.clear();
                at = 0;
                break;
            }
        }
        inb.drain(..at);
        self.peers[i].inb = inb;
    }

    fn message(&mut self, now: u64, i: usize, m: &dlsw::Message<'_>) {
        {
            let p = &mut self.peers[i];
            p.last_rx = now;
            p.stats.messages_in += 1;
        }
        if m.msg_type == msg::CAP_EXCHANGE {
            return self.capex(now, i, m.data);
        }
        if self.peers[i].state != PeerState::Connected {
            // Nothing but capabilities before they are exchanged (RFC 1795 7.7).
            self.peers[i].stats.unknown_circuit += 1;
            return;
        }
        match (m.msg_type, m.circuit) {
            (msg::KEEPALIVE, _) => self.peers[i].stats.keepalives_in += 1,
            (msg::INFOFRAME, _) | (msg::IFCM, _) => {
                if m.msg_type == msg::INFOFRAME {
                    self.peers[i].stats.info_in += 1;
                }
                match self.slot_of(i, m.remote_dlc) {
                    Some(s) => self.circuit_info(now, s, m),
                    None => self.peers[i].stats.unknown_circuit += 1,
                }
            }
            (msg::CANUREACH, Some(ids)) => self.canureach(now, i, ids),
            (msg::ICANREACH, Some(ids)) => self.icanreach(now, i, ids),
            (t, Some(ids)) => {
                // Every other message names our end by the side we are on.
                let mine = if ids.direction == dlsw::DIR_FROM_TARGET {
                    ids.origin_dlc
                } else {
                    ids.target_dlc
                };
                match self.slot_of(i, mine) {
                    Some(s) => self.circuit_control(now, s, t, m.data, m.flow),
                    None => self.peers[i].stats.unknown_circuit += 1,
                }
            }
            _ => self.peers[i].stats.unknown_circuit += 1,
        }
    }

    fn capex(&mut self, now: u64, i: usize, data: &[u8]) {
        let p = &mut self.peers[i];
        match dlsw::parse_capex(data) {
            Ok(dlsw::CapEx::Request(c)) => {
                p.window = c.pacing_window.max(1);
                p.version = c.version_string;
                p.caps_received = true;
                dlsw::write_capex_response(&mut p.out);
                p.stats.messages_out += 1;
            }
            Ok(dlsw::CapEx::Response) => p.caps_acked = true,
            Ok(dlsw::CapEx::Refuse { cause, .. }) => {
                self.events.push(DlswEvent::CapRefused {
                    peer: p.addr,
                    cause,
                });
                p.close = true;
                return;
            }
            Err(Ok(refusal)) => {
                dlsw::write_capex_refuse(&mut p.out, refusal);
                p.stats.messages_out += 1;
                p.stats.malformed += 1;
                self.events.push(DlswEvent::CapRefused {
                    peer: p.addr,
                    cause: refusal.1,
                });
                p.close = true;
                return;
            }
            Err(Err(_)) => {
                p.stats.malformed += 1;
                p.close = true;
                return;
            }
        }
        if p.caps_received && p.caps_acked && p.state == PeerState::CapExchange {
            p.state = PeerState::Connected;
            p.since = now;
            self.events.push(DlswEvent::PeerUp { peer: p.addr });
        }
    }

    // ---- circuits: bookkeeping ----

    fn slot_of(&self, peer: usize, dlc: u32) -> Option<u32> {
        let s = dlc & SLOT_MASK;
        let c = self.slots.get(s as usize)?.as_ref()?;
        let mine = if c.origin {
            c.ids.origin_dlc
        } else {
            c.ids.target_dlc
        };
        (c.peer == peer && mine == dlc).then_some(s)
    }

    fn circuit(&mut self, s: u32) -> &mut Circuit {
        self.slots[s as usize].as_mut().expect("a live slot")
    }

    fn new_circuit(
        &mut self,
        now: u64,
        key: LanKey,
        lan_port: u16,
        peer: usize,
        origin: bool,
    ) -> Option<u32> {
        if self.by_lan.len() >= self.cfg.max_circuits {
            self.stats.circuits_refused += 1;
            return None;
        }
        let s = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        self.generation = (self.generation % ((1 << (32 - SLOT_BITS)) - 1)) + 1;
        let dlc = (self.generation << SLOT_BITS) | s;
        let mut ids = Ids {
            largest_frame: 0x30,
            ..Ids::default()
        };
        if origin {
            ids.origin_mac = key.station;
            ids.origin_sap = key.station_sap;
            ids.target_mac = key.partner;
            ids.target_sap = key.partner_sap;
            ids.origin_port = lan_port as u32 + 1;
            ids.origin_dlc = dlc;
            ids.origin_transport = peer as u32 + 1;
        } else {
            ids.target_mac = key.station;
            ids.target_sap = key.station_sap;
            ids.origin_mac = key.partner;
            ids.origin_sap = key.partner_sap;
            ids.target_port = lan_port as u32 + 1;
            ids.target_dlc = dlc;
            ids.target_transport = peer as u32 + 1;
        }
        let window = self.peers[peer].window.max(1);
        self.slots[s as usize] = Some(Circuit {
            key,
            lan_port,
            peer,
            origin,
            state: CircuitState::Resolving,
            ids,
            station: Station::new(self.cfg.llc2),
            held: Vec::new(),
            xid_from_station: None,
            send_window: window,
            granted: window,
            fci_sent: false,
            backlog: VecDeque::new(),
            grant_due: None,
            from_station: 0,
            to_station: 0,
            since: now,
        });
        self.by_lan.insert(key, s);
        self.peers[peer].circuits += 1;
        self.stats.circuits_started += 1;
        Some(s)
    }

    /// Frees a circuit; with `tell_station`, its station gets DISC first (when it had a link).
    fn end_circuit(&mut self, now: u64, s: u32, tell_station: bool, why: &'static str) {
        let Some(mut c) = self.slots[s as usize].take() else {
            return;
        };
        if tell_station {
            let mut tx = Vec::new();
            c.station.disconnect(now, &mut tx);
            for t in tx {
                self.lan_send(&c.key, c.lan_port, &t);
            }
        }
        self.by_lan.remove(&c.key);
        self.free.push(s);
        let p = &mut self.peers[c.peer];
        p.circuits = p.circuits.saturating_sub(1);
        self.stats.circuits_ended += 1;
        if matches!(
            c.state,
            CircuitState::Connected | CircuitState::Halting | CircuitState::Halted
        ) {
            self.events.push(DlswEvent::CircuitDown {
                key: c.key,
                peer: p.addr,
                why,
            });
        }
    }

    /// Sends a control message of circuit `s` to its peer.
    fn control(&mut self, s: u32, t: u8, data: &[u8]) {
        let c = self.slots[s as usize].as_mut().expect("a live slot");
        let mut ids = c.ids;
        ids.direction = if c.origin {
            dlsw::DIR_FROM_ORIGIN
        } else {
            dlsw::DIR_FROM_TARGET
        };
        let fl = c.grant_due.take().map_or(0, |op| flow::FCA | op);
        let p = &mut self.peers[c.peer];
        dlsw::write_control(&mut p.out, t, fl, &ids, data);
        p.stats.messages_out += 1;
    }

    /// The far end's identifiers of circuit `s` (where its info messages go).
    fn far_end(c: &Circuit) -> (u32, u32) {
        if c.origin {
            (c.ids.target_dlc, c.ids.target_port)
        } else {
            (c.ids.origin_dlc, c.ids.origin_port)
        }
    }

    // ---- the LAN side ----

    /// A frame to our station of circuit `key` on `port`, from its partner.
    fn lan_send(&mut self, key: &LanKey, port: u16, t: &Tx) {
        let f = llc2::frame(&llc2::Frame {
            dst: key.station,
            src: key.partner,
            dsap: key.station_sap,
            ssap: key.partner_sap,
            response: t.response,
            control: t.control,
            info: &t.info,
        });
        self.stats.lan_frames_out += 1;
        self.lan_out.push((port, f));
    }

    /// One LLC frame from LAN port `port` (untagged).
    pub fn lan_frame(&mut self, now: u64, port: u16, frame: &[u8]) {
        self.stats.lan_frames_in += 1;
        let f = match llc2::parse(frame) {
            Ok(f) => f,
            Err(_) => {
                self.stats.lan_malformed += 1;
                return;
            }
        };
        if f.src[0] & 1 != 0 {
            self.stats.lan_malformed += 1;
            return;
        }
        self.local.insert(f.src, (port, now));
        let key = LanKey {
            station: f.src,
            station_sap: f.ssap,
            partner: f.dst,
            partner_sap: f.dsap,
        };
        let circuit = self.by_lan.get(&key).copied();
        match (f.control, circuit) {
            (
                Control::U {
                    kind: Unnumbered::Test,
                    pf,
                },
                _,
            ) => {
                if f.response {
                    self.test_response(now, port, &f)
                } else {
                    self.test_command(now, port, &f, pf)
                }
            }
            (_, Some(s)) => self.circuit_lan(now, s, &f),
            (
                Control::U {
                    kind: Unnumbered::Xid,
                    ..
                },
                None,
            )
            | (
                Control::U {
                    kind: Unnumbered::Sabme,
                    ..
                },
                None,
            ) if !f.response && f.dst[0] & 1 == 0 => self.start_circuit(now, port, key, &f),
            (
                Control::U {
                    kind: Unnumbered::Disc,
                    pf,
                },
                None,
            ) if !f.response => {
                // No circuit: nothing to disconnect; the standard answer.
                let t = Tx {
                    control: Control::U {
                        kind: Unnumbered::Dm,
                        pf,
                    },
                    response: true,
                    info: Vec::new(),
                };
                if self.reaches(&f.dst) {
                    self.lan_send(&key, port, &t);
                }
                self.stats.lan_no_circuit += 1;
            }
            _ => self.stats.lan_no_circuit += 1,
        }
    }

    /// A peer currently connected reaches `mac`.
    fn reaches(&self, mac: &[u8; 6]) -> bool {
        self.remote.get(mac).is_some_and(|(bits, _)| {
            (0..self.peers.len())
                .any(|i| bits & (1 << i) != 0 && self.peers[i].state == PeerState::Connected)
        })
    }

    fn test_command(&mut self, now: u64, port: u16, f: &llc2::Frame<'_>, pf: bool) {
        if f.dst[0] & 1 != 0 || self.local.get(&f.dst).is_some_and(|(p, _)| *p == port) {
            // A group TEST, or one for a station on this LAN: not ours to answer.
            return;
        }
        let w = Waiter::Test {
            port,
            target: f.dst,
            station: f.src,
            station_sap: f.ssap,
            target_sap: f.dsap,
            pf,
            info: f.info.to_vec(),
        };
        if self.reaches(&f.dst) {
            self.stats.tests_answered += 1;
            return self.wake(now, w, None);
        }
        self.explore(now, f.dst, f.dsap, f.src, f.ssap, w);
    }

    /// Sends CANUREACH_ex for `mac` to every connected peer (unless one is out already) and
    /// adds `w` to those waiting for it.
    fn explore(&mut self, now: u64, mac: [u8; 6], sap: u8, from: [u8; 6], from_sap: u8, w: Waiter) {
        if let Some(e) = self.peer_search.iter_mut().find(|e| e.mac == mac) {
            e.waiters.push(w);
            return;
        }
        self.peer_search.push(Explorer {
            mac,
            deadline: now + self.cfg.explorer_ms,
            waiters: vec![w],
        });
        let ids = Ids {
            ssp_flags: dlsw::SSP_EXPLORER,
            target_mac: mac,
            target_sap: sap,
            origin_mac: from,
            origin_sap: from_sap,
            direction: dlsw::DIR_FROM_ORIGIN,
            largest_frame: 0x30,
            ..Ids::default()
        };
        for p in self
            .peers
            .iter_mut()
            .filter(|p| p.state == PeerState::Connected)
        {
            dlsw::write_control(&mut p.out, msg::CANUREACH, 0, &ids, &[]);
            p.stats.messages_out += 1;
            p.stats.explorers_out += 1;
            self.stats.explorers_sent += 1;
        }
    }

    /// A waiter's explorer was answered; `peer`: by whom (None: answered locally).
    fn wake(&mut self, now: u64, w: Waiter, peer: Option<usize>) {
        match w {
            Waiter::Test {
                port,
                target,
                station,
                station_sap,
                target_sap,
                pf,
                info,
            } => {
                // The TEST response, as if from the partner.
                let key = LanKey {
                    station,
                    station_sap,
                    partner: target,
                    partner_sap: target_sap,
                };
                self.stats.tests_answered += 1;
                let t = Tx {
                    control: Control::U {
                        kind: Unnumbered::Test,
                        pf,
                    },
                    response: true,
                    info,
                };
                self.lan_send(&key, port, &t);
            }
            Waiter::Circuit(s) => {
                if let Some(p) = peer {
                    self.circuit_resolved(s, p);
                }
            }
            Waiter::Peer { peer, ids } => self.answer_canureach(now, peer, ids),
        }
    }

    /// A station on our LAN answered one of the TESTs sent for a peer's CANUREACH.
    fn test_response(&mut self, now: u64, _port: u16, f: &llc2::Frame<'_>) {
        let Some(k) = self.lan_search.iter().position(|e| e.mac == f.src) else {
            return;
        };
        let e = self.lan_search.swap_remove(k);
        for w in e.waiters {
            self.wake(now, w, None);
        }
    }

    fn start_circuit(&mut self, now: u64, port: u16, key: LanKey, f: &llc2::Frame<'_>) {
        let Some(peer) = self.pick_peer(&key.partner) else {
            // Find the partner first; the circuit waits on the first peer as a placeholder.
            let Some(first) = self
                .peers
                .iter()
                .position(|p| p.state == PeerState::Connected)
            else {
                self.stats.lan_no_circuit += 1;
                return;
            };
            let Some(s) = self.new_circuit(now, key, port, first, true) else {
                return;
            };
            self.circuit_lan(now, s, f);
            return self.explore(
                now,
                key.partner,
                key.partner_sap,
                key.station,
                key.station_sap,
                Waiter::Circuit(s),
            );
        };
        let Some(s) = self.new_circuit(now, key, port, peer, true) else {
            return;
        };
        self.circuit_lan(now, s, f);
        self.circuit_resolved(s, peer);
    }

    /// The peer a new circuit to `mac` goes to: the next in turn among those that reach it
    /// (load balancing), else the first.
    fn pick_peer(&mut self, mac: &[u8; 6]) -> Option<usize> {
        let bits = self.remote.get(mac)?.0;
        let n = self.peers.len();
        let up = |i: usize| bits & (1 << i) != 0 && self.peers[i].state == PeerState::Connected;
        if self.cfg.load_balance {
            let start = self.next_peer;
            let i = (0..n).map(|k| (start + k) % n).find(|&i| up(i))?;
            self.next_peer = (i + 1) % n;
            Some(i)
        } else {
            (0..n).find(|&i| up(i))
        }
    }

    /// A circuit's partner is reachable through `peer`: CANUREACH_cs.
    fn circuit_resolved(&mut self, s: u32, peer: usize) {
        let Some(c) = self.slots[s as usize].as_mut() else {
            return;
        };
        if c.state != CircuitState::Resolving {
            return;
        }
        if c.peer != peer {
            self.peers[c.peer].circuits -= 1;
            self.peers[peer].circuits += 1;
            c.peer = peer;
            c.ids.origin_transport = peer as u32 + 1;
            let w = self.peers[peer].window.max(1);
            c.send_window = w;
            c.granted = w;
        }
        c.state = CircuitState::CircuitPending;
        self.control(s, msg::CANUREACH, &[]);
    }

    /// A frame from our station of circuit `s`.
    fn circuit_lan(&mut self, now: u64, s: u32, f: &llc2::Frame<'_>) {
        let state = self.circuit(s).state;
        match f.control {
            Control::U {
                kind: Unnumbered::Xid,
                pf,
            } => {
                if !matches!(
                    state,
                    CircuitState::Established
                        | CircuitState::ContactPending
                        | CircuitState::Contacting
                        | CircuitState::Connected
                ) {
                    // Held until the circuit is up; only the latest XID matters.
                    let c = self.circuit(s);
                    c.held.clear();
                    c.held.push(llc2::frame(f));
                    if !f.response {
                        c.xid_from_station = Some(pf);
                    }
                    return;
                }
                if !f.response {
                    self.circuit(s).xid_from_station = Some(pf);
                }
                self.control(s, msg::XIDFRAME, f.info);
            }
            control => {
                let mut tx = std::mem::take(&mut self.tx);
                let mut ev = std::mem::take(&mut self.ev);
                self.circuit(s)
                    .station
                    .on_frame(now, control, f.response, f.info, &mut tx, &mut ev);
                self.after_station(now, s, &mut tx, &mut ev);
                self.tx = tx;
                self.ev = ev;
            }
        }
    }

    /// Sends what circuit `s`'s station produced and acts on its events.
    fn after_station(&mut self, now: u64, s: u32, tx: &mut Vec<Tx>, ev: &mut Vec<StEvent>) {
        let (key, port) = {
            let c = self.circuit(s);
            (c.key, c.lan_port)
        };
        for t in tx.drain(..) {
            self.lan_send(&key, port, &t);
        }
        for e in ev.drain(..) {
            let Some(c) = self.slots[s as usize].as_mut() else {
                return;
            };
            match e {
                StEvent::ConnectRequest => {
                    if c.state == CircuitState::Established {
                        c.state = CircuitState::ContactPending;
                        self.control(s, msg::CONTACT, &[]);
                    }
                    // Otherwise the SABME waits in the station until the circuit is up.
                }
                StEvent::Connected => {
                    if c.state == CircuitState::Contacting {
                        c.state = CircuitState::Connected;
                        c.since = now;
                        self.stats.circuits_connected += 1;
                        self.events.push(DlswEvent::CircuitUp {
                            key,
                            peer: self.peers[c.peer].addr,
                        });
                        self.control(s, msg::CONTACTED, &[]);
                    }
                }
                StEvent::Data(d) => {
                    c.from_station += 1;
                    self.toward_peer(s, d);
                }
                StEvent::Disconnected(why) => match c.state {
                    CircuitState::Halted => {
                        self.control(s, msg::DL_HALTED, &[]);
                        self.end_circuit(now, s, false, "halted by the peer");
                        return;
                    }
                    CircuitState::Halting => {}
                    _ if why == Down::Local => {}
                    _ => {
                        let halt = matches!(
                            c.state,
                            CircuitState::Connected
                                | CircuitState::Established
                                | CircuitState::ContactPending
                                | CircuitState::Contacting
                        );
                        if halt {
                            c.state = CircuitState::Halting;
                            self.control(s, msg::HALT_DL, &[]);
                        } else {
                            self.end_circuit(now, s, false, "station left");
                            return;
                        }
                    }
                },
            }
        }
    }

    /// Data from our station to the far end, as the pacing window allows.
    fn toward_peer(&mut self, s: u32, d: Vec<u8>) {
        let c = self.slots[s as usize].as_mut().expect("a live slot");
        if c.granted == 0 || !c.backlog.is_empty() {
            c.backlog.push_back(d);
            self.stats.paced += 1;
            let mut tx = Vec::new();
            c.station.set_busy(true, &mut tx);
            let (key, port) = (c.key, c.lan_port);
            for t in tx {
                self.lan_send(&key, port, &t);
            }
            return;
        }
        self.send_info(s, &d);
    }

    fn send_info(&mut self, s: u32, d: &[u8]) {
        let c = self.slots[s as usize].as_mut().expect("a live slot");
        let mut fl = 0;
        if !c.fci_sent && c.granted == c.send_window {
            // The first frame of a window asks for the next.
            fl |= flow::FCI;
            c.fci_sent = true;
        }
        if let Some(op) = c.grant_due.take() {
            fl |= flow::FCA | op;
        }
        c.granted -= 1;
        let (dlc, port) = Self::far_end(c);
        let p = &mut self.peers[c.peer];
        dlsw::write_info(&mut p.out, msg::INFOFRAME, fl, dlc, port, d);
        p.stats.messages_out += 1;
        p.stats.info_out += 1;
    }

    /// Sends what the backlog and the window allow, and clears the station's busy state when
    /// the backlog has gone.
    fn drain_backlog(&mut self, s: u32) {
        loop {
            let c = self.slots[s as usize].as_mut().expect("a live slot");
            if c.granted == 0 {
                return;
            }
            let Some(d) = c.backlog.pop_front() else {
                break;
            };
            self.send_info(s, &d);
        }
        let c = self.slots[s as usize].as_mut().expect("a live slot");
        let mut tx = Vec::new();
        c.station.set_busy(false, &mut tx);
        let (key, port) = (c.key, c.lan_port);
        for t in tx {
            self.lan_send(&key, port, &t);
        }
    }

    /// Takes the flow control byte of a message for circuit `s`.
    fn pacing(&mut self, s: u32, fl: u8) {
        let c = self.slots[s as usize].as_mut().expect("a live slot");
        if fl & flow::FCA != 0 {
            let w = c.send_window;
            c.send_window = match fl & flow::OP_MASK {
                flow::INCREMENT => w.saturating_add(1),
                flow::DECREMENT => w.saturating_sub(1).max(1),
                flow::RESET => 0,
                flow::HALVE => (w / 2).max(1),
                _ => w,
            };
            c.granted = c.granted.saturating_add(c.send_window);
            c.fci_sent = false;
        }
        if fl & flow::FCI != 0 {
            // Repeat while our station keeps up with what the peer sends; halve when it lags.
            let lagging = c.station.backlog() > 4 * self.cfg.llc2.window as usize;
            c.grant_due = Some(if lagging { flow::HALVE } else { flow::REPEAT });
        }
        if !c.backlog.is_empty() && c.granted > 0 {
            self.drain_backlog(s);
        }
    }

    /// An INFOFRAME or IFCM for circuit `s`.
    fn circuit_info(&mut self, now: u64, s: u32, m: &dlsw::Message<'_>) {
        self.pacing(s, m.flow);
        if m.msg_type == msg::INFOFRAME {
            let mut tx = std::mem::take(&mut self.tx);
            let mut ev = std::mem::take(&mut self.ev);
            let c = self.circuit(s);
            c.to_station += 1;
            c.station.send(now, m.data.to_vec(), &mut tx);
            self.after_station(now, s, &mut tx, &mut ev);
            self.tx = tx;
            self.ev = ev;
        }
        self.flush_grant(s);
    }

    /// A grant still owed after a message's handling goes in an IFCM of its own.
    fn flush_grant(&mut self, s: u32) {
        let Some(c) = self.slots[s as usize].as_mut() else {
            return;
        };
        if let Some(op) = c.grant_due.take() {
            let (dlc, port) = Self::far_end(c);
            let p = &mut self.peers[c.peer];
            dlsw::write_info(&mut p.out, msg::IFCM, flow::FCA | op, dlc, port, &[]);
            p.stats.messages_out += 1;
        }
    }

    // ---- circuits: the SSP side ----

    fn canureach(&mut self, now: u64, i: usize, ids: Ids) {
        self.peers[i].stats.explorers_in += 1;
        if ids.ssp_flags & dlsw::SSP_EXPLORER == 0 && is_zero(&ids.origin_mac) {
            self.peers[i].stats.malformed += 1;
            return;
        }
        let fresh = self
            .local
            .get(&ids.target_mac)
            .is_some_and(|(_, t)| now.saturating_sub(*t) < self.cfg.cache_ms);
        if fresh {
            return self.answer_canureach(now, i, ids);
        }
        // Find the MAC on the LAN: a TEST out of every LAN port, answered (or not) later.
        if let Some(e) = self.lan_search.iter_mut().find(|e| e.mac == ids.target_mac) {
            e.waiters.push(Waiter::Peer { peer: i, ids });
            return;
        }
        self.lan_search.push(Explorer {
            mac: ids.target_mac,
            deadline: now + self.cfg.explorer_ms,
            waiters: vec![Waiter::Peer { peer: i, ids }],
        });
        let test = llc2::frame(&llc2::Frame {
            dst: ids.target_mac,
            src: ids.origin_mac,
            dsap: if ids.ssp_flags & dlsw::SSP_EXPLORER != 0 {
                llc2::NULL_SAP
            } else {
                ids.target_sap
            },
            ssap: ids.origin_sap,
            response: false,
            control: Control::U {
                kind: Unnumbered::Test,
                pf: true,
            },
            info: &[],
        });
        for &p in &self.cfg.lan_ports {
            self.lan_out.push((p, test.clone()));
            self.stats.lan_frames_out += 1;
        }
    }

    /// Our LAN reaches `ids.target_mac`: ICANREACH (ex), or a target circuit and ICANREACH_cs.
    fn answer_canureach(&mut self, now: u64, i: usize, ids: Ids) {
        if self.peers[i].state != PeerState::Connected {
            return;
        }
        let Some(&(port, _)) = self.local.get(&ids.target_mac) else {
            return;
        };
        if ids.ssp_flags & dlsw::SSP_EXPLORER != 0 {
            let mut r = ids;
            r.direction = dlsw::DIR_FROM_TARGET;
            let p = &mut self.peers[i];
            dlsw::write_control(&mut p.out, msg::ICANREACH, 0, &r, &[]);
            p.stats.messages_out += 1;
            return;
        }
        let key = LanKey {
            station: ids.target_mac,
            station_sap: ids.target_sap,
            partner: ids.origin_mac,
            partner_sap: ids.origin_sap,
        };
        if let Some(&old) = self.by_lan.get(&key) {
            // The origin started again (its end of the old circuit is gone): so does ours.
            self.end_circuit(now, old, true, "restarted by the origin");
        }
        let Some(s) = self.new_circuit(now, key, port, i, false) else {
            return;
        };
        let c = self.circuit(s);
        c.ids.origin_port = ids.origin_port;
        c.ids.origin_dlc = ids.origin_dlc;
        c.ids.origin_transport = ids.origin_transport;
        c.state = CircuitState::ReachPending;
        self.control(s, msg::ICANREACH, &[]);
    }

    fn icanreach(&mut self, now: u64, i: usize, ids: Ids) {
        if ids.ssp_flags & dlsw::SSP_EXPLORER != 0 {
            let e = self.remote.entry(ids.target_mac).or_insert((0, now));
            e.0 |= 1 << i;
            e.1 = now;
            if let Some(k) = self
                .peer_search
                .iter()
                .position(|e| e.mac == ids.target_mac)
            {
                let ex = self.peer_search.swap_remove(k);
                for w in ex.waiters {
                    self.wake(now, w, Some(i));
                }
            }
            return;
        }
        let Some(s) = self.slot_of(i, ids.origin_dlc) else {
            self.peers[i].stats.unknown_circuit += 1;
            return;
        };
        let c = self.circuit(s);
        if c.state != CircuitState::CircuitPending {
            return;
        }
        c.ids.target_port = ids.target_port;
        c.ids.target_dlc = ids.target_dlc;
        c.ids.target_transport = ids.target_transport;
        c.state = CircuitState::Established;
        self.control(s, msg::REACH_ACK, &[]);
        self.circuit_established(s);
    }

    /// What waited for the circuit goes now: the held XID, the held SABME.
    fn circuit_established(&mut self, s: u32) {
        let held = std::mem::take(&mut self.circuit(s).held);
        for h in held {
            if let Ok(f) = llc2::parse(&h) {
                self.control(s, msg::XIDFRAME, f.info);
            }
        }
        let c = self.circuit(s);
        if c.station.state == StState::Incoming {
            c.state = CircuitState::ContactPending;
            self.control(s, msg::CONTACT, &[]);
        }
    }

    fn circuit_control(&mut self, now: u64, s: u32, t: u8, data: &[u8], fl: u8) {
        self.pacing(s, fl);
        let mut tx = std::mem::take(&mut self.tx);
        let mut ev = std::mem::take(&mut self.ev);
        let state = self.circuit(s).state;
        match t {
            msg::REACH_ACK if state == CircuitState::ReachPending => {
                self.circuit(s).state = CircuitState::Established;
            }
            msg::XIDFRAME => {
                let c = self.circuit(s);
                let (response, pf) = match c.xid_from_station.take() {
                    Some(pf) => (true, pf),
                    None => (false, true),
                };
                let x = Tx {
                    control: Control::U {
                        kind: Unnumbered::Xid,
                        pf,
                    },
                    response,
                    info: data.to_vec(),
                };
                let (key, port) = (c.key, c.lan_port);
                self.lan_send(&key, port, &x);
            }
            msg::CONTACT => {
                let c = self.circuit(s);
                c.state = CircuitState::Contacting;
                c.station.connect(now, &mut tx);
            }
            msg::CONTACTED if state == CircuitState::ContactPending => {
                self.stats.circuits_connected += 1;
                let c = self.slots[s as usize].as_mut().expect("a live slot");
                c.state = CircuitState::Connected;
                c.since = now;
                c.station.accept(now, &mut tx);
                let (key, peer) = (c.key, self.peers[c.peer].addr);
                self.events.push(DlswEvent::CircuitUp { key, peer });
            }
            msg::HALT_DL | msg::HALT_DL_NOACK => {
                let c = self.circuit(s);
                let linked = !matches!(c.station.state, StState::Disconnected);
                if linked {
                    c.state = CircuitState::Halted;
                    c.station.disconnect(now, &mut tx);
                }
                if t == msg::HALT_DL_NOACK {
                    self.after_station(now, s, &mut tx, &mut ev);
                    self.end_circuit(now, s, false, "halted by the peer");
                    self.tx = tx;
                    self.ev = ev;
                    return;
                }
                if !linked {
                    self.control(s, msg::DL_HALTED, &[]);
                    self.end_circuit(now, s, false, "halted by the peer");
                    self.tx = tx;
                    self.ev = ev;
                    return;
                }
            }
            msg::DL_HALTED => {
                self.end_circuit(now, s, false, "station left");
                self.tx = tx;
                self.ev = ev;
                return;
            }
            _ => {}
        }
        if self.slots[s as usize].is_some() {
            self.after_station(now, s, &mut tx, &mut ev);
            self.flush_grant(s);
        }
        self.tx = tx;
        self.ev = ev;
    }

    // ---- time ----

    /// Keepalives, dead peers, explorers that found nothing, the stations' timers, the cache.
    pub fn tick(&mut self, now: u64) {
        for i in 0..self.peers.len() {
            let p = &mut self.peers[i];
            if p.state == PeerState::Disconnected {
                continue;
            }
            let dead = self.cfg.keepalive_ms * self.cfg.dead_after as u64;
            if dead > 0 && now.saturating_sub(p.last_rx) > dead {
                p.close = true;
                self.peer_closed(now, i, "keepalives missed");
                continue;
            }
            if p.state == PeerState::Connected
                && self.cfg.keepalive_ms > 0
                && p.out.is_empty()
                && now.saturating_sub(p.last_tx) >= self.cfg.keepalive_ms
            {
                dlsw::write_info(&mut p.out, msg::KEEPALIVE, 0, 0, 0, &[]);
                p.stats.messages_out += 1;
                p.stats.keepalives_out += 1;
            }
        }
        self.lan_search.retain(|e| now < e.deadline);
        let mut k = 0;
        while k < self.peer_search.len() {
            if now >= self.peer_search[k].deadline {
                let e = self.peer_search.swap_remove(k);
                self.stats.explorers_timed_out += 1;
                for w in e.waiters {
                    if let Waiter::Circuit(s) = w {
                        if self.slots[s as usize].is_some() {
                            let mut tx = Vec::new();
                            self.circuit(s).station.refuse(&mut tx);
                            let (key, port) = (self.circuit(s).key, self.circuit(s).lan_port);
                            for t in tx {
                                self.lan_send(&key, port, &t);
                            }
                            self.end_circuit(now, s, false, "partner not found");
                        }
                    }
                }
            } else {
                k += 1;
            }
        }
        if now < self.last_sweep + 10 {
            return;
        }
        self.last_sweep = now;
        let mut tx = std::mem::take(&mut self.tx);
        let mut ev = std::mem::take(&mut self.ev);
        for s in 0..self.slots.len() as u32 {
            let Some(c) = self.slots[s as usize].as_mut() else {
                continue;
            };
            if c.station.deadline().is_some_and(|d| now >= d) {
                c.station.tick(now, &mut tx, &mut ev);
                self.after_station(now, s, &mut tx, &mut ev);
            }
        }
        self.tx = tx;
        self.ev = ev;
        // The caches age in seconds: walking them every sweep cost more than the stations.
        if now >= self.last_expiry + 1_000 {
            self.last_expiry = now;
            let ttl = self.cfg.cache_ms;
            self.local.retain(|_, (_, t)| now.saturating_sub(*t) < ttl);
            self.remote.retain(|_, (_, t)| now.saturating_sub(*t) < ttl);
        }
    }

    /// Marks that bytes were just written to peer `i` (keepalives count from there).
    pub fn wrote(&mut self, now: u64, i: usize) {
        self.peers[i].last_tx = now;
    }
}

#[cfg(test)]
mod tests;
