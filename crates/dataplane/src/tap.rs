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
use crate::graph::{NodeId, To};
use crate::node::Ctx;
use crate::tables::Tables;

/// The nodes whose output can be captured: every node of the graph.
pub use crate::graph::NodeId as Node;

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
    /// Capturing or tracing in this vector: the graph's driver and `Ctx::drop` look at this.
    pub active: bool,
    capture_drops: bool,
    /// The capture looks at some node's output.
    capture_nodes: bool,
    tracing: bool,
    frames: Vec<Captured>,
    open: Vec<Traced>,
    /// While a node runs: the node, how far each node's input and each transmit vector was
    /// filled before it, and the traced frames it took in with their step counts then.
    node: Option<NodeId>,
    marks: Vec<usize>,
    out_marks: Vec<usize>,
    entered: Vec<(u32, usize)>,
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
        sc.capture_nodes = false;
        sc.tracing = false;
        if let Some(c) = s.capture.as_mut() {
            sc.capture_drops = c.spec.points.contains(&Point::Drop);
            sc.capture_nodes = c.spec.points.iter().any(|p| matches!(p, Point::Node(_)));
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
        sc.active = sc.capture_drops || sc.capture_nodes || sc.tracing;
    }

    fn wants_node(&self, node: Node) -> bool {
        self.lock()
            .capture
            .as_ref()
            .is_some_and(|c| c.spec.points.contains(&Point::Node(node)))
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
                if let Some(p) = last.strip_prefix("tx port ") {
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
        ctx.tap.capture_nodes = false;
    }
}

/// Before node `id` runs on `input` (while tapping): marks where every vector stands, so that
/// what the node adds to each is known after it, edge by edge.
pub(crate) fn before_node(ctx: &mut Ctx, id: NodeId, input: &[PktBuf]) {
    let Ctx {
        frames, out, tap, ..
    } = ctx;
    tap.node = Some(id);
    tap.marks.clear();
    tap.marks.extend(NodeId::ALL.iter().map(|&n| frames.len(n)));
    tap.out_marks.clear();
    tap.out_marks.extend(out.iter().map(Vec::len));
    tap.entered.clear();
    if tap.tracing {
        for b in input.iter().filter(|b| b.meta().trace != 0) {
            let id = b.meta().trace;
            let steps = tap
                .open
                .iter()
                .find(|t| t.id == id)
                .map_or(0, |t| t.steps.len());
            tap.entered.push((id, steps));
        }
    }
}

/// The frame a node put at `i` of vector `to`, and the port it is captured under: the one it
/// leaves by on a transmit vector, the one it came in on otherwise.
fn edge_frame<'a>(
    frames: &'a crate::graph::Frames,
    out: &'a [Vec<PktBuf>],
    to: To,
    i: usize,
) -> (&'a PktBuf, u16) {
    match to {
        To::Node(n) => {
            let b = &frames.get(n)[i];
            (b, b.meta().rx_port)
        }
        To::Tx(p) => (&out[p as usize][i], p),
    }
}

/// After node `id` ran: a trace step for every traced frame it handed on (with the node's own
/// trace line) or took in and kept (its `CONSUMED` text), and the frames it handed on for a
/// capture at its output.
pub(crate) fn after_node(ctx: &mut Ctx, t: &Tables, id: NodeId) {
    let mut added: Vec<(To, usize)> = Vec::new();
    for &n in NodeId::ALL {
        let from = ctx.tap.marks.get(n as usize).copied().unwrap_or(0);
        added.extend((from..ctx.frames.len(n)).map(|i| (To::Node(n), i)));
    }
    for (p, v) in ctx.out.iter().enumerate() {
        let from = ctx.tap.out_marks.get(p).copied().unwrap_or(0);
        added.extend((from..v.len()).map(|i| (To::Tx(p as u16), i)));
    }
    if ctx.tap.tracing {
        for &(to, i) in &added {
            let (b, _) = edge_frame(&ctx.frames, &ctx.out, to, i);
            let trace = b.meta().trace;
            if trace != 0 {
                let line = id.trace(t, b, to);
                let next = match to {
                    To::Node(n) => n.name().to_string(),
                    To::Tx(p) => format!("tx port {p}"),
                };
                push_step(ctx, trace, id.name(), line, next);
            }
        }
        let entered = std::mem::take(&mut ctx.tap.entered);
        for &(trace, before) in &entered {
            let moved = ctx
                .tap
                .open
                .iter()
                .find(|t| t.id == trace)
                .is_some_and(|t| t.steps.len() > before);
            if !moved {
                push_step(ctx, trace, id.name(), id.consumed().into(), "-".into());
            }
        }
        ctx.tap.entered = entered;
    }
    if ctx.tap.capture_nodes && !added.is_empty() {
        if let Some(taps) = ctx.taps.clone() {
            if taps.wants_node(id) {
                let mut s = taps.lock();
                if let Some(c) = s.capture.as_mut() {
                    for &(to, i) in &added {
                        let (b, port) = edge_frame(&ctx.frames, &ctx.out, to, i);
                        take(
                            c,
                            &mut ctx.tap.frames,
                            ctx.worker,
                            b.data(),
                            Some(port),
                            Point::Node(id),
                            None,
                        );
                    }
                }
            }
        }
    }
    ctx.tap.node = None;
}

impl Scratch {
    /// Called by `Ctx::punt` while active: the trace step of a frame handed to the control
    /// plane (whatever the punt path then does with it is counted there).
    #[cold]
    pub fn on_punt(&mut self, b: &PktBuf, class: crate::punt::PuntClass) {
        if self.tracing && b.meta().trace != 0 {
            let id = b.meta().trace;
            let node = self.node.map_or("punt", NodeId::name);
            if let Some(tr) = self.open.iter_mut().find(|t| t.id == id) {
                tr.steps.push(Step {
                    node,
                    decision: format!("to the control plane, class {}", class.name()),
                    next: "punt".into(),
                });
            }
        }
    }

    /// Called by `Ctx::drop` while active: records the drop for a capture and for a trace.
    #[cold]
    pub fn on_drop(&mut self, worker: u16, b: &PktBuf, why: DropReason, taps: Option<&Taps>) {
        if self.tracing && b.meta().trace != 0 {
            let id = b.meta().trace;
            let node = self.node.map_or(why.node(), NodeId::name);
            if let Some(tr) = self.open.iter_mut().find(|t| t.id == id) {
                tr.steps.push(Step {
                    node,
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

fn push_step(ctx: &mut Ctx, id: u32, node: &'static str, decision: String, next: String) {
    if let Some(tr) = ctx.tap.open.iter_mut().find(|t| t.id == id) {
        tr.steps.push(Step {
            node,
            decision,
            next,
        });
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
