//! DLSw+ (RFC 1795): SNA's LLC2 links carried between routers over TCP.
//!
//! - [`station`]: an LLC2 link station (the LAN links DLSw terminates, and the tester's SNA
//!   endpoints);
//! - [`engine`]: peers, reachability and circuits as a function of what arrives (sans I/O);
//! - [`service`]: the thread that moves SSP between the engine and the kernel's TCP (on the TAP
//!   twins, port 2065) and LLC frames between the engine and the LAN ports (the punt path's
//!   `sna` class in, the punt thread's outbox out).
//!
//! The data plane's part is small: `l2-input` punts the LLC frames of a bridge domain DLSw
//! serves (`dataplane::l2::bridge::Bridge::dlsw`) under a class of their own, `sna`; the punt
//! thread gives them to [`Dlsw::lan_frame`].

pub mod engine;
pub mod service;
pub mod station;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::config::dlsw::DlswCfg;
use engine::{Engine, EngineCfg};

/// A router's DLSw: its engine and the LLC frames waiting for it.
pub struct Dlsw {
    pub cfg: DlswCfg,
    pub engine: Mutex<Engine>,
    /// LLC frames from the punt thread (port, frame), taken by the service thread in bulk.
    inbox: Mutex<Vec<(u16, Vec<u8>)>>,
    epoch: Instant,
}

/// The data plane's ports of the members of the bridge domains DLSw serves (explorers go out
/// of each), in config order.
pub fn lan_ports(cfg: &crate::config::Config) -> Vec<u16> {
    let Some(d) = &cfg.dlsw else {
        return Vec::new();
    };
    let mut ports = Vec::new();
    for (name, _) in &d.bridge_domains {
        let Some(b) = cfg.bridges.iter().find(|b| &b.name == name) else {
            continue;
        };
        for m in &b.members {
            let port = cfg
                .interfaces
                .iter()
                .find(|i| i.name == m.interface)
                .and_then(|i| cfg.ports.iter().position(|p| p.name == i.port));
            if let Some(p) = port {
                if !ports.contains(&(p as u16)) {
                    ports.push(p as u16);
                }
            }
        }
    }
    ports
}

/// LLC frames the inbox holds at most; beyond, the punt thread drops (and counts) them, as a
/// router's input queue does when its DLSw process falls behind.
pub const INBOX_MAX: usize = 65_536;

impl Dlsw {
    /// `lan_ports`: the data plane's ports of the served bridge domains' members.
    pub fn new(cfg: &DlswCfg, lan_ports: Vec<u16>) -> Arc<Dlsw> {
        let ecfg = EngineCfg {
            local: cfg.local_peer,
            peers: cfg.remote_peers.iter().map(|(a, _)| *a).collect(),
            keepalive_ms: cfg.keepalive_ms,
            dead_after: cfg.dead_after,
            pacing_window: cfg.pacing_window,
            llc2: cfg.llc2,
            load_balance: cfg.load_balance,
            explorer_ms: cfg.explorer_ms,
            cache_ms: cfg.cache_ms,
            lan_ports,
            max_circuits: cfg.max_circuits,
        };
        Arc::new(Dlsw {
            cfg: cfg.clone(),
            engine: Mutex::new(Engine::new(ecfg)),
            inbox: Mutex::new(Vec::new()),
            epoch: Instant::now(),
        })
    }

    /// Milliseconds since the service started: the engine's time.
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn engine(&self) -> std::sync::MutexGuard<'_, Engine> {
        self.engine.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands LLC frames from the LAN ports over; false if the inbox was full (the frame is
    /// dropped: the caller counts it).
    pub fn lan_frame(&self, port: u16, frame: &[u8]) -> bool {
        let mut q = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() >= INBOX_MAX {
            return false;
        }
        q.push((port, frame.to_vec()));
        true
    }

    /// Takes what the inbox holds.
    pub fn take_lan_frames(&self, into: &mut Vec<(u16, Vec<u8>)>) {
        let mut q = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::swap(&mut *q, into);
    }
}
