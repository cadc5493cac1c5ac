//! The SNMP action: a notification sent through the SNMP master agent (net-snmp's snmpd) as an
//! AgentX subagent (RFC 2741), as the seed's EEM sent traps: the master turns it into the traps
//! and informs its own config sends (`trap2sink`, `trapsess`, ...), so Linerate needs no
//! community or SNMPv3 user of its own.
//!
//! One session per notification: Open, Notify, Close, each answered by a Response-PDU. Reads:
//! the master's Responses. Sends: the PDUs (`packet::agentx`).

use std::io::{Read, Write};
use std::time::Duration;

use packet::agentx::{self, Value};

/// The subagent's identity in its Open-PDU (net-snmp's experimental arc; Linerate has no
/// enterprise number of its own).
pub const SUBAGENT_ID: &[u32] = &[1, 3, 6, 1, 4, 1, 8072, 9999, 76];

/// A Response-PDU's payload is 8 bytes plus varbinds; no answer of ours needs more.
const MAX_PAYLOAD: u32 = 64 * 1024;

fn read_response<S: Read>(s: &mut S, packet: u32) -> Result<agentx::Header, String> {
    // Answers to other packets (none are outstanding in a one-shot session) are skipped.
    for _ in 0..8 {
        let mut h = [0u8; agentx::HEADER_LEN];
        s.read_exact(&mut h)
            .map_err(|e| format!("reading the master's answer: {e}"))?;
        let hdr = agentx::parse_header(&h, MAX_PAYLOAD)
            .map_err(|e| format!("the master's answer: {e}"))?;
        let mut payload = vec![0u8; hdr.payload_len as usize];
        s.read_exact(&mut payload)
            .map_err(|e| format!("reading the master's answer: {e}"))?;
        if hdr.ty != agentx::RESPONSE || hdr.packet != packet {
            continue;
        }
        let (_, err, _) = agentx::parse_response(&hdr, &payload).map_err(|e| e.to_string())?;
        if err != 0 {
            return Err(format!(
                "the master answered {} ({err})",
                agentx::error_name(err)
            ));
        }
        return Ok(hdr);
    }
    Err("no answer to our PDU from the master".into())
}

/// Open, Notify, Close over `s`: the session id the master gave.
pub fn exchange<S: Read + Write>(
    s: &mut S,
    trap: &[u32],
    objects: Vec<(Vec<u32>, Value)>,
    uptime_cs: u32,
) -> Result<u32, String> {
    let io = |e: std::io::Error| format!("to the master: {e}");
    s.write_all(&agentx::open(1, 0, SUBAGENT_ID, "Linerate event manager"))
        .map_err(io)?;
    let session = read_response(s, 1)?.session;
    let vb = agentx::notification(uptime_cs, trap, objects);
    s.write_all(&agentx::notify(session, 1, 2, &vb))
        .map_err(io)?;
    read_response(s, 2)?;
    s.write_all(&agentx::close(session, 3, agentx::REASON_SHUTDOWN))
        .map_err(io)?;
    // The Close's answer is not waited for: the notification is delivered.
    Ok(session)
}

/// Sends one notification through the master at `master`: a Unix socket path (`/var/agentx/
/// master`, `unix:PATH`) or `tcp:HOST:PORT`.
pub fn send(
    master: &str,
    trap: &[u32],
    objects: Vec<(Vec<u32>, Value)>,
    uptime_cs: u32,
    timeout: Duration,
) -> Result<u32, String> {
    let timeout = timeout.max(Duration::from_millis(1));
    if let Some(addr) = master.strip_prefix("tcp:") {
        let a = std::net::ToSocketAddrs::to_socket_addrs(addr)
            .map_err(|e| format!("{addr}: {e}"))?
            .next()
            .ok_or_else(|| format!("{addr}: no address"))?;
        let mut s = std::net::TcpStream::connect_timeout(&a, timeout)
            .map_err(|e| format!("{addr}: {e}"))?;
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        exchange(&mut s, trap, objects, uptime_cs)
    } else {
        let path = master.strip_prefix("unix:").unwrap_or(master);
        let mut s =
            std::os::unix::net::UnixStream::connect(path).map_err(|e| format!("{path}: {e}"))?;
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        exchange(&mut s, trap, objects, uptime_cs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A master that answers every PDU with a Response (session 42), `err` to the Notify.
    struct Master {
        inbox: Vec<u8>,
        answers: std::collections::VecDeque<u8>,
        err: u16,
    }

    impl Write for Master {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.inbox.extend_from_slice(b);
            let h = agentx::parse_header(b, 1 << 16).unwrap();
            if h.ty != agentx::CLOSE {
                let mut r = vec![1, agentx::RESPONSE, agentx::NETWORK_BYTE_ORDER, 0];
                for w in [42u32, h.transaction, h.packet, 8] {
                    r.extend_from_slice(&w.to_be_bytes());
                }
                r.extend_from_slice(&0u32.to_be_bytes());
                let e = if h.ty == agentx::NOTIFY { self.err } else { 0 };
                r.extend_from_slice(&e.to_be_bytes());
                r.extend_from_slice(&[0, 0]);
                self.answers.extend(r);
            }
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Read for Master {
        fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
            let n = b.len().min(self.answers.len());
            for x in b.iter_mut().take(n) {
                *x = self.answers.pop_front().unwrap();
            }
            Ok(n)
        }
    }

    #[test]
    fn open_notify_close_in_one_session() {
        let mut m = Master {
            inbox: Vec::new(),
            answers: Default::default(),
            err: 0,
        };
        let trap = [1, 3, 6, 1, 6, 3, 1, 1, 5, 3];
        let s = exchange(&mut m, &trap, vec![], 5).unwrap();
        assert_eq!(s, 42);
        let mut rest = &m.inbox[..];
        let mut types = Vec::new();
        while !rest.is_empty() {
            let h = agentx::parse_header(rest, 1 << 16).unwrap();
            types.push((h.ty, h.session));
            rest = &rest[agentx::HEADER_LEN + h.payload_len as usize..];
        }
        assert_eq!(
            types,
            [(agentx::OPEN, 0), (agentx::NOTIFY, 42), (agentx::CLOSE, 42)]
        );
    }

    #[test]
    fn a_refusal_and_a_dead_master_are_errors() {
        let mut m = Master {
            inbox: Vec::new(),
            answers: Default::default(),
            err: 257,
        };
        let e = exchange(&mut m, &[1, 3, 6, 1], vec![], 5).unwrap_err();
        assert!(e.contains("notOpen"), "{e}");
        let e = send(
            "/nonexistent/agentx",
            &[1, 3],
            vec![],
            0,
            Duration::from_millis(50),
        )
        .unwrap_err();
        assert!(e.contains("/nonexistent/agentx"), "{e}");
    }
}
