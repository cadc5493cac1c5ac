//! The multicast scenarios' procedure (ME-11, ME-12): emulated hosts on the receiving ports join
//! their groups (IGMPv2 reports, one per group, as set-top boxes send them), the router's
//! snooping table is read back, then for each frame size RFC 2544 throughput of multicast
//! streams every frame of which each receiving port must get (loss, duplicates and latency
//! counted per receiver); last, a probe group's join and leave in the middle of a trial: the
//! time from the join leaving the tester to the group's first frame at the port, and from the
//! leave to its last.
//!
//! Throughput is reported as the seed did, in frames a second through the device: the rows'
//! figure is the copies received (the replicated output), and the table gives the frames sent
//! into the device beside it.

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
    /// The target for the join and leave times, ms.
    pub join_target_ms: f64,
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
    /// What the router's snooping table held after the joins: groups, and (group, member)
    /// memberships.
    pub groups_snooped: u64,
    pub memberships_snooped: u64,
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

/// Joins, throughput per size, the probe; in embedded mode (the snooping table is read from
/// `core`).
#[allow(clippy::too_many_arguments)]
pub fn run_embedded(
    t: &mut Tester,
    core: &Arc<Core>,
    plan: &McastPlan,
    sizes: &[FrameSizes],
    trial: &TrialOpts,
    search: &SearchOpts,
    seed_for: &dyn Fn(&str) -> Option<SeedRow>,
    obs: &mut dyn Observer,
) -> (Vec<Row>, McastReport) {
    let expected: u64 = plan.joins.iter().map(|j| j.1.len() as u64).sum();
    let mut sent = 0u64;
    for (p, groups) in &plan.joins {
        let frames: Vec<Vec<u8>> = groups.iter().map(|&g| report(*p, g, false)).collect();
        sent += t.send_frames(*p, &frames, plan.join_fps) as u64;
    }
    // The table as the router reads it out.
    let snooped = core
        .igmp_snooping(&api::requests::SnoopQuery::default())
        .unwrap_or_default();
    let memberships: u64 = snooped.groups.iter().map(|g| g.members.len() as u64).sum();
    let mut rep = McastReport {
        joins_sent: sent,
        joins_expected: expected,
        groups_snooped: snooped.groups.len() as u64,
        memberships_snooped: memberships,
        rows: Vec::new(),
        join_ms: None,
        leave_ms: None,
        join_arrival_ms: None,
        leave_arrival_ms: None,
        before_join: 0,
        checks: Vec::new(),
    };
    let mut rows = Vec::new();
    for sz in sizes {
        let mut o = search.clone();
        o.active = Some(plan.data.clone());
        let r = procedures::throughput(t, sz, trial, &o, obs);
        // Copies a second at line rate: frames in, times the receivers each has.
        let fanout = plan
            .data
            .iter()
            .map(|&i| 1 + t.streams[i].also_rx.len())
            .sum::<usize>() as f64
            / plan.data.len().max(1) as f64;
        let nominal = crate::run::nominal_fps(t, sz, &plan.data) * fanout;
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
    let mut c = vec![Check {
        name: "joins snooped".into(),
        expected: format!("{} memberships (every report sent)", rep.joins_expected),
        measured: format!(
            "{} sent; {} memberships in {} groups",
            rep.joins_sent, rep.memberships_snooped, rep.groups_snooped
        ),
        pass: rep.joins_sent == rep.joins_expected && rep.memberships_snooped == rep.joins_expected,
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
            expected: format!("under {} ms (fast leave)", plan.join_target_ms),
            measured: fmt(rep.leave_ms),
            pass: rep.leave_ms.is_some_and(|l| l < plan.join_target_ms),
        });
    }
    c
}

/// The multicast table of the report.
pub fn table(x: &McastReport) -> String {
    let mut s = format!(
        "Joins: {} reports sent, {} expected; the router snooped {} memberships in {} groups\n\n",
        thousands(x.joins_sent as f64),
        thousands(x.joins_expected as f64),
        thousands(x.memberships_snooped as f64),
        thousands(x.groups_snooped as f64)
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
