//! `linerate bench mac`: the MAC address table (`dataplane::l2::MacTable`) beside DPDK's
//! rte_hash, on the same keys: learning new addresses (every key new, as RFC 2889's learning
//! rate offers them), looking known ones up in random order (what every switched frame's
//! destination costs), refreshing known sources (every frame's source, within a second), two
//! workers learning at once, and bytes per MAC. One core unless said. Linerate learns and looks
//! up a vector (256) at a time with prefetching, as a worker does; its single lookups are shown
//! too. rte_hash inserts one at a time (it has no bulk insert) and looks up singly and 32 at a
//! time (its bulk call).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use dataplane::l2::{Learn, MacKey, MacTable};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Frames a worker handles at a time (the vector size of the graph).
const VECTOR: usize = 256;

pub struct Opts {
    /// Addresses (the table is made for exactly this many).
    pub macs: usize,
    pub seconds: f64,
    /// Run rte_hash beside it.
    pub dpdk: bool,
    pub workdir: PathBuf,
}

/// One engine's figures (per second, one core unless `threads`).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Row {
    pub engine: String,
    pub macs: usize,
    pub learned: usize,
    pub learn_per_s: f64,
    pub learn_2_workers_per_s: Option<f64>,
    pub lookup_per_s: f64,
    pub lookup_bulk_per_s: Option<f64>,
    pub refresh_per_s: Option<f64>,
    pub bytes: usize,
}

impl Row {
    pub fn bytes_per_mac(&self) -> f64 {
        self.bytes as f64 / self.macs.max(1) as f64
    }
}

/// `n` distinct learnable keys over 16 bridge domains, in random order.
fn keys(n: usize, seed: u64) -> Vec<MacKey> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut seen = std::collections::HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let mut mac: [u8; 6] = rng.gen();
        mac[0] &= 0xfe; // unicast
        let k = MacKey::new(rng.gen_range(1..=16), mac);
        if k.learnable() && seen.insert(k) {
            out.push(k);
        }
    }
    out
}

fn raw(k: MacKey) -> u64 {
    u64::from(k.bridge()) << 48 | k.mac().iter().fold(0u64, |a, &b| a << 8 | u64::from(b))
}

/// Repeats `pass` over the trace until `seconds` have gone; items per second.
fn rate(seconds: f64, n: usize, mut pass: impl FnMut() -> u64) -> (f64, u64) {
    let t0 = Instant::now();
    let mut done = 0usize;
    let mut sink = 0;
    loop {
        sink += pass();
        done += n;
        let t = t0.elapsed().as_secs_f64();
        if t >= seconds {
            return (done as f64 / t, sink);
        }
    }
}

fn linerate(o: &Opts, ks: &[MacKey], look: &[MacKey]) -> Result<Row, String> {
    let t = MacTable::new(o.macs);
    let members: Vec<u32> = (0..o.macs).map(|i| (i & 0xfffff) as u32).collect();
    let mut results = vec![Learn::Known; VECTOR];
    // New sources a vector at a time, as a worker learns them.
    let t0 = Instant::now();
    let mut learned = 0;
    for (k, m) in ks.chunks(VECTOR).zip(members.chunks(VECTOR)) {
        t.learn_batch(k, m, 1, &mut results[..k.len()]);
        learned += results[..k.len()]
            .iter()
            .filter(|r| **r == Learn::Learned)
            .count();
    }
    let learn_per_s = learned as f64 / t0.elapsed().as_secs_f64();
    let (lookup_per_s, found) = rate(o.seconds, look.len(), || {
        look.iter().filter(|&&k| t.lookup(k).is_some()).count() as u64
    });
    let mut out = vec![None; VECTOR];
    let (lookup_batch_per_s, found_batch) = rate(o.seconds, look.len(), || {
        let mut n = 0;
        for k in look.chunks(VECTOR) {
            t.lookup_batch(k, &mut out[..k.len()]);
            n += out[..k.len()].iter().filter(|x| x.is_some()).count() as u64;
        }
        n
    });
    for f in [found, found_batch] {
        if f % look.len() as u64 != 0 || f == 0 {
            return Err(format!(
                "lookups found {f}, not a multiple of {}",
                look.len()
            ));
        }
    }
    // Sources seen again within their second: nothing is written.
    let look_members: Vec<u32> = {
        let at: std::collections::HashMap<MacKey, u32> =
            ks.iter().zip(&members).map(|(k, m)| (*k, *m)).collect();
        look.iter().map(|k| at[k]).collect()
    };
    let (refresh_per_s, known) = rate(o.seconds, look.len(), || {
        let mut n = 0;
        for (k, m) in look.chunks(VECTOR).zip(look_members.chunks(VECTOR)) {
            t.learn_batch(k, m, 1, &mut results[..k.len()]);
            n += results[..k.len()]
                .iter()
                .filter(|r| **r == Learn::Known)
                .count() as u64;
        }
        n
    });
    if known % look.len() as u64 != 0 {
        return Err(format!("refreshes: {known} known, not every source"));
    }
    // Two workers learning new addresses at once, into a fresh table.
    let two = {
        let t2 = Arc::new(MacTable::new(o.macs));
        let halves: Vec<Vec<MacKey>> = ks
            .chunks(ks.len().div_ceil(2))
            .map(|c| c.to_vec())
            .collect();
        let t0 = Instant::now();
        let threads: Vec<_> = halves
            .into_iter()
            .enumerate()
            .map(|(w, half)| {
                let t2 = t2.clone();
                std::thread::spawn(move || {
                    let m = [w as u32; VECTOR];
                    let mut r = [Learn::Known; VECTOR];
                    for k in half.chunks(VECTOR) {
                        t2.learn_batch(k, &m[..k.len()], 1, &mut r[..k.len()]);
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().map_err(|_| "a learning thread panicked")?;
        }
        t2.len() as f64 / t0.elapsed().as_secs_f64()
    };
    Ok(Row {
        engine: "linerate".into(),
        macs: o.macs,
        learned,
        learn_per_s,
        learn_2_workers_per_s: Some(two),
        lookup_per_s,
        lookup_bulk_per_s: Some(lookup_batch_per_s),
        refresh_per_s: Some(refresh_per_s),
        bytes: t.bytes(),
    })
}

fn write_keys(path: &Path, ks: &[MacKey]) -> Result<(), String> {
    let bytes: Vec<u8> = ks.iter().flat_map(|&k| raw(k).to_le_bytes()).collect();
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

fn dpdk(o: &Opts, ks: &[MacKey], look: &[MacKey]) -> Result<Row, String> {
    std::fs::create_dir_all(&o.workdir).map_err(|e| format!("{}: {e}", o.workdir.display()))?;
    let kf = o.workdir.join("mac_keys.bin");
    let lf = o.workdir.join("mac_lookups.bin");
    write_keys(&kf, ks)?;
    write_keys(&lf, look)?;
    let bin = crate::dpdk_harness("hash_bench")?;
    let out = Command::new(bin)
        .arg(&kf)
        .arg(&lf)
        .arg(o.seconds.to_string())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "hash_bench failed: {}",
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("hash_bench: bad JSON: {e}"))?;
    let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
    Ok(Row {
        engine: "rte_hash".into(),
        macs: o.macs,
        learned: f("inserted") as usize,
        learn_per_s: f("insert_per_s"),
        learn_2_workers_per_s: None,
        lookup_per_s: f("lookup_per_s"),
        lookup_bulk_per_s: Some(f("lookup_bulk_per_s")),
        refresh_per_s: None,
        bytes: f("bytes") as usize,
    })
}

/// Linerate's table, then rte_hash on the same keys if asked.
pub fn run(o: &Opts) -> Result<Vec<Row>, String> {
    let ks = keys(o.macs, 1);
    let mut look = ks.clone();
    look.shuffle(&mut rand::rngs::StdRng::seed_from_u64(2));
    let mut rows = vec![linerate(o, &ks, &look)?];
    if o.dpdk {
        rows.push(dpdk(o, &ks, &look)?);
    }
    Ok(rows)
}
