//! Next-hop objects: definition, resolution into the set bound to each (changed in place when
//! the object changes), and deletion with the Linux semantics.

use super::*;

impl Rib {
    pub(super) fn nexthop_msg(&mut self, n: &Nexthop<'_>, out: &mut Vec<Change>) {
        // A labelled object cannot be forwarded through as given: it is as if deleted, so the
        // routes through it go (Linux's semantics), and a later unlabelled one defines it again.
        if n.op == Op::New && n.encap {
            self.c.labelled += 1;
            if self.nhs.get(&n.id).is_some_and(|o| o.def.is_some()) {
                self.delete_nh(n.id, out);
            }
            return;
        }
        if n.op == Op::Del {
            if self.nhs.get(&n.id).is_some_and(|o| o.def.is_some()) {
                self.c.nh_dels += 1;
                self.delete_nh(n.id, out);
            } else {
                self.c.nh_del_unknown += 1;
            }
            return;
        }
        let def = if !n.group.is_empty() {
            let mut ms: Vec<GroupMember> = n.group.iter().collect();
            ms.sort_unstable();
            NhDef::Group(ms.into())
        } else if n.blackhole {
            NhDef::Blackhole
        } else {
            NhDef::Single(NextHop::new(n.gateway, n.oif))
        };
        let gen = self.gen;
        let obj = self.nhs.entry(n.id).or_insert_with(NhObj::placeholder);
        obj.gen = gen;
        if obj.def.as_ref() == Some(&def) {
            self.c.nh_unchanged += 1;
            return;
        }
        let old = obj.def.replace(def);
        match &old {
            None => {
                self.c.nh_adds += 1;
                self.defined_nhs += 1;
            }
            Some(_) => self.c.nh_changes += 1,
        }
        if let Some(NhDef::Group(ms)) = &old {
            self.leave_members(n.id, ms);
        }
        if let Some(NhDef::Group(ms)) = &self.nhs[&n.id].def {
            let ids: Vec<u32> = ms.iter().map(|m| m.id).collect();
            for m in ids {
                let child = self.nhs.entry(m).or_insert_with(NhObj::placeholder);
                if !child.parents.contains(&n.id) {
                    child.parents.push(n.id);
                }
            }
        }
        self.refresh(n.id, out, true);
    }

    /// Group `id` no longer lists `members`: drop it from their parent lists.
    fn leave_members(&mut self, id: u32, members: &[GroupMember]) {
        for m in members {
            if let Some(child) = self.nhs.get_mut(&m.id) {
                child.parents.retain(|&p| p != id);
                self.gc(m.id);
            }
        }
    }

    /// What object `id` resolves to now, or `None` (undefined, or a group with no usable
    /// member).
    pub(super) fn resolve(&self, id: u32) -> Option<NhSet> {
        match self.nhs.get(&id)?.def.as_ref()? {
            NhDef::Single(h) => Some(NhSet::Forward(Box::new([*h]))),
            NhDef::Blackhole => Some(NhSet::Blackhole),
            NhDef::Group(ms) => {
                let mut hops = Vec::with_capacity(ms.len());
                let mut blackhole = false;
                for m in ms.iter() {
                    // Members that are groups (Linux has no nested groups) or undefined are
                    // skipped; a group of blackholes only is a blackhole.
                    match self.nhs.get(&m.id).and_then(|o| o.def.as_ref()) {
                        Some(NhDef::Single(h)) => hops.push(NextHop {
                            weight: m.weight,
                            ..*h
                        }),
                        Some(NhDef::Blackhole) => blackhole = true,
                        _ => {}
                    }
                }
                if !hops.is_empty() {
                    hops.sort_unstable();
                    Some(NhSet::Forward(hops.into()))
                } else if blackhole {
                    Some(NhSet::Blackhole)
                } else {
                    None
                }
            }
        }
    }

    /// Re-resolves object `id` into its bound set: a new content changes the set in place and
    /// no route; only a set appearing or going installs or removes the routes using it. Then
    /// (once, not transitively: resolution looks one level down) the groups holding it.
    fn refresh(&mut self, id: u32, out: &mut Vec<Change>, parents_too: bool) {
        let new = self.resolve(id);
        let Some(obj) = self.nhs.get(&id) else {
            return;
        };
        match (obj.set, new) {
            (Some(s), Some(content)) => self.sets.update_bound(s, content, out),
            (None, Some(content)) => {
                let s = self.sets.acquire_bound(content, out);
                self.nhs.get_mut(&id).expect("present").set = Some(s);
                for r in self.users(id) {
                    self.sets.retain(s);
                    self.set_route(r, Some(s), out);
                }
            }
            (Some(s), None) => {
                self.nhs.get_mut(&id).expect("present").set = None;
                for r in self.users(id) {
                    self.set_route(r, None, out);
                }
                self.sets.release(s);
            }
            (None, None) => {}
        }
        if parents_too {
            for p in self.nhs[&id].parents.clone() {
                self.refresh(p, out, false);
            }
        }
    }

    /// Deletes object `id` as Linux does: its routes go, it leaves its groups, and groups left
    /// empty are deleted in turn.
    pub(super) fn delete_nh(&mut self, id: u32, out: &mut Vec<Change>) {
        let mut work = vec![id];
        while let Some(id) = work.pop() {
            let users = self.users(id);
            self.c.routes_flushed += users.len() as u64;
            for r in users {
                self.remove_route(r, out);
            }
            let Some(obj) = self.nhs.remove(&id) else {
                continue;
            };
            if obj.def.is_some() {
                self.defined_nhs -= 1;
            }
            if let Some(s) = obj.set {
                self.sets.release(s);
            }
            if let Some(NhDef::Group(ms)) = &obj.def {
                self.leave_members(id, ms);
            }
            for p in obj.parents {
                let Some(pobj) = self.nhs.get_mut(&p) else {
                    continue;
                };
                let Some(NhDef::Group(ms)) = &pobj.def else {
                    continue;
                };
                let rest: Vec<GroupMember> = ms.iter().copied().filter(|m| m.id != id).collect();
                if rest.is_empty() {
                    work.push(p);
                } else {
                    pobj.def = Some(NhDef::Group(rest.into()));
                    self.refresh(p, out, false);
                }
            }
        }
    }
}
