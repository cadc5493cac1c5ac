//! The services sections of the config: access lists, QoS classes and policies, flow export, and
//! what each interface binds.
//!
//! ```yaml
//! acls:
//!   - name: IPV4_Test
//!     family: ipv4                 # ipv4 (default), ipv6, or any (L2 entries, both families)
//!     entries:                     # first match wins; an implicit deny ends every list
//!       - "10 deny udp src host 140.0.0.1 sport 1024 dst 141.100.0.1 dport 5000 log"
//!       - "20 permit"
//!     file: big.acl                # or/and: one entry per line (# comments), for long lists
//! qos:
//!   classes:
//!     - { name: voice, match: ["udp dport 5060-5061", "dscp 46"] }   # any line matches
//!   policies:
//!     - name: edge-in
//!       classes:                   # in order; `class-default` takes what is left
//!         - class: voice
//!           set: { dscp: 46, cos: 5 }
//!           police: { cir: 10m, cbs: 64k, pir: 20m, pbs: 128k, conform: transmit,
//!                     exceed: set-dscp 10, violate: drop, color-aware: false }
//!         - { class: class-default, set: { dscp: 0 } }
//! flow-export:
//!   version: ipfix                 # or 9
//!   collectors: ["192.0.2.10:2055"]
//!   cache-size: 2000000            # flows, split between workers
//!   active-timeout: 60             # seconds
//!   inactive-timeout: 15
//!   template-refresh: 30
//!   sampling: 1                    # 1-in-N packets
//! interfaces:
//!   - { name: p0, ..., acl-in: [IPV4_Test, IPV6_Test], acl-out: IPV4_Test, qos-in: edge-in,
//!       urpf: strict, flow: [in, out] }
//! ```
//!
//! Entry lines follow the grammar in [`super::entry`].

use std::net::SocketAddr;
use std::path::Path;

use classify::Rule;

use super::entry::{self, Family};
use super::fields::{seq, Errs, Fields};
use super::Origin;
use crate::yaml::Node;

#[derive(Clone, Debug, PartialEq)]
pub struct AclCfg {
    pub name: String,
    pub family: Family,
    pub entries: Vec<AclEntryCfg>,
    pub origin: Origin,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AclEntryCfg {
    /// Given, or 10 more than the entry before (as IOS numbers them).
    pub seq: u32,
    pub permit: bool,
    pub log: bool,
    pub rule: Rule,
    /// The line as written, for `show acl` and log records.
    pub text: String,
    pub proto: Option<u8>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct QosClassCfg {
    pub name: String,
    pub matches: Vec<Rule>,
    pub origin: Origin,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoliceAction {
    Transmit,
    SetDscp(u8),
    SetCos(u8),
    Drop,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PoliceCfg {
    /// Bits per second.
    pub cir: u64,
    /// Bytes.
    pub cbs: u32,
    /// Two-rate (RFC 2698) when set; single-rate (RFC 2697) with `ebs` otherwise.
    pub pir: Option<u64>,
    /// PBS (two-rate) or EBS (single-rate), bytes.
    pub pbs: u32,
    pub color_aware: bool,
    pub conform: PoliceAction,
    pub exceed: PoliceAction,
    pub violate: PoliceAction,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PolicyClassCfg {
    /// A class name, or `class-default`.
    pub class: String,
    pub set_dscp: Option<u8>,
    pub set_cos: Option<u8>,
    /// The MPLS traffic class (EXP) of the labels the class's packets get.
    pub set_exp: Option<u8>,
    pub police: Option<PoliceCfg>,
    pub origin: Origin,
}

#[derive(Clone, Debug, PartialEq)]
pub struct QosPolicyCfg {
    pub name: String,
    pub classes: Vec<PolicyClassCfg>,
    pub origin: Origin,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowVersion {
    V9,
    Ipfix,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FlowExportCfg {
    pub version: FlowVersion,
    pub collectors: Vec<SocketAddr>,
    pub cache_size: usize,
    pub active_timeout_s: u32,
    pub inactive_timeout_s: u32,
    pub template_refresh_s: u32,
    pub sampling: u32,
    pub domain_id: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Urpf {
    /// RFC 3704 strict: the route back to the source leaves through the arrival interface.
    Strict,
    /// RFC 3704 loose: some route to the source exists (not a null route).
    Loose,
}

/// What an interface binds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IfServices {
    pub acl_in: Vec<String>,
    pub acl_out: Vec<String>,
    pub qos_in: Option<String>,
    pub qos_out: Option<String>,
    pub urpf: Option<Urpf>,
    pub flow_in: bool,
    pub flow_out: bool,
}

impl IfServices {
    pub fn any(&self) -> bool {
        *self != IfServices::default()
    }
}

/// The services sections of one config.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Services {
    pub acls: Vec<AclCfg>,
    pub classes: Vec<QosClassCfg>,
    pub policies: Vec<QosPolicyCfg>,
    pub flow_export: Option<FlowExportCfg>,
    /// Seconds between the periodic counts of a logged ACL flow (after its first packet).
    pub acl_log_interval_s: u32,
}

/// An entry's error, placed at the offending token: the scalar starts at `n` (one column later
/// inside quotes).
pub(super) fn entry_err(
    e: &mut Errs,
    n: &Node,
    field: &str,
    line_text: &str,
    x: entry::EntryError,
) {
    let quoted = e
        .text
        .lines()
        .nth(n.line.saturating_sub(1))
        .and_then(|l| l.chars().nth(n.col.saturating_sub(1)))
        .is_some_and(|c| c == '"' || c == '\'');
    let mut at = n.clone();
    at.col += x.col + usize::from(quoted);
    e.at(&at, field, format!("`{line_text}`: {}", x.message));
}

pub(super) fn parse_acls(top: &mut Fields, dir: &Path, e: &mut Errs) -> Vec<AclCfg> {
    let mut out: Vec<AclCfg> = Vec::new();
    for (n, path) in seq(top, "acls", e) {
        let Some(mut f) = Fields::new(path.clone(), n, e) else {
            continue;
        };
        let origin = f.origin();
        let name = f.required("name", e);
        let family = match f.str("family", e) {
            None => Family::Ipv4,
            Some(s) => Family::parse(&s).unwrap_or_else(|| {
                e.at(
                    n,
                    &format!("{path}.family"),
                    format!("`{s}`: ipv4, ipv6 or any"),
                );
                Family::Ipv4
            }),
        };
        let mut entries: Vec<AclEntryCfg> = Vec::new();
        let mut push = |line: &str, at: &Node, field: &str, e: &mut Errs| match entry::parse(
            line, family, true,
        ) {
            Ok(x) => {
                let seq = x
                    .seq
                    .unwrap_or_else(|| entries.last().map_or(10, |p| p.seq + 10));
                if entries.last().is_some_and(|p| p.seq >= seq) {
                    e.at(
                        at,
                        field,
                        format!("sequence {seq} is not above the entry before"),
                    );
                }
                entries.push(AclEntryCfg {
                    seq,
                    permit: x.permit.unwrap_or(false),
                    log: x.log,
                    rule: x.rule,
                    text: entry::text_without_seq(line),
                    proto: x.proto,
                });
            }
            Err(x) => entry_err(e, at, field, line, x),
        };
        for (s, node, field) in f.list("entries", e) {
            push(&s, node, &field, e);
        }
        if let Some(file) = f.str("file", e) {
            let full = dir.join(&file);
            match std::fs::read_to_string(&full) {
                Ok(text) => {
                    for (i, line) in text.lines().enumerate() {
                        let l = line.split('#').next().unwrap_or("").trim();
                        if l.is_empty() {
                            continue;
                        }
                        // Errors in an entry file name that file and line.
                        let before = e.list.len();
                        push(l, n, &format!("{path}.file"), e);
                        for x in &mut e.list[before..] {
                            x.file = full.display().to_string();
                            x.line = i + 1;
                            x.col = line.find(l).unwrap_or(0) + 1;
                        }
                    }
                }
                Err(err) => e.at(
                    n,
                    &format!("{path}.file"),
                    format!("cannot read `{}`: {err}", full.display()),
                ),
            }
        }
        f.finish(e);
        if let Some(name) = name {
            if out.iter().any(|a| a.name == name) {
                e.at(
                    n,
                    &format!("{path}.name"),
                    format!("ACL `{name}` defined twice"),
                );
            }
            out.push(AclCfg {
                name,
                family,
                entries,
                origin,
            });
        }
    }
    out
}

pub(super) fn parse_qos(top: &mut Fields, e: &mut Errs, s: &mut Services) {
    let Some(n) = top.get("qos") else {
        return;
    };
    let Some(mut q) = Fields::new("qos".into(), n, e) else {
        return;
    };
    for (n, path) in seq(&mut q, "classes", e) {
        let Some(mut f) = Fields::new(path.clone(), n, e) else {
            continue;
        };
        let origin = f.origin();
        let name = f.required("name", e);
        let mut matches = Vec::new();
        for (line, node, field) in f.list("match", e) {
            match entry::parse(&line, Family::Any, false) {
                Ok(x) => matches.push(x.rule),
                Err(x) => entry_err(e, node, &field, &line, x),
            }
        }
        f.finish(e);
        if let Some(name) = name {
            if name == "class-default" || s.classes.iter().any(|c| c.name == name) {
                e.at(
                    n,
                    &format!("{path}.name"),
                    format!("class `{name}` defined twice"),
                );
            }
            s.classes.push(QosClassCfg {
                name,
                matches,
                origin,
            });
        }
    }
    for (n, path) in seq(&mut q, "policies", e) {
        let Some(mut f) = Fields::new(path.clone(), n, e) else {
            continue;
        };
        let origin = f.origin();
        let name = f.required("name", e);
        let mut classes = Vec::new();
        for (cn, cpath) in seq(&mut f, "classes", e) {
            if let Some(c) = policy_class(cn, &cpath, e) {
                classes.push(c);
            }
        }
        f.finish(e);
        if let Some(name) = name {
            if s.policies.iter().any(|p| p.name == name) {
                e.at(
                    n,
                    &format!("{path}.name"),
                    format!("policy `{name}` defined twice"),
                );
            }
            s.policies.push(QosPolicyCfg {
                name,
                classes,
                origin,
            });
        }
    }
    q.finish(e);
}

fn policy_class(n: &Node, path: &str, e: &mut Errs) -> Option<PolicyClassCfg> {
    let mut f = Fields::new(path.to_string(), n, e)?;
    let origin = f.origin();
    let class = f.required("class", e);
    let mut c = PolicyClassCfg {
        class: class.clone().unwrap_or_default(),
        set_dscp: None,
        set_cos: None,
        set_exp: None,
        police: None,
        origin,
    };
    if let Some(sn) = f.get("set") {
        if let Some(mut sf) = Fields::new(format!("{path}.set"), sn, e) {
            c.set_dscp = sf.parse::<u8>("dscp", "a DSCP (0..63)", e);
            if c.set_dscp.is_some_and(|d| d > 63) {
                e.at(sn, &format!("{path}.set.dscp"), "DSCP is 0..=63");
            }
            c.set_cos = sf.parse::<u8>("cos", "an 802.1p priority (0..7)", e);
            if c.set_cos.is_some_and(|d| d > 7) {
                e.at(sn, &format!("{path}.set.cos"), "CoS is 0..=7");
            }
            c.set_exp = sf.parse::<u8>("exp", "an MPLS traffic class (0..7)", e);
            if c.set_exp.is_some_and(|d| d > 7) {
                e.at(sn, &format!("{path}.set.exp"), "EXP is 0..=7");
            }
            sf.finish(e);
        }
    }
    if let Some(pn) = f.get("police") {
        c.police = police(pn, &format!("{path}.police"), e);
    }
    f.finish(e);
    class.map(|_| c)
}

/// `10m`, `1.5g`, `64000`: bits per second (or bytes, for burst sizes), SI multipliers.
pub fn parse_quantity(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 1e3),
        (i, 'm' | 'M') => (&s[..i], 1e6),
        (i, 'g' | 'G') => (&s[..i], 1e9),
        _ => (s, 1.0),
    };
    let v: f64 = num.parse().ok()?;
    (v >= 0.0 && v.is_finite()).then(|| (v * mult).round() as u64)
}

fn police(n: &Node, path: &str, e: &mut Errs) -> Option<PoliceCfg> {
    let mut f = Fields::new(path.to_string(), n, e)?;
    let q = |f: &mut Fields, key, what: &str, e: &mut Errs| -> Option<u64> {
        let s = f.str(key, e)?;
        let v = parse_quantity(&s);
        if v.is_none() {
            e.at(
                n,
                &format!("{path}.{key}"),
                format!("`{s}` is not {what} (e.g. 10m, 64k)"),
            );
        }
        v
    };
    let cir = q(&mut f, "cir", "a rate", e);
    if cir.is_none() && !f.map.iter().any(|(k, _)| k == "cir") {
        e.at(n, &format!("{path}.cir"), "`cir` is required");
    }
    let cbs = q(&mut f, "cbs", "a size in bytes", e);
    let pir = q(&mut f, "pir", "a rate", e);
    let pbs = q(&mut f, "pbs", "a size in bytes", e);
    let ebs = q(&mut f, "ebs", "a size in bytes", e);
    let color_aware = f
        .parse::<bool>("color-aware", "true or false", e)
        .unwrap_or(false);
    let act = |f: &mut Fields, key, default, e: &mut Errs| match f.str(key, e) {
        None => default,
        Some(s) => action(&s).unwrap_or_else(|| {
            e.at(
                n,
                &format!("{path}.{key}"),
                format!("`{s}`: transmit, drop, set-dscp N or set-cos N"),
            );
            default
        }),
    };
    let conform = act(&mut f, "conform", PoliceAction::Transmit, e);
    let exceed = act(&mut f, "exceed", PoliceAction::Drop, e);
    let violate = act(&mut f, "violate", exceed, e);
    f.finish(e);
    let cir = cir?;
    if cir == 0 {
        e.at(n, &format!("{path}.cir"), "CIR must be above 0");
    }
    if pir.is_some_and(|p| p < cir) {
        e.at(n, &format!("{path}.pir"), "PIR must be at least CIR");
    }
    if pir.is_some() && ebs.is_some() {
        e.at(
            n,
            path,
            "`ebs` is for single-rate policers; a two-rate one takes `pbs`",
        );
    }
    if pir.is_none() && pbs.is_some() {
        e.at(
            n,
            path,
            "`pbs` needs `pir` (two-rate); a single-rate policer takes `ebs`",
        );
    }
    // Defaults as common routers pick them: 250 ms of the rate, at least a jumbo frame.
    let burst = |rate: u64| (rate / 8 / 4).max(10_000).min(u32::MAX as u64) as u32;
    let cbs = cbs.map_or(burst(cir), |v| v.min(u32::MAX as u64) as u32);
    let pbs = match pir {
        Some(p) => pbs.map_or(burst(p), |v| v.min(u32::MAX as u64) as u32),
        None => ebs.map_or(0, |v| v.min(u32::MAX as u64) as u32),
    };
    Some(PoliceCfg {
        cir,
        cbs,
        pir,
        pbs,
        color_aware,
        conform,
        exceed,
        violate,
    })
}

fn action(s: &str) -> Option<PoliceAction> {
    let mut w = s.split_whitespace();
    let a = match (w.next()?, w.next()) {
        ("transmit", None) => PoliceAction::Transmit,
        ("drop", None) => PoliceAction::Drop,
        ("set-dscp", Some(v)) => PoliceAction::SetDscp(v.parse().ok().filter(|&d: &u8| d <= 63)?),
        ("set-cos", Some(v)) => PoliceAction::SetCos(v.parse().ok().filter(|&d: &u8| d <= 7)?),
        _ => return None,
    };
    w.next().is_none().then_some(a)
}

pub(super) fn parse_flow_export(top: &mut Fields, e: &mut Errs) -> Option<FlowExportCfg> {
    let n = top.get("flow-export")?;
    let mut f = Fields::new("flow-export".into(), n, e)?;
    let mut c = FlowExportCfg {
        version: FlowVersion::Ipfix,
        collectors: Vec::new(),
        cache_size: 1 << 20,
        active_timeout_s: 60,
        inactive_timeout_s: 15,
        template_refresh_s: 30,
        sampling: 1,
        domain_id: 0,
    };
    match f.str("version", e).as_deref() {
        None | Some("ipfix") | Some("10") => {}
        Some("9") | Some("v9") | Some("netflow9") => c.version = FlowVersion::V9,
        Some(v) => e.at(n, "flow-export.version", format!("`{v}`: 9 or ipfix")),
    }
    for (s, node, field) in f.list("collectors", e) {
        match s.parse() {
            Ok(a) => c.collectors.push(a),
            Err(_) => e.at(node, &field, format!("`{s}` is not ADDRESS:PORT")),
        }
    }
    if let Some(v) = f.parse::<usize>("cache-size", "a flow count", e) {
        if !(1024..=64 << 20).contains(&v) {
            e.at(
                n,
                "flow-export.cache-size",
                "the cache holds 1,024 to 67,108,864 flows",
            );
        }
        c.cache_size = v;
    }
    let secs = |f: &mut Fields, key, into: &mut u32, e: &mut Errs| {
        if let Some(v) = f.parse::<u32>(key, "a number of seconds", e) {
            if v == 0 || v > 86_400 {
                e.at(n, &format!("flow-export.{key}"), "1 to 86,400 seconds");
            }
            *into = v;
        }
    };
    secs(&mut f, "active-timeout", &mut c.active_timeout_s, e);
    secs(&mut f, "inactive-timeout", &mut c.inactive_timeout_s, e);
    secs(&mut f, "template-refresh", &mut c.template_refresh_s, e);
    if let Some(v) = f.parse::<u32>("sampling", "1-in-N (a packet count)", e) {
        if v == 0 {
            e.at(
                n,
                "flow-export.sampling",
                "sampling is 1-in-N with N at least 1",
            );
        }
        c.sampling = v.max(1);
    }
    if let Some(v) = f.parse("domain-id", "a number", e) {
        c.domain_id = v;
    }
    f.finish(e);
    if c.collectors.is_empty() {
        e.at(n, "flow-export.collectors", "at least one collector");
    }
    Some(c)
}

/// Reads an interface's bindings (the keys are checked against the sections in `cross_check`).
pub(super) fn parse_if_services(f: &mut Fields, n: &Node, path: &str, e: &mut Errs) -> IfServices {
    let mut s = IfServices {
        acl_in: f.list("acl-in", e).into_iter().map(|x| x.0).collect(),
        acl_out: f.list("acl-out", e).into_iter().map(|x| x.0).collect(),
        qos_in: f.str("qos-in", e),
        qos_out: f.str("qos-out", e),
        ..Default::default()
    };
    match f.str("urpf", e).as_deref() {
        None | Some("off") => {}
        Some("strict") => s.urpf = Some(Urpf::Strict),
        Some("loose") => s.urpf = Some(Urpf::Loose),
        Some(v) => e.at(
            n,
            &format!("{path}.urpf"),
            format!("`{v}`: strict, loose or off"),
        ),
    }
    for (v, node, field) in f.list("flow", e) {
        match v.as_str() {
            "in" => s.flow_in = true,
            "out" => s.flow_out = true,
            "both" => (s.flow_in, s.flow_out) = (true, true),
            _ => e.at(node, &field, format!("`{v}`: in, out or both")),
        }
    }
    s
}

/// Checks the bindings name what exists, and at most one list per family per direction.
pub(super) fn cross_check(cfg: &super::Config, e: &mut Errs) {
    let s = &cfg.services;
    for p in &s.policies {
        for c in &p.classes {
            if c.class != "class-default" && !s.classes.iter().any(|k| k.name == c.class) {
                e.origin(
                    &c.origin,
                    format!("policy `{}`: no class named `{}`", p.name, c.class),
                );
            }
        }
    }
    for ifc in &cfg.interfaces {
        let b = &ifc.services;
        for (dir, lists) in [("acl-in", &b.acl_in), ("acl-out", &b.acl_out)] {
            let mut seen = Vec::new();
            for l in lists {
                match s.acls.iter().find(|a| &a.name == l) {
                    None => e.origin(
                        &ifc.origin,
                        format!("interface `{}`: {dir}: no ACL named `{l}`", ifc.name),
                    ),
                    Some(a) => {
                        if seen.contains(&a.family)
                            || (a.family == Family::Any && !seen.is_empty())
                            || seen.contains(&Family::Any)
                        {
                            e.origin(
                                &ifc.origin,
                                format!(
                                    "interface `{}`: {dir}: one list per family (ipv4, ipv6), or one `any` list",
                                    ifc.name
                                ),
                            );
                        }
                        seen.push(a.family);
                    }
                }
            }
        }
        for (dir, p) in [("qos-in", &b.qos_in), ("qos-out", &b.qos_out)] {
            if let Some(p) = p {
                if !s.policies.iter().any(|x| &x.name == p) {
                    e.origin(
                        &ifc.origin,
                        format!("interface `{}`: {dir}: no QoS policy named `{p}`", ifc.name),
                    );
                }
            }
        }
        let member = cfg
            .bridges
            .iter()
            .flat_map(|br| &br.members)
            .any(|m| m.interface == ifc.name || m.backup.as_deref() == Some(&ifc.name));
        if b.urpf.is_some() && member {
            e.origin(
                &ifc.origin,
                format!(
                    "interface `{}`: urpf: a bridge member has no routes to check a source against; bind it on the bridge's routed interface",
                    ifc.name
                ),
            );
        }
        if (b.flow_in || b.flow_out) && s.flow_export.is_none() {
            e.origin(
                &ifc.origin,
                format!(
                    "interface `{}`: flow accounting needs a `flow-export` section",
                    ifc.name
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse, ConfigError};
    use super::*;
    use classify::rule::Dim;

    const BASE: &str = "\
ports:
  - { name: p0, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: \"02:00:00:00:00:01\", ipv4: [192.0.2.1/24] BIND }
";

    fn cfg(bind: &str, rest: &str) -> Result<crate::config::Config, Vec<ConfigError>> {
        let text = BASE.replace(" BIND }", &format!("{bind} }}")) + rest;
        parse(&text, Path::new("/tmp/services-test.yaml")).map_err(|e| e.0)
    }

    #[test]
    fn a_full_services_config_parses() {
        let c = cfg(
            ", acl-in: [A, B], acl-out: A, qos-in: edge, urpf: strict, flow: both",
            r#"
acls:
  - name: A
    entries: ["deny udp dport 53", "permit"]
  - { name: B, family: ipv6, entries: ["15 permit tcp", "deny"] }
qos:
  classes: [{ name: voice, match: ["udp dport 5060-5061", "dscp 46"] }]
  policies:
    - name: edge
      classes:
        - { class: voice, set: { dscp: 46 }, police: { cir: 10m, pir: 20m, exceed: set-dscp 0 } }
        - { class: class-default, set: { cos: 1, exp: 2 } }
flow-export: { version: 9, collectors: ["127.0.0.1:2055"], cache-size: 2000000, sampling: 10 }
logging: { acl-interval: 30 }
"#,
        )
        .unwrap();
        let s = &c.services;
        assert_eq!(
            s.acls[0].entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [10, 20]
        );
        assert_eq!(
            s.acls[1].entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [15, 25]
        );
        assert!(s.acls[1].entries[1].rule.range(Dim::EtherType) == (0x86dd, 0x86dd));
        let p = s.policies[0].classes[0].police.as_ref().unwrap();
        assert_eq!(
            (p.cir, p.pir, p.cbs, p.pbs),
            (10_000_000, Some(20_000_000), 312_500, 625_000)
        );
        assert_eq!(
            (p.conform, p.exceed, p.violate),
            (
                PoliceAction::Transmit,
                PoliceAction::SetDscp(0),
                PoliceAction::SetDscp(0)
            )
        );
        let d = &s.policies[0].classes[1];
        assert_eq!((d.set_dscp, d.set_cos, d.set_exp), (None, Some(1), Some(2)));
        let f = s.flow_export.as_ref().unwrap();
        assert_eq!(
            (f.version, f.cache_size, f.sampling),
            (FlowVersion::V9, 2_000_000, 10)
        );
        assert_eq!(s.acl_log_interval_s, 30);
        let b = &c.interfaces[0].services;
        assert_eq!(
            (
                b.acl_in.len(),
                b.acl_out.len(),
                b.urpf,
                b.flow_in,
                b.flow_out
            ),
            (2, 1, Some(Urpf::Strict), true, true)
        );
    }

    #[test]
    fn an_exp_past_seven_is_refused_with_its_field() {
        let e = cfg(
            ", qos-in: p",
            "qos:\n  policies:\n    - name: p\n      classes: [{ class: class-default, set: { exp: 8 } }]\n",
        )
        .unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(
            (e[0].line, e[0].field.as_str(), e[0].message.as_str()),
            (8, "qos.policies[0].classes[0].set.exp", "EXP is 0..=7")
        );
    }

    #[test]
    fn a_bad_entry_names_its_line_column_and_field() {
        let e = cfg(
            ", acl-in: A",
            "acls:\n  - name: A\n    entries:\n      - \"deny udp dport 99999\"\n",
        )
        .unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!((e[0].line, e[0].field.as_str()), (8, "acls[0].entries[0]"));
        assert!(e[0].message.contains("99999"), "{}", e[0].message);
        assert_eq!(
            e[0].col,
            10 + 15,
            "the column of the bad port, inside the quotes"
        );
    }

    #[test]
    fn a_bad_line_in_an_entry_file_names_that_file_and_line() {
        let dir = std::env::temp_dir().join(format!("lr-acl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("big.acl"),
            "# comment\npermit udp\n  deny tcp dport x\n",
        )
        .unwrap();
        let text = BASE.replace(" BIND }", " }") + "acls:\n  - { name: A, file: big.acl }\n";
        let e = parse(&text, &dir.join("r.yaml")).unwrap_err().0;
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].file.ends_with("big.acl") && e[0].line == 3 && e[0].col == 3,
            "{e:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_bridge_member_takes_acls_qos_and_flows_but_not_urpf() {
        let text = |bind: &str| {
            format!(
                "\
ports:
  - {{ name: p0, driver: mem }}
  - {{ name: p1, driver: mem }}
interfaces:
  - {{ name: p0, port: p0, mac: \"02:00:00:00:00:01\"{bind} }}
  - {{ name: p1, port: p1, mac: \"02:00:00:00:00:02\" }}
bridges:
  - {{ name: lan, members: [p0, p1] }}
acls:
  - {{ name: M, family: any, entries: [\"deny src-mac 02:00:00:00:0a:01\", \"permit\"] }}
flow-export: {{ collectors: [\"192.0.2.9:2055\"] }}
"
            )
        };
        let ok = parse(
            &text(", acl-in: M, acl-out: M, flow: both"),
            Path::new("/tmp/m.yaml"),
        );
        assert!(ok.is_ok(), "{:?}", ok.err());
        let e = parse(&text(", acl-in: M, urpf: loose"), Path::new("/tmp/m.yaml"))
            .unwrap_err()
            .0;
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].message.contains("`p0`: urpf: a bridge member") && e[0].line == 5,
            "{e:?}"
        );
    }

    #[test]
    fn bindings_and_policers_are_checked() {
        let e = cfg(", acl-in: [NOPE], qos-out: nope, flow: in", "").unwrap_err();
        let msgs: Vec<&str> = e.iter().map(|x| x.message.as_str()).collect();
        assert!(
            msgs.iter().any(|m| m.contains("no ACL named `NOPE`")),
            "{msgs:?}"
        );
        assert!(
            msgs.iter()
                .any(|m| m.contains("no QoS policy named `nope`")),
            "{msgs:?}"
        );
        assert!(msgs.iter().any(|m| m.contains("flow-export")), "{msgs:?}");
        let e = cfg(
            "",
            "qos:\n  policies:\n    - name: p\n      classes:\n        - { class: x, police: { cir: 2m, pir: 1m, violate: shout } }\n",
        )
        .unwrap_err();
        let msgs: Vec<&str> = e.iter().map(|x| x.message.as_str()).collect();
        assert!(
            msgs.iter().any(|m| m.contains("PIR must be at least CIR")),
            "{msgs:?}"
        );
        assert!(msgs.iter().any(|m| m.contains("`shout`")), "{msgs:?}");
        assert!(
            msgs.iter().any(|m| m.contains("no class named `x`")) || e.len() >= 2,
            "{msgs:?}"
        );
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("10m"), Some(10_000_000));
        assert_eq!(parse_quantity("1.5g"), Some(1_500_000_000));
        assert_eq!(parse_quantity("64k"), Some(64_000));
        assert_eq!(parse_quantity("1200"), Some(1200));
        assert_eq!(parse_quantity("fast"), None);
        assert_eq!(parse_quantity("-1m"), None);
    }
}
