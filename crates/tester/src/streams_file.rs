//! Streams for `linerate bench run`: from a YAML file, or from a pattern over the router config's
//! ports (quick runs by flags). Either way the defaults come from the router config, as a tester
//! connected to that router would be set up: frames go to the router interface's MAC, come from
//! the neighbour's MAC, and (patterns) are addressed to the neighbour on the far port.
//!
//! ```yaml
//! speeds: { default: 10g, p2: 1g }      # nominal port rates (default 10g)
//! streams:
//!   - name: web                         # default: FROM>TO
//!     from: p0
//!     to: p1
//!     ipv4: { src: 198.18.0.2, dst: 10.1.0.1 }    # or ipv6: { src: ..., dst: ... }
//!     udp: { src: 1024, dst: 80 }       # default 1024 -> 5000; `udp: none` for no L4 header
//!     vlan: 100                         # tag the frames (and use that sub-interface's MAC)
//!     dscp: 46
//!     vary:
//!       - { field: dst-ip, count: 1000 }              # step 1 from the header's value
//!       - { field: src-port, count: 100, random: true }
//!       - { field: src-ip, count: 50, step: 256, nested: true }
//!     weight: 2                         # twice the share of its port's rate
//!   - from: p1                          # frames from the MPLS core
//!     to: p0
//!     ipv4: { src: 10.1.0.2, dst: 10.0.0.2 }
//!     mpls:
//!       labels: [1000]                  # outermost first, 1 to 4 (TTL 64, traffic class 0)
//!       pw: { control-word: true, dst-mac: "02:ce:00:00:00:01", src-mac: "02:ce:00:00:00:02",
//!             vlan: 100 }               # a pseudowire's customer frame under the stack
//!     vary:
//!       - { field: label, count: 16 }   # the bottom label: 16 pseudowires
//! ```
//!
//! A stream under a label stack is sized by what the stack carries: a pseudowire's customer
//! frame, or the IP packet's untagged Ethernet frame; the wire frame is longer by the stack (and
//! for a pseudowire the core's Ethernet header and the control word).
//!
//! IPv6 streams send frames smaller than 78 bytes (86 with UDP) at that size, as testers send
//! IMIX's 64-byte frames for IPv6.
//!
//! Errors name the file, line and column of the field, as the router's config errors do, and no
//! trial runs until the whole file is valid.

use std::net::IpAddr;
use std::path::Path;

use control::config::{Config, Driver};
use control::yaml::{self, Node, Value};

use crate::stream::{Field, FieldKind, Mpls, PwFrame, StreamSpec, Vary, L3};

/// The tester's view of the router's `mem` ports: name, interface MAC, neighbour MAC and
/// addresses, in port order (the order `Router::start` returns them).
#[derive(Clone, Debug)]
pub struct PortInfo {
    pub name: String,
    pub router_mac: [u8; 6],
    pub host_mac: [u8; 6],
    pub host_v4: Option<u32>,
    pub host_v6: Option<u128>,
}

pub fn ports_of(cfg: &Config) -> Vec<PortInfo> {
    cfg.ports
        .iter()
        .filter(|p| p.driver == Driver::Mem)
        .map(|p| port_info(cfg, &p.name))
        .collect()
}

/// The tester's view of port `port` of a config (whatever its driver): the MAC of its untagged
/// interface (or its first sub-interface), and the first neighbour of each family on that
/// interface, whose MAC and addresses the tester takes as its own. External mode uses it for the
/// ports named by `--port`.
pub fn port_info(cfg: &Config, port: &str) -> PortInfo {
    let ifc = cfg
        .interfaces
        .iter()
        .find(|i| i.port == port && i.vlan.is_none())
        .or_else(|| cfg.interfaces.iter().find(|i| i.port == port));
    let nbrs: Vec<_> = ifc
        .map(|i| {
            cfg.neighbors
                .iter()
                .filter(|n| n.interface == i.name)
                .collect()
        })
        .unwrap_or_default();
    let host_v4 = nbrs.iter().find_map(|n| match n.ip {
        IpAddr::V4(a) => Some(u32::from(a)),
        _ => None,
    });
    let host_v6 = nbrs.iter().find_map(|n| match n.ip {
        IpAddr::V6(a) => Some(u128::from(a)),
        _ => None,
    });
    PortInfo {
        name: port.to_string(),
        router_mac: ifc.map_or([2, 0, 0, 0, 0, 1], |i| i.mac.0),
        host_mac: nbrs.first().map_or([2, 0, 0, 0, 0, 0xfe], |n| n.mac.0),
        host_v4,
        host_v6,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Ports 0-1, 2-3, ... both ways.
    Pair,
    /// Every port to every other.
    Mesh,
    /// Every non-uplink port to every uplink and back (RFC 2889 partial mesh).
    Backbone,
}

/// Streams of a pattern between the ports' neighbours; `uplinks` names the backbone's uplinks.
/// `flows` > 1 varies the UDP source port over that many values per stream.
pub fn pattern(
    ports: &[PortInfo],
    p: Pattern,
    uplinks: &[String],
    ipv6: bool,
    flows: u32,
) -> Result<Vec<StreamSpec>, String> {
    let n = ports.len();
    if n < 2 {
        return Err("a pattern needs at least two tester ports (mem ports in the router config, or --port in external mode)".into());
    }
    for u in uplinks {
        if !ports.iter().any(|p| &p.name == u) {
            return Err(format!("--uplinks: no tester port named `{u}`"));
        }
    }
    let pairs: Vec<(usize, usize)> = match p {
        Pattern::Pair => (0..n / 2)
            .flat_map(|k| [(2 * k, 2 * k + 1), (2 * k + 1, 2 * k)])
            .collect(),
        Pattern::Mesh => (0..n)
            .flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)))
            .collect(),
        Pattern::Backbone => {
            if uplinks.is_empty() {
                return Err("the backbone pattern needs --uplinks".into());
            }
            let up: Vec<usize> = (0..n)
                .filter(|&i| uplinks.contains(&ports[i].name))
                .collect();
            let acc: Vec<usize> = (0..n).filter(|i| !up.contains(i)).collect();
            if acc.is_empty() {
                return Err("the backbone pattern needs ports that are not uplinks".into());
            }
            acc.iter()
                .flat_map(|&a| up.iter().flat_map(move |&u| [(a, u), (u, a)]))
                .collect()
        }
    };
    pairs
        .into_iter()
        .map(|(a, b)| {
            let (pa, pb) = (&ports[a], &ports[b]);
            let l3 = if ipv6 {
                match (pa.host_v6, pb.host_v6) {
                    (Some(s), Some(d)) => L3::V6 {
                        src: s.to_be_bytes(),
                        dst: d.to_be_bytes(),
                    },
                    _ => {
                        return Err(format!(
                            "ports {} and {} need an IPv6 neighbour each in the router config",
                            pa.name, pb.name
                        ))
                    }
                }
            } else {
                match (pa.host_v4, pb.host_v4) {
                    (Some(s), Some(d)) => L3::V4 {
                        src: s.to_be_bytes(),
                        dst: d.to_be_bytes(),
                    },
                    _ => {
                        return Err(format!(
                            "ports {} and {} need an IPv4 neighbour each in the router config",
                            pa.name, pb.name
                        ))
                    }
                }
            };
            let mut s = StreamSpec {
                name: format!("{}>{}", pa.name, pb.name),
                tx_port: a,
                rx_port: b,
                src_mac: pa.host_mac,
                dst_mac: pa.router_mac,
                vlan: None,
                l3,
                udp: Some((1024, 5000)),
                ttl: 64,
                dscp: 0,
                fields: if flows > 1 {
                    vec![Field {
                        kind: FieldKind::SrcPort,
                        vary: Vary::Step {
                            count: flows,
                            step: 1,
                        },
                        nested: false,
                    }]
                } else {
                    vec![]
                },
                weight: 1.0,
                min_size: 0,
                also_rx: Vec::new(),
                multicast_mac: false,
                tunnel: None,
                mpls: None,
            };
            s.min_size = v6_min_size(&s);
            Ok(s)
        })
        .collect()
}

/// IPv6 streams send frames below 78 bytes (or the headers' minimum, 86 with UDP) at that size,
/// as testers do with IMIX's 64-byte frames; IPv4 streams send every size as asked.
fn v6_min_size(s: &StreamSpec) -> u16 {
    if s.is_v6() {
        (s.min_frame() as u16).max(78)
    } else {
        0
    }
}

/// A parsed streams file: the streams and each port's nominal speed (bits/s).
#[derive(Debug)]
pub struct StreamsFile {
    pub streams: Vec<StreamSpec>,
    pub speeds: Vec<f64>,
}

struct Errs<'a> {
    file: &'a str,
    list: Vec<String>,
    /// What an unknown port name is told (the tester's ports differ by mode).
    no_port: &'a str,
}

impl Errs<'_> {
    fn at(&mut self, n: &Node, field: &str, msg: impl std::fmt::Display) {
        self.list.push(format!(
            "{}:{}:{}: {field}: {msg}",
            self.file, n.line, n.col
        ));
    }
}

fn map(n: &Node) -> Option<&Vec<(String, Node)>> {
    match &n.value {
        Value::Map(m) => Some(m),
        _ => None,
    }
}

fn scalar(n: &Node) -> Option<&str> {
    match &n.value {
        Value::Scalar(s) => Some(s),
        _ => None,
    }
}

/// Loads a streams file against the router config's ports.
pub fn load(path: &Path, cfg: &Config) -> Result<StreamsFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text, &path.display().to_string(), cfg)
}

const NO_MEM_PORT: &str = "no mem port of that name in the router config";

pub fn parse(text: &str, file: &str, cfg: &Config) -> Result<StreamsFile, String> {
    parse_for(text, file, &ports_of(cfg), NO_MEM_PORT)
}

/// Loads a streams file against given tester ports (external mode: the ports `--port` maps);
/// `no_port` is what a name that is not one of them is told.
pub fn load_for(path: &Path, ports: &[PortInfo], no_port: &str) -> Result<StreamsFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_for(&text, &path.display().to_string(), ports, no_port)
}

pub fn parse_for(
    text: &str,
    file: &str,
    ports: &[PortInfo],
    no_port: &str,
) -> Result<StreamsFile, String> {
    let root =
        yaml::parse(text).map_err(|e| format!("{file}:{}:{}: {}", e.line, e.col, e.message))?;
    let mut e = Errs {
        file,
        list: Vec::new(),
        no_port,
    };
    let mut speeds = vec![10e9; ports.len()];
    let mut streams = Vec::new();
    let Some(top) = map(&root) else {
        return Err(format!("{file}:1:1: expected a map with `streams:`"));
    };
    for (k, v) in top {
        match k.as_str() {
            "speeds" => match map(v) {
                Some(m) => {
                    let mut default = None;
                    for (name, sv) in m {
                        let f = format!("speeds.{name}");
                        let Some(sp) = scalar(sv).and_then(|s| crate::load::parse_speed(s).ok())
                        else {
                            e.at(sv, &f, "expected a speed such as 1g, 10g, 622m");
                            continue;
                        };
                        if name == "default" {
                            default = Some(sp);
                        } else if let Some(i) = ports.iter().position(|p| &p.name == name) {
                            speeds[i] = sp;
                        } else {
                            let msg = e.no_port;
                            e.at(sv, &f, msg);
                        }
                    }
                    if let Some(d) = default {
                        for (i, s) in speeds.iter_mut().enumerate() {
                            if !m.iter().any(|(n, _)| *n == ports[i].name) {
                                *s = d;
                            }
                        }
                    }
                }
                None => e.at(v, "speeds", "expected a map of port names to speeds"),
            },
            "streams" => match &v.value {
                Value::Seq(items) => {
                    for (i, item) in items.iter().enumerate() {
                        if let Some(s) = stream(item, i, ports, &mut e) {
                            streams.push(s);
                        }
                    }
                }
                _ => e.at(v, "streams", "expected a list of streams"),
            },
            other => e.at(v, other, "unknown key (expected speeds, streams)"),
        }
    }
    if streams.is_empty() && e.list.is_empty() {
        e.at(&root, "streams", "no streams");
    }
    if !e.list.is_empty() {
        return Err(format!(
            "{}\n{} error(s); nothing was run",
            e.list.join("\n"),
            e.list.len()
        ));
    }
    Ok(StreamsFile { streams, speeds })
}

fn stream(n: &Node, i: usize, ports: &[PortInfo], e: &mut Errs) -> Option<StreamSpec> {
    let path = format!("streams[{i}]");
    let Some(m) = map(n) else {
        e.at(n, &path, "expected a map");
        return None;
    };
    let get = |k: &str| m.iter().find(|(x, _)| x == k).map(|(_, v)| v);
    let before = e.list.len();
    for (k, v) in m {
        if !matches!(
            k.as_str(),
            "name"
                | "from"
                | "to"
                | "ipv4"
                | "ipv6"
                | "udp"
                | "vlan"
                | "dscp"
                | "ttl"
                | "vary"
                | "weight"
                | "mpls"
        ) {
            e.at(v, &format!("{path}.{k}"), "unknown key");
        }
    }
    let port = |k: &str, e: &mut Errs| -> Option<usize> {
        let Some(v) = get(k) else {
            e.at(n, &format!("{path}.{k}"), "required");
            return None;
        };
        match scalar(v).and_then(|s| ports.iter().position(|p| p.name == s)) {
            Some(p) => Some(p),
            None => {
                let msg = e.no_port;
                e.at(v, &format!("{path}.{k}"), msg);
                None
            }
        }
    };
    let from = port("from", e);
    let to = port("to", e);
    let num = |k: &str, max: u64, e: &mut Errs| -> Option<u64> {
        let v = get(k)?;
        match scalar(v)
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|&x| x <= max)
        {
            Some(x) => Some(x),
            None => {
                e.at(
                    v,
                    &format!("{path}.{k}"),
                    format!("expected a whole number up to {max}"),
                );
                None
            }
        }
    };
    let vlan = num("vlan", 4094, e).map(|v| v as u16);
    let dscp = num("dscp", 63, e).unwrap_or(0) as u8;
    let ttl = num("ttl", 255, e).unwrap_or(64) as u8;
    let addr_pair = |k: &str, e: &mut Errs| -> Option<(IpAddr, IpAddr)> {
        let v = get(k)?;
        let f = format!("{path}.{k}");
        let mm = match map(v) {
            Some(mm) => mm,
            None => {
                e.at(v, &f, "expected { src: ADDRESS, dst: ADDRESS }");
                return None;
            }
        };
        let one = |kk: &str, e: &mut Errs| -> Option<IpAddr> {
            let Some((_, a)) = mm.iter().find(|(x, _)| x == kk) else {
                e.at(v, &format!("{f}.{kk}"), "required");
                return None;
            };
            let ip = scalar(a).and_then(|s| s.parse::<IpAddr>().ok());
            match ip {
                Some(ip) if ip.is_ipv4() == (k == "ipv4") => Some(ip),
                _ => {
                    e.at(
                        a,
                        &format!("{f}.{kk}"),
                        format!(
                            "expected an {} address",
                            if k == "ipv4" { "IPv4" } else { "IPv6" }
                        ),
                    );
                    None
                }
            }
        };
        Some((one("src", e)?, one("dst", e)?))
    };
    let l3 = match (get("ipv4"), get("ipv6")) {
        (Some(_), Some(v)) => {
            e.at(
                v,
                &format!("{path}.ipv6"),
                "a stream is IPv4 or IPv6, not both",
            );
            None
        }
        (Some(_), None) => addr_pair("ipv4", e).map(|(s, d)| match (s, d) {
            (IpAddr::V4(s), IpAddr::V4(d)) => L3::V4 {
                src: s.octets(),
                dst: d.octets(),
            },
            _ => unreachable!("checked above"),
        }),
        (None, Some(_)) => addr_pair("ipv6", e).map(|(s, d)| match (s, d) {
            (IpAddr::V6(s), IpAddr::V6(d)) => L3::V6 {
                src: s.octets(),
                dst: d.octets(),
            },
            _ => unreachable!("checked above"),
        }),
        (None, None) => {
            e.at(n, &format!("{path}.ipv4"), "required (or ipv6)");
            None
        }
    };
    let udp = match get("udp") {
        None => Some((1024, 5000)),
        Some(v) if scalar(v) == Some("none") => None,
        Some(v) => {
            let mm = map(v);
            let p = |kk: &str, dflt: u16, e: &mut Errs| -> u16 {
                match mm.and_then(|m| m.iter().find(|(x, _)| x == kk)) {
                    None => dflt,
                    Some((_, x)) => match scalar(x).and_then(|s| s.parse::<u16>().ok()) {
                        Some(p) => p,
                        None => {
                            e.at(x, &format!("{path}.udp.{kk}"), "expected a port 0..=65535");
                            dflt
                        }
                    },
                }
            };
            if mm.is_none() {
                e.at(
                    v,
                    &format!("{path}.udp"),
                    "expected { src: PORT, dst: PORT } or none",
                );
            }
            Some((p("src", 1024, e), p("dst", 5000, e)))
        }
    };
    let weight = match get("weight") {
        None => 1.0,
        Some(v) => match scalar(v).and_then(|s| s.parse::<f64>().ok()) {
            Some(w) if w > 0.0 && w <= 1000.0 => w,
            _ => {
                e.at(
                    v,
                    &format!("{path}.weight"),
                    "expected a number above 0, at most 1000",
                );
                1.0
            }
        },
    };
    let mut fields = Vec::new();
    if let Some(v) = get("vary") {
        match &v.value {
            Value::Seq(items) => {
                for (j, it) in items.iter().enumerate() {
                    let at = format!("{path}.vary[{j}]");
                    let Some(f) = field(it, &at, e) else {
                        continue;
                    };
                    // Twice the same field would write one value and count another (an IPv4
                    // address varied twice made every frame's header checksum wrong).
                    if fields.iter().any(|g: &Field| g.kind == f.kind) {
                        e.at(
                            it,
                            &format!("{at}.field"),
                            "varied already: one entry per field",
                        );
                    } else {
                        fields.push(f);
                    }
                }
            }
            _ => e.at(v, &format!("{path}.vary"), "expected a list of fields"),
        }
    }
    let mpls = get("mpls").and_then(|v| mpls(v, &format!("{path}.mpls"), e));
    if e.list.len() > before {
        return None;
    }
    let (from, to, l3) = (from?, to?, l3?);
    let mut spec = StreamSpec {
        name: get("name")
            .and_then(scalar)
            .map(str::to_string)
            .unwrap_or_else(|| format!("{}>{}", ports[from].name, ports[to].name)),
        tx_port: from,
        rx_port: to,
        src_mac: ports[from].host_mac,
        dst_mac: ports[from].router_mac,
        vlan,
        l3,
        udp,
        ttl,
        dscp,
        fields,
        weight,
        min_size: 0,
        also_rx: Vec::new(),
        multicast_mac: false,
        tunnel: None,
        mpls,
    };
    spec.min_size = v6_min_size(&spec);
    for f in &spec.fields {
        let (needs, what) = match f.kind {
            FieldKind::Label => (spec.mpls.is_some(), "a label stack (mpls)"),
            FieldKind::VlanId => (
                match &spec.mpls {
                    Some(Mpls { pw: Some(pw), .. }) => pw.vlan.is_some(),
                    _ => spec.vlan.is_some(),
                },
                "a VLAN tag (vlan, or mpls.pw.vlan)",
            ),
            _ => (true, ""),
        };
        if !needs {
            e.at(
                n,
                &format!("{path}.vary"),
                format!("varies a field of {what}, which the stream has not"),
            );
            return None;
        }
    }
    Some(spec)
}

/// `mpls: { labels: [..], pw: { control-word, dst-mac, src-mac, vlan } }`.
fn mpls(v: &Node, path: &str, e: &mut Errs) -> Option<Mpls> {
    let Some(m) = map(v) else {
        e.at(v, path, "expected { labels: [LABEL, ...] [, pw: {...}] }");
        return None;
    };
    let get = |k: &str| m.iter().find(|(x, _)| x == k).map(|(_, v)| v);
    let before = e.list.len();
    for (k, x) in m {
        if !matches!(k.as_str(), "labels" | "pw") {
            e.at(
                x,
                &format!("{path}.{k}"),
                "unknown key (expected labels, pw)",
            );
        }
    }
    let mut labels = Vec::new();
    match get("labels").map(|l| (l, &l.value)) {
        Some((_, Value::Seq(items))) if (1..=Mpls::MAX_LABELS).contains(&items.len()) => {
            for (i, it) in items.iter().enumerate() {
                match scalar(it).and_then(|s| s.parse::<u32>().ok()) {
                    Some(l) if l <= 0xf_ffff => labels.push(l),
                    _ => e.at(
                        it,
                        &format!("{path}.labels[{i}]"),
                        "a label: a number from 0 to 1048575",
                    ),
                }
            }
        }
        Some((l, _)) => e.at(
            l,
            &format!("{path}.labels"),
            format!(
                "a list of 1 to {} labels, outermost first",
                Mpls::MAX_LABELS
            ),
        ),
        None => e.at(v, &format!("{path}.labels"), "required"),
    }
    let pw = match get("pw") {
        None => None,
        Some(p) => {
            let pp = format!("{path}.pw");
            match map(p) {
                None => {
                    e.at(
                        p,
                        &pp,
                        "expected { control-word, dst-mac, src-mac [, vlan] }",
                    );
                    None
                }
                Some(pm) => {
                    let pget = |k: &str| pm.iter().find(|(x, _)| x == k).map(|(_, v)| v);
                    for (k, x) in pm {
                        if !matches!(k.as_str(), "control-word" | "dst-mac" | "src-mac" | "vlan") {
                            e.at(x, &format!("{pp}.{k}"), "unknown key");
                        }
                    }
                    let mac = |k: &str, e: &mut Errs| -> [u8; 6] {
                        match pget(k) {
                            None => {
                                e.at(p, &format!("{pp}.{k}"), "required");
                                [0; 6]
                            }
                            Some(x) => match scalar(x)
                                .and_then(|s| s.parse::<packet::ethernet::MacAddr>().ok())
                            {
                                Some(a) => a.0,
                                None => {
                                    e.at(
                                        x,
                                        &format!("{pp}.{k}"),
                                        "a MAC address (02:00:00:00:00:01)",
                                    );
                                    [0; 6]
                                }
                            },
                        }
                    };
                    let dst_mac = mac("dst-mac", e);
                    let src_mac = mac("src-mac", e);
                    let control_word = match pget("control-word").map(|x| (x, scalar(x))) {
                        None | Some((_, Some("false"))) => false,
                        Some((_, Some("true"))) => true,
                        Some((x, _)) => {
                            e.at(x, &format!("{pp}.control-word"), "true or false");
                            false
                        }
                    };
                    let vlan = match pget("vlan") {
                        None => None,
                        Some(x) => match scalar(x).and_then(|s| s.parse::<u16>().ok()) {
                            Some(t) if (1..=4094).contains(&t) => Some(t),
                            _ => {
                                e.at(x, &format!("{pp}.vlan"), "a VLAN id, 1..=4094");
                                None
                            }
                        },
                    };
                    Some(PwFrame {
                        control_word,
                        dst_mac,
                        src_mac,
                        vlan,
                    })
                }
            }
        }
    };
    (e.list.len() == before).then_some(Mpls { labels, pw })
}

fn field(n: &Node, path: &str, e: &mut Errs) -> Option<Field> {
    let Some(m) = map(n) else {
        e.at(
            n,
            path,
            "expected { field: NAME, count: N [, step: S] [, random: true] [, nested: true] }",
        );
        return None;
    };
    let get = |k: &str| m.iter().find(|(x, _)| x == k).map(|(_, v)| v);
    let kind = match get("field").and_then(scalar) {
        Some("src-mac") => FieldKind::SrcMac,
        Some("dst-mac") => FieldKind::DstMac,
        Some("vlan") => FieldKind::VlanId,
        Some("src-ip") => FieldKind::SrcIp,
        Some("dst-ip") => FieldKind::DstIp,
        Some("src-port") => FieldKind::SrcPort,
        Some("dst-port") => FieldKind::DstPort,
        Some("flow-label") => FieldKind::FlowLabel,
        Some("label") => FieldKind::Label,
        _ => {
            e.at(
                get("field").unwrap_or(n),
                &format!("{path}.field"),
                "one of src-mac, dst-mac, vlan, src-ip, dst-ip, src-port, dst-port, flow-label, label",
            );
            return None;
        }
    };
    let count = match get("count")
        .and_then(scalar)
        .and_then(|s| s.parse::<u32>().ok())
    {
        Some(c) if c >= 1 => c,
        _ => {
            e.at(
                get("count").unwrap_or(n),
                &format!("{path}.count"),
                "a whole number of values, 1 or more",
            );
            return None;
        }
    };
    let flag = |k: &str, e: &mut Errs| -> bool {
        match get(k).map(|v| (v, scalar(v))) {
            None => false,
            Some((_, Some("true"))) => true,
            Some((_, Some("false"))) => false,
            Some((v, _)) => {
                e.at(v, &format!("{path}.{k}"), "true or false");
                false
            }
        }
    };
    let random = flag("random", e);
    let nested = flag("nested", e);
    let step = match get("step") {
        None => 1,
        Some(v) => match scalar(v).and_then(|s| s.parse::<u128>().ok()) {
            Some(s) if !random => s,
            Some(_) => {
                e.at(v, &format!("{path}.step"), "a random field has no step");
                return None;
            }
            None => {
                e.at(v, &format!("{path}.step"), "a whole number");
                return None;
            }
        },
    };
    for (k, v) in m {
        if !matches!(k.as_str(), "field" | "count" | "step" | "random" | "nested") {
            e.at(v, &format!("{path}.{k}"), "unknown key");
        }
    }
    Some(Field {
        kind,
        vary: if random {
            Vary::Random { count }
        } else {
            Vary::Step { count, step }
        },
        nested,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTER: &str = r#"
router: { workers: 1 }
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
  - { name: p2, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [198.18.0.1/24], ipv6: ["2001:db8::1/64"] }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [198.18.1.1/24], ipv6: ["2001:db8:0:1::1/64"] }
  - { name: p2, port: p2, mac: "02:00:00:00:02:01", ipv4: [198.18.2.1/24] }
neighbors:
  - { interface: p0, ip: 198.18.0.2, mac: "02:00:00:00:00:02" }
  - { interface: p0, ip: "2001:db8::2", mac: "02:00:00:00:00:02" }
  - { interface: p1, ip: 198.18.1.2, mac: "02:00:00:00:01:02" }
  - { interface: p1, ip: "2001:db8:0:1::2", mac: "02:00:00:00:01:02" }
  - { interface: p2, ip: 198.18.2.2, mac: "02:00:00:00:02:02" }
"#;

    fn cfg() -> Config {
        control::config::parse(ROUTER, Path::new("router.yaml")).unwrap()
    }

    #[test]
    fn patterns_address_the_far_neighbour() {
        let p = ports_of(&cfg());
        let mesh = pattern(&p, Pattern::Mesh, &[], false, 1).unwrap();
        assert_eq!(mesh.len(), 6);
        let s = &mesh[0];
        assert_eq!((s.tx_port, s.rx_port), (0, 1));
        assert_eq!(s.dst_mac, [2, 0, 0, 0, 0, 1]);
        assert_eq!(s.src_mac, [2, 0, 0, 0, 0, 2]);
        assert_eq!(
            s.l3,
            L3::V4 {
                src: [198, 18, 0, 2],
                dst: [198, 18, 1, 2]
            }
        );
        let bb = pattern(&p, Pattern::Backbone, &["p2".into()], false, 10).unwrap();
        assert_eq!(bb.len(), 4);
        assert_eq!(bb[0].flows(), 10);
        assert_eq!(pattern(&p, Pattern::Pair, &[], false, 1).unwrap().len(), 2);
        let e = pattern(&p, Pattern::Mesh, &[], true, 1).unwrap_err();
        assert!(e.contains("IPv6 neighbour"), "{e}");
        assert!(pattern(&p, Pattern::Backbone, &[], false, 1).is_err());
    }

    #[test]
    fn a_streams_file_parses_with_router_defaults() {
        let text = r#"
speeds: { default: 1g, p1: 10g }
streams:
  - from: p0
    to: p1
    ipv4: { src: 198.18.0.2, dst: 10.1.0.1 }
    udp: { dst: 80 }
    vary:
      - { field: dst-ip, count: 1000 }
      - { field: src-port, count: 10, random: true }
  - { name: six, from: p1, to: p0, ipv6: { src: "2001:db8:0:1::2", dst: "2001:db8::2" }, udp: none, weight: 2 }
"#;
        let f = parse(text, "s.yaml", &cfg()).unwrap();
        assert_eq!(f.speeds, vec![1e9, 10e9, 1e9]);
        assert_eq!(f.streams.len(), 2);
        let a = &f.streams[0];
        assert_eq!(a.name, "p0>p1");
        assert_eq!(a.udp, Some((1024, 80)));
        assert_eq!(a.dst_mac, [2, 0, 0, 0, 0, 1]);
        assert_eq!(a.flows(), 10_000);
        assert_eq!(f.streams[1].udp, None);
        assert_eq!(f.streams[1].weight, 2.0);
    }

    #[test]
    fn every_mistake_is_named_with_its_line() {
        let text = "streams:\n  - { from: p0, to: p9, ipv4: { src: 1.2.3.4, dst: \"::1\" }, colour: red }\n  - { from: p0, to: p1, ipv4: { src: 1.2.3.4, dst: 5.6.7.8 }, vary: [ { field: ttl, count: 3 } ] }\n";
        let err = parse(text, "s.yaml", &cfg()).unwrap_err();
        assert!(err.contains("s.yaml:2:"), "{err}");
        assert!(err.contains("streams[0].to: no mem port"), "{err}");
        assert!(
            err.contains("streams[0].ipv4.dst: expected an IPv4 address"),
            "{err}"
        );
        assert!(err.contains("streams[0].colour: unknown key"), "{err}");
        assert!(err.contains("s.yaml:3:"), "{err}");
        assert!(err.contains("streams[1].vary[0].field"), "{err}");
        assert!(err.contains("4 error(s); nothing was run"), "{err}");
        let twice = "streams:\n  - { from: p0, to: p1, ipv4: { src: 1.2.3.4, dst: 5.6.7.8 }, vary: [ { field: src-ip, count: 3 }, { field: src-ip, count: 2, nested: true } ] }\n";
        let err = parse(twice, "s.yaml", &cfg()).unwrap_err();
        assert!(
            err.contains("streams[0].vary[1].field: varied already"),
            "{err}"
        );
        assert!(parse("streams: [", "s.yaml", &cfg())
            .unwrap_err()
            .starts_with("s.yaml:"));
    }

    #[test]
    fn mpls_streams_carry_their_stack_and_pseudowire_frame() {
        let text = r#"
streams:
  - from: p1
    to: p0
    ipv4: { src: 10.1.0.2, dst: 10.0.0.2 }
    mpls:
      labels: [300, 1000]
      pw: { control-word: true, dst-mac: "02:ce:00:00:00:01", src-mac: "02:ce:00:00:00:02", vlan: 100 }
    vary:
      - { field: label, count: 16 }
      - { field: vlan, count: 16 }
  - { from: p0, to: p1, ipv4: { src: 10.0.0.2, dst: 10.1.0.2 }, mpls: { labels: [16] } }
"#;
        let f = parse(text, "s.yaml", &cfg()).unwrap();
        let m = f.streams[0].mpls.as_ref().unwrap();
        assert_eq!(m.labels, vec![300, 1000]);
        let pw = m.pw.unwrap();
        assert!(pw.control_word);
        assert_eq!((pw.dst_mac[1], pw.vlan), (0xce, Some(100)));
        assert_eq!(f.streams[0].flows(), 16);
        f.streams[0].validate(&[68], 3).unwrap();
        assert_eq!(f.streams[1].mpls.as_ref().unwrap().pw, None);
        let bad = r#"
streams:
  - from: p1
    to: p0
    ipv4: { src: 10.1.0.2, dst: 10.0.0.2 }
    mpls: { labels: [1048576], pw: { dst-mac: nope, src-mac: "02:00:00:00:00:01", vlan: 0, colour: red } }
  - { from: p0, to: p1, ipv4: { src: 10.0.0.2, dst: 10.1.0.2 }, mpls: { labels: [1, 2, 3, 4, 5] } }
  - { from: p0, to: p1, ipv4: { src: 10.0.0.2, dst: 10.1.0.2 }, vary: [ { field: label, count: 2 } ] }
"#;
        let err = parse(bad, "s.yaml", &cfg()).unwrap_err();
        for want in [
            "s.yaml:6:",
            "streams[0].mpls.labels[0]: a label",
            "streams[0].mpls.pw.dst-mac: a MAC address",
            "streams[0].mpls.pw.vlan: a VLAN id",
            "streams[0].mpls.pw.colour: unknown key",
            "streams[1].mpls.labels: a list of 1 to 4 labels",
            "streams[2].vary: varies a field of a label stack",
        ] {
            assert!(err.contains(want), "{want}: {err}");
        }
    }
}
