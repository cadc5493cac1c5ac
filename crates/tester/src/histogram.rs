//! Latency histogram: log-linear buckets (32 per power of two), so any value from 1 ns to 4.29 s
//! is counted in one add and read back within 1/32 (3.1%) of itself; values below 32 ns exactly.
//! 896 buckets of u64: 7 KiB per stream, of which a trial touches a handful of lines.

const SUB_BITS: u32 = 5;
const SUB: usize = 1 << SUB_BITS;
pub const BUCKETS: usize = (32 - SUB_BITS as usize + 1) * SUB;

#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

#[inline(always)]
pub fn bucket(v: u32) -> usize {
    if (v as usize) < SUB {
        return v as usize;
    }
    let e = 31 - v.leading_zeros(); // >= SUB_BITS
    let shift = e - SUB_BITS;
    ((shift as usize + 1) << SUB_BITS) + ((v >> shift) as usize - SUB)
}

/// The smallest value of bucket `i` and the width of the bucket.
pub fn bucket_range(i: usize) -> (u64, u64) {
    if i < SUB {
        return (i as u64, 1);
    }
    let shift = (i >> SUB_BITS) - 1;
    let m = (i & (SUB - 1)) + SUB;
    ((m as u64) << shift, 1u64 << shift)
}

impl Histogram {
    pub fn new() -> Self {
        let mut counts = Box::new([0; BUCKETS]);
        // Commit the pages now, not at the first sample of a trial.
        counts.fill(1);
        counts.fill(0);
        Self { counts }
    }

    /// Empties it in place (no new allocation, whose fresh pages would fault during a trial).
    pub fn clear(&mut self) {
        self.counts.fill(0);
    }

    #[inline(always)]
    pub fn add(&mut self, v: u32) {
        self.counts[bucket(v)] += 1;
    }

    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += b;
        }
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The value below which a fraction `q` of the samples lie, as the midpoint of the bucket
    /// that holds the q-th sample (exact below 32). None when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, w) = bucket_range(i);
                return Some(lo + w / 2);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_tile_the_range() {
        let mut next = 0u64;
        for i in 0..BUCKETS {
            let (lo, w) = bucket_range(i);
            assert_eq!(lo, next, "bucket {i}");
            next = lo + w;
        }
        assert_eq!(next, 1u64 << 32);
        assert_eq!(bucket(u32::MAX), BUCKETS - 1);
    }

    proptest! {
        #[test]
        fn every_value_lands_in_its_bucket(v: u32) {
            let (lo, w) = bucket_range(bucket(v));
            prop_assert!(lo <= v as u64 && (v as u64) < lo + w);
            prop_assert!(w == 1 || w * 32 <= lo, "relative width at most 1/32");
        }
    }

    #[test]
    fn quantiles_within_the_stated_resolution() {
        let mut h = Histogram::new();
        for v in 1..=10_000u32 {
            h.add(v * 100); // 100 ns .. 1 ms, uniform
        }
        for (q, want) in [(0.5, 500_000.0), (0.99, 990_000.0), (0.999, 999_000.0)] {
            let got = h.quantile(q).unwrap() as f64;
            assert!(
                (got - want).abs() / want < 1.0 / 32.0,
                "q{q}: {got} vs {want}"
            );
        }
        assert_eq!(Histogram::new().quantile(0.5), None);
        let mut exact = Histogram::new();
        exact.add(7);
        assert_eq!(exact.quantile(0.99), Some(7));
    }
}
