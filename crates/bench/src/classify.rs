//! Packet classification: Linerate's `classify::Classifier` against DPDK's rte_acl on the same
//! 5-tuple rule lists and the same key traces, in one run. The DPDK side is the C harness
//! `benches/dpdk/acl_bench`, fed the rules (ClassBench filter format) and the trace (the bytes
//! rte_acl reads) as files; it writes back the rule index it found for every key, so the two
//! engines are checked key by key, not only timed.
//!
//! Sets: XR-5 (`n - 1` DENY entries and PERMIT ALL, traffic that reaches only the PERMIT: the
//! worst case, every key walks the whole list) and ClassBench-style acl, fw and ipc sets with
//! their traces (see `classify::gen`). Only rules rte_acl's 5-tuple layout can express go to
//! either engine; every generated set here is such a set.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use classify::gen::{self, Family, Kind};
use classify::{Classifier, Dim, Key, Rule, NO_MATCH};

/// A rule set to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Set {
    Xr5,
    ClassBench(Kind),
}

impl Set {
    pub fn name(self) -> &'static str {
        match self {
            Set::Xr5 => "xr5",
            Set::ClassBench(k) => k.name(),
        }
    }
}

impl std::str::FromStr for Set {
    type Err = String;
    fn from_str(s: &str) -> Result<Set, String> {
        match s {
            "xr5" => Ok(Set::Xr5),
            _ => s
                .parse::<Kind>()
                .map(Set::ClassBench)
                .map_err(|_| format!("unknown rule set '{s}' (xr5, acl, fw, ipc)")),
        }
    }
}

/// Parses `v4`/`ipv4` or `v6`/`ipv6`.
pub fn parse_family(s: &str) -> Result<Family, String> {
    match s {
        "v4" | "ipv4" => Ok(Family::V4),
        "v6" | "ipv6" => Ok(Family::V6),
        _ => Err(format!("unknown family '{s}' (v4, v6)")),
    }
}

pub struct Opts {
    pub sets: Vec<Set>,
    pub families: Vec<Family>,
    /// Rule counts (the final PERMIT or default rule included).
    pub sizes: Vec<usize>,
    pub trace_len: usize,
    pub seconds: f64,
    /// Keys per `classify_batch` call (rte_acl gets bursts of 64 in its harness).
    pub batch: usize,
    pub dpdk: bool,
    pub workdir: PathBuf,
    pub seed: u64,
}

/// One engine on one set.
#[derive(Clone, Debug)]
pub struct Row {
    pub set: String,
    pub family: Family,
    pub rules: usize,
    pub engine: String,
    pub mclass: f64,
    pub ns_per_class: f64,
    pub build_s: f64,
    pub bytes: usize,
    pub trace_len: usize,
    /// Keys that matched a rule, and the sum of the matched indices, over one pass of the trace.
    pub matched: u64,
    pub index_sum: u64,
    /// Keys on which the two engines disagree; `None` when DPDK did not run.
    pub mismatches: Option<usize>,
    /// rte_acl's classify algorithm (avx2, avx512x16, ...); empty for Linerate.
    pub alg: String,
}

impl Row {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "bench": "classify", "set": self.set, "family": self.family.name(),
            "rules": self.rules, "engine": self.engine, "mclass_per_s": self.mclass,
            "ns_per_class": self.ns_per_class, "build_s": self.build_s, "bytes": self.bytes,
            "bytes_per_rule": self.bytes as f64 / self.rules.max(1) as f64,
            "trace_len": self.trace_len, "matched": self.matched, "index_sum": self.index_sum,
            "mismatches": self.mismatches, "alg": self.alg,
        })
    }
}

/// The rules and the trace of one set.
pub fn workload(
    set: Set,
    fam: Family,
    n: usize,
    trace_len: usize,
    seed: u64,
) -> (Vec<Rule>, Vec<Key>) {
    let n = n.max(1);
    match (set, fam) {
        (Set::Xr5, Family::V4) => {
            // Sixteen streams as in the XR-5 log line: 140.0.i.1 -> 141.100.i.1.
            let src: Vec<u32> = (0..16).map(|i| 0x8c00_0001 | i << 8).collect();
            let dst: Vec<u32> = (0..16).map(|i| 0x8d64_0001 | i << 8).collect();
            let rules = gen::xr5(n - 1, &src, &dst, seed);
            let keys = gen::xr5_traffic(&src, &dst, 1024, trace_len, seed + 1);
            (rules, keys)
        }
        (Set::Xr5, Family::V6) => {
            let src: Vec<u128> = (0..16).map(|i| 0x2001_0db8_0140u128 << 80 | i).collect();
            let dst: Vec<u128> = (0..16).map(|i| 0x2001_0db8_0141u128 << 80 | i).collect();
            let rules = gen::xr5(n - 1, &src, &dst, seed);
            let keys = gen::xr5_traffic(&src, &dst, 1024, trace_len, seed + 1);
            (rules, keys)
        }
        (Set::ClassBench(kind), _) => {
            let rules = gen::classbench(kind, fam, n, seed);
            let keys = gen::trace(&rules, trace_len, seed + 1);
            (rules, keys)
        }
    }
}

// ------------------------------------------------------------------------- files for the harness

/// The prefix a range of `bits`-bit values is, if it is one.
fn prefix_of(lo: u128, hi: u128, bits: u32) -> Option<u8> {
    let max = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    if lo == 0 && hi == max {
        return Some(0);
    }
    let size = hi.checked_sub(lo)?.checked_add(1)?;
    if !size.is_power_of_two() || lo & (size - 1) != 0 {
        return None;
    }
    Some((bits - size.trailing_zeros()) as u8)
}

fn words(r: &Rule, first: Dim) -> [(u32, u32); 4] {
    let i = first as usize;
    [
        r.ranges[i],
        r.ranges[i + 1],
        r.ranges[i + 2],
        r.ranges[i + 3],
    ]
}

/// An address range of a rule as ADDR/LEN, if rte_acl's layout for `fam` can hold it.
fn addr_field(r: &Rule, fam: Family, first: Dim) -> Option<String> {
    let w = words(r, first);
    match fam {
        Family::V4 => {
            if w[1..].iter().any(|&x| x != (0, u32::MAX)) {
                return None;
            }
            let len = prefix_of(w[0].0 as u128, w[0].1 as u128, 32)?;
            Some(format!("{}/{len}", std::net::Ipv4Addr::from(w[0].0)))
        }
        Family::V6 => {
            let lo = w.iter().fold(0u128, |a, x| a << 32 | x.0 as u128);
            let hi = w.iter().fold(0u128, |a, x| a << 32 | x.1 as u128);
            let len = prefix_of(lo, hi, 128)?;
            // The words must be exactly what that prefix makes (a word-wise rule may not be).
            let p = Rule::any().src_v6(lo, len);
            (words(&p, Dim::Src0) == w).then(|| format!("{}/{len}", std::net::Ipv6Addr::from(lo)))
        }
    }
}

/// One rule as a ClassBench filter line, or why rte_acl's 5-tuple layout cannot express it.
pub fn classbench_line(r: &Rule, fam: Family) -> Result<String, String> {
    let et = r.range(Dim::EtherType);
    if !(r.is_wild(Dim::EtherType) || et == (fam.ethertype(), fam.ethertype())) {
        return Err(format!("EtherType {et:?} is not {}", fam.name()));
    }
    for d in [
        Dim::Vlan,
        Dim::Pcp,
        Dim::EthSrcHi,
        Dim::EthSrcLo,
        Dim::EthDstHi,
        Dim::EthDstLo,
        Dim::Dscp,
        Dim::Exp,
        Dim::Frag,
        Dim::TcpFlags,
    ] {
        if !r.is_wild(d) {
            return Err(format!("{d:?} is not a 5-tuple field"));
        }
    }
    if r.tcp_flags.is_some() {
        return Err("TCP flags are not a 5-tuple field".into());
    }
    let src = addr_field(r, fam, Dim::Src0).ok_or("the source is not a prefix")?;
    let dst = addr_field(r, fam, Dim::Dst0).ok_or("the destination is not a prefix")?;
    let proto = match r.range(Dim::Proto) {
        (0, 0xff) => "0x00/0x00".to_string(),
        (p, q) if p == q => format!("0x{p:02x}/0xff"),
        other => return Err(format!("protocol range {other:?}")),
    };
    let (sl, sh) = r.range(Dim::SrcPort);
    let (dl, dh) = r.range(Dim::DstPort);
    Ok(format!("@{src}\t{dst}\t{sl} : {sh}\t{dl} : {dh}\t{proto}"))
}

fn write_rules(path: &Path, rules: &[Rule], fam: Family) -> Result<(), String> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| e.to_string())?);
    for (i, r) in rules.iter().enumerate() {
        let line = classbench_line(r, fam).map_err(|e| format!("rule {i}: {e}"))?;
        writeln!(f, "{line}").map_err(|e| e.to_string())?;
    }
    f.flush().map_err(|e| e.to_string())
}

/// The bytes rte_acl reads for one key (see benches/dpdk/README.md): protocol, 3 bytes of pad,
/// source, destination, source port, destination port, all in network byte order.
pub fn record(k: &Key, fam: Family) -> Vec<u8> {
    let mut b = vec![k.get(Dim::Proto) as u8, 0, 0, 0];
    let n = match fam {
        Family::V4 => 1,
        Family::V6 => 4,
    };
    for first in [Dim::Src0, Dim::Dst0] {
        for i in 0..n {
            b.extend_from_slice(&k.0[first as usize + i].to_be_bytes());
        }
    }
    b.extend_from_slice(&(k.get(Dim::SrcPort) as u16).to_be_bytes());
    b.extend_from_slice(&(k.get(Dim::DstPort) as u16).to_be_bytes());
    b
}

fn write_trace(path: &Path, keys: &[Key], fam: Family) -> Result<(), String> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| e.to_string())?);
    for k in keys {
        f.write_all(&record(k, fam)).map_err(|e| e.to_string())?;
    }
    f.flush().map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------------- the harness

struct DpdkRun {
    json: serde_json::Value,
    results: Vec<u32>,
}

fn run_dpdk(
    fam: Family,
    rules: &Path,
    trace: &Path,
    results: &Path,
    seconds: f64,
) -> Result<DpdkRun, String> {
    let bin = crate::dpdk_harness("acl_bench")?;
    let fam_arg = match fam {
        Family::V4 => "v4",
        Family::V6 => "v6",
    };
    let out = Command::new(bin)
        .arg(fam_arg)
        .arg(rules)
        .arg(trace)
        .arg(seconds.to_string())
        .arg(results)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "acl_bench failed: {}",
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    let json =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("acl_bench: bad JSON: {e}"))?;
    let raw = std::fs::read(results).map_err(|e| format!("acl_bench results: {e}"))?;
    let results = raw
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok(DpdkRun { json, results })
}

// ------------------------------------------------------------------------------------- Linerate

/// Classifications per second over the trace in batches, for at least `seconds`.
fn measure(c: &Classifier, trace: &[Key], batch: usize, seconds: f64) -> f64 {
    let mut out = vec![0u32; batch];
    let mut n = 0u64;
    let mut sink = 0u32;
    let start = Instant::now();
    'run: loop {
        for (i, chunk) in trace.chunks(batch).enumerate() {
            c.classify_batch(chunk, &mut out[..chunk.len()]);
            sink = sink.wrapping_add(out[0]);
            n += chunk.len() as u64;
            if i % 64 == 63 && start.elapsed().as_secs_f64() >= seconds {
                break 'run;
            }
        }
        if start.elapsed().as_secs_f64() >= seconds {
            break;
        }
    }
    std::hint::black_box(sink);
    n as f64 / start.elapsed().as_secs_f64()
}

fn summary(results: &[u32]) -> (u64, u64) {
    results
        .iter()
        .filter(|&&r| r != NO_MATCH)
        .fold((0, 0), |(m, s), &r| (m + 1, s + r as u64))
}

/// Runs every set, family and size; hands each workload's rows (Linerate, then rte_acl) to `each`
/// as soon as they are measured, and returns them all.
pub fn run(o: &Opts, mut each: impl FnMut(&[Row])) -> Result<Vec<Row>, String> {
    let dir = o.workdir.join(format!("classify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    let mut res = Ok(());
    'all: for &set in &o.sets {
        for &fam in &o.families {
            for &n in &o.sizes {
                match run_one(o, &dir, set, fam, n) {
                    Ok(r) => {
                        each(&r);
                        rows.extend(r);
                    }
                    Err(e) => {
                        res = Err(e);
                        break 'all;
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    res.map(|_| rows)
}

fn run_one(o: &Opts, dir: &Path, set: Set, fam: Family, n: usize) -> Result<Vec<Row>, String> {
    let batch = o.batch.clamp(1, 4096);
    let (rules, trace) = workload(set, fam, n, o.trace_len.max(1), o.seed);
    eprintln!(
        "classify: {} {} {} rules, {} keys",
        set.name(),
        fam.name(),
        rules.len(),
        trace.len()
    );
    let t0 = Instant::now();
    let c = Classifier::compile(&rules);
    let build_s = t0.elapsed().as_secs_f64();
    let mut ours = vec![0u32; trace.len()];
    for (k, out) in trace.chunks(batch).zip(ours.chunks_mut(batch)) {
        c.classify_batch(k, out);
    }
    let rate = measure(&c, &trace, batch, o.seconds);
    let (matched, index_sum) = summary(&ours);
    let mut rows = vec![Row {
        set: set.name().into(),
        family: fam,
        rules: rules.len(),
        engine: "linerate".into(),
        mclass: rate / 1e6,
        ns_per_class: 1e9 / rate,
        build_s,
        bytes: c.bytes(),
        trace_len: trace.len(),
        matched,
        index_sum,
        mismatches: None,
        alg: String::new(),
    }];
    drop(c);
    if !o.dpdk {
        return Ok(rows);
    }
    let stem = format!("{}-{}-{}", set.name(), fam.name(), rules.len());
    let rf = dir.join(format!("{stem}.rules"));
    let tf = dir.join(format!("{stem}.trace"));
    let xf = dir.join(format!("{stem}.results"));
    write_rules(&rf, &rules, fam)?;
    write_trace(&tf, &trace, fam)?;
    let d = run_dpdk(fam, &rf, &tf, &xf, o.seconds)?;
    for p in [&rf, &tf, &xf] {
        let _ = std::fs::remove_file(p);
    }
    if d.results.len() != ours.len() {
        return Err(format!(
            "acl_bench returned {} results for {} keys",
            d.results.len(),
            ours.len()
        ));
    }
    let bad: Vec<usize> = (0..ours.len())
        .filter(|&i| ours[i] != d.results[i])
        .collect();
    for &i in bad.iter().take(3) {
        eprintln!(
            "classify: mismatch on key {i} {:?}: linerate {}, rte_acl {}",
            trace[i], ours[i] as i64, d.results[i] as i64
        );
    }
    rows[0].mismatches = Some(bad.len());
    let f = |k: &str| d.json.get(k).and_then(|x| x.as_f64()).unwrap_or(0.0);
    let (dm, ds) = summary(&d.results);
    if (dm, ds) != (f("matched_one_pass") as u64, f("index_sum_one_pass") as u64) {
        eprintln!("classify: warning: acl_bench's checksum disagrees with its results file");
    }
    rows.push(Row {
        set: set.name().into(),
        family: fam,
        rules: f("rules") as usize,
        engine: "rte_acl".into(),
        mclass: f("mclass_per_s"),
        ns_per_class: f("ns_per_class"),
        build_s: f("build_s"),
        bytes: f("bytes") as usize,
        trace_len: f("trace_len") as usize,
        matched: dm,
        index_sum: ds,
        mismatches: Some(bad.len()),
        alg: d
            .json
            .get("alg")
            .and_then(|x| x.as_str())
            .unwrap_or("")
            .to_string(),
    });
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_sets_are_5_tuple_sets() {
        for set in ["xr5", "acl", "fw", "ipc"] {
            for fam in [Family::V4, Family::V6] {
                let (rules, keys) = workload(set.parse().unwrap(), fam, 500, 100, 1);
                assert_eq!(rules.len(), 500);
                for r in &rules {
                    classbench_line(r, fam).unwrap();
                }
                let len = if fam == Family::V4 { 16 } else { 40 };
                assert!(keys.iter().all(|k| record(k, fam).len() == len));
            }
        }
    }

    #[test]
    fn lines_and_records_are_what_the_harness_reads() {
        let r = Rule::any()
            .src_v4(0x0a01_0000, 16)
            .dst_v4(0xc0a8_0101, 32)
            .proto(17)
            .src_ports(1000, 2000);
        assert_eq!(
            classbench_line(&r, Family::V4).unwrap(),
            "@10.1.0.0/16\t192.168.1.1/32\t1000 : 2000\t0 : 65535\t0x11/0xff"
        );
        assert_eq!(
            classbench_line(&Rule::any(), Family::V6).unwrap(),
            "@::/0\t::/0\t0 : 65535\t0 : 65535\t0x00/0x00"
        );
        let r6 = Rule::any().src_v6(0x2001_0db8_0000_0000_0000_0000_0000_0000, 40);
        assert!(classbench_line(&r6, Family::V6)
            .unwrap()
            .starts_with("@2001:db8::/40\t::/0\t"));
        assert!(classbench_line(&r6, Family::V4).is_err());
        assert!(classbench_line(&Rule::any().vlan(5), Family::V4).is_err());
        // A word-wise IPv6 rule that is no prefix.
        let odd = Rule::any().ipv6().exact(Dim::Src2, 7);
        assert!(classbench_line(&odd, Family::V6).is_err());
        let mut k = Key::default();
        k.set(Dim::Proto, 6);
        k.set(Dim::Src0, 0x0102_0304);
        k.set(Dim::Dst0, 0x0506_0708);
        k.set(Dim::SrcPort, 0x1234);
        k.set(Dim::DstPort, 80);
        assert_eq!(
            record(&k, Family::V4),
            [6, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0x12, 0x34, 0, 80]
        );
    }
}
