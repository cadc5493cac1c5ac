//! Reports: the seed-shaped table (frame length against aggregate throughput, the seed's figure
//! beside ours), JSON for machines, an SVG chart, and the progress lines printed while trials run.

use std::io::{IsTerminal, Write};

use serde_json::{json, Value};

use crate::chart;
use crate::engine::{LatencyStats, Progress, TrialResult};
use crate::procedures::Observer;
use crate::run::{Row, ScenarioReport};

/// 15009592.4 -> "15,009,592".
pub fn thousands(v: f64) -> String {
    let s = format!("{:.0}", v.max(0.0));
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1000.0)
}

impl Row {
    pub fn fps(&self) -> f64 {
        self.search.fps()
    }
    pub fn mbps(&self) -> f64 {
        self.search
            .best
            .as_ref()
            .map_or(0.0, |b| b.frames_fps() * b.mean_size * 8.0 / 1e6)
    }
    pub fn latency(&self) -> Option<&LatencyStats> {
        self.search.best.as_ref().and_then(|b| b.latency.as_ref())
    }
    /// "avg / p99 / max" in microseconds, or "-" without latency figures.
    fn latency_cell(&self) -> String {
        self.latency()
            .map(|l| {
                format!(
                    "{} / {} / {}",
                    us(l.avg_ns),
                    us(l.p99_ns as f64),
                    us(l.max_ns as f64)
                )
            })
            .unwrap_or_else(|| "-".into())
    }
}

/// Rows are stream counts (GR-1, GR-3), not frame sizes.
fn by_stream_count(r: &ScenarioReport) -> bool {
    r.rows
        .first()
        .is_some_and(|row| row.key.parse::<usize>().is_ok() && row.sizes.to_string() != row.key)
}

/// RFC 2544 26.3 and 26.4, when they were asked for.
fn loss_and_back_to_back(r: &ScenarioReport) -> String {
    let mut s = String::new();
    for (size, trials) in &r.loss {
        s += &format!("Frame loss rate against offered load, {size} (RFC 2544 26.3):\n\n");
        s += "| offered load | offered (fps) | received (fps) | lost | loss |\n|---:|---:|---:|---:|---:|\n";
        for (load, t) in trials {
            s += &format!(
                "| {:.0}% | {} | {} | {} | {:.3}% |\n",
                load * 100.0,
                thousands(t.offered_fps),
                thousands(t.rx_fps),
                thousands(t.lost as f64),
                t.loss_ratio() * 100.0
            );
        }
        s += "\n";
    }
    for (size, n) in &r.back_to_back {
        s += &format!(
            "Back-to-back (RFC 2544 26.4), {size}: {} frames per port at 100% with no loss\n",
            thousands(*n as f64)
        );
    }
    s
}

/// The table, as Markdown (readable as text, pastes into docs/results.md).
pub fn table(r: &ScenarioReport) -> String {
    if let Some(x) = &r.external {
        return external_table(r, x);
    }
    let mut s = String::new();
    let scaling = by_stream_count(r);
    s += &format!("{}: {}\n", r.id, r.title);
    s += &format!("Seed: {}\n", r.seed_title);
    s += &format!(
        "Routes: {} IPv4 + {} IPv6; {} streams, {} flows; {} ports\n",
        thousands(r.routes.0 as f64),
        thousands(r.routes.1 as f64),
        r.streams,
        thousands(r.flows as f64),
        r.ports
    );
    s += &format!(
        "Cores ({}): router {} worker(s) on core(s) {:?}; tester (generator + analyzer) on {}\n",
        r.cpu,
        r.workers,
        r.worker_cores,
        match r.tester_core {
            Some(c) => format!("core {c}"),
            None => "an unpinned thread (no free core)".into(),
        }
    );
    s += &format!(
        "Router receive rings: {} frames per queue; router-to-tester rings: {} frames\n",
        thousands(r.ring as f64),
        thousands(crate::embedded::TX_RING as f64)
    );
    if r.multicast.as_ref().is_some_and(|m| m.routed) {
        s += "Method: the router's multicast routes are read back; then RFC 2544 throughput \
              per frame size of multicast streams whose every frame each receiver must get \
              (loss and duplicates per receiver; the rates are frames into the device, the \
              copies out beside them)\n\n";
    } else if r.multicast.is_some() {
        s += "Method: each receiving port's host joins its groups (IGMPv2, one report per \
              group), the snooping table is read back; then RFC 2544 throughput per frame \
              size of multicast streams whose every frame each receiver must get (loss and \
              duplicates per receiver; the rates are frames into the device, the copies out \
              beside them); last, a probe group joined and left in mid-trial\n\n";
    } else if r.switching.is_some() {
        s += "Method: RFC 2889 5.7 learning capacity (one frame from each address, then one \
              frame to each; a step passes when every test frame reached its port and none was \
              flooded; the bound first, then a binary search), 5.8 learning rate (the same step \
              at a rate searched), flooding to unknown addresses; the table emptied before \
              each step\n\n";
    } else if let Some(f) = &r.failover {
        s += if f.protected == "lsp" {
            "Method: the pseudowires up on the LSP's primary, then one trial of test frames \
             down all of them; the primary's cable cut mid-trial; convergence time = frames \
             lost / offered rate, as the seed derived it\n\n"
        } else {
            "Method: addresses learned behind the primary (one frame each), then one trial of \
             test frames to all of them; the primary's cable cut mid-trial; failover time = \
             frames lost / offered rate, as the seed derived it\n\n"
        };
    } else if r.learning.is_some() {
        s += "Method: RFC 2889 address learning: per pass, each test port announces its host, \
              then one learning frame per address, then one test frame to each address; \
              frames counted per tester port\n\n";
    } else if r.rows.is_empty() || r.fixed_load.is_some() {
        s += &format!(
            "Method: one {} s trial{} per row (seed: {} s), no search\n\n",
            r.trial_seconds,
            r.fixed_load.map_or(String::new(), |l| format!(
                " at {:.1}% of nominal",
                l * 100.0
            )),
            r.seed_seconds
        );
    }
    if !r.rows.is_empty() {
        if r.fixed_load.is_none() {
            s += &format!(
                "Method: RFC 2544 throughput, {} s trials (seed: {} s), resolution {}% of nominal, loss tolerance {}%\n\n",
                r.trial_seconds,
                r.seed_seconds,
                r.resolution * 100.0,
                r.tolerance * 100.0
            );
        }
        let first = if scaling { "streams" } else { "frame (B)" };
        s += &format!(
            "| {first} | seed (fps) | Linerate (fps) | Mbit/s | % of nominal | latency avg / p99 / max (us) | lost | trials | vs seed |\n"
        );
        s += "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    }
    for row in &r.rows {
        let seed = row.seed.as_ref();
        let seed_txt = match seed {
            Some(sr) => match sr.fps {
                Some(f) if sr.note.is_empty() => thousands(f),
                Some(f) => format!("{} ({})", thousands(f), sr.note),
                None => sr.note.clone(),
            },
            None => "-".into(),
        };
        let fps = row.fps();
        let fps_txt = if row.search.best.is_none() {
            format!(
                "0 (at {:.0}%: {})",
                row.search.at_max.load * 100.0,
                thousands(row.search.at_max.rx_fps)
            )
        } else if row.search.tester_limited {
            format!(">= {} (tester-bound)", thousands(fps))
        } else {
            thousands(fps)
        };
        let lat = row.latency_cell();
        // A row with no passing trial shows what its last trial lost.
        let lost = row.search.best.as_ref().map_or_else(
            || row.search.trials.last().map_or(0, |t| t.2.lost),
            |b| b.lost,
        );
        let vs = match seed.and_then(|x| x.fps) {
            Some(f) if f > 0.0 && fps > 0.0 => format!("{:.2}x", fps / f),
            _ => "-".into(),
        };
        s += &format!(
            "| {} | {} | {} | {:.0} | {:.1}% | {} | {} | {} | {} |\n",
            row.key,
            seed_txt,
            fps_txt,
            row.mbps(),
            if row.nominal_fps > 0.0 {
                fps / row.nominal_fps * 100.0
            } else {
                0.0
            },
            lat,
            thousands(lost as f64),
            row.search.trials.len(),
            vs
        );
    }
    let drops = drops_list(&sum_drops(
        r.rows
            .iter()
            .flat_map(|row| row.search.trials.iter().map(|t| &t.2))
            .flat_map(|t| t.dut_drops.iter()),
    ));
    s += "\n";
    s += &loss_and_back_to_back(r);
    for (size, st) in &r.storm {
        let t = &st.trial;
        s += &format!(
            "Under management load, {size}: at {:.1}% of nominal ({} fps offered), {} API requests in {:.1} s \
             ({:.0}/s asked, {:.0}/s done at nice {}; {} route changes, {} errors; latency p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms): \
             {} frames lost{}\n",
            st.load * 100.0,
            thousands(t.offered_fps),
            thousands((st.storm.reads + st.storm.route_changes) as f64),
            st.storm.seconds,
            st.storm.rate,
            st.storm.achieved(),
            st.storm.nice,
            st.storm.route_changes,
            st.storm.errors,
            st.storm.p50_ms,
            st.storm.p99_ms,
            st.storm.max_ms,
            thousands(t.lost as f64),
            if t.tester_limited { " (tester-limited trial)" } else { "" }
        );
    }
    if let Some(h) = &r.hot_swap {
        let t = &h.trial;
        s += &format!(
            "Hot swap at {:.0}% of nominal ({} fps offered), {} s:\n\n",
            t.load * 100.0,
            thousands(t.offered_fps),
            t.seconds
        );
        s += "| at (s) | change | took (ms) | syslog record | result |\n|---:|---|---:|---|---|\n";
        for c in &h.changes {
            s += &format!(
                "| {:.2} | {} | {:.1} | {} | {} |\n",
                c.at_s,
                c.what,
                c.took_ms,
                if c.logged {
                    format!("{} (found)", c.msgid)
                } else {
                    format!("{} MISSING", c.msgid)
                },
                c.error.as_deref().unwrap_or("ok")
            );
        }
        s += &format!(
            "\nStreams not using port {}: {} streams, {} frames sent, {} received, {} lost, max latency {:.0} us\n",
            h.port,
            h.others.streams,
            thousands(h.others.tx as f64),
            thousands(h.others.rx as f64),
            thousands(h.others.lost as f64),
            h.others.max_latency_us
        );
        s += &format!(
            "Streams through port {} (lose frames while it is out): {} streams, {} sent, {} lost\n",
            h.port,
            h.involved.streams,
            thousands(h.involved.tx as f64),
            thousands(h.involved.lost as f64)
        );
        s += &format!(
            "Result: {}\n\n",
            if h.passed() {
                "PASS: every change logged, no frame lost on the other ports"
            } else {
                "FAIL"
            }
        );
    }
    if let Some(sv) = &r.services {
        s += &crate::services::table(sv);
    }
    if let Some(l) = &r.learning {
        s += &crate::bridging::table(l, &r.port_names);
    }
    if let Some(f) = &r.failover {
        s += &crate::failover::table(f);
    }
    if let Some(x) = &r.multicast {
        s += &crate::multicast::table(x);
    }
    if let Some(x) = &r.switching {
        s += &crate::switching::table(x);
    }
    if !drops.is_empty() {
        s += &format!(
            "Router drops over all trials (failed ones included): {}\n",
            drops.join(", ")
        );
    }
    s += &soak_and_verdict(r);
    for n in &r.notes {
        s += &format!("Note: {n}\n");
    }
    s
}

fn ns(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.0}"))
}

/// The CPU figures of a trial, in the order of the external table's columns.
fn cpu_cells(t: &TrialResult) -> String {
    match &t.cpu {
        Some(c) => format!(
            "{} | {} | {} | {} | {}",
            ns(c.machine_ns()),
            ns(c.tester_ns()),
            ns(c.dut_ns()),
            ns(c.dut_busy_ns()),
            ns(c.dut_cores_ns())
        ),
        None => "- | - | - | - | -".into(),
    }
}

/// External mode's table: the device, the cabling and what the tester answered for it, the
/// NDR per frame size with CPU per frame, and every trial with the frames forwarded and lost.
fn external_table(r: &ScenarioReport, x: &crate::external::ExternalInfo) -> String {
    let mut s = String::new();
    s += &format!("{}: {}\n", r.id, r.title);
    s += "Device under test: external, no probe: its drops are unknown (loss = frames sent - frames received)\n";
    for p in &x.ports {
        s += &format!(
            "Port {} on {}: device MAC {} ({}), tester MAC {}, emulating {}\n",
            p.dut_port,
            p.device,
            p.dut_mac,
            if p.dut_mac_resolved {
                "resolved by the tester"
            } else {
                "from DUT.yaml"
            },
            p.tester_mac,
            p.emulated.join(", ")
        );
    }
    let c = x.control_total();
    s += &format!(
        "Neighbour resolution: the tester answered {} ARP requests and {} neighbour solicitations from the device \
         (and took out {} other ARP and {} other ND/MLD frames; {} answers failed)\n",
        thousands(c.arp_answered as f64),
        thousands(c.ns_answered as f64),
        thousands(c.arp_other as f64),
        thousands(c.nd_other as f64),
        c.reply_failed
    );
    s += &format!(
        "Priming at {} fps per port: {}\n",
        thousands(x.priming_fps),
        x.priming
            .iter()
            .map(|(tx, lost)| format!(
                "{} sent, {} lost",
                thousands(*tx as f64),
                thousands(*lost as f64)
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let shm = x.ports.iter().all(|p| p.device.starts_with("shm:"));
    s += &format!(
        "Tester: {}; {}\n",
        if shm {
            "the client end of each shared-memory port (the device's rings, read and written by \
             the tester's thread: frames stamped as it reads them, and just before a ring takes \
             them)"
                .to_string()
        } else {
            format!(
                "AF_PACKET on each device (a receive ring of {} one-frame slots, each frame stamped with the kernel's receive time; frames stamped just before the transmit ring takes them)",
                thousands(crate::external::RX_RING_FRAMES as f64)
            )
        },
        match x.tester_core {
            Some(c) => format!("thread pinned to core {c}"),
            None => "thread not pinned".into(),
        }
    );
    s += &match &x.latency_floor {
        Ok(f) => format!(
            "Tester's latency floor (no device: a veth pair of its own, {} 64-byte frames at {} fps, {} lost): min {:.1} / avg {:.1} / p50 {:.1} / p99 {:.1} / max {:.1} us; the device's latency below includes it\n",
            thousands(f.frames as f64),
            thousands(crate::floor::FLOOR_FPS),
            thousands(f.lost as f64),
            f.min_ns as f64 / 1e3,
            f.avg_ns / 1e3,
            f.p50_ns as f64 / 1e3,
            f.p99_ns as f64 / 1e3,
            f.max_ns as f64 / 1e3,
        ),
        Err(e) => format!("Tester's latency floor: not measured ({e})\n"),
    };
    s += &format!(
        "CPU ({}): per frame forwarded; machine = every CPU's time not idle (/proc/stat), tester = this process (getrusage), DUT = machine - tester{}{}\n",
        r.cpu,
        match &x.dut_api {
            Some(a) => format!(", DUT's own = its workers' busy time ({a})"),
            None => String::new(),
        },
        match x.tester_core {
            Some(c) => format!(
                ", CPUs off the tester's core ({c}) = their busy time: the device's, when its work is steered there"
            ),
            None => String::new(),
        }
    );
    match r.fixed_load {
        Some(l) => {
            s += &format!(
                "Method: one {} s trial at {:.3}% of nominal per frame size, loss tolerance {}%\n\n",
                r.trial_seconds,
                l * 100.0,
                r.tolerance * 100.0
            )
        }
        None => {
            s += &format!(
                "Method: RFC 2544 throughput (NDR), {} s trials, resolution {}% of the first estimate, loss tolerance {}%\n\n",
                r.trial_seconds,
                r.resolution * 100.0,
                r.tolerance * 100.0
            )
        }
    }
    s += "| frame (B) | NDR (fps) | Mbit/s | latency avg / p99 / max (us) | lost | trials | machine CPU (ns/frame) | tester (ns/frame) | DUT: machine - tester (ns/frame) | DUT's own (ns/frame) | CPUs off the tester's core (ns/frame) |\n";
    s += "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for row in &r.rows {
        let fps = row.fps();
        let fps_txt = if row.search.best.is_none() {
            format!(
                "0 (forwarded {} at the highest load)",
                thousands(row.search.at_max.rx_fps)
            )
        } else if row.search.tester_limited {
            format!(">= {} (tester-bound)", thousands(fps))
        } else {
            thousands(fps)
        };
        let lat = row.latency_cell();
        let shown = row
            .search
            .best
            .as_ref()
            .or(row.search.trials.last().map(|t| &t.2));
        s += &format!(
            "| {} | {} | {:.0} | {} | {} | {} | {} |\n",
            row.key,
            fps_txt,
            row.mbps(),
            lat,
            thousands(shown.map_or(0, |t| t.lost) as f64),
            row.search.trials.len(),
            shown.map_or_else(|| "- | - | - | - | -".into(), cpu_cells)
        );
    }
    s += "\nEvery trial (sent: frames that reached the wire; forwarded: frames the tester received back \
          where they belonged; lost = sent - forwarded; not sent: frames the tester's transmit rings \
          refused, or still held when the trial closed and took back, which makes the trial \
          tester-limited and is neither sent nor lost):\n\n";
    s += "| frame (B) | load | offered (fps) | sent | forwarded | lost | not sent | forwarded (fps) | machine (ns/frame) | tester (ns/frame) | DUT (ns/frame) | DUT's own (ns/frame) | CPUs off the tester's core (ns/frame) | machine cores busy | result |\n";
    s += "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for row in &r.rows {
        for (load, ok, t) in &row.search.trials {
            let mut res = if *ok {
                "pass".to_string()
            } else if !t.carried_whole() && t.lost == 0 {
                // Nothing lost, but the load did not go out whole: not a pass for the search.
                "not carried whole".into()
            } else {
                "fail".into()
            };
            if t.tester_limited {
                res += " (tester-limited";
                let mut why = Vec::new();
                if t.tx_refused > 0 {
                    why.push(format!(
                        "its transmit rings refused {}",
                        thousands(t.tx_refused as f64)
                    ));
                }
                if t.tx_unsent > 0 {
                    why.push(format!(
                        "{} still in them at the end, taken back",
                        thousands(t.tx_unsent as f64)
                    ));
                }
                if t.behind > 0 {
                    why.push(format!(
                        "{} behind its schedule",
                        thousands(t.behind as f64)
                    ));
                }
                if t.tester_drops > 0 {
                    why.push(format!(
                        "its receive rings dropped {}",
                        thousands(t.tester_drops as f64)
                    ));
                }
                if !why.is_empty() {
                    res += ": ";
                    res += &why.join(", ");
                }
                res += ")";
            }
            if !t.dut_drops.is_empty() {
                res += &format!(
                    " [the device dropped: {}]",
                    t.dut_drops
                        .iter()
                        .map(|(k, v)| format!("{k} {}", thousands(*v as f64)))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            s += &format!(
                "| {} | {:.4}% | {} | {} | {} | {} | {} | {} | {} | {:.2} | {} |\n",
                row.key,
                load * 100.0,
                thousands(t.offered_fps),
                thousands(t.tx as f64),
                thousands(t.rx as f64),
                thousands(t.lost as f64),
                thousands((t.tx_refused + t.tx_unsent) as f64),
                thousands(t.rx_fps),
                cpu_cells(t),
                t.cpu.as_ref().map_or(0.0, |c| c.machine_cores()),
                res
            );
        }
    }
    s += "\n";
    if !r.gtp.is_empty() {
        s += &crate::ggsn::table(r, &r.gtp);
        s += "\n";
    }
    s += &loss_and_back_to_back(r);
    s += &soak_and_verdict(r);
    for n in &r.notes {
        s += &format!("Note: {n}\n");
    }
    s
}

fn lat_json(l: &Option<LatencyStats>) -> Value {
    match l {
        Some(l) => json!({
            "min_ns": l.min_ns, "avg_ns": l.avg_ns, "max_ns": l.max_ns,
            "p50_ns": l.p50_ns, "p99_ns": l.p99_ns, "p999_ns": l.p999_ns,
        }),
        None => Value::Null,
    }
}

/// A trial's CPU: the raw seconds and the per-frame figures (ns per forwarded frame).
pub fn cpu_json(c: &crate::cpu::CpuUsage) -> Value {
    json!({
        "wall_s": c.wall_s, "cpus": c.cpus, "machine_s": c.machine_s, "per_cpu_s": c.per_cpu_s,
        "tester_s": c.tester_s, "dut_busy_s": c.dut_busy_s, "frames": c.frames,
        "machine_ticked_s": c.machine_ticked_s,
        "per_cpu_irq_s": c.per_cpu_irq_s, "dut_kernel_s": c.dut_kernel_s,
        "dut_kernel_ns_per_frame": c.dut_kernel_ns(),
        "dut_cores_s": c.dut_cores_s, "dut_cores_ns_per_frame": c.dut_cores_ns(),
        "machine_cores": c.machine_cores(),
        "machine_ns_per_frame": c.machine_ns(), "tester_ns_per_frame": c.tester_ns(),
        "dut_ns_per_frame": c.dut_ns(), "dut_busy_ns_per_frame": c.dut_busy_ns(),
    })
}

pub fn trial_json(t: &TrialResult) -> Value {
    json!({
        "load": t.load, "sizes": t.sizes, "seconds": t.seconds,
        "offered_fps": t.offered_fps, "tx_fps": t.tx_fps, "rx_fps": t.rx_fps,
        "tx": t.tx, "rx": t.rx, "lost": t.lost, "duplicated": t.duplicated,
        "reordered": t.reordered, "misdelivered": t.misdelivered, "corrupted": t.corrupted,
        "foreign": t.foreign, "stale": t.stale, "refused": t.refused,
        "tx_refused": t.tx_refused, "tx_unsent": t.tx_unsent,
        "tester_limited": t.tester_limited, "behind": t.behind,
        "poll_gap_ns": t.poll_gap_ns,
        "error": t.error,
        "tester_drops": t.tester_drops,
        "cpu": t.cpu.as_ref().map(cpu_json),
        "latency": lat_json(&t.latency),
        "dut_drops": t.dut_drops.iter().map(|(k, v)| json!({"reason": k, "frames": v})).collect::<Vec<_>>(),
        "streams": t.streams.iter().map(|x| json!({
            "name": x.name, "tx": x.tx, "rx": x.rx, "lost": x.lost, "duplicated": x.duplicated,
            "reordered": x.reordered, "misdelivered": x.misdelivered, "corrupted": x.corrupted,
            "latency_max_ns": x.latency.as_ref().map(|l| l.max_ns),
        })).collect::<Vec<_>>(),
    })
}

/// The soak trials (if any), then the checks and the verdict.
fn soak_and_verdict(r: &ScenarioReport) -> String {
    let mut s = String::new();
    if !r.soak.is_empty() {
        s += "\nSoak: one long trial at each row's throughput\n\n";
        s += "| row | load (% of nominal) | seconds | sent | received | lost | where lost | latency avg / p50 / p99 / p99.9 / max (us) | RSS before -> after (MB) |\n";
        s += "|---|---:|---:|---:|---:|---:|---|---:|---:|\n";
        for sk in &r.soak {
            let t = &sk.trial;
            let lat = t.latency.as_ref().map_or("-".to_string(), |l| {
                format!(
                    "{:.1} / {:.1} / {:.1} / {:.1} / {:.1}",
                    l.avg_ns / 1e3,
                    l.p50_ns as f64 / 1e3,
                    l.p99_ns as f64 / 1e3,
                    l.p999_ns as f64 / 1e3,
                    l.max_ns as f64 / 1e3
                )
            });
            s += &format!(
                "| {} | {:.3} | {:.0} | {} | {} | {} | {} | {} | {:.0} -> {:.0} |\n",
                sk.key,
                sk.load * 100.0,
                sk.seconds,
                thousands(t.tx as f64),
                thousands(t.rx as f64),
                thousands(t.lost as f64),
                where_lost(t),
                lat,
                sk.rss_before_mb,
                sk.rss_after_mb
            );
        }
    }
    let checks = checks(r);
    s += "\nChecks:\n";
    for c in &checks {
        s += &format!(
            "- {}: expected {}; measured {}: {}\n",
            c.name,
            c.expected,
            c.measured,
            if c.pass { "PASS" } else { "FAIL" }
        );
    }
    let pass = !checks.is_empty() && checks.iter().all(|c| c.pass);
    s += &format!("Verdict: {}\n\n", if pass { "PASS" } else { "FAIL" });
    s
}

/// Where a trial's lost frames went, by the counters that saw them: the device's receive
/// queues (refused), its drops by reason (a full queue towards the tester is the tester's own
/// doing), the tester's receive rings; "-" if nothing was lost.
fn where_lost(t: &TrialResult) -> String {
    let mut w = Vec::new();
    if t.refused > 0 {
        w.push(format!(
            "refused by the device's receive queues {}",
            thousands(t.refused as f64)
        ));
    }
    for (k, v) in &t.dut_drops {
        let whose = if *k == "TxQueueFull" {
            " (towards the tester: the tester's own)"
        } else {
            ""
        };
        w.push(format!("{k} {}{whose}", thousands(*v as f64)));
    }
    if t.tester_drops > 0 {
        w.push(format!(
            "the tester's receive rings {}",
            thousands(t.tester_drops as f64)
        ));
    }
    if w.is_empty() {
        if t.lost > 0 {
            "not counted by the device".into()
        } else {
            "-".into()
        }
    } else {
        w.join("; ")
    }
}

/// One named check behind a scenario's verdict.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Check {
    pub name: String,
    pub expected: String,
    pub measured: String,
    pub pass: bool,
}

/// The checks a scenario's verdict stands on: each row found a rate (or passed its fixed load),
/// and whatever the procedure checked besides (services, hot swap, soak) passed.
pub fn checks(r: &ScenarioReport) -> Vec<Check> {
    let mut c = Vec::new();
    for row in &r.rows {
        let best = row.search.best.as_ref();
        c.push(Check {
            name: format!("{}: throughput", row.key),
            expected: format!(
                "a load that loses at most {}% of the frames",
                r.tolerance * 100.0
            ),
            measured: match best {
                Some(b) => format!("{:.0} fps, {} lost", b.frames_fps(), b.lost),
                None => "no trial passed".into(),
            },
            pass: best.is_some(),
        });
    }
    if let Some(h) = &r.hot_swap {
        c.push(Check {
            name: "hot swap".into(),
            expected: "the other ports' streams lose nothing; every change done and logged".into(),
            measured: format!(
                "{} changes; {} frames lost by the other ports' streams",
                h.changes.len(),
                h.others.lost
            ),
            pass: h.passed(),
        });
    }
    if let Some(sv) = &r.services {
        c.push(Check {
            name: "services".into(),
            expected: "every cross-check of the services procedure passes".into(),
            measured: if sv.passed() {
                "all pass"
            } else {
                "a check failed (see services)"
            }
            .into(),
            pass: sv.passed(),
        });
    }
    c.extend(r.setup_checks.iter().cloned());
    if let Some(l) = &r.learning {
        c.extend(l.checks.iter().cloned());
    }
    if let Some(f) = &r.failover {
        c.extend(f.checks.iter().cloned());
    }
    if let Some(x) = &r.switching {
        c.extend(x.checks.iter().cloned());
    }
    if let Some(x) = &r.multicast {
        c.extend(x.checks.iter().cloned());
    }
    for x in &r.gtp {
        c.extend(x.checks.iter().cloned());
    }
    for sk in &r.soak {
        let t = &sk.trial;
        let ignored = if sk.ignored.is_empty() {
            String::new()
        } else {
            format!(
                " (not counting {}, denied by design)",
                sk.ignored.join(", ")
            )
        };
        c.push(Check {
            name: format!("{}: {:.0} s soak", sk.key, sk.seconds),
            expected: "0 lost, duplicated or corrupted".into(),
            measured: format!(
                "{} sent, {} lost{ignored}, {} duplicated, {} corrupted; RSS {:.0} -> {:.0} MB",
                t.tx, sk.lost_judged, t.duplicated, t.corrupted, sk.rss_before_mb, sk.rss_after_mb
            ),
            pass: t.tx > 0 && sk.lost_judged == 0 && t.duplicated == 0 && t.corrupted == 0,
        });
    }
    c
}

pub fn json(r: &ScenarioReport) -> Value {
    let checks = checks(r);
    let pass = !checks.is_empty() && checks.iter().all(|c| c.pass);
    json!({
        "verdict": if pass { "pass" } else { "fail" },
        "checks": checks,
        "scenario": r.id,
        "title": r.title,
        "seed_title": r.seed_title,
        "routes": {"ipv4": r.routes.0, "ipv6": r.routes.1},
        "flows": r.flows, "streams": r.streams, "ports": r.ports,
        "cores": {"cpu": r.cpu, "router_workers": r.workers, "worker_cores": r.worker_cores, "tester_core": r.tester_core},
        "rings": {"router_rx": r.ring, "router_to_tester": crate::embedded::TX_RING},
        "method": {"trial_seconds": r.trial_seconds, "seed_seconds": r.seed_seconds,
                   "resolution": r.resolution, "loss_tolerance": r.tolerance},
        "build_seconds": r.build_s,
        "rows": r.rows.iter().map(|row| json!({
            "key": row.key,
            "sizes": row.sizes.to_string(),
            "mean_frame": row.sizes.mean(),
            "nominal_fps": row.nominal_fps,
            "seed_fps": row.seed.as_ref().and_then(|s| s.fps),
            "seed_note": row.seed.as_ref().map(|s| s.note.clone()),
            "throughput_fps": row.fps(),
            "throughput_load": row.search.load,
            "mbps": row.mbps(),
            "tester_limited": row.search.tester_limited,
            "latency": lat_json(&row.search.best.as_ref().and_then(|b| b.latency.clone())),
            "forwarding_rate_at_max_fps": row.search.at_max.rx_fps,
            "cpu": row.search.best.as_ref().and_then(|b| b.cpu.as_ref()).map(cpu_json),
            "trials": row.search.trials.iter().map(|(l, ok, t)| {
                let mut v = trial_json(t);
                v["pass"] = json!(ok);
                v["load"] = json!(l);
                v
            }).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "loss_vs_load": r.loss.iter().map(|(size, trials)| json!({
            "sizes": size,
            "trials": trials.iter().map(|(l, t)| { let mut v = trial_json(t); v["load"] = json!(l); v }).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "back_to_back": r.back_to_back.iter().map(|(size, n)| json!({"sizes": size, "frames_per_port": n})).collect::<Vec<_>>(),
        "mgmt_storm": r.storm.iter().map(|(size, st)| json!({
            "sizes": size, "load": st.load, "trial": trial_json(&st.trial), "storm": st.storm,
        })).collect::<Vec<_>>(),
        "hot_swap": r.hot_swap.as_ref().map(|h| json!({
            "trial": trial_json(&h.trial), "port": h.port, "changes": h.changes,
            "others": h.others, "involved": h.involved, "syslog": h.syslog, "passed": h.passed(),
        })),
        "learning": r.learning.as_ref().map(|l| {
            let mut v = serde_json::to_value(l).unwrap_or(Value::Null);
            v["passed"] = json!(l.passed());
            v
        }),
        "failover": r.failover.as_ref().map(|f| {
            let mut v = serde_json::to_value(f).unwrap_or(Value::Null);
            v["passed"] = json!(f.passed());
            v
        }),
        "multicast": r.multicast.as_ref().map(|x| {
            let mut v = serde_json::to_value(x).unwrap_or(Value::Null);
            v["passed"] = json!(x.passed());
            v
        }),
        "switching": r.switching.as_ref().map(|x| {
            let mut v = serde_json::to_value(x).unwrap_or(Value::Null);
            v["passed"] = json!(x.passed());
            v
        }),
        "services": r.services.as_ref().map(|sv| {
            let mut v = serde_json::to_value(sv).unwrap_or(Value::Null);
            v["passed"] = json!(sv.passed());
            v
        }),
        "notes": r.notes,
        "soak": r.soak.iter().map(|sk| json!({
            "key": sk.key, "load": sk.load, "seconds": sk.seconds,
            "rss_before_mb": sk.rss_before_mb, "rss_after_mb": sk.rss_after_mb,
            "ignored_streams": sk.ignored, "lost_judged": sk.lost_judged,
            "trial": trial_json(&sk.trial),
        })).collect::<Vec<_>>(),
        "external": r.external.as_ref().map(|x| {
            let mut v = serde_json::to_value(x).unwrap_or(Value::Null);
            v["control_total"] = serde_json::to_value(x.control_total()).unwrap_or(Value::Null);
            match &x.latency_floor {
                Ok(f) => v["latency_floor"] = serde_json::to_value(f).unwrap_or(Value::Null),
                Err(e) => v["latency_floor_error"] = Value::String(e.clone()),
            }
            v
        }),
        "gtp": match r.gtp.as_slice() {
            [] => Value::Null,
            [one] => serde_json::to_value(one).unwrap_or(Value::Null),
            many => serde_json::to_value(many).unwrap_or(Value::Null),
        },
    })
}

/// Device drop counts summed by reason, in the order first seen.
pub(crate) fn sum_drops<'a>(
    d: impl IntoIterator<Item = &'a (&'static str, u64)>,
) -> Vec<(&'static str, u64)> {
    let mut acc: Vec<(&'static str, u64)> = Vec::new();
    for &(k, v) in d {
        match acc.iter_mut().find(|a| a.0 == k) {
            Some(a) => a.1 += v,
            None => acc.push((k, v)),
        }
    }
    acc
}

/// Each reason with its count, as the tables print them ("reason 1,234").
pub(crate) fn drops_list(d: &[(&'static str, u64)]) -> Vec<String> {
    d.iter()
        .map(|(k, v)| format!("{k} {}", thousands(*v as f64)))
        .collect()
}

pub fn svg(r: &ScenarioReport) -> String {
    if let Some(l) = &r.learning {
        return crate::bridging::svg(&r.id, l, &r.port_names);
    }
    if let Some(f) = &r.failover {
        return crate::failover::svg(&r.id, f);
    }
    if let Some(x) = &r.switching {
        return crate::switching::svg(x);
    }
    let cats: Vec<String> = r.rows.iter().map(|row| row.key.clone()).collect();
    let who = format!(
        "Linerate ({} worker{})",
        r.workers,
        if r.workers == 1 { "" } else { "s" }
    );
    // Tester-bound answers are a floor, not the router's throughput: drawn as their own series.
    let ours = chart::Series {
        name: who.clone(),
        values: r
            .rows
            .iter()
            .map(|row| (!row.search.tester_limited).then(|| row.fps()))
            .collect(),
    };
    let floor = chart::Series {
        name: format!("{who}, at least (tester-bound)"),
        values: r
            .rows
            .iter()
            .map(|row| row.search.tester_limited.then(|| row.fps()))
            .collect(),
    };
    let seed = chart::Series {
        name: "seed report".into(),
        values: r
            .rows
            .iter()
            .map(|row| row.seed.as_ref().and_then(|s| s.fps))
            .collect(),
    };
    let nominal = chart::Series {
        name: "100% of nominal".into(),
        values: r.rows.iter().map(|row| Some(row.nominal_fps)).collect(),
    };
    let x = if by_stream_count(r) {
        "streams"
    } else {
        "frame size (bytes)"
    };
    chart::svg(
        &format!("{}: throughput (RFC 2544)", r.id),
        x,
        "frames/s",
        &cats,
        &[seed, ours, floor, nominal],
        true,
    )
}

/// Prints a line per finished trial, and (on a terminal) a live line while one runs.
pub struct ProgressPrinter {
    live: bool,
    pub verbose: bool,
}

impl ProgressPrinter {
    pub fn new() -> Self {
        ProgressPrinter {
            live: std::io::stderr().is_terminal(),
            verbose: true,
        }
    }
}

impl Default for ProgressPrinter {
    fn default() -> Self {
        Self::new()
    }
}

impl Observer for ProgressPrinter {
    fn note(&mut self, line: &str) {
        if self.verbose {
            let mut e = std::io::stderr();
            if self.live {
                let _ = write!(e, "\r{:80}\r", "");
            }
            let _ = writeln!(e, "  {line}");
        }
    }

    fn progress(&mut self, what: &str, p: &Progress) {
        if self.live {
            let mut e = std::io::stderr();
            let _ = write!(
                e,
                "\r  {what}: {:.1}/{:.1} s, sent {}, received {}   ",
                p.elapsed,
                p.seconds,
                thousands(p.tx as f64),
                thousands(p.rx as f64)
            );
            let _ = e.flush();
        }
    }

    fn trial(&mut self, what: &str, r: &TrialResult, pass: bool) {
        if !self.verbose {
            return;
        }
        let mut e = std::io::stderr();
        if self.live {
            let _ = write!(e, "\r{:80}\r", "");
        }
        if let Some(err) = &r.error {
            let _ = writeln!(e, "  {what}: not run: {err}");
            return;
        }
        let cpu = match &r.cpu {
            Some(c) => format!(
                " [cpu/frame: machine {} ns, tester {} ns, DUT {} ns{}{}]",
                ns(c.machine_ns()),
                ns(c.tester_ns()),
                ns(c.dut_ns()),
                c.dut_busy_ns()
                    .map_or(String::new(), |b| format!(", DUT's own {b:.0} ns")),
                c.dut_cores_ns()
                    .map_or(String::new(), |b| format!(", other cores {b:.0} ns"))
            ),
            None => String::new(),
        };
        let _ = writeln!(
            e,
            "  {what}: load {}% offered {} fps, received {} fps, lost {}{}{}{cpu} -> {}",
            // Loads against a slow device are hundredths of a percent of nominal.
            if r.load < 0.01 {
                format!("{:.4}", r.load * 100.0)
            } else {
                format!("{:.2}", r.load * 100.0)
            },
            thousands(r.offered_fps),
            thousands(r.rx_fps),
            thousands(r.lost as f64),
            if r.tester_limited {
                format!(" (tester behind by {})", thousands(r.behind as f64))
            } else {
                String::new()
            },
            if r.dut_drops.is_empty() {
                String::new()
            } else {
                format!(
                    " [router: {}]",
                    r.dut_drops
                        .iter()
                        .map(|(k, v)| format!("{k} {v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            if pass { "pass" } else { "fail" }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(15_009_592.4), "15,009,592");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(0.0), "0");
    }
}
