//! The control side of the router: the YAML config and its checks, and the building of the data
//! plane's tables and workers from it. Later: the runtime API, FPM, neighbours, syslog.

pub mod config;
pub mod router;
pub mod yaml;

pub use config::{Config, ConfigError, ConfigErrors, Prefix};
pub use router::{BuildError, MemPeer, Router, Running, StartOptions};
