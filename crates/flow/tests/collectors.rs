//! The exporter against the collectors operators run: nfcapd/nfdump (1.7.1 here) and tshark.
//!
//! Each case starts nfcapd on a free loopback port in a temporary directory, exports a known set
//! of IPv4 and IPv6 records (both directions, several interfaces, 64-bit counters) as NetFlow v9
//! or IPFIX, with and without 1-in-N sampling, to nfcapd and to a socket of ours, stops nfcapd
//! with SIGTERM (which finalises its file) and checks that `nfdump -o json` shows exactly the
//! flows sent. What our socket received is written to a pcap and decoded by tshark, which must
//! show the same values and no malformed packet or expert warning.
//!
//! The tools are required, not optional: without them the test fails saying what to install
//! (CI installs them), rather than passing without having checked anything.

use flow::{Clock, Direction, EndReason, ExportConfig, Exporter, FlowKey, FlowRecord, Version};
use serde_json::Value;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const S: u64 = 1_000_000_000;
/// The router has been up an hour when the records are exported.
const NOW: u64 = 3600 * S;

fn require(tool: &str, arg: &str) {
    match Command::new(tool)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(_) => {}
        Err(e) => panic!(
            "`{tool}` cannot be run ({e}): this test needs nfdump 1.7 (nfcapd, nfdump) and tshark; \
             install them with `apt-get install -y nfdump tshark`"
        ),
    }
}

/// A directory removed when the test ends, however it ends.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let p = std::env::temp_dir().join(format!("flow-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// nfcapd in the foreground, under our control; killed if the test fails before stopping it.
struct Nfcapd {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl Nfcapd {
    fn start(dir: &Path) -> Nfcapd {
        let flows = dir.join("flows");
        std::fs::create_dir_all(&flows).unwrap();
        // A port free a moment ago; nfcapd binding it is checked below.
        let port = UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.join("nfcapd.log")).unwrap();
        let child = Command::new("nfcapd")
            .arg("-w")
            .arg(&flows)
            .args(["-b", "127.0.0.1", "-p", &port.to_string(), "-t", "60"])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start nfcapd");
        let n = Nfcapd {
            child: Some(child),
            port,
            dir: dir.to_path_buf(),
        };
        // Ready when the port is taken.
        let deadline = Instant::now() + Duration::from_secs(10);
        while UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            assert!(
                Instant::now() < deadline,
                "nfcapd did not bind port {port}: {}",
                n.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        n
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("nfcapd.log")).unwrap_or_default()
    }

    /// SIGTERM, wait, and return the finalised file.
    fn stop(&mut self) -> PathBuf {
        let mut child = self.child.take().unwrap();
        let ok = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -TERM nfcapd");
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "nfcapd did not stop: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let files: Vec<PathBuf> = std::fs::read_dir(self.dir.join("flows"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with("nfcapd.") && !name.contains("current")
            })
            .collect();
        assert_eq!(
            files.len(),
            1,
            "nfcapd files: {files:?}; log: {}",
            self.log()
        );
        files[0].clone()
    }
}

impl Drop for Nfcapd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn records() -> Vec<FlowRecord> {
    let v4 = |a: [u8; 4]| u128::from(u32::from(Ipv4Addr::from(a)));
    let v6 = |s: &str| u128::from(s.parse::<Ipv6Addr>().unwrap());
    let key = |src, dst, sp, dp, proto, v6, in_if, direction| FlowKey {
        src,
        dst,
        src_port: sp,
        dst_port: dp,
        proto,
        tos: 0,
        v6,
        in_if,
        direction,
    };
    let rec = |key, out_if, packets, bytes, age_s: u64, dur_ms: u64, tcp_flags, end| FlowRecord {
        key,
        out_if,
        packets,
        bytes,
        first_ns: NOW - age_s * S,
        last_ns: NOW - age_s * S + dur_ms * 1_000_000,
        tcp_flags,
        end,
    };
    use Direction::{Egress, Ingress};
    vec![
        rec(
            key(
                v4([10, 0, 0, 1]),
                v4([192, 0, 2, 80]),
                40000,
                443,
                6,
                false,
                1,
                Ingress,
            ),
            2,
            10,
            4000,
            20,
            1500,
            0x1b,
            EndReason::EndOfFlow,
        ),
        rec(
            key(
                v4([192, 0, 2, 80]),
                v4([10, 0, 0, 1]),
                443,
                40000,
                6,
                false,
                2,
                Egress,
            ),
            1,
            8,
            9000,
            20,
            1400,
            0x1a,
            EndReason::IdleTimeout,
        ),
        rec(
            key(
                v4([10, 0, 0, 2]),
                v4([198, 51, 100, 53]),
                5353,
                53,
                17,
                false,
                3,
                Ingress,
            ),
            4,
            1,
            76,
            5,
            0,
            0,
            EndReason::IdleTimeout,
        ),
        // More than 2^32 packets and bytes: the 64-bit counters must survive.
        rec(
            key(
                v4([10, 9, 9, 9]),
                v4([10, 8, 8, 8]),
                0,
                0,
                47,
                false,
                7,
                Egress,
            ),
            8,
            5_000_000_000,
            6_000_000_000_000,
            60,
            59_000,
            0,
            EndReason::ActiveTimeout,
        ),
        rec(
            key(
                v6("2001:db8::1"),
                v6("2001:db8:1::2"),
                50000,
                80,
                6,
                true,
                1,
                Ingress,
            ),
            4,
            3,
            240,
            10,
            30,
            0x12,
            EndReason::ForcedEnd,
        ),
        rec(
            key(
                v6("2001:db8:1::2"),
                v6("2001:db8::1"),
                80,
                50000,
                6,
                true,
                4,
                Egress,
            ),
            1,
            2,
            2960,
            10,
            25,
            0x18,
            EndReason::Flush,
        ),
        rec(
            key(
                v6("fe80::1"),
                v6("ff02::fb"),
                5353,
                5353,
                17,
                true,
                5,
                Ingress,
            ),
            0,
            1,
            120,
            2,
            0,
            0,
            EndReason::IdleTimeout,
        ),
    ]
}

/// Datagrams received by our own collector socket.
fn drain(sock: &UdpSocket) -> Vec<Vec<u8>> {
    sock.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while let Ok(n) = sock.recv(&mut buf) {
        out.push(buf[..n].to_vec());
    }
    out
}

/// The datagrams as IPv4/UDP packets in a raw-IP pcap, for tshark.
fn write_pcap(path: &Path, datagrams: &[Vec<u8>], sport: u16, dport: u16) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = packet::pcap::Writer::new(f, packet::pcap::LINKTYPE_RAW, 65535).unwrap();
    for (i, d) in datagrams.iter().enumerate() {
        let total = 20 + 8 + d.len();
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&[127, 0, 0, 1]);
        p[16..20].copy_from_slice(&[127, 0, 0, 1]);
        let mut ip = packet::ipv4::Packet::new_unchecked(&mut p[..]);
        ip.fill_checksum();
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p[24..26].copy_from_slice(&((8 + d.len()) as u16).to_be_bytes());
        // UDP checksum 0: none, allowed over IPv4.
        p[28..].copy_from_slice(d);
        w.write(1_700_000_000 * S + i as u64 * 1000, &p).unwrap();
    }
    w.flush().unwrap();
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn export_case(version: Version, sampling: Option<u32>) {
    require("nfcapd", "-V");
    require("nfdump", "-V");
    require("tshark", "-v");
    let tmp = TempDir::new(&format!("{version:?}-{}", sampling.unwrap_or(1)));
    let mut nfcapd = Nfcapd::start(&tmp.0);
    let ours = UdpSocket::bind("127.0.0.1:0").unwrap();
    let collectors: Vec<SocketAddr> = vec![
        ([127, 0, 0, 1], nfcapd.port).into(),
        ours.local_addr().unwrap(),
    ];
    let cfg = ExportConfig {
        domain_id: 7,
        sampling,
        exporter_addr: Some(Ipv4Addr::new(192, 0, 2, 254).into()),
        mtu: 400, // several datagrams for a handful of records
        ..ExportConfig::new(collectors, version)
    };
    let clock = Clock::from_system(NOW);
    let mut e = Exporter::new(cfg, clock).unwrap();
    let recs = records();
    for r in &recs {
        e.push(r, NOW).unwrap();
    }
    e.flush(NOW).unwrap();
    let stats = e.stats();
    assert_eq!((stats.records, stats.send_errors), (recs.len() as u64, 0));
    let datagrams = drain(&ours);
    assert_eq!(datagrams.len() as u64, stats.datagrams);
    let file = nfcapd.stop();

    check_nfdump(&file, &recs, clock, sampling);

    let pcap = tmp.0.join("capture.pcap");
    write_pcap(&pcap, &datagrams, 40000, nfcapd.port);
    check_tshark(&pcap, nfcapd.port, &recs, clock, version, sampling);
}

/// One flow as the values the collectors must agree on: addresses, ports, protocol,
/// interfaces, direction, counters, flags, times in ms (v9 in tshark: uptime; otherwise Unix),
/// and the IPFIX end reason where it is shown. Sorted lists of these are compared.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Seen {
    src: String,
    dst: String,
    ports: (u64, u64),
    proto: u64,
    ifs: (u64, u64),
    dir: u64,
    counts: (u64, u64),
    flags: u8,
    times: (u64, u64),
    end: Option<u64>,
}

fn expected(
    recs: &[FlowRecord],
    scale: u64,
    times: impl Fn(&FlowRecord) -> (u64, u64),
    end: bool,
) -> Vec<Seen> {
    let mut v: Vec<Seen> = recs
        .iter()
        .map(|r| Seen {
            src: r.key.src_ip().to_string().to_string(),
            dst: r.key.dst_ip().to_string().to_string(),
            ports: (r.key.src_port.into(), r.key.dst_port.into()),
            proto: r.key.proto.into(),
            ifs: (r.key.in_if.into(), r.out_if.into()),
            dir: r.key.direction as u64,
            counts: (r.packets * scale, r.bytes * scale),
            flags: r.tcp_flags,
            times: times(r),
            end: end.then(|| u64::from(r.end.ipfix_code())),
        })
        .collect();
    v.sort();
    v
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the usual era-based conversion).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix ms of a UTC date and a "HH:MM:SS.fff..." time.
fn unix_ms(y: i64, m: i64, d: i64, hms: &str) -> u64 {
    let (hms, frac) = hms.split_once('.').unwrap_or((hms, "0"));
    let t: Vec<i64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    let ms: i64 = format!("{frac:0<3}")[..3].parse().unwrap();
    let secs = days_from_civil(y, m, d) * 86_400 + t[0] * 3600 + t[1] * 60 + t[2];
    (secs * 1000 + ms) as u64
}

/// nfdump's "2026-11-21T20:25:56.183" (printed in UTC: TZ is set for it).
fn nfdump_time(s: &str) -> u64 {
    let (date, time) = s.split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    unix_ms(d[0], d[1], d[2], time)
}

/// tshark's "Nov 21, 2026 20:25:56.183000000 UTC".
fn tshark_time(s: &str) -> u64 {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let w: Vec<&str> = s.split_whitespace().collect();
    let m = MONTHS.iter().position(|&x| x == w[0]).unwrap() as i64 + 1;
    unix_ms(
        w[2].parse().unwrap(),
        m,
        w[1].trim_end_matches(',').parse().unwrap(),
        w[3],
    )
}

/// tshark's relative "3580.000000000" (v9 uptime) in ms.
fn tshark_secs(s: &str) -> u64 {
    let (secs, frac) = s.split_once('.').unwrap_or((s, "0"));
    secs.parse::<u64>().unwrap() * 1000 + format!("{frac:0<3}")[..3].parse::<u64>().unwrap()
}

fn num(v: &Value, k: &str) -> u64 {
    match &v[k] {
        Value::Number(n) => n.as_u64().unwrap(),
        Value::String(s) if s.starts_with("0x") => u64::from_str_radix(&s[2..], 16).unwrap(),
        Value::String(s) => s.parse().unwrap_or_else(|_| panic!("{k}: {s}")),
        other => panic!("{k} missing or odd: {other} in {v}"),
    }
}

fn text<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

/// nfdump's `-o json` flags string ("...AP.SF", CWR first) as bits.
fn nfdump_flags(s: &str) -> u8 {
    s.chars().fold(0, |a, c| a << 1 | u8::from(c != '.'))
}

fn check_nfdump(file: &Path, recs: &[FlowRecord], clock: Clock, sampling: Option<u32>) {
    let json = run(Command::new("nfdump")
        .env("TZ", "UTC")
        .arg("-r")
        .arg(file)
        .args(["-o", "json"]));
    let flows: Vec<Value> =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("nfdump json: {e}: {json}"));
    let boot_ms = clock.boot_unix_ns / 1_000_000;
    // nfdump 1.7.1 ignores the exporter's sampling announcement (v9 34/35, IPFIX 304-306 alike:
    // only `nfcapd -s N` makes it scale); a later nfdump that applies it marks the flow sampled
    // and multiplies, which is accepted too.
    let sampled = flows.iter().any(|f| num(f, "sampled") == 1);
    let scale = if sampled {
        u64::from(sampling.expect("sampled without sampling"))
    } else {
        1
    };
    let mut got: Vec<Seen> = flows
        .iter()
        .map(|f| {
            let (s, d) = if f.get("src4_addr").is_some() {
                ("src4_addr", "dst4_addr")
            } else {
                ("src6_addr", "dst6_addr")
            };
            Seen {
                src: text(f, s).to_string(),
                dst: text(f, d).to_string(),
                ports: (num(f, "src_port"), num(f, "dst_port")),
                proto: num(f, "proto"),
                ifs: (num(f, "input_snmp"), num(f, "output_snmp")),
                dir: num(f, "direction"),
                counts: (num(f, "in_packets"), num(f, "in_bytes")),
                flags: nfdump_flags(text(f, "tcp_flags")),
                times: (nfdump_time(text(f, "first")), nfdump_time(text(f, "last"))),
                end: None,
            }
        })
        .collect();
    got.sort();
    let want = expected(
        recs,
        scale,
        |r| {
            (
                boot_ms + r.first_ns / 1_000_000,
                boot_ms + r.last_ns / 1_000_000,
            )
        },
        false,
    );
    assert_eq!(got, want, "nfdump -o json disagrees:\n{json}");

    let exporters = run(Command::new("nfdump").arg("-E").arg(file));
    assert!(
        exporters.contains("Sequence failures: 0")
            && exporters.contains(&format!("flows: {}", recs.len())),
        "nfdump -E: {exporters}"
    );
}

/// Every object under `v` that has key `k`, depth first.
fn objects_with<'a>(v: &'a Value, k: &str, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(m) => {
            if m.contains_key(k) {
                out.push(v);
            }
            for x in m.values() {
                objects_with(x, k, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| objects_with(x, k, out)),
        _ => {}
    }
}

fn check_tshark(
    pcap: &Path,
    port: u16,
    recs: &[FlowRecord],
    clock: Clock,
    version: Version,
    sampling: Option<u32>,
) {
    let decode = format!("udp.port=={port},cflow");
    let tshark = || {
        let mut c = Command::new("tshark");
        c.env("TZ", "UTC").arg("-r").arg(pcap).args(["-d", &decode]);
        c
    };
    // Anything tshark finds odd (malformed packets, expert notes or warnings) is a failure.
    let odd = run(tshark().args([
        "-Y",
        "_ws.malformed || _ws.expert",
        "-T",
        "fields",
        "-e",
        "frame.number",
        "-e",
        "_ws.expert.message",
    ]));
    assert!(odd.trim().is_empty(), "tshark complains: {odd}");

    let json = run(tshark().args(["-T", "json"]));
    let doc: Value = serde_json::from_str(&json).unwrap();
    let ipfix = version == Version::Ipfix;
    let mut flows = Vec::new();
    objects_with(&doc, "cflow.srcport", &mut flows);
    let mut got: Vec<Seen> = flows
        .iter()
        .map(|f| {
            let (s, d) = if f.get("cflow.srcaddr").is_some() {
                ("cflow.srcaddr", "cflow.dstaddr")
            } else {
                ("cflow.srcaddrv6", "cflow.dstaddrv6")
            };
            let t = &f["cflow.timedelta_tree"];
            let times = if ipfix {
                (
                    tshark_time(text(t, "cflow.abstimestart")),
                    tshark_time(text(t, "cflow.abstimeend")),
                )
            } else {
                (
                    tshark_secs(text(t, "cflow.timestart")),
                    tshark_secs(text(t, "cflow.timeend")),
                )
            };
            Seen {
                src: text(f, s).to_string(),
                dst: text(f, d).to_string(),
                ports: (num(f, "cflow.srcport"), num(f, "cflow.dstport")),
                proto: num(f, "cflow.protocol"),
                ifs: (num(f, "cflow.inputint"), num(f, "cflow.outputint")),
                dir: num(f, "cflow.direction"),
                counts: (num(f, "cflow.packets"), num(f, "cflow.octets")),
                flags: num(f, "cflow.tcpflags") as u8,
                times,
                end: ipfix.then(|| num(f, "cflow.flow_end_reason")),
            }
        })
        .collect();
    got.sort();
    let boot_ms = clock.boot_unix_ns / 1_000_000;
    let want = if ipfix {
        expected(
            recs,
            1,
            |r| {
                (
                    boot_ms + r.first_ns / 1_000_000,
                    boot_ms + r.last_ns / 1_000_000,
                )
            },
            true,
        )
    } else {
        expected(
            recs,
            1,
            |r| (r.first_ns / 1_000_000, r.last_ns / 1_000_000),
            false,
        )
    };
    assert_eq!(got, want, "tshark disagrees");

    // The options record: exporter address always (configured here), sampling when on.
    let mut opts = Vec::new();
    objects_with(&doc, "cflow.exporter_addr", &mut opts);
    assert!(!opts.is_empty(), "no options record decoded");
    for o in opts {
        assert_eq!(text(o, "cflow.exporter_addr"), "192.0.2.254");
        match (sampling, ipfix) {
            (Some(n), false) => {
                assert_eq!(num(o, "cflow.sampling_interval"), u64::from(n));
                assert_eq!(num(o, "cflow.sampling_algorithm"), 1);
            }
            (Some(n), true) => {
                assert_eq!(num(o, "cflow.selector_algorithm"), 1);
                assert_eq!(num(o, "cflow.sampling_packet_interval"), 1);
                assert_eq!(num(o, "cflow.sampling_packet_space"), u64::from(n) - 1);
            }
            (None, _) => assert!(
                o.get("cflow.sampling_interval").is_none()
                    && o.get("cflow.selector_algorithm").is_none()
            ),
        }
    }
}

#[test]
fn v9_to_nfdump_and_tshark() {
    export_case(Version::V9, None);
}

#[test]
fn ipfix_to_nfdump_and_tshark() {
    export_case(Version::Ipfix, None);
}

#[test]
fn v9_sampled_to_nfdump_and_tshark() {
    export_case(Version::V9, Some(100));
}

#[test]
fn ipfix_sampled_to_nfdump_and_tshark() {
    export_case(Version::Ipfix, Some(100));
}
