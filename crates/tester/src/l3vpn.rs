//! ME-6's VPN routes: handed to the router's L3VPN route source as GoBGP's watch would hand
//! them (the same `VpnRoutes::apply`, a slice per hold of the management lock, then a publish),
//! and each one checked installed in every VRF that imports it. The gRPC side is the system
//! test's (`tests/system/test_l3vpn.py`, against FRR's bgpd through GoBGP).

use std::time::Instant;

use control::l3vpn::{VpnRoutes, VpnUpdate};
use control::mgmt::Core;

use crate::report::Check;

/// As the service applies an event.
const SLICE: usize = 8192;

/// Registers the VPN route source (from the config's `l3vpn`) and applies `updates`; returns
/// the checks (all installed, none unresolved or refused) and a note with the time it took.
pub fn install(core: &Core, updates: &[VpnUpdate]) -> Result<(Vec<Check>, String), String> {
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
    let t0 = Instant::now();
    for chunk in updates.chunks(SLICE) {
        core.with_route_source::<VpnRoutes, _>("tester.l3vpn", |src, w| {
            src.apply(w, chunk);
            w.publish().map_err(|e| e.0)
        })
        .ok_or("no VPN route source")??;
    }
    let secs = t0.elapsed().as_secs_f64();
    let st = core.vrf_view().status;
    let want = updates
        .iter()
        .filter(|u| matches!(u, VpnUpdate::Add(_)))
        .count();
    let checks = vec![
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
    ];
    let note = format!(
        "{want} VPN routes applied through the L3VPN route source in {secs:.2} s ({:.0} \
         routes/s, published every {SLICE}); every one checked installed.",
        want as f64 / secs.max(1e-9)
    );
    Ok((checks, note))
}
