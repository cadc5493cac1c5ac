//! RFC 2889 switching procedures against an external L2 device (`linerate bench external
//! --switching ...`): a Linux bridge, a Linerate daemon bridging, Open vSwitch, a switch on a
//! NIC.
//!
//! An L2 device's DUT.yaml needs only its ports: the tester emulates hosts with MACs of its own,
//! asks nothing by ARP, and counts every frame per tester port ([`TrialResult::port_rx`]).
//! Tester port 0 is the learning port, port 1 the test port, every further port a monitor that
//! only sees what the device floods:
//!
//! - flooding: frames from port 1 to addresses nobody ever sent from must reach every other
//!   port, each of them every frame (and nothing comes back out of port 1);
//! - learning capacity (RFC 2889 5.7): port 0 sends one frame from each of `n` source addresses,
//!   then port 1 one frame to each of them; they pass when every test frame reached port 0 and
//!   no port got a flooded copy. The largest passing `n` up to `--macs` is searched to one
//!   address;
//! - learning rate (RFC 2889 5.8): the same step with a fixed address count, searching the
//!   learning frames' rate; the rate reported is what the tester achieved in the best passing
//!   step, marked when the tester could not keep the schedule;
//! - NDR: known unicast between the ports' hosts (port k to port k + 1), learned by priming
//!   trials first; the RFC 2544 search for the highest load with zero loss.
//!
//! Before each capacity and rate step (and before flooding) `--flush CMD` runs, a shell command
//! that empties the device's table (`ip link set br0 type bridge fdb_flush`, `ovs-appctl
//! fdb/flush br0`, `linerate clear mac address-table`). Without it, the capacity steps follow
//! each other on the table the last one left (which gives the same answer on a device that
//! keeps the first addresses it learns and ages slowly), and the rate cannot be measured.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dataplane::port::af_packet::AfPacketPort;
use dataplane::port::RxQueue;
use dataplane::{BufCache, Pool};
use serde::Serialize;

use crate::engine::{TesterPort, TrialResult};
use crate::external::{self, ControlStats, Dut, ExternalMeter, PortMap, Responder};
use crate::load::{line_rate_fps, FrameSizes};
use crate::procedures::{self, Observer, SearchOpts};
use crate::report::{thousands, Check};
use crate::stream::{Field, FieldKind, StreamSpec, L3};
use crate::Tester;

/// The procedures `--switching` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Procedure {
    Flooding,
    Capacity,
    Rate,
    Ndr,
}

impl std::str::FromStr for Procedure {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "flooding" => Ok(Procedure::Flooding),
            "capacity" => Ok(Procedure::Capacity),
            "rate" => Ok(Procedure::Rate),
            "ndr" => Ok(Procedure::Ndr),
            _ => Err(format!("`{s}`: flooding, capacity, rate or ndr")),
        }
    }
}

/// The host the tester emulates behind tester port `k` (known unicast, NDR).
pub fn host_mac(k: usize) -> [u8; 6] {
    [2, 0x4c, 0x48, 0, (k >> 8) as u8, k as u8 + 1]
}
/// The first learning address; address `i` is this plus `i` (as a 48-bit number).
pub const LEARN_BASE: [u8; 6] = [2, 0x4c, 0x10, 0, 0, 0];
/// The first address flooded to: never a source, so never learned.
pub const FLOOD_BASE: [u8; 6] = [2, 0x4c, 0xf1, 0, 0, 0];

fn l2_stream(name: &str, from: usize, to: usize, src: [u8; 6], dst: [u8; 6]) -> StreamSpec {
    StreamSpec {
        name: name.into(),
        tx_port: from,
        rx_port: to,
        src_mac: src,
        dst_mac: dst,
        vlan: None,
        l3: L3::V4 {
            src: [198, 18, from as u8, 2],
            dst: [198, 18, to as u8, 2],
        },
        udp: Some((1024, 5000)),
        ttl: 64,
        dscp: 0,
        fields: vec![],
        weight: 1.0,
        min_size: 0,
        also_rx: Vec::new(),
        multicast_mac: false,
        tunnel: None,
        mpls: None,
    }
}

/// The learning step's streams for `n` addresses: stream 0 from port 0 with `n` source
/// addresses to port 1's host, stream 1 from port 1's host to each of them.
pub fn learning_streams(n: u32) -> (Vec<StreamSpec>, Vec<usize>, Vec<usize>) {
    let mut learn = l2_stream("learning", 0, 1, LEARN_BASE, host_mac(1));
    learn.fields = Field::each_address(FieldKind::SrcMac, n);
    let mut test = l2_stream("test", 1, 0, host_mac(1), LEARN_BASE);
    test.fields = Field::each_address(FieldKind::DstMac, n);
    (vec![learn, test], vec![0], vec![1])
}

/// Frames from port 1 to `n` addresses nobody sent from (expected at port 0, and flooded).
pub fn flooding_streams(n: u32) -> Vec<StreamSpec> {
    let mut s = l2_stream("flooding", 1, 0, host_mac(1), FLOOD_BASE);
    s.fields = Field::each_address(FieldKind::DstMac, n);
    vec![s]
}

/// Known unicast: port k's host to port k + 1's (the last to port 0), every port sending.
pub fn unicast_streams(nports: usize) -> Vec<StreamSpec> {
    (0..nports)
        .map(|k| {
            let to = (k + 1) % nports;
            l2_stream(&format!("{k}->{to}"), k, to, host_mac(k), host_mac(to))
        })
        .collect()
}

pub struct SwitchingRun {
    pub dut_path: PathBuf,
    pub dut: Dut,
    pub maps: Vec<PortMap>,
    /// Nominal speed of every port, bits/s (what loads are fractions of).
    pub speed: f64,
    pub size: FrameSizes,
    pub procedures: Vec<Procedure>,
    /// The capacity search's upper bound.
    pub macs: u32,
    /// Addresses per learning-rate step.
    pub rate_macs: u32,
    /// Addresses flooded to.
    pub flood_macs: u32,
    /// Per-port rate of the capacity's and flooding's frames, frames/s.
    pub learn_fps: f64,
    /// Shell command that empties the device's table.
    pub flush: Option<String>,
    pub core: Option<usize>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FloodingResult {
    pub addresses: u32,
    pub ingress_port: String,
    pub sent: u64,
    /// The trial's frames received per tester port (name, frames).
    pub port_rx: Vec<(String, u64)>,
    /// Frames of no stream of the trial (the device's own, late ones), all ports.
    pub other_frames: u64,
    pub tester_limited: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct CapacityResult {
    pub max: u32,
    /// The capacity the check asks for, if any.
    pub target: Option<u32>,
    pub addresses: u32,
    pub learn_fps: f64,
    pub flushed: bool,
    /// Each step: (addresses, passed, test frames received at the learning port, flooded
    /// copies at the other ports).
    pub steps: Vec<CapacityStep>,
    pub tester_limited: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct CapacityStep {
    pub addresses: u32,
    pub pass: bool,
    pub test_sent: u64,
    pub test_received: u64,
    pub flooded: u64,
    pub tester_limited: bool,
    /// The device's own drops in the step's two trials, by reason (embedded mode: read from
    /// the router; an external device's are unknown).
    pub device_drops: Vec<(&'static str, u64)>,
    /// Learning frames lost (never at the test port): addresses the device was not offered
    /// whole. Of them, `learn_refused` its receive queues refused (embedded mode, full rings).
    pub learn_lost: u64,
    pub learn_refused: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct RateStep {
    pub offered_fps: f64,
    pub achieved_fps: f64,
    /// The test trial's frames lost and flooded (addresses not learned).
    pub test_lost: u64,
    pub test_flooded: u64,
    pub pass: bool,
    pub tester_limited: bool,
    /// As [`CapacityStep`]'s.
    pub device_drops: Vec<(&'static str, u64)>,
    pub learn_lost: u64,
    pub learn_refused: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct RateResult {
    pub addresses: u32,
    /// The best passing step's offered rate (frames/s); 0 if none passed.
    pub offered_fps: f64,
    /// What the tester sent in that step, frames/s (the learning rate measured).
    pub achieved_fps: f64,
    pub tester_limited: bool,
    pub steps: Vec<RateStep>,
}

#[derive(Clone, Debug, Serialize)]
pub struct NdrResult {
    pub size: String,
    /// Frames/s received, all ports, at the highest zero-loss load.
    pub fps: f64,
    pub load: f64,
    pub lost: u64,
    pub flooded: u64,
    pub tester_limited: bool,
    pub latency_avg_us: Option<f64>,
    /// Each trial: (offered fps, sent fps, received fps, lost, passed).
    pub trials: Vec<(f64, f64, f64, u64, bool)>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SwitchingReport {
    pub dut: String,
    /// The device is the embedded router (mem ports, one process), not an external one.
    pub embedded: bool,
    pub ports: Vec<(String, String)>,
    pub speed_bps: f64,
    pub cpu: String,
    pub tester_core: Option<usize>,
    pub flush: Option<String>,
    pub flooding: Option<FloodingResult>,
    pub capacity: Option<CapacityResult>,
    pub rate: Option<RateResult>,
    pub ndr: Option<NdrResult>,
    pub checks: Vec<Check>,
}

impl SwitchingReport {
    pub fn passed(&self) -> bool {
        !self.checks.is_empty() && self.checks.iter().all(|c| c.pass)
    }
}

/// Opens a tester port per `--port`: AF_PACKET, a responder in front that takes ARP and ND out
/// of the received frames (it emulates nothing: an L2 device is asked nothing).
pub(crate) fn open_l2_ports(
    dut: &Dut,
    maps: &[PortMap],
    speed: f64,
) -> Result<(Vec<TesterPort>, Vec<Arc<AfPacketPort>>), String> {
    let mut tports = Vec::new();
    let mut afs = Vec::new();
    for (k, m) in maps.iter().enumerate() {
        if !dut.cfg.ports.iter().any(|p| p.name == m.dut_port) {
            return Err(format!(
                "--port {}={}: DUT.yaml has no port `{}`",
                m.dut_port, m.device, m.dut_port
            ));
        }
        if maps[..k].iter().any(|x| x.dut_port == m.dut_port) {
            return Err(format!("--port: port `{}` given twice", m.dut_port));
        }
        let port = Arc::new(AfPacketPort::open(&m.device, &external::af_config())?);
        let stats = Arc::new(ControlStats::default());
        let rx: Vec<Box<dyn RxQueue>> = port
            .take_rx_queues()
            .into_iter()
            .map(|q| {
                Ok(Box::new(Responder::new(
                    q,
                    port.tx_queue()?,
                    Vec::new(),
                    stats.clone(),
                )) as Box<dyn RxQueue>)
            })
            .collect::<Result<_, String>>()?;
        tports.push(TesterPort {
            name: m.dut_port.clone(),
            speed_bps: speed,
            tx: vec![port.tx_queue()?],
            rx,
            load_scale: 1.0,
            wire: crate::atm::Wire::Ethernet,
            refusal: crate::engine::Refusal::NeverSent,
        });
        afs.push(port);
    }
    Ok((tports, afs))
}

/// The trial's own frames port `i` received (what the device flooded or forwarded there).
fn own_frames(r: &TrialResult, i: usize) -> u64 {
    r.port_rx
        .get(i)
        .copied()
        .unwrap_or(0)
        .saturating_sub(r.port_other.get(i).copied().unwrap_or(0))
}

/// The device's drops in two trials (a learning trial and its test trial), by reason.
fn drops_of(a: &TrialResult, b: &TrialResult) -> Vec<(&'static str, u64)> {
    crate::report::sum_drops(a.dut_drops.iter().chain(&b.dut_drops))
}

/// The text of [`drops_of`]'s list ("-" for none).
fn drops_text(d: &[(&'static str, u64)]) -> String {
    if d.is_empty() {
        return "-".into();
    }
    crate::report::drops_list(d).join(", ")
}

/// The tester sent well under the rate it was asked for (its rings or its core set the pace).
fn short(r: &TrialResult) -> bool {
    r.offered_fps > 0.0 && r.tx_fps < 0.98 * r.offered_fps
}

/// The rate a fixed-count trial's frames went out at: from its first burst to its last (the
/// trial's start and drain are not the device's time).
fn sent_fps(r: &TrialResult) -> f64 {
    if r.tx > 1 && r.tx_span_s > 0.0 {
        (r.tx - 1) as f64 / r.tx_span_s
    } else {
        r.tx_fps
    }
}

fn flush(cmd: &Option<String>) -> Result<(), String> {
    let Some(c) = cmd else { return Ok(()) };
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(c)
        .output()
        .map_err(|e| format!("--flush {c:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "--flush {c:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    // The device applies it; give it a moment before the next frames.
    std::thread::sleep(Duration::from_millis(50));
    Ok(())
}

/// Passes trials on and keeps the learning-rate steps' learning trials.
struct Recorder<'a> {
    inner: &'a mut dyn Observer,
    last_learning: Option<TrialResult>,
    steps: Vec<RateStep>,
    offered_per_load: f64,
}

impl Observer for Recorder<'_> {
    fn note(&mut self, line: &str) {
        self.inner.note(line);
    }
    fn progress(&mut self, what: &str, p: &crate::engine::Progress) {
        self.inner.progress(what, p);
    }
    fn trial(&mut self, what: &str, r: &TrialResult, pass: bool) {
        self.inner.trial(what, r, pass);
        if what == "learning frames" {
            self.last_learning = Some(r.clone());
        } else if let Some(l) = self.last_learning.take() {
            self.steps.push(RateStep {
                offered_fps: l.load * self.offered_per_load,
                achieved_fps: sent_fps(&l),
                test_lost: r.lost,
                test_flooded: r.misdelivered,
                pass,
                tester_limited: l.tester_limited
                    || r.tester_limited
                    || sent_fps(&l) < 0.98 * l.load * self.offered_per_load,
                device_drops: drops_of(&l, r),
                learn_lost: l.lost,
                learn_refused: l.refused,
            });
        }
    }
}

/// Runs the procedures in the order given.
pub fn run(
    x: SwitchingRun,
    ro: &crate::run::RunOpts,
    obs: &mut dyn Observer,
) -> Result<SwitchingReport, String> {
    if x.maps.len() < 3 && x.procedures.iter().any(|p| *p != Procedure::Ndr) {
        return Err(
            "--switching flooding, capacity and rate need three ports at least: a learning \
             port, a test port and a monitor that sees what is flooded"
                .into(),
        );
    }
    if x.maps.len() < 2 {
        return Err("--switching: two ports at least".into());
    }
    if x.procedures.contains(&Procedure::Rate) && x.flush.is_none() {
        return Err(
            "--switching rate needs --flush CMD: each step starts from a device that has \
             forgotten the addresses"
                .into(),
        );
    }
    let nports = x.maps.len();
    let pool = Pool::new(8192);
    let (mut tports, afs) = open_l2_ports(&x.dut, &x.maps, x.speed)?;
    let tester_core = x
        .core
        .and_then(|c| core_affinity::set_for_current(core_affinity::CoreId { id: c }).then_some(c));
    if let (Some(c), None) = (x.core, tester_core) {
        return Err(format!("--core {c}: could not pin the tester thread there"));
    }
    let mut cache = BufCache::new(pool.clone());
    external::service(&mut tports, &mut cache, Duration::from_millis(50));
    cache.flush();
    drop(cache);
    let mut tester = Tester::new(tports, unicast_streams(nports), pool);
    tester.validate(&x.size)?;
    tester.meter = Some(Box::new(ExternalMeter::new(
        afs.into_iter()
            .map(crate::external::Link::AfPacket)
            .collect(),
        None,
        tester_core,
    )));
    let line = line_rate_fps(x.speed, x.size.mean());
    let mut rep = SwitchingReport {
        dut: x.dut_path.display().to_string(),
        embedded: false,
        ports: x
            .maps
            .iter()
            .map(|m| (m.dut_port.clone(), m.device.clone()))
            .collect(),
        speed_bps: x.speed,
        cpu: crate::run::cpu_model(),
        tester_core,
        flush: x.flush.clone(),
        flooding: None,
        capacity: None,
        rate: None,
        ndr: None,
        checks: Vec::new(),
    };
    let plan = Plan {
        procedures: x.procedures.clone(),
        size: x.size.clone(),
        macs: x.macs,
        rate_macs: x.rate_macs,
        flood_macs: x.flood_macs,
        learn_fps: x.learn_fps,
        target_capacity: None,
    };
    let fl = x.flush.clone();
    run_procedures(
        &mut tester,
        &plan,
        line,
        &mut || flush(&fl),
        ro,
        obs,
        &mut rep,
    )?;
    Ok(rep)
}

/// What the procedures need to know, wherever the device is.
#[derive(Clone, Debug)]
pub struct Plan {
    pub procedures: Vec<Procedure>,
    pub size: FrameSizes,
    /// The capacity search's upper bound.
    pub macs: u32,
    /// Addresses per learning-rate step.
    pub rate_macs: u32,
    /// Addresses flooded to.
    pub flood_macs: u32,
    /// Per-port rate of the capacity's and flooding's frames, frames/s.
    pub learn_fps: f64,
    /// A capacity the device must reach for the check to pass (else any is reported).
    pub target_capacity: Option<u32>,
}

/// Runs `x`'s procedures in the order given with `tester`, whose ports are the learning port,
/// the test port and the monitors; `flush` empties the device's table; `line` is a port's
/// nominal rate in frames/s. Fills `rep`'s results and checks.
pub fn run_procedures(
    tester: &mut Tester,
    x: &Plan,
    line: f64,
    flush: &mut dyn FnMut() -> Result<(), String>,
    ro: &crate::run::RunOpts,
    obs: &mut dyn Observer,
    rep: &mut SwitchingReport,
) -> Result<(), String> {
    let names: Vec<String> = rep.ports.iter().map(|p| p.0.clone()).collect();
    let nports = names.len();
    let learn_load = (x.learn_fps / line).min(1.0);
    for p in &x.procedures {
        match p {
            Procedure::Flooding => {
                flush()?;
                tester.set_streams(flooding_streams(x.flood_macs));
                let mut o = ro.trial.clone();
                o.seconds = f64::from(x.flood_macs) / x.learn_fps * 1.5 + 0.5;
                let mut s = o.spec(learn_load, &x.size);
                s.frames_per_port = Some(u64::from(x.flood_macs));
                let r = tester.trial(&mut s, &mut |p| obs.progress("flooding", p));
                obs.trial("flooding", &r, true);
                rep.flooding = Some(FloodingResult {
                    addresses: x.flood_macs,
                    ingress_port: names[1].clone(),
                    sent: r.tx,
                    port_rx: names
                        .iter()
                        .enumerate()
                        .map(|(i, n)| (n.clone(), own_frames(&r, i)))
                        .collect(),
                    other_frames: r.port_other.iter().sum(),
                    tester_limited: r.tester_limited || short(&r),
                });
            }
            Procedure::Capacity => {
                let mut steps = Vec::new();
                let mut err = None;
                let found = procedures::capacity_search(x.macs, &mut |n| {
                    if err.is_some() {
                        return false;
                    }
                    if let Err(e) = flush() {
                        err = Some(e);
                        return false;
                    }
                    let (specs, learn, test) = learning_streams(n);
                    tester.set_streams(specs);
                    let mut o = ro.trial.clone();
                    o.seconds = f64::from(n) / x.learn_fps * 1.5 + 0.5;
                    let mut ls = o.spec(learn_load, &x.size);
                    ls.active = Some(learn);
                    ls.frames_per_port = Some(u64::from(n));
                    let mut ts = o.spec(learn_load, &x.size);
                    ts.active = Some(test);
                    ts.frames_per_port = Some(u64::from(n));
                    let label = format!("{} addresses", thousands(f64::from(n)));
                    let (lr, tr, ok) = procedures::learn_then_test(
                        tester,
                        ls,
                        ts,
                        "address learning",
                        &label,
                        obs,
                    );
                    steps.push(CapacityStep {
                        addresses: n,
                        pass: ok,
                        test_sent: tr.tx,
                        test_received: tr.rx,
                        flooded: tr.misdelivered,
                        tester_limited: lr.tester_limited || tr.tester_limited,
                        device_drops: drops_of(&lr, &tr),
                        learn_lost: lr.lost,
                        learn_refused: lr.refused,
                    });
                    ok
                });
                if let Some(e) = err {
                    return Err(e);
                }
                // The answer is the tester's if a failed step at or just above it was one the
                // tester could not keep to schedule.
                let tester_limited = steps
                    .iter()
                    .any(|s| !s.pass && s.addresses > found && s.tester_limited);
                rep.capacity = Some(CapacityResult {
                    max: x.macs,
                    target: x.target_capacity,
                    addresses: found,
                    learn_fps: x.learn_fps,
                    flushed: rep.flush.is_some(),
                    steps,
                    tester_limited,
                });
            }
            Procedure::Rate => {
                let mut o = ro.trial.clone();
                o.seconds = f64::from(x.rate_macs) / x.learn_fps * 1.5 + 0.5;
                let mut rec = Recorder {
                    inner: obs,
                    last_learning: None,
                    steps: Vec::new(),
                    offered_per_load: line,
                };
                let mut err = None;
                let (load, _) = procedures::address_learning_rate(
                    tester,
                    &x.size,
                    &o,
                    x.rate_macs,
                    learn_load,
                    ro.resolution,
                    &learning_streams,
                    &mut || {
                        if let Err(e) = flush() {
                            err.get_or_insert(e);
                        }
                    },
                    &mut rec,
                );
                if let Some(e) = err {
                    return Err(e);
                }
                let best = rec
                    .steps
                    .iter()
                    .filter(|s| s.pass)
                    .max_by(|a, b| a.offered_fps.total_cmp(&b.offered_fps))
                    .cloned();
                // Tester-bound: the best pass itself was off schedule, or a failed step above
                // it was (the device may have learned at a rate the tester did not offer).
                let tester_limited = best.as_ref().is_some_and(|b| b.tester_limited)
                    || rec.steps.iter().any(|s| {
                        !s.pass
                            && s.tester_limited
                            && s.offered_fps > best.as_ref().map_or(0.0, |b| b.offered_fps)
                    });
                rep.rate = Some(RateResult {
                    addresses: x.rate_macs,
                    offered_fps: load * line,
                    achieved_fps: best.as_ref().map_or(0.0, |b| b.achieved_fps),
                    tester_limited,
                    steps: rec.steps,
                });
            }
            Procedure::Ndr => {
                // A table the capacity search left full (at a limit) would flood the hosts.
                flush()?;
                tester.set_streams(unicast_streams(nports));
                // The device learns every host from the priming trials' frames (the first
                // ones are flooded).
                external::prime(tester, &x.size, 1000.0, 0.5, 5, None);
                let search = SearchOpts {
                    resolution: ro.resolution,
                    loss_tolerance: 0.0,
                    relative: true,
                    ..Default::default()
                };
                let mut r = procedures::throughput(tester, &x.size, &ro.trial, &search, obs);
                r.tester_limited = external::tester_bound(&r);
                let best = r.best.clone().unwrap_or_default();
                rep.ndr = Some(NdrResult {
                    size: x.size.to_string(),
                    fps: r.fps(),
                    load: r.load,
                    lost: best.lost,
                    flooded: best.misdelivered,
                    tester_limited: r.tester_limited,
                    latency_avg_us: best.latency.as_ref().map(|l| l.avg_ns / 1e3),
                    trials: r
                        .trials
                        .iter()
                        .map(|(_, ok, t)| (t.offered_fps, t.tx_fps, t.rx_fps, t.lost, *ok))
                        .collect(),
                });
            }
        }
    }
    rep.checks = checks(rep);
    Ok(())
}

/// The procedures against the embedded router's bridge (a scenario: `crate::scenario`),
/// whose tester ports are `ports` (name, bit/s): learning port, test port, monitors. Its table
/// is emptied by `clear mac address-table`.
pub fn run_embedded(
    tester: &mut Tester,
    core: &Arc<control::mgmt::Core>,
    plan: &Plan,
    ports: &[(String, f64)],
    ro: &crate::run::RunOpts,
    obs: &mut dyn Observer,
) -> SwitchingReport {
    let speed = ports.first().map_or(1e9, |p| p.1);
    let mut rep = SwitchingReport {
        dut: "the embedded router".into(),
        embedded: true,
        ports: ports.iter().map(|p| (p.0.clone(), "mem".into())).collect(),
        speed_bps: speed,
        cpu: crate::run::cpu_model(),
        tester_core: None,
        flush: Some("clear mac address-table".into()),
        flooding: None,
        capacity: None,
        rate: None,
        ndr: None,
        checks: Vec::new(),
    };
    let line = line_rate_fps(speed, plan.size.mean());
    let mut clear = || {
        core.mac_clear(&api::requests::MacQuery::default())
            .map(|_| ())
            .map_err(|e| format!("clear mac address-table: {e:?}"))
    };
    if let Err(e) = run_procedures(tester, plan, line, &mut clear, ro, obs, &mut rep) {
        rep.checks.push(Check {
            name: "the procedures ran".into(),
            expected: "every procedure run to its end".into(),
            measured: e,
            pass: false,
        });
    }
    rep
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn checks(r: &SwitchingReport) -> Vec<Check> {
    let mut c = Vec::new();
    if let Some(f) = &r.flooding {
        for (name, rx) in &f.port_rx {
            if *name == f.ingress_port {
                c.push(Check {
                    name: format!("flooding: nothing back out of {name} (the ingress)"),
                    expected: "0".into(),
                    measured: thousands(*rx as f64),
                    pass: *rx == 0,
                });
            } else {
                c.push(Check {
                    name: format!("flooding: {name} gets every frame to an unknown address"),
                    expected: thousands(f64::from(f.addresses)),
                    measured: thousands(*rx as f64),
                    pass: *rx == u64::from(f.addresses) && f.sent == u64::from(f.addresses),
                });
            }
        }
    }
    if let Some(k) = &r.capacity {
        let target = k.target.unwrap_or(1);
        c.push(Check {
            name: "learning capacity (RFC 2889 5.7)".into(),
            expected: match k.target {
                Some(t) => format!(
                    "at least {} addresses learned with nothing flooded",
                    thousands(f64::from(t))
                ),
                None => format!(
                    "an address count in 1..={} learned with nothing flooded",
                    thousands(f64::from(k.max))
                ),
            },
            measured: if k.addresses == k.max {
                format!("{} (the bound searched)", thousands(f64::from(k.addresses)))
            } else {
                thousands(f64::from(k.addresses))
            },
            pass: k.addresses >= target,
        });
    }
    if let Some(k) = &r.rate {
        c.push(Check {
            name: "learning rate (RFC 2889 5.8)".into(),
            expected: format!(
                "a rate at which {} addresses are all learned",
                thousands(f64::from(k.addresses))
            ),
            measured: format!(
                "{} fps (offered {}), tester-limited: {}",
                thousands(k.achieved_fps),
                thousands(k.offered_fps),
                yes(k.tester_limited)
            ),
            pass: k.achieved_fps > 0.0,
        });
    }
    if let Some(n) = &r.ndr {
        c.push(Check {
            name: format!("NDR {} known unicast", n.size),
            expected: "a load carried with zero loss, nothing flooded".into(),
            measured: format!(
                "{} fps, {} lost, {} flooded, tester-limited: {}",
                thousands(n.fps),
                n.lost,
                n.flooded,
                yes(n.tester_limited)
            ),
            pass: n.fps > 0.0 && n.lost == 0 && n.flooded == 0,
        });
    }
    c
}

/// The report's table (.md).
pub fn table(r: &SwitchingReport) -> String {
    let mut s = format!(
        "# Switching (RFC 2889) against {}\n\nPorts: {}. Nominal speed {} bit/s per port; CPU: {}; tester core: {}; table flush: {}.\n\n",
        r.dut,
        r.ports
            .iter()
            .map(|(p, d)| format!("{p}={d}"))
            .collect::<Vec<_>>()
            .join(", "),
        thousands(r.speed_bps),
        r.cpu,
        r.tester_core.map_or("not pinned".into(), |c| c.to_string()),
        r.flush.as_deref().unwrap_or("(none)")
    );
    s += "| procedure | result | tester-limited | scale |\n|---|---:|---|---|\n";
    if let Some(f) = &r.flooding {
        let others: Vec<String> = f
            .port_rx
            .iter()
            .map(|(n, x)| format!("{n} {}", thousands(*x as f64)))
            .collect();
        s += &format!(
            "| flooding (unknown unicast from {}) | {} | {} | {} addresses |\n",
            f.ingress_port,
            others.join(", "),
            yes(f.tester_limited),
            thousands(f64::from(f.addresses))
        );
    }
    if let Some(k) = &r.capacity {
        s += &format!(
            "| learning capacity | {} addresses | {} | searched up to {} at {} fps, {} steps |\n",
            thousands(f64::from(k.addresses)),
            yes(k.tester_limited),
            thousands(f64::from(k.max)),
            thousands(k.learn_fps),
            k.steps.len()
        );
    }
    if let Some(k) = &r.rate {
        s += &format!(
            "| learning rate | {} fps (offered {}) | {} | {} addresses, {} steps |\n",
            thousands(k.achieved_fps),
            thousands(k.offered_fps),
            yes(k.tester_limited),
            thousands(f64::from(k.addresses)),
            k.steps.len()
        );
    }
    if let Some(n) = &r.ndr {
        s += &format!(
            "| NDR {} known unicast | {} fps | {} | {} ports, every port sending |\n",
            n.size,
            thousands(n.fps),
            yes(n.tester_limited),
            r.ports.len()
        );
    }
    if let Some(k) = &r.capacity {
        s += "\nCapacity steps:\n\n| addresses | learning frames lost (refused) | test sent | at the learning port | flooded copies | tester-limited | device drops | pass |\n|---:|---:|---:|---:|---:|---|---|---|\n";
        for st in &k.steps {
            s += &format!(
                "| {} | {} ({}) | {} | {} | {} | {} | {} | {} |\n",
                thousands(f64::from(st.addresses)),
                thousands(st.learn_lost as f64),
                thousands(st.learn_refused as f64),
                thousands(st.test_sent as f64),
                thousands(st.test_received as f64),
                thousands(st.flooded as f64),
                yes(st.tester_limited),
                drops_text(&st.device_drops),
                yes(st.pass)
            );
        }
    }
    if let Some(k) = &r.rate {
        s += "\nLearning-rate steps:\n\n| offered fps | sent fps | learning frames lost (refused) | test lost | test flooded | tester-limited | device drops | pass |\n|---:|---:|---:|---:|---:|---|---|---|\n";
        for st in &k.steps {
            s += &format!(
                "| {} | {} | {} ({}) | {} | {} | {} | {} | {} |\n",
                thousands(st.offered_fps),
                thousands(st.achieved_fps),
                thousands(st.learn_lost as f64),
                thousands(st.learn_refused as f64),
                st.test_lost,
                st.test_flooded,
                yes(st.tester_limited),
                drops_text(&st.device_drops),
                yes(st.pass)
            );
        }
    }
    if let Some(n) = &r.ndr {
        s += "\nNDR trials:\n\n| offered fps | sent fps | received fps | lost | pass |\n|---:|---:|---:|---:|---|\n";
        for t in &n.trials {
            s += &format!(
                "| {} | {} | {} | {} | {} |\n",
                thousands(t.0),
                thousands(t.1),
                thousands(t.2),
                t.3,
                yes(t.4)
            );
        }
    }
    s += if r.embedded {
        "\nThe embedded router's bridge, on mem ports; its table is emptied between steps with \
         `clear mac address-table`. Loss is frames sent minus frames received; a flooded copy is \
         a frame received at a port it was not addressed to.\n"
    } else {
        "\nNo DUT probe: an external device's drops are unknown, so loss is frames sent minus \
         frames received; a flooded copy is a frame received at a port it was not addressed to.\n"
    };
    s += "\nChecks:\n\n| check | expected | measured | pass |\n|---|---|---|---|\n";
    for c in &r.checks {
        s += &format!(
            "| {} | {} | {} | {} |\n",
            c.name,
            c.expected,
            c.measured,
            if c.pass { "pass" } else { "FAIL" }
        );
    }
    s += &format!("\nVerdict: {}\n", if r.passed() { "pass" } else { "fail" });
    s
}

/// The JSON: `verdict`, `checks`, and each procedure's figures.
pub fn json(r: &SwitchingReport) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        m.insert(
            "verdict".into(),
            (if r.passed() { "pass" } else { "fail" }).into(),
        );
        m.insert("mode".into(), "external-switching".into());
    }
    v
}

/// The chart: the capacity search's steps (addresses tried, passed or failed); without a
/// capacity search, frames received per tester port in the flooding trial; else the NDR trials.
pub fn svg(r: &SwitchingReport) -> String {
    if let Some(k) = &r.capacity {
        let cats: Vec<String> = (1..=k.steps.len()).map(|i| format!("step {i}")).collect();
        let pick = |pass: bool| crate::chart::Series {
            name: format!(
                "addresses tried, {}",
                if pass { "all learned" } else { "some flooded" }
            ),
            values: k
                .steps
                .iter()
                .map(|s| (s.pass == pass).then_some(f64::from(s.addresses)))
                .collect(),
        };
        return crate::chart::svg(
            &format!("{}: RFC 2889 address learning capacity search", r.dut),
            "step",
            "addresses",
            &cats,
            &[pick(true), pick(false)],
            false,
        );
    }
    if let Some(f) = &r.flooding {
        let names: Vec<String> = f.port_rx.iter().map(|p| p.0.clone()).collect();
        let series = [crate::chart::Series {
            name: format!(
                "frames received ({} sent from {} to unknown addresses)",
                thousands(f.sent as f64),
                f.ingress_port
            ),
            values: f.port_rx.iter().map(|x| Some(x.1 as f64)).collect(),
        }];
        return crate::chart::svg(
            &format!("{}: flooding, frames received per tester port", r.dut),
            "tester port",
            "frames",
            &names,
            &series,
            false,
        );
    }
    let trials = r.ndr.as_ref().map_or(&[][..], |n| &n.trials[..]);
    let cats: Vec<String> = (1..=trials.len()).map(|i| format!("trial {i}")).collect();
    let series = [
        crate::chart::Series {
            name: "offered fps".into(),
            values: trials.iter().map(|t| Some(t.0)).collect(),
        },
        crate::chart::Series {
            name: "received fps".into(),
            values: trials.iter().map(|t| Some(t.2)).collect(),
        },
    ];
    crate::chart::svg(
        &format!("{}: switching trials", r.dut),
        "trial",
        "frames/s",
        &cats,
        &series,
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn procedures_parse() {
        assert_eq!("rate".parse::<Procedure>(), Ok(Procedure::Rate));
        assert!("speed".parse::<Procedure>().is_err());
    }

    #[test]
    fn learning_and_flooding_addresses_never_meet() {
        let (s, learn, test) = learning_streams(1000);
        assert_eq!((learn, test), (vec![0], vec![1]));
        assert_eq!(s[0].dst_mac, s[1].src_mac);
        assert_ne!(FLOOD_BASE[..3], LEARN_BASE[..3]);
        let u = unicast_streams(3);
        assert_eq!(
            u.iter().map(|s| (s.tx_port, s.rx_port)).collect::<Vec<_>>(),
            vec![(0, 1), (1, 2), (2, 0)]
        );
    }
}
