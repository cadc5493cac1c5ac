//! MPLS: the label table (the LFIB: incoming label -> what to do), label stacks as next hops
//! push them, and pseudowires (RFC 4447 / RFC 4448 Ethernet over MPLS).
//!
//! The control plane builds an [`Mpls`] whenever labels or pseudowires change and publishes it
//! with the rest of the tables ([`crate::tables::Tables::mpls`]); workers read it whole.
//!
//! - mpls-input ([`crate::node::mpls_input`]) looks the top label up: swap (pop one, push the
//!   entry's labels, send to its next hop; penultimate-hop popping is a swap to no label),
//!   pop and look the payload up in a VRF, or hand the payload to a pseudowire.
//! - ip4-forward and ip6-forward push a route's labels (`NextHop::Labelled`).
//! - pw-encap ([`crate::node::pw_encap`]) puts an attachment circuit's frames on its pseudowire.
//!
//! A label stack entry is label (20 bits), traffic class (3, formerly EXP), bottom of stack (1)
//! and TTL (8), RFC 3032.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The most labels a next hop pushes, and the deepest stack mpls-input looks into.
pub const MAX_LABELS: usize = 4;
/// Reserved labels (RFC 3032): IPv4 explicit null, router alert, IPv6 explicit null, implicit
/// null (never on the wire: "pop", as a peer advertises for penultimate-hop popping).
pub const EXPLICIT_NULL_V4: u32 = 0;
pub const ROUTER_ALERT: u32 = 1;
pub const EXPLICIT_NULL_V6: u32 = 2;
pub const IMPLICIT_NULL: u32 = 3;
/// The first label free for allocation; 0-15 are reserved.
pub const FIRST_UNRESERVED: u32 = 16;
/// The largest label value (20 bits).
pub const MAX_LABEL: u32 = (1 << 20) - 1;
/// The EtherType of MPLS unicast.
pub const ETHERTYPE_MPLS: u16 = 0x8847;

/// Labels to push, outermost first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LabelStack {
    labels: [u32; MAX_LABELS],
    len: u8,
}

impl LabelStack {
    pub const EMPTY: LabelStack = LabelStack {
        labels: [0; MAX_LABELS],
        len: 0,
    };

    /// A stack of `labels` (outermost first); None if there are more than [`MAX_LABELS`] or one is
    /// beyond 20 bits. Implicit null labels are dropped: they mean "push nothing".
    pub fn new(labels: &[u32]) -> Option<LabelStack> {
        let mut s = LabelStack::EMPTY;
        for &l in labels.iter().filter(|&&l| l != IMPLICIT_NULL) {
            if l > MAX_LABEL || s.len as usize == MAX_LABELS {
                return None;
            }
            s.labels[s.len as usize] = l;
            s.len += 1;
        }
        Some(s)
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    pub fn labels(&self) -> &[u32] {
        &self.labels[..self.len as usize]
    }

    /// This stack, then `inner` (the labels under it); None if together they are too deep.
    /// (No allocation: label switching asks it per packet.)
    #[inline(always)]
    pub fn then(&self, inner: &LabelStack) -> Option<LabelStack> {
        let (a, b) = (self.len as usize, inner.len as usize);
        if a + b > MAX_LABELS {
            return None;
        }
        let mut all = *self;
        all.labels[a..a + b].copy_from_slice(&inner.labels[..b]);
        all.len = (a + b) as u8;
        Some(all)
    }

    /// Writes the stack's entries into `out` (4 bytes each), with traffic class `tc` and TTL
    /// `ttl` on every entry and the bottom-of-stack bit on the last one if `bottom`.
    #[inline(always)]
    pub fn write(&self, out: &mut [u8], tc: u8, ttl: u8, bottom: bool) {
        let n = self.len as usize;
        for (i, (&l, o)) in self.labels[..n]
            .iter()
            .zip(out.chunks_exact_mut(4))
            .enumerate()
        {
            let s = u32::from(bottom && i + 1 == n);
            let e = l << 12 | u32::from(tc & 7) << 9 | s << 8 | u32::from(ttl);
            o.copy_from_slice(&e.to_be_bytes());
        }
    }
}

impl std::fmt::Display for LabelStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_empty() {
            return f.write_str("pop");
        }
        let l: Vec<String> = self.labels().iter().map(u32::to_string).collect();
        f.write_str(&l.join("/"))
    }
}

/// One label stack entry's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub label: u32,
    pub tc: u8,
    pub bottom: bool,
    pub ttl: u8,
}

impl Entry {
    #[inline(always)]
    pub fn parse(b: &[u8]) -> Entry {
        let e = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        Entry {
            label: e >> 12,
            tc: (e >> 9 & 7) as u8,
            bottom: e & 0x100 != 0,
            ttl: e as u8,
        }
    }
}

/// How TTLs cross the edge of an LSP (RFC 3443).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TtlMode {
    /// The IP TTL is copied into the labels pushed and back into the IP header when the last
    /// label is popped: the LSP's hops show in a traceroute.
    #[default]
    Uniform,
    /// Labels are pushed with TTL 255 and the IP TTL is left alone: the LSP is one hop.
    Pipe,
}

/// What an incoming label does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelAction {
    /// Pop the label, push `push` (one label: a swap; none: penultimate-hop popping) and send
    /// to next hop `nh` (a neighbour's `Forward`, or an ECMP group of them).
    Forward { nh: u32, push: LabelStack },
    /// Pop the label and look the IP packet under it up as if it had arrived on interface
    /// `ifx` (a VRF's MPLS interface: an L3VPN's label, or explicit null).
    Lookup { ifx: u32 },
    /// Pop the label: under it is pseudowire `pw`'s frame (with its control word if it uses one).
    Pseudowire { pw: u32 },
}

/// Per entry counters, per worker: packets and bytes received with the label.
const ROW: usize = 2;

/// The label table. Lookup is one read of a dense index (labels are allocated from the bottom
/// of the range, so it stays small) and one of the entry.
pub struct LabelTable {
    /// Label -> entry + 1 (0: no entry); as long as the highest label in use.
    index: Box<[u32]>,
    entries: Box<[(u32, LabelAction)]>,
    counters: Box<[Box<[AtomicU64]>]>,
}

impl LabelTable {
    /// A table of `entries` (label, action), counted by `workers` workers. Duplicate labels are
    /// a control-plane bug: the last one wins.
    pub fn new(entries: Vec<(u32, LabelAction)>, workers: usize) -> LabelTable {
        let top = entries
            .iter()
            .map(|e| e.0)
            .max()
            .map_or(0, |m| m as usize + 1);
        let mut index = vec![0u32; top];
        for (i, (l, _)) in entries.iter().enumerate() {
            index[*l as usize] = i as u32 + 1;
        }
        let counters = (0..workers.max(1))
            .map(|_| {
                (0..entries.len() * ROW)
                    .map(|_| AtomicU64::new(0))
                    .collect()
            })
            .collect();
        LabelTable {
            index: index.into_boxed_slice(),
            entries: entries.into_boxed_slice(),
            counters,
        }
    }

    /// The entry of `label`: its index (for counting) and action.
    #[inline(always)]
    pub fn get(&self, label: u32) -> Option<(u32, LabelAction)> {
        let i = self.index_of(label);
        self.at(i).map(|a| (i, a))
    }

    /// The index of `label`'s entry; u32::MAX for none.
    #[inline(always)]
    pub fn index_of(&self, label: u32) -> u32 {
        match self.index.get(label as usize) {
            Some(&i) => i.wrapping_sub(1),
            None => u32::MAX,
        }
    }

    /// Entry `i`'s action.
    #[inline(always)]
    pub fn at(&self, i: u32) -> Option<LabelAction> {
        self.entries.get(i as usize).map(|e| e.1)
    }

    /// Starts loading entry `i`.
    #[inline(always)]
    pub fn prefetch(&self, i: u32) {
        if let Some(e) = self.entries.get(i as usize) {
            fib::lpm::prefetch(e as *const (u32, LabelAction) as *const u8);
        }
    }

    /// Counts a packet of `bytes` received with entry `i`'s label, for worker `w` (only that
    /// worker writes its row).
    #[inline(always)]
    pub fn count(&self, w: u16, i: u32, bytes: u64) {
        let row = &self.counters[(w as usize).min(self.counters.len() - 1)];
        if let Some(c) = row.get(i as usize * ROW..i as usize * ROW + ROW) {
            c[0].store(c[0].load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            c[1].store(c[1].load(Ordering::Relaxed) + bytes, Ordering::Relaxed);
        }
    }

    /// Every entry with its packets and bytes summed over the workers, in label order.
    pub fn entries(&self) -> Vec<(u32, LabelAction, u64, u64)> {
        let mut out: Vec<_> = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, &(l, a))| {
                let (mut p, mut b) = (0, 0);
                for row in self.counters.iter() {
                    p += row[i * ROW].load(Ordering::Relaxed);
                    b += row[i * ROW + 1].load(Ordering::Relaxed);
                }
                (l, a, p, b)
            })
            .collect();
        out.sort_by_key(|e| e.0);
        out
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes the table holds (index, entries and counters).
    pub fn bytes(&self) -> usize {
        self.index.len() * 4
            + self.entries.len() * std::mem::size_of::<(u32, LabelAction)>()
            + self.counters.len() * self.entries.len() * ROW * 8
    }
}

/// A pseudowire's emulated service (RFC 4446 VC types).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VcType {
    /// Type 4, Ethernet tagged mode: the attachment circuit is a VLAN; frames cross with their
    /// tag, which the far end rewrites to its own VLAN.
    Vlan,
    /// Type 5, Ethernet raw mode: the attachment circuit is a whole port; frames cross as they
    /// came, tags and all.
    Ethernet,
}

impl VcType {
    /// The VC type code LDP's PWid FEC carries.
    pub fn code(self) -> u16 {
        match self {
            VcType::Vlan => 4,
            VcType::Ethernet => 5,
        }
    }
}

/// One pseudowire: an attachment circuit (a port's interface or a VLAN sub-interface) cross
/// connected over an LSP to a peer's.
#[derive(Clone, Debug)]
pub struct Pseudowire {
    pub name: String,
    /// The attachment circuit's interface, its port and (type 4) VLAN.
    pub ac_if: u32,
    pub ac_port: u16,
    pub ac_vlan: Option<u16>,
    pub vc_type: VcType,
    /// Both ends use the RFC 4385 control word (a 4-byte word of zeros and a sequence number
    /// of 0, which says "not used", between the label stack and the frame).
    pub control_word: bool,
    /// The label the peer sends this pseudowire's frames with.
    pub local_label: u32,
    /// Imposition: the transport labels then the peer's label for this pseudowire (the bottom
    /// one), and the next hop towards the peer: a neighbour's `Forward`, or an LSP's path
    /// object (whose way brings its own transport labels, which `push` then leaves out).
    pub push: LabelStack,
    pub nh: u32,
    /// The largest frame the attachment circuit passes (the interface MTU with its L2 header).
    pub mtu: u16,
    /// Signalled up (or statically configured) and the attachment circuit is up.
    pub up: bool,
}

/// Per pseudowire counters' order in its row: frames and bytes from the attachment circuit
/// into the pseudowire, then out of the pseudowire to the attachment circuit.
pub const PW_TX_PACKETS: usize = 0;
pub const PW_RX_PACKETS: usize = 2;

/// What the workers read of MPLS.
pub struct Mpls {
    pub labels: LabelTable,
    pub pws: Box<[Pseudowire]>,
    /// Per interface: it takes labelled frames.
    pub enabled: Box<[bool]>,
    /// Per interface: the pseudowire its frames go to (u32::MAX: none).
    pub xconnect: Box<[u32]>,
    pub ttl: TtlMode,
    /// Per worker; shared with the tables this one replaced where the pseudowires are the same
    /// ones ([`Mpls::keep_counters`]), so a rebuild does not start them again.
    pw_counters: Arc<[crate::gtp::Counters]>,
}

impl Mpls {
    pub fn new(
        labels: LabelTable,
        pws: Vec<Pseudowire>,
        interfaces: usize,
        enabled: &[u32],
        ttl: TtlMode,
        workers: usize,
    ) -> Mpls {
        let mut on = vec![false; interfaces];
        for &i in enabled {
            if let Some(x) = on.get_mut(i as usize) {
                *x = true;
            }
        }
        let mut xconnect = vec![u32::MAX; interfaces];
        for (i, pw) in pws.iter().enumerate() {
            if let Some(x) = xconnect.get_mut(pw.ac_if as usize) {
                *x = i as u32;
            }
        }
        let pw_counters = (0..workers.max(1))
            .map(|_| crate::gtp::Counters::new(pws.len()))
            .collect();
        Mpls {
            labels,
            pws: pws.into_boxed_slice(),
            enabled: on.into_boxed_slice(),
            xconnect: xconnect.into_boxed_slice(),
            ttl,
            pw_counters,
        }
    }

    /// Takes `old`'s pseudowire counters where it has the same pseudowires (by name, in order)
    /// for as many workers: a rebuild (LDP signalling one, a route moving one) keeps counting
    /// where the last left off, the workers still on `old` counting into the same rows.
    pub fn keep_counters(mut self, old: &Mpls) -> Mpls {
        let same = self.pws.len() == old.pws.len()
            && self
                .pws
                .iter()
                .zip(old.pws.iter())
                .all(|(a, b)| a.name == b.name)
            && self.pw_counters.len() == old.pw_counters.len();
        if same {
            self.pw_counters = old.pw_counters.clone();
        }
        self
    }

    /// Whether interface `ifx` takes labelled frames.
    #[inline(always)]
    pub fn enabled(&self, ifx: u32) -> bool {
        self.enabled.get(ifx as usize).copied().unwrap_or(false)
    }

    /// The pseudowire interface `ifx` is cross-connected to.
    #[inline(always)]
    pub fn xconnect(&self, ifx: u32) -> Option<u32> {
        self.xconnect
            .get(ifx as usize)
            .copied()
            .filter(|&p| p != u32::MAX)
    }

    /// Starts loading pseudowire `pw`'s record.
    #[inline(always)]
    pub fn prefetch_pw(&self, pw: u32) {
        if let Some(p) = self.pws.get(pw as usize) {
            fib::lpm::prefetch(p as *const Pseudowire as *const u8);
        }
    }

    /// Worker `w`'s pseudowire counters.
    #[inline(always)]
    pub fn pw_counters(&self, w: u16) -> &crate::gtp::Counters {
        &self.pw_counters[(w as usize).min(self.pw_counters.len() - 1)]
    }

    /// Pseudowire `pw`'s counters summed over the workers: frames and bytes into the
    /// pseudowire, then out of it.
    pub fn read_pw(&self, pw: u32) -> [u64; 4] {
        let mut s = [0u64; 4];
        for c in self.pw_counters.iter() {
            for (a, b) in s.iter_mut().zip(c.read(pw)) {
                *a += b;
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_write_entries_with_the_bottom_bit_on_the_last() {
        let s = LabelStack::new(&[16, IMPLICIT_NULL, 1_048_575]).unwrap();
        assert_eq!(s.labels(), &[16, 1_048_575]);
        let mut out = [0u8; 8];
        s.write(&mut out, 5, 63, true);
        assert_eq!(
            Entry::parse(&out[..4]),
            Entry {
                label: 16,
                tc: 5,
                bottom: false,
                ttl: 63
            }
        );
        assert_eq!(
            Entry::parse(&out[4..]),
            Entry {
                label: 1_048_575,
                tc: 5,
                bottom: true,
                ttl: 63
            }
        );
        assert!(LabelStack::new(&[1 << 20]).is_none(), "21 bits");
        assert!(LabelStack::new(&[16, 17, 18, 19, 20]).is_none(), "too deep");
        assert_eq!(s.to_string(), "16/1048575");
        assert_eq!(LabelStack::EMPTY.to_string(), "pop");
        let deep = s.then(&LabelStack::new(&[30, 31]).unwrap()).unwrap();
        assert_eq!(deep.labels(), &[16, 1_048_575, 30, 31]);
        assert!(deep.then(&s).is_none());
    }

    #[test]
    fn the_table_finds_its_labels_and_counts_them_per_worker() {
        let t = LabelTable::new(
            vec![
                (
                    100,
                    LabelAction::Forward {
                        nh: 2,
                        push: LabelStack::new(&[200]).unwrap(),
                    },
                ),
                (16, LabelAction::Lookup { ifx: 3 }),
            ],
            2,
        );
        assert_eq!(t.get(16), Some((1, LabelAction::Lookup { ifx: 3 })));
        assert!(t.get(17).is_none());
        assert!(t.get(5000).is_none(), "beyond the index");
        t.count(0, 1, 100);
        t.count(1, 1, 60);
        t.count(9, 0, 64);
        let e = t.entries();
        assert_eq!(e[0].0, 16);
        assert_eq!((e[0].2, e[0].3), (2, 160));
        assert_eq!((e[1].0, e[1].2, e[1].3), (100, 1, 64));
    }
}
