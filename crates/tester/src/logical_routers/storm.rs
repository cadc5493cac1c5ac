//! XR-2C, a control-plane storm: every LR's streams at a fixed load (half the throughput the
//! search finds for them all, or `--load`), once quiet, once while LR1's control plane is
//! stormed (an SNMP walk loop of its IF-MIB through snmpd, and an API storm: threads asking
//! its API for interfaces, counters and ports as fast as it answers), then LR2 is switched off
//! and LR1's streams run alone. Checks: during the storm every LR loses nothing and its worst
//! stream's p99 stays within 10% of the quiet trial's; the storm ran (walks, requests, LR1's CPU
//! and snmpd's reported); with LR2 off, LR1 is unchanged by the same measures.
//!
//! The seed drove one LR's route processor to high CPU (a cyclic SNMP walk) while XR-6 ran on
//! all four LRs, then switched LR4 off: the others were unchanged. Here two LRs and static
//! routes: XR-6's BGP scale joins once each LR runs its own FRR.
//!
//! Reads: the supervisor's view (each LR's CPU and memory), snmpd's CPU. Writes: the LRs' work
//! folder with snmpd's config and log.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::disturbed::FlagOnProgress;
use super::snmpd::Snmpd;
use super::{chassis, cpu_note, first_trial, half_throughput, lr_notes, lr_of, merged};
use super::{mesh_streams, run_streams};
use super::{with_lrs, LrScenario};
use crate::engine::TrialResult;
use crate::external::{self, PortMap};
use crate::run::{RunOpts, ScenarioReport};
use crate::stream::StreamSpec;

/// Threads asking LR1's API at once.
const API_THREADS: usize = 2;

/// What the storm did, counted by its threads.
#[derive(Default)]
struct Storm {
    walks: AtomicU64,
    objects: AtomicU64,
    walk_errors: AtomicU64,
    requests: AtomicU64,
    request_errors: AtomicU64,
}

/// Storms LR1's control plane from the moment `started` is raised until `stop` is; returns
/// how long it stormed and what `cpu` (LR1's group's CPU seconds, snmpd's) moved meanwhile, as
/// shares of one CPU in percent.
/// The storm's own threads (and the snmpbulkwalk processes they start, which inherit it) run
/// on `on`, LR1's CPU: the storm loads LR1's CPU, not the other LRs'.
fn storm(
    snmpd: &Snmpd,
    sock: PathBuf,
    on: Option<usize>,
    started: &AtomicBool,
    stop: &AtomicBool,
    s: &Storm,
    cpu: &dyn Fn() -> (f64, f64),
) -> (f64, f64, f64) {
    let pin = || {
        if let Some(c) = on {
            core_affinity::set_for_current(core_affinity::CoreId { id: c });
        }
    };
    pin();
    while !started.load(Ordering::Acquire) && !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(2));
    }
    let (c0, t0) = (cpu(), Instant::now());
    std::thread::scope(|sc| {
        for _ in 0..API_THREADS {
            let sock = sock.clone();
            sc.spawn(move || {
                pin();
                let Ok(c) = api::Client::new(api::Endpoint::Unix(sock)) else {
                    s.request_errors.fetch_add(1, Ordering::Relaxed);
                    return;
                };
                let paths = ["/v1/interfaces", "/v1/counters", "/v1/ports"];
                let mut i = 0;
                while !stop.load(Ordering::Acquire) {
                    match c.get(paths[i % paths.len()]) {
                        Ok(_) => s.requests.fetch_add(1, Ordering::Relaxed),
                        Err(_) => s.request_errors.fetch_add(1, Ordering::Relaxed),
                    };
                    i += 1;
                }
            });
        }
        while !stop.load(Ordering::Acquire) {
            match snmpd.walk("lr1") {
                Ok(n) if n > 0 => {
                    s.walks.fetch_add(1, Ordering::Relaxed);
                    s.objects.fetch_add(n as u64, Ordering::Relaxed);
                }
                _ => {
                    s.walk_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
    let (c1, secs) = (cpu(), t0.elapsed().as_secs_f64().max(1e-3));
    (
        secs,
        (c1.0 - c0.0) / secs * 100.0,
        (c1.1 - c0.1) / secs * 100.0,
    )
}

/// Of a trial, the streams of `lr` (index into LRS): frames sent, lost (lost, duplicated,
/// misdelivered or corrupted), and the worst stream's p99 in us.
fn lr_result(t: &TrialResult, streams: &[StreamSpec], lr: usize) -> (u64, u64, Option<f64>) {
    let mut sent = 0;
    let mut bad = 0;
    let mut p99: Option<f64> = None;
    for st in &t.streams {
        let Some(spec) = streams.iter().find(|s| s.name == st.name) else {
            continue;
        };
        if lr_of(spec.tx_port) != lr {
            continue;
        }
        sent += st.tx;
        bad += st.lost + st.duplicated + st.misdelivered + st.corrupted;
        if let Some(l) = &st.latency {
            let v = l.p99_ns as f64 / 1000.0;
            p99 = Some(p99.map_or(v, |p: f64| p.max(v)));
        }
    }
    (sent, bad, p99)
}

/// XR-2C: see the module's doc.
pub fn xr2c(
    x: &LrScenario,
    ro: &RunOpts,
    obs: &mut dyn crate::procedures::Observer,
) -> Result<ScenarioReport, String> {
    with_lrs(x, "xr-2c-lrs", true, |sup, work, lr_cpus, snmpd| {
        let snmpd = snmpd.ok_or("XR-2C: no snmpd")?;
        let started_lrs = sup.list();
        // Both subagents registered before anything is measured.
        let t0 = Instant::now();
        while snmpd.walk("lr1").unwrap_or(0) == 0 || snmpd.walk("lr2").unwrap_or(0) == 0 {
            if t0.elapsed() > Duration::from_secs(15) {
                return Err("XR-2C: the LRs' IF-MIB did not appear in snmpd in 15 s".into());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let (view_path, dut, maps) = chassis(work)?;
        let infos = external::port_infos(&dut, &maps);
        // The streams inside each LR, all of them (8: four per LR).
        let streams: Vec<StreamSpec> = mesh_streams(&infos, x.flows)?
            .into_iter()
            .filter(|s| lr_of(s.tx_port) == lr_of(s.rx_port))
            .collect();
        let what = format!(
            "the streams inside each LR (IPv4 64 B, IPv6 78 B), {} flows per stream",
            x.flows
        );
        let run = |ro: &RunOpts,
                   maps: &[PortMap],
                   streams: &[StreamSpec],
                   obs: &mut dyn crate::procedures::Observer| {
            run_streams(&view_path, maps, streams, what.clone(), ro, obs)
        };
        let (searched, load, fixed) =
            half_throughput("XR-2C", ro, || run(ro, &maps, &streams, obs))?;
        let quiet = run(&fixed, &maps, &streams, obs)?;
        // The storm, from the trial's first progress to its end.
        let lr1_sock = PathBuf::from(sup.get("lr1").map_err(|e| e.message)?.socket);
        let counts = Storm::default();
        let started = Arc::new(AtomicBool::new(false));
        let stop = AtomicBool::new(false);
        let cpu = || {
            let lr1 = sup.get("lr1").map_or(0.0, |v| v.cpu_seconds);
            (lr1, snmpd.cpu_s())
        };
        // The storm and snmpd on LR1's CPU (its group's first).
        let lr1_cpu_id: Option<usize> = lr_cpus[0]
            .split([',', '-'])
            .next()
            .and_then(|c| c.parse().ok());
        let pinned = lr1_cpu_id.is_some_and(|c| snmpd.pin(c));
        let (stormed, (storm_s, lr1_cpu, snmpd_cpu)) = std::thread::scope(|sc| {
            let t = sc.spawn(|| {
                storm(
                    snmpd,
                    lr1_sock.clone(),
                    lr1_cpu_id,
                    &started,
                    &stop,
                    &counts,
                    &cpu,
                )
            });
            let r = run(
                &fixed,
                &maps,
                &streams,
                &mut FlagOnProgress {
                    inner: obs,
                    started: started.clone(),
                },
            );
            started.store(true, Ordering::Release);
            stop.store(true, Ordering::Release);
            (r, t.join().unwrap_or_default())
        });
        let stormed = stormed?;
        // LR2 switched off: LR1's streams alone.
        let lr1_maps = maps[..2].to_vec();
        let lr1_streams: Vec<StreamSpec> = streams
            .iter()
            .filter(|s| lr_of(s.tx_port) == 0)
            .cloned()
            .collect();
        let off = sup.stop("lr2").map_err(|e| e.message)?;
        let alone = run(&fixed, &lr1_maps, &lr1_streams, obs)?;
        let (tq, ts, ta) = (
            first_trial(&quiet),
            first_trial(&stormed),
            first_trial(&alone),
        );
        let mut r = merged(
            searched,
            vec![
                (quiet, "quiet"),
                (stormed, "LR1's control plane stormed"),
                (alone, "LR1 alone, LR2 off"),
            ],
        );
        let pct = |b: f64, a: f64| (b / a - 1.0) * 100.0;
        let mut check = |name: String, expected: &str, measured: String, pass: bool| {
            r.setup_checks.push(crate::report::Check {
                name,
                expected: expected.into(),
                measured,
                pass,
            })
        };
        let at =
            |t: &Option<TrialResult>, lr: usize| t.as_ref().map(|t| lr_result(t, &streams, lr));
        for (lr, name) in [(0, "LR1"), (1, "LR2")] {
            let (q, s) = (at(&tq, lr), at(&ts, lr));
            check(
                format!("{name} loses nothing while LR1's control plane is stormed"),
                "0 frames lost",
                match s {
                    Some((sent, bad, _)) => {
                        format!("{bad} of {sent} lost at {:.2}% load", load * 100.0)
                    }
                    None => "no trial".into(),
                },
                s.is_some_and(|(sent, bad, _)| sent > 0 && bad == 0),
            );
            let (pq, ps) = (q.and_then(|x| x.2), s.and_then(|x| x.2));
            check(
                format!("{name}'s p99 latency unchanged while LR1's control plane is stormed"),
                "worst stream's p99 within 10% of the quiet trial's",
                match (pq, ps) {
                    (Some(a), Some(b)) => {
                        format!("{b:.1} us against {a:.1} us quiet ({:+.1}%)", pct(b, a))
                    }
                    _ => "no latency measured".into(),
                },
                matches!((pq, ps), (Some(a), Some(b)) if b <= a * 1.10),
            );
        }
        let walks = counts.walks.load(Ordering::Relaxed);
        let requests = counts.requests.load(Ordering::Relaxed);
        check(
            "the storm on LR1's control plane ran".into(),
            "SNMP walks of LR1's IF-MIB and API requests throughout the trial",
            format!(
                "{walks} walks ({} objects, {} failed), {requests} API requests ({} failed) in {storm_s:.1} s; LR1's group used {lr1_cpu:.0}% of a CPU, snmpd {snmpd_cpu:.0}%; the storm's clients and snmpd {}",
                counts.objects.load(Ordering::Relaxed),
                counts.walk_errors.load(Ordering::Relaxed),
                counts.request_errors.load(Ordering::Relaxed),
                match (lr1_cpu_id, pinned) {
                    (Some(c), true) => format!("on CPU {c}, LR1's"),
                    _ => "unpinned".into(),
                },
            ),
            walks > 0 && requests > 0,
        );
        let (q, a) = (at(&tq, 0), at(&ta, 0));
        check(
            "LR2 switched off: LR1 loses nothing".into(),
            "0 frames lost",
            match a {
                Some((sent, bad, _)) => format!("{bad} of {sent} lost (LR2 {})", off.state),
                None => "no trial".into(),
            },
            a.is_some_and(|(sent, bad, _)| sent > 0 && bad == 0) && off.state == "stopped",
        );
        let (pq, pa) = (q.and_then(|x| x.2), a.and_then(|x| x.2));
        check(
            "LR2 switched off: LR1's p99 latency unchanged".into(),
            "worst stream's p99 within 10% of the quiet trial's",
            match (pq, pa) {
                (Some(x), Some(y)) => {
                    format!("{y:.1} us against {x:.1} us quiet ({:+.1}%)", pct(y, x))
                }
                _ => "no latency measured".into(),
            },
            matches!((pq, pa), (Some(x), Some(y)) if y <= x * 1.10),
        );
        let after = sup.list();
        r.id = "XR-2C".into();
        r.title = format!(
            "control-plane storm: every LR's streams at {:.2}% ({}) while LR1's control plane is stormed (SNMP walks, API requests), then with LR2 switched off",
            load * 100.0,
            if ro.fixed_load.is_some() { "the load given" } else { "half their throughput" }
        );
        r.seed_title = "Cisco XR 12000, XR-2C: one LR's route processor at high CPU (cyclic SNMP walk) while XR-6 runs on all LRs, then LR4 switched off: the other LRs unchanged".into();
        r.workers = x.workers * 2;
        r.port_names = (1..=4).map(|i| format!("p{i}")).collect();
        r.notes.insert(0, cpu_note(lr_cpus, x.workers));
        r.notes.extend(lr_notes(&started_lrs, &after));
        Ok(r)
    })
}
