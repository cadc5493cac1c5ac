//! IGMP/MLD snooping as the management plane sees it: `show igmp snooping groups`, `clear igmp
//! snooping`, and the metrics.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};

use api::requests::SnoopQuery;
use api::views::{SnoopGroupView, SnoopMemberView, SnoopRouterView, SnoopView};
use dataplane::l2::snoop::GroupKey;

use super::{ApiError, ApiResult, Core};
use crate::metrics::{Exposition, Kind};

/// A group key's address as people write it.
fn group_addr(k: &GroupKey) -> IpAddr {
    if k.v6 {
        IpAddr::V6(Ipv6Addr::from(k.group))
    } else {
        IpAddr::V4(Ipv4Addr::from(k.group as u32))
    }
}

/// The id of the bridge a query names (None: all bridges); not found if there is none.
fn bridge_id(st: &crate::bridges::BridgesState, q: &SnoopQuery) -> ApiResult<Option<u16>> {
    q.bridge
        .as_ref()
        .map(|n| {
            st.bridges
                .iter()
                .find(|b| &b.name == n)
                .map(|b| b.id)
                .ok_or_else(|| ApiError::not_found(format!("no bridge named `{n}`")))
        })
        .transpose()
}

impl Core {
    pub fn igmp_snooping(&self, q: &SnoopQuery) -> ApiResult<SnoopView> {
        let s = self.lock("show.igmp-snooping");
        let st = &s.router.bridges;
        let only = bridge_id(st, q)?;
        let Some(t) = &st.snoop else {
            return Ok(SnoopView::default());
        };
        let member = |id: u32| {
            st.member_names
                .get(&id)
                .cloned()
                .unwrap_or_else(|| format!("(member {id}, removed)"))
        };
        let bridge = |id: u16| st.bridge_name(id).unwrap_or("(removed)").to_string();
        let mut view = SnoopView {
            groups_total: t.groups() as u64,
            capacity: t.capacity() as u64,
            ..Default::default()
        };
        for g in t.view(only) {
            if g.key.group == 0 {
                for m in g.members {
                    view.routers.push(SnoopRouterView {
                        bridge: bridge(g.key.bridge),
                        interface: member(m.member),
                        configured: false,
                        expires_s: m.any_ms.map(|ms| ms as f64 / 1000.0),
                    });
                }
                continue;
            }
            let v6 = g.key.v6;
            view.groups.push(SnoopGroupView {
                bridge: bridge(g.key.bridge),
                group: group_addr(&g.key).to_string(),
                members: g
                    .members
                    .iter()
                    .map(|m| SnoopMemberView {
                        interface: member(m.member),
                        expires_s: m.any_ms.map(|ms| ms as f64 / 1000.0),
                        sources: m
                            .sources
                            .iter()
                            .map(|&(a, ms)| {
                                let addr = if v6 {
                                    IpAddr::V6(Ipv6Addr::from(a))
                                } else {
                                    IpAddr::V4(Ipv4Addr::from(a as u32))
                                };
                                (addr.to_string(), ms as f64 / 1000.0)
                            })
                            .collect(),
                    })
                    .collect(),
                packets: g.packets,
                bytes: g.bytes,
                replicas: g.replicas,
            });
        }
        for (b, c) in st.bridges.iter().zip(&s.router.cfg.bridges) {
            let Some(sc) = &c.snoop else { continue };
            if only.is_some_and(|id| id != b.id) {
                continue;
            }
            for (name, _) in &sc.mrouters {
                view.routers.push(SnoopRouterView {
                    bridge: b.name.clone(),
                    interface: name.clone(),
                    configured: true,
                    expires_s: None,
                });
            }
        }
        let c = &t.counters;
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        view.reports = r(&c.reports);
        view.leaves = r(&c.leaves);
        view.queries = r(&c.queries);
        view.queries_sent = r(&c.queries_sent);
        view.pim_hellos = r(&c.pim_hellos);
        view.malformed = r(&c.malformed);
        view.joined = r(&c.joined);
        view.ended = r(&c.ended);
        view.refused_limit = r(&c.limit);
        view.refused_table_full = r(&c.table_full);
        Ok(view)
    }

    /// Ends every snooped membership of one bridge (all when None); returns how many.
    pub fn igmp_snooping_clear(&self, q: &SnoopQuery) -> ApiResult<u64> {
        let s = self.lock("clear.igmp-snooping");
        let st = &s.router.bridges;
        let only = bridge_id(st, q)?;
        Ok(st.snoop.as_ref().map_or(0, |t| t.clear(only) as u64))
    }

    /// Snooping's metrics: groups, messages read, memberships, refusals, and per bridge the
    /// multicast frames switched.
    pub(super) fn snoop_metrics(&self, s: &super::State, e: &mut Exposition) {
        let st = &s.router.bridges;
        let Some(t) = &st.snoop else {
            return;
        };
        e.family(
            "linerate_igmp_snooping_groups",
            Kind::Gauge,
            "Groups with members in the snooping table (all bridges)",
        );
        e.sample(&[], t.groups() as f64);
        let c = &t.counters;
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        e.family(
            "linerate_igmp_snooping_events_total",
            Kind::Counter,
            "IGMP/MLD snooping: messages read by kind, memberships made and ended, joins refused",
        );
        for (what, v) in [
            ("report", &c.reports),
            ("leave", &c.leaves),
            ("query", &c.queries),
            ("query_sent", &c.queries_sent),
            ("pim_hello", &c.pim_hellos),
            ("malformed", &c.malformed),
            ("joined", &c.joined),
            ("ended", &c.ended),
            ("refused_limit", &c.limit),
            ("refused_table_full", &c.table_full),
        ] {
            e.sample(&[("event", what)], r(v));
        }
        e.family(
            "linerate_bridge_multicast_frames_total",
            Kind::Counter,
            "Snooped multicast per bridge domain: frames to a group's members, the copies sent, frames to groups nobody joined",
        );
        for b in st.bridges.iter().filter(|b| b.snoop.is_some()) {
            let c = &b.counters;
            for (what, v) in [
                ("forwarded", &c.mcast_forwarded),
                ("copies", &c.mcast_copies),
                ("unregistered", &c.mcast_unregistered),
            ] {
                e.sample(&[("bridge", &b.name), ("kind", what)], r(v));
            }
        }
    }
}
