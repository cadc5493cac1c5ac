//! Linerate's tester: what `linerate bench` runs. It does what the seed reports' SmartBits,
//! TestCenter and Landslide did: generate streams of signed test frames at a paced rate, analyze
//! every frame that comes back, and run the RFC 2544 / RFC 2889 procedures as sequences of trials.
//!
//! How to read it, bottom up:
//! - [`signature`]: the 16 bytes at the end of every test frame (stream, sequence, time, check).
//! - [`load`]: frame sizes, IMIX mixes, nominal port rates.
//! - [`stream`]: stream specs and the frame builder (templates, varying fields, checksums).
//! - [`analyzer`] and [`histogram`]: per-stream loss, duplication, reordering, misdelivery,
//!   corruption and latency.
//! - [`engine`]: a trial: pacing, polling, draining, counting. Knows ports only as queues.
//! - [`procedures`]: RFC 2544 throughput, latency, loss vs. load, back-to-back; RFC 2889 address
//!   learning and flooding; failover time; stream-count scaling.
//! - [`streams_file`]: streams from YAML or from a pattern over a router config.
//! - [`fake_dut`]: a device under test with known faults, to test the tester against.
//! - [`embedded`]: a Linerate router in the same process on `mem` ports.
//! - [`external`]: any device on real Linux interfaces (AF_PACKET), with ARP/ND answered for the
//!   addresses the tester emulates; [`cpu`]: what each trial cost the machine, the tester and
//!   the device.
//! - [`run`]: a scenario in embedded mode, from config to report rows.
//! - [`scenario`]: the seed reports' tests (ME-1, ME-2, XR-3, XR-4, GR-1..3) as runnable profiles.
//! - [`services`]: the procedures of the scenarios with services on (XR-5, ME-1S, QOS-1).
//! - [`bridging`]: the switching scenarios' address learning (ME-7, ME-8, ME-9).
//! - [`failover`]: ME-10, a Flexlink pair's primary cut under traffic.
//! - [`ggsn`]: GG-1 against a GGSN: contexts from [`sgsn`], then user traffic both ways.
//! - [`sgsn`]: the SGSN emulator, a GTP-C client creating and deleting PDP contexts at a rate.
//! - [`report`] and [`chart`]: seed-shaped tables, JSON, SVG charts, progress lines.

pub mod analyzer;
pub mod atm;
pub mod bridging;
pub mod capacity;
pub mod chart;
pub mod cpu;
pub mod dlsw;
pub mod embedded;
pub mod engine;
pub mod external;
pub mod failover;
pub mod fake_dut;
pub mod floor;
#[doc(hidden)]
pub mod fuzzing;
pub mod ggsn;
pub mod gobgp;
pub mod histogram;
pub mod hotswap;
pub mod l3vpn;
pub mod load;
pub mod logical_routers;
pub mod multicast;
pub mod procedures;
pub mod report;
pub mod run;
pub mod scenario;
pub mod services;
pub mod sgsn;
pub mod signature;
pub mod sna;
pub mod storm;
pub mod stream;
pub mod streams_file;
pub mod switching;

pub use engine::{Tester, TesterPort, TrialResult, TrialSpec};
pub use load::FrameSizes;
pub use stream::StreamSpec;
