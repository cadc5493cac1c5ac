//! `ggsn`: the router as a GGSN (3GPP TS 29.060): its Gn address, where GTP-C (UDP 2123) and
//! GTP-U (UDP 2152) arrive, and its APNs.
//!
//! ```yaml
//! limits: { gtp-contexts: 1048576 }    # PDP contexts held (default 65,536), fixed at start
//! ggsn:
//!   address: 192.0.2.1       # an IPv4 address of one of the router's interfaces (its VRF is Gn)
//!   create-rate: 50000       # Create PDP Context Requests per second; beyond: "no resources"
//!   echo-interval: 60        # seconds between Echo Requests to each SGSN; 0: none
//!   restart-counter: /var/lib/linerate/gtp-restart   # the Recovery counter, kept across starts
//!   apns:
//!     - name: internet       # as the MS asks for it (labels of letters, digits and hyphens)
//!       vrf: gi              # the Gi side (default: default)
//!       ipv4-pool: 10.64.0.0/16          # dynamic IPv4 addresses (at most 2^24)
//!       ipv6-pool: "2001:db8:100::/48"   # a /64 per context (at most 2^24 of them)
//!       dns: [192.0.2.53, "2001:db8::53"] # given to the MS in the PCO
//! ```
//!
//! GTP-C is served in the kernel on the TAP twins (`control-plane.taps`); without them the
//! user plane still runs (contexts made by a program embedding the router, as the tester does)
//! and the daemon says GTP-C has no way in.
//!
//! Besides each value's own syntax, `check` refuses an address that is no interface's, two
//! APNs of one name, an APN without any pool, pools that overlap (in one VRF) or overlap an
//! interface's subnet, a VRF that does not exist.

use std::net::IpAddr;

use super::fields::{origin_at, seq, Errs, Fields};
use super::{Origin, Prefix};
use crate::yaml::Value;

/// The context table's default size.
pub const DEFAULT_CONTEXTS: usize = 65_536;
/// The most addresses (IPv4) or /64s (IPv6) one pool may hold: the data plane maps each to
/// its context directly.
pub const MAX_POOL: u64 = 1 << 24;

#[derive(Clone, Debug, PartialEq)]
pub struct GgsnCfg {
    pub address: std::net::Ipv4Addr,
    /// Where `address` was written (its errors point there).
    pub address_at: Origin,
    pub create_rate: u32,
    pub echo_interval_s: u32,
    pub restart_counter: Option<std::path::PathBuf>,
    pub apns: Vec<ApnCfg>,
    pub origin: Origin,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ApnCfg {
    pub name: String,
    pub vrf: String,
    /// (network, length)
    pub v4_pool: Option<(u32, u8)>,
    pub v6_pool: Option<(u128, u8)>,
    pub dns: Vec<IpAddr>,
    pub origin: Origin,
}

impl GgsnCfg {
    /// The settings alone, without where they were written (to compare two configs).
    pub fn without_origins(&self) -> GgsnCfg {
        GgsnCfg {
            origin: Origin::default(),
            address_at: Origin::default(),
            apns: self
                .apns
                .iter()
                .map(|a| ApnCfg {
                    origin: Origin::default(),
                    ..a.clone()
                })
                .collect(),
            ..self.clone()
        }
    }
}

impl ApnCfg {
    /// The interface decapsulated packets of this APN arrive on.
    pub fn interface(&self) -> String {
        format!("apn-{}", self.name)
    }

    /// The pools as the data plane sizes them: (first address, count), (first /64, count).
    pub fn pools(&self) -> dataplane::gtp::ApnPools {
        dataplane::gtp::ApnPools {
            v4: self
                .v4_pool
                .map(|(a, l)| (a, (1u64 << (32 - l)).min(MAX_POOL) as u32)),
            v6: self.v6_pool.map(|(a, l)| {
                (
                    (a >> 64) as u64,
                    (1u64 << (64 - l.min(64))).min(MAX_POOL) as u32,
                )
            }),
        }
    }
}

fn valid_apn(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

pub(super) fn parse(top: &mut Fields<'_>, dir: &std::path::Path, e: &mut Errs) -> Option<GgsnCfg> {
    let n = top.get("ggsn")?;
    let mut f = Fields::new("ggsn".into(), n, e)?;
    let origin = f.origin();
    let address = f.parse::<std::net::Ipv4Addr>("address", "an IPv4 address", e);
    let address_at = f
        .node("address")
        .map_or_else(|| f.origin(), |a| origin_at(a, "ggsn.address"));
    if f.node("address").is_none() {
        e.at(
            n,
            "ggsn.address",
            "`address` is required (the GGSN's Gn address)",
        );
    }
    let create_rate = f
        .parse::<u32>("create-rate", "a rate (requests per second)", e)
        .unwrap_or(50_000);
    if create_rate == 0 {
        let at = f.node("create-rate").unwrap_or(n);
        e.at(at, "ggsn.create-rate", "0 would refuse every context");
    }
    let echo_interval_s = f
        .parse::<u32>("echo-interval", "a time in seconds", e)
        .unwrap_or(60);
    if echo_interval_s != 0 && echo_interval_s < 60 {
        // TS 29.060 7.2.1: Echo Requests no more often than every 60 s per path.
        let at = f.node("echo-interval").unwrap_or(n);
        e.at(
            at,
            "ggsn.echo-interval",
            format!("{echo_interval_s}: at least 60 s (TS 29.060 7.2.1), or 0 for none"),
        );
    }
    let restart_counter = f.str("restart-counter", e).map(|p| dir.join(p));
    let mut apns: Vec<ApnCfg> = Vec::new();
    for (an, apath) in seq(&mut f, "apns", e) {
        let Some(mut a) = Fields::new(apath.clone(), an, e) else {
            continue;
        };
        let origin = a.origin();
        let name = a.required("name", e).unwrap_or_default();
        if !name.is_empty() && !valid_apn(&name) {
            let at = a.node("name").unwrap_or(an);
            e.at(
                at,
                &a.field("name"),
                format!("`{name}`: an APN is dot-separated labels of letters, digits and hyphens"),
            );
        }
        if apns.iter().any(|x| x.name.eq_ignore_ascii_case(&name)) {
            let at = a.node("name").unwrap_or(an);
            e.at(
                at,
                &a.field("name"),
                format!("APN `{name}` is defined twice"),
            );
        }
        let vrf = a.str("vrf", e).unwrap_or_else(|| "default".into());
        let pool = |a: &mut Fields<'_>, key: &'static str, v6: bool, e: &mut Errs| {
            let s = a.str(key, e)?;
            let at = a.node(key).unwrap_or(an);
            match Prefix::parse(&s) {
                Ok(Prefix::V4(p, l)) if !v6 => {
                    if 32 - u64::from(l) > 24 {
                        e.at(
                            at,
                            &a.field(key),
                            format!("`{s}`: a pool holds at most 2^24 addresses (/8)"),
                        );
                    }
                    Some(Prefix::V4(p, l))
                }
                Ok(Prefix::V6(p, l)) if v6 => {
                    if l > 64 {
                        e.at(
                            at,
                            &a.field(key),
                            format!(
                                "`{s}`: each context gets a /64, so the pool is /64 or shorter"
                            ),
                        );
                    } else if 64 - u64::from(l) > 24 {
                        e.at(
                            at,
                            &a.field(key),
                            format!("`{s}`: a pool holds at most 2^24 /64s (/40)"),
                        );
                    }
                    Some(Prefix::V6(p, l))
                }
                Ok(_) => {
                    e.at(
                        at,
                        &a.field(key),
                        format!("`{s}` is not an IPv{} prefix", if v6 { 6 } else { 4 }),
                    );
                    None
                }
                Err(m) => {
                    e.at(at, &a.field(key), m);
                    None
                }
            }
        };
        let v4_pool = match pool(&mut a, "ipv4-pool", false, e) {
            Some(Prefix::V4(p, l)) => Some((p, l)),
            _ => None,
        };
        let v6_pool = match pool(&mut a, "ipv6-pool", true, e) {
            Some(Prefix::V6(p, l)) => Some((p, l)),
            _ => None,
        };
        if a.node("ipv4-pool").is_none() && a.node("ipv6-pool").is_none() {
            e.at(an, &apath, "an APN needs `ipv4-pool`, `ipv6-pool` or both");
        }
        let mut dns = Vec::new();
        for (s, dn, path) in a.list("dns", e) {
            match s.parse::<IpAddr>() {
                Ok(ip) => dns.push(ip),
                Err(_) => e.at(dn, &path, format!("`{s}` is not an IP address")),
            }
        }
        a.finish(e);
        apns.push(ApnCfg {
            name,
            vrf,
            v4_pool,
            v6_pool,
            dns,
            origin,
        });
    }
    if apns.is_empty() && !matches!(n.value, Value::Null) {
        e.at(n, "ggsn.apns", "a GGSN needs at least one APN");
    }
    if apns.len() > usize::from(u16::MAX) {
        e.at(n, "ggsn.apns", "at most 65,535 APNs");
    }
    f.finish(e);
    Some(GgsnCfg {
        address: address?,
        address_at,
        create_rate,
        echo_interval_s,
        restart_counter,
        apns,
        origin,
    })
}

/// The checks against the rest of the config: the address is an interface's, VRFs exist,
/// pools overlap neither each other nor a connected subnet of their VRF.
pub(super) fn cross_check(cfg: &super::Config, e: &mut Errs) {
    let Some(g) = &cfg.ggsn else {
        return;
    };
    let a = u32::from(g.address);
    if !cfg
        .interfaces
        .iter()
        .any(|i| i.ipv4.iter().any(|&(x, _)| x == a))
    {
        e.origin(
            &g.address_at,
            format!("{}: no interface has this address", g.address),
        );
    }
    for (i, apn) in g.apns.iter().enumerate() {
        if !cfg.vrfs.contains(&apn.vrf) {
            e.origin(
                &apn.origin,
                format!("APN `{}`: no VRF named `{}`", apn.name, apn.vrf),
            );
            continue;
        }
        let mut mine: Vec<Prefix> = Vec::new();
        mine.extend(apn.v4_pool.map(|(p, l)| Prefix::V4(p, l)));
        mine.extend(apn.v6_pool.map(|(p, l)| Prefix::V6(p, l)));
        for p in &mine {
            for other in g.apns[..i].iter().filter(|o| o.vrf == apn.vrf) {
                let theirs = other
                    .v4_pool
                    .map(|(p, l)| Prefix::V4(p, l))
                    .into_iter()
                    .chain(other.v6_pool.map(|(p, l)| Prefix::V6(p, l)));
                for q in theirs {
                    if overlap(*p, q) {
                        e.origin(
                            &apn.origin,
                            format!(
                                "APN `{}`: pool {p} overlaps APN `{}`'s {q}",
                                apn.name, other.name
                            ),
                        );
                    }
                }
            }
            for ifc in cfg.interfaces.iter().filter(|i| i.vrf == apn.vrf) {
                let subnets = ifc
                    .ipv4
                    .iter()
                    .map(|&(a, l)| Prefix::V4(a & mask4(l), l))
                    .chain(ifc.ipv6.iter().map(|&(a, l)| Prefix::V6(a & mask6(l), l)));
                for q in subnets {
                    if overlap(*p, q) {
                        e.origin(
                            &apn.origin,
                            format!(
                                "APN `{}`: pool {p} overlaps interface `{}`'s subnet {q}",
                                apn.name, ifc.name
                            ),
                        );
                    }
                }
            }
        }
        if cfg.interfaces.iter().any(|i| i.name == apn.interface()) {
            e.origin(
                &apn.origin,
                format!(
                    "APN `{}`: its interface `{}` would clash with an interface of that name",
                    apn.name,
                    apn.interface()
                ),
            );
        }
    }
}

fn mask4(l: u8) -> u32 {
    if l == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(l))
    }
}

fn mask6(l: u8) -> u128 {
    if l == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(l))
    }
}

fn overlap(a: Prefix, b: Prefix) -> bool {
    match (a, b) {
        (Prefix::V4(x, lx), Prefix::V4(y, ly)) => {
            let l = lx.min(ly);
            x & mask4(l) == y & mask4(l)
        }
        (Prefix::V6(x, lx), Prefix::V6(y, ly)) => {
            let l = lx.min(ly);
            x & mask6(l) == y & mask6(l)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::parse;

    const BASE: &str = "\
control-plane: { taps: true }
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: 02:00:00:00:00:01, ipv4: [10.0.0.1/24] }
  - { name: p1, port: p1, mac: 02:00:00:00:00:02, ipv4: [10.1.0.1/24], ipv6: ['2001:db8:1::1/64'] }
";

    fn errors(extra: &str) -> Vec<String> {
        match parse(&format!("{BASE}{extra}"), Path::new("g.yaml")) {
            Ok(_) => Vec::new(),
            Err(e) => e.0.iter().map(|x| x.to_string()).collect(),
        }
    }

    #[test]
    fn a_ggsn_is_read_with_its_apns() {
        let c = parse(
            &format!("{BASE}ggsn:\n  address: 10.0.0.1\n  apns:\n    - {{ name: Internet.Example, ipv4-pool: 10.64.0.0/16, ipv6-pool: '2001:db8:100::/48', dns: [10.1.0.53] }}\n"),
            Path::new("g.yaml"),
        )
        .unwrap();
        let g = c.ggsn.unwrap();
        assert_eq!((g.create_rate, g.echo_interval_s), (50_000, 60));
        let a = &g.apns[0];
        assert_eq!(a.interface(), "apn-Internet.Example");
        let p = a.pools();
        assert_eq!(p.v4, Some((0x0a40_0000, 65536)));
        assert_eq!(p.v6, Some((0x2001_0db8_0100_0000, 65536)));
    }

    #[test]
    fn mistakes_are_named_where_they_are() {
        let e = errors(
            "ggsn:\n  address: 10.9.9.9\n  apns:\n    - { name: a, ipv4-pool: 10.64.0.0/16 }\n",
        );
        assert_eq!(
            e,
            ["g.yaml:9:12: ggsn.address: 10.9.9.9: no interface has this address"],
            "{e:?}"
        );
        let e = errors("ggsn:\n  address: 10.0.0.1\n  echo-interval: 5\n  apns:\n    - { name: 'bad name', ipv4-pool: 10.0.0.0/7 }\n    - { name: b }\n");
        assert_eq!(e.len(), 4, "{e:?}");
        assert!(
            e[0].starts_with("g.yaml:10:18: ggsn.echo-interval: 5: at least 60 s"),
            "{e:?}"
        );
        assert!(
            e[1].contains("g.yaml:12:15: ggsn.apns[0].name: `bad name`"),
            "{e:?}"
        );
        assert!(
            e[2].contains("ggsn.apns[0].ipv4-pool: `10.0.0.0/7`: a pool holds at most 2^24"),
            "{e:?}"
        );
        assert!(
            e[3].contains("g.yaml:13:7: ggsn.apns[1]: an APN needs"),
            "{e:?}"
        );
        // A pool on a connected subnet, and two APNs' pools overlapping.
        let e = errors("ggsn:\n  address: 10.0.0.1\n  apns:\n    - { name: a, ipv4-pool: 10.1.0.0/25 }\n    - { name: b, ipv6-pool: '2001:db8:1::/48' }\n");
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(
            e[0].contains("pool 10.1.0.0/25 overlaps interface `p1`'s subnet 10.1.0.0/24"),
            "{e:?}"
        );
        assert!(
            e[1].contains("pool 2001:db8:1::/48 overlaps interface `p1`'s subnet"),
            "{e:?}"
        );
        // Without TAP twins the data plane works; GTP-C has no way in (the daemon says so).
        let text = format!(
            "{BASE}ggsn:\n  address: 10.0.0.1\n  apns: [{{ name: a, ipv4-pool: 10.64.0.0/16 }}]\n"
        )
        .replace("taps: true", "taps: false");
        assert!(parse(&text, Path::new("g.yaml")).is_ok());
    }
}
