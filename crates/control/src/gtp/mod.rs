//! The GGSN (3GPP TS 29.060): GTP-C here in the control plane, GTP-U in the data plane's
//! gtpu-input and gtpu-encap nodes, the PDP contexts between them in `dataplane::gtp`.
//!
//! - [`engine`]: GTP-C as a function of the messages received (sans I/O);
//! - [`pool`]: the APNs' address pools;
//! - [`service`]: the thread that moves GTP-C and GTP-U signalling between the kernel's UDP
//!   sockets (on the TAP twins, where the data plane punts them) and the engine;
//! - [`direct`]: GTP-C requests answered in the punt path, without the kernel's round trip.
//!
//! The router's side ([`Ggsn`]) outlives config commits: contexts stay up while the rest of the
//! config changes; a commit that changes the `ggsn` section itself is refused (restart to
//! change it).

pub mod direct;
pub mod engine;
pub mod pool;
pub mod service;

use std::sync::{Arc, Mutex};

use dataplane::gtp::GtpTable;

use crate::config::ggsn::GgsnCfg;

/// The GGSN of a router: its context table (shared with the data plane) and GTP-C engine.
pub struct Ggsn {
    pub cfg: GgsnCfg,
    pub table: Arc<GtpTable>,
    pub engine: Mutex<engine::Engine>,
    /// The engine's clock starts here: every caller (the GTP-C thread, the punt path) reads
    /// the same one.
    epoch: std::time::Instant,
}

impl Ggsn {
    /// A GGSN for `cfg` with room for `contexts` contexts and counters for `workers` workers,
    /// restart counter `recovery`.
    pub fn new(cfg: &GgsnCfg, contexts: usize, workers: usize, recovery: u8) -> Arc<Ggsn> {
        let pools: Vec<_> = cfg.apns.iter().map(|a| a.pools()).collect();
        let table = Arc::new(GtpTable::new(contexts as u32, &pools, workers));
        Arc::new(Ggsn {
            cfg: cfg.clone(),
            engine: Mutex::new(engine::Engine::new(cfg, table.clone(), recovery)),
            table,
            epoch: std::time::Instant::now(),
        })
    }

    /// Milliseconds since the GGSN started: the engine's time.
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn engine(&self) -> std::sync::MutexGuard<'_, engine::Engine> {
        self.engine.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The restart counter for this start: one more than the file holds (0 if it holds nothing),
/// written back; without a file, 0. TS 29.060 7.7.11: it changes at every restart, so peers
/// know our contexts are gone.
pub fn next_recovery(file: Option<&std::path::Path>) -> Result<u8, String> {
    let Some(f) = file else {
        return Ok(0);
    };
    let now = match std::fs::read_to_string(f) {
        Ok(s) => s
            .trim()
            .parse::<u8>()
            .map(|v| v.wrapping_add(1))
            .map_err(|_| format!("{}: not a restart counter (0..=255)", f.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(format!("{}: {e}", f.display())),
    };
    if let Some(dir) = f.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(f, format!("{now}\n")).map_err(|e| format!("{}: {e}", f.display()))?;
    Ok(now)
}
