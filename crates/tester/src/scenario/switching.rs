//! The Cisco ME 6524's Layer 2 tests: ME-7 (MAC learning), ME-8 (learning disabled on the VLAN),
//! ME-9 (a learn limit on the VLAN), whose procedure is [`crate::bridging`]; ME-10 (Flexlink,
//! [`crate::failover`]); and L2-1M, RFC 2889's learning capacity and rate searched at a million
//! addresses ([`crate::switching`], the procedures external mode runs against other bridges).

use super::*;
use crate::bridging::{Learning, LearningPlan};
use crate::stream::{Field, FieldKind};

/// The frame size of every switching test (the seed's).
const FRAME: u16 = 64;
/// A gigabit port's nominal rate at 64 B.
const LINE_FPS: f64 = 1_488_095.2;

/// Tester host `i`'s first learned address behind learning pair `k` (a block of addresses each).
fn learned_base(k: usize) -> [u8; 6] {
    [2, 0xa0 + k as u8, 0, 0, 0, 0]
}

/// The router's config up to its bridges: `o.workers` workers, a mem port and an untagged
/// interface per tester port, and a MAC table scaled with the scenario (the default 1,048,576
/// at the seed's scale; a tenth of the addresses get a tenth of the table, so the ager's sweeps
/// of a table sized for a million do not take the cores of a scenario run at CI's scale).
pub(super) fn mem_ports_yaml(o: &ScenarioOpts, ports: &[(String, f64)]) -> String {
    let cores: Vec<String> = (0..o.workers).map(|w| (w + 1).to_string()).collect();
    let macs = ((1_048_576.0 * o.scale).ceil() as u64).max(65_536);
    let mut y = format!(
        "router: {{ workers: {}, cores: [{}], buffers: 1024 }}\nlimits: {{ macs: {macs} }}\nports:\n",
        o.workers,
        cores.join(", ")
    );
    for (name, _) in ports {
        y += &format!("  - {{ name: {name}, driver: mem }}\n");
    }
    y += "interfaces:\n";
    for (i, (name, _)) in ports.iter().enumerate() {
        y += &format!(
            "  - {{ name: {name}, port: {name}, mac: \"{}\" }}\n",
            MacAddr(router_mac(i))
        );
    }
    y
}

pub(super) fn switching(o: &ScenarioOpts, learning: Learning) -> Scenario {
    // ME-7 and ME-8: three learning ports, three test ports and a monitor; 90,000 addresses.
    // ME-9: one of each and 30,000 addresses, 15,000 of them allowed.
    let (pairs, total, limit) = match learning {
        Learning::Limited(l) => (1usize, 30_000u32, Some(l)),
        _ => (3, 90_000, None),
    };
    let per_port = ((f64::from(total / pairs as u32) * o.scale).round() as u32).max(10);
    let limit = limit.map(|l| ((f64::from(l) * o.scale).round() as u32).max(5));
    let learning = match (learning, limit) {
        (Learning::Limited(_), Some(l)) => Learning::Limited(l),
        (x, _) => x,
    };
    let n = 2 * pairs + 1;
    let monitor = n - 1;
    let mut ports: Vec<(String, f64)> = Vec::new();
    for k in 0..pairs {
        ports.push((format!("learn{k}"), 1e9));
    }
    for k in 0..pairs {
        ports.push((format!("test{k}"), 1e9));
    }
    ports.push(("monitor".into(), 1e9));
    let pair_ports: Vec<(usize, usize)> = (0..pairs).map(|k| (k, pairs + k)).collect();

    let mut streams = Vec::new();
    for (k, &(l, t)) in pair_ports.iter().enumerate() {
        // Learning: one frame from each of `per_port` addresses, to the test port's host.
        let mut learn = base_stream(format!("learn{k}"), l, t);
        learn.src_mac = learned_base(k);
        learn.dst_mac = host_mac(t);
        learn.fields = Field::each_address(FieldKind::SrcMac, per_port);
        // Test: from the test port's host to each of them.
        let mut test = base_stream(format!("test{k}"), t, l);
        test.src_mac = host_mac(t);
        test.dst_mac = learned_base(k);
        test.fields = Field::each_address(FieldKind::DstMac, per_port);
        streams.push(learn);
        streams.push(test);
    }

    let mut y = mem_ports_yaml(o, &ports);
    let members: Vec<&str> = ports.iter().map(|p| p.0.as_str()).collect();
    let settings = match learning {
        Learning::On => String::new(),
        Learning::Off => ", learning: false".into(),
        Learning::Limited(l) => format!(", mac-limit: {l}"),
    };
    y += &format!(
        "bridges:\n  - {{ name: vlan10, id: 10, members: [{}]{settings} }}\n",
        members.join(", ")
    );

    let addresses = pairs as u64 * u64::from(per_port);
    let (id, title, seed_title, passes, seed_note): (&str, String, &str, Vec<f64>, String) =
        match learning {
            Learning::On => (
                "ME-7",
                format!(
                    "MAC learning: {addresses} addresses from 3 ports, then frames to them from 3 other ports; a monitor port must receive nothing; at 30,000 fps per port, then at line rate"
                ),
                "Cisco ME 6524, MAC learning: 90,000 addresses (96,000 claimed) learned from 3 ports; 30,000 frames from each of 3 other ports arrive at their port, none at the monitor port; again at line rate (1,488,095 fps)",
                vec![30_000.0, LINE_FPS],
                "every test frame at its port, 0 at the monitor, at 30 kfps and at line rate".into(),
            ),
            Learning::Off => (
                "ME-8",
                format!(
                    "MAC learning disabled on the VLAN: {addresses} test frames flooded to every learning port and the monitor"
                ),
                "Cisco ME 6524, MAC learning disabled on the VLAN: each of the 4 receiving ports, monitor included, gets all 90,000 frames",
                vec![30_000.0],
                "each of the 4 receiving ports gets all 90,000".into(),
            ),
            Learning::Limited(l) => (
                "ME-9",
                format!(
                    "MAC learning limited to {l} on the VLAN: {addresses} addresses offered, {l} learned, the rest flooded"
                ),
                "Cisco ME 6524, MAC learning limited to 15,000 on a VLAN: of 30,000 addresses offered, 15,000 learned and 15,000 flooded",
                vec![30_000.0],
                "15,000 learned, 15,000 flooded".into(),
            ),
        };
    let plan = LearningPlan {
        learning,
        pairs: pair_ports,
        monitor,
        per_port,
        bridge: "vlan10".into(),
        passes_fps: passes,
        line_fps: LINE_FPS,
    };
    let flows = streams.iter().map(|s| s.flows()).sum();
    Scenario {
        id,
        title,
        seed_title,
        config_yaml: y,
        route_lines: vec![],
        files: vec![],
        load_scale: vec![1.0; ports.len()],
        ports,
        streams,
        sizes: vec![FrameSizes::Fixed(FRAME)],
        procedure: Procedure::Learning(plan),
        loss_tolerance: 0.0,
        seed_seconds: 0.0,
        seed: vec![SeedRow {
            key: FRAME.to_string(),
            fps: None,
            note: seed_note,
        }],
        notes: {
            let mut n = vec![
                "One frame per address in each trial (RFC 2889 5.7), after each test port has \
                 announced its own host with one frame; the table is cleared between passes \
                 where the seed waited for the entries to age out."
                    .into(),
            ];
            if let Learning::Limited(_) = learning {
                n.push(
                    "The test port's own host is learned first and holds one place under the \
                     limit: one address fewer of those offered is learned, one more flooded."
                        .into(),
                );
            }
            n
        },
        flows,
        vpn: VpnPlan::default(),
    }
}

/// The seed's ME-10 rate: 64 B frames at 176,190 fps.
const FLEXLINK_FPS: f64 = 176_190.0;

/// ME-10: an access port and a Flexlink pair (primary, backup) in one bridge domain; 90,000
/// addresses behind the primary; the primary's cable cut under traffic. See
/// [`crate::failover`].
pub(super) fn flexlink(o: &ScenarioOpts) -> Scenario {
    let addresses = ((90_000.0 * o.scale).round() as u32).max(10);
    let (access, primary, backup) = (0usize, 1usize, 2usize);
    let ports: Vec<(String, f64)> = ["access", "primary", "backup"]
        .iter()
        .map(|n| (n.to_string(), 1e9))
        .collect();
    let base = [2, 0xb0, 0, 0, 0, 0];
    // 0: one frame from each address, from the primary's side to the access host.
    let mut learn = base_stream("learn".into(), primary, access);
    learn.src_mac = base;
    learn.dst_mac = host_mac(access);
    learn.fields = Field::each_address(FieldKind::SrcMac, addresses);
    // 1: the access host to every address.
    let mut test = base_stream("test".into(), access, primary);
    test.src_mac = host_mac(access);
    test.dst_mac = base;
    test.fields = Field::each_address(FieldKind::DstMac, addresses);
    let streams = vec![learn, test];
    debug_assert_eq!(
        (crate::failover::LEARN, crate::failover::TEST),
        (0, 1),
        "the plan names the streams by these indexes"
    );
    let mut y = mem_ports_yaml(o, &ports);
    y += "bridges:\n  - { name: vlan10, id: 10, members: [access, { interface: primary, backup: backup, preempt-delay: 0 }] }\n";
    let plan = crate::failover::FailoverPlan {
        access,
        primary,
        backup,
        primary_port: "primary".into(),
        protected: crate::failover::Protected::Flexlink {
            bridge: "vlan10".into(),
            addresses,
        },
        fps: FLEXLINK_FPS,
        line_fps: LINE_FPS,
        cut_at: 0.4,
        seed_ms: 336.2,
    };
    let flows = streams.iter().map(|s| s.flows()).sum();
    Scenario {
        id: "ME-10",
        title: format!(
            "Flexlink failover: {addresses} addresses behind a primary/backup pair, 64 B at 176,190 fps to all of them, the primary's cable cut"
        ),
        seed_title: "Cisco ME 6524, Flexlink failover: 90,000 MAC addresses behind the primary, 64-byte frames at 176,190 fps to all of them, a cable of the primary link pulled: 59,250 frames lost, 336.2 ms",
        config_yaml: y,
        route_lines: vec![],
        files: vec![],
        load_scale: vec![1.0; ports.len()],
        ports,
        streams,
        sizes: vec![FrameSizes::Fixed(FRAME)],
        procedure: Procedure::Failover(plan),
        loss_tolerance: 0.0,
        seed_seconds: 3_674_061.0 / FLEXLINK_FPS,
        seed: vec![SeedRow {
            key: FRAME.to_string(),
            fps: Some(FLEXLINK_FPS),
            note: "336.2 ms failover (59,250 of 3,674,061 frames lost)".into(),
        }],
        notes: vec![
            "The pair preempts at once (`preempt-delay: 0`), so that a try made again starts \
             on the primary like the first; the seed cut the cable once."
                .into(),
            "Embedded mode: the cable is the tester's (frames the router sends to the cut port \
             are lost) and the link-down is the API's `port link-down`, as a link monitor \
             reports it; detection is that call, so the figure is the wait for the call's thread \
             to get a core plus the switchover (both in the table). The real-port system test \
             pulls a veth's far end and includes the kernel's detection."
                .into(),
        ],
        flows,
        vpn: VpnPlan::default(),
    }
}

/// The address counts of L2-1M at scale 1 (the target; the seed claimed 96,000).
const MILLION: u32 = 1_000_000;
/// L2-1M's capacity steps send their learning frames at this rate, well under the learning rate
/// (which is searched separately), so that what the capacity search finds is the table's size,
/// not frames lost to a rate: at 1.49 Mfps from this machine's one tester core, its bursts
/// (after falling behind) lost learning frames at 500,000 addresses and more.
const CAPACITY_FPS: f64 = 200_000.0;

/// L2-1M: one bridge of a learning port, a test port and a monitor (10 Gbit/s mem ports, so the
/// learning-rate search is bounded by the router or the tester, not by a gigabit's 1.49 Mfps);
/// capacity searched up to a million addresses learned at [`CAPACITY_FPS`], the learning rate of
/// a million addresses, and flooding.
pub(super) fn searches(o: &ScenarioOpts) -> Scenario {
    let n = ((f64::from(MILLION) * o.scale).round() as u32).max(100);
    let ports: Vec<(String, f64)> = ["learn", "test", "monitor"]
        .iter()
        .map(|p| (p.to_string(), 10e9))
        .collect();
    let mut y = mem_ports_yaml(o, &ports);
    y += "bridges:\n  - { name: vlan10, id: 10, members: [learn, test, monitor] }\n";
    let streams = crate::switching::unicast_streams(ports.len());
    let flows = streams.iter().map(|s| s.flows()).sum();
    Scenario {
        id: "L2-1M",
        title: format!(
            "RFC 2889 address learning capacity (up to {n}) and learning rate ({n} addresses), and flooding, through one bridge domain"
        ),
        seed_title: "Cisco ME 6524: 96,000 MAC addresses claimed (ME-7 learned 90,000); issue 17's target: 1,000,000 learned and forwarded to",
        config_yaml: y,
        route_lines: vec![],
        files: vec![],
        load_scale: vec![1.0; ports.len()],
        ports,
        streams,
        sizes: vec![FrameSizes::Fixed(FRAME)],
        procedure: Procedure::Switching(crate::switching::Plan {
            procedures: vec![
                crate::switching::Procedure::Flooding,
                crate::switching::Procedure::Capacity,
                crate::switching::Procedure::Rate,
            ],
            size: FrameSizes::Fixed(FRAME),
            macs: n,
            rate_macs: n,
            flood_macs: (n / 100).max(100),
            learn_fps: CAPACITY_FPS,
            target_capacity: Some(n),
        }),
        loss_tolerance: 0.0,
        seed_seconds: 0.0,
        seed: vec![SeedRow {
            key: FRAME.to_string(),
            fps: None,
            note: "96,000 addresses claimed".into(),
        }],
        notes: vec![
            "The MAC table is sized by `limits.macs` (1,048,576 at scale 1: 18.3 bytes per \
             address, `linerate bench mac`); the capacity check asks for every address offered."
                .into(),
            "The learning rate reported is what the tester sent in the best passing step; a \
             step the tester could not keep to schedule is marked: one tester core on this \
             machine sends a few million frames a second, less than the router learns \
             (`linerate bench mac`: 8-10 M new addresses a second per core)."
                .into(),
        ],
        flows,
        vpn: VpnPlan::default(),
    }
}
