//! Entry points for the cargo-fuzz targets in `fuzz/`, kept in the crate so that the unit tests
//! (`robustness`) run exactly the same code on stable Rust. Not part of the API.
//!
//! Each function feeds arbitrary bytes to every parser that sees untrusted input and asserts that
//! whatever a checked view accepted reads back consistently. A panic here is a bug.

use crate::{
    arp, capture, checksum, ethernet, icmpv4, icmpv6, ipv4, ipv6, nd, pcap, pcapng, tcp, udp, vlan,
};

/// The capture filter: the input up to the first 0 byte is an expression (lossy UTF-8), the rest
/// a frame. Parsing must not panic, and neither may matching with whatever compiled.
pub fn filter(data: &[u8]) {
    let (expr, frame) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let expr = String::from_utf8_lossy(expr);
    if let Ok(f) = crate::filter::Filter::parse(&expr) {
        let _ = f.matches(frame);
    }
}

/// Every header view, the IPv6 extension-header walk and the ICMP builders over `data`.
pub fn wire(data: &[u8]) {
    frame(data);
    if let Ok(t) = vlan::Tag::new_checked(data) {
        let r = vlan::Repr::parse(&t);
        assert!(r.pcp <= 7 && r.vid <= 0x0FFF);
        assert_eq!(t.payload().len(), data.len() - vlan::HEADER_LEN);
        let mut out = [0u8; vlan::HEADER_LEN];
        r.emit(&mut out).expect("a parsed tag re-emits");
        assert_eq!(out, data[..vlan::HEADER_LEN]);
    }
    ip4(data);
    ip6(data);
    l4(data);
    icmp_builders(data);
    checksums(data);
    neighbor(data);
}

/// ARP and ND parsers: what they accept re-emits to the same fields.
fn neighbor(data: &[u8]) {
    if let Ok(r) = arp::Repr::parse(data) {
        let mut out = [0u8; arp::LEN];
        r.emit(&mut out);
        assert_eq!(arp::Repr::parse(&out), Ok(r));
    }
    let (src, dst) = ([0xfe; 16], [0xff; 16]);
    if let Ok(r) = nd::Repr::parse(data, &src, &dst, 255) {
        let mut out = [0u8; 32];
        r.emit(&mut out, &src, &dst);
        let back = nd::Repr::parse(&out[..r.len()], &src, &dst, 255).expect("re-parses");
        assert_eq!((back.target, back.lladdr), (r.target, r.lladdr));
    }
}

/// Reads a capture to its end or its first error: as classic pcap, as pcapng, through the reader
/// that tells them apart, and as the blocks of a pcapng section (after a valid section header and
/// interface), so that arbitrary bytes reach the block parser without first guessing a header.
pub fn pcap(data: &[u8]) {
    if let Ok(mut r) = pcap::Reader::new(data) {
        let _ = (
            r.linktype(),
            r.snaplen(),
            r.is_nanos(),
            r.version(),
            r.fcs_len(),
        );
        assert!(r.linktype() <= 0xFFFF);
        let mut buf = Vec::new();
        while let Ok(Some(rec)) = r.next_into(&mut buf) {
            assert_eq!(buf.len(), rec.caplen as usize);
            assert!(rec.caplen <= pcap::MAX_CAPLEN);
        }
    }
    pcapng_reads(data);
    let mut w = pcapng::Writer::new(Vec::new(), "fuzz").expect("writes to memory");
    w.add_interface(&pcapng::InterfaceDesc {
        linktype: 1,
        snaplen: 0,
        name: None,
        description: None,
    })
    .expect("writes to memory");
    let mut section = w.into_inner();
    section.extend_from_slice(data);
    pcapng_reads(&section);
    if let Ok(mut r) = capture::AnyReader::new(data) {
        let mut buf = Vec::new();
        let (mut n, mut offset) = (0, 0);
        while let Ok(Some(f)) = r.next_into(&mut buf) {
            n += 1;
            assert_eq!(buf.len(), f.caplen as usize);
            assert!(f.linktype <= 0xFFFF);
            assert_eq!(r.position().record, n);
            assert!(r.position().offset >= offset);
            offset = r.position().offset;
        }
    }
}

fn pcapng_reads(data: &[u8]) {
    let Ok(mut r) = pcapng::Reader::new(data) else {
        return;
    };
    let mut buf = Vec::new();
    let mut n = 0;
    while let Ok(Some(p)) = r.next_into(&mut buf) {
        n += 1;
        assert_eq!(buf.len(), p.caplen as usize);
        assert!(p.caplen <= pcap::MAX_CAPLEN);
        assert!(r.interface(p.interface).is_some());
        assert_eq!(r.position().record, n);
        assert!(r.position().offset < data.len() as u64);
        assert!(r.sections() >= 1);
    }
}

/// Ethernet, then up to two VLAN tags, then the network layer: the demux of the input node.
fn frame(data: &[u8]) {
    let Ok(f) = ethernet::Frame::new_checked(data) else {
        assert!(data.len() < ethernet::HEADER_LEN);
        return;
    };
    let r = ethernet::Repr::parse(&f);
    assert_eq!(r.dst.is_unicast(), !r.dst.is_multicast());
    assert_eq!(r.dst.to_string().parse::<ethernet::MacAddr>(), Ok(r.dst));
    assert_eq!(u16::from(r.ethertype), f.ethertype_raw());
    let mut ethertype = f.ethertype();
    let mut rest = f.payload();
    for _ in 0..2 {
        if !matches!(
            ethertype,
            ethernet::EtherType::Vlan | ethernet::EtherType::QinQ
        ) {
            break;
        }
        let Ok(t) = vlan::Tag::new_checked(rest) else {
            return;
        };
        ethertype = t.inner_ethertype();
        rest = &rest[vlan::HEADER_LEN..];
    }
    match ethertype {
        ethernet::EtherType::Ipv4 => ip4(rest),
        ethernet::EtherType::Ipv6 => ip6(rest),
        _ => {}
    }
}

fn ip4(data: &[u8]) {
    let Ok(p) = ipv4::Packet::new_checked(data) else {
        return;
    };
    assert_eq!(p.version(), 4);
    let hlen = p.header_len();
    assert!((ipv4::HEADER_LEN..=60).contains(&hlen));
    assert_eq!(p.options().len(), hlen - ipv4::HEADER_LEN);
    assert_eq!(p.payload().len(), usize::from(p.total_len()) - hlen);
    assert_eq!(p.src_u32(), u32::from_be_bytes(p.src_addr()));
    assert_eq!(p.dst_u32(), u32::from_be_bytes(p.dst_addr()));
    assert_eq!(u8::from(p.protocol()), p.protocol_raw());
    assert!(p.dscp() < 64 && p.ecn() < 4 && p.frag_offset() % 8 == 0);
    let _ = (
        p.ident(),
        p.dont_frag(),
        p.more_frags(),
        p.is_fragment(),
        p.ttl(),
    );
    let ok = p.verify_checksum();
    if hlen == ipv4::HEADER_LEN {
        assert_eq!(ok, checksum::ipv4_header_ok(data));
    }
    assert_eq!(ipv4::Repr::parse(&p).is_ok(), ok);

    // The forwarding path's edit must keep a good checksum good.
    let mut copy = data[..usize::from(p.total_len())].to_vec();
    let mut q = ipv4::Packet::new_checked(&mut copy[..]).expect("same bytes");
    q.decrement_ttl();
    assert_eq!(q.verify_checksum(), ok);

    let payload = p.payload();
    let (src, dst) = (p.src_addr(), p.dst_addr());
    match p.protocol() {
        ipv4::Protocol::Udp => {
            if let Ok(u) = udp::Packet::new_checked(payload) {
                let _ = u.verify_checksum_v4(src, dst);
            }
        }
        ipv4::Protocol::Tcp => {
            if let Ok(t) = tcp::Packet::new_checked(payload) {
                let _ = t.verify_checksum_v4(src, dst);
            }
        }
        ipv4::Protocol::Icmp => {
            if let Ok(i) = icmpv4::Packet::new_checked(payload) {
                let _ = i.verify_checksum();
            }
        }
        _ => {}
    }
}

fn ip6(data: &[u8]) {
    let Ok(p) = ipv6::Packet::new_checked(data) else {
        return;
    };
    assert_eq!(p.version(), 6);
    assert_eq!(p.payload().len(), usize::from(p.payload_len()));
    assert!(p.flow_label() <= 0x000F_FFFF);
    assert_eq!(p.src_u128(), u128::from_be_bytes(p.src_addr()));
    assert_eq!(p.dst_u128(), u128::from_be_bytes(p.dst_addr()));
    assert_eq!(p.traffic_class(), p.dscp() << 2 | p.ecn());
    let _ = (p.hop_limit(), p.next_header());
    let r = ipv6::Repr::parse(&p);
    let mut out = [0u8; ipv6::HEADER_LEN];
    r.emit(&mut out).expect("a parsed header re-emits");
    assert_eq!(out, data[..ipv6::HEADER_LEN]);

    let end = ipv6::HEADER_LEN + usize::from(p.payload_len());
    if let Some((proto, off, later_fragment)) = p.transport() {
        assert!((ipv6::HEADER_LEN..=end).contains(&off));
        let upper = &data[off..end];
        let (src, dst) = (p.src_addr(), p.dst_addr());
        if !later_fragment {
            match proto {
                17 => {
                    if let Ok(u) = udp::Packet::new_checked(upper) {
                        let _ = u.verify_checksum_v6(&src, &dst);
                    }
                }
                6 => {
                    if let Ok(t) = tcp::Packet::new_checked(upper) {
                        let _ = t.verify_checksum_v6(&src, &dst);
                    }
                }
                icmpv6::PROTO => {
                    if let Ok(i) = icmpv6::Packet::new_checked(upper) {
                        let _ = i.verify_checksum(&src, &dst);
                    }
                }
                _ => {}
            }
        }
    }
}

/// The transport views straight over the input, as if it were an IP payload.
fn l4(data: &[u8]) {
    if let Ok(u) = udp::Packet::new_checked(data) {
        assert_eq!(u.payload().len(), usize::from(u.len()) - udp::HEADER_LEN);
        assert_eq!(u.is_empty(), u.payload().is_empty());
        let _ = (u.src_port(), u.dst_port(), u.checksum());
        let _ = u.verify_checksum_v4([1, 2, 3, 4], [5, 6, 7, 8]);
        let r = udp::Repr::parse(&u);
        assert_eq!(r.payload_len, u.payload().len());
    }
    if let Ok(t) = tcp::Packet::new_checked(data) {
        let hlen = t.header_len();
        assert!((tcp::HEADER_LEN..=60).contains(&hlen));
        assert_eq!(t.options().len(), hlen - tcp::HEADER_LEN);
        assert_eq!(t.payload().len(), data.len() - hlen);
        let _ = (t.src_port(), t.dst_port(), t.seq(), t.ack(), t.flags());
        let _ = (t.window(), t.checksum(), t.urgent());
    }
    if let Ok(i) = icmpv4::Packet::new_checked(data) {
        assert_eq!(i.data().len(), data.len() - icmpv4::HEADER_LEN);
        let _ = (
            i.msg_type(),
            i.code(),
            i.checksum(),
            i.rest(),
            i.echo_ident(),
        );
        let _ = (i.echo_seq(), i.next_hop_mtu(), i.verify_checksum());
    }
    if let Ok(i) = icmpv6::Packet::new_checked(data) {
        assert_eq!(i.data().len(), data.len() - icmpv6::HEADER_LEN);
        let _ = (i.msg_type(), i.code(), i.checksum(), i.rest(), i.echo_seq());
    }
}

fn icmp_builders(data: &[u8]) {
    let src = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let dst = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    // The first byte picks an output size, so short buffers get exercised too.
    let cap = data.first().map_or(0, |b| usize::from(*b) * 8);
    let mut out = vec![0u8; 1400];
    for len in [out.len(), cap.min(out.len())] {
        let out = &mut out[..len];
        let n = icmpv4::build_error(out, icmpv4::TIME_EXCEEDED, 0, 0, data);
        if len < icmpv4::HEADER_LEN {
            assert_eq!(n, 0);
        } else {
            assert!(n >= icmpv4::HEADER_LEN && n <= len);
            assert!(ipv4::HEADER_LEN + n <= icmpv4::MAX_ERROR_DATAGRAM);
            let quotable =
                ipv4::Packet::new_checked(data).map_or(data.len(), |p| usize::from(p.total_len()));
            assert_eq!(n - 8, quotable.min(548).min(len - 8));
            assert!(data.starts_with(&out[8..n]));
            assert!(icmpv4::Packet::new_checked(&out[..n])
                .expect("built")
                .verify_checksum());
        }
        let n = icmpv6::build_error(out, icmpv6::PARAM_PROBLEM, 1, 40, data, &src, &dst);
        if len < icmpv6::HEADER_LEN {
            assert_eq!(n, 0);
        } else {
            assert!(n >= icmpv6::HEADER_LEN && n <= len);
            assert!(ipv6::HEADER_LEN + n <= icmpv6::MIN_MTU);
            let quotable = ipv6::Packet::new_checked(data)
                .map_or(data.len(), |p| 40 + usize::from(p.payload_len()));
            assert_eq!(n - 8, quotable.min(1232).min(len - 8));
            assert!(data.starts_with(&out[8..n]));
            assert!(icmpv6::Packet::new_checked(&out[..n])
                .expect("built")
                .verify_checksum(&src, &dst));
        }
    }

    let mut copy = data.to_vec();
    let was_request = icmpv4::Packet::new_checked(data)
        .is_ok_and(|p| p.msg_type() == icmpv4::ECHO_REQUEST && p.verify_checksum());
    assert_eq!(icmpv4::echo_reply_in_place(&mut copy), was_request);
    if was_request {
        let p = icmpv4::Packet::new_checked(&copy[..]).expect("same length");
        assert_eq!(p.msg_type(), icmpv4::ECHO_REPLY);
        assert!(p.verify_checksum());
        assert_eq!(&copy[4..], &data[4..]);
    } else {
        assert_eq!(copy, data);
    }

    let mut copy = data.to_vec();
    let was_request = icmpv6::Packet::new_checked(data)
        .is_ok_and(|p| p.msg_type() == icmpv6::ECHO_REQUEST && p.verify_checksum(&dst, &src));
    assert_eq!(
        icmpv6::echo_reply_in_place(&mut copy, &src, &dst),
        was_request
    );
    if was_request {
        let p = icmpv6::Packet::new_checked(&copy[..]).expect("same length");
        assert!(p.verify_checksum(&src, &dst));
        assert_eq!(&copy[4..], &data[4..]);
    } else {
        assert_eq!(copy, data);
    }
}

fn checksums(data: &[u8]) {
    // Splitting at any even point and combining gives the same checksum.
    let whole = checksum::fold(checksum::sum(data));
    let mid = (data.len() / 2) & !1;
    let parts = checksum::combine(checksum::sum(&data[..mid]), checksum::sum(&data[mid..]));
    assert_eq!(checksum::fold(parts), whole);
    if data.len() >= 20 && data[0] >> 4 == 4 {
        let mut h = [0u8; 20];
        h.copy_from_slice(&data[..20]);
        h[10] = 0;
        h[11] = 0;
        let c = checksum::fold(checksum::sum(&h));
        h[10..12].copy_from_slice(&c.to_be_bytes());
        assert!(checksum::ipv4_header_ok(&h));
        let old = u16::from_be_bytes([h[8], h[9]]);
        let new = u16::from_be_bytes([data[data.len() - 1], h[9]]);
        h[8] = data[data.len() - 1];
        h[10..12].copy_from_slice(&checksum::update16(c, old, new).to_be_bytes());
        assert!(checksum::ipv4_header_ok(&h));
    }
}

/// IGMP and MLD: the input is an IP packet (IPv4 or IPv6 by its first nibble). Classifying and
/// parsing must not panic; a report that parses builds into a frame that parses back to the
/// same records (queries' response codes are lossy, so only reports are compared).
pub fn mcast(data: &[u8]) {
    use crate::mcast::{self, Message};
    // PIM: checked (checksum, version, a Hello's options) without a panic.
    if let Ok(p) = mcast::parse_pim_ip(data) {
        assert!(p.kind != mcast::PIM_HELLO || p.hello_holdtime_s.is_some());
    }
    let parsed = match data.first().map(|b| b >> 4) {
        Some(4) => {
            let _ = mcast::classify_v4(data);
            mcast::parse_v4(data).map(|(m, s)| (m, std::net::IpAddr::V4(s)))
        }
        Some(6) => {
            let _ = mcast::classify_v6(data);
            mcast::parse_v6(data).map(|(m, s)| (m, std::net::IpAddr::V6(s)))
        }
        _ => return,
    };
    let Ok((msg, src)) = parsed else {
        return;
    };
    if let Message::Report { version, records } = &msg {
        // v1/v2 reports and leaves are one record; v3/MLDv2 reports any number.
        let v = if records.len() == 1 && *version < 3 {
            *version
        } else {
            3
        };
        let v = if src.is_ipv6() && v == 3 { 2 } else { v };
        let again = Message::Report {
            version: v,
            records: records.clone(),
        };
        if let Ok(f) = mcast::build([2, 0, 0, 0, 0, 1], src, &again) {
            let back = match src {
                std::net::IpAddr::V4(_) => mcast::parse_v4(&f[14..]).map(|x| x.0),
                std::net::IpAddr::V6(_) => mcast::parse_v6(&f[14..]).map(|x| x.0),
            };
            match back {
                Ok(Message::Report { records: r, .. }) => assert_eq!(&r, records),
                other => panic!("a built report reads back as {other:?}"),
            }
        }
    }
}

/// LDP: a PDU read whole (header, messages, TLVs, FEC elements). Whatever decodes, written
/// again by the builder, reads back the same messages; an error names a status code.
pub fn ldp(data: &[u8]) {
    use crate::ldp;
    // The stream reader: a PDU it accepts lies within the bytes given.
    if let Ok(Some((h, body))) = ldp::parse_pdu(data, 65_535) {
        assert!(h.len >= ldp::HEADER_LEN && h.len <= data.len());
        assert_eq!(body.len(), h.len - ldp::HEADER_LEN);
    }
    match ldp::decode_pdu(data) {
        Ok((h, msgs)) => {
            let mut b = ldp::PduBuilder::new(h.lsr_id, h.label_space);
            for (i, m) in msgs.iter().enumerate() {
                ldp::encode(&mut b, i as u32, m);
            }
            let again = ldp::decode_pdu(&b.finish()).expect("what the builder writes reads");
            let kept: Vec<_> = msgs
                .into_iter()
                .filter(|m| !matches!(m, ldp::Msg::Ignored(_)))
                .collect();
            assert_eq!(again.1, kept);
        }
        Err(e) => assert!(e.code != ldp::status::SUCCESS),
    }
}

/// GTPv1: the header, the IE walk and the IE decoders over a UDP payload. The header's lengths
/// must nest; an IE walk ends (at an error or the payload's end) within one step per 2 bytes;
/// whatever decodes encodes back to its bytes, and the IEs, rebuilt by `MsgBuilder`, read back
/// the same.
pub fn gtp(data: &[u8]) {
    use crate::gtp::{self, ie, msg, Ie, MsgBuilder};
    assert_eq!(gtp::version_of(data), data.first().map(|b| b >> 5));
    let Ok(h) = gtp::parse_header(data) else {
        return;
    };
    let end = h.end();
    assert!(h.header_len <= end && end <= data.len());
    let long = h.seq.is_some() || h.npdu.is_some() || !h.ext.is_empty();
    assert!(h.header_len >= if long { 12 } else { 8 });
    assert!(h.ext.len() <= gtp::MAX_EXT_HEADERS && !h.ext.contains(&0));
    assert_eq!(h.header_len == 8, data[0] & 0x07 == 0);
    let payload = h.payload(data);
    assert_eq!(payload.len(), end - h.header_len);

    if h.msg_type == msg::G_PDU {
        // The fast path's encapsulation of this T-PDU reads back as a plain G-PDU.
        let mut out = vec![0u8; 8];
        gtp::gpdu_header(&mut out, h.teid, payload.len() as u16);
        out.extend_from_slice(payload);
        let g = gtp::parse_header(&out).expect("a built G-PDU parses");
        assert_eq!(
            (g.msg_type, g.teid, g.seq, g.npdu),
            (msg::G_PDU, h.teid, None, None)
        );
        assert_eq!((g.header_len, g.payload(&out)), (8, payload));
    }

    // Every payload is walked as IEs, a T-PDU too: more inputs reach the decoders.
    let mut walk = gtp::ies(payload);
    let mut got: Vec<Ie> = Vec::new();
    let mut clean = true;
    for step in 0..=payload.len() / 2 {
        match walk.next() {
            None => break,
            Some(Ok(i)) => got.push(i),
            Some(Err(_)) => {
                clean = false;
                assert_eq!(walk.next(), None, "the walk goes on after an error");
                break;
            }
        }
        assert!(step < payload.len() / 2, "the IE walk does not end");
    }
    let mut used = 0;
    for i in &got {
        // The value is a slice of the payload, where the IE's type and length say.
        match gtp::tv_len(i.ty) {
            Some(n) => assert_eq!(i.value.len(), n),
            None => assert!(i.ty >= 128),
        }
        used += 1
            + i.value.len()
            + match i.ty {
                0..=127 => 0,
                ie::EXT_HEADER_TYPE_LIST => 1,
                _ => 2,
            };
        ie_decoders(i);
    }
    assert!(used <= payload.len());
    assert_eq!(used == payload.len(), clean);

    // The IEs rebuilt (sorted by type, as the builder wants them) read back as the same list;
    // when they came sorted, the rebuilt payload is the received one byte for byte.
    if !clean || payload.len() + 4 > usize::from(u16::MAX) {
        return;
    }
    let mut sorted = got.clone();
    sorted.sort_by_key(|i| i.ty);
    let mut b = MsgBuilder::new(h.msg_type, h.teid, h.seq.unwrap_or(0));
    for i in &sorted {
        if i.ty < 128 {
            b.tv(i.ty, i.value);
        } else {
            b.tlv(i.ty, i.value);
        }
    }
    let m = b.finish();
    let back = gtp::parse_header(&m).expect("a built message parses");
    assert_eq!(
        (back.msg_type, back.teid, back.seq),
        (h.msg_type, h.teid, h.seq.or(Some(0)))
    );
    assert_eq!(back.header_len, 12);
    let again: Vec<Ie> = gtp::ies(back.payload(&m))
        .map(|r| r.expect("built IEs parse"))
        .collect();
    assert_eq!(again, sorted);
    if sorted == got {
        assert_eq!(back.payload(&m), payload);
    }
}

/// Decodes one IE with the decoder for its type, checking that what decodes encodes back.
fn ie_decoders(i: &crate::gtp::Ie) {
    use crate::gtp::{self, ie};
    match i.ty {
        ie::IMSI => {
            if let Some(d) = gtp::imsi_digits(i.value) {
                assert!((1..=15).contains(&d.len()));
                assert_eq!(gtp::imsi_encode(&d).as_ref().map(|a| &a[..]), Some(i.value));
            }
        }
        ie::APN => {
            if let Some(name) = gtp::apn_decode(i.value) {
                assert_eq!(gtp::apn_encode(&name), i.value);
            }
        }
        ie::END_USER_ADDRESS => {
            if let Some(eua) = gtp::end_user_address(i.value) {
                let bytes = eua.encode();
                assert_eq!(gtp::end_user_address(&bytes), Some(eua));
                // Exact unless the sender left the spare nibble clear or, for a type this
                // module does not know, sent bytes after the number.
                if i.value[0] >> 4 == 0xF && i.value.len() == bytes.len() {
                    assert_eq!(bytes, i.value);
                }
            }
        }
        ie::GSN_ADDRESS => {
            if let Some(a) = gtp::gsn_address(i.value) {
                let octets = match a {
                    std::net::IpAddr::V4(a) => a.octets().to_vec(),
                    std::net::IpAddr::V6(a) => a.octets().to_vec(),
                };
                assert_eq!(octets, i.value);
            } else {
                assert!(i.value.len() != 4 && i.value.len() != 16);
            }
        }
        ie::EXT_HEADER_TYPE_LIST => assert!(i.value.len() <= 255),
        _ => {}
    }
}

/// LLC (802.2) frames and the SSP (RFC 1795) messages of DLSw: whatever parses is written back
/// to the same fields (an LLC frame's control and information, an SSP message's header and
/// data); an SSP stream is cut into messages exactly as its lengths say; a capabilities request
/// that is accepted carries every required vector and writes back to an equal request. The
/// first byte picks the parser: even, LLC; odd, SSP.
pub fn llc_dlsw(data: &[u8]) {
    use crate::{dlsw, llc2};
    let Some((&which, data)) = data.split_first() else {
        return;
    };
    if which & 1 == 0 {
        let Ok(f) = llc2::parse(data) else {
            return;
        };
        let out = llc2::frame(&f);
        let g = llc2::parse(&out).expect("a written frame parses");
        assert_eq!(
            (g.control, g.response, g.info),
            (f.control, f.response, f.info)
        );
        assert_eq!(
            (g.dsap, g.ssap, g.dst, g.src),
            (f.dsap, f.ssap, f.dst, f.src)
        );
        assert!(f.info.len() <= 1500);
        let _ = llc2::parse_xid0(f.info);
        return;
    }
    let mut at = 0;
    while at < data.len() {
        let n = match dlsw::message_len(&data[at..]) {
            None | Some(Err(_)) => return,
            Some(Ok(n)) => n,
        };
        assert!(n >= dlsw::INFO_HEADER);
        if data.len() - at < n {
            return;
        }
        let m = &data[at..at + n];
        at += n;
        let Ok(msg) = dlsw::parse(m) else {
            continue;
        };
        assert_eq!(msg.data.len(), n - m[1] as usize);
        let mut out = Vec::new();
        match msg.circuit {
            Some(c) => dlsw::write_control(&mut out, msg.msg_type, msg.flow, &c, msg.data),
            None => dlsw::write_info(
                &mut out,
                msg.msg_type,
                msg.flow,
                msg.remote_dlc,
                msg.remote_port,
                msg.data,
            ),
        }
        let back = dlsw::parse(&out).expect("a written message parses");
        assert_eq!(
            (back.msg_type, back.flow, back.circuit, back.data),
            (msg.msg_type, msg.flow, msg.circuit, msg.data)
        );
        if msg.msg_type == dlsw::msg::CAP_EXCHANGE {
            if let Ok(dlsw::CapEx::Request(c)) = dlsw::parse_capex(msg.data) {
                let mut w = Vec::new();
                dlsw::write_capex_request(&mut w, &c);
                let again = dlsw::parse(&w).expect("a written request parses");
                let c2 = dlsw::parse_capex(again.data);
                // A version string is carried as text: bytes that are not UTF-8 come back
                // replaced, so compare all but it.
                let Ok(dlsw::CapEx::Request(c2)) = c2 else {
                    panic!("a written request is accepted: {c2:?}");
                };
                assert_eq!(
                    (
                        c2.vendor,
                        c2.version,
                        c2.pacing_window,
                        c2.saps,
                        c2.tcp_connections
                    ),
                    (
                        c.vendor,
                        c.version,
                        c.pacing_window,
                        c.saps,
                        c.tcp_connections
                    )
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// Every kept input of the targets whose bodies live here (the random and truncated inputs
    /// are `robustness`'s).
    #[test]
    fn saved_inputs() {
        for (target, f) in [
            ("wire", super::wire as fn(&[u8])),
            ("pcap", super::pcap),
            ("filter", super::filter),
            ("mcast", super::mcast),
            ("gtp", super::gtp),
            ("ldp", super::ldp),
            ("llc_dlsw", super::llc_dlsw),
        ] {
            for (name, data) in crate::fuzz_inputs::saved(target) {
                eprintln!("{name}");
                f(&data);
            }
        }
    }
}
