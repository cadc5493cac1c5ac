//! A capture file of either format, told apart by its first four bytes: classic pcap
//! ([`crate::pcap`]) or pcapng ([`crate::pcapng`]). What a replay needs of each record is the
//! same: its bytes, lengths, time, and the link type and frame check sequence of its interface.

use std::io::Read;

use crate::pcap::{self, read_full, Error, Position};
use crate::pcapng;

pub enum AnyReader<R: Read> {
    Pcap(pcap::Reader<R>),
    PcapNg(pcapng::Reader<R>),
}

/// One record's header, in either format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub ts_nanos: u64,
    pub caplen: u32,
    pub orig_len: u32,
    /// The link type of the record's interface (low 16 bits for classic pcap).
    pub linktype: u32,
    /// Bytes of frame check sequence at the end of the captured bytes.
    pub fcs_len: u32,
    /// The interface within its pcapng section (0 for classic pcap).
    pub interface: u32,
}

impl<R: Read> AnyReader<R> {
    /// Reads the file header (the first section header for pcapng). Wrap files in a `BufReader`.
    pub fn new(mut inner: R) -> Result<Self, Error> {
        let mut magic = [0u8; 4];
        if read_full(&mut inner, &mut magic)? < 4 {
            return Err(Error::Malformed("truncated file header"));
        }
        if magic == pcapng::MAGIC {
            pcapng::Reader::after_magic(magic, inner).map(AnyReader::PcapNg)
        } else {
            pcap::Reader::after_magic(magic, inner).map(AnyReader::Pcap)
        }
    }

    /// "pcap" or "pcapng".
    pub fn format(&self) -> &'static str {
        match self {
            AnyReader::Pcap(_) => "pcap",
            AnyReader::PcapNg(_) => "pcapng",
        }
    }

    /// The link type of every record, for classic pcap; pcapng declares one per interface.
    pub fn file_linktype(&self) -> Option<u32> {
        match self {
            AnyReader::Pcap(r) => Some(r.linktype()),
            AnyReader::PcapNg(_) => None,
        }
    }

    /// Reads the next record into `buf` (replacing its contents), or `None` at a clean end.
    pub fn next_into(&mut self, buf: &mut Vec<u8>) -> Result<Option<Frame>, Error> {
        match self {
            AnyReader::Pcap(r) => Ok(r.next_into(buf)?.map(|rec| Frame {
                ts_nanos: rec.ts_nanos,
                caplen: rec.caplen,
                orig_len: rec.orig_len,
                linktype: r.linktype(),
                fcs_len: r.fcs_len(),
                interface: 0,
            })),
            AnyReader::PcapNg(r) => {
                let Some(p) = r.next_into(buf)? else {
                    return Ok(None);
                };
                let i = r.interface(p.interface).copied();
                Ok(Some(Frame {
                    ts_nanos: p.ts_nanos,
                    caplen: p.caplen,
                    orig_len: p.orig_len,
                    linktype: i.map_or(0, |i| u32::from(i.linktype)),
                    fcs_len: i.and_then(|i| i.fcs_len).map_or(0, u32::from),
                    interface: p.interface,
                }))
            }
        }
    }

    /// The record read last (or failed on) and where it starts.
    pub fn position(&self) -> Position {
        match self {
            AnyReader::Pcap(r) => r.position(),
            AnyReader::PcapNg(r) => r.position(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcap::tests::GOLDEN_LE_NANOS;
    use crate::pcapng::tests::{GOLDEN_TWO_SECTIONS, GOLDEN_WRITTEN};

    #[test]
    fn either_format() {
        let mut buf = Vec::new();
        let mut r = AnyReader::new(&GOLDEN_LE_NANOS[..]).unwrap();
        assert_eq!((r.format(), r.file_linktype()), ("pcap", Some(1)));
        let f = r.next_into(&mut buf).unwrap().unwrap();
        assert_eq!((f.linktype, f.caplen, f.fcs_len), (1, 4, 0));
        assert!(r.next_into(&mut buf).unwrap().is_none());

        let mut r = AnyReader::new(&GOLDEN_WRITTEN[..]).unwrap();
        assert_eq!((r.format(), r.file_linktype()), ("pcapng", None));
        let f = r.next_into(&mut buf).unwrap().unwrap();
        assert_eq!((f.linktype, f.caplen, f.orig_len), (1, 4, 60));
        assert_eq!(r.position().offset, 84);

        let mut r = AnyReader::new(&GOLDEN_TWO_SECTIONS[..]).unwrap();
        let mut got = Vec::new();
        while let Some(f) = r.next_into(&mut buf).unwrap() {
            got.push((f.interface, f.linktype, f.fcs_len));
        }
        assert_eq!(got, [(0, 1, 0), (0, 1, 4), (1, 101, 0), (0, 1, 4)]);
    }

    #[test]
    fn neither_format() {
        assert!(matches!(
            AnyReader::new(&b"\x01\x02"[..]),
            Err(Error::Malformed(_))
        ));
        assert!(matches!(
            AnyReader::new(&b"GIF89a......................"[..]),
            Err(Error::BadMagic)
        ));
    }
}
