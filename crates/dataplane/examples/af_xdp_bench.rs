//! AF_XDP throughput between the two ends of a veth pair, in a private network namespace: one
//! thread transmits fixed-size frames through an AF_XDP port on one end as fast as it can, another
//! receives them through an AF_XDP port on the other end. Prints the rates, the losses and the CPU
//! time each thread spent per frame (getrusage RUSAGE_THREAD, user + system).
//!
//! On veth the receiving end's work (the XDP program, the copy into its UMEM) runs in softirq on
//! the sending CPU, inside the sender's `sendto`, so it is charged to the transmit thread.
//!
//! ```text
//! sudo cargo run --release -p dataplane --example af_xdp_bench -- [SECONDS] [--len N]
//!     [--xdp native|generic] [--tx-ring N] [--rx-ring N]
//! ```

#[path = "../tests/xdp_netns/mod.rs"]
mod netns;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dataplane::port::af_xdp::{AfXdpConfig, AfXdpPort, XdpMode};
use dataplane::{BufCache, Pool};

const BURST: usize = 64;

/// User + system CPU time of the calling thread, and how often it was preempted (involuntary
/// context switches: on a shared machine, the sign that another process took the CPU).
fn thread_cpu() -> (Duration, i64) {
    // SAFETY: rusage is plain integers; zero is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a live, writable rusage.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    assert_eq!(r, 0, "getrusage: {}", std::io::Error::last_os_error());
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (tv(ru.ru_utime) + tv(ru.ru_stime), ru.ru_nivcsw)
}

/// CPU time and preemptions since `start`.
fn since(start: (Duration, i64)) -> (Duration, i64) {
    let now = thread_cpu();
    (now.0 - start.0, now.1 - start.1)
}

struct Args {
    seconds: f64,
    len: usize,
    xdp: XdpMode,
    tx_ring: u32,
    rx_ring: u32,
}

fn args() -> Args {
    let mut a = Args {
        seconds: 5.0,
        len: 64,
        xdp: XdpMode::Auto,
        tx_ring: 2048,
        rx_ring: 4096,
    };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{s} needs a value"));
        match s.as_str() {
            "--len" => a.len = val().parse().expect("--len N"),
            "--tx-ring" => a.tx_ring = val().parse().expect("--tx-ring N (a power of two)"),
            "--rx-ring" => a.rx_ring = val().parse().expect("--rx-ring N (a power of two)"),
            "--xdp" => {
                a.xdp = match val().as_str() {
                    "native" => XdpMode::Native,
                    "generic" => XdpMode::Generic,
                    v => panic!("--xdp native|generic, not {v}"),
                }
            }
            _ => a.seconds = s.parse().expect("SECONDS"),
        }
    }
    assert!((60..=1514).contains(&a.len), "--len 60..1514");
    a
}

fn main() {
    let a = args();
    if !netns::is_root() {
        eprintln!("af_xdp_bench needs root (BPF, AF_XDP, network namespaces)");
        std::process::exit(2);
    }
    // Threads started from here on are in the namespace too.
    netns::enter_fresh_netns();
    netns::veth_pair("bench-tx", "bench-rx", 2);

    // Receive rings deep enough to ride out the receiver being descheduled for a few ms (the
    // machine is shared); the fill ring (and the receive chunks) twice that.
    let cfg = AfXdpConfig {
        xdp: a.xdp,
        tx_ring: a.tx_ring,
        rx_ring: a.rx_ring,
        fill_ring: a.rx_ring * 2,
        ..Default::default()
    };
    let mut txp = AfXdpPort::open("bench-tx", &cfg).unwrap_or_else(|e| panic!("{e}"));
    let rx_cfg = AfXdpConfig {
        queues: 2,
        ..cfg.clone()
    };
    let mut rxp = AfXdpPort::open("bench-rx", &rx_cfg).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "{} B frames for {} s, rx ring {}, tx ring {}; sender: AF_XDP {} on bench-tx queue 0; receiver: AF_XDP {} on \
         bench-rx queues 0-1",
        a.len,
        a.seconds,
        a.rx_ring,
        a.tx_ring,
        txp.mode(),
        rxp.mode()
    );

    let stop_tx = Arc::new(AtomicBool::new(false));
    let stop_rx = Arc::new(AtomicBool::new(false));
    let pool = Pool::new(16384);

    let mut rxs = rxp.take_rx_queues();
    let (stop, p) = (stop_rx.clone(), pool.clone());
    let rx = std::thread::spawn(move || {
        netns::pin_to_cpu(1);
        let mut cache = BufCache::new(p);
        let mut out = Vec::with_capacity(BURST * 2);
        let (cpu0, t0) = (thread_cpu(), Instant::now());
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            for q in rxs.iter_mut() {
                n += q.rx_burst(&mut cache, &mut out, BURST) as u64;
                cache.free_all(&mut out);
            }
        }
        (n, since(cpu0), t0.elapsed())
    });

    let mut txq = txp.tx_queue().unwrap_or_else(|e| panic!("{e}"));
    let (stop, p, len) = (stop_tx.clone(), pool.clone(), a.len);
    let tx = std::thread::spawn(move || {
        netns::pin_to_cpu(0);
        let mut cache = BufCache::new(p);
        let mut frame = vec![0u8; len];
        frame[..14].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5]);
        let mut pkts = Vec::with_capacity(BURST);
        let (cpu0, t0) = (thread_cpu(), Instant::now());
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            // Frames a full ring handed back are offered again first.
            while pkts.len() < BURST {
                let mut b = cache.alloc().expect("pool");
                b.fill(&frame);
                pkts.push(b);
            }
            n += txq.tx_burst(&mut pkts, &mut cache) as u64;
        }
        txq.flush();
        cache.free_all(&mut pkts);
        (n, since(cpu0), t0.elapsed())
    });

    std::thread::sleep(Duration::from_secs_f64(a.seconds));
    stop_tx.store(true, Ordering::Relaxed);
    let (tx_n, (tx_cpu, tx_preempt), tx_wall) = tx.join().unwrap();
    // Let the receiver drain what is still in flight.
    std::thread::sleep(Duration::from_millis(200));
    stop_rx.store(true, Ordering::Relaxed);
    let (rx_n, (rx_cpu, rx_preempt), _) = rx.join().unwrap();

    let secs = tx_wall.as_secs_f64();
    let mpps = |n: u64| n as f64 / secs / 1e6;
    let ns_per = |cpu: Duration, n: u64| cpu.as_nanos() as f64 / n.max(1) as f64;
    let ts = txp.stats().unwrap_or_else(|e| panic!("{e}"));
    let rs = rxp.stats().unwrap_or_else(|e| panic!("{e}"));
    let sum = |v: &[dataplane::port::af_xdp::AfXdpQueueStats],
               f: fn(&dataplane::port::af_xdp::AfXdpQueueStats) -> u64| {
        v.iter().map(f).sum::<u64>()
    };
    println!(
        "tx: {tx_n} frames, {:.3} Mpps; CPU {:.0} ns/frame ({:.0}% of a core, preempted \
         {tx_preempt} times)",
        mpps(tx_n),
        ns_per(tx_cpu, tx_n),
        tx_cpu.as_secs_f64() / secs * 100.0
    );
    println!(
        "rx: {rx_n} frames, {:.3} Mpps; CPU {:.0} ns/frame ({:.0}% of a core, preempted \
         {rx_preempt} times)",
        mpps(rx_n),
        ns_per(rx_cpu, rx_n),
        rx_cpu.as_secs_f64() / (secs + 0.2) * 100.0
    );
    println!(
        "lost: {} ({:.2}%); sender: device drops {}, handed back (ring full) {}, sendto calls {}; \
         receiver kernel: rx_dropped {}, rx_ring_full {}, fill ring empty {}",
        tx_n.saturating_sub(rx_n),
        tx_n.saturating_sub(rx_n) as f64 * 100.0 / tx_n.max(1) as f64,
        sum(&ts, |s| s.tx_dev_drops),
        sum(&ts, |s| s.tx_full),
        sum(&ts, |s| s.tx_kicks),
        sum(&rs, |s| s.kernel.rx_dropped),
        sum(&rs, |s| s.kernel.rx_ring_full),
        sum(&rs, |s| s.kernel.rx_fill_ring_empty_descs),
    );
    // SAFETY: getloadavg writes at most 3 doubles into the live array.
    let mut load = [0f64; 3];
    unsafe { libc::getloadavg(load.as_mut_ptr(), 3) };
    println!("load average at the end: {:.2} (2 CPUs)", load[0]);
}
