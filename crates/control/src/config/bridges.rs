//! The `bridges` section: bridge domains, their members and how they learn and flood.
//!
//! ```yaml
//! limits: { macs: 1048576 }          # the MAC table's size, fixed at start (default 1,048,576)
//! bridges:
//!   - name: office
//!     id: 10                         # 1..=65534: the MAC table keys on it; default: position + 1
//!     members: [p1, p2.100, { interface: p3, learning: false },
//!               { interface: p4, mode: dot1q-tunnel, l2protocol-tunnel: [stp, cdp, lacp] },
//!               { interface: up1, backup: up2, preempt-delay: 30 }]   # Flexlink
//!     learning: true                 # learn sources (default); false floods every unicast frame
//!     mac-limit: 15000               # addresses learned at most (0: none); beyond it, flooded
//!     mac-limit-action: flood        # flood (the default: beyond the limit frames are flooded,
//!                                    # not learned, and logged) or shutdown (also shut the member
//!                                    # that went beyond it until its addresses are cleared)
//!     aging: 300                     # seconds an address lives unseen (0: never ages)
//!     flood-unknown-unicast: true    # false drops frames to unknown addresses
//!     bpdu: punt                     # punt (to the control plane, the default), flood or drop
//!     static-macs: [{ mac: "02:00:00:00:00:99", interface: p1 }]
//!     storm-control: { broadcast: 1000, multicast: 5000, unknown-unicast: 10000 }  # frames/s per member
//!     igmp-snooping: true            # IGMP/MLD snooping (see `config::snooping`)
//! ```
//!
//! A member is an interface (a port's untagged interface, or an 802.1Q sub-interface: its frames
//! leave tagged with its VLAN and arrive with the tag removed, so members of different VLANs
//! translate). A Flexlink primary names its `backup`: the backup is a member too, blocking (no
//! frame in or out) while the primary's link is up; when it goes, the backup takes over every
//! address learned on the primary in one step (both share one member id in the MAC table), and
//! with `preempt-delay` the primary takes over again that long after its link returns. A member in `dot1q-tunnel` mode is a port's untagged interface that takes every
//! frame of the port, tagged or not: a customer's tags ride inside the tag of the member they
//! leave by (Q-in-Q with the 0x8100 outer tag, as the ME 6524's dot1q tunnels), and come off
//! again on the way back; with `l2protocol-tunnel` the customer's STP, CDP/VTP and LACP frames
//! cross the bridge under Cisco's L2PT address 01:00:0C:CD:CD:D0 (so provider switches flood
//! them rather than take them) and get their own address back as they leave by a tunnel member.
//! Storm control polices, per member and per kind, the frames the domain
//! would flood (broadcast, multicast, unknown unicast) in frames a second, with a burst of a
//! tenth of a second's worth. Besides each value's range, the checks refuse: a member that is not an
//! interface, an interface in two bridges or twice in one, a member with IP addresses (its
//! frames are switched: the addresses could never be reached), a static MAC on an interface
//! that is not a member of its bridge or twice in one bridge, two bridges with one name or id,
//! and a dot1q-tunnel member that is a VLAN sub-interface or shares its port with one.
//!
//! A bridge's routed interface (BVI, the IRB of other vendors) is an interface with `bridge:
//! NAME` instead of a port: `{ name: bvi10, bridge: office, mac: ..., ipv4: [10.10.0.1/24] }`.
//! Frames to its MAC (a static entry of the bridge) and a copy of every broadcast and multicast
//! frame of the bridge are routed as received on it; what is routed out of it (ARP and ND
//! included) is switched by the bridge to the member its destination is on, or flooded. One per
//! bridge; no VLAN tags (a frame takes those of the member it leaves by); not a member itself.

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
    /// `mac-limit-action: shutdown`: a member whose new source is refused at the limit is shut
    /// (blocked, as err-disabled) until `clear mac address-table` clears its addresses.
    pub limit_shutdown: bool,
    /// 0: never ages.
    pub aging_s: u32,
    pub flood_unknown: bool,
    pub bpdu: Bpdu,
    pub statics: Vec<StaticMacCfg>,
    /// Frames a second each member may flood: broadcast, multicast, unknown unicast.
    pub storm: [Option<u32>; 3],
    /// IGMP/MLD snooping (`igmp-snooping`, see `config::snooping`); None: multicast floods.
    pub snoop: Option<super::snooping::SnoopCfg>,
    pub origin: Origin,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MemberCfg {
    pub interface: String,
    pub learning: bool,
    /// dot1q-tunnel: every frame of the port, tagged or not, is this member's.
    pub tunnel: bool,
    /// L2 protocol tunnelling (`l2protocol-tunnel: [stp, cdp, vtp, lacp]`, dot1q-tunnel members
    /// only): `dataplane::l2::bridge::l2pt` bits.
    pub l2pt: u8,
    /// Flexlink: the backup of this (primary) member, blocking while the primary is up; when
    /// the primary's link goes, every address learned on it moves to the backup at once.
    pub backup: Option<String>,
    /// Flexlink preemption: back to the primary this many seconds after its link returns
    /// (None: the backup stays active until it fails itself).
    pub preempt_s: Option<u32>,
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
                    tunnel: false,
                    l2pt: 0,
                    backup: None,
                    preempt_s: None,
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
                    let tunnel = match mf.str("mode", e).as_deref() {
                        None | Some("access") => false,
                        Some("dot1q-tunnel") => true,
                        Some(x) => {
                            let at = mf.node("mode").unwrap_or(m);
                            e.at(
                                at,
                                &mf.field("mode"),
                                format!("`{x}`: mode is access (the default) or dot1q-tunnel"),
                            );
                            false
                        }
                    };
                    let mut l2pt = 0u8;
                    for (p, node, field) in mf.list("l2protocol-tunnel", e) {
                        use dataplane::l2::bridge::l2pt as bits;
                        l2pt |= match p.as_str() {
                            "stp" => bits::STP,
                            // VTP, DTP, PAgP and UDLD share CDP's address.
                            "cdp" | "vtp" => bits::CDP,
                            "lacp" => bits::LACP,
                            _ => {
                                e.at(
                                    node,
                                    &field,
                                    format!("`{p}`: l2protocol-tunnel protocols are stp, cdp, vtp and lacp"),
                                );
                                0
                            }
                        };
                    }
                    if l2pt != 0 && !tunnel {
                        e.at(
                            mf.node("l2protocol-tunnel").unwrap_or(m),
                            &mf.field("l2protocol-tunnel"),
                            "l2protocol-tunnel is for a dot1q-tunnel member (`mode: dot1q-tunnel`)",
                        );
                    }
                    let backup = mf.str("backup", e);
                    let preempt_s = mf.parse::<u32>("preempt-delay", "a number of seconds", e);
                    if preempt_s.is_some() && backup.is_none() {
                        e.at(
                            mf.node("preempt-delay").unwrap_or(m),
                            &mf.field("preempt-delay"),
                            "preempt-delay is for a Flexlink primary: give its `backup`",
                        );
                    }
                    mf.finish(e);
                    if let Some(interface) = interface {
                        members.push(MemberCfg {
                            interface,
                            learning,
                            tunnel,
                            l2pt,
                            backup,
                            preempt_s,
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
        let limit_shutdown = match f.str("mac-limit-action", e).as_deref() {
            None | Some("flood") => false,
            Some("shutdown") => true,
            Some(x) => {
                let at = f.node("mac-limit-action").unwrap_or(n);
                e.at(
                    at,
                    &f.field("mac-limit-action"),
                    format!("`{x}`: mac-limit-action is flood or shutdown"),
                );
                false
            }
        };
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
        let mut storm = [None; 3];
        if let Some(sn) = f.get("storm-control") {
            let path = f.field("storm-control");
            if let Some(mut sf) = Fields::new(path, sn, e) {
                for (k, key) in ["broadcast", "multicast", "unknown-unicast"]
                    .iter()
                    .enumerate()
                {
                    storm[k] = sf.parse::<u32>(key, "frames a second", e);
                    if storm[k] == Some(0) {
                        let at = sf.node(key).unwrap_or(sn);
                        e.at(
                            at,
                            &sf.field(key),
                            "0 frames a second would flood nothing; leave the key out for no limit",
                        );
                    }
                }
                sf.finish(e);
            }
        }
        let snoop = super::snooping::parse(&mut f, e);
        f.finish(e);
        if let Some(name) = name {
            cfg.bridges.push(BridgeCfg {
                name,
                id,
                members,
                learning,
                mac_limit,
                limit_shutdown,
                aging_s,
                flood_unknown,
                bpdu,
                statics,
                storm,
                snoop,
                origin,
            });
        }
    }
}

/// The checks between bridges and interfaces (see the module's comment).
pub(super) fn cross_check(cfg: &Config, e: &mut Errs) {
    let mut owner: std::collections::HashMap<&str, &str> = Default::default();
    for (i, b) in cfg.bridges.iter().enumerate() {
        if let Some(sc) = &b.snoop {
            let names: Vec<&str> = b
                .members
                .iter()
                .flat_map(|m| std::iter::once(m.interface.as_str()).chain(m.backup.as_deref()))
                .collect();
            super::snooping::check(&b.name, &names, sc, cfg.max_mcast_groups, e);
        }
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
            if let Some(bk) = &m.backup {
                match cfg.interfaces.iter().find(|x| &x.name == bk) {
                    None => e.origin(
                        &m.origin,
                        format!("bridge `{}`: no interface named `{bk}` (backup)", b.name),
                    ),
                    Some(bi) => {
                        if let Some(other) = owner.insert(bk, &b.name) {
                            e.origin(
                                &m.origin,
                                format!("backup `{bk}` is already a member of bridge `{other}`"),
                            );
                        }
                        if bk == &m.interface {
                            e.origin(&m.origin, format!("`{bk}` cannot back itself up"));
                        }
                        if !bi.ipv4.is_empty() || !bi.ipv6.is_empty() {
                            e.origin(
                                &m.origin,
                                format!("backup `{bk}` has IP addresses, but its frames are switched: remove them"),
                            );
                        }
                    }
                }
            }
            if m.tunnel {
                if ifc.vlan.is_some() {
                    e.origin(
                        &m.origin,
                        format!(
                            "`{}` is a VLAN sub-interface: a dot1q-tunnel member is a port's untagged interface",
                            m.interface
                        ),
                    );
                } else if let Some(o) = cfg
                    .interfaces
                    .iter()
                    .find(|o| o.port == ifc.port && o.name != ifc.name)
                {
                    e.origin(
                        &m.origin,
                        format!(
                            "`{}` is a dot1q-tunnel member, which takes every frame of port `{}`; `{}` is on that port too",
                            m.interface, ifc.port, o.name
                        ),
                    );
                }
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
            let bvi = cfg
                .interfaces
                .iter()
                .find(|i| i.bvi.as_ref() == Some(&b.name));
            if let Some(bvi) = bvi.filter(|i| i.mac == s.mac) {
                e.origin(
                    &s.origin,
                    format!(
                        "static MAC {} is the address of `{}`, bridge `{}`'s routed interface",
                        s.mac, bvi.name, b.name
                    ),
                );
            }
        }
    }
    check_routed_interfaces(cfg, &owner, e);
}

/// A bridge's routed interface (BVI) names a bridge that exists and has no other, carries no
/// VLAN tags (its frames take those of the member they leave by) and is no member itself.
fn check_routed_interfaces(
    cfg: &Config,
    members: &std::collections::HashMap<&str, &str>,
    e: &mut Errs,
) {
    for (i, ifc) in cfg.interfaces.iter().enumerate() {
        let Some(bridge) = &ifc.bvi else { continue };
        if !cfg.bridges.iter().any(|b| &b.name == bridge) {
            e.origin(
                &ifc.origin,
                format!("interface `{}`: no bridge named `{bridge}`", ifc.name),
            );
        }
        if let Some(o) = cfg.interfaces[..i]
            .iter()
            .find(|o| o.bvi.as_ref() == Some(bridge))
        {
            e.origin(
                &ifc.origin,
                format!(
                    "bridge `{bridge}` has a routed interface already, `{}` (line {}): one per bridge",
                    o.name, o.origin.line
                ),
            );
        }
        if ifc.vlan.is_some() || ifc.s_vlan.is_some() {
            e.origin(
                &ifc.origin,
                format!(
                    "interface `{}` is bridge `{bridge}`'s routed interface: it has no VLAN tags of its own (its frames take the tags of the member they leave by)",
                    ifc.name
                ),
            );
        }
        if let Some(b) = members.get(ifc.name.as_str()) {
            e.origin(
                &ifc.origin,
                format!(
                    "interface `{}` is a bridge's routed interface and cannot also be a member of bridge `{b}`",
                    ifc.name
                ),
            );
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
        assert_eq!(b.storm, [None; 3]);
        let text = format!(
            "{BASE}bridges:\n  - {{ name: t, members: [{{ interface: p1, mode: dot1q-tunnel }}], storm-control: {{ broadcast: 100, unknown-unicast: 5000 }} }}\n"
        );
        let c = parse(&text, Path::new("lab.yaml")).unwrap();
        assert!(c.bridges[0].members[0].tunnel);
        assert_eq!(c.bridges[0].storm, [Some(100), None, Some(5000)]);
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
        let e = errors("bridges:\n  - { name: b, members: [p1], mac-limit-action: errdisable }\n");
        assert!(
            e.iter()
                .any(|x| x.contains("bridges[0].mac-limit-action")
                    && x.contains("flood or shutdown")),
            "{e:?}"
        );
        let e = errors("bridges:\n  - { name: b, members: [{ interface: p1, l2protocol-tunnel: [stp, gvrp] }] }\n");
        assert!(
            e.iter()
                .any(|x| x.contains("members[0].l2protocol-tunnel[1]") && x.contains("`gvrp`")),
            "{e:?}"
        );
        assert!(
            e.iter().any(|x| x.contains("is for a dot1q-tunnel member")),
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
        let e =
            errors("bridges:\n  - { name: a, members: [{ interface: p2, mode: dot1q-tunnel }] }\n");
        assert!(
            e.iter().any(|x| x.contains("`p2.100` is on that port too")),
            "{e:?}"
        );
        let e = errors("bridges:\n  - { name: a, members: [{ interface: p2.100, mode: tunnel }], storm-control: { broadcast: 0 } }\n");
        assert!(e.iter().any(|x| x.contains("members[0].mode")), "{e:?}");
        assert!(
            e.iter().any(|x| x.contains("storm-control.broadcast")),
            "{e:?}"
        );
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

    #[test]
    fn a_q_in_q_sub_interface_is_a_member_or_refused() {
        let qinq = "  - { name: p2.10.20, port: p2, s-vlan: 10, vlan: 20, mac: 02:00:00:00:00:02 }\n  - { name: p2.11, port: p2, s-vlan: 11, mac: 02:00:00:00:00:02 }\n";
        let ok =
            format!("{BASE}{qinq}bridges:\n  - {{ name: a, members: [p1, p2.10.20, p2.11] }}\n");
        let cfg = parse(&ok, Path::new("lab.yaml")).unwrap();
        let i = cfg
            .interfaces
            .iter()
            .find(|i| i.name == "p2.10.20")
            .unwrap();
        assert_eq!((i.s_vlan, i.vlan), (Some(10), Some(20)));
        // Not a member: refused at its line, saying why.
        let text = format!("{BASE}{qinq}bridges:\n  - {{ name: a, members: [p1, p2.11] }}\n");
        let e = parse(&text, Path::new("lab.yaml")).unwrap_err().to_string();
        assert!(
            e.contains("lab.yaml:8:5: interfaces[3]") && e.contains("`p2.10.20` has an 802.1ad"),
            "{e}"
        );
        // Twice the same tags on a port; a tag out of range.
        let dup = format!("{BASE}{qinq}  - {{ name: again, port: p2, s-vlan: 11, mac: 02:00:00:00:00:02 }}\nbridges:\n  - {{ name: a, members: [p2.10.20, p2.11, again] }}\n");
        let e = parse(&dup, Path::new("lab.yaml")).unwrap_err().to_string();
        assert!(e.contains("duplicates another"), "{e}");
        let bad =
            format!("{BASE}  - {{ name: x, port: p1, s-vlan: 4095, mac: 02:00:00:00:00:01 }}\n");
        let e = parse(&bad, Path::new("lab.yaml")).unwrap_err().to_string();
        assert!(
            e.contains("interfaces[3].s-vlan") && e.contains("1..=4094"),
            "{e}"
        );
    }

    #[test]
    fn a_routed_interface_is_on_a_bridge_or_refused_saying_why() {
        let bvi = "  - { name: bvi1, bridge: a, mac: 02:00:00:00:00:0b, ipv4: [10.1.0.1/24] }\n";
        let ok = format!("{BASE}{bvi}bridges:\n  - {{ name: a, members: [p1, p2.100] }}\n");
        let cfg = parse(&ok, Path::new("lab.yaml")).unwrap();
        let i = cfg.interfaces.iter().find(|i| i.name == "bvi1").unwrap();
        assert_eq!((i.bvi.as_deref(), i.port.as_str()), (Some("a"), ""));
        let refused = |interfaces: &str, bridges: &str| {
            let text = format!("{BASE}{interfaces}bridges:\n{bridges}");
            parse(&text, Path::new("lab.yaml")).unwrap_err().to_string()
        };
        let a = "  - { name: a, members: [p1] }\n";
        // Neither a port nor a bridge; both.
        let e = refused("  - { name: x, mac: 02:00:00:00:00:0b }\n", a);
        assert!(
            e.contains("lab.yaml:8:5: interfaces[3].port") && e.contains("or `bridge`"),
            "{e}"
        );
        let e = refused(
            "  - { name: x, port: p1, bridge: a, mac: 02:00:00:00:00:0b }\n",
            a,
        );
        assert!(
            e.contains("interfaces[3].bridge") && e.contains("not both"),
            "{e}"
        );
        // No such bridge; two for one bridge; tagged; a member as well.
        let e = refused(bvi.replace("bridge: a", "bridge: z").as_str(), a);
        assert!(e.contains("no bridge named `z`"), "{e}");
        let two = format!(
            "{bvi}{}",
            bvi.replace("bvi1", "bvi2").replace("10.1.", "10.2.")
        );
        let e = refused(&two, a);
        assert!(e.contains("has a routed interface already, `bvi1`"), "{e}");
        let e = refused(&bvi.replace("bridge: a,", "bridge: a, vlan: 5,"), a);
        assert!(e.contains("no VLAN tags of its own"), "{e}");
        let e = refused(bvi, "  - { name: a, members: [p1, bvi1] }\n");
        assert!(e.contains("cannot also be a member"), "{e}");
        // A static MAC that is the routed interface's own.
        let e = refused(
            bvi,
            "  - { name: a, members: [p1], static-macs: [{ mac: 02:00:00:00:00:0b, interface: p1 }] }\n",
        );
        assert!(e.contains("is the address of `bvi1`"), "{e}");
    }
}
