//! Layer 2: what bridging needs in the data plane. Today the MAC address table
//! ([`mac_table`]); the bridge-domain nodes, flooding and the members' tag rewrites build on it.

pub mod mac_table;

pub use mac_table::{Learn, MacCounters, MacEntry, MacKey, MacTable, NotLearned};
