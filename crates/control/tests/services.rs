//! The services on the packet path, black-box: ACLs in and out (with hits, the implicit deny and
//! logging), QoS marking and policing, uRPF, and flow accounting, on a router built from YAML.

mod common;

use std::sync::atomic::Ordering;

use common::*;
use dataplane::DropReason;

const BASE: &str = r#"
router: { workers: 1 }
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24], ipv6: ["2001:db8:1::1/64"] P0 }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [198.51.100.1/24], ipv6: ["2001:db8:2::1/64"] P1 }
neighbors:
  - { interface: p0, ip: 192.0.2.2, mac: "02:00:00:00:00:02" }
  - { interface: p1, ip: 198.51.100.2, mac: "02:00:00:00:01:02" }
  - { interface: p1, ip: "2001:db8:2::2", mac: "02:00:00:00:01:02" }
routes:
  - { prefix: 10.0.0.0/8, via: 198.51.100.2 }
  - { prefix: "2001:db8:ff::/48", via: "2001:db8:2::2" }
"#;

/// A bed whose interfaces p0 and p1 bind `p0` and `p1`, with `extra` sections.
fn bed(p0: &str, p1: &str, extra: &str) -> Bed {
    let text = BASE
        .replace(" P0 }", &format!("{p0} }}"))
        .replace(" P1 }", &format!("{p1} }}"))
        + extra;
    Bed::from_text(&text)
}

/// UDP from 192.0.2.2 (p0's neighbour) with this source port, to `dst`.
fn udp(dst: [u8; 4], sport: u16) -> Vec<u8> {
    ip4_frame(dst, 64, 64, false, 17, sport)
}

fn drops(b: &Bed, why: DropReason) -> u64 {
    b.snapshot().drop_count(why)
}

fn acl_hits(b: &Bed, name: &str) -> Vec<u64> {
    let (_, c) = &b.router.services.acls[name];
    (0..c.hits.len()).map(|i| c.get(i)).collect()
}

const ACLS: &str = r#"
acls:
  - name: V4
    entries:
      - "10 deny udp src host 192.0.2.2 sport 1024 log"
      - "20 deny udp dst 10.9.0.0/16"
      - "30 permit udp"
  - name: V6
    family: ipv6
    entries: ["permit src 2001:db8:1::/64"]
"#;

#[test]
fn ingress_acl_denies_counts_every_entry_and_logs_the_flow() {
    let mut b = bed(", acl-in: [V4, V6]", "", ACLS);
    let mut frames = Vec::new();
    for i in 0..30 {
        frames.push(udp([10, 1, 0, 1], 1024 + (i % 3) as u16)); // 10 denied by 10
    }
    frames.push(udp([10, 9, 0, 1], 2000)); // denied by 20
    frames.push(ip4_frame([10, 1, 0, 1], 64, 64, false, 6, 3000)); // TCP: implicit deny
    let out = b.send(0, &frames);
    assert_eq!(out[1].len(), 20);
    assert_eq!(drops(&b, DropReason::AclDenied), 12);
    assert_eq!(acl_hits(&b, "V4"), vec![10, 1, 20, 1]);
    // IPv6 is judged by the IPv6 list only: the IPv4 list's implicit deny does not touch it.
    let out = b.send(0, &[ip6_frame(v6("2001:db8:ff::9"), 64, 16)]);
    assert_eq!(out[1].len(), 1);
    assert_eq!(acl_hits(&b, "V6"), vec![1, 0]);
    // The logged flow: its first packet at once, as one event (the counts follow per interval).
    let sink = b.router.services.acl_log.clone().expect("a list logs");
    std::thread::sleep(std::time::Duration::from_millis(50));
    let q = sink.queue.lock().unwrap();
    assert_eq!(q.len(), 1, "{q:?}");
    assert!(q[0].first && q[0].seq == 10 && !q[0].permit && q[0].sport == 1024);
    let text = control::services::acl_log_text(&q[0], "p0");
    assert_eq!(
        text,
        "access-list V4 (10) deny udp 192.0.2.2(1024) -> 10.1.0.1(5000) on p0 in, 1 packet"
    );
}

#[test]
fn egress_acl_judges_what_leaves() {
    let mut b = bed("", ", acl-out: V4", ACLS);
    let out = b.send(0, &[udp([10, 1, 0, 1], 1024), udp([10, 1, 0, 1], 1025)]);
    assert_eq!(out[1].len(), 1);
    assert_eq!(drops(&b, DropReason::AclDenied), 1);
    // What leaves is the rewritten frame: p1's MAC as source, TTL one less.
    assert_eq!(&out[1][0][6..12], &[2, 0, 0, 0, 1, 1]);
    assert_eq!(out[1][0][14 + 8], 63);
}

const QOS: &str = r#"
qos:
  classes:
    - { name: bulk, match: ["udp sport 1024"] }
    - { name: web, match: ["tcp dport 80"] }
  policies:
    - name: edge
      classes:
        - { class: bulk, set: { dscp: 10 }, police: { cir: 8k, cbs: 200, pir: 16k, pbs: 400, conform: transmit, exceed: set-dscp 12, violate: drop } }
        - { class: class-default, set: { dscp: 46 } }
"#;

#[test]
fn qos_marks_every_class_and_polices_one() {
    let mut b = bed(", qos-in: edge", "", QOS);
    // 20 frames of 84-byte IP packets at once: CBS 200 B lets 2 conform, PBS 400 B 4 in all.
    let mut frames: Vec<Vec<u8>> = (0..20).map(|_| udp([10, 1, 0, 1], 1024)).collect();
    frames.push(udp([10, 1, 0, 1], 1025));
    let out = b.send(0, &frames);
    let dscps: Vec<u8> = out[1].iter().map(|f| f[15] >> 2).collect();
    assert_eq!(
        dscps,
        vec![10, 10, 12, 12, 46],
        "conform, exceed (re-marked), default class"
    );
    for f in &out[1] {
        assert!(header_ok(&f[14..]), "checksum after re-marking");
    }
    assert_eq!(drops(&b, DropReason::PolicerDropped), 16);
    let f = b.router.services.features[0].clone().unwrap();
    let q = f.qos(dataplane::feature::Direction::Input).unwrap();
    assert_eq!(q.classes[0].packets.load(Ordering::Relaxed), 20);
    assert_eq!(q.classes[1].packets.load(Ordering::Relaxed), 1);
    let st = q.classes[0].policer.as_ref().unwrap().stats();
    assert_eq!(
        (
            st.conformed.packets,
            st.exceeded.packets,
            st.violated.packets
        ),
        (2, 2, 16)
    );
}

#[test]
fn urpf_strict_and_loose() {
    // 10.0.0.0/8 is reached through p1, so a source in it arriving on p0 is spoofed (strict);
    // loose mode only wants a route; 172.16.0.0/12 has none.
    let frame = |src: [u8; 4]| {
        let mut f = udp([10, 1, 0, 1], 1);
        f[26..30].copy_from_slice(&src);
        f[24..26].copy_from_slice(&[0, 0]);
        let c = packet::checksum::fold(packet::checksum::sum(&f[14..34]));
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f
    };
    let mut b = bed(", urpf: strict", "", "");
    let out = b.send(
        0,
        &[
            frame([192, 0, 2, 2]),
            frame([10, 7, 0, 1]),
            frame([172, 16, 0, 1]),
        ],
    );
    assert_eq!(out[1].len(), 1);
    assert_eq!(drops(&b, DropReason::UrpfFailed), 2);
    drop(b);
    let mut b = bed(", urpf: loose", "", "");
    let out = b.send(
        0,
        &[
            frame([192, 0, 2, 2]),
            frame([10, 7, 0, 1]),
            frame([172, 16, 0, 1]),
        ],
    );
    assert_eq!(out[1].len(), 2);
    assert_eq!(drops(&b, DropReason::UrpfFailed), 1);
}

#[test]
fn flows_are_accounted_in_and_out_with_packets_and_bytes() {
    let extra = r#"
flow-export: { version: 9, collectors: ["127.0.0.1:9"], cache-size: 4096, inactive-timeout: 60 }
"#;
    let mut b = bed(", flow: in", ", flow: out", extra);
    let mut frames = Vec::new();
    for i in 0..12u16 {
        frames.push(udp([10, 1, 0, 1], 1000 + i % 3)); // three flows of four packets
    }
    let out = b.send(0, &frames);
    assert_eq!(out[1].len(), 12);
    let shared = b.router.services.flow.clone().unwrap();
    // Stopping the workers flushes their caches into the export queue.
    b.running.take().unwrap().stop();
    let q = shared.queue.lock().unwrap();
    assert_eq!(q.len(), 6, "three flows, each in and out: {q:?}");
    // The counters `show flows` reads say so too, once the workers have stopped.
    let st = shared.stats.lock().unwrap();
    let flushed: u64 = st.iter().map(|s| s.flushed).sum();
    let occupancy: u64 = st.iter().map(|s| s.occupancy).sum();
    assert_eq!((flushed, occupancy), (6, 0), "{st:?}");
    for r in q.iter() {
        assert_eq!(r.packets, 4);
        assert_eq!(r.bytes, 4 * 84);
        assert_eq!(r.key.dst as u32, 0x0a01_0001);
        assert_eq!(r.out_if, 1, "the output interface, in both directions");
    }
    let ingress = q
        .iter()
        .filter(|r| r.key.direction == flow::Direction::Ingress)
        .count();
    assert_eq!(ingress, 3);
}

#[test]
fn egress_remarking_keeps_each_family_in_a_mixed_vector() {
    let qos = r#"
qos:
  policies:
    - { name: all, classes: [{ class: class-default, set: { dscp: 10 } }] }
"#;
    let mut b = bed("", ", qos-out: all", qos);
    // One burst, both families, all leaving by p1: one run of the output stage.
    let frames = vec![
        udp([10, 1, 0, 1], 1024),
        ip6_frame(v6("2001:db8:ff::9"), 64, 16),
        udp([10, 1, 0, 2], 1024),
    ];
    let out = b.send(0, &frames);
    assert_eq!(out[1].len(), 3);
    for f in &out[1] {
        match u16::from_be_bytes([f[12], f[13]]) {
            0x0800 => {
                assert_eq!(f[15] >> 2, 10);
                assert!(header_ok(&f[14..]), "IPv4 checksum after re-marking");
            }
            0x86dd => {
                assert_eq!(f[14] >> 4, 6, "still IPv6");
                let tc = ((f[14] & 0x0f) << 4) | (f[15] >> 4);
                assert_eq!(tc >> 2, 10);
            }
            e => panic!("EtherType {e:#x}"),
        }
    }
}
