//! GoBGP's gRPC API (package `apipb`, GoBGP 3.x), the part the VPN service uses, and the
//! conversions between its paths and [`VpnRoute`]s.
//!
//! The messages are written out here with prost's derive rather than generated from GoBGP's
//! `.proto` files: eight calls and a dozen messages, with the field numbers of `api/gobgp.proto`
//! and `api/attribute.proto`; fields not listed are skipped by the decoder. Attributes and NLRI
//! travel as `google.protobuf.Any`, named by type URL.
//!
//! Reading a path ([`decode_path`]) is wire input from the speaker: anything that does not fit
//! (an unknown RD layout, a prefix that does not parse, no label, no next hop) is an error the
//! service counts, never a panic (fuzz target `gobgp_path`).

use std::net::{IpAddr, Ipv4Addr};

use prost::Message;
use prost_types::Any;

use super::{VpnRoute, VpnUpdate};
use crate::config::l3vpn::VpnId;
use crate::config::Prefix;

pub const AFI_IP: i32 = 1;
pub const AFI_IP6: i32 = 2;
pub const SAFI_MPLS_VPN: i32 = 128;
/// `TableType.GLOBAL`.
pub const TABLE_GLOBAL: i32 = 0;
/// Extended community sub-type of a route target (RFC 4360).
const SUB_TYPE_ROUTE_TARGET: u32 = 0x02;

const TYPE_PREFIX: &str = "type.googleapis.com/apipb.";

#[derive(Clone, PartialEq, Message)]
pub struct Family {
    #[prost(int32, tag = "1")]
    pub afi: i32,
    #[prost(int32, tag = "2")]
    pub safi: i32,
}

#[derive(Clone, PartialEq, Message)]
pub struct Path {
    #[prost(message, optional, tag = "1")]
    pub nlri: Option<Any>,
    #[prost(message, repeated, tag = "2")]
    pub pattrs: Vec<Any>,
    #[prost(bool, tag = "4")]
    pub best: bool,
    #[prost(bool, tag = "5")]
    pub is_withdraw: bool,
    #[prost(message, optional, tag = "9")]
    pub family: Option<Family>,
    #[prost(string, tag = "15")]
    pub neighbor_ip: String,
    #[prost(bytes = "vec", tag = "16")]
    pub uuid: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub struct AddPathRequest {
    #[prost(int32, tag = "1")]
    pub table_type: i32,
    #[prost(string, tag = "2")]
    pub vrf_id: String,
    #[prost(message, optional, tag = "3")]
    pub path: Option<Path>,
}

#[derive(Clone, PartialEq, Message)]
pub struct AddPathResponse {
    #[prost(bytes = "vec", tag = "1")]
    pub uuid: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub struct DeletePathRequest {
    #[prost(int32, tag = "1")]
    pub table_type: i32,
    #[prost(string, tag = "2")]
    pub vrf_id: String,
    #[prost(message, optional, tag = "3")]
    pub family: Option<Family>,
    #[prost(message, optional, tag = "4")]
    pub path: Option<Path>,
    #[prost(bytes = "vec", tag = "5")]
    pub uuid: Vec<u8>,
}

/// Client-streamed: paths added in bulk, as many per message as the sender likes.
#[derive(Clone, PartialEq, Message)]
pub struct AddPathStreamRequest {
    #[prost(int32, tag = "1")]
    pub table_type: i32,
    #[prost(string, tag = "2")]
    pub vrf_id: String,
    #[prost(message, repeated, tag = "3")]
    pub paths: Vec<Path>,
}

#[derive(Clone, PartialEq, Message)]
pub struct GetTableRequest {
    #[prost(int32, tag = "1")]
    pub table_type: i32,
    #[prost(message, optional, tag = "2")]
    pub family: Option<Family>,
    #[prost(string, tag = "3")]
    pub name: String,
}

/// A table's size: destinations (prefixes with their RD) and paths (all, best or not).
#[derive(Clone, PartialEq, Message)]
pub struct GetTableResponse {
    #[prost(uint64, tag = "1")]
    pub num_destination: u64,
    #[prost(uint64, tag = "2")]
    pub num_path: u64,
}

/// `google.protobuf.Empty`.
#[derive(Clone, PartialEq, Message)]
pub struct Empty {}

#[derive(Clone, PartialEq, Message)]
pub struct GetBgpRequest {}

#[derive(Clone, PartialEq, Message)]
pub struct GetBgpResponse {
    #[prost(message, optional, tag = "1")]
    pub global: Option<Global>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Global {
    #[prost(uint32, tag = "1")]
    pub asn: u32,
    #[prost(string, tag = "2")]
    pub router_id: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct WatchEventRequest {
    #[prost(message, optional, tag = "2")]
    pub table: Option<WatchTable>,
}

#[derive(Clone, PartialEq, Message)]
pub struct WatchTable {
    #[prost(message, repeated, tag = "1")]
    pub filters: Vec<WatchFilter>,
}

/// `type` 0 is BEST: the best path of each destination as it changes; `init` first sends the
/// table as it is.
#[derive(Clone, PartialEq, Message)]
pub struct WatchFilter {
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    #[prost(bool, tag = "2")]
    pub init: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct WatchEventResponse {
    #[prost(message, optional, tag = "3")]
    pub table: Option<TableEvent>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TableEvent {
    #[prost(message, repeated, tag = "2")]
    pub paths: Vec<Path>,
}

// Attributes and NLRI (api/attribute.proto).

#[derive(Clone, PartialEq, Message)]
pub struct LabeledVpnIpAddressPrefix {
    #[prost(uint32, repeated, tag = "1")]
    pub labels: Vec<u32>,
    #[prost(message, optional, tag = "2")]
    pub rd: Option<Any>,
    #[prost(uint32, tag = "3")]
    pub prefix_len: u32,
    #[prost(string, tag = "4")]
    pub prefix: String,
}

/// The three RD layouts share one shape (`admin` is a string in the address layout).
#[derive(Clone, PartialEq, Message)]
pub struct RdNumeric {
    #[prost(uint32, tag = "1")]
    pub admin: u32,
    #[prost(uint32, tag = "2")]
    pub assigned: u32,
}

#[derive(Clone, PartialEq, Message)]
pub struct RdAddress {
    #[prost(string, tag = "1")]
    pub admin: String,
    #[prost(uint32, tag = "2")]
    pub assigned: u32,
}

#[derive(Clone, PartialEq, Message)]
pub struct OriginAttribute {
    #[prost(uint32, tag = "1")]
    pub origin: u32,
}

#[derive(Clone, PartialEq, Message)]
pub struct MpReachNlriAttribute {
    #[prost(message, optional, tag = "1")]
    pub family: Option<Family>,
    #[prost(string, repeated, tag = "2")]
    pub next_hops: Vec<String>,
    #[prost(message, repeated, tag = "3")]
    pub nlris: Vec<Any>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ExtendedCommunitiesAttribute {
    #[prost(message, repeated, tag = "1")]
    pub communities: Vec<Any>,
}

/// TwoOctetAsSpecificExtended and FourOctetAsSpecificExtended (same fields).
#[derive(Clone, PartialEq, Message)]
pub struct AsSpecificExtended {
    #[prost(bool, tag = "1")]
    pub is_transitive: bool,
    #[prost(uint32, tag = "2")]
    pub sub_type: u32,
    #[prost(uint32, tag = "3")]
    pub asn: u32,
    #[prost(uint32, tag = "4")]
    pub local_admin: u32,
}

#[derive(Clone, PartialEq, Message)]
pub struct Ipv4AddressSpecificExtended {
    #[prost(bool, tag = "1")]
    pub is_transitive: bool,
    #[prost(uint32, tag = "2")]
    pub sub_type: u32,
    #[prost(string, tag = "3")]
    pub address: String,
    #[prost(uint32, tag = "4")]
    pub local_admin: u32,
}

fn any<M: Message>(name: &str, m: &M) -> Any {
    Any {
        type_url: format!("{TYPE_PREFIX}{name}"),
        value: m.encode_to_vec(),
    }
}

/// The message name of an Any from GoBGP (`apipb.X` -> `X`); None for anything else.
fn any_name(a: &Any) -> Option<&str> {
    a.type_url.strip_prefix(TYPE_PREFIX)
}

fn rd_any(rd: VpnId) -> Any {
    match rd {
        VpnId::As2(a, n) => any(
            "RouteDistinguisherTwoOctetASN",
            &RdNumeric {
                admin: a.into(),
                assigned: n,
            },
        ),
        VpnId::Ip(a, n) => any(
            "RouteDistinguisherIPAddress",
            &RdAddress {
                admin: a.to_string(),
                assigned: n.into(),
            },
        ),
        VpnId::As4(a, n) => any(
            "RouteDistinguisherFourOctetASN",
            &RdNumeric {
                admin: a,
                assigned: n.into(),
            },
        ),
    }
}

fn rd_from(a: &Any) -> Result<VpnId, String> {
    let bad = |e: prost::DecodeError| format!("route distinguisher: {e}");
    let range = || "route distinguisher out of range".to_string();
    match any_name(a) {
        Some("RouteDistinguisherTwoOctetASN") => {
            let m = RdNumeric::decode(a.value.as_slice()).map_err(bad)?;
            Ok(VpnId::As2(
                m.admin.try_into().map_err(|_| range())?,
                m.assigned,
            ))
        }
        Some("RouteDistinguisherIPAddress") => {
            let m = RdAddress::decode(a.value.as_slice()).map_err(bad)?;
            let ip: Ipv4Addr = m.admin.parse().map_err(|_| range())?;
            Ok(VpnId::Ip(ip, m.assigned.try_into().map_err(|_| range())?))
        }
        Some("RouteDistinguisherFourOctetASN") => {
            let m = RdNumeric::decode(a.value.as_slice()).map_err(bad)?;
            Ok(VpnId::As4(
                m.admin,
                m.assigned.try_into().map_err(|_| range())?,
            ))
        }
        _ => Err(format!("unknown route distinguisher `{}`", a.type_url)),
    }
}

fn rt_any(rt: VpnId) -> Any {
    match rt {
        VpnId::As2(a, n) => any(
            "TwoOctetAsSpecificExtended",
            &AsSpecificExtended {
                is_transitive: true,
                sub_type: SUB_TYPE_ROUTE_TARGET,
                asn: a.into(),
                local_admin: n,
            },
        ),
        VpnId::Ip(a, n) => any(
            "IPv4AddressSpecificExtended",
            &Ipv4AddressSpecificExtended {
                is_transitive: true,
                sub_type: SUB_TYPE_ROUTE_TARGET,
                address: a.to_string(),
                local_admin: n.into(),
            },
        ),
        VpnId::As4(a, n) => any(
            "FourOctetAsSpecificExtended",
            &AsSpecificExtended {
                is_transitive: true,
                sub_type: SUB_TYPE_ROUTE_TARGET,
                asn: a,
                local_admin: n.into(),
            },
        ),
    }
}

/// A route target from an extended community; None for other communities (or a malformed one,
/// which imports nothing).
fn rt_from(a: &Any) -> Option<VpnId> {
    match any_name(a)? {
        "TwoOctetAsSpecificExtended" => {
            let m = AsSpecificExtended::decode(a.value.as_slice()).ok()?;
            (m.sub_type == SUB_TYPE_ROUTE_TARGET)
                .then(|| Some(VpnId::As2(m.asn.try_into().ok()?, m.local_admin)))?
        }
        "IPv4AddressSpecificExtended" => {
            let m = Ipv4AddressSpecificExtended::decode(a.value.as_slice()).ok()?;
            (m.sub_type == SUB_TYPE_ROUTE_TARGET).then(|| {
                Some(VpnId::Ip(
                    m.address.parse().ok()?,
                    m.local_admin.try_into().ok()?,
                ))
            })?
        }
        "FourOctetAsSpecificExtended" => {
            let m = AsSpecificExtended::decode(a.value.as_slice()).ok()?;
            (m.sub_type == SUB_TYPE_ROUTE_TARGET)
                .then(|| Some(VpnId::As4(m.asn, m.local_admin.try_into().ok()?)))?
        }
        _ => None,
    }
}

/// The VPN family of `p`'s address family.
pub fn family_of(p: Prefix) -> Family {
    Family {
        afi: if matches!(p, Prefix::V4(..)) {
            AFI_IP
        } else {
            AFI_IP6
        },
        safi: SAFI_MPLS_VPN,
    }
}

/// A BGP next hop as GoBGP writes it for a family: an IPv4 next hop of a VPNv6 route is the
/// IPv4-mapped IPv6 address (RFC 4659 4.3.2).
fn next_hop_text(p: Prefix, nh: IpAddr) -> String {
    match (p, nh) {
        (Prefix::V6(..), IpAddr::V4(a)) => a.to_ipv6_mapped().to_string(),
        _ => nh.to_string(),
    }
}

/// The path that exports `prefix` of a VRF: its RD, label, route targets, this router as next
/// hop, origin IGP.
pub fn export_path(rd: VpnId, prefix: Prefix, label: u32, next_hop: IpAddr, rts: &[VpnId]) -> Path {
    let (text, len) = match prefix {
        Prefix::V4(a, l) => (Ipv4Addr::from(a).to_string(), l),
        Prefix::V6(a, l) => (std::net::Ipv6Addr::from(a).to_string(), l),
    };
    let nlri = any(
        "LabeledVPNIPAddressPrefix",
        &LabeledVpnIpAddressPrefix {
            labels: vec![label],
            rd: Some(rd_any(rd)),
            prefix_len: len.into(),
            prefix: text,
        },
    );
    let family = family_of(prefix);
    let mut pattrs = vec![
        any("OriginAttribute", &OriginAttribute { origin: 0 }),
        any(
            "MpReachNLRIAttribute",
            &MpReachNlriAttribute {
                family: Some(family.clone()),
                next_hops: vec![next_hop_text(prefix, next_hop)],
                nlris: vec![nlri.clone()],
            },
        ),
    ];
    if !rts.is_empty() {
        pattrs.push(any(
            "ExtendedCommunitiesAttribute",
            &ExtendedCommunitiesAttribute {
                communities: rts.iter().map(|&r| rt_any(r)).collect(),
            },
        ));
    }
    Path {
        nlri: Some(nlri),
        pattrs,
        family: Some(family),
        ..Default::default()
    }
}

/// What a path from GoBGP's table says: a VPN route learned from a peer (or its withdrawal).
/// `Ok(None)`: not a VPN path. A path that is not a peer's (added through the API) reads as the
/// withdrawal of the peers' path for its destination.
pub fn decode_path(p: &Path) -> Result<Option<VpnUpdate>, String> {
    let Some(fam) = &p.family else {
        return Ok(None);
    };
    if fam.safi != SAFI_MPLS_VPN || !(fam.afi == AFI_IP || fam.afi == AFI_IP6) {
        return Ok(None);
    }
    let nlri = p.nlri.as_ref().ok_or("no NLRI")?;
    if any_name(nlri) != Some("LabeledVPNIPAddressPrefix") {
        return Err(format!("NLRI `{}` in a VPN family", nlri.type_url));
    }
    let n = LabeledVpnIpAddressPrefix::decode(nlri.value.as_slice())
        .map_err(|e| format!("NLRI: {e}"))?;
    let rd = rd_from(n.rd.as_ref().ok_or("no route distinguisher")?)?;
    let len: u8 = n
        .prefix_len
        .try_into()
        .map_err(|_| "prefix length out of range")?;
    let prefix = Prefix::parse(&format!("{}/{len}", n.prefix)).map_err(|e| format!("NLRI: {e}"))?;
    if matches!(prefix, Prefix::V4(..)) != (fam.afi == AFI_IP) {
        return Err(format!("prefix {prefix} in the other family"));
    }
    // A path added through the API (this router's own exports among them) has no neighbour:
    // where it is the best, no peer's path for that destination is.
    let peer = p.neighbor_ip.parse::<IpAddr>();
    if p.is_withdraw || peer.is_err() {
        return Ok(Some(VpnUpdate::Withdraw { rd, prefix }));
    }
    let peer = peer.map_err(|e| e.to_string())?;
    // The VPN label is the bottom one (one label per route in RFC 4364; RFC 8277 allows more).
    let label = *n.labels.last().ok_or("no label")?;
    if !(dataplane::mpls::FIRST_UNRESERVED..=dataplane::mpls::MAX_LABEL).contains(&label) {
        return Err(format!("label {label} out of range"));
    }
    let mut next_hop = None;
    let mut rts = Vec::new();
    for a in &p.pattrs {
        match any_name(a) {
            Some("MpReachNLRIAttribute") => {
                let m = MpReachNlriAttribute::decode(a.value.as_slice())
                    .map_err(|e| format!("MP_REACH_NLRI: {e}"))?;
                let text = m
                    .next_hops
                    .first()
                    .ok_or("MP_REACH_NLRI without a next hop")?;
                let ip: IpAddr = text
                    .parse()
                    .map_err(|_| format!("next hop `{text}` is not an address"))?;
                // An IPv4 PE's address carried in a VPNv6 route.
                next_hop = Some(match ip {
                    IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
                    v4 => v4,
                });
            }
            Some("ExtendedCommunitiesAttribute") => {
                let m = ExtendedCommunitiesAttribute::decode(a.value.as_slice())
                    .map_err(|e| format!("extended communities: {e}"))?;
                rts.extend(m.communities.iter().filter_map(rt_from));
            }
            _ => {}
        }
    }
    rts.sort_unstable();
    rts.dedup();
    Ok(Some(VpnUpdate::Add(VpnRoute {
        rd,
        prefix,
        label,
        next_hop: next_hop.ok_or("no next hop")?,
        rts,
        peer,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_peer(mut p: Path) -> Path {
        p.neighbor_ip = "10.0.12.2".into();
        p
    }

    #[test]
    fn an_exported_path_reads_back_as_the_same_route_from_a_peer() {
        let rts = [
            VpnId::As2(65000, 1),
            VpnId::Ip("10.9.9.9".parse().unwrap(), 3),
            VpnId::As4(4_200_000_000, 7),
        ];
        for (rd, prefix, nh) in [
            (
                VpnId::As2(65000, 1),
                Prefix::parse("10.1.0.0/24").unwrap(),
                "10.0.12.1",
            ),
            (
                VpnId::Ip("10.0.0.1".parse().unwrap(), 9),
                Prefix::parse("2001:db8:1::/48").unwrap(),
                "10.0.12.1",
            ),
            (
                VpnId::As4(4_200_000_000, 2),
                Prefix::parse("0.0.0.0/0").unwrap(),
                "2001:db8::1",
            ),
        ] {
            let nh: IpAddr = nh.parse().unwrap();
            let p = from_peer(export_path(rd, prefix, 1234, nh, &rts));
            // Through bytes, as the API carries it.
            let p = Path::decode(p.encode_to_vec().as_slice()).unwrap();
            let Some(VpnUpdate::Add(r)) = decode_path(&p).unwrap() else {
                panic!("not a route: {p:?}");
            };
            let mut want = rts.to_vec();
            want.sort_unstable();
            assert_eq!(
                r,
                VpnRoute {
                    rd,
                    prefix,
                    label: 1234,
                    next_hop: nh,
                    rts: want,
                    peer: "10.0.12.2".parse().unwrap(),
                }
            );
            let mut w = p.clone();
            w.is_withdraw = true;
            assert_eq!(
                decode_path(&w).unwrap(),
                Some(VpnUpdate::Withdraw { rd, prefix })
            );
        }
    }

    #[test]
    fn the_routers_own_paths_withdraw_and_other_families_are_not_routes() {
        let p = export_path(
            VpnId::As2(1, 1),
            Prefix::parse("10.1.0.0/24").unwrap(),
            100,
            "10.0.0.1".parse().unwrap(),
            &[],
        );
        let gone = Some(VpnUpdate::Withdraw {
            rd: VpnId::As2(1, 1),
            prefix: Prefix::parse("10.1.0.0/24").unwrap(),
        });
        assert_eq!(
            decode_path(&p).unwrap(),
            gone,
            "no neighbour: added through the API"
        );
        let mut local = p.clone();
        local.neighbor_ip = "<nil>".into();
        assert_eq!(decode_path(&local).unwrap(), gone);
        let mut unicast = from_peer(p);
        unicast.family = Some(Family { afi: 1, safi: 1 });
        assert_eq!(decode_path(&unicast).unwrap(), None);
    }

    #[test]
    fn malformed_paths_are_errors() {
        let good = from_peer(export_path(
            VpnId::As2(1, 1),
            Prefix::parse("10.1.0.0/24").unwrap(),
            100,
            "10.0.0.1".parse().unwrap(),
            &[],
        ));
        let mut no_nh = good.clone();
        no_nh
            .pattrs
            .retain(|a| !a.type_url.ends_with("MpReachNLRIAttribute"));
        assert!(decode_path(&no_nh).is_err());
        let mut garbage = good.clone();
        garbage.nlri.as_mut().unwrap().value = vec![0xff, 0xff, 0xff];
        assert!(decode_path(&garbage).is_err());
        let mut host_bits = good.clone();
        let mut n = LabeledVpnIpAddressPrefix::decode(good.nlri.as_ref().unwrap().value.as_slice())
            .unwrap();
        n.prefix = "10.1.0.1".into();
        host_bits.nlri = Some(any("LabeledVPNIPAddressPrefix", &n));
        assert!(decode_path(&host_bits).is_err());
        let mut no_label = good.clone();
        n.prefix = "10.1.0.0".into();
        n.labels.clear();
        no_label.nlri = Some(any("LabeledVPNIPAddressPrefix", &n));
        assert!(decode_path(&no_label).is_err());
        let mut v6_in_v4 = good;
        v6_in_v4.family = Some(Family {
            afi: AFI_IP6,
            safi: SAFI_MPLS_VPN,
        });
        assert!(decode_path(&v6_in_v4).is_err());
    }
}
