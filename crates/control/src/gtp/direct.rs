//! GTP-C answered in the punt path: a Create, Update or Delete punted by a worker (class
//! `gtp-c`) goes to the engine from the punt thread itself, and the answer is built from the
//! request's own headers and sent back out of the interface it came in on, as the punt thread
//! answers ARP. The way through the kernel (the TAP twin, the UDP socket, the GTP-C thread, and
//! back) cost four system calls and two passes through the kernel's stack per message, which
//! made a burst of creates slower than OsmoGGSN's (26,000/s against 46,000/s on the project's
//! VM).
//!
//! Reads: the punted frame (Ethernet, one optional 802.1Q tag, IPv4 without fragmentation, UDP
//! to the GGSN's address, port 2123). Sets: the engine's state (contexts, statistics, events,
//! which the GTP-C thread logs). Sends: answers to the requester as frames for the punt thread
//! to inject; anything the engine sends elsewhere (none of a request's answers do) through the
//! GTP-C socket, the kernel's way. Anything else (IPv6, a fragment, another port or address)
//! is not taken and goes up the twin as before.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;

use packet::checksum;
use packet::gtp::GTPC_PORT;

use super::Ggsn;

/// The GGSN's GTP-C as the punt thread calls it.
pub struct Direct {
    g: Arc<Ggsn>,
    /// The GTP-C socket, for what is not an answer to the frame's sender.
    sock: Arc<UdpSocket>,
}

/// Where the parts of a request frame are.
struct Request {
    /// Ethernet header length (14 or 18).
    l2: usize,
    from: SocketAddr,
    payload: std::ops::Range<usize>,
}

impl Direct {
    pub fn new(g: Arc<Ggsn>, sock: Arc<UdpSocket>) -> Direct {
        Direct { g, sock }
    }

    /// Handles `frame` if it is GTP-C to the GGSN's address: the answers to send out of the
    /// interface it came in on. None when it is not (the caller sends it up the twin).
    pub fn handle(&self, frame: &[u8]) -> Option<Vec<Vec<u8>>> {
        let r = parse(frame, self.g.cfg.address)?;
        let now = self.g.now_ms();
        let sends = self
            .g
            .engine()
            .handle(now, r.from, false, &frame[r.payload.clone()]);
        let mut out = Vec::with_capacity(sends.len());
        for s in sends {
            match s.to {
                SocketAddr::V4(to) if !s.user_plane && IpAddr::V4(*to.ip()) == r.from.ip() => out
                    .push(answer(
                        frame,
                        &r,
                        self.g.cfg.address,
                        to.ip(),
                        to.port(),
                        &s.bytes,
                    )),
                _ => {
                    let _ = self.sock.send_to(&s.bytes, s.to);
                }
            }
        }
        Some(out)
    }
}

/// The request's layout, if `frame` is an unfragmented IPv4 UDP datagram to `ggsn`:2123.
fn parse(frame: &[u8], ggsn: Ipv4Addr) -> Option<Request> {
    let mut l2 = 14;
    let mut ty = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    if ty == 0x8100 {
        l2 = 18;
        ty = u16::from_be_bytes([*frame.get(16)?, *frame.get(17)?]);
    }
    if ty != 0x0800 {
        return None;
    }
    let ip = frame.get(l2..)?;
    let ihl = usize::from(*ip.first()? & 0x0f) * 4;
    if ip[0] >> 4 != 4 || ihl < 20 || ip.len() < ihl + 8 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    // More fragments, or an offset: a piece of a datagram; the kernel reassembles those.
    let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
    if ip[9] != 17 || frag != 0 || total < ihl + 8 || total > ip.len() {
        return None;
    }
    if ip[16..20] != ggsn.octets() {
        return None;
    }
    let udp = &ip[ihl..total];
    let (sport, dport) = (
        u16::from_be_bytes([udp[0], udp[1]]),
        u16::from_be_bytes([udp[2], udp[3]]),
    );
    let ulen = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if dport != GTPC_PORT || ulen < 8 || ulen > udp.len() {
        return None;
    }
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let start = l2 + ihl + 8;
    Some(Request {
        l2,
        from: SocketAddr::new(IpAddr::V4(src), sport),
        payload: start..start + ulen - 8,
    })
}

/// The answer frame: the request's L2 header with the MACs swapped (its tag kept), then IPv4
/// from the GGSN and UDP from port 2123, both checksummed.
fn answer(
    req: &[u8],
    r: &Request,
    ggsn: Ipv4Addr,
    to: &Ipv4Addr,
    port: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = Vec::with_capacity(r.l2 + 28 + payload.len());
    f.extend_from_slice(&req[6..12]);
    f.extend_from_slice(&req[0..6]);
    f.extend_from_slice(&req[12..r.l2]);
    let total = (20 + 8 + payload.len()) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[6] = 0x40; // DF: answers are small, and a GGSN's path MTU is its own
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&ggsn.octets());
    ip[16..20].copy_from_slice(&to.octets());
    let c = checksum::fold(checksum::sum(&ip));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    let ulen = (8 + payload.len()) as u16;
    let mut udp = [0u8; 8];
    udp[0..2].copy_from_slice(&GTPC_PORT.to_be_bytes());
    udp[2..4].copy_from_slice(&port.to_be_bytes());
    udp[4..6].copy_from_slice(&ulen.to_be_bytes());
    let s = checksum::combine(
        checksum::pseudo_v4(ggsn.octets(), to.octets(), 17, u32::from(ulen)),
        checksum::combine(checksum::sum(&udp), checksum::sum(payload)),
    );
    let mut c = checksum::fold(s);
    if c == 0 {
        c = 0xffff;
    }
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&udp);
    f.extend_from_slice(payload);
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::gtp::{self, cause, ie, msg, EndUserAddress, MsgBuilder};

    const SGSN_MAC: [u8; 6] = [2, 0, 0, 0, 0xe, 2];
    const OUR_MAC: [u8; 6] = [2, 0, 0, 0, 0xd, 1];

    fn ggsn() -> Arc<Ggsn> {
        let text = "control-plane: { taps: true }
ports: [{ name: p0, driver: mem }]
interfaces: [{ name: p0, port: p0, mac: '02:00:00:00:0d:01', ipv4: [192.0.2.1/24] }]
ggsn: { address: 192.0.2.1, apns: [{ name: internet, ipv4-pool: 10.0.0.0/24 }] }
";
        let cfg = crate::config::parse(text, std::path::Path::new("g.yaml"))
            .unwrap()
            .ggsn
            .unwrap();
        Ggsn::new(&cfg, 16, 1, 3)
    }

    /// A Create PDP Context Request from 192.0.2.9:2123 in a frame, tagged with `vlan`.
    fn request(vlan: Option<u16>, dport: u16) -> Vec<u8> {
        let mut m = MsgBuilder::new(msg::CREATE_PDP_REQUEST, 0, 77);
        m.tv(ie::IMSI, &gtp::imsi_encode("262010000000001").unwrap())
            .tv(ie::SELECTION_MODE, &[0xfc])
            .tv(ie::TEID_DATA_I, &5u32.to_be_bytes())
            .tv(ie::TEID_C, &6u32.to_be_bytes())
            .tv(ie::NSAPI, &[5])
            .tlv(ie::END_USER_ADDRESS, &EndUserAddress::Ipv4(None).encode())
            .tlv(ie::APN, &gtp::apn_encode("internet"))
            .tlv(ie::GSN_ADDRESS, &[192, 0, 2, 9])
            .tlv(ie::GSN_ADDRESS, &[192, 0, 2, 9])
            .tlv(ie::QOS_PROFILE, &[1, 0x0b, 0x92, 0x1f]);
        let payload = m.finish();
        let mut f = Vec::new();
        f.extend_from_slice(&OUR_MAC);
        f.extend_from_slice(&SGSN_MAC);
        if let Some(v) = vlan {
            f.extend_from_slice(&[0x81, 0]);
            f.extend_from_slice(&v.to_be_bytes());
        }
        f.extend_from_slice(&[8, 0]);
        let total = (28 + payload.len()) as u16;
        let mut ip = vec![
            0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0, 192, 0, 2, 9, 192, 0, 2, 1,
        ];
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&2123u16.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&payload);
        // Ethernet padding after the datagram is not part of it.
        f.extend_from_slice(&[0; 6]);
        f
    }

    #[test]
    fn a_create_is_answered_in_a_frame_back_to_the_sender() {
        let g = ggsn();
        let sock = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        let d = Direct::new(g.clone(), sock);
        for vlan in [None, Some(100)] {
            let req = request(vlan, 2123);
            let out = d.handle(&req).expect("GTP-C to the GGSN");
            assert_eq!(out.len(), 1);
            let f = &out[0];
            let l2 = if vlan.is_some() { 18 } else { 14 };
            assert_eq!((&f[0..6], &f[6..12]), (&SGSN_MAC[..], &OUR_MAC[..]));
            assert_eq!(f[12..l2], req[12..l2], "the tag and EtherType kept");
            let ip = &f[l2..l2 + 20];
            assert!(checksum::ipv4_header_ok(ip));
            assert_eq!(
                (&ip[12..16], &ip[16..20]),
                (&[192, 0, 2, 1][..], &[192, 0, 2, 9][..])
            );
            let udp = &f[l2 + 20..];
            assert_eq!(
                usize::from(u16::from_be_bytes([ip[2], ip[3]])),
                20 + udp.len()
            );
            assert_eq!(u16::from_be_bytes([udp[0], udp[1]]), 2123);
            assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), 2123);
            let s = checksum::combine(
                checksum::pseudo_v4([192, 0, 2, 1], [192, 0, 2, 9], 17, udp.len() as u32),
                checksum::sum(udp),
            );
            assert_eq!(checksum::fold(s), 0, "the UDP checksum verifies");
            let h = gtp::parse_header(&udp[8..]).unwrap();
            assert_eq!(
                (h.msg_type, h.seq, h.teid),
                (msg::CREATE_PDP_RESPONSE, Some(77), 6)
            );
            let c = gtp::ies(h.payload(&udp[8..]))
                .map(|x| x.unwrap())
                .find(|x| x.ty == ie::CAUSE)
                .unwrap();
            assert_eq!(c.value, [cause::REQUEST_ACCEPTED]);
        }
        // The second frame was the first's retransmission (same sender, same sequence number):
        // answered from the cache, one context.
        assert_eq!(g.engine().contexts().count(), 1);
        assert_eq!(g.engine().stats.duplicates, 1);
    }

    #[test]
    fn anything_else_goes_up_the_twin() {
        let d = Direct::new(ggsn(), Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap()));
        // Another port; a fragment; another address; IPv6; a short frame.
        assert!(d.handle(&request(None, 2152)).is_none());
        let mut frag = request(None, 2123);
        frag[20] = 0x20; // more fragments
        assert!(d.handle(&frag).is_none());
        let mut other = request(None, 2123);
        other[33] = 7;
        assert!(d.handle(&other).is_none());
        let mut v6 = request(None, 2123);
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        assert!(d.handle(&v6).is_none());
        assert!(d.handle(&request(None, 2123)[..30]).is_none());
        let mut short_udp = request(None, 2123);
        short_udp[38..40].copy_from_slice(&4u16.to_be_bytes());
        assert!(d.handle(&short_udp).is_none());
    }
}
