//! The new process prepares at the lowest CPU priority: it builds its tables and faults in its
//! buffer pool on the CPUs where the old process's workers are still forwarding (an LR's
//! cpuset), and at equal priority it takes half of their time for as long as that lasts, which
//! shows as latency and, at high load, full receive rings. At nice 19 it takes about 1.5%.
//! Once it has the ports its workers, and it, go back to the priority it started with.
//!
//! The old process does the same once it has handed over: it tears down (its pools, its
//! mappings, the exit itself) on the CPUs the new workers now forward on.
//!
//! Linux's nice is per thread: threads inherit it when they are made, and the workers are made
//! while preparing, so they are found by name (`worker*`, in /proc/self/task) and raised again.

/// The priority to go back to.
pub struct Quiet {
    nice: i32,
}

fn tid() -> libc::id_t {
    // SAFETY: gettid has no preconditions and touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::id_t }
}

fn set_nice(tid: libc::id_t, nice: i32) -> bool {
    // SAFETY: setpriority takes integers and changes one thread's scheduling priority; it
    // touches no memory of ours. A thread that has gone makes it fail (ESRCH), reported.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) == 0 }
}

/// Lowers the calling thread (and every thread it makes from now on) to nice 19.
pub fn lower_to_idle() -> Quiet {
    // getpriority can return -1 as a valid nice; errno would tell, but the thread's own
    // priority cannot fail to be read.
    // SAFETY: as set_nice: integers in, an integer out.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid()) };
    set_nice(tid(), 19);
    Quiet { nice }
}

/// Every thread of this process: (id, name, nice).
fn threads() -> Vec<(libc::id_t, String, i32)> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| {
            let id = t.file_name().to_string_lossy().parse::<libc::id_t>().ok()?;
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            // SAFETY: as set_nice: integers in, an integer out.
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, id) };
            Some((id, comm.trim().to_string(), nice))
        })
        .collect()
}

impl Quiet {
    /// Puts the workers back to the priority the process started with (the moment it takes the
    /// ports); the rest of its start-up stays quiet until [`Quiet::restore`]. How many workers.
    pub fn raise_workers(&self) -> usize {
        threads()
            .into_iter()
            .filter(|(_, name, _)| name.starts_with("worker"))
            .map(|(id, _, _)| usize::from(set_nice(id, self.nice)))
            .sum()
    }

    /// Start-up done: every thread still at nice 19 goes back (the calling one, and those it
    /// made meanwhile that did not set their own priority, as the API's threads do).
    pub fn restore(self) -> usize {
        self.raise_workers();
        threads()
            .into_iter()
            .filter(|(_, _, nice)| *nice == 19)
            .map(|(id, _, _)| usize::from(set_nice(id, self.nice)))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nice_of(tid: libc::id_t) -> i32 {
        // SAFETY: as above.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) }
    }

    #[test]
    fn workers_made_while_preparing_get_their_priority_back() {
        // In a thread of its own: the test harness's thread keeps its priority.
        std::thread::spawn(|| {
            let before = nice_of(tid());
            let q = lower_to_idle();
            assert_eq!(nice_of(tid()), 19);
            let (tx, rx) = std::sync::mpsc::channel();
            let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
            let w = std::thread::Builder::new()
                .name("worker-test".into())
                .spawn(move || {
                    tx.send(tid()).unwrap();
                    let _ = stop_rx.recv();
                })
                .unwrap();
            let wt = rx.recv().unwrap();
            assert_eq!(nice_of(wt), 19, "made while preparing");
            // Raising priority back needs CAP_SYS_NICE (root, as the daemon runs).
            if q.raise_workers() >= 1 {
                assert_eq!(nice_of(wt), before, "the worker first");
                assert_eq!(nice_of(tid()), 19, "the rest stays quiet");
                q.restore();
                assert_eq!(nice_of(tid()), before);
            }
            drop(stop_tx);
            w.join().unwrap();
        })
        .join()
        .unwrap();
    }
}
