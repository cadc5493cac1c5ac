//! The router's configuration: YAML in, a checked [`Config`] out, or a list of errors that each
//! name the file, line and field. Nothing is applied until the whole file is valid.
//!
//! ```yaml
//! router: { workers: 1, icmp-rate: 1000 }
//! limits: { ipv4-routes: 4000000, ipv6-routes: 1000000 }
//! ports:
//!   - { name: p0, driver: pcap, rx: in0.pcap, tx: out0.pcap }
//! interfaces:
//!   - { name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24], ipv6: ["2001:db8:1::1/64"] }
//!   - { name: p0.100, port: p0, vlan: 100, mac: "02:00:00:00:00:01", ipv4: [198.51.100.1/24] }
//! neighbors:
//!   - { interface: p0, ip: 192.0.2.2, mac: "02:00:00:00:00:02" }
//! routes:
//!   - { prefix: 10.0.0.0/8, via: 192.0.2.2 }
//!   - { prefix: 0.0.0.0/0, via: [192.0.2.2, 198.51.100.2] }   # ECMP
//!   - { prefix: 203.0.113.0/24, blackhole: true }
//! route-files:
//!   - { path: table.routes, vrf: default }
//! logging:   # RFC 5424 syslog
//!   servers: ["192.0.2.10:514"]
//!   file: /var/log/linerate.log
//!   facility: local7
//!   severity: info
//! ```

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use fib::Key;
use packet::ethernet::MacAddr;

use crate::yaml::{self, Node, Value};

pub mod control_plane;
pub mod entry;
pub mod services;

pub use control_plane::{ControlPlane, FpmCfg, NeighborTimers};
pub use services::{IfServices, Services, Urpf};

/// One problem in a config file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    /// The field, as a path: `interfaces[1].ipv4[0]`.
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.col)?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        write!(f, "{}", self.message)
    }
}

/// Every error found, in file order.
#[derive(Debug)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.0 {
            writeln!(f, "{e}")?;
        }
        write!(f, "{} error(s); nothing was applied", self.0.len())
    }
}

impl std::error::Error for ConfigErrors {}

/// Where a value came from, kept for errors found after parsing (cross references).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    pub line: usize,
    pub col: usize,
    pub field: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub source: PathBuf,
    pub workers: usize,
    /// CPUs to pin workers to, in order; empty for no pinning.
    pub cores: Vec<usize>,
    pub icmp_rate: u32,
    pub buffers: usize,
    pub max_v4_routes: usize,
    pub max_v6_routes: usize,
    pub vrfs: Vec<String>,
    pub ports: Vec<PortCfg>,
    pub interfaces: Vec<InterfaceCfg>,
    pub neighbors: Vec<NeighborCfg>,
    pub routes: Vec<RouteCfg>,
    pub route_files: Vec<RouteFileCfg>,
    pub logging: crate::syslog::LogConfig,
    /// ACLs, QoS, flow export (see [`services`]).
    pub services: Services,
    /// TAP twins, the punt path, neighbours, FPM (see [`control_plane`]).
    pub control_plane: ControlPlane,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Driver {
    /// Capture files: `rx` is read (classic pcap or pcapng; see `dataplane::port::pcap` for
    /// what is skipped and counted), `tx` is written (pcapng if named `.pcapng`, else pcap).
    Pcap {
        rx: Option<PathBuf>,
        tx: Option<PathBuf>,
    },
    /// In-process rings; the tester (or a program embedding the router) holds the other ends.
    Mem,
    /// A Linux network device through AF_PACKET (TPACKET_V3 rings); `queues` 0 means one.
    AfPacket { device: String, queues: u16 },
    /// A Linux network device through AF_XDP (copy mode where the driver has no zero-copy);
    /// `queues` 0 means every receive queue the device has.
    AfXdp { device: String, queues: u16 },
}

#[derive(Clone, Debug, PartialEq)]
pub struct PortCfg {
    pub name: String,
    pub driver: Driver,
    pub origin: Origin,
}

#[derive(Clone, Debug, PartialEq)]
pub struct InterfaceCfg {
    pub name: String,
    pub port: String,
    pub vlan: Option<u16>,
    pub mac: MacAddr,
    pub mtu: u16,
    pub vrf: String,
    pub up: bool,
    pub ipv4: Vec<(u32, u8)>,
    pub ipv6: Vec<(u128, u8)>,
    pub services: IfServices,
    /// The name of its TAP twin in the kernel (with `control-plane.taps`).
    pub host_name: String,
    pub origin: Origin,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NeighborCfg {
    pub interface: String,
    pub ip: IpAddr,
    pub mac: MacAddr,
    pub origin: Origin,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Via(Vec<IpAddr>),
    Blackhole,
    Reject,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RouteCfg {
    pub vrf: String,
    pub prefix: Prefix,
    pub target: Target,
    pub origin: Origin,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RouteFileCfg {
    pub path: PathBuf,
    pub vrf: String,
    pub origin: Origin,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prefix {
    V4(u32, u8),
    V6(u128, u8),
}

impl Prefix {
    /// Parses `ADDR/LEN` (a bare address is a host prefix); host bits must be zero.
    pub fn parse(s: &str) -> Result<Prefix, String> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .trim()
            .parse()
            .map_err(|_| format!("`{s}` is not an IPv4 or IPv6 prefix"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len: u8 = match l {
            Some(l) => l
                .trim()
                .parse()
                .ok()
                .filter(|&n: &u8| n as u32 <= max)
                .ok_or_else(|| format!("`{s}`: prefix length must be 0..={max}"))?,
            None => max as u8,
        };
        let host_bits = |net: String| format!("`{s}` has host bits set; did you mean {net}/{len}?");
        let p = match addr {
            IpAddr::V4(v) => {
                let a = u32::from(v);
                if a.masked(len) != a {
                    return Err(host_bits(
                        std::net::Ipv4Addr::from(a.masked(len)).to_string(),
                    ));
                }
                Prefix::V4(a, len)
            }
            IpAddr::V6(v) => {
                let a = u128::from(v);
                if a.masked(len) != a {
                    return Err(host_bits(
                        std::net::Ipv6Addr::from(a.masked(len)).to_string(),
                    ));
                }
                Prefix::V6(a, len)
            }
        };
        Ok(p)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Prefix::V4(a, l) => write!(f, "{}/{l}", std::net::Ipv4Addr::from(a)),
            Prefix::V6(a, l) => write!(f, "{}/{l}", std::net::Ipv6Addr::from(a)),
        }
    }
}

/// Reads the fields of one mapping, collecting errors instead of stopping at the first, and
/// complaining about keys nobody asked for (a misspelt key is a mistake, not a default).
struct Fields<'a> {
    path: String,
    node: &'a Node,
    map: &'a [(String, Node)],
    used: Vec<&'a str>,
}

struct Errs<'a> {
    file: &'a str,
    /// The file's text, for positions inside a scalar (a quoted one starts a column later).
    text: &'a str,
    list: Vec<ConfigError>,
}

impl<'a> Errs<'a> {
    fn at(&mut self, n: &Node, field: &str, message: impl Into<String>) {
        self.list.push(ConfigError {
            file: self.file.to_string(),
            line: n.line,
            col: n.col,
            field: field.to_string(),
            message: message.into(),
        });
    }
    fn origin(&mut self, o: &Origin, message: impl Into<String>) {
        self.list.push(ConfigError {
            file: self.file.to_string(),
            line: o.line,
            col: o.col,
            field: o.field.clone(),
            message: message.into(),
        });
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl<'a> Fields<'a> {
    fn new(path: String, node: &'a Node, e: &mut Errs) -> Option<Self> {
        match &node.value {
            Value::Map(m) => Some(Self {
                path,
                node,
                map: m,
                used: Vec::new(),
            }),
            Value::Null => Some(Self {
                path,
                node,
                map: &[],
                used: Vec::new(),
            }),
            _ => {
                e.at(node, &path, "expected a mapping (key: value)");
                None
            }
        }
    }

    fn get(&mut self, key: &'a str) -> Option<&'a Node> {
        self.used.push(key);
        self.map
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .filter(|v| !matches!(v.value, Value::Null))
    }

    fn field(&self, key: &str) -> String {
        join(&self.path, key)
    }

    fn origin(&self) -> Origin {
        Origin {
            line: self.node.line,
            col: self.node.col,
            field: self.path.clone(),
        }
    }

    fn str(&mut self, key: &'a str, e: &mut Errs) -> Option<String> {
        let n = self.get(key)?;
        match &n.value {
            Value::Scalar(s) => Some(s.clone()),
            _ => {
                e.at(n, &self.field(key), "expected a single value");
                None
            }
        }
    }

    fn required(&mut self, key: &'a str, e: &mut Errs) -> Option<String> {
        let v = self.str(key, e);
        if v.is_none() && !self.map.iter().any(|(k, _)| k == key) {
            e.at(self.node, &self.field(key), format!("`{key}` is required"));
        }
        v
    }

    fn parse<T: std::str::FromStr>(&mut self, key: &'a str, what: &str, e: &mut Errs) -> Option<T> {
        let n = self.get(key)?;
        let f = self.field(key);
        match &n.value {
            Value::Scalar(s) => match s.parse() {
                Ok(v) => Some(v),
                Err(_) => {
                    e.at(n, &f, format!("`{s}` is not {what}"));
                    None
                }
            },
            _ => {
                e.at(n, &f, format!("expected {what}"));
                None
            }
        }
    }

    /// A list of scalars; a single scalar counts as a list of one.
    fn list(&mut self, key: &'a str, e: &mut Errs) -> Vec<(String, &'a Node, String)> {
        let Some(n) = self.get(key) else {
            return Vec::new();
        };
        let f = self.field(key);
        match &n.value {
            Value::Scalar(s) => vec![(s.clone(), n, f)],
            Value::Seq(items) => items
                .iter()
                .enumerate()
                .filter_map(|(i, it)| match &it.value {
                    Value::Scalar(s) => Some((s.clone(), it, format!("{f}[{i}]"))),
                    _ => {
                        e.at(it, &format!("{f}[{i}]"), "expected a single value");
                        None
                    }
                })
                .collect(),
            _ => {
                e.at(n, &f, "expected a list");
                Vec::new()
            }
        }
    }

    fn finish(self, e: &mut Errs) {
        for (k, v) in self.map {
            if !self.used.contains(&k.as_str()) {
                let known = self.used.join(", ");
                e.at(
                    v,
                    &join(&self.path, k),
                    format!("unknown key `{k}` (known here: {known})"),
                );
            }
        }
    }
}

fn seq<'a>(f: &mut Fields<'a>, key: &'a str, e: &mut Errs) -> Vec<(&'a Node, String)> {
    let Some(n) = f.get(key) else {
        return Vec::new();
    };
    let path = f.field(key);
    match &n.value {
        Value::Seq(items) => items
            .iter()
            .enumerate()
            .map(|(i, it)| (it, format!("{path}[{i}]")))
            .collect(),
        _ => {
            e.at(n, &path, "expected a list");
            Vec::new()
        }
    }
}

fn mac(s: &str, n: &Node, field: &str, e: &mut Errs) -> Option<MacAddr> {
    match s.parse::<MacAddr>() {
        Ok(m) if m.is_unicast() && !m.is_zero() => Some(m),
        Ok(_) => {
            e.at(n, field, format!("`{s}` is not a unicast MAC address"));
            None
        }
        Err(_) => {
            e.at(
                n,
                field,
                format!("`{s}` is not a MAC address (aa:bb:cc:dd:ee:ff)"),
            );
            None
        }
    }
}

/// Reads and checks a config file. Relative paths inside it are relative to its folder.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| {
        ConfigErrors(vec![ConfigError {
            file: file.clone(),
            line: 0,
            col: 0,
            field: String::new(),
            message: format!("cannot read: {err}"),
        }])
    })?;
    parse(&text, path)
}

/// Checks config text as if read from `path`.
pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigErrors> {
    let file = path.display().to_string();
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let root = yaml::parse(text).map_err(|s| {
        ConfigErrors(vec![ConfigError {
            file: file.clone(),
            line: s.line,
            col: s.col,
            field: String::new(),
            message: format!("YAML syntax: {}", s.message),
        }])
    })?;
    let mut e = Errs {
        file: &file,
        text,
        list: Vec::new(),
    };
    let mut cfg = Config {
        source: path.to_path_buf(),
        workers: 1,
        cores: Vec::new(),
        icmp_rate: 1000,
        buffers: 16384,
        max_v4_routes: 4_000_000,
        max_v6_routes: 1_000_000,
        vrfs: vec!["default".into()],
        ports: Vec::new(),
        interfaces: Vec::new(),
        neighbors: Vec::new(),
        routes: Vec::new(),
        route_files: Vec::new(),
        logging: Default::default(),
        services: Services {
            acl_log_interval_s: 10,
            ..Default::default()
        },
        control_plane: ControlPlane::default(),
    };
    let Some(mut top) = Fields::new(String::new(), &root, &mut e) else {
        return Err(ConfigErrors(e.list));
    };

    if let Some(n) = top.get("router") {
        if let Some(mut f) = Fields::new("router".into(), n, &mut e) {
            if let Some(w) = f.parse::<usize>("workers", "a worker count", &mut e) {
                if w == 0 || w > 64 {
                    e.at(n, "router.workers", "workers must be 1..=64");
                } else {
                    cfg.workers = w;
                }
            }
            for (s, node, field) in f.list("cores", &mut e) {
                match s.parse() {
                    Ok(c) => cfg.cores.push(c),
                    Err(_) => e.at(node, &field, format!("`{s}` is not a CPU number")),
                }
            }
            if let Some(r) = f.parse("icmp-rate", "a rate (messages per second)", &mut e) {
                cfg.icmp_rate = r;
            }
            if let Some(b) = f.parse::<usize>("buffers", "a buffer count", &mut e) {
                if b < 1024 {
                    e.at(n, "router.buffers", "at least 1024 buffers");
                } else {
                    cfg.buffers = b;
                }
            }
            f.finish(&mut e);
        }
    }
    if let Some(n) = top.get("limits") {
        if let Some(mut f) = Fields::new("limits".into(), n, &mut e) {
            if let Some(v) = f.parse("ipv4-routes", "a route count", &mut e) {
                cfg.max_v4_routes = v;
            }
            if let Some(v) = f.parse("ipv6-routes", "a route count", &mut e) {
                cfg.max_v6_routes = v;
            }
            f.finish(&mut e);
        }
    }
    for (n, path) in seq(&mut top, "vrfs", &mut e) {
        match &n.value {
            Value::Scalar(s) if !cfg.vrfs.contains(s) => cfg.vrfs.push(s.clone()),
            Value::Scalar(s) => e.at(n, &path, format!("VRF `{s}` defined twice")),
            _ => e.at(n, &path, "expected a VRF name"),
        }
    }
    for (n, path) in seq(&mut top, "ports", &mut e) {
        let Some(mut f) = Fields::new(path.clone(), n, &mut e) else {
            continue;
        };
        let origin = f.origin();
        let name = f.required("name", &mut e);
        let driver = f.required("driver", &mut e);
        let rx = f.str("rx", &mut e).map(|p| dir.join(p));
        let tx = f.str("tx", &mut e).map(|p| dir.join(p));
        let device = f.str("device", &mut e);
        // 0: as many as the device has (AF_XDP sees only the queues it binds), or one (AF_PACKET
        // sees the whole device through any number).
        let queues: u16 = f.parse("queues", "a queue count", &mut e).unwrap_or(0);
        if queues > 64 {
            e.at(
                n,
                &format!("{path}.queues"),
                "queues must be 1..=64 (or 0: automatic)",
            );
        }
        let kernel_dev = |e: &mut Errs| {
            if device.is_none() {
                e.at(
                    n,
                    &path,
                    "this driver needs `device` (a Linux interface name)",
                );
            }
            device.clone().unwrap_or_default()
        };
        let driver = match driver.as_deref() {
            Some("pcap") => {
                if rx.is_none() && tx.is_none() {
                    e.at(n, &path, "a pcap port needs `rx` and/or `tx` files");
                }
                Some(Driver::Pcap { rx, tx })
            }
            Some("mem") => Some(Driver::Mem),
            Some("af_packet") => Some(Driver::AfPacket {
                device: kernel_dev(&mut e),
                queues,
            }),
            Some("af_xdp") => Some(Driver::AfXdp {
                device: kernel_dev(&mut e),
                queues,
            }),
            Some(d) => {
                e.at(
                    n,
                    &format!("{path}.driver"),
                    format!("unknown driver `{d}` (pcap, mem, af_packet, af_xdp)"),
                );
                None
            }
            None => None,
        };
        f.finish(&mut e);
        if let (Some(name), Some(driver)) = (name, driver) {
            if cfg.ports.iter().any(|p| p.name == name) {
                e.at(
                    n,
                    &format!("{path}.name"),
                    format!("port `{name}` defined twice"),
                );
            }
            cfg.ports.push(PortCfg {
                name,
                driver,
                origin,
            });
        }
    }
    for (n, path) in seq(&mut top, "interfaces", &mut e) {
        let Some(mut f) = Fields::new(path.clone(), n, &mut e) else {
            continue;
        };
        let origin = f.origin();
        let name = f.required("name", &mut e);
        let port = f.required("port", &mut e);
        let vlan: Option<u16> = f.parse("vlan", "a VLAN id", &mut e);
        if let Some(v) = vlan {
            if !(1..=4094).contains(&v) {
                e.at(n, &format!("{path}.vlan"), "VLAN id must be 1..=4094");
            }
        }
        let mac_s = f.required("mac", &mut e);
        let mac_v = mac_s.and_then(|s| {
            let node = f
                .map
                .iter()
                .find(|(k, _)| k == "mac")
                .map(|(_, v)| v)
                .unwrap_or(n);
            mac(&s, node, &format!("{path}.mac"), &mut e)
        });
        let mtu: u16 = f.parse("mtu", "an MTU", &mut e).unwrap_or(1500);
        if !(68..=9198).contains(&mtu) {
            e.at(
                n,
                &format!("{path}.mtu"),
                "MTU must be 68..=9198 (9,216-byte frames)",
            );
        }
        let vrf = f.str("vrf", &mut e).unwrap_or_else(|| "default".into());
        let up = match f.str("state", &mut e).as_deref() {
            None | Some("up") => true,
            Some("down") => false,
            Some(s) => {
                e.at(
                    n,
                    &format!("{path}.state"),
                    format!("`{s}`: state is up or down"),
                );
                true
            }
        };
        let mut ipv4 = Vec::new();
        for (s, node, field) in f.list("ipv4", &mut e) {
            match s
                .split_once('/')
                .map(|(a, l)| (a.parse::<std::net::Ipv4Addr>(), l.parse::<u8>()))
            {
                Some((Ok(a), Ok(l))) if (1..=32).contains(&l) => ipv4.push((u32::from(a), l)),
                _ => e.at(node, &field, format!("`{s}` is not an IPv4 address/length")),
            }
        }
        let mut ipv6 = Vec::new();
        for (s, node, field) in f.list("ipv6", &mut e) {
            match s
                .split_once('/')
                .map(|(a, l)| (a.parse::<std::net::Ipv6Addr>(), l.parse::<u8>()))
            {
                Some((Ok(a), Ok(l))) if (1..=128).contains(&l) => ipv6.push((u128::from(a), l)),
                _ => e.at(node, &field, format!("`{s}` is not an IPv6 address/length")),
            }
        }
        let services = services::parse_if_services(&mut f, n, &path, &mut e);
        let host_name = f.str("host-name", &mut e);
        f.finish(&mut e);
        if let (Some(name), Some(port), Some(mac)) = (name, port, mac_v) {
            let host_name = host_name.unwrap_or_else(|| format!("lr-{name}"));
            if host_name.is_empty() || host_name.len() > 15 || host_name.contains(['/', ' ', ':']) {
                e.at(
                    n,
                    &format!("{path}.host-name"),
                    format!("`{host_name}` is not a Linux interface name (1-15 characters, no `/`, `:` or space); set `host-name`"),
                );
            }
            cfg.interfaces.push(InterfaceCfg {
                name,
                port,
                vlan,
                mac,
                mtu,
                vrf,
                up,
                ipv4,
                ipv6,
                services,
                host_name,
                origin,
            });
        }
    }
    for (n, path) in seq(&mut top, "neighbors", &mut e) {
        let Some(mut f) = Fields::new(path.clone(), n, &mut e) else {
            continue;
        };
        let origin = f.origin();
        let interface = f.required("interface", &mut e);
        let ip: Option<IpAddr> = f.parse("ip", "an IP address", &mut e);
        if f.map.iter().all(|(k, _)| k != "ip") {
            e.at(n, &format!("{path}.ip"), "`ip` is required");
        }
        let m = f
            .required("mac", &mut e)
            .and_then(|s| mac(&s, n, &format!("{path}.mac"), &mut e));
        f.finish(&mut e);
        if let (Some(interface), Some(ip), Some(mac)) = (interface, ip, m) {
            cfg.neighbors.push(NeighborCfg {
                interface,
                ip,
                mac,
                origin,
            });
        }
    }
    for (n, path) in seq(&mut top, "routes", &mut e) {
        let Some(mut f) = Fields::new(path.clone(), n, &mut e) else {
            continue;
        };
        let origin = f.origin();
        let prefix = f
            .required("prefix", &mut e)
            .and_then(|s| match Prefix::parse(&s) {
                Ok(p) => Some(p),
                Err(m) => {
                    e.at(n, &format!("{path}.prefix"), m);
                    None
                }
            });
        let vrf = f.str("vrf", &mut e).unwrap_or_else(|| "default".into());
        let mut via = Vec::new();
        for (s, node, field) in f.list("via", &mut e) {
            match s.parse::<IpAddr>() {
                Ok(a) => via.push(a),
                Err(_) => e.at(node, &field, format!("`{s}` is not an IP address")),
            }
        }
        let blackhole = f
            .parse::<bool>("blackhole", "true or false", &mut e)
            .unwrap_or(false);
        let reject = f
            .parse::<bool>("reject", "true or false", &mut e)
            .unwrap_or(false);
        f.finish(&mut e);
        let target = match (via.is_empty(), blackhole, reject) {
            (false, false, false) => Some(Target::Via(via)),
            (true, true, false) => Some(Target::Blackhole),
            (true, false, true) => Some(Target::Reject),
            (true, false, false) => {
                e.at(
                    n,
                    &path,
                    "a route needs `via`, `blackhole: true` or `reject: true`",
                );
                None
            }
            _ => {
                e.at(
                    n,
                    &path,
                    "`via`, `blackhole` and `reject` exclude each other",
                );
                None
            }
        };
        if let (Some(prefix), Some(target)) = (prefix, target) {
            cfg.routes.push(RouteCfg {
                vrf,
                prefix,
                target,
                origin,
            });
        }
    }
    for (n, path) in seq(&mut top, "route-files", &mut e) {
        let Some(mut f) = Fields::new(path.clone(), n, &mut e) else {
            continue;
        };
        let origin = f.origin();
        let p = f.required("path", &mut e);
        let vrf = f.str("vrf", &mut e).unwrap_or_else(|| "default".into());
        f.finish(&mut e);
        if let Some(p) = p {
            let full = dir.join(&p);
            if !full.is_file() {
                e.at(
                    n,
                    &format!("{path}.path"),
                    format!("route file `{}` not found", full.display()),
                );
            }
            cfg.route_files.push(RouteFileCfg {
                path: full,
                vrf,
                origin,
            });
        }
    }
    if let Some(n) = top.get("control-plane") {
        cfg.control_plane = control_plane::parse(n, &cfg.vrfs, &mut e);
    }
    if let Some(n) = top.get("logging") {
        if let Some(mut f) = Fields::new("logging".into(), n, &mut e) {
            for (s, node, field) in f.list("servers", &mut e) {
                // A bare address means the syslog port.
                let full = if s.parse::<IpAddr>().is_ok() {
                    if s.contains(':') {
                        format!("[{s}]:514")
                    } else {
                        format!("{s}:514")
                    }
                } else {
                    s.clone()
                };
                match full.parse() {
                    Ok(a) => cfg.logging.servers.push(a),
                    Err(_) => e.at(
                        node,
                        &field,
                        format!("`{s}` is not ADDRESS or ADDRESS:PORT (IPv6 as [ADDRESS]:PORT)"),
                    ),
                }
            }
            if let Some(p) = f.str("file", &mut e) {
                cfg.logging.file = Some(dir.join(p));
            }
            if let Some(v) = f.str("facility", &mut e) {
                match crate::syslog::Facility::parse(&v) {
                    Some(x) => cfg.logging.facility = x,
                    None => e.at(
                        n,
                        "logging.facility",
                        format!("unknown facility `{v}` (daemon, local0 ... local7, ...)"),
                    ),
                }
            }
            if let Some(v) = f.str("severity", &mut e) {
                match crate::syslog::Severity::parse(&v) {
                    Some(x) => cfg.logging.min_severity = x,
                    None => e.at(
                        n,
                        "logging.severity",
                        format!(
                            "unknown severity `{v}` (emerg, alert, crit, err, warning, notice, info, debug)"
                        ),
                    ),
                }
            }
            if let Some(v) = f.parse::<u32>("acl-interval", "a number of seconds", &mut e) {
                if v == 0 {
                    e.at(n, "logging.acl-interval", "at least 1 second");
                }
                cfg.services.acl_log_interval_s = v.max(1);
            }
            if let Some(h) = f.str("hostname", &mut e) {
                cfg.logging.hostname = Some(h);
            }
            f.finish(&mut e);
        }
    }
    cfg.services.acls = services::parse_acls(&mut top, &dir, &mut e);
    services::parse_qos(&mut top, &mut e, &mut cfg.services);
    cfg.services.flow_export = services::parse_flow_export(&mut top, &mut e);
    top.finish(&mut e);
    // References are checked only between fields that are themselves valid; otherwise one typo
    // would be reported again as every reference to it.
    if e.list.is_empty() {
        cross_check(&cfg, &mut e);
    }
    if e.list.is_empty() {
        Ok(cfg)
    } else {
        e.list.sort_by_key(|x| (x.line, x.col));
        Err(ConfigErrors(e.list))
    }
}

/// Checks the references between sections: interfaces name ports and VRFs that exist, neighbours
/// sit on a subnet of their interface, routes point at known neighbours.
fn cross_check(cfg: &Config, e: &mut Errs) {
    services::cross_check(cfg, e);
    for (i, ifc) in cfg.interfaces.iter().enumerate() {
        if !cfg.ports.iter().any(|p| p.name == ifc.port) {
            e.origin(
                &ifc.origin,
                format!("interface `{}`: no port named `{}`", ifc.name, ifc.port),
            );
        }
        if !cfg.vrfs.contains(&ifc.vrf) {
            e.origin(
                &ifc.origin,
                format!("VRF `{}` is not defined under `vrfs`", ifc.vrf),
            );
        }
        let dup = cfg.interfaces[..i]
            .iter()
            .any(|o| o.name == ifc.name || (o.port == ifc.port && o.vlan == ifc.vlan));
        if dup {
            e.origin(
                &ifc.origin,
                format!(
                    "interface `{}` duplicates another (name, or port and VLAN)",
                    ifc.name
                ),
            );
        }
    }
    for nb in &cfg.neighbors {
        let Some(ifc) = cfg.interfaces.iter().find(|i| i.name == nb.interface) else {
            e.origin(&nb.origin, format!("no interface named `{}`", nb.interface));
            continue;
        };
        if !on_subnet(ifc, nb.ip) {
            e.origin(
                &nb.origin,
                format!("{} is not on a subnet of interface `{}`", nb.ip, ifc.name),
            );
        }
    }
    for r in &cfg.routes {
        if !cfg.vrfs.contains(&r.vrf) {
            e.origin(
                &r.origin,
                format!("VRF `{}` is not defined under `vrfs`", r.vrf),
            );
        }
        if let Target::Via(v) = &r.target {
            if v.len() > 64 {
                e.origin(&r.origin, "at most 64 equal-cost next hops");
            }
            for a in v {
                if a.is_ipv4() != matches!(r.prefix, Prefix::V4(..)) {
                    e.origin(
                        &r.origin,
                        format!("next hop {a} is not of the prefix's family"),
                    );
                } else if find_neighbor(cfg, &r.vrf, *a).is_none()
                    && find_connected(cfg, &r.vrf, *a).is_none()
                {
                    e.origin(
                        &r.origin,
                        format!(
                            "next hop {a} is not a neighbor nor on a connected subnet in VRF `{}`",
                            r.vrf
                        ),
                    );
                }
            }
        }
    }
    if cfg.control_plane.taps {
        for (i, a) in cfg.interfaces.iter().enumerate() {
            if cfg.interfaces[..i]
                .iter()
                .any(|b| b.host_name == a.host_name)
            {
                e.origin(
                    &a.origin,
                    format!("host-name `{}` is used by two interfaces", a.host_name),
                );
            }
        }
    }
    for rf in &cfg.route_files {
        if !cfg.vrfs.contains(&rf.vrf) {
            e.origin(
                &rf.origin,
                format!("VRF `{}` is not defined under `vrfs`", rf.vrf),
            );
        }
    }
}

pub fn on_subnet(ifc: &InterfaceCfg, ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => {
            let a = u32::from(a);
            ifc.ipv4.iter().any(|&(n, l)| {
                let m = u32::MAX << (32 - l as u32);
                a & m == n & m && a != n
            })
        }
        IpAddr::V6(a) => {
            let a = u128::from(a);
            ifc.ipv6.iter().any(|&(n, l)| {
                let m = u128::MAX << (128 - l as u32);
                a & m == n & m && a != n
            })
        }
    }
}

/// The interface of `vrf` whose subnet holds `ip` (a next hop resolved by ARP or ND).
pub fn find_connected<'c>(cfg: &'c Config, vrf: &str, ip: IpAddr) -> Option<&'c InterfaceCfg> {
    cfg.interfaces
        .iter()
        .find(|i| i.vrf == vrf && on_subnet(i, ip))
}

/// The neighbour entry for `ip` on an interface of `vrf`.
pub fn find_neighbor<'c>(cfg: &'c Config, vrf: &str, ip: IpAddr) -> Option<&'c NeighborCfg> {
    cfg.neighbors.iter().find(|n| {
        n.ip == ip
            && cfg
                .interfaces
                .iter()
                .any(|i| i.name == n.interface && i.vrf == vrf)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
ports:
  - { name: p0, driver: mem }
interfaces:
  - name: p0
    port: p0
    mac: 02:00:00:00:00:01
    ipv4: [192.0.2.1/24]
neighbors:
  - { interface: p0, ip: 192.0.2.2, mac: 02:00:00:00:00:02 }
routes:
  - { prefix: 10.0.0.0/8, via: 192.0.2.2 }
";

    fn errors(text: &str) -> Vec<ConfigError> {
        parse(text, Path::new("lab.yaml")).unwrap_err().0
    }

    #[test]
    fn good_config_parses() {
        let c = parse(GOOD, Path::new("lab.yaml")).unwrap();
        assert_eq!(c.interfaces[0].ipv4, vec![(0xC000_0201, 24)]);
        assert_eq!(c.routes[0].prefix, Prefix::V4(0x0A00_0000, 8));
    }

    #[test]
    fn a_bad_value_names_file_line_and_field() {
        let e = errors(&GOOD.replace("192.0.2.1/24", "192.0.2.300/24"));
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(
            (e[0].file.as_str(), e[0].line, e[0].field.as_str()),
            ("lab.yaml", 7, "interfaces[0].ipv4[0]")
        );
        assert!(e[0].to_string().starts_with("lab.yaml:7:"), "{}", e[0]);
    }

    #[test]
    fn unknown_keys_are_errors_not_silence() {
        let e = errors(&GOOD.replace("    port: p0\n", "    port: p0\n    mtuu: 1500\n"));
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!((e[0].line, e[0].field.as_str()), (6, "interfaces[0].mtuu"));
        assert!(e[0].message.contains("unknown key `mtuu`"));
    }

    #[test]
    fn cross_references_are_checked() {
        let e = errors(&GOOD.replace("via: 192.0.2.2", "via: 198.51.100.9"));
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].line, e[0].field.as_str()), (11, "routes[0]"));
        assert!(e[0].message.contains("198.51.100.9 is not a neighbor"));
        // On a connected subnet: resolved by ARP at run time.
        assert!(parse(
            &GOOD.replace("via: 192.0.2.2", "via: 192.0.2.9"),
            Path::new("lab.yaml")
        )
        .is_ok());
        let e = errors(&GOOD.replace("port: p0", "port: p9"));
        assert!(e[0].message.contains("no port named `p9`"), "{e:?}");
    }

    #[test]
    fn every_error_is_reported_at_once() {
        let bad = GOOD
            .replace("10.0.0.0/8", "10.0.0.1/8")
            .replace("02:00:00:00:00:02", "zz:00:00:00:00:02")
            .replace("driver: mem", "driver: dpdk");
        let e = errors(&bad);
        let fields: Vec<_> = e.iter().map(|x| x.field.as_str()).collect();
        assert!(fields.contains(&"ports[0].driver"), "{fields:?}");
        assert!(fields.contains(&"neighbors[0].mac"), "{fields:?}");
        assert!(fields.contains(&"routes[0].prefix"), "{fields:?}");
        assert!(e
            .iter()
            .any(|x| x.message.contains("did you mean 10.0.0.0/8")));
    }

    #[test]
    fn yaml_syntax_errors_have_a_position() {
        let e = errors("ports:\n  - { name: p0, driver: mem\n");
        assert_eq!(e.len(), 1);
        assert!(e[0].line >= 2, "{e:?}");
        assert!(e[0].message.starts_with("YAML syntax"));
    }
}
