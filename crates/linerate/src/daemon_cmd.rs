//! `linerate daemon`: the router as a long-running service with its runtime API. It boots from
//! the state folder's running config when there is one (the config persists across restarts),
//! else from `--config`, and serves the API until SIGTERM or SIGINT.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use control::mgmt::commit::persisted_running;
use control::mgmt::Core;
use control::syslog::Logger;
use control::{Router, Runtime, StartOptions};

#[derive(Args)]
pub struct DaemonArgs {
    /// The config to boot from when the state folder holds none.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Where the running config and the commit history persist.
    #[arg(long, default_value = "/var/lib/linerate")]
    pub state: PathBuf,
    /// Keep nothing across restarts (boot from --config every time).
    #[arg(long)]
    pub no_state: bool,
    /// Also serve the API on TCP at this address; requests must carry a token of --token-file.
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// The TCP API's tokens: one `NAME ROLE SECRET` line each (ROLE admin or read-only; NAME is
    /// the user in accounting), or one secret alone (held by `token`, an admin).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Serve /metrics alone on TCP at this address (for Prometheus; no token).
    #[arg(long)]
    pub metrics: Option<SocketAddr>,
    /// CPU priority (nice) of the API's threads: workers keep the CPU under a polling storm.
    #[arg(long, default_value_t = 10)]
    pub nice: i32,
    /// Members of this Unix group may change things through the API socket (besides root and
    /// the daemon's own user); other users the socket lets in are read-only.
    #[arg(long, default_value = "linerate-admin")]
    pub admin_group: String,
    /// Take over from the linerate daemon running with this API socket, without losing a
    /// frame (a hitless restart or upgrade): its tables, ports and TAP twins pass to this
    /// process, and it exits once this one forwards.
    #[arg(long)]
    pub take_over: bool,
}

pub fn daemon(socket: PathBuf, a: DaemonArgs) -> Result<(), String> {
    let state_dir = (!a.no_state).then(|| a.state.clone());
    let mut persisted = state_dir.as_deref().and_then(persisted_running);
    // A commit still waiting for confirmation when the router stopped was never confirmed: boot
    // the commit before it, as its timer would have rolled it back.
    if let Some(dir) = state_dir.as_deref() {
        let h = control::mgmt::commit::History::load(dir)?;
        if let Some(last) = h.commits.last().filter(|c| c.status == "unconfirmed") {
            if let Some(prev) =
                h.commits.iter().rev().find(|c| {
                    c.id < last.id && c.status != "rolled-back" && c.status != "unconfirmed"
                })
            {
                eprintln!(
                    "linerate: commit {} was not confirmed before the router stopped; booting commit {}",
                    last.id, prev.id
                );
                persisted = Some((prev.text.clone(), prev.source.clone()));
            }
        }
    }
    let (text, source) = match (&persisted, &a.config) {
        (Some((text, source)), cfg) => {
            if let Some(c) = cfg {
                let given = std::fs::read_to_string(c).unwrap_or_default();
                if &given != text {
                    eprintln!(
                        "linerate: booting from the running config in {} (the last commit); {} differs: apply it with `linerate config apply`",
                        a.state.display(),
                        c.display()
                    );
                }
            }
            (text.clone(), source.clone())
        }
        (None, Some(c)) => {
            let text = control::config::read(c).map_err(|e| e.to_string())?;
            let abs = std::fs::canonicalize(c).map_err(|e| format!("{}: {e}", c.display()))?;
            (text, abs)
        }
        (None, None) => {
            return Err(format!(
                "no running config in {} and no --config to boot from",
                a.state.display()
            ))
        }
    };
    let tcp = match (a.listen, &a.token_file) {
        (Some(addr), Some(f)) => {
            let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
            let tokens = api_server::accounting::parse_tokens(&text, &f.display().to_string())?;
            Some((addr, tokens))
        }
        (Some(_), None) => return Err("--listen needs --token-file".into()),
        _ => None,
    };
    // Refused before anything is built, logged or persisted.
    let mut quiet: Option<control::handover::priority::Quiet> = None;
    let mut taker = if a.take_over {
        let t =
            control::handover::Taker::connect(&socket).map_err(|e| format!("take-over: {e}"))?;
        // Built while the old process forwards, on the same CPUs: at the lowest priority.
        quiet = Some(control::handover::priority::lower_to_idle());
        eprintln!(
            "linerate: taking over: {} FPM routes, {} API routes, {} port(s) with sockets",
            t.offer.fpm_routes,
            t.offer.api_routes.len(),
            t.offer.ports.len()
        );
        Some(t)
    } else {
        None
    };
    if taker.is_none()
        && socket.exists()
        && std::os::unix::net::UnixStream::connect(&socket).is_ok()
    {
        return Err(format!(
            "{}: another linerate is listening there",
            socket.display()
        ));
    }
    let cfg = control::config::parse(&text, &source).map_err(|e| e.to_string())?;
    if taker.is_some() {
        if let Some(why) = control::handover::unsupported(&cfg) {
            return Err(format!("take-over: {why}"));
        }
    }
    let logger = Arc::new(Logger::new(cfg.logging.clone()).map_err(|e| format!("logging: {e}"))?);
    let cp = cfg.control_plane.clone();
    let cfg_copy = cfg.clone();
    // The kernel's twins of the interfaces come first: FRR may already be waiting for them.
    // Taking over, they come from the old process once it lets go of them.
    let mut taps = Vec::new();
    for ic in &cfg.interfaces {
        taps.push(if cp.taps && taker.is_none() {
            Some(
                control::punt::Tap::create(&control::punt::TwinSpec::of(ic))
                    .map_err(|e| format!("interface {}: {e}", ic.name))?,
            )
        } else {
            None
        });
    }
    // FRR, if it runs already, may miss the addresses of twins it sees appear.
    control::punt::twins::announce_later(
        taps.iter()
            .zip(&cfg.interfaces)
            .filter_map(|(t, ic)| Some((t.as_ref()?.ifindex, control::punt::TwinSpec::of(ic))))
            .collect(),
    );
    let router = Router::build(cfg).map_err(|e| e.to_string())?;
    // pimd programs the twins' kernel multicast cache; the mirror copies it into the data plane.
    let mirror = if cp.taps {
        Some(control::mcast::mirror::Mirror::start(
            router.mcast.store.clone(),
        )?)
    } else {
        None
    };
    // The GGSN's GTP-C (and GTP-U signalling) sockets, on its address's twin.
    let ggsn = match &router.gtp {
        Some(_) if !cp.taps => {
            eprintln!("linerate: GGSN without TAP twins (control-plane.taps): GTP-C cannot reach it, only the user plane runs");
            None
        }
        Some(g) => {
            let svc = control::gtp::service::Service::start(g.clone(), Some(logger.clone()))?;
            eprintln!("linerate: GGSN GTP-C on {}", svc.control);
            Some((svc, g.clone()))
        }
        None => None,
    };
    let hub = dataplane::punt::PuntHub::new(dataplane::punt::PuntConfig::default());
    let mut runtime = Runtime::start(
        &router,
        StartOptions {
            exit_when_drained: false,
            punt: Some(hub.clone()),
            adopt: taker
                .as_mut()
                .map(|t| control::runtime::handover::Adopted::new(t.take_port_fds())),
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let pool = runtime.pool.clone();
    let shared = router.shared.clone();
    let peers = runtime.take_peers();
    if !peers.is_empty() {
        eprintln!(
            "linerate: {} mem port(s) have no tester on their far end (run the tester with `linerate bench`)",
            peers.len()
        );
    }
    let core =
        Core::new(router, runtime, text, source, logger, state_dir).map_err(|e| e.to_string())?;
    let mut twins: std::collections::HashMap<u32, String> = taps
        .iter()
        .flatten()
        .map(|t| (t.ifindex, t.name.clone()))
        .collect();
    // Taking over: the old process's tables beyond the config, then its data plane.
    let mut fpm_installed = false;
    let mut known = Vec::new();
    if let Some(t) = taker.as_mut() {
        if cp.taps {
            twins = control::punt::twins::kernel_indexes(&cfg_copy);
        }
        for r in &t.offer.api_routes {
            if let Err(e) = core.route_add(r) {
                eprintln!("linerate: take-over: API route {}: {e}", r.prefix);
            }
        }
        if let Some(f) = &cp.fpm {
            let n = control::fpm::install_table(&core, f, twins.clone(), &t.fpm_table)?;
            eprintln!("linerate: take-over: {n} FPM routes installed");
            fpm_installed = true;
        }
        t.fpm_table = Vec::new();
        // Prepared: the workers (idle until then) back to full priority before the ports are
        // ours, so that they poll the moment they are given the queues.
        if let Some(q) = &quiet {
            q.raise_workers();
        }
        let mut got = t.release().map_err(|e| format!("take-over: {e}"))?;
        {
            let mut s = core.lock("takeover.release");
            let n = s.router.learn_neighbors(&got.neighbors);
            s.router.publish().map_err(|e| e.to_string())?;
            s.runtime.release_held(&got.queues);
            known = s
                .router
                .learned
                .iter()
                .map(|(&(ifx, ip), &mac)| (ifx, ip, mac))
                .collect();
            let waited = control::handover::wall_ns().saturating_sub(got.stopped_at_ns);
            eprintln!(
                "linerate: took over the data plane: {} receive queues, {n} neighbours; the old process let go in {} us; frames waited in their rings {} us between the old workers' last burst and the new ones' first",
                got.queues.len(),
                got.stop_us,
                waited / 1000
            );
        }
        for (slot, ic) in taps.iter_mut().zip(&cfg_copy.interfaces) {
            if !cp.taps {
                continue;
            }
            let spec = control::punt::TwinSpec::of(ic);
            *slot = Some(match got.taps.remove(&spec.host) {
                Some(t) => t,
                None => control::punt::Tap::create(&spec)
                    .map_err(|e| format!("interface {}: {e}", ic.name))?,
            });
        }
    }
    let punt = control::punt::PuntPlane::start(
        hub,
        pool,
        shared,
        cp.neighbor,
        taps,
        known,
        Box::new(control::mgmt::CoreNeighbors(std::sync::Arc::downgrade(
            &core,
        ))),
    )?;
    // GTP-C requests answered in the punt thread, not through the twin and the socket.
    if let Some((svc, g)) = &ggsn {
        punt.answer_gtpc(control::gtp::direct::Direct::new(
            g.clone(),
            svc.control_socket.clone(),
        ));
    }
    // DLSw: LLC frames from the punt thread, SSP on the local peer's twin.
    let dlsw = match &cfg_copy.dlsw {
        Some(d) => {
            let dl = control::dlsw::Dlsw::new(d, control::dlsw::lan_ports(&cfg_copy));
            punt.serve_dlsw(dl.clone());
            let svc = control::dlsw::service::Service::start(
                dl.clone(),
                Box::new(punt.sender()),
                Some(core.logger.clone()),
            )?;
            eprintln!("linerate: DLSw on {}:{}", d.local_peer, packet::dlsw::PORT);
            *core.dlsw.lock().unwrap_or_else(|e| e.into_inner()) = Some(dl);
            Some(svc)
        }
        None => None,
    };
    *core.punt.lock().unwrap_or_else(|e| e.into_inner()) = Some(punt);
    // The old process may now stop; its API socket and FPM port are free once it has gone.
    if let Some(t) = taker.take() {
        t.taken_over(std::time::Duration::from_secs(10))
            .map_err(|e| format!("take-over: {e}"))?;
    }
    // LDP: hellos and sessions on the transport address's twin; what it signals goes to the
    // router, which republishes the pseudowires.
    let ldp = match (
        control::ldp::engine_cfg(&cfg_copy),
        cfg_copy.mpls.as_ref().and_then(|m| m.ldp.clone()),
    ) {
        (Some(ecfg), Some(lcfg)) => {
            let l = control::ldp::Ldp::new(lcfg, ecfg);
            let c = || std::sync::Arc::downgrade(&core);
            let (c1, c2, c3, c4) = (c(), c(), c(), c());
            let hooks = control::ldp::service::Hooks {
                signalled: Box::new(move |s| {
                    if let Some(c) = c1.upgrade() {
                        c.ldp_signalled(s);
                    }
                }),
                circuits: Box::new(move || {
                    c2.upgrade().map(|c| c.pw_circuits()).unwrap_or_default()
                }),
                routes: Box::new(move |since| c3.upgrade().and_then(|c| c.ldp_routes(since))),
                bindings: Box::new(move |b| {
                    if let Some(c) = c4.upgrade() {
                        c.ldp_fec_bindings(b);
                    }
                }),
            };
            let svc =
                control::ldp::service::Service::start(l.clone(), hooks, Some(core.logger.clone()))?;
            eprintln!("linerate: LDP on {}:{}", l.cfg.transport, packet::ldp::PORT);
            *core.ldp.lock().unwrap_or_else(|e| e.into_inner()) = Some(l);
            Some(svc)
        }
        _ => None,
    };
    // L3VPN: VPN routes from GoBGP's API into the VRFs, the VRFs' routes out to it.
    let l3vpn = match &cfg_copy.l3vpn {
        Some(l) => {
            let svc = control::l3vpn::service::Service::start(&core, l.clone())?;
            eprintln!("linerate: L3VPN through GoBGP's API at {}", l.api);
            Some(svc)
        }
        None => None,
    };
    let links = control::link::LinkWatch::start(&cfg_copy, std::sync::Arc::downgrade(&core))?;
    *core.links.lock().unwrap_or_else(|e| e.into_inner()) = links;
    if let Some(f) = &cp.fpm {
        if fpm_installed {
            control::fpm::start_server(&core, f)?;
        } else {
            control::fpm::start(&core, f, twins)?;
        }
        eprintln!("linerate: FPM on {}", f.listen);
    }
    let server = api_server::serve(
        core.clone(),
        api_server::ServeOptions {
            socket: socket.clone(),
            tcp,
            metrics: a.metrics,
            nice: a.nice,
            admin_group: a.admin_group.clone(),
        },
    )?;
    eprintln!("linerate: API on {}", socket.display());
    // Started: whatever is left at the lowest priority of a take-over goes back.
    if let Some(q) = quiet.take() {
        q.restore();
    }
    // IF-MIB through snmpd, once the router answers (and, taking over, once the old process
    // has let go of its registration: the subagent retries until it may register).
    let snmp = match &cfg_copy.snmp {
        Some(c) => {
            let a = control::snmp::Subagent::start(c.clone(), Arc::downgrade(&core))?;
            eprintln!("linerate: SNMP (IF-MIB) through {}", c.agentx);
            Some(a)
        }
        None => None,
    };
    // The event manager runs the commands its rules name through the API, as the CLI does.
    let sock = socket.clone();
    core.start_events(Some(std::sync::Arc::new(move |line: &str, user: &str| {
        crate::run_line(line, &sock, user)
    })))?;
    // A process that takes over later finds this one here.
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let done_tx = std::sync::Mutex::new(Some(done_tx));
    let giver = control::handover::Giver::start(
        &socket,
        Arc::downgrade(&core),
        Box::new(move |conn| {
            if let Some(t) = done_tx.lock().unwrap_or_else(|e| e.into_inner()).take() {
                let _ = t.send(conn);
            }
        }),
    )
    .map_err(|e| format!("hand-over socket: {e}"))?;
    let handed = wait_for_signal_or(done_rx)?;
    if handed.is_some() {
        // What is left is teardown, on the CPUs the new process's workers forward on.
        let _ = control::handover::priority::lower_to_idle();
    }
    drop(giver);
    eprintln!(
        "linerate: {}",
        if handed.is_some() {
            "handed over to the new process; stopping"
        } else {
            "stopping"
        }
    );
    drop(snmp);
    server.stop();
    core.shutdown();
    drop(mirror);
    drop(ggsn);
    drop(dlsw);
    drop(ldp);
    drop(l3vpn);
    // Closed last: the new process binds the API socket once it sees this close.
    drop(handed);
    Ok(())
}

/// Waits for SIGTERM or SIGINT, or for a new process to have taken over (its connection).
fn wait_for_signal_or<T>(done: tokio::sync::oneshot::Receiver<T>) -> Result<Option<T>, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| e.to_string())?;
        tokio::select! {
            _ = term.recv() => Ok(None),
            _ = tokio::signal::ctrl_c() => Ok(None),
            c = done => Ok(c.ok()),
        }
    })
}

pub fn wait_for_signal() -> Result<(), String> {
    // A channel whose sender is kept: nothing but a signal ends the wait.
    let (_keep, never) = tokio::sync::oneshot::channel::<()>();
    wait_for_signal_or(never).map(|_| ())
}
