//! LPM lookups: Linerate's engine against DPDK's rte_lpm / rte_lpm6 (and rte_fib / rte_fib6) on
//! the same table and the same address traces, in one run. The DPDK side is the C harness in
//! benches/dpdk, fed the table and traces as files.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use fib::gen::{self, Profile, Spec};
use fib::{EpochDomain, Key, LpmConfig, LpmWriter};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

pub struct Opts {
    pub family: Family,
    pub profile: Profile,
    pub scale: f64,
    pub trace_len: usize,
    pub seconds: f64,
    /// Also run the DPDK engines (needs the harness built; slow for rte_lpm at 1M+ routes).
    pub dpdk: Vec<String>,
    pub workdir: PathBuf,
}

/// One engine on one trace.
#[derive(Clone, Debug)]
pub struct Row {
    pub engine: String,
    pub routes: usize,
    pub trace: String,
    pub mlookups: f64,
    pub ns_per_lookup: f64,
    pub bytes: usize,
    pub build_s: f64,
    pub hits: u64,
    /// Route replacements per second into the live table, published in batches of 9,984
    /// (Linerate only).
    pub updates_per_s: f64,
}

impl Row {
    pub fn json(&self, family: Family, profile: &Profile, scale: f64) -> serde_json::Value {
        serde_json::json!({
            "bench": "lpm", "family": if family == Family::V4 {"ipv4"} else {"ipv6"},
            "profile": profile.name(), "scale": scale, "engine": self.engine, "routes": self.routes,
            "trace": self.trace, "mlookups_per_s": self.mlookups, "ns_per_lookup": self.ns_per_lookup,
            "bytes": self.bytes, "bytes_per_route": self.bytes as f64 / self.routes.max(1) as f64,
            "build_s": self.build_s, "hits": self.hits, "updates_per_s": self.updates_per_s,
        })
    }
}

/// Lookups/s over the trace for `seconds`, and the hits of one pass. `scalar` takes the portable
/// batch even where the table would walk AVX-512 vectors.
fn measure<K: Key>(w: &LpmWriter<K>, trace: &[K], seconds: f64, scalar: bool) -> (f64, u64) {
    let t = w.table();
    let batch = |c: &[K], out: &mut [u32]| {
        if scalar {
            t.lookup_batch_scalar(c, out)
        } else {
            t.lookup_batch(c, out)
        }
    };
    let mut out = vec![0u32; 256];
    let mut hits = 0u64;
    for c in trace.chunks(256) {
        batch(c, &mut out);
        hits += out[..c.len()].iter().filter(|&&x| x != 0).count() as u64;
    }
    let start = Instant::now();
    let mut n = 0u64;
    let mut sink = 0u32;
    while start.elapsed().as_secs_f64() < seconds {
        for c in trace.chunks(256) {
            batch(c, &mut out);
            sink = sink.wrapping_add(out[0]);
        }
        n += trace.len() as u64;
    }
    std::hint::black_box(sink);
    (n as f64 / start.elapsed().as_secs_f64(), hits)
}

fn trace_random<K: Key>(
    n: usize,
    rng: &mut SmallRng,
    mut draw: impl FnMut(&mut SmallRng) -> K,
) -> Vec<K> {
    (0..n).map(|_| draw(rng)).collect()
}

/// Addresses inside the table's prefixes: a random route, random host bits.
fn trace_from_routes<K: Key>(
    routes: &[(K, u8)],
    n: usize,
    rng: &mut SmallRng,
    host: impl Fn(&mut SmallRng) -> K,
) -> Vec<K> {
    (0..n)
        .map(|_| {
            let (p, l) = routes[rng.gen_range(0..routes.len())];
            merge(p, l, host(rng))
        })
        .collect()
}

fn merge<K: Key>(p: K, l: u8, h: K) -> K {
    // Bits 0..l from p, the rest from h, built from 16-bit pieces through the Key trait.
    let mut k = p;
    let mut off = l as u32;
    while off < K::BITS {
        let n = (K::BITS - off).min(16);
        k = k.with_bits(off, n, h.bits(off, n));
        off += n;
    }
    k
}

fn write_routes<K: Key>(
    path: &Path,
    routes: &[(K, u8)],
    fmt: impl Fn(K) -> String,
) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    for &(p, l) in routes {
        writeln!(f, "{}/{}", fmt(p), l)?;
    }
    f.flush()
}

fn write_trace<K: Key>(
    path: &Path,
    trace: &[K],
    bytes: impl Fn(K) -> Vec<u8>,
) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    for &k in trace {
        f.write_all(&bytes(k))?;
    }
    f.flush()
}

/// Runs one DPDK engine over every trace on one table build (rte_lpm takes minutes to load
/// millions of routes); returns one JSON object per trace, in order.
fn run_dpdk(
    engine: &str,
    routes: &Path,
    traces: &[PathBuf],
    seconds: f64,
) -> Result<Vec<serde_json::Value>, String> {
    let bin = crate::dpdk_harness("lpm_bench")?;
    let mut args = vec![
        engine.to_string(),
        routes.display().to_string(),
        traces[0].display().to_string(),
        seconds.to_string(),
    ];
    args.extend(traces[1..].iter().map(|t| t.display().to_string()));
    let out = Command::new(bin)
        .args(&args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "{engine} harness failed: {}",
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).map_err(|e| format!("{engine}: bad JSON: {e}")))
        .collect()
}

fn dpdk_row(v: &serde_json::Value, trace: &str) -> Row {
    let f = |k: &str| v.get(k).and_then(|x| x.as_f64()).unwrap_or(0.0);
    Row {
        engine: v
            .get("engine")
            .and_then(|x| x.as_str())
            .unwrap_or("?")
            .to_string(),
        routes: f("routes_added") as usize,
        trace: trace.to_string(),
        mlookups: f("mlookups_per_s"),
        ns_per_lookup: f("ns_per_lookup"),
        bytes: f("bytes") as usize,
        build_s: f("build_s"),
        hits: f("hits_one_pass") as u64,
        updates_per_s: 0.0,
    }
}

/// Runs the comparison; returns every row (ours first per trace).
pub fn run(o: &Opts) -> Result<Vec<Row>, String> {
    // A directory of this run's own: the DPDK harness reads its later traces only after loading
    // the table, minutes later for rte_lpm, and a concurrent run must not replace them meanwhile.
    let dir = o.workdir.join(format!("lpm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let o = &Opts {
        workdir: dir.clone(),
        dpdk: o.dpdk.clone(),
        ..*o
    };
    let rows = run_in(o);
    let _ = std::fs::remove_dir_all(&dir);
    rows
}

fn run_in(o: &Opts) -> Result<Vec<Row>, String> {
    let spec = Spec {
        profile: o.profile,
        seed: 1,
        scale: o.scale,
    };
    spec.validate()?;
    let mut rng = SmallRng::seed_from_u64(7);
    match o.family {
        Family::V4 => {
            let routes = gen::v4(&spec);
            let traces = vec![
                (
                    "random",
                    trace_random(o.trace_len, &mut rng, |r| r.gen::<u32>()),
                ),
                (
                    "from-routes",
                    trace_from_routes(&routes, o.trace_len, &mut rng, |r| r.gen::<u32>()),
                ),
            ];
            let rf = o.workdir.join("v4.routes");
            write_routes(&rf, &routes, |k| std::net::Ipv4Addr::from(k).to_string())
                .map_err(|e| e.to_string())?;
            bench_family(
                o,
                &routes,
                traces,
                &rf,
                LpmConfig::v4(routes.len()),
                |k: u32| k.to_be_bytes().to_vec(),
            )
        }
        Family::V6 => {
            let routes = gen::v6(&spec);
            let traces = vec![
                // Random addresses in 2000::/3, where every table's routes are.
                (
                    "random",
                    trace_random(o.trace_len, &mut rng, |r| {
                        (r.gen::<u128>() >> 3) | (1u128 << 125)
                    }),
                ),
                (
                    "from-routes",
                    trace_from_routes(&routes, o.trace_len, &mut rng, |r| r.gen::<u128>()),
                ),
            ];
            let rf = o.workdir.join("v6.routes");
            write_routes(&rf, &routes, |k| std::net::Ipv6Addr::from(k).to_string())
                .map_err(|e| e.to_string())?;
            bench_family(
                o,
                &routes,
                traces,
                &rf,
                LpmConfig::v6(routes.len()),
                |k: u128| k.to_be_bytes().to_vec(),
            )
        }
    }
}

fn bench_family<K: Key>(
    o: &Opts,
    routes: &[(K, u8)],
    traces: Vec<(&str, Vec<K>)>,
    routes_file: &Path,
    cfg: LpmConfig,
    bytes: impl Fn(K) -> Vec<u8> + Copy,
) -> Result<Vec<Row>, String> {
    let t0 = Instant::now();
    let mut w = LpmWriter::<K>::new(cfg, EpochDomain::new());
    for (i, &(p, l)) in routes.iter().enumerate() {
        w.insert(p, l, 1 + (i as u32 % 1000))
            .map_err(|e| e.to_string())?;
    }
    w.publish().map_err(|e| e.to_string())?;
    let build_s = t0.elapsed().as_secs_f64();
    let updates_per_s = churn(&mut w, routes, o.seconds)?;
    let st = w.stats();
    let mut rows = Vec::new();
    let mut files = Vec::new();
    // Where the table walks AVX-512 vectors, the portable batch is measured beside it.
    let paths: &[(&str, bool)] = if w.table().vector_lookups() {
        &[("linerate", false), ("linerate-scalar", true)]
    } else {
        &[("linerate", false)]
    };
    for (name, trace) in &traces {
        for &(engine, scalar) in paths {
            let (rate, hits) = measure(&w, trace, o.seconds, scalar);
            rows.push(Row {
                engine: engine.into(),
                routes: w.len(),
                trace: name.to_string(),
                mlookups: rate / 1e6,
                ns_per_lookup: 1e9 / rate,
                bytes: st.lookup_bytes(),
                build_s,
                hits,
                updates_per_s,
            });
        }
        let tf = o.workdir.join(format!("trace-{name}.bin"));
        write_trace(&tf, trace, bytes).map_err(|e| e.to_string())?;
        files.push(tf);
    }
    drop(w);
    for engine in &o.dpdk {
        match run_dpdk(engine, routes_file, &files, o.seconds) {
            Ok(vs) => {
                for (v, (name, _)) in vs.iter().zip(&traces) {
                    let r = dpdk_row(v, name);
                    let ours = rows
                        .iter()
                        .find(|x| x.engine == "linerate" && x.trace == *name);
                    if let Some(ours) = ours.filter(|x| x.hits != r.hits) {
                        eprintln!(
                            "warning: {engine} found {} hits on {name}, linerate {}: tables differ",
                            r.hits, ours.hits
                        );
                    }
                    rows.push(r);
                }
            }
            Err(e) => eprintln!("{engine}: {e}"),
        }
    }
    rows.sort_by_key(|r| traces.iter().position(|(n, _)| *n == r.trace));
    Ok(rows)
}

/// Replaces next hops of existing routes (a BGP churn pattern), in batches of 9,984 (312 runs of
/// 32) with a publish after each, for `seconds`; returns updates per second. A reader is registered and
/// quiescent between batches, as a worker would be, so reclamation runs as in service. Inserts
/// go in runs of 32, each run's misses started first, as the router's FPM path applies zebra's
/// changes.
fn churn<K: Key>(w: &mut LpmWriter<K>, routes: &[(K, u8)], seconds: f64) -> Result<f64, String> {
    let reader = w.reader();
    let start = Instant::now();
    let mut n = 0usize;
    let mut round = 0u32;
    while start.elapsed().as_secs_f64() < seconds {
        for _ in 0..10_000 / 32 {
            for k in 0..32 {
                let (p, l) = routes[(n + k) % routes.len()];
                w.prefetch(p, l);
            }
            for _ in 0..32 {
                let (p, l) = routes[n % routes.len()];
                w.insert(p, l, 1 + (n as u32 + round) % 1000)
                    .map_err(|e| e.to_string())?;
                n += 1;
            }
        }
        round += 1;
        w.publish().map_err(|e| e.to_string())?;
        reader.quiescent();
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// The memory of a table's routes spread over `tables` tables (round robin, as VRFs of an
/// L3VPN), each sized for `max_routes` as the router sizes every VRF's table.
#[derive(Clone, Copy, Debug)]
pub struct SplitBytes {
    pub tables: usize,
    pub routes_per_table: usize,
    pub max_routes: usize,
    pub direct_bits: u32,
    /// Lookup structure of all tables (direct stages + arenas at their high-water mark).
    pub bytes: usize,
    /// Of which direct stages.
    pub direct_bytes: usize,
}

pub fn split_bytes(o: &Opts, tables: usize, max_routes: usize) -> Result<SplitBytes, String> {
    let spec = Spec {
        profile: o.profile,
        seed: 1,
        scale: o.scale,
    };
    spec.validate()?;
    match o.family {
        Family::V4 => split_in(&gen::v4(&spec), tables, LpmConfig::v4(max_routes)),
        Family::V6 => split_in(&gen::v6(&spec), tables, LpmConfig::v6(max_routes)),
    }
}

fn split_in<K: Key>(
    routes: &[(K, u8)],
    tables: usize,
    cfg: LpmConfig,
) -> Result<SplitBytes, String> {
    let epoch = EpochDomain::new();
    let mut ws: Vec<LpmWriter<K>> = (0..tables)
        .map(|_| LpmWriter::new(cfg, epoch.clone()))
        .collect();
    for (i, &(p, l)) in routes.iter().enumerate() {
        ws[i % tables]
            .insert(p, l, 1 + (i as u32 % 1000))
            .map_err(|e| e.to_string())?;
    }
    let mut out = SplitBytes {
        tables,
        routes_per_table: routes.len() / tables.max(1),
        max_routes: cfg.max_routes,
        direct_bits: cfg.direct_bits,
        bytes: 0,
        direct_bytes: 0,
    };
    for w in &mut ws {
        w.publish().map_err(|e| e.to_string())?;
        let st = w.stats();
        out.bytes += st.lookup_bytes();
        out.direct_bytes += st.direct_bytes;
    }
    Ok(out)
}
