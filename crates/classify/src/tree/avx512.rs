//! The tree walk sixteen keys at a time, by AVX-512 gathers, one lane per key, for CPUs that have
//! AVX-512 F (Intel from Skylake-SP, AMD from Zen 4). The leaves are still checked one key at a
//! time by [`Classifier`](super::Classifier); the portable walk stays for every other CPU.
//!
//! Reads the tree's nodes and the keys; writes only where each lane stopped (a leaf or a final
//! answer).
//!
//! Why. The portable walk costs about 35 instructions per key and level (the lane loop, the tag
//! checks, one 8-wide compare per node), so a 10,000-line ACL seven levels deep took 25-35 ns a
//! key on a CPU whose caches hold the whole tree: bound by instructions, not misses. Here one
//! level of sixteen keys is five gathers (the key's value in the node's dimension, three of the
//! node's thresholds found by binary search over its seven, the child) and about fifteen vector
//! operations. Four vectors (64 keys) are walked side by side so that one vector's gathers
//! overlap the next one's.
//!
//! Every node index is clamped to the last node and every dimension to the last one before it is
//! used, so a lane can never read outside the nodes or its key, whatever a reference holds.

use std::arch::x86_64::*;

use super::{Node, Ref, DIM_SHIFT, NODE_MASK, REF_NONE, TAG, TAG_DONE, TAG_LEAF};
use crate::rule::{Key, DIMS};

/// Keys walked together: four vectors of sixteen.
pub(super) const GROUP: usize = 64;
const LANES: usize = 16;
const VECS: usize = GROUP / LANES;
/// 32-bit words per node: 8 thresholds, then 8 children.
const NODE_WORDS: i32 = 16;

const _: () = assert!(std::mem::size_of::<Key>() == DIMS * 4 && DIMS > LANES && DIMS <= 2 * LANES);
const _: () = assert!(std::mem::size_of::<Node>() == NODE_WORDS as usize * 4);
// Node word indices (node << 4 plus 15 at most) must fit a non-negative 32-bit gather index.
const _: () = assert!((NODE_MASK as u64 + 1) * NODE_WORDS as u64 <= i32::MAX as u64);
// Inner-node references are exactly those below the first tagged value.
const _: () = assert!(TAG == 0xc000_0000 && super::TAG_NODE == 0);

/// Whether this CPU has what the vector walk uses (checked once; std caches the answer).
pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx512f")
}

/// A group's keys' state across the trees: lane `i` is key `i`.
pub(super) struct Lanes {
    /// The key's answer so far (the smallest rule index any tree gave it).
    pub best: [u32; GROUP],
    /// Where the last walk left the key: a leaf (bit `i` of `at_leaf`) or a final answer.
    pub refs: [Ref; GROUP],
    pub at_leaf: u64,
}

impl Lanes {
    pub fn new() -> Lanes {
        Lanes {
            best: [crate::NO_MATCH; GROUP],
            refs: [REF_NONE; GROUP],
            at_leaf: 0,
        }
    }
}

/// Walks the tree `(first, root)` (its first rule, its root) for each key of `keys` (at most
/// [`GROUP`]) whose answer so far is not before `first`, down to a reference that is not an inner
/// node (other keys take no part, and keep a final answer). Where that is a final answer, the
/// key's `best` becomes the smaller of the two; where it is a leaf, it is left in `refs` and
/// marked in `at_leaf` for [`finish_leaves`]. `nodes` must not be empty.
pub(super) fn walk(nodes: &[Node], keys: &[Key], tree: (u32, Ref), lanes: &mut Lanes) {
    assert!(keys.len() <= GROUP && !nodes.is_empty() && available());
    // SAFETY: `available` says this CPU has AVX-512 F, the only feature `walk_vectors` is
    // compiled for; the assertions above are the rest of what it needs.
    unsafe {
        lanes.at_leaf = match keys.len().div_ceil(LANES) {
            0 => 0,
            1 => walk_vectors::<1>(nodes, keys, tree, lanes),
            2 => walk_vectors::<2>(nodes, keys, tree, lanes),
            3 => walk_vectors::<3>(nodes, keys, tree, lanes),
            _ => walk_vectors::<VECS>(nodes, keys, tree, lanes),
        }
    }
}

/// The walk of the first `V` vectors: rounds of one level for every lane still on an inner node
/// (a lane's mask bit), every vector per round, until no lane is.
///
/// # Safety
/// The CPU must have AVX-512 F; `keys` must hold at most `V * 16` keys and `nodes` at least one
/// node.
#[target_feature(enable = "avx512f")]
unsafe fn walk_vectors<const V: usize>(
    nodes: &[Node],
    keys: &[Key],
    (first, root): (u32, Ref),
    lanes: &mut Lanes,
) -> u64 {
    assert!(keys.len() <= V * LANES && !nodes.is_empty());
    let Lanes { best, refs, .. } = lanes;
    let key_words = keys.as_ptr() as *const i32;
    let node_words = nodes.as_ptr() as *const i32;
    let last_node = _mm512_set1_epi32((nodes.len() - 1) as i32);
    let node_mask = _mm512_set1_epi32(NODE_MASK as i32);
    let last_dim = _mm512_set1_epi32(DIMS as i32 - 1);
    let first_tagged = _mm512_set1_epi32(0x4000_0000);
    let (one, two, four, eight) = (
        _mm512_set1_epi32(1),
        _mm512_set1_epi32(2),
        _mm512_set1_epi32(4),
        _mm512_set1_epi32(8),
    );
    let z = _mm512_setzero_si512();
    // Where each lane's key starts, in words.
    let lane_keys = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(DIMS as i32),
    );

    // Lanes whose answer comes before the tree's first rule stay out: a final "no match".
    let mut r = [_mm512_set1_epi32(REF_NONE as i32); V];
    let mut m = [0u16; V];
    let mut key_at = [z; V];
    for j in 0..V {
        // SAFETY: `best` holds GROUP u32s; the 16 at 16 * j (j < V <= 4) are inside it.
        let b = unsafe { _mm512_loadu_si512(best.as_ptr().add(LANES * j) as *const _) };
        let take =
            live_lanes(keys.len(), j) & _mm512_cmpge_epu32_mask(b, _mm512_set1_epi32(first as i32));
        r[j] = _mm512_mask_mov_epi32(r[j], take, _mm512_set1_epi32(root as i32));
        m[j] = take & _mm512_cmplt_epu32_mask(r[j], first_tagged);
        key_at[j] = _mm512_add_epi32(lane_keys, _mm512_set1_epi32((LANES * j * DIMS) as i32));
    }
    while m.iter().any(|&x| x != 0) {
        for j in 0..V {
            if m[j] == 0 {
                continue;
            }
            let dim = _mm512_min_epu32(_mm512_srli_epi32::<DIM_SHIFT>(r[j]), last_dim);
            let base = _mm512_slli_epi32::<4>(_mm512_min_epu32(
                _mm512_and_si512(r[j], node_mask),
                last_node,
            ));
            // SAFETY (all gathers here): only lanes in m[j] load (a masked-off element is never
            // accessed), and those are lanes of live keys: `key_at + dim` is inside that key
            // (dim clamped to DIMS - 1); `base + at` for at < 16 is inside the node at `base`,
            // clamped to the last node. Both slices are live for the walk.
            let v = unsafe {
                _mm512_mask_i32gather_epi32::<4>(
                    z,
                    m[j],
                    _mm512_add_epi32(key_at[j], dim),
                    key_words,
                )
            };
            // The child is the number of thresholds below v among the node's seven (the eighth is
            // u32::MAX): a binary search over them, as they ascend. Thresholds 1, 3 and 5 are
            // gathered beside the key's value (they depend only on the node), so a level is three
            // gathers deep, not five.
            let gather_at = |at: __m512i| unsafe {
                _mm512_mask_i32gather_epi32::<4>(z, m[j], _mm512_add_epi32(base, at), node_words)
            };
            let (t1, t3, t5) = (
                gather_at(one),
                gather_at(_mm512_set1_epi32(3)),
                gather_at(_mm512_set1_epi32(5)),
            );
            let upper = _mm512_cmpgt_epu32_mask(v, t3);
            let mut i = _mm512_maskz_mov_epi32(upper, four);
            let t = _mm512_mask_blend_epi32(upper, t1, t5);
            i = _mm512_mask_add_epi32(i, _mm512_cmpgt_epu32_mask(v, t), i, two);
            let t = gather_at(i);
            i = _mm512_mask_add_epi32(i, _mm512_cmpgt_epu32_mask(v, t), i, one);
            r[j] = unsafe {
                _mm512_mask_i32gather_epi32::<4>(
                    r[j],
                    m[j],
                    _mm512_add_epi32(base, _mm512_add_epi32(i, eight)),
                    node_words,
                )
            };
            m[j] &= _mm512_cmplt_epu32_mask(r[j], first_tagged);
        }
    }
    // A final answer is its payload, or NO_MATCH for REF_NONE (which is u32::MAX, as NO_MATCH is).
    let payload = _mm512_set1_epi32(!TAG as i32);
    let none = _mm512_set1_epi32(REF_NONE as i32);
    let mut at_leaf = 0u64;
    for j in 0..V {
        let live = live_lanes(keys.len(), j);
        let tag = _mm512_and_si512(r[j], _mm512_set1_epi32(TAG as i32));
        let done = live & _mm512_cmpeq_epi32_mask(tag, _mm512_set1_epi32(TAG_DONE as i32));
        let leaf = live & _mm512_cmpeq_epi32_mask(tag, _mm512_set1_epi32(TAG_LEAF as i32));
        let answer = _mm512_mask_mov_epi32(
            _mm512_and_si512(r[j], payload),
            _mm512_cmpeq_epi32_mask(r[j], none),
            none,
        );
        // SAFETY: `refs` and `best` hold GROUP u32s; the 16 at 16 * j (j < V <= 4) are inside
        // them (unaligned loads and stores).
        unsafe {
            let b = best.as_mut_ptr().add(LANES * j) as *mut __m512i;
            let kept = _mm512_loadu_si512(b as *const _);
            _mm512_storeu_si512(b, _mm512_mask_min_epu32(kept, done, kept, answer));
            _mm512_storeu_si512(refs.as_mut_ptr().add(LANES * j) as *mut _, r[j]);
        }
        at_leaf |= (leaf as u64) << (LANES * j);
    }
    at_leaf
}

/// The mask of vector `j`'s lanes that hold one of `n` keys.
#[inline(always)]
fn live_lanes(n: usize, j: usize) -> u16 {
    used(n.saturating_sub(LANES * j))
}

/// Bit `i` set for each key of `keys` (at most [`GROUP`]) with a value above its dimension's
/// `max` (a value no packet has; see [`in_domain`](super::in_domain)).
pub(super) fn outside_domain(keys: &[Key], max: &[u32; DIMS]) -> u64 {
    assert!(keys.len() <= GROUP && available());
    // SAFETY: `available` says this CPU has AVX-512 F, the only feature used.
    unsafe { outside_domain_vectors(keys, max) }
}

/// # Safety
/// The CPU must have AVX-512 F.
#[target_feature(enable = "avx512f")]
unsafe fn outside_domain_vectors(keys: &[Key], max: &[u32; DIMS]) -> u64 {
    // A key is 16 words and then DIMS - 16.
    const REST: u16 = ((1u32 << (DIMS - LANES)) - 1) as u16;
    // SAFETY: `max` holds DIMS words: 16 and then DIMS - 16 under a mask (masked-off words are
    // never read).
    let (max_lo, max_hi) = unsafe {
        (
            _mm512_loadu_si512(max.as_ptr() as *const _),
            _mm512_maskz_loadu_epi32(REST, max.as_ptr().add(LANES) as *const i32),
        )
    };
    let mut outside = 0u64;
    for (i, k) in keys.iter().enumerate() {
        // SAFETY: as for `max`: a key is DIMS words (asserted at the top of this file).
        let over = unsafe {
            let lo = _mm512_loadu_si512(k.0.as_ptr() as *const _);
            let hi = _mm512_maskz_loadu_epi32(REST, k.0.as_ptr().add(LANES) as *const i32);
            _mm512_cmpgt_epu32_mask(lo, max_lo) | _mm512_cmpgt_epu32_mask(hi, max_hi)
        };
        outside |= ((over != 0) as u64) << i;
    }
    outside
}

/// Checks the leaf each lane of `at_leaf` stopped at (`refs[i]`, an offset into `leaves` under
/// [`TAG_LEAF`]) for key `i`, and makes `best[i]` the smaller of its answer and what it was.
/// The leaf layout is [`Classifier`](super::Classifier)'s `leaves`.
pub(super) fn finish_leaves(leaves: &[u32], keys: &[Key], lanes: &mut Lanes) {
    assert!(keys.len() <= GROUP && available());
    let Lanes {
        best,
        refs,
        at_leaf,
    } = lanes;
    // SAFETY: `available` says this CPU has AVX-512 F, the only feature used.
    unsafe { finish_leaves_vectors(leaves, keys, refs, *at_leaf, best) }
}

/// # Safety
/// The CPU must have AVX-512 F.
#[target_feature(enable = "avx512f")]
unsafe fn finish_leaves_vectors(
    leaves: &[u32],
    keys: &[Key],
    refs: &[Ref; GROUP],
    at_leaf: u64,
    best: &mut [u32; GROUP],
) {
    let mut lanes = at_leaf;
    while lanes != 0 {
        let i = lanes.trailing_zeros() as usize;
        let at = leaves.as_ptr().wrapping_add((refs[i] & !TAG) as usize);
        // A prefetch only hints the cache: it never faults, whatever the address.
        _mm_prefetch::<_MM_HINT_T0>(at as *const i8);
        lanes &= lanes - 1;
    }
    let mut lanes = at_leaf;
    while lanes != 0 {
        let i = lanes.trailing_zeros() as usize;
        let answer = leaf(&leaves[(refs[i] & !TAG) as usize..], &keys[i]);
        best[i] = best[i].min(answer);
        lanes &= lanes - 1;
    }
}

/// The first candidate of the leaf at the start of `w` that `k` passes, or
/// [`NO_MATCH`](crate::NO_MATCH). The key's values in the leaf's dimensions are picked out of the
/// key by one permute per 16 dimensions (a key is 22 words, two registers), and a candidate is
/// one subtraction and one compare per 16 of them.
#[target_feature(enable = "avx512f")]
#[inline]
fn leaf(w: &[u32], k: &Key) -> u32 {
    let (n, width) = (w[0] as usize, w[1] as usize);
    let (key_lo, key_hi) = (load(&k.0), load(&k.0[LANES..]));
    let dims = &w[2..2 + width];
    // A permute reads only the index's low five bits, so any dimension word stays in the key.
    // Slots past the leaf's width are zero in the key's values as in the candidates' bounds
    // (`load` zero-fills), so they always pass.
    // Leaves of 16 dimensions or fewer (nearly all) never touch the second register.
    let wide = width > LANES;
    let kv_lo = _mm512_maskz_permutex2var_epi32(used(width), key_lo, load(dims), key_hi);
    let kv_hi = if wide {
        _mm512_maskz_permutex2var_epi32(used(width - LANES), key_lo, load(&dims[LANES..]), key_hi)
    } else {
        _mm512_setzero_si512()
    };
    let flags = k.0[crate::rule::Dim::TcpFlags as usize];
    let stride = 2 + 2 * width;
    let mut at = 2 + width;
    for _ in 0..n {
        let c = &w[at..at + stride];
        let (lo, span) = c[2..].split_at(width);
        let mut bad = _mm512_cmpgt_epu32_mask(_mm512_sub_epi32(kv_lo, load(lo)), load(span));
        if wide {
            bad |= _mm512_cmpgt_epu32_mask(
                _mm512_sub_epi32(kv_hi, load(&lo[LANES..])),
                load(&span[LANES..]),
            );
        }
        if bad == 0 && flags & (c[1] >> 8) == c[1] & 0xff {
            return c[0];
        }
        at += stride;
    }
    crate::NO_MATCH
}

/// The mask of the first `n` lanes (all sixteen for 16 or more).
#[inline(always)]
fn used(n: usize) -> u16 {
    ((1u32 << n.min(LANES)) - 1) as u16
}

/// The first 16 words of `s`, zeros past its end. `s` must not be empty: a masked load from
/// an address that is not mapped does not fault, but it costs a microcode assist of hundreds of
/// cycles, and an empty slice's address may be anything.
#[target_feature(enable = "avx512f")]
#[inline]
fn load(s: &[u32]) -> __m512i {
    debug_assert!(!s.is_empty());
    // SAFETY: the mask selects the first min(len, 16) words, all inside `s`; masked-off words
    // are never read.
    unsafe { _mm512_maskz_loadu_epi32(used(s.len()), s.as_ptr() as *const i32) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The vector leaf check gives the portable one's answer on leaves of every width (24 takes
    /// the second register; trees rarely build one, so they are made by hand here), with keys
    /// near every bound.
    #[test]
    fn leaf_check_equals_the_portable_one_at_every_width() {
        if !available() {
            return;
        }
        let mut g = rand::rngs::StdRng::seed_from_u64(7);
        let mut matched = [0; 4];
        for round in 0..4000 {
            let width = [4, 8, 16, 24][round % 4];
            let n = g.gen_range(1..5);
            let mut k = Key::default();
            for v in k.0.iter_mut() {
                *v = g.gen_range(0..16);
            }
            let mut w = vec![n as u32, width as u32];
            let dims: Vec<u32> = (0..width).map(|_| g.gen_range(0..DIMS as u32)).collect();
            w.extend(&dims);
            for rule in 0..n {
                let flags = if g.gen_bool(0.3) { 0x1202 } else { 0 };
                w.extend([rule as u32 * 3, flags]);
                // Half the candidates miss the key in one slot, just past a bound.
                let miss = g.gen_bool(0.5).then(|| g.gen_range(0..width));
                let bounds: Vec<(u32, u32)> = dims
                    .iter()
                    .enumerate()
                    .map(|(j, &d)| {
                        let v = k.0[d as usize];
                        let (below, above) = (g.gen_range(0..3), g.gen_range(0..3));
                        match miss {
                            Some(m) if m == j && v > 0 => {
                                let x = below.min(v - 1);
                                (v - 1 - x, x)
                            }
                            Some(m) if m == j => (v + 1, above),
                            _ => (v.saturating_sub(below), below.min(v) + above),
                        }
                    })
                    .collect();
                w.extend(bounds.iter().map(|b| b.0));
                w.extend(bounds.iter().map(|b| b.1));
            }
            let portable = match width {
                4 => super::super::leaf::<4>(&w[2..], n, &k),
                8 => super::super::leaf::<8>(&w[2..], n, &k),
                16 => super::super::leaf::<16>(&w[2..], n, &k),
                _ => super::super::leaf::<24>(&w[2..], n, &k),
            };
            // SAFETY: `available` said this CPU has AVX-512 F.
            let vector = unsafe { leaf(&w, &k) };
            assert_eq!(vector, portable, "width {width}, leaf {w:?}, key {k:?}");
            matched[round % 4] += (vector != crate::NO_MATCH) as usize;
        }
        // Both answers are exercised at every width.
        assert!(matched.iter().all(|&m| m > 20 && m < 980), "{matched:?}");
    }
}
