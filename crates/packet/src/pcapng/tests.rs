//! Golden bytes for the pcapng reader and writer; tshark and capinfos read these files as the
//! comments say.

use super::writer::option_str;
use super::*;

/// What `Writer` produces for: application "linerate"; interface "p0", Ethernet, snaplen 65535;
/// one packet at 1.000000002 s keeping 4 of 60 bytes, inbound.
pub(crate) const GOLDEN_WRITTEN: [u8; 132] = [
    // Section Header Block: length 44, byte-order magic, version 1.0, section length -1,
    // shb_userappl "linerate", end of options.
    0x0a, 0x0d, 0x0d, 0x0a, 0x2c, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a, 0x01, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x04, 0x00, 0x08, 0x00, b'l', b'i', b'n', b'e',
    b'r', b'a', b't', b'e', 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00,
    // Interface Description Block: length 40, Ethernet, snaplen 65535, if_name "p0",
    // if_tsresol 9, end of options.
    0x01, 0x00, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00,
    0x02, 0x00, 0x02, 0x00, b'p', b'0', 0x00, 0x00, 0x09, 0x00, 0x01, 0x00, 0x09, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00,
    // Enhanced Packet Block: length 48, interface 0, timestamp 0:1000000002, caplen 4,
    // original length 60, the bytes, epb_flags inbound, end of options.
    0x06, 0x00, 0x00, 0x00, 0x30, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x02, 0xca, 0x9a, 0x3b, 0x04, 0x00, 0x00, 0x00, 0x3c, 0x00, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef,
    0x02, 0x00, 0x04, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x30, 0x00, 0x00, 0x00,
];

/// Two sections, as `cat` of two files makes. The first is big-endian: an interface with
/// millisecond timestamps and snaplen 96, a block of an unknown type, and a packet at 1.5 s of
/// which 3 of 60 bytes were kept, outbound. The second is little-endian: an Ethernet interface
/// with 2^-20 s timestamps, a 4-byte FCS and a 10 s offset; a raw-IP interface with the default
/// microseconds; a Simple Packet Block "hello"; a packet on the raw-IP interface at 1.000001 s;
/// one on the first at 3 s (13 s with the offset) after 7 lost.
pub(crate) const GOLDEN_TWO_SECTIONS: [u8; 336] = [
    // SHB, big-endian, length 28, version 1.0, section length -1.
    0x0a, 0x0d, 0x0d, 0x0a, 0x00, 0x00, 0x00, 0x1c, 0x1a, 0x2b, 0x3c, 0x4d, 0x00, 0x01, 0x00, 0x00,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x1c,
    // IDB, length 32: Ethernet, snaplen 96, if_tsresol 3 (ms).
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x20, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x60,
    0x00, 0x09, 0x00, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20,
    // A block of type 0xbad, length 16.
    0x00, 0x00, 0x0b, 0xad, 0x00, 0x00, 0x00, 0x10, 0x12, 0x34, 0x56, 0x78, 0x00, 0x00, 0x00, 0x10,
    // EPB, length 48: interface 0, timestamp 1500 ms, 3 of 60 bytes, epb_flags outbound.
    0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x30, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x05, 0xdc, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x3c, 0x45, 0x00, 0x00, 0x00,
    0x00, 0x02, 0x00, 0x04, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x30,
    // SHB, little-endian, length 28.
    0x0a, 0x0d, 0x0d, 0x0a, 0x1c, 0x00, 0x00, 0x00, 0x4d, 0x3c, 0x2b, 0x1a, 0x01, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1c, 0x00, 0x00, 0x00,
    // IDB, length 52: Ethernet, snaplen 0, if_tsresol 0x94 (2^-20 s), if_fcslen 4,
    // if_tsoffset 10 s.
    0x01, 0x00, 0x00, 0x00, 0x34, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x09, 0x00, 0x01, 0x00, 0x94, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x01, 0x00, 0x04, 0x00, 0x00, 0x00,
    0x0e, 0x00, 0x08, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x34, 0x00, 0x00, 0x00, // IDB, length 20: raw IP (101), snaplen 65535, no options.
    0x01, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x65, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00,
    0x14, 0x00, 0x00, 0x00, // SPB, length 24: original length 5, "hello".
    0x03, 0x00, 0x00, 0x00, 0x18, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, b'h', b'e', b'l', b'l',
    b'o', 0x00, 0x00, 0x00, 0x18, 0x00, 0x00, 0x00,
    // EPB, length 36: interface 1, timestamp 1000001 us, 2 of 2 bytes, no options.
    0x06, 0x00, 0x00, 0x00, 0x24, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x41, 0x42, 0x0f, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0xaa, 0xbb, 0x00, 0x00,
    0x24, 0x00, 0x00, 0x00,
    // EPB, length 52: interface 0, timestamp 3 << 20, 4 of 64 bytes, epb_dropcount 7.
    0x06, 0x00, 0x00, 0x00, 0x34, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x30, 0x00, 0x04, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04,
    0x04, 0x00, 0x08, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x34, 0x00, 0x00, 0x00,
];

fn packet(interface: u32, ts_nanos: u64, caplen: u32, orig_len: u32) -> Packet {
    Packet {
        interface,
        ts_nanos,
        caplen,
        orig_len,
        flags: None,
        dropcount: None,
    }
}

#[test]
fn writer_golden() {
    let mut w = Writer::new(Vec::new(), "linerate").unwrap();
    let id = w
        .add_interface(&InterfaceDesc {
            linktype: 1,
            snaplen: 65535,
            name: Some("p0"),
            description: None,
        })
        .unwrap();
    assert_eq!(id, 0);
    w.write_packet(&PacketOut {
        interface: id,
        ts_nanos: 1_000_000_002,
        data: &[0xde, 0xad, 0xbe, 0xef],
        orig_len: 60,
        flags: Some(FLAG_INBOUND),
        dropcount: None,
        comment: None,
    })
    .unwrap();
    w.flush().unwrap();
    assert_eq!(w.into_inner(), GOLDEN_WRITTEN);
}

#[test]
fn reader_golden_written() {
    let mut r = Reader::new(&GOLDEN_WRITTEN[..]).unwrap();
    assert!(!r.is_big_endian());
    let mut buf = vec![9; 100];
    let p = r.next_into(&mut buf).unwrap().unwrap();
    assert_eq!(
        p,
        Packet {
            flags: Some(FLAG_INBOUND),
            ..packet(0, 1_000_000_002, 4, 60)
        }
    );
    assert_eq!(buf, [0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(
        r.interfaces(),
        [Interface {
            linktype: 1,
            snaplen: 65535,
            tsresol: 9,
            tsoffset: 0,
            fcs_len: None
        }]
    );
    assert_eq!(
        r.position(),
        Position {
            record: 1,
            offset: 84
        }
    );
    assert!(r.next_into(&mut buf).unwrap().is_none());
    assert!(r.next_into(&mut buf).unwrap().is_none());
}

#[test]
fn reader_golden_two_sections() {
    let mut r = Reader::new(&GOLDEN_TWO_SECTIONS[..]).unwrap();
    assert!(r.is_big_endian());
    let mut buf = Vec::new();
    let p = r.next_into(&mut buf).unwrap().unwrap();
    assert_eq!(
        p,
        Packet {
            flags: Some(FLAG_OUTBOUND),
            ..packet(0, 1_500_000_000, 3, 60)
        }
    );
    assert_eq!(buf, [0x45, 0, 0]);
    assert_eq!(r.interfaces().len(), 1);
    assert_eq!(
        (r.interfaces()[0].snaplen, r.interfaces()[0].tsresol),
        (96, 3)
    );
    assert_eq!(r.position().offset, 76);

    // The second section: little-endian, its own interfaces.
    let p = r.next_into(&mut buf).unwrap().unwrap();
    assert!(!r.is_big_endian());
    assert_eq!(r.sections(), 2);
    assert_eq!(p, packet(0, 0, 5, 5));
    assert_eq!(buf, b"hello");
    assert_eq!(
        r.interfaces(),
        [
            Interface {
                linktype: 1,
                snaplen: 0,
                tsresol: 0x94,
                tsoffset: 10,
                fcs_len: Some(4)
            },
            Interface {
                linktype: 101,
                snaplen: 65535,
                tsresol: 6,
                tsoffset: 0,
                fcs_len: None
            }
        ]
    );
    let p = r.next_into(&mut buf).unwrap().unwrap();
    assert_eq!(p, packet(1, 1_000_001_000, 2, 2));
    assert_eq!(buf, [0xaa, 0xbb]);
    let p = r.next_into(&mut buf).unwrap().unwrap();
    assert_eq!(
        p,
        Packet {
            dropcount: Some(7),
            ..packet(0, 13_000_000_000, 4, 64)
        }
    );
    assert_eq!(buf, [1, 2, 3, 4]);
    assert_eq!(
        r.position(),
        Position {
            record: 4,
            offset: 284
        }
    );
    assert!(r.next_into(&mut buf).unwrap().is_none());
}

#[test]
fn timestamp_resolutions() {
    let i = |tsresol, tsoffset| Interface {
        linktype: 1,
        snaplen: 0,
        tsresol,
        tsoffset,
        fcs_len: None,
    };
    assert_eq!(i(6, 0).nanos(1), 1_000);
    assert_eq!(i(9, 0).nanos(u64::MAX), u64::MAX);
    assert_eq!(i(0, 0).nanos(u64::MAX), u64::MAX); // saturates
    assert_eq!(i(12, 0).nanos(5_000), 5);
    assert_eq!(i(127, 0).nanos(u64::MAX), 0);
    assert_eq!(i(0x80, 0).nanos(2), 2_000_000_000);
    assert_eq!(i(0x80 | 127, 0).nanos(u64::MAX), 0);
    assert_eq!(i(9, -1).nanos(500), 0); // before 1970: clamped
    assert_eq!(i(9, i64::MAX).nanos(0), u64::MAX);
}

#[test]
fn written_options_round_trip() {
    let mut w = Writer::new(Vec::new(), "x").unwrap();
    for name in ["p0", "p1/ip4-forward"] {
        w.add_interface(&InterfaceDesc {
            linktype: 1,
            snaplen: 8,
            name: Some(name),
            description: Some("a port"),
        })
        .unwrap();
    }
    let frame: Vec<u8> = (0..20).collect();
    w.write_packet(&PacketOut {
        interface: 1,
        ts_nanos: 1 << 40,
        data: &frame,
        orig_len: 0,
        flags: Some(FLAG_OUTBOUND),
        dropcount: Some(3),
        comment: Some("dropped: TTL or hop limit expired"),
    })
    .unwrap();
    let bad = PacketOut {
        interface: 2,
        ts_nanos: 0,
        data: &[],
        orig_len: 0,
        flags: None,
        dropcount: None,
        comment: None,
    };
    assert!(matches!(w.write_packet(&bad), Err(Error::Malformed(_))));
    let bytes = w.into_inner();
    let mut r = Reader::new(&bytes[..]).unwrap();
    let mut buf = Vec::new();
    let p = r.next_into(&mut buf).unwrap().unwrap();
    assert_eq!(
        p,
        Packet {
            flags: Some(FLAG_OUTBOUND),
            dropcount: Some(3),
            ..packet(1, 1 << 40, 8, 20)
        }
    );
    assert_eq!(buf, frame[..8]);
    assert!(r.next_into(&mut buf).unwrap().is_none());
}

#[test]
fn long_option_strings_are_cut_at_a_character() {
    let s = "é".repeat(40_000);
    assert_eq!(option_str(&s).len(), 65_534);
    assert!(std::str::from_utf8(option_str(&s)).is_ok());
}

#[test]
fn obsolete_packet_block() {
    let mut f = GOLDEN_WRITTEN[..84].to_vec();
    // Packet Block, length 36: interface 0, 2 drops, timestamp 5 ns, 2 of 2 bytes.
    f.extend_from_slice(&[
        0x02, 0x00, 0x00, 0x00, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x05, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x11, 0x22,
        0x00, 0x00, 0x24, 0x00, 0x00, 0x00,
    ]);
    let mut r = Reader::new(&f[..]).unwrap();
    let mut buf = Vec::new();
    let p = r.next_into(&mut buf).unwrap().unwrap();
    assert_eq!(
        p,
        Packet {
            dropcount: Some(2),
            ..packet(0, 5, 2, 2)
        }
    );
    assert_eq!(buf, [0x11, 0x22]);
}

fn first_error(f: &[u8]) -> (&'static str, Position) {
    let mut r = match Reader::new(f) {
        Ok(r) => r,
        Err(Error::Malformed(m)) => return (m, Position::default()),
        Err(e) => panic!("{e}"),
    };
    let mut buf = Vec::new();
    loop {
        match r.next_into(&mut buf) {
            Ok(Some(_)) => {}
            Ok(None) => panic!("read to the end"),
            Err(Error::Malformed(m)) => return (m, r.position()),
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn damaged_files_name_the_spot() {
    let g = &GOLDEN_WRITTEN;
    assert!(matches!(Reader::new(&g[..3]), Err(Error::Malformed(_))));
    assert!(matches!(
        Reader::new(&crate::pcap::tests::GOLDEN_LE_NANOS[..]),
        Err(Error::BadMagic)
    ));
    let cut = |n: usize| first_error(&g[..n]);
    assert_eq!(cut(20).0, "truncated pcapng block");
    assert_eq!(cut(50), ("truncated pcapng block header", pos(1, 44)));
    assert_eq!(cut(60), ("truncated pcapng block", pos(1, 44)));
    assert_eq!(cut(100), ("truncated pcapng block", pos(1, 84)));
    assert_eq!(cut(130), ("truncated pcapng block", pos(1, 84)));

    let mut f = g.to_vec();
    f[84 + 8] = 1; // the packet names interface 1, never declared
    assert_eq!(
        first_error(&f),
        ("pcapng packet of an undeclared interface", pos(1, 84))
    );
    let mut f = g.to_vec();
    f[84 + 20] = 0xff; // caplen 255 runs past the block
    assert_eq!(
        first_error(&f),
        ("pcapng packet data runs past its block", pos(1, 84))
    );
    let mut f = g.to_vec();
    f[84 + 20..84 + 24].copy_from_slice(&(MAX_CAPLEN + 1).to_le_bytes());
    assert_eq!(first_error(&f).0, "record longer than 262144 bytes");
    let mut f = g.to_vec();
    f[128] = 0x2c; // the trailer differs
    assert_eq!(
        first_error(&f).0,
        "pcapng block's trailing length differs from its header's"
    );
    let mut f = g.to_vec();
    f[84 + 4] = 0x31; // not a multiple of 4
    assert_eq!(
        first_error(&f).0,
        "pcapng block length too short or not a multiple of 4"
    );
    let mut f = g.to_vec();
    f[84 + 4..84 + 8].copy_from_slice(&(MAX_BLOCK + 4).to_le_bytes());
    assert_eq!(first_error(&f).0, "pcapng block longer than 16 MiB");
    let mut f = g.to_vec();
    f[62] = 0x40; // if_name claims 64 bytes
    assert_eq!(
        first_error(&f),
        ("pcapng option runs past its block", pos(1, 44))
    );
    let mut f = g.to_vec();
    f[8] = 0; // byte-order magic
    assert_eq!(first_error(&f).0, "pcapng byte-order magic is wrong");
    let mut f = g.to_vec();
    f[12] = 2; // version 2.0
    assert_eq!(first_error(&f).0, "unsupported pcapng major version");
    // A second section that breaks: the position counts on from the first.
    let mut f = g.to_vec();
    f.extend_from_slice(&g[..20]);
    assert_eq!(first_error(&f), ("truncated pcapng block", pos(2, 132)));
}

fn pos(record: u64, offset: u64) -> Position {
    Position { record, offset }
}

#[test]
fn a_lying_length_allocates_only_what_the_file_holds() {
    let mut f = GOLDEN_WRITTEN[..84].to_vec();
    f.extend_from_slice(&[0x06, 0, 0, 0, 0xfc, 0xff, 0xff, 0x00]); // 16 MiB - 4
    f.extend_from_slice(&[0; 40]);
    let mut r = Reader::new(&f[..]).unwrap();
    assert!(matches!(
        r.next_into(&mut Vec::new()),
        Err(Error::Malformed("truncated pcapng block"))
    ));
    assert!(r.body.capacity() < 1 << 20, "{}", r.body.capacity());
}
