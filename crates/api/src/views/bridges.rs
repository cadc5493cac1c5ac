//! `show bridge` and `show mac address-table`: bridge domains, their members and counters, and
//! the MAC table's entries.

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::{list, pairs, table};

/// One bridge member.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BridgeMemberView {
    pub interface: String,
    pub vlan: Option<u16>,
    /// 802.1ad S-tag of a Q-in-Q member (`vlan` is then its C-tag, if any).
    #[serde(default)]
    pub s_vlan: Option<u16>,
    /// Learns the sources of frames arriving here.
    pub learning: bool,
    pub up: bool,
    /// Addresses learned here now.
    pub macs: u64,
    /// dot1q-tunnel: every frame of its port is the member's, customer tags and all.
    #[serde(default)]
    pub tunnel: bool,
    /// Flexlink: "primary (active)", "backup (standby)", ...
    #[serde(default)]
    pub flexlink: Option<String>,
    /// On standby (a Flexlink member) or shut: no frame in or out.
    #[serde(default)]
    pub blocked: bool,
    /// Shut by its bridge's `mac-limit-action: shutdown` (until its addresses are cleared).
    #[serde(default)]
    pub shut: bool,
    /// Frames to be flooded that storm control dropped here: broadcast, multicast, unknown
    /// unicast (absent: no storm control on the member).
    #[serde(default)]
    pub storm_dropped: Option<[u64; 3]>,
}

/// `GET /v1/bridges`: one bridge domain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BridgeView {
    pub name: String,
    pub id: u16,
    pub members: Vec<BridgeMemberView>,
    pub learning: bool,
    /// Addresses learned at most (0: none).
    pub mac_limit: u32,
    pub aging_s: u32,
    pub flood_unknown_unicast: bool,
    /// What becomes of BPDUs: punt, flood or drop.
    pub bpdu: String,
    /// Whether a spanning tree runs on the domain (Linerate runs none: loops are the
    /// network's to prevent).
    pub stp: bool,
    /// Addresses in the table now (static ones included).
    pub macs: u64,
    pub static_macs: u64,
    pub forwarded: u64,
    pub flooded: u64,
    pub flood_copies: u64,
    pub unknown_unicast: u64,
    pub learned: u64,
    pub moved: u64,
    pub not_learned_limit: u64,
    pub not_learned_table_full: u64,
    pub flaps: u64,
    /// Storm control's limits per member, frames a second: broadcast, multicast, unknown
    /// unicast (None: not policed); and what it dropped in all.
    #[serde(default)]
    pub storm_control: [Option<u32>; 3],
    #[serde(default)]
    pub storm_dropped: u64,
    /// Protocol frames tunnelled for dot1q-tunnel customers (L2PT), in and out.
    #[serde(default)]
    pub l2pt_tunnelled: u64,
    /// Its routed interface (BVI), where it meets the L3 path.
    #[serde(default)]
    pub routed_interface: Option<String>,
}

impl Render for Vec<BridgeView> {
    fn render(&self) -> String {
        if self.is_empty() {
            return "no bridges configured\n".into();
        }
        let mut out = String::new();
        for b in self {
            let limit = if b.mac_limit == 0 {
                "none".to_string()
            } else {
                b.mac_limit.to_string()
            };
            out.push_str(&format!(
                "bridge {} (id {}): {} address(es), limit {limit}, aging {} s, learning {}, unknown unicast {}, BPDUs {}, spanning tree {}\n",
                b.name,
                b.id,
                b.macs,
                b.aging_s,
                if b.learning { "on" } else { "off" },
                if b.flood_unknown_unicast { "flooded" } else { "dropped" },
                b.bpdu,
                if b.stp { "on" } else { "not run (loops are not blocked)" },
            ));
            if let Some(r) = &b.routed_interface {
                out.push_str(&format!("routed interface: {r}\n"));
            }
            let rows = b
                .members
                .iter()
                .map(|m| {
                    vec![
                        m.interface.clone(),
                        if m.tunnel {
                            "dot1q-tunnel".into()
                        } else {
                            crate::table::vlan_tags(m.s_vlan, m.vlan)
                        },
                        match (m.up, m.shut, m.blocked) {
                            (false, _, _) => "down",
                            (true, true, _) => "shut (mac limit)",
                            (true, false, true) => "blocking",
                            (true, false, false) => "up",
                        }
                        .into(),
                        if m.learning { "on" } else { "off" }.into(),
                        m.macs.to_string(),
                        m.storm_dropped
                            .map_or("-".into(), |d| format!("{}/{}/{}", d[0], d[1], d[2])),
                        m.flexlink.clone().unwrap_or_else(|| "-".into()),
                    ]
                })
                .collect();
            out.push_str(&table(
                &[
                    "Member",
                    "VLAN",
                    "State",
                    "Learning",
                    "MACs",
                    "Storm drops (bcast/mcast/unknown)",
                    "Flexlink",
                ],
                rows,
            ));
            out.push_str(&pairs(
                ["Counter", "Value"],
                vec![
                    ("forwarded", b.forwarded.to_string()),
                    ("flooded", b.flooded.to_string()),
                    ("flood copies", b.flood_copies.to_string()),
                    ("unknown unicast", b.unknown_unicast.to_string()),
                    ("learned", b.learned.to_string()),
                    ("moved", b.moved.to_string()),
                    ("not learned: limit", b.not_learned_limit.to_string()),
                    (
                        "not learned: table full",
                        b.not_learned_table_full.to_string(),
                    ),
                    ("flaps (moves refused)", b.flaps.to_string()),
                    (
                        "storm control (frames/s per member: bcast/mcast/unknown)",
                        b.storm_control
                            .iter()
                            .map(|r| r.map_or("-".into(), |x| x.to_string()))
                            .collect::<Vec<_>>()
                            .join("/"),
                    ),
                    ("storm control drops", b.storm_dropped.to_string()),
                    ("L2 protocol frames tunnelled", b.l2pt_tunnelled.to_string()),
                ],
            ));
            out.push('\n');
        }
        out
    }
}

/// One MAC table entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MacEntryView {
    pub bridge: String,
    pub mac: String,
    /// The member it is on (`-` for a member since removed: its frames flood).
    pub interface: String,
    #[serde(rename = "static")]
    pub fixed: bool,
    /// Seconds since last seen (0 for static entries).
    pub age_s: u32,
}

/// The MAC table as a whole.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MacTableStats {
    /// Entries it holds at most (`limits.macs`), and its slots and bytes.
    pub capacity: u64,
    pub slots: u64,
    pub bytes: u64,
    pub entries: u64,
    pub learned: u64,
    pub moved: u64,
    pub aged: u64,
    pub cleared: u64,
    pub not_unicast: u64,
    pub limit: u64,
    pub table_full: u64,
    pub flaps: u64,
}

/// `GET /v1/mac-table`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MacTableView {
    /// Entries that matched the query; `entries` holds at most the query's limit of them.
    pub matched: u64,
    pub entries: Vec<MacEntryView>,
    pub table: MacTableStats,
}

impl Render for MacTableView {
    fn render(&self) -> String {
        let rows = self
            .entries
            .iter()
            .map(|e| {
                vec![
                    e.bridge.clone(),
                    e.mac.clone(),
                    if e.fixed { "static" } else { "dynamic" }.into(),
                    e.interface.clone(),
                    if e.fixed {
                        "-".into()
                    } else {
                        e.age_s.to_string()
                    },
                ]
            })
            .collect();
        let t = &self.table;
        let mut out = table(&["Bridge", "MAC", "Type", "Interface", "Age (s)"], rows);
        if (self.entries.len() as u64) < self.matched {
            out.push_str(&format!(
                "... {} of {} shown (--limit)\n",
                self.entries.len(),
                self.matched
            ));
        }
        out.push_str(&format!(
            "{} entr{} in the table of {} ({} slots, {} bytes: {:.1} bytes an address); learned {}, moved {}, aged {}, not learned: {}\n",
            t.entries,
            if t.entries == 1 { "y" } else { "ies" },
            t.capacity,
            t.slots,
            t.bytes,
            t.bytes as f64 / t.capacity.max(1) as f64,
            t.learned,
            t.moved,
            t.aged,
            list(&[
                format!("limit {}", t.limit),
                format!("table full {}", t.table_full),
                format!("multicast or zero source {}", t.not_unicast),
                format!("flaps {}", t.flaps),
            ]),
        ));
        out
    }
}

/// `POST /v1/mac-table/clear`: how many entries went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MacCleared {
    pub removed: u64,
}
