//! Turns the services sections of a config into what the data plane runs (compiled ACL and QoS
//! classifiers, policers, flow accounting settings, the ACL log queue) and runs their control-plane
//! half: a thread that turns logged ACL matches into syslog records and expired flows into
//! NetFlow v9 / IPFIX datagrams.
//!
//! A commit rebuilds only what changed: a list whose entries are unchanged keeps its compiled
//! classifier and its hit counters, a policer whose settings are unchanged keeps its buckets and
//! counts, and the flow caches keep their flows while the flow settings stay the same.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use classify::{Classifier, Rule};
use dataplane::feature::acl_log::{AclLogEvent, AclLogSink};
use dataplane::feature::police::{Meter, PolicerConfig};
use dataplane::feature::watch::FlowWatch;
use dataplane::feature::{
    self, Acl, AclCounters, AclEntry, FlowShared, IfFeatures, Policer, Qos, QosClass, Step, Verdict,
};

use crate::config::entry::{proto_name, Family};
use crate::config::services::{
    AclCfg, FlowExportCfg, FlowVersion, PoliceAction, PoliceCfg, QosPolicyCfg, Urpf,
};
use crate::config::Config;
use crate::syslog::{Logger, Severity};

/// What the control-plane thread works from; republished with every commit.
#[derive(Default)]
pub struct ExportPlan {
    pub flow: Option<(Arc<FlowShared>, FlowExportCfg)>,
    pub acl_log: Option<Arc<AclLogSink>>,
    /// Interface names by index, for log records.
    pub if_names: Vec<String>,
}

/// The exporter's counters, for `show flows` and the metrics.
pub use api::views::ExportCounters;

/// A policy's config, its rules, their classifier and the class of each rule.
type CompiledPolicy = (QosPolicyCfg, Vec<Rule>, Arc<Classifier>, Arc<[u16]>);

/// A policer's owner: interface, ingress, policy, class.
type PolicerKey = (String, bool, String, String);

/// The compiled services of one config, and what a later commit may reuse.
pub struct ServicesState {
    pub features: Vec<Option<Arc<IfFeatures>>>,
    pub flow: Option<Arc<FlowShared>>,
    pub acl_log: Option<Arc<AclLogSink>>,
    /// Per configured ACL: its counters (with the entries they count, to tell a change).
    pub acls: HashMap<String, (AclCfg, Arc<AclCounters>)>,
    /// Compiled bindings, by the lists they join.
    bindings: HashMap<Vec<String>, Arc<Acl>>,
    /// Compiled policies, by name (with the config they came from).
    policies: HashMap<String, CompiledPolicy>,
    /// Policers by (interface, direction, policy, class) with their settings.
    policers: HashMap<PolicerKey, (PoliceCfg, Arc<Policer>)>,
    /// Bound policies by (interface, ingress): kept, with their class counters, while nothing
    /// they are made of changes.
    qos_bound: HashMap<(String, bool), Arc<Qos>>,
    flow_cfg: Option<FlowExportCfg>,
    pub plan: Arc<ArcSwap<ExportPlan>>,
    pub export: Arc<Mutex<ExportCounters>>,
    pub stop: Arc<AtomicBool>,
    /// The punt table's limits (control-plane protection), published with the tables; the
    /// same `Arc` while they do not change, so workers keep their buckets across commits.
    pub punt: Arc<dataplane::punt::PuntLimits>,
    /// The event manager's flow detectors' request to the workers (one per router, kept
    /// across commits, whatever the flow settings).
    pub watch: Arc<FlowWatch>,
}

impl ServicesState {
    /// Compiles what `cfg` binds, reusing from `prev` whatever did not change.
    pub fn build(cfg: &Config, prev: Option<&ServicesState>) -> ServicesState {
        let s = &cfg.services;
        let mut st = ServicesState {
            features: Vec::new(),
            flow: None,
            acl_log: None,
            acls: HashMap::new(),
            bindings: HashMap::new(),
            policies: HashMap::new(),
            policers: HashMap::new(),
            qos_bound: HashMap::new(),
            flow_cfg: s.flow_export.clone(),
            punt: match prev {
                Some(p) if *p.punt == cfg.control_plane.punt => p.punt.clone(),
                _ => Arc::new(cfg.control_plane.punt.clone()),
            },
            plan: prev.map_or_else(Default::default, |p| p.plan.clone()),
            export: prev.map_or_else(Default::default, |p| p.export.clone()),
            stop: prev.map_or_else(Default::default, |p| p.stop.clone()),
            watch: prev.map_or_else(Default::default, |p| p.watch.clone()),
        };
        for a in &s.acls {
            let counters = match prev.and_then(|p| p.acls.get(&a.name)) {
                Some((old, c)) if old.entries == a.entries && old.family == a.family => c.clone(),
                Some((old, c)) => Arc::new(carried_counters(a, old, c)),
                None => Arc::new(AclCounters::new(&a.name, a.entries.len())),
            };
            st.acls.insert(a.name.clone(), (a.clone(), counters));
        }
        let any_log = s.acls.iter().any(|a| a.entries.iter().any(|e| e.log));
        if any_log {
            let interval = s.acl_log_interval_s as u64 * 1_000_000_000;
            st.acl_log = match prev.and_then(|p| p.acl_log.clone()) {
                Some(old) if old.interval_ns == interval => Some(old),
                _ => Some(Arc::new(AclLogSink::new(interval))),
            };
        }
        if let Some(fc) = &s.flow_export {
            let reuse = prev
                .filter(|p| p.flow_cfg.as_ref().is_some_and(|o| same_cache(o, fc)))
                .and_then(|p| p.flow.clone());
            st.flow = Some(reuse.unwrap_or_else(|| {
                let workers = cfg.workers.max(1);
                Arc::new(
                    FlowShared::new(
                        flow::CacheConfig {
                            capacity: fc.cache_size.div_ceil(workers),
                            active_timeout_ns: fc.active_timeout_s as u64 * 1_000_000_000,
                            inactive_timeout_ns: fc.inactive_timeout_s as u64 * 1_000_000_000,
                        },
                        fc.sampling,
                        1 << 20,
                    )
                    .watching(st.watch.clone()),
                )
            }));
        }
        for p in &s.policies {
            let (rules, rule_class) = policy_rules(cfg, p);
            let compiled = match prev.and_then(|x| x.policies.get(&p.name)) {
                Some((old, old_rules, c, rc)) if old == p && *old_rules == rules => {
                    (c.clone(), rc.clone())
                }
                _ => (
                    Arc::new(Classifier::compile(&rules)),
                    Arc::from(rule_class.into_boxed_slice()),
                ),
            };
            st.policies
                .insert(p.name.clone(), (p.clone(), rules, compiled.0, compiled.1));
        }
        for ifc in &cfg.interfaces {
            let b = &ifc.services;
            if !b.any() {
                st.features.push(None);
                continue;
            }
            // Each arc's steps, in any order: the arc puts them in its own.
            let mut input = Vec::new();
            let mut output = Vec::new();
            if let Some(a) = st.binding(&b.acl_in, prev) {
                input.push(Step::Acl(a));
            }
            if let Some(a) = st.binding(&b.acl_out, prev) {
                output.push(Step::Acl(a));
            }
            if let Some(p) = &b.qos_in {
                input.push(Step::Qos(st.qos(&ifc.name, true, p, prev)));
            }
            if let Some(p) = &b.qos_out {
                output.push(Step::Qos(st.qos(&ifc.name, false, p, prev)));
            }
            if let Some(u) = b.urpf {
                input.push(Step::Urpf(match u {
                    Urpf::Strict => feature::Urpf::Strict,
                    Urpf::Loose => feature::Urpf::Loose,
                }));
            }
            if b.flow_in {
                input.push(Step::Flow);
            }
            if b.flow_out {
                output.push(Step::Flow);
            }
            // The config binds each feature once per direction and uRPF only on input, which
            // is all an arc refuses.
            let f = IfFeatures::new(input, output).expect("one binding per feature and direction");
            st.features.push(Some(Arc::new(f)));
        }
        st
    }

    /// Builds the flow caches the workers will take (gigabytes at full scale), so that going
    /// live is a pointer swap for them. Idempotent: caches already built or taken count.
    pub fn prepare(&self, workers: usize) {
        if let Some(f) = &self.flow {
            f.prepare(workers.max(1));
        }
    }

    /// The compiled binding of `lists` (one per family, or one `any` list).
    fn binding(&mut self, lists: &[String], prev: Option<&ServicesState>) -> Option<Arc<Acl>> {
        if lists.is_empty() {
            return None;
        }
        let key = lists.to_vec();
        if let Some(b) = self.bindings.get(&key) {
            return Some(b.clone());
        }
        let members: Vec<(AclCfg, Arc<AclCounters>)> =
            lists.iter().map(|l| self.acls[l].clone()).collect();
        // Reuse the old compiled binding when every list kept its counters (so: unchanged).
        if let Some(old) = prev.and_then(|p| p.bindings.get(&key)) {
            if old
                .lists
                .iter()
                .zip(&members)
                .all(|(o, m)| Arc::ptr_eq(o, &m.1))
            {
                self.bindings.insert(key, old.clone());
                return Some(old.clone());
            }
        }
        let acl = Arc::new(compile_acl(&members));
        self.bindings.insert(key, acl.clone());
        Some(acl)
    }

    fn qos(
        &mut self,
        ifname: &str,
        ingress: bool,
        policy: &str,
        prev: Option<&ServicesState>,
    ) -> Arc<Qos> {
        let (p, _, classifier, rule_class) = self.policies[policy].clone();
        let classes = p
            .classes
            .iter()
            .map(|c| {
                let policer = c.police.as_ref().map(|pc| {
                    let key = (
                        ifname.to_string(),
                        ingress,
                        policy.to_string(),
                        c.class.clone(),
                    );
                    let pol = match prev.and_then(|x| x.policers.get(&key)) {
                        Some((old, pol)) if old == pc => pol.clone(),
                        _ => Arc::new(Policer::new(policer_config(pc))),
                    };
                    self.policers.insert(key, (pc.clone(), pol.clone()));
                    pol
                });
                QosClass {
                    name: c.class.clone(),
                    set_dscp: c.set_dscp,
                    set_cos: c.set_cos,
                    set_exp: c.set_exp,
                    policer,
                    packets: Default::default(),
                    bytes: Default::default(),
                }
            })
            .collect::<Box<[_]>>();
        let default_class = p
            .classes
            .iter()
            .position(|c| c.class == "class-default")
            .map(|i| i as u16);
        let key = (ifname.to_string(), ingress);
        if let Some(old) = prev.and_then(|x| x.qos_bound.get(&key)) {
            let same = old.policy == policy
                && Arc::ptr_eq(&old.classifier, &classifier)
                && old.classes.len() == classes.len()
                && old.classes.iter().zip(classes.iter()).all(|(a, b)| {
                    a.name == b.name
                        && a.set_dscp == b.set_dscp
                        && a.set_cos == b.set_cos
                        && a.set_exp == b.set_exp
                        && match (&a.policer, &b.policer) {
                            (Some(x), Some(y)) => Arc::ptr_eq(x, y),
                            (None, None) => true,
                            _ => false,
                        }
                });
            if same {
                self.qos_bound.insert(key, old.clone());
                return old.clone();
            }
        }
        let q = Arc::new(Qos {
            policy: policy.to_string(),
            classifier,
            rule_class,
            classes,
            default_class,
        });
        self.qos_bound.insert(key, q.clone());
        q
    }

    /// Publishes what the control-plane thread works from.
    pub fn publish_plan(&self, cfg: &Config) {
        self.plan.store(Arc::new(ExportPlan {
            flow: self.flow.clone().zip(self.flow_cfg.clone()),
            acl_log: self.acl_log.clone(),
            if_names: cfg.interfaces.iter().map(|i| i.name.clone()).collect(),
        }));
    }
}

/// Counters for a changed list: an entry that is still there (same sequence number, match and
/// action) keeps its count, as a router's `show access-list` does when one entry is edited.
/// (Matches the workers count on the old list between this copy and the switch are not carried.)
fn carried_counters(new: &AclCfg, old: &AclCfg, c: &AclCounters) -> AclCounters {
    let n = AclCounters::new(&new.name, new.entries.len());
    for (i, e) in new.entries.iter().enumerate() {
        let same = old
            .entries
            .iter()
            .position(|o| o.seq == e.seq && o.rule == e.rule && o.permit == e.permit);
        if let Some(j) = same {
            n.hits[i].store(c.get(j), Ordering::Relaxed);
        }
    }
    if new.family == old.family {
        n.hits[new.entries.len()].store(c.get(old.entries.len()), Ordering::Relaxed);
    }
    n
}

/// Flow caches survive a commit unless their size or timeouts change.
fn same_cache(a: &FlowExportCfg, b: &FlowExportCfg) -> bool {
    a.cache_size == b.cache_size
        && a.active_timeout_s == b.active_timeout_s
        && a.inactive_timeout_s == b.inactive_timeout_s
        && a.sampling == b.sampling
}

/// One rule list for a binding: each list's entries, then its implicit deny (of its family
/// only, so an IPv4 list's end does not deny IPv6 packets the IPv6 list would permit).
pub fn compile_acl(members: &[(AclCfg, Arc<AclCounters>)]) -> Acl {
    let mut rules = Vec::new();
    let mut entries = Vec::new();
    for (li, (a, _)) in members.iter().enumerate() {
        for (ei, e) in a.entries.iter().enumerate() {
            rules.push(e.rule);
            entries.push(AclEntry {
                permit: e.permit,
                log: e.log,
                list: li as u16,
                index: ei as u32,
            });
        }
        rules.push(match a.family {
            Family::Ipv4 => Rule::any().ipv4(),
            Family::Ipv6 => Rule::any().ipv6(),
            Family::Any => Rule::any(),
        });
        entries.push(AclEntry {
            permit: false,
            log: false,
            list: li as u16,
            index: a.entries.len() as u32,
        });
    }
    Acl {
        classifier: Classifier::compile(&rules),
        entries: entries.into_boxed_slice(),
        lists: members.iter().map(|m| m.1.clone()).collect(),
        seqs: members
            .iter()
            .map(|(a, _)| a.entries.iter().map(|e| e.seq).collect())
            .collect(),
    }
}

/// A policy's classes as one rule list (class order, each class's lines in order) and the class
/// of each rule.
fn policy_rules(cfg: &Config, p: &QosPolicyCfg) -> (Vec<Rule>, Vec<u16>) {
    let mut rules = Vec::new();
    let mut class_of = Vec::new();
    for (ci, c) in p.classes.iter().enumerate() {
        if c.class == "class-default" {
            continue;
        }
        if let Some(k) = cfg.services.classes.iter().find(|k| k.name == c.class) {
            for r in &k.matches {
                rules.push(*r);
                class_of.push(ci as u16);
            }
        }
    }
    (rules, class_of)
}

fn verdict(a: PoliceAction) -> Verdict {
    match a {
        PoliceAction::Transmit => Verdict::Transmit,
        PoliceAction::SetDscp(d) => Verdict::SetDscpTransmit(d),
        PoliceAction::SetCos(c) => Verdict::SetPcpTransmit(c),
        PoliceAction::Drop => Verdict::Drop,
    }
}

pub fn policer_config(p: &PoliceCfg) -> PolicerConfig {
    PolicerConfig {
        meter: match p.pir {
            Some(pir) => Meter::TrTcm {
                cir_bps: p.cir,
                pir_bps: pir,
                cbs: p.cbs,
                pbs: p.pbs,
            },
            None => Meter::SrTcm {
                cir_bps: p.cir,
                cbs: p.cbs,
                ebs: p.pbs,
            },
        },
        color_aware: p.color_aware,
        conform: verdict(p.conform),
        exceed: verdict(p.exceed),
        violate: verdict(p.violate),
    }
}

/// The text of a logged ACL match, after the XR-5 record:
/// `access-list IPV4_Test (50000) deny udp 140.0.0.1(1024) -> 141.100.0.1(5000), 1 packet`.
pub fn acl_log_text(ev: &AclLogEvent, ifname: &str) -> String {
    let addr = |a: u128| -> String {
        if ev.v6 {
            Ipv6Addr::from(a).to_string()
        } else {
            Ipv4Addr::from(a as u32).to_string()
        }
    };
    let ports = matches!(ev.proto, 6 | 17 | 132);
    let end = |a: u128, p: u16| {
        if ports {
            format!("{}({p})", addr(a))
        } else {
            addr(a)
        }
    };
    format!(
        "access-list {} ({}) {} {} {} -> {} on {} {}, {} packet{}",
        ev.list.name,
        ev.seq,
        if ev.permit { "permit" } else { "deny" },
        proto_name(ev.proto),
        end(ev.src, ev.sport),
        end(ev.dst, ev.dport),
        ifname,
        if ev.ingress { "in" } else { "out" },
        ev.packets,
        if ev.packets == 1 { "" } else { "s" }
    )
}

/// Runs the control-plane half of the services until `stop`: every 100 ms, logged ACL matches
/// become syslog records and expired flows go to the collectors.
pub fn spawn_thread(
    plan: Arc<ArcSwap<ExportPlan>>,
    export: Arc<Mutex<ExportCounters>>,
    logger: Arc<Logger>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("services".into())
        .spawn(move || {
            let mut exporter: Option<(usize, flow::Exporter)> = None;
            let boot_unix_ns = {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos() as u64;
                now.saturating_sub(feature::clock_ns())
            };
            let mut buf: Vec<flow::FlowRecord> = Vec::new();
            let mut events: Vec<AclLogEvent> = Vec::new();
            let mut last_err = Instant::now() - Duration::from_secs(60);
            loop {
                let stopping = stop.load(Ordering::Relaxed);
                let p = plan.load();
                if let Some(sink) = &p.acl_log {
                    std::mem::swap(
                        &mut events,
                        &mut sink.queue.lock().unwrap_or_else(|e| e.into_inner()),
                    );
                    let logged = events.len() as u64;
                    for ev in events.drain(..) {
                        let ifname = p.if_names.get(ev.ifx as usize).map_or("?", |s| s.as_str());
                        let text = acl_log_text(&ev, ifname);
                        logger.log(
                            Severity::Informational,
                            "ACL_LOG",
                            &[
                                ("acl", ev.list.name.clone()),
                                ("seq", ev.seq.to_string()),
                                ("packets", ev.packets.to_string()),
                            ],
                            &text,
                        );
                    }
                    if logged > 0 {
                        export
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .acl_log_records += logged;
                    }
                }
                match &p.flow {
                    Some((shared, cfg)) => {
                        let id = Arc::as_ptr(shared) as usize;
                        if exporter.as_ref().is_none_or(|e| e.0 != id) {
                            exporter = match flow::Exporter::new(
                                export_config(cfg),
                                flow::Clock { boot_unix_ns },
                            ) {
                                Ok(x) => Some((id, x)),
                                Err(err) => {
                                    if last_err.elapsed() > Duration::from_secs(10) {
                                        last_err = Instant::now();
                                        logger.log(
                                            Severity::Error,
                                            "FLOW_EXPORT",
                                            &[],
                                            format!("cannot open the flow exporter: {err}"),
                                        );
                                    }
                                    None
                                }
                            };
                        }
                        std::mem::swap(
                            &mut buf,
                            &mut shared.queue.lock().unwrap_or_else(|e| e.into_inner()),
                        );
                        if let Some((_, x)) = exporter.as_mut() {
                            let now = feature::clock_ns();
                            let mut errors = 0;
                            for mut r in buf.drain(..) {
                                r.key.in_if = if_index(r.key.in_if);
                                r.out_if = if_index(r.out_if);
                                if x.push(&r, now).is_err() {
                                    errors += 1;
                                }
                            }
                            // The last round sends what is buffered, due or not.
                            let sent = if stopping { x.flush(now) } else { x.tick(now) };
                            if sent.is_err() {
                                errors += 1;
                            }
                            let st = x.stats();
                            let mut c = export.lock().unwrap_or_else(|e| e.into_inner());
                            c.datagrams = st.datagrams;
                            c.records = st.records;
                            c.templates = st.templates;
                            c.send_errors = st.send_errors + errors;
                        } else {
                            buf.clear();
                        }
                    }
                    None => exporter = None,
                }
                if stopping {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
        .expect("spawn the services thread")
}

/// SNMP-style interface numbers (1-based; 0 is "none"), as collectors expect.
fn if_index(i: u32) -> u32 {
    if i == dataplane::NO_IF {
        0
    } else {
        i + 1
    }
}

fn export_config(c: &FlowExportCfg) -> flow::ExportConfig {
    flow::ExportConfig {
        collectors: c.collectors.clone(),
        version: match c.version {
            FlowVersion::V9 => flow::Version::V9,
            FlowVersion::Ipfix => flow::Version::Ipfix,
        },
        domain_id: c.domain_id,
        template_refresh: Duration::from_secs(c.template_refresh_s as u64),
        template_refresh_packets: 20,
        sampling: (c.sampling > 1).then_some(c.sampling),
        exporter_addr: None::<IpAddr>,
        mtu: 1400,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane::feature::Direction;

    fn cfg(extra_route: &str, deny_port: u16) -> Config {
        let text = format!(
            r#"
ports: [{{ name: p0, driver: mem }}]
interfaces:
  - {{ name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24], acl-in: A, qos-in: q, flow: in }}
routes: [{{ prefix: {extra_route}, blackhole: true }}]
acls: [{{ name: A, entries: ["deny udp dport {deny_port}", "permit"] }}]
qos:
  classes: [{{ name: c, match: ["udp"] }}]
  policies: [{{ name: q, classes: [{{ class: c, police: {{ cir: 1m }} }}] }}]
flow-export: {{ collectors: ["127.0.0.1:9"] }}
"#
        );
        crate::config::parse(&text, std::path::Path::new("/tmp/s.yaml")).unwrap()
    }

    #[test]
    fn flow_caches_are_built_when_the_router_goes_live_not_when_it_is_checked() {
        let mut r = crate::Router::build(cfg("10.0.0.0/8", 53)).unwrap();
        let flow = r.services.flow.clone().expect("flow accounting on");
        assert!(
            flow.spares.lock().unwrap().is_empty(),
            "`check` builds none"
        );
        r.activate();
        assert_eq!(flow.spares.lock().unwrap().len(), r.cfg.workers);
    }

    #[test]
    fn a_commit_that_leaves_the_services_alone_keeps_them_and_their_counters() {
        let a = ServicesState::build(&cfg("10.0.0.0/8", 53), None);
        let b = ServicesState::build(&cfg("10.9.0.0/16", 53), Some(&a));
        let (fa, fb) = (
            a.features[0].clone().unwrap(),
            b.features[0].clone().unwrap(),
        );
        assert!(Arc::ptr_eq(
            fa.acl(Direction::Input).unwrap(),
            fb.acl(Direction::Input).unwrap()
        ));
        assert!(Arc::ptr_eq(
            fa.qos(Direction::Input).unwrap(),
            fb.qos(Direction::Input).unwrap()
        ));
        assert!(Arc::ptr_eq(
            a.flow.as_ref().unwrap(),
            b.flow.as_ref().unwrap()
        ));
        // A changed list is compiled anew with fresh counters; the policy is kept.
        let c = ServicesState::build(&cfg("10.9.0.0/16", 54), Some(&b));
        let fc = c.features[0].clone().unwrap();
        assert!(!Arc::ptr_eq(
            fb.acl(Direction::Input).unwrap(),
            fc.acl(Direction::Input).unwrap()
        ));
        assert!(!Arc::ptr_eq(&b.acls["A"].1, &c.acls["A"].1));
        // ... but the entry that did not change keeps its count.
        b.acls["A"].1.hits[1].store(7, Ordering::Relaxed);
        let d = ServicesState::build(&cfg("10.9.0.0/16", 55), Some(&c));
        assert_eq!(d.acls["A"].1.get(1), 0, "c's counters, not b's");
        c.acls["A"].1.hits[1].store(9, Ordering::Relaxed);
        c.acls["A"].1.hits[0].store(4, Ordering::Relaxed);
        let e = ServicesState::build(&cfg("10.9.0.0/16", 56), Some(&c));
        assert_eq!((e.acls["A"].1.get(0), e.acls["A"].1.get(1)), (0, 9));
        assert!(Arc::ptr_eq(
            fb.qos(Direction::Input).unwrap(),
            fc.qos(Direction::Input).unwrap()
        ));
    }

    #[test]
    fn the_log_text_names_the_flow_as_the_xr5_record_does() {
        let ev = AclLogEvent {
            list: Arc::new(AclCounters::new("IPV4_Test", 1)),
            seq: 50000,
            permit: false,
            proto: 17,
            v6: false,
            src: 0x8c00_0001,
            dst: 0x8d64_0001,
            sport: 1024,
            dport: 5000,
            ifx: 0,
            ingress: true,
            packets: 1,
            first: true,
        };
        assert_eq!(
            acl_log_text(&ev, "a0"),
            "access-list IPV4_Test (50000) deny udp 140.0.0.1(1024) -> 141.100.0.1(5000) on a0 in, 1 packet"
        );
        let ev6 = AclLogEvent {
            v6: true,
            proto: 58,
            src: 1,
            dst: 2,
            packets: 7,
            ..ev
        };
        assert_eq!(
            acl_log_text(&ev6, "a0"),
            "access-list IPV4_Test (50000) deny icmpv6 ::1 -> ::2 on a0 in, 7 packets"
        );
    }
}
