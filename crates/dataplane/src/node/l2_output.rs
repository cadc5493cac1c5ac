//! l2-output: the output features of bridge members. A bridged frame leaving by a member that
//! has output features (ACL out, QoS out, `flow: out`) comes here, already tagged for that
//! member, instead of going straight to its port: see `feature::bridged`.
//!
//! Reads: `meta.next_hop` (the member interface the frame leaves by, set by [`leave`]), the
//! frame. Sets: what the member's QoS re-marks. Next: the member's transmit vector. Dropped:
//! what the member's ACL denies or its policers drop (the features' own drop reasons).

use super::{Ctx, VECTOR};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::feature::input::Fate;
use crate::graph::{Edge, NoEdges, Node, To};
use crate::tables::{Interface, Tables};

pub struct L2Output;

impl Node for L2Output {
    const NAME: &'static str = "l2-output";
    type Next = NoEdges;
    const TRANSMITS: bool = true;
    const DROPS: &'static [DropReason] = &[];
    const CONSUMED: &'static str = "";

    fn run(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) {
        while !pkts.is_empty() {
            let n = pkts.len().min(VECTOR);
            run_vector(ctx, t, pkts, n);
        }
    }

    fn trace(t: &Tables, b: &PktBuf, _to: To) -> String {
        crate::feature::output::passed(t, b.meta().next_hop)
    }
}

/// The first `n` frames of `pkts` (at most a vector): their members' arcs, then their ports.
fn run_vector(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>, n: usize) {
    let mut fate = [Fate::Pass; VECTOR];
    let mut a = 0;
    while a < n {
        // A run: one member (a vector of flood copies alternates, a switched one rarely).
        let ifx = pkts[a].meta().next_hop;
        let mut b = a + 1;
        while b < n && pkts[b].meta().next_hop == ifx {
            b += 1;
        }
        crate::feature::bridged::output(ctx, t, &mut pkts[a..b], &mut fate[a..b], ifx);
        a = b;
    }
    for (i, p) in pkts.drain(..n).enumerate() {
        match fate[i] {
            Fate::Drop(why) => ctx.drop(p, why),
            Fate::Pass | Fate::Bypass => {
                let port = t.ifs[p.meta().next_hop as usize].port;
                ctx.tx(port, p);
            }
        }
    }
}

/// Sends bridged frame `b`, tagged for member `ifx` (`out`), on its way out: along edge `e` to
/// l2-output where the member has output features, else straight to its port.
#[inline(always)]
pub(crate) fn leave<E: Edge>(
    ctx: &mut Ctx,
    t: &Tables,
    mut b: PktBuf,
    ifx: u32,
    out: &Interface,
    e: E,
) {
    let features = t.any_features
        && t.features
            .get(ifx as usize)
            .and_then(|f| f.as_deref())
            .is_some_and(|f| f.has_output());
    if features {
        b.meta_mut().next_hop = ifx;
        ctx.to(e, b);
    } else {
        ctx.tx(out.port, b);
    }
}
