//! ME-15, hot swap: one trial at a fixed load during which parts of the router are changed the
//! way an operator would, through the management core (the same calls the API makes): a port
//! taken out of service and put back, a worker added and the first worker removed (its receive
//! queues move to the others under traffic), and the config reloaded with a change. Each change
//! must leave a syslog record, and no stream that does not use the removed port may lose a frame.
//!
//! The changes run on threads of their own, so the tester's own loop never stops sending or
//! receiving while a change is made.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use control::mgmt::Core;
use serde::Serialize;

use crate::engine::{Tester, TrialResult};
use crate::load::FrameSizes;
use crate::procedures::{Observer, TrialOpts};

/// One change made during the trial.
#[derive(Clone, Debug, Serialize)]
pub struct Change {
    pub what: String,
    /// Seconds into the trial it was started.
    pub at_s: f64,
    /// How long the change took, milliseconds.
    pub took_ms: f64,
    pub error: Option<String>,
    /// The syslog message id it must produce, and whether one was found.
    pub msgid: &'static str,
    pub logged: bool,
}

/// Frames of a group of streams.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Tally {
    pub streams: usize,
    pub tx: u64,
    pub rx: u64,
    pub lost: u64,
    pub max_latency_us: f64,
}

#[derive(Clone, Debug)]
pub struct HotSwapReport {
    pub trial: TrialResult,
    pub changes: Vec<Change>,
    pub port: String,
    /// Streams that neither enter nor leave through the removed port: must lose nothing.
    pub others: Tally,
    /// Streams through the removed port (they lose frames while it is out).
    pub involved: Tally,
    /// The syslog records produced during the trial, as RFC 5424 would carry their text.
    pub syslog: Vec<String>,
}

impl HotSwapReport {
    pub fn passed(&self) -> bool {
        self.others.lost == 0
            && self.trial.error.is_none()
            && self.changes.iter().all(|c| c.error.is_none() && c.logged)
    }
}

/// A change as it finished: what, its syslog id, started at (s), took (ms), error.
type Done = (String, &'static str, f64, f64, Option<String>);

type Op = Box<dyn FnOnce(&Arc<Core>) -> Result<(), String> + Send>;

/// Runs the trial; `reload` is a changed config (text, path) to apply as the reload.
#[allow(clippy::too_many_arguments)]
pub fn hot_swap(
    t: &mut Tester,
    core: Arc<Core>,
    sizes: &FrameSizes,
    trial: &TrialOpts,
    load: f64,
    port: &str,
    reload: (String, PathBuf),
    obs: &mut dyn Observer,
) -> HotSwapReport {
    let port_idx = t.ports.iter().position(|p| p.name == port);
    let first_worker = core.workers().first().map(|w| (w.id, w.core));
    let seq0 = core.logging(1).last().map_or(0, |r| r.seq);
    let p1 = port.to_string();
    let p2 = port.to_string();
    let plan: Vec<(f64, String, &'static str, Op)> = vec![
        (
            0.15,
            format!("port {port} removed"),
            "PORT_REMOVED",
            Box::new(move |c: &Arc<Core>| c.port_remove(&p1).map_err(|e| e.to_string())),
        ),
        (
            0.30,
            format!("port {port} put back"),
            "PORT_INSERTED",
            Box::new(move |c: &Arc<Core>| c.port_insert(&p2).map_err(|e| e.to_string())),
        ),
        (
            0.45,
            "worker added".to_string(),
            "WORKER_ADDED",
            // On the first worker's core: a machine with a core per thread would give it its
            // own, and this one has no spare.
            Box::new(move |c: &Arc<Core>| {
                c.worker_add(first_worker.and_then(|w| w.1))
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }),
        ),
        (
            0.60,
            format!(
                "worker {} removed (its queues move)",
                first_worker.map_or(0, |w| w.0)
            ),
            "WORKER_REMOVED",
            Box::new(move |c: &Arc<Core>| {
                c.worker_remove(first_worker.map_or(0, |w| w.0))
                    .map_err(|e| e.to_string())
            }),
        ),
        (
            0.75,
            "config reloaded with a change".to_string(),
            "CONFIG_COMMIT",
            Box::new(move |c: &Arc<Core>| {
                c.apply(&reload.0, &reload.1, Default::default())
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }),
        ),
    ];
    let log: Arc<Mutex<Vec<Done>>> = Arc::new(Mutex::new(Vec::new()));
    let threads: Arc<Mutex<Vec<std::thread::JoinHandle<()>>>> = Arc::new(Mutex::new(Vec::new()));
    let mut spec = trial.spec(load, sizes);
    let t0 = Arc::new(Mutex::new(None::<Instant>));
    let secs = spec.seconds;
    {
        // Mark the trial's start with the first event at 0 s.
        let t0 = t0.clone();
        spec.events.push((
            0.0,
            Box::new(move || {
                *t0.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
            }),
        ));
    }
    for (frac, what, msgid, op) in plan {
        let core = core.clone();
        let log = log.clone();
        let threads = threads.clone();
        let t0 = t0.clone();
        let mut op = Some(op);
        spec.events.push((
            frac * secs,
            Box::new(move || {
                let Some(op) = op.take() else { return };
                let core = core.clone();
                let log = log.clone();
                let what = what.clone();
                let started = t0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .map_or(0.0, |t| t.elapsed().as_secs_f64());
                let h = std::thread::spawn(move || {
                    let c0 = Instant::now();
                    let r = op(&core);
                    let took = c0.elapsed().as_secs_f64() * 1e3;
                    log.lock().unwrap_or_else(|e| e.into_inner()).push((
                        what,
                        msgid,
                        started,
                        took,
                        r.err(),
                    ));
                });
                threads.lock().unwrap_or_else(|e| e.into_inner()).push(h);
            }),
        ));
    }
    let label = format!("{sizes} hot swap");
    let r = t.trial(&mut spec, &mut |p| obs.progress(&label, p));
    for h in std::mem::take(&mut *threads.lock().unwrap_or_else(|e| e.into_inner())) {
        let _ = h.join();
    }
    let records: Vec<_> = core
        .logging(1000)
        .into_iter()
        .filter(|x| x.seq > seq0)
        .collect();
    let changes = log
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(what, msgid, at, took, err)| Change {
            what: what.clone(),
            at_s: *at,
            took_ms: *took,
            error: err.clone(),
            msgid,
            logged: records.iter().any(|x| x.msgid == *msgid),
        })
        .collect();
    let mut others = Tally::default();
    let mut involved = Tally::default();
    for (i, sr) in r.streams.iter().enumerate() {
        let st = &t.streams[i];
        let through = port_idx.is_some_and(|p| st.tx_port == p || st.rx_port == p);
        let g = if through { &mut involved } else { &mut others };
        g.streams += 1;
        g.tx += sr.tx;
        g.rx += sr.rx;
        g.lost += sr.lost;
        if let Some(l) = &sr.latency {
            g.max_latency_us = g.max_latency_us.max(l.max_ns as f64 / 1e3);
        }
    }
    // The pass mark is the other streams' loss: the removed port's own streams lose by design.
    obs.trial(&label, &r, others.lost == 0);
    HotSwapReport {
        trial: r,
        changes,
        port: port.to_string(),
        others,
        involved,
        syslog: records
            .iter()
            .map(|x| format!("{} {}: {}", x.severity, x.msgid, x.text))
            .collect(),
    }
}
