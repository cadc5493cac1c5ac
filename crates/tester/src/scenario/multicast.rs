//! The Cisco ME 6524's multicast tests. Layer 2, IGMP snooping in one bridge domain: ME-11 (one
//! uplink, 200 sources to 100 groups, every group joined on each of 24 access ports) and ME-12
//! (8 uplinks of 25 sources each, 800 groups, each joined on a group of 3 access ports). Layer
//! 3, the same traffic routed (ME-13, ME-14): every port a routed interface, each (S,G) a route
//! from its uplink to its access ports. All are 20,000 (S,G); the procedure is
//! [`crate::multicast`].

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

/// The seed's Table 13 (ME-13) and Table 14 (ME-14), "aggregate throughput", frames/s (the
/// report captions both "Layer-2 ... 1 Uplink": a copy error; the text calls them layer-3).
const SEED_13: [(u16, f64); 10] = [
    (64, 9_284_333.0),
    (128, 7_036_060.0),
    (256, 3_730_763.0),
    (512, 1_897_533.0),
    (1024, 962_348.0),
    (1280, 772_847.0),
    (1518, 651_890.0),
    (2034, 488_122.0),
    (4068, 243_640.0),
    (9216, 107_839.0),
];
const SEED_14: [(u16, f64); 10] = [
    (64, 9_642_427.0),
    (128, 7_054_674.0),
    (256, 3_706_564.0),
    (512, 1_897_533.0),
    (1024, 964_940.0),
    (1280, 772_847.0),
    (1518, 651_890.0),
    (2034, 488_122.0),
    (4068, 243_640.0),
    (9216, 107_839.0),
];

/// ME-13 (one uplink) and ME-14 (eight): ME-11's and ME-12's traffic through a multicast
/// router. The embedded router has no PIM (no control plane in an embedded run), so the
/// (S,G) routes pimd would install are the config's static ones: the data plane's replication
/// is what is measured; PIM's own part is measured with pimd in external mode and in the
/// system tests.
pub(super) fn routed(o: &ScenarioOpts, uplinks: usize) -> Scenario {
    let mut s = multicast(o, uplinks);
    let one = uplinks == 1;
    let access = 24usize;
    let per_set = if one { access } else { access / uplinks };
    let Procedure::Multicast(plan) = &mut s.procedure else {
        unreachable!("multicast() builds a multicast procedure")
    };
    // Joins are PIM's business: none sent; the probe needs pimd too.
    plan.joins.clear();
    plan.probe = None;
    let data = plan.data.clone();
    s.streams.truncate(data.len());
    let sources = s.flows / (100 * uplinks as u64);
    plan.routes_expected = Some((s.flows, s.flows * per_set as u64));
    let cores: Vec<String> = (0..o.workers).map(|w| (w + 1).to_string()).collect();
    let mut y = format!(
        "router: {{ workers: {}, cores: [{}], buffers: 4096 }}\nlimits: {{ mroutes: {} }}\nports:\n",
        o.workers,
        cores.join(", "),
        (s.flows * 2).max(1024)
    );
    for (name, _) in &s.ports {
        y += &format!("  - {{ name: {name}, driver: mem }}\n");
    }
    y += "interfaces:\n";
    for (i, (name, _)) in s.ports.iter().enumerate() {
        let addr = if i < uplinks {
            format!("10.{}.255.254/16", 200 + i)
        } else {
            format!("10.77.{i}.1/24")
        };
        y += &format!(
            "  - {{ name: {name}, port: {name}, mac: \"{}\", mtu: 9198, ipv4: [{addr}] }}\n",
            MacAddr(router_mac(i))
        );
    }
    y += "multicast-routing:\n  static:\n";
    for u in 0..uplinks {
        let oifs: Vec<String> = (0..per_set)
            .map(|k| format!("acc{}", u * per_set + k))
            .collect();
        let oifs = oifs.join(", ");
        for src in 0..sources as u32 {
            let source = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 200 + u as u8, 0, 1)) + src);
            for g in 0..100 {
                y += &format!(
                    "    - {{ source: {source}, group: {}, iif: up{u}, oifs: [{oifs}] }}\n",
                    group(u, g)
                );
            }
        }
    }
    s.config_yaml = y;
    let seed = if one { &SEED_13 } else { &SEED_14 };
    s.seed = seed
        .iter()
        .map(|&(b, fps)| SeedRow {
            key: b.to_string(),
            fps: Some(fps),
            note: "aggregate throughput".into(),
        })
        .collect();
    s.id = if one { "ME-13" } else { "ME-14" };
    s.title = if one {
        format!("Multicast routing, 1 uplink: {sources} sources to 100 groups ({} (S,G) routes), each routed to 24 access ports", s.flows)
    } else {
        format!("Multicast routing, 8 uplinks: {sources} sources each, 800 groups ({} (S,G) routes), each routed to 3 access ports", s.flows)
    };
    s.seed_title = if one {
        "Cisco ME 6524, Layer-3 multicast (PIM-SM), 1 uplink, 20,000 mroutes, 24 replicated ports, 300 s trials: 9,284,333 frames/s at 64 B (Table 13, aggregate throughput)"
    } else {
        "Cisco ME 6524, Layer-3 multicast (PIM-SM), 8 uplinks, 20,000 mroutes, 3 replicated ports, 300 s trials: 9,642,427 frames/s at 64 B (Table 14, aggregate throughput)"
    };
    s.notes = vec![
        "Throughput is RFC 2544's: frames into the device at which every receiver got every \
         frame (each copy routed: TTL decremented, the access port's own MAC address as \
         source); the multicast table gives the copies out beside it."
            .into(),
        "The seed's switch ran PIM-SM, learning its 20,000 (S,G) from the testers' IGMP joins \
         and the sources' traffic. An embedded run has no control plane, so the routes are the \
         config's static (S,G) routes, the same table pimd builds: this measures the data \
         plane's replication. PIM itself (joins through pimd on the TAP twins, its kernel \
         routes mirrored) is exercised with pimd in external mode and the system tests."
            .into(),
        "Every port is a routed interface: 32 in ME-14, one more than the kernel's multicast \
         routing has VIFs for under pimd (MAXVIFS 32, one of them pimd's register device); \
         with pimd, the access side is one snooping bridge behind a routed interface \
         (docs/multicast.md)."
            .into(),
    ];
    s
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
        leave_target_ms: 10.0,
        routes_expected: None,
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
        vpn: VpnPlan::default(),
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
