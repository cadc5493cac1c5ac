//! Multicast routing as the management plane sees it: `show ip mroute`, `show ipv6 mroute`,
//! and the metrics.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::Ordering;

use api::requests::MrouteQuery;
use api::views::{MrouteEntryView, MrouteView};

use super::{ApiError, ApiResult, Core};
use crate::metrics::{Exposition, Kind};

fn addr(v6: bool, a: u128) -> String {
    if v6 {
        Ipv6Addr::from(a).to_string()
    } else {
        Ipv4Addr::from(a as u32).to_string()
    }
}

impl Core {
    pub fn mroutes(&self, q: &MrouteQuery) -> ApiResult<MrouteView> {
        let v6 = match q.family.as_deref() {
            None | Some("ipv4") => false,
            Some("ipv6") => true,
            Some(f) => return Err(ApiError::invalid(format!("family `{f}`: ipv4 or ipv6"))),
        };
        let kernel_copies = self
            .punt
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |p| {
                p.status
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .kernel_mcast
            });
        let s = self.lock("show.mroute");
        let r = &s.router;
        let vrf_only = match &q.vrf {
            None => None,
            Some(n) => Some(
                r.cfg
                    .vrfs
                    .iter()
                    .position(|v| v == n)
                    .ok_or_else(|| ApiError::not_found(format!("no VRF named `{n}`")))?
                    as u32,
            ),
        };
        let m = &r.mcast;
        let mut view = MrouteView {
            vrfs: r
                .cfg
                .vrfs
                .iter()
                .zip(&m.vrfs)
                .filter(|(_, on)| **on)
                .map(|(n, _)| n.clone())
                .collect(),
            kernel_copies_dropped: kernel_copies,
            ..Default::default()
        };
        {
            let st = m.store.lock().unwrap_or_else(|e| e.into_inner());
            let c = &st.counters;
            view.mirror_running = c.running;
            view.kernel_routes = st.kernel_routes() as u64;
            view.mirrored_adds = c.added;
            view.mirrored_deletes = c.deleted;
            view.dumps = c.dumps;
            view.refused = c.refused;
        }
        let Some(fib) = &m.fib else {
            return Ok(view);
        };
        view.total = fib.len() as u64;
        view.capacity = fib.capacity() as u64;
        view.table_full = fib.counters.table_full.load(Ordering::Relaxed);
        view.compactions = fib.counters.compactions.load(Ordering::Relaxed);
        let name = |ifx: u32| {
            r.ifs
                .get(ifx as usize)
                .map_or_else(|| "-".to_string(), |i| i.name.clone())
        };
        for e in fib.view() {
            if e.key.v6 != v6 || vrf_only.is_some_and(|v| v != e.key.vrf) {
                continue;
            }
            view.routes.push(MrouteEntryView {
                vrf: r.cfg.vrfs[e.key.vrf as usize].clone(),
                source: if e.key.source == 0 {
                    "*".into()
                } else {
                    addr(v6, e.key.source)
                },
                group: addr(v6, e.key.group),
                iif: name(e.iif),
                oifs: e.oifs.iter().map(|o| name(o.ifx)).collect(),
                origin: match e.origin {
                    dataplane::mfib::Origin::Static => "static",
                    dataplane::mfib::Origin::Kernel => "pim",
                    dataplane::mfib::Origin::KernelRegistering => "pim (registering)",
                }
                .into(),
                packets: e.packets,
                bytes: e.bytes,
                replicas: e.replicas,
                wrong_if: e.wrong_if,
            });
        }
        Ok(view)
    }

    /// The multicast FIB's metrics: routes, and per route packets and copies (up to the first
    /// 1,000 routes, so 20,000 (S,G) do not make 40,000 series).
    pub(super) fn mroute_metrics(&self, s: &super::State, e: &mut Exposition) {
        let Some(fib) = &s.router.mcast.fib else {
            return;
        };
        e.family(
            "linerate_mroutes",
            Kind::Gauge,
            "Routes in the multicast FIB (both families, all VRFs)",
        );
        e.sample(&[], fib.len() as f64);
        let view = fib.view();
        for (name, help, pick) in [
            (
                "linerate_mroute_packets_total",
                "Packets routed by one multicast route (the first 1,000 routes)",
                (|v: &dataplane::mfib::MrouteView| v.packets)
                    as fn(&dataplane::mfib::MrouteView) -> u64,
            ),
            (
                "linerate_mroute_replicas_total",
                "Copies sent by one multicast route (the first 1,000 routes)",
                |v| v.replicas,
            ),
        ] {
            e.family(name, Kind::Counter, help);
            for v in view.iter().take(1000) {
                let src = if v.key.source == 0 {
                    "*".to_string()
                } else {
                    addr(v.key.v6, v.key.source)
                };
                let vrf = &s.router.cfg.vrfs[v.key.vrf as usize];
                let g = addr(v.key.v6, v.key.group);
                e.sample(
                    &[("vrf", vrf), ("source", &src), ("group", &g)],
                    pick(v) as f64,
                );
            }
        }
    }
}
