//! Link state of the kernel devices under the router's ports: a thread follows rtnetlink's link
//! events and tells the management core when a device loses or regains its link, so the port's
//! interfaces go operationally down (their next hops stop being used, ECMP groups drop them)
//! and come back, with a LINK_DOWN / LINK_UP record each time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use dataplane::port::link::{link_state, LinkMonitor};

use crate::config::{Config, Driver};
use crate::mgmt::Core;

pub struct LinkWatch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LinkWatch {
    /// Starts following the devices of `cfg`'s kernel ports; None when it has none.
    pub fn start(cfg: &Config, core: Weak<Core>) -> Result<Option<LinkWatch>, String> {
        let devices: HashMap<String, String> = cfg
            .ports
            .iter()
            .filter_map(|p| match &p.driver {
                Driver::AfPacket { device, .. } | Driver::AfXdp { device, .. } => {
                    Some((device.clone(), p.name.clone()))
                }
                _ => None,
            })
            .collect();
        if devices.is_empty() {
            return Ok(None);
        }
        // Subscribed before the first look, so no change falls between the two.
        let mut mon = LinkMonitor::new()?;
        if let Some(c) = core.upgrade() {
            for (dev, port) in &devices {
                let up = link_state(dev).map(|l| l.oper_up).unwrap_or(false);
                c.link_changed(port, up);
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("link".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    let events = mon.poll(Duration::from_millis(200));
                    let Some(c) = core.upgrade() else { break };
                    for ev in events {
                        if let Some(port) = devices.get(&ev.name) {
                            c.link_changed(port, ev.oper_up && !ev.removed);
                        }
                    }
                }
            })
            .map_err(|e| format!("cannot start the link thread: {e}"))?;
        Ok(Some(LinkWatch {
            stop,
            thread: Some(thread),
        }))
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for LinkWatch {
    fn drop(&mut self) {
        self.stop();
    }
}
