//! Entry point for the cargo-fuzz target `api` in `fuzz/`, kept in the crate so that the unit
//! test below runs exactly the same code on stable Rust. Not part of the API.
//!
//! A request body is the API client's input: it must be turned into a typed request for the
//! core, or refused with a 4xx answer, never panic a handler. A panic here is a bug.

use std::path::Path;

use control::config::{self, entry};
use control::mgmt::ops::{self, CaptureRequest, RouteRequest, TraceRequest};
use control::mgmt::ApiError;

use crate::server::{error, parse, AclEntryBody, ApplyBody, WorkerAdd};

/// The POST bodies, in the order the first input byte picks them.
const BODIES: [&str; 6] = [
    "routes",
    "acl",
    "config/apply",
    "capture",
    "trace",
    "workers",
];

/// `data[0]` picks a POST body (`BODIES`), the rest is the body: parsed as the server parses
/// it, then through the checks the core makes before it touches any state (the route's prefix
/// and target, the ACL line in every family, the config text, the capture or trace spec and
/// its deadline). Whatever is refused must be a client error.
pub fn request(data: &[u8]) {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    let res = match BODIES[usize::from(which) % BODIES.len()] {
        "routes" => parse::<RouteRequest>(body).and_then(|r| r.parse().map(drop)),
        "acl" => parse::<AclEntryBody>(body).map(|b| {
            for family in [entry::Family::Ipv4, entry::Family::Ipv6, entry::Family::Any] {
                let _ = entry::parse(&b.entry, family, true);
            }
        }),
        "config/apply" => parse::<ApplyBody>(body).and_then(|b| {
            b.opts.confirm_deadline()?;
            // Relative paths in the text resolve against a folder that does not exist.
            let source = Path::new("/nonexistent/linerate-fuzz").join(&b.source);
            config::parse(&b.text, &source)
                .map(drop)
                .map_err(|e| ApiError::invalid(e.to_string()))
        }),
        "capture" => parse::<CaptureRequest>(body).and_then(|r| {
            r.spec(None)?;
            r.spec(Some(1))?;
            ops::deadline(r.timeout_ms)?;
            Ok(())
        }),
        "trace" => parse::<TraceRequest>(body).and_then(|r| {
            r.spec(Some(0))?;
            ops::deadline(r.timeout_ms)?;
            Ok(())
        }),
        _ => parse::<WorkerAdd>(body).map(|w| {
            let _ = w.core;
        }),
    };
    if let Err(e) = res {
        let status = error(e).status();
        assert!(
            status.is_client_error(),
            "a bad body is the client's fault: {status}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_inputs() {
        for (i, body) in [
            &br#"{"prefix": "10.0.0.0/8", "via": ["192.0.2.2"]}"#[..],
            br#"{"entry": "permit udp any any eq 53"}"#,
            br#"{"text": "router: {workers: 1}\n", "source": "r.yaml", "dry_run": true}"#,
            br#"{"port": "p0", "filter": "udp", "count": 5}"#,
            br#"{"filter": "ip", "count": 0}"#,
            br#"{"core": 1}"#,
            b"{",
        ]
        .iter()
        .enumerate()
        {
            request(&[&[i as u8][..], body].concat());
        }
        for (name, data) in packet::fuzz_inputs::saved("api") {
            eprintln!("{name}");
            request(&data);
        }
    }
}
