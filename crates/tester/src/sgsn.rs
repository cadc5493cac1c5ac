//! The SGSN emulator: the tester's GTP-C client (3GPP TS 29.060), what Landslide was in the GGSN
//! report. It creates PDP contexts on a GGSN at a paced rate, one subscriber each, and deletes
//! them; it answers the GGSN's Echo Requests meanwhile, as an SGSN must.
//!
//! - [`create_request`] and [`delete_request`] build the messages, [`answer`] reads a response:
//!   no I/O, so they are tested against Linerate's own GGSN engine.
//! - [`exchange`] sends requests over a UDP socket at a given rate, retransmits an unanswered
//!   one after T3 up to N3 times (TS 29.060 7.6), and records each one's outcome and the time to
//!   its answer. A request is matched to its answer by sequence number; fewer than 32,768 are
//!   ever outstanding, so the 16-bit numbers never collide.
//! - [`search_rate`]: the highest create rate at which 99.999% of the requests are accepted.
//!
//! Each subscriber `i` gets IMSI `imsi_base + i`, our TEIDs `i + 1` (data and control), and the
//! address the GGSN gives it. Our user plane address (the SGSN address for user traffic) is the
//! address the tester's port emulates, so the GGSN's downlink reaches the analyzer.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use packet::gtp::{self, cause, ie, msg, EndUserAddress, MsgBuilder};
use serde::Serialize;

/// Who the emulated SGSN is and which GGSN it talks to.
#[derive(Clone, Debug)]
pub struct SgsnOpts {
    /// The GGSN's GTP-C address (port 2123).
    pub ggsn: Ipv4Addr,
    /// Our signalling address: a local address the socket binds (port 2123).
    pub control: Ipv4Addr,
    /// Our user plane address: where the GGSN sends the downlink.
    pub user: Ipv4Addr,
    pub apn: String,
    /// The first subscriber's IMSI (15 digits with the MCC and MNC).
    pub imsi_base: u64,
    /// Our restart counter (Recovery IE).
    pub restart: u8,
    /// Time to an answer before a request is sent again (T3-RESPONSE).
    pub t3: Duration,
    /// Retransmissions of a request before it counts as unanswered (N3-REQUESTS).
    pub n3: u32,
}

impl SgsnOpts {
    pub fn new(ggsn: Ipv4Addr, control: Ipv4Addr, user: Ipv4Addr, apn: &str) -> Self {
        SgsnOpts {
            ggsn,
            control,
            user,
            apn: apn.into(),
            imsi_base: 262_010_000_000_000,
            restart: 1,
            t3: Duration::from_secs(3),
            n3: 2,
        }
    }
}

/// A context the GGSN accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PdpContext {
    /// Subscriber index (IMSI = base + index).
    pub index: u32,
    /// The address the GGSN gave the subscriber.
    pub ue: Ipv4Addr,
    /// The GGSN's TEID for our uplink G-PDUs.
    pub teid_data: u32,
    /// The GGSN's TEID for our signalling on this context.
    pub teid_control: u32,
}

/// Our TEID (data and control) for subscriber `i`: never 0, which means "no context".
pub fn our_teid(i: u32) -> u32 {
    i.wrapping_add(1).max(1)
}

/// NSAPI of every primary context we create (TS 24.008: 5..15 are the usable ones).
const NSAPI: u8 = 5;

/// A Create PDP Context Request for subscriber `i` (TS 29.060 7.3.1): IPv4 dynamic address,
/// transparent (selection mode "MS or network provided APN, subscription verified"), a
/// background-class QoS profile, a PCO asking for DNS servers.
pub fn create_request(o: &SgsnOpts, i: u32, seq: u16) -> Vec<u8> {
    let imsi = format!("{:015}", o.imsi_base + i as u64);
    let msisdn = format!("49{:010}", i);
    let mut m = MsgBuilder::new(msg::CREATE_PDP_REQUEST, 0, seq);
    m.tv(ie::IMSI, &gtp::imsi_encode(&imsi).unwrap_or([0xff; 8]))
        .tv(ie::RECOVERY, &[o.restart])
        .tv(ie::SELECTION_MODE, &[0xfc])
        .tv(ie::TEID_DATA_I, &our_teid(i).to_be_bytes())
        .tv(ie::TEID_C, &our_teid(i).to_be_bytes())
        .tv(ie::NSAPI, &[NSAPI])
        .tlv(ie::END_USER_ADDRESS, &EndUserAddress::Ipv4(None).encode())
        .tlv(ie::APN, &gtp::apn_encode(&o.apn))
        // Configuration protocol PPP; IPCP Configure-Request for the primary and secondary DNS.
        .tlv(
            ie::PCO,
            &[
                0x80, 0x80, 0x21, 0x10, 0x01, 0x00, 0x00, 0x10, 0x81, 0x06, 0, 0, 0, 0, 0x83, 0x06,
                0, 0, 0, 0,
            ],
        )
        .tlv(ie::GSN_ADDRESS, &o.control.octets())
        .tlv(ie::GSN_ADDRESS, &o.user.octets())
        .tlv(ie::MSISDN, &msisdn_encode(&msisdn))
        .tlv(ie::QOS_PROFILE, &[0x01, 0x0b, 0x92, 0x1f]);
    m.finish()
}

/// A Delete PDP Context Request for `c` (TS 29.060 7.3.5): teardown, so the whole PDP address
/// goes.
pub fn delete_request(c: &PdpContext, seq: u16) -> Vec<u8> {
    let mut m = MsgBuilder::new(msg::DELETE_PDP_REQUEST, c.teid_control, seq);
    m.tv(ie::TEARDOWN_IND, &[1]).tv(ie::NSAPI, &[NSAPI]);
    m.finish()
}

/// An E.164 number as an MSISDN (TS 29.002: international, ISDN numbering plan, then BCD).
fn msisdn_encode(digits: &str) -> Vec<u8> {
    let mut v = vec![0x91];
    let d: Vec<u8> = digits.bytes().map(|b| b - b'0').collect();
    for pair in d.chunks(2) {
        v.push(pair[0] | pair.get(1).copied().unwrap_or(0xf) << 4);
    }
    v
}

/// What a response said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Create accepted: the GGSN's TEIDs and the subscriber's address.
    Created {
        teid_data: u32,
        teid_control: u32,
        ue: Ipv4Addr,
    },
    /// A Delete accepted (or any other accepted cause).
    Accepted,
    Refused(u8),
    /// An accepted Create without the IEs it must carry: counted as a failure.
    Incomplete,
}

/// Reads a Create or Delete PDP Context Response: its sequence number and what it said. None
/// for anything else (Echo, Error Indication, garbage).
pub fn answer(b: &[u8]) -> Option<(u16, Answer)> {
    answer_typed(b).map(|(s, _, a)| (s, a))
}

/// [`answer`] with the response's message type.
fn answer_typed(b: &[u8]) -> Option<(u16, u8, Answer)> {
    let h = gtp::parse_header(b).ok()?;
    if h.msg_type != msg::CREATE_PDP_RESPONSE && h.msg_type != msg::DELETE_PDP_RESPONSE {
        return None;
    }
    let seq = h.seq?;
    let (mut c, mut td, mut tc, mut ue) = (None, None, None, None);
    for x in gtp::ies(h.payload(b)) {
        let Ok(x) = x else {
            return Some((seq, h.msg_type, Answer::Incomplete));
        };
        match x.ty {
            ie::CAUSE => c = x.value.first().copied(),
            ie::TEID_DATA_I => td = x.value.try_into().ok().map(u32::from_be_bytes),
            ie::TEID_C => tc = x.value.try_into().ok().map(u32::from_be_bytes),
            ie::END_USER_ADDRESS => {
                if let Some(EndUserAddress::Ipv4(Some(a)) | EndUserAddress::Ipv4v6(Some(a), _)) =
                    gtp::end_user_address(x.value)
                {
                    ue = Some(a);
                }
            }
            _ => {}
        }
    }
    let c = c?;
    if c != cause::REQUEST_ACCEPTED {
        return Some((seq, h.msg_type, Answer::Refused(c)));
    }
    if h.msg_type == msg::DELETE_PDP_RESPONSE {
        return Some((seq, h.msg_type, Answer::Accepted));
    }
    Some(match (td, tc, ue) {
        (Some(teid_data), Some(teid_control), Some(ue)) => (
            seq,
            h.msg_type,
            Answer::Created {
                teid_data,
                teid_control,
                ue,
            },
        ),
        _ => (seq, h.msg_type, Answer::Incomplete),
    })
}

/// The Echo Response to an Echo Request in `b` (our Recovery IE), None for anything else.
pub fn echo_response(b: &[u8], restart: u8) -> Option<Vec<u8>> {
    let h = gtp::parse_header(b).ok()?;
    if h.msg_type != msg::ECHO_REQUEST {
        return None;
    }
    let mut m = MsgBuilder::new(msg::ECHO_RESPONSE, 0, h.seq.unwrap_or(0));
    m.tv(ie::RECOVERY, &[restart]);
    Some(m.finish())
}

/// Requests answered, refused and lost in one paced exchange, and how long answers took.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ExchangeRun {
    pub what: String,
    pub requests: u64,
    /// The rate asked for, requests/s.
    pub rate: f64,
    pub accepted: u64,
    /// Accepted at their first sending (no retransmission needed): the rate was held.
    pub accepted_first_try: u64,
    /// Refusals by cause value.
    pub refused: BTreeMap<u8, u64>,
    /// Accepted without the IEs an acceptance carries.
    pub incomplete: u64,
    /// No answer after N3 retransmissions.
    pub unanswered: u64,
    pub retransmissions: u64,
    /// First request sent to last answer (or give-up).
    pub seconds: f64,
    /// Accepted requests per second over `seconds`.
    pub accepted_per_s: f64,
    /// Time from a request's first sending to its answer, microseconds (answered ones).
    pub latency_avg_us: f64,
    pub latency_p50_us: f64,
    pub latency_p99_us: f64,
    pub latency_max_us: f64,
}

impl ExchangeRun {
    /// Accepted requests as a fraction of those sent.
    pub fn success(&self) -> f64 {
        if self.requests == 0 {
            return 0.0;
        }
        self.accepted as f64 / self.requests as f64
    }

    /// Requests accepted at their first sending, as a fraction of those sent: what a rate
    /// search judges, since a request that needed a retransmission was not handled at the
    /// rate asked (it waited T3 for nothing).
    pub fn success_first_try(&self) -> f64 {
        if self.requests == 0 {
            return 0.0;
        }
        self.accepted_first_try as f64 / self.requests as f64
    }
}

/// The success ratio the seed's calls and packets were held to.
pub const SUCCESS_TARGET: f64 = 0.99999;

/// Most requests outstanding at once: half the sequence space, so an answer's number names one
/// request.
const WINDOW: usize = 32_768;

struct Pending {
    index: u32,
    first: Instant,
    tries: u32,
    bytes: Vec<u8>,
}

/// Sends `n` requests (`build(i, seq)` makes the i-th) to `to` at `rate` per second, paced from
/// the start, and calls `done(i, answer)` for each answered one (a response of type `expect`).
/// Answers to unknown sequence numbers and other messages are ignored, an Echo Request
/// answered. Sequence numbers continue from `seq` and it is left after the last one used: a
/// GGSN takes a request whose number it answered in the last few seconds for a retransmission
/// and answers it from its cache (TS 29.060 7.6), so numbers must not restart per exchange.
#[allow(clippy::too_many_arguments)]
pub fn exchange(
    sock: &UdpSocket,
    to: SocketAddr,
    what: &str,
    n: u32,
    rate: f64,
    o: &SgsnOpts,
    expect: u8,
    seq_next: &mut u16,
    build: &mut dyn FnMut(u32, u16) -> Vec<u8>,
    done: &mut dyn FnMut(u32, Answer),
) -> std::io::Result<ExchangeRun> {
    sock.set_nonblocking(true)?;
    let mut run = ExchangeRun {
        what: what.into(),
        requests: n as u64,
        rate,
        ..Default::default()
    };
    let mut pending: Vec<Option<Pending>> = (0..65_536).map(|_| None).collect();
    let mut timers: VecDeque<(Instant, u16, u32)> = VecDeque::new();
    let mut outstanding = 0usize;
    let mut lat: Vec<u32> = Vec::with_capacity(n as usize);
    let mut buf = [0u8; 4096];
    let start = Instant::now();
    let mut last = start;
    let mut next = 0u32;
    let mut seq = *seq_next;
    let mut finished = 0u32;
    while finished < n {
        let now = Instant::now();
        // Requests due by now, as long as the window has room.
        let due = ((now - start).as_secs_f64() * rate) as u64 + 1;
        // A batch at a time, then the answers: a burst of sends must not leave them waiting.
        let batch_end = due.min(n as u64).min(next as u64 + 256);
        while (next as u64) < batch_end && outstanding < WINDOW {
            while pending[seq as usize].is_some() {
                seq = seq.wrapping_add(1);
            }
            let bytes = build(next, seq);
            send(sock, &bytes, to)?;
            timers.push_back((now + o.t3, seq, next));
            pending[seq as usize] = Some(Pending {
                index: next,
                first: now,
                tries: 0,
                bytes,
            });
            outstanding += 1;
            next += 1;
            seq = seq.wrapping_add(1);
        }
        // Answers.
        let mut got = false;
        loop {
            let (len, from) = match sock.recv_from(&mut buf) {
                Ok(x) => x,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            };
            got = true;
            let b = &buf[..len];
            if let Some(r) = echo_response(b, o.restart) {
                send(sock, &r, from)?;
                continue;
            }
            let Some((s, ty, a)) = answer_typed(b) else {
                continue;
            };
            if ty != expect || pending[s as usize].is_none() {
                continue;
            }
            let Some(p) = pending[s as usize].take() else {
                continue;
            };
            let t = Instant::now();
            lat.push((t - p.first).as_micros().min(u32::MAX as u128) as u32);
            match a {
                Answer::Created { .. } | Answer::Accepted => {
                    run.accepted += 1;
                    if p.tries == 0 {
                        run.accepted_first_try += 1;
                    }
                }
                Answer::Refused(c) => *run.refused.entry(c).or_default() += 1,
                Answer::Incomplete => run.incomplete += 1,
            }
            done(p.index, a);
            outstanding -= 1;
            finished += 1;
            last = t;
        }
        // Retransmissions and give-ups, oldest first.
        let now = Instant::now();
        while let Some(&(at, s, idx)) = timers.front() {
            if at > now {
                break;
            }
            timers.pop_front();
            let p = match &mut pending[s as usize] {
                Some(p) if p.index == idx => p,
                _ => continue,
            };
            if p.tries < o.n3 {
                p.tries += 1;
                run.retransmissions += 1;
                send(sock, &p.bytes, to)?;
                timers.push_back((now + o.t3, s, idx));
            } else {
                pending[s as usize] = None;
                run.unanswered += 1;
                outstanding -= 1;
                finished += 1;
                last = now;
            }
        }
        if !got {
            // Nothing came: wait for the next request's time, briefly.
            let until_next = if next < n {
                let t = start + Duration::from_secs_f64(next as f64 / rate);
                t.saturating_duration_since(Instant::now())
            } else {
                Duration::from_micros(200)
            };
            if !until_next.is_zero() {
                std::thread::sleep(until_next.min(Duration::from_micros(200)));
            }
        }
    }
    *seq_next = seq;
    run.seconds = (last - start).as_secs_f64();
    run.accepted_per_s = if run.seconds > 0.0 {
        run.accepted as f64 / run.seconds
    } else {
        0.0
    };
    if !lat.is_empty() {
        lat.sort_unstable();
        let q = |f: f64| lat[((lat.len() - 1) as f64 * f) as usize] as f64;
        run.latency_avg_us = lat.iter().map(|&x| x as f64).sum::<f64>() / lat.len() as f64;
        run.latency_p50_us = q(0.5);
        run.latency_p99_us = q(0.99);
        run.latency_max_us = *lat.last().unwrap() as f64;
    }
    Ok(run)
}

fn send(sock: &UdpSocket, b: &[u8], to: SocketAddr) -> std::io::Result<()> {
    loop {
        match sock.send_to(b, to) {
            Ok(_) => return Ok(()),
            // A full socket buffer: the kernel will drain it.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_micros(20))
            }
            Err(e) => return Err(e),
        }
    }
}

/// The emulated SGSN: a GTP-C socket and the contexts it holds.
pub struct Sgsn {
    pub o: SgsnOpts,
    sock: Arc<UdpSocket>,
    pub contexts: Vec<PdpContext>,
    /// Subscribers used so far (the next create starts after them).
    next_index: u32,
    /// The next request's sequence number: one run over every exchange on this path.
    seq: u16,
}

impl Sgsn {
    /// Binds our signalling address, port 2123.
    pub fn bind(o: SgsnOpts) -> Result<Sgsn, String> {
        let local = SocketAddr::new(IpAddr::V4(o.control), gtp::GTPC_PORT);
        let sock = UdpSocket::bind(local).map_err(|e| {
            format!("SGSN: cannot bind {local} ({e}): the address must be one of this host's")
        })?;
        // Answers come back as fast as a GGSN makes them, while this thread may be sending:
        // room for a burst of them (about 1 KB of kernel memory each), or the kernel drops
        // them and the exchange counts requests the GGSN did answer as lost.
        dataplane::port::sockopt::set_recv_buffer(&sock, 32 << 20);
        dataplane::port::sockopt::set_send_buffer(&sock, 8 << 20);
        Ok(Sgsn {
            o,
            sock: Arc::new(sock),
            contexts: Vec::new(),
            next_index: 0,
            seq: 0,
        })
    }

    fn ggsn(&self) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(self.o.ggsn), gtp::GTPC_PORT)
    }

    /// Creates `n` contexts at `rate` per second; the accepted ones join `self.contexts`.
    pub fn create(&mut self, n: u32, rate: f64) -> Result<ExchangeRun, String> {
        let first = self.next_index;
        self.next_index += n;
        let o = self.o.clone();
        let mut made = Vec::with_capacity(n as usize);
        let run = exchange(
            &self.sock,
            self.ggsn(),
            "create",
            n,
            rate,
            &o,
            msg::CREATE_PDP_RESPONSE,
            &mut self.seq,
            &mut |i, seq| create_request(&o, first + i, seq),
            &mut |i, a| {
                if let Answer::Created {
                    teid_data,
                    teid_control,
                    ue,
                } = a
                {
                    made.push(PdpContext {
                        index: first + i,
                        ue,
                        teid_data,
                        teid_control,
                    })
                }
            },
        )
        .map_err(|e| format!("SGSN: {e}"))?;
        made.sort_by_key(|c| c.index);
        self.contexts.extend(made);
        Ok(run)
    }

    /// Deletes every context held, at `rate` per second.
    pub fn delete_all(&mut self, rate: f64) -> Result<ExchangeRun, String> {
        let ctxs = std::mem::take(&mut self.contexts);
        let o = self.o.clone();
        exchange(
            &self.sock,
            self.ggsn(),
            "delete",
            ctxs.len() as u32,
            rate,
            &o,
            msg::DELETE_PDP_RESPONSE,
            &mut self.seq,
            &mut |i, seq| delete_request(&ctxs[i as usize], seq),
            &mut |_, _| {},
        )
        .map_err(|e| format!("SGSN: {e}"))
    }

    /// Answers the GGSN's Echo Requests until the returned guard is dropped (while traffic
    /// runs: a GGSN that pings its peers must not see this one die).
    pub fn keepalive(&self) -> Keepalive {
        let stop = Arc::new(AtomicBool::new(false));
        let echoes = Arc::new(AtomicU64::new(0));
        let sock = self.sock.clone();
        let restart = self.o.restart;
        let (s, e) = (stop.clone(), echoes.clone());
        let thread = std::thread::Builder::new()
            .name("sgsn-echo".into())
            .spawn(move || {
                let _ = sock.set_read_timeout(Some(Duration::from_millis(50)));
                let _ = sock.set_nonblocking(false);
                let mut buf = [0u8; 2048];
                while !s.load(Ordering::Relaxed) {
                    if let Ok((len, from)) = sock.recv_from(&mut buf) {
                        if let Some(r) = echo_response(&buf[..len], restart) {
                            let _ = sock.send_to(&r, from);
                            e.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
            .expect("spawn a thread");
        Keepalive {
            stop,
            echoes,
            thread: Some(thread),
        }
    }
}

/// Answers Echo Requests in the background; stops when dropped.
pub struct Keepalive {
    stop: Arc<AtomicBool>,
    pub echoes: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Keepalive {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One step of the create rate search.
#[derive(Clone, Debug, Serialize)]
pub struct SearchStep {
    pub rate: f64,
    pub run: ExchangeRun,
    pub pass: bool,
}

/// The highest create rate (within `resolution`, relative) at which at least 99.999% of `n`
/// requests are accepted at their first sending (none lost and retransmitted) and the
/// acceptances keep up (at least 90% of the rate asked, first request to last answer): doubling from `start` until a step fails (or `max` passes), then
/// halving the interval. Each step's contexts are deleted before the next.
pub fn search_rate(
    s: &mut Sgsn,
    n: u32,
    start: f64,
    max: f64,
    resolution: f64,
    mut progress: impl FnMut(&SearchStep),
) -> Result<(Option<f64>, Vec<SearchStep>), String> {
    let mut steps = Vec::new();
    let mut step = |s: &mut Sgsn, rate: f64| -> Result<bool, String> {
        let run = s.create(n, rate)?;
        // Accepted, at the first sending, and at the rate: a GGSN that queues a burst and
        // answers it at its own pace has not created at the rate asked.
        let pass = run.success_first_try() >= SUCCESS_TARGET && run.accepted_per_s >= 0.9 * rate;
        s.delete_all(rate.max(1000.0))?;
        let st = SearchStep { rate, run, pass };
        progress(&st);
        steps.push(st);
        Ok(pass)
    };
    let (mut lo, mut hi) = (0.0f64, f64::INFINITY);
    let mut r = start;
    while r <= max {
        if step(s, r)? {
            lo = r;
            r *= 2.0;
        } else {
            hi = r;
            break;
        }
    }
    if hi.is_finite() {
        while lo > 0.0 && (hi - lo) / lo > resolution {
            let mid = (lo + hi) / 2.0;
            if step(s, mid)? {
                lo = mid
            } else {
                hi = mid
            }
        }
    }
    Ok(((lo > 0.0).then_some(lo), steps))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> SgsnOpts {
        SgsnOpts::new(
            Ipv4Addr::new(192, 168, 0, 1),
            Ipv4Addr::new(192, 168, 0, 3),
            Ipv4Addr::new(192, 168, 0, 2),
            "internet",
        )
    }

    #[test]
    fn requests_parse_and_carry_the_subscriber() {
        let o = opts();
        let b = create_request(&o, 41, 7);
        let h = gtp::parse_header(&b).unwrap();
        assert_eq!(
            (h.msg_type, h.seq, h.teid),
            (msg::CREATE_PDP_REQUEST, Some(7), 0)
        );
        let mut seen = BTreeMap::new();
        for x in gtp::ies(h.payload(&b)) {
            let x = x.unwrap();
            seen.entry(x.ty)
                .or_insert_with(Vec::new)
                .push(x.value.to_vec());
        }
        assert_eq!(
            seen[&ie::IMSI][0],
            gtp::imsi_encode("262010000000041").unwrap().to_vec()
        );
        assert_eq!(seen[&ie::TEID_DATA_I][0], 42u32.to_be_bytes());
        assert_eq!(
            seen[&ie::GSN_ADDRESS],
            vec![vec![192, 168, 0, 3], vec![192, 168, 0, 2]]
        );
        assert_eq!(seen[&ie::MSISDN][0], vec![0x91, 0x94, 0, 0, 0, 0, 0x14]);
        let c = PdpContext {
            index: 41,
            ue: Ipv4Addr::new(10, 0, 0, 5),
            teid_data: 0x1234,
            teid_control: 0x5678,
        };
        let d = delete_request(&c, 9);
        let h = gtp::parse_header(&d).unwrap();
        assert_eq!(
            (h.msg_type, h.seq, h.teid),
            (msg::DELETE_PDP_REQUEST, Some(9), 0x5678)
        );
    }

    #[test]
    fn answers_are_read_and_anything_else_ignored() {
        let mut m = MsgBuilder::new(msg::CREATE_PDP_RESPONSE, 42, 7);
        m.tv(ie::CAUSE, &[cause::REQUEST_ACCEPTED])
            .tv(ie::TEID_DATA_I, &0x11u32.to_be_bytes())
            .tv(ie::TEID_C, &0x22u32.to_be_bytes())
            .tlv(
                ie::END_USER_ADDRESS,
                &EndUserAddress::Ipv4(Some(Ipv4Addr::new(10, 0, 0, 9))).encode(),
            );
        assert_eq!(
            answer(&m.finish()),
            Some((
                7,
                Answer::Created {
                    teid_data: 0x11,
                    teid_control: 0x22,
                    ue: Ipv4Addr::new(10, 0, 0, 9)
                }
            ))
        );
        let mut m = MsgBuilder::new(msg::CREATE_PDP_RESPONSE, 42, 8);
        m.tv(ie::CAUSE, &[cause::NO_RESOURCES]);
        assert_eq!(answer(&m.finish()), Some((8, Answer::Refused(199))));
        // Accepted without an address: incomplete, not a context.
        let mut m = MsgBuilder::new(msg::CREATE_PDP_RESPONSE, 42, 9);
        m.tv(ie::CAUSE, &[cause::REQUEST_ACCEPTED]);
        assert_eq!(answer(&m.finish()), Some((9, Answer::Incomplete)));
        let echo = MsgBuilder::new(msg::ECHO_REQUEST, 0, 3).finish();
        assert_eq!(answer(&echo), None);
        let r = echo_response(&echo, 4).unwrap();
        let h = gtp::parse_header(&r).unwrap();
        assert_eq!((h.msg_type, h.seq), (msg::ECHO_RESPONSE, Some(3)));
        assert_eq!(answer(&[0x32, 17, 0]), None);
    }

    /// Linerate's own GGSN engine takes our requests: a context per subscriber, its address
    /// from the pool, and the delete frees it.
    #[test]
    fn linerate_engine_accepts_creates_and_deletes() {
        let text = "control-plane: { taps: true }
ports: [{ name: p0, driver: mem }]
interfaces: [{ name: p0, port: p0, mac: '02:00:00:00:00:01', ipv4: [192.168.0.1/24] }]
ggsn: { address: 192.168.0.1, apns: [{ name: internet, ipv4-pool: 10.0.0.0/24 }] }
";
        let cfg = control::config::parse(text, std::path::Path::new("g.yaml"))
            .unwrap()
            .ggsn
            .unwrap();
        let g = control::gtp::Ggsn::new(&cfg, 16, 1, 1);
        let o = opts();
        let from = SocketAddr::new(IpAddr::V4(o.control), 2123);
        let mut ctxs = Vec::new();
        for i in 0..3 {
            let out = g
                .engine()
                .handle(0, from, false, &create_request(&o, i, i as u16));
            let (seq, a) = answer(&out[0].bytes).unwrap();
            assert_eq!(seq, i as u16);
            let Answer::Created {
                teid_data,
                teid_control,
                ue,
            } = a
            else {
                panic!("{a:?}")
            };
            assert_eq!(ue.octets()[..3], [10, 0, 0]);
            ctxs.push(PdpContext {
                index: i,
                ue,
                teid_data,
                teid_control,
            });
        }
        assert_eq!(g.engine().contexts().count(), 3);
        let out = g
            .engine()
            .handle(0, from, false, &delete_request(&ctxs[1], 9));
        assert_eq!(answer(&out[0].bytes), Some((9, Answer::Accepted)));
        assert_eq!(g.engine().contexts().count(), 2);
    }

    /// A GGSN on loopback that accepts every other create and never answers every fifth: the
    /// exchange counts each outcome, retransmits, and gives up after N3.
    #[test]
    fn exchange_counts_refusals_and_lost_requests() {
        let ggsn = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = ggsn.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            ggsn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut buf = [0u8; 2048];
            let mut seen = 0;
            while let Ok((len, from)) = ggsn.recv_from(&mut buf) {
                seen += 1;
                let h = gtp::parse_header(&buf[..len]).unwrap();
                let seq = h.seq.unwrap();
                let imsi_ie = gtp::ies(h.payload(&buf[..len]))
                    .map(|x| x.unwrap())
                    .find(|x| x.ty == ie::TEID_DATA_I)
                    .unwrap();
                let i = u32::from_be_bytes(imsi_ie.value.try_into().unwrap()) - 1;
                if i % 5 == 4 {
                    continue;
                }
                let mut m = MsgBuilder::new(msg::CREATE_PDP_RESPONSE, i + 1, seq);
                if i % 2 == 0 {
                    m.tv(ie::CAUSE, &[cause::REQUEST_ACCEPTED])
                        .tv(ie::TEID_DATA_I, &(0x100 + i).to_be_bytes())
                        .tv(ie::TEID_C, &(0x200 + i).to_be_bytes())
                        .tlv(
                            ie::END_USER_ADDRESS,
                            &EndUserAddress::Ipv4(Some(Ipv4Addr::from(0x0a00_0000 + i))).encode(),
                        );
                } else {
                    m.tv(ie::CAUSE, &[cause::NO_RESOURCES]);
                }
                ggsn.send_to(&m.finish(), from).unwrap();
            }
            seen
        });
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut o = opts();
        o.t3 = Duration::from_millis(100);
        o.n3 = 2;
        let mut got = Vec::new();
        let mut seq = 65_530;
        let run = exchange(
            &sock,
            to,
            "create",
            20,
            1000.0,
            &o,
            msg::CREATE_PDP_RESPONSE,
            &mut seq,
            &mut |i, seq| create_request(&o, i, seq),
            &mut |i, a| got.push((i, a)),
        )
        .unwrap();
        // 20 requests: 0, 2, 6, 8, 10, 12, 16, 18 accepted (8); 1, 3, 5, 7, 11, 13, 15, 17
        // refused (8); 4, 9, 14, 19 lost, each sent 3 times.
        assert_eq!(run.accepted, 8);
        assert_eq!(run.refused[&cause::NO_RESOURCES], 8);
        assert_eq!((run.unanswered, run.retransmissions), (4, 8));
        assert!((run.success() - 0.4).abs() < 1e-9);
        assert_eq!(run.accepted_first_try, 8);
        assert_eq!(got.len(), 16);
        // The numbers ran on through the wrap, for the next exchange to continue.
        assert_eq!(seq, 14);
        assert!(got.contains(&(
            6,
            Answer::Created {
                teid_data: 0x106,
                teid_control: 0x206,
                ue: Ipv4Addr::new(10, 0, 0, 6)
            }
        )));
        drop(sock);
        assert_eq!(server.join().unwrap(), 16 + 12);
    }
}
