//! The router's side of the control plane: the FPM session with zebra (`show fpm`) and the punt
//! path (`show punt`: the punt table, the TAP twins, neighbour resolution).

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::{opt, pairs, table};

/// `GET /v1/fpm`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FpmStatus {
    pub listen: String,
    pub connected: bool,
    pub peer: Option<String>,
    pub connections: u64,
    pub frames: u64,
    pub bytes: u64,
    pub malformed: u64,
    pub routes_installed: u64,
    pub routes_removed: u64,
    /// Routes the rib holds (installed, or waiting for a next hop).
    pub routes: u64,
    pub next_hop_sets: u64,
    /// Prefixes the config already holds: left to the config.
    pub conflicts: u64,
    /// Routes whose next hop fits no interface, or whose table maps to no VRF.
    pub unresolved: u64,
    /// Routes and next-hop objects with MPLS labels (zebra replays those the kernel refused
    /// when it reconnects): not installed, as forwarding them unlabelled would be wrong.
    #[serde(default)]
    pub labelled: u64,
    /// Next-hop objects changed in place (each one write, whatever the routes using it).
    pub next_hop_changes: u64,
    pub stale_sweeps: u64,
    pub swept: u64,
    /// Seconds until the pending sweep, if one is pending.
    pub sweep_in_s: Option<f64>,
    /// Time spent applying batches under the lock, in total.
    pub apply_ms: f64,
    pub batches: u64,
    /// Messages (routes and next-hop objects) applied.
    pub messages: u64,
    /// Routes applied but not yet visible to the workers.
    pub unpublished: bool,
    pub publishes: u64,
}

impl Render for FpmStatus {
    fn render(&self) -> String {
        pairs(
            ["FPM", "Value"],
            vec![
                ("listening on", self.listen.clone()),
                ("connected", self.connected.to_string()),
                ("zebra", opt(&self.peer)),
                ("connections", self.connections.to_string()),
                ("frames", self.frames.to_string()),
                ("bytes", self.bytes.to_string()),
                ("malformed (connection reset)", self.malformed.to_string()),
                ("routes held", self.routes.to_string()),
                ("routes installed", self.routes_installed.to_string()),
                ("routes removed", self.routes_removed.to_string()),
                ("next-hop sets", self.next_hop_sets.to_string()),
                ("left to the config", self.conflicts.to_string()),
                ("unresolved", self.unresolved.to_string()),
                ("labelled (not installed)", self.labelled.to_string()),
                ("stale sweeps", self.stale_sweeps.to_string()),
                ("swept", self.swept.to_string()),
                (
                    "sweep due in (s)",
                    self.sweep_in_s.map_or("-".into(), |s| format!("{s:.1}")),
                ),
                ("apply time (ms)", format!("{:.1}", self.apply_ms)),
            ],
        )
    }
}

/// One class of the punt table: its policer (per worker) and what it did, summed over every
/// worker that ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PuntClassView {
    /// The class's stable name (`arp`, `nd`, `routing`, `local`, ...).
    pub class: String,
    /// Packets per second, per worker.
    pub rate: u64,
    pub burst: u64,
    pub punted: u64,
    pub policed: u64,
    /// Passed the policer but found the punt queue full.
    pub queue_full: u64,
    /// What the class carries, for people.
    pub text: String,
}

/// One TAP twin.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TapView {
    pub interface: String,
    pub tap: String,
    pub ifindex: u32,
    pub to_kernel: u64,
    pub from_kernel: u64,
    /// Frames the kernel would not take (its queue full).
    pub to_kernel_dropped: u64,
}

/// Neighbour resolution on the punt path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NeighborStats {
    pub requests_sent: u64,
    pub replies_sent: u64,
    pub learned: u64,
    pub lost: u64,
    pub failed: u64,
    pub held: u64,
    pub hold_dropped: u64,
    pub released: u64,
    pub malformed: u64,
}

/// `GET /v1/punt`. Without a punt path (no TAP twins, no neighbour resolution) only the
/// classes are filled: the slow path's classes are policed, the rest have no service.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PuntView {
    pub classes: Vec<PuntClassView>,
    pub punt_path: bool,
    /// Frames the control plane sent out through the workers.
    #[serde(default)]
    pub injected: u64,
    /// Injected frames lost to a full inject ring (or no worker to send them).
    #[serde(default)]
    pub inject_dropped: u64,
    /// Frames for the router on an interface without a TAP twin.
    #[serde(default)]
    pub no_tap: u64,
    /// Frames punted under tables a commit has since replaced that could not be read against
    /// the new ones.
    #[serde(default)]
    pub stale: u64,
    #[serde(default)]
    pub taps: Vec<TapView>,
    #[serde(default)]
    pub neighbor_stats: NeighborStats,
}

impl Render for PuntView {
    fn render(&self) -> String {
        let classes = table(
            &[
                "Class",
                "Rate/worker",
                "Burst",
                "Punted",
                "Policed",
                "Queue full",
            ],
            self.classes
                .iter()
                .map(|c| {
                    vec![
                        c.class.clone(),
                        c.rate.to_string(),
                        c.burst.to_string(),
                        c.punted.to_string(),
                        c.policed.to_string(),
                        c.queue_full.to_string(),
                    ]
                })
                .collect(),
        );
        if !self.punt_path {
            return format!(
                "{classes}(no punt path: the slow path's classes are policed; the rest are dropped as having no service)\n"
            );
        }
        let taps = table(
            &[
                "Interface",
                "TAP",
                "To kernel",
                "From kernel",
                "Kernel full",
            ],
            self.taps
                .iter()
                .map(|t| {
                    vec![
                        t.interface.clone(),
                        t.tap.clone(),
                        t.to_kernel.to_string(),
                        t.from_kernel.to_string(),
                        t.to_kernel_dropped.to_string(),
                    ]
                })
                .collect(),
        );
        let n = &self.neighbor_stats;
        format!(
            "{classes}\n{taps}\nInjected: {}, inject drops: {}, no TAP: {}, stale (from before a commit): {}\n\
             Neighbours: requests sent {}, replies sent {}, learned {}, lost {}, failed {}, \
             packets held {} (dropped {}, released {}), malformed {}\n",
            self.injected,
            self.inject_dropped,
            self.no_tap,
            self.stale,
            n.requests_sent,
            n.replies_sent,
            n.learned,
            n.lost,
            n.failed,
            n.held,
            n.hold_dropped,
            n.released,
            n.malformed,
        )
    }
}
