//! The test-frame signature: 16 bytes at the end of the IP packet that let the analyzer tell
//! which stream a frame belongs to, where it falls in that stream's sequence, when it left the
//! generator, and whether it arrived intact.
//!
//! ```text
//!  0      1       2       4          8          12         16
//!  +------+-------+-------+----------+----------+----------+
//!  | 'L'  | trial | check | stream   | sequence | tx time  |   little-endian
//!  +------+-------+-------+----------+----------+----------+
//! ```
//!
//! - `trial` (low 8 bits of the trial number) tells a late frame of an earlier trial from a frame
//!   of this one, so a trial never counts what a previous one sent.
//! - `check` is a keyed 16-bit hash of the other fields and the IP length: a frame whose
//!   signature or length changed on the way is counted as corrupted, not as a frame of a stream.
//! - `tx time` is nanoseconds on the tester's clock, modulo 2^32: latencies up to 4.29 s are
//!   measured exactly; the time wraps, the difference does not.
//!
//! The signature sits at the *end* of the IP packet (found through the IP length), so it survives
//! whatever the device under test does to the L2 header (VLAN push or pop, MAC rewrite) and any
//! Ethernet padding. 16 bytes fit a 64-byte IPv4/UDP frame and a 78-byte IPv6 frame without an L4
//! header, the minimum sizes of the seed reports.

pub const LEN: usize = 16;
const MAGIC: u8 = b'L';

/// What the analyzer makes of a received frame's signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A frame of this trial, intact.
    Ok(Signature),
    /// Not a test frame (no IP, too short, no magic): router chatter, ARP, ICMP errors.
    Foreign,
    /// A test frame from an earlier trial.
    Stale,
    /// A test frame whose signature does not check: the stream id is the one it claims, which may
    /// itself be the corrupted part.
    Corrupted { stream: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    pub stream: u32,
    pub seq: u32,
    pub tx_ns: u32,
}

/// The check value: two rounds of the splitmix64 finalizer, whose every input bit reaches every
/// output bit, keyed by the trial. Not cryptographic, but any change to the fields changes the
/// result with probability 1 - 2^-16.
#[inline(always)]
pub fn check(trial: u8, stream: u32, seq: u32, tx_ns: u32, ip_len: u16) -> u16 {
    let h = mix(((stream as u64) << 32 | seq as u64) ^ 0x9e37_79b9_7f4a_7c15);
    let h = mix(h ^ ((tx_ns as u64) << 24 | (ip_len as u64) << 8 | trial as u64));
    (h >> 48) as u16
}

#[inline(always)]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Writes every field but the time and the check (the generator's first pass).
#[inline(always)]
pub fn write_ids(sig: &mut [u8], trial: u8, stream: u32, seq: u32) {
    sig[0] = MAGIC;
    sig[1] = trial;
    sig[4..8].copy_from_slice(&stream.to_le_bytes());
    sig[8..12].copy_from_slice(&seq.to_le_bytes());
}

/// Writes the time and the check (the generator's second pass, just before the burst leaves).
/// Returns the two 16-bit words added to the frame, for an L4 checksum fix-up.
#[inline(always)]
pub fn write_time(sig: &mut [u8], tx_ns: u32, ip_len: u16) -> u16 {
    let trial = sig[1];
    let stream = u32::from_le_bytes(sig[4..8].try_into().unwrap());
    let seq = u32::from_le_bytes(sig[8..12].try_into().unwrap());
    let c = check(trial, stream, seq, tx_ns, ip_len);
    sig[2..4].copy_from_slice(&c.to_le_bytes());
    sig[12..16].copy_from_slice(&tx_ns.to_le_bytes());
    c
}

/// Reads a signature. `sig` is the 16 bytes before the end of the IP packet.
#[inline(always)]
pub fn read(sig: &[u8], trial: u8, ip_len: u16) -> Parsed {
    if sig.len() < LEN || sig[0] != MAGIC {
        return Parsed::Foreign;
    }
    let stream = u32::from_le_bytes(sig[4..8].try_into().unwrap());
    let seq = u32::from_le_bytes(sig[8..12].try_into().unwrap());
    let tx_ns = u32::from_le_bytes(sig[12..16].try_into().unwrap());
    let c = u16::from_le_bytes(sig[2..4].try_into().unwrap());
    if check(sig[1], stream, seq, tx_ns, ip_len) != c {
        return Parsed::Corrupted { stream };
    }
    if sig[1] != trial {
        return Parsed::Stale;
    }
    Parsed::Ok(Signature { stream, seq, tx_ns })
}

/// The IP packet at `l3` (version `v`) is an ICMP or ICMPv6 error message (destination
/// unreachable, time exceeded, parameter problem, ...): the device's own answer, which quotes the
/// packet that caused it, a test frame's signature and all. Never a test frame (those are UDP
/// or IPv4 protocol 253 / IPv6 next header 59).
#[inline(always)]
pub fn is_icmp_error(frame: &[u8], l3: usize, v: u8) -> bool {
    if v == 4 {
        let ihl = (frame.get(l3).copied().unwrap_or(0) & 0x0f) as usize * 4;
        frame.get(l3 + 9) == Some(&1) && matches!(frame.get(l3 + ihl), Some(3 | 4 | 5 | 11 | 12))
    } else {
        frame.get(l3 + 6) == Some(&58) && frame.get(l3 + 40).is_some_and(|&t| t < 128)
    }
}

/// Where the IP packet of an Ethernet frame ends, through up to two VLAN tags. `(l3 offset, end,
/// version)`, or None for a frame that carries no whole IP packet long enough for a signature.
/// A GTP-U G-PDU (IPv4, UDP to port 2152, message type 255) is stepped into: the test packet is
/// the one the tunnel carries, as a GGSN's downlink sends it. So is an MPLS label stack: the IP
/// packet under it, or the Ethernet frame a pseudowire carries (with or without the control
/// word).
#[inline(always)]
pub fn locate(frame: &[u8]) -> Option<(usize, usize, u8)> {
    let mut off = 12;
    let mut ty = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
    let mut tags = 0;
    while (ty == 0x8100 || ty == 0x88a8) && tags < 2 {
        off += 4;
        ty = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
        tags += 1;
    }
    let l3 = off + 2;
    let (end, v) = match ty {
        0x0800 => {
            let tl = u16::from_be_bytes([*frame.get(l3 + 2)?, *frame.get(l3 + 3)?]) as usize;
            (l3 + tl, 4)
        }
        0x86dd => {
            let pl = u16::from_be_bytes([*frame.get(l3 + 4)?, *frame.get(l3 + 5)?]) as usize;
            (l3 + 40 + pl, 6)
        }
        0x8847 => return labelled(frame, l3),
        _ => return None,
    };
    let min_hdr = if v == 4 { 20 } else { 40 };
    if end > frame.len() || end < l3 + min_hdr + LEN {
        return None;
    }
    if v == 4 && frame[l3 + 9] == 17 {
        let udp = l3 + (frame[l3] & 0x0f) as usize * 4;
        if frame.get(udp + 2..udp + 4) == Some(&packet::gtp::GTPU_PORT.to_be_bytes()[..]) {
            return tunnelled(frame, udp + 8, end);
        }
    }
    Some((l3, end, v))
}

/// What is under the label stack at `at`: an IP packet that ends the frame (or ends before
/// the padding of a minimum-size frame), else a pseudowire's Ethernet frame, after a control
/// word if its first nibble says there may be one, else right after the stack.
#[cold]
fn labelled(frame: &[u8], mut at: usize) -> Option<(usize, usize, u8)> {
    for _ in 0..8 {
        let bottom = frame.get(at + 2)? & 1 != 0;
        at += 4;
        if bottom {
            let first = *frame.get(at)?;
            let ends = |end: usize| end == frame.len() || (frame.len() <= 60 && end < frame.len());
            let ip = match first >> 4 {
                4 if first == 0x45 && frame.len() >= at + 20 => {
                    let tl = u16::from_be_bytes([frame[at + 2], frame[at + 3]]) as usize;
                    (tl >= 20 + LEN && ends(at + tl)).then_some((at, at + tl, 4))
                }
                6 if frame.len() >= at + 40 => {
                    let pl = u16::from_be_bytes([frame[at + 4], frame[at + 5]]) as usize;
                    (pl >= LEN && ends(at + 40 + pl)).then_some((at, at + 40 + pl, 6))
                }
                _ => None,
            };
            if ip.is_some() {
                return ip;
            }
            let inner = |start: usize| {
                let (l3, end, v) = locate(frame.get(start..)?)?;
                Some((start + l3, start + end, v))
            };
            return match first >> 4 {
                0 => inner(at + 4).or_else(|| inner(at)),
                _ => inner(at),
            };
        }
    }
    None
}

/// The IP packet inside the G-PDU at `gtp` (ending at `end`, the outer packet's end). None for
/// other GTP-U messages and for a G-PDU that does not hold a whole IP packet ending with it.
#[cold]
fn tunnelled(frame: &[u8], gtp: usize, end: usize) -> Option<(usize, usize, u8)> {
    let b = frame.get(gtp..end)?;
    let h = packet::gtp::parse_header(b).ok()?;
    if h.msg_type != packet::gtp::msg::G_PDU || h.end() != b.len() {
        return None;
    }
    let inner = &b[h.header_len..];
    let l3 = gtp + h.header_len;
    let (len, v, min_hdr) = match inner.first()? >> 4 {
        4 => (
            u16::from_be_bytes([*inner.get(2)?, *inner.get(3)?]) as usize,
            4,
            20,
        ),
        6 => (
            40 + u16::from_be_bytes([*inner.get(4)?, *inner.get(5)?]) as usize,
            6,
            40,
        ),
        _ => return None,
    };
    (len == inner.len() && len >= min_hdr + LEN).then_some((l3, end, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(trial: u8, stream: u32, seq: u32, t: u32) -> [u8; 16] {
        let mut s = [0u8; 16];
        write_ids(&mut s, trial, stream, seq);
        write_time(&mut s, t, 46);
        s
    }

    #[test]
    fn round_trip() {
        let s = signed(7, 123_456, 0xdead_beef, 4_000_000_000);
        assert_eq!(
            read(&s, 7, 46),
            Parsed::Ok(Signature {
                stream: 123_456,
                seq: 0xdead_beef,
                tx_ns: 4_000_000_000
            })
        );
    }

    #[test]
    fn earlier_trial_is_stale_and_other_bytes_are_foreign() {
        let s = signed(6, 1, 2, 3);
        assert_eq!(read(&s, 7, 46), Parsed::Stale);
        assert_eq!(read(&[0u8; 16], 7, 46), Parsed::Foreign);
        assert_eq!(read(&s[..15], 6, 46), Parsed::Foreign);
    }

    #[test]
    fn any_single_bit_flip_after_the_magic_is_caught() {
        let s = signed(1, 42, 1000, 5000);
        let mut caught = 0;
        for bit in 8..128 {
            let mut c = s;
            c[bit / 8] ^= 1 << (bit % 8);
            match read(&c, 1, 46) {
                Parsed::Corrupted { .. } => caught += 1,
                other => panic!("bit {bit}: {other:?}"),
            }
        }
        assert_eq!(caught, 120);
        // A changed length is a corruption too (the DUT truncated or padded the packet).
        assert!(matches!(read(&s, 1, 50), Parsed::Corrupted { .. }));
    }

    #[test]
    fn locate_walks_vlan_tags_and_ignores_padding() {
        // IPv4, 46-byte packet, in a 60-byte frame with one tag, padded to 64 by a NIC.
        let mut f = vec![0u8; 64];
        f[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        f[16..18].copy_from_slice(&0x0800u16.to_be_bytes());
        f[18] = 0x45;
        f[20..22].copy_from_slice(&42u16.to_be_bytes());
        assert_eq!(locate(&f), Some((18, 60, 4)));
        // Too short an IP packet for a signature.
        f[20..22].copy_from_slice(&30u16.to_be_bytes());
        assert_eq!(locate(&f), None);
        // Longer than the frame.
        f[20..22].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(locate(&f), None);
        // ARP.
        f[16..18].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(locate(&f), None);
        assert_eq!(locate(&f[..10]), None);
    }

    #[test]
    fn locate_steps_under_labels_and_into_pseudowires() {
        // An IPv4 packet of 46 bytes under two labels.
        let ip = |f: &mut Vec<u8>| {
            let at = f.len();
            f.resize(at + 46, 0);
            f[at] = 0x45;
            f[at + 2..at + 4].copy_from_slice(&46u16.to_be_bytes());
        };
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&0x8847u16.to_be_bytes());
        f.extend_from_slice(&[0, 0x10, 0, 64, 0, 0x11, 1, 64]);
        let labels = f.clone();
        ip(&mut f);
        assert_eq!(locate(&f), Some((22, 68, 4)));
        // A pseudowire with a control word: the customer's frame (its MAC starting with a 0
        // nibble), tagged, under it.
        let mut pw = labels.clone();
        pw.extend_from_slice(&[0; 4]);
        let eth = pw.len();
        pw.extend_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x81, 0, 0, 100, 8, 0]);
        ip(&mut pw);
        assert_eq!(locate(&pw), Some((eth + 18, eth + 64, 4)));
        // The same without the control word.
        let mut raw = labels.clone();
        raw.extend_from_slice(&pw[eth..]);
        assert_eq!(locate(&raw), Some((40, 86, 4)));
        // A stack that never ends, and one cut short.
        let mut deep = vec![0u8; 12];
        deep.extend_from_slice(&0x8847u16.to_be_bytes());
        deep.extend(std::iter::repeat_n([0, 0x10, 0, 64], 9).flatten());
        ip(&mut deep);
        assert_eq!(locate(&deep), None);
        assert_eq!(locate(&labels[..20]), None);
    }

    /// An IPv4 packet of `inner` bytes in a G-PDU, with `ext` extension header bytes.
    fn gpdu(inner: usize, ext: &[u8]) -> Vec<u8> {
        let outer = 20 + 8 + 8 + ext.len() + inner;
        let mut f = vec![0u8; 14 + outer];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[16..18].copy_from_slice(&(outer as u16).to_be_bytes());
        f[23] = 17;
        f[36..38].copy_from_slice(&2152u16.to_be_bytes());
        let g = 42;
        packet::gtp::gpdu_header(&mut f[g..g + 8], 7, (ext.len() + inner) as u16);
        if !ext.is_empty() {
            f[g] |= 0x04; // E
        }
        f[g + 8..g + 8 + ext.len()].copy_from_slice(ext);
        let i = g + 8 + ext.len();
        f[i] = 0x45;
        f[i + 2..i + 4].copy_from_slice(&(inner as u16).to_be_bytes());
        f
    }

    #[test]
    fn locate_steps_into_a_gpdu() {
        let f = gpdu(46, &[]);
        assert_eq!(locate(&f), Some((50, f.len(), 4)));
        // Through a PDCP extension header: the 4 optional bytes, then one 4-byte header.
        let f = gpdu(46, &[0, 0, 0, 0xc0, 1, 0, 0, 0]);
        assert_eq!(locate(&f), Some((58, f.len(), 4)));
        // An inner length that disagrees with the tunnel's: not a test packet.
        let mut f = gpdu(46, &[]);
        f[52..54].copy_from_slice(&40u16.to_be_bytes());
        assert_eq!(locate(&f), None);
        // GTP-U signalling (an Echo Request) is not stepped into, nor taken for a test packet.
        let mut f = gpdu(46, &[]);
        f[43] = packet::gtp::msg::ECHO_REQUEST;
        assert_eq!(locate(&f), None);
        // UDP to another port is an ordinary packet.
        let mut f = gpdu(46, &[]);
        f[36..38].copy_from_slice(&5000u16.to_be_bytes());
        assert_eq!(locate(&f), Some((14, f.len(), 4)));
    }
}
