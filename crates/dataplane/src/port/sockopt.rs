//! Socket buffer sizes, for sockets that take bursts faster than their reader drains them: the
//! netlink route socket during a full-table download, the GGSN's GTP-C socket during a create
//! storm. A datagram that finds the buffer full is dropped by the kernel (UdpRcvbufErrors),
//! and the peer retransmits seconds later.

use std::os::fd::AsRawFd;

/// Asks for a receive buffer of `bytes` (beyond `net.core.rmem_max` where the process may:
/// `SO_RCVBUFFORCE` needs CAP_NET_ADMIN). Returns the size the kernel granted (it doubles the
/// request for its bookkeeping); the kernel's default is kept if neither option works.
pub fn set_recv_buffer(sock: &impl AsRawFd, bytes: usize) -> usize {
    set(
        sock,
        [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF],
        libc::SO_RCVBUF,
        bytes,
    )
}

/// Asks for a send buffer of `bytes`, as [`set_recv_buffer`] does.
pub fn set_send_buffer(sock: &impl AsRawFd, bytes: usize) -> usize {
    set(
        sock,
        [libc::SO_SNDBUFFORCE, libc::SO_SNDBUF],
        libc::SO_SNDBUF,
        bytes,
    )
}

fn set(sock: &impl AsRawFd, opts: [libc::c_int; 2], read: libc::c_int, bytes: usize) -> usize {
    let fd = sock.as_raw_fd();
    let v = bytes.min(i32::MAX as usize / 2) as libc::c_int;
    for opt in opts {
        // SAFETY: the pointer and length describe `v`, a c_int that lives across the call;
        // setsockopt only reads it.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            break;
        }
    }
    let mut got: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `got` and `len` are live locals the kernel writes through the pointers, `len`
    // saying how much room `got` has.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            read,
            (&mut got as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r == 0 {
        got.max(0) as usize
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_grow_to_what_was_asked() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let before = set_recv_buffer(&s, 0);
        // Unprivileged, the kernel caps the plain option at rmem_max; either way it grows or
        // stays at the cap, and the size is read back.
        let after = set_recv_buffer(&s, 8 << 20);
        assert!(after >= before && after > 0, "{before} -> {after}");
        assert!(set_send_buffer(&s, 1 << 20) > 0);
    }
}
