//! l2-control: the non-IP control frames an interface receives (802.3 LLC frames such as IS-IS
//! and spanning-tree BPDUs, LACP, LLDP), handed to the control plane by class.
//!
//! Reads: `meta.l3_off` (where the LLC header or payload starts), the EtherType or 802.3 length.
//! Next: the punt path, under the frame's class (`isis`, `bpdu`, `lacp`, `lldp`, `llc`), which
//! gives it to the interface's TAP twin, where the kernel or a daemon (lldpd, an IS-IS speaker)
//! takes it; without a punt path it is counted as having no service. A frame too short for its
//! LLC header is dropped as such.

use super::{be16, Ctx};
use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::graph::{Node, To};
use crate::punt::class_l2;
use crate::tables::{Tables, NO_IF};

pub struct L2Control;

impl Node for L2Control {
    const NAME: &'static str = "l2-control";
    // Only transmits (output-features) or punts (l2-control).
    type Next = crate::graph::NoEdges;
    const TRANSMITS: bool = false;
    const DROPS: &'static [DropReason] = &[];
    const CONSUMED: &'static str = "handed to the control plane";

    fn run(ctx: &mut Ctx, _t: &Tables, pkts: &mut Vec<PktBuf>) {
        for b in pkts.drain(..) {
            let l2 = b.meta().l3_off as usize;
            let class = (l2 >= 14)
                .then(|| class_l2(b.data(), be16(b.data(), l2 - 2), l2))
                .flatten();
            match class {
                Some(c) => ctx.punt(b, c, NO_IF),
                None => ctx.drop(b, DropReason::BadLength),
            }
        }
    }

    fn trace(_t: &Tables, _b: &PktBuf, _to: To) -> String {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use crate::counters::DropReason;
    use crate::graph::harness::{eth, Harness, MAC0};
    use crate::graph::NodeId;

    #[test]
    fn control_frames_reach_l2_control_and_without_a_punt_path_are_counted() {
        let mut h = Harness::new();
        let mut bpdu = eth([0x01, 0x80, 0xc2, 0, 0, 0], 38);
        bpdu.extend_from_slice(&[0x42, 0x42, 0x03]);
        bpdu.resize(60, 0);
        let mut lldp = eth([0x01, 0x80, 0xc2, 0, 0, 0x0e], 0x88cc);
        lldp.resize(60, 0);
        let short_llc = eth(MAC0, 3);
        let out = h.push(NodeId::EthernetInput, 0, &[bpdu, lldp, short_llc]);
        assert_eq!(out.count("l2-control"), 3);
        let v = out.to.into_values().next().unwrap();
        let out = h.run_bufs(NodeId::L2Control, v);
        assert_eq!(out.dropped(DropReason::LocalUnhandled), 2);
        assert_eq!(out.dropped(DropReason::BadLength), 1);
    }
}
