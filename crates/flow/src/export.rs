//! The exporter: batches records into NetFlow v9 or IPFIX datagrams and sends each to every
//! collector over UDP.
//!
//! It is driven by one control-plane thread, which drains the workers' exported records into
//! [`Exporter::push`] and calls [`Exporter::tick`] a few times a second; nothing here is on the
//! packet path. A datagram leaves when the next record would not fit in `mtu` bytes or when its
//! first record has waited [`FLUSH_AFTER_NS`]. Templates (and the options record, if sampling
//! or an exporter address is configured) go out in a datagram of their own: at start, every
//! `template_refresh`, and after every `template_refresh_packets` data datagrams, so a collector
//! that starts late or loses a datagram learns them again (UDP has no session to tell it).
//!
//! Every collector receives the same datagrams, so one sequence counter serves all of them.
//! Sequence numbers follow each protocol: v9 counts datagrams sent before this one, IPFIX counts
//! data records (options data included) sent before this one.

use crate::wire::{Builder, Options, Version};
use crate::FlowRecord;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A partly filled datagram is sent once its first record has waited this long.
pub const FLUSH_AFTER_NS: u64 = 1_000_000_000;
pub const DEFAULT_MTU: usize = 1400;

/// Maps the router's monotonic nanoseconds (0 = router start, the clock of every
/// [`FlowRecord`]) to wall-clock time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clock {
    /// Unix time, in ns, of monotonic time 0.
    pub boot_unix_ns: u64,
}

impl Clock {
    /// The clock for a router whose monotonic clock reads `now_ns` at this instant.
    pub fn from_system(now_ns: u64) -> Clock {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64;
        Clock {
            boot_unix_ns: unix.saturating_sub(now_ns),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportConfig {
    pub collectors: Vec<SocketAddr>,
    pub version: Version,
    /// v9 source id / IPFIX observation domain id.
    pub domain_id: u32,
    pub template_refresh: Duration,
    /// Also resend templates after this many data datagrams; 0 = only by time.
    pub template_refresh_packets: u32,
    /// The workers sample 1 packet in N; announced in the options record. The exporter does not
    /// scale counts: collectors do, from the announcement.
    pub sampling: Option<u32>,
    /// This router's address, announced in the options record.
    pub exporter_addr: Option<IpAddr>,
    /// Largest UDP payload; [`DEFAULT_MTU`] keeps datagrams unfragmented on any usual path.
    pub mtu: usize,
}

impl ExportConfig {
    /// IPFIX to `collectors` with the usual refresh (templates every 60 s and every 100
    /// datagrams), no sampling, domain 0, 1400-byte datagrams.
    pub fn new(collectors: Vec<SocketAddr>, version: Version) -> ExportConfig {
        ExportConfig {
            collectors,
            version,
            domain_id: 0,
            template_refresh: Duration::from_secs(60),
            template_refresh_packets: 100,
            sampling: None,
            exporter_addr: None,
            mtu: DEFAULT_MTU,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Datagrams built and sent (to every collector), templates ones included.
    pub datagrams: u64,
    /// Flow records sent.
    pub records: u64,
    /// Datagrams that carried the templates.
    pub templates: u64,
    /// Failed sends, one per collector and datagram.
    pub send_errors: u64,
    /// Flow records in datagrams that no collector accepted: the only records ever lost here.
    pub records_lost: u64,
    pub bytes: u64,
}

pub struct Exporter {
    cfg: ExportConfig,
    options: Options,
    /// The data datagram being filled.
    data: Builder,
    /// Reused for every templates datagram.
    templates: Builder,
    sock_v4: Option<UdpSocket>,
    sock_v6: Option<UdpSocket>,
    /// When the first record of the pending datagram arrived.
    pending_since_ns: Option<u64>,
    last_templates_ns: Option<u64>,
    datagrams_since_templates: u32,
    /// Datagrams sent (v9 sequence).
    datagrams_sent: u32,
    /// Data records sent (IPFIX sequence).
    data_records_sent: u32,
    stats: ExportStats,
}

impl Exporter {
    /// Binds one UDP socket per address family the collectors use. Fails on no collectors or an
    /// `mtu` too small for the templates or one IPv6 record.
    pub fn new(cfg: ExportConfig, clock: Clock) -> io::Result<Exporter> {
        let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
        if cfg.collectors.is_empty() {
            return Err(invalid("flow export: no collector configured".into()));
        }
        if cfg.sampling == Some(0) {
            return Err(invalid(
                "flow export: sampling 1-in-0 makes no sense; use 1 or more".into(),
            ));
        }
        let options = Options {
            sampling: cfg.sampling,
            exporter_addr: cfg.exporter_addr,
        };
        let mut templates = Builder::new(cfg.version, cfg.domain_id, clock, cfg.mtu);
        let min = Builder::min_mtu(cfg.version);
        if cfg.mtu < min || !templates.push_templates(&options) {
            return Err(invalid(format!(
                "flow export: mtu {} cannot hold the templates and a record; use at least {}",
                cfg.mtu,
                min.max(300)
            )));
        }
        let data = Builder::new(cfg.version, cfg.domain_id, clock, cfg.mtu);
        let bind = |any: IpAddr| UdpSocket::bind(SocketAddr::new(any, 0));
        let sock_v4 = if cfg.collectors.iter().any(|c| c.is_ipv4()) {
            Some(bind(Ipv4Addr::UNSPECIFIED.into())?)
        } else {
            None
        };
        let sock_v6 = if cfg.collectors.iter().any(|c| c.is_ipv6()) {
            Some(bind(Ipv6Addr::UNSPECIFIED.into())?)
        } else {
            None
        };
        Ok(Exporter {
            cfg,
            options,
            data,
            templates,
            sock_v4,
            sock_v6,
            pending_since_ns: None,
            last_templates_ns: None,
            datagrams_since_templates: 0,
            datagrams_sent: 0,
            data_records_sent: 0,
            stats: ExportStats::default(),
        })
    }

    pub fn config(&self) -> &ExportConfig {
        &self.cfg
    }

    pub fn stats(&self) -> ExportStats {
        self.stats
    }

    fn templates_due(&self, now_ns: u64) -> bool {
        match self.last_templates_ns {
            None => true,
            Some(t) => {
                now_ns.saturating_sub(t) >= self.cfg.template_refresh.as_nanos() as u64
                    || (self.cfg.template_refresh_packets > 0
                        && self.datagrams_since_templates >= self.cfg.template_refresh_packets)
            }
        }
    }

    /// Adds a record to the pending datagram, first sending templates if they are due and the
    /// pending datagram if the record does not fit. An error is the last send error, after every
    /// collector was tried; the record is kept either way.
    pub fn push(&mut self, rec: &FlowRecord, now_ns: u64) -> io::Result<()> {
        let mut result = Ok(());
        if self.templates_due(now_ns) {
            result = self.send_templates(now_ns);
        }
        if !self.data.push_record(rec) {
            let r = self.send_pending(now_ns);
            result = result.and(r);
            let fits = self.data.push_record(rec);
            debug_assert!(fits, "an empty datagram holds any record (checked in new)");
        }
        self.pending_since_ns.get_or_insert(now_ns);
        result
    }

    /// Sends templates when due and the pending datagram once it has waited [`FLUSH_AFTER_NS`].
    /// Call it a few times a second.
    pub fn tick(&mut self, now_ns: u64) -> io::Result<()> {
        let mut result = Ok(());
        if self.templates_due(now_ns) {
            result = self.send_templates(now_ns);
        }
        if matches!(self.pending_since_ns, Some(t) if now_ns.saturating_sub(t) >= FLUSH_AFTER_NS) {
            let r = self.send_pending(now_ns);
            result = result.and(r);
        }
        result
    }

    /// Sends the pending datagram now (shutdown, tests).
    pub fn flush(&mut self, now_ns: u64) -> io::Result<()> {
        if self.templates_due(now_ns) {
            self.send_templates(now_ns)?;
        }
        self.send_pending(now_ns)
    }

    fn send_pending(&mut self, now_ns: u64) -> io::Result<()> {
        self.pending_since_ns = None;
        self.send(false, now_ns)
    }

    /// Sends the templates in a datagram of their own, leaving the pending records pending.
    fn send_templates(&mut self, now_ns: u64) -> io::Result<()> {
        self.last_templates_ns = Some(now_ns);
        self.templates.reset();
        let fits = self.templates.push_templates(&self.options);
        debug_assert!(fits, "checked in new");
        let result = self.send(true, now_ns);
        self.stats.templates += 1;
        self.datagrams_since_templates = 0;
        result
    }

    /// Finishes and sends the templates message or the data message, if it holds anything.
    fn send(&mut self, templates: bool, now_ns: u64) -> io::Result<()> {
        let b = if templates {
            &mut self.templates
        } else {
            &mut self.data
        };
        if b.is_empty() {
            return Ok(());
        }
        let sequence = match self.cfg.version {
            Version::V9 => self.datagrams_sent,
            Version::Ipfix => self.data_records_sent,
        };
        let data = b.data_records();
        let flows = u64::from(b.flow_records());
        let bytes = b.finish(sequence, now_ns);
        let (ok, result) = send_all(&self.cfg.collectors, &self.sock_v4, &self.sock_v6, bytes);
        self.stats.bytes += bytes.len() as u64;
        self.stats.send_errors += (self.cfg.collectors.len() - ok) as u64;
        self.stats.datagrams += 1;
        self.stats.records += flows;
        if ok == 0 {
            self.stats.records_lost += flows;
        }
        self.datagrams_sent = self.datagrams_sent.wrapping_add(1);
        self.data_records_sent = self.data_records_sent.wrapping_add(data);
        self.datagrams_since_templates += 1;
        b.reset();
        result
    }
}

/// Sends `bytes` to every collector; returns how many accepted it and the last error.
fn send_all(
    collectors: &[SocketAddr],
    v4: &Option<UdpSocket>,
    v6: &Option<UdpSocket>,
    bytes: &[u8],
) -> (usize, io::Result<()>) {
    let mut ok = 0;
    let mut result = Ok(());
    for c in collectors {
        let sock = if c.is_ipv4() { v4 } else { v6 };
        match sock.as_ref().map(|s| s.send_to(bytes, c)) {
            Some(Ok(_)) => ok += 1,
            Some(Err(e)) => result = Err(e),
            None => {
                result = Err(io::Error::other(
                    "no socket for the collector's address family",
                ))
            }
        }
    }
    (ok, result)
}

#[cfg(test)]
mod tests;
