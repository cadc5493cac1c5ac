//! The RIB's internal invariants, checked from scratch (tests and fuzzing only: it walks
//! everything).

use super::*;

impl Rib {
    /// Checks every internal invariant (tests and fuzzing); panics on a broken one.
    #[doc(hidden)]
    pub fn check_invariants(&self) {
        let mut refs: FxHashMap<NhSetId, u32> = FxHashMap::default();
        let mut unresolved = 0;
        for i in self.index.iter() {
            let e = &self.routes[i as usize];
            assert_eq!(self.index.get(&self.routes, &e.key), Some(i));
            match e.set {
                Some(s) => *refs.entry(s).or_default() += 1,
                None => unresolved += 1,
            }
            if e.nh_id != 0 {
                let obj = &self.nhs[&e.nh_id];
                assert_eq!(e.set, obj.set, "route follows its object");
                assert!(self.users(e.nh_id).contains(&i));
            }
        }
        assert_eq!(unresolved, self.unresolved);
        let mut defined = 0;
        for (&id, o) in &self.nhs {
            assert_eq!(self.users(id).len() as u32, o.users);
            if let Some(s) = o.set {
                *refs.entry(s).or_default() += 1;
                assert!(self.sets.is_bound(s), "object {id} holds an interned set");
            }
            assert_eq!(
                o.set.and_then(|s| self.sets.get(s)).cloned(),
                self.resolve(id),
                "object {id}'s set follows its definition"
            );
            if o.def.is_some() {
                defined += 1;
            } else {
                assert!(o.set.is_none());
                assert!(
                    o.users > 0 || !o.parents.is_empty(),
                    "placeholder {id} kept"
                );
            }
            for p in &o.parents {
                match &self.nhs[p].def {
                    Some(NhDef::Group(ms)) => assert!(ms.iter().any(|m| m.id == id)),
                    _ => panic!("parent {p} of {id} is not a group"),
                }
            }
            if let Some(NhDef::Group(ms)) = &o.def {
                for m in ms.iter() {
                    assert!(self.nhs[&m.id].parents.contains(&id));
                }
            }
        }
        assert_eq!(defined, self.defined_nhs);
        for (id, _, n) in self.sets.iter() {
            assert_eq!(refs.get(&id).copied().unwrap_or(0), n, "refcount of {id:?}");
        }
    }
}
