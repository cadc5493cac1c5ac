//! The supervisor's answers: its logical routers (`show logical-routers`).

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::table;

/// `GET /v1/logical-routers`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogicalRoutersView {
    pub routers: Vec<LogicalRouterView>,
    /// LRs may share CPUs (`supervisor.share-cores`): their cpusets overlap.
    pub share_cores: bool,
}

/// One LR, `GET /v1/logical-routers/{name}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogicalRouterView {
    pub name: String,
    /// `running` (its API answers), `starting`, `backoff` (exited; restarted after
    /// `backoff_s`), `stopped`.
    pub state: String,
    pub pid: Option<u32>,
    pub namespace: String,
    /// Its cpuset; empty: every CPU.
    pub cpus: Vec<usize>,
    pub memory_limit: Option<u64>,
    /// Bytes its processes use now (the group's count: RSS and page cache).
    pub memory_used: u64,
    /// Its share of one CPU over the last second, in percent.
    pub cpu_percent: f64,
    /// CPU seconds since its group was made.
    pub cpu_seconds: f64,
    pub uptime_s: u64,
    /// Times the supervisor restarted it after it exited on its own.
    pub restarts: u32,
    /// Times a new process took over from the running one (hitless restarts and upgrades).
    #[serde(default)]
    pub handovers: u32,
    /// From process start to its API answering, the last time it started.
    pub start_ms: Option<u64>,
    /// How its last process ended (`exit status 1`, `killed by signal 9`).
    pub last_exit: Option<String>,
    /// Seconds until a restart, in state `backoff`.
    pub backoff_s: Option<f64>,
    /// Its API socket (`linerate -l NAME ...` talks to it).
    pub socket: String,
    pub config: String,
    /// The binary it runs (a new one after `linerate lr upgrade`).
    pub binary: String,
    /// Its kernel devices (af_packet/af_xdp ports), moved into its namespace.
    pub devices: Vec<String>,
}

fn mib(b: u64) -> String {
    format!("{:.1}M", b as f64 / (1u64 << 20) as f64)
}

fn cpus(c: &[usize]) -> String {
    if c.is_empty() {
        return "all".into();
    }
    c.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl Render for LogicalRoutersView {
    fn render(&self) -> String {
        let rows = self
            .routers
            .iter()
            .map(|r| {
                vec![
                    r.name.clone(),
                    match r.backoff_s {
                        Some(s) if r.state == "backoff" => format!("backoff ({s:.1} s)"),
                        _ => r.state.clone(),
                    },
                    r.pid.map_or("-".into(), |p| p.to_string()),
                    r.namespace.clone(),
                    cpus(&r.cpus),
                    format!(
                        "{}/{}",
                        mib(r.memory_used),
                        r.memory_limit.map_or("-".into(), mib)
                    ),
                    format!("{:.1}%", r.cpu_percent),
                    format!("{} s", r.uptime_s),
                    r.restarts.to_string(),
                    r.handovers.to_string(),
                    r.start_ms.map_or("-".into(), |m| format!("{m} ms")),
                    r.last_exit.clone().unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        let mut out = table(
            &[
                "LR",
                "State",
                "PID",
                "Netns",
                "CPUs",
                "Memory",
                "CPU",
                "Uptime",
                "Restarts",
                "Hand-overs",
                "Start",
                "Last exit",
            ],
            rows,
        );
        if self.share_cores {
            out.push_str("LRs share CPUs (supervisor.share-cores)\n");
        }
        out
    }
}
