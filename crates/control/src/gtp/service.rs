//! The GGSN's sockets: GTP-C on UDP 2123 and GTP-U signalling on UDP 2152, bound to the GGSN's
//! address in the kernel, where the data plane's punt path delivers them (the address is an
//! interface's, so it is its TAP twin's too). One thread per socket reads a datagram, hands it
//! to the engine and sends what the engine answers; G-PDUs never come here but those the data
//! plane had no context for (answered with an Error Indication).
//!
//! Every `echo-interval` the GTP-C thread sends an Echo Request to each SGSN that has contexts
//! (TS 29.060 7.2.1), so an SGSN learns of our restart from our Recovery IE.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use packet::gtp::{msg, MsgBuilder, GTPC_PORT, GTPU_PORT};

use super::Ggsn;

pub struct Service {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    pub control: SocketAddr,
}

impl Service {
    /// Binds both sockets and starts their threads.
    pub fn start(g: Arc<Ggsn>) -> Result<Service, String> {
        let addr = g.cfg.address;
        let bind = |port| {
            let s = UdpSocket::bind((addr, port))
                .map_err(|e| format!("GGSN: binding {addr}:{port}: {e}"))?;
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(s)
        };
        let (c, u) = (bind(GTPC_PORT)?, bind(GTPU_PORT)?);
        let control = c.local_addr().map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let mut threads = Vec::new();
        for (sock, user_plane) in [(c, false), (u, true)] {
            let (g, stop) = (g.clone(), stop.clone());
            let name = if user_plane { "gtp-u" } else { "gtp-c" };
            threads.push(
                std::thread::Builder::new()
                    .name(name.into())
                    .spawn(move || serve(&g, &sock, user_plane, &stop, started))
                    .map_err(|e| e.to_string())?,
            );
        }
        Ok(Service {
            stop,
            threads,
            control,
        })
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn serve(g: &Ggsn, sock: &UdpSocket, user_plane: bool, stop: &AtomicBool, started: Instant) {
    let mut buf = vec![0u8; 65_536];
    let mut next_echo = Instant::now() + Duration::from_secs(u64::from(g.cfg.echo_interval_s));
    let mut echo_seq = 0u16;
    while !stop.load(Ordering::Relaxed) {
        if !user_plane && g.cfg.echo_interval_s > 0 && Instant::now() >= next_echo {
            next_echo += Duration::from_secs(u64::from(g.cfg.echo_interval_s));
            let peers: std::collections::BTreeSet<Ipv4Addr> =
                g.engine().contexts().map(|c| c.sgsn_c).collect();
            for p in peers {
                echo_seq = echo_seq.wrapping_add(1);
                let m = MsgBuilder::new(msg::ECHO_REQUEST, 0, echo_seq).finish();
                let _ = sock.send_to(&m, (p, GTPC_PORT));
            }
        }
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let now_ms = started.elapsed().as_millis() as u64;
        let out = g.engine().handle(now_ms, from, user_plane, &buf[..n]);
        for s in out {
            // Answers leave by the socket they came in on (2123 or 2152).
            let _ = sock.send_to(&s.bytes, s.to);
        }
    }
}
