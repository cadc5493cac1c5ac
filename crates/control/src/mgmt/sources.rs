//! Route sources beside the config, and which one a prefix belongs to.
//!
//! Several sources may want the same prefix; the router forwards by the strongest:
//!
//! | origin      | what                                                           |
//! |-------------|----------------------------------------------------------------|
//! | `connected` | the interfaces' subnets and the router's own addresses         |
//! | `static`    | the rest of the config: static routes, route files, neighbours |
//! | `api`       | routes added through the API (`route add`)                     |
//! | `fpm`       | FRR's protocols, over FPM                                      |
//! | `vpn`       | L3VPN routes from far PEs (MP-BGP through GoBGP, `l3vpn`)      |
//!
//! The config's routes are built with the router (`Router::build`). The API's are the core's
//! own (`State::api_routes`). Other sources are adapters the core does not know by type: each
//! implements [`RouteSource`], is registered once ([`Core::add_route_source`]) and writes only
//! through a [`RouteWriter`], which refuses a prefix a stronger source holds and never removes
//! one. When a stronger route goes (an API route deleted), the sources below are asked to put
//! theirs back ([`RouteSource::restore`]); after a commit builds a new router each source puts
//! all of its routes into it ([`RouteSource::reinstall`]) before it goes live.

use std::any::Any;

use super::{ApiError, ApiResult, Core, PrefixKey, State};
use crate::config::{Config, Prefix};
use crate::router::{BuildError, PathDef, Router};

/// Where a route came from, strongest first (the derived order is the priority).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Origin {
    Connected,
    Static,
    Api,
    Fpm,
    Vpn,
}

/// A source of routes the core keeps beside the config (FPM today; any adapter that learns
/// routes elsewhere).
pub trait RouteSource: Any + Send {
    /// Its place in the priority order (below `Api`).
    fn origin(&self) -> Origin;
    /// Puts every route the source holds into `w`'s router: one a commit has just built.
    fn reinstall(&mut self, w: &mut RouteWriter<'_>);
    /// A stronger source let go of `p` in VRF index `vrf`: install the source's own route for
    /// it, if it holds one; whether it did.
    fn restore(&mut self, w: &mut RouteWriter<'_>, vrf: usize, p: Prefix) -> bool;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// Something the core keeps running for an adapter and stops at shutdown (an FPM server).
pub trait Adapter: Send {
    fn stop(&mut self);
}

/// Why a source's route was not installed.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// A stronger source holds the prefix.
    Held,
    /// The FIB refused it (full, or the VRF's limit).
    Table(String),
}

/// A route source's hands on the router: its own routes in, out and changed, never a prefix
/// a stronger source holds.
pub struct RouteWriter<'a> {
    router: &'a mut Router,
    api: &'a std::collections::BTreeMap<(usize, PrefixKey), crate::config::Target>,
    origin: Origin,
}

impl<'a> RouteWriter<'a> {
    /// A writer for a source of `origin` on `router`, where the API holds `api`.
    pub fn new(
        router: &'a mut Router,
        api: &'a std::collections::BTreeMap<(usize, PrefixKey), crate::config::Target>,
        origin: Origin,
    ) -> Self {
        Self {
            router,
            api,
            origin,
        }
    }

    /// Whether a source stronger than this writer's holds `p` in VRF `vrf`.
    pub fn held_above(&self, vrf: usize, p: Prefix) -> bool {
        self.router.is_configured(vrf, p)
            || (self.origin > Origin::Api && self.api.contains_key(&(vrf, PrefixKey::from(p))))
    }

    /// Installs (or replaces) `p` through next hop `nh`, unless a stronger source holds it.
    pub fn install(&mut self, vrf: usize, p: Prefix, nh: u32) -> Result<(), Refused> {
        if self.held_above(vrf, p) {
            return Err(Refused::Held);
        }
        self.router.install(vrf, p, nh).map_err(Refused::Table)
    }

    /// Removes the source's route for `p`; false if it had none there or a stronger source
    /// holds the prefix (whose route stays).
    pub fn remove(&mut self, vrf: usize, p: Prefix) -> bool {
        !self.held_above(vrf, p) && self.router.remove_route(vrf, p)
    }

    /// Starts the FIB misses of a coming change (see `Router::prefetch_route`).
    pub fn prefetch(&self, vrf: usize, p: Prefix) {
        self.router.prefetch_route(vrf, p)
    }

    pub fn cfg(&self) -> &Config {
        &self.router.cfg
    }

    /// The router, to read (its FIBs, next hops, neighbours).
    pub fn router(&self) -> &Router {
        self.router
    }

    /// The next hop through interface `ifx` to `gw` (or a connected destination).
    pub fn nh_via(&mut self, ifx: u32, gw: Option<std::net::IpAddr>) -> u32 {
        self.router.nh_via(ifx, gw)
    }

    /// The interface whose subnet holds `ip` in VRF `vrf`.
    pub fn connected_if(&self, vrf: u32, ip: std::net::IpAddr) -> Option<u32> {
        self.router.connected_if(vrf, ip)
    }

    /// The next hop of an L3VPN route to PE `pe` under VPN label `label` (see
    /// `Router::vpn_next_hop`).
    pub fn vpn_next_hop(&mut self, pe: std::net::IpAddr, label: u32) -> Option<u32> {
        self.router.vpn_next_hop(pe, label)
    }

    /// A next-hop object the source owns and may change in place (see `router::paths`).
    pub fn path_new(&mut self, d: PathDef) -> u32 {
        self.router.path_new(d)
    }

    pub fn path_set(&mut self, path: u32, d: PathDef) {
        self.router.path_set(path, d)
    }

    pub fn path_free(&mut self, path: u32) {
        self.router.path_free(path)
    }

    /// Makes what was written visible to the workers.
    pub fn publish(&mut self) -> Result<(), BuildError> {
        self.router.publish()
    }
}

/// Every registered source reinstalls its routes into `new` (a router a commit built, with the
/// API routes `api` it carries), strongest first (`sources` is kept in that order).
pub(crate) fn reinstall_all(
    sources: &mut [Box<dyn RouteSource>],
    new: &mut Router,
    api: &std::collections::BTreeMap<(usize, PrefixKey), crate::config::Target>,
) {
    for src in sources.iter_mut() {
        let origin = src.origin();
        src.reinstall(&mut RouteWriter::new(new, api, origin));
    }
}

/// The strongest source below `above` that holds `p` puts its route back.
pub(crate) fn restore_below(s: &mut State, above: Origin, vrf: usize, p: Prefix) {
    let State {
        sources,
        router,
        api_routes,
        ..
    } = s;
    for src in sources.iter_mut().filter(|x| x.origin() > above) {
        let origin = src.origin();
        if src.restore(&mut RouteWriter::new(router, api_routes, origin), vrf, p) {
            return;
        }
    }
}

impl Core {
    /// Registers a route source; its routes go in through [`Core::with_route_source`].
    pub fn add_route_source(&self, src: Box<dyn RouteSource>) {
        let mut s = self.lock("route-source.add");
        s.sources.push(src);
        s.sources.sort_by_key(|x| x.origin());
    }

    /// Runs `f` with the registered source of type `S` and a writer on the router, under the
    /// management lock (`what` names the hold in the lock statistics). None if no source of
    /// that type is registered.
    pub fn with_route_source<S: RouteSource, T>(
        &self,
        what: &'static str,
        f: impl FnOnce(&mut S, &mut RouteWriter<'_>) -> T,
    ) -> Option<T> {
        let mut s = self.lock(what);
        let State {
            sources,
            router,
            api_routes,
            ..
        } = &mut *s;
        let src = sources.iter_mut().find(|x| x.as_any().is::<S>())?;
        let origin = src.origin();
        let src = src.as_any_mut().downcast_mut::<S>()?;
        Some(f(src, &mut RouteWriter::new(router, api_routes, origin)))
    }

    /// Reads the registered source of type `S`.
    pub fn route_source<S: RouteSource, T>(&self, f: impl FnOnce(&S) -> T) -> ApiResult<T> {
        let s = self.lock("route-source.read");
        s.sources
            .iter()
            .find_map(|x| x.as_any().downcast_ref::<S>())
            .map(f)
            .ok_or_else(|| ApiError::not_found("no such route source is running"))
    }

    /// Keeps an adapter running until shutdown.
    pub fn keep_adapter(&self, a: Box<dyn Adapter>) {
        self.adapters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(a);
    }
}
