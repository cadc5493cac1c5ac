//! DLSw in `show dlsw peers|circuits|reachability` and the metrics: per peer its state,
//! circuits and message counts; DLSw's LAN-side and circuit counters.

use api::views::{
    DlswCircuitView, DlswCircuitsView, DlswPeerView, DlswPeersView, DlswReachView,
    DlswReachabilityView, DlswTotals,
};

use crate::dlsw::engine::PeerState;
use crate::dlsw::service::fmt_station;
use crate::metrics::{Exposition, Kind};

fn mac(m: &[u8; 6]) -> String {
    format!(
        "{:02x}{:02x}.{:02x}{:02x}.{:02x}{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

impl super::Core {
    fn dlsw_handle(&self) -> Option<std::sync::Arc<crate::dlsw::Dlsw>> {
        self.dlsw.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// LLC frames the punt thread dropped for want of room in DLSw's inbox.
    fn dlsw_dropped(&self) -> u64 {
        self.punt
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |p| p.status().dlsw_dropped)
    }

    /// `show dlsw peers`.
    pub fn dlsw_peers(&self) -> DlswPeersView {
        let Some(d) = self.dlsw_handle() else {
            return DlswPeersView::default();
        };
        let now = d.now_ms();
        let e = d.engine();
        let st = e.stats;
        DlswPeersView {
            configured: true,
            local_peer: d.cfg.local_peer.to_string(),
            peers: e
                .peers
                .iter()
                .map(|p| DlswPeerView {
                    peer: p.addr.to_string(),
                    state: p.state.name().into(),
                    uptime_s: now.saturating_sub(p.since) / 1000,
                    circuits: p.circuits,
                    version: p.version.clone(),
                    pacing_window: p.window,
                    messages_in: p.stats.messages_in,
                    messages_out: p.stats.messages_out,
                    info_in: p.stats.info_in,
                    info_out: p.stats.info_out,
                    keepalives_in: p.stats.keepalives_in,
                    keepalives_out: p.stats.keepalives_out,
                    explorers_in: p.stats.explorers_in,
                    explorers_out: p.stats.explorers_out,
                    malformed: p.stats.malformed,
                    unknown_circuit: p.stats.unknown_circuit,
                    connects: p.stats.connects,
                    drops: p.stats.drops,
                })
                .collect(),
            totals: DlswTotals {
                lan_frames_in: st.lan_frames_in,
                lan_frames_out: st.lan_frames_out,
                lan_malformed: st.lan_malformed,
                lan_no_circuit: st.lan_no_circuit,
                lan_dropped: self.dlsw_dropped(),
                tests_answered: st.tests_answered,
                explorers_sent: st.explorers_sent,
                explorers_timed_out: st.explorers_timed_out,
                circuits: e.circuit_count() as u64,
                circuits_started: st.circuits_started,
                circuits_connected: st.circuits_connected,
                circuits_ended: st.circuits_ended,
                circuits_refused: st.circuits_refused,
                paced: st.paced,
            },
        }
    }

    /// `show dlsw circuits`.
    pub fn dlsw_circuits(&self) -> DlswCircuitsView {
        let Some(d) = self.dlsw_handle() else {
            return DlswCircuitsView::default();
        };
        let now = d.now_ms();
        let e = d.engine();
        let mut circuits: Vec<DlswCircuitView> = e
            .circuits()
            .map(|c| {
                let (mine, theirs) = if c.origin {
                    (c.ids.origin_dlc, c.ids.target_dlc)
                } else {
                    (c.ids.target_dlc, c.ids.origin_dlc)
                };
                DlswCircuitView {
                    local: fmt_station(&c.key.station, c.key.station_sap),
                    remote: fmt_station(&c.key.partner, c.key.partner_sap),
                    peer: e.peers[c.peer].addr.to_string(),
                    role: if c.origin { "origin" } else { "target" }.into(),
                    state: c.state.name().into(),
                    llc2: c.station.state.name().into(),
                    uptime_s: now.saturating_sub(c.since) / 1000,
                    from_station: c.from_station,
                    to_station: c.to_station,
                    retransmitted: c.station.stats.retransmitted,
                    local_dlc: mine,
                    remote_dlc: theirs,
                }
            })
            .collect();
        circuits.sort_by(|a, b| (&a.local, &a.remote).cmp(&(&b.local, &b.remote)));
        DlswCircuitsView {
            configured: true,
            circuits,
        }
    }

    /// `show dlsw reachability`.
    pub fn dlsw_reachability(&self) -> DlswReachabilityView {
        let Some(d) = self.dlsw_handle() else {
            return DlswReachabilityView::default();
        };
        let (remote, local) = d.engine().reachability();
        let s = self.lock("show dlsw");
        let mut entries: Vec<DlswReachView> = remote
            .into_iter()
            .map(|(m, peers)| DlswReachView {
                mac: mac(&m),
                kind: "remote".into(),
                via: peers.iter().map(|p| p.to_string()).collect(),
            })
            .collect();
        entries.extend(local.into_iter().map(|(m, port)| DlswReachView {
            mac: mac(&m),
            kind: "local".into(),
            via: vec![s.router.port_name(port).to_string()],
        }));
        DlswReachabilityView {
            configured: true,
            entries,
        }
    }

    pub(super) fn dlsw_metrics(&self, e: &mut Exposition) {
        let Some(d) = self.dlsw_handle() else {
            return;
        };
        let g = d.engine();
        e.family(
            "linerate_dlsw_peer_up",
            Kind::Gauge,
            "1 while the DLSw peer is connected (capabilities exchanged), else 0.",
        );
        for p in &g.peers {
            let up = (p.state == PeerState::Connected) as u8;
            e.sample(&[("peer", &p.addr.to_string())], up as f64);
        }
        e.family(
            "linerate_dlsw_peer_circuits",
            Kind::Gauge,
            "Circuits through the DLSw peer.",
        );
        for p in &g.peers {
            e.sample(&[("peer", &p.addr.to_string())], p.circuits as f64);
        }
        e.family(
            "linerate_dlsw_peer_messages_total",
            Kind::Counter,
            "SSP messages exchanged with the DLSw peer.",
        );
        for p in &g.peers {
            let a = p.addr.to_string();
            e.sample(
                &[("peer", &a), ("direction", "in")],
                p.stats.messages_in as f64,
            );
            e.sample(
                &[("peer", &a), ("direction", "out")],
                p.stats.messages_out as f64,
            );
        }
        e.family(
            "linerate_dlsw_peer_info_frames_total",
            Kind::Counter,
            "INFOFRAMEs (SNA data) exchanged with the DLSw peer.",
        );
        for p in &g.peers {
            let a = p.addr.to_string();
            e.sample(&[("peer", &a), ("direction", "in")], p.stats.info_in as f64);
            e.sample(
                &[("peer", &a), ("direction", "out")],
                p.stats.info_out as f64,
            );
        }
        let st = g.stats;
        e.family(
            "linerate_dlsw_lan_frames_total",
            Kind::Counter,
            "LLC frames DLSw received from and sent to its LAN side.",
        );
        e.sample(&[("direction", "in")], st.lan_frames_in as f64);
        e.sample(&[("direction", "out")], st.lan_frames_out as f64);
        e.family(
            "linerate_dlsw_lan_frames_dropped_total",
            Kind::Counter,
            "LAN-side LLC frames DLSw did not take, by reason.",
        );
        e.sample(&[("reason", "malformed")], st.lan_malformed as f64);
        e.sample(&[("reason", "no_circuit")], st.lan_no_circuit as f64);
        drop(g);
        e.sample(&[("reason", "behind")], self.dlsw_dropped() as f64);
        let g = d.engine();
        e.family("linerate_dlsw_circuits", Kind::Gauge, "DLSw circuits held.");
        e.sample(&[], g.circuit_count() as f64);
        e.family(
            "linerate_dlsw_circuit_events_total",
            Kind::Counter,
            "DLSw circuits started, connected, ended, and refused for want of room.",
        );
        for (ev, v) in [
            ("started", st.circuits_started),
            ("connected", st.circuits_connected),
            ("ended", st.circuits_ended),
            ("refused", st.circuits_refused),
        ] {
            e.sample(&[("event", ev)], v as f64);
        }
    }
}
