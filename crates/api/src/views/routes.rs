//! `show ip route` / `show ipv6 route`: the routes of one VRF and family, or those a query
//! matched.

use serde::{Deserialize, Serialize};

use super::Render;
use crate::requests::Family;
use crate::table::{list, table};

/// Where a route came from, strongest first (a stronger source's route replaces a weaker one's
/// for the same prefix).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteOrigin {
    /// An interface's subnet or the router's own address.
    Connected,
    /// The config's `routes`.
    Static,
    /// The config's route files.
    File,
    /// A configured or learned neighbour's host route.
    Neighbor,
    /// Added through the API.
    Api,
    /// FRR's, over FPM.
    Fpm,
    /// An L3VPN route from a far PE (MP-BGP, through GoBGP).
    Vpn,
}

impl RouteOrigin {
    /// The one-letter code of the route table's first column.
    pub fn code(self) -> &'static str {
        match self {
            RouteOrigin::Connected => "C",
            RouteOrigin::Static => "S",
            RouteOrigin::File => "F",
            RouteOrigin::Neighbor => "N",
            RouteOrigin::Api => "A",
            RouteOrigin::Fpm => "R",
            RouteOrigin::Vpn => "V",
        }
    }
}

/// What a route's next hop does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NextHopKind {
    /// No next hop (the empty slot).
    None,
    /// To one neighbour.
    Forward,
    /// Spread over several (each listed, with its share of buckets when uneven).
    Ecmp,
    /// The router's own address.
    Local,
    /// A subnet on an interface (its neighbours resolved as traffic comes).
    Connected,
    /// A neighbour not resolved yet.
    Incomplete,
    /// Its interface is down.
    Down,
    Blackhole,
    Reject,
    /// The GGSN's GTP-U address: tunnels end here.
    GtpuLocal,
    /// An APN's address pool: tunnelled to each UE's SGSN (the APN in `via`).
    Gtp,
    /// To a neighbour with labels pushed (`ADDR on IF labels L1/L2` in `via`).
    Labelled,
}

impl NextHopKind {
    pub fn name(self) -> &'static str {
        match self {
            NextHopKind::None => "none",
            NextHopKind::Forward => "forward",
            NextHopKind::Ecmp => "ecmp",
            NextHopKind::Local => "local",
            NextHopKind::Connected => "connected",
            NextHopKind::Incomplete => "incomplete",
            NextHopKind::Down => "down",
            NextHopKind::Blackhole => "blackhole",
            NextHopKind::Reject => "reject",
            NextHopKind::GtpuLocal => "gtpu-local",
            NextHopKind::Gtp => "gtp",
            NextHopKind::Labelled => "labelled",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RouteView {
    pub prefix: String,
    pub origin: RouteOrigin,
    pub kind: NextHopKind,
    /// Next hops (`ADDR on IF`) or the interface, as the kind has them.
    pub via: Vec<String>,
    pub next_hop_id: u32,
}

/// `GET /v1/routes`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoutesView {
    pub vrf: String,
    pub family: Family,
    /// Routes in the table (the whole VRF and family).
    pub total: usize,
    /// Routes that matched the query, of which `routes` holds the first `limit`.
    pub matched: usize,
    pub routes: Vec<RouteView>,
}

impl Render for RoutesView {
    fn render(&self) -> String {
        let mut out = format!(
            "VRF {}, {}: {} routes{}\nCodes: C connected, S static, F route file, R FRR (FPM), A API, N neighbour, V VPN (MP-BGP)\n\n",
            self.vrf,
            self.family.name(),
            self.total,
            if self.matched != self.total {
                format!(", {} matched", self.matched)
            } else {
                String::new()
            }
        );
        let rows: Vec<Vec<String>> = self
            .routes
            .iter()
            .map(|r| {
                let via = match r.kind {
                    NextHopKind::Forward | NextHopKind::Ecmp => format!("via {}", list(&r.via)),
                    NextHopKind::Connected => format!("directly connected, {}", list(&r.via)),
                    NextHopKind::Local => "local (the router's address)".into(),
                    NextHopKind::Down => format!("down ({})", list(&r.via)),
                    k => k.name().to_string(),
                };
                vec![r.origin.code().into(), r.prefix.clone(), via]
            })
            .collect();
        let shown = rows.len();
        out += &table(&["", "Prefix", "Next hop"], rows);
        if self.matched > shown {
            out += &format!(
                "... {} more (use --limit 0 for all)\n",
                self.matched - shown
            );
        }
        out
    }
}
