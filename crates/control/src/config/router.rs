//! The `router`, `limits` and `vrfs` sections: workers and their cores, the ICMP error rate,
//! class E routing, the buffer pool (checked against the machine's memory), the route tables'
//! limits, the VRFs.
//!
//! ```yaml
//! router: { workers: 2, cores: [1, 2], icmp-rate: 1000, route-class-e: false, buffers: 16384 }
//! router: { idle-sleep-us: 50 }   # idle workers sleep between polls instead of yielding
//! limits: { ipv4-routes: 4000000, ipv6-routes: 1000000 }
//! vrfs: [blue, red]
//! ```

use super::fields::{seq, Errs, Fields};
use super::Config;
use crate::yaml::Value;

pub(super) fn parse_router(top: &mut Fields<'_>, e: &mut Errs, cfg: &mut Config) {
    if let Some(n) = top.get("router") {
        if let Some(mut f) = Fields::new("router".into(), n, e) {
            if let Some(w) = f.parse::<usize>("workers", "a worker count", e) {
                if w == 0 || w > 64 {
                    e.at(
                        f.node("workers").unwrap_or(n),
                        "router.workers",
                        format!("{w} workers: 1..=64 are possible"),
                    );
                } else {
                    cfg.workers = w;
                }
            }
            for (s, node, field) in f.list("cores", e) {
                match s.parse() {
                    Ok(c) => cfg.cores.push(c),
                    Err(_) => e.at(node, &field, format!("`{s}` is not a CPU number")),
                }
            }
            if let Some(r) = f.parse("icmp-rate", "a rate (messages per second)", e) {
                cfg.icmp_rate = r;
            }
            if let Some(us) = f.parse::<u32>("idle-sleep-us", "a time in microseconds", e) {
                if us > 10_000 {
                    e.at(
                        f.node("idle-sleep-us").unwrap_or(n),
                        "router.idle-sleep-us",
                        format!("{us} µs: at most 10,000 (an idle worker must still answer)"),
                    );
                } else {
                    cfg.idle_sleep_us = us;
                }
            }
            if let Some(c) = f.parse("route-class-e", "true or false", e) {
                cfg.route_class_e = c;
            }
            if let Some(b) = f.parse::<usize>("buffers", "a buffer count", e) {
                let at = f.node("buffers").unwrap_or(n);
                if b < 1024 {
                    e.at(at, "router.buffers", format!("{b} buffers: at least 1024"));
                } else if let Err(m) = check_buffers(b, machine_memory()) {
                    e.at(at, "router.buffers", m);
                } else {
                    cfg.buffers = b;
                }
            }
            f.finish(e);
        }
    }
}

pub(super) fn parse_limits(top: &mut Fields<'_>, e: &mut Errs, cfg: &mut Config) {
    if let Some(n) = top.get("limits") {
        if let Some(mut f) = Fields::new("limits".into(), n, e) {
            if let Some(v) = f.parse("ipv4-routes", "a route count", e) {
                cfg.max_v4_routes = v;
            }
            if let Some(v) = f.parse("ipv6-routes", "a route count", e) {
                cfg.max_v6_routes = v;
            }
            if let Some(v) = f.parse::<usize>("macs", "an address count", e) {
                if !(1..=1 << 28).contains(&v) {
                    let at = f.node("macs").unwrap_or(n);
                    e.at(
                        at,
                        "limits.macs",
                        format!("{v}: the MAC table holds 1..=268435456"),
                    );
                }
                cfg.max_macs = v.max(1);
            }
            if let Some(v) = f.parse::<usize>("mcast-groups", "a group count", e) {
                if !(16..=1 << 24).contains(&v) {
                    let at = f.node("mcast-groups").unwrap_or(n);
                    e.at(
                        at,
                        "limits.mcast-groups",
                        format!("{v}: the snooping table holds 16..=16777216 groups"),
                    );
                }
                cfg.max_mcast_groups = v.clamp(16, 1 << 24);
            }
            if let Some(v) = f.parse::<usize>("mroutes", "a route count", e) {
                if !(16..=1 << 24).contains(&v) {
                    let at = f.node("mroutes").unwrap_or(n);
                    e.at(
                        at,
                        "limits.mroutes",
                        format!("{v}: the multicast FIB holds 16..=16777216 routes"),
                    );
                }
                cfg.max_mroutes = v.clamp(16, 1 << 24);
            }
            if let Some(v) = f.parse::<usize>("gtp-contexts", "a context count", e) {
                if !(16..=1 << 24).contains(&v) {
                    let at = f.node("gtp-contexts").unwrap_or(n);
                    e.at(
                        at,
                        "limits.gtp-contexts",
                        format!("{v}: the PDP context table holds 16..=16777216 contexts"),
                    );
                }
                cfg.max_gtp_contexts = v.clamp(16, 1 << 24);
            }
            f.finish(e);
        }
    }
}

pub(super) fn parse_vrfs(top: &mut Fields<'_>, e: &mut Errs, cfg: &mut Config) {
    for (n, path) in seq(top, "vrfs", e) {
        match &n.value {
            Value::Scalar(s) if !cfg.vrfs.contains(s) => cfg.vrfs.push(s.clone()),
            Value::Scalar(s) => e.at(n, &path, format!("VRF `{s}` defined twice")),
            _ => e.at(n, &path, "expected a VRF name"),
        }
    }
}

/// The machine's memory in bytes (`MemTotal` in /proc/meminfo), if it can be read.
pub fn machine_memory() -> Option<u64> {
    let m = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Whether a pool of `count` buffers fits the machine: it may take up to three quarters of
/// `memory` (the rest is for the route tables, the kernel and everything else). The pool's pages
/// are committed as they are first used, so a pool that does not fit fails late and far from its
/// cause; it is refused here instead. Returns the message for `router.buffers`.
pub fn check_buffers(count: usize, memory: Option<u64>) -> Result<(), String> {
    let slot = dataplane::buffer::SLOT_BYTES as u128;
    let max_count = u32::MAX as usize - 1;
    if count > max_count {
        return Err(format!("{count} buffers: at most {max_count}"));
    }
    let Some(mem) = memory else {
        return Ok(());
    };
    let want = count as u128 * slot;
    let allowed = mem as u128 / 4 * 3;
    if want > allowed {
        return Err(format!(
            "{count} buffers of {slot} bytes need {} ({want} bytes), more than the pool may take \
             on this machine: 3/4 of its {} of memory ({mem} bytes MemTotal); at most {} buffers",
            human_bytes(want),
            human_bytes(mem as u128),
            allowed / slot
        ));
    }
    Ok(())
}

fn human_bytes(b: u128) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    const MIB: f64 = (1u64 << 20) as f64;
    if b as f64 >= GIB {
        format!("{:.1} GiB", b as f64 / GIB)
    } else {
        format!("{:.1} MiB", b as f64 / MIB)
    }
}
