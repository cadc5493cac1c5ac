//! ACL logging, kept off the fast path. A worker that matches an entry marked `log` records the
//! flow in a small table of its own: the first packet of a flow becomes an event at once, later
//! packets only bump a count, and the counts go out as one event per flow per interval. Events
//! reach the control plane through a queue taken once per vector (and only when there are
//! events); the control plane turns them into syslog records. A flood of logged packets costs a
//! table probe each and never a syscall, so logging changes neither what is forwarded nor how fast.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use classify::{Dim, Key};

use super::AclCounters;

/// One record to log: a flow's first packet, or the packets it sent since.
#[derive(Clone, Debug)]
pub struct AclLogEvent {
    pub list: Arc<AclCounters>,
    pub seq: u32,
    pub permit: bool,
    pub proto: u8,
    pub v6: bool,
    pub src: u128,
    pub dst: u128,
    pub sport: u16,
    pub dport: u16,
    /// The interface the list is bound to, and in which direction.
    pub ifx: u32,
    pub ingress: bool,
    pub packets: u64,
    /// True for the event of a flow's first packet.
    pub first: bool,
}

/// Where workers leave events for the control plane.
pub struct AclLogSink {
    pub queue: Mutex<Vec<AclLogEvent>>,
    /// Events the queue had no room for.
    pub dropped: AtomicU64,
    pub limit: usize,
    /// How often a logged flow's count is reported after its first packet.
    pub interval_ns: u64,
}

impl AclLogSink {
    pub fn new(interval_ns: u64) -> AclLogSink {
        AclLogSink {
            queue: Mutex::new(Vec::new()),
            dropped: AtomicU64::new(0),
            limit: 65_536,
            interval_ns,
        }
    }
}

const SLOTS: usize = 1024;

#[derive(Clone)]
struct Slot {
    ev: Option<AclLogEvent>,
}

/// A worker's logged flows.
pub struct Local {
    slots: Vec<Slot>,
    pending: Vec<AclLogEvent>,
    last_sweep_ns: u64,
    /// The sink last flushed to, for the final flush when the worker stops.
    sink: Option<Arc<AclLogSink>>,
}

impl Default for Local {
    fn default() -> Self {
        Local {
            slots: vec![Slot { ev: None }; SLOTS],
            pending: Vec::new(),
            last_sweep_ns: 0,
            sink: None,
        }
    }
}

impl Local {
    /// Notes one logged packet.
    #[allow(clippy::too_many_arguments)]
    pub fn hit(
        &mut self,
        list: &Arc<AclCounters>,
        seq: u32,
        permit: bool,
        k: &Key,
        ifx: u32,
        ingress: bool,
        _now_ns: u64,
    ) {
        let v6 = k.get(Dim::EtherType) == classify::rule::ETHERTYPE_IPV6;
        let (src, dst) = if v6 {
            (k.src_v6(), k.dst_v6())
        } else {
            (k.get(Dim::Src0) as u128, k.get(Dim::Dst0) as u128)
        };
        let proto = k.get(Dim::Proto) as u8;
        let sport = k.get(Dim::SrcPort) as u16;
        let dport = k.get(Dim::DstPort) as u16;
        let h = crate::node::mix(
            (src ^ dst.rotate_left(64)) as u64 ^ (src >> 64) as u64,
            (seq as u64) << 40 | (proto as u64) << 32 | (sport as u64) << 16 | dport as u64,
        ) ^ Arc::as_ptr(list) as u64;
        let slot = &mut self.slots[(h as usize) & (SLOTS - 1)];
        if let Some(ev) = &mut slot.ev {
            if Arc::ptr_eq(&ev.list, list)
                && ev.seq == seq
                && ev.src == src
                && ev.dst == dst
                && ev.sport == sport
                && ev.dport == dport
                && ev.proto == proto
                && ev.ifx == ifx
                && ev.ingress == ingress
            {
                ev.packets += 1;
                return;
            }
            // Another flow takes the slot: report what this one has not reported yet.
            if ev.packets > 0 {
                let mut old = slot.ev.take().expect("checked");
                old.first = false;
                self.pending.push(old);
            }
        }
        let ev = AclLogEvent {
            list: list.clone(),
            seq,
            permit,
            proto,
            v6,
            src,
            dst,
            sport,
            dport,
            ifx,
            ingress,
            packets: 1,
            first: true,
        };
        self.pending.push(ev.clone());
        slot.ev = Some(AclLogEvent { packets: 0, ..ev });
    }

    /// Hands events over: new flows every vector, the counts once per interval.
    pub fn flush(&mut self, sink: &Arc<AclLogSink>, now_ns: u64) {
        if !self.sink.as_ref().is_some_and(|s| Arc::ptr_eq(s, sink)) {
            self.sink = Some(sink.clone());
        }
        self.flush_due(sink, now_ns, false);
    }

    /// When the worker stops: every count not yet reported goes out now.
    pub fn flush_all(&mut self) {
        if let Some(sink) = self.sink.take() {
            self.flush_due(&sink, 0, true);
        }
    }

    fn flush_due(&mut self, sink: &AclLogSink, now_ns: u64, all: bool) {
        if all || now_ns.saturating_sub(self.last_sweep_ns) >= sink.interval_ns {
            self.last_sweep_ns = now_ns;
            for s in &mut self.slots {
                if let Some(ev) = &mut s.ev {
                    if ev.packets > 0 {
                        let mut e = ev.clone();
                        e.first = false;
                        ev.packets = 0;
                        self.pending.push(e);
                    } else {
                        // Quiet for a whole interval: forget it; a new packet logs at once.
                        s.ev = None;
                    }
                }
            }
        }
        if self.pending.is_empty() {
            return;
        }
        let mut q = sink.queue.lock().unwrap_or_else(|p| p.into_inner());
        let room = sink.limit.saturating_sub(q.len());
        if self.pending.len() > room {
            sink.dropped
                .fetch_add((self.pending.len() - room) as u64, Ordering::Relaxed);
            self.pending.truncate(room);
        }
        q.append(&mut self.pending);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(sport: u32) -> Key {
        let mut k = Key::default();
        k.set(Dim::EtherType, 0x0800);
        k.set(Dim::Src0, 0x8c00_0001);
        k.set(Dim::Dst0, 0x8d64_0001);
        k.set(Dim::Proto, 17);
        k.set(Dim::SrcPort, sport);
        k.set(Dim::DstPort, 5000);
        k
    }

    #[test]
    fn first_packet_at_once_then_counts_per_interval() {
        let list = Arc::new(AclCounters::new("IPV4_Test", 2));
        let sink = Arc::new(AclLogSink::new(1_000_000_000));
        let mut l = Local::default();
        l.flush(&sink, 1); // starts the interval
        for _ in 0..1000 {
            l.hit(&list, 50000, false, &key(1024), 3, true, 0);
        }
        l.flush(&sink, 2);
        {
            let q = sink.queue.lock().unwrap();
            assert_eq!(q.len(), 1, "only the first packet so far");
            assert!(q[0].first && q[0].packets == 1 && q[0].seq == 50000);
        }
        l.flush(&sink, 1_000_000_002);
        let q = sink.queue.lock().unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!((q[1].first, q[1].packets), (false, 999));
    }

    #[test]
    fn a_colliding_flow_reports_the_old_one_first() {
        let list = Arc::new(AclCounters::new("L", 1));
        let sink = Arc::new(AclLogSink::new(u64::MAX));
        let mut l = Local::default();
        // Enough flows that some share a slot.
        for s in 0..5000 {
            l.hit(&list, 10, false, &key(s), 0, true, 0);
            l.hit(&list, 10, false, &key(s), 0, true, 0);
        }
        l.flush(&sink, 5);
        let q = sink.queue.lock().unwrap();
        let firsts = q.iter().filter(|e| e.first).count();
        let later: u64 = q.iter().filter(|e| !e.first).map(|e| e.packets).sum();
        assert_eq!(firsts, 5000);
        // Every second packet is accounted: reported, or still waiting in the table.
        let waiting: u64 = l
            .slots
            .iter()
            .filter_map(|s| s.ev.as_ref())
            .map(|e| e.packets)
            .sum();
        assert_eq!(later + waiting, 5000);
    }
}
