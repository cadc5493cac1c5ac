//! XR-1, the separation of logical routers, with each LR a process of its own: a supervisor
//! (in this process) runs LR1 (ports p1, p2) and LR2 (p3, p4), each `linerate daemon` in its
//! own namespace and control group; their ports are shared-memory ports the LRs serve and the
//! tester maps (`--port P=shm:PATH` of external mode). Streams run full mesh between the four
//! ports, IPv4 at 64 B and IPv6 at 78 B. The search finds the throughput of the streams inside
//! the LRs; then every stream runs at that load per port: inside streams must lose nothing,
//! streams across LRs must bring 0 frames (the seed: 100% load of four 10 GbE ports, both held).
//!
//! Reads: the LRs' state from the supervisor (memory, CPU, start time). Writes: a work folder
//! (`<out>/xr-1-lrs`) with the LRs' configs, the supervisor's file, the tester's view of the
//! chassis and the LRs' logs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use std::sync::{Arc, Mutex, Weak};

use api::views::LogicalRoutersView;
use control::lr::supervisor::Supervisor;

mod disturbed;
mod snmpd;
mod storm;

pub use disturbed::{xr2a, xr2b};
pub use storm::xr2c;

use crate::external::{self, ExternalRun, PortMap};
use crate::load::FrameSizes;
use crate::run::{RunOpts, ScenarioReport};
use crate::streams_file::{self, Pattern};

/// What XR-1, XR-2A and XR-2B run with: their logical routers and streams.
pub struct LrScenario {
    /// The reports' folder; the work folder goes inside it.
    pub out: PathBuf,
    /// The binary the LRs run (and whose `lr-exec` puts them in place): this one.
    pub binary: PathBuf,
    /// Workers per LR.
    pub workers: usize,
    /// UDP flows per stream.
    pub flows: u32,
}

/// Ports of each LR, with the IPv4 and IPv6 networks of each port's link: port i (1..=4) has
/// 10.i.0.0/24 and 2001:db8:i::/64, the router .1, the tester's host .2.
const LRS: [(&str, [usize; 2]); 2] = [("lr1", [1, 2]), ("lr2", [3, 4])];

fn shm_path(i: usize) -> String {
    format!("/dev/shm/linerate-xr1-{}-p{i}", std::process::id())
}

fn interface(i: usize, lr: usize) -> String {
    format!(
        "  - {{ name: p{i}, port: p{i}, mac: \"02:00:00:00:{:02x}:{i:02x}\", ipv4: [10.{i}.0.1/24], ipv6: [\"2001:db8:{i}::1/64\"] }}\n",
        lr + 1
    )
}

fn neighbors(i: usize) -> String {
    format!(
        "  - {{ interface: p{i}, ip: 10.{i}.0.2, mac: \"02:00:00:00:ff:{i:02x}\" }}\n  - {{ interface: p{i}, ip: \"2001:db8:{i}::2\", mac: \"02:00:00:00:ff:{i:02x}\" }}\n"
    )
}

/// LR `lr`'s own config: its two ports as shared-memory servers, static neighbours (the
/// tester's hosts), nothing of the other LR; with `snmp`, its IF-MIB through that AgentX
/// master in a context named after it.
fn lr_config(lr: usize, workers: usize, snmp: Option<&Path>) -> String {
    let ports = LRS[lr].1;
    let mut s = format!("router: {{ workers: {workers}, idle-sleep-us: 20 }}\nports:\n");
    for i in ports {
        s += &format!(
            "  - {{ name: p{i}, driver: shm, path: {}, role: server, slots: 4096 }}\n",
            shm_path(i)
        );
    }
    s += "interfaces:\n";
    for i in ports {
        s += &interface(i, lr);
    }
    s += "neighbors:\n";
    for i in ports {
        s += &neighbors(i);
    }
    if let Some(a) = snmp {
        s += &format!(
            "snmp: {{ agentx: \"{}\", context: {} }}\n",
            a.display(),
            LRS[lr].0
        );
    }
    s
}

/// The chassis as the tester sees it: all four ports, their interfaces and the hosts the
/// tester emulates (the router config format external mode reads).
fn chassis_view() -> String {
    let mut s = String::from("ports:\n");
    for i in 1..=4 {
        s += &format!("  - {{ name: p{i}, driver: mem }}\n");
    }
    s += "interfaces:\n";
    for (lr, (_, ports)) in LRS.iter().enumerate() {
        for &i in ports {
            s += &interface(i, lr);
        }
    }
    s += "neighbors:\n";
    for i in 1..=4 {
        s += &neighbors(i);
    }
    s
}

fn write(p: &Path, text: &str) -> Result<(), String> {
    std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))
}

/// One external run of `streams` over `maps` (some of the LRs' shm ports), the first of `ro`'s
/// frame sizes: what XR-2A/B/C run several times in turn.
fn run_streams(
    view_path: &Path,
    maps: &[PortMap],
    streams: &[crate::stream::StreamSpec],
    what: String,
    ro: &RunOpts,
    obs: &mut dyn crate::procedures::Observer,
) -> Result<ScenarioReport, String> {
    let sizes = ro
        .sizes
        .clone()
        .unwrap_or_else(|| vec![FrameSizes::Fixed(64)])[..1]
        .to_vec();
    external::run(
        ExternalRun {
            dut_path: view_path.to_path_buf(),
            dut: external::load_dut(view_path)?,
            maps: maps.to_vec(),
            streams: streams.to_vec(),
            speeds: vec![10e9; maps.len()],
            sizes,
            what,
            core: None,
            dut_api: None,
            resolve_timeout: Duration::from_secs(3),
            subsets: Vec::new(),
            blocked: Vec::new(),
        },
        ro,
        obs,
    )
}

/// The load a disturbed scenario runs at: `--load` if given (CI's short run, no search), else
/// half the throughput `search` finds (and its report); `id` names the scenario in errors.
fn half_throughput(
    id: &str,
    ro: &RunOpts,
    search: impl FnOnce() -> Result<ScenarioReport, String>,
) -> Result<(Option<ScenarioReport>, f64, RunOpts), String> {
    let (searched, load) = match ro.fixed_load {
        Some(l) => (None, l),
        None => {
            let r = search()?;
            let ndr = r.rows.first().map_or(0.0, |row| row.search.load);
            if ndr <= 0.0 {
                return Err(format!("{id}: the streams found no loss-free rate"));
            }
            (Some(r), ndr * 0.5)
        }
    };
    let mut fixed = ro.clone();
    fixed.fixed_load = Some(load);
    fixed.loss_vs_load = false;
    fixed.back_to_back = None;
    Ok((searched, load, fixed))
}

/// The trial of a fixed-load run's first row.
fn first_trial(r: &ScenarioReport) -> Option<crate::engine::TrialResult> {
    r.rows
        .first()
        .and_then(|row| row.search.trials.first())
        .map(|t| t.2.clone())
}

/// One report of a disturbed scenario: the search's (or the quiet run's head), then every run's
/// rows keyed "SIZE what".
fn merged(searched: Option<ScenarioReport>, runs: Vec<(ScenarioReport, &str)>) -> ScenarioReport {
    let mut r = searched.unwrap_or_else(|| {
        let mut base = runs[0].0.clone();
        base.rows.clear();
        base
    });
    for (rep, key) in runs {
        for mut row in rep.rows {
            row.key = format!("{} {key}", row.key);
            r.rows.push(row);
        }
    }
    r
}

/// What an interrupted run (Ctrl-C, SIGTERM) must stop before the tester exits: the supervisor
/// of the LRs running now (their processes, namespaces and groups) and snmpd.
static RUNNING: Mutex<(Option<Weak<Supervisor>>, Option<u32>)> = Mutex::new((None, None));

/// Stops what a scenario of this module has running (see [`RUNNING`]); the tester calls it when
/// it is interrupted, then exits.
pub fn interrupted() {
    let (sup, snmpd) = std::mem::take(&mut *RUNNING.lock().unwrap_or_else(|e| e.into_inner()));
    if let Some(s) = sup.and_then(|w| w.upgrade()) {
        s.shutdown();
    }
    if let Some(pid) = snmpd {
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
    }
    for (_, ports) in LRS {
        for i in ports {
            let _ = std::fs::remove_file(shm_path(i));
        }
    }
}

/// Writes the LRs' files in `<out>/<dir>`, starts them under a supervisor (with `snmp`, and
/// snmpd as their AgentX master first), waits until both answer, runs `f`, then stops them and
/// removes their files whatever the outcome.
fn with_lrs<T>(
    x: &LrScenario,
    dir: &str,
    snmp: bool,
    f: impl FnOnce(&Arc<Supervisor>, &Path, &[String; 2], Option<&snmpd::Snmpd>) -> Result<T, String>,
) -> Result<T, String> {
    let work = x.out.join(dir);
    // A fresh start: an LR boots from the running config its state folder keeps, and an
    // earlier run's names other shared-memory files.
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let cpus: Vec<usize> =
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    // One CPU per LR where the machine has them (the tester floats); on a small machine they
    // share, and the report says so.
    let lr_cpus: [String; 2] = if cpus.len() >= 3 {
        [
            format!("{}", cpus[cpus.len() - 2]),
            format!("{}", cpus[cpus.len() - 1]),
        ]
    } else {
        [format!("{}", cpus[0]), format!("{}", cpus[cpus.len() - 1])]
    };
    let pid = std::process::id() % 100_000;
    let mut set = String::from(
        "supervisor: { share-cores: true, socket: run/supervisor.sock, run-dir: run, state-dir: state }\nlogical-routers:\n",
    );
    let master = if snmp {
        let names: Vec<&str> = LRS.iter().map(|l| l.0).collect();
        Some(snmpd::Snmpd::start(&work, &names)?)
    } else {
        None
    };
    for (lr, (name, _)) in LRS.iter().enumerate() {
        let file = work.join(format!("{name}.yaml"));
        let agentx = master.as_ref().map(|m| m.agentx.as_path());
        write(&file, &lr_config(lr, x.workers, agentx))?;
        set += &format!(
            "  - {{ name: {name}, config: {name}.yaml, cpus: \"{}\", memory: 1G, namespace: xr1{name}{pid} }}\n",
            lr_cpus[lr]
        );
    }
    let set_path = work.join("lrs.yaml");
    write(&set_path, &set)?;
    let lrset = control::config::lr::parse_set(&set, &set_path).map_err(|e| e.to_string())?;
    let sup = Supervisor::start(lrset, x.binary.clone())?;
    *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) =
        (Some(Arc::downgrade(&sup)), master.as_ref().map(|m| m.pid()));
    let r = wait_running(&sup, &work).and_then(|()| f(&sup, &work, &lr_cpus, master.as_ref()));
    *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) = (None, None);
    sup.shutdown();
    drop(master);
    for (_, ports) in LRS {
        for i in ports {
            let _ = std::fs::remove_file(shm_path(i));
        }
    }
    r
}

fn wait_running(sup: &Supervisor, work: &Path) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        let v = sup.list();
        if v.routers.iter().all(|r| r.state == "running") {
            return Ok(());
        }
        if t0.elapsed() > Duration::from_secs(30) {
            return Err(format!(
                "the logical routers did not start in 30 s ({}); their logs are in {}",
                v.routers
                    .iter()
                    .map(|r| format!("{} {}", r.name, r.state))
                    .collect::<Vec<_>>()
                    .join(", "),
                work.join("run").display()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The tester's view of the chassis, written beside the LRs' files, and its four shm ports.
fn chassis(work: &Path) -> Result<(PathBuf, external::Dut, Vec<PortMap>), String> {
    let view_path = work.join("chassis.yaml");
    write(&view_path, &chassis_view())?;
    let dut = external::load_dut(&view_path)?;
    let maps: Vec<PortMap> = (1..=4)
        .map(|i| PortMap {
            dut_port: format!("p{i}"),
            device: format!("shm:{}", shm_path(i)),
        })
        .collect();
    Ok((view_path, dut, maps))
}

/// Full-mesh streams over the four ports, IPv4 then IPv6.
fn mesh_streams(
    infos: &[streams_file::PortInfo],
    flows: u32,
) -> Result<Vec<crate::stream::StreamSpec>, String> {
    let mut streams = streams_file::pattern(infos, Pattern::Mesh, &[], false, flows)?;
    let mut v6 = streams_file::pattern(infos, Pattern::Mesh, &[], true, flows)?;
    // The seed's 78-byte IPv6 frames hold no UDP header: flows differ by flow label instead.
    for s in &mut v6 {
        s.name = format!("v6 {}", s.name);
        s.min_size = 78;
        s.udp = None;
        for f in &mut s.fields {
            if matches!(f.kind, crate::stream::FieldKind::SrcPort) {
                f.kind = crate::stream::FieldKind::FlowLabel;
            }
        }
    }
    streams.extend(v6);
    Ok(streams)
}

/// Tester port `port`'s LR (0 for p1, p2; 1 for p3, p4).
fn lr_of(port: usize) -> usize {
    usize::from(port >= 2)
}

fn cpu_note(lr_cpus: &[String; 2], workers: usize) -> String {
    format!(
        "Each LR is its own `linerate daemon` process in its own namespace and control group \
         (LR1 on CPUs {}, LR2 on CPUs {}, {} worker(s) each{}); the tester reaches their \
         ports through shared-memory rings, the only way in.",
        lr_cpus[0],
        lr_cpus[1],
        workers,
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 3 {
            "; this machine has too few CPUs for the tester and each LR to have one: they share"
        } else {
            ""
        }
    )
}

fn lr_notes(started: &LogicalRoutersView, after: &LogicalRoutersView) -> Vec<String> {
    started
        .routers
        .iter()
        .zip(&after.routers)
        .map(|(a, b)| {
            format!(
                "{}: pid {}, started (API up) in {} ms, memory {:.1} MiB at start and {:.1} MiB after, {:.2} CPU-s used, {} restart(s), {} hand-over(s), pid {} after",
                a.name,
                a.pid.unwrap_or(0),
                a.start_ms.unwrap_or(0),
                a.memory_used as f64 / (1u64 << 20) as f64,
                b.memory_used as f64 / (1u64 << 20) as f64,
                b.cpu_seconds,
                b.restarts,
                b.handovers,
                b.pid.unwrap_or(0)
            )
        })
        .collect()
}

/// Runs XR-1; the LRs are stopped and their files removed whatever the outcome.
pub fn xr1(
    x: &LrScenario,
    ro: &RunOpts,
    obs: &mut dyn crate::procedures::Observer,
) -> Result<ScenarioReport, String> {
    with_lrs(x, "xr-1-lrs", false, |sup, work, lr_cpus, _| {
        run_with(sup, x, ro, obs, work, lr_cpus)
    })
}

fn run_with(
    sup: &Supervisor,
    x: &LrScenario,
    ro: &RunOpts,
    obs: &mut dyn crate::procedures::Observer,
    work: &Path,
    lr_cpus: &[String; 2],
) -> Result<ScenarioReport, String> {
    let started = sup.list();
    let (view_path, dut, maps) = chassis(work)?;
    let infos = external::port_infos(&dut, &maps);
    let streams = mesh_streams(&infos, x.flows)?;
    let blocked: Vec<usize> = (0..streams.len())
        .filter(|&i| lr_of(streams[i].tx_port) != lr_of(streams[i].rx_port))
        .collect();
    let sizes = ro
        .sizes
        .clone()
        .unwrap_or_else(|| vec![FrameSizes::Fixed(64)]);
    let nstreams = streams.len();
    let mut r = external::run(
        ExternalRun {
            dut_path: view_path,
            dut,
            maps,
            streams,
            speeds: vec![10e9; 4],
            sizes,
            what: format!(
                "full mesh, IPv4 64 B and IPv6 78 B, {} flows per stream",
                x.flows
            ),
            core: None,
            dut_api: None,
            resolve_timeout: Duration::from_secs(3),
            subsets: Vec::new(),
            blocked,
        },
        ro,
        obs,
    )?;
    let after = sup.list();
    r.id = "XR-1".into();
    r.title = format!(
        "XR-1 separation: LR1 (p1, p2) and LR2 (p3, p4) as processes, {nstreams} streams full mesh over shared-memory ports"
    );
    r.seed_title = "Cisco XR 12000, XR-1: full mesh IPv4 and IPv6 (64/78 B) at 100% of four 10 GbE ports, 60 s: 0 loss inside each LR, 0 frames across".into();
    r.workers = x.workers * 2;
    r.port_names = (1..=4).map(|i| format!("p{i}")).collect();
    r.notes.insert(0, cpu_note(lr_cpus, x.workers));
    r.notes.extend(lr_notes(&started, &after));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use control::config::Driver;

    #[test]
    fn each_lr_serves_its_own_two_ports_and_knows_only_their_hosts() {
        for (lr, (_, ports)) in LRS.iter().enumerate() {
            let cfg =
                control::config::parse(&lr_config(lr, 2, None), Path::new("lr.yaml")).unwrap();
            assert_eq!(cfg.workers, 2);
            let names: Vec<_> = cfg.ports.iter().map(|p| p.name.clone()).collect();
            assert_eq!(names, ports.map(|i| format!("p{i}")));
            for (p, i) in cfg.ports.iter().zip(ports) {
                assert!(
                    matches!(&p.driver, Driver::Shm { path, server: true, .. } if path.to_string_lossy() == shm_path(*i)),
                    "{p:?}"
                );
            }
            assert_eq!(cfg.neighbors.len(), 4);
            assert!(cfg.routes.is_empty());
            assert!(cfg.snmp.is_none());
            let agentx = Path::new("/run/x/agentx.sock");
            let cfg = control::config::parse(&lr_config(lr, 1, Some(agentx)), Path::new("lr.yaml"))
                .unwrap();
            let snmp = cfg.snmp.unwrap();
            assert_eq!(snmp.agentx, "/run/x/agentx.sock");
            assert_eq!(snmp.context.as_deref(), Some(LRS[lr].0));
        }
    }

    #[test]
    fn the_tester_sees_all_four_ports_with_a_host_of_each_family() {
        let dut = external::parse_dut(&chassis_view(), Path::new("chassis.yaml")).unwrap();
        let maps: Vec<PortMap> = (1..=4)
            .map(|i| PortMap {
                dut_port: format!("p{i}"),
                device: format!("shm:{}", shm_path(i)),
            })
            .collect();
        let infos = external::port_infos(&dut, &maps);
        for (i, p) in infos.iter().enumerate() {
            assert_eq!(p.host_mac, [2, 0, 0, 0, 0xff, i as u8 + 1]);
            assert_eq!(p.host_v4, Some(u32::from_be_bytes([10, i as u8 + 1, 0, 2])));
            assert!(p.host_v6.is_some());
        }
    }
}
