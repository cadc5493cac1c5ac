//! Logical routers as processes: `linerate supervisor` runs them, `linerate lr ...` starts,
//! stops, restarts and upgrades one through the supervisor's API, `linerate show
//! logical-routers` lists them, and `linerate -l LR show ...` talks to one LR's own API (its
//! socket is asked of the supervisor). `lr-exec` is the step between the supervisor and an
//! LR's router process (not for people).

use std::path::PathBuf;

use api::requests::{RestartRequest, UpgradeRequest};
use api::views::{LogicalRouterView, LogicalRoutersView};
use api::{Client, Endpoint, Render};
use clap::{Args, Subcommand};

#[derive(Args)]
pub struct SupervisorArgs {
    /// The logical-router file (see docs/logical-routers.md).
    #[arg(long)]
    pub config: PathBuf,
    /// Check the file (and every LR's config and the port inventory) and stop.
    #[arg(long)]
    pub check: bool,
}

#[derive(Subcommand)]
pub enum LrCmd {
    /// Start a stopped LR; waits until its API answers.
    Start { name: String },
    /// Stop an LR (SIGTERM, SIGKILL after 5 s); the supervisor leaves it stopped.
    Stop { name: String },
    /// Replace an LR's process without losing a frame (a new process takes over its tables,
    /// ports and twins; the old one exits), or with --cold stop it and start it.
    Restart {
        name: String,
        #[arg(long)]
        cold: bool,
    },
    /// Run an LR on another binary: a process on it takes over without losing a frame, or
    /// with --cold the old one stops first.
    Upgrade {
        name: String,
        #[arg(long)]
        binary: PathBuf,
        #[arg(long)]
        cold: bool,
    },
}

/// The supervisor's API.
pub fn supervisor_client(socket: &std::path::Path) -> Result<Client, String> {
    if !socket.exists() {
        return Err(format!(
            "{}: no supervisor is running (start one with `linerate supervisor --config FILE`)",
            socket.display()
        ));
    }
    Client::new(Endpoint::Unix(socket.to_path_buf()))
}

/// The API socket of LR `name`.
pub fn lr_socket(supervisor: &std::path::Path, name: &str) -> Result<PathBuf, String> {
    let c = supervisor_client(supervisor)?;
    let v: LogicalRouterView = c.view(&format!("/v1/logical-routers/{name}"))?;
    Ok(PathBuf::from(v.socket))
}

pub fn show(supervisor: &std::path::Path, json: bool) -> Result<(), String> {
    let c = supervisor_client(supervisor)?;
    let v: LogicalRoutersView = c.view("/v1/logical-routers")?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        out!("{}", v.render());
    }
    Ok(())
}

pub fn lr(supervisor: &std::path::Path, cmd: LrCmd) -> Result<(), String> {
    let c = supervisor_client(supervisor)?;
    let v: LogicalRouterView = match &cmd {
        LrCmd::Start { name } => c.call(&format!("/v1/logical-routers/{name}/start"), &())?,
        LrCmd::Stop { name } => c.call(&format!("/v1/logical-routers/{name}/stop"), &())?,
        LrCmd::Restart { name, cold } => c.call(
            &format!("/v1/logical-routers/{name}/restart"),
            &RestartRequest { cold: *cold },
        )?,
        LrCmd::Upgrade { name, binary, cold } => c.call(
            &format!("/v1/logical-routers/{name}/upgrade"),
            &UpgradeRequest {
                binary: binary.display().to_string(),
                cold: *cold,
            },
        )?,
    };
    out!(
        "{}",
        LogicalRoutersView {
            routers: vec![v.clone()],
            share_cores: false
        }
        .render()
    );
    let want = if matches!(cmd, LrCmd::Stop { .. }) {
        "stopped"
    } else {
        "running"
    };
    if v.state != want {
        return Err(format!(
            "{}: {} (not {want}); its log is beside its socket",
            v.name, v.state
        ));
    }
    Ok(())
}

/// `linerate supervisor`: checks the file, starts the LRs, serves the API until SIGTERM or
/// SIGINT, then stops every LR and removes what it made.
pub fn supervisor(a: SupervisorArgs) -> Result<(), String> {
    let text = control::config::read(&a.config).map_err(|e| e.to_string())?;
    let set = control::config::lr::parse_set(&text, &a.config).map_err(|e| e.to_string())?;
    if a.check {
        outln!(
            "{}: ok ({} logical routers)",
            a.config.display(),
            set.lrs.len()
        );
        return Ok(());
    }
    let exe = std::env::current_exe().map_err(|e| format!("this binary: {e}"))?;
    let socket = set.socket.clone();
    // Refused before any LR starts: one supervisor per socket.
    api_server::server::prepare_socket(&socket, "supervisor")?;
    let sup = control::lr::supervisor::Supervisor::start(set, exe)?;
    let server = match api_server::serve_supervisor(sup.clone(), socket.clone()) {
        Ok(s) => s,
        Err(e) => {
            sup.shutdown();
            return Err(e);
        }
    };
    eprintln!("linerate-supervisor: API on {}", socket.display());
    let waited = crate::daemon_cmd::wait_for_signal();
    eprintln!("linerate-supervisor: stopping every logical router");
    server.stop();
    sup.shutdown();
    waited
}

/// `lr-exec --group G --netns N -- BINARY ARGS`: joins the LR's control group, then becomes
/// `ip netns exec N BINARY ARGS` (same process: the supervisor watches this PID).
pub fn lr_exec(group: &str, netns: &str, cmd: &[String]) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let h = control::lr::cgroup::Hierarchy::detect().map_err(|e| format!("cgroups: {e}"))?;
    control::lr::cgroup::Group::existing(&h, group)
        .add(std::process::id())
        .map_err(|e| format!("cgroup {group}: {e}"))?;
    let err = std::process::Command::new("ip")
        .args(["netns", "exec", netns])
        .args(cmd)
        .exec();
    Err(format!("ip netns exec {netns}: {err}"))
}
