//! The services scenarios' procedures (issue 5), run against an embedded router through its
//! management core, and what they report:
//! - XR-5 ([`run_acl`]): throughput without ACLs, then with them (the config applied under the
//!   running router, as an operator would), one flow denied by the last DENY, then logging on.
//! - ME-1S ([`run_on_off`]): throughput per frame size with the services off, then on; ACL hits,
//!   QoS class counts and flow counters against what the router received.
//! - QOS-1 ([`run_policer`]): one trial above PIR; the policers' colours against the offered load.
//!
//! The searches here use a resolution relative to the answer (a router that forwards 0.1% of
//! nominal through a linear ACL still gets a figure to within `--resolution` of itself) and
//! drains of up to 10 s. With the services on they climb from a thousandth of the load passed
//! with them off instead of starting at 100%: a router a thousand times slower than nominal
//! would take minutes to empty rings filled by a trial at 100%, and the trials after it would
//! measure that backlog.

use std::net::UdpSocket;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use control::mgmt::Core;
use serde::Serialize;

use crate::engine::{Tester, TrialResult};
use crate::load::FrameSizes;
use crate::procedures::{self, Observer, SearchOpts, Throughput, TrialOpts};
use crate::report::thousands;
use crate::run::{nominal_fps, Row, RunOpts};
use crate::scenario::SeedRow;

/// XR-5's configs and the flow its last IPv4 DENY names.
#[derive(Clone, Debug)]
pub struct AclPlan {
    /// The config with the ACLs bound in and out on every interface.
    pub with_acl: String,
    /// The same with `log` on every DENY entry.
    pub with_log: String,
    pub entries_per_list: usize,
    /// The single-flow stream the last DENY matches.
    pub denied_stream: usize,
    /// The denied flow as a log record writes it: `A(P) -> B(Q)`.
    pub denied_flow: String,
    pub denied_seq: u32,
    /// The list holding it.
    pub list: String,
}

/// ME-1S's services config (`{COLLECTOR}` stands for the tester's collector socket).
#[derive(Clone, Debug)]
pub struct OnOffPlan {
    pub with_services: String,
    pub acl: String,
    pub acl_lines: usize,
    pub qos_lines: usize,
    /// The QoS class all the traffic falls in.
    pub qos_class: String,
    pub cache: usize,
    /// Distinct flows the streams carry: each must be accounted.
    pub flows: u64,
}

/// A stream and the policer it goes through (rates in bit/s of IP packets, bursts in bytes).
#[derive(Clone, Debug, Default, Serialize)]
pub struct PolicedStream {
    pub stream: usize,
    pub interface: String,
    pub policy: String,
    pub class: String,
    pub cir: u64,
    /// Two-rate when set.
    pub pir: Option<u64>,
    pub cbs: u32,
    /// PBS (two-rate) or EBS (single-rate).
    pub pbs: u32,
}

#[derive(Clone, Debug)]
pub struct PolicerPlan {
    /// Offered load, fraction of nominal (above every PIR).
    pub load: f64,
    pub policers: Vec<PolicedStream>,
}

/// What a services scenario found, beside its rows.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ServicesReport {
    Acl(AclReport),
    OnOff(OnOffReport),
    Policer(PolicerReport),
}

impl ServicesReport {
    pub fn passed(&self) -> bool {
        match self {
            ServicesReport::Acl(r) => r.passed,
            ServicesReport::OnOff(r) => r.passed,
            ServicesReport::Policer(r) => r.passed,
        }
    }
}

/// One search's figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunFigures {
    pub label: String,
    pub sizes: String,
    pub fps: f64,
    pub load: f64,
    pub nominal_fps: f64,
    pub tester_limited: bool,
    /// The search's final bracket, frames/s: two answers closer than this are the same.
    pub resolution_fps: f64,
    pub latency_avg_us: Option<f64>,
    pub latency_p99_us: Option<f64>,
    pub latency_max_us: Option<f64>,
    pub trials: usize,
}

impl RunFigures {
    fn of(label: &str, sz: &FrameSizes, th: &Throughput, nominal: f64, ro: &RunOpts) -> Self {
        let lat = th.best.as_ref().and_then(|b| b.latency.clone());
        RunFigures {
            label: label.into(),
            sizes: sz.to_string(),
            fps: th.fps(),
            load: th.load,
            nominal_fps: nominal,
            tester_limited: th.tester_limited,
            // The searches' resolution is relative: a fraction of the answer.
            resolution_fps: ro.resolution * th.load * nominal,
            latency_avg_us: lat.as_ref().map(|l| l.avg_ns / 1e3),
            latency_p99_us: lat.as_ref().map(|l| l.p99_ns as f64 / 1e3),
            latency_max_us: lat.as_ref().map(|l| l.max_ns as f64 / 1e3),
            trials: th.trials.len(),
        }
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct DeniedCheck {
    pub stream: String,
    pub load: f64,
    pub tx: u64,
    pub rx: u64,
    /// Hits of the DENY entry during the trial: every frame of the flow, and nothing else.
    pub entry_hits: u64,
    pub others_streams: usize,
    pub others_tx: u64,
    pub others_lost: u64,
    /// Trials run: a repeat (at half the load) follows only a trial where other streams lost
    /// frames, up to three, and the last one is reported; the denied flow must be dropped whole
    /// in every one.
    pub attempts: u32,
    pub passed: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct LogCheck {
    /// What the record must contain.
    pub expected: String,
    /// The record found (its text), if any.
    pub record: Option<String>,
    /// ACL log records the router wrote during the logging run.
    pub records: usize,
    pub passed: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct AclReport {
    pub entries_per_list: usize,
    /// No ACL, ACL, ACL with logging.
    pub runs: Vec<RunFigures>,
    pub denied: DeniedCheck,
    pub log: LogCheck,
    /// Throughput with logging not below the one without by more than the search resolution.
    pub logging_unchanged: bool,
    pub passed: bool,
    pub errors: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct FlowFigures {
    pub capacity: u64,
    pub occupancy: u64,
    pub created: u64,
    pub expired_idle: u64,
    pub expired_active: u64,
    pub evicted: u64,
    pub flushed: u64,
    pub queue_dropped: u64,
    pub records_exported: u64,
    pub datagrams_sent: u64,
    pub templates: u64,
    pub send_errors: u64,
    /// What the tester's collector socket received.
    pub collector_datagrams: u64,
    pub collector_bytes: u64,
    /// Flow caches a worker had to build itself (a pause in its forwarding): must be 0.
    pub caches_built_by_workers: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct OnOffReport {
    pub acl_lines: usize,
    pub qos_lines: usize,
    pub cache: usize,
    pub off: Vec<RunFigures>,
    pub on: Vec<RunFigures>,
    /// Frames the router took in while the services were on.
    pub router_rx: u64,
    /// Hits of the ACL's final permit over the same time: must equal `router_rx`.
    pub permit_hits: u64,
    /// Hits of every other entry and the implicit deny: must be 0.
    pub other_hits: u64,
    /// Packets the QoS class the traffic belongs to counted (all interfaces): must equal
    /// `router_rx`.
    pub qos_class_packets: u64,
    pub flows: FlowFigures,
    /// Distinct flows the tester offered; every one must have made a flow record (`created`
    /// at least this: a flow that expired and came back counts again).
    pub offered_flows: u64,
    pub hits_match: bool,
    pub qos_match: bool,
    pub flows_match: bool,
    /// The services commit, made in the middle of a fixed-load trial.
    pub commit: Option<CommitCheck>,
    pub passed: bool,
    pub errors: Vec<String>,
}

/// A config commit made while traffic flows: binding the services (ACLs compiled, QoS,
/// gigabyte flow caches) builds every table off the workers and publishes it whole, so the
/// trial spanning it loses nothing.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CommitCheck {
    pub frame: String,
    /// The fixed load, a small share of the services-off throughput, low enough for the
    /// services-on router too.
    pub load_fps: f64,
    pub seconds: f64,
    /// When the commit started, from the start of the measured traffic, and how long it took.
    pub commit_at_s: f64,
    pub commit_ms: f64,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub duplicated: u64,
    /// Frames the router counted as dropped, by reason, during the trial.
    pub router_drops: Vec<(String, u64)>,
    /// The commit ended while the traffic still flowed (otherwise the check says nothing).
    pub inside: bool,
    /// Nothing lost, duplicated or corrupted, and the commit fell inside the traffic.
    pub passed: bool,
}

/// The share of the services-off throughput offered while the services commit goes live. The
/// services-on rate is a tenth of the services-off one or less (measured 0.09-0.18), so 2% of
/// off stays well under what the router forwards once the services are on: a loss in this
/// trial is the commit's, not the services' cost (at 5%, a quiet machine's 10.5 Mfps off made
/// the trial offer more than the 0.98 Mfps the services allow).
const COMMIT_LOAD_SHARE: f64 = 0.02;

/// The shortest trial the commit is made in (it starts 1 s into the traffic).
const COMMIT_TRIAL_S: f64 = 12.0;

/// Runs a fixed-load trial and applies `text` from another thread part of the way into it.
#[allow(clippy::too_many_arguments)]
fn commit_under_load(
    t: &mut Tester,
    core: &Arc<Core>,
    cfg_path: &Path,
    text: &str,
    sz: &FrameSizes,
    off: &Throughput,
    ro: &RunOpts,
    obs: &mut dyn Observer,
) -> Result<CommitCheck, String> {
    let load = (off.load * COMMIT_LOAD_SHARE).max(1e-6);
    // Long enough for the commit to end inside the traffic: compiling a 10,000-line ACL and
    // building a 14.4M-flow cache take seconds on a busy 2-core machine.
    let mut trial = trial_opts(ro);
    trial.seconds = trial.seconds.max(COMMIT_TRIAL_S);
    let at = 1.0;
    let delay = Duration::from_secs_f64(trial.warmup + at);
    let (c, txt, path) = (core.clone(), text.to_string(), cfg_path.to_path_buf());
    let committer = std::thread::Builder::new()
        .name("commit".into())
        .spawn(move || {
            std::thread::sleep(delay);
            let t0 = std::time::Instant::now();
            let r = apply(&c, &txt, &path);
            (r, t0.elapsed())
        })
        .map_err(|e| format!("commit thread: {e}"))?;
    let th = {
        let mut settle = Settle { inner: obs, core };
        procedures::fixed_load(t, sz, &trial, load, 0.0, &mut settle)
    };
    let (applied, took) = committer
        .join()
        .map_err(|_| "the commit thread panicked".to_string())?;
    applied?;
    let r = &th.at_max;
    let inside = took.as_secs_f64() < trial.seconds - at;
    Ok(CommitCheck {
        frame: sz.to_string(),
        load_fps: r.offered_fps,
        seconds: trial.seconds,
        commit_at_s: at,
        commit_ms: took.as_secs_f64() * 1e3,
        sent: r.tx,
        received: r.rx,
        lost: r.lost,
        duplicated: r.duplicated,
        router_drops: r
            .dut_drops
            .iter()
            .map(|&(k, v)| (k.to_string(), v))
            .collect(),
        inside,
        passed: inside && r.tx > 0 && r.lost == 0 && r.duplicated == 0 && r.corrupted == 0,
    })
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct PolicerCheck {
    pub stream: String,
    pub policer: PolicedStream,
    pub frame: u16,
    pub seconds: f64,
    pub tx_frames: u64,
    pub rx_frames: u64,
    /// IP bytes the tester sent, and what the policer metered: the same when nothing is lost
    /// on the way in.
    pub tester_l3_bytes: u64,
    pub metered_bytes: u64,
    /// Frames sent that the policer never saw (refused by the router's receive ring).
    pub unmetered_frames: u64,
    pub conformed: (u64, u64),
    pub exceeded: (u64, u64),
    pub violated: (u64, u64),
    /// Offered, bit/s of IP packets.
    pub offered_bps: f64,
    /// Measured (buckets' initial fill left out) against expected, bit/s, and the error in %.
    pub conform_bps: f64,
    pub conform_expected_bps: f64,
    pub conform_error_pct: f64,
    pub conform_exceed_bps: f64,
    pub conform_exceed_expected_bps: f64,
    pub conform_exceed_error_pct: f64,
    pub violate_bps: f64,
    pub violate_expected_bps: f64,
    pub violate_error_pct: f64,
    /// The tester received exactly the conformed and exceeded packets.
    pub rx_matches: bool,
    pub passed: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct PolicerReport {
    pub load: f64,
    pub limit_pct: f64,
    pub checks: Vec<PolicerCheck>,
    pub passed: bool,
    pub errors: Vec<String>,
}

/// Where a search with services on starts: a thousandth of the load the router passed without
/// them, from which it climbs (see [`SearchOpts::start`]).
fn start_below(off: &Throughput) -> Option<f64> {
    Some((off.load * 1e-3).max(1e-6))
}

/// Trials as the run asks, with room to drain a slow router's full rings.
fn trial_opts(ro: &RunOpts) -> TrialOpts {
    let mut t = ro.trial.clone();
    t.drain_max_ms = t.drain_max_ms.max(10_000);
    t
}

#[allow(clippy::too_many_arguments)]
fn search(
    t: &mut Tester,
    core: &Core,
    sz: &FrameSizes,
    ro: &RunOpts,
    tolerance: f64,
    active: Vec<usize>,
    ignore: Vec<usize>,
    start: Option<f64>,
    obs: &mut dyn Observer,
) -> Throughput {
    let o = SearchOpts {
        resolution: ro.resolution,
        loss_tolerance: tolerance,
        active: Some(active),
        ignore,
        relative: true,
        start,
        ..Default::default()
    };
    let mut settle = Settle { inner: obs, core };
    procedures::throughput(t, sz, &trial_opts(ro), &o, &mut settle)
}

/// Passes everything on to `inner`, and after each trial waits for the router to take in
/// nothing more: the tester's drain ends when frames stop coming back, but a router forwarding
/// a few thousand frames/s still has full rings of a failed trial's frames then, and the next
/// trial would measure them (measured: ME-1S at 64 B received nothing for five trials).
struct Settle<'a> {
    inner: &'a mut dyn Observer,
    core: &'a Core,
}

impl Observer for Settle<'_> {
    fn note(&mut self, line: &str) {
        self.inner.note(line);
    }
    fn progress(&mut self, what: &str, p: &crate::engine::Progress) {
        self.inner.progress(what, p);
    }

    fn trial(&mut self, what: &str, r: &TrialResult, pass: bool) {
        quiesce(self.core);
        self.inner.trial(what, r, pass);
    }
}

fn apply(core: &Arc<Core>, text: &str, path: &Path) -> Result<(), String> {
    core.apply(text, path, Default::default())
        .map(|_| ())
        .map_err(|e| format!("config apply: {e}"))
}

fn router_rx(core: &Core) -> u64 {
    core.lock("tester.rx")
        .runtime
        .snapshot()
        .rx_packets
        .iter()
        .sum()
}

/// Waits until the router has taken nothing in for 100 ms (at most 20 s), so counters read
/// after it belong to what came before; returns the frames received so far.
fn quiesce(core: &Core) -> u64 {
    let mut last = router_rx(core);
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(100));
        let now = router_rx(core);
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

fn row(label: String, sz: &FrameSizes, nominal: f64, seed: Option<SeedRow>, th: Throughput) -> Row {
    Row {
        key: label,
        sizes: sz.clone(),
        nominal_fps: nominal,
        seed,
        search: th,
    }
}

/// XR-5. Returns the rows (three per frame size) and the checks.
#[allow(clippy::too_many_arguments)]
pub fn run_acl(
    t: &mut Tester,
    core: &Arc<Core>,
    cfg_path: &Path,
    p: &AclPlan,
    sizes: &[FrameSizes],
    ro: &RunOpts,
    tolerance: f64,
    obs: &mut dyn Observer,
) -> (Vec<Row>, AclReport) {
    let mut rows = Vec::new();
    let mut rep = AclReport {
        entries_per_list: p.entries_per_list,
        ..Default::default()
    };
    let n = t.streams.len();
    let d = p.denied_stream;
    let others: Vec<usize> = (0..n).filter(|&i| i != d).collect();
    let all: Vec<usize> = (0..n).collect();
    let sz = &sizes[0];
    let nominal = nominal_fps(t, sz, &others);
    let seed = |note: &str| {
        Some(SeedRow {
            key: sz.to_string(),
            fps: None,
            note: note.into(),
        })
    };
    // (1) Without ACLs (XR-4 with XR-5's streams), then with them.
    let off = search(
        t,
        core,
        sz,
        ro,
        tolerance,
        others.clone(),
        vec![],
        None,
        obs,
    );
    let start = start_below(&off);
    rep.runs
        .push(RunFigures::of("no ACL", sz, &off, nominal, ro));
    rows.push(row(
        format!("{sz}, no ACL"),
        sz,
        nominal,
        seed("XR-4: line rate, 24.1 us"),
        off,
    ));
    if let Err(e) = apply(core, &p.with_acl, cfg_path) {
        rep.errors.push(e);
        return (rows, rep);
    }
    let acl = search(
        t,
        core,
        sz,
        ro,
        tolerance,
        others.clone(),
        vec![],
        start,
        obs,
    );
    rep.runs.push(RunFigures::of(
        &format!(
            "ACL ({} entries x 2 families, in + out)",
            p.entries_per_list
        ),
        sz,
        &acl,
        nominal,
        ro,
    ));
    // (2) Every stream, the denied flow too, at half the throughput just found: the check is
    // about which frames the lists pass, and a repeat near the no-loss rate can lose to a shared
    // machine's scheduling what the search's trial did not (seen at 90% on this VM).
    let load = if acl.load > 0.0 {
        acl.load * 0.5
    } else {
        // Nothing passed: half the forwarding rate at overload, to see the flow denied at all.
        (acl.at_max.rx_fps / acl.at_max.offered_fps.max(1.0) / 2.0).max(1e-5)
    };
    rows.push(row(
        format!("{sz}, ACL"),
        sz,
        nominal,
        seed("line rate, 25.5 us"),
        acl,
    ));
    // A shared CI machine has been seen to stall the router long enough for the other streams to
    // lose 11% at half the throughput: such a trial is repeated at half its load, twice at most.
    // A list that drops other flows' frames drops them in every repeat.
    let mut load = load;
    for attempt in 1..=3 {
        let hits0 = deny_hits(core, p);
        let mut spec = trial_opts(ro).spec(load, sz);
        spec.active = Some(all.clone());
        let label = format!("{sz} denied flow at {:.3}%", load * 100.0);
        let r = t.trial(&mut spec, &mut |x| obs.progress(&label, x));
        quiesce(core);
        let c = denied_check(&r, &all, d, load, deny_hits(core, p) - hits0, attempt);
        obs.trial(&label, &r, c.passed);
        let repeat = c.flow_denied() && c.others_lost > 0;
        rep.denied = c;
        if !repeat {
            break;
        }
        load *= 0.5;
    }
    // (3) Logging on every DENY entry; the denied flow is sent (and not judged) in every trial.
    let seq0 = core.logging(1).last().map_or(0, |r| r.seq);
    if let Err(e) = apply(core, &p.with_log, cfg_path) {
        rep.errors.push(e);
        return (rows, rep);
    }
    let logged = search(t, core, sz, ro, tolerance, all, vec![d], start, obs);
    rep.runs.push(RunFigures::of(
        "ACL + logging (the denied flow sent)",
        sz,
        &logged,
        nominal,
        ro,
    ));
    rows.push(row(
        format!("{sz}, ACL + logging"),
        sz,
        nominal,
        seed("line rate, latency unchanged"),
        logged,
    ));
    // The services thread turns logged matches into records every 100 ms.
    std::thread::sleep(Duration::from_millis(400));
    let records: Vec<_> = core
        .logging(10_000)
        .into_iter()
        .filter(|x| x.seq > seq0 && x.msgid == "ACL_LOG")
        .collect();
    let expected = format!(
        "access-list {} ({}) deny udp {}",
        p.list, p.denied_seq, p.denied_flow
    );
    let found = records.iter().find(|x| x.text.contains(&expected));
    rep.log = LogCheck {
        expected: expected.clone(),
        record: found.map(|x| x.text.clone()),
        records: records.len(),
        passed: found.is_some(),
    };
    // Compared by the load passed: the logging run's received frames/s lacks the denied flow.
    // One-sided: logging must not lower the throughput by more than the search's resolution; a
    // logging run that passes more is the machine's noise, not a cost.
    let (a, l) = (&rep.runs[1], &rep.runs[2]);
    rep.logging_unchanged =
        a.load > 0.0 && (a.load - l.load) * a.nominal_fps <= a.resolution_fps.max(l.resolution_fps);
    rep.passed = rep.errors.is_empty()
        && rep.denied.passed
        && rep.log.passed
        && rep.logging_unchanged
        && rep.runs.iter().all(|r| r.fps > 0.0);
    (rows, rep)
}

/// Hits of the plan's DENY entry.
fn deny_hits(core: &Core, p: &AclPlan) -> u64 {
    core.acls(Some(&p.list))
        .ok()
        .and_then(|v| {
            v.into_iter()
                .next()?
                .entries
                .into_iter()
                .find(|e| e.seq == p.denied_seq)
                .map(|e| e.hits)
        })
        .unwrap_or(0)
}

fn denied_check(
    r: &TrialResult,
    active: &[usize],
    d: usize,
    load: f64,
    hits: u64,
    attempts: u32,
) -> DeniedCheck {
    let mut c = DeniedCheck {
        load,
        entry_hits: hits,
        attempts,
        ..Default::default()
    };
    for (sr, &i) in r.streams.iter().zip(active) {
        if i == d {
            c.stream = sr.name.clone();
            c.tx = sr.tx;
            c.rx = sr.rx;
        } else {
            c.others_streams += 1;
            c.others_tx += sr.tx;
            c.others_lost += sr.lost + sr.duplicated + sr.corrupted;
        }
    }
    c.passed = c.flow_denied() && c.others_tx > 0 && c.others_lost == 0;
    c
}

impl DeniedCheck {
    /// The denied flow was sent, none of it came through, and its entry counted every frame.
    fn flow_denied(&self) -> bool {
        self.tx > 0 && self.rx == 0 && self.entry_hits == self.tx
    }
}

/// A UDP socket standing for the NetFlow collector: it counts what arrives.
pub struct Collector {
    pub addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    datagrams: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Collector {
    pub fn start() -> std::io::Result<Collector> {
        let sock = UdpSocket::bind("127.0.0.1:0")?;
        sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        let addr = sock.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let datagrams = Arc::new(AtomicU64::new(0));
        let bytes = Arc::new(AtomicU64::new(0));
        let (s, d, b) = (stop.clone(), datagrams.clone(), bytes.clone());
        let thread = std::thread::Builder::new()
            .name("collector".into())
            .spawn(move || {
                let mut buf = vec![0u8; 65_536];
                while !s.load(Ordering::Relaxed) {
                    if let Ok(n) = sock.recv(&mut buf) {
                        d.fetch_add(1, Ordering::Relaxed);
                        b.fetch_add(n as u64, Ordering::Relaxed);
                    }
                }
            })?;
        Ok(Collector {
            addr,
            stop,
            datagrams,
            bytes,
            thread: Some(thread),
        })
    }

    /// Stops listening; returns (datagrams, bytes) received.
    pub fn finish(mut self) -> (u64, u64) {
        // What the exporter sent last is in the socket's buffer or on its way.
        std::thread::sleep(Duration::from_millis(300));
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        (
            self.datagrams.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

/// ME-1S: every size with the services off, then the services config applied and every size
/// again. The flow figures are filled in by [`finish_on_off`] once the router has stopped (its
/// workers hand over their caches when they stop).
#[allow(clippy::too_many_arguments)]
pub fn run_on_off(
    t: &mut Tester,
    core: &Arc<Core>,
    cfg_path: &Path,
    p: &OnOffPlan,
    sizes: &[FrameSizes],
    seed: &dyn Fn(&str) -> Option<SeedRow>,
    ro: &RunOpts,
    tolerance: f64,
    obs: &mut dyn Observer,
) -> (Vec<Row>, OnOffReport, Option<Collector>) {
    let mut rep = OnOffReport {
        acl_lines: p.acl_lines,
        qos_lines: p.qos_lines,
        cache: p.cache,
        offered_flows: p.flows,
        ..Default::default()
    };
    let all: Vec<usize> = (0..t.streams.len()).collect();
    let mut off_rows: Vec<Row> = Vec::new();
    for sz in sizes {
        let th = search(t, core, sz, ro, tolerance, all.clone(), vec![], None, obs);
        let nominal = nominal_fps(t, sz, &all);
        rep.off
            .push(RunFigures::of("services off", sz, &th, nominal, ro));
        off_rows.push(row(format!("{sz} off"), sz, nominal, None, th));
    }
    let collector = match Collector::start() {
        Ok(c) => c,
        Err(e) => {
            rep.errors.push(format!("collector socket: {e}"));
            return (off_rows, rep, None);
        }
    };
    let text = p
        .with_services
        .replace("{COLLECTOR}", &collector.addr.to_string());
    // The services go live under traffic: the commit must cost no frame.
    let first = sizes.first().zip(off_rows.first());
    let applied = match first {
        Some((sz, off)) => commit_under_load(t, core, cfg_path, &text, sz, &off.search, ro, obs)
            .map(|c| {
                rep.commit = Some(c);
            }),
        None => apply(core, &text, cfg_path),
    };
    if let Err(e) = applied {
        rep.errors.push(e);
        return (off_rows, rep, Some(collector));
    }
    let rx0 = quiesce(core);
    let (hits0, other0) = acl_hits(core, &p.acl);
    let class0 = class_packets(core, &p.qos_class);
    let mut rows = Vec::new();
    for (sz, off) in sizes.iter().zip(off_rows) {
        let start = start_below(&off.search);
        let th = search(t, core, sz, ro, tolerance, all.clone(), vec![], start, obs);
        let nominal = nominal_fps(t, sz, &all);
        rep.on
            .push(RunFigures::of("services on", sz, &th, nominal, ro));
        rows.push(off);
        rows.push(row(
            format!("{sz} on"),
            sz,
            nominal,
            seed(&sz.to_string()),
            th,
        ));
    }
    rep.router_rx = quiesce(core) - rx0;
    let (hits, other) = acl_hits(core, &p.acl);
    rep.permit_hits = hits - hits0;
    rep.other_hits = other - other0;
    rep.qos_class_packets = class_packets(core, &p.qos_class) - class0;
    rep.hits_match = rep.router_rx > 0 && rep.permit_hits == rep.router_rx && rep.other_hits == 0;
    rep.qos_match = rep.qos_class_packets == rep.router_rx;
    (rows, rep, Some(collector))
}

/// After the router stopped: the flow cache and export counters, and the collector's count.
pub fn finish_on_off(core: &Core, rep: &mut OnOffReport, collector: Option<Collector>) {
    let f = core.flows();
    let (cd, cb) = collector.map_or((0, 0), Collector::finish);
    rep.flows = FlowFigures {
        capacity: f.capacity,
        occupancy: f.occupancy,
        created: f.created,
        expired_idle: f.expired_idle,
        expired_active: f.expired_active,
        evicted: f.evicted,
        flushed: f.flushed,
        queue_dropped: f.queue_dropped,
        records_exported: f.export.records,
        datagrams_sent: f.export.datagrams,
        templates: f.export.templates,
        send_errors: f.export.send_errors,
        collector_datagrams: cd,
        collector_bytes: cb,
        caches_built_by_workers: f.caches_built_by_workers,
    };
    rep.flows_match = rep.flows.created >= rep.offered_flows;
    rep.passed = rep.errors.is_empty()
        && rep.commit.as_ref().is_some_and(|c| c.passed)
        && rep.flows.caches_built_by_workers == 0
        && rep.hits_match
        && rep.qos_match
        && rep.flows_match
        && rep.flows.created > 0
        && rep.flows.records_exported > 0
        && rep.on.iter().all(|r| r.fps > 0.0);
}

/// (hits of the list's last entry, hits of every other entry and the implicit deny).
fn acl_hits(core: &Core, name: &str) -> (u64, u64) {
    let Some(a) = core
        .acls(Some(name))
        .ok()
        .and_then(|v| v.into_iter().next())
    else {
        return (0, 0);
    };
    let last = a.entries.last().map_or(0, |e| e.hits);
    let rest: u64 = a.entries.iter().map(|e| e.hits).sum::<u64>() - last + a.implicit_deny;
    (last, rest)
}

fn class_packets(core: &Core, class: &str) -> u64 {
    core.qos()
        .iter()
        .flat_map(|q| q.classes.iter())
        .filter(|c| c.class == class)
        .map(|c| c.packets)
        .sum()
}

/// Colour counts of one policer: (packets, bytes) conformed, exceeded, violated.
type Colours = [(u64, u64); 3];

fn policer_counts(core: &Core, p: &PolicedStream) -> Option<Colours> {
    core.qos()
        .into_iter()
        .filter(|q| q.interface == p.interface && q.policy == p.policy)
        .flat_map(|q| q.classes.into_iter())
        .find(|c| c.class == p.class)
        .and_then(|c| c.policer)
        .map(|x| {
            [
                (x.conformed_packets, x.conformed_bytes),
                (x.exceeded_packets, x.exceeded_bytes),
                (x.violated_packets, x.violated_bytes),
            ]
        })
}

/// Error of `measured` against `expected`, percent.
fn err_pct(measured: f64, expected: f64) -> f64 {
    if expected == 0.0 {
        if measured == 0.0 {
            0.0
        } else {
            100.0
        }
    } else {
        (measured - expected) / expected * 100.0
    }
}

/// QOS-1: one trial at the plan's load (or `--load`); each policer's colours against the rates it
/// was configured with and the load the tester offered.
pub fn run_policer(
    t: &mut Tester,
    core: &Arc<Core>,
    p: &PolicerPlan,
    sz: &FrameSizes,
    ro: &RunOpts,
    obs: &mut dyn Observer,
) -> PolicerReport {
    const LIMIT_PCT: f64 = 1.0;
    let load = ro.fixed_load.unwrap_or(p.load);
    let mut rep = PolicerReport {
        load,
        limit_pct: LIMIT_PCT,
        ..Default::default()
    };
    let before: Vec<Option<Colours>> = p.policers.iter().map(|x| policer_counts(core, x)).collect();
    let mut spec = trial_opts(ro).spec(load, sz);
    let label = format!("{sz} policers at {:.1}%", load * 100.0);
    let r = t.trial(&mut spec, &mut |x| obs.progress(&label, x));
    quiesce(core);
    let frame = match sz {
        FrameSizes::Fixed(n) => *n,
        _ => {
            rep.errors
                .push("QOS-1 needs one fixed frame size (--sizes 512)".into());
            return rep;
        }
    };
    // What the policers meter: the IP packet (the frame less its Ethernet header and FCS).
    let l3 = frame as u64 - 18;
    // The span the policers metered: from the first burst to the last. The trial's nominal
    // length would count a stall of the tester at either end as time the policers had traffic
    // to colour (measured under contention: rates up to 0.8% low).
    let secs = if r.tx_span_s > 0.0 {
        r.tx_span_s
    } else {
        r.seconds
    };
    for (x, b) in p.policers.iter().zip(before) {
        let Some(sr) = r.streams.get(x.stream) else {
            rep.errors.push(format!("no stream {}", x.stream));
            continue;
        };
        let (Some(b), Some(a)) = (b, policer_counts(core, x)) else {
            rep.errors
                .push(format!("{} {}: no policer counters", x.interface, x.policy));
            continue;
        };
        let d: Colours = std::array::from_fn(|i| (a[i].0 - b[i].0, a[i].1 - b[i].1));
        let bps = |bytes: f64| bytes * 8.0 / secs;
        let metered = d[0].1 + d[1].1 + d[2].1;
        let offered = bps(metered as f64);
        let mut c = PolicerCheck {
            stream: sr.name.clone(),
            policer: x.clone(),
            frame,
            seconds: secs,
            tx_frames: sr.tx,
            rx_frames: sr.rx,
            tester_l3_bytes: sr.tx * l3,
            metered_bytes: metered,
            conformed: d[0],
            exceeded: d[1],
            violated: d[2],
            offered_bps: offered,
            ..Default::default()
        };
        // The buckets start full: the first CBS bytes conform (and the first PBS or EBS more are
        // within PIR) before any rate applies, so those fills come off the measured rates.
        let cbs = x.cbs as f64;
        let pbs = x.pbs as f64;
        c.conform_bps = bps(d[0].1 as f64 - cbs);
        c.conform_expected_bps = x.cir as f64;
        let upper = x.pir.unwrap_or(x.cir) as f64;
        c.conform_exceed_bps =
            bps((d[0].1 + d[1].1) as f64 - pbs - if x.pir.is_some() { 0.0 } else { cbs });
        c.conform_exceed_expected_bps = upper;
        c.violate_bps = bps(d[2].1 as f64 + pbs + if x.pir.is_some() { 0.0 } else { cbs });
        c.violate_expected_bps = offered - upper;
        c.conform_error_pct = err_pct(c.conform_bps, c.conform_expected_bps);
        c.conform_exceed_error_pct = err_pct(c.conform_exceed_bps, c.conform_exceed_expected_bps);
        c.violate_error_pct = err_pct(c.violate_bps, c.violate_expected_bps);
        c.rx_matches = c.rx_frames == d[0].0 + d[1].0;
        // Frames the router's receive ring refused (a worker stall) never reach the policer:
        // they are counted apart, and the rates judged on what was metered.
        c.unmetered_frames = (c.tester_l3_bytes.saturating_sub(c.metered_bytes)) / l3;
        c.passed = c.rx_matches
            && offered > upper
            && [
                c.conform_error_pct,
                c.conform_exceed_error_pct,
                c.violate_error_pct,
            ]
            .iter()
            .all(|e| e.abs() <= LIMIT_PCT);
        rep.checks.push(c);
    }
    rep.passed =
        rep.errors.is_empty() && !rep.checks.is_empty() && rep.checks.iter().all(|c| c.passed);
    obs.trial(&label, &r, rep.passed);
    rep
}

fn us(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.1}"))
}

fn pass(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "FAIL"
    }
}

fn fps_cell(r: &RunFigures) -> String {
    if r.tester_limited {
        format!(">= {} (tester-bound)", thousands(r.fps))
    } else {
        thousands(r.fps)
    }
}

fn pct(r: &RunFigures) -> f64 {
    if r.nominal_fps > 0.0 {
        r.fps / r.nominal_fps * 100.0
    } else {
        0.0
    }
}

/// The services section of a scenario's table (Markdown).
pub fn table(s: &ServicesReport) -> String {
    let mut o = String::new();
    match s {
        ServicesReport::Acl(r) => {
            o += &format!(
                "XR-5, {} entries per list (IPv4 and IPv6), bound in and out on every port:\n\n",
                thousands(r.entries_per_list as f64)
            );
            o += "| run | throughput (fps) | % of nominal | latency avg / p99 / max (us) | search resolution (fps) | trials |\n";
            o += "|---|---:|---:|---:|---:|---:|\n";
            for x in &r.runs {
                o += &format!(
                    "| {} | {} | {:.3}% | {} / {} / {} | {} | {} |\n",
                    x.label,
                    fps_cell(x),
                    pct(x),
                    us(x.latency_avg_us),
                    us(x.latency_p99_us),
                    us(x.latency_max_us),
                    thousands(x.resolution_fps),
                    x.trials
                );
            }
            if let (Some(a), Some(b)) = (r.runs.first(), r.runs.get(1)) {
                if a.fps > 0.0 {
                    o += &format!(
                        "\nWith the ACLs: {:.4} of the throughput without them.\n",
                        b.fps / a.fps
                    );
                }
            }
            let d = &r.denied;
            o +=
                &format!(
                "\n(2) Denied flow `{}` at {:.3}% of nominal: {} sent, {} received, entry hits {} \
                 ({}); the other {} streams: {} sent, {} lost ({}){}. Result: {}\n",
                d.stream,
                d.load * 100.0,
                thousands(d.tx as f64),
                thousands(d.rx as f64),
                thousands(d.entry_hits as f64),
                if d.tx > 0 && d.rx == 0 {
                    "100% dropped"
                } else {
                    "NOT all dropped"
                },
                d.others_streams,
                thousands(d.others_tx as f64),
                thousands(d.others_lost as f64),
                if d.others_lost == 0 { "zero loss" } else { "LOSS" },
                if d.attempts > 1 {
                    format!(" in trial {} (earlier ones lost frames of other streams)", d.attempts)
                } else {
                    String::new()
                },
                pass(d.passed)
            );
            o += &format!(
                "(3) Logging: {} ACL log records; the flow's: {}. Result: {}\n",
                r.log.records,
                match &r.log.record {
                    Some(t) => format!("`{t}`"),
                    None => format!("MISSING (looked for `{}`)", r.log.expected),
                },
                pass(r.log.passed)
            );
            if let (Some(a), Some(l)) = (r.runs.get(1), r.runs.get(2)) {
                o += &format!(
                    "(3) Load passed with logging {} fps against {} fps without: {} (not lower \
                     by more than the search resolution, {} fps). Latency avg {} us against {} us.\n",
                    thousands(l.load * l.nominal_fps),
                    thousands(a.load * a.nominal_fps),
                    pass(r.logging_unchanged),
                    thousands(a.resolution_fps.max(l.resolution_fps)),
                    us(l.latency_avg_us),
                    us(a.latency_avg_us)
                );
            }
            for e in &r.errors {
                o += &format!("Error: {e}\n");
            }
            o += &format!("Result: {}\n\n", pass(r.passed));
        }
        ServicesReport::OnOff(r) => {
            o += &format!(
                "Services off and on (ACL {} lines, QoS {} lines, NetFlow v9 cache {} flows):\n\n",
                thousands(r.acl_lines as f64),
                thousands(r.qos_lines as f64),
                thousands(r.cache as f64)
            );
            o += "| frame (B) | off (fps) | off % of nominal | on (fps) | on % of nominal | on / off | on latency avg / p99 (us) |\n";
            o += "|---:|---:|---:|---:|---:|---:|---:|\n";
            for (a, b) in r.off.iter().zip(&r.on) {
                o += &format!(
                    "| {} | {} | {:.2}% | {} | {:.3}% | {} | {} / {} |\n",
                    a.sizes,
                    fps_cell(a),
                    pct(a),
                    fps_cell(b),
                    pct(b),
                    if a.fps > 0.0 {
                        format!("{:.4}", b.fps / a.fps)
                    } else {
                        "-".into()
                    },
                    us(b.latency_avg_us),
                    us(b.latency_p99_us)
                );
            }
            let f = &r.flows;
            if let Some(c) = &r.commit {
                o += &format!(
                    "\nThe services commit under traffic ({} at {} fps for {:.0} s, committed at \
                     {:.1} s, taking {:.0} ms): {} frames sent, {} received, {} lost, {} \
                     duplicated{}: {}.\n",
                    c.frame,
                    thousands(c.load_fps),
                    c.seconds,
                    c.commit_at_s,
                    c.commit_ms,
                    thousands(c.sent as f64),
                    thousands(c.received as f64),
                    thousands(c.lost as f64),
                    thousands(c.duplicated as f64),
                    if c.inside {
                        ""
                    } else {
                        "; the commit outlasted the traffic"
                    },
                    if c.passed { "PASS" } else { "FAIL" }
                );
            }
            o +=
                &format!(
                "\nCross-checks while the services were on: router received {} frames; ACL final \
                 permit hits {} ({}), other entries and the implicit deny {}; QoS class packets \
                 {} ({}).\n",
                thousands(r.router_rx as f64),
                thousands(r.permit_hits as f64),
                if r.hits_match { "equal: PASS" } else { "NOT equal: FAIL" },
                thousands(r.other_hits as f64),
                thousands(r.qos_class_packets as f64),
                if r.qos_match { "equal: PASS" } else { "NOT equal: FAIL" },
            );
            o += &format!(
                "NetFlow: {} flows offered, {} created ({}).\n",
                thousands(r.offered_flows as f64),
                thousands(f.created as f64),
                if r.flows_match {
                    "every one accounted: PASS"
                } else {
                    "fewer: FAIL"
                },
            );
            o += &format!(
                "NetFlow: cache {} flows; {} created, {} evicted (bucket pair full), {} expired \
                 idle, {} active, {} flushed at stop, {} lost on the export queue, {} caches \
                 built by a worker; {} records in \
                 {} datagrams sent ({} send errors); the tester's collector received {} datagrams \
                 ({} bytes).\n",
                thousands(f.capacity as f64),
                thousands(f.created as f64),
                thousands(f.evicted as f64),
                thousands(f.expired_idle as f64),
                thousands(f.expired_active as f64),
                thousands(f.flushed as f64),
                thousands(f.queue_dropped as f64),
                f.caches_built_by_workers,
                thousands(f.records_exported as f64),
                thousands(f.datagrams_sent as f64),
                thousands(f.send_errors as f64),
                thousands(f.collector_datagrams as f64),
                thousands(f.collector_bytes as f64)
            );
            for e in &r.errors {
                o += &format!("Error: {e}\n");
            }
            o += &format!("Result: {}\n\n", pass(r.passed));
        }
        ServicesReport::Policer(r) => {
            o += &format!(
                "Policers at {:.1}% of nominal (limit {}%), rates in Mbit/s of IP packets:\n\n",
                r.load * 100.0,
                r.limit_pct
            );
            o += "| stream | policer | offered | conform (CIR) | error | conform+exceed (PIR) | error | violate (offered - PIR) | error | tester rx = conform + exceed | result |\n";
            o += "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|\n";
            let m = |x: f64| format!("{:.2}", x / 1e6);
            for c in &r.checks {
                let p = &c.policer;
                o += &format!(
                    "| {} | {} {} CIR {} PIR {} | {} | {} ({}) | {:+.3}% | {} ({}) | {:+.3}% | {} ({}) | {:+.3}% | {} = {} + {} | {} |\n",
                    c.stream,
                    p.interface,
                    p.policy,
                    m(p.cir as f64),
                    p.pir.map_or("-".into(), |x| m(x as f64)),
                    m(c.offered_bps),
                    m(c.conform_bps),
                    m(c.conform_expected_bps),
                    c.conform_error_pct,
                    m(c.conform_exceed_bps),
                    m(c.conform_exceed_expected_bps),
                    c.conform_exceed_error_pct,
                    m(c.violate_bps),
                    m(c.violate_expected_bps),
                    c.violate_error_pct,
                    thousands(c.rx_frames as f64),
                    thousands(c.conformed.0 as f64),
                    thousands(c.exceeded.0 as f64),
                    pass(c.passed)
                );
            }
            for e in &r.errors {
                o += &format!("Error: {e}\n");
            }
            o += &format!("\nResult: {}\n\n", pass(r.passed));
        }
    }
    o
}
