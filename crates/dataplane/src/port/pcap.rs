//! Capture-file ports: a pcap or pcapng file is read as the receive queue, transmitted frames are
//! written to a capture file (pcapng if its name ends in `.pcapng`, with one interface named
//! after the port and every frame marked outbound; classic pcap otherwise). `linerate run` stops
//! when every input capture is drained, which makes a pcap-in, pcap-out run a scriptable test of
//! the whole forwarding path.
//!
//! Every record read is either delivered (counted in the port's `rx_packets`) or skipped and
//! counted in its `rx_errors`, so records in = `rx_packets` + `rx_errors`:
//! - a record longer than a frame buffer ([`MAX_FRAME`], after any FCS is cut off) or of a link
//!   type other than Ethernet (a pcapng file may mix them) is skipped; one warning per file and
//!   kind goes to stderr when the file ends, naming the first such record;
//! - a record that cannot be read (the file is cut short, a header holds an impossible length)
//!   ends the file: it is counted, and the error, naming the file, the record number and its
//!   byte offset, goes to stderr and to the port's [`RxReport`], from which `linerate run` takes
//!   its exit status.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;
use std::sync::{Arc, Mutex};

use packet::capture::{AnyReader, Frame};
use packet::pcap::{self, Position};
use packet::pcapng;

use super::{RxQueue, TxQueue};
use crate::buffer::{BufCache, PktBuf, MAX_FRAME};

/// How reading a capture file ended, for whoever opened the port.
#[derive(Debug, Default)]
pub struct RxReport {
    error: Mutex<Option<String>>,
}

impl RxReport {
    /// Why the file could not be read to its end (file, record, offset, what was wrong), if so.
    pub fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Records of one kind skipped, and the first of them.
#[derive(Default)]
struct Skipped {
    count: u64,
    first: Option<(Position, u64)>,
}

impl Skipped {
    fn add(&mut self, at: Position, what: u64) {
        self.count += 1;
        self.first.get_or_insert((at, what));
    }
}

pub struct PcapRx {
    path: String,
    reader: Option<AnyReader<BufReader<File>>>,
    scratch: Vec<u8>,
    /// `scratch` holds a record not yet delivered (no buffer was free for it).
    pending: bool,
    /// The link type records must have.
    linktype: u32,
    too_long: Skipped,
    not_ethernet: Skipped,
    /// Records skipped or unreadable since the worker last asked.
    errors: u64,
    report: Arc<RxReport>,
}

impl PcapRx {
    pub fn open(path: &Path) -> Result<Self, String> {
        Self::open_linktype(path, pcap::LINKTYPE_ETHERNET)
    }

    /// Opens a capture of link type `linktype` (records of another type are skipped and
    /// counted): Ethernet, or SunATM (123) for an ATM port, whose records are PDUs.
    pub fn open_linktype(path: &Path, linktype: u32) -> Result<Self, String> {
        let f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let reader =
            AnyReader::new(BufReader::new(f)).map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(lt) = reader.file_linktype() {
            if lt != linktype {
                let want = match linktype {
                    pcap::LINKTYPE_ETHERNET => "Ethernet",
                    packet::atm::LINKTYPE_SUNATM => "SunATM",
                    _ => "the port's",
                };
                return Err(format!(
                    "{}: link type {lt} is not {want} ({linktype})",
                    path.display()
                ));
            }
        }
        Ok(Self {
            linktype,
            path: path.display().to_string(),
            reader: Some(reader),
            scratch: Vec::with_capacity(MAX_FRAME),
            pending: false,
            too_long: Skipped::default(),
            not_ethernet: Skipped::default(),
            errors: 0,
            report: Arc::new(RxReport::default()),
        })
    }

    /// How reading ends; shared with the port's owner.
    pub fn report(&self) -> Arc<RxReport> {
        self.report.clone()
    }

    /// Reads records until one is deliverable (left in `scratch`); false once the file ended.
    fn next_frame(&mut self) -> bool {
        loop {
            let Some(r) = self.reader.as_mut() else {
                return false;
            };
            let got = r.next_into(&mut self.scratch);
            let at = r.position();
            match got {
                Ok(Some(f)) => {
                    if self.keep(&f, at) {
                        return true;
                    }
                    self.errors += 1;
                }
                Ok(None) => {
                    self.end(None);
                    return false;
                }
                Err(e) => {
                    self.errors += 1;
                    self.end(Some(format!("{}: {at}: {e}", self.path)));
                    return false;
                }
            }
        }
    }

    /// Cuts off the record's FCS; false (and noted) if it cannot be delivered.
    fn keep(&mut self, f: &Frame, at: Position) -> bool {
        if f.linktype != self.linktype {
            self.not_ethernet.add(at, u64::from(f.linktype));
            return false;
        }
        let len = self.scratch.len().saturating_sub(f.fcs_len as usize);
        self.scratch.truncate(len);
        if len > MAX_FRAME {
            self.too_long.add(at, len as u64);
            return false;
        }
        true
    }

    /// Closes the file and says what was skipped and why it ended, if not cleanly.
    #[cold]
    fn end(&mut self, error: Option<String>) {
        self.reader = None;
        if let Some((at, len)) = self.too_long.first {
            eprintln!(
                "linerate: warning: {}: {} record(s) longer than a frame buffer ({MAX_FRAME} bytes) skipped and counted in rx_errors; the first is {at} ({len} bytes)",
                self.path, self.too_long.count
            );
        }
        if let Some((at, lt)) = self.not_ethernet.first {
            eprintln!(
                "linerate: warning: {}: {} record(s) not Ethernet skipped and counted in rx_errors; the first is {at} (link type {lt})",
                self.path, self.not_ethernet.count
            );
        }
        if let Some(e) = error {
            eprintln!("linerate: error: {e}; the rest of the file is not read");
            *self.report.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        }
    }
}

impl RxQueue for PcapRx {
    fn rx_burst(&mut self, cache: &mut BufCache, out: &mut Vec<PktBuf>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            if !self.pending && !self.next_frame() {
                break;
            }
            self.pending = true;
            let Some(mut b) = cache.alloc() else { break };
            b.fill(&self.scratch);
            self.pending = false;
            out.push(b);
            n += 1;
        }
        n
    }

    fn take_rx_errors(&mut self) -> u64 {
        std::mem::take(&mut self.errors)
    }

    fn is_exhausted(&self) -> bool {
        self.reader.is_none() && !self.pending
    }
}

enum Writer {
    Pcap(pcap::Writer<BufWriter<File>>),
    PcapNg(pcapng::Writer<BufWriter<File>>),
}

pub struct PcapTx {
    writer: Writer,
    start: std::time::Instant,
}

impl PcapTx {
    /// Creates the file; `port` names the pcapng interface.
    pub fn create(path: &Path, port: &str) -> Result<Self, String> {
        Self::create_linktype(path, port, pcap::LINKTYPE_ETHERNET)
    }

    /// Creates a capture of link type `linktype` (SunATM, 123, for an ATM port: each record a
    /// PDU behind its VC's pseudo-header, as tshark's `atm` dissector reads it).
    pub fn create_linktype(path: &Path, port: &str, linktype: u32) -> Result<Self, String> {
        let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let f = BufWriter::new(File::create(path).map_err(|e| err(&e))?);
        let writer = if path.extension().is_some_and(|e| e == "pcapng") {
            let mut w = pcapng::Writer::new(f, "linerate").map_err(|e| err(&e))?;
            w.add_interface(&pcapng::InterfaceDesc {
                linktype: linktype as u16,
                snaplen: MAX_FRAME as u32,
                name: Some(port),
                description: Some(&format!("linerate: frames sent on port {port}")),
            })
            .map_err(|e| err(&e))?;
            Writer::PcapNg(w)
        } else {
            let w = pcap::Writer::new(f, linktype, MAX_FRAME as u32).map_err(|e| err(&e))?;
            Writer::Pcap(w)
        };
        Ok(Self {
            writer,
            start: std::time::Instant::now(),
        })
    }
}

impl TxQueue for PcapTx {
    fn tx_burst(&mut self, pkts: &mut Vec<PktBuf>, cache: &mut BufCache) -> usize {
        let ts = self.start.elapsed().as_nanos() as u64;
        let n = pkts.len();
        for b in pkts.drain(..) {
            // A write error (disk full) loses the frame; it is counted as sent and the error shows
            // at flush. Files are a test and replay aid, not a production path.
            let _ = match &mut self.writer {
                Writer::Pcap(w) => w.write(ts, b.data()),
                Writer::PcapNg(w) => w.write_packet(&pcapng::PacketOut {
                    interface: 0,
                    ts_nanos: ts,
                    data: b.data(),
                    orig_len: b.len(),
                    flags: Some(pcapng::FLAG_OUTBOUND),
                    dropcount: None,
                    comment: None,
                }),
            };
            cache.free(b);
        }
        n
    }

    fn flush(&mut self) {
        let _ = match &mut self.writer {
            Writer::Pcap(w) => w.flush(),
            Writer::PcapNg(w) => w.flush(),
        };
    }
}

#[cfg(test)]
mod tests;
