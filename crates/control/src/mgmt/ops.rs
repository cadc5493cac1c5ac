//! Run-time operations: routes through the API, ports taken out of and put back in service,
//! workers added and removed, counters cleared, capture and trace.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use api::requests::{CaptureRequest, RouteRequest, TraceRequest};
use dataplane::tap::{CaptureSpec, Captured, Node, Point, TraceSpec, Traced};
use packet::filter::Filter;

use super::capture_file::{self, CaptureFormat};
use super::{ApiError, ApiResult, Core, PrefixKey};
use crate::config::{Prefix, Target};
use crate::syslog::Severity;

/// Captured frames as a file.
pub struct CaptureFile {
    pub format: CaptureFormat,
    pub frames: usize,
    pub bytes: Vec<u8>,
}

/// A route request's prefix and what it points at, or what is wrong with them.
pub fn route_of(r: &RouteRequest) -> ApiResult<(Prefix, Target)> {
    let p = Prefix::parse(&r.prefix).map_err(ApiError::invalid)?;
    Ok((p, parse_target(r)?))
}

/// The capture a request asks for on `port` (the index its name resolved to), or what is wrong
/// with it.
pub fn capture_spec(r: &CaptureRequest, port: Option<u16>) -> ApiResult<CaptureSpec> {
    let filter = Filter::parse(&r.filter)
        .map_err(|e| ApiError::invalid(format!("filter `{}`: {e}", r.filter)))?;
    let mut points = Vec::new();
    let dir = r.direction.as_deref().unwrap_or("both");
    // The port's own points unless only a node's output or the drops were asked for.
    if r.node.is_none() && !r.drops || r.direction.is_some() {
        match dir {
            "rx" => points.push(Point::Rx(port)),
            "tx" => points.push(Point::Tx(port)),
            "both" => {
                points.push(Point::Rx(port));
                points.push(Point::Tx(port));
            }
            d => {
                return Err(ApiError::invalid(format!(
                    "direction `{d}`: expected rx, tx or both"
                )))
            }
        }
    }
    if let Some(n) = &r.node {
        let node = Node::parse(n).ok_or_else(|| {
            let all: Vec<&str> = Node::ALL.iter().map(|n| n.name()).collect();
            ApiError::invalid(format!("no node `{n}` (nodes: {})", all.join(", ")))
        })?;
        points.push(Point::Node(node));
    }
    if r.drops {
        points.push(Point::Drop);
    }
    if r.count == 0 {
        return Err(ApiError::invalid("count must be at least 1"));
    }
    Ok(CaptureSpec {
        points,
        port,
        filter,
        count: r.count,
        snaplen: r.snaplen.clamp(14, 65535),
    })
}

/// The trace a request asks for on `port` (the index its name resolved to), or what is wrong
/// with it.
pub fn trace_spec(r: &TraceRequest, port: Option<u16>) -> ApiResult<TraceSpec> {
    let filter = Filter::parse(&r.filter)
        .map_err(|e| ApiError::invalid(format!("filter `{}`: {e}", r.filter)))?;
    if r.count == 0 || r.count > 10_000 {
        return Err(ApiError::invalid("count must be 1..=10000"));
    }
    Ok(TraceSpec {
        port,
        filter,
        count: r.count,
    })
}

/// When a capture or trace that may wait `timeout_ms` gives up; a time the clock cannot reach
/// is the client's mistake.
pub fn deadline(timeout_ms: u64) -> ApiResult<Instant> {
    Instant::now()
        .checked_add(Duration::from_millis(timeout_ms))
        .ok_or_else(|| ApiError::invalid(format!("timeout_ms {timeout_ms}: too far")))
}

fn parse_target(r: &RouteRequest) -> ApiResult<Target> {
    match (r.via.is_empty(), r.blackhole, r.reject) {
        (false, false, false) => Ok(Target::Via(
            r.via
                .iter()
                .map(|a| {
                    a.parse::<IpAddr>()
                        .map_err(|_| ApiError::invalid(format!("via: `{a}` is not an IP address")))
                })
                .collect::<ApiResult<_>>()?,
        )),
        (true, true, false) => Ok(Target::Blackhole),
        (true, false, true) => Ok(Target::Reject),
        _ => Err(ApiError::invalid(
            "give exactly one of `via`, `blackhole` or `reject`",
        )),
    }
}

impl Core {
    fn vrf_index(&self, s: &super::State, vrf: Option<&str>) -> ApiResult<usize> {
        let name = vrf.unwrap_or("default");
        s.router
            .cfg
            .vrfs
            .iter()
            .position(|v| v == name)
            .ok_or_else(|| ApiError::not_found(format!("no VRF `{name}`")))
    }

    /// Adds or replaces a route of API origin. Configured routes (connected, static, route
    /// files) take precedence: a prefix they hold is refused. It replaces a route of a weaker
    /// source (FPM), which comes back when the API route is deleted (see `sources`).
    pub fn route_add(&self, r: &RouteRequest) -> ApiResult<()> {
        let mut s = self.lock("route.add");
        let vrf = self.vrf_index(&s, r.vrf.as_deref())?;
        let (p, t) = route_of(r)?;
        let key = PrefixKey::from(p);
        if s.router.is_configured(vrf, p) {
            return Err(ApiError::conflict(format!(
                "{p} is a configured route in VRF {}; API routes do not replace configured ones",
                s.router.cfg.vrfs[vrf]
            )));
        }
        if let Err(e) = s.router.add_route(vrf, p, &t) {
            if e.contains("full") || e.contains("limit") || e.contains("capacity") {
                self.logger.log(
                    Severity::Warning,
                    "TABLE_LIMIT",
                    &[
                        ("table", "routes".into()),
                        ("vrf", s.router.cfg.vrfs[vrf].clone()),
                    ],
                    format!("route table limit reached: {e}"),
                );
            }
            return Err(ApiError::invalid(e));
        }
        s.router
            .publish()
            .map_err(|e| ApiError::internal(e.to_string()))?;
        s.api_routes.insert((vrf, key), t);
        Ok(())
    }

    /// Removes a route of API origin.
    pub fn route_del(&self, vrf: Option<&str>, prefix: &str) -> ApiResult<()> {
        let mut s = self.lock("route.del");
        let vrf = self.vrf_index(&s, vrf)?;
        let p = Prefix::parse(prefix).map_err(ApiError::invalid)?;
        if s.api_routes.remove(&(vrf, PrefixKey::from(p))).is_none() {
            return Err(ApiError::not_found(format!(
                "{p} is not a route added through the API in VRF {}",
                s.router.cfg.vrfs[vrf]
            )));
        }
        s.router.remove_route(vrf, p);
        super::sources::restore_below(&mut s, super::sources::Origin::Api, vrf, p);
        s.router
            .publish()
            .map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(())
    }

    /// Takes a port out of service (as if pulled): its interfaces go down, routes through it
    /// stop being used, its queues are parked. Other ports are not touched.
    pub fn port_remove(&self, name: &str) -> ApiResult<()> {
        let mut s = self.lock("port.remove");
        let idx = s
            .router
            .port_index(name)
            .ok_or_else(|| ApiError::not_found(format!("no port `{name}`")))?;
        if !s.runtime.is_in_service(idx) {
            return Err(ApiError::conflict(format!(
                "port {name} is already out of service"
            )));
        }
        s.router.ports_down.insert(name.to_string());
        s.router
            .publish()
            .map_err(|e| ApiError::internal(e.to_string()))?;
        s.runtime
            .out_of_service(idx)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        self.logger.log(
            Severity::Warning,
            "PORT_REMOVED",
            &[("port", name.to_string())],
            format!("port {name} removed from service"),
        );
        for i in s.router.ifs.iter().filter(|i| i.port == idx && i.up) {
            self.logger.log(
                Severity::Warning,
                "LINK_DOWN",
                &[("interface", i.name.clone())],
                format!("interface {} is down (port {name} removed)", i.name),
            );
        }
        Ok(())
    }

    /// Puts a port back in service.
    pub fn port_insert(&self, name: &str) -> ApiResult<()> {
        let mut s = self.lock("port.insert");
        let idx = s
            .router
            .port_index(name)
            .ok_or_else(|| ApiError::not_found(format!("no port `{name}`")))?;
        if s.runtime.is_in_service(idx) {
            return Err(ApiError::conflict(format!("port {name} is in service")));
        }
        s.runtime
            .in_service(idx)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        s.router.ports_down.remove(name);
        s.router
            .publish()
            .map_err(|e| ApiError::internal(e.to_string()))?;
        self.logger.log(
            Severity::Notice,
            "PORT_INSERTED",
            &[("port", name.to_string())],
            format!("port {name} back in service"),
        );
        for i in s.router.ifs.iter().filter(|i| i.port == idx && i.up) {
            self.logger.log(
                Severity::Notice,
                "LINK_UP",
                &[("interface", i.name.clone())],
                format!("interface {} is up", i.name),
            );
        }
        Ok(())
    }

    /// Sets the link of a mem port down or up, as a cable pulled and plugged back: the port's
    /// interfaces go down (routes and Flexlink pairs move off it) exactly as when the kernel
    /// reports a link change on a real port. Kernel-backed ports are refused: their link is the
    /// kernel's to report (`ip link set DEV down` on the far end is the cable pull there).
    pub fn port_link(&self, name: &str, up: bool) -> ApiResult<()> {
        {
            let s = self.lock("port.link");
            s.router
                .port_index(name)
                .ok_or_else(|| ApiError::not_found(format!("no port `{name}`")))?;
            let mem = s
                .router
                .cfg
                .ports
                .iter()
                .any(|p| p.name == name && matches!(p.driver, crate::config::Driver::Mem));
            if !mem {
                return Err(ApiError::conflict(format!(
                    "port {name} is on a kernel device: its link state is the kernel's (set the device or its peer down)"
                )));
            }
        }
        self.link_changed(name, up);
        Ok(())
    }

    /// Starts one more worker (pinned to `core` if given); returns its id.
    pub fn worker_add(&self, core: Option<usize>) -> ApiResult<usize> {
        let mut s = self.lock("worker.add");
        let id = s
            .runtime
            .add_worker(core)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let c = core.map_or("any".to_string(), |c| c.to_string());
        self.logger.log(
            Severity::Notice,
            "WORKER_ADDED",
            &[("worker", id.to_string()), ("core", c.clone())],
            format!("worker {id} added (core {c})"),
        );
        Ok(id)
    }

    /// Retires a worker; its receive queues move to the others first.
    pub fn worker_remove(&self, id: usize) -> ApiResult<()> {
        let mut s = self.lock("worker.remove");
        s.runtime.remove_worker(id).map_err(|e| {
            if e.0.starts_with("no worker") {
                ApiError::not_found(e.0)
            } else {
                ApiError::conflict(e.0)
            }
        })?;
        self.logger.log(
            Severity::Notice,
            "WORKER_REMOVED",
            &[("worker", id.to_string())],
            format!("worker {id} removed"),
        );
        Ok(())
    }

    /// Shows count from now on (metrics keep counting from zero, as Prometheus expects).
    pub fn clear_counters(&self) {
        let mut s = self.lock("counters.clear");
        s.baseline = s.runtime.snapshot();
        let per: Vec<(usize, [u64; dataplane::counters::DROP_COUNT])> = s
            .runtime
            .worker_counters()
            .into_iter()
            .map(|(id, c)| {
                (
                    id,
                    std::array::from_fn(|i| c.drops[i].load(std::sync::atomic::Ordering::Relaxed)),
                )
            })
            .collect();
        s.worker_baseline = per.into_iter().collect();
        s.runtime_baseline = super::graph::baselines(&s.runtime);
        self.logger.log(
            Severity::Informational,
            "COUNTERS_CLEARED",
            &[],
            "counters cleared",
        );
    }

    fn port_arg(&self, s: &super::State, port: Option<&str>) -> ApiResult<Option<u16>> {
        port.map(|n| {
            s.router
                .port_index(n)
                .ok_or_else(|| ApiError::not_found(format!("no port `{n}`")))
        })
        .transpose()
    }

    /// Captures frames while forwarding goes on; returns them once `count` frames matched or
    /// the timeout passed.
    pub fn capture(&self, r: &CaptureRequest) -> ApiResult<Vec<Captured>> {
        // Checked before anything starts: a capture left armed would run on unasked.
        let deadline = deadline(r.timeout_ms)?;
        let taps = {
            let s = self.lock("capture.start");
            let port = self.port_arg(&s, r.port.as_deref())?;
            s.runtime.taps.start_capture(capture_spec(r, port)?);
            s.runtime.taps.clone()
        };
        let mut frames = Vec::new();
        loop {
            let (mut got, done) = taps.drain_capture();
            frames.append(&mut got);
            if done {
                break;
            }
            if Instant::now() >= deadline {
                frames.append(&mut taps.stop_capture());
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        frames.sort_by_key(|f| f.unix_ns);
        frames.truncate(r.count as usize);
        Ok(frames)
    }

    /// Captures as [`Core::capture`] does and writes the frames as a file of the requested
    /// format (pcapng: an interface per capture point, named after it).
    pub fn capture_file(&self, r: &CaptureRequest) -> ApiResult<CaptureFile> {
        let format = match r.format.as_deref() {
            None => CaptureFormat::Pcap,
            Some(f) => CaptureFormat::parse(f).ok_or_else(|| {
                ApiError::invalid(format!("format `{f}`: expected pcap or pcapng"))
            })?,
        };
        let frames = self.capture(r)?;
        let names = self.lock("capture.names").router.port_slots.clone();
        let snaplen = r.snaplen.clamp(14, 65535) as u32;
        let bytes = capture_file::encode(&frames, format, snaplen, |i| {
            // Frames the control plane sent into a bridge came in by no port: by its BVI.
            if i == dataplane::tables::BVI_PORT {
                return Some("bvi".into());
            }
            names.get(usize::from(i)).cloned().flatten()
        })
        .map_err(|e| ApiError::internal(format!("{}: {e}", format.name())))?;
        Ok(CaptureFile {
            format,
            frames: frames.len(),
            bytes,
        })
    }

    /// Follows the next `count` frames (matching the filter, on the port if given) through the
    /// nodes.
    pub fn trace(&self, r: &TraceRequest) -> ApiResult<Vec<Traced>> {
        let deadline = deadline(r.timeout_ms)?;
        let taps: Arc<dataplane::tap::Taps> = {
            let s = self.lock("trace.start");
            let port = self.port_arg(&s, r.port.as_deref())?;
            s.runtime.taps.start_trace(trace_spec(r, port)?);
            s.runtime.taps.clone()
        };
        let mut out = Vec::new();
        loop {
            let (mut got, done) = taps.drain_trace();
            out.append(&mut got);
            if done && out.len() >= r.count as usize || Instant::now() >= deadline {
                out.append(&mut taps.stop_trace());
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        out.sort_by_key(|t| t.id);
        Ok(out)
    }
}
