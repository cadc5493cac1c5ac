//! The tester's own latency floor in external mode: what it measures with no device at all, a
//! veth pair it makes for the purpose (each end one of its ports, frames from one straight to
//! the other), so every report can say how much of a device's latency figure is the tester's,
//! as TRex states its ~1 us.
//!
//! Reads: nothing of the run; makes and removes the pair `lrfl<pid>a`/`b` in the tester's own
//! network namespace (with `ip`, which external mode's hosts have), with the ports' own settings
//! ([`crate::external`]'s frame rings) and the same engine as the run.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use dataplane::port::af_packet::AfPacketPort;
use dataplane::Pool;
use serde::Serialize;

use crate::engine::{Refusal, Tester, TesterPort, TrialSpec};
use crate::load::{line_rate_fps, FrameSizes};

/// Frames per second the floor is measured at: low enough that nothing queues.
pub const FLOOR_FPS: f64 = 10_000.0;
/// How long.
pub const FLOOR_SECONDS: f64 = 0.5;

/// The tester's latency with no device, in nanoseconds.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyFloor {
    pub frames: u64,
    pub lost: u64,
    pub min_ns: u64,
    pub avg_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

/// Removes the pair when dropped (deleting one end deletes both).
struct Pair(String);

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).output();
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Measures the floor with 64-byte frames: makes the pair, sends [`FLOOR_FPS`] for
/// [`FLOOR_SECONDS`] from one end to the other, removes the pair. An error says why it could
/// not (no permission to make a veth, no `ip`).
pub fn measure() -> Result<LatencyFloor, String> {
    let a = format!("lrfl{}a", std::process::id() % 100_000);
    let b = format!("lrfl{}b", std::process::id() % 100_000);
    ip(&["link", "add", &a, "type", "veth", "peer", "name", &b])?;
    let _pair = Pair(a.clone());
    for d in [&a, &b] {
        // No IPv6 on the pair: its neighbour discovery and MLD would be foreign frames.
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{d}/disable_ipv6"), "1");
        ip(&["link", "set", d, "up"])?;
    }
    let cfg = crate::external::af_config();
    let speed = 1e9;
    let mut ports = Vec::new();
    for d in [&a, &b] {
        let p = Arc::new(AfPacketPort::open(d, &cfg)?);
        ports.push(TesterPort {
            name: d.clone(),
            speed_bps: speed,
            tx: vec![p.tx_queue()?],
            rx: p.take_rx_queues(),
            load_scale: 1.0,
            wire: crate::atm::Wire::Ethernet,
            refusal: Refusal::NeverSent,
        });
    }
    let mut stream = crate::stream::v4_stream();
    stream.name = "floor".into();
    let sizes = FrameSizes::Fixed(64);
    let mut t = Tester::new(ports, vec![stream], Pool::new(4096));
    t.validate(&sizes)?;
    let load = FLOOR_FPS / line_rate_fps(speed, 64.0);
    let mut spec = TrialSpec::new(load, sizes, FLOOR_SECONDS);
    spec.drain_quiet = Duration::from_millis(20);
    let r = t.trial(&mut spec, &mut |_| {});
    let l = r
        .latency
        .ok_or_else(|| format!("no frame came back over the veth pair ({} sent)", r.tx))?;
    Ok(LatencyFloor {
        frames: r.rx,
        lost: r.lost,
        min_ns: l.min_ns,
        avg_ns: l.avg_ns,
        p50_ns: l.p50_ns,
        p99_ns: l.p99_ns,
        max_ns: l.max_ns,
    })
}
