//! LDP: `show mpls ldp neighbor` (`GET /v1/mpls/ldp/neighbor`): each session with its state,
//! role, keepalive and PDUs; `show mpls ldp discovery` (`/v1/mpls/ldp/discovery`): the hello
//! adjacencies; `show mpls ldp binding` (`/v1/mpls/ldp/binding`): each signalled
//! pseudowire's labels both ways, parameters, status and why it is down.

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::table;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LdpNeighbor {
    /// The peer's LSR id (`10.0.0.2:0` is written without the label space).
    pub peer: String,
    pub transport: String,
    /// `operational`, `opensent`, `openrec`, `initialized` or `connecting`.
    pub state: String,
    /// `active` (this router opened the connection) or `passive`.
    pub role: String,
    /// Seconds in this state.
    pub uptime_s: u64,
    /// The negotiated keepalive hold time, seconds.
    pub keepalive_s: u16,
    pub addresses: Vec<String>,
    pub pdus_in: u64,
    pub pdus_out: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LdpNeighborView {
    /// False: the config has no `mpls.ldp` (or this is not a daemon).
    pub running: bool,
    pub router_id: String,
    pub transport: String,
    pub neighbors: Vec<LdpNeighbor>,
    pub hellos_in: u64,
    pub hellos_out: u64,
    pub hellos_ignored: u64,
    pub malformed: u64,
    pub notifications_in: u64,
    pub notifications_out: u64,
}

impl Render for LdpNeighborView {
    fn render(&self) -> String {
        if !self.running {
            return "LDP is not running (`mpls.ldp` in the config of `linerate daemon`).\n".into();
        }
        let rows = self
            .neighbors
            .iter()
            .map(|n| {
                vec![
                    format!("{}:0", n.peer),
                    n.transport.clone(),
                    n.state.clone(),
                    n.role.clone(),
                    n.uptime_s.to_string(),
                    n.keepalive_s.to_string(),
                    format!("{}/{}", n.pdus_in, n.pdus_out),
                    n.addresses.join(" "),
                ]
            })
            .collect();
        let mut out = format!(
            "LDP router id {}, transport address {}\n",
            self.router_id, self.transport
        );
        out.push_str(&table(
            &[
                "Peer LDP id",
                "Transport",
                "State",
                "Role",
                "Up (s)",
                "Keepalive (s)",
                "PDUs in/out",
                "Addresses",
            ],
            rows,
        ));
        out.push_str(&format!(
            "hellos in {} out {} ignored {}; malformed {}; notifications in {} out {}\n",
            self.hellos_in,
            self.hellos_out,
            self.hellos_ignored,
            self.malformed,
            self.notifications_in,
            self.notifications_out
        ));
        out
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LdpAdjacency {
    pub peer: String,
    /// `targeted`.
    pub kind: String,
    pub source: String,
    pub transport: String,
    /// The negotiated hold time and what is left of it, seconds.
    pub hold_s: u16,
    pub expires_in_ms: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LdpDiscoveryView {
    pub running: bool,
    /// Where targeted hellos go.
    pub targets: Vec<String>,
    pub adjacencies: Vec<LdpAdjacency>,
}

impl Render for LdpDiscoveryView {
    fn render(&self) -> String {
        if !self.running {
            return "LDP is not running (`mpls.ldp` in the config of `linerate daemon`).\n".into();
        }
        let rows = self
            .adjacencies
            .iter()
            .map(|a| {
                vec![
                    format!("{}:0", a.peer),
                    a.kind.clone(),
                    a.source.clone(),
                    a.transport.clone(),
                    a.hold_s.to_string(),
                    format!("{:.1}", a.expires_in_ms as f64 / 1000.0),
                ]
            })
            .collect();
        let mut out = format!("Targeted hellos to: {}\n", self.targets.join(", "));
        out.push_str(&table(
            &[
                "Peer LDP id",
                "Kind",
                "Source",
                "Transport",
                "Hold (s)",
                "Expires (s)",
            ],
            rows,
        ));
        out
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LdpPwBinding {
    pub name: String,
    pub peer: String,
    pub pw_id: u32,
    pub pw_type: u16,
    pub local_label: u32,
    pub remote_label: Option<u32>,
    /// The control word this end advertises, and the peer's.
    pub local_control_word: bool,
    pub remote_control_word: Option<bool>,
    pub local_mtu: u16,
    pub remote_mtu: Option<u16>,
    /// PW status (RFC 4447 5.4.3: 0 is forwarding) sent and received.
    pub local_status: u32,
    pub remote_status: Option<u32>,
    /// `up` or `down`.
    pub state: String,
    pub reason: String,
}

/// A prefix's label: this router's own (`local`: implicit null where it is the egress, else
/// the label it advertised for the route) or a peer's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LdpPrefixBinding {
    pub prefix: String,
    /// `local` or the peer's LSR id.
    pub from: String,
    pub label: u32,
    /// A peer's label that packets get: the peer is a next hop of the prefix's route.
    #[serde(default)]
    pub in_use: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LdpBindingView {
    pub running: bool,
    pub pseudowires: Vec<LdpPwBinding>,
    pub prefixes: Vec<LdpPrefixBinding>,
    /// Mappings received that match no configured pseudowire (kept: liberal retention).
    pub unmatched: u64,
    /// Routes left without a label of this router's: `label-range` is used up.
    #[serde(default)]
    pub labels_exhausted: u64,
}

impl Render for LdpBindingView {
    fn render(&self) -> String {
        if !self.running {
            return "LDP is not running (`mpls.ldp` in the config of `linerate daemon`).\n".into();
        }
        let opt = |x: Option<String>| x.unwrap_or_else(|| "-".into());
        let rows = self
            .pseudowires
            .iter()
            .map(|p| {
                vec![
                    p.name.clone(),
                    format!("{} {}", p.peer, p.pw_id),
                    p.pw_type.to_string(),
                    format!(
                        "{}/{}",
                        p.local_label,
                        opt(p.remote_label.map(|l| l.to_string()))
                    ),
                    format!(
                        "{}/{}",
                        if p.local_control_word { "yes" } else { "no" },
                        opt(p
                            .remote_control_word
                            .map(|c| if c { "yes" } else { "no" }.into()))
                    ),
                    format!(
                        "{}/{}",
                        p.local_mtu,
                        opt(p.remote_mtu.map(|m| m.to_string()))
                    ),
                    format!(
                        "{:#x}/{}",
                        p.local_status,
                        opt(p.remote_status.map(|s| format!("{s:#x}")))
                    ),
                    super::mpls::state_with_reason(&p.state, &p.reason),
                ]
            })
            .collect();
        let mut out = table(
            &[
                "Pseudowire",
                "Peer PW id",
                "Type",
                "Labels local/remote",
                "CW",
                "MTU",
                "Status",
                "State",
            ],
            rows,
        );
        if !self.prefixes.is_empty() {
            out.push_str(&table(
                &["Prefix", "From", "Label", "In use"],
                self.prefixes
                    .iter()
                    .map(|p| {
                        let l = match p.label {
                            3 => "imp-null".to_string(),
                            l => l.to_string(),
                        };
                        let used = if p.in_use { "yes" } else { "" };
                        vec![p.prefix.clone(), p.from.clone(), l, used.into()]
                    })
                    .collect(),
            ));
        }
        if self.labels_exhausted > 0 {
            out.push_str(&format!(
                "{} time(s) a route found no free label (mpls.ldp.label-range)\n",
                self.labels_exhausted
            ));
        }
        if self.unmatched > 0 {
            out.push_str(&format!(
                "{} mapping(s) from peers match no configured pseudowire\n",
                self.unmatched
            ));
        }
        out
    }
}
