//! Embedded mode: a Linerate router in this process, its `mem` ports wired to tester ports. The
//! router's workers run on the cores its config names; the tester runs on the calling thread,
//! which [`Embedded::pin_tester`] moves to a core of its own where the machine has one.

use std::sync::Arc;

use std::path::PathBuf;

use control::mgmt::Core;
use control::runtime::CounterRegistry;
use control::syslog::Logger;
use control::{MemPeer, Router, StartOptions};
use dataplane::{DropReason, Pool};

use crate::atm::{sonet_cells_per_s, AtmHostRx, AtmHostTx, Wire};
use crate::engine::{DutProbe, TesterPort};

/// Frames each router-to-tester ring holds: enough to ride out the tester thread losing its core
/// for a few milliseconds at several Mpps per port without the router's transmit queue filling
/// (which would read as router loss). Buffers come from the shared pool, so a deep ring costs
/// memory only while it is full.
pub const TX_RING: usize = 16384;

pub struct Embedded {
    /// The router's management core: it owns the router's tables and its running workers, so
    /// a scenario can change them under traffic exactly as the API would.
    pub core: Option<Arc<Core>>,
    pub pool: Arc<Pool>,
    /// Cores the router's workers are pinned to.
    pub worker_cores: Vec<usize>,
}

/// Drop counters of a running router, for the tester to attribute loss.
pub struct RouterProbe {
    counters: CounterRegistry,
    ports: usize,
}

impl DutProbe for RouterProbe {
    fn drops(&self) -> Vec<(&'static str, u64)> {
        let all = self
            .counters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let s = dataplane::Snapshot::sum(&all, self.ports);
        DropReason::ALL
            .iter()
            .map(|&d| (d.name(), s.drop_count(d)))
            .collect()
    }

    /// Every port of an embedded router is a tester port, so a full transmit queue is always
    /// the tester not keeping up.
    fn tester_fault(&self, trial_drops: &[(&'static str, u64)]) -> u64 {
        trial_drops
            .iter()
            .filter(|d| d.0 == DropReason::TxQueueFull.name())
            .map(|d| d.1)
            .sum()
    }
}

impl Embedded {
    /// Starts the router's workers with rings of `ring` frames (a NIC's descriptor ring: what
    /// absorbs a burst before the device drops). Each `mem` port becomes a tester port with the
    /// nominal speed `speeds[i]`. `config` is the text and path the router was built from (the
    /// running config its management core reports).
    pub fn start(
        router: Router,
        config: (String, PathBuf),
        ring: usize,
        buffers: usize,
        speeds: &[f64],
    ) -> Result<(Embedded, Vec<TesterPort>, RouterProbe), String> {
        let pool = Pool::try_new(buffers)?;
        let (running, peers) = router
            .start(StartOptions {
                ring_size: ring,
                tx_ring_size: Some(TX_RING),
                idle_yield_after: 0,
                idle_sleep_us: 0,
                pool: Some(pool.clone()),
                replay: None,
                replay_whole: false,
                exit_when_drained: false,
                punt: None,
                adopt: None,
            })
            .map_err(|e| e.to_string())?;
        if peers.len() != speeds.len() {
            return Err(format!(
                "{} mem ports but {} port speeds",
                peers.len(),
                speeds.len()
            ));
        }
        let ports = peers
            .into_iter()
            .zip(speeds)
            .map(|(p, &speed_bps)| {
                let MemPeer {
                    name,
                    to_router,
                    from_router,
                } = p;
                // An ATM port's far end is the first PVC the router has on it.
                let pvc = router
                    .cfg
                    .ports
                    .iter()
                    .find(|pc| pc.name == name && pc.atm.is_some())
                    .and_then(|_| {
                        router
                            .cfg
                            .interfaces
                            .iter()
                            .find(|i| i.port == name)
                            .and_then(|i| i.atm.as_ref())
                            .map(|a| (a.vpi, a.vci))
                    });
                let tx = to_router
                    .into_iter()
                    .map(|q| match pvc {
                        Some((vpi, vci)) => {
                            Box::new(AtmHostTx::new(Box::new(q), vpi, vci, pool.clone()))
                                as Box<dyn dataplane::port::TxQueue>
                        }
                        None => Box::new(q) as Box<dyn dataplane::port::TxQueue>,
                    })
                    .collect();
                let rx: Box<dyn dataplane::port::RxQueue> = match pvc {
                    Some((vpi, vci)) => Box::new(AtmHostRx::new(
                        Box::new(from_router),
                        vpi,
                        vci,
                        pool.clone(),
                    )),
                    None => Box::new(from_router),
                };
                TesterPort {
                    name,
                    speed_bps,
                    tx,
                    rx: vec![rx],
                    load_scale: 1.0,
                    wire: match pvc {
                        Some(_) => Wire::Atm {
                            cells_per_s: sonet_cells_per_s(speed_bps),
                        },
                        None => Wire::Ethernet,
                    },
                    refusal: crate::engine::Refusal::DeviceDrop,
                }
            })
            .collect();
        let probe = RouterProbe {
            counters: running.counter_registry(),
            ports: router.port_slots.len(),
        };
        let worker_cores = router.cfg.cores.clone();
        let logger =
            Logger::new(router.cfg.logging.clone()).map_err(|e| format!("logging: {e}"))?;
        let core = Core::new(router, running, config.0, config.1, Arc::new(logger), None)
            .map_err(|e| e.to_string())?;
        Ok((
            Embedded {
                core: Some(core),
                pool,
                worker_cores,
            },
            ports,
            probe,
        ))
    }

    /// Pins the calling (tester) thread to the first core the workers do not use; returns it, or
    /// None when every core runs a worker (then the report says the tester shared a core).
    pub fn pin_tester(&self) -> Option<usize> {
        let cores = core_affinity::get_core_ids()?;
        let free = cores.iter().find(|c| !self.worker_cores.contains(&c.id))?;
        core_affinity::set_for_current(*free).then_some(free.id)
    }

    /// Stops the workers; returns the final counters.
    pub fn stop(&mut self) -> Option<dataplane::Snapshot> {
        let core = self.core.take()?;
        let snap = core.lock("tester.stop").runtime.snapshot();
        core.shutdown();
        Some(snap)
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        self.stop();
    }
}
