//! `l3vpn`: the VRFs this router serves as a PE of an MPLS VPN (RFC 4364), and where its VPN
//! routes are spoken. The BGP speaker is GoBGP, driven through its gRPC API (`crate::l3vpn`):
//!
//! ```yaml
//! l3vpn:
//!   bgp:
//!     api: 127.0.0.1:50051        # gobgpd's gRPC API (`gobgpd --api-hosts`)
//!     next-hop: 10.0.12.1         # the next hop exported routes carry: this router's address
//!   vrfs:
//!     - name: cust-a              # a VRF under `vrfs`
//!       rd: 65000:1               # ASN:N (2 or 4-byte ASN) or A.B.C.D:N
//!       import: [65000:1]         # route targets whose VPN routes are installed here
//!       export: [65000:1]         # route targets this VRF's routes are exported with
//!       label: 100                # optional: its VPN label (else allocated)
//! ```
//!
//! Each VPN VRF gets a label that pops the packet into the VRF (a `lookup` entry of the label
//! table, as `mpls.labels` writes it by hand), so `mpls` with the core interfaces is required.
//! Refused: a VRF that is not defined or is `default`, a VRF or RD twice, a route target or RD
//! that does not parse, a next hop that is not an address of the router in VRF `default`, a label
//! another entry uses.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::fields::{seq, Errs, Fields};
use super::mpls::{LabelCfg, LabelOp};
use super::Origin;
use dataplane::mpls::{FIRST_UNRESERVED, MAX_LABEL};

#[derive(Clone, Debug, PartialEq)]
pub struct L3vpnCfg {
    /// gobgpd's gRPC API address.
    pub api: SocketAddr,
    /// The BGP next hop of exported routes.
    pub next_hop: IpAddr,
    pub vrfs: Vec<VpnVrfCfg>,
    pub origin: Origin,
}

#[derive(Clone, Debug, PartialEq)]
pub struct VpnVrfCfg {
    pub name: String,
    pub rd: VpnId,
    pub import: Vec<VpnId>,
    pub export: Vec<VpnId>,
    /// Given, or allocated (0 until [`allocate_labels`] fills it in).
    pub label: u32,
    pub origin: Origin,
}

/// A route distinguisher or a route target: an administrator and a number it assigns, in one of
/// RFC 4364's (and RFC 4360's) three layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VpnId {
    /// Type 0: a 2-byte AS number and a 4-byte number.
    As2(u16, u32),
    /// Type 1: an IPv4 address and a 2-byte number.
    Ip(Ipv4Addr, u16),
    /// Type 2: a 4-byte AS number and a 2-byte number.
    As4(u32, u16),
}

impl fmt::Display for VpnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VpnId::As2(a, n) => write!(f, "{a}:{n}"),
            VpnId::Ip(a, n) => write!(f, "{a}:{n}"),
            VpnId::As4(a, n) => write!(f, "{a}:{n}"),
        }
    }
}

impl std::str::FromStr for VpnId {
    type Err = ();

    /// `ASN:N` (an ASN above 65535 takes the 4-byte layout, whose number is 16 bits) or
    /// `A.B.C.D:N`.
    fn from_str(s: &str) -> Result<VpnId, ()> {
        let (admin, n) = s.rsplit_once(':').ok_or(())?;
        if let Ok(ip) = admin.parse::<Ipv4Addr>() {
            return Ok(VpnId::Ip(ip, n.parse().map_err(|_| ())?));
        }
        let asn: u32 = admin.parse().map_err(|_| ())?;
        match u16::try_from(asn) {
            Ok(a) => Ok(VpnId::As2(a, n.parse().map_err(|_| ())?)),
            Err(_) => Ok(VpnId::As4(asn, n.parse().map_err(|_| ())?)),
        }
    }
}

const ID_FORMS: &str = "ASN:N or A.B.C.D:N (N below 65536 with a 4-byte ASN or an address)";

fn ids(f: &mut Fields<'_>, key: &'static str, e: &mut Errs) -> Vec<VpnId> {
    f.list(key, e)
        .into_iter()
        .filter_map(|(s, n, field)| match s.parse::<VpnId>() {
            Ok(v) => Some(v),
            Err(()) => {
                e.at(
                    n,
                    &field,
                    format!("`{s}` is not a route target ({ID_FORMS})"),
                );
                None
            }
        })
        .collect()
}

pub(super) fn parse(top: &mut Fields<'_>, e: &mut Errs) -> Option<L3vpnCfg> {
    let n = top.get("l3vpn")?;
    let mut f = Fields::new("l3vpn".into(), n, e)?;
    let origin = f.origin();
    let (mut api, mut next_hop) = (None, None);
    match f.get("bgp") {
        Some(bn) => {
            if let Some(mut bf) = Fields::new("l3vpn.bgp".into(), bn, e) {
                api = bf.parse::<SocketAddr>("api", "an address and port (127.0.0.1:50051)", e);
                if bf.node("api").is_none() {
                    e.at(
                        bn,
                        "l3vpn.bgp.api",
                        "`api` is required (gobgpd's gRPC address)",
                    );
                }
                next_hop = bf.parse::<IpAddr>("next-hop", "an IP address", e);
                if bf.node("next-hop").is_none() {
                    e.at(bn, "l3vpn.bgp.next-hop", "`next-hop` is required");
                }
                bf.finish(e);
            }
        }
        None => e.at(n, "l3vpn.bgp", "`bgp` is required (the VPN route speaker)"),
    }
    let mut vrfs = Vec::new();
    for (vn, path) in seq(&mut f, "vrfs", e) {
        let Some(mut vf) = Fields::new(path.clone(), vn, e) else {
            continue;
        };
        let origin = vf.origin();
        let name = vf.required("name", e);
        let rd = match vf.str("rd", e) {
            Some(s) => match s.parse::<VpnId>() {
                Ok(v) => Some(v),
                Err(()) => {
                    let at = vf.node("rd").unwrap_or(vn);
                    e.at(
                        at,
                        &format!("{path}.rd"),
                        format!("`{s}` is not a route distinguisher ({ID_FORMS})"),
                    );
                    None
                }
            },
            None => {
                e.at(vn, &format!("{path}.rd"), "`rd` is required");
                None
            }
        };
        let import = ids(&mut vf, "import", e);
        let export = ids(&mut vf, "export", e);
        let label = match vf.parse::<u32>("label", "a label", e) {
            Some(l) if !(FIRST_UNRESERVED..=MAX_LABEL).contains(&l) => {
                let at = vf.node("label").unwrap_or(vn);
                e.at(
                    at,
                    &format!("{path}.label"),
                    format!("label {l} is outside {FIRST_UNRESERVED}..={MAX_LABEL}"),
                );
                None
            }
            other => Some(other.unwrap_or(0)),
        };
        vf.finish(e);
        if let (Some(name), Some(rd), Some(label)) = (name, rd, label) {
            vrfs.push(VpnVrfCfg {
                name,
                rd,
                import,
                export,
                label,
                origin,
            });
        }
    }
    f.finish(e);
    Some(L3vpnCfg {
        api: api?,
        next_hop: next_hop?,
        vrfs,
        origin,
    })
}

/// Gives each VPN VRF without a label the lowest one nothing else uses, and adds every VPN
/// label to the label table as a pop-and-look-up in its VRF.
pub(super) fn allocate_labels(l3: &mut L3vpnCfg, mpls: &mut super::mpls::MplsCfg) {
    let mut used: std::collections::HashSet<u32> = mpls.labels.iter().map(|l| l.label).collect();
    used.extend(mpls.pseudowires.iter().map(|p| p.local_label));
    used.extend(l3.vrfs.iter().map(|v| v.label).filter(|&l| l != 0));
    let mut next = FIRST_UNRESERVED;
    for v in l3.vrfs.iter_mut() {
        if v.label == 0 {
            while used.contains(&next) {
                next += 1;
            }
            v.label = next;
            used.insert(next);
        }
        mpls.labels.push(LabelCfg {
            label: v.label,
            op: LabelOp::Lookup {
                vrf: v.name.clone(),
            },
            origin: Origin {
                field: format!("{}.label", v.origin.field),
                ..v.origin.clone()
            },
        });
    }
}

pub(super) fn cross_check(cfg: &super::Config, e: &mut Errs) {
    let Some(l3) = &cfg.l3vpn else {
        return;
    };
    if cfg.mpls.is_none() {
        e.origin(
            &l3.origin,
            "l3vpn needs `mpls` (its `interfaces`: the core interfaces that take labelled frames)",
        );
    }
    if super::check::own_address(cfg, l3.next_hop).is_none_or(|i| i.vrf != "default") {
        e.origin(
            &origin_field(&l3.origin, "l3vpn.bgp.next-hop"),
            format!(
                "next hop {} is not an address of an interface in VRF `default`",
                l3.next_hop
            ),
        );
    }
    let mut names = std::collections::HashSet::new();
    let mut rds = std::collections::HashMap::new();
    for v in &l3.vrfs {
        if v.name == "default" || !cfg.vrfs.contains(&v.name) {
            e.origin(
                &v.origin,
                format!(
                    "VRF `{}` is not defined under `vrfs` (nor may it be `default`)",
                    v.name
                ),
            );
        }
        if !names.insert(v.name.as_str()) {
            e.origin(&v.origin, format!("VRF `{}` is listed twice", v.name));
        }
        if let Some(other) = rds.insert(v.rd, v.name.as_str()) {
            e.origin(
                &v.origin,
                format!("route distinguisher {} is VRF `{other}`'s already", v.rd),
            );
        }
        if v.import.is_empty() && v.export.is_empty() {
            e.origin(
                &v.origin,
                format!(
                    "VRF `{}` imports and exports nothing (give `import` or `export`)",
                    v.name
                ),
            );
        }
    }
    // A label given by hand must be free: the allocated ones are by construction.
    if let Some(m) = &cfg.mpls {
        let mut seen = std::collections::HashMap::new();
        for l in &m.labels {
            if let Some(prev) = seen.insert(l.label, &l.origin) {
                if matches!(l.op, LabelOp::Lookup { .. }) && l.origin.field.starts_with("l3vpn") {
                    e.origin(
                        &l.origin,
                        format!("label {} is used by {} already", l.label, prev.field),
                    );
                }
            }
        }
        for p in &m.pseudowires {
            if let Some(o) = seen.get(&p.local_label) {
                if o.field.starts_with("l3vpn") {
                    e.origin(
                        o,
                        format!(
                            "label {} is pseudowire `{}`'s local label",
                            p.local_label, p.name
                        ),
                    );
                }
            }
        }
    }
}

fn origin_field(o: &Origin, field: &str) -> Origin {
    Origin {
        field: field.to_string(),
        ..o.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::VpnId;

    #[test]
    fn ids_parse_in_each_layout_and_print_back() {
        for (s, v) in [
            ("65000:1", VpnId::As2(65000, 1)),
            ("65000:4294967295", VpnId::As2(65000, u32::MAX)),
            ("10.0.0.1:7", VpnId::Ip("10.0.0.1".parse().unwrap(), 7)),
            ("4200000000:9", VpnId::As4(4_200_000_000, 9)),
        ] {
            assert_eq!(s.parse::<VpnId>(), Ok(v), "{s}");
            assert_eq!(v.to_string(), s);
        }
        for bad in [
            "65000",
            "x:1",
            "10.0.0.1:70000",
            "4200000000:70000",
            ":1",
            "1:",
        ] {
            assert!(bad.parse::<VpnId>().is_err(), "{bad}");
        }
    }
}
