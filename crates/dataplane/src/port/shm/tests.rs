//! Shared-memory ports: both ends in one process, a peer that writes garbage, a client that
//! restarts, a ring against a reference queue, and two processes.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use proptest::prelude::*;

use super::*;
use crate::buffer::Pool;

fn path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("lr-shm-{}-{name}", std::process::id()))
}

fn small(queues: u32) -> Layout {
    Layout {
        queues,
        slots: 16,
        slot_bytes: 256,
    }
}

fn frames(cache: &mut BufCache, from: u32, n: u32, len: usize) -> Vec<PktBuf> {
    (from..from + n)
        .map(|i| {
            let mut b = cache.alloc().unwrap();
            let mut f = vec![(i % 251) as u8; len.max(4)];
            f[..4].copy_from_slice(&i.to_be_bytes());
            b.fill(&f);
            b
        })
        .collect()
}

fn seqs(v: &[PktBuf]) -> Vec<u32> {
    v.iter()
        .map(|b| u32::from_be_bytes(b.data()[..4].try_into().unwrap()))
        .collect()
}

#[test]
fn frames_cross_both_ways_in_order_and_a_full_ring_takes_what_fits() {
    let p = path("both");
    let server = ShmPort::serve(&p, small(2)).unwrap();
    let client = ShmPort::connect(&p).unwrap();
    let mut cache = BufCache::new(Pool::new(1024));
    let (mut stx, mut srx) = (server.tx_queue(1), server.rx_queue(1));
    let (mut ctx, mut crx) = (client.tx_queue(1), client.rx_queue(1));
    let mut v = frames(&mut cache, 0, 20, 60);
    assert_eq!(stx.tx_burst(&mut v, &mut cache), 16, "16 slots");
    assert_eq!(v.len(), 4, "the rest stays with the caller");
    let mut got = Vec::new();
    assert_eq!(crx.rx_burst(&mut cache, &mut got, 10), 10);
    assert_eq!(stx.tx_burst(&mut v, &mut cache), 4);
    crx.rx_burst(&mut cache, &mut got, 256);
    assert_eq!(seqs(&got), (0..20).collect::<Vec<_>>());
    assert!(got
        .iter()
        .all(|b| b.len() == 60 && b.data()[59] == b.data()[5]));
    // The other way, on the same queue; queue 0 saw nothing.
    let mut back = frames(&mut cache, 100, 3, 256);
    assert_eq!(ctx.tx_burst(&mut back, &mut cache), 3);
    let mut none = Vec::new();
    assert_eq!(server.rx_queue(0).rx_burst(&mut cache, &mut none, 256), 0);
    let mut got = Vec::new();
    assert_eq!(srx.rx_burst(&mut cache, &mut got, 256), 3);
    assert_eq!(seqs(&got), [100, 101, 102]);
    // Longer than a slot: taken, dropped, counted.
    let mut big = frames(&mut cache, 7, 1, 257);
    assert_eq!(ctx.tx_burst(&mut big, &mut cache), 1);
    assert_eq!(client.oversize.load(Ordering::Relaxed), 1);
    assert_eq!(srx.rx_burst(&mut cache, &mut got, 256), 0);
}

#[test]
fn what_a_broken_peer_writes_is_counted_and_skipped() {
    let p = path("garbage");
    let server = ShmPort::serve(&p, small(1)).unwrap();
    let client = ShmPort::connect(&p).unwrap();
    let mut cache = BufCache::new(Pool::new(1024));
    let mut rx = client.rx_queue(0);
    let r = &server.region;
    // A length past the slot, between two good frames.
    assert!(r.write_slot(0, 0, b"good0"));
    r.write_slot(0, 1, b"x");
    r.u32_at_for_test(0, 1, 9999);
    assert!(r.write_slot(0, 2, b"good2"));
    r.head(0).store(3, Ordering::Release);
    let mut got = Vec::new();
    assert_eq!(rx.rx_burst(&mut cache, &mut got, 256), 2);
    assert_eq!(
        (got[0].data(), got[1].data()),
        (&b"good0"[..], &b"good2"[..])
    );
    assert_eq!(rx.take_rx_errors(), 1);
    // A head that cannot be (more than a ring ahead): one error, nothing read, resynchronised.
    r.head(0).store(1000, Ordering::Release);
    assert_eq!(rx.rx_burst(&mut cache, &mut got, 256), 0);
    assert_eq!(rx.take_rx_errors(), 1);
    assert_eq!(r.tail(0).load(Ordering::Acquire), 1000);
    // A consumer index past the producer's: the sender takes nothing rather than overwrite.
    let mut tx = server.tx_queue(0);
    r.tail(0).store(5000, Ordering::Release);
    let mut v = frames(&mut cache, 0, 2, 60);
    assert_eq!(tx.tx_burst(&mut v, &mut cache), 0);
    assert_eq!(v.len(), 2);
}

#[test]
fn a_client_that_restarts_resumes_where_it_stopped() {
    let p = path("restart");
    let server = ShmPort::serve(&p, small(1)).unwrap();
    let mut cache = BufCache::new(Pool::new(1024));
    let mut tx = server.tx_queue(0);
    let mut got = Vec::new();
    {
        let old = ShmPort::connect(&p).unwrap();
        let mut rx = old.rx_queue(0);
        let mut v = frames(&mut cache, 0, 10, 64);
        tx.tx_burst(&mut v, &mut cache);
        rx.rx_burst(&mut cache, &mut got, 6);
    }
    // Sent while no client is there: they wait in the ring.
    let mut v = frames(&mut cache, 10, 5, 64);
    assert_eq!(tx.tx_burst(&mut v, &mut cache), 5);
    let new = ShmPort::connect(&p).unwrap();
    new.rx_queue(0).rx_burst(&mut cache, &mut got, 256);
    assert_eq!(
        seqs(&got),
        (0..15).collect::<Vec<_>>(),
        "none lost, none twice"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Any interleaving of bursts of any sizes delivers exactly what a FIFO would.
    #[test]
    fn a_ring_is_a_fifo(ops in proptest::collection::vec((any::<bool>(), 0usize..40), 1..60)) {
        let p = path(&format!("fifo-{}", ops.len()));
        let server = ShmPort::serve(&p, small(1)).unwrap();
        let client = ShmPort::connect(&p).unwrap();
        let mut cache = BufCache::new(Pool::new(4096));
        let (mut tx, mut rx) = (server.tx_queue(0), client.rx_queue(0));
        let mut model = VecDeque::new();
        let mut next = 0u32;
        for (send, n) in ops {
            if send {
                let mut v = frames(&mut cache, next, n as u32, 20 + n);
                let took = tx.tx_burst(&mut v, &mut cache);
                prop_assert_eq!(took, n.min(16 - model.len()));
                model.extend(next..next + took as u32);
                next += n as u32;
                cache.free_all(&mut v);
            } else {
                let mut got = Vec::new();
                rx.rx_burst(&mut cache, &mut got, n);
                let want: Vec<u32> = model.drain(..n.min(model.len())).collect();
                prop_assert_eq!(seqs(&got), want);
                cache.free_all(&mut got);
            }
        }
    }
}

/// The far end of `two_processes_exchange_frames_through_the_file`: run by that test in a child
/// process (this test binary, asked for this test alone); it echoes what it receives.
#[test]
#[ignore = "run by two_processes_exchange_frames_through_the_file in a child process"]
fn child_echo() {
    let Ok(p) = std::env::var("LINERATE_SHM_CHILD") else {
        return;
    };
    let port = ShmPort::connect(std::path::Path::new(&p)).unwrap();
    let mut cache = BufCache::new(Pool::new(4096));
    let (mut tx, mut rx) = (port.tx_queue(0), port.rx_queue(0));
    let mut echoed = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut v = Vec::new();
    while echoed < 100_000 && std::time::Instant::now() < deadline {
        rx.rx_burst(&mut cache, &mut v, 256);
        while !v.is_empty() {
            echoed += tx.tx_burst(&mut v, &mut cache);
        }
    }
}

#[test]
fn two_processes_exchange_frames_through_the_file() {
    let p = path("procs");
    let server = ShmPort::serve(
        &p,
        Layout {
            queues: 1,
            slots: 512,
            slot_bytes: 2048,
        },
    )
    .unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "port::shm::tests::child_echo",
            "--ignored",
            "--quiet",
        ])
        .env("LINERATE_SHM_CHILD", &p)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut cache = BufCache::new(Pool::new(4096));
    let (mut tx, mut rx) = (server.tx_queue(0), server.rx_queue(0));
    let mut sent = 0u32;
    let mut got = Vec::new();
    let mut seen = 0u32;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while seen < 100_000 && std::time::Instant::now() < deadline {
        if sent < 100_000 {
            let n = 64.min(100_000 - sent);
            let mut v: Vec<PktBuf> = (sent..sent + n)
                .flat_map(|i| frames(&mut cache, i, 1, 60 + (i % 1400) as usize))
                .collect();
            sent += tx.tx_burst(&mut v, &mut cache) as u32;
            cache.free_all(&mut v);
            // Frames not taken are made again with the same numbers next time round.
        }
        rx.rx_burst(&mut cache, &mut got, 256);
        for b in got.drain(..) {
            let s = u32::from_be_bytes(b.data()[..4].try_into().unwrap());
            assert_eq!(s, seen, "in order, none lost");
            assert_eq!(b.len(), 60 + (s % 1400) as usize);
            seen += 1;
            cache.free(b);
        }
    }
    assert!(child.wait().unwrap().success());
    assert_eq!(seen, 100_000);
}

#[test]
fn a_new_server_process_adopts_the_file_and_goes_on_where_the_old_one_stopped() {
    let p = path("adopt");
    let old = ShmPort::serve(&p, small(1)).unwrap();
    let client = ShmPort::connect(&p).unwrap();
    let mut cache = BufCache::new(Pool::new(1024));
    let (mut ctx, mut crx) = (client.tx_queue(0), client.rx_queue(0));
    let (mut otx, mut orx) = (old.tx_queue(0), old.rx_queue(0));
    // The old server has read 5 of 12 and sent 3.
    let mut v = frames(&mut cache, 0, 12, 60);
    assert_eq!(ctx.tx_burst(&mut v, &mut cache), 12);
    let mut got = Vec::new();
    orx.rx_burst(&mut cache, &mut got, 5);
    let mut out = frames(&mut cache, 100, 3, 60);
    otx.tx_burst(&mut out, &mut cache);
    // The new process maps the file and makes its queues while the old one still runs...
    let new = ShmPort::adopt(&p).unwrap();
    let (mut ntx, mut nrx) = (new.tx_queue(0), new.rx_queue(0));
    // ...which reads 2 more and sends 2 more before it lets go.
    orx.rx_burst(&mut cache, &mut got, 2);
    let mut out = frames(&mut cache, 103, 2, 60);
    otx.tx_burst(&mut out, &mut cache);
    let at = orx.hand_over().unwrap();
    old.disown();
    drop((otx, orx, old));
    assert!(p.exists(), "a disowned file stays");
    nrx.take_over(at);
    let mut v = frames(&mut cache, 12, 4, 60);
    ctx.tx_burst(&mut v, &mut cache);
    nrx.rx_burst(&mut cache, &mut got, 256);
    assert_eq!(seqs(&got), (0..16).collect::<Vec<_>>(), "each frame once");
    let mut out = frames(&mut cache, 105, 2, 60);
    ntx.tx_burst(&mut out, &mut cache);
    let mut back = Vec::new();
    crx.rx_burst(&mut cache, &mut back, 256);
    assert_eq!(
        seqs(&back),
        (100..107).collect::<Vec<_>>(),
        "none overwritten"
    );
    for b in got.into_iter().chain(back) {
        cache.free(b);
    }
    drop((ntx, nrx, new));
    assert!(!p.exists(), "the adopter owns the file");
}
