//! The data plane: packet buffers, ports, the forwarding state workers read, the nodes of the
//! packet path and the workers that run them.
//!
//! Reading order: [`buffer`] (what a packet is), [`port`] (where it comes from and goes),
//! [`tables`] (what the control plane publishes), [`graph`] (the nodes' table and the driver),
//! [`node`] (what happens to a packet), [`worker`] (the
//! loop that drives it all), [`counters`] (what is counted), [`punt`] (the door to the control
//! plane).

pub mod atm;
pub mod buffer;
pub mod counters;
pub mod feature;
#[doc(hidden)]
pub mod fuzzing;
pub mod graph;
pub mod gtp;
pub mod l2;
pub mod mfib;
pub mod mpls;
pub mod node;
pub mod port;
pub mod punt;
pub mod tables;
pub mod tap;
pub mod worker;

pub use buffer::{BufCache, PktBuf, Pool};
pub use counters::{DropReason, Snapshot, WorkerCounters};
pub use tables::{Interface, NextHop, PortMap, Rewrite, SharedTables, Tables, Vrf, NO_IF};
