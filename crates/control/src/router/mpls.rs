//! The router's MPLS tables from the config's `mpls` section and labelled static routes: the
//! label table, the pseudowires, and one interface per VRF that a label pops into (packets
//! popped for a lookup arrive on it, in its VRF, as decapsulated GTP-U arrives on an APN's).

use std::net::IpAddr;
use std::sync::Arc;

use dataplane::mpls::{LabelAction, LabelStack, LabelTable, Mpls, Pseudowire, VcType};
use dataplane::tables::{Interface, NextHop};

use super::paths::PathDef;
use super::{BuildError, NhKey, Router};
use crate::config::mpls::LabelOp;
use crate::config::{Config, Origin};

/// The pseudowires without `via` or `lsp`, which take the route to their peer: by index into
/// `mpls.pseudowires`, the way each took when last built (None: no route to the peer), and the
/// route change count they were resolved at.
#[derive(Clone, Debug, Default)]
pub struct PwRoutes {
    pub ways: Vec<(usize, Option<(u32, LabelStack)>)>,
    pub seen: u64,
}

/// The name of the interface packets popped into VRF `vrf` arrive on.
pub fn lookup_interface(vrf: &str) -> String {
    format!("mpls-{vrf}")
}

/// The interfaces the label table pops packets into, one per VRF a label names.
pub(super) fn lookup_interfaces(cfg: &Config, vrf_idx: impl Fn(&str) -> u32) -> Vec<Interface> {
    let Some(m) = &cfg.mpls else {
        return Vec::new();
    };
    let mut vrfs: Vec<&str> = m
        .labels
        .iter()
        .filter_map(|l| match &l.op {
            LabelOp::Lookup { vrf } => Some(vrf.as_str()),
            LabelOp::Forward { .. } => None,
        })
        .collect();
    vrfs.sort_unstable();
    vrfs.dedup();
    vrfs.into_iter()
        .map(|v| Interface {
            mtu: 9216,
            ..super::tunnel_interface(lookup_interface(v), vrf_idx(v))
        })
        .collect()
}

/// Which way an LSP's traffic takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LspState {
    Primary,
    /// The primary's interface is down; the backup carries it.
    Backup,
    /// Neither way's interface is up.
    Down,
}

impl LspState {
    pub fn as_str(self) -> &'static str {
        match self {
            LspState::Primary => "primary",
            LspState::Backup => "backup",
            LspState::Down => "down",
        }
    }
}

/// What LDP signalled for a pseudowire: the peer's label, the control word both ends agreed
/// on, and whether the pseudowire is up as far as signalling goes (session up, mappings both
/// ways, parameters matched, the peer forwarding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignalledPw {
    pub remote_label: u32,
    pub control_word: bool,
    pub up: bool,
}

impl Router {
    fn at(&self, o: &Origin, m: impl std::fmt::Display) -> BuildError {
        BuildError(format!(
            "{}:{}:{}: {}: {m}",
            self.cfg.source.display(),
            o.line,
            o.col,
            o.field
        ))
    }

    fn ifx(&self, name: &str) -> Option<u32> {
        self.ifs
            .iter()
            .position(|i| i.name == name)
            .map(|i| i as u32)
    }

    /// The next hop of the default VRF's longest match for `a`.
    fn route_to(&self, a: IpAddr) -> Option<u32> {
        use fib::Key;
        let fib = self.fibs.first()?;
        match a {
            IpAddr::V4(a) => {
                let a = u32::from(a);
                (0..=32u8).rev().find_map(|l| fib.v4.get(a.masked(l), l))
            }
            IpAddr::V6(a) => {
                let a = u128::from(a);
                (0..=128u8).rev().find_map(|l| fib.v6.get(a.masked(l), l))
            }
        }
    }

    /// The next hop of an L3VPN route: its BGP next hop (the far PE) resolved in the default
    /// VRF, with the VPN label pushed under whatever labels the way to the PE takes (a labelled
    /// route's, none to a PE on a connected subnet). None where the PE is unreachable, is this
    /// router, or the stack would be deeper than the data plane pushes.
    pub fn vpn_next_hop(&mut self, pe: IpAddr, vpn_label: u32) -> Option<u32> {
        let id = self.route_to(pe)?;
        let vpn = LabelStack::new(&[vpn_label])?;
        self.vpn_member(id, pe, vpn)
    }

    /// The way to a pseudowire's peer by the default VRF's route to it: the neighbour's next
    /// hop and the transport labels (a labelled route's: LDP's label for the peer's /32; none
    /// to a peer on a connected subnet or behind an unlabelled route). Over ECMP the first
    /// member: a pseudowire's frames keep one way (nothing in them to spread by without a flow
    /// label). None where the peer is unreachable or is this router.
    fn way_to(&mut self, peer: IpAddr) -> Option<(u32, LabelStack)> {
        let mut id = self.route_to(peer)?;
        loop {
            match self.next_hops.get(id as usize)?.clone() {
                NextHop::Glean {
                    tx_if,
                    neighbor: None,
                } => return Some((self.nh_via(tx_if, Some(peer)), LabelStack::default())),
                NextHop::Forward { .. } | NextHop::Glean { .. } => {
                    return Some((id, LabelStack::default()))
                }
                NextHop::Labelled { via, labels } => return Some((via, labels)),
                NextHop::Ecmp(members) => id = *members.first()?,
                _ => return None,
            }
        }
    }

    /// Builds the pseudowires again where the route to a route-following one's peer changed
    /// (a route added, replaced, labelled by LDP or withdrawn): cheap when no route changed
    /// since the last look, one lookup per such pseudowire when one did.
    pub(super) fn follow_pw_routes(&mut self) -> Result<(), BuildError> {
        let now = super::route_changes();
        if self.pw_routes.ways.is_empty() || self.pw_routes.seen == now {
            return Ok(());
        }
        self.pw_routes.seen = now;
        let Some(m) = self.cfg.mpls.clone() else {
            return Ok(());
        };
        // Many pseudowires share a peer (ME-3: 384 each): one lookup per peer.
        let mut now_by_peer = std::collections::HashMap::new();
        let mut moved = false;
        for (i, was) in self.pw_routes.ways.clone() {
            let peer = m.pseudowires[i].peer;
            let way = *now_by_peer.entry(peer).or_insert_with(|| self.way_to(peer));
            if way != was {
                moved = true;
                break;
            }
        }
        if moved {
            self.build_mpls()?;
        }
        Ok(())
    }

    fn vpn_member(&mut self, id: u32, pe: IpAddr, vpn: LabelStack) -> Option<u32> {
        match self.next_hops.get(id as usize)?.clone() {
            // The PE is on a connected subnet: it is the neighbour.
            NextHop::Glean {
                tx_if,
                neighbor: None,
            } => {
                let nh = self.nh_via(tx_if, Some(pe));
                Some(self.labelled(nh, vpn))
            }
            NextHop::Forward { .. } | NextHop::Glean { .. } => Some(self.labelled(id, vpn)),
            NextHop::Labelled { via, labels } => {
                let stack = labels.then(&vpn)?;
                Some(self.labelled(via, stack))
            }
            NextHop::Ecmp(members) => {
                let members = members
                    .iter()
                    .map(|&m| self.vpn_member(m, pe, vpn))
                    .collect::<Option<Vec<u32>>>()?;
                Some(self.nh_ecmp(members))
            }
            _ => None,
        }
    }

    /// Next hop `nh` with `labels` pushed: an ECMP group becomes a group of labelled members.
    pub(super) fn labelled(&mut self, nh: u32, labels: LabelStack) -> u32 {
        if labels.is_empty() {
            return nh;
        }
        if let NextHop::Ecmp(members) = &self.next_hops[nh as usize] {
            let members = members.to_vec();
            let labelled = members
                .into_iter()
                .map(|m| self.labelled(m, labels))
                .collect();
            return self.nh_ecmp(labelled);
        }
        self.nh(NhKey::Labelled(nh, labels), |_| NextHop::Labelled {
            via: nh,
            labels,
        })
    }

    /// The next hop to neighbours `via` (on connected subnets of the default VRF: checked).
    fn via(&mut self, via: &[IpAddr], o: &Origin) -> Result<u32, BuildError> {
        let mut members = Vec::with_capacity(via.len());
        for &a in via {
            let ifx = self
                .connected_if(0, a)
                .ok_or_else(|| self.at(o, format!("next hop {a} is on no connected subnet")))?;
            members.push(self.nh_via(ifx, Some(a)));
        }
        Ok(self.nh_ecmp(members))
    }

    /// One path object per LSP: its primary way as the member, its backup as the path's backup
    /// (the tables fall back to it while the primary's interface is down, every pseudowire on
    /// the LSP at once: no pseudowire is touched). Kept across rebuilds of the pseudowires.
    fn build_lsps(
        &mut self,
        lsps: &[crate::config::mpls::LspCfg],
    ) -> Result<std::collections::HashMap<String, u32>, BuildError> {
        let mut out = std::collections::HashMap::new();
        for l in lsps {
            let way = |r: &mut Self, w: &crate::config::mpls::LspPath| {
                let nh = r.via(&[w.via], &l.origin)?;
                let labels = LabelStack::new(&w.labels)
                    .ok_or_else(|| r.at(&l.origin, "too many labels to push"))?;
                Ok::<u32, BuildError>(r.labelled(nh, labels))
            };
            let primary = way(self, &l.primary)?;
            let backup = match &l.backup {
                Some(b) => vec![way(self, b)?],
                None => Vec::new(),
            };
            let def = PathDef::Members {
                primary: Box::new([primary]),
                backup: backup.into_boxed_slice(),
            };
            let id = match self.lsp_paths.get(&l.name) {
                Some(&id) => {
                    self.path_set(id, def);
                    id
                }
                None => self.path_new(def),
            };
            out.insert(l.name.clone(), id);
        }
        for (name, id) in std::mem::take(&mut self.lsp_paths) {
            if !out.contains_key(&name) {
                self.path_free(id);
            }
        }
        self.lsp_paths = out.clone();
        Ok(out)
    }

    /// Which way each LSP takes now, by name: the primary while its interface is up, else the
    /// backup while its own is, else none.
    pub fn lsp_states(&self) -> Vec<(String, LspState)> {
        let Some(m) = &self.cfg.mpls else {
            return Vec::new();
        };
        let up = |a: IpAddr| {
            self.connected_if(0, a).is_some_and(|i| {
                let ifc = &self.ifs[i as usize];
                let port = self.port_name(ifc.port);
                ifc.up && !self.ports_down.contains(port) && !self.links_down.contains(port)
            })
        };
        m.lsps
            .iter()
            .map(|l| {
                let state = if up(l.primary.via) {
                    LspState::Primary
                } else if l.backup.as_ref().is_some_and(|b| up(b.via)) {
                    LspState::Backup
                } else {
                    LspState::Down
                };
                (l.name.clone(), state)
            })
            .collect()
    }

    /// Takes what LDP signalled; when it changes what any pseudowire does, the pseudowires
    /// are built again (the caller publishes). Returns whether they were.
    pub fn set_signalled(
        &mut self,
        s: std::collections::HashMap<String, SignalledPw>,
    ) -> Result<bool, BuildError> {
        if s == self.signalled {
            return Ok(false);
        }
        self.signalled = s;
        self.build_mpls()?;
        Ok(true)
    }

    /// Builds the label table and pseudowires (`self.mpls`); the labelled static routes are
    /// installed by `install_static`.
    pub(super) fn build_mpls(&mut self) -> Result<(), BuildError> {
        let Some(m) = self.cfg.mpls.clone() else {
            return Ok(());
        };
        let mut entries = Vec::new();
        for l in &m.labels {
            let action = match &l.op {
                LabelOp::Forward { out, via } => {
                    let push = LabelStack::new(out)
                        .ok_or_else(|| self.at(&l.origin, "too many labels to push"))?;
                    LabelAction::Forward {
                        nh: self.via(via, &l.origin)?,
                        push,
                    }
                }
                LabelOp::Lookup { vrf } => LabelAction::Lookup {
                    ifx: self
                        .ifx(&lookup_interface(vrf))
                        .ok_or_else(|| self.at(&l.origin, format!("no VRF `{vrf}`")))?,
                },
            };
            entries.push((l.label, action));
        }
        entries.extend(self.ldp_label_entries());
        let lsps = self.build_lsps(&m.lsps)?;
        let mut pws = Vec::new();
        let mut ways = Vec::new();
        let mut by_peer = std::collections::HashMap::new();
        for (i, p) in m.pseudowires.iter().enumerate() {
            let ac = self
                .ifx(&p.interface)
                .ok_or_else(|| self.at(&p.origin, format!("no interface `{}`", p.interface)))?;
            let ifc = &self.ifs[ac as usize];
            let vc_type = p.vc_type.unwrap_or(if ifc.vlan.is_some() {
                VcType::Vlan
            } else {
                VcType::Ethernet
            });
            let (ac_port, ac_vlan, mtu, ac_up) = (ifc.port, ifc.vlan, ifc.mtu, ifc.up);
            // A signalled pseudowire takes the peer's label and word from LDP; until the
            // peer has sent them it is down (and pushes an implicit null no frame will see).
            let (remote, control_word, signalled_up) = match p.remote_label {
                Some(l) => (l, p.control_word, true),
                None => match self.signalled.get(&p.name) {
                    Some(s) => (s.remote_label, s.control_word, s.up),
                    None => (dataplane::mpls::IMPLICIT_NULL, p.control_word, false),
                },
            };
            // Over an LSP the transport labels are the path's (whichever way it takes); with
            // `via` they are the pseudowire's own; else the route's to the peer.
            let mut routed = true;
            let (nh, mut labels) = match (&p.lsp, p.via) {
                (Some(l), _) => (
                    lsps.get(l.as_str())
                        .copied()
                        .ok_or_else(|| self.at(&p.origin, format!("no LSP `{l}`")))?,
                    Vec::new(),
                ),
                (None, Some(via)) => (self.via(&[via], &p.origin)?, p.transport.clone()),
                (None, None) => {
                    let way = *by_peer.entry(p.peer).or_insert_with(|| self.way_to(p.peer));
                    ways.push((i, way));
                    match way {
                        Some((nh, t)) => (nh, t.labels().to_vec()),
                        None => {
                            routed = false;
                            (0, Vec::new())
                        }
                    }
                }
            };
            labels.push(remote);
            let push = match LabelStack::new(&labels) {
                Some(push) => push,
                // A route's labels with the pseudowire's own too deep to push: no way (the
                // config's own are checked to fit).
                None if p.lsp.is_none() && p.via.is_none() => {
                    routed = false;
                    LabelStack::new(&[remote]).unwrap_or_default()
                }
                None => return Err(self.at(&p.origin, "too many labels to push")),
            };
            entries.push((p.local_label, LabelAction::Pseudowire { pw: i as u32 }));
            pws.push(Pseudowire {
                name: p.name.clone(),
                ac_if: ac,
                ac_port,
                ac_vlan,
                vc_type,
                control_word,
                local_label: p.local_label,
                push,
                nh,
                mtu,
                // Static: up while its attachment circuit is; signalled: and while LDP says;
                // following a route: and while there is one to the peer.
                up: ac_up && signalled_up && routed,
            });
        }
        // A port that is a whole attachment circuit takes every frame, tagged or not.
        for pw in &pws {
            if pw.ac_vlan.is_none() {
                if let Some(pm) = self.ports.get_mut(pw.ac_port as usize) {
                    pm.tunnel = true;
                }
            }
        }
        self.pw_routes = PwRoutes {
            ways,
            seen: super::route_changes(),
        };
        let enabled: Vec<u32> = m
            .interfaces
            .iter()
            .filter_map(|(name, _)| self.ifx(name))
            .collect();
        let workers = self.cfg.workers;
        let mut mpls = Mpls::new(
            LabelTable::new(entries, workers),
            pws,
            self.ifs.len(),
            &enabled,
            m.ttl,
            workers,
        );
        // Rebuilt in place (LDP signalled, a route moved a pseudowire): the pseudowires keep
        // their counts. A commit's new router starts them again, as it does the labels'.
        if let Some(old) = &self.mpls {
            mpls = mpls.keep_counters(old);
        }
        self.mpls = Some(Arc::new(mpls));
        Ok(())
    }
}
