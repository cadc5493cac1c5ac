//! ME-6's VPN routes into the router, and the checks that every one arrived.
//!
//! Two ways in: [`install`] hands them to the router's L3VPN route source as GoBGP's watch
//! would (the same `VpnRoutes::apply`, a slice per hold of the management lock, then a
//! publish); [`crate::gobgp`] sends them the whole way, over BGP from a far GoBGP to the
//! router's own. Either way [`each_installed`] then reads every route back out of the VRFs'
//! tables: present, pushing its VPN label under the transport labels of the route to its PE.

use std::net::IpAddr;
use std::time::Instant;

use control::config::Prefix;
use control::l3vpn::{VpnRoute, VpnRoutes, VpnUpdate};
use control::mgmt::Core;
use control::router::Router;
use dataplane::tables::NextHop;

use crate::report::Check;
use crate::scenario::VpnPlan;

/// As the service applies an event.
const SLICE: usize = 8192;

/// Registers the VPN route source (from the config's `l3vpn`) and applies the plan's routes;
/// returns the checks and a note with the time it took.
pub fn install(core: &Core, plan: &VpnPlan) -> Result<(Vec<Check>, String), String> {
    let cfg = {
        let s = core.lock("tester.l3vpn");
        let l3 = s
            .router
            .cfg
            .l3vpn
            .clone()
            .ok_or("the config has no `l3vpn`")?;
        VpnRoutes::new(l3, &s.router)
    };
    core.add_route_source(Box::new(cfg));
    let updates: Vec<VpnUpdate> = plan.routes.iter().cloned().map(VpnUpdate::Add).collect();
    let t0 = Instant::now();
    for chunk in updates.chunks(SLICE) {
        core.with_route_source::<VpnRoutes, _>("tester.l3vpn", |src, w| {
            src.apply(w, chunk);
            w.publish().map_err(|e| e.0)
        })
        .ok_or("no VPN route source")??;
    }
    let secs = t0.elapsed().as_secs_f64();
    let want = plan.routes.len();
    let note = format!(
        "{want} VPN routes handed to the L3VPN route source directly (the tester speaks no BGP; \
         --through-gobgp sends them over BGP) in {secs:.2} s ({:.0} routes/s, published every \
         {SLICE}); every one read back from its VRF.",
        want as f64 / secs.max(1e-9)
    );
    Ok((imported(core, plan), note))
}

/// The route source's counts (every route installed, none held back) and each route read
/// back from the tables.
pub fn imported(core: &Core, plan: &VpnPlan) -> Vec<Check> {
    let st = core.vrf_view().status;
    let want = plan.routes.len();
    vec![
        Check {
            name: "VPN routes installed".into(),
            expected: format!("{want} (each in the one VRF importing it)"),
            measured: format!(
                "{} installed, {} unresolved, {} held, {} refused",
                st.installed, st.unresolved, st.held, st.refused
            ),
            pass: st.installed == want && st.unresolved + st.held + st.refused == 0,
        },
        Check {
            name: "VPN paths held".into(),
            expected: want.to_string(),
            measured: st.paths.to_string(),
            pass: st.paths == want,
        },
        each_installed(core, &plan.routes),
    ]
}

/// Every route, in every VRF that imports one of its targets: the VRF's table holds its
/// prefix, and the next hop pushes its VPN label under the transport labels (and through the
/// neighbour) of the default VRF's route to its PE.
pub fn each_installed(core: &Core, routes: &[VpnRoute]) -> Check {
    let s = core.lock("tester.l3vpn.each");
    let r = &s.router;
    let vrf = |name: &str| r.cfg.vrfs.iter().position(|v| v == name);
    let importers: Vec<(usize, &control::config::l3vpn::VpnVrfCfg)> = r
        .cfg
        .l3vpn
        .iter()
        .flat_map(|l| &l.vrfs)
        .filter_map(|v| vrf(&v.name).map(|i| (i, v)))
        .collect();
    let default = vrf("default").unwrap_or(0);
    let (mut checked, mut wrong) = (0usize, 0usize);
    let mut first = None;
    for rt in routes {
        let transport =
            longest(r, default, rt.next_hop).map(|nh| match &r.next_hops[nh as usize] {
                NextHop::Labelled { via, labels } => (*via, labels.labels().to_vec()),
                _ => (nh, Vec::new()),
            });
        for (v, vc) in importers
            .iter()
            .filter(|(_, vc)| vc.import.iter().any(|i| rt.rts.contains(i)))
        {
            checked += 1;
            let got = exact(r, *v, rt.prefix).map(|nh| &r.next_hops[nh as usize]);
            let ok = match (got, &transport) {
                (Some(NextHop::Labelled { via, labels }), Some((tvia, tl))) => {
                    via == tvia && labels.labels().split_last() == Some((&rt.label, tl.as_slice()))
                }
                _ => false,
            };
            if !ok {
                wrong += 1;
                first.get_or_insert_with(|| {
                    format!(
                        "first: {} in {} is {:?}, want label {} via the route to {}",
                        rt.prefix, vc.name, got, rt.label, rt.next_hop
                    )
                });
            }
        }
    }
    Check {
        name: "each VPN route in its VRFs".into(),
        expected: format!(
            "{} routes, each in the VRFs importing it, pushing its VPN label under the \
             transport labels to its PE",
            routes.len()
        ),
        measured: format!(
            "{checked} checked, {wrong} missing or wrong{}",
            first.map(|f| format!(" ({f})")).unwrap_or_default()
        ),
        pass: wrong == 0 && checked >= routes.len(),
    }
}

/// The next hop of exactly `p` in VRF `vrf`.
fn exact(r: &Router, vrf: usize, p: Prefix) -> Option<u32> {
    let f = r.fibs.get(vrf)?;
    match p {
        Prefix::V4(a, l) => f.v4.get(a, l),
        Prefix::V6(a, l) => f.v6.get(a, l),
    }
}

/// The next hop of the longest match for `a` in VRF `vrf`.
fn longest(r: &Router, vrf: usize, a: IpAddr) -> Option<u32> {
    let f = r.fibs.get(vrf)?;
    match a {
        IpAddr::V4(a) => {
            let a = u32::from(a);
            (0..=32u8).rev().find_map(|l| {
                f.v4.get(a & u32::MAX.checked_shl(32 - l as u32).unwrap_or(0), l)
            })
        }
        IpAddr::V6(a) => {
            let a = u128::from(a);
            (0..=128u8).rev().find_map(|l| {
                f.v6.get(a & u128::MAX.checked_shl(128 - l as u32).unwrap_or(0), l)
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::Embedded;
    use crate::scenario::{self, ScenarioOpts};

    /// ME-6 at a hundredth, its routes installed: every check passes; a route whose label the
    /// router does not push, or one it never got, fails the per-route check by name.
    #[test]
    fn each_route_is_read_back_and_a_wrong_or_missing_one_fails() {
        let s = scenario::build(
            "ME-6",
            &ScenarioOpts {
                scale: 0.01,
                ..Default::default()
            },
        )
        .unwrap();
        let dir = std::env::temp_dir().join(format!("linerate-l3vpn-test-{}", std::process::id()));
        let (router, src) = crate::run::build_router(&s, &dir).unwrap();
        let speeds: Vec<f64> = s.ports.iter().map(|p| p.1).collect();
        let (emb, _ports, _probe) = Embedded::start(router, src, 64, 8192, &speeds).unwrap();
        let core = emb.core.clone().unwrap();
        let (checks, note) = install(&core, &s.vpn).unwrap();
        for c in &checks {
            assert!(c.pass, "{}: {}", c.name, c.measured);
        }
        assert!(note.contains("2112 VPN routes"), "{note}");

        let mut wrong = s.vpn.routes[..10].to_vec();
        wrong[3].label += 1;
        let c = each_installed(&core, &wrong);
        assert!(!c.pass);
        assert!(
            c.measured.starts_with("10 checked, 1 missing or wrong"),
            "{}",
            c.measured
        );
        assert!(
            c.measured.contains(&wrong[3].prefix.to_string()),
            "{}",
            c.measured
        );

        let mut missing = s.vpn.routes[..1].to_vec();
        missing[0].prefix = Prefix::V4(0x0c00_0000, 24);
        let c = each_installed(&core, &missing);
        assert!(!c.pass);
        assert!(c.measured.contains("12.0.0.0/24"), "{}", c.measured);

        // A route no VRF imports is not checked anywhere: that fails too.
        let mut orphan = s.vpn.routes[..1].to_vec();
        orphan[0].rts = vec![control::config::l3vpn::VpnId::As2(65000, 9999)];
        assert!(!each_installed(&core, &orphan).pass);
        drop(emb);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
