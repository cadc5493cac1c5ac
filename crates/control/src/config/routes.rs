//! The `neighbors`, `routes` and `route-files` sections.

use std::net::IpAddr;
use std::path::Path;

use super::fields::{mac, seq, Errs, Fields};
use super::{Config, NeighborCfg, Prefix, RouteCfg, RouteFileCfg, Target};

/// `neighbors`: static ARP/ND entries.
pub(super) fn parse_neighbors<'a>(top: &mut Fields<'a>, e: &mut Errs, cfg: &mut Config) {
    for (n, path) in seq(top, "neighbors", e) {
        let Some(mut f) = Fields::new(path.clone(), n, e) else {
            continue;
        };
        let origin = f.origin();
        let interface = f.required("interface", e);
        let ip: Option<IpAddr> = f.parse("ip", "an IP address", e);
        if f.map.iter().all(|(k, _)| k != "ip") {
            e.at(n, &format!("{path}.ip"), "`ip` is required");
        }
        let m = f
            .required("mac", e)
            .and_then(|s| mac(&s, n, &format!("{path}.mac"), e));
        f.finish(e);
        if let (Some(interface), Some(ip), Some(mac)) = (interface, ip, m) {
            cfg.neighbors.push(NeighborCfg {
                interface,
                ip,
                mac,
                origin,
            });
        }
    }
}

/// `routes`: static routes, each via next hops, a blackhole or a reject.
pub(super) fn parse_routes<'a>(top: &mut Fields<'a>, e: &mut Errs, cfg: &mut Config) {
    for (n, path) in seq(top, "routes", e) {
        let Some(mut f) = Fields::new(path.clone(), n, e) else {
            continue;
        };
        let origin = f.origin();
        let prefix = f
            .required("prefix", e)
            .and_then(|s| match Prefix::parse(&s) {
                Ok(p) => Some(p),
                Err(m) => {
                    e.at(n, &format!("{path}.prefix"), m);
                    None
                }
            });
        let vrf = f.str("vrf", e).unwrap_or_else(|| "default".into());
        let mut via = Vec::new();
        for (s, node, field) in f.list("via", e) {
            match s.parse::<IpAddr>() {
                Ok(a) => via.push(a),
                Err(_) => e.at(node, &field, format!("`{s}` is not an IP address")),
            }
        }
        let blackhole = f
            .parse::<bool>("blackhole", "true or false", e)
            .unwrap_or(false);
        let reject = f
            .parse::<bool>("reject", "true or false", e)
            .unwrap_or(false);
        let labels_at = f.node("labels");
        let mut labels = Vec::new();
        for (s, node, field) in f.list("labels", e) {
            match s.parse::<u32>() {
                Ok(l) if l <= dataplane::mpls::MAX_LABEL => labels.push(l),
                _ => e.at(
                    node,
                    &field,
                    format!(
                        "`{s}` is not a label (a number from 0 to {})",
                        dataplane::mpls::MAX_LABEL
                    ),
                ),
            }
        }
        if let Some(at) = labels_at {
            if labels.len() > dataplane::mpls::MAX_LABELS {
                e.at(
                    at,
                    &format!("{path}.labels"),
                    format!("at most {} labels are pushed", dataplane::mpls::MAX_LABELS),
                );
            } else if via.is_empty() {
                e.at(at, &format!("{path}.labels"), "`labels` needs `via`");
            }
        }
        f.finish(e);
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
                labels,
                origin,
            });
        }
    }
}

/// `route-files`: tables in the route-file format (see docs/routes.md), loaded when the router is
/// built.
pub(super) fn parse_route_files<'a>(
    top: &mut Fields<'a>,
    dir: &Path,
    e: &mut Errs,
    cfg: &mut Config,
) {
    for (n, path) in seq(top, "route-files", e) {
        let Some(mut f) = Fields::new(path.clone(), n, e) else {
            continue;
        };
        let origin = f.origin();
        let p = f.required("path", e);
        let vrf = f.str("vrf", e).unwrap_or_else(|| "default".into());
        f.finish(e);
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
}
