//! The checks between sections, once each section is valid on its own.

use std::collections::HashMap;
use std::net::IpAddr;

use super::fields::Errs;
use super::{services, Config, InterfaceCfg, NeighborCfg, Prefix, RouteCfg, Target};

/// Checks the references between sections: interfaces name ports and VRFs that exist, neighbours
/// sit on a subnet of their interface, routes point at known neighbours.
pub(super) fn cross_check(cfg: &Config, e: &mut Errs) {
    services::cross_check(cfg, e);
    super::bridges::cross_check(cfg, e);
    mcast_routing(cfg, e);
    super::ggsn::cross_check(cfg, e);
    super::dlsw::cross_check(cfg, e);
    super::events::cross_check(cfg, e);
    super::atm::cross_check(cfg, e);
    super::mpls::cross_check(cfg, e);
    super::l3vpn::cross_check(cfg, e);
    for (i, ifc) in cfg.interfaces.iter().enumerate() {
        if ifc.bvi.is_none() && !cfg.ports.iter().any(|p| p.name == ifc.port) {
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
        let member = || {
            cfg.bridges
                .iter()
                .flat_map(|b| &b.members)
                .any(|m| m.interface == ifc.name || m.backup.as_ref() == Some(&ifc.name))
        };
        if ifc.s_vlan.is_some() && !member() {
            e.origin(
                &ifc.origin,
                format!(
                    "interface `{}` has an 802.1ad S-tag (`s-vlan`): such sub-interfaces are bridge members only (routing on them is not built); add it to a bridge",
                    ifc.name
                ),
            );
        }
        let dup = cfg.interfaces[..i].iter().any(|o| {
            o.name == ifc.name
                || (ifc.bvi.is_none()
                    && o.bvi.is_none()
                    && o.port == ifc.port
                    && o.vlan == ifc.vlan
                    && o.s_vlan == ifc.s_vlan
                    && o.atm.is_none()
                    && ifc.atm.is_none())
        });
        if dup {
            e.origin(
                &ifc.origin,
                format!(
                    "interface `{}` duplicates another (name, or port and VLAN tags)",
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
        if let Some(own) = own_address(cfg, nb.ip) {
            e.origin(
                &nb.origin,
                format!(
                    "{} is the address of interface `{}` itself, not a neighbor{}",
                    nb.ip,
                    own.name,
                    if own.name == ifc.name {
                        " on it".to_string()
                    } else {
                        format!(" on `{}`", ifc.name)
                    }
                ),
            );
        } else if !on_subnet(ifc, nb.ip) {
            e.origin(
                &nb.origin,
                format!("{} is not on a subnet of interface `{}`", nb.ip, ifc.name),
            );
        }
    }
    duplicate_routes(cfg, e);
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
                } else if let Some(own) = own_address(cfg, *a).filter(|i| i.vrf == r.vrf) {
                    e.origin(
                        &r.origin,
                        format!(
                            "next hop {a} is the address of interface `{}` itself, not a neighbor",
                            own.name
                        ),
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

/// The interface whose own address `ip` is.
pub(super) fn own_address(cfg: &Config, ip: IpAddr) -> Option<&InterfaceCfg> {
    cfg.interfaces.iter().find(|i| match ip {
        IpAddr::V4(a) => i.ipv4.iter().any(|&(x, _)| x == u32::from(a)),
        IpAddr::V6(a) => i.ipv6.iter().any(|&(x, _)| x == u128::from(a)),
    })
}

/// A prefix is configured once per VRF. Twice with different targets, the last would silently
/// win; twice alike, it is a copy that a later edit of one of them would turn into that case. Both
/// are refused (ECMP is one route with several next hops in its `via`).
fn duplicate_routes(cfg: &Config, e: &mut Errs) {
    let mut seen: HashMap<(&str, Prefix), &RouteCfg> = HashMap::new();
    for r in &cfg.routes {
        match seen.get(&(r.vrf.as_str(), r.prefix)) {
            None => {
                seen.insert((r.vrf.as_str(), r.prefix), r);
            }
            Some(first) => {
                let how = if first.target == r.target {
                    "with the same target".to_string()
                } else {
                    format!("{}; here {}", describe(&first.target), describe(&r.target))
                };
                e.origin(
                    &r.origin,
                    format!(
                        "{} in VRF `{}` is already configured at line {} ({how}): a prefix is configured once (ECMP: list every next hop in one `via`)",
                        r.prefix, r.vrf, first.origin.line
                    ),
                );
            }
        }
    }
}

fn describe(t: &Target) -> String {
    match t {
        Target::Via(v) => format!(
            "via {}",
            v.iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Target::Blackhole => "blackhole".into(),
        Target::Reject => "reject".into(),
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

/// `multicast-routing`: its VRFs exist; a static route's VRF routes multicast and its
/// interfaces are routed interfaces of that VRF.
fn mcast_routing(cfg: &Config, e: &mut Errs) {
    let Some(m) = &cfg.mcast_routing else {
        return;
    };
    for (v, o) in &m.vrfs {
        if !cfg.vrfs.contains(v) {
            e.origin(o, format!("no VRF named `{v}`"));
        }
    }
    let member = |name: &str| {
        cfg.bridges
            .iter()
            .flat_map(|b| &b.members)
            .any(|m| m.interface == name || m.backup.as_deref() == Some(name))
    };
    for r in &m.routes {
        if !m.vrfs.iter().any(|(v, _)| *v == r.vrf) {
            e.origin(
                &r.origin,
                format!(
                    "VRF `{}` does not route multicast (add it to multicast-routing.vrfs)",
                    r.vrf
                ),
            );
        }
        let iif = (r.iif.as_str(), &r.origin);
        for (name, o) in std::iter::once(iif).chain(r.oifs.iter().map(|(n, o)| (n.as_str(), o))) {
            match cfg.interfaces.iter().find(|i| i.name == name) {
                None => e.origin(o, format!("no interface named `{name}`")),
                Some(i) if i.vrf != r.vrf => e.origin(
                    o,
                    format!("interface `{name}` is in VRF `{}`, not `{}`", i.vrf, r.vrf),
                ),
                Some(_) if member(name) => e.origin(
                    o,
                    format!("interface `{name}` is a bridge member: route to its bridge's routed interface"),
                ),
                Some(_) => {}
            }
        }
    }
}
