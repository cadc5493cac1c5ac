//! Interfaces, ports, neighbours, counters and workers: `show interfaces`, `show ports`,
//! `show neighbors`, `show counters`, `show workers`.

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::{list, opt, table, vlan_tags};

/// `GET /v1/interfaces`: one per interface or sub-interface.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceView {
    pub name: String,
    pub port: String,
    pub vlan: Option<u16>,
    /// 802.1ad S-tag of a Q-in-Q sub-interface (`vlan` is then its C-tag, if any).
    #[serde(default)]
    pub s_vlan: Option<u16>,
    pub mac: String,
    pub mtu: u16,
    pub vrf: String,
    pub admin_up: bool,
    pub oper_up: bool,
    pub ipv4: Vec<String>,
    pub ipv6: Vec<String>,
    /// The bridge domain it is a member of (its frames are switched, not routed).
    #[serde(default)]
    pub bridge: Option<String>,
    /// The bridge it is the routed interface (BVI) of: it has no port; it is up while a member
    /// of its bridge is.
    #[serde(default)]
    pub bvi: Option<String>,
}

impl Render for Vec<InterfaceView> {
    fn render(&self) -> String {
        let rows = self
            .iter()
            .map(|i| {
                let state = match (i.admin_up, i.oper_up) {
                    (true, true) => "up/up",
                    (true, false) => "up/down",
                    _ => "admin-down/down",
                };
                // IPv4 then IPv6, one list; a bridge member shows its bridge instead; `-` only
                // when there are none.
                let mut all: Vec<String> = i.ipv4.iter().chain(&i.ipv6).cloned().collect();
                if let Some(b) = &i.bridge {
                    all.push(format!("bridge {b}"));
                }
                if let Some(b) = &i.bvi {
                    all.push(format!("routes bridge {b}"));
                }
                vec![
                    i.name.clone(),
                    i.port.clone(),
                    vlan_tags(i.s_vlan, i.vlan),
                    state.into(),
                    i.vrf.clone(),
                    i.mtu.to_string(),
                    i.mac.clone(),
                    list(&all),
                ]
            })
            .collect();
        table(
            &[
                "Interface",
                "Port",
                "VLAN",
                "Admin/Oper",
                "VRF",
                "MTU",
                "MAC",
                "Addresses",
            ],
            rows,
        )
    }
}

/// How a port reaches its frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PortDriver {
    /// In-memory rings (the embedded tester).
    #[default]
    Mem,
    /// Capture files.
    Pcap,
    AfPacket,
    AfXdp,
    /// Rings in a shared-memory file (a tester or another logical router at the far end).
    Shm,
}

impl PortDriver {
    pub fn name(self) -> &'static str {
        match self {
            PortDriver::Mem => "mem",
            PortDriver::Pcap => "pcap",
            PortDriver::AfPacket => "af_packet",
            PortDriver::AfXdp => "af_xdp",
            PortDriver::Shm => "shm",
        }
    }
}

/// A receive queue and the worker that polls it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueView {
    pub queue: u16,
    pub worker: usize,
}

/// `GET /v1/ports`: one per port.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortView {
    pub name: String,
    pub index: u16,
    pub driver: PortDriver,
    pub in_service: bool,
    pub queues: Vec<QueueView>,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Frames that arrived but could not be taken in (capture records skipped or unreadable).
    pub rx_errors: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

impl Render for Vec<PortView> {
    fn render(&self) -> String {
        let rows = self
            .iter()
            .map(|p| {
                let q: Vec<String> = p
                    .queues
                    .iter()
                    .map(|q| format!("q{}:w{}", q.queue, q.worker))
                    .collect();
                vec![
                    p.name.clone(),
                    p.index.to_string(),
                    p.driver.name().into(),
                    if p.in_service {
                        "in service".into()
                    } else {
                        "removed".into()
                    },
                    if q.is_empty() {
                        "-".into()
                    } else {
                        q.join(" ")
                    },
                    p.rx_packets.to_string(),
                    p.rx_errors.to_string(),
                    p.tx_packets.to_string(),
                ]
            })
            .collect();
        table(
            &[
                "Port",
                "Index",
                "Driver",
                "State",
                "Queues",
                "RX frames",
                "RX errors",
                "TX frames",
            ],
            rows,
        )
    }
}

/// `GET /v1/neighbors`: configured (`static`) and learned neighbours.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NeighborView {
    pub interface: String,
    pub ip: String,
    /// `-` while it resolves.
    pub mac: String,
    /// `static`, or the resolver's state (`incomplete`, `reachable`, `stale`, `probe`, ...).
    pub state: String,
    /// Seconds since the last confirmation (learned entries).
    pub age_s: Option<f64>,
    /// Packets held while it resolves.
    pub held: usize,
}

impl Render for Vec<NeighborView> {
    fn render(&self) -> String {
        let rows = self
            .iter()
            .map(|n| {
                vec![
                    n.ip.clone(),
                    n.mac.clone(),
                    n.interface.clone(),
                    n.state.clone(),
                    n.age_s.map_or("-".into(), |a| format!("{a:.1}")),
                ]
            })
            .collect();
        table(&["Address", "MAC", "Interface", "State", "Age (s)"], rows)
    }
}

/// One port's counters since `clear counters`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortCountersView {
    pub port: String,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_errors: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

/// `GET /v1/counters`: per port, and the router's own totals, since `clear counters`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CountersView {
    pub ports: Vec<PortCountersView>,
    pub drops: u64,
    pub icmp_sent: u64,
    pub icmp_rate_limited: u64,
    pub echo_replies: u64,
    pub slow_path: u64,
    pub vectors: u64,
    pub busy_ns: u64,
    /// Whether the counters were ever cleared (else they count from the start).
    pub since_clear: bool,
}

impl Render for CountersView {
    fn render(&self) -> String {
        let rows = self
            .ports
            .iter()
            .map(|p| {
                vec![
                    p.port.clone(),
                    p.rx_packets.to_string(),
                    p.rx_bytes.to_string(),
                    p.rx_errors.to_string(),
                    p.tx_packets.to_string(),
                    p.tx_bytes.to_string(),
                ]
            })
            .collect();
        let mut out = table(
            &[
                "Port",
                "RX frames",
                "RX bytes",
                "RX errors",
                "TX frames",
                "TX bytes",
            ],
            rows,
        );
        out += &format!(
            "\ndrops {}  icmp-sent {}  icmp-rate-limited {}  echo-replies {}  slow-path {}\n",
            self.drops, self.icmp_sent, self.icmp_rate_limited, self.echo_replies, self.slow_path
        );
        out
    }
}

/// `GET /v1/workers`: one per worker, counting from its start.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerView {
    pub id: usize,
    pub core: Option<usize>,
    /// `port/queue` pairs it polls.
    pub rx_queues: Vec<String>,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub drops: u64,
    pub vectors: u64,
    /// Time spent on vectors that carried frames, nanoseconds.
    pub busy_ns: u64,
}

impl Render for Vec<WorkerView> {
    fn render(&self) -> String {
        let rows = self
            .iter()
            .map(|w| {
                vec![
                    w.id.to_string(),
                    opt(&w.core),
                    list(&w.rx_queues),
                    w.rx_packets.to_string(),
                    w.tx_packets.to_string(),
                    w.drops.to_string(),
                    w.vectors.to_string(),
                ]
            })
            .collect();
        table(
            &[
                "Worker",
                "Core",
                "RX queues",
                "RX frames",
                "TX frames",
                "Drops",
                "Vectors",
            ],
            rows,
        )
    }
}

/// The answer to `POST /v1/workers`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerAdded {
    pub worker: usize,
}

/// `show link PORT` (`GET /v1/ports/{name}/link`): the link under a port, as the kernel device
/// reports it (state, carrier changes, speed, the driver's error counters) beside the router's
/// own counters for the port: what a NOC wants in a link-down mail.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkDiagView {
    pub port: String,
    /// The kernel device, where the port sits on one (af_packet, af_xdp).
    pub device: Option<String>,
    pub in_service: bool,
    /// As the router last saw it (its link thread).
    pub link_up: bool,
    /// The device's `operstate`, `carrier`, `carrier_changes` (and up/down counts), speed,
    /// duplex, MTU, MAC; absent fields could not be read.
    pub operstate: Option<String>,
    pub carrier: Option<bool>,
    pub carrier_changes: Option<u64>,
    pub carrier_up_count: Option<u64>,
    pub carrier_down_count: Option<u64>,
    pub speed_mbps: Option<i64>,
    pub duplex: Option<String>,
    pub mtu: Option<u64>,
    pub mac: Option<String>,
    /// The device's statistics (`/sys/class/net/DEV/statistics`), by name.
    pub device_counters: Vec<(String, u64)>,
    /// The router's counters for the port.
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_errors: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

impl Render for LinkDiagView {
    fn render(&self) -> String {
        let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let n = |v: Option<u64>| v.map_or("-".into(), |x| x.to_string());
        let mut rows = vec![
            ("port", self.port.clone()),
            ("device", o(&self.device)),
            (
                "service",
                if self.in_service {
                    "in service"
                } else {
                    "out of service"
                }
                .into(),
            ),
            (
                "link (router)",
                if self.link_up { "up" } else { "down" }.into(),
            ),
            ("operstate", o(&self.operstate)),
            (
                "carrier",
                self.carrier
                    .map_or("-".into(), |c| if c { "yes" } else { "no" }.into()),
            ),
            ("carrier changes", n(self.carrier_changes)),
            (
                "carrier up/down",
                format!(
                    "{}/{}",
                    n(self.carrier_up_count),
                    n(self.carrier_down_count)
                ),
            ),
            (
                "speed",
                self.speed_mbps.map_or("-".into(), |s| {
                    if s < 0 {
                        "unknown".into()
                    } else {
                        format!("{s} Mb/s")
                    }
                }),
            ),
            ("duplex", o(&self.duplex)),
            ("mtu", n(self.mtu)),
            ("mac", o(&self.mac)),
            (
                "router rx packets/bytes/errors",
                format!("{}/{}/{}", self.rx_packets, self.rx_bytes, self.rx_errors),
            ),
            (
                "router tx packets/bytes",
                format!("{}/{}", self.tx_packets, self.tx_bytes),
            ),
        ];
        let dev: Vec<(String, String)> = self
            .device_counters
            .iter()
            .map(|(k, v)| (format!("device {k}"), v.to_string()))
            .collect();
        rows.extend(dev.iter().map(|(k, v)| (k.as_str(), v.clone())));
        crate::table::pairs(["Link", "Value"], rows)
    }
}
