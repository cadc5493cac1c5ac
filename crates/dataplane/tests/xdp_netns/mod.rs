//! Test plumbing for drivers that need real Linux devices: a fresh network namespace per test,
//! veth pairs inside it, and raw AF_PACKET sockets to send and receive at the far end. Shared by
//! the AF_XDP tests and the `af_xdp_bench` example (which includes this file by path).
//!
//! A namespace is entered by one thread with `unshare(CLONE_NEWNET)`: only that thread (and the
//! threads and processes it starts, such as `ip`) sees it, so tests can run in parallel, and the
//! namespace with its devices disappears when the thread and the sockets opened in it are gone;
//! nothing is left behind in /run/netns if a test fails.

#![allow(dead_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::time::{Duration, Instant};

/// True if we run as root (the AF_XDP tests need CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `f` on a new thread inside a new network namespace; panics in `f` propagate.
pub fn in_fresh_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        enter_fresh_netns();
        f()
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// Moves the calling thread into a new network namespace with `lo` up and IPv6 off (so router
/// solicitations and duplicate-address probes stay out of the frames a test counts).
pub fn enter_fresh_netns() {
    // SAFETY: unshare with CLONE_NEWNET only changes this thread's network namespace.
    let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    assert_eq!(
        r,
        0,
        "unshare(CLONE_NEWNET): {}",
        io::Error::last_os_error()
    );
    // /proc/sys/net is resolved against the calling thread's namespace.
    for p in ["all", "default"] {
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{p}/disable_ipv6"), "1");
    }
    ip(&["link", "set", "lo", "up"]);
}

/// Runs `ip ARGS` in this thread's namespace; panics with its stderr if it fails.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("running ip (iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// `ip ARGS`'s standard output.
pub fn ip_output(args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("running ip (iproute2)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A veth pair `a`-`b` with `queues` receive and transmit queues on each end, both up.
pub fn veth_pair(a: &str, b: &str, queues: u32) {
    let q = queues.to_string();
    ip(&[
        "link",
        "add",
        a,
        "numtxqueues",
        &q,
        "numrxqueues",
        &q,
        "type",
        "veth",
        "peer",
        "name",
        b,
        "numtxqueues",
        &q,
        "numrxqueues",
        &q,
    ]);
    ip(&["link", "set", a, "up"]);
    ip(&["link", "set", b, "up"]);
}

/// Pins the calling thread to one CPU (modulo the CPUs there are).
pub fn pin_to_cpu(cpu: usize) {
    let ids = core_affinity::get_core_ids().unwrap_or_default();
    if !ids.is_empty() {
        core_affinity::set_for_current(ids[cpu % ids.len()]);
    }
}

/// A raw AF_PACKET socket bound to one device: sends whole frames, receives every frame the
/// device receives (frames it sends itself are skipped).
pub struct RawSock {
    fd: OwnedFd,
}

impl RawSock {
    pub fn open(dev: &str) -> RawSock {
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2) call; the result is checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                proto as libc::c_int,
            )
        };
        assert!(raw >= 0, "AF_PACKET socket: {}", io::Error::last_os_error());
        // SAFETY: a fresh fd nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let name = std::ffi::CString::new(dev).unwrap();
        // SAFETY: `name` is a live NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert!(ifindex != 0, "{dev}: {}", io::Error::last_os_error());
        // SAFETY: sockaddr_ll is plain integers; zero is valid.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_protocol = proto;
        sa.sll_ifindex = ifindex as i32;
        // SAFETY: `sa` is a live sockaddr_ll and we pass its size.
        let r = unsafe {
            libc::bind(
                raw,
                &sa as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        assert_eq!(
            r,
            0,
            "binding AF_PACKET to {dev}: {}",
            io::Error::last_os_error()
        );
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 20_000,
        };
        // SAFETY: `tv` is a live timeval and we pass its size.
        unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        // Tests send a whole batch before reading: room for it (SO_RCVBUFFORCE: root may exceed
        // rmem_max, which a namespace cannot raise).
        let size: libc::c_int = 32 << 20;
        // SAFETY: `size` is a live c_int and we pass its size.
        unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &size as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        RawSock { fd }
    }

    /// Sends straight to the driver (`PACKET_QDISC_BYPASS`). The transmit queue is then the
    /// sending CPU modulo the device's queues (no flow hash), and veth delivers transmit queue q
    /// to the peer's receive queue q, so a test pinned to a CPU knows where its frames arrive.
    pub fn qdisc_bypass(&self) {
        let one: libc::c_int = 1;
        // SAFETY: `one` is a live c_int and we pass its size.
        let r = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_QDISC_BYPASS,
                &one as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0, "PACKET_QDISC_BYPASS: {}", io::Error::last_os_error());
    }

    pub fn send(&self, frame: &[u8]) {
        // SAFETY: `frame` is a live buffer of frame.len() bytes.
        let r = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                0,
            )
        };
        assert_eq!(
            r,
            frame.len() as isize,
            "AF_PACKET send: {}",
            io::Error::last_os_error()
        );
    }

    /// The next frame received (not sent) on the device, or None after about 20 ms.
    pub fn recv(&self) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; 65536];
        loop {
            // SAFETY: sockaddr_ll is plain integers; zero is valid.
            let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut sl = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: `buf` and `sa` are live and writable for the lengths passed.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    0,
                    &mut sa as *mut libc::sockaddr_ll as *mut libc::sockaddr,
                    &mut sl,
                )
            };
            if n < 0 {
                return None;
            }
            if sa.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            buf.truncate(n as usize);
            return Some(buf);
        }
    }

    /// Frames received until `pred` has accepted `want` of them or `timeout` passes; returns the
    /// accepted ones.
    pub fn recv_matching(
        &self,
        want: usize,
        timeout: Duration,
        pred: impl Fn(&[u8]) -> bool,
    ) -> Vec<Vec<u8>> {
        let end = Instant::now() + timeout;
        let mut got = Vec::new();
        while got.len() < want && Instant::now() < end {
            if let Some(f) = self.recv() {
                if pred(&f) {
                    got.push(f);
                }
            }
        }
        got
    }
}
