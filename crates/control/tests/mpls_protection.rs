//! LSP protection (the mechanism under ME-5): pseudowires over a configured LSP with a backup
//! move to the backup together when the primary's link goes down, and back when it returns,
//! with nothing of theirs rebuilt (one path object changes); the syslog and `show l2vpn` say
//! which way the LSP takes. And the config's refusals.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use dataplane::mpls::Entry;

const CONFIG: &str = r#"
router: { workers: 1 }
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
  - { name: p2, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01" }
  - { name: p0.101, port: p0, vlan: 101, mac: "02:00:00:00:00:01" }
  - { name: p0.102, port: p0, vlan: 102, mac: "02:00:00:00:00:01" }
  - { name: p0.103, port: p0, vlan: 103, mac: "02:00:00:00:00:01" }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [198.51.100.1/24] }
  - { name: p2, port: p2, mac: "02:00:00:00:02:01", ipv4: [203.0.113.1/24] }
neighbors:
  - { interface: p1, ip: 198.51.100.2, mac: "02:00:00:00:01:02" }
  - { interface: p2, ip: 203.0.113.2, mac: "02:00:00:00:02:02" }
mpls:
  interfaces: [p1, p2]
  lsps:
    - { name: to-pe, primary: { via: 198.51.100.2, labels: [300] },
        backup: { via: 203.0.113.2, labels: [400, 301] } }
  pseudowires:
    - { name: pw101, interface: p0.101, peer: 10.255.0.2, vc-id: 101, local-label: 1001,
        remote-label: 2001, lsp: to-pe, control-word: true }
    - { name: pw102, interface: p0.102, peer: 10.255.0.2, vc-id: 102, local-label: 1002,
        remote-label: 2002, lsp: to-pe, control-word: true }
    - { name: pw103, interface: p0.103, peer: 10.255.0.2, vc-id: 103, local-label: 1003,
        remote-label: 2003, lsp: to-pe, control-word: true }
"#;

/// A CE's frame on VLAN `vlan`.
fn ce_frame(vlan: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0xaa, 1, 2, 0, 0, 0, 0xbb, 2, 0x81, 0];
    f.extend_from_slice(&vlan.to_be_bytes());
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&common::ip4_frame([10, 1, 1, 1], 64, 26, false, 17, 7)[14..]);
    f
}

/// The labels of a frame out of the core side, outermost first, and its next-hop MAC.
fn stack(f: &[u8]) -> (Vec<u32>, [u8; 6]) {
    assert_eq!(&f[12..14], &[0x88, 0x47]);
    let mut at = 14;
    let mut labels = Vec::new();
    loop {
        let e = Entry::parse(&f[at..]);
        labels.push(e.label);
        at += 4;
        if e.bottom {
            break;
        }
    }
    assert_eq!(&f[at..at + 4], &[0; 4], "control word");
    (labels, f[..6].try_into().unwrap())
}

/// Sends the three CEs' frames into p0 and returns what p1 and p2 sent, sorted.
fn round(
    core: &control::mgmt::Core,
    peers: &mut [control::MemPeer],
    cache: &mut dataplane::BufCache,
) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    let before = core
        .lock("t")
        .runtime
        .snapshot()
        .tx_packets
        .iter()
        .sum::<u64>();
    let mut v: Vec<_> = [101, 102, 103]
        .iter()
        .map(|&vl| {
            let mut b = cache.alloc().unwrap();
            assert!(b.fill(&ce_frame(vl)));
            b
        })
        .collect();
    while !v.is_empty() {
        peers[0].to_router[0].push_burst(&mut v);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got: [Vec<Vec<u32>>; 2] = Default::default();
    while got[0].len() + got[1].len() < 3 {
        assert!(Instant::now() < deadline, "{got:?}");
        for (k, p) in [1usize, 2].into_iter().enumerate() {
            let mut bufs = Vec::new();
            peers[p].from_router.pop_burst(&mut bufs, usize::MAX);
            for b in bufs {
                let (labels, mac) = stack(b.data());
                assert_eq!(mac, [2, 0, 0, 0, p as u8, 2], "to port {p}'s neighbour");
                got[k].push(labels);
                cache.free(b);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let after = core
        .lock("t")
        .runtime
        .snapshot()
        .tx_packets
        .iter()
        .sum::<u64>();
    assert_eq!(after - before, 3, "nothing else sent");
    let [mut a, mut b] = got;
    a.sort();
    b.sort();
    (a, b)
}

fn logged(core: &control::mgmt::Core, msgid: &str) -> bool {
    core.logging(100).iter().any(|r| r.msgid == msgid)
}

#[test]
fn pseudowires_on_an_lsp_move_to_its_backup_together_and_back() {
    let dir = std::env::temp_dir().join(format!("linerate-lsp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (core, mut peers) = common::core_with(&dir, CONFIG);
    let pool = core.lock("t").runtime.pool.clone();
    let mut cache = dataplane::BufCache::new(pool);
    let pws_before = core.lock("t").router.mpls.clone().unwrap();

    // The primary: the path's label over each pseudowire's, out of p1.
    let (p1, p2) = round(&core, &mut peers, &mut cache);
    assert_eq!(p1, vec![vec![300, 2001], vec![300, 2002], vec![300, 2003]]);
    assert!(p2.is_empty());
    let l2 = core.l2vpn_view();
    assert!(l2.pseudowires.iter().all(|p| p.lsp == "to-pe"
        && p.lsp_path == "primary"
        && p.next_hop == "198.51.100.2 on p1"
        && p.transport == "300"
        && p.state == "up"));

    // p1's link goes down: every pseudowire takes the backup's labels out of p2.
    core.port_link("p1", false).unwrap();
    let (p1, p2) = round(&core, &mut peers, &mut cache);
    assert!(p1.is_empty());
    assert_eq!(
        p2,
        vec![
            vec![400, 301, 2001],
            vec![400, 301, 2002],
            vec![400, 301, 2003]
        ]
    );
    assert!(logged(&core, "LSP_SWITCHOVER"));
    let l2 = core.l2vpn_view();
    assert!(
        l2.pseudowires.iter().all(|p| p.lsp_path == "backup"
            && p.next_hop == "203.0.113.2 on p2"
            && p.transport == "400/301"
            && p.state == "up"),
        "{l2:?}"
    );
    // One object changed: the pseudowires themselves were not rebuilt.
    let pws_after = core.lock("t").router.mpls.clone().unwrap();
    assert!(std::sync::Arc::ptr_eq(&pws_before, &pws_after));

    // Both links down: the LSP is down, and so are its pseudowires (and say why).
    core.port_link("p2", false).unwrap();
    assert!(logged(&core, "LSP_DOWN"));
    let l2 = core.l2vpn_view();
    assert!(
        l2.pseudowires
            .iter()
            .all(|p| p.state == "down" && p.reason == "LSP down" && p.lsp_path == "down"),
        "{l2:?}"
    );

    // Back: the primary again.
    core.port_link("p2", true).unwrap();
    core.port_link("p1", true).unwrap();
    let (p1, p2) = round(&core, &mut peers, &mut cache);
    assert_eq!(p1.len(), 3);
    assert!(p2.is_empty());
    assert!(logged(&core, "LSP_RESTORED"));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn errors(text: &str) -> String {
    control::config::parse(text, Path::new("r.yaml"))
        .expect_err("refused")
        .0
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn bad_lsps_are_refused_with_positions() {
    // A pseudowire with both an LSP and a next hop; an unknown LSP.
    let both = CONFIG.replace(
        "remote-label: 2001, lsp: to-pe,",
        "remote-label: 2001, lsp: to-pe, via: 198.51.100.2,",
    );
    let e = errors(&both);
    assert!(
        e.contains("r.yaml:23:") && e.contains("leave out `via` and `transport`"),
        "{e}"
    );
    let unknown = CONFIG.replace(
        "remote-label: 2002, lsp: to-pe",
        "remote-label: 2002, lsp: nope",
    );
    let e = errors(&unknown);
    assert!(
        e.contains("mpls.pseudowires[1].lsp: no LSP named `nope`"),
        "{e}"
    );
    // A backup through the primary's interface protects nothing.
    let same = CONFIG.replace(
        "via: 203.0.113.2, labels: [400, 301]",
        "via: 198.51.100.3, labels: [400]",
    );
    let e = errors(&same);
    assert!(
        e.contains("the backup leaves by `p1` as the primary does"),
        "{e}"
    );
    // Too many labels for a pseudowire's own to fit; a name twice.
    let deep = CONFIG.replace("labels: [400, 301]", "labels: [400, 301, 302, 303]");
    let e = errors(&deep);
    assert!(
        e.contains("mpls.lsps[0].backup.labels: at most 3 labels"),
        "{e}"
    );
    let twice = CONFIG.replace(
        "  pseudowires:\n",
        "    - { name: to-pe, primary: { via: 198.51.100.2 } }\n  pseudowires:\n",
    );
    let e = errors(&twice);
    assert!(e.contains("LSP `to-pe` is named twice"), "{e}");
}
