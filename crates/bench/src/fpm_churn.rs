//! `linerate bench fpm-churn`: a soak of the FPM path under traffic. A zebra stand-in keeps
//! changing routes for as long as asked: adds, replaces and withdrawals of a churned set of
//! prefixes (through next-hop objects and inline next hops), replaces of the group a stable set of
//! prefixes uses (members come and go, as zebra sends when a BGP path flaps), and deletes and
//! re-adds of a next-hop object (its routes go with it, as Linux does). Meanwhile the tester side
//! sends paced traffic to the stable set, whose routes never go away, so no frame may be lost.
//!
//! At the end, once the applier has caught up: every route of the stand-in's model is in the FIB
//! with the next hops the model says, and no other route of the churned range is; the frames
//! sent all came back; memory (RSS, the next-hop table, path objects) is sampled over the run, so
//! a leak shows as growth between the first sample after the warm-up and the last.
//!
//! Checked: loss, FIB = model, growth of the next-hop table, RSS growth. The figures and the
//! checks go out as JSON with a verdict.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use control::mgmt::Core;
use control::runtime::{Runtime, StartOptions};
use control::syslog::Logger;
use control::Router;
use dataplane::{BufCache, NextHop, Pool};
use fpm::netlink::{encode, GroupMember, Members, Nexthop, Paths};
use fpm::{Msg, Op, Prefix, Route, RouteType};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

pub struct ChurnOpts {
    pub seconds: f64,
    /// Prefixes that carry traffic (their routes are replaced, never withdrawn).
    pub stable: usize,
    /// Prefixes added, replaced and withdrawn at random.
    pub churned: usize,
    /// Route and next-hop messages per second the stand-in aims at.
    pub updates_per_s: f64,
    /// Traffic to the stable prefixes, frames per second.
    pub fps: f64,
    pub seed: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub expected: String,
    pub measured: String,
    pub pass: bool,
}

#[derive(Debug, Default, Serialize)]
pub struct Sample {
    pub at_s: f64,
    pub rss_mb: f64,
    pub next_hops: usize,
    pub paths: usize,
    pub fib_routes: usize,
    pub messages_applied: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct ChurnReport {
    pub verdict: &'static str,
    pub checks: Vec<Check>,
    pub seconds: f64,
    pub messages_sent: u64,
    pub updates_per_s: f64,
    pub route_adds: u64,
    pub route_replaces: u64,
    pub route_withdrawals: u64,
    pub group_replaces: u64,
    pub object_deletes: u64,
    pub frames_sent: u64,
    pub frames_received: u64,
    pub router_drops: Vec<(String, u64)>,
    pub fib_mismatches: Vec<String>,
    pub samples: Vec<Sample>,
}

const IF_P1: u32 = 12;
const GW_A: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
const GW_B: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 3);
/// Next-hop objects: single hops via A and B, the stable set's group, and a churned group.
const NH_A: u32 = 1;
const NH_B: u32 = 2;
const GROUP_STABLE: u32 = 10;
const GROUP_CHURN: u32 = 11;

fn config(port: u16) -> String {
    format!(
        r#"
router: {{ workers: 1 }}
ports:
  - {{ name: p0, driver: mem }}
  - {{ name: p1, driver: mem }}
interfaces:
  - {{ name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24] }}
  - {{ name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [198.51.100.1/24] }}
neighbors:
  - {{ interface: p0, ip: 192.0.2.2, mac: "02:00:00:00:00:02" }}
  - {{ interface: p1, ip: {GW_A}, mac: "02:00:00:00:01:02" }}
  - {{ interface: p1, ip: {GW_B}, mac: "02:00:00:00:01:03" }}
control-plane:
  fpm: {{ listen: "127.0.0.1:{port}", stale-time: 600 }}
"#
    )
}

/// What the stand-in writes to zebra's socket, one message a frame, as zebra does.
#[derive(Default)]
struct Wire {
    buf: Vec<u8>,
    scratch: Vec<u8>,
    msgs: u64,
}

impl Wire {
    fn put(&mut self, m: Msg<'_>) {
        encode::frame(&mut self.buf, &mut self.scratch, &[m], 1).expect("a message fits a frame");
        self.msgs += 1;
    }
}

/// Where the model says a route goes: through an object, or an inline gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    Object(u32),
    Inline(Ipv4Addr),
}

/// The stand-in's view of what zebra has sent.
struct Model {
    routes: BTreeMap<(u32, u8), Via>,
    /// Gateways of each object (a group: its members' gateways).
    objects: HashMap<u32, Vec<Ipv4Addr>>,
}

impl Model {
    fn gateways(&self, v: Via) -> Option<Vec<Ipv4Addr>> {
        let mut g = match v {
            Via::Object(id) => self.objects.get(&id)?.clone(),
            Via::Inline(a) => vec![a],
        };
        g.sort();
        g.dedup();
        Some(g)
    }
}

/// A next-hop object message: a single hop (`gw`), a group (`members`), or a delete.
fn object(op: Op, id: u32, gw: Option<Ipv4Addr>, members: &[u32]) -> Msg<'static> {
    let m: Vec<GroupMember> = members
        .iter()
        .map(|&id| GroupMember { id, weight: 1 })
        .collect();
    Msg::Nexthop(Nexthop {
        op,
        id,
        family: if gw.is_some() { 2 } else { 0 },
        protocol: 186,
        flags: 0,
        blackhole: false,
        oif: if gw.is_some() { IF_P1 } else { 0 },
        gateway: gw.map(IpAddr::V4),
        group: if m.is_empty() {
            Members::default()
        } else {
            Members::from_members(&m)
        },
        group_type: 0,
        encap: false,
    })
}

fn single(id: u32, gw: Ipv4Addr) -> Msg<'static> {
    object(Op::New, id, Some(gw), &[])
}

fn group(id: u32, members: &[u32]) -> Msg<'static> {
    object(Op::New, id, None, members)
}

fn delete_object(id: u32) -> Msg<'static> {
    object(Op::Del, id, None, &[])
}

fn route(op: Op, (a, l): (u32, u8), via: Option<Via>) -> Msg<'static> {
    let (nh_id, gateway, oif) = match via {
        Some(Via::Object(id)) => (id, None, 0),
        Some(Via::Inline(g)) => (0, Some(IpAddr::V4(g)), IF_P1),
        None => (0, None, 0),
    };
    Msg::Route(Route {
        op,
        replace: op == Op::New,
        table: 254,
        prefix: Prefix::new(IpAddr::V4(a.into()), l).expect("valid"),
        rtype: if op == Op::Del {
            RouteType::Other(0)
        } else {
            RouteType::Unicast
        },
        protocol: 186,
        priority: 20,
        nh_id,
        gateway,
        oif,
        multipath: Paths::default(),
        encap: false,
    })
}

/// The stable prefixes (10.s.s.0/24) and the churned ones (20.c.c.0/24).
fn stable_prefix(i: usize) -> (u32, u8) {
    ((10 << 24) | ((i as u32) << 8), 24)
}

fn churned_prefix(i: usize) -> (u32, u8) {
    ((20 << 24) | ((i as u32) << 8), 24)
}

pub fn run(o: &ChurnOpts) -> Result<ChurnReport, String> {
    if o.stable == 0 || o.stable > 1 << 16 || o.churned > 1 << 16 {
        return Err("--stable must be 1..=65536 and --churned at most 65536".into());
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let port = l.local_addr().map_err(|e| e.to_string())?.port();
    drop(l);
    let text = config(port);
    let source = PathBuf::from("bench-fpm-churn.yaml");
    let cfg = control::config::parse(&text, &source).map_err(|e| e.to_string())?;
    let fpm_cfg = cfg.control_plane.fpm.clone().expect("the config has fpm");
    let logger = Arc::new(Logger::new(cfg.logging.clone()).map_err(|e| e.to_string())?);
    let router = Router::build(cfg).map_err(|e| e.to_string())?;
    let pool = Pool::new(65536);
    let mut runtime = Runtime::start(
        &router,
        StartOptions {
            pool: Some(pool.clone()),
            exit_when_drained: false,
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let mut peers = runtime.take_peers();
    let core = Core::new(router, runtime, text, source, logger, None).map_err(|e| e.to_string())?;
    control::fpm::start(&core, &fpm_cfg, HashMap::from([(IF_P1, "lr-p1".into())]))?;
    let mut sock = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    sock.set_nodelay(true).ok();

    let mut rep = ChurnReport::default();
    let mut model = Model {
        routes: BTreeMap::new(),
        objects: HashMap::new(),
    };
    let mut w = Wire::default();
    // The starting state: objects, the stable set through its group.
    w.put(single(NH_A, GW_A));
    w.put(single(NH_B, GW_B));
    w.put(group(GROUP_STABLE, &[NH_A, NH_B]));
    w.put(group(GROUP_CHURN, &[NH_A, NH_B]));
    model.objects.insert(NH_A, vec![GW_A]);
    model.objects.insert(NH_B, vec![GW_B]);
    model.objects.insert(GROUP_STABLE, vec![GW_A, GW_B]);
    model.objects.insert(GROUP_CHURN, vec![GW_A, GW_B]);
    for i in 0..o.stable {
        let p = stable_prefix(i);
        w.put(route(Op::New, p, Some(Via::Object(GROUP_STABLE))));
        model.routes.insert(p, Via::Object(GROUP_STABLE));
    }
    sock.write_all(&w.buf).map_err(|e| e.to_string())?;
    w.buf.clear();
    wait_applied(&core, w.msgs, Duration::from_secs(60))?;

    // Traffic: paced frames to the stable prefixes, from p0 out of p1.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let received = Arc::new(AtomicU64::new(0));
    let traffic = {
        let (stop, sent, received) = (stop.clone(), sent.clone(), received.clone());
        let (fps, n) = (o.fps, o.stable);
        let mut peers = std::mem::take(&mut peers);
        std::thread::Builder::new()
            .name("churn-traffic".into())
            .spawn(move || traffic_loop(&mut peers, pool, fps, n, &stop, &sent, &received))
            .map_err(|e| e.to_string())?
    };

    let mut rng = SmallRng::seed_from_u64(o.seed);
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(o.seconds);
    let mut next_sample = t0 + Duration::from_secs(10);
    let batch = 500usize;
    let period = Duration::from_secs_f64(batch as f64 / o.updates_per_s.max(1.0));
    let mut next_batch = Instant::now();
    let mut stable_members = 0u32;
    rep.samples.push(sample(&core, 0.0));
    while Instant::now() < deadline {
        for _ in 0..batch {
            match rng.gen_range(0..100) {
                // The stable group's membership changes: its routes follow, none is lost.
                0..=1 => {
                    stable_members = (stable_members + 1) % 3;
                    let (m, g): (&[u32], Vec<Ipv4Addr>) = match stable_members {
                        0 => (&[NH_A, NH_B], vec![GW_A, GW_B]),
                        1 => (&[NH_A], vec![GW_A]),
                        _ => (&[NH_B], vec![GW_B]),
                    };
                    w.put(group(GROUP_STABLE, m));
                    model.objects.insert(GROUP_STABLE, g);
                    rep.group_replaces += 1;
                }
                // The churned group goes away (its routes with it, as Linux does) and comes back.
                2 => {
                    w.put(delete_object(GROUP_CHURN));
                    model.routes.retain(|_, v| *v != Via::Object(GROUP_CHURN));
                    w.put(group(GROUP_CHURN, &[NH_A, NH_B]));
                    rep.object_deletes += 1;
                }
                // A stable route re-sent through its group (zebra re-announcing).
                3..=9 => {
                    let p = stable_prefix(rng.gen_range(0..o.stable));
                    w.put(route(Op::New, p, Some(Via::Object(GROUP_STABLE))));
                }
                _ if o.churned == 0 => {}
                // A churned prefix withdrawn.
                10..=39 => {
                    let p = churned_prefix(rng.gen_range(0..o.churned));
                    w.put(route(Op::Del, p, None));
                    if model.routes.remove(&p).is_some() {
                        rep.route_withdrawals += 1;
                    }
                }
                // A churned prefix added or replaced, through an object or inline.
                _ => {
                    let p = churned_prefix(rng.gen_range(0..o.churned));
                    let via = match rng.gen_range(0..4) {
                        0 => Via::Object(NH_A),
                        1 => Via::Object(NH_B),
                        2 => Via::Object(GROUP_CHURN),
                        _ => Via::Inline(if rng.gen() { GW_A } else { GW_B }),
                    };
                    w.put(route(Op::New, p, Some(via)));
                    match model.routes.insert(p, via) {
                        Some(_) => rep.route_replaces += 1,
                        None => rep.route_adds += 1,
                    }
                }
            }
        }
        sock.write_all(&w.buf)
            .map_err(|e| format!("zebra stand-in: {e}"))?;
        w.buf.clear();
        if Instant::now() >= next_sample {
            rep.samples.push(sample(&core, t0.elapsed().as_secs_f64()));
            next_sample += Duration::from_secs(10);
        }
        next_batch += period;
        if let Some(wait) = next_batch.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    rep.seconds = t0.elapsed().as_secs_f64();
    rep.messages_sent = w.msgs;
    rep.updates_per_s = w.msgs as f64 / rep.seconds;
    wait_applied(&core, w.msgs, Duration::from_secs(120))?;
    // Let the traffic in flight come back, then stop it.
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    traffic
        .join()
        .map_err(|_| "the traffic thread panicked".to_string())?;
    rep.samples.push(sample(&core, t0.elapsed().as_secs_f64()));
    rep.frames_sent = sent.load(Ordering::Relaxed);
    rep.frames_received = received.load(Ordering::Relaxed);
    rep.fib_mismatches = compare(&core, &model);
    let snap = core.lock("bench.churn").runtime.snapshot();
    rep.router_drops = dataplane::DropReason::ALL
        .iter()
        .filter(|d| snap.drop_count(**d) > 0)
        .map(|d| (d.name().to_string(), snap.drop_count(*d)))
        .collect();
    drop(sock);
    core.shutdown();
    judge(&mut rep, o);
    Ok(rep)
}

/// Waits until the applier has taken in `msgs` messages and published them.
fn wait_applied(core: &Core, msgs: u64, limit: Duration) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    loop {
        let s = control::fpm::status(core).map_err(|e| e.to_string())?;
        let taken = s.messages;
        if taken >= msgs && !s.unpublished {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the applier took {taken} of {msgs} messages in {} s",
                limit.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn sample(core: &Core, at_s: f64) -> Sample {
    let messages_applied = control::fpm::status(core).map_or(0, |f| f.messages);
    let s = core.lock("bench.churn.sample");
    Sample {
        at_s,
        rss_mb: control::metrics::process_rss_mb(),
        next_hops: s.router.next_hops.len(),
        paths: s.router.path_count(),
        fib_routes: s.router.route_counts().0,
        messages_applied,
    }
}

/// Every model route in the FIB with the model's gateways, and no other route in 20.0.0.0/8.
fn compare(core: &Core, model: &Model) -> Vec<String> {
    let s = core.lock("bench.churn.compare");
    let r = &s.router;
    let gateways = |nh: u32| -> Vec<Ipv4Addr> {
        let members: Vec<u32> = match &r.next_hops[nh as usize] {
            NextHop::Ecmp(m) => m.to_vec(),
            _ => vec![nh],
        };
        let mut g: Vec<Ipv4Addr> = members
            .iter()
            .filter_map(|&m| match &r.next_hops[m as usize] {
                NextHop::Forward { rewrite, .. } => match rewrite.bytes[5] {
                    2 => Some(GW_A),
                    3 => Some(GW_B),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        g.sort();
        g.dedup();
        g
    };
    let mut bad = Vec::new();
    for (&(a, l), &via) in &model.routes {
        let want = model.gateways(via).unwrap_or_default();
        match r.fibs[0].v4.get(a, l) {
            Some(nh) if gateways(nh) == want => {}
            Some(nh) => bad.push(format!(
                "{}/{l}: FIB via {:?}, model via {want:?}",
                Ipv4Addr::from(a),
                gateways(nh)
            )),
            None => bad.push(format!("{}/{l}: missing", Ipv4Addr::from(a))),
        }
    }
    for x in r.fibs[0].v4.routes() {
        if x.prefix >> 24 == 20 && !model.routes.contains_key(&(x.prefix, x.len)) {
            bad.push(format!(
                "{}/{}: not in the model",
                Ipv4Addr::from(x.prefix),
                x.len
            ));
        }
    }
    bad
}

/// Next-hop table entries the run may end with above its warm size.
const NH_SLACK: usize = 16;

fn judge(rep: &mut ChurnReport, o: &ChurnOpts) {
    let lost = rep.frames_sent.saturating_sub(rep.frames_received);
    rep.checks.push(Check {
        name: "frames lost",
        expected: "0".into(),
        measured: lost.to_string(),
        pass: lost == 0 && rep.frames_sent > 0,
    });
    rep.checks.push(Check {
        name: "FIB equals the last state sent",
        expected: "0 mismatches".into(),
        measured: format!("{} mismatches", rep.fib_mismatches.len()),
        pass: rep.fib_mismatches.is_empty(),
    });
    // Growth is judged from the first sample after a tenth of the run (caches warm, tables at
    // their working size) to the last.
    let warm = rep
        .samples
        .iter()
        .find(|s| s.at_s >= o.seconds / 10.0)
        .or(rep.samples.first());
    let last = rep.samples.last();
    if let (Some(w), Some(l)) = (warm, last) {
        // A freed path id waits two publishes before reuse, so a few ids are in transit at any
        // time; a leak grows with every object deleted (hundreds a second here).
        rep.checks.push(Check {
            name: "next-hop table growth",
            expected: format!("at most {NH_SLACK} entries (ids waiting to be reused)"),
            measured: format!("{} -> {} entries", w.next_hops, l.next_hops),
            pass: l.next_hops <= w.next_hops + NH_SLACK,
        });
        let growth = (l.rss_mb - w.rss_mb) / w.rss_mb.max(1.0);
        rep.checks.push(Check {
            name: "RSS growth",
            expected: "under 5%".into(),
            measured: format!(
                "{:.1} -> {:.1} MB ({:+.1}%)",
                w.rss_mb,
                l.rss_mb,
                growth * 100.0
            ),
            pass: growth < 0.05,
        });
    }
    rep.verdict = if rep.checks.iter().all(|c| c.pass) {
        "pass"
    } else {
        "fail"
    };
}

/// Sends paced frames to the stable prefixes into p0 and counts what comes out of p1.
fn traffic_loop(
    peers: &mut [control::MemPeer],
    pool: Arc<Pool>,
    fps: f64,
    n: usize,
    stop: &AtomicBool,
    sent: &AtomicU64,
    received: &AtomicU64,
) {
    let mut cache = BufCache::new(pool);
    let templates: Vec<Vec<u8>> = (0..n)
        .map(|i| crate::forward::frame(stable_prefix(i).0 | 7, 64, i as u16))
        .collect();
    let mut rx = Vec::with_capacity(256);
    let mut burst = Vec::with_capacity(64);
    let start = Instant::now();
    let (mut s, mut k) = (0u64, 0usize);
    while !stop.load(Ordering::Relaxed) {
        for p in peers.iter_mut() {
            rx.clear();
            let got = p.from_router.pop_burst(&mut rx, usize::MAX) as u64;
            received.fetch_add(got, Ordering::Relaxed);
            cache.free_all(&mut rx);
        }
        let due = (start.elapsed().as_secs_f64() * fps) as u64;
        while s < due && burst.len() < 64 {
            let Some(mut b) = cache.alloc() else { break };
            b.fill(&templates[k % templates.len()]);
            k += 1;
            s += 1;
            burst.push(b);
        }
        let pushed = peers[0].to_router[0].push_burst(&mut burst) as u64;
        // A full ring is the tester's shortfall, not the router's loss: not sent, not counted.
        s -= burst.len() as u64;
        sent.fetch_add(pushed, Ordering::Relaxed);
        cache.free_all(&mut burst);
        if s >= due {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    // The last frames in flight.
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        for p in peers.iter_mut() {
            rx.clear();
            let got = p.from_router.pop_burst(&mut rx, usize::MAX) as u64;
            received.fetch_add(got, Ordering::Relaxed);
            cache.free_all(&mut rx);
        }
    }
}
