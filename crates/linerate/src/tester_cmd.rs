//! `linerate bench scenario|demo|tester`: the tester's commands.

use std::path::{Path, PathBuf};

use clap::Args;
use tester::procedures::TrialOpts;
use tester::report::{self, ProgressPrinter};
use tester::run::{self, RunOpts};
use tester::scenario::{self, ScenarioOpts};
use tester::FrameSizes;

#[derive(Args)]
pub struct ScenarioArgs {
    /// ME-1, ME-2, XR-3, XR-4, GR-1, GR-2 or GR-3; --list shows them.
    id: Option<String>,
    #[arg(long)]
    list: bool,
    /// Seconds per trial (the reports used 60 or 300; 300 is the seed's ME figure).
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Seconds of traffic before each trial, not counted.
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,
    /// Fraction of the seed's routes and flows (CI runs scenarios at 0.01).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Frame sizes instead of the scenario's: 64,128,imix,ggsn-imix or a mix 64:7,594:4,1518:1
    /// (separate several with spaces in one argument or repeat the flag).
    #[arg(long)]
    sizes: Vec<String>,
    /// Search resolution, percent of nominal load.
    #[arg(long, default_value_t = 0.5)]
    resolution: f64,
    /// Loss tolerance, percent (default: the scenario's: 0, or 2 for the GRF tests).
    #[arg(long)]
    tolerance: Option<f64>,
    /// Router workers (the tester takes a core of its own when there is one).
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Stream-scaling scenarios (GR-1, GR-3): the largest stream count.
    #[arg(long)]
    max_streams: Option<usize>,
    /// Receive ring per router queue, frames.
    #[arg(long, default_value_t = 1024)]
    ring: usize,
    /// Check every payload byte of every received frame (costs analyzer time).
    #[arg(long)]
    verify_payload: bool,
    /// Where the table (.md), the JSON and the SVG chart go.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
    /// No per-trial lines.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args)]
pub struct CapacityArgs {
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Frame sizes, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "64")]
    sizes: Vec<u16>,
    #[arg(long, default_value_t = 4)]
    ports: usize,
    #[arg(long, default_value_t = 8)]
    streams_per_port: usize,
}

fn write_outputs(r: &run::ScenarioReport, out: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let base = r.id.to_ascii_lowercase();
    let files = [
        (out.join(format!("{base}.md")), report::table(r)),
        (
            out.join(format!("{base}.json")),
            serde_json::to_string_pretty(&report::json(r)).unwrap_or_default(),
        ),
        (out.join(format!("{base}.svg")), report::svg(r)),
    ];
    let mut paths = Vec::new();
    for (p, text) in files {
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
        paths.push(p);
    }
    Ok(paths)
}

pub fn scenario(a: ScenarioArgs) -> Result<(), String> {
    if a.list || a.id.is_none() {
        println!("Scenarios (../shared/TESTPLAN.md):");
        for (id, what) in scenario::NAMES {
            println!("  {id:<5} {what}");
        }
        return Ok(());
    }
    let id = a.id.clone().unwrap_or_default();
    if a.seconds.is_nan() || a.seconds <= 0.0 {
        return Err("--seconds: must be above 0".into());
    }
    if !(a.resolution > 0.0 && a.resolution < 50.0) {
        return Err("--resolution: a percentage above 0 and below 50".into());
    }
    if let Some(t) = a.tolerance {
        if !(0.0..100.0).contains(&t) {
            return Err("--tolerance: a percentage from 0 to below 100".into());
        }
    }
    if a.workers == 0 {
        return Err("--workers: at least 1".into());
    }
    let sizes = if a.sizes.is_empty() {
        None
    } else {
        Some(
            a.sizes
                .iter()
                .flat_map(|s| s.split_whitespace().map(str::to_string).collect::<Vec<_>>())
                .map(|s| FrameSizes::parse(&s).map_err(|e| format!("--sizes: {e}")))
                .collect::<Result<Vec<_>, _>>()?,
        )
    };
    let so = ScenarioOpts {
        scale: a.scale,
        workers: a.workers,
        max_streams: a.max_streams,
    };
    let s = scenario::build(&id, &so)?;
    eprintln!(
        "{}: building the router ({} routes, {} ports, {} streams)...",
        s.id,
        s.route_lines.len(),
        s.ports.len(),
        s.streams.len()
    );
    let ro = RunOpts {
        trial: TrialOpts {
            seconds: a.seconds,
            warmup: a.warmup,
            verify_payload: a.verify_payload,
            ..Default::default()
        },
        resolution: a.resolution / 100.0,
        tolerance: a.tolerance.map(|t| t / 100.0),
        sizes,
        ring: a.ring,
        workdir: a.out.clone(),
    };
    let mut obs = ProgressPrinter::new();
    obs.verbose = !a.quiet;
    let r = run::run(s, &ro, &mut obs)?;
    println!("\n{}", report::table(&r));
    let paths = write_outputs(&r, &a.out)?;
    println!(
        "Wrote {}",
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// The README's demo: ME-1 at seed scale with short trials.
pub fn demo(seconds: f64, out: PathBuf) -> Result<(), String> {
    scenario(ScenarioArgs {
        id: Some("ME-1".into()),
        list: false,
        seconds,
        warmup: 0.0,
        scale: 1.0,
        sizes: vec![],
        resolution: 0.5,
        tolerance: None,
        workers: 1,
        max_streams: None,
        ring: 1024,
        verify_payload: false,
        out,
        quiet: false,
    })
}

pub fn capacity(a: CapacityArgs) -> Result<(), String> {
    println!(
        "Tester capacity, one core: {} ports x {} streams (1,000 flows each), {} s per run",
        a.ports, a.streams_per_port, a.seconds
    );
    println!(
        "{:>6} {:>16} {:>18} {:>16} {:>10} {:>10} {:>12}",
        "frame",
        "generator fps",
        "gen+analyzer fps",
        "analyzer fps",
        "gen ns",
        "ana ns",
        "poll gap us"
    );
    for &size in &a.sizes {
        let c = tester::capacity::measure(a.seconds, size, a.ports, a.streams_per_port)?;
        if c.lost > 0 {
            return Err(format!(
                "the loopback lost {} frames: the tester is broken",
                c.lost
            ));
        }
        println!(
            "{:>6} {:>16} {:>18} {:>16} {:>10.1} {:>10.1} {:>12.1}",
            size,
            report::thousands(c.generator_fps),
            report::thousands(c.loopback_fps),
            report::thousands(c.analyzer_fps),
            1e9 / c.generator_fps,
            1e9 / c.analyzer_fps,
            c.poll_gap_ns as f64 / 1000.0
        );
        eprintln!(
            "{}",
            serde_json::json!({"bench": "tester", "frame": size, "ports": c.ports, "streams": c.streams,
                "generator_fps": c.generator_fps, "loopback_fps": c.loopback_fps,
                "analyzer_fps": c.analyzer_fps, "poll_gap_ns": c.poll_gap_ns,
                "loop_latency_avg_ns": c.loop_latency_avg_ns})
        );
    }
    Ok(())
}
