//! The compiled engine: a multi-way decision tree over the range dimensions (HyperSplit's cuts,
//! grouped several to a node), with small leaves whose candidate rules are checked in full.
//!
//! # Structure
//!
//! - **Nodes** are one cache line each ([`Node`]): one dimension, up to 7 ascending thresholds and
//!   8 child references. The child is the number of thresholds below the key's value, found without
//!   a branch. All nodes live in one `Vec`, referenced by `u32` index.
//! - **References** ([`Ref`]) are a `u32` tagged in the top bits: an inner node, a leaf (an offset
//!   into one flat `u32` array), or a final answer (a rule index, or no match) that needs no memory
//!   at all. Most of a list ending in PERMIT ALL ends in final answers.
//! - **Leaves** hold a few candidate rules in priority order. Each candidate carries only the
//!   checks its leaf still needs: the dimensions where the rule does not cover the leaf's whole
//!   region, as `(dim, lo, hi - lo)` triples, plus its TCP-flag condition. The first candidate that
//!   passes wins. So the tree only has to over-approximate; the leaf keeps results exact.
//! - **Trees**: usually one. When one tree would replicate too much (rules open in the source
//!   beside rules open in the destination, or the same with MACs), the rules are grouped by which
//!   wide dimensions they leave open and each group gets its own tree over the same arrays; a key
//!   takes the smallest answer, skipping trees whose first rule comes after what it has found.
//!
//! # Building
//!
//! See [`build`]. At each node the compiler drops every rule after the first one that covers the
//! node's whole region without a TCP-flag condition (it shadows them all there; this is what turns
//! a final PERMIT ALL into cheap final answers), then picks the dimension and cut that best halve
//! the rules (the smaller of the two sides' rule counts, rules straddling the cut going to both),
//! and keeps cutting the pieces on that same dimension up to three levels to fill a node's 8
//! children. Dimensions no rule constrains are never considered. Depth, leaf size and a global
//! budget on replicated rule copies bound build time and memory.
//!
//! # Costs
//!
//! A lookup reads one cache line per level (about `log8` of the rule count's worth of cuts, more
//! where rules overlap) and one or two lines of leaf. [`Classifier::classify_batch`] walks up to 16
//! keys a level at a time and prefetches each key's next line, so the misses of a batch overlap.
//! Figures, measured by `tests/timing.rs`, are in [`Classifier`]'s doc.
//!
//! Known costs still to cut: every tree beyond the first is another walk; leaf candidates are
//! checked with a branch per condition (mispredictions dominate small trees); wildcard-heavy
//! lists of 50k rules with L2 entries exhaust the replication budget and leave large leaves.

mod build;

use crate::rule::{linear, Dim, Key, Rule, DIMS};
use crate::NO_MATCH;

/// A child reference, tagged in its top two bits.
type Ref = u32;
const TAG: u32 = 0xc000_0000;
const TAG_NODE: u32 = 0;
const TAG_LEAF: u32 = 0x8000_0000;
const TAG_DONE: u32 = 0xc000_0000;
/// The final answer "no rule matches" (a `TAG_DONE` with every payload bit set).
const REF_NONE: Ref = u32::MAX;
/// Rule indices must fit the payload of a `TAG_DONE` and stay below [`REF_NONE`]'s.
const MAX_RULES: usize = (!TAG) as usize;

/// Up to this many keys are walked together by [`Classifier::classify_batch`]: enough independent
/// misses in flight to hide latency, few enough that the batch's state stays in registers and L1.
const LANES: usize = 16;

/// Thresholds per node: 7 `u32` thresholds, the dimension and 8 children fill 64 bytes.
const FAN: usize = 8;

/// One inner node: a cache line.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Node {
    /// Child `i` takes the values `v` with `thr[i-1] < v <= thr[i]`; unused thresholds are
    /// `u32::MAX`, which no value exceeds, so they never count.
    thr: [u32; FAN - 1],
    dim: u32,
    kids: [Ref; FAN],
}

const _: () = assert!(std::mem::size_of::<Node>() == 64);

/// A compiled, immutable rule list.
///
/// Measured on the 2-core development VM (shared, noisy; rates by on-CPU time, best of three),
/// release build, by `cargo test --release -p classify --test timing -- --ignored --nocapture`,
/// on that file's stand-in sets (M lookups/s single / batch; compile; bytes including the rule
/// copy):
///
/// | set | rules | M/s | compile | bytes |
/// |-----|------:|-----|--------:|------:|
/// | XR-5 | 5,001 | 21 / 24 | 0.02 s | 1.3 MB |
/// | acl | 1k / 10k / 50k | 13 / 5.5 / 3.0 | 0.01 / 0.25 / 1.4 s | 0.5 / 2.5 / 14 MB |
/// | fw | 1k / 10k / 50k | 6 / 3.9 / 1.9 | 0.1 / 0.1 / 0.9 s | 0.25 / 3.8 / 71 MB |
/// | acl IPv6 | 1k / 10k / 50k | 12 / 5 / 2.6 | 0.01 / 0.4 / 2.3 s | 0.7 / 3.1 / 19 MB |
/// | L2/L3/L4 mix | 1k / 10k / 50k | 4.4 / 2.3 / ~0 | 0.06 / 0.4 / 1.8 s | 0.3 / 11 / 80 MB |
pub struct Classifier {
    rules: Vec<Rule>,
    nodes: Vec<Node>,
    /// Leaves back to back: `[n, (rule, head, (dim, lo, span) * checks) * n]` where `head` packs
    /// the check count (bits 0..8), a TCP-flag condition flag (bit 8), its value (16..24) and
    /// mask (24..32).
    leaves: Vec<u32>,
    /// One tree per group of rules (often one; see [`build`]), with the group's first rule, in
    /// that order. A key's answer is the smallest of the trees' answers (hence [`NO_MATCH`] is
    /// `u32::MAX`), and a tree whose first rule comes after the answer so far is skipped.
    roots: Vec<(u32, Ref)>,
}

impl Classifier {
    /// Compiles `rules`; earlier rules win.
    pub fn compile(rules: &[Rule]) -> Classifier {
        assert!(rules.len() < MAX_RULES, "too many rules: {}", rules.len());
        let b = build::build(rules);
        Classifier {
            rules: rules.to_vec(),
            nodes: b.nodes,
            leaves: b.leaves,
            roots: b.roots,
        }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The index of the first rule `k` matches, or [`NO_MATCH`].
    #[inline]
    pub fn classify(&self, k: &Key) -> u32 {
        if !in_domain(k) {
            return self.outside(k);
        }
        let mut best = NO_MATCH;
        for &(first, root) in &self.roots {
            if best < first {
                break;
            }
            let mut r = root;
            while r & TAG == TAG_NODE {
                r = self.step(r, k);
            }
            best = best.min(self.finish(r, k));
        }
        best
    }

    /// `out[i] = classify(&keys[i])` for every key (`out` must be at least as long as `keys`).
    ///
    /// Keys are walked [`LANES`] at a time, one level per pass, prefetching each key's next node
    /// or leaf so that the cache misses of the batch overlap instead of queueing.
    pub fn classify_batch(&self, keys: &[Key], out: &mut [u32]) {
        assert!(
            out.len() >= keys.len(),
            "classify_batch: out is shorter than keys"
        );
        for (kc, oc) in keys.chunks(LANES).zip(out.chunks_mut(LANES)) {
            let oc = &mut oc[..kc.len()];
            oc.fill(NO_MATCH);
            for &(first, root) in &self.roots {
                if oc.iter().all(|&o| o < first) {
                    break;
                }
                let mut refs = [root; LANES];
                let refs = &mut refs[..kc.len()];
                loop {
                    let mut walking = false;
                    for (r, k) in refs.iter_mut().zip(kc) {
                        if *r & TAG == TAG_NODE {
                            *r = self.step(*r, k);
                            self.prefetch(*r);
                            walking = true;
                        }
                    }
                    if !walking {
                        break;
                    }
                }
                for ((o, &r), k) in oc.iter_mut().zip(refs.iter()).zip(kc) {
                    *o = (*o).min(self.finish(r, k));
                }
            }
            for (o, k) in oc.iter_mut().zip(kc) {
                if !in_domain(k) {
                    *o = self.outside(k);
                }
            }
        }
    }

    /// Memory the compiled form uses: nodes, leaves and the copy of the rule list it answers for.
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.nodes.len() * std::mem::size_of::<Node>()
            + self.leaves.len() * 4
            + self.rules.len() * std::mem::size_of::<Rule>()
    }

    /// One level down from inner node `r`.
    #[inline(always)]
    fn step(&self, r: Ref, k: &Key) -> Ref {
        let n = &self.nodes[r as usize];
        let v = k.0[n.dim as usize];
        let i: usize = n.thr.iter().map(|&t| (v > t) as usize).sum();
        n.kids[i]
    }

    /// The answer at a leaf or final reference.
    #[inline(always)]
    fn finish(&self, r: Ref, k: &Key) -> u32 {
        if r & TAG == TAG_DONE {
            return if r == REF_NONE { NO_MATCH } else { r & !TAG };
        }
        let w = &self.leaves[(r & !TAG) as usize..];
        let n = w[0] as usize;
        let mut p = 1;
        'cand: for _ in 0..n {
            let rule = w[p];
            let head = w[p + 1];
            let checks = (head & 0xff) as usize;
            let c = &w[p + 2..p + 2 + 3 * checks];
            p += 2 + 3 * checks;
            for t in c.chunks_exact(3) {
                if k.0[t[0] as usize].wrapping_sub(t[1]) > t[2] {
                    continue 'cand;
                }
            }
            if head & 0x100 != 0 {
                let flags = k.0[Dim::TcpFlags as usize];
                if flags & (head >> 24) != (head >> 16) & 0xff {
                    continue;
                }
            }
            return rule;
        }
        NO_MATCH
    }

    /// A key with a value no packet has (a port above 65535, a VLAN above 4095): the tree assumed
    /// such values away when it pruned, so ask the reference.
    #[cold]
    #[inline(never)]
    fn outside(&self, k: &Key) -> u32 {
        linear(&self.rules, k).unwrap_or(NO_MATCH)
    }

    #[inline(always)]
    fn prefetch(&self, r: Ref) {
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let p: *const i8 = match r & TAG {
                TAG_NODE => self.nodes[r as usize..].as_ptr().cast(),
                TAG_LEAF => self.leaves[(r & !TAG) as usize..].as_ptr().cast(),
                _ => return,
            };
            // SAFETY: `p` points into a live allocation (the slices above are bounds-checked), and
            // a prefetch only hints the cache: it never faults and reads nothing we see.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = r;
    }
}

/// A summary of the compiled form's shape, for logs and tuning: node and leaf counts, the depth
/// (nodes on the longest path) and how many candidates leaves hold.
impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (mut leaves, mut cands, mut most, mut done, mut depth) = (0, 0, 0, 0, 0);
        let mut stack: Vec<(Ref, usize)> = self.roots.iter().map(|&(_, r)| (r, 0)).collect();
        while let Some((r, d)) = stack.pop() {
            match r & TAG {
                TAG_NODE => {
                    let n = &self.nodes[r as usize];
                    let used = n.thr.iter().filter(|&&t| t != u32::MAX).count() + 1;
                    stack.extend(n.kids[..used].iter().map(|&k| (k, d + 1)));
                }
                TAG_LEAF => {
                    let c = self.leaves[(r & !TAG) as usize] as usize;
                    leaves += 1;
                    cands += c;
                    most = most.max(c);
                }
                _ => done += 1,
            }
            depth = depth.max(d);
        }
        f.debug_struct("Classifier")
            .field("rules", &self.rules.len())
            .field("trees", &self.roots.len())
            .field("bytes", &self.bytes())
            .field("nodes", &self.nodes.len())
            .field("depth", &depth)
            .field("leaf_refs", &leaves)
            .field("final_refs", &done)
            .field("leaf_candidates", &cands)
            .field("largest_leaf", &most)
            .finish()
    }
}

/// Each dimension's [`Dim::max`] rounded up to all-ones bits.
const DOMAIN_MASK: [u32; DIMS] = {
    let mut m = [0; DIMS];
    let mut d = 0;
    while d < DIMS {
        let mut x = Dim::ALL[d].max();
        x |= x >> 1;
        x |= x >> 2;
        x |= x >> 4;
        x |= x >> 8;
        x |= x >> 16;
        m[d] = x;
        d += 1;
    }
    m
};

/// True when every value of `k` lies within its dimension's [`Dim::max`], as in every key
/// [`crate::extract`] makes. The tree is built for such keys only (a wildcard is taken to cover
/// `0..=max`); others take the reference path. A few vector instructions per key.
#[inline(always)]
fn in_domain(k: &Key) -> bool {
    let mut over = 0;
    for d in 0..DIMS {
        over |= k.0[d] & !DOMAIN_MASK[d];
    }
    over == 0 && k.0[Dim::Frag as usize] <= Dim::Frag.max()
}

#[cfg(test)]
mod tests;
