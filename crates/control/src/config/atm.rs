//! ATM in the config: a port's `media: atm` (it carries cells) and an interface's `atm` block
//! (the PVC it is: VPI/VCI, RFC 2684 encapsulation, traffic class).
//!
//! ```yaml
//! ports:
//!   - {name: oc12-0, driver: mem, media: atm, reassembly-timeout-ms: 1000}
//! interfaces:
//!   - name: oc12-0.32
//!     port: oc12-0
//!     atm: {vpi: 0, vci: 32, encap: llc-snap, class: vbr, pcr: 100000, scr: 50000, mbs: 100}
//!     ipv4: [10.1.0.1/30]
//! ```

use dataplane::atm::TrafficClass;
use dataplane::tables::AtmEncap;

use super::fields::{Errs, Fields};
use super::{Config, Driver};
use crate::yaml::Node;

/// A port that carries ATM cells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AtmPortCfg {
    /// How long a partial PDU waits for its last cell.
    pub reassembly_timeout_ms: u32,
}

/// An interface that is a PVC of an ATM port.
#[derive(Clone, Debug, PartialEq)]
pub struct AtmVcCfg {
    pub vpi: u8,
    pub vci: u16,
    pub encap: AtmEncap,
    pub class: TrafficClass,
}

impl AtmVcCfg {
    pub fn key(&self) -> u32 {
        packet::atm::vc_key(self.vpi, self.vci)
    }
}

/// OC-12's cell rate: the SONET STS-12c payload (599.04 Mbit/s) in 53-byte cells. No VC may be
/// shaped faster than its port can send.
pub const OC12_CELLS_PER_S: u32 = 1_412_830;

/// A port's `media` (ethernet, the default, or atm) and `reassembly-timeout-ms`.
pub(super) fn parse_port<'a>(
    f: &mut Fields<'a>,
    n: &Node,
    driver: Option<&Driver>,
    e: &mut Errs,
) -> Option<AtmPortCfg> {
    let path = f.path.clone();
    let media = f.str("media", e);
    let timeout: Option<u32> = f.parse("reassembly-timeout-ms", "milliseconds", e);
    let atm = match media.as_deref() {
        None | Some("ethernet") => None,
        Some("atm") => Some(AtmPortCfg {
            reassembly_timeout_ms: timeout.unwrap_or(1000),
        }),
        Some(m) => {
            e.at(
                f.node("media").unwrap_or(n),
                &format!("{path}.media"),
                format!("`{m}`: media is ethernet (the default) or atm"),
            );
            None
        }
    };
    if timeout.is_some() && atm.is_none() {
        e.at(
            f.node("reassembly-timeout-ms").unwrap_or(n),
            &format!("{path}.reassembly-timeout-ms"),
            "only an ATM port (`media: atm`) reassembles",
        );
    }
    if let Some(t) = timeout {
        if !(1..=60_000).contains(&t) {
            e.at(
                f.node("reassembly-timeout-ms").unwrap_or(n),
                &format!("{path}.reassembly-timeout-ms"),
                format!("{t}: the reassembly timeout must be 1..=60000 ms"),
            );
        }
    }
    if atm.is_some() && matches!(driver, Some(Driver::AfPacket { .. } | Driver::AfXdp { .. })) {
        e.at(
            f.node("media").unwrap_or(n),
            &format!("{path}.media"),
            "an ATM port carries cells on a mem or pcap driver; a Linux device carries Ethernet",
        );
    }
    atm
}

/// An interface's `atm` block.
pub(super) fn parse_vc<'a>(f: &mut Fields<'a>, e: &mut Errs) -> Option<AtmVcCfg> {
    let node = f.get("atm")?;
    let path = f.field("atm");
    let mut a = Fields::new(path.clone(), node, e)?;
    let vpi: Option<u8> = a.parse("vpi", "a VPI (0..=255)", e);
    let vci: Option<u16> = a.parse("vci", "a VCI (32..=65535)", e);
    if vpi.is_none() && a.node("vpi").is_none() {
        e.at(node, &format!("{path}.vpi"), "`vpi` is required");
    }
    if vci.is_none() && a.node("vci").is_none() {
        e.at(node, &format!("{path}.vci"), "`vci` is required");
    }
    if let Some(v) = vci {
        if v < 32 {
            e.at(
                a.node("vci").unwrap_or(node),
                &format!("{path}.vci"),
                format!("{v}: VCIs 0..=31 are reserved for signalling, ILMI and OAM (I.361); use 32..=65535"),
            );
        }
    }
    let encap = match a.str("encap", e).as_deref() {
        None | Some("llc-snap") => Some(AtmEncap::LlcSnap),
        Some("vc-mux-ipv4") => Some(AtmEncap::VcMuxIpv4),
        Some("vc-mux-ipv6") => Some(AtmEncap::VcMuxIpv6),
        Some("llc-bridged") => {
            e.at(
                a.node("encap").unwrap_or(node),
                &format!("{path}.encap"),
                "bridged PDUs (RFC 2684 6.1) are not switched yet; routed llc-snap, vc-mux-ipv4 or vc-mux-ipv6",
            );
            None
        }
        Some(x) => {
            e.at(
                a.node("encap").unwrap_or(node),
                &format!("{path}.encap"),
                format!("`{x}`: encap is llc-snap (the default), vc-mux-ipv4 or vc-mux-ipv6"),
            );
            None
        }
    };
    let pcr: Option<u32> = a.parse("pcr", "cells per second", e);
    let scr: Option<u32> = a.parse("scr", "cells per second", e);
    let mbs: Option<u32> = a.parse("mbs", "cells", e);
    let class_s = a.str("class", e);
    let bad = |key: &str, msg: String, e: &mut Errs| {
        e.at(a.node(key).unwrap_or(node), &format!("{path}.{key}"), msg);
    };
    let class = match class_s.as_deref() {
        None | Some("ubr") => {
            for (k, v) in [("pcr", pcr), ("scr", scr), ("mbs", mbs)] {
                if v.is_some() {
                    bad(
                        k,
                        format!("a UBR VC has no `{k}`; set `class: cbr` or `vbr`"),
                        e,
                    );
                }
            }
            Some(TrafficClass::Ubr)
        }
        Some("cbr") => {
            for (k, v) in [("scr", scr), ("mbs", mbs)] {
                if v.is_some() {
                    bad(
                        k,
                        format!("a CBR VC has a peak rate only; `{k}` is for `class: vbr`"),
                        e,
                    );
                }
            }
            match pcr {
                Some(p) => Some(TrafficClass::Cbr { pcr: p }),
                None => {
                    bad("pcr", "a CBR VC needs `pcr` (cells per second)".into(), e);
                    None
                }
            }
        }
        Some("vbr") => match (pcr, scr, mbs) {
            (Some(p), Some(s), Some(m)) => {
                if s > p {
                    bad(
                        "scr",
                        format!("{s}: the sustainable rate cannot exceed the peak rate ({p})"),
                        e,
                    );
                }
                if m == 0 {
                    bad("mbs", "the maximum burst size is at least 1 cell".into(), e);
                }
                Some(TrafficClass::Vbr {
                    pcr: p,
                    scr: s,
                    mbs: m,
                })
            }
            _ => {
                bad("class", "a VBR VC needs `pcr`, `scr` and `mbs`".into(), e);
                None
            }
        },
        Some(x) => {
            bad(
                "class",
                format!("`{x}`: class is ubr (the default), cbr or vbr"),
                e,
            );
            None
        }
    };
    for (k, v) in [("pcr", pcr), ("scr", scr)] {
        if let Some(r) = v {
            if r == 0 || r > OC12_CELLS_PER_S {
                bad(
                    k,
                    format!("{r}: a cell rate must be 1..={OC12_CELLS_PER_S} (OC-12's payload in cells)"),
                    e,
                );
            }
        }
    }
    a.finish(e);
    Some(AtmVcCfg {
        vpi: vpi?,
        vci: vci?,
        encap: encap?,
        class: class?,
    })
}

/// Interfaces on ATM ports are PVCs, and only they are: each has an `atm` block, no VLAN, and
/// a VC of its own on its port.
pub(super) fn cross_check(cfg: &Config, e: &mut Errs) {
    for (i, ifc) in cfg.interfaces.iter().enumerate() {
        let Some(port) = cfg.ports.iter().find(|p| p.name == ifc.port) else {
            continue;
        };
        match (&port.atm, &ifc.atm) {
            (Some(_), None) => e.origin(
                &ifc.origin,
                format!(
                    "interface `{}` is on ATM port `{}`: it needs an `atm` block (vpi, vci)",
                    ifc.name, port.name
                ),
            ),
            (None, Some(_)) => e.origin(
                &ifc.origin,
                format!(
                    "interface `{}` has an `atm` block but port `{}` is not `media: atm`",
                    ifc.name, port.name
                ),
            ),
            (Some(_), Some(vc)) => {
                if ifc.vlan.is_some() || ifc.s_vlan.is_some() {
                    e.origin(
                        &ifc.origin,
                        format!("interface `{}`: a PVC has no VLAN tags", ifc.name),
                    );
                }
                if let Some(o) = cfg.interfaces[..i].iter().find(|o| {
                    o.port == ifc.port && o.atm.as_ref().map(AtmVcCfg::key) == Some(vc.key())
                }) {
                    e.origin(
                        &ifc.origin,
                        format!(
                            "interface `{}`: VC {}/{} on port `{}` is already interface `{}`",
                            ifc.name, vc.vpi, vc.vci, port.name, o.name
                        ),
                    );
                }
            }
            (None, None) => {}
        }
    }
}
