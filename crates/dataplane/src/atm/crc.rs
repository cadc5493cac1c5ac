//! The AAL5 CRC-32 a cell at a time, by carry-less multiplication (PCLMULQDQ) where the CPU has
//! it, by `packet::atm`'s tables where it does not.
//!
//! The state of a PDU in progress is a 128-bit polynomial congruent (mod P, the CRC's
//! polynomial) to everything read so far, with the register's initial ones folded in: reading a
//! 48-byte cell payload as three 128-bit chunks A, B, C (big-endian, the first byte's top bit the
//! highest power) makes the state S * x^384 + A * x^256 + B * x^128 + C, which three folds (two
//! carry-less multiplies each, by x^192 and x^128 mod P) bring back to 128 bits. Nothing is
//! reduced to 32 bits until the PDU ends ([`residue`]): six multiplies a cell, against 48 table
//! lookups. A cell of another VC does not depend on this one, so the CPU overlaps them.
//!
//! [`residue`] gives the CRC register after the bytes read, as `packet::atm::crc32_update(!0,
//! ..)` does: the residue constant for a whole, undamaged PDU. To write a PDU's CRC, its field is
//! read as zeros and the register then moved back 32 bits ([`crc_of_sealed`]).

use packet::atm::CELL_PAYLOAD;

/// P(x), with its x^32 term.
const P: u64 = 0x1_04C1_1DB7;

/// x^n mod P, for n >= 0.
const fn x_pow_mod(n: u32) -> u64 {
    let mut c: u64 = 1;
    let mut i = 0;
    while i < n {
        c <<= 1;
        if c & (1 << 32) != 0 {
            c ^= P;
        }
        i += 1;
    }
    c
}

/// a * b mod P, bit by bit (for the constants).
const fn mul_mod_slow(a: u64, b: u64) -> u64 {
    let mut r: u64 = 0;
    let mut a = a;
    let mut i = 0;
    while i < 32 {
        if b >> i & 1 == 1 {
            r ^= a;
        }
        a <<= 1;
        if a & (1 << 32) != 0 {
            a ^= P;
        }
        i += 1;
    }
    r
}

/// floor(x^64 / P): Barrett's constant.
const fn mu() -> u64 {
    // Long division of x^64 by P: the quotient has degree 32.
    let mut rem: u128 = 1 << 64;
    let mut q: u64 = 0;
    let mut d = 64;
    while d >= 32 {
        if rem >> d & 1 == 1 {
            rem ^= (P as u128) << (d - 32);
            q |= 1 << (d - 32);
        }
        d -= 1;
    }
    q
}

/// x^-32 mod P: x^-1 is P >> 1 (x * (P >> 1) = P + 1), raised to the 32nd.
const fn x_inv_32() -> u64 {
    let inv = P >> 1;
    let mut r = 1;
    let mut i = 0;
    while i < 32 {
        r = mul_mod_slow(r, inv);
        i += 1;
    }
    r
}

const K192: u64 = x_pow_mod(192);
const K128: u64 = x_pow_mod(128);
const K96: u64 = x_pow_mod(96);
const K64: u64 = x_pow_mod(64);
const MU: u64 = mu();
const X_INV_32: u64 = x_inv_32();

/// A PDU's CRC in progress (see the module's comment).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Crc(u128);

/// The CRC engine this CPU runs.
#[derive(Clone, Copy, Debug)]
pub struct CrcEngine {
    clmul: bool,
}

impl Default for CrcEngine {
    fn default() -> Self {
        Self::detect()
    }
}

impl CrcEngine {
    /// Carry-less multiplication where the CPU has it.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        let clmul = std::arch::is_x86_feature_detected!("pclmulqdq");
        #[cfg(not(target_arch = "x86_64"))]
        let clmul = false;
        CrcEngine { clmul }
    }

    /// The table-driven engine (for comparison and tests).
    pub fn tables() -> Self {
        CrcEngine { clmul: false }
    }

    pub fn uses_clmul(&self) -> bool {
        self.clmul
    }

    /// The state of a PDU with nothing read.
    #[inline(always)]
    pub fn start(&self) -> Crc {
        if self.clmul {
            Crc(INIT_STATE)
        } else {
            Crc(0xFFFF_FFFF)
        }
    }

    /// Reads one cell payload.
    #[inline(always)]
    pub fn cell(&self, c: Crc, p: &[u8]) -> Crc {
        debug_assert_eq!(p.len(), CELL_PAYLOAD);
        #[cfg(target_arch = "x86_64")]
        if self.clmul {
            // SAFETY: `clmul` is set only when the CPU has PCLMULQDQ (checked at run time in
            // `detect`), which is all `clmul::fold_cell` asks for.
            return Crc(unsafe { clmul::fold_cell(c.0, p) });
        }
        Crc(packet::atm::crc32_update(c.0 as u32, p) as u128)
    }

    /// The CRC register after everything read (the residue constant for a whole PDU).
    #[inline(always)]
    pub fn residue(&self, c: Crc) -> u32 {
        #[cfg(target_arch = "x86_64")]
        if self.clmul {
            // SAFETY: as in `cell`.
            return unsafe { clmul::residue(c.0) };
        }
        c.0 as u32
    }

    /// The CRC to write into a PDU whose every cell was read with the CRC field as zeros.
    #[inline(always)]
    pub fn crc_of_sealed(&self, c: Crc) -> u32 {
        #[cfg(target_arch = "x86_64")]
        if self.clmul {
            // SAFETY: as in `cell`.
            return unsafe { !clmul::mul_mod(clmul::residue(c.0), X_INV_32 as u32) };
        }
        // The tables read the zeros too: move the register back by x^-32, bit by bit.
        !(mul_mod_slow(c.0 as u32 as u64, X_INV_32) as u32)
    }
}

/// The clmul engine's start: the register's initial ones, which the CRC XORs into the first 32
/// bits of the message, as a state. A state S becomes S * x^128 + A for the first chunk A, whose
/// top 32 bits are x^96..x^127: S * x^128 = ones * x^96, so S = ones * x^-32 (mod P).
const INIT_STATE: u128 = mul_mod_slow(0xFFFF_FFFF, X_INV_32) as u128;

/// The carry-less multiplies. Every function here needs PCLMULQDQ (and SSE2, which x86_64
/// always has): they are `unsafe` for that alone, and only [`CrcEngine`] calls them, after
/// `detect` found the instruction. They touch no memory but their arguments.
#[cfg(target_arch = "x86_64")]
mod clmul {
    use std::arch::x86_64::{
        _mm_clmulepi64_si128, _mm_cvtsi128_si64, _mm_set_epi64x, _mm_srli_si128,
    };

    /// a * b without carries (a 127-bit product).
    #[inline]
    #[target_feature(enable = "pclmulqdq")]
    unsafe fn mul(a: u64, b: u64) -> u128 {
        // The intrinsics are safe to call here: this function enables the feature they need.
        let r = _mm_clmulepi64_si128(
            _mm_set_epi64x(0, a as i64),
            _mm_set_epi64x(0, b as i64),
            0x00,
        );
        let lo = _mm_cvtsi128_si64(r) as u64;
        let hi = _mm_cvtsi128_si64(_mm_srli_si128(r, 8)) as u64;
        (hi as u128) << 64 | lo as u128
    }

    /// S * x^128 reduced to at most 96 bits (congruent mod P).
    #[inline]
    #[target_feature(enable = "pclmulqdq")]
    unsafe fn fold(s: u128) -> u128 {
        // SAFETY: same contract as ours.
        unsafe { mul((s >> 64) as u64, super::K192) ^ mul(s as u64, super::K128) }
    }

    /// The state after one 48-byte cell payload.
    #[target_feature(enable = "pclmulqdq")]
    pub(super) unsafe fn fold_cell(s: u128, p: &[u8]) -> u128 {
        let chunk = |i: usize| u128::from_be_bytes(p[i * 16..i * 16 + 16].try_into().expect("16"));
        // SAFETY: same contract as ours.
        unsafe {
            let t = fold(s) ^ chunk(0);
            let t = fold(t) ^ chunk(1);
            fold(t) ^ chunk(2)
        }
    }

    /// (S * x^32) mod P: the CRC register.
    #[target_feature(enable = "pclmulqdq")]
    pub(super) unsafe fn residue(s: u128) -> u32 {
        // SAFETY: same contract as ours.
        unsafe {
            // S * x^32 = S_hi * x^96 + S_lo * x^32: at most 96 bits.
            let t = mul((s >> 64) as u64, super::K96) ^ ((s as u64 as u128) << 32);
            // The top 32 of those down by x^64 mod P: at most 64 bits.
            let u = (mul((t >> 64) as u64, super::K64) ^ (t as u64 as u128)) as u64;
            barrett(u)
        }
    }

    /// u mod P for a 64-bit u (Barrett: q = floor(floor(u / x^32) * mu / x^32)).
    #[inline]
    #[target_feature(enable = "pclmulqdq")]
    unsafe fn barrett(u: u64) -> u32 {
        // SAFETY: same contract as ours.
        unsafe {
            let q = (mul(u >> 32, super::MU) >> 32) as u64;
            (u as u128 ^ mul(q, super::P)) as u32
        }
    }

    /// a * b mod P.
    #[target_feature(enable = "pclmulqdq")]
    pub(super) unsafe fn mul_mod(a: u32, b: u32) -> u32 {
        // SAFETY: same contract as ours.
        unsafe { barrett(mul(a as u64, b as u64) as u64) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::atm::{self as wire, AAL5_RESIDUE};
    use proptest::prelude::*;

    #[test]
    fn the_constants_are_what_they_claim() {
        // x^-32 * x^32 = 1.
        assert_eq!(mul_mod_slow(X_INV_32, x_pow_mod(32)), 1);
        // Barrett's mu: P * mu's top terms give x^64.
        assert_eq!(MU >> 32, 1);
    }

    fn check(engine: CrcEngine, pdu: &[u8]) {
        let mut c = engine.start();
        for p in pdu.chunks(48) {
            c = engine.cell(c, p);
        }
        assert_eq!(engine.residue(c), wire::crc32_update(!0, pdu));
        // Sealing: the field read as zeros gives the CRC the tables write.
        let n = pdu.len();
        let mut zeroed = pdu.to_vec();
        zeroed[n - 4..].fill(0);
        let mut c = engine.start();
        for p in zeroed.chunks(48) {
            c = engine.cell(c, p);
        }
        assert_eq!(engine.crc_of_sealed(c), wire::aal5_crc(&pdu[..n - 4]));
    }

    proptest! {
        #[test]
        fn both_engines_match_the_tables(cells in 1usize..8, seed in any::<u64>()) {
            let mut pdu: Vec<u8> = (0..cells * 48)
                .map(|i| (seed.rotate_left(i as u32 % 64) as u8) ^ i as u8)
                .collect();
            check(CrcEngine::detect(), &pdu);
            check(CrcEngine::tables(), &pdu);
            // A sealed PDU leaves the residue in both.
            let sdu = pdu.len() - 8;
            wire::seal_pdu(&mut pdu, sdu, 0);
            for e in [CrcEngine::detect(), CrcEngine::tables()] {
                let mut c = e.start();
                for p in pdu.chunks(48) {
                    c = e.cell(c, p);
                }
                prop_assert_eq!(e.residue(c), AAL5_RESIDUE);
            }
        }
    }
}
