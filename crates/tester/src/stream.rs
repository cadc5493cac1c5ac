//! Streams: what the generator sends. A stream goes from one tester port to one expected receiving
//! port and has fixed headers (Ethernet, optional 802.1Q tag, optionally a GTP-U tunnel or an MPLS
//! label stack, IPv4 or IPv6, optional UDP) whose fields may vary frame by frame, so one stream
//! can carry millions of flows.
//!
//! A stream is compiled into one template per frame size: the header bytes followed by the start
//! of the payload pattern, so building a frame is one fixed-size copy, a few field writes, the
//! checksums and the signature. The payload pattern is a function of the distance from the
//! signature, so the analyzer can check it whatever the device did to the L2 header.

use std::sync::Arc;

use packet::checksum;

use crate::load::FCS;
use crate::signature;

/// The header fields a stream can vary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    SrcMac,
    DstMac,
    VlanId,
    SrcIp,
    DstIp,
    SrcPort,
    DstPort,
    /// IPv6 flow label (20 bits).
    FlowLabel,
    /// The GTP-U tunnel's TEID (a [`Gtpu`] stream): a list of TEIDs in lockstep with a list of
    /// inner source addresses sends each context's frames in its own tunnel.
    Teid,
    /// The bottom label of an [`Mpls`] stream's stack (a pseudowire's or a VPN's): a list of
    /// labels sends frames down that many pseudowires or VPN routes.
    Label,
}

/// How a field varies from frame to frame. Step and Random start from the header's value.
#[derive(Debug, Clone)]
pub enum Vary {
    /// base, base+step, ... `count` values, then round again.
    Step { count: u32, step: u128 },
    /// A uniformly random one of the `count` values base, base+1, ...
    Random { count: u32 },
    /// These values in turn (one destination per route).
    List(Arc<[u128]>),
}

#[derive(Debug, Clone)]
pub struct Field {
    pub kind: FieldKind,
    pub vary: Vary,
    /// Steps only when the field before it wraps (nested loops: every combination), instead of
    /// on every frame.
    pub nested: bool,
}

impl Field {
    /// Frames from (`SrcMac`) or to (`DstMac`) `count` consecutive addresses, one each, as the
    /// RFC 2889 learning procedures send them (at least one).
    pub fn each_address(kind: FieldKind, count: u32) -> Vec<Field> {
        vec![Field {
            kind,
            vary: Vary::Step {
                count: count.max(1),
                step: 1,
            },
            nested: false,
        }]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L3 {
    V4 { src: [u8; 4], dst: [u8; 4] },
    V6 { src: [u8; 16], dst: [u8; 16] },
}

/// An outer IPv4/UDP/GTP-U header before the stream's own IP header: the stream is a user's
/// traffic in an SGSN's tunnel to a GGSN (TS 29.060 G-PDU, no optional fields, UDP checksum 0).
/// The frame size a stream is asked for is the inner packet's Ethernet size; on the wire the
/// frame is [`Gtpu::OVERHEAD`] bytes longer, as the seed's GGSN sizes are the user's packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gtpu {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub teid: u32,
}

impl Gtpu {
    /// Outer IPv4 (20), UDP (8) and GTP-U (8) headers.
    pub const OVERHEAD: usize = 36;
}

/// A label stack after the Ethernet header: the frames a core router sends to a PE. Under the
/// stack is the stream's IP packet (a labelled route, a VPN's), or with `pw` a customer's whole
/// Ethernet frame (a pseudowire's, RFC 4448) behind the control word (RFC 4385) if it has one.
///
/// The frame size a stream is asked for is what is under the stack: the customer's frame for a
/// pseudowire (the seeds quote pseudowire tests by the CE's frame size), else the IP packet's
/// untagged Ethernet frame; on the wire the frame is [`StreamSpec::encap_len`] bytes longer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mpls {
    /// Outermost first, at most [`Mpls::MAX_LABELS`]; each sent with TTL 64, traffic class 0.
    pub labels: Vec<u32>,
    pub pw: Option<PwFrame>,
}

impl Mpls {
    /// Labels a stream may carry (the router reads four; the header copy holds four).
    pub const MAX_LABELS: usize = 4;
}

/// The customer frame a pseudowire stream carries: the stream's IP packet behind this Ethernet
/// header (its `vlan` the CE's tag: a type 4 pseudowire's frames are tagged, type 5's need not be).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PwFrame {
    pub control_word: bool,
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub vlan: Option<u16>,
}

#[derive(Debug, Clone)]
pub struct StreamSpec {
    pub name: String,
    /// Tester port it leaves from.
    pub tx_port: usize,
    /// Tester port it must arrive on; anywhere else is a misdelivery.
    pub rx_port: usize,
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub vlan: Option<u16>,
    pub l3: L3,
    /// UDP source and destination ports; None sends the signature straight after the IP header
    /// (IPv4 protocol 253, IPv6 next header 59), as testers do for 78-byte IPv6 frames.
    pub udp: Option<(u16, u16)>,
    pub ttl: u8,
    pub dscp: u8,
    pub fields: Vec<Field>,
    /// Share of its port's load, relative to the port's other streams (1.0 each by default).
    pub weight: f64,
    /// Frames smaller than this are sent at this size (an IPv6 stream in a mix whose smallest
    /// frame cannot carry it: testers send IMIX's 64-byte frames as 78 bytes for IPv6). 0: none.
    pub min_size: u16,
    /// More ports that must each receive every frame (a multicast stream's receivers besides
    /// `rx_port`): each (stream, port) is a receiver, counted on its own.
    pub also_rx: Vec<usize>,
    /// The destination MAC follows the destination address: the group's multicast MAC (RFC
    /// 1112 6.4, RFC 2464 7), whatever the address fields make it.
    pub multicast_mac: bool,
    /// Sent inside a GTP-U tunnel (uplink user traffic to a GGSN).
    pub tunnel: Option<Gtpu>,
    /// Sent under a label stack (from the MPLS core). Not with `tunnel`.
    pub mpls: Option<Mpls>,
}

impl StreamSpec {
    /// Bytes of headers before the payload (the tunnel's or the label stack's included).
    pub fn header_len(&self) -> usize {
        self.l3_off()
            + match self.l3 {
                L3::V4 { .. } => 20,
                L3::V6 { .. } => 40,
            }
            + if self.udp.is_some() { 8 } else { 0 }
    }

    /// The wire frame's own Ethernet header (with its tag, if any).
    fn eth_len(&self) -> usize {
        14 + if self.vlan.is_some() { 4 } else { 0 }
    }

    /// Where the stream's IP header starts in the frame.
    pub fn l3_off(&self) -> usize {
        let mut at = self.eth_len();
        if self.tunnel.is_some() {
            at += Gtpu::OVERHEAD;
        }
        if let Some(m) = &self.mpls {
            at += 4 * m.labels.len();
            if let Some(pw) = &m.pw {
                at += if pw.control_word { 4 } else { 0 } + 14;
                at += if pw.vlan.is_some() { 4 } else { 0 };
            }
        }
        at
    }

    /// Bytes the encapsulation adds to the size asked for (0 without one): a tunnel's headers;
    /// a label stack; for a pseudowire, the core's Ethernet header, the stack and the control
    /// word.
    pub fn encap_len(&self) -> usize {
        if self.tunnel.is_some() {
            return Gtpu::OVERHEAD;
        }
        match &self.mpls {
            None => 0,
            Some(m) => match &m.pw {
                None => 4 * m.labels.len(),
                Some(pw) => {
                    self.eth_len() + 4 * m.labels.len() + if pw.control_word { 4 } else { 0 }
                }
            },
        }
    }

    /// The smallest frame size (FCS included, the encapsulation not counted) that holds the
    /// headers and the signature.
    pub fn min_frame(&self) -> usize {
        (self.header_len() - self.encap_len() + signature::LEN + FCS).max(64)
    }

    /// The customer's 802.1Q tag: the pseudowire frame's, else the frame's own.
    fn customer_vlan(&self) -> Option<u16> {
        match &self.mpls {
            Some(Mpls { pw: Some(pw), .. }) => pw.vlan,
            _ => self.vlan,
        }
    }

    pub fn is_v6(&self) -> bool {
        matches!(self.l3, L3::V6 { .. })
    }

    /// Distinct flows the stream carries (combinations of varying fields), saturating. Fields
    /// that are not nested step on every frame together, so deterministic ones repeat after the
    /// least common multiple of their periods (a list of TEIDs in lockstep with a list of
    /// addresses is one flow per pair); random ones combine with everything.
    pub fn flows(&self) -> u64 {
        fn gcd(a: u64, b: u64) -> u64 {
            if b == 0 {
                a
            } else {
                gcd(b, a % b)
            }
        }
        let mut total: u64 = 1;
        let mut group: u64 = 1;
        let mut group_random = false;
        let close = |total: u64, group: u64, random: bool| {
            if random {
                total.saturating_mul(group)
            } else {
                (total / gcd(total, group)).saturating_mul(group)
            }
        };
        for f in &self.fields {
            let n = match &f.vary {
                Vary::Step { count, .. } | Vary::Random { count } => *count as u64,
                Vary::List(l) => l.len() as u64,
            };
            let random = matches!(f.vary, Vary::Random { .. });
            if f.nested {
                group = group.saturating_mul(n);
                group_random |= random;
            } else {
                total = close(total, group, group_random);
                group = n;
                group_random = random;
            }
        }
        close(total, group, group_random)
    }

    /// Checks the spec can be built at every size of `sizes`; the message names the stream.
    pub fn validate(&self, sizes: &[u16], ports: usize) -> Result<(), String> {
        let n = &self.name;
        if self.tx_port >= ports
            || self.rx_port >= ports
            || self.also_rx.iter().any(|&p| p >= ports)
        {
            return Err(format!("stream {n}: port index beyond the {ports} ports"));
        }
        for (i, p) in self.also_rx.iter().enumerate() {
            if *p == self.rx_port || self.also_rx[..i].contains(p) {
                return Err(format!("stream {n}: port {p} is a receiver twice"));
            }
        }
        if let Some(&s) = sizes
            .iter()
            .find(|&&s| (s.max(self.min_size) as usize) < self.min_frame())
        {
            return Err(format!(
                "stream {n}: a {s}-byte frame cannot hold its headers and the 16-byte signature \
                 (at least {} bytes{})",
                self.min_frame(),
                if self.is_v6() && self.udp.is_some() {
                    "; an IPv6 stream without UDP fits 78 bytes"
                } else {
                    ""
                }
            ));
        }
        if matches!(self.vlan, Some(v) if v == 0 || v > 4094)
            || matches!(self.customer_vlan(), Some(v) if v == 0 || v > 4094)
        {
            return Err(format!("stream {n}: VLAN id must be 1..=4094"));
        }
        if let Some(m) = &self.mpls {
            if self.tunnel.is_some() {
                return Err(format!(
                    "stream {n}: a label stack and a GTP-U tunnel together"
                ));
            }
            if m.labels.is_empty() || m.labels.len() > Mpls::MAX_LABELS {
                return Err(format!(
                    "stream {n}: a label stack holds 1 to {} labels",
                    Mpls::MAX_LABELS
                ));
            }
            if let Some(l) = m.labels.iter().find(|&&l| l > 0xf_ffff) {
                return Err(format!(
                    "stream {n}: label {l} is beyond 20 bits (0..=1048575)"
                ));
            }
        }
        for f in &self.fields {
            let ok = match f.kind {
                FieldKind::VlanId => self.customer_vlan().is_some(),
                FieldKind::SrcPort | FieldKind::DstPort => self.udp.is_some(),
                FieldKind::FlowLabel => self.is_v6(),
                FieldKind::Teid => self.tunnel.is_some(),
                FieldKind::Label => self.mpls.is_some(),
                _ => true,
            };
            if !ok {
                return Err(format!(
                    "stream {n}: varies {:?}, which its headers do not have",
                    f.kind
                ));
            }
            match &f.vary {
                Vary::Step { count: 0, .. } | Vary::Random { count: 0 } => {
                    return Err(format!(
                        "stream {n}: a varying field needs a count of 1 or more"
                    ))
                }
                Vary::List(l) if l.is_empty() => {
                    return Err(format!("stream {n}: a list of values must not be empty"))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Bytes copied from a template into every frame: all headers (at most 18 + 36 + 40 + 8 with a
/// tunnel, 18 + 16 + 4 + 18 + 40 + 8 for a pseudowire) and the start of the payload.
pub const HDR_COPY: usize = 112;
const PATTERN_LEN: usize = dataplane::buffer::MAX_FRAME;

/// The payload pattern, indexed from its end: the byte `d` bytes before the signature is
/// `PATTERN[PATTERN_LEN - 1 - d]`.
static PATTERN: [u8; PATTERN_LEN] = {
    let mut p = [0u8; PATTERN_LEN];
    let mut i = 0;
    while i < PATTERN_LEN {
        // Not constant and not periodic over short spans, so a shifted or stuck copy shows.
        p[i] = ((i * 151 + (i >> 8) * 7) as u8) ^ 0x5a;
        i += 1;
    }
    p
};

/// The pattern for a payload of `len` bytes that ends where the signature starts.
#[inline(always)]
pub fn pattern(len: usize) -> &'static [u8] {
    &PATTERN[PATTERN_LEN - len..]
}

/// One stream at one frame size, ready to copy.
#[derive(Clone)]
pub struct Template {
    pub hdr: [u8; HDR_COPY],
    /// Frame length in the buffer (size without FCS).
    pub len: u16,
    pub l3_off: u16,
    pub ip_len: u16,
    pub sig_off: u16,
    /// UDP checksum offset in the frame, or 0 when the frame's L4 checksum is not computed.
    pub l4_csum_off: u16,
    /// One's-complement sum of everything the UDP checksum covers that never varies: the payload
    /// pattern, the UDP length and protocol (IPv6 only; IPv4 sends a zero UDP checksum).
    pub l4_fixed_sum: u32,
    /// The signature starts at an odd offset from the UDP header (odd frame sizes).
    pub sig_odd: bool,
    /// IPv4: the header's one's-complement sum without its checksum and without the addresses
    /// the stream varies, so a frame's checksum is this plus the current addresses.
    pub ip_sum_base: u32,
}

/// The checksum contribution of signature bytes that start at an even offset within `sig`: one's
/// complement sums commute with byte swapping, so bytes at an odd offset from the UDP header
/// count swapped.
#[inline(always)]
fn sig_sum(bytes: &[u8], odd: bool) -> u32 {
    let f = !checksum::fold(checksum::sum(bytes));
    (if odd { f.swap_bytes() } else { f }) as u32
}

/// Where a varying field lives in the frame.
#[derive(Clone, Copy, Debug)]
struct Place {
    off: u16,
    width: u8,
}

/// A varying field's run-time state.
#[derive(Clone)]
pub struct FieldGen {
    place: Place,
    /// An IPv4 address: part of the IPv4 header checksum.
    v4_addr: bool,
    nested: bool,
    base: u128,
    step: u128,
    count: u32,
    idx: u32,
    cur: u128,
    random: bool,
    list: Option<Arc<[u128]>>,
}

/// A stream as the generator runs it.
#[derive(Clone)]
pub struct GenStream {
    pub templates: Vec<Template>,
    pub fields: Vec<FieldGen>,
    /// The destination MAC follows the destination address (a multicast group's).
    pub multicast_mac: bool,
    pub v6: bool,
    pub udp: bool,
    pub seq: u32,
    pub tx: u64,
    rng: u64,
}

/// Width code of a label: the top 20 bits of a 4-byte stack entry.
const LABEL_WIDTH: u8 = 32;

fn place_of(spec: &StreamSpec, kind: FieldKind) -> Place {
    let eth = spec.eth_len();
    // The stream's own IP header, after the tunnel's or the label stack's.
    let l2 = spec.l3_off();
    let labels = spec.mpls.as_ref().map_or(0, |m| m.labels.len());
    // The customer's tag: the pseudowire frame's, after the stack and the control word.
    let tag = match &spec.mpls {
        Some(Mpls { pw: Some(pw), .. }) => {
            eth + 4 * labels + if pw.control_word { 4 } else { 0 } + 14
        }
        _ => 14,
    };
    let (src, dst, w) = match spec.l3 {
        L3::V4 { .. } => (l2 + 12, l2 + 16, 4),
        L3::V6 { .. } => (l2 + 8, l2 + 24, 16),
    };
    let l4 = l2 + if spec.is_v6() { 40 } else { 20 };
    let (off, width) = match kind {
        FieldKind::DstMac => (0, 6),
        FieldKind::SrcMac => (6, 6),
        FieldKind::VlanId => (tag, 12),
        FieldKind::SrcIp => (src, w),
        FieldKind::DstIp => (dst, w),
        FieldKind::SrcPort => (l4, 2),
        FieldKind::DstPort => (l4 + 2, 2),
        FieldKind::FlowLabel => (l2, 20),
        FieldKind::Teid => (eth + 32, 4),
        FieldKind::Label => (eth + 4 * labels.saturating_sub(1), LABEL_WIDTH),
    };
    Place {
        off: off as u16,
        width,
    }
}

#[inline(always)]
fn read_field(h: &[u8], p: Place) -> u128 {
    let o = p.off as usize;
    match p.width {
        2 => u16::from_be_bytes([h[o], h[o + 1]]) as u128,
        4 => u32::from_be_bytes(h[o..o + 4].try_into().unwrap()) as u128,
        6 => {
            let mut b = [0u8; 8];
            b[2..].copy_from_slice(&h[o..o + 6]);
            u64::from_be_bytes(b) as u128
        }
        12 => (u16::from_be_bytes([h[o], h[o + 1]]) & 0x0fff) as u128,
        20 => (u32::from_be_bytes(h[o..o + 4].try_into().unwrap()) & 0xf_ffff) as u128,
        LABEL_WIDTH => (u32::from_be_bytes(h[o..o + 4].try_into().unwrap()) >> 12) as u128,
        _ => u128::from_be_bytes(h[o..o + 16].try_into().unwrap()),
    }
}

#[inline(always)]
fn write_field(h: &mut [u8], p: Place, v: u128) {
    let o = p.off as usize;
    match p.width {
        2 => h[o..o + 2].copy_from_slice(&(v as u16).to_be_bytes()),
        4 => h[o..o + 4].copy_from_slice(&(v as u32).to_be_bytes()),
        6 => h[o..o + 6].copy_from_slice(&(v as u64).to_be_bytes()[2..]),
        12 => {
            let w = u16::from_be_bytes([h[o], h[o + 1]]) & 0xf000 | (v as u16 & 0x0fff);
            h[o..o + 2].copy_from_slice(&w.to_be_bytes());
        }
        20 => {
            let cur = u32::from_be_bytes(h[o..o + 4].try_into().unwrap());
            let w = cur & 0xfff0_0000 | (v as u32 & 0xf_ffff);
            h[o..o + 4].copy_from_slice(&w.to_be_bytes());
        }
        LABEL_WIDTH => {
            let cur = u32::from_be_bytes(h[o..o + 4].try_into().unwrap());
            let w = cur & 0xfff | (v as u32) << 12;
            h[o..o + 4].copy_from_slice(&w.to_be_bytes());
        }
        _ => h[o..o + 16].copy_from_slice(&v.to_be_bytes()),
    }
}

fn header(spec: &StreamSpec, size: u16) -> Template {
    let len = size as usize - FCS + spec.encap_len();
    let mut h = [0u8; HDR_COPY];
    // The EtherType is written below, by family.
    let l3 = packet::ethernet::Header {
        dst: packet::ethernet::MacAddr(spec.dst_mac),
        src: packet::ethernet::MacAddr(spec.src_mac),
        tags: packet::ethernet::Tags::from_vlan(spec.vlan),
        ethertype: 0,
    }
    .emit(&mut h)
    .expect("HDR_COPY holds the Ethernet header");
    let eth_end = l3;
    let l3 = spec.l3_off();
    // The IP packet's EtherType: the frame's own, or the pseudowire frame's under the stack.
    let off = l3 - 2;
    let ip_len = len - l3;
    let hdr_end = spec.header_len();
    let sig_off = l3 + ip_len - signature::LEN;
    let mut l4_csum_off = 0;
    let mut l4_fixed_sum = 0u32;
    match spec.l3 {
        L3::V4 { src, dst } => {
            h[off..off + 2].copy_from_slice(&0x0800u16.to_be_bytes());
            let ip = &mut h[l3..l3 + 20];
            ip[0] = 0x45;
            ip[1] = spec.dscp << 2;
            ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
            ip[6] = 0x40; // DF: test frames are never fragmented on the way
            ip[8] = spec.ttl;
            ip[9] = if spec.udp.is_some() { 17 } else { 253 };
            ip[12..16].copy_from_slice(&src);
            ip[16..20].copy_from_slice(&dst);
            let c = checksum::fold(checksum::sum(ip));
            ip[10..12].copy_from_slice(&c.to_be_bytes());
        }
        L3::V6 { src, dst } => {
            h[off..off + 2].copy_from_slice(&0x86ddu16.to_be_bytes());
            let ip = &mut h[l3..l3 + 40];
            let vtf = 6u32 << 28 | (spec.dscp as u32) << 22;
            ip[0..4].copy_from_slice(&vtf.to_be_bytes());
            ip[4..6].copy_from_slice(&((ip_len - 40) as u16).to_be_bytes());
            ip[6] = if spec.udp.is_some() { 17 } else { 59 };
            ip[7] = spec.ttl;
            ip[8..24].copy_from_slice(&src);
            ip[24..40].copy_from_slice(&dst);
        }
    }
    if let Some(t) = spec.tunnel {
        write_tunnel(&mut h[eth_end - 2..], &t, (len - eth_end) as u16);
    }
    if let Some(m) = &spec.mpls {
        write_stack(&mut h[eth_end - 2..], m);
    }
    if let Some((sp, dp)) = spec.udp {
        let l4 = hdr_end - 8;
        let ulen = (l3 + ip_len - l4) as u16;
        h[l4..l4 + 2].copy_from_slice(&sp.to_be_bytes());
        h[l4 + 2..l4 + 4].copy_from_slice(&dp.to_be_bytes());
        h[l4 + 4..l4 + 6].copy_from_slice(&ulen.to_be_bytes());
        if spec.is_v6() {
            l4_csum_off = (l4 + 6) as u16;
            // UDP length twice (pseudo-header and header), next header, and the pattern.
            let payload = pattern(sig_off - hdr_end);
            // The payload starts on an even offset (headers are even); sum() pads an odd
            // length's last byte as a high half, the signature supplies the low half (see
            // sig_sum).
            let mut s = checksum::sum(payload);
            s += ulen as u32 * 2 + 17;
            l4_fixed_sum = s;
        }
    }
    // The start of the payload pattern after the headers, so the fixed-size copy lays it down.
    let pay = sig_off.saturating_sub(hdr_end);
    let pat = pattern(pay);
    let upto = HDR_COPY.min(sig_off);
    if upto > hdr_end {
        h[hdr_end..upto].copy_from_slice(&pat[..upto - hdr_end]);
    }
    Template {
        hdr: h,
        len: len as u16,
        l3_off: l3 as u16,
        ip_len: ip_len as u16,
        sig_off: sig_off as u16,
        l4_csum_off,
        l4_fixed_sum,
        sig_odd: (sig_off - hdr_end) % 2 == 1,
        ip_sum_base: 0,
    }
}

/// The tunnel's headers: `h` starts at the EtherType (the outer header is IPv4 whatever the
/// stream's own family), `outer_len` is the outer IP packet's length.
fn write_tunnel(h: &mut [u8], t: &Gtpu, outer_len: u16) {
    h[..2].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut h[2..22];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&outer_len.to_be_bytes());
    ip[6] = 0x40;
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&t.src);
    ip[16..20].copy_from_slice(&t.dst);
    let c = checksum::fold(checksum::sum(ip));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let udp = &mut h[22..30];
    udp[0..2].copy_from_slice(&packet::gtp::GTPU_PORT.to_be_bytes());
    udp[2..4].copy_from_slice(&packet::gtp::GTPU_PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&(outer_len - 20).to_be_bytes());
    // The UDP checksum stays 0: IPv4 allows it, and GTP-U senders commonly leave it out.
    packet::gtp::gpdu_header(&mut h[30..38], t.teid, outer_len - Gtpu::OVERHEAD as u16);
}

/// The label stack and, for a pseudowire, the control word and the customer's Ethernet header
/// up to its EtherType (already written by family): `h` starts at the frame's EtherType.
fn write_stack(h: &mut [u8], m: &Mpls) {
    h[..2].copy_from_slice(&0x8847u16.to_be_bytes());
    let mut at = 2;
    for (i, &l) in m.labels.iter().enumerate() {
        let bottom = u32::from(i + 1 == m.labels.len());
        let entry = l << 12 | bottom << 8 | 64;
        h[at..at + 4].copy_from_slice(&entry.to_be_bytes());
        at += 4;
    }
    if let Some(pw) = &m.pw {
        if pw.control_word {
            // RFC 4385's preferred control word: first nibble 0, no flags, sequence 0 (unused).
            h[at..at + 4].fill(0);
            at += 4;
        }
        h[at..at + 6].copy_from_slice(&pw.dst_mac);
        h[at + 6..at + 12].copy_from_slice(&pw.src_mac);
        if let Some(v) = pw.vlan {
            h[at + 12..at + 14].copy_from_slice(&0x8100u16.to_be_bytes());
            h[at + 14..at + 16].copy_from_slice(&v.to_be_bytes());
        }
    }
}

impl GenStream {
    /// Compiles `spec` for `sizes` (already validated). `seed` makes Random fields reproducible.
    pub fn new(spec: &StreamSpec, sizes: &[u16], seed: u64) -> Self {
        let templates: Vec<Template> = sizes
            .iter()
            .map(|&s| header(spec, s.max(spec.min_size)))
            .collect();
        let fields: Vec<FieldGen> = spec
            .fields
            .iter()
            .map(|f| {
                let place = place_of(spec, f.kind);
                let base = read_field(&templates[0].hdr, place);
                let (step, count, random, list) = match &f.vary {
                    Vary::Step { count, step } => (*step, *count, false, None),
                    Vary::Random { count } => (1, *count, true, None),
                    Vary::List(l) => (0, l.len() as u32, false, Some(l.clone())),
                };
                FieldGen {
                    place,
                    v4_addr: !spec.is_v6() && matches!(f.kind, FieldKind::SrcIp | FieldKind::DstIp),
                    nested: f.nested,
                    base,
                    step,
                    count,
                    idx: 0,
                    cur: base,
                    random,
                    list,
                }
            })
            .collect();
        let mut templates = templates;
        if !spec.is_v6() {
            // The checksum base of each size: the header with its checksum and the varied
            // addresses zeroed.
            for t in &mut templates {
                let l3 = t.l3_off as usize;
                let mut h = [0u8; 20];
                h.copy_from_slice(&t.hdr[l3..l3 + 20]);
                h[10] = 0;
                h[11] = 0;
                for f in &fields {
                    if f.v4_addr {
                        let o = f.place.off as usize - l3;
                        h[o..o + 4].fill(0);
                    }
                }
                t.ip_sum_base = checksum::sum(&h);
            }
        }
        let mut g = GenStream {
            templates,
            fields,
            multicast_mac: spec.multicast_mac,
            v6: spec.is_v6(),
            udp: spec.udp.is_some(),
            seq: 0,
            tx: 0,
            rng: seed | 1,
        };
        g.restart(seed);
        g
    }

    /// Mean frame size (FCS included) over a size cycle ([`crate::load::FrameSizes::cycle`]).
    pub fn mean_size(&self, cycle: &[u8]) -> f64 {
        let sum: f64 = cycle
            .iter()
            .map(|&z| (self.templates[z as usize].len as usize + FCS) as f64)
            .sum();
        sum / cycle.len().max(1) as f64
    }

    /// Back to the first frame: sequence 0, every field at its first value.
    pub fn restart(&mut self, seed: u64) {
        self.seq = 0;
        self.tx = 0;
        self.rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        for f in &mut self.fields {
            f.idx = 0;
            f.cur = match &f.list {
                Some(l) => l[0],
                None => f.base,
            };
        }
        // Random fields draw their first value too.
        let mut rng = self.rng;
        for f in &mut self.fields {
            if f.random {
                f.cur = f.base + draw(&mut rng, f.count) as u128;
            }
        }
        self.rng = rng;
    }

    /// Moves every varying field to its next value.
    #[inline(always)]
    fn advance(&mut self) {
        let mut carry = true;
        for f in &mut self.fields {
            if f.nested && !carry {
                continue;
            }
            carry = false;
            if f.random {
                f.cur = f.base + draw(&mut self.rng, f.count) as u128;
                continue;
            }
            f.idx += 1;
            if f.idx == f.count {
                f.idx = 0;
                carry = true;
            }
            f.cur = match &f.list {
                Some(l) => l[f.idx as usize],
                None => f.base.wrapping_add(f.step.wrapping_mul(f.idx as u128)),
            };
        }
    }

    /// Writes the next frame of size index `z` into `frame` (which must be `templates[z].len`
    /// long), all but the time; `payload_ok` says the bytes beyond the header copy already hold
    /// this size's pattern. Returns the partial L4 checksum sum (IPv6 UDP) for [`finish`].
    #[inline(always)]
    pub fn build(
        &mut self,
        z: usize,
        frame: &mut [u8],
        trial: u8,
        id: u32,
        payload_ok: bool,
    ) -> u32 {
        let t = &self.templates[z];
        let len = t.len as usize;
        let sig_off = t.sig_off as usize;
        let n = HDR_COPY.min(len);
        frame[..n].copy_from_slice(&t.hdr[..n]);
        if !payload_ok && sig_off > HDR_COPY {
            frame[HDR_COPY..sig_off].copy_from_slice(pattern(sig_off - HDR_COPY));
        }
        for f in &self.fields {
            write_field(frame, f.place, f.cur);
        }
        let l3 = t.l3_off as usize;
        if self.multicast_mac {
            if self.v6 {
                frame[..2].copy_from_slice(&[0x33, 0x33]);
                frame.copy_within(l3 + 36..l3 + 40, 2);
            } else {
                frame[..3].copy_from_slice(&[0x01, 0x00, 0x5e]);
                frame.copy_within(l3 + 17..l3 + 20, 3);
                frame[3] &= 0x7f;
            }
        }
        let l4_csum_off = t.l4_csum_off as usize;
        let fixed = t.l4_fixed_sum;
        let odd = t.sig_odd;
        signature::write_ids(&mut frame[sig_off..sig_off + 16], trial, id, self.seq);
        let mut l4_sum = 0;
        if self.v6 {
            if l4_csum_off != 0 {
                // Addresses (pseudo-header), UDP ports, the signature's fixed words.
                let mut s = fixed + checksum::sum(&frame[l3 + 8..l3 + 40]);
                s += checksum::sum(&frame[l4_csum_off - 6..l4_csum_off - 2]);
                l4_sum = s + sig_sum(&frame[sig_off..sig_off + 12], odd);
            }
        } else {
            // The template's checksum holds unless an address varies; then it is the base plus
            // the current addresses (no reading back of what was just written).
            let mut s = t.ip_sum_base;
            let mut varies = false;
            for f in &self.fields {
                if f.v4_addr {
                    let a = f.cur as u32;
                    s += (a >> 16) + (a & 0xffff);
                    varies = true;
                }
            }
            if varies {
                let c = checksum::fold(s);
                frame[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
            }
        }
        self.seq = self.seq.wrapping_add(1);
        self.tx += 1;
        self.advance();
        l4_sum
    }
}

/// The generator's second pass, when the burst is about to leave: the time, the check value and
/// the L4 checksum that covers them.
#[inline(always)]
pub fn finish(t: &Template, frame: &mut [u8], tx_ns: u32, l4_sum: u32) {
    let sig_off = t.sig_off as usize;
    let sig = &mut frame[sig_off..sig_off + 16];
    signature::write_time(sig, tx_ns, t.ip_len);
    if t.l4_csum_off != 0 {
        let s = l4_sum + sig_sum(&sig[2..4], t.sig_odd) + sig_sum(&sig[12..16], t.sig_odd);
        let mut c = checksum::fold(s);
        if c == 0 {
            c = 0xffff;
        }
        let o = t.l4_csum_off as usize;
        frame[o..o + 2].copy_from_slice(&c.to_be_bytes());
    }
}

/// A uniformly distributed number below `n` (xorshift64*, Lemire's multiply-shift).
#[inline(always)]
fn draw(s: &mut u64, n: u32) -> u32 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    let r = s.wrapping_mul(0x2545_f491_4f6c_dd1d);
    (((r >> 32) * n as u64) >> 32) as u32
}

/// An IPv4/UDP stream from port 0 to port 1 (198.18.0.2:1024 -> 198.19.0.2:5000): for tests,
/// and for the tester's own latency floor ([`crate::floor`]).
pub fn v4_stream() -> StreamSpec {
    StreamSpec {
        name: "s".into(),
        tx_port: 0,
        rx_port: 1,
        src_mac: [2, 0, 0, 0, 0, 2],
        dst_mac: [2, 0, 0, 0, 0, 1],
        vlan: None,
        l3: L3::V4 {
            src: [198, 18, 0, 2],
            dst: [198, 19, 0, 2],
        },
        udp: Some((1024, 5000)),
        ttl: 64,
        dscp: 0,
        fields: vec![],
        weight: 1.0,
        min_size: 0,
        also_rx: Vec::new(),
        multicast_mac: false,
        tunnel: None,
        mpls: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::ethernet::Frame;

    fn build_one(g: &mut GenStream, z: usize, seq_ts: u32) -> Vec<u8> {
        let mut f = vec![0u8; g.templates[z].len as usize];
        let s = g.build(z, &mut f, 3, 9, false);
        finish(&g.templates[z], &mut f, seq_ts, s);
        f
    }

    #[test]
    fn ipv4_udp_frames_are_valid_and_signed() {
        let spec = v4_stream();
        let mut g = GenStream::new(&spec, &[64, 1518], 1);
        for z in 0..2 {
            let f = build_one(&mut g, z, 777);
            assert_eq!(f.len(), [60, 1514][z]);
            let eth = Frame::new_checked(&f[..]).unwrap();
            assert_eq!(eth.ethertype_raw(), 0x0800);
            assert!(checksum::ipv4_header_ok(&f[14..34]));
            let (l3, end, v) = signature::locate(&f).unwrap();
            assert_eq!((l3, end, v), (14, f.len(), 4));
            match signature::read(&f[end - 16..end], 3, (end - l3) as u16) {
                signature::Parsed::Ok(s) => {
                    assert_eq!((s.stream, s.seq, s.tx_ns), (9, z as u32, 777))
                }
                other => panic!("{other:?}"),
            }
            // The payload between UDP and the signature is the pattern.
            assert_eq!(&f[42..end - 16], pattern(end - 16 - 42));
        }
    }

    #[test]
    fn gtpu_frames_carry_each_context_in_its_own_tunnel() {
        let mut spec = v4_stream();
        spec.tunnel = Some(Gtpu {
            src: [192, 168, 0, 2],
            dst: [192, 168, 0, 1],
            teid: 0,
        });
        // Three contexts: TEID and UE address in lockstep.
        let teids: Arc<[u128]> = vec![0x101, 0x2002, 0x30003].into();
        let ues: Arc<[u128]> = vec![0x0a00_0001, 0x0a00_0102, 0x0a01_0003].into();
        for (kind, list) in [
            (FieldKind::Teid, teids.clone()),
            (FieldKind::SrcIp, ues.clone()),
        ] {
            spec.fields.push(Field {
                kind,
                vary: Vary::List(list),
                nested: false,
            });
        }
        spec.validate(&[64, 1518], 2).unwrap();
        assert_eq!(spec.min_frame(), 64);
        let mut g = GenStream::new(&spec, &[64, 1518], 1);
        for i in 0..6 {
            let z = i % 2;
            let f = build_one(&mut g, z, 5);
            // The size asked for is the user's packet; the tunnel adds 36 bytes on the wire.
            assert_eq!(f.len(), [60, 1514][z] + 36);
            assert!(checksum::ipv4_header_ok(&f[14..34]));
            assert_eq!(&f[26..34], &[192, 168, 0, 2, 192, 168, 0, 1]);
            assert_eq!(u16::from_be_bytes([f[16], f[17]]) as usize, f.len() - 14);
            assert_eq!(u16::from_be_bytes([f[36], f[37]]), 2152);
            let gtp = packet::gtp::parse_header(&f[42..]).unwrap();
            assert_eq!(gtp.msg_type, 255);
            assert_eq!(gtp.end(), f.len() - 42);
            assert_eq!(gtp.teid as u128, teids[i % 3]);
            // The inner packet: its own valid header, the context's address, the signature.
            let inner = 50;
            assert!(checksum::ipv4_header_ok(&f[inner..inner + 20]));
            let src = u32::from_be_bytes(f[inner + 12..inner + 16].try_into().unwrap());
            assert_eq!(src as u128, ues[i % 3]);
            let (l3, end, v) = signature::locate(&f).unwrap();
            assert_eq!((l3, end, v), (inner, f.len(), 4));
            match signature::read(&f[end - 16..end], 3, (end - l3) as u16) {
                signature::Parsed::Ok(s) => assert_eq!((s.stream, s.seq), (9, i as u32)),
                other => panic!("{other:?}"),
            }
            assert_eq!(&f[inner + 28..end - 16], pattern(end - 16 - inner - 28));
        }
        // A TEID field needs a tunnel.
        spec.tunnel = None;
        assert!(spec.validate(&[64], 2).unwrap_err().contains("Teid"));
    }

    #[test]
    fn pseudowire_frames_carry_the_customer_frame_under_the_label_and_control_word() {
        let mut spec = v4_stream();
        spec.mpls = Some(Mpls {
            labels: vec![300, 1000],
            pw: Some(PwFrame {
                control_word: true,
                dst_mac: [2, 0xce, 0, 0, 0, 1],
                src_mac: [2, 0xce, 0, 0, 0, 2],
                vlan: Some(7),
            }),
        });
        // The bottom label and the customer's VLAN in lockstep: one pseudowire each.
        let labels: Arc<[u128]> = vec![1000, 1001, 1002].into();
        let vlans: Arc<[u128]> = vec![7, 8, 9].into();
        for (kind, list) in [(FieldKind::Label, labels), (FieldKind::VlanId, vlans)] {
            spec.fields.push(Field {
                kind,
                vary: Vary::List(list),
                nested: false,
            });
        }
        // The size is the customer's tagged frame: 68 bytes hold its headers and signature.
        assert_eq!(spec.min_frame(), 66);
        spec.validate(&[68, 1522], 2).unwrap();
        assert_eq!(spec.encap_len(), 14 + 8 + 4);
        let mut g = GenStream::new(&spec, &[68, 1522], 1);
        for i in 0..6 {
            let z = i % 2;
            let f = build_one(&mut g, z, 5);
            assert_eq!(f.len(), [64, 1518][z] + 26);
            assert_eq!(u16::from_be_bytes([f[12], f[13]]), 0x8847);
            let outer = u32::from_be_bytes(f[14..18].try_into().unwrap());
            let bottom = u32::from_be_bytes(f[18..22].try_into().unwrap());
            assert_eq!((outer >> 12, outer >> 8 & 1, outer & 0xff), (300, 0, 64));
            assert_eq!(
                (bottom >> 12, bottom >> 8 & 1, bottom & 0xff),
                (1000 + (i % 3) as u32, 1, 64)
            );
            assert_eq!(&f[22..26], &[0, 0, 0, 0], "control word");
            let ce = &f[26..];
            assert_eq!(&ce[..6], &[2, 0xce, 0, 0, 0, 1]);
            assert_eq!(u16::from_be_bytes([ce[12], ce[13]]), 0x8100);
            assert_eq!(u16::from_be_bytes([ce[14], ce[15]]), 7 + (i % 3) as u16);
            assert_eq!(u16::from_be_bytes([ce[16], ce[17]]), 0x0800);
            assert!(checksum::ipv4_header_ok(&ce[18..38]));
            let (l3, end, v) = signature::locate(&f).unwrap();
            assert_eq!((l3, end, v), (26 + 18, f.len(), 4));
            match signature::read(&f[end - 16..end], 3, (end - l3) as u16) {
                signature::Parsed::Ok(s) => assert_eq!((s.stream, s.seq), (9, i as u32)),
                other => panic!("{other:?}"),
            }
        }
        // Without the control word and untagged (type 5): 64 bytes are enough.
        let m = spec.mpls.as_mut().unwrap();
        m.labels = vec![1000];
        m.pw.as_mut().unwrap().control_word = false;
        m.pw.as_mut().unwrap().vlan = None;
        spec.fields.truncate(1);
        spec.validate(&[64], 2).unwrap();
        let mut g = GenStream::new(&spec, &[64], 1);
        let f = build_one(&mut g, 0, 5);
        assert_eq!(f.len(), 60 + 18);
        assert_eq!(u16::from_be_bytes([f[30], f[31]]), 0x0800);
        assert_eq!(signature::locate(&f), Some((32, f.len(), 4)));
        // A VLAN field needs the customer's tag; a label field a stack; stacks are bounded.
        spec.fields.push(Field {
            kind: FieldKind::VlanId,
            vary: Vary::Step { count: 2, step: 1 },
            nested: false,
        });
        assert!(spec.validate(&[64], 2).unwrap_err().contains("VlanId"));
        spec.fields.truncate(1);
        spec.mpls.as_mut().unwrap().labels = vec![16; 5];
        assert!(spec.validate(&[64], 2).unwrap_err().contains("1 to 4"));
        spec.mpls.as_mut().unwrap().labels = vec![1 << 20];
        assert!(spec.validate(&[64], 2).unwrap_err().contains("20 bits"));
        spec.mpls = None;
        assert!(spec.validate(&[64], 2).unwrap_err().contains("Label"));
    }

    #[test]
    fn labelled_ip_frames_put_the_packet_right_under_the_stack() {
        let mut spec = v4_stream();
        spec.mpls = Some(Mpls {
            labels: vec![16, 17],
            pw: None,
        });
        spec.validate(&[64], 2).unwrap();
        let mut g = GenStream::new(&spec, &[64, 128], 1);
        let f = build_one(&mut g, 1, 5);
        assert_eq!(f.len(), 124 + 8);
        assert_eq!(u16::from_be_bytes([f[12], f[13]]), 0x8847);
        assert_eq!(f[20] & 1, 1, "bottom of stack on the second label");
        assert!(checksum::ipv4_header_ok(&f[22..42]));
        assert_eq!(u16::from_be_bytes([f[24], f[25]]) as usize, f.len() - 22);
        assert_eq!(signature::locate(&f), Some((22, f.len(), 4)));
    }

    #[test]
    fn ipv6_udp_checksum_verifies_and_78_byte_frames_need_no_l4() {
        let mut spec = v4_stream();
        spec.l3 = L3::V6 {
            src: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
            dst: [0x20, 1, 0xd, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        };
        spec.fields.push(Field {
            kind: FieldKind::DstIp,
            vary: Vary::Random { count: 1000 },
            nested: false,
        });
        assert!(spec
            .validate(&[78], 2)
            .unwrap_err()
            .contains("without UDP fits 78"));
        let mut g = GenStream::new(&spec, &[86, 333, 1518], 5);
        for z in 0..3 {
            for _ in 0..5 {
                let f = build_one(&mut g, z, 0xffff_fff0);
                let l4 = 14 + 40;
                let mut s = checksum::pseudo_v6(
                    f[22..38].try_into().unwrap(),
                    f[38..54].try_into().unwrap(),
                    17,
                    (f.len() - l4) as u32,
                );
                s += checksum::sum(&f[l4..]);
                assert_eq!(checksum::fold(s), 0, "UDP checksum verifies, size {z}");
            }
        }
        spec.udp = None;
        spec.fields.clear();
        spec.validate(&[78], 2).unwrap();
        let mut g = GenStream::new(&spec, &[78], 5);
        let f = build_one(&mut g, 0, 1);
        assert_eq!(f.len(), 74);
        assert_eq!(f[20], 59, "no next header");
        assert!(matches!(
            signature::read(&f[58..74], 3, 60),
            signature::Parsed::Ok(_)
        ));
    }

    #[test]
    fn fields_step_nest_and_draw_within_range() {
        let mut spec = v4_stream();
        spec.fields = vec![
            Field {
                kind: FieldKind::DstIp,
                vary: Vary::Step {
                    count: 3,
                    step: 256,
                },
                nested: false,
            },
            Field {
                kind: FieldKind::SrcPort,
                vary: Vary::Step { count: 2, step: 1 },
                nested: true,
            },
            Field {
                kind: FieldKind::DstPort,
                vary: Vary::Random { count: 10 },
                nested: false,
            },
        ];
        assert_eq!(spec.flows(), 60);
        let mut g = GenStream::new(&spec, &[64], 1);
        let mut seen = Vec::new();
        for _ in 0..6 {
            let f = build_one(&mut g, 0, 0);
            let dst = u32::from_be_bytes(f[30..34].try_into().unwrap());
            let sp = u16::from_be_bytes([f[34], f[35]]);
            let dp = u16::from_be_bytes([f[36], f[37]]);
            assert!((5000..5010).contains(&dp));
            assert!(
                checksum::ipv4_header_ok(&f[14..34]),
                "checksum follows the addresses"
            );
            seen.push((dst - u32::from_be_bytes([198, 19, 0, 2]), sp));
        }
        assert_eq!(
            seen,
            vec![
                (0, 1024),
                (256, 1024),
                (512, 1024),
                (0, 1025),
                (256, 1025),
                (512, 1025)
            ]
        );
        g.restart(1);
        let f = build_one(&mut g, 0, 0);
        assert_eq!(
            &f[30..34],
            &[198, 19, 0, 2],
            "restart goes back to the first value"
        );
    }

    #[test]
    fn lists_vlans_and_macs_are_written() {
        let mut spec = v4_stream();
        spec.vlan = Some(100);
        spec.fields = vec![
            Field {
                kind: FieldKind::DstIp,
                vary: Vary::List(vec![0x0a00_0001, 0x0b00_0001].into()),
                nested: false,
            },
            Field {
                kind: FieldKind::VlanId,
                vary: Vary::Step { count: 2, step: 1 },
                nested: false,
            },
            Field {
                kind: FieldKind::SrcMac,
                vary: Vary::Step { count: 4, step: 1 },
                nested: false,
            },
        ];
        assert!(
            spec.validate(&[64], 2).is_err(),
            "64 bytes cannot hold a tag and UDP"
        );
        spec.validate(&[68], 2).unwrap();
        let mut g = GenStream::new(&spec, &[68], 1);
        let a = build_one(&mut g, 0, 0);
        let b = build_one(&mut g, 0, 0);
        assert_eq!(
            (&a[34..38], &b[34..38]),
            (&[10, 0, 0, 1][..], &[11, 0, 0, 1][..])
        );
        assert_eq!((a[15], b[15]), (100, 101));
        assert_eq!((a[11], b[11]), (2, 3));
        assert!(checksum::ipv4_header_ok(&b[18..38]));
        assert_eq!(signature::locate(&b), Some((18, 64, 4)));
    }
}
