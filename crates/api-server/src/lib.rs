//! The runtime API's server, which the router daemon (and the tester, on request) runs: it
//! translates HTTP requests into calls on [`control::mgmt::Core`] and its answers (the typed
//! views of the `api` crate) into JSON. The client and the types are in `api`, which does not
//! link the control plane.
//!
//! The API listens on a Unix socket (default [`api::DEFAULT_SOCKET`]); its file permissions are
//! the access control. Listening on TCP is opt-in and every request there must carry
//! `Authorization: Bearer TOKEN`. A separate opt-in TCP listener serves only `/metrics`, for
//! Prometheus.

pub mod accounting;
#[doc(hidden)]
pub mod fuzzing;
pub mod server;
pub mod supervisor;

pub use server::{lower_priority, serve, ServeOptions, Server};
pub use supervisor::serve_supervisor;
