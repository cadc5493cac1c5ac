//! The receiving side of FRR zebra's FPM (Forwarding Plane Manager, module `dplane_fpm_nl`):
//! zebra connects over TCP and pushes every route and next-hop object it selects, as netlink
//! messages in FPM frames. This crate turns that stream into changes for our forwarding tables.
//!
//! The pipeline, one module each: [`frame`] cuts the byte stream into frames, [`netlink`] decodes
//! the messages in them without copying, [`rib`] keeps zebra's routes and next-hop groups and
//! derives what changed, and [`server`] runs the TCP side on its own threads so that zebra is never
//! kept waiting by the consumer. The decode and RIB paths are the hot ones (a full table replays in
//! seconds after every reconnect); `examples/fpm_bench.rs` measures them.

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
