//! The flow detector's control-plane half: the flow rules become the workers' watch spec
//! ([`spec`]), and the passes the workers publish become counts per instance ([`aggregate`]):
//! per source address, destination, input interface, or in all.
//!
//! Reads: the rules, the interfaces' names by index, the workers' latest passes
//! (`dataplane::feature::watch`). Sets: the spec in the router's `FlowWatch`. Sends: nothing
//! (the engine turns the counts into firings).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use dataplane::feature::watch::{FlowFilter, FlowWatch, WatchPass, WatchSpec, MAX_FILTERS};
use rustc_hash::FxHashMap as HashMap;

use crate::config::events::{Detector, FlowsPer, RuleCfg};

/// Matching flows a worker keeps per pass (beyond: counted, and the per-source figures are a
/// lower bound; the per-interface and total counts stay exact).
pub const MAX_HITS: usize = 65_536;

/// One instance's figures in the latest passes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Agg {
    pub flows: u64,
    pub packets: u64,
    pub bytes: u64,
    /// Input interface of the first matching flow (for per-source instances).
    pub interface: String,
}

/// What one flow rule sees in the latest passes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuleFlows {
    /// Instance key (address, interface name, or `all`) and its figures.
    pub instances: Vec<(String, Agg)>,
    /// Matching flows in all (exact).
    pub total: u64,
    /// The busiest sources and their flows, busiest first, at most ten.
    pub top_sources: Vec<(IpAddr, u64)>,
    /// Matching flows left out of the per-source and per-destination figures (see MAX_HITS).
    pub truncated: u64,
}

impl RuleFlows {
    /// The busiest sources as the `{sources}` variable shows them: `address (flows), ...`.
    pub fn sources_text(&self) -> String {
        self.top_sources
            .iter()
            .map(|(a, n)| format!("{a} ({n})"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The spec for the enabled flow rules (None: none, the workers stop scanning), and each
/// rule's filter index.
pub fn spec(
    rules: &[&RuleCfg],
    names: &[String],
    scan_ms: u64,
) -> (Option<WatchSpec>, Vec<Option<usize>>) {
    let mut filters = Vec::new();
    let mut index = Vec::new();
    let mut active_ms = 0u64;
    for r in rules {
        match &r.detector {
            Detector::Flows {
                rules: lines,
                interface,
                direction,
                active_ms: a,
                ..
            } if r.enabled && filters.len() < MAX_FILTERS => {
                index.push(Some(filters.len()));
                // A name the tables do not have yet (a commit in flight) matches nothing.
                let in_if = interface.as_ref().map(|n| {
                    names
                        .iter()
                        .position(|x| x == n)
                        .map_or(u32::MAX, |i| i as u32)
                });
                filters.push(FlowFilter {
                    rules: lines.clone(),
                    in_if,
                    direction: *direction,
                });
                active_ms = active_ms.max(*a);
            }
            _ => index.push(None),
        }
    }
    if filters.is_empty() {
        return (None, index);
    }
    let spec = WatchSpec {
        filters,
        // The longest window any rule asks for; each rule's own is applied when counting.
        active_ms: active_ms.min(u32::MAX as u64) as u32,
        period_ms: scan_ms.clamp(1, u32::MAX as u64) as u32,
        max_hits: MAX_HITS,
    };
    (Some(spec), index)
}

fn addr(a: u128, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(a))
    } else {
        IpAddr::V4(Ipv4Addr::from(a as u32))
    }
}

/// Rule `rule`'s figures (its filter is `filter`) in `passes`, counting flows idle at most
/// `active_ms` ms.
pub fn aggregate(
    passes: &[Option<WatchPass>],
    filter: usize,
    per: FlowsPer,
    active_ms: u64,
    names: &[String],
) -> RuleFlows {
    let bit = 1u64 << filter;
    let name = |i: u32| {
        names
            .get(i as usize)
            .cloned()
            .unwrap_or_else(|| format!("if{i}"))
    };
    let mut by: HashMap<String, Agg> = HashMap::default();
    let mut sources: HashMap<IpAddr, u64> = HashMap::default();
    let mut out = RuleFlows::default();
    for p in passes.iter().flatten() {
        out.truncated += p.truncated;
        // The exact per-interface counts (the spec's window, the widest any rule asks for).
        for i in 0..p.ifs {
            let n = p.count(filter, i);
            out.total += n;
            if per == FlowsPer::Interface && n > 0 {
                by.entry(name(i as u32)).or_default().flows += n;
            }
        }
        for h in p
            .hits
            .iter()
            .filter(|h| h.filters & bit != 0 && u64::from(h.flow.idle_ms) <= active_ms)
        {
            let k = &h.flow.key;
            *sources.entry(addr(k.src, k.v6)).or_default() += 1;
            let key = match per {
                FlowsPer::Source => addr(k.src, k.v6).to_string(),
                FlowsPer::Destination => addr(k.dst, k.v6).to_string(),
                FlowsPer::Interface => name(k.in_if),
                FlowsPer::All => "all".into(),
            };
            let a = by.entry(key).or_default();
            if per != FlowsPer::Interface {
                a.flows += 1;
            }
            a.packets += h.flow.packets;
            a.bytes += h.flow.bytes;
            if a.interface.is_empty() {
                a.interface = name(k.in_if);
            }
        }
    }
    if per == FlowsPer::All {
        // The exact count, not the kept flows'.
        by.entry("all".into()).or_default().flows = out.total;
    }
    let mut top: Vec<(IpAddr, u64)> = sources.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    top.truncate(10);
    out.top_sources = top;
    out.instances = by.into_iter().collect();
    out.instances.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The figures of every flow rule (indexed as `rules`; None where a rule has no flow
/// detector or no pass was published yet).
pub fn read(
    watch: &FlowWatch,
    rules: &[&RuleCfg],
    index: &[Option<usize>],
    names: &[String],
) -> Vec<Option<RuleFlows>> {
    watch.read(|passes| {
        if passes.iter().all(|p| p.is_none()) {
            return vec![None; rules.len()];
        }
        rules
            .iter()
            .zip(index)
            .map(|(r, i)| match (&r.detector, i) {
                (Detector::Flows { per, active_ms, .. }, Some(f)) => {
                    Some(aggregate(passes, *f, *per, *active_ms, names))
                }
                _ => None,
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane::feature::watch::WatchHit;
    use flow::{Direction, FlowKey, FlowSeen};

    fn hit(src: [u8; 4], dst: u32, in_if: u32, idle_ms: u32, filters: u64) -> WatchHit {
        WatchHit {
            flow: FlowSeen {
                key: FlowKey::v4(
                    Ipv4Addr::from(src),
                    Ipv4Addr::from(dst),
                    1024,
                    1434,
                    17,
                    0,
                    in_if,
                    Direction::Ingress,
                ),
                packets: 2,
                bytes: 808,
                idle_ms,
            },
            filters,
        }
    }

    fn pass(hits: Vec<WatchHit>, counts: Vec<u64>) -> Option<WatchPass> {
        Some(WatchPass {
            ifs: 2,
            counts,
            hits,
            ..Default::default()
        })
    }

    #[test]
    fn flows_are_counted_per_source_across_workers_within_the_rules_window() {
        let names = vec!["p0".to_string(), "p1".to_string()];
        let passes = vec![
            pass(
                vec![
                    hit([198, 18, 0, 7], 1, 0, 10, 1),
                    hit([198, 18, 0, 7], 2, 0, 10, 1),
                    hit([198, 18, 0, 9], 3, 0, 10, 3),
                    // Too idle for a 1 s window, and another filter's.
                    hit([198, 18, 0, 9], 4, 0, 4000, 1),
                    hit([10, 0, 0, 1], 5, 1, 10, 2),
                ],
                vec![4, 0, 1, 1],
            ),
            None,
            pass(vec![hit([198, 18, 0, 7], 6, 0, 10, 1)], vec![1, 0, 0, 0]),
        ];
        let r = aggregate(&passes, 0, FlowsPer::Source, 1000, &names);
        assert_eq!(r.total, 5);
        let got: Vec<(&str, u64, &str)> = r
            .instances
            .iter()
            .map(|(k, a)| (k.as_str(), a.flows, a.interface.as_str()))
            .collect();
        assert_eq!(got, [("198.18.0.7", 3, "p0"), ("198.18.0.9", 1, "p0")]);
        assert_eq!(r.instances[0].1.packets, 6);
        assert_eq!(r.sources_text(), "198.18.0.7 (3), 198.18.0.9 (1)");
        // Per interface: the workers' exact counts; in all: their sum.
        let r = aggregate(&passes, 1, FlowsPer::Interface, 1000, &names);
        let got: Vec<(&str, u64)> = r
            .instances
            .iter()
            .map(|(k, a)| (k.as_str(), a.flows))
            .collect();
        assert_eq!(got, [("p0", 1), ("p1", 1)]);
        let r = aggregate(&passes, 0, FlowsPer::All, 1000, &names);
        assert_eq!(r.instances.len(), 1);
        assert_eq!(r.instances[0].0, "all");
        assert_eq!((r.instances[0].1.flows, r.instances[0].1.packets), (5, 8));
    }
}
