//! LDP in the management plane: `show mpls ldp neighbor|discovery|binding` read from the
//! speaker's engine (sessions, hello adjacencies, pseudowire mappings both ways), and its
//! sessions and pseudowires as metrics.

use api::views::{
    LdpAdjacency, LdpBindingView, LdpDiscoveryView, LdpNeighbor, LdpNeighborView, LdpPrefixBinding,
    LdpPwBinding,
};

use crate::ldp::engine::{Discovery, State};
use crate::metrics::{Exposition, Kind};

impl super::Core {
    fn with_ldp<T: Default>(&self, f: impl FnOnce(&crate::ldp::Ldp) -> T) -> T {
        match self.ldp.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some(l) => f(l),
            None => T::default(),
        }
    }

    /// `show mpls ldp neighbor`.
    pub fn ldp_neighbors(&self) -> LdpNeighborView {
        self.with_ldp(|l| {
            let now = l.now_ms();
            let e = l.engine();
            LdpNeighborView {
                running: true,
                router_id: e.cfg.lsr_id.to_string(),
                transport: e.cfg.transport.to_string(),
                neighbors: e
                    .sessions
                    .iter()
                    .map(|(peer, s)| LdpNeighbor {
                        peer: peer.to_string(),
                        transport: s.transport.to_string(),
                        state: s.state.name().into(),
                        role: if s.active { "active" } else { "passive" }.into(),
                        uptime_s: now.saturating_sub(s.since_ms) / 1000,
                        keepalive_s: s.keepalive,
                        addresses: s.addresses.iter().map(|a| a.to_string()).collect(),
                        pdus_in: s.pdus_in,
                        pdus_out: s.pdus_out,
                    })
                    .collect(),
                hellos_in: e.stats.hellos_in,
                hellos_out: e.stats.hellos_out,
                hellos_ignored: e.stats.hellos_ignored,
                malformed: e.stats.malformed,
                notifications_in: e.stats.notifications_in,
                notifications_out: e.stats.notifications_out,
            }
        })
    }

    /// `show mpls ldp discovery`.
    pub fn ldp_discovery(&self) -> LdpDiscoveryView {
        self.with_ldp(|l| {
            let now = l.now_ms();
            let e = l.engine();
            let mut targets: Vec<String> = e
                .cfg
                .neighbors
                .iter()
                .chain(e.cfg.pws.iter().map(|p| &p.peer))
                .map(|a| a.to_string())
                .collect();
            targets.sort();
            targets.dedup();
            LdpDiscoveryView {
                running: true,
                targets,
                adjacencies: e
                    .adjacencies
                    .iter()
                    .map(|((peer, how), a)| LdpAdjacency {
                        peer: peer.to_string(),
                        kind: match how {
                            Discovery::Targeted => "targeted".into(),
                            Discovery::Link(i) => e
                                .cfg
                                .links
                                .get(usize::from(*i))
                                .map_or("link".into(), |l| format!("link {}", l.name)),
                        },
                        source: a.source.to_string(),
                        transport: a.transport.to_string(),
                        hold_s: a.hold,
                        expires_in_ms: a.expires_ms.saturating_sub(now),
                    })
                    .collect(),
            }
        })
    }

    /// `show mpls ldp binding`.
    pub fn ldp_bindings(&self) -> LdpBindingView {
        self.with_ldp(|l| {
            let e = l.engine();
            LdpBindingView {
                running: true,
                pseudowires: e
                    .cfg
                    .pws
                    .iter()
                    .zip(&e.pws)
                    .enumerate()
                    .map(|(i, (p, st))| LdpPwBinding {
                        name: p.name.clone(),
                        peer: p.peer.to_string(),
                        pw_id: p.pw_id,
                        pw_type: p.pw_type,
                        local_label: p.local_label,
                        remote_label: st.remote.map(|r| r.label),
                        local_control_word: st.control_word,
                        remote_control_word: st.remote.map(|r| r.control_word),
                        local_mtu: p.mtu,
                        remote_mtu: st.remote.and_then(|r| r.mtu),
                        local_status: e.local_status(i),
                        remote_status: st.remote.map(|r| r.status),
                        state: if st.up { "up" } else { "down" }.into(),
                        reason: st.why.clone(),
                    })
                    .collect(),
                prefixes: prefix_bindings(&e),
                unmatched: e.unmatched.len() as u64,
                labels_exhausted: e.stats.labels_exhausted,
            }
        })
    }

    pub(super) fn ldp_metrics(&self, e: &mut Exposition) {
        let Some(l) = self.ldp.lock().unwrap_or_else(|x| x.into_inner()).clone() else {
            return;
        };
        let eng = l.engine();
        e.family(
            "linerate_ldp_session_up",
            Kind::Gauge,
            "1 while the LDP session with a peer is operational.",
        );
        for (peer, s) in &eng.sessions {
            let up = s.state == State::Operational;
            e.sample(&[("peer", &peer.to_string())], f64::from(u8::from(up)));
        }
        e.family(
            "linerate_ldp_pseudowires",
            Kind::Gauge,
            "Pseudowires LDP signals, by state.",
        );
        let up = eng.pws.iter().filter(|p| p.up).count();
        e.sample(&[("state", "up")], up as f64);
        e.sample(&[("state", "down")], (eng.pws.len() - up) as f64);
        e.family(
            "linerate_ldp_malformed_total",
            Kind::Counter,
            "LDP hellos and PDUs that did not parse (each answered as RFC 5036 says).",
        );
        e.sample(&[], eng.stats.malformed as f64);
    }
}

/// Every prefix's labels, by prefix: this router's (implicit null where it is the egress, else
/// the label it advertised), then each peer's, marked in use where the peer is the route's
/// next hop.
fn prefix_bindings(e: &crate::ldp::engine::Engine) -> Vec<LdpPrefixBinding> {
    use std::net::IpAddr;
    let mut used = std::collections::HashSet::new();
    for b in e.fec_bindings() {
        for (_, l) in &b.out {
            if let Some(l) = l {
                used.insert((IpAddr::V4(b.prefix), b.len, *l));
            }
        }
    }
    let mut out: Vec<(IpAddr, u8, LdpPrefixBinding)> = e
        .cfg
        .egress
        .iter()
        .map(|&(a, l)| (a, l, dataplane::mpls::IMPLICIT_NULL))
        .chain(
            e.fecs
                .iter()
                .filter_map(|(&(a, l), st)| st.local.map(|x| (a, l, x))),
        )
        .map(|(a, l, label)| {
            (
                IpAddr::V4(a),
                l,
                LdpPrefixBinding {
                    prefix: format!("{a}/{l}"),
                    from: "local".into(),
                    label,
                    in_use: true,
                },
            )
        })
        .collect();
    out.extend(e.prefix_bindings.iter().map(|(&(peer, a, l), &label)| {
        (
            a,
            l,
            LdpPrefixBinding {
                prefix: format!("{a}/{l}"),
                from: peer.to_string(),
                label,
                in_use: used.contains(&(a, l, label)),
            },
        )
    }));
    // By prefix, this router's first (a stable sort keeps it ahead of the peers').
    out.sort_by_key(|x| (x.0, x.1));
    out.into_iter().map(|x| x.2).collect()
}
