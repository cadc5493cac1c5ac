//! Wire formats for the Linerate data plane.
//!
//! Each header format has its own module with a zero-copy view `Packet<T>` (or `Frame`, `Tag`) over
//! any `T: AsRef<[u8]>`, in the manner of smoltcp's `wire`. The fast path uses the views directly:
//! `new_checked` once on what was received, then getters that can no longer panic, and setters that
//! patch bytes in place. The small `Repr` structs are for the slow path (tests, the tester, the
//! control plane) and are never built per packet.
//!
//! Views made with `new_unchecked` trust the caller about the length: their getters panic on a short
//! buffer, exactly as slice indexing would. Anything received goes through `new_checked`.

#![forbid(unsafe_code)]

pub mod agentx;
pub mod arp;
pub mod atm;
pub mod capture;
pub mod checksum;
pub mod dlsw;
pub mod ethernet;
pub mod filter;
pub mod gtp;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod ldp;
pub mod llc2;
pub mod mcast;
pub mod nd;
pub mod pcap;
pub mod pcapng;
pub mod tcp;
pub mod udp;
pub mod vlan;

#[doc(hidden)]
pub mod fuzz_inputs;
#[doc(hidden)]
pub mod fuzzing;

#[cfg(test)]
mod robustness;

use core::fmt;

/// Why a buffer could not be viewed as a header. Kept to one byte so that returning it on the fast
/// path costs nothing; the drop counters of the data plane carry the detail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the header or than the length a header field claims.
    Truncated,
    /// A field holds a value that makes the packet unusable (wrong version, length below minimum,
    /// bad checksum in a slow-path parse).
    Malformed,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => f.write_str("truncated packet"),
            Error::Malformed => f.write_str("malformed packet"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = core::result::Result<T, Error>;

/// Big-endian field accessors shared by the views. They index like slices do, so they panic on a
/// short buffer; views only call them on ranges that `new_checked` has proven present.
#[inline]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline]
pub(crate) fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
