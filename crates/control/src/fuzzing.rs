//! Entry points for the cargo-fuzz targets in `fuzz/`, kept in the crate so that the unit tests
//! below run exactly the same code on stable Rust. Not part of the API.
//!
//! The config, the route files and the kernel's answers are input the router must refuse
//! cleanly when they are wrong: a panic here is a bug.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::config::{self, Config, Prefix};
use crate::router::Router;

/// Route-table sizes for the fuzzed routers: big enough for any input libFuzzer makes, small
/// enough that building a router costs microseconds, not the default tables' megabytes.
const MAX_ROUTES: usize = 4096;

/// Where a fuzzed config claims to live: a folder that does not exist, so no route file it
/// names relative to itself is found.
fn config_path() -> &'static Path {
    Path::new("/nonexistent/linerate-fuzz/router.yaml")
}

/// `data` as a config file through what `linerate check` does: the YAML parser, the checker,
/// then the router built from what passed (route files left out: they are the `routes`
/// target's input, and an absolute path could name a device or a huge file).
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match config::parse(text, config_path()) {
        Ok(mut cfg) => {
            cfg.route_files.clear();
            shrink(&mut cfg);
            if let Ok(r) = Router::build(cfg) {
                let _ = r.route_counts();
            }
        }
        Err(errs) => {
            assert!(!errs.0.is_empty(), "a refused config says why");
            let _ = errs.to_string();
        }
    }
}

fn shrink(cfg: &mut Config) {
    cfg.max_v4_routes = cfg.max_v4_routes.min(MAX_ROUTES);
    cfg.max_v6_routes = cfg.max_v6_routes.min(MAX_ROUTES);
    cfg.max_gtp_contexts = cfg.max_gtp_contexts.min(MAX_ROUTES);
    if let Some(g) = &mut cfg.ggsn {
        // A fuzzed config must not write files where it likes.
        g.restart_counter = None;
        for a in &mut g.apns {
            // Nor allocate 2^24-entry pools per APN.
            a.v4_pool = a.v4_pool.map(|(p, l)| (p, l.max(20)));
            a.v6_pool = a.v6_pool.map(|(p, l)| (p, l.max(52)));
        }
    }
}

/// The GGSN the `gtpc` target talks to: one APN with both pools, room for 64 contexts.
const GGSN_CONFIG: &str = r#"
control-plane: { taps: true }
ports: [{ name: p0, driver: mem }]
interfaces: [{ name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24] }]
ggsn:
  address: 192.0.2.1
  apns:
    - { name: internet, ipv4-pool: 10.64.0.0/26, ipv6-pool: "2001:db8:100::/58", dns: [192.0.2.53] }
"#;

/// GTP-C and GTP-U signalling into the GGSN's engine, its path management ticking between
/// messages: `data` is messages, each a byte of flags (bit 0: from the GTP-U port; bits 1-2:
/// which of four SGSN addresses; bits 3-7: the clock's step in seconds) and a 2-byte length
/// before it. Whatever arrives, nothing panics, and
/// after every message the contexts, the pools and the data plane's table agree: each context
/// is found by its TEID and its addresses, and the pools hold exactly the contexts' addresses.
pub fn gtpc(data: &[u8]) {
    use crate::gtp::engine::Engine;
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    use std::sync::Arc;
    let cfg = config::parse(GGSN_CONFIG, config_path()).expect("the fuzz GGSN's config is valid");
    let g = cfg.ggsn.expect("it has a GGSN");
    let pools: Vec<_> = g.apns.iter().map(|a| a.pools()).collect();
    let table = Arc::new(dataplane::gtp::GtpTable::new(64, &pools, 1));
    let mut e = Engine::new(&g, table.clone(), 1);
    let mut now = 0u64;
    let mut rest = data;
    while rest.len() >= 3 {
        let flags = rest[0];
        let n = usize::from(u16::from_be_bytes([rest[1], rest[2]])).min(rest.len() - 3);
        let (m, tail) = rest[3..].split_at(n);
        rest = tail;
        now += u64::from(flags >> 3) * 1000;
        let from = SocketAddr::new(
            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10 + ((flags >> 1) & 3))),
            if flags & 1 == 1 { 2152 } else { 2123 },
        );
        for out in e.handle(now, from, flags & 1 == 1, m) {
            assert!(
                packet::gtp::parse_header(&out.bytes).is_ok(),
                "we send what we parse"
            );
        }
        let (mut v4, mut v6) = (0u32, 0u32);
        for c in e.contexts() {
            let up = table
                .uplink(c.teid)
                .expect("each context is found by its TEID");
            assert_eq!(up.ue_v4, c.ue_v4.map(u32::from));
            if let Some(a) = c.ue_v4 {
                v4 += 1;
                assert_eq!(table.slot_v4(c.apn, u32::from(a)), Some(up.slot));
            }
            if let Some(p) = c.ue_v6 {
                v6 += 1;
                assert_eq!(table.slot_v6(c.apn, p), Some(up.slot));
            }
        }
        let u = e.apn_usage()[0];
        assert_eq!(
            (u.v4.0, u.v6.0),
            (v4, v6),
            "the pools hold the contexts' addresses"
        );
    }
}

/// The config the `routes` target loads its route files into: two interfaces, a neighbour on
/// each family and two VRFs, so `via` can resolve (or not).
const ROUTES_CONFIG: &str = r#"
router: { workers: 1, buffers: 1024 }
vrfs: [blue]
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [192.0.2.1/24], ipv6: ["2001:db8:1::1/64"] }
  - { name: p1, port: p1, vrf: blue, mac: "02:00:00:00:01:01", ipv4: [198.51.100.1/24] }
neighbors:
  - { interface: p0, ip: 192.0.2.2, mac: "02:00:00:00:00:02" }
  - { interface: p0, ip: "2001:db8:1::2", mac: "02:00:00:00:00:02" }
"#;

/// The router the `routes` target loads into, built once per thread: building one per input
/// would cost milliseconds (its IPv6 table's first publish alone), so each input's routes are
/// removed again afterwards, and the router is rebuilt every `ROUTER_REUSE` inputs and after
/// any input that touched a route the config made.
struct RoutesBed {
    router: Option<Router>,
    uses: u32,
}

const ROUTER_REUSE: u32 = 10_000;

thread_local! {
    static BED: std::cell::RefCell<RoutesBed> =
        const { std::cell::RefCell::new(RoutesBed { router: None, uses: 0 }) };
}

fn routes_router() -> Router {
    let mut cfg = config::parse(ROUTES_CONFIG, config_path()).expect("the routes config is valid");
    shrink(&mut cfg);
    Router::build(cfg).expect("the routes config builds")
}

/// `data` as a route file (one route a line: `PREFIX/LEN via ADDR[,ADDR...]`, `blackhole`,
/// `reject`), loaded by the router as `linerate check` and `run` load it, into the default VRF
/// or, if the first byte is odd, into VRF `blue`. The file is written to a scratch path first:
/// the loader reads files.
pub fn routes(data: &[u8]) {
    let (vrf, text) = match data.split_first() {
        Some((b, rest)) if b & 1 == 1 => ("blue", rest),
        Some((_, rest)) => ("default", rest),
        None => ("default", data),
    };
    let path = scratch_file();
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(text))
        .expect("the scratch file is writable");
    BED.with(|bed| {
        let mut bed = bed.borrow_mut();
        if bed.router.is_none() || bed.uses >= ROUTER_REUSE {
            bed.router = Some(routes_router());
            bed.uses = 0;
        }
        let RoutesBed { router, uses } = &mut *bed;
        let r = router.as_mut().expect("built above");
        let before = r.route_counts();
        let res = r.load_route_file(&path, vrf);
        // The prefixes the file named, read as the loader reads them.
        let vrf_i = r.vrf_index(vrf);
        let named: Vec<Prefix> = String::from_utf8_lossy(text)
            .lines()
            .filter_map(|l| l.split('#').next()?.split_whitespace().next())
            .filter_map(|t| Prefix::parse(t).ok())
            .collect();
        match res {
            Ok(n) => {
                let after = r.route_counts();
                // A line may replace an earlier one, never add more than one route.
                assert!(after.0 + after.1 <= before.0 + before.1 + n);
                assert!(n <= named.len());
                r.publish().expect("loaded routes publish");
            }
            Err(e) => assert!(!e.0.is_empty()),
        }
        if named.iter().any(|&p| r.is_configured(vrf_i, p)) {
            *router = None;
        } else {
            for &p in &named {
                r.remove_route(vrf_i, p);
            }
            r.publish().expect("removals publish");
            assert_eq!(r.route_counts(), before, "the bed is back as it was");
            *uses += 1;
        }
    });
}

/// A file of this process's own under the temporary folder.
fn scratch_file() -> PathBuf {
    std::env::temp_dir().join(format!("linerate-fuzz-routes-{}", std::process::id()))
}

/// `data` as the kernel's answer to an `RTM_NEWADDR` or `RTM_DELADDR` request for a TAP twin's
/// address.
pub fn addr_ack(data: &[u8]) {
    for op in [crate::punt::tap::Op::Add, crate::punt::tap::Op::Del] {
        let _ = crate::punt::tap::address_ack(data, op);
    }
}

/// One rtnetlink datagram as the multicast route mirror reads it (the kernel's MFC entries):
/// decodes without a panic, and an entry encodes and decodes back to itself.
pub fn mfc(data: &[u8]) {
    crate::mcast::mfc::fuzz(data);
}

/// A DLSw router's engine (one peer up) fed LAN frames, SSP bytes from its peer, transport
/// events and time: `data` is records, each a byte of kind (low 2 bits: 0 LAN frame, 1 SSP
/// bytes, 2 the clock moves by the next byte x 50 ms, 3 the connection drops and comes back)
/// and, for frames and bytes, a byte of length before them. Whatever arrives, nothing panics,
/// and after every record: every LAN frame sent parses as LLC, what goes to the peer is whole
/// SSP messages that parse, and the circuit counts agree (the engine's, the peer's, the LAN
/// index's).
pub fn dlsw(data: &[u8]) {
    use crate::dlsw::engine::{Engine, EngineCfg};
    let cfg = EngineCfg {
        local: std::net::Ipv4Addr::new(10, 0, 0, 1),
        peers: vec![std::net::Ipv4Addr::new(10, 0, 0, 2)],
        keepalive_ms: 1_000,
        dead_after: 3,
        pacing_window: 4,
        llc2: crate::dlsw::station::Timers::default(),
        load_balance: false,
        explorer_ms: 2_000,
        cache_ms: 60_000,
        lan_ports: vec![0, 1],
        max_circuits: 32,
    };
    let mut e = Engine::new(cfg);
    let mut now = 1u64;
    e.peer_connected(now, 0);
    // The peer's side of the capabilities exchange, so fuzzed input reaches circuits.
    let caps = packet::dlsw::Capabilities {
        vendor: [0, 0, 0x0c],
        version: (1, 0),
        pacing_window: 4,
        version_string: String::new(),
        saps: [0xff; 16],
        tcp_connections: Some(1),
    };
    let mut hello = Vec::new();
    packet::dlsw::write_capex_request(&mut hello, &caps);
    packet::dlsw::write_capex_response(&mut hello);
    e.peer_bytes(now, 0, &hello);
    let mut rest = data;
    while let Some((&kind, tail)) = rest.split_first() {
        rest = tail;
        match kind & 3 {
            0 | 1 => {
                let Some((&n, tail)) = rest.split_first() else {
                    break;
                };
                let n = (n as usize).min(tail.len());
                let (m, tail) = tail.split_at(n);
                rest = tail;
                if kind & 3 == 0 {
                    e.lan_frame(now, (kind >> 7) as u16, m);
                } else {
                    e.peer_bytes(now, 0, m);
                }
            }
            2 => {
                let Some((&n, tail)) = rest.split_first() else {
                    break;
                };
                rest = tail;
                now += n as u64 * 50;
                e.tick(now);
            }
            _ => {
                e.peer_closed(now, 0, "fuzz");
                e.peer_connected(now, 0);
                e.peer_bytes(now, 0, &hello);
            }
        }
        if e.peers[0].close {
            e.peers[0].close = false;
            e.peer_closed(now, 0, "protocol error");
            e.peer_connected(now, 0);
            e.peer_bytes(now, 0, &hello);
        }
        for (port, f) in e.lan_out.drain(..) {
            assert!(port < 2, "a LAN port of the config");
            packet::llc2::parse(&f).expect("DLSw sends well-formed LLC");
        }
        let out = std::mem::take(&mut e.peers[0].out);
        let mut at = 0;
        while at < out.len() {
            let n = packet::dlsw::message_len(&out[at..])
                .expect("whole messages")
                .expect("a valid header");
            packet::dlsw::parse(&out[at..at + n]).expect("DLSw sends what it parses");
            at += n;
        }
        assert_eq!(e.circuits().count(), e.circuit_count());
        assert_eq!(e.peers[0].circuits as usize, e.circuit_count());
    }
}

/// What an SNMP master agent answers a subagent, fed to the event manager's AgentX exchange
/// (Open, Notify, Close): whatever the bytes, it ends with the session or an error, never
/// reads past them, never allocates more than a payload's limit.
pub fn agentx(data: &[u8]) {
    struct Far<'a> {
        answers: &'a [u8],
        sent: usize,
    }
    impl std::io::Read for Far<'_> {
        fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
            let n = b.len().min(self.answers.len());
            b[..n].copy_from_slice(&self.answers[..n]);
            self.answers = &self.answers[n..];
            Ok(n)
        }
    }
    impl std::io::Write for Far<'_> {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            // Everything we send is a whole PDU that parses.
            let h = packet::agentx::parse_header(b, 1 << 16).expect("our PDU");
            assert_eq!(h.payload_len as usize + packet::agentx::HEADER_LEN, b.len());
            self.sent += 1;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut far = Far {
        answers: data,
        sent: 0,
    };
    let objects = vec![(
        vec![1, 3, 6, 1, 4, 1, 8072, 9999, 1],
        packet::agentx::Value::OctetString(b"p1".to_vec()),
    )];
    let r = crate::events::snmp::exchange(&mut far, &[1, 3, 6, 1, 6, 3, 1, 1, 5, 3], objects, 5);
    if r.is_ok() {
        assert_eq!(far.sent, 3, "open, notify, close");
    }
}

/// An LDP speaker fed what a peer may send: a session is brought up as a real peer would
/// (hello, connection, initialization, keepalive), then `data` is records, each a byte of kind
/// (low 2 bits: 0 session bytes, 1 a hello (targeted, or a link hello if bit 2 is set), 2 the
/// clock moves by the next byte x 100 ms, 3 an attachment circuit flips or, with bit 6 set,
/// the routes change) and, for bytes, a byte of length before them. Whatever arrives, nothing
/// panics, everything the speaker queues is whole PDUs that parse, and no two FECs hold the
/// same label, each from the range.
pub fn ldp_session(data: &[u8]) {
    use crate::ldp::engine::{Engine, EngineCfg, PwSpec};
    use packet::ldp::{self, Msg, PduBuilder};
    use std::net::Ipv4Addr;
    let (me, peer) = (Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 1));
    let pw = |i: u32| PwSpec {
        name: format!("pw{i}"),
        peer,
        pw_id: i,
        pw_type: 5,
        control_word: i.is_multiple_of(2),
        mtu: 1500,
        local_label: 16 + i,
        ac_up: true,
    };
    let mut e = Engine::new(EngineCfg {
        lsr_id: me,
        transport: me,
        hello_interval_ms: 1000,
        hold_time: 15,
        keepalive: 30,
        neighbors: vec![],
        pws: (0..4).map(pw).collect(),
        egress: vec![(me, 32)],
        links: vec![crate::ldp::engine::LinkSpec {
            name: "core".into(),
            host: "lr-core".into(),
            address: me,
        }],
        link_hello_interval_ms: 1000,
        link_hold_time: 3,
        label_range: (100, 107),
    });
    let pdu = |msgs: &[Msg]| {
        let mut b = PduBuilder::new(peer, 0);
        for (i, m) in msgs.iter().enumerate() {
            ldp::encode(&mut b, i as u32 + 1, m);
        }
        b.finish()
    };
    let hello = pdu(&[Msg::Hello(ldp::Hello {
        hold: 15,
        targeted: true,
        request_targeted: true,
        transport: Some(peer),
        config_seq: None,
    })]);
    let mut now = 0u64;
    e.hello_in(now, peer, &hello);
    // 10.0.0.2 > 10.0.0.1: this side opens the session.
    if e.to_connect(now).is_empty() || !e.connected(now, peer) {
        return;
    }
    let init = Msg::Init(ldp::Init {
        keepalive: 30,
        on_demand: false,
        loop_detection: false,
        path_vector_limit: 0,
        max_pdu: 4096,
        receiver: (me, 0),
    });
    e.bytes_in(now, peer, &pdu(&[init, Msg::KeepAlive]));
    assert_eq!(
        e.sessions[&peer].state,
        crate::ldp::engine::State::Operational,
        "the fuzzed session starts up"
    );
    let check = |e: &mut Engine| {
        if let Some(s) = e.sessions.get_mut(&peer) {
            let out = std::mem::take(&mut s.out);
            let mut at = 0;
            while at < out.len() {
                let (h, _) =
                    packet::ldp::decode_pdu(&out[at..]).expect("the speaker sends PDUs that parse");
                at += h.len;
            }
        }
        let mut labels: Vec<u32> = e.fec_bindings().iter().filter_map(|b| b.local).collect();
        assert!(labels.iter().all(|l| (100..=107).contains(l)));
        labels.sort_unstable();
        let n = labels.len();
        labels.dedup();
        assert_eq!(n, labels.len(), "a label given to two FECs");
    };
    check(&mut e);
    let mut i = 0;
    while i < data.len() {
        let kind = data[i];
        i += 1;
        match kind & 3 {
            0 | 1 => {
                let n = data.get(i).copied().unwrap_or(0) as usize;
                i += 1;
                let end = (i + n).min(data.len());
                let bytes = &data[i.min(end)..end];
                i = end;
                if kind & 3 == 0 {
                    e.bytes_in(now, peer, bytes);
                } else if kind & 4 != 0 {
                    e.link_hello_in(now, 0, peer, bytes);
                } else {
                    e.hello_in(now, peer, bytes);
                }
            }
            2 => {
                now += u64::from(data.get(i).copied().unwrap_or(0)) * 100;
                i += 1;
                e.tick(now);
                let _ = e.hellos(now);
                let _ = e.link_hellos(now);
            }
            _ if kind & 0x40 != 0 => {
                // Up to 15 routes of 10.K.0.0/16, through the peer or a stranger.
                let routes = (0..kind >> 2 & 15)
                    .map(|k| crate::ldp::engine::fec::FecRoute {
                        prefix: Ipv4Addr::new(10, k, 0, 0),
                        len: 16,
                        next_hops: vec![if k % 3 == 0 {
                            Ipv4Addr::new(192, 0, 2, 1)
                        } else {
                            peer
                        }],
                    })
                    .collect();
                e.set_routes(now, routes);
            }
            _ => {
                let name = format!("pw{}", kind >> 2 & 3);
                let up = kind & 0x80 == 0;
                e.set_ac(now, &name, up);
            }
        }
        check(&mut e);
    }
    let _ = e.signalled();
}

/// `data` as a WatchEvent message from GoBGP's API (what the L3VPN service reads): decoded,
/// each path read as a VPN route. A route that reads must write back as an export path that
/// reads as the same route (with the same neighbour).
pub fn gobgp_path(data: &[u8]) {
    use crate::l3vpn::gobgp::{decode_path, export_path, WatchEventResponse};
    use crate::l3vpn::VpnUpdate;
    use prost::Message;
    let Ok(ev) = WatchEventResponse::decode(data) else {
        return;
    };
    for p in ev.table.iter().flat_map(|t| t.paths.iter()) {
        if let Ok(Some(VpnUpdate::Add(r))) = decode_path(p) {
            let mut back = export_path(r.rd, r.prefix, r.label, r.next_hop, &r.rts);
            back.neighbor_ip = p.neighbor_ip.clone();
            match decode_path(&back) {
                Ok(Some(VpnUpdate::Add(again))) => assert_eq!(again, r),
                other => panic!("{r:?} wrote back as {other:?}"),
            }
        }
    }
}

/// What an SNMP master may send the IF-MIB subagent: any bytes as a request PDU (header and
/// payload), answered as the subagent answers. Checks: no panic; every answer is one whole
/// Response-PDU that parses, for the request's packet id; GetNext answers stay in their range.
pub fn agentx_request(data: &[u8]) {
    use packet::agentx::request::{parse_request, Answer, Request};
    let Ok(h) = packet::agentx::parse_header(data, 1 << 16) else {
        return;
    };
    let payload = &data[packet::agentx::HEADER_LEN..];
    let payload = &payload[..payload.len().min(h.payload_len as usize)];
    let rows: Vec<crate::snmp::ifmib::IfRow> = (1..=3)
        .map(|i| crate::snmp::ifmib::IfRow {
            index: i,
            name: format!("p{i}"),
            mtu: 1500,
            counters: (i != 2).then_some(crate::snmp::ifmib::IfCounters {
                in_pkts: u64::from(i) << 31,
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    let n = crate::snmp::SnmpCounters::default();
    let Some(resp) = crate::snmp::answer_pdu(&h, payload, || rows.clone(), 7, &n) else {
        return;
    };
    let rh = packet::agentx::parse_header(&resp, 1 << 24).expect("our Response parses");
    assert_eq!(
        rh.payload_len as usize + packet::agentx::HEADER_LEN,
        resp.len()
    );
    assert_eq!((rh.ty, rh.packet), (packet::agentx::RESPONSE, h.packet));
    packet::agentx::parse_response(&rh, &resp[packet::agentx::HEADER_LEN..]).expect("Response");
    if let Ok((_, Request::GetNext(ranges))) = parse_request(&h, payload) {
        let view = crate::snmp::ifmib::View::of(&rows);
        for r in &ranges {
            if let Some((o, _)) = view.next(&r.start, r.include, &r.end) {
                assert!(o >= r.start.as_slice() && (r.end.is_empty() || o < r.end.as_slice()));
            }
        }
        let vb = view
            .answer(&Request::GetNext(ranges.clone()))
            .expect("a read");
        assert_eq!(vb.len(), ranges.len());
        for ((o, a), r) in vb.iter().zip(&ranges) {
            if *a == Answer::EndOfMibView {
                assert_eq!(o, &r.start);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gobgp_path_inputs() {
        use crate::l3vpn::gobgp::{export_path, TableEvent, WatchEventResponse};
        use prost::Message;
        gobgp_path(b"");
        gobgp_path(&[0x1a, 0x03, 0x12, 0x01, 0xff]);
        let mut p = export_path(
            "65000:1".parse().unwrap(),
            Prefix::parse("10.1.0.0/24").unwrap(),
            100,
            "10.0.0.1".parse().unwrap(),
            &["65000:1".parse().unwrap()],
        );
        p.neighbor_ip = "10.0.0.2".into();
        let ev = WatchEventResponse {
            table: Some(TableEvent { paths: vec![p] }),
        };
        gobgp_path(&ev.encode_to_vec());
        saved("gobgp_path", gobgp_path);
    }

    #[test]
    fn ldp_session_inputs() {
        ldp_session(b"");
        ldp_session(&[0, 4, 0, 1, 0, 0, 2, 255, 3, 0x83, 1, 3, 1, 2, 3]);
        ldp_session(&[0xff; 64]);
        saved("ldp_session", ldp_session);
    }

    #[test]
    fn agentx_inputs() {
        agentx(b"");
        agentx(&[
            1, 18, 0x10, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 8,
        ]);
        saved("agentx", agentx);
    }

    #[test]
    fn agentx_request_inputs() {
        agentx_request(b"");
        agentx_request(&[
            1, 6, 0x10, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 4, 200, 0, 0, 0,
        ]);
        saved("agentx_request", agentx_request);
    }

    fn saved(target: &str, f: fn(&[u8])) {
        for (name, data) in packet::fuzz_inputs::saved(target) {
            eprintln!("{name}");
            f(&data);
        }
    }

    #[test]
    fn dlsw_inputs() {
        dlsw(b"");
        dlsw(b"\x00\x03\x02\x01\x00\x02\xff\x03");
        saved("dlsw", dlsw);
    }

    #[test]
    fn config_inputs() {
        config(b"");
        config(b"\xff");
        config(b"router: {workers: 0}\n");
        config(ROUTES_CONFIG.as_bytes());
        saved("config", config);
    }

    #[test]
    fn routes_inputs() {
        routes(b"");
        routes(b"\x0010.0.0.0/8 via 192.0.2.2\n2001:db8::/32 via 2001:db8:1::2 # x\n");
        routes(b"\x0110.0.0.0/8 via 192.0.2.2\n");
        routes(b"\x00nonsense\n");
        saved("routes", routes);
    }

    #[test]
    fn mfc_inputs() {
        saved("rtnetlink", mfc);
        let seed = packet::fuzz_inputs::saved("rtnetlink")
            .into_iter()
            .find(|(n, _)| n.ends_with("mfc-sg-entry"))
            .expect("the MFC seed");
        let m = crate::mcast::mfc::decode(&seed.1);
        assert!(
            matches!(&m[..], [crate::mcast::mfc::MfcMsg::Entry(e)] if e.oifs == [(8, 1), (9, 1)] && e.iif == 7),
            "{m:?}"
        );
    }

    #[test]
    fn gtpc_inputs() {
        gtpc(&[]);
        gtpc(&[0, 0, 3, 0x32, 1, 0]);
        saved("gtpc", gtpc);
    }

    #[test]
    fn addr_ack_inputs() {
        addr_ack(&[]);
        addr_ack(&[0xff; 64]);
    }
}
