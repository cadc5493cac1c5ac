//! The mirror of the kernel's multicast routes: a thread in the TAP twins' namespace that dumps
//! the IPv4 and IPv6 multicast forwarding caches at start, then follows their changes
//! (`RTNLGRP_IPV4_MROUTE`, `RTNLGRP_IPV6_MROUTE`), and writes them into the [`Store`] (and so the
//! live multicast FIB). A lost notification (the socket's buffer overran) is answered with a
//! full dump, as the link monitor does.
//!
//! Devices are named through `/sys/class/net` (the kernel's routes name them by index; the
//! router knows its twins by name), cached, and looked up again when an index is unknown.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dataplane::port::netlink::NlSocket;

use super::mfc::{self, MfcEntry, MfcMsg};
use super::{KernelKey, KernelRoute, SharedStore};

/// `RTMGRP_IPV4_MROUTE` and `RTMGRP_IPV6_MROUTE`: the legacy group bits of
/// `RTNLGRP_IPV4_MROUTE` (6) and `RTNLGRP_IPV6_MROUTE` (10).
const GROUPS: u32 = 1 << (6 - 1) | 1 << (10 - 1);

/// The kernel's main multicast table (`RT_TABLE_DEFAULT`), pimd's outside VRFs.
const RT_TABLE_DEFAULT: u32 = 253;

/// The notification socket's receive buffer: about 40,000 route notifications.
const RECV_BUFFER: usize = 8 << 20;

pub struct Mirror {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Mirror {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Device names by index, read from `/sys/class/net`.
#[derive(Default)]
struct Names(HashMap<u32, String>);

impl Names {
    fn get(&mut self, ifindex: u32) -> String {
        if let Some(n) = self.0.get(&ifindex) {
            return n.clone();
        }
        self.0.clear();
        if let Ok(dir) = std::fs::read_dir("/sys/class/net") {
            for d in dir.flatten() {
                let name = d.file_name().to_string_lossy().into_owned();
                let idx = std::fs::read_to_string(d.path().join("ifindex"))
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
                if let Some(i) = idx {
                    self.0.insert(i, name);
                }
            }
        }
        // An index with no device (gone already): a name no interface has.
        self.0
            .get(&ifindex)
            .cloned()
            .unwrap_or_else(|| format!("#{ifindex}"))
    }
}

fn route(e: &MfcEntry, names: &mut Names) -> (KernelKey, KernelRoute) {
    let k = KernelKey {
        v6: e.v6,
        source: e.source,
        group: e.group,
    };
    let r = KernelRoute {
        iif: if e.iif == 0 {
            String::new()
        } else {
            names.get(e.iif)
        },
        oifs: e.oifs.iter().map(|&(i, ttl)| (names.get(i), ttl)).collect(),
    };
    (k, r)
}

/// Dumps both caches; the routes of the default table.
fn dump(
    sock: &NlSocket,
    names: &mut Names,
    malformed: &mut u64,
) -> io::Result<BTreeMap<KernelKey, KernelRoute>> {
    let mut all = BTreeMap::new();
    let mut buf = vec![0u8; 256 * 1024];
    for (seq, v6) in [(1u32, false), (2, true)] {
        sock.send(&mfc::dump_request(v6, seq))?;
        'family: loop {
            let n = sock.recv(&mut buf, true)?;
            for m in mfc::decode(&buf[..n]) {
                match m {
                    MfcMsg::Entry(e) if e.add && e.table == RT_TABLE_DEFAULT => {
                        let (k, r) = route(&e, names);
                        all.insert(k, r);
                    }
                    MfcMsg::Malformed => *malformed += 1,
                    MfcMsg::Done => break 'family,
                    // No IPv6 multicast routing in this kernel: nothing to dump.
                    MfcMsg::Error(e) if e != 0 => break 'family,
                    _ => {}
                }
            }
        }
    }
    Ok(all)
}

impl Mirror {
    /// Starts mirroring into `store`, in the calling thread's network namespace.
    pub fn start(store: SharedStore) -> Result<Mirror, String> {
        let events = NlSocket::open(GROUPS)
            .map_err(|e| format!("multicast route mirror: netlink socket: {e}"))?;
        // pimd makes a route per (S,G) as sources start: a burst of thousands of
        // notifications. Room for them makes a lost notification (and a dump) rare.
        events.set_recv_buffer(RECV_BUFFER);
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("mroute-mirror".into())
            .spawn(move || run(events, store, &s2))
            .map_err(|e| format!("multicast route mirror: {e}"))?;
        Ok(Mirror {
            stop,
            thread: Some(thread),
        })
    }
}

fn resync(store: &SharedStore, names: &mut Names) {
    let mut malformed = 0;
    let got = NlSocket::open(0).and_then(|s| dump(&s, names, &mut malformed));
    let mut st = store.lock().unwrap_or_else(|e| e.into_inner());
    st.counters.malformed += malformed;
    match got {
        Ok(all) => st.kernel_replace(all),
        Err(e) => eprintln!("linerate: multicast route mirror: dump failed: {e}"),
    }
}

/// Reads and drops whatever the socket holds now.
fn drain(events: &NlSocket, buf: &mut [u8]) {
    loop {
        match events.recv(buf, false) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
            Err(_) => return,
        }
    }
}

fn run(events: NlSocket, store: SharedStore, stop: &AtomicBool) {
    let mut names = Names::default();
    store
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .counters
        .running = true;
    // Subscribed before the dump: a change during it is applied after, never lost.
    resync(&store, &mut names);
    let mut buf = vec![0u8; 256 * 1024];
    while !stop.load(Ordering::Relaxed) {
        if !events.wait_readable(Instant::now() + Duration::from_millis(200)) {
            continue;
        }
        match events.recv(&mut buf, false) {
            Ok(n) => {
                let msgs = mfc::decode(&buf[..n]);
                let mut st = store.lock().unwrap_or_else(|e| e.into_inner());
                for m in msgs {
                    match m {
                        MfcMsg::Entry(e) if e.table == RT_TABLE_DEFAULT => {
                            let (k, r) = route(&e, &mut names);
                            if e.add {
                                st.kernel_set(k, r);
                            } else {
                                st.kernel_delete(k);
                            }
                        }
                        MfcMsg::Malformed => st.counters.malformed += 1,
                        _ => {}
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                // Notifications were lost. What is still queued is older than what was lost:
                // applied after the dump, it would take routes back to older states that no
                // later notification corrects. So drop it all, then dump; every change from
                // here on arrives as a notification, after the dump, in order.
                drain(&events, &mut buf);
                resync(&store, &mut names);
            }
            Err(e) => {
                eprintln!("linerate: multicast route mirror: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    store
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .counters
        .running = false;
}
