//! The runtime API over HTTP/JSON: the server the router daemon (and the tester, on request)
//! runs, and the client the `linerate` CLI uses. Both are thin: the server translates requests
//! into calls on [`control::mgmt::Core`] and its answers into JSON; the client sends requests and
//! hands back the bodies.
//!
//! The API listens on a Unix socket (default [`DEFAULT_SOCKET`]); its file permissions are the
//! access control. Listening on TCP is opt-in and every request there must carry
//! `Authorization: Bearer TOKEN`. A separate opt-in TCP listener serves only `/metrics`, for
//! Prometheus.

pub mod client;
#[doc(hidden)]
pub mod fuzzing;
pub mod server;

/// Where the daemon listens unless told otherwise, and where the CLI looks.
pub const DEFAULT_SOCKET: &str = "/run/linerate/linerate.sock";

pub use client::{Client, Endpoint, Response};
pub use server::{lower_priority, serve, ServeOptions, Server};
