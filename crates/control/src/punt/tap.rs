//! TAP twins: one kernel TAP device per router interface, with the interface's MAC address, MTU
//! and addresses, so the kernel (and FRR on it) sees the router's interfaces as its own. Frames
//! the router punts are written to the twin; frames the kernel sends on it are read here and
//! injected out of the router's port.
//!
//! The set-up is a handful of ioctls (TUNSETIFF, SIOCSIFHWADDR, SIOCSIFMTU, SIOCSIFFLAGS) and
//! one rtnetlink request per address (RTM_NEWADDR), encoded here: three fixed structures, not
//! worth a netlink stack, and the data plane's link monitor decodes rtnetlink the same way.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TAP: u16 = 0x0002;
const IFF_NO_PI: u16 = 0x1000;

pub struct Tap {
    pub name: String,
    pub ifindex: u32,
    fd: OwnedFd,
}

/// A 40-byte `struct ifreq` with `name` set; the union starts at byte 16.
fn ifreq(name: &str) -> io::Result<[u8; 40]> {
    if name.is_empty() || name.len() > 15 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{name}`: interface names have 1-15 characters"),
        ));
    }
    let mut r = [0u8; 40];
    r[..name.len()].copy_from_slice(name.as_bytes());
    Ok(r)
}

fn ioctl(fd: i32, req: libc::c_ulong, r: &mut [u8; 40]) -> io::Result<()> {
    // SAFETY: every request used here reads or writes at most a `struct ifreq` (40 bytes on
    // 64-bit Linux), and `r` is a live, writable buffer of exactly that size.
    let rc = unsafe { libc::ioctl(fd, req as _, r.as_mut_ptr()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn socket(domain: i32, ty: i32, proto: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor it returns is owned by nobody else.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is not owned elsewhere.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What a twin shows the kernel: its name there, MAC address, MTU, admin state and addresses
/// (those of the interface it stands for).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TwinSpec {
    pub host: String,
    pub mac: [u8; 6],
    pub mtu: u16,
    pub up: bool,
    pub v4: Vec<(u32, u8)>,
    pub v6: Vec<(u128, u8)>,
}

impl TwinSpec {
    /// The twin of a configured interface.
    pub fn of(ic: &crate::config::InterfaceCfg) -> TwinSpec {
        TwinSpec {
            host: ic.host_name.clone(),
            mac: ic.mac.0,
            mtu: ic.mtu,
            up: ic.up,
            v4: ic.ipv4.clone(),
            v6: ic.ipv6.clone(),
        }
    }
}

impl Tap {
    /// Creates (or attaches to) TAP device `spec.host` and gives it the spec's MAC address, MTU,
    /// admin state and addresses. The descriptor is non-blocking; closing it removes the device.
    pub fn create(spec: &TwinSpec) -> io::Result<Tap> {
        let name = spec.host.as_str();
        let ctx =
            |e: io::Error, what: &str| io::Error::new(e.kind(), format!("TAP {name}: {what}: {e}"));
        let path = c"/dev/net/tun";
        // SAFETY: a NUL-terminated path literal; open(2) returns a new descriptor or -1.
        let raw = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(ctx(io::Error::last_os_error(), "open /dev/net/tun"));
        }
        // SAFETY: `raw` was just returned by open(2) and is not owned elsewhere.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut r = ifreq(name)?;
        r[16..18].copy_from_slice(&(IFF_TAP | IFF_NO_PI).to_ne_bytes());
        ioctl(fd.as_raw_fd(), TUNSETIFF, &mut r).map_err(|e| ctx(e, "TUNSETIFF"))?;
        let ifindex = if_index(name).map_err(|e| ctx(e, "get index"))?;
        let tap = Tap {
            name: name.to_string(),
            ifindex,
            fd,
        };
        let blank = TwinSpec {
            host: name.to_string(),
            mac: [0; 6],
            mtu: 0,
            up: false,
            v4: Vec::new(),
            v6: Vec::new(),
        };
        change(ifindex, &blank, spec)?;
        Ok(tap)
    }

    /// The twin another router process made, from its descriptor (passed over a Unix socket
    /// in a hitless restart): the device, its addresses and FRR's view of it stay as they were.
    pub fn adopt(name: &str, fd: OwnedFd) -> io::Result<Tap> {
        let ifindex = if_index(name)
            .map_err(|e| io::Error::new(e.kind(), format!("TAP {name}: get index: {e}")))?;
        Ok(Tap {
            name: name.to_string(),
            ifindex,
            fd,
        })
    }

    /// The descriptor, to pass to the process that takes over.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }

    /// Reads one frame into `buf`; None when there is none waiting.
    pub fn read(&self, buf: &mut [u8]) -> Option<usize> {
        // SAFETY: `buf` is a live writable slice of the given length.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        (n > 0).then_some(n as usize)
    }

    /// Writes one frame; false if the kernel would not take it now (its queue is full).
    pub fn write(&self, frame: &[u8]) -> bool {
        // SAFETY: `frame` is a live readable slice of the given length.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len()) };
        n == frame.len() as isize
    }

    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }
}

/// Makes twin `ifindex` (shown as `old`) look as `new` says, touching only what differs, as a
/// box's own interface changes: MAC and MTU in place (a TAP takes a new MAC while up), admin
/// state, then addresses removed before the new ones are added. The host name is not changed
/// here: a twin under another name is another device.
pub fn change(ifindex: u32, old: &TwinSpec, new: &TwinSpec) -> io::Result<()> {
    let name = new.host.as_str();
    let ctx =
        |e: io::Error, what: &str| io::Error::new(e.kind(), format!("TAP {name}: {what}: {e}"));
    let s = socket(libc::AF_INET, libc::SOCK_DGRAM, 0).map_err(|e| ctx(e, "socket"))?;
    if old.mac != new.mac {
        let mut r = ifreq(name)?;
        r[16..18].copy_from_slice(&1u16.to_ne_bytes()); // ARPHRD_ETHER
        r[18..24].copy_from_slice(&new.mac);
        ioctl(s.as_raw_fd(), libc::SIOCSIFHWADDR, &mut r).map_err(|e| ctx(e, "set MAC"))?;
    }
    if old.mtu != new.mtu {
        let mut r = ifreq(name)?;
        r[16..20].copy_from_slice(&(new.mtu as i32).to_ne_bytes());
        ioctl(s.as_raw_fd(), libc::SIOCSIFMTU, &mut r).map_err(|e| ctx(e, "set MTU"))?;
    }
    if old.up != new.up {
        let mut r = ifreq(name)?;
        ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS, &mut r).map_err(|e| ctx(e, "get flags"))?;
        let mut flags = i16::from_ne_bytes([r[16], r[17]]);
        if new.up {
            flags |= libc::IFF_UP as i16;
        } else {
            flags &= !(libc::IFF_UP as i16);
        }
        r[16..18].copy_from_slice(&flags.to_ne_bytes());
        ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS, &mut r)
            .map_err(|e| ctx(e, if new.up { "set up" } else { "set down" }))?;
    }
    let nl = socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE)
        .map_err(|e| ctx(e, "netlink socket"))?;
    let (was, now) = (spec_addresses(old), spec_addresses(new));
    for (family, bytes, len, shown) in was.iter().filter(|a| !now.contains(a)) {
        address(&nl, Op::Del, ifindex, *family, bytes, *len)
            .map_err(|e| ctx(e, &format!("remove {shown}")))?;
    }
    for (family, bytes, len, shown) in now.iter().filter(|a| !was.contains(a)) {
        address(&nl, Op::Add, ifindex, *family, bytes, *len)
            .map_err(|e| ctx(e, &format!("add {shown}")))?;
    }
    Ok(())
}

/// A twin's addresses as rtnetlink takes them (family, address, prefix length) and as a person
/// reads them.
fn spec_addresses(s: &TwinSpec) -> Vec<(u8, Vec<u8>, u8, String)> {
    let v4 = s.v4.iter().map(|&(a, l)| {
        let shown = format!("{}/{l}", std::net::Ipv4Addr::from(a));
        (libc::AF_INET as u8, a.to_be_bytes().to_vec(), l, shown)
    });
    let v6 = s.v6.iter().map(|&(a, l)| {
        let shown = format!("{}/{l}", std::net::Ipv6Addr::from(a));
        (libc::AF_INET6 as u8, a.to_be_bytes().to_vec(), l, shown)
    });
    v4.chain(v6).collect()
}

/// The kernel's index of device `name`.
pub fn if_index(name: &str) -> io::Result<u32> {
    let s = socket(libc::AF_INET, libc::SOCK_DGRAM, 0)?;
    let mut r = ifreq(name)?;
    ioctl(s.as_raw_fd(), libc::SIOCGIFINDEX, &mut r)?;
    Ok(i32::from_ne_bytes([r[16], r[17], r[18], r[19]]) as u32)
}

/// Takes a kernel device over for a router port: the kernel stops answering ARP on it (NOARP)
/// and stops speaking IPv6 on it (no link-local address, no ND, no MLD), so only the router
/// answers for its addresses on that wire. The device stays up for the port's sockets.
pub fn claim_device(dev: &str) -> io::Result<()> {
    let s = socket(libc::AF_INET, libc::SOCK_DGRAM, 0)?;
    let mut r = ifreq(dev)?;
    ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS, &mut r)?;
    let flags = i16::from_ne_bytes([r[16], r[17]]) | libc::IFF_NOARP as i16 | libc::IFF_UP as i16;
    r[16..18].copy_from_slice(&flags.to_ne_bytes());
    ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS, &mut r)?;
    let path = format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6");
    match std::fs::write(&path, "1") {
        // A kernel without IPv6 has nothing to disable.
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// What an address request does.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    Del,
}

/// RTM_NEWADDR (or RTM_DELADDR) for `addr/len` on `ifindex`, waiting for the kernel's
/// acknowledgement. Adding an address that is already there, or removing one that is not, is
/// fine. IPv6 addresses skip duplicate address detection: the router owns them, and DAD would
/// keep them tentative (unusable to FRR) for a second.
fn address(nl: &OwnedFd, op: Op, ifindex: u32, family: u8, addr: &[u8], len: u8) -> io::Result<()> {
    const RTM_NEWADDR: u16 = 20;
    const RTM_DELADDR: u16 = 21;
    const IFA_ADDRESS: u16 = 1;
    const IFA_LOCAL: u16 = 2;
    const IFA_F_NODAD: u8 = 0x02;
    let attr = |ty: u16, data: &[u8], m: &mut Vec<u8>| {
        m.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(data);
        while !m.len().is_multiple_of(4) {
            m.push(0);
        }
    };
    let mut m = vec![0u8; 16];
    let flags = if family == libc::AF_INET6 as u8 {
        IFA_F_NODAD
    } else {
        0
    };
    m.extend_from_slice(&[family, len, flags, 0]);
    m.extend_from_slice(&ifindex.to_ne_bytes());
    attr(IFA_LOCAL, addr, &mut m);
    attr(IFA_ADDRESS, addr, &mut m);
    let total = m.len() as u32;
    m[0..4].copy_from_slice(&total.to_ne_bytes());
    let (ty, nlflags) = match op {
        Op::Add => (
            RTM_NEWADDR,
            libc::NLM_F_REQUEST | libc::NLM_F_ACK | libc::NLM_F_CREATE | libc::NLM_F_REPLACE,
        ),
        Op::Del => (RTM_DELADDR, libc::NLM_F_REQUEST | libc::NLM_F_ACK),
    };
    m[4..6].copy_from_slice(&ty.to_ne_bytes());
    let nlflags = nlflags as u16;
    m[6..8].copy_from_slice(&nlflags.to_ne_bytes());
    m[8..12].copy_from_slice(&1u32.to_ne_bytes());
    // SAFETY: `m` is a live readable buffer; a netlink socket with no address sends to the
    // kernel.
    let n = unsafe { libc::send(nl.as_raw_fd(), m.as_ptr().cast(), m.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut ack = [0u8; 256];
    // SAFETY: `ack` is a live writable buffer of the given length.
    let n = unsafe { libc::recv(nl.as_raw_fd(), ack.as_mut_ptr().cast(), ack.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    address_ack(&ack[..n as usize], op)
}

/// The kernel's answer to an address request: NLMSG_ERROR (2) carries the errno, negated; 0 is
/// the acknowledgement, an address added that is already there (EEXIST) is fine, and so is one
/// removed that was not (EADDRNOTAVAIL).
pub(crate) fn address_ack(ack: &[u8], op: Op) -> io::Result<()> {
    if ack.len() >= 20 && u16::from_ne_bytes([ack[4], ack[5]]) == 2 {
        let err = i32::from_ne_bytes([ack[16], ack[17], ack[18], ack[19]]).wrapping_neg();
        let fine = match op {
            Op::Add => err == libc::EEXIST,
            Op::Del => err == libc::EADDRNOTAVAIL,
        };
        if err != 0 && !fine {
            return Err(io::Error::from_raw_os_error(err));
        }
    }
    Ok(())
}
