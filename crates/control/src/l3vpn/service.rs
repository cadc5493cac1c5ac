//! The VPN service's thread: a connection to gobgpd's gRPC API, its best VPN paths into the
//! VRFs, the VRFs' routes out to it.
//!
//! One thread runs a single-threaded tokio runtime (tonic is async). A session: connect, ask
//! `GetBgp` (its AS and router id, and proof it answers), watch the best paths (`WatchEvent`,
//! BEST with the table as it is first), then loop: each event's paths, with those of the events
//! already waiting behind it, are applied under the management lock a slice at a time and
//! published; every `TICK` the unresolved imports are
//! tried again and the exports brought in line (`AddPath` / `DeletePath` by the id GoBGP gave).
//! When the API goes away (gobgpd stopped: its BGP sessions, and so its routes, went with it)
//! the imported routes are withdrawn, the exports forgotten, and the thread connects again
//! every second until it answers; the log says `VPN_SPEAKER_UP` / `VPN_SPEAKER_DOWN`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::client::Client;
use super::gobgp::{self, Path};
use super::{VpnRoutes, VpnUpdate};
use crate::config::l3vpn::L3vpnCfg;
use crate::mgmt::Core;
use crate::syslog::Severity;

/// How often exports are brought in line and unresolved imports retried.
const TICK: Duration = Duration::from_millis(500);
/// Updates applied under one hold of the management lock.
const SLICE: usize = 8192;

pub struct Service {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Service {
    /// Registers the VPN routes as a route source of `core` and starts the thread.
    pub fn start(core: &Arc<Core>, cfg: L3vpnCfg) -> Result<Service, String> {
        {
            let routes = VpnRoutes::new(cfg.clone(), &core.lock("l3vpn.start").router);
            core.add_route_source(Box::new(routes));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let weak = Arc::downgrade(core);
        let thread = std::thread::Builder::new()
            .name("l3vpn".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        eprintln!("linerate: l3vpn: no runtime: {e}");
                        return;
                    }
                };
                rt.block_on(run(weak, cfg, s));
            })
            .map_err(|e| e.to_string())?;
        Ok(Service {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn run(core: Weak<Core>, cfg: L3vpnCfg, stop: Arc<AtomicBool>) {
    let mut was_up = false;
    while !stop.load(Ordering::Relaxed) {
        let why = match session(&core, &cfg, &stop, &mut was_up).await {
            Ok(()) => return,
            Err(e) => e,
        };
        let Some(c) = core.upgrade() else {
            return;
        };
        c.with_route_source::<VpnRoutes, _>("l3vpn.down", |src, w| {
            src.status.connected = false;
            src.status.last_error = why.clone();
            src.clear(w);
            let _ = w.publish();
        });
        if was_up {
            was_up = false;
            c.logger.log(
                Severity::Warning,
                "VPN_SPEAKER_DOWN",
                &[("api", cfg.api.to_string()), ("reason", why.clone())],
                format!(
                    "VPN speaker at {} is gone ({why}): VPN routes withdrawn",
                    cfg.api
                ),
            );
        }
        drop(c);
        for _ in 0..10 {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// One connection to the API, until it fails (`Err`) or the service stops (`Ok`).
async fn session(
    core: &Weak<Core>,
    cfg: &L3vpnCfg,
    stop: &AtomicBool,
    was_up: &mut bool,
) -> Result<(), String> {
    let mut client = Client::connect(&cfg.api.to_string()).await?;
    let global = client.global().await?;
    let mut events = client.watch_best().await?;
    {
        let c = core.upgrade().ok_or("stopping")?;
        c.with_route_source::<VpnRoutes, _>("l3vpn.up", |src, _| {
            let s = &mut src.status;
            s.connected = true;
            s.connects += 1;
            s.last_error.clear();
            s.asn = global.asn;
            s.router_id = global.router_id.clone();
        });
        *was_up = true;
        c.logger.log(
            Severity::Notice,
            "VPN_SPEAKER_UP",
            &[("api", cfg.api.to_string())],
            format!(
                "VPN speaker at {} is up (AS {}, router id {})",
                cfg.api, global.asn, global.router_id
            ),
        );
    }
    let mut tick = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            ev = events.message() => {
                let mut paths = event_paths(ev)?;
                // GoBGP sends an event per UPDATE it takes in (one prefix each from another
                // GoBGP): take every event already here, a slice at most, so that a table
                // arriving costs a publish per slice rather than one per route.
                while paths.len() < SLICE {
                    tokio::select! {
                        biased;
                        ev = events.message() => paths.extend(event_paths(ev)?),
                        _ = std::future::ready(()) => break,
                    }
                }
                apply(core, &paths)?;
            }
            _ = tick.tick() => {
                if stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                export(core, &mut client).await?;
            }
        }
    }
}

/// The paths of a watch event; the stream's end or failure as an error.
fn event_paths(
    ev: Result<Option<gobgp::WatchEventResponse>, tonic::Status>,
) -> Result<Vec<Path>, String> {
    let ev = ev
        .map_err(|s| format!("WatchEvent: {}", s.message()))?
        .ok_or("WatchEvent: the stream ended")?;
    Ok(ev.table.map(|t| t.paths).unwrap_or_default())
}

/// The paths of one event into the VRFs, a slice per hold of the lock.
fn apply(core: &Weak<Core>, paths: &[Path]) -> Result<(), String> {
    let mut updates: Vec<VpnUpdate> = Vec::with_capacity(paths.len());
    let mut malformed = 0;
    for p in paths {
        match gobgp::decode_path(p) {
            Ok(Some(u)) => updates.push(u),
            Ok(None) => {}
            Err(_) => malformed += 1,
        }
    }
    let c = core.upgrade().ok_or("stopping")?;
    if updates.is_empty() {
        c.with_route_source::<VpnRoutes, _>("l3vpn.apply", |src, _| {
            src.status.malformed += malformed
        });
    }
    for chunk in updates.chunks(SLICE) {
        c.with_route_source::<VpnRoutes, _>("l3vpn.apply", |src, w| {
            src.status.malformed += std::mem::take(&mut malformed);
            src.apply(w, chunk);
            w.publish().map_err(|e| e.0)
        })
        .ok_or("no VPN route source")??;
    }
    Ok(())
}

/// Unresolved imports tried again, installed ones moved where the way to their PE changed;
/// the exports brought in line with the VRFs.
async fn export(core: &Weak<Core>, client: &mut Client) -> Result<(), String> {
    let (diff, paths) = {
        let c = core.upgrade().ok_or("stopping")?;
        c.with_route_source::<VpnRoutes, _>("l3vpn.export", |src, w| {
            if src.retry(w) + src.reresolve(w) > 0 {
                let _ = w.publish();
            }
            let d = src.export_diff(w.router());
            let paths: Vec<Path> = d.add.iter().map(|&(i, p)| src.export_path(i, p)).collect();
            (d, paths)
        })
        .ok_or("no VPN route source")?
    };
    let mut errors = 0;
    let mut first_error = None;
    for (i, p, uuid) in diff.withdraw {
        if let Err(e) = client.delete_path(gobgp::family_of(p), uuid).await {
            errors += 1;
            first_error.get_or_insert(format!("withdrawing {p} of VRF entry {i}: {e}"));
        }
    }
    let mut taken = Vec::with_capacity(paths.len());
    for (&(i, p), path) in diff.add.iter().zip(paths) {
        match client.add_path(path).await {
            Ok(uuid) => taken.push((i, p, uuid)),
            Err(e) => {
                errors += 1;
                first_error.get_or_insert(format!("exporting {p}: {e}"));
            }
        }
    }
    if taken.is_empty() && errors == 0 {
        return Ok(());
    }
    let c = core.upgrade().ok_or("stopping")?;
    c.with_route_source::<VpnRoutes, _>("l3vpn.exported", |src, _| {
        for (i, p, uuid) in taken {
            src.exported_as(i, p, uuid);
        }
        src.status.export_errors += errors;
        if let Some(e) = first_error {
            src.status.last_error = e;
        }
    });
    Ok(())
}
