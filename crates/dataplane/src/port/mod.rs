//! Ports: where frames enter and leave. A port has receive and transmit queues; each worker owns
//! one queue of each kind per port, so no queue is shared and none is locked. Drivers implement
//! the two queue traits; the worker calls them once per burst (a virtual call per burst of up to
//! 256 frames, never per frame).
//!
//! - [`mem`]: in-process rings, zero-copy, for the embedded tester and benchmarks.
//! - [`pcap`]: a capture file as input, a capture file as output, for tests and replays.
//! - [`replay`]: frames replayed by the worker itself and a counting sink, for benchmarks.
//! - [`shm`] (Linux): rings in a file two processes map (in the manner of VPP's memif), for a
//!   tester or another logical router at the far end of a port.
//! - [`af_packet`] (Linux): a kernel network device through packet sockets with mmap'd rings,
//!   several receive queues in a fanout group; works on any device, one copy each way.
//! - [`af_xdp`] (Linux): a device's queues through AF_XDP sockets and a small XDP program
//!   (zero-copy where the driver has it, copy mode otherwise, as on veth).
//! - [`link`] (Linux): the kernel's view of a device (index, up/down, carrier, MTU, MAC, queue
//!   counts) and a monitor of its changes, for the drivers that sit on kernel devices.
//!
//! The kernel's TAP twins of the router's interfaces live in the control plane
//! (`control::punt::tap`), since only the punt thread reads and writes them.

#[cfg(target_os = "linux")]
pub mod af_packet;
#[cfg(target_os = "linux")]
pub mod af_xdp;
#[cfg(target_os = "linux")]
pub mod link;
pub mod mem;
pub mod netlink;
pub mod pcap;
pub mod replay;
#[cfg(target_os = "linux")]
pub mod shm;
pub mod sockopt;

use crate::buffer::{BufCache, PktBuf};

pub trait RxQueue: Send {
    /// Appends up to `max` received frames to `out`; returns how many.
    fn rx_burst(&mut self, cache: &mut BufCache, out: &mut Vec<PktBuf>, max: usize) -> usize;

    /// Frames that arrived since the last call but could not be delivered (a capture record too
    /// long for a buffer, or unreadable); the worker adds them to the port's `rx_errors`. Called
    /// after every burst.
    fn take_rx_errors(&mut self) -> u64 {
        0
    }

    /// True once the queue can never deliver again (a drained capture file). Live ports never are.
    fn is_exhausted(&self) -> bool {
        false
    }

    /// Leaves the queue's ring to a reader in another process (a hitless restart: the new
    /// router process reads on where this one stopped): says where this reader stands, and
    /// from now on dropping the queue leaves the ring as it is. None: the ring cannot outlive
    /// this process (a mem ring, a capture file, AF_XDP).
    fn hand_over(&mut self) -> Option<RingPosition> {
        None
    }

    /// Reads on from `at`, where the previous reader of this ring (another process) stopped.
    fn take_over(&mut self, _at: RingPosition) {}
}

/// Where a reader stands in a receive ring that outlives its process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingPosition {
    /// The ring keeps its own indices (a shared-memory file): nothing to carry.
    InRing,
    /// The next slot of a one-frame-per-slot ring (AF_PACKET TPACKET_V2).
    Slot(u64),
    /// The block of a block ring (AF_PACKET TPACKET_V3), and, if the reader held it half
    /// read, the frames left in it and the next one's offset in the mapping.
    Block { block: u64, left: u32, off: u64 },
}

pub trait TxQueue: Send {
    /// Sends frames from the front of `pkts`, removing those it took; frames it could not take
    /// (queue full) stay in `pkts` for the caller to count and free. Returns how many it took.
    fn tx_burst(&mut self, pkts: &mut Vec<PktBuf>, cache: &mut BufCache) -> usize;

    /// Pushes out anything buffered (files), or asks again for what waits in a ring. Called
    /// when the worker is idle or stopping, and by the tester until nothing waits.
    fn flush(&mut self) {}

    /// Frames `tx_burst` took that have not left for the link yet (a transmit ring's slots
    /// the kernel has not sent, because it would not take more at that moment). 0 for queues
    /// that hand a frame on when they take it.
    fn unsent(&self) -> usize {
        0
    }

    /// Takes back the frames [`unsent`](Self::unsent) counts, so they never leave, and returns
    /// how many: they were the last ones taken. The tester closes a trial with it (a frame
    /// left in a ring would otherwise leave at the start of the next trial, stale).
    fn take_back_unsent(&mut self) -> usize {
        0
    }
}

/// A port as the worker sees it: its queues for this worker.
pub struct PortQueues {
    pub name: String,
    pub rx: Option<Box<dyn RxQueue>>,
    pub tx: Option<Box<dyn TxQueue>>,
}
