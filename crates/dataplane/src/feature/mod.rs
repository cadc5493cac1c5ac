//! The per-interface features on the packet path, in the order DESIGN.md gives: ACL in, QoS
//! classify and police, uRPF, flow accounting; then after the lookup ACL out and QoS re-mark.
//! A feature that is off costs nothing: an interface without features never enters these nodes.

pub mod mark;
pub mod police;
