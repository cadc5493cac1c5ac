//! CPU accounting, the routers' `show processes cpu` habit: per thread, the CPU it used and, for
//! a worker, the part of it that was work (vectors that carried frames) rather than polling,
//! averaged over the last 5 seconds, minute and 5 minutes. For workers, the router's own
//! threads (punt, FPM, API, services, ...) and the FRR daemons running beside it.
//!
//! A sampler thread reads, once a second: every thread of this process (`/proc/self/task/*/stat`:
//! utime + stime, which the kernel scales so that their sum is the thread's exact run time, in
//! clock ticks); each worker's busy time (its own count, `WorkerCounters::busy_ns`); and every
//! process named as an FRR daemon (`/proc/PID/stat`, all its threads). It keeps 5 minutes of
//! samples; an average over a window is the difference between the newest sample and the one
//! that window ago (or the oldest, early on) over the time between them. A polling worker uses a
//! whole CPU whatever its load, which is why its busy share is the figure that says how loaded
//! it is.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The daemons of FRR whose CPU is shown beside the router's.
pub const FRR_DAEMONS: &[&str] = &[
    "zebra", "bgpd", "ospfd", "ospf6d", "ldpd", "pimd", "pim6d", "isisd", "bfdd", "staticd",
    "ripd", "ripngd", "watchfrr", "mgmtd",
];

/// The windows averaged over, in seconds.
pub const WINDOWS: [u64; 3] = [5, 60, 300];

/// What a row is (the API's name for it).
pub use api::views::ThreadKind as Kind;
pub use api::views::{CpuRow, CpuView};

/// One thread (or FRR process) in one sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    pub name: String,
    pub kind: Kind,
    /// Thread id, or process id for FRR.
    pub id: u32,
    /// CPU time used, nanoseconds.
    pub cpu_ns: u64,
    /// For a worker: time spent on vectors that carried frames, nanoseconds.
    pub busy_ns: Option<u64>,
    pub core: Option<usize>,
}

struct Sample {
    at: Instant,
    rows: BTreeMap<(Kind, String, u32), Reading>,
}

/// The sampler and its history.
pub struct CpuMonitor {
    history: Arc<Mutex<VecDeque<Sample>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Where the sampler gets the workers' busy time and cores: `(worker id, busy_ns, core)`.
pub type WorkerSource = Box<dyn Fn() -> Option<Vec<(usize, u64, Option<usize>)>> + Send>;

fn ticks_ns() -> u64 {
    // USER_HZ, which /proc's utime and stime count in; 100 on every Linux ABI this runs on.
    10_000_000
}

/// utime + stime of one `/proc/.../stat` line, in nanoseconds, and its comm.
pub fn parse_stat(line: &str) -> Option<(String, u64)> {
    // comm is in parentheses and may hold spaces or parentheses: split at the last ')'.
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let comm = line.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = line.get(close + 1..)?.split_whitespace().collect();
    // After comm: state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
    // utime(14) stime(15), numbered from 1 with pid and comm as 1 and 2.
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((comm, (utime + stime) * ticks_ns()))
}

fn read_stat(path: &std::path::Path) -> Option<(String, u64)> {
    parse_stat(&std::fs::read_to_string(path).ok()?)
}

/// Every thread of this process: (tid, name, cpu_ns).
fn own_threads() -> Vec<(u32, String, u64)> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let tid: u32 = e.file_name().to_str()?.parse().ok()?;
            let (name, ns) = read_stat(&e.path().join("stat"))?;
            Some((tid, name, ns))
        })
        .collect()
}

/// Every FRR daemon's process: (pid, name, cpu_ns of all its threads).
fn frr_processes() -> Vec<(u32, String, u64)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            let comm = comm.trim();
            if !FRR_DAEMONS.contains(&comm) {
                return None;
            }
            // The process's stat counts every thread, live and exited.
            let (_, ns) = read_stat(&e.path().join("stat"))?;
            Some((pid, comm.to_string(), ns))
        })
        .collect()
}

fn sample(workers: &WorkerSource) -> Sample {
    let busy: BTreeMap<String, (u64, Option<usize>)> = workers()
        .unwrap_or_default()
        .into_iter()
        .map(|(id, ns, core)| (format!("worker{id}"), (ns, core)))
        .collect();
    let mut rows = BTreeMap::new();
    for (tid, name, cpu_ns) in own_threads() {
        let w = busy.get(&name);
        let kind = if w.is_some() {
            Kind::Worker
        } else {
            Kind::Control
        };
        rows.insert(
            (kind, name.clone(), tid),
            Reading {
                name,
                kind,
                id: tid,
                cpu_ns,
                busy_ns: w.map(|w| w.0),
                core: w.and_then(|w| w.1),
            },
        );
    }
    for (pid, name, cpu_ns) in frr_processes() {
        rows.insert(
            (Kind::Frr, name.clone(), pid),
            Reading {
                name,
                kind: Kind::Frr,
                id: pid,
                cpu_ns,
                busy_ns: None,
                core: None,
            },
        );
    }
    Sample {
        at: Instant::now(),
        rows,
    }
}

impl CpuMonitor {
    /// Starts sampling once a second (a thread named `cpu`).
    pub fn start(workers: WorkerSource) -> CpuMonitor {
        let history: Arc<Mutex<VecDeque<Sample>>> = Default::default();
        let stop = Arc::new(AtomicBool::new(false));
        history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(sample(&workers));
        let thread = {
            let (history, stop) = (history.clone(), stop.clone());
            std::thread::Builder::new()
                .name("cpu".into())
                .spawn(move || {
                    let mut next = Instant::now() + Duration::from_secs(1);
                    while !stop.load(Ordering::Relaxed) {
                        let now = Instant::now();
                        if now < next {
                            std::thread::sleep((next - now).min(Duration::from_millis(100)));
                            continue;
                        }
                        next += Duration::from_secs(1);
                        let s = sample(&workers);
                        let mut h = history.lock().unwrap_or_else(|e| e.into_inner());
                        h.push_back(s);
                        while h.len() > WINDOWS[2] as usize + 1 {
                            h.pop_front();
                        }
                    }
                })
                .ok()
        };
        CpuMonitor {
            history,
            stop,
            thread,
        }
    }

    /// The averages as of the latest sample (at most a second old).
    pub fn view(&self) -> CpuView {
        let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        view(&h)
    }

    /// Per thread over the last sample period (about a second): `(name, kind, cpu %, busy %)`,
    /// busy being a worker's work and any other thread's CPU. What the event manager's CPU rules
    /// read: the 5-second window would detect a flood five times later.
    pub fn latest(&self) -> Vec<(String, Kind, f64, f64)> {
        let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        latest(&h)
            .into_iter()
            .map(|(_, name, kind, cpu, busy)| (name, kind, cpu, busy))
            .collect()
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for CpuMonitor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Per thread over the newest sample period: `(id, name, kind, cpu %, busy %)`.
fn latest(h: &VecDeque<Sample>) -> Vec<(u32, String, Kind, f64, f64)> {
    let (Some(last), Some(prev)) = (h.back(), h.len().checked_sub(2).and_then(|i| h.get(i))) else {
        return Vec::new();
    };
    let secs = last.at.duration_since(prev.at).as_secs_f64();
    if secs <= 0.0 {
        return Vec::new();
    }
    last.rows
        .iter()
        .map(|(key, r)| {
            let pct = |f: fn(&Reading) -> Option<u64>| -> f64 {
                let now = f(r).unwrap_or(0);
                let then = prev.rows.get(key).and_then(f).unwrap_or(0);
                now.saturating_sub(then) as f64 / 1e9 / secs * 100.0
            };
            let cpu = pct(|r| Some(r.cpu_ns));
            let busy = if r.busy_ns.is_some() {
                pct(|r| r.busy_ns)
            } else {
                cpu
            };
            (r.id, r.name.clone(), r.kind, cpu, busy)
        })
        .collect()
}

fn view(h: &VecDeque<Sample>) -> CpuView {
    let Some(last) = h.back() else {
        return CpuView {
            covered_s: [0.0; 3],
            rows: Vec::new(),
        };
    };
    // For each window, the newest sample at least that far back (else the oldest).
    let base: Vec<&Sample> = WINDOWS
        .iter()
        .map(|&w| {
            h.iter()
                .rev()
                .find(|s| last.at.duration_since(s.at) >= Duration::from_secs(w))
                .unwrap_or_else(|| h.front().expect("not empty"))
        })
        .collect();
    let covered_s: [f64; 3] =
        std::array::from_fn(|i| last.at.duration_since(base[i].at).as_secs_f64());
    let rows = last
        .rows
        .iter()
        .map(|(key, r)| {
            let pct = |i: usize, f: fn(&Reading) -> Option<u64>| -> f64 {
                let secs = covered_s[i];
                let Some(now) = f(r) else { return 0.0 };
                if secs <= 0.0 {
                    return 0.0;
                }
                // A thread born inside the window counts from zero.
                let then = base[i].rows.get(key).and_then(f).unwrap_or(0);
                let p = now.saturating_sub(then) as f64 / 1e9 / secs * 100.0;
                (p * 10.0).round() / 10.0
            };
            let cpu = std::array::from_fn(|i| pct(i, |r| Some(r.cpu_ns)));
            let busy = if r.busy_ns.is_some() {
                std::array::from_fn(|i| pct(i, |r| r.busy_ns))
            } else {
                cpu
            };
            CpuRow {
                name: r.name.clone(),
                kind: r.kind,
                id: r.id,
                core: r.core,
                cpu,
                busy,
                cpu_1s: 0.0,
                busy_1s: 0.0,
            }
        })
        .collect::<Vec<_>>();
    let mut rows = rows;
    for (id, name, kind, cpu, busy) in latest(h) {
        if let Some(r) = rows
            .iter_mut()
            .find(|r| r.id == id && r.name == name && r.kind == kind)
        {
            r.cpu_1s = (cpu * 10.0).round() / 10.0;
            r.busy_1s = (busy * 10.0).round() / 10.0;
        }
    }
    CpuView { covered_s, rows }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_give_their_comm_and_time() {
        let line = "1234 (worker 0) (x)) R 1 1 1 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0";
        assert_eq!(
            parse_stat(line),
            Some(("worker 0) (x)".to_string(), 300 * 10_000_000))
        );
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (a) R 1"), None);
    }

    fn reading(name: &str, kind: Kind, cpu_s: f64, busy_s: Option<f64>) -> Reading {
        Reading {
            name: name.into(),
            kind,
            id: 7,
            cpu_ns: (cpu_s * 1e9) as u64,
            busy_ns: busy_s.map(|b| (b * 1e9) as u64),
            core: None,
        }
    }

    #[test]
    fn windows_average_the_difference_over_the_time_between() {
        let t0 = Instant::now();
        let mut h = VecDeque::new();
        // 301 samples a second apart: a worker polling flat out (1 s CPU a second) that worked
        // 0.25 s a second for the first 4 minutes and 0.75 s a second after.
        let mut busy = 0.0;
        for i in 0..=300u64 {
            if i > 0 {
                busy += if i <= 240 { 0.25 } else { 0.75 };
            }
            let w = reading("worker0", Kind::Worker, i as f64, Some(busy));
            let b = reading("bgpd", Kind::Frr, i as f64 * 0.1, None);
            h.push_back(Sample {
                at: t0 + Duration::from_secs(i),
                rows: [
                    ((Kind::Worker, "worker0".into(), 7), w),
                    ((Kind::Frr, "bgpd".into(), 7), b),
                ]
                .into_iter()
                .collect(),
            });
        }
        let v = view(&h);
        assert_eq!(v.covered_s, [5.0, 60.0, 300.0]);
        let w = v.rows.iter().find(|r| r.name == "worker0").unwrap();
        assert_eq!(w.cpu, [100.0, 100.0, 100.0]);
        assert_eq!(w.busy, [75.0, 75.0, 35.0]);
        let b = v.rows.iter().find(|r| r.name == "bgpd").unwrap();
        assert_eq!(b.cpu, [10.0, 10.0, 10.0]);
        assert_eq!(b.busy, b.cpu);
    }

    #[test]
    fn an_frr_daemon_beside_the_router_is_sampled() {
        // A process named as an FRR daemon: a copy of sleep called zebra.
        let dir = std::env::temp_dir().join(format!("linerate-cpu-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bin = dir.join("zebra");
        std::fs::copy("/bin/sleep", &bin).unwrap();
        let mut child = std::process::Command::new(&bin).arg("30").spawn().unwrap();
        let pid = child.id();
        let mut found = false;
        for _ in 0..50 {
            let s = sample(&(Box::new(|| None) as WorkerSource));
            if s.rows.contains_key(&(Kind::Frr, "zebra".into(), pid)) {
                found = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(found, "zebra (pid {pid}) not sampled");
    }

    #[test]
    fn this_process_is_sampled() {
        let s = sample(&(Box::new(|| None) as WorkerSource));
        assert!(s.rows.values().any(|r| r.kind == Kind::Control));
    }
}
