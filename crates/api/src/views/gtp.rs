//! The GGSN: `show gtp contexts`, `show gtp statistics`, `show apn`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::table;

/// One PDP context.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GtpContextView {
    pub imsi: String,
    pub nsapi: u8,
    #[serde(default)]
    pub msisdn: Option<String>,
    pub apn: String,
    /// The UE's IPv4 address and IPv6 /64, where it has them.
    pub ipv4: Option<String>,
    pub ipv6: Option<String>,
    /// Ours (the SGSN sends to it), and the SGSN's for user data and signalling.
    pub teid: u32,
    pub sgsn_teid_data: u32,
    pub sgsn_teid_control: u32,
    pub sgsn_control: String,
    pub sgsn_data: String,
    pub charging_id: u32,
    /// Seconds since it was created.
    pub age_s: u64,
    /// What charging would read: the data plane's counters for this context.
    pub uplink_packets: u64,
    pub uplink_bytes: u64,
    pub downlink_packets: u64,
    pub downlink_bytes: u64,
}

/// `GET /v1/gtp/contexts?imsi=&apn=&ip=&limit=`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GtpContextsView {
    /// Contexts held (all), and the table's size.
    pub total: u64,
    pub capacity: u64,
    /// That matched the query, of which `contexts` holds the first `limit`.
    pub matched: u64,
    pub contexts: Vec<GtpContextView>,
    /// Bytes the data plane's context table takes per context slot.
    pub bytes_per_context: u64,
}

/// `GET /v1/gtp/statistics`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GtpStatsView {
    pub address: String,
    pub restart_counter: u8,
    pub contexts: u64,
    pub received: u64,
    pub malformed: u64,
    pub unknown_type: u64,
    pub duplicates: u64,
    pub version_not_supported: u64,
    pub echo_requests: u64,
    /// Create / Update / Delete PDP Context Responses sent, by cause value (128: accepted).
    pub creates: BTreeMap<String, u64>,
    pub updates: BTreeMap<String, u64>,
    pub deletes: BTreeMap<String, u64>,
    pub error_indications_received: u64,
    pub error_indications_sent: u64,
    pub error_indications_limited: u64,
    pub peer_restarts: u64,
    pub contexts_torn_down_by_restart: u64,
}

/// One APN (`GET /v1/apns`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApnView {
    pub name: String,
    pub vrf: String,
    pub interface: String,
    pub ipv4_pool: Option<String>,
    pub ipv4_in_use: u32,
    pub ipv4_size: u32,
    pub ipv6_pool: Option<String>,
    pub ipv6_in_use: u32,
    pub ipv6_size: u32,
    pub dns: Vec<String>,
}

impl Render for GtpContextsView {
    fn render(&self) -> String {
        let rows = self
            .contexts
            .iter()
            .map(|c| {
                vec![
                    c.imsi.clone(),
                    c.nsapi.to_string(),
                    c.apn.clone(),
                    c.ipv4
                        .clone()
                        .or(c.ipv6.clone())
                        .unwrap_or_else(|| "-".into()),
                    format!("{:#010x}", c.teid),
                    format!("{} {:#010x}", c.sgsn_data, c.sgsn_teid_data),
                    format!("{}/{}", c.uplink_packets, c.uplink_bytes),
                    format!("{}/{}", c.downlink_packets, c.downlink_bytes),
                ]
            })
            .collect();
        let mut out = table(
            &[
                "IMSI",
                "NSAPI",
                "APN",
                "Address",
                "TEID",
                "SGSN (data)",
                "Up pkts/bytes",
                "Down pkts/bytes",
            ],
            rows,
        );
        out.push_str(&format!(
            "{} of {} context(s) shown; table holds {} ({} bytes per context)\n",
            self.contexts.len(),
            self.matched,
            self.capacity,
            self.bytes_per_context
        ));
        out
    }
}

fn causes(m: &BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "none".into();
    }
    m.iter()
        .map(|(c, n)| format!("{n} cause {c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Render for GtpStatsView {
    fn render(&self) -> String {
        format!(
            "GGSN {} (restart counter {}), {} context(s)\n\
             received {}: malformed {}, unknown type {}, duplicates {}, other GTP versions {}, echo requests {}\n\
             Create PDP Context responses: {}\n\
             Update PDP Context responses: {}\n\
             Delete PDP Context responses: {}\n\
             Error Indications: received {}, sent {}, rate-limited {}\n\
             SGSN restarts seen {}, contexts torn down by them {}\n",
            self.address,
            self.restart_counter,
            self.contexts,
            self.received,
            self.malformed,
            self.unknown_type,
            self.duplicates,
            self.version_not_supported,
            self.echo_requests,
            causes(&self.creates),
            causes(&self.updates),
            causes(&self.deletes),
            self.error_indications_received,
            self.error_indications_sent,
            self.error_indications_limited,
            self.peer_restarts,
            self.contexts_torn_down_by_restart,
        )
    }
}

impl Render for Vec<ApnView> {
    fn render(&self) -> String {
        if self.is_empty() {
            return "No GGSN (ggsn is not configured).\n".into();
        }
        let rows = self
            .iter()
            .map(|a| {
                vec![
                    a.name.clone(),
                    a.vrf.clone(),
                    a.interface.clone(),
                    a.ipv4_pool.as_ref().map_or("-".into(), |p| {
                        format!("{p} ({}/{})", a.ipv4_in_use, a.ipv4_size)
                    }),
                    a.ipv6_pool.as_ref().map_or("-".into(), |p| {
                        format!("{p} ({}/{})", a.ipv6_in_use, a.ipv6_size)
                    }),
                    if a.dns.is_empty() {
                        "-".into()
                    } else {
                        a.dns.join(" ")
                    },
                ]
            })
            .collect();
        table(
            &[
                "APN",
                "VRF",
                "Interface",
                "IPv4 pool (used/size)",
                "IPv6 pool (used/size)",
                "DNS",
            ],
            rows,
        )
    }
}
