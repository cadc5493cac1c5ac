//! The punt thread's TAP twins across config commits.
//!
//! A twin is a kernel device, named by its host name: the identity FRR and the kernel know. The
//! router's interfaces are numbered by their place in the tables, and a commit may add, remove
//! or reorder them. So the twins are kept by host name, and each generation of the tables
//! (`Tables::generation`) comes with a [`TwinPlan`]: which host name stands for each interface
//! index, and the twins the commit created for it. The commit creates new twins (and changes
//! existing ones in place) before its tables go live; the punt thread applies the plan when it
//! first sees those tables, and closes the twins the plan no longer names (closing a TAP
//! removes its device, and FRR sees the interface go as on a real box).
//!
//! Reads: the plans handed over by commits. Sets: which twin serves which interface index.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{Tap, TapView, TwinSpec};
use crate::config::Config;

/// The twins of one generation of the tables.
pub struct TwinPlan {
    pub generation: u64,
    /// Per interface index: the host name of its twin (None: no twin).
    pub hosts: Vec<Option<String>>,
    /// Twins created for this generation (new host names, or ones that replace a twin).
    pub new: Vec<Tap>,
}

/// Where commits leave their plans for the punt thread.
pub type Plans = Arc<Mutex<Vec<TwinPlan>>>;

struct Twin {
    tap: Tap,
    view: TapView,
}

/// The twins, by host name, and which interface index each serves now.
#[derive(Default)]
pub struct Twins {
    twins: Vec<Twin>,
    /// Interface index -> index into `twins`.
    by_ifx: Vec<Option<usize>>,
}

impl Twins {
    /// Twins for the first tables: `taps` indexed by interface index.
    pub fn new(taps: Vec<Option<Tap>>) -> Twins {
        let mut t = Twins::default();
        for tap in taps {
            t.by_ifx.push(tap.map(|tap| {
                t.twins.push(Twin {
                    view: TapView {
                        tap: tap.name.clone(),
                        ifindex: tap.ifindex,
                        ..Default::default()
                    },
                    tap,
                });
                t.twins.len() - 1
            }));
        }
        t
    }

    /// The twin serving interface `ifx`, with its counters.
    pub fn get(&mut self, ifx: u32) -> Option<(&Tap, &mut TapView)> {
        let i = (*self.by_ifx.get(ifx as usize)?)?;
        let t = &mut self.twins[i];
        Some((&t.tap, &mut t.view))
    }

    /// The host names serving each interface index now.
    pub fn hosts(&self) -> Vec<Option<String>> {
        self.by_ifx
            .iter()
            .map(|i| i.map(|i| self.twins[i].tap.name.clone()))
            .collect()
    }

    /// Applies `plan`: its new twins join (replacing any of the same host name, whose device
    /// goes with it), twins it does not name are closed, and interface indexes follow it.
    pub fn apply(&mut self, plan: TwinPlan) {
        for tap in plan.new {
            let view = TapView {
                tap: tap.name.clone(),
                ifindex: tap.ifindex,
                ..Default::default()
            };
            match self.twins.iter_mut().find(|t| t.tap.name == tap.name) {
                Some(t) => *t = Twin { tap, view },
                None => self.twins.push(Twin { tap, view }),
            }
        }
        self.twins
            .retain(|t| plan.hosts.iter().flatten().any(|h| *h == t.tap.name));
        let at: HashMap<&str, usize> = self
            .twins
            .iter()
            .enumerate()
            .map(|(i, t)| (t.tap.name.as_str(), i))
            .collect();
        self.by_ifx = plan
            .hosts
            .iter()
            .map(|h| h.as_deref().and_then(|h| at.get(h).copied()))
            .collect();
    }

    /// Every twin's counters, named by the interface each serves (`names` by interface index).
    pub fn views(&self, names: &[String]) -> Vec<TapView> {
        self.by_ifx
            .iter()
            .enumerate()
            .filter_map(|(ifx, i)| {
                let mut v = self.twins[(*i)?].view.clone();
                v.interface = names.get(ifx).cloned().unwrap_or_default();
                Some(v)
            })
            .collect()
    }

    /// The twins' devices, for the process that takes over (a hitless restart).
    pub fn into_taps(self) -> Vec<Tap> {
        self.twins.into_iter().map(|t| t.tap).collect()
    }

    /// Every twin's descriptor, to wait on.
    pub fn fds(&self) -> impl Iterator<Item = i32> + '_ {
        self.twins.iter().map(|t| t.tap.raw_fd())
    }
}

/// A twin a commit keeps but changes (MAC, MTU, admin state or addresses), once its tables
/// are live.
pub struct TwinChange {
    pub ifindex: u32,
    pub old: TwinSpec,
    pub new: TwinSpec,
}

/// What a commit does to the twins: the plan for the punt thread, the twins to change in place
/// once the tables are live, and the twins it made (whose addresses are announced again).
pub struct Prepared {
    pub plan: TwinPlan,
    pub changes: Vec<TwinChange>,
    pub made: Vec<(u32, TwinSpec)>,
}

/// What a commit from `old` to `new` (tables of `generation`) does to the twins: creates those
/// of host names `old` has not (now, so a failure refuses the commit and changes nothing), and
/// lists those to change in place. Twins whose host name `new` no longer uses close when the
/// punt thread applies the plan. A twin is the same device when its host name is, whatever its
/// interface is called now.
pub fn prepare(old: &Config, new: &Config, generation: u64) -> Result<Prepared, String> {
    let mut plan = TwinPlan {
        generation,
        hosts: new
            .interfaces
            .iter()
            .map(|i| Some(i.host_name.clone()))
            .collect(),
        new: Vec::new(),
    };
    let mut changes = Vec::new();
    let mut made = Vec::new();
    for ic in &new.interfaces {
        let spec = TwinSpec::of(ic);
        match old.interfaces.iter().find(|o| o.host_name == ic.host_name) {
            Some(o) => {
                let was = TwinSpec::of(o);
                if was != spec {
                    let ifindex = super::tap::if_index(&spec.host)
                        .map_err(|e| format!("interface {}: TAP {}: {e}", ic.name, spec.host))?;
                    changes.push(TwinChange {
                        ifindex,
                        old: was,
                        new: spec,
                    });
                }
            }
            None => {
                let tap = Tap::create(&spec).map_err(|e| format!("interface {}: {e}", ic.name))?;
                made.push((tap.ifindex, spec));
                plan.new.push(tap);
            }
        }
    }
    Ok(Prepared {
        plan,
        changes,
        made,
    })
}

/// How long after a twin is made its addresses are announced again (see [`announce_later`]).
const ANNOUNCE_AGAIN: std::time::Duration = std::time::Duration::from_secs(1);

/// Announces the addresses of new twins once more, a second after they were made, from a
/// thread of its own. zebra (FRR 8.4, measured here) reads link changes and address changes
/// on two netlink sockets: an address added right after its device was made can reach it
/// first, and is then dropped for want of the interface, so FRR never learns it (an OSPF
/// adjacency over a twin added by commit failed that way about one time in three under load).
/// Adding an address that is there, with NLM_F_REPLACE, makes the kernel announce it again;
/// by then zebra knows the device. A twin gone (or its index reused) meanwhile is skipped.
pub fn announce_later(twins: Vec<(u32, TwinSpec)>) {
    if twins.is_empty() {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("twin-addresses".into())
        .spawn(move || {
            std::thread::sleep(ANNOUNCE_AGAIN);
            for (ifindex, spec) in twins {
                if super::tap::if_index(&spec.host).ok() != Some(ifindex) {
                    continue;
                }
                let without = TwinSpec {
                    v4: Vec::new(),
                    v6: Vec::new(),
                    ..spec.clone()
                };
                let _ = super::tap::change(ifindex, &without, &spec);
            }
        });
}

/// The kernel's index of each twin of `cfg`'s interfaces, to its host name (what FPM next hops
/// name interfaces by).
pub fn kernel_indexes(cfg: &Config) -> HashMap<u32, String> {
    cfg.interfaces
        .iter()
        .filter_map(|i| {
            Some((
                super::tap::if_index(&i.host_name).ok()?,
                i.host_name.clone(),
            ))
        })
        .collect()
}

/// Makes the changed twins look as their interfaces now do; what failed, as warnings.
pub fn change(changes: &[TwinChange]) -> Vec<String> {
    changes
        .iter()
        .filter_map(|c| super::tap::change(c.ifindex, &c.old, &c.new).err())
        .map(|e| e.to_string())
        .collect()
}

/// The host names of a generation that came without a plan (tables built by something other
/// than a commit): each interface keeps the twin of the interface of the same name before.
pub fn carried_hosts(
    before: &[Option<String>],
    old_names: &[String],
    new_names: &[String],
) -> Vec<Option<String>> {
    new_names
        .iter()
        .map(|n| {
            let i = old_names.iter().position(|o| o == n)?;
            before.get(i).cloned().flatten()
        })
        .collect()
}

/// Interface `ifx` of one generation's list (`from`) in another's (`to`), by name.
pub fn renumbered(from: &[String], to: &[String], ifx: u32) -> Option<u32> {
    let name = from.get(ifx as usize)?;
    to.iter().position(|n| n == name).map(|i| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn interfaces_keep_their_twins_by_name_when_others_come_and_go() {
        let before = vec![Some("lr-a".to_string()), None, Some("lr-c".to_string())];
        let old = names(&["a", "b", "c"]);
        let new = names(&["c", "d", "a"]);
        assert_eq!(
            carried_hosts(&before, &old, &new),
            vec![Some("lr-c".to_string()), None, Some("lr-a".to_string())]
        );
        assert_eq!(renumbered(&old, &new, 0), Some(2));
        assert_eq!(renumbered(&old, &new, 1), None, "b is gone");
        assert_eq!(renumbered(&old, &new, 2), Some(0));
        assert_eq!(renumbered(&old, &new, 7), None, "no such index");
    }
}
