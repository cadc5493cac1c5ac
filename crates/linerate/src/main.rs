//! `linerate`: the router and its tester from the command line.

#[macro_use]
mod out;
mod client_cmd;
mod daemon_cmd;
mod lr_cmd;
mod shell;
mod tester_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use control::Router;
use dataplane::DropReason;
use fib::gen::{Profile, Spec};

#[derive(Parser)]
#[command(
    name = "linerate",
    version,
    about = "A software multi-service router and its tester",
    infer_subcommands = true
)]
struct Cli {
    #[command(flatten)]
    api: client_cmd::ApiArgs,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check a config file; print every error with its file, line and field.
    Check { config: PathBuf },
    /// Run the router. With capture-file ports it stops when every input is drained and prints
    /// the counters.
    Run {
        config: PathBuf,
        /// Print the counters as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run the router as a service with its runtime API (until SIGTERM).
    Daemon(daemon_cmd::DaemonArgs),
    /// Run logical routers, one router process each in its own namespace with its own CPUs
    /// and memory limit, restarting any that exits (until SIGTERM).
    Supervisor(lr_cmd::SupervisorArgs),
    /// Start, stop, restart or upgrade one logical router (through the supervisor).
    Lr {
        #[command(subcommand)]
        cmd: lr_cmd::LrCmd,
    },
    /// The step between the supervisor and an LR's router process.
    #[command(hide = true)]
    LrExec {
        #[arg(long)]
        group: String,
        #[arg(long)]
        netns: String,
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// The interactive CLI: prompt, completion and `?` help, history, `| include`, and a
    /// configure mode that edits and commits a candidate config.
    Cli,
    /// Look at the running router (`show ip route`, `show interfaces`, ...; `--json` on all).
    #[command(infer_subcommands = true)]
    Show {
        /// Print JSON, for machines.
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        what: client_cmd::ShowCmd,
    },
    /// Reset what shows count from.
    Clear {
        #[command(subcommand)]
        what: client_cmd::ClearCmd,
    },
    /// The config lifecycle: apply (atomic, with a diff), diff, history, show, rollback, confirm.
    #[command(infer_subcommands = true)]
    Config {
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        cmd: client_cmd::ConfigCmd,
    },
    /// Add or remove routes at run time (API origin; configured routes take precedence).
    Route {
        #[command(subcommand)]
        cmd: client_cmd::RouteCmd,
    },
    /// Add or remove single ACL entries without re-sending the list.
    Acl {
        #[command(subcommand)]
        cmd: client_cmd::AclCmd,
    },
    /// Take a port out of service or put it back, under traffic.
    Port {
        #[command(subcommand)]
        cmd: client_cmd::PortCmd,
    },
    /// Add or remove workers, under traffic.
    Worker {
        #[command(subcommand)]
        cmd: client_cmd::WorkerCmd,
    },
    /// Write the frames of a port (RX/TX), a node's output or the drops to a pcap file, while
    /// forwarding goes on.
    Capture(client_cmd::CaptureArgs),
    /// Follow the next N frames through the nodes: which node, what it decided, where next.
    Trace(client_cmd::TraceArgs),
    /// Route tables.
    Routes {
        #[command(subcommand)]
        cmd: RoutesCmd,
    },
    /// Benchmarks and the tester.
    Bench {
        #[command(subcommand)]
        cmd: BenchCmd,
    },
}

#[derive(Subcommand)]
enum RoutesCmd {
    /// Write a route file shaped like a seed report's table (see docs/routes.md).
    Gen {
        /// xr6, me1, me2, gr3, internet
        #[arg(long)]
        profile: Profile,
        /// Multiplies the profile's counts (xr6 with --scale 4 is the four-LR table: 3,000,000).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        #[arg(long, value_enum, default_value_t = FamilyArg::Both)]
        family: FamilyArg,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Next hops, used in turn (`--via 192.0.2.2,2001:db8::2`); without it lines carry only
        /// the prefix.
        #[arg(long, value_delimiter = ',')]
        via: Vec<String>,
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum FamilyArg {
    Ipv4,
    Ipv6,
    Both,
}

#[derive(Subcommand)]
enum BenchCmd {
    /// LPM lookups/s and bytes per route, beside DPDK's rte_lpm/rte_lpm6 on the same table and
    /// address traces.
    Lpm {
        #[arg(long, value_enum, default_value_t = FamilyArg::Ipv4)]
        family: FamilyArg,
        #[arg(long, default_value = "xr6")]
        profile: Profile,
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        #[arg(long, default_value_t = 1 << 20)]
        trace: usize,
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// DPDK engines to run beside ours: lpm, fib (IPv4), lpm6, fib6 (IPv6); none to skip.
        #[arg(long, value_delimiter = ',')]
        dpdk: Vec<String>,
        #[arg(long, default_value = "target/bench")]
        workdir: PathBuf,
        #[arg(long)]
        json: bool,
        /// Keep Linerate's tables on 4 KiB pages (DPDK's harness runs with --no-huge).
        #[arg(long)]
        no_huge: bool,
        /// Also spread the same routes over this many tables (VRFs; ME-6's L3VPN has 192) and
        /// report their memory beside the one table's.
        #[arg(long, default_value_t = 0)]
        vrfs: usize,
    },
    /// DL-1 (and DL-2 with --cut): SNA endpoints on two devices, the PUs on the terminal LAN
    /// (in front of the router under test) and the host on the host LAN (behind its DLSw
    /// peer, or a redundant pair). DL-1 steps through frame rates in the report's PU/LU mixes
    /// and beyond, reading the router's CPU from its API; DL-2 cuts one peer of a pair and
    /// times until every circuit is back. Writes dl-1 (or dl-2) .md, .json and .svg.
    Dlsw {
        /// The device on the terminal LAN.
        #[arg(long)]
        term: String,
        /// The device on the host LAN.
        #[arg(long)]
        host: String,
        /// The router under test's API socket (its CPU and circuits).
        #[arg(long)]
        dut_api: PathBuf,
        /// Frames/s of each DL-1 step (default: the report's 24 ... 1,700, then 5,000 ...
        /// 200,000 until the CPU passes --stop-cpu).
        #[arg(long, value_delimiter = ',')]
        rates: Vec<u32>,
        #[arg(long, default_value_t = 8.0)]
        step_seconds: f64,
        /// PUs (circuits) at most beyond the report's mixes; then LUs go faster.
        #[arg(long, default_value_t = 10_000)]
        max_circuits: usize,
        /// DL-1 stops after the step where the router's CPU reached this (% of one CPU).
        #[arg(long, default_value_t = 90.0)]
        stop_cpu: f64,
        /// DL-2: the shell command that takes one peer of the redundant pair away.
        #[arg(long)]
        cut: Option<String>,
        /// DL-2: PUs (one LU each) and transactions per LU per second.
        #[arg(long, default_value_t = 100)]
        pus: usize,
        #[arg(long, default_value_t = 1.0)]
        tps: f64,
        /// DL-2: seconds of traffic before the cut, and the most to wait for recovery.
        #[arg(long, default_value_t = 3.0)]
        before_seconds: f64,
        #[arg(long, default_value_t = 30.0)]
        timeout_seconds: f64,
        #[arg(long, default_value = "dlsw-report")]
        out: PathBuf,
    },
    /// The DLSw engine alone on one core (no TCP, TAP or punt path): two engines joined, SNA
    /// PUs brought up through them, then transactions; frames/s per core and ns per frame.
    DlswEngine {
        #[arg(long, default_value_t = 10_000)]
        circuits: usize,
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        #[arg(long)]
        json: bool,
    },
    /// LDP signalling: two LDP speakers over loopback TCP signal N pseudowires to each other;
    /// the session's time to come up, then until every pseudowire is up on both sides.
    Ldp {
        #[arg(long, default_value_t = 3072)]
        pws: usize,
        /// Routes (prefix FECs) per speaker, labelled both ways besides the pseudowires.
        #[arg(long, default_value_t = 0)]
        fecs: usize,
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        #[arg(long)]
        json: bool,
    },
    /// Label switching beside plain IPv4 on one router, runs alternated round by round (each
    /// worker replaying frames to itself): swap, pop, push, VPN pop into a VRF, pseudowire
    /// imposition and disposition, over N labels, routes or pseudowires each.
    Mpls {
        /// Modes, comma separated: ip (the baseline), swap, pop, push, vpn, pw-encap, pw-decap.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "ip,swap,pop,push,vpn,pw-encap,pw-decap"
        )]
        modes: Vec<String>,
        /// Labels, labelled routes and pseudowires of each kind (ME-3: 3,072 pseudowires).
        #[arg(long, default_value_t = 3072)]
        entries: usize,
        /// Frame sizes (the IPv4 packet's, untagged), comma separated.
        #[arg(long, value_delimiter = ',', default_value = "64")]
        sizes: Vec<usize>,
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
        /// Rounds: every mode once per round, in turn; the figures are medians over rounds.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        #[arg(long, default_value_t = 1)]
        workers: usize,
        #[arg(long, default_value = "target/bench")]
        workdir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// The AAL5 SAR on one core: cells/s reassembled and segmented at 2-cell and 32-cell PDUs,
    /// against 16 OC-12c ports' cell rate.
    Atm {
        /// VCs taking turns cell by cell.
        #[arg(long, default_value_t = 16)]
        vcs: usize,
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        #[arg(long)]
        json: bool,
    },
    /// The MAC address table beside DPDK's rte_hash on the same addresses: learning new ones,
    /// looking known ones up, refreshing sources, two workers learning at once, bytes per MAC.
    Mac {
        #[arg(long, default_value_t = 1_000_000)]
        macs: usize,
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Skip rte_hash.
        #[arg(long)]
        no_dpdk: bool,
        #[arg(long, default_value = "target/bench")]
        workdir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Routes/s from zebra's FPM stream into the FIB: the XR-6 table sent over loopback TCP to
    /// Linerate's FPM server, timed from the first byte to the last route installed.
    Fpm {
        /// Multiplies XR-6's one-logical-router table (750,000 routes); 4 is the whole test.
        #[arg(long, default_value_t = 4.0)]
        scale: f64,
        /// Inline next hops instead of next-hop objects (`no fpm use-next-hop-groups`).
        #[arg(long)]
        no_nhg: bool,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        json: bool,
    },
    /// A soak of the FPM path under traffic: a zebra stand-in adds, replaces and withdraws routes
    /// and replaces next-hop groups for SECONDS while traffic flows to routes that never go away;
    /// then the FIB is compared with what was sent, the frames counted and memory sampled
    FpmChurn {
        #[arg(long, default_value_t = 60.0)]
        seconds: f64,
        /// Prefixes that carry traffic (replaced through their group, never withdrawn)
        #[arg(long, default_value_t = 1000)]
        stable: usize,
        /// Prefixes added, replaced and withdrawn at random
        #[arg(long, default_value_t = 50_000)]
        churned: usize,
        /// Route and next-hop messages per second
        #[arg(long, default_value_t = 20_000.0)]
        updates: f64,
        /// Traffic to the stable prefixes, frames/s
        #[arg(long, default_value_t = 20_000.0)]
        fps: f64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Where the JSON report goes (printed too)
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Classifications/s, build time and bytes of the ACL engine, beside DPDK's rte_acl on the same
    /// 5-tuple rules and key traces (every key's answer compared).
    Classify {
        /// Rule sets: xr5, acl, fw, ipc.
        #[arg(long, value_delimiter = ',', default_value = "xr5,acl,fw,ipc")]
        set: Vec<String>,
        /// Families: v4, v6.
        #[arg(long, value_delimiter = ',', default_value = "v4,v6")]
        family: Vec<String>,
        /// Rule counts (the final PERMIT or default rule included).
        #[arg(long, value_delimiter = ',', default_value = "1000,10000,50000")]
        rules: Vec<usize>,
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Keys in the trace.
        #[arg(long, default_value_t = 1 << 20)]
        trace: usize,
        /// Keys per classify_batch call.
        #[arg(long, default_value_t = 64)]
        batch: usize,
        /// Run rte_acl beside ours (the default).
        #[arg(long, overrides_with = "no_dpdk")]
        dpdk: bool,
        /// Skip rte_acl.
        #[arg(long, overrides_with = "dpdk")]
        no_dpdk: bool,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value = "target/bench")]
        workdir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// The embedded demo: scenario ME-1S (ME-1's 240,000 routes, 24 access + 8 uplink ports,
    /// backbone, every frame size 64..9,216, searched with the services off and then with the
    /// seed's 10,000-line ACL, 500-line QoS list and NetFlow on) with short trials, beside the
    /// Cisco ME 6524's table 1.
    Demo {
        /// Seconds per trial (the report used 300).
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
        /// Where the table, JSON and SVG chart go.
        #[arg(long, default_value = "target/bench")]
        out: PathBuf,
    },
    /// Run a seed report's test as a scenario (`--list` shows them all).
    Scenario(tester_cmd::ScenarioArgs),
    /// RFC 2544 against a router config of your own: streams from a YAML file (--streams) or a
    /// pattern (--pattern pair|mesh|backbone) between the neighbours on its mem ports.
    Run(tester_cmd::RunArgs),
    /// RFC 2544 against any device on real Linux interfaces (AF_PACKET): DUT.yaml describes it
    /// in the router config format, --port DUT_PORT=DEVICE cables it; ARP and ND for the
    /// emulated neighbours are answered; CPU per frame is reported.
    External(Box<tester_cmd::ExternalArgs>),
    /// The tester's own speed: generator and analyzer frames/s on one core.
    Tester(tester_cmd::CapacityArgs),
    /// Forwarding rate through mem ports with a full table (and route churn with --churn).
    Forward {
        #[arg(long, default_value = "xr6")]
        profile: Profile,
        #[arg(long, default_value_t = 4.0)]
        scale: f64,
        #[arg(long, default_value_t = 1)]
        workers: usize,
        /// Frame sizes, comma separated.
        #[arg(long, value_delimiter = ',', default_value = "64")]
        sizes: Vec<usize>,
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        #[arg(long)]
        churn: bool,
        /// Workers replay frames to themselves (no tester thread): for scaling across workers
        /// when the machine has no spare core.
        #[arg(long)]
        replay: bool,
        /// The ME 6524 services on both ports: a 10,000-line ACL, a 500-line re-marking QoS
        /// policy and NetFlow in (--services alone: all three), or some of them: a list of
        /// acl, qos, flow.
        #[arg(long, num_args = 0..=1, default_missing_value = "all", value_name = "LIST")]
        services: Option<String>,
        /// Distinct flows (5-tuples) in the traffic.
        #[arg(long, default_value_t = 4096)]
        flows: usize,
        /// Switch instead of route: two ports in a bridge domain, N hosts learned behind the
        /// far one (and N senders behind the near one), frames to each in turn (with --replay;
        /// --services binds the lists to both members).
        #[arg(long, default_value_t = 0)]
        bridge: usize,
        /// Replicate instead: a bridge snooping IGMP with p0 the source and N receiver ports,
        /// each joined to ME-11's 100 groups; 200 sources x 100 groups replayed in on p0 (with
        /// --replay). Mpps are copies out.
        #[arg(long, default_value_t = 0)]
        multicast: usize,
        /// Replication: sources sending to each group (ME-11's 200).
        #[arg(long, default_value_t = 200)]
        mcast_sources: u32,
        /// Replication: groups (ME-11's 100).
        #[arg(long, default_value_t = 100)]
        mcast_groups: u32,
        /// Replication: routed (ME-13) instead of switched: every port a routed interface,
        /// each (S,G) a multicast route from p0 to the receivers.
        #[arg(long)]
        mcast_routed: bool,
        /// The GGSN instead: N PDP contexts created through GTP-C, then uplink G-PDUs and
        /// downlink packets in turn, Gn and Gi on two VLANs of one port (with --replay).
        #[arg(long, default_value_t = 0)]
        gtp: usize,
        #[arg(long, default_value = "target/bench")]
        workdir: PathBuf,
        /// Print `show runtime` for each run: per graph node, calls, packets, vector size and
        /// ns per packet (sampled), summed over the workers.
        #[arg(long)]
        runtime: bool,
        #[arg(long)]
        json: bool,
    },
}

/// `linerate bench mpls`: every mode once per round, in turn, so that a noisy machine moves them
/// alike; medians over the rounds, and each mode's rate against `ip` of the same round.
#[allow(clippy::too_many_arguments)]
fn bench_mpls(
    modes: &[String],
    entries: usize,
    sizes: &[usize],
    seconds: f64,
    rounds: usize,
    workers: usize,
    workdir: PathBuf,
    json: bool,
) -> Result<(), String> {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    if !json {
        outln!(
            "MPLS beside IPv4 on one router, {entries} entries per mode, {workers} worker(s) replaying frames to themselves, {rounds} alternated rounds of {seconds} s (CPU: {}):",
            tester::run::cpu_model()
        );
        outln!("| frame | mode | Mpps (median) | min-max | ns/pkt | vs ip (median of rounds) | dropped |");
        outln!("|---:|---|---:|---:|---:|---:|---:|");
    }
    for &size in sizes {
        let o = bench::forward::Opts {
            profile: fib::gen::Profile::Xr6,
            scale: 1.0,
            workers,
            frame_size: size,
            seconds,
            churn: false,
            replay: true,
            services: Default::default(),
            flows: 4096,
            bridge_macs: 0,
            multicast_receivers: 0,
            multicast_sources: 0,
            multicast_groups: 0,
            multicast_routed: false,
            gtp_contexts: 0,
            workdir: workdir.clone(),
        };
        let dir = workdir.join(format!("mpls-{}", std::process::id()));
        let pool = dataplane::Pool::new(65536);
        let mut runs: Vec<Vec<bench::forward::Result>> = modes.iter().map(|_| Vec::new()).collect();
        for _ in 0..rounds.max(1) {
            for (m, r) in modes.iter().zip(runs.iter_mut()) {
                r.push(bench::mpls::run(&o, m, entries, &dir, &pool)?);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        let ip = modes.iter().position(|m| m == "ip");
        for (m, r) in modes.iter().zip(&runs) {
            let mpps: Vec<f64> = r.iter().map(|x| x.mpps).collect();
            let ratio = ip.map(|i| {
                median(
                    r.iter()
                        .zip(&runs[i])
                        .map(|(a, b)| a.mpps / b.mpps.max(1e-9))
                        .collect(),
                )
            });
            let dropped: u64 = r.iter().map(|x| x.lost).sum();
            let ns = median(r.iter().map(|x| x.busy_ns_per_packet).collect());
            let (lo, hi) = (
                mpps.iter().copied().fold(f64::MAX, f64::min),
                mpps.iter().copied().fold(0.0, f64::max),
            );
            if json {
                outln!(
                    "{}",
                    serde_json::json!({
                        "frame": size, "mode": m, "entries": entries, "workers": workers,
                        "mpps_median": median(mpps.clone()), "mpps": mpps, "ns_per_packet": ns,
                        "vs_ip": ratio, "dropped": dropped,
                    })
                );
            } else {
                outln!(
                    "| {size} | {m} | {:.2} | {lo:.2}-{hi:.2} | {ns:.1} | {} | {dropped} |",
                    median(mpps.clone()),
                    ratio.map_or("-".into(), |x| format!("{x:.2}x")),
                );
            }
            for x in r.iter().take(1) {
                for (name, n) in &x.drops {
                    if !json {
                        outln!("|  | {m}: router drops {name} {n} (first round) | | | | | |");
                    }
                }
            }
        }
    }
    Ok(())
}

/// Runs `cmd` if it is one of the router's client commands (it talks to the API); gives it
/// back otherwise.
fn client(api: &client_cmd::ApiArgs, cmd: Cmd) -> Result<Result<(), String>, Box<Cmd>> {
    Ok(match cmd {
        Cmd::Show { json, what } => client_cmd::show(api, json, what),
        Cmd::Clear { what } => client_cmd::clear(api, what),
        Cmd::Config { json, cmd } => client_cmd::config(api, json, cmd),
        Cmd::Route { cmd } => client_cmd::route(api, cmd),
        Cmd::Acl { cmd } => client_cmd::acl(api, cmd),
        Cmd::Port { cmd } => client_cmd::port(api, cmd),
        Cmd::Worker { cmd } => client_cmd::worker(api, cmd),
        Cmd::Capture(a) => client_cmd::capture(api, a),
        Cmd::Trace(a) => client_cmd::trace(api, a),
        other => return Err(Box::new(other)),
    })
}

/// One CLI command line (`show link p1`, `clear counters`) run against the router at
/// `socket` on behalf of `user`, returning what it printed: how the daemon's event manager
/// runs the commands its rules name, through the same command tree as the CLI.
pub fn run_line(line: &str, socket: &std::path::Path, user: &str) -> Result<String, String> {
    let words = shell_words::split(line).map_err(|e| format!("`{line}`: {e}"))?;
    let api = client_cmd::ApiArgs {
        socket: socket.to_path_buf(),
        api: None,
        token_file: None,
        lr: None,
        supervisor: control::config::lr::DEFAULT_SOCKET.into(),
        context: vec![("x-linerate-on-behalf".into(), user.to_string())],
    };
    run_words(&Cli::command(), &api, words, line)
}

/// `words` parsed with `tree` (the command tree, or the shell's with abbreviations) and run as
/// a client command with `api` (the line as typed goes with it, for accounting); what it
/// printed, captured.
pub fn run_words(
    tree: &clap::Command,
    api: &client_cmd::ApiArgs,
    words: Vec<String>,
    line: &str,
) -> Result<String, String> {
    let m = tree
        .clone()
        .try_get_matches_from(std::iter::once("linerate".to_string()).chain(words))
        .map_err(|e| e.render().to_string().trim_end().to_string())?;
    let cli = Cli::from_arg_matches(&m).map_err(|e| e.to_string())?;
    let api = api.with_command(line);
    let (res, text) = out::capture(|| client(&api, cli.cmd));
    match res {
        Ok(Ok(())) => Ok(text),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!(
            "`{line}`: not a command for a running router (show, clear, config, route, acl, port, worker, capture, trace)"
        )),
    }
}

/// The command as typed, without the options that only say where the router is (`--socket`,
/// `--api`, `--token-file`): what accounting logs.
fn command_words(args: impl Iterator<Item = String>) -> Vec<String> {
    const WHERE: [&str; 5] = ["--socket", "--api", "--token-file", "--supervisor", "--lr"];
    let mut out = Vec::new();
    let mut skip = false;
    for a in args {
        if std::mem::take(&mut skip) {
            continue;
        }
        if WHERE.contains(&a.as_str()) {
            skip = true;
        } else if !WHERE.iter().any(|w| a.starts_with(&format!("{w}="))) {
            out.push(a);
        }
    }
    out
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut api = cli.api.clone();
    // Accounting: the command as typed goes with each request, with the terminal it came from.
    let argv = command_words(std::env::args().skip(1));
    api = api.with_command(&shell_words::join(&argv));
    if let Some(t) = client_cmd::terminal() {
        api.context.push(("x-linerate-terminal".into(), t));
    }
    let res = match cli.cmd {
        Cmd::Daemon(a) => daemon_cmd::daemon(api.socket, a),
        Cmd::Supervisor(a) => lr_cmd::supervisor(a),
        Cmd::LrExec { group, netns, cmd } => lr_cmd::lr_exec(&group, &netns, &cmd),
        Cmd::Lr { cmd } => lr_cmd::lr(&api.supervisor, cmd),
        Cmd::Cli => shell::run(api),
        other => match client(&api, other) {
            Ok(r) => r,
            Err(other) => run(*other),
        },
    };
    out::flush();
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cmd: Cmd) -> Result<(), String> {
    match cmd {
        Cmd::Check { config } => {
            let cfg = control::config::load(&config).map_err(|e| e.to_string())?;
            // Route files are checked by loading them, as `run` would.
            let r = Router::build(cfg).map_err(|e| e.to_string())?;
            let (v4, v6) = r.route_counts();
            outln!(
                "{}: ok ({} interfaces, {v4} IPv4 and {v6} IPv6 routes)",
                config.display(),
                r.ifs.len()
            );
            Ok(())
        }
        Cmd::Run { config, json } => run_router(config, json),
        Cmd::Routes {
            cmd:
                RoutesCmd::Gen {
                    profile,
                    scale,
                    family,
                    seed,
                    via,
                    out,
                },
        } => {
            let spec = Spec {
                profile,
                seed,
                scale,
            };
            spec.validate()?;
            let v4 = if family != FamilyArg::Ipv6 {
                fib::gen::v4(&spec)
            } else {
                Vec::new()
            };
            let v6 = if family != FamilyArg::Ipv4 {
                fib::gen::v6(&spec)
            } else {
                Vec::new()
            };
            let f = std::fs::File::create(&out).map_err(|e| format!("{}: {e}", out.display()))?;
            fib::gen::write_route_lines(f, &v4, &v6, &via).map_err(|e| e.to_string())?;
            eprintln!(
                "{}: {} IPv4 and {} IPv6 routes ({})",
                out.display(),
                v4.len(),
                v6.len(),
                profile.name()
            );
            Ok(())
        }
        Cmd::Bench { cmd } => bench(cmd),
        _ => unreachable!("handled in main"),
    }
}

fn run_router(config: PathBuf, json: bool) -> Result<(), String> {
    let cfg = control::config::load(&config).map_err(|e| e.to_string())?;
    // `logging` as the daemon has it: ACL log records (and flow export) go out through the
    // services thread to the syslog file and servers.
    let logger = std::sync::Arc::new(
        control::syslog::Logger::new(cfg.logging.clone()).map_err(|e| format!("logging: {e}"))?,
    );
    let router = Router::build(cfg).map_err(|e| e.to_string())?;
    let (running, peers) = router
        .start(Default::default())
        .map_err(|e| e.to_string())?;
    if !peers.is_empty() {
        return Err("mem ports need a program that holds their other ends (linerate bench); use pcap ports with `run`".into());
    }
    let services = control::services::spawn_thread(
        router.services.plan.clone(),
        router.services.export.clone(),
        logger,
        router.services.stop.clone(),
    );
    let inputs = running.capture_reports();
    let s = running.join();
    // The workers are done: the services thread writes what they logged last, then ends.
    router
        .services
        .stop
        .store(true, std::sync::atomic::Ordering::Relaxed);
    services
        .join()
        .map_err(|_| "the services thread failed".to_string())?;
    let (v4, v6) = router.route_counts();
    if json {
        let ports: Vec<_> = router
            .port_slots
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|n| (i, n)))
            .map(|(i, n)| {
                serde_json::json!({"name": n, "rx_packets": s.rx_packets[i], "rx_bytes": s.rx_bytes[i],
                    "rx_errors": s.rx_errors[i], "tx_packets": s.tx_packets[i], "tx_bytes": s.tx_bytes[i]})
            })
            .collect();
        let drops: serde_json::Map<String, serde_json::Value> = DropReason::ALL
            .iter()
            .filter(|d| s.drop_count(**d) > 0)
            .map(|d| (d.name().to_string(), s.drop_count(*d).into()))
            .collect();
        let v = serde_json::json!({"ports": ports, "drops": drops, "icmp_sent": s.icmp_sent,
            "icmp_rate_limited": s.icmp_rate_limited, "echo_replies": s.echo_replies,
            "routes": {"ipv4": v4, "ipv6": v6}});
        outln!("{v}");
    } else {
        outln!(
            "{:<12} {:>12} {:>14} {:>10} {:>12} {:>14}",
            "port",
            "rx packets",
            "rx bytes",
            "rx errors",
            "tx packets",
            "tx bytes"
        );
        for (i, n) in router
            .port_slots
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|n| (i, n)))
        {
            outln!(
                "{:<12} {:>12} {:>14} {:>10} {:>12} {:>14}",
                n,
                s.rx_packets[i],
                s.rx_bytes[i],
                s.rx_errors[i],
                s.tx_packets[i],
                s.tx_bytes[i]
            );
        }
        outln!("\ndrops by reason:");
        for d in DropReason::ALL.iter().filter(|d| s.drop_count(**d) > 0) {
            outln!("  {:<20} {:>10}  {}", d.name(), s.drop_count(*d), d.text());
        }
        if s.total_drops() == 0 {
            outln!("  none");
        }
        outln!(
            "\nICMP errors sent {}, rate-limited {}, echo replies {}",
            s.icmp_sent,
            s.icmp_rate_limited,
            s.echo_replies
        );
        outln!("routes: {v4} IPv4, {v6} IPv6");
    }
    // A damaged input was reported on stderr as it was met; the run's result says so too, since
    // its counters then cover only the records before the damage.
    let damaged: Vec<String> = inputs
        .iter()
        .filter(|(_, r)| r.error().is_some())
        .map(|(port, _)| port.clone())
        .collect();
    if !damaged.is_empty() {
        return Err(format!(
            "the input capture of port(s) {} could not be read to its end (see above)",
            damaged.join(", ")
        ));
    }
    Ok(())
}

fn bench(cmd: BenchCmd) -> Result<(), String> {
    match cmd {
        BenchCmd::Dlsw {
            term,
            host,
            dut_api,
            rates,
            step_seconds,
            max_circuits,
            stop_cpu,
            cut,
            pus,
            tps,
            before_seconds,
            timeout_seconds,
            out,
        } => {
            let rep = match cut {
                Some(cut) => tester::dlsw::dl2(&tester::dlsw::Dl2Opts {
                    term_dev: term,
                    host_dev: host,
                    dut_api,
                    pus,
                    tps,
                    cut,
                    before_s: before_seconds,
                    timeout_s: timeout_seconds,
                    out: out.clone(),
                })?,
                None => {
                    let rates = if rates.is_empty() {
                        tester::dlsw::REPORT_RATES
                            .iter()
                            .chain(tester::dlsw::BEYOND_RATES.iter())
                            .copied()
                            .collect()
                    } else {
                        rates
                    };
                    tester::dlsw::dl1(&tester::dlsw::Dl1Opts {
                        term_dev: term,
                        host_dev: host,
                        dut_api,
                        rates,
                        step_s: step_seconds,
                        max_circuits,
                        stop_cpu,
                        out: out.clone(),
                    })?
                }
            };
            let name = rep["scenario"].as_str().unwrap_or("DL").to_lowercase();
            let md = std::fs::read_to_string(out.join(format!("{name}.md"))).unwrap_or_default();
            outln!("{md}");
            if rep["verdict"] != "pass" {
                return Err(format!(
                    "{}: verdict fail (see {})",
                    rep["scenario"],
                    out.display()
                ));
            }
            Ok(())
        }
        BenchCmd::DlswEngine {
            circuits,
            seconds,
            json,
        } => {
            let r = bench::dlsw::run(&bench::dlsw::Opts { circuits, seconds })?;
            if json {
                outln!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
                return Ok(());
            }
            outln!(
                "DLSw engine, {} circuits, 128-byte SNA frames, 1 core (target: 100,000 frames/s at 50% of a core):",
                r.circuits
            );
            outln!("| frames | engine s | frames/s (both engines) | ns/frame (one engine) | frames/s (one engine) | setup s |");
            outln!("|---:|---:|---:|---:|---:|---:|");
            outln!(
                "| {} | {:.3} | {:.0} | {:.0} | {:.0} | {:.2} |",
                r.frames,
                r.engine_s,
                r.frames_per_s_both,
                r.ns_per_frame_one,
                r.frames_per_s_one,
                r.setup_s
            );
            Ok(())
        }
        BenchCmd::Mpls {
            modes,
            entries,
            sizes,
            seconds,
            rounds,
            workers,
            workdir,
            json,
        } => bench_mpls(
            &modes, entries, &sizes, seconds, rounds, workers, workdir, json,
        ),
        BenchCmd::Ldp {
            pws,
            fecs,
            rounds,
            json,
        } => {
            let rows = bench::ldp::run(&bench::ldp::Opts { pws, fecs, rounds })?;
            for r in &rows {
                if json {
                    outln!("{}", serde_json::to_string(r).map_err(|e| e.to_string())?);
                } else {
                    outln!(
                        "LDP {} pseudowires, round {}: session up {:.1} ms, then all signalled both ways {:.1} ms; {} PDUs, {:.1} wire bytes and {} engine bytes per pseudowire",
                        r.pws, r.round, r.session_ms, r.signalled_ms, r.pdus_out, r.wire_bytes_per_pw, r.engine_bytes_per_pw
                    );
                    if r.fecs > 0 {
                        outln!(
                            "LDP {} routes, round {}: every route labelled both ways {:.1} ms after the session came up",
                            r.fecs, r.round, r.fecs_ms
                        );
                    }
                }
            }
            Ok(())
        }
        BenchCmd::Atm { vcs, seconds, json } => {
            let rows = bench::atm::run(&bench::atm::Opts { vcs, seconds })?;
            if json {
                for r in &rows {
                    outln!("{}", serde_json::to_string(r).map_err(|e| e.to_string())?);
                }
                return Ok(());
            }
            outln!(
                "AAL5 SAR, {vcs} VCs interleaved cell by cell, 1 core (target: 16 OC-12c ports, {:.1} M cells/s each way):",
                16.0 * 599.04e6 / 424.0 / 1e6
            );
            outln!("| direction | IP packet (B) | cells/PDU | M cells/s | M PDUs/s | ns/cell | OC-12c ports |");
            outln!("|---|---:|---:|---:|---:|---:|---:|");
            for r in &rows {
                outln!(
                    "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.1} |",
                    r.direction,
                    r.ip_bytes,
                    r.cells_per_pdu,
                    r.cells_per_s / 1e6,
                    r.pdus_per_s / 1e6,
                    r.ns_per_cell,
                    r.oc12_ports
                );
            }
            Ok(())
        }
        BenchCmd::Mac {
            macs,
            seconds,
            no_dpdk,
            workdir,
            json,
        } => {
            let o = bench::mac::Opts {
                macs,
                seconds,
                dpdk: !no_dpdk,
                workdir,
            };
            let rows = bench::mac::run(&o)?;
            if json {
                for r in &rows {
                    outln!("{}", serde_json::to_string(r).map_err(|e| e.to_string())?);
                }
                return Ok(());
            }
            outln!("MAC address table, {macs} addresses over 16 bridge domains, 1 core (M/s):");
            let base = rows.iter().find(|r| r.engine == "rte_hash").cloned();
            let m = |x: f64| format!("{:.2}", x / 1e6);
            let ratio = |x: f64, y: Option<f64>| match y {
                Some(y) if y > 0.0 => format!(" ({:.2}x)", x / y),
                _ => String::new(),
            };
            for r in &rows {
                let b = base.as_ref().filter(|_| r.engine != "rte_hash");
                outln!(
                    "{:<9} learn {}{}  lookup {}{}  lookup x{} {}  refresh {}  learn, 2 workers {}  learned {}/{}  {:.1} bytes/MAC",
                    r.engine,
                    m(r.learn_per_s),
                    ratio(r.learn_per_s, b.map(|b| b.learn_per_s)),
                    m(r.lookup_per_s),
                    ratio(r.lookup_per_s, b.map(|b| b.lookup_per_s)),
                    if r.engine == "rte_hash" { 32 } else { 256 },
                    r.lookup_bulk_per_s.map_or("-".into(), m),
                    r.refresh_per_s.map_or("-".into(), m),
                    r.learn_2_workers_per_s.map_or("-".into(), m),
                    r.learned,
                    r.macs,
                    r.bytes_per_mac()
                );
            }
            Ok(())
        }
        BenchCmd::Lpm {
            family,
            profile,
            scale,
            trace,
            seconds,
            dpdk,
            workdir,
            json,
            no_huge,
            vrfs,
        } => {
            fib::lpm::set_huge_pages(!no_huge);
            let fam = match family {
                FamilyArg::Ipv6 => bench::lpm::Family::V6,
                _ => bench::lpm::Family::V4,
            };
            let dpdk: Vec<String> = dpdk.into_iter().filter(|d| d != "none").collect();
            let o = bench::lpm::Opts {
                family: fam,
                profile,
                scale,
                trace_len: trace,
                seconds,
                dpdk,
                workdir,
            };
            let rows = bench::lpm::run(&o)?;
            outln!(
                "LPM lookups, 1 core, {} table, scale {scale} ({}); Linerate on {} pages, DPDK on 4 KiB pages (--no-huge):",
                profile.name(),
                if fam == bench::lpm::Family::V4 {
                    "IPv4"
                } else {
                    "IPv6"
                },
                if no_huge { "4 KiB" } else { "transparent huge" }
            );
            outln!(
                "{:<12} {:<12} {:>9} {:>11} {:>8} {:>12} {:>9} {:>9} {:>10} {:>9}",
                "trace",
                "engine",
                "routes",
                "Mlookups/s",
                "ns/lkp",
                "bytes",
                "B/route",
                "build s",
                "updates/s",
                "vs ours"
            );
            for r in &rows {
                let ours = rows
                    .iter()
                    .find(|x| x.trace == r.trace && x.engine == "linerate")
                    .map(|x| x.mlookups)
                    .unwrap_or(0.0);
                outln!(
                    "{:<12} {:<12} {:>9} {:>11.1} {:>8.2} {:>12} {:>9.1} {:>9.2} {:>10} {:>8.2}x",
                    r.trace,
                    r.engine,
                    r.routes,
                    r.mlookups,
                    r.ns_per_lookup,
                    r.bytes,
                    r.bytes as f64 / r.routes.max(1) as f64,
                    r.build_s,
                    if r.updates_per_s > 0.0 {
                        format!("{:.0}", r.updates_per_s)
                    } else {
                        "-".into()
                    },
                    ours / r.mlookups.max(1e-9)
                );
                if json {
                    eprintln!("{}", r.json(fam, &profile, scale));
                }
            }
            let one = rows.iter().find(|x| x.engine == "linerate");
            if let Some((one, per)) = one.and_then(|r| Some((r, r.routes.checked_div(vrfs)?))) {
                for max in [0, 4_000_000usize] {
                    // 0: each table sized for its own routes (twice them); else the router's default.
                    let cap = if max == 0 { 2 * per.max(1) } else { max };
                    let b = bench::lpm::split_bytes(&o, vrfs, cap)?;
                    outln!(
                        "the same routes in {} tables of {} (each sized for {} routes, {}-bit direct stage): {} bytes, {:.1} per route, {} of them direct stages; one table: {}",
                        b.tables,
                        b.routes_per_table,
                        b.max_routes,
                        b.direct_bits,
                        b.bytes,
                        b.bytes as f64 / (b.routes_per_table * b.tables).max(1) as f64,
                        b.direct_bytes,
                        one.bytes
                    );
                }
            }
            Ok(())
        }
        BenchCmd::FpmChurn {
            seconds,
            stable,
            churned,
            updates,
            fps,
            seed,
            out,
        } => {
            let r = bench::fpm_churn::run(&bench::fpm_churn::ChurnOpts {
                seconds,
                stable,
                churned,
                updates_per_s: updates,
                fps,
                seed,
            })?;
            let json = serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?;
            if let Some(p) = out {
                std::fs::write(&p, &json).map_err(|e| format!("{}: {e}", p.display()))?;
            }
            outln!(
                "FPM churn for {:.0} s: {} messages ({:.0}/s): {} route adds, {} replaces, {} \
                 withdrawals, {} group replaces, {} object deletes; traffic {} frames sent, {} \
                 received",
                r.seconds,
                r.messages_sent,
                r.updates_per_s,
                r.route_adds,
                r.route_replaces,
                r.route_withdrawals,
                r.group_replaces,
                r.object_deletes,
                r.frames_sent,
                r.frames_received
            );
            for c in &r.checks {
                outln!(
                    "  {}: expected {}, measured {}: {}",
                    c.name,
                    c.expected,
                    c.measured,
                    if c.pass { "PASS" } else { "FAIL" }
                );
            }
            for m in r.fib_mismatches.iter().take(10) {
                outln!("  mismatch: {m}");
            }
            outln!("Result: {}", r.verdict.to_uppercase());
            if r.verdict != "pass" {
                return Err("the soak failed its checks".into());
            }
            Ok(())
        }
        BenchCmd::Fpm {
            scale,
            no_nhg,
            seed,
            json,
        } => {
            let r = bench::fpm::run(&bench::fpm::FpmOpts {
                scale,
                nhg: !no_nhg,
                seed,
            })?;
            if json {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?
                );
            } else {
                outln!(
                    "FPM -> FIB: {} IPv4 + {} IPv6 routes ({} frames, {:.1} MB, next hops {}), 1 applier thread",
                    r.routes_v4,
                    r.routes_v6,
                    r.frames,
                    r.bytes as f64 / 1e6,
                    if no_nhg { "inline" } else { "as objects" }
                );
                outln!(
                    "  first byte to last route in the FIB: {:.3} s = {:.0} routes/s ({:.0} ns/route)",
                    r.seconds,
                    r.routes_per_s,
                    1e9 / r.routes_per_s
                );
                outln!(
                    "  client write {:.3} s; applying under the lock {:.3} s in {} batches, {} publishes; FIB {:.1} MB",
                    r.send_s,
                    r.apply_s,
                    r.batches,
                    r.publishes,
                    r.fib_bytes as f64 / 1e6
                );
            }
            Ok(())
        }
        BenchCmd::Classify {
            set,
            family,
            rules,
            seconds,
            trace,
            batch,
            dpdk: _,
            no_dpdk,
            seed,
            workdir,
            json,
        } => {
            let o = bench::classify::Opts {
                sets: set
                    .iter()
                    .map(|s| s.parse())
                    .collect::<Result<_, String>>()?,
                families: family
                    .iter()
                    .map(|f| bench::classify::parse_family(f))
                    .collect::<Result<_, String>>()?,
                sizes: rules,
                trace_len: trace,
                seconds,
                batch,
                dpdk: !no_dpdk,
                workdir,
                seed,
            };
            outln!(
                "Packet classification, 1 core, first match, {trace} keys, batches of {batch} (rte_acl: bursts of 64, 4 KiB pages):"
            );
            outln!(
                "{:<5} {:<5} {:>7} {:<9} {:>10} {:>8} {:>9} {:>9} {:>12} {:>9}",
                "set",
                "fam",
                "rules",
                "engine",
                "Mclass/s",
                "ns/cls",
                "vs acl",
                "build s",
                "bytes",
                "mismatch"
            );
            let rows = bench::classify::run(&o, |rows| {
                let acl = rows.iter().find(|x| x.engine == "rte_acl");
                for r in rows {
                    outln!(
                        "{:<5} {:<5} {:>7} {:<9} {:>10.2} {:>8.1} {:>9} {:>9.3} {:>12} {:>9}",
                        r.set,
                        r.family.name(),
                        r.rules,
                        r.engine,
                        r.mclass,
                        r.ns_per_class,
                        acl.map(|x| format!("{:.2}x", r.mclass / x.mclass.max(1e-9)))
                            .unwrap_or_else(|| "-".into()),
                        r.build_s,
                        r.bytes,
                        r.mismatches
                            .map(|m| m.to_string())
                            .unwrap_or_else(|| "-".into())
                    );
                    if json {
                        eprintln!("{}", r.json());
                    }
                }
            })?;
            if let Some(r) = rows.iter().find(|r| !r.alg.is_empty()) {
                outln!("rte_acl classify algorithm: {}", r.alg);
            }
            if rows.iter().any(|r| r.mismatches.unwrap_or(0) > 0) {
                return Err("the engines disagree on some keys (see mismatch)".into());
            }
            Ok(())
        }
        BenchCmd::Demo { seconds, out } => tester_cmd::demo(seconds, out),
        BenchCmd::Scenario(a) => tester_cmd::scenario(a),
        BenchCmd::Tester(a) => tester_cmd::capacity(a),
        BenchCmd::Run(a) => tester_cmd::custom(a),
        BenchCmd::External(a) => tester_cmd::external(*a),
        BenchCmd::Forward {
            profile,
            scale,
            workers,
            sizes,
            seconds,
            churn,
            replay,
            services,
            flows,
            bridge,
            multicast,
            mcast_sources,
            mcast_groups,
            mcast_routed,
            gtp,
            workdir,
            runtime,
            json,
        } => {
            let services = match services.as_deref().map(bench::forward::Services::parse) {
                None => bench::forward::Services::default(),
                Some(Ok(s)) => s,
                Some(Err(e)) => return Err(e),
            };
            if gtp > 0 {
                outln!(
                    "GGSN with each worker replaying frames to itself: {gtp} PDP contexts, uplink G-PDUs (decapsulated, routed) and downlink packets (encapsulated, routed) in turn, Gn and Gi on two VLANs of one port, {workers} worker(s); frame sizes are the Gi side's"
                );
            } else if multicast > 0 {
                outln!(
                    "Replicating with each worker replaying frames to itself: {mcast_sources} sources x {mcast_groups} groups {}, {workers} worker(s); Mpps are copies out",
                    if mcast_routed {
                        format!("routed, each (S,G) a multicast route to {multicast} ports")
                    } else {
                        format!("into a snooping bridge, every group joined on {multicast} ports")
                    }
                );
            } else if bridge > 0 {
                outln!(
                    "Switching with each worker replaying frames to itself: known unicast to {bridge} hosts learned behind one port (the MAC table holds {}), {workers} worker(s)",
                    2 * bridge
                );
            } else {
                outln!(
                    "Forwarding {}: {} table x{scale}, {workers} worker(s){}",
                    if replay {
                        "with each worker replaying frames to itself (the path's cost; frames arrive warm)"
                    } else {
                        "through mem ports from a tester thread"
                    },
                    profile.name(),
                    match (churn, services.any()) {
                        (true, true) =>
                            format!(", with route churn and services ({})", services.describe()),
                        (false, true) => format!(", with services ({})", services.describe()),
                        (true, false) => ", with route churn".into(),
                        (false, false) => String::new(),
                    }
                );
            }
            outln!(
                "{:>6} {:>9} {:>10} {:>10} {:>8} {:>9} {:>9} {:>10} {:>6}",
                "frame",
                if bridge > 0 { "macs" } else { "routes" },
                "Mpps",
                "Gbit/s",
                "ns/pkt",
                "cyc/pkt",
                "lost",
                "updates/s",
                "build"
            );
            for size in sizes {
                let o = bench::forward::Opts {
                    profile,
                    scale,
                    workers,
                    frame_size: size,
                    seconds,
                    churn,
                    replay,
                    services,
                    flows,
                    bridge_macs: bridge,
                    multicast_receivers: multicast,
                    multicast_sources: mcast_sources,
                    multicast_groups: mcast_groups,
                    multicast_routed: mcast_routed,
                    gtp_contexts: gtp,
                    workdir: workdir.clone(),
                };
                let r = bench::forward::run(&o)?;
                let gbps = r.mpps * 1e6 * (size as f64 + 20.0) * 8.0 / 1e9;
                outln!(
                    "{:>6} {:>9} {:>10.2} {:>10.2} {:>8.1} {:>9.1} {:>9} {:>10.0} {:>5.1}s",
                    size,
                    r.routes,
                    r.mpps,
                    gbps,
                    r.busy_ns_per_packet,
                    r.cycles_per_packet,
                    r.lost,
                    r.updates_per_s,
                    r.build_s
                );
                for (name, n) in &r.drops {
                    outln!("       router drops: {name} {n}");
                }
                if services.flow {
                    outln!(
                        "       flow cache: {} flows held, {} evicted early ({} flows offered)",
                        r.flows_in_cache,
                        r.flows_evicted,
                        r.flows_offered
                    );
                }
                if runtime {
                    outln!(
                        "       {:<16} {:>10} {:>11} {:>7} {:>10}",
                        "node",
                        "calls",
                        "packets",
                        "vector",
                        "ns/packet"
                    );
                    for (name, n) in &r.nodes {
                        let ns = n
                            .ns_per_packet()
                            .map_or("-".to_string(), |x| format!("{x:.1}"));
                        outln!(
                            "       {:<16} {:>10} {:>11} {:>7.1} {:>10}",
                            name,
                            n.calls,
                            n.packets,
                            n.vector_size(),
                            ns
                        );
                    }
                }
                let nodes: Vec<serde_json::Value> = r
                    .nodes
                    .iter()
                    .map(|(name, n)| {
                        serde_json::json!({"node": name, "calls": n.calls, "packets": n.packets,
                            "vector_size": n.vector_size(), "ns_per_packet": n.ns_per_packet()})
                    })
                    .collect();
                if json {
                    eprintln!(
                        "{}",
                        serde_json::json!({"bench": "forward", "name": format!("{size}b-{workers}t{workers}c-ip4{}x{scale}-mem", profile.name()),
                            "frame": size, "workers": workers, "routes": r.routes, "mpps": r.mpps, "sent": r.sent, "received": r.received,
                            "lost": r.lost, "busy_ns_per_packet": r.busy_ns_per_packet, "cycles_per_packet": r.cycles_per_packet,
                            "updates": r.updates, "updates_per_s": r.updates_per_s, "services": services.describe(),
                            "flows": r.flows_offered, "flows_in_cache": r.flows_in_cache, "flows_evicted": r.flows_evicted,
                            "nodes": nodes})
                    );
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounting_logs_the_command_without_where_the_router_is() {
        let w = |s: &str| command_words(s.split(' ').map(String::from));
        assert_eq!(w("--socket /x.sock show ports"), ["show", "ports"]);
        assert_eq!(
            w("show --api=1.2.3.4:80 --token-file t ip route"),
            ["show", "ip", "route"]
        );
    }

    #[test]
    fn a_command_line_runs_through_the_cli_tree_or_is_refused() {
        let sock = std::path::Path::new("/nonexistent/linerate.sock");
        let e = run_line("show interfaces", sock, "x").unwrap_err();
        assert!(e.contains("cannot reach the router"), "{e}");
        let e = run_line("bench lpm", sock, "x").unwrap_err();
        assert!(e.contains("not a command for a running router"), "{e}");
        let e = run_line("show nothing-such", sock, "x").unwrap_err();
        assert!(e.contains("unrecognized subcommand"), "{e}");
        let e = run_line("show \"unclosed", sock, "x").unwrap_err();
        assert!(e.contains("unclosed"), "{e}");
    }
}
