//! Lookups sixteen at a time: the same walk as [`LpmTable::lookup`](super::LpmTable::lookup)
//! done by AVX-512 gathers, one lane per address, for CPUs that have AVX-512 F and VPOPCNTDQ
//! (Intel from Ice Lake, AMD from Zen 4). IPv4 reads the addresses in place; IPv6 copies each
//! group into 32-bit words and gathers a node's position as one byte of them, so its direct
//! stage must end on a byte (the production 24 bits do). The portable batch stays for every
//! other CPU.
//!
//! Reads the table's direct stage and arena (nothing else); writes only `out`.
//!
//! Why. On a CPU whose last-level cache holds rte_lpm's 64 MiB tbl24 the scalar batch is bound by
//! its instructions (about 45 per lookup: the bit extraction, the bitmap step, the lane list),
//! not by memory. Here one step of sixteen lookups is four gathers (the run-start bitmap's two
//! halves, the run counts, the entry) and about twenty vector operations, and a gather's sixteen
//! loads are all in flight together. Four vectors (64 addresses) are walked side by side so that
//! one vector's gathers overlap the next one's arithmetic.
//!
//! Every index is 32 bits, counted in 32-bit halves of the arena, and clamped to the arena
//! before it is used: a lane can never read outside the table, whatever an entry holds. The
//! table takes this path only when its arena has fewer than 2^31 halves (see
//! [`usable`](usable)); the direct index is the key's top `direct_bits` bits, always inside the
//! direct stage.

use std::arch::x86_64::*;
use std::sync::atomic::{AtomicU32, AtomicU64};

use super::{COUNTS, STRIDE};
use crate::key::Key;

/// Addresses walked together: four vectors of sixteen.
const GROUP: usize = 64;
const LANES: usize = 16;
const VECS: usize = GROUP / LANES;

/// Whether this CPU has what the vector walk uses (checked once; the answer is cached by std).
pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vpopcntdq")
}

/// Whether a table of this shape can take the vector walk: its arena's halves must be
/// addressable by a non-negative 32-bit gather index.
pub(super) fn usable(arena_words: usize) -> bool {
    arena_words.saturating_mul(2) <= i32::MAX as usize && available()
}

/// What the walk reads of a table.
pub(super) struct View<'a> {
    pub direct: &'a [AtomicU32],
    pub arena: &'a [AtomicU64],
    pub skew: usize,
    pub direct_bits: u32,
}

/// Looks up every key into `out` (at least as long). The caller has checked [`usable`], and for
/// IPv6 that the direct stage ends on a byte (every node position is then one byte of the key).
pub(super) fn lookup_batch<K: Key>(v: &View<'_>, keys: &[K], out: &mut [u32]) {
    assert!(out.len() >= keys.len());
    assert!(usable(v.arena.len()) && (8..=24).contains(&v.direct_bits));
    assert_eq!(v.direct.len(), 1 << v.direct_bits);
    if let Some(k4) = K::as_u32s(keys) {
        return batch::<1>(v, k4, out);
    }
    assert!(K::BITS == 128 && v.direct_bits.is_multiple_of(8));
    // IPv6: each address as four 32-bit words, most significant first, a group at a time.
    for (ks, os) in keys.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
        let mut words = [0u32; GROUP * 4];
        for (w, k) in words.chunks_exact_mut(4).zip(ks) {
            for (i, x) in w.iter_mut().enumerate() {
                *x = k.word(i as u32);
            }
        }
        batch::<4>(v, &words[..ks.len() * 4], os);
    }
}

/// The walk over addresses of `W` words each (1: IPv4, 4: IPv6), a group at a time.
fn batch<const W: usize>(v: &View<'_>, words: &[u32], out: &mut [u32]) {
    let n = words.len() / W;
    let full = n / GROUP * GROUP;
    for at in (0..full).step_by(GROUP) {
        let o: &mut [u32; GROUP] = (&mut out[at..at + GROUP]).try_into().expect("a group");
        // SAFETY: `usable` (checked by the caller) says this CPU has AVX-512 F and VPOPCNTDQ,
        // the only features `walk` is compiled for; the words hold a whole group.
        unsafe { walk::<VECS, W>(v, &words[at * W..(at + GROUP) * W], o) };
    }
    let rest = n - full;
    if rest > 0 {
        // The tail walks as few vectors as hold it, padded with address 0 (a valid key; its
        // answers are dropped): a forwarding vector of a few packets costs one vector, not four.
        let mut k = [0u32; GROUP * 4];
        let mut o = [0u32; GROUP];
        k[..rest * W].copy_from_slice(&words[full * W..]);
        let k = &k[..GROUP * W];
        // SAFETY: as above.
        unsafe {
            match rest.div_ceil(LANES) {
                1 => walk::<1, W>(v, k, &mut o),
                2 => walk::<2, W>(v, k, &mut o),
                3 => walk::<3, W>(v, k, &mut o),
                _ => walk::<VECS, W>(v, k, &mut o),
            }
        }
        out[full..n].copy_from_slice(&o[..rest]);
    }
}

/// The walk of the first `V` vectors of a group: the direct entries, then rounds of one step for
/// every lane still on a node (a lane's mask bit), every vector per round. `words` holds the
/// group's addresses, `W` words each, most significant first.
///
/// # Safety
/// The CPU must have AVX-512 F and VPOPCNTDQ; `words` must hold `GROUP * W` words.
#[target_feature(enable = "avx512f,avx512vpopcntdq")]
unsafe fn walk<const V: usize, const W: usize>(
    v: &View<'_>,
    words: &[u32],
    out: &mut [u32; GROUP],
) {
    assert_eq!(words.len(), GROUP * W);
    let direct = v.direct.as_ptr() as *const i32;
    let halves = v.arena.as_ptr() as *const i32;
    let one = _mm512_set1_epi32(1);
    let ones = _mm512_set1_epi32(-1);
    let byte = _mm512_set1_epi32(0xff);
    // The last half of the arena: every arena index is clamped to it.
    let last = _mm512_set1_epi32((v.arena.len() * 2 - 1) as i32);
    // Half index of a node's word 0 is 16 * line + 2 * skew.
    let skew2 = _mm512_set1_epi32(2 * v.skew as i32);
    let c31 = _mm512_set1_epi32(31);
    let c63 = _mm512_set1_epi32(63);
    let db = v.direct_bits;

    // IPv4: each vector's sixteen addresses. IPv6: where each lane's address starts in `words`.
    let mut k = [_mm512_setzero_si512(); V];
    let mut e = [_mm512_setzero_si512(); V];
    let mut m = [0u16; V];
    let shift = _mm512_set1_epi32(32 - db as i32);
    let lane_words = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60);
    for j in 0..V {
        k[j] = if W == 1 {
            // SAFETY: `words` holds GROUP u32s, so the 16 at 16 * j are inside it (unaligned).
            unsafe { _mm512_loadu_si512(words.as_ptr().add(LANES * j) as *const _) }
        } else {
            _mm512_add_epi32(lane_words, _mm512_set1_epi32((64 * j) as i32))
        };
        let idx = _mm512_srlv_epi32(word_of::<W>(words, k[j], 0), shift);
        // SAFETY: each index is the key's top `db` bits, below 2^db = direct.len() (asserted by
        // the caller); AtomicU32 has u32's layout. The direct entries are atomics that the
        // writer stores to while we read: each gathered element is an aligned 4-byte load, which
        // x86-64 performs single-copy atomically, as the scalar path's relaxed loads do; and the
        // loads of the node below depend on the entry's value (an address dependency), which
        // orders them after it as the scalar path's acquire load does.
        e[j] = unsafe { _mm512_i32gather_epi32::<4>(idx, direct) };
        m[j] = _mm512_test_epi32_mask(e[j], one);
    }
    // A walk is at most as deep as the key has strides below the direct stage.
    let mut off = db;
    while off < 32 * W as u32 && m.iter().any(|&x| x != 0) {
        let offv = _mm512_set1_epi32(off as i32);
        // IPv6 positions are whole bytes (the caller checked that the direct stage ends on one):
        // byte off / 8 of the address, inside word off / 32.
        let byte_shift = _mm512_set1_epi32(24 - (off % 32) as i32);
        for j in 0..V {
            if m[j] == 0 {
                continue;
            }
            // Position in the node: bits off .. off+8 of the key (zero past its end).
            let p = if W == 1 {
                _mm512_srli_epi32::<{ 32 - STRIDE }>(_mm512_sllv_epi32(k[j], offv))
            } else {
                _mm512_and_si512(
                    _mm512_srlv_epi32(word_of::<W>(words, k[j], off / 32), byte_shift),
                    byte,
                )
            };
            let base =
                _mm512_add_epi32(_mm512_slli_epi32::<4>(_mm512_srli_epi32::<3>(e[j])), skew2);
            // No guessed-line prefetch here (the portable batch has one): tried in 00f3598, it
            // gained XR-6 3M 3-38% but cost Internet 300k 10-30% (four alternated pairs).
            let w2 = _mm512_slli_epi32::<1>(_mm512_srli_epi32::<6>(p));
            let lo_at = _mm512_min_epu32(_mm512_add_epi32(base, w2), last);
            let hi_at = _mm512_min_epu32(_mm512_add_epi32(lo_at, one), last);
            let counts_at = _mm512_min_epu32(
                _mm512_add_epi32(base, _mm512_set1_epi32(2 * COUNTS as i32)),
                last,
            );
            let z = _mm512_setzero_si512();
            // SAFETY: every index is clamped to the arena's last half, and non-negative (the
            // arena has fewer than 2^31 halves: `usable`); AtomicU64 has u64's layout, two
            // 32-bit halves each. Nodes below a direct entry are written before the release store
            // that published it and are never written again while reachable.
            let (lo, hi, counts) = unsafe {
                (
                    _mm512_mask_i32gather_epi32::<4>(z, m[j], lo_at, halves),
                    _mm512_mask_i32gather_epi32::<4>(z, m[j], hi_at, halves),
                    _mm512_mask_i32gather_epi32::<4>(z, m[j], counts_at, halves),
                )
            };
            // Runs starting at or before p within its bitmap word: bits 0..=b of the 64-bit word,
            // b = p mod 64, as the low half's bits 0..=min(b, 31) plus, for b >= 32, the high
            // half's bits 0..=b-32 (a variable shift by 32 or more gives 0).
            let b = _mm512_and_si512(p, c63);
            let lo_mask = _mm512_srlv_epi32(ones, _mm512_sub_epi32(c31, _mm512_min_epu32(b, c31)));
            let hi_mask = _mm512_srlv_epi32(ones, _mm512_sub_epi32(c63, b));
            let runs = _mm512_add_epi32(
                _mm512_popcnt_epi32(_mm512_and_si512(lo, lo_mask)),
                _mm512_popcnt_epi32(_mm512_and_si512(hi, hi_mask)),
            );
            // Runs before the bitmap word: byte w of the counts.
            let before =
                _mm512_and_si512(_mm512_srlv_epi32(counts, _mm512_slli_epi32::<2>(w2)), byte);
            let entry_at = _mm512_add_epi32(
                _mm512_add_epi32(base, _mm512_set1_epi32(2 * COUNTS as i32)),
                _mm512_add_epi32(before, runs),
            );
            let entry_at = _mm512_min_epu32(entry_at, last);
            // SAFETY: as for the gathers above.
            e[j] = unsafe { _mm512_mask_i32gather_epi32::<4>(e[j], m[j], entry_at, halves) };
            m[j] &= _mm512_test_epi32_mask(e[j], one);
        }
        off += STRIDE;
    }
    for j in 0..V {
        let nh = _mm512_srli_epi32::<1>(e[j]);
        // SAFETY: `out` holds GROUP u32s; the 16 at 16 * j are inside it (unaligned store).
        unsafe { _mm512_storeu_si512(out.as_mut_ptr().add(LANES * j) as *mut _, nh) };
    }
}

/// Word `i` (most significant first) of every lane's address: for IPv4 (`W` = 1) the lanes' keys
/// themselves; for IPv6 `k` holds where each lane's address starts in `words`.
#[target_feature(enable = "avx512f")]
#[inline]
fn word_of<const W: usize>(words: &[u32], k: __m512i, i: u32) -> __m512i {
    if W == 1 {
        return k;
    }
    // Lane starts are below 64 * VECS and i < W, so every index is below GROUP * W: inside
    // `words` (the walk asserted its length).
    debug_assert!(i < W as u32 && words.len() == GROUP * W);
    let at = _mm512_min_epu32(
        _mm512_add_epi32(k, _mm512_set1_epi32(i as i32)),
        _mm512_set1_epi32((words.len() - 1) as i32),
    );
    // SAFETY: every index is clamped to the slice's last word; a gather of u32s from a live
    // slice.
    unsafe { _mm512_i32gather_epi32::<4>(at, words.as_ptr() as *const i32) }
}
