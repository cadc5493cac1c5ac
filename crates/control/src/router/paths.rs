//! Path objects: next hops that a route source owns and changes in place. Every route pointing
//! at a path follows it, so changing where a million routes go is one write here and one
//! publish of the small tables; no route is touched and no FIB slot is rebuilt (VPP's
//! load-balance objects play this part).
//!
//! A path is the one shared object for "where a route goes": the members of an ECMP group with
//! their weights (spread over flow-hash buckets), and a backup used while no primary member is
//! up. FPM's next-hop objects are paths today; protection schemes (an uplink pair, pseudowire
//! redundancy) and labelled paths are meant to be paths too, not objects of their own.
//!
//! Reads: the adjacency next hops its members name (interned by [`Router`]'s other next-hop
//! makers). Sets: `Router::next_hops[id]` (an `Ecmp` over the primary members, or a drop kind)
//! and the backup members kept here, which [`Router::tables`] falls back to when every
//! primary member's interface is down.
//!
//! Ids are slots of `next_hops`, reused after [`Router::path_free`]. A freed id is handed out
//! again only after two publishes: a worker that looked up a route just before its removal
//! was published may still read the id's old content, never a stranger's.

use dataplane::tables::NextHop;

use super::Router;

/// The most buckets an uneven ECMP group spreads its weights over (about 1.5% precision).
pub const ECMP_BUCKETS: usize = 64;

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// What a path forwards to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathDef {
    /// Flow-hash buckets over single-path next hops (repeated in proportion to their weight);
    /// `backup` takes over while every primary member is down.
    Members {
        primary: Box<[u32]>,
        backup: Box<[u32]>,
    },
    Blackhole,
    Reject,
}

/// The paths of one router.
#[derive(Default)]
pub(super) struct Paths {
    /// Backup members by path id (only paths that have one).
    pub backups: std::collections::HashMap<u32, Box<[u32]>>,
    /// Path ids in use.
    pub live: std::collections::HashSet<u32>,
    /// Ids free to reuse.
    free: Vec<u32>,
    /// Ids freed, with the publish count at the time: reusable two publishes later.
    quarantine: Vec<(u32, u64)>,
    /// Publishes so far.
    pub publishes: u64,
}

impl PathDef {
    /// The primary members of `members` (next-hop id, weight), bucketed by weight: equal
    /// weights give each member one bucket; uneven ones are reduced by their common divisor and,
    /// if they still need more than [`ECMP_BUCKETS`] buckets, scaled to fit (each member keeps at
    /// least one). Sorted, so equal groups compare equal.
    pub fn weighted(members: &[(u32, u16)]) -> Box<[u32]> {
        let mut m: Vec<(u32, u32)> = Vec::with_capacity(members.len());
        let mut sorted: Vec<(u32, u16)> = members.to_vec();
        sorted.sort_unstable();
        for (id, w) in sorted {
            let w = w.max(1) as u32;
            match m.last_mut() {
                Some(last) if last.0 == id => last.1 += w,
                _ => m.push((id, w)),
            }
        }
        if m.iter().all(|&(_, w)| w == m[0].1) {
            return m.iter().map(|&(id, _)| id).collect();
        }
        let g = m.iter().fold(0, |g, &(_, w)| gcd(g, w));
        let total: u32 = m.iter().map(|&(_, w)| w / g).sum();
        let buckets = |w: u32| {
            if total as usize <= ECMP_BUCKETS {
                w / g
            } else {
                ((w as u64 * ECMP_BUCKETS as u64) / (total as u64 * g as u64)).max(1) as u32
            }
        };
        m.iter()
            .flat_map(|&(id, w)| std::iter::repeat_n(id, buckets(w) as usize))
            .collect()
    }

    fn next_hop(&self) -> NextHop {
        match self {
            PathDef::Members { primary, .. } => NextHop::Ecmp(primary.clone()),
            PathDef::Blackhole => NextHop::Blackhole,
            PathDef::Reject => NextHop::Reject,
        }
    }
}

impl Router {
    /// A new path; the caller publishes before any route points at it.
    pub fn path_new(&mut self, def: PathDef) -> u32 {
        super::routes_changed();
        let p = &mut self.paths;
        let publishes = p.publishes;
        p.quarantine.retain(|&(id, at)| {
            let ready = publishes >= at + 2;
            if ready {
                p.free.push(id);
            }
            !ready
        });
        let id = match self.paths.free.pop() {
            Some(id) => id,
            None => {
                self.next_hops.push(NextHop::NoRoute);
                (self.next_hops.len() - 1) as u32
            }
        };
        self.paths.live.insert(id);
        self.path_set(id, def);
        id
    }

    /// Changes path `id` in place: every route using it follows at the next publish.
    pub fn path_set(&mut self, id: u32, def: PathDef) {
        super::routes_changed();
        debug_assert!(self.paths.live.contains(&id), "path {id} is live");
        self.next_hops[id as usize] = def.next_hop();
        match def {
            PathDef::Members { backup, .. } if !backup.is_empty() => {
                self.paths.backups.insert(id, backup);
            }
            _ => {
                self.paths.backups.remove(&id);
            }
        }
    }

    /// Frees path `id`; no route may point at it any more.
    pub fn path_free(&mut self, id: u32) {
        super::routes_changed();
        if self.paths.live.remove(&id) {
            self.next_hops[id as usize] = NextHop::NoRoute;
            self.paths.backups.remove(&id);
            self.paths.quarantine.push((id, self.paths.publishes));
        }
    }

    /// Path ids in use (for `show` and tests).
    pub fn path_count(&self) -> usize {
        self.paths.live.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24] }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [198.51.100.1/24] }
neighbors:
  - { interface: p0, ip: 192.0.2.2, mac: "02:00:00:00:00:02" }
  - { interface: p1, ip: 198.51.100.2, mac: "02:00:00:00:01:02" }
"#;

    fn router() -> (Router, u32, u32) {
        let cfg = crate::config::parse(CONFIG, std::path::Path::new("paths.yaml")).unwrap();
        let mut r = Router::build(cfg).unwrap();
        let a = r.nh_via(0, Some("192.0.2.2".parse().unwrap()));
        let b = r.nh_via(1, Some("198.51.100.2".parse().unwrap()));
        (r, a, b)
    }

    #[test]
    fn the_backup_takes_over_while_every_primary_member_is_down() {
        let (mut r, a, b) = router();
        let path = r.path_new(PathDef::Members {
            primary: Box::new([a]),
            backup: Box::new([b]),
        });
        r.publish().unwrap();
        let tx_if = |r: &Router| match &r.shared.load().next_hops[path as usize] {
            NextHop::Ecmp(m) if m.len() == 1 => match r.shared.load().next_hops[m[0] as usize] {
                NextHop::Forward { tx_if, .. } => tx_if,
                ref other => panic!("{other:?}"),
            },
            NextHop::Forward { tx_if, .. } => *tx_if,
            other => panic!("{other:?}"),
        };
        assert_eq!(tx_if(&r), 0, "the primary");
        r.ports_down.insert("p0".into());
        r.publish().unwrap();
        assert_eq!(tx_if(&r), 1, "the backup");
        r.ports_down.clear();
        r.publish().unwrap();
        assert_eq!(tx_if(&r), 0, "the primary again");
    }

    #[test]
    fn a_freed_id_is_reused_only_after_two_publishes() {
        let (mut r, a, _) = router();
        let def = || PathDef::Members {
            primary: Box::new([a]),
            backup: Box::new([]),
        };
        let p = r.path_new(def());
        r.path_free(p);
        let q = r.path_new(def());
        assert_ne!(p, q, "not reused before any publish");
        r.publish().unwrap();
        r.path_free(q);
        let x = r.path_new(def());
        assert_ne!(x, q);
        r.publish().unwrap();
        r.publish().unwrap();
        let len = r.next_hops.len();
        let y = r.path_new(def());
        let z = r.path_new(def());
        assert!([p, q].contains(&y) && [p, q].contains(&z) && y != z);
        assert_eq!(r.next_hops.len(), len, "the table did not grow");
    }

    #[test]
    fn weights_become_buckets() {
        assert_eq!(&*PathDef::weighted(&[(5, 1), (3, 1)]), &[3, 5]);
        assert_eq!(&*PathDef::weighted(&[(5, 2), (3, 4)]), &[3, 3, 5]);
        assert_eq!(&*PathDef::weighted(&[(5, 1), (5, 1)]), &[5]);
        let many = PathDef::weighted(&[(1, 255), (2, 1)]);
        assert_eq!(many.len(), ECMP_BUCKETS);
        assert_eq!(many.iter().filter(|&&m| m == 2).count(), 1);
    }
}
