//! Control-plane load against forwarding (the failure reported against another software router
//! as vpp#3616): a trial at a load the router passed, while a management client reads through
//! the API at a fixed rate (shows of interfaces, counters, errors, routes, workers, and metrics
//! scrapes) and changes routes. Forwarding must lose nothing.
//!
//! The client talks to the router's real API socket, as an NMS would. It runs on a thread of its
//! own at a lower CPU priority, standing for a machine of its own.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::engine::{Tester, TrialResult};
use crate::load::FrameSizes;
use crate::procedures::{Observer, TrialOpts};

#[derive(Clone, Debug, Default, Serialize)]
pub struct StormStats {
    /// Requests asked for per second.
    pub rate: f64,
    /// CPU priority of the client and the API server.
    pub nice: i32,
    pub reads: u64,
    pub route_changes: u64,
    pub errors: u64,
    pub seconds: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl StormStats {
    pub fn achieved(&self) -> f64 {
        (self.reads + self.route_changes) as f64 / self.seconds.max(1e-9)
    }
}

#[derive(Clone, Debug)]
pub struct StormReport {
    pub load: f64,
    pub trial: TrialResult,
    pub storm: StormStats,
}

const READS: &[&str] = &[
    "/v1/interfaces",
    "/v1/counters",
    "/v1/errors",
    "/v1/routes?family=ipv4&prefix=10.1.2.3",
    "/v1/workers",
    "/metrics",
    "/v1/ports",
    "/v1/system",
];

/// Sends `rate` requests per second until `stop`: one in ten changes a route (adds a blackhole
/// route in 198.18.0.0/15, RFC 2544's range that no test stream uses, or removes it again).
fn client(socket: PathBuf, rate: f64, nice: i32, stop: Arc<AtomicBool>) -> StormStats {
    api_server::lower_priority(nice);
    let mut st = StormStats {
        rate,
        nice,
        ..Default::default()
    };
    let Ok(c) = api::Client::new(api::Endpoint::Unix(socket)) else {
        st.errors += 1;
        return st;
    };
    let period = Duration::from_secs_f64(1.0 / rate);
    let t0 = Instant::now();
    let mut next = t0;
    let mut lat: Vec<f64> = Vec::new();
    let mut i = 0u64;
    let mut added: Vec<String> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(2)));
            continue;
        }
        next += period;
        // A client that fell far behind does not burst to catch up.
        if Instant::now() > next + Duration::from_millis(100) {
            next = Instant::now();
        }
        let c0 = Instant::now();
        let ok = if i % 10 == 9 {
            st.route_changes += 1;
            if added.len() < 64 {
                let p = format!("198.18.{}.0/24", (i / 10) % 256);
                let body = api::requests::RouteRequest {
                    prefix: p.clone(),
                    blackhole: true,
                    ..Default::default()
                };
                let r = c.post("/v1/routes", &body);
                if r.as_ref().is_ok_and(|r| r.ok()) {
                    added.push(p);
                }
                r.is_ok_and(|r| r.ok() || r.status == 409)
            } else {
                let p = added.remove(0);
                c.delete(
                    &api::requests::RouteDelete {
                        vrf: None,
                        prefix: p,
                    }
                    .path(),
                )
                .is_ok_and(|r| r.ok())
            }
        } else {
            st.reads += 1;
            c.get(READS[(i as usize) % READS.len()])
                .is_ok_and(|r| r.ok())
        };
        lat.push(c0.elapsed().as_secs_f64() * 1e3);
        if !ok {
            st.errors += 1;
        }
        i += 1;
    }
    for p in added {
        let _ = c.delete(&format!("/v1/routes?prefix={}", p.replace('/', "%2F")));
    }
    st.seconds = t0.elapsed().as_secs_f64();
    lat.sort_by(f64::total_cmp);
    let q = |f: f64| {
        lat.get(((lat.len() as f64 * f) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    st.p50_ms = q(0.5);
    st.p99_ms = q(0.99);
    st.max_ms = lat.last().copied().unwrap_or(0.0);
    st
}

/// One trial at `load` with the management client running against `socket` at `rate`.
#[allow(clippy::too_many_arguments)]
pub fn storm_trial(
    t: &mut Tester,
    sizes: &FrameSizes,
    trial: &TrialOpts,
    load: f64,
    socket: PathBuf,
    rate: f64,
    nice: i32,
    obs: &mut dyn Observer,
) -> StormReport {
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let h = std::thread::Builder::new()
        .name("mgmt-storm".into())
        .spawn(move || client(socket, rate, nice, s2))
        .expect("spawn the storm client");
    let mut spec = trial.spec(load, sizes);
    let label = format!("{sizes} with {rate:.0} API requests/s");
    let r = t.trial(&mut spec, &mut |p| obs.progress(&label, p));
    stop.store(true, Ordering::Relaxed);
    let storm = h.join().unwrap_or_default();
    obs.trial(&label, &r, r.lost == 0);
    StormReport {
        load,
        trial: r,
        storm,
    }
}
