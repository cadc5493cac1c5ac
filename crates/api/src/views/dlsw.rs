//! DLSw: `show dlsw peers` (`GET /v1/dlsw/peers`), `show dlsw circuits` (`/v1/dlsw/circuits`)
//! and `show dlsw reachability` (`/v1/dlsw/reachability`).

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::table;

/// One remote peer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DlswPeerView {
    pub peer: String,
    /// `disconnected`, `cap-exchange` or `connected`.
    pub state: String,
    /// Seconds in this state.
    pub uptime_s: u64,
    pub circuits: u32,
    /// The peer's version string and initial pacing window (from its capabilities).
    pub version: String,
    pub pacing_window: u16,
    pub messages_in: u64,
    pub messages_out: u64,
    pub info_in: u64,
    pub info_out: u64,
    pub keepalives_in: u64,
    pub keepalives_out: u64,
    pub explorers_in: u64,
    pub explorers_out: u64,
    pub malformed: u64,
    pub unknown_circuit: u64,
    pub connects: u64,
    pub drops: u64,
}

/// DLSw's own counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DlswTotals {
    pub lan_frames_in: u64,
    pub lan_frames_out: u64,
    pub lan_malformed: u64,
    pub lan_no_circuit: u64,
    /// LLC frames lost because DLSw fell behind (its inbox was full).
    pub lan_dropped: u64,
    pub tests_answered: u64,
    pub explorers_sent: u64,
    pub explorers_timed_out: u64,
    pub circuits: u64,
    pub circuits_started: u64,
    pub circuits_connected: u64,
    pub circuits_ended: u64,
    pub circuits_refused: u64,
    pub paced: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DlswPeersView {
    /// False: the router is no DLSw peer.
    pub configured: bool,
    pub local_peer: String,
    pub peers: Vec<DlswPeerView>,
    pub totals: DlswTotals,
}

/// One circuit, seen from this router.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DlswCircuitView {
    /// The station on our LAN and its partner behind the peer: `mmmm.mmmm.mmmm(SS)`.
    pub local: String,
    pub remote: String,
    pub peer: String,
    /// `origin` (our station started it) or `target`.
    pub role: String,
    pub state: String,
    /// The LLC2 link's state with our station.
    pub llc2: String,
    pub uptime_s: u64,
    pub from_station: u64,
    pub to_station: u64,
    pub retransmitted: u64,
    pub local_dlc: u32,
    pub remote_dlc: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DlswCircuitsView {
    pub configured: bool,
    pub circuits: Vec<DlswCircuitView>,
}

/// One reachability entry: a MAC, and the peers (remote) or the LAN port (local) it is behind.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DlswReachView {
    pub mac: String,
    /// `remote` or `local`.
    pub kind: String,
    /// Peers' addresses, or the port's name.
    pub via: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DlswReachabilityView {
    pub configured: bool,
    pub entries: Vec<DlswReachView>,
}

const NOT_CONFIGURED: &str = "DLSw is not configured (no `dlsw` section).\n";

impl Render for DlswPeersView {
    fn render(&self) -> String {
        if !self.configured {
            return NOT_CONFIGURED.into();
        }
        let rows = self
            .peers
            .iter()
            .map(|p| {
                vec![
                    p.peer.clone(),
                    p.state.clone(),
                    format!("{}s", p.uptime_s),
                    p.circuits.to_string(),
                    format!("{}/{}", p.info_in, p.info_out),
                    format!("{}/{}", p.messages_in, p.messages_out),
                    format!("{}/{}", p.explorers_in, p.explorers_out),
                    format!("{}/{}", p.keepalives_in, p.keepalives_out),
                    format!("{}/{}", p.connects, p.drops),
                ]
            })
            .collect();
        let t = &self.totals;
        let mut out = format!("Local peer {}\n", self.local_peer);
        out.push_str(&table(
            &[
                "Peer",
                "State",
                "Uptime",
                "Circuits",
                "Info in/out",
                "Msgs in/out",
                "Explorers in/out",
                "Keepalives in/out",
                "Connects/drops",
            ],
            rows,
        ));
        out.push_str(&format!(
            "LAN: {} frames in, {} out, {} malformed, {} for no circuit, {} dropped (DLSw behind); \
             {} TESTs answered, {} explorers sent ({} unanswered); circuits: {} up, {} started, \
             {} connected, {} ended, {} refused (limit)\n",
            t.lan_frames_in,
            t.lan_frames_out,
            t.lan_malformed,
            t.lan_no_circuit,
            t.lan_dropped,
            t.tests_answered,
            t.explorers_sent,
            t.explorers_timed_out,
            t.circuits,
            t.circuits_started,
            t.circuits_connected,
            t.circuits_ended,
            t.circuits_refused
        ));
        out
    }
}

impl Render for DlswCircuitsView {
    fn render(&self) -> String {
        if !self.configured {
            return NOT_CONFIGURED.into();
        }
        let rows = self
            .circuits
            .iter()
            .map(|c| {
                vec![
                    c.local.clone(),
                    c.remote.clone(),
                    c.peer.clone(),
                    c.role.clone(),
                    c.state.clone(),
                    c.llc2.clone(),
                    format!("{}s", c.uptime_s),
                    format!("{}/{}", c.from_station, c.to_station),
                ]
            })
            .collect();
        let mut out = table(
            &[
                "Local station",
                "Remote station",
                "Peer",
                "Role",
                "State",
                "LLC2",
                "Uptime",
                "I frames in/out",
            ],
            rows,
        );
        out.push_str(&format!("{} circuit(s)\n", self.circuits.len()));
        out
    }
}

impl Render for DlswReachabilityView {
    fn render(&self) -> String {
        if !self.configured {
            return NOT_CONFIGURED.into();
        }
        let rows = self
            .entries
            .iter()
            .map(|r| vec![r.mac.clone(), r.kind.clone(), r.via.join(", ")])
            .collect();
        table(&["MAC", "Where", "Via"], rows)
    }
}
