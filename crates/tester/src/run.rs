//! Runs a scenario in embedded mode: writes its config and route table, builds the router,
//! starts its workers on their cores, pins the tester to a core of its own, and runs the
//! scenario's procedure for each frame size (or stream count).

use std::path::{Path, PathBuf};
use std::time::Instant;

use control::Router;

use crate::embedded::Embedded;
use crate::engine::Tester;
use crate::load::FrameSizes;
use crate::procedures::{self, Observer, SearchOpts, Throughput, TrialOpts};
use crate::scenario::{Procedure, Scenario, SeedRow};

#[derive(Clone, Debug)]
pub struct RunOpts {
    pub trial: TrialOpts,
    /// Search resolution, fraction of nominal.
    pub resolution: f64,
    /// Loss tolerance; None: the scenario's (0, or 2% for the GRF tests).
    pub tolerance: Option<f64>,
    /// Frame sizes instead of the scenario's.
    pub sizes: Option<Vec<FrameSizes>>,
    /// Receive ring per router queue, frames.
    pub ring: usize,
    pub workdir: PathBuf,
    /// Also RFC 2544 26.3 frame loss rate against offered load, per frame size.
    pub loss_vs_load: bool,
    /// Also RFC 2544 26.4 back-to-back frames, per frame size, up to this many frames per port.
    pub back_to_back: Option<u64>,
    /// Serve the router's runtime API on this Unix socket while the tester runs, so the CLI (or
    /// anything else) can look at it and change it under test traffic.
    pub api_socket: Option<PathBuf>,
    /// One trial at this load per frame size instead of the throughput search.
    pub fixed_load: Option<f64>,
    /// After each size's search, one more trial at the load found while a management client
    /// sends this many API requests per second (see [`crate::storm`]).
    pub mgmt_storm: Option<f64>,
    /// CPU priority (nice) of the API server's threads and of the storm client.
    pub api_nice: i32,
    /// After the procedure, one trial of this many seconds at each row's throughput (the seeds'
    /// 300 s trials), with the process's memory before and after: a soak.
    pub soak_s: Option<f64>,
    /// ME-6: the VPN routes reach the router over BGP, from a far GoBGP to the router's own
    /// (see [`crate::gobgp`]), rather than handed to its VPN route source.
    pub through_gobgp: bool,
}

impl Default for RunOpts {
    fn default() -> Self {
        RunOpts {
            trial: TrialOpts::default(),
            resolution: 0.005,
            tolerance: None,
            sizes: None,
            ring: 4096,
            workdir: std::env::temp_dir(),
            loss_vs_load: false,
            back_to_back: None,
            api_socket: None,
            fixed_load: None,
            mgmt_storm: None,
            soak_s: None,
            through_gobgp: false,
            api_nice: 10,
        }
    }
}

/// One row of the report: a frame size (or stream count) and its search.
#[derive(Clone, Debug)]
pub struct Row {
    pub key: String,
    pub sizes: FrameSizes,
    /// Nominal frames/s at 100% load with the streams of this row.
    pub nominal_fps: f64,
    pub seed: Option<SeedRow>,
    pub search: Throughput,
}

#[derive(Clone, Debug)]
pub struct ScenarioReport {
    pub id: String,
    pub title: String,
    pub seed_title: String,
    pub routes: (usize, usize),
    pub flows: u64,
    pub streams: usize,
    pub ports: usize,
    /// The tester ports' names, in order.
    pub port_names: Vec<String>,
    pub workers: usize,
    pub worker_cores: Vec<usize>,
    pub tester_core: Option<usize>,
    pub cpu: String,
    pub trial_seconds: f64,
    pub seed_seconds: f64,
    pub tolerance: f64,
    pub resolution: f64,
    pub build_s: f64,
    /// Receive ring per router queue, frames.
    pub ring: usize,
    pub rows: Vec<Row>,
    /// Frame loss rate against offered load, per frame size (when asked for).
    pub loss: Vec<(String, Vec<(f64, crate::engine::TrialResult)>)>,
    /// Back-to-back: per frame size, the longest zero-loss burst per port (when asked for).
    pub back_to_back: Vec<(String, u64)>,
    /// One trial at this load per row instead of a search (`--load`).
    pub fixed_load: Option<f64>,
    /// Per frame size: a trial at the throughput found, under management load.
    pub storm: Vec<(String, crate::storm::StormReport)>,
    /// ME-15: the hot-swap trial.
    pub hot_swap: Option<crate::hotswap::HotSwapReport>,
    /// XR-5, ME-1S, QOS-1: what the services procedure checked.
    pub services: Option<crate::services::ServicesReport>,
    /// ME-7..ME-9: what the address learning procedure found.
    pub learning: Option<crate::bridging::LearningReport>,
    /// ME-10: what the failover procedure found.
    pub failover: Option<crate::failover::FailoverReport>,
    /// L2-1M: the RFC 2889 searches' results.
    pub switching: Option<crate::switching::SwitchingReport>,
    /// ME-11, ME-12: joins snooped, per-size copies, join and leave times.
    pub multicast: Option<crate::multicast::McastReport>,
    pub notes: Vec<String>,
    /// External mode: the device, the cabling, neighbour resolution, priming.
    pub external: Option<crate::external::ExternalInfo>,
    /// GG-1, GG-2: what each GGSN's SGSN emulator did (rate search, creation, deletion).
    pub gtp: Vec<crate::ggsn::GtpReport>,
    /// `--soak`: the long trial at each row's throughput.
    pub soak: Vec<Soak>,
    /// What setting the router up checked before the trials (ME-6: every VPN route installed).
    pub setup_checks: Vec<crate::report::Check>,
}

/// One long trial at the load a short search found (the seeds ran 300 s trials).
#[derive(Clone, Debug)]
pub struct Soak {
    pub key: String,
    pub load: f64,
    pub seconds: f64,
    /// The process's resident memory (router and tester) before and after, MB.
    pub rss_before_mb: f64,
    pub rss_after_mb: f64,
    pub trial: crate::engine::TrialResult,
    /// Streams left out of the judgement: those that received nothing in the row's passing
    /// search trial, which the search itself ignored (XR-5's streams the ACL denies by design).
    pub ignored: Vec<String>,
    /// Frames lost by the other streams: what the soak is judged by.
    pub lost_judged: u64,
}

/// The CPU's model name, as reports name the machine.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The router's config as built: its text and the path it was read from.
pub type ConfigSource = (String, PathBuf);

pub(crate) fn build_router(s: &Scenario, dir: &Path) -> Result<(Router, ConfigSource), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let cfg_path = dir.join("scenario.yaml");
    std::fs::write(&cfg_path, &s.config_yaml).map_err(|e| e.to_string())?;
    let mut routes = String::with_capacity(s.route_lines.len() * 32);
    for l in &s.route_lines {
        routes.push_str(l);
        routes.push('\n');
    }
    std::fs::write(dir.join("scenario.routes"), routes).map_err(|e| e.to_string())?;
    for (name, text) in &s.files {
        std::fs::write(dir.join(name), text).map_err(|e| format!("{name}: {e}"))?;
    }
    let cfg = control::config::load(&cfg_path).map_err(|e| e.to_string())?;
    let r = Router::build(cfg).map_err(|e| e.to_string())?;
    Ok((r, (s.config_yaml.clone(), cfg_path)))
}

pub fn run(s: Scenario, ro: &RunOpts, obs: &mut dyn Observer) -> Result<ScenarioReport, String> {
    // This run's own files, so two runs cannot replace each other's table.
    let dir = ro
        .workdir
        .join(format!("linerate-{}-{}", s.id, std::process::id()));
    let t0 = Instant::now();
    let built = build_router(&s, &dir);
    let res = built
        .and_then(|(router, src)| run_with(router, src, s, t0.elapsed().as_secs_f64(), ro, obs));
    let _ = std::fs::remove_dir_all(&dir);
    res
}

/// Runs `s`'s streams and procedure against an already built router (`linerate bench run` builds
/// it from the user's config).
pub fn run_with(
    router: Router,
    config: ConfigSource,
    s: Scenario,
    build_s: f64,
    ro: &RunOpts,
    obs: &mut dyn Observer,
) -> Result<ScenarioReport, String> {
    let mut routes = router.route_counts();
    let speeds: Vec<f64> = s.ports.iter().map(|p| p.1).collect();
    // Enough buffers for every receive ring of the router full (overload), plus what is in
    // flight back to the tester and the threads' caches.
    let buffers = s.ports.len() * router.cfg.workers * ro.ring + 32768;
    let workers = router.cfg.workers;
    let worker_cores = router.cfg.cores.clone();
    let (emb, mut ports, probe) =
        Embedded::start(router, config.clone(), ro.ring, buffers, &speeds)?;
    let core = emb.core.clone().ok_or("the router did not start")?;
    let mut notes = s.notes.clone();
    let mut setup_checks = Vec::new();
    // Holds the VPN speakers (and the router's service reading them) for the run.
    let mut _vpn_speakers = None;
    if !s.vpn.is_empty() {
        let (c, note) = if ro.through_gobgp {
            let (c, note, sp) = crate::gobgp::install(&core, &s.vpn, &ro.workdir)?;
            _vpn_speakers = Some(sp);
            (c, note)
        } else {
            crate::l3vpn::install(&core, &s.vpn)?
        };
        setup_checks = c;
        notes.push(note);
        routes = core.lock("tester.routes").router.route_counts();
    }
    // The API is served when asked for, and for the management storm (on a socket of its own).
    let api_socket = ro.api_socket.clone().or_else(|| {
        ro.mgmt_storm.map(|_| {
            std::env::temp_dir().join(format!("linerate-bench-{}.sock", std::process::id()))
        })
    });
    let _api = match &api_socket {
        Some(sock) => Some(api_server::serve(
            core.clone(),
            api_server::ServeOptions {
                socket: sock.clone(),
                tcp: None,
                metrics: None,
                nice: ro.api_nice,
                admin_group: "linerate-admin".into(),
            },
        )?),
        None => None,
    };
    let mut storm = Vec::new();
    for (p, &k) in ports.iter_mut().zip(&s.load_scale) {
        p.load_scale = k;
    }
    let tester_core = emb.pin_tester();
    let mut tester = Tester::new(ports, s.streams.clone(), emb.pool.clone());
    tester.probe = Some(Box::new(probe));
    let sizes = ro.sizes.clone().unwrap_or_else(|| s.sizes.clone());
    for sz in &sizes {
        tester.validate(sz)?;
    }
    let tolerance = ro.tolerance.unwrap_or(s.loss_tolerance);
    let search = SearchOpts {
        resolution: ro.resolution,
        loss_tolerance: tolerance,
        ..Default::default()
    };
    let nominal = nominal_fps;
    let seed_for = |key: &str| s.seed.iter().find(|r| r.key == key).cloned();
    let mut rows = Vec::new();
    let mut hot_swap = None;
    let mut services = None;
    let mut learning = None;
    let mut failover = None;
    let mut switching = None;
    let mut multicast = None;
    let mut collector = None;
    let mut fixed_load = ro.fixed_load;
    match &s.procedure {
        Procedure::Acl(plan) => {
            let (r, rep) = crate::services::run_acl(
                &mut tester,
                &core,
                &config.1,
                plan,
                &sizes,
                ro,
                tolerance,
                obs,
            );
            rows = r;
            services = Some(crate::services::ServicesReport::Acl(rep));
        }
        Procedure::ServicesOnOff(plan) => {
            let (r, rep, c) = crate::services::run_on_off(
                &mut tester,
                &core,
                &config.1,
                plan,
                &sizes,
                &seed_for,
                ro,
                tolerance,
                obs,
            );
            rows = r;
            collector = c;
            services = Some(crate::services::ServicesReport::OnOff(rep));
        }
        Procedure::Policer(plan) => {
            let rep = crate::services::run_policer(&mut tester, &core, plan, &sizes[0], ro, obs);
            fixed_load = Some(rep.load);
            services = Some(crate::services::ServicesReport::Policer(rep));
        }
        Procedure::Learning(plan) => {
            learning = Some(crate::bridging::run_learning(
                &mut tester,
                &core,
                plan,
                &sizes[0],
                &ro.trial,
                obs,
            ));
        }
        Procedure::Failover(plan) => {
            failover = Some(crate::failover::run_failover(
                &mut tester,
                &core,
                plan,
                &sizes[0],
                &ro.trial,
                obs,
            ));
        }
        Procedure::Switching(plan) => {
            switching = Some(crate::switching::run_embedded(
                &mut tester,
                &core,
                plan,
                &s.ports,
                ro,
                obs,
            ));
        }
        Procedure::Multicast(plan) => {
            let (r, rep) = crate::multicast::run(
                &mut tester,
                plan,
                &sizes,
                &ro.trial,
                &search,
                &seed_for,
                &|| {
                    if plan.routes_expected.is_some() {
                        crate::multicast::mrouted(&core)
                    } else {
                        crate::multicast::snooped(&core)
                    }
                },
                obs,
            );
            rows = r;
            multicast = Some(rep);
        }
        Procedure::HotSwap { load, port } => {
            let sz = &sizes[0];
            let reload = (reload_text(&config.0), config.1.clone());
            let r = crate::hotswap::hot_swap(
                &mut tester,
                core.clone(),
                sz,
                &ro.trial,
                *load,
                port,
                reload,
                obs,
            );
            hot_swap = Some(r);
        }
        Procedure::ThroughputPerSize => {
            let all: Vec<usize> = (0..s.streams.len()).collect();
            for sz in &sizes {
                let r = match ro.fixed_load {
                    Some(l) => {
                        procedures::fixed_load(&mut tester, sz, &ro.trial, l, tolerance, obs)
                    }
                    None => procedures::throughput(&mut tester, sz, &ro.trial, &search, obs),
                };
                if let (Some(rate), Some(sock)) = (ro.mgmt_storm, &api_socket) {
                    if r.load > 0.0 {
                        let st = crate::storm::storm_trial(
                            &mut tester,
                            sz,
                            &ro.trial,
                            r.load,
                            sock.clone(),
                            rate,
                            ro.api_nice,
                            obs,
                        );
                        storm.push((sz.to_string(), st));
                    }
                }
                rows.push(Row {
                    key: sz.to_string(),
                    nominal_fps: nominal(&tester, sz, &all),
                    sizes: sz.clone(),
                    seed: seed_for(&sz.to_string()),
                    search: r,
                });
            }
        }
        Procedure::StreamScaling { counts } => {
            let sz = &sizes[0];
            for &n in counts {
                let mut o = search.clone();
                o.active = Some((0..n).collect());
                let r = procedures::throughput(&mut tester, sz, &ro.trial, &o, obs);
                let active: Vec<usize> = (0..n).collect();
                rows.push(Row {
                    key: n.to_string(),
                    nominal_fps: nominal(&tester, sz, &active),
                    sizes: sz.clone(),
                    seed: seed_for(&n.to_string()),
                    search: r,
                });
            }
        }
    }
    let mut soak = Vec::new();
    if let Some(secs) = ro.soak_s {
        // The rows whose search found a rate, in the configuration they were measured in: for
        // ME-1S the services-on rows (the services stay on); for XR-5 the last row (each row
        // ran under its own ACL config, and only the last one is still in force).
        let in_force: Vec<&Row> = match &s.procedure {
            Procedure::ServicesOnOff(_) => rows.iter().filter(|r| r.key.ends_with(" on")).collect(),
            Procedure::Acl(_) => rows.last().into_iter().collect(),
            _ => rows.iter().collect(),
        };
        for row in in_force.into_iter().filter(|r| r.search.load > 0.0) {
            let Some(best) = &row.search.best else {
                continue;
            };
            let mut t = ro.trial.clone();
            t.seconds = secs;
            // What the search sent: its streams, at the rate its passing trial reached (a
            // tester-bound row's nominal load is more than the tester sent then).
            let load = if best.offered_fps > 0.0 && best.tx_fps < best.offered_fps * 0.995 {
                row.search.load * best.tx_fps / best.offered_fps
            } else {
                row.search.load
            };
            let active: Vec<usize> = best
                .streams
                .iter()
                .filter_map(|st| tester.streams.iter().position(|x| x.name == st.name))
                .collect();
            let mut spec = t.spec(load, &row.sizes);
            spec.active = Some(active);
            let rss_before_mb = control::metrics::process_rss_mb();
            let label = format!("{} soak", row.key);
            let trial = tester.trial(&mut spec, &mut |p| obs.progress(&label, p));
            obs.trial(&label, &trial, trial.lost == 0);
            let denied: Vec<&str> = best
                .streams
                .iter()
                .filter(|st| st.tx > 0 && st.rx == 0)
                .map(|st| st.name.as_str())
                .collect();
            let lost_judged = trial
                .streams
                .iter()
                .filter(|st| !denied.contains(&st.name.as_str()))
                .map(|st| st.lost)
                .sum();
            soak.push(Soak {
                ignored: denied.iter().map(|n| n.to_string()).collect(),
                lost_judged,
                key: row.key.clone(),
                load,
                seconds: secs,
                rss_before_mb,
                rss_after_mb: control::metrics::process_rss_mb(),
                trial,
            });
        }
    }
    let mut loss = Vec::new();
    let mut b2b = Vec::new();
    for sz in &sizes {
        if ro.loss_vs_load {
            loss.push((
                sz.to_string(),
                procedures::loss_vs_load(&mut tester, sz, &ro.trial, 1.0, obs),
            ));
        }
        if let Some(max) = ro.back_to_back {
            let (n, _) = procedures::back_to_back(&mut tester, sz, &ro.trial, 1.0, max, obs);
            b2b.push((sz.to_string(), n));
        }
    }
    drop(tester);
    // The router stops before the flow figures are read: its workers hand over the flows they
    // hold, and the services thread exports them.
    let mut emb = emb;
    emb.stop();
    if let Some(crate::services::ServicesReport::OnOff(rep)) = &mut services {
        crate::services::finish_on_off(&core, rep, collector.take());
    }
    drop(core);
    drop(emb);
    Ok(ScenarioReport {
        id: s.id.into(),
        title: s.title,
        seed_title: s.seed_title.into(),
        routes,
        flows: s.flows,
        streams: s.streams.len(),
        ports: s.ports.len(),
        port_names: s.ports.iter().map(|p| p.0.clone()).collect(),
        workers,
        worker_cores,
        tester_core,
        cpu: cpu_model(),
        trial_seconds: ro.trial.seconds,
        seed_seconds: s.seed_seconds,
        tolerance,
        resolution: ro.resolution,
        build_s,
        ring: ro.ring,
        rows,
        loss,
        back_to_back: b2b,
        hot_swap,
        services,
        learning,
        failover,
        switching,
        multicast,
        storm,
        fixed_load,
        notes,
        external: None,
        gtp: Vec::new(),
        soak,
        setup_checks,
    })
}

/// Nominal frames/s at 100% load with streams `active`: the line rate of each port that sends,
/// times its load scale.
pub(crate) fn nominal_fps(t: &Tester, sz: &FrameSizes, active: &[usize]) -> f64 {
    let mut on = vec![false; t.ports.len()];
    for &a in active {
        on[t.streams[a].tx_port] = true;
    }
    t.ports
        .iter()
        .zip(&on)
        .filter(|(_, &o)| o)
        .map(|(p, _)| p.load_scale * p.wire.line_fps(p.speed_bps, sz.mean()))
        .sum()
}

/// The config with one change, for a reload: a blackhole route in the benchmarking range
/// (RFC 2544's 198.18.0.0/15), which no test stream uses.
fn reload_text(text: &str) -> String {
    const ROUTE: &str = "  - { prefix: 198.19.255.0/24, blackhole: true }  # added by the reload\n";
    match text.find("\nroutes:\n") {
        Some(i) => {
            let at = i + "\nroutes:\n".len();
            format!("{}{ROUTE}{}", &text[..at], &text[at..])
        }
        None => format!("{}\nroutes:\n{ROUTE}", text.trim_end()),
    }
}
