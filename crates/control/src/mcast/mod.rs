//! Multicast routing's control side: which VRFs route multicast, the multicast FIB the workers
//! read (`dataplane::mfib`), and where its routes come from: the config's static routes, and the
//! kernel's multicast cache in the TAP twins' namespace, which FRR's pimd programs and
//! [`mirror`] copies.
//!
//! The FIB's interface indexes are those of one build of the tables, so each build makes its
//! own FIB and fills it, when it goes live, from the [`Store`]: the kernel's routes by device
//! name, kept across commits. The mirror writes each change into the store and into the live
//! FIB, under the store's lock, so a commit never loses a change made while it was prepared.
//!
//! Reads: the config (`multicast-routing`, `limits.mroutes`), the interfaces' host names.
//! Sets: `Tables::mfib`, `mcast_vrfs`, `mcast_nh` (with the router's next hops).

pub mod mfc;
pub mod mirror;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use dataplane::mfib::{Mfib, MrouteKey, Oif, Origin};
use dataplane::tables::NO_IF;

use crate::config::Config;

/// A kernel route's key: the kernel's default table is Linerate's default VRF (pimd in VRFs
/// needs kernel VRF devices, which the twins do not have: not mirrored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KernelKey {
    pub v6: bool,
    pub source: u128,
    pub group: u128,
}

/// A kernel route by device names (a device that is not a twin, pimd's `pimreg` say, keeps
/// its name and resolves to no interface).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelRoute {
    pub iif: String,
    pub oifs: Vec<(String, u8)>,
}

/// What the mirror did, for `show ip mroute` and the metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MirrorCounters {
    pub added: u64,
    pub deleted: u64,
    /// Full re-reads (at start, and after the kernel dropped notifications).
    pub dumps: u64,
    pub malformed: u64,
    /// Routes the FIB refused, full.
    pub refused: u64,
    /// Whether the mirror runs (a daemon with TAP twins).
    pub running: bool,
}

/// The FIB the workers use now, and how to resolve device names for it.
struct Live {
    fib: Arc<Mfib>,
    /// Host name (the twin's device name) -> interface index, for routing interfaces only.
    by_host: HashMap<String, u32>,
    /// Keys the config's static routes hold (the kernel's do not replace them).
    statics: HashSet<MrouteKey>,
}

/// The kernel's routes and the live FIB; shared by the mirror and every build of the router.
#[derive(Default)]
pub struct Store {
    kernel: BTreeMap<KernelKey, KernelRoute>,
    live: Option<Live>,
    pub counters: MirrorCounters,
}

pub type SharedStore = Arc<Mutex<Store>>;

impl Store {
    /// Applies one kernel change: to the kernel's routes, and to the live FIB.
    pub fn kernel_set(&mut self, k: KernelKey, r: KernelRoute) {
        self.counters.added += 1;
        if let Some(live) = &self.live {
            if !install(live, k, &r) {
                self.counters.refused += 1;
            }
        }
        self.kernel.insert(k, r);
    }

    pub fn kernel_delete(&mut self, k: KernelKey) {
        if self.kernel.remove(&k).is_none() {
            return;
        }
        self.counters.deleted += 1;
        if let Some(live) = &self.live {
            let key = fib_key(k);
            if !live.statics.contains(&key) {
                live.fib.remove(key);
            }
        }
    }

    /// Replaces the kernel's routes with a dump's.
    pub fn kernel_replace(&mut self, all: BTreeMap<KernelKey, KernelRoute>) {
        self.counters.dumps += 1;
        let gone: Vec<KernelKey> = self
            .kernel
            .keys()
            .filter(|k| !all.contains_key(k))
            .copied()
            .collect();
        for k in gone {
            self.kernel_delete(k);
        }
        for (k, r) in all {
            if self.kernel.get(&k) != Some(&r) {
                self.kernel_set(k, r);
            }
        }
    }

    pub fn kernel_routes(&self) -> usize {
        self.kernel.len()
    }
}

fn fib_key(k: KernelKey) -> MrouteKey {
    MrouteKey {
        vrf: 0,
        v6: k.v6,
        source: k.source,
        group: k.group,
    }
}

/// Installs a kernel route into the live FIB (unless a static route holds its key); false if
/// the FIB is full.
fn install(live: &Live, k: KernelKey, r: &KernelRoute) -> bool {
    let key = fib_key(k);
    if live.statics.contains(&key) {
        return true;
    }
    let iif = live.by_host.get(&r.iif).copied().unwrap_or(NO_IF);
    let oifs: Vec<Oif> = r
        .oifs
        .iter()
        .filter_map(|(name, ttl)| {
            live.by_host.get(name).map(|&ifx| Oif {
                ifx,
                ttl: (*ttl).max(1),
            })
        })
        .collect();
    // An output the kernel has and the router does not: pimd's register device.
    let origin = if oifs.len() < r.oifs.len() {
        Origin::KernelRegistering
    } else {
        Origin::Kernel
    };
    live.fib.set(key, iif, oifs, origin).is_ok()
}

/// One build's multicast state (see the module's doc).
pub struct McastState {
    pub fib: Option<Arc<Mfib>>,
    /// Per VRF: routes multicast.
    pub vrfs: Vec<bool>,
    /// Per interface: multicast next hops (IPv4, IPv6), filled by the router; 0: none.
    pub nh: Vec<[u32; 2]>,
    pub store: SharedStore,
    /// The config's static routes, resolved to this build's interfaces.
    statics: Vec<(MrouteKey, u32, Vec<Oif>)>,
}

fn bits(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v) => u128::from(u32::from(v)),
        IpAddr::V6(v) => u128::from(v),
    }
}

impl McastState {
    /// The state of a build of `cfg`; `prev` hands over the kernel's routes. The FIB's routes
    /// are reclaimed by `epoch`, the domain the workers announce their quiescent points in.
    pub fn build(
        cfg: &Config,
        prev: Option<&McastState>,
        epoch: &Arc<fib::EpochDomain>,
    ) -> McastState {
        let store = prev.map_or_else(Default::default, |p| p.store.clone());
        let mut vrfs = vec![false; cfg.vrfs.len()];
        let Some(m) = &cfg.mcast_routing else {
            return McastState {
                fib: None,
                vrfs,
                nh: Vec::new(),
                store,
                statics: Vec::new(),
            };
        };
        for (v, _) in &m.vrfs {
            if let Some(i) = cfg.vrfs.iter().position(|x| x == v) {
                vrfs[i] = true;
            }
        }
        let ifx = |name: &str| {
            cfg.interfaces
                .iter()
                .position(|i| i.name == name)
                .expect("checked") as u32
        };
        let statics = m
            .routes
            .iter()
            .map(|r| {
                let key = MrouteKey {
                    vrf: cfg.vrfs.iter().position(|v| *v == r.vrf).expect("checked") as u32,
                    v6: r.group.is_ipv6(),
                    source: r.source.map_or(0, bits),
                    group: bits(r.group),
                };
                let oifs = r
                    .oifs
                    .iter()
                    .map(|(n, _)| Oif {
                        ifx: ifx(n),
                        ttl: 1,
                    })
                    .collect();
                (key, ifx(&r.iif), oifs)
            })
            .collect();
        McastState {
            fib: Some(Arc::new(Mfib::new(cfg.max_mroutes, epoch.clone()))),
            vrfs,
            nh: Vec::new(),
            store,
            statics,
        }
    }

    /// Whether interface `i` of `cfg` routes multicast (in a routing VRF, not a bridge member).
    pub fn routes_on(&self, cfg: &Config, i: usize, bridged: bool) -> bool {
        // Interfaces past the config's are tunnels' (an APN's): they route no multicast.
        let Some(ic) = cfg.interfaces.get(i) else {
            return false;
        };
        !bridged
            && cfg
                .vrfs
                .iter()
                .position(|v| *v == ic.vrf)
                .is_some_and(|v| self.vrfs[v])
    }

    /// Makes this build's FIB the live one: its static routes, then the kernel's routes
    /// resolved to its interfaces. Called with the tables that carry it about to go live.
    pub fn go_live(&self, cfg: &Config) {
        let mut st = self.store.lock().unwrap_or_else(|e| e.into_inner());
        let Some(fib) = &self.fib else {
            st.live = None;
            return;
        };
        let mut refused = 0;
        for (key, iif, oifs) in &self.statics {
            if fib.set(*key, *iif, oifs.clone(), Origin::Static).is_err() {
                refused += 1;
            }
        }
        let default_routes = self.vrfs.first().copied().unwrap_or(false);
        let by_host: HashMap<String, u32> = cfg
            .interfaces
            .iter()
            .enumerate()
            .filter(|(i, _)| self.nh.get(*i).is_some_and(|n| n[0] != 0))
            .map(|(i, ic)| (ic.host_name.clone(), i as u32))
            .collect();
        let live = Live {
            fib: fib.clone(),
            by_host,
            statics: self.statics.iter().map(|s| s.0).collect(),
        };
        if default_routes {
            for (k, r) in &st.kernel {
                if !install(&live, *k, r) {
                    refused += 1;
                }
            }
        }
        st.counters.refused += refused;
        // Kernel routes are the default VRF's: with it not routing, none are installed.
        st.live = default_routes.then_some(live);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const CFG: &str = "\
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
  - { name: p2, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: 02:00:00:00:00:01, ipv4: [10.0.0.1/24] }
  - { name: p1, port: p1, mac: 02:00:00:00:00:02, ipv4: [10.1.0.1/24] }
  - { name: p2, port: p2, mac: 02:00:00:00:00:03, ipv4: [10.2.0.1/24] }
multicast-routing:
  static:
    - { source: 10.0.0.9, group: 232.9.9.9, iif: p0, oifs: [p2] }
";

    fn router(text: &str, prev: Option<&crate::router::Router>) -> crate::router::Router {
        let cfg = crate::config::parse(text, Path::new("m.yaml")).unwrap();
        match prev {
            None => crate::router::Router::build(cfg).unwrap(),
            Some(p) => {
                let mut r = crate::router::Router::build_unpublished_from(
                    cfg,
                    &p.port_slots,
                    p.epoch.clone(),
                    p.shared.clone(),
                    None,
                    None,
                    Some(&p.mcast),
                )
                .unwrap();
                r.activate();
                r
            }
        }
    }

    fn k(source: u128, group: u128) -> KernelKey {
        KernelKey {
            v6: false,
            source,
            group,
        }
    }

    fn kr(iif: &str, oifs: &[&str]) -> KernelRoute {
        KernelRoute {
            iif: iif.into(),
            oifs: oifs.iter().map(|o| (o.to_string(), 1)).collect(),
        }
    }

    fn route(
        r: &crate::router::Router,
        source: u128,
        group: u128,
    ) -> Option<(u32, Vec<u32>, Origin)> {
        let key = MrouteKey {
            vrf: 0,
            v6: false,
            source,
            group,
        };
        r.mcast.fib.as_ref().unwrap().with(key, |m| {
            m.map(|m| (m.iif, m.oifs.iter().map(|o| o.ifx).collect(), m.origin))
        })
    }

    #[test]
    fn kernel_routes_reach_the_live_fib_by_name_and_survive_a_renumbering_commit() {
        let r = router(CFG, None);
        let (s, g) = (0x0a00_0002u128, 0xe801_0101u128);
        {
            let mut st = r.mcast.store.lock().unwrap();
            st.kernel_set(k(s, g), kr("lr-p0", &["lr-p1", "lr-p2"]));
            // pimd's register device is not the router's: every packet goes up.
            st.kernel_set(k(s, g + 1), kr("lr-p0", &["lr-p1", "pimreg"]));
            // A static route's key is the config's, whatever the kernel says.
            st.kernel_set(k(0x0a00_0009, 0xe809_0909), kr("lr-p1", &["lr-p0"]));
        }
        assert_eq!(route(&r, s, g), Some((0, vec![1, 2], Origin::Kernel)));
        assert_eq!(
            route(&r, s, g + 1),
            Some((0, vec![1], Origin::KernelRegistering))
        );
        assert_eq!(
            route(&r, 0x0a00_0009, 0xe809_0909),
            Some((0, vec![2], Origin::Static))
        );
        // A commit that removes p1 renumbers p2: the new FIB resolves the names again.
        let text = CFG
            .replace(
                "  - { name: p1, port: p1, mac: 02:00:00:00:00:02, ipv4: [10.1.0.1/24] }\n",
                "",
            )
            .replace("  - { name: p1, driver: mem }\n", "");
        let r2 = router(&text, Some(&r));
        // p2 is interface 1 now; lr-p1 is no longer the router's, so until pimd drops it the
        // route sends its packets up too, as for an output only the kernel has.
        assert_eq!(
            route(&r2, s, g),
            Some((0, vec![1], Origin::KernelRegistering))
        );
        // A dump that no longer has a route deletes it; one that changed replaces it.
        r2.mcast.store.lock().unwrap().kernel_replace(
            [(k(s, g + 1), kr("lr-p0", &["lr-p2"]))]
                .into_iter()
                .collect(),
        );
        assert_eq!(route(&r2, s, g), None);
        assert_eq!(route(&r2, s, g + 1), Some((0, vec![1], Origin::Kernel)));
        assert_eq!(r2.mcast.store.lock().unwrap().kernel_routes(), 1);
    }
}
