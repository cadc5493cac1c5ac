//! From a frame to a [`Key`]: Ethernet, up to two VLAN tags (the outer one is the key's VLAN),
//! IPv4 or IPv6 (skipping IPv6 extension headers), and the L4 ports and TCP flags of the first
//! fragment. A truncated or malformed frame yields the fields it has and zeros for the rest; it
//! never panics (the fuzz target `classify_key` holds it to that).

use crate::rule::{Dim, Frag, Key};

/// Reads the key of an Ethernet frame.
#[inline]
pub fn extract(f: &[u8]) -> Key {
    let mut k = Key::default();
    let l3 = l2(&mut k, f);
    l3_fields(&mut k, f, l3);
    k
}

/// Reads the key of an Ethernet frame whose IP packet starts at `l3_off`: the frame's own when
/// `l3_off` is where its Ethernet header ends (then as [`extract`]), or a packet the frame's own
/// IP packet carries when `l3_off` lies past that (a G-PDU the GGSN decapsulated in place: the
/// key is the UE's packet, its EtherType from the IP version, with the frame's MACs and VLAN).
/// A frame that is not IP (labelled, ARP) reads as [`extract`] whatever `l3_off` says.
#[inline]
pub fn extract_at(f: &[u8], l3_off: usize) -> Key {
    let mut k = Key::default();
    extract_at_into(&mut k, f, l3_off);
    k
}

/// [`extract_at`] written into `k` where it lies (a batch's slot). Why: a key built in a
/// temporary by scalar stores and then copied is read back by wide loads, which cannot be fed
/// from those stores (a store-forwarding stall each time: 14% of a worker's samples with QoS
/// on); written in place, the classifier reads it long after the stores have retired.
#[inline]
pub fn extract_at_into(k: &mut Key, f: &[u8], l3_off: usize) {
    *k = Key::default();
    let l3 = l2(k, f);
    let ip = matches!(k.get(Dim::EtherType), 0x0800 | 0x86dd);
    if !ip || l3_off <= l3 || l3_off >= f.len() {
        l3_fields(k, f, l3);
        return;
    }
    match f[l3_off] >> 4 {
        4 => {
            k.set(Dim::EtherType, 0x0800);
            ipv4(k, &f[l3_off..]);
        }
        6 => {
            k.set(Dim::EtherType, 0x86dd);
            ipv6(k, &f[l3_off..]);
        }
        // Not an IP packet where one was said to be: only the frame's L2 fields.
        _ => k.set(Dim::EtherType, 0),
    }
}

/// The L2 fields of a frame into `k` (all zero), and where its EtherType says the next header
/// starts (0 for a frame too short to have one).
#[inline(always)]
fn l2(k: &mut Key, f: &[u8]) -> usize {
    if f.len() < 14 {
        return 0;
    }
    k.set(Dim::EthDstHi, u16be(f, 0) as u32);
    k.set(Dim::EthDstLo, u32be(f, 2));
    k.set(Dim::EthSrcHi, u16be(f, 6) as u32);
    k.set(Dim::EthSrcLo, u32be(f, 8));
    let mut off = 12;
    let mut ethertype = u16be(f, off);
    let mut tagged = false;
    while matches!(ethertype, 0x8100 | 0x88a8) && f.len() >= off + 6 {
        if !tagged {
            let tci = u16be(f, off + 2);
            k.set(Dim::Vlan, (tci & 0x0fff) as u32);
            k.set(Dim::Pcp, (tci >> 13) as u32);
            tagged = true;
        }
        off += 4;
        ethertype = u16be(f, off);
    }
    k.set(Dim::EtherType, ethertype as u32);
    off + 2
}

/// The fields after the L2 header at `l3` (0: none), by the key's EtherType.
#[inline(always)]
fn l3_fields(k: &mut Key, f: &[u8], l3: usize) {
    if l3 == 0 {
        return;
    }
    match k.get(Dim::EtherType) {
        0x0800 => ipv4(k, &f[l3..]),
        0x86dd => ipv6(k, &f[l3..]),
        // MPLS unicast and multicast: the top entry's traffic class (a transit LSR's QoS).
        0x8847 | 0x8848 if f.len() >= l3 + 4 => k.set(Dim::Exp, (f[l3 + 2] >> 1 & 7) as u32),
        _ => {}
    }
}

fn ipv4(k: &mut Key, h: &[u8]) {
    if h.len() < 20 {
        return;
    }
    k.set(Dim::Dscp, (h[1] >> 2) as u32);
    k.set(Dim::Proto, h[9] as u32);
    k.set(Dim::Src0, u32be(h, 12));
    k.set(Dim::Dst0, u32be(h, 16));
    let frag = u16be(h, 6);
    let fr = if frag & 0x1fff != 0 {
        Frag::LATER
    } else if frag & 0x2000 != 0 {
        Frag::FIRST
    } else {
        Frag::NONE
    };
    k.set(Dim::Frag, fr);
    let ihl = (h[0] & 0x0f) as usize * 4;
    if fr != Frag::LATER && ihl >= 20 && h.len() > ihl {
        l4(k, h[9], &h[ihl..]);
    }
}

fn ipv6(k: &mut Key, h: &[u8]) {
    if h.len() < 40 {
        return;
    }
    let tc = (u16be(h, 0) >> 4) as u8;
    k.set(Dim::Dscp, (tc >> 2) as u32);
    k.set_src_v6(u128::from_be_bytes(h[8..24].try_into().unwrap()));
    k.set_dst_v6(u128::from_be_bytes(h[24..40].try_into().unwrap()));
    let mut next = h[6];
    let mut off = 40;
    let mut fr = Frag::NONE;
    // Hop-by-hop, routing, fragment and destination options; at most eight of them.
    for _ in 0..8 {
        match next {
            0 | 43 | 60 if h.len() >= off + 8 => {
                next = h[off];
                off += (h[off + 1] as usize + 1) * 8;
            }
            44 if h.len() >= off + 8 => {
                let fo = u16be(h, off + 2);
                fr = if fo & 0xfff8 != 0 {
                    Frag::LATER
                } else if fo & 1 != 0 {
                    Frag::FIRST
                } else {
                    fr
                };
                next = h[off];
                off += 8;
            }
            _ => break,
        }
    }
    k.set(Dim::Proto, next as u32);
    k.set(Dim::Frag, fr);
    if fr != Frag::LATER && h.len() > off {
        l4(k, next, &h[off..]);
    }
}

#[inline(always)]
fn l4(k: &mut Key, proto: u8, l4: &[u8]) {
    if matches!(proto, 6 | 17 | 132) && l4.len() >= 4 {
        k.set(Dim::SrcPort, u16be(l4, 0) as u32);
        k.set(Dim::DstPort, u16be(l4, 2) as u32);
    }
    if proto == 6 && l4.len() >= 14 {
        k.set(Dim::TcpFlags, l4[13] as u32);
    }
}

#[inline(always)]
fn u16be(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}

#[inline(always)]
fn u32be(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::{ETHERTYPE_IPV4, ETHERTYPE_IPV6};

    fn eth(ethertype: u16, vlan: Option<u16>) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
        if let Some(tci) = vlan {
            f.extend_from_slice(&0x8100u16.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f
    }

    #[test]
    fn ipv4_udp_in_a_vlan() {
        let mut f = eth(0x0800, Some(0xa064)); // PCP 5, VLAN 100
        f.extend_from_slice(&[0x45, 0xb8, 0, 28, 0, 0, 0x20, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&[10, 0, 0, 1, 192, 0, 2, 7]);
        f.extend_from_slice(&[0x04, 0x00, 0x13, 0x88, 0, 8, 0, 0]);
        let k = extract(&f);
        assert_eq!(k.get(Dim::EtherType), ETHERTYPE_IPV4);
        assert_eq!((k.get(Dim::Vlan), k.get(Dim::Pcp)), (100, 5));
        assert_eq!(k.get(Dim::Dscp), 46);
        assert_eq!(k.get(Dim::Src0), 0x0a00_0001);
        assert_eq!(k.get(Dim::Dst0), 0xc000_0207);
        assert_eq!((k.get(Dim::SrcPort), k.get(Dim::DstPort)), (1024, 5000));
        assert_eq!(k.get(Dim::Frag), Frag::FIRST);
        assert_eq!(k.get(Dim::EthSrcLo), 2);
    }

    #[test]
    fn later_ipv4_fragments_have_no_ports() {
        let mut f = eth(0x0800, None);
        f.extend_from_slice(&[0x45, 0, 0, 28, 0, 0, 0x00, 0x10, 64, 6, 0, 0]);
        f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        f.extend_from_slice(&[0x04, 0x00, 0x13, 0x88, 0, 8, 0, 0]);
        let k = extract(&f);
        assert_eq!(k.get(Dim::Frag), Frag::LATER);
        assert_eq!(k.get(Dim::DstPort), 0);
    }

    #[test]
    fn ipv6_tcp_after_a_hop_by_hop_header() {
        let mut f = eth(0x86dd, None);
        let mut h = vec![0x6b, 0x80, 0, 0, 0, 28, 0, 64];
        h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8].repeat(4));
        h.extend_from_slice(&[0xfe, 0x80, 0, 0].repeat(4));
        h.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]); // hop-by-hop, next = TCP
        h.extend_from_slice(&[0, 80, 0x1f, 0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0x12]);
        f.extend_from_slice(&h);
        let k = extract(&f);
        assert_eq!(k.get(Dim::EtherType), ETHERTYPE_IPV6);
        assert_eq!(k.get(Dim::Dscp), 0xb8 >> 2);
        assert_eq!(k.get(Dim::Proto), 6);
        assert_eq!((k.get(Dim::SrcPort), k.get(Dim::DstPort)), (80, 8080));
        assert_eq!(k.get(Dim::TcpFlags), 0x12);
        assert_eq!(k.get(Dim::Src0), 0x2001_0db8);
        assert_eq!(k.get(Dim::Dst3), 0xfe80_0000);
    }

    /// A G-PDU decapsulated in place: the key is the UE's packet at `l3_off` (IPv6 inside an
    /// IPv4 tunnel here), the MACs and VLAN the frame's; the frame's own L3 offset, or one that
    /// does not lie past it, reads as `extract`.
    #[test]
    fn a_tunnelled_packet_is_read_where_l3_off_says() {
        let mut f = eth(0x0800, Some(0x2064));
        f.extend_from_slice(&[0x45, 0, 0, 88, 0, 0, 0, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&[10, 1, 0, 9, 10, 1, 0, 1]);
        f.extend_from_slice(&[0x08, 0x68, 0x08, 0x68, 0, 68, 0, 0]);
        f.extend_from_slice(&[0x30, 255, 0, 60, 0, 0, 0, 1]);
        let inner = f.len();
        let mut h = vec![0x60, 0, 0, 0, 0, 20, 6, 64];
        h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8].repeat(4));
        h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb9].repeat(4));
        h.extend_from_slice(&[0x9c, 0x40, 0, 80, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0x02]);
        f.extend_from_slice(&h);
        let k = extract_at(&f, inner);
        assert_eq!(k.get(Dim::EtherType), ETHERTYPE_IPV6);
        assert_eq!((k.get(Dim::Proto), k.get(Dim::DstPort)), (6, 80));
        assert_eq!(
            (k.get(Dim::Src0), k.get(Dim::Dst3)),
            (0x2001_0db8, 0x2001_0db9)
        );
        assert_eq!(k.get(Dim::TcpFlags), 0x02);
        assert_eq!((k.get(Dim::Vlan), k.get(Dim::EthSrcLo)), (100, 2));
        let outer = extract(&f);
        assert_eq!((outer.get(Dim::Proto), outer.get(Dim::DstPort)), (17, 2152));
        for own in [0, 10, 18] {
            assert_eq!(extract_at(&f, own), outer, "l3_off {own}");
        }
        // Past the frame's end, or not IP: nothing is read there.
        assert_eq!(extract_at(&f, f.len()), outer);
        f[inner] = 0x00;
        let k = extract_at(&f, inner);
        assert_eq!((k.get(Dim::EtherType), k.get(Dim::Proto)), (0, 0));
    }

    #[test]
    fn every_truncation_is_safe() {
        let mut f = eth(0x86dd, Some(5));
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 16, 44, 64]);
        f.extend_from_slice(&[1; 32]);
        f.extend_from_slice(&[17, 0, 0, 1, 0, 0, 0, 1, 0, 53, 0, 53]);
        for n in 0..=f.len() {
            let _ = extract(&f[..n]);
            for at in 0..=n + 1 {
                let _ = extract_at(&f[..n], at);
            }
        }
        let k = extract(&f);
        assert_eq!(k.get(Dim::Proto), 17);
        assert_eq!(k.get(Dim::Frag), Frag::FIRST);
        assert_eq!(k.get(Dim::DstPort), 53);
    }
}
