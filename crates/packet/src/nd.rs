//! IPv6 neighbour discovery (RFC 4861): neighbour solicitations and advertisements with their
//! link-layer address options, and the addresses ND uses (solicited-node groups, EUI-64
//! link-local addresses). Router solicitations and advertisements pass through to the kernel
//! untouched, so they have no parser here.

use crate::ethernet::MacAddr;
use crate::{checksum, Error, Result};

pub const NEIGHBOR_SOLICIT: u8 = 135;
pub const NEIGHBOR_ADVERT: u8 = 136;
const OPT_SOURCE_LL: u8 = 1;
const OPT_TARGET_LL: u8 = 2;
/// NA flags: sent by a router, solicited, override.
pub const FLAG_ROUTER: u32 = 0x8000_0000;
pub const FLAG_SOLICITED: u32 = 0x4000_0000;
pub const FLAG_OVERRIDE: u32 = 0x2000_0000;

/// A solicitation or advertisement, parsed from its ICMPv6 message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub msg_type: u8,
    /// NA flags (router, solicited, override); 0 for a solicitation.
    pub flags: u32,
    pub target: [u8; 16],
    /// The source (NS) or target (NA) link-layer address option, if present.
    pub lladdr: Option<MacAddr>,
}

impl Repr {
    /// Parses the ICMPv6 message `icmp` sent from `src` to `dst` with `hop_limit`. RFC 4861 7.1.1
    /// and 7.1.2: hop limit 255 (it never crossed a router), a correct checksum, code 0, options
    /// of nonzero length.
    pub fn parse(icmp: &[u8], src: &[u8; 16], dst: &[u8; 16], hop_limit: u8) -> Result<Repr> {
        if icmp.len() < 24 {
            return Err(Error::Truncated);
        }
        let msg_type = icmp[0];
        if !matches!(msg_type, NEIGHBOR_SOLICIT | NEIGHBOR_ADVERT) || icmp[1] != 0 {
            return Err(Error::Malformed);
        }
        if hop_limit != 255 {
            return Err(Error::Malformed);
        }
        let pseudo = checksum::pseudo_v6(src, dst, 58, icmp.len() as u32);
        if checksum::fold(checksum::combine(pseudo, checksum::sum(icmp))) != 0 {
            return Err(Error::Malformed);
        }
        let flags = if msg_type == NEIGHBOR_ADVERT {
            u32::from_be_bytes(icmp[4..8].try_into().expect("4 bytes"))
        } else {
            0
        };
        let target: [u8; 16] = icmp[8..24].try_into().expect("16 bytes");
        if target[0] == 0xff {
            return Err(Error::Malformed);
        }
        let want = if msg_type == NEIGHBOR_SOLICIT {
            OPT_SOURCE_LL
        } else {
            OPT_TARGET_LL
        };
        let mut lladdr = None;
        let mut opts = &icmp[24..];
        while opts.len() >= 2 {
            let len = opts[1] as usize * 8;
            if len == 0 || len > opts.len() {
                return Err(Error::Malformed);
            }
            if opts[0] == want && len >= 8 {
                lladdr = Some(MacAddr(opts[2..8].try_into().expect("6 bytes")));
            }
            opts = &opts[len..];
        }
        Ok(Repr {
            msg_type,
            flags,
            target,
            lladdr,
        })
    }

    /// The message's length with its link-layer option.
    pub fn len(&self) -> usize {
        24 + if self.lladdr.is_some() { 8 } else { 0 }
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the message into `out[..self.len()]` with the checksum for `src` -> `dst`.
    pub fn emit(&self, out: &mut [u8], src: &[u8; 16], dst: &[u8; 16]) {
        let n = self.len();
        let out = &mut out[..n];
        out.fill(0);
        out[0] = self.msg_type;
        out[4..8].copy_from_slice(&self.flags.to_be_bytes());
        out[8..24].copy_from_slice(&self.target);
        if let Some(mac) = self.lladdr {
            out[24] = if self.msg_type == NEIGHBOR_SOLICIT {
                OPT_SOURCE_LL
            } else {
                OPT_TARGET_LL
            };
            out[25] = 1;
            out[26..32].copy_from_slice(&mac.0);
        }
        let pseudo = checksum::pseudo_v6(src, dst, 58, n as u32);
        let c = checksum::fold(checksum::combine(pseudo, checksum::sum(out)));
        out[2..4].copy_from_slice(&c.to_be_bytes());
    }
}

/// The solicited-node multicast group of `addr` (RFC 4291 2.7.1): ff02::1:ffXX:XXXX.
pub fn solicited_node(addr: &[u8; 16]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0] = 0xff;
    g[1] = 0x02;
    g[11] = 0x01;
    g[12] = 0xff;
    g[13..16].copy_from_slice(&addr[13..16]);
    g
}

/// The Ethernet group an IPv6 multicast address maps to (RFC 2464 7): 33:33 and its last four
/// bytes.
pub fn multicast_mac(group: &[u8; 16]) -> MacAddr {
    MacAddr([0x33, 0x33, group[12], group[13], group[14], group[15]])
}

/// The EUI-64 link-local address of an interface with `mac` (RFC 4291 appendix A): what the
/// kernel gives a TAP twin with the same MAC address.
pub fn link_local(mac: MacAddr) -> [u8; 16] {
    let m = mac.0;
    let mut a = [0u8; 16];
    a[0] = 0xfe;
    a[1] = 0x80;
    a[8] = m[0] ^ 0x02;
    a[9] = m[1];
    a[10] = m[2];
    a[11] = 0xff;
    a[12] = 0xfe;
    a[13] = m[3];
    a[14] = m[4];
    a[15] = m[5];
    a
}

/// A whole neighbour discovery frame: `eth` (EtherType set to IPv6's), an IPv6 header from
/// `src` to `dst` with hop limit 255 (RFC 4861 7.1.1), then `m`. The one builder the control
/// plane's neighbour code and the tester share.
pub fn frame(eth: crate::ethernet::Header, src: &[u8; 16], dst: &[u8; 16], m: &Repr) -> Vec<u8> {
    let eth = crate::ethernet::Header {
        ethertype: 0x86dd,
        ..eth
    };
    let n = m.len();
    let mut f = Vec::with_capacity(eth.len() + 40 + n);
    eth.push_to(&mut f);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(n as u16).to_be_bytes());
    f.push(58);
    f.push(255);
    f.extend_from_slice(src);
    f.extend_from_slice(dst);
    let at = f.len();
    f.resize(at + n, 0);
    m.emit(&mut f[at..], src, dst);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solicitation_round_trip_and_checks() {
        let mac = MacAddr([2, 0, 0, 0, 0, 1]);
        let src = link_local(mac);
        let target: [u8; 16] = "2001:db8::2"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets();
        let dst = solicited_node(&target);
        assert_eq!(std::net::Ipv6Addr::from(dst).to_string(), "ff02::1:ff00:2");
        assert_eq!(multicast_mac(&dst).0, [0x33, 0x33, 0xff, 0, 0, 2]);
        assert_eq!(std::net::Ipv6Addr::from(src).to_string(), "fe80::ff:fe00:1");
        let r = Repr {
            msg_type: NEIGHBOR_SOLICIT,
            flags: 0,
            target,
            lladdr: Some(mac),
        };
        let mut b = [0u8; 32];
        r.emit(&mut b, &src, &dst);
        assert_eq!(Repr::parse(&b, &src, &dst, 255), Ok(r));
        assert_eq!(Repr::parse(&b, &src, &dst, 64), Err(Error::Malformed));
        assert_eq!(Repr::parse(&b, &dst, &dst, 255), Err(Error::Malformed));
        assert_eq!(
            Repr::parse(&b[..20], &src, &dst, 255),
            Err(Error::Truncated)
        );
        // An option of length zero would loop forever: rejected.
        let mut z = b;
        z[25] = 0;
        assert!(Repr::parse(&z, &src, &dst, 255).is_err());
    }
}
