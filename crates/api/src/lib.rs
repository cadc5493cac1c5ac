//! The runtime API's language, shared by both ends: every answer the router gives is a typed
//! view ([`views`]), every body it takes a typed request ([`requests`]), and a failure an
//! [`ApiError`]; each is `Serialize + Deserialize`, so the server (`api-server`, over
//! `control::mgmt::Core`) writes exactly what the client reads. Each view renders itself as the
//! CLI prints it ([`Render`]); `--json` prints the JSON instead. The [`client`] sends one HTTP/1.1
//! request over the Unix socket (or TCP with a token).
//!
//! This crate knows nothing of the router's internals: the CLI, the tester and any script can
//! use it without linking the control plane.

pub mod client;
pub mod error;
pub mod requests;
pub mod table;
pub mod views;

/// Where the daemon listens unless told otherwise, and where the CLI looks.
pub const DEFAULT_SOCKET: &str = "/run/linerate/linerate.sock";

pub use client::{Client, Endpoint, Response};
pub use error::{ApiError, ApiResult, ErrorKind};
pub use views::Render;
