//! An APN's address pool: IPv4 host addresses or IPv6 /64 prefixes, by their offset in the
//! pool (the data plane maps the same offsets to contexts, `dataplane::gtp`).
//!
//! Addresses never handed out are taken first, then released ones in the order they came back
//! (the longest-free first), so an address is reused as late as possible: a packet in flight to
//! a UE that just left does not reach the next one. A set bit per offset says what is taken;
//! every take and give is checked against it, so the pool cannot hand out one address twice nor
//! lose one (the property test below drives it against a set).

use std::collections::VecDeque;

pub struct Pool {
    /// The first offset and one past the last that may be handed out.
    first: u32,
    end: u32,
    fresh: u32,
    released: VecDeque<u32>,
    used: Vec<u64>,
    in_use: u32,
}

impl Pool {
    /// A pool of offsets `first..end`.
    pub fn new(first: u32, end: u32) -> Pool {
        let end = end.max(first);
        Pool {
            first,
            end,
            fresh: first,
            released: VecDeque::new(),
            used: vec![0; (end as usize).div_ceil(64)],
            in_use: 0,
        }
    }

    /// An IPv4 pool of `size` addresses: the first and last (the prefix's network and
    /// broadcast addresses) are not handed out when there are more than two.
    pub fn v4(size: u32) -> Pool {
        if size > 2 {
            Pool::new(1, size - 1)
        } else {
            Pool::new(0, size)
        }
    }

    fn is_used(&self, o: u32) -> bool {
        self.used[(o / 64) as usize] & (1 << (o % 64)) != 0
    }

    fn set(&mut self, o: u32, on: bool) {
        let w = &mut self.used[(o / 64) as usize];
        if on {
            *w |= 1 << (o % 64);
        } else {
            *w &= !(1 << (o % 64));
        }
    }

    /// Takes a free offset, if any.
    pub fn take(&mut self) -> Option<u32> {
        while self.fresh < self.end {
            let o = self.fresh;
            self.fresh += 1;
            if !self.is_used(o) {
                self.set(o, true);
                self.in_use += 1;
                return Some(o);
            }
        }
        while let Some(o) = self.released.pop_front() {
            // A released offset may have been taken since as a static address.
            if !self.is_used(o) {
                self.set(o, true);
                self.in_use += 1;
                return Some(o);
            }
        }
        None
    }

    /// Takes offset `o` (a static address the MS asked for): false if it is outside the pool
    /// or taken.
    pub fn take_this(&mut self, o: u32) -> bool {
        if o < self.first || o >= self.end || self.is_used(o) {
            return false;
        }
        self.set(o, true);
        self.in_use += 1;
        true
    }

    /// Gives `o` back; false (and nothing changes) if it was not taken.
    pub fn give(&mut self, o: u32) -> bool {
        if o < self.first || o >= self.end || !self.is_used(o) {
            return false;
        }
        self.set(o, false);
        self.in_use -= 1;
        if o < self.fresh {
            self.released.push_back(o);
        }
        true
    }

    pub fn in_use(&self) -> u32 {
        self.in_use
    }

    pub fn size(&self) -> u32 {
        self.end - self.first
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fresh_addresses_first_then_the_longest_free() {
        let mut p = Pool::v4(8);
        let got: Vec<u32> = (0..6).map(|_| p.take().unwrap()).collect();
        assert_eq!(
            got,
            [1, 2, 3, 4, 5, 6],
            "not the network nor the broadcast address"
        );
        assert_eq!(p.take(), None);
        assert!(p.give(4) && p.give(2));
        assert!(!p.give(2), "twice");
        assert_eq!((p.take(), p.take(), p.take()), (Some(4), Some(2), None));
        assert!(!p.take_this(7) && !p.take_this(3));
    }

    proptest! {
        #[test]
        fn never_hands_out_an_address_twice_nor_loses_one(
            ops in proptest::collection::vec((0u8..3, 0u32..40), 1..400)
        ) {
            let mut p = Pool::new(2, 34);
            let mut held = std::collections::BTreeSet::new();
            for (op, o) in ops {
                match op {
                    0 => match p.take() {
                        Some(x) => prop_assert!(held.insert(x) && (2..34).contains(&x)),
                        None => prop_assert_eq!(held.len(), 32),
                    },
                    1 => prop_assert_eq!(p.give(o), held.remove(&o)),
                    _ => {
                        let ok = (2..34).contains(&o) && !held.contains(&o);
                        prop_assert_eq!(p.take_this(o), ok);
                        if ok { held.insert(o); }
                    }
                }
                prop_assert_eq!(p.in_use() as usize, held.len());
            }
        }
    }
}
