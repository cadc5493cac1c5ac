//! Bridge domains as the workers see them: which interfaces are members, what each domain does
//! with sources (learn or not) and unknown destinations (flood or drop), and the counters the
//! L2 nodes keep for `show bridge` and the metrics.
//!
//! An interface in a bridge domain carries an [`L2Port`]: its domain (an index into
//! `Tables::bridges`) and its member id in the MAC table. Member ids are stable across config
//! commits (the control plane hands them out by interface name and never reuses one while an
//! entry may name it), while interface indexes are not: `Tables::l2_members` maps a member id to
//! the interface it is today, so a learned address stays right across a commit that renumbers
//! interfaces, and an address learned on a removed member is flooded, never sent to the wrong
//! interface.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::buffer::PktBuf;

/// A bridge member's place: its domain and its member id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L2Port {
    /// Index into `Tables::bridges`.
    pub bridge: u16,
    /// The member id the MAC table stores for addresses learned here.
    pub member: u32,
    /// Sources arriving here are learned (the domain's `learning` and the member's own).
    pub learn: bool,
    /// A Flexlink member on standby: no frame in (dropped, not learned) or out (not flooded
    /// to; its member id leads to the active member).
    pub blocked: bool,
    /// L2 protocol tunnelling on a dot1q-tunnel member: the [`l2pt`] protocols (bits) whose
    /// frames from the customer cross the bridge under [`l2pt::MAC`]; 0: none.
    pub l2pt: u8,
}

/// L2 protocol tunnelling (as Cisco's `l2protocol-tunnel`): a Q-in-Q customer's control frames
/// (STP BPDUs, CDP/VTP, LACP) would be taken by the provider's switches, which listen on their
/// group addresses. Arriving at a tunnel member that tunnels the protocol, such a frame's
/// destination becomes [`l2pt::MAC`], which provider switches flood like any multicast; leaving by
/// a tunnel member, a frame to that address gets its own destination back, read from what it
/// carries.
pub mod l2pt {
    /// Cisco's address for tunnelled protocol frames.
    pub const MAC: [u8; 6] = [0x01, 0x00, 0x0c, 0xcd, 0xcd, 0xd0];
    pub const STP: u8 = 1;
    /// CDP, VTP and the other protocols of Cisco's 01:00:0C:CC:CC:CC.
    pub const CDP: u8 = 2;
    /// Slow protocols: LACP, marker.
    pub const LACP: u8 = 4;
    const STP_MAC: [u8; 6] = [0x01, 0x80, 0xc2, 0, 0, 0];
    const CDP_MAC: [u8; 6] = [0x01, 0x00, 0x0c, 0xcc, 0xcc, 0xcc];
    const SLOW_MAC: [u8; 6] = [0x01, 0x80, 0xc2, 0, 0, 0x02];

    /// The protocol (bit) of a frame by its destination; 0 for none.
    #[inline]
    pub fn protocol(dst: &[u8]) -> u8 {
        match dst.get(..6) {
            Some(d) if d == STP_MAC => STP,
            Some(d) if d == CDP_MAC => CDP,
            Some(d) if d == SLOW_MAC => LACP,
            _ => 0,
        }
    }

    /// The destination a tunnelled frame had, from what follows its tags at `l3_off` (the
    /// EtherType or 802.3 length before it; a customer's own 802.1Q tag is looked past):
    /// LLC 0x42 (STP), LLC/SNAP with Cisco's OUI (CDP, VTP), EtherType 0x8809 (LACP).
    pub fn original(frame: &[u8], l3_off: usize) -> Option<[u8; 6]> {
        let mut at = l3_off.checked_sub(2)?;
        let mut et = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
        if et == 0x8100 {
            at += 4;
            et = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
        }
        let llc = frame.get(at + 2..at + 8);
        match (et, llc) {
            (0x8809, _) => Some(SLOW_MAC),
            (0..=1500, Some([0x42, 0x42, ..])) => Some(STP_MAC),
            (0..=1500, Some([0xaa, 0xaa, 0x03, 0x00, 0x00, 0x0c])) => Some(CDP_MAC),
            _ => None,
        }
    }
}

/// One bridge domain.
#[derive(Clone, Debug)]
pub struct Bridge {
    pub name: String,
    /// The domain's number: the MAC table's keys carry it, so it is stable across commits.
    pub id: u16,
    /// Interface indexes of the members, in config order (the flood list).
    pub members: Box<[u32]>,
    /// Frames to unknown unicast destinations are flooded (else dropped and counted).
    pub flood_unknown: bool,
    /// What becomes of spanning-tree BPDUs (Linerate runs no STP: `show bridge` says so).
    pub bpdu: Bpdu,
    /// The interface index of its routed interface (BVI), `NO_IF` if it has none: the bridge
    /// and the L3 path meet there.
    pub bvi: u32,
    /// IGMP/MLD snooping (`l2::snoop`, `node::l2_mcast`); None: multicast is flooded.
    pub snoop: Option<std::sync::Arc<crate::l2::snoop::SnoopSettings>>,
    /// DLSw serves this domain: its members' LLC frames (802.3, any SAP but spanning tree's
    /// and IS-IS's) go to the control plane's DLSw (`sna` punt class), not across the bridge.
    pub dlsw: bool,
    pub counters: std::sync::Arc<BridgeCounters>,
}

/// An 802.3 frame (a length, not an EtherType, after the addresses at `l3 - 2`) whose DSAP is
/// neither spanning tree's (0x42) nor IS-IS's (0xFE): what DLSw carries.
#[inline(always)]
pub fn dlsw_llc(d: &[u8], l3: usize) -> bool {
    l3 >= 2
        && d.len() > l3
        && u16::from_be_bytes([d[l3 - 2], d[l3 - 1]]) <= 1500
        && !matches!(d[l3], 0x42 | 0xfe)
}

/// What a bridge domain does with spanning-tree BPDUs (to 01:80:C2:00:00:00).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Bpdu {
    /// Handed to the control plane with the other L2 control frames (`bpdu` punt class), so
    /// the member's TAP twin sees them; not forwarded.
    #[default]
    Punt,
    /// Flooded like a multicast frame: the domain is transparent to an outside spanning tree,
    /// which can then see (and break) a loop through it.
    Flood,
    /// Dropped and counted.
    Drop,
}

impl Bpdu {
    pub fn name(self) -> &'static str {
        match self {
            Bpdu::Punt => "punt",
            Bpdu::Flood => "flood",
            Bpdu::Drop => "drop",
        }
    }
}

/// Counters of one bridge domain, written once per vector by each worker that switched frames
/// in it (so one shared line per domain, touched a few times a vector, not per frame).
#[derive(Debug, Default)]
pub struct BridgeCounters {
    /// Frames sent to the member their destination is learned on.
    pub forwarded: AtomicU64,
    /// Frames flooded (broadcast, multicast, unknown unicast), and the copies that went out.
    pub flooded: AtomicU64,
    pub flood_copies: AtomicU64,
    /// Of the frames flooded, those to a unicast address nobody had learned.
    pub unknown_unicast: AtomicU64,
    /// Sources learned anew, moved from another member, not learned at the domain's limit,
    /// not learned because the table was full, and moves refused as flaps.
    pub learned: AtomicU64,
    pub moved: AtomicU64,
    pub limit: AtomicU64,
    pub table_full: AtomicU64,
    pub flaps: AtomicU64,
    /// Flooded frames storm control dropped.
    pub storm_dropped: AtomicU64,
    /// Protocol frames tunnelled (L2PT): rewritten on the way in, and restored on the way out.
    pub l2pt: AtomicU64,
    /// Snooping: multicast data frames sent to a group's members (and the copies that went
    /// out), frames to groups nobody joined, and joins refused at a group limit.
    pub mcast_forwarded: AtomicU64,
    pub mcast_copies: AtomicU64,
    pub mcast_unregistered: AtomicU64,
    pub mcast_limit: AtomicU64,
    /// The member id of the last source refused at the learn limit (0: none yet): the one a
    /// `mac-limit-action: shutdown` shuts.
    pub limit_member: std::sync::atomic::AtomicU32,
}

impl BridgeCounters {
    /// Adds one vector's counts.
    pub fn add(&self, v: &VectorCounts) {
        let add = |c: &AtomicU64, n: u64| {
            if n > 0 {
                c.fetch_add(n, Ordering::Relaxed);
            }
        };
        add(&self.forwarded, v.forwarded);
        add(&self.flooded, v.flooded);
        add(&self.flood_copies, v.flood_copies);
        add(&self.unknown_unicast, v.unknown_unicast);
        add(&self.learned, v.learned);
        add(&self.moved, v.moved);
        add(&self.limit, v.limit);
        add(&self.table_full, v.table_full);
        add(&self.flaps, v.flaps);
        add(&self.storm_dropped, v.storm_dropped);
        add(&self.l2pt, v.l2pt);
        add(&self.mcast_forwarded, v.mcast_forwarded);
        add(&self.mcast_copies, v.mcast_copies);
        add(&self.mcast_unregistered, v.mcast_unregistered);
        add(&self.mcast_limit, v.mcast_limit);
        if v.limit > 0 {
            self.limit_member.store(v.limit_member, Ordering::Relaxed);
        }
    }

    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// Storm control of one member: per kind of flooded frame (broadcast, multicast, unknown
/// unicast), a policer shared by every worker receiving on the member, in frames a second.
/// A frame over its kind's rate is dropped (`L2StormControl`) and counted here.
#[derive(Debug)]
pub struct StormControl {
    pub policers: [Option<crate::feature::police::Policer>; 3],
    pub dropped: [AtomicU64; 3],
}

/// The kinds storm control polices, in [`StormControl`]'s order.
pub const STORM_KINDS: [&str; 3] = ["broadcast", "multicast", "unknown-unicast"];

impl StormControl {
    /// `rates[k]`: frames a second of kind k (None: not policed), with a burst of a tenth of
    /// a second's worth (at least one frame).
    pub fn new(rates: [Option<u32>; 3]) -> StormControl {
        use crate::feature::police::{Meter, Policer, PolicerConfig, Verdict};
        let policer = |fps: u32| {
            // The meter counts bytes at a bit rate: one "byte" a frame at 8 bit/s per frame/s
            // makes it a frame meter.
            let burst = (fps / 10).max(1);
            Policer::new(PolicerConfig {
                meter: Meter::SrTcm {
                    cir_bps: u64::from(fps) * 8,
                    cbs: burst,
                    ebs: 0,
                },
                color_aware: false,
                conform: Verdict::Transmit,
                exceed: Verdict::Drop,
                violate: Verdict::Drop,
            })
        };
        StormControl {
            policers: rates.map(|r| r.map(policer)),
            dropped: Default::default(),
        }
    }

    /// Whether a flooded frame of kind `k` (0 broadcast, 1 multicast, 2 unknown unicast) may
    /// go, at `now_ns` of the workers' shared clock.
    #[inline]
    pub fn admit(&self, k: usize, now_ns: u64) -> bool {
        use crate::feature::police::{Color, Verdict};
        let Some(p) = &self.policers[k] else {
            return true;
        };
        let (_, v) = p.police(now_ns, 1, Color::Green);
        if v == Verdict::Drop {
            self.dropped[k].fetch_add(1, Ordering::Relaxed);
            false
        } else {
            true
        }
    }
}

/// One vector's counts for one domain, kept in locals by the nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VectorCounts {
    pub forwarded: u64,
    pub flooded: u64,
    pub flood_copies: u64,
    pub unknown_unicast: u64,
    pub learned: u64,
    pub moved: u64,
    pub limit: u64,
    pub table_full: u64,
    pub flaps: u64,
    pub storm_dropped: u64,
    pub l2pt: u64,
    pub mcast_forwarded: u64,
    pub mcast_copies: u64,
    pub mcast_unregistered: u64,
    pub mcast_limit: u64,
    /// The member of the last source refused at the limit in this vector.
    pub limit_member: u32,
}

impl VectorCounts {
    pub fn is_zero(&self) -> bool {
        *self == VectorCounts::default()
    }
}

/// The 802.1D reserved group addresses (01:80:C2:00:00:00 to 0F: STP BPDUs, pause, LACP, LLDP,
/// 802.1X): a bridge never forwards them.
#[inline(always)]
pub fn reserved_group(dst: &[u8]) -> bool {
    dst[..5] == [0x01, 0x80, 0xc2, 0, 0] && dst[5] & 0xf0 == 0
}

/// Rewrites a bridged frame's tags for the member it leaves by: `s_vlan` Some(s) puts an
/// 802.1ad S-tag s (TPID 0x88a8) outermost; `vlan` Some(v) an 802.1Q tag v (inside the S-tag
/// if there is one); neither sends it untagged. The priority bits it came with are kept.
/// Whatever tags the frame arrived with are its member's encapsulation (ethernet-input set
/// `meta.l3_off` past them: 14, 18 or 22) and are replaced; what lies beyond is payload. Sets
/// `meta.l3_off` for the new tags. False when the buffer has no headroom for them.
#[inline(always)]
pub fn retag(b: &mut PktBuf, s_vlan: Option<u16>, vlan: Option<u16>) -> bool {
    let l3 = b.meta().l3_off as usize;
    if s_vlan.is_some() || l3 > 18 {
        return retag_qinq(b, l3, s_vlan, vlan);
    }
    match (l3, vlan) {
        (18, Some(v)) => {
            let d = b.data_mut();
            let tci = u16::from_be_bytes([d[14], d[15]]) & 0xf000 | v;
            // The tag it came with may be an 802.1ad S-tag (an S-tag's own member).
            d[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
            d[14..16].copy_from_slice(&tci.to_be_bytes());
        }
        (14, None) => {}
        (14, Some(v)) => {
            if !b.push_front(4) {
                return false;
            }
            let d = b.data_mut();
            d.copy_within(4..16, 0);
            d[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
            d[14..16].copy_from_slice(&v.to_be_bytes());
            b.meta_mut().l3_off = 18;
        }
        (18, None) => {
            b.data_mut().copy_within(0..12, 4);
            b.pull_front(4);
            b.meta_mut().l3_off = 14;
        }
        // Other offsets are not made by ethernet-input.
        _ => return false,
    }
    true
}

/// [`retag`]'s general case: any of 0, 1 or 2 tags in, any out.
#[cold]
fn retag_qinq(b: &mut PktBuf, l3: usize, s_vlan: Option<u16>, vlan: Option<u16>) -> bool {
    if !matches!(l3, 14 | 18 | 22) {
        return false;
    }
    let have = l3 - 14;
    let want = 4 * (usize::from(s_vlan.is_some()) + usize::from(vlan.is_some()));
    let pcp = if have > 0 {
        u16::from(b.data()[14] & 0xe0) << 8
    } else {
        0
    };
    if want > have {
        let grow = want - have;
        if !b.push_front(grow) {
            return false;
        }
        b.data_mut().copy_within(grow..grow + 12, 0);
    } else if want < have {
        let shrink = have - want;
        b.data_mut().copy_within(0..12, shrink);
        b.pull_front(shrink);
    }
    let d = b.data_mut();
    let mut at = 12;
    for (tpid, v) in [(0x88a8u16, s_vlan), (0x8100, vlan)] {
        if let Some(v) = v {
            d[at..at + 2].copy_from_slice(&tpid.to_be_bytes());
            d[at + 2..at + 4].copy_from_slice(&(pcp | v).to_be_bytes());
            at += 4;
        }
    }
    b.meta_mut().l3_off = 14 + want as u16;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::{BufCache, Pool};

    fn frame(c: &mut BufCache, bytes: &[u8], l3: u16) -> PktBuf {
        let mut b = c.alloc().unwrap();
        assert!(b.fill(bytes));
        b.meta_mut().l3_off = l3;
        b
    }

    #[test]
    fn tags_are_pushed_popped_and_translated_keeping_the_priority() {
        let mut c = BufCache::new(Pool::new(8));
        let macs: Vec<u8> = (1..=12).collect();
        let mut untagged = macs.clone();
        untagged.extend_from_slice(&[0x08, 0x00, 0xaa, 0xbb]);
        let mut tagged = macs.clone();
        tagged.extend_from_slice(&[0x81, 0x00, 0xa0, 0x64, 0x08, 0x00, 0xaa, 0xbb]);

        let mut b = frame(&mut c, &untagged, 14);
        assert!(retag(&mut b, None, Some(100)));
        let mut want = macs.clone();
        want.extend_from_slice(&[0x81, 0x00, 0x00, 0x64, 0x08, 0x00, 0xaa, 0xbb]);
        assert_eq!((b.data(), b.meta().l3_off), (&want[..], 18));
        assert!(retag(&mut b, None, None));
        assert_eq!((b.data(), b.meta().l3_off), (&untagged[..], 14));

        // Translated: VLAN 100 to 200, PCP 5 kept.
        let mut b = frame(&mut c, &tagged, 18);
        assert!(retag(&mut b, None, Some(200)));
        assert_eq!(&b.data()[12..16], &[0x81, 0x00, 0xa0, 0xc8]);
        assert!(retag(&mut b, None, Some(200)));
        assert_eq!(&b.data()[12..16], &[0x81, 0x00, 0xa0, 0xc8]);
    }

    #[test]
    fn reserved_group_addresses_are_the_802_1d_block() {
        assert!(reserved_group(&[0x01, 0x80, 0xc2, 0, 0, 0]));
        assert!(reserved_group(&[0x01, 0x80, 0xc2, 0, 0, 0x0e]));
        assert!(!reserved_group(&[0x01, 0x80, 0xc2, 0, 0, 0x10]));
        assert!(!reserved_group(&[0xff; 6]));
        assert!(!reserved_group(&[0x01, 0x00, 0x5e, 0, 0, 1]));
    }
}
