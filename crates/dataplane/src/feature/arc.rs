//! Feature arcs: per interface and direction, the ordered list of feature steps a packet takes.
//!
//! A step is an enum variant carrying its compiled state ([`Step`]); the order is not the order
//! the config names them in but the one [`RUNS_BEFORE`] declares, so a new feature says where
//! it belongs once, here, and every interface's arc puts it there. An interface with no step
//! has no arc at all (`Tables::features` holds None for it): features that are off cost nothing.
//!
//! The input arc runs inside ip4-forward and ip6-forward, after header validation and before
//! the route lookup (`feature::input`); the output arc runs in the output-features node
//! (`feature::output`). Flow accounting sits on either arc, but an ingress record names the
//! output interface, so both directions are accounted in output-features, after the lookup.

use std::sync::Arc;

use super::{Acl, Qos, Urpf};
use crate::counters::DropReason;

/// One step of an arc, with what it needs to run.
pub enum Step {
    Acl(Arc<Acl>),
    /// QoS classify, mark and police.
    Qos(Arc<Qos>),
    /// Reverse-path check (input only).
    Urpf(Urpf),
    /// Flow accounting (NetFlow/IPFIX).
    Flow,
}

/// A step's kind, without its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepKind {
    Acl,
    Qos,
    Urpf,
    Flow,
}

/// The direction of an arc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Input,
    Output,
}

/// `(a, b)`: where both are on one arc, `a` runs before `b`. DESIGN.md's order: filter first
/// (a denied packet is neither counted by QoS nor policed), then classify, mark and police, then
/// the source check, then accounting (records see the marking a packet leaves with).
pub const RUNS_BEFORE: &[(StepKind, StepKind)] = &[
    (StepKind::Acl, StepKind::Qos),
    (StepKind::Qos, StepKind::Urpf),
    (StepKind::Urpf, StepKind::Flow),
];

impl StepKind {
    pub const ALL: &'static [StepKind] =
        &[StepKind::Acl, StepKind::Qos, StepKind::Urpf, StepKind::Flow];

    /// The name traces, `show errors` and `show interfaces` use.
    pub fn name(self) -> &'static str {
        match self {
            StepKind::Acl => "acl",
            StepKind::Qos => "qos",
            StepKind::Urpf => "urpf",
            StepKind::Flow => "flow",
        }
    }

    /// The drop reasons the step owns.
    pub fn drops(self) -> &'static [DropReason] {
        match self {
            StepKind::Acl => &[DropReason::AclDenied],
            StepKind::Qos => &[DropReason::PolicerDropped],
            StepKind::Urpf => &[DropReason::UrpfFailed],
            StepKind::Flow => &[],
        }
    }

    /// Whether the step may sit on an arc of this direction.
    pub fn allowed(self, d: Direction) -> bool {
        !(self == StepKind::Urpf && d == Direction::Output)
    }
}

impl Step {
    pub fn kind(&self) -> StepKind {
        match self {
            Step::Acl(_) => StepKind::Acl,
            Step::Qos(_) => StepKind::Qos,
            Step::Urpf(_) => StepKind::Urpf,
            Step::Flow => StepKind::Flow,
        }
    }
}

/// Does `a` run before `b`, directly or through other steps of [`RUNS_BEFORE`]?
pub fn runs_before(a: StepKind, b: StepKind) -> bool {
    let mut reach = vec![a];
    while let Some(x) = reach.pop() {
        for &(p, q) in RUNS_BEFORE {
            if p == x {
                if q == b {
                    return true;
                }
                reach.push(q);
            }
        }
    }
    false
}

/// Puts `steps` in arc order. Refuses a kind twice, or a kind the direction does not take.
pub fn order(mut steps: Vec<Step>, d: Direction) -> Result<Box<[Step]>, String> {
    for (i, s) in steps.iter().enumerate() {
        let k = s.kind();
        if !k.allowed(d) {
            return Err(format!("{} is not an {d:?} feature", k.name()));
        }
        if steps[..i].iter().any(|o| o.kind() == k) {
            return Err(format!("{} is on the {d:?} arc twice", k.name()));
        }
    }
    // Few steps: a selection sort by "nothing left runs before it" keeps the order total.
    let mut out = Vec::with_capacity(steps.len());
    while !steps.is_empty() {
        let first = (0..steps.len())
            .find(|&i| !steps.iter().any(|o| runs_before(o.kind(), steps[i].kind())))
            .ok_or("the RUNS_BEFORE table has a cycle")?;
        out.push(steps.remove(first));
    }
    Ok(out.into_boxed_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_is_total_and_acyclic() {
        for &a in StepKind::ALL {
            assert!(!runs_before(a, a), "{a:?} runs before itself");
            for &b in StepKind::ALL {
                if a != b {
                    assert!(
                        runs_before(a, b) ^ runs_before(b, a),
                        "{a:?} and {b:?} are not ordered"
                    );
                }
            }
        }
    }

    #[test]
    fn steps_come_out_in_arc_order_whatever_order_they_went_in() {
        let arc = order(vec![Step::Flow, Step::Urpf(Urpf::Loose)], Direction::Input).unwrap();
        let kinds: Vec<_> = arc.iter().map(Step::kind).collect();
        assert_eq!(kinds, [StepKind::Urpf, StepKind::Flow]);
        assert!(order(vec![Step::Flow, Step::Flow], Direction::Input).is_err());
        assert!(order(vec![Step::Urpf(Urpf::Strict)], Direction::Output).is_err());
    }
}
