//! L3VPN: `show vrf` (`GET /v1/vrf`): each VPN VRF with its RD, route targets, VPN label and
//! routes each way, and the VPN speaker's state; `show bgp vpn` (`GET /v1/bgp/vpn`): the VPN
//! routes learned from peers, each with the VRFs it went into (or why not).

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::table;

/// The VPN speaker (GoBGP, through its gRPC API) and the route counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VpnStatus {
    /// gobgpd's API address.
    pub api: String,
    /// Connected to the API and watching its table.
    pub connected: bool,
    /// GoBGP's AS and router id, as it reports them.
    pub asn: u32,
    pub router_id: String,
    /// Times the connection to the API was made.
    pub connects: u64,
    /// The last error from the API (empty once connected).
    pub last_error: String,
    /// VPN paths from peers held now (best per RD and prefix).
    pub paths: usize,
    /// Route updates and withdrawals taken since start.
    pub updates: u64,
    pub withdrawals: u64,
    /// (VRF, prefix) imports by outcome.
    pub installed: usize,
    pub unresolved: usize,
    pub held: usize,
    pub refused: usize,
    /// Paths from the API that did not parse (counted and skipped).
    pub malformed: u64,
    /// Routes exported to GoBGP now, and the API calls that failed doing it.
    pub exported: usize,
    pub export_errors: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VpnVrfView {
    pub name: String,
    pub rd: String,
    pub import: Vec<String>,
    pub export: Vec<String>,
    /// The label that pops into this VRF (what exported routes carry).
    pub label: u32,
    /// VPN routes installed in it, and its routes exported.
    pub imported: usize,
    pub exported: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VrfView {
    /// False: the config has no `l3vpn` (or this is not a daemon).
    pub running: bool,
    pub status: VpnStatus,
    pub vrfs: Vec<VpnVrfView>,
}

impl Render for VrfView {
    fn render(&self) -> String {
        if !self.running {
            return "No L3VPN (`l3vpn` in the config of `linerate daemon`).\n".into();
        }
        let s = &self.status;
        let mut out = format!(
            "VPN speaker {} ({}), AS {} router id {}: {} paths, {} installed, {} unresolved, \
             {} held, {} refused, {} exported\n",
            s.api,
            if s.connected {
                "connected".to_string()
            } else {
                format!("not connected: {}", s.last_error)
            },
            s.asn,
            s.router_id,
            s.paths,
            s.installed,
            s.unresolved,
            s.held,
            s.refused,
            s.exported
        );
        let rows = self
            .vrfs
            .iter()
            .map(|v| {
                vec![
                    v.name.clone(),
                    v.rd.clone(),
                    v.import.join(" "),
                    v.export.join(" "),
                    v.label.to_string(),
                    v.imported.to_string(),
                    v.exported.to_string(),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "VRF",
                "RD",
                "Import RT",
                "Export RT",
                "Label",
                "Imported",
                "Exported",
            ],
            rows,
        ));
        out
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VpnRouteView {
    pub rd: String,
    pub prefix: String,
    pub label: u32,
    pub next_hop: String,
    pub route_targets: Vec<String>,
    pub peer: String,
    /// The VRFs it is installed in.
    pub installed: Vec<String>,
    /// `VRF: why` for each VRF that imports it but does not forward by it.
    pub not_installed: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BgpVpnView {
    pub running: bool,
    /// Paths held in all (the list may stop at the query's limit).
    pub total: usize,
    pub routes: Vec<VpnRouteView>,
}

impl Render for BgpVpnView {
    fn render(&self) -> String {
        if !self.running {
            return "No L3VPN (`l3vpn` in the config of `linerate daemon`).\n".into();
        }
        let rows = self
            .routes
            .iter()
            .map(|r| {
                let mut into = r.installed.join(" ");
                for n in &r.not_installed {
                    if !into.is_empty() {
                        into.push_str("; ");
                    }
                    into.push_str(&format!("not in {n}"));
                }
                vec![
                    r.rd.clone(),
                    r.prefix.clone(),
                    r.label.to_string(),
                    r.next_hop.clone(),
                    r.route_targets.join(" "),
                    r.peer.clone(),
                    into,
                ]
            })
            .collect();
        let mut out = table(
            &["RD", "Prefix", "Label", "Next hop", "RT", "From", "VRFs"],
            rows,
        );
        if self.routes.len() < self.total {
            out.push_str(&format!(
                "({} of {} VPN paths shown)\n",
                self.routes.len(),
                self.total
            ));
        }
        out
    }
}
