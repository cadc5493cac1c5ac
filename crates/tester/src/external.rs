//! External mode: the tester on real Linux interfaces, so `linerate bench external` can test any
//! device cabled to them: the kernel's forwarding in a namespace, a Linerate daemon, a box on a
//! NIC.
//!
//! The device is described in the router config format, as the tester sees it (`DUT.yaml`): its
//! ports, its interfaces' MACs and addresses, and under `neighbors` the addresses the tester
//! emulates on each link with the MAC it uses there. `--port P=DEV` puts the device's port `P`
//! on the tester's Linux device `DEV`; streams come from a pattern or a streams file as in
//! `bench run`. An interface may leave `mac` out: the tester then asks the device (ARP, or ND
//! for an IPv6-only interface) before the first trial.
//!
//! Each port is an AF_PACKET socket pair ([`AfPacketPort`]: the same queue traits the engine
//! uses for `mem` ports), so the engine, procedures and reports are the embedded mode's. What
//! differs:
//!
//! - A real device resolves its next hops: [`Responder`] sits on each receive queue, answers
//!   ARP requests and neighbour solicitations for the emulated addresses, learns the device's
//!   MAC from what it sends, and takes ARP and ND/MLD frames out of the stream of received frames
//!   so they are neither foreign frames nor loss.
//! - Before the procedures, a few short trials at a low rate *prime* the device: the first
//!   frames of a device that has not resolved us yet wait for (or die in) its resolution, which
//!   is not what a throughput search should measure.
//! - There is no [`DutProbe`](crate::engine::DutProbe): the device's drops are unknown, so loss is
//!   frames sent minus frames received, and the report says so.
//! - [`ExternalMeter`] reads the CPU each trial cost (see [`crate::cpu`]), and the tester's own
//!   receive drops (a full packet-socket ring is the tester's fault, not the device's).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use control::config::{Config, ConfigError, ConfigErrors};
use control::yaml::{self, Value};
use dataplane::port::af_packet::{AfPacketConfig, AfPacketPort, FanoutMode, RxRing};
use dataplane::port::shm::{ShmPort, ShmTx};
use dataplane::port::{RxQueue, TxQueue};
use dataplane::{BufCache, PktBuf, Pool};
use packet::ethernet::MacAddr;
use packet::{arp, nd};
use serde::Serialize;

use crate::cpu::{CpuSample, CpuUsage};
use crate::engine::{TesterPort, TrialMeter, TrialResult, TrialSpec};
use crate::load::{line_rate_fps, FrameSizes};
use crate::stream::StreamSpec;
use crate::streams_file::{self, PortInfo};
use crate::Tester;

/// Stands in for a MAC that DUT.yaml left out while the config is checked; the interface is then
/// resolved and this never reaches a frame.
const PLACEHOLDER_MAC: &str = "02:00:00:00:00:00";

/// The device under test as DUT.yaml describes it.
#[derive(Debug)]
pub struct Dut {
    pub cfg: Config,
    /// Interfaces whose MAC the file left out: the tester resolves them.
    pub resolve: Vec<String>,
}

/// Reads DUT.yaml (the router config format). An interface without `mac` is accepted and marked
/// for resolution; every other mistake is reported as the router's config errors are, with the
/// file's own line numbers.
pub fn load_dut(path: &Path) -> Result<Dut, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_dut(&text, path)
}

pub fn parse_dut(text: &str, path: &Path) -> Result<Dut, String> {
    // Interfaces without `mac`, and where their maps start.
    let mut missing: Vec<(String, usize, usize)> = Vec::new();
    if let Ok(root) = yaml::parse(text) {
        if let Value::Map(top) = &root.value {
            if let Some((_, ifs)) = top.iter().find(|(k, _)| k == "interfaces") {
                if let Value::Seq(items) = &ifs.value {
                    for it in items {
                        if let Value::Map(m) = &it.value {
                            if !m.iter().any(|(k, _)| k == "mac") {
                                let name = m
                                    .iter()
                                    .find(|(k, _)| k == "name")
                                    .and_then(|(_, v)| match &v.value {
                                        Value::Scalar(s) => Some(s.clone()),
                                        _ => None,
                                    })
                                    .unwrap_or_default();
                                missing.push((name, it.line, it.col));
                            }
                        }
                    }
                }
            }
        }
    }
    if missing.is_empty() {
        let cfg = control::config::parse(text, path).map_err(|e| e.to_string())?;
        return Ok(Dut {
            cfg,
            resolve: Vec::new(),
        });
    }
    // Put a placeholder MAC into each such map and check that text. A flow map (`{ name: p0,
    // ... }`) takes it after its brace, on the same line; a block map takes it as a line of its
    // own before its first key, so errors after it are moved back one line per insertion.
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let mut inserted_before: Vec<usize> = Vec::new();
    for (_, line, col) in missing.iter().rev() {
        let Some(l) = out.get_mut(line - 1) else {
            continue;
        };
        let at = l.char_indices().nth(col - 1).map_or(l.len(), |(i, _)| i);
        if l[at..].starts_with('{') {
            l.insert_str(at + 1, &format!(" mac: \"{PLACEHOLDER_MAC}\","));
        } else {
            let indent = " ".repeat(col - 1);
            l.insert_str(at, &format!("mac: \"{PLACEHOLDER_MAC}\"\n{indent}"));
            inserted_before.push(*line);
        }
    }
    let patched: String = out.concat();
    match control::config::parse(&patched, path) {
        Ok(cfg) => Ok(Dut {
            cfg,
            resolve: missing.into_iter().map(|m| m.0).collect(),
        }),
        Err(ConfigErrors(list)) => {
            let fixed: Vec<ConfigError> = list
                .into_iter()
                .map(|mut e| {
                    // Inserted line k pushed original line k to k+1 (and everything after).
                    let mut orig = e.line;
                    for &k in &inserted_before {
                        if e.line > k {
                            orig -= 1;
                        }
                    }
                    e.line = orig;
                    e
                })
                .collect();
            Err(ConfigErrors(fixed).to_string())
        }
    }
}

/// `--port P=DEV`: the device's port `P` is cabled to the tester's Linux device `DEV` (or, as
/// `shm:PATH`, is a shared-memory port the tester maps as its client).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortMap {
    pub dut_port: String,
    pub device: String,
}

impl std::str::FromStr for PortMap {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once('=') {
            Some((p, d)) if !p.trim().is_empty() && !d.trim().is_empty() => Ok(PortMap {
                dut_port: p.trim().to_string(),
                device: d.trim().to_string(),
            }),
            _ => Err(format!(
                "`{s}`: expected DUT_PORT=DEVICE (the device's port name in DUT.yaml, the tester's Linux interface)"
            )),
        }
    }
}

/// An address the tester answers for on a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Emulated {
    pub vlan: Option<u16>,
    pub ip: IpAddr,
    pub mac: [u8; 6],
}

/// A MAC the device announced: (VLAN, its address, its MAC).
pub type Learned = (Option<u16>, IpAddr, [u8; 6]);

/// What a port's responder saw and did; shared with the report.
#[derive(Default, Debug)]
pub struct ControlStats {
    /// ARP requests for an emulated address, answered.
    pub arp_answered: AtomicU64,
    /// Neighbour solicitations for an emulated address, answered.
    pub ns_answered: AtomicU64,
    /// Other ARP frames (replies, requests for other addresses).
    pub arp_other: AtomicU64,
    /// Other ICMPv6 ND and MLD frames (advertisements, router solicitations, reports).
    pub nd_other: AtomicU64,
    /// Answers that could not be sent (no buffer, transmit ring full).
    pub reply_failed: AtomicU64,
    /// (vlan, address, MAC) the device announced in its ARP and ND frames, latest last.
    pub learned: Mutex<Vec<Learned>>,
}

/// The counts of [`ControlStats`], for reports.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ControlCounts {
    pub arp_answered: u64,
    pub ns_answered: u64,
    pub arp_other: u64,
    pub nd_other: u64,
    pub reply_failed: u64,
}

impl ControlStats {
    pub fn counts(&self) -> ControlCounts {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ControlCounts {
            arp_answered: r(&self.arp_answered),
            ns_answered: r(&self.ns_answered),
            arp_other: r(&self.arp_other),
            nd_other: r(&self.nd_other),
            reply_failed: r(&self.reply_failed),
        }
    }

    fn learn(&self, vlan: Option<u16>, ip: IpAddr, mac: [u8; 6]) {
        if mac == [0; 6] || mac[0] & 1 == 1 {
            return;
        }
        let mut g = self.learned.lock().unwrap_or_else(|e| e.into_inner());
        g.retain(|x| !(x.0 == vlan && x.1 == ip));
        g.push((vlan, ip, mac));
    }

    pub fn learned_mac(&self, vlan: Option<u16>, ip: IpAddr) -> Option<[u8; 6]> {
        let g = self.learned.lock().unwrap_or_else(|e| e.into_inner());
        g.iter().find(|x| x.0 == vlan && x.1 == ip).map(|x| x.2)
    }
}

/// What kind of frame a received frame is, from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Anything else: a test frame, or foreign (counted by the analyzer).
    Data,
    Arp {
        vlan: Option<u16>,
        l3: usize,
    },
    /// ICMPv6 of the ND/MLD family: (vlan, IPv6 header offset, ICMPv6 offset).
    Nd {
        vlan: Option<u16>,
        l3: usize,
        icmp: usize,
    },
}

fn be16(f: &[u8], at: usize) -> Option<u16> {
    f.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]))
}

fn classify(f: &[u8]) -> Kind {
    let Some(mut et) = be16(f, 12) else {
        return Kind::Data;
    };
    let mut l3 = 14;
    let mut vlan = None;
    if et == 0x8100 || et == 0x88a8 {
        let Some(tci) = be16(f, 14) else {
            return Kind::Data;
        };
        vlan = Some(tci & 0x0fff);
        let Some(e) = be16(f, 16) else {
            return Kind::Data;
        };
        et = e;
        l3 = 18;
    }
    match et {
        arp::ETHERTYPE => Kind::Arp { vlan, l3 },
        0x86dd => {
            let Some(&nh) = f.get(l3 + 6) else {
                return Kind::Data;
            };
            let mut icmp = l3 + 40;
            let nh = if nh == 0 {
                // Hop-by-hop options (MLD carries a router alert) before ICMPv6.
                let (Some(&next), Some(&len)) = (f.get(icmp), f.get(icmp + 1)) else {
                    return Kind::Data;
                };
                icmp += (len as usize + 1) * 8;
                next
            } else {
                nh
            };
            match (nh, f.get(icmp)) {
                (58, Some(130..=137 | 143)) => Kind::Nd { vlan, l3, icmp },
                _ => Kind::Data,
            }
        }
        _ => Kind::Data,
    }
}

/// An Ethernet header (and tag) from `src` to `dst`.
fn eth(dst: [u8; 6], src: [u8; 6], vlan: Option<u16>) -> packet::ethernet::Header {
    packet::ethernet::Header {
        dst: MacAddr(dst),
        src: MacAddr(src),
        tags: packet::ethernet::Tags::from_vlan(vlan),
        ethertype: 0,
    }
}

/// An ARP request or reply frame (padded to the 60-byte minimum).
pub fn arp_frame(
    op: u16,
    vlan: Option<u16>,
    eth_dst: [u8; 6],
    sender: ([u8; 6], u32),
    target: ([u8; 6], u32),
) -> Vec<u8> {
    let r = arp::Repr {
        op,
        sender_mac: MacAddr(sender.0),
        sender_ip: sender.1,
        target_mac: MacAddr(target.0),
        target_ip: target.1,
    };
    arp::frame(eth(eth_dst, sender.0, vlan), &r)
}

/// A neighbour solicitation (`advert` None) or advertisement (`advert`: its flags) frame:
/// ICMPv6 from `src` to `dst` with hop limit 255 and the link-layer option.
pub fn nd_frame(
    advert: Option<u32>,
    vlan: Option<u16>,
    eth: ([u8; 6], [u8; 6]),
    src: [u8; 16],
    dst: [u8; 16],
    target: [u8; 16],
    lladdr: [u8; 6],
) -> Vec<u8> {
    let r = nd::Repr {
        msg_type: if advert.is_some() {
            nd::NEIGHBOR_ADVERT
        } else {
            nd::NEIGHBOR_SOLICIT
        },
        flags: advert.unwrap_or(0),
        target,
        lladdr: Some(MacAddr(lladdr)),
    };
    nd::frame(self::eth(eth.0, eth.1, vlan), &src, &dst, &r)
}

/// A receive queue with the link's control plane in front: answers ARP requests and neighbour
/// solicitations for the emulated addresses (on its own transmit queue), learns what the
/// device announces, and passes only the other frames on, in their order.
pub struct Responder {
    inner: Box<dyn RxQueue>,
    tx: Box<dyn TxQueue>,
    emulated: Vec<Emulated>,
    pub stats: Arc<ControlStats>,
    tail: Vec<PktBuf>,
    replies: Vec<PktBuf>,
}

impl Responder {
    pub fn new(
        inner: Box<dyn RxQueue>,
        tx: Box<dyn TxQueue>,
        emulated: Vec<Emulated>,
        stats: Arc<ControlStats>,
    ) -> Responder {
        Responder {
            inner,
            tx,
            emulated,
            stats,
            tail: Vec::new(),
            replies: Vec::new(),
        }
    }

    fn emulated_v4(&self, vlan: Option<u16>, ip: u32) -> Option<[u8; 6]> {
        self.emulated
            .iter()
            .find(|e| e.vlan == vlan && e.ip == IpAddr::from(ip.to_be_bytes()))
            .map(|e| e.mac)
    }

    /// The MAC of an emulated IPv6 address, or of the link-local address of an emulated MAC
    /// (the device may resolve either).
    fn emulated_v6(&self, vlan: Option<u16>, ip: [u8; 16]) -> Option<[u8; 6]> {
        self.emulated
            .iter()
            .filter(|e| e.vlan == vlan)
            .find(|e| e.ip == IpAddr::from(ip) || nd::link_local(MacAddr(e.mac)) == ip)
            .map(|e| e.mac)
    }

    fn reply(&mut self, cache: &mut BufCache, frame: &[u8]) {
        let Some(mut b) = cache.alloc() else {
            self.stats.reply_failed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        // Not a test frame's payload: the generator must not reuse it as one.
        b.meta_mut().owner_tag = 0;
        if b.fill(frame) {
            self.replies.push(b);
        } else {
            cache.free(b);
            self.stats.reply_failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Handles one control frame: answers it if it asks for us, learns from it.
    fn control(&mut self, cache: &mut BufCache, f: &[u8], kind: Kind) {
        match kind {
            Kind::Data => {}
            Kind::Arp { vlan, l3 } => {
                let Ok(a) = arp::Repr::parse(&f[l3..]) else {
                    self.stats.arp_other.fetch_add(1, Ordering::Relaxed);
                    return;
                };
                if a.sender_ip != 0 {
                    self.stats.learn(
                        vlan,
                        IpAddr::from(a.sender_ip.to_be_bytes()),
                        a.sender_mac.0,
                    );
                }
                match self.emulated_v4(vlan, a.target_ip) {
                    Some(mac) if a.op == arp::REQUEST && a.sender_ip != a.target_ip => {
                        let r = arp_frame(
                            arp::REPLY,
                            vlan,
                            a.sender_mac.0,
                            (mac, a.target_ip),
                            (a.sender_mac.0, a.sender_ip),
                        );
                        self.reply(cache, &r);
                        self.stats.arp_answered.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        self.stats.arp_other.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            Kind::Nd { vlan, l3, icmp } => {
                let ip = &f[l3..l3 + 40];
                let src: [u8; 16] = ip[8..24].try_into().expect("16 bytes");
                let dst: [u8; 16] = ip[24..40].try_into().expect("16 bytes");
                let end = (l3 + 40 + u16::from_be_bytes([ip[4], ip[5]]) as usize).min(f.len());
                let parsed = (icmp < end)
                    .then(|| nd::Repr::parse(&f[icmp..end], &src, &dst, ip[7]).ok())
                    .flatten();
                let Some(m) = parsed else {
                    self.stats.nd_other.fetch_add(1, Ordering::Relaxed);
                    return;
                };
                let eth_src: [u8; 6] = f[6..12].try_into().expect("6 bytes");
                if m.msg_type == nd::NEIGHBOR_ADVERT {
                    self.stats.learn(
                        vlan,
                        IpAddr::from(m.target),
                        m.lladdr.map_or(eth_src, |x| x.0),
                    );
                    self.stats.nd_other.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                let dad = src == [0; 16];
                if !dad {
                    self.stats
                        .learn(vlan, IpAddr::from(src), m.lladdr.map_or(eth_src, |x| x.0));
                }
                match self.emulated_v6(vlan, m.target) {
                    // A duplicate address check (from ::) is not answered: the address is the
                    // device's to take, and the tester only stands in for neighbours.
                    Some(mac) if !dad => {
                        let to = m.lladdr.map_or(eth_src, |x| x.0);
                        let r = nd_frame(
                            Some(nd::FLAG_SOLICITED | nd::FLAG_OVERRIDE),
                            vlan,
                            (to, mac),
                            m.target,
                            src,
                            m.target,
                            mac,
                        );
                        self.reply(cache, &r);
                        self.stats.ns_answered.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        self.stats.nd_other.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    }

    fn flush_replies(&mut self, cache: &mut BufCache) {
        if self.replies.is_empty() {
            return;
        }
        self.tx.tx_burst(&mut self.replies, cache);
        if !self.replies.is_empty() {
            self.stats
                .reply_failed
                .fetch_add(self.replies.len() as u64, Ordering::Relaxed);
            cache.free_all(&mut self.replies);
        }
    }
}

impl RxQueue for Responder {
    fn rx_burst(&mut self, cache: &mut BufCache, out: &mut Vec<PktBuf>, max: usize) -> usize {
        let start = out.len();
        let n = self.inner.rx_burst(cache, out, max);
        if n == 0 {
            return 0;
        }
        // Control frames are rare: find the first, and only then rebuild the tail.
        let Some(first) = (start..out.len()).find(|&i| classify(out[i].data()) != Kind::Data)
        else {
            return n;
        };
        self.tail.extend(out.drain(first..));
        let mut tail = std::mem::take(&mut self.tail);
        for b in tail.drain(..) {
            let kind = classify(b.data());
            if kind == Kind::Data {
                out.push(b);
            } else {
                self.control(cache, b.data(), kind);
                let mut b = b;
                b.meta_mut().owner_tag = 0;
                cache.free(b);
            }
        }
        self.tail = tail;
        self.flush_replies(cache);
        out.len() - start
    }
}

/// A tester port on a Linux device: its AF_PACKET port (for the counters) and what the report
/// says about it.
pub struct ExternalPort {
    pub map: PortMap,
    pub info: PortInfo,
    pub port: Link,
    pub stats: Arc<ControlStats>,
    /// The device's MAC on this link came from ARP/ND, not from DUT.yaml.
    pub resolved: bool,
}

/// The tester's end of a link: a Linux device through AF_PACKET, or (`--port P=shm:PATH`) the
/// client end of a shared-memory port a Linerate process serves (a logical router's port).
#[derive(Clone)]
pub enum Link {
    AfPacket(Arc<AfPacketPort>),
    Shm(Arc<ShmPort>),
}

impl Link {
    /// Frames the tester's receive side dropped (a full kernel ring, or a frame too long for a
    /// buffer): the tester's loss, not the device's. A shared-memory ring never drops: a full
    /// one makes the far end's transmit refuse (its own count).
    fn rx_drops(&self) -> (u64, u64) {
        match self {
            Link::AfPacket(p) => {
                let s = p.stats().rx_total();
                (s.kernel_drops, s.oversize)
            }
            Link::Shm(_) => (0, 0),
        }
    }
}

/// One sending ring of a shared-memory port, shared by the streams and the responders that
/// answer on it (a ring has one producer: they take turns; the tester is one thread, so the
/// lock is never contended).
struct SharedShmTx(Arc<Mutex<ShmTx>>);

impl TxQueue for SharedShmTx {
    fn tx_burst(&mut self, pkts: &mut Vec<PktBuf>, cache: &mut BufCache) -> usize {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .tx_burst(pkts, cache)
    }
}

/// Frames the receive ring of each tester port holds: 32,768 slots of 2 KiB (64 MiB on a
/// 1,500-byte MTU), about 35 ms of a veth's best rate, while the tester thread is away.
pub const RX_RING_FRAMES: u32 = 32768;

/// Transmit ring slots per tester port: twice the most the generator sends at once after a stall
/// (`engine::MAX_DEBT`). No more: when the link pushes back (a veth whose device is slower than
/// the load), frames wait here after being stamped, and that wait would read as the device's
/// latency (2,048 slots were 50 ms at 40,000 frames/s).
pub const TX_RING_FRAMES: u32 = 512;

/// The transmit socket's send buffer per tester port: 4 MiB, about 5,000 small frames on their
/// way. With the kernel's default (~277 of them) a burst the generator sends after losing its
/// core for a moment was refused although the device could take it; a device slower than the
/// load still fills it and pushes back.
pub const TX_SNDBUF: usize = 4 << 20;

/// The tester's ports read a frame ring (`TPACKET_V2`): each frame is the tester's as soon as the
/// kernel has it, with the kernel's receive time, so latency is measured to the microsecond (a
/// block ring would hand frames over up to its 1 ms block timeout late).
pub fn af_config() -> AfPacketConfig {
    AfPacketConfig {
        queues: 1,
        block_size: 64 * 1024,
        block_count: 128,
        block_timeout_ms: 1,
        tx_frame_size: None,
        tx_frame_count: TX_RING_FRAMES,
        tx_sndbuf: Some(TX_SNDBUF),
        promiscuous: true,
        fanout: FanoutMode::Auto,
        rx_ring: RxRing::Frames(RX_RING_FRAMES),
    }
}

/// The addresses the tester emulates on the device's port `port`: the neighbours of every
/// interface (and sub-interface) on it.
pub fn emulated_on(cfg: &Config, port: &str) -> Vec<Emulated> {
    cfg.interfaces
        .iter()
        .filter(|i| i.port == port)
        .flat_map(|i| {
            cfg.neighbors
                .iter()
                .filter(move |n| n.interface == i.name)
                .map(move |n| Emulated {
                    vlan: i.vlan,
                    ip: n.ip,
                    mac: n.mac.0,
                })
        })
        .collect()
}

/// The interface streams on port `port` are sent to: its untagged one, or its first (what
/// [`streams_file::port_info`] takes the device's MAC from).
fn primary_interface<'c>(cfg: &'c Config, port: &str) -> Option<&'c control::config::InterfaceCfg> {
    cfg.interfaces
        .iter()
        .find(|i| i.port == port && i.vlan.is_none())
        .or_else(|| cfg.interfaces.iter().find(|i| i.port == port))
}

/// Opens the tester's ports: one receive socket (behind a [`Responder`]) and one transmit
/// socket for the streams per device, in `--port` order.
pub fn open_ports(
    dut: &Dut,
    maps: &[PortMap],
    speeds: &[f64],
) -> Result<(Vec<TesterPort>, Vec<ExternalPort>), String> {
    let mut tports = Vec::new();
    let mut eports = Vec::new();
    for (k, m) in maps.iter().enumerate() {
        if !dut.cfg.ports.iter().any(|p| p.name == m.dut_port) {
            return Err(format!(
                "--port {}={}: DUT.yaml has no port `{}` (it has: {})",
                m.dut_port,
                m.device,
                m.dut_port,
                dut.cfg
                    .ports
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if maps[..k].iter().any(|x| x.dut_port == m.dut_port) {
            return Err(format!("--port: port `{}` given twice", m.dut_port));
        }
        // Streams leave for the MAC of the port's untagged interface (or its only one): that
        // is the one the tester can ask for. A sub-interface must say its own.
        if let Some(i) = dut.cfg.interfaces.iter().find(|i| {
            i.port == m.dut_port
                && dut.resolve.contains(&i.name)
                && primary_interface(&dut.cfg, &m.dut_port).map(|p| &p.name) != Some(&i.name)
        }) {
            return Err(format!(
                "DUT.yaml: interface `{}` has no `mac`: give it (the tester resolves only a \
                 port's untagged interface)",
                i.name
            ));
        }
        let info = streams_file::port_info(&dut.cfg, &m.dut_port);
        let emulated = emulated_on(&dut.cfg, &m.dut_port);
        if emulated.is_empty() {
            return Err(format!(
                "DUT.yaml: port `{}` has no `neighbors` on its interfaces: the tester needs an \
                 address (and MAC) to send from there",
                m.dut_port
            ));
        }
        let stats = Arc::new(ControlStats::default());
        let (port, rx, tx) = match m.device.strip_prefix("shm:") {
            Some(path) => {
                let port = Arc::new(ShmPort::connect(Path::new(path)).map_err(|e| {
                    format!("--port {}: {path}: {e} (is its server up?)", m.dut_port)
                })?);
                // Every queue's rings: the far end's workers each send on their own.
                let rings: Vec<Arc<Mutex<ShmTx>>> = (0..port.layout().queues)
                    .map(|q| Arc::new(Mutex::new(port.tx_queue(q))))
                    .collect();
                let rx: Vec<Box<dyn RxQueue>> = (0..port.layout().queues)
                    .map(|q| {
                        Box::new(Responder::new(
                            Box::new(port.rx_queue(q)),
                            Box::new(SharedShmTx(rings[q as usize].clone())),
                            emulated.clone(),
                            stats.clone(),
                        )) as Box<dyn RxQueue>
                    })
                    .collect();
                let tx: Vec<Box<dyn TxQueue>> = rings
                    .iter()
                    .map(|r| Box::new(SharedShmTx(r.clone())) as Box<dyn TxQueue>)
                    .collect();
                (Link::Shm(port), rx, tx)
            }
            None => {
                let port = Arc::new(AfPacketPort::open(&m.device, &af_config())?);
                let rx = port
                    .take_rx_queues()
                    .into_iter()
                    .map(|q| {
                        Ok(Box::new(Responder::new(
                            q,
                            port.tx_queue()?,
                            emulated.clone(),
                            stats.clone(),
                        )) as Box<dyn RxQueue>)
                    })
                    .collect::<Result<_, String>>()?;
                let tx = vec![port.tx_queue()?];
                (Link::AfPacket(port), rx, tx)
            }
        };
        tports.push(TesterPort {
            name: m.dut_port.clone(),
            speed_bps: speeds.get(k).copied().unwrap_or(10e9),
            tx,
            rx,
            load_scale: 1.0,
            wire: crate::atm::Wire::Ethernet,
            refusal: crate::engine::Refusal::NeverSent,
        });
        let resolved =
            primary_interface(&dut.cfg, &m.dut_port).is_some_and(|i| dut.resolve.contains(&i.name));
        eports.push(ExternalPort {
            map: m.clone(),
            info,
            port,
            stats,
            resolved,
        });
    }
    Ok((tports, eports))
}

/// Takes everything waiting on every port's receive queues, for `dur`: the responders answer
/// what asks for us, the rest (late frames of an earlier trial) is dropped.
pub fn service(ports: &mut [TesterPort], cache: &mut BufCache, dur: Duration) {
    let t0 = Instant::now();
    let mut v = Vec::with_capacity(256);
    loop {
        for p in ports.iter_mut() {
            for q in p.rx.iter_mut() {
                q.rx_burst(cache, &mut v, 256);
                for b in v.iter_mut() {
                    b.meta_mut().owner_tag = 0;
                }
                cache.free_all(&mut v);
            }
        }
        if t0.elapsed() >= dur {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Asks the device for its MAC on every port DUT.yaml left it out of: an ARP request for the
/// interface's first IPv4 address from the emulated neighbour's (or a neighbour solicitation
/// when the interface has only IPv6), repeated every 200 ms until `timeout`. The request also
/// teaches the device our address (a kernel keeps the asker as a neighbour), so it need not ask.
pub fn resolve(
    dut: &Dut,
    tports: &mut [TesterPort],
    eports: &mut [ExternalPort],
    pool: &Arc<Pool>,
    timeout: Duration,
) -> Result<(), String> {
    let mut cache = BufCache::new(pool.clone());
    // What to ask on each port that needs it: (port, vlan, the device's address, our address, our MAC).
    let mut asks = Vec::new();
    for (k, e) in eports.iter().enumerate() {
        if !e.resolved {
            continue;
        }
        let ifc = primary_interface(&dut.cfg, &e.map.dut_port)
            .ok_or_else(|| format!("DUT.yaml: no interface on port `{}`", e.map.dut_port))?;
        let em = emulated_on(&dut.cfg, &e.map.dut_port);
        let mine = |v4: bool| {
            em.iter()
                .find(|x| x.vlan == ifc.vlan && x.ip.is_ipv4() == v4)
                .copied()
        };
        let ask = match (ifc.ipv4.first(), mine(true), ifc.ipv6.first(), mine(false)) {
            (Some(&(a, _)), Some(me), _, _) => (IpAddr::from(a.to_be_bytes()), me),
            (_, _, Some(&(a, _)), Some(me)) => (IpAddr::from(a.to_be_bytes()), me),
            _ => {
                return Err(format!(
                    "DUT.yaml: interface `{}` has no `mac`, and no address with a neighbour of \
                     the same family to ask for it from: give its `mac`",
                    ifc.name
                ))
            }
        };
        asks.push((k, ifc.vlan, ask.0, ask.1));
    }
    if asks.is_empty() {
        return Ok(());
    }
    let t0 = Instant::now();
    let mut left = asks.clone();
    while !left.is_empty() {
        for &(k, vlan, theirs, me) in &left {
            let frame = match (theirs, me.ip) {
                (IpAddr::V4(t), IpAddr::V4(m)) => arp_frame(
                    arp::REQUEST,
                    vlan,
                    [0xff; 6],
                    (me.mac, u32::from(m)),
                    ([0; 6], u32::from(t)),
                ),
                (IpAddr::V6(t), IpAddr::V6(m)) => {
                    let group = nd::solicited_node(&t.octets());
                    nd_frame(
                        None,
                        vlan,
                        (nd::multicast_mac(&group).0, me.mac),
                        m.octets(),
                        group,
                        t.octets(),
                        me.mac,
                    )
                }
                _ => unreachable!("same family by construction"),
            };
            send_on(&mut tports[k], &mut cache, &frame);
        }
        let round = Instant::now();
        while round.elapsed() < Duration::from_millis(200) {
            service(tports, &mut cache, Duration::from_millis(5));
            left.retain(
                |&(k, vlan, theirs, _)| match eports[k].stats.learned_mac(vlan, theirs) {
                    Some(mac) => {
                        eports[k].info.router_mac = mac;
                        false
                    }
                    None => true,
                },
            );
            if left.is_empty() {
                break;
            }
        }
        if !left.is_empty() && t0.elapsed() >= timeout {
            let (k, _, theirs, me) = left[0];
            return Err(format!(
                "the device did not answer for {theirs} on its port `{}` (tester device {}, \
                 asking from {} {}) within {:.1} s: check the cabling and addresses, or give the \
                 interface's `mac` in DUT.yaml",
                eports[k].map.dut_port,
                eports[k].map.device,
                me.ip,
                MacAddr(me.mac),
                timeout.as_secs_f64()
            ));
        }
    }
    cache.flush();
    Ok(())
}

/// Sends one frame on port `p` (before any trial: the streams' queue is free).
fn send_on(p: &mut TesterPort, cache: &mut BufCache, frame: &[u8]) {
    if let Some(q) = p.tx.first_mut() {
        let mut v = Vec::new();
        if let Some(mut b) = cache.alloc() {
            if b.fill(frame) {
                b.meta_mut().owner_tag = 0;
                v.push(b);
                q.tx_burst(&mut v, cache);
            }
        }
        cache.free_all(&mut v);
    }
}

/// Gives the streams the device's MACs as resolved: a stream that was to leave port p for the
/// placeholder now goes to the MAC the device gave there.
pub fn apply_macs(streams: &mut [StreamSpec], eports: &[ExternalPort]) {
    let placeholder: MacAddr = PLACEHOLDER_MAC.parse().expect("a MAC");
    for s in streams {
        if let Some(e) = eports.get(s.tx_port) {
            if e.resolved && s.dst_mac == placeholder.0 {
                s.dst_mac = e.info.router_mac;
            }
        }
    }
}

/// Measures each trial: the CPU it cost, the device's own busy time when its API is given, and
/// the tester's own receive drops.
pub struct ExternalMeter {
    pub ports: Vec<Link>,
    pub api: Option<DutApi>,
    /// The tester thread's core, when pinned: the other CPUs' time is the device's.
    pub tester_core: Option<usize>,
    before: CpuSample,
    busy0: Option<u64>,
    drops0: u64,
    /// The device's drop counters at the trial's start (Linerate, through its API).
    dut_drops0: Option<Vec<(&'static str, u64)>>,
}

impl ExternalMeter {
    pub fn new(ports: Vec<Link>, api: Option<DutApi>, tester_core: Option<usize>) -> Self {
        ExternalMeter {
            ports,
            api,
            tester_core,
            before: CpuSample::default(),
            busy0: None,
            drops0: 0,
            dut_drops0: None,
        }
    }

    fn rx_drops(&self) -> u64 {
        self.ports
            .iter()
            .map(|p| {
                let (kernel, oversize) = p.rx_drops();
                kernel + oversize
            })
            .sum()
    }
}

impl TrialMeter for ExternalMeter {
    fn start(&mut self) {
        // The API calls first: their cost stays outside the window.
        self.busy0 = self.api.as_ref().and_then(|a| a.busy_ns().ok());
        self.dut_drops0 = self.api.as_ref().and_then(|a| a.drops().ok());
        self.drops0 = self.rx_drops();
        self.before = CpuSample::now();
    }

    fn finish(&mut self, r: &mut TrialResult) {
        let after = CpuSample::now();
        let mut u = CpuUsage::between(&self.before, &after, r.rx);
        if let Some(c) = self.tester_core {
            u.set_tester_core(c);
        }
        if let (Some(a), Some(b0)) = (&self.api, self.busy0) {
            if let Ok(b1) = a.busy_ns() {
                u.dut_busy_s = Some(b1.saturating_sub(b0) as f64 * 1e-9);
            }
        }
        // The device's own drops in the trial, by reason, as embedded mode's probe gives them
        // (after the drain, so late drops are in).
        if let (Some(a), Some(d0)) = (&self.api, &self.dut_drops0) {
            if let Ok(d1) = a.drops() {
                r.dut_drops = d1
                    .iter()
                    .map(|&(k, v)| {
                        let b = d0.iter().find(|x| x.0 == k).map_or(0, |x| x.1);
                        (k, v.saturating_sub(b))
                    })
                    .filter(|x| x.1 > 0)
                    .collect();
            }
        }
        r.cpu = Some(u);
        r.tester_drops = self.rx_drops().saturating_sub(self.drops0);
        // Frames the tester's receive rings dropped never reached the analyzer: the device may
        // have forwarded them. (Frames its transmit rings refused or kept never reached the
        // wire: the engine counts them apart, and they are neither sent nor lost.)
        if r.tester_drops > 0 {
            r.tester_limited = true;
        }
    }
}

/// A Linerate daemon's API, for its workers' busy time.
pub struct DutApi {
    pub socket: PathBuf,
    client: api::Client,
}

impl DutApi {
    pub fn new(socket: PathBuf) -> Result<DutApi, String> {
        let client = api::Client::new(api::Endpoint::Unix(socket.clone()))?;
        let a = DutApi { socket, client };
        a.busy_ns()
            .map_err(|e| format!("--dut-api {}: {e}", a.socket.display()))?;
        Ok(a)
    }

    /// Drops by reason since the router started (`linerate show errors`), under the reasons'
    /// machine names; reasons this build does not know are left out.
    pub fn drops(&self) -> Result<Vec<(&'static str, u64)>, String> {
        let list: Vec<api::views::ErrorView> = self
            .client
            .view("/v1/errors")
            .map_err(|e| format!("GET /v1/errors: {e}"))?;
        Ok(list
            .iter()
            .filter_map(|e| {
                let known = dataplane::DropReason::ALL
                    .iter()
                    .find(|d| d.name() == e.reason)?;
                Some((known.name(), e.count))
            })
            .collect())
    }

    /// The sum of every worker's busy nanoseconds (`linerate show workers`).
    pub fn busy_ns(&self) -> Result<u64, String> {
        let list: Vec<api::views::WorkerView> = self
            .client
            .view("/v1/workers")
            .map_err(|e| format!("GET /v1/workers: {e}"))?;
        Ok(list.iter().map(|w| w.busy_ns).sum())
    }
}

/// Whether a search's answer is only a floor set by the tester, from the tester's own evidence:
/// the passing trial was limited by the tester (its transmit rings refused or kept frames, it
/// fell behind its schedule, or its receive rings dropped), or a failed trial at or above the
/// answer lost frames in the tester's receive rings (the device may have forwarded them).
/// Loss is counted from what reached the wire, so a failed trial otherwise is the device's.
pub fn tester_bound(t: &crate::procedures::Throughput) -> bool {
    let Some(best) = &t.best else {
        return t.trials.iter().any(|(_, _, r)| r.tester_drops > 0);
    };
    best.tester_limited
        || t.trials
            .iter()
            .any(|(l, ok, r)| !ok && *l >= t.load - 1e-12 && r.tester_drops > 0)
}

/// What the report says about an external run.
#[derive(Clone, Debug, Serialize)]
pub struct ExternalInfo {
    pub dut: String,
    pub dut_api: Option<String>,
    pub ports: Vec<ExternalPortReport>,
    /// The priming trials: (frames sent, lost) each.
    pub priming: Vec<(u64, u64)>,
    pub priming_fps: f64,
    /// The tester thread's core, when pinned.
    pub tester_core: Option<usize>,
    /// The tester's latency with no device (a veth pair of its own), or why it could not be
    /// measured (in the JSON: `latency_floor` or `latency_floor_error`).
    #[serde(skip)]
    pub latency_floor: Result<crate::floor::LatencyFloor, String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ExternalPortReport {
    pub dut_port: String,
    pub device: String,
    pub dut_mac: String,
    pub dut_mac_resolved: bool,
    pub tester_mac: String,
    pub emulated: Vec<String>,
    pub control: ControlCounts,
    pub rx_kernel_drops: u64,
}

impl ExternalInfo {
    pub fn control_total(&self) -> ControlCounts {
        let mut t = ControlCounts::default();
        for p in &self.ports {
            t.arp_answered += p.control.arp_answered;
            t.ns_answered += p.control.ns_answered;
            t.arp_other += p.control.arp_other;
            t.nd_other += p.control.nd_other;
            t.reply_failed += p.control.reply_failed;
        }
        t
    }
}

pub fn port_reports(dut: &Dut, eports: &[ExternalPort]) -> Vec<ExternalPortReport> {
    eports
        .iter()
        .map(|e| ExternalPortReport {
            dut_port: e.map.dut_port.clone(),
            device: e.map.device.clone(),
            dut_mac: MacAddr(e.info.router_mac).to_string(),
            dut_mac_resolved: e.resolved,
            tester_mac: MacAddr(e.info.host_mac).to_string(),
            emulated: emulated_on(&dut.cfg, &e.map.dut_port)
                .iter()
                .map(|x| match x.vlan {
                    Some(v) => format!("{} (vlan {v})", x.ip),
                    None => x.ip.to_string(),
                })
                .collect(),
            control: e.stats.counts(),
            rx_kernel_drops: e.port.rx_drops().0,
        })
        .collect()
}

/// Short trials at about `fps` frames/s per port until one loses nothing (at most `tries`):
/// the device resolves the emulated addresses while the first frames wait (the kernel queues a
/// few per neighbour, Linerate holds up to its `hold`), so a search that started cold would
/// measure that. Returns each trial's (sent, lost).
pub fn prime(
    t: &mut Tester,
    sizes: &FrameSizes,
    fps: f64,
    seconds: f64,
    tries: usize,
    active: Option<Vec<usize>>,
) -> Vec<(u64, u64)> {
    let slowest = t
        .ports
        .iter()
        .map(|p| p.load_scale * line_rate_fps(p.speed_bps, sizes.mean()))
        .fold(f64::MAX, f64::min);
    let load = (fps / slowest).clamp(1e-9, 1.0);
    let mut out = Vec::new();
    for _ in 0..tries {
        let mut spec = TrialSpec::new(load, sizes.clone(), seconds);
        spec.drain_quiet = Duration::from_millis(100);
        spec.active = active.clone();
        let r = t.trial(&mut spec, &mut |_| {});
        out.push((r.tx, r.lost));
        if r.lost == 0 && r.tx > 0 {
            break;
        }
    }
    out
}

/// An external run: the device, the cabling, the streams (built against the ports' views from
/// DUT.yaml; MACs left out are filled in once resolved) and the frame sizes.
pub struct ExternalRun {
    pub dut_path: PathBuf,
    pub dut: Dut,
    pub maps: Vec<PortMap>,
    pub streams: Vec<StreamSpec>,
    /// Nominal speed per port (what load percentages are of).
    pub speeds: Vec<f64>,
    pub sizes: Vec<FrameSizes>,
    /// How the streams were made, for the title.
    pub what: String,
    /// Pin the tester thread to this CPU.
    pub core: Option<usize>,
    /// A Linerate daemon's API socket, for its workers' busy time.
    pub dut_api: Option<PathBuf>,
    pub resolve_timeout: Duration,
    /// Named subsets of the streams, each searched on its own per frame size (row key "SIZE
    /// NAME"): GG-2 runs each GGSN alone, then both. Empty: one row per size, every stream.
    pub subsets: Vec<(String, Vec<usize>)>,
    /// Streams that must never arrive (XR-1's streams across logical routers). With some, the
    /// search runs on the others alone (row "SIZE inside"), then one trial runs every stream at
    /// the load found: the inside streams must lose nothing and these must bring 0 frames.
    pub blocked: Vec<usize>,
}

/// XR-1's separation trial at `load`, every stream on: the checks that the streams inside
/// lose nothing and the `blocked` ones bring nothing, and a line per stream.
fn separation_trial(
    tester: &mut Tester,
    sz: &FrameSizes,
    trial: &crate::procedures::TrialOpts,
    load: f64,
    blocked: &[usize],
    obs: &mut dyn crate::procedures::Observer,
) -> (Vec<crate::report::Check>, Vec<String>) {
    let mut spec = trial.spec(load, sz);
    spec.active = None;
    let label = format!("{sz} separation, every stream at {:.2}%", load * 100.0);
    let r = tester.trial(&mut spec, &mut |p| obs.progress(&label, p));
    let blocked_names: Vec<&str> = blocked
        .iter()
        .map(|&i| tester.streams[i].name.as_str())
        .collect();
    let (mut in_tx, mut in_bad, mut across_tx, mut across_rx) = (0u64, 0u64, 0u64, 0u64);
    let mut lines = Vec::new();
    for st in &r.streams {
        let across = blocked_names.contains(&st.name.as_str());
        if across {
            across_tx += st.tx;
            across_rx += st.rx + st.misdelivered;
        } else {
            in_tx += st.tx;
            in_bad += st.lost + st.duplicated + st.misdelivered + st.corrupted;
        }
        lines.push(format!(
            "{sz} separation: {} ({}): sent {}, received {}{}",
            st.name,
            if across { "across LRs" } else { "inside an LR" },
            st.tx,
            st.rx,
            if st.misdelivered > 0 {
                format!(", {} at another port", st.misdelivered)
            } else {
                String::new()
            }
        ));
    }
    let ok_in = in_tx > 0 && in_bad == 0;
    let ok_across = across_tx > 0 && across_rx == 0;
    obs.trial(&label, &r, ok_in && ok_across);
    let checks = vec![
        crate::report::Check {
            name: format!("{sz}: streams inside a logical router lose nothing"),
            expected: "0 frames lost (every stream on)".into(),
            measured: format!("{in_bad} of {in_tx} lost at {:.2}% load", load * 100.0),
            pass: ok_in,
        },
        crate::report::Check {
            name: format!("{sz}: streams across logical routers are blocked"),
            expected: "0 frames received".into(),
            measured: format!("{across_rx} of {across_tx} received"),
            pass: ok_across,
        },
    ];
    (checks, lines)
}

/// The tester's view of each `--port` (MACs and addresses from DUT.yaml), in order.
pub fn port_infos(dut: &Dut, maps: &[PortMap]) -> Vec<PortInfo> {
    maps.iter()
        .map(|m| streams_file::port_info(&dut.cfg, &m.dut_port))
        .collect()
}

/// Runs the procedures against an external device: opens the ports, resolves what DUT.yaml left
/// out, primes the device, then per frame size the throughput search (or one trial at a fixed
/// load), and loss against load and back-to-back when asked for.
pub fn run(
    x: ExternalRun,
    ro: &crate::run::RunOpts,
    obs: &mut dyn crate::procedures::Observer,
) -> Result<crate::run::ScenarioReport, String> {
    use crate::procedures::{self, SearchOpts};
    let api = x.dut_api.clone().map(DutApi::new).transpose()?;
    // Every frame is copied in and out of the kernel's rings, so buffers are only in flight for
    // a burst: a few thousand do, whatever the rate.
    let pool = Pool::new(8192);
    let (mut tports, mut eports) = open_ports(&x.dut, &x.maps, &x.speeds)?;
    let tester_core = x
        .core
        .and_then(|c| core_affinity::set_for_current(core_affinity::CoreId { id: c }).then_some(c));
    if let (Some(c), None) = (x.core, tester_core) {
        return Err(format!("--core {c}: could not pin the tester thread there"));
    }
    // Before the device's traffic, on the thread the trials run on (pinned, if asked).
    let latency_floor = crate::floor::measure();
    let mut cache = BufCache::new(pool.clone());
    // Whatever waited in the rings from before is not this run's.
    service(&mut tports, &mut cache, Duration::from_millis(50));
    cache.flush();
    drop(cache);
    resolve(&x.dut, &mut tports, &mut eports, &pool, x.resolve_timeout)?;
    let mut streams = x.streams;
    apply_macs(&mut streams, &eports);
    let nstreams = streams.len();
    let flows = streams.iter().map(|s| s.flows()).sum();
    let mut tester = Tester::new(tports, streams, pool);
    for sz in &x.sizes {
        tester.validate(sz)?;
    }
    tester.meter = Some(Box::new(ExternalMeter::new(
        eports.iter().map(|e| e.port.clone()).collect(),
        api,
        tester_core,
    )));
    const PRIME_FPS: f64 = 1000.0;
    // The streams that may arrive, when some must not (XR-1): priming and the search take
    // those alone (the others would read as loss).
    let inside: Option<Vec<usize>> =
        (!x.blocked.is_empty()).then(|| (0..nstreams).filter(|i| !x.blocked.contains(i)).collect());
    let priming = prime(&mut tester, &x.sizes[0], PRIME_FPS, 0.5, 5, inside.clone());
    let tolerance = ro.tolerance.unwrap_or(0.0);
    // The resolution is relative to the first estimate: a device's nominal rate means nothing on
    // a veth, and a router doing a fraction of a percent of 10G still gets a tight answer.
    let search = SearchOpts {
        resolution: ro.resolution,
        loss_tolerance: tolerance,
        relative: true,
        ..Default::default()
    };
    let all: Vec<usize> = (0..nstreams).collect();
    let subsets: Vec<(String, Option<Vec<usize>>)> = if inside.is_some() {
        vec![(" inside".into(), inside)]
    } else if x.subsets.is_empty() {
        vec![(String::new(), None)]
    } else {
        x.subsets
            .iter()
            .map(|(n, s)| (format!(" {n}"), Some(s.clone())))
            .collect()
    };
    let mut rows = Vec::new();
    for sz in &x.sizes {
        for (name, active) in &subsets {
            let mut r = match ro.fixed_load {
                Some(l) => procedures::fixed_load_of(
                    &mut tester,
                    sz,
                    &ro.trial,
                    l,
                    tolerance,
                    active.clone(),
                    obs,
                ),
                None => {
                    let o = SearchOpts {
                        active: active.clone(),
                        ..search.clone()
                    };
                    procedures::throughput(&mut tester, sz, &ro.trial, &o, obs)
                }
            };
            r.tester_limited = tester_bound(&r);
            rows.push(crate::run::Row {
                key: format!("{sz}{name}"),
                nominal_fps: crate::run::nominal_fps(
                    &tester,
                    sz,
                    active.as_deref().unwrap_or(&all),
                ),
                sizes: sz.clone(),
                seed: None,
                search: r,
            });
        }
    }
    let mut setup_checks = Vec::new();
    let mut notes = vec![
        "No DUT probe: an external device's drops are unknown, so loss is frames sent minus \
         frames received, whatever the cause (the device, its queues, the link)."
            .into(),
    ];
    if !x.blocked.is_empty() {
        for (sz, row) in x.sizes.iter().zip(rows.iter()) {
            // The inside streams' throughput as the load of every port: each logical router
            // takes as many frames as at its throughput, most of them to be dropped.
            let load = if row.search.load > 0.0 {
                row.search.load
            } else {
                0.001
            };
            let (c, lines) = separation_trial(&mut tester, sz, &ro.trial, load, &x.blocked, obs);
            setup_checks.extend(c);
            notes.extend(lines);
        }
    }
    let mut loss = Vec::new();
    let mut b2b = Vec::new();
    for sz in &x.sizes {
        if ro.loss_vs_load {
            loss.push((
                sz.to_string(),
                procedures::loss_vs_load(&mut tester, sz, &ro.trial, 1.0, obs),
            ));
        }
        if let Some(max) = ro.back_to_back {
            let (n, _) = procedures::back_to_back(&mut tester, sz, &ro.trial, 1.0, max, obs);
            b2b.push((sz.to_string(), n));
        }
    }
    let nports = tester.ports.len();
    drop(tester);
    let info = ExternalInfo {
        dut: x.dut_path.display().to_string(),
        dut_api: x.dut_api.map(|p| p.display().to_string()),
        ports: port_reports(&x.dut, &eports),
        priming,
        priming_fps: PRIME_FPS,
        tester_core,
        latency_floor,
    };
    Ok(crate::run::ScenarioReport {
        id: "external".into(),
        title: format!("{}: {}", x.dut_path.display(), x.what),
        seed_title: "(none: an external device)".into(),
        routes: (0, 0),
        flows,
        streams: nstreams,
        ports: nports,
        port_names: (0..nports).map(|i| format!("port {i}")).collect(),
        workers: 0,
        worker_cores: vec![],
        tester_core,
        cpu: crate::run::cpu_model(),
        trial_seconds: ro.trial.seconds,
        seed_seconds: 0.0,
        tolerance,
        resolution: ro.resolution,
        build_s: 0.0,
        ring: 0,
        rows,
        loss,
        back_to_back: b2b,
        fixed_load: ro.fixed_load,
        storm: vec![],
        hot_swap: None,
        services: None,
        learning: None,
        failover: None,
        switching: None,
        multicast: None,
        notes,
        external: Some(info),
        gtp: Vec::new(),
        soak: Vec::new(),
        setup_checks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    struct VecRx(Vec<Vec<u8>>);
    impl RxQueue for VecRx {
        fn rx_burst(&mut self, cache: &mut BufCache, out: &mut Vec<PktBuf>, max: usize) -> usize {
            let n = self.0.len().min(max);
            for f in self.0.drain(..n) {
                let mut b = cache.alloc().unwrap();
                b.fill(&f);
                b.meta_mut().owner_tag = 60;
                out.push(b);
            }
            n
        }
    }

    struct VecTx(Arc<StdMutex<Vec<Vec<u8>>>>);
    impl TxQueue for VecTx {
        fn tx_burst(&mut self, pkts: &mut Vec<PktBuf>, cache: &mut BufCache) -> usize {
            let n = pkts.len();
            for b in pkts.drain(..) {
                self.0.lock().unwrap().push(b.data().to_vec());
                cache.free(b);
            }
            n
        }
    }

    const DUT_MAC: [u8; 6] = [2, 0, 0, 0, 0xd, 1];
    const ME: [u8; 6] = [2, 0, 0, 0, 0xe, 2];

    fn responder(frames: Vec<Vec<u8>>) -> (Responder, Arc<StdMutex<Vec<Vec<u8>>>>) {
        let sent = Arc::new(StdMutex::new(Vec::new()));
        let r = Responder::new(
            Box::new(VecRx(frames)),
            Box::new(VecTx(sent.clone())),
            vec![
                Emulated {
                    vlan: None,
                    ip: "198.18.1.2".parse().unwrap(),
                    mac: ME,
                },
                Emulated {
                    vlan: None,
                    ip: "2001:db8:1::2".parse().unwrap(),
                    mac: ME,
                },
                Emulated {
                    vlan: Some(100),
                    ip: "198.18.9.2".parse().unwrap(),
                    mac: ME,
                },
            ],
            Arc::new(ControlStats::default()),
        );
        (r, sent)
    }

    fn data(n: u8) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[12] = 0x08; // IPv4
        f[59] = n;
        f
    }

    fn v4(s: &str) -> u32 {
        u32::from(s.parse::<std::net::Ipv4Addr>().unwrap())
    }

    fn v6(s: &str) -> [u8; 16] {
        s.parse::<std::net::Ipv6Addr>().unwrap().octets()
    }

    #[test]
    fn arp_for_an_emulated_address_is_answered_and_taken_out() {
        let who_has = |ip: &str, vlan| {
            arp_frame(
                arp::REQUEST,
                vlan,
                [0xff; 6],
                (DUT_MAC, v4("198.18.1.1")),
                ([0; 6], v4(ip)),
            )
        };
        let frames = vec![
            data(1),
            who_has("198.18.1.2", None),
            data(2),
            who_has("198.18.1.77", None),     // not ours
            who_has("198.18.9.2", Some(100)), // ours, on the sub-interface
            who_has("198.18.9.2", None),      // ours, but not on the untagged link
            data(3),
        ];
        let (mut r, sent) = responder(frames);
        let pool = Pool::new(64);
        let mut cache = BufCache::new(pool.clone());
        let mut out = Vec::new();
        assert_eq!(r.rx_burst(&mut cache, &mut out, 64), 3);
        // The test frames, in their order, untouched.
        let last: Vec<u8> = out.iter().map(|b| b.data()[59]).collect();
        assert_eq!(last, vec![1, 2, 3]);
        assert!(out.iter().all(|b| b.meta().owner_tag == 60));
        cache.free_all(&mut out);
        let c = r.stats.counts();
        assert_eq!((c.arp_answered, c.arp_other), (2, 2));
        let sent = sent.lock().unwrap();
        assert_eq!(sent.len(), 2);
        // A reply to the asker, from the emulated MAC, with the asked address as sender.
        let a = arp::Repr::parse(&sent[0][14..]).unwrap();
        assert_eq!(&sent[0][0..6], &DUT_MAC);
        assert_eq!(&sent[0][6..12], &ME);
        assert_eq!(a.op, arp::REPLY);
        assert_eq!((a.sender_mac.0, a.sender_ip), (ME, v4("198.18.1.2")));
        assert_eq!((a.target_mac.0, a.target_ip), (DUT_MAC, v4("198.18.1.1")));
        assert_eq!(sent[0].len(), 60);
        // Tagged in, tagged out.
        assert_eq!(&sent[1][12..16], &[0x81, 0, 0, 100]);
        // The asker was learned.
        assert_eq!(
            r.stats.learned_mac(None, "198.18.1.1".parse().unwrap()),
            Some(DUT_MAC)
        );
    }

    #[test]
    fn a_neighbour_solicitation_gets_a_solicited_advertisement() {
        let dut_ip = v6("2001:db8:1::1");
        let me_ip = v6("2001:db8:1::2");
        let group = nd::solicited_node(&me_ip);
        let ns = |target: [u8; 16], src: [u8; 16]| {
            nd_frame(
                None,
                None,
                (nd::multicast_mac(&group).0, DUT_MAC),
                src,
                group,
                target,
                DUT_MAC,
            )
        };
        let mut mld = ns(me_ip, dut_ip);
        mld[14 + 40] = 143; // an MLDv2 report: absorbed, not answered (its checksum is off too)
        let frames = vec![
            ns(me_ip, dut_ip),
            ns(nd::link_local(MacAddr(ME)), v6("fe80::1")),
            ns(me_ip, [0; 16]), // duplicate address detection: not answered
            mld,
            data(9),
        ];
        let (mut r, sent) = responder(frames);
        let pool = Pool::new(64);
        let mut cache = BufCache::new(pool.clone());
        let mut out = Vec::new();
        assert_eq!(r.rx_burst(&mut cache, &mut out, 64), 1);
        cache.free_all(&mut out);
        let c = r.stats.counts();
        assert_eq!((c.ns_answered, c.nd_other), (2, 2));
        let sent = sent.lock().unwrap();
        let f = &sent[0];
        let (src, dst): ([u8; 16], [u8; 16]) =
            (f[22..38].try_into().unwrap(), f[38..54].try_into().unwrap());
        assert_eq!((src, dst), (me_ip, dut_ip));
        assert_eq!(f[21], 255);
        let na = nd::Repr::parse(&f[54..], &src, &dst, 255).expect("a valid advertisement");
        assert_eq!(na.msg_type, nd::NEIGHBOR_ADVERT);
        assert_eq!(na.target, me_ip);
        assert_eq!(na.lladdr, Some(MacAddr(ME)));
        assert_eq!(na.flags, nd::FLAG_SOLICITED | nd::FLAG_OVERRIDE);
        assert_eq!(&f[0..6], &DUT_MAC);
        assert_eq!(
            r.stats.learned_mac(None, IpAddr::from(dut_ip)),
            Some(DUT_MAC)
        );
    }

    #[test]
    fn an_answer_is_the_testers_only_on_the_testers_own_evidence() {
        use crate::procedures::Throughput;
        let trial = |tx_fps: f64, limited: bool, drops: u64| TrialResult {
            tx_fps,
            tester_limited: limited,
            tester_drops: drops,
            ..Default::default()
        };
        let search = |trials: Vec<(f64, bool, TrialResult)>| {
            let best = trials
                .iter()
                .filter(|t| t.1)
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|t| (t.0, t.2.clone()));
            Throughput {
                load: best.as_ref().map_or(0.0, |b| b.0),
                best: best.map(|b| b.1),
                at_max: trials[0].2.clone(),
                trials,
                tester_limited: true,
            }
        };
        // 100% could not be offered, but the device lost frames at twice the answer: its own.
        let s = search(vec![
            (1.0, false, trial(100_000.0, true, 0)),
            (0.01, true, trial(50_000.0, false, 0)),
            (0.011, false, trial(55_000.0, false, 0)),
        ]);
        assert!(!tester_bound(&s));
        // The passing trial itself fell short: a floor.
        let s = search(vec![
            (1.0, false, trial(100_000.0, true, 0)),
            (0.5, true, trial(60_000.0, true, 0)),
        ]);
        assert!(tester_bound(&s));
        // A failure above the answer at about the answer's rate on the wire: loss is counted
        // from what reached the wire, so the frames were the device's to lose (the first
        // trial's shortfall was the tester's rings refusing, which cost nothing).
        let s = search(vec![
            (1.0, false, trial(50_100.0, true, 0)),
            (0.5, true, trial(50_000.0, false, 0)),
        ]);
        assert!(!tester_bound(&s));
        // The tester's own rings dropped frames in a failed trial: its loss, not the device's.
        let s = search(vec![
            (1.0, false, trial(100_000.0, true, 7)),
            (0.5, true, trial(50_000.0, false, 0)),
        ]);
        assert!(tester_bound(&s));
    }

    #[test]
    fn port_maps_parse() {
        let m: PortMap = "p0=veth-t0".parse().unwrap();
        assert_eq!((m.dut_port.as_str(), m.device.as_str()), ("p0", "veth-t0"));
        assert!("p0".parse::<PortMap>().is_err());
        assert!("=t0".parse::<PortMap>().is_err());
    }

    const DUT_FLOW: &str = r#"router: { workers: 1 }
ports:
  - { name: p0, driver: af_packet, device: d0 }
  - { name: p1, driver: af_packet, device: d1 }
interfaces:
  - { name: p0, port: p0, ipv4: [198.18.0.1/24] }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [198.18.1.1/24] }
neighbors:
  - { interface: p0, ip: 198.18.0.2, mac: "02:00:00:00:00:02" }
  - { interface: p1, ip: 198.18.1.2, mac: "02:00:00:00:01:02" }
"#;

    const DUT_BLOCK: &str = r#"router: { workers: 1 }
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
interfaces:
  - name: p0
    port: p0
    ipv4: [198.18.0.1/24]
  - name: p1
    port: p1
    ipv4: [198.18.1.1/24]
neighbors:
  - { interface: p0, ip: 198.18.0.2, mac: "02:00:00:00:00:02" }
  - { interface: p1, ip: 198.18.1.2, mac: "02:00:00:00:01:02" }
"#;

    #[test]
    fn an_interface_may_leave_its_mac_to_be_resolved() {
        let d = parse_dut(DUT_FLOW, Path::new("dut.yaml")).unwrap();
        assert_eq!(d.resolve, vec!["p0".to_string()]);
        assert_eq!(d.cfg.interfaces[1].mac.0, [2, 0, 0, 0, 1, 1]);
        let e = emulated_on(&d.cfg, "p1");
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].mac, [2, 0, 0, 0, 1, 2]);
        let d = parse_dut(DUT_BLOCK, Path::new("dut.yaml")).unwrap();
        assert_eq!(d.resolve, vec!["p0".to_string(), "p1".to_string()]);
        assert_eq!(d.cfg.interfaces[1].ipv4, vec![(v4("198.18.1.1"), 24)]);
    }

    #[test]
    fn errors_keep_the_files_own_line_numbers() {
        // Line 13: a neighbour on an interface that does not exist, after two block maps that
        // each got a line inserted.
        let bad = DUT_BLOCK.replace(
            "  - { interface: p1, ip: 198.18.1.2,",
            "  - { interface: p9, ip: 198.18.1.2,",
        );
        let line = bad.lines().position(|l| l.contains("p9")).unwrap() + 1;
        let e = parse_dut(&bad, Path::new("dut.yaml")).unwrap_err();
        assert!(e.contains(&format!("dut.yaml:{line}:")), "{e}");
        assert!(!e.contains("`mac` is required"), "{e}");
        let e = parse_dut(
            &DUT_FLOW.replace("198.18.0.1/24", "198.18.0.1/99"),
            Path::new("d"),
        )
        .unwrap_err();
        assert!(e.contains("d:6:"), "{e}");
    }
}
