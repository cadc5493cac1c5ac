//! The GGSN as the management plane sees it: `show gtp contexts|statistics`, `show apn`,
//! `clear gtp context`.

use std::net::{IpAddr, Ipv6Addr};

use api::requests::GtpContextQuery;
use api::views::{ApnView, GtpContextView, GtpContextsView, GtpStatsView};

use super::{ApiError, ApiResult, Core};
use crate::gtp::engine::PdpContext;
use crate::metrics::{Exposition, Kind};

impl Core {
    fn ggsn(&self) -> Option<std::sync::Arc<crate::gtp::Ggsn>> {
        self.lock("show.gtp").router.gtp.clone()
    }

    pub fn gtp_contexts(&self, q: &GtpContextQuery) -> ApiResult<GtpContextsView> {
        let Some(g) = self.ggsn() else {
            return Ok(GtpContextsView::default());
        };
        let ip: Option<IpAddr> = match &q.ip {
            None => None,
            Some(s) => Some(
                s.parse()
                    .map_err(|_| ApiError::invalid(format!("ip `{s}`: an IPv4 or IPv6 address")))?,
            ),
        };
        let e = g.engine();
        let apn = match &q.apn {
            None => None,
            Some(a) => Some(
                (0..g.cfg.apns.len() as u16)
                    .find(|&i| e.apn_name(i).eq_ignore_ascii_case(a))
                    .ok_or_else(|| ApiError::not_found(format!("no APN named `{a}`")))?,
            ),
        };
        let want = |c: &PdpContext| {
            q.imsi.as_ref().is_none_or(|i| *i == c.imsi)
                && apn.is_none_or(|a| a == c.apn)
                && ip.is_none_or(|ip| match ip {
                    IpAddr::V4(v) => c.ue_v4 == Some(v),
                    IpAddr::V6(v) => c.ue_v6 == Some((u128::from(v) >> 64) as u64),
                })
        };
        let limit = match q.limit {
            None => 1000,
            Some(0) => usize::MAX,
            Some(n) => n,
        };
        let now = e.now_ms();
        let mut matched = 0u64;
        let mut contexts = Vec::new();
        for c in e.contexts().filter(|c| want(c)) {
            matched += 1;
            if contexts.len() >= limit {
                continue;
            }
            let [up_p, up_b, down_p, down_b] = e.counters(c);
            contexts.push(GtpContextView {
                imsi: c.imsi.clone(),
                nsapi: c.nsapi,
                msisdn: c.msisdn.clone(),
                apn: e.apn_name(c.apn).to_string(),
                ipv4: c.ue_v4.map(|a| a.to_string()),
                ipv6: c
                    .ue_v6
                    .map(|p| format!("{}/64", Ipv6Addr::from(u128::from(p) << 64))),
                teid: c.teid,
                sgsn_teid_data: c.sgsn_teid_u,
                sgsn_teid_control: c.sgsn_teid_c,
                sgsn_control: c.sgsn_c.to_string(),
                sgsn_data: c.sgsn_u.to_string(),
                charging_id: c.charging_id,
                age_s: now.saturating_sub(c.created_ms) / 1000,
                uplink_packets: up_p,
                uplink_bytes: up_b,
                downlink_packets: down_p,
                downlink_bytes: down_b,
            });
        }
        Ok(GtpContextsView {
            total: e.context_count() as u64,
            capacity: u64::from(g.table.capacity()),
            matched,
            contexts,
            bytes_per_context: (g.table.bytes() / g.table.capacity().max(1) as usize) as u64,
        })
    }

    pub fn gtp_stats(&self) -> ApiResult<GtpStatsView> {
        let Some(g) = self.ggsn() else {
            return Err(ApiError::not_found("no GGSN (ggsn is not configured)"));
        };
        let e = g.engine();
        let s = &e.stats;
        let by = |m: &std::collections::BTreeMap<u8, u64>| {
            m.iter().map(|(c, n)| (c.to_string(), *n)).collect()
        };
        Ok(GtpStatsView {
            address: g.cfg.address.to_string(),
            restart_counter: e.recovery,
            contexts: e.context_count() as u64,
            received: s.received,
            malformed: s.malformed,
            unknown_type: s.unknown_type,
            duplicates: s.duplicates,
            version_not_supported: s.version_not_supported,
            echo_requests: s.echo_requests,
            creates: by(&s.creates),
            updates: by(&s.updates),
            deletes: by(&s.deletes),
            error_indications_received: s.error_indications_received,
            error_indications_sent: s.error_indications_sent,
            error_indications_limited: s.error_indications_limited,
            peer_restarts: s.peer_restarts,
            contexts_torn_down_by_restart: s.contexts_torn_down_by_restart,
        })
    }

    pub fn apns(&self) -> Vec<ApnView> {
        let Some(g) = self.ggsn() else {
            return Vec::new();
        };
        let usage = g.engine().apn_usage();
        g.cfg
            .apns
            .iter()
            .zip(usage)
            .map(|(a, u)| ApnView {
                name: a.name.clone(),
                vrf: a.vrf.clone(),
                interface: a.interface(),
                ipv4_pool: a
                    .v4_pool
                    .map(|(p, l)| format!("{}/{l}", std::net::Ipv4Addr::from(p))),
                ipv4_in_use: u.v4.0,
                ipv4_size: u.v4.1,
                ipv6_pool: a.v6_pool.map(|(p, l)| format!("{}/{l}", Ipv6Addr::from(p))),
                ipv6_in_use: u.v6.0,
                ipv6_size: u.v6.1,
                dns: a.dns.iter().map(|d| d.to_string()).collect(),
            })
            .collect()
    }

    /// `clear gtp context TEID`: deletes the context locally (no message to its SGSN, as a
    /// GGSN's operator command does when the SGSN is gone).
    pub fn gtp_clear(&self, teid: u32) -> ApiResult<()> {
        let Some(g) = self.ggsn() else {
            return Err(ApiError::not_found("no GGSN (ggsn is not configured)"));
        };
        if g.engine().clear(teid) {
            Ok(())
        } else {
            Err(ApiError::not_found(format!(
                "no PDP context with TEID {teid:#x}"
            )))
        }
    }

    /// The GGSN's metrics: contexts, GTP-C responses by message and cause, Error Indications,
    /// path failures and SGSN restarts, and the user plane's packets and bytes by direction.
    pub(super) fn gtp_metrics(&self, s: &super::State, e: &mut Exposition) {
        let Some(g) = &s.router.gtp else {
            return;
        };
        let totals = g.table.totals();
        let eng = g.engine();
        let st = &eng.stats;
        e.family("linerate_gtp_contexts", Kind::Gauge, "PDP contexts held.");
        e.sample(&[], eng.context_count() as f64);
        e.family(
            "linerate_gtp_context_capacity",
            Kind::Gauge,
            "PDP contexts the table holds at most (limits.gtp-contexts).",
        );
        e.sample(&[], f64::from(g.table.capacity()));
        e.family(
            "linerate_gtp_responses_total",
            Kind::Counter,
            "GTP-C responses sent, by message and cause (128: accepted).",
        );
        for (m, by) in [
            ("create", &st.creates),
            ("update", &st.updates),
            ("delete", &st.deletes),
        ] {
            for (c, n) in by {
                e.sample(&[("message", m), ("cause", &c.to_string())], *n as f64);
            }
        }
        e.family(
            "linerate_gtp_received_total",
            Kind::Counter,
            "GTP messages the service read, and those it dropped by why.",
        );
        for (what, n) in [
            ("all", st.received),
            ("malformed", st.malformed),
            ("unknown_type", st.unknown_type),
            ("duplicate", st.duplicates),
            ("other_version", st.version_not_supported),
        ] {
            e.sample(&[("kind", what)], n as f64);
        }
        e.family(
            "linerate_gtp_error_indications_total",
            Kind::Counter,
            "Error Indications received and sent (and not sent: over the rate).",
        );
        for (dir, n) in [
            ("received", st.error_indications_received),
            ("sent", st.error_indications_sent),
            ("rate_limited", st.error_indications_limited),
        ] {
            e.sample(&[("direction", dir)], n as f64);
        }
        e.family(
            "linerate_gtp_path_events_total",
            Kind::Counter,
            "SGSN paths failed (no Echo Response) and SGSN restarts seen.",
        );
        e.sample(&[("event", "path_failure")], st.path_failures as f64);
        e.sample(&[("event", "peer_restart")], st.peer_restarts as f64);
        e.family(
            "linerate_gtp_packets_total",
            Kind::Counter,
            "Packets of PDP contexts the data plane carried, by direction (all contexts ever).",
        );
        e.sample(&[("direction", "uplink")], totals[0] as f64);
        e.sample(&[("direction", "downlink")], totals[2] as f64);
        e.family(
            "linerate_gtp_bytes_total",
            Kind::Counter,
            "Bytes (the UEs' packets) of PDP contexts the data plane carried, by direction.",
        );
        e.sample(&[("direction", "uplink")], totals[1] as f64);
        e.sample(&[("direction", "downlink")], totals[3] as f64);
    }
}
