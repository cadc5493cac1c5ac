//! `show processes cpu`: per thread (workers, the router's own, FRR's daemons), CPU used and
//! work done over 5 s, 1 min and 5 min.

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::{opt, table};

/// What a row is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThreadKind {
    Worker,
    Control,
    Frr,
}

impl ThreadKind {
    pub fn name(self) -> &'static str {
        match self {
            ThreadKind::Worker => "worker",
            ThreadKind::Control => "control",
            ThreadKind::Frr => "frr",
        }
    }
}

/// One row: percentages of one CPU, per window (5 s, 1 min, 5 min).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuRow {
    pub name: String,
    pub kind: ThreadKind,
    /// Thread id, or process id for FRR.
    pub id: u32,
    pub core: Option<usize>,
    /// CPU used, % of one CPU, over 5 s, 1 min, 5 min.
    pub cpu: [f64; 3],
    /// Work done (workers; for other threads the CPU they used, as they block when idle).
    pub busy: [f64; 3],
    /// CPU and work over the last sample period (about a second): what the event manager's
    /// CPU rules read.
    #[serde(default)]
    pub cpu_1s: f64,
    #[serde(default)]
    pub busy_1s: f64,
}

/// `GET /v1/cpu`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuView {
    /// Seconds of history each window actually covers (less than the window early on).
    pub covered_s: [f64; 3],
    pub rows: Vec<CpuRow>,
}

impl Render for CpuView {
    fn render(&self) -> String {
        let pct = |x: f64| format!("{x:.1}%");
        let rows = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.name.clone(),
                    r.kind.name().into(),
                    r.id.to_string(),
                    opt(&r.core),
                    pct(r.busy[0]),
                    pct(r.busy[1]),
                    pct(r.busy[2]),
                    pct(r.cpu[0]),
                    pct(r.cpu[1]),
                    pct(r.cpu[2]),
                ]
            })
            .collect();
        format!(
            "{}(busy: work done, for a worker the vectors that carried frames; cpu: time on a CPU, \
             polling included; % of one CPU; history: {:.0} s)\n",
            table(
                &["Thread", "Kind", "Id", "Core", "Busy 5s", "1m", "5m", "CPU 5s", "1m", "5m"],
                rows
            ),
            self.covered_s[2]
        )
    }
}
