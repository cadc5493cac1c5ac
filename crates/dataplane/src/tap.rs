//! Capture and trace: the debugging taps of the packet path, in the manner of VPP's `pcap trace`
//! and `trace add`. Both are armed by the control plane and cost one relaxed load per loop while
//! off.
//!
//! - A capture copies the frames seen at chosen points (a port's receive or transmit side, the
//!   output of a node, or the drop point with its reason) that match a filter, until it has its
//!   count. Copies are made in the worker, once per matching frame, and collected by the control
//!   plane, which writes the pcap file; forwarding goes on.
//! - A trace follows the next N frames (matching a filter, on a port or any) through the nodes
//!   and records, per node, what it decided and where the frame went next.
//!
//! Workers keep what they record in their [`Ctx`] during a vector and hand it over once per
//! vector (one lock per vector, only while armed).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use packet::filter::Filter;

use crate::buffer::PktBuf;
use crate::counters::DropReason;
use crate::node::{Ctx, Slow};
use crate::tables::{NextHop, Tables};

/// The nodes whose output can be captured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    EthernetInput,
    Ip4Forward,
    Ip6Forward,
    SlowPath,
}

impl Node {
    pub const ALL: [Node; 4] = [
        Node::EthernetInput,
        Node::Ip4Forward,
        Node::Ip6Forward,
        Node::SlowPath,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Node::EthernetInput => "ethernet-input",
            Node::Ip4Forward => "ip4-forward",
            Node::Ip6Forward => "ip6-forward",
            Node::SlowPath => "slow-path",
        }
    }
    pub fn parse(s: &str) -> Option<Node> {
        Node::ALL.into_iter().find(|n| n.name() == s)
    }
}

/// Where a capture looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// Frames received on a port (None: any port), before any node.
    Rx(Option<u16>),
    /// Frames about to be transmitted on a port (None: any port).
    Tx(Option<u16>),
    /// Frames a node hands on (to the next node or to transmit).
    Node(Node),
    /// Frames dropped, with the reason.
    Drop,
}

pub struct CaptureSpec {
    pub points: Vec<Point>,
    /// For node and drop points: only frames on this port at that point (the port a frame
    /// arrived on for ethernet-input and drops, the port it leaves by after a forwarding node).
    pub port: Option<u16>,
    pub filter: Filter,
    /// Stop after this many frames.
    pub count: u64,
    /// Bytes kept of each frame.
    pub snaplen: usize,
}

/// One captured frame.
#[derive(Clone, Debug)]
pub struct Captured {
    pub unix_ns: u64,
    pub worker: u16,
    pub port: Option<u16>,
    pub point: Point,
    pub drop: Option<DropReason>,
    /// The frame's length on the wire (`data` may be cut to the snap length).
    pub orig_len: usize,
    pub data: Vec<u8>,
}

/// One step of a traced frame's path.
#[derive(Clone, Debug)]
pub struct Step {
    pub node: &'static str,
    pub decision: String,
    pub next: String,
}

#[derive(Clone, Debug)]
pub struct Traced {
    pub id: u32,
    pub worker: u16,
    pub unix_ns: u64,
    pub summary: String,
    pub steps: Vec<Step>,
}

pub struct TraceSpec {
    pub port: Option<u16>,
    pub filter: Filter,
    pub count: u32,
}

struct Capture {
    spec: CaptureSpec,
    /// Frames matched (some may still sit in a worker's scratch until its vector ends).
    taken: u64,
    /// Frames handed over.
    delivered: u64,
    frames: Vec<Captured>,
}

struct Trace {
    spec: TraceSpec,
    started: u32,
    completed: u32,
    done: Vec<Traced>,
}

#[derive(Default)]
struct State {
    capture: Option<Capture>,
    trace: Option<Trace>,
}

/// The taps of one router, shared by its workers.
#[derive(Default)]
pub struct Taps {
    armed: AtomicBool,
    state: Mutex<State>,
}

/// A worker's recordings during one vector.
#[derive(Default)]
pub struct Scratch {
    /// Capturing drops or tracing in this vector: `Ctx::drop` looks at this.
    pub active: bool,
    capture_drops: bool,
    tracing: bool,
    frames: Vec<Captured>,
    open: Vec<Traced>,
    marks: Vec<usize>,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl Taps {
    #[inline(always)]
    pub fn armed(&self) -> bool {
        self.armed.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn rearm(&self, s: &State) {
        self.armed
            .store(s.capture.is_some() || s.trace.is_some(), Ordering::Relaxed);
    }

    /// Starts a capture (replacing any running one).
    pub fn start_capture(&self, spec: CaptureSpec) {
        let mut s = self.lock();
        s.capture = Some(Capture {
            spec,
            taken: 0,
            delivered: 0,
            frames: Vec::new(),
        });
        self.rearm(&s);
    }

    /// Takes the frames captured so far; `(frames, finished)`. A finished capture is disarmed.
    pub fn drain_capture(&self) -> (Vec<Captured>, bool) {
        let mut s = self.lock();
        let Some(c) = s.capture.as_mut() else {
            return (Vec::new(), true);
        };
        let frames = std::mem::take(&mut c.frames);
        let finished = c.delivered >= c.spec.count;
        if finished {
            s.capture = None;
            self.rearm(&s);
        }
        (frames, finished)
    }

    pub fn stop_capture(&self) -> Vec<Captured> {
        let mut s = self.lock();
        let frames = s.capture.take().map(|c| c.frames).unwrap_or_default();
        self.rearm(&s);
        frames
    }

    pub fn start_trace(&self, spec: TraceSpec) {
        let mut s = self.lock();
        s.trace = Some(Trace {
            spec,
            started: 0,
            completed: 0,
            done: Vec::new(),
        });
        self.rearm(&s);
    }

    /// The traces completed so far and whether all `count` are done (then the trace is disarmed).
    pub fn drain_trace(&self) -> (Vec<Traced>, bool) {
        let mut s = self.lock();
        let Some(t) = s.trace.as_mut() else {
            return (Vec::new(), true);
        };
        let done = std::mem::take(&mut t.done);
        let finished = t.started >= t.spec.count && t.completed >= t.started;
        if finished {
            s.trace = None;
            self.rearm(&s);
        }
        (done, finished)
    }

    pub fn stop_trace(&self) -> Vec<Traced> {
        let mut s = self.lock();
        let done = s.trace.take().map(|t| t.done).unwrap_or_default();
        self.rearm(&s);
        done
    }

    /// Before ethernet-input: captures at the receive point and picks the frames to trace.
    pub fn on_rx(&self, ctx: &mut Ctx, t: &Tables, port: u16, pkts: &mut [PktBuf]) {
        let mut s = self.lock();
        let sc = &mut ctx.tap;
        sc.capture_drops = false;
        sc.tracing = false;
        if let Some(c) = s.capture.as_mut() {
            sc.capture_drops = c.spec.points.contains(&Point::Drop);
            let at_rx = c.spec.points.iter().any(|p| match p {
                Point::Rx(None) => true,
                Point::Rx(Some(q)) => *q == port,
                _ => false,
            });
            if at_rx {
                for b in pkts.iter() {
                    take(
                        c,
                        &mut sc.frames,
                        ctx.worker,
                        b.data(),
                        Some(port),
                        Point::Rx(Some(port)),
                        None,
                    );
                }
            }
        }
        for b in pkts.iter_mut() {
            b.meta_mut().trace = 0;
        }
        if let Some(tr) = s.trace.as_mut() {
            if tr.spec.port.is_none_or(|p| p == port) {
                for b in pkts.iter_mut() {
                    if tr.started >= tr.spec.count {
                        break;
                    }
                    if !tr.spec.filter.matches(b.data()) {
                        continue;
                    }
                    tr.started += 1;
                    b.meta_mut().trace = tr.started;
                    sc.tracing = true;
                    let name = t
                        .ifs
                        .iter()
                        .find(|i| i.port == port)
                        .map(|i| i.name.as_str());
                    sc.open.push(Traced {
                        id: tr.started,
                        worker: ctx.worker,
                        unix_ns: now_ns(),
                        summary: summarize(b.data()),
                        steps: vec![Step {
                            node: "rx",
                            decision: format!(
                                "port {} ({}), {} bytes",
                                port,
                                name.unwrap_or("?"),
                                b.len()
                            ),
                            next: "ethernet-input".into(),
                        }],
                    });
                }
            }
        }
        sc.active = sc.capture_drops || sc.tracing;
    }

    /// After ethernet-input: its output, towards ip4-forward and ip6-forward.
    pub fn after_ethernet(&self, ctx: &mut Ctx, t: &Tables, ip4: &[PktBuf], ip6: &[PktBuf]) {
        if ctx.tap.tracing {
            for (v, next) in [(ip4, "ip4-forward"), (ip6, "ip6-forward")] {
                for b in v.iter().filter(|b| b.meta().trace != 0) {
                    let ifc = &t.ifs[b.meta().rx_if as usize];
                    let vrf = t.vrfs.get(ifc.vrf as usize).map(|v| v.name.as_str());
                    let vlan = ifc.vlan.map(|v| format!(", vlan {v}")).unwrap_or_default();
                    step(
                        ctx,
                        b,
                        "ethernet-input",
                        format!("interface {}{vlan}, vrf {}", ifc.name, vrf.unwrap_or("?")),
                        next.into(),
                    );
                }
            }
        }
        self.node_output(ctx, Node::EthernetInput, ip4.iter().chain(ip6));
    }

    /// Remembers how far each transmit vector is filled, so the next node's additions are known.
    pub fn mark(&self, ctx: &mut Ctx) {
        let Ctx { out, tap, .. } = ctx;
        tap.marks.clear();
        tap.marks.extend(out.iter().map(Vec::len));
    }

    /// After a forwarding node or the slow path: the frames it added to the transmit vectors,
    /// and (forwarding nodes) those it set aside for the slow path.
    pub fn after_node(&self, ctx: &mut Ctx, t: &Tables, node: Node) {
        let mut added: Vec<(u16, usize)> = Vec::new();
        for (p, v) in ctx.out.iter().enumerate() {
            let from = ctx.tap.marks.get(p).copied().unwrap_or(0);
            for i in from..v.len() {
                added.push((p as u16, i));
            }
        }
        if ctx.tap.tracing {
            let mut steps = Vec::new();
            for &(p, i) in &added {
                let b = &ctx.out[p as usize][i];
                if b.meta().trace != 0 {
                    steps.push((
                        b.meta().trace,
                        forward_decision(t, b),
                        format!("tx port {p}"),
                    ));
                }
            }
            let slow: Vec<(u32, String)> = match node {
                Node::Ip4Forward => ctx.slow4.iter(),
                Node::Ip6Forward => ctx.slow6.iter(),
                _ => [].iter(),
            }
            .filter(|(b, _)| b.meta().trace != 0)
            .map(|(b, why)| (b.meta().trace, slow_text(*why)))
            .collect();
            for (id, d, next) in steps {
                push_step(ctx, id, node.name(), d, next);
            }
            for (id, why) in slow {
                push_step(ctx, id, node.name(), why, "slow-path".into());
            }
        }
        if !added.is_empty() && self.wants_node(node) {
            let mut s = self.lock();
            if let Some(c) = s.capture.as_mut() {
                let Ctx {
                    out, tap, worker, ..
                } = ctx;
                for &(p, i) in &added {
                    let b = &out[p as usize][i];
                    take(
                        c,
                        &mut tap.frames,
                        *worker,
                        b.data(),
                        Some(p),
                        Point::Node(node),
                        None,
                    );
                }
            }
        }
    }

    fn wants_node(&self, node: Node) -> bool {
        self.lock()
            .capture
            .as_ref()
            .is_some_and(|c| c.spec.points.contains(&Point::Node(node)))
    }

    fn node_output<'a>(&self, ctx: &mut Ctx, node: Node, frames: impl Iterator<Item = &'a PktBuf>) {
        if !self.wants_node(node) {
            return;
        }
        let mut s = self.lock();
        if let Some(c) = s.capture.as_mut() {
            for b in frames {
                let p = b.meta().rx_port;
                take(
                    c,
                    &mut ctx.tap.frames,
                    ctx.worker,
                    b.data(),
                    Some(p),
                    Point::Node(node),
                    None,
                );
            }
        }
    }

    /// Before transmit: the transmit point; then hands the vector's recordings over.
    pub fn on_tx(&self, ctx: &mut Ctx) {
        let mut s = self.lock();
        if let Some(c) = s.capture.as_mut() {
            for (p, v) in ctx.out.iter().enumerate() {
                let at = c.spec.points.iter().any(|q| match q {
                    Point::Tx(None) => true,
                    Point::Tx(Some(x)) => *x as usize == p,
                    _ => false,
                });
                if !at {
                    continue;
                }
                for b in v {
                    take(
                        c,
                        &mut ctx.tap.frames,
                        ctx.worker,
                        b.data(),
                        Some(p as u16),
                        Point::Tx(Some(p as u16)),
                        None,
                    );
                }
            }
            c.delivered += ctx.tap.frames.len() as u64;
            c.frames.append(&mut ctx.tap.frames);
        } else {
            ctx.tap.frames.clear();
        }
        if ctx.tap.tracing {
            for tr in ctx.tap.open.iter_mut() {
                let last = tr.steps.last().map(|s| s.next.clone()).unwrap_or_default();
                if last == "slow-path" {
                    tr.steps.push(Step {
                        node: "slow-path",
                        decision: "consumed (ICMP error sent or delivered locally)".into(),
                        next: "-".into(),
                    });
                } else if let Some(p) = last.strip_prefix("tx port ") {
                    tr.steps.push(Step {
                        node: "tx",
                        decision: format!("queued on port {p}"),
                        next: "-".into(),
                    });
                }
            }
            if let Some(t) = s.trace.as_mut() {
                t.completed += ctx.tap.open.len() as u32;
                t.done.append(&mut ctx.tap.open);
            }
        }
        ctx.tap.open.clear();
        ctx.tap.active = false;
        ctx.tap.tracing = false;
        ctx.tap.capture_drops = false;
    }
}

impl Scratch {
    /// Called by `Ctx::drop` while active: records the drop for a capture and for a trace.
    #[cold]
    pub fn on_drop(&mut self, worker: u16, b: &PktBuf, why: DropReason, taps: Option<&Taps>) {
        if self.tracing && b.meta().trace != 0 {
            let id = b.meta().trace;
            if let Some(tr) = self.open.iter_mut().find(|t| t.id == id) {
                tr.steps.push(Step {
                    node: why.node(),
                    decision: format!("dropped: {}", why.text()),
                    next: "drop".into(),
                });
            }
        }
        if self.capture_drops {
            if let Some(taps) = taps {
                let mut s = taps.lock();
                if let Some(c) = s.capture.as_mut() {
                    let p = Some(b.meta().rx_port);
                    take(
                        c,
                        &mut self.frames,
                        worker,
                        b.data(),
                        p,
                        Point::Drop,
                        Some(why),
                    );
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn take(
    c: &mut Capture,
    out: &mut Vec<Captured>,
    worker: u16,
    data: &[u8],
    port: Option<u16>,
    point: Point,
    drop: Option<DropReason>,
) {
    let other_port = matches!(point, Point::Node(_) | Point::Drop)
        && c.spec.port.is_some_and(|p| Some(p) != port);
    if c.taken >= c.spec.count || other_port || !c.spec.filter.matches(data) {
        return;
    }
    c.taken += 1;
    out.push(Captured {
        unix_ns: now_ns(),
        worker,
        port,
        point,
        drop,
        orig_len: data.len(),
        data: data[..data.len().min(c.spec.snaplen)].to_vec(),
    });
}

fn step(ctx: &mut Ctx, b: &PktBuf, node: &'static str, decision: String, next: String) {
    push_step(ctx, b.meta().trace, node, decision, next);
}

fn push_step(ctx: &mut Ctx, id: u32, node: &'static str, decision: String, next: String) {
    if let Some(tr) = ctx.tap.open.iter_mut().find(|t| t.id == id) {
        tr.steps.push(Step {
            node,
            decision,
            next,
        });
    }
}

fn forward_decision(t: &Tables, b: &PktBuf) -> String {
    let nh = b.meta().next_hop;
    match t.next_hops.get(nh as usize) {
        Some(NextHop::Forward { tx_if, rewrite, .. }) => {
            let ifc = t
                .ifs
                .get(*tx_if as usize)
                .map(|i| i.name.as_str())
                .unwrap_or("?");
            let r = &rewrite.bytes;
            format!(
                "next hop {nh}: out {ifc}, to {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                r[0], r[1], r[2], r[3], r[4], r[5]
            )
        }
        Some(other) => format!("next hop {nh}: {other:?}"),
        None => format!("next hop {nh}"),
    }
}

fn slow_text(s: Slow) -> String {
    match s {
        Slow::TtlExpired => "TTL / hop limit expired".into(),
        Slow::NoRoute => "no route".into(),
        Slow::Reject => "route rejects".into(),
        Slow::TooBig { mtu } => format!("larger than the egress MTU {mtu}"),
        Slow::Fragment { .. } => "to be fragmented".into(),
        Slow::Options => "IPv4 options or IPv6 hop-by-hop header".into(),
        Slow::Local => "addressed to the router".into(),
        Slow::Glean => "waiting for the next hop's MAC address".into(),
        Slow::L2Group => "unicast destination in a link-layer broadcast or multicast frame".into(),
    }
}

/// One line about a frame: its addresses and protocol.
pub fn summarize(d: &[u8]) -> String {
    let be16 = |o: usize| d.get(o..o + 2).map(|s| u16::from_be_bytes([s[0], s[1]]));
    let Some(mut et) = be16(12) else {
        return format!("{} bytes, too short for Ethernet", d.len());
    };
    let mut l3 = 14;
    let mut vlan = String::new();
    if et == 0x8100 || et == 0x88a8 {
        vlan = format!("vlan {} ", be16(14).unwrap_or(0) & 0xfff);
        et = be16(16).unwrap_or(0);
        l3 = 18;
    }
    let ports = |off: usize, proto: u8| -> String {
        match (proto, be16(off), be16(off + 2)) {
            (6, Some(s), Some(t)) => format!("tcp {s} -> {t}"),
            (17, Some(s), Some(t)) => format!("udp {s} -> {t}"),
            (1, ..) => "icmp".into(),
            (58, ..) => "icmpv6".into(),
            (p, ..) => format!("proto {p}"),
        }
    };
    match et {
        0x0800 if d.len() >= l3 + 20 => {
            let a = |o: usize| std::net::Ipv4Addr::new(d[o], d[o + 1], d[o + 2], d[o + 3]);
            let ihl = (d[l3] & 0x0f) as usize * 4;
            format!(
                "{vlan}IPv4 {} -> {} {} ttl {}, {} bytes",
                a(l3 + 12),
                a(l3 + 16),
                ports(l3 + ihl, d[l3 + 9]),
                d[l3 + 8],
                d.len()
            )
        }
        0x86dd if d.len() >= l3 + 40 => {
            let a = |o: usize| {
                let mut x = [0u8; 16];
                x.copy_from_slice(&d[o..o + 16]);
                std::net::Ipv6Addr::from(x)
            };
            format!(
                "{vlan}IPv6 {} -> {} {} hlim {}, {} bytes",
                a(l3 + 8),
                a(l3 + 24),
                ports(l3 + 40, d[l3 + 6]),
                d[l3 + 7],
                d.len()
            )
        }
        e => format!("{vlan}EtherType 0x{e:04x}, {} bytes", d.len()),
    }
}
