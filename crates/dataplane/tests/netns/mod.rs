//! Test plumbing for ports on kernel devices: a private network namespace per test, veth pairs in
//! it, a raw packet socket to send with, and test frames that say which flow and sequence
//! number they carry.
//!
//! [`run`] starts a thread, moves only that thread into a new network namespace
//! (`unshare(CLONE_NEWNET)`) and runs the test there. Processes (`ip`) and threads it starts
//! inherit the namespace, and so do the sockets it opens. When the thread ends and its sockets
//! close, the kernel destroys the namespace with its devices: no cleanup code to forget, even
//! when the test panics. The machine's own interfaces are never touched.
//!
//! Shared by the tests and the AF_PACKET benchmark example (through `#[path]`), so not every
//! user needs every helper.
#![allow(dead_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;

/// Why the namespace tests cannot run here, if they cannot.
pub fn skip_reason() -> Option<String> {
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (network namespaces, veth devices, packet sockets)".into());
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("needs the `ip` command (iproute2)".into());
    }
    None
}

/// Runs `f` in a new network namespace of its own; None (with the reason printed) when this
/// machine cannot (not root). A panic in `f` fails the calling test.
pub fn run<T: Send + 'static>(test: &str, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    if let Some(why) = skip_reason() {
        println!("skipped {test}: {why}");
        eprintln!("skipped {test}: {why}");
        return None;
    }
    let h = std::thread::Builder::new()
        .name(test.to_string())
        .spawn(move || {
            enter_new_netns().unwrap_or_else(|e| panic!("{e}"));
            f()
        })
        .expect("spawning the namespace thread");
    match h.join() {
        Ok(v) => Some(v),
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// Moves the calling thread into a new, empty network namespace with loopback up and IPv6 off
/// (so the kernel sends no router solicitations or MLD reports into the tests' traffic: with no
/// IPv4 address either, a test link carries only the frames the test sends).
pub fn enter_new_netns() -> Result<(), String> {
    // SAFETY: unshare takes no pointers; CLONE_NEWNET affects only the calling thread.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(format!(
            "unshare(CLONE_NEWNET): {}",
            io::Error::last_os_error()
        ));
    }
    // The write runs in a child, which inherits this thread's namespace. Devices made after
    // it inherit the default, so the tests' links carry only the tests' frames.
    let quiet = Command::new("sh")
        .args([
            "-c",
            "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 && \
             echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6",
        ])
        .status()
        .is_ok_and(|s| s.success());
    // A kernel without IPv6 sends no IPv6 either.
    let no_ipv6 = !std::path::Path::new("/proc/sys/net/ipv6").exists();
    if !quiet && !no_ipv6 {
        return Err("could not turn IPv6 off in the test namespace".into());
    }
    ip("link set lo up");
    Ok(())
}

/// Runs `ip ARGS` (split at spaces); panics with its error output if it fails.
pub fn ip(args: &str) {
    let out = Command::new("ip")
        .args(args.split_whitespace())
        .output()
        .expect("running ip");
    assert!(
        out.status.success(),
        "ip {args}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// The output of `ip ARGS`.
pub fn ip_out(args: &str) -> String {
    let out = Command::new("ip")
        .args(args.split_whitespace())
        .output()
        .expect("running ip");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Removes `cap` (e.g. 13, CAP_NET_RAW) from the calling thread's effective capabilities.
/// Capabilities belong to threads, so the rest of the process keeps it.
pub fn drop_capability(cap: u32) {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut h = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget reads the header and writes two data records (version 3), both live here.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut h as *mut Header, d.as_mut_ptr()) };
    assert_eq!(r, 0, "capget: {}", io::Error::last_os_error());
    d[(cap / 32) as usize].effective &= !(1 << (cap % 32));
    // SAFETY: as above; capset only reads both.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut h as *mut Header, d.as_ptr()) };
    assert_eq!(r, 0, "capset: {}", io::Error::last_os_error());
}

/// The kernel's (rx_dropped, tx_dropped) counters of `dev`, from `ip -s link`: frames lost
/// before any packet socket saw them (a full backlog queue, for one).
pub fn dev_drops(dev: &str) -> (u64, u64) {
    let out = ip_out(&format!("-s link show dev {dev}"));
    let mut lines = out.lines();
    let mut field = |tag: &str| -> u64 {
        lines.find(|l| l.trim_start().starts_with(tag));
        let nums: Vec<u64> = lines
            .next()
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        nums.get(3).copied().unwrap_or(0) // bytes packets errors dropped ...
    };
    let rx = field("RX:");
    let tx = field("TX:");
    (rx, tx)
}

/// A veth pair `a`–`b` with two queues each way (single-queue veths collapse under two
/// senders), both ends up.
pub fn veth(a: &str, b: &str) {
    ip(&format!(
        "link add {a} numtxqueues 2 numrxqueues 2 type veth peer name {b} numtxqueues 2 numrxqueues 2"
    ));
    ip(&format!("link set {a} up"));
    ip(&format!("link set {b} up"));
}

/// A plain packet socket bound to one device, to send test frames through the kernel's normal
/// transmit path (independent of the port driver under test).
pub struct RawSock(OwnedFd);

impl RawSock {
    pub fn open(dev: &str) -> RawSock {
        let c = std::ffi::CString::new(dev).unwrap();
        // SAFETY: `c` is a valid C string for the duration of the call.
        let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) };
        assert!(ifindex != 0, "{dev}: {}", io::Error::last_os_error());
        // SAFETY: socket() takes no pointers; the result is checked and then owned.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0, "packet socket: {}", io::Error::last_os_error());
        // SAFETY: fd is new and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_ifindex = ifindex as i32;
        // SAFETY: pointer and length describe `sa`.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert!(r == 0, "bind {dev}: {}", io::Error::last_os_error());
        RawSock(fd)
    }

    pub fn send(&self, frame: &[u8]) {
        // SAFETY: `frame` is a live slice; send() reads `frame.len()` bytes of it.
        let r = unsafe { libc::send(self.0.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert!(
            r == frame.len() as isize,
            "send {} bytes: {}",
            frame.len(),
            io::Error::last_os_error()
        );
    }
}

pub const MAGIC: &[u8; 4] = b"LRAF";
const ETH: usize = 14;
const PAYLOAD: usize = ETH + 20 + 8;

/// An Ethernet/IPv4/UDP frame of `len` bytes (at least 60) for `flow` (its source address and
/// port), carrying the magic, the flow and `seq` at the start of the UDP payload and a pattern
/// after.
pub fn udp_frame(flow: u32, seq: u32, len: usize) -> Vec<u8> {
    assert!(len >= PAYLOAD + 12);
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[ETH..ETH + 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((len - ETH) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, (flow >> 8) as u8, flow as u8]);
    ip[16..20].copy_from_slice(&[10, 1, 0, 1]);
    let mut sum = 0u32;
    for i in (0..20).step_by(2) {
        sum += u16::from_be_bytes([ip[i], ip[i + 1]]) as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    let udp = &mut f[ETH + 20..PAYLOAD];
    udp[0..2].copy_from_slice(&(1000 + flow as u16).to_be_bytes());
    udp[2..4].copy_from_slice(&2000u16.to_be_bytes());
    udp[4..6].copy_from_slice(&((len - ETH - 20) as u16).to_be_bytes());
    f[PAYLOAD..PAYLOAD + 4].copy_from_slice(MAGIC);
    f[PAYLOAD + 4..PAYLOAD + 8].copy_from_slice(&flow.to_be_bytes());
    f[PAYLOAD + 8..PAYLOAD + 12].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[PAYLOAD + 12..].iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(31).wrapping_add(seq) as u8;
    }
    f
}

/// The (flow, seq) of a test frame made by [`udp_frame`], None for any other frame.
pub fn flow_seq(f: &[u8]) -> Option<(u32, u32)> {
    if f.len() < PAYLOAD + 12 || &f[PAYLOAD..PAYLOAD + 4] != MAGIC {
        return None;
    }
    let flow = u32::from_be_bytes(f[PAYLOAD + 4..PAYLOAD + 8].try_into().unwrap());
    let seq = u32::from_be_bytes(f[PAYLOAD + 8..PAYLOAD + 12].try_into().unwrap());
    Some((flow, seq))
}
