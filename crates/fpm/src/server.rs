//! The TCP side: zebra connects to us (it is the FPM client) and writes; we read, decode and hand
//! batches of messages to the consumer over a channel.
//!
//! Threads. One accept thread; per connection one reader thread. zebra reconnects after any
//! trouble, and a new connection replaces the current one (the old one is closed first, so the
//! consumer sees its `Disconnected` before the new `Connected`).
//!
//! The reader never waits for the consumer: zebra resets a peer whose socket stays unwritable for
//! 15 s, and a reset costs a full replay. So the channel is unbounded, and the reader batches
//! (thousands of messages per send) to keep the per-message cost of the channel negligible. A
//! malformed frame or message closes the connection: the stream cannot be trusted after it, and
//! zebra will reconnect and replay.

use std::io::{self, ErrorKind};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::frame::{FrameError, FrameReader};
use crate::netlink::{messages, DecodeError, Msg, Op};

/// Tuning of a [`Server`].
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Receive buffer per connection (one read fills at most this).
    pub read_buffer: usize,
    /// A batch is sent once it holds this many messages, and whenever a read found the socket
    /// drained.
    pub batch: usize,
    /// Quiet time after which a connection reports [`Event::Idle`] (once per quiet spell). The
    /// consumer sweeps on the first one after a connect, so it must exceed any pause zebra makes
    /// in the middle of a replay; a longer one only keeps withdrawn routes a little longer.
    pub idle: Duration,
    /// How often the accept thread looks for a shutdown request.
    pub poll: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            read_buffer: crate::frame::DEFAULT_BUFFER,
            batch: 8192,
            idle: Duration::from_secs(5),
            poll: Duration::from_millis(20),
        }
    }
}

/// What the consumer receives, in order.
#[derive(Debug)]
pub enum Event {
    /// zebra connected: call [`Rib::begin_replay`](crate::Rib::begin_replay), it will re-send
    /// everything.
    Connected { peer: SocketAddr },
    /// Decoded messages, in stream order: give them to
    /// [`Rib::apply_batch`](crate::Rib::apply_batch).
    Batch(Vec<Msg<'static>>),
    /// Nothing arrived for [`ServerConfig::idle`]: after a connect, the replay is over, and
    /// [`Rib::sweep`](crate::Rib::sweep) can remove what zebra did not re-send.
    Idle,
    /// The connection ended; everything it delivered before is in earlier batches.
    Disconnected { reason: Reason },
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// zebra closed it.
    PeerClosed,
    /// A new connection from zebra took its place.
    Replaced,
    /// We closed it on a malformed frame or message.
    Malformed(Malformed),
    /// A socket error (a reset, mostly).
    Io(String),
    /// [`Server::shutdown`].
    Shutdown,
}

/// What was malformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    Frame(FrameError),
    Netlink(DecodeError),
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::Frame(e) => e.fmt(f),
            Malformed::Netlink(e) => e.fmt(f),
        }
    }
}

/// Counters shared by the server threads; read them any time.
#[derive(Debug, Default)]
pub struct Stats {
    pub connections: AtomicU64,
    pub disconnects: AtomicU64,
    /// Connections we closed (malformed input, replaced by a newer one).
    pub resets: AtomicU64,
    pub malformed: AtomicU64,
    pub bytes: AtomicU64,
    pub frames: AtomicU64,
    pub batches: AtomicU64,
    pub route_new: AtomicU64,
    pub route_del: AtomicU64,
    pub nexthop_new: AtomicU64,
    pub nexthop_del: AtomicU64,
    pub other: AtomicU64,
}

/// A plain copy of [`Stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub connections: u64,
    pub disconnects: u64,
    pub resets: u64,
    pub malformed: u64,
    pub bytes: u64,
    pub frames: u64,
    pub batches: u64,
    pub route_new: u64,
    pub route_del: u64,
    pub nexthop_new: u64,
    pub nexthop_del: u64,
    pub other: u64,
}

impl Stats {
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            connections: self.connections.load(Relaxed),
            disconnects: self.disconnects.load(Relaxed),
            resets: self.resets.load(Relaxed),
            malformed: self.malformed.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            frames: self.frames.load(Relaxed),
            batches: self.batches.load(Relaxed),
            route_new: self.route_new.load(Relaxed),
            route_del: self.route_del.load(Relaxed),
            nexthop_new: self.nexthop_new.load(Relaxed),
            nexthop_del: self.nexthop_del.load(Relaxed),
            other: self.other.load(Relaxed),
        }
    }
}

/// A running FPM server. Dropping it shuts it down.
pub struct Server {
    addr: SocketAddr,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Listens on `addr` (zebra's default is 127.0.0.1:2620) with the default configuration.
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<(Server, Receiver<Event>)> {
        Self::bind_with(addr, ServerConfig::default())
    }

    /// Listens on `addr` and starts the accept thread; events arrive on the receiver.
    pub fn bind_with(
        addr: impl ToSocketAddrs,
        cfg: ServerConfig,
    ) -> io::Result<(Server, Receiver<Event>)> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stats = Arc::new(Stats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = channel();
        let accept = {
            let (stats, stop) = (stats.clone(), stop.clone());
            thread::Builder::new()
                .name("fpm-accept".into())
                .spawn(move || accept_loop(listener, tx, stats, stop, cfg))?
        };
        let server = Server {
            addr,
            stats,
            stop,
            accept: Some(accept),
        };
        Ok((server, rx))
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    /// Stops accepting, closes the connection (the consumer gets `Disconnected { Shutdown }`),
    /// and waits for the threads; the channel then ends.
    pub fn shutdown(mut self) {
        self.stop_threads();
    }

    fn stop_threads(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_threads();
    }
}

const OPEN: u8 = 0;
const REPLACED: u8 = 1;
const SHUTDOWN: u8 = 2;

/// The connection being read, as the accept thread holds it.
struct Conn {
    stream: TcpStream,
    closing: Arc<AtomicU8>,
    reader: JoinHandle<()>,
}

impl Conn {
    fn close(self, why: u8) {
        self.closing.store(why, Relaxed);
        let _ = self.stream.shutdown(Shutdown::Both);
        let _ = self.reader.join();
    }
}

fn accept_loop(
    listener: TcpListener,
    tx: Sender<Event>,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    cfg: ServerConfig,
) {
    let mut current: Option<Conn> = None;
    while !stop.load(Relaxed) {
        let (stream, peer) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => {
                // WouldBlock, or a transient failure (EMFILE...): look again shortly.
                thread::sleep(cfg.poll);
                continue;
            }
        };
        if let Some(old) = current.take() {
            if !old.reader.is_finished() {
                stats.resets.fetch_add(1, Relaxed); // not when zebra had closed it already
            }
            old.close(REPLACED);
        }
        match start_reader(stream, peer, &tx, &stats, &cfg) {
            Ok(c) => current = Some(c),
            Err(e) => eprintln!("fpm: cannot serve {peer}: {e}"),
        }
    }
    if let Some(c) = current.take() {
        c.close(SHUTDOWN);
    }
}

fn start_reader(
    stream: TcpStream,
    peer: SocketAddr,
    tx: &Sender<Event>,
    stats: &Arc<Stats>,
    cfg: &ServerConfig,
) -> io::Result<Conn> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(cfg.idle))?;
    let closing = Arc::new(AtomicU8::new(OPEN));
    let mut r = Reader {
        stream: stream.try_clone()?,
        tx: tx.clone(),
        stats: stats.clone(),
        closing: closing.clone(),
        batch_max: cfg.batch.max(1),
        batch: Vec::new(),
        frames: FrameReader::with_capacity(cfg.read_buffer),
        local: Local::default(),
    };
    stats.connections.fetch_add(1, Relaxed);
    let _ = tx.send(Event::Connected { peer });
    let reader = thread::Builder::new()
        .name("fpm-reader".into())
        .spawn(move || {
            let reason = r.run();
            r.finish(peer, reason);
        })?;
    Ok(Conn {
        stream,
        closing,
        reader,
    })
}

/// Counts kept locally and added to [`Stats`] once per read.
#[derive(Default)]
struct Local {
    frames: u64,
    route_new: u64,
    route_del: u64,
    nexthop_new: u64,
    nexthop_del: u64,
    other: u64,
}

struct Reader {
    stream: TcpStream,
    tx: Sender<Event>,
    stats: Arc<Stats>,
    closing: Arc<AtomicU8>,
    batch_max: usize,
    batch: Vec<Msg<'static>>,
    frames: FrameReader,
    local: Local,
}

impl Reader {
    fn run(&mut self) -> Reason {
        // Idle is due once after connecting too: zebra with nothing to send still ends a replay.
        let mut active = true;
        loop {
            let room = self.frames.spare().len();
            let n = match self.frames.read_from(&mut self.stream) {
                Ok(0) => return Reason::PeerClosed,
                Ok(n) => n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    self.flush();
                    if active {
                        let _ = self.tx.send(Event::Idle);
                        active = false;
                    }
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Reason::Io(e.to_string()),
            };
            active = true;
            self.stats.bytes.fetch_add(n as u64, Relaxed);
            let result = self.decode();
            self.publish_counts();
            if let Err(m) = result {
                return Reason::Malformed(m);
            }
            if self.batch.len() >= self.batch_max || n < room {
                self.flush();
            }
        }
    }

    /// Decodes every complete frame in the buffer into the batch.
    fn decode(&mut self) -> Result<(), Malformed> {
        loop {
            let payload = match self.frames.next_frame() {
                Ok(Some(p)) => p,
                Ok(None) => return Ok(()),
                Err(e) => return Err(Malformed::Frame(e)),
            };
            self.local.frames += 1;
            for m in messages(payload) {
                let m = m.map_err(Malformed::Netlink)?;
                let l = &mut self.local;
                match &m {
                    Msg::Route(r) if r.op == Op::New => l.route_new += 1,
                    Msg::Route(_) => l.route_del += 1,
                    Msg::Nexthop(n) if n.op == Op::New => l.nexthop_new += 1,
                    Msg::Nexthop(_) => l.nexthop_del += 1,
                    Msg::Other { .. } => l.other += 1,
                }
                self.batch.push(m.into_owned());
            }
            if self.batch.len() >= self.batch_max {
                self.flush();
            }
        }
    }

    fn publish_counts(&mut self) {
        let l = std::mem::take(&mut self.local);
        let s = &self.stats;
        for (c, v) in [
            (&s.frames, l.frames),
            (&s.route_new, l.route_new),
            (&s.route_del, l.route_del),
            (&s.nexthop_new, l.nexthop_new),
            (&s.nexthop_del, l.nexthop_del),
            (&s.other, l.other),
        ] {
            if v != 0 {
                c.fetch_add(v, Relaxed);
            }
        }
    }

    fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let b = std::mem::replace(
            &mut self.batch,
            Vec::with_capacity(self.batch_max.min(1 << 16)),
        );
        self.stats.batches.fetch_add(1, Relaxed);
        let _ = self.tx.send(Event::Batch(b));
    }

    fn finish(&mut self, peer: SocketAddr, reason: Reason) {
        // What was decoded before a failure is valid and goes to the consumer.
        self.flush();
        let reason = match self.closing.load(Relaxed) {
            REPLACED => Reason::Replaced,
            SHUTDOWN => Reason::Shutdown,
            _ => reason,
        };
        if let Reason::Malformed(m) = &reason {
            self.stats.malformed.fetch_add(1, Relaxed);
            self.stats.resets.fetch_add(1, Relaxed);
            eprintln!("fpm: closing the connection from {peer}: {m}");
        }
        let _ = self.stream.shutdown(Shutdown::Both);
        self.stats.disconnects.fetch_add(1, Relaxed);
        let _ = self.tx.send(Event::Disconnected { reason });
    }
}
