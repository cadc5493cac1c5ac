//! `show vrf` and `show bgp vpn`: the VPN route source's state, read under the management lock.

use api::views::{BgpVpnView, VrfView};

use super::Core;
use crate::l3vpn::VpnRoutes;

impl Core {
    /// Each VPN VRF and the VPN speaker's state (not running: no `l3vpn`).
    pub fn vrf_view(&self) -> VrfView {
        let s = self.lock("show.vrf");
        match s
            .sources
            .iter()
            .find_map(|x| x.as_any().downcast_ref::<VpnRoutes>())
        {
            Some(v) => VrfView {
                running: true,
                status: v.status.clone(),
                vrfs: v.vrf_views(),
            },
            None => VrfView::default(),
        }
    }

    /// The VPN routes from peers, at most `limit` (None: 1,000; 0: all).
    pub fn bgp_vpn_view(&self, limit: Option<usize>) -> BgpVpnView {
        let limit = match limit {
            None => 1000,
            Some(0) => usize::MAX,
            Some(n) => n,
        };
        let s = self.lock("show.bgp-vpn");
        match s
            .sources
            .iter()
            .find_map(|x| x.as_any().downcast_ref::<VpnRoutes>())
        {
            Some(v) => BgpVpnView {
                running: true,
                total: v.status.paths,
                routes: v.route_views(limit),
            },
            None => BgpVpnView::default(),
        }
    }
}
