//! `multicast-routing`: the VRFs that route multicast beyond the link scope, and the config's
//! own multicast routes.
//!
//! ```yaml
//! limits: { mroutes: 65536 }          # (S,G) and (*,G) routes, all VRFs (default 65,536)
//! multicast-routing: true             # the default VRF routes multicast; or:
//! multicast-routing:
//!   vrfs: [default, blue]
//!   static:                           # routes of the config's own, beside PIM's
//!     - { source: 10.0.0.2, group: 232.1.1.1, iif: up1, oifs: [p1, p2] }
//!     - { vrf: blue, group: 'ff3e::8000:1', iif: up2, oifs: [p3] }   # no source: (*,G)
//! ```
//!
//! In a routing VRF, multicast is routed by the multicast FIB: PIM's routes, which pimd on the
//! TAP twins programs into the kernel and Linerate mirrors (a daemon with twins), and these static
//! ones. Without a route a packet goes up to the kernel for pimd, or is dropped where there is no
//! control plane. A static route's group must be multicast wider than the link (not
//! 224.0.0.0/24, not ff02::/16), its source unicast of the same family, its interfaces routed
//! interfaces of its VRF (not bridge members; a bridge's routed interface is one).

use std::net::IpAddr;

use super::fields::{names, origin_at, seq, Errs, Fields};
use super::Origin;
use crate::yaml::Value;

/// The multicast FIB's default size (routes, all VRFs).
pub const DEFAULT_MROUTES: usize = 65_536;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct McastRoutingCfg {
    /// VRFs that route multicast.
    pub vrfs: Vec<(String, Origin)>,
    pub routes: Vec<StaticMroute>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StaticMroute {
    pub vrf: String,
    /// None: (*,G).
    pub source: Option<IpAddr>,
    pub group: IpAddr,
    pub iif: String,
    pub oifs: Vec<(String, Origin)>,
    pub origin: Origin,
}

/// Whether `g` is a group a router routes: multicast, wider than the link.
pub fn routable_group(g: IpAddr) -> bool {
    match g {
        IpAddr::V4(a) => a.is_multicast() && a.octets()[..3] != [224, 0, 0],
        IpAddr::V6(a) => a.is_multicast() && a.segments()[0] & 0x000f > 2,
    }
}

pub(super) fn parse(top: &mut Fields<'_>, e: &mut Errs) -> Option<McastRoutingCfg> {
    let n = top.get("multicast-routing")?;
    let path = "multicast-routing".to_string();
    let default_vrf = |o: Origin| vec![("default".to_string(), o)];
    if let Value::Scalar(s) = &n.value {
        let o = origin_at(n, &path);
        return match s.as_str() {
            "true" => Some(McastRoutingCfg {
                vrfs: default_vrf(o),
                routes: Vec::new(),
            }),
            "false" => None,
            _ => {
                e.at(
                    n,
                    &path,
                    format!("`{s}`: multicast-routing is true, false or a map of settings"),
                );
                None
            }
        };
    }
    let mut f = Fields::new(path, n, e)?;
    let mut c = McastRoutingCfg::default();
    if f.node("vrfs").is_some() {
        c.vrfs = names(&mut f, "vrfs", e);
    } else {
        c.vrfs = default_vrf(f.origin());
    }
    for (rn, rpath) in seq(&mut f, "static", e) {
        let Some(mut r) = Fields::new(rpath.clone(), rn, e) else {
            continue;
        };
        let origin = r.origin();
        let vrf = r.str("vrf", e).unwrap_or_else(|| "default".into());
        let source: Option<IpAddr> = r.parse("source", "an IP address", e);
        let group: Option<IpAddr> = r.parse("group", "a multicast group address", e);
        if r.node("group").is_none() {
            e.at(rn, &format!("{rpath}.group"), "`group` is required");
        }
        let iif = r.required("iif", e);
        let oifs = names(&mut r, "oifs", e);
        if let Some(g) = group.filter(|g| !routable_group(*g)) {
            let at = r.node("group").unwrap_or(rn);
            e.at(
                at,
                &r.field("group"),
                format!("{g} is not a multicast group wider than the link (224.0.0.0/24 and ff02::/16 are never routed)"),
            );
        }
        if let (Some(s), Some(g)) = (source, group) {
            let bad = s.is_multicast() || s.is_unspecified() || s.is_ipv4() != g.is_ipv4();
            if bad {
                let at = r.node("source").unwrap_or(rn);
                e.at(
                    at,
                    &r.field("source"),
                    format!("{s}: a source is a unicast address of the group's family"),
                );
            }
        }
        r.finish(e);
        if let (Some(group), Some(iif)) = (group, iif) {
            c.routes.push(StaticMroute {
                vrf,
                source,
                group,
                iif,
                oifs,
                origin,
            });
        }
    }
    f.finish(e);
    Some(c)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::parse;

    const BASE: &str = "\
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: 02:00:00:00:00:01, ipv4: [10.0.0.1/24] }
  - { name: p1, port: p1, mac: 02:00:00:00:00:02, ipv4: [10.1.0.1/24] }
";

    fn errors(extra: &str) -> Vec<String> {
        match parse(&format!("{BASE}{extra}"), Path::new("m.yaml")) {
            Ok(_) => Vec::new(),
            Err(e) => e.0.iter().map(|x| x.to_string()).collect(),
        }
    }

    #[test]
    fn true_routes_the_default_vrf_and_static_routes_are_read() {
        let c = parse(
            &format!(
                "{BASE}multicast-routing:\n  static:\n    - {{ source: 10.0.0.2, group: 232.1.1.1, iif: p0, oifs: [p1] }}\n    - {{ group: 'ff3e::1', iif: p0, oifs: [p1] }}\n"
            ),
            Path::new("m.yaml"),
        )
        .unwrap();
        let m = c.mcast_routing.unwrap();
        assert_eq!(m.vrfs[0].0, "default");
        assert_eq!(m.routes.len(), 2);
        assert_eq!(m.routes[1].source, None);
        let c = parse(
            &format!("{BASE}multicast-routing: true\n"),
            Path::new("m.yaml"),
        )
        .unwrap();
        assert_eq!(c.mcast_routing.unwrap().vrfs.len(), 1);
    }

    #[test]
    fn bad_groups_sources_and_interfaces_name_their_field() {
        let e = errors(
            "multicast-routing:\n  static:\n    - { group: 224.0.0.5, iif: p0, oifs: [p1] }\n",
        );
        assert!(
            e[0].starts_with("m.yaml:9:") && e[0].contains("224.0.0.5 is not a multicast group"),
            "{e:?}"
        );
        let e = errors("multicast-routing:\n  static:\n    - { source: 'ff3e::1', group: 232.1.1.1, iif: p0, oifs: [p1] }\n");
        assert!(e[0].contains("multicast-routing.static[0].source"), "{e:?}");
        let e = errors(
            "multicast-routing:\n  static:\n    - { group: 232.1.1.1, iif: p0, oifs: [p9] }\n",
        );
        assert!(e[0].contains("no interface named `p9`"), "{e:?}");
        let e = errors("multicast-routing:\n  vrfs: [blue]\n");
        assert!(e[0].contains("no VRF named `blue`"), "{e:?}");
        let e = errors("multicast-routing:\n  static:\n    - { vrf: default, group: 232.1.1.1, iif: p0, oifs: [p1] }\n  vrfs: []\n");
        assert!(e[0].contains("does not route multicast"), "{e:?}");
    }
}
