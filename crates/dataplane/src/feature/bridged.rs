//! The features of bridged traffic: frames switched or flooded between the members of a bridge
//! domain take the members' arcs, as a metro switch's port ACLs, port QoS and bridged NetFlow do:
//!
//! - input (l2-input, before anything is learned, so a denied frame teaches the MAC table
//!   nothing): the arrival member's ACL in and QoS in; `flow: in` accounts the frame once its
//!   destination is known, with the member it is switched to (the bridge's routed interface for
//!   a frame to the BVI, none for a flooded one) as the record's output interface;
//! - output (l2-output, on each copy leaving by a member, tagged for that member): the member's
//!   ACL out, QoS out and `flow: out`.
//!
//! Frames are classified as they are on the wire, tags and all: `vlan` and `cos` are the tag of
//! the member's side (the arriving tag on input, the one the frame leaves with on output), the
//! addresses and ports those of the IP packet past every tag. A frame that carries no IP packet
//! (ARP, LLC, any other EtherType) is matched on its L2 fields: a list of family `any` takes it
//! (its MAC, VLAN, CoS and EtherType entries, then its implicit deny); an IPv4 or IPv6 list does
//! not (as an IP access list on a switch port filters IP only). QoS classes take every frame
//! (`match: ["cos 5"]`); `set-dscp` re-marks IP packets only, `set-cos` a tagged frame's tag.
//! Non-IP frames are not accounted as flows. uRPF has no table to ask on a bridge member (the
//! config refuses it there; bind it on the bridge's routed interface).
//!
//! Reads: `meta.rx_if` (input), `meta.next_hop` (output: the member interface the frame leaves
//! by, set by the node that sent it to l2-output), `meta.l3_off` (past the member's own tags),
//! the frame. Sets: DSCP and PCP where QoS re-marks. Drops: ACL deny, policers.

use classify::rule::{ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use classify::{Dim, Key};

use super::input::{classify_step, extract_keys, remove_dropped, Fate};
use super::{past_tags, IfFeatures};
use crate::buffer::PktBuf;
use crate::node::{Ctx, VECTOR};
use crate::tables::Tables;

/// Runs the arrival members' input arcs over `pkts` (at most a vector) and removes the frames
/// they drop, keeping the order of the rest. True if some survivor's member accounts flows in:
/// then the survivors' keys are in `ctx.fkeys` at their places, for [`account_in`].
pub(crate) fn input(ctx: &mut Ctx, t: &Tables, pkts: &mut Vec<PktBuf>) -> bool {
    let n = pkts.len().min(VECTOR);
    let mut fate = [Fate::Pass; VECTOR];
    let mut keys = std::mem::take(&mut ctx.fkeys);
    let mut flows = false;
    let mut a = 0;
    while a < n {
        let rx_if = pkts[a].meta().rx_if;
        let mut b = a + 1;
        while b < n && pkts[b].meta().rx_if == rx_if {
            b += 1;
        }
        if let Some(f) = t.features.get(rx_if as usize).and_then(|f| f.as_deref()) {
            let run = (&mut pkts[a..b], &mut fate[a..b], &mut keys[a..b]);
            flows |= member_input(ctx, f, run, rx_if);
        }
        a = b;
    }
    remove_dropped(ctx, pkts, &mut fate[..n], |to, from| keys[to] = keys[from]);
    ctx.fkeys = keys;
    flows
}

/// One member's input arc over a run of its frames. True if the member accounts flows in (and
/// the keys are extracted for it).
fn member_input(
    ctx: &mut Ctx,
    f: &IfFeatures,
    (pkts, fate, keys): (&mut [PktBuf], &mut [Fate], &mut [Key]),
    rx_if: u32,
) -> bool {
    let flow = f.flow_in && ctx.flows.is_some();
    let mut keyed = false;
    let saved = at_ip(pkts);
    // uRPF is refused on a member by the config (no route table to ask); flows are accounted
    // once the destination is known (`account_in`).
    for step in f.input.iter() {
        classify_step(
            ctx,
            step,
            (&mut *pkts, &mut *fate, &mut *keys),
            rx_if,
            true,
            &mut keyed,
        );
    }
    if flow {
        extract_keys(keys, pkts, &mut keyed);
    }
    restore(pkts, &saved);
    flow
}

/// Ingress flow accounting of switched frames: `out_if[i]` is where frame `i` goes (a member,
/// the BVI, or `NO_IF` when flooded or dropped); their keys are in `ctx.fkeys` (see
/// [`input`]). Frames that carry no IP packet are left out.
pub(crate) fn account_in(ctx: &mut Ctx, t: &Tables, pkts: &mut [PktBuf], out_if: &[u32]) {
    let n = pkts.len();
    let keys = std::mem::take(&mut ctx.fkeys);
    let mut fate = [Fate::Pass; VECTOR];
    for (f, k) in fate[..n].iter_mut().zip(&keys[..n]) {
        if !is_ip(k) {
            *f = Fate::Bypass;
        }
    }
    // The record's output interface rides in `next_hop`, which a switched frame does not use
    // until l2-output (where it names the same member).
    for (p, &o) in pkts.iter_mut().zip(out_if) {
        p.meta_mut().next_hop = o;
    }
    let saved = at_ip(pkts);
    let out = |p: &PktBuf| p.meta().next_hop;
    super::output::account(ctx, t, pkts, &keys[..n], &fate[..n], out, false);
    restore(pkts, &saved);
    ctx.fkeys = keys;
}

/// A member's output arc over `pkts`, frames tagged for member `tx_if` (see [`crate::node::
/// l2_output`]): ACL out, QoS out, then flow accounting of what passed.
pub(crate) fn output(
    ctx: &mut Ctx,
    t: &Tables,
    pkts: &mut [PktBuf],
    fate: &mut [Fate],
    tx_if: u32,
) {
    let Some(f) = t.features.get(tx_if as usize).and_then(|f| f.as_deref()) else {
        return;
    };
    let mut keys = std::mem::take(&mut ctx.fkeys);
    let mut keyed = false;
    let saved = at_ip(pkts);
    let n = pkts.len();
    for step in f.output.iter() {
        let run = (&mut *pkts, &mut *fate, &mut keys[..n]);
        classify_step(ctx, step, run, tx_if, false, &mut keyed);
    }
    if f.flow_out && ctx.flows.is_some() {
        extract_keys(&mut keys, pkts, &mut keyed);
        let n = pkts.len();
        let mut acct = [Fate::Pass; VECTOR];
        for i in 0..n {
            acct[i] = if fate[i] == Fate::Pass && is_ip(&keys[i]) {
                Fate::Pass
            } else {
                Fate::Bypass
            };
        }
        super::output::account(ctx, t, pkts, &keys, &acct[..n], |_| tx_if, true);
    }
    restore(pkts, &saved);
    ctx.fkeys = keys;
}

#[inline(always)]
fn is_ip(k: &Key) -> bool {
    matches!(k.get(Dim::EtherType), ETHERTYPE_IPV4 | ETHERTYPE_IPV6)
}

/// Points each frame's `l3_off` at its IP header, past any tag a member carries inside its own
/// (a tunnel port's customer tags), for QoS's re-marking and the byte counts of policers and
/// flows; returns the offsets to put back (l2 nodes read `l3_off` as the end of the member's
/// own encapsulation).
#[inline]
fn at_ip(pkts: &mut [PktBuf]) -> [u16; VECTOR] {
    let mut saved = [0u16; VECTOR];
    for (s, p) in saved.iter_mut().zip(pkts.iter_mut()) {
        *s = p.meta().l3_off;
        let ip = past_tags(p.data());
        if ip > *s {
            p.meta_mut().l3_off = ip;
        }
    }
    saved
}

#[inline]
fn restore(pkts: &mut [PktBuf], saved: &[u16; VECTOR]) {
    for (p, &s) in pkts.iter_mut().zip(saved.iter()) {
        p.meta_mut().l3_off = s;
    }
}

#[cfg(test)]
mod tests;
