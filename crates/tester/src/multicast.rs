//! The multicast scenarios' procedure (ME-11, ME-12): emulated hosts on the receiving ports join
//! their groups (IGMPv2 reports, one per group, as set-top boxes send them), the router's
//! snooping table is read back, then for each frame size RFC 2544 throughput of multicast
//! streams every frame of which each receiving port must get (loss, duplicates and latency
//! counted per receiver); last, a probe group's join and leave in the middle of a trial: the
//! time from the join leaving the tester to the group's first frame at the port, and from the
//! leave to its last.
//!
//! Throughput is RFC 2544's, the rate into the device at which every receiver got every frame
//! (the rows' figure, beside the seed's); the multicast table gives the copies out beside it.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use control::mgmt::Core;
use serde::Serialize;

use crate::engine::Tester;
use crate::load::FrameSizes;
use crate::procedures::{self, Observer, SearchOpts, TrialOpts};
use crate::report::{thousands, Check};
use crate::run::Row;
use crate::scenario::SeedRow;

/// The probe's join and leave: which stream, its receiver, its group and rate.
#[derive(Clone, Debug)]
pub struct Probe {
    pub stream: usize,
    pub port: usize,
    pub group: IpAddr,
    /// The probe stream's rate, frames/s (its period bounds the times measured from below).
    pub fps: f64,
}

#[derive(Clone, Debug)]
pub struct McastPlan {
    /// Per receiving port: the groups its host joins.
    pub joins: Vec<(usize, Vec<IpAddr>)>,
    /// Reports a second from each port (under the router's `igmp-mld` punt rate).
    pub join_fps: f64,
    /// The streams the throughput is searched with (the probe's is apart).
    pub data: Vec<usize>,
    pub probe: Option<Probe>,
    /// The targets for the join and leave times, ms.
    pub join_target_ms: f64,
    pub leave_target_ms: f64,
    /// A routed run (ME-13, ME-14): the (S,G) routes and output interfaces the device must
    /// hold before traffic (None: a snooping bridge, whose joins are checked instead).
    pub routes_expected: Option<(u64, u64)>,
}

/// One frame size's figures.
#[derive(Clone, Debug, Serialize)]
pub struct McastRow {
    pub size: String,
    /// Frames a second into the device (the uplinks) and copies out of it, at throughput.
    pub input_fps: f64,
    pub output_fps: f64,
    pub receivers: usize,
    /// At throughput: copies lost and duplicated over all receivers, and the worst receiver's.
    pub lost: u64,
    pub duplicated: u64,
    pub worst_receiver_lost: u64,
    pub tester_limited: bool,
    pub seed_fps: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct McastReport {
    pub joins_sent: u64,
    pub joins_expected: u64,
    /// What the device's snooping table held after the joins: groups, and (group, member)
    /// memberships (None: not read, an external device). In a routed run: its multicast
    /// routes, and their output interfaces.
    pub groups_snooped: Option<u64>,
    pub memberships_snooped: Option<u64>,
    /// A routed run (ME-13, ME-14).
    pub routed: bool,
    pub rows: Vec<McastRow>,
    /// The forwarding state's change at the probe's port, ms (None: not seen): from the join
    /// leaving the tester to the sending of the first frame that reached the port, and from the
    /// leave to the sending of the last (the probe's period, 10 us, is the resolution; the
    /// receive side's delays do not enter).
    pub join_ms: Option<f64>,
    pub leave_ms: Option<f64>,
    /// The same to the first and last frame's arrival: the path's latency included, and the
    /// tester's receive polling (an upper bound).
    pub join_arrival_ms: Option<f64>,
    pub leave_arrival_ms: Option<f64>,
    /// The probe's frames that arrived before its join was sent (must be 0).
    pub before_join: u64,
    pub checks: Vec<Check>,
}

impl McastReport {
    pub fn passed(&self) -> bool {
        !self.checks.is_empty() && self.checks.iter().all(|c| c.pass)
    }
}

/// The host behind tester port `p`: its MAC and the IPv4 source of its reports.
pub fn host(p: usize) -> ([u8; 6], IpAddr) {
    (
        [2, 0, 0, 0x11, p as u8, 2],
        IpAddr::V4(Ipv4Addr::new(10, 77, p as u8, 2)),
    )
}

/// The IGMPv2 (MLDv1) report, or leave, of `group` from port `p`'s host.
pub fn report(p: usize, group: IpAddr, leave: bool) -> Vec<u8> {
    use packet::mcast::{build, Message, Record};
    let (mac, v4) = host(p);
    let src = match group {
        IpAddr::V4(_) => v4,
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::new(
            0xfe80, 0, 0, 0, 0, 0, 0x11, p as u16,
        )),
    };
    let rec = if leave {
        Record::leave(group)
    } else {
        Record::join(group)
    };
    let version = if group.is_ipv4() { 2 } else { 1 };
    build(
        mac,
        src,
        &Message::Report {
            version,
            records: vec![rec],
        },
    )
    .expect("a report of one group builds")
}

/// The embedded router's snooping table, as (groups, memberships).
pub fn snooped(core: &Arc<Core>) -> Option<(u64, u64)> {
    let v = core
        .igmp_snooping(&api::requests::SnoopQuery::default())
        .ok()?;
    let memberships = v.groups.iter().map(|g| g.members.len() as u64).sum();
    Some((v.groups.len() as u64, memberships))
}

/// The embedded router's multicast FIB, as (routes, output interfaces over all routes).
pub fn mrouted(core: &Arc<Core>) -> Option<(u64, u64)> {
    let v = core.mroutes(&api::requests::MrouteQuery::default()).ok()?;
    let oifs = v.routes.iter().map(|r| r.oifs.len() as u64).sum();
    Some((v.routes.len() as u64, oifs))
}

/// Per receiving port, its host's reports of its groups.
fn reports(plan: &McastPlan) -> Vec<(usize, Vec<Vec<u8>>)> {
    plan.joins
        .iter()
        .map(|(p, groups)| (*p, groups.iter().map(|&g| report(*p, g, false)).collect()))
        .collect()
}

/// Every receiver's host reports its groups; returns the reports the ports took.
fn join_all(t: &mut Tester, plan: &McastPlan) -> u64 {
    let mut sent = 0u64;
    for (p, frames) in reports(plan) {
        sent += t.send_frames(p, &frames, plan.join_fps) as u64;
    }
    sent
}

/// Joins, throughput per size, the probe. `table` reads the device's snooping table (groups,
/// memberships), where it can be read. Before each size after the first, and before any trial
/// a minute or more after they last did, the hosts report again, as hosts answer a querier: a
/// run longer than a membership interval keeps its groups.
#[allow(clippy::too_many_arguments)]
pub fn run(
    t: &mut Tester,
    plan: &McastPlan,
    sizes: &[FrameSizes],
    trial: &TrialOpts,
    search: &SearchOpts,
    seed_for: &dyn Fn(&str) -> Option<SeedRow>,
    table: &dyn Fn() -> Option<(u64, u64)>,
    obs: &mut dyn Observer,
) -> (Vec<Row>, McastReport) {
    let expected: u64 = plan.joins.iter().map(|j| j.1.len() as u64).sum();
    let sent = join_all(t, plan);
    // Hosts answer a querier: in a run longer than a minute (a search at ME-13's scale through
    // pimd, with warm-ups, takes minutes; the default membership interval is 260 s) they
    // report again before the next trial, or the device rightly ages their groups out.
    t.refresh = Some(crate::engine::Refresh {
        every: std::time::Duration::from_secs(60),
        last: std::time::Instant::now(),
        frames: reports(plan),
        fps: plan.join_fps,
    });
    let snooped = table();
    let mut rep = McastReport {
        joins_sent: sent,
        joins_expected: expected,
        groups_snooped: snooped.map(|s| s.0),
        memberships_snooped: snooped.map(|s| s.1),
        routed: plan.routes_expected.is_some(),
        rows: Vec::new(),
        join_ms: None,
        leave_ms: None,
        join_arrival_ms: None,
        leave_arrival_ms: None,
        before_join: 0,
        checks: Vec::new(),
    };
    let mut rows = Vec::new();
    for (i, sz) in sizes.iter().enumerate() {
        if i > 0 {
            join_all(t, plan);
        }
        let mut o = search.clone();
        o.active = Some(plan.data.clone());
        let r = procedures::throughput(t, sz, trial, &o, obs);
        let nominal = crate::run::nominal_fps(t, sz, &plan.data);
        let seed = seed_for(&sz.to_string());
        if let Some(b) = &r.best {
            let receivers: usize = b.streams.iter().map(|s| s.receivers.len().max(1)).sum();
            rep.rows.push(McastRow {
                size: sz.to_string(),
                input_fps: b.tx_fps,
                output_fps: b.rx_fps,
                receivers,
                lost: b.lost,
                duplicated: b.duplicated,
                worst_receiver_lost: b
                    .streams
                    .iter()
                    .flat_map(|s| s.receivers.iter().map(|x| x.lost))
                    .max()
                    .unwrap_or(0),
                tester_limited: r.tester_limited,
                seed_fps: seed.as_ref().and_then(|s| s.fps),
            });
        }
        rows.push(Row {
            key: sz.to_string(),
            nominal_fps: nominal,
            sizes: sz.clone(),
            seed,
            search: r,
        });
    }
    if let Some(pr) = &plan.probe {
        probe(t, pr, sizes, trial, &mut rep, obs);
    }
    t.refresh = None;
    rep.checks = checks(&rep, plan);
    (rows, rep)
}

/// The probe's trial: its stream alone at its rate; the join 0.2 s in, the leave 0.6 s in.
fn probe(
    t: &mut Tester,
    pr: &Probe,
    sizes: &[FrameSizes],
    trial: &TrialOpts,
    rep: &mut McastReport,
    obs: &mut dyn Observer,
) {
    let sz = sizes.first().cloned().unwrap_or(FrameSizes::Fixed(64));
    let line =
        crate::load::line_rate_fps(t.ports[t.streams[pr.stream].tx_port].speed_bps, sz.mean());
    let mut o = trial.clone();
    o.seconds = 1.0;
    o.warmup = 0.0;
    let mut spec = o.spec((pr.fps / line).min(1.0), &sz);
    spec.active = Some(vec![pr.stream]);
    spec.inject = vec![
        (0.2, pr.port, report(pr.port, pr.group, false)),
        (0.6, pr.port, report(pr.port, pr.group, true)),
    ];
    let r = t.trial(&mut spec, &mut |_| {});
    obs.trial("multicast join/leave probe", &r, true);
    let Some(rx) = r.streams.first().and_then(|s| s.receivers.first()) else {
        return;
    };
    let (Some(join), Some(leave)) = (r.injected_ns[0], r.injected_ns[1]) else {
        return;
    };
    let ms = |from: u32, to: u32| to.wrapping_sub(from) as i32 as f64 / 1e6;
    if let (Some(first), Some(last), Some(first_tx), Some(last_tx)) =
        (rx.first_ns, rx.last_ns, rx.first_tx_ns, rx.last_tx_ns)
    {
        let j = ms(join, first_tx);
        if j < 0.0 {
            // A frame sent before the join got through.
            rep.before_join = 1;
        }
        rep.join_ms = Some(j);
        // A frame sent before the leave may be the last: 0 then.
        rep.leave_ms = Some(ms(leave, last_tx).max(0.0));
        rep.join_arrival_ms = Some(ms(join, first));
        rep.leave_arrival_ms = Some(ms(leave, last).max(0.0));
    }
}

fn checks(rep: &McastReport, plan: &McastPlan) -> Vec<Check> {
    let mut c = vec![match (rep.memberships_snooped, rep.groups_snooped) {
        (Some(o), Some(r)) if plan.routes_expected.is_some() => {
            let (routes, oifs) = plan.routes_expected.expect("checked");
            Check {
                name: "routes installed".into(),
                expected: format!("{routes} (S,G) routes, {oifs} output interfaces"),
                measured: format!("{r} routes, {o} output interfaces"),
                pass: r == routes && o == oifs,
            }
        }
        (Some(m), Some(g)) => Check {
            name: "joins snooped".into(),
            expected: format!("{} memberships (every report sent)", rep.joins_expected),
            measured: format!("{} sent; {m} memberships in {g} groups", rep.joins_sent),
            pass: rep.joins_sent == rep.joins_expected && m == rep.joins_expected,
        },
        _ => Check {
            name: "joins sent".into(),
            expected: format!("{} reports", rep.joins_expected),
            measured: format!(
                "{} sent (the device's table is not read: its receivers' frames say whether it snooped)",
                rep.joins_sent
            ),
            pass: rep.joins_sent == rep.joins_expected,
        },
    }];
    for r in &rep.rows {
        c.push(Check {
            name: format!("{}: every receiver gets every frame", r.size),
            expected: "0 copies lost or duplicated at throughput".into(),
            measured: format!(
                "{} receivers; {} lost, {} duplicated",
                r.receivers, r.lost, r.duplicated
            ),
            pass: r.lost == 0 && r.duplicated == 0,
        });
    }
    if plan.probe.is_some() {
        let fmt = |v: Option<f64>| v.map_or("not seen".to_string(), |v| format!("{v:.2} ms"));
        c.push(Check {
            name: "join to first frame".into(),
            expected: format!("under {} ms, nothing before the join", plan.join_target_ms),
            measured: format!("{}; {} before", fmt(rep.join_ms), rep.before_join),
            pass: rep
                .join_ms
                .is_some_and(|j| (0.0..plan.join_target_ms).contains(&j))
                && rep.before_join == 0,
        });
        c.push(Check {
            name: "leave to last frame".into(),
            expected: format!("under {} ms", plan.leave_target_ms),
            measured: fmt(rep.leave_ms),
            pass: rep.leave_ms.is_some_and(|l| l < plan.leave_target_ms),
        });
    }
    c
}

/// The multicast table of the report.
pub fn table(x: &McastReport) -> String {
    let mut s = format!(
        "Joins: {} reports sent, {} expected; {}\n\n",
        thousands(x.joins_sent as f64),
        thousands(x.joins_expected as f64),
        match (x.memberships_snooped, x.groups_snooped) {
            (Some(o), Some(r)) if x.routed => format!(
                "the router held {} (S,G) routes with {} output interfaces",
                thousands(r as f64),
                thousands(o as f64)
            ),
            (Some(m), Some(g)) => format!(
                "the router snooped {} memberships in {} groups",
                thousands(m as f64),
                thousands(g as f64)
            ),
            _ => "the device's table was not read".into(),
        }
    );
    s += "| Frame | Into the device (fps) | Copies out (fps) | Receivers | Lost | Duplicated | Seed (fps) |\n|---|---:|---:|---:|---:|---:|---:|\n";
    for r in &x.rows {
        s += &format!(
            "| {} | {}{} | {} | {} | {} | {} | {} |\n",
            r.size,
            thousands(r.input_fps),
            if r.tester_limited {
                " (tester-limited)"
            } else {
                ""
            },
            thousands(r.output_fps),
            r.receivers,
            thousands(r.lost as f64),
            thousands(r.duplicated as f64),
            r.seed_fps.map_or("-".into(), thousands)
        );
    }
    let fmt = |v: Option<f64>| v.map_or("not measured".to_string(), |v| format!("{v:.2} ms"));
    if x.routed && x.join_ms.is_none() {
        return s;
    }
    s += &format!(
        "\nProbe group, state change (by the frames' send times): join to the first frame \
         through {}, leave to the last {}; to their arrival (path and polling included): {} and {}\n",
        fmt(x.join_ms),
        fmt(x.leave_ms),
        fmt(x.join_arrival_ms),
        fmt(x.leave_arrival_ms)
    );
    s
}

/// A multicast stream from port `from` (`src_mac`) of `sources` consecutive sources from
/// `first_source` to `groups` consecutive groups from `first_group` (every source to every
/// group: the source steps each frame, the group when it wraps), owed to every port of `to`.
#[allow(clippy::too_many_arguments)]
pub fn group_stream(
    name: String,
    from: usize,
    to: &[usize],
    src_mac: [u8; 6],
    first_source: Ipv4Addr,
    first_group: Ipv4Addr,
    sources: u32,
    groups: u32,
) -> crate::stream::StreamSpec {
    use crate::stream::{Field, FieldKind, StreamSpec, Vary, L3};
    let mut fields = Vec::new();
    if sources > 1 {
        fields.push(Field {
            kind: FieldKind::SrcIp,
            vary: Vary::Step {
                count: sources,
                step: 1,
            },
            nested: false,
        });
    }
    if groups > 1 {
        fields.push(Field {
            kind: FieldKind::DstIp,
            vary: Vary::Step {
                count: groups,
                step: 1,
            },
            nested: sources > 1,
        });
    }
    StreamSpec {
        name,
        tx_port: from,
        rx_port: to[0],
        src_mac,
        dst_mac: packet::mcast::group_mac(IpAddr::V4(first_group)),
        vlan: None,
        l3: L3::V4 {
            src: first_source.octets(),
            dst: first_group.octets(),
        },
        udp: Some((1024, 5000)),
        ttl: 16,
        dscp: 0,
        fields,
        weight: 1.0,
        min_size: 0,
        also_rx: to[1..].to_vec(),
        multicast_mac: true,
        tunnel: None,
        mpls: None,
    }
}

/// `bench external --multicast`: an L2 device's snooping, tester port 0 the source and every
/// other port a receiver host that joins each group.
pub struct McastRun {
    pub dut_path: std::path::PathBuf,
    pub dut: crate::external::Dut,
    pub maps: Vec<crate::external::PortMap>,
    /// Nominal speed of every port, bits/s.
    pub speed: f64,
    pub sizes: Vec<FrameSizes>,
    pub groups: u32,
    pub sources: u32,
    pub join_fps: f64,
    pub leave_target_ms: f64,
    pub core: Option<usize>,
}

/// The first group and source of `bench external --multicast`, and its probe group.
pub const EXTERNAL_FIRST_GROUP: Ipv4Addr = Ipv4Addr::new(239, 1, 0, 1);
pub const EXTERNAL_PROBE_GROUP: Ipv4Addr = Ipv4Addr::new(239, 99, 0, 1);

pub fn run_external(
    x: McastRun,
    ro: &crate::run::RunOpts,
    obs: &mut dyn Observer,
) -> Result<crate::run::ScenarioReport, String> {
    use std::time::Duration;
    let n = x.maps.len();
    if n < 2 {
        return Err("--multicast: two ports at least (a source and a receiver)".into());
    }
    if x.groups == 0 || x.sources == 0 || x.groups > 65_000 {
        return Err("--groups 1..=65000 and --sources 1 or more".into());
    }
    let pool = dataplane::Pool::new(8192);
    let (mut tports, afs) = crate::switching::open_l2_ports(&x.dut, &x.maps, x.speed)?;
    let tester_core = x
        .core
        .and_then(|c| core_affinity::set_for_current(core_affinity::CoreId { id: c }).then_some(c));
    if let (Some(c), None) = (x.core, tester_core) {
        return Err(format!("--core {c}: could not pin the tester thread there"));
    }
    let mut cache = dataplane::BufCache::new(pool.clone());
    crate::external::service(&mut tports, &mut cache, Duration::from_millis(50));
    cache.flush();
    drop(cache);
    let receivers: Vec<usize> = (1..n).collect();
    let group = |g: u32| Ipv4Addr::from(u32::from(EXTERNAL_FIRST_GROUP) + g);
    let streams = vec![
        group_stream(
            "groups".into(),
            0,
            &receivers,
            host(0).0,
            Ipv4Addr::new(10, 200, 0, 1),
            EXTERNAL_FIRST_GROUP,
            x.sources,
            x.groups,
        ),
        group_stream(
            "probe".into(),
            0,
            &[1],
            host(0).0,
            Ipv4Addr::new(10, 199, 0, 1),
            EXTERNAL_PROBE_GROUP,
            1,
            1,
        ),
    ];
    let nstreams = streams.len();
    let flows = streams.iter().map(|s| s.flows()).sum();
    let mut tester = Tester::new(tports, streams, pool);
    for sz in &x.sizes {
        tester.validate(sz)?;
    }
    tester.meter = Some(Box::new(crate::external::ExternalMeter::new(
        afs.into_iter()
            .map(crate::external::Link::AfPacket)
            .collect(),
        None,
        tester_core,
    )));
    let groups: Vec<IpAddr> = (0..x.groups).map(|g| IpAddr::V4(group(g))).collect();
    let plan = McastPlan {
        joins: receivers.iter().map(|&p| (p, groups.clone())).collect(),
        join_fps: x.join_fps,
        data: vec![0],
        probe: Some(Probe {
            stream: 1,
            port: 1,
            group: IpAddr::V4(EXTERNAL_PROBE_GROUP),
            fps: 10_000.0,
        }),
        join_target_ms: 10.0,
        leave_target_ms: x.leave_target_ms,
        routes_expected: None,
    };
    let search = SearchOpts {
        resolution: ro.resolution,
        loss_tolerance: ro.tolerance.unwrap_or(0.0),
        relative: true,
        ..Default::default()
    };
    let (mut rows, rep) = run(
        &mut tester,
        &plan,
        &x.sizes,
        &ro.trial,
        &search,
        &|_| None,
        &|| None,
        obs,
    );
    for r in &mut rows {
        r.search.tester_limited = crate::external::tester_bound(&r.search);
    }
    let nports = tester.ports.len();
    drop(tester);
    Ok(crate::run::ScenarioReport {
        id: "multicast".into(),
        title: format!(
            "{}: multicast, {} source(s) to {} groups from {}, each group joined (IGMPv2) on {} port(s)",
            x.dut_path.display(),
            x.sources,
            x.groups,
            x.maps[0].dut_port,
            n - 1
        ),
        seed_title: "(none: an external device)".into(),
        routes: (0, 0),
        flows,
        streams: nstreams,
        ports: nports,
        port_names: x.maps.iter().map(|m| m.dut_port.clone()).collect(),
        workers: 0,
        worker_cores: vec![],
        tester_core,
        cpu: crate::run::cpu_model(),
        trial_seconds: ro.trial.seconds,
        seed_seconds: 0.0,
        tolerance: ro.tolerance.unwrap_or(0.0),
        resolution: ro.resolution,
        build_s: 0.0,
        ring: 0,
        rows,
        loss: vec![],
        back_to_back: vec![],
        fixed_load: None,
        storm: vec![],
        hot_swap: None,
        services: None,
        learning: None,
        failover: None,
        switching: None,
        multicast: Some(rep),
        notes: vec![
            "No DUT probe: an external device's drops are unknown, so loss is copies owed \
             minus copies received, whatever the cause."
                .into(),
            "The receivers' hosts report their groups (IGMPv2) before the first size, again \
             before each other, and before any trial a minute or more after they last did, as \
             hosts answer a querier; they do not answer queries otherwise."
                .into(),
        ],
        external: None,
        gtp: Vec::new(),
        soak: Vec::new(),
        setup_checks: Vec::new(),
    })
}
