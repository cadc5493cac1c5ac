//! `show ip mroute` / `show ipv6 mroute`: the multicast FIB's routes per VRF, with their RPF
//! interface, output interfaces, where they came from and their counters.

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::table;

/// One (S,G) or (*,G) route.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MrouteEntryView {
    pub vrf: String,
    /// `*` for (*,G).
    pub source: String,
    pub group: String,
    /// The RPF interface ("-": none the router has, pimd's register device say).
    pub iif: String,
    pub oifs: Vec<String>,
    /// `pim` (mirrored from the kernel, which pimd programs) or `static` (the config's).
    pub origin: String,
    pub packets: u64,
    pub bytes: u64,
    /// Copies sent (a packet to 24 interfaces is 24).
    pub replicas: u64,
    /// Packets that arrived on another interface than the RPF one.
    pub wrong_if: u64,
}

/// `GET /v1/mroutes?family=ipv4|ipv6`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MrouteView {
    pub routes: Vec<MrouteEntryView>,
    /// VRFs that route multicast.
    pub vrfs: Vec<String>,
    /// Routes in the FIB (both families), and its size.
    pub total: u64,
    pub capacity: u64,
    /// The kernel's routes the mirror holds, and what it has done.
    pub mirror_running: bool,
    pub kernel_routes: u64,
    pub mirrored_adds: u64,
    pub mirrored_deletes: u64,
    pub dumps: u64,
    pub refused: u64,
    /// Routes refused by the FIB, full; the times it was compacted.
    pub table_full: u64,
    pub compactions: u64,
    /// Multicast data the kernel routed out of the TAP twins, dropped (the data plane had
    /// replicated it already).
    pub kernel_copies_dropped: u64,
}

impl Render for MrouteView {
    fn render(&self) -> String {
        if self.vrfs.is_empty() {
            return "No VRF routes multicast (multicast-routing is not configured).\n".into();
        }
        let rows = self
            .routes
            .iter()
            .map(|r| {
                vec![
                    r.vrf.clone(),
                    format!("({}, {})", r.source, r.group),
                    r.iif.clone(),
                    if r.oifs.is_empty() {
                        "-".into()
                    } else {
                        r.oifs.join(" ")
                    },
                    r.origin.clone(),
                    r.packets.to_string(),
                    r.replicas.to_string(),
                    r.wrong_if.to_string(),
                ]
            })
            .collect();
        let mut out = table(
            &[
                "VRF", "Route", "RPF", "Out", "Origin", "Packets", "Copies", "Wrong if",
            ],
            rows,
        );
        out.push_str(&format!(
            "{} route(s) of {} (both families), VRFs routing multicast: {}\n",
            self.total,
            self.capacity,
            self.vrfs.join(", ")
        ));
        out.push_str(&format!(
            "Kernel mirror: {}; {} kernel route(s); {} added, {} deleted, {} dump(s), {} refused; FIB full {}, compactions {}; kernel copies dropped {}\n",
            if self.mirror_running { "running" } else { "not running (no TAP twins)" },
            self.kernel_routes,
            self.mirrored_adds,
            self.mirrored_deletes,
            self.dumps,
            self.refused,
            self.table_full,
            self.compactions,
            self.kernel_copies_dropped
        ));
        out
    }
}
