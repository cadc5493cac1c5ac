//! The punt table's classes (control-plane protection, as routers call it): what kind of
//! control traffic a frame is, each kind with its own rate and burst per worker, so a flood of
//! one (ARP, say) never crowds out another (BGP keepalives). The table below is the one place a
//! class is declared: its name (config key, `show punt`, metrics label), its default rate and
//! burst, and what it holds.
//!
//! Two classes are not handed to the control plane but policed the same way, because a router's
//! CPU handles them on other routers: `ttl-expired` (answered with ICMP by the slow path) and
//! `options` (forwarded by the slow path).

macro_rules! classes {
    ($($v:ident => $name:literal, $rate:literal, $burst:literal, $text:literal;)*) => {
        /// Why a frame goes to the control plane (or the slow path). Each class has its own
        /// policer.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum PuntClass { $($v,)* }

        impl PuntClass {
            pub const ALL: &'static [PuntClass] = &[$(PuntClass::$v,)*];
            /// The class's name: the config key, `show punt`'s and the metrics' label.
            pub fn name(self) -> &'static str {
                match self { $(PuntClass::$v => $name,)* }
            }
            /// What the class holds.
            pub fn text(self) -> &'static str {
                match self { $(PuntClass::$v => $text,)* }
            }
            /// The default rate (frames per second per worker) and burst (frames).
            pub fn default_limit(self) -> Limit {
                match self { $(PuntClass::$v => Limit { rate: $rate, burst: $burst },)* }
            }
        }
    };
}

classes! {
    Arp => "arp", 2_000, 200, "ARP requests and replies";
    Nd => "nd", 2_000, 200, "IPv6 neighbour and router discovery, redirects";
    Ospf => "ospf", 5_000, 500, "OSPFv2 and OSPFv3";
    Bgp => "bgp", 20_000, 2_000, "BGP (TCP 179); a full-table transfer is one segment per ~300 prefixes";
    Ldp => "ldp", 5_000, 500, "LDP discovery and sessions (UDP and TCP 646)";
    Pim => "pim", 2_000, 200, "PIM";
    IgmpMld => "igmp-mld", 2_000, 200, "IGMP and MLD";
    McastData => "mcast-data", 1_000, 100, "multicast data for PIM: an unknown (S,G)'s first packets, wrong-interface packets, keepalive copies";
    Isis => "isis", 2_000, 200, "IS-IS (LLC, SAP 0xFE)";
    Bfd => "bfd", 10_000, 1_000, "BFD (UDP 3784, 3785, 4784)";
    Vrrp => "vrrp", 1_000, 100, "VRRP";
    Rip => "rip", 1_000, 100, "RIP and RIPng (UDP 520, 521)";
    GtpC => "gtp-c", 100_000, 10_000, "GTPv1-C (UDP 2123): sized for 50,000 context creates a second and their retransmissions";
    GtpU => "gtp-u", 1_000, 100, "GTP-U signalling (Echo, Error Indication, End Marker) and G-PDUs for unknown TEIDs (answered with an Error Indication)";
    Dlsw => "dlsw", 5_000, 500, "DLSw SSP (TCP 2065, 2067)";
    Local => "local", 2_000, 200, "other traffic to the router's addresses (ICMP echo, SSH, ...)";
    Glean => "glean", 2_000, 200, "packets waiting for their next hop's MAC address";
    TtlExpired => "ttl-expired", 10_000, 1_000, "TTL or hop limit expiring here (the slow path answers with ICMP)";
    Options => "options", 10_000, 1_000, "IPv4 options and IPv6 hop-by-hop headers (the slow path forwards them)";
    Bpdu => "bpdu", 1_000, 100, "spanning-tree BPDUs (LLC, SAP 0x42)";
    Lacp => "lacp", 1_000, 100, "LACP and marker frames (slow protocols, EtherType 0x8809)";
    Lldp => "lldp", 1_000, 100, "LLDP (EtherType 0x88CC)";
    Llc => "llc", 2_000, 200, "other LLC and SNAP frames (CDP, ...)";
    Sna => "sna", 200_000, 20_000, "LLC frames of the bridge domains DLSw serves (SNA LLC2), for DLSw";
}

pub const CLASSES: usize = PuntClass::ALL.len();

/// A class's policer: frames per second per worker, and the most it lets through at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub rate: u32,
    pub burst: u32,
}

impl PuntClass {
    pub fn parse(s: &str) -> Option<PuntClass> {
        PuntClass::ALL.iter().copied().find(|c| c.name() == s)
    }
}

/// The class of an IPv4 packet addressed to the router (or to a link-scope group): `h` is the
/// IPv4 header onwards.
pub fn class_ip4(h: &[u8]) -> PuntClass {
    if h.len() < 20 {
        return PuntClass::Local;
    }
    let ihl = (h[0] & 0x0f) as usize * 4;
    let ports = h.get(ihl..ihl + 4).map(|p| {
        (
            u16::from_be_bytes([p[0], p[1]]),
            u16::from_be_bytes([p[2], p[3]]),
        )
    });
    class_l4(h[9], ports)
}

/// The class of an IPv6 packet addressed to the router (or to a link-scope group).
pub fn class_ip6(h: &[u8]) -> PuntClass {
    let Ok(p) = packet::ipv6::Packet::new_checked(h) else {
        return PuntClass::Local;
    };
    let Some((proto, off, _)) = p.transport() else {
        return PuntClass::Local;
    };
    if proto == 58 {
        return match h.get(off) {
            // Router and neighbour discovery, redirects.
            Some(133..=137) => PuntClass::Nd,
            // MLD queries, reports and done.
            Some(130..=132 | 143) => PuntClass::IgmpMld,
            _ => PuntClass::Local,
        };
    }
    let ports = h.get(off..off + 4).map(|p| {
        (
            u16::from_be_bytes([p[0], p[1]]),
            u16::from_be_bytes([p[2], p[3]]),
        )
    });
    class_l4(proto, ports)
}

fn class_l4(proto: u8, ports: Option<(u16, u16)>) -> PuntClass {
    let by_port = |list: &[(u16, PuntClass)]| {
        let (s, d) = ports?;
        list.iter()
            .find(|(p, _)| *p == s || *p == d)
            .map(|(_, c)| *c)
    };
    const TCP: &[(u16, PuntClass)] = &[
        (179, PuntClass::Bgp),
        (646, PuntClass::Ldp),
        (2065, PuntClass::Dlsw),
        (2067, PuntClass::Dlsw),
    ];
    const UDP: &[(u16, PuntClass)] = &[
        (646, PuntClass::Ldp),
        (3784, PuntClass::Bfd),
        (3785, PuntClass::Bfd),
        (4784, PuntClass::Bfd),
        (520, PuntClass::Rip),
        (521, PuntClass::Rip),
        (2123, PuntClass::GtpC),
        (2152, PuntClass::GtpU),
    ];
    match proto {
        2 => PuntClass::IgmpMld,
        89 => PuntClass::Ospf,
        103 => PuntClass::Pim,
        112 => PuntClass::Vrrp,
        6 => by_port(TCP).unwrap_or(PuntClass::Local),
        17 => by_port(UDP).unwrap_or(PuntClass::Local),
        _ => PuntClass::Local,
    }
}

/// The class of a non-IP control frame (the Ethernet frame `d`, with `et` its EtherType, or
/// its 802.3 length when at most 1500, after any VLAN tag at `l2`), or None if it is none the
/// router takes.
pub fn class_l2(d: &[u8], et: u16, l2: usize) -> Option<PuntClass> {
    match et {
        0x8809 => Some(PuntClass::Lacp),
        0x88cc => Some(PuntClass::Lldp),
        0..=1500 => {
            // 802.2 LLC: DSAP, SSAP, control.
            let dsap = *d.get(l2)?;
            Some(match dsap {
                0x42 => PuntClass::Bpdu,
                0xfe => PuntClass::Isis,
                _ => PuntClass::Llc,
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_are_classified() {
        let mut v4 = [0u8; 28];
        v4[0] = 0x45;
        v4[9] = 89;
        assert_eq!(class_ip4(&v4), PuntClass::Ospf);
        v4[9] = 6;
        v4[22..24].copy_from_slice(&179u16.to_be_bytes());
        assert_eq!(class_ip4(&v4), PuntClass::Bgp);
        v4[22..24].copy_from_slice(&2065u16.to_be_bytes());
        assert_eq!(class_ip4(&v4), PuntClass::Dlsw);
        v4[22..24].copy_from_slice(&22u16.to_be_bytes());
        assert_eq!(class_ip4(&v4), PuntClass::Local);
        v4[9] = 17;
        v4[20..22].copy_from_slice(&2123u16.to_be_bytes());
        assert_eq!(class_ip4(&v4), PuntClass::GtpC);
        v4[9] = 1;
        assert_eq!(class_ip4(&v4), PuntClass::Local);
        v4[9] = 103;
        assert_eq!(class_ip4(&v4), PuntClass::Pim);
        let mut v6 = [0u8; 48];
        v6[0] = 0x60;
        v6[5] = 8;
        v6[6] = 58;
        v6[40] = 135;
        assert_eq!(class_ip6(&v6), PuntClass::Nd);
        v6[40] = 143;
        assert_eq!(class_ip6(&v6), PuntClass::IgmpMld);
        v6[40] = 128;
        assert_eq!(class_ip6(&v6), PuntClass::Local);
        v6[6] = 89;
        assert_eq!(class_ip6(&v6), PuntClass::Ospf);
        assert_eq!(class_ip6(&v6[..10]), PuntClass::Local);
    }

    #[test]
    fn l2_control_frames_are_classified() {
        let mut f = vec![0u8; 20];
        f[14] = 0x42;
        assert_eq!(class_l2(&f, 38, 14), Some(PuntClass::Bpdu));
        f[14] = 0xfe;
        assert_eq!(class_l2(&f, 38, 14), Some(PuntClass::Isis));
        f[14] = 0x04;
        assert_eq!(class_l2(&f, 38, 14), Some(PuntClass::Llc));
        assert_eq!(class_l2(&f, 0x88cc, 14), Some(PuntClass::Lldp));
        assert_eq!(class_l2(&f, 0x8809, 14), Some(PuntClass::Lacp));
        assert_eq!(class_l2(&f, 0x88b5, 14), None);
        assert_eq!(class_l2(&f[..14], 38, 14), None, "no LLC header");
    }

    #[test]
    fn names_are_unique_and_parse_back() {
        for &c in PuntClass::ALL {
            assert_eq!(PuntClass::parse(c.name()), Some(c));
            let l = c.default_limit();
            assert!(l.rate > 0 && l.burst > 0 && l.burst <= l.rate);
        }
    }
}
