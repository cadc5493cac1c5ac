//! The packet graph: every node of the data plane in one table, and the one driver that runs a
//! received vector through them.
//!
//! ```text
//! ethernet-input --> ip4-forward --+--> output-features --+--> interface-output (per port)
//!     |  |      \--> ip6-forward --+----------------------+
//!     |  |            ^     \--> slow-path --> (ip4/ip6 rewrite again) --/
//!     |  |            |                   (out of a BVI) --> bvi-output --+
//!     |  \--> l2-control (LLC, LACP, LLDP) --> punt                        |
//!     |--> mpls-input (swap, pop) ----------------------------------------->+
//!     |       \--> (pop and look up in a VRF: ip4/ip6-forward)             |
//!     |--> pw-encap (attachment circuits onto their pseudowires) --------->+
//!     \--> l2-input (bridge members) ------------------------------------->+
//!               |  \--> l2-flood (copies per member) --------------------->/
//!               \--------+--> bvi-input (to a bridge's routed interface)
//! ```
//!
//! Ports that carry ATM cells enter at atm-input instead (their queues do the AAL5 SAR, see
//! [`crate::atm`]), which hands packets to ip4-forward and ip6-forward.
//!
//! A node is a type implementing [`Node`], in a file of its own: its name, its next edges (a
//! typed enum, [`Node::Next`]), the drop reasons it owns, its trace line and the text of what it
//! does with a frame it neither hands on nor drops. The [`graph!`] table below lists them in the
//! order the driver runs them; adding a node is its file plus one line there.
//!
//! The driver ([`run`]) keeps one input vector per node in [`Frames`]. A node drains its input
//! and pushes each frame to one of its edges ([`Ctx::to`]), to a port's transmit vector
//! ([`Ctx::tx`]), to the control plane ([`Ctx::punt`]) or drops it ([`Ctx::drop`]). Nodes run in
//! table order, at most a vector at a time, until every input is empty; a back edge (a node
//! handing frames to one earlier in the table, as decapsulation will) is run on the next pass.
//! Dispatch is a `match` over [`NodeId`]: no virtual call, per vector or per packet.
//!
//! Because the driver sees each node's input and outputs, captures and traces hook every edge
//! here, by construction ([`crate::tap`]); and it counts each node's calls and packets for
//! `show runtime` ([`Runtime`]), timing one vector in [`TIMED_EVERY`].

/// A router of two ports for running nodes alone (tests) and the whole graph (fuzzing).
#[doc(hidden)]
pub mod harness;
mod runtime;

pub use runtime::{row_names, NodeCounters, NodeSnapshot, Runtime, NODE_ROWS, TIMED_EVERY, TX_ROW};

use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::node::{Ctx, VECTOR};
use crate::tables::Tables;

/// Where a frame goes from a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum To {
    Node(NodeId),
    /// The transmit vector of a port (interface-output).
    Tx(u16),
}

/// A node's next edges: an enum whose variants each name the node they lead to.
pub trait Edge: Copy + 'static {
    const ALL: &'static [Self];
    fn node(self) -> NodeId;
}

/// The edges of a node that only transmits, punts or drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoEdges {}

impl Edge for NoEdges {
    const ALL: &'static [Self] = &[];
    fn node(self) -> NodeId {
        match self {}
    }
}

/// One node of the graph.
pub trait Node {
    /// The name `show runtime`, `show errors`, captures and traces use.
    const NAME: &'static str;
    /// The nodes this one hands frames to.
    type Next: Edge;
    /// Whether it puts frames on transmit vectors.
    const TRANSMITS: bool;
    /// The drop reasons this node owns (`show errors` groups them under it). A reason has one
    /// owner; another node may still drop for it (a short frame is a short frame anywhere).
    const DROPS: &'static [DropReason];
    /// What became of a frame this node took in and neither handed on nor dropped (punted,
    /// answered, consumed).
    const CONSUMED: &'static str;
    /// It hands frames to nodes earlier in the table (decapsulation hands the inner packet
    /// back to the forwarding nodes): those run on the driver's next pass.
    const LOOPS_BACK: bool = false;
    /// Runs over one vector (at most [`VECTOR`] frames), draining `pkts`.
    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>);
    /// One trace line: what the node decided about `b`, which it sent to `to`.
    fn trace(t: &Tables, b: &PktBuf, to: To) -> String;
}

/// The graph's table: one line per node, in the order the driver runs them (an edge should lead
/// to a later line, so one pass empties the graph).
macro_rules! graph {
    ($($id:ident => $node:ty;)*) => {
        /// A node of the graph (an index into [`Frames`] and the runtime counters).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum NodeId { $($id,)* }

        impl NodeId {
            pub const ALL: &'static [NodeId] = &[$(NodeId::$id,)*];
            pub fn name(self) -> &'static str {
                match self { $(NodeId::$id => <$node as Node>::NAME,)* }
            }
            /// The nodes this one may hand frames to.
            pub fn next(self) -> Vec<NodeId> {
                match self {
                    $(NodeId::$id => <<$node as Node>::Next as Edge>::ALL
                        .iter().map(|e| e.node()).collect(),)*
                }
            }
            pub fn transmits(self) -> bool {
                match self { $(NodeId::$id => <$node as Node>::TRANSMITS,)* }
            }
            pub fn drops(self) -> &'static [DropReason] {
                match self { $(NodeId::$id => <$node as Node>::DROPS,)* }
            }
            pub fn consumed(self) -> &'static str {
                match self { $(NodeId::$id => <$node as Node>::CONSUMED,)* }
            }
            pub fn loops_back(self) -> bool {
                match self { $(NodeId::$id => <$node as Node>::LOOPS_BACK,)* }
            }
            pub fn trace(self, t: &Tables, b: &PktBuf, to: To) -> String {
                match self { $(NodeId::$id => <$node as Node>::trace(t, b, to),)* }
            }
        }

        #[inline(always)]
        fn dispatch(id: NodeId, ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
            match id { $(NodeId::$id => <$node as Node>::run(ctx, t, pkts),)* }
        }
    };
}

graph! {
    EthernetInput => crate::node::ethernet::EthernetInput;
    AtmInput => crate::node::atm_input::AtmInput;
    MplsInput => crate::node::mpls_input::MplsInput;
    PwEncap => crate::node::pw_encap::PwEncap;
    L2Input => crate::node::l2_input::L2Input;
    L2Mcast => crate::node::l2_mcast::L2Mcast;
    L2Flood => crate::node::l2_flood::L2Flood;
    BviInput => crate::node::bvi_input::BviInput;
    Ip4Forward => crate::node::ip4::Ip4Forward;
    Ip6Forward => crate::node::ip6::Ip6Forward;
    L2Control => crate::node::l2_control::L2Control;
    SlowPath => crate::node::slow::SlowPath;
    IpMcast => crate::node::ip_mcast::IpMcast;
    GtpuInput => crate::node::gtpu_input::GtpuInput;
    GtpuEncap => crate::node::gtpu_encap::GtpuEncap;
    OutputFeatures => crate::feature::output::OutputFeatures;
    BviOutput => crate::node::bvi_output::BviOutput;
    L2Output => crate::node::l2_output::L2Output;
}

pub const NODE_COUNT: usize = NodeId::ALL.len();

impl NodeId {
    pub fn parse(s: &str) -> Option<NodeId> {
        NodeId::ALL.iter().copied().find(|n| n.name() == s)
    }

    /// The owner of drop reason `d`: a node (see [`Node::DROPS`]) or one of [`other_owners`].
    pub fn of_drop(d: DropReason) -> &'static str {
        drop_owners()
            .find(|(_, ds)| ds.contains(&d))
            .map_or("?", |(n, _)| n)
    }
}

/// The terminal node: the per-port transmit vectors, handed to the ports after the graph runs.
pub const TX_NODE_NAME: &str = "interface-output";
/// The drop reasons interface-output owns.
pub const TX_DROPS: &[DropReason] = &[DropReason::TxQueueFull];
/// The punt path's name and drop reasons (a frame's class over its rate, or its queue full).
pub const PUNT_NAME: &str = "punt";
pub const PUNT_DROPS: &[DropReason] = &[DropReason::PuntPoliced, DropReason::PuntQueueFull];

/// Who owns drop reasons besides the graph's nodes: interface-output, the punt path, and the
/// steps of the feature arcs (which run inside the nodes, see [`crate::feature::arc`]).
pub fn other_owners() -> impl Iterator<Item = (&'static str, &'static [DropReason])> {
    [(TX_NODE_NAME, TX_DROPS), (PUNT_NAME, PUNT_DROPS)]
        .into_iter()
        .chain(
            crate::feature::StepKind::ALL
                .iter()
                .map(|k| (k.name(), k.drops())),
        )
}

/// Every owner of drop reasons with its reasons: the nodes, then [`other_owners`].
pub fn drop_owners() -> impl Iterator<Item = (&'static str, &'static [DropReason])> {
    NodeId::ALL
        .iter()
        .map(|n| (n.name(), n.drops()))
        .chain(other_owners())
}

/// The input vectors of every node, for one worker.
pub struct Frames {
    v: [Vec<PktBuf>; NODE_COUNT],
    /// An empty vector with a vector's room, swapped in for the one a node is running on.
    spare: Vec<PktBuf>,
}

impl Default for Frames {
    fn default() -> Self {
        Frames {
            v: std::array::from_fn(|_| Vec::with_capacity(VECTOR * 2)),
            spare: Vec::with_capacity(VECTOR * 2),
        }
    }
}

impl Frames {
    #[inline(always)]
    pub fn push(&mut self, n: NodeId, b: PktBuf) {
        self.v[n as usize].push(b);
    }

    /// The input vector of edge `e`'s node, taken out so a node can fill it through a local:
    /// pushes to a local vector keep its length in a register, where pushes through `Ctx` reload
    /// it after every call that could touch `Ctx`. Give it back with [`Frames::put`] before the
    /// node returns.
    #[inline(always)]
    pub fn take<E: Edge>(&mut self, e: E) -> Vec<PktBuf> {
        std::mem::take(&mut self.v[e.node() as usize])
    }

    /// Gives back what [`Frames::take`] took (with what was pushed to it meanwhile).
    #[inline(always)]
    pub fn put<E: Edge>(&mut self, e: E, v: Vec<PktBuf>) {
        let slot = &mut self.v[e.node() as usize];
        let meanwhile = std::mem::replace(slot, v);
        if !meanwhile.is_empty() {
            slot.extend(meanwhile);
        }
    }

    pub fn get(&self, n: NodeId) -> &[PktBuf] {
        &self.v[n as usize]
    }

    pub fn len(&self, n: NodeId) -> usize {
        self.v[n as usize].len()
    }
}

/// Runs `pkts` (one receive burst of `port`) through the port's entry node (ethernet-input, or
/// atm-input for a port that carries ATM cells) and on through the graph, until every frame is
/// on a transmit vector, punted, consumed or dropped.
#[inline]
pub fn receive(ctx: &mut Ctx, t: &Tables, port: u16, pkts: &mut Vec<PktBuf>) {
    ctx.rx_port = port;
    let entry = if t.atm.is_empty() || t.atm_port(port).is_none() {
        NodeId::EthernetInput
    } else {
        NodeId::AtmInput
    } as usize;
    std::mem::swap(pkts, &mut ctx.frames.v[entry]);
    run(ctx, t);
    // `run` returns with every input empty: the burst vector's room goes back to the caller.
    std::mem::swap(pkts, &mut ctx.frames.v[entry]);
}

/// Runs every pending input vector, node by node in table order, until all are empty.
#[inline]
pub fn run(ctx: &mut Ctx, t: &Tables) {
    loop {
        let mut ran = false;
        for &id in NodeId::ALL {
            if !ctx.frames.v[id as usize].is_empty() {
                run_node(ctx, t, id);
                ran = true;
            }
        }
        if !ran {
            return;
        }
    }
}

#[inline(always)]
fn run_node(ctx: &mut Ctx, t: &Tables, id: NodeId) {
    let i = id as usize;
    let mut input = std::mem::replace(&mut ctx.frames.v[i], std::mem::take(&mut ctx.frames.spare));
    if input.len() > VECTOR {
        // More than a vector waits (several nodes fed this one): the rest runs next pass.
        ctx.frames.v[i].extend(input.drain(VECTOR..));
    }
    let n = input.len();
    let tapping = ctx.tap.active;
    if tapping {
        crate::tap::before_node(ctx, id, &input);
    }
    let t0 = ctx.runtime.start();
    dispatch(id, ctx, t, &mut input);
    ctx.runtime.count(i, n, t0);
    if tapping {
        crate::tap::after_node(ctx, t, id);
    }
    debug_assert!(input.is_empty(), "{} left frames in its input", id.name());
    ctx.frames.spare = input;
}

impl Ctx {
    /// Hands frame `b` along edge `e` of the running node.
    #[inline(always)]
    pub fn to<E: Edge>(&mut self, e: E, b: PktBuf) {
        self.frames.push(e.node(), b);
    }

    /// Queues `b` on the transmit vector of `port`.
    #[inline(always)]
    pub fn tx(&mut self, port: u16, b: PktBuf) {
        self.out[port as usize].push(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_drop_reason_has_exactly_one_owner() {
        for &d in DropReason::ALL {
            let owners: Vec<_> = drop_owners()
                .filter(|(_, ds)| ds.contains(&d))
                .map(|(n, _)| n)
                .collect();
            assert_eq!(owners.len(), 1, "{d:?} is owned by {owners:?}");
        }
    }

    #[test]
    fn names_are_unique_and_parse_back() {
        let names: Vec<_> = drop_owners().map(|(n, _)| n).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        for &n in NodeId::ALL {
            assert_eq!(NodeId::parse(n.name()), Some(n));
        }
    }

    #[test]
    fn edges_lead_forward_so_one_pass_empties_the_graph() {
        // A node's edge to itself (the slow path forwarding a packet it finished, which may
        // need the slow path again) is run on the driver's next pass, as are the edges of
        // nodes that declare they loop back (decapsulation).
        for &n in NodeId::ALL.iter().filter(|n| !n.loops_back()) {
            for m in n.next() {
                assert!(
                    (m as usize) >= (n as usize),
                    "{} -> {} is a back edge",
                    n.name(),
                    m.name()
                );
            }
        }
    }
}
