//! Known-answer tests of the tester: a fake device under test with one fault at a time, and the
//! tester must report exactly that fault. Tests take a lock so that only one tester and one fake
//! device spin at a time (the counts are exact only if no ring overflows).

use std::sync::Mutex;
use std::time::Duration;

use dataplane::Pool;
use tester::fake_dut::{FakeDut, Faults, Forwarding};
use tester::procedures::{self, Quiet, SearchOpts, TrialOpts};
use tester::stream::{Field, FieldKind, Vary, L3};
use tester::{FrameSizes, StreamSpec, Tester, TrialResult};

static SERIAL: Mutex<()> = Mutex::new(());

const SPEED: f64 = 100e6; // 148,810 frames/s at 64 bytes

fn stream(name: &str, from: usize, to: usize) -> StreamSpec {
    StreamSpec {
        name: name.into(),
        tx_port: from,
        rx_port: to,
        src_mac: [2, 0, 0, 0, 0, from as u8],
        dst_mac: [2, 0, 0, 0, 1, from as u8],
        vlan: None,
        l3: L3::V4 {
            src: [10, from as u8, 0, 2],
            dst: [10, to as u8, 0, 2],
        },
        udp: Some((1024, 5000)),
        ttl: 64,
        dscp: 0,
        fields: vec![],
        weight: 1.0,
        min_size: 0,
        also_rx: Vec::new(),
        multicast_mac: false,
        tunnel: None,
        mpls: None,
    }
}

fn routes(n: usize) -> Forwarding {
    Forwarding::Routes {
        v4: (0..n)
            .map(|p| ((10u32 << 24) | (p as u32) << 16, 16, p))
            .collect(),
        v6: vec![],
    }
}

fn setup(
    nports: usize,
    fwd: Forwarding,
    faults: Faults,
    streams: Vec<StreamSpec>,
) -> (FakeDut, Tester) {
    let pool = Pool::new(65536);
    let (dut, ports) = FakeDut::start(nports, SPEED, fwd, faults, pool.clone());
    (dut, Tester::new(ports, streams, pool))
}

fn one_trial(t: &mut Tester, load: f64, seconds: f64) -> TrialResult {
    let o = TrialOpts {
        seconds,
        ..Default::default()
    };
    let mut spec = o.spec(load, &FrameSizes::Fixed(64));
    t.trial(&mut spec, &mut |_| {})
}

#[test]
fn a_clean_device_loses_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (dut, mut t) = setup(
        2,
        routes(2),
        Faults::default(),
        vec![stream("a", 0, 1), stream("b", 1, 0)],
    );
    // A host that takes the tester's core away for tens of milliseconds makes the tester fall
    // behind its schedule. It must then say so (tester_limited, with the frames it skipped in
    // `behind`), and the rate is measured again: up to three trials, one on schedule.
    let mut sent = 0;
    let mut on_schedule = None;
    for _ in 0..3 {
        let r = one_trial(&mut t, 0.5, 0.5);
        assert!(r.tx > 60_000 || r.tester_limited, "{r:?}");
        assert_eq!((r.rx, r.lost, r.duplicated, r.reordered), (r.tx, 0, 0, 0));
        assert_eq!((r.misdelivered, r.corrupted, r.foreign), (0, 0, 0));
        assert_eq!(r.streams.len(), 2);
        sent += r.tx;
        // 50% of 148,810 on each of two ports.
        let short = 1.0 - r.tx_fps / 148_809.5;
        assert!(short > -0.01, "faster than offered: {}", r.tx_fps);
        if !r.tester_limited {
            assert!(short < 0.01, "short by {short} but not tester-limited");
            on_schedule = Some(r);
            break;
        }
        // Short by more than 0.5%: the frames the schedule asked for and never got are counted.
        let owed = (148_809.5 * 0.5) as u64;
        assert!(r.tx + r.behind + 2 >= owed, "short by {short}: {r:?}");
        eprintln!(
            "tester fell behind by {:.1}% (host stall); again",
            short * 100.0
        );
    }
    if on_schedule.is_none() {
        // The counts above were still exact; only the rate went unchecked on this machine.
        eprintln!("three trials in a row fell behind: the rate went unchecked");
    }
    assert_eq!(dut.stop().received, sent);
}

#[test]
fn every_nth_frame_dropped_duplicated_corrupted_or_misdelivered_is_counted_exactly() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (fault, n) in [
        ("drop", 100u64),
        ("duplicate", 50),
        ("corrupt", 70),
        ("misdeliver", 90),
    ] {
        let mut f = Faults::default();
        match fault {
            "drop" => f.drop_every = n,
            "duplicate" => f.duplicate_every = n,
            "corrupt" => f.corrupt_every = n,
            _ => f.misdeliver_every = n,
        }
        let (dut, mut t) = setup(3, routes(3), f, vec![stream("a", 0, 1), stream("b", 1, 0)]);
        let r = one_trial(&mut t, 0.5, 0.4);
        let k = r.tx / n;
        assert!(k > 500 || r.tester_limited, "{fault}: {r:?}");
        let got = match fault {
            "drop" => (r.lost, r.duplicated, r.corrupted, r.misdelivered),
            "duplicate" => (r.duplicated, r.lost, r.corrupted, r.misdelivered),
            "corrupt" => (r.corrupted, r.duplicated, r.lost - k, r.misdelivered),
            _ => (r.misdelivered, r.duplicated, r.corrupted, r.lost - k),
        };
        assert_eq!(got, (k, 0, 0, 0), "{fault} every {n} of {}", r.tx);
        assert_eq!(r.reordered, 0, "{fault}");
        dut.stop();
    }
}

#[test]
fn streams_that_do_not_fit_the_frame_size_fail_the_trial_and_send_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut s = stream("a", 0, 1);
    s.vlan = Some(10); // a tag and UDP do not fit 64 bytes
    let (dut, mut t) = setup(2, routes(2), Faults::default(), vec![s]);
    let r = one_trial(&mut t, 0.5, 0.1);
    assert!(
        r.error.as_deref().unwrap_or("").contains("cannot hold"),
        "{r:?}"
    );
    assert_eq!((r.tx, r.rx), (0, 0));
    assert_eq!(dut.stop().received, 0);
}

#[test]
fn held_back_frames_are_reordered_not_lost() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Faults {
        reorder_every: 100,
        ..Default::default()
    };
    let (dut, mut t) = setup(2, routes(2), f, vec![stream("a", 0, 1)]);
    let r = one_trial(&mut t, 0.5, 0.4);
    assert_eq!((r.lost, r.duplicated, r.rx), (0, 0, r.tx), "{r:?}");
    // A held frame is late only if the next frame overtook it. The device sends a held frame
    // alone when nothing follows within a millisecond: the last frame of the trial, or any
    // frame before a stall of the tester's thread (20 ms seen on a loaded CI machine). Those
    // arrive in order, and the tester must not count them.
    let d = dut.stop();
    assert_eq!(d.held, r.tx / 100, "every 100th frame is held: {d:?}");
    assert_eq!(r.reordered, d.held - d.held_sent_alone, "{d:?} {r:?}");
}

#[test]
fn a_set_delay_is_measured_within_the_resolution() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Faults {
        delay: Duration::from_millis(2),
        ..Default::default()
    };
    on_schedule(|| {
        let (dut, mut t) = setup(2, routes(2), f.clone(), vec![stream("a", 0, 1)]);
        let r = one_trial(&mut t, 0.2, 0.4);
        let d = dut.stop();
        let l = r.latency.clone().unwrap();
        assert_eq!(r.lost, 0);
        assert!(l.min_ns >= 2_000_000, "no frame can beat the delay: {l:?}");
        // The device holds each frame 2 ms and polls in a loop; the tester stamps per burst.
        // What is left over is polling: tens of microseconds on an idle machine.
        let ok = l.avg_ns < 2_300_000.0 && l.p50_ns < 2_000_000 * 33 / 32 + 300_000;
        // A stall of S ms adds ~S ms to the S ms of frames behind it: 5 ms in all moves the
        // mean by ~15 us at this rate, well inside the check.
        let late = r.tester_limited || d.stalled_ns > 5_000_000;
        (late, ok, format!("{l:?} {d:?}"))
    });
}

#[test]
fn the_throughput_search_finds_a_policer_within_its_resolution() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The emulated device and the tester are threads of this process: on a loaded 2-vCPU
    // machine (CI, or a build beside it) the device thread can be descheduled long enough to
    // lose a frame or two below the policer's rate, and the search then rightly reports a lower
    // rate. One more search is allowed; the second must be right.
    let mut failures = Vec::new();
    for _attempt in 0..2 {
        match policer_search() {
            Ok(()) => return,
            Err(e) => {
                eprintln!("policer search off (retrying once): {e}");
                failures.push(e);
            }
        }
    }
    panic!("the policer search was off twice: {failures:#?}");
}

/// The fake policer's bucket, frames. It meters frames as the device thread takes them, not as
/// they arrived: after the thread lost its core for a while (tens of milliseconds on this shared
/// VM, under load), the frames queued meanwhile come in one burst, which a 256-frame bucket
/// drops at loads far below the rate (seen: losses at 12,000 frames/s against a 50,000 frames/s
/// policer). 2,048 frames ride out a 40 ms gap at 50,000 frames/s; the search may then pass up
/// to 2,048 frames a second above the rate.
const POLICER_BURST: u32 = 2048;

fn policer_search() -> Result<(), String> {
    let f = Faults {
        max_fps: 50_000.0,
        max_burst: POLICER_BURST,
        ..Default::default()
    };
    let (dut, mut t) = setup(2, routes(2), f, vec![stream("a", 0, 1)]);
    let trial = TrialOpts {
        seconds: 1.0,
        ..Default::default()
    };
    let search = SearchOpts {
        resolution: 0.01,
        ..Default::default()
    };
    let r = procedures::throughput(&mut t, &FrameSizes::Fixed(64), &trial, &search, &mut Quiet);
    dut.stop();
    let line = 148_809.5;
    let exact = 50_000.0 / line;
    // The answer is the highest load that passed: at most the policer's rate (plus what its
    // bucket lets through in a 1 s trial), at least one resolution step below it.
    if !(r.load <= exact + POLICER_BURST as f64 / line + 1e-9 && r.load >= exact - 0.01 - 1e-9) {
        return Err(format!(
            "found {:.4}, policer at {exact:.4}: {:?}",
            r.load,
            r.trials
                .iter()
                .map(|t| (t.0, t.1, t.2.lost))
                .collect::<Vec<_>>()
        ));
    }
    let best = r.best.ok_or("no trial passed")?;
    if best.lost != 0 {
        return Err(format!("the best trial lost {}", best.lost));
    }
    if r.at_max.lost == 0 {
        return Err("the trial at the maximum load lost nothing above the policer".into());
    }
    Ok(())
}

#[test]
fn failover_time_is_lost_frames_over_the_offered_rate() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    on_schedule(|| {
        let (dut, mut t) = setup(2, routes(2), Faults::default(), vec![stream("a", 0, 1)]);
        let control = dut.control.clone();
        let trial = TrialOpts {
            seconds: 1.0,
            ..Default::default()
        };
        let (secs, r) = procedures::failover(
            &mut t,
            &FrameSizes::Fixed(64),
            &trial,
            0.5,
            0.3,
            Box::new(move || control.outage(Duration::from_millis(100))),
            &mut Quiet,
        );
        // Whatever the schedule, the loss is exactly what the device dropped.
        let d = dut.stop();
        assert_eq!(
            (r.lost, r.rx + r.lost),
            (d.dropped, d.received),
            "{d:?} {r:?}"
        );
        // 100 ms of outage at 74,405 frames/s: 7,440 frames, give or take the frames in flight.
        // Only on schedule: a tester that fell behind sends faster than its average to catch up,
        // and the outage then swallows more frames than the average rate says.
        let ok = (secs - 0.1).abs() < 0.005;
        // A device stall of S ms at either edge of the outage moves the loss by up to S ms of
        // frames: under 4 ms it stays inside the check.
        let late = r.tester_limited || d.longest_stall_ns > 4_000_000;
        (late, ok, format!("{secs} s, {d:?} {r:?}"))
    });
}

/// Runs `attempt` until a run kept its schedule (at most three times, as the failover and
/// bridging procedures do) and asserts that run's timing check. What is known is that the tester
/// either measures right or says it could not: a trial the tester reports as limited, or across
/// which the fake device's thread stalled (either lost its core for milliseconds, as on a loaded
/// CI machine), measured the machine, not the device, and its timing is not held against it.
/// If all three were late, the timing went unchecked on this machine, and the test says so on
/// stderr. `attempt` returns (late, timing check, detail).
fn on_schedule(mut attempt: impl FnMut() -> (bool, bool, String)) {
    for _ in 0..3 {
        let (late, ok, detail) = attempt();
        if !late {
            assert!(
                ok,
                "the trial kept its schedule and measured wrong: {detail}"
            );
            return;
        }
        eprintln!("late (tester limited or device stalled), trying again: {detail}");
    }
    eprintln!("three runs in a row were late: the timing went unchecked");
}

/// Learning streams from port 0 with `n` source MACs; test streams from port 1 to them.
fn learning_streams(n: u32) -> (Vec<StreamSpec>, Vec<usize>, Vec<usize>) {
    let base = [2, 0xaa, 0, 0, 0, 0];
    let mut learn = stream("learn", 0, 1);
    learn.src_mac = base;
    learn.dst_mac = [2, 0, 0, 0, 0, 1]; // the test port's own address, learned from its frames
    learn.fields = vec![Field {
        kind: FieldKind::SrcMac,
        vary: Vary::Step { count: n, step: 1 },
        nested: false,
    }];
    let mut test = stream("test", 1, 0);
    test.src_mac = [2, 0, 0, 0, 0, 1];
    test.dst_mac = base;
    test.fields = vec![Field {
        kind: FieldKind::DstMac,
        vary: Vary::Step { count: n, step: 1 },
        nested: false,
    }];
    (vec![learn, test], vec![0], vec![1])
}

#[test]
fn address_learning_capacity_of_a_bridge_is_found_exactly() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (specs, _, _) = learning_streams(1);
    let (dut, mut t) = setup(
        3,
        Forwarding::Bridge { capacity: 1000 },
        Faults::default(),
        specs,
    );
    let trial = TrialOpts {
        seconds: 0.2,
        ..Default::default()
    };
    // Flooding: before anything is learned, frames to unknown addresses reach every other port.
    let (specs, _, test) = learning_streams(100);
    t.set_streams(specs);
    let fl = procedures::flooding(
        &mut t,
        &FrameSizes::Fixed(64),
        &trial,
        &test,
        0.1,
        &mut Quiet,
    );
    assert_eq!(fl.rx, fl.tx, "the addressed port gets every frame");
    assert_eq!(
        fl.misdelivered, fl.tx,
        "and the third port a flooded copy of each"
    );
    drop(dut);
    let (specs, _, _) = learning_streams(1);
    let (dut, mut t) = setup(
        3,
        Forwarding::Bridge { capacity: 1000 },
        Faults::default(),
        specs,
    );
    let (cap, steps) = procedures::address_capacity(
        &mut t,
        &FrameSizes::Fixed(64),
        &trial,
        1500,
        (0.1, 0.1),
        &learning_streams,
        &mut Quiet,
    );
    // The bridge is not reset between steps, so later steps find earlier addresses learned; the
    // answer is still exact because every step learns from the same base address upwards (the
    // test port's own address never fits: the first step fills the table).
    assert_eq!(cap, 1000, "steps: {steps:?}");
    dut.stop();
}

#[test]
fn address_learning_rate_of_a_bridge_is_found_within_the_resolution() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    on_schedule(|| {
        let (specs, _, _) = learning_streams(1);
        // Learns at most 20,000 new addresses a second; 100 Mbit/s ports: 148,810 frames/s at
        // 100%.
        let f = Faults {
            learn_per_s: 20_000.0,
            ..Default::default()
        };
        let (dut, mut t) = setup(3, Forwarding::Bridge { capacity: 10_000 }, f, specs);
        let control = dut.control.clone();
        let trial = TrialOpts {
            seconds: 0.1,
            ..Default::default()
        };
        let (load, steps) = procedures::address_learning_rate(
            &mut t,
            &FrameSizes::Fixed(64),
            &trial,
            2000,
            0.05,
            0.01,
            &learning_streams,
            &mut || control.flush_addresses(),
            &mut Quiet,
        );
        let fps = load * 148_809.5;
        // 2,000 addresses at 20,000/s plus the 64-address bucket: the rate that passes is at
        // most 20,000 * 1,999 / (2,000 - 64) = 20,651 frames/s, 3% more if the device's thread
        // loses its core mid-step (it then learns late frames with fresh tokens); the search
        // ends within one 1% step (1,488 frames/s) below.
        // A device stall longer than the bucket (64 addresses at 20,000/s: 3.2 ms) queues more
        // new addresses than it can learn in one go, and a step below the rate fails.
        let d = dut.stop();
        let ok = (20_000.0 - 1_500.0..=20_651.0 * 1.03).contains(&fps);
        (
            d.longest_stall_ns > 3_000_000,
            ok,
            format!("{fps} fps, steps {steps:?}, {d:?}"),
        )
    });
}

/// A device that goes dark through most of the first trial of a search from below (ME-1S's
/// services-on search once began as the services commit paused the workers, and received
/// nothing): that trial is tried once more before it bounds the search, and the answer is the
/// device's rate, not a fraction of the first guess.
#[test]
fn a_search_from_below_does_not_settle_under_a_first_trial_that_received_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Most of the first trial (0.5 s at 5% of 64 B line rate: 3,720 frames) is lost.
    let f = Faults {
        max_fps: 50_000.0,
        max_burst: POLICER_BURST,
        drop_first: 3_000,
        ..Default::default()
    };
    let (dut, mut t) = setup(2, routes(2), f, vec![stream("a", 0, 1)]);
    let trial = TrialOpts {
        seconds: 0.5,
        ..Default::default()
    };
    let search = SearchOpts {
        resolution: 0.02,
        relative: true,
        start: Some(0.05),
        ..Default::default()
    };
    let r = procedures::throughput(&mut t, &FrameSizes::Fixed(64), &trial, &search, &mut Quiet);
    dut.stop();
    let line = 148_809.5;
    assert!(
        r.load > 0.05 && r.load <= 50_000.0 / line + POLICER_BURST as f64 / (0.5 * line) + 1e-9,
        "found {:.4}: {:?}",
        r.load,
        r.trials
            .iter()
            .map(|t| (t.0, t.1, t.2.rx))
            .collect::<Vec<_>>()
    );
}
