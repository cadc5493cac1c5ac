//! From a rule list to the tree of [`super`].
//!
//! A recursive HyperSplit-style build. A node's rule set is kept in priority order; its region is
//! one range per dimension. At each node:
//!
//! 1. **Prune**: rules after the first one that covers the whole region and has no TCP-flag
//!    condition can never win there, so they are dropped from the subtree.
//! 2. If the set is empty or its first rule covers the region, the answer is final and costs no
//!    memory. If it is a single rule (or a limit is reached), it becomes a leaf. A cut is taken
//!    even where only one side shrinks, so sets end in final answers where nodes allow.
//! 3. Otherwise every constrained dimension is scored by its best single cut: the one that
//!    minimises the larger side's rule count (then the total, which is the replication). The best
//!    dimension wins, and its two halves are cut again on the same dimension, up to three levels,
//!    while that keeps shrinking them, giving a node of up to 8 children.
//!
//! The cost of scoring a dimension is a sort of the rules' clipped endpoints: `O(n log n)` per
//! dimension per node.

use super::{Node, Ref, DIM_SHIFT, FAN, MAX_LEAF_WORDS, MAX_NODES, REF_NONE, TAG_DONE, TAG_LEAF};
use crate::rule::{Dim, Rule, DIMS};

/// A set this small becomes a leaf without trying to cut it: checking a few candidates in full
/// costs less than another level's cache miss.
const LEAF: usize = 1;
/// Inner nodes a build may make, per rule plus a base: past it, what is left becomes leaves. A
/// single-tree trial that reaches it fails, as one over budget does (nodes count against the
/// budget too, [`NODE_COPIES`] each).
const NODES_PER_RULE: usize = 32;
const NODES_BASE: usize = 4096;
/// What a node costs against the replication budget, in rule copies.
const NODE_COPIES: usize = 1;
/// Binary cuts on a path before whatever is left becomes a leaf. Bounds the replication of sets
/// that cuts stop shrinking usefully.
const MAX_DEPTH: usize = 48;
/// A further cut on a node's dimension is taken when it costs at most this much more (in
/// percent) than the best cut on any dimension; otherwise the piece becomes a child of its own.
const SAME_DIM_SLACK: usize = 25;
/// Binary cuts grouped into one node: `2^3 = FAN` children.
const PART_LEVELS: usize = 3;
const _: () = assert!(1 << PART_LEVELS == FAN);

/// See [`Cut::cost`]; in halves (2 means a copy costs as much as a rule left on the larger side).
const REPLICATION_WEIGHT: usize = 3;

/// The replication budget: rule copies in leaves, per rule plus a base (see `Builder::copies`).
const BUDGET_PER_RULE: usize = 64;
/// The budget of the first, single-tree attempt: past it, the rules are split into groups.
const TRIAL_PER_RULE: usize = 40;
const TRIAL_BASE: usize = 1024;
/// The wide dimensions rules are grouped by, when they are: a rule is open in one when its range
/// spans more than 1/256 of it (an IPv4 prefix shorter than /8).
const GROUP_DIMS: [Dim; 4] = [Dim::Src0, Dim::Dst0, Dim::EthSrcLo, Dim::EthDstLo];
const BUDGET_BASE: usize = 1 << 16;

/// At most this many trees per address group ([`GROUP_DIMS`]) when it is split by [`shape`].
const MAX_SHAPES: usize = 4;
/// What another walk costs against a tree's mean depth, in levels.
const SPLIT_WALK: f64 = 1.0;

type Region = [(u32, u32); DIMS];

/// The dimensions `r` is narrow in (a bit each): spanning at most 1/256 of the dimension, so
/// exact for the small ones (DSCP, protocol, EtherType).
fn shape(r: &Rule) -> u32 {
    (0..DIMS)
        .filter(|&d| d != Dim::TcpFlags as usize)
        .filter(|&d| {
            let (lo, hi) = r.ranges[d];
            hi.wrapping_sub(lo) <= Dim::ALL[d].max() >> 8
        })
        .fold(0, |m, d| m | 1 << d)
}

pub(super) struct Built {
    pub nodes: Vec<Node>,
    pub leaves: Vec<u32>,
    /// Each tree's first rule, and its root; in order of first rule.
    pub roots: Vec<(u32, Ref)>,
}

/// The tree of `rules`, or `None` when it would outgrow [`MAX_LEAF_WORDS`].
pub(super) fn build(rules: &[Rule]) -> Option<Built> {
    let mut region = [(0, 0); DIMS];
    for d in Dim::ALL {
        region[d as usize] = (0, d.max());
    }
    // Rules that no in-domain key can match (an empty range, flags outside their mask) would only
    // cost space.
    let set: Vec<u32> = (0..rules.len() as u32)
        .filter(|&i| satisfiable(&rules[i as usize], &region))
        .collect();
    let dims = (0..DIMS)
        .filter(|&d| d != Dim::TcpFlags as usize)
        .filter(|&d| {
            set.iter()
                .any(|&i| !covers_dim(&rules[i as usize], d, region[d]))
        })
        .collect();
    // One tree if the rules allow it cheaply; else one per group of rules by which of the
    // address dimensions ([`GROUP_DIMS`]) they leave (nearly) open. A wildcard in a dimension is copied into every
    // piece a cut on it makes, so lists that mix rules open in the source with rules open in the
    // destination make one tree replicate without end; each group's tree cuts where its rules
    // are narrow. Each extra tree costs a walk per key.
    let mut b = Builder::new(rules, dims, TRIAL_PER_RULE * set.len() + TRIAL_BASE, true);
    let root = b.node(&region, set.clone(), 0);
    let roots = if b.copies <= b.budget {
        vec![(0, root)]
    } else {
        let dims = std::mem::take(&mut b.dims);
        b = Builder::new(
            rules,
            dims,
            BUDGET_PER_RULE * set.len() + BUDGET_BASE,
            false,
        );
        let mut groups: Vec<Vec<u32>> = vec![Vec::new(); 1 << GROUP_DIMS.len()];
        for &i in &set {
            let r = &rules[i as usize];
            let open = |d: Dim| {
                let (lo, hi) = r.range(d);
                hi - lo > d.max() >> 8
            };
            let g = GROUP_DIMS
                .iter()
                .enumerate()
                .fold(0, |g, (bit, &d)| g | (open(d) as usize) << bit);
            groups[g].push(i);
        }
        // By first rule, so that a lookup can stop at the first tree that cannot beat what it
        // has found.
        let groups: Vec<Vec<u32>> = groups.into_iter().filter(|g| !g.is_empty()).collect();
        let mut roots = Vec::new();
        for g in groups {
            b.group(&region, g, &mut roots);
        }
        roots.sort_by_key(|&(first, _)| first);
        roots
    };
    if b.overflow {
        return None;
    }
    b.nodes.shrink_to_fit();
    b.leaves.shrink_to_fit();
    Some(Built {
        nodes: b.nodes,
        leaves: b.leaves,
        roots,
    })
}

fn satisfiable(r: &Rule, region: &Region) -> bool {
    let ranges_ok = (0..DIMS).all(|d| {
        let (lo, hi) = r.ranges[d];
        lo <= hi && lo <= region[d].1
    });
    let flags_ok = match r.tcp_flags {
        Some((v, m)) => v & !m == 0,
        None => true,
    };
    ranges_ok && flags_ok
}

#[inline]
fn covers_dim(r: &Rule, d: usize, (lo, hi): (u32, u32)) -> bool {
    let (a, b) = r.ranges[d];
    a <= lo && b >= hi
}

/// Does `r` match every key of `region`?
fn covers(r: &Rule, region: &Region) -> bool {
    r.tcp_flags.is_none() && (0..DIMS).all(|d| covers_dim(r, d, region[d]))
}

/// Does `a` match every key of `region` that `b` matches? (Both intersect the region.)
fn shadows(a: &Rule, b: &Rule, region: &Region) -> bool {
    a.tcp_flags.is_none()
        && (0..DIMS).all(|d| {
            let (alo, ahi) = a.ranges[d];
            let (blo, bhi) = b.ranges[d];
            let (rlo, rhi) = region[d];
            alo <= blo.max(rlo) && ahi >= bhi.min(rhi)
        })
}

struct Cut {
    at: u32,
    left: usize,
    right: usize,
}

impl Cut {
    /// Smaller is better: the larger side, plus the copies the cut makes (rules on both sides)
    /// weighted by [`REPLICATION_WEIGHT`]: balance alone would pick cuts that copy a tenth of
    /// the rules at every level, which compounds over thirty levels into a blow-up.
    fn cost(&self, n: usize) -> usize {
        2 * self.left.max(self.right) + REPLICATION_WEIGHT * (self.left + self.right - n)
    }
}

struct Builder<'a> {
    rules: &'a [Rule],
    /// The dimensions worth cutting: some rule constrains them.
    dims: Vec<usize>,
    nodes: Vec<Node>,
    leaves: Vec<u32>,
    /// Rule copies written to leaves so far, and how many the build may write before it stops
    /// cutting: cuts replicate the rules that straddle them, and some lists (many wildcards in
    /// different dimensions) would replicate without end. Past the budget, what is left becomes
    /// leaves as it stands: slower to search, but bounded.
    copies: usize,
    budget: usize,
    /// A trial build gives up (writing nothing more) once over budget.
    trial: bool,
    /// Past this many nodes, sets become leaves.
    max_nodes: usize,
    /// Leaves outgrew [`MAX_LEAF_WORDS`]: the build is void.
    overflow: bool,
    // Scratch for `best_cut`, kept to avoid an allocation per call.
    lo: Vec<u32>,
    hi: Vec<u32>,
    cand: Vec<u32>,
}

impl<'a> Builder<'a> {
    fn new(rules: &'a [Rule], dims: Vec<usize>, budget: usize, trial: bool) -> Self {
        Builder {
            rules,
            dims,
            // The sink: every threshold at the top, every child "no match".
            nodes: vec![Node {
                thr: [u32::MAX; FAN],
                kids: [REF_NONE; FAN],
            }],
            leaves: Vec::new(),
            copies: 0,
            budget,
            trial,
            max_nodes: (NODES_PER_RULE * rules.len() + NODES_BASE).min(MAX_NODES),
            overflow: false,
            lo: Vec::new(),
            hi: Vec::new(),
            cand: Vec::new(),
        }
    }

    /// Pushes the tree (or trees) of one group. Rules exact on one narrow field beside rules
    /// exact on another (DSCP values beside destination ports) replicate across each other's
    /// cuts and make a deep tree; so the group is also tried split by [`shape`], and the split
    /// is kept when its trees' summed [`Builder::depth`] (plus one per extra walk) beats the
    /// single tree's.
    fn group(&mut self, region: &Region, g: Vec<u32>, roots: &mut Vec<(u32, Ref)>) {
        let subs = self.shapes(&g);
        let (n0, l0, c0) = (self.nodes.len(), self.leaves.len(), self.copies);
        let whole = self.node(region, g.clone(), 0);
        if subs.len() < 2 || self.overflow {
            roots.push((g[0], whole));
            return;
        }
        let whole_cost = self.depth(whole);
        let (n1, l1, c1) = (self.nodes.len(), self.leaves.len(), self.copies);
        let mut split_cost = 0.0;
        for s in &subs {
            let r = self.node(region, s.clone(), 0);
            split_cost += self.depth(r) + SPLIT_WALK;
        }
        if self.overflow || split_cost >= whole_cost + SPLIT_WALK {
            self.nodes.truncate(n1);
            self.leaves.truncate(l1);
            self.copies = c1;
            self.overflow = false;
            roots.push((g[0], whole));
            return;
        }
        // The split wins: build it again where the single tree was, so nothing is left unused.
        self.nodes.truncate(n0);
        self.leaves.truncate(l0);
        self.copies = c0;
        for s in subs {
            let r = self.node(region, s.clone(), 0);
            roots.push((s[0], r));
        }
    }

    /// `g` split by which dimensions its rules are narrow in ([`shape`]): small shapes join the
    /// large one they share the most narrow dimensions with, and at most [`MAX_SHAPES`] remain.
    /// Each part keeps priority order.
    fn shapes(&self, g: &[u32]) -> Vec<Vec<u32>> {
        let mut by: Vec<(u32, Vec<u32>)> = Vec::new();
        for &i in g {
            let m = shape(self.rule(i));
            match by.iter_mut().find(|(s, _)| *s == m) {
                Some((_, v)) => v.push(i),
                None => by.push((m, vec![i])),
            }
        }
        by.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
        let small = (g.len() / 32).max(8);
        let keep = by
            .iter()
            .take(MAX_SHAPES)
            .take_while(|(_, v)| v.len() >= small)
            .count()
            .max(1);
        let rest = by.split_off(keep);
        for (m, v) in rest {
            let to = (0..by.len())
                .max_by_key(|&j| ((by[j].0 & m).count_ones(), by[j].1.len()))
                .unwrap_or(0);
            by[to].1.extend(v);
        }
        by.into_iter()
            .map(|(_, mut v)| {
                v.sort_unstable();
                v
            })
            .collect()
    }

    /// The mean depth (in nodes) of the tree at `r`'s leaves and final answers: what a walk
    /// costs, roughly.
    fn depth(&self, r: Ref) -> f64 {
        let (mut ends, mut sum) = (0usize, 0usize);
        let mut stack = vec![(r, 0usize)];
        while let Some((r, d)) = stack.pop() {
            if r & super::TAG == super::TAG_NODE {
                let n = &self.nodes[(r & super::NODE_MASK) as usize];
                let used = n.thr.iter().filter(|&&t| t != u32::MAX).count() + 1;
                stack.extend(n.kids[..used].iter().map(|&k| (k, d + 1)));
            } else {
                ends += 1;
                sum += d;
            }
        }
        sum as f64 / ends.max(1) as f64
    }

    fn rule(&self, i: u32) -> &Rule {
        &self.rules[i as usize]
    }

    fn node(&mut self, region: &Region, mut set: Vec<u32>, depth: usize) -> Ref {
        if self.trial && self.nodes.len() >= self.max_nodes {
            // A trial that needs more nodes than a build may have fails like one over budget.
            self.copies = self.copies.max(self.budget + 1);
        }
        if self.overflow || (self.trial && self.copies > self.budget) {
            return REF_NONE;
        }
        if let Some(p) = set.iter().position(|&i| covers(self.rule(i), region)) {
            if p == 0 {
                return TAG_DONE | set[0];
            }
            set.truncate(p + 1);
        }
        if set.is_empty() {
            return REF_NONE;
        }
        if set.len() <= LEAF
            || depth >= MAX_DEPTH
            || self.copies > self.budget
            || self.nodes.len() >= self.max_nodes
        {
            return self.leaf(region, set);
        }
        let Some((d, _)) = self.best_any(&set, region) else {
            return self.leaf(region, set);
        };
        let mut parts = Vec::with_capacity(FAN);
        self.parts(d, set, region, PART_LEVELS, &mut parts);
        let at = self.nodes.len();
        self.copies += NODE_COPIES;
        self.nodes.push(Node {
            thr: [u32::MAX; FAN],
            kids: [REF_NONE; FAN],
        });
        let mut thr = [u32::MAX; FAN];
        let mut kids = [REF_NONE; FAN];
        let last = parts.len() - 1;
        for (i, (lo, hi, sub, levels)) in parts.into_iter().enumerate() {
            if i < last {
                thr[i] = hi;
            }
            let mut child = *region;
            child[d] = (lo, hi);
            kids[i] = self.node(&child, sub, depth + levels);
        }
        self.nodes[at].thr = thr;
        self.nodes[at].kids = kids;
        (d as u32) << DIM_SHIFT | at as Ref
    }

    /// The dimension with the best cut of `set`, and that cut.
    fn best_any(&mut self, set: &[u32], region: &Region) -> Option<(usize, Cut)> {
        let mut best: Option<(usize, Cut)> = None;
        for di in 0..self.dims.len() {
            let d = self.dims[di];
            if let Some(c) = self.best_cut(set, d, region[d]) {
                if best
                    .as_ref()
                    .is_none_or(|(_, b)| c.cost(set.len()) < b.cost(set.len()))
                {
                    best = Some((d, c));
                }
            }
        }
        best
    }

    /// Cuts `set` on `d` up to `levels` times while each cut on `d` is about as good as the best
    /// cut on any dimension; pushes the pieces in ascending order with the cuts each took.
    fn parts(
        &mut self,
        d: usize,
        set: Vec<u32>,
        region: &Region,
        levels: usize,
        out: &mut Vec<(u32, u32, Vec<u32>, usize)>,
    ) {
        let range = region[d];
        let n = set.len();
        let taken = PART_LEVELS - levels;
        let cut = if levels == 0 || n <= LEAF {
            None
        } else if taken == 0 {
            self.best_cut(&set, d, range)
        } else {
            match (self.best_cut(&set, d, range), self.best_any(&set, region)) {
                (Some(c), Some((_, b)))
                    if 100 * c.cost(n) <= (100 + SAME_DIM_SLACK) * b.cost(n) =>
                {
                    Some(c)
                }
                _ => None,
            }
        };
        let Some(c) = cut else {
            out.push((range.0, range.1, set, taken.max(1)));
            return;
        };
        let (mut left, mut right) = (Vec::with_capacity(c.left), Vec::with_capacity(c.right));
        for &i in &set {
            let (lo, hi) = self.rule(i).ranges[d];
            if lo <= c.at {
                left.push(i);
            }
            if hi > c.at {
                right.push(i);
            }
        }
        drop(set);
        let mut sub = *region;
        sub[d] = (range.0, c.at);
        self.parts(d, left, &sub, levels - 1, out);
        sub[d] = (c.at + 1, range.1);
        self.parts(d, right, &sub, levels - 1, out);
    }

    /// The best cut of `set` on `d` within `range` ("`<= at` goes left"), if any cut makes both
    /// sides smaller than the whole.
    fn best_cut(&mut self, set: &[u32], d: usize, (rlo, rhi): (u32, u32)) -> Option<Cut> {
        if rlo == rhi {
            return None;
        }
        self.lo.clear();
        self.hi.clear();
        self.cand.clear();
        for &i in set {
            let (lo, hi) = self.rules[i as usize].ranges[d];
            let (lo, hi) = (lo.max(rlo), hi.min(rhi));
            self.lo.push(lo);
            self.hi.push(hi);
            // A useful cut sits just before a rule starts or where one ends.
            if lo > rlo {
                self.cand.push(lo - 1);
            }
            if hi < rhi {
                self.cand.push(hi);
            }
        }
        if self.cand.is_empty() {
            return None;
        }
        self.lo.sort_unstable();
        self.hi.sort_unstable();
        self.cand.sort_unstable();
        self.cand.dedup();
        let n = set.len();
        let (mut nl, mut nh) = (0, 0);
        let mut best: Option<Cut> = None;
        for &at in &self.cand {
            while nl < n && self.lo[nl] <= at {
                nl += 1;
            }
            while nh < n && self.hi[nh] <= at {
                nh += 1;
            }
            let c = Cut {
                at,
                left: nl,
                right: n - nh,
            };
            if best.as_ref().is_none_or(|b| c.cost(n) < b.cost(n)) {
                best = Some(c);
            }
        }
        // One side shrinking is enough: the other keeps its rules on a smaller region, where
        // more of them cover it (a leaf of a few DENYs ahead of a PERMIT ends in final answers
        // this way). The node budget bounds what this costs.
        best.filter(|c| c.left < n || c.right < n)
    }

    /// Writes a leaf: the candidates in priority order, each with the checks `region` still
    /// leaves open.
    fn leaf(&mut self, region: &Region, mut set: Vec<u32>) -> Ref {
        // Drop candidates an earlier one shadows within the region: quadratic, so only on sets
        // of a sane size (larger leaves only arise when cuts stop helping).
        if set.len() <= 64 {
            let mut kept: Vec<u32> = Vec::with_capacity(set.len());
            for &j in &set {
                let rj = self.rule(j);
                if !kept.iter().any(|&i| shadows(self.rule(i), rj, region)) {
                    kept.push(j);
                }
            }
            set = kept;
        }
        self.copies += set.len();
        // The dimensions some candidate still needs checked, padded to a vector width.
        let dims: Vec<usize> = (0..DIMS)
            .filter(|&d| set.iter().any(|&i| !covers_dim(self.rule(i), d, region[d])))
            .collect();
        let width = match dims.len() {
            0..=4 => 4,
            5..=8 => 8,
            9..=16 => 16,
            _ => 24,
        };
        let off = self.leaves.len();
        if off + 2 + width + set.len() * (2 + 2 * width) > MAX_LEAF_WORDS {
            self.overflow = true;
            return REF_NONE;
        }
        self.leaves.extend([set.len() as u32, width as u32]);
        self.leaves
            .extend((0..width).map(|j| dims.get(j).map_or(0, |&d| d as u32)));
        for &i in &set {
            let r = &self.rules[i as usize];
            let flags = r.tcp_flags.map_or(0, |(v, m)| v as u32 | (m as u32) << 8);
            self.leaves.extend([i, flags]);
            let range = |j: usize| dims.get(j).map_or((0, u32::MAX), |&d| r.ranges[d]);
            self.leaves.extend((0..width).map(|j| range(j).0));
            self.leaves
                .extend((0..width).map(|j| range(j).1 - range(j).0));
        }
        TAG_LEAF | off as u32
    }
}
