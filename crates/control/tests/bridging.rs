//! Bridging through the whole router on mem ports, with two workers: each polls its own queue
//! of every port, and the frames that learn go in on one worker's queue while the frames to the
//! learned addresses go in on the other's, so an address one learns must be known to the other
//! at once.

mod common;

use common::Bed;
use dataplane::l2::BridgeCounters;

const CONFIG: &str = r#"
router: { workers: 2 }
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
  - { name: p2, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01" }
  - { name: p1, port: p1, mac: "02:00:00:00:00:02" }
  - { name: p2.100, port: p2, vlan: 100, mac: "02:00:00:00:00:03" }
bridges:
  - { name: office, id: 10, members: [p0, p1, p2.100] }
"#;

fn frame(dst: [u8; 6], src: [u8; 6], vlan: Option<u16>) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    if let Some(v) = vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&v.to_be_bytes());
    }
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&[0x45; 46]);
    f
}

fn host(i: u32) -> [u8; 6] {
    let b = i.to_be_bytes();
    [2, 0x10, b[0], b[1], b[2], b[3]]
}

fn counter(bed: &Bed, which: fn(&BridgeCounters) -> &std::sync::atomic::AtomicU64) -> u64 {
    BridgeCounters::get(which(&bed.router.bridges.bridges[0].counters))
}

#[test]
fn two_workers_share_what_either_learns_and_nothing_learned_is_flooded() {
    let mut bed = Bed::from_text(CONFIG);
    let workers = bed.running.as_ref().unwrap().workers();
    let on = |p: u16, q: u16| {
        workers
            .iter()
            .find(|w| w.rx.contains(&(p, q)))
            .map(|w| w.id)
    };
    assert_ne!(on(0, 0), on(1, 1), "two workers: {workers:?}");

    // 1,000 hosts speak from port 0 (broadcast: flooded to p1 and, tagged, to p2.100).
    let hosts: Vec<Vec<u8>> = (0..1000).map(|i| frame([0xff; 6], host(i), None)).collect();
    let out = bed.send_on(0, 0, &hosts);
    assert_eq!((out[0].len(), out[1].len(), out[2].len()), (0, 1000, 1000));
    assert_eq!(&out[2][0][12..16], &[0x81, 0x00, 0x00, 100]);
    assert_eq!(counter(&bed, |c| &c.flooded), 1000);
    let macs = bed.router.bridges.table.clone().unwrap();
    assert_eq!(macs.bridge_len(10), 1000);

    // Frames to every one of them from the other worker's port: each to port 0 alone.
    let to_hosts: Vec<Vec<u8>> = (0..1000)
        .map(|i| frame(host(i), [2, 0x20, 0, 0, 0, 1], None))
        .collect();
    let out = bed.send_on(1, 1, &to_hosts);
    assert_eq!((out[0].len(), out[1].len(), out[2].len()), (1000, 0, 0));
    assert_eq!(out[0][7], to_hosts[7]);
    assert_eq!(
        counter(&bed, |c| &c.flooded),
        1000,
        "not one flooded after learning"
    );
    assert_eq!(counter(&bed, |c| &c.forwarded), 1000);

    // From the tagged member to a host: the tag comes off on the way to port 0.
    let out = bed.send(2, &[frame(host(5), [2, 0x30, 0, 0, 0, 1], Some(100))]);
    assert_eq!(out[0], vec![frame(host(5), [2, 0x30, 0, 0, 0, 1], None)]);
    assert_eq!(counter(&bed, |c| &c.learned), 1002);
}

/// A one-worker router whose bridge has `settings` added (a learn limit), with its core, the
/// test's ends of its ports and a buffer cache; the caller removes `dir`.
fn limited(
    tag: &str,
    settings: &str,
) -> (
    std::path::PathBuf,
    std::sync::Arc<control::mgmt::Core>,
    Vec<control::runtime::MemPeer>,
    dataplane::BufCache,
) {
    let dir = std::env::temp_dir().join(format!("linerate-l2-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = CONFIG
        .replace("router: { workers: 2 }", "router: { workers: 1 }")
        .replace(
            "members: [p0, p1, p2.100] }",
            &format!("members: [p0, p1, p2.100], {settings} }}"),
        );
    let (core, peers) = common::core_with(&dir, &text);
    let pool = core.lock("test").runtime.pool.clone();
    (dir, core, peers, dataplane::BufCache::new(pool))
}

/// Pushes `frames` into the router through `peer`'s first queue.
fn push(peer: &mut control::runtime::MemPeer, cache: &mut dataplane::BufCache, frames: &[Vec<u8>]) {
    let mut v: Vec<_> = frames
        .iter()
        .map(|f| {
            let mut b = cache.alloc().unwrap();
            assert!(b.fill(f));
            b
        })
        .collect();
    while !v.is_empty() {
        peer.to_router[0].push_burst(&mut v);
    }
}

/// The syslog records with `msgid`, once there is one (the bridge thread logs within a
/// second), or none after 5 s.
fn logged(core: &control::mgmt::Core, msgid: &str) -> Vec<api::views::LogView> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let r: Vec<_> = core
            .logging(100)
            .into_iter()
            .filter(|l| l.msgid == msgid)
            .collect();
        if !r.is_empty() || std::time::Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A bridge at its learn limit floods what it cannot learn, counts it, and says so in syslog:
/// one record for the burst, not one per frame.
#[test]
fn a_learn_limit_floods_the_rest_and_logs_it_once() {
    let (dir, core, mut peers, mut cache) = limited("limit", "mac-limit: 10");
    let hosts: Vec<Vec<u8>> = (0..100).map(|i| frame([0xff; 6], host(i), None)).collect();
    push(&mut peers[0], &mut cache, &hosts);
    let records = logged(&core, "MAC_LIMIT");
    assert_eq!(records.len(), 1, "one record for the burst");
    assert!(
        records[0].text.contains("bridge office"),
        "{:?}",
        records[0]
    );
    let b = &core.bridges()[0];
    assert_eq!((b.macs, b.not_learned_limit), (10, 90));
    core.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `mac-limit-action: shutdown`: the member whose new address went beyond the limit is shut
/// (its frames dropped, logged), the others go on; clearing its addresses opens it again.
#[test]
fn a_learn_limit_with_shutdown_shuts_the_member_that_went_beyond_it() {
    let (dir, core, mut peers, mut cache) =
        limited("shut", "mac-limit: 10, mac-limit-action: shutdown");
    let mut send = |port: usize, frames: Vec<Vec<u8>>| push(&mut peers[port], &mut cache, &frames);
    // p1's host first (learned, within the limit), then 20 hosts on p0: the 10th-and-later
    // refused, and p0 is shut for it.
    send(1, vec![frame([0xff; 6], host(1000), None)]);
    std::thread::sleep(std::time::Duration::from_millis(100));
    send(
        0,
        (0..20).map(|i| frame([0xff; 6], host(i), None)).collect(),
    );
    let member = |core: &control::mgmt::Core, name: &str| {
        core.bridges()[0]
            .members
            .iter()
            .find(|m| m.interface == name)
            .cloned()
            .unwrap()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !member(&core, "p0").shut && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let p0 = member(&core, "p0");
    assert!(p0.shut && p0.blocked, "{p0:?}");
    assert!(!member(&core, "p1").shut);
    let logs = core.logging(100);
    let rec = logs
        .iter()
        .find(|l| l.msgid == "MAC_LIMIT_SHUTDOWN")
        .expect("logged");
    assert!(rec.text.contains("p0 shut"), "{rec:?}");
    let text = api::views::Render::render(&core.bridges());
    assert!(text.contains("shut (mac limit)"), "{text}");
    // Shut: p0's frames are dropped as blocked, not switched.
    let before = core.bridges()[0].flooded;
    send(0, vec![frame([0xff; 6], host(500), None)]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(core.bridges()[0].flooded, before);
    // Clearing p0's addresses opens it again.
    core.mac_clear(&api::requests::MacQuery {
        interface: Some("p0".into()),
        ..Default::default()
    })
    .unwrap();
    assert!(!member(&core, "p0").shut && !member(&core, "p0").blocked);
    assert!(core
        .logging(100)
        .iter()
        .any(|l| l.msgid == "MAC_LIMIT_RECOVERED"));
    core.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Flexlink: p1 primary, p2 its backup. The backup blocks while p1 is up; when p1's link goes,
/// every address learned on p1 leads to p2 in one step (nothing flooded), it is logged, and
/// without preemption p2 stays active when p1 returns.
#[test]
fn a_flexlink_backup_takes_over_every_address_at_once() {
    let dir = std::env::temp_dir().join(format!("linerate-l2-flex-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = CONFIG
        .replace("router: { workers: 2 }", "router: { workers: 1 }")
        .replace("name: p2.100, port: p2, vlan: 100,", "name: p2, port: p2,")
        .replace(
            "members: [p0, p1, p2.100] }",
            "members: [p0, { interface: p1, backup: p2 }] }",
        );
    let (core, mut peers) = common::core_with(&dir, &text);
    let pool = core.lock("test").runtime.pool.clone();
    let mut cache = dataplane::BufCache::new(pool);
    let mut send = |port: usize, frames: Vec<Vec<u8>>| -> Vec<usize> {
        let mut v: Vec<_> = frames
            .iter()
            .map(|f| {
                let mut b = cache.alloc().unwrap();
                assert!(b.fill(f));
                b
            })
            .collect();
        while !v.is_empty() {
            peers[port].to_router[0].push_burst(&mut v);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        peers
            .iter_mut()
            .map(|p| {
                let mut got = Vec::new();
                p.from_router.pop_burst(&mut got, usize::MAX);
                let n = got.len();
                cache.free_all(&mut got);
                n
            })
            .collect()
    };
    let upstream: Vec<Vec<u8>> = (0..500).map(|i| frame([0xff; 6], host(i), None)).collect();
    let to_upstream: Vec<Vec<u8>> = (0..500)
        .map(|i| frame(host(i), [2, 0x20, 0, 0, 0, 1], None))
        .collect();
    // 500 hosts behind the primary; the broadcasts reach p0 only (p2 blocks).
    assert_eq!(send(1, upstream.clone()), vec![500, 0, 0]);
    assert_eq!(send(0, to_upstream.clone()), vec![0, 500, 0]);
    // What arrives on the standby is dropped, not learned or flooded.
    assert_eq!(
        send(2, vec![frame([0xff; 6], [2, 0x30, 0, 0, 0, 1], None)]),
        vec![0, 0, 0]
    );
    let flooded = core.bridges()[0].flooded;
    let roles: Vec<_> = core.bridges()[0]
        .members
        .iter()
        .map(|m| (m.interface.clone(), m.flexlink.clone(), m.blocked))
        .collect();
    assert_eq!(
        roles[2],
        ("p2".into(), Some("backup (standby)".into()), true)
    );

    // The primary's link goes: all 500 addresses lead to p2 at once, none flooded.
    core.link_changed("p1", false);
    assert_eq!(send(0, to_upstream.clone()), vec![0, 0, 500]);
    assert_eq!(core.bridges()[0].flooded, flooded);
    let macs = core.mac_table(&Default::default()).unwrap();
    assert!(macs.entries.iter().filter(|e| e.interface == "p2").count() >= 500);
    // Its link returns: no preemption configured, p2 stays active.
    core.link_changed("p1", true);
    assert_eq!(send(0, to_upstream), vec![0, 0, 500]);
    let logged = logged(&core, "FLEXLINK_SWITCHOVER");
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(
        logged[0].text.contains("p1 -> p2 (p1 down)"),
        "{:?}",
        logged[0]
    );
    assert!(core
        .metrics()
        .contains("linerate_flexlink_switchovers_total{bridge=\"office\",primary=\"p1\"} 1"));
    core.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// An 802.1ad provider edge: customer frames from a dot1q-tunnel port cross the provider's
/// port with an S-tag (0x88a8) pushed, customer tags inside untouched; a second customer's
/// VLAN 20 arrives as S-tag 10 + C-tag 20 on the same port and leaves untagged.
#[test]
fn q_in_q_members_push_and_pop_service_tags() {
    let config = r#"
router: { workers: 1 }
ports:
  - { name: cust, driver: mem }
  - { name: nni, driver: mem }
  - { name: edge, driver: mem }
interfaces:
  - { name: cust, port: cust, mac: "02:00:00:00:00:01" }
  - { name: nni.s11, port: nni, s-vlan: 11, mac: "02:00:00:00:00:02" }
  - { name: nni.s10.c20, port: nni, s-vlan: 10, vlan: 20, mac: "02:00:00:00:00:02" }
  - { name: edge, port: edge, mac: "02:00:00:00:00:03" }
bridges:
  - { name: customer-a, id: 11, members: [{ interface: cust, mode: dot1q-tunnel }, nni.s11] }
  - { name: customer-b, id: 20, members: [nni.s10.c20, edge] }
"#;
    let mut bed = Bed::from_text(config);
    // Customer A's frame with its own VLAN 99: across the provider port as S11 + C99.
    let a = frame([0xff; 6], host(1), Some(99));
    let out = bed.send_on(0, 0, std::slice::from_ref(&a));
    assert_eq!((out[1].len(), out[2].len()), (1, 0));
    let mut want = a[..12].to_vec();
    want.extend_from_slice(&[0x88, 0xa8, 0x00, 11]);
    want.extend_from_slice(&a[12..]);
    assert_eq!(
        out[1][0], want,
        "S-tag 11 pushed, the customer's tag inside kept"
    );
    // And back: the S-tag popped, the customer's own tag delivered as it was.
    let back: Vec<u8> = {
        let f = frame(host(1), host(2), Some(99));
        let mut g = f[..12].to_vec();
        g.extend_from_slice(&[0x88, 0xa8, 0x00, 11]);
        g.extend_from_slice(&f[12..]);
        g
    };
    let out = bed.send_on(1, 0, &[back]);
    assert_eq!(out[0], vec![frame(host(1), host(2), Some(99))]);
    // Customer B: S10/C20 in, untagged out of edge, and the reverse.
    let mut b = frame([0xff; 6], host(3), Some(20));
    b.splice(12..12, [0x88, 0xa8, 0x00, 10]);
    let out = bed.send_on(1, 0, &[b]);
    assert_eq!((out[0].len(), out[2].len()), (0, 1));
    assert_eq!(out[2][0], frame([0xff; 6], host(3), None));
    let out = bed.send_on(2, 0, &[frame(host(3), host(4), None)]);
    let mut want = frame(host(3), host(4), Some(20));
    want.splice(12..12, [0x88, 0xa8, 0x00, 10]);
    assert_eq!(out[1], vec![want]);
}
