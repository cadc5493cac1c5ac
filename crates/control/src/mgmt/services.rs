//! The services as the management plane sees them: `show acl`, `show qos`, `show flows`, their
//! metrics, and single ACL entries added or removed without re-sending the list.

use std::sync::atomic::Ordering;

use api::views::{AclEntryView, AclView, FlowsView, PolicerView, QosClassView, QosView};

use super::{ApiError, ApiResult, Core};
use crate::config::entry;
use crate::config::services::AclEntryCfg;
use crate::metrics::{Exposition, Kind};
use crate::syslog::Severity;
use dataplane::feature::Direction;

impl Core {
    pub fn acls(&self, name: Option<&str>) -> ApiResult<Vec<AclView>> {
        let s = self.lock("show.acl");
        let cfg = &s.router.cfg;
        let st = &s.router.services;
        if let Some(n) = name {
            if !st.acls.contains_key(n) {
                return Err(ApiError::not_found(format!("no ACL named `{n}`")));
            }
        }
        let mut out = Vec::new();
        for a in &cfg.services.acls {
            if name.is_some_and(|n| n != a.name) {
                continue;
            }
            let (_, counters) = &st.acls[&a.name];
            let mut bound = Vec::new();
            let mut bytes = 0;
            for (i, ifc) in cfg.interfaces.iter().enumerate() {
                for (dir, lists) in [("in", &ifc.services.acl_in), ("out", &ifc.services.acl_out)] {
                    if lists.contains(&a.name) {
                        bound.push(format!("{} {dir}", ifc.name));
                        if let Some(f) = st.features.get(i).and_then(|f| f.as_ref()) {
                            let d = if dir == "in" {
                                Direction::Input
                            } else {
                                Direction::Output
                            };
                            bytes = bytes.max(f.acl(d).map_or(0, |b| b.classifier.bytes()));
                        }
                    }
                }
            }
            out.push(AclView {
                name: a.name.clone(),
                family: a.family.name().into(),
                entries: a
                    .entries
                    .iter()
                    .enumerate()
                    .map(|(i, e)| AclEntryView {
                        seq: e.seq,
                        text: e.text.clone(),
                        hits: counters.get(i),
                    })
                    .collect(),
                implicit_deny: counters.get(a.entries.len()),
                bound,
                compiled_bytes: bytes,
            });
        }
        Ok(out)
    }

    pub fn qos(&self) -> Vec<QosView> {
        let s = self.lock("show.qos");
        let cfg = &s.router.cfg;
        let mut out = Vec::new();
        for (i, f) in s.router.services.features.iter().enumerate() {
            let Some(f) = f else { continue };
            for (dir, q) in [
                ("in", f.qos(Direction::Input)),
                ("out", f.qos(Direction::Output)),
            ] {
                let Some(q) = q else { continue };
                out.push(QosView {
                    interface: cfg.interfaces[i].name.clone(),
                    direction: dir.into(),
                    policy: q.policy.clone(),
                    classes: q
                        .classes
                        .iter()
                        .map(|c| QosClassView {
                            class: c.name.clone(),
                            packets: c.packets.load(Ordering::Relaxed),
                            bytes: c.bytes.load(Ordering::Relaxed),
                            set_dscp: c.set_dscp,
                            set_cos: c.set_cos,
                            set_exp: c.set_exp,
                            policer: c.policer.as_ref().map(|p| {
                                let st = p.stats();
                                PolicerView {
                                    conformed_packets: st.conformed.packets,
                                    conformed_bytes: st.conformed.bytes,
                                    exceeded_packets: st.exceeded.packets,
                                    exceeded_bytes: st.exceeded.bytes,
                                    violated_packets: st.violated.packets,
                                    violated_bytes: st.violated.bytes,
                                    dropped_packets: st.dropped.packets,
                                }
                            }),
                        })
                        .collect(),
                });
            }
        }
        out
    }

    pub fn flows(&self) -> FlowsView {
        let s = self.lock("show.flows");
        let cfg = &s.router.cfg;
        let Some(fc) = &cfg.services.flow_export else {
            return FlowsView::default();
        };
        let mut v = FlowsView {
            enabled: true,
            version: match fc.version {
                crate::config::services::FlowVersion::V9 => "9".into(),
                crate::config::services::FlowVersion::Ipfix => "ipfix".into(),
            },
            collectors: fc.collectors.iter().map(|c| c.to_string()).collect(),
            export: s
                .router
                .services
                .export
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            ..Default::default()
        };
        if let Some(sh) = &s.router.services.flow {
            v.capacity = sh.cache.capacity as u64 * cfg.workers as u64;
            v.queue_dropped = sh.queue_dropped.load(Ordering::Relaxed);
            v.caches_built_by_workers = sh.built_by_workers.load(Ordering::Relaxed);
            for st in sh.stats.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                v.occupancy += st.occupancy;
                v.created += st.created;
                v.expired_idle += st.expired_idle;
                v.expired_active += st.expired_active;
                v.ended_tcp += st.ended_tcp;
                v.evicted += st.evicted;
                v.flushed += st.flushed;
            }
        }
        for ifc in &cfg.interfaces {
            let b = &ifc.services;
            match (b.flow_in, b.flow_out) {
                (true, true) => v.interfaces.push(format!("{} in+out", ifc.name)),
                (true, false) => v.interfaces.push(format!("{} in", ifc.name)),
                (false, true) => v.interfaces.push(format!("{} out", ifc.name)),
                _ => {}
            }
        }
        v
    }

    /// Adds (or replaces, by sequence number) one entry of ACL `name` and republishes the
    /// bindings that use it; the other lists keep their compiled form and counters.
    pub fn acl_entry_add(&self, name: &str, line: &str) -> ApiResult<u32> {
        let mut s = self.lock("acl.entry.add");
        let family = s
            .router
            .cfg
            .services
            .acls
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.family)
            .ok_or_else(|| ApiError::not_found(format!("no ACL named `{name}`")))?;
        let e = entry::parse(line, family, true).map_err(|x| {
            ApiError::invalid(format!("`{line}`: column {}: {}", x.col + 1, x.message))
        })?;
        let seq = {
            let a = acl_mut(&mut s.router.cfg, name);
            let seq = e
                .seq
                .unwrap_or_else(|| a.entries.last().map_or(10, |l| l.seq + 10));
            let new = AclEntryCfg {
                seq,
                permit: e.permit.unwrap_or(false),
                log: e.log,
                rule: e.rule,
                text: entry::text_without_seq(line),
                proto: e.proto,
            };
            set_entry(a, new.clone());
            s.acl_edits
                .entry(name.to_string())
                .or_default()
                .insert(seq, Some(new));
            seq
        };
        republish(&mut s)?;
        drop(s);
        self.log_acl_change(name, seq, &format!("set: {}", line.trim()));
        Ok(seq)
    }

    /// Removes entry `seq` of ACL `name`.
    pub fn acl_entry_remove(&self, name: &str, seq: u32) -> ApiResult<()> {
        let mut s = self.lock("acl.entry.remove");
        if !s.router.cfg.services.acls.iter().any(|a| a.name == name) {
            return Err(ApiError::not_found(format!("no ACL named `{name}`")));
        }
        {
            let a = acl_mut(&mut s.router.cfg, name);
            let i =
                a.entries.iter().position(|e| e.seq == seq).ok_or_else(|| {
                    ApiError::not_found(format!("ACL `{name}` has no entry {seq}"))
                })?;
            a.entries.remove(i);
            s.acl_edits
                .entry(name.to_string())
                .or_default()
                .insert(seq, None);
        }
        republish(&mut s)?;
        drop(s);
        self.log_acl_change(name, seq, "removed");
        Ok(())
    }

    fn log_acl_change(&self, name: &str, seq: u32, what: &str) {
        self.logger.log(
            Severity::Notice,
            "ACL_CHANGED",
            &[("acl", name.to_string()), ("seq", seq.to_string())],
            format!("access-list {name}: entry {seq} {what}"),
        );
    }

    /// The services' metric families.
    pub(super) fn services_metrics(&self, s: &super::State, m: &mut Exposition) {
        let cfg = &s.router.cfg;
        let st = &s.router.services;
        m.family(
            "linerate_acl_hits_total",
            Kind::Counter,
            "Packets that matched an ACL entry (entry=implicit-deny: none matched)",
        );
        for a in &cfg.services.acls {
            let (_, c) = &st.acls[&a.name];
            // Entries that never matched are left out: a 10,000-line list would be 10,000 series.
            for (i, e) in a.entries.iter().enumerate() {
                let h = c.get(i);
                if h > 0 {
                    m.sample(&[("acl", &a.name), ("entry", &e.seq.to_string())], h as f64);
                }
            }
            m.sample(
                &[("acl", &a.name), ("entry", "implicit-deny")],
                c.get(a.entries.len()) as f64,
            );
        }
        let mut classes = Vec::new();
        for (i, f) in st.features.iter().enumerate() {
            let Some(f) = f else { continue };
            for (dir, q) in [
                ("in", f.qos(Direction::Input)),
                ("out", f.qos(Direction::Output)),
            ] {
                if let Some(q) = q {
                    for c in q.classes.iter() {
                        classes.push((cfg.interfaces[i].name.as_str(), dir, q.policy.as_str(), c));
                    }
                }
            }
        }
        m.family(
            "linerate_qos_class_packets_total",
            Kind::Counter,
            "Packets classified into a QoS class, by interface, direction, policy and class.",
        );
        for (ifc, dir, pol, c) in &classes {
            let l = [
                ("interface", *ifc),
                ("direction", *dir),
                ("policy", *pol),
                ("class", c.name.as_str()),
            ];
            m.sample(&l, c.packets.load(Ordering::Relaxed) as f64);
        }
        m.family(
            "linerate_policer_bytes_total",
            Kind::Counter,
            "Bytes a policer coloured, by colour (conform, exceed, violate).",
        );
        for (ifc, dir, pol, c) in &classes {
            if let Some(p) = &c.policer {
                let st = p.stats();
                for (colour, n) in [
                    ("conform", st.conformed.bytes),
                    ("exceed", st.exceeded.bytes),
                    ("violate", st.violated.bytes),
                ] {
                    let l = [
                        ("interface", *ifc),
                        ("direction", *dir),
                        ("policy", *pol),
                        ("class", c.name.as_str()),
                        ("colour", colour),
                    ];
                    m.sample(&l, n as f64);
                }
            }
        }
        if let Some(sh) = &st.flow {
            let mut occ = 0;
            let mut created = 0;
            let mut evicted = 0;
            for x in sh.stats.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                occ += x.occupancy;
                created += x.created;
                evicted += x.evicted;
            }
            let ex = st.export.lock().unwrap_or_else(|e| e.into_inner()).clone();
            for (name, kind, help, v) in [
                (
                    "linerate_flow_cache_flows",
                    Kind::Gauge,
                    "Flows in the flow caches.",
                    occ,
                ),
                (
                    "linerate_flow_cache_capacity",
                    Kind::Gauge,
                    "Flows the flow caches can hold.",
                    sh.cache.capacity as u64 * cfg.workers as u64,
                ),
                (
                    "linerate_flow_created_total",
                    Kind::Counter,
                    "Flows created in the flow caches.",
                    created,
                ),
                (
                    "linerate_flow_evicted_total",
                    Kind::Counter,
                    "Flows exported early because their cache bucket was full.",
                    evicted,
                ),
                (
                    "linerate_flow_export_queue_dropped_total",
                    Kind::Counter,
                    "Flow records lost because the exporter fell behind.",
                    sh.queue_dropped.load(Ordering::Relaxed),
                ),
                (
                    "linerate_flow_export_records_total",
                    Kind::Counter,
                    "Flow records exported.",
                    ex.records,
                ),
                (
                    "linerate_flow_export_datagrams_total",
                    Kind::Counter,
                    "NetFlow/IPFIX datagrams sent.",
                    ex.datagrams,
                ),
                (
                    "linerate_flow_export_errors_total",
                    Kind::Counter,
                    "NetFlow/IPFIX datagrams that could not be sent.",
                    ex.send_errors,
                ),
            ] {
                m.family(name, kind, help);
                m.sample(&[], v as f64);
            }
        }
    }
}

fn set_entry(a: &mut crate::config::services::AclCfg, new: AclEntryCfg) {
    match a.entries.binary_search_by_key(&new.seq, |x| x.seq) {
        Ok(i) => a.entries[i] = new,
        Err(i) => a.entries.insert(i, new),
    }
}

/// Applies the API's ACL edits to a config about to be committed (lists it no longer has are
/// skipped: their edits wait in case the list comes back).
pub fn apply_acl_edits(
    cfg: &mut crate::config::Config,
    edits: &std::collections::BTreeMap<
        String,
        std::collections::BTreeMap<u32, Option<AclEntryCfg>>,
    >,
) {
    for (name, by_seq) in edits {
        let Some(a) = cfg.services.acls.iter_mut().find(|a| &a.name == name) else {
            continue;
        };
        for (seq, e) in by_seq {
            match e {
                Some(e) => set_entry(a, e.clone()),
                None => a.entries.retain(|x| x.seq != *seq),
            }
        }
    }
}

fn acl_mut<'c>(
    cfg: &'c mut crate::config::Config,
    name: &str,
) -> &'c mut crate::config::services::AclCfg {
    cfg.services
        .acls
        .iter_mut()
        .find(|a| a.name == name)
        .expect("checked by the caller")
}

/// Recompiles the services of the (edited) running config and publishes them.
fn republish(s: &mut super::State) -> ApiResult<()> {
    let new = crate::services::ServicesState::build(&s.router.cfg, Some(&s.router.services));
    s.router.services = new;
    s.router.activate();
    Ok(())
}
