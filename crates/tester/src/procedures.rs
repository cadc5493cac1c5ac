//! The test procedures, each a sequence of trials:
//! - RFC 2544 26.1 throughput (binary search for the highest zero-loss load, or the highest load
//!   within a loss tolerance such as the GRF report's 2%), with the latency of the passing trial
//!   at that load (26.2); 26.3 frame loss rate against offered load; 26.4 back-to-back frames.
//! - RFC 2889 5.7/5.8 address learning capacity and rate, and the flooding check.
//! - Failover time = frames lost / offered rate.
//! - Stream-count scaling (GRF report: 1, 2, ... N streams).

use crate::engine::{Progress, Tester, TrialResult, TrialSpec};
use crate::load::FrameSizes;

/// Settings shared by every trial of a procedure.
#[derive(Clone, Debug)]
pub struct TrialOpts {
    pub seconds: f64,
    pub warmup: f64,
    pub drain_quiet_ms: u64,
    pub drain_max_ms: u64,
    pub verify_payload: bool,
}

impl Default for TrialOpts {
    fn default() -> Self {
        TrialOpts {
            seconds: 60.0,
            warmup: 0.0,
            drain_quiet_ms: 50,
            drain_max_ms: 2000,
            verify_payload: false,
        }
    }
}

impl TrialOpts {
    pub fn spec(&self, load: f64, sizes: &FrameSizes) -> TrialSpec {
        let mut t = TrialSpec::new(load, sizes.clone(), self.seconds);
        t.warmup = self.warmup;
        t.drain_quiet = std::time::Duration::from_millis(self.drain_quiet_ms);
        t.drain_max = std::time::Duration::from_millis(self.drain_max_ms);
        t.verify_payload = self.verify_payload;
        t
    }
}

/// What the caller hears about while a procedure runs.
pub trait Observer {
    /// A trial is running (called a few times a second).
    fn progress(&mut self, _what: &str, _p: &Progress) {}
    /// A trial finished.
    fn trial(&mut self, _what: &str, _r: &TrialResult, _pass: bool) {}
    /// A step that is not a trial finished (contexts created, a rate tried).
    fn note(&mut self, _line: &str) {}
}

/// An observer that says nothing.
pub struct Quiet;
impl Observer for Quiet {}

#[derive(Clone, Debug)]
pub struct SearchOpts {
    /// Highest load tried, as a fraction of nominal (1.0 = 100%).
    pub max_load: f64,
    /// The search stops when the passing and failing loads are this close (fraction of nominal).
    pub resolution: f64,
    /// Largest loss ratio that still passes (0: RFC 2544's zero loss; 0.02: the GRF report).
    pub loss_tolerance: f64,
    /// The streams to send (None: all).
    pub active: Option<Vec<usize>>,
    /// Streams that are sent but not judged: their frames are meant to be dropped (a flow an
    /// ACL denies while the search measures everything else).
    pub ignore: Vec<usize>,
    /// The resolution is a fraction of the first estimate (the forwarding rate at overload)
    /// instead of nominal: a router that forwards 0.1% of nominal still gets an answer to
    /// within `resolution` of itself, not a bracket wider than the answer.
    pub relative: bool,
    /// Start at this load and climb (doubling until a trial fails, then bisecting) instead of
    /// starting at `max_load`. For a device far slower than nominal: a first trial at 100% fills
    /// its rings with more frames than it forwards in many seconds, and the next trials would
    /// measure that backlog; a failing trial here offers at most twice what passed, so what it
    /// leaves queued drains within about one trial's time.
    pub start: Option<f64>,
}

impl Default for SearchOpts {
    fn default() -> Self {
        SearchOpts {
            max_load: 1.0,
            resolution: 0.005,
            loss_tolerance: 0.0,
            active: None,
            ignore: Vec::new(),
            relative: false,
            start: None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Throughput {
    /// Highest passing load (fraction of nominal); 0 if none passed.
    pub load: f64,
    /// The passing trial at that load: its rx_fps is the throughput, its latency is the latency
    /// at throughput (RFC 2544 26.2).
    pub best: Option<TrialResult>,
    /// The first trial, at `max_load`: the forwarding rate at overload (RFC 2889's "forwarding
    /// rate" when it did not pass).
    pub at_max: TrialResult,
    /// Every trial, in order: (load, passed, result).
    pub trials: Vec<(f64, bool, TrialResult)>,
    /// A passing trial was limited by the tester (it could not offer more): the device did at
    /// least this much, maybe more.
    pub tester_limited: bool,
}

impl Throughput {
    pub fn fps(&self) -> f64 {
        self.best.as_ref().map_or(0.0, |b| b.frames_fps())
    }
}

/// One trial at a fixed `load` instead of a search (for watching the router under a known load
/// while something else happens), in the shape of a search's answer.
pub fn fixed_load(
    t: &mut Tester,
    sizes: &FrameSizes,
    trial: &TrialOpts,
    load: f64,
    tolerance: f64,
    obs: &mut dyn Observer,
) -> Throughput {
    fixed_load_of(t, sizes, trial, load, tolerance, None, obs)
}

/// [`fixed_load`] with only the streams `active` sent (None: all).
pub fn fixed_load_of(
    t: &mut Tester,
    sizes: &FrameSizes,
    trial: &TrialOpts,
    load: f64,
    tolerance: f64,
    active: Option<Vec<usize>>,
    obs: &mut dyn Observer,
) -> Throughput {
    let mut spec = trial.spec(load, sizes);
    spec.active = active;
    let label = format!("{sizes} at {:.1}%", load * 100.0);
    let r = t.trial(&mut spec, &mut |p| obs.progress(&label, p));
    let pass = passes(&r, tolerance);
    obs.trial(&label, &r, pass);
    Throughput {
        load: if pass { load } else { 0.0 },
        best: pass.then(|| r.clone()),
        tester_limited: r.tester_limited,
        trials: vec![(load, pass, r.clone())],
        at_max: r,
    }
}

fn passes(r: &TrialResult, tol: f64) -> bool {
    let bad = r.lost + r.duplicated + r.corrupted;
    // Copies of a multicast stream's frames count against the copies owed.
    r.tx > 0 && bad as f64 <= tol * r.expected_rx.max(r.tx) as f64
}

/// As [`passes`], judging only the streams not in `ignore`; `active` maps the trial's
/// per-stream results (in the order they were sent) back to stream indices.
pub(crate) fn passes_judged(r: &TrialResult, tol: f64, active: &[usize], ignore: &[usize]) -> bool {
    if ignore.is_empty() {
        return passes(r, tol);
    }
    let (mut tx, mut bad) = (0u64, 0u64);
    for (sr, i) in r.streams.iter().zip(active) {
        if !ignore.contains(i) {
            tx += sr.tx * sr.receivers.len().max(1) as u64;
            bad += sr.lost + sr.duplicated + sr.corrupted;
        }
    }
    // Corrupted frames the analyzer could not tie to a stream count against everyone.
    bad += r.corrupted
        - r.streams
            .iter()
            .map(|s| s.corrupted)
            .sum::<u64>()
            .min(r.corrupted);
    tx > 0 && bad as f64 <= tol * tx as f64
}

/// RFC 2544 26.1: the highest load at which the device loses nothing (or no more than the
/// tolerance). The first trial runs at `max_load`; if it fails, its forwarding rate at overload
/// is the first guess, then the search gallops up from a pass and bisects after a fail until the
/// bracket is narrower than the resolution. Counters are read only after each trial's drain.
pub fn throughput(
    t: &mut Tester,
    sizes: &FrameSizes,
    trial: &TrialOpts,
    o: &SearchOpts,
    obs: &mut dyn Observer,
) -> Throughput {
    let label = format!("{sizes} throughput");
    let active: Vec<usize> = o
        .active
        .clone()
        .unwrap_or_else(|| (0..t.streams.len()).collect());
    let run = |t: &mut Tester, load: f64, obs: &mut dyn Observer| {
        let mut spec = trial.spec(load, sizes);
        spec.active = o.active.clone();
        let r = t.trial(&mut spec, &mut |p| obs.progress(&label, p));
        // A load the link would not take whole from the tester (its transmit rings refused or
        // kept frames: the device's back-pressure on a veth) was not carried, whatever was
        // lost: the search goes below it, to a load that went out whole.
        let ok = passes_judged(&r, o.loss_tolerance, &active, &o.ignore) && r.carried_whole();
        obs.trial(&label, &r, ok);
        (r, ok)
    };
    let mut trials = Vec::new();
    if let Some(start) = o.start {
        return climb(t, o, start, &mut |t, l| run(t, l, obs));
    }
    let (first, ok) = run(t, o.max_load, obs);
    trials.push((o.max_load, ok, first.clone()));
    let mut tester_limited = ok && first.tester_limited;
    if ok {
        return Throughput {
            load: o.max_load,
            best: Some(first.clone()),
            at_max: first,
            trials,
            tester_limited,
        };
    }
    let (mut lo, mut hi) = (0.0f64, o.max_load);
    let mut best: Option<(f64, TrialResult)> = None;
    // The forwarding rate at overload, a little under: usually the answer or close to it. A
    // trial that received nothing says nothing of the rate (a device that paused, a path not
    // up yet): bisect instead of guessing ~0 from it.
    let floor = if o.relative { 1e-6 } else { o.resolution };
    let mut next = if first.offered_fps > 0.0 && first.rx > 0 {
        (o.max_load * first.frames_fps() / first.offered_fps * 0.995).clamp(floor, o.max_load)
    } else {
        o.max_load / 2.0
    };
    if next >= hi {
        next = hi / 2.0;
    }
    let resolution = if o.relative {
        o.resolution * next
    } else {
        o.resolution
    };
    let mut gallop = resolution;
    while hi - lo > resolution && next > 0.0 {
        let (r, ok) = run(t, next, obs);
        trials.push((next, ok, r.clone()));
        if ok {
            lo = next;
            tester_limited = r.tester_limited;
            let short = r.offered_fps > 0.0 && r.tx_fps < 0.98 * r.offered_fps;
            best = Some((next, r));
            if short {
                // The tester could not offer this load: searching higher would measure the
                // tester. (A shortfall under 2%, the tester thread losing its core for a few
                // milliseconds, keeps the search going and the answer marked.)
                break;
            }
            next = (lo + gallop)
                .min((lo + hi) / 2.0)
                .max(lo + resolution / 2.0);
            gallop *= 2.0;
        } else {
            // A load the link did not take whole went out at the rate it would take: just
            // under that is the likely answer, closer than the bracket's middle.
            let took = (!r.carried_whole() && r.offered_fps > 0.0)
                .then(|| next * r.tx_fps / r.offered_fps * 0.995);
            hi = next;
            gallop = resolution;
            next = match took {
                Some(g) if g > lo + resolution / 2.0 && g < hi => g,
                _ => (lo + hi) / 2.0,
            };
        }
        if next >= hi {
            next = (lo + hi) / 2.0;
        }
    }
    // The answer is the tester's if any trial at or above it was limited by the tester: the
    // device might have passed a load the tester could not offer or receive.
    let load = best.as_ref().map_or(0.0, |b| b.0);
    tester_limited |= trials
        .iter()
        .any(|(l, _, r)| *l >= load - 1e-12 && r.tester_limited);
    Throughput {
        load,
        best: best.map(|b| b.1),
        at_max: first,
        trials,
        tester_limited,
    }
}

/// The search from below (see [`SearchOpts::start`]): double the load while trials pass, then
/// bisect between the last pass and the first fail until the bracket is within the resolution
/// (of the answer, when relative); halve while the start fails.
fn climb(
    t: &mut Tester,
    o: &SearchOpts,
    start: f64,
    run: &mut dyn FnMut(&mut Tester, f64) -> (TrialResult, bool),
) -> Throughput {
    let mut trials: Vec<(f64, bool, TrialResult)> = Vec::new();
    let (mut lo, mut hi) = (0.0f64, None::<f64>);
    let mut best: Option<(f64, TrialResult)> = None;
    let mut next = start.clamp(1e-7, o.max_load);
    let mut retried = false;
    loop {
        let (mut r, mut ok) = run(t, next);
        if !ok && trials.is_empty() && r.tx > 0 && r.rx * 2 < r.tx && !retried {
            // The first trial lost most of what it sent (nothing got through at all, as a rule):
            // once more before it bounds the search, which would otherwise settle below a pause
            // the device took (a commit, a path coming up). A device that is simply slower than
            // the start fails again, and the search goes on down as before.
            retried = true;
            (r, ok) = run(t, next);
        }
        let short = r.offered_fps > 0.0 && r.tx_fps < 0.98 * r.offered_fps;
        trials.push((next, ok, r.clone()));
        if ok {
            lo = next;
            best = Some((next, r));
            // The tester could not offer this load: higher would measure the tester.
            if short || next >= o.max_load {
                break;
            }
        } else {
            hi = Some(next);
        }
        let res = if o.relative {
            o.resolution * lo.max(hi.unwrap_or(0.0) / 2.0)
        } else {
            o.resolution
        };
        next = match hi {
            None => (lo * 2.0).min(o.max_load),
            Some(h) if lo == 0.0 => h / 2.0,
            Some(h) => (lo + h) / 2.0,
        };
        match hi {
            Some(h) if lo > 0.0 && h - lo <= res => break,
            Some(h) if lo == 0.0 && h < 1e-7 => break,
            _ => {}
        }
    }
    let load = best.as_ref().map_or(0.0, |b| b.0);
    let tester_limited = trials
        .iter()
        .any(|(l, _, r)| *l >= load - 1e-12 && r.tester_limited);
    let at_max = trials
        .iter()
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|x| x.2.clone())
        .unwrap_or_default();
    Throughput {
        load,
        best: best.map(|b| b.1),
        at_max,
        trials,
        tester_limited,
    }
}

/// RFC 2544 26.3: loss at 100%, 90%, ... of `max_load`, until two successive trials lose nothing.
pub fn loss_vs_load(
    t: &mut Tester,
    sizes: &FrameSizes,
    trial: &TrialOpts,
    max_load: f64,
    obs: &mut dyn Observer,
) -> Vec<(f64, TrialResult)> {
    let label = format!("{sizes} frame loss rate");
    let mut out = Vec::new();
    let mut clean = 0;
    for step in 0..10 {
        let load = max_load * (1.0 - step as f64 / 10.0);
        let mut spec = trial.spec(load, sizes);
        let r = t.trial(&mut spec, &mut |p| obs.progress(&label, p));
        let ok = passes(&r, 0.0);
        obs.trial(&label, &r, ok);
        out.push((load, r));
        clean = if ok { clean + 1 } else { 0 };
        if clean == 2 {
            break;
        }
    }
    out
}

/// RFC 2544 26.4: the longest burst at `load` (normally 100%) that every port can send with no
/// loss, searched between 1 frame and `max_frames` per port (to within 1%).
pub fn back_to_back(
    t: &mut Tester,
    sizes: &FrameSizes,
    trial: &TrialOpts,
    load: f64,
    max_frames: u64,
    obs: &mut dyn Observer,
) -> (u64, Vec<(u64, TrialResult)>) {
    let label = format!("{sizes} back-to-back");
    let run = |t: &mut Tester, n: u64, obs: &mut dyn Observer| {
        let mut spec = trial.spec(load, sizes);
        spec.frames_per_port = Some(n);
        let r = t.trial(&mut spec, &mut |p| obs.progress(&label, p));
        let ok = passes(&r, 0.0);
        obs.trial(&label, &r, ok);
        (r, ok)
    };
    let mut trials = Vec::new();
    let (r, ok) = run(t, max_frames, obs);
    trials.push((max_frames, r));
    if ok {
        return (max_frames, trials);
    }
    let (mut lo, mut hi) = (0u64, max_frames);
    while hi - lo > (hi / 100).max(1) {
        let mid = (lo + hi) / 2;
        let (r, ok) = run(t, mid, obs);
        trials.push((mid, r));
        if ok {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo, trials)
}

/// Failover time: a trial at `load` during which `event` (cutting a link, withdrawing a route)
/// happens `at` seconds in; the time is frames lost / offered rate (frames/s), as the reports
/// compute it. Returns (seconds, the trial).
pub fn failover(
    t: &mut Tester,
    sizes: &FrameSizes,
    trial: &TrialOpts,
    load: f64,
    at: f64,
    event: Box<dyn FnMut()>,
    obs: &mut dyn Observer,
) -> (f64, TrialResult) {
    let label = format!("{sizes} failover");
    let mut spec = trial.spec(load, sizes);
    spec.events.push((at, event));
    let r = t.trial(&mut spec, &mut |p| obs.progress(&label, p));
    obs.trial(&label, &r, true);
    let offered = r.tx as f64 / r.seconds;
    let secs = if offered > 0.0 {
        r.lost as f64 / offered
    } else {
        0.0
    };
    (secs, r)
}

/// Stream-count scaling (GR-1): throughput with streams `0..n` active, for each n in `counts`.
pub fn stream_scaling(
    t: &mut Tester,
    sizes: &FrameSizes,
    trial: &TrialOpts,
    search: &SearchOpts,
    counts: &[usize],
    obs: &mut dyn Observer,
) -> Vec<(usize, Throughput)> {
    counts
        .iter()
        .map(|&n| {
            let mut o = search.clone();
            o.active = Some((0..n).collect());
            (n, throughput(t, sizes, trial, &o, obs))
        })
        .collect()
}

/// RFC 2889 5.7 address learning, one step: `learn` streams (whose source MACs vary over the
/// addresses) are sent first at `learn_load`; then `test` streams (to those addresses) at
/// `test_load`. Every test frame must arrive at its port and nowhere else: misdelivered frames
/// are the flooded copies of frames to addresses the device did not learn.
pub struct LearningStep {
    pub learned_ok: bool,
    pub learn: TrialResult,
    pub test: TrialResult,
}

/// What a learning step sends: learning streams at one load, then test streams at another.
pub struct LearningLoads<'a> {
    pub learn: &'a [usize],
    pub learn_load: f64,
    pub test: &'a [usize],
    pub test_load: f64,
}

pub fn learning_step(
    t: &mut Tester,
    sizes: &FrameSizes,
    trial: &TrialOpts,
    l: &LearningLoads,
    obs: &mut dyn Observer,
) -> LearningStep {
    let mut ls = trial.spec(l.learn_load, sizes);
    ls.active = Some(l.learn.to_vec());
    let mut ts = trial.spec(l.test_load, sizes);
    ts.active = Some(l.test.to_vec());
    let (lr, tr, ok) = learn_then_test(t, ls, ts, "address learning", "test frames", obs);
    LearningStep {
        learned_ok: ok,
        learn: lr,
        test: tr,
    }
}

/// Learning frames, then test frames: the test passes when every test frame arrived at its port
/// and nowhere else (a flooded copy is a misdelivery). Both trials are reported to `obs`.
pub fn learn_then_test(
    t: &mut Tester,
    mut learn: TrialSpec,
    mut test: TrialSpec,
    what: &str,
    test_label: &str,
    obs: &mut dyn Observer,
) -> (TrialResult, TrialResult, bool) {
    let lr = t.trial(&mut learn, &mut |p| obs.progress(what, p));
    obs.trial("learning frames", &lr, true);
    let tr = t.trial(&mut test, &mut |p| obs.progress(what, p));
    let ok = tr.tx > 0 && tr.lost == 0 && tr.misdelivered == 0;
    obs.trial(test_label, &tr, ok);
    (lr, tr, ok)
}

/// RFC 2889 5.8 flooding check: the frames of `streams` (to addresses nobody announced) counted
/// per receiving port. Returns, per tester port, the frames it received that were addressed
/// elsewhere: all of them flooded means each other port got every frame.
pub fn flooding(
    t: &mut Tester,
    sizes: &FrameSizes,
    trial: &TrialOpts,
    streams: &[usize],
    load: f64,
    obs: &mut dyn Observer,
) -> TrialResult {
    let mut s = trial.spec(load, sizes);
    s.active = Some(streams.to_vec());
    let r = t.trial(&mut s, &mut |p| obs.progress("flooding", p));
    obs.trial("flooding", &r, true);
    r
}

/// RFC 2889 5.7 address learning capacity: the largest address count `n` in `1..=max` for which
/// a learning step passes. `streams(n)` gives the streams for `n` addresses and the indices of the
/// learning and test streams; learning frames go out as exactly one frame per address.
pub fn address_capacity(
    t: &mut Tester,
    sizes: &FrameSizes,
    trial: &TrialOpts,
    max: u32,
    (learn_load, test_load): (f64, f64),
    streams: &dyn Fn(u32) -> (Vec<crate::StreamSpec>, Vec<usize>, Vec<usize>),
    obs: &mut dyn Observer,
) -> (u32, Vec<(u32, bool)>) {
    let mut steps = Vec::new();
    let mut step = |t: &mut Tester, n: u32, obs: &mut dyn Observer| {
        let (specs, learn, test) = streams(n);
        t.set_streams(specs);
        let mut o = trial.clone();
        o.seconds = o.seconds.max(n as f64 / 1000.0);
        let mut ls = o.spec(learn_load, sizes);
        ls.active = Some(learn);
        ls.frames_per_port = Some(n as u64);
        let mut ts = o.spec(test_load, sizes);
        ts.active = Some(test);
        let label = format!("{n} addresses");
        let (_, _, ok) = learn_then_test(t, ls, ts, "address learning", &label, obs);
        steps.push((n, ok));
        ok
    };
    let found = capacity_search(max, &mut |n| step(t, n, obs));
    (found, steps)
}

/// The search of RFC 2889 5.7's capacity: `max` first, then a binary search to one address of
/// the largest `n` for which `step(n)` passes (0 if none does).
pub fn capacity_search(max: u32, step: &mut dyn FnMut(u32) -> bool) -> u32 {
    if step(max) {
        return max;
    }
    let (mut lo, mut hi) = (0u32, max);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if step(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Tries of an address-learning step the tester could not keep to schedule.
const STEP_TRIES: u32 = 3;

/// RFC 2889 5.8 address learning rate: the highest rate (fraction of nominal) at which `n`
/// learning frames, one per address, are all learned, searched to within `resolution`. Before
/// each step `age_out` must make the device forget what it learned (RFC 2889 waits for the aging
/// time; a test device can be told).
#[allow(clippy::too_many_arguments)]
pub fn address_learning_rate(
    t: &mut Tester,
    sizes: &FrameSizes,
    trial: &TrialOpts,
    n: u32,
    test_load: f64,
    resolution: f64,
    streams: &dyn Fn(u32) -> (Vec<crate::StreamSpec>, Vec<usize>, Vec<usize>),
    age_out: &mut dyn FnMut(),
    obs: &mut dyn Observer,
) -> (f64, Vec<(f64, bool)>) {
    let (specs, learn, test) = streams(n);
    t.set_streams(specs);
    let mut steps = Vec::new();
    let mut step = |t: &mut Tester, load: f64, obs: &mut dyn Observer| {
        // A step the tester could not keep to schedule (its thread lost its core, and the frames
        // owed went out late in a burst) did not offer `load`: it is made again, from a device
        // that has forgotten, up to STEP_TRIES times.
        let mut tries = 0;
        loop {
            tries += 1;
            age_out();
            let mut ls = trial.spec(load, sizes);
            ls.seconds = ls.seconds.max(60.0);
            ls.active = Some(learn.clone());
            ls.frames_per_port = Some(n as u64);
            let mut ts = trial.spec(test_load, sizes);
            ts.active = Some(test.clone());
            let label = format!("learning at {:.2}%", load * 100.0);
            let (lr, tr, ok) = learn_then_test(t, ls, ts, "learning rate", &label, obs);
            let limited = lr.tester_limited || tr.tester_limited;
            if ok || !limited || tries == STEP_TRIES {
                steps.push((load, ok));
                return ok;
            }
        }
    };
    if step(t, 1.0, obs) {
        return (1.0, steps);
    }
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while hi - lo > resolution {
        let mid = (lo + hi) / 2.0;
        if step(t, mid, obs) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo, steps)
}
