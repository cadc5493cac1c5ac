//! Forwarding tables: IPv4/IPv6 longest-prefix match that workers read while the control plane
//! rewrites it, the reference engine it is tested against, and the route generators of the seed
//! scenarios.
//!
//! Start with [`lpm`]: the engine and its update protocol. [`epoch`] is the reclamation scheme
//! that lets a writer reuse memory without ever pausing a reader.

pub mod epoch;
pub mod gen;
pub mod key;
pub mod lpm;
pub mod reference;

pub use epoch::{EpochDomain, EpochReader};
pub use key::Key;
pub use lpm::{FibError, LpmConfig, LpmReader, LpmStats, LpmTable, LpmWriter, Route, NO_ROUTE};
pub use reference::ReferenceLpm;

/// IPv4 tables.
pub type Lpm4 = LpmWriter<u32>;
/// IPv6 tables.
pub type Lpm6 = LpmWriter<u128>;
