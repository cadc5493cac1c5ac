//! `dlsw`: the router as a DLSw+ peer (RFC 1795): SNA LLC2 links on its LAN side carried over
//! TCP to other DLSw routers.
//!
//! ```yaml
//! dlsw:
//!   local-peer: 10.9.0.1          # an IPv4 address of one of the router's interfaces
//!   remote-peers: [10.9.0.2, 10.9.0.3]
//!   bridge-domains: [lan]         # the LAN side: LLC frames of these domains' members
//!   load-balance: true            # new circuits go round the peers that reach a MAC
//!   keepalive-ms: 30000           # KEEPALIVE on an idle peer; 0: none
//!   dead-after: 3                 # keepalive periods without a message: the peer is down
//!   pacing-window: 20             # initial pacing window (RFC 1795 8)
//!   max-circuits: 16384
//!   explorer-ms: 5000             # how long a CANUREACH_ex or LAN TEST waits for an answer
//!   cache-ms: 960000              # reachability entries live this long unconfirmed
//!   llc2: { t1-ms: 1000, ti-ms: 30000, n2: 8, window: 7, ack-delay-ms: 100, ack-max: 3 }
//!   log-circuits: false           # a log record per circuit up and down (peers always)
//! ```
//!
//! SSP runs over the kernel's TCP on the TAP twins (`control-plane.taps`). The LAN side is a
//! bridge domain, as on the report's routers ("a bridge group was configured on the LAN
//! interface"): its members' LLC frames (802.3, any SAP but spanning tree's and IS-IS's) are
//! handed to DLSw instead of being switched. Members must be untagged interfaces.
//!
//! Besides each value's own syntax, `check` refuses a local peer that is no interface's
//! address, a remote peer twice or equal to the local one, a bridge domain that does not
//! exist or has a tagged member, more than 64 remote peers.

use std::net::Ipv4Addr;

use super::fields::{origin_at, Errs, Fields};
use super::Origin;
use crate::dlsw::station::Timers;

#[derive(Clone, Debug, PartialEq)]
pub struct DlswCfg {
    pub local_peer: Ipv4Addr,
    pub local_at: Origin,
    pub remote_peers: Vec<(Ipv4Addr, Origin)>,
    pub bridge_domains: Vec<(String, Origin)>,
    pub load_balance: bool,
    pub keepalive_ms: u64,
    pub dead_after: u32,
    pub pacing_window: u16,
    pub max_circuits: usize,
    pub explorer_ms: u64,
    pub cache_ms: u64,
    pub llc2: Timers,
    /// A log record per circuit up and down: off by default, as ten thousand circuits coming
    /// up would push everything else out of the log.
    pub log_circuits: bool,
    pub origin: Origin,
}

impl DlswCfg {
    /// The settings alone, without where they were written (to compare two configs).
    pub fn without_origins(&self) -> DlswCfg {
        DlswCfg {
            local_at: Origin::default(),
            remote_peers: self
                .remote_peers
                .iter()
                .map(|(a, _)| (*a, Origin::default()))
                .collect(),
            bridge_domains: self
                .bridge_domains
                .iter()
                .map(|(b, _)| (b.clone(), Origin::default()))
                .collect(),
            origin: Origin::default(),
            ..self.clone()
        }
    }
}

/// Remote peers at most: the reachability cache holds a peer set as 64 bits.
pub const MAX_PEERS: usize = 64;

pub(super) fn parse(top: &mut Fields<'_>, e: &mut Errs) -> Option<DlswCfg> {
    let n = top.get("dlsw")?;
    let mut f = Fields::new("dlsw".into(), n, e)?;
    let origin = f.origin();
    let local_peer = f.parse::<Ipv4Addr>("local-peer", "an IPv4 address", e);
    let local_at = f
        .node("local-peer")
        .map_or_else(|| f.origin(), |a| origin_at(a, "dlsw.local-peer"));
    if f.node("local-peer").is_none() {
        e.at(
            n,
            "dlsw.local-peer",
            "`local-peer` is required (this router's DLSw address)",
        );
    }
    let mut remote_peers: Vec<(Ipv4Addr, Origin)> = Vec::new();
    for (s, pn, path) in f.list("remote-peers", e) {
        match s.parse::<Ipv4Addr>() {
            Ok(a) if remote_peers.iter().any(|(x, _)| *x == a) => {
                e.at(pn, &path, format!("{a}: this peer is listed twice"))
            }
            Ok(a) if Some(a) == local_peer => {
                e.at(pn, &path, format!("{a}: this is the local peer"))
            }
            Ok(a) => remote_peers.push((a, origin_at(pn, &path))),
            Err(_) => e.at(pn, &path, format!("`{s}` is not an IPv4 address")),
        }
    }
    if remote_peers.len() > MAX_PEERS {
        let at = f.node("remote-peers").unwrap_or(n);
        e.at(
            at,
            "dlsw.remote-peers",
            format!("at most {MAX_PEERS} remote peers"),
        );
    }
    let bridge_domains = f
        .list("bridge-domains", e)
        .into_iter()
        .map(|(s, bn, path)| (s, origin_at(bn, &path)))
        .collect::<Vec<_>>();
    if bridge_domains.is_empty() {
        e.at(
            n,
            "dlsw.bridge-domains",
            "`bridge-domains` is required: the LAN side DLSw serves",
        );
    }
    let load_balance = f
        .parse::<bool>("load-balance", "true or false", e)
        .unwrap_or(false);
    let keepalive_ms = f
        .parse::<u64>("keepalive-ms", "a time in ms", e)
        .unwrap_or(30_000);
    let dead_after = f.parse::<u32>("dead-after", "a count", e).unwrap_or(3);
    if dead_after == 0 {
        let at = f.node("dead-after").unwrap_or(n);
        e.at(
            at,
            "dlsw.dead-after",
            "0 would declare every peer down at once; at least 1",
        );
    }
    let pacing_window = f
        .parse::<u16>("pacing-window", "a window (frames)", e)
        .unwrap_or(20);
    if pacing_window == 0 {
        let at = f.node("pacing-window").unwrap_or(n);
        e.at(
            at,
            "dlsw.pacing-window",
            "0 would stop every circuit; at least 1",
        );
    }
    let max_circuits = f
        .parse::<usize>("max-circuits", "a count", e)
        .unwrap_or(16_384);
    if max_circuits > 1 << 20 {
        let at = f.node("max-circuits").unwrap_or(n);
        e.at(at, "dlsw.max-circuits", "at most 1,048,576");
    }
    let explorer_ms = f
        .parse::<u64>("explorer-ms", "a time in ms", e)
        .unwrap_or(5_000);
    let cache_ms = f
        .parse::<u64>("cache-ms", "a time in ms", e)
        .unwrap_or(960_000);
    let log_circuits = f
        .parse::<bool>("log-circuits", "true or false", e)
        .unwrap_or(false);
    let mut llc2 = Timers::default();
    if let Some(ln) = f.get("llc2") {
        if let Some(mut l) = Fields::new("dlsw.llc2".into(), ln, e) {
            llc2.t1_ms = l.parse("t1-ms", "a time in ms", e).unwrap_or(llc2.t1_ms);
            llc2.ti_ms = l.parse("ti-ms", "a time in ms", e).unwrap_or(llc2.ti_ms);
            llc2.n2 = l.parse("n2", "a count (1..255)", e).unwrap_or(llc2.n2);
            llc2.window = l
                .parse("window", "a window (1..127)", e)
                .unwrap_or(llc2.window);
            llc2.ack_delay_ms = l
                .parse("ack-delay-ms", "a time in ms", e)
                .unwrap_or(llc2.ack_delay_ms);
            llc2.ack_max = l.parse("ack-max", "a count", e).unwrap_or(llc2.ack_max);
            for (key, bad) in [
                ("window", llc2.window == 0 || llc2.window > 127),
                ("t1-ms", llc2.t1_ms == 0),
                ("ack-max", llc2.ack_max == 0),
                ("n2", llc2.n2 == 0),
            ] {
                if bad {
                    let at = l.node(key).unwrap_or(ln);
                    let why = if key == "window" {
                        "a window is 1..127 (modulo-128 numbering)"
                    } else {
                        "0 is not allowed"
                    };
                    e.at(at, &l.field(key), why);
                }
            }
            l.finish(e);
        }
    }
    f.finish(e);
    Some(DlswCfg {
        local_peer: local_peer?,
        local_at,
        remote_peers,
        bridge_domains,
        load_balance,
        keepalive_ms,
        dead_after,
        pacing_window,
        max_circuits,
        explorer_ms,
        cache_ms,
        llc2,
        log_circuits,
        origin,
    })
}

/// A DLSw router punts every LAN-side LLC frame (class `sna`, sized for DLSw already) and
/// every SSP segment: where the punt table still holds the default for `dlsw` (sized for a
/// router that sees a few), it is raised to what a DLSw peer carries (50,000 TCP segments/s
/// per worker). A limit the config gives is kept.
pub(super) fn raise_punt_limits(p: &mut dataplane::punt::PuntLimits) {
    use dataplane::punt::{Limit, PuntClass};
    for (c, rate) in [(PuntClass::Dlsw, 50_000)] {
        if p.limits[c as usize] == c.default_limit() {
            p.limits[c as usize] = Limit {
                rate,
                burst: rate / 10,
            };
        }
    }
}

/// The checks against the rest of the config: the local peer is an interface's address, the
/// bridge domains exist and their members are untagged.
pub(super) fn cross_check(cfg: &super::Config, e: &mut Errs) {
    let Some(d) = &cfg.dlsw else {
        return;
    };
    let a = u32::from(d.local_peer);
    if !cfg
        .interfaces
        .iter()
        .any(|i| i.ipv4.iter().any(|&(x, _)| x == a))
    {
        e.origin(
            &d.local_at,
            format!("{}: no interface has this address", d.local_peer),
        );
    }
    if !cfg.control_plane.taps {
        e.origin(
            &d.origin,
            "DLSw talks to its peers over the kernel's TCP: it needs `control-plane: { taps: true }`",
        );
    }
    for (name, at) in &d.bridge_domains {
        let Some(b) = cfg.bridges.iter().find(|b| &b.name == name) else {
            e.origin(at, format!("no bridge domain named `{name}`"));
            continue;
        };
        for m in &b.members {
            let tagged = cfg
                .interfaces
                .iter()
                .find(|i| i.name == m.interface)
                .is_some_and(|i| i.vlan.is_some());
            if tagged {
                e.origin(
                    at,
                    format!(
                        "bridge domain `{name}`: member `{}` is a VLAN sub-interface; DLSw's LAN \
                         side takes untagged members only",
                        m.interface
                    ),
                );
            }
        }
    }
}
