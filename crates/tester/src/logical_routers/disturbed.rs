//! XR-2A and XR-2B: LR1's streams at a fixed load, once quiet and once while something is done
//! to an LR, with the same checks: LR1 loses nothing, its p99 latency stays within 10% of the
//! quiet trial's, and each action is done inside the disturbed trial.
//!
//! - XR-2B (module exchange) acts on LR2, the non-owner: its process stopped and started, an
//!   unused port, a worker and all its ports out and back.
//! - XR-2A (process restart) acts on LR1 itself: its router process replaced by a new one that
//!   takes over its tables and ports (a hitless restart), then upgraded to another binary the
//!   same way. The seed restarted the owner LR's routing processes under XR-6 traffic; FRR's
//!   graceful restart is tested on real ports (tests/system/test_real_ports.py) and joins this
//!   scenario once each LR runs its own FRR.
//!
//! Reads: the supervisor's view of the LRs, the LRs' logs (how long frames waited in their rings
//! during a hand-over). Writes: the LRs' work folder under the reports' folder.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use control::lr::supervisor::Supervisor;

use super::LrScenario;
use super::{chassis, cpu_note, first_trial, half_throughput, lr_notes, merged, mesh_streams};
use super::{run_streams, with_lrs};
use crate::external;
use crate::run::{RunOpts, ScenarioReport};

/// An observer that raises a flag at the first progress of a trial (the disturbed trial has
/// started), passing everything on.
pub(super) struct FlagOnProgress<'a> {
    pub inner: &'a mut dyn crate::procedures::Observer,
    pub started: Arc<AtomicBool>,
}

impl crate::procedures::Observer for FlagOnProgress<'_> {
    fn progress(&mut self, what: &str, p: &crate::engine::Progress) {
        self.started.store(true, Ordering::Release);
        self.inner.progress(what, p);
    }
    fn trial(&mut self, what: &str, r: &crate::engine::TrialResult, pass: bool) {
        self.inner.trial(what, r, pass);
    }
    fn note(&mut self, line: &str) {
        self.inner.note(line);
    }
}

/// One action of a disturbed trial: what, when (s after the trial started), how it went.
type Action = (String, f64, Result<String, String>);

/// Does one action (named by the first argument), timing and recording it.
type Act<'a> = dyn FnMut(&str, &mut dyn FnMut() -> Result<String, String>) + 'a;

/// What a disturbed trial does and how its report names it.
struct Disturbance {
    id: &'static str,
    /// What the seed calls the test.
    name: &'static str,
    /// The LRs' work folder.
    dir: &'static str,
    /// The disturbed trial's row key and the checks' wording ("while ...").
    key: &'static str,
    during: &'static str,
    /// What the title says is done, after LR1's load.
    doing: &'static str,
    seed_title: &'static str,
    /// Runs the actions once the trial has started (the flag), one after the other.
    act: fn(&Arc<Supervisor>, &Path, &mut Act<'_>),
}

/// Waits for `started`, then runs `d.act`, timing each action from the trial's start.
fn disturb(
    d: &Disturbance,
    sup: &Arc<Supervisor>,
    work: &Path,
    started: &AtomicBool,
) -> Vec<Action> {
    let t_wait = Instant::now();
    while !started.load(Ordering::Acquire) {
        if t_wait.elapsed() > Duration::from_secs(120) {
            return vec![("the trial to start".into(), 0.0, Err("it never did".into()))];
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let t0 = Instant::now();
    let mut out: Vec<Action> = Vec::new();
    std::thread::sleep(Duration::from_millis(500));
    (d.act)(sup, work, &mut |what, f| {
        let r = f();
        out.push((what.to_string(), t0.elapsed().as_secs_f64(), r));
    });
    out
}

/// XR-2B's actions on the non-owner LR (LR2): its process stopped and started again (its
/// control plane with it), an unused port out of service and back, a worker added and removed,
/// every port out and back.
fn exchange_modules(sup: &Arc<Supervisor>, _work: &Path, act: &mut Act<'_>) {
    let api = |sock: &Path| api::Client::new(api::Endpoint::Unix(sock.to_path_buf()));
    act("LR2's process (its control plane) stopped", &mut || {
        let v = sup.stop("lr2").map_err(|e| e.message)?;
        (v.state == "stopped")
            .then(|| format!("state {}", v.state))
            .ok_or(format!("state {}", v.state))
    });
    act("LR2's process started again", &mut || {
        let v = sup.start_lr("lr2").map_err(|e| e.message)?;
        (v.state == "running")
            .then(|| format!("running in {} ms", v.start_ms.unwrap_or(0)))
            .ok_or(format!("state {}", v.state))
    });
    let sock = match sup.get("lr2") {
        Ok(v) => PathBuf::from(v.socket),
        Err(e) => {
            act("LR2's API", &mut || Err(e.message.clone()));
            return;
        }
    };
    let post =
        |path: &str| -> Result<(), String> { api(&sock)?.post(path, &())?.checked().map(|_| ()) };
    act("LR2: port p3 out of service and back", &mut || {
        post("/v1/ports/p3/remove")?;
        post("/v1/ports/p3/insert")?;
        Ok("removed, inserted".into())
    });
    act("LR2: a worker added and removed", &mut || {
        let c = api(&sock)?;
        let w: api::views::WorkerAdded =
            c.call("/v1/workers", &api::requests::WorkerRequest { core: None })?;
        c.delete(&format!("/v1/workers/{}", w.worker))?.checked()?;
        Ok(format!("worker {} added, removed", w.worker))
    });
    act("LR2: every port out of service and back", &mut || {
        for p in ["p3", "p4"] {
            post(&format!("/v1/ports/{p}/remove"))?;
        }
        for p in ["p3", "p4"] {
            post(&format!("/v1/ports/{p}/insert"))?;
        }
        Ok("p3, p4 removed, inserted".into())
    });
}

/// The last hand-over's wait in LR `name`'s log: how long frames waited in their rings.
fn last_wait_us(work: &Path, name: &str) -> Option<u64> {
    let log = std::fs::read_to_string(work.join("run").join(format!("{name}.log"))).ok()?;
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("frames waited in their rings"))?;
    let after = line.split("frames waited in their rings ").nth(1)?;
    after.split(' ').next()?.parse().ok()
}

/// XR-2A's actions on LR1 itself: its process replaced by a new one that takes over (a hitless
/// restart), then the same onto another binary (a hitless upgrade).
fn replace_process(sup: &Arc<Supervisor>, work: &Path, act: &mut Act<'_>) {
    let mut step = |what: &str, binary: Option<PathBuf>| {
        act(what, &mut || {
            let old = sup.get("lr1").map_err(|e| e.message)?.pid;
            let v = match &binary {
                None => sup.restart("lr1", false),
                Some(b) => sup.upgrade("lr1", b, false),
            }
            .map_err(|e| e.message)?;
            if v.pid == old || v.state != "running" {
                return Err(format!("pid {:?}, state {}", v.pid, v.state));
            }
            Ok(format!(
                "pid {} -> {}, frames waited {} us in their rings",
                old.unwrap_or(0),
                v.pid.unwrap_or(0),
                last_wait_us(work, "lr1").map_or("?".into(), |u| u.to_string())
            ))
        })
    };
    step(
        "LR1's process replaced by a new one (hitless restart)",
        None,
    );
    // A copy stands for a new build.
    let copy = work.join("linerate-upgrade");
    let made = std::env::current_exe()
        .and_then(|exe| std::fs::copy(exe, &copy))
        .map_err(|e| format!("copying the binary: {e}"));
    match made {
        Ok(_) => step("LR1 upgraded to another binary (hitless)", Some(copy)),
        Err(e) => act("LR1 upgraded to another binary (hitless)", &mut || {
            Err(e.clone())
        }),
    }
}

static XR2A: Disturbance = Disturbance {
    id: "XR-2A",
    name: "process restart",
    dir: "xr-2a-lrs",
    key: "LR1 replaced",
    during: "while its own process is replaced",
    doing: "while its own process is replaced by a new one, then upgraded, each taking over without a restart",
    seed_title: "Cisco XR 12000, XR-2A: the owner LR's routing processes restarted under XR-6 traffic: zero loss, no latency increase, no route lost",
    act: replace_process,
};

static XR2B: Disturbance = Disturbance {
    id: "XR-2B",
    name: "module exchange",
    dir: "xr-2b-lrs",
    key: "LR2 disturbed",
    during: "while LR2 is disturbed",
    doing: "while LR2's process, a port, a worker and all its ports go and come back",
    seed_title: "Cisco XR 12000, XR-2B: active and standby RP of a non-owner LR stopped, an unused port, a line card and all ports of an LR removed and re-added: no loss or latency change on the other LRs",
    act: exchange_modules,
};

/// XR-2A, process restart under traffic: LR1 at half its throughput (or `--load`) while its
/// own process is replaced twice (restart, upgrade), each by hand-over: LR1 loses nothing.
pub fn xr2a(
    x: &LrScenario,
    ro: &RunOpts,
    obs: &mut dyn crate::procedures::Observer,
) -> Result<ScenarioReport, String> {
    lr1_under(&XR2A, x, ro, obs)
}

/// XR-2B, module exchange under traffic: LR1 at half its throughput (or `--load`) while LR2
/// goes and comes back: LR1 loses nothing and keeps its latency.
pub fn xr2b(
    x: &LrScenario,
    ro: &RunOpts,
    obs: &mut dyn crate::procedures::Observer,
) -> Result<ScenarioReport, String> {
    lr1_under(&XR2B, x, ro, obs)
}

fn lr1_under(
    d: &'static Disturbance,
    x: &LrScenario,
    ro: &RunOpts,
    obs: &mut dyn crate::procedures::Observer,
) -> Result<ScenarioReport, String> {
    if ro.trial.seconds < 5.0 {
        return Err(format!(
            "{}: --seconds 5 at least (its actions take a few seconds, all inside the trial)",
            d.id
        ));
    }
    with_lrs(x, d.dir, false, |sup, work, lr_cpus, _| {
        let started_lrs = sup.list();
        let (view_path, dut, maps) = chassis(work)?;
        // LR1's ports alone: its streams, inside it.
        let maps = maps[..2].to_vec();
        let infos = external::port_infos(&dut, &maps);
        let streams = mesh_streams(&infos, x.flows)?;
        let what = format!(
            "LR1's streams (p1, p2; IPv4 64 B, IPv6 78 B), {} flows per stream",
            x.flows
        );
        let run = |ro: &RunOpts, obs: &mut dyn crate::procedures::Observer| {
            run_streams(&view_path, &maps, &streams, what.clone(), ro, obs)
        };
        let (searched, load, fixed) = half_throughput(d.id, ro, || run(ro, obs))?;
        let quiet = run(&fixed, obs)?;
        let started = Arc::new(AtomicBool::new(false));
        let t = {
            let (sup, started, work) = (sup.clone(), started.clone(), work.to_path_buf());
            std::thread::spawn(move || disturb(d, &sup, &work, &started))
        };
        let disturbed = run(
            &fixed,
            &mut FlagOnProgress {
                inner: obs,
                started: started.clone(),
            },
        );
        // Whatever became of the trial, the actions end before the LRs are stopped for good.
        started.store(true, Ordering::Release);
        let actions = t.join().unwrap_or_default();
        let disturbed = disturbed?;
        let (q, dt) = (first_trial(&quiet), first_trial(&disturbed));
        let mut r = merged(searched, vec![(quiet, "quiet"), (disturbed, d.key)]);
        let p99 = |t: &Option<crate::engine::TrialResult>| {
            t.as_ref()
                .and_then(|t| t.latency.as_ref())
                .map(|l| l.p99_ns as f64 / 1000.0)
        };
        let lost = dt.as_ref().map(|t| (t.lost, t.tx));
        r.setup_checks.push(crate::report::Check {
            name: format!("LR1 loses nothing {}", d.during),
            expected: "0 frames lost".into(),
            measured: match lost {
                Some((l, tx)) => format!("{l} of {tx} lost at {:.2}% load", load * 100.0),
                None => "no trial".into(),
            },
            pass: lost.is_some_and(|(l, tx)| l == 0 && tx > 0),
        });
        let (pq, pd) = (p99(&q), p99(&dt));
        r.setup_checks.push(crate::report::Check {
            name: format!("LR1's p99 latency unchanged {}", d.during),
            expected: "within 10% of the quiet trial's".into(),
            measured: match (pq, pd) {
                (Some(a), Some(b)) => format!(
                    "{b:.1} us against {a:.1} us quiet ({:+.1}%)",
                    (b / a - 1.0) * 100.0
                ),
                _ => "no latency measured".into(),
            },
            pass: matches!((pq, pd), (Some(a), Some(b)) if b <= a * 1.10),
        });
        let secs = ro.trial.seconds;
        for (what, at, res) in &actions {
            r.setup_checks.push(crate::report::Check {
                name: what.clone(),
                expected: format!("done, inside the {secs} s trial"),
                measured: match res {
                    Ok(m) => format!("{m}, done {at:.2} s into it"),
                    Err(e) => format!("failed: {e}"),
                },
                pass: res.is_ok() && *at < secs,
            });
        }
        let after = sup.list();
        r.id = d.id.into();
        r.title = format!(
            "{}: LR1's streams at {:.2}% ({}) {}",
            d.name,
            load * 100.0,
            if ro.fixed_load.is_some() {
                "the load given"
            } else {
                "half their throughput"
            },
            d.doing
        );
        r.seed_title = d.seed_title.into();
        r.workers = x.workers * 2;
        r.port_names = vec!["p1".into(), "p2".into()];
        r.notes.insert(0, cpu_note(lr_cpus, x.workers));
        r.notes.extend(lr_notes(&started_lrs, &after));
        Ok(r)
    })
}
