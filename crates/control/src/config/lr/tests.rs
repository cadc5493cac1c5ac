use std::path::Path;

use super::*;

/// An LR config with one af_packet port on `dev` and one shm port.
fn lr_config(dev: &str, shm: &str, role: &str, cores: &str) -> String {
    format!(
        "router: {{ workers: 1{cores} }}\n\
         ports:\n  - {{ name: p0, driver: af_packet, device: {dev} }}\n  \
         - {{ name: p1, driver: shm, path: {shm}, role: {role} }}\n\
         interfaces:\n  - {{ name: p0, port: p0, mac: \"02:00:00:00:00:01\", ipv4: [192.0.2.1/24] }}\n"
    )
}

/// A folder holding lr1.yaml and lr2.yaml, and the supervisor's file `set` in it, read.
fn read_set(lr1: &str, lr2: &str, set: &str) -> (tempdir::Dir, Result<LrSet, ConfigErrors>) {
    let d = tempdir::Dir::new();
    std::fs::write(d.0.join("lr1.yaml"), lr1).unwrap();
    std::fs::write(d.0.join("lr2.yaml"), lr2).unwrap();
    let p = d.0.join("lrs.yaml");
    std::fs::write(&p, set).unwrap();
    let r = parse_set(set, &p);
    (d, r)
}

mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Dir {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let p = std::env::temp_dir().join(format!(
                "linerate-lrset-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

const TWO: &str = "supervisor: { share-cores: true, run-dir: run }\n\
logical-routers:\n  - { name: lr1, config: lr1.yaml, cpus: 0, memory: 256M }\n  \
- { name: lr2, config: lr2.yaml, cpus: 0, namespace: blue }\n";

#[test]
fn two_lrs_joined_by_an_shm_link_are_read_with_their_devices_and_limits() {
    let (d, r) = read_set(
        &lr_config("veth1", "/dev/shm/l12", "server", ""),
        &lr_config("veth3", "/dev/shm/l12", "client", ""),
        TWO,
    );
    let s = r.unwrap();
    assert!(s.share_cores);
    assert_eq!(s.run_dir, d.0.join("run"));
    assert_eq!(s.socket, Path::new(DEFAULT_SOCKET));
    let names: Vec<_> = s
        .lrs
        .iter()
        .map(|l| (l.name.as_str(), l.namespace.as_str()))
        .collect();
    assert_eq!(names, [("lr1", "lr1"), ("lr2", "blue")]);
    assert_eq!(s.lrs[0].memory, Some(256 << 20));
    assert_eq!(s.lrs[1].memory, None);
    assert_eq!(s.lrs[0].cpus, [0]);
    assert_eq!(s.lrs[0].devices, ["veth1"]);
    assert_eq!(s.lrs[1].devices, ["veth3"]);
    assert!(s.lrs[0].config.ends_with("lr1.yaml") && s.lrs[0].config.is_absolute());
}

fn messages(r: Result<LrSet, ConfigErrors>) -> Vec<String> {
    r.unwrap_err().0.iter().map(|e| e.to_string()).collect()
}

#[test]
fn a_port_device_claimed_by_two_lrs_is_refused_naming_the_field_and_the_owner() {
    let (_d, r) = read_set(
        &lr_config("veth1", "/dev/shm/l12", "server", ""),
        &lr_config("veth1", "/dev/shm/l12", "client", ""),
        TWO,
    );
    let m = messages(r);
    assert_eq!(m.len(), 1, "{m:?}");
    assert!(
        m[0].contains(":4:") && m[0].contains("logical-routers[1].config"),
        "{m:?}"
    );
    assert!(
        m[0].contains("port p0 (device veth1) is already lr1's (logical-routers[0].config)"),
        "{m:?}"
    );
}

#[test]
fn the_same_end_of_an_shm_file_twice_is_refused_but_a_server_and_its_client_are_a_link() {
    let (_d, r) = read_set(
        &lr_config("veth1", "/dev/shm/l12", "server", ""),
        &lr_config("veth3", "/dev/shm/l12", "server", ""),
        TWO,
    );
    let m = messages(r);
    assert!(
        m[0].contains("port p1 (shm server end of /dev/shm/l12) is already lr1's"),
        "{m:?}"
    );
}

#[test]
fn cores_namespaces_and_names_claimed_twice_are_refused() {
    let lr1 = lr_config("veth1", "/dev/shm/a", "server", "");
    let lr2 = lr_config("veth3", "/dev/shm/b", "server", "");
    // CPUs overlap without share-cores.
    let (_d, r) = read_set(
        &lr1,
        &lr2,
        "logical-routers:\n  - { name: lr1, config: lr1.yaml, cpus: 0 }\n  \
         - { name: lr2, config: lr2.yaml, cpus: 0 }\n",
    );
    let m = messages(r);
    assert!(
        m[0].contains("logical-routers[1].cpus: CPUs 0 overlap lr1's"),
        "{m:?}"
    );
    // One namespace, one name.
    let (_d, r) = read_set(
        &lr1,
        &lr2,
        "supervisor: { share-cores: true }\nlogical-routers:\n  \
         - { name: lr1, config: lr1.yaml, namespace: red }\n  \
         - { name: lr1, config: lr2.yaml, namespace: red }\n",
    );
    let m = messages(r);
    assert!(
        m.iter()
            .any(|x| x.contains("logical-routers[1].name: `lr1` is already logical-routers[0]")),
        "{m:?}"
    );
    assert!(
        m.iter()
            .any(|x| x.contains("logical-routers[1].namespace: namespace `red` is already lr1's")),
        "{m:?}"
    );
}

#[test]
fn worker_cores_outside_the_lrs_cpus_and_bad_limits_are_refused() {
    let (_d, r) = read_set(
        &lr_config("veth1", "/dev/shm/a", "server", ", cores: [1]"),
        &lr_config("veth3", "/dev/shm/b", "server", ""),
        "supervisor: { share-cores: true }\nlogical-routers:\n  \
         - { name: lr1, config: lr1.yaml, cpus: 0 }\n  \
         - { name: lr2, config: lr2.yaml, cpus: 9999, memory: 1M }\n",
    );
    let m = messages(r);
    assert!(
        m.iter()
            .any(|x| x.contains("router.cores has CPU 1, outside this LR's cpus")),
        "{m:?}"
    );
    assert!(
        m.iter()
            .any(|x| x.contains("logical-routers[1].cpus: CPU 9999 is not one this host has")),
        "{m:?}"
    );
    assert!(
        m.iter()
            .any(|x| x.contains("logical-routers[1].memory: 1M: at least 64M")),
        "{m:?}"
    );
}

#[test]
fn an_lrs_own_config_errors_are_listed_in_its_own_file() {
    let (_d, r) = read_set(
        "router: { workers: zero }\n",
        &lr_config("veth3", "/dev/shm/b", "server", ""),
        TWO,
    );
    let m = messages(r);
    assert!(
        m[0].contains("logical-routers[0].config") && m[0].contains("1 error(s)"),
        "{m:?}"
    );
    assert!(
        m[1].contains("lr1.yaml:1:") && m[1].contains("router.workers"),
        "{m:?}"
    );
}

#[test]
fn sizes_read_with_their_units() {
    assert_eq!(parse_size("512M"), Some(512 << 20));
    assert_eq!(parse_size("2G"), Some(2 << 30));
    assert_eq!(parse_size("64k"), Some(64 << 10));
    assert_eq!(parse_size("1000"), Some(1000));
    assert_eq!(parse_size("M"), None);
    assert_eq!(parse_size("99999999999G"), None);
}
