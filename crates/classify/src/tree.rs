//! The compiled engine: a multi-way decision tree over the range dimensions (HyperSplit's cuts,
//! grouped several to a node), with small leaves whose candidate rules are checked in full.
//!
//! # Structure
//!
//! - **Nodes** are one cache line each ([`Node`]): up to 7 ascending thresholds (an eighth is
//!   always `u32::MAX`) and 8 child references. The child is the number of thresholds below the
//!   key's value, one vector compare. All nodes live in one `Vec`, referenced by `u32` index; the
//!   reference also names the node's dimension, so the key's value loads alongside the node.
//! - **References** ([`Ref`]) are a `u32` tagged in the top bits: an inner node, a leaf (an offset
//!   into one flat `u32` array), or a final answer (a rule index, or no match) that needs no memory
//!   at all. Most of a list ending in PERMIT ALL ends in final answers.
//! - **Leaves** hold a few candidate rules in priority order. Each candidate carries only the
//!   checks its leaf still needs: the dimensions where the rule does not cover the leaf's whole
//!   region; all of a leaf's candidates are checked on the same 4, 8, 16 or 24 dimensions as
//!   `(lo, hi - lo)` vectors, plus a TCP-flag condition. The first candidate that passes wins.
//!   So the tree only has to over-approximate; the leaf keeps results exact.
//! - **Trees**: usually one. When one tree would replicate too much (rules open in the source
//!   beside rules open in the destination, or the same with MACs), the rules are grouped by which
//!   wide dimensions they leave open and each group gets its own tree over the same arrays; a key
//!   takes the smallest answer, skipping trees whose first rule comes after what it has found.
//!   A group whose rules are narrow in different fields (DSCP values beside destination ports)
//!   is split further by those fields when that makes the walks shorter in sum.
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
//! where rules overlap) and one or two lines of leaf. Where the CPU has AVX-512,
//! [`Classifier::classify_batch`] walks 64 keys at a time, 16 to a vector, by gathers (see
//! `avx512`: the walk was bound by instructions, not misses, on a CPU whose caches hold the
//! tree); elsewhere [`Classifier::classify_batch_portable`] walks up to 16 keys a level at a time
//! and prefetches each key's next line, so the misses of a batch overlap.
//! Figures, measured by `tests/timing.rs`, are in [`Classifier`]'s doc.
//!
//! Known costs still to cut: every tree beyond the first is another walk (ClassBench lists of
//! 10k rules take four).

#[cfg(target_arch = "x86_64")]
mod avx512;
mod build;

use crate::rule::{linear, Dim, Key, Rule, DIMS};
use crate::NO_MATCH;

/// A child reference, tagged in its top two bits. An inner node's reference also carries the
/// node's dimension (bits 25..30), so a walk loads the key's value while the node's line is on
/// its way, and the index of the node (bits 0..25).
type Ref = u32;
const TAG: u32 = 0xc000_0000;
const TAG_NODE: u32 = 0;
const TAG_LEAF: u32 = 0x8000_0000;
const TAG_DONE: u32 = 0xc000_0000;
/// The final answer "no rule matches" (a `TAG_DONE` with every payload bit set).
const REF_NONE: Ref = u32::MAX;
const DIM_SHIFT: u32 = 25;
const NODE_MASK: u32 = (1 << DIM_SHIFT) - 1;
/// Rule indices must fit the payload of a `TAG_DONE` and stay below [`REF_NONE`]'s; longer lists
/// are answered by a linear scan.
const MAX_RULES: usize = (!TAG) as usize;
/// Node indices must fit a reference; past this the build makes leaves instead.
const MAX_NODES: usize = NODE_MASK as usize;
/// Leaf words (4 bytes each) one classifier may hold: 256 MB. A build that would need more falls
/// back to a linear scan (correct, slow); `BUDGET_PER_RULE` keeps real lists far below it.
const MAX_LEAF_WORDS: usize = 1 << 26;
/// Node 0 is never a real node: a finished lane of a batch walk steps through it harmlessly.
const SINK: Ref = 0;

/// Up to this many keys are walked together by [`Classifier::classify_batch`]: enough independent
/// misses in flight to hide latency, few enough that the batch's state stays in registers and L1.
const LANES: usize = 16;

/// Children per node: 8 `u32` thresholds (the last always `u32::MAX`) and 8 children fill 64
/// bytes, and the thresholds are one AVX2 register.
const FAN: usize = 8;

/// One inner node: a cache line. Its dimension is in the references to it.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Node {
    /// Child `i` takes the values `v` with `thr[i-1] < v <= thr[i]`; unused thresholds are
    /// `u32::MAX`, which no value exceeds, so they never count.
    thr: [u32; FAN],
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
/// | set | rules | M/s batch | compile | bytes |
/// |-----|------:|-----|--------:|------:|
/// | XR-5 | 5,001 | 27-31 | 0.03 s | 2.7 MB |
/// | acl | 1k / 10k / 50k | 16 / 4.5 / 3.6 | 0.02 / 0.4 / 2.7 s | - / - / 19 MB |
/// | fw | 1k / 10k / 50k | 5.0 / 4.1 / 3.3 | 0.04 / 0.4 / 1.9 s | - / - / 22 MB |
/// | acl IPv6 | 1k / 10k / 50k | 11.6 / 3.9 / 3.3 | 0.05 / 0.4 / 2.0 s | - / - / 25 MB |
/// | L2/L3/L4 mix | 1k / 10k / 50k | 5.5 / 4.0 / 3.2 | 0.04 / 0.6 / 2.4 s | - / - / 22 MB |
///
/// The services of `bench forward --services` (`cargo run --release -p bench --example
/// services_classify`), portable walk on an AMD EPYC: the 10,001-line ACL 25-36 ns a key (one
/// tree, seven levels, final answers only), the 500-line QoS policy 40-45 ns (three trees of
/// depth 4, 130 kB). The AVX-512 walk on an Intel Xeon (model 207), alternated with the portable
/// one: ACL 11-19 ns against 24-41, QoS 25-58 against 36-67 (a noisy VM; the ratio held at
/// about 0.5 for the ACL and 0.65-0.8 for QoS).
///
/// # Limits
///
/// `compile` accepts any list. Lists of 2^30 rules or more, and lists whose tree would need
/// more than 256 MB of leaves even within the replication budget, are answered by a linear scan
/// of the rules: correct, and as slow as [`linear`]. Past 2^25 nodes a build makes leaves instead
/// of nodes (larger leaves, same answers).
pub struct Classifier {
    rules: Vec<Rule>,
    /// Node 0 is the sink (see [`SINK`]).
    nodes: Vec<Node>,
    /// Leaves back to back: `[n, width, dims * width, (rule, flags, lo * width, span * width) *
    /// n]`: a candidate passes when `key[dims[j]] - lo[j] <= span[j]` (wrapping) for every `j`
    /// and `key.TcpFlags & (flags >> 8) == flags & 0xff`. `width` is 4, 8, 16 or 24; unused
    /// slots check dimension 0 against the full range.
    leaves: Vec<u32>,
    /// One tree per group of rules (often one; see [`build`]), with the group's first rule, in
    /// that order. A key's answer is the smallest of the trees' answers (hence [`NO_MATCH`] is
    /// `u32::MAX`), and a tree whose first rule comes after the answer so far is skipped.
    roots: Vec<(u32, Ref)>,
    /// No tree: every key takes the linear scan (see Limits).
    scan: bool,
    /// [`Classifier::classify_batch`] walks the trees by AVX-512 gathers (this CPU has them, and
    /// there are trees).
    vector: bool,
}

impl Classifier {
    /// Compiles `rules`; earlier rules win. Never fails (see Limits).
    pub fn compile(rules: &[Rule]) -> Classifier {
        let built = if rules.len() < MAX_RULES {
            build::build(rules)
        } else {
            None
        };
        let (nodes, leaves, roots, scan) = match built {
            Some(b) => (b.nodes, b.leaves, b.roots, false),
            None => (Vec::new(), Vec::new(), Vec::new(), true),
        };
        #[cfg(target_arch = "x86_64")]
        let vector = !scan && avx512::available();
        #[cfg(not(target_arch = "x86_64"))]
        let vector = false;
        Classifier {
            rules: rules.to_vec(),
            nodes,
            leaves,
            roots,
            scan,
            vector,
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
        if self.scan || !in_domain(k) {
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
    /// Where the CPU has AVX-512, the trees are walked 16 keys to a vector, four vectors at a
    /// time (see `avx512`); elsewhere by [`Classifier::classify_batch_portable`]. Either way the
    /// leaves are then checked one key at a time.
    pub fn classify_batch(&self, keys: &[Key], out: &mut [u32]) {
        assert!(
            out.len() >= keys.len(),
            "classify_batch: out is shorter than keys"
        );
        #[cfg(target_arch = "x86_64")]
        if self.vector && !self.scan {
            for (kc, oc) in keys
                .chunks(avx512::GROUP)
                .zip(out.chunks_mut(avx512::GROUP))
            {
                let oc = &mut oc[..kc.len()];
                let mut lanes = avx512::Lanes::new();
                for &tree in &self.roots {
                    if lanes.best[..kc.len()].iter().all(|&o| o < tree.0) {
                        break;
                    }
                    avx512::walk(&self.nodes, kc, tree, &mut lanes);
                    avx512::finish_leaves(&self.leaves, kc, &mut lanes);
                }
                oc.copy_from_slice(&lanes.best[..kc.len()]);
                let mut outside = avx512::outside_domain(kc, &DOMAIN_MAX);
                while outside != 0 {
                    let i = outside.trailing_zeros() as usize;
                    oc[i] = self.outside(&kc[i]);
                    outside &= outside - 1;
                }
            }
            return;
        }
        self.classify_batch_portable(keys, out);
    }

    /// [`Classifier::classify_batch`] on any CPU.
    ///
    /// Keys are walked 16 at a time, one level per pass, prefetching each key's next node
    /// or leaf so that the cache misses of the batch overlap instead of queueing. A lane that
    /// has reached its leaf keeps stepping through the sink node until the whole batch has, so
    /// a pass has no branch per lane.
    pub fn classify_batch_portable(&self, keys: &[Key], out: &mut [u32]) {
        assert!(
            out.len() >= keys.len(),
            "classify_batch: out is shorter than keys"
        );
        if self.scan {
            for (o, k) in out.iter_mut().zip(keys) {
                *o = self.outside(k);
            }
            return;
        }
        for (kc, oc) in keys.chunks(LANES).zip(out.chunks_mut(LANES)) {
            let oc = &mut oc[..kc.len()];
            oc.fill(NO_MATCH);
            for &(first, root) in &self.roots {
                if oc.iter().all(|&o| o < first) {
                    break;
                }
                let mut refs = [root; LANES];
                let refs = &mut refs[..kc.len()];
                let mut walking = root & TAG == TAG_NODE;
                while walking {
                    walking = false;
                    for (r, k) in refs.iter_mut().zip(kc) {
                        let node = *r & TAG == TAG_NODE;
                        let next = self.step(if node { *r } else { SINK }, k);
                        *r = if node { next } else { *r };
                        self.prefetch(*r);
                        walking |= *r & TAG == TAG_NODE;
                    }
                }
                for ((o, &r), k) in oc.iter_mut().zip(refs.iter()).zip(kc) {
                    *o = (*o).min(self.finish(r, k));
                }
            }
            self.outside_domain(kc, oc);
        }
    }

    /// Replaces the answer of every key outside the tree's domain by the reference's.
    #[inline(always)]
    fn outside_domain(&self, keys: &[Key], out: &mut [u32]) {
        for (o, k) in out.iter_mut().zip(keys) {
            if !in_domain(k) {
                *o = self.outside(k);
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

    /// One level down from inner node `r`: eight compares that compile to a few vector
    /// instructions.
    #[inline(always)]
    fn step(&self, r: Ref, k: &Key) -> Ref {
        let v = k.0[(r >> DIM_SHIFT) as usize];
        let n = &self.nodes[(r & NODE_MASK) as usize];
        let i = n.thr.iter().fold(0u32, |a, &t| a + (v > t) as u32);
        n.kids[i as usize % FAN]
    }

    /// The answer at a leaf or final reference.
    #[inline(always)]
    fn finish(&self, r: Ref, k: &Key) -> u32 {
        if r & TAG == TAG_DONE {
            return if r == REF_NONE { NO_MATCH } else { r & !TAG };
        }
        let w = &self.leaves[(r & !TAG) as usize..];
        let n = w[0] as usize;
        match w[1] {
            4 => leaf::<4>(&w[2..], n, k),
            8 => leaf::<8>(&w[2..], n, k),
            16 => leaf::<16>(&w[2..], n, k),
            _ => leaf::<24>(&w[2..], n, k),
        }
    }

    /// A key with a value no packet has (a port above 65535, a VLAN above 4095): the tree assumed
    /// such values away when it pruned, so ask the reference. Also every key of a list too
    /// large for a tree.
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
            let p: *const i8 = if r & TAG == TAG_NODE {
                self.nodes
                    .as_ptr()
                    .wrapping_add((r & NODE_MASK) as usize)
                    .cast()
            } else {
                self.leaves
                    .as_ptr()
                    .wrapping_add((r & !TAG) as usize)
                    .cast()
            };
            // SAFETY: a prefetch only hints the cache: it never faults, whatever the address
            // (a final answer's is meaningless), and reads nothing we see.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = r;
    }
}

/// The first of a leaf's `n` candidates (see [`Classifier`]'s `leaves`) that `k` passes. Every
/// candidate is checked on the same `W` dimensions at once, so a check is a handful of vector
/// instructions and one branch.
#[inline(always)]
fn leaf<const W: usize>(w: &[u32], n: usize, k: &Key) -> u32 {
    let mut kv = [0u32; W];
    for (v, &d) in kv.iter_mut().zip(&w[..W]) {
        *v = k.0[(d as usize).min(DIMS - 1)];
    }
    let flags = k.get(Dim::TcpFlags);
    for c in w[W..W + n * (2 + 2 * W)].chunks_exact(2 + 2 * W) {
        let (lo, span) = c[2..].split_at(W);
        let mut bad = 0u32;
        for j in 0..W {
            bad |= (kv[j].wrapping_sub(lo[j]) > span[j]) as u32;
        }
        bad |= (flags & (c[1] >> 8) != c[1] & 0xff) as u32;
        if bad == 0 {
            return c[0];
        }
    }
    NO_MATCH
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
                    let n = &self.nodes[(r & NODE_MASK) as usize];
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
            .field("scan", &self.scan)
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

/// Each dimension's [`Dim::max`].
const DOMAIN_MAX: [u32; DIMS] = {
    let mut m = [0; DIMS];
    let mut d = 0;
    while d < DIMS {
        m[d] = Dim::ALL[d].max();
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
        over |= (k.0[d] > DOMAIN_MAX[d]) as u32;
    }
    over == 0
}

#[cfg(test)]
mod tests;
