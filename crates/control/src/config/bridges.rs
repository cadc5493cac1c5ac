//! The `bridges` section: bridge domains, their members and how they learn and flood.
//!
//! ```yaml
//! limits: { macs: 1048576 }          # the MAC table's size, fixed at start (default 1,048,576)
//! bridges:
//!   - name: office
//!     id: 10                         # 1..=65534: the MAC table keys on it; default: position + 1
//!     members: [p1, p2.100, { interface: p3, learning: false }]
//!     learning: true                 # learn sources (default); false floods every unicast frame
//!     mac-limit: 15000               # addresses learned at most (0: none); beyond it, flooded
//!     aging: 300                     # seconds an address lives unseen (0: never ages)
//!     flood-unknown-unicast: true    # false drops frames to unknown addresses
//!     bpdu: punt                     # punt (to the control plane, the default), flood or drop
//!     static-macs: [{ mac: "02:00:00:00:00:99", interface: p1 }]
//! ```
//!
//! A member is an interface (a port's untagged interface, or an 802.1Q sub-interface: its frames
//! leave tagged with its VLAN and arrive with the tag removed, so members of different VLANs
//! translate). Besides each value's range, the checks refuse: a member that is not an
//! interface, an interface in two bridges or twice in one, a member with IP addresses (its
//! frames are switched: the addresses could never be reached), a static MAC on an interface
//! that is not a member of its bridge or twice in one bridge, and two bridges with one name or id.

use super::fields::{mac, seq, Errs, Fields};
use super::{Config, Origin};
use crate::yaml::Value;
use dataplane::l2::bridge::Bpdu;
use packet::ethernet::MacAddr;

/// The MAC table's default size.
pub const DEFAULT_MACS: usize = 1 << 20;
/// The default aging time (IEEE 802.1D's).
pub const DEFAULT_AGING_S: u32 = 300;

#[derive(Clone, Debug, PartialEq)]
pub struct BridgeCfg {
    pub name: String,
    pub id: u16,
    pub members: Vec<MemberCfg>,
    pub learning: bool,
    /// 0: no limit.
    pub mac_limit: u32,
    /// 0: never ages.
    pub aging_s: u32,
    pub flood_unknown: bool,
    pub bpdu: Bpdu,
    pub statics: Vec<StaticMacCfg>,
    pub origin: Origin,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MemberCfg {
    pub interface: String,
    pub learning: bool,
    pub origin: Origin,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StaticMacCfg {
    pub mac: MacAddr,
    pub interface: String,
    pub origin: Origin,
}

pub(super) fn parse_bridges<'a>(top: &mut Fields<'a>, e: &mut Errs, cfg: &mut Config) {
    for (i, (n, path)) in seq(top, "bridges", e).into_iter().enumerate() {
        let Some(mut f) = Fields::new(path.clone(), n, e) else {
            continue;
        };
        let origin = f.origin();
        let name = f.required("name", e);
        let id = match f.parse::<u32>("id", "a bridge id", e) {
            Some(v) if (1..=65534).contains(&v) => v as u16,
            Some(v) => {
                let at = f.node("id").unwrap_or(n);
                e.at(at, &f.field("id"), format!("{v}: a bridge id is 1..=65534"));
                1
            }
            None => (i + 1).min(65534) as u16,
        };
        let mut members = Vec::new();
        for (m, mpath) in seq(&mut f, "members", e) {
            match &m.value {
                Value::Scalar(s) => members.push(MemberCfg {
                    interface: s.clone(),
                    learning: true,
                    origin: Origin {
                        line: m.line,
                        col: m.col,
                        field: mpath,
                    },
                }),
                _ => {
                    let Some(mut mf) = Fields::new(mpath, m, e) else {
                        continue;
                    };
                    let origin = mf.origin();
                    let interface = mf.required("interface", e);
                    let learning = mf.parse("learning", "true or false", e).unwrap_or(true);
                    mf.finish(e);
                    if let Some(interface) = interface {
                        members.push(MemberCfg {
                            interface,
                            learning,
                            origin,
                        });
                    }
                }
            }
        }
        if members.is_empty() && f.node("members").is_none() {
            e.at(n, &f.field("members"), "`members` is required");
        }
        let learning = f.parse("learning", "true or false", e).unwrap_or(true);
        let mac_limit = f.parse("mac-limit", "an address count", e).unwrap_or(0);
        let aging_s = f
            .parse::<u32>("aging", "a number of seconds", e)
            .unwrap_or(DEFAULT_AGING_S);
        let max_aging = dataplane::l2::mac_table::MAX_AGING_S;
        if aging_s > max_aging {
            let at = f.node("aging").unwrap_or(n);
            e.at(
                at,
                &f.field("aging"),
                format!("{aging_s}: at most {max_aging} seconds (0: never)"),
            );
        }
        let flood_unknown = f
            .parse("flood-unknown-unicast", "true or false", e)
            .unwrap_or(true);
        let bpdu = match f.str("bpdu", e).as_deref() {
            None | Some("punt") => Bpdu::Punt,
            Some("flood") => Bpdu::Flood,
            Some("drop") => Bpdu::Drop,
            Some(x) => {
                let at = f.node("bpdu").unwrap_or(n);
                e.at(
                    at,
                    &f.field("bpdu"),
                    format!("`{x}`: bpdu is punt, flood or drop"),
                );
                Bpdu::Punt
            }
        };
        let mut statics = Vec::new();
        for (s, spath) in seq(&mut f, "static-macs", e) {
            let Some(mut sf) = Fields::new(spath.clone(), s, e) else {
                continue;
            };
            let origin = sf.origin();
            let m = sf
                .required("mac", e)
                .and_then(|v| mac(&v, s, &format!("{spath}.mac"), e));
            let interface = sf.required("interface", e);
            sf.finish(e);
            if let (Some(mac), Some(interface)) = (m, interface) {
                statics.push(StaticMacCfg {
                    mac,
                    interface,
                    origin,
                });
            }
        }
        f.finish(e);
        if let Some(name) = name {
            cfg.bridges.push(BridgeCfg {
                name,
                id,
                members,
                learning,
                mac_limit,
                aging_s,
                flood_unknown,
                bpdu,
                statics,
                origin,
            });
        }
    }
}

/// The checks between bridges and interfaces (see the module's comment).
pub(super) fn cross_check(cfg: &Config, e: &mut Errs) {
    let mut owner: std::collections::HashMap<&str, &str> = Default::default();
    for (i, b) in cfg.bridges.iter().enumerate() {
        if let Some(o) = cfg.bridges[..i].iter().find(|o| o.name == b.name) {
            e.origin(
                &b.origin,
                format!("bridge `{}` defined twice (line {})", b.name, o.origin.line),
            );
        }
        if let Some(o) = cfg.bridges[..i].iter().find(|o| o.id == b.id) {
            e.origin(
                &b.origin,
                format!(
                    "bridge `{}` has id {}, as bridge `{}` (line {}) has: ids are unique",
                    b.name, b.id, o.name, o.origin.line
                ),
            );
        }
        if b.mac_limit as usize > cfg.max_macs {
            e.origin(
                &b.origin,
                format!(
                    "bridge `{}`: mac-limit {} is more than the MAC table holds (limits.macs {})",
                    b.name, b.mac_limit, cfg.max_macs
                ),
            );
        }
        for m in &b.members {
            let Some(ifc) = cfg.interfaces.iter().find(|x| x.name == m.interface) else {
                e.origin(
                    &m.origin,
                    format!("bridge `{}`: no interface named `{}`", b.name, m.interface),
                );
                continue;
            };
            if let Some(other) = owner.insert(&m.interface, &b.name) {
                let msg = if other == b.name {
                    format!("`{}` is a member of bridge `{other}` twice", m.interface)
                } else {
                    format!(
                        "`{}` is already a member of bridge `{other}`: an interface is in one bridge",
                        m.interface
                    )
                };
                e.origin(&m.origin, msg);
            }
            if !ifc.ipv4.is_empty() || !ifc.ipv6.is_empty() {
                e.origin(
                    &m.origin,
                    format!(
                        "`{}` has IP addresses, but a bridge member's frames are switched, not routed: remove its addresses",
                        m.interface
                    ),
                );
            }
        }
        for (j, s) in b.statics.iter().enumerate() {
            if !b.members.iter().any(|m| m.interface == s.interface) {
                e.origin(
                    &s.origin,
                    format!(
                        "static MAC {}: `{}` is not a member of bridge `{}`",
                        s.mac, s.interface, b.name
                    ),
                );
            }
            if b.statics[..j].iter().any(|o| o.mac == s.mac) {
                e.origin(
                    &s.origin,
                    format!("static MAC {} twice in bridge `{}`", s.mac, b.name),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use std::path::Path;

    const BASE: &str = "\
ports:
  - { name: p1, driver: mem }
  - { name: p2, driver: mem }
interfaces:
  - { name: p1, port: p1, mac: 02:00:00:00:00:01 }
  - { name: p2, port: p2, mac: 02:00:00:00:00:02 }
  - { name: p2.100, port: p2, vlan: 100, mac: 02:00:00:00:00:02 }
";

    fn errors(bridges: &str) -> Vec<String> {
        match parse(&format!("{BASE}{bridges}"), Path::new("lab.yaml")) {
            Ok(_) => vec![],
            Err(e) => e.0.iter().map(|x| x.to_string()).collect(),
        }
    }

    #[test]
    fn a_bridge_parses_with_its_defaults_and_options() {
        let text = format!(
            "{BASE}bridges:\n  - name: office\n    members: [p1, {{ interface: p2.100, learning: false }}]\n    mac-limit: 15000\n    bpdu: drop\n    static-macs: [{{ mac: 02:00:00:00:00:99, interface: p1 }}]\n"
        );
        let c = parse(&text, Path::new("lab.yaml")).unwrap();
        let b = &c.bridges[0];
        assert_eq!(
            (b.id, b.aging_s, b.mac_limit, b.learning),
            (1, 300, 15000, true)
        );
        assert_eq!(b.members[1].interface, "p2.100");
        assert!(!b.members[1].learning && b.members[0].learning);
        assert_eq!(b.bpdu, dataplane::l2::bridge::Bpdu::Drop);
        assert_eq!(b.statics[0].interface, "p1");
        assert_eq!(c.max_macs, super::DEFAULT_MACS);
    }

    #[test]
    fn mistakes_name_line_and_field() {
        let e =
            errors("bridges:\n  - { name: b, members: [p1, p9], aging: 99999999, bpdu: stp }\n");
        assert!(
            e.iter()
                .any(|x| x.contains("lab.yaml:9:") && x.contains("bridges[0].aging")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|x| x.contains("bridges[0].bpdu") && x.contains("punt, flood or drop")),
            "{e:?}"
        );
        let e = errors("bridges:\n  - { name: b, members: [p1, p9] }\n");
        assert!(
            e.iter()
                .any(|x| x.contains("bridges[0].members[1]")
                    && x.contains("no interface named `p9`")),
            "{e:?}"
        );
        let e = errors(
            "bridges:\n  - { name: a, members: [p1] }\n  - { name: b, id: 1, members: [p1] }\n",
        );
        assert!(
            e.iter()
                .any(|x| x.contains("already a member of bridge `a`")),
            "{e:?}"
        );
        assert!(e.iter().any(|x| x.contains("has id 1")), "{e:?}");
        let e = errors("bridges:\n  - { name: a, members: [p1], static-macs: [{ mac: 02:00:00:00:00:09, interface: p2 }] }\n");
        assert!(
            e.iter()
                .any(|x| x.contains("`p2` is not a member of bridge `a`")),
            "{e:?}"
        );
        let e = errors("bridges:\n  - { name: a, members: [p1], static-macs: [{ mac: 01:00:5e:00:00:09, interface: p1 }] }\n");
        assert!(e.iter().any(|x| x.contains("not a unicast MAC")), "{e:?}");
    }

    #[test]
    fn a_member_with_addresses_is_refused() {
        let text = format!(
            "{}bridges:\n  - {{ name: a, members: [p1] }}\n",
            BASE.replace(
                "mac: 02:00:00:00:00:01 }",
                "mac: 02:00:00:00:00:01, ipv4: [192.0.2.1/24] }"
            )
        );
        let e = parse(&text, Path::new("lab.yaml")).unwrap_err();
        assert!(e.to_string().contains("switched, not routed"), "{e}");
    }
}
