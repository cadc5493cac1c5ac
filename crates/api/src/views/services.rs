//! The services: `show acl` (entries with their hits, the implicit deny, where each list is
//! bound), `show qos` (class counters, markings, policer colours) and `show flows` (the flow
//! cache and its export).

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::{list, opt, pairs, table};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AclEntryView {
    pub seq: u32,
    /// The entry in the config's syntax.
    pub text: String,
    pub hits: u64,
}

/// `GET /v1/acl[?name=NAME]`: one per list.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AclView {
    pub name: String,
    /// `ipv4` or `ipv6`.
    pub family: String,
    pub entries: Vec<AclEntryView>,
    /// Packets that matched no entry (the implicit deny at the end).
    pub implicit_deny: u64,
    /// Where the list is bound: `interface in|out`.
    pub bound: Vec<String>,
    /// Memory of the compiled form of each binding that uses it, in bytes.
    pub compiled_bytes: usize,
}

impl Render for Vec<AclView> {
    fn render(&self) -> String {
        let mut out = String::new();
        for a in self {
            out += &format!(
                "access-list {} ({}), bound: {}, compiled: {} bytes\n",
                a.name,
                a.family,
                if a.bound.is_empty() {
                    "nowhere".to_string()
                } else {
                    list(&a.bound)
                },
                a.compiled_bytes
            );
            let mut rows: Vec<Vec<String>> = a
                .entries
                .iter()
                .map(|e| vec![e.seq.to_string(), e.text.clone(), e.hits.to_string()])
                .collect();
            rows.push(vec![
                "-".into(),
                "(implicit deny)".into(),
                a.implicit_deny.to_string(),
            ]);
            out += &table(&["Seq", "Entry", "Matches"], rows);
            out += "\n";
        }
        out
    }
}

/// A class's policer: what conformed, exceeded and violated, in packets and bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PolicerView {
    pub conformed_packets: u64,
    pub conformed_bytes: u64,
    pub exceeded_packets: u64,
    pub exceeded_bytes: u64,
    pub violated_packets: u64,
    pub violated_bytes: u64,
    pub dropped_packets: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QosClassView {
    pub class: String,
    pub packets: u64,
    pub bytes: u64,
    pub set_dscp: Option<u8>,
    pub set_cos: Option<u8>,
    /// MPLS EXP of the labels pushed on the class's packets.
    #[serde(default)]
    pub set_exp: Option<u8>,
    pub policer: Option<PolicerView>,
}

/// `GET /v1/qos`: one per policy binding (interface and direction).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QosView {
    pub interface: String,
    /// `in` or `out`.
    pub direction: String,
    pub policy: String,
    pub classes: Vec<QosClassView>,
}

impl Render for Vec<QosView> {
    fn render(&self) -> String {
        if self.is_empty() {
            return "no QoS policy is bound\n".into();
        }
        let mut out = String::new();
        for q in self {
            out += &format!("{} {}: policy {}\n", q.interface, q.direction, q.policy);
            let rows = q
                .classes
                .iter()
                .map(|c| {
                    let pol = c.policer.as_ref().map_or("-".to_string(), |p| {
                        format!(
                            "conform {} B, exceed {} B, violate {} B, dropped {} pkts",
                            p.conformed_bytes,
                            p.exceeded_bytes,
                            p.violated_bytes,
                            p.dropped_packets
                        )
                    });
                    vec![
                        c.class.clone(),
                        c.packets.to_string(),
                        c.bytes.to_string(),
                        opt(&c.set_dscp),
                        opt(&c.set_cos),
                        opt(&c.set_exp),
                        pol,
                    ]
                })
                .collect();
            out += &table(
                &[
                    "Class", "Packets", "Bytes", "Set DSCP", "Set CoS", "Set EXP", "Policer",
                ],
                rows,
            );
            out += "\n";
        }
        out
    }
}

/// The exporter's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExportCounters {
    pub datagrams: u64,
    pub records: u64,
    pub templates: u64,
    pub send_errors: u64,
    pub acl_log_records: u64,
}

/// `GET /v1/flows`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowsView {
    pub enabled: bool,
    /// `v9` or `ipfix`.
    pub version: String,
    pub collectors: Vec<String>,
    pub capacity: u64,
    pub occupancy: u64,
    pub created: u64,
    pub expired_idle: u64,
    pub expired_active: u64,
    pub ended_tcp: u64,
    pub evicted: u64,
    pub flushed: u64,
    /// Records the exporter's queue had no room for.
    pub queue_dropped: u64,
    /// Caches a worker had to build itself (a pause in its forwarding); 0 when the control
    /// plane built them all ahead, as it should.
    pub caches_built_by_workers: u64,
    pub export: ExportCounters,
    /// The interfaces that account flows.
    pub interfaces: Vec<String>,
}

impl Render for FlowsView {
    fn render(&self) -> String {
        if !self.enabled {
            return "flow accounting is off (no flow-export section)\n".into();
        }
        let e = &self.export;
        format!(
            "Flow export: {} to {}\nAccounting on: {}\n\n{}",
            self.version,
            list(&self.collectors),
            list(&self.interfaces),
            pairs(
                ["Counter", "Value"],
                [
                    ("cache capacity", self.capacity),
                    ("flows in cache", self.occupancy),
                    ("flows created", self.created),
                    ("expired (inactive)", self.expired_idle),
                    ("expired (active)", self.expired_active),
                    ("ended (TCP FIN/RST)", self.ended_tcp),
                    ("evicted (cache full)", self.evicted),
                    ("flushed", self.flushed),
                    ("lost (export queue full)", self.queue_dropped),
                    ("records exported", e.records),
                    ("datagrams sent", e.datagrams),
                    ("templates sent", e.templates),
                    ("send errors", e.send_errors),
                ]
                .into_iter()
                .map(|(k, v)| (k, v.to_string()))
                .collect()
            )
        )
    }
}
