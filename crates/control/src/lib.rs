//! The control side of the router: the YAML config and its checks, the building of the data
//! plane's tables ([`router`]) and the running ports and workers ([`runtime`]) from it, and the
//! management core ([`mgmt`]: the one typed API every adapter calls, with config commits and
//! history), syslog and metrics. Later: FPM, neighbours.

pub mod bridges;
pub mod config;
pub mod cpu;
pub mod dlsw;
pub mod events;
pub mod fpm;
#[doc(hidden)]
pub mod fuzzing;
pub mod gtp;
pub mod handover;
pub mod l3vpn;
pub mod ldp;
pub mod link;
pub mod lr;
pub mod mcast;
pub mod metrics;
pub mod mgmt;
pub mod punt;
pub mod querier;
pub mod router;
pub mod runtime;
pub mod services;
pub mod snmp;
pub mod syslog;
pub mod yaml;

pub use config::{Config, ConfigError, ConfigErrors, Prefix};
pub use router::{BuildError, Router};
pub use runtime::{MemPeer, PeerRx, Runtime, StartOptions};
