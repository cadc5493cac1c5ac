//! The `ports` and `interfaces` sections.

use std::path::Path;

use fib::Key;

use super::fields::{mac, seq, Errs, Fields};
use super::{services, Config, Driver, InterfaceCfg, PortCfg};
use crate::yaml::Node;

/// `ports`: each a name and a driver (pcap files, mem rings, AF_PACKET, AF_XDP, shared memory).
pub(super) fn parse_ports<'a>(top: &mut Fields<'a>, dir: &Path, e: &mut Errs, cfg: &mut Config) {
    for (n, path) in seq(top, "ports", e) {
        let Some(mut f) = Fields::new(path.clone(), n, e) else {
            continue;
        };
        let origin = f.origin();
        let name = f.required("name", e);
        let driver = f.required("driver", e);
        let rx = f.str("rx", e).map(|p| dir.join(p));
        let tx = f.str("tx", e).map(|p| dir.join(p));
        let device = f.str("device", e);
        // 0: as many as the device has (AF_XDP sees only the queues it binds), or one (AF_PACKET
        // sees the whole device through any number).
        let queues: u16 = f.parse("queues", "a queue count", e).unwrap_or(0);
        let rx_ring = f.str("rx-ring", e);
        let frames = match rx_ring.as_deref() {
            None | Some("frames") => true,
            Some("blocks") => false,
            Some(x) => {
                e.at(
                    n,
                    &format!("{path}.rx-ring"),
                    format!("`{x}`: frames (TPACKET_V2, the default) or blocks (TPACKET_V3)"),
                );
                true
            }
        };
        if rx_ring.is_some() && driver.as_deref() != Some("af_packet") {
            e.at(
                n,
                &format!("{path}.rx-ring"),
                "only an af_packet port has a receive ring to choose",
            );
        }
        if queues > 64 {
            e.at(
                n,
                &format!("{path}.queues"),
                "queues must be 1..=64 (or 0: automatic)",
            );
        }
        // Shared-memory ports: the file, which end, ring slots, the longest frame.
        let shm_path = f.str("path", e).map(|p| dir.join(p));
        let role = f.str("role", e);
        let slots: Option<u32> = f.parse("slots", "a slot count", e);
        let max_frame: Option<u32> = f.parse("max-frame", "a frame size in bytes", e);
        if driver.as_deref() != Some("shm") {
            for (k, given) in [
                ("path", shm_path.is_some()),
                ("role", role.is_some()),
                ("slots", slots.is_some()),
                ("max-frame", max_frame.is_some()),
            ] {
                if given {
                    e.at(
                        f.node(k).unwrap_or(n),
                        &format!("{path}.{k}"),
                        format!("only an shm port takes `{k}`"),
                    );
                }
            }
        }
        let kernel_dev = |e: &mut Errs| {
            if device.is_none() {
                e.at(
                    n,
                    &path,
                    "this driver needs `device` (a Linux interface name)",
                );
            }
            device.clone().unwrap_or_default()
        };
        let driver = match driver.as_deref() {
            Some("pcap") => {
                if rx.is_none() && tx.is_none() {
                    e.at(n, &path, "a pcap port needs `rx` and/or `tx` files");
                }
                Some(Driver::Pcap { rx, tx })
            }
            Some("mem") => Some(Driver::Mem),
            Some("af_packet") => Some(Driver::AfPacket {
                device: kernel_dev(e),
                queues,
                frames,
            }),
            Some("af_xdp") => Some(Driver::AfXdp {
                device: kernel_dev(e),
                queues,
            }),
            Some("shm") => {
                let server = match role.as_deref() {
                    None | Some("client") => false,
                    Some("server") => true,
                    Some(x) => {
                        e.at(
                            f.node("role").unwrap_or(n),
                            &format!("{path}.role"),
                            format!("`{x}`: server (makes the file) or client (maps it)"),
                        );
                        false
                    }
                };
                let slots = slots.unwrap_or(1024);
                if !slots.is_power_of_two() || !(2..=65_536).contains(&slots) {
                    e.at(
                        f.node("slots").unwrap_or(n),
                        &format!("{path}.slots"),
                        format!("{slots}: a power of two, 2..=65536"),
                    );
                }
                let max_frame = max_frame.unwrap_or(9216);
                if !(64..=9216).contains(&max_frame) {
                    e.at(
                        f.node("max-frame").unwrap_or(n),
                        &format!("{path}.max-frame"),
                        format!("{max_frame}: 64..=9216 bytes"),
                    );
                }
                if shm_path.is_none() {
                    e.at(
                        n,
                        &path,
                        "an shm port needs `path` (its shared-memory file)",
                    );
                }
                Some(Driver::Shm {
                    path: shm_path.unwrap_or_default(),
                    server,
                    queues,
                    slots,
                    max_frame,
                })
            }
            Some(d) => {
                e.at(
                    n,
                    &format!("{path}.driver"),
                    format!("unknown driver `{d}` (pcap, mem, af_packet, af_xdp, shm)"),
                );
                None
            }
            None => None,
        };
        let atm = super::atm::parse_port(&mut f, n, driver.as_ref(), e);
        f.finish(e);
        if let (Some(name), Some(driver)) = (name, driver) {
            if cfg.ports.iter().any(|p| p.name == name) {
                e.at(
                    n,
                    &format!("{path}.name"),
                    format!("port `{name}` defined twice"),
                );
            }
            cfg.ports.push(PortCfg {
                name,
                driver,
                atm,
                origin,
            });
        }
    }
}

/// `interfaces`: each on a port (and VLAN), with its MAC, MTU, VRF and addresses.
pub(super) fn parse_interfaces<'a>(top: &mut Fields<'a>, e: &mut Errs, cfg: &mut Config) {
    let mut sites: Vec<Site> = Vec::new();
    for (n, path) in seq(top, "interfaces", e) {
        let Some(mut f) = Fields::new(path.clone(), n, e) else {
            continue;
        };
        let origin = f.origin();
        let name = f.required("name", e);
        // On a port, or a bridge's routed interface (BVI): one or the other.
        let bvi = f.str("bridge", e);
        let port = match (f.str("port", e), &bvi) {
            (Some(_), Some(_)) => {
                e.at(
                    f.node("bridge").unwrap_or(n),
                    &format!("{path}.bridge"),
                    "an interface is on a `port` or is a bridge's routed interface (`bridge`), not both",
                );
                None
            }
            (None, None) => {
                if !f.map.iter().any(|(k, _)| k == "port") {
                    e.at(
                        n,
                        &format!("{path}.port"),
                        "`port` is required (or `bridge`, for a bridge's routed interface)",
                    );
                }
                None
            }
            (port, _) => Some(port.unwrap_or_default()),
        };
        let vlan: Option<u16> = f.parse("vlan", "a VLAN id", e);
        let s_vlan: Option<u16> = f.parse("s-vlan", "an 802.1ad S-VLAN id", e);
        for (key, v) in [("vlan", vlan), ("s-vlan", s_vlan)] {
            if let Some(v) = v {
                if !(1..=4094).contains(&v) {
                    e.at(
                        f.node(key).unwrap_or(n),
                        &format!("{path}.{key}"),
                        format!("{v}: VLAN id must be 1..=4094"),
                    );
                }
            }
        }
        let atm = super::atm::parse_vc(&mut f, e);
        let has_atm = f.node("atm").is_some();
        // A PVC has no MAC address of its own (a locally administered one stands in for its TAP
        // twin); every other interface needs one.
        let mac_s = if has_atm {
            Some(
                f.str("mac", e)
                    .unwrap_or_else(|| "02:a7:00:00:00:00".into()),
            )
        } else {
            f.required("mac", e)
        };
        let mac_v = mac_s.and_then(|s| {
            let node = f
                .map
                .iter()
                .find(|(k, _)| k == "mac")
                .map(|(_, v)| v)
                .unwrap_or(n);
            mac(&s, node, &format!("{path}.mac"), e)
        });
        let mtu: u16 = f.parse("mtu", "an MTU", e).unwrap_or(1500);
        if !(68..=9198).contains(&mtu) {
            e.at(
                f.node("mtu").unwrap_or(n),
                &format!("{path}.mtu"),
                format!("{mtu}: MTU must be 68..=9198 (9,216-byte frames)"),
            );
        }
        let vrf = f.str("vrf", e).unwrap_or_else(|| "default".into());
        let up = match f.str("state", e).as_deref() {
            None | Some("up") => true,
            Some("down") => false,
            Some(s) => {
                e.at(
                    n,
                    &format!("{path}.state"),
                    format!("`{s}`: state is up or down"),
                );
                true
            }
        };
        let name_s = name.clone().unwrap_or_default();
        let mut ipv4 = Vec::new();
        for (s, node, field) in f.list("ipv4", e) {
            match s
                .split_once('/')
                .map(|(a, l)| (a.parse::<std::net::Ipv4Addr>(), l.parse::<u8>()))
            {
                Some((Ok(a), Ok(l))) if (1..=32).contains(&l) => {
                    let a = u32::from(a);
                    if let Some(m) = host_address_problem(a, l) {
                        e.at(node, &field, format!("`{s}` is {m}"));
                    }
                    ipv4.push((a, l));
                    let (ifname, vrf) = (name_s.clone(), vrf.clone());
                    check_overlap(
                        &mut sites,
                        Site {
                            ifname,
                            vrf,
                            v6: false,
                            addr: a as u128,
                            len: l,
                            node,
                            field,
                            text: s.clone(),
                        },
                        e,
                    );
                }
                _ => e.at(node, &field, format!("`{s}` is not an IPv4 address/length")),
            }
        }
        let mut ipv6 = Vec::new();
        for (s, node, field) in f.list("ipv6", e) {
            match s
                .split_once('/')
                .map(|(a, l)| (a.parse::<std::net::Ipv6Addr>(), l.parse::<u8>()))
            {
                Some((Ok(a), Ok(l))) if (1..=128).contains(&l) => {
                    let a = u128::from(a);
                    ipv6.push((a, l));
                    let (ifname, vrf) = (name_s.clone(), vrf.clone());
                    check_overlap(
                        &mut sites,
                        Site {
                            ifname,
                            vrf,
                            v6: true,
                            addr: a,
                            len: l,
                            node,
                            field,
                            text: s.clone(),
                        },
                        e,
                    );
                }
                _ => e.at(node, &field, format!("`{s}` is not an IPv6 address/length")),
            }
        }
        let services = services::parse_if_services(&mut f, n, &path, e);
        let host_name = f.str("host-name", e);
        f.finish(e);
        if let (Some(name), Some(port), Some(mac)) = (name, port, mac_v) {
            let host_name = host_name.unwrap_or_else(|| format!("lr-{name}"));
            if host_name.is_empty() || host_name.len() > 15 || host_name.contains(['/', ' ', ':']) {
                e.at(
                    n,
                    &format!("{path}.host-name"),
                    format!("`{host_name}` is not a Linux interface name (1-15 characters, no `/`, `:` or space); set `host-name`"),
                );
            }
            cfg.interfaces.push(InterfaceCfg {
                name,
                port,
                bvi,
                vlan,
                s_vlan,
                mac,
                mtu,
                vrf,
                up,
                ipv4,
                ipv6,
                services,
                host_name,
                atm,
                origin,
            });
        }
    }
}

/// Why `a`/`len` cannot be an interface's IPv4 address: it is its subnet's network or broadcast
/// address. A /31 (RFC 3021) or /32 has neither.
fn host_address_problem(a: u32, len: u8) -> Option<String> {
    if len >= 31 {
        return None;
    }
    let mask = u32::MAX << (32 - len);
    let net = a & mask;
    let subnet = format!("{}/{len}", std::net::Ipv4Addr::from(net));
    if a == net {
        Some(format!(
            "the network address of {subnet}, not a host on it (only a /31 or /32 may use it, RFC 3021)"
        ))
    } else if a == net | !mask {
        Some(format!(
            "the broadcast address of {subnet}, not a host on it (only a /31 or /32 may use it, RFC 3021)"
        ))
    } else {
        None
    }
}

/// One configured interface address, where it was written.
struct Site<'a> {
    ifname: String,
    vrf: String,
    v6: bool,
    addr: u128,
    len: u8,
    node: &'a Node,
    field: String,
    text: String,
}

fn subnet(v6: bool, a: u128, len: u8) -> String {
    if v6 {
        format!("{}/{len}", std::net::Ipv6Addr::from(a.masked(len)))
    } else {
        let a = a as u32;
        format!("{}/{len}", std::net::Ipv4Addr::from(a.masked(len)))
    }
}

/// Refuses `s` if its subnet overlaps one already configured in the same VRF: on another
/// interface, two interfaces would claim the same addresses; on the same one, the subnet is there
/// twice. Different VRFs may reuse addresses, and IPv6 link-local subnets (fe80::/10) are per
/// link, so they may repeat across interfaces.
fn check_overlap<'a>(sites: &mut Vec<Site<'a>>, s: Site<'a>, e: &mut Errs) {
    let link_local = |x: &Site| x.v6 && x.addr >> 118 == 0xfe80 >> 6;
    for o in sites.iter() {
        if o.v6 != s.v6 || o.vrf != s.vrf {
            continue;
        }
        let len = o.len.min(s.len);
        let (a, b) = if s.v6 {
            (o.addr.masked(len), s.addr.masked(len))
        } else {
            (
                (o.addr as u32).masked(len) as u128,
                (s.addr as u32).masked(len) as u128,
            )
        };
        if a != b {
            continue;
        }
        let longer = if s.len >= o.len { &s } else { o };
        let shared = subnet(s.v6, longer.addr, longer.len);
        let message = if o.ifname == s.ifname {
            if o.len == s.len {
                format!(
                    "`{}` is on the same subnet as `{}` (line {}), already on this interface: a subnet is configured once per interface",
                    s.text, o.text, o.node.line
                )
            } else {
                format!(
                    "`{}` overlaps `{}` (line {}) on this interface: {shared} would be there twice",
                    s.text, o.text, o.node.line
                )
            }
        } else if link_local(&s) && link_local(o) {
            continue;
        } else {
            format!(
                "`{}` on interface `{}` overlaps `{}` on interface `{}` (line {}) in VRF `{}`: both would claim {shared}",
                s.text, s.ifname, o.text, o.ifname, o.node.line, s.vrf
            )
        };
        e.at(s.node, &s.field, message);
        break;
    }
    sites.push(s);
}
