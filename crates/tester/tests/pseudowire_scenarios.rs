//! ME-3 and ME-4 (the ME 6524's pseudowire tests) run in embedded mode at a small scale, one
//! trial at a load every core can carry, and checked against the router's own pseudowire counters:
//! every frame arrives where its stream says, and each pseudowire carried exactly the frames the
//! tester sent down it each way (so the labels, VLANs and circuits line up one to one, not just
//! in total).

use std::collections::HashMap;
use std::sync::Mutex;

use tester::embedded::Embedded;
use tester::procedures::TrialOpts;
use tester::scenario::{self, ScenarioOpts};
use tester::stream::{FieldKind, Vary};
use tester::{FrameSizes, Tester};

/// One router and tester at a time: each spins its threads on the machine's cores.
static SERIAL: Mutex<()> = Mutex::new(());

fn run(id: &str, scale: f64) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = scenario::build(
        id,
        &ScenarioOpts {
            scale,
            ..Default::default()
        },
    )
    .unwrap();
    let dir = std::env::temp_dir().join(format!("lr-pw-{id}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("scenario.yaml");
    std::fs::write(&path, &s.config_yaml).unwrap();
    let cfg = control::config::load(&path).unwrap();
    let router = control::Router::build(cfg).unwrap();
    let speeds: Vec<f64> = s.ports.iter().map(|p| p.1).collect();
    let (mut emb, ports, probe) =
        Embedded::start(router, (s.config_yaml.clone(), path), 4096, 65536, &speeds).unwrap();
    let mut t = Tester::new(ports, s.streams.clone(), emb.pool.clone());
    for (p, &k) in t.ports.iter_mut().zip(&s.load_scale) {
        p.load_scale = k;
    }
    t.probe = Some(Box::new(probe));
    // The smallest size and one well beyond the tagged header, at a low load: nothing may be lost.
    for size in [s.sizes[0].clone(), FrameSizes::Fixed(1518)] {
        let core = emb.core.clone().unwrap();
        let before: HashMap<String, (u64, u64)> = core
            .l2vpn_view()
            .pseudowires
            .into_iter()
            .map(|p| (p.name, (p.tx_packets, p.rx_packets)))
            .collect();
        let o = TrialOpts {
            seconds: 0.5,
            ..Default::default()
        };
        let mut spec = o.spec(0.02, &size);
        let r = t.trial(&mut spec, &mut |_| {});
        assert!(r.tx > 1000, "{id} {size}: {r:?}");
        assert_eq!(
            (r.rx, r.lost, r.misdelivered, r.corrupted, r.foreign),
            (r.tx, 0, 0, 0, 0),
            "{id} {size}"
        );
        // Per pseudowire, the frames each way: the stream's frames go round its list of labels
        // (core to CE) or VLANs (CE to core) one by one.
        let mut want: HashMap<String, (u64, u64)> = HashMap::new();
        let views = core.l2vpn_view().pseudowires;
        let by_label: HashMap<u32, String> = views
            .iter()
            .map(|p| (p.local_label, p.name.clone()))
            .collect();
        let by_circuit: HashMap<String, String> = views
            .iter()
            .map(|p| (p.interface.clone(), p.name.clone()))
            .collect();
        for (spec, st) in s.streams.iter().zip(&r.streams) {
            let (kind, list): (FieldKind, Vec<u128>) = match spec.fields.first() {
                Some(f) => match &f.vary {
                    Vary::List(l) => (f.kind, l.to_vec()),
                    other => panic!("{other:?}"),
                },
                None => (FieldKind::VlanId, vec![0]),
            };
            for (i, v) in list.iter().enumerate() {
                let n = list.len() as u64;
                let frames = st.tx / n + u64::from((i as u64) < st.tx % n);
                match (kind, spec.mpls.is_some()) {
                    (FieldKind::Label, true) => {
                        want.entry(by_label[&(*v as u32)].clone()).or_default().1 += frames
                    }
                    (FieldKind::VlanId, false) => {
                        let ac = match spec.vlan {
                            Some(_) => format!("a{}.{v}", spec.tx_port),
                            None => format!("a{}", spec.tx_port),
                        };
                        want.entry(by_circuit[&ac].clone()).or_default().0 += frames
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(
            want.len(),
            views.len(),
            "{id}: every pseudowire carries traffic"
        );
        for p in &views {
            let b = before[&p.name];
            let got = (p.tx_packets - b.0, p.rx_packets - b.1);
            assert_eq!(got, want[&p.name], "{id} {size}: {}", p.name);
            assert_eq!(p.state, "up", "{}", p.name);
            // The way to PE 172.16.u.1 is the route to it: uplink u's P router, its label
            // 200 + u as the transport label.
            let u: u32 = p.peer.split('.').nth(2).unwrap().parse().unwrap();
            assert_eq!(p.transport, (200 + u).to_string(), "{}", p.name);
            assert!(
                p.next_hop.ends_with(&format!("on u{u}")),
                "{}: {}",
                p.name,
                p.next_hop
            );
        }
    }
    emb.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn me3_type4_pseudowires_carry_each_vlans_frames_under_its_own_label() {
    // 16 VLANs on each of the 24 access ports: 384 pseudowires, 48 per uplink.
    run("ME-3", 0.125);
}

#[test]
fn me4_type5_pseudowires_carry_each_ports_frames() {
    run("ME-4", 1.0);
}
