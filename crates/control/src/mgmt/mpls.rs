//! MPLS in the management plane: `show mpls forwarding-table` and `show l2vpn` from the label
//! table and pseudowires the workers read (their counters summed over the workers), and the
//! same counters as metrics.

use api::views::{L2vpnView, MplsLabelView, MplsView, PseudowireView};
use dataplane::mpls::{LabelAction, TtlMode};

use crate::metrics::{Exposition, Kind};
use crate::syslog::Severity;

impl super::Core {
    /// `show mpls forwarding-table`.
    pub fn mpls_view(&self) -> MplsView {
        let s = self.lock("show mpls");
        let r = &s.router;
        let (Some(cfg), Some(m)) = (&r.cfg.mpls, &r.mpls) else {
            return MplsView::default();
        };
        let nhs = r.next_hop_descriptions();
        let via = |nh: u32| nhs.get(nh as usize).map_or_else(Vec::new, |d| d.1.clone());
        // The labels a next hop pushes (each labelled member's, for a group).
        let on_nh = |nh: u32| -> Vec<String> {
            let one = |id: &u32| match r.next_hops.get(*id as usize) {
                Some(dataplane::tables::NextHop::Labelled { labels, .. }) => {
                    Some(labels.to_string())
                }
                _ => None,
            };
            match r.next_hops.get(nh as usize) {
                Some(dataplane::tables::NextHop::Ecmp(m)) => m.iter().filter_map(one).collect(),
                _ => one(&nh).into_iter().collect(),
            }
        };
        let labels = m
            .labels
            .entries()
            .into_iter()
            .map(|(label, a, packets, bytes)| {
                let (action, out, to) = match a {
                    // LDP's swaps: the peer's label is on the next hop (one per ECMP member).
                    LabelAction::Forward { nh, push }
                        if push.is_empty() && !on_nh(nh).is_empty() =>
                    {
                        ("swap", on_nh(nh).join(" | "), via(nh))
                    }
                    LabelAction::Forward { nh, push } if push.is_empty() => {
                        ("pop", String::new(), via(nh))
                    }
                    LabelAction::Forward { nh, push } => ("swap", push.to_string(), via(nh)),
                    LabelAction::Lookup { ifx } => {
                        let vrf = r
                            .ifs
                            .get(ifx as usize)
                            .and_then(|i| r.fibs.get(i.vrf as usize))
                            .map_or("?".into(), |f| f.name.clone());
                        ("lookup", String::new(), vec![format!("vrf {vrf}")])
                    }
                    LabelAction::Pseudowire { pw } => {
                        let name = m.pws.get(pw as usize).map_or("?", |p| p.name.as_str());
                        (
                            "pseudowire",
                            String::new(),
                            vec![format!("pseudowire {name}")],
                        )
                    }
                };
                MplsLabelView {
                    label,
                    action: action.into(),
                    out,
                    to,
                    packets,
                    bytes,
                }
            })
            .collect();
        MplsView {
            interfaces: cfg.interfaces.iter().map(|(n, _)| n.clone()).collect(),
            ttl: match m.ttl {
                TtlMode::Uniform => "uniform",
                TtlMode::Pipe => "pipe",
            }
            .into(),
            labels,
            table_bytes: m.labels.bytes() as u64,
        }
    }

    /// What LDP signalled: the router takes it, and republishes the pseudowires when it
    /// changes what they do.
    pub fn ldp_signalled(&self, signalled: crate::ldp::service::Signalled) {
        let map = signalled
            .into_iter()
            .map(|(name, remote_label, control_word, up)| {
                (
                    name,
                    crate::router::SignalledPw {
                        remote_label,
                        control_word,
                        up,
                    },
                )
            })
            .collect();
        self.apply_ldp("signalled pseudowires", |r| r.set_signalled(map));
    }

    /// LDP's prefix FEC bindings changed: the label table and the labelled routes follow.
    pub fn ldp_fec_bindings(&self, b: Vec<crate::ldp::engine::fec::FecBinding>) {
        self.apply_ldp("LDP's labels", |r| r.set_ldp(b));
    }

    /// Hands what LDP worked out to the router (`apply` says whether the tables changed), and
    /// publishes them if they did; a failure is logged, naming `what`.
    fn apply_ldp(
        &self,
        what: &str,
        apply: impl FnOnce(&mut crate::Router) -> Result<bool, crate::router::BuildError>,
    ) {
        let mut s = self.lock("ldp");
        let r = apply(&mut s.router).and_then(
            |changed| {
                if changed {
                    s.router.publish()
                } else {
                    Ok(())
                }
            },
        );
        if let Err(e) = r {
            self.logger.log(
                Severity::Error,
                "LDP",
                &[],
                format!("publishing {what}: {e}"),
            );
        }
    }

    /// The routes LDP makes FECs of, if any changed since change count `since` (with the
    /// count now); first, the routes whose source replaced LDP's labelled version are labelled
    /// again (asked every second).
    pub fn ldp_routes(&self, since: u64) -> Option<(u64, Vec<crate::ldp::engine::fec::FecRoute>)> {
        let mut s = self.lock("ldp.routes");
        if s.router.ldp_sync() {
            // New labelled next hops go out with the small tables, before the routes.
            if let Err(e) = s.router.publish() {
                self.logger.log(
                    Severity::Error,
                    "LDP",
                    &[],
                    format!("publishing LDP's labelled routes: {e}"),
                );
            }
        }
        // Read after LDP's own changes: they count, and the next ask sees none.
        let now = crate::router::route_changes();
        (now != since).then(|| (now, s.router.ldp_routes()))
    }

    /// Whether each signalled pseudowire's attachment circuit is up as the workers see it (configured
    /// up, its port in service and its link up), by pseudowire name.
    pub fn pw_circuits(&self) -> std::collections::HashMap<String, bool> {
        let s = self.lock("ldp.circuits");
        let r = &s.router;
        let Some(m) = &r.cfg.mpls else {
            return Default::default();
        };
        // Asked every 100 ms under the state lock, with thousands of pseudowires: one pass
        // over the interfaces, not one per pseudowire.
        let up: std::collections::HashMap<&str, bool> = r
            .ifs
            .iter()
            .map(|i| {
                let port = r.port_name(i.port);
                let up = i.up && !r.ports_down.contains(port) && !r.links_down.contains(port);
                (i.name.as_str(), up)
            })
            .collect();
        m.pseudowires
            .iter()
            .filter(|p| p.remote_label.is_none())
            .map(|p| {
                let ac = up.get(p.interface.as_str()).copied().unwrap_or(false);
                (p.name.clone(), ac)
            })
            .collect()
    }

    /// Logs each LSP that changed ways: `LSP_SWITCHOVER` onto its backup, `LSP_RESTORED` back
    /// to its primary, `LSP_DOWN` with neither.
    pub(super) fn log_lsp_changes(
        &self,
        before: &[(String, crate::router::LspState)],
        after: &[(String, crate::router::LspState)],
    ) {
        use crate::router::LspState;
        for ((name, was), (_, now)) in before.iter().zip(after) {
            if was == now {
                continue;
            }
            let (id, sev, what) = match now {
                LspState::Backup => (
                    "LSP_SWITCHOVER",
                    Severity::Warning,
                    "primary down, on its backup",
                ),
                LspState::Primary => ("LSP_RESTORED", Severity::Notice, "back on its primary"),
                LspState::Down => ("LSP_DOWN", Severity::Error, "no way up"),
            };
            self.logger.log(
                sev,
                id,
                &[("lsp", name.clone()), ("path", now.as_str().to_string())],
                format!("LSP {name}: {what}"),
            );
        }
    }

    /// `show l2vpn`.
    pub fn l2vpn_view(&self) -> L2vpnView {
        let why: std::collections::HashMap<String, String> = self
            .ldp
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|l| {
                let e = l.engine();
                e.cfg
                    .pws
                    .iter()
                    .zip(&e.pws)
                    .map(|(p, st)| (p.name.clone(), st.why.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let s = self.lock("show l2vpn");
        let r = &s.router;
        let (Some(cfg), Some(m)) = (&r.cfg.mpls, &r.mpls) else {
            return L2vpnView::default();
        };
        let nhs = r.next_hop_descriptions();
        let lsp_states: std::collections::HashMap<String, crate::router::LspState> =
            r.lsp_states().into_iter().collect();
        // A pseudowire over an LSP: the LSP, the way it takes now, that way's labels and hop.
        let over_lsp = |c: &crate::config::mpls::PseudowireCfg| {
            let name = c.lsp.as_ref()?;
            let l = cfg.lsps.iter().find(|l| &l.name == name)?;
            let state = lsp_states.get(name).copied()?;
            let way = match state {
                crate::router::LspState::Backup => l.backup.as_ref()?,
                _ => &l.primary,
            };
            let ifname = r
                .connected_if(0, way.via)
                .and_then(|i| r.ifs.get(i as usize))
                .map_or("?".to_string(), |i| i.name.clone());
            Some((
                name.clone(),
                state,
                way.labels.clone(),
                format!("{} on {ifname}", way.via),
            ))
        };
        // The pseudowires following the route to their peer, which has none.
        let unrouted: std::collections::HashSet<usize> = r
            .pw_routes
            .ways
            .iter()
            .filter(|(_, way)| way.is_none())
            .map(|&(i, _)| i)
            .collect();
        let pseudowires = m
            .pws
            .iter()
            .zip(&cfg.pseudowires)
            .enumerate()
            .map(|(i, (p, c))| {
                let n = m.read_pw(i as u32);
                let lsp = over_lsp(c);
                let up = p.up
                    && r.ifs.get(p.ac_if as usize).is_some_and(|x| x.up)
                    && lsp
                        .as_ref()
                        .is_none_or(|x| x.1 != crate::router::LspState::Down);
                PseudowireView {
                    name: p.name.clone(),
                    interface: c.interface.clone(),
                    vc_type: p.vc_type.code(),
                    peer: c.peer.to_string(),
                    vc_id: c.vc_id,
                    local_label: p.local_label,
                    remote_label: c.remote_label.or_else(|| {
                        r.signalled
                            .get(&c.name)
                            .map(|x| x.remote_label)
                            .filter(|&l| l != dataplane::mpls::IMPLICIT_NULL || up)
                    }),
                    signalling: if c.remote_label.is_some() {
                        "static"
                    } else {
                        "ldp"
                    }
                    .into(),
                    reason: match (up, why.get(&c.name)) {
                        (true, _) => String::new(),
                        (false, _) if unrouted.contains(&i) => "no route to the peer".into(),
                        (false, Some(w)) if !w.is_empty() => w.clone(),
                        (false, _) if c.remote_label.is_none() => "not signalled".into(),
                        (false, _)
                            if lsp
                                .as_ref()
                                .is_some_and(|x| x.1 == crate::router::LspState::Down) =>
                        {
                            "LSP down".into()
                        }
                        (false, _) => "attachment circuit down".into(),
                    },
                    // Without an LSP: what is pushed above the pseudowire's own label (the
                    // configured transport, or the route's to the peer).
                    transport: match &lsp {
                        Some(x) => dataplane::mpls::LabelStack::new(&x.2),
                        None => p
                            .push
                            .labels()
                            .split_last()
                            .and_then(|(_, t)| dataplane::mpls::LabelStack::new(t)),
                    }
                    .filter(|t| !t.is_empty())
                    .map_or(String::new(), |t| t.to_string()),
                    next_hop: match &lsp {
                        Some(x) => x.3.clone(),
                        None => nhs
                            .get(p.nh as usize)
                            .map_or(String::new(), |d| d.1.join(", ")),
                    },
                    lsp: lsp.as_ref().map_or(String::new(), |x| x.0.clone()),
                    lsp_path: lsp
                        .as_ref()
                        .map_or(String::new(), |x| x.1.as_str().to_string()),
                    control_word: p.control_word,
                    state: if up { "up" } else { "down" }.into(),
                    mtu: p.mtu,
                    tx_packets: n[0],
                    tx_bytes: n[1],
                    rx_packets: n[2],
                    rx_bytes: n[3],
                }
            })
            .collect();
        L2vpnView { pseudowires }
    }

    pub(super) fn mpls_metrics(&self, s: &super::State, e: &mut Exposition) {
        let Some(m) = &s.router.mpls else {
            return;
        };
        e.family(
            "linerate_mpls_label_packets_total",
            Kind::Counter,
            "Packets received with each incoming label (since the label table was last built).",
        );
        let entries = m.labels.entries();
        for (label, _, packets, _) in &entries {
            e.sample(&[("label", &label.to_string())], *packets as f64);
        }
        e.family(
            "linerate_mpls_label_bytes_total",
            Kind::Counter,
            "Bytes (from the label stack on) received with each incoming label.",
        );
        for (label, _, _, bytes) in &entries {
            e.sample(&[("label", &label.to_string())], *bytes as f64);
        }
        for (name, help, col) in [
            (
                "linerate_pseudowire_packets_total",
                "Frames each pseudowire carried: `to_pw` from its attachment circuit, `from_pw` out to it.",
                0usize,
            ),
            (
                "linerate_pseudowire_bytes_total",
                "Bytes of the frames each pseudowire carried, by direction.",
                1,
            ),
        ] {
            e.family(name, Kind::Counter, help);
            for (i, p) in m.pws.iter().enumerate() {
                let n = m.read_pw(i as u32);
                e.sample(
                    &[("pseudowire", &p.name), ("direction", "to_pw")],
                    n[col] as f64,
                );
                e.sample(
                    &[("pseudowire", &p.name), ("direction", "from_pw")],
                    n[2 + col] as f64,
                );
            }
        }
    }
}
