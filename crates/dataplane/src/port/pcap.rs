//! Capture-file ports: a pcap file is read as the receive queue, transmitted frames are written to
//! a pcap file. `linerate run` stops when every input capture is drained, which makes a pcap-in,
//! pcap-out run a scriptable test of the whole forwarding path.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;

use packet::pcap;

use super::{RxQueue, TxQueue};
use crate::buffer::{BufCache, PktBuf, MAX_FRAME};

pub struct PcapRx {
    reader: Option<pcap::Reader<BufReader<File>>>,
    scratch: Vec<u8>,
    /// Records skipped: too long for a buffer, or the file ended mid-record.
    pub bad_records: u64,
    pub error: Option<String>,
}

impl PcapRx {
    pub fn open(path: &Path) -> Result<Self, String> {
        let f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let reader = pcap::Reader::new(BufReader::new(f))
            .map_err(|e| format!("{}: not a pcap file: {e}", path.display()))?;
        if reader.linktype() != pcap::LINKTYPE_ETHERNET {
            return Err(format!(
                "{}: link type {} is not Ethernet (1)",
                path.display(),
                reader.linktype()
            ));
        }
        Ok(Self {
            reader: Some(reader),
            scratch: Vec::with_capacity(MAX_FRAME),
            bad_records: 0,
            error: None,
        })
    }
}

impl RxQueue for PcapRx {
    fn rx_burst(&mut self, cache: &mut BufCache, out: &mut Vec<PktBuf>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Some(r) = self.reader.as_mut() else { break };
            match r.next_into(&mut self.scratch) {
                Ok(Some(_)) => {
                    if self.scratch.len() > MAX_FRAME {
                        self.bad_records += 1;
                        continue;
                    }
                    let Some(mut b) = cache.alloc() else { break };
                    b.fill(&self.scratch);
                    out.push(b);
                    n += 1;
                }
                Ok(None) => self.reader = None,
                Err(e) => {
                    self.bad_records += 1;
                    self.error = Some(e.to_string());
                    self.reader = None;
                }
            }
        }
        n
    }

    fn is_exhausted(&self) -> bool {
        self.reader.is_none()
    }
}

pub struct PcapTx {
    writer: pcap::Writer<BufWriter<File>>,
    start: std::time::Instant,
}

impl PcapTx {
    pub fn create(path: &Path) -> Result<Self, String> {
        let f = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let writer =
            pcap::Writer::new(BufWriter::new(f), pcap::LINKTYPE_ETHERNET, MAX_FRAME as u32)
                .map_err(|e| format!("{}: {e}", path.display()))?;
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
            let _ = self.writer.write(ts, b.data());
            cache.free(b);
        }
        n
    }

    fn flush(&mut self) {
        let _ = self.writer.flush();
    }
}
