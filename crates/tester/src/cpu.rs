//! CPU per frame: what a trial cost the machine, the tester and the device under test.
//!
//! Frames per second alone hide what a device spends to forward them: on a shared machine a
//! kernel that forwards 0.4 Mpps on one core and a user-space router that does the same on one
//! busy-polling core are not the same result. Around each counted trial the meter reads:
//!
//! - every CPU's busy time from `/proc/stat`: the window's length minus the CPU's idle, iowait
//!   and steal time. Not the sum of user + nice + system + irq + softirq: those are sampled at
//!   the scheduler tick, and a tickless kernel (`NO_HZ_IDLE`, this one) stops the tick while a
//!   CPU idles, so work done in bursts shorter than a tick on an otherwise idle CPU is never
//!   sampled. A kernel forwarding 200,000 frames/s on its own core showed 0.33 s of such ticks
//!   in 5 s where the CPU was not idle for 2.56 s. Idle time is accounted exactly (from the
//!   tickless idle entry and exit), so its complement is the busy time. The tick-sampled sum is
//!   kept beside it for comparison;
//! - the tester process's own time (`getrusage(RUSAGE_SELF)`: user + system, every thread; the
//!   scheduler accounts a running thread's time exactly);
//! - optionally the device's own account of its work (a Linerate daemon's per-worker busy time,
//!   read from its API by [`crate::external`]);
//! - with the tester pinned to a core, the busy time of the other CPUs (where the device's work
//!   is steered) and their irq + softirq ticks (the kernel's packet work there; tick-sampled, so
//!   only meaningful on a CPU that is busy anyway, such as a polling router's).
//!
//! Each is divided by the frames the device forwarded in the trial (the frames the tester
//! received where they belonged). The figures are only as clean as the machine is quiet: every
//! other process's time is in the machine's. Without `CONFIG_IRQ_TIME_ACCOUNTING` (the kernel
//! here), softirq work a CPU does while the tester thread is current (delivering frames to the
//! tester's packet sockets, for example) is charged to the tester, which is what it is for.

use std::time::Instant;

use serde::Serialize;

/// One `/proc/stat` CPU line, in ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTicks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTicks {
    fn from_fields(f: &[u64]) -> CpuTicks {
        let g = |i: usize| f.get(i).copied().unwrap_or(0);
        CpuTicks {
            user: g(0),
            nice: g(1),
            system: g(2),
            idle: g(3),
            iowait: g(4),
            irq: g(5),
            softirq: g(6),
            steal: g(7),
        }
    }

    /// The tick-sampled busy time (guest time is already inside user and nice).
    pub fn ticked(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq
    }

    /// Time the CPU was not ours to measure as busy: idle, waiting for I/O, or taken by the
    /// hypervisor.
    pub fn not_busy(&self) -> u64 {
        self.idle + self.iowait + self.steal
    }

    pub fn irq_softirq(&self) -> u64 {
        self.irq + self.softirq
    }
}

/// Parses `/proc/stat`'s per-CPU lines (`cpu0`, `cpu1`, ...), in order.
pub fn parse_stat(text: &str) -> Option<Vec<CpuTicks>> {
    let mut per = Vec::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let Some(name) = it.next() else { continue };
        if name.len() > 3 && name.starts_with("cpu") && name[3..].parse::<usize>().is_ok() {
            let fields: Vec<u64> = it.filter_map(|x| x.parse().ok()).collect();
            per.push(CpuTicks::from_fields(&fields));
        }
    }
    (!per.is_empty()).then_some(per)
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

fn process_ns() -> u64 {
    // SAFETY: a zeroed rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage struct, which we own.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// One reading of the counters the meter differences.
#[derive(Clone, Debug)]
pub struct CpuSample {
    pub at: Instant,
    pub per_cpu: Vec<CpuTicks>,
    /// This process's user + system time, ns.
    pub process_ns: u64,
}

impl Default for CpuSample {
    fn default() -> Self {
        CpuSample {
            at: Instant::now(),
            per_cpu: Vec::new(),
            process_ns: 0,
        }
    }
}

impl CpuSample {
    pub fn now() -> CpuSample {
        let per_cpu = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| parse_stat(&t))
            .unwrap_or_default();
        CpuSample {
            at: Instant::now(),
            per_cpu,
            process_ns: process_ns(),
        }
    }
}

/// What one trial cost, and the frames it is divided by.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CpuUsage {
    /// Seconds the measurement covered: the trial and its drain.
    pub wall_s: f64,
    /// CPUs in the machine.
    pub cpus: usize,
    /// CPU-seconds the machine was busy: per CPU, the window minus its idle, iowait and steal.
    pub machine_s: f64,
    /// Each CPU's busy seconds, the same way (which core did the work).
    pub per_cpu_s: Vec<f64>,
    /// The tick-sampled user + nice + system + irq + softirq seconds, all CPUs (under-counts
    /// bursts on idle CPUs; kept for comparison).
    pub machine_ticked_s: f64,
    /// Each CPU's irq + softirq seconds (tick-sampled).
    pub per_cpu_irq_s: Vec<f64>,
    /// CPU-seconds of the tester process.
    pub tester_s: f64,
    /// The device's own busy time as it reports it (a Linerate daemon's workers), seconds.
    pub dut_busy_s: Option<f64>,
    /// With the tester pinned: the busy seconds of every other CPU (where the device's work is
    /// steered)...
    pub dut_cores_s: Option<f64>,
    /// ... and their irq + softirq seconds (tick-sampled).
    pub dut_kernel_s: Option<f64>,
    /// Frames the device forwarded (received by the tester where they belonged).
    pub frames: u64,
}

impl CpuUsage {
    /// The usage between two samples, over `frames` frames.
    pub fn between(a: &CpuSample, b: &CpuSample, frames: u64) -> CpuUsage {
        let hz = ticks_per_second();
        let wall = b.at.saturating_duration_since(a.at).as_secs_f64();
        let zero = CpuTicks::default();
        let pairs: Vec<(&CpuTicks, &CpuTicks)> = b
            .per_cpu
            .iter()
            .enumerate()
            .map(|(i, y)| (a.per_cpu.get(i).unwrap_or(&zero), y))
            .collect();
        let d = |x: u64, y: u64| y.saturating_sub(x) as f64 / hz;
        let per_cpu_s: Vec<f64> = pairs
            .iter()
            .map(|(x, y)| (wall - d(x.not_busy(), y.not_busy())).clamp(0.0, wall))
            .collect();
        CpuUsage {
            wall_s: wall,
            cpus: per_cpu_s.len(),
            machine_s: per_cpu_s.iter().sum(),
            per_cpu_s,
            machine_ticked_s: pairs.iter().map(|(x, y)| d(x.ticked(), y.ticked())).sum(),
            per_cpu_irq_s: pairs
                .iter()
                .map(|(x, y)| d(x.irq_softirq(), y.irq_softirq()))
                .collect(),
            tester_s: b.process_ns.saturating_sub(a.process_ns) as f64 * 1e-9,
            dut_busy_s: None,
            dut_cores_s: None,
            dut_kernel_s: None,
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
    /// forwarded frame. Never below zero.
    pub fn dut_ns(&self) -> Option<f64> {
        self.per_frame((self.machine_s - self.tester_s).max(0.0))
    }

    /// The device's own busy time, ns per forwarded frame, when it reports one.
    pub fn dut_busy_ns(&self) -> Option<f64> {
        self.dut_busy_s.and_then(|s| self.per_frame(s))
    }

    /// Counts every CPU but `tester_core` as the device's: their busy time and their irq +
    /// softirq time.
    pub fn set_tester_core(&mut self, tester_core: usize) {
        let others = |v: &[f64]| -> f64 {
            v.iter()
                .enumerate()
                .filter(|(i, _)| *i != tester_core)
                .map(|(_, s)| s)
                .sum()
        };
        self.dut_cores_s = Some(others(&self.per_cpu_s));
        self.dut_kernel_s = Some(others(&self.per_cpu_irq_s));
    }

    /// The busy time of the CPUs off the tester's core, ns per forwarded frame.
    pub fn dut_cores_ns(&self) -> Option<f64> {
        self.dut_cores_s.and_then(|s| self.per_frame(s))
    }

    /// Their irq + softirq time (tick-sampled), ns per forwarded frame.
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
    use std::time::Duration;

    const STAT: &str = "cpu  100 5 50 1000 7 3 2 9 4 0\n\
                        cpu0 60 5 20 500 3 1 1 4 4 0\n\
                        cpu1 40 0 30 500 4 2 1 5 0 0\n\
                        intr 12345\nctxt 999\n";

    #[test]
    fn stat_lines_parse_per_cpu() {
        let st = parse_stat(STAT).unwrap();
        assert_eq!(st.len(), 2);
        assert_eq!(st[0].ticked(), 60 + 5 + 20 + 1 + 1);
        assert_eq!(st[1].not_busy(), 500 + 4 + 5);
        assert_eq!(st[1].irq_softirq(), 3);
        assert!(parse_stat("cpu  1 2 3\nintr 1\n").is_none());
    }

    #[test]
    fn busy_is_what_was_not_idle_and_figures_divide_by_forwarded_frames() {
        let hz = ticks_per_second() as u64;
        let t0 = Instant::now();
        let tick = |idle: u64, irq: u64, user: u64| CpuTicks {
            idle,
            softirq: irq,
            user,
            ..Default::default()
        };
        let a = CpuSample {
            at: t0,
            per_cpu: vec![tick(0, 0, 0), tick(0, 0, 0)],
            process_ns: 1_000_000_000,
        };
        // One second: CPU 0 never idle (the tester), CPU 1 idle half of it, though its ticks
        // saw only a tenth of a second of softirq.
        let b = CpuSample {
            at: t0 + Duration::from_secs(1),
            per_cpu: vec![tick(0, 0, hz), tick(hz / 2, hz / 10, 0)],
            process_ns: 2_000_000_000,
        };
        let mut u = CpuUsage::between(&a, &b, 1_000_000);
        assert_eq!(u.cpus, 2);
        assert!((u.machine_s - 1.5).abs() < 1e-9, "{u:?}");
        assert!((u.machine_ticked_s - 1.1).abs() < 1e-9, "{u:?}");
        assert!((u.machine_ns().unwrap() - 1500.0).abs() < 1e-6);
        assert!((u.tester_ns().unwrap() - 1000.0).abs() < 1e-6);
        assert!((u.dut_ns().unwrap() - 500.0).abs() < 1e-6);
        assert!(u.dut_busy_ns().is_none() && u.dut_cores_ns().is_none());
        u.dut_busy_s = Some(0.25);
        assert!((u.dut_busy_ns().unwrap() - 250.0).abs() < 1e-6);
        u.set_tester_core(0);
        assert!((u.dut_cores_ns().unwrap() - 500.0).abs() < 1e-6);
        assert!((u.dut_kernel_ns().unwrap() - 100.0).abs() < 1e-6);
        u.frames = 0;
        assert!(u.machine_ns().is_none());
    }
}
