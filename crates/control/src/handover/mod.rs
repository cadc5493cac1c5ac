//! Hitless restart: a new router process takes over from the running one without losing a
//! frame, as a restart or an upgrade of one logical router's process (beyond the seed's XR
//! 12000, where a route processor switchover kept forwarding, and beyond VPP, where a restart
//! is an outage).
//!
//! The running process listens on `<API socket>.handover`. The new one (`linerate daemon
//! --take-over`) boots from the same config and then, over that socket:
//!
//! 1. `Hello` -> `Offer`: the old one sends what it learned that the config does not hold (the
//!    API's routes, FRR's routes as the FPM table, in netlink form), and the AF_PACKET receive
//!    sockets (SCM_RIGHTS). The new one builds its tables from the config and these, opens its
//!    ports from the sockets and the shared-memory files (their rings stay where they are),
//!    starts its workers, and holds the receive queues unpolled. The old one forwards on.
//! 2. `Release` -> `Released`: the old process stops its FPM session and punt thread, its
//!    workers finish their burst and end, and it says where each receive queue stood; it sends
//!    its learned neighbours and its TAP twins (SCM_RIGHTS: the kernel devices, their
//!    addresses and FRR's view of them never go away). The new one installs the neighbours and
//!    starts polling each queue from there. What a frame sees: it waits in its ring for the
//!    tens of microseconds between the old workers' last burst and the new ones' first.
//! 3. `TakenOver`: the old process stops its API and exits 0; the new one then binds the API
//!    socket and FPM's port (zebra reconnects and re-sends; what it no longer has is swept
//!    after `stale-time`, as after any reconnect) and listens for the next hand-over.
//!
//! A new process that fails before `Release` changes nothing: the old one goes on. The
//! GGSN, DLSw, LDP and L3VPN hold sessions and sockets that are not handed over yet: a router
//! running one of them refuses, and so does one with an AF_XDP or capture-file port.

pub mod priority;
pub mod wire;

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use api::requests::RouteRequest;
use dataplane::port::RingPosition;
use serde::{Deserialize, Serialize};

use crate::config::{Config, Prefix, Target};
use crate::mgmt::{Core, PrefixKey};
use crate::punt::Tap;
use crate::runtime::handover::QueueAt;
use crate::syslog::Severity;

/// Both processes must speak the same hand-over.
pub const VERSION: u32 = 1;

/// How long each side waits for the other's next message.
const STEP: Duration = Duration::from_secs(60);

/// Where a router whose API is at `api` listens for the process that takes over.
pub fn socket_path(api: &Path) -> PathBuf {
    let mut p = api.as_os_str().to_owned();
    p.push(".handover");
    PathBuf::from(p)
}

#[derive(Serialize, Deserialize, Debug)]
enum Msg {
    Hello { version: u32, pid: u32 },
    Refused { why: String },
    Offer(Offer),
    Release,
    Released(Released),
    TakenOver,
}

/// The old process's tables beyond the config, and its ports' receive sockets (descriptors in
/// the order of `ports`, each port's queues in turn). The FPM table is the message's blob.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Offer {
    pub ports: Vec<(String, usize)>,
    pub api_routes: Vec<RouteRequest>,
    pub fpm_routes: usize,
}

/// Where the old workers stopped, the neighbours the old process learned, and its twins
/// (descriptors in the order of `taps`).
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Released {
    pub queues: Vec<(String, u16, Position)>,
    pub neighbors: Vec<(String, IpAddr, [u8; 6])>,
    pub taps: Vec<String>,
    /// From `Release` received to the workers ended, in the old process (its FPM session and
    /// punt thread stop first, while the workers still forward).
    pub stop_us: u64,
    /// When the old workers had all ended (wall clock, ns): from then on frames wait in their
    /// rings until the new workers poll them.
    pub stopped_at_ns: u64,
}

/// Now on the wall clock, in ns: both processes are on one host, so their readings compare.
pub fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// [`RingPosition`] on the wire.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub enum Position {
    InRing,
    Slot(u64),
    Block { block: u64, left: u32, off: u64 },
}

impl From<RingPosition> for Position {
    fn from(p: RingPosition) -> Self {
        match p {
            RingPosition::InRing => Position::InRing,
            RingPosition::Slot(s) => Position::Slot(s),
            RingPosition::Block { block, left, off } => Position::Block { block, left, off },
        }
    }
}

impl From<Position> for RingPosition {
    fn from(p: Position) -> Self {
        match p {
            Position::InRing => RingPosition::InRing,
            Position::Slot(s) => RingPosition::Slot(s),
            Position::Block { block, left, off } => RingPosition::Block { block, left, off },
        }
    }
}

/// Why a router cannot be handed over (None: it can).
pub fn unsupported(cfg: &Config) -> Option<String> {
    let running = [
        (
            cfg.ggsn.is_some(),
            "the GGSN (its PDP contexts and GTP-C socket)",
        ),
        (cfg.dlsw.is_some(), "DLSw (its TCP peers and circuits)"),
        (
            cfg.mpls.as_ref().is_some_and(|m| m.ldp.is_some()),
            "LDP (its sessions)",
        ),
        (cfg.l3vpn.is_some(), "L3VPN (its GoBGP session)"),
    ];
    running
        .iter()
        .find(|(on, _)| *on)
        .map(|(_, what)| format!("{what} is not handed over yet: restart this router cold"))
}

fn bad(why: impl Into<String>) -> io::Error {
    io::Error::other(why.into())
}

/// The next message, unless it is a refusal.
fn next(c: &mut UnixStream) -> io::Result<(Msg, Vec<OwnedFd>, Vec<u8>)> {
    let r = wire::recv::<Msg>(c)?;
    if let Msg::Refused { why } = &r.msg {
        return Err(bad(format!("refused: {why}")));
    }
    Ok((r.msg, r.fds, r.blob))
}

// ---- The old process ----

/// The old process's end: listens for a process that takes over, and when one has, calls
/// `done` with the connection (the daemon stops its API and exits, closing it last: the new
/// process binds the API once it sees the close).
pub struct Giver {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
}

impl Giver {
    pub fn start(
        api: &Path,
        core: Weak<Core>,
        done: Box<dyn Fn(UnixStream) + Send>,
    ) -> io::Result<Giver> {
        let path = socket_path(api);
        let _ = std::fs::remove_file(&path);
        let l = UnixListener::bind(&path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
        // Only root (and the daemon's user) may take a router over.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        l.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("handover".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    let conn = match l.accept() {
                        Ok((c, _)) => c,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(50));
                            continue;
                        }
                        Err(_) => continue,
                    };
                    let Some(core) = core.upgrade() else { break };
                    match give(&core, conn) {
                        Ok(Some(conn)) => {
                            done(conn);
                            break;
                        }
                        Ok(None) => {}
                        Err(e) => {
                            core.logger.log(
                                Severity::Error,
                                "HANDOVER_FAILED",
                                &[],
                                format!("hand-over to a new process failed: {e}"),
                            );
                        }
                    }
                }
            })
            .map_err(|e| bad(format!("cannot start the hand-over thread: {e}")))?;
        Ok(Giver {
            stop,
            thread: Some(thread),
            path,
        })
    }
}

impl Drop for Giver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One hand-over, from the old side. Some: the new process has the data plane (the
/// connection, to close at exit).
fn give(core: &Core, mut c: UnixStream) -> io::Result<Option<UnixStream>> {
    c.set_nonblocking(false)?;
    c.set_read_timeout(Some(STEP))?;
    let hello = wire::recv::<Msg>(&mut c)?;
    let Msg::Hello { version, pid } = hello.msg else {
        return Err(bad("the new process did not say hello"));
    };
    let refuse = |c: &mut UnixStream, why: String| {
        let _ = wire::send(c, &Msg::Refused { why: why.clone() }, &[], &[]);
        Err(bad(why))
    };
    if version != VERSION {
        return refuse(
            &mut c,
            format!("hand-over version {version}; this router speaks {VERSION}"),
        );
    }
    core.logger.log(
        Severity::Notice,
        "HANDOVER_START",
        &[("pid", pid.to_string())],
        format!("process {pid} is taking over this router"),
    );
    // The offer: tables beyond the config, and the ports' receive sockets.
    let (offer, fpm) = {
        let s = core.lock("handover.offer");
        if let Some(why) = unsupported(&s.router.cfg) {
            drop(s);
            return refuse(&mut c, why);
        }
        let api_routes = s
            .api_routes
            .iter()
            .map(|(&(vrf, key), t)| api_route(&s.router.cfg.vrfs[vrf], key, t))
            .collect();
        let mut fpm = Vec::new();
        let n = crate::fpm::write_table(&s, &mut fpm);
        (
            Offer {
                ports: Vec::new(),
                api_routes,
                fpm_routes: n,
            },
            fpm,
        )
    };
    let mut offer = offer;
    {
        let s = core.lock("handover.fds");
        let fds = match s.runtime.handover_fds() {
            Ok(f) => f,
            Err(why) => {
                drop(s);
                return refuse(&mut c, why);
            }
        };
        offer.ports = fds.iter().map(|(n, f)| (n.clone(), f.len())).collect();
        let all: Vec<BorrowedFd<'_>> = fds.iter().flat_map(|(_, f)| f.iter().copied()).collect();
        wire::send(&mut c, &Msg::Offer(offer), &all, &fpm)?;
    }
    drop(fpm);
    // The new process builds its tables and ports; it may take a while at full scale.
    match wire::recv::<Msg>(&mut c) {
        Ok(r) if matches!(r.msg, Msg::Release) => {}
        Ok(r) => return Err(bad(format!("expected Release, got {:?}", r.msg))),
        Err(e) => {
            core.logger.log(
                Severity::Warning,
                "HANDOVER_ABANDONED",
                &[("pid", pid.to_string())],
                format!(
                    "process {pid} gave up before taking the ports ({e}); this one forwards on"
                ),
            );
            return Ok(None);
        }
    }
    let t0 = Instant::now();
    let (released, taps) = release(core)?;
    let mut released = released;
    released.stop_us = t0.elapsed().as_micros() as u64;
    let fds: Vec<BorrowedFd<'_>> = taps.iter().map(Tap::fd).collect();
    wire::send(&mut c, &Msg::Released(released), &fds, &[])?;
    // From here on the data plane is the new process's, whatever it says next.
    match wire::recv::<Msg>(&mut c) {
        Ok(r) if matches!(r.msg, Msg::TakenOver) => {}
        other => {
            core.logger.log(
                Severity::Error,
                "HANDOVER_INCOMPLETE",
                &[("pid", pid.to_string())],
                format!(
                    "process {pid} took the ports but did not confirm ({}); this one stops",
                    other.err().map(|e| e.to_string()).unwrap_or_default()
                ),
            );
        }
    }
    core.logger.log(
        Severity::Notice,
        "HANDOVER_DONE",
        &[("pid", pid.to_string())],
        format!("process {pid} has taken over this router; this one stops"),
    );
    // The twins must outlive this process's copies: they close when it exits, after the new
    // one has its own.
    drop(taps);
    Ok(Some(c))
}

/// The old process lets go of the data plane: FPM and the punt thread stop, the workers end
/// after their burst; returns where each queue stood, the learned neighbours and the twins.
fn release(core: &Core) -> io::Result<(Released, Vec<Tap>)> {
    for mut a in std::mem::take(&mut *core.adapters.lock().unwrap_or_else(|e| e.into_inner())) {
        a.stop();
    }
    let taps = core
        .punt
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_mut()
        .map(|p| p.take_taps())
        .unwrap_or_default();
    let mut s = core.lock("handover.release");
    let queues = s
        .runtime
        .hand_over()
        .map_err(|e| bad(e.to_string()))?
        .into_iter()
        .map(|q| (q.port, q.queue, Position::from(q.at)))
        .collect();
    let stopped_at_ns = wall_ns();
    let neighbors = s.router.learned_neighbors();
    Ok((
        Released {
            queues,
            neighbors,
            taps: taps.iter().map(|t| t.name.clone()).collect(),
            stop_us: 0,
            stopped_at_ns,
        },
        taps,
    ))
}

fn api_route(vrf: &str, key: PrefixKey, t: &Target) -> RouteRequest {
    let p = match key {
        PrefixKey::V4(a, l) => Prefix::V4(a, l),
        PrefixKey::V6(a, l) => Prefix::V6(a, l),
    };
    RouteRequest {
        vrf: Some(vrf.to_string()),
        prefix: p.to_string(),
        via: match t {
            Target::Via(v) => v.iter().map(IpAddr::to_string).collect(),
            _ => Vec::new(),
        },
        blackhole: matches!(t, Target::Blackhole),
        reject: matches!(t, Target::Reject),
    }
}

// ---- The new process ----

/// The new process's end, from `Offer` to `TakenOver`.
pub struct Taker {
    c: UnixStream,
    pub offer: Offer,
    port_fds: HashMap<String, Vec<OwnedFd>>,
    /// FRR's routes as the old process had them (netlink messages).
    pub fpm_table: Vec<u8>,
    /// When `Release` was sent.
    released_at: Option<Instant>,
}

/// What `Released` brought, with the twins as devices.
pub struct TakenPorts {
    pub queues: Vec<QueueAt>,
    pub neighbors: Vec<(String, IpAddr, [u8; 6])>,
    pub taps: HashMap<String, Tap>,
    pub stop_us: u64,
    pub stopped_at_ns: u64,
    /// From `Release` sent to `Released` received.
    pub gap_us: u64,
}

impl Taker {
    /// Asks the router whose API is at `api` to hand over; its offer, or why not.
    pub fn connect(api: &Path) -> io::Result<Taker> {
        let path = socket_path(api);
        let mut c = UnixStream::connect(&path).map_err(|e| {
            bad(format!(
                "{}: {e} (is a linerate daemon running with its API at {}?)",
                path.display(),
                api.display()
            ))
        })?;
        c.set_read_timeout(Some(STEP))?;
        let hello = Msg::Hello {
            version: VERSION,
            pid: std::process::id(),
        };
        wire::send(&mut c, &hello, &[], &[])?;
        let (msg, fds, blob) = next(&mut c)?;
        let Msg::Offer(offer) = msg else {
            return Err(bad(format!("expected an offer, got {msg:?}")));
        };
        let want: usize = offer.ports.iter().map(|(_, n)| n).sum();
        if fds.len() != want {
            return Err(bad(format!(
                "{} descriptors for the {want} receive sockets offered",
                fds.len()
            )));
        }
        let mut fds = fds.into_iter();
        let port_fds = offer
            .ports
            .iter()
            .map(|(name, n)| (name.clone(), fds.by_ref().take(*n).collect()))
            .collect();
        Ok(Taker {
            c,
            offer,
            port_fds,
            fpm_table: blob,
            released_at: None,
        })
    }

    /// The ports' receive sockets, by port name (for the runtime to adopt).
    pub fn take_port_fds(&mut self) -> HashMap<String, Vec<OwnedFd>> {
        std::mem::take(&mut self.port_fds)
    }

    /// Tells the old process to let go of the data plane; where it stopped, and its twins.
    pub fn release(&mut self) -> io::Result<TakenPorts> {
        let t0 = Instant::now();
        self.released_at = Some(t0);
        wire::send(&mut self.c, &Msg::Release, &[], &[])?;
        let (msg, fds, _) = next(&mut self.c)?;
        let gap_us = t0.elapsed().as_micros() as u64;
        let Msg::Released(r) = msg else {
            return Err(bad(format!("expected Released, got {msg:?}")));
        };
        if fds.len() != r.taps.len() {
            return Err(bad(format!(
                "{} descriptors for {} twins",
                fds.len(),
                r.taps.len()
            )));
        }
        let mut taps = HashMap::new();
        for (name, fd) in r.taps.iter().zip(fds) {
            taps.insert(name.clone(), Tap::adopt(name, fd)?);
        }
        Ok(TakenPorts {
            queues: r
                .queues
                .into_iter()
                .map(|(port, queue, at)| QueueAt {
                    port,
                    queue,
                    at: at.into(),
                })
                .collect(),
            neighbors: r.neighbors,
            taps,
            stop_us: r.stop_us,
            stopped_at_ns: r.stopped_at_ns,
            gap_us,
        })
    }

    /// Confirms, and waits (at most `wait`) for the old process to close its end as it exits.
    pub fn taken_over(mut self, wait: Duration) -> io::Result<()> {
        wire::send(&mut self.c, &Msg::TakenOver, &[], &[])?;
        self.c.set_read_timeout(Some(wait))?;
        let mut b = [0u8; 1];
        use std::io::Read;
        match self.c.read(&mut b) {
            Ok(0) => Ok(()),
            Ok(_) => Err(bad("the old process said more than it should")),
            Err(e) => Err(bad(format!("the old process has not exited: {e}"))),
        }
    }
}
