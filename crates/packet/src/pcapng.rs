//! pcapng capture files (draft-ietf-opsawg-pcapng), the default format of Wireshark and dumpcap.
//!
//! Read: Section Header Blocks in either byte order (each section may change it and starts its own
//! list of interfaces; several sections follow one another in a file made by `cat`), Interface
//! Description Blocks (link type, snap length, and the `if_tsresol`, `if_tsoffset` and
//! `if_fcslen` options), Enhanced Packet Blocks (with `epb_flags` and `epb_dropcount`), Simple
//! Packet Blocks and the obsolete Packet Blocks. Every other block (name resolution, interface
//! statistics, decryption secrets, custom blocks) is skipped by its length.
//!
//! Written: one little-endian section, an Interface Description Block per capture point (its
//! `if_name`, `if_description`, and `if_tsresol` for nanoseconds), and Enhanced Packet Blocks with
//! the original length of cut frames and the `epb_flags` (direction), `epb_dropcount` and
//! `opt_comment` options.
//!
//! As for classic pcap, the reader trusts no length: a block longer than [`MAX_BLOCK`] is refused,
//! and blocks are read in pieces, so a lying length allocates no more than the file holds.

use std::io::{self, Read};

use crate::pcap::{read_full, Error, Position, MAX_CAPLEN};

mod writer;
pub use writer::{InterfaceDesc, PacketOut, Writer};

/// The first four bytes of a pcapng file: a Section Header Block's type (the same in both byte
/// orders).
pub const MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// The longest block accepted, as in libpcap and Wireshark (16 MiB).
pub const MAX_BLOCK: u32 = 16 * 1024 * 1024;

/// `epb_flags` bits 0-1: the direction of a frame.
pub const FLAG_INBOUND: u32 = 1;
pub const FLAG_OUTBOUND: u32 = 2;

const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 1;
const PB: u32 = 2;
const SPB: u32 = 3;
const EPB: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;

const OPT_END: u16 = 0;
const OPT_COMMENT: u16 = 1;
const SHB_USERAPPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_DESCRIPTION: u16 = 3;
const IF_TSRESOL: u16 = 9;
const IF_FCSLEN: u16 = 13;
const IF_TSOFFSET: u16 = 14;
const EPB_FLAGS: u16 = 2;
const EPB_DROPCOUNT: u16 = 4;

/// Header (type, length) and trailer (length) around every block body.
const BLOCK_OVERHEAD: u32 = 12;

/// What an Interface Description Block says about the packets of its interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interface {
    pub linktype: u16,
    /// 0: no limit.
    pub snaplen: u32,
    /// `if_tsresol` as stored: bit 7 clear, a power of 10; set, a power of 2 (default 6: µs).
    pub tsresol: u8,
    /// `if_tsoffset`: seconds added to every timestamp.
    pub tsoffset: i64,
    /// `if_fcslen`: bytes of frame check sequence at the end of every packet, if stated.
    pub fcs_len: Option<u8>,
}

impl Interface {
    /// A timestamp in this interface's units as nanoseconds since the Unix epoch (saturating).
    pub fn nanos(&self, ts: u64) -> u64 {
        let n = u32::from(self.tsresol & 0x7f);
        let ts = u128::from(ts);
        let ns = if self.tsresol & 0x80 != 0 {
            (ts * 1_000_000_000) >> n
        } else if n <= 9 {
            ts * 10u128.pow(9 - n)
        } else {
            10u128.checked_pow(n - 9).map_or(0, |d| ts / d)
        };
        let ns = ns as i128 + i128::from(self.tsoffset) * 1_000_000_000;
        ns.clamp(0, i128::from(u64::MAX)) as u64
    }
}

/// One packet's header; its captured bytes are in the buffer given to [`Reader::next_into`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Index of its interface in the current section ([`Reader::interface`]).
    pub interface: u32,
    /// Nanoseconds since the Unix epoch (0 for Simple Packet Blocks, which carry none).
    pub ts_nanos: u64,
    pub caplen: u32,
    pub orig_len: u32,
    /// `epb_flags` (direction in bits 0-1, see [`FLAG_INBOUND`]).
    pub flags: Option<u32>,
    /// `epb_dropcount`, or a Packet Block's drops count: frames lost before this one.
    pub dropcount: Option<u64>,
}

pub struct Reader<R: Read> {
    inner: R,
    big_endian: bool,
    sections: u32,
    ifaces: Vec<Interface>,
    body: Vec<u8>,
    pos: Position,
    /// Packets read so far.
    packets: u64,
    /// Bytes consumed so far.
    offset: u64,
}

fn u16_of(b: &[u8], at: usize, be: bool) -> u16 {
    let x = [b[at], b[at + 1]];
    if be {
        u16::from_be_bytes(x)
    } else {
        u16::from_le_bytes(x)
    }
}

fn u32_of(b: &[u8], at: usize, be: bool) -> u32 {
    let x = [b[at], b[at + 1], b[at + 2], b[at + 3]];
    if be {
        u32::from_be_bytes(x)
    } else {
        u32::from_le_bytes(x)
    }
}

fn u64_of(b: &[u8], at: usize, be: bool) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    if be {
        u64::from_be_bytes(x)
    } else {
        u64::from_le_bytes(x)
    }
}

/// The options after the fixed part of a block body: `(code, value)` pairs up to `opt_endofopt`
/// or the body's end. An option running past the body is an error.
fn options(b: &[u8], be: bool, mut f: impl FnMut(u16, &[u8])) -> Result<(), Error> {
    let mut at = 0;
    while at + 4 <= b.len() {
        let code = u16_of(b, at, be);
        let len = usize::from(u16_of(b, at + 2, be));
        if code == OPT_END {
            return Ok(());
        }
        let value = b
            .get(at + 4..at + 4 + len)
            .ok_or(Error::Malformed("pcapng option runs past its block"))?;
        f(code, value);
        at += 4 + len.next_multiple_of(4);
    }
    Ok(())
}

impl<R: Read> Reader<R> {
    /// Reads the first Section Header Block. Wrap files in a `BufReader`.
    pub fn new(mut inner: R) -> Result<Self, Error> {
        let mut magic = [0u8; 4];
        if read_full(&mut inner, &mut magic)? < 4 {
            return Err(Error::Malformed("truncated pcapng section header"));
        }
        Self::after_magic(magic, inner)
    }

    /// Reads the first section's header, its first four bytes having been read already.
    pub(crate) fn after_magic(magic: [u8; 4], inner: R) -> Result<Self, Error> {
        if magic != MAGIC {
            return Err(Error::BadMagic);
        }
        let mut r = Reader {
            inner,
            big_endian: false,
            sections: 0,
            ifaces: Vec::new(),
            body: Vec::new(),
            pos: Position::default(),
            packets: 0,
            offset: 4,
        };
        r.section()?;
        Ok(r)
    }

    /// The interfaces declared so far in the current section.
    pub fn interfaces(&self) -> &[Interface] {
        &self.ifaces
    }

    pub fn interface(&self, id: u32) -> Option<&Interface> {
        self.ifaces.get(id as usize)
    }

    /// Sections read so far (at least 1).
    pub fn sections(&self) -> u32 {
        self.sections
    }

    /// Whether the current section is big-endian.
    pub fn is_big_endian(&self) -> bool {
        self.big_endian
    }

    /// The packet read last (or failed on), and where its block starts; for an error in another
    /// block, that block's offset and the number the packet after it would have had.
    pub fn position(&self) -> Position {
        self.pos
    }

    fn read_u32(&mut self) -> Result<Option<[u8; 4]>, Error> {
        let mut b = [0u8; 4];
        match read_full(&mut self.inner, &mut b)? {
            0 => Ok(None),
            4 => {
                self.offset += 4;
                Ok(Some(b))
            }
            n => {
                self.offset += n as u64;
                Err(Error::Malformed("truncated pcapng block header"))
            }
        }
    }

    /// Checks a block's total length and returns its body's length.
    fn body_len(&self, total: u32, min_body: u32) -> Result<u32, Error> {
        if !total.is_multiple_of(4) || total < BLOCK_OVERHEAD + min_body {
            return Err(Error::Malformed(
                "pcapng block length too short or not a multiple of 4",
            ));
        }
        if total > MAX_BLOCK {
            return Err(Error::Malformed("pcapng block longer than 16 MiB"));
        }
        Ok(total - BLOCK_OVERHEAD)
    }

    /// Reads `len` body bytes into `self.body`, then the trailer, which must repeat `total`.
    fn read_body(&mut self, len: u32, total: u32) -> Result<(), Error> {
        self.body.clear();
        let got = (&mut self.inner)
            .take(u64::from(len))
            .read_to_end(&mut self.body)?;
        self.offset += got as u64;
        if got < len as usize {
            return Err(Error::Malformed("truncated pcapng block"));
        }
        self.trailer(total)
    }

    fn skip_body(&mut self, len: u32, total: u32) -> Result<(), Error> {
        let got = io::copy(&mut (&mut self.inner).take(u64::from(len)), &mut io::sink())?;
        self.offset += got;
        if got < u64::from(len) {
            return Err(Error::Malformed("truncated pcapng block"));
        }
        self.trailer(total)
    }

    fn trailer(&mut self, total: u32) -> Result<(), Error> {
        let mut t = [0u8; 4];
        let got = read_full(&mut self.inner, &mut t)?;
        self.offset += got as u64;
        if got < 4 {
            return Err(Error::Malformed("truncated pcapng block"));
        }
        if u32_of(&t, 0, self.big_endian) != total {
            return Err(Error::Malformed(
                "pcapng block's trailing length differs from its header's",
            ));
        }
        Ok(())
    }

    /// Reads a Section Header Block whose type has been read: its byte order, version and
    /// length. The interfaces of the previous section no longer apply.
    fn section(&mut self) -> Result<(), Error> {
        self.pos = Position {
            record: self.packets + 1,
            offset: self.offset - 4,
        };
        let len = self
            .read_u32()?
            .ok_or(Error::Malformed("truncated pcapng section header"))?;
        let bom = self
            .read_u32()?
            .ok_or(Error::Malformed("truncated pcapng section header"))?;
        self.big_endian = match u32::from_le_bytes(bom) {
            BYTE_ORDER_MAGIC => false,
            m if m.swap_bytes() == BYTE_ORDER_MAGIC => true,
            _ => return Err(Error::Malformed("pcapng byte-order magic is wrong")),
        };
        let total = u32_of(&len, 0, self.big_endian);
        // The body holds the byte-order magic (read), the version and the section length.
        let body = self.body_len(total, 16)? - 4;
        self.read_body(body, total)?;
        if u16_of(&self.body, 0, self.big_endian) != 1 {
            return Err(Error::Malformed("unsupported pcapng major version"));
        }
        self.sections += 1;
        self.ifaces.clear();
        Ok(())
    }

    fn interface_block(&mut self) -> Result<(), Error> {
        let (b, be) = (&self.body, self.big_endian);
        let mut i = Interface {
            linktype: u16_of(b, 0, be),
            snaplen: u32_of(b, 4, be),
            tsresol: 6,
            tsoffset: 0,
            fcs_len: None,
        };
        options(&b[8..], be, |code, v| match (code, v.len()) {
            (IF_TSRESOL, 1) => i.tsresol = v[0],
            (IF_FCSLEN, 1) => i.fcs_len = Some(v[0]),
            (IF_TSOFFSET, 8) => i.tsoffset = u64_of(v, 0, be) as i64,
            _ => {}
        })?;
        self.ifaces.push(i);
        Ok(())
    }

    /// The interface a packet names, which must have been declared in this section.
    fn iface(&self, id: u32) -> Result<Interface, Error> {
        self.interface(id)
            .copied()
            .ok_or(Error::Malformed("pcapng packet of an undeclared interface"))
    }

    /// Reads the next packet into `buf` (replacing its contents) and returns its header, or
    /// `None` at a clean end of file. Blocks that carry no packet are read (or skipped) on the way.
    pub fn next_into(&mut self, buf: &mut Vec<u8>) -> Result<Option<Packet>, Error> {
        loop {
            let start = self.offset;
            let Some(t) = self.read_u32()? else {
                return Ok(None);
            };
            self.pos.offset = start;
            let kind = u32_of(&t, 0, self.big_endian);
            if kind == SHB {
                self.section()?;
                continue;
            }
            let is_packet = matches!(kind, EPB | SPB | PB);
            if is_packet {
                self.packets += 1;
            }
            self.pos.record = self.packets + u64::from(!is_packet);
            let len = self
                .read_u32()?
                .ok_or(Error::Malformed("truncated pcapng block header"))?;
            let total = u32_of(&len, 0, self.big_endian);
            let min_body = match kind {
                IDB => 8,
                EPB | PB => 20,
                SPB => 4,
                _ => 0,
            };
            let body = self.body_len(total, min_body)?;
            if kind != IDB && !is_packet {
                self.skip_body(body, total)?;
                continue;
            }
            self.read_body(body, total)?;
            if kind == IDB {
                self.interface_block()?;
                continue;
            }
            return self.packet(kind, buf).map(Some);
        }
    }

    /// Decodes the packet block in `self.body` and copies its bytes to `buf`.
    fn packet(&mut self, kind: u32, buf: &mut Vec<u8>) -> Result<Packet, Error> {
        let (b, be) = (&self.body, self.big_endian);
        let (mut p, data_at) = match kind {
            SPB => {
                let i = self.iface(0)?;
                let orig_len = u32_of(b, 0, be);
                let room = u32::try_from(b.len() - 4).unwrap_or(u32::MAX);
                let mut caplen = orig_len.min(room);
                if i.snaplen != 0 {
                    caplen = caplen.min(i.snaplen);
                }
                let p = Packet {
                    interface: 0,
                    ts_nanos: 0,
                    caplen,
                    orig_len,
                    flags: None,
                    dropcount: None,
                };
                (p, 4)
            }
            _ => {
                let (interface, dropcount) = if kind == PB {
                    (
                        u32::from(u16_of(b, 0, be)),
                        Some(u64::from(u16_of(b, 2, be))),
                    )
                } else {
                    (u32_of(b, 0, be), None)
                };
                let i = self.iface(interface)?;
                let ts = (u64::from(u32_of(b, 4, be)) << 32) | u64::from(u32_of(b, 8, be));
                let p = Packet {
                    interface,
                    ts_nanos: i.nanos(ts),
                    caplen: u32_of(b, 12, be),
                    orig_len: u32_of(b, 16, be),
                    flags: None,
                    dropcount,
                };
                (p, 20)
            }
        };
        if p.caplen > MAX_CAPLEN {
            return Err(Error::Malformed("record longer than 262144 bytes"));
        }
        let end = data_at + p.caplen as usize;
        let Some(data) = b.get(data_at..end) else {
            return Err(Error::Malformed("pcapng packet data runs past its block"));
        };
        buf.clear();
        buf.extend_from_slice(data);
        if kind != SPB {
            let opts = b.get(end.next_multiple_of(4)..).unwrap_or(&[]);
            options(opts, be, |code, v| match (code, v.len()) {
                (EPB_FLAGS, 4) if kind == EPB => p.flags = Some(u32_of(v, 0, be)),
                (EPB_DROPCOUNT, 8) if kind == EPB => p.dropcount = Some(u64_of(v, 0, be)),
                _ => {}
            })?;
        }
        Ok(p)
    }
}

#[cfg(test)]
pub(crate) mod tests;
