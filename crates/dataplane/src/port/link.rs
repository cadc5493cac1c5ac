//! Link state from the kernel: which devices exist, whether they are up, their MTU, MAC address
//! and queue counts, and a monitor that reports changes as they happen.
//!
//! A port driver that sits on a kernel device (AF_PACKET, AF_XDP) needs this twice: once when it
//! opens the device (its index, MTU and number of receive queues decide the socket set-up), and
//! for as long as it runs (a link that goes down must stop the router from routing out of it).
//! Both come from rtnetlink: `RTM_GETLINK` for the current state and the `RTMGRP_LINK` multicast
//! group for changes.
//!
//! The few `ifinfomsg` fields needed are decoded by hand (about a hundred lines) rather than with
//! the netlink crates: the wire format is stable and small, the decoder is tested below on
//! hand-built messages, and the data plane keeps `libc` as its only system dependency.
//!
//! Everything here works in the network namespace of the calling thread, as sockets do.

use std::io;
use std::time::{Duration, Instant};

use super::netlink::{attrs, rd_u16, rd_u32, NlRequest, NlSocket, NLMSG_HDRLEN};

/// The state of one link, as the kernel reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkEvent {
    pub ifindex: u32,
    pub name: String,
    /// Administratively up (`IFF_UP`, `ip link set X up`).
    pub admin_up: bool,
    /// Able to pass traffic: admin up and the operational state is UP (or, for devices that do
    /// not report one, the carrier is on: `IFF_LOWER_UP`). A veth whose peer is down is admin up
    /// but not oper up.
    pub oper_up: bool,
    pub mtu: u32,
    /// The Ethernet address; all zero for devices that have none (tun, loopback).
    pub mac: [u8; 6],
    /// Number of receive queues (`IFLA_NUM_RX_QUEUES`): more than one means the device spreads
    /// flows itself, so a packet fanout can follow its queues.
    pub rx_queues: u32,
    /// Number of transmit queues (`IFLA_NUM_TX_QUEUES`).
    pub tx_queues: u32,
    /// The link was deleted (`RTM_DELLINK`); the other fields are its last state, with both
    /// `admin_up` and `oper_up` false.
    pub removed: bool,
}

/// The index of device `dev` in the calling thread's network namespace.
pub fn ifindex(dev: &str) -> Result<u32, String> {
    check_name(dev)?;
    let c = std::ffi::CString::new(dev).map_err(|_| format!("{dev:?}: NUL in device name"))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call; if_nametoindex only
    // reads it.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENODEV) => format!("{dev}: no such network device"),
            _ => format!("{dev}: cannot look up the device: {e}"),
        });
    }
    Ok(i)
}

/// The current state of device `dev` (what a monitor started now would build on).
pub fn link_state(dev: &str) -> Result<LinkEvent, String> {
    check_name(dev)?;
    let sock = NlSocket::open(0).map_err(|e| format!("{dev}: opening a netlink socket: {e}"))?;
    let mut req = NlRequest::new(libc::RTM_GETLINK, libc::NLM_F_REQUEST as u16, 1);
    req.ifinfomsg(0);
    let mut name = dev.as_bytes().to_vec();
    name.push(0);
    req.attr(libc::IFLA_IFNAME, &name);
    sock.send(&req.finish())
        .map_err(|e| format!("{dev}: sending RTM_GETLINK: {e}"))?;
    let mut buf = vec![0u8; RECV_BUF];
    loop {
        let n = sock
            .recv(&mut buf, true)
            .map_err(|e| format!("{dev}: reading the RTM_GETLINK answer: {e}"))?;
        for m in messages(&buf[..n]) {
            match m {
                Msg::Link(ev) => return Ok(ev),
                Msg::Error(0) | Msg::Other => {}
                Msg::Error(e) if e == libc::ENODEV => {
                    return Err(format!("{dev}: no such network device"))
                }
                Msg::Error(e) => {
                    return Err(format!(
                        "{dev}: RTM_GETLINK failed: {}",
                        io::Error::from_raw_os_error(e)
                    ))
                }
                Msg::Done => return Err(format!("{dev}: the kernel sent no link message")),
            }
        }
    }
}

/// Every link in the calling thread's network namespace.
pub fn all_links() -> Result<Vec<LinkEvent>, String> {
    let sock = NlSocket::open(0).map_err(|e| format!("opening a netlink socket: {e}"))?;
    dump_links(&sock)
}

fn dump_links(sock: &NlSocket) -> Result<Vec<LinkEvent>, String> {
    let mut req = NlRequest::new(
        libc::RTM_GETLINK,
        (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16,
        2,
    );
    req.ifinfomsg(0);
    sock.send(&req.finish())
        .map_err(|e| format!("sending an RTM_GETLINK dump request: {e}"))?;
    let mut buf = vec![0u8; RECV_BUF];
    let mut out = Vec::new();
    loop {
        let n = sock
            .recv(&mut buf, true)
            .map_err(|e| format!("reading the link dump: {e}"))?;
        for m in messages(&buf[..n]) {
            match m {
                Msg::Link(ev) => out.push(ev),
                Msg::Done => return Ok(out),
                Msg::Error(0) | Msg::Other => {}
                Msg::Error(e) => {
                    return Err(format!(
                        "link dump failed: {}",
                        io::Error::from_raw_os_error(e)
                    ))
                }
            }
        }
    }
}

/// Watches every link of the calling thread's network namespace for changes.
///
/// The kernel sends an `RTM_NEWLINK` for each change (admin state, carrier, MTU, address) and
/// often several for one command (the flag change, then the operational state once the link
/// watcher has run), so a consumer should treat each event as the full current state of that
/// link, not as a delta.
pub struct LinkMonitor {
    sock: NlSocket,
    buf: Vec<u8>,
    overruns: u64,
    errors: u64,
}

impl LinkMonitor {
    /// Subscribes to link changes. Changes made after this returns are all reported.
    pub fn new() -> Result<LinkMonitor, String> {
        let sock = NlSocket::open(libc::RTMGRP_LINK as u32)
            .map_err(|e| format!("link monitor: opening a netlink socket: {e}"))?;
        Ok(LinkMonitor {
            sock,
            buf: vec![0u8; RECV_BUF],
            overruns: 0,
            errors: 0,
        })
    }

    /// Waits up to `timeout` for link changes and returns every change that has arrived (none
    /// if the time ran out). If the kernel had to drop notifications because they were not read
    /// in time, the monitor re-reads every link and returns them all, so no change is missed;
    /// [`overruns`](Self::overruns) counts such times.
    pub fn poll(&mut self, timeout: Duration) -> Vec<LinkEvent> {
        let mut out = Vec::new();
        let deadline = Instant::now() + timeout;
        // Wait for the first message, then take everything that is already there.
        if !self.sock.wait_readable(deadline) {
            return out;
        }
        loop {
            match self.sock.recv(&mut self.buf, false) {
                Ok(n) => {
                    for m in messages(&self.buf[..n]) {
                        if let Msg::Link(ev) = m {
                            out.push(ev);
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    self.overruns += 1;
                    match all_links() {
                        Ok(all) => out.extend(all),
                        Err(_) => self.errors += 1,
                    }
                }
                Err(_) => {
                    self.errors += 1;
                    break;
                }
            }
        }
        out
    }

    /// Times notifications were lost to a full socket buffer (each followed by a full re-read).
    pub fn overruns(&self) -> u64 {
        self.overruns
    }

    /// Read errors other than overruns (none are expected).
    pub fn errors(&self) -> u64 {
        self.errors
    }
}

const RECV_BUF: usize = 64 * 1024;
const IFINFOMSG_LEN: usize = 16;
const IF_OPER_UNKNOWN: u8 = 0;
const IF_OPER_UP: u8 = 6;

fn check_name(dev: &str) -> Result<(), String> {
    if dev.is_empty() {
        return Err("empty network device name".into());
    }
    if dev.len() >= libc::IFNAMSIZ {
        return Err(format!(
            "{dev}: not a network device name (longer than {} bytes)",
            libc::IFNAMSIZ - 1
        ));
    }
    if dev
        .bytes()
        .any(|b| b == b'/' || b == 0 || b.is_ascii_whitespace())
    {
        return Err(format!("{dev:?}: not a network device name"));
    }
    Ok(())
}

/// One decoded netlink message, as far as this module cares.
#[derive(Debug, PartialEq)]
pub(crate) enum Msg {
    Link(LinkEvent),
    /// `NLMSG_ERROR` with this errno (0 is an acknowledgement).
    Error(i32),
    Done,
    Other,
}

/// The messages in one datagram. Stops at the first malformed header (a kernel never sends one;
/// the check keeps a bad length from reading past the datagram).
pub(crate) fn messages(buf: &[u8]) -> impl Iterator<Item = Msg> + '_ {
    let mut off = 0usize;
    std::iter::from_fn(move || {
        let len = rd_u32(buf, off)? as usize;
        let ty = rd_u16(buf, off + 4)?;
        if len < NLMSG_HDRLEN || off + len > buf.len() {
            return None;
        }
        let payload = &buf[off + NLMSG_HDRLEN..off + len];
        off += (len + 3) & !3;
        Some(match ty {
            libc::RTM_NEWLINK | libc::RTM_DELLINK => match decode_link(payload) {
                Some(mut ev) => {
                    if ty == libc::RTM_DELLINK {
                        ev.removed = true;
                        ev.admin_up = false;
                        ev.oper_up = false;
                    }
                    Msg::Link(ev)
                }
                None => Msg::Other,
            },
            t if t == libc::NLMSG_ERROR as u16 => {
                Msg::Error(rd_u32(payload, 0).map_or(0, |e| (e as i32).wrapping_neg()))
            }
            t if t == libc::NLMSG_DONE as u16 => Msg::Done,
            _ => Msg::Other,
        })
    })
}

/// Decodes an `ifinfomsg` and the attributes we use.
fn decode_link(p: &[u8]) -> Option<LinkEvent> {
    if p.len() < IFINFOMSG_LEN {
        return None;
    }
    let ifindex = rd_u32(p, 4)?;
    let flags = rd_u32(p, 8)?;
    let mut ev = LinkEvent {
        ifindex,
        name: String::new(),
        admin_up: flags & libc::IFF_UP as u32 != 0,
        oper_up: false,
        mtu: 0,
        mac: [0; 6],
        rx_queues: 1,
        tx_queues: 1,
        removed: false,
    };
    let mut operstate = None;
    for (ty, v) in attrs(&p[IFINFOMSG_LEN..]) {
        match ty {
            libc::IFLA_IFNAME => {
                let s = v.split(|&b| b == 0).next().unwrap_or(&[]);
                ev.name = String::from_utf8_lossy(s).into_owned();
            }
            libc::IFLA_MTU => ev.mtu = rd_u32(v, 0).unwrap_or(0),
            libc::IFLA_ADDRESS if v.len() == 6 => ev.mac.copy_from_slice(v),
            libc::IFLA_OPERSTATE => operstate = v.first().copied(),
            libc::IFLA_NUM_RX_QUEUES => ev.rx_queues = rd_u32(v, 0).unwrap_or(1),
            libc::IFLA_NUM_TX_QUEUES => ev.tx_queues = rd_u32(v, 0).unwrap_or(1),
            _ => {}
        }
    }
    let carrier = flags & libc::IFF_LOWER_UP as u32 != 0;
    ev.oper_up = ev.admin_up
        && match operstate {
            Some(IF_OPER_UP) => true,
            // Devices without operational state tracking report UNKNOWN: trust the carrier.
            Some(IF_OPER_UNKNOWN) | None => carrier,
            Some(_) => false,
        };
    Some(ev)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-built RTM_NEWLINK/RTM_DELLINK as the kernel would send it.
    fn link_msg(ty: u16, index: i32, flags: u32, name: &str, operstate: Option<u8>) -> Vec<u8> {
        let mut r = NlRequest::new(ty, 0, 0);
        r.0.push(libc::AF_UNSPEC as u8);
        r.0.push(0);
        r.0.extend_from_slice(&1u16.to_ne_bytes()); // ARPHRD_ETHER
        r.0.extend_from_slice(&index.to_ne_bytes());
        r.0.extend_from_slice(&flags.to_ne_bytes());
        r.0.extend_from_slice(&0xffff_ffffu32.to_ne_bytes());
        let mut n = name.as_bytes().to_vec();
        n.push(0);
        r.attr(libc::IFLA_IFNAME, &n);
        r.attr(libc::IFLA_MTU, &9000u32.to_ne_bytes());
        r.attr(libc::IFLA_ADDRESS, &[2, 0, 0, 0, 0, 7]);
        r.attr(libc::IFLA_NUM_RX_QUEUES, &4u32.to_ne_bytes());
        r.attr(libc::IFLA_NUM_TX_QUEUES, &2u32.to_ne_bytes());
        // A nested attribute (with NLA_F_NESTED) is skipped, not misread.
        r.attr(
            libc::IFLA_LINKINFO | 0x8000,
            &[8, 0, 1, 0, b'v', b'e', b't', b'h'],
        );
        if let Some(s) = operstate {
            r.attr(libc::IFLA_OPERSTATE, &[s]);
        }
        r.finish()
    }

    const UP: u32 = libc::IFF_UP as u32;
    const LOWER: u32 = libc::IFF_LOWER_UP as u32;

    #[test]
    fn decodes_the_fields_of_a_link_message() {
        let m = link_msg(libc::RTM_NEWLINK, 7, UP | LOWER, "lra", Some(IF_OPER_UP));
        let got: Vec<_> = messages(&m).collect();
        assert_eq!(
            got,
            vec![Msg::Link(LinkEvent {
                ifindex: 7,
                name: "lra".into(),
                admin_up: true,
                oper_up: true,
                mtu: 9000,
                mac: [2, 0, 0, 0, 0, 7],
                rx_queues: 4,
                tx_queues: 2,
                removed: false,
            })]
        );
    }

    #[test]
    fn oper_state_follows_operstate_then_carrier() {
        let ev = |flags, st| match messages(&link_msg(libc::RTM_NEWLINK, 1, flags, "x", st))
            .next()
            .unwrap()
        {
            Msg::Link(e) => (e.admin_up, e.oper_up),
            m => panic!("{m:?}"),
        };
        // Admin down: never oper up, whatever the carrier says.
        assert_eq!(ev(LOWER, Some(IF_OPER_UP)), (false, false));
        // LOWERLAYERDOWN (5), e.g. a veth whose peer is down.
        assert_eq!(ev(UP, Some(5)), (true, false));
        assert_eq!(ev(UP | LOWER, Some(2)), (true, false));
        // UNKNOWN or no operstate: the carrier decides.
        assert_eq!(ev(UP | LOWER, Some(IF_OPER_UNKNOWN)), (true, true));
        assert_eq!(ev(UP, None), (true, false));
    }

    #[test]
    fn dellink_is_reported_down_and_removed() {
        let m = link_msg(libc::RTM_DELLINK, 9, UP | LOWER, "gone", Some(IF_OPER_UP));
        match messages(&m).next().unwrap() {
            Msg::Link(e) => {
                assert!(e.removed && !e.admin_up && !e.oper_up);
                assert_eq!((e.ifindex, e.name.as_str()), (9, "gone"));
            }
            m => panic!("{m:?}"),
        };
    }

    #[test]
    fn several_messages_errors_and_done_in_one_datagram() {
        let mut buf = link_msg(libc::RTM_NEWLINK, 1, UP, "a", None);
        buf.extend(link_msg(libc::RTM_NEWLINK, 2, UP, "b", None));
        let mut err = NlRequest::new(libc::NLMSG_ERROR as u16, 0, 0);
        err.0.extend_from_slice(&(-libc::ENODEV).to_ne_bytes());
        buf.extend(err.finish());
        buf.extend(NlRequest::new(libc::NLMSG_DONE as u16, 0, 0).finish());
        let got: Vec<_> = messages(&buf)
            .map(|m| match m {
                Msg::Link(e) => format!("link {}", e.name),
                m => format!("{m:?}"),
            })
            .collect();
        assert_eq!(
            got,
            [
                "link a",
                "link b",
                &format!("Error({})", libc::ENODEV),
                "Done"
            ]
        );
    }

    #[test]
    fn truncated_or_lying_lengths_stop_decoding_without_panicking() {
        let m = link_msg(libc::RTM_NEWLINK, 3, UP, "abc", Some(IF_OPER_UP));
        for cut in 0..m.len() {
            // Every prefix is either rejected or decoded without reading past the end.
            let _ = messages(&m[..cut]).count();
        }
        // A header that claims more bytes than the datagram has.
        let mut bad = m.clone();
        bad[..4].copy_from_slice(&(m.len() as u32 + 100).to_ne_bytes());
        assert_eq!(messages(&bad).count(), 0);
        // An attribute that claims more than the message has ends the attribute list only.
        let mut p = m[NLMSG_HDRLEN..].to_vec();
        p[IFINFOMSG_LEN..IFINFOMSG_LEN + 2].copy_from_slice(&500u16.to_ne_bytes());
        let ev = decode_link(&p).unwrap();
        assert_eq!((ev.ifindex, ev.name.as_str(), ev.mtu), (3, "", 0));
    }

    #[test]
    fn bad_names_are_refused_before_asking_the_kernel() {
        assert!(ifindex("").unwrap_err().contains("empty"));
        assert!(ifindex("a-name-much-too-long")
            .unwrap_err()
            .contains("longer"));
        assert!(link_state("a/b")
            .unwrap_err()
            .contains("not a network device"));
        let e = ifindex("lr-nosuchdev0").unwrap_err();
        assert_eq!(e, "lr-nosuchdev0: no such network device");
        let e = link_state("lr-nosuchdev0").unwrap_err();
        assert_eq!(e, "lr-nosuchdev0: no such network device");
    }

    #[test]
    fn loopback_is_found() {
        let lo = link_state("lo").unwrap();
        assert_eq!(lo.ifindex, ifindex("lo").unwrap());
        assert_eq!(lo.name, "lo");
        assert!(all_links().unwrap().iter().any(|l| l.name == "lo"));
    }
}
