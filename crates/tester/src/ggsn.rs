//! GG-1 against a GGSN on real interfaces: the SGSN emulator creates the contexts (at the
//! seed's 600/s or any rate, after a search for the highest rate if asked), then user traffic
//! runs both ways through them, as the seed's Landslide did, then the contexts are deleted.
//!
//! Tester port 0 is the Gn side (the SGSN's link), port 1 the Gi side (the internet's). Per
//! context, the uplink is a G-PDU from our user plane address to the GGSN with the context's
//! TEID, carrying a UDP packet from the subscriber's address to the Gi host; the downlink is a
//! UDP packet from the Gi host to the subscriber, which the GGSN must tunnel back to us. Both are
//! one stream over every context (TEID and address in lockstep), so the analyzer counts loss,
//! latency and misdelivery per direction. A frame size is the user's packet (the seed's sizes);
//! on Gn the tunnel adds 36 bytes.
//!
//! The rest is [`crate::external::run`]: resolution, priming, the throughput search per size.

use std::net::Ipv4Addr;
use std::sync::Arc;

use serde::Serialize;

use crate::external::ExternalRun;
use crate::report::Check;
use crate::scenario::SeedRow;
use crate::sgsn::{self, ExchangeRun, PdpContext, SearchStep, Sgsn, SgsnOpts};
use crate::stream::{Field, FieldKind, Gtpu, StreamSpec, Vary, L3};
use crate::streams_file::PortInfo;

/// The create rate search, when asked for.
#[derive(Clone, Debug)]
pub struct RateSearch {
    /// Contexts created (then deleted) at each rate tried.
    pub contexts: u32,
    pub start: f64,
    pub max: f64,
    pub resolution: f64,
}

pub struct GgsnRun {
    pub ext: ExternalRun,
    pub sgsn: SgsnOpts,
    /// Contexts held while the traffic runs.
    pub contexts: u32,
    /// Contexts created per second.
    pub create_rate: f64,
    pub search: Option<RateSearch>,
    /// Contexts the traffic goes through (evenly spread over those created); 0: all.
    pub traffic_contexts: u32,
    pub delete_rate: f64,
}

/// What the SGSN emulator did and found.
#[derive(Clone, Debug, Serialize)]
pub struct GtpReport {
    pub ggsn: String,
    pub sgsn_control: String,
    pub sgsn_user: String,
    pub apn: String,
    pub search: Vec<SearchStep>,
    /// The highest create rate with 99.999% accepted, when searched.
    pub best_rate: Option<f64>,
    pub create: ExchangeRun,
    pub contexts_held: usize,
    pub traffic_contexts: usize,
    pub delete: Option<ExchangeRun>,
    /// Echo Requests from the GGSN answered while the traffic ran.
    pub echoes_answered: u64,
    pub checks: Vec<Check>,
}

/// The seed's Table 1, per size: packets/s both ways through one SAMI.
pub fn seed_rows() -> Vec<SeedRow> {
    let row = |key: &str, fps: f64| SeedRow {
        key: key.into(),
        fps: Some(fps),
        note: format!(
            "{} bit/s",
            crate::report::thousands(fps * (key.parse::<f64>().unwrap_or(f64::NAN) + 40.0) * 8.0)
        ),
    };
    let mut v: Vec<SeedRow> = ["64", "128", "256", "384", "512", "768"]
        .iter()
        .map(|k| row(k, 1_300_000.0))
        .collect();
    v.push(row("1024", 1_100_000.0));
    v.push(row("1460", 840_000.0));
    v.push(SeedRow {
        key: "GGSN-IMIX".into(),
        fps: Some(1_300_000.0),
        note: "8,101,600,000 bit/s".into(),
    });
    v
}

/// The streams through `ctxs`: uplink (port 0 -> 1, tunnelled) and downlink (1 -> 0).
pub fn streams(
    ctxs: &[PdpContext],
    gn: &PortInfo,
    gi: &PortInfo,
    sgsn_user: Ipv4Addr,
    ggsn: Ipv4Addr,
) -> Result<Vec<StreamSpec>, String> {
    let gi_host = gi
        .host_v4
        .ok_or("the Gi port (the second --port) has no IPv4 neighbour in DUT.yaml")?;
    if ctxs.is_empty() {
        return Err("no context to send through".into());
    }
    let ues: Arc<[u128]> = ctxs.iter().map(|c| u32::from(c.ue) as u128).collect();
    let teids: Arc<[u128]> = ctxs.iter().map(|c| c.teid_data as u128).collect();
    let base = |name: &str, from: usize, to: usize, p: &PortInfo, src: u32, dst: u32| StreamSpec {
        name: name.into(),
        tx_port: from,
        rx_port: to,
        src_mac: p.host_mac,
        dst_mac: p.router_mac,
        vlan: None,
        l3: L3::V4 {
            src: src.to_be_bytes(),
            dst: dst.to_be_bytes(),
        },
        udp: Some((1024, 5000)),
        ttl: 64,
        dscp: 0,
        fields: vec![],
        weight: 1.0,
        min_size: 0,
        also_rx: Vec::new(),
        multicast_mac: false,
        tunnel: None,
    };
    let mut up = base("uplink", 0, 1, gn, u32::from(ctxs[0].ue), gi_host);
    up.tunnel = Some(Gtpu {
        src: sgsn_user.octets(),
        dst: ggsn.octets(),
        teid: ctxs[0].teid_data,
    });
    up.fields = vec![
        Field {
            kind: FieldKind::Teid,
            vary: Vary::List(teids),
            nested: false,
        },
        Field {
            kind: FieldKind::SrcIp,
            vary: Vary::List(ues.clone()),
            nested: false,
        },
    ];
    let mut down = base("downlink", 1, 0, gi, gi_host, u32::from(ctxs[0].ue));
    down.fields = vec![Field {
        kind: FieldKind::DstIp,
        vary: Vary::List(ues),
        nested: false,
    }];
    Ok(vec![up, down])
}

/// `n` of `ctxs`, evenly spread (all when `n` is 0 or at least their number).
pub fn sample(ctxs: &[PdpContext], n: u32) -> Vec<PdpContext> {
    let n = n as usize;
    if n == 0 || n >= ctxs.len() {
        return ctxs.to_vec();
    }
    (0..n).map(|i| ctxs[i * ctxs.len() / n]).collect()
}

/// GG-1: contexts, traffic per size, deletes. The report is external mode's with the GGSN's
/// section and the seed's figures beside each size.
pub fn run(
    x: GgsnRun,
    ro: &crate::run::RunOpts,
    obs: &mut dyn crate::procedures::Observer,
) -> Result<crate::run::ScenarioReport, String> {
    let infos = crate::external::port_infos(&x.ext.dut, &x.ext.maps);
    if infos.len() != 2 {
        return Err("GG-1: two ports, Gn then Gi (--port GN=DEV --port GI=DEV)".into());
    }
    let mut s = Sgsn::bind(x.sgsn.clone())?;
    let mut steps = Vec::new();
    let mut best_rate = None;
    if let Some(rs) = &x.search {
        let (best, st) = sgsn::search_rate(
            &mut s,
            rs.contexts,
            rs.start,
            rs.max,
            rs.resolution,
            |st| {
                obs.note(&format!(
                "create rate {:.0}/s: {} of {} accepted, {} refused, {} unanswered, {:.0} accepted/s, answer p99 {:.0} us: {}",
                st.rate,
                st.run.accepted,
                st.run.requests,
                st.run.refused.values().sum::<u64>(),
                st.run.unanswered,
                st.run.accepted_per_s,
                st.run.latency_p99_us,
                if st.pass { "pass" } else { "fail" }
            ))
            },
        )?;
        best_rate = best;
        steps = st;
    }
    let create = s.create(x.contexts, x.create_rate)?;
    obs.note(&format!(
        "created {} of {} contexts at {:.0}/s asked ({:.0} accepted/s), {} refused, {} unanswered",
        create.accepted,
        create.requests,
        x.create_rate,
        create.accepted_per_s,
        create.refused.values().sum::<u64>(),
        create.unanswered
    ));
    let traffic = sample(&s.contexts, x.traffic_contexts);
    let result = (|| {
        let st = streams(&traffic, &infos[0], &infos[1], x.sgsn.user, x.sgsn.ggsn)?;
        let mut ext = x.ext;
        ext.streams = st;
        let keep = s.keepalive();
        let r = crate::external::run(ext, ro, obs);
        let echoes = keep.echoes.load(std::sync::atomic::Ordering::Relaxed);
        drop(keep);
        r.map(|r| (r, echoes))
    })();
    let held = s.contexts.len();
    let delete = s.delete_all(x.delete_rate)?;
    let (mut r, echoes) = result?;
    let mut g = GtpReport {
        ggsn: x.sgsn.ggsn.to_string(),
        sgsn_control: x.sgsn.control.to_string(),
        sgsn_user: x.sgsn.user.to_string(),
        apn: x.sgsn.apn.clone(),
        search: steps,
        best_rate,
        create,
        contexts_held: held,
        traffic_contexts: traffic.len(),
        delete: Some(delete),
        echoes_answered: echoes,
        checks: Vec::new(),
    };
    g.checks = checks(&g, x.search.is_some(), x.create_rate);
    let seeds = seed_rows();
    for row in &mut r.rows {
        row.seed = seeds.iter().find(|s| s.key == row.key).cloned();
    }
    r.id = "GG-1".into();
    r.title = format!(
        "GGSN {} through {}: {} contexts created at {:.0}/s, user traffic both ways through {}",
        x.sgsn.ggsn,
        r.title,
        crate::report::thousands(held as f64),
        x.create_rate,
        crate::report::thousands(traffic.len() as f64),
    );
    r.seed_title = "Cisco 7613, one SAMI as GGSN: 384,000 contexts at 600/s, no-drop rate per size, both ways (Table 1)".into();
    r.seed_seconds = 600.0;
    r.notes.push(
        "Frame sizes are the user's packets (Gi); on Gn each frame carries 36 bytes more (outer \
         IPv4, UDP, GTP-U). The seed's bit/s count 40 bytes more than the size per packet."
            .into(),
    );
    r.gtp = Some(g);
    Ok(r)
}

fn checks(g: &GtpReport, searched: bool, rate: f64) -> Vec<Check> {
    let c = &g.create;
    let mut v = vec![
        Check {
            name: "contexts created".into(),
            expected: format!(
                "{} accepted of {} (99.999%)",
                crate::report::thousands((c.requests as f64 * sgsn::SUCCESS_TARGET).ceil()),
                crate::report::thousands(c.requests as f64),
            ),
            measured: format!(
                "{} accepted, {} refused, {} unanswered",
                c.accepted,
                c.refused.values().sum::<u64>(),
                c.unanswered
            ),
            pass: c.requests > 0 && c.success() >= sgsn::SUCCESS_TARGET,
        },
        Check {
            name: "create rate".into(),
            expected: format!("at least 95% of the {rate:.0}/s asked"),
            measured: format!("{:.0} accepted/s", c.accepted_per_s),
            pass: c.accepted_per_s >= 0.95 * rate,
        },
    ];
    if searched {
        v.push(Check {
            name: "create rate search".into(),
            expected: "a rate with 99.999% accepted".into(),
            measured: match g.best_rate {
                Some(r) => format!("{r:.0}/s"),
                None => "none: the first rate failed".into(),
            },
            pass: g.best_rate.is_some(),
        });
    }
    if let Some(d) = &g.delete {
        v.push(Check {
            name: "contexts deleted".into(),
            expected: format!("all {} accepted", d.requests),
            measured: format!(
                "{} accepted, {} refused, {} unanswered",
                d.accepted,
                d.refused.values().sum::<u64>(),
                d.unanswered
            ),
            pass: d.accepted == d.requests,
        });
    }
    v
}

/// The GGSN's section of the report: the searches, the creates and deletes, and each size
/// beside the seed, with the round trip (uplink plus downlink latency).
pub fn table(r: &crate::run::ScenarioReport, g: &GtpReport) -> String {
    use crate::report::thousands;
    let mut s = format!(
        "\nGGSN {} (GTP-C), SGSN emulated at {} (signalling) and {} (user plane), APN {}\n\n",
        g.ggsn, g.sgsn_control, g.sgsn_user, g.apn
    );
    if !g.search.is_empty() {
        s += "Create rate search (99.999% accepted at the first sending to pass: a request that needed a retransmission was not handled at the rate)\n\n";
        s += "| rate asked (/s) | requests | accepted | refused | unanswered | accepted/s | answer avg / p99 / max (us) | retransmitted | pass |\n";
        s += "|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
        for st in &g.search {
            s += &exchange_row(&format!("{:.0}", st.rate), &st.run, Some(st.pass));
        }
        s += &format!(
            "\nHighest create rate found: {}\n\n",
            g.best_rate
                .map_or("none".into(), |r| format!("{}/s", thousands(r)))
        );
    }
    s += "| exchange | requests | accepted | refused | unanswered | accepted/s | answer avg / p99 / max (us) |\n";
    s += "|---|---:|---:|---:|---:|---:|---:|\n";
    s += &exchange_row("create", &g.create, None);
    if let Some(d) = &g.delete {
        s += &exchange_row("delete", d, None);
    }
    s += &format!(
        "\nContexts held during the traffic: {}; the traffic went through {} of them; Echo Requests answered meanwhile: {}\n\n",
        thousands(g.contexts_held as f64),
        thousands(g.traffic_contexts as f64),
        g.echoes_answered
    );
    s += "Beside the seed (one SAMI; both directions; round trip = uplink + downlink average latency)\n\n";
    s += "| frame (B) | no-drop (pps) | seed (pps) | ratio | uplink / downlink avg latency (us) | round trip (us) | seed round trip (us) |\n";
    s += "|---:|---:|---:|---:|---:|---:|---:|\n";
    for row in &r.rows {
        let fps = row.fps();
        let seed = row.seed.as_ref().and_then(|x| x.fps);
        let lat = |name: &str| {
            row.search.best.as_ref().and_then(|b| {
                b.streams
                    .iter()
                    .find(|x| x.name == name)
                    .and_then(|x| x.latency.as_ref())
                    .map(|l| l.avg_ns / 1e3)
            })
        };
        let (u, d) = (lat("uplink"), lat("downlink"));
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | 580 to 640 |\n",
            row.key,
            thousands(fps),
            seed.map_or("-".into(), thousands),
            seed.map_or("-".into(), |x| format!("{:.4}", fps / x)),
            match (u, d) {
                (Some(u), Some(d)) => format!("{u:.1} / {d:.1}"),
                _ => "-".into(),
            },
            match (u, d) {
                (Some(u), Some(d)) => format!("{:.1}", u + d),
                _ => "-".into(),
            },
        );
    }
    s
}

fn exchange_row(label: &str, x: &ExchangeRun, pass: Option<bool>) -> String {
    use crate::report::thousands;
    let mut s = format!(
        "| {label} | {} | {} | {} | {} | {} | {:.0} / {:.0} / {:.0} |",
        thousands(x.requests as f64),
        thousands(x.accepted as f64),
        if x.refused.is_empty() {
            "0".to_string()
        } else {
            x.refused
                .iter()
                .map(|(c, n)| format!("{n} (cause {c})"))
                .collect::<Vec<_>>()
                .join(", ")
        },
        thousands(x.unanswered as f64),
        thousands(x.accepted_per_s),
        x.latency_avg_us,
        x.latency_p99_us,
        x.latency_max_us
    );
    if let Some(p) = pass {
        s += &format!(
            " {} | {} |",
            thousands(x.retransmissions as f64),
            if p { "pass" } else { "fail" }
        );
    }
    s + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(i: u32) -> PdpContext {
        PdpContext {
            index: i,
            ue: Ipv4Addr::from(0x0a00_0000 + i),
            teid_data: 0x100 * (i + 1),
            teid_control: i + 7,
        }
    }

    #[test]
    fn streams_go_through_every_context_and_sampling_spreads() {
        let info = |h: u32| PortInfo {
            name: "p".into(),
            router_mac: [2, 0, 0, 0, 0, 1],
            host_mac: [2, 0, 0, 0, 0, 2],
            host_v4: Some(h),
            host_v6: None,
        };
        let ctxs: Vec<_> = (0..10).map(ctx).collect();
        let st = streams(
            &ctxs,
            &info(0xc0a8_0002),
            &info(0xc612_0102),
            Ipv4Addr::new(192, 168, 0, 2),
            Ipv4Addr::new(192, 168, 0, 1),
        )
        .unwrap();
        assert_eq!(st.len(), 2);
        for s in &st {
            s.validate(&[64, 1460], 2).unwrap();
            assert_eq!(s.flows(), 10);
        }
        let mut g = crate::stream::GenStream::new(&st[0], &[64], 1);
        for i in 0..12u32 {
            let mut f = vec![0u8; g.templates[0].len as usize];
            g.build(0, &mut f, 1, 0, false);
            let h = packet::gtp::parse_header(&f[42..]).unwrap();
            assert_eq!(h.teid, ctx(i % 10).teid_data);
            assert_eq!(f[50 + 12..50 + 16], ctx(i % 10).ue.octets());
        }
        let s = sample(&ctxs, 3);
        assert_eq!(s.iter().map(|c| c.index).collect::<Vec<_>>(), vec![0, 3, 6]);
        assert_eq!(sample(&ctxs, 0).len(), 10);
        assert!(streams(
            &[],
            &info(1),
            &info(2),
            Ipv4Addr::LOCALHOST,
            Ipv4Addr::LOCALHOST
        )
        .is_err());
    }

    #[test]
    fn seed_rows_are_table_1() {
        let r = seed_rows();
        assert_eq!(r.len(), 9);
        assert_eq!(r[0].note, "1,081,600,000 bit/s");
        assert_eq!(r[7].note, "10,080,000,000 bit/s");
    }
}
