//! CPU per frame: what a trial cost the machine, the tester and the device under test.
//!
//! Frames per second alone hide what a device spends to forward them: on a shared machine a
//! kernel that forwards 0.4 Mpps on one core and a user-space router that does the same on one
//! busy-polling core are not the same result. Around each counted trial the meter reads:
//!
//! - the whole machine's busy time from `/proc/stat` (every CPU: user + nice + system + irq +
//!   softirq; idle, iowait and steal left out), in the kernel's clock ticks (10 ms per CPU
//!   here, so a trial should last a second or more for the figure to mean something);
//! - the tester process's own time (`getrusage(RUSAGE_SELF)`: user + system, every thread);
//! - optionally the device's own account of its work (a Linerate daemon's per-worker busy time,
//!   read from its API by [`crate::external`]);
//! - the irq + softirq time of each CPU: with the tester pinned to its own core and the device's
//!   receive work steered to the others, the softirq time of the others is the kernel's packet
//!   work for the device (a kernel device's forwarding; a packet-socket device's receive), and
//!   unlike the machine's total it does not count other processes' user time.
//!
//! Each is divided by the frames the device forwarded in the trial (the frames the tester
//! received where they belonged). What the machine spent minus what the tester spent is the
//! device's share, with every other process on the machine in it: the figures are only as clean
//! as the machine is quiet. Without `CONFIG_IRQ_TIME_ACCOUNTING` (the kernel here), softirq work
//! a CPU does while the tester thread is current (delivering frames to the tester's packet
//! sockets, for example) is charged to the tester, which is what it is for.

use serde::Serialize;

/// One reading of the counters the meter differences.
#[derive(Clone, Debug, Default)]
pub struct CpuSample {
    /// Busy ticks per CPU (user + nice + system + irq + softirq).
    pub per_cpu: Vec<u64>,
    /// The same, all CPUs together (the `cpu` line).
    pub machine: u64,
    /// Irq + softirq ticks per CPU.
    pub per_cpu_irq: Vec<u64>,
    /// This process's user + system time, ns.
    pub process_ns: u64,
}

/// Clock ticks per second of `/proc/stat` (USER_HZ).
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a constant of the system.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Busy ticks of one `/proc/stat` cpu line's fields (after the name): user nice system idle
/// iowait irq softirq steal guest guest_nice. Guest time is already inside user and nice.
fn busy_of(fields: &[u64]) -> u64 {
    let f = |i: usize| fields.get(i).copied().unwrap_or(0);
    f(0) + f(1) + f(2) + f(5) + f(6)
}

fn irq_of(fields: &[u64]) -> u64 {
    fields.get(5).copied().unwrap_or(0) + fields.get(6).copied().unwrap_or(0)
}

/// `/proc/stat`'s busy ticks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// All CPUs (the `cpu` line).
    pub machine: u64,
    /// Per CPU.
    pub per_cpu: Vec<u64>,
    /// Irq + softirq per CPU.
    pub per_cpu_irq: Vec<u64>,
}

/// Parses `/proc/stat`'s text.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let mut machine = None;
    let mut per = Vec::new();
    let mut irq = Vec::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let Some(name) = it.next() else { continue };
        if !name.starts_with("cpu") {
            continue;
        }
        let fields: Vec<u64> = it.filter_map(|x| x.parse().ok()).collect();
        if name == "cpu" {
            machine = Some(busy_of(&fields));
        } else if name[3..].parse::<usize>().is_ok() {
            per.push(busy_of(&fields));
            irq.push(irq_of(&fields));
        }
    }
    Some(Stat {
        machine: machine?,
        per_cpu: per,
        per_cpu_irq: irq,
    })
}

fn process_ns() -> u64 {
    // SAFETY: getrusage writes one rusage struct, which we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

impl CpuSample {
    pub fn now() -> CpuSample {
        let st = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| parse_stat(&t))
            .unwrap_or_default();
        CpuSample {
            per_cpu: st.per_cpu,
            machine: st.machine,
            per_cpu_irq: st.per_cpu_irq,
            process_ns: process_ns(),
        }
    }
}

fn diff(a: &[u64], b: &[u64], hz: f64) -> Vec<f64> {
    b.iter()
        .zip(a.iter().chain(std::iter::repeat(&0)))
        .map(|(y, x)| y.saturating_sub(*x) as f64 / hz)
        .collect()
}

/// What one trial cost, and the frames it is divided by.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CpuUsage {
    /// Seconds the measurement covered: the trial and its drain.
    pub wall_s: f64,
    /// CPUs in the machine.
    pub cpus: usize,
    /// CPU-seconds the machine was busy, all CPUs.
    pub machine_s: f64,
    /// Each CPU's busy seconds (which core did the work).
    pub per_cpu_s: Vec<f64>,
    /// Each CPU's irq + softirq seconds.
    pub per_cpu_irq_s: Vec<f64>,
    /// The irq + softirq seconds of every CPU but the tester's, when the tester is pinned: the
    /// kernel's packet work for the device.
    pub dut_kernel_s: Option<f64>,
    /// CPU-seconds of the tester process.
    pub tester_s: f64,
    /// The device's own busy time as it reports it (a Linerate daemon's workers), seconds.
    pub dut_busy_s: Option<f64>,
    /// Frames the device forwarded (received by the tester where they belonged).
    pub frames: u64,
}

impl CpuUsage {
    /// The usage between two samples, over `frames` frames.
    pub fn between(a: &CpuSample, b: &CpuSample, wall_s: f64, frames: u64) -> CpuUsage {
        let hz = ticks_per_second();
        CpuUsage {
            wall_s,
            cpus: b.per_cpu.len(),
            machine_s: b.machine.saturating_sub(a.machine) as f64 / hz,
            per_cpu_s: diff(&a.per_cpu, &b.per_cpu, hz),
            per_cpu_irq_s: diff(&a.per_cpu_irq, &b.per_cpu_irq, hz),
            dut_kernel_s: None,
            tester_s: b.process_ns.saturating_sub(a.process_ns) as f64 * 1e-9,
            dut_busy_s: None,
            frames,
        }
    }

    fn per_frame(&self, s: f64) -> Option<f64> {
        (self.frames > 0).then(|| s * 1e9 / self.frames as f64)
    }

    /// Whole machine, ns per forwarded frame.
    pub fn machine_ns(&self) -> Option<f64> {
        self.per_frame(self.machine_s)
    }

    /// The tester process, ns per forwarded frame.
    pub fn tester_ns(&self) -> Option<f64> {
        self.per_frame(self.tester_s)
    }

    /// The machine minus the tester: the device's share (and anything else running), ns per
    /// forwarded frame. Never below zero (tick sampling can make the difference slightly
    /// negative on a nearly idle device).
    pub fn dut_ns(&self) -> Option<f64> {
        self.per_frame((self.machine_s - self.tester_s).max(0.0))
    }

    /// The device's own busy time, ns per forwarded frame, when it reports one.
    pub fn dut_busy_ns(&self) -> Option<f64> {
        self.dut_busy_s.and_then(|s| self.per_frame(s))
    }

    /// Counts the irq + softirq time of every CPU but `tester_core` as the kernel's work for
    /// the device.
    pub fn set_dut_kernel(&mut self, tester_core: usize) {
        self.dut_kernel_s = Some(
            self.per_cpu_irq_s
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != tester_core)
                .map(|(_, s)| s)
                .sum(),
        );
    }

    /// The kernel's packet work on the device's CPUs, ns per forwarded frame.
    pub fn dut_kernel_ns(&self) -> Option<f64> {
        self.dut_kernel_s.and_then(|s| self.per_frame(s))
    }

    /// Cores the machine kept busy on average.
    pub fn machine_cores(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.machine_s / self.wall_s
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 5 50 1000 7 3 2 9 4 0\n\
                        cpu0 60 5 20 500 3 1 1 4 4 0\n\
                        cpu1 40 0 30 500 4 2 1 5 0 0\n\
                        intr 12345\nctxt 999\n";

    #[test]
    fn busy_is_user_nice_system_irq_softirq() {
        let st = parse_stat(STAT).unwrap();
        assert_eq!(st.machine, 100 + 5 + 50 + 3 + 2);
        assert_eq!(st.per_cpu, vec![60 + 5 + 20 + 1 + 1, 40 + 30 + 2 + 1]);
        assert_eq!(st.per_cpu_irq, vec![1 + 1, 2 + 1]);
        assert!(parse_stat("intr 1\n").is_none());
    }

    #[test]
    fn per_frame_figures_divide_by_forwarded_frames() {
        let hz = ticks_per_second();
        let a = CpuSample {
            per_cpu: vec![0, 0],
            machine: 0,
            per_cpu_irq: vec![0, 0],
            process_ns: 1_000_000_000,
        };
        let b = CpuSample {
            per_cpu: vec![hz as u64, hz as u64 / 2],
            machine: (hz * 1.5) as u64,
            per_cpu_irq: vec![hz as u64 / 10, hz as u64 / 5],
            process_ns: 2_000_000_000,
        };
        let mut u = CpuUsage::between(&a, &b, 1.0, 1_000_000);
        assert_eq!(u.cpus, 2);
        assert!((u.machine_s - 1.5).abs() < 1e-9);
        assert!((u.machine_ns().unwrap() - 1500.0).abs() < 1e-6);
        assert!((u.tester_ns().unwrap() - 1000.0).abs() < 1e-6);
        assert!((u.dut_ns().unwrap() - 500.0).abs() < 1e-6);
        assert!(u.dut_busy_ns().is_none());
        u.dut_busy_s = Some(0.25);
        assert!((u.dut_busy_ns().unwrap() - 250.0).abs() < 1e-6);
        // The tester on CPU 0: CPU 1's softirq is the device's.
        assert!(u.dut_kernel_ns().is_none());
        u.set_dut_kernel(0);
        assert!((u.dut_kernel_ns().unwrap() - 200.0).abs() < 1e-6);
        u.frames = 0;
        assert!(u.machine_ns().is_none());
    }
}
