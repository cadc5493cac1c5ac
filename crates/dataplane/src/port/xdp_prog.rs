//! The XDP half of the AF_XDP driver: an XSKMAP with one slot per queue, a five-instruction program
//! that redirects each frame to the socket in its queue's slot, and its attachment to the device.
//!
//! Everything goes through the raw `bpf(2)` syscall and rtnetlink, so building Linerate needs no C
//! toolchain, no clang and no libbpf: the program is small enough to assemble by hand, and the
//! kernel's verifier checks it at load time like any other.
//!
//! The program, in eBPF assembly:
//!
//! ```text
//! r2 = *(u32 *)(r1 + 16)   ; ctx->rx_queue_index
//! r1 = map[xskmap] ll      ; ld_imm64 with BPF_PSEUDO_MAP_FD: the loader puts the map's fd here
//! r3 = 2                   ; XDP_PASS: the verdict when the queue's slot holds no socket
//! call bpf_redirect_map    ; r0 = XDP_REDIRECT, or XDP_PASS if the slot is empty
//! exit
//! ```
//!
//! Frames on queues without a socket therefore go up the kernel stack as if no program were there.
//!
//! Attachment prefers a BPF link (`BPF_LINK_CREATE`): the kernel detaches a link's program when the
//! link's last fd closes, even if the process dies, and a link never replaces a program someone
//! else attached. Kernels that refuse XDP links get the older netlink `IFLA_XDP` path, with
//! `XDP_FLAGS_UPDATE_IF_NOEXIST` so it does not replace another program either, and an explicit
//! detach (only if the attached program is still ours) on drop.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::{AttachApi, XdpMode};

// bpf(2) commands, map and program types, attach types (include/uapi/linux/bpf.h).
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_ANY: u64 = 0;
const XDP_PASS: i32 = 2;

// XDP attach flags (include/uapi/linux/if_link.h).
const XDP_FLAGS_UPDATE_IF_NOEXIST: u32 = 1 << 0;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const XDP_FLAGS_REPLACE: u32 = 1 << 4;

// rtnetlink (include/uapi/linux/netlink.h, rtnetlink.h, if_link.h).
const RTM_SETLINK: u16 = 19;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_CAPPED: u16 = 0x100;
const NLM_F_ACK_TLVS: u16 = 0x200;
const NLMSG_ERROR: u16 = 2;
const NLMSGERR_ATTR_MSG: u16 = 1;
const NETLINK_EXT_ACK: libc::c_int = 11;
const NLA_F_NESTED: u16 = 1 << 15;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_EXPECTED_FD: u16 = 8;

/// One eBPF instruction (`struct bpf_insn`): `regs` holds dst in the low nibble, src in the high.
#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0x0f),
        off,
        imm,
    }
}

/// The redirect program for an XSKMAP whose fd is `map_fd`.
fn program(map_fd: RawFd) -> [Insn; 6] {
    // Opcodes: LDX|MEM|W = 0x61, LD|IMM|DW = 0x18, ALU64|MOV|K = 0xb7, JMP|CALL = 0x85,
    // JMP|EXIT = 0x95.
    [
        insn(0x61, 2, 1, 16, 0),
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        insn(0x00, 0, 0, 0, 0), // second half of ld_imm64: the upper 32 bits, zero
        insn(0xb7, 3, 0, 0, XDP_PASS),
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        insn(0x95, 0, 0, 0, 0),
    ]
}

// The parts of `union bpf_attr` each command reads. The kernel zero-fills what a shorter attr
// leaves out, so each struct stops at its last used field.

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct MapUpdateAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// Issues `bpf(cmd, attr)`; a non-negative result is a new fd for the commands that create one.
///
/// # Safety
/// Every pointer stored (as a u64) in `attr` must be valid for what `cmd` does with it (read or
/// written, for the length `attr` gives) for the duration of the call.
unsafe fn sys_bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live repr(C) value of the size we pass; the caller vouches for the
    // pointers inside it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn owned_fd(r: libc::c_long) -> OwnedFd {
    // SAFETY: `r` is a fd the kernel just created for us and nothing else owns.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}

fn name16(s: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    let b = s.as_bytes();
    n[..b.len().min(15)].copy_from_slice(&b[..b.len().min(15)]);
    n
}

/// How the program ended up attached.
enum Attachment {
    None,
    /// A BPF link: closing the fd (dropping this) detaches.
    Link {
        _fd: OwnedFd,
    },
    /// Netlink: detached by an explicit request on the same rtnetlink socket (so in the same
    /// network namespace as the attach, whatever thread drops it).
    Netlink {
        sock: OwnedFd,
        flags: u32,
    },
}

/// The XSKMAP and the loaded program, attached to one device until dropped.
pub(super) struct XdpProgram {
    dev: String,
    ifindex: u32,
    attachment: Attachment,
    prog: OwnedFd,
    map: OwnedFd,
}

impl XdpProgram {
    /// Creates the XSKMAP (`slots` entries) and loads the program; nothing is attached yet.
    pub(super) fn load(dev: &str, ifindex: u32, slots: u32) -> Result<XdpProgram, String> {
        let mut m = MapCreateAttr {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: slots,
            map_name: name16("lr_xsks"),
            ..Default::default()
        };
        // SAFETY: the map-create attr holds no pointers.
        let map = unsafe { sys_bpf(BPF_MAP_CREATE, &mut m) }
            .map(owned_fd)
            .map_err(|e| format!("af_xdp {dev}: creating the XSKMAP ({slots} slots): {e}"))?;

        let prog = load_xdp(dev, &program(map.as_raw_fd()))?;
        Ok(XdpProgram {
            dev: dev.to_string(),
            ifindex,
            attachment: Attachment::None,
            prog,
            map,
        })
    }

    /// Puts the AF_XDP socket `xsk` in slot `queue`, so frames received on that queue go to it.
    pub(super) fn insert(&self, queue: u32, xsk: RawFd) -> Result<(), String> {
        let key = queue;
        let value = xsk as u32;
        let mut a = MapUpdateAttr {
            map_fd: self.map.as_raw_fd() as u32,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            flags: BPF_ANY,
            ..Default::default()
        };
        // SAFETY: key and value are live u32s, the map's key and value size.
        unsafe { sys_bpf(BPF_MAP_UPDATE_ELEM, &mut a) }.map_err(|e| {
            format!(
                "af_xdp {}: inserting the queue {queue} socket into the XSKMAP: {e}",
                self.dev
            )
        })?;
        Ok(())
    }

    /// Attaches the program to the device. Returns the mode and the API that worked.
    pub(super) fn attach(
        &mut self,
        mode: XdpMode,
        api: AttachApi,
    ) -> Result<(XdpMode, AttachApi), String> {
        let modes = match mode {
            XdpMode::Auto => vec![XdpMode::Native, XdpMode::Generic],
            m => vec![m],
        };
        let mut errors = Vec::new();
        for m in modes {
            let flags = match m {
                XdpMode::Native => XDP_FLAGS_DRV_MODE,
                _ => XDP_FLAGS_SKB_MODE,
            };
            let mname = mode_name(m);
            if api != AttachApi::Netlink {
                match self.link_create(flags) {
                    Ok(link) => {
                        self.attachment = Attachment::Link { _fd: link };
                        return Ok((m, AttachApi::Link));
                    }
                    Err(e) => {
                        errors.push(format!("BPF link in {mname} mode: {e}"));
                        // A kernel without XDP links says EINVAL (unknown attach type) or
                        // EOPNOTSUPP; anything else (EBUSY: a program is there; the device
                        // refusing the mode) would fail over netlink the same way.
                        let no_links = matches!(
                            e.raw_os_error(),
                            Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) | Some(524) // ENOTSUPP
                        );
                        if api == AttachApi::Link || !no_links {
                            continue;
                        }
                    }
                }
            }
            match self.netlink_attach(flags) {
                Ok(sock) => {
                    self.attachment = Attachment::Netlink { sock, flags };
                    return Ok((m, AttachApi::Netlink));
                }
                Err(e) => errors.push(format!("netlink IFLA_XDP in {mname} mode: {e}")),
            }
        }
        Err(format!(
            "af_xdp {}: attaching the XDP program: {}",
            self.dev,
            errors.join("; ")
        ))
    }

    fn link_create(&self, flags: u32) -> io::Result<OwnedFd> {
        let mut a = LinkCreateAttr {
            prog_fd: self.prog.as_raw_fd() as u32,
            target_ifindex: self.ifindex,
            attach_type: BPF_XDP,
            flags,
        };
        // SAFETY: the link-create attr holds no pointers.
        unsafe { sys_bpf(BPF_LINK_CREATE, &mut a) }.map(owned_fd)
    }

    fn netlink_attach(&self, mode_flags: u32) -> Result<OwnedFd, String> {
        let sock = rtnetlink_socket().map_err(|e| format!("opening rtnetlink: {e}"))?;
        let attrs = [
            (IFLA_XDP_FD, self.prog.as_raw_fd()),
            (
                IFLA_XDP_FLAGS,
                (mode_flags | XDP_FLAGS_UPDATE_IF_NOEXIST) as i32,
            ),
        ];
        set_link_xdp(&sock, self.ifindex, &attrs)?;
        Ok(sock)
    }
}

/// Loads `insns` as an XDP program. On failure, loads it again with the verifier's log on and
/// returns the log in the error, since the errno alone (EACCES, EINVAL) does not say what is wrong.
fn load_xdp(dev: &str, insns: &[Insn]) -> Result<OwnedFd, String> {
    let license = c"GPL";
    let load = |log: Option<&mut Vec<u8>>| {
        let mut a = ProgLoadAttr {
            prog_type: BPF_PROG_TYPE_XDP,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            prog_name: name16("lr_xsk_redirect"),
            expected_attach_type: BPF_XDP,
            ..Default::default()
        };
        if let Some(buf) = log {
            a.log_level = 1;
            a.log_size = buf.len() as u32;
            a.log_buf = buf.as_mut_ptr() as u64;
        }
        // SAFETY: `insns` (insn_cnt entries) and `license` (NUL-terminated) outlive the call;
        // the log buffer, when given, is log_size writable bytes.
        unsafe { sys_bpf(BPF_PROG_LOAD, &mut a) }.map(owned_fd)
    };
    let e = match load(None) {
        Ok(fd) => return Ok(fd),
        Err(e) => e,
    };
    let mut log = vec![0u8; 64 * 1024];
    let again = load(Some(&mut log));
    let end = log.iter().position(|&c| c == 0).unwrap_or(log.len());
    let text = String::from_utf8_lossy(&log[..end]);
    Err(match again {
        Ok(_) => format!(
            "af_xdp {dev}: loading the XDP program: {e} (it loaded on a second try with the \
             verifier log on)"
        ),
        Err(_) => format!(
            "af_xdp {dev}: loading the XDP program: {e}; verifier log:\n{}",
            text.trim_end()
        ),
    })
}

fn mode_name(m: XdpMode) -> &'static str {
    match m {
        XdpMode::Native => "native (drv)",
        XdpMode::Generic => "generic (skb)",
        XdpMode::Auto => "auto",
    }
}

impl Drop for XdpProgram {
    fn drop(&mut self) {
        if let Attachment::Netlink { sock, flags } = &self.attachment {
            // Detach only if the device still runs our program (XDP_FLAGS_REPLACE with the
            // expected fd), so a program someone attached since is left alone.
            let attrs = [
                (IFLA_XDP_FD, -1),
                (IFLA_XDP_FLAGS, (*flags | XDP_FLAGS_REPLACE) as i32),
                (IFLA_XDP_EXPECTED_FD, self.prog.as_raw_fd()),
            ];
            if let Err(e) = set_link_xdp(sock, self.ifindex, &attrs) {
                eprintln!("af_xdp {}: detaching the XDP program: {e}", self.dev);
            }
        }
        // A link detaches when its fd closes, which dropping the fields does (attachment first,
        // then the program, then the map).
    }
}

fn rtnetlink_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh socket nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    // Extended acks carry the kernel's reason in words (e.g. "native and generic XDP can't be
    // active at the same time"); a kernel without them just ignores the option's absence.
    // SAFETY: `one` is a live c_int and we pass its size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_NETLINK,
            NETLINK_EXT_ACK,
            &one as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    Ok(sock)
}

/// Sends RTM_SETLINK for `ifindex` with a nested IFLA_XDP holding `attrs` (each a 4-byte value)
/// and waits for the kernel's ack.
fn set_link_xdp(sock: &OwnedFd, ifindex: u32, attrs: &[(u16, i32)]) -> Result<(), String> {
    let mut msg = Vec::with_capacity(64);
    // nlmsghdr: len (patched below), type, flags, seq, pid.
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(&RTM_SETLINK.to_ne_bytes());
    msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    // ifinfomsg: family, pad, type, index, flags, change.
    msg.extend_from_slice(&[libc::AF_UNSPEC as u8, 0]);
    msg.extend_from_slice(&0u16.to_ne_bytes());
    msg.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    let nest_len = 4 + 8 * attrs.len();
    msg.extend_from_slice(&(nest_len as u16).to_ne_bytes());
    msg.extend_from_slice(&(IFLA_XDP | NLA_F_NESTED).to_ne_bytes());
    for &(ty, v) in attrs {
        msg.extend_from_slice(&8u16.to_ne_bytes());
        msg.extend_from_slice(&ty.to_ne_bytes());
        msg.extend_from_slice(&v.to_ne_bytes());
    }
    let len = msg.len() as u32;
    msg[..4].copy_from_slice(&len.to_ne_bytes());

    // SAFETY: `msg` is a live buffer of msg.len() bytes; a null address sends to the kernel
    // (the socket is unconnected and netlink accepts a null destination as pid 0).
    let r = unsafe {
        libc::send(
            sock.as_raw_fd(),
            msg.as_ptr() as *const libc::c_void,
            msg.len(),
            0,
        )
    };
    if r < 0 {
        return Err(format!(
            "sending RTM_SETLINK: {}",
            io::Error::last_os_error()
        ));
    }
    let mut buf = vec![0u8; 8192];
    loop {
        // SAFETY: `buf` is a live writable buffer of buf.len() bytes.
        let n = unsafe {
            libc::recv(
                sock.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                0,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("reading the RTM_SETLINK ack: {e}"));
        }
        return parse_ack(&buf[..n as usize]);
    }
}

/// Reads the NLMSG_ERROR answer: Ok for an ack, else the errno and the kernel's message.
pub(crate) fn parse_ack(b: &[u8]) -> Result<(), String> {
    let u16_at = |o: usize| u16::from_ne_bytes([b[o], b[o + 1]]);
    let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
    if b.len() < 20 || u16_at(4) != NLMSG_ERROR {
        return Err("unexpected answer to RTM_SETLINK".into());
    }
    let flags = u16_at(6);
    let err = u32_at(16) as i32;
    if err == 0 {
        return Ok(());
    }
    // Negated errno; a value no kernel sends (i32::MIN) must not overflow.
    let mut text = io::Error::from_raw_os_error(err.wrapping_neg()).to_string();
    if flags & NLM_F_ACK_TLVS != 0 && b.len() >= 36 {
        // After the error code comes the request's header (and its body unless capped), then
        // the extended-ack attributes.
        let orig_len = u32_at(20) as usize;
        let mut off = 20
            + if flags & NLM_F_CAPPED != 0 {
                16
            } else {
                orig_len
            };
        off = (off + 3) & !3;
        while off + 4 <= b.len() {
            let alen = u16_at(off) as usize;
            let aty = u16_at(off + 2);
            if alen < 4 || off + alen > b.len() {
                break;
            }
            if aty == NLMSGERR_ATTR_MSG {
                let s = &b[off + 4..off + alen];
                let s = s.split(|&c| c == 0).next().unwrap_or(s);
                text = format!("{text} ({})", String::from_utf8_lossy(s));
            }
            off += (alen + 3) & !3;
        }
    }
    Err(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_encodes_as_the_kernel_expects() {
        let p = program(7);
        // SAFETY: Insn is repr(C) plain data, 8 bytes, and the array is live.
        let bytes: &[u8] =
            unsafe { std::slice::from_raw_parts(p.as_ptr() as *const u8, p.len() * 8) };
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        assert_eq!(&bytes[0..8], &[0x61, 0x12, 16, 0, 0, 0, 0, 0]);
        assert_eq!(&bytes[8..16], &[0x18, 0x11, 0, 0, 7, 0, 0, 0]);
        assert_eq!(&bytes[16..24], &[0; 8]);
        assert_eq!(&bytes[24..32], &[0xb7, 0x03, 0, 0, 2, 0, 0, 0]);
        assert_eq!(&bytes[32..40], &[0x85, 0, 0, 0, 51, 0, 0, 0]);
        assert_eq!(&bytes[40..48], &[0x95, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn attr_layouts_match_the_uapi() {
        assert_eq!(std::mem::size_of::<MapCreateAttr>(), 44);
        assert_eq!(std::mem::size_of::<MapUpdateAttr>(), 32);
        assert_eq!(std::mem::size_of::<ProgLoadAttr>(), 72);
        assert_eq!(std::mem::size_of::<LinkCreateAttr>(), 16);
    }

    #[test]
    fn a_rejected_program_reports_the_verifier_log() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: loading BPF programs needs root");
            return;
        }
        // r0 = *(u32 *)(r1 + 200): past the end of struct xdp_md.
        let bad = [insn(0x61, 0, 1, 200, 0), insn(0x95, 0, 0, 0, 0)];
        let e = load_xdp("lo", &bad).unwrap_err();
        assert!(e.contains("af_xdp lo: loading the XDP program"), "{e}");
        assert!(e.contains("verifier log") && e.contains("off=200"), "{e}");
        assert!(load_xdp(
            "lo",
            &[insn(0xb7, 0, 0, 0, XDP_PASS), insn(0x95, 0, 0, 0, 0)]
        )
        .is_ok());
    }

    #[test]
    fn netlink_errors_carry_the_kernel_message() {
        let mut b = Vec::new();
        b.extend_from_slice(&56u32.to_ne_bytes());
        b.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        b.extend_from_slice(&(NLM_F_CAPPED | NLM_F_ACK_TLVS).to_ne_bytes());
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&(-libc::EBUSY).to_ne_bytes());
        b.extend_from_slice(&[0; 16]); // the capped request header
        let msg = b"XDP program already attached\0";
        b.extend_from_slice(&((4 + msg.len()) as u16).to_ne_bytes());
        b.extend_from_slice(&NLMSGERR_ATTR_MSG.to_ne_bytes());
        b.extend_from_slice(msg);
        let e = parse_ack(&b).unwrap_err();
        assert!(e.contains("busy") && e.contains("already attached"), "{e}");
    }
}
