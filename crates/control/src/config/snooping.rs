//! A bridge's `igmp-snooping`: IGMP and MLD snooping (RFC 4541), the multicast of the domain sent
//! to the members that joined each group rather than flooded.
//!
//! ```yaml
//! limits: { mcast-groups: 65536 }     # groups in all bridges, fixed at start (default 65,536)
//! bridges:
//!   - name: iptv
//!     members: [up1, p1, p2, p3]
//!     igmp-snooping: true             # the defaults below; or:
//!     igmp-snooping:
//!       flood-unregistered: true      # groups nobody joined: flooded (default), or (false) sent
//!                                     # to the multicast-router members only
//!       fast-leave: [p1, p2]          # these members (or `true`: all) leave a group at once on
//!                                     # a leave: one host behind each
//!       mrouter-ports: [up1]          # multicast routers' members, besides those learned from
//!                                     # queries and PIM hellos
//!       max-groups: 4096              # groups with members in the bridge, at most (0: none)
//!       max-groups-per-port: 512      # groups one member joins, at most (0: none)
//!       membership-interval: 260      # seconds a join lives unrefreshed (RFC 3376's default)
//!       last-member-interval: 2       # seconds a leave waits for another host to answer
//!       querier: true                 # send general queries (IGMPv3 and MLDv2) into the
//!                                     # bridge (needs the punt path: a daemon), default false
//!       query-interval: 125           # seconds between them
//!       querier-address: 10.0.0.9     # their IPv4 source (default: the bridge's routed
//!                                     # interface's first address, else 0.0.0.0)
//! ```
//!
//! Snooping covers IGMPv1-v3 and MLDv1-v2 alike. Beyond each value's range, the checks refuse a
//! `fast-leave` or `mrouter-ports` name that is not a member of the bridge, and a `max-groups`
//! over `limits.mcast-groups`.

use super::fields::{names, origin_at, Errs, Fields};
use super::Origin;
use crate::yaml::Value;

/// The snooping table's default size (groups, all bridges).
pub const DEFAULT_MCAST_GROUPS: usize = 65_536;

#[derive(Clone, Debug, PartialEq)]
pub struct SnoopCfg {
    pub flood_unregistered: bool,
    /// Every member leaves at once.
    pub fast_leave_all: bool,
    pub fast_leave: Vec<(String, Origin)>,
    pub mrouters: Vec<(String, Origin)>,
    pub max_groups: u32,
    pub max_groups_per_port: u32,
    pub membership_s: u32,
    pub last_member_s: u32,
    pub querier: bool,
    pub query_interval_s: u32,
    pub querier_address: Option<std::net::Ipv4Addr>,
    pub origin: Origin,
}

impl Default for SnoopCfg {
    fn default() -> Self {
        SnoopCfg {
            flood_unregistered: true,
            fast_leave_all: false,
            fast_leave: Vec::new(),
            mrouters: Vec::new(),
            max_groups: 0,
            max_groups_per_port: 0,
            membership_s: 260,
            last_member_s: 2,
            querier: false,
            query_interval_s: 125,
            querier_address: None,
            origin: Origin::default(),
        }
    }
}

/// Reads `igmp-snooping` of the bridge whose fields are `f`.
pub(super) fn parse(f: &mut Fields<'_>, e: &mut Errs) -> Option<SnoopCfg> {
    let n = f.get("igmp-snooping")?;
    let path = f.field("igmp-snooping");
    if let Value::Scalar(s) = &n.value {
        return match s.as_str() {
            "true" => Some(SnoopCfg {
                origin: origin_at(n, &path),
                ..Default::default()
            }),
            "false" => None,
            _ => {
                e.at(
                    n,
                    &path,
                    format!("`{s}`: igmp-snooping is true, false or a map of settings"),
                );
                None
            }
        };
    }
    let mut sf = Fields::new(path.clone(), n, e)?;
    let mut c = SnoopCfg {
        origin: sf.origin(),
        ..Default::default()
    };
    if let Some(v) = sf.parse("flood-unregistered", "true or false", e) {
        c.flood_unregistered = v;
    }
    match sf.get("fast-leave").map(|x| &x.value) {
        Some(Value::Scalar(s)) if s == "true" || s == "false" => {
            c.fast_leave_all = s == "true";
        }
        Some(_) => c.fast_leave = names(&mut sf, "fast-leave", e),
        None => {}
    }
    c.mrouters = names(&mut sf, "mrouter-ports", e);
    if let Some(v) = sf.parse("max-groups", "a group count", e) {
        c.max_groups = v;
    }
    if let Some(v) = sf.parse("max-groups-per-port", "a group count", e) {
        c.max_groups_per_port = v;
    }
    if let Some(v) = sf.parse("querier", "true or false", e) {
        c.querier = v;
    }
    c.querier_address = sf.parse("querier-address", "an IPv4 address", e);
    for (key, slot, max) in [
        ("membership-interval", &mut c.membership_s, 86_400u32),
        ("last-member-interval", &mut c.last_member_s, 600),
        ("query-interval", &mut c.query_interval_s, 3_600),
    ] {
        if let Some(v) = sf.parse::<u32>(key, "a number of seconds", e) {
            if v == 0 || v > max {
                let at = sf.node(key).unwrap_or(n);
                e.at(at, &sf.field(key), format!("{v}: 1..={max} seconds"));
            }
            *slot = v.clamp(1, max);
        }
    }
    sf.finish(e);
    Some(c)
}

/// The checks against the bridge's members and the table's size (see the module's comment).
pub(super) fn check(bridge: &str, members: &[&str], c: &SnoopCfg, max_groups: usize, e: &mut Errs) {
    for (name, o) in c.fast_leave.iter().chain(&c.mrouters) {
        if !members.contains(&name.as_str()) {
            e.origin(o, format!("`{name}` is not a member of bridge `{bridge}`"));
        }
    }
    if c.max_groups as usize > max_groups {
        e.origin(
            &c.origin,
            format!(
                "bridge `{bridge}`: max-groups {} is more than the snooping table holds (limits.mcast-groups {max_groups})",
                c.max_groups
            ),
        );
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
  - { name: p3, driver: mem }
interfaces:
  - { name: p1, port: p1, mac: 02:00:00:00:00:01 }
  - { name: p2, port: p2, mac: 02:00:00:00:00:02 }
  - { name: p3, port: p3, mac: 02:00:00:00:00:03 }
";

    fn errors(text: &str) -> Vec<String> {
        match parse(&format!("{BASE}{text}"), Path::new("lab.yaml")) {
            Ok(_) => vec![],
            Err(e) => e.0.iter().map(|x| x.to_string()).collect(),
        }
    }

    #[test]
    fn snooping_parses_as_a_flag_or_with_its_settings() {
        let c = parse(
            &format!(
                "{BASE}bridges:\n  - {{ name: tv, members: [p1, p2], igmp-snooping: true }}\n"
            ),
            Path::new("lab.yaml"),
        )
        .unwrap();
        let s = c.bridges[0].snoop.as_ref().unwrap();
        assert!(s.flood_unregistered && !s.fast_leave_all && s.membership_s == 260);
        let c = parse(
            &format!("{BASE}limits: {{ mcast-groups: 1024 }}\nbridges:\n  - name: tv\n    members: [p1, p2, p3]\n    igmp-snooping:\n      flood-unregistered: false\n      fast-leave: [p2, p3]\n      mrouter-ports: p1\n      max-groups: 500\n      max-groups-per-port: 100\n      last-member-interval: 1\n"),
            Path::new("lab.yaml"),
        )
        .unwrap();
        assert_eq!(c.max_mcast_groups, 1024);
        let s = c.bridges[0].snoop.as_ref().unwrap();
        assert!(!s.flood_unregistered);
        let names = |v: &[(String, crate::config::Origin)]| -> Vec<String> {
            v.iter().map(|x| x.0.clone()).collect()
        };
        assert_eq!(names(&s.fast_leave), ["p2", "p3"]);
        assert_eq!(names(&s.mrouters), ["p1"]);
        assert_eq!(
            (s.max_groups, s.max_groups_per_port, s.last_member_s),
            (500, 100, 1)
        );
        assert!(!s.querier);
        let c = parse(
            &format!("{BASE}bridges:\n  - {{ name: tv, members: [p1], igmp-snooping: {{ querier: true, query-interval: 30, querier-address: 10.9.9.9 }} }}\n"),
            Path::new("lab.yaml"),
        )
        .unwrap();
        let s = c.bridges[0].snoop.as_ref().unwrap();
        assert_eq!((s.querier, s.query_interval_s), (true, 30));
        assert_eq!(s.querier_address, Some("10.9.9.9".parse().unwrap()));
        let c = parse(
            &format!("{BASE}bridges:\n  - {{ name: tv, members: [p1], igmp-snooping: {{ fast-leave: true }} }}\n"),
            Path::new("lab.yaml"),
        )
        .unwrap();
        assert!(c.bridges[0].snoop.as_ref().unwrap().fast_leave_all);
    }

    #[test]
    fn mistakes_name_line_and_field() {
        let e = errors("bridges:\n  - name: tv\n    members: [p1, p2]\n    igmp-snooping:\n      mrouter-ports: [p3]\n");
        assert!(
            e.iter().any(|x| x.contains("lab.yaml:13:")
                && x.contains("bridges[0].igmp-snooping.mrouter-ports[0]")
                && x.contains("`p3` is not a member of bridge `tv`")),
            "{e:?}"
        );
        let e = errors("bridges:\n  - { name: tv, members: [p1], igmp-snooping: yes }\n");
        assert!(
            e.iter()
                .any(|x| x.contains("igmp-snooping is true, false or a map")),
            "{e:?}"
        );
        let e = errors(
            "bridges:\n  - { name: tv, members: [p1], igmp-snooping: { max-groups: 100000 } }\n",
        );
        assert!(
            e.iter()
                .any(|x| x.contains("more than the snooping table holds")),
            "{e:?}"
        );
        let e = errors("bridges:\n  - { name: tv, members: [p1], igmp-snooping: { last-member-interval: 0, proxy: true } }\n");
        assert!(
            e.iter()
                .any(|x| x.contains("last-member-interval") && x.contains("1..=600")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|x| x.contains("proxy") && x.contains("querier")),
            "{e:?}"
        );
        let e = errors("limits: { mcast-groups: 3 }\n");
        assert!(e.iter().any(|x| x.contains("limits.mcast-groups")), "{e:?}");
    }
}
