//! Control groups: reading which version a host runs, and (as root, on a host with cgroups) a
//! group that really pins a process to its CPU and kills it past its memory limit.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;

use super::*;

const V1: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

const V2: &str = "\
26 23 0:24 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
";

#[test]
fn the_version_is_read_from_the_mounts() {
    // Here v1, with a cgroup2 mount that offers neither controller (as on these machines).
    let h = Hierarchy::from_mountinfo(V1, |_| "hugetlb\n".into()).unwrap();
    assert_eq!(
        h,
        Hierarchy::V1 {
            cpuset: "/sys/fs/cgroup/cpuset".into(),
            memory: "/sys/fs/cgroup/memory".into(),
            cpuacct: Some("/sys/fs/cgroup/cpuacct".into()),
        }
    );
    let h = Hierarchy::from_mountinfo(V2, |_| "cpuset cpu io memory pids\n".into()).unwrap();
    assert_eq!(
        h,
        Hierarchy::V2 {
            root: "/sys/fs/cgroup".into()
        }
    );
    // A v2 mount without memory, and no v1 one: nothing to limit with.
    let e = Hierarchy::from_mountinfo(V2, |_| "cpuset cpu\n".into()).unwrap_err();
    assert!(e.to_string().contains("no cgroup hierarchy"), "{e}");
}

#[test]
fn cpu_lists_read_as_cpuset_files_write_them() {
    assert_eq!(parse_cpus("0-3,6\n"), Some(vec![0, 1, 2, 3, 6]));
    assert_eq!(parse_cpus("1"), Some(vec![1]));
    assert_eq!(parse_cpus(""), Some(vec![]));
    assert_eq!(parse_cpus("3-1"), None);
    assert_eq!(parse_cpus("x"), None);
}

/// The host's hierarchy, if this test can make groups in it (root, cgroups mounted).
fn live() -> Option<Hierarchy> {
    // SAFETY: geteuid has no preconditions and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: making control groups needs root");
        return None;
    }
    match Hierarchy::detect() {
        Ok(h) => Some(h),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

#[test]
fn a_group_pins_its_process_to_its_cpu_and_kills_it_past_its_memory() {
    let Some(h) = live() else { return };
    let name = format!("test-{}", std::process::id());
    let g = Group::create(
        &h,
        &name,
        &Limits {
            cpus: vec![0],
            memory: Some(64 << 20),
        },
    )
    .unwrap();
    assert_eq!(g.cpus().unwrap(), vec![0]);
    // A process that waits, joins, then touches 256 MiB: pinned to CPU 0, then killed.
    let mut child = Command::new("sh")
        .args([
            "-c",
            "read x; grep Cpus_allowed_list /proc/self/status; \
             exec python3 -c 'b = bytearray(256 << 20); print(len(b))'",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    g.add(child.id()).unwrap();
    assert_eq!(g.pids().unwrap(), vec![child.id()]);
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Cpus_allowed_list:\t0\n"), "{text}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGKILL),
        "killed by the group's memory limit: {text}"
    );
    let u = g.usage().unwrap();
    assert!(u.cpu_ns > 0, "{u:?}");
    g.remove().unwrap();
    let again = Group::create(&h, &name, &Limits::default()).unwrap();
    again.remove().unwrap();
}

#[test]
fn a_cpu_the_host_does_not_have_is_refused_by_number() {
    let Some(h) = live() else { return };
    let e = Group::create(
        &h,
        &format!("bad-{}", std::process::id()),
        &Limits {
            cpus: vec![4095],
            memory: None,
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("CPU 4095 is not one of"), "{e}");
}
