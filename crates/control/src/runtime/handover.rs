//! The data plane's part of a hitless restart (see `crate::handover` for the whole): the old
//! process says which descriptors its ports need, stops its workers between two bursts and says
//! where each receive queue stood; the new one opens the same ports from those descriptors and
//! files, holds their receive queues unpolled while the old one still reads them, and starts
//! polling from where the old one stopped.
//!
//! A frame arriving meanwhile waits in its ring (the shared-memory file's, the AF_PACKET
//! socket's): nothing is dropped unless the ring fills, which at 4,096 slots and 1 Mfps per
//! queue takes 4 ms, against the tens of microseconds between the old workers' last burst and
//! the new ones' first.

use std::collections::HashMap;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use dataplane::port::RingPosition;
use dataplane::worker::{Command, Retired};

use super::{recv, PortDriver, Runtime};
use crate::router::BuildError;

/// What the new process was handed of the old one's ports: AF_PACKET receive sockets by port
/// name; shared-memory files are adopted from their paths.
#[derive(Clone, Default)]
pub struct Adopted {
    fds: Arc<Mutex<HashMap<String, Vec<OwnedFd>>>>,
}

impl Adopted {
    pub fn new(fds: HashMap<String, Vec<OwnedFd>>) -> Adopted {
        Adopted {
            fds: Arc::new(Mutex::new(fds)),
        }
    }

    /// Port `name`'s sockets, once.
    pub fn take_fds(&self, name: &str) -> Option<Vec<OwnedFd>> {
        self.fds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name)
    }
}

/// Where one receive queue stood when the old process let go of it.
#[derive(Clone, Debug)]
pub struct QueueAt {
    pub port: String,
    pub queue: u16,
    pub at: RingPosition,
}

impl Runtime {
    /// The descriptors each port needs in the next process, by port name (AF_PACKET receive
    /// sockets; none for a shared-memory port, whose file stays). An error names a port whose
    /// queues cannot outlive this process (AF_XDP, a capture file).
    pub fn handover_fds(&self) -> Result<Vec<(String, Vec<BorrowedFd<'_>>)>, String> {
        let mut out = Vec::new();
        for p in self.ports.iter().flatten() {
            match &p.driver {
                PortDriver::AfPacket(a) => out.push((p.name.clone(), a.rx_fds())),
                PortDriver::Shm(_) => {}
                // A daemon's mem port has no tester at its far end: nothing to carry.
                PortDriver::Mem { .. } | PortDriver::Replay => {}
                PortDriver::AfXdp(_) => {
                    return Err(format!(
                        "port {} is af_xdp: its UMEM is not handed over yet (restart it cold)",
                        p.name
                    ))
                }
                PortDriver::Pcap { .. } => {
                    return Err(format!(
                        "port {} is a capture file: it cannot be handed over",
                        p.name
                    ))
                }
            }
        }
        Ok(out)
    }

    /// Lets go of the data plane for the next process: every worker finishes its burst,
    /// flushes and ends; each receive queue says where it stood and is kept, unpolled, until
    /// this process ends; shared-memory files are left in place. The counters stay readable.
    pub fn hand_over(&mut self) -> Result<Vec<QueueAt>, BuildError> {
        let mut slots = Vec::new();
        for mut w in std::mem::take(&mut self.workers) {
            let (reply, rx) = channel();
            w.mailbox.post(Command::Retire { reply });
            let Retired { rx: got, tx } = recv(rx, "retire for the hand-over")?;
            if let Some(h) = w.handle.take() {
                let _ = h.join();
            }
            slots.extend(got);
            for (port, q) in tx {
                self.return_tx(port as usize, q);
            }
        }
        for p in self.ports.iter_mut().flatten() {
            slots.append(&mut p.parked);
            if let PortDriver::Shm(s) = &p.driver {
                s.disown();
            }
        }
        let mut at = Vec::new();
        for mut s in slots {
            if let Some(pos) = s.q.hand_over() {
                let name = self.port_name(s.port).unwrap_or_default().to_string();
                at.push(QueueAt {
                    port: name,
                    queue: s.queue,
                    at: pos,
                });
            }
            self.handed.push(s);
        }
        Ok(at)
    }

    /// Starts polling the adopted ports' receive queues, each from where the old process
    /// stopped (`at`; a queue it did not name starts where its ring says).
    pub fn release_held(&mut self, at: &[QueueAt]) {
        let pos: HashMap<(&str, u16), RingPosition> = at
            .iter()
            .map(|q| ((q.port.as_str(), q.queue), q.at))
            .collect();
        for mut s in std::mem::take(&mut self.held) {
            let name = self.port_name(s.port).unwrap_or_default();
            s.q.take_over(
                pos.get(&(name, s.queue))
                    .copied()
                    .unwrap_or(RingPosition::InRing),
            );
            // Placed when the port opened (the worker's id), as if polled from the start.
            let first = self.workers.first().map_or(0, |w| w.id);
            let id = self
                .placement
                .get(&(s.port, s.queue))
                .copied()
                .filter(|id| self.worker(*id).is_some())
                .unwrap_or(first);
            self.give_rx(id, s);
        }
    }

    /// Receive queues still held (an adopted port before [`Runtime::release_held`]).
    pub fn held(&self) -> usize {
        self.held.len()
    }
}
