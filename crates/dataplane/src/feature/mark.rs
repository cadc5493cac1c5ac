//! QoS re-marking of DSCP (IPv4 with an incremental checksum update, IPv6 traffic class) and 802.1p.
//!
//! These patch bytes in place on the fast path, on headers a forwarding node has already checked
//! (an IPv4 header of at least 20 bytes at `l3`, an IPv6 header of 40): they index the frame
//! directly and panic on a frame too short for the header, which would be a bug in the caller.
//! The ECN bits (RFC 3168) belong to the transport's congestion control, not to QoS, so re-marking
//! always keeps them. Only the low six bits of a DSCP and the low three of a PCP are used.

use packet::checksum;

/// The DSCP of the IPv4 header at `l3`.
#[inline]
pub fn dscp_v4(frame: &[u8], l3: usize) -> u8 {
    frame[l3 + 1] >> 2
}

/// Sets the DSCP of the IPv4 header at `l3` (incremental checksum update, RFC 1624; ECN bits kept).
#[inline]
pub fn set_dscp_v4(frame: &mut [u8], l3: usize, dscp: u8) {
    let h = &mut frame[l3..l3 + 12];
    let tos = (dscp & 0x3f) << 2 | h[1] & 0x03;
    // Unchanged is common (a class already marked right), and skipping it keeps the checksum
    // field byte-for-byte as it was.
    if tos == h[1] {
        return;
    }
    // The checksum covers 16-bit words; the TOS byte is the low half of the first one.
    let old = u16::from_be_bytes([h[0], h[1]]);
    h[1] = tos;
    let new = u16::from_be_bytes([h[0], h[1]]);
    let c = checksum::update16(u16::from_be_bytes([h[10], h[11]]), old, new);
    h[10..12].copy_from_slice(&c.to_be_bytes());
}

/// The DSCP in the traffic class of the IPv6 header at `l3`.
#[inline]
pub fn dscp_v6(frame: &[u8], l3: usize) -> u8 {
    // Version (4 bits), traffic class (8, of which DSCP is the top 6), flow label (20).
    (frame[l3] & 0x0f) << 2 | frame[l3 + 1] >> 6
}

/// Sets the DSCP in the IPv6 traffic class (ECN kept). IPv6 has no header checksum.
#[inline]
pub fn set_dscp_v6(frame: &mut [u8], l3: usize, dscp: u8) {
    let dscp = dscp & 0x3f;
    frame[l3] = frame[l3] & 0xf0 | dscp >> 2;
    frame[l3 + 1] = frame[l3 + 1] & 0x3f | (dscp & 0x03) << 6;
}

/// Whether the frame carries a tag at its outer EtherType: 802.1Q (0x8100), or the 802.1ad
/// service tag (0x88a8) of a Q-in-Q frame, whose TCI has the same layout and whose priority is
/// the one the next provider bridge reads.
#[inline]
fn tagged(frame: &[u8]) -> bool {
    frame.len() >= 18 && matches!(u16::from_be_bytes([frame[12], frame[13]]), 0x8100 | 0x88a8)
}

/// The PCP of the outer tag, if the frame has one.
#[inline]
pub fn pcp(frame: &[u8]) -> Option<u8> {
    tagged(frame).then(|| frame[14] >> 5)
}

/// Sets the PCP of the outer 802.1Q (or 802.1ad) tag if the frame has one (returns false when
/// untagged or too short for a tag). DEI and VID are kept.
#[inline]
pub fn set_pcp(frame: &mut [u8], pcp: u8) -> bool {
    if !tagged(frame) {
        return false;
    }
    frame[14] = frame[14] & 0x1f | (pcp & 0x07) << 5;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A 14-byte Ethernet header and a 20-byte IPv4 header with a correct checksum.
    fn v4_frame(tos: u8) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f.extend_from_slice(&[
            0x45, tos, 0x00, 0x54, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x01, 0x00, 0x00, 192, 0, 2, 1,
            198, 51, 100, 7,
        ]);
        let c = checksum::fold(checksum::sum(&f[14..34]));
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f
    }

    #[test]
    fn v4_every_dscp_keeps_checksum_and_ecn() {
        for ecn in 0..4 {
            let mut f = v4_frame(0xb8 | ecn);
            assert_eq!(dscp_v4(&f, 14), 46);
            for dscp in 0..64 {
                set_dscp_v4(&mut f, 14, dscp);
                assert_eq!(dscp_v4(&f, 14), dscp);
                assert_eq!(f[15] & 3, ecn);
                assert!(checksum::ipv4_header_ok(&f[14..]), "dscp {dscp} ecn {ecn}");
                // The same as a checksum computed afresh.
                let mut fresh = f.clone();
                fresh[24..26].fill(0);
                let c = checksum::fold(checksum::sum(&fresh[14..34]));
                assert_eq!(f[24..26], c.to_be_bytes());
            }
        }
    }

    #[test]
    fn v4_golden_bytes() {
        let mut f = v4_frame(0x01);
        let before = f.clone();
        set_dscp_v4(&mut f, 14, 46); // EF
        assert_eq!(f[15], 0xb9);
        // Only the TOS byte and the checksum change.
        for i in (0..f.len()).filter(|i| ![15, 24, 25].contains(i)) {
            assert_eq!(f[i], before[i], "byte {i}");
        }
        // Out-of-range values use their low six bits.
        set_dscp_v4(&mut f, 14, 0x40 | 10);
        assert_eq!(dscp_v4(&f, 14), 10);
        assert!(checksum::ipv4_header_ok(&f[14..]));
    }

    #[test]
    fn v4_unchanged_dscp_leaves_bytes_alone() {
        let mut f = v4_frame(0x2a);
        let before = f.clone();
        set_dscp_v4(&mut f, 14, 10);
        assert_eq!(f, before);
    }

    #[test]
    fn v6_dscp_keeps_version_ecn_and_flow_label() {
        // Version 6, traffic class 0xb9 (EF, ECN 01), flow label 0x12345.
        let mut h = [0u8; 40];
        h[..4].copy_from_slice(&0x6b91_2345u32.to_be_bytes());
        assert_eq!(dscp_v6(&h, 0), 46);
        for dscp in 0..64 {
            set_dscp_v6(&mut h, 0, dscp);
            let w = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
            assert_eq!(dscp_v6(&h, 0), dscp);
            assert_eq!(w >> 28, 6);
            assert_eq!(w >> 20 & 0xff, u32::from(dscp) << 2 | 1);
            assert_eq!(w & 0xf_ffff, 0x1_2345);
        }
        set_dscp_v6(&mut h, 0, 0);
        assert_eq!(h[..4], [0x60, 0x11, 0x23, 0x45]);
    }

    fn tagged_frame(tpid: u16, tci: u16) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&tpid.to_be_bytes());
        f[14..16].copy_from_slice(&tci.to_be_bytes());
        f[16..18].copy_from_slice(&0x0800u16.to_be_bytes());
        f
    }

    #[test]
    fn pcp_keeps_dei_and_vid() {
        for tpid in [0x8100, 0x88a8] {
            for dei in [0, 0x1000] {
                let mut f = tagged_frame(tpid, 0xa000 | dei | 0xabc);
                assert_eq!(pcp(&f), Some(5));
                for p in 0..8 {
                    assert!(set_pcp(&mut f, p));
                    let tci = u16::from_be_bytes([f[14], f[15]]);
                    assert_eq!(tci, u16::from(p) << 13 | dei | 0xabc);
                    assert_eq!(pcp(&f), Some(p));
                }
                assert!(set_pcp(&mut f, 8 | 3));
                assert_eq!(pcp(&f), Some(3));
                // The inner EtherType is untouched.
                assert_eq!(f[16..18], [0x08, 0x00]);
            }
        }
    }

    #[test]
    fn pcp_untagged_or_short_is_left_alone() {
        let mut f = v4_frame(0);
        let before = f.clone();
        assert!(!set_pcp(&mut f, 7));
        assert_eq!(pcp(&f), None);
        assert_eq!(f, before);
        let mut short = tagged_frame(0x8100, 0x0001);
        short.truncate(17);
        assert!(!set_pcp(&mut short, 7));
        assert_eq!(short[14], 0);
    }

    proptest! {
        #[test]
        fn v4_random_headers_stay_valid(
            hdr in prop::array::uniform20(any::<u8>()),
            options in prop::collection::vec(any::<u32>(), 0..10),
            dscps in prop::collection::vec(any::<u8>(), 1..8),
        ) {
            // A random header with options: version 4, the IHL it has, a correct checksum.
            let mut h = hdr.to_vec();
            for o in &options {
                h.extend_from_slice(&o.to_be_bytes());
            }
            h[0] = 0x40 | (5 + options.len() as u8);
            h[10..12].fill(0);
            let c = checksum::fold(checksum::sum(&h));
            h[10..12].copy_from_slice(&c.to_be_bytes());
            let ecn = h[1] & 3;
            let mut frame = vec![0xeeu8; 6];
            frame.extend_from_slice(&h);
            for d in dscps {
                set_dscp_v4(&mut frame, 6, d);
                prop_assert_eq!(dscp_v4(&frame, 6), d & 0x3f);
                prop_assert_eq!(frame[7] & 3, ecn);
                // The whole header (options included) still sums to zero.
                prop_assert_eq!(checksum::fold(checksum::sum(&frame[6..])), 0);
                if options.is_empty() {
                    prop_assert!(checksum::ipv4_header_ok(&frame[6..]));
                }
                // Nothing but the TOS byte and the checksum changed.
                for i in (0..h.len()).filter(|i| ![1, 10, 11].contains(i)) {
                    prop_assert_eq!(frame[6 + i], h[i]);
                }
            }
            prop_assert!(frame[..6].iter().all(|&b| b == 0xee));
        }

        #[test]
        fn v6_random_headers_keep_other_bits(
            first in any::<u32>(),
            rest in prop::array::uniform32(any::<u8>()),
            dscp in any::<u8>(),
        ) {
            let mut h = first.to_be_bytes().to_vec();
            h.extend_from_slice(&rest);
            set_dscp_v6(&mut h, 0, dscp);
            let w = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
            // Only bits 27..22 (the DSCP) may differ.
            prop_assert_eq!(w & !0x0fc0_0000, first & !0x0fc0_0000);
            prop_assert_eq!(dscp_v6(&h, 0), dscp & 0x3f);
            prop_assert_eq!(&h[4..], &rest[..]);
        }
    }
}
