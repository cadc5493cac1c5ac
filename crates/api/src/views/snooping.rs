//! `show igmp snooping groups`: the groups IGMP/MLD snooping has learned per bridge domain, who
//! joined them (and for which sources), the multicast-router members, and the counters.

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::table;

/// One member's membership of a group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SnoopMemberView {
    pub interface: String,
    /// Gets the group from every source, for this many more seconds (None: only the sources
    /// listed).
    pub expires_s: Option<f64>,
    /// Sources asked for by name (IGMPv3/MLDv2 include mode), each with its seconds left.
    #[serde(default)]
    pub sources: Vec<(String, f64)>,
}

/// One group in one bridge domain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SnoopGroupView {
    pub bridge: String,
    pub group: String,
    pub members: Vec<SnoopMemberView>,
    /// Data frames to the group, their bytes, and the copies sent.
    pub packets: u64,
    pub bytes: u64,
    pub replicas: u64,
}

/// A multicast-router member of a bridge domain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SnoopRouterView {
    pub bridge: String,
    pub interface: String,
    /// Configured (`mrouter-ports`) rather than learned.
    pub configured: bool,
    /// Learned from a query or PIM hello: seconds left.
    pub expires_s: Option<f64>,
}

/// `GET /v1/igmp-snooping?bridge=B`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SnoopView {
    pub groups: Vec<SnoopGroupView>,
    pub routers: Vec<SnoopRouterView>,
    /// Groups with members, all bridges; the table's size in groups.
    pub groups_total: u64,
    pub capacity: u64,
    /// Membership messages read: reports, leaves, queries, PIM hellos, malformed.
    pub reports: u64,
    pub leaves: u64,
    pub queries: u64,
    /// General queries the bridges' own queriers sent.
    #[serde(default)]
    pub queries_sent: u64,
    pub pim_hellos: u64,
    pub malformed: u64,
    /// Memberships made and ended; joins refused at a group limit or with the table full.
    pub joined: u64,
    pub ended: u64,
    pub refused_limit: u64,
    pub refused_table_full: u64,
}

impl Render for SnoopView {
    fn render(&self) -> String {
        let secs = |s: Option<f64>| s.map_or("-".to_string(), |s| format!("{s:.0}"));
        let mut rows = Vec::new();
        for g in &self.groups {
            for (i, m) in g.members.iter().enumerate() {
                let sources = if m.sources.is_empty() {
                    if m.expires_s.is_some() { "any" } else { "-" }.to_string()
                } else {
                    let mut s: Vec<String> = m.sources.iter().map(|x| x.0.clone()).collect();
                    if m.expires_s.is_some() {
                        s.insert(0, "any".into());
                    }
                    s.join(" ")
                };
                let first = i == 0;
                rows.push(vec![
                    if first {
                        g.bridge.clone()
                    } else {
                        String::new()
                    },
                    if first {
                        g.group.clone()
                    } else {
                        String::new()
                    },
                    m.interface.clone(),
                    sources,
                    secs(
                        m.expires_s
                            .or_else(|| m.sources.iter().map(|x| x.1).reduce(f64::max)),
                    ),
                    if first {
                        g.packets.to_string()
                    } else {
                        String::new()
                    },
                    if first {
                        g.replicas.to_string()
                    } else {
                        String::new()
                    },
                ]);
            }
        }
        let mut out = table(
            &[
                "Bridge",
                "Group",
                "Member",
                "Sources",
                "Expires (s)",
                "Packets",
                "Copies",
            ],
            rows,
        );
        if !self.routers.is_empty() {
            let rows = self
                .routers
                .iter()
                .map(|r| {
                    vec![
                        r.bridge.clone(),
                        r.interface.clone(),
                        if r.configured {
                            "configured"
                        } else {
                            "learned"
                        }
                        .into(),
                        secs(r.expires_s),
                    ]
                })
                .collect();
            out.push_str("Multicast routers:\n");
            out.push_str(&table(&["Bridge", "Member", "How", "Expires (s)"], rows));
        }
        out.push_str(&format!(
            "{} group(s) of {}; read: {} report(s), {} leave(s), {} quer(ies), {} PIM hello(s), {} malformed; queries sent {}; memberships made {}, ended {}; joins refused: limit {}, table full {}\n",
            self.groups_total,
            self.capacity,
            self.reports,
            self.leaves,
            self.queries,
            self.pim_hellos,
            self.malformed,
            self.queries_sent,
            self.joined,
            self.ended,
            self.refused_limit,
            self.refused_table_full
        ));
        out
    }
}
