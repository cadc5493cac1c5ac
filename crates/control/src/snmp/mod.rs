//! SNMP: the router serves IF-MIB ([`ifmib`]) through net-snmp's snmpd as an AgentX subagent
//! (RFC 2741), so operators poll it as they poll any router, and one snmpd serves every
//! logical router, each in the SNMP context its config names (`snmp.context`).
//!
//! A thread keeps one session with the master: Open, Register `interfaces` and `ifXTable` (in
//! the context), then answers Get, GetNext and GetBulk from the ports' state and counters as they
//! are at each request; sets are refused (notWritable). When the master goes (snmpd restarted)
//! or refuses the registration (another process holds it: the one this one is taking over
//! from), it tries again every second. Reads: the master's PDUs, the router's ports and
//! counters. Sends: PDUs to the master; log lines when the session comes and goes.

pub mod ifmib;

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use packet::agentx::request::{self as rq, Request};
use packet::agentx::{self, Header};

use crate::config::snmp::SnmpCfg;
use crate::config::Driver;
use crate::mgmt::Core;
use crate::syslog::Severity;
use ifmib::{IfRow, View};

/// The subagent's identity in its Open-PDU (net-snmp's experimental arc, as the event manager's).
const SUBAGENT_ID: &[u32] = &[1, 3, 6, 1, 4, 1, 8072, 9999, 77];
/// A request's payload larger than this is not one we serve (snmpd's are a few hundred bytes).
const MAX_PAYLOAD: u32 = 1 << 20;
const RETRY: Duration = Duration::from_secs(1);

/// What the subagent has done, for the tests and `show` (counts since start).
#[derive(Debug, Default)]
pub struct SnmpCounters {
    pub sessions: AtomicU64,
    pub requests: AtomicU64,
    pub varbinds: AtomicU64,
    pub malformed: AtomicU64,
}

/// One connection to the master, of either kind.
enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Conn {
    fn open(master: &str) -> io::Result<Conn> {
        Ok(match master.strip_prefix("tcp:") {
            Some(addr) => Conn::Tcp(TcpStream::connect(addr)?),
            None => Conn::Unix(UnixStream::connect(
                master.strip_prefix("unix:").unwrap_or(master),
            )?),
        })
    }

    fn try_clone(&self) -> io::Result<Conn> {
        Ok(match self {
            Conn::Unix(s) => Conn::Unix(s.try_clone()?),
            Conn::Tcp(s) => Conn::Tcp(s.try_clone()?),
        })
    }

    fn shutdown(&self) {
        let _ = match self {
            Conn::Unix(s) => s.shutdown(std::net::Shutdown::Both),
            Conn::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }
}

impl Read for Conn {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Unix(s) => s.read(b),
            Conn::Tcp(s) => s.read(b),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Unix(s) => s.write(b),
            Conn::Tcp(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The running subagent; stops when dropped.
pub struct Subagent {
    stop: Arc<AtomicBool>,
    conn: Arc<Mutex<Option<Conn>>>,
    thread: Option<JoinHandle<()>>,
    pub counters: Arc<SnmpCounters>,
}

impl Subagent {
    pub fn start(cfg: SnmpCfg, core: Weak<Core>) -> Result<Subagent, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let conn: Arc<Mutex<Option<Conn>>> = Arc::default();
        let counters = Arc::new(SnmpCounters::default());
        let (s, c, n) = (stop.clone(), conn.clone(), counters.clone());
        let thread = std::thread::Builder::new()
            .name("snmp".into())
            .spawn(move || run(&cfg, &core, &s, &c, &n))
            .map_err(|e| format!("cannot start the SNMP thread: {e}"))?;
        Ok(Subagent {
            stop,
            conn,
            thread: Some(thread),
            counters,
        })
    }
}

impl Drop for Subagent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(c) = self.conn.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            c.shutdown();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    cfg: &SnmpCfg,
    core: &Weak<Core>,
    stop: &AtomicBool,
    slot: &Mutex<Option<Conn>>,
    n: &SnmpCounters,
) {
    let mut last_err = String::new();
    while !stop.load(Ordering::Relaxed) {
        let r = Conn::open(&cfg.agentx).and_then(|c| {
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(c.try_clone()?);
            if stop.load(Ordering::Relaxed) {
                c.shutdown();
            }
            session(cfg, core, c, n)
        });
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if let Err(e) = r {
            let msg = e.to_string();
            // Said once per kind of trouble, not every second.
            if msg != last_err && !stop.load(Ordering::Relaxed) {
                if let Some(c) = core.upgrade() {
                    c.logger.log(
                        Severity::Warning,
                        "SNMP_AGENTX",
                        &[("master", cfg.agentx.clone())],
                        format!(
                            "AgentX session with {}: {msg}; retrying every second",
                            cfg.agentx
                        ),
                    );
                }
                last_err = msg;
            }
        }
        for _ in 0..10 {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(RETRY / 10);
        }
    }
}

/// Reads one PDU: its header and payload.
fn read_pdu(c: &mut Conn) -> io::Result<(Header, Vec<u8>)> {
    let mut h = [0u8; agentx::HEADER_LEN];
    c.read_exact(&mut h)?;
    let hdr = agentx::parse_header(&h, MAX_PAYLOAD)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut payload = vec![0u8; hdr.payload_len as usize];
    c.read_exact(&mut payload)?;
    Ok((hdr, payload))
}

/// Waits for the Response to our `packet`, answering nothing else meanwhile (the master sends
/// no requests before our registration is answered); its session and error.
fn await_response(c: &mut Conn, packet: u32) -> io::Result<(u32, u16)> {
    loop {
        let (h, p) = read_pdu(c)?;
        if h.ty == agentx::RESPONSE && h.packet == packet {
            let (_, err, _) = agentx::parse_response(&h, &p)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            return Ok((h.session, err));
        }
    }
}

/// One session: Open, Register, then requests until the master goes.
fn session(cfg: &SnmpCfg, core: &Weak<Core>, mut c: Conn, n: &SnmpCounters) -> io::Result<()> {
    let descr = match &cfg.context {
        Some(ctx) => format!("Linerate IF-MIB (context {ctx})"),
        None => "Linerate IF-MIB".into(),
    };
    c.write_all(&agentx::open(1, 0, SUBAGENT_ID, &descr))?;
    let (sid, err) = await_response(&mut c, 1)?;
    if err != 0 {
        return Err(io::Error::other(format!(
            "Open refused: {}",
            agentx::error_name(err)
        )));
    }
    for (p, subtree) in [(2u32, ifmib::INTERFACES), (3, ifmib::IF_X_TABLE)] {
        c.write_all(&rq::register(sid, p, cfg.context.as_deref(), subtree, 127))?;
        let (_, err) = await_response(&mut c, p)?;
        if err != 0 {
            let _ = c.write_all(&agentx::close(sid, 4, agentx::REASON_SHUTDOWN));
            return Err(io::Error::other(format!(
                "registering IF-MIB{}: {}",
                cfg.context
                    .as_ref()
                    .map(|x| format!(" in context {x}"))
                    .unwrap_or_default(),
                agentx::error_name(err)
            )));
        }
    }
    n.sessions.fetch_add(1, Ordering::Relaxed);
    if let Some(core) = core.upgrade() {
        core.logger.log(
            Severity::Informational,
            "SNMP_AGENTX",
            &[("master", cfg.agentx.clone())],
            format!("IF-MIB registered with {} (session {sid})", cfg.agentx),
        );
    }
    loop {
        let (h, p) = read_pdu(&mut c)?;
        let Some(core) = core.upgrade() else {
            return Ok(());
        };
        match h.ty {
            agentx::CLOSE => return Err(io::Error::other("the master closed the session")),
            agentx::RESPONSE => continue,
            _ => {}
        }
        let uptime_cs = (core.started.elapsed().as_millis() / 10) as u32;
        let Some(answer) = answer_pdu(&h, &p, || if_rows(&core), uptime_cs, n) else {
            continue;
        };
        c.write_all(&answer)?;
    }
}

/// The Response to one request PDU from the master (None: it wants none, a CleanupSet): the
/// rows are read only if the request needs them. A request that does not parse is answered
/// parseError; a set, notWritable.
pub fn answer_pdu(
    h: &Header,
    payload: &[u8],
    rows: impl FnOnce() -> Vec<IfRow>,
    uptime_cs: u32,
    n: &SnmpCounters,
) -> Option<Vec<u8>> {
    Some(match rq::parse_request(h, payload) {
        Err(_) => {
            n.malformed.fetch_add(1, Ordering::Relaxed);
            rq::response(h, uptime_cs, rq::PARSE_ERROR, 0, &[])
        }
        Ok((_, Request::OtherSet(rq::CLEANUP_SET))) => return None,
        Ok((_, Request::TestSet)) => rq::response(h, uptime_cs, rq::NOT_WRITABLE, 1, &[]),
        Ok((_, Request::OtherSet(_))) => rq::response(h, uptime_cs, 0, 0, &[]),
        Ok((_, req)) => {
            n.requests.fetch_add(1, Ordering::Relaxed);
            let vb = View::of(&rows()).answer(&req).unwrap_or_default();
            n.varbinds.fetch_add(vb.len() as u64, Ordering::Relaxed);
            rq::response(h, uptime_cs, 0, 0, &vb)
        }
    })
}

/// The interfaces as IF-MIB rows, from the router's tables and raw counters (never the cleared
/// ones: SNMP counters only go up).
pub fn if_rows(core: &Core) -> Vec<IfRow> {
    let s = core.lock("snmp.rows");
    let snap = s.runtime.snapshot();
    let r = &s.router;
    let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
    r.ifs
        .iter()
        .enumerate()
        .map(|(ifx, x)| {
            let bvi = x.bvi.is_some();
            let port = x.port as usize;
            let port_name = if bvi { "-" } else { r.port_name(x.port) };
            let pc = r.cfg.ports.iter().find(|p| p.name == port_name);
            let (driver, device) = match pc.map(|p| &p.driver) {
                Some(Driver::AfPacket { device, .. }) => ("af_packet", Some(device.as_str())),
                Some(Driver::AfXdp { device, .. }) => ("af_xdp", Some(device.as_str())),
                Some(Driver::Shm { .. }) => ("shm", None),
                Some(Driver::Pcap { .. }) => ("pcap", None),
                Some(Driver::Mem) => ("mem", None),
                None => ("virtual", None),
            };
            // /sys says the link speed in Mbit/s, -1 when it does not know (veth, tap).
            let speed_bps = device.and_then(|d| {
                let t = std::fs::read_to_string(format!("/sys/class/net/{d}/speed")).ok()?;
                let m: i64 = t.trim().parse().ok()?;
                (m > 0).then_some(m as u64 * 1_000_000)
            });
            let alone = !bvi
                && r.ifs
                    .iter()
                    .filter(|y| y.bvi.is_none() && y.port == x.port)
                    .count()
                    == 1;
            IfRow {
                index: ifx as u32 + 1,
                name: x.name.clone(),
                descr: if bvi {
                    format!("{} (bridge interface)", x.name)
                } else {
                    format!("{} (port {port_name}, {driver})", x.name)
                },
                if_type: match (bvi, x.vlan.is_some() || x.s_vlan.is_some()) {
                    (true, _) => 53,
                    (false, true) => 135,
                    (false, false) => 6,
                },
                mtu: u32::from(x.mtu),
                speed_bps,
                mac: x.mac.0,
                admin_up: x.up,
                oper_up: crate::mgmt::show::oper_up(&s, x),
                counters: alone.then(|| ifmib::IfCounters {
                    in_octets: at(&snap.rx_bytes, port),
                    in_pkts: at(&snap.rx_packets, port),
                    in_errors: at(&snap.rx_errors, port),
                    out_octets: at(&snap.tx_bytes, port),
                    out_pkts: at(&snap.tx_packets, port),
                }),
            }
        })
        .collect()
}
