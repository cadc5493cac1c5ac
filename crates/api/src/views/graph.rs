//! The packet graph as the management plane sees it: drops by node and reason (`show errors`),
//! per-node runtime (`show runtime`) and packet traces (`trace`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::table;

/// One drop reason that counted, since `clear counters`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorView {
    pub node: String,
    /// The reason's stable machine name.
    pub reason: String,
    /// What it means, for people.
    pub text: String,
    pub count: u64,
    /// Per live worker (by id); removed workers' drops count in `count` only.
    pub per_worker: BTreeMap<usize, u64>,
}

impl Render for Vec<ErrorView> {
    fn render(&self) -> String {
        if self.is_empty() {
            return "no drops\n".into();
        }
        let rows = self
            .iter()
            .map(|e| {
                let per: Vec<String> = e
                    .per_worker
                    .iter()
                    .map(|(w, n)| format!("w{w}:{n}"))
                    .collect();
                vec![
                    e.node.clone(),
                    e.reason.clone(),
                    e.count.to_string(),
                    if per.is_empty() {
                        "-".into()
                    } else {
                        per.join(" ")
                    },
                    e.text.clone(),
                ]
            })
            .collect();
        table(&["Node", "Reason", "Count", "Per worker", "Meaning"], rows)
    }
}

/// One node's row of `show runtime`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeRuntime {
    pub node: String,
    pub calls: u64,
    pub packets: u64,
    /// Packets per call.
    pub vector_size: f64,
    /// Nanoseconds per packet over the timed calls (one vector in `timed_every`); None before
    /// any call of the node was timed.
    pub ns_per_packet: Option<f64>,
    pub timed_calls: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerRuntime {
    pub worker: usize,
    pub core: Option<usize>,
    pub nodes: Vec<NodeRuntime>,
}

/// `GET /v1/runtime`: per worker and node, since `clear runtime`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RuntimeView {
    /// One vector in this many is timed.
    pub timed_every: u64,
    pub workers: Vec<WorkerRuntime>,
    /// The live workers' rows summed.
    pub total: Vec<NodeRuntime>,
}

impl Render for RuntimeView {
    /// One table per worker, then the total, in the manner of VPP's.
    fn render(&self) -> String {
        let rows = |nodes: &[NodeRuntime]| -> Vec<Vec<String>> {
            nodes
                .iter()
                .map(|n| {
                    vec![
                        n.node.clone(),
                        n.calls.to_string(),
                        n.packets.to_string(),
                        format!("{:.1}", n.vector_size),
                        n.ns_per_packet.map_or("-".into(), |x| format!("{x:.1}")),
                    ]
                })
                .collect()
        };
        let head = ["Node", "Calls", "Packets", "Vector", "ns/packet"];
        let mut out = String::new();
        for w in &self.workers {
            let core = w
                .core
                .map_or("not pinned".to_string(), |c| format!("core {c}"));
            out += &format!("worker {} ({core})\n", w.worker);
            out += &table(&head, rows(&w.nodes));
            out += "\n";
        }
        out += "total\n";
        out += &table(&head, rows(&self.total));
        out += &format!(
            "(ns/packet from one vector in {}; calls and packets from all)\n",
            self.timed_every
        );
        out
    }
}

/// One node a traced packet went through.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepView {
    pub node: String,
    pub decision: String,
    pub next: String,
}

/// `POST /v1/trace` answers a list of these: one per packet that matched.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceView {
    pub id: u32,
    pub worker: u16,
    pub summary: String,
    pub steps: Vec<StepView>,
}

impl Render for Vec<TraceView> {
    fn render(&self) -> String {
        if self.is_empty() {
            return "no frame matched before the timeout\n".into();
        }
        let mut out = String::new();
        for t in self {
            out += &format!("Packet {} (worker {}): {}\n", t.id, t.worker, t.summary);
            for s in &t.steps {
                out += &format!("  {:<15} {} -> {}\n", s.node, s.decision, s.next);
            }
            out += "\n";
        }
        out
    }
}
