//! How fast the tester itself is, on one core: `linerate bench tester`.
//!
//! - Generator: every port's frames go to a sink that frees them; the schedule asks for more
//!   than any core can make, so the trial runs flat out and its achieved rate is the
//!   generator's.
//! - Generator + analyzer: each port's transmit queue is wired back to its own receive queue
//!   through a ring, so every frame is built, stamped, queued, taken, analyzed and freed on the
//!   same core. The analyzer's own cost is this per-frame time minus the generator's.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use dataplane::port::mem::ring;
use dataplane::port::replay::SinkTx;
use dataplane::Pool;

use crate::engine::{Tester, TesterPort, TrialSpec};
use crate::load::FrameSizes;
use crate::stream::{Field, FieldKind, StreamSpec, Vary, L3};

#[derive(Clone, Debug)]
pub struct Capacity {
    pub size: u16,
    pub ports: usize,
    pub streams: usize,
    pub generator_fps: f64,
    pub loopback_fps: f64,
    pub analyzer_fps: f64,
    /// Largest poll gap seen in the loopback run: the latency resolution at full tilt.
    pub poll_gap_ns: u64,
    /// Latency through a ring and back on one core, at full tilt (queueing included).
    pub loop_latency_avg_ns: f64,
    pub lost: u64,
}

fn streams(ports: usize, per_port: usize, flows: u32) -> Vec<StreamSpec> {
    let mut v = Vec::new();
    for p in 0..ports {
        for k in 0..per_port {
            v.push(StreamSpec {
                name: format!("p{p}s{k}"),
                tx_port: p,
                rx_port: p,
                src_mac: [2, 0, 0, 0, p as u8, 2],
                dst_mac: [2, 0, 0, 0, p as u8, 1],
                vlan: None,
                l3: L3::V4 {
                    src: [10, p as u8, k as u8, 2],
                    dst: [20, p as u8, k as u8, 2],
                },
                udp: Some((1024, 5000)),
                ttl: 64,
                dscp: 0,
                fields: vec![Field {
                    kind: FieldKind::DstIp,
                    vary: Vary::Step {
                        count: flows,
                        step: 1,
                    },
                    nested: false,
                }],
                weight: 1.0,
                min_size: 0,
                also_rx: Vec::new(),
                multicast_mac: false,
                tunnel: None,
                mpls: None,
            });
        }
    }
    v
}

pub fn measure(seconds: f64, size: u16, ports: usize, per_port: usize) -> Result<Capacity, String> {
    let pool = Pool::new(65536);
    let specs = streams(ports, per_port, 1000);
    // Faster than anything: the schedule is always ahead, the trial is tester-bound by design.
    let speed = 1e12;
    let sizes = FrameSizes::Fixed(size);

    let sink_ports = (0..ports)
        .map(|p| TesterPort {
            name: format!("p{p}"),
            speed_bps: speed,
            tx: vec![Box::new(SinkTx {
                frames: Arc::new(AtomicU64::new(0)),
            })],
            rx: vec![],
            load_scale: 1.0,
            wire: crate::atm::Wire::Ethernet,
            refusal: crate::engine::Refusal::NeverSent,
        })
        .collect();
    let mut t = Tester::new(sink_ports, specs.clone(), pool.clone());
    t.validate(&sizes)?;
    let mut spec = TrialSpec::new(1.0, sizes.clone(), seconds);
    spec.drain_quiet = std::time::Duration::from_millis(1);
    let gen = t.trial(&mut spec, &mut |_| {});
    drop(t);

    let loop_ports = (0..ports)
        .map(|p| {
            let (tx, rx) = ring(4096);
            TesterPort {
                name: format!("p{p}"),
                speed_bps: speed,
                tx: vec![Box::new(tx)],
                rx: vec![Box::new(rx)],
                load_scale: 1.0,
                wire: crate::atm::Wire::Ethernet,
                refusal: crate::engine::Refusal::NeverSent,
            }
        })
        .collect();
    let mut t = Tester::new(loop_ports, specs.clone(), pool);
    let mut spec = TrialSpec::new(1.0, sizes, seconds);
    let lb = t.trial(&mut spec, &mut |_| {});
    let gen_ns = 1e9 / gen.tx_fps;
    let loop_ns = 1e9 / lb.rx_fps;
    Ok(Capacity {
        size,
        ports,
        streams: specs.len(),
        generator_fps: gen.tx_fps,
        loopback_fps: lb.rx_fps,
        analyzer_fps: 1e9 / (loop_ns - gen_ns).max(1e-3),
        poll_gap_ns: lb.poll_gap_ns,
        loop_latency_avg_ns: lb.latency.as_ref().map_or(0.0, |l| l.avg_ns),
        lost: lb.lost,
    })
}

/// The throughput search's repeatability: `runs` searches against a fake device that polices at
/// `policer_fps` (on its own thread), two ports, 64-byte frames. Returns each search's answer in
/// frames/s. The device's limit is fixed, so the spread is the tester's own.
pub fn repeatability(
    runs: usize,
    policer_fps: f64,
    seconds: f64,
    resolution: f64,
) -> Result<Vec<f64>, String> {
    use crate::fake_dut::{FakeDut, Faults, Forwarding};
    use crate::procedures::{throughput, Quiet, SearchOpts, TrialOpts};
    let pool = Pool::new(65536);
    // A deep bucket: the device's own thread loses its core now and then, and a shallow bucket
    // would then drop the backlog as if it were excess.
    let faults = Faults {
        max_fps: policer_fps,
        max_burst: 8192,
        ..Default::default()
    };
    let fwd = Forwarding::Routes {
        v4: vec![(20 << 24, 8, 0), (21 << 24, 8, 1)],
        v6: vec![],
    };
    let mut specs = streams(2, 4, 1000);
    for s in &mut specs {
        // Port p's streams go to the other port (20.p.k.2 -> 21-p).
        s.rx_port = 1 - s.tx_port;
        if let L3::V4 { dst, .. } = &mut s.l3 {
            dst[0] = 20 + s.rx_port as u8;
        }
    }
    let mut out = Vec::new();
    for _ in 0..runs {
        let (dut, ports) = FakeDut::start(2, 10e9, fwd.clone(), faults.clone(), pool.clone());
        let mut t = Tester::new(ports, specs.clone(), pool.clone());
        let trial = TrialOpts {
            seconds,
            ..Default::default()
        };
        let search = SearchOpts {
            resolution,
            ..Default::default()
        };
        let r = throughput(&mut t, &FrameSizes::Fixed(64), &trial, &search, &mut Quiet);
        out.push(r.fps());
        drop(t);
        dut.stop();
    }
    Ok(out)
}
