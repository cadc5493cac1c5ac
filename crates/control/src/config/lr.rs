//! The logical-router file the supervisor reads (`linerate supervisor --config F`): which LRs
//! run, each with its own Linerate config, CPUs, memory limit and network namespace. Every LR's
//! config is read too, so that the port inventory is checked before anything starts: a port
//! device, an shm file's end or a capture file written claimed by two LRs, a namespace named
//! twice, CPUs shared without `share-cores`, or an LR's worker cores outside its CPUs are
//! refused, naming the field, and nothing is started.
//!
//! ```yaml
//! supervisor:
//!   socket: /run/linerate/supervisor.sock   # the supervisor's API (the default)
//!   run-dir: /run/linerate/lr               # each LR's API socket and log: <run-dir>/<name>.*
//!   state-dir: /var/lib/linerate/lr         # each LR's running config and commits
//!   share-cores: false                      # true lets LRs' cpus overlap (a small machine)
//! logical-routers:
//!   - name: lr1                 # letters, digits, '-' and '_', at most 15
//!     config: lr1.yaml          # relative to this file
//!     cpus: 0-1                 # its cpuset (a list such as 0-3,6); absent: every CPU
//!     memory: 512M              # its memory limit (K, M, G); absent: none
//!     namespace: lr1            # its network namespace (default: its name)
//! ```

use std::path::{Path, PathBuf};

use super::fields::{seq, Errs, Fields};
use super::{ConfigError, ConfigErrors, Driver, Origin};
use crate::lr::cgroup::parse_cpus;

/// The supervisor's file, read and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct LrSet {
    pub source: PathBuf,
    pub socket: PathBuf,
    pub run_dir: PathBuf,
    pub state_dir: PathBuf,
    pub share_cores: bool,
    pub lrs: Vec<LrCfg>,
}

/// One logical router.
#[derive(Clone, Debug, PartialEq)]
pub struct LrCfg {
    pub name: String,
    /// Its Linerate config (absolute).
    pub config: PathBuf,
    /// Its cpuset; empty: every CPU.
    pub cpus: Vec<usize>,
    /// Its memory limit in bytes.
    pub memory: Option<u64>,
    pub namespace: String,
    /// The kernel devices its ports use (af_packet, af_xdp), which the supervisor moves into
    /// its namespace.
    pub devices: Vec<String>,
    pub origin: Origin,
}

pub const DEFAULT_SOCKET: &str = "/run/linerate/supervisor.sock";

/// `512M`, `2G`, `65536K` or bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mul) = match s.char_indices().last()? {
        (i, 'K' | 'k') => (&s[..i], 1u64 << 10),
        (i, 'M' | 'm') => (&s[..i], 1 << 20),
        (i, 'G' | 'g') => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mul)
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The CPUs this host has online.
fn host_cpus() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpus(&s))
        .unwrap_or_else(|| {
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
        })
}

/// What a port takes for itself, which no other LR may take: `(kind, what, exclusive)`.
fn claims(d: &Driver) -> Vec<(String, String)> {
    match d {
        Driver::AfPacket { device, .. } | Driver::AfXdp { device, .. } => {
            vec![("device".into(), device.clone())]
        }
        Driver::Shm { path, server, .. } => {
            let end = if *server { "server" } else { "client" };
            vec![(format!("shm {end} end of"), path.display().to_string())]
        }
        Driver::Pcap { tx: Some(t), .. } => vec![("capture file".into(), t.display().to_string())],
        Driver::Pcap { tx: None, .. } | Driver::Mem => Vec::new(),
    }
}

/// Reads and checks the supervisor's file at `path`.
pub fn parse_set(text: &str, path: &Path) -> Result<LrSet, ConfigErrors> {
    let file = path.display().to_string();
    // Paths in the file are relative to it, and made absolute: LRs' sockets are found from
    // any folder.
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => std::path::absolute(d).unwrap_or_else(|_| d.to_path_buf()),
        None => std::env::current_dir().unwrap_or_default(),
    };
    let root = super::parse_yaml(text, &file)?;
    let mut e = Errs {
        file: &file,
        text,
        list: Vec::new(),
    };
    let mut set = LrSet {
        source: path.to_path_buf(),
        socket: DEFAULT_SOCKET.into(),
        run_dir: "/run/linerate/lr".into(),
        state_dir: "/var/lib/linerate/lr".into(),
        share_cores: false,
        lrs: Vec::new(),
    };
    // Errors of the LRs' own configs, in their own files.
    let mut inner: Vec<ConfigError> = Vec::new();
    let Some(mut top) = Fields::new(String::new(), &root, &mut e) else {
        return Err(ConfigErrors(e.list));
    };
    if let Some(n) = top.get("supervisor") {
        if let Some(mut f) = Fields::new("supervisor".into(), n, &mut e) {
            if let Some(s) = f.str("socket", &mut e) {
                set.socket = dir.join(s);
            }
            if let Some(s) = f.str("run-dir", &mut e) {
                set.run_dir = dir.join(s);
            }
            if let Some(s) = f.str("state-dir", &mut e) {
                set.state_dir = dir.join(s);
            }
            if let Some(b) = f.parse("share-cores", "true or false", &mut e) {
                set.share_cores = b;
            }
            f.finish(&mut e);
        }
    }
    let host = host_cpus();
    // Who claimed what first: (kind, what) -> (LR, its field).
    let mut claimed: Vec<((String, String), String, String)> = Vec::new();
    let lr_nodes = seq(&mut top, "logical-routers", &mut e);
    if lr_nodes.is_empty() && !e.list.iter().any(|x| x.field == "logical-routers") {
        e.at(&root, "logical-routers", "no logical router is configured");
    }
    for (n, field) in lr_nodes {
        let Some(mut f) = Fields::new(field.clone(), n, &mut e) else {
            continue;
        };
        let origin = f.origin();
        let name = f.required("name", &mut e).unwrap_or_default();
        let name_at = f.node("name").unwrap_or(n);
        if !name.is_empty() && !valid_name(&name) {
            e.at(
                name_at,
                &f.field("name"),
                format!("`{name}` is not an LR name (letters, digits, '-' and '_', at most 15)"),
            );
        } else if let Some(other) = set.lrs.iter().find(|l| l.name == name) {
            e.at(
                name_at,
                &f.field("name"),
                format!("`{name}` is already {}", other.origin.field),
            );
        }
        let namespace = f.str("namespace", &mut e).unwrap_or_else(|| name.clone());
        let ns_at = f.node("namespace").unwrap_or(name_at);
        if !namespace.is_empty() && !valid_name(&namespace) {
            e.at(
                ns_at,
                &f.field("namespace"),
                format!("`{namespace}` is not a namespace name"),
            );
        } else if let Some(other) = set.lrs.iter().find(|l| l.namespace == namespace) {
            e.at(
                ns_at,
                &f.field("namespace"),
                format!("namespace `{namespace}` is already {}'s", other.name),
            );
        }
        let mut cpus = Vec::new();
        if let Some(s) = f.str("cpus", &mut e) {
            let at = f.node("cpus").unwrap_or(n);
            match parse_cpus(&s) {
                Some(c) if !c.is_empty() => {
                    if let Some(bad) = c.iter().find(|c| !host.contains(c)) {
                        e.at(
                            at,
                            &f.field("cpus"),
                            format!("CPU {bad} is not one this host has online"),
                        );
                    } else if !set.share_cores {
                        if let Some(other) = set
                            .lrs
                            .iter()
                            .find(|l| l.cpus.is_empty() || l.cpus.iter().any(|x| c.contains(x)))
                        {
                            e.at(
                                at,
                                &f.field("cpus"),
                                format!(
                                    "CPUs {s} overlap {}'s (set supervisor.share-cores to share them)",
                                    other.name
                                ),
                            );
                        }
                    }
                    cpus = c;
                }
                _ => e.at(
                    at,
                    &f.field("cpus"),
                    format!("`{s}` is not a CPU list (such as 0-3,6)"),
                ),
            }
        } else if !set.share_cores && !set.lrs.is_empty() {
            e.at(
                n,
                &f.field("cpus"),
                "without `cpus` an LR takes every CPU: give each LR its own, or set supervisor.share-cores",
            );
        }
        let mut memory = None;
        if let Some(s) = f.str("memory", &mut e) {
            let at = f.node("memory").unwrap_or(n);
            match parse_size(&s) {
                Some(b) if b >= 64 << 20 => memory = Some(b),
                Some(_) => e.at(at, &f.field("memory"), format!("{s}: at least 64M")),
                None => e.at(
                    at,
                    &f.field("memory"),
                    format!("`{s}` is not a size (such as 512M or 2G)"),
                ),
            }
        }
        let mut devices = Vec::new();
        let cfg_path = f.required("config", &mut e).map(|c| dir.join(c));
        let cfg_at = f.node("config").unwrap_or(n);
        if let Some(p) = &cfg_path {
            let parsed = super::read(p).and_then(|t| super::parse(&t, p));
            match parsed {
                Err(errs) => {
                    e.at(
                        cfg_at,
                        &f.field("config"),
                        format!(
                            "{}: {} error(s), listed after this one",
                            p.display(),
                            errs.0.len()
                        ),
                    );
                    inner.extend(errs.0);
                }
                Ok(c) => {
                    if let Some(bad) = c
                        .cores
                        .iter()
                        .find(|k| !cpus.is_empty() && !cpus.contains(k))
                    {
                        e.at(
                            cfg_at,
                            &f.field("config"),
                            format!(
                                "{}: router.cores has CPU {bad}, outside this LR's cpus",
                                p.display()
                            ),
                        );
                    }
                    for port in &c.ports {
                        for claim in claims(&port.driver) {
                            let what = format!("port {} ({} {})", port.name, claim.0, claim.1);
                            if let Some((_, lr, at)) = claimed.iter().find(|(k, _, _)| *k == claim)
                            {
                                e.at(
                                    cfg_at,
                                    &f.field("config"),
                                    format!("{}: {what} is already {lr}'s ({at})", p.display()),
                                );
                            } else {
                                claimed.push((claim, name.clone(), f.field("config")));
                            }
                        }
                        if let Driver::AfPacket { device, .. } | Driver::AfXdp { device, .. } =
                            &port.driver
                        {
                            if !devices.contains(device) {
                                devices.push(device.clone());
                            }
                        }
                    }
                }
            }
        }
        f.finish(&mut e);
        set.lrs.push(LrCfg {
            name,
            config: cfg_path
                .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
                .unwrap_or_default(),
            cpus,
            memory,
            namespace,
            devices,
            origin,
        });
    }
    top.finish(&mut e);
    let mut list = e.list;
    list.extend(inner);
    if list.is_empty() {
        Ok(set)
    } else {
        Err(ConfigErrors(list))
    }
}

#[cfg(test)]
mod tests;
