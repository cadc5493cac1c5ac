//! The `logging` section: syslog servers (RFC 5424 over UDP), a log file, facility, the lowest
//! severity sent, the ACL log interval, the hostname records carry.
//!
//! ```yaml
//! logging: { servers: [192.0.2.10, "[2001:db8::10]:514"], file: linerate.log, facility: local0,
//!            severity: info, acl-interval: 10, hostname: edge1 }
//! ```

use std::net::IpAddr;
use std::path::Path;

use super::fields::{Errs, Fields};
use super::Config;

pub(super) fn parse_logging(top: &mut Fields<'_>, dir: &Path, e: &mut Errs, cfg: &mut Config) {
    if let Some(n) = top.get("logging") {
        if let Some(mut f) = Fields::new("logging".into(), n, e) {
            for (s, node, field) in f.list("servers", e) {
                // A bare address means the syslog port.
                let full = if s.parse::<IpAddr>().is_ok() {
                    if s.contains(':') {
                        format!("[{s}]:514")
                    } else {
                        format!("{s}:514")
                    }
                } else {
                    s.clone()
                };
                match full.parse() {
                    Ok(a) => cfg.logging.servers.push(a),
                    Err(_) => e.at(
                        node,
                        &field,
                        format!("`{s}` is not ADDRESS or ADDRESS:PORT (IPv6 as [ADDRESS]:PORT)"),
                    ),
                }
            }
            if let Some(p) = f.str("file", e) {
                cfg.logging.file = Some(dir.join(p));
            }
            if let Some(v) = f.str("facility", e) {
                match crate::syslog::Facility::parse(&v) {
                    Some(x) => cfg.logging.facility = x,
                    None => e.at(
                        n,
                        "logging.facility",
                        format!("unknown facility `{v}` (daemon, local0 ... local7, ...)"),
                    ),
                }
            }
            if let Some(v) = f.str("severity", e) {
                match crate::syslog::Severity::parse(&v) {
                Some(x) => cfg.logging.min_severity = x,
                None => e.at(
                    n,
                    "logging.severity",
                    format!(
                        "unknown severity `{v}` (emerg, alert, crit, err, warning, notice, info, debug)"
                    ),
                ),
            }
            }
            if let Some(v) = f.parse::<u32>("acl-interval", "a number of seconds", e) {
                if v == 0 {
                    e.at(n, "logging.acl-interval", "at least 1 second");
                }
                cfg.services.acl_log_interval_s = v.max(1);
            }
            if let Some(h) = f.str("hostname", e) {
                cfg.logging.hostname = Some(h);
            }
            f.finish(e);
        }
    }
}
