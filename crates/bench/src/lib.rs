//! Peer benchmarks behind `linerate bench lpm|classify|forward|mpls|atm`: each prints figures beside a peer
//! measured in the same run (DPDK's rte_lpm / rte_lpm6 / rte_fib for the lookup engines, rte_acl
//! for the classifier) and writes rows of JSON for machines. The tester (RFC 2544/2889, scenarios) is the `tester` crate. Measurement
//! lives here and there; nothing in the tests times anything.

pub mod atm;
pub mod classify;
pub mod dlsw;
pub mod forward;
pub mod fpm;
pub mod fpm_churn;
pub mod gtp;
pub mod ldp;
pub mod lpm;
pub mod mac;
pub mod mpls;

use std::path::PathBuf;

/// Path of DPDK harness `name` (`lpm_bench`, `acl_bench`: benches/dpdk), building them if needed.
pub fn dpdk_harness(name: &str) -> Result<PathBuf, String> {
    let root = repo_root();
    let bin = root.join("target/dpdk").join(name);
    if bin.exists() {
        return Ok(bin);
    }
    let st = std::process::Command::new("bash")
        .arg(root.join("benches/dpdk/build.sh"))
        .status()
        .map_err(|e| format!("cannot run benches/dpdk/build.sh: {e}"))?;
    if !st.success() || !bin.exists() {
        return Err(
            "building the DPDK harness failed (apt-get install libdpdk-dev pkg-config)".into(),
        );
    }
    Ok(bin)
}

/// The repository: the working directory or a parent holding benches/dpdk, else the one this
/// crate was built from.
fn repo_root() -> PathBuf {
    let mut d = std::env::current_dir().unwrap_or_default();
    loop {
        if d.join("benches/dpdk/build.sh").exists() {
            return d;
        }
        if !d.pop() {
            return PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        }
    }
}

/// The machine's nominal clock, for quoting cycles (perf counters are not available in the VMs
/// this project runs on, so cycles are derived from time).
pub fn cpu_ghz() -> f64 {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("cpu MHz"))
                .and_then(|l| l.split(':').nth(1))
                .and_then(|v| v.trim().parse::<f64>().ok())
        })
        .map(|mhz| mhz / 1000.0)
        .unwrap_or(2.6)
}
