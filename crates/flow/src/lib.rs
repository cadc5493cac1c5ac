//! Flow accounting: a per-worker flow cache on the packet path, and the exporter that turns the
//! records it expires into NetFlow v9 or IPFIX (RFC 7011) datagrams for collectors.
//!
//! Structure:
//! - [`FlowKey`], [`FlowRecord`] and [`EndReason`] (this file) are the vocabulary shared by the
//!   data plane, the cache and the exporter.
//! - [`cache`]: [`FlowCache`], one per worker, owned by it, no locks and no atomics. A packet
//!   whose flow is in cache costs one 64-byte bucket line and one 64-byte entry line. Records
//!   leave the cache through a caller-supplied closure (typically pushing onto a ring to the
//!   control plane), never silently: every removal is counted in [`CacheStats`].
//! - [`wire`]: the pure encoders ([`wire::Builder`], [`encode_v9`], [`encode_ipfix`]): bytes in a
//!   `Vec`, no sockets, so they are unit-tested and property-tested against a parser.
//! - [`export`]: [`Exporter`], which owns a UDP socket, batches records into datagrams of at most
//!   `mtu` bytes, resends templates and the sampling/exporter options, and counts what it sent.
//!   It runs on a control-plane thread, never on the packet path.

pub mod cache;
pub mod export;
pub mod wire;

#[cfg(any(test, feature = "fuzzing"))]
mod decode;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;

pub use cache::{CacheConfig, CacheStats, FlowCache, FlowSeen};
pub use export::{Clock, ExportConfig, ExportStats, Exporter};
pub use wire::{encode_ipfix, encode_v9, Version};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Which way the packet crossed the interface the flow is accounted on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Direction {
    Ingress = 0,
    Egress = 1,
}

/// What identifies a flow. Two packets that differ in any field, including `in_if` and
/// `direction`, are two flows.
///
/// Addresses are numbers in network order (`u128::from(Ipv6Addr)`, `u32::from(Ipv4Addr)`); an
/// IPv4 address sits in the low 32 bits and the cache ignores the upper 96 bits when `v6` is
/// false. For ICMP, put type and code in `dst_port` (`type << 8 | code`) as NetFlow exporters do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub src: u128,
    pub dst: u128,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
    pub tos: u8,
    pub v6: bool,
    pub in_if: u32,
    pub direction: Direction,
}

impl FlowKey {
    /// An IPv4 key; a convenience for tests and control-plane code.
    #[allow(clippy::too_many_arguments)]
    pub fn v4(
        src: Ipv4Addr,
        dst: Ipv4Addr,
        src_port: u16,
        dst_port: u16,
        proto: u8,
        tos: u8,
        in_if: u32,
        direction: Direction,
    ) -> FlowKey {
        FlowKey {
            src: u32::from(src).into(),
            dst: u32::from(dst).into(),
            src_port,
            dst_port,
            proto,
            tos,
            v6: false,
            in_if,
            direction,
        }
    }

    /// An IPv6 key.
    #[allow(clippy::too_many_arguments)]
    pub fn v6(
        src: Ipv6Addr,
        dst: Ipv6Addr,
        src_port: u16,
        dst_port: u16,
        proto: u8,
        tos: u8,
        in_if: u32,
        direction: Direction,
    ) -> FlowKey {
        FlowKey {
            src: src.into(),
            dst: dst.into(),
            src_port,
            dst_port,
            proto,
            tos,
            v6: true,
            in_if,
            direction,
        }
    }

    pub fn src_ip(&self) -> IpAddr {
        addr(self.src, self.v6)
    }

    pub fn dst_ip(&self) -> IpAddr {
        addr(self.dst, self.v6)
    }

    /// A 32-bit hash of every field the cache compares, for callers that have no hash of their
    /// own at hand (the NIC's RSS hash does not cover `in_if` or `direction`, but any hash that is
    /// a function of the key is correct; a weaker one only puts more flows in the same buckets).
    /// Multiply-xorshift over 64-bit words: about 3 ns, good enough spread for bucket choice.
    pub fn hash32(&self) -> u32 {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let (src, dst) = if self.v6 {
            (self.src, self.dst)
        } else {
            (self.src & 0xFFFF_FFFF, self.dst & 0xFFFF_FFFF)
        };
        let words = [
            src as u64,
            (src >> 64) as u64,
            dst as u64,
            (dst >> 64) as u64,
            (u64::from(self.src_port) << 48)
                | (u64::from(self.dst_port) << 32)
                | (u64::from(self.proto) << 24)
                | (u64::from(self.tos) << 16)
                | (u64::from(self.v6) << 8)
                | self.direction as u64,
            u64::from(self.in_if),
        ];
        let mut h = 0u64;
        for w in words {
            h = (h ^ w).wrapping_mul(K);
            h ^= h >> 29;
        }
        (h ^ (h >> 32)) as u32
    }
}

fn addr(a: u128, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(a))
    } else {
        IpAddr::V4(Ipv4Addr::from(a as u32))
    }
}

/// Why a record left the cache. The IPFIX `flowEndReason` (IE 136) code of each is given by
/// [`EndReason::ipfix_code`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndReason {
    /// No packet for the inactive timeout; the entry is gone.
    IdleTimeout,
    /// The flow lasted the active timeout; its counters restart, the entry stays.
    ActiveTimeout,
    /// TCP FIN or RST seen; the entry is gone (the final ACK starts a new, short flow).
    EndOfFlow,
    /// Evicted to make room for a new flow in a full bucket.
    ForcedEnd,
    /// Exported by [`FlowCache::flush`] (shutdown, reconfiguration).
    Flush,
}

impl EndReason {
    /// RFC 5102 codes: 1 idle, 2 active, 3 end of flow, 4 forced end, 5 lack of resources.
    /// Eviction from a full cache is "lack of resources"; a flush ordered by management is the
    /// "forced end" the RFC describes (an external event such as a shutdown).
    pub fn ipfix_code(self) -> u8 {
        match self {
            EndReason::IdleTimeout => 1,
            EndReason::ActiveTimeout => 2,
            EndReason::EndOfFlow => 3,
            EndReason::Flush => 4,
            EndReason::ForcedEnd => 5,
        }
    }

    pub fn from_ipfix_code(code: u8) -> Option<EndReason> {
        Some(match code {
            1 => EndReason::IdleTimeout,
            2 => EndReason::ActiveTimeout,
            3 => EndReason::EndOfFlow,
            4 => EndReason::Flush,
            5 => EndReason::ForcedEnd,
            _ => return None,
        })
    }
}

/// One exported flow: the counters since the flow started or since its last active-timeout
/// export. Times are on the router's monotonic clock (0 = router start) with the cache's
/// millisecond resolution (NetFlow v9 and IPFIX carry milliseconds too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowRecord {
    pub key: FlowKey,
    pub out_if: u32,
    pub packets: u64,
    /// L3 bytes: IP header and payload, no link-layer header, as NetFlow counts them.
    pub bytes: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    /// OR of the TCP flags of every packet.
    pub tcp_flags: u8,
    pub end: EndReason,
}
