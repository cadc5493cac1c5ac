//! The receiving side of FRR zebra's FPM (Forwarding Plane Manager, module `dplane_fpm_nl`):
//! zebra connects over TCP and pushes every route and next-hop object it selects, as netlink
//! messages in FPM frames. This crate turns that stream into changes for our forwarding tables.
//!
//! The pipeline, one module each: [`frame`] cuts the byte stream into frames, [`netlink`] decodes
//! the messages in them without copying, [`rib`] keeps zebra's routes and next-hop groups and
//! derives what changed, and [`server`] runs the TCP side on its own threads so that zebra is never
//! kept waiting by the consumer. The decode and RIB paths are the hot ones (a full table replays in
//! seconds after every reconnect); `examples/fpm_bench.rs` measures them.
//!
//! How the control plane drives it:
//!
//! ```no_run
//! use fpm::{Change, Event, Rib, Server};
//!
//! let (_server, events) = Server::bind("127.0.0.1:2620")?;
//! let mut rib = Rib::new();
//! let mut replaying = false;
//! for event in events {
//!     let changes = match event {
//!         Event::Connected { .. } => {
//!             rib.begin_replay(); // zebra re-sends everything it has
//!             replaying = true;
//!             continue;
//!         }
//!         Event::Batch(msgs) => rib.apply_batch(&msgs),
//!         Event::Idle if replaying => {
//!             replaying = false;
//!             rib.sweep() // what the replay did not re-send is gone
//!         }
//!         Event::Idle | Event::Disconnected { .. } => continue,
//!     };
//!     for c in changes {
//!         match c {
//!             Change::SetAdded { id, set } => { /* create a forwarding next hop for `set` */ }
//!             Change::Upsert { key, set, .. } => { /* route `key` via the next hop of `set` */ }
//!             Change::SetChanged { id, set } => { /* rewrite that next hop in place */ }
//!             Change::Removed { key } => { /* delete `key` */ }
//!             Change::SetRemoved { id } => { /* free the next hop of `id` */ }
//!         }
//!     }
//!     // then publish the forwarding tables once per batch
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

#![forbid(unsafe_code)]

pub mod frame;
pub mod netlink;
pub mod rib;
pub mod server;

#[doc(hidden)]
pub mod fuzzing;

pub use frame::{encode_frame, FrameError, FrameReader};
pub use netlink::{DecodeError, GroupMember, Msg, NextHop, Nexthop, Op, Prefix, Route, RouteType};
pub use rib::{Change, Counters, NhSet, NhSetId, Rib, RouteKey};
pub use server::{Event, Reason, Server, ServerConfig, Stats, StatsSnapshot};
