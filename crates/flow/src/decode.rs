//! A small, strict NetFlow v9 / IPFIX parser for the tests: it learns templates like a
//! collector, checks every length, count and padding rule the encoders must follow, and turns
//! data records back into [`FlowRecord`]s.

use crate::export::Clock;
use crate::{Direction, EndReason, FlowKey, FlowRecord};
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u16,
    /// v9: record count; IPFIX: message length.
    pub count_or_len: u16,
    /// v9 only.
    pub sys_uptime_ms: u32,
    pub unix_secs: u32,
    pub sequence: u32,
    pub domain_id: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionsTemplate {
    pub scope: Vec<(u16, u16)>,
    pub fields: Vec<(u16, u16)>,
}

#[derive(Debug, Default)]
pub struct Parsed {
    pub header: Option<Header>,
    pub template_ids: Vec<u16>,
    pub options_template_ids: Vec<u16>,
    pub flows: Vec<FlowRecord>,
    /// Options data records: (element id, value bytes), scope first.
    pub options: Vec<Vec<(u16, Vec<u8>)>>,
    /// Sets as (id, length), in order.
    pub sets: Vec<(u16, u16)>,
}

#[derive(Default)]
pub struct Collector {
    pub clock: Clock,
    pub templates: HashMap<u16, Vec<(u16, u16)>>,
    pub options_templates: HashMap<u16, OptionsTemplate>,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn uint(b: &[u8]) -> u64 {
    b.iter().fold(0, |a, &x| a << 8 | u64::from(x))
}

impl Collector {
    pub fn new(clock: Clock) -> Collector {
        Collector {
            clock,
            ..Collector::default()
        }
    }

    pub fn parse(&mut self, msg: &[u8]) -> Result<Parsed, String> {
        if msg.len() < 16 {
            return Err("shorter than any header".into());
        }
        let version = be16(msg, 0);
        let (h, mut at) = match version {
            9 => {
                if msg.len() < 20 {
                    return Err("short v9 header".into());
                }
                let h = Header {
                    version,
                    count_or_len: be16(msg, 2),
                    sys_uptime_ms: be32(msg, 4),
                    unix_secs: be32(msg, 8),
                    sequence: be32(msg, 12),
                    domain_id: be32(msg, 16),
                };
                (h, 20)
            }
            10 => {
                let h = Header {
                    version,
                    count_or_len: be16(msg, 2),
                    sys_uptime_ms: 0,
                    unix_secs: be32(msg, 4),
                    sequence: be32(msg, 8),
                    domain_id: be32(msg, 12),
                };
                if usize::from(h.count_or_len) != msg.len() {
                    return Err(format!(
                        "IPFIX length {} but {} bytes",
                        h.count_or_len,
                        msg.len()
                    ));
                }
                (h, 16)
            }
            v => return Err(format!("version {v}")),
        };
        let ipfix = version == 10;
        let mut out = Parsed::default();
        let mut records = 0usize;
        while at < msg.len() {
            if msg.len() - at < 4 {
                return Err(format!("{} stray bytes after the last set", msg.len() - at));
            }
            let id = be16(msg, at);
            let len = usize::from(be16(msg, at + 2));
            if len < 4 || at + len > msg.len() {
                return Err(format!(
                    "set {id} length {len} at {at} overruns {}",
                    msg.len()
                ));
            }
            if len % 4 != 0 {
                return Err(format!("set {id} not padded to 4 bytes: {len}"));
            }
            out.sets.push((id, len as u16));
            let body = &msg[at + 4..at + len];
            let mut p = 0;
            let (tset, oset) = if ipfix { (2, 3) } else { (0, 1) };
            if id == tset {
                while body.len() - p >= 4 && be16(body, p) != 0 {
                    let tid = be16(body, p);
                    let n = usize::from(be16(body, p + 2));
                    if tid < 256 || n == 0 || p + 4 + 4 * n > body.len() {
                        return Err(format!("bad template {tid} with {n} fields"));
                    }
                    let fields: Vec<(u16, u16)> = (0..n)
                        .map(|i| (be16(body, p + 4 + 4 * i), be16(body, p + 6 + 4 * i)))
                        .collect();
                    if !fields_ok(&fields) {
                        return Err(format!(
                            "template {tid} has an enterprise bit or a zero length"
                        ));
                    }
                    self.templates.insert(tid, fields);
                    out.template_ids.push(tid);
                    records += 1;
                    p += 4 + 4 * n;
                }
            } else if id == oset {
                while body.len() - p >= 6 && be16(body, p) != 0 {
                    let tid = be16(body, p);
                    let (nscope, nfields) = if ipfix {
                        let total = usize::from(be16(body, p + 2));
                        let scope = usize::from(be16(body, p + 4));
                        if scope == 0 || scope > total {
                            return Err(format!(
                                "options template {tid}: scope {scope} of {total}"
                            ));
                        }
                        (scope, total - scope)
                    } else {
                        let sl = usize::from(be16(body, p + 2));
                        let ol = usize::from(be16(body, p + 4));
                        if sl % 4 != 0 || ol % 4 != 0 || sl == 0 {
                            return Err(format!("options template {tid}: lengths {sl} {ol}"));
                        }
                        (sl / 4, ol / 4)
                    };
                    let f0 = p + 6;
                    if f0 + 4 * (nscope + nfields) > body.len() {
                        return Err(format!("options template {tid} overruns its set"));
                    }
                    let all: Vec<(u16, u16)> = (0..nscope + nfields)
                        .map(|i| (be16(body, f0 + 4 * i), be16(body, f0 + 2 + 4 * i)))
                        .collect();
                    if !fields_ok(&all) {
                        return Err(format!("options template {tid}: bad field"));
                    }
                    self.options_templates.insert(
                        tid,
                        OptionsTemplate {
                            scope: all[..nscope].to_vec(),
                            fields: all[nscope..].to_vec(),
                        },
                    );
                    out.options_template_ids.push(tid);
                    records += 1;
                    p = f0 + 4 * (nscope + nfields);
                }
            } else if id >= 256 {
                let fields: Vec<(u16, u16)> = if let Some(t) = self.templates.get(&id) {
                    t.clone()
                } else if let Some(t) = self.options_templates.get(&id) {
                    t.scope.iter().chain(&t.fields).copied().collect()
                } else {
                    return Err(format!("data set {id} before its template"));
                };
                let rlen: usize = fields.iter().map(|&(_, l)| usize::from(l)).sum();
                while body.len() - p >= rlen {
                    let mut vals = Vec::new();
                    for &(ie, l) in &fields {
                        vals.push((ie, body[p..p + usize::from(l)].to_vec()));
                        p += usize::from(l);
                    }
                    if self.options_templates.contains_key(&id) {
                        out.options.push(vals);
                    } else {
                        out.flows.push(self.flow(&vals, ipfix)?);
                    }
                    records += 1;
                }
            } else {
                return Err(format!("reserved set id {id}"));
            }
            // Whatever is left is padding: shorter than a record and all zero.
            if body[p..].len() >= 4 || body[p..].iter().any(|&b| b != 0) {
                return Err(format!(
                    "set {id}: {} bytes of non-padding left",
                    body.len() - p
                ));
            }
            at += len;
        }
        if !ipfix && usize::from(h.count_or_len) != records {
            return Err(format!("v9 count {} but {records} records", h.count_or_len));
        }
        out.header = Some(h);
        Ok(out)
    }

    fn flow(&self, vals: &[(u16, Vec<u8>)], ipfix: bool) -> Result<FlowRecord, String> {
        let mut r = FlowRecord {
            key: FlowKey {
                src: 0,
                dst: 0,
                src_port: 0,
                dst_port: 0,
                proto: 0,
                tos: 0,
                v6: false,
                in_if: 0,
                direction: Direction::Ingress,
            },
            out_if: 0,
            packets: 0,
            bytes: 0,
            first_ns: 0,
            last_ns: 0,
            tcp_flags: 0,
            // v9 carries no end reason; the tests compare with this.
            end: EndReason::Flush,
        };
        let boot_ms = self.clock.boot_unix_ns / 1_000_000;
        for (ie, v) in vals {
            let n = uint(v);
            match ie {
                8 => r.key.src = n.into(),
                12 => r.key.dst = n.into(),
                27 | 28 => {
                    let a =
                        u128::from_be_bytes(v.as_slice().try_into().map_err(|_| "IPv6 length")?);
                    r.key.v6 = true;
                    if *ie == 27 {
                        r.key.src = a;
                    } else {
                        r.key.dst = a;
                    }
                }
                7 => r.key.src_port = n as u16,
                11 => r.key.dst_port = n as u16,
                4 => r.key.proto = n as u8,
                5 => r.key.tos = n as u8,
                6 => r.tcp_flags = n as u8,
                10 => r.key.in_if = n as u32,
                14 => r.out_if = n as u32,
                2 => r.packets = n,
                1 => r.bytes = n,
                22 if !ipfix => r.first_ns = ms_to_ns(n)?,
                21 if !ipfix => r.last_ns = ms_to_ns(n)?,
                // Times before the exporter's boot, or too far after it, are not ours.
                152 if ipfix => {
                    r.first_ns = ms_to_ns(n.checked_sub(boot_ms).ok_or("start before boot")?)?
                }
                153 if ipfix => {
                    r.last_ns = ms_to_ns(n.checked_sub(boot_ms).ok_or("end before boot")?)?
                }
                61 => {
                    r.key.direction = match n {
                        0 => Direction::Ingress,
                        1 => Direction::Egress,
                        d => return Err(format!("direction {d}")),
                    }
                }
                136 if ipfix => {
                    r.end = EndReason::from_ipfix_code(n as u8).ok_or(format!("end reason {n}"))?
                }
                _ => return Err(format!("unexpected element {ie}")),
            }
        }
        Ok(r)
    }
}

fn ms_to_ns(ms: u64) -> Result<u64, String> {
    ms.checked_mul(1_000_000)
        .ok_or_else(|| format!("{ms} ms overflows the clock"))
}

/// No enterprise elements and no variable or zero lengths: the encoders write neither.
fn fields_ok(f: &[(u16, u16)]) -> bool {
    !f.iter()
        .any(|&(ie, len)| ie & 0x8000 != 0 || len == 0 || len == 0xFFFF)
}
