//! The GGSN's GTP-C (TS 29.060), as a function from a received message to the messages to send:
//! no sockets, no clock of its own, so tests drive it message by message and the service
//! ([`super::service`]) only moves bytes.
//!
//! What it answers:
//! - Echo Request (on GTP-C and on GTP-U) with an Echo Response carrying the restart counter;
//!   any message of another GTP version with Version Not Supported (7.2.3);
//! - Create PDP Context Request: the APN looked up, an address taken from its pool for each PDP
//!   type asked for (IPv4, IPv6, IPv4v6; dynamic, or the static address the MS asks for if it is
//!   free in the pool), a TEID chosen (the data plane's slot), the context installed in the data
//!   plane, DNS servers in the PCO; rate-limited (beyond `create-rate`: "no resources
//!   available"); a context is made whole or not at all, and an address taken for a refused
//!   request goes back;
//! - Update PDP Context Request: the SGSN's new TEIDs and addresses (a routing area update to
//!   another SGSN); Delete PDP Context Request (with teardown: every context of the IMSI);
//! - Error Indication from an SGSN: the context it names is deleted here (TS 29.281 7.3.1);
//! - a G-PDU to an unknown TEID (punted by the data plane): an Error Indication back, at most
//!   [`ERROR_INDICATION_RATE`] a second;
//! - duplicates: a request whose sender and sequence number were answered in the last
//!   [`DUPLICATE_WINDOW_MS`] gets the same answer again, and nothing is done twice (7.6), if
//!   it is the same request: a retransmission is identical (7.6), while an SGSN sending more
//!   than 65,536 requests in the window reuses numbers for new ones, which are served;
//! - Recovery: an SGSN whose restart counter changes has lost its contexts; theirs are deleted.
//!
//! Malformed messages are counted and dropped; a request missing a mandatory IE, or with one
//! that does not decode, is answered with cause 202 or 201 (7.7.1). Secondary PDP contexts
//! (TFTs) are not supported: a Create without IMSI (a secondary's form) gets "service not
//! supported".

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use dataplane::gtp::{Context, GtpTable};
use packet::gtp::{self, cause, ie, msg, EndUserAddress, MsgBuilder};

use super::pool::Pool;
use crate::config::ggsn::GgsnCfg;

/// How long a request's answer is kept for a retransmission of it (T3-RESPONSE x N3-REQUESTS
/// at their defaults: 3 s x 5).
pub const DUPLICATE_WINDOW_MS: u64 = 15_000;
/// Error Indications sent per second at most.
pub const ERROR_INDICATION_RATE: u32 = 1_000;

/// T3-RESPONSE and N3-REQUESTS (TS 29.060 7.6, their usual values): an Echo Request is sent
/// again after 3 s without an answer, and a path that answers none of 5 has failed.
pub const T3_MS: u64 = 3_000;
pub const N3: u32 = 5;

/// What happened to a path, for the log (the service drains them after each message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GtpEvent {
    /// An SGSN's restart counter changed: it lost its contexts, and so did we.
    PeerRestart {
        sgsn: Ipv4Addr,
        old: u8,
        new: u8,
        contexts: usize,
    },
    /// An SGSN answered none of N3 Echo Requests: its contexts are deleted.
    PathFailure { sgsn: Ipv4Addr, contexts: usize },
}

/// A message to send: to `to`, from the GTP-C or GTP-U port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Send {
    pub to: SocketAddr,
    pub user_plane: bool,
    pub bytes: Vec<u8>,
}

/// One PDP context, as the control plane keeps it.
#[derive(Clone, Debug)]
pub struct PdpContext {
    pub imsi: String,
    pub nsapi: u8,
    pub msisdn: Option<String>,
    pub apn: u16,
    /// Ours: the TEID the SGSN sends user data and signalling to (one value for both).
    pub teid: u32,
    pub sgsn_teid_c: u32,
    pub sgsn_teid_u: u32,
    pub sgsn_c: Ipv4Addr,
    pub sgsn_u: Ipv4Addr,
    pub ue_v4: Option<Ipv4Addr>,
    /// The /64 handed out (its upper 64 bits).
    pub ue_v6: Option<u64>,
    pub qos: Vec<u8>,
    pub charging_id: u32,
    pub created_ms: u64,
    /// The data plane's counters for the slot when this context got it (see
    /// `dataplane::gtp`: a slot's counters run on from its previous context).
    pub counters_base: [u64; 4],
}

impl PdpContext {
    fn plane(&self) -> Context {
        Context {
            apn: self.apn,
            peer_teid: self.sgsn_teid_u,
            peer: u32::from(self.sgsn_u),
            ue_v4: self.ue_v4.map(u32::from),
            ue_v6: self.ue_v6,
        }
    }
}

/// What the GGSN counts (`show gtp statistics`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GtpStats {
    pub received: u64,
    pub malformed: u64,
    pub unknown_type: u64,
    pub duplicates: u64,
    pub version_not_supported: u64,
    pub echo_requests: u64,
    /// Create PDP Context Responses by cause value.
    pub creates: std::collections::BTreeMap<u8, u64>,
    pub updates: std::collections::BTreeMap<u8, u64>,
    pub deletes: std::collections::BTreeMap<u8, u64>,
    pub error_indications_received: u64,
    pub error_indications_sent: u64,
    pub error_indications_limited: u64,
    pub echo_requests_sent: u64,
    pub path_failures: u64,
    pub contexts_torn_down_by_path_failure: u64,
    /// Contexts deleted because their SGSN restarted (its Recovery IE changed).
    pub peer_restarts: u64,
    pub contexts_torn_down_by_restart: u64,
}

/// An APN's pools in use: (taken, size), IPv4 addresses and IPv6 /64s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApnUsage {
    pub v4: (u32, u32),
    pub v6: (u32, u32),
}

/// An SGSN as its path is kept.
#[derive(Default)]
struct Peer {
    restart: Option<u8>,
    contexts: usize,
    /// The Echo Request waiting for an answer: its sequence number, when it was last sent,
    /// and how many times.
    echo: Option<(u16, u64, u32)>,
    next_echo_ms: u64,
}

struct Apn {
    name: String,
    v4: Option<(u32, Pool)>,
    v6: Option<(u64, Pool)>,
    dns4: Vec<Ipv4Addr>,
    dns6: Vec<Ipv6Addr>,
}

/// A token bucket over the engine's clock (milliseconds).
struct Limiter {
    rate: u32,
    tokens: f64,
    last_ms: u64,
}

impl Limiter {
    fn new(rate: u32) -> Self {
        Limiter {
            rate,
            // A tenth of a second's worth at once.
            tokens: f64::from(rate.max(10)) / 10.0,
            last_ms: 0,
        }
    }

    fn admit(&mut self, now_ms: u64) -> bool {
        let burst = f64::from(self.rate.max(10)) / 10.0;
        let dt = now_ms.saturating_sub(self.last_ms) as f64 / 1000.0;
        self.last_ms = self.last_ms.max(now_ms);
        self.tokens = (self.tokens + dt * f64::from(self.rate)).min(burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

pub struct Engine {
    table: Arc<GtpTable>,
    local: Ipv4Addr,
    /// Our restart counter (the Recovery IE).
    pub recovery: u8,
    apns: Vec<Apn>,
    /// By data-plane slot.
    contexts: Vec<Option<PdpContext>>,
    /// Each slot's last TEID, so the next context there gets the next generation.
    last_teid: Vec<u32>,
    free_slots: VecDeque<u32>,
    fresh_slot: u32,
    by_imsi: HashMap<(String, u8), u32>,
    /// Each SGSN (by its signalling address): restart counter, contexts, Echo state.
    peers: HashMap<Ipv4Addr, Peer>,
    echo_interval_ms: u64,
    echo_seq: u16,
    /// What happened to paths since the service last looked.
    pub events: Vec<GtpEvent>,
    /// Per sender and sequence number: when, a fingerprint of the request, the answer.
    answered: HashMap<(SocketAddr, u16), (u64, u64, Vec<u8>)>,
    answered_order: VecDeque<(u64, SocketAddr, u16)>,
    creates: Limiter,
    error_inds: Limiter,
    next_charging_id: u32,
    last_ms: u64,
    pub stats: GtpStats,
}

/// The IEs of a request, by type (the first of each; a GGSN reads at most one of each here but
/// the two GSN addresses, kept in order).
struct Request<'a> {
    h: gtp::Header,
    by_type: HashMap<u8, &'a [u8]>,
    gsn: Vec<&'a [u8]>,
}

fn read_request(b: &[u8]) -> Result<Request<'_>, packet::Error> {
    let h = gtp::parse_header(b)?;
    let mut by_type = HashMap::new();
    let mut gsn = Vec::new();
    if h.msg_type == msg::G_PDU {
        // A user's packet, not IEs.
        return Ok(Request { h, by_type, gsn });
    }
    for e in gtp::ies(h.payload(b)) {
        let e = e?;
        if e.ty == ie::GSN_ADDRESS {
            gsn.push(e.value);
        }
        by_type.entry(e.ty).or_insert(e.value);
    }
    Ok(Request { h, by_type, gsn })
}

fn u32_of(v: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(v.get(..4)?.try_into().ok()?))
}

impl Engine {
    pub fn new(cfg: &GgsnCfg, table: Arc<GtpTable>, recovery: u8) -> Engine {
        let apns = cfg
            .apns
            .iter()
            .map(|a| {
                let pools = a.pools();
                Apn {
                    name: a.name.to_ascii_lowercase(),
                    v4: pools.v4.map(|(base, n)| (base, Pool::v4(n))),
                    v6: pools.v6.map(|(base, n)| (base, Pool::new(0, n))),
                    dns4: a
                        .dns
                        .iter()
                        .filter_map(|d| match d {
                            IpAddr::V4(v) => Some(*v),
                            _ => None,
                        })
                        .collect(),
                    dns6: a
                        .dns
                        .iter()
                        .filter_map(|d| match d {
                            IpAddr::V6(v) => Some(*v),
                            _ => None,
                        })
                        .collect(),
                }
            })
            .collect();
        let cap = table.capacity() as usize;
        Engine {
            table,
            local: cfg.address,
            recovery,
            apns,
            contexts: vec![None; cap],
            last_teid: vec![0; cap],
            free_slots: VecDeque::new(),
            fresh_slot: 0,
            by_imsi: HashMap::new(),
            peers: HashMap::new(),
            echo_interval_ms: u64::from(cfg.echo_interval_s) * 1000,
            echo_seq: 0,
            events: Vec::new(),
            answered: HashMap::new(),
            answered_order: VecDeque::new(),
            creates: Limiter::new(cfg.create_rate),
            error_inds: Limiter::new(ERROR_INDICATION_RATE),
            next_charging_id: 1,
            last_ms: 0,
            stats: GtpStats::default(),
        }
    }

    pub fn contexts(&self) -> impl Iterator<Item = &PdpContext> {
        self.contexts.iter().flatten()
    }

    /// The engine's clock as of the last message handled.
    pub fn now_ms(&self) -> u64 {
        self.last_ms
    }

    pub fn context_count(&self) -> usize {
        self.by_imsi.len()
    }

    pub fn apn_name(&self, i: u16) -> &str {
        self.apns.get(i as usize).map_or("?", |a| a.name.as_str())
    }

    /// Each APN's pools: (in use, size) for IPv4 addresses and for IPv6 /64s.
    pub fn apn_usage(&self) -> Vec<ApnUsage> {
        self.apns
            .iter()
            .map(|a| {
                let u = |p: Option<&Pool>| p.map_or((0, 0), |p| (p.in_use(), p.size()));
                ApnUsage {
                    v4: u(a.v4.as_ref().map(|x| &x.1)),
                    v6: u(a.v6.as_ref().map(|x| &x.1)),
                }
            })
            .collect()
    }

    /// The traffic counters of a context since it was made: up packets, up bytes, down
    /// packets, down bytes.
    pub fn counters(&self, c: &PdpContext) -> [u64; 4] {
        let now = self.table.read_counters(self.table.slot_of(c.teid));
        std::array::from_fn(|i| now[i].wrapping_sub(c.counters_base[i]))
    }

    /// Handles a message received on the GTP-C port (`user_plane` false) or punted from the
    /// GTP-U port, at `now_ms`; returns what to send.
    pub fn handle(
        &mut self,
        now_ms: u64,
        from: SocketAddr,
        user_plane: bool,
        b: &[u8],
    ) -> Vec<Send> {
        self.stats.received += 1;
        self.last_ms = self.last_ms.max(now_ms);
        self.expire(now_ms);
        let reply = |bytes: Vec<u8>| {
            vec![Send {
                to: from,
                user_plane,
                bytes,
            }]
        };
        if gtp::version_of(b).is_some_and(|v| v != 1) {
            // 7.2.3: answered with the version we speak, to the sequence number if it has one.
            self.stats.version_not_supported += 1;
            // Only a GTPv0/v1 header has it where ours does; GTPv2's is answered with 0.
            let seq = match b[0] >> 5 {
                2 => 0,
                _ => b.get(8..10).map_or(0, |s| u16::from_be_bytes([s[0], s[1]])),
            };
            return reply(MsgBuilder::new(msg::VERSION_NOT_SUPPORTED, 0, seq).finish());
        }
        let req = match read_request(b) {
            Ok(r) => r,
            Err(_) => {
                self.stats.malformed += 1;
                return Vec::new();
            }
        };
        if user_plane {
            return self.user_plane(now_ms, from, &req);
        }
        let Some(seq) = req.h.seq else {
            // GTP-C always numbers its messages (TS 29.060 6: S is 1).
            self.stats.malformed += 1;
            return Vec::new();
        };
        let is_request = matches!(
            req.h.msg_type,
            msg::ECHO_REQUEST
                | msg::CREATE_PDP_REQUEST
                | msg::UPDATE_PDP_REQUEST
                | msg::DELETE_PDP_REQUEST
        );
        let fingerprint = is_request.then(|| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            b.hash(&mut h);
            h.finish()
        });
        if let Some(fp) = fingerprint {
            if let Some((_, was, again)) = self.answered.get(&(from, seq)) {
                if *was == fp {
                    self.stats.duplicates += 1;
                    return reply(again.clone());
                }
            }
        }
        let out = match req.h.msg_type {
            msg::ECHO_REQUEST => {
                self.stats.echo_requests += 1;
                Some(self.echo_response(seq))
            }
            msg::ECHO_RESPONSE => {
                self.echo_answered(from, seq, &req);
                None
            }
            msg::CREATE_PDP_REQUEST => Some(self.create(now_ms, &req, seq)),
            msg::UPDATE_PDP_REQUEST => Some(self.update(&req, seq)),
            msg::DELETE_PDP_REQUEST => Some(self.delete_request(&req, seq)),
            msg::ERROR_INDICATION => {
                self.error_indication(&req);
                None
            }
            msg::SUPPORTED_EXT_HEADERS_NOTIFICATION => None,
            _ => {
                self.stats.unknown_type += 1;
                None
            }
        };
        let Some(bytes) = out else {
            return Vec::new();
        };
        if let Some(fp) = fingerprint.filter(|_| req.h.msg_type != msg::ECHO_REQUEST) {
            self.answered
                .insert((from, seq), (now_ms, fp, bytes.clone()));
            self.answered_order.push_back((now_ms, from, seq));
        }
        reply(bytes)
    }

    fn expire(&mut self, now_ms: u64) {
        while let Some(&(at, from, seq)) = self.answered_order.front() {
            if now_ms.saturating_sub(at) < DUPLICATE_WINDOW_MS {
                break;
            }
            self.answered_order.pop_front();
            if self.answered.get(&(from, seq)).is_some_and(|x| x.0 == at) {
                self.answered.remove(&(from, seq));
            }
        }
    }

    fn echo_response(&self, seq: u16) -> Vec<u8> {
        let mut m = MsgBuilder::new(msg::ECHO_RESPONSE, 0, seq);
        m.tv(ie::RECOVERY, &[self.recovery]);
        m.finish()
    }

    /// GTP-U signalling the data plane punted: Echo, Error Indication, and G-PDUs it had no
    /// context for.
    fn user_plane(&mut self, now_ms: u64, from: SocketAddr, req: &Request<'_>) -> Vec<Send> {
        let send = |bytes| {
            vec![Send {
                to: from,
                user_plane: true,
                bytes,
            }]
        };
        match req.h.msg_type {
            msg::ECHO_REQUEST => {
                self.stats.echo_requests += 1;
                let mut m = MsgBuilder::new(msg::ECHO_RESPONSE, 0, req.h.seq.unwrap_or(0));
                // TS 29.281 7.2.2: the restart counter is 0 on GTP-U.
                m.tv(ie::RECOVERY, &[0]);
                send(m.finish())
            }
            msg::ERROR_INDICATION => {
                self.error_indication(req);
                Vec::new()
            }
            msg::G_PDU => {
                if self.table.uplink(req.h.teid).is_some() {
                    // Installed since the data plane punted it: nothing to say.
                    return Vec::new();
                }
                if !self.error_inds.admit(now_ms) {
                    self.stats.error_indications_limited += 1;
                    return Vec::new();
                }
                self.stats.error_indications_sent += 1;
                let mut m = MsgBuilder::new(msg::ERROR_INDICATION, 0, 0);
                m.tv(ie::TEID_DATA_I, &req.h.teid.to_be_bytes());
                m.tlv(ie::GSN_ADDRESS, &self.local.octets());
                send(m.finish())
            }
            _ => {
                self.stats.unknown_type += 1;
                Vec::new()
            }
        }
    }

    fn count(map: &mut std::collections::BTreeMap<u8, u64>, c: u8) {
        *map.entry(c).or_default() += 1;
    }

    /// A response carrying only a cause (a refusal), to `teid`.
    fn refusal(ty: u8, teid: u32, seq: u16, c: u8) -> Vec<u8> {
        let mut m = MsgBuilder::new(ty, teid, seq);
        m.tv(ie::CAUSE, &[c]);
        m.finish()
    }

    fn create(&mut self, now_ms: u64, req: &Request<'_>, seq: u16) -> Vec<u8> {
        let teid_c = req
            .by_type
            .get(&ie::TEID_C)
            .and_then(|v| u32_of(v))
            .unwrap_or(0);
        let refuse = |s: &mut Self, c: u8| {
            Self::count(&mut s.stats.creates, c);
            Self::refusal(msg::CREATE_PDP_RESPONSE, teid_c, seq, c)
        };
        if !self.creates.admit(now_ms) {
            return refuse(self, cause::NO_RESOURCES);
        }
        // A secondary PDP context (sent to an existing context's TEID, with a TFT and without
        // an IMSI): not supported.
        if !req.by_type.contains_key(&ie::IMSI)
            && (req.by_type.contains_key(&ie::TFT) || req.h.teid != 0)
        {
            return refuse(self, cause::SERVICE_NOT_SUPPORTED);
        }
        let mandatory = [
            ie::IMSI,
            ie::TEID_DATA_I,
            ie::NSAPI,
            ie::END_USER_ADDRESS,
            ie::APN,
            ie::QOS_PROFILE,
        ];
        if mandatory.iter().any(|t| !req.by_type.contains_key(t)) || req.gsn.len() < 2 {
            return refuse(self, cause::MANDATORY_IE_MISSING);
        }
        if teid_c == 0 && !req.by_type.contains_key(&ie::TEID_C) {
            return refuse(self, cause::MANDATORY_IE_MISSING);
        }
        let imsi = gtp::imsi_digits(req.by_type[&ie::IMSI]);
        let teid_u = u32_of(req.by_type[&ie::TEID_DATA_I]);
        let nsapi = req.by_type[&ie::NSAPI].first().map(|n| n & 0x0f);
        let eua = gtp::end_user_address(req.by_type[&ie::END_USER_ADDRESS]);
        let apn_name = gtp::apn_decode(req.by_type[&ie::APN]);
        let (sgsn_c, sgsn_u) = (gtp::gsn_address(req.gsn[0]), gtp::gsn_address(req.gsn[1]));
        let (Some(imsi), Some(teid_u), Some(nsapi), Some(eua), Some(apn_name)) =
            (imsi, teid_u, nsapi, eua, apn_name)
        else {
            return refuse(self, cause::MANDATORY_IE_INCORRECT);
        };
        let (Some(IpAddr::V4(sgsn_c)), Some(IpAddr::V4(sgsn_u))) = (sgsn_c, sgsn_u) else {
            // An IPv6 Gn side is not built.
            return refuse(self, cause::MANDATORY_IE_INCORRECT);
        };
        // NSAPIs 0..4 are reserved (TS 24.008 10.5.6.2), but sgsnemu sends 0 by default and
        // the context is no less usable: accepted, as OsmoGGSN accepts it.
        let Some(apn) = self
            .apns
            .iter()
            .position(|a| a.name.eq_ignore_ascii_case(&apn_name))
        else {
            return refuse(self, cause::MISSING_OR_UNKNOWN_APN);
        };
        if let Some(&r) = req.by_type.get(&ie::RECOVERY).and_then(|v| v.first()) {
            self.peer_recovery(sgsn_c, r);
        }
        // A new Create for an IMSI and NSAPI that has a context replaces it (7.3.1).
        if let Some(&slot) = self.by_imsi.get(&(imsi.clone(), nsapi)) {
            self.remove_slot(slot);
        }
        let (want4, want6, static4, static6) = match eua {
            EndUserAddress::Ipv4(a) => (true, false, a, None),
            EndUserAddress::Ipv6(a) => (false, true, None, a),
            EndUserAddress::Ipv4v6(a, b) => (true, true, a, b),
            EndUserAddress::Other { .. } => {
                return refuse(self, cause::UNKNOWN_PDP_ADDRESS_OR_TYPE);
            }
        };
        let a = &self.apns[apn];
        let dual = want4 && want6;
        // Of an IPv4v6 request, what the APN has; a single type the APN lacks is refused.
        let give4 = want4 && a.v4.is_some();
        let give6 = want6 && a.v6.is_some();
        if !(give4 || give6) || (!dual && (want4 && !give4 || want6 && !give6)) {
            return refuse(self, cause::UNKNOWN_PDP_ADDRESS_OR_TYPE);
        }
        let Some(slot) = self.free_slots.pop_front().or_else(|| {
            (self.fresh_slot < self.table.capacity()).then(|| {
                self.fresh_slot += 1;
                self.fresh_slot - 1
            })
        }) else {
            return refuse(self, cause::NO_RESOURCES);
        };
        // Addresses: all taken, or none kept.
        let mut got4 = None;
        let mut got6 = None;
        let a = &mut self.apns[apn];
        let mut failed = None;
        if give4 {
            let (base, pool) = a.v4.as_mut().expect("checked");
            let off = match static4 {
                Some(s) => {
                    let o = u32::from(s).wrapping_sub(*base);
                    pool.take_this(o).then_some(o)
                }
                None => pool.take(),
            };
            match off {
                Some(o) => got4 = Some(base.wrapping_add(o)),
                None => {
                    failed = Some(if static4.is_some() {
                        cause::UNKNOWN_PDP_ADDRESS_OR_TYPE
                    } else {
                        cause::ALL_DYNAMIC_ADDRESSES_OCCUPIED
                    })
                }
            }
        }
        if give6 && failed.is_none() {
            let (base, pool) = a.v6.as_mut().expect("checked");
            let off = match static6 {
                Some(s) => {
                    let o = ((u128::from(s) >> 64) as u64).wrapping_sub(*base);
                    u32::try_from(o).ok().filter(|&o| pool.take_this(o))
                }
                None => pool.take(),
            };
            match off {
                Some(o) => got6 = Some(base.wrapping_add(u64::from(o))),
                None => {
                    failed = Some(if static6.is_some() {
                        cause::UNKNOWN_PDP_ADDRESS_OR_TYPE
                    } else {
                        cause::ALL_DYNAMIC_ADDRESSES_OCCUPIED
                    })
                }
            }
        }
        if let Some(c) = failed {
            if let (Some(g), Some((base, pool))) = (got4, a.v4.as_mut()) {
                pool.give(g.wrapping_sub(*base));
            }
            self.free_slots.push_front(slot);
            return refuse(self, c);
        }
        let teid = self.table.teid(
            slot,
            self.table.next_generation(self.last_teid[slot as usize]),
        );
        self.last_teid[slot as usize] = teid;
        let charging_id = self.next_charging_id;
        self.next_charging_id = self.next_charging_id.wrapping_add(1).max(1);
        let ctx = PdpContext {
            imsi: imsi.clone(),
            nsapi,
            msisdn: req
                .by_type
                .get(&ie::MSISDN)
                .and_then(|v| v.get(1..))
                .and_then(|v| {
                    let mut b = [0xffu8; 8];
                    let n = v.len().min(8);
                    b[..n].copy_from_slice(&v[..n]);
                    gtp::imsi_digits(&b)
                }),
            apn: apn as u16,
            teid,
            sgsn_teid_c: teid_c,
            sgsn_teid_u: teid_u,
            sgsn_c,
            sgsn_u,
            ue_v4: got4.map(Ipv4Addr::from),
            ue_v6: got6,
            qos: req.by_type[&ie::QOS_PROFILE].to_vec(),
            charging_id,
            created_ms: now_ms,
            counters_base: self.table.read_counters(slot),
        };
        self.table.install(teid, &ctx.plane());
        let eua = match (got4, got6) {
            (Some(v4), Some(v6)) => EndUserAddress::Ipv4v6(
                Some(Ipv4Addr::from(v4)),
                Some(Ipv6Addr::from(u128::from(v6) << 64 | 1)),
            ),
            (Some(v4), None) if dual => EndUserAddress::Ipv4v6(Some(Ipv4Addr::from(v4)), None),
            (None, Some(v6)) if dual => {
                EndUserAddress::Ipv4v6(None, Some(Ipv6Addr::from(u128::from(v6) << 64 | 1)))
            }
            (Some(v4), None) => EndUserAddress::Ipv4(Some(Ipv4Addr::from(v4))),
            (None, Some(v6)) => {
                EndUserAddress::Ipv6(Some(Ipv6Addr::from(u128::from(v6) << 64 | 1)))
            }
            (None, None) => unreachable!("one address at least was given"),
        };
        let pco = req.by_type.get(&ie::PCO).map(|_| self.pco(apn));
        let mut m = MsgBuilder::new(msg::CREATE_PDP_RESPONSE, teid_c, seq);
        m.tv(ie::CAUSE, &[cause::REQUEST_ACCEPTED])
            .tv(ie::REORDERING_REQUIRED, &[0xfe])
            .tv(ie::RECOVERY, &[self.recovery])
            .tv(ie::TEID_DATA_I, &teid.to_be_bytes())
            .tv(ie::TEID_C, &teid.to_be_bytes())
            .tv(ie::CHARGING_ID, &charging_id.to_be_bytes())
            .tlv(ie::END_USER_ADDRESS, &eua.encode());
        if let Some(p) = &pco {
            m.tlv(ie::PCO, p);
        }
        m.tlv(ie::GSN_ADDRESS, &self.local.octets())
            .tlv(ie::GSN_ADDRESS, &self.local.octets())
            .tlv(ie::QOS_PROFILE, &ctx.qos);
        self.by_imsi.insert((imsi, nsapi), slot);
        let p = self.peers.entry(ctx.sgsn_c).or_default();
        if p.contexts == 0 {
            // The first Echo Request one interval after the path's first context.
            p.next_echo_ms = now_ms + self.echo_interval_ms;
        }
        p.contexts += 1;
        self.contexts[slot as usize] = Some(ctx);
        Self::count(&mut self.stats.creates, cause::REQUEST_ACCEPTED);
        m.finish()
    }

    /// The PCO of a Create's response (TS 24.008 10.5.6.3): the APN's DNS servers, IPv4 as an
    /// IPCP Configure-Nak with primary and secondary DNS (RFC 1877), IPv6 as DNS server address
    /// containers (0x0003).
    fn pco(&self, apn: usize) -> Vec<u8> {
        let a = &self.apns[apn];
        let mut p = vec![0x80];
        if !a.dns4.is_empty() {
            let mut ipcp = vec![3u8, 0, 0, 0];
            for (i, d) in a.dns4.iter().take(2).enumerate() {
                ipcp.extend_from_slice(&[if i == 0 { 129 } else { 131 }, 6]);
                ipcp.extend_from_slice(&d.octets());
            }
            let len = ipcp.len() as u16;
            ipcp[2..4].copy_from_slice(&len.to_be_bytes());
            p.extend_from_slice(&[0x80, 0x21, ipcp.len() as u8]);
            p.extend_from_slice(&ipcp);
        }
        for d in &a.dns6 {
            p.extend_from_slice(&[0x00, 0x03, 16]);
            p.extend_from_slice(&d.octets());
        }
        p
    }

    fn update(&mut self, req: &Request<'_>, seq: u16) -> Vec<u8> {
        let slot = self.slot_of(req.h.teid);
        let Some(slot) = slot else {
            Self::count(&mut self.stats.updates, cause::NON_EXISTENT);
            return Self::refusal(msg::UPDATE_PDP_RESPONSE, 0, seq, cause::NON_EXISTENT);
        };
        let ctx = self.contexts[slot as usize]
            .as_ref()
            .expect("slot_of checked");
        let back = ctx.sgsn_teid_c;
        let teid_u = req.by_type.get(&ie::TEID_DATA_I).map(|v| u32_of(v));
        let teid_c = req.by_type.get(&ie::TEID_C).map(|v| u32_of(v));
        let gsn: Vec<Option<IpAddr>> = req.gsn.iter().map(|v| gtp::gsn_address(v)).collect();
        if req.gsn.len() < 2
            || !req.by_type.contains_key(&ie::TEID_DATA_I)
            || !req.by_type.contains_key(&ie::QOS_PROFILE)
        {
            Self::count(&mut self.stats.updates, cause::MANDATORY_IE_MISSING);
            return Self::refusal(
                msg::UPDATE_PDP_RESPONSE,
                back,
                seq,
                cause::MANDATORY_IE_MISSING,
            );
        }
        let (Some(Some(teid_u)), Some(IpAddr::V4(c)), Some(IpAddr::V4(u))) =
            (teid_u, gsn[0], gsn[1])
        else {
            Self::count(&mut self.stats.updates, cause::MANDATORY_IE_INCORRECT);
            return Self::refusal(
                msg::UPDATE_PDP_RESPONSE,
                back,
                seq,
                cause::MANDATORY_IE_INCORRECT,
            );
        };
        let ctx = self.contexts[slot as usize]
            .as_mut()
            .expect("slot_of checked");
        if let Some(Some(tc)) = teid_c {
            ctx.sgsn_teid_c = tc;
        }
        ctx.sgsn_teid_u = teid_u;
        if ctx.sgsn_c != c {
            if let Some(p) = self.peers.get_mut(&ctx.sgsn_c) {
                p.contexts = p.contexts.saturating_sub(1);
            }
            let p = self.peers.entry(c).or_default();
            if p.contexts == 0 {
                p.next_echo_ms = self.last_ms + self.echo_interval_ms;
            }
            p.contexts += 1;
        }
        let ctx = self.contexts[slot as usize]
            .as_mut()
            .expect("slot_of checked");
        ctx.sgsn_c = c;
        ctx.sgsn_u = u;
        ctx.qos = req.by_type[&ie::QOS_PROFILE].to_vec();
        self.table.update_peer(ctx.teid, teid_u, u32::from(u));
        let mut m = MsgBuilder::new(msg::UPDATE_PDP_RESPONSE, ctx.sgsn_teid_c, seq);
        m.tv(ie::CAUSE, &[cause::REQUEST_ACCEPTED])
            .tv(ie::RECOVERY, &[self.recovery])
            .tv(ie::TEID_DATA_I, &ctx.teid.to_be_bytes())
            .tv(ie::TEID_C, &ctx.teid.to_be_bytes())
            .tv(ie::CHARGING_ID, &ctx.charging_id.to_be_bytes())
            .tlv(ie::GSN_ADDRESS, &self.local.octets())
            .tlv(ie::GSN_ADDRESS, &self.local.octets())
            .tlv(ie::QOS_PROFILE, &ctx.qos);
        Self::count(&mut self.stats.updates, cause::REQUEST_ACCEPTED);
        m.finish()
    }

    fn delete_request(&mut self, req: &Request<'_>, seq: u16) -> Vec<u8> {
        let Some(slot) = self.slot_of(req.h.teid) else {
            Self::count(&mut self.stats.deletes, cause::NON_EXISTENT);
            return Self::refusal(msg::DELETE_PDP_RESPONSE, 0, seq, cause::NON_EXISTENT);
        };
        let ctx = self.contexts[slot as usize]
            .as_ref()
            .expect("slot_of checked");
        let back = ctx.sgsn_teid_c;
        let teardown = req
            .by_type
            .get(&ie::TEARDOWN_IND)
            .and_then(|v| v.first())
            .is_some_and(|t| t & 1 == 1);
        if teardown {
            // Every context of the PDP address: this IMSI's (secondaries are not built), one
            // lookup per NSAPI (4 bits), not a walk of every context.
            let mut key = (ctx.imsi.clone(), 0u8);
            let mut all = Vec::new();
            for nsapi in 0..16 {
                key.1 = nsapi;
                if let Some(&s) = self.by_imsi.get(&key) {
                    all.push(s);
                }
            }
            for s in all {
                self.remove_slot(s);
            }
        } else {
            self.remove_slot(slot);
        }
        Self::count(&mut self.stats.deletes, cause::REQUEST_ACCEPTED);
        Self::refusal(msg::DELETE_PDP_RESPONSE, back, seq, cause::REQUEST_ACCEPTED)
    }

    fn error_indication(&mut self, req: &Request<'_>) {
        self.stats.error_indications_received += 1;
        // The SGSN names the TEID we sent to: its own; find the context that sends to it.
        let Some(teid) = req.by_type.get(&ie::TEID_DATA_I).and_then(|v| u32_of(v)) else {
            return;
        };
        let peer = req.gsn.first().and_then(|v| gtp::gsn_address(v));
        let found = self.contexts.iter().position(|c| {
            c.as_ref().is_some_and(|c| {
                c.sgsn_teid_u == teid && peer.is_none_or(|p| p == IpAddr::V4(c.sgsn_u))
            })
        });
        if let Some(s) = found {
            self.remove_slot(s as u32);
        }
    }

    /// An SGSN's restart counter, from a Recovery IE: a change means it lost its contexts.
    fn peer_recovery(&mut self, sgsn: Ipv4Addr, r: u8) {
        let p = self.peers.entry(sgsn).or_default();
        match p.restart.replace(r) {
            Some(old) if old != r => {
                self.stats.peer_restarts += 1;
                let n = self.remove_peer_contexts(sgsn);
                self.stats.contexts_torn_down_by_restart += n as u64;
                self.events.push(GtpEvent::PeerRestart {
                    sgsn,
                    old,
                    new: r,
                    contexts: n,
                });
            }
            _ => {}
        }
    }

    /// Deletes every context whose SGSN (signalling) is `sgsn`; returns how many.
    fn remove_peer_contexts(&mut self, sgsn: Ipv4Addr) -> usize {
        let gone: Vec<u32> = self
            .contexts
            .iter()
            .enumerate()
            .filter(|(_, c)| c.as_ref().is_some_and(|c| c.sgsn_c == sgsn))
            .map(|(i, _)| i as u32)
            .collect();
        for &s in &gone {
            self.remove_slot(s);
        }
        gone.len()
    }

    fn echo_answered(&mut self, from: SocketAddr, seq: u16, req: &Request<'_>) {
        let IpAddr::V4(sgsn) = from.ip() else {
            return;
        };
        if let Some(p) = self.peers.get_mut(&sgsn) {
            if p.echo.is_some_and(|(s, _, _)| s == seq) {
                p.echo = None;
            }
        }
        if let Some(&r) = req.by_type.get(&ie::RECOVERY).and_then(|v| v.first()) {
            self.peer_recovery(sgsn, r);
        }
    }

    /// Path management, called every few hundred milliseconds: an Echo Request to each SGSN
    /// with contexts every `echo-interval`, sent again after [`T3_MS`] without an answer; after
    /// [`N3`] unanswered the path has failed and the SGSN's contexts are deleted.
    pub fn tick(&mut self, now_ms: u64) -> Vec<Send> {
        self.last_ms = self.last_ms.max(now_ms);
        if self.echo_interval_ms == 0 {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut failed = Vec::new();
        for (&sgsn, p) in self.peers.iter_mut() {
            if p.contexts == 0 {
                p.echo = None;
                continue;
            }
            let send = match p.echo {
                Some((_, sent, tries)) if now_ms.saturating_sub(sent) >= T3_MS => {
                    if tries >= N3 {
                        p.echo = None;
                        failed.push(sgsn);
                        None
                    } else {
                        let seq = p.echo.expect("some").0;
                        p.echo = Some((seq, now_ms, tries + 1));
                        Some(seq)
                    }
                }
                Some(_) => None,
                None if now_ms >= p.next_echo_ms => {
                    self.echo_seq = self.echo_seq.wrapping_add(1);
                    p.echo = Some((self.echo_seq, now_ms, 1));
                    p.next_echo_ms = now_ms + self.echo_interval_ms;
                    Some(self.echo_seq)
                }
                None => None,
            };
            if let Some(seq) = send {
                self.stats.echo_requests_sent += 1;
                out.push(Send {
                    to: SocketAddr::new(IpAddr::V4(sgsn), gtp::GTPC_PORT),
                    user_plane: false,
                    bytes: MsgBuilder::new(msg::ECHO_REQUEST, 0, seq).finish(),
                });
            }
        }
        for sgsn in failed {
            let n = self.remove_peer_contexts(sgsn);
            self.stats.path_failures += 1;
            self.stats.contexts_torn_down_by_path_failure += n as u64;
            self.events
                .push(GtpEvent::PathFailure { sgsn, contexts: n });
        }
        out
    }

    /// The slot of our TEID `teid`, if a context has it.
    fn slot_of(&self, teid: u32) -> Option<u32> {
        let s = self.table.slot_of(teid);
        self.contexts
            .get(s as usize)?
            .as_ref()
            .filter(|c| c.teid == teid)
            .map(|_| s)
    }

    /// Deletes the context in `slot`: from the data plane first, then its addresses go back.
    fn remove_slot(&mut self, slot: u32) {
        let Some(c) = self.contexts[slot as usize].take() else {
            return;
        };
        self.table.remove(c.teid, &c.plane());
        self.by_imsi.remove(&(c.imsi.clone(), c.nsapi));
        if let Some(p) = self.peers.get_mut(&c.sgsn_c) {
            p.contexts = p.contexts.saturating_sub(1);
        }
        let a = &mut self.apns[c.apn as usize];
        if let (Some(v4), Some((base, pool))) = (c.ue_v4, a.v4.as_mut()) {
            pool.give(u32::from(v4).wrapping_sub(*base));
        }
        if let (Some(v6), Some((base, pool))) = (c.ue_v6, a.v6.as_mut()) {
            pool.give(v6.wrapping_sub(*base) as u32);
        }
        self.free_slots.push_back(slot);
    }

    /// Deletes one context by our TEID (`clear gtp context`); whether there was one.
    pub fn clear(&mut self, teid: u32) -> bool {
        match self.slot_of(teid) {
            Some(s) => {
                self.remove_slot(s);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests;
