//! An rtnetlink socket and the few helpers every user of it needs: requests built by hand,
//! datagrams split into messages and attributes. The link monitor ([`super::link`]) and the
//! control plane's mirror of the kernel's multicast routes use it; each decodes the few fields
//! of its own messages (stable, small formats, tested on hand-built messages).
//!
//! Everything here works in the network namespace of the calling thread, as sockets do.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Length of `struct nlmsghdr`.
pub const NLMSG_HDRLEN: usize = 16;

/// One netlink message of a datagram: its type, flags and payload (after the header).
pub struct RawMsg<'a> {
    pub ty: u16,
    pub flags: u16,
    pub payload: &'a [u8],
}

/// The messages in one datagram. Stops at the first malformed header (a kernel never sends one;
/// the check keeps a bad length from reading past the datagram).
pub fn raw_messages(buf: &[u8]) -> impl Iterator<Item = RawMsg<'_>> + '_ {
    let mut off = 0usize;
    std::iter::from_fn(move || {
        let len = rd_u32(buf, off)? as usize;
        let ty = rd_u16(buf, off + 4)?;
        let flags = rd_u16(buf, off + 6)?;
        if len < NLMSG_HDRLEN || off + len > buf.len() {
            return None;
        }
        let payload = &buf[off + NLMSG_HDRLEN..off + len];
        off += (len + 3) & !3;
        Some(RawMsg { ty, flags, payload })
    })
}

/// An rtnetlink socket, optionally subscribed to multicast groups.
pub struct NlSocket(OwnedFd);

impl NlSocket {
    /// A socket bound to the legacy multicast group mask `groups` (0: none).
    pub fn open(groups: u32) -> io::Result<NlSocket> {
        // SAFETY: socket() takes no pointers; a non-negative result is a new descriptor that we
        // own from here on.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_nl is plain integers, so all-zero is a valid value.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = groups;
        // SAFETY: the pointer and length describe `sa`, which lives across the call.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(NlSocket(fd))
    }

    /// Asks for a receive buffer of `bytes` (see [`super::sockopt::set_recv_buffer`]).
    pub fn set_recv_buffer(&self, bytes: usize) {
        super::sockopt::set_recv_buffer(&self.0, bytes);
    }

    pub fn send(&self, msg: &[u8]) -> io::Result<()> {
        // SAFETY: `msg` is a live slice; send() only reads `msg.len()` bytes from it.
        let r = unsafe { libc::send(self.0.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Receives one datagram; `wait` blocks up to 2 s for it (answers to our own requests).
    pub fn recv(&self, buf: &mut [u8], wait: bool) -> io::Result<usize> {
        if wait && !self.wait_readable(Instant::now() + Duration::from_secs(2)) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no answer from the kernel",
            ));
        }
        // SAFETY: `buf` is a live, writable slice; recv() writes at most `buf.len()` bytes.
        let r = unsafe {
            libc::recv(
                self.0.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_TRUNC,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = r as usize;
        if n > buf.len() {
            // A link message larger than 64 KiB: not seen in practice; treat it as a lost
            // notification so the monitor re-reads everything.
            return Err(io::Error::from_raw_os_error(libc::ENOBUFS));
        }
        Ok(n)
    }

    /// Whether a datagram is there to read before `deadline`.
    pub fn wait_readable(&self, deadline: Instant) -> bool {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ms = left.as_millis().min(i32::MAX as u128) as i32;
            let mut p = libc::pollfd {
                fd: self.0.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: `p` is one valid pollfd that lives across the call.
            let r = unsafe { libc::poll(&mut p, 1, ms) };
            if r > 0 {
                return true;
            }
            if r == 0 {
                return false;
            }
            if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return false;
            }
        }
    }
}

/// Builds one netlink request.
pub struct NlRequest(pub(crate) Vec<u8>);

impl NlRequest {
    pub fn new(ty: u16, flags: u16, seq: u32) -> NlRequest {
        let mut v = Vec::with_capacity(64);
        v.extend_from_slice(&0u32.to_ne_bytes()); // length, set by finish()
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(&flags.to_ne_bytes());
        v.extend_from_slice(&seq.to_ne_bytes());
        v.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
        NlRequest(v)
    }

    pub fn ifinfomsg(&mut self, index: i32) {
        self.0.push(libc::AF_UNSPEC as u8);
        self.0.push(0);
        self.0.extend_from_slice(&0u16.to_ne_bytes()); // type
        self.0.extend_from_slice(&index.to_ne_bytes());
        self.0.extend_from_slice(&0u32.to_ne_bytes()); // flags
        self.0.extend_from_slice(&0u32.to_ne_bytes()); // change mask
    }

    pub fn attr(&mut self, ty: u16, payload: &[u8]) {
        let len = 4 + payload.len();
        self.0.extend_from_slice(&(len as u16).to_ne_bytes());
        self.0.extend_from_slice(&ty.to_ne_bytes());
        self.0.extend_from_slice(payload);
        while !self.0.len().is_multiple_of(4) {
            self.0.push(0);
        }
    }

    /// Appends a fixed header (an `rtmsg`, say) as it is.
    pub fn body(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    pub fn finish(mut self) -> Vec<u8> {
        let len = self.0.len() as u32;
        self.0[..4].copy_from_slice(&len.to_ne_bytes());
        self.0
    }
}

pub fn rd_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
pub fn rd_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
/// Attributes (type without the nested/byte-order flags, payload) of an rtattr list.
pub fn attrs(buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> + '_ {
    let mut off = 0usize;
    std::iter::from_fn(move || {
        let len = rd_u16(buf, off)? as usize;
        let ty = rd_u16(buf, off + 2)? & 0x3fff;
        if len < 4 || off + len > buf.len() {
            return None;
        }
        let payload = &buf[off + 4..off + len];
        off += (len + 3) & !3;
        Some((ty, payload))
    })
}
