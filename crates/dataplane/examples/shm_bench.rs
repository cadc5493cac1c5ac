//! How fast a shared-memory port moves frames between two processes, beside the kernel's own
//! process-to-process path for datagrams (a Unix `SOCK_DGRAM` socket pair) in the same run.
//!
//! ```text
//! cargo run --release -p dataplane --example shm_bench -- [SECONDS] [FRAME_BYTES]
//! ```
//!
//! The parent sends frames of FRAME_BYTES (default 64) for SECONDS (default 3) as fast as each
//! path takes them, in bursts of 256; a child process (this program run again) receives and
//! counts them, then reports what it got. Prints frames/s received and the ratio of the two.
//! Each side is one thread on its own core where the machine has two.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use dataplane::port::shm::{Layout, ShmPort};
use dataplane::port::{RxQueue, TxQueue};
use dataplane::{BufCache, PktBuf, Pool};

const BURST: usize = 256;

fn pin(core: usize) {
    let _ = core_affinity::set_for_current(core_affinity::CoreId { id: core });
}

/// The child: receives on `how` until the parent says stop (its stdin closes), then prints the
/// frame count on stdout.
fn child(how: &str, arg: &str) {
    pin(1);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = stop.clone();
    std::thread::spawn(move || {
        let mut b = [0u8; 1];
        let _ = std::io::stdin().read(&mut b);
        s.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let mut got = 0u64;
    match how {
        "shm" => {
            let port = ShmPort::connect(std::path::Path::new(arg)).expect("the server's file");
            let mut rx = port.rx_queue(0);
            let mut cache = BufCache::new(Pool::new(4096));
            let mut v: Vec<PktBuf> = Vec::with_capacity(BURST);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                got += rx.rx_burst(&mut cache, &mut v, BURST) as u64;
                cache.free_all(&mut v);
            }
        }
        _ => {
            let fd: i32 = arg.parse().expect("fd");
            // SAFETY: the parent passed this descriptor open across exec, and nothing else in
            // this process owns it.
            let sock = UnixDatagram::from(unsafe { OwnedFd::from_raw_fd(fd) });
            sock.set_read_timeout(Some(Duration::from_millis(50)))
                .unwrap();
            let mut buf = [0u8; 9216];
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if sock.recv(&mut buf).is_ok() {
                    got += 1;
                }
            }
        }
    }
    println!("{got}");
}

fn spawn(how: &str, arg: &str) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--child", how, arg])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the receiving process")
}

fn finish(mut c: std::process::Child) -> u64 {
    drop(c.stdin.take());
    let mut out = String::new();
    c.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    c.wait().unwrap();
    out.trim().parse().expect("the child's count")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        return child(&args[1], &args[2]);
    }
    let secs: f64 = args.first().map_or(3.0, |s| s.parse().expect("SECONDS"));
    let size: usize = args.get(1).map_or(64, |s| s.parse().expect("FRAME_BYTES"));
    assert!((60..=9216).contains(&size), "FRAME_BYTES: 60 to 9216");
    pin(0);
    let frame = vec![0x5au8; size];
    let run = Duration::from_secs_f64(secs);

    // Shared memory.
    let path = format!("/dev/shm/linerate-shm-bench-{}", std::process::id());
    let port = ShmPort::serve(
        std::path::Path::new(&path),
        Layout {
            queues: 1,
            slots: 1024,
            slot_bytes: 9216,
        },
    )
    .expect("a shared-memory file");
    let c = spawn("shm", &path);
    std::thread::sleep(Duration::from_millis(200));
    let mut tx = port.tx_queue(0);
    let mut cache = BufCache::new(Pool::new(4096));
    let mut v: Vec<PktBuf> = Vec::with_capacity(BURST);
    let t0 = Instant::now();
    let mut sent = 0u64;
    while t0.elapsed() < run {
        while v.len() < BURST {
            let mut b = cache.alloc().unwrap();
            b.fill(&frame);
            v.push(b);
        }
        sent += tx.tx_burst(&mut v, &mut cache) as u64;
    }
    let el = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(100));
    let shm_got = finish(c);
    cache.free_all(&mut v);
    drop(tx);
    drop(port);

    // The kernel: a datagram socket pair, the receiving end passed to the child.
    let (a, b) = UnixDatagram::pair().unwrap();
    let fd = b.as_raw_fd();
    // The child inherits the descriptor: clear close-on-exec for it.
    // SAFETY: fcntl on a descriptor this process owns, changing only its flags.
    unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    let c = spawn("unix", &fd.to_string());
    drop(b);
    std::thread::sleep(Duration::from_millis(200));
    a.set_nonblocking(true).unwrap();
    let t1 = Instant::now();
    let mut usent = 0u64;
    while t1.elapsed() < run {
        for _ in 0..BURST {
            if a.send(&frame).is_ok() {
                usent += 1;
            }
        }
    }
    let uel = t1.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(100));
    let unix_got = finish(c);

    let rate = |n: u64, s: f64| n as f64 / s / 1e6;
    let _ = std::io::stdout().flush();
    println!("shm_bench: {size}-byte frames, {secs} s each, sender and receiver in two processes");
    println!(
        "  shared-memory port:   {:7.2} Mfps received ({} sent, {} received)",
        rate(shm_got, el),
        sent,
        shm_got
    );
    println!(
        "  Unix datagram socket: {:7.2} Mfps received ({} sent, {} received)",
        rate(unix_got, uel),
        usent,
        unix_got
    );
    println!(
        "  ratio: {:.1}x",
        rate(shm_got, el) / rate(unix_got, uel).max(1e-9)
    );
}
