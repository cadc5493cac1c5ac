//! ATM ports in the metrics: per PVC, the SAR's counters (PDUs, cells and bytes each way, CRC
//! and length errors, reassembly timeouts, oversize PDUs, OAM loopbacks, shaper drops), and per
//! port the cells it could not place (HEC errors, unknown VCs, cell fragments); and `show atm
//! pvc`, the same per PVC with its encapsulation and class.

use std::sync::atomic::Ordering::Relaxed;

use api::views::{AtmPortView, AtmPvcView, AtmView};
use dataplane::atm::TrafficClass;
use dataplane::tables::AtmEncap;

use crate::metrics::{Exposition, Kind};

/// A per-VC metric: its name's middle, its help, and how to read it from a VC's counts.
type VcFamily = (
    &'static str,
    &'static str,
    fn(&dataplane::atm::VcCounts) -> u64,
);

impl super::Core {
    /// `show atm pvc`: every PVC of every ATM port with its counters.
    pub fn atm_pvcs(&self) -> AtmView {
        let s = self.lock("show atm");
        let mut v = AtmView::default();
        for i in 0..s.router.port_slots.len() {
            let Some(st) = s.runtime.atm_port(i) else {
                continue;
            };
            let port = s.router.port_name(i as u16).to_string();
            v.ports.push(AtmPortView {
                port: port.clone(),
                hec_errors: st.hec_errors.load(Relaxed),
                unknown_vc: st.unknown_vc.load(Relaxed),
                no_buffers: st.no_buffers.load(Relaxed),
            });
            for (vc, stats) in st.vcs.iter().zip(st.stats.iter()) {
                let ifc = s.router.pvc_interface(&port, vc.vpi, vc.vci);
                let c = stats.snapshot();
                v.pvcs.push(AtmPvcView {
                    port: port.clone(),
                    interface: ifc.map(|x| x.name.clone()).unwrap_or_default(),
                    vpi: vc.vpi,
                    vci: vc.vci,
                    encap: match ifc.and_then(|x| x.atm.as_ref()).map(|a| a.encap) {
                        Some(AtmEncap::VcMuxIpv4) => "vc-mux-ipv4",
                        Some(AtmEncap::VcMuxIpv6) => "vc-mux-ipv6",
                        _ => "llc-snap",
                    }
                    .into(),
                    class: match vc.class {
                        TrafficClass::Ubr => "ubr".into(),
                        TrafficClass::Cbr { pcr } => format!("cbr pcr {pcr}"),
                        TrafficClass::Vbr { pcr, scr, mbs } => {
                            format!("vbr pcr {pcr} scr {scr} mbs {mbs}")
                        }
                    },
                    rx_pdus: c.rx_pdus,
                    rx_cells: c.rx_cells,
                    rx_bytes: c.rx_bytes,
                    tx_pdus: c.tx_pdus,
                    tx_cells: c.tx_cells,
                    crc_errors: c.crc_errors,
                    length_errors: c.length_errors,
                    reassembly_timeouts: c.timeouts,
                    oversize: c.oversize,
                    oam_loopbacks: c.oam_loopbacks,
                    oam_dropped: c.oam_dropped,
                    shaper_drops: c.shaper_drops,
                });
            }
        }
        v
    }

    pub(super) fn atm_metrics(&self, s: &super::State, e: &mut Exposition) {
        let ports: Vec<_> = (0..s.router.port_slots.len())
            .filter_map(|i| Some((i, s.runtime.atm_port(i)?)))
            .collect();
        if ports.is_empty() {
            return;
        }
        let vc_families: [VcFamily; 12] = [
            ("rx_pdus", "AAL5 PDUs reassembled whole.", |c| c.rx_pdus),
            (
                "rx_cells",
                "Cells received (of whole or failed PDUs).",
                |c| c.rx_cells,
            ),
            ("rx_bytes", "SDU bytes reassembled.", |c| c.rx_bytes),
            ("tx_pdus", "AAL5 PDUs segmented.", |c| c.tx_pdus),
            ("tx_cells", "Cells sent.", |c| c.tx_cells),
            ("crc_errors", "PDUs whose CRC-32 failed.", |c| c.crc_errors),
            (
                "length_errors",
                "PDUs whose trailer length did not fit their cells.",
                |c| c.length_errors,
            ),
            (
                "reassembly_timeouts",
                "Partial PDUs discarded at the reassembly timeout.",
                |c| c.timeouts,
            ),
            ("oversize", "PDUs larger than a buffer, discarded.", |c| {
                c.oversize
            }),
            ("oam_loopbacks", "F5 OAM loopback requests answered.", |c| {
                c.oam_loopbacks
            }),
            (
                "oam_dropped",
                "OAM and RM cells not acted on (bad CRC-10, other functions).",
                |c| c.oam_dropped,
            ),
            (
                "shaper_drops",
                "PDUs the VC's shaper queue could not hold.",
                |c| c.shaper_drops,
            ),
        ];
        // Each VC's interface, by port.
        let label = |port: usize, vc: &dataplane::atm::VcConfig| {
            let name = s.router.port_name(port as u16).to_string();
            let ifname = s
                .router
                .pvc_interface(&name, vc.vpi, vc.vci)
                .map(|i| i.name.clone())
                .unwrap_or_default();
            (name, ifname, vc.vpi.to_string(), vc.vci.to_string())
        };
        for (name, help, get) in vc_families {
            e.family(
                &format!("linerate_atm_vc_{name}_total"),
                Kind::Counter,
                help,
            );
            for (p, st) in &ports {
                for (vc, stats) in st.vcs.iter().zip(st.stats.iter()) {
                    let (port, ifname, vpi, vci) = label(*p, vc);
                    e.sample(
                        &[
                            ("port", &port),
                            ("interface", &ifname),
                            ("vpi", &vpi),
                            ("vci", &vci),
                        ],
                        get(&stats.snapshot()) as f64,
                    );
                }
            }
        }
        e.family(
            "linerate_atm_port_cells_dropped_total",
            Kind::Counter,
            "Cells an ATM port could not place: header error check failed, no such VC, or a \
             fragment of a cell ending a train (a driver fault).",
        );
        for (p, st) in &ports {
            let port = s.router.port_name(*p as u16).to_string();
            for (why, n) in [
                ("hec", st.hec_errors.load(Relaxed)),
                ("unknown_vc", st.unknown_vc.load(Relaxed)),
                ("partial_cell", st.bad_trains.load(Relaxed)),
            ] {
                e.sample(&[("port", &port), ("reason", why)], n as f64);
            }
        }
    }
}
