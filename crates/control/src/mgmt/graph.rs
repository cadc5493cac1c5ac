//! `show runtime`: per worker and graph node, the calls (vectors), packets, average vector size
//! and time per packet, as VPP's `show runtime` gives them; and `clear runtime`. The counts are
//! the workers' own (see `dataplane::graph::runtime` for how they are collected and what they
//! cost); a show subtracts what they were at the last clear, metrics never do.

pub use api::views::{NodeRuntime, RuntimeView, WorkerRuntime};
use dataplane::graph::{row_names, NodeSnapshot, NODE_ROWS, TIMED_EVERY};

use super::Core;
use crate::syslog::Severity;

fn view(name: &'static str, s: &NodeSnapshot) -> NodeRuntime {
    NodeRuntime {
        node: name.into(),
        calls: s.calls,
        packets: s.packets,
        vector_size: (s.vector_size() * 100.0).round() / 100.0,
        ns_per_packet: s.ns_per_packet().map(|x| (x * 100.0).round() / 100.0),
        timed_calls: s.timed_calls,
    }
}

/// Builds the view from each worker's rows (already since the last clear).
pub fn build(workers: Vec<(usize, Option<usize>, [NodeSnapshot; NODE_ROWS])>) -> RuntimeView {
    let mut total = [NodeSnapshot::default(); NODE_ROWS];
    let workers = workers
        .into_iter()
        .map(|(worker, core, rows)| {
            for (t, r) in total.iter_mut().zip(rows.iter()) {
                t.add(r);
            }
            WorkerRuntime {
                worker,
                core,
                nodes: row_names()
                    .zip(rows.iter())
                    .map(|(n, r)| view(n, r))
                    .collect(),
            }
        })
        .collect();
    RuntimeView {
        timed_every: TIMED_EVERY,
        workers,
        total: row_names()
            .zip(total.iter())
            .map(|(n, r)| view(n, r))
            .collect(),
    }
}

fn read(c: &dataplane::WorkerCounters) -> [NodeSnapshot; NODE_ROWS] {
    NodeSnapshot::read_rows(&c.nodes)
}

/// Every live worker's rows as they are now (what a clear subtracts from then on).
pub fn baselines(
    rt: &crate::runtime::Runtime,
) -> std::collections::HashMap<usize, [NodeSnapshot; NODE_ROWS]> {
    rt.worker_counters()
        .into_iter()
        .map(|(id, c)| (id, read(&c)))
        .collect()
}

impl Core {
    pub fn runtime(&self) -> RuntimeView {
        let s = self.lock("show.runtime");
        let cores: std::collections::HashMap<usize, Option<usize>> = s
            .runtime
            .workers()
            .into_iter()
            .map(|w| (w.id, w.core))
            .collect();
        let rows = s
            .runtime
            .worker_counters()
            .into_iter()
            .map(|(id, c)| {
                let now = read(&c);
                let base = s.runtime_baseline.get(&id);
                let rows = std::array::from_fn(|i| match base {
                    Some(b) => now[i].since(&b[i]),
                    None => now[i],
                });
                (id, cores.get(&id).copied().flatten(), rows)
            })
            .collect();
        build(rows)
    }

    /// `show runtime` counts from now on.
    pub fn clear_runtime(&self) {
        let mut s = self.lock("runtime.clear");
        s.runtime_baseline = baselines(&s.runtime);
        self.logger.log(
            Severity::Informational,
            "RUNTIME_CLEARED",
            &[],
            "runtime counters cleared",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane::graph::{NodeId, TX_NODE_NAME};

    #[test]
    fn every_node_has_a_row_and_totals_add_the_workers() {
        let mut a = [NodeSnapshot::default(); NODE_ROWS];
        a[0] = NodeSnapshot {
            calls: 2,
            packets: 512,
            timed_calls: 1,
            timed_packets: 256,
            timed_ns: 2560,
        };
        let mut b = a;
        b[0].packets = 256;
        let v = build(vec![(0, Some(1), a), (1, None, b)]);
        let names: Vec<_> = v.total.iter().map(|n| n.node.as_str()).collect();
        for &n in NodeId::ALL {
            assert!(names.contains(&n.name()), "{} missing", n.name());
        }
        assert!(names.contains(&TX_NODE_NAME));
        assert_eq!(v.total[0].packets, 768);
        assert_eq!(v.total[0].calls, 4);
        assert_eq!(v.workers[0].nodes[0].vector_size, 256.0);
        assert_eq!(v.workers[0].nodes[0].ns_per_packet, Some(10.0));
        assert_eq!(v.workers[0].nodes[1].ns_per_packet, None);
    }
}
