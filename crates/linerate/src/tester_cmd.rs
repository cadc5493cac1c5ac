//! `linerate bench scenario|demo|tester`: the tester's commands.

use std::path::{Path, PathBuf};

use clap::Args;
use tester::procedures::TrialOpts;
use tester::report::{self, ProgressPrinter};
use tester::run::{self, RunOpts};
use tester::scenario::{self, ScenarioOpts, VpnPlan};
use tester::streams_file;
use tester::FrameSizes;

/// What every tester command shares: how trials run and where reports go.
#[derive(Args, Clone)]
pub struct TrialArgs {
    /// Seconds per trial (the reports used 60 or 300).
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Seconds of traffic before each trial, not counted.
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,
    /// Frame sizes: 64, 128, imix, ggsn-imix or a mix 64:7,594:4,1518:1 (several: separate with
    /// spaces in one argument, or repeat the flag).
    #[arg(long)]
    sizes: Vec<String>,
    /// Search resolution, percent of nominal load.
    #[arg(long, default_value_t = 0.5)]
    resolution: f64,
    /// Loss tolerance, percent (default: the scenario's: 0, or 2 for the GRF tests).
    #[arg(long)]
    tolerance: Option<f64>,
    /// Receive ring per router queue, frames (a NIC's receive descriptor ring; 4,096 rides out
    /// the few-millisecond stalls a shared virtual machine gives its threads).
    #[arg(long, default_value_t = 4096)]
    ring: usize,
    /// Check every payload byte of every received frame (costs analyzer time).
    #[arg(long)]
    verify_payload: bool,
    /// Also measure frame loss rate against offered load (RFC 2544 26.3).
    #[arg(long)]
    loss_vs_load: bool,
    /// Also measure back-to-back frames (RFC 2544 26.4), up to this many per port.
    #[arg(long)]
    back_to_back: Option<u64>,
    /// Where the table (.md), the JSON and the SVG chart go.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
    /// No per-trial lines.
    #[arg(long)]
    quiet: bool,
    /// Serve the router's runtime API on this socket while the tester runs (use the CLI on it
    /// with --socket: show, config apply, capture, trace ... under test traffic).
    #[arg(long)]
    api_socket: Option<PathBuf>,
    /// One trial at this load (percent of nominal) per frame size, instead of the search.
    #[arg(long)]
    load: Option<f64>,
    /// After each search, a trial at the load found while a management client sends this many
    /// API requests per second (reads, metrics scrapes and route changes).
    #[arg(long, value_name = "REQUESTS_PER_S")]
    mgmt_storm: Option<f64>,
    /// CPU priority (nice, 0..19) of the API server's threads and the storm client; the
    /// workers and the tester run at 0.
    #[arg(long, default_value_t = 10)]
    api_nice: i32,
    /// After the searches, one trial of this many seconds at each throughput found (the seeds'
    /// 300 s trials): loss, latency percentiles and memory before and after
    #[arg(long, value_name = "SECONDS")]
    soak: Option<f64>,
}

#[derive(Args)]
pub struct ScenarioArgs {
    /// ME-1, ME-2, ME-15, XR-3, XR-4, GR-1, GR-2, GR-3; pseudowires ME-3..ME-5; switching ME-7..ME-10, L2-1M;
    /// multicast ME-11, ME-12 (snooping), ME-13, ME-14 (routed); with services XR-5, ME-1S, QOS-1;
    /// --list shows them.
    id: Option<String>,
    #[arg(long)]
    list: bool,
    /// Fraction of the seed's routes and flows, and of the services scenarios' ACL and QoS
    /// lists (CI runs scenarios at 0.01).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Router workers (the tester takes a core of its own when there is one).
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Stream-scaling scenarios (GR-1, GR-3): the largest stream count.
    #[arg(long)]
    max_streams: Option<usize>,
    /// Stream-scaling scenarios: only these stream counts (e.g. --counts 1,16).
    #[arg(long, value_delimiter = ',')]
    counts: Vec<usize>,
    /// GR-1..3 on Ethernet ports at OC-12's bit rate (the stand-in) instead of ATM OC-12.
    #[arg(long)]
    grf_ethernet: bool,
    /// ME-6, ME-6S: the VPN routes go the whole way over BGP: fed into a far gobgpd, sent over
    /// iBGP to the router's own gobgpd, read by the router's L3VPN service (both daemons on
    /// loopback; needs Debian's gobgpd). Without it they are handed to the VPN route source.
    #[arg(long)]
    through_gobgp: bool,
    #[command(flatten)]
    trial: TrialArgs,
}

#[derive(Args)]
pub struct RunArgs {
    /// The router's config; its mem ports become the tester's ports.
    #[arg(long)]
    router: PathBuf,
    /// Streams file (YAML; see `tester::streams_file`). Without it, --pattern makes the streams.
    #[arg(long)]
    streams: Option<PathBuf>,
    /// pair, mesh or backbone, between the neighbours the router config names on its ports.
    #[arg(long, default_value = "pair")]
    pattern: String,
    /// Backbone uplinks (mem port names).
    #[arg(long, value_delimiter = ',')]
    uplinks: Vec<String>,
    /// Pattern streams over IPv6 instead of IPv4.
    #[arg(long)]
    ipv6: bool,
    /// Pattern streams: flows per stream (UDP source ports).
    #[arg(long, default_value_t = 1)]
    flows: u32,
    /// Pattern streams: nominal port speed (1g, 10g, 622m, ...).
    #[arg(long, default_value = "10g")]
    speed: String,
    #[command(flatten)]
    trial: TrialArgs,
}

#[derive(Args)]
pub struct ExternalArgs {
    /// The device under test in the router config format, as the tester sees it: its ports, its
    /// interfaces' MACs (leave `mac` out to have the tester resolve it) and addresses, and under
    /// `neighbors` the addresses the tester emulates on each link with the tester's MAC there.
    #[arg(long)]
    dut: PathBuf,
    /// DUT_PORT=DEVICE: the device's port (a port name in DUT.yaml) is cabled to the tester's
    /// Linux interface DEVICE, or (`shm:PATH`) is a Linerate shared-memory port whose server
    /// made PATH: the tester maps it as the client. Repeat for every port; the order is the
    /// tester's port order.
    #[arg(long = "port", value_name = "DUT_PORT=DEVICE", required = true)]
    ports: Vec<tester::external::PortMap>,
    /// Streams file (YAML; `from`/`to` name DUT ports). Without it, --pattern makes the streams.
    #[arg(long)]
    streams: Option<PathBuf>,
    /// pair, mesh or backbone, between the neighbours DUT.yaml names on the mapped ports.
    #[arg(long, default_value = "pair")]
    pattern: String,
    /// Backbone uplinks (DUT port names).
    #[arg(long, value_delimiter = ',')]
    uplinks: Vec<String>,
    /// Pattern streams over IPv6 instead of IPv4.
    #[arg(long)]
    ipv6: bool,
    /// Pattern streams: flows per stream (UDP source ports).
    #[arg(long, default_value_t = 1)]
    flows: u32,
    /// Pattern streams: nominal port speed (1g, 10g, 622m, ...), what --load is a percentage of.
    #[arg(long, default_value = "10g")]
    speed: String,
    /// Pin the tester's thread to this CPU (give the device the others).
    #[arg(long)]
    core: Option<usize>,
    /// A Linerate daemon's API socket: its workers' busy time gives the router's own CPU per
    /// frame beside the machine's.
    #[arg(long)]
    dut_api: Option<PathBuf>,
    /// Seconds to wait for the device to answer for a MAC DUT.yaml left out.
    #[arg(long, default_value_t = 3.0)]
    resolve_timeout: f64,
    /// RFC 2889 switching procedures on an L2 device instead of the throughput search, in this
    /// order: flooding, capacity, rate, ndr (comma separated). DUT.yaml needs only its ports;
    /// tester port 0 learns, port 1 tests, further ports watch for flooded frames.
    #[arg(long, value_delimiter = ',', value_name = "PROCEDURE")]
    switching: Vec<tester::switching::Procedure>,
    /// Switching: the learning capacity search's upper bound, addresses.
    #[arg(long, default_value_t = 10_000)]
    macs: u32,
    /// Switching: addresses learned in each learning-rate step.
    #[arg(long, default_value_t = 1_000)]
    rate_macs: u32,
    /// Switching: unknown addresses the flooding trial sends to.
    #[arg(long, default_value_t = 1_000)]
    flood_macs: u32,
    /// Switching: frames/s of the capacity's and the flooding's trials (learning and test).
    #[arg(long, default_value_t = 10_000.0)]
    learn_fps: f64,
    /// Switching: a shell command that empties the device's address table, run before each
    /// capacity and rate step and before flooding (e.g. `ip link set br0 type bridge
    /// fdb_flush`, `ovs-appctl fdb/flush br0`, `linerate clear mac address-table`).
    #[arg(long, value_name = "CMD")]
    flush: Option<String>,
    /// IGMP snooping on an L2 device instead of the throughput search: tester port 0 sends
    /// --sources x --groups (S,G), every other port's host joins every group (IGMPv2) and must
    /// get every frame; then a probe group's join and leave times. DUT.yaml needs only its
    /// ports.
    #[arg(long)]
    multicast: bool,
    /// Multicast: groups joined on each receiving port.
    #[arg(long, default_value_t = 100)]
    groups: u32,
    /// Multicast: sources sending to each group.
    #[arg(long, default_value_t = 10)]
    sources: u32,
    /// Multicast: reports a second from each receiving port.
    #[arg(long, default_value_t = 1000.0)]
    join_fps: f64,
    /// --multicast: the longest a leave may take to stop the group's traffic at its port, ms
    /// (10: a snooping switch's fast leave; a router under pimd takes IGMP's last-member query
    /// time).
    #[arg(long, default_value_t = 10.0)]
    leave_target_ms: f64,
    #[command(flatten)]
    gtp: GtpArgs,
    #[command(flatten)]
    trial: TrialArgs,
}

/// `bench external --gtp`: GG-1 against a GGSN.
#[derive(Args)]
pub struct GtpArgs {
    /// GG-1 against a GGSN instead of plain streams: an emulated SGSN creates PDP contexts
    /// (GTP-C from --sgsn), then user traffic runs both ways through them, per frame size: the
    /// first --port is Gn, the second Gi. Frame sizes are the user's packets (the tunnel adds
    /// 36 bytes on Gn).
    #[arg(long)]
    gtp: bool,
    /// --gtp: the GGSN's GTP-C and GTP-U address (default: the Gn interface's IPv4 address in
    /// DUT.yaml); GG-2: once per GGSN.
    #[arg(long)]
    ggsn: Vec<std::net::Ipv4Addr>,
    /// --gtp: the emulated SGSN's signalling address, one of this host's (its GTP-C socket binds
    /// port 2123 there); GG-2: once per GGSN.
    #[arg(long)]
    sgsn: Vec<std::net::Ipv4Addr>,
    /// --gtp: the SGSN's user plane address, where the downlink is sent (default: the Gn
    /// port's neighbour in DUT.yaml, which the tester emulates); GG-2: once per GGSN.
    #[arg(long)]
    sgsn_user: Vec<std::net::Ipv4Addr>,
    /// --gtp with four --port (Gn, Gi of GGSN A, then of GGSN B): GG-2. The second GGSN's
    /// frames are this size whatever the row's (the seed: 1460 while the first's are 1024).
    #[arg(long, default_value_t = 0)]
    second_size: u16,
    /// GG-2: search each GGSN alone too, so both together are judged against it.
    #[arg(long)]
    alone: bool,
    /// --gtp: the APN every context asks for.
    #[arg(long, default_value = "internet")]
    apn: String,
    /// --gtp: PDP contexts created and held during the traffic (the seed: 384,000).
    #[arg(long, default_value_t = 1000)]
    contexts: u32,
    /// --gtp: contexts created per second (the seed: 600).
    #[arg(long, default_value_t = 600.0)]
    create_rate: f64,
    /// --gtp: first search the highest create rate with 99.999% accepted, creating and deleting
    /// this many contexts at each rate tried (0: no search).
    #[arg(long, default_value_t = 0)]
    create_search: u32,
    /// --gtp: the search's highest rate, contexts/s.
    #[arg(long, default_value_t = 1_000_000.0)]
    create_search_max: f64,
    /// --gtp: the traffic goes through this many of the contexts, evenly spread (0: all).
    #[arg(long, default_value_t = 0)]
    traffic_contexts: u32,
    /// --gtp: contexts deleted per second at the end.
    #[arg(long, default_value_t = 5000.0)]
    delete_rate: f64,
    /// --gtp: the first subscriber's IMSI (each context's is one more).
    #[arg(long, default_value_t = 262_010_000_000_000)]
    imsi_base: u64,
}

#[derive(Args)]
pub struct CapacityArgs {
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Frame sizes, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "64")]
    sizes: Vec<u16>,
    #[arg(long, default_value_t = 4)]
    ports: usize,
    #[arg(long, default_value_t = 8)]
    streams_per_port: usize,
    /// Also run this many throughput searches against a fake device that polices at
    /// --policer frames/s, to show how repeatable the search is.
    #[arg(long, default_value_t = 0)]
    repeat: usize,
    #[arg(long, default_value_t = 2_000_000.0)]
    policer: f64,
}

fn write_outputs(r: &run::ScenarioReport, out: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let base = r.id.to_ascii_lowercase();
    let files = [
        (out.join(format!("{base}.md")), report::table(r)),
        (
            out.join(format!("{base}.json")),
            serde_json::to_string_pretty(&report::json(r)).unwrap_or_default(),
        ),
        (out.join(format!("{base}.svg")), report::svg(r)),
    ];
    let mut paths = Vec::new();
    for (p, text) in files {
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
        paths.push(p);
    }
    Ok(paths)
}

fn run_opts(t: &TrialArgs) -> Result<RunOpts, String> {
    if t.seconds.is_nan() || t.seconds <= 0.0 {
        return Err("--seconds: must be above 0".into());
    }
    if !(t.resolution > 0.0 && t.resolution < 50.0) {
        return Err("--resolution: a percentage above 0 and below 50".into());
    }
    if let Some(x) = t.tolerance {
        if !(0.0..100.0).contains(&x) {
            return Err("--tolerance: a percentage from 0 to below 100".into());
        }
    }
    if t.ring < 64 || !t.ring.is_power_of_two() {
        return Err("--ring: a power of two, at least 64".into());
    }
    let sizes = if t.sizes.is_empty() {
        None
    } else {
        Some(
            t.sizes
                .iter()
                .flat_map(|s| s.split_whitespace().map(str::to_string).collect::<Vec<_>>())
                .map(|s| FrameSizes::parse(&s).map_err(|e| format!("--sizes: {e}")))
                .collect::<Result<Vec<_>, _>>()?,
        )
    };
    Ok(RunOpts {
        trial: TrialOpts {
            seconds: t.seconds,
            warmup: t.warmup,
            verify_payload: t.verify_payload,
            ..Default::default()
        },
        resolution: t.resolution / 100.0,
        tolerance: t.tolerance.map(|x| x / 100.0),
        sizes,
        ring: t.ring,
        workdir: t.out.clone(),
        loss_vs_load: t.loss_vs_load,
        back_to_back: t.back_to_back,
        api_socket: t.api_socket.clone(),
        fixed_load: match t.load {
            Some(l) if l > 0.0 && l <= 100.0 => Some(l / 100.0),
            Some(_) => return Err("--load: a percentage above 0 and at most 100".into()),
            None => None,
        },
        api_nice: t.api_nice.clamp(0, 19),
        mgmt_storm: match t.mgmt_storm {
            Some(r) if r > 0.0 && r <= 100_000.0 => Some(r),
            Some(_) => return Err("--mgmt-storm: requests per second, above 0".into()),
            None => None,
        },
        soak_s: match t.soak {
            Some(s) if s > 0.0 && s <= 86_400.0 => Some(s),
            Some(_) => return Err("--soak: seconds, above 0 and at most a day".into()),
            None => None,
        },
        through_gobgp: false,
    })
}

fn finish(r: &run::ScenarioReport, out: &Path) -> Result<(), String> {
    outln!("\n{}", report::table(r));
    let paths = write_outputs(r, out)?;
    outln!(
        "Wrote {}",
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

pub fn scenario(a: ScenarioArgs) -> Result<(), String> {
    if a.list || a.id.is_none() {
        outln!("Scenarios (../shared/TESTPLAN.md):");
        for (id, what) in scenario::NAMES {
            outln!("  {id:<5} {what}");
        }
        // The scenarios that need a daemon and real peers run from their own runners.
        outln!("Against a Linerate daemon and real peers, in namespaces the runner makes:");
        for (ids, how) in [
            (
                "GG-1, GG-2",
                "benches/ggsn/run.py (linerate bench external --gtp), docs/ggsn.md",
            ),
            (
                "DL-1, DL-2",
                "linerate bench dlsw, tests/system/test_dlsw.py, docs/dlsw.md",
            ),
            (
                "XR-1, XR-2A..C",
                "linerate bench scenario XR-1 (XR-2A, XR-2B, XR-2C): the LRs as processes under a supervisor, docs/logical-routers.md",
            ),
            (
                "ME-16..19",
                "benches/eem/run.py, tests/system/test_event_manager.py, docs/event-manager.md",
            ),
        ] {
            outln!("  {ids:<10} {how}");
        }
        return Ok(());
    }
    let id = a.id.clone().unwrap_or_default();
    if a.workers == 0 {
        return Err("--workers: at least 1".into());
    }
    let mut ro = run_opts(&a.trial)?;
    ro.through_gobgp = a.through_gobgp;
    let lr_scenario = ["XR-1", "XR-2A", "XR-2B", "XR-2C"]
        .iter()
        .any(|s| id.eq_ignore_ascii_case(s));
    if lr_scenario {
        // Logical routers as processes: not the embedded router.
        let x = tester::logical_routers::LrScenario {
            out: a.trial.out.clone(),
            binary: std::env::current_exe().map_err(|e| format!("this binary: {e}"))?,
            workers: a.workers,
            flows: ((1000.0 * a.scale).round() as u32).max(1),
        };
        let mut obs = ProgressPrinter::new();
        obs.verbose = !a.trial.quiet;
        // Ctrl-C or SIGTERM mid-run: the LRs, their namespaces and groups, and snmpd go too.
        std::thread::spawn(|| {
            if crate::daemon_cmd::wait_for_signal().is_ok() {
                eprintln!("linerate: interrupted: stopping the logical routers");
                tester::logical_routers::interrupted();
                std::process::exit(130);
            }
        });
        let r = if id.eq_ignore_ascii_case("XR-1") {
            tester::logical_routers::xr1(&x, &ro, &mut obs)?
        } else if id.eq_ignore_ascii_case("XR-2A") {
            tester::logical_routers::xr2a(&x, &ro, &mut obs)?
        } else if id.eq_ignore_ascii_case("XR-2C") {
            tester::logical_routers::xr2c(&x, &ro, &mut obs)?
        } else {
            tester::logical_routers::xr2b(&x, &ro, &mut obs)?
        };
        return finish(&r, &a.trial.out);
    }
    let so = ScenarioOpts {
        scale: a.scale,
        workers: a.workers,
        max_streams: a.max_streams,
        counts: (!a.counts.is_empty()).then(|| a.counts.clone()),
        grf_ethernet: a.grf_ethernet,
    };
    let s = scenario::build(&id, &so)?;
    eprintln!(
        "{}: building the router ({} routes, {} ports, {} streams)...",
        s.id,
        s.route_lines.len(),
        s.ports.len(),
        s.streams.len()
    );
    let mut obs = ProgressPrinter::new();
    obs.verbose = !a.trial.quiet;
    let r = run::run(s, &ro, &mut obs)?;
    finish(&r, &a.trial.out)
}

/// `bench run`: the user's router config, streams from a file or a pattern.
pub fn custom(a: RunArgs) -> Result<(), String> {
    let ro = run_opts(&a.trial)?;
    let t0 = std::time::Instant::now();
    let cfg = control::config::load(&a.router).map_err(|e| e.to_string())?;
    let ports = streams_file::ports_of(&cfg);
    let (streams, speeds, what) = match &a.streams {
        Some(path) => {
            let f = streams_file::load(path, &cfg)?;
            (
                f.streams,
                f.speeds,
                format!("streams from {}", path.display()),
            )
        }
        None => pattern_streams(&a.pattern, &a.speed, &a.uplinks, a.ipv6, a.flows, &ports)?,
    };
    let sizes = ro
        .sizes
        .clone()
        .unwrap_or_else(|| vec![FrameSizes::Fixed(if a.ipv6 { 78 } else { 64 })]);
    for sz in &sizes {
        for st in &streams {
            st.validate(&sz.sizes(), ports.len())?;
        }
    }
    let router = control::Router::build(cfg).map_err(|e| e.to_string())?;
    let config_text =
        std::fs::read_to_string(&a.router).map_err(|e| format!("{}: {e}", a.router.display()))?;
    let config_path = std::fs::canonicalize(&a.router).unwrap_or_else(|_| a.router.clone());
    let flows = streams.iter().map(|s| s.flows()).sum();
    let plan = scenario::Scenario {
        id: "custom",
        title: format!("{}: {what}", a.router.display()),
        seed_title: "(none: a user-defined test)",
        config_yaml: String::new(),
        route_lines: vec![],
        files: vec![],
        ports: ports
            .iter()
            .zip(&speeds)
            .map(|(p, &s)| (p.name.clone(), s))
            .collect(),
        load_scale: vec![1.0; ports.len()],
        streams,
        sizes,
        procedure: scenario::Procedure::ThroughputPerSize,
        loss_tolerance: 0.0,
        seed_seconds: 0.0,
        seed: vec![],
        notes: vec![],
        flows,
        vpn: VpnPlan::default(),
    };
    let mut obs = ProgressPrinter::new();
    obs.verbose = !a.trial.quiet;
    let r = run::run_with(
        router,
        (config_text, config_path),
        plan,
        t0.elapsed().as_secs_f64(),
        &ro,
        &mut obs,
    )?;
    finish(&r, &a.trial.out)
}

/// The streams `--pattern` makes over `ports`, each port's speed, and how to describe them.
fn pattern_streams(
    pattern: &str,
    speed: &str,
    uplinks: &[String],
    ipv6: bool,
    flows: u32,
    ports: &[streams_file::PortInfo],
) -> Result<(Vec<tester::stream::StreamSpec>, Vec<f64>, String), String> {
    let pat = match pattern {
        "pair" => streams_file::Pattern::Pair,
        "mesh" => streams_file::Pattern::Mesh,
        "backbone" => streams_file::Pattern::Backbone,
        other => return Err(format!("--pattern {other:?}: pair, mesh or backbone")),
    };
    let speed = tester::load::parse_speed(speed).map_err(|e| format!("--speed: {e}"))?;
    let flows = flows.max(1);
    let s = streams_file::pattern(ports, pat, uplinks, ipv6, flows)?;
    Ok((
        s,
        vec![speed; ports.len()],
        format!("{pattern} pattern, {flows} flows per stream"),
    ))
}

/// `bench external`: the procedures against a device on real interfaces (AF_PACKET).
pub fn external(a: ExternalArgs) -> Result<(), String> {
    let ro = run_opts(&a.trial)?;
    if ro.api_socket.is_some() || ro.mgmt_storm.is_some() {
        return Err(
            "--api-socket and --mgmt-storm are for the embedded router; an external device has its own API".into(),
        );
    }
    let dut = tester::external::load_dut(&a.dut)?;
    if a.multicast {
        return multicast(a, dut, &ro);
    }
    if !a.switching.is_empty() {
        return switching(a, dut, &ro);
    }
    if a.gtp.gtp {
        return gtp(a, dut, &ro);
    }
    let infos = tester::external::port_infos(&dut, &a.ports);
    let (streams, speeds, what) = match &a.streams {
        Some(path) => {
            let f = streams_file::load_for(
                path,
                &infos,
                "no tester port of that name (the DUT ports given with --port)",
            )?;
            (
                f.streams,
                f.speeds,
                format!("streams from {}", path.display()),
            )
        }
        None => pattern_streams(&a.pattern, &a.speed, &a.uplinks, a.ipv6, a.flows, &infos)?,
    };
    let sizes = ro
        .sizes
        .clone()
        .unwrap_or_else(|| vec![FrameSizes::Fixed(if a.ipv6 { 78 } else { 64 })]);
    for sz in &sizes {
        for st in &streams {
            st.validate(&sz.sizes(), infos.len())?;
        }
    }
    if !(a.resolve_timeout > 0.0 && a.resolve_timeout <= 600.0) {
        return Err("--resolve-timeout: seconds, above 0".into());
    }
    let mut obs = ProgressPrinter::new();
    obs.verbose = !a.trial.quiet;
    let r = tester::external::run(
        tester::external::ExternalRun {
            dut_path: a.dut.clone(),
            dut,
            maps: a.ports.clone(),
            streams,
            speeds,
            sizes,
            what,
            core: a.core,
            dut_api: a.dut_api.clone(),
            resolve_timeout: std::time::Duration::from_secs_f64(a.resolve_timeout),
            subsets: Vec::new(),
            blocked: Vec::new(),
        },
        &ro,
        &mut obs,
    )?;
    finish(&r, &a.trial.out)
}

/// `bench external --gtp`: GG-1 against a GGSN.
fn gtp(a: ExternalArgs, dut: tester::external::Dut, ro: &RunOpts) -> Result<(), String> {
    let g = &a.gtp;
    let n = a.ports.len() / 2;
    if !a.ports.len().is_multiple_of(2) || !(1..=2).contains(&n) {
        return Err(
            "--gtp: two --port per GGSN, Gn first, then Gi (four for GG-2: A's, then B's)".into(),
        );
    }
    let speed = tester::load::parse_speed(&a.speed).map_err(|e| format!("--speed: {e}"))?;
    let infos = tester::external::port_infos(&dut, &a.ports);
    let pick = |v: &[std::net::Ipv4Addr], i: usize, what: &str| -> Result<Option<_>, String> {
        match v.len() {
            0 => Ok(None),
            l if l == n => Ok(Some(v[i])),
            l => Err(format!("{what}: given {l} times for {n} GGSN(s)")),
        }
    };
    let mut instances = Vec::new();
    for i in 0..n {
        let gn = &a.ports[2 * i];
        let gn_if = dut
            .cfg
            .interfaces
            .iter()
            .find(|x| x.port == gn.dut_port && x.vlan.is_none());
        let ggsn = match (
            pick(&g.ggsn, i, "--ggsn")?,
            gn_if.and_then(|x| x.ipv4.first()),
        ) {
            (Some(x), _) => x,
            (None, Some(p)) => std::net::Ipv4Addr::from(p.0),
            (None, None) => {
                return Err(format!(
                    "--gtp: no --ggsn, and the Gn interface of port {} has no IPv4 address",
                    gn.dut_port
                ))
            }
        };
        let sgsn = pick(&g.sgsn, i, "--sgsn")?.ok_or(
            "--gtp needs --sgsn (once per GGSN), the address GTP-C is sent from (one of this host's)",
        )?;
        let user = match (pick(&g.sgsn_user, i, "--sgsn-user")?, infos[2 * i].host_v4) {
            (Some(x), _) => x,
            (None, Some(h)) => std::net::Ipv4Addr::from(h),
            (None, None) => {
                return Err(format!(
                    "--gtp: no --sgsn-user, and port {} has no IPv4 neighbour",
                    gn.dut_port
                ))
            }
        };
        let mut o = tester::sgsn::SgsnOpts::new(ggsn, sgsn, user, &g.apn);
        // Each GGSN's subscribers apart from the other's.
        o.imsi_base = g.imsi_base + i as u64 * 100_000_000;
        instances.push(tester::ggsn::Instance {
            name: if n == 1 {
                String::new()
            } else {
                ["A", "B"][i].to_string()
            },
            sgsn: o,
            gn: 2 * i,
            gi: 2 * i + 1,
            min_size: if i == 1 { g.second_size } else { 0 },
        });
    }
    for (name, v) in [
        ("--create-rate", g.create_rate),
        ("--delete-rate", g.delete_rate),
        ("--create-search-max", g.create_search_max),
    ] {
        if !(v > 0.0 && v.is_finite()) {
            return Err(format!("{name}: per second, above 0"));
        }
    }
    if g.contexts == 0 {
        return Err("--contexts: at least 1".into());
    }
    if g.imsi_base + 200_000_000 >= 1_000_000_000_000_000 {
        return Err("--imsi-base: IMSIs have 15 digits".into());
    }
    let sizes = ro
        .sizes
        .clone()
        .unwrap_or_else(|| vec![FrameSizes::Fixed(64)]);
    let mut obs = ProgressPrinter::new();
    obs.verbose = !a.trial.quiet;
    let r = tester::ggsn::run(
        tester::ggsn::GgsnRun {
            ext: tester::external::ExternalRun {
                dut_path: a.dut.clone(),
                dut,
                maps: a.ports.clone(),
                streams: Vec::new(),
                speeds: vec![speed; a.ports.len()],
                sizes,
                what: a
                    .ports
                    .chunks(2)
                    .map(|p| {
                        format!(
                            "Gn {} on {}, Gi {} on {}",
                            p[0].dut_port, p[0].device, p[1].dut_port, p[1].device
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
                core: a.core,
                dut_api: a.dut_api.clone(),
                resolve_timeout: std::time::Duration::from_secs_f64(a.resolve_timeout),
                subsets: Vec::new(),
                blocked: Vec::new(),
            },
            instances,
            alone: g.alone,
            contexts: g.contexts,
            create_rate: g.create_rate,
            search: (g.create_search > 0).then(|| tester::ggsn::RateSearch {
                contexts: g.create_search,
                start: 1000.0f64.min(g.create_search_max),
                max: g.create_search_max,
                resolution: 0.05,
            }),
            traffic_contexts: g.traffic_contexts,
            delete_rate: g.delete_rate,
        },
        ro,
        &mut obs,
    )?;
    finish(&r, &a.trial.out)
}

/// `bench external --multicast`: IGMP snooping on an L2 device.
fn multicast(a: ExternalArgs, dut: tester::external::Dut, ro: &RunOpts) -> Result<(), String> {
    let speed = tester::load::parse_speed(&a.speed).map_err(|e| format!("--speed: {e}"))?;
    if !(a.join_fps > 0.0 && a.join_fps.is_finite()) {
        return Err("--join-fps: reports/s, above 0".into());
    }
    let sizes = ro
        .sizes
        .clone()
        .unwrap_or_else(|| vec![FrameSizes::Fixed(64)]);
    let mut obs = ProgressPrinter::new();
    obs.verbose = !a.trial.quiet;
    let r = tester::multicast::run_external(
        tester::multicast::McastRun {
            dut_path: a.dut.clone(),
            dut,
            maps: a.ports.clone(),
            speed,
            sizes,
            groups: a.groups,
            sources: a.sources,
            join_fps: a.join_fps,
            leave_target_ms: a.leave_target_ms,
            core: a.core,
        },
        ro,
        &mut obs,
    )?;
    outln!("\n{}", report::table(&r));
    let paths = write_outputs(&r, &a.trial.out)?;
    outln!(
        "Wrote {}",
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// `bench external --switching`: RFC 2889 procedures on an L2 device.
fn switching(a: ExternalArgs, dut: tester::external::Dut, ro: &RunOpts) -> Result<(), String> {
    let speed = tester::load::parse_speed(&a.speed).map_err(|e| format!("--speed: {e}"))?;
    let size = match ro.sizes.as_deref() {
        None => FrameSizes::Fixed(64),
        Some([one]) => one.clone(),
        Some(_) => return Err("--switching: one frame size".into()),
    };
    if !(a.learn_fps > 0.0 && a.learn_fps.is_finite()) {
        return Err("--learn-fps: frames/s, above 0".into());
    }
    if a.macs == 0 || a.rate_macs == 0 || a.flood_macs == 0 {
        return Err("--macs, --rate-macs, --flood-macs: at least 1".into());
    }
    let mut obs = ProgressPrinter::new();
    obs.verbose = !a.trial.quiet;
    let r = tester::switching::run(
        tester::switching::SwitchingRun {
            dut_path: a.dut.clone(),
            dut,
            maps: a.ports.clone(),
            speed,
            size,
            procedures: a.switching.clone(),
            macs: a.macs,
            rate_macs: a.rate_macs,
            flood_macs: a.flood_macs,
            learn_fps: a.learn_fps,
            flush: a.flush.clone(),
            core: a.core,
        },
        ro,
        &mut obs,
    )?;
    let table = tester::switching::table(&r);
    outln!("\n{table}");
    let out = &a.trial.out;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let files = [
        (out.join("switching.md"), table),
        (
            out.join("switching.json"),
            serde_json::to_string_pretty(&tester::switching::json(&r)).unwrap_or_default(),
        ),
        (out.join("switching.svg"), tester::switching::svg(&r)),
    ];
    for (p, text) in &files {
        std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    outln!(
        "Wrote {}",
        files
            .iter()
            .map(|f| f.0.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// The README's demo: ME-1 at seed scale with short trials.
pub fn demo(seconds: f64, out: PathBuf) -> Result<(), String> {
    scenario(ScenarioArgs {
        id: Some("ME-1S".into()),
        list: false,
        scale: 1.0,
        workers: 1,
        max_streams: None,
        counts: vec![],
        grf_ethernet: false,
        through_gobgp: false,
        trial: TrialArgs {
            seconds,
            warmup: 0.0,
            sizes: vec![],
            resolution: 0.5,
            tolerance: None,
            ring: 4096,
            verify_payload: false,
            loss_vs_load: false,
            back_to_back: None,
            out,
            quiet: false,
            api_socket: None,
            load: None,
            mgmt_storm: None,
            api_nice: 10,
            soak: None,
        },
    })
}

pub fn capacity(a: CapacityArgs) -> Result<(), String> {
    outln!(
        "Tester capacity, one core: {} ports x {} streams (1,000 flows each), {} s per run",
        a.ports,
        a.streams_per_port,
        a.seconds
    );
    outln!(
        "{:>6} {:>16} {:>18} {:>16} {:>10} {:>10} {:>12}",
        "frame",
        "generator fps",
        "gen+analyzer fps",
        "analyzer fps",
        "gen ns",
        "ana ns",
        "poll gap us"
    );
    for &size in &a.sizes {
        let c = tester::capacity::measure(a.seconds, size, a.ports, a.streams_per_port)?;
        if c.lost > 0 {
            return Err(format!(
                "the loopback lost {} frames: the tester is broken",
                c.lost
            ));
        }
        outln!(
            "{:>6} {:>16} {:>18} {:>16} {:>10.1} {:>10.1} {:>12.1}",
            size,
            report::thousands(c.generator_fps),
            report::thousands(c.loopback_fps),
            report::thousands(c.analyzer_fps),
            1e9 / c.generator_fps,
            1e9 / c.analyzer_fps,
            c.poll_gap_ns as f64 / 1000.0
        );
        eprintln!(
            "{}",
            serde_json::json!({"bench": "tester", "frame": size, "ports": c.ports, "streams": c.streams,
                "generator_fps": c.generator_fps, "loopback_fps": c.loopback_fps,
                "analyzer_fps": c.analyzer_fps, "poll_gap_ns": c.poll_gap_ns,
                "loop_latency_avg_ns": c.loop_latency_avg_ns})
        );
    }
    if a.repeat > 0 {
        let v = tester::capacity::repeatability(a.repeat, a.policer, a.seconds, 0.001)?;
        let (lo, hi) = v
            .iter()
            .fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        outln!(
            "Throughput search x{} against a fake device policing at {} fps (2 x 10G ports, 64 B, {} s trials, 0.1% resolution):",
            a.repeat,
            report::thousands(a.policer),
            a.seconds
        );
        outln!(
            "  results {}; spread (max-min)/mean {:.2}%",
            v.iter()
                .map(|x| report::thousands(*x))
                .collect::<Vec<_>>()
                .join(", "),
            (hi - lo) / mean * 100.0
        );
    }
    Ok(())
}
