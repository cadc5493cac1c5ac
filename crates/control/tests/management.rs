//! The management core against a running router: changes made under a continuous stream of
//! frames (workers added and removed with their queues moving, a port out of service and back,
//! config commits and rollbacks, API routes) lose no frame that was not meant to be lost, and
//! the config lifecycle changes everything or nothing.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use api::views::RouteOrigin;
use api::ErrorKind;
use control::mgmt::{ApplyOptions, Core};
use dataplane::BufCache;
use packet::checksum;

const CONFIG: &str = r#"
router: { workers: 1, buffers: 32768 }
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
  - { name: p2, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24] }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [198.51.100.1/24] }
  - { name: p2, port: p2, mac: "02:00:00:00:02:01", ipv4: [198.18.0.1/24] }
neighbors:
  - { interface: p0, ip: 192.0.2.2, mac: "02:00:00:00:00:02" }
  - { interface: p1, ip: 198.51.100.2, mac: "02:00:00:00:01:02" }
  - { interface: p2, ip: 198.18.0.2, mac: "02:00:00:00:02:02" }
routes:
  - { prefix: 10.0.0.0/8, via: 198.51.100.2 }
"#;

struct Bed {
    core: Arc<Core>,
    peers: Vec<control::MemPeer>,
    dir: PathBuf,
}

fn bed_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("linerate-mgmt-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn bed(name: &str) -> Bed {
    bed_with(name, CONFIG)
}

fn bed_with(name: &str, text: &str) -> Bed {
    let dir = bed_dir(name);
    let (core, peers) = common::core_with(&dir, text);
    Bed { core, peers, dir }
}

impl Drop for Bed {
    fn drop(&mut self) {
        self.core.shutdown();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A UDP frame from p0's neighbour to 10.x carrying `seq`.
fn frame(seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let h = &mut f[14..34];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&50u16.to_be_bytes());
    h[8] = 64;
    h[9] = 17;
    h[12..16].copy_from_slice(&[192, 0, 2, 2]);
    h[16..20].copy_from_slice(&[10, 1, (seq >> 8) as u8, seq as u8]);
    let c = checksum::fold(checksum::sum(h));
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f[42..46].copy_from_slice(&seq.to_be_bytes());
    f
}

/// Sends `n` numbered frames through `b`'s router (p0 -> p1) while `changes` runs; returns how
/// many distinct frames arrived and how many arrived twice.
fn under_traffic(b: &mut Bed, n: u32, changes: impl FnOnce(&Arc<Core>)) -> (u64, u64) {
    let core = b.core.clone();
    let mut peers = std::mem::take(&mut b.peers);
    let pool = core.lock("test").runtime.pool.clone();
    let mut tx_peer = peers.remove(0);
    let mut rx_peer = peers.remove(0);
    let done = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU64::new(0));
    let sender = {
        let pool = pool.clone();
        std::thread::spawn(move || {
            let mut cache = BufCache::new(pool);
            let mut v = Vec::new();
            let mut seq = 0;
            while seq < n {
                while v.len() < 64 && seq < n {
                    let Some(mut b) = cache.alloc() else { break };
                    b.fill(&frame(seq));
                    v.push(b);
                    seq += 1;
                }
                // Paced well below the worker's rate: this is about the changes, not speed.
                tx_peer.to_router[0].push_burst(&mut v);
                std::thread::sleep(Duration::from_micros(100));
            }
            while !v.is_empty() {
                tx_peer.to_router[0].push_burst(&mut v);
            }
            tx_peer
        })
    };
    let receiver = {
        let (done, received) = (done.clone(), received.clone());
        std::thread::spawn(move || {
            let mut cache = BufCache::new(pool);
            let mut seen = vec![false; n as usize];
            let mut out = Vec::new();
            let mut dup = 0u64;
            while !done.load(Ordering::Relaxed) {
                out.clear();
                if rx_peer.from_router.pop_burst(&mut out, 256) == 0 {
                    std::thread::yield_now();
                    continue;
                }
                for b in out.drain(..) {
                    let d = b.data();
                    let s = u32::from_be_bytes(d[42..46].try_into().unwrap()) as usize;
                    assert_eq!(d[22], 63, "TTL decremented");
                    if std::mem::replace(&mut seen[s], true) {
                        dup += 1;
                    }
                    received.fetch_add(1, Ordering::Relaxed);
                    cache.free(b);
                }
            }
            (seen.iter().filter(|&&x| x).count() as u64, dup)
        })
    };
    changes(&core);
    let _tx_peer = sender.join().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while received.load(Ordering::Relaxed) < n as u64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    done.store(true, Ordering::Relaxed);
    receiver.join().unwrap()
}

/// `under_traffic`'s answer when nothing was meant to be lost.
fn assert_every_frame_once(core: &Core, n: u32, (distinct, dup): (u64, u64)) {
    let errs = core.errors();
    assert_eq!(
        (distinct, dup),
        (n as u64, 0),
        "every frame arrived once; router drops: {:?}",
        errs.iter()
            .map(|e| (&e.reason, e.count))
            .collect::<Vec<_>>()
    );
}

#[test]
fn changes_under_traffic_lose_no_frame() {
    const N: u32 = 400_000;
    let mut b = bed("traffic");
    let core = b.core.clone();
    let (distinct, dup) = under_traffic(&mut b, N, |core| {
        // The changes, spaced out over the stream.
        let pause = || std::thread::sleep(Duration::from_millis(40));
        pause();
        let w = core.worker_add(None).unwrap();
        pause();
        core.worker_remove(0).unwrap();
        pause();
        core.port_remove("p2").unwrap();
        pause();
        core.port_insert("p2").unwrap();
        pause();
        let path = std::env::temp_dir().join("unused.yaml");
        let changed = CONFIG.replace(
            "routes:\n",
            "routes:\n  - { prefix: 172.16.0.0/12, via: 198.18.0.2 }\n",
        );
        let out = core
            .apply(&changed, &path, ApplyOptions::default())
            .unwrap();
        assert!(out.changed && out.commit == Some(2));
        pause();
        core.route_add(
            &serde_json::from_value(
                serde_json::json!({"prefix": "203.0.113.0/24", "blackhole": true}),
            )
            .unwrap(),
        )
        .unwrap();
        core.rollback(1).unwrap();
        pause();
        core.worker_add(None).unwrap();
        pause();
        core.worker_remove(w).unwrap();
    });
    assert_every_frame_once(&core, N, (distinct, dup));
    let ids: Vec<String> = core.logging(100).into_iter().map(|r| r.msgid).collect();
    for want in [
        "WORKER_ADDED",
        "WORKER_REMOVED",
        "PORT_REMOVED",
        "PORT_INSERTED",
        "CONFIG_COMMIT",
        "CONFIG_ROLLBACK",
    ] {
        assert!(ids.iter().any(|m| m == want), "{want} logged: {ids:?}");
    }
}

#[test]
fn acl_lists_replaced_under_traffic_lose_no_frame() {
    // Two different 10,000-entry lists that the traffic matches only at their final permit,
    // swapped by commits, and single entries set and removed, all under traffic.
    const N: u32 = 200_000;
    let dir = bed_dir("acl");
    for (file, base) in [("a.acl", 1000u32), ("b.acl", 40000)] {
        let mut text = String::new();
        for i in 0..10_000u32 {
            text.push_str(&format!(
                "deny udp src host 100.{}.{}.{} dport {}\n",
                i >> 8 & 0xff,
                i & 0xff,
                1 + i % 200,
                base + i
            ));
        }
        text.push_str("permit\n");
        std::fs::write(dir.join(file), text).unwrap();
    }
    let with = |file: &str| {
        CONFIG.replace(
            "ipv4: [192.0.2.1/24] }",
            "ipv4: [192.0.2.1/24], acl-in: L }",
        ) + &format!("acls:\n  - {{ name: L, file: {file} }}\n")
    };
    let mut b = bed_with("acl", &with("a.acl"));
    let path = dir.join("r.yaml");
    let core = b.core.clone();
    let (distinct, dup) = under_traffic(&mut b, N, |core| {
        for file in ["b.acl", "a.acl", "b.acl", "a.acl"] {
            std::thread::sleep(Duration::from_millis(30));
            let out = core
                .apply(&with(file), &path, ApplyOptions::default())
                .unwrap();
            assert!(out.changed);
        }
        core.acl_entry_add("L", "5 deny udp dport 7").unwrap();
        std::thread::sleep(Duration::from_millis(30));
        core.acl_entry_remove("L", 5).unwrap();
    });
    assert_every_frame_once(&core, N, (distinct, dup));
    let acl = &core.acls(Some("L")).unwrap()[0];
    assert_eq!(acl.entries.len(), 10_001);
    assert!(acl.entries[10_000].hits > 0, "the final permit counts");
}

#[test]
fn a_bad_config_changes_nothing_and_rollback_restores_exactly() {
    let b = bed("commit");
    let core = &b.core;
    let path = b.dir.join("new.yaml");
    let before = core.running_config().0;
    let total = || {
        core.routes(&api::requests::RoutesQuery {
            prefix: None,
            limit: None,
            ..Default::default()
        })
        .unwrap()
        .total
    };
    let routes_before = total();
    // An error in a reference: the file, line and field are named and nothing changes.
    let bad = CONFIG.replace("via: 198.51.100.2 }", "via: 203.0.113.9 }");
    let e = core
        .apply(&bad, &path, ApplyOptions::default())
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    let all = format!("{e}");
    assert!(all.contains("new.yaml:"), "{all}");
    assert!(all.contains("routes[0]"), "{all}");
    assert_eq!(core.running_config().0, before);
    assert_eq!(core.history().len(), 1);
    // A dry run reports the change and makes none.
    let good = CONFIG.replace("  - { prefix: 10.0.0.0/8, via: 198.51.100.2 }\n", "  - { prefix: 10.0.0.0/8, via: 198.18.0.2 }\n  - { prefix: 172.16.0.0/12, blackhole: true }\n");
    let d = core
        .apply(
            &good,
            &path,
            ApplyOptions {
                dry_run: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(d.changed && d.commit.is_none());
    assert!(
        d.summary
            .iter()
            .any(|l| l == "+ route 172.16.0.0/12 vrf default"),
        "{:?}",
        d.summary
    );
    assert!(
        d.summary
            .iter()
            .any(|l| l == "~ route 10.0.0.0/8 vrf default"),
        "{:?}",
        d.summary
    );
    assert!(
        d.diff
            .contains("+  - { prefix: 172.16.0.0/12, blackhole: true }"),
        "{}",
        d.diff
    );
    assert_eq!(core.running_config().0, before);
    // Applied, then rolled back: the text and the table are as before.
    core.apply(&good, &path, ApplyOptions::default()).unwrap();
    let q = |p: &str| {
        core.routes(&api::requests::RoutesQuery {
            prefix: Some(p.to_string()),
            limit: Some(10),
            ..Default::default()
        })
        .unwrap()
    };
    assert_eq!(
        q("10.0.0.0/8").routes[0].via,
        vec!["198.18.0.2 on p2".to_string()]
    );
    core.rollback(1).unwrap();
    assert_eq!(core.running_config().0, before);
    assert_eq!(
        q("10.0.0.0/8").routes[0].via,
        vec!["198.51.100.2 on p1".to_string()]
    );
    assert!(q("172.16.0.0/12").routes.is_empty());
    let after = total();
    assert_eq!(after, routes_before);
    let h = core.history();
    assert_eq!(h.iter().map(|c| c.id).collect::<Vec<_>>(), vec![1, 2, 3]);
    // Applying the running config again is no change and no commit.
    let same = core.apply(&before, &path, ApplyOptions::default()).unwrap();
    assert!(!same.changed && same.commit.is_none());
}

#[test]
fn api_routes_survive_commits_and_yield_to_configured_ones() {
    let b = bed("routes");
    let core = &b.core;
    let add = |j: serde_json::Value| core.route_add(&serde_json::from_value(j).unwrap());
    add(serde_json::json!({"prefix": "172.20.0.0/16", "via": ["198.18.0.2"]})).unwrap();
    let e = add(serde_json::json!({"prefix": "10.0.0.0/8", "blackhole": true})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    let e =
        add(serde_json::json!({"prefix": "172.21.0.0/16", "via": ["203.0.113.9"]})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    let changed = CONFIG.replace(
        "routes:\n",
        "routes:\n  - { prefix: 172.30.0.0/16, blackhole: true }\n",
    );
    core.apply(&changed, &b.dir.join("x.yaml"), ApplyOptions::default())
        .unwrap();
    let r = core
        .routes(&api::requests::RoutesQuery {
            prefix: Some("172.20.1.1".to_string()),
            limit: Some(10),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.routes.len(), 1);
    assert_eq!(r.routes[0].origin, RouteOrigin::Api);
    assert_eq!(r.routes[0].prefix, "172.20.0.0/16");
    core.route_del(None, "172.20.0.0/16").unwrap();
    assert_eq!(
        core.route_del(None, "172.20.0.0/16").unwrap_err().kind,
        ErrorKind::NotFound
    );
}

/// With TAP twins, the control-plane section is fixed at start: a commit that changes it is
/// refused with the reason and changes nothing. The interfaces are not: a commit re-addresses,
/// adds and removes them (their twins follow; the system tests watch the twins themselves).
#[test]
fn commits_change_the_interfaces_but_not_the_control_plane_section() {
    let with_taps = format!("{CONFIG}control-plane: {{ taps: true }}\n");
    let b = bed_with("twins", &with_taps);
    let core = &b.core;
    let path = b.dir.join("new.yaml");
    let before = core.running_config().0;
    let e = core
        .apply(
            &with_taps.replace(
                "control-plane: { taps: true }",
                "control-plane: { taps: false }",
            ),
            &path,
            ApplyOptions::default(),
        )
        .unwrap_err();
    let all = format!("{e}");
    assert_eq!(e.kind, ErrorKind::Invalid, "{all}");
    assert!(
        all.contains("new.yaml") && all.contains("control-plane"),
        "{all}"
    );
    assert!(all.contains("restart"), "{all}");
    assert_eq!(core.running_config().0, before);
    assert_eq!(core.history().len(), 1);
    let added = with_taps.replace(
        "neighbors:",
        "  - { name: p3, port: p2, vlan: 7, mac: \"02:00:00:00:03:01\", ipv4: [203.0.113.1/24] }\nneighbors:",
    );
    for (text, what) in [
        (
            with_taps.replace("198.18.0.1/24", "198.18.0.3/24"),
            "re-addressed",
        ),
        (added, "a VLAN sub-interface added"),
        (with_taps.clone(), "and removed again"),
    ] {
        let out = core
            .apply(&text, &path, ApplyOptions::default())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(out.changed && out.commit.is_some(), "{what}");
        assert_eq!(core.running_config().0, text, "{what}");
    }
    let names: Vec<String> = core.interfaces().into_iter().map(|i| i.name).collect();
    assert_eq!(names, ["p0", "p1", "p2"]);
}
