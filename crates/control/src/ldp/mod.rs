//! LDP (RFC 5036) as the router's own speaker, for the pseudowires it signals (RFC 4447).
//!
//! - [`engine`]: targeted adjacencies, sessions and PWid FEC mappings as a function of what
//!   arrives (sans I/O);
//! - [`service`]: the thread that moves hellos (UDP 646) and sessions (TCP 646) between the
//!   engine and the kernel, on the transport address (an interface's, so its TAP twin's: the
//!   punt path carries them), and hands the pseudowires' signalled state to the router.
//!
//! Why not FRR's ldpd: without MPLS in the kernel, zebra drops ldpd's label bindings and
//! never sends pseudowires over FPM (docs/mpls.md). ldpd is the peer the tests run against.
//!
//! Built: targeted and basic (link hello) discovery and sessions, pseudowire signalling with
//! the control word negotiated, the MTU checked and PW status both ways; this router's own
//! addresses and connected subnets mapped to implicit null (it is their egress); every other
//! IPv4 route of the default VRF a prefix FEC with a label of its own (`engine::fec`), the
//! peers' labels becoming the label table's swaps and the labels pushed on the routes
//! (`router::ldp`).

pub mod engine;
pub mod service;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::config::mpls::LdpCfg;
use crate::config::Config;
use engine::{Engine, EngineCfg, LinkSpec, PwSpec};

/// A router's LDP speaker: its engine and clock.
pub struct Ldp {
    pub cfg: LdpCfg,
    engine: Mutex<Engine>,
    epoch: Instant,
}

/// The engine's settings from a config: None without `mpls.ldp`. Every pseudowire with no
/// `remote-label` is signalled, to its peer, with its interface's MTU; circuits start up (the
/// service sets them as the router sees them).
pub fn engine_cfg(cfg: &Config) -> Option<EngineCfg> {
    let m = cfg.mpls.as_ref()?;
    let l = m.ldp.as_ref()?;
    let pws = m
        .pseudowires
        .iter()
        .filter(|p| p.remote_label.is_none())
        .filter_map(|p| {
            let std::net::IpAddr::V4(peer) = p.peer else {
                return None;
            };
            let ifc = cfg.interfaces.iter().find(|i| i.name == p.interface)?;
            let vc = p.vc_type.unwrap_or(if ifc.vlan.is_some() {
                dataplane::mpls::VcType::Vlan
            } else {
                dataplane::mpls::VcType::Ethernet
            });
            Some(PwSpec {
                name: p.name.clone(),
                peer,
                pw_id: p.vc_id,
                pw_type: vc.code(),
                control_word: p.control_word,
                mtu: ifc.mtu,
                local_label: p.local_label,
                ac_up: ifc.up,
            })
        })
        .collect();
    Some(EngineCfg {
        lsr_id: l.router_id,
        transport: l.transport,
        hello_interval_ms: l.hello_interval_ms,
        hold_time: l.hold_time,
        keepalive: l.keepalive,
        neighbors: l.neighbors.clone(),
        pws,
        egress: egress(cfg),
        links: l
            .interfaces
            .iter()
            .filter_map(|(name, _)| {
                let ifc = cfg.interfaces.iter().find(|i| &i.name == name)?;
                let &(a, _) = ifc.ipv4.first()?;
                Some(LinkSpec {
                    name: name.clone(),
                    host: ifc.host_name.clone(),
                    address: std::net::Ipv4Addr::from(a),
                })
            })
            .collect(),
        link_hello_interval_ms: l.link_hello_interval_ms,
        link_hold_time: l.link_hold_time,
        label_range: l.label_range,
    })
}

/// The prefixes the router is the egress for: each IPv4 address of an interface in the
/// default VRF as a host, and its connected subnet.
fn egress(cfg: &Config) -> Vec<(std::net::Ipv4Addr, u8)> {
    let mut out = Vec::new();
    for i in cfg.interfaces.iter().filter(|i| i.vrf == "default") {
        for &(a, len) in &i.ipv4 {
            out.push((std::net::Ipv4Addr::from(a), 32));
            if len < 32 {
                let m = u32::MAX << (32 - u32::from(len));
                out.push((std::net::Ipv4Addr::from(a & m), len));
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

impl Ldp {
    pub fn new(cfg: LdpCfg, ecfg: EngineCfg) -> Arc<Ldp> {
        Arc::new(Ldp {
            cfg,
            engine: Mutex::new(Engine::new(ecfg)),
            epoch: Instant::now(),
        })
    }

    /// Milliseconds since the speaker started: the engine's time.
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn engine(&self) -> std::sync::MutexGuard<'_, Engine> {
        self.engine.lock().unwrap_or_else(|e| e.into_inner())
    }
}
