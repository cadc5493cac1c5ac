//! `show link PORT`: the link under a port, read from its kernel device's sysfs attributes
//! (state, carrier and its changes, speed, duplex, MTU, the driver's error counters) beside the
//! router's own counters for the port. The event manager's link-down mail carries it.

use std::path::Path;

use api::views::LinkDiagView;

use super::{ApiError, ApiResult, Core};
use crate::config::Driver;

fn read(dir: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(name))
        .ok()
        .map(|s| s.trim().to_string())
}

impl Core {
    pub fn link_diagnostics(&self, port: &str) -> ApiResult<LinkDiagView> {
        let p = self
            .ports()
            .into_iter()
            .find(|p| p.name == port)
            .ok_or_else(|| ApiError::not_found(format!("no port is named {port}")))?;
        let (device, link_up) = {
            let s = self.lock("show.link");
            let device = s
                .router
                .cfg
                .ports
                .iter()
                .find(|c| c.name == port)
                .and_then(|c| match &c.driver {
                    Driver::AfPacket { device, .. } | Driver::AfXdp { device, .. } => {
                        Some(device.clone())
                    }
                    _ => None,
                });
            (device, !s.router.links_down.contains(port))
        };
        let mut v = LinkDiagView {
            port: port.to_string(),
            device: device.clone(),
            in_service: p.in_service,
            link_up,
            rx_packets: p.rx_packets,
            rx_bytes: p.rx_bytes,
            rx_errors: p.rx_errors,
            tx_packets: p.tx_packets,
            tx_bytes: p.tx_bytes,
            ..Default::default()
        };
        let Some(dev) = device else {
            return Ok(v);
        };
        let dir = Path::new("/sys/class/net").join(&dev);
        v.operstate = read(&dir, "operstate");
        // `carrier` and `speed` cannot be read on a device that is down (EINVAL).
        v.carrier = read(&dir, "carrier").map(|c| c == "1");
        v.carrier_changes = read(&dir, "carrier_changes").and_then(|x| x.parse().ok());
        v.carrier_up_count = read(&dir, "carrier_up_count").and_then(|x| x.parse().ok());
        v.carrier_down_count = read(&dir, "carrier_down_count").and_then(|x| x.parse().ok());
        v.speed_mbps = read(&dir, "speed").and_then(|x| x.parse().ok());
        v.duplex = read(&dir, "duplex");
        v.mtu = read(&dir, "mtu").and_then(|x| x.parse().ok());
        v.mac = read(&dir, "address");
        if let Ok(rd) = std::fs::read_dir(dir.join("statistics")) {
            let mut c: Vec<(String, u64)> = rd
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let val = read(&dir.join("statistics"), &name)?.parse().ok()?;
                    Some((name, val))
                })
                .collect();
            c.sort();
            v.device_counters = c;
        }
        Ok(v)
    }
}
