//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Partial sums are carried as `u32` and complemented only once at the end, so that
//! pseudo-headers, headers and payloads can be summed separately and combined. A partial sum is
//! only meaningful modulo 0xFFFF (0 and 0xFFFF are the same value); compare results after
//! [`fold`], never the raw `u32`.

/// One's-complement partial sum of `data` as big-endian 16-bit words; an odd trailing byte is
/// padded with a zero byte on the right, as RFC 1071 says.
///
/// The result is at most 0xFFFF. When combining the sums of several pieces, every piece but the
/// last must have even length.
#[inline]
pub fn sum(data: &[u8]) -> u32 {
    // Summing 32-bit words is equivalent modulo 0xFFFF (2^16 = 1 there) and halves the additions.
    let mut acc: u64 = 0;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        acc += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut pairs = rest.chunks_exact(2);
    for p in &mut pairs {
        acc += u64::from(u16::from_be_bytes([p[0], p[1]]));
    }
    if let [last] = pairs.remainder() {
        acc += u64::from(*last) << 8;
    }
    // Fold to 16 bits with end-around carry, which keeps the value modulo 0xFFFF and lets
    // callers add a few thousand partial sums with a plain `+`.
    acc = (acc & 0xFFFF_FFFF) + (acc >> 32);
    acc = (acc & 0xFFFF) + (acc >> 16);
    acc = (acc & 0xFFFF) + (acc >> 16);
    acc = (acc & 0xFFFF) + (acc >> 16);
    acc as u32
}

/// Folds the carries of a partial sum and complements it: the value that goes in a checksum field.
///
/// A buffer whose checksum field is correct sums (checksum included) to a value that folds to 0.
#[inline]
pub fn fold(sum: u32) -> u16 {
    let s = (sum & 0xFFFF) + (sum >> 16);
    let s = (s & 0xFFFF) + (s >> 16);
    !(s as u16)
}

/// Adds two partial sums with end-around carry, so the result is still a valid partial sum.
#[inline]
pub fn combine(a: u32, b: u32) -> u32 {
    let (s, carry) = a.overflowing_add(b);
    s + u32::from(carry)
}

/// Partial sum of the IPv4 pseudo-header used by TCP and UDP (RFC 768, RFC 793).
#[inline]
pub fn pseudo_v4(src: [u8; 4], dst: [u8; 4], proto: u8, len: u32) -> u32 {
    u32::from(u16::from_be_bytes([src[0], src[1]]))
        + u32::from(u16::from_be_bytes([src[2], src[3]]))
        + u32::from(u16::from_be_bytes([dst[0], dst[1]]))
        + u32::from(u16::from_be_bytes([dst[2], dst[3]]))
        + u32::from(proto)
        + (len >> 16)
        + (len & 0xFFFF)
}

/// Partial sum of the IPv6 pseudo-header (RFC 8200 section 8.1): addresses, upper-layer length as
/// 32 bits, next header.
#[inline]
pub fn pseudo_v6(src: &[u8; 16], dst: &[u8; 16], next_header: u8, len: u32) -> u32 {
    sum(src) + sum(dst) + (len >> 16) + (len & 0xFFFF) + u32::from(next_header)
}

/// Incremental update of a checksum when one 16-bit word changes, RFC 1624 eqn. 3:
/// `HC' = ~(~HC + ~m + m')`.
///
/// Eqn. 3 rather than eqn. 2 because it gives the same result as recomputing from scratch, including
/// when the new sum is 0xFFFF (RFC 1624 section 3). The one input where it cannot match is data
/// that is all zero after the change, where recomputation gives 0xFFFF and this gives 0x0000; an
/// IPv4 header never gets there (its version nibble is 4).
#[inline]
pub fn update16(old_checksum: u16, old_word: u16, new_word: u16) -> u16 {
    fold(u32::from(!old_checksum) + u32::from(!old_word) + u32::from(new_word))
}

/// Whether a 20-byte IPv4 header (no options) has a correct checksum: its ten words fold to 0xFFFF.
/// Only the first 20 bytes are read; a shorter slice is never correct.
#[inline]
pub fn ipv4_header_ok(hdr: &[u8]) -> bool {
    match hdr.get(..20) {
        Some(h) => fold(sum(h)) == 0,
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Word-at-a-time reference, written the plain RFC 1071 way, to check the 32-bit shortcut.
    fn reference_checksum(data: &[u8]) -> u16 {
        let mut s: u64 = 0;
        for (i, b) in data.iter().enumerate() {
            s += if i % 2 == 0 {
                u64::from(*b) << 8
            } else {
                u64::from(*b)
            };
        }
        while s >> 16 != 0 {
            s = (s & 0xFFFF) + (s >> 16);
        }
        !(s as u16)
    }

    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2 after folding.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data)), !0xddf2);
    }

    #[test]
    fn known_ipv4_header() {
        // The header from the Wikipedia article on the IPv4 header checksum; checksum 0xb861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert!(ipv4_header_ok(&h));
        assert_eq!(fold(sum(&h)), 0);
        h[10] = 0;
        h[11] = 0;
        assert_eq!(fold(sum(&h)), 0xb861);
        assert!(!ipv4_header_ok(&h));
        assert!(!ipv4_header_ok(&h[..19]));
    }

    #[test]
    fn sum_matches_reference_for_all_lengths() {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        for len in 0..200 {
            let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            assert_eq!(fold(sum(&data)), reference_checksum(&data), "len {len}");
            assert!(sum(&data) <= 0xFFFF);
        }
        // Large buffers exercise the carry reduction.
        for fill in [0xFF, 0x80, 0x01] {
            let big = vec![fill; 300_001];
            assert_eq!(fold(sum(&big)), reference_checksum(&big));
            assert!(sum(&big) <= 0xFFFF);
        }
    }

    #[test]
    fn odd_byte_is_padded_on_the_right() {
        assert_eq!(sum(&[0xAB]), 0xAB00);
        assert_eq!(sum(&[0x12, 0x34, 0xAB]), 0x1234 + 0xAB00);
    }

    #[test]
    fn combine_equals_sum_of_concatenation() {
        let mut rng = XorShift(42);
        for _ in 0..1000 {
            let a: Vec<u8> = (0..(rng.next() % 64) * 2)
                .map(|_| rng.next() as u8)
                .collect();
            let b: Vec<u8> = (0..rng.next() % 64).map(|_| rng.next() as u8).collect();
            let whole: Vec<u8> = a.iter().chain(b.iter()).copied().collect();
            assert_eq!(fold(combine(sum(&a), sum(&b))), fold(sum(&whole)));
        }
        assert_eq!(fold(combine(u32::MAX, u32::MAX)), fold(sum(&[0xFF; 16])));
    }

    #[test]
    fn pseudo_headers_match_their_bytes() {
        let src = [192, 0, 2, 1];
        let dst = [198, 51, 100, 7];
        let bytes = [192, 0, 2, 1, 198, 51, 100, 7, 0, 17, 0x01, 0x02];
        assert_eq!(fold(pseudo_v4(src, dst, 17, 0x0102)), fold(sum(&bytes)));

        let mut s6 = [0u8; 16];
        let mut d6 = [0u8; 16];
        s6[0] = 0x20;
        s6[1] = 0x01;
        s6[15] = 1;
        d6[0] = 0xfe;
        d6[1] = 0x80;
        d6[15] = 2;
        let mut b6 = Vec::new();
        b6.extend_from_slice(&s6);
        b6.extend_from_slice(&d6);
        b6.extend_from_slice(&0x0001_0203u32.to_be_bytes());
        b6.extend_from_slice(&[0, 0, 0, 58]);
        assert_eq!(fold(pseudo_v6(&s6, &d6, 58, 0x0001_0203)), fold(sum(&b6)));
    }

    fn header_checksum(h: &[u8; 20]) -> u16 {
        let mut c = *h;
        c[10] = 0;
        c[11] = 0;
        fold(sum(&c))
    }

    #[test]
    fn update16_matches_recomputation_on_random_headers() {
        let mut rng = XorShift(0xDEAD_BEEF_CAFE_F00D);
        for _ in 0..20_000 {
            let mut h = [0u8; 20];
            for b in h.iter_mut() {
                *b = rng.next() as u8;
            }
            h[0] = 0x45;
            let c = header_checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            assert!(ipv4_header_ok(&h));

            // Any word but the checksum itself.
            let mut w = (rng.next() % 9) as usize;
            if w >= 5 {
                w += 1;
            }
            let old = u16::from_be_bytes([h[2 * w], h[2 * w + 1]]);
            let new = match rng.next() % 4 {
                0 => 0x0000,
                1 => 0xFFFF,
                2 => old.wrapping_sub(0x0100), // a TTL decrement
                _ => rng.next() as u16,
            };
            h[2 * w..2 * w + 2].copy_from_slice(&new.to_be_bytes());
            let incremental = update16(c, old, new);
            assert_eq!(
                incremental,
                header_checksum(&h),
                "word {w}: {old:#06x} -> {new:#06x}"
            );
            h[10..12].copy_from_slice(&incremental.to_be_bytes());
            assert!(ipv4_header_ok(&h));
        }
    }

    #[test]
    fn rfc1624_section3_corner_case() {
        // The other words sum to 0xCD7A; m = 0x5555 becomes m' = 0x3285, so the new sum is 0xFFFF
        // and the right checksum is 0x0000. Eqn. 2 would give 0xFFFF here.
        let hc = fold(0xCD7A + 0x5555);
        assert_eq!(hc, 0xDD2F);
        assert_eq!(update16(hc, 0x5555, 0x3285), 0x0000);
        assert_eq!(update16(hc, 0x5555, 0x3285), fold(0xCD7A + 0x3285));

        // The same case on a real header: pick the source address words so the sum is 0xFFFF.
        let mut h = [
            0x45, 0x00, 0x00, 0x54, 0x12, 0x34, 0x00, 0x00, 0x40, 0x01, 0x00, 0x00, 0x0a, 0x00,
            0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
        ];
        let rest = sum(&h);
        let folded = !fold(rest);
        let need = 0xFFFF - folded; // makes the whole header sum 0xFFFF
        let old = 0x0000;
        let c = header_checksum(&h);
        h[16..18].copy_from_slice(&need.to_be_bytes());
        let c2 = update16(c, old, need);
        assert_eq!(c2, header_checksum(&h));
        assert_eq!(c2, 0x0000);
        h[10..12].copy_from_slice(&c2.to_be_bytes());
        assert!(ipv4_header_ok(&h));
    }

    #[test]
    fn update16_all_zero_limit_is_as_documented() {
        // Data that becomes all zero: recomputation says 0xFFFF, eqn. 3 says 0x0000.
        assert_eq!(fold(sum(&[0, 0, 0, 0])), 0xFFFF);
        assert_eq!(update16(fold(0x0800), 0x0800, 0x0000), 0x0000);
    }
}
