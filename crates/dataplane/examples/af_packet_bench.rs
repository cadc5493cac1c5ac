//! How fast the AF_PACKET port moves small frames: in a private network namespace with a veth
//! pair, one thread transmits frames as fast as it can through an `AfPacketPort` transmit queue
//! on one end, another receives them through an `AfPacketPort` receive queue on the other end.
//!
//! ```text
//! cargo run --release -p dataplane --example af_packet_bench -- [SECONDS] [FRAME_BYTES]
//! ```
//!
//! Needs root (a network namespace, veth devices, packet sockets). Prints the transmit and
//! receive rates, every drop counter, and the CPU time each thread used per frame. On veth the
//! receiving side's kernel work (including the copy into the receive ring) runs in the sender's
//! `send()` call, so it shows up in the transmit thread's CPU time.

#[path = "../tests/netns/mod.rs"]
mod netns;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dataplane::port::af_packet::{AfPacketConfig, AfPacketPort};
use dataplane::{BufCache, PktBuf, Pool};

const BURST: usize = 256;

/// CPU time (user + system) the calling thread has used.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec that lives across the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let secs: f64 = args.first().map_or(5.0, |s| s.parse().expect("SECONDS"));
    let size: usize = args.get(1).map_or(64, |s| s.parse().expect("FRAME_BYTES"));
    assert!((60..=1514).contains(&size), "FRAME_BYTES: 60 to 1514");
    if let Some(why) = netns::skip_reason() {
        eprintln!("af_packet_bench: {why}");
        std::process::exit(1);
    }
    // Before any thread starts, so every thread is in the namespace.
    netns::enter_new_netns().expect("a private network namespace");
    netns::veth("lra", "lrb");

    let sender = AfPacketPort::open("lra", &AfPacketConfig::default()).expect("open lra");
    drop(sender.take_rx_queues());
    let receiver = AfPacketPort::open("lrb", &AfPacketConfig::default()).expect("open lrb");
    let mut rxq = receiver.take_rx_queues().pop().unwrap();
    let mut txq = sender.tx_queue().expect("transmit queue");
    let pool = Pool::new(16 * 1024);
    let frame = {
        let mut f = netns::udp_frame(1, 0, size.max(60));
        f.truncate(size);
        f
    };
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let stop = Arc::new(AtomicBool::new(false));
    let rx_stop = Arc::new(AtomicBool::new(false));

    let tx = {
        let (pool, stop, core) = (pool.clone(), stop.clone(), cores.first().copied());
        std::thread::spawn(move || {
            if let Some(c) = core {
                core_affinity::set_for_current(c);
            }
            let mut cache = BufCache::new(pool);
            let mut pkts: Vec<PktBuf> = Vec::with_capacity(BURST);
            let (t0, c0) = (Instant::now(), thread_cpu());
            let mut sent = 0u64;
            while !stop.load(Ordering::Relaxed) {
                while pkts.len() < BURST {
                    let mut b = cache.alloc().expect("pool");
                    b.fill(&frame);
                    pkts.push(b);
                }
                sent += txq.tx_burst(&mut pkts, &mut cache) as u64;
            }
            txq.flush();
            cache.free_all(&mut pkts);
            (sent, t0.elapsed(), thread_cpu() - c0)
        })
    };
    let rx = {
        let (pool, stop, core) = (pool.clone(), rx_stop.clone(), cores.get(1).copied());
        std::thread::spawn(move || {
            if let Some(c) = core {
                core_affinity::set_for_current(c);
            }
            let mut cache = BufCache::new(pool);
            let mut bufs: Vec<PktBuf> = Vec::with_capacity(BURST);
            let (t0, c0) = (Instant::now(), thread_cpu());
            let (mut got, mut polls, mut empty) = (0u64, 0u64, 0u64);
            // Time inside bursts that returned frames: the receive cost without the idle spins
            // of a busy-polling loop.
            let mut busy = Duration::ZERO;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let n = rxq.rx_burst(&mut cache, &mut bufs, BURST) as u64;
                cache.free_all(&mut bufs);
                polls += 1;
                if n == 0 {
                    empty += 1;
                } else {
                    busy += t.elapsed();
                    got += n;
                }
            }
            (got, t0.elapsed(), thread_cpu() - c0, busy, polls, empty)
        })
    };
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    let (sent, tx_wall, tx_cpu) = tx.join().unwrap();
    // Let the last blocks be handed over (block timeout 1 ms) before the receiver stops.
    std::thread::sleep(Duration::from_millis(50));
    rx_stop.store(true, Ordering::Relaxed);
    let (got, rx_wall, rx_cpu, rx_busy, polls, empty) = rx.join().unwrap();

    let st = sender.stats().tx_total();
    let sr = receiver.stats().rx_total();
    let mpps = |n: u64, d: Duration| n as f64 / d.as_secs_f64() / 1e6;
    let ns_per = |d: Duration, n: u64| d.as_nanos() as f64 / n.max(1) as f64;
    println!("af_packet_bench: {size}-byte frames, {secs} s, veth lra -> lrb, one queue each way");
    println!(
        "tx: {sent} frames, {:.3} Mpps; ring full {} times (frames retried), send errors {}",
        mpps(sent, tx_wall),
        st.ring_full,
        st.send_errors
    );
    println!(
        "rx: {got} frames, {:.3} Mpps (over the sender's time: {:.3} Mpps)",
        mpps(got, rx_wall),
        mpps(got, tx_wall)
    );
    println!(
        "drops: receive ring full {} (ring freezes {}), oversize {}, veth/backlog {}, \
         unaccounted {}",
        sr.kernel_drops,
        sr.ring_freezes,
        sr.oversize,
        netns::dev_drops("lrb").0.max(netns::dev_drops("lra").1),
        sent as i64 - got as i64 - sr.kernel_drops as i64
    );
    println!(
        "cpu: tx thread {:.2} s of {:.2} s = {:.0} ns/frame sent (includes the kernel's veth \
         receive path and the copy into the receive ring)",
        tx_cpu.as_secs_f64(),
        tx_wall.as_secs_f64(),
        ns_per(tx_cpu, sent),
    );
    println!(
        "cpu: rx thread {:.2} s of {:.2} s = {:.0} ns/frame received (busy-polling: {:.2}% of \
         {polls} polls empty); inside non-empty bursts {:.0} ns/frame",
        rx_cpu.as_secs_f64(),
        rx_wall.as_secs_f64(),
        ns_per(rx_cpu, got),
        100.0 * empty as f64 / polls.max(1) as f64,
        ns_per(rx_busy, got)
    );
}
