//! The LDP thread: targeted hellos over UDP 646 and sessions over TCP 646 on the transport
//! address (an interface's, so its TAP twin's), link hellos to 224.0.0.2 on each discovery
//! interface's twin, the engine's timers, the pseudowires' signalled state and the prefix
//! FECs' labels handed to the router, and the log.
//!
//! The loop: read hellos, accept connections, adopt the ones opened (opening runs on a short
//! thread of its own, so a peer that does not answer never stalls the rest), read every
//! session, run the timers, write what the engine queued (closing the sessions it ended once
//! written), send the hellos due; every 100 ms look at the attachment circuits, every second
//! at the routes; hand changed pseudowire state and FEC labels over; then sleep in poll(2) for
//! at most 10 ms.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use packet::ldp::PORT;

use super::engine::fec::{FecBinding, FecRoute};
use super::engine::LdpEvent;
use super::Ldp;
use crate::syslog::{Logger, Severity};

/// Each signalled pseudowire's state: (name, the peer's label, agreed control word, up).
pub type Signalled = Vec<(String, u32, bool, bool)>;
/// Where the signalled state goes (the router, which republishes the pseudowires).
pub type SignalledSink = Box<dyn Fn(Signalled) + Send>;
/// Whether each attachment circuit (by pseudowire name) is up, as the router sees it.
pub type AcSource = Box<dyn Fn() -> HashMap<String, bool> + Send>;

/// See [`Hooks::routes`].
pub type RouteSource = Box<dyn Fn(u64) -> Option<(u64, Vec<FecRoute>)> + Send>;

/// What the speaker reads from and hands to the router.
pub struct Hooks {
    /// Where the pseudowires' signalled state goes.
    pub signalled: SignalledSink,
    pub circuits: AcSource,
    /// The routes that are prefix FECs, if they changed since the change count given (asked
    /// every second), with the count now.
    pub routes: RouteSource,
    /// Where the FECs' labels go when they change.
    pub bindings: Box<dyn Fn(Vec<FecBinding>) + Send>,
}

/// Where link hellos go (RFC 5036 2.4.1: the all-routers group, UDP 646).
const ALL_ROUTERS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 2);

pub struct Service {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Service {
    /// Binds the hello socket and the listener on the transport address, and starts.
    pub fn start(
        l: Arc<Ldp>,
        hooks: Hooks,
        logger: Option<Arc<Logger>>,
    ) -> Result<Service, String> {
        let local = l.cfg.transport;
        let udp = UdpSocket::bind((local, PORT))
            .map_err(|e| format!("LDP: hellos on {local}:{PORT}: {e}"))?;
        udp.set_nonblocking(true).map_err(|e| e.to_string())?;
        let listener = TcpListener::bind((local, PORT))
            .map_err(|e| format!("LDP: listening on {local}:{PORT}: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let links = l
            .engine()
            .cfg
            .links
            .iter()
            .map(link_socket)
            .collect::<Result<Vec<UdpSocket>, String>>()?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ldp".into())
            .spawn(move || {
                let (opened_tx, opened_rx) = mpsc::channel();
                let mut t = Thread {
                    l,
                    udp,
                    links,
                    listener,
                    hooks,
                    logger,
                    conns: HashMap::new(),
                    opened_tx,
                    opened_rx,
                    last_ac_ms: 0,
                    routes_due_ms: 0,
                    routes_seen: 0,
                    bindings_due_ms: 0,
                };
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
    /// Bytes queued for the connection; the first `written` of them are gone (dropped from
    /// the front only once they are the larger part: a table of a million mappings leaves in
    /// many writes, and moving what is left after each would be quadratic).
    pending: Vec<u8>,
    written: usize,
}

impl Conn {
    fn waiting(&self) -> usize {
        self.pending.len() - self.written
    }

    /// Writes what it can; false when the connection failed.
    fn flush(&mut self) -> std::io::Result<usize> {
        if self.waiting() == 0 {
            return Ok(0);
        }
        let n = self.stream.write(&self.pending[self.written..])?;
        self.written += n;
        if self.written == self.pending.len() {
            self.pending.clear();
            self.written = 0;
        } else if self.written > self.pending.len() / 2 {
            self.pending.drain(..self.written);
            self.written = 0;
        }
        Ok(n)
    }
}

struct Thread {
    l: Arc<Ldp>,
    udp: UdpSocket,
    /// Link hellos, one socket per discovery interface (parallel to the engine's `links`).
    links: Vec<UdpSocket>,
    listener: TcpListener,
    hooks: Hooks,
    logger: Option<Arc<Logger>>,
    /// Open sessions' connections, by the peer's LSR id.
    conns: HashMap<Ipv4Addr, Conn>,
    opened_tx: mpsc::Sender<(Ipv4Addr, std::io::Result<TcpStream>)>,
    opened_rx: mpsc::Receiver<(Ipv4Addr, std::io::Result<TcpStream>)>,
    last_ac_ms: u64,
    /// When the routes are asked for next (at once, then every second).
    routes_due_ms: u64,
    /// The route change count the routes were last read at.
    routes_seen: u64,
    bindings_due_ms: u64,
}

/// Bytes a session may have waiting before its peer counts as stalled and is dropped (a
/// million prefix mappings queued at once are some 26 MB).
const MAX_PENDING: usize = 128 << 20;
/// The FECs' labels go to the router at most this often: each hand-over is the whole set, and
/// while a large table is exchanged they change on every read.
const BINDINGS_EVERY_MS: u64 = 250;

impl Thread {
    fn run(&mut self, stop: &AtomicBool) {
        let mut buf = vec![0u8; 64 * 1024];
        while !stop.load(Ordering::Relaxed) {
            let now = self.l.now_ms();
            let mut did = 0;
            let mut e = self.l.engine();
            // Hellos in.
            loop {
                match self.udp.recv_from(&mut buf) {
                    Ok((n, SocketAddr::V4(from))) => {
                        did += 1;
                        e.hello_in(now, *from.ip(), &buf[..n]);
                    }
                    Ok(_) => did += 1,
                    Err(_) => break,
                }
            }
            for (i, sock) in self.links.iter().enumerate() {
                while let Ok((n, from)) = sock.recv_from(&mut buf) {
                    did += 1;
                    if let SocketAddr::V4(from) = from {
                        e.link_hello_in(now, i, *from.ip(), &buf[..n]);
                    }
                }
            }
            // Connections in (passive side) and opened (active side).
            while let Ok((s, from)) = self.listener.accept() {
                did += 1;
                let SocketAddr::V4(from) = from else { continue };
                if let Some(lsr) = e.accepted(now, *from.ip()) {
                    // A new connection from a peer this router holds one for: it restarted.
                    self.conns.remove(&lsr);
                    adopt(&mut self.conns, lsr, s);
                }
            }
            while let Ok((lsr, r)) = self.opened_rx.try_recv() {
                did += 1;
                match r {
                    Ok(s) if e.connected(now, lsr) => adopt(&mut self.conns, lsr, s),
                    Ok(_) => {}
                    Err(_) => e.connect_failed(lsr),
                }
            }
            for (lsr, transport) in e.to_connect(now) {
                let (tx, local) = (self.opened_tx.clone(), self.l.cfg.transport);
                let _ = std::thread::Builder::new()
                    .name("ldp-connect".into())
                    .spawn(move || {
                        let _ = tx.send((lsr, connect(local, transport)));
                    });
            }
            // Sessions' bytes.
            let lsrs: Vec<Ipv4Addr> = self.conns.keys().copied().collect();
            for lsr in &lsrs {
                let Some(c) = self.conns.get_mut(lsr) else {
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
                            e.bytes_in(now, *lsr, &buf[..n]);
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
                    self.conns.remove(lsr);
                    e.closed(*lsr, why);
                }
            }
            // The routes, as the router has them (asked without the engine's lock: the router
            // may be waiting for it).
            if now >= self.routes_due_ms {
                self.routes_due_ms = now + 1000;
                drop(e);
                let routes = (self.hooks.routes)(self.routes_seen);
                e = self.l.engine();
                if let Some((seen, routes)) = routes {
                    self.routes_seen = seen;
                    e.set_routes(now, routes);
                }
            }
            e.tick(now);
            // Attachment circuits as the router sees them.
            if now >= self.last_ac_ms + 100 {
                self.last_ac_ms = now;
                drop(e);
                let acs = (self.hooks.circuits)();
                e = self.l.engine();
                for (name, up) in acs {
                    e.set_ac(now, &name, up);
                }
            }
            // Bytes out; sessions the engine ended closed once written.
            for (lsr, s) in e.sessions.iter_mut() {
                let Some(c) = self.conns.get_mut(lsr) else {
                    s.out.clear();
                    if s.close {
                        s.close = false;
                        s.connect_asked = false;
                    }
                    continue;
                };
                c.pending.append(&mut s.out);
                match c.flush() {
                    Ok(0) => {}
                    Ok(_) => did += 1,
                    Err(x) if x.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => {
                        c.pending.clear();
                        c.written = 0;
                    }
                }
                if s.close && c.waiting() == 0 || c.waiting() > MAX_PENDING {
                    self.conns.remove(lsr);
                    s.close = false;
                    s.connect_asked = false;
                }
            }
            let gone: Vec<Ipv4Addr> = self
                .conns
                .keys()
                .filter(|l| !e.sessions.contains_key(l))
                .copied()
                .collect();
            for lsr in gone {
                self.conns.remove(&lsr);
            }
            for (to, pdu) in e.hellos(now) {
                let _ = self.udp.send_to(&pdu, (to, PORT));
            }
            for (i, pdu) in e.link_hellos(now) {
                let _ = self.links[i].send_to(&pdu, (ALL_ROUTERS, PORT));
            }
            let events = std::mem::take(&mut e.events);
            let signalled = std::mem::take(&mut e.changed).then(|| e.signalled());
            let bindings = (e.fec_changed && now >= self.bindings_due_ms).then(|| {
                e.fec_changed = false;
                self.bindings_due_ms = now + BINDINGS_EVERY_MS;
                e.fec_bindings()
            });
            drop(e);
            if let Some(s) = signalled {
                (self.hooks.signalled)(s);
            }
            if let Some(b) = bindings {
                (self.hooks.bindings)(b);
            }
            self.log(events);
            if did == 0 {
                self.wait();
            }
        }
    }

    fn wait(&self) {
        let mut fds: Vec<libc::pollfd> = self
            .conns
            .values()
            .map(|c| c.stream.as_raw_fd())
            .chain([self.listener.as_raw_fd(), self.udp.as_raw_fd()])
            .chain(self.links.iter().map(|s| s.as_raw_fd()))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a live array of pollfd of the given length, whose descriptors
        // belong to sockets this thread owns for the duration of the call.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 10) };
    }

    fn log(&self, events: Vec<LdpEvent>) {
        let Some(l) = &self.logger else {
            return;
        };
        for ev in events {
            match ev {
                LdpEvent::SessionUp { peer } => l.log(
                    Severity::Notice,
                    "LDP_NBR_UP",
                    &[("peer", peer.to_string())],
                    format!("LDP neighbor {peer}:0 is up"),
                ),
                LdpEvent::SessionDown { peer, why } => l.log(
                    Severity::Warning,
                    "LDP_NBR_DOWN",
                    &[("peer", peer.to_string()), ("reason", why.clone())],
                    format!("LDP neighbor {peer}:0 is down ({why})"),
                ),
                LdpEvent::PwUp { name } => l.log(
                    Severity::Notice,
                    "PW_UP",
                    &[("pseudowire", name.clone())],
                    format!("pseudowire {name} is up"),
                ),
                LdpEvent::PwDown { name, why } => l.log(
                    Severity::Warning,
                    "PW_DOWN",
                    &[("pseudowire", name.clone()), ("reason", why.clone())],
                    format!("pseudowire {name} is down ({why})"),
                ),
                LdpEvent::Notice { peer, what } => l.log(
                    Severity::Warning,
                    "LDP_NOTIFICATION",
                    &[("peer", peer.to_string())],
                    format!("LDP neighbor {peer}:0: {what}"),
                ),
            };
        }
    }
}

fn adopt(conns: &mut HashMap<Ipv4Addr, Conn>, lsr: Ipv4Addr, s: TcpStream) {
    let _ = s.set_nonblocking(true);
    let _ = s.set_nodelay(true);
    conns.insert(
        lsr,
        Conn {
            stream: s,
            pending: Vec::new(),
            written: 0,
        },
    );
}

/// A discovery interface's hello socket: bound to the all-routers group on port 646 and to the
/// interface's twin (so a hello's interface is its socket's), member of the group there, its
/// hellos leaving by that twin with TTL 1 and not looped back.
fn link_socket(l: &super::engine::LinkSpec) -> Result<UdpSocket, String> {
    use socket2::{Domain, Socket, Type};
    let err = |what: &str, e: std::io::Error| {
        format!(
            "LDP: link hellos on {} (twin {}): {what}: {e}",
            l.name, l.host
        )
    };
    let s = Socket::new(Domain::IPV4, Type::DGRAM, None).map_err(|e| err("socket", e))?;
    s.set_reuse_address(true)
        .map_err(|e| err("SO_REUSEADDR", e))?;
    s.bind_device(Some(l.host.as_bytes()))
        .map_err(|e| err("SO_BINDTODEVICE", e))?;
    s.bind(&SocketAddr::from((ALL_ROUTERS, PORT)).into())
        .map_err(|e| err("bind", e))?;
    s.join_multicast_v4(&ALL_ROUTERS, &l.address)
        .map_err(|e| err("joining 224.0.0.2", e))?;
    s.set_multicast_if_v4(&l.address)
        .map_err(|e| err("IP_MULTICAST_IF", e))?;
    s.set_multicast_ttl_v4(1)
        .map_err(|e| err("IP_MULTICAST_TTL", e))?;
    s.set_multicast_loop_v4(false)
        .map_err(|e| err("IP_MULTICAST_LOOP", e))?;
    s.set_nonblocking(true).map_err(|e| err("O_NONBLOCK", e))?;
    Ok(s.into())
}

/// Opens the session's connection from the transport address (RFC 5036 2.5.2: the peer
/// checks the source is the address this router's hellos gave).
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
