//! The config lifecycle: a new config is checked whole, built into a complete set of tables off
//! to the side, compared with the running one, and then switched in with one pointer swap (plus
//! the port and worker changes it implies); or it is rejected with every error and nothing
//! changes. Each commit is kept in a numbered history; any entry can be rolled back to; a commit
//! made with a confirm timer is rolled back by itself unless confirmed in time. With a state
//! folder, the running config and the history persist across restarts.
//!
//! State folder layout: `running.yaml` (the running config's text), `history/NNNNNN.yaml` (each
//! commit's text) and `history/NNNNNN.json` (its metadata: time, comment, source path, summary).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{ApiError, ApiResult, ApplyOptions, ApplyOutcome, Core, ErrorKind, Locked, State};
use crate::config::{self, Config, Driver};
use crate::router::Router;
use crate::syslog::Severity;

/// One entry of the history.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Commit {
    pub id: u64,
    pub unix_time: u64,
    pub comment: String,
    /// The path the config was read from; relative paths inside resolve against its folder.
    pub source: PathBuf,
    /// What changed, one line per item (`+ port p9`, `- route 10.0.0.0/8`, ...).
    pub summary: Vec<String>,
    /// `committed`, `pending` (waiting for confirmation), `confirmed`, `rolled-back`.
    pub status: String,
    #[serde(skip)]
    pub text: String,
}

impl Commit {
    /// The entry as `config history` lists it.
    pub fn view(&self) -> api::views::CommitView {
        api::views::CommitView {
            id: self.id,
            unix_time: self.unix_time,
            comment: self.comment.clone(),
            source: self.source.clone(),
            summary: self.summary.clone(),
            status: self.status.clone(),
        }
    }
}

#[derive(Default)]
pub struct History {
    pub commits: Vec<Commit>,
    /// A commit waiting for confirmation: its id, the deadline, and the commit to go back to.
    pub pending: Option<(u64, Instant, u64)>,
}

impl History {
    pub fn load(dir: &Path) -> Result<History, String> {
        let h = dir.join("history");
        let mut commits = Vec::new();
        let Ok(rd) = std::fs::read_dir(&h) else {
            return Ok(History::default());
        };
        let mut names: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        names.sort();
        for p in names {
            let meta = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let mut c: Commit =
                serde_json::from_str(&meta).map_err(|e| format!("{}: {e}", p.display()))?;
            let tp = p.with_extension("yaml");
            c.text = std::fs::read_to_string(&tp).map_err(|e| format!("{}: {e}", tp.display()))?;
            if c.status == "pending" {
                // The process ended before the commit was confirmed; what booted is whatever
                // running.yaml held, which the caller decides.
                c.status = "unconfirmed".into();
            }
            commits.push(c);
        }
        Ok(History {
            commits,
            pending: None,
        })
    }

    pub fn last_id(&self) -> u64 {
        self.commits.last().map_or(0, |c| c.id)
    }

    pub fn get(&self, id: u64) -> Option<&Commit> {
        self.commits.iter().find(|c| c.id == id)
    }
}

/// The persisted running config of a state folder, if there is one: (text, source path).
pub fn persisted_running(dir: &Path) -> Option<(String, PathBuf)> {
    let text = std::fs::read_to_string(dir.join("running.yaml")).ok()?;
    let source = std::fs::read_to_string(dir.join("running.source"))
        .map(|s| PathBuf::from(s.trim_end()))
        .unwrap_or_else(|_| dir.join("running.yaml"));
    Some((text, source))
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, data)?;
    std::fs::rename(&tmp, path)
}

fn persist(core: &Core, s: &State, c: &Commit) -> ApiResult<()> {
    let Some(dir) = &core.state_dir else {
        return Ok(());
    };
    let io = |e: std::io::Error| ApiError::internal(format!("state folder {}: {e}", dir.display()));
    let h = dir.join("history");
    std::fs::create_dir_all(&h).map_err(io)?;
    let base = h.join(format!("{:06}", c.id));
    write_atomic(&base.with_extension("yaml"), c.text.as_bytes()).map_err(io)?;
    let meta = serde_json::to_vec_pretty(c).map_err(|e| ApiError::internal(e.to_string()))?;
    write_atomic(&base.with_extension("json"), &meta).map_err(io)?;
    write_atomic(&dir.join("running.yaml"), s.text.as_bytes()).map_err(io)?;
    write_atomic(
        &dir.join("running.source"),
        s.source.display().to_string().as_bytes(),
    )
    .map_err(io)?;
    Ok(())
}

fn save_meta(core: &Core, c: &Commit) {
    if let Some(dir) = &core.state_dir {
        let base = dir.join("history").join(format!("{:06}", c.id));
        if let Ok(meta) = serde_json::to_vec_pretty(c) {
            let _ = write_atomic(&base.with_extension("json"), &meta);
        }
    }
}

/// At start: the config the router booted from becomes a commit unless it is the last one.
pub(super) fn record_startup(core: &Core, s: &mut Locked<'_>) -> ApiResult<()> {
    if s.history.commits.last().is_some_and(|c| c.text == s.text) {
        return persist(core, s, &s.history.commits.last().cloned().expect("last"));
    }
    let c = Commit {
        id: s.history.last_id() + 1,
        unix_time: now_unix(),
        comment: "startup".into(),
        source: s.source.clone(),
        summary: vec!["initial config".into()],
        status: "committed".into(),
        text: s.text.clone(),
    };
    persist(core, s, &c)?;
    s.history.commits.push(c);
    Ok(())
}

/// When a commit made with these options rolls back unless confirmed; a time the clock cannot
/// reach is the client's mistake.
pub fn confirm_deadline(opts: &ApplyOptions) -> ApiResult<Option<Instant>> {
    opts.confirm_seconds
        .map(|secs| {
            Instant::now()
                .checked_add(Duration::from_secs(secs))
                .ok_or_else(|| ApiError::invalid(format!("confirm_seconds {secs}: too far")))
        })
        .transpose()
}

/// A unified diff of two texts (the config files).
pub fn text_diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(old_name, new_name)
        .to_string()
}

/// What differs between two configs, item by item.
pub fn summarize(old: &Config, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    // Items are matched by key through maps: a config of tens of thousands of routes is
    // compared in linear time (a search per item took minutes at ME-6's 11,520 routes).
    macro_rules! items {
        ($what:literal, $list:ident, $key:expr) => {{
            let key = $key;
            let old_by: std::collections::HashMap<String, _> =
                old.$list.iter().map(|o| (key(o), o)).collect();
            let mut new_keys = std::collections::HashSet::with_capacity(new.$list.len());
            for n in &new.$list {
                let k = key(n);
                match old_by.get(&k) {
                    None => out.push(format!("+ {} {}", $what, k)),
                    Some(o) if !same(*o, n) => out.push(format!("~ {} {}", $what, k)),
                    _ => {}
                }
                new_keys.insert(k);
            }
            for o in &old.$list {
                let k = key(o);
                if !new_keys.contains(&k) {
                    out.push(format!("- {} {}", $what, k));
                }
            }
        }};
    }
    fn same<T: std::fmt::Debug>(a: &T, b: &T) -> bool {
        // Origins (line numbers) differ when only the layout changed: compare without them.
        strip(&format!("{a:?}")) == strip(&format!("{b:?}"))
    }
    fn strip(s: &str) -> String {
        let mut out = String::new();
        let mut rest = s;
        while let Some(i) = rest.find("origin: Origin {") {
            out.push_str(&rest[..i]);
            let j = rest[i..].find('}').map_or(rest.len(), |j| i + j + 1);
            rest = &rest[j..];
        }
        out.push_str(rest);
        out
    }
    items!("port", ports, |p: &config::PortCfg| p.name.clone());
    items!("interface", interfaces, |p: &config::InterfaceCfg| p
        .name
        .clone());
    items!("neighbor", neighbors, |p: &config::NeighborCfg| format!(
        "{} on {}",
        p.ip, p.interface
    ));
    items!("route", routes, |p: &config::RouteCfg| format!(
        "{} vrf {}",
        p.prefix, p.vrf
    ));
    items!(
        "route-file",
        route_files,
        |p: &config::RouteFileCfg| format!("{} vrf {}", p.path.display(), p.vrf)
    );
    for v in &new.vrfs {
        if !old.vrfs.contains(v) {
            out.push(format!("+ vrf {v}"));
        }
    }
    for v in &old.vrfs {
        if !new.vrfs.contains(v) {
            out.push(format!("- vrf {v}"));
        }
    }
    if old.workers != new.workers {
        out.push(format!("~ workers {} -> {}", old.workers, new.workers));
    }
    if old.icmp_rate != new.icmp_rate {
        out.push(format!(
            "~ icmp-rate {} -> {}",
            old.icmp_rate, new.icmp_rate
        ));
    }
    if (old.max_v4_routes, old.max_v6_routes) != (new.max_v4_routes, new.max_v6_routes) {
        out.push("~ limits".into());
    }
    if old.logging != new.logging {
        out.push("~ logging".into());
    }
    out
}

/// What a commit cannot change in a running daemon, and why; None if `new` changes none of it.
///
/// The punt thread, the TAP twins' existence and the FPM server are set up once at start (the
/// punt table aside, which is published with the tables). The interfaces are not: their twins
/// follow commits (`punt::twins`).
fn fixed_at_start(old: &Config, new: &Config) -> Option<String> {
    let fixed = |c: &config::ControlPlane| config::ControlPlane {
        punt: Default::default(),
        ..c.clone()
    };
    if fixed(&old.control_plane) != fixed(&new.control_plane) {
        return Some(
            "control-plane: the punt path, TAP twins and FPM server are set up at start".into(),
        );
    }
    let ggsn = |c: &Config| c.ggsn.as_ref().map(|g| g.without_origins());
    if ggsn(old) != ggsn(new)
        || (old.ggsn.is_some() && old.max_gtp_contexts != new.max_gtp_contexts)
    {
        return Some(
            "ggsn: the GGSN's address, APNs and context table are set up at start (its PDP contexts would be lost)"
                .into(),
        );
    }
    let ldp = |c: &Config| {
        crate::ldp::engine_cfg(c).map(|mut e| {
            e.pws.iter_mut().for_each(|p| p.ac_up = true);
            e
        })
    };
    if ldp(old) != ldp(new) {
        return Some(
            "mpls.ldp: the LDP speaker and the pseudowires it signals are set up at start (its sessions would be lost)"
                .into(),
        );
    }
    let l3vpn = |c: &Config| {
        c.l3vpn.as_ref().map(|l| {
            let vrfs: Vec<_> = l
                .vrfs
                .iter()
                .map(|v| {
                    (
                        v.name.clone(),
                        v.rd,
                        v.import.clone(),
                        v.export.clone(),
                        v.label,
                    )
                })
                .collect();
            (l.api, l.next_hop, vrfs)
        })
    };
    if l3vpn(old) != l3vpn(new) {
        return Some(
            "l3vpn: the VPN speaker's connection and the VPN VRFs are set up at start".into(),
        );
    }
    let dlsw = |c: &Config| c.dlsw.as_ref().map(|d| d.without_origins());
    if dlsw(old) != dlsw(new) {
        return Some(
            "dlsw: the DLSw peers and LAN side are set up at start (its circuits would be lost)"
                .into(),
        );
    }
    None
}

fn invalid_config(e: config::ConfigErrors) -> ApiError {
    ApiError {
        kind: ErrorKind::Invalid,
        message: format!(
            "config rejected: {} error(s); nothing was changed",
            e.0.len()
        ),
        errors: e.0.iter().map(|e| e.to_string()).collect(),
    }
}

impl Core {
    /// Checks `text` (as if read from `source`) and, unless dry, makes it the running config.
    pub fn apply(
        self: &Arc<Self>,
        text: &str,
        source: &Path,
        opts: ApplyOptions,
    ) -> ApiResult<ApplyOutcome> {
        let confirm_at = confirm_deadline(&opts)?;
        let mut s = self.lock("config.apply");
        let out = self.apply_locked(&mut s, text, source, &opts)?;
        // A commit made while another waits for confirmation confirms that one (as commit
        // confirmed does on Junos and IOS XR): else its timer would roll this commit back too.
        if let Some(id) = out.commit {
            if let Some((pending, _, _)) = s.history.pending.take() {
                if let Some(c) = s.history.commits.iter_mut().find(|c| c.id == pending) {
                    c.status = "confirmed".into();
                    save_meta(self, c);
                }
                self.logger.log(
                    Severity::Notice,
                    "CONFIG_CONFIRMED",
                    &[("commit", pending.to_string()), ("by", id.to_string())],
                    format!("config commit {pending} confirmed by commit {id}"),
                );
            }
        }
        if let (Some(id), Some(secs), Some(at)) = (out.commit, opts.confirm_seconds, confirm_at) {
            let previous = s
                .history
                .commits
                .iter()
                .rev()
                .find(|c| c.id < id && c.status != "rolled-back")
                .map_or(0, |c| c.id);
            s.history.pending = Some((id, at, previous));
            if let Some(c) = s.history.commits.iter_mut().find(|c| c.id == id) {
                c.status = "pending".into();
                save_meta(self, c);
            }
            let weak: Weak<Core> = Arc::downgrade(self);
            std::thread::Builder::new()
                .name("commit-confirm".into())
                .spawn(move || {
                    std::thread::sleep(Duration::from_secs(secs));
                    if let Some(core) = weak.upgrade() {
                        core.confirm_expired(id);
                    }
                })
                .map_err(|e| ApiError::internal(e.to_string()))?;
        }
        Ok(out)
    }

    fn apply_locked(
        &self,
        s: &mut Locked<'_>,
        text: &str,
        source: &Path,
        opts: &ApplyOptions,
    ) -> ApiResult<ApplyOutcome> {
        let mut new_cfg = config::parse(text, source).map_err(invalid_config)?;
        super::services::apply_acl_edits(&mut new_cfg, &s.acl_edits);
        let old_cfg = s.router.cfg.clone();
        let diff = text_diff(
            &s.text,
            text,
            &format!("running (commit {})", s.history.last_id()),
            &source.display().to_string(),
        );
        let summary = summarize(&old_cfg, &new_cfg);
        if s.text == text {
            return Ok(ApplyOutcome {
                commit: None,
                changed: false,
                dry_run: opts.dry_run,
                summary,
                diff,
                confirm_deadline_s: None,
                warnings: Vec::new(),
            });
        }
        if new_cfg.buffers != old_cfg.buffers {
            return Err(ApiError::invalid(format!(
                "{}: router.buffers: the buffer pool cannot be resized at run time ({} -> {}); change it and restart",
                source.display(),
                old_cfg.buffers,
                new_cfg.buffers
            )));
        }
        if let Some(why) = fixed_at_start(&old_cfg, &new_cfg) {
            return Err(ApiError::invalid(format!(
                "{}: {why}; nothing was changed (change it and restart)",
                source.display()
            )));
        }
        if s.router.bridges.table.is_some() && new_cfg.max_macs != old_cfg.max_macs {
            return Err(ApiError::invalid(format!(
                "{}: limits.macs: the MAC table ({} entries, made when the first bridge was configured) cannot be resized at run time; change it and restart",
                source.display(),
                old_cfg.max_macs
            )));
        }
        let mut warnings = Vec::new();
        // Build everything off to the side: route files are read and every route resolved now.
        let mut new = Router::build_unpublished_from(
            new_cfg.clone(),
            &s.router.port_slots,
            s.router.epoch.clone(),
            s.router.shared.clone(),
            Some(&s.router.services),
            Some(&s.router.bridges),
            Some(&s.router.mcast),
        )
        .map_err(|e| ApiError::invalid(format!("config rejected; nothing was changed: {e}")))?;
        // The GGSN and its contexts go on as they are (its section cannot change).
        new.gtp = s.router.gtp.clone();
        new.ports_down = s
            .router
            .ports_down
            .iter()
            .filter(|p| new_cfg.ports.iter().any(|q| &q.name == *p))
            .cloned()
            .collect();
        new.links_down = s.router.links_down.clone();
        // Pseudowires LDP signalled keep their labels across the commit (the speaker hears
        // of the new config after it, and signals what changed).
        new.set_signalled(s.router.signalled.clone())
            .map_err(|e| ApiError::invalid(format!("config rejected; nothing was changed: {e}")))?;
        // LDP's labels likewise (its routes' labels are put back as their sources add them).
        if new_cfg.mpls.as_ref().is_some_and(|m| m.ldp.is_some()) {
            new.set_ldp(s.router.ldp.bindings.clone()).map_err(|e| {
                ApiError::invalid(format!("config rejected; nothing was changed: {e}"))
            })?;
        }
        // Neighbours learned by ARP/ND keep forwarding across the commit.
        new.carry_neighbors(&s.router);
        new.publish_fibs()
            .map_err(|e| ApiError::invalid(format!("config rejected; nothing was changed: {e}")))?;
        // The API routes carried into the new tables. The running set changes only when the
        // switch is made: a dry run (`config diff`) or a rejected config leaves it as it was.
        let mut carried = std::collections::BTreeMap::new();
        for (&(vrf, key), target) in &s.api_routes {
            let vrf_name = s.router.cfg.vrfs.get(vrf).cloned().unwrap_or_default();
            let p: config::Prefix = key.into();
            match new_cfg.vrfs.iter().position(|v| *v == vrf_name) {
                Some(nv) => {
                    // Configured routes take precedence: an API route whose prefix the new
                    // config configures gives way to it.
                    let configured = match p {
                        config::Prefix::V4(a, l) => new.fibs[nv].v4.get(a, l).is_some(),
                        config::Prefix::V6(a, l) => new.fibs[nv].v6.get(a, l).is_some(),
                    };
                    if configured {
                        warnings.push(format!(
                            "API route {p} in VRF {vrf_name} dropped: the config configures {p}"
                        ));
                        continue;
                    }
                    match new.add_route(nv, p, target) {
                        Ok(()) => {
                            carried.insert((nv, key), target.clone());
                        }
                        Err(e) => {
                            warnings.push(format!("API route {p} in VRF {vrf_name} dropped: {e}"))
                        }
                    }
                }
                None => warnings.push(format!(
                    "API route {p} dropped: VRF {vrf_name} is no longer configured"
                )),
            }
        }
        new.publish_fibs()
            .map_err(|e| ApiError::invalid(format!("config rejected; nothing was changed: {e}")))?;
        if opts.dry_run {
            return Ok(ApplyOutcome {
                commit: None,
                changed: true,
                dry_run: true,
                summary,
                diff,
                confirm_deadline_s: None,
                warnings,
            });
        }

        // New TAP twins are made before anything changes, so a kernel that refuses one refuses
        // the commit; the punt thread takes them with the tables (see `punt::twins`).
        let twins = match (new_cfg.control_plane.taps, self.has_punt_plane()) {
            (true, true) => Some(
                crate::punt::twins::prepare(&old_cfg, &new_cfg, new.generation).map_err(|e| {
                    ApiError::invalid(format!("config rejected; nothing was changed: {e}"))
                })?,
            ),
            _ => None,
        };

        // The switch. Ports that left (or changed driver) stop first; the new tables go live in
        // one swap; then new ports start and the worker count follows.
        // An ATM port's queues carry its VCs' SAR: a changed VC set remakes them.
        let vcs_changed: std::collections::HashSet<String> = new_cfg
            .ports
            .iter()
            .filter(|p| p.atm.is_some() && s.router.atm_vcs(&p.name) != new.atm_vcs(&p.name))
            .map(|p| p.name.clone())
            .collect();
        let changed_port = |name: &str| {
            let o = old_cfg.ports.iter().find(|p| p.name == name);
            let n = new_cfg.ports.iter().find(|p| p.name == name);
            match (o, n) {
                (Some(o), Some(n)) => {
                    o.driver != n.driver || o.atm != n.atm || vcs_changed.contains(name)
                }
                _ => false,
            }
        };
        for (idx, slot) in s.router.port_slots.clone().iter().enumerate() {
            let Some(name) = slot else { continue };
            let gone = !new_cfg.ports.iter().any(|p| &p.name == name);
            if gone || changed_port(name) {
                s.runtime
                    .remove_port(idx as u16)
                    .map_err(|e| ApiError::internal(e.to_string()))?;
            }
        }
        let (changes, made) = match twins {
            Some(t) => {
                self.with_punt_plane(|p| p.plan(t.plan));
                (t.changes, t.made)
            }
            None => (Vec::new(), Vec::new()),
        };
        // The other route sources' routes (FRR's, over FPM) go into the new tables before they
        // go live; every twin of the new config exists by now, new ones included.
        if !s.sources.is_empty() {
            super::sources::reinstall_all(&mut s.sources, &mut new, &carried);
            new.publish_fibs()
                .map_err(|e| ApiError::internal(format!("route sources: {e}")))?;
        }
        new.activate();
        warnings.extend(crate::punt::twins::change(&changes));
        crate::punt::twins::announce_later(made);
        for (idx, slot) in new.port_slots.iter().enumerate() {
            let Some(name) = slot else { continue };
            let existed = old_cfg.ports.iter().any(|p| &p.name == name);
            if !existed || changed_port(name) {
                let pc = new_cfg
                    .ports
                    .iter()
                    .find(|p| &p.name == name)
                    .expect("slot");
                s.runtime
                    .add_port(idx as u16, pc, new.atm_vcs(name))
                    .map_err(|e| ApiError::internal(e.to_string()))?;
                if matches!(pc.driver, Driver::Mem) {
                    warnings.push(format!(
                        "port {name}: a mem port's far end belongs to an embedded tester"
                    ));
                }
            }
        }
        let live = s.runtime.workers().len();
        if new_cfg.workers > live {
            for i in live..new_cfg.workers {
                let core = new_cfg.cores.get(i).copied();
                let id = s
                    .runtime
                    .add_worker(core)
                    .map_err(|e| ApiError::internal(e.to_string()))?;
                self.logger.log(
                    Severity::Notice,
                    "WORKER_ADDED",
                    &[("worker", id.to_string())],
                    format!("worker {id} added by config commit"),
                );
            }
        } else if new_cfg.workers < live {
            let mut ids: Vec<usize> = s.runtime.workers().iter().map(|w| w.id).collect();
            ids.sort_unstable();
            for id in ids.into_iter().rev().take(live - new_cfg.workers) {
                s.runtime
                    .remove_worker(id)
                    .map_err(|e| ApiError::internal(e.to_string()))?;
                self.logger.log(
                    Severity::Notice,
                    "WORKER_REMOVED",
                    &[("worker", id.to_string())],
                    format!("worker {id} removed by config commit"),
                );
            }
        }
        if new_cfg.events != old_cfg.events {
            match &*self.events.lock().unwrap_or_else(|e| e.into_inner()) {
                Some(ev) => ev.reconfigure(new_cfg.events.clone()),
                None => warnings.push(
                    "event-manager: rules run in `linerate daemon` only; here they are not evaluated".into(),
                ),
            }
        }
        if new_cfg.logging != old_cfg.logging {
            if let Err(e) = self.logger.reconfigure(new_cfg.logging.clone()) {
                warnings.push(format!("logging: {e}; the previous logging settings stay"));
            }
        }
        for l in &summary {
            if let Some(port) = l.strip_prefix("+ port ") {
                self.logger.log(
                    Severity::Notice,
                    "PORT_ADDED",
                    &[("port", port.to_string())],
                    format!("port {port} added"),
                );
            } else if let Some(port) = l.strip_prefix("- port ") {
                self.logger.log(
                    Severity::Notice,
                    "PORT_REMOVED",
                    &[("port", port.to_string())],
                    format!("port {port} removed"),
                );
            }
        }
        for (o, n) in old_cfg.interfaces.iter().filter_map(|o| {
            new_cfg
                .interfaces
                .iter()
                .find(|n| n.name == o.name)
                .map(|n| (o, n))
        }) {
            if o.up != n.up {
                let (id, what) = if n.up {
                    ("LINK_UP", "up")
                } else {
                    ("LINK_DOWN", "administratively down")
                };
                self.logger.log(
                    Severity::Notice,
                    id,
                    &[("interface", n.name.clone())],
                    format!("interface {} is {what}", n.name),
                );
            }
        }
        s.router = new;
        s.api_routes = carried;
        s.text = text.to_string();
        s.source = source.to_path_buf();
        let c = Commit {
            id: s.history.last_id() + 1,
            unix_time: now_unix(),
            comment: opts.comment.clone(),
            source: source.to_path_buf(),
            summary: summary.clone(),
            status: "committed".into(),
            text: text.to_string(),
        };
        persist(self, s, &c)?;
        let id = c.id;
        s.history.commits.push(c);
        self.logger.log(
            Severity::Notice,
            "CONFIG_COMMIT",
            &[
                ("commit", id.to_string()),
                ("changes", summary.len().to_string()),
                ("comment", opts.comment.clone()),
            ],
            format!(
                "config commit {id} applied ({} change(s)): {}",
                summary.len(),
                summary.join(", ")
            ),
        );
        Ok(ApplyOutcome {
            commit: Some(id),
            changed: true,
            dry_run: false,
            summary,
            diff,
            confirm_deadline_s: opts.confirm_seconds,
            warnings,
        })
    }

    /// The running config's text.
    pub fn running_config(&self) -> (String, PathBuf, u64) {
        let s = self.lock("config.running");
        (s.text.clone(), s.source.clone(), s.history.last_id())
    }

    pub fn history(&self) -> Vec<Commit> {
        self.lock("config.history").history.commits.clone()
    }

    /// Commit `id`'s full text.
    pub fn commit_text(&self, id: u64) -> ApiResult<Commit> {
        let s = self.lock("config.show");
        let c = s
            .history
            .get(id)
            .ok_or_else(|| ApiError::not_found(format!("no commit {id}")))?;
        let mut c = c.clone();
        c.text = s
            .history
            .get(id)
            .map(|c| c.text.clone())
            .unwrap_or_default();
        Ok(c)
    }

    /// Makes commit `id`'s config the running one again (as a new commit).
    pub fn rollback(self: &Arc<Self>, id: u64) -> ApiResult<ApplyOutcome> {
        let mut s = self.lock("config.rollback");
        let c = s
            .history
            .get(id)
            .cloned()
            .ok_or_else(|| ApiError::not_found(format!("no commit {id}")))?;
        let out = self.apply_locked(
            &mut s,
            &c.text,
            &c.source,
            &ApplyOptions {
                comment: format!("rollback to commit {id}"),
                ..Default::default()
            },
        )?;
        // A commit waiting for confirmation is abandoned by an explicit rollback.
        if let Some((pending, _, _)) = s.history.pending.take() {
            if let Some(c) = s.history.commits.iter_mut().find(|c| c.id == pending) {
                c.status = "rolled-back".into();
                save_meta(self, c);
            }
        }
        self.logger.log(
            Severity::Notice,
            "CONFIG_ROLLBACK",
            &[("to", id.to_string())],
            format!("config rolled back to commit {id}"),
        );
        Ok(out)
    }

    /// Confirms the pending commit-confirmed.
    pub fn confirm(&self) -> ApiResult<u64> {
        let mut s = self.lock("config.confirm");
        let Some((id, _, _)) = s.history.pending.take() else {
            return Err(ApiError::conflict("no commit is waiting for confirmation"));
        };
        if let Some(c) = s.history.commits.iter_mut().find(|c| c.id == id) {
            c.status = "confirmed".into();
            save_meta(self, c);
        }
        self.logger.log(
            Severity::Notice,
            "CONFIG_CONFIRMED",
            &[("commit", id.to_string())],
            format!("config commit {id} confirmed"),
        );
        Ok(id)
    }

    /// The confirm timer of commit `id` ran out: roll back unless it was confirmed meanwhile.
    fn confirm_expired(self: &Arc<Self>, id: u64) {
        let mut s = self.lock("config.confirm-timeout");
        match s.history.pending {
            Some((p, _, back)) if p == id => {
                s.history.pending = None;
                let Some(prev) = s.history.get(back).cloned() else {
                    return;
                };
                let res = self.apply_locked(
                    &mut s,
                    &prev.text,
                    &prev.source,
                    &ApplyOptions {
                        comment: format!("automatic rollback: commit {id} was not confirmed"),
                        ..Default::default()
                    },
                );
                if let Some(c) = s.history.commits.iter_mut().find(|c| c.id == id) {
                    c.status = "rolled-back".into();
                    save_meta(self, c);
                }
                match res {
                    Ok(_) => self.logger.log(
                        Severity::Warning,
                        "CONFIG_ROLLBACK",
                        &[("commit", id.to_string()), ("to", back.to_string())],
                        format!(
                            "commit {id} was not confirmed in time: rolled back to commit {back}"
                        ),
                    ),
                    Err(e) => self.logger.log(
                        Severity::Error,
                        "CONFIG_ROLLBACK_FAILED",
                        &[("commit", id.to_string())],
                        format!("automatic rollback of commit {id} failed: {e}"),
                    ),
                };
            }
            _ => {}
        }
    }

    /// The pending commit-confirmed: (commit, seconds left).
    pub fn pending_confirm(&self) -> Option<(u64, u64)> {
        let s = self.lock("config.pending");
        s.history.pending.map(|(id, deadline, _)| {
            (
                id,
                deadline.saturating_duration_since(Instant::now()).as_secs(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::summarize;

    fn config(routes: &[(u32, &str)]) -> crate::config::Config {
        let mut text = String::from(
            "ports:\n  - { name: p0, driver: mem }\ninterfaces:\n  - { name: p0, port: p0, \
             mac: \"02:00:00:00:00:01\", ipv4: [10.0.0.1/24] }\nneighbors:\n  - { interface: \
             p0, ip: 10.0.0.2, mac: \"02:00:00:00:00:02\" }\n  - { interface: p0, ip: \
             10.0.0.3, mac: \"02:00:00:00:00:03\" }\nroutes:\n",
        );
        for (i, via) in routes {
            text += &format!(
                "  - {{ prefix: 172.{}.{}.0/24, via: {via} }}\n",
                i >> 8,
                i & 255
            );
        }
        crate::config::parse(&text, Path::new("/tmp/summary.yaml")).expect("parses")
    }

    #[test]
    fn the_summary_names_what_came_went_and_changed_by_key_at_scale() {
        // 20,000 routes each side: matched through maps (a search per item would take
        // seconds here and minutes at a few times this).
        let old: Vec<(u32, &str)> = (0..20_000).map(|i| (i, "10.0.0.2")).collect();
        let mut new: Vec<(u32, &str)> = (1..20_001).map(|i| (i, "10.0.0.2")).collect();
        new[4] = (5, "10.0.0.3");
        let s = summarize(&config(&old), &config(&new));
        assert_eq!(
            s,
            [
                "~ route 172.0.5.0/24 vrf default",
                "+ route 172.78.32.0/24 vrf default",
                "- route 172.0.0.0/24 vrf default",
            ]
        );
        // The same routes in another order and layout: nothing to say.
        let mut shuffled = old.clone();
        shuffled.reverse();
        assert!(summarize(&config(&old), &config(&shuffled)).is_empty());
    }
}
