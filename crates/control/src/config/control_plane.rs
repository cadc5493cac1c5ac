//! The `control-plane` section: how the router meets its routing control plane (FRR).
//!
//! ```yaml
//! control-plane:
//!   taps: true              # a TAP twin per interface, carrying its addresses (linux-cp)
//!   punt:                   # the punt table: rate (frames/s per worker) and burst per class
//!     arp: { rate: 2000, burst: 200 }
//!     bgp: { rate: 20000 }  # burst: a tenth of the rate unless given
//!   neighbor: { reachable-time: 30, retransmit-ms: 1000, retries: 3, hold: 8 }
//!   fpm: { listen: "127.0.0.1:2620", stale-time: 120, tables: { 254: default, 10: blue } }
//! ```

use std::net::SocketAddr;

use super::fields::{Errs, Fields};
use crate::yaml::Node;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ControlPlane {
    /// Every interface gets a TAP twin in the kernel (name: the interface's `host-name`, or
    /// `lr-` and its name), and traffic for the router goes up it.
    pub taps: bool,
    /// The punt table: rate and burst per class (`dataplane::punt::PuntClass`). A commit may
    /// change it while the router runs.
    pub punt: dataplane::punt::PuntLimits,
    pub neighbor: NeighborTimers,
    pub fpm: Option<FpmCfg>,
}

/// ARP and ND timing, after the Linux defaults (RFC 4861 10: REACHABLE_TIME 30 s,
/// RETRANS_TIMER 1 s, MAX_MULTICAST_SOLICIT 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighborTimers {
    /// A learned entry is trusted this long, then probed.
    pub reachable_s: u32,
    pub retransmit_ms: u32,
    /// Requests (or probes) without an answer before giving up.
    pub retries: u32,
    /// Packets held per unresolved neighbour; more are dropped and counted.
    pub hold: usize,
}

impl Default for NeighborTimers {
    fn default() -> Self {
        Self {
            reachable_s: 30,
            retransmit_ms: 1000,
            retries: 3,
            hold: 8,
        }
    }
}

/// `control-plane.punt`: `CLASS: { rate: N, burst: N }` for any of the classes.
fn parse_punt(n: &Node, limits: &mut dataplane::punt::PuntLimits, e: &mut Errs) {
    use dataplane::punt::PuntClass;
    let crate::yaml::Value::Map(m) = &n.value else {
        e.at(
            n,
            "control-plane.punt",
            "a map of punt classes, each `{ rate: N, burst: N }`",
        );
        return;
    };
    for (k, v) in m {
        let path = format!("control-plane.punt.{k}");
        let Some(class) = PuntClass::parse(k) else {
            let names: Vec<_> = PuntClass::ALL.iter().map(|c| c.name()).collect();
            e.at(
                v,
                &path,
                format!("`{k}` is not a punt class ({})", names.join(", ")),
            );
            continue;
        };
        let Some(mut g) = Fields::new(path.clone(), v, e) else {
            continue;
        };
        let rate = g.parse::<u32>("rate", "a rate (frames per second per worker)", e);
        let burst = g.parse::<u32>("burst", "a frame count", e);
        g.finish(e);
        let Some(rate) = rate else {
            e.at(v, &format!("{path}.rate"), "`rate` is required");
            continue;
        };
        if rate == 0 {
            e.at(
                v,
                &format!("{path}.rate"),
                "a rate must be at least 1 frame per second",
            );
            continue;
        }
        let burst = burst.unwrap_or((rate / 10).max(1));
        if burst == 0 {
            e.at(
                v,
                &format!("{path}.burst"),
                "a burst must be at least 1 frame",
            );
            continue;
        }
        limits.limits[class as usize] = dataplane::punt::Limit { rate, burst };
    }
}

/// The FPM server zebra's `dplane_fpm_nl` connects to.
#[derive(Clone, Debug, PartialEq)]
pub struct FpmCfg {
    pub listen: SocketAddr,
    /// After a (re)connection, routes not re-sent within this long are removed.
    pub stale_s: u32,
    /// Kernel table id -> VRF name; table 254 (main) is `default` unless mapped otherwise.
    pub tables: Vec<(u32, String)>,
}

pub(super) fn parse(n: &Node, vrfs: &[String], e: &mut Errs) -> ControlPlane {
    let mut cp = ControlPlane::default();
    let Some(mut f) = Fields::new("control-plane".into(), n, e) else {
        return cp;
    };
    if let Some(t) = f.parse("taps", "true or false", e) {
        cp.taps = t;
    }
    if let Some(r) = f.get("punt-rate") {
        e.at(
            r,
            "control-plane.punt-rate",
            "`punt-rate` is now `punt`, a table with one entry per class (arp, nd, ospf, bgp, \
             ldp, pim, igmp-mld, isis, bfd, local, glean, ttl-expired, ...), each \
             `{ rate: FRAMES_PER_S, burst: FRAMES }`",
        );
    }
    if let Some(r) = f.get("punt") {
        parse_punt(r, &mut cp.punt, e);
    }
    if let Some(nb) = f.get("neighbor") {
        if let Some(mut g) = Fields::new("control-plane.neighbor".into(), nb, e) {
            let t = &mut cp.neighbor;
            if let Some(v) = g.parse::<u32>("reachable-time", "a time in seconds", e) {
                t.reachable_s = v.max(1);
            }
            if let Some(v) = g.parse::<u32>("retransmit-ms", "a time in milliseconds", e) {
                t.retransmit_ms = v.max(10);
            }
            if let Some(v) = g.parse::<u32>("retries", "a count", e) {
                t.retries = v.max(1);
            }
            if let Some(v) = g.parse::<usize>("hold", "a packet count", e) {
                t.hold = v.min(1024);
            }
            g.finish(e);
        }
    }
    if let Some(fp) = f.get("fpm") {
        if let Some(mut g) = Fields::new("control-plane.fpm".into(), fp, e) {
            let listen = match g.str("listen", e) {
                None => Some("127.0.0.1:2620".parse().expect("literal")),
                Some(s) => match s.parse::<SocketAddr>() {
                    Ok(a) => Some(a),
                    Err(_) => {
                        e.at(
                            fp,
                            "control-plane.fpm.listen",
                            format!("`{s}` is not an address:port"),
                        );
                        None
                    }
                },
            };
            let stale_s = g
                .parse::<u32>("stale-time", "a time in seconds", e)
                .unwrap_or(120);
            let mut tables = Vec::new();
            if let Some(tn) = g.get("tables") {
                match &tn.value {
                    crate::yaml::Value::Map(m) => {
                        for (k, v) in m {
                            let field = format!("control-plane.fpm.tables.{k}");
                            match (k.parse::<u32>(), &v.value) {
                                (Ok(id), crate::yaml::Value::Scalar(vrf)) => {
                                    if vrfs.contains(vrf) {
                                        tables.push((id, vrf.clone()))
                                    } else {
                                        e.at(
                                            v,
                                            &field,
                                            format!("VRF `{vrf}` is not defined under `vrfs`"),
                                        )
                                    }
                                }
                                (Err(_), _) => {
                                    e.at(v, &field, format!("`{k}` is not a kernel table id"))
                                }
                                _ => e.at(v, &field, "expected a VRF name"),
                            }
                        }
                    }
                    _ => e.at(
                        tn,
                        "control-plane.fpm.tables",
                        "expected a mapping of table id to VRF name",
                    ),
                }
            }
            g.finish(e);
            if let Some(listen) = listen {
                cp.fpm = Some(FpmCfg {
                    listen,
                    stale_s,
                    tables,
                });
            }
        }
    }
    f.finish(e);
    cp
}
