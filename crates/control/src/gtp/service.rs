//! The GGSN's sockets: GTP-C on UDP 2123 and GTP-U signalling on UDP 2152, bound to the GGSN's
//! address in the kernel, where the data plane's punt path delivers them (the address is an
//! interface's, so it is its TAP twin's too). One thread per socket reads a datagram, hands it
//! to the engine and sends what the engine answers; G-PDUs never come here but those the data
//! plane had no context for (answered with an Error Indication).
//!
//! The GTP-C thread also runs the engine's path management ([`super::engine::Engine::tick`]:
//! Echo Requests to each SGSN with contexts, path failure after N3 unanswered) and logs what
//! happened to paths: `GTP_PATH_FAILURE`, `GTP_PEER_RESTART` (warnings, with the SGSN and the
//! contexts deleted).

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use packet::gtp::{GTPC_PORT, GTPU_PORT};

use super::engine::GtpEvent;
use super::Ggsn;
use crate::syslog::{Logger, Severity};

pub struct Service {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    pub control: SocketAddr,
    /// The GTP-C socket, shared with [`super::direct::Direct`] for what it sends the kernel's
    /// way.
    pub control_socket: Arc<UdpSocket>,
}

impl Service {
    /// Binds both sockets and starts their threads.
    pub fn start(g: Arc<Ggsn>, logger: Option<Arc<Logger>>) -> Result<Service, String> {
        let addr = g.cfg.address;
        let bind = |port| {
            let s = UdpSocket::bind((addr, port))
                .map_err(|e| format!("GGSN: binding {addr}:{port}: {e}"))?;
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .map_err(|e| e.to_string())?;
            // A create storm arrives in bursts (a punt burst is 10,000 frames): room for one,
            // at about 1 KB of kernel memory per datagram, so none is dropped while the thread
            // catches up.
            dataplane::port::sockopt::set_recv_buffer(&s, 16 << 20);
            dataplane::port::sockopt::set_send_buffer(&s, 4 << 20);
            Ok::<_, String>(s)
        };
        let (c, u) = (Arc::new(bind(GTPC_PORT)?), Arc::new(bind(GTPU_PORT)?));
        let control = c.local_addr().map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for (sock, user_plane) in [(c.clone(), false), (u, true)] {
            let (g, stop, logger) = (g.clone(), stop.clone(), logger.clone());
            let name = if user_plane { "gtp-u" } else { "gtp-c" };
            threads.push(
                std::thread::Builder::new()
                    .name(name.into())
                    .spawn(move || serve(&g, &sock, user_plane, &stop, logger.as_deref()))
                    .map_err(|e| e.to_string())?,
            );
        }
        Ok(Service {
            stop,
            threads,
            control,
            control_socket: c,
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

fn serve(g: &Ggsn, sock: &UdpSocket, user_plane: bool, stop: &AtomicBool, logger: Option<&Logger>) {
    let mut buf = vec![0u8; 65_536];
    let now_ms = || g.now_ms();
    while !stop.load(Ordering::Relaxed) {
        if !user_plane {
            let sends = g.engine().tick(now_ms());
            for s in sends {
                let _ = sock.send_to(&s.bytes, s.to);
            }
        }
        let got = sock.recv_from(&mut buf);
        let (n, from) = match got {
            Ok(x) => x,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                log_events(g, logger);
                continue;
            }
            Err(_) => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let out = g.engine().handle(now_ms(), from, user_plane, &buf[..n]);
        for s in out {
            // Answers leave by the socket they came in on (2123 or 2152).
            let _ = sock.send_to(&s.bytes, s.to);
        }
        log_events(g, logger);
    }
}

/// Logs (and forgets) what the engine says happened to paths.
fn log_events(g: &Ggsn, logger: Option<&Logger>) {
    let events = std::mem::take(&mut g.engine().events);
    let Some(l) = logger else {
        return;
    };
    for ev in events {
        match ev {
            GtpEvent::PathFailure { sgsn, contexts } => l.log(
                Severity::Warning,
                "GTP_PATH_FAILURE",
                &[("sgsn", sgsn.to_string()), ("contexts", contexts.to_string())],
                format!("GTP path to SGSN {sgsn} failed (no Echo Response): {contexts} PDP context(s) deleted"),
            ),
            GtpEvent::PeerRestart {
                sgsn,
                old,
                new,
                contexts,
            } => l.log(
                Severity::Warning,
                "GTP_PEER_RESTART",
                &[
                    ("sgsn", sgsn.to_string()),
                    ("restart_counter", new.to_string()),
                    ("contexts", contexts.to_string()),
                ],
                format!("SGSN {sgsn} restarted (restart counter {old} -> {new}): {contexts} PDP context(s) deleted"),
            ),
        };
    }
}
