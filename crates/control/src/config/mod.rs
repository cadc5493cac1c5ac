//! The router's configuration: YAML in, a checked [`Config`] out, or a list of errors that each
//! name the file, line and field. Nothing is applied until the whole file is valid.
//!
//! ```yaml
//! router: { workers: 1, icmp-rate: 1000 }   # route-class-e: true forwards to 240.0.0.0/4
//! limits: { ipv4-routes: 4000000, ipv6-routes: 1000000 }
//! ports:
//!   - { name: p0, driver: pcap, rx: in0.pcap, tx: out0.pcap }
//! interfaces:
//!   - { name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24], ipv6: ["2001:db8:1::1/64"] }
//!   - { name: p0.100, port: p0, vlan: 100, mac: "02:00:00:00:00:01", ipv4: [198.51.100.1/24] }
//!   # 802.1ad Q-in-Q: S-tag 10 (TPID 0x88a8) and C-tag 20; without `vlan`, every frame of the
//!   # S-tag. Bridge members only (see bridges.rs).
//!   - { name: p0.10.20, port: p0, s-vlan: 10, vlan: 20, mac: "02:00:00:00:00:01" }
//!   # A bridge's routed interface (BVI, IRB): on a bridge instead of a port (see bridges.rs).
//!   - { name: bvi10, bridge: office, mac: "02:00:00:00:00:10", ipv4: [10.10.0.1/24] }
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
//!
//! Besides each value's own syntax and range, `check` refuses:
//! - an empty file, or a second YAML document after `---` (it would be ignored);
//! - a file that is not UTF-8 (at its first bad byte);
//! - an IPv4 interface address that is its subnet's network or broadcast address (a /31 or /32
//!   may use them, RFC 3021);
//! - subnets that overlap on two interfaces of one VRF, or the same subnet twice on one interface
//!   (IPv4 and IPv6; other VRFs may reuse addresses, and IPv6 link-local subnets repeat per link);
//! - a prefix configured twice in `routes` of one VRF, whether the targets differ (the last would
//!   silently win) or not (an edit of one copy would make them differ): ECMP is one route with
//!   several next hops in `via`;
//! - a neighbour or next hop at an interface's own address;
//! - an 802.1ad (`s-vlan`) sub-interface that is not a bridge member (routing on them is not
//!   built), or two interfaces on one port with the same tags;
//! - an interface with both `port` and `bridge`, or neither; a routed interface (`bridge`) with
//!   VLAN tags, on a bridge that does not exist or has one already, or itself a bridge member;
//! - `router.buffers` whose pool (9,408 bytes a buffer) exceeds 3/4 of the machine's memory.
//!
//! Every error names the file, line, column and field; values are echoed as written, cut to 40
//! characters. All errors are collected; the report prints the first [`MAX_PRINTED`] and the
//! count. Route files are checked when the router is built, every bad line reported the same way.

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use fib::Key;
use packet::ethernet::MacAddr;

use crate::yaml::{self, Value};

pub mod atm;
pub mod bridges;
mod check;
pub mod control_plane;
pub mod dlsw;
pub mod edit;
pub mod entry;
pub mod events;
mod fields;
pub mod ggsn;
mod interfaces;
pub mod l3vpn;
mod logging;
pub mod lr;
pub mod mcast_routing;
pub mod mpls;
mod router;
mod routes;
pub mod services;
pub mod snmp;
pub mod snooping;

pub use bridges::{BridgeCfg, MemberCfg, StaticMacCfg};
pub use check::{find_connected, find_neighbor, on_subnet};
pub use control_plane::{ControlPlane, FpmCfg, NeighborTimers};
use fields::{Errs, Fields};
pub use router::{check_buffers, machine_memory};
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

/// At most this many errors are printed, then how many more there were: a file with a million
/// bad lines should not bury the first ones.
pub const MAX_PRINTED: usize = 20;

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&report(&self.0, self.0.len()))
    }
}

/// The error report: the first [`MAX_PRINTED`] of `total` errors, one a line, then how many more
/// there were and the count. `errors` may hold only the first ones of a long list.
pub fn report(errors: &[ConfigError], total: usize) -> String {
    let mut s = String::new();
    for e in errors.iter().take(MAX_PRINTED) {
        s.push_str(&e.to_string());
        s.push('\n');
    }
    let shown = errors.len().min(MAX_PRINTED);
    if total > shown {
        s.push_str(&format!("... and {} more\n", total - shown));
    }
    s.push_str(&format!(
        "{total} error{}; nothing was applied",
        if total == 1 { "" } else { "s" }
    ));
    s
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
    /// `router.idle-sleep-us`: an idle worker sleeps this long between polls instead of
    /// yielding (0, the default: it yields, and takes whatever CPU the scheduler offers).
    pub idle_sleep_us: u32,
    /// Forward IPv4 to class E destinations (240.0.0.0/4), which RFC 1812 5.3.7 says a router
    /// should not (`router.route-class-e`, off by default).
    pub route_class_e: bool,
    pub buffers: usize,
    pub max_v4_routes: usize,
    pub max_v6_routes: usize,
    /// The MAC table's size (`limits.macs`), fixed at start.
    pub max_macs: usize,
    /// The IGMP/MLD snooping table's size in groups (`limits.mcast-groups`), fixed at start.
    pub max_mcast_groups: usize,
    /// The multicast FIB's size (`limits.mroutes`).
    pub max_mroutes: usize,
    pub vrfs: Vec<String>,
    pub ports: Vec<PortCfg>,
    pub interfaces: Vec<InterfaceCfg>,
    /// Bridge domains (see [`bridges`]).
    pub bridges: Vec<BridgeCfg>,
    pub neighbors: Vec<NeighborCfg>,
    pub routes: Vec<RouteCfg>,
    pub route_files: Vec<RouteFileCfg>,
    pub logging: crate::syslog::LogConfig,
    /// `snmp`: IF-MIB served through snmpd (AgentX); None: no SNMP.
    pub snmp: Option<snmp::SnmpCfg>,
    /// ACLs, QoS, flow export (see [`services`]).
    pub services: Services,
    /// TAP twins, the punt path, neighbours, FPM (see [`control_plane`]).
    pub control_plane: ControlPlane,
    /// `multicast-routing`: None where no VRF routes multicast.
    pub mcast_routing: Option<mcast_routing::McastRoutingCfg>,
    /// The PDP context table's size (`limits.gtp-contexts`), fixed at start.
    pub max_gtp_contexts: usize,
    /// `ggsn`: None where the router is no GGSN.
    pub ggsn: Option<ggsn::GgsnCfg>,
    /// `dlsw`: None where the router is no DLSw peer.
    pub dlsw: Option<dlsw::DlswCfg>,
    /// `event-manager`: None where no rule is configured.
    pub events: Option<events::EventsCfg>,
    /// `mpls`: None where no interface takes labels.
    pub mpls: Option<mpls::MplsCfg>,
    /// `l3vpn`: None where the router is no VPN PE.
    pub l3vpn: Option<l3vpn::L3vpnCfg>,
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
    /// A Linux network device through AF_PACKET; `queues` 0 means one. `frames`: the receive
    /// ring is one slot per frame (`rx-ring: frames`, the default, TPACKET_V2: each frame
    /// handed over at once) instead of blocks (`rx-ring: blocks`, TPACKET_V3: less work per
    /// frame at low rates, but a frame waits up to the 1 ms block timeout: 580 us median at
    /// 100,000 frames/s on veth, against 28 us).
    AfPacket {
        device: String,
        queues: u16,
        frames: bool,
    },
    /// A Linux network device through AF_XDP (copy mode where the driver has no zero-copy);
    /// `queues` 0 means every receive queue the device has.
    AfXdp { device: String, queues: u16 },
    /// Rings in a shared-memory file (`dataplane::port::shm`): a tester or another logical
    /// router at the far end. The `server` makes the file; a client maps it. `queues` 0 means
    /// one per worker (the server's count is the file's).
    Shm {
        path: PathBuf,
        server: bool,
        queues: u16,
        slots: u32,
        max_frame: u32,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct PortCfg {
    pub name: String,
    pub driver: Driver,
    /// It carries ATM cells (`media: atm`): its interfaces are PVCs.
    pub atm: Option<atm::AtmPortCfg>,
    pub origin: Origin,
}

#[derive(Clone, Debug, PartialEq)]
pub struct InterfaceCfg {
    pub name: String,
    /// Its port's name ("" for a bridge's routed interface).
    pub port: String,
    /// A bridge's routed interface (`bridge`, instead of `port`): the bridge's name. Frames to
    /// its MAC and the bridge's broadcasts are routed as received here; what is routed out of
    /// it is switched by the bridge.
    pub bvi: Option<String>,
    pub vlan: Option<u16>,
    /// 802.1ad S-tag of a Q-in-Q sub-interface (`s-vlan`): with `vlan`, the S-tag and C-tag
    /// pair; alone, every frame of the S-tag. Bridge members only.
    pub s_vlan: Option<u16>,
    pub mac: MacAddr,
    pub mtu: u16,
    pub vrf: String,
    pub up: bool,
    pub ipv4: Vec<(u32, u8)>,
    pub ipv6: Vec<(u128, u8)>,
    pub services: IfServices,
    /// The name of its TAP twin in the kernel (with `control-plane.taps`).
    pub host_name: String,
    /// The PVC it is, on an ATM port.
    pub atm: Option<atm::AtmVcCfg>,
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
    /// Labels pushed on packets the route sends (outermost first; `via` routes only).
    pub labels: Vec<u32>,
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

/// Reads and checks a config file. Relative paths inside it are relative to its folder.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let text = read(path)?;
    parse(&text, path)
}

/// Reads a config file's text. A file that is not UTF-8 is refused with the position of its
/// first undecodable byte and the field it falls in.
pub fn read(path: &Path) -> Result<String, ConfigErrors> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|err| {
        ConfigErrors(vec![ConfigError {
            file: file.clone(),
            line: 1,
            col: 1,
            field: "document".into(),
            message: format!("cannot read: {err}"),
        }])
    })?;
    decode(bytes, &file)
}

/// The text of `bytes`, or an error at the first byte that is not UTF-8.
pub fn decode(bytes: Vec<u8>, file: &str) -> Result<String, ConfigErrors> {
    let bad = match String::from_utf8(bytes) {
        Ok(s) => return Ok(s),
        Err(e) => e,
    };
    let at = bad.utf8_error().valid_up_to();
    let bytes = bad.as_bytes();
    let (line, col) = utf8_position(bytes, at);
    // Which field it is in: the file read with the bad bytes replaced, if it parses.
    let lossy = String::from_utf8_lossy(bytes);
    let field = yaml::parse(&lossy)
        .map(|root| yaml::field_at(&root, line, col))
        .ok()
        .filter(|f| !f.is_empty())
        .unwrap_or_else(|| "document".into());
    Err(ConfigErrors(vec![ConfigError {
        file: file.to_string(),
        line,
        col,
        field,
        message: format!(
            "byte 0x{:02X} is not UTF-8 text (a config must be UTF-8; was it saved as Latin-1?)",
            bytes[at]
        ),
    }]))
}

/// Line and column (1-based, the column in characters) of byte `at`, all of whose preceding bytes
/// are valid UTF-8.
fn utf8_position(bytes: &[u8], at: usize) -> (usize, usize) {
    let before = &bytes[..at];
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    let col = 1 + std::str::from_utf8(&before[line_start..])
        .map_or(at - line_start, |s| s.chars().count());
    (line, col)
}

/// A value as it may be echoed in an error: whole if short, else its first 40 characters and its
/// size, so a 50 MB scalar does not come back as 50 MB of error.
pub fn excerpt(s: &str) -> String {
    const KEEP: usize = 40;
    match s.char_indices().nth(KEEP) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…({} bytes)", &s[..i], s.len()),
    }
}

/// `message` with every value it quotes (between backticks) cut to an excerpt.
pub fn excerpt_quoted(message: &str) -> String {
    fields::shorten_quoted(message)
}

/// The YAML tree of `text` (read from `file`), or its syntax error as a config error.
pub(crate) fn parse_yaml(text: &str, file: &str) -> Result<yaml::Node, ConfigErrors> {
    yaml::parse(text).map_err(|s| {
        ConfigErrors(vec![ConfigError {
            file: file.to_string(),
            line: s.line,
            col: s.col,
            field: s.field.into(),
            message: if s.field == "syntax" {
                format!("YAML syntax: {}", s.message)
            } else {
                s.message
            },
        }])
    })
}

/// Checks config text as if read from `path`.
pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigErrors> {
    let file = path.display().to_string();
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let root = parse_yaml(text, &file)?;
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
        idle_sleep_us: 0,
        route_class_e: false,
        buffers: 16384,
        max_v4_routes: 4_000_000,
        max_v6_routes: 1_000_000,
        max_macs: bridges::DEFAULT_MACS,
        max_mcast_groups: snooping::DEFAULT_MCAST_GROUPS,
        max_mroutes: mcast_routing::DEFAULT_MROUTES,
        vrfs: vec!["default".into()],
        ports: Vec::new(),
        interfaces: Vec::new(),
        bridges: Vec::new(),
        neighbors: Vec::new(),
        routes: Vec::new(),
        route_files: Vec::new(),
        logging: Default::default(),
        snmp: None,
        services: Services {
            acl_log_interval_s: 10,
            ..Default::default()
        },
        control_plane: ControlPlane::default(),
        mcast_routing: None,
        max_gtp_contexts: ggsn::DEFAULT_CONTEXTS,
        ggsn: None,
        dlsw: None,
        events: None,
        mpls: None,
        l3vpn: None,
    };
    if matches!(root.value, Value::Null) {
        e.at(
            &root,
            "document",
            "the config is empty (an empty file is refused rather than run as a router with no \
             interfaces)",
        );
        return Err(ConfigErrors(e.list));
    }
    let Some(mut top) = Fields::new(String::new(), &root, &mut e) else {
        return Err(ConfigErrors(e.list));
    };

    router::parse_router(&mut top, &mut e, &mut cfg);
    router::parse_limits(&mut top, &mut e, &mut cfg);
    router::parse_vrfs(&mut top, &mut e, &mut cfg);
    interfaces::parse_ports(&mut top, &dir, &mut e, &mut cfg);
    interfaces::parse_interfaces(&mut top, &mut e, &mut cfg);
    bridges::parse_bridges(&mut top, &mut e, &mut cfg);
    routes::parse_neighbors(&mut top, &mut e, &mut cfg);
    routes::parse_routes(&mut top, &mut e, &mut cfg);
    routes::parse_route_files(&mut top, &dir, &mut e, &mut cfg);
    cfg.mcast_routing = mcast_routing::parse(&mut top, &mut e);
    cfg.ggsn = ggsn::parse(&mut top, &dir, &mut e);
    cfg.dlsw = dlsw::parse(&mut top, &mut e);
    cfg.events = events::parse(&mut top, &mut e);
    cfg.mpls = mpls::parse(&mut top, &mut e);
    cfg.l3vpn = l3vpn::parse(&mut top, &mut e);
    if let (Some(l3), Some(m)) = (&mut cfg.l3vpn, &mut cfg.mpls) {
        l3vpn::allocate_labels(l3, m);
    }
    if let Some(n) = top.get("control-plane") {
        cfg.control_plane = control_plane::parse(n, &cfg.vrfs, &mut e);
    }
    if cfg.dlsw.is_some() {
        dlsw::raise_punt_limits(&mut cfg.control_plane.punt);
    }
    logging::parse_logging(&mut top, &dir, &mut e, &mut cfg);
    snmp::parse(&mut top, &mut e, &mut cfg);
    cfg.services.acls = services::parse_acls(&mut top, &dir, &mut e);
    services::parse_qos(&mut top, &mut e, &mut cfg.services);
    cfg.services.flow_export = services::parse_flow_export(&mut top, &mut e);
    top.finish(&mut e);
    // References are checked only between fields that are themselves valid; otherwise one typo
    // would be reported again as every reference to it.
    if e.list.is_empty() {
        check::cross_check(&cfg, &mut e);
    }
    if e.list.is_empty() {
        Ok(cfg)
    } else {
        e.list.sort_by_key(|x| (x.line, x.col));
        Err(ConfigErrors(e.list))
    }
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

    /// Two interfaces in `vrf`, with these addresses.
    fn two_interfaces(a: &str, b: &str, vrf_b: &str) -> String {
        format!(
            "\
vrfs: [blue]
ports:
  - {{ name: p0, driver: mem }}
  - {{ name: p1, driver: mem }}
interfaces:
  - {{ name: p0, port: p0, mac: 02:00:00:00:00:01, {a} }}
  - {{ name: p1, port: p1, mac: 02:00:00:00:00:02, vrf: {vrf_b}, {b} }}
"
        )
    }

    fn accepted(text: &str) -> bool {
        parse(text, Path::new("lab.yaml")).is_ok()
    }

    #[test]
    fn overlapping_subnets_are_refused_only_within_a_vrf() {
        let t = two_interfaces("ipv4: [192.0.2.1/24]", "ipv4: [192.0.2.129/25]", "default");
        let e = errors(&t);
        assert_eq!(
            (e[0].line, e[0].field.as_str()),
            (7, "interfaces[1].ipv4[0]")
        );
        assert!(accepted(&two_interfaces(
            "ipv4: [192.0.2.1/24]",
            "ipv4: [192.0.2.129/25]",
            "blue"
        )));
        assert!(accepted(&two_interfaces(
            "ipv4: [192.0.2.1/25]",
            "ipv4: [192.0.2.129/25]",
            "default"
        )));
        // IPv6 too, but link-local subnets are per link.
        let t = two_interfaces(
            "ipv6: [\"2001:db8::1/64\"]",
            "ipv6: [\"2001:db8::2/64\"]",
            "default",
        );
        assert_eq!(errors(&t)[0].field, "interfaces[1].ipv6[0]");
        assert!(accepted(&two_interfaces(
            "ipv6: [\"fe80::1/64\"]",
            "ipv6: [\"fe80::2/64\"]",
            "default"
        )));
        let t = two_interfaces(
            "ipv6: [\"fe80::1/64\", \"fe80::2/64\"]",
            "ipv6: [\"fe80::3/64\"]",
            "default",
        );
        assert_eq!(errors(&t)[0].field, "interfaces[0].ipv6[1]");
    }

    #[test]
    fn network_and_broadcast_addresses_are_hosts_only_on_31_and_32() {
        let one =
            |a: &str| two_interfaces(&format!("ipv4: [{a}]"), "ipv4: [203.0.113.1/24]", "default");
        assert!(errors(&one("192.0.2.0/24"))[0]
            .message
            .contains("network address of 192.0.2.0/24"));
        assert!(errors(&one("192.0.2.127/25"))[0]
            .message
            .contains("broadcast address of 192.0.2.0/25"));
        assert!(accepted(&one("192.0.2.0/31")));
        assert!(accepted(&one("192.0.2.1/31")));
        assert!(accepted(&one("192.0.2.0/32")));
        assert!(accepted(&one("192.0.2.2/30")));
    }

    #[test]
    fn a_prefix_is_configured_once_per_vrf() {
        let twice = |second: &str| {
            GOOD.replace(
                "  - { prefix: 10.0.0.0/8, via: 192.0.2.2 }\n",
                &format!("  - {{ prefix: 10.0.0.0/8, via: 192.0.2.2 }}\n  - {second}\n"),
            )
        };
        // Identical duplicates are refused too: a later edit of one would make them differ.
        let e = errors(&twice("{ prefix: 10.0.0.0/8, via: 192.0.2.2 }"));
        assert_eq!((e[0].line, e[0].field.as_str()), (12, "routes[1]"));
        assert!(e[0].message.contains("with the same target"), "{e:?}");
        let e = errors(&twice("{ prefix: 10.0.0.0/8, reject: true }"));
        assert!(e[0].message.contains("via 192.0.2.2; here reject"), "{e:?}");
        assert!(accepted(&twice("{ prefix: 10.0.0.0/9, via: 192.0.2.2 }")));
        let other_vrf = twice("{ prefix: 10.0.0.0/8, vrf: blue, blackhole: true }")
            .replace("ports:", "vrfs: [blue]\nports:");
        assert!(accepted(&other_vrf), "{:?}", errors(&other_vrf));
    }

    #[test]
    fn buffers_are_bounded_by_the_machines_memory() {
        let gib = 1u64 << 30;
        assert!(check_buffers(16384, Some(gib)).is_ok());
        assert!(check_buffers(16384, None).is_ok());
        let e = check_buffers(1_000_000, Some(8 * gib)).unwrap_err();
        assert!(
            e.contains("1000000 buffers of 9408 bytes need 8.8 GiB"),
            "{e}"
        );
        assert!(e.contains("at most 684784 buffers"), "{e}");
        assert!(check_buffers(684_784, Some(8 * gib)).is_ok());
        assert!(check_buffers(684_785, Some(8 * gib)).is_err());
        assert!(check_buffers(usize::MAX, None).is_err());
    }

    #[test]
    fn long_values_are_echoed_as_excerpts() {
        assert_eq!(excerpt("short"), "short");
        let long = "é".repeat(100);
        assert_eq!(excerpt(&long), format!("{}…(200 bytes)", "é".repeat(40)));
        let m = fields::shorten_quoted(&format!("`{long}` is not a port; `ok`"));
        assert_eq!(
            m,
            format!("`{}…(200 bytes)` is not a port; `ok`", "é".repeat(40))
        );
    }

    #[test]
    fn undecodable_bytes_are_placed_by_line_and_character() {
        assert_eq!(utf8_position(b"ab\ncd\xE9", 5), (2, 3));
        assert_eq!(utf8_position(b"\xC3\xA9\xE9", 2), (1, 2));
        let e = decode(
            b"ports:\n  - { name: p\xE91, driver: mem }\n".to_vec(),
            "x.yaml",
        )
        .unwrap_err()
        .0;
        assert_eq!(
            (e[0].line, e[0].col, e[0].field.as_str()),
            (2, 14, "ports[0].name")
        );
    }

    #[test]
    fn errors_are_printed_up_to_a_cap_with_their_count() {
        let one = ConfigError {
            file: "f".into(),
            line: 1,
            col: 2,
            field: "x".into(),
            message: "m".into(),
        };
        assert_eq!(
            ConfigErrors(vec![one.clone()]).to_string(),
            "f:1:2: x: m\n1 error; nothing was applied"
        );
        let s = ConfigErrors(vec![one; 25]).to_string();
        assert_eq!(s.lines().count(), MAX_PRINTED + 2);
        assert!(
            s.ends_with("... and 5 more\n25 errors; nothing was applied"),
            "{s}"
        );
    }

    #[test]
    fn a_file_that_is_not_a_mapping_names_the_document() {
        let e = errors("just words\n");
        assert_eq!(
            (e[0].line, e[0].col, e[0].field.as_str()),
            (1, 1, "document")
        );
    }

    #[test]
    fn a_trailing_document_marker_is_a_second_document() {
        let e = errors(&format!("{GOOD}---\n"));
        assert_eq!((e[0].line, e[0].field.as_str()), (12, "document"));
        // A leading `---` (and an end marker) around one document is fine.
        assert!(accepted(&format!("---\n{GOOD}...\n")));
    }

    #[test]
    fn yaml_syntax_errors_have_a_position() {
        let e = errors("ports:\n  - { name: p0, driver: mem\n");
        assert_eq!(e.len(), 1);
        assert!(e[0].line >= 2, "{e:?}");
        assert!(e[0].message.starts_with("YAML syntax"));
    }
}
