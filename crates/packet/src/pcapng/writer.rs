//! Writing pcapng: one little-endian section, the interfaces declared by the caller, and
//! Enhanced Packet Blocks (see the parent module for the format).

use std::io::Write;

use super::{
    BLOCK_OVERHEAD, BYTE_ORDER_MAGIC, EPB, EPB_DROPCOUNT, EPB_FLAGS, IDB, IF_DESCRIPTION, IF_NAME,
    IF_TSRESOL, OPT_COMMENT, OPT_END, SHB, SHB_USERAPPL,
};
use crate::pcap::{Error, MAX_CAPLEN};

/// An interface to declare in a written file.
#[derive(Debug, Clone, Copy)]
pub struct InterfaceDesc<'a> {
    pub linktype: u16,
    /// Longer frames are cut to this (and never past [`MAX_CAPLEN`]); 0: no limit but that.
    pub snaplen: u32,
    /// `if_name`.
    pub name: Option<&'a str>,
    /// `if_description`.
    pub description: Option<&'a str>,
}

/// A packet to write as an Enhanced Packet Block.
#[derive(Debug, Clone, Copy)]
pub struct PacketOut<'a> {
    /// As returned by [`Writer::add_interface`].
    pub interface: u32,
    pub ts_nanos: u64,
    /// The bytes kept (cut further to the interface's snap length).
    pub data: &'a [u8],
    /// The frame's length on the wire (at least `data.len()`).
    pub orig_len: usize,
    /// `epb_flags`: [`FLAG_INBOUND`] or [`FLAG_OUTBOUND`], and any other bits.
    pub flags: Option<u32>,
    /// `epb_dropcount`: frames lost between the previous packet of this interface and this one.
    pub dropcount: Option<u64>,
    /// `opt_comment`.
    pub comment: Option<&'a str>,
}

pub struct Writer<W: Write> {
    inner: W,
    snaplens: Vec<u32>,
    block: Vec<u8>,
}

/// The longest prefix of `s` that fits an option's 16-bit length, cut at a character boundary.
pub(super) fn option_str(s: &str) -> &[u8] {
    let mut n = s.len().min(usize::from(u16::MAX));
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    &s.as_bytes()[..n]
}

fn push_option(b: &mut Vec<u8>, code: u16, value: &[u8]) {
    b.extend_from_slice(&code.to_le_bytes());
    b.extend_from_slice(&(value.len() as u16).to_le_bytes());
    b.extend_from_slice(value);
    b.resize(b.len().next_multiple_of(4), 0);
}

impl<W: Write> Writer<W> {
    /// Writes a little-endian Section Header Block naming the writing application
    /// (`shb_userappl`). Wrap files in a `BufWriter`.
    pub fn new(inner: W, application: &str) -> Result<Self, Error> {
        let mut w = Writer {
            inner,
            snaplens: Vec::new(),
            block: Vec::new(),
        };
        w.block.clear();
        w.block.extend_from_slice(&BYTE_ORDER_MAGIC.to_le_bytes());
        w.block.extend_from_slice(&1u16.to_le_bytes());
        w.block.extend_from_slice(&0u16.to_le_bytes());
        w.block.extend_from_slice(&(-1i64).to_le_bytes()); // section length not given
        push_option(&mut w.block, SHB_USERAPPL, option_str(application));
        w.end_block(SHB, true)?;
        Ok(w)
    }

    /// Frames `self.block` as a block of type `kind` (ending its options first) and writes it.
    fn end_block(&mut self, kind: u32, has_options: bool) -> Result<(), Error> {
        if has_options {
            push_option(&mut self.block, OPT_END, &[]);
        }
        let total = u32::try_from(self.block.len() + BLOCK_OVERHEAD as usize)
            .map_err(|_| Error::Malformed("pcapng block too long"))?;
        self.inner.write_all(&kind.to_le_bytes())?;
        self.inner.write_all(&total.to_le_bytes())?;
        self.inner.write_all(&self.block)?;
        self.inner.write_all(&total.to_le_bytes())?;
        Ok(())
    }

    /// Declares an interface (nanosecond timestamps); returns its id for [`PacketOut`].
    pub fn add_interface(&mut self, d: &InterfaceDesc<'_>) -> Result<u32, Error> {
        let snaplen = match d.snaplen {
            0 => MAX_CAPLEN,
            s => s.min(MAX_CAPLEN),
        };
        self.block.clear();
        self.block.extend_from_slice(&d.linktype.to_le_bytes());
        self.block.extend_from_slice(&0u16.to_le_bytes());
        self.block.extend_from_slice(&snaplen.to_le_bytes());
        if let Some(n) = d.name {
            push_option(&mut self.block, IF_NAME, option_str(n));
        }
        if let Some(t) = d.description {
            push_option(&mut self.block, IF_DESCRIPTION, option_str(t));
        }
        push_option(&mut self.block, IF_TSRESOL, &[9]);
        self.end_block(IDB, true)?;
        self.snaplens.push(snaplen);
        Ok(self.snaplens.len() as u32 - 1)
    }

    /// Appends one packet. Fails on I/O, or for an interface not added.
    pub fn write_packet(&mut self, p: &PacketOut<'_>) -> Result<(), Error> {
        let snaplen = *self
            .snaplens
            .get(p.interface as usize)
            .ok_or(Error::Malformed("pcapng packet for an interface not added"))?;
        let data = &p.data[..p.data.len().min(snaplen as usize)];
        let orig_len = u32::try_from(p.orig_len.max(p.data.len())).unwrap_or(u32::MAX);
        self.block.clear();
        self.block.extend_from_slice(&p.interface.to_le_bytes());
        self.block
            .extend_from_slice(&((p.ts_nanos >> 32) as u32).to_le_bytes());
        self.block
            .extend_from_slice(&(p.ts_nanos as u32).to_le_bytes());
        self.block
            .extend_from_slice(&(data.len() as u32).to_le_bytes());
        self.block.extend_from_slice(&orig_len.to_le_bytes());
        self.block.extend_from_slice(data);
        self.block.resize(self.block.len().next_multiple_of(4), 0);
        let mut any = false;
        if let Some(c) = p.comment {
            push_option(&mut self.block, OPT_COMMENT, option_str(c));
            any = true;
        }
        if let Some(f) = p.flags {
            push_option(&mut self.block, EPB_FLAGS, &f.to_le_bytes());
            any = true;
        }
        if let Some(d) = p.dropcount {
            push_option(&mut self.block, EPB_DROPCOUNT, &d.to_le_bytes());
            any = true;
        }
        self.end_block(EPB, any)
    }

    pub fn flush(&mut self) -> Result<(), Error> {
        self.inner.flush()?;
        Ok(())
    }

    pub fn into_inner(self) -> W {
        self.inner
    }
}
