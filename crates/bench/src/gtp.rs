//! The GGSN's user plane at its rate (`bench forward --gtp N --replay`): a router whose one port
//! carries Gn (VLAN 100, the GGSN at 10.0.0.1, the SGSN at 10.0.0.2) and Gi (VLAN 200, the
//! server at 10.1.0.2), as the seed's GGSN had them on separate VLANs of one interface; N PDP
//! contexts created through the GTP-C engine (the same code the GTP-C socket feeds, called
//! directly: the creation rate printed is the engine's, not the wire's); then each worker
//! replays, in turn, an uplink G-PDU of a context (decapsulated, anti-spoofed, counted, routed
//! to the server) and a downlink packet to another context's UE (found by its address,
//! encapsulated, routed to the SGSN), contexts in a random order so a large table is cold.
//!
//! Frame sizes are the Gi side's (the UE's packet with its Ethernet and VLAN headers); the
//! uplink G-PDU carries the same packet, 36 bytes of tunnel longer.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;

use control::Router;
use dataplane::Pool;
use packet::gtp::{self, ie, msg, EndUserAddress, MsgBuilder};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::forward::{replay, Opts, Result};

const SGSN: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SERVER: u32 = 0x0a01_0002;
const ROUTER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

fn config(o: &Opts) -> String {
    let cores: Vec<String> = (0..o.workers).map(|i| i.to_string()).collect();
    format!(
        "router: {{ workers: {w}, cores: [{c}], buffers: 65536 }}
limits: {{ gtp-contexts: {n} }}
ports:
  - {{ name: p0, driver: mem }}
interfaces:
  - {{ name: gn, port: p0, vlan: 100, mac: \"02:00:00:00:00:01\", ipv4: [10.0.0.1/24], mtu: 9000 }}
  - {{ name: gi, port: p0, vlan: 200, mac: \"02:00:00:00:00:01\", ipv4: [10.1.0.1/24], mtu: 9000 }}
neighbors:
  - {{ interface: gn, ip: 10.0.0.2, mac: \"02:00:00:00:0a:02\" }}
  - {{ interface: gi, ip: 10.1.0.2, mac: \"02:00:00:00:0b:02\" }}
ggsn:
  address: 10.0.0.1
  create-rate: 100000000
  echo-interval: 0
  apns:
    - {{ name: internet, ipv4-pool: 10.64.0.0/{len} }}
control-plane: {{ taps: true }}
",
        w = o.workers,
        c = cores.join(", "),
        n = o.gtp_contexts.next_power_of_two().max(1024),
        len = 32
            - (o.gtp_contexts as u32 + 2)
                .next_power_of_two()
                .trailing_zeros()
                .max(2),
    )
}

/// Creates `n` contexts through the engine; returns each one's (our TEID, UE address) and the
/// creation rate (contexts per second).
fn create(router: &Router, n: usize) -> std::result::Result<(Vec<(u32, u32)>, f64), String> {
    let g = router.gtp.clone().ok_or("no GGSN")?;
    let mut e = g.engine();
    let from = SocketAddr::new(IpAddr::V4(SGSN), 2123);
    let mut out = Vec::with_capacity(n);
    let t0 = Instant::now();
    for i in 0..n {
        let seq = i as u16;
        let mut m = MsgBuilder::new(msg::CREATE_PDP_REQUEST, 0, seq);
        m.tv(
            ie::IMSI,
            &gtp::imsi_encode(&format!("26201{i:010}")).expect("15 digits"),
        )
        .tv(ie::TEID_DATA_I, &(0x1000_0000 + i as u32).to_be_bytes())
        .tv(ie::TEID_C, &(0x2000_0000 + i as u32).to_be_bytes())
        .tv(ie::NSAPI, &[5])
        .tlv(ie::END_USER_ADDRESS, &EndUserAddress::Ipv4(None).encode())
        .tlv(ie::APN, &gtp::apn_encode("internet"))
        .tlv(ie::GSN_ADDRESS, &SGSN.octets())
        .tlv(ie::GSN_ADDRESS, &SGSN.octets())
        .tlv(ie::QOS_PROFILE, &[1, 0x0b, 0x92, 0x1f]);
        // A new sequence number space per 65,536 requests: a fresh sender port each time, so
        // no request is taken for a retransmission of an earlier one.
        let from = SocketAddr::new(from.ip(), 2123 + (i >> 16) as u16);
        let sent = e.handle(i as u64 / 1000, from, false, &m.finish());
        let b = &sent.first().ok_or("no answer")?.bytes;
        let h = gtp::parse_header(b).map_err(|e| e.to_string())?;
        let (mut teid, mut ue) = (None, None);
        for x in gtp::ies(h.payload(b)) {
            let x = x.map_err(|e| e.to_string())?;
            match x.ty {
                ie::CAUSE if x.value != [gtp::cause::REQUEST_ACCEPTED] => {
                    return Err(format!("context {i} refused: cause {}", x.value[0]))
                }
                ie::TEID_DATA_I => teid = Some(u32::from_be_bytes(x.value.try_into().unwrap())),
                ie::END_USER_ADDRESS => {
                    if let Some(EndUserAddress::Ipv4(Some(a))) = gtp::end_user_address(x.value) {
                        ue = Some(u32::from(a));
                    }
                }
                _ => {}
            }
        }
        out.push((teid.ok_or("no TEID")?, ue.ok_or("no address")?));
    }
    let rate = n as f64 / t0.elapsed().as_secs_f64();
    Ok((out, rate))
}

/// A Gi-side frame of `size` (FCS counted) in VLAN `vlan` from `src` to `dst`, UDP.
fn gi_frame(vlan: u16, src: u32, dst: u32, size: usize, flow: u16) -> Vec<u8> {
    let plain = crate::forward::frame(dst, size.saturating_sub(4), flow);
    let mut f = Vec::with_capacity(plain.len() + 4);
    f.extend_from_slice(&ROUTER_MAC);
    f.extend_from_slice(&[2, 0, 0, 0, 0x0b, 2]);
    f.extend_from_slice(&[0x81, 0x00]);
    f.extend_from_slice(&vlan.to_be_bytes());
    f.extend_from_slice(&plain[12..]);
    let ip = &mut f[18..];
    ip[12..16].copy_from_slice(&src.to_be_bytes());
    ip[10..12].fill(0);
    let c = packet::checksum::fold(packet::checksum::sum(&ip[..20]));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f
}

/// The same UE packet as a G-PDU from the SGSN on Gn (VLAN 100).
fn uplink(teid: u32, ue: u32, size: usize, flow: u16) -> Vec<u8> {
    let inner = gi_frame(100, ue, SERVER, size, flow)[18..].to_vec();
    let mut f = Vec::with_capacity(inner.len() + 54);
    f.extend_from_slice(&ROUTER_MAC);
    f.extend_from_slice(&[2, 0, 0, 0, 0x0a, 2]);
    f.extend_from_slice(&[0x81, 0x00, 0x00, 100, 0x08, 0x00]);
    let mut h = [0u8; 36];
    dataplane::node::gtpu_encap::write_headers(
        &mut h,
        u32::from(SGSN),
        0x0a00_0001,
        teid,
        inner.len(),
    );
    f.extend_from_slice(&h);
    f.extend_from_slice(&inner);
    f
}

pub fn run(o: &Opts, dir: &std::path::Path) -> std::result::Result<Result, String> {
    if !o.replay {
        return Err("the GGSN is measured with --replay (each worker feeds itself)".into());
    }
    let n = o.gtp_contexts;
    let cfg_path = dir.join("bench.yaml");
    std::fs::write(&cfg_path, config(o)).map_err(|e| e.to_string())?;
    let cfg = control::config::load(&cfg_path).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let router = Router::build(cfg).map_err(|e| e.to_string())?;
    let (contexts, rate) = create(&router, n)?;
    let build_s = t0.elapsed().as_secs_f64();
    let g = router.gtp.clone().ok_or("no GGSN")?;
    eprintln!(
        "       {n} contexts created through the GTP-C engine at {rate:.0}/s; context table {} bytes per context",
        g.table.bytes() / g.table.capacity() as usize
    );
    drop(g);
    let mut rng = SmallRng::seed_from_u64(5);
    let count = n.clamp(1, 1 << 16);
    let mut templates = Vec::with_capacity(count * 2);
    for i in 0..count {
        let (teid, ue) = contexts[rng.gen_range(0..n)];
        templates.push(uplink(teid, ue, o.frame_size, i as u16));
        let (_, ue) = contexts[rng.gen_range(0..n)];
        templates.push(gi_frame(200, SERVER, ue, o.frame_size, i as u16));
    }
    replay(o, router, Pool::new(65536), templates, n, build_s, true)
}
