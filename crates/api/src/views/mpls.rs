//! MPLS: `show mpls forwarding-table` (`GET /v1/mpls/forwarding-table`): each incoming label,
//! what it does and where it sends, with its traffic; `show l2vpn` (`GET /v1/l2vpn`): each
//! pseudowire with its attachment circuit, labels, state and counters.

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::table;

/// One entry of the label table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MplsLabelView {
    pub label: u32,
    /// `swap`, `pop` (penultimate hop), `lookup` (pop into a VRF) or `pseudowire`.
    pub action: String,
    /// The labels pushed in its place (`200`, `200/300`; empty for none).
    pub out: String,
    /// Where it goes: next hops (`ADDR on IF`), `vrf NAME`, or `pseudowire NAME`.
    pub to: Vec<String>,
    /// Packets and bytes received with the label (since the table was last built).
    pub packets: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MplsView {
    /// The interfaces that take labelled frames.
    pub interfaces: Vec<String>,
    /// `uniform` or `pipe`.
    pub ttl: String,
    pub labels: Vec<MplsLabelView>,
    /// Bytes the label table holds.
    pub table_bytes: u64,
}

impl Render for MplsView {
    fn render(&self) -> String {
        if self.interfaces.is_empty() && self.labels.is_empty() {
            return "MPLS is not configured (`mpls` in the config).\n".into();
        }
        let rows = self
            .labels
            .iter()
            .map(|l| {
                vec![
                    l.label.to_string(),
                    if l.out.is_empty() {
                        l.action.clone()
                    } else {
                        format!("{} {}", l.action, l.out)
                    },
                    l.to.join(", "),
                    l.packets.to_string(),
                    l.bytes.to_string(),
                ]
            })
            .collect();
        let mut out = table(&["Local", "Action", "To", "Packets", "Bytes"], rows);
        out.push_str(&format!(
            "MPLS on {}; TTL {}; {} labels, {} bytes\n",
            if self.interfaces.is_empty() {
                "no interface".into()
            } else {
                self.interfaces.join(", ")
            },
            self.ttl,
            self.labels.len(),
            self.table_bytes
        ));
        out
    }
}

/// A pseudowire's state as the tables show it: `up`, or `down (why)`.
pub(crate) fn state_with_reason(state: &str, reason: &str) -> String {
    if reason.is_empty() {
        state.to_string()
    } else {
        format!("{state} ({reason})")
    }
}

/// One pseudowire.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PseudowireView {
    pub name: String,
    /// The attachment circuit.
    pub interface: String,
    /// 4 (VLAN) or 5 (Ethernet).
    pub vc_type: u16,
    pub peer: String,
    pub vc_id: u32,
    pub local_label: u32,
    /// None: not signalled yet.
    pub remote_label: Option<u32>,
    /// `static` (both labels configured) or `ldp`.
    pub signalling: String,
    /// Why it is down (empty when up).
    pub reason: String,
    /// Labels to the peer under which the pseudowire's own goes (`300`; empty: none).
    pub transport: String,
    /// The next hop towards the peer (`ADDR on IF`); over an LSP, the way it takes now.
    pub next_hop: String,
    /// The LSP carrying it (`mpls.lsps`; empty: none) and which way it takes now (`primary`,
    /// `backup` or `down`).
    #[serde(default)]
    pub lsp: String,
    #[serde(default)]
    pub lsp_path: String,
    pub control_word: bool,
    /// `up` or `down`.
    pub state: String,
    pub mtu: u16,
    /// Frames and bytes from the attachment circuit into the pseudowire, and out of it.
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct L2vpnView {
    pub pseudowires: Vec<PseudowireView>,
}

impl Render for L2vpnView {
    fn render(&self) -> String {
        if self.pseudowires.is_empty() {
            return "No pseudowires (`mpls.pseudowires` in the config).\n".into();
        }
        let rows = self
            .pseudowires
            .iter()
            .map(|p| {
                vec![
                    p.name.clone(),
                    p.interface.clone(),
                    format!("{} {}", p.peer, p.vc_id),
                    p.vc_type.to_string(),
                    format!(
                        "{}/{}",
                        p.local_label,
                        p.remote_label.map_or("-".into(), |l| l.to_string())
                    ),
                    if p.transport.is_empty() {
                        "-".into()
                    } else {
                        p.transport.clone()
                    },
                    if p.lsp.is_empty() {
                        p.next_hop.clone()
                    } else {
                        format!("{} (LSP {}, {})", p.next_hop, p.lsp, p.lsp_path)
                    },
                    if p.control_word { "yes" } else { "no" }.into(),
                    state_with_reason(&p.state, &p.reason),
                    format!("{}/{}", p.tx_packets, p.rx_packets),
                ]
            })
            .collect();
        table(
            &[
                "Name",
                "AC",
                "Peer VC",
                "Type",
                "Labels in/out",
                "Transport",
                "Next hop",
                "CW",
                "State",
                "Frames to/from PW",
            ],
            rows,
        )
    }
}
