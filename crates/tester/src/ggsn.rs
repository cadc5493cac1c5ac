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
//! GG-2 is the same with two GGSNs (two instances: their own Gn and Gi ports, SGSN emulators and
//! contexts) in one run, the second's frames larger (the seed: 1024 B through one SAMI, 1460 B
//! through the other): each alone, then both together, per size; "no degradation" is each
//! instance's rate together against alone.
//!
//! The rest is [`crate::external::run`]: resolution, priming, the throughput search per size.

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

/// One GGSN under test: its SGSN emulator and its two tester ports.
#[derive(Clone, Debug)]
pub struct Instance {
    /// "" for GG-1's one GGSN; "A", "B" for GG-2's.
    pub name: String,
    pub sgsn: SgsnOpts,
    /// Tester port indexes of its Gn and Gi links.
    pub gn: usize,
    pub gi: usize,
    /// Its frames are at least this size (GG-2: 1460 through B while a row is 1024); 0: the
    /// row's size.
    pub min_size: u16,
}

pub struct GgsnRun {
    pub ext: ExternalRun,
    pub instances: Vec<Instance>,
    /// GG-2: each instance is also searched alone, so together can be judged against it.
    pub alone: bool,
    /// Contexts held while the traffic runs (per instance).
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
    /// The instance ("" for GG-1's one GGSN).
    pub instance: String,
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

/// The streams through `ctxs` of instance `x`: uplink (Gn -> Gi, tunnelled) and downlink (Gi
/// -> Gn), named "uplink" and "downlink" after the instance's name.
pub fn streams(
    ctxs: &[PdpContext],
    x: &Instance,
    infos: &[PortInfo],
) -> Result<Vec<StreamSpec>, String> {
    let (gn, gi) = (&infos[x.gn], &infos[x.gi]);
    let (sgsn_user, ggsn) = (x.sgsn.user, x.sgsn.ggsn);
    let gi_host = gi
        .host_v4
        .ok_or_else(|| format!("the Gi port {} has no IPv4 neighbour in DUT.yaml", gi.name))?;
    if ctxs.is_empty() {
        return Err("no context to send through".into());
    }
    let ues: Arc<[u128]> = ctxs.iter().map(|c| u32::from(c.ue) as u128).collect();
    let teids: Arc<[u128]> = ctxs.iter().map(|c| c.teid_data as u128).collect();
    let prefix = if x.name.is_empty() {
        String::new()
    } else {
        format!("{} ", x.name)
    };
    let base = |name: &str, from: usize, to: usize, p: &PortInfo, src: u32, dst: u32| StreamSpec {
        name: format!("{prefix}{name}"),
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
        min_size: x.min_size,
        also_rx: Vec::new(),
        multicast_mac: false,
        tunnel: None,
        mpls: None,
    };
    let mut up = base("uplink", x.gn, x.gi, gn, u32::from(ctxs[0].ue), gi_host);
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
    let mut down = base("downlink", x.gi, x.gn, gi, gi_host, u32::from(ctxs[0].ue));
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

/// GG-1 (one instance) or GG-2 (two): contexts, traffic per size, deletes. The report is
/// external mode's with each GGSN's section and the seed's figures beside each size.
pub fn run(
    x: GgsnRun,
    ro: &crate::run::RunOpts,
    obs: &mut dyn crate::procedures::Observer,
) -> Result<crate::run::ScenarioReport, String> {
    let infos = crate::external::port_infos(&x.ext.dut, &x.ext.maps);
    if x.instances.is_empty() || infos.len() != 2 * x.instances.len() {
        return Err(
            "--gtp: two ports per GGSN, Gn then Gi (--port GN=DEV --port GI=DEV, twice for GG-2)"
                .into(),
        );
    }
    let mut sgsns = Vec::new();
    let mut reports = Vec::new();
    for inst in &x.instances {
        let tag = if inst.name.is_empty() {
            String::new()
        } else {
            format!("{}: ", inst.name)
        };
        let mut s = Sgsn::bind(inst.sgsn.clone())?;
        let mut steps = Vec::new();
        let mut best_rate = None;
        if let Some(rs) = &x.search {
            let (best, st) =
                sgsn::search_rate(&mut s, rs.contexts, rs.start, rs.max, rs.resolution, |st| {
                    obs.note(&format!(
                        "{tag}create rate {:.0}/s: {} of {} accepted ({} at the first sending), \
                         {} refused, {} unanswered, {:.0} accepted/s, answer p99 {:.0} us: {}",
                        st.rate,
                        st.run.accepted,
                        st.run.requests,
                        st.run.accepted_first_try,
                        st.run.refused.values().sum::<u64>(),
                        st.run.unanswered,
                        st.run.accepted_per_s,
                        st.run.latency_p99_us,
                        if st.pass { "pass" } else { "fail" }
                    ))
                })?;
            best_rate = best;
            steps = st;
        }
        let create = s.create(x.contexts, x.create_rate)?;
        obs.note(&format!(
            "{tag}created {} of {} contexts at {:.0}/s asked ({:.0} accepted/s), {} refused, {} \
             unanswered",
            create.accepted,
            create.requests,
            x.create_rate,
            create.accepted_per_s,
            create.refused.values().sum::<u64>(),
            create.unanswered
        ));
        reports.push(GtpReport {
            instance: inst.name.clone(),
            ggsn: inst.sgsn.ggsn.to_string(),
            sgsn_control: inst.sgsn.control.to_string(),
            sgsn_user: inst.sgsn.user.to_string(),
            apn: inst.sgsn.apn.clone(),
            search: steps,
            best_rate,
            create,
            contexts_held: s.contexts.len(),
            traffic_contexts: 0,
            delete: None,
            echoes_answered: 0,
            checks: Vec::new(),
        });
        sgsns.push(s);
    }
    let result = (|| {
        let mut st = Vec::new();
        let mut subsets = Vec::new();
        for ((inst, s), g) in x.instances.iter().zip(&sgsns).zip(&mut reports) {
            let traffic = sample(&s.contexts, x.traffic_contexts);
            g.traffic_contexts = traffic.len();
            let first = st.len();
            st.extend(streams(&traffic, inst, &infos)?);
            if x.alone {
                subsets.push((format!("{} alone", inst.name), (first..st.len()).collect()));
            }
        }
        if x.alone {
            subsets.push(("together".to_string(), (0..st.len()).collect()));
        }
        let mut ext = x.ext;
        ext.streams = st;
        ext.subsets = subsets;
        let keep: Vec<_> = sgsns.iter().map(|s| s.keepalive()).collect();
        let r = crate::external::run(ext, ro, obs);
        for (g, k) in reports.iter_mut().zip(&keep) {
            g.echoes_answered = k.echoes.load(std::sync::atomic::Ordering::Relaxed);
        }
        r
    })();
    for (s, g) in sgsns.iter_mut().zip(&mut reports) {
        g.contexts_held = s.contexts.len();
        g.delete = Some(s.delete_all(x.delete_rate)?);
        g.checks = checks(g, x.search.is_some(), x.create_rate);
    }
    let mut r = result?;
    let gg2 = x.instances.len() > 1;
    if gg2 {
        let c = gg2_checks(&r, &x.instances);
        if let Some(last) = reports.last_mut() {
            last.checks.extend(c);
        }
    } else {
        let seeds = seed_rows();
        for row in &mut r.rows {
            row.seed = seeds.iter().find(|s| s.key == row.key).cloned();
        }
    }
    let ggsns: Vec<String> = x
        .instances
        .iter()
        .map(|i| i.sgsn.ggsn.to_string())
        .collect();
    let g = &reports[0];
    r.id = if gg2 { "GG-2" } else { "GG-1" }.into();
    r.title = format!(
        "GGSN {} through {}: {} contexts{} created at {:.0}/s, user traffic both ways through {}",
        ggsns.join(" and "),
        r.title,
        crate::report::thousands(g.contexts_held as f64),
        if gg2 { " each" } else { "" },
        x.create_rate,
        crate::report::thousands(g.traffic_contexts as f64),
    );
    r.seed_title = if gg2 {
        "Cisco 7613, two SAMIs as GGSNs, 384,000 contexts each at 600/s: 1,070,000 pps at 1024 B through one, 830,000 pps at 1460 B through the other, side by side (Table 2)"
    } else {
        "Cisco 7613, one SAMI as GGSN: 384,000 contexts at 600/s, no-drop rate per size, both ways (Table 1)"
    }
    .into();
    r.seed_seconds = 600.0;
    r.notes.push(
        "Frame sizes are the user's packets (Gi); on Gn each frame carries 36 bytes more (outer \
         IPv4, UDP, GTP-U). The seed's bit/s count 40 bytes more than the size per packet."
            .into(),
    );
    if let Some(b) = x.instances.get(1).filter(|b| b.min_size > 0) {
        r.notes.push(format!(
            "GG-2: instance {}'s frames are {} bytes whatever the row's size.",
            b.name, b.min_size
        ));
    }
    r.gtp = reports;
    Ok(r)
}

/// An instance's frames/s in a row's passing trial: its streams' share of what was received.
fn instance_fps(row: &crate::run::Row, name: &str) -> Option<f64> {
    let b = row.search.best.as_ref()?;
    let prefix = format!("{name} ");
    let total: u64 = b.streams.iter().map(|s| s.rx).sum();
    let mine: u64 = b
        .streams
        .iter()
        .filter(|s| s.name.starts_with(&prefix))
        .map(|s| s.rx)
        .sum();
    (total > 0).then(|| b.rx_fps * mine as f64 / total as f64)
}

/// GG-2's "no degradation": per size, each instance's rate together at least 95% of alone.
fn gg2_checks(r: &crate::run::ScenarioReport, inst: &[Instance]) -> Vec<Check> {
    let mut v = Vec::new();
    let sizes: Vec<&str> = r
        .rows
        .iter()
        .filter_map(|row| row.key.strip_suffix(" together"))
        .collect();
    for size in sizes {
        let together = r
            .rows
            .iter()
            .find(|row| row.key == format!("{size} together"));
        for i in inst {
            let alone = r
                .rows
                .iter()
                .find(|row| row.key == format!("{size} {} alone", i.name))
                .map(|row| row.fps());
            let with = together.and_then(|t| instance_fps(t, &i.name));
            v.push(Check {
                name: format!("{size}: GGSN {} together against alone", i.name),
                expected: "at least 95% of its rate alone (no degradation)".into(),
                measured: match (alone, with) {
                    (Some(a), Some(w)) if a > 0.0 => format!(
                        "{} pps together, {} alone ({:.2})",
                        crate::report::thousands(w),
                        crate::report::thousands(a),
                        w / a
                    ),
                    _ => "no passing trial".into(),
                },
                pass: matches!((alone, with), (Some(a), Some(w)) if a > 0.0 && w >= 0.95 * a),
            });
        }
    }
    v
}

fn checks(g: &GtpReport, searched: bool, rate: f64) -> Vec<Check> {
    let mut v = checks_of(g, searched, rate);
    if !g.instance.is_empty() {
        for c in &mut v {
            c.name = format!("GGSN {}: {}", g.instance, c.name);
        }
    }
    v
}

fn checks_of(g: &GtpReport, searched: bool, rate: f64) -> Vec<Check> {
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

/// The GGSNs' section of the report: each one's searches, creates and deletes; then GG-1's
/// sizes beside the seed, with the round trip (uplink plus downlink latency), or GG-2's
/// instances together against alone.
pub fn table(r: &crate::run::ScenarioReport, gs: &[GtpReport]) -> String {
    let mut s = String::new();
    for g in gs {
        s += &instance_table(g);
    }
    if gs.len() > 1 {
        s += &gg2_table(r, gs);
    } else {
        s += &gg1_table(r);
    }
    s
}

fn instance_table(g: &GtpReport) -> String {
    use crate::report::thousands;
    let mut s = format!(
        "\nGGSN {} (GTP-C), SGSN emulated at {} (signalling) and {} (user plane), APN {}\n\n",
        if g.instance.is_empty() {
            g.ggsn.clone()
        } else {
            format!("{} at {}", g.instance, g.ggsn)
        },
        g.sgsn_control,
        g.sgsn_user,
        g.apn
    );
    if !g.search.is_empty() {
        s += "Create rate search (to pass: 99.999% accepted at the first sending, a request that needed a retransmission not having been handled at the rate; and accepted at 90% of the rate asked or more)\n\n";
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
    s
}

/// GG-1's sizes beside the seed's Table 1.
fn gg1_table(r: &crate::run::ScenarioReport) -> String {
    use crate::report::thousands;
    let mut s = String::new();
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

/// GG-2: each instance's rate alone and together, per size, beside the seed's Table 2.
fn gg2_table(r: &crate::run::ScenarioReport, gs: &[GtpReport]) -> String {
    use crate::report::thousands;
    let seed = [("A", 1_070_000.0), ("B", 830_000.0)];
    let mut s = "Side by side (each GGSN's packets/s both ways; seed: 1,070,000 pps at 1024 B through one SAMI and 830,000 at 1460 B through the other, together)\n\n".to_string();
    s += "| row | GGSN | alone (pps) | together (pps) | together / alone | seed together (pps) |\n";
    s += "|---|---|---:|---:|---:|---:|\n";
    for row in r.rows.iter().filter(|row| row.key.ends_with(" together")) {
        let size = row.key.trim_end_matches(" together");
        for g in gs {
            let alone = r
                .rows
                .iter()
                .find(|x| x.key == format!("{size} {} alone", g.instance))
                .map(|x| x.fps());
            let with = instance_fps(row, &g.instance);
            s += &format!(
                "| {size} | {} | {} | {} | {} | {} |\n",
                g.instance,
                alone.map_or("-".into(), thousands),
                with.map_or("-".into(), thousands),
                match (alone, with) {
                    (Some(a), Some(w)) if a > 0.0 => format!("{:.2}", w / a),
                    _ => "-".into(),
                },
                seed.iter()
                    .find(|(n, _)| *n == g.instance)
                    .map_or("-".into(), |(_, f)| thousands(*f))
            );
        }
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
    use std::net::Ipv4Addr;

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
        let infos = [info(0xc0a8_0002), info(0xc612_0102)];
        let inst = |name: &str, min_size| Instance {
            name: name.into(),
            sgsn: SgsnOpts::new(
                Ipv4Addr::new(192, 168, 0, 1),
                Ipv4Addr::new(192, 168, 0, 3),
                Ipv4Addr::new(192, 168, 0, 2),
                "internet",
            ),
            gn: 0,
            gi: 1,
            min_size,
        };
        let st = streams(&ctxs, &inst("", 0), &infos).unwrap();
        assert_eq!(st.len(), 2);
        assert_eq!(
            (st[0].name.as_str(), st[1].name.as_str()),
            ("uplink", "downlink")
        );
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
        assert!(streams(&[], &inst("", 0), &infos).is_err());
        // GG-2's second GGSN: named streams, its frames at least 1460 bytes.
        let b = streams(&ctxs, &inst("B", 1460), &infos).unwrap();
        assert_eq!(b[0].name, "B uplink");
        assert_eq!(b[1].name, "B downlink");
        let g = crate::stream::GenStream::new(&b[1], &[1024], 1);
        assert_eq!(g.templates[0].len as usize, 1460 - 4);
    }

    #[test]
    fn seed_rows_are_table_1() {
        let r = seed_rows();
        assert_eq!(r.len(), 9);
        assert_eq!(r[0].note, "1,081,600,000 bit/s");
        assert_eq!(r[7].note, "10,080,000,000 bit/s");
    }
}
