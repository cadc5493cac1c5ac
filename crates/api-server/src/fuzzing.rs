//! Entry point for the cargo-fuzz target `api` in `fuzz/`, kept in the crate so that the unit
//! test below runs exactly the same code on stable Rust. Not part of the API.
//!
//! A request body or query string is the API client's input: it must be turned into a typed
//! request for the core, or refused with a 4xx answer, never panic a handler. A panic here is a
//! bug.

use std::path::Path;

use api::requests::{
    AclEntryRequest, AclQuery, ApplyRequest, CaptureRequest, LogQuery, RouteDelete, RouteRequest,
    RoutesQuery, TraceRequest, WorkerRequest,
};
use api::ApiError;
use axum::extract::Query;
use axum::http::Uri;
use axum::response::IntoResponse;
use control::config::{self, entry, Prefix};
use control::mgmt::{commit, ops, show};

use crate::server::{error, parse};

/// The POST bodies and the query strings, in the order the first input byte picks them.
const BODIES: [&str; 10] = [
    "routes",
    "acl",
    "config/apply",
    "capture",
    "trace",
    "workers",
    "GET routes?",
    "DELETE routes?",
    "GET logging?",
    "GET acl?",
];

/// `data[0]` picks a POST body or a query string (`BODIES`), the rest is the body or the
/// query: parsed as the server parses it (a query through axum's own `Query` extractor, from
/// the URI hyper would hand it), then through the checks the core makes before it touches any
/// state (the route's prefix and target, the ACL line in every family, the config text, the
/// capture or trace spec and its deadline, the route query's family and prefix). Whatever is
/// refused must be a client error.
pub fn request(data: &[u8]) {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    let res = match BODIES[usize::from(which) % BODIES.len()] {
        "GET routes?" => query::<RoutesQuery>("/v1/routes", body)
            .and_then(|p| p.map_or(Ok(()), |p| show::wanted(&p).map(drop))),
        "DELETE routes?" => query::<RouteDelete>("/v1/routes", body).and_then(|p| {
            p.map_or(Ok(()), |p| {
                let _ = p.vrf;
                Prefix::parse(&p.prefix)
                    .map(drop)
                    .map_err(ApiError::invalid)
            })
        }),
        "GET logging?" => query::<LogQuery>("/v1/logging", body).map(|p| {
            if let Some(p) = p {
                let _ = p.n;
            }
        }),
        "GET acl?" => query::<AclQuery>("/v1/acl", body).map(|p| {
            if let Some(p) = p {
                let _ = p.name;
            }
        }),
        "routes" => parse::<RouteRequest>(body).and_then(|r| ops::route_of(&r).map(drop)),
        "acl" => parse::<AclEntryRequest>(body).map(|b| {
            for family in [entry::Family::Ipv4, entry::Family::Ipv6, entry::Family::Any] {
                let _ = entry::parse(&b.entry, family, true);
            }
        }),
        "config/apply" => parse::<ApplyRequest>(body).and_then(|b| {
            commit::confirm_deadline(&b.opts)?;
            // Relative paths in the text resolve against a folder that does not exist.
            let source = Path::new("/nonexistent/linerate-fuzz").join(&b.source);
            config::parse(&b.text, &source)
                .map(drop)
                .map_err(|e| ApiError::invalid(e.to_string()))
        }),
        "capture" => parse::<CaptureRequest>(body).and_then(|r| {
            ops::capture_spec(&r, None)?;
            ops::capture_spec(&r, Some(1))?;
            ops::deadline(r.timeout_ms)?;
            Ok(())
        }),
        "trace" => parse::<TraceRequest>(body).and_then(|r| {
            ops::trace_spec(&r, Some(0))?;
            ops::deadline(r.timeout_ms)?;
            Ok(())
        }),
        _ => parse::<WorkerRequest>(body).map(|w| {
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

/// `query` after `path` as axum's `Query` extractor reads it: `Ok(None)` if no HTTP server
/// would pass it on as a URI at all, `Ok(Some(params))`, or the extractor's refusal, which must
/// be a client error (`Err` carries it on to the same check as the bodies').
fn query<T: serde::de::DeserializeOwned>(path: &str, query: &[u8]) -> Result<Option<T>, ApiError> {
    let mut target = format!("{path}?").into_bytes();
    target.extend_from_slice(query);
    let Ok(uri) = Uri::try_from(target) else {
        return Ok(None);
    };
    match Query::<T>::try_from_uri(&uri) {
        Ok(Query(p)) => Ok(Some(p)),
        Err(rejection) => {
            let status = rejection.into_response().status();
            assert!(
                status.is_client_error(),
                "a bad query is the client's fault: {status}"
            );
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_inputs() {
        for (which, body) in [
            (
                "routes",
                &br#"{"prefix": "10.0.0.0/8", "via": ["192.0.2.2"]}"#[..],
            ),
            ("acl", br#"{"entry": "permit udp any any eq 53"}"#),
            (
                "config/apply",
                br#"{"text": "router: {workers: 1}\n", "source": "r.yaml", "dry_run": true}"#,
            ),
            ("capture", br#"{"port": "p0", "filter": "udp", "count": 5}"#),
            ("trace", br#"{"filter": "ip", "count": 0}"#),
            ("workers", br#"{"core": 1}"#),
            ("workers", b"{"),
            (
                "GET routes?",
                b"vrf=default&family=ipv6&prefix=2001:db8::/32&longer=true&limit=5",
            ),
            ("GET routes?", b"family=ipv6&prefix=10.0.0.0%2F8"),
            ("GET routes?", b"limit=-1"),
            ("DELETE routes?", b"prefix=10.0.0.0%2F33"),
            ("DELETE routes?", b"vrf=x"),
            ("GET logging?", b"n=18446744073709551616"),
            ("GET acl?", b"name=%ZZ&name=a"),
            ("GET acl?", b"\xff"),
        ] {
            let i = BODIES.iter().position(|b| *b == which).unwrap() as u8;
            request(&[&[i][..], body].concat());
        }
        for (name, data) in packet::fuzz_inputs::saved("api") {
            eprintln!("{name}");
            request(&data);
        }
    }
}
