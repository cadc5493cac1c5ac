//! No input makes a parser panic, and whatever a checked view accepts reads consistently.
//!
//! Runs the same entry points as the cargo-fuzz targets (`crate::fuzzing`) over seeded
//! pseudo-random inputs, shaped so that many get past the first length and version checks, and
//! over every truncation of the golden packets of each format.

use crate::fuzzing;
use crate::{ethernet, icmpv4, icmpv6, ipv4, ipv6, pcap, tcp, udp, vlan, Error};

/// xorshift64: small, seeded, reproducible; a failure names the case to replay.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

const CASES: usize = 20_000;

/// Random bytes, some of them dressed up as a plausible header so the deeper checks run too.
fn shaped_input(rng: &mut XorShift) -> Vec<u8> {
    let len = match rng.below(4) {
        0 => rng.below(24),
        1 => rng.below(80),
        _ => rng.below(700),
    } as usize;
    let mut d = rng.bytes(len);
    let fit = |d: &[u8], start: usize| (d.len().saturating_sub(start)) as u16;
    match rng.below(8) {
        // IPv4 with a total length that usually fits.
        0 | 1 if d.len() >= 20 => {
            d[0] = 0x45 + (rng.below(3) as u8);
            let total = if rng.below(4) == 0 {
                rng.next() as u16
            } else {
                fit(&d, 0)
            };
            d[2..4].copy_from_slice(&total.to_be_bytes());
            d[9] = [1, 6, 17, 2, 47][rng.below(5) as usize];
            if rng.below(2) == 0 {
                d[10] = 0;
                d[11] = 0;
                let hlen = usize::from(d[0] & 0x0F) * 4;
                let c = crate::checksum::fold(crate::checksum::sum(&d[..hlen.min(d.len())]));
                d[10..12].copy_from_slice(&c.to_be_bytes());
            }
        }
        // IPv6 with a chain of extension headers.
        2 | 3 if d.len() >= 40 => {
            d[0] = 0x60 | (d[0] & 0x0F);
            let plen = if rng.below(4) == 0 {
                rng.next() as u16
            } else {
                fit(&d, 40)
            };
            d[4..6].copy_from_slice(&plen.to_be_bytes());
            let nh = [0, 43, 44, 51, 60, 6, 17, 58, 59];
            d[6] = nh[rng.below(nh.len() as u64) as usize];
            let mut off = 40;
            while off + 8 <= d.len() && rng.below(4) != 0 {
                d[off] = nh[rng.below(nh.len() as u64) as usize];
                d[off + 1] = rng.below(3) as u8;
                off += 8 * (usize::from(d[off + 1]) + 1);
            }
        }
        // Ethernet, maybe tagged, over IPv4 or IPv6.
        4 if d.len() >= 18 => {
            let types: [u16; 5] = [0x0800, 0x86dd, 0x8100, 0x88a8, 0x0806];
            let t = types[rng.below(5) as usize];
            d[12..14].copy_from_slice(&t.to_be_bytes());
            let t2 = types[rng.below(2) as usize];
            d[16..18].copy_from_slice(&t2.to_be_bytes());
            let at = if t == 0x8100 || t == 0x88a8 { 18 } else { 14 };
            if d.len() > at {
                d[at] = if t2 == 0x0800 || t == 0x0800 {
                    0x45
                } else {
                    0x60
                };
            }
        }
        // ICMP echo requests with a right checksum, for the in-place reply.
        5 if d.len() >= 8 => {
            d[0] = if rng.below(2) == 0 {
                icmpv4::ECHO_REQUEST
            } else {
                icmpv6::ECHO_REQUEST
            };
            let mut p = icmpv4::Packet::new_unchecked(&mut d[..]);
            p.fill_checksum();
        }
        _ => {}
    }
    d
}

#[test]
fn random_inputs_never_panic() {
    let mut rng = XorShift(0x0005_EED0_F11E_4A7E);
    // How many inputs got deep enough to test something, so the shaping cannot rot unnoticed.
    let (mut v4, mut v4_ok, mut v6_walked, mut v6_later_frag, mut echo, mut frames) =
        (0, 0, 0, 0, 0, 0);
    for case in 0..CASES {
        let d = shaped_input(&mut rng);
        let r = std::panic::catch_unwind(|| fuzzing::wire(&d));
        assert!(r.is_ok(), "case {case}: input {d:02x?}");

        if let Ok(p) = ipv4::Packet::new_checked(&d[..]) {
            v4 += 1;
            v4_ok += usize::from(p.verify_checksum());
        }
        if let Some((_, _, later)) = ipv6::Packet::new_checked(&d[..])
            .ok()
            .and_then(|p| p.transport())
        {
            v6_walked += 1;
            v6_later_frag += usize::from(later);
        }
        echo += usize::from(icmpv4::echo_reply_in_place(&mut d.clone()));
        frames += usize::from(
            ethernet::Frame::new_checked(&d[..])
                .is_ok_and(|f| f.ethertype() != ethernet::EtherType::Unknown(f.ethertype_raw())),
        );
    }
    let tally = [v4, v4_ok, v6_walked, v6_later_frag, echo, frames];
    assert!(
        tally.iter().all(|n| *n >= 20),
        "too few deep cases: {tally:?}"
    );
}

#[test]
fn random_pcap_files_never_panic() {
    let mut rng = XorShift(0x0BAD_CAFE_D00D);
    let header = &pcap::tests::GOLDEN_LE_NANOS[..24];
    for case in 0..CASES {
        let mut d = shaped_input(&mut rng);
        match rng.below(3) {
            0 => {}
            1 => d.splice(0..0, header.iter().copied()).for_each(drop),
            _ => {
                // A valid header and valid-looking record headers with random lengths.
                let mut f = header.to_vec();
                while f.len() < 2000 && rng.below(6) != 0 {
                    let caplen = rng.below(40) as u32;
                    f.extend_from_slice(&(rng.next() as u32).to_le_bytes());
                    f.extend_from_slice(&(rng.next() as u32).to_le_bytes());
                    f.extend_from_slice(&caplen.to_le_bytes());
                    f.extend_from_slice(&(rng.next() as u32).to_le_bytes());
                    let n = rng.below(45) as usize;
                    f.extend(rng.bytes(n));
                }
                d = f;
            }
        }
        let r = std::panic::catch_unwind(|| fuzzing::pcap(&d));
        assert!(r.is_ok(), "case {case}: input {d:02x?}");
    }
}

/// Checks, for every prefix of `golden`, that the checked view accepts it exactly when it is at
/// least `min_len` long and then reads the same fields as over the whole packet.
fn truncations<V: PartialEq + core::fmt::Debug>(
    name: &str,
    golden: &[u8],
    min_len: usize,
    read: impl Fn(&[u8]) -> Result<V, Error>,
) {
    let full = read(golden).unwrap_or_else(|e| panic!("{name}: golden rejected: {e}"));
    for len in 0..=golden.len() {
        let prefix = &golden[..len];
        fuzzing::wire(prefix);
        match read(prefix) {
            Ok(v) => {
                assert!(len >= min_len, "{name}: accepted {len} < {min_len} bytes");
                assert_eq!(v, full, "{name}: fields differ at length {len}");
            }
            Err(e) => {
                assert!(len < min_len, "{name}: rejected {len} bytes: {e}");
                assert_eq!(e, Error::Truncated, "{name} at length {len}");
            }
        }
    }
}

#[test]
fn golden_truncations() {
    truncations(
        "ethernet",
        &ethernet::tests::GOLDEN,
        ethernet::HEADER_LEN,
        |b| {
            let f = ethernet::Frame::new_checked(b)?;
            Ok((ethernet::Repr::parse(&f), f.payload().len() <= 2))
        },
    );
    truncations("vlan", &vlan::tests::GOLDEN, vlan::HEADER_LEN, |b| {
        Ok(vlan::Repr::parse(&vlan::Tag::new_checked(b)?))
    });
    truncations("ipv4", &ipv4::tests::GOLDEN, 28, |b| {
        let p = ipv4::Packet::new_checked(b)?;
        Ok((
            ipv4::Repr::parse(&p)?,
            p.options().to_vec(),
            p.payload().to_vec(),
            (p.ecn(), p.more_frags(), p.frag_offset(), p.checksum()),
        ))
    });
    truncations("ipv6", &ipv6::tests::GOLDEN, 51, |b| {
        let p = ipv6::Packet::new_checked(b)?;
        Ok((ipv6::Repr::parse(&p), p.payload().to_vec(), p.transport()))
    });
    truncations("udp", &udp::tests::GOLDEN, 13, |b| {
        let p = udp::Packet::new_checked(b)?;
        let ok = p.verify_checksum_v4(udp::tests::SRC, udp::tests::DST);
        Ok((udp::Repr::parse(&p), p.checksum(), p.payload().to_vec(), ok))
    });
    truncations("tcp", &tcp::tests::GOLDEN, 24, |b| {
        let p = tcp::Packet::new_checked(b)?;
        Ok((
            (p.src_port(), p.dst_port(), p.seq(), p.ack(), p.flags()),
            (p.window(), p.checksum(), p.urgent()),
            p.options().to_vec(),
        ))
    });
    truncations("icmpv4", &icmpv4::tests::ECHO, 8, |b| {
        let p = icmpv4::Packet::new_checked(b)?;
        Ok((p.msg_type(), p.code(), p.checksum(), p.rest()))
    });
    truncations("icmpv6", &icmpv6::tests::ECHO, 8, |b| {
        let p = icmpv6::Packet::new_checked(b)?;
        Ok((p.msg_type(), p.code(), p.checksum(), p.rest()))
    });
    // The quoted packets of ICMP errors are themselves golden packets cut short: the builders
    // must take any prefix.
    for len in 0..=icmpv4::tests::UDP4.len() {
        fuzzing::wire(&icmpv4::tests::UDP4[..len]);
    }
}

#[test]
fn whole_frames_and_their_truncations() {
    // Ethernet / 802.1Q / IPv4 / UDP and Ethernet / IPv6 / UDP, as the input node sees them.
    let mut v4 = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x81, 0x00];
    v4.extend_from_slice(&[0x00, 0x0a, 0x08, 0x00]);
    v4.extend_from_slice(&icmpv4::tests::UDP4);
    let mut v6 = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x86, 0xdd];
    v6.extend_from_slice(&ipv6::tests::GOLDEN);
    for frame in [&v4, &v6] {
        for len in 0..=frame.len() {
            fuzzing::wire(&frame[..len]);
        }
    }
    let f = ethernet::Frame::new_checked(&v4[..]).unwrap();
    assert_eq!(f.ethertype(), ethernet::EtherType::Vlan);
    let t = vlan::Tag::new_checked(f.payload()).unwrap();
    assert_eq!(
        (t.vid(), t.inner_ethertype()),
        (10, ethernet::EtherType::Ipv4)
    );
    let ip = ipv4::Packet::new_checked(t.payload()).unwrap();
    let u = udp::Packet::new_checked(ip.payload()).unwrap();
    assert!(u.verify_checksum_v4(ip.src_addr(), ip.dst_addr()));
    assert_eq!(u.payload(), b"hello");
}

#[test]
fn pcap_truncations() {
    for golden in [
        &pcap::tests::GOLDEN_LE_NANOS[..],
        &pcap::tests::GOLDEN_BE_MICROS[..],
    ] {
        for len in 0..=golden.len() {
            let prefix = &golden[..len];
            fuzzing::pcap(prefix);
            match pcap::Reader::new(prefix) {
                Err(pcap::Error::Malformed(_)) => assert!(len < 24),
                Err(e) => panic!("length {len}: {e}"),
                Ok(mut r) => {
                    assert!(len >= 24);
                    let mut buf = Vec::new();
                    let got = r.next_into(&mut buf);
                    match len {
                        24 => assert!(matches!(got, Ok(None))),
                        l if l == golden.len() => assert!(matches!(got, Ok(Some(_)))),
                        _ => assert!(matches!(got, Err(pcap::Error::Malformed(_)))),
                    }
                }
            }
        }
    }
}

#[test]
fn random_pcapng_files_never_panic() {
    let mut rng = XorShift(0x5EC7_10B5_0001);
    let section = &crate::pcapng::tests::GOLDEN_WRITTEN[..84];
    for case in 0..CASES / 4 {
        // A valid section header and interface, then blocks of known and unknown types with
        // plausible, sometimes lying, lengths; half of them big-endian from the start.
        let mut f = section.to_vec();
        while f.len() < 2000 && rng.below(6) != 0 {
            let kind = [1u32, 2, 3, 6, 0x0A0D_0D0A, 5, 0xBAD][rng.below(7) as usize];
            let body = rng.below(48) as u32 * 4;
            let total = match rng.below(8) {
                0 => rng.next() as u32,
                _ => body + 12,
            };
            f.extend_from_slice(&kind.to_le_bytes());
            f.extend_from_slice(&total.to_le_bytes());
            let mut b = rng.bytes(body as usize);
            if kind == 0x0A0D_0D0A && b.len() >= 4 && rng.below(2) == 0 {
                b[..4].copy_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
            }
            if kind == 6 && b.len() >= 20 {
                b[..4].copy_from_slice(&(rng.below(3) as u32).to_le_bytes());
                b[12..16].copy_from_slice(&(rng.below(body.max(1) as u64) as u32).to_le_bytes());
            }
            f.extend(b);
            f.extend_from_slice(&total.to_le_bytes());
        }
        let r = std::panic::catch_unwind(|| fuzzing::pcap(&f));
        assert!(r.is_ok(), "case {case}: input {f:02x?}");
    }
}

#[test]
fn pcapng_truncations_and_flips() {
    use crate::pcapng::tests::{GOLDEN_TWO_SECTIONS, GOLDEN_WRITTEN};
    for golden in [&GOLDEN_WRITTEN[..], &GOLDEN_TWO_SECTIONS[..]] {
        let whole = packets(golden).expect("golden reads");
        for len in 0..golden.len() {
            fuzzing::pcap(&golden[..len]);
            // A cut file reads as an error, never as a clean end with fewer packets, unless it
            // is cut exactly between two blocks.
            if let Ok(n) = packets(&golden[..len]) {
                assert!(n <= whole, "length {len}");
            }
        }
        for at in 0..golden.len() {
            let mut f = golden.to_vec();
            f[at] ^= 0xA5;
            fuzzing::pcap(&f);
        }
    }
}

/// Packets in a pcapng file read to its end; the error if it has one.
fn packets(f: &[u8]) -> Result<usize, pcap::Error> {
    let mut r = crate::pcapng::Reader::new(f)?;
    let mut n = 0;
    while r.next_into(&mut Vec::new())?.is_some() {
        n += 1;
    }
    Ok(n)
}

/// GTPv1 messages: random ones shaped to get past the header (version 1, a length that usually
/// fits, a chain of extension headers, IEs of known types), and every truncation and byte flip of
/// the golden messages.
#[test]
fn gtp_messages_never_panic() {
    use crate::gtp;
    let mut rng = XorShift(0x0067_7470_0001);
    let types = [
        1u8, 2, 3, 14, 16, 17, 20, 22, 127, 128, 131, 133, 141, 255, 6, 200,
    ];
    let (mut parsed, mut walked) = (0, 0);
    for case in 0..CASES {
        let mut d = vec![0x30 | (rng.below(8) as u8), rng.next() as u8, 0, 0];
        d.extend(rng.bytes(8));
        if rng.below(2) == 0 {
            // Extension headers of 1 or 2 units, maybe a lying one.
            d[0] |= 0x04;
            d[11] = 0x85;
            for _ in 0..rng.below(6) {
                let units = rng.below(3) as u8;
                d.push(units);
                d.extend(rng.bytes((usize::from(units) * 4).saturating_sub(2)));
                d.push([0, 0x40, 0x85, 0xc0][rng.below(4) as usize]);
            }
        }
        while d.len() < 200 && rng.below(8) != 0 {
            let ty = types[rng.below(types.len() as u64) as usize];
            d.push(ty);
            let n = match gtp::tv_len(ty) {
                Some(n) if rng.below(8) != 0 => n,
                _ => rng.below(24) as usize,
            };
            if ty == gtp::ie::EXT_HEADER_TYPE_LIST {
                d.push(n as u8);
            } else if ty >= 128 {
                d.extend_from_slice(&(n as u16).to_be_bytes());
            }
            d.extend(rng.bytes(n));
        }
        let len = if rng.below(8) == 0 {
            rng.next() as u16
        } else {
            (d.len() - 8) as u16
        };
        d[2..4].copy_from_slice(&len.to_be_bytes());
        let r = std::panic::catch_unwind(|| fuzzing::gtp(&d));
        assert!(r.is_ok(), "case {case}: input {d:02x?}");
        if let Ok(h) = gtp::parse_header(&d) {
            parsed += 1;
            walked += usize::from(gtp::ies(h.payload(&d)).all(|r| r.is_ok()));
        }
    }
    assert!(
        parsed >= CASES / 4 && walked >= 100,
        "{parsed} parsed, {walked} walked"
    );

    for golden in [&gtp::tests::CREATE_REQUEST[..], &gtp::tests::GPDU_EXT[..]] {
        for len in 0..=golden.len() {
            fuzzing::gtp(&golden[..len]);
        }
        for at in 0..golden.len() {
            for bit in 0..8 {
                let mut f = golden.to_vec();
                f[at] ^= 1 << bit;
                fuzzing::gtp(&f);
            }
        }
    }
}
