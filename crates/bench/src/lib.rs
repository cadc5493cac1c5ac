//! The tester and the benchmarks behind `linerate bench`. Each benchmark prints figures beside a
//! peer measured in the same run (DPDK's rte_lpm / rte_lpm6 for the lookup engines) and writes
//! rows of JSON for machines. Measurement lives here; nothing in the tests times anything.

pub mod forward;
pub mod lpm;

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
