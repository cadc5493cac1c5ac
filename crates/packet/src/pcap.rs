//! Classic libpcap capture files: a 24-byte file header, then records of a 16-byte header and the
//! captured bytes. Both byte orders and both timestamp resolutions are read; files are written
//! little-endian with nanosecond timestamps, which tcpdump, tshark and scapy all read.
//!
//! Capture files come from outside, so the reader trusts no length: a record is refused before
//! anything is allocated for it if it claims more than [`MAX_CAPLEN`] bytes.
//!
//! The link-type field's upper 16 bits may carry extensions (libpcap's `LT_FCS_LENGTH` and
//! friends); as libpcap's `LT_LINKTYPE()` does, only the low 16 bits name the link type. The
//! other format, pcapng, is in [`crate::pcapng`]; [`crate::capture::AnyReader`] reads either.

use std::fmt;
use std::io::{self, Read, Write};

pub const LINKTYPE_ETHERNET: u32 = 1;
pub const LINKTYPE_RAW: u32 = 101;

/// libpcap's `LT_FCS_LENGTH_PRESENT`: bits 28-31 of the link-type field then hold the length of
/// the frame check sequence at the end of every frame, in 16-bit units.
const LT_FCS_LENGTH_PRESENT: u32 = 0x0400_0000;

/// The largest record accepted, as in libpcap (`MAXIMUM_SNAPLEN`).
pub const MAX_CAPLEN: u32 = 262_144;

const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
const FILE_HEADER_LEN: usize = 24;
const RECORD_HEADER_LEN: usize = 16;
const VERSION: (u16, u16) = (2, 4);

#[derive(Debug)]
pub enum Error {
    Io(io::Error),
    /// The file does not start with a pcap magic number (pcapng, for one, does not).
    BadMagic,
    /// The file is cut short or a header holds an impossible value; says which.
    Malformed(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "pcap I/O error: {e}"),
            Error::BadMagic => f.write_str("not a pcap or pcapng file (bad magic number)"),
            Error::Malformed(what) => write!(f, "malformed pcap file: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

/// One record's header; its captured bytes are in the buffer given to [`Reader::next_into`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Nanoseconds since the Unix epoch.
    pub ts_nanos: u64,
    /// Length of the frame on the wire.
    pub orig_len: u32,
    /// Bytes captured, at most `orig_len` in a sane file.
    pub caplen: u32,
}

/// Where a reader is: the number (from 1) of the record it read last or failed on, and the byte
/// offset in the file where that record (for pcapng: its block) starts. Errors name this spot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Position {
    pub record: u64,
    pub offset: u64,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "record {} at byte offset {}", self.record, self.offset)
    }
}

/// Reads until `buf` is full or the input ends; returns how much was read. A short count is how
/// a clean end of file is told apart from a file cut inside a header.
pub(crate) fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

pub struct Reader<R: Read> {
    inner: R,
    big_endian: bool,
    nanos: bool,
    version: (u16, u16),
    snaplen: u32,
    linktype: u32,
    pos: Position,
    /// Bytes consumed so far.
    offset: u64,
}

impl<R: Read> Reader<R> {
    /// Reads the file header. Wrap files in a `BufReader`: records are read in small pieces.
    pub fn new(mut inner: R) -> Result<Self, Error> {
        let mut magic = [0u8; 4];
        if read_full(&mut inner, &mut magic)? < 4 {
            return Err(Error::Malformed("truncated file header"));
        }
        Self::after_magic(magic, inner)
    }

    /// Reads the rest of the file header, the first four bytes having been read already.
    pub(crate) fn after_magic(magic: [u8; 4], mut inner: R) -> Result<Self, Error> {
        let mut h = [0u8; FILE_HEADER_LEN];
        h[..4].copy_from_slice(&magic);
        let n = 4 + read_full(&mut inner, &mut h[4..])?;
        let (big_endian, nanos) = match u32::from_le_bytes(magic) {
            MAGIC_MICROS => (false, false),
            MAGIC_NANOS => (false, true),
            m if m.swap_bytes() == MAGIC_MICROS => (true, false),
            m if m.swap_bytes() == MAGIC_NANOS => (true, true),
            _ => return Err(Error::BadMagic),
        };
        if n < FILE_HEADER_LEN {
            return Err(Error::Malformed("truncated file header"));
        }
        let u16_at = |at: usize| {
            let b = [h[at], h[at + 1]];
            if big_endian {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            }
        };
        let u32_at = |at: usize| {
            let b = [h[at], h[at + 1], h[at + 2], h[at + 3]];
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let version = (u16_at(4), u16_at(6));
        if version.0 != VERSION.0 {
            return Err(Error::Malformed("unsupported major version"));
        }
        Ok(Reader {
            inner,
            big_endian,
            nanos,
            version,
            snaplen: u32_at(16),
            linktype: u32_at(20),
            pos: Position::default(),
            offset: FILE_HEADER_LEN as u64,
        })
    }

    /// The link-layer header type of every record ([`LINKTYPE_ETHERNET`] for Ethernet): the low
    /// 16 bits of the header's field, as libpcap reads it.
    pub fn linktype(&self) -> u32 {
        self.linktype & 0xFFFF
    }

    /// The header's link-type field as stored, extension bits included.
    pub fn linktype_raw(&self) -> u32 {
        self.linktype
    }

    /// Bytes of frame check sequence at the end of every record: 0 unless the link-type field
    /// says so (`LT_FCS_LENGTH_PRESENT` with a length in bits 28-31, in 16-bit units).
    pub fn fcs_len(&self) -> u32 {
        if self.linktype & LT_FCS_LENGTH_PRESENT != 0 {
            (self.linktype >> 28) * 2
        } else {
            0
        }
    }

    /// The record read last (or failed on) and where it starts.
    pub fn position(&self) -> Position {
        self.pos
    }

    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// Whether the file stores nanoseconds (else microseconds). Either way, records report
    /// nanoseconds.
    pub fn is_nanos(&self) -> bool {
        self.nanos
    }

    pub fn version(&self) -> (u16, u16) {
        self.version
    }

    pub fn into_inner(self) -> R {
        self.inner
    }

    fn u32_at(&self, h: &[u8; RECORD_HEADER_LEN], at: usize) -> u32 {
        let b = [h[at], h[at + 1], h[at + 2], h[at + 3]];
        if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }

    /// Reads the next record into `buf` (replacing its contents) and returns its header, or
    /// `None` at a clean end of file. `buf` is reused from call to call so that replaying a
    /// capture allocates only as often as the largest record grows.
    pub fn next_into(&mut self, buf: &mut Vec<u8>) -> Result<Option<Record>, Error> {
        let mut h = [0u8; RECORD_HEADER_LEN];
        let got = read_full(&mut self.inner, &mut h)?;
        if got == 0 {
            return Ok(None);
        }
        self.pos = Position {
            record: self.pos.record + 1,
            offset: self.offset,
        };
        self.offset += got as u64;
        if got < RECORD_HEADER_LEN {
            return Err(Error::Malformed("truncated record header"));
        }
        let secs = u64::from(self.u32_at(&h, 0));
        let frac = u64::from(self.u32_at(&h, 4));
        let caplen = self.u32_at(&h, 8);
        let orig_len = self.u32_at(&h, 12);
        if caplen > MAX_CAPLEN {
            return Err(Error::Malformed("record longer than 262144 bytes"));
        }
        // Cannot overflow: 2^32 seconds is about 4.3e18 ns, far below u64::MAX.
        let ts_nanos = secs * 1_000_000_000 + if self.nanos { frac } else { frac * 1000 };
        buf.clear();
        buf.resize(caplen as usize, 0);
        let got = read_full(&mut self.inner, buf)?;
        self.offset += got as u64;
        if got < buf.len() {
            buf.truncate(got);
            return Err(Error::Malformed("truncated record"));
        }
        Ok(Some(Record {
            ts_nanos,
            orig_len,
            caplen,
        }))
    }
}

pub struct Writer<W: Write> {
    inner: W,
    snaplen: u32,
}

impl<W: Write> Writer<W> {
    /// Writes a little-endian, nanosecond-resolution file header. Frames longer than `snaplen`
    /// (or than [`MAX_CAPLEN`], which readers refuse past) are cut, keeping their original length.
    /// Wrap files in a `BufWriter`.
    pub fn new(mut inner: W, linktype: u32, snaplen: u32) -> Result<Self, Error> {
        let mut h = [0u8; FILE_HEADER_LEN];
        h[0..4].copy_from_slice(&MAGIC_NANOS.to_le_bytes());
        h[4..6].copy_from_slice(&VERSION.0.to_le_bytes());
        h[6..8].copy_from_slice(&VERSION.1.to_le_bytes());
        // thiszone and sigfigs stay zero, as every modern writer leaves them.
        h[16..20].copy_from_slice(&snaplen.to_le_bytes());
        h[20..24].copy_from_slice(&linktype.to_le_bytes());
        inner.write_all(&h)?;
        Ok(Writer {
            inner,
            snaplen: snaplen.min(MAX_CAPLEN),
        })
    }

    /// Appends one record. Fails only on I/O, or for a timestamp past 2106 that the format's
    /// 32-bit seconds cannot hold.
    pub fn write(&mut self, ts_nanos: u64, frame: &[u8]) -> Result<(), Error> {
        self.write_cut(ts_nanos, frame, frame.len())
    }

    /// Appends the record of a frame of `orig_len` bytes on the wire of which only `frame` was
    /// kept (a capture's snap length cut it).
    pub fn write_cut(&mut self, ts_nanos: u64, frame: &[u8], orig_len: usize) -> Result<(), Error> {
        let secs = u32::try_from(ts_nanos / 1_000_000_000)
            .map_err(|_| Error::Malformed("timestamp past 2106"))?;
        let nanos = (ts_nanos % 1_000_000_000) as u32;
        let caplen = u32::try_from(frame.len())
            .unwrap_or(u32::MAX)
            .min(self.snaplen);
        let orig_len = u32::try_from(orig_len.max(frame.len())).unwrap_or(u32::MAX);
        let mut h = [0u8; RECORD_HEADER_LEN];
        h[0..4].copy_from_slice(&secs.to_le_bytes());
        h[4..8].copy_from_slice(&nanos.to_le_bytes());
        h[8..12].copy_from_slice(&caplen.to_le_bytes());
        h[12..16].copy_from_slice(&orig_len.to_le_bytes());
        self.inner.write_all(&h)?;
        self.inner.write_all(&frame[..caplen as usize])?;
        Ok(())
    }

    pub fn flush(&mut self) -> Result<(), Error> {
        self.inner.flush()?;
        Ok(())
    }

    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    pub fn into_inner(self) -> W {
        self.inner
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// What `Writer` produces for one 4-byte frame at 1.000000002 s, snaplen 65535, Ethernet;
    /// tshark reads it back with that timestamp.
    pub(crate) const GOLDEN_LE_NANOS: [u8; 44] = [
        0x4d, 0x3c, 0xb2, 0xa1, 0x02, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0xff, 0xff, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, // file header
        0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00,
        0x00, // record header
        0xde, 0xad, 0xbe, 0xef,
    ];

    /// A big-endian microsecond file (as old Solaris/SPARC tcpdump wrote): linktype raw IP,
    /// snaplen 96, one record at 3.000005 s holding 3 of 60 bytes; capinfos agrees.
    pub(crate) const GOLDEN_BE_MICROS: [u8; 43] = [
        0xa1, 0xb2, 0xc3, 0xd4, 0x00, 0x02, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x60, 0x00, 0x00, 0x00, 0x65, // file header
        0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
        0x3c, // record header
        0x45, 0x00, 0x00,
    ];

    #[test]
    fn writer_golden() {
        let mut w = Writer::new(Vec::new(), LINKTYPE_ETHERNET, 65535).unwrap();
        w.write(1_000_000_002, &[0xde, 0xad, 0xbe, 0xef]).unwrap();
        w.flush().unwrap();
        assert_eq!(w.into_inner(), GOLDEN_LE_NANOS);
    }

    #[test]
    fn reader_golden_le_nanos() {
        let mut r = Reader::new(&GOLDEN_LE_NANOS[..]).unwrap();
        assert_eq!(r.linktype(), LINKTYPE_ETHERNET);
        assert_eq!(r.snaplen(), 65535);
        assert_eq!(r.version(), (2, 4));
        assert!(r.is_nanos());
        let mut buf = vec![1, 2, 3, 4, 5, 6, 7, 8, 9];
        let rec = r.next_into(&mut buf).unwrap().unwrap();
        assert_eq!(
            rec,
            Record {
                ts_nanos: 1_000_000_002,
                orig_len: 4,
                caplen: 4
            }
        );
        assert_eq!(buf, [0xde, 0xad, 0xbe, 0xef]);
        assert!(r.next_into(&mut buf).unwrap().is_none());
        assert!(r.next_into(&mut buf).unwrap().is_none());
    }

    #[test]
    fn reader_golden_be_micros() {
        let mut r = Reader::new(&GOLDEN_BE_MICROS[..]).unwrap();
        assert_eq!(r.linktype(), LINKTYPE_RAW);
        assert_eq!(r.snaplen(), 96);
        assert!(!r.is_nanos());
        let mut buf = Vec::new();
        let rec = r.next_into(&mut buf).unwrap().unwrap();
        assert_eq!(rec.ts_nanos, 3_000_005_000);
        assert_eq!((rec.caplen, rec.orig_len), (3, 60));
        assert_eq!(buf, [0x45, 0, 0]);
        assert!(r.next_into(&mut buf).unwrap().is_none());
    }

    #[test]
    fn other_magics() {
        // Little-endian microseconds and big-endian nanoseconds.
        let mut le_micros = GOLDEN_LE_NANOS;
        le_micros[..4].copy_from_slice(&MAGIC_MICROS.to_le_bytes());
        let mut r = Reader::new(&le_micros[..]).unwrap();
        assert_eq!(
            r.next_into(&mut Vec::new()).unwrap().unwrap().ts_nanos,
            1_000_002_000
        );
        let mut be_nanos = GOLDEN_BE_MICROS;
        be_nanos[..4].copy_from_slice(&MAGIC_NANOS.to_be_bytes());
        let mut r = Reader::new(&be_nanos[..]).unwrap();
        assert!(r.is_nanos());
        assert_eq!(
            r.next_into(&mut Vec::new()).unwrap().unwrap().ts_nanos,
            3_000_000_005
        );
    }

    #[test]
    fn round_trip_many_records_with_snaplen() {
        let mut w = Writer::new(Vec::new(), LINKTYPE_ETHERNET, 100).unwrap();
        let frames: Vec<Vec<u8>> = (0..50usize)
            .map(|i| (0..i * 5).map(|j| (i + j) as u8).collect())
            .collect();
        for (i, f) in frames.iter().enumerate() {
            w.write(1_700_000_000_000_000_000 + i as u64 * 1001, f)
                .unwrap();
        }
        let bytes = w.into_inner();
        let mut r = Reader::new(&bytes[..]).unwrap();
        let mut buf = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            let rec = r.next_into(&mut buf).unwrap().unwrap();
            assert_eq!(rec.ts_nanos, 1_700_000_000_000_000_000 + i as u64 * 1001);
            assert_eq!(rec.orig_len as usize, f.len());
            assert_eq!(rec.caplen as usize, f.len().min(100));
            assert_eq!(buf, f[..f.len().min(100)]);
        }
        assert!(r.next_into(&mut buf).unwrap().is_none());
    }

    #[test]
    fn writer_refuses_far_future() {
        let mut w = Writer::new(Vec::new(), LINKTYPE_ETHERNET, 100).unwrap();
        assert!(matches!(w.write(u64::MAX, &[1]), Err(Error::Malformed(_))));
    }

    #[test]
    fn bad_inputs() {
        assert!(matches!(Reader::new(&[][..]), Err(Error::Malformed(_))));
        assert!(matches!(
            Reader::new(&b"\x0a\x0d\x0d\x0a pcapng section header"[..]),
            Err(Error::BadMagic)
        ));
        assert!(matches!(
            Reader::new(&GOLDEN_LE_NANOS[..23]),
            Err(Error::Malformed("truncated file header"))
        ));
        let mut v1 = GOLDEN_LE_NANOS;
        v1[4] = 1;
        assert!(matches!(Reader::new(&v1[..]), Err(Error::Malformed(_))));

        let mut r = Reader::new(&GOLDEN_LE_NANOS[..30]).unwrap();
        assert!(matches!(
            r.next_into(&mut Vec::new()),
            Err(Error::Malformed("truncated record header"))
        ));
        let mut r = Reader::new(&GOLDEN_LE_NANOS[..42]).unwrap();
        assert!(matches!(
            r.next_into(&mut Vec::new()),
            Err(Error::Malformed("truncated record"))
        ));

        // A huge caplen is refused before any allocation.
        let mut huge = GOLDEN_LE_NANOS;
        huge[32..36].copy_from_slice(&(MAX_CAPLEN + 1).to_le_bytes());
        let mut r = Reader::new(&huge[..]).unwrap();
        let mut buf = Vec::new();
        assert!(matches!(r.next_into(&mut buf), Err(Error::Malformed(_))));
        assert_eq!(buf.capacity(), 0);
        // Exactly the limit is accepted (and then found truncated here).
        huge[32..36].copy_from_slice(&MAX_CAPLEN.to_le_bytes());
        let mut r = Reader::new(&huge[..]).unwrap();
        assert!(matches!(
            r.next_into(&mut buf),
            Err(Error::Malformed("truncated record"))
        ));
    }

    #[test]
    fn io_errors_pass_through_and_display() {
        struct Failing;
        impl Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("disk on fire"))
            }
        }
        let e = Reader::new(Failing).err().unwrap();
        assert!(matches!(e, Error::Io(_)));
        assert_eq!(e.to_string(), "pcap I/O error: disk on fire");
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(
            Error::BadMagic.to_string(),
            "not a pcap or pcapng file (bad magic number)"
        );
        assert_eq!(Error::Malformed("x").to_string(), "malformed pcap file: x");
    }

    #[test]
    fn linktype_extension_bits_are_masked() {
        // tcpdump's test captures hold these; libpcap's LT_LINKTYPE() keeps the low 16 bits.
        for (raw, fcs) in [
            (0x3000_0001, 0),
            (0x4000_0001, 0),
            (0x0400_0001, 0),
            (0x2400_0001, 4),
        ] {
            let mut f = GOLDEN_LE_NANOS;
            f[20..24].copy_from_slice(&u32::to_le_bytes(raw));
            let r = Reader::new(&f[..]).unwrap();
            assert_eq!(r.linktype(), LINKTYPE_ETHERNET, "{raw:#x}");
            assert_eq!(r.linktype_raw(), raw);
            assert_eq!(r.fcs_len(), fcs, "{raw:#x}");
        }
    }

    #[test]
    fn positions_name_each_record() {
        let mut w = Writer::new(Vec::new(), LINKTYPE_ETHERNET, 100).unwrap();
        for len in [10, 20, 30] {
            w.write(0, &vec![7; len]).unwrap();
        }
        let f = w.into_inner();
        let mut r = Reader::new(&f[..f.len() - 5]).unwrap();
        let mut buf = Vec::new();
        assert_eq!(r.position(), Position::default());
        r.next_into(&mut buf).unwrap().unwrap();
        assert_eq!(
            r.position(),
            Position {
                record: 1,
                offset: 24
            }
        );
        r.next_into(&mut buf).unwrap().unwrap();
        assert_eq!(
            r.position(),
            Position {
                record: 2,
                offset: 50
            }
        );
        assert!(matches!(
            r.next_into(&mut buf),
            Err(Error::Malformed("truncated record"))
        ));
        assert_eq!(
            r.position(),
            Position {
                record: 3,
                offset: 86
            }
        );
        assert_eq!(r.position().to_string(), "record 3 at byte offset 86");
    }

    #[test]
    fn cut_frames_keep_their_original_length() {
        let mut w = Writer::new(Vec::new(), LINKTYPE_ETHERNET, 65535).unwrap();
        w.write_cut(1_000_000_002, &[0xde, 0xad, 0xbe, 0xef], 1514)
            .unwrap();
        let f = w.into_inner();
        assert_eq!(f[24 + 12..24 + 16], 1514u32.to_le_bytes());
        let rec = Reader::new(&f[..])
            .unwrap()
            .next_into(&mut Vec::new())
            .unwrap()
            .unwrap();
        assert_eq!((rec.caplen, rec.orig_len), (4, 1514));
    }
}
