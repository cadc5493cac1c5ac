//! ATM: `show atm pvc` (`GET /v1/atm/pvcs`): every PVC of every ATM port with its SAR counters,
//! and each port's cells that reached no PVC.

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::table;

/// One PVC and its counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AtmPvcView {
    pub port: String,
    pub interface: String,
    pub vpi: u8,
    pub vci: u16,
    /// `llc-snap`, `vc-mux-ipv4` or `vc-mux-ipv6`.
    pub encap: String,
    /// `ubr`, `cbr pcr N` or `vbr pcr N scr N mbs N` (cells per second, cells).
    pub class: String,
    pub rx_pdus: u64,
    pub rx_cells: u64,
    pub rx_bytes: u64,
    pub tx_pdus: u64,
    pub tx_cells: u64,
    pub crc_errors: u64,
    pub length_errors: u64,
    pub reassembly_timeouts: u64,
    pub oversize: u64,
    pub oam_loopbacks: u64,
    pub oam_dropped: u64,
    pub shaper_drops: u64,
}

/// One ATM port's cells that reached no PVC.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AtmPortView {
    pub port: String,
    pub hec_errors: u64,
    pub unknown_vc: u64,
    pub no_buffers: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AtmView {
    pub ports: Vec<AtmPortView>,
    pub pvcs: Vec<AtmPvcView>,
}

impl Render for AtmView {
    fn render(&self) -> String {
        if self.ports.is_empty() {
            return "No ATM ports (a port is `media: atm`).\n".into();
        }
        let rows = self
            .pvcs
            .iter()
            .map(|v| {
                vec![
                    v.interface.clone(),
                    v.port.clone(),
                    format!("{}/{}", v.vpi, v.vci),
                    v.encap.clone(),
                    v.class.clone(),
                    format!("{}/{}", v.rx_pdus, v.rx_cells),
                    format!("{}/{}", v.tx_pdus, v.tx_cells),
                    format!(
                        "{}/{}/{}/{}",
                        v.crc_errors, v.length_errors, v.reassembly_timeouts, v.oversize
                    ),
                    v.oam_loopbacks.to_string(),
                    v.shaper_drops.to_string(),
                ]
            })
            .collect();
        let mut out = table(
            &[
                "Interface",
                "Port",
                "VPI/VCI",
                "Encap",
                "Class",
                "In PDUs/cells",
                "Out PDUs/cells",
                "CRC/len/timeout/oversize",
                "OAM loops",
                "Shaper drops",
            ],
            rows,
        );
        for p in &self.ports {
            out.push_str(&format!(
                "port {}: {} cells with a bad HEC, {} on unknown VCs, {} PDUs lost for want of a buffer\n",
                p.port, p.hec_errors, p.unknown_vc, p.no_buffers
            ));
        }
        out
    }
}
