//! Failover under traffic, the loss over the offered rate being the failover time, as the seeds
//! derived it: ME-10's Flexlink pair and ME-5's pseudowires on a protected LSP.
//!
//! Ports: the access port sends; the primary and the backup both receive, and a test frame
//! counts as received at either (`Tester::accept_also`). The trial:
//! 1. ME-10 only: the access host announces itself (one frame), then the primary's side sends
//!    one frame from each address, which the router learns behind the pair (the backup is
//!    standby). ME-5: the pseudowires must be up on the LSP's primary;
//! 2. one trial of test frames from the access port (to every address; down every pseudowire)
//!    at the seed's rate;
//! 3. `cut_at` seconds in, the primary's cable is cut: the tester loses whatever the router
//!    sends there from then on (`Tester::cables`), and the router is told its link went down
//!    (on mem ports, the API's `port link-down`, on a thread of its own as a link monitor
//!    would). Frames sent minus frames received at either port, over the offered rate, is the
//!    failover time.
//!
//! In this embedded form detection is the API call, so the figure is the wait for that call's
//! thread to get a core plus the switchover (the report gives both apart); with the kernel's
//! detection (a link monitor seeing a veth's far end go down) the system tests measure it
//! (`test_a_flexlink_fails_over_when_the_primarys_cable_is_pulled`).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use control::mgmt::Core;
use serde::Serialize;

use crate::engine::Tester;
use crate::load::FrameSizes;
use crate::procedures::{Observer, TrialOpts};
use crate::report::{thousands, Check};

#[derive(Clone, Debug)]
pub struct FailoverPlan {
    /// Tester ports: the sender, the primary's and the backup's.
    pub access: usize,
    pub primary: usize,
    pub backup: usize,
    /// The router's port under the primary (its link goes down).
    pub primary_port: String,
    pub protected: Protected,
    /// The test frames' rate, frames/s (the seed's), and the port's nominal rate.
    pub fps: f64,
    pub line_fps: f64,
    /// When the cable is cut, seconds into the test trial.
    pub cut_at: f64,
    /// The seed's failover time, ms.
    pub seed_ms: f64,
}

/// What the pair protects.
#[derive(Clone, Debug)]
pub enum Protected {
    /// ME-10: a bridge domain's Flexlink pair with `addresses` learned behind it (streams:
    /// [`LEARN`], [`TEST`]).
    Flexlink { bridge: String, addresses: u32 },
    /// ME-5: `pseudowires` on LSP `lsp`, whose primary goes through the cut port (stream 0:
    /// the CEs' frames down every pseudowire).
    Lsp { lsp: String, pseudowires: u32 },
}

impl Protected {
    fn test_stream(&self) -> usize {
        match self {
            Protected::Flexlink { .. } => TEST,
            Protected::Lsp { .. } => 0,
        }
    }

    /// The members behind the pair: addresses, or pseudowires.
    fn members(&self) -> u32 {
        match self {
            Protected::Flexlink { addresses, .. } => *addresses,
            Protected::Lsp { pseudowires, .. } => *pseudowires,
        }
    }

    fn switchover_msgid(&self) -> &'static str {
        match self {
            Protected::Flexlink { .. } => "FLEXLINK_SWITCHOVER",
            Protected::Lsp { .. } => "LSP_SWITCHOVER",
        }
    }
}

/// Streams of a Flexlink plan: 0 the learning frames (from the primary's side), 1 the test
/// frames.
pub const LEARN: usize = 0;
pub const TEST: usize = 1;

#[derive(Clone, Debug, Default, Serialize)]
pub struct FailoverReport {
    /// `flexlink` or `lsp`.
    pub protected: String,
    /// Addresses behind the pair, or pseudowires on the LSP.
    pub members: u64,
    /// Of those, learned behind the primary, or up on it, before the cut.
    pub ready: u64,
    pub fps: f64,
    pub seconds: f64,
    pub cut_at_s: f64,
    pub tx: u64,
    pub rx_primary: u64,
    pub rx_backup: u64,
    pub lost: u64,
    /// Frames the router sent to the primary after its cable was cut.
    pub lost_on_the_cut_cable: u64,
    pub duplicated: u64,
    pub misdelivered: u64,
    pub corrupted: u64,
    /// (tx - rx) / offered rate.
    pub failover_ms: f64,
    /// How long after the cut the link-down call started (its thread's wake-up: the embedded
    /// stand-in for detection).
    pub link_down_started_ms: f64,
    /// How long the link-down call took (the switchover's publish included).
    pub link_down_call_ms: f64,
    /// The bridge's unknown-unicast (flooded) test frames during the trial (Flexlink).
    pub flooded: u64,
    pub switchover_logged: bool,
    pub attempts: u32,
    pub tester_limited: bool,
    pub seed_ms: f64,
    pub checks: Vec<Check>,
}

impl FailoverReport {
    pub fn passed(&self) -> bool {
        !self.checks.is_empty() && self.checks.iter().all(|c| c.pass)
    }
}

/// Tries of a trial the tester could not keep to schedule.
const ATTEMPTS: u32 = 3;

fn unknown_unicast(core: &Core, bridge: &str) -> (u64, u64) {
    core.bridges()
        .iter()
        .find(|b| b.name == bridge)
        .map_or((0, 0), |b| (b.macs, b.unknown_unicast))
}

/// Whether the pair's primary is the standby (blocked) member.
fn primary_standby(core: &Core, bridge: &str, primary: &str) -> bool {
    core.bridges()
        .iter()
        .filter(|b| b.name == bridge)
        .flat_map(|b| &b.members)
        .any(|m| m.interface == primary && m.blocked)
}

/// Pseudowires on `lsp` that are up on its primary.
fn up_on_primary(core: &Core, lsp: &str) -> u64 {
    core.l2vpn_view()
        .pseudowires
        .iter()
        .filter(|p| p.lsp == lsp && p.lsp_path == "primary" && p.state == "up")
        .count() as u64
}

pub fn run_failover(
    t: &mut Tester,
    core: &Arc<Core>,
    p: &FailoverPlan,
    sz: &FrameSizes,
    trial: &TrialOpts,
    obs: &mut dyn Observer,
) -> FailoverReport {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mut rep = one_try(t, core, p, sz, trial, obs);
        rep.attempts = attempts;
        if !rep.tester_limited || attempts == ATTEMPTS {
            rep.checks = checks(p, &rep);
            return rep;
        }
    }
}

fn one_try(
    t: &mut Tester,
    core: &Arc<Core>,
    p: &FailoverPlan,
    sz: &FrameSizes,
    trial: &TrialOpts,
    obs: &mut dyn Observer,
) -> FailoverReport {
    let test = p.protected.test_stream();
    // From a clean state: the primary's link up and active (a try before may have cut it; the
    // scenario's pair preempts at once; an LSP goes back at once).
    let _ = core.port_link(&p.primary_port, true);
    let deadline = Instant::now() + Duration::from_secs(3);
    let settled = || match &p.protected {
        Protected::Flexlink { bridge, .. } => !primary_standby(core, bridge, &p.primary_port),
        Protected::Lsp { lsp, pseudowires } => up_on_primary(core, lsp) >= u64::from(*pseudowires),
    };
    while !settled() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    t.accept_also(test, p.backup);
    let load = (p.fps / p.line_fps).min(1.0);
    let (ready, flooded_before) = match &p.protected {
        Protected::Flexlink { bridge, addresses } => {
            let _ = core.mac_clear(&api::requests::MacQuery::default());
            let mut o = trial.clone();
            o.seconds = o.seconds.max(f64::from(*addresses) / p.fps * 1.5 + 0.5);
            let mut hello = o.spec(0.001, sz);
            hello.active = Some(vec![TEST]);
            hello.frames_per_port = Some(1);
            t.trial(&mut hello, &mut |_| {});
            let mut ls = o.spec(load, sz);
            ls.active = Some(vec![LEARN]);
            ls.frames_per_port = Some(u64::from(*addresses));
            let label = format!(
                "learning {} addresses behind the primary",
                thousands(f64::from(*addresses))
            );
            let learn = t.trial(&mut ls, &mut |x| obs.progress(&label, x));
            obs.trial(&label, &learn, true);
            unknown_unicast(core, bridge)
        }
        Protected::Lsp { lsp, .. } => (up_on_primary(core, lsp), 0),
    };
    let seq0 = core.logging(1).last().map_or(0, |r| r.seq);

    // The test trial, with the cut.
    let cables = t.cables();
    // The link-down call: its thread, and once it ran, how long after the cut it started and
    // how long it took (ms).
    type Call = (std::thread::JoinHandle<()>, Arc<Mutex<(f64, f64)>>);
    let call: Arc<Mutex<Option<Call>>> = Default::default();
    let mut ts = trial.spec(load, sz);
    ts.active = Some(vec![test]);
    let cut_at = p.cut_at.min(ts.seconds * 0.5);
    {
        let (core, port, bit) = (core.clone(), p.primary_port.clone(), p.primary);
        let (cables, call) = (cables.clone(), call.clone());
        ts.events.push((
            cut_at,
            Box::new(move || {
                cables.fetch_or(1 << bit, Ordering::Relaxed);
                // The link monitor's part, on its own thread, so the tester never stops.
                let (core, port) = (core.clone(), port.clone());
                let ms: Arc<Mutex<(f64, f64)>> = Arc::new(Mutex::new((f64::NAN, f64::NAN)));
                let took = ms.clone();
                let cut = Instant::now();
                let h = std::thread::spawn(move || {
                    let t0 = Instant::now();
                    let _ = core.port_link(&port, false);
                    *took.lock().unwrap_or_else(|e| e.into_inner()) = (
                        t0.duration_since(cut).as_secs_f64() * 1e3,
                        t0.elapsed().as_secs_f64() * 1e3,
                    );
                });
                *call.lock().unwrap_or_else(|e| e.into_inner()) = Some((h, ms));
            }),
        ));
    }
    let label = format!(
        "{} fps to {} {}, the primary cut at {cut_at:.2} s",
        thousands(p.fps),
        thousands(f64::from(p.protected.members())),
        match p.protected {
            Protected::Flexlink { .. } => "addresses",
            Protected::Lsp { .. } => "pseudowires",
        }
    );
    let r = t.trial(&mut ts, &mut |x| obs.progress(&label, x));
    let (mut link_down_started_ms, mut link_down_call_ms) = (f64::NAN, f64::NAN);
    if let Some((h, ms)) = call.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let _ = h.join();
        (link_down_started_ms, link_down_call_ms) = *ms.lock().unwrap_or_else(|e| e.into_inner());
    }
    cables.fetch_and(!(1 << p.primary), Ordering::Relaxed);
    let flooded_after = match &p.protected {
        Protected::Flexlink { bridge, .. } => unknown_unicast(core, bridge).1,
        Protected::Lsp { .. } => 0,
    };
    // A Flexlink switchover is logged by the bridge thread, within a second; an LSP's by the
    // link change itself.
    let msgid = p.protected.switchover_msgid();
    let deadline = Instant::now() + Duration::from_secs(3);
    let switchover_logged = loop {
        let logged = core
            .logging(200)
            .iter()
            .any(|x| x.seq > seq0 && x.msgid == msgid);
        if logged || Instant::now() >= deadline {
            break logged;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let s = &r.streams[0];
    let lost = s.tx.saturating_sub(s.rx);
    obs.trial(&label, &r, true);
    FailoverReport {
        protected: match p.protected {
            Protected::Flexlink { .. } => "flexlink",
            Protected::Lsp { .. } => "lsp",
        }
        .into(),
        members: u64::from(p.protected.members()),
        ready,
        fps: p.fps,
        seconds: r.seconds,
        cut_at_s: cut_at,
        tx: s.tx,
        rx_primary: r.port_rx.get(p.primary).copied().unwrap_or(0),
        rx_backup: r.port_rx.get(p.backup).copied().unwrap_or(0),
        lost,
        lost_on_the_cut_cable: r.cable_cut,
        duplicated: s.duplicated,
        misdelivered: s.misdelivered,
        corrupted: s.corrupted,
        failover_ms: lost as f64 / p.fps * 1e3,
        link_down_started_ms,
        link_down_call_ms,
        flooded: flooded_after.saturating_sub(flooded_before),
        switchover_logged,
        attempts: 1,
        // The learning trial's pace does not matter (every address must be learned, which is
        // checked); the test trial's does: the loss is turned into time at the offered rate.
        tester_limited: r.tester_limited,
        seed_ms: p.seed_ms,
        checks: Vec::new(),
    }
}

fn checks(p: &FailoverPlan, r: &FailoverReport) -> Vec<Check> {
    let n = r.members;
    let mut c = vec![match &p.protected {
        Protected::Flexlink { .. } => Check {
            name: "addresses learned behind the primary".into(),
            expected: format!("at least {}", thousands(n as f64)),
            measured: thousands(r.ready as f64),
            pass: r.ready >= n,
        },
        Protected::Lsp { lsp, .. } => Check {
            name: format!("pseudowires up on LSP {lsp}'s primary before the cut"),
            expected: thousands(n as f64),
            measured: thousands(r.ready as f64),
            pass: r.ready == n,
        },
    }];
    c.extend([
        Check {
            name: "traffic on the primary before the cut, on the backup after".into(),
            expected: "frames at both".into(),
            measured: format!(
                "{} at the primary, {} at the backup",
                thousands(r.rx_primary as f64),
                thousands(r.rx_backup as f64)
            ),
            pass: r.rx_primary > 0 && r.rx_backup > 0,
        },
        Check {
            name: "failover time (frames lost / offered rate)".into(),
            expected: format!("under the seed's {} ms", p.seed_ms),
            measured: format!(
                "{:.3} ms ({} lost of {} sent at {} fps)",
                r.failover_ms,
                thousands(r.lost as f64),
                thousands(r.tx as f64),
                thousands(r.fps)
            ),
            pass: r.tx > 0 && r.failover_ms < p.seed_ms,
        },
        Check {
            name: "no frame duplicated, corrupted or at a third port".into(),
            expected: "0, 0, 0".into(),
            measured: format!("{}, {}, {}", r.duplicated, r.corrupted, r.misdelivered),
            pass: r.duplicated == 0 && r.corrupted == 0 && r.misdelivered == 0,
        },
        Check {
            name: "the switchover logged".into(),
            expected: format!("a {} record", p.protected.switchover_msgid()),
            measured: if r.switchover_logged {
                "logged"
            } else {
                "none"
            }
            .into(),
            pass: r.switchover_logged,
        },
        Check {
            name: "the tester kept its schedule".into(),
            expected: format!("trials on schedule (in {ATTEMPTS} tries)"),
            measured: format!(
                "try {}: {}",
                r.attempts,
                if r.tester_limited {
                    "limited"
                } else {
                    "on schedule"
                }
            ),
            pass: !r.tester_limited,
        },
    ]);
    if let Protected::Flexlink { .. } = p.protected {
        c.push(Check {
            name: "nothing flooded: every address moved with the pair".into(),
            expected: "0 test frames flooded as unknown unicast".into(),
            measured: thousands(r.flooded as f64),
            pass: r.flooded == 0,
        });
    }
    c
}

/// The report's table, the seed's figures beside ours.
pub fn table(r: &FailoverReport) -> String {
    if r.protected == "lsp" {
        return format!(
            "Pseudowire failover ({} pseudowires on the LSP's primary, cut at {:.2} s of a {:.2} s trial):\n\n\
             | | Linerate | seed (Cisco ME 6524) |\n|---|---:|---:|\n\
             | Configured pseudowires | {} | 100 |\n\
             | Tx frames | {} | |\n\
             | Rx frames on the primary | {} | |\n\
             | Rx frames on the backup | {} | |\n\
             | Difference (frame loss) | {} | |\n\
             | of which sent to the cut cable | {} | |\n\
             | Tx rate (fps) | {} | 100,000 |\n\
             | Convergence time, primary to backup (ms) | {:.3} | {} |\n\
             | link-down call started after the cut (ms) | {:.3} | |\n\
             | link-down call, switchover included (ms) | {:.3} | |\n\n",
            thousands(r.ready as f64),
            r.cut_at_s,
            r.seconds,
            thousands(r.members as f64),
            thousands(r.tx as f64),
            thousands(r.rx_primary as f64),
            thousands(r.rx_backup as f64),
            thousands(r.lost as f64),
            thousands(r.lost_on_the_cut_cable as f64),
            thousands(r.fps),
            r.failover_ms,
            r.seed_ms,
            r.link_down_started_ms,
            r.link_down_call_ms,
        );
    }
    format!(
        "Flexlink failover ({} addresses behind the primary, cut at {:.2} s of a {:.2} s trial):\n\n\
         | | Linerate | seed (Cisco ME 6524) |\n|---|---:|---:|\n\
         | Tx frames | {} | 3,674,061 |\n\
         | Rx frames at the primary | {} | |\n\
         | Rx frames at the backup | {} | |\n\
         | Sum of Rx frames | {} | 3,614,811 |\n\
         | Difference (frame loss) | {} | 59,250 |\n\
         | of which sent to the cut cable | {} | |\n\
         | Tx rate (fps) | {} | 176,190 |\n\
         | Failover time (ms) | {:.3} | {} |\n\
         | link-down call started after the cut (ms) | {:.3} | |\n\
         | link-down call, switchover included (ms) | {:.3} | |\n\
         | test frames flooded | {} | |\n\n",
        thousands(r.members as f64),
        r.cut_at_s,
        r.seconds,
        thousands(r.tx as f64),
        thousands(r.rx_primary as f64),
        thousands(r.rx_backup as f64),
        thousands((r.rx_primary + r.rx_backup) as f64),
        thousands(r.lost as f64),
        thousands(r.lost_on_the_cut_cable as f64),
        thousands(r.fps),
        r.failover_ms,
        r.seed_ms,
        r.link_down_started_ms,
        r.link_down_call_ms,
        thousands(r.flooded as f64),
    )
}

/// The chart: failover time, ours beside the seed's.
pub fn svg(id: &str, r: &FailoverReport) -> String {
    crate::chart::svg(
        &format!(
            "{id}: {} failover time (frames lost / offered rate)",
            if r.protected == "lsp" {
                "pseudowire"
            } else {
                "Flexlink"
            }
        ),
        "",
        "milliseconds",
        &["failover time".to_string()],
        &[
            crate::chart::Series {
                name: "Linerate".into(),
                values: vec![Some(r.failover_ms)],
            },
            crate::chart::Series {
                name: "Cisco ME 6524 (seed)".into(),
                values: vec![Some(r.seed_ms)],
            },
        ],
        false,
    )
}
