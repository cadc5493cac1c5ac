//! The resource limits of a logical router's processes: one control group per LR holding its
//! CPUs (cpuset) and its memory limit, on whichever cgroup version the host runs:
//!
//! - v1 (these machines): `cpuset`, `memory` and `cpuacct` each a hierarchy of its own under
//!   /sys/fs/cgroup/<controller>; a group is a directory in each, limits in `cpuset.cpus`
//!   (with `cpuset.mems`, which must be set before a process may join), `memory.limit_in_bytes`
//!   (and `memory.memsw.limit_in_bytes` where swap accounting is on), usage in
//!   `memory.usage_in_bytes` and `cpuacct.usage`;
//! - v2 (modern hosts): one hierarchy; the parent's `cgroup.subtree_control` hands `cpuset` and
//!   `memory` down, limits in `cpuset.cpus`, `memory.max` and `memory.swap.max`, usage in
//!   `memory.current` and `cpu.stat`'s `usage_usec`.
//!
//! Groups live under a `linerate` group of each hierarchy's root. Which version is there is read
//! from /proc/self/mountinfo, never assumed. Reads: the cgroup files. Writes: the groups'
//! directories and limit files, their `cgroup.procs`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The host's cgroup hierarchies that an LR's limits need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hierarchy {
    V1 {
        cpuset: PathBuf,
        memory: PathBuf,
        cpuacct: Option<PathBuf>,
    },
    V2 {
        root: PathBuf,
    },
}

/// What one LR may use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// CPU numbers; empty: every CPU the parent group has.
    pub cpus: Vec<usize>,
    /// Bytes of memory (RSS and page cache), no swap; None: no limit.
    pub memory: Option<u64>,
}

/// What an LR's processes use now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub memory: u64,
    /// CPU time since the group was made, nanoseconds.
    pub cpu_ns: u64,
}

impl Hierarchy {
    /// The hierarchies mounted on this host: v2 if a cgroup2 mount offers both `cpuset` and
    /// `memory`, else v1's `cpuset` and `memory` mounts.
    pub fn detect() -> io::Result<Hierarchy> {
        Hierarchy::from_mountinfo(&fs::read_to_string("/proc/self/mountinfo")?, |p| {
            fs::read_to_string(p.join("cgroup.controllers")).unwrap_or_default()
        })
    }

    /// [`Hierarchy::detect`] over a mountinfo text, with `controllers(mount)` reading a cgroup2
    /// mount's `cgroup.controllers`.
    fn from_mountinfo(
        mountinfo: &str,
        controllers: impl Fn(&Path) -> String,
    ) -> io::Result<Hierarchy> {
        let (mut cpuset, mut memory, mut cpuacct) = (None, None, None);
        for line in mountinfo.lines() {
            // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let mount = PathBuf::from(left.split(' ').nth(4).unwrap_or(""));
            let mut r = right.split(' ');
            let (fstype, sup) = (r.next().unwrap_or(""), r.nth(1).unwrap_or(""));
            match fstype {
                "cgroup2" => {
                    let c = controllers(&mount);
                    let has = |x: &str| c.split_whitespace().any(|w| w == x);
                    if has("cpuset") && has("memory") {
                        return Ok(Hierarchy::V2 { root: mount });
                    }
                }
                "cgroup" => {
                    for opt in sup.split(',') {
                        match opt {
                            "cpuset" => cpuset = Some(mount.clone()),
                            "memory" => memory = Some(mount.clone()),
                            "cpuacct" => cpuacct = Some(mount.clone()),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        match (cpuset, memory) {
            (Some(cpuset), Some(memory)) => Ok(Hierarchy::V1 {
                cpuset,
                memory,
                cpuacct,
            }),
            _ => Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no cgroup hierarchy with cpuset and memory is mounted (v2, or v1's cpuset and memory)",
            )),
        }
    }
}

/// One LR's group, made by [`Group::create`]; removed by [`Group::remove`] once its processes
/// are gone.
#[derive(Debug)]
pub struct Group {
    pub name: String,
    h: Hierarchy,
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    fs::write(path, value).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

fn read(path: &Path) -> io::Result<String> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// CPUs of a list such as `0-3,6` (as cpuset files write them).
pub fn parse_cpus(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if a > b || b - a > 4096 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl Group {
    /// The directories of the group in each hierarchy it uses.
    fn dirs(&self) -> Vec<PathBuf> {
        let sub = |root: &Path| root.join("linerate").join(&self.name);
        match &self.h {
            Hierarchy::V1 {
                cpuset,
                memory,
                cpuacct,
            } => [Some(cpuset), Some(memory), cpuacct.as_ref()]
                .into_iter()
                .flatten()
                .map(|r| sub(r))
                .collect(),
            Hierarchy::V2 { root } => vec![sub(root)],
        }
    }

    /// Makes (or takes over) group `name` with `limits`. Refused, naming them, if a CPU is not
    /// one the parent group has.
    pub fn create(h: &Hierarchy, name: &str, limits: &Limits) -> io::Result<Group> {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{name}` is not a group name"),
            ));
        }
        let g = Group {
            name: name.to_string(),
            h: h.clone(),
        };
        let (cpuset_root, memory_root) = match h {
            Hierarchy::V1 { cpuset, memory, .. } => (cpuset.clone(), memory.clone()),
            Hierarchy::V2 { root } => (root.clone(), root.clone()),
        };
        // The parent's CPUs, which a child's must be among.
        let have =
            parse_cpus(&read(&cpuset_root.join("cpuset.effective_cpus"))?).unwrap_or_default();
        if let Some(c) = limits.cpus.iter().find(|c| !have.contains(c)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {c} is not one of this host's ({})", cpu_list(&have)),
            ));
        }
        if let Hierarchy::V2 { root } = h {
            // Hand cpuset and memory down to `linerate`, then to its children.
            write(&root.join("cgroup.subtree_control"), "+cpuset +memory")?;
            fs::create_dir_all(root.join("linerate"))?;
            write(
                &root.join("linerate").join("cgroup.subtree_control"),
                "+cpuset +memory",
            )?;
        }
        for d in g.dirs() {
            if let Some(parent) = d.parent() {
                if !parent.exists() {
                    fs::create_dir(parent)?;
                    if let Hierarchy::V1 { cpuset, .. } = h {
                        // A v1 cpuset group is empty until its CPUs and memory nodes are set.
                        if parent.starts_with(cpuset) {
                            let up = |f: &str| read(&cpuset.join(f));
                            write(&parent.join("cpuset.cpus"), &up("cpuset.cpus")?)?;
                            write(&parent.join("cpuset.mems"), &up("cpuset.mems")?)?;
                        }
                    }
                }
            }
            if !d.exists() {
                fs::create_dir(&d)?;
            }
        }
        let cpus = if limits.cpus.is_empty() {
            cpu_list(&have)
        } else {
            cpu_list(&limits.cpus)
        };
        let dir = cpuset_root.join("linerate").join(name);
        write(&dir.join("cpuset.cpus"), &cpus)?;
        if let Hierarchy::V1 { .. } = h {
            let mems = read(&cpuset_root.join("cpuset.mems"))?;
            write(&dir.join("cpuset.mems"), &mems)?;
        }
        let mem_dir = memory_root.join("linerate").join(name);
        match (h, limits.memory) {
            (Hierarchy::V1 { .. }, Some(m)) => {
                write(&mem_dir.join("memory.limit_in_bytes"), &m.to_string())?;
                // With swap accounting, no swap either (a limit that swaps is no limit).
                let sw = mem_dir.join("memory.memsw.limit_in_bytes");
                if sw.exists() {
                    write(&sw, &m.to_string())?;
                }
            }
            (Hierarchy::V1 { .. }, None) => {
                let sw = mem_dir.join("memory.memsw.limit_in_bytes");
                if sw.exists() {
                    write(&sw, "-1")?;
                }
                write(&mem_dir.join("memory.limit_in_bytes"), "-1")?;
            }
            (Hierarchy::V2 { .. }, m) => {
                let v = m.map_or("max".to_string(), |m| m.to_string());
                write(&mem_dir.join("memory.max"), &v)?;
                let sw = mem_dir.join("memory.swap.max");
                if sw.exists() {
                    write(&sw, if m.is_some() { "0" } else { "max" })?;
                }
            }
        }
        Ok(g)
    }

    /// The group `name` that [`Group::create`] made earlier (perhaps in another process: the
    /// supervisor makes it, the LR's process joins it before it becomes the router).
    pub fn existing(h: &Hierarchy, name: &str) -> Group {
        Group {
            name: name.to_string(),
            h: h.clone(),
        }
    }

    /// Moves process `pid` (and the threads it starts from then on) into the group.
    pub fn add(&self, pid: u32) -> io::Result<()> {
        for d in self.dirs() {
            write(&d.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// The processes in the group.
    pub fn pids(&self) -> io::Result<Vec<u32>> {
        let d = &self.dirs()[0];
        Ok(read(&d.join("cgroup.procs"))?
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect())
    }

    /// The CPUs the group may run on.
    pub fn cpus(&self) -> io::Result<Vec<usize>> {
        let s = read(&self.dirs()[0].join("cpuset.cpus"))?;
        parse_cpus(&s).ok_or_else(|| io::Error::other(format!("cpuset.cpus: `{s}`")))
    }

    /// Memory and CPU time the group's processes use.
    pub fn usage(&self) -> io::Result<Usage> {
        let num = |p: PathBuf| -> io::Result<u64> {
            read(&p)?
                .parse()
                .map_err(|_| io::Error::other(format!("{}: not a number", p.display())))
        };
        match &self.h {
            Hierarchy::V1 {
                memory, cpuacct, ..
            } => {
                let sub = |r: &Path| r.join("linerate").join(&self.name);
                Ok(Usage {
                    memory: num(sub(memory).join("memory.usage_in_bytes"))?,
                    cpu_ns: match cpuacct {
                        Some(c) => num(sub(c).join("cpuacct.usage"))?,
                        None => 0,
                    },
                })
            }
            Hierarchy::V2 { root } => {
                let d = root.join("linerate").join(&self.name);
                let stat = read(&d.join("cpu.stat"))?;
                let usec = stat
                    .lines()
                    .find_map(|l| l.strip_prefix("usage_usec "))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0);
                Ok(Usage {
                    memory: num(d.join("memory.current"))?,
                    cpu_ns: usec * 1000,
                })
            }
        }
    }

    /// Removes the group (its processes must have exited).
    pub fn remove(self) -> io::Result<()> {
        for d in self.dirs() {
            if d.exists() {
                fs::remove_dir(&d)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", d.display())))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
