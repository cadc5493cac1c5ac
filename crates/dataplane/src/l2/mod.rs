//! Layer 2: bridging in the data plane. The MAC address table ([`mac_table`]), the bridge
//! domains as the workers see them ([`bridge`]); the nodes that switch frames are
//! `node::l2_input` (learn, look up, forward) and `node::l2_flood` (copies to every member).

pub mod bridge;
pub mod mac_table;
pub mod snoop;

pub use bridge::{Bridge, BridgeCounters, L2Port};
pub use mac_table::{Learn, MacCounters, MacEntry, MacKey, MacTable, NotLearned};
