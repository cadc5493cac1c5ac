//! The whole RIB written out as netlink messages, for a process to hand its table to its
//! replacement (a hitless restart): the new process applies them to a fresh [`Rib`] and starts
//! where the old one was, before zebra reconnects to it and replays.

use std::net::IpAddr;

use super::*;
use crate::netlink::{encode, Members, Paths, AF_INET, AF_INET6, AF_UNSPEC, RTPROT_ZEBRA};

/// `nlmsg_pid` of the dump's messages: no process sent them to the kernel.
const PID: u32 = 0;

/// Room reserved per route and per object before writing (a v4 route through an object takes
/// 44 bytes, a v6 one 56): the buffer does not grow by doubling over a full table.
const ROUTE_BYTES: usize = 52;
const NH_BYTES: usize = 48;

impl Rib {
    /// Appends to `out` the whole content of the RIB as netlink messages (`RTM_NEWNEXTHOP`, then
    /// `RTM_NEWROUTE`, laid out by [`encode`]; [`netlink::messages`](crate::netlink::messages)
    /// reads them back) which, applied in order to a fresh [`Rib::new`] with [`Rib::apply`] or
    /// [`Rib::apply_batch`] (in any batching), rebuild an equal RIB: the same routes of every
    /// table and family, each with the same next-hop object or the same next hops, type or
    /// unresolved state, and the same next-hop objects and groups. For handing the table to the
    /// process that replaces this one.
    ///
    /// Reads every defined next-hop object and every route. Written in this order: plain objects
    /// (single next hops, blackholes), then groups, each by id, then the routes in slab order (no
    /// sorting: a route costs its bytes in `out` and nothing else). Objects come before the
    /// groups and routes naming them, so the receiver defines each set once and changes none.
    /// Undefined ids that routes or groups name (placeholders) are not written: the references
    /// create them again. A route through an object is written with `RTA_NH_ID`, one with its
    /// own next hops as `RTA_GATEWAY`/`RTA_OIF` (one path of weight 1) or `RTA_MULTIPATH`, a
    /// drop route by its type, an unresolved route with neither as a unicast route without next
    /// hops.
    ///
    /// What the RIB does not keep, and the messages therefore do not carry (the receiving RIB
    /// does not keep it either):
    /// - route attributes: the protocol (written as `RTPROT_ZEBRA`), the metric (`RTA_PRIORITY`
    ///   is left out) and the original `NLM_F_REPLACE` (every route is written with it);
    /// - next-hop object attributes: `nh_flags` (`RTNH_F_ONLINK`, ...; written as 0), the
    ///   protocol (`RTPROT_ZEBRA`), the family (derived: `AF_INET6` for an IPv6 gateway, else
    ///   `AF_INET`, `AF_UNSPEC` for groups) and the group type (a resilient group is written as
    ///   a plain multipath one);
    /// - the replay state: after [`begin_replay`](Self::begin_replay), routes and objects not yet
    ///   re-sent are written like the others and are fresh in the new RIB (let zebra's replay to
    ///   the new process and its [`sweep`](Self::sweep) remove them);
    /// - [`NhSetId`]s: the new RIB numbers its sets itself; its consumer learns them from the
    ///   [`Change`]s that applying the dump returns, not from the old ones;
    /// - the event totals of [`Counters`] (the gauges are rebuilt).
    ///
    /// Labelled routes and objects, and ignored route types, are never held, so never written.
    /// A RIB fed only through [`netlink::decode`](crate::netlink::decode()) (as the server does)
    /// dumps only messages that decode again; one fed hand-built [`Msg`]s that the decoder
    /// would refuse (a next hop with neither gateway nor device, a group holding itself) dumps
    /// them as they are, and the decoder refuses them again.
    pub fn write_messages(&self, out: &mut Vec<u8>) {
        out.reserve(self.nhs.len() * NH_BYTES + self.index.len() * ROUTE_BYTES);
        let mut scratch = Vec::new();

        // Plain objects before groups (`false` sorts first), each by id.
        let mut objs: Vec<(bool, u32)> = self
            .nhs
            .iter()
            .filter_map(|(&id, o)| Some((matches!(o.def.as_ref()?, NhDef::Group(_)), id)))
            .collect();
        objs.sort_unstable();
        for (_, id) in objs {
            let Some(def) = &self.nhs[&id].def else {
                continue;
            };
            let mut n = Nexthop {
                op: Op::New,
                id,
                family: AF_INET,
                protocol: RTPROT_ZEBRA,
                flags: 0,
                blackhole: false,
                oif: 0,
                gateway: None,
                group: Members::default(),
                group_type: 0,
                encap: false,
            };
            match def {
                NhDef::Single(h) => {
                    if let Some(IpAddr::V6(_)) = h.gateway {
                        n.family = AF_INET6;
                    }
                    n.gateway = h.gateway;
                    n.oif = h.ifindex;
                }
                NhDef::Blackhole => n.blackhole = true,
                NhDef::Group(ms) => {
                    scratch.clear();
                    for m in ms.iter() {
                        encode::put_group_member(&mut scratch, m);
                    }
                    n.family = AF_UNSPEC;
                    n.group = Members::from_checked(&scratch);
                }
            }
            encode::nexthop(out, &n, PID);
        }

        // The slab in order (sequential reads, unlike the index's hash order), minus its free
        // entries.
        let mut free = vec![0u64; self.routes.len().div_ceil(64)];
        for &i in &self.free_routes {
            free[i as usize / 64] |= 1 << (i % 64);
        }
        for (i, e) in self.routes.iter().enumerate() {
            if free[i / 64] >> (i % 64) & 1 != 0 {
                continue;
            }
            let mut r = Route {
                op: Op::New,
                replace: true,
                table: e.key.table,
                prefix: e.key.prefix,
                rtype: RouteType::Unicast,
                protocol: RTPROT_ZEBRA,
                priority: 0,
                nh_id: e.nh_id,
                gateway: None,
                oif: 0,
                multipath: Paths::default(),
                encap: false,
            };
            // A route naming an object follows it (its set is the object's); otherwise its set
            // is its own (interned) content, or it has none.
            if let (0, Some(s)) = (e.nh_id, e.set) {
                match self.sets.get(s).expect("a route's set is live") {
                    // The single-path form unless it would lose something: a weight, or a path
                    // with neither gateway nor device (which would read back as no path at all).
                    NhSet::Forward(hops) => match &hops[..] {
                        [h] if h.weight == 1 && (h.gateway.is_some() || h.ifindex != 0) => {
                            r.gateway = h.gateway;
                            r.oif = h.ifindex;
                        }
                        hops => {
                            scratch.clear();
                            let v4 = e.key.prefix.is_ipv4();
                            for h in hops {
                                encode::put_rtnexthop(&mut scratch, v4, h);
                            }
                            r.multipath = Paths::from_checked(&scratch);
                        }
                    },
                    NhSet::Blackhole => r.rtype = RouteType::Blackhole,
                    NhSet::Unreachable => r.rtype = RouteType::Unreachable,
                    NhSet::Prohibit => r.rtype = RouteType::Prohibit,
                }
            }
            encode::route(out, &r, PID);
        }
    }
}
