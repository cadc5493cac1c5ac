//! Address keys: the LPM is generic over the key width so IPv4 (u32) and IPv6 (u128) share one
//! engine and one set of tests.

use std::fmt::Debug;
use std::hash::Hash;

/// An address used as an LPM key. Bit 0 is the most significant bit (network order).
pub trait Key: Copy + Eq + Ord + Hash + Debug + Send + Sync + 'static {
    /// Width in bits (32 or 128).
    const BITS: u32;
    const ZERO: Self;

    /// `n` (1..=24) bits starting at bit `off` (`off < BITS`), zero-padded past the end of the key.
    fn bits(self, off: u32, n: u32) -> u32;

    /// The key with every bit from `len` on cleared.
    fn masked(self, len: u8) -> Self;

    /// The key with bits `off .. off+n` replaced by `v` (used by generators and tests).
    fn with_bits(self, off: u32, n: u32, v: u32) -> Self;

    /// Bits `32 * i .. 32 * i + 32` (`i < BITS / 32`), most significant first.
    fn word(self, i: u32) -> u32;

    /// The keys as IPv4 addresses, if they are (the vector lookup reads them in place).
    fn as_u32s(keys: &[Self]) -> Option<&[u32]> {
        let _ = keys;
        None
    }
}

impl Key for u32 {
    const BITS: u32 = 32;
    const ZERO: Self = 0;

    fn as_u32s(keys: &[Self]) -> Option<&[u32]> {
        Some(keys)
    }

    #[inline(always)]
    fn word(self, i: u32) -> u32 {
        debug_assert_eq!(i, 0);
        self
    }

    #[inline(always)]
    fn bits(self, off: u32, n: u32) -> u32 {
        // Widen so that bits past the end read as zero instead of overflowing the shift.
        (((self as u64) << 32 << off) >> (64 - n)) as u32
    }

    #[inline]
    fn masked(self, len: u8) -> Self {
        if len == 0 {
            0
        } else {
            self & (u32::MAX << (32 - len as u32))
        }
    }

    fn with_bits(self, off: u32, n: u32, v: u32) -> Self {
        let shift = 32 - off - n;
        let mask = (((1u64 << n) - 1) as u32) << shift;
        (self & !mask) | ((v << shift) & mask)
    }
}

impl Key for u128 {
    const BITS: u32 = 128;
    const ZERO: Self = 0;

    #[inline(always)]
    fn word(self, i: u32) -> u32 {
        (self >> (96 - 32 * i)) as u32
    }

    #[inline(always)]
    fn bits(self, off: u32, n: u32) -> u32 {
        ((self << off) >> (128 - n)) as u32
    }

    #[inline]
    fn masked(self, len: u8) -> Self {
        if len == 0 {
            0
        } else {
            self & (u128::MAX << (128 - len as u32))
        }
    }

    fn with_bits(self, off: u32, n: u32, v: u32) -> Self {
        let shift = 128 - off - n;
        let mask = ((1u128 << n) - 1) << shift;
        (self & !mask) | (((v as u128) << shift) & mask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_pad_with_zero_past_the_end() {
        let k: u32 = 0xC0A8_0107; // 192.168.1.7
        assert_eq!(k.bits(0, 8), 0xC0);
        assert_eq!(k.bits(0, 18), 0xC0A8_0107 >> 14);
        assert_eq!(k.bits(30, 6), 0b11_0000);
        let k6: u128 = 0x2001_0db8 << 96 | 0xff;
        assert_eq!(k6.bits(0, 16), 0x2001);
        assert_eq!(k6.bits(124, 6), 0b11_1100);
    }

    #[test]
    fn masked_and_with_bits() {
        assert_eq!(0xC0A8_01FFu32.masked(24), 0xC0A8_0100);
        assert_eq!(0xFFFF_FFFFu32.masked(0), 0);
        assert_eq!(0u32.with_bits(8, 8, 0xAB), 0x00AB_0000);
        assert_eq!(u128::MAX.masked(64), u128::MAX << 64);
        assert_eq!(0u128.with_bits(120, 8, 0x5A), 0x5A);
    }
}
