//! The router's event log: RFC 5424 syslog records, kept in memory and sent to syslog servers
//! over UDP (RFC 5426) and/or appended to a file.
//!
//! A record is formatted as RFC 5424 section 6 says:
//!
//! ```text
//! <PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA MSG
//! <189>1 2026-11-21T17:09:15.123456Z r1 linerate 42 LINK_DOWN [linerate@32473 port="p0"] p0 down
//! ```
//!
//! PRI is `facility * 8 + severity`; the timestamp is UTC with microseconds; APP-NAME is
//! `linerate`; the structured data is one SD element named `linerate@32473` (32473 is the
//! enterprise number that RFC 5612 reserves for documentation) holding the record's parameters,
//! or `-` when it has none.
//!
//! The [`Logger`] keeps the last [`RING_CAPACITY`] records in memory whatever their severity;
//! only those at least as severe as [`LogConfig::min_severity`] go to the sinks. Sending never
//! blocks: the UDP socket is non-blocking, and a failed send is counted in [`LogStats`], not
//! returned. The file sink writes one record per line and flushes each one.
//!
//! This is control-plane code: a `Mutex` guards the logger's state and the sinks, so records reach
//! the file in sequence order.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

/// APP-NAME of every record.
pub const APP_NAME: &str = "linerate";

/// SD-ID of the one structured-data element: `name@enterprise-number`, with the documentation
/// enterprise number of RFC 5612.
pub const SD_ID: &str = "linerate@32473";

/// How many records [`Logger::recent`] can return: the ring keeps the last this many.
pub const RING_CAPACITY: usize = 1000;

/// Longest MSGID (RFC 5424: `1*32PRINTUSASCII`).
const MSGID_MAX: usize = 32;
/// Longest PARAM-NAME (an SD-NAME: `1*32PRINTUSASCII` less `=`, SP, `]`, `"`).
const PARAM_NAME_MAX: usize = 32;
/// Longest HOSTNAME.
const HOSTNAME_MAX: usize = 255;
/// Longest APP-NAME.
const APP_NAME_MAX: usize = 48;
/// Longest PROCID.
const PROCID_MAX: usize = 128;

/// Syslog severity (RFC 5424 table 2). The order is by code: `Emergency` is the least and the
/// most severe, so "at least as severe as `s`" is `<= s`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Emergency = 0,
    Alert = 1,
    Critical = 2,
    Error = 3,
    Warning = 4,
    Notice = 5,
    Informational = 6,
    Debug = 7,
}

impl Severity {
    /// Every severity, most severe first.
    pub const ALL: [Severity; 8] = [
        Severity::Emergency,
        Severity::Alert,
        Severity::Critical,
        Severity::Error,
        Severity::Warning,
        Severity::Notice,
        Severity::Informational,
        Severity::Debug,
    ];

    /// The numeric code, 0..=7.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The severity of a numeric code, 0..=7.
    pub fn from_code(code: u8) -> Option<Severity> {
        Severity::ALL.get(usize::from(code)).copied()
    }

    /// The keyword syslog.conf and rsyslog use: "emerg", "alert", "crit", "err", "warning",
    /// "notice", "info", "debug".
    pub fn name(self) -> &'static str {
        match self {
            Severity::Emergency => "emerg",
            Severity::Alert => "alert",
            Severity::Critical => "crit",
            Severity::Error => "err",
            Severity::Warning => "warning",
            Severity::Notice => "notice",
            Severity::Informational => "info",
            Severity::Debug => "debug",
        }
    }

    /// Parses a keyword ([`Severity::name`]), one of the usual long forms or aliases
    /// ("emergency", "panic", "critical", "error", "warn", "informational"), or a code "0".."7";
    /// case-insensitive.
    pub fn parse(s: &str) -> Option<Severity> {
        let s = s.trim().to_ascii_lowercase();
        let sev = match s.as_str() {
            "emerg" | "emergency" | "panic" | "0" => Severity::Emergency,
            "alert" | "1" => Severity::Alert,
            "crit" | "critical" | "2" => Severity::Critical,
            "err" | "error" | "3" => Severity::Error,
            "warning" | "warn" | "4" => Severity::Warning,
            "notice" | "5" => Severity::Notice,
            "info" | "informational" | "6" => Severity::Informational,
            "debug" | "7" => Severity::Debug,
            _ => return None,
        };
        Some(sev)
    }
}

/// Syslog facility (RFC 5424 table 1); codes 12..=15 (ntp, audit, alert, clock) are left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Facility {
    Kern = 0,
    User = 1,
    Mail = 2,
    Daemon = 3,
    Auth = 4,
    Syslog = 5,
    Lpr = 6,
    News = 7,
    Uucp = 8,
    Cron = 9,
    Authpriv = 10,
    Ftp = 11,
    Local0 = 16,
    Local1 = 17,
    Local2 = 18,
    Local3 = 19,
    Local4 = 20,
    Local5 = 21,
    Local6 = 22,
    Local7 = 23,
}

impl Facility {
    /// Every facility, by code.
    pub const ALL: [Facility; 20] = [
        Facility::Kern,
        Facility::User,
        Facility::Mail,
        Facility::Daemon,
        Facility::Auth,
        Facility::Syslog,
        Facility::Lpr,
        Facility::News,
        Facility::Uucp,
        Facility::Cron,
        Facility::Authpriv,
        Facility::Ftp,
        Facility::Local0,
        Facility::Local1,
        Facility::Local2,
        Facility::Local3,
        Facility::Local4,
        Facility::Local5,
        Facility::Local6,
        Facility::Local7,
    ];

    /// The numeric code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The keyword syslog.conf and rsyslog use: "kern", "user", ..., "local7".
    pub fn name(self) -> &'static str {
        match self {
            Facility::Kern => "kern",
            Facility::User => "user",
            Facility::Mail => "mail",
            Facility::Daemon => "daemon",
            Facility::Auth => "auth",
            Facility::Syslog => "syslog",
            Facility::Lpr => "lpr",
            Facility::News => "news",
            Facility::Uucp => "uucp",
            Facility::Cron => "cron",
            Facility::Authpriv => "authpriv",
            Facility::Ftp => "ftp",
            Facility::Local0 => "local0",
            Facility::Local1 => "local1",
            Facility::Local2 => "local2",
            Facility::Local3 => "local3",
            Facility::Local4 => "local4",
            Facility::Local5 => "local5",
            Facility::Local6 => "local6",
            Facility::Local7 => "local7",
        }
    }

    /// Parses a keyword ([`Facility::name`]), "security" (an old name of auth), or a numeric code;
    /// case-insensitive.
    pub fn parse(s: &str) -> Option<Facility> {
        let s = s.trim().to_ascii_lowercase();
        if s == "security" {
            return Some(Facility::Auth);
        }
        if let Ok(code) = s.parse::<u8>() {
            return Facility::ALL.iter().copied().find(|f| f.code() == code);
        }
        Facility::ALL.iter().copied().find(|f| f.name() == s)
    }
}

/// Where records go and which of them.
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    /// Syslog servers, each sent one UDP datagram per record.
    pub servers: Vec<SocketAddr>,
    /// A file records are appended to, one per line.
    pub file: Option<PathBuf>,
    pub facility: Facility,
    /// Records less severe than this are kept in memory but neither sent nor written.
    pub min_severity: Severity,
    /// HOSTNAME of the records; `None`: the machine's hostname (from
    /// `/proc/sys/kernel/hostname`), or `-` if that cannot be read.
    pub hostname: Option<String>,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            servers: Vec::new(),
            file: None,
            facility: Facility::Local7,
            min_severity: Severity::Informational,
            hostname: None,
        }
    }
}

/// One logged event.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// 1 for the first record of a [`Logger`], then one more for each.
    pub seq: u64,
    pub time: SystemTime,
    pub severity: Severity,
    /// What kind of event, e.g. "CONFIG_COMMIT", "LINK_DOWN".
    pub msgid: String,
    /// Structured data: the parameters of the one SD element, in order.
    pub params: Vec<(String, String)>,
    /// Free text for a person.
    pub text: String,
}

/// Counters of a [`Logger`], since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Records logged, whatever their severity.
    pub records: u64,
    /// Datagrams sent (one per record and server).
    pub sent: u64,
    /// Datagrams that could not be sent (including a full socket buffer).
    pub send_errors: u64,
    /// Records written and flushed to the file.
    pub written: u64,
    /// Records that could not be written to the file.
    pub write_errors: u64,
    /// Records a subscriber did not get because its queue was full.
    pub subscriber_drops: u64,
}

/// Writes the RFC 5424 TIMESTAMP of `time`: UTC with microseconds, e.g.
/// `2026-11-21T17:09:15.123456Z`; `-` (the NILVALUE) for a time outside years 0000..=9999.
pub fn format_timestamp(time: SystemTime) -> String {
    // Whole seconds since the epoch (floored) and the microseconds after them.
    let (secs, micros): (i64, u32) = match time.duration_since(UNIX_EPOCH) {
        Ok(d) => match i64::try_from(d.as_secs()) {
            Ok(s) => (s, d.subsec_micros()),
            Err(_) => return "-".to_string(),
        },
        Err(e) => {
            let d = e.duration();
            let Ok(s) = i64::try_from(d.as_secs()) else {
                return "-".to_string();
            };
            // Microseconds are truncated toward the past, as for positive times.
            let sub = d.subsec_nanos().div_ceil(1000);
            if sub == 0 {
                (-s, 0)
            } else {
                (-s - 1, 1_000_000 - sub)
            }
        }
    };
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return "-".to_string();
    }
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

/// The proleptic Gregorian date (year, month 1..=12, day 1..=31) of a day counted from
/// 1970-01-01 (day 0). Howard Hinnant's `civil_from_days`: shifts the year to start on March 1
/// so the leap day ends it, then splits into 400-year eras of 146,097 days.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days from 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..=146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // year of era, 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of (March-based) year, 0..=365
    let mp = (5 * doy + 2) / 153; // month from March, 0..=11
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A header field (HOSTNAME, APP-NAME, PROCID, MSGID): characters other than printable US-ASCII
/// (33..=126) become `_`, at most `max` characters are kept, and an empty field is `-`.
fn header_field(out: &mut String, s: &str, max: usize) {
    let start = out.len();
    out.extend(
        s.chars()
            .take(max)
            .map(|c| if c.is_ascii_graphic() { c } else { '_' }),
    );
    if out.len() == start {
        out.push('-');
    }
}

/// A PARAM-NAME: printable US-ASCII less `=`, ` `, `]`, `"` (others become `_`), at most 32
/// characters, and `_` if empty (an SD-NAME has at least one character).
fn param_name(out: &mut String, s: &str) {
    let start = out.len();
    out.extend(s.chars().take(PARAM_NAME_MAX).map(|c| {
        if c.is_ascii_graphic() && !matches!(c, '=' | ']' | '"') {
            c
        } else {
            '_'
        }
    }));
    if out.len() == start {
        out.push('_');
    }
}

/// A PARAM-VALUE: UTF-8 with `"`, `\` and `]` escaped by a backslash (RFC 5424 section 6.3.3).
fn param_value(out: &mut String, s: &str) {
    for c in s.chars() {
        if matches!(c, '"' | '\\' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
}

/// Formats `rec` as an RFC 5424 message (section 6), without a trailing newline:
/// `<PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA MSG`.
///
/// Header fields are made printable US-ASCII (others become `_`) and cut to their lengths; an
/// empty one is `-`. MSG is the UTF-8 text after one space, without a BOM; an empty text leaves
/// MSG out (and its space), as the grammar allows.
pub fn format_5424(
    rec: &Record,
    facility: Facility,
    hostname: &str,
    app: &str,
    procid: u32,
) -> String {
    let pri = u32::from(facility.code()) * 8 + u32::from(rec.severity.code());
    let mut out = String::with_capacity(128 + rec.text.len());
    let _ = write!(out, "<{pri}>1 {} ", format_timestamp(rec.time));
    header_field(&mut out, hostname, HOSTNAME_MAX);
    out.push(' ');
    header_field(&mut out, app, APP_NAME_MAX);
    out.push(' ');
    header_field(&mut out, &procid.to_string(), PROCID_MAX);
    out.push(' ');
    header_field(&mut out, &rec.msgid, MSGID_MAX);
    out.push(' ');
    if rec.params.is_empty() {
        out.push('-');
    } else {
        out.push('[');
        out.push_str(SD_ID);
        for (k, v) in &rec.params {
            out.push(' ');
            param_name(&mut out, k);
            out.push_str("=\"");
            param_value(&mut out, v);
            out.push('"');
        }
        out.push(']');
    }
    if !rec.text.is_empty() {
        out.push(' ');
        out.push_str(&rec.text);
    }
    out
}

/// The machine's hostname, or `-`.
pub(crate) fn system_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "-".to_string())
}

/// The open sinks of one configuration.
struct Sinks {
    cfg: LogConfig,
    hostname: String,
    file: Option<File>,
    v4: Option<UdpSocket>,
    v6: Option<UdpSocket>,
}

impl Sinks {
    /// Opens what `cfg` names: the file (append, create), and a non-blocking UDP socket on an
    /// ephemeral port for each address family among the servers.
    fn open(cfg: LogConfig) -> io::Result<Sinks> {
        let file = match &cfg.file {
            Some(p) => Some(OpenOptions::new().append(true).create(true).open(p)?),
            None => None,
        };
        let bind = |addr: SocketAddr| -> io::Result<UdpSocket> {
            let s = UdpSocket::bind(addr)?;
            s.set_nonblocking(true)?;
            Ok(s)
        };
        let v4 = if cfg.servers.iter().any(SocketAddr::is_ipv4) {
            Some(bind((Ipv4Addr::UNSPECIFIED, 0).into())?)
        } else {
            None
        };
        let v6 = if cfg.servers.iter().any(SocketAddr::is_ipv6) {
            Some(bind((Ipv6Addr::UNSPECIFIED, 0).into())?)
        } else {
            None
        };
        let hostname = match &cfg.hostname {
            Some(h) => h.clone(),
            None => system_hostname(),
        };
        Ok(Sinks {
            cfg,
            hostname,
            file,
            v4,
            v6,
        })
    }
}

struct State {
    sinks: Sinks,
    ring: VecDeque<Record>,
    next_seq: u64,
    stats: LogStats,
    /// Readers of every record as it is logged (the event manager), each a bounded queue.
    subscribers: Vec<std::sync::mpsc::SyncSender<Record>>,
}

/// Records a subscriber may leave unread before new ones are dropped (and counted).
pub const SUBSCRIBER_QUEUE: usize = 4096;

/// The router's logger: keeps recent records and sends them on. `Send + Sync`; share it in an
/// `Arc`.
pub struct Logger {
    procid: u32,
    state: Mutex<State>,
}

impl std::fmt::Debug for Logger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logger")
            .field("config", &self.config())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Logger {
    /// Opens the sinks of `cfg`: the file (append, create) and a UDP socket bound to an
    /// ephemeral port of each address family the servers use.
    pub fn new(cfg: LogConfig) -> io::Result<Logger> {
        Ok(Logger {
            procid: std::process::id(),
            state: Mutex::new(State {
                sinks: Sinks::open(cfg)?,
                ring: VecDeque::with_capacity(RING_CAPACITY),
                next_seq: 1,
                stats: LogStats::default(),
                subscribers: Vec::new(),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the sinks with those of `cfg` at once; if one cannot be opened, returns the error
    /// and nothing changes. Records, sequence numbers and counters carry on.
    pub fn reconfigure(&self, cfg: LogConfig) -> io::Result<()> {
        let sinks = Sinks::open(cfg)?;
        let old = std::mem::replace(&mut self.lock().sinks, sinks);
        drop(old); // closes the old file and sockets outside the lock
        Ok(())
    }

    /// The configuration in force.
    pub fn config(&self) -> LogConfig {
        self.lock().sinks.cfg.clone()
    }

    /// Logs one record and returns its sequence number. It is kept in memory; if it is at least
    /// as severe as the configured minimum it is also sent to each server (one datagram, never
    /// waiting: a failure is counted) and written to the file.
    pub fn log(
        &self,
        severity: Severity,
        msgid: &str,
        params: &[(&str, String)],
        text: impl Into<String>,
    ) -> u64 {
        let time = SystemTime::now();
        let text = text.into();
        let mut st = self.lock();
        let st = &mut *st;
        let seq = st.next_seq;
        st.next_seq += 1;
        let rec = Record {
            seq,
            time,
            severity,
            msgid: msgid.to_string(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            text,
        };
        st.stats.records += 1;
        let sinks = &mut st.sinks;
        if severity <= sinks.cfg.min_severity
            && (sinks.file.is_some() || !sinks.cfg.servers.is_empty())
        {
            let line = format_5424(
                &rec,
                sinks.cfg.facility,
                &sinks.hostname,
                APP_NAME,
                self.procid,
            );
            for server in &sinks.cfg.servers {
                let sock = if server.is_ipv4() {
                    &sinks.v4
                } else {
                    &sinks.v6
                };
                let ok = match sock {
                    Some(s) => {
                        matches!(s.send_to(line.as_bytes(), server), Ok(n) if n == line.len())
                    }
                    None => false,
                };
                if ok {
                    st.stats.sent += 1;
                } else {
                    st.stats.send_errors += 1;
                }
            }
            if let Some(f) = &mut sinks.file {
                let mut one = line.replace(['\n', '\r'], " ");
                one.push('\n');
                match f.write_all(one.as_bytes()).and_then(|()| f.flush()) {
                    Ok(()) => st.stats.written += 1,
                    Err(_) => st.stats.write_errors += 1,
                }
            }
        }
        if !st.subscribers.is_empty() {
            let mut drops = 0;
            st.subscribers.retain(|tx| match tx.try_send(rec.clone()) {
                Ok(()) => true,
                Err(std::sync::mpsc::TrySendError::Full(_)) => {
                    drops += 1;
                    true
                }
                Err(std::sync::mpsc::TrySendError::Disconnected(_)) => false,
            });
            st.stats.subscriber_drops += drops;
        }
        if st.ring.len() == RING_CAPACITY {
            st.ring.pop_front();
        }
        st.ring.push_back(rec);
        seq
    }

    /// Every record logged from now on, in order, through a queue of [`SUBSCRIBER_QUEUE`]
    /// records: logging never waits for a slow reader (what it misses is counted in
    /// `subscriber_drops`). Dropping the receiver ends the subscription.
    pub fn subscribe(&self) -> std::sync::mpsc::Receiver<Record> {
        let (tx, rx) = std::sync::mpsc::sync_channel(SUBSCRIBER_QUEUE);
        self.lock().subscribers.push(tx);
        rx
    }

    /// The last `n` records (at most [`RING_CAPACITY`]), oldest first.
    pub fn recent(&self, n: usize) -> Vec<Record> {
        let st = self.lock();
        let skip = st.ring.len().saturating_sub(n);
        st.ring.iter().skip(skip).cloned().collect()
    }

    /// The counters since the logger was made.
    pub fn stats(&self) -> LogStats {
        self.lock().stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::path::Path;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    fn at(secs: i64, micros: u32) -> SystemTime {
        let sub = Duration::from_micros(u64::from(micros));
        if secs >= 0 {
            UNIX_EPOCH + Duration::from_secs(secs as u64) + sub
        } else {
            UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + sub
        }
    }

    fn rec(sev: Severity, msgid: &str, params: &[(&str, &str)], text: &str) -> Record {
        Record {
            seq: 1,
            time: at(1_795_280_955, 123_456), // 2026-11-21T17:09:15.123456Z
            severity: sev,
            msgid: msgid.to_string(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            text: text.to_string(),
        }
    }

    /// A fresh directory under the system's temporary directory, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            static N: AtomicU32 = AtomicU32::new(0);
            let p = std::env::temp_dir().join(format!(
                "linerate-syslog-test-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn syslog_timestamps_of_known_instants() {
        assert_eq!(format_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            format_timestamp(at(951_782_400, 0)),
            "2000-02-29T00:00:00.000000Z"
        );
        assert_eq!(
            format_timestamp(at(951_827_696, 1)),
            "2000-02-29T12:34:56.000001Z"
        );
        assert_eq!(
            format_timestamp(at(1_735_689_599, 999_999)),
            "2024-12-31T23:59:59.999999Z"
        );
        assert_eq!(
            format_timestamp(at(1_735_689_600, 0)),
            "2025-01-01T00:00:00.000000Z"
        );
        assert_eq!(
            format_timestamp(at(1_795_280_955, 123_456)),
            "2026-11-21T17:09:15.123456Z"
        );
        // 2100 is not a leap year; 1900 was not either.
        assert_eq!(
            format_timestamp(at(4_107_542_399, 0)),
            "2100-02-28T23:59:59.000000Z"
        );
        assert_eq!(
            format_timestamp(at(4_107_542_400, 0)),
            "2100-03-01T00:00:00.000000Z"
        );
        assert_eq!(
            format_timestamp(at(-2_203_891_200, 0)),
            "1900-03-01T00:00:00.000000Z"
        );
        // Before the epoch, the fraction still counts forward from the whole second.
        assert_eq!(
            format_timestamp(at(-1, 250_000)),
            "1969-12-31T23:59:59.250000Z"
        );
        // Nanoseconds are truncated, not rounded.
        assert_eq!(
            format_timestamp(UNIX_EPOCH + Duration::from_nanos(1_999)),
            "1970-01-01T00:00:00.000001Z"
        );
    }

    #[test]
    fn syslog_civil_dates_match_a_day_by_day_walk() {
        fn leap(y: i64) -> bool {
            (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
        }
        let (mut y, mut m, mut d) = (1970i64, 1u32, 1u32);
        for days in 0..(500 * 366) {
            assert_eq!(civil_from_days(days), (y, m, d), "day {days}");
            let len = match m {
                2 if leap(y) => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            d += 1;
            if d > len {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(-719_468), (0, 3, 1));
    }

    #[test]
    fn syslog_pri_arithmetic() {
        let cases = [
            (Facility::Kern, Severity::Emergency, 0),
            (Facility::User, Severity::Notice, 13),
            (Facility::Daemon, Severity::Error, 27),
            (Facility::Auth, Severity::Critical, 34),
            (Facility::Local0, Severity::Informational, 134),
            (Facility::Local4, Severity::Notice, 165),
            (Facility::Local7, Severity::Emergency, 184),
            (Facility::Local7, Severity::Debug, 191),
        ];
        for (f, s, pri) in cases {
            let line = format_5424(&rec(s, "X", &[], ""), f, "h", APP_NAME, 1);
            assert!(line.starts_with(&format!("<{pri}>1 ")), "{line}");
        }
    }

    #[test]
    fn syslog_format_without_params() {
        let r = rec(Severity::Notice, "LINK_DOWN", &[], "eth0 is down");
        assert_eq!(
            format_5424(&r, Facility::Local7, "r1", APP_NAME, 4242),
            "<189>1 2026-11-21T17:09:15.123456Z r1 linerate 4242 LINK_DOWN - eth0 is down"
        );
        // An empty text leaves MSG out; empty MSGID and HOSTNAME are the NILVALUE.
        let r = rec(Severity::Debug, "", &[], "");
        assert_eq!(
            format_5424(&r, Facility::Kern, "", APP_NAME, 1),
            "<7>1 2026-11-21T17:09:15.123456Z - linerate 1 - -"
        );
    }

    #[test]
    fn syslog_format_with_params_and_escaping() {
        let r = rec(
            Severity::Informational,
            "CONFIG_COMMIT",
            &[("user", "admin"), ("path", r#"a "b" \c] d"#), ("n", "")],
            "committed: ünïcode ok",
        );
        assert_eq!(
            format_5424(&r, Facility::Local7, "r1.example", APP_NAME, 77),
            "<190>1 2026-11-21T17:09:15.123456Z r1.example linerate 77 CONFIG_COMMIT \
             [linerate@32473 user=\"admin\" path=\"a \\\"b\\\" \\\\c\\] d\" n=\"\"] \
             committed: ünïcode ok"
        );
    }

    #[test]
    fn syslog_header_and_param_names_are_sanitized() {
        let long = "M".repeat(40);
        let r = rec(
            Severity::Warning,
            &format!("A B\u{e9}{long}"),
            &[("a=b c]d\"e\u{e9}", "v"), ("", "w"), (&"k".repeat(40), "x")],
            "t",
        );
        let line = format_5424(&r, Facility::User, "my host", "lin rate", 9);
        let want_msgid = format!("A_B_{}", "M".repeat(28));
        assert_eq!(
            line,
            format!(
                "<12>1 2026-11-21T17:09:15.123456Z my_host lin_rate 9 {want_msgid} \
                 [linerate@32473 a_b_c_d_e_=\"v\" _=\"w\" {}=\"x\"] t",
                "k".repeat(32)
            )
        );
    }

    #[test]
    fn syslog_severity_and_facility_names() {
        for s in Severity::ALL {
            assert_eq!(Severity::parse(s.name()), Some(s));
            assert_eq!(Severity::parse(&s.code().to_string()), Some(s));
            assert_eq!(Severity::from_code(s.code()), Some(s));
        }
        assert_eq!(Severity::parse("WARN"), Some(Severity::Warning));
        assert_eq!(Severity::parse("error"), Some(Severity::Error));
        assert_eq!(Severity::parse("8"), None);
        assert_eq!(Severity::parse("loud"), None);
        assert!(Severity::Emergency < Severity::Debug);
        for f in Facility::ALL {
            assert_eq!(Facility::parse(f.name()), Some(f));
            assert_eq!(Facility::parse(&f.code().to_string()), Some(f));
        }
        assert_eq!(Facility::parse("LOCAL3"), Some(Facility::Local3));
        assert_eq!(Facility::Local7.code(), 23);
        assert_eq!(Facility::parse("12"), None);
        assert_eq!(Facility::parse("local8"), None);
    }

    #[test]
    fn syslog_record_reaches_a_udp_server() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let log = Logger::new(LogConfig {
            servers: vec![server.local_addr().unwrap()],
            facility: Facility::Local4,
            hostname: Some("r1".into()),
            ..LogConfig::default()
        })
        .unwrap();
        let seq = log.log(
            Severity::Warning,
            "LINK_DOWN",
            &[
                ("port", "eth0".to_string()),
                ("why", "carrier \"lost\"".to_string()),
            ],
            "port eth0 went down",
        );
        assert_eq!(seq, 1);
        let mut buf = [0u8; 2048];
        let (n, _) = server.recv_from(&mut buf).unwrap();
        let msg = std::str::from_utf8(&buf[..n]).unwrap();
        let fields: Vec<&str> = msg.splitn(7, ' ').collect();
        assert_eq!(fields[0], "<164>1");
        assert_eq!(fields[1].len(), "2026-11-21T17:09:15.123456Z".len());
        assert!(fields[1].ends_with('Z') && fields[1].as_bytes()[10] == b'T');
        assert_eq!(fields[2], "r1");
        assert_eq!(fields[3], "linerate");
        assert_eq!(fields[4], std::process::id().to_string());
        assert_eq!(fields[5], "LINK_DOWN");
        assert_eq!(
            fields[6],
            "[linerate@32473 port=\"eth0\" why=\"carrier \\\"lost\\\"\"] port eth0 went down"
        );
        let st = log.stats();
        assert_eq!((st.records, st.sent, st.send_errors), (1, 1, 0));
    }

    #[test]
    fn syslog_send_errors_are_counted_not_returned() {
        // Port 0 is refused by the kernel (EINVAL) before anything is sent.
        let log = Logger::new(LogConfig {
            servers: vec!["127.0.0.1:0".parse().unwrap()],
            ..LogConfig::default()
        })
        .unwrap();
        assert_eq!(log.log(Severity::Error, "X", &[], "a"), 1);
        assert_eq!(log.log(Severity::Error, "X", &[], "b"), 2);
        let st = log.stats();
        assert_eq!((st.records, st.sent, st.send_errors), (2, 0, 2));
        assert_eq!(log.recent(10).len(), 2);
    }

    #[test]
    fn syslog_file_sink_and_min_severity() {
        let dir = TempDir::new();
        let path = dir.path().join("linerate.log");
        std::fs::write(&path, "earlier line\n").unwrap();
        let log = Logger::new(LogConfig {
            file: Some(path.clone()),
            min_severity: Severity::Notice,
            hostname: Some("r1".into()),
            ..LogConfig::default()
        })
        .unwrap();
        log.log(Severity::Notice, "A", &[], "first\nsecond line");
        log.log(Severity::Informational, "B", &[], "filtered");
        log.log(Severity::Debug, "C", &[], "filtered too");
        log.log(Severity::Critical, "D", &[("k", "v]".to_string())], "crit");
        let content = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = content.lines().collect();
        assert!(content.ends_with('\n'));
        assert_eq!(lines.len(), 3, "{content}");
        assert_eq!(lines[0], "earlier line");
        let pid = std::process::id();
        let strip = |l: &str| -> String {
            // Drop the timestamp, which is the second field.
            let mut f: Vec<&str> = l.splitn(3, ' ').collect();
            f.remove(1);
            f.join(" ")
        };
        assert_eq!(
            strip(lines[1]),
            format!("<189>1 r1 linerate {pid} A - first second line")
        );
        assert_eq!(
            strip(lines[2]),
            format!("<186>1 r1 linerate {pid} D [linerate@32473 k=\"v\\]\"] crit")
        );
        // Filtered records are still kept in memory, and counted.
        let recent = log.recent(10);
        assert_eq!(
            recent.iter().map(|r| r.msgid.as_str()).collect::<Vec<_>>(),
            ["A", "B", "C", "D"]
        );
        assert_eq!(recent[0].text, "first\nsecond line");
        assert_eq!(recent[3].params, [("k".to_string(), "v]".to_string())]);
        let st = log.stats();
        assert_eq!(
            st,
            LogStats {
                records: 4,
                sent: 0,
                send_errors: 0,
                written: 2,
                write_errors: 0,
                subscriber_drops: 0,
            }
        );
    }

    #[test]
    fn a_subscriber_reads_every_record_in_order_and_a_full_queue_only_counts() {
        let log = Logger::new(LogConfig::default()).unwrap();
        log.log(Severity::Notice, "BEFORE", &[], "not seen");
        let rx = log.subscribe();
        for i in 0..SUBSCRIBER_QUEUE + 10 {
            log.log(Severity::Notice, "N", &[("i", i.to_string())], "x");
        }
        let got: Vec<Record> = rx.try_iter().collect();
        assert_eq!(got.len(), SUBSCRIBER_QUEUE);
        assert_eq!(got[0].params[0].1, "0");
        assert_eq!(log.stats().subscriber_drops, 10);
        drop(rx);
        log.log(
            Severity::Notice,
            "AFTER",
            &[],
            "the dropped subscriber goes",
        );
        assert_eq!(log.stats().subscriber_drops, 10);
    }

    #[test]
    fn syslog_recent_keeps_the_last_thousand_in_order() {
        let log = Logger::new(LogConfig::default()).unwrap();
        assert!(log.recent(5).is_empty());
        for i in 1..=1005u64 {
            assert_eq!(log.log(Severity::Debug, "N", &[], format!("n{i}")), i);
        }
        let last3 = log.recent(3);
        assert_eq!(
            last3.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [1003, 1004, 1005]
        );
        assert_eq!(last3[2].text, "n1005");
        let all = log.recent(usize::MAX);
        assert_eq!(all.len(), RING_CAPACITY);
        assert_eq!(all[0].seq, 6);
        assert_eq!(all[RING_CAPACITY - 1].seq, 1005);
        assert!(all.windows(2).all(|w| w[0].seq + 1 == w[1].seq));
        assert!(all.windows(2).all(|w| w[0].time <= w[1].time));
        assert!(log.recent(0).is_empty());
        assert_eq!(log.stats().records, 1005);
    }

    #[test]
    fn syslog_reconfigure_replaces_sinks_or_changes_nothing() {
        let dir = TempDir::new();
        let first = dir.path().join("first.log");
        let second = dir.path().join("second.log");
        let cfg = LogConfig {
            file: Some(first.clone()),
            hostname: Some("r1".into()),
            ..LogConfig::default()
        };
        let log = Logger::new(cfg.clone()).unwrap();
        log.log(Severity::Error, "ONE", &[], "one");

        let bad = LogConfig {
            file: Some(dir.path().join("no-such-dir").join("x.log")),
            facility: Facility::Local0,
            ..cfg.clone()
        };
        assert!(log.reconfigure(bad).is_err());
        assert_eq!(log.config(), cfg);
        log.log(Severity::Error, "TWO", &[], "two");
        let content = std::fs::read_to_string(&first).unwrap();
        assert_eq!(content.lines().count(), 2);
        assert!(content.lines().all(|l| l.starts_with("<187>1 ")));

        let good = LogConfig {
            file: Some(second.clone()),
            facility: Facility::Local0,
            ..cfg.clone()
        };
        log.reconfigure(good.clone()).unwrap();
        assert_eq!(log.config(), good);
        assert_eq!(log.log(Severity::Error, "THREE", &[], "three"), 3);
        assert_eq!(std::fs::read_to_string(&first).unwrap().lines().count(), 2);
        let content = std::fs::read_to_string(&second).unwrap();
        assert!(content.starts_with("<131>1 "), "{content}");
        assert!(content.contains(" THREE - three\n"));
        assert_eq!(log.stats().written, 3);
    }

    #[test]
    fn syslog_default_hostname_is_the_machines() {
        let log = Logger::new(LogConfig::default()).unwrap();
        let host = log.lock().sinks.hostname.clone();
        assert!(!host.is_empty());
        assert!(!host.contains('\n'));
        assert_eq!(host, system_hostname());
    }

    #[test]
    fn syslog_logger_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Logger>();
    }
}
