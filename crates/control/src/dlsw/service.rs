//! The DLSw thread: SSP over the kernel's TCP (port 2065 on the local peer's address, which
//! is an interface's, so its TAP twin's), LLC frames to and from the LAN ports, the engine's
//! timers, and the log.
//!
//! One TCP connection per peer carries both directions (the capabilities say so: TCP
//! connections = 1). The peer with the lower address opens it; the higher one accepts (a
//! connection from an address that is no configured peer is closed). Opening runs on a
//! short-lived thread of its own, so a peer that does not answer never stalls the others.
//!
//! The loop: take the LLC frames the punt thread left, read every connection, run the
//! engine's timers, write what the engine queued (what a connection will not take now waits
//! for the next round; a peer that takes nothing for `dead-after` keepalives is dropped), hand
//! LAN frames to the punt thread, log events; then sleep in poll(2) on the sockets for at most
//! a millisecond (LAN frames arrive without a wakeup, so they wait at most that long).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use packet::dlsw::PORT;

use super::engine::DlswEvent;
use super::Dlsw;
use crate::syslog::{Logger, Severity};

/// Where the LAN frames the engine sends go: (port, frame) to the punt thread's outbox.
pub type LanSink = Box<dyn Fn(Vec<(u16, Vec<u8>)>) + Send>;

pub struct Service {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Service {
    /// Binds the listener and starts the thread.
    pub fn start(
        d: Arc<Dlsw>,
        lan: LanSink,
        logger: Option<Arc<Logger>>,
    ) -> Result<Service, String> {
        let local = d.cfg.local_peer;
        let listener = TcpListener::bind((local, PORT))
            .map_err(|e| format!("DLSw: listening on {local}:{PORT}: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("dlsw".into())
            .spawn(move || {
                let mut t = Thread::new(d, listener, lan, logger);
                t.run(&s);
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

struct Conn {
    stream: TcpStream,
    /// Bytes the engine queued that the socket has not taken yet.
    pending: Vec<u8>,
}

struct Thread {
    d: Arc<Dlsw>,
    listener: TcpListener,
    lan: LanSink,
    logger: Option<Arc<Logger>>,
    conns: Vec<Option<Conn>>,
    /// Connections being opened: the peer's index, and when the attempt started (ms).
    opening: Vec<Option<u64>>,
    opened_tx: mpsc::Sender<(usize, std::io::Result<TcpStream>)>,
    opened_rx: mpsc::Receiver<(usize, std::io::Result<TcpStream>)>,
    last_attempt: Vec<u64>,
}

/// Time between attempts to open a connection to a peer that is not there.
const RETRY_MS: u64 = 1_000;
/// Bytes a connection may have waiting before its peer counts as stalled and is dropped.
const MAX_PENDING: usize = 16 << 20;

impl Thread {
    fn new(
        d: Arc<Dlsw>,
        listener: TcpListener,
        lan: LanSink,
        logger: Option<Arc<Logger>>,
    ) -> Thread {
        let n = d.cfg.remote_peers.len();
        let (opened_tx, opened_rx) = mpsc::channel();
        Thread {
            d,
            listener,
            lan,
            logger,
            conns: (0..n).map(|_| None).collect(),
            opening: vec![None; n],
            opened_tx,
            opened_rx,
            last_attempt: vec![0; n],
        }
    }

    fn run(&mut self, stop: &AtomicBool) {
        let mut frames = Vec::new();
        let mut buf = vec![0u8; 256 * 1024];
        while !stop.load(Ordering::Relaxed) {
            let now = self.d.now_ms();
            let mut did = 0;
            self.open_connections(now);
            did += self.accept(now);
            self.d.take_lan_frames(&mut frames);
            did += frames.len();
            let mut e = self.d.engine();
            for (port, f) in frames.drain(..) {
                e.lan_frame(now, port, &f);
            }
            for i in 0..self.conns.len() {
                let Some(c) = self.conns[i].as_mut() else {
                    continue;
                };
                let mut closed = None;
                loop {
                    match c.stream.read(&mut buf) {
                        Ok(0) => {
                            closed = Some("connection closed by the peer");
                            break;
                        }
                        Ok(n) => {
                            did += 1;
                            e.peer_bytes(now, i, &buf[..n]);
                            if n < buf.len() {
                                break;
                            }
                        }
                        Err(x) if x.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(x) if x.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(_) => {
                            closed = Some("connection reset");
                            break;
                        }
                    }
                }
                if let Some(why) = closed {
                    self.conns[i] = None;
                    e.peer_closed(now, i, why);
                }
            }
            e.tick(now);
            for i in 0..self.conns.len() {
                if e.peers[i].close {
                    e.peers[i].close = false;
                    if self.conns[i].take().is_some() {
                        e.peer_closed(now, i, "protocol error");
                    }
                    continue;
                }
                let Some(c) = self.conns[i].as_mut() else {
                    e.peers[i].out.clear();
                    continue;
                };
                if !e.peers[i].out.is_empty() {
                    c.pending.append(&mut e.peers[i].out);
                }
                if c.pending.is_empty() {
                    continue;
                }
                match c.stream.write(&c.pending) {
                    Ok(n) => {
                        c.pending.drain(..n);
                        e.wrote(now, i);
                        did += 1;
                    }
                    Err(x) if x.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => {
                        self.conns[i] = None;
                        e.peer_closed(now, i, "connection reset");
                        continue;
                    }
                }
                if c.pending.len() > MAX_PENDING {
                    self.conns[i] = None;
                    e.peer_closed(now, i, "peer stalled (send queue full)");
                }
            }
            let out = std::mem::take(&mut e.lan_out);
            let events = std::mem::take(&mut e.events);
            drop(e);
            if !out.is_empty() {
                (self.lan)(out);
            }
            self.log(events);
            if did == 0 {
                self.wait();
            }
        }
    }

    /// Starts opening a connection to each peer with a higher address that has none.
    fn open_connections(&mut self, now: u64) {
        while let Ok((i, r)) = self.opened_rx.try_recv() {
            self.opening[i] = None;
            if let Ok(s) = r {
                if self.conns[i].is_none() {
                    self.adopt(now, i, s);
                }
            }
        }
        let local = self.d.cfg.local_peer;
        for (i, (peer, _)) in self.d.cfg.remote_peers.iter().enumerate() {
            if u32::from(*peer) <= u32::from(local)
                || self.conns[i].is_some()
                || self.opening[i].is_some()
                || now < self.last_attempt[i] + RETRY_MS && self.last_attempt[i] != 0
            {
                continue;
            }
            self.last_attempt[i] = now.max(1);
            self.opening[i] = Some(now);
            let (tx, peer) = (self.opened_tx.clone(), *peer);
            let _ = std::thread::Builder::new()
                .name("dlsw-connect".into())
                .spawn(move || {
                    let _ = tx.send((i, connect(local, peer)));
                });
        }
    }

    fn adopt(&mut self, now: u64, i: usize, s: TcpStream) {
        let _ = s.set_nonblocking(true);
        let _ = s.set_nodelay(true);
        dataplane::port::sockopt::set_recv_buffer(&s, 4 << 20);
        dataplane::port::sockopt::set_send_buffer(&s, 4 << 20);
        self.conns[i] = Some(Conn {
            stream: s,
            pending: Vec::new(),
        });
        self.d.engine().peer_connected(now, i);
    }

    fn accept(&mut self, now: u64) -> usize {
        let mut n = 0;
        while let Ok((s, from)) = self.listener.accept() {
            n += 1;
            let SocketAddr::V4(from) = from else {
                continue;
            };
            let Some(i) = self
                .d
                .cfg
                .remote_peers
                .iter()
                .position(|(a, _)| *a == *from.ip())
            else {
                // Not a configured peer: closed (RFC 1795 leaves promiscuous peers optional).
                continue;
            };
            if self.conns[i].is_some() {
                // A new connection from a peer we hold one for: it restarted. The old one is
                // dead; its circuits end and the new one starts over.
                self.conns[i] = None;
                self.d.engine().peer_closed(now, i, "peer restarted");
            }
            self.adopt(now, i, s);
        }
        n
    }

    fn wait(&self) {
        let mut fds: Vec<libc::pollfd> = self
            .conns
            .iter()
            .flatten()
            .map(|c| c.stream.as_raw_fd())
            .chain(std::iter::once(self.listener.as_raw_fd()))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a live array of pollfd of the given length, whose descriptors
        // belong to sockets this thread owns for the duration of the call.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 1) };
    }

    fn log(&self, events: Vec<DlswEvent>) {
        let Some(l) = &self.logger else {
            return;
        };
        let circuits = self.d.cfg.log_circuits;
        for ev in events {
            if !circuits
                && matches!(
                    ev,
                    DlswEvent::CircuitUp { .. } | DlswEvent::CircuitDown { .. }
                )
            {
                continue;
            }
            let _ = match ev {
                DlswEvent::PeerUp { peer } => l.log(
                    Severity::Notice,
                    "DLSW_PEER_UP",
                    &[("peer", peer.to_string())],
                    format!("DLSw peer {peer} connected (capabilities exchanged)"),
                ),
                DlswEvent::PeerDown {
                    peer,
                    why,
                    circuits,
                } => l.log(
                    Severity::Warning,
                    "DLSW_PEER_DOWN",
                    &[
                        ("peer", peer.to_string()),
                        ("reason", why.to_string()),
                        ("circuits", circuits.to_string()),
                    ],
                    format!("DLSw peer {peer} down ({why}): {circuits} circuit(s) ended"),
                ),
                DlswEvent::CapRefused { peer, cause } => l.log(
                    Severity::Warning,
                    "DLSW_CAP_REFUSED",
                    &[("peer", peer.to_string()), ("cause", cause.to_string())],
                    format!("DLSw peer {peer}: capabilities exchange refused (cause {cause})"),
                ),
                DlswEvent::CircuitUp { key, peer } => l.log(
                    Severity::Informational,
                    "DLSW_CIRCUIT_UP",
                    &[
                        ("local", fmt_station(&key.station, key.station_sap)),
                        ("remote", fmt_station(&key.partner, key.partner_sap)),
                        ("peer", peer.to_string()),
                    ],
                    format!(
                        "DLSw circuit {} - {} via {peer} connected",
                        fmt_station(&key.station, key.station_sap),
                        fmt_station(&key.partner, key.partner_sap)
                    ),
                ),
                DlswEvent::CircuitDown { key, peer, why } => l.log(
                    Severity::Informational,
                    "DLSW_CIRCUIT_DOWN",
                    &[
                        ("local", fmt_station(&key.station, key.station_sap)),
                        ("remote", fmt_station(&key.partner, key.partner_sap)),
                        ("peer", peer.to_string()),
                        ("reason", why.to_string()),
                    ],
                    format!(
                        "DLSw circuit {} - {} via {peer} ended ({why})",
                        fmt_station(&key.station, key.station_sap),
                        fmt_station(&key.partner, key.partner_sap)
                    ),
                ),
            };
        }
    }
}

/// A station as `show dlsw` and the log write it: MAC and SAP.
pub fn fmt_station(mac: &[u8; 6], sap: u8) -> String {
    format!(
        "{:02x}{:02x}.{:02x}{:02x}.{:02x}{:02x}({sap:02X})",
        mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]
    )
}

/// Opens a connection to `peer` from `local` (bound first, so the peer sees the address its
/// config names even when another interface faces it).
fn connect(local: Ipv4Addr, peer: Ipv4Addr) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    s.bind(&SocketAddr::from((local, 0)).into())?;
    s.connect_timeout(
        &SocketAddr::from((peer, PORT)).into(),
        Duration::from_secs(2),
    )?;
    Ok(s.into())
}
