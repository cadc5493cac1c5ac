//! The Cisco ME 6524's Layer 2 multicast tests, IGMP snooping in one bridge domain: ME-11 (one
//! uplink, 200 sources to 100 groups, every group joined on each of 24 access ports) and ME-12
//! (8 uplinks of 25 sources each, 800 groups, each joined on a group of 3 access ports). Both
//! are 20,000 (S,G); the procedure is [`crate::multicast`].

use std::net::{IpAddr, Ipv4Addr};

use super::*;
use crate::multicast::{McastPlan, Probe};

/// The seed's Table 11 (ME-11) and Table 12 (ME-12), "aggregate throughput", frames/s.
const SEED_11: [(u16, f64); 10] = [
    (64, 12_500_000.0),
    (128, 7_094_295.0),
    (256, 3_706_564.0),
    (512, 1_897_533.0),
    (1024, 964_940.0),
    (1280, 772_847.0),
    (1518, 651_890.0),
    (2034, 488_122.0),
    (4068, 243_640.0),
    (9216, 107_839.0),
];
const SEED_12: [(u16, f64); 10] = [
    (64, 12_500_000.0),
    (128, 7_094_295.0),
    (256, 3_683_398.0),
    (512, 1_897_533.0),
    (1024, 964_940.0),
    (1280, 772_847.0),
    (1518, 651_890.0),
    (2034, 488_122.0),
    (4068, 243_640.0),
    (9216, 107_839.0),
];

/// Group `g` of uplink `u`'s set (ME-11 has one set).
fn group(u: usize, g: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(239, 1 + u as u8, (g >> 8) as u8, g as u8 + 1))
}

/// The probe's group and source: joined by nobody until the probe joins it.
const PROBE_GROUP: Ipv4Addr = Ipv4Addr::new(239, 99, 0, 1);

/// A multicast stream from uplink `from` of `sources` sources to `groups` consecutive groups
/// from `first`, received at every port of `to`.
fn mstream(
    name: String,
    from: usize,
    to: &[usize],
    first: IpAddr,
    sources: u32,
    groups: u32,
) -> StreamSpec {
    let IpAddr::V4(g) = first else {
        unreachable!("IPv4 groups")
    };
    crate::multicast::group_stream(
        name,
        from,
        to,
        host_mac(from),
        Ipv4Addr::new(10, 200 + from as u8, 0, 1),
        g,
        sources,
        groups,
    )
}

pub(super) fn multicast(o: &ScenarioOpts, uplinks: usize) -> Scenario {
    let access = 24usize;
    let one = uplinks == 1;
    let groups_per_set = 100u32;
    // Sources scale with --scale (the groups and receivers are the seed's whatever the scale).
    let sources_total = ((200.0 * o.scale).round() as u32).max(uplinks as u32);
    let sources = sources_total / uplinks as u32;
    let mut ports: Vec<(String, f64)> = (0..uplinks).map(|u| (format!("up{u}"), 1e9)).collect();
    ports.extend((0..access).map(|a| (format!("acc{a}"), 1e9)));
    let acc = |a: usize| uplinks + a;
    let per_set = if one { access } else { access / uplinks };
    let mut streams = Vec::new();
    let mut joins: Vec<(usize, Vec<IpAddr>)> = Vec::new();
    for u in 0..uplinks {
        let to: Vec<usize> = (0..per_set).map(|k| acc(u * per_set + k)).collect();
        let set: Vec<IpAddr> = (0..groups_per_set as usize).map(|g| group(u, g)).collect();
        for &p in &to {
            joins.push((p, set.clone()));
        }
        streams.push(mstream(
            format!("up{u}"),
            u,
            &to,
            set[0],
            sources,
            groups_per_set,
        ));
    }
    let data: Vec<usize> = (0..streams.len()).collect();
    // The probe: one (S,G) from the first uplink to the first access port, at 100 kfps.
    let mut probe = mstream("probe".into(), 0, &[acc(0)], IpAddr::V4(PROBE_GROUP), 1, 1);
    probe.l3 = L3::V4 {
        src: [10, 199, 0, 1],
        dst: PROBE_GROUP.octets(),
    };
    streams.push(probe);
    let plan = McastPlan {
        joins,
        join_fps: 1_000.0,
        data,
        probe: Some(Probe {
            stream: streams.len() - 1,
            port: acc(0),
            group: IpAddr::V4(PROBE_GROUP),
            fps: 100_000.0,
        }),
        join_target_ms: 10.0,
    };
    let mut y = switching::mem_ports_yaml(o, &ports);
    let members: Vec<&str> = ports.iter().map(|p| p.0.as_str()).collect();
    let access_names: Vec<&str> = members[uplinks..].to_vec();
    y += &format!(
        "bridges:\n  - name: iptv\n    id: 20\n    members: [{}]\n    igmp-snooping:\n      flood-unregistered: false\n      fast-leave: [{}]\n",
        members.join(", "),
        access_names.join(", ")
    );
    let seed = if one { &SEED_11 } else { &SEED_12 };
    let flows = u64::from(sources) * u64::from(groups_per_set) * uplinks as u64;
    Scenario {
        id: if one { "ME-11" } else { "ME-12" },
        title: if one {
            format!("IGMP snooping, 1 uplink: {sources} sources to 100 groups ({flows} (S,G)), every group joined on each of 24 access ports, replicated 24 times")
        } else {
            format!("IGMP snooping, 8 uplinks: {sources} sources each, 800 groups ({flows} (S,G)), each joined on a group of 3 access ports, replicated 3 times")
        },
        seed_title: if one {
            "Cisco ME 6524, Layer-2 multicast, 1 uplink, 20,000 mroutes, 24 replicated ports, 300 s trials: 12,500,000 frames/s at 64 B (Table 11, aggregate throughput)"
        } else {
            "Cisco ME 6524, Layer-2 multicast, 8 uplinks, 20,000 mroutes, 3 replicated ports, 300 s trials: 12,500,000 frames/s at 64 B (Table 12, aggregate throughput)"
        },
        config_yaml: y,
        route_lines: vec![],
        files: vec![],
        load_scale: vec![1.0; ports.len()],
        ports,
        flows,
        streams,
        sizes: seed.iter().map(|&(b, _)| FrameSizes::Fixed(b)).collect(),
        procedure: Procedure::Multicast(plan),
        loss_tolerance: 0.0,
        seed_seconds: 300.0,
        seed: seed
            .iter()
            .map(|&(b, fps)| SeedRow {
                key: b.to_string(),
                fps: Some(fps),
                note: "aggregate throughput".into(),
            })
            .collect(),
        notes: vec![
            "Throughput is RFC 2544's: frames into the device at which every receiver got \
             every frame; the multicast table gives the copies out beside it. The seed's \
             'aggregate throughput' matches that reading for ME-12 (from 128 B up it is its 8 \
             gigabit uplinks' line rate: 8 x 81,274 = 650,192 at 1,518 B) but not for ME-11, \
             whose table repeats the same figures with one gigabit uplink (1,488,095 frames/s \
             at most at 64 B): ME-11's seed figures cannot be frames in on one gigabit port."
                .into(),
            "Joins are IGMPv2 reports, one per group per port, paced at 1,000 a second per \
             port under the router's igmp-mld punt rate; the access ports are fast-leave and \
             unregistered groups are not flooded (the IPTV habit), so the probe group reaches \
             its port only between its join and its leave."
                .into(),
        ],
    }
}
