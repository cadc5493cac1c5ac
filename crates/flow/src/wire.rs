//! NetFlow v9 (RFC 3954) and IPFIX (RFC 7011) message encoding, without sockets.
//!
//! One [`Builder`] writes both versions: the formats differ in the header, the set ids and a few
//! information elements, not in structure. Each template is a table of (element id, length,
//! [`Field`]) and the same table drives both the template record and every data record, so the
//! two cannot disagree.
//!
//! Templates (ids fixed, so a collector restarting mid-stream relearns the same ones):
//! - 256: IPv4 flows, 257: IPv6 flows ([`V9_V4`], [`V9_V6`], [`IPFIX_V4`], [`IPFIX_V6`]);
//! - 258: the options record announcing the sampling rate and the exporter's address, sent only
//!   when one of them is configured ([`Options`]).
//!
//! Every set is padded to a multiple of 4 bytes (RFC 3954 §5.3 asks for it; RFC 7011 §3.3.1
//! allows it, and the padding is always shorter than the smallest record). Cost: about 50 ns to
//! encode a record, 20 M records/s (measured by `examples/flow_bench.rs`).

use crate::export::Clock;
use crate::FlowRecord;
use std::net::IpAddr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    /// NetFlow v9, RFC 3954.
    V9,
    /// IPFIX, RFC 7011: "NetFlow v10".
    Ipfix,
}

pub const TEMPLATE_V4: u16 = 256;
pub const TEMPLATE_V6: u16 = 257;
pub const TEMPLATE_OPTIONS: u16 = 258;

pub const V9_HEADER_LEN: usize = 20;
pub const IPFIX_HEADER_LEN: usize = 16;
const SET_HEADER_LEN: usize = 4;

/// v9 FlowSet ids / IPFIX set ids of template sets.
const V9_TEMPLATE_SET: u16 = 0;
const V9_OPTIONS_TEMPLATE_SET: u16 = 1;
const IPFIX_TEMPLATE_SET: u16 = 2;
const IPFIX_OPTIONS_TEMPLATE_SET: u16 = 3;

/// v9 scope type "System" (RFC 3954 §6.2).
const V9_SCOPE_SYSTEM: u16 = 1;
/// IPFIX observationDomainId, the scope of the options record.
const IE_OBSERVATION_DOMAIN_ID: u16 = 149;
/// RFC 3954 SAMPLING_ALGORITHM value: deterministic (1 in N).
const V9_SAMPLING_DETERMINISTIC: u8 = 1;
/// RFC 5477 selectorAlgorithm value: systematic count-based sampling.
const IPFIX_SELECTOR_COUNT_BASED: u16 = 1;

/// What a data field carries, in the order the template lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    SrcAddr,
    DstAddr,
    SrcPort,
    DstPort,
    Proto,
    Tos,
    TcpFlags,
    InIf,
    OutIf,
    Packets,
    Bytes,
    /// Router uptime in ms (v9 FIRST_SWITCHED / LAST_SWITCHED, relative to the header's
    /// sysUptime).
    FirstUptimeMs,
    LastUptimeMs,
    /// Unix time in ms (IPFIX flowStartMilliseconds / flowEndMilliseconds).
    FirstUnixMs,
    LastUnixMs,
    Direction,
    EndReason,
}

/// (element id, length, what).
pub type Template = [(u16, u16, Field)];

macro_rules! flow_template {
    ($src:expr, $dst:expr, $alen:expr, [$($tail:tt)*]) => {
        &[
            ($src, $alen, Field::SrcAddr),
            ($dst, $alen, Field::DstAddr),
            (7, 2, Field::SrcPort),
            (11, 2, Field::DstPort),
            (4, 1, Field::Proto),
            (5, 1, Field::Tos),
            (6, 1, Field::TcpFlags),
            (10, 4, Field::InIf),
            (14, 4, Field::OutIf),
            (2, 8, Field::Packets),
            (1, 8, Field::Bytes),
            $($tail)*
        ]
    };
}

/// v9 IPv4: IPV4_SRC_ADDR, IPV4_DST_ADDR, L4 ports, PROTOCOL, SRC_TOS, TCP_FLAGS, INPUT_SNMP,
/// OUTPUT_SNMP, IN_PKTS, IN_BYTES, FIRST_SWITCHED, LAST_SWITCHED, DIRECTION. v9 has no end reason.
pub const V9_V4: &Template = flow_template!(
    8,
    12,
    4,
    [
        (22, 4, Field::FirstUptimeMs),
        (21, 4, Field::LastUptimeMs),
        (61, 1, Field::Direction),
    ]
);
pub const V9_V6: &Template = flow_template!(
    27,
    28,
    16,
    [
        (22, 4, Field::FirstUptimeMs),
        (21, 4, Field::LastUptimeMs),
        (61, 1, Field::Direction),
    ]
);
/// IPFIX: the same elements (same ids) with absolute times, flowStartMilliseconds (152) and
/// flowEndMilliseconds (153), and flowEndReason (136).
pub const IPFIX_V4: &Template = flow_template!(
    8,
    12,
    4,
    [
        (152, 8, Field::FirstUnixMs),
        (153, 8, Field::LastUnixMs),
        (61, 1, Field::Direction),
        (136, 1, Field::EndReason),
    ]
);
pub const IPFIX_V6: &Template = flow_template!(
    27,
    28,
    16,
    [
        (152, 8, Field::FirstUnixMs),
        (153, 8, Field::LastUnixMs),
        (61, 1, Field::Direction),
        (136, 1, Field::EndReason),
    ]
);

pub fn template_len(t: &Template) -> usize {
    t.iter().map(|&(_, len, _)| usize::from(len)).sum()
}

/// The exporter-wide facts sent in the options record (template 258).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// 1-in-N packet sampling, N > 1 (N = 1 means every packet and is announced as such).
    pub sampling: Option<u32>,
    pub exporter_addr: Option<IpAddr>,
}

impl Options {
    pub fn is_empty(&self) -> bool {
        self.sampling.is_none() && self.exporter_addr.is_none()
    }

    /// The options template's fields after the scope, as (element id, length).
    ///
    /// v9: SAMPLING_INTERVAL (34) and SAMPLING_ALGORITHM (35, 1 = deterministic), exporter
    /// address as exporterIPv4Address (130) / exporterIPv6Address (131).
    /// IPFIX: the PSAMP elements selectorAlgorithm (304, 1 = systematic count-based),
    /// samplingPacketInterval (305, packets taken: 1) and samplingPacketSpace (306, packets
    /// skipped: N - 1); RFC 7270 deprecates 34/35 for IPFIX, and sending both would let a
    /// collector that maps 34 and 306 onto one slot read whichever comes last.
    /// tshark 4.0 decodes all of these; nfdump 1.7.1 reads none of them (it scales counts only
    /// for a sampling rate given on its command line, `nfcapd -s N`), see tests/collectors.rs.
    fn fields(&self, v: Version) -> Vec<(u16, u16)> {
        let mut f = Vec::new();
        if self.sampling.is_some() {
            match v {
                Version::V9 => f.extend([(34, 4), (35, 1)]),
                Version::Ipfix => f.extend([(304, 2), (305, 4), (306, 4)]),
            }
        }
        match self.exporter_addr {
            Some(IpAddr::V4(_)) => f.push((130, 4)),
            Some(IpAddr::V6(_)) => f.push((131, 16)),
            None => {}
        }
        f
    }
}

/// Builds one message (one UDP datagram) at a time, never longer than `mtu` bytes.
///
/// Use: [`Builder::push_templates`] and [`Builder::push_record`] until one returns false (full),
/// then [`Builder::finish`] with the sequence number and send the bytes, then
/// [`Builder::reset`].
pub struct Builder {
    version: Version,
    domain_id: u32,
    clock: Clock,
    mtu: usize,
    buf: Vec<u8>,
    /// Start offset and id of the set being filled.
    set: Option<(usize, u16)>,
    /// Records of every kind (the v9 header's count).
    records: u16,
    /// Data records, options data included (what IPFIX sequence numbers count).
    data_records: u32,
    /// Flow records only.
    flow_records: u32,
}

impl Builder {
    /// `mtu` is the largest message; it must hold at least the header and one IPv6 record, and
    /// IPFIX caps it at 65535 (the header's length field).
    pub fn new(version: Version, domain_id: u32, clock: Clock, mtu: usize) -> Builder {
        let mtu = mtu.min(usize::from(u16::MAX));
        let mut b = Builder {
            version,
            domain_id,
            clock,
            mtu,
            buf: Vec::with_capacity(mtu),
            set: None,
            records: 0,
            data_records: 0,
            flow_records: 0,
        };
        b.reset();
        b
    }

    /// The smallest `mtu` that fits a header and one record of either family, padding included.
    pub fn min_mtu(version: Version) -> usize {
        let (h, t) = match version {
            Version::V9 => (V9_HEADER_LEN, V9_V6),
            Version::Ipfix => (IPFIX_HEADER_LEN, IPFIX_V6),
        };
        h + SET_HEADER_LEN + pad4(template_len(t))
    }

    pub fn version(&self) -> Version {
        self.version
    }

    /// Empties the message and writes a header to fill in at [`Builder::finish`].
    pub fn reset(&mut self) {
        self.buf.clear();
        self.buf.resize(self.header_len(), 0);
        self.set = None;
        self.records = 0;
        self.data_records = 0;
        self.flow_records = 0;
    }

    fn header_len(&self) -> usize {
        match self.version {
            Version::V9 => V9_HEADER_LEN,
            Version::Ipfix => IPFIX_HEADER_LEN,
        }
    }

    /// Nothing but the header.
    pub fn is_empty(&self) -> bool {
        self.buf.len() == self.header_len()
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn flow_records(&self) -> u32 {
        self.flow_records
    }

    pub fn data_records(&self) -> u32 {
        self.data_records
    }

    pub fn templates_for(version: Version) -> [(u16, &'static Template); 2] {
        match version {
            Version::V9 => [(TEMPLATE_V4, V9_V4), (TEMPLATE_V6, V9_V6)],
            Version::Ipfix => [(TEMPLATE_V4, IPFIX_V4), (TEMPLATE_V6, IPFIX_V6)],
        }
    }

    /// Opens a set with `id` unless it is the one being filled; `need` is the size of the next
    /// record. Returns false, changing nothing, if set header, record and final padding would
    /// not fit.
    fn open_set(&mut self, id: u16, need: usize) -> bool {
        let cur = self.buf.len();
        let same = matches!(self.set, Some((_, s)) if s == id);
        let extra = if same {
            0
        } else {
            pad4(cur) - cur + SET_HEADER_LEN
        };
        // Sets start 4-byte aligned (headers are 16 and 20 bytes, sets are padded), so the
        // padding after this record is exactly what rounds the message up to 4.
        if pad4(cur + extra + need) > self.mtu {
            return false;
        }
        if !same {
            self.close_set();
            let start = self.buf.len();
            self.buf.extend_from_slice(&id.to_be_bytes());
            self.buf.extend_from_slice(&[0, 0]);
            self.set = Some((start, id));
        }
        true
    }

    /// Pads the set being filled to 4 bytes and writes its length.
    fn close_set(&mut self) {
        if let Some((start, _)) = self.set.take() {
            let end = pad4(self.buf.len());
            self.buf.resize(end, 0);
            let len = (end - start) as u16;
            self.buf[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
        }
    }

    /// Adds the template set (IPv4 and IPv6 flow templates) and, if `opts` says anything, the
    /// options template and its one data record. Returns false if the message has no room, in
    /// which case it is unchanged; an empty message always has room at `mtu >= 300`.
    pub fn push_templates(&mut self, opts: &Options) -> bool {
        let saved = (self.buf.len(), self.set, self.records, self.data_records);
        if self.try_push_templates(opts) {
            return true;
        }
        self.buf.truncate(saved.0);
        (self.set, self.records, self.data_records) = (saved.1, saved.2, saved.3);
        false
    }

    fn try_push_templates(&mut self, opts: &Options) -> bool {
        let v = self.version;
        let (tset, oset) = match v {
            Version::V9 => (V9_TEMPLATE_SET, V9_OPTIONS_TEMPLATE_SET),
            Version::Ipfix => (IPFIX_TEMPLATE_SET, IPFIX_OPTIONS_TEMPLATE_SET),
        };
        let templates = Self::templates_for(v);
        let need: usize = templates.iter().map(|(_, t)| 4 + 4 * t.len()).sum();
        if !self.open_set(tset, need) {
            return false;
        }
        for (id, t) in templates {
            put16(&mut self.buf, id);
            put16(&mut self.buf, t.len() as u16);
            for &(ie, len, _) in t {
                put16(&mut self.buf, ie);
                put16(&mut self.buf, len);
            }
            self.records += 1;
        }
        if opts.is_empty() {
            return true;
        }

        let fields = opts.fields(v);
        let scope = match v {
            Version::V9 => (V9_SCOPE_SYSTEM, 4u16),
            Version::Ipfix => (IE_OBSERVATION_DOMAIN_ID, 4u16),
        };
        let n = fields.len() as u16;
        if !self.open_set(oset, 6 + 4 + 4 * fields.len()) {
            return false;
        }
        put16(&mut self.buf, TEMPLATE_OPTIONS);
        match v {
            // Template id, scope length and option length, both in bytes (RFC 3954 §6.1).
            Version::V9 => {
                put16(&mut self.buf, 4);
                put16(&mut self.buf, 4 * n);
            }
            // Template id, field count including the scope, scope field count (RFC 7011 §3.4.2.2).
            Version::Ipfix => {
                put16(&mut self.buf, n + 1);
                put16(&mut self.buf, 1);
            }
        }
        put16(&mut self.buf, scope.0);
        put16(&mut self.buf, scope.1);
        for &(ie, len) in &fields {
            put16(&mut self.buf, ie);
            put16(&mut self.buf, len);
        }
        self.records += 1;

        let data_len = 4 + fields.iter().map(|&(_, l)| usize::from(l)).sum::<usize>();
        if !self.open_set(TEMPLATE_OPTIONS, data_len) {
            return false;
        }
        put32(&mut self.buf, self.domain_id);
        for &(ie, _) in &fields {
            let n = opts.sampling.unwrap_or(1).max(1);
            match ie {
                304 => put16(&mut self.buf, IPFIX_SELECTOR_COUNT_BASED),
                305 => put32(&mut self.buf, 1),
                306 => put32(&mut self.buf, n - 1),
                34 => put32(&mut self.buf, n),
                35 => self.buf.push(V9_SAMPLING_DETERMINISTIC),
                130 | 131 => match opts.exporter_addr {
                    Some(IpAddr::V4(a)) => self.buf.extend_from_slice(&a.octets()),
                    Some(IpAddr::V6(a)) => self.buf.extend_from_slice(&a.octets()),
                    None => unreachable!("exporter field without an address"),
                },
                _ => unreachable!("options field {ie} has no writer"),
            }
        }
        self.records += 1;
        self.data_records += 1;
        true
    }

    /// Adds a flow record; false (message unchanged) if it does not fit.
    pub fn push_record(&mut self, r: &FlowRecord) -> bool {
        let (id, t) = Self::templates_for(self.version)[usize::from(r.key.v6)];
        if !self.open_set(id, template_len(t)) {
            return false;
        }
        let boot_ms = self.clock.boot_unix_ns / 1_000_000;
        let b = &mut self.buf;
        for &(_, len, f) in t {
            match f {
                Field::SrcAddr | Field::DstAddr => {
                    let a = if f == Field::SrcAddr {
                        r.key.src
                    } else {
                        r.key.dst
                    };
                    b.extend_from_slice(&a.to_be_bytes()[16 - usize::from(len)..]);
                }
                Field::SrcPort => put16(b, r.key.src_port),
                Field::DstPort => put16(b, r.key.dst_port),
                Field::Proto => b.push(r.key.proto),
                Field::Tos => b.push(r.key.tos),
                Field::TcpFlags => b.push(r.tcp_flags),
                Field::InIf => put32(b, r.key.in_if),
                Field::OutIf => put32(b, r.out_if),
                Field::Packets => put64(b, r.packets),
                Field::Bytes => put64(b, r.bytes),
                // v9 carries uptime in wrapping 32-bit ms; collectors place it against the
                // header's sysUptime and unix seconds.
                Field::FirstUptimeMs => put32(b, (r.first_ns / 1_000_000) as u32),
                Field::LastUptimeMs => put32(b, (r.last_ns / 1_000_000) as u32),
                Field::FirstUnixMs => put64(b, boot_ms + r.first_ns / 1_000_000),
                Field::LastUnixMs => put64(b, boot_ms + r.last_ns / 1_000_000),
                Field::Direction => b.push(r.key.direction as u8),
                Field::EndReason => b.push(r.end.ipfix_code()),
            }
        }
        self.records += 1;
        self.data_records += 1;
        self.flow_records += 1;
        true
    }

    /// Closes the last set and fills in the header: `sequence` is the v9 count of messages sent
    /// before this one, or the IPFIX count of data records sent before this one; `now_ns` (the
    /// records' clock) gives the export time, and for v9 the sysUptime of its whole second. The builder keeps the message until
    /// [`Builder::reset`].
    pub fn finish(&mut self, sequence: u32, now_ns: u64) -> &[u8] {
        self.close_set();
        let unix_ns = self.clock.boot_unix_ns + now_ns;
        let unix_secs = unix_ns / 1_000_000_000;
        let mut h = Vec::with_capacity(V9_HEADER_LEN);
        match self.version {
            Version::V9 => {
                // Collectors place records at `unix_secs * 1000 - sysUptime + FIRST_SWITCHED`
                // (nfdump: boot time = unix_secs * 1000 - sysUptime). unix_secs has no fraction,
                // so sysUptime is given for the same whole second, not for `now`: otherwise
                // every record would be off by the sub-second part of the export time. (Within
                // the first second of uptime that second began before boot: 0, off by < 1 s.)
                let boot_ms = self.clock.boot_unix_ns / 1_000_000;
                put16(&mut h, 9);
                put16(&mut h, self.records);
                put32(&mut h, (unix_secs * 1000).saturating_sub(boot_ms) as u32);
                put32(&mut h, unix_secs as u32);
            }
            Version::Ipfix => {
                put16(&mut h, 10);
                put16(&mut h, self.buf.len() as u16);
                put32(&mut h, unix_secs as u32);
            }
        }
        put32(&mut h, sequence);
        put32(&mut h, self.domain_id);
        self.buf[..h.len()].copy_from_slice(&h);
        &self.buf
    }
}

/// The parameters of a one-off message for [`encode_v9`] and [`encode_ipfix`].
#[derive(Clone, Copy, Debug)]
pub struct Message<'a> {
    pub domain_id: u32,
    pub clock: Clock,
    pub sequence: u32,
    pub now_ns: u64,
    /// Include the templates, and the options record if these say anything.
    pub templates: Option<&'a Options>,
    pub records: &'a [FlowRecord],
}

/// One NetFlow v9 message holding everything in `m`, however long (for tests and tools; the
/// exporter splits by `mtu` with a [`Builder`]). Panics past 65535 bytes.
pub fn encode_v9(m: &Message) -> Vec<u8> {
    encode(Version::V9, m)
}

/// One IPFIX message holding everything in `m`. Panics past 65535 bytes.
pub fn encode_ipfix(m: &Message) -> Vec<u8> {
    encode(Version::Ipfix, m)
}

fn encode(v: Version, m: &Message) -> Vec<u8> {
    let mut b = Builder::new(v, m.domain_id, m.clock, usize::from(u16::MAX));
    if let Some(o) = m.templates {
        assert!(b.push_templates(o), "templates do not fit");
    }
    for r in m.records {
        assert!(b.push_record(r), "records do not fit in one message");
    }
    b.finish(m.sequence, m.now_ns).to_vec()
}

fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

fn put16(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_be_bytes());
}

fn put32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_be_bytes());
}

fn put64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_be_bytes());
}

#[cfg(test)]
mod tests;
